//! `PartitionLog`: one partition's segments, indexes, leader-epoch cache and producer
//! state, with Kafka's append, read, truncation and retention semantics.
//!
//! Owned by exactly one shard; every method runs on that shard's glommio executor.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::log::config::LogConfig;
use crate::log::epoch_cache::LeaderEpochCache;
use crate::log::fs::{self, FsError};
use crate::log::producer_state::{
    AppendOrigin, CompletedTxn, ProducerStateError, ProducerStateManager,
};
use crate::log::segment::{file_name, BatchPlacement, LogSegment};
use crate::log::txn_index::AbortedTxn;
use crate::log::validate::{self, ValidateError};
use crate::types::{LeaderEpoch, Offset, TopicPartition};
use crate::wire::batch::{
    stamp_log_append_time, stamp_offset_and_epoch, BatchError, BatchIter, RecordBatch,
};
use crate::wire::control::ControlType;
use crate::wire::records::batch_records;

pub(crate) const CLEAN_SHUTDOWN_FILE: &str = ".clean-shutdown";
pub(crate) const EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
pub(crate) const LOG_START_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
pub(crate) const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// Errors of the partition log, with the partition and place they concern.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(transparent)]
    Io(#[from] FsError),
    #[error("{tp}: invalid record batch: {source}")]
    InvalidBatch {
        tp: TopicPartition,
        #[source]
        source: BatchError,
    },
    #[error("{tp}: {source}")]
    Rejected {
        tp: TopicPartition,
        #[source]
        source: ValidateError,
    },
    #[error("{tp}: batch at offset {offset} has {record_count} records but spans {span} offsets")]
    InconsistentRecordCount {
        tp: TopicPartition,
        offset: Offset,
        record_count: i32,
        span: i64,
    },
    #[error("{tp}: clients may not produce control batches")]
    ControlBatchFromClient { tp: TopicPartition },
    #[error("{tp}: record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge {
        tp: TopicPartition,
        size: usize,
        max: usize,
    },
    #[error("{tp}: empty append")]
    EmptyAppend { tp: TopicPartition },
    #[error("{tp}: passthrough batch has base offset {found}, log end offset is {expected}")]
    UnexpectedAppendOffset {
        tp: TopicPartition,
        expected: Offset,
        found: Offset,
    },
    #[error("{tp}: {source}")]
    Producer {
        tp: TopicPartition,
        #[source]
        source: ProducerStateError,
    },
    #[error("{tp}: offset {offset} is outside [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        tp: TopicPartition,
        offset: Offset,
        log_start: Offset,
        log_end: Offset,
    },
    #[error("{tp}: {path}: {reason}")]
    CorruptMetadata {
        tp: TopicPartition,
        path: PathBuf,
        reason: String,
    },
    #[error("{tp}: topic id on disk is {stored}, expected {expected}")]
    InconsistentTopicId {
        tp: TopicPartition,
        stored: uuid::Uuid,
        expected: uuid::Uuid,
    },
}

/// Who is appending, which decides offset assignment and validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendKind {
    /// A producer on this leader: offsets and leader epoch are assigned here; producer
    /// state is validated (duplicates, sequence, epoch, transactions).
    Client,
    /// The broker itself (transaction markers, MIRROR_PID_RESET): offsets assigned
    /// here; control batches allowed.
    Coordinator,
}

/// The outcome of an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAppendInfo {
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: Offset,
    pub record_count: i64,
    pub log_start_offset: Offset,
    /// The batch was a retry of one already in the log: nothing was appended and the
    /// offsets are the original ones.
    pub duplicate: bool,
    pub completed_txns: Vec<CompletedTxn>,
    /// The append time stamped into the batches (LogAppendTime topics), else -1.
    pub log_append_time_ms: i64,
}

/// A leader's record set after the checks that need no offsets.
enum LeaderSet {
    /// To be appended.
    New(Vec<RecordBatch>),
    /// A retry of batches already in the log: what they were appended as.
    Duplicate(LogAppendInfo),
}

/// Why [`PartitionLog::write_leader_sets`] failed: before anything changed (the sets
/// may be appended again), or once they were in the log.
enum SetsError {
    Unwritten(LogError),
    Written(LogError),
}

/// Data read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchData {
    /// Whole batches, exactly as stored (empty when `offset` is the log end).
    pub records: Bytes,
    /// Position in its segment file of the first byte of `records`.
    pub position: u64,
}

/// One partition's log.
#[derive(Debug)]
pub struct PartitionLog {
    pub(crate) tp: TopicPartition,
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    pub(crate) segments: BTreeMap<Offset, LogSegment>,
    pub(crate) log_start_offset: Offset,
    pub(crate) log_end_offset: Offset,
    pub(crate) high_watermark: Offset,
    pub(crate) recovery_point: Offset,
    pub(crate) epoch_cache: LeaderEpochCache,
    /// An append changed the epoch cache and the leader-epoch checkpoint on disk lags
    /// it; the next roll or close writes it.
    pub(crate) epochs_unwritten: bool,
    pub(crate) producer_state: ProducerStateManager,
    pub(crate) topic_id: Option<uuid::Uuid>,
    pub(crate) unflushed_records: u64,
    pub(crate) last_flush_ms: i64,
    pub(crate) snapshots: std::collections::BTreeSet<Offset>,
    /// Moves whenever segments are truncated or deleted (truncation, retention,
    /// DeleteRecords), so a cleaner that read the log before knows not to swap.
    pub(crate) generation: u64,
    /// The cleaner's first dirty offset: below it the log was compacted
    /// (`cleaner-offset-checkpoint`).
    pub(crate) first_dirty_offset: Offset,
    /// When the cleaner last finished a clean of this log (-1: never since open).
    pub(crate) last_clean_ms: i64,
}

impl PartitionLog {
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// Applies changed topic configs; they take effect from the next append or
    /// retention pass.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    pub fn topic_id(&self) -> Option<uuid::Uuid> {
        self.topic_id
    }
    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> Offset {
        self.log_end_offset
    }
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }
    /// Offset up to which data is known to be on stable storage.
    pub fn recovery_point(&self) -> Offset {
        self.recovery_point
    }
    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        self.segments.keys().copied().collect()
    }
    /// Total bytes of all `.log` files.
    pub fn size_in_bytes(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epoch_cache.latest_epoch()
    }

    /// Moves the high watermark, clamped into [log start, log end].
    pub fn update_high_watermark(&mut self, offset: Offset) -> Offset {
        self.high_watermark = offset.clamp(self.log_start_offset, self.log_end_offset);
        self.producer_state
            .on_high_watermark_updated(self.high_watermark);
        self.high_watermark
    }

    /// The first offset of the earliest open transaction, if any.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        self.producer_state.first_unstable_offset()
    }

    /// The first offset of the earliest transaction with no marker in the log yet
    /// (decided transactions whose marker is above the high watermark do not count).
    pub fn first_undecided_offset(&self) -> Option<Offset> {
        self.producer_state.first_undecided_offset()
    }

    /// Last stable offset: the high watermark, or the start of the earliest open
    /// transaction when that is lower. read_committed consumers read up to here.
    pub fn last_stable_offset(&self) -> Offset {
        match self.first_unstable_offset() {
            Some(o) if o < self.high_watermark => o,
            _ => self.high_watermark,
        }
    }

    /// Kafka's OffsetsForLeaderEpoch answer: the end offset of `epoch` (the start of the
    /// next higher epoch, or the log end for the latest) and the epoch it belongs to.
    pub fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> (LeaderEpoch, Offset) {
        self.epoch_cache.end_offset_for(epoch, self.log_end_offset)
    }

    /// Aborted transactions overlapping [fetch_offset, upper_bound), for read_committed.
    pub fn aborted_transactions(
        &self,
        fetch_offset: Offset,
        upper_bound: Offset,
    ) -> Vec<AbortedTxn> {
        let start = self
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(fetch_offset, |(b, _)| *b);
        let mut out = Vec::new();
        for seg in self
            .segments
            .range(start..upper_bound.max(start))
            .map(|(_, s)| s)
        {
            out.extend(seg.txn_index().collect_aborted(fetch_offset, upper_bound));
        }
        // An aborted transaction that ended in a later segment can start before fetch
        // offset; segments after upper_bound cannot hold one that matters.
        for seg in self
            .segments
            .range(upper_bound.max(start)..)
            .map(|(_, s)| s)
        {
            out.extend(seg.txn_index().collect_aborted(fetch_offset, upper_bound));
        }
        out.sort_by_key(|t| t.first_offset);
        out.dedup();
        out
    }

    fn out_of_range(&self, offset: Offset) -> LogError {
        LogError::OffsetOutOfRange {
            tp: self.tp.clone(),
            offset,
            log_start: self.log_start_offset,
            log_end: self.log_end_offset,
        }
    }

    fn active_segment(&self) -> &LogSegment {
        self.segments
            .values()
            .next_back()
            .expect("a partition log always has an active segment")
    }

    fn active_segment_mut(&mut self) -> &mut LogSegment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a partition log always has an active segment")
    }

    /// Reads whole batches starting with the one that holds `offset`, at most `max_bytes`
    /// unless the first batch alone is larger (then it is returned whole, as Kafka does).
    /// Reading at the log end returns no records.
    pub async fn read(&self, offset: Offset, max_bytes: usize) -> Result<FetchData, LogError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(self.out_of_range(offset));
        }
        let start = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(self.log_start_offset, |(b, _)| *b);
        for (_, seg) in self.segments.range(start..) {
            if let Some((position, records)) = seg.read(offset, max_bytes).await? {
                return Ok(FetchData { records, position });
            }
        }
        Ok(FetchData {
            records: Bytes::new(),
            position: self.active_segment().size(),
        })
    }

    /// Visits every batch from `from` to the log end, in offset order: how the
    /// coordinators replay their internal topics when they load. Stops quietly at a batch
    /// that does not parse (recovery already cut corrupt tails).
    pub async fn for_each_batch<F>(&self, from: Offset, mut visit: F) -> Result<(), LogError>
    where
        F: FnMut(&RecordBatch),
    {
        const READ_BYTES: usize = 1 << 20;
        let mut offset = from.max(self.log_start_offset);
        while offset < self.log_end_offset {
            let data = self.read(offset, READ_BYTES).await?;
            let mut progressed = false;
            for batch in BatchIter::new(data.records, data.position, false) {
                let Ok(batch) = batch else { break };
                if batch.next_offset() <= offset {
                    continue;
                }
                progressed = true;
                offset = batch.next_offset();
                visit(&batch);
            }
            if !progressed {
                break;
            }
        }
        Ok(())
    }

    /// Kafka's ListOffsets by timestamp: the first offset whose record timestamp is >=
    /// `timestamp_ms`, with that timestamp, resolved to the exact record inside its batch
    /// (compressed batches are decompressed for it, as Kafka does).
    pub async fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, Offset)>, LogError> {
        for seg in self.segments.values() {
            if seg.max_timestamp() < timestamp_ms {
                continue;
            }
            let (_, from_offset) = seg.time_index().lookup(timestamp_ms);
            let from = from_offset
                .max(self.log_start_offset)
                .max(seg.base_offset());
            let (_, pos) = seg.offset_index().lookup(from);
            let mut found = None;
            seg.scan(u64::from(pos), false, |batch, _| {
                if batch.max_timestamp() >= timestamp_ms && batch.last_offset() >= from {
                    found = Some(batch);
                    std::ops::ControlFlow::Break(())
                } else {
                    std::ops::ControlFlow::Continue(())
                }
            })
            .await?;
            if let Some(batch) = found {
                return Ok(Some(exact_timestamp_match(
                    &batch,
                    timestamp_ms,
                    self.log_start_offset,
                )));
            }
        }
        Ok(None)
    }

    /// The greatest timestamp in the log and the offset of the batch that carries it
    /// (from the segments' in-memory maxima: no I/O).
    pub fn max_timestamp_and_offset(&self) -> Option<(i64, Offset)> {
        self.segments
            .values()
            .filter(|s| s.max_timestamp() >= 0)
            .max_by_key(|s| s.max_timestamp())
            .map(|s| (s.max_timestamp(), s.offset_of_max_timestamp()))
    }

    /// Kafka's ListOffsets MAX_TIMESTAMP (-3): the greatest timestamp and the offset of the
    /// first record that carries it, resolved inside its batch (compressed or not) as
    /// Kafka does since 3.8 (KAFKA-16310), not the batch's last offset.
    pub async fn offset_of_max_timestamp(&self) -> Result<Option<(i64, Offset)>, LogError> {
        let Some((max_ts, batch_offset)) = self.max_timestamp_and_offset() else {
            return Ok(None);
        };
        Ok(Some(match self.offset_for_timestamp(max_ts).await? {
            Some((ts, offset)) if ts == max_ts => (ts, offset),
            _ => (max_ts, batch_offset),
        }))
    }

    /// Appends client or coordinator batches: validates them, assigns offsets from the
    /// log end and stamps `leader_epoch`, then writes. The CRC covers neither field, so
    /// the bytes on disk are the received bytes with those two fields filled in.
    pub async fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: LeaderEpoch,
        kind: AppendKind,
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        let batches = match self.check_leader_set(records, kind)? {
            LeaderSet::Duplicate(info) => return Ok(info),
            LeaderSet::New(batches) => batches,
        };
        match self
            .write_leader_sets(vec![batches], leader_epoch, kind, now_ms)
            .await
        {
            Ok(infos) => Ok(infos
                .into_iter()
                .next()
                .expect("one record set, one append info")),
            Err(SetsError::Unwritten(e) | SetsError::Written(e)) => Err(e),
        }
    }

    /// Group commit: the record sets of several produce requests (pipelined on one
    /// connection, in their order) appended as one write when every one of them is new
    /// and valid, each answered with its own offsets. Otherwise (a retried duplicate, a
    /// refused batch, a sequence error, a failed write) the sets are appended one at a
    /// time, so each gets exactly the answer it would have had alone.
    pub async fn append_sets_as_leader(
        &mut self,
        sets: Vec<Bytes>,
        leader_epoch: LeaderEpoch,
        kind: AppendKind,
        now_ms: i64,
    ) -> Vec<Result<LogAppendInfo, LogError>> {
        if sets.len() > 1 {
            let checked: Option<Vec<Vec<RecordBatch>>> = sets
                .iter()
                .map(
                    |records| match self.check_leader_set(records.clone(), kind) {
                        Ok(LeaderSet::New(batches)) => Some(batches),
                        _ => None,
                    },
                )
                .collect();
            if let Some(checked) = checked {
                match self
                    .write_leader_sets(checked, leader_epoch, kind, now_ms)
                    .await
                {
                    Ok(infos) => return infos.into_iter().map(Ok).collect(),
                    // In the log already: appending them again would duplicate them.
                    Err(SetsError::Written(e)) => {
                        let copy = e.to_string();
                        let mut out = vec![Err(e)];
                        out.extend((1..sets.len()).map(|_| {
                            Err(LogError::Io(FsError {
                                op: "append",
                                path: self.dir.clone(),
                                source: std::io::Error::other(copy.clone()),
                            }))
                        }));
                        return out;
                    }
                    Err(SetsError::Unwritten(_)) => {}
                }
            }
        }
        let mut out = Vec::with_capacity(sets.len());
        for records in sets {
            out.push(
                self.append_as_leader(records, leader_epoch, kind, now_ms)
                    .await,
            );
        }
        out
    }

    /// The checks of a leader append that need no offsets: the batches parse, and a
    /// client's are data batches within `max.message.bytes` with consistent counts,
    /// conformed to the topic's compression; a retried batch already in the log is a
    /// duplicate, answered with its original offsets.
    fn check_leader_set(&self, records: Bytes, kind: AppendKind) -> Result<LeaderSet, LogError> {
        let batches = self.parse_batches(records)?;
        if kind != AppendKind::Client {
            return Ok(LeaderSet::New(batches));
        }
        for b in &batches {
            if b.is_control() {
                return Err(LogError::ControlBatchFromClient {
                    tp: self.tp.clone(),
                });
            }
            if b.size_in_bytes() > self.config.max_message_bytes {
                return Err(LogError::RecordTooLarge {
                    tp: self.tp.clone(),
                    size: b.size_in_bytes(),
                    max: self.config.max_message_bytes,
                });
            }
            if i64::from(b.record_count()) != i64::from(b.last_offset_delta()) + 1 {
                return Err(LogError::InconsistentRecordCount {
                    tp: self.tp.clone(),
                    offset: b.base_offset(),
                    record_count: b.record_count(),
                    span: i64::from(b.last_offset_delta()) + 1,
                });
            }
            if let Some(dup) = self.producer_state.find_duplicate(b) {
                return Ok(LeaderSet::Duplicate(LogAppendInfo {
                    first_offset: dup.base_offset,
                    last_offset: dup.last_offset,
                    max_timestamp: dup.timestamp_ms,
                    offset_of_max_timestamp: dup.last_offset,
                    record_count: 0,
                    log_start_offset: self.log_start_offset,
                    duplicate: true,
                    completed_txns: Vec::new(),
                    log_append_time_ms: -1,
                }));
            }
        }
        self.conform_client_batches(batches).map(LeaderSet::New)
    }

    /// Writes checked record sets as one append: offsets assigned from the log end in
    /// order, one roll check, the producer state validated for every batch, one write
    /// of them all. One append info per set.
    async fn write_leader_sets(
        &mut self,
        sets: Vec<Vec<RecordBatch>>,
        leader_epoch: LeaderEpoch,
        kind: AppendKind,
        now_ms: i64,
    ) -> Result<Vec<LogAppendInfo>, SetsError> {
        let append_time =
            (kind == AppendKind::Client && self.config.log_append_time).then_some(now_ms);
        let origin = match kind {
            AppendKind::Client => AppendOrigin::Client,
            AppendKind::Coordinator => AppendOrigin::Coordinator,
        };
        let mut next = self.log_end_offset;
        let mut placements = Vec::with_capacity(sets.iter().map(Vec::len).sum());
        for b in sets.iter().flatten() {
            let last = Offset(next.0 + i64::from(b.last_offset_delta()));
            placements.push(BatchPlacement {
                base_offset: next,
                last_offset: last,
                max_timestamp: append_time.unwrap_or_else(|| b.max_timestamp()),
                epoch: leader_epoch,
                size: b.size_in_bytes() as u32,
            });
            next = Offset(last.0 + 1);
        }
        // Roll first: it snapshots producer state, which must not change between
        // validation and commit.
        self.maybe_roll(&placements, now_ms)
            .await
            .map_err(SetsError::Unwritten)?;
        let mut producer_append = self.producer_state.begin_append(origin);
        for (b, p) in sets.iter().flatten().zip(&placements) {
            producer_append
                .append(&self.producer_state, b, p.base_offset)
                .map_err(|source| {
                    SetsError::Unwritten(LogError::Producer {
                        tp: self.tp.clone(),
                        source,
                    })
                })?;
        }
        let total = placements.iter().map(|p| p.size as usize).sum();
        let mut buf = Vec::with_capacity(total);
        for (b, p) in sets.iter().flatten().zip(&placements) {
            let at = buf.len();
            buf.extend_from_slice(b.as_bytes());
            stamp_offset_and_epoch(&mut buf[at..], p.base_offset, leader_epoch);
            if let Some(t) = append_time {
                stamp_log_append_time(&mut buf[at..], t);
            }
        }
        self.active_segment_mut()
            .append(Cow::Owned(buf), &placements)
            .await
            .map_err(|e| SetsError::Unwritten(e.into()))?;
        let completed = self.producer_state.commit(producer_append);
        let batches: Vec<RecordBatch> = sets.iter().flatten().cloned().collect();
        let whole = self
            .after_append(&placements, &completed, &batches, now_ms)
            .await
            .map_err(SetsError::Written)?;
        let mut infos = Vec::with_capacity(sets.len());
        let mut from = 0;
        for set in &sets {
            let to = from + set.len();
            let mut info = self.append_info(&placements[from..to], set, Vec::new());
            info.log_append_time_ms = append_time.unwrap_or(-1);
            infos.push(info);
            from = to;
        }
        // Client data batches complete no transaction; markers come alone.
        if let Some(first) = infos.first_mut() {
            first.completed_txns = whole.completed_txns;
        }
        Ok(infos)
    }

    /// Kafka's `LogValidator` on client batches: keys on compacted topics, the topic's
    /// compression (a batch is re-encoded only when its codec differs).
    fn conform_client_batches(
        &self,
        batches: Vec<RecordBatch>,
    ) -> Result<Vec<RecordBatch>, LogError> {
        if !self.config.compact && self.config.compression == validate::TopicCompression::Producer {
            return Ok(batches);
        }
        let rejected = |source| LogError::Rejected {
            tp: self.tp.clone(),
            source,
        };
        let mut out = Vec::with_capacity(batches.len());
        for b in batches {
            if self.config.compact {
                validate::check_keys_for_compaction(&b, &self.tp.to_string()).map_err(rejected)?;
            }
            match validate::recompress(&b, self.config.compression).map_err(rejected)? {
                Some(bytes) => out.push(RecordBatch::parse(bytes, 0).map_err(|source| {
                    LogError::InvalidBatch {
                        tp: self.tp.clone(),
                        source,
                    }
                })?),
                None => out.push(b),
            }
        }
        Ok(out)
    }

    /// Appends batches fetched from another log (mirror or replica fetcher) exactly as
    /// received: base offsets and partition leader epochs are kept, the first batch must
    /// start at or after the log end and each next one after the previous one (a
    /// compacted source leaves gaps). Every batch's CRC is verified here. Producer state,
    /// epoch cache and indexes are still updated from the headers.
    pub async fn append_passthrough(
        &mut self,
        records: Bytes,
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        let batches = self.parse_batches(records.clone())?;
        self.append_parsed_passthrough(records, &batches, now_ms)
            .await
    }

    /// [`append_passthrough`](Self::append_passthrough) for a caller that has parsed and
    /// verified the batches itself (the mirror fetcher splits each fetched record set
    /// with [`RecordBatch::parse_verified`] to find its complete batches), so their
    /// CRC32C is not computed a second time here.
    ///
    /// Contract: `batches` are `records` split into its batches, in order: each one a
    /// slice of `records` (same memory, not a copy), together covering all of it; and
    /// each was checked by `RecordBatch::parse_verified` (CRC, and the control record of
    /// a control batch). A caller that cannot promise the CRC check must use
    /// `append_passthrough`, or corrupt data goes to disk unnoticed. The tiling is
    /// checked (cheaply, by address) and a violation is a bug: it panics. Everything
    /// else is checked as in `append_passthrough`: no batches is
    /// [`LogError::EmptyAppend`], offsets must not go below the log end or back
    /// ([`LogError::UnexpectedAppendOffset`]), and producer state validates and
    /// records every batch.
    pub async fn append_passthrough_verified(
        &mut self,
        records: Bytes,
        batches: &[RecordBatch],
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        if batches.is_empty() {
            return Err(LogError::EmptyAppend {
                tp: self.tp.clone(),
            });
        }
        assert_batches_tile(&self.tp, &records, batches);
        self.append_parsed_passthrough(records, batches, now_ms)
            .await
    }

    /// The passthrough append once `batches` (non-empty, with checked headers and CRCs)
    /// are known to be exactly `records`.
    async fn append_parsed_passthrough(
        &mut self,
        records: Bytes,
        batches: &[RecordBatch],
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        // Offsets only go up; gaps are allowed (a compacted source leaves them).
        let mut expected = self.log_end_offset;
        for b in batches {
            if b.base_offset() < expected {
                return Err(LogError::UnexpectedAppendOffset {
                    tp: self.tp.clone(),
                    expected,
                    found: b.base_offset(),
                });
            }
            expected = b.next_offset();
        }
        let placements: Vec<BatchPlacement> = batches
            .iter()
            .map(crate::log::segment::placement_of)
            .collect();
        self.maybe_roll(&placements, now_ms).await?;
        let mut producer_append = self.producer_state.begin_append(AppendOrigin::Replication);
        for b in batches {
            producer_append
                .append(&self.producer_state, b, b.base_offset())
                .map_err(|source| LogError::Producer {
                    tp: self.tp.clone(),
                    source,
                })?;
        }
        // The one copy left on this path: `records` is a slice of a buffer shared with
        // other partitions (a fetch response), so it is copied once, into the owned
        // `Vec<u8>` glommio's `BufferedFile::write_at` takes, or with `log.direct.io`
        // into the aligned buffer of the direct write.
        self.active_segment_mut()
            .append(Cow::Borrowed(&records), &placements)
            .await?;
        let completed = self.producer_state.commit(producer_append);
        self.after_append(&placements, &completed, batches, now_ms)
            .await
    }

    fn parse_batches(&self, records: Bytes) -> Result<Vec<RecordBatch>, LogError> {
        let batches = BatchIter::new(records, 0, true)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| LogError::InvalidBatch {
                tp: self.tp.clone(),
                source,
            })?;
        if batches.is_empty() {
            return Err(LogError::EmptyAppend {
                tp: self.tp.clone(),
            });
        }
        Ok(batches)
    }

    async fn after_append(
        &mut self,
        placements: &[BatchPlacement],
        completed: &[CompletedTxn],
        batches: &[RecordBatch],
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        let mut epoch_changed = false;
        for p in placements {
            if p.epoch.0 >= 0 {
                epoch_changed |= self.epoch_cache.assign(p.epoch, p.base_offset);
            }
        }
        for t in completed.iter().filter(|t| t.is_aborted) {
            self.active_segment_mut().append_aborted_txn(AbortedTxn {
                producer_id: t.producer_id,
                first_offset: t.first_offset,
                last_offset: t.last_offset,
                last_stable_offset: t.last_stable_offset,
            });
        }
        if batches.iter().any(|b| b.is_control() && is_pid_reset(b)) {
            tracing::info!(tp = %self.tp, "MIRROR_PID_RESET appended: producer state cleared");
        }
        let last = placements[placements.len() - 1].last_offset;
        self.log_end_offset = Offset(last.0 + 1);
        self.producer_state.set_map_end_offset(self.log_end_offset);
        if epoch_changed {
            // Not written now (Kafka stopped fsyncing it here, KAFKA-15046; we skip the
            // write too): an epoch that starts in the active segment is rebuilt from its
            // batch headers by the recovery scan of an unclean start, which begins at or
            // before that segment, and the roll that seals the segment, or the close,
            // writes the checkpoint durably. Every partition of a failover appends at
            // a new epoch, so this saves each a file replacement and two fsyncs there.
            self.epochs_unwritten = true;
        }
        let record_count = batches
            .iter()
            .map(|b| i64::from(b.record_count()))
            .sum::<i64>();
        self.unflushed_records += record_count.max(1) as u64;
        if self.unflushed_records >= self.config.flush_messages
            || now_ms.saturating_sub(self.last_flush_ms).max(0) as u64 >= self.config.flush_ms
        {
            self.flush(now_ms).await?;
        }
        Ok(self.append_info(placements, batches, completed.to_vec()))
    }

    /// What an append of `batches` at `placements` (non-empty) reports.
    fn append_info(
        &self,
        placements: &[BatchPlacement],
        batches: &[RecordBatch],
        completed_txns: Vec<CompletedTxn>,
    ) -> LogAppendInfo {
        let first = placements[0].base_offset;
        let (max_timestamp, offset_of_max_timestamp) = placements
            .iter()
            .map(|p| (p.max_timestamp, p.last_offset))
            .fold((-1, first), |acc, x| if x.0 > acc.0 { x } else { acc });
        LogAppendInfo {
            first_offset: first,
            last_offset: placements[placements.len() - 1].last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            record_count: batches.iter().map(|b| i64::from(b.record_count())).sum(),
            log_start_offset: self.log_start_offset,
            duplicate: false,
            completed_txns,
            log_append_time_ms: -1,
        }
    }

    async fn maybe_roll(
        &mut self,
        placements: &[BatchPlacement],
        now_ms: i64,
    ) -> Result<(), LogError> {
        let (Some(first), Some(last)) = (placements.first(), placements.last()) else {
            return Ok(());
        };
        let size: u64 = placements.iter().map(|p| u64::from(p.size)).sum();
        let active = self.active_segment();
        let full = active.size() + size > self.config.segment_bytes;
        // Kafka's maxSegmentMs: a compacted log also rolls once its active segment is
        // older than `max.compaction.lag.ms`, so those records become cleanable in time.
        let roll_ms = if self.config.compact {
            self.config
                .segment_ms
                .min(self.config.max_compaction_lag_ms)
        } else {
            self.config.segment_ms
        };
        let old = active.is_older_than(roll_ms, now_ms.max(first.max_timestamp));
        if active.is_empty() || !(full || old || !active.can_hold_offset(last.last_offset)) {
            return Ok(());
        }
        self.roll(now_ms).await
    }

    /// Starts a new active segment at the log end: the old one is sealed, flushed and a
    /// producer snapshot is taken at the new base offset (Kafka's roll).
    pub async fn roll(&mut self, now_ms: i64) -> Result<(), LogError> {
        let new_base = self.log_end_offset;
        if self.active_segment().base_offset() == new_base {
            return Ok(());
        }
        let active = self.active_segment_mut();
        active.seal();
        active.flush(true).await?;
        if self.epochs_unwritten {
            // The recovery scan of an unclean start begins at the new segment.
            self.write_epoch_checkpoint().await?;
        }
        self.recovery_point = new_base;
        self.producer_state.remove_expired(now_ms);
        self.write_producer_snapshot().await?;
        let seg = LogSegment::create(
            &self.dir,
            new_base,
            self.config.index_interval_bytes,
            self.config.direct_io,
            now_ms,
        )
        .await?;
        self.segments.insert(new_base, seg);
        fs::sync_dir(&self.dir).await?;
        tracing::debug!(tp = %self.tp, base_offset = new_base.0, "rolled segment");
        Ok(())
    }

    /// Makes the bytes appended so far durable, and nothing else: one fdatasync of the
    /// active segment (a roll fsyncs the segments before it), no index writes, and the
    /// recovery point stays, so that recovery after a crash rescans (and re-indexes) the
    /// tail. A barrier for one record that must survive power loss (a failover's
    /// MIRROR_PID_RESET), at a fraction of [`flush`](Self::flush)'s cost.
    pub async fn sync_data(&mut self) -> Result<(), LogError> {
        self.active_segment_mut().sync_data().await?;
        Ok(())
    }

    /// fsyncs every segment with unflushed data and writes pending index entries.
    pub async fn flush(&mut self, now_ms: i64) -> Result<(), LogError> {
        let from = self.recovery_point;
        let start = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(from, |(b, _)| *b);
        for seg in self.segments.range_mut(start..).map(|(_, s)| s) {
            seg.flush(true).await?;
        }
        self.recovery_point = self.log_end_offset;
        self.unflushed_records = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// Cuts the log so that it ends at or before `offset` (at the start of the batch that
    /// holds it). Indexes, epoch cache, producer state (reloaded from the newest snapshot
    /// at or below the new end and replayed) and transaction index follow.
    pub async fn truncate_to(&mut self, offset: Offset) -> Result<(), LogError> {
        if offset >= self.log_end_offset {
            return Ok(());
        }
        if offset <= self.log_start_offset {
            return self.truncate_fully_and_start_at(offset).await;
        }
        self.generation += 1;
        self.first_dirty_offset = self.first_dirty_offset.min(offset);
        let doomed: Vec<Offset> = self.segments.range(offset..).map(|(b, _)| *b).collect();
        for base in doomed {
            if let Some(seg) = self.segments.remove(&base) {
                seg.delete().await?;
            }
        }
        if self.segments.is_empty() {
            return self.truncate_fully_and_start_at(offset).await;
        }
        let active = self.active_segment_mut();
        let removed = active.truncate_to(offset).await?;
        let new_end = active.next_offset();
        if new_end < self.log_start_offset {
            // The cut fell inside the batch that holds the log start (DeleteRecords can
            // put it mid-batch): the log start never moves back, so restart empty there.
            let start = self.log_start_offset;
            return self.truncate_fully_and_start_at(start).await;
        }
        tracing::info!(tp = %self.tp, offset = offset.0, new_end = new_end.0, bytes = removed, "truncated log");
        self.log_end_offset = new_end;
        self.high_watermark = self.high_watermark.min(new_end);
        self.recovery_point = self.recovery_point.min(new_end);
        if self.epoch_cache.truncate_from_end(new_end) {
            self.write_epoch_checkpoint().await?;
        }
        self.active_segment_mut().flush(true).await?;
        self.rebuild_producer_state(new_end).await?;
        Ok(())
    }

    /// Cuts the log back to end at `offset`: [`truncate_to`](Self::truncate_to), or, when
    /// that is at or before the log start, [`truncate_fully_and_start_at`](Self::truncate_fully_and_start_at).
    pub async fn cut_to(&mut self, offset: Offset) -> Result<(), LogError> {
        if offset <= self.log_start_offset {
            self.truncate_fully_and_start_at(offset).await
        } else {
            self.truncate_to(offset).await
        }
    }

    /// Deletes every segment and starts an empty log at `offset` (log start = log end).
    pub async fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), LogError> {
        self.generation += 1;
        self.first_dirty_offset = offset;
        let all: Vec<Offset> = self.segments.keys().copied().collect();
        for base in all {
            if let Some(seg) = self.segments.remove(&base) {
                seg.delete().await?;
            }
        }
        let now = self.last_flush_ms;
        let seg = LogSegment::create(
            &self.dir,
            offset,
            self.config.index_interval_bytes,
            self.config.direct_io,
            now,
        )
        .await?;
        self.segments.insert(offset, seg);
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.high_watermark = offset;
        self.recovery_point = offset;
        self.epoch_cache.clear();
        self.write_epoch_checkpoint().await?;
        self.producer_state.clear();
        self.producer_state.set_map_end_offset(offset);
        self.delete_snapshots(|_| true).await?;
        self.write_log_start_checkpoint().await?;
        fs::sync_dir(&self.dir).await?;
        tracing::info!(tp = %self.tp, offset = offset.0, "truncated fully, log restarts");
        Ok(())
    }

    /// DeleteRecords: moves the log start forward (not past the high watermark) and
    /// deletes segments that lie wholly below it.
    pub async fn advance_log_start_offset(&mut self, offset: Offset) -> Result<Offset, LogError> {
        if offset > self.high_watermark {
            return Err(self.out_of_range(offset));
        }
        if offset <= self.log_start_offset {
            return Ok(self.log_start_offset);
        }
        self.log_start_offset = offset;
        self.write_log_start_checkpoint().await?;
        self.after_log_start_moved().await?;
        Ok(self.log_start_offset)
    }

    /// Retention: deletes whole non-active segments past `retention.ms` (newest record
    /// older) or beyond `retention.bytes`, oldest first, when `cleanup.policy` includes
    /// `delete`; and always those below the log start.
    /// Returns the number of segments deleted.
    pub async fn delete_old_segments(&mut self, now_ms: i64) -> Result<usize, LogError> {
        let mut deleted = 0;
        let mut total = self.size_in_bytes() as i64;
        loop {
            if self.segments.len() < 2 {
                break;
            }
            let Some((&base, seg)) = self.segments.iter().next() else {
                break;
            };
            let next_base = self
                .segments
                .keys()
                .nth(1)
                .copied()
                .unwrap_or(self.log_end_offset);
            // Never delete data consumers may not have seen yet.
            if next_base > self.high_watermark {
                break;
            }
            // Only `cleanup.policy=delete` (alone or with compact) deletes by age and
            // size; a compact-only log keeps every segment the cleaner left.
            let by_time = self.config.delete
                && self.config.retention_ms >= 0
                && seg.max_timestamp() >= 0
                && now_ms - seg.max_timestamp() > self.config.retention_ms;
            let by_size = self.config.delete
                && self.config.retention_bytes >= 0
                && total - seg.size() as i64 >= self.config.retention_bytes;
            let below_start = next_base <= self.log_start_offset;
            if !(by_time || by_size || below_start) {
                break;
            }
            total -= seg.size() as i64;
            self.generation += 1;
            if let Some(seg) = self.segments.remove(&base) {
                tracing::info!(tp = %self.tp, base_offset = base.0, by_time, by_size, "deleting segment");
                seg.delete().await?;
            }
            deleted += 1;
            if next_base > self.log_start_offset {
                self.log_start_offset = next_base;
                self.write_log_start_checkpoint().await?;
            }
        }
        if deleted > 0 {
            self.after_log_start_moved().await?;
        }
        Ok(deleted)
    }

    async fn after_log_start_moved(&mut self) -> Result<(), LogError> {
        let start = self.log_start_offset;
        // Segments entirely below the new start go.
        loop {
            if self.segments.len() < 2 {
                break;
            }
            let next = self
                .segments
                .keys()
                .nth(1)
                .copied()
                .unwrap_or(self.log_end_offset);
            if next > start {
                break;
            }
            if let Some((_, seg)) = self.segments.pop_first() {
                self.generation += 1;
                seg.delete().await?;
            }
        }
        if self.epoch_cache.truncate_from_start(start) {
            self.write_epoch_checkpoint().await?;
        }
        let newest = self
            .snapshot_offsets()
            .into_iter()
            .filter(|o| *o <= start)
            .max();
        self.delete_snapshots(|o| o < start && Some(o) != newest)
            .await?;
        Ok(())
    }

    /// Forgets producers idle longer than `producer.id.expiration.ms`.
    pub fn remove_expired_producers(&mut self, now_ms: i64) {
        self.producer_state.remove_expired(now_ms);
    }

    /// Clean close: flush, snapshot producer state at the log end, checkpoint, and leave
    /// the marker that lets the next open skip recovery.
    pub async fn close(mut self, now_ms: i64) -> Result<(), LogError> {
        self.flush(now_ms).await?;
        self.write_producer_snapshot().await?;
        self.write_epoch_checkpoint().await?;
        let segments = std::mem::take(&mut self.segments);
        for (_, seg) in segments {
            seg.close().await?;
        }
        fs::write_atomic(&self.dir.join(CLEAN_SHUTDOWN_FILE), Vec::new()).await?;
        tracing::debug!(tp = %self.tp, leo = self.log_end_offset.0, "closed log");
        Ok(())
    }

    /// Removes the partition directory and everything in it.
    pub async fn delete(mut self) -> Result<(), LogError> {
        let segments = std::mem::take(&mut self.segments);
        for (_, seg) in segments {
            seg.delete().await?;
        }
        fs::remove_dir_all(&self.dir).await?;
        Ok(())
    }

    pub(crate) async fn write_epoch_checkpoint(&mut self) -> Result<(), LogError> {
        let text = self.epoch_cache.to_checkpoint();
        fs::write_atomic(&self.dir.join(EPOCH_CHECKPOINT_FILE), text.into_bytes()).await?;
        self.epochs_unwritten = false;
        Ok(())
    }

    pub(crate) async fn write_log_start_checkpoint(&self) -> Result<(), LogError> {
        let text = format!(
            "0\n1\n{} {} {}\n",
            self.tp.topic, self.tp.partition, self.log_start_offset.0
        );
        fs::write_atomic(&self.dir.join(LOG_START_CHECKPOINT_FILE), text.into_bytes()).await?;
        Ok(())
    }

    /// Writes the producer state as of the log end to `<log end>.snapshot`.
    pub async fn write_producer_snapshot(&mut self) -> Result<(), LogError> {
        self.producer_state.set_map_end_offset(self.log_end_offset);
        let path = self.dir.join(file_name(self.log_end_offset, ".snapshot"));
        fs::write_atomic(&path, self.producer_state.encode_snapshot()).await?;
        self.snapshots.insert(self.log_end_offset);
        Ok(())
    }

    /// Offsets of the producer snapshots on disk, ascending (kept in memory: listing the
    /// directory is the one file operation io_uring cannot do).
    pub(crate) fn snapshot_offsets(&self) -> Vec<Offset> {
        self.snapshots.iter().copied().collect()
    }

    pub(crate) async fn delete_snapshots(
        &mut self,
        doomed: impl Fn(Offset) -> bool,
    ) -> Result<(), LogError> {
        for off in self.snapshot_offsets() {
            if doomed(off) {
                fs::remove_file(&self.dir.join(file_name(off, ".snapshot"))).await?;
                self.snapshots.remove(&off);
            }
        }
        Ok(())
    }

    /// Reloads producer state from the newest valid snapshot at or below `end` and
    /// replays the batches from there to `end`. Newer snapshots are deleted.
    pub(crate) async fn rebuild_producer_state(&mut self, end: Offset) -> Result<(), LogError> {
        self.delete_snapshots(|o| o > end).await?;
        let offsets = self.snapshot_offsets();
        let mut state = None;
        for off in offsets.into_iter().rev() {
            let path = self.dir.join(file_name(off, ".snapshot"));
            let Some(bytes) = fs::read_all(&path).await? else {
                continue;
            };
            match ProducerStateManager::decode_snapshot(
                &bytes,
                self.config.producer_id_expiration_ms,
            ) {
                Ok(mut psm) if off >= self.log_start_offset || off == end => {
                    psm.set_map_end_offset(off);
                    state = Some(psm);
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(tp = %self.tp, path = %path.display(), error = %e, "discarding corrupt producer snapshot");
                    fs::remove_file(&path).await?;
                    self.snapshots.remove(&off);
                }
            }
        }
        let mut psm = state.unwrap_or_else(|| {
            let mut p = ProducerStateManager::new(self.config.producer_id_expiration_ms);
            p.set_map_end_offset(self.log_start_offset);
            p
        });
        let from = psm.map_end_offset();
        if from < end {
            let start = self
                .segments
                .range(..=from)
                .next_back()
                .map_or(from, |(b, _)| *b);
            for seg in self.segments.range(start..).map(|(_, s)| s) {
                let mut pending = Vec::new();
                seg.scan(0, false, |batch, _| {
                    if batch.base_offset() >= end {
                        return std::ops::ControlFlow::Break(());
                    }
                    if batch.last_offset() >= from {
                        pending.push(batch);
                    }
                    std::ops::ControlFlow::Continue(())
                })
                .await?;
                for batch in pending {
                    let mut a = psm.begin_append(AppendOrigin::Replication);
                    if a.append(&psm, &batch, batch.base_offset()).is_ok() {
                        psm.commit(a);
                    }
                }
            }
        }
        psm.set_map_end_offset(end);
        psm.on_high_watermark_updated(self.high_watermark);
        self.producer_state = psm;
        Ok(())
    }
}

/// Panics unless `batches` are consecutive slices of `records` (the same memory) that
/// cover all of it: the contract of [`PartitionLog::append_passthrough_verified`].
/// Comparing addresses costs nothing per byte, unlike comparing contents.
fn assert_batches_tile(tp: &TopicPartition, records: &Bytes, batches: &[RecordBatch]) {
    let mut at = 0usize;
    for b in batches {
        let bytes = b.as_bytes();
        let end = at.saturating_add(bytes.len());
        let same = records
            .get(at..end)
            .is_some_and(|r| r.as_ptr() == bytes.as_ptr());
        assert!(
            same,
            "{tp}: verified passthrough batch at offset {} is not bytes {at}..{end} of the \
             records ({} bytes)",
            b.base_offset(),
            records.len()
        );
        at = end;
    }
    assert_eq!(
        at,
        records.len(),
        "{tp}: verified passthrough batches cover {at} of {} record bytes",
        records.len()
    );
}

fn is_pid_reset(batch: &RecordBatch) -> bool {
    matches!(batch.control_record(), Ok(c) if c.kind == ControlType::MirrorPidReset)
}

/// Resolves a timestamp look-up inside the batch that holds the answer: the first record
/// whose timestamp is at or after `timestamp_ms`. Uncompressed batches are read in place;
/// a compressed one is decompressed here, for this look-up only (the data path never
/// decompresses).
fn exact_timestamp_match(
    batch: &RecordBatch,
    timestamp_ms: i64,
    log_start: Offset,
) -> (i64, Offset) {
    let fallback = (batch.max_timestamp(), batch.base_offset().max(log_start));
    if batch.is_log_append_time() {
        return fallback;
    }
    match batch_records(batch) {
        Ok(records) => records
            .iter()
            .map(|r| {
                (
                    batch.base_timestamp() + r.timestamp_delta,
                    Offset(batch.base_offset().0 + i64::from(r.offset_delta)),
                )
            })
            .find(|(ts, off)| *ts >= timestamp_ms && *off >= log_start)
            .unwrap_or(fallback),
        Err(e) => {
            tracing::warn!(offset = batch.base_offset().0, error = %e, "cannot decode batch for a timestamp look-up");
            fallback
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ProducerEpoch, ProducerId};
    use crate::wire::batch::{BatchBuilder, BatchError};
    use crate::wire::records::encode_simple_records;

    use crate::test_support::run_glommio as run;

    async fn open(dir: &Path) -> PartitionLog {
        PartitionLog::open(
            dir,
            TopicPartition::new("t", 0),
            None,
            LogConfig::default(),
            0,
        )
        .await
        .expect("log opens")
    }

    /// A batch with a fixed base offset and epoch, as a mirror fetcher receives it.
    fn source_batch(base_offset: i64, epoch: i32, records: i32) -> Bytes {
        BatchBuilder {
            base_offset: Offset(base_offset),
            partition_leader_epoch: LeaderEpoch(epoch),
            last_offset_delta: records - 1,
            record_count: records,
            base_timestamp: base_offset,
            max_timestamp: base_offset + i64::from(records) - 1,
            ..BatchBuilder::default()
        }
        .build(&encode_simple_records(records, 0, 16))
    }

    fn concat(parts: &[Bytes]) -> Bytes {
        parts.concat().into()
    }

    /// `records` split the way the mirror fetcher splits a fetched record set: each
    /// batch a CRC-verified slice of it.
    fn split(records: &Bytes) -> Vec<RecordBatch> {
        BatchIter::new(records.clone(), 0, true)
            .collect::<Result<_, _>>()
            .expect("valid batches")
    }

    #[test]
    fn verified_passthrough_keeps_offsets_and_epochs_allows_gaps_and_refuses_going_back() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = open(dir.path()).await;
            let records = concat(&[source_batch(0, 5, 4), source_batch(4, 7, 2)]);
            let info = log
                .append_passthrough_verified(records.clone(), &split(&records), 0)
                .await
                .expect("append");
            assert_eq!(
                (info.first_offset, info.last_offset, info.record_count),
                (Offset(0), Offset(5), 6)
            );
            assert_eq!(log.log_end_offset(), Offset(6));
            // A compacted source leaves offset gaps: accepted as they are.
            let gap = source_batch(7, 7, 1);
            log.append_passthrough_verified(gap.clone(), &split(&gap), 0)
                .await
                .expect("gap");
            assert_eq!(log.log_end_offset(), Offset(8));
            let size = log.size_in_bytes();

            // Below the log end: refused, nothing written.
            let back = source_batch(5, 7, 1);
            let err = log
                .append_passthrough_verified(back.clone(), &split(&back), 0)
                .await
                .expect_err("below the log end");
            assert!(
                matches!(
                    err,
                    LogError::UnexpectedAppendOffset {
                        expected: Offset(8),
                        found: Offset(5),
                        ..
                    }
                ),
                "{err:?}"
            );
            // Going back inside one append: refused as a whole.
            let records = concat(&[source_batch(8, 7, 3), source_batch(9, 7, 1)]);
            let err = log
                .append_passthrough_verified(records.clone(), &split(&records), 0)
                .await
                .expect_err("backwards inside the append");
            assert!(
                matches!(
                    err,
                    LogError::UnexpectedAppendOffset {
                        expected: Offset(11),
                        found: Offset(9),
                        ..
                    }
                ),
                "{err:?}"
            );
            assert_eq!(log.log_end_offset(), Offset(8));
            assert_eq!(log.size_in_bytes(), size);

            // Stored byte for byte, epochs from the source.
            let data = log.read(Offset(0), 1 << 20).await.expect("read");
            let expected = concat(&[
                source_batch(0, 5, 4),
                source_batch(4, 7, 2),
                source_batch(7, 7, 1),
            ]);
            assert_eq!(data.records, expected);
            assert_eq!(
                log.end_offset_for_epoch(LeaderEpoch(5)),
                (LeaderEpoch(5), Offset(4))
            );
        });
    }

    #[test]
    fn verified_passthrough_trusts_the_callers_crc_check() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = open(dir.path()).await;
            let mut corrupt = source_batch(0, 1, 2).to_vec();
            if let Some(last) = corrupt.last_mut() {
                *last ^= 0xff;
            }
            let corrupt = Bytes::from(corrupt);
            let err = log
                .append_passthrough(corrupt.clone(), 0)
                .await
                .expect_err("append_passthrough verifies the CRC");
            assert!(
                matches!(
                    err,
                    LogError::InvalidBatch {
                        source: BatchError::CrcMismatch { .. },
                        ..
                    }
                ),
                "{err:?}"
            );
            // Batches parsed without the CRC check stand for a caller that checked it:
            // not computed again, so this one goes through.
            let unchecked = vec![RecordBatch::parse(corrupt.clone(), 0).expect("header")];
            log.append_passthrough_verified(corrupt, &unchecked, 0)
                .await
                .expect("the CRC is not checked twice");
            assert_eq!(log.log_end_offset(), Offset(2));
        });
    }

    #[test]
    fn verified_passthrough_updates_producer_state_and_refuses_empty_appends() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = open(dir.path()).await;
            let txn = BatchBuilder {
                base_offset: Offset(10),
                last_offset_delta: 2,
                record_count: 3,
                producer_id: ProducerId(42),
                producer_epoch: ProducerEpoch(1),
                base_sequence: 0,
                ..BatchBuilder::default()
            }
            .transactional(true)
            .build(&encode_simple_records(3, 0, 8));
            log.append_passthrough_verified(txn.clone(), &split(&txn), 0)
                .await
                .expect("transactional batch");
            assert_eq!(log.producer_state().len(), 1);
            assert_eq!(log.first_unstable_offset(), Some(Offset(10)));

            let err = log
                .append_passthrough_verified(Bytes::new(), &[], 0)
                .await
                .expect_err("nothing to append");
            assert!(matches!(err, LogError::EmptyAppend { .. }), "{err:?}");
            assert_eq!(log.log_end_offset(), Offset(13));
        });
    }

    #[test]
    fn batches_must_be_slices_of_the_records_they_claim_to_be() {
        let tp = TopicPartition::new("t", 0);
        let records = concat(&[source_batch(0, 1, 1), source_batch(1, 1, 1)]);
        let batches = split(&records);
        assert_batches_tile(&tp, &records, &batches);
        let copy = Bytes::copy_from_slice(&records);
        let refused = |records: Bytes, batches: Vec<RecordBatch>| {
            let tp = tp.clone();
            std::panic::catch_unwind(move || assert_batches_tile(&tp, &records, &batches)).is_err()
        };
        // Equal bytes elsewhere in memory, a batch missing, a batch out of place.
        assert!(refused(copy, batches.clone()));
        assert!(refused(records.clone(), batches[..1].to_vec()));
        assert!(refused(records.clone(), batches[1..].to_vec()));
        assert!(refused(
            records.slice(..batches[0].size_in_bytes()),
            batches
        ));
    }
}
