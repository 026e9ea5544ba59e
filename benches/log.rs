//! Criterion benches of the log's hot paths: header parse + CRC, leader and passthrough
//! append throughput, offset-index lookup, producer-state update per batch.
//!
//! Run: `cargo bench --bench log` (results and machine in perf/RESULTS.md).

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dataplane::log::index::OffsetIndex;
use dataplane::log::producer_state::{AppendOrigin, ProducerStateManager};
use dataplane::log::{AppendKind, LogConfig, PartitionLog};
use dataplane::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, TopicPartition};
use dataplane::wire::batch::{BatchBuilder, RecordBatch};
use dataplane::wire::records::encode_simple_records;

const SIZES: [(&str, usize); 3] = [("1KiB", 1 << 10), ("16KiB", 16 << 10), ("1MiB", 1 << 20)];

/// A batch of about `size` bytes made of 1 KiB records (fewer for the 1 KiB case).
fn batch_of(size: usize, base_offset: i64) -> Bytes {
    let value = if size <= 1024 { size - 80 } else { 1000 };
    let records = (size / (value + 12)).max(1) as i32;
    BatchBuilder {
        base_offset: Offset(base_offset),
        partition_leader_epoch: LeaderEpoch(3),
        last_offset_delta: records - 1,
        record_count: records,
        base_timestamp: 1_700_000_000_000,
        max_timestamp: 1_700_000_000_000,
        ..BatchBuilder::default()
    }
    .build(&encode_simple_records(records, 0, value))
}

fn header_parse_and_crc(c: &mut Criterion) {
    let mut g = c.benchmark_group("header_parse_crc");
    for (name, size) in SIZES {
        let b = batch_of(size, 0);
        g.throughput(Throughput::Bytes(b.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(name), &b, |bench, b| {
            bench.iter(|| {
                let batch = RecordBatch::parse_verified(b.clone(), 0).expect("valid");
                std::hint::black_box(batch.last_offset())
            })
        });
    }
    g.finish();
}

/// Appends `count` batches to a fresh log on a glommio executor and returns the time
/// the appends took (open and close excluded).
fn timed_appends(batches: Vec<Bytes>, passthrough: bool) -> Duration {
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(512 << 10)
        .spawn(move || async move {
            let dir = tempfile::tempdir_in(
                std::env::var("TWINLOG_BENCH_DIR").unwrap_or_else(|_| ".".into()),
            )
            .expect("tempdir");
            let config = LogConfig {
                segment_bytes: 256 << 20,
                ..LogConfig::default()
            };
            let mut log =
                PartitionLog::open(dir.path(), TopicPartition::new("bench", 0), None, config, 0)
                    .await
                    .expect("open");
            let start = Instant::now();
            for b in batches {
                if passthrough {
                    log.append_passthrough(b, 0).await.expect("append");
                } else {
                    log.append_as_leader(b, LeaderEpoch(3), AppendKind::Client, 0)
                        .await
                        .expect("append");
                }
            }
            let elapsed = start.elapsed();
            log.close(0).await.expect("close");
            elapsed
        })
        .expect("executor");
    ex.join().expect("join")
}

fn append_throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for (name, size) in SIZES {
        // About 64 MiB per sample, at least 64 batches.
        let count = ((64usize << 20) / size).clamp(64, 65_536);
        let template = batch_of(size, 0);
        g.throughput(Throughput::Bytes((template.len() * count) as u64));
        g.bench_function(BenchmarkId::new("leader", name), |bench| {
            bench.iter_custom(|iters| {
                (0..iters)
                    .map(|_| timed_appends(vec![template.clone(); count], false))
                    .sum()
            })
        });
        g.bench_function(BenchmarkId::new("passthrough", name), |bench| {
            let records = i64::from(
                RecordBatch::parse(template.clone(), 0)
                    .expect("valid")
                    .last_offset_delta(),
            ) + 1;
            let batches: Vec<Bytes> = (0..count as i64)
                .map(|i| batch_of(size, i * records))
                .collect();
            bench.iter_custom(|iters| {
                (0..iters)
                    .map(|_| timed_appends(batches.clone(), true))
                    .sum()
            })
        });
    }
    g.finish();
}

fn index_lookup(c: &mut Criterion) {
    let mut idx = OffsetIndex::new(Offset(0));
    for i in 0..262_144u32 {
        idx.append(Offset(i64::from(i) * 4), i * 4096);
    }
    let mut x = 1u64;
    c.bench_function("offset_index_lookup_256k_entries", |bench| {
        bench.iter(|| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let target = Offset(((x >> 33) % 1_048_576) as i64);
            std::hint::black_box(idx.lookup(target))
        })
    });
}

fn producer_state_update(c: &mut Criterion) {
    // 1,000 idempotent producers, 50 rounds each: batch i belongs to producer i % 1000
    // and carries the next sequence for it.
    let producers = 1_000i64;
    let rounds = 50i64;
    let batches: Vec<RecordBatch> = (0..producers * rounds)
        .map(|i| {
            let raw = BatchBuilder {
                last_offset_delta: 9,
                record_count: 10,
                producer_id: ProducerId(i % producers),
                producer_epoch: ProducerEpoch(0),
                base_sequence: ((i / producers) * 10) as i32,
                ..BatchBuilder::default()
            }
            .build(&encode_simple_records(10, 0, 16));
            RecordBatch::parse(raw, 0).expect("valid")
        })
        .collect();
    c.bench_function("producer_state_update_per_batch", |bench| {
        bench.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(batches.len() as u64) as usize;
                left -= n as u64;
                let mut psm = ProducerStateManager::new(i64::MAX);
                let start = Instant::now();
                for (i, batch) in batches[..n].iter().enumerate() {
                    let mut append = psm.begin_append(AppendOrigin::Client);
                    append
                        .append(&psm, batch, Offset(i as i64 * 10))
                        .expect("in sequence");
                    psm.commit(append);
                }
                elapsed += start.elapsed();
            }
            elapsed
        })
    });
}

criterion_group!(
    benches,
    header_parse_and_crc,
    append_throughput,
    index_lookup,
    producer_state_update
);
criterion_main!(benches);
