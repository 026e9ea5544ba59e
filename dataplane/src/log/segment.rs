//! One log segment: `<base>.log` plus its derived `.index`, `.timeindex` and `.txnindex`.
//!
//! The `.log` file holds record batches exactly as appended. The indexes are kept in
//! memory and written to their files at flush, roll and close; after a crash they are
//! checked on load and rebuilt from the `.log` when they do not agree with it.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};

use crate::log::fs::{self, fs_err, FsResult};
use crate::log::index::{OffsetIndex, TimeIndex};
use crate::log::txn_index::{AbortedTxn, TransactionIndex};
use crate::types::{LeaderEpoch, Offset};
use crate::wire::batch::{frame_size, layout, BatchError, RecordBatch};

/// Size of the chunks read while scanning batch headers.
const SCAN_CHUNK_BYTES: usize = 1 << 20;
/// Direct-I/O writes start and end on multiples of this (or of the device's logical block
/// size when larger): a page, so a write never shares a page with cached reads partially.
const DIRECT_IO_MIN_ALIGN: u64 = 4096;
/// Zero bytes after the last batch shorter than this are the padding of a direct-I/O
/// write that a crash left behind, not a torn batch.
const DIRECT_IO_MAX_PADDING: u64 = 64 << 10;

/// Whether `tail`, the bytes after a segment's last batch up to the end of a file of
/// `file_len` bytes, is the zero padding of a direct-I/O append (`log.direct.io`), which
/// an fsync or recovery cuts off, rather than a torn batch: a short run of zeros ending
/// on a block boundary.
pub fn is_direct_io_padding(tail: &[u8], file_len: u64) -> bool {
    file_len.is_multiple_of(DIRECT_IO_MIN_ALIGN)
        && (tail.len() as u64) < DIRECT_IO_MAX_PADDING
        && tail.iter().all(|&b| b == 0)
}

/// File name of a segment file: the base offset in 20 digits plus the suffix.
pub fn file_name(base_offset: Offset, suffix: &str) -> String {
    format!("{:020}{suffix}", base_offset.0)
}

/// Where one appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPlacement {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub max_timestamp: i64,
    pub epoch: LeaderEpoch,
    pub size: u32,
}

/// Whole batches read for a Fetch: where they start, the first one's base offset, and
/// their bytes.
#[derive(Debug)]
struct FoundRecords {
    position: u64,
    first_base_offset: Offset,
    records: Bytes,
}

/// How a scan of the `.log` file ended.
#[derive(Debug)]
pub struct ScanEnd {
    /// Position just after the last valid batch visited.
    pub valid_end: u64,
    /// The problem that stopped the scan early, if any.
    pub error: Option<BatchError>,
}

/// The `.log` appender of `log.direct.io`: writes go from an aligned buffer straight to
/// the device (`O_DIRECT`), skipping the page cache's copy and io_uring's worker threads.
///
/// O_DIRECT writes whole aligned blocks, so each append rewrites the segment's last
/// partial block (`tail`) followed by the new bytes, padded with zeros to the next block;
/// the file is cut back to the segment's size at every fsync (roll, close, flush), and
/// recovery drops the padding a crash leaves behind. Reads keep using the buffered file:
/// the kernel drops cached pages a direct write covers, so they stay coherent.
struct DirectAppender {
    file: DmaFile,
    align: u64,
    /// The segment's bytes from its last aligned position to its end; `None` until read
    /// back from the file (after opening or truncating).
    tail: Option<Vec<u8>>,
    /// The file extends past the segment's end with zero padding.
    padded: bool,
}

impl std::fmt::Debug for DirectAppender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectAppender")
            .field("align", &self.align)
            .field("tail", &self.tail.as_ref().map(Vec::len))
            .field("padded", &self.padded)
            .finish()
    }
}

impl DirectAppender {
    async fn open(path: &Path) -> FsResult<DirectAppender> {
        let file = OpenOptions::new()
            .write(true)
            .dma_open(path)
            .await
            .map_err(fs_err("open (O_DIRECT)", path))?;
        let align = file.alignment().max(DIRECT_IO_MIN_ALIGN);
        Ok(DirectAppender {
            file,
            align,
            tail: None,
            padded: false,
        })
    }

    /// Writes `data` at `position` (the segment's end) with O_DIRECT: the partial block
    /// before it, `data`, then zeros up to the next aligned position. `log` is the
    /// segment's buffered file, for reading the partial block back when it is not known.
    async fn append(
        &mut self,
        log: &BufferedFile,
        path: &Path,
        data: &[u8],
        position: u64,
    ) -> FsResult<()> {
        let from = position / self.align * self.align;
        let tail = match self.tail.take() {
            Some(tail) => {
                debug_assert_eq!(tail.len() as u64, position - from);
                tail
            }
            None => fs::read_exact_at(log, path, from, (position - from) as usize).await?,
        };
        let used = tail.len() + data.len();
        let padded_len = (used as u64).div_ceil(self.align) * self.align;
        let mut buf = self.file.alloc_dma_buffer(padded_len as usize);
        let bytes = buf.as_bytes_mut();
        bytes[..tail.len()].copy_from_slice(&tail);
        bytes[tail.len()..used].copy_from_slice(data);
        bytes[used..].fill(0);
        let end = position + data.len() as u64;
        let new_tail = bytes[((end / self.align * self.align) - from) as usize..used].to_vec();
        let written = self
            .file
            .write_at(buf, from)
            .await
            .map_err(fs_err("write (O_DIRECT)", path))?;
        if written as u64 != padded_len {
            return Err(fs::FsError {
                op: "write (O_DIRECT)",
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    format!(
                        "short write: {written} of {padded_len} bytes at {from} (device full?)"
                    ),
                ),
            });
        }
        self.tail = Some(new_tail);
        self.padded = padded_len > used as u64;
        Ok(())
    }
}

#[derive(Debug)]
pub struct LogSegment {
    base_offset: Offset,
    dir: PathBuf,
    log_path: PathBuf,
    /// The `.log` file: appends, and reads (what the page cache holds is read without
    /// glommio's extra copy, on the same descriptor: see `fs::read_exact_at_cached`).
    log: BufferedFile,
    /// Set when `.log` appends bypass the page cache (`log.direct.io`).
    direct: Option<DirectAppender>,
    size: u64,
    next_offset: Offset,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    /// Entries of each index already in its file: [offset, time, txn].
    persisted: [usize; 3],
    bytes_since_last_index_entry: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: Offset,
    /// Max timestamp of the first batch, which `segment.ms` counts from (Kafka's
    /// rollingBasedTimestamp); `created_ms` when the segment has no timestamped batch.
    rolling_base_timestamp: Option<i64>,
    created_ms: i64,
    index_interval_bytes: u64,
    dirty: bool,
}

/// Why recovery cut a segment short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryCut {
    /// Where the segment now ends.
    pub position: u64,
    pub bytes_removed: u64,
    pub reason: String,
}

impl LogSegment {
    pub fn path_for(dir: &Path, base_offset: Offset, suffix: &str) -> PathBuf {
        dir.join(file_name(base_offset, suffix))
    }

    /// Creates an empty segment, removing stale files of the same base offset.
    pub async fn create(
        dir: &Path,
        base_offset: Offset,
        index_interval_bytes: u32,
        direct_io: bool,
        now_ms: i64,
    ) -> FsResult<LogSegment> {
        for suffix in [".index", ".timeindex", ".txnindex"] {
            fs::remove_file(&Self::path_for(dir, base_offset, suffix)).await?;
        }
        let mut seg = Self::open(dir, base_offset, index_interval_bytes, direct_io, now_ms).await?;
        seg.log
            .truncate(0)
            .await
            .map_err(fs_err("truncate", &seg.log_path))?;
        seg.size = 0;
        seg.dirty = true;
        Ok(seg)
    }

    /// Opens an existing `.log` (an empty one when absent); indexes are loaded or rebuilt
    /// by the caller.
    pub async fn open(
        dir: &Path,
        base_offset: Offset,
        index_interval_bytes: u32,
        direct_io: bool,
        now_ms: i64,
    ) -> FsResult<LogSegment> {
        let log_path = Self::path_for(dir, base_offset, ".log");
        let log = fs::open_rw(&log_path).await?;
        let size = log.file_size().await.map_err(fs_err("stat", &log_path))?;
        let direct = if direct_io {
            Some(DirectAppender::open(&log_path).await?)
        } else {
            None
        };
        Ok(LogSegment {
            base_offset,
            dir: dir.to_path_buf(),
            log_path,
            log,
            direct,
            size,
            next_offset: base_offset,
            offset_index: OffsetIndex::new(base_offset),
            time_index: TimeIndex::new(base_offset),
            txn_index: TransactionIndex::new(base_offset),
            persisted: [0; 3],
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            rolling_base_timestamp: None,
            created_ms: now_ms,
            index_interval_bytes: u64::from(index_interval_bytes),
            dirty: false,
        })
    }

    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// The offset after the last batch (the base offset when empty).
    pub fn next_offset(&self) -> Offset {
        self.next_offset
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    /// The max timestamp of the first batch with one (what `max.compaction.lag.ms`
    /// counts from, as `segment.ms` does).
    pub fn first_batch_timestamp(&self) -> Option<i64> {
        self.rolling_base_timestamp
    }
    pub fn offset_of_max_timestamp(&self) -> Offset {
        self.offset_of_max_timestamp
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }

    /// True when the first batch is older than `segment_ms` (Kafka's time-based roll).
    pub fn is_older_than(&self, segment_ms: i64, now_ms: i64) -> bool {
        if self.is_empty() {
            return false;
        }
        let base = self.rolling_base_timestamp.unwrap_or(self.created_ms);
        now_ms.saturating_sub(base) > segment_ms
    }

    /// Whether `batch_count_span` more offsets still fit the 32-bit relative offsets.
    pub fn can_hold_offset(&self, last_offset: Offset) -> bool {
        last_offset.0 - self.base_offset.0 <= i64::from(i32::MAX)
    }

    /// Appends the encoded batches in `buf` (offsets already final) and updates the
    /// in-memory indexes. `placements` describes each batch in order.
    ///
    /// Buffered writes need an owned buffer (glommio hands it to the kernel), so a
    /// borrowed `buf` is copied for them; direct writes copy it into an aligned buffer
    /// either way.
    pub async fn append(
        &mut self,
        buf: Cow<'_, [u8]>,
        placements: &[BatchPlacement],
    ) -> FsResult<()> {
        let Some(last) = placements.last() else {
            return Ok(());
        };
        let position = self.size;
        let len = buf.len() as u64;
        let written = match &mut self.direct {
            Some(d) => d.append(&self.log, &self.log_path, &buf, position).await,
            None => fs::write_all_at(&self.log, &self.log_path, buf.into_owned(), position).await,
        };
        if let Err(e) = written {
            // Leave no partial batch behind: the file must end on a batch boundary.
            let _ = self.log.truncate(position).await;
            if let Some(d) = &mut self.direct {
                d.tail = None;
                d.padded = false;
            }
            return Err(e);
        }
        self.track_append(position, len, placements, last.last_offset);
        Ok(())
    }

    /// Cuts the zero padding of the last direct write off the file.
    async fn trim_padding(&mut self) -> FsResult<()> {
        if let Some(d) = self.direct.as_mut().filter(|d| d.padded) {
            self.log
                .truncate(self.size)
                .await
                .map_err(fs_err("truncate", &self.log_path))?;
            d.padded = false;
        }
        Ok(())
    }

    fn track_append(
        &mut self,
        position: u64,
        len: u64,
        placements: &[BatchPlacement],
        last: Offset,
    ) {
        assert!(
            placements[0].base_offset >= self.next_offset,
            "append at {} below segment end {}",
            placements[0].base_offset,
            self.next_offset
        );
        for p in placements {
            if self.rolling_base_timestamp.is_none() && p.max_timestamp >= 0 {
                self.rolling_base_timestamp = Some(p.max_timestamp);
            }
            if p.max_timestamp > self.max_timestamp {
                self.max_timestamp = p.max_timestamp;
                self.offset_of_max_timestamp = p.last_offset;
            }
        }
        if self.bytes_since_last_index_entry > 0
            && self.bytes_since_last_index_entry >= self.index_interval_bytes
        {
            self.offset_index.append(last, position as u32);
            self.time_index
                .append(self.max_timestamp, self.offset_of_max_timestamp);
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += len;
        self.size += len;
        self.next_offset = Offset(last.0 + 1);
        self.dirty = true;
    }

    /// Records an aborted transaction that ended in this segment.
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) {
        self.txn_index.append(txn);
        self.dirty = true;
    }

    /// Reads `len` bytes at `pos`.
    pub async fn read_at(&self, pos: u64, len: usize) -> FsResult<Bytes> {
        fs::read_exact_at_cached(&self.log, &self.log_path, pos, len).await
    }

    /// Visits the batches from `from` to the end of the segment (or until `f` breaks).
    /// Stops at the first invalid batch and reports it in [`ScanEnd::error`].
    pub async fn scan<F>(&self, from: u64, verify_crc: bool, mut f: F) -> FsResult<ScanEnd>
    where
        F: FnMut(RecordBatch, u64) -> ControlFlow<()>,
    {
        let mut pos = from;
        while pos < self.size {
            let want = ((self.size - pos) as usize).min(SCAN_CHUNK_BYTES);
            let chunk = self.read_at(pos, want).await?;
            let mut at = 0usize;
            while at < chunk.len() {
                let abs = pos + at as u64;
                let total = match frame_size(&chunk[at..], abs) {
                    Ok(t) => t,
                    Err(BatchError::Truncated { needed, .. })
                        if abs + needed <= self.size && at > 0 =>
                    {
                        break; // the batch continues past this chunk: read from it
                    }
                    Err(BatchError::Truncated { needed, .. }) if abs + needed <= self.size => {
                        // A single batch larger than the chunk.
                        let whole = self.read_at(abs, needed as usize).await?;
                        let batch = match parse(whole, abs, verify_crc) {
                            Ok(b) => b,
                            Err(e) => {
                                return Ok(ScanEnd {
                                    valid_end: abs,
                                    error: Some(e),
                                })
                            }
                        };
                        let flow = f(batch, abs);
                        at = needed as usize;
                        if flow.is_break() {
                            return Ok(ScanEnd {
                                valid_end: pos + at as u64,
                                error: None,
                            });
                        }
                        continue;
                    }
                    Err(e) => {
                        return Ok(ScanEnd {
                            valid_end: abs,
                            error: Some(e),
                        })
                    }
                };
                let batch = match parse(chunk.slice(at..at + total), abs, verify_crc) {
                    Ok(b) => b,
                    Err(e) => {
                        return Ok(ScanEnd {
                            valid_end: abs,
                            error: Some(e),
                        })
                    }
                };
                at += total;
                if f(batch, abs).is_break() {
                    return Ok(ScanEnd {
                        valid_end: pos + at as u64,
                        error: None,
                    });
                }
            }
            pos += at as u64;
        }
        Ok(ScanEnd {
            valid_end: pos,
            error: None,
        })
    }

    /// Whether `[from, to)`, `to` being the end of the file, is direct-I/O padding.
    async fn is_zero_padding(&self, from: u64, to: u64) -> FsResult<bool> {
        if to - from >= DIRECT_IO_MAX_PADDING {
            return Ok(false);
        }
        let bytes =
            fs::read_exact_at(&self.log, &self.log_path, from, (to - from) as usize).await?;
        Ok(is_direct_io_padding(&bytes, to))
    }

    /// Position of the first batch whose last offset is >= `offset`, with that batch.
    pub async fn translate_offset(&self, offset: Offset) -> FsResult<Option<(u64, RecordBatch)>> {
        let (_, start) = self.offset_index.lookup(offset);
        let found = self.find_from(u64::from(start), offset).await?;
        // An index entry that parses but points past the batch holding `offset` (a
        // damaged index file) must not make a reader skip offsets: check and rescan.
        if start > 0 && found.as_ref().is_none_or(|(_, b)| b.base_offset() > offset) {
            let rescanned = self.find_from(0, offset).await?;
            if rescanned.as_ref().map(|(p, _)| *p) != found.as_ref().map(|(p, _)| *p) {
                tracing::warn!(
                    segment = %self.log_path.display(), offset = offset.0,
                    "offset index entry points past the requested offset; scanned from the start"
                );
            }
            return Ok(rescanned);
        }
        Ok(found)
    }

    async fn find_from(&self, from: u64, offset: Offset) -> FsResult<Option<(u64, RecordBatch)>> {
        let mut found = None;
        self.scan(from, false, |batch, pos| {
            if batch.last_offset() >= offset {
                found = Some((pos, batch));
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await?;
        Ok(found)
    }

    /// Whole batches starting with the one holding `offset`, up to `max_bytes` (the first
    /// batch is returned whole even when larger, as Kafka does).
    ///
    /// This is the Fetch path, so the bytes are read once: one window from the offset
    /// index's position, sized for the answer, both finds the first batch and is returned
    /// as a slice of itself (the slice keeps the window's buffer alive until the response
    /// is sent). The window is read again from the first batch only when that batch lies
    /// further past the index entry than the window reaches.
    pub async fn read(&self, offset: Offset, max_bytes: usize) -> FsResult<Option<(u64, Bytes)>> {
        let (_, start) = self.offset_index.lookup(offset);
        let found = self.read_from(u64::from(start), offset, max_bytes).await?;
        // As in `translate_offset`: an index entry that parses but points past the batch
        // holding `offset` (a damaged index file) must not make a reader skip offsets.
        if start > 0 && found.as_ref().is_none_or(|f| f.first_base_offset > offset) {
            let rescanned = self.read_from(0, offset, max_bytes).await?;
            if rescanned.as_ref().map(|f| f.position) != found.as_ref().map(|f| f.position) {
                tracing::warn!(
                    segment = %self.log_path.display(), offset = offset.0,
                    "offset index entry points past the requested offset; scanned from the start"
                );
            }
            return Ok(rescanned.map(|f| (f.position, f.records)));
        }
        Ok(found.map(|f| (f.position, f.records)))
    }

    /// [`Self::read`] with the search for `offset` starting at position `from`.
    async fn read_from(
        &self,
        from: u64,
        offset: Offset,
        max_bytes: usize,
    ) -> FsResult<Option<FoundRecords>> {
        let max_bytes = u64::try_from(max_bytes).unwrap_or(u64::MAX);
        // File bytes [window_pos, window_pos + window.len()); empty until the first read.
        let mut window = Bytes::new();
        let mut window_pos = from;
        // Position of the next batch to look at.
        let mut at = from;
        // Position and base offset of the first batch to return, once found.
        let mut first: Option<(u64, Offset)> = None;
        // End of the last batch to return.
        let mut end = from;
        while at < self.size {
            if first.is_some_and(|(start, _)| end - start >= max_bytes) {
                break;
            }
            let rel = (at - window_pos) as usize;
            let total = match frame_size(&window[rel..], at) {
                Ok(total) => total,
                Err(BatchError::Truncated { needed, .. }) if at + needed <= self.size => {
                    // The batch goes on past the window. Once the first batch is found the
                    // window must hold everything from it, so read again from there.
                    let keep = first.map_or(at, |(start, _)| start);
                    let wanted_end = at + needed;
                    if first.is_some() && wanted_end - keep > max_bytes {
                        break; // this batch would not fit the answer anyway
                    }
                    let goal = if first.is_some() {
                        max_bytes
                    } else if window.is_empty() {
                        // The first batch is usually within an index interval of `from`.
                        max_bytes.saturating_add(self.index_interval_bytes)
                    } else {
                        // Still searching past a sparse index: read in larger chunks.
                        max_bytes
                            .saturating_add(self.index_interval_bytes)
                            .max(SCAN_CHUNK_BYTES as u64)
                    };
                    let len = (wanted_end - keep).max(goal).min(self.size - keep);
                    window = self.read_at(keep, len as usize).await?;
                    window_pos = keep;
                    continue;
                }
                // A batch that does not frame or parse ends the read, as it ends a scan.
                Err(_) => break,
            };
            let Ok(batch) = RecordBatch::parse(window.slice(rel..rel + total), at) else {
                break;
            };
            match first {
                None if batch.last_offset() >= offset => {
                    first = Some((at, batch.base_offset()));
                }
                None => {}
                Some((start, _)) if at + total as u64 - start > max_bytes => break,
                Some(_) => {}
            }
            at += total as u64;
            if first.is_some() {
                end = at;
            }
        }
        let Some((position, first_base_offset)) = first else {
            return Ok(None);
        };
        assert!(
            position >= window_pos && end <= window_pos + window.len() as u64,
            "batches {position}..{end} of {} outside the read window {window_pos}+{}",
            self.log_path.display(),
            window.len()
        );
        Ok(Some(FoundRecords {
            position,
            first_base_offset,
            records: window.slice((position - window_pos) as usize..(end - window_pos) as usize),
        }))
    }

    /// Cuts the segment so it ends before the batch holding `offset`. Returns the bytes
    /// removed. Index entries at or past `offset` go too.
    pub async fn truncate_to(&mut self, offset: Offset) -> FsResult<u64> {
        let Some((pos, batch)) = self.translate_offset(offset).await? else {
            return Ok(0);
        };
        let removed = self.size - pos;
        self.log
            .truncate(pos)
            .await
            .map_err(fs_err("truncate", &self.log_path))?;
        if let Some(d) = &mut self.direct {
            d.tail = None;
            d.padded = false;
        }
        self.size = pos;
        self.next_offset = if pos == 0 {
            self.base_offset
        } else {
            batch.base_offset()
        };
        let cut = batch.base_offset();
        self.offset_index.truncate_to(cut);
        self.time_index.truncate_to(cut);
        self.txn_index.truncate_to(cut);
        for (i, len) in [
            self.offset_index.len(),
            self.time_index.len(),
            self.txn_index.len(),
        ]
        .into_iter()
        .enumerate()
        {
            self.persisted[i] = self.persisted[i].min(len);
        }
        match self.time_index.last_entry() {
            Some((ts, off)) => {
                self.max_timestamp = ts;
                self.offset_of_max_timestamp = off;
            }
            None => {
                self.max_timestamp = -1;
                self.offset_of_max_timestamp = self.base_offset;
            }
        }
        if self.size == 0 {
            self.rolling_base_timestamp = None;
        }
        self.bytes_since_last_index_entry = 0;
        self.dirty = true;
        Ok(removed)
    }

    /// Rebuilds all in-memory indexes and the end offset from the `.log`, validating
    /// every batch (frame, magic, CRC, offsets increasing). The file is cut at the first
    /// invalid batch. `on_batch` sees every valid batch in order and returns the aborted
    /// transactions that end in it.
    pub async fn recover<F>(&mut self, mut on_batch: F) -> FsResult<Option<RecoveryCut>>
    where
        F: FnMut(&RecordBatch) -> Vec<AbortedTxn>,
    {
        let old_size = self.size;
        let mut placements = Vec::new();
        let mut expected = self.base_offset;
        let mut bad_offset = None;
        let mut end = {
            let base = self.base_offset;
            self.scan(0, true, |batch, pos| {
                let last = batch.last_offset();
                if batch.base_offset() < expected || last.0 - base.0 > i64::from(i32::MAX) {
                    bad_offset = Some((pos, batch.base_offset(), expected));
                    return ControlFlow::Break(());
                }
                expected = batch.next_offset();
                let txns = on_batch(&batch);
                placements.push((pos, placement_of(&batch), txns));
                ControlFlow::Continue(())
            })
            .await?
        };
        let mut reason = end.error.take().map(|e| e.to_string());
        if let Some((pos, found, expected)) = bad_offset {
            end.valid_end = pos;
            reason = Some(format!(
                "batch at position {pos} has base offset {found}, expected at least {expected}"
            ));
        }
        self.offset_index = OffsetIndex::new(self.base_offset);
        self.time_index = TimeIndex::new(self.base_offset);
        self.txn_index = TransactionIndex::new(self.base_offset);
        self.persisted = [0; 3];
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.rolling_base_timestamp = None;
        self.next_offset = self.base_offset;
        self.size = 0;
        for (pos, p, txns) in placements {
            self.track_append(
                pos,
                u64::from(p.size),
                std::slice::from_ref(&p),
                p.last_offset,
            );
            for t in txns {
                self.txn_index.append(t);
            }
        }
        self.dirty = true;
        if end.valid_end >= old_size {
            return Ok(None);
        }
        if reason.is_some() && self.is_zero_padding(end.valid_end, old_size).await? {
            // What a crash leaves after a direct-I/O append: not data, nothing to report.
            tracing::info!(
                segment = %self.log_path.display(), bytes = old_size - end.valid_end,
                "removed the zero padding of a direct write after the last batch"
            );
            self.log
                .truncate(end.valid_end)
                .await
                .map_err(fs_err("truncate", &self.log_path))?;
            if let Some(d) = &mut self.direct {
                d.tail = None;
                d.padded = false;
            }
            return Ok(None);
        }
        self.log
            .truncate(end.valid_end)
            .await
            .map_err(fs_err("truncate", &self.log_path))?;
        Ok(Some(RecoveryCut {
            position: end.valid_end,
            bytes_removed: old_size - end.valid_end,
            reason: reason.unwrap_or_else(|| "incomplete batch at the end".to_string()),
        }))
    }

    /// Loads the index files written at the last flush and checks them against the
    /// `.log`; returns false when they are missing or do not agree (rebuild then).
    pub async fn load_indexes(&mut self) -> FsResult<bool> {
        let path = |suffix: &str| Self::path_for(&self.dir, self.base_offset, suffix);
        let (Some(oi), Some(ti)) = (
            fs::read_all(&path(".index")).await?,
            fs::read_all(&path(".timeindex")).await?,
        ) else {
            return Ok(false);
        };
        let txn = fs::read_all(&path(".txnindex")).await?.unwrap_or_default();
        let (Ok(oi), Ok(ti), Ok(txn)) = (
            OffsetIndex::parse(self.base_offset, &oi),
            TimeIndex::parse(self.base_offset, &ti),
            TransactionIndex::parse(self.base_offset, &txn),
        ) else {
            return Ok(false);
        };
        if let Some((_, pos)) = oi.last_entry() {
            if u64::from(pos) >= self.size {
                return Ok(false);
            }
        }
        // The last batch gives the end offset and is a cheap consistency check.
        let from = oi.last_entry().map_or(0, |(_, p)| u64::from(p));
        let mut last = None;
        let mut max_ts = (-1i64, self.base_offset);
        let end = self
            .scan(from, false, |b, _| {
                if b.max_timestamp() > max_ts.0 {
                    max_ts = (b.max_timestamp(), b.last_offset());
                }
                last = Some(b.next_offset());
                ControlFlow::Continue(())
            })
            .await?;
        if end.error.is_some() || end.valid_end != self.size {
            return Ok(false);
        }
        self.next_offset = last.unwrap_or(self.base_offset);
        if let Some((ts, off)) = ti.last_entry() {
            if off >= self.next_offset {
                return Ok(false);
            }
            if ts > max_ts.0 {
                max_ts = (ts, off);
            }
        }
        self.persisted = [oi.len(), ti.len(), txn.len()];
        self.offset_index = oi;
        self.time_index = ti;
        self.txn_index = txn;
        self.max_timestamp = max_ts.0;
        self.offset_of_max_timestamp = max_ts.1;
        if self.size > 0 {
            // Roll-by-age counts from the first batch.
            let first = self
                .read_at(0, layout::HEADER_SIZE.min(self.size as usize))
                .await?;
            if first.len() >= layout::HEADER_SIZE {
                let ts = i64::from_be_bytes(
                    first[layout::MAX_TIMESTAMP..layout::MAX_TIMESTAMP + 8]
                        .try_into()
                        .unwrap_or([0xff; 8]),
                );
                self.rolling_base_timestamp = (ts >= 0).then_some(ts);
            }
        }
        Ok(true)
    }

    /// Replaces the in-memory transaction index with the `.txnindex` file's entries when
    /// that file parses (used after rebuilding an old segment's other indexes, where no
    /// producer-state replay is at hand to rebuild it). Returns whether it did.
    pub async fn reload_txn_index(&mut self) -> FsResult<bool> {
        let path = Self::path_for(&self.dir, self.base_offset, ".txnindex");
        let Some(bytes) = fs::read_all(&path).await? else {
            return Ok(false);
        };
        match TransactionIndex::parse(self.base_offset, &bytes) {
            Ok(t) => {
                self.txn_index = t;
                self.persisted[2] = 0;
                self.dirty = true;
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// fsyncs the `.log`'s bytes only: its index entries stay in memory until the next
    /// [`flush`](Self::flush), which is safe because recovery rebuilds them from the log
    /// past the recovery point, which this does not move.
    pub async fn sync_data(&mut self) -> FsResult<()> {
        self.trim_padding().await?;
        self.log
            .fdatasync()
            .await
            .map_err(fs_err("fsync", &self.log_path))
    }

    /// Writes new index entries to their files and fsyncs the `.log` when `sync`.
    pub async fn flush(&mut self, sync: bool) -> FsResult<()> {
        if sync {
            self.trim_padding().await?;
        }
        if !self.dirty {
            return Ok(());
        }
        let oi = self.offset_index.to_bytes();
        let ti = self.time_index.to_bytes();
        let txn = self.txn_index.to_bytes();
        let entry_sizes = [
            OffsetIndex::ENTRY_SIZE,
            TimeIndex::ENTRY_SIZE,
            TransactionIndex::ENTRY_SIZE,
        ];
        for (i, (suffix, bytes)) in [(".index", oi), (".timeindex", ti), (".txnindex", txn)]
            .into_iter()
            .enumerate()
        {
            let from = self.persisted[i] * entry_sizes[i];
            let path = Self::path_for(&self.dir, self.base_offset, suffix);
            let count = bytes.len() / entry_sizes[i];
            fs::write_tail(
                &path,
                bytes[from.min(bytes.len())..].to_vec(),
                from as u64,
                sync,
            )
            .await?;
            self.persisted[i] = count;
        }
        if sync {
            self.log
                .fdatasync()
                .await
                .map_err(fs_err("fsync", &self.log_path))?;
        }
        self.dirty = false;
        Ok(())
    }

    /// Called when the segment stops being the active one (Kafka's onBecomeInactive):
    /// the time index gets a final entry for the newest timestamp.
    pub fn seal(&mut self) {
        if self.max_timestamp >= 0 {
            self.time_index
                .append(self.max_timestamp, self.offset_of_max_timestamp);
            self.dirty = true;
        }
    }

    pub async fn close(mut self) -> FsResult<()> {
        self.flush(true).await?;
        if let Some(d) = self.direct.take() {
            d.file
                .close()
                .await
                .map_err(fs_err("close", &self.log_path))?;
        }
        self.log
            .close()
            .await
            .map_err(fs_err("close", &self.log_path))
    }

    /// Closes and removes all files of the segment.
    pub async fn delete(self) -> FsResult<()> {
        let dir = self.dir.clone();
        let base = self.base_offset;
        let path = self.log_path.clone();
        if let Some(d) = self.direct {
            d.file.close().await.map_err(fs_err("close", &path))?;
        }
        self.log.close().await.map_err(fs_err("close", &path))?;
        for suffix in [".log", ".index", ".timeindex", ".txnindex"] {
            fs::remove_file(&Self::path_for(&dir, base, suffix)).await?;
        }
        Ok(())
    }
}

/// The placement of a batch whose offsets are already final.
pub fn placement_of(batch: &RecordBatch) -> BatchPlacement {
    BatchPlacement {
        base_offset: batch.base_offset(),
        last_offset: batch.last_offset(),
        max_timestamp: batch.max_timestamp(),
        epoch: batch.partition_leader_epoch(),
        size: batch.size_in_bytes() as u32,
    }
}

fn parse(bytes: Bytes, pos: u64, verify_crc: bool) -> Result<RecordBatch, BatchError> {
    if verify_crc {
        RecordBatch::parse_verified(bytes, pos)
    } else {
        RecordBatch::parse(bytes, pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::BatchBuilder;
    use crate::wire::records::encode_simple_records;

    use crate::test_support::run_glommio as run;

    /// A segment holding one batch per `(records, value_size)` shape, each its own
    /// append, and the batches as appended.
    async fn filled(
        dir: &Path,
        index_interval_bytes: u32,
        direct_io: bool,
        shapes: &[(i32, usize)],
    ) -> (LogSegment, Vec<RecordBatch>) {
        let mut seg = LogSegment::create(dir, Offset(0), index_interval_bytes, direct_io, 0)
            .await
            .expect("segment created");
        let batches = append_shapes(&mut seg, shapes).await;
        (seg, batches)
    }

    /// Appends one batch per shape after the segment's end; returns them.
    async fn append_shapes(seg: &mut LogSegment, shapes: &[(i32, usize)]) -> Vec<RecordBatch> {
        let mut batches = Vec::new();
        let mut next = seg.next_offset();
        for &(records, value_size) in shapes {
            let bytes = BatchBuilder {
                base_offset: next,
                last_offset_delta: records - 1,
                record_count: records,
                ..BatchBuilder::default()
            }
            .build(&encode_simple_records(records, 0, value_size));
            let batch = RecordBatch::parse(bytes.clone(), 0).expect("built batch parses");
            seg.append(Cow::Borrowed(&bytes), &[placement_of(&batch)])
                .await
                .expect("append");
            next = batch.next_offset();
            batches.push(batch);
        }
        batches
    }

    /// What [`LogSegment::read`] must return: whole batches from the one holding
    /// `offset` while they fit `max_bytes`, the first one always.
    fn expected(
        batches: &[RecordBatch],
        offset: Offset,
        max_bytes: usize,
    ) -> Option<(u64, Vec<u8>)> {
        let first = batches.iter().position(|b| b.last_offset() >= offset)?;
        let position = batches[..first]
            .iter()
            .map(|b| b.size_in_bytes() as u64)
            .sum();
        let mut out = batches[first].as_bytes().to_vec();
        for b in &batches[first + 1..] {
            if out.len() + b.size_in_bytes() > max_bytes {
                break;
            }
            out.extend_from_slice(b.as_bytes());
        }
        Some((position, out))
    }

    /// Small batches around one larger than the scan chunk, so reads cross window ends,
    /// start past the first window, and meet a first batch larger than `max_bytes`.
    fn shapes() -> Vec<(i32, usize)> {
        let mut shapes: Vec<(i32, usize)> =
            (0..40).map(|i| (1 + i % 4, 10 + 97 * i as usize)).collect();
        shapes.push((300, 4000)); // ~1.2 MiB
        shapes.extend((0..20).map(|i| (1 + i % 3, 3000 - 100 * i as usize)));
        shapes
    }

    #[test]
    fn read_returns_whole_batches_up_to_max_bytes_for_any_index_density() {
        run(|| async {
            for (index_interval_bytes, direct_io) in
                [(1, false), (4096, false), (u32::MAX, false), (4096, true)]
            {
                let dir = tempfile::tempdir().expect("tempdir");
                let (seg, batches) =
                    filled(dir.path(), index_interval_bytes, direct_io, &shapes()).await;
                let end = seg.next_offset().0;
                for offset in (0..=end).step_by(7).chain([end - 1, end]) {
                    // Exactly the first two or three batches: the limit is inclusive.
                    let exact = batches
                        .iter()
                        .skip_while(|b| b.last_offset() < Offset(offset))
                        .take(3)
                        .scan(0, |sum, b| {
                            *sum += b.size_in_bytes();
                            Some(*sum)
                        })
                        .skip(1);
                    let sizes = [0, 1, 700, 10_000, 100_000, 2 << 20, usize::MAX];
                    for max_bytes in sizes.into_iter().chain(exact) {
                        let got = seg.read(Offset(offset), max_bytes).await.expect("read");
                        let got = got.map(|(position, bytes)| (position, bytes.to_vec()));
                        assert!(
                            got == expected(&batches, Offset(offset), max_bytes),
                            "read({offset}, {max_bytes}) with index interval \
                             {index_interval_bytes}, direct {direct_io}: got {:?}",
                            got.map(|(p, b)| (p, b.len()))
                        );
                    }
                }
            }
        });
    }

    #[test]
    fn read_rescans_when_an_index_entry_points_past_the_offset() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let (mut seg, batches) = filled(dir.path(), u32::MAX, false, &shapes()).await;
            // A damaged entry: offset 2 said to be where the batch holding offset 30 is.
            let (far, _) = seg
                .translate_offset(Offset(30))
                .await
                .expect("translate")
                .expect("offset 30 is in the segment");
            seg.offset_index.append(Offset(2), far as u32);
            for offset in [2, 5, 29] {
                let got = seg.read(Offset(offset), 5000).await.expect("read");
                let got = got.map(|(position, bytes)| (position, bytes.to_vec()));
                assert!(
                    got == expected(&batches, Offset(offset), 5000),
                    "read({offset})"
                );
            }
        });
    }

    /// Every batch of the segment read back in one go, or nothing when empty.
    async fn all_bytes(seg: &LogSegment) -> Vec<u8> {
        seg.read(seg.base_offset(), usize::MAX)
            .await
            .expect("read")
            .map(|(_, b)| b.to_vec())
            .unwrap_or_default()
    }

    fn concat(batches: &[RecordBatch]) -> Vec<u8> {
        batches.iter().flat_map(|b| b.as_bytes().to_vec()).collect()
    }

    async fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).expect("stat").len()
    }

    #[test]
    fn direct_io_appends_survive_truncation_flush_close_and_crash() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let small: Vec<(i32, usize)> = (0..30i32)
                .map(|i| (1 + i % 3, 17 + 131 * i as usize))
                .collect();
            let (mut seg, mut batches) = filled(dir.path(), 4096, true, &small).await;
            let path = seg.log_path().to_path_buf();
            let align = seg.direct.as_ref().expect("direct appender").align;
            assert_eq!(all_bytes(&seg).await, concat(&batches));
            // The file holds whole blocks: the last one padded with zeros.
            let on_disk = file_len(&path).await;
            assert_eq!(on_disk % align, 0, "file length {on_disk}");
            assert!(on_disk >= seg.size() && on_disk - seg.size() < align);

            // Cut in the middle of a block, then append: the tail is read back from the
            // file and rewritten with the new bytes.
            let keep = 17;
            seg.truncate_to(batches[keep].base_offset())
                .await
                .expect("truncate");
            batches.truncate(keep);
            batches.extend(append_shapes(&mut seg, &[(2, 5000), (1, 3), (4, 70_000)]).await);
            assert_eq!(all_bytes(&seg).await, concat(&batches));

            // An fsync cuts the padding: the file ends where the segment ends.
            seg.flush(true).await.expect("flush");
            assert_eq!(file_len(&path).await, seg.size());
            batches.extend(append_shapes(&mut seg, &[(3, 900)]).await);
            assert_eq!(all_bytes(&seg).await, concat(&batches));

            // A crash (no close): the padding stays on disk, and recovery removes it
            // quietly, keeping every batch.
            let size = seg.size();
            drop(seg);
            assert!(file_len(&path).await > size);
            let mut seg = LogSegment::open(dir.path(), Offset(0), 4096, true, 0)
                .await
                .expect("open");
            let cut = seg.recover(|_| Vec::new()).await.expect("recover");
            assert_eq!(cut, None);
            assert_eq!(seg.size(), size);
            assert_eq!(file_len(&path).await, size);
            assert_eq!(
                seg.next_offset(),
                batches.last().expect("batches").next_offset()
            );
            batches.extend(append_shapes(&mut seg, &[(1, 10)]).await);
            assert_eq!(all_bytes(&seg).await, concat(&batches));

            // A clean close leaves exactly the segment's bytes, and a buffered reopen
            // reads them.
            let size = seg.size();
            seg.close().await.expect("close");
            assert_eq!(file_len(&path).await, size);
            let seg = LogSegment::open(dir.path(), Offset(0), 4096, false, 0)
                .await
                .expect("open");
            assert_eq!(all_bytes(&seg).await, concat(&batches));
        });
    }

    #[test]
    fn recovery_still_reports_a_torn_batch_that_is_not_padding() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let (seg, batches) = filled(dir.path(), 4096, false, &[(2, 100), (3, 200)]).await;
            let path = seg.log_path().to_path_buf();
            seg.close().await.expect("close");
            // Half of a third batch: non-zero bytes.
            let torn = &batches[1].as_bytes()[..40];
            let mut data = std::fs::read(&path).expect("read");
            data.extend_from_slice(torn);
            std::fs::write(&path, &data).expect("write");
            let mut seg = LogSegment::open(dir.path(), Offset(0), 4096, false, 0)
                .await
                .expect("open");
            let cut = seg.recover(|_| Vec::new()).await.expect("recover");
            let cut = cut.expect("a torn batch is reported");
            assert_eq!(cut.bytes_removed, 40);
            assert_eq!(all_bytes(&seg).await, concat(&batches));
        });
    }
}
