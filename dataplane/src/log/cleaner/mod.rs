//! Log compaction: Kafka's log cleaner, run by each shard for the partitions it owns
//! (no cross-shard access). [`rules`] decides what a batch keeps, [`offset_map`] holds the
//! latest offset per key, [`clean`] cleans one partition in bounded, throttled steps and
//! swaps the result in crash-safely, and [`task`] picks the partitions to clean.

pub mod clean;
pub mod offset_map;
pub mod rules;
pub mod task;

pub use clean::{read_checkpoint, recover_swap, CleanError, CleanStats, Snapshot};
pub use task::{CleanerConfig, CleanerState};
