//! Consumer groups (Kafka's classic protocol), as a pure state machine.
//!
//! [`GroupCoordinator`] owns the groups whose `__consumer_offsets` partition this broker
//! leads. It does no I/O and reads no clock: every call takes `now_ms`, and every call
//! that changes something returns [`Effects`]: JoinGroup/SyncGroup responses that became
//! ready (requests that must wait for other members are parked as waiters, keyed by the
//! member and answered by a later call), records to append to `__consumer_offsets`, and
//! the time at which [`GroupCoordinator::tick`] must be called next.
//!
//! The caller's contract: append `Effects::records` (all of them, in order) to the
//! `__consumer_offsets` partition they name and only then deliver the responses, so a
//! client never sees an assignment or a commit that a restart could lose. On restart,
//! [`GroupCoordinator::load`] replays the partition's records.
//!
//! The semantics follow Apache Kafka's `GroupCoordinator` and `GroupMetadata` (state
//! names, error codes, rebalance and session timeouts, static membership, offset
//! retention); the record formats are Kafka's (see [`records`]).

pub mod messages;
pub mod records;
pub mod runtime;
pub mod state;

pub use messages::*;
pub use records::{partition_for, RecordError};
pub use state::{GroupCoordinator, GroupState};

/// The broker settings the group coordinator follows (Kafka's names, in milliseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an Empty group
    /// waits for more members (extended while members keep arriving, up to the rebalance
    /// timeout).
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`
    pub group_size_max: usize,
    /// `offsets.retention.minutes`, in milliseconds.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`
    pub offsets_retention_check_interval_ms: i64,
    /// `offset.metadata.max.bytes`
    pub offset_metadata_bytes_max: usize,
    /// `offsets.topic.num.partitions`: decides which partition a group's records go to.
    pub offsets_topic_partitions: i32,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            group_size_max: i32::MAX as usize,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            offset_metadata_bytes_max: 4096,
            offsets_topic_partitions: 50,
        }
    }
}
