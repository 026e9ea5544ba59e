//! Partition log behaviour against Kafka's semantics, on real files via glommio.

mod common;

use common::*;
use dataplane::log::{AppendKind, LogConfig, LogError};
use dataplane::types::{LeaderEpoch, Offset};

#[test]
fn leader_append_assigns_offsets_and_survives_clean_reopen() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        for i in 0..50 {
            let info = log
                .append_as_leader(
                    batch(3, 100, 1_000 + i),
                    LeaderEpoch(2),
                    AppendKind::Client,
                    0,
                )
                .await
                .expect("append");
            assert_eq!(info.first_offset, Offset(i * 3));
            assert_eq!(info.last_offset, Offset(i * 3 + 2));
        }
        assert_eq!(log.log_end_offset(), Offset(150));
        assert!(
            log.segment_count() > 3,
            "rolled by size: {}",
            log.segment_count()
        );
        let batches = read_all(&log, Offset(0)).await;
        assert_eq!(batches.len(), 50);
        assert!(batches
            .iter()
            .all(|b| b.partition_leader_epoch() == LeaderEpoch(2)));
        // Reading mid-batch returns the batch that holds the offset.
        let data = log.read(Offset(4), 1).await.expect("read");
        let first = dataplane::wire::BatchIter::new(data.records, 0, true)
            .next()
            .expect("one")
            .expect("valid");
        assert_eq!(first.base_offset(), Offset(3));
        log.close(0).await.expect("close");

        let log = open(dir.path(), small_config()).await;
        assert_eq!(log.log_end_offset(), Offset(150));
        assert_eq!(read_all(&log, Offset(0)).await, batches);
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(2)),
            (LeaderEpoch(2), Offset(150))
        );
    });
}

#[test]
fn passthrough_keeps_offsets_and_epochs_allows_gaps_and_rejects_going_back() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        let mut set = Vec::new();
        set.extend_from_slice(&source_batch(0, 5, 4));
        set.extend_from_slice(&source_batch(4, 7, 2));
        log.append_passthrough(set.into(), 0).await.expect("append");
        assert_eq!(log.log_end_offset(), Offset(6));
        // A compacted source leaves offset gaps: accepted as they are.
        log.append_passthrough(source_batch(7, 7, 1), 0)
            .await
            .expect("gap");
        assert_eq!(log.log_end_offset(), Offset(8));
        let err = log
            .append_passthrough(source_batch(5, 7, 1), 0)
            .await
            .expect_err("backwards");
        assert!(matches!(
            err,
            LogError::UnexpectedAppendOffset {
                expected: Offset(8),
                found: Offset(5),
                ..
            }
        ));
        let stored = read_all(&log, Offset(0)).await;
        assert_eq!(stored[0].as_bytes(), &source_batch(0, 5, 4));
        assert_eq!(stored[1].partition_leader_epoch(), LeaderEpoch(7));
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(5)),
            (LeaderEpoch(5), Offset(4))
        );
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(6)),
            (LeaderEpoch(5), Offset(4))
        );
    });
}

#[test]
fn truncate_then_unclean_reopen_rebuilds_everything() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        for i in 0..40 {
            let epoch = LeaderEpoch(i32::try_from(i / 10).expect("small"));
            log.append_as_leader(batch(2, 120, i), epoch, AppendKind::Client, 0)
                .await
                .expect("append");
        }
        log.truncate_to(Offset(31)).await.expect("truncate");
        assert_eq!(log.log_end_offset(), Offset(30));
        assert_eq!(log.epoch_cache().latest_epoch(), Some(LeaderEpoch(1)));
        let before = read_all(&log, Offset(0)).await;
        drop(log); // no clean close: recovery path
        let log = open(dir.path(), small_config()).await;
        assert_eq!(log.log_end_offset(), Offset(30));
        assert_eq!(read_all(&log, Offset(0)).await, before);
        assert_eq!(
            log.end_offset_for_epoch(LeaderEpoch(0)),
            (LeaderEpoch(0), Offset(20))
        );
    });
}

#[test]
fn retention_and_delete_records_advance_log_start() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig {
            retention_bytes: 8192,
            ..small_config()
        };
        let mut log = open(dir.path(), config).await;
        for i in 0..60 {
            log.append_as_leader(batch(1, 400, i), LeaderEpoch(0), AppendKind::Client, 0)
                .await
                .expect("append");
        }
        log.update_high_watermark(log.log_end_offset());
        let deleted = log.delete_old_segments(100).await.expect("retention");
        assert!(deleted > 0);
        assert!(log.size_in_bytes() <= 8192 + 4096);
        let start = log.log_start_offset();
        assert!(start > Offset(0));
        assert!(matches!(
            log.read(Offset(0), 100).await,
            Err(LogError::OffsetOutOfRange { .. })
        ));
        log.advance_log_start_offset(Offset(55))
            .await
            .expect("delete records");
        assert_eq!(log.log_start_offset(), Offset(55));
        log.close(0).await.expect("close");
        let log = open(dir.path(), small_config()).await;
        assert_eq!(log.log_start_offset(), Offset(55));
        assert_eq!(log.log_end_offset(), Offset(60));
    });
}

#[test]
fn offset_for_timestamp_finds_first_record_at_or_after() {
    run(|| async {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), small_config()).await;
        for i in 0..30 {
            log.append_as_leader(
                batch(4, 50, 10_000 + i * 10),
                LeaderEpoch(0),
                AppendKind::Client,
                0,
            )
            .await
            .expect("append");
        }
        // Batch i holds timestamps 10_000 + 10i .. +3 at offsets 4i .. 4i+3.
        assert_eq!(
            log.offset_for_timestamp(10_052).await.expect("ok"),
            Some((10_052, Offset(22)))
        );
        assert_eq!(
            log.offset_for_timestamp(10_055).await.expect("ok"),
            Some((10_060, Offset(24)))
        );
        assert_eq!(
            log.offset_for_timestamp(0).await.expect("ok"),
            Some((10_000, Offset(0)))
        );
        assert_eq!(log.offset_for_timestamp(99_999).await.expect("ok"), None);
    });
}
