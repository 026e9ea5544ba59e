//! Crash-recovery tests: a log is written (plain and idempotent-producer batches over
//! several segments and leader epochs), flushed and abandoned without a clean close;
//! then its files are damaged the way a crash or a bad disk leaves them and the log is
//! reopened. Recovery must keep every intact batch byte for byte, serve nothing
//! invalid, end exactly after the last intact batch, restore producer state and the
//! leader-epoch cache to match, and keep working (appends, another reopen).
//!
//! Every case is driven by a seeded xorshift generator, so runs are deterministic.

mod common;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::*;
use dataplane::log::{AppendKind, LogConfig, PartitionLog};
use dataplane::types::{LeaderEpoch, Offset};
use dataplane::wire::batch::{layout, stamp_offset_and_epoch};

const ITERATIONS: u64 = 50;
const PIDS: [i64; 2] = [1001, 1002];

/// xorshift64*: small, deterministic, good enough to pick cases.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, n).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

fn crash_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        ..small_config()
    }
}

/// A batch as written, with what the producer used for it.
#[derive(Debug, Clone)]
struct Written {
    base: i64,
    last: i64,
    epoch: i32,
    bytes: Bytes,
    /// (producer id, base sequence, record count) of an idempotent batch.
    producer: Option<(i64, i32, i32)>,
}

impl Written {
    fn next(&self) -> i64 {
        self.last + 1
    }
}

/// The state of a written log plus what the test needs to continue it.
#[derive(Debug)]
struct Built {
    batches: Vec<Written>,
    segment_bases: Vec<i64>,
    epoch: i32,
    next_seq: [i32; 2],
    now: i64,
}

fn partition_dir(root: &Path) -> PathBuf {
    root.join(tp().dir_name())
}

fn segment_file(root: &Path, base: i64, suffix: &str) -> PathBuf {
    partition_dir(root).join(format!("{base:020}{suffix}"))
}

async fn append(
    log: &mut PartitionLog,
    b: &mut Built,
    data: Bytes,
    producer: Option<(i64, i32, i32)>,
) {
    let info = log
        .append_as_leader(
            data.clone(),
            LeaderEpoch(b.epoch),
            AppendKind::Client,
            b.now,
        )
        .await
        .expect("append");
    assert!(!info.duplicate, "fresh batch taken for a duplicate");
    let base = b.batches.last().map_or(0, Written::next);
    assert_eq!(
        info.first_offset,
        Offset(base),
        "append continues at the log end"
    );
    let mut stored = data.to_vec();
    stamp_offset_and_epoch(&mut stored, Offset(base), LeaderEpoch(b.epoch));
    b.batches.push(Written {
        base,
        last: info.last_offset.0,
        epoch: b.epoch,
        bytes: Bytes::from(stored),
        producer,
    });
    b.now += 1;
}

async fn append_random(log: &mut PartitionLog, b: &mut Built, rng: &mut Rng) {
    if rng.chance(8) {
        b.epoch += 1;
    }
    let records = 1 + rng.below(5) as i32;
    if rng.chance(3) {
        let p = rng.below(2) as usize;
        let seq = b.next_seq[p];
        b.next_seq[p] += records;
        let data = producer_batch(PIDS[p], 0, seq, records, false);
        append(log, b, data, Some((PIDS[p], seq, records))).await;
    } else {
        let data = batch(records, rng.below(300) as usize, 1_000 + b.now);
        append(log, b, data, None).await;
    }
}

/// Writes 20..50 random batches, flushes, and abandons the log (no clean close).
async fn build(root: &Path, rng: &mut Rng) -> Built {
    let mut log = open(root, crash_config()).await;
    let mut b = Built {
        batches: Vec::new(),
        segment_bases: Vec::new(),
        epoch: 0,
        next_seq: [0; 2],
        now: 1,
    };
    let n = 20 + rng.below(31);
    for _ in 0..n {
        append_random(&mut log, &mut b, rng).await;
    }
    log.flush(b.now).await.expect("flush");
    b.segment_bases = log.segment_base_offsets().iter().map(|o| o.0).collect();
    assert!(
        b.segment_bases.len() >= 2,
        "the test wants several segments"
    );
    check_log(&log, &b.batches, "before the crash").await;
    drop(log);
    b
}

/// The leader-epoch cache Kafka derives from these batches: (epoch, start offset).
fn epochs_of(batches: &[Written]) -> Vec<(i32, i64)> {
    let mut out: Vec<(i32, i64)> = Vec::new();
    for w in batches {
        if out.last().is_none_or(|&(e, _)| e != w.epoch) {
            out.push((w.epoch, w.base));
        }
    }
    out
}

/// Everything a recovered log must agree on with the batches that should survive.
async fn check_log(log: &PartitionLog, expected: &[Written], ctx: &str) {
    let end = expected.last().map_or(0, Written::next);
    assert_eq!(log.log_start_offset(), Offset(0), "{ctx}: log start");
    assert_eq!(log.log_end_offset(), Offset(end), "{ctx}: log end");
    // read_all checks every CRC; offsets must also run without gaps from 0.
    let stored = read_all(log, Offset(0)).await;
    let mut next = 0;
    for b in &stored {
        assert_eq!(
            b.base_offset(),
            Offset(next),
            "{ctx}: offsets not contiguous"
        );
        next = b.next_offset().0;
    }
    assert_eq!(
        stored.len(),
        expected.len(),
        "{ctx}: batch count (log end {end})"
    );
    for (s, e) in stored.iter().zip(expected) {
        assert_eq!(s.as_bytes(), &e.bytes, "{ctx}: batch at {} differs", e.base);
    }
    let entries: Vec<(i32, i64)> = log
        .epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch.0, e.start_offset.0))
        .collect();
    let want = epochs_of(expected);
    assert_eq!(entries, want, "{ctx}: leader epoch cache");
    let max_epoch = want.last().map_or(0, |&(e, _)| e);
    for e in 0..=max_epoch + 1 {
        let want_end = match want.iter().position(|&(x, _)| x > e) {
            _ if want.last().is_some_and(|&(x, _)| x == e) => (e, end),
            None => (-1, -1),
            Some(0) => (e, want[0].1),
            Some(i) => (want[i - 1].0, want[i].1),
        };
        let (epoch, off) = log.end_offset_for_epoch(LeaderEpoch(e));
        assert_eq!(
            (epoch.0, off.0),
            want_end,
            "{ctx}: end offset for epoch {e}"
        );
    }
}

/// After recovery: producer state must match the surviving batches (a retry of each
/// producer's last surviving batch is a duplicate; its next sequence is accepted),
/// appends continue at the log end, and all of it survives another reopen.
async fn continue_and_reopen(
    root: &Path,
    mut log: PartitionLog,
    b: &mut Built,
    rng: &mut Rng,
    ctx: &str,
) {
    for (p, &pid) in PIDS.iter().enumerate() {
        let last = b
            .batches
            .iter()
            .rev()
            .find_map(|w| w.producer.filter(|&(id, _, _)| id == pid).map(|x| (w, x)));
        let next_seq = match last {
            Some((w, (_, seq, records))) => {
                let retry = producer_batch(pid, 0, seq, records, false);
                let info = log
                    .append_as_leader(retry, LeaderEpoch(b.epoch), AppendKind::Client, b.now)
                    .await
                    .expect("retry");
                assert!(
                    info.duplicate,
                    "{ctx}: retry of producer {pid} seq {seq} not seen as a duplicate"
                );
                assert_eq!(
                    info.first_offset,
                    Offset(w.base),
                    "{ctx}: duplicate's offset"
                );
                seq + records
            }
            None => 0,
        };
        b.next_seq[p] = next_seq;
        let data = producer_batch(pid, 0, next_seq, 2, false);
        b.next_seq[p] += 2;
        append(&mut log, b, data, Some((pid, next_seq, 2))).await;
    }
    for _ in 0..3 {
        append_random(&mut log, b, rng).await;
    }
    check_log(&log, &b.batches, &format!("{ctx}, after appending")).await;
    let clean = rng.chance(2);
    if clean {
        log.close(b.now).await.expect("close");
    } else {
        drop(log);
    }
    let log = open(root, crash_config()).await;
    check_log(
        &log,
        &b.batches,
        &format!("{ctx}, after another reopen (clean: {clean})"),
    )
    .await;
    log.close(b.now).await.expect("close");
}

/// The batches of the last segment with their positions in its file.
fn last_segment_layout(b: &Built) -> (i64, Vec<(usize, u64)>) {
    let last_base = *b.segment_bases.last().expect("segments");
    let mut pos = 0u64;
    let mut out = Vec::new();
    for (i, w) in b.batches.iter().enumerate() {
        if w.base >= last_base {
            out.push((i, pos));
            pos += w.bytes.len() as u64;
        }
    }
    (last_base, out)
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .len()
}

/// (a) The last segment torn at a random byte: batches wholly before the cut survive.
#[test]
fn torn_last_segment_keeps_every_whole_batch() {
    for seed in 0..ITERATIONS {
        run(move || async move {
            let mut rng = Rng::new(seed);
            let dir = tempfile::tempdir().expect("tempdir");
            let root = dir.path();
            let mut b = build(root, &mut rng).await;
            let (last_base, layout) = last_segment_layout(&b);
            let path = segment_file(root, last_base, ".log");
            let size = file_len(&path);
            let batch_ends: Vec<u64> = layout
                .iter()
                .map(|&(i, pos)| pos + b.batches[i].bytes.len() as u64)
                .collect();
            assert_eq!(
                batch_ends.last().copied(),
                Some(size),
                "seed {seed}: layout"
            );
            // A quarter of the cuts fall exactly on a batch boundary.
            let cut = if rng.chance(4) {
                let k = rng.below(layout.len() as u64 + 1) as usize;
                if k == 0 {
                    0
                } else {
                    batch_ends[k - 1]
                }
            } else {
                rng.below(size + 1)
            };
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(cut))
                .expect("cut the segment");
            let whole = layout
                .iter()
                .zip(&batch_ends)
                .filter(|(_, &end)| end <= cut)
                .count();
            let keep = layout.first().map_or(b.batches.len(), |&(i, _)| i) + whole;
            b.batches.truncate(keep);
            let ctx = format!("seed {seed}: cut at {cut} of {size} (segment {last_base})");
            let log = PartitionLog::open(root, tp(), None, crash_config(), b.now)
                .await
                .unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
            check_log(&log, &b.batches, &ctx).await;
            continue_and_reopen(root, log, &mut b, &mut rng, &ctx).await;
        });
    }
}

/// Positions within a batch whose damage the batch's own checks can see: the length
/// field, magic, CRC and everything the CRC covers. (The base offset and the partition
/// leader epoch lie outside the CRC by design of the format, as in Kafka.)
fn detectable_position(rng: &mut Rng, len: u64) -> u64 {
    loop {
        let p = rng.below(len);
        let base_offset = (layout::BASE_OFFSET as u64)..(layout::BATCH_LENGTH as u64);
        let epoch = (layout::PARTITION_LEADER_EPOCH as u64)..(layout::MAGIC as u64);
        if !base_offset.contains(&p) && !epoch.contains(&p) {
            return p;
        }
    }
}

/// (b) Random bytes flipped in the last few batches of the last segment: recovery cuts
/// at the first damaged batch and serves nothing after it.
#[test]
fn flipped_bytes_in_the_tail_cut_at_the_first_damaged_batch() {
    for seed in 0..ITERATIONS {
        run(move || async move {
            let mut rng = Rng::new(1_000 + seed);
            let dir = tempfile::tempdir().expect("tempdir");
            let root = dir.path();
            let mut b = build(root, &mut rng).await;
            let (last_base, layout) = last_segment_layout(&b);
            let path = segment_file(root, last_base, ".log");
            let mut data = std::fs::read(&path).expect("read segment");
            let tail = layout.len().min(4);
            let mut first_damaged = usize::MAX;
            let mut flips = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let k = layout.len() - 1 - rng.below(tail as u64) as usize;
                let (i, pos) = layout[k];
                let at = pos + detectable_position(&mut rng, b.batches[i].bytes.len() as u64);
                let mask = 1 + rng.below(255) as u8;
                data[at as usize] ^= mask;
                flips.push((at, mask));
                first_damaged = first_damaged.min(i);
            }
            std::fs::write(&path, &data).expect("write damaged segment");
            b.batches.truncate(first_damaged);
            let ctx = format!("seed {seed}: flips {flips:?} in segment {last_base}");
            let log = PartitionLog::open(root, tp(), None, crash_config(), b.now)
                .await
                .unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
            check_log(&log, &b.batches, &ctx).await;
            continue_and_reopen(root, log, &mut b, &mut rng, &ctx).await;
        });
    }
}

/// One way of damaging a metadata file.
fn damage(path: &Path, rng: &mut Rng) -> String {
    let Ok(mut data) = std::fs::read(path) else {
        return format!("{} absent", path.display());
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Single flipped bytes in an index are not here: a plausible wrong entry is not
    // detected (see `plausible_wrong_index_entry_is_not_trusted`).
    match rng.below(4) {
        0 => {
            std::fs::remove_file(path).expect("remove");
            format!("deleted {name}")
        }
        1 if !data.is_empty() => {
            let len = rng.below(data.len() as u64) as usize;
            data.truncate(len);
            std::fs::write(path, &data).expect("write");
            format!("truncated {name} to {len}")
        }
        2 if !data.is_empty() => {
            // Garbage with a leading non-digit, so a text checkpoint cannot parse.
            for x in data.iter_mut() {
                *x = rng.next() as u8;
            }
            data[0] = b'#';
            std::fs::write(path, &data).expect("write");
            format!("garbage in {name}")
        }
        _ => {
            data.extend((0..1 + rng.below(40)).map(|_| rng.next() as u8));
            std::fs::write(path, &data).expect("write");
            format!("junk appended to {name}")
        }
    }
}

/// (c) Damaged or missing indexes, leader-epoch checkpoint and producer snapshots:
/// everything is rebuilt from the `.log` files and nothing is lost.
#[test]
fn damaged_metadata_is_rebuilt_from_the_log() {
    for seed in 0..ITERATIONS {
        run(move || async move {
            let mut rng = Rng::new(2_000 + seed);
            let dir = tempfile::tempdir().expect("tempdir");
            let root = dir.path();
            let mut b = build(root, &mut rng).await;
            if rng.chance(2) {
                // A clean close first: then the damaged files are trusted unless checked.
                let log = open(root, crash_config()).await;
                log.close(b.now).await.expect("close");
            }
            let pdir = partition_dir(root);
            let mut names: Vec<PathBuf> = std::fs::read_dir(&pdir)
                .expect("list")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p.to_string_lossy();
                    n.ends_with(".index")
                        || n.ends_with(".timeindex")
                        || n.ends_with(".snapshot")
                        || n.ends_with("leader-epoch-checkpoint")
                })
                .collect();
            names.sort();
            let mut done = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let path = &names[rng.below(names.len() as u64) as usize];
                done.push(damage(path, &mut rng));
            }
            let ctx = format!("seed {seed}: {done:?}");
            let log = PartitionLog::open(root, tp(), None, crash_config(), b.now)
                .await
                .unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
            check_log(&log, &b.batches, &ctx).await;
            // Reads from every offset (they go through the offset index).
            for w in &b.batches {
                let data = log.read(Offset(w.last), 1).await.expect("read");
                assert_eq!(
                    data.records, w.bytes,
                    "{ctx}: read at {} (batch {})",
                    w.last, w.base
                );
            }
            continue_and_reopen(root, log, &mut b, &mut rng, &ctx).await;
        });
    }
}

/// Library limitation (shared with Kafka, whose index sanity check also looks only at
/// the last entry): an older segment's `.index` entry that still parses and stays
/// monotonic but points at the next batch is trusted, and a read at an offset of the
/// skipped batch serves the following batch instead.
#[test]
fn plausible_wrong_index_entry_is_not_trusted() {
    run(|| async {
        let mut rng = Rng::new(7);
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let b = build(root, &mut rng).await;
        // Find an entry in a non-active segment and move it to the next batch.
        for (s, &base) in b.segment_bases.iter().enumerate().rev().skip(1) {
            let end = b.segment_bases[s + 1];
            let path = segment_file(root, base, ".index");
            let mut index = std::fs::read(&path).expect("read index");
            if index.len() < 8 {
                continue;
            }
            let pos = u32::from_be_bytes([index[4], index[5], index[6], index[7]]);
            let mut at = 0u32;
            let mut batches = b.batches.iter().filter(|w| w.base >= base && w.base < end);
            let Some(target) = batches.find(|w| {
                let here = at;
                at += w.bytes.len() as u32;
                here == pos
            }) else {
                continue;
            };
            let next_pos = pos + target.bytes.len() as u32;
            let limit = if index.len() >= 16 {
                u32::from_be_bytes([index[12], index[13], index[14], index[15]])
            } else {
                at
            };
            if next_pos >= limit {
                continue;
            }
            index[4..8].copy_from_slice(&next_pos.to_be_bytes());
            std::fs::write(&path, &index).expect("write index");
            let log = open(root, crash_config()).await;
            // The entry names the batch's last offset: a read there goes through it.
            let data = log.read(Offset(target.last), 1).await.expect("read");
            assert_eq!(
                data.records, target.bytes,
                "read at {} served another batch",
                target.last
            );
            return;
        }
        panic!("no suitable index entry");
    });
}
