//! The mirror RPCs (API keys 94-104, all version 0, flexible) and the mirror partition
//! state numbering. Field layouts follow the upstream schemas of the same keys
//! (`kip1279-reference.md` §2) with Twinlog's message names (`DECISIONS.md`).
//!
//! kafka-protocol does not know these keys, so the messages are plain structs with
//! hand-written codecs ([`MirrorRequest::decode`], [`MirrorResponse::encode`], and the
//! client direction). Like the rest of `wire`, decoding never panics on input.

use std::fmt;

/// API keys of the mirror RPCs.
pub mod keys {
    pub const CREATE_MIRROR: i16 = 94;
    pub const ADD_TOPICS_TO_MIRROR: i16 = 95;
    pub const REMOVE_TOPICS_FROM_MIRROR: i16 = 96;
    pub const LIST_MIRRORS: i16 = 98;
    pub const DESCRIBE_MIRRORS: i16 = 99;
    pub const READ_MIRROR_STATES: i16 = 100;
    pub const WRITE_MIRROR_STATES: i16 = 101;
    pub const PAUSE_MIRROR_TOPICS: i16 = 102;
    pub const RESUME_MIRROR_TOPICS: i16 = 103;
    pub const DELETE_MIRROR: i16 = 104;

    /// Every mirror key Twinlog serves (all at version 0 only).
    pub const ALL: &[i16] = &[
        CREATE_MIRROR,
        ADD_TOPICS_TO_MIRROR,
        REMOVE_TOPICS_FROM_MIRROR,
        LIST_MIRRORS,
        DESCRIBE_MIRRORS,
        READ_MIRROR_STATES,
        WRITE_MIRROR_STATES,
        PAUSE_MIRROR_TOPICS,
        RESUME_MIRROR_TOPICS,
        DELETE_MIRROR,
    ];
}

/// Mirror error codes (reference §2.14).
pub mod errors {
    pub const READ_ONLY_TOPIC: i16 = 134;
    pub const CLUSTER_MIRROR_ALREADY_EXISTS: i16 = 136;
    pub const UNKNOWN_CLUSTER_MIRROR: i16 = 137;
    pub const TOPIC_ALREADY_IN_CLUSTER_MIRROR: i16 = 138;
    pub const TOPIC_NOT_IN_CLUSTER_MIRROR: i16 = 139;
    pub const MIRROR_TOPIC_ALREADY_PAUSED: i16 = 140;
    pub const MIRROR_TOPIC_NOT_PAUSED: i16 = 141;
    pub const MIRROR_TOPIC_BEING_STOPPED: i16 = 142;
    pub const CLUSTER_MIRROR_NOT_EMPTY: i16 = 143;
    pub const CLUSTER_MIRROR_AUTHORIZATION_FAILED: i16 = 144;
    pub const INVALID_CLUSTER_MIRROR_STATES: i16 = 145;
    pub const MIRROR_TOPIC_NOT_STOPPED: i16 = 146;

    /// The name of a mirror error code, for CLI messages and logs.
    pub fn name(code: i16) -> Option<&'static str> {
        Some(match code {
            READ_ONLY_TOPIC => "READ_ONLY_TOPIC",
            CLUSTER_MIRROR_ALREADY_EXISTS => "CLUSTER_MIRROR_ALREADY_EXISTS",
            UNKNOWN_CLUSTER_MIRROR => "UNKNOWN_CLUSTER_MIRROR",
            TOPIC_ALREADY_IN_CLUSTER_MIRROR => "TOPIC_ALREADY_IN_CLUSTER_MIRROR",
            TOPIC_NOT_IN_CLUSTER_MIRROR => "TOPIC_NOT_IN_CLUSTER_MIRROR",
            MIRROR_TOPIC_ALREADY_PAUSED => "MIRROR_TOPIC_ALREADY_PAUSED",
            MIRROR_TOPIC_NOT_PAUSED => "MIRROR_TOPIC_NOT_PAUSED",
            MIRROR_TOPIC_BEING_STOPPED => "MIRROR_TOPIC_BEING_STOPPED",
            CLUSTER_MIRROR_NOT_EMPTY => "CLUSTER_MIRROR_NOT_EMPTY",
            CLUSTER_MIRROR_AUTHORIZATION_FAILED => "CLUSTER_MIRROR_AUTHORIZATION_FAILED",
            INVALID_CLUSTER_MIRROR_STATES => "INVALID_CLUSTER_MIRROR_STATES",
            MIRROR_TOPIC_NOT_STOPPED => "MIRROR_TOPIC_NOT_STOPPED",
            _ => return None,
        })
    }
}

/// A mirror partition's actual state, as stored (int8) in `__mirror_state`
/// (`DECISIONS.md`, "Partition states").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MirrorPartitionState {
    Unknown,
    Preparing,
    Mirroring,
    Pausing,
    Paused,
    Stopping,
    Stopped,
    Failed,
}

impl MirrorPartitionState {
    pub const ALL: [MirrorPartitionState; 8] = [
        MirrorPartitionState::Unknown,
        MirrorPartitionState::Preparing,
        MirrorPartitionState::Mirroring,
        MirrorPartitionState::Pausing,
        MirrorPartitionState::Paused,
        MirrorPartitionState::Stopping,
        MirrorPartitionState::Stopped,
        MirrorPartitionState::Failed,
    ];

    pub fn code(self) -> i8 {
        match self {
            MirrorPartitionState::Unknown => -1,
            MirrorPartitionState::Preparing => 0,
            MirrorPartitionState::Mirroring => 1,
            MirrorPartitionState::Pausing => 2,
            MirrorPartitionState::Paused => 3,
            MirrorPartitionState::Stopping => 4,
            MirrorPartitionState::Stopped => 5,
            MirrorPartitionState::Failed => 6,
        }
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The name DescribeMirrors reports (`StateValue`).
    pub fn name(self) -> &'static str {
        match self {
            MirrorPartitionState::Unknown => "UNKNOWN",
            MirrorPartitionState::Preparing => "PREPARING",
            MirrorPartitionState::Mirroring => "MIRRORING",
            MirrorPartitionState::Pausing => "PAUSING",
            MirrorPartitionState::Paused => "PAUSED",
            MirrorPartitionState::Stopping => "STOPPING",
            MirrorPartitionState::Stopped => "STOPPED",
            MirrorPartitionState::Failed => "FAILED",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for MirrorPartitionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The desired state a topic's `mirror.name` config encodes: `<mirror>`,
/// `<mirror>.paused` or `<mirror>.removed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DesiredMirrorState {
    Mirroring,
    Paused,
    Stopped,
}

/// The topic config that carries the association and the desired state.
pub const MIRROR_NAME_CONFIG: &str = "mirror.name";
const PAUSED_SUFFIX: &str = ".paused";
const REMOVED_SUFFIX: &str = ".removed";

/// Splits a `mirror.name` value into the mirror and the desired state.
pub fn parse_mirror_name(value: &str) -> (&str, DesiredMirrorState) {
    if let Some(m) = value.strip_suffix(PAUSED_SUFFIX) {
        (m, DesiredMirrorState::Paused)
    } else if let Some(m) = value.strip_suffix(REMOVED_SUFFIX) {
        (m, DesiredMirrorState::Stopped)
    } else {
        (value, DesiredMirrorState::Mirroring)
    }
}

/// The `mirror.name` value for a mirror and a desired state.
pub fn mirror_name_value(mirror: &str, desired: DesiredMirrorState) -> String {
    match desired {
        DesiredMirrorState::Mirroring => mirror.to_string(),
        DesiredMirrorState::Paused => format!("{mirror}{PAUSED_SUFFIX}"),
        DesiredMirrorState::Stopped => format!("{mirror}{REMOVED_SUFFIX}"),
    }
}

// ---------------------------------------------------------------------------------------
// Messages. Strings are compact strings, arrays compact arrays, every struct ends with a
// tagged-field section (unknown tags are skipped on decode). "tag N" marks a tagged field.
// ---------------------------------------------------------------------------------------

/// A plain answer: CreateMirror (94) and DeleteMirror (104) responses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleMirrorResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
}

/// CreateMirror (94).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateMirrorRequest {
    pub mirror_name: String,
    /// `Config: []{ Name (string), Value (nullable string) }`.
    pub configs: Vec<(String, Option<String>)>,
}

/// One topic of AddTopicsToMirror (95), filled in from the source cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorTopicMetadata {
    pub topic_id: uuid::Uuid,
    pub name: String,
    pub num_partitions: i32,
}

/// AddTopicsToMirror (95).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddTopicsToMirrorRequest {
    pub mirror_name: String,
    pub topics: Vec<MirrorTopicMetadata>,
    /// tag 0
    pub include_patterns: Vec<String>,
    /// tag 1
    pub exclude_patterns: Vec<String>,
    /// -1: not set.
    pub state_validation_offset: i64,
}

/// RemoveTopicsFromMirror (96).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoveTopicsFromMirrorRequest {
    pub mirror_name: String,
    /// `Topics: []{ TopicName }`.
    pub topics: Vec<String>,
    /// tag 0
    pub patterns: Vec<String>,
    pub state_validation_offset: i64,
}

/// PauseMirrorTopics (102) and ResumeMirrorTopics (103) share this layout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorTopicsRequest {
    pub mirror_name: String,
    /// `Topics: []{ TopicName }`.
    pub topics: Vec<String>,
    pub state_validation_offset: i64,
}

/// Per-topic outcome of AddTopicsToMirror, RemoveTopicsFromMirror, Pause and Resume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorTopicResult {
    pub name: String,
    pub error_code: i16,
    pub error_message: Option<String>,
}

/// Response of 95, 96, 102 and 103. The top-level error is the first per-topic error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorTopicsResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub topics: Vec<MirrorTopicResult>,
}

/// DeleteMirror (104).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteMirrorRequest {
    pub mirror_name: String,
    pub state_validation_offset: i64,
}

/// ListMirrors (98).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListMirrorsRequest {
    pub include_topic_names: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListedMirror {
    pub mirror_name: String,
    pub source_bootstrap: String,
    /// "" = unknown.
    pub source_cluster_id: String,
    pub topic_count: i32,
    pub topic_names: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListMirrorsResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub mirrors: Vec<ListedMirror>,
}

/// One LME look-up of DescribeMirrors: a topic id and its partitions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LmeLookup {
    pub topic_id: uuid::Uuid,
    pub partitions: Vec<i32>,
}

/// DescribeMirrors (99).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeMirrorsRequest {
    /// `None` or empty: all mirrors.
    pub mirror_names: Option<Vec<String>>,
    pub include_authorized_operations: bool,
    /// tag 0: the asking cluster's own id (LME look-ups).
    pub cluster_id: Option<String>,
    /// tag 1
    pub lme_lookups: Vec<LmeLookup>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMirrorPartition {
    pub partition: i32,
    /// Source high watermark, -1 unknown.
    pub source_offset: i64,
    /// Local log end offset, -1 unknown.
    pub destination_offset: i64,
    /// -1 unknown.
    pub lag: i64,
    /// A [`MirrorPartitionState::name`].
    pub state: String,
    /// -1: a non-retryable failure.
    pub retry_attempt: i16,
    pub error_message: Option<String>,
    /// tag 0 (Twinlog): records the last PREPARING truncation discarded, -1 unknown.
    pub truncated_records: i64,
    /// tag 1 (Twinlog): the last mirrored epoch recorded at STOPPING, -1 none.
    pub last_mirrored_epoch: i32,
}

impl Default for DescribedMirrorPartition {
    fn default() -> Self {
        DescribedMirrorPartition {
            partition: 0,
            source_offset: -1,
            destination_offset: -1,
            lag: -1,
            state: MirrorPartitionState::Unknown.name().to_string(),
            retry_attempt: 0,
            error_message: None,
            truncated_records: -1,
            last_mirrored_epoch: -1,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribedMirrorTopic {
    pub name: String,
    pub partitions: Vec<DescribedMirrorPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMirror {
    pub error_code: i16,
    pub mirror_name: String,
    /// i32::MIN: not asked for.
    pub authorized_operations: i32,
    pub topics: Vec<DescribedMirrorTopic>,
}

impl Default for DescribedMirror {
    fn default() -> Self {
        DescribedMirror {
            error_code: 0,
            mirror_name: String::new(),
            authorized_operations: i32::MIN,
            topics: Vec::new(),
        }
    }
}

/// One partition's LME answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LmePartition {
    pub partition: i32,
    /// -1: none recorded.
    pub last_mirrored_epoch: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LmeResult {
    pub topic_id: uuid::Uuid,
    pub partitions: Vec<LmePartition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeMirrorsResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub mirrors: Vec<DescribedMirror>,
    /// tag 0
    pub lookup_results: Vec<LmeResult>,
}

/// ReadMirrorStates (100).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadMirrorStatesRequest {
    pub mirror_name: String,
    /// `Topics: []{ Name, Partitions: []int32 }`.
    pub topics: Vec<(String, Vec<i32>)>,
}

/// A partition's stored state as ReadMirrorStates returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorStateEntry {
    pub partition: i32,
    /// -1: none.
    pub last_mirrored_epoch: i32,
    /// A [`MirrorPartitionState::code`].
    pub state: i8,
    pub error_code: i16,
    pub previous_state: i8,
    pub retry_attempt: i16,
    pub error_message: Option<String>,
    /// tag 0: the leader epoch of the last writer.
    pub leader_epoch: i32,
    /// tag 1: +1 on every transition.
    pub state_epoch: i32,
    /// tag 2 (Twinlog): records the last PREPARING truncation discarded, -1 unknown.
    pub truncated_records: i64,
}

impl Default for MirrorStateEntry {
    fn default() -> Self {
        MirrorStateEntry {
            partition: 0,
            last_mirrored_epoch: -1,
            state: MirrorPartitionState::Unknown.code(),
            error_code: 0,
            previous_state: MirrorPartitionState::Unknown.code(),
            retry_attempt: 0,
            error_message: None,
            leader_epoch: -1,
            state_epoch: 0,
            truncated_records: -1,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorStatesTopic {
    pub name: String,
    pub partitions: Vec<MirrorStateEntry>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadMirrorStatesResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub topics: Vec<MirrorStatesTopic>,
}

/// WriteMirrorStates (101): each entry's `state` (when not `Unknown`) is written as a
/// state record; `last_mirrored_epoch >= 0` is written as an LME record. `state_epoch` is
/// the epoch the writer read (the coordinator rejects a mismatch with
/// `FENCED_LEADER_EPOCH`... see the coordinator), `leader_epoch` the writer's partition
/// leader epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteMirrorStatesRequest {
    pub mirror_name: String,
    pub topics: Vec<MirrorStatesTopic>,
    pub stopped_topics: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionResult {
    pub partition: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteMirrorStatesTopicResult {
    pub name: String,
    pub partitions: Vec<PartitionResult>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteMirrorStatesResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<WriteMirrorStatesTopicResult>,
}

/// A decoded mirror request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorRequest {
    CreateMirror(CreateMirrorRequest),
    AddTopicsToMirror(AddTopicsToMirrorRequest),
    RemoveTopicsFromMirror(RemoveTopicsFromMirrorRequest),
    ListMirrors(ListMirrorsRequest),
    DescribeMirrors(DescribeMirrorsRequest),
    ReadMirrorStates(ReadMirrorStatesRequest),
    WriteMirrorStates(WriteMirrorStatesRequest),
    PauseMirrorTopics(MirrorTopicsRequest),
    ResumeMirrorTopics(MirrorTopicsRequest),
    DeleteMirror(DeleteMirrorRequest),
}

/// A mirror response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorResponse {
    CreateMirror(SimpleMirrorResponse),
    AddTopicsToMirror(MirrorTopicsResponse),
    RemoveTopicsFromMirror(MirrorTopicsResponse),
    ListMirrors(ListMirrorsResponse),
    DescribeMirrors(DescribeMirrorsResponse),
    ReadMirrorStates(ReadMirrorStatesResponse),
    WriteMirrorStates(WriteMirrorStatesResponse),
    PauseMirrorTopics(MirrorTopicsResponse),
    ResumeMirrorTopics(MirrorTopicsResponse),
    DeleteMirror(SimpleMirrorResponse),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_codes_round_trip() {
        for s in MirrorPartitionState::ALL {
            assert_eq!(MirrorPartitionState::from_code(s.code()), Some(s));
            assert_eq!(MirrorPartitionState::from_name(s.name()), Some(s));
        }
        assert_eq!(MirrorPartitionState::from_code(7), None);
    }

    #[test]
    fn mirror_name_values() {
        for d in [
            DesiredMirrorState::Mirroring,
            DesiredMirrorState::Paused,
            DesiredMirrorState::Stopped,
        ] {
            let v = mirror_name_value("m1", d);
            assert_eq!(parse_mirror_name(&v), ("m1", d));
        }
    }
}
