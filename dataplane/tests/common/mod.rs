//! Helpers shared by the log integration tests: a glommio executor per test and
//! builders for record batches.
#![allow(dead_code)]

use std::future::Future;
use std::path::Path;

use bytes::Bytes;
use dataplane::log::{LogConfig, PartitionLog};
use dataplane::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, TopicPartition};
use dataplane::wire::batch::BatchBuilder;
use dataplane::wire::records::encode_simple_records;

/// Runs `f` on a fresh glommio executor with io memory small enough for the 8 MiB
/// memlock limit of unprivileged users.
pub fn run<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .spawn(|| {
            dataplane::reactor::spawn_tick();
            f()
        })
        .expect("executor starts");
    ex.join().expect("executor finishes");
}

pub fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

pub async fn open(dir: &Path, config: LogConfig) -> PartitionLog {
    PartitionLog::open(dir, tp(), None, config, 0)
        .await
        .expect("log opens")
}

/// A non-idempotent batch of `records` records of `value_size` bytes; offsets are
/// assigned by the leader.
pub fn batch(records: i32, value_size: usize, timestamp_ms: i64) -> Bytes {
    BatchBuilder {
        last_offset_delta: records - 1,
        record_count: records,
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms + i64::from(records) - 1,
        ..BatchBuilder::default()
    }
    .build(&encode_simple_records(records, 0, value_size))
}

/// An idempotent (optionally transactional) batch.
pub fn producer_batch(
    pid: i64,
    epoch: i16,
    base_sequence: i32,
    records: i32,
    transactional: bool,
) -> Bytes {
    BatchBuilder {
        last_offset_delta: records - 1,
        record_count: records,
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(epoch),
        base_sequence,
        base_timestamp: 1_000,
        max_timestamp: 1_000,
        ..BatchBuilder::default()
    }
    .transactional(transactional)
    .build(&encode_simple_records(records, 0, 8))
}

/// A batch with a fixed base offset and epoch, as a mirror fetcher receives it.
pub fn source_batch(base_offset: i64, epoch: i32, records: i32) -> Bytes {
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

/// Reads the whole log from `from` to the end, batch by batch.
pub async fn read_all(log: &PartitionLog, from: Offset) -> Vec<dataplane::wire::RecordBatch> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let data = log.read(next, 1 << 20).await.expect("read");
        assert!(
            !data.records.is_empty(),
            "no data at {next} below end {}",
            log.log_end_offset()
        );
        for b in dataplane::wire::BatchIter::new(data.records, 0, true) {
            let b = b.expect("stored batch is valid");
            next = b.next_offset();
            out.push(b);
        }
    }
    out
}
