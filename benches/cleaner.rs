//! Criterion bench of the log cleaner: one clean of a partition holding 32 MiB of 1 KiB
//! records whose keys are 10% unique (every key written ten times), from the snapshot to
//! the last swap: offset map, rewrite, swap. Throughput is the bytes of the dirty log
//! cleaned per second on one shard (one glommio executor).
//!
//! Run: `cargo bench --bench cleaner` (results and machine in perf/RESULTS.md).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dataplane::log::cleaner::clean::{self, CleanEnv, Throttle};
use dataplane::log::cleaner::Snapshot;
use dataplane::log::config::Ratio;
use dataplane::log::{AppendKind, LogConfig, PartitionLog};
use dataplane::partition::Partition;
use dataplane::types::{LeaderEpoch, TopicPartition};
use dataplane::wire::batch::BatchBuilder;
use dataplane::wire::records::encode_record;

/// Records per clean (1 KiB each): 32 MiB.
const RECORDS: usize = 32 * 1024;
/// Records per batch: 16 KiB batches.
const PER_BATCH: usize = 16;
/// Distinct keys: 10% of the records.
const KEYS: usize = RECORDS / 10;

fn batches() -> Vec<bytes::Bytes> {
    let value = vec![7u8; 1000];
    (0..RECORDS / PER_BATCH)
        .map(|b| {
            let mut body = Vec::with_capacity(PER_BATCH * 1040);
            for i in 0..PER_BATCH {
                let n = b * PER_BATCH + i;
                // Keys cycle in a scrambled order, so every batch is partly superseded.
                let key = format!("key-{:08}", (n * 7919) % KEYS);
                encode_record(&mut body, i as i32, 0, Some(key.as_bytes()), Some(&value));
            }
            BatchBuilder {
                last_offset_delta: PER_BATCH as i32 - 1,
                record_count: PER_BATCH as i32,
                base_timestamp: 1_700_000_000_000,
                max_timestamp: 1_700_000_000_000,
                ..BatchBuilder::default()
            }
            .build(&body)
        })
        .collect()
}

/// Fills a fresh log (untimed), then times one clean of it.
fn timed_clean(batches: Vec<bytes::Bytes>) -> Duration {
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(512 << 10)
        .spawn(move || async move {
            dataplane::reactor::spawn_tick();
            let dir = tempfile::tempdir_in(
                std::env::var("TWINLOG_BENCH_DIR").unwrap_or_else(|_| ".".into()),
            )
            .expect("tempdir");
            let config = LogConfig {
                segment_bytes: 8 << 20,
                compact: true,
                delete: false,
                min_cleanable_dirty_ratio: Ratio::from_f64(0.0),
                ..LogConfig::default()
            };
            let tp = TopicPartition::new("bench", 0);
            let log = PartitionLog::open(dir.path(), tp.clone(), None, config, 0)
                .await
                .expect("open");
            let p = Rc::new(Partition::new(tp, log, LeaderEpoch(0)));
            {
                let mut log = p.write().await.expect("writer");
                for b in batches {
                    log.append_as_leader(b, LeaderEpoch(0), AppendKind::Client, 0)
                        .await
                        .expect("append");
                }
                log.roll(0).await.expect("roll");
                log.flush(0).await.expect("flush");
            }
            let throttle = RefCell::new(Throttle::new(f64::INFINITY));
            let env = CleanEnv {
                map_bytes: 64 << 20,
                throttle: &throttle,
                crash_at: None,
            };
            let start = Instant::now();
            let snap = Snapshot::take(&p.read().await.expect("reader"), 1_700_000_000_000)
                .expect("compacted");
            let stats = clean::clean(&Rc::downgrade(&p), snap, &env)
                .await
                .expect("clean")
                .expect("something to clean");
            let elapsed = start.elapsed();
            assert!(stats.bytes_written < stats.bytes_read / 5, "{stats:?}");
            elapsed
        })
        .expect("executor");
    ex.join().expect("join")
}

fn clean_throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("cleaner");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    let input = batches();
    let bytes: usize = input.iter().map(|b| b.len()).sum();
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("1KiB_records_10pct_unique_keys", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| timed_clean(input.clone())).sum())
    });
    g.finish();
}

criterion_group!(benches, clean_throughput);
criterion_main!(benches);
