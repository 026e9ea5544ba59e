//! Twinlog's data plane: Kafka wire formats, the partition log, and (later) the
//! thread-per-core shards that serve clients and run mirror fetchers.
//!
//! This crate never depends on `controlplane`; what it needs from there it names as a
//! trait or frame type and the binary wires the implementation in.

pub mod log;
pub mod types;
pub mod wire;
