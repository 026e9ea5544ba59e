//! Cleaning one partition, on its shard, in Kafka's steps:
//!
//! 1. [`Snapshot::take`] (log read-locked, no I/O): the cleanable range — from the first
//!    dirty offset (the cleaner checkpoint) to the first uncleanable one (the active
//!    segment, the last stable offset, the high watermark and `min.compaction.lag.ms`) —
//!    with the segments wholly inside it, the aborted transactions, and each active
//!    producer's last batch.
//! 2. The offset map of the dirty segments, read through the cleaner's own file
//!    handles, so the log is not locked while it reads (a segment deleted meanwhile stays
//!    readable; the swap then notices the log changed and gives up).
//! 3. Groups of segments from the log start up to where the map ends are rewritten, each
//!    into one new segment under `cleaning/` (bounded chunks, throttled, with a yield
//!    after each), following [`super::rules`].
//! 4. Each group is swapped in under the write lock (a few renames and two directory
//!    fsyncs): `cleaner-swap` names the group's offset range, the new files become
//!    `.swap`, the old segments are deleted, the `.swap` files take their final names
//!    (`.log` last) and `cleaner-swap` goes. Recovery ([`recover_swap`]) completes a swap
//!    `cleaner-swap` names and deletes anything under `cleaning/`.
//! 5. The cleaner checkpoint moves to where the map ended.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Weak;
use std::time::{Duration, Instant};

use bytes::Bytes;
use glommio::io::BufferedFile;

use super::offset_map::OffsetMap;
use super::rules::{self, CleanContext, TxnTracker, Verdict};
use crate::log::fs::{self, FsResult};
use crate::log::segment::{placement_of, LogSegment};
use crate::log::txn_index::AbortedTxn;
use crate::log::{LogConfig, PartitionLog};
use crate::partition::Partition;
use crate::types::{Offset, ProducerId};
use crate::wire::batch::{frame_size, BatchError};
use crate::wire::RecordBatch;

/// The file naming the offset range of a swap in progress.
pub const SWAP_RANGE_FILE: &str = "cleaner-swap";
/// Where cleaned segments are written before they are swapped in.
pub const CLEANING_DIR: &str = "cleaning";
/// The file holding the first dirty offset (Kafka keeps one `cleaner-offset-checkpoint`
/// per log dir; here it sits in the partition's directory, like the log-start one).
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// How much of a segment one read takes.
const READ_CHUNK: usize = 1 << 20;
/// How many cleaned bytes are buffered before one write.
const WRITE_CHUNK: usize = 1 << 20;
const SUFFIXES: [&str; 4] = [".index", ".timeindex", ".txnindex", ".log"];
/// Within a chunk, the cleaner offers the shard to other tasks every this many batches
/// (decoding and re-encoding a chunk's batches is CPU work).
const YIELD_EVERY_BATCHES: u64 = 32;

/// One segment of the cleanable range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    pub base: Offset,
    pub next: Offset,
    pub size: u64,
    pub path: PathBuf,
    /// The max timestamp of its first batch (when it has one).
    pub first_timestamp: Option<i64>,
}

/// What step 1 takes from the log.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub tp: crate::types::TopicPartition,
    pub dir: PathBuf,
    pub generation: u64,
    pub config: LogConfig,
    pub first_dirty: Offset,
    pub first_uncleanable: Offset,
    /// The segments wholly below `first_uncleanable`, oldest first.
    pub segments: Vec<SegmentInfo>,
    pub aborted: Vec<AbortedTxn>,
    pub last_batch_of_active: HashMap<ProducerId, Offset>,
    pub now_ms: i64,
    /// Whether the two fields above were gathered (only for a log that wants cleaning):
    /// a clean needs them.
    complete: bool,
}

impl Snapshot {
    /// The cleanable range of a compacted log; `None` for a log that is not compacted.
    pub fn take(log: &PartitionLog, now_ms: i64) -> Option<Snapshot> {
        let config = log.config().clone();
        if !config.compact {
            return None;
        }
        let active_base = log.segments.keys().next_back().copied()?;
        let mut uncleanable = active_base
            .min(log.last_stable_offset())
            .min(log.high_watermark());
        let lag_from = now_ms.saturating_sub(config.min_compaction_lag_ms);
        if let Some((base, _)) = log
            .segments
            .iter()
            .find(|(_, s)| s.max_timestamp() > lag_from && config.min_compaction_lag_ms > 0)
        {
            uncleanable = uncleanable.min(*base);
        }
        let start = log.log_start_offset();
        let first_dirty = if log.first_dirty_offset < start || log.first_dirty_offset > uncleanable
        {
            start
        } else {
            log.first_dirty_offset
        };
        // Every segment but the active one up to the first that reaches past the
        // uncleanable offset: a contiguous run from the log start (empty ones included,
        // so that a group never spans a segment it does not replace).
        let segments: Vec<SegmentInfo> = log
            .segments
            .values()
            .take_while(|s| s.base_offset() != active_base && s.next_offset() <= uncleanable)
            .map(|s| SegmentInfo {
                base: s.base_offset(),
                next: s.next_offset(),
                size: s.size(),
                path: s.log_path().to_path_buf(),
                first_timestamp: s.first_batch_timestamp(),
            })
            .collect();
        let mut snap = Snapshot {
            tp: log.topic_partition().clone(),
            dir: log.dir().to_path_buf(),
            generation: log.generation,
            aborted: Vec::new(),
            config,
            first_dirty,
            first_uncleanable: uncleanable,
            segments,
            last_batch_of_active: HashMap::new(),
            now_ms,
            complete: false,
        };
        // What only a clean needs (the transaction indexes' aborted transactions, the
        // active producers): not gathered for the many logs a look leaves alone.
        if snap.wants_cleaning() {
            snap.aborted = log.aborted_transactions(start, uncleanable);
            snap.last_batch_of_active = log
                .producer_state()
                .entries()
                .filter_map(|e| e.batches.back().map(|b| (e.producer_id, b.last_offset)))
                .collect();
            snap.complete = true;
        }
        Some(snap)
    }

    fn is_dirty(&self, s: &SegmentInfo) -> bool {
        s.next > self.first_dirty
    }

    pub fn dirty_bytes(&self) -> u64 {
        self.segments
            .iter()
            .filter(|s| self.is_dirty(s))
            .map(|s| s.size)
            .sum()
    }

    pub fn total_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    /// Dirty bytes over all cleanable bytes (Kafka's `cleanableRatio`).
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.total_bytes();
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes() as f64 / total as f64
        }
    }

    /// `max.compaction.lag.ms`: the oldest dirty record has waited too long.
    pub fn overdue(&self) -> bool {
        let lag = self.config.max_compaction_lag_ms;
        lag < i64::MAX
            && self
                .segments
                .iter()
                .find(|s| self.is_dirty(s))
                .and_then(|s| s.first_timestamp)
                .is_some_and(|t| self.now_ms.saturating_sub(t) > lag)
    }

    /// Whether this log should be cleaned now.
    pub fn wants_cleaning(&self) -> bool {
        self.dirty_bytes() > 0
            && (self.dirty_ratio() >= self.config.min_cleanable_dirty_ratio.as_f64()
                || self.overdue())
    }
}

/// Why a clean stopped.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error(transparent)]
    Io(#[from] fs::FsError),
    #[error("the log changed while it was cleaned (truncation, retention or deletion)")]
    LogChanged,
    #[error("the partition is closed or deleted")]
    Gone,
    #[error("log.cleaner.dedupe.buffer.size is too small for the keys of the batch at offset {0}")]
    MapTooSmall(i64),
    #[error("segment {path} changed under the cleaner at position {position}")]
    Torn { path: PathBuf, position: u64 },
    #[error("opening the cleaned segment: {0}")]
    Log(String),
}

/// What a clean did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub batches_read: u64,
    pub batches_dropped: u64,
    pub batches_rewritten: u64,
    pub groups: usize,
    pub map_entries: usize,
    /// The new first dirty offset.
    pub cleaned_to: Offset,
}

/// Throttles a shard's cleaner I/O (`log.cleaner.io.max.bytes.per.second`).
#[derive(Debug)]
pub struct Throttle {
    bytes_per_second: f64,
    since: Instant,
    bytes: f64,
}

impl Throttle {
    pub fn new(bytes_per_second: f64) -> Throttle {
        Throttle {
            bytes_per_second,
            since: Instant::now(),
            bytes: 0.0,
        }
    }

    /// How long to wait after `bytes` more of I/O to stay under the rate.
    pub fn account(&mut self, bytes: u64) -> Duration {
        if !self.bytes_per_second.is_finite() || self.bytes_per_second <= 0.0 {
            return Duration::ZERO;
        }
        // A fresh window every few seconds, so an idle spell is not credit for a burst.
        if self.since.elapsed() > Duration::from_secs(5) {
            self.since = Instant::now();
            self.bytes = 0.0;
        }
        self.bytes += bytes as f64;
        let due = Duration::from_secs_f64(self.bytes / self.bytes_per_second);
        due.saturating_sub(self.since.elapsed())
    }
}

/// Where a test stops a swap, as a crash there would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapStep {
    /// `cleaner-swap` written, nothing renamed.
    RangeWritten,
    /// The new files are `.swap`.
    SwapFiles,
    /// The old segments are deleted.
    OldDeleted,
    /// The `.swap` files have their final names; `cleaner-swap` is still there.
    Renamed,
}

impl SwapStep {
    fn fail_point(self) -> &'static str {
        match self {
            SwapStep::RangeWritten => "cleaner.swap.after_range",
            SwapStep::SwapFiles => "cleaner.swap.after_swap_files",
            SwapStep::OldDeleted => "cleaner.swap.after_old_deleted",
            SwapStep::Renamed => "cleaner.swap.after_rename",
        }
    }
}

/// How a clean runs.
#[derive(Debug)]
pub struct CleanEnv<'a> {
    /// Bytes the offset map may use.
    pub map_bytes: usize,
    pub throttle: &'a std::cell::RefCell<Throttle>,
    /// Tests: stop the first swap at this step, as a crash would (the log is then left
    /// for the test to drop and reopen).
    pub crash_at: Option<SwapStep>,
}

/// Reads a segment file's batches in order through the cleaner's own handle.
struct SegmentReader {
    file: BufferedFile,
    path: PathBuf,
    size: u64,
    pos: u64,
}

impl SegmentReader {
    async fn open(info: &SegmentInfo) -> FsResult<SegmentReader> {
        let file = BufferedFile::open(&info.path)
            .await
            .map_err(fs::fs_err("open", &info.path))?;
        Ok(SegmentReader {
            file,
            path: info.path.clone(),
            size: info.size,
            pos: 0,
        })
    }

    /// The next whole batches (at least one, unless the segment is done).
    async fn next_batches(&mut self) -> Result<Vec<RecordBatch>, CleanError> {
        if self.pos >= self.size {
            return Ok(Vec::new());
        }
        let torn = |position| CleanError::Torn {
            path: self.path.clone(),
            position,
        };
        let want = ((self.size - self.pos) as usize).min(READ_CHUNK);
        let mut chunk =
            Bytes::from(fs::read_exact_at(&self.file, &self.path, self.pos, want).await?);
        let needed = match frame_size(&chunk, self.pos) {
            Ok(n) => n,
            Err(BatchError::Truncated { needed, .. }) => needed as usize,
            Err(_) => return Err(torn(self.pos)),
        };
        if needed > chunk.len() {
            if self.pos + needed as u64 > self.size {
                return Err(torn(self.pos));
            }
            chunk = Bytes::from(fs::read_exact_at(&self.file, &self.path, self.pos, needed).await?);
        }
        let mut out = Vec::new();
        let mut at = 0usize;
        while at < chunk.len() {
            let abs = self.pos + at as u64;
            let total = match frame_size(&chunk[at..], abs) {
                Ok(t) => t,
                Err(BatchError::Truncated { .. }) if !out.is_empty() => break,
                Err(_) => return Err(torn(abs)),
            };
            let batch =
                RecordBatch::parse(chunk.slice(at..at + total), abs).map_err(|_| torn(abs))?;
            out.push(batch);
            at += total;
        }
        self.pos += at as u64;
        Ok(out)
    }
}

async fn pace(env: &CleanEnv<'_>, bytes: u64) {
    let wait = env.throttle.borrow_mut().account(bytes);
    if wait > Duration::ZERO {
        glommio::timer::sleep(wait).await;
    } else {
        glommio::executor().yield_if_needed().await;
    }
}

/// Step 2: the offset map of the dirty segments and the offset it covers up to.
async fn build_map(
    snap: &Snapshot,
    env: &CleanEnv<'_>,
    stats: &mut CleanStats,
) -> Result<(OffsetMap, Offset), CleanError> {
    let mut map = OffsetMap::new(env.map_bytes);
    // The walk starts at the first dirty offset: an aborted transaction whose marker lies
    // before it is over, and the walk never sees that marker end it. Given to the
    // tracker, it would stay open and make the producer's later, committed transactions
    // look aborted, so their keys (tombstones among them) would be missing from the map.
    let open_then: Vec<_> = snap
        .aborted
        .iter()
        .filter(|t| t.last_offset >= snap.first_dirty)
        .cloned()
        .collect();
    let mut tracker = TxnTracker::new(open_then);
    let mut end = snap.first_dirty;
    for seg in snap.segments.iter().filter(|s| snap.is_dirty(s)) {
        let mut reader = SegmentReader::open(seg).await?;
        loop {
            let batches = reader.next_batches().await?;
            if batches.is_empty() {
                break;
            }
            let mut read = 0u64;
            for (i, b) in batches.iter().enumerate() {
                read += b.size_in_bytes() as u64;
                if (i as u64 + 1).is_multiple_of(YIELD_EVERY_BATCHES) {
                    glommio::executor().yield_if_needed().await;
                }
                if b.next_offset() <= snap.first_dirty {
                    continue;
                }
                match rules::index_batch(b, &mut tracker, &mut map) {
                    Ok(true) => end = b.next_offset(),
                    Ok(false) => {
                        if end <= snap.first_dirty {
                            return Err(CleanError::MapTooSmall(b.base_offset().0));
                        }
                        stats.bytes_read += read;
                        stats.map_entries = map.len();
                        return Ok((map, end));
                    }
                    // Undecodable records stay where they are; they supersede nothing.
                    Err(e) => {
                        tracing::warn!(offset = b.base_offset().0, error = %e, "cleaner skips a batch it cannot decode");
                        end = b.next_offset();
                    }
                }
            }
            stats.bytes_read += read;
            pace(env, read).await;
        }
        end = end.max(seg.next);
    }
    stats.map_entries = map.len();
    Ok((map, end.min(snap.first_uncleanable)))
}

/// Consecutive segments that fit one new segment (Kafka's `groupSegmentsBySize`).
fn groups(segments: &[SegmentInfo], max_bytes: u64) -> Vec<Vec<SegmentInfo>> {
    let mut out: Vec<Vec<SegmentInfo>> = Vec::new();
    for s in segments {
        let fits = out.last().is_some_and(|g| {
            let size: u64 = g.iter().map(|x| x.size).sum();
            size + s.size <= max_bytes && s.next.0 - g[0].base.0 - 1 <= i64::from(i32::MAX)
        });
        match out.last_mut() {
            Some(g) if fits => g.push(s.clone()),
            _ => out.push(vec![s.clone()]),
        }
    }
    out
}

/// Cleans the partition as `snap` saw it. Returns what it did; `Ok(None)` when there was
/// nothing to do (no dirty bytes, or a log that did not want cleaning when `snap` was
/// taken).
pub async fn clean(
    partition: &Weak<Partition>,
    snap: Snapshot,
    env: &CleanEnv<'_>,
) -> Result<Option<CleanStats>, CleanError> {
    if snap.dirty_bytes() == 0 || !snap.complete {
        return Ok(None);
    }
    let mut stats = CleanStats::default();
    let (map, map_end) = build_map(&snap, env, &mut stats).await?;
    let cx = CleanContext {
        map: &map,
        map_end: map_end.0,
        now_ms: snap.now_ms,
        delete_retention_ms: snap.config.delete_retention_ms,
        last_batch_of_active: &snap.last_batch_of_active,
    };
    let cleaning = snap.dir.join(CLEANING_DIR);
    let _ = fs::remove_dir_all(&cleaning).await;
    fs::create_dir_all(&cleaning).await?;
    let mut tracker = TxnTracker::new(snap.aborted.clone());
    let to_clean: Vec<SegmentInfo> = snap
        .segments
        .iter()
        .filter(|s| s.base < map_end)
        .cloned()
        .collect();
    let mut crash_at = env.crash_at;
    for group in groups(&to_clean, snap.config.segment_bytes) {
        let base = group[0].base;
        let mut out = LogSegment::create(
            &cleaning,
            base,
            snap.config.index_interval_bytes,
            false,
            snap.now_ms,
        )
        .await?;
        for seg in &group {
            copy_cleaned(seg, &mut out, &mut tracker, &cx, env, &mut stats).await?;
        }
        out.seal();
        out.flush(true).await?;
        stats.bytes_written += out.size();
        out.close().await?;
        stats.groups += 1;
        let swapped = swap_in(partition, &snap, &group, crash_at.take()).await;
        if let Err(e) = swapped {
            let _ = fs::remove_dir_all(&cleaning).await;
            return Err(e);
        }
        if env.crash_at.is_some() {
            // A test's crash: leave everything as it is.
            return Ok(Some(stats));
        }
    }
    let _ = fs::remove_dir_all(&cleaning).await;
    stats.cleaned_to = map_end;
    let p = partition.upgrade().ok_or(CleanError::Gone)?;
    {
        let mut log = p.write().await.map_err(|_| CleanError::Gone)?;
        if log.generation == snap.generation {
            log.first_dirty_offset = map_end;
            log.last_clean_ms = snap.now_ms;
        }
    }
    // Kafka's checkpoint format: version, entry count, then `topic partition offset`.
    let text = format!(
        "0\n1\n{} {} {}\n",
        snap.tp.topic, snap.tp.partition, map_end.0
    );
    drop(p);
    fs::write_atomic(&snap.dir.join(CHECKPOINT_FILE), text.into_bytes()).await?;
    Ok(Some(stats))
}

/// Step 3 for one source segment: its batches, judged, into `out`.
async fn copy_cleaned(
    seg: &SegmentInfo,
    out: &mut LogSegment,
    tracker: &mut TxnTracker,
    cx: &CleanContext<'_>,
    env: &CleanEnv<'_>,
    stats: &mut CleanStats,
) -> Result<(), CleanError> {
    let mut reader = SegmentReader::open(seg).await?;
    loop {
        let batches = reader.next_batches().await?;
        if batches.is_empty() {
            return Ok(());
        }
        let mut buf: Vec<u8> = Vec::with_capacity(WRITE_CHUNK);
        let mut placements = Vec::new();
        let mut read = 0u64;
        for b in batches {
            read += b.size_in_bytes() as u64;
            stats.batches_read += 1;
            if stats.batches_read.is_multiple_of(YIELD_EVERY_BATCHES) {
                glommio::executor().yield_if_needed().await;
            }
            let (verdict, index_entry) = match rules::judge(&b, tracker, cx) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(offset = b.base_offset().0, error = %e, "cleaner keeps a batch it cannot decode");
                    (Verdict::Keep, None)
                }
            };
            if let Some(txn) = index_entry {
                out.append_aborted_txn(txn);
            }
            let kept: Bytes = match verdict {
                Verdict::Keep => b.into_bytes(),
                Verdict::Drop => {
                    stats.batches_dropped += 1;
                    continue;
                }
                Verdict::Rewrite(bytes) => {
                    stats.batches_rewritten += 1;
                    bytes
                }
            };
            let Ok(batch) = RecordBatch::parse(kept.clone(), out.size() + buf.len() as u64) else {
                continue;
            };
            placements.push(placement_of(&batch));
            buf.extend_from_slice(&kept);
        }
        let written = buf.len() as u64;
        if !placements.is_empty() {
            out.append(std::borrow::Cow::Owned(buf), &placements)
                .await?;
        }
        stats.bytes_read += read;
        pace(env, read + written).await;
    }
}

/// Step 4: swaps the cleaned segment of `group` in, unless the log changed since the
/// snapshot. The cleaned files are under `cleaning/`.
async fn swap_in(
    partition: &Weak<Partition>,
    snap: &Snapshot,
    group: &[SegmentInfo],
    crash_at: Option<SwapStep>,
) -> Result<(), CleanError> {
    let p = partition.upgrade().ok_or(CleanError::Gone)?;
    let mut log = p.write().await.map_err(|_| CleanError::Gone)?;
    let active = log.segments.keys().next_back().copied();
    let unchanged = log.generation == snap.generation
        && group.iter().all(|s| {
            Some(s.base) != active
                && log
                    .segments
                    .get(&s.base)
                    .is_some_and(|seg| seg.next_offset() == s.next && seg.size() == s.size)
        });
    if !unchanged {
        return Err(CleanError::LogChanged);
    }
    let dir = snap.dir.clone();
    let base = group[0].base;
    let next = group[group.len() - 1].next;
    let stop = |step: SwapStep| crash_at == Some(step);
    fs::write_atomic(
        &dir.join(SWAP_RANGE_FILE),
        format!("{} {}\n", base.0, next.0).into_bytes(),
    )
    .await?;
    crate::failpoint::fail_point(SwapStep::RangeWritten.fail_point()).await;
    if stop(SwapStep::RangeWritten) {
        return Ok(());
    }
    let cleaning = dir.join(CLEANING_DIR);
    for suffix in SUFFIXES {
        let from = LogSegment::path_for(&cleaning, base, suffix);
        if fs::exists(&from).await {
            rename(&from, &swap_path(&dir, base, suffix)).await?;
        }
    }
    fs::sync_dir(&dir).await?;
    crate::failpoint::fail_point(SwapStep::SwapFiles.fail_point()).await;
    if stop(SwapStep::SwapFiles) {
        return Ok(());
    }
    for s in group {
        if let Some(old) = log.segments.remove(&s.base) {
            old.delete().await?;
        }
    }
    crate::failpoint::fail_point(SwapStep::OldDeleted.fail_point()).await;
    if stop(SwapStep::OldDeleted) {
        return Ok(());
    }
    finish_renames(&dir, base).await?;
    fs::sync_dir(&dir).await?;
    crate::failpoint::fail_point(SwapStep::Renamed.fail_point()).await;
    if stop(SwapStep::Renamed) {
        return Ok(());
    }
    fs::remove_file(&dir.join(SWAP_RANGE_FILE)).await?;
    let seg = open_segment(&dir, base, &log.config).await?;
    log.segments.insert(base, seg);
    Ok(())
}

fn swap_path(dir: &Path, base: Offset, suffix: &str) -> PathBuf {
    LogSegment::path_for(dir, base, &format!("{suffix}.swap"))
}

async fn rename(from: &Path, to: &Path) -> FsResult<()> {
    glommio::io::rename(from, to)
        .await
        .map_err(fs::fs_err("rename", from))
}

/// Gives the `.swap` files of `base` their final names, the `.log` last (while it is
/// `.swap`, recovery knows the swap is unfinished).
async fn finish_renames(dir: &Path, base: Offset) -> FsResult<()> {
    for suffix in SUFFIXES {
        let from = swap_path(dir, base, suffix);
        if fs::exists(&from).await {
            rename(&from, &LogSegment::path_for(dir, base, suffix)).await?;
        }
    }
    Ok(())
}

/// Opens a swapped-in segment, its indexes checked (rebuilt when they do not fit).
async fn open_segment(
    dir: &Path,
    base: Offset,
    config: &LogConfig,
) -> Result<LogSegment, CleanError> {
    let mut seg = LogSegment::open(
        dir,
        base,
        config.index_interval_bytes,
        config.direct_io,
        crate::shard::now_ms(),
    )
    .await?;
    if !seg.load_indexes().await? {
        if let Some(cut) = seg.recover(|_| Vec::new()).await? {
            return Err(CleanError::Log(format!(
                "cleaned segment {} does not scan: {}",
                seg.log_path().display(),
                cut.reason
            )));
        }
        seg.reload_txn_index().await?;
    }
    seg.seal();
    Ok(seg)
}

/// Recovery at open: finishes a swap that `cleaner-swap` names (deleting the old
/// segments of its range and renaming the `.swap` files), drops leftover `.swap` files
/// of no swap, and removes `cleaning/`. Returns whether it changed anything.
pub async fn recover_swap(dir: &Path, names: &[String]) -> FsResult<bool> {
    let mut changed = false;
    if names.iter().any(|n| n == CLEANING_DIR) {
        fs::remove_dir_all(&dir.join(CLEANING_DIR)).await?;
        changed = true;
    }
    let swaps: Vec<&String> = names.iter().filter(|n| n.ends_with(".swap")).collect();
    let range = match fs::read_all(&dir.join(SWAP_RANGE_FILE)).await? {
        Some(raw) => parse_range(&String::from_utf8_lossy(&raw)),
        None => None,
    };
    match range {
        Some((base, next)) => {
            let log_swap = swap_path(dir, base, ".log");
            if fs::exists(&log_swap).await {
                // Unfinished: the old segments of the range go (those still there).
                for name in names {
                    let old = SUFFIXES.iter().find_map(|suffix| {
                        name.strip_suffix(suffix)
                            .and_then(|b| b.parse::<i64>().ok())
                            .filter(|b| (base.0..next.0).contains(b))
                    });
                    if old.is_some() {
                        fs::remove_file(&dir.join(name)).await?;
                    }
                }
            }
            finish_renames(dir, base).await?;
            tracing::warn!(dir = %dir.display(), base = base.0, next = next.0, "finished an interrupted cleaner swap");
            changed = true;
        }
        None => {
            for name in swaps {
                fs::remove_file(&dir.join(name)).await?;
                changed = true;
            }
        }
    }
    if changed {
        fs::remove_file(&dir.join(SWAP_RANGE_FILE)).await?;
        fs::sync_dir(dir).await?;
    }
    Ok(changed)
}

fn parse_range(text: &str) -> Option<(Offset, Offset)> {
    let mut it = text.split_whitespace().map(|v| v.parse::<i64>().ok());
    match (it.next().flatten(), it.next().flatten()) {
        (Some(a), Some(b)) if a < b => Some((Offset(a), Offset(b))),
        _ => None,
    }
}

/// The first dirty offset stored in `cleaner-offset-checkpoint`, if any.
pub async fn read_checkpoint(dir: &Path) -> FsResult<Option<Offset>> {
    let Some(raw) = fs::read_all(&dir.join(CHECKPOINT_FILE)).await? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&raw);
    Ok(text
        .lines()
        .nth(2)
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|o| o.trim().parse::<i64>().ok())
        .map(Offset))
}
