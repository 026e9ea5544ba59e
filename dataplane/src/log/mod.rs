//! The partition log: Kafka's on-disk layout (segments, indexes, epoch checkpoint,
//! producer snapshots) with recovery. Everything here that touches files runs on the
//! glommio executor of the shard that owns the partition.

pub mod cleaner;
pub mod config;
pub mod epoch_cache;
pub mod fs;
pub mod index;
pub mod loader;
pub mod partition_log;
pub mod producer_state;
pub mod segment;
pub mod txn_index;
pub mod validate;

pub use config::LogConfig;
pub use partition_log::{AppendKind, FetchData, LogAppendInfo, LogError, PartitionLog};
