//! The partition log: Kafka's on-disk layout (segments, indexes, epoch checkpoint,
//! producer snapshots) with recovery.
