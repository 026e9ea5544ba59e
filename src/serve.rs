//! `twinlog serve`: starts one glommio executor per core, pinned, and opens (recovering
//! where needed) every partition log found in the data directory on the shard that owns
//! it. The Kafka listener arrives with the broker issue; until then the process owns
//! and recovers its logs, and closes them cleanly on SIGTERM/SIGINT.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dataplane::log::{LogConfig, PartitionLog};
use dataplane::types::TopicPartition;
use glommio::{LocalExecutorPoolBuilder, PoolPlacement};

/// io_uring memory per executor. glommio registers it in three rings; 3 x 512 KiB x
/// executors stays under the 8 MiB memlock cap of unprivileged users on small hosts.
const IO_MEMORY_BYTES: usize = 512 << 10;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Directory holding the partition logs.
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// Number of data-plane shards (default: one per available core).
    #[arg(long)]
    shards: Option<usize>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot install signal handler: {0}")]
    Signal(std::io::Error),
    #[error("cannot start shards: {0}")]
    Executors(String),
    #[error("shard failed: {0}")]
    Shard(String),
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Default placement of a partition on a shard (FNV-1a over the name, so it is stable
/// across restarts and processes).
pub fn shard_for(tp: &TopicPartition, shards: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in tp.topic.bytes().chain(tp.partition.to_be_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % shards.max(1) as u64) as usize
}

pub fn run(args: ServeArgs) -> Result<(), ServeError> {
    std::fs::create_dir_all(&args.data_dir).map_err(|source| ServeError::DataDir {
        path: args.data_dir.clone(),
        source,
    })?;
    let shards = args
        .shards
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(ServeError::Signal)?;
    }
    let mut partitions: Vec<TopicPartition> = std::fs::read_dir(&args.data_dir)
        .map_err(|source| ServeError::DataDir {
            path: args.data_dir.clone(),
            source,
        })?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| TopicPartition::from_dir_name(&e.file_name().to_string_lossy()))
        .collect();
    partitions.sort();
    tracing::info!(shards, data_dir = %args.data_dir.display(), partitions = partitions.len(), "twinlog starting");

    let data_dir = args.data_dir.clone();
    let next_shard = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handles = LocalExecutorPoolBuilder::new(PoolPlacement::MaxSpread(shards, None))
        .io_memory(IO_MEMORY_BYTES)
        .on_all_shards(move || {
            let stop = Arc::clone(&stop);
            let data_dir = data_dir.clone();
            let partitions = partitions.clone();
            let shard = next_shard.fetch_add(1, Ordering::Relaxed);
            async move {
                let mut logs = Vec::new();
                for tp in partitions
                    .into_iter()
                    .filter(|tp| shard_for(tp, shards) == shard)
                {
                    match PartitionLog::open(
                        &data_dir,
                        tp.clone(),
                        None,
                        LogConfig::default(),
                        now_ms(),
                    )
                    .await
                    {
                        Ok(log) => logs.push(log),
                        Err(e) => tracing::error!(%tp, error = %e, "cannot open partition log"),
                    }
                }
                tracing::info!(shard, partitions = logs.len(), "shard ready");
                while !stop.load(Ordering::Relaxed) {
                    glommio::timer::sleep(Duration::from_millis(100)).await;
                }
                for log in logs {
                    let tp = log.topic_partition().clone();
                    if let Err(e) = log.close(now_ms()).await {
                        tracing::error!(%tp, error = %e, "clean close failed");
                    }
                }
                tracing::info!(shard, "shard stopped");
            }
        })
        .map_err(|e| ServeError::Executors(e.to_string()))?;
    for r in handles.join_all() {
        r.map_err(|e| ServeError::Shard(e.to_string()))?;
    }
    tracing::info!("twinlog stopped");
    Ok(())
}
