//! Twinlog's data plane: Kafka wire formats, the partition log, and the thread-per-core
//! shards that serve clients (and, later, run mirror fetchers).
//!
//! This crate never depends on `controlplane`; what it needs from there it names as a
//! trait ([`controller::ControllerHandle`]) or a type ([`metadata::MetadataImage`]) and
//! the binary wires the implementation in.

pub mod acl;
pub mod api;
mod buffers;
pub mod client;
pub mod controller;
pub mod coordinator_log;
pub mod failpoint;
pub mod fetcher;
pub mod group;
pub mod kafka_configs;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod partition;
pub mod reactor;
pub mod shard;
#[cfg(test)]
mod test_support;
pub mod txn;
pub mod types;
pub mod wire;
