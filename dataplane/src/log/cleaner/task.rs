//! The cleaner of one shard: every `log.cleaner.backoff.ms` it looks at the compacted
//! partitions the shard owns (a read lock each, no I/O), cleans the ones past their
//! dirty ratio or `max.compaction.lag.ms` — overdue ones first, then the dirtiest — at
//! most `log.cleaner.threads` at once, and keeps what metrics and `topic describe` show.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use super::clean::{self, CleanEnv, CleanError, Snapshot, Throttle};
use crate::log::config::Ratio;
use crate::shard::{now_ms, ShardCtx};
use crate::types::TopicPartition;

/// Broker-level cleaner settings, Kafka's `log.cleaner.*` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.threads`: how many partitions each shard cleans at once.
    pub threads: usize,
    /// `log.cleaner.dedupe.buffer.size`: offset-map memory for the whole broker, shared
    /// out over the shards and their concurrent cleans.
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.buffer.load.factor`: how full an offset map may get.
    pub io_buffer_load_factor: Ratio,
    /// `log.cleaner.io.max.bytes.per.second` per shard (None: unthrottled, Kafka's
    /// default of Double.MAX_VALUE).
    pub io_max_bytes_per_second: Option<u64>,
    /// `log.cleaner.backoff.ms`: the pause between two looks at the shard's logs.
    pub backoff_ms: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            dedupe_buffer_size: 128 << 20,
            io_buffer_load_factor: Ratio::from_f64(0.9),
            io_max_bytes_per_second: None,
            backoff_ms: 15_000,
        }
    }
}

impl CleanerConfig {
    /// The offset-map bytes of one clean on a broker of `shards` shards.
    pub fn map_bytes_per_clean(&self, shards: usize) -> usize {
        let cleans = (shards.max(1) * self.threads.max(1)) as u64;
        let per = self.dedupe_buffer_size / cleans;
        (per as f64 * self.io_buffer_load_factor.as_f64()) as usize
    }
}

/// What the cleaner knows of one partition (metrics, `topic describe`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PartitionCleaning {
    /// Dirty bytes over cleanable bytes at the last look.
    pub dirty_ratio: f64,
    /// When the last clean finished (-1: none since start).
    pub last_clean_ms: i64,
}

/// A shard's cleaner counters.
#[derive(Debug, Default)]
pub struct CleanerState {
    pub bytes_read: Cell<u64>,
    pub bytes_written: Cell<u64>,
    pub cleans: Cell<u64>,
    pub failures: Cell<u64>,
    pub partitions: RefCell<HashMap<TopicPartition, PartitionCleaning>>,
}

impl CleanerState {
    fn add(cell: &Cell<u64>, v: u64) {
        cell.set(cell.get().saturating_add(v));
    }
}

/// Runs the shard's cleaner until the shard stops.
pub async fn run(ctx: Rc<ShardCtx>, config: CleanerConfig) {
    if !config.enable {
        tracing::info!(
            shard = ctx.id,
            "log cleaner disabled (log.cleaner.enable=false)"
        );
        return;
    }
    let throttle = RefCell::new(Throttle::new(
        config
            .io_max_bytes_per_second
            .map_or(f64::INFINITY, |b| b as f64),
    ));
    let map_bytes = config.map_bytes_per_clean(ctx.router.shard_count());
    loop {
        glommio::timer::sleep(Duration::from_millis(config.backoff_ms.max(10))).await;
        clean_once(&ctx, &config, &throttle, map_bytes).await;
    }
}

/// One look at the shard's logs and the cleans it starts; returns how many cleans ran.
pub async fn clean_once(
    ctx: &Rc<ShardCtx>,
    config: &CleanerConfig,
    throttle: &RefCell<Throttle>,
    map_bytes: usize,
) -> usize {
    let now = now_ms();
    let mut wanted: Vec<(
        bool,
        f64,
        Snapshot,
        std::rc::Weak<crate::partition::Partition>,
    )> = Vec::new();
    for p in ctx.partitions() {
        let Ok(log) = p.read().await else { continue };
        let Some(snap) = Snapshot::take(&log, now) else {
            continue;
        };
        let ratio = snap.dirty_ratio();
        ctx.cleaner
            .partitions
            .borrow_mut()
            .entry(p.topic_partition().clone())
            .or_insert(PartitionCleaning {
                dirty_ratio: 0.0,
                last_clean_ms: -1,
            })
            .dirty_ratio = ratio;
        if snap.wants_cleaning() {
            wanted.push((snap.overdue(), ratio, snap, Rc::downgrade(&p)));
        }
    }
    // Overdue first, then the dirtiest.
    wanted.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
    wanted.truncate(config.threads.max(1));
    let count = wanted.len();
    let cleans = wanted.into_iter().map(|(_, ratio, snap, weak)| {
        let env = CleanEnv {
            map_bytes,
            throttle,
            crash_at: None,
        };
        async move {
            let tp = snap.tp.clone();
            let started = std::time::Instant::now();
            let result = clean::clean(&weak, snap, &env).await;
            (tp, ratio, result, started.elapsed())
        }
    });
    for (tp, ratio, result, elapsed) in futures::future::join_all(cleans).await {
        match result {
            Ok(Some(stats)) => {
                CleanerState::add(&ctx.cleaner.bytes_read, stats.bytes_read);
                CleanerState::add(&ctx.cleaner.bytes_written, stats.bytes_written);
                CleanerState::add(&ctx.cleaner.cleans, 1);
                if let Some(p) = ctx.cleaner.partitions.borrow_mut().get_mut(&tp) {
                    p.last_clean_ms = now;
                }
                tracing::info!(
                    %tp, dirty_ratio = ratio, read = stats.bytes_read, written = stats.bytes_written,
                    batches = stats.batches_read, dropped = stats.batches_dropped,
                    rewritten = stats.batches_rewritten, keys = stats.map_entries,
                    cleaned_to = stats.cleaned_to.0, elapsed_ms = elapsed.as_millis() as u64,
                    "log cleaned"
                );
            }
            Ok(None) => {}
            Err(CleanError::LogChanged | CleanError::Gone) => {
                tracing::debug!(%tp, "clean given up: the log changed under it");
            }
            Err(e) => {
                CleanerState::add(&ctx.cleaner.failures, 1);
                tracing::warn!(%tp, error = %e, "log clean failed");
            }
        }
    }
    count
}
