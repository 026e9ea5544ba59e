//! Property tests of the log cleaner against an in-memory model.
//!
//! Random sequences of keyed puts and tombstones (plain, in committed and in aborted
//! transactions), rolls, cleans (some stopped at a step of the swap, as a crash there
//! would, and the log reopened from disk), clock moves and clean or unclean reopens run
//! against a real log. After every step the log must agree with the model:
//! - read as a table (the latest record per key, aborted transactions skipped,
//!   tombstones deleting), it is the model's table;
//! - every record it still holds is the model's record at that offset (offsets are kept,
//!   nothing is invented or duplicated), and its end offset is the model's;
//! - every transactional record still there still has its marker, and an aborted one is
//!   still listed by the transaction index, so read_committed readers never see it.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use common::run;
use dataplane::log::cleaner::clean::{self, CleanEnv, SwapStep, Throttle};
use dataplane::log::cleaner::Snapshot;
use dataplane::log::{AppendKind, LogConfig, PartitionLog};
use dataplane::partition::Partition;
use dataplane::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, TopicPartition};
use dataplane::wire::batch::BatchBuilder;
use dataplane::wire::control::build_txn_marker;
use dataplane::wire::records::{batch_records, encode_record};
use proptest::prelude::*;

const PID: i64 = 77;
const RETENTION_MS: i64 = 1_000;

fn tp() -> TopicPartition {
    TopicPartition::new("compacted", 0)
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 128,
        compact: true,
        delete: false,
        delete_retention_ms: RETENTION_MS,
        min_cleanable_dirty_ratio: dataplane::log::config::Ratio::from_f64(0.0),
        retention_ms: -1,
        ..LogConfig::default()
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// One batch of (key, value; None: tombstone); `txn`: in a transaction that is then
    /// committed (true) or aborted (false).
    Put {
        records: Vec<(u8, Option<u8>)>,
        txn: Option<bool>,
    },
    Roll,
    /// A clean with an offset map of `map_keys` keys' worth, stopped at a swap step
    /// (then the log is reopened from disk) when `crash` is given.
    Clean {
        map_keys: usize,
        crash: Option<u8>,
    },
    /// The clock moves on (delete horizons pass).
    Tick(i64),
    Reopen {
        crash: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (
            prop::collection::vec((0u8..6, prop::option::weighted(0.8, 0u8..100)), 1..4),
            prop::option::weighted(0.3, any::<bool>())
        )
            .prop_map(|(records, txn)| Op::Put { records, txn }),
        1 => Just(Op::Roll),
        3 => (prop_oneof![Just(2usize), Just(1000)], prop::option::weighted(0.3, 0u8..4))
            .prop_map(|(map_keys, crash)| Op::Clean { map_keys, crash }),
        1 => (1i64..1500).prop_map(Op::Tick),
        1 => any::<bool>().prop_map(|crash| Op::Reopen { crash }),
    ]
}

/// One data record ever appended.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Put {
    key: u8,
    value: Option<u8>,
    /// None: not transactional; Some(committed).
    txn: Option<bool>,
}

#[derive(Debug, Default)]
struct Model {
    records: BTreeMap<i64, Put>,
    markers: BTreeMap<i64, bool>,
    end: i64,
    sequence: i32,
    now: i64,
}

impl Model {
    /// The table a reader builds: latest committed value per key.
    fn table(&self) -> BTreeMap<u8, u8> {
        let mut t = BTreeMap::new();
        for p in self.records.values().filter(|p| p.txn != Some(false)) {
            match p.value {
                Some(v) => t.insert(p.key, v),
                None => t.remove(&p.key),
            };
        }
        t
    }
}

fn key(k: u8) -> Vec<u8> {
    format!("key-{k}").into_bytes()
}

fn data_batch(model: &Model, records: &[(u8, Option<u8>)], txn: bool) -> Bytes {
    let mut body = Vec::new();
    for (i, (k, v)) in records.iter().enumerate() {
        let value = v.map(|v| vec![v; 40]);
        encode_record(&mut body, i as i32, 0, Some(&key(*k)), value.as_deref());
    }
    let n = records.len() as i32;
    BatchBuilder {
        last_offset_delta: n - 1,
        record_count: n,
        base_timestamp: model.now,
        max_timestamp: model.now,
        producer_id: if txn {
            ProducerId(PID)
        } else {
            ProducerId::NONE
        },
        producer_epoch: if txn {
            ProducerEpoch(0)
        } else {
            ProducerEpoch::NONE
        },
        base_sequence: if txn { model.sequence } else { -1 },
        ..BatchBuilder::default()
    }
    .transactional(txn)
    .build(&body)
}

async fn open(dir: &Path, now: i64) -> Rc<Partition> {
    let log = PartitionLog::open(dir, tp(), None, config(), now)
        .await
        .expect("log opens");
    Rc::new(Partition::new(tp(), log, LeaderEpoch(0)))
}

/// Applies `op`; returns the partition (a new one after a reopen).
async fn apply(dir: &Path, p: Rc<Partition>, model: &mut Model, op: &Op) -> Rc<Partition> {
    match op {
        Op::Put { records, txn } => {
            let mut log = p.write().await.expect("writer");
            let batch = data_batch(model, records, txn.is_some());
            let info = log
                .append_as_leader(batch, LeaderEpoch(0), AppendKind::Client, model.now)
                .await
                .expect("append");
            for (i, (k, v)) in records.iter().enumerate() {
                let put = Put {
                    key: *k,
                    value: *v,
                    txn: *txn,
                };
                model.records.insert(info.first_offset.0 + i as i64, put);
            }
            model.end = info.first_offset.0 + records.len() as i64;
            if let Some(commit) = txn {
                model.sequence += records.len() as i32;
                let marker =
                    build_txn_marker(*commit, ProducerId(PID), ProducerEpoch(0), 0, model.now);
                let info = log
                    .append_as_leader(marker, LeaderEpoch(0), AppendKind::Coordinator, model.now)
                    .await
                    .expect("marker");
                model.markers.insert(info.first_offset.0, *commit);
                model.end = info.first_offset.0 + 1;
            }
        }
        Op::Roll => {
            let mut log = p.write().await.expect("writer");
            log.roll(model.now).await.expect("roll");
        }
        Op::Clean { map_keys, crash } => {
            let snap = {
                let log = p.read().await.expect("reader");
                Snapshot::take(&log, model.now).expect("a compacted log")
            };
            let throttle = std::cell::RefCell::new(Throttle::new(f64::INFINITY));
            let crash_at = crash.map(|c| {
                [
                    SwapStep::RangeWritten,
                    SwapStep::SwapFiles,
                    SwapStep::OldDeleted,
                    SwapStep::Renamed,
                ][usize::from(c) % 4]
            });
            let env = CleanEnv {
                // Each key is 5 or 6 bytes.
                map_bytes: map_keys * (6 + dataplane::log::cleaner::offset_map::ENTRY_OVERHEAD),
                throttle: &throttle,
                crash_at,
            };
            match clean::clean(&Rc::downgrade(&p), snap, &env).await {
                Ok(_) | Err(clean::CleanError::MapTooSmall(_)) => {}
                Err(e) => panic!("clean failed: {e}"),
            }
            if crash_at.is_some() {
                // What a crash leaves: no close; then recovery.
                drop(p);
                return open(dir, model.now).await;
            }
        }
        Op::Tick(ms) => model.now += ms,
        Op::Reopen { crash } => {
            if !*crash {
                let log = Rc::try_unwrap(p)
                    .expect("sole owner")
                    .into_log()
                    .expect("log");
                log.close(model.now).await.expect("clean close");
            } else {
                drop(p);
            }
            return open(dir, model.now).await;
        }
    }
    p
}

/// Every batch of the log: (base offset, is control, records as (offset, key, value),
/// producer id, transactional).
async fn read_back(
    p: &Partition,
) -> Vec<(bool, Vec<(i64, Vec<u8>, Option<Vec<u8>>)>, i64, bool, i64)> {
    let log = p.read().await.expect("reader");
    let mut batches = Vec::new();
    log.for_each_batch(Offset(0), |b| batches.push(b.clone()))
        .await
        .expect("reads");
    batches
        .iter()
        .map(|b| {
            let recs = if b.is_control() {
                Vec::new()
            } else {
                batch_records(b)
                    .expect("records decode")
                    .into_iter()
                    .map(|r| {
                        (
                            b.base_offset().0 + i64::from(r.offset_delta),
                            r.key.map(|k| k.to_vec()).unwrap_or_default(),
                            r.value.map(|v| v.to_vec()),
                        )
                    })
                    .collect()
            };
            (
                b.is_control(),
                recs,
                b.producer_id().0,
                b.is_transactional(),
                b.base_offset().0,
            )
        })
        .collect()
}

/// Applies `ops` to a fresh log and its model, checking the log against the model
/// after each.
fn replay(ops: Vec<Op>) {
    run(move || async move {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut model = Model {
            now: 10_000,
            ..Model::default()
        };
        let mut p = open(dir.path(), model.now).await;
        for (i, op) in ops.iter().enumerate() {
            p = apply(dir.path(), p, &mut model, op).await;
            check(&p, &model, &format!("step {i} {op:?}")).await;
        }
    });
}

async fn check(p: &Partition, model: &Model, step: &str) {
    let batches = read_back(p).await;
    let log = p.read().await.expect("reader");
    assert_eq!(log.log_end_offset().0, model.end, "{step}: log end");
    assert_eq!(
        log.last_stable_offset().0,
        model.end,
        "{step}: no open transaction"
    );
    let aborted_index = log.aborted_transactions(Offset(0), Offset(model.end));
    drop(log);
    let mut last = -1i64;
    let mut table: BTreeMap<u8, u8> = BTreeMap::new();
    let markers: HashMap<i64, ()> = batches.iter().filter(|b| b.0).map(|b| (b.4, ())).collect();
    for (control, recs, _, transactional, base) in &batches {
        if *control {
            assert!(
                model.markers.contains_key(base),
                "{step}: marker at {base} is one written"
            );
            assert!(*base > last, "{step}: offsets increase at {base}");
            last = *base;
            continue;
        }
        for (offset, k, v) in recs {
            assert!(*offset > last, "{step}: offsets increase at {offset}");
            last = *offset;
            let put = model
                .records
                .get(offset)
                .unwrap_or_else(|| panic!("{step}: record at {offset} was never written"));
            assert_eq!(k, &key(put.key), "{step}: key at {offset}");
            assert_eq!(
                v,
                &put.value.map(|x| vec![x; 40]),
                "{step}: value at {offset}"
            );
            if *transactional {
                // Its marker is still there: the first marker after it.
                let marker = model.markers.range(offset..).next().map(|(o, _)| *o);
                let marker = marker.unwrap_or_else(|| panic!("{step}: no marker after {offset}"));
                assert!(
                    markers.contains_key(&marker),
                    "{step}: transactional record {offset} outlived its marker at {marker}"
                );
                if put.txn == Some(false) {
                    assert!(
                        aborted_index
                            .iter()
                            .any(|t| t.first_offset.0 <= *offset && *offset <= t.last_offset.0),
                        "{step}: aborted record {offset} is not in the transaction index"
                    );
                    continue;
                }
            }
            match put.value {
                Some(v) => table.insert(put.key, v),
                None => table.remove(&put.key),
            };
        }
    }
    assert_eq!(table, model.table(), "{step}: the log read as a table");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_cleaned_log_reads_as_the_same_table(ops in prop::collection::vec(op(), 1..40)) {
        replay(ops);
    }
}

/// A case proptest found (Dec 2026): a tombstone of a committed transaction got its
/// delete horizon in a clean whose offset map stopped before it, so the record it
/// deleted was not removed in that pass; once the horizon passed, a later clean dropped
/// the tombstone and the deleted key came back.
#[test]
fn a_tombstone_outlives_the_records_it_deletes() {
    use Op::*;
    let put = |records: &[(u8, Option<u8>)], txn: Option<bool>| Put {
        records: records.to_vec(),
        txn,
    };
    let clean = |map_keys: usize| Clean {
        map_keys,
        crash: None,
    };
    let ops = vec![
        put(&[(0, Some(0))], None),
        put(&[(0, Some(0))], Some(false)),
        put(&[(0, Some(0)), (0, Some(0)), (0, Some(0))], Some(false)),
        put(&[(3, Some(0))], None),
        clean(2),
        put(&[(0, Some(0)), (3, None)], Some(true)),
        put(&[(0, Some(0)), (0, Some(0)), (0, Some(0))], Some(false)),
        put(&[(0, Some(0))], None),
        clean(2),
        put(&[(0, Some(0)), (3, Some(84)), (3, Some(23))], Some(false)),
        put(&[(5, Some(63)), (0, Some(81))], None),
        Tick(1051),
        put(&[(4, None)], Some(false)),
        clean(1000),
    ];
    replay(ops);
}

/// A case proptest found on CI (Dec 2026): a clean whose offset map filled before a
/// batch of tombstones still gave them a delete horizon, though the records they delete
/// were not removed in that pass (the map did not hold the tombstones); once the horizon
/// passed, a second clean whose map again stopped short dropped the tombstones and the
/// deleted keys came back.
#[test]
fn a_tombstone_gets_its_delete_horizon_only_from_a_clean_whose_map_holds_it() {
    use Op::*;
    let put = |records: &[(u8, Option<u8>)]| Put {
        records: records.to_vec(),
        txn: None,
    };
    let clean = Clean {
        map_keys: 2,
        crash: None,
    };
    let ops = vec![
        put(&[(1, Some(4)), (5, Some(21))]),
        put(&[(3, Some(43))]),
        put(&[(1, None), (5, None)]),
        Roll,
        clean.clone(),
        Tick(1200),
        clean.clone(),
        clean.clone(),
        Tick(1200),
        Clean {
            map_keys: 1000,
            crash: None,
        },
    ];
    replay(ops);
}

/// A log of `segments` rolled segments of one batch each (keys 0..3), written at `at`.
async fn rolled_log(dir: &Path, config: LogConfig, segments: usize, at: i64) -> Rc<Partition> {
    let log = PartitionLog::open(dir, tp(), None, config, at)
        .await
        .expect("log opens");
    let p = Rc::new(Partition::new(tp(), log, LeaderEpoch(0)));
    let model = Model {
        now: at,
        ..Model::default()
    };
    for _ in 0..segments {
        let mut log = p.write().await.expect("writer");
        let batch = data_batch(&model, &[(0, Some(1)), (1, Some(1)), (2, Some(1))], false);
        log.append_as_leader(batch, LeaderEpoch(0), AppendKind::Client, at)
            .await
            .expect("append");
        log.roll(at).await.expect("roll");
    }
    p
}

#[test]
fn the_dirty_ratio_and_the_compaction_lags_decide_when_a_log_is_cleaned() {
    run(|| async {
        const AT: i64 = 1_000_000;
        let dir = tempfile::tempdir().expect("tempdir");
        // Never cleaned: all dirty.
        let p = rolled_log(dir.path(), config(), 3, AT).await;
        let snap = Snapshot::take(&p.read().await.expect("reader"), AT).expect("compacted");
        assert_eq!(
            snap.segments.len(),
            3,
            "the active segment is not cleanable"
        );
        assert_eq!(snap.dirty_ratio(), 1.0);
        assert!(snap.wants_cleaning());
        drop(p);

        // min.compaction.lag.ms: records younger than it are not cleanable.
        let dir = tempfile::tempdir().expect("tempdir");
        let young = LogConfig {
            min_compaction_lag_ms: 60_000,
            ..config()
        };
        let p = rolled_log(dir.path(), young, 3, AT).await;
        let snap = Snapshot::take(&p.read().await.expect("reader"), AT + 1_000).expect("compacted");
        assert!(snap.segments.is_empty(), "{:?}", snap.segments);
        assert!(!snap.wants_cleaning());
        let snap =
            Snapshot::take(&p.read().await.expect("reader"), AT + 61_000).expect("compacted");
        assert_eq!(snap.segments.len(), 3);
        drop(p);

        // Below min.cleanable.dirty.ratio nothing is cleaned, unless max.compaction.lag.ms
        // has passed for the oldest dirty record.
        let dir = tempfile::tempdir().expect("tempdir");
        let lazy = LogConfig {
            min_cleanable_dirty_ratio: dataplane::log::config::Ratio::from_f64(1.0),
            max_compaction_lag_ms: 10_000,
            ..config()
        };
        let p = rolled_log(dir.path(), lazy, 3, AT).await;
        let throttle = std::cell::RefCell::new(Throttle::new(f64::INFINITY));
        let env = CleanEnv {
            map_bytes: 1 << 20,
            throttle: &throttle,
            crash_at: None,
        };
        let snap = Snapshot::take(&p.read().await.expect("reader"), AT).expect("compacted");
        let stats = clean::clean(&Rc::downgrade(&p), snap, &env)
            .await
            .expect("clean")
            .expect("cleaned");
        assert_eq!(stats.cleaned_to, Offset(9));
        // Three more segments: half the cleanable bytes are dirty now.
        {
            let model = Model {
                now: AT,
                ..Model::default()
            };
            for _ in 0..3 {
                let mut log = p.write().await.expect("writer");
                let batch = data_batch(&model, &[(3, Some(1))], false);
                log.append_as_leader(batch, LeaderEpoch(0), AppendKind::Client, AT)
                    .await
                    .expect("append");
                log.roll(AT).await.expect("roll");
            }
        }
        let snap = Snapshot::take(&p.read().await.expect("reader"), AT + 1_000).expect("compacted");
        assert!(
            snap.dirty_ratio() > 0.0 && snap.dirty_ratio() < 1.0,
            "{}",
            snap.dirty_ratio()
        );
        assert!(!snap.overdue());
        assert!(!snap.wants_cleaning(), "below the ratio");
        let snap =
            Snapshot::take(&p.read().await.expect("reader"), AT + 20_000).expect("compacted");
        assert!(
            snap.overdue() && snap.wants_cleaning(),
            "max.compaction.lag.ms passed"
        );
    });
}

#[test]
fn the_throttle_holds_the_cleaner_to_its_rate() {
    let mut t = Throttle::new(1_000_000.0);
    // 1 MB at 1 MB/s: about a second to wait.
    let wait = t.account(1_000_000);
    assert!(wait > std::time::Duration::from_millis(900), "{wait:?}");
    assert_eq!(
        Throttle::new(f64::INFINITY).account(1 << 30),
        std::time::Duration::ZERO
    );
}

#[test]
fn a_compacted_log_rolls_its_active_segment_at_max_compaction_lag() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let lagging = LogConfig {
            segment_bytes: 1 << 20,
            max_compaction_lag_ms: 5_000,
            ..config()
        };
        let mut log = PartitionLog::open(dir.path(), tp(), None, lagging.clone(), 0)
            .await
            .expect("log opens");
        let mut model = Model {
            now: 100_000,
            ..Model::default()
        };
        let batch = data_batch(&model, &[(0, Some(1))], false);
        log.append_as_leader(batch, LeaderEpoch(0), AppendKind::Client, model.now)
            .await
            .expect("append");
        model.now += 6_000;
        let batch = data_batch(&model, &[(0, Some(2))], false);
        log.append_as_leader(batch, LeaderEpoch(0), AppendKind::Client, model.now)
            .await
            .expect("append");
        assert_eq!(log.segment_count(), 2, "rolled after max.compaction.lag.ms");
        // The same log with cleanup.policy=delete keeps one segment (segment.ms is a week).
        let dir = tempfile::tempdir().expect("tempdir");
        let plain = LogConfig {
            compact: false,
            delete: true,
            ..lagging
        };
        let mut log = PartitionLog::open(dir.path(), tp(), None, plain, 0)
            .await
            .expect("log opens");
        for at in [100_000, 106_000] {
            let m = Model {
                now: at,
                ..Model::default()
            };
            let batch = data_batch(&m, &[(0, Some(1))], false);
            log.append_as_leader(batch, LeaderEpoch(0), AppendKind::Client, at)
                .await
                .expect("append");
        }
        assert_eq!(log.segment_count(), 1);
    });
}
