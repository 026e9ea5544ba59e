//! Producer state through the real partition log on files: idempotence (duplicates,
//! sequences, epochs), transactions and the LSO, the transaction index, Twinlog's
//! MIRROR_PID_RESET batch, and producer state across clean and crash reopens.

mod common;

use std::path::Path;

use bytes::Bytes;
use common::*;
use dataplane::log::producer_state::{CompletedTxn, ProducerStateEntry, ProducerStateError};
use dataplane::log::txn_index::AbortedTxn;
use dataplane::log::{AppendKind, LogAppendInfo, LogError, PartitionLog};
use dataplane::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};
use dataplane::wire::batch::{stamp_offset_and_epoch, BatchBuilder};
use dataplane::wire::control::{build_mirror_pid_reset, build_txn_marker};
use dataplane::wire::records::encode_simple_records;

const EPOCH: LeaderEpoch = LeaderEpoch(1);

async fn client(log: &mut PartitionLog, records: Bytes) -> Result<LogAppendInfo, LogError> {
    log.append_as_leader(records, EPOCH, AppendKind::Client, 0)
        .await
}

async fn coordinator(log: &mut PartitionLog, records: Bytes) -> Result<LogAppendInfo, LogError> {
    log.append_as_leader(records, EPOCH, AppendKind::Coordinator, 0)
        .await
}

fn marker(commit: bool, pid: i64, epoch: i16, coordinator_epoch: i32) -> Bytes {
    build_txn_marker(
        commit,
        ProducerId(pid),
        ProducerEpoch(epoch),
        coordinator_epoch,
        2_000,
    )
}

/// The producer error inside a log error, or a panic naming what came instead.
fn producer_error(err: LogError) -> ProducerStateError {
    match err {
        LogError::Producer { source, .. } => source,
        other => panic!("expected a producer state error, got {other:?}"),
    }
}

fn sorted_entries(log: &PartitionLog) -> Vec<ProducerStateEntry> {
    let mut v: Vec<ProducerStateEntry> = log.producer_state().entries().cloned().collect();
    v.sort_by_key(|e| e.producer_id);
    v
}

fn ongoing(log: &PartitionLog) -> Vec<(Offset, ProducerId)> {
    log.producer_state().ongoing_txns().collect()
}

/// Moves the high watermark to the log end, as acks from all replicas would.
fn replicate(log: &mut PartitionLog) {
    let end = log.log_end_offset();
    assert_eq!(log.update_high_watermark(end), end);
}

fn txn_index_path(log: &PartitionLog, base: i64) -> std::path::PathBuf {
    log.dir().join(format!("{base:020}.txnindex"))
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[test]
fn duplicate_retry_returns_original_offsets_and_appends_nothing() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        let first = client(&mut log, producer_batch(1, 0, 0, 3, false))
            .await
            .expect("append");
        assert_eq!(
            (first.first_offset, first.last_offset),
            (Offset(0), Offset(2))
        );
        assert!(!first.duplicate);
        let second = client(&mut log, producer_batch(1, 0, 3, 2, false))
            .await
            .expect("append");
        assert_eq!(
            (second.first_offset, second.last_offset),
            (Offset(3), Offset(4))
        );
        let size = log.size_in_bytes();

        for (seq, records, expected) in [(0, 3, (0, 2)), (3, 2, (3, 4))] {
            let retry = client(&mut log, producer_batch(1, 0, seq, records, false))
                .await
                .expect("retry accepted");
            assert!(retry.duplicate, "seq {seq} is a retry");
            assert_eq!(
                (retry.first_offset, retry.last_offset),
                (Offset(expected.0), Offset(expected.1))
            );
            assert_eq!(retry.record_count, 0);
            assert!(retry.completed_txns.is_empty());
        }
        assert_eq!(log.log_end_offset(), Offset(5));
        assert_eq!(log.size_in_bytes(), size);
        assert_eq!(read_all(&log, Offset(0)).await.len(), 2);
        let entry = log
            .producer_state()
            .last_entry(ProducerId(1))
            .expect("entry")
            .clone();
        assert_eq!(entry.batches.len(), 2);
        assert_eq!(entry.last_seq(), 4);

        // The next sequence is still 5, and retries are recognised after reopening.
        log.close(0).await.expect("close");
        let mut log = open(dir.path(), small_config()).await;
        let retry = client(&mut log, producer_batch(1, 0, 0, 3, false))
            .await
            .expect("retry after clean reopen");
        assert!(retry.duplicate);
        assert_eq!(
            (retry.first_offset, retry.last_offset),
            (Offset(0), Offset(2))
        );
        drop(log);
        let mut log = open(dir.path(), small_config()).await;
        let retry = client(&mut log, producer_batch(1, 0, 3, 2, false))
            .await
            .expect("retry after crash reopen");
        assert!(retry.duplicate);
        assert_eq!(
            (retry.first_offset, retry.last_offset),
            (Offset(3), Offset(4))
        );
        assert_eq!(log.log_end_offset(), Offset(5));
        let next = client(&mut log, producer_batch(1, 0, 5, 1, false))
            .await
            .expect("next in sequence");
        assert!(!next.duplicate);
        assert_eq!(next.first_offset, Offset(5));
    });
}

#[test]
fn only_the_last_five_batches_are_recognised_as_retries() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        for seq in 0..6 {
            client(&mut log, producer_batch(1, 0, seq, 1, false))
                .await
                .expect("append");
        }
        let retry = client(&mut log, producer_batch(1, 0, 1, 1, false))
            .await
            .expect("retained batch");
        assert!(retry.duplicate);
        assert_eq!(retry.first_offset, Offset(1));
        // Sequence 0 is no longer retained: it is out of order, not a duplicate.
        let err = client(&mut log, producer_batch(1, 0, 0, 1, false))
            .await
            .expect_err("forgotten batch");
        assert!(matches!(
            producer_error(err),
            ProducerStateError::OutOfOrderSequence {
                expected_seq: 6,
                first_seq: 0,
                ..
            }
        ));
        assert_eq!(log.log_end_offset(), Offset(6));
    });
}

#[test]
fn out_of_order_sequence_is_rejected_and_appends_nothing() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, producer_batch(7, 2, 0, 3, false))
            .await
            .expect("append");
        let size = log.size_in_bytes();
        for bad_seq in [5, 4, 1, -1] {
            let err = client(&mut log, producer_batch(7, 2, bad_seq, 1, false))
                .await
                .expect_err("gap or rewind");
            match producer_error(err) {
                ProducerStateError::OutOfOrderSequence {
                    producer_id,
                    offset,
                    producer_epoch,
                    current_epoch,
                    first_seq,
                    current_last_seq,
                    expected_seq,
                } => {
                    assert_eq!(producer_id, ProducerId(7));
                    assert_eq!(offset, Offset(3));
                    assert_eq!(producer_epoch, ProducerEpoch(2));
                    assert_eq!(current_epoch, ProducerEpoch(2));
                    assert_eq!(first_seq, bad_seq);
                    assert_eq!(current_last_seq, 2);
                    assert_eq!(expected_seq, 3);
                }
                other => panic!("expected OutOfOrderSequence, got {other:?}"),
            }
        }
        assert_eq!(log.log_end_offset(), Offset(3));
        assert_eq!(log.size_in_bytes(), size);
        assert_eq!(
            log.producer_state()
                .last_entry(ProducerId(7))
                .expect("entry")
                .last_seq(),
            2
        );
        // A rejected batch inside a multi-batch append rejects the whole append.
        let mut set = Vec::new();
        set.extend_from_slice(&producer_batch(7, 2, 3, 1, false));
        set.extend_from_slice(&producer_batch(7, 2, 9, 1, false));
        let err = client(&mut log, set.into())
            .await
            .expect_err("second is a gap");
        assert!(matches!(
            producer_error(err),
            ProducerStateError::OutOfOrderSequence {
                expected_seq: 4,
                first_seq: 9,
                ..
            }
        ));
        assert_eq!(log.log_end_offset(), Offset(3));
        let ok = client(&mut log, producer_batch(7, 2, 3, 1, false))
            .await
            .expect("in sequence");
        assert_eq!(ok.first_offset, Offset(3));
    });
}

#[test]
fn fenced_epoch_is_rejected_and_epoch_bump_starts_at_sequence_zero() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, producer_batch(3, 5, 0, 2, false))
            .await
            .expect("append");
        let err = client(&mut log, producer_batch(3, 4, 2, 1, false))
            .await
            .expect_err("older epoch");
        assert_eq!(
            producer_error(err),
            ProducerStateError::InvalidProducerEpoch {
                producer_id: ProducerId(3),
                offset: Offset(2),
                producer_epoch: ProducerEpoch(4),
                current_epoch: ProducerEpoch(5),
            }
        );
        // A new epoch must start at sequence 0.
        let err = client(&mut log, producer_batch(3, 6, 2, 1, false))
            .await
            .expect_err("bumped epoch, old sequence");
        assert!(matches!(
            producer_error(err),
            ProducerStateError::OutOfOrderSequence {
                expected_seq: 0,
                first_seq: 2,
                producer_epoch: ProducerEpoch(6),
                current_epoch: ProducerEpoch(5),
                ..
            }
        ));
        assert_eq!(log.log_end_offset(), Offset(2));
        let bumped = client(&mut log, producer_batch(3, 6, 0, 2, false))
            .await
            .expect("epoch bump with sequence 0");
        assert!(!bumped.duplicate, "same sequences, new epoch: not a retry");
        assert_eq!(bumped.first_offset, Offset(2));
        let entry = log
            .producer_state()
            .last_entry(ProducerId(3))
            .expect("entry")
            .clone();
        assert_eq!(entry.producer_epoch, ProducerEpoch(6));
        assert_eq!(
            entry.batches.len(),
            1,
            "the old epoch's batches are forgotten"
        );
        // Now the old epoch is fenced too.
        let err = client(&mut log, producer_batch(3, 5, 2, 1, false))
            .await
            .expect_err("fenced");
        assert!(matches!(
            producer_error(err),
            ProducerStateError::InvalidProducerEpoch { .. }
        ));
        // A marker with an older epoch is fenced as well.
        let err = coordinator(&mut log, marker(true, 3, 5, 0))
            .await
            .expect_err("fenced marker");
        assert!(matches!(
            producer_error(err),
            ProducerStateError::ProducerFenced { .. }
        ));
        assert_eq!(log.log_end_offset(), Offset(4));
    });
}

#[test]
fn open_transaction_holds_the_lso_until_commit() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, batch(2, 10, 1_000)).await.expect("plain");
        let txn = client(&mut log, producer_batch(10, 0, 0, 2, true))
            .await
            .expect("txn data");
        assert_eq!(txn.first_offset, Offset(2));
        client(&mut log, batch(1, 10, 1_000)).await.expect("plain");
        client(&mut log, producer_batch(10, 0, 2, 1, true))
            .await
            .expect("more txn data");
        assert_eq!(log.log_end_offset(), Offset(6));
        replicate(&mut log);
        assert_eq!(log.first_unstable_offset(), Some(Offset(2)));
        assert_eq!(log.last_stable_offset(), Offset(2));
        assert_eq!(ongoing(&log), vec![(Offset(2), ProducerId(10))]);
        // A non-transactional batch while the transaction is open is refused.
        let err = client(&mut log, producer_batch(10, 0, 3, 1, false))
            .await
            .expect_err("not transactional");
        assert!(matches!(
            producer_error(err),
            ProducerStateError::InvalidTxnState {
                txn_first_offset: Offset(2),
                ..
            }
        ));

        let commit = coordinator(&mut log, marker(true, 10, 0, 4))
            .await
            .expect("commit marker");
        assert_eq!(commit.first_offset, Offset(6));
        assert_eq!(
            commit.completed_txns,
            vec![CompletedTxn {
                producer_id: ProducerId(10),
                first_offset: Offset(2),
                last_offset: Offset(6),
                is_aborted: false,
                last_stable_offset: Offset(7),
            }]
        );
        assert!(ongoing(&log).is_empty());
        // Until the marker is replicated the LSO stays at the transaction start.
        assert_eq!(log.last_stable_offset(), Offset(2));
        replicate(&mut log);
        assert_eq!(log.first_unstable_offset(), None);
        assert_eq!(log.last_stable_offset(), Offset(7));
        assert!(log.aborted_transactions(Offset(0), Offset(7)).is_empty());
        assert_eq!(file_len(&txn_index_path(&log, 0)), 0);
        let entry = log
            .producer_state()
            .last_entry(ProducerId(10))
            .expect("entry")
            .clone();
        assert_eq!(entry.coordinator_epoch, 4);
        assert_eq!(entry.current_txn_first_offset, None);

        // An older coordinator epoch is fenced.
        client(&mut log, producer_batch(10, 0, 3, 1, true))
            .await
            .expect("next txn");
        let err = coordinator(&mut log, marker(true, 10, 0, 3))
            .await
            .expect_err("stale coordinator");
        assert!(matches!(
            producer_error(err),
            ProducerStateError::TransactionCoordinatorFenced {
                coordinator_epoch: 3,
                current_coordinator_epoch: 4,
                ..
            }
        ));
    });
}

#[test]
fn abort_is_recorded_in_the_transaction_index_and_survives_reopen() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, producer_batch(20, 1, 0, 3, true))
            .await
            .expect("txn");
        client(&mut log, batch(1, 10, 1_000)).await.expect("plain");
        let abort = coordinator(&mut log, marker(false, 20, 1, 0))
            .await
            .expect("abort marker");
        let expected = AbortedTxn {
            producer_id: ProducerId(20),
            first_offset: Offset(0),
            last_offset: Offset(4),
            last_stable_offset: Offset(5),
        };
        assert_eq!(abort.completed_txns.len(), 1);
        assert!(abort.completed_txns[0].is_aborted);
        replicate(&mut log);
        assert_eq!(log.last_stable_offset(), Offset(5));
        assert_eq!(
            log.aborted_transactions(Offset(0), Offset(5)),
            vec![expected]
        );
        // Fetches that overlap the transaction see it, others do not.
        assert_eq!(
            log.aborted_transactions(Offset(4), Offset(5)),
            vec![expected]
        );
        assert_eq!(
            log.aborted_transactions(Offset(2), Offset(3)),
            vec![expected]
        );
        assert!(log.aborted_transactions(Offset(5), Offset(5)).is_empty());
        // A second, committed transaction adds nothing to the index.
        client(&mut log, producer_batch(20, 1, 3, 1, true))
            .await
            .expect("txn 2");
        coordinator(&mut log, marker(true, 20, 1, 0))
            .await
            .expect("commit");
        replicate(&mut log);
        let all = log.aborted_transactions(Offset(0), log.log_end_offset());
        assert_eq!(all, vec![expected]);

        log.close(0).await.expect("close");
        let txn_index = dir.path().join("t-0").join(format!("{:020}.txnindex", 0));
        assert_eq!(
            file_len(&txn_index),
            AbortedTxn::ENTRY_SIZE as u64,
            "one entry in the .txnindex after a clean close"
        );
        let log = open(dir.path(), small_config()).await;
        assert_eq!(
            log.aborted_transactions(Offset(0), log.log_end_offset()),
            vec![expected]
        );
        assert_eq!(log.last_stable_offset(), Offset(7));
        drop(log);
        // Crash recovery rebuilds the same index from the markers.
        std::fs::remove_file(&txn_index).expect("remove txnindex");
        let log = open(dir.path(), small_config()).await;
        assert_eq!(
            log.aborted_transactions(Offset(0), log.log_end_offset()),
            vec![expected]
        );
        log.close(0).await.expect("close");
        assert_eq!(file_len(&txn_index), AbortedTxn::ENTRY_SIZE as u64);
    });
}

#[test]
fn abort_recovered_by_crash_replay_without_snapshot() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, producer_batch(21, 0, 0, 2, true))
            .await
            .expect("txn");
        client(&mut log, producer_batch(22, 0, 0, 1, true))
            .await
            .expect("txn");
        coordinator(&mut log, marker(false, 21, 0, 0))
            .await
            .expect("abort 21");
        client(&mut log, producer_batch(23, 0, 0, 1, true))
            .await
            .expect("txn left open");
        replicate(&mut log);
        let aborted = log.aborted_transactions(Offset(0), log.log_end_offset());
        assert_eq!(
            aborted,
            vec![AbortedTxn {
                producer_id: ProducerId(21),
                first_offset: Offset(0),
                last_offset: Offset(3),
                // Producer 22's transaction is still open from offset 2.
                last_stable_offset: Offset(2),
            }]
        );
        let entries = sorted_entries(&log);
        let txns = ongoing(&log);
        assert_eq!(
            txns,
            vec![(Offset(2), ProducerId(22)), (Offset(4), ProducerId(23))]
        );
        drop(log);
        let mut log = open(dir.path(), small_config()).await;
        assert_eq!(
            log.aborted_transactions(Offset(0), log.log_end_offset()),
            aborted
        );
        assert_eq!(sorted_entries(&log), entries);
        assert_eq!(ongoing(&log), txns);
        assert_eq!(log.last_stable_offset(), Offset(2));
        // The recovered open transactions can still be completed.
        let done = coordinator(&mut log, marker(true, 22, 0, 0))
            .await
            .expect("commit 22");
        assert_eq!(done.completed_txns[0].first_offset, Offset(2));
        assert_eq!(done.completed_txns[0].last_stable_offset, Offset(4));
        replicate(&mut log);
        assert_eq!(log.last_stable_offset(), Offset(4));
    });
}

#[test]
fn interleaved_transactions_give_the_right_lso() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        // A: 0, B: 1, A: 2, B: 3..4
        client(&mut log, producer_batch(100, 0, 0, 1, true))
            .await
            .expect("A");
        client(&mut log, producer_batch(200, 0, 0, 1, true))
            .await
            .expect("B");
        client(&mut log, producer_batch(100, 0, 1, 1, true))
            .await
            .expect("A");
        client(&mut log, producer_batch(200, 0, 1, 2, true))
            .await
            .expect("B");
        replicate(&mut log);
        assert_eq!(log.high_watermark(), Offset(5));
        assert_eq!(log.last_stable_offset(), Offset(0));
        assert_eq!(
            ongoing(&log),
            vec![(Offset(0), ProducerId(100)), (Offset(1), ProducerId(200))]
        );

        // Committing the later transaction first does not move the LSO.
        let b = coordinator(&mut log, marker(true, 200, 0, 0))
            .await
            .expect("commit B");
        assert_eq!(b.completed_txns[0].first_offset, Offset(1));
        assert_eq!(b.completed_txns[0].last_offset, Offset(5));
        assert_eq!(b.completed_txns[0].last_stable_offset, Offset(0));
        replicate(&mut log);
        assert_eq!(log.last_stable_offset(), Offset(0));

        // A third producer starts a transaction; aborting A moves the LSO to it.
        client(&mut log, producer_batch(300, 0, 0, 1, true))
            .await
            .expect("C");
        let a = coordinator(&mut log, marker(false, 100, 0, 0))
            .await
            .expect("abort A");
        let a_txn = a.completed_txns[0];
        assert!(a_txn.is_aborted);
        assert_eq!(
            (
                a_txn.first_offset,
                a_txn.last_offset,
                a_txn.last_stable_offset
            ),
            (Offset(0), Offset(7), Offset(6))
        );
        // Before replication of the marker the LSO is still held at A's start.
        assert_eq!(log.last_stable_offset(), Offset(0));
        replicate(&mut log);
        assert_eq!(log.last_stable_offset(), Offset(6));
        assert_eq!(
            log.aborted_transactions(Offset(0), Offset(8)),
            vec![AbortedTxn {
                producer_id: ProducerId(100),
                first_offset: Offset(0),
                last_offset: Offset(7),
                last_stable_offset: Offset(6),
            }]
        );
        coordinator(&mut log, marker(true, 300, 0, 0))
            .await
            .expect("commit C");
        replicate(&mut log);
        assert_eq!(log.first_unstable_offset(), None);
        assert_eq!(log.last_stable_offset(), log.log_end_offset());
        assert_eq!(log.log_end_offset(), Offset(9));

        // A high watermark below the open transaction bounds the LSO instead.
        client(&mut log, producer_batch(100, 0, 2, 1, true))
            .await
            .expect("A again");
        log.update_high_watermark(Offset(8));
        assert_eq!(log.first_unstable_offset(), Some(Offset(9)));
        assert_eq!(log.last_stable_offset(), Offset(8));
    });
}

/// Two producers, one with an open transaction and one idempotent, then a
/// MIRROR_PID_RESET from the coordinator.
async fn log_with_producers_then_reset(log: &mut PartitionLog) -> LogAppendInfo {
    client(log, producer_batch(1, 3, 0, 3, false))
        .await
        .expect("idempotent");
    client(log, producer_batch(2, 0, 0, 2, true))
        .await
        .expect("txn");
    client(log, producer_batch(1, 3, 3, 1, false))
        .await
        .expect("idempotent");
    assert_eq!(log.producer_state().len(), 2);
    replicate(log);
    assert_eq!(log.last_stable_offset(), Offset(3));
    let reset = coordinator(log, build_mirror_pid_reset("src-cluster-A", 3_000))
        .await
        .expect("reset");
    assert_eq!(reset.first_offset, Offset(6));
    assert_eq!(reset.last_offset, Offset(6));
    assert!(reset.completed_txns.is_empty());
    reset
}

/// After a reset every producer is unknown: any epoch and any sequence is accepted,
/// and nothing is a retry or inside a transaction any more.
async fn assert_producers_forgotten(log: &mut PartitionLog) {
    assert!(log.producer_state().is_empty());
    assert!(ongoing(log).is_empty());
    replicate(log);
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
    let end = log.log_end_offset();
    // The exact retry of producer 1's first batch is appended again, not deduplicated.
    let again = client(log, producer_batch(1, 3, 0, 3, false))
        .await
        .expect("same batch after reset");
    assert!(!again.duplicate);
    assert_eq!(again.first_offset, end);
    // Producer 2 was in a transaction: a plain batch at a lower epoch and arbitrary
    // sequence is now fine.
    let p2 = client(log, producer_batch(2, 0, 41, 1, false))
        .await
        .expect("producer 2 starts over");
    assert!(!p2.duplicate);
    // An unknown producer at any sequence.
    client(log, producer_batch(3, 9, 1_000, 2, false))
        .await
        .expect("any sequence");
    assert_eq!(log.producer_state().len(), 3);
}

#[test]
fn mirror_pid_reset_clears_producer_state_on_append() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        log_with_producers_then_reset(&mut log).await;
        assert_eq!(log.log_end_offset(), Offset(7));
        assert_producers_forgotten(&mut log).await;
    });
}

#[test]
fn mirror_pid_reset_and_later_producers_in_one_append() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, producer_batch(1, 3, 0, 3, false))
            .await
            .expect("idempotent");
        // One coordinator append: reset, then producer 1 again at a lower epoch.
        let mut set = Vec::new();
        set.extend_from_slice(&build_mirror_pid_reset("src", 3_000));
        set.extend_from_slice(&producer_batch(1, 0, 17, 1, false));
        coordinator(&mut log, set.into()).await.expect("append");
        let entries = sorted_entries(&log);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].producer_epoch, ProducerEpoch(0));
        assert_eq!(entries[0].last_seq(), 17);
        assert_eq!(entries[0].last_data_offset(), Offset(4));
    });
}

#[test]
fn mirror_pid_reset_is_replayed_by_crash_recovery() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        // A roll leaves a producer snapshot with both producers at offset 6; recovery
        // starts from it and must replay the reset that follows.
        client(&mut log, producer_batch(1, 3, 0, 3, false))
            .await
            .expect("idempotent");
        client(&mut log, producer_batch(2, 0, 0, 2, true))
            .await
            .expect("txn");
        client(&mut log, producer_batch(1, 3, 3, 1, false))
            .await
            .expect("idempotent");
        log.roll(0).await.expect("roll");
        assert!(log.dir().join(format!("{:020}.snapshot", 6)).exists());
        coordinator(&mut log, build_mirror_pid_reset("src-cluster-A", 3_000))
            .await
            .expect("reset");
        assert!(log.producer_state().is_empty());
        drop(log);

        let mut log = open(dir.path(), small_config()).await;
        assert_eq!(log.log_end_offset(), Offset(7));
        assert_producers_forgotten(&mut log).await;
        let entries = sorted_entries(&log);
        drop(log);
        let log = open(dir.path(), small_config()).await;
        assert_eq!(sorted_entries(&log), entries);
    });
}

#[test]
fn mirror_pid_reset_is_replayed_by_crash_recovery_from_scratch() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        log_with_producers_then_reset(&mut log).await;
        client(&mut log, producer_batch(5, 0, 0, 1, false))
            .await
            .expect("after reset");
        let entries = sorted_entries(&log);
        assert_eq!(entries.len(), 1);
        drop(log);
        let mut log = open(dir.path(), small_config()).await;
        assert_eq!(sorted_entries(&log), entries);
        // Producer 1 is gone, so any sequence is accepted.
        client(&mut log, producer_batch(1, 3, 99, 1, false))
            .await
            .expect("producer 1 forgotten");
    });
}

#[test]
fn mirror_pid_reset_survives_clean_reopen() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        log_with_producers_then_reset(&mut log).await;
        log.close(0).await.expect("close");
        let snapshot = dir.path().join("t-0").join(format!("{:020}.snapshot", 7));
        let bytes = std::fs::read(&snapshot).expect("snapshot at the log end");
        assert!(
            dataplane::log::producer_state::decode_snapshot_entries(&bytes)
                .expect("valid snapshot")
                .is_empty(),
            "the snapshot reflects the reset"
        );
        let mut log = open(dir.path(), small_config()).await;
        assert_eq!(log.log_end_offset(), Offset(7));
        assert_producers_forgotten(&mut log).await;
    });
}

#[test]
fn mirrored_mirror_pid_reset_passthrough_clears_producer_state() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        // Mirrored producer batches arrive with their source offsets.
        let mut set = Vec::new();
        let mut first = producer_batch(1, 3, 0, 3, false).to_vec();
        stamp_offset_and_epoch(&mut first, Offset(0), EPOCH);
        set.extend_from_slice(&first);
        let mut second = producer_batch(2, 0, 0, 2, true).to_vec();
        stamp_offset_and_epoch(&mut second, Offset(3), EPOCH);
        set.extend_from_slice(&second);
        log.append_passthrough(set.into(), 0)
            .await
            .expect("mirrored data");
        assert_eq!(log.producer_state().len(), 2);
        assert_eq!(ongoing(&log), vec![(Offset(3), ProducerId(2))]);

        let mut reset = build_mirror_pid_reset("upstream", 3_000).to_vec();
        stamp_offset_and_epoch(&mut reset, Offset(5), EPOCH);
        let info = log
            .append_passthrough(reset.clone().into(), 0)
            .await
            .expect("mirrored reset");
        assert_eq!(
            (info.first_offset, info.last_offset),
            (Offset(5), Offset(5))
        );
        assert!(log.producer_state().is_empty());
        assert!(ongoing(&log).is_empty());
        // Stored exactly as received.
        let stored = read_all(&log, Offset(5)).await;
        assert_eq!(stored[0].as_bytes().as_ref(), reset.as_slice());

        assert_producers_forgotten(&mut log).await;
        let entries = sorted_entries(&log);
        drop(log);
        let log = open(dir.path(), small_config()).await;
        assert_eq!(sorted_entries(&log), entries);
    });
}

/// A deterministic log with several producers across several segments: more than five
/// batches for one, an open and completed transactions, epoch bumps, a coordinator
/// epoch, and a producer that stopped writing before a reset.
async fn build_busy_log(data_dir: &Path) -> PartitionLog {
    let mut log = open(data_dir, small_config()).await;
    client(&mut log, producer_batch(9, 0, 0, 1, false))
        .await
        .expect("forgotten by the reset");
    coordinator(&mut log, build_mirror_pid_reset("src", 1_000))
        .await
        .expect("reset");
    for seq in 0..8 {
        client(&mut log, producer_batch(1, 0, seq * 2, 2, false))
            .await
            .expect("p1");
        log.append_as_leader(batch(2, 300, 1_000), EPOCH, AppendKind::Client, 0)
            .await
            .expect("filler");
    }
    client(&mut log, producer_batch(2, 1, 0, 1, true))
        .await
        .expect("p2 txn");
    coordinator(&mut log, marker(false, 2, 1, 5))
        .await
        .expect("p2 abort");
    client(&mut log, producer_batch(2, 2, 0, 3, true))
        .await
        .expect("p2 bumped txn");
    coordinator(&mut log, marker(true, 2, 2, 6))
        .await
        .expect("p2 commit");
    client(&mut log, producer_batch(3, 0, 0, 1, true))
        .await
        .expect("p3 open txn");
    client(&mut log, producer_batch(1, 1, 0, 1, false))
        .await
        .expect("p1 bump");
    for seq in 1..4 {
        client(&mut log, producer_batch(3, 0, seq, 1, true))
            .await
            .expect("p3 more");
        log.append_as_leader(batch(1, 500, 1_000), EPOCH, AppendKind::Client, 0)
            .await
            .expect("filler");
    }
    assert!(log.segment_count() > 2, "rolled: {}", log.segment_count());
    replicate(&mut log);
    log
}

#[test]
fn producer_state_is_the_same_after_clean_and_crash_reopen() {
    run(|| async {
        let clean_dir = tempfile::tempdir().expect("tempdir");
        let crash_dir = tempfile::tempdir().expect("tempdir");
        let clean = build_busy_log(clean_dir.path()).await;
        let crash = build_busy_log(crash_dir.path()).await;
        let entries = sorted_entries(&clean);
        assert_eq!(sorted_entries(&crash), entries);
        assert_eq!(
            entries.iter().map(|e| e.producer_id).collect::<Vec<_>>(),
            vec![ProducerId(1), ProducerId(2), ProducerId(3)]
        );
        let p1 = &entries[0];
        assert_eq!(p1.producer_epoch, ProducerEpoch(1));
        assert_eq!(p1.batches.len(), 1);
        let p2 = &entries[1];
        assert_eq!(p2.coordinator_epoch, 6);
        assert_eq!(p2.current_txn_first_offset, None);
        let p3 = &entries[2];
        assert_eq!(p3.batches.len(), 4);
        let txns = ongoing(&clean);
        assert_eq!(txns.len(), 1);
        assert_eq!(Some(txns[0].0), p3.current_txn_first_offset);
        let end = clean.log_end_offset();
        let aborted = clean.aborted_transactions(Offset(0), end);
        assert_eq!(aborted.len(), 1);
        let lso = clean.last_stable_offset();
        assert_eq!(lso, txns[0].0);

        clean.close(0).await.expect("close");
        drop(crash);
        let reopened_clean = open(clean_dir.path(), small_config()).await;
        let reopened_crash = open(crash_dir.path(), small_config()).await;
        for (name, log) in [("clean", &reopened_clean), ("crash", &reopened_crash)] {
            assert_eq!(log.log_end_offset(), end, "{name}");
            assert_eq!(sorted_entries(log), entries, "{name}");
            assert_eq!(ongoing(log), txns, "{name}");
            assert_eq!(log.aborted_transactions(Offset(0), end), aborted, "{name}");
            assert_eq!(log.last_stable_offset(), lso, "{name}");
        }
        // Both still detect retries and enforce sequences the same way.
        for mut log in [reopened_clean, reopened_crash] {
            let retry = client(&mut log, producer_batch(1, 1, 0, 1, false))
                .await
                .expect("retry");
            assert!(retry.duplicate);
            let err = client(&mut log, producer_batch(3, 0, 7, 1, true))
                .await
                .expect_err("gap");
            assert!(matches!(
                producer_error(err),
                ProducerStateError::OutOfOrderSequence {
                    expected_seq: 4,
                    ..
                }
            ));
            let err = client(&mut log, producer_batch(9, 0, 0, 1, false)).await;
            assert!(err.is_ok(), "producer 9 was reset: {err:?}");
        }
    });
}

#[test]
fn clients_may_not_write_control_batches() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, producer_batch(1, 0, 0, 1, true))
            .await
            .expect("txn");
        for control in [
            marker(true, 1, 0, 0),
            marker(false, 1, 0, 0),
            build_mirror_pid_reset("src", 0),
        ] {
            let err = client(&mut log, control).await.expect_err("control");
            assert!(
                matches!(err, LogError::ControlBatchFromClient { .. }),
                "{err:?}"
            );
        }
        // Also when hidden behind a valid data batch in the same request.
        let mut set = Vec::new();
        set.extend_from_slice(&producer_batch(1, 0, 1, 1, true));
        set.extend_from_slice(&marker(true, 1, 0, 0));
        let err = client(&mut log, set.into()).await.expect_err("control");
        assert!(matches!(err, LogError::ControlBatchFromClient { .. }));
        assert_eq!(log.log_end_offset(), Offset(1));
        assert_eq!(ongoing(&log), vec![(Offset(0), ProducerId(1))]);
        assert_eq!(log.producer_state().len(), 1);
    });
}

#[test]
fn client_batch_whose_record_count_disagrees_with_last_offset_delta_is_rejected() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        let build = |records: i32, last_offset_delta: i32, base_offset: i64| {
            BatchBuilder {
                base_offset: Offset(base_offset),
                last_offset_delta,
                record_count: records,
                producer_id: ProducerId(1),
                producer_epoch: ProducerEpoch(0),
                base_sequence: 0,
                ..BatchBuilder::default()
            }
            .build(&encode_simple_records(records, 0, 8))
        };
        // Fewer records than offsets (a compacted batch) is not something a client
        // sends.
        let err = client(&mut log, build(2, 2, 0))
            .await
            .expect_err("inconsistent");
        match err {
            LogError::InconsistentRecordCount {
                record_count, span, ..
            } => {
                assert_eq!(record_count, 2);
                assert_eq!(span, 3);
            }
            other => panic!("expected InconsistentRecordCount, got {other:?}"),
        }
        // More records than offsets is an invalid batch for anyone.
        let err = client(&mut log, build(3, 1, 0)).await.expect_err("invalid");
        assert!(
            matches!(
                err,
                LogError::InvalidBatch {
                    source: dataplane::wire::BatchError::RecordCountMismatch {
                        record_count: 3,
                        last_offset_delta: 1,
                        ..
                    },
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(log.log_end_offset(), Offset(0));
        assert!(log.producer_state().is_empty());
        client(&mut log, producer_batch(1, 0, 0, 2, false))
            .await
            .expect("consistent batch");
        // Replicated (mirrored) batches may have been compacted: accepted there.
        let info = log
            .append_passthrough(build(2, 4, 2), 0)
            .await
            .expect("compacted batch from the source");
        assert_eq!(
            (info.first_offset, info.last_offset),
            (Offset(2), Offset(6))
        );
        assert_eq!(log.log_end_offset(), Offset(7));
    });
}

async fn client_sets(
    log: &mut PartitionLog,
    sets: Vec<Bytes>,
) -> Vec<Result<LogAppendInfo, LogError>> {
    log.append_sets_as_leader(sets, EPOCH, AppendKind::Client, 0)
        .await
}

#[test]
fn pipelined_record_sets_are_one_append_each_answered_with_its_offsets() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, producer_batch(3, 0, 0, 2, false))
            .await
            .expect("append");
        let sets = vec![
            producer_batch(3, 0, 2, 3, false),
            producer_batch(3, 0, 5, 1, false),
            producer_batch(4, 0, 0, 2, false),
        ];
        let sizes: u64 = sets.iter().map(|s| s.len() as u64).sum();
        let size = log.size_in_bytes();
        let infos: Vec<LogAppendInfo> = client_sets(&mut log, sets)
            .await
            .into_iter()
            .map(|r| r.expect("appended"))
            .collect();
        let spans: Vec<(i64, i64, i64)> = infos
            .iter()
            .map(|i| (i.first_offset.0, i.last_offset.0, i.record_count))
            .collect();
        assert_eq!(spans, [(2, 4, 3), (5, 5, 1), (6, 7, 2)]);
        assert!(infos.iter().all(|i| !i.duplicate));
        assert_eq!(log.log_end_offset(), Offset(8));
        assert_eq!(log.size_in_bytes(), size + sizes);
        let entries = sorted_entries(&log);
        assert_eq!(
            entries
                .iter()
                .map(|e| (e.producer_id, e.last_seq()))
                .collect::<Vec<_>>(),
            [(ProducerId(3), 5), (ProducerId(4), 1)]
        );
        // Each set is its own batch on disk, at its own offsets.
        let batches = read_all(&log, Offset(0)).await;
        assert_eq!(
            batches
                .iter()
                .map(|b| b.base_offset().0)
                .collect::<Vec<_>>(),
            [0, 2, 5, 6]
        );
        // Retries of the group are recognised batch by batch, after a crash too.
        drop(log);
        let mut log = open(dir.path(), small_config()).await;
        let again = client(&mut log, producer_batch(3, 0, 5, 1, false))
            .await
            .expect("retry");
        assert!(again.duplicate);
        assert_eq!(again.first_offset, Offset(5));
    });
}

#[test]
fn a_refused_set_in_a_group_fails_alone_and_the_others_get_what_they_would_alone() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        client(&mut log, producer_batch(9, 1, 0, 2, false))
            .await
            .expect("append");
        let results = client_sets(
            &mut log,
            vec![
                // a retry of what is in the log
                producer_batch(9, 1, 0, 2, false),
                producer_batch(9, 1, 2, 1, false),
                // a gap: sequence 4 where 3 is next
                producer_batch(9, 1, 4, 1, false),
                producer_batch(9, 1, 3, 1, false),
                Bytes::from_static(b"not a batch"),
            ],
        )
        .await;
        assert_eq!(results.len(), 5);
        let dup = results[0].as_ref().expect("duplicate answered");
        assert!(dup.duplicate);
        assert_eq!((dup.first_offset, dup.last_offset), (Offset(0), Offset(1)));
        assert_eq!(results[1].as_ref().expect("next").first_offset, Offset(2));
        let mut results = results.into_iter();
        let gap = results.nth(2).expect("third").expect_err("gap refused");
        assert!(matches!(
            producer_error(gap),
            ProducerStateError::OutOfOrderSequence {
                expected_seq: 3,
                first_seq: 4,
                ..
            }
        ));
        assert_eq!(
            results
                .next()
                .expect("fourth")
                .expect("in sequence")
                .first_offset,
            Offset(3)
        );
        assert!(matches!(
            results.next().expect("fifth"),
            Err(LogError::InvalidBatch { .. })
        ));
        assert_eq!(log.log_end_offset(), Offset(4));
        assert_eq!(read_all(&log, Offset(0)).await.len(), 3);
    });
}
