//! Criterion benches of the log's hot paths: header parse + CRC, leader and passthrough
//! append throughput (passthrough with the log's CRC check and with the caller's),
//! offset-index lookup, producer-state update per batch.
//!
//! Run: `cargo bench --bench log` (results and machine in perf/RESULTS.md). With
//! `TWINLOG_BENCH_CPU=1` the append benches time the appending thread's CPU instead of
//! the wall clock: what the log itself costs, without the kernel's page-cache copy (done
//! by io_uring workers) and less disturbed by disk write-back and other load.

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

/// How the timed appends go into the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Append {
    Leader,
    /// `append_passthrough`: the log verifies each batch's CRC.
    Passthrough,
    /// `append_passthrough_verified`: the batches are parsed and CRC-checked before the
    /// clock starts, as the mirror fetcher does when it splits a fetched record set.
    PassthroughVerified,
}

/// CPU time the calling thread has used so far (Linux `/proc/thread-self/schedstat`).
fn thread_cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let on_cpu_ns = stat
        .split_whitespace()
        .next()
        .and_then(|ns| ns.parse().ok())
        .expect("on-CPU nanoseconds");
    Duration::from_nanos(on_cpu_ns)
}

/// Appends `count` batches to a fresh log on a glommio executor and returns the time
/// the appends took (open and close excluded): wall-clock time, or the executor
/// thread's CPU time when `TWINLOG_BENCH_CPU` is set.
fn timed_appends(batches: Vec<Bytes>, mode: Append) -> Duration {
    let cpu = std::env::var_os("TWINLOG_BENCH_CPU").is_some();
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(512 << 10)
        .spawn(move || async move {
            dataplane::reactor::spawn_tick();
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
            let parsed: Vec<RecordBatch> = if mode == Append::PassthroughVerified {
                batches
                    .iter()
                    .map(|b| RecordBatch::parse_verified(b.clone(), 0).expect("valid"))
                    .collect()
            } else {
                Vec::new()
            };
            let start = Instant::now();
            let start_cpu = cpu.then(thread_cpu_time);
            for (i, b) in batches.into_iter().enumerate() {
                match mode {
                    Append::Leader => {
                        log.append_as_leader(b, LeaderEpoch(3), AppendKind::Client, 0)
                            .await
                            .expect("append");
                    }
                    Append::Passthrough => {
                        log.append_passthrough(b, 0).await.expect("append");
                    }
                    Append::PassthroughVerified => {
                        log.append_passthrough_verified(b, &parsed[i..=i], 0)
                            .await
                            .expect("append");
                    }
                }
            }
            let elapsed = match start_cpu {
                Some(start_cpu) => thread_cpu_time() - start_cpu,
                None => start.elapsed(),
            };
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
                    .map(|_| timed_appends(vec![template.clone(); count], Append::Leader))
                    .sum()
            })
        });
        let records = i64::from(
            RecordBatch::parse(template.clone(), 0)
                .expect("valid")
                .last_offset_delta(),
        ) + 1;
        let batches: Vec<Bytes> = (0..count as i64)
            .map(|i| batch_of(size, i * records))
            .collect();
        for (id, mode) in [
            ("passthrough", Append::Passthrough),
            ("passthrough_verified", Append::PassthroughVerified),
        ] {
            g.bench_function(BenchmarkId::new(id, name), |bench| {
                bench.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| timed_appends(batches.clone(), mode))
                        .sum()
                })
            });
        }
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
