//! Plain request, response and effect types of the group coordinator. The API handlers
//! map kafka-protocol's wire structs to and from these (filling in version defaults,
//! e.g. `rebalance_timeout_ms = session_timeout_ms` for JoinGroup v0), so the state
//! machine stays independent of wire versions.

use bytes::Bytes;

use crate::types::{ProducerId, TopicPartition};

/// The caller's handle for a parked JoinGroup or SyncGroup request (for example a
/// connection id and correlation id packed together). The coordinator only echoes it.
pub type WaiterId = u64;

/// One protocol a joining member supports, with its metadata (for the `consumer`
/// protocol type, the assignor's subscription bytes, passed through untouched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupProtocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequest {
    pub group_id: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// Empty for a member that does not have an id yet.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    /// In the member's order of preference.
    pub protocols: Vec<JoinGroupProtocol>,
    pub client_id: String,
    pub client_host: String,
    /// JoinGroup v4 and up: a new dynamic member is first handed an id with
    /// MEMBER_ID_REQUIRED and must join again with it.
    pub require_known_member_id: bool,
}

/// A member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    /// KIP-814: a static leader that rejoined without a rebalance must not compute a new
    /// assignment. For JoinGroup below v9 the handler must instead send an empty member
    /// list and a leader id other than the member's own.
    pub skip_assignment: bool,
    pub member_id: String,
    /// Filled for the leader only.
    pub members: Vec<JoinGroupMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5 and up; checked against the group's when present.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment per member id; empty from followers.
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl JoinGroupResponse {
    /// A JoinGroup answer carrying only `error_code`.
    pub fn failed(error_code: i16, member_id: &str) -> Self {
        JoinGroupResponse {
            error_code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.to_owned(),
            members: Vec::new(),
        }
    }
}

impl SyncGroupResponse {
    /// A SyncGroup answer carrying only `error_code`.
    pub fn failed(error_code: i16) -> Self {
        SyncGroupResponse {
            error_code,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// A member leaving; LeaveGroup v0-v2 carry exactly one, with a member id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    pub members: Vec<LeavingMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    pub error_code: i16,
    /// Per member, in request order (v3 and up; v0-v2 report the single member's code as
    /// the top-level error).
    pub members: Vec<(LeavingMember, i16)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitPartition {
    pub partition: TopicPartition,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    /// `-1` (and an empty member id) for a "simple" commit by a client that does not use
    /// group membership; accepted only while the group has no members.
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// OffsetCommit v2-v4 `retention_time_ms`; `-1` for the broker's retention.
    pub retention_time_ms: i64,
    pub partitions: Vec<OffsetCommitPartition>,
}

/// TxnOffsetCommit. The producer epoch is not here: the append of the returned records
/// with the request's producer id and epoch is what fences a stale producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    pub transactional_id: String,
    pub group_id: String,
    pub producer_id: ProducerId,
    /// `-1` and an empty member id before TxnOffsetCommit v3 (no membership check).
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub partitions: Vec<OffsetCommitPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResponse {
    pub partitions: Vec<(TopicPartition, i16)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    pub group_id: String,
    /// `None`: every partition with a committed offset.
    pub partitions: Option<Vec<TopicPartition>>,
    /// OffsetFetch v7+: answer UNSTABLE_OFFSET_COMMIT for partitions with a pending
    /// transactional commit instead of a possibly stale offset.
    pub require_stable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchPartition {
    pub partition: TopicPartition,
    /// `-1` when nothing is committed.
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponse {
    pub error_code: i16,
    pub partitions: Vec<OffsetFetchPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The metadata for the group's protocol; empty unless the group is Stable.
    pub metadata: Bytes,
    /// Empty unless the group is Stable.
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub group_id: String,
    pub error_code: i16,
    /// Kafka's state name; "Dead" for a group that does not exist.
    pub state: String,
    pub protocol_type: String,
    /// The chosen protocol; empty unless the group is Stable.
    pub protocol_data: String,
    pub members: Vec<DescribedMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteResponse {
    pub error_code: i16,
    pub partitions: Vec<(TopicPartition, i16)>,
}

/// A record for `__consumer_offsets`: already encoded key and value (`None` is a
/// tombstone), and the partition it belongs to ([`super::partition_for`] of its group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorRecord {
    pub partition: i32,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// One entry of a `__consumer_offsets` partition replayed by
/// [`super::GroupCoordinator::load_entries`], in log order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadEntry<'a> {
    /// A record; `producer_id` is set when its batch is transactional.
    Record {
        key: &'a [u8],
        value: Option<&'a [u8]>,
        producer_id: Option<ProducerId>,
    },
    /// A COMMIT (`commit`) or ABORT control record of `producer_id`'s transaction.
    TxnMarker {
        producer_id: ProducerId,
        commit: bool,
    },
}

/// What a call asks of the caller. Append `records` first, then deliver the responses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    pub join_responses: Vec<(WaiterId, JoinGroupResponse)>,
    pub sync_responses: Vec<(WaiterId, SyncGroupResponse)>,
    pub records: Vec<CoordinatorRecord>,
    /// When to call `tick` next (the earliest session, rebalance, pending-member or
    /// offset-expiration deadline); `None` when nothing is scheduled.
    pub next_deadline_ms: Option<i64>,
}
