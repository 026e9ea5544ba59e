//! Property tests of the partition log against a small in-memory model.
//!
//! Random sequences of appends, rolls, truncations, retention, DeleteRecords, high
//! watermark moves, flushes and clean or unclean reopens run against a real log; after
//! every step the log must agree with the model on log start and end, the exact bytes
//! served from the log start, reads from arbitrary offsets, out-of-range errors, the
//! leader-epoch cache and `end_offset_for_epoch` (Kafka's OffsetsForLeaderEpoch).

mod common;

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use dataplane::log::{AppendKind, LogConfig, LogError, PartitionLog};
use dataplane::types::{LeaderEpoch, Offset};
use dataplane::wire::batch::{stamp_offset_and_epoch, BatchBuilder};
use dataplane::wire::records::encode_simple_records;
use dataplane::wire::BatchIter;
use proptest::prelude::*;

const RETENTION_BYTES: i64 = 6000;

fn props_config() -> LogConfig {
    LogConfig {
        retention_bytes: RETENTION_BYTES,
        // Retention by size only: time plays no part in these tests.
        retention_ms: -1,
        ..small_config()
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// One append call of several batches, each (record count, value size); the
    /// leader epoch grows by `epoch_bump` first.
    Append {
        batches: Vec<(i32, usize)>,
        epoch_bump: i32,
    },
    Roll,
    /// Truncate to an offset picked by the selector in [log start - 3, log end].
    TruncateTo(u16),
    /// Retention; `hw_to_end` moves the high watermark to the log end first.
    DeleteOldSegments {
        hw_to_end: bool,
    },
    /// DeleteRecords to an offset in [log start, high watermark], or above the high
    /// watermark (must fail) when `beyond_hw`.
    AdvanceLogStart {
        sel: u16,
        beyond_hw: bool,
    },
    UpdateHighWatermark(u16),
    ReopenClean,
    ReopenCrash,
    Flush,
    /// Read at an offset in [log start, log end] with a byte limit.
    Read {
        sel: u16,
        max_bytes: usize,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let append = (
        prop::collection::vec((1i32..=4, 0usize..=200), 1..=3),
        prop_oneof![4 => Just(0i32), 1 => 1i32..=2],
    )
        .prop_map(|(batches, epoch_bump)| Op::Append {
            batches,
            epoch_bump,
        });
    prop_oneof![
        8 => append,
        1 => Just(Op::Roll),
        2 => any::<u16>().prop_map(Op::TruncateTo),
        2 => any::<bool>().prop_map(|hw_to_end| Op::DeleteOldSegments { hw_to_end }),
        2 => (any::<u16>(), prop::bool::weighted(0.2))
            .prop_map(|(sel, beyond_hw)| Op::AdvanceLogStart { sel, beyond_hw }),
        1 => any::<u16>().prop_map(Op::UpdateHighWatermark),
        1 => Just(Op::ReopenClean),
        1 => Just(Op::ReopenCrash),
        1 => Just(Op::Flush),
        2 => (any::<u16>(), 1usize..=3000).prop_map(|(sel, max_bytes)| Op::Read { sel, max_bytes }),
    ]
}

/// A batch as the log must store it.
#[derive(Debug, Clone)]
struct MBatch {
    base: i64,
    last: i64,
    bytes: Bytes,
}

/// What Kafka guarantees about the log, tracked independently of the implementation.
#[derive(Debug, Default)]
struct Model {
    /// Every batch still on disk (from the first segment's base on), in offset order.
    batches: Vec<MBatch>,
    log_start: i64,
    log_end: i64,
    high_watermark: i64,
    /// The leader-epoch cache as Kafka keeps it: (epoch, start offset).
    epochs: Vec<(i32, i64)>,
    /// The epoch of the next append (never decreases).
    epoch: i32,
    next_timestamp: i64,
}

impl Model {
    fn batch_holding(&self, offset: i64) -> Option<&MBatch> {
        self.batches
            .iter()
            .find(|b| b.base <= offset && offset <= b.last)
    }

    fn bytes_from(&self, base: i64) -> u64 {
        self.batches
            .iter()
            .filter(|b| b.base >= base)
            .map(|b| b.bytes.len() as u64)
            .sum()
    }

    fn bytes_between(&self, from: i64, to: i64) -> u64 {
        self.batches
            .iter()
            .filter(|b| b.base >= from && b.base < to)
            .map(|b| b.bytes.len() as u64)
            .sum()
    }

    /// Kafka's assign for a new epoch at the log end: an entry that starts at the same
    /// offset (an epoch with no data left) is replaced.
    fn assign_epoch(&mut self, epoch: i32, start: i64) {
        if self.epochs.last().is_none_or(|&(e, _)| e != epoch) {
            assert!(
                self.epochs.last().is_none_or(|&(e, _)| e < epoch),
                "test appends epochs in order"
            );
            self.epochs.retain(|&(_, s)| s < start);
            self.epochs.push((epoch, start));
        }
    }

    /// What an open keeps: Kafka's loader truncates the cache to the recovered log end,
    /// which drops an entry that starts at the log end (an epoch with no data).
    ///
    /// With no data left (log start = log end) Kafka's rules disagree between a clean
    /// open (the checkpointed entry at the log end is dropped) and an unclean one (the
    /// batches still in the first segment below the log start are replayed and the
    /// entry is moved up to the log start again); the model accepts either.
    fn reopened(&mut self, log: &PartitionLog) {
        self.epochs_truncate_end(self.log_end);
        self.epochs_truncate_start(self.log_start);
        if self.log_start == self.log_end {
            let entries = epoch_entries(log);
            assert!(
                entries.len() <= 1 && entries.iter().all(|&(_, s)| s == self.log_end),
                "epochs of an empty log: {entries:?}"
            );
            self.epochs = entries;
        }
        // The log itself knows no committed high watermark: it starts at the end.
        self.high_watermark = self.log_end;
    }

    /// Kafka's truncateFromEnd.
    fn epochs_truncate_end(&mut self, end: i64) {
        self.epochs.retain(|&(_, s)| s < end);
    }

    /// Kafka's truncateFromStart: the entry covering `start` is kept, moved to `start`.
    fn epochs_truncate_start(&mut self, start: i64) {
        if self.epochs.first().is_none_or(|&(_, s)| s >= start) {
            return;
        }
        let covered = self.epochs.iter().filter(|&&(_, s)| s <= start).count();
        let kept = self.epochs[covered - 1].0;
        self.epochs.drain(..covered - 1);
        self.epochs[0] = (kept, start);
    }

    /// Kafka's OffsetsForLeaderEpoch: the end of `epoch` is the start of the first
    /// higher epoch, or the log end for the latest one.
    fn end_offset_for(&self, epoch: i32) -> (i32, i64) {
        if self.epochs.last().is_some_and(|&(e, _)| e == epoch) {
            return (epoch, self.log_end);
        }
        let Some(higher) = self.epochs.iter().position(|&(e, _)| e > epoch) else {
            return (-1, -1);
        };
        let start = self.epochs[higher].1;
        match higher.checked_sub(1) {
            None => (epoch, start),
            Some(floor) => (self.epochs[floor].0, start),
        }
    }

    /// Truncation with the log's documented semantics: the log ends at the start of
    /// the batch holding `offset`; at or below the log start it restarts empty there.
    fn truncate_to(&mut self, offset: i64) {
        if offset >= self.log_end {
            return;
        }
        if offset <= self.log_start {
            self.batches.clear();
            self.log_start = offset;
            self.log_end = offset;
            self.high_watermark = offset;
            self.epochs.clear();
            return;
        }
        let cut = self.batch_holding(offset).map_or(offset, |b| b.base);
        self.batches.retain(|b| b.base < cut);
        self.log_end = cut;
        self.high_watermark = self.high_watermark.min(cut);
        self.epochs_truncate_end(cut);
    }

    fn move_log_start(&mut self, start: i64) {
        self.log_start = start;
        self.epochs_truncate_start(start);
    }

    /// Drops the batches of segments the log deleted (all below its first base).
    fn forget_below(&mut self, first_base: i64) {
        self.batches.retain(|b| b.base >= first_base);
    }

    /// Simulates Kafka's size-based retention over the given segment bases; returns the
    /// number of segments that must go.
    fn retention(&mut self, bases: &[i64]) -> usize {
        let mut total = self.bytes_from(bases[0]) as i64;
        let mut deleted = 0;
        let mut i = 0;
        while bases.len() - i >= 2 {
            let next_base = bases[i + 1];
            if next_base > self.high_watermark {
                break;
            }
            let size = self.bytes_between(bases[i], next_base) as i64;
            let by_size = total - size >= RETENTION_BYTES;
            let below_start = next_base <= self.log_start;
            if !(by_size || below_start) {
                break;
            }
            total -= size;
            deleted += 1;
            i += 1;
            if next_base > self.log_start {
                self.move_log_start(next_base);
            }
        }
        deleted
    }
}

fn epoch_entries(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.epoch_cache()
        .entries()
        .iter()
        .map(|e| (e.epoch.0, e.start_offset.0))
        .collect()
}

fn pick(sel: u16, lo: i64, hi: i64) -> i64 {
    assert!(lo <= hi);
    lo + i64::from(sel) % (hi - lo + 1)
}

fn build_batch(base: i64, epoch: i32, records: i32, value_size: usize, timestamp_ms: i64) -> Bytes {
    BatchBuilder {
        base_offset: Offset(base),
        partition_leader_epoch: LeaderEpoch(epoch),
        last_offset_delta: records - 1,
        record_count: records,
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms + i64::from(records) - 1,
        ..BatchBuilder::default()
    }
    .build(&encode_simple_records(records, 0, value_size))
}

fn out_of_range<T: std::fmt::Debug>(r: Result<T, LogError>, what: &str) {
    assert!(
        matches!(r, Err(LogError::OffsetOutOfRange { .. })),
        "{what}: expected OffsetOutOfRange, got {r:?}"
    );
}

async fn reopen(dir: &Path) -> PartitionLog {
    open(dir, props_config()).await
}

/// Everything the log must agree with the model on, checked after every operation.
async fn check(log: &PartitionLog, m: &mut Model, step: usize, op: &Op) {
    let ctx = format!("step {step} ({op:?})");
    assert_eq!(log.log_end_offset(), Offset(m.log_end), "{ctx}: log end");
    assert_eq!(
        log.log_start_offset(),
        Offset(m.log_start),
        "{ctx}: log start"
    );
    assert!(
        m.log_start <= m.log_end,
        "{ctx}: log start {} above log end {}",
        m.log_start,
        m.log_end
    );
    assert_eq!(
        log.high_watermark(),
        Offset(m.high_watermark),
        "{ctx}: high watermark"
    );

    // Segments: the first one holds the log start, all start on batch boundaries, and
    // together they hold exactly the model's bytes.
    let bases: Vec<i64> = log.segment_base_offsets().iter().map(|o| o.0).collect();
    assert!(!bases.is_empty(), "{ctx}: no segments");
    assert!(
        bases[0] <= m.log_start,
        "{ctx}: first segment {} starts above log start {}",
        bases[0],
        m.log_start
    );
    m.forget_below(bases[0]);
    for &b in &bases {
        assert!(
            b == m.log_end || m.batches.iter().any(|mb| mb.base == b) || b == m.log_start,
            "{ctx}: segment base {b} is not a batch boundary"
        );
    }
    assert_eq!(
        log.size_in_bytes(),
        m.bytes_from(bases[0]),
        "{ctx}: bytes on disk (segments {bases:?})"
    );

    // The whole readable log, byte for byte.
    let stored = read_all(log, Offset(m.log_start)).await;
    let expected: Vec<&MBatch> = m.batches.iter().filter(|b| b.last >= m.log_start).collect();
    assert_eq!(
        stored.len(),
        expected.len(),
        "{ctx}: batch count from log start {}",
        m.log_start
    );
    for (s, e) in stored.iter().zip(&expected) {
        assert_eq!(s.as_bytes(), &e.bytes, "{ctx}: batch at {} differs", e.base);
    }

    // Out of range on both sides; the log end reads as empty.
    if m.log_start > 0 {
        out_of_range(log.read(Offset(m.log_start - 1), 1 << 20).await, &ctx);
        out_of_range(log.read(Offset(0), 1).await, &ctx);
    }
    out_of_range(log.read(Offset(m.log_end + 1), 1 << 20).await, &ctx);
    let at_end = log
        .read(Offset(m.log_end), 1 << 20)
        .await
        .expect("read at end");
    assert!(at_end.records.is_empty(), "{ctx}: data at the log end");

    // The leader-epoch cache and OffsetsForLeaderEpoch.
    let entries = epoch_entries(log);
    assert_eq!(entries, m.epochs, "{ctx}: leader epoch cache");
    for e in 0..=m.epoch + 1 {
        let (epoch, end) = log.end_offset_for_epoch(LeaderEpoch(e));
        assert_eq!(
            (epoch.0, end.0),
            m.end_offset_for(e),
            "{ctx}: end offset for epoch {e}"
        );
    }
}

/// How long one case may run before it counts as hung.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Set once a case hung: later cases (proptest's shrinking) pass at once, so the
/// report names the case that hung instead of timing out again and again.
static HUNG: AtomicBool = AtomicBool::new(false);

/// Like `common::run`, with a watchdog: a case that hangs fails, naming the step it
/// was at, instead of blocking the test binary forever.
fn run_watched<F, Fut>(progress: Arc<Mutex<String>>, f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    if HUNG.load(Ordering::SeqCst) {
        return;
    }
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .spawn(|| {
            dataplane::reactor::spawn_tick();
            f()
        })
        .expect("executor starts");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(ex.join().is_ok());
    });
    let at = || progress.lock().map(|p| p.clone()).unwrap_or_default();
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(true) => {}
        Ok(false) => panic!("case failed at {}", at()),
        Err(_) => {
            HUNG.store(true, Ordering::SeqCst);
            panic!("case hung for {CASE_TIMEOUT:?} at {}", at());
        }
    }
}

fn run_case(ops: Vec<Op>, passthrough: bool) {
    let progress = Arc::new(Mutex::new(String::new()));
    let p = progress.clone();
    run_watched(progress, move || run_ops(ops, passthrough, p));
}

async fn run_ops(ops: Vec<Op>, passthrough: bool, progress: Arc<Mutex<String>>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = reopen(dir.path()).await;
    let mut m = Model::default();
    check(&log, &mut m, 0, &Op::Flush).await;
    for (step, op) in ops.iter().enumerate() {
        let now = step as i64;
        if let Ok(mut p) = progress.lock() {
            *p = format!("step {step} of {}: {op:?}", ops.len());
        }
        match op {
            Op::Append {
                batches,
                epoch_bump,
            } => {
                m.epoch += epoch_bump;
                let mut set = Vec::new();
                let mut expected = Vec::new();
                let mut next = m.log_end;
                for &(records, value_size) in batches {
                    m.next_timestamp += 7;
                    let (base, epoch) = if passthrough { (next, m.epoch) } else { (0, 0) };
                    let b = build_batch(base, epoch, records, value_size, m.next_timestamp);
                    set.extend_from_slice(&b);
                    let mut stored = b.to_vec();
                    stamp_offset_and_epoch(&mut stored, Offset(next), LeaderEpoch(m.epoch));
                    expected.push(MBatch {
                        base: next,
                        last: next + i64::from(records) - 1,
                        bytes: Bytes::from(stored),
                    });
                    next += i64::from(records);
                }
                let info = if passthrough {
                    log.append_passthrough(set.into(), now).await
                } else {
                    log.append_as_leader(set.into(), LeaderEpoch(m.epoch), AppendKind::Client, now)
                        .await
                }
                .expect("append");
                assert_eq!(
                    info.first_offset,
                    Offset(m.log_end),
                    "step {step}: first offset"
                );
                assert_eq!(
                    info.last_offset,
                    Offset(next - 1),
                    "step {step}: last offset"
                );
                assert!(!info.duplicate);
                m.assign_epoch(m.epoch, m.log_end);
                m.batches.extend(expected);
                m.log_end = next;
            }
            Op::Roll => log.roll(now).await.expect("roll"),
            Op::TruncateTo(sel) => {
                let mut offset = pick(*sel, (m.log_start - 3).max(0), m.log_end);
                // Truncating inside the batch that holds the log start leaves the log
                // end below the log start (see
                // `truncate_inside_the_batch_holding_the_log_start`); cut after it.
                if let Some(b) = m.batch_holding(offset) {
                    if offset > m.log_start && b.base < m.log_start {
                        offset = b.last + 1;
                    }
                }
                log.truncate_to(Offset(offset)).await.expect("truncate");
                m.truncate_to(offset);
            }
            Op::DeleteOldSegments { hw_to_end } => {
                if *hw_to_end {
                    log.update_high_watermark(Offset(m.log_end));
                    m.high_watermark = m.log_end;
                }
                let bases: Vec<i64> = log.segment_base_offsets().iter().map(|o| o.0).collect();
                let want = m.retention(&bases);
                let deleted = log.delete_old_segments(now).await.expect("retention");
                assert_eq!(deleted, want, "step {step}: segments deleted of {bases:?}");
            }
            Op::AdvanceLogStart { sel, beyond_hw } => {
                if *beyond_hw {
                    let offset = m.high_watermark + 1 + i64::from(*sel % 4);
                    out_of_range(
                        log.advance_log_start_offset(Offset(offset)).await,
                        "DeleteRecords above the high watermark",
                    );
                } else {
                    let offset = pick(*sel, m.log_start, m.high_watermark);
                    let start = log
                        .advance_log_start_offset(Offset(offset))
                        .await
                        .expect("advance log start");
                    if offset > m.log_start {
                        m.move_log_start(offset);
                    }
                    assert_eq!(start, Offset(m.log_start), "step {step}: new log start");
                }
            }
            Op::UpdateHighWatermark(sel) => {
                let offset = pick(*sel, m.log_start, m.log_end);
                assert_eq!(log.update_high_watermark(Offset(offset)), Offset(offset));
                m.high_watermark = offset;
            }
            Op::ReopenClean => {
                log.close(now).await.expect("close");
                log = reopen(dir.path()).await;
                m.reopened(&log);
            }
            Op::ReopenCrash => {
                drop(log);
                log = reopen(dir.path()).await;
                m.reopened(&log);
            }
            Op::Flush => {
                log.flush(now).await.expect("flush");
                assert_eq!(log.recovery_point(), Offset(m.log_end));
            }
            Op::Read { sel, max_bytes } => {
                let offset = pick(*sel, m.log_start, m.log_end);
                let data = log.read(Offset(offset), *max_bytes).await.expect("read");
                let got: Vec<Bytes> = BatchIter::new(data.records, 0, true)
                    .map(|b| b.expect("valid batch").into_bytes())
                    .collect();
                let want = expected_read(&m, &log.segment_base_offsets(), offset, *max_bytes);
                assert_eq!(got, want, "step {step}: read at {offset} max {max_bytes}");
            }
        }
        check(&log, &mut m, step + 1, op).await;
    }
    log.close(ops.len() as i64).await.expect("close");
}

/// Kafka's read: whole batches from the one holding `offset`, within its segment, at
/// most `max_bytes` unless the first alone is larger.
fn expected_read(m: &Model, bases: &[Offset], offset: i64, max_bytes: usize) -> Vec<Bytes> {
    let Some(first) = m.batch_holding(offset) else {
        return Vec::new();
    };
    let seg_end = bases
        .iter()
        .map(|o| o.0)
        .find(|&b| b > first.base)
        .unwrap_or(i64::MAX);
    let mut out = vec![first.bytes.clone()];
    let mut total = first.bytes.len();
    for b in m
        .batches
        .iter()
        .filter(|b| b.base > first.base && b.base < seg_end)
    {
        total += b.bytes.len();
        if total > max_bytes {
            break;
        }
        out.push(b.bytes.clone());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        max_shrink_iters: 500,
        ..ProptestConfig::default()
    })]

    #[test]
    fn leader_log_matches_model(ops in prop::collection::vec(op_strategy(), 1..=60)) {
        run_case(ops, false);
    }

    #[test]
    fn passthrough_log_matches_model(ops in prop::collection::vec(op_strategy(), 1..=60)) {
        run_case(ops, true);
    }
}

/// Library bug: DeleteRecords may put the log start inside a batch; truncating to an
/// offset above it but inside that same batch cuts at the batch start, leaving the log
/// end below the log start.
#[test]
fn truncate_inside_the_batch_holding_the_log_start() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = reopen(dir.path()).await;
        for i in 0..2 {
            log.append_as_leader(batch(3, 10, i), LeaderEpoch(0), AppendKind::Client, 0)
                .await
                .expect("append");
        }
        log.update_high_watermark(Offset(6));
        log.advance_log_start_offset(Offset(4))
            .await
            .expect("delete records");
        log.truncate_to(Offset(5)).await.expect("truncate");
        assert!(
            log.log_start_offset() <= log.log_end_offset(),
            "log start {} above log end {}",
            log.log_start_offset(),
            log.log_end_offset()
        );
    });
}

/// Library bug: recovery after an unclean shutdown replays the epochs of the scanned
/// (last) segment into the trusted checkpointed cache with `assign`, which drops every
/// entry at or above a lower epoch: earlier epochs' history is rewritten.
#[test]
fn unclean_reopen_keeps_epoch_history_of_the_last_segment() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = reopen(dir.path()).await;
        let append = |epoch: i32| {
            let b = batch(2, 10, 0);
            (b, LeaderEpoch(epoch))
        };
        for epoch in [0, 2] {
            let (b, e) = append(epoch);
            log.append_as_leader(b, e, AppendKind::Client, 0)
                .await
                .expect("append");
        }
        log.roll(0).await.expect("roll");
        for epoch in [2, 3] {
            let (b, e) = append(epoch);
            log.append_as_leader(b, e, AppendKind::Client, 0)
                .await
                .expect("append");
        }
        // Offsets: epoch 0 at 0..2, epoch 2 at 2..6 (segment boundary at 4), epoch 3 at 6..8.
        let before: Vec<(i32, i64)> = log
            .epoch_cache()
            .entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset.0))
            .collect();
        assert_eq!(before, vec![(0, 0), (2, 2), (3, 6)]);
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(0)),
            (LeaderEpoch(0), Offset(2))
        );
        drop(log);
        let log = reopen(dir.path()).await;
        let after: Vec<(i32, i64)> = log
            .epoch_cache()
            .entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset.0))
            .collect();
        assert_eq!(after, before, "epoch cache after unclean reopen");
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(0)),
            (LeaderEpoch(0), Offset(2))
        );
    });
}
