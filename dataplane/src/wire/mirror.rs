//! The mirror RPCs (API keys 94-104, all version 0, flexible) and the mirror partition
//! state numbering. Field layouts follow the upstream schemas of the same keys
//! (`kip1279-reference.md` §2) with Twinlog's message names (`DECISIONS.md`).
//!
//! kafka-protocol does not know these keys, so the messages are plain structs with
//! hand-written codecs ([`MirrorRequest::decode`], [`MirrorResponse::encode`], and the
//! client direction). Like the rest of `wire`, decoding never panics on input.

use std::fmt;

use bytes::{Buf, BufMut, Bytes, BytesMut};

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

/// Topic config of a mirrored topic whose source reports no topic ids (Metadata below
/// v10: Kafka before 2.8): the value [`NO_SOURCE_TOPIC_ID`] says the local topic id was
/// assigned here. Written by AddTopicsToMirror, shown read-only, never synced.
pub const MIRROR_SOURCE_TOPIC_ID_CONFIG: &str = "mirror.source.topic.id";
pub const NO_SOURCE_TOPIC_ID: &str = "none";
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
    /// tag 2 (Twinlog): the source's newest record timestamp minus the newest mirrored
    /// one, in ms, -1 unknown.
    pub lag_ms: i64,
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
            lag_ms: -1,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribedMirrorTopic {
    pub name: String,
    pub partitions: Vec<DescribedMirrorPartition>,
}

/// One step of a mirror's periodic metadata sync (Twinlog: source cluster id, topic
/// configs, partition counts, deleted source topics, group offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorSyncStatus {
    /// The step's name, e.g. `topic-configs`.
    pub step: String,
    /// Wall-clock time (ms since the epoch) of the step's last success, -1 never.
    pub last_success_ms: i64,
    /// Why the step's latest run failed; `None` once a run succeeds.
    pub last_error: Option<String>,
}

impl Default for MirrorSyncStatus {
    fn default() -> Self {
        MirrorSyncStatus {
            step: String::new(),
            last_success_ms: -1,
            last_error: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMirror {
    pub error_code: i16,
    pub mirror_name: String,
    /// i32::MIN: not asked for.
    pub authorized_operations: i32,
    pub topics: Vec<DescribedMirrorTopic>,
    /// tag 0 (Twinlog): the metadata sync's steps, last success and last error.
    pub sync: Vec<MirrorSyncStatus>,
}

impl Default for DescribedMirror {
    fn default() -> Self {
        DescribedMirror {
            error_code: 0,
            mirror_name: String::new(),
            authorized_operations: i32::MIN,
            topics: Vec::new(),
            sync: Vec::new(),
        }
    }
}

/// One partition's LME answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LmePartition {
    pub partition: i32,
    /// -1: none recorded.
    pub last_mirrored_epoch: i32,
    /// tag 0 (Twinlog): where the mirrored history ended at failover, -1 unknown.
    pub last_mirrored_offset: i64,
}

impl Default for LmePartition {
    fn default() -> Self {
        LmePartition {
            partition: 0,
            last_mirrored_epoch: -1,
            last_mirrored_offset: -1,
        }
    }
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
    /// tag 3 (Twinlog): the log end offset that goes with `last_mirrored_epoch` (where
    /// the mirrored history ended at failover), -1 unknown.
    pub last_mirrored_offset: i64,
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
            last_mirrored_offset: -1,
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

impl WriteMirrorStatesRequest {
    /// One result per partition of the request, in its order, each with `error_code`
    /// and `error_message`.
    pub fn results(
        &self,
        error_code: i16,
        error_message: Option<&str>,
    ) -> Vec<WriteMirrorStatesTopicResult> {
        self.topics
            .iter()
            .map(|t| WriteMirrorStatesTopicResult {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|e| PartitionResult {
                        partition: e.partition,
                        error_code,
                        error_message: error_message.map(str::to_string),
                    })
                    .collect(),
            })
            .collect()
    }
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

// ---------------------------------------------------------------------------------------
// Codec. Version 0 of every mirror key, flexible (KIP-482): unsigned varints for compact
// lengths (length + 1, 0 = null), big-endian integers, 16-byte uuids, one byte per bool,
// and a tagged-field section closing every struct. Tagged fields are written only when
// they differ from the `Default` value, in increasing tag order; unknown tags are skipped
// on decode. Decoding never panics and never allocates more than the input can justify.
// ---------------------------------------------------------------------------------------

/// Why a mirror message did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorCodecError {
    #[error("truncated {field}: needs {needed} bytes, {remaining} left")]
    Truncated {
        field: &'static str,
        needed: usize,
        remaining: usize,
    },
    #[error("unknown mirror API key {0}")]
    UnknownApiKey(i16),
    #[error("mirror API key {key} v{version} is not supported (v0 only)")]
    UnsupportedVersion { key: i16, version: i16 },
    #[error("{field}: unsigned varint longer than 32 bits")]
    BadVarint { field: &'static str },
    #[error("{field}: non-nullable string is null")]
    NullString { field: &'static str },
    #[error("{field}: string is not valid UTF-8")]
    Utf8 { field: &'static str },
    #[error("{field}: string of {len} bytes but only {remaining} left")]
    BadStringLength {
        field: &'static str,
        len: usize,
        remaining: usize,
    },
    #[error("{field}: non-nullable array is null")]
    NullArray { field: &'static str },
    #[error("{field}: array of {count} elements cannot fit in the {remaining} bytes left")]
    BadArrayLength {
        field: &'static str,
        count: usize,
        remaining: usize,
    },
    #[error("{field}: tagged field {tag} declares {declared} bytes but its value uses {used}")]
    TaggedFieldSize {
        field: &'static str,
        tag: u32,
        declared: usize,
        used: usize,
    },
}

type CodecResult<T> = Result<T, MirrorCodecError>;

/// Checks that `version` of mirror key `api_key` is one Twinlog serves (v0 only).
pub fn check_version(api_key: i16, version: i16) -> CodecResult<()> {
    if !keys::ALL.contains(&api_key) {
        return Err(MirrorCodecError::UnknownApiKey(api_key));
    }
    if version != 0 {
        return Err(MirrorCodecError::UnsupportedVersion {
            key: api_key,
            version,
        });
    }
    Ok(())
}

/// Array elements preallocated at most, whatever count the input claims.
const PREALLOC_ELEMENTS_MAX: usize = 1024;

// --- writing ---------------------------------------------------------------------------

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// A length as the wire holds it. A string, array or tagged value of 4 GiB cannot be part
/// of a message that fits a frame: such a value is a bug of the caller.
fn len_u32(len: usize) -> u32 {
    u32::try_from(len)
        .ok()
        .filter(|l| *l < u32::MAX)
        .expect("length of a mirror message field fits in 32 bits")
}

/// A compact length: `len + 1` (0 is null).
fn put_compact_len(buf: &mut BytesMut, len: usize) {
    put_uvarint(buf, len_u32(len) + 1);
}

fn put_str(buf: &mut BytesMut, s: &str) {
    put_compact_len(buf, s.len());
    buf.put_slice(s.as_bytes());
}

fn put_nullable_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(buf, 0),
        Some(s) => put_str(buf, s),
    }
}

fn put_bool(buf: &mut BytesMut, b: bool) {
    buf.put_u8(u8::from(b));
}

fn put_uuid(buf: &mut BytesMut, id: &uuid::Uuid) {
    buf.put_slice(id.as_bytes());
}

fn put_array<T>(buf: &mut BytesMut, items: &[T], mut put: impl FnMut(&mut BytesMut, &T)) {
    put_compact_len(buf, items.len());
    for item in items {
        put(buf, item);
    }
}

fn put_str_array(buf: &mut BytesMut, items: &[String]) {
    put_array(buf, items, |b, s| put_str(b, s));
}

fn put_i32_array(buf: &mut BytesMut, items: &[i32]) {
    put_array(buf, items, |b, v| b.put_i32(*v));
}

fn put_struct_array<T: Codec>(buf: &mut BytesMut, items: &[T]) {
    put_array(buf, items, |b, v| v.put(b));
}

/// A struct with no tagged field to write: an empty tagged-field section.
fn put_no_tags(buf: &mut BytesMut) {
    put_uvarint(buf, 0);
}

/// Collects the tagged fields of one struct, then writes the section.
#[derive(Default)]
struct TaggedFields {
    fields: Vec<(u32, BytesMut)>,
}

impl TaggedFields {
    /// Adds field `tag` when `present` (its value differs from the default). Tags are
    /// added in increasing order.
    fn field(mut self, tag: u32, present: bool, put: impl FnOnce(&mut BytesMut)) -> Self {
        if present {
            assert!(
                self.fields.last().is_none_or(|(t, _)| *t < tag),
                "tagged fields added out of order"
            );
            let mut value = BytesMut::new();
            put(&mut value);
            self.fields.push((tag, value));
        }
        self
    }

    fn put(self, buf: &mut BytesMut) {
        put_uvarint(buf, len_u32(self.fields.len()));
        for (tag, value) in self.fields {
            put_uvarint(buf, tag);
            put_uvarint(buf, len_u32(value.len()));
            buf.put_slice(&value);
        }
    }
}

// --- reading ---------------------------------------------------------------------------

fn need(buf: &Bytes, n: usize, field: &'static str) -> CodecResult<()> {
    if buf.remaining() < n {
        return Err(MirrorCodecError::Truncated {
            field,
            needed: n,
            remaining: buf.remaining(),
        });
    }
    Ok(())
}

fn get_i8(buf: &mut Bytes, field: &'static str) -> CodecResult<i8> {
    need(buf, 1, field)?;
    Ok(buf.get_i8())
}

fn get_i16(buf: &mut Bytes, field: &'static str) -> CodecResult<i16> {
    need(buf, 2, field)?;
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut Bytes, field: &'static str) -> CodecResult<i32> {
    need(buf, 4, field)?;
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut Bytes, field: &'static str) -> CodecResult<i64> {
    need(buf, 8, field)?;
    Ok(buf.get_i64())
}

/// Any non-zero byte is true, as Kafka reads it.
fn get_bool(buf: &mut Bytes, field: &'static str) -> CodecResult<bool> {
    need(buf, 1, field)?;
    Ok(buf.get_u8() != 0)
}

fn get_uuid(buf: &mut Bytes, field: &'static str) -> CodecResult<uuid::Uuid> {
    need(buf, 16, field)?;
    let mut b = [0u8; 16];
    buf.copy_to_slice(&mut b);
    Ok(uuid::Uuid::from_bytes(b))
}

/// An unsigned varint of at most 32 bits (5 bytes, the last holding 4 bits).
fn get_uvarint(buf: &mut Bytes, field: &'static str) -> CodecResult<u32> {
    let mut value = 0u32;
    for i in 0..5 {
        need(buf, 1, field)?;
        let b = buf.get_u8();
        if i == 4 && b > 0x0f {
            return Err(MirrorCodecError::BadVarint { field });
        }
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(MirrorCodecError::BadVarint { field })
}

fn get_nullable_str(buf: &mut Bytes, field: &'static str) -> CodecResult<Option<String>> {
    let n = get_uvarint(buf, field)? as usize;
    let Some(len) = n.checked_sub(1) else {
        return Ok(None);
    };
    if buf.remaining() < len {
        return Err(MirrorCodecError::BadStringLength {
            field,
            len,
            remaining: buf.remaining(),
        });
    }
    let s = std::str::from_utf8(&buf[..len])
        .map_err(|_| MirrorCodecError::Utf8 { field })?
        .to_owned();
    buf.advance(len);
    Ok(Some(s))
}

fn get_str(buf: &mut Bytes, field: &'static str) -> CodecResult<String> {
    get_nullable_str(buf, field)?.ok_or(MirrorCodecError::NullString { field })
}

/// A nullable compact array whose elements each take at least `min_size` bytes.
fn get_nullable_array<T>(
    buf: &mut Bytes,
    field: &'static str,
    min_size: usize,
    mut get: impl FnMut(&mut Bytes) -> CodecResult<T>,
) -> CodecResult<Option<Vec<T>>> {
    let n = get_uvarint(buf, field)? as usize;
    let Some(count) = n.checked_sub(1) else {
        return Ok(None);
    };
    if count.saturating_mul(min_size.max(1)) > buf.remaining() {
        return Err(MirrorCodecError::BadArrayLength {
            field,
            count,
            remaining: buf.remaining(),
        });
    }
    let mut items = Vec::with_capacity(count.min(PREALLOC_ELEMENTS_MAX));
    for _ in 0..count {
        items.push(get(buf)?);
    }
    Ok(Some(items))
}

fn get_array<T>(
    buf: &mut Bytes,
    field: &'static str,
    min_size: usize,
    get: impl FnMut(&mut Bytes) -> CodecResult<T>,
) -> CodecResult<Vec<T>> {
    get_nullable_array(buf, field, min_size, get)?.ok_or(MirrorCodecError::NullArray { field })
}

fn get_str_array(buf: &mut Bytes, field: &'static str) -> CodecResult<Vec<String>> {
    get_array(buf, field, 1, |b| get_str(b, field))
}

fn get_i32_array(buf: &mut Bytes, field: &'static str) -> CodecResult<Vec<i32>> {
    get_array(buf, field, 4, |b| get_i32(b, field))
}

fn get_struct_array<T: Codec>(buf: &mut Bytes, field: &'static str) -> CodecResult<Vec<T>> {
    get_array(buf, field, T::MIN_SIZE, T::get)
}

/// Reads a tagged-field section. `known` decodes the value of a tag it knows from the
/// value's own bytes and returns true, or returns false to skip the tag. A known value
/// must use exactly the bytes its size declares.
fn get_tags(
    buf: &mut Bytes,
    field: &'static str,
    mut known: impl FnMut(u32, &mut Bytes) -> CodecResult<bool>,
) -> CodecResult<()> {
    let count = get_uvarint(buf, field)?;
    for _ in 0..count {
        let tag = get_uvarint(buf, field)?;
        let size = get_uvarint(buf, field)? as usize;
        need(buf, size, field)?;
        let mut value = buf.split_to(size);
        if known(tag, &mut value)? && value.has_remaining() {
            return Err(MirrorCodecError::TaggedFieldSize {
                field,
                tag,
                declared: size,
                used: size - value.remaining(),
            });
        }
    }
    Ok(())
}

/// A struct without known tagged fields: its section is read and skipped.
fn skip_tags(buf: &mut Bytes, field: &'static str) -> CodecResult<()> {
    get_tags(buf, field, |_, _| Ok(false))
}

// --- structs ---------------------------------------------------------------------------

/// One flexible struct of a mirror message.
trait Codec: Sized {
    /// The fewest bytes an encoded value takes: array counts are checked against it
    /// before anything is allocated.
    const MIN_SIZE: usize;
    fn put(&self, buf: &mut BytesMut);
    fn get(buf: &mut Bytes) -> CodecResult<Self>;
}

/// `Topics: []{ TopicName }` of RemoveTopicsFromMirror, Pause and Resume.
fn put_topic_name_array(buf: &mut BytesMut, names: &[String]) {
    put_array(buf, names, |b, name| {
        put_str(b, name);
        put_no_tags(b);
    });
}

fn get_topic_name_array(buf: &mut Bytes) -> CodecResult<Vec<String>> {
    get_array(buf, "Topics", 2, |b| {
        let name = get_str(b, "TopicName")?;
        skip_tags(b, "Topics")?;
        Ok(name)
    })
}

impl Codec for SimpleMirrorResponse {
    const MIN_SIZE: usize = 4 + 2 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_nullable_str(buf, self.error_message.as_deref());
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = SimpleMirrorResponse {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_nullable_str(buf, "ErrorMessage")?,
        };
        skip_tags(buf, "SimpleMirrorResponse")?;
        Ok(r)
    }
}

impl Codec for CreateMirrorRequest {
    const MIN_SIZE: usize = 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.mirror_name);
        put_array(buf, &self.configs, |b, (name, value)| {
            put_str(b, name);
            put_nullable_str(b, value.as_deref());
            put_no_tags(b);
        });
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mirror_name = get_str(buf, "MirrorName")?;
        let configs = get_array(buf, "Config", 3, |b| {
            let name = get_str(b, "Config.Name")?;
            let value = get_nullable_str(b, "Config.Value")?;
            skip_tags(b, "Config")?;
            Ok((name, value))
        })?;
        skip_tags(buf, "CreateMirrorRequest")?;
        Ok(CreateMirrorRequest {
            mirror_name,
            configs,
        })
    }
}

impl Codec for MirrorTopicMetadata {
    const MIN_SIZE: usize = 16 + 1 + 4 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_uuid(buf, &self.topic_id);
        put_str(buf, &self.name);
        buf.put_i32(self.num_partitions);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let t = MirrorTopicMetadata {
            topic_id: get_uuid(buf, "TopicId")?,
            name: get_str(buf, "TopicName")?,
            num_partitions: get_i32(buf, "NumPartitions")?,
        };
        skip_tags(buf, "TopicMetadata")?;
        Ok(t)
    }
}

impl Codec for AddTopicsToMirrorRequest {
    const MIN_SIZE: usize = 1 + 1 + 8 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.mirror_name);
        put_struct_array(buf, &self.topics);
        buf.put_i64(self.state_validation_offset);
        TaggedFields::default()
            .field(0, !self.include_patterns.is_empty(), |b| {
                put_str_array(b, &self.include_patterns)
            })
            .field(1, !self.exclude_patterns.is_empty(), |b| {
                put_str_array(b, &self.exclude_patterns)
            })
            .put(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mut r = AddTopicsToMirrorRequest {
            mirror_name: get_str(buf, "MirrorName")?,
            topics: get_struct_array(buf, "Topics")?,
            state_validation_offset: get_i64(buf, "StateValidationOffset")?,
            ..Default::default()
        };
        get_tags(buf, "AddTopicsToMirrorRequest", |tag, v| {
            match tag {
                0 => r.include_patterns = get_str_array(v, "IncludePatterns")?,
                1 => r.exclude_patterns = get_str_array(v, "ExcludePatterns")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(r)
    }
}

impl Codec for RemoveTopicsFromMirrorRequest {
    const MIN_SIZE: usize = 1 + 1 + 8 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.mirror_name);
        put_topic_name_array(buf, &self.topics);
        buf.put_i64(self.state_validation_offset);
        TaggedFields::default()
            .field(0, !self.patterns.is_empty(), |b| {
                put_str_array(b, &self.patterns)
            })
            .put(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mut r = RemoveTopicsFromMirrorRequest {
            mirror_name: get_str(buf, "MirrorName")?,
            topics: get_topic_name_array(buf)?,
            state_validation_offset: get_i64(buf, "StateValidationOffset")?,
            ..Default::default()
        };
        get_tags(buf, "RemoveTopicsFromMirrorRequest", |tag, v| {
            match tag {
                0 => r.patterns = get_str_array(v, "Patterns")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(r)
    }
}

impl Codec for MirrorTopicsRequest {
    const MIN_SIZE: usize = 1 + 1 + 8 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.mirror_name);
        put_topic_name_array(buf, &self.topics);
        buf.put_i64(self.state_validation_offset);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = MirrorTopicsRequest {
            mirror_name: get_str(buf, "MirrorName")?,
            topics: get_topic_name_array(buf)?,
            state_validation_offset: get_i64(buf, "StateValidationOffset")?,
        };
        skip_tags(buf, "MirrorTopicsRequest")?;
        Ok(r)
    }
}

impl Codec for MirrorTopicResult {
    const MIN_SIZE: usize = 1 + 2 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.name);
        buf.put_i16(self.error_code);
        put_nullable_str(buf, self.error_message.as_deref());
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let t = MirrorTopicResult {
            name: get_str(buf, "Name")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_nullable_str(buf, "ErrorMessage")?,
        };
        skip_tags(buf, "MirrorTopicResult")?;
        Ok(t)
    }
}

impl Codec for MirrorTopicsResponse {
    const MIN_SIZE: usize = 4 + 2 + 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_nullable_str(buf, self.error_message.as_deref());
        put_struct_array(buf, &self.topics);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = MirrorTopicsResponse {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_nullable_str(buf, "ErrorMessage")?,
            topics: get_struct_array(buf, "Topics")?,
        };
        skip_tags(buf, "MirrorTopicsResponse")?;
        Ok(r)
    }
}

impl Codec for DeleteMirrorRequest {
    const MIN_SIZE: usize = 1 + 8 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.mirror_name);
        buf.put_i64(self.state_validation_offset);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = DeleteMirrorRequest {
            mirror_name: get_str(buf, "MirrorName")?,
            state_validation_offset: get_i64(buf, "StateValidationOffset")?,
        };
        skip_tags(buf, "DeleteMirrorRequest")?;
        Ok(r)
    }
}

impl Codec for ListMirrorsRequest {
    const MIN_SIZE: usize = 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_bool(buf, self.include_topic_names);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = ListMirrorsRequest {
            include_topic_names: get_bool(buf, "IncludeTopicNames")?,
        };
        skip_tags(buf, "ListMirrorsRequest")?;
        Ok(r)
    }
}

impl Codec for ListedMirror {
    const MIN_SIZE: usize = 1 + 1 + 1 + 4 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.mirror_name);
        put_str(buf, &self.source_bootstrap);
        put_str(buf, &self.source_cluster_id);
        buf.put_i32(self.topic_count);
        put_str_array(buf, &self.topic_names);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let m = ListedMirror {
            mirror_name: get_str(buf, "MirrorName")?,
            source_bootstrap: get_str(buf, "SourceBootstrap")?,
            source_cluster_id: get_str(buf, "SourceClusterId")?,
            topic_count: get_i32(buf, "TopicCount")?,
            topic_names: get_str_array(buf, "TopicNames")?,
        };
        skip_tags(buf, "Mirrors")?;
        Ok(m)
    }
}

impl Codec for ListMirrorsResponse {
    const MIN_SIZE: usize = 4 + 2 + 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_nullable_str(buf, self.error_message.as_deref());
        put_struct_array(buf, &self.mirrors);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = ListMirrorsResponse {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_nullable_str(buf, "ErrorMessage")?,
            mirrors: get_struct_array(buf, "Mirrors")?,
        };
        skip_tags(buf, "ListMirrorsResponse")?;
        Ok(r)
    }
}

impl Codec for LmeLookup {
    const MIN_SIZE: usize = 16 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_uuid(buf, &self.topic_id);
        put_i32_array(buf, &self.partitions);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let l = LmeLookup {
            topic_id: get_uuid(buf, "TopicId")?,
            partitions: get_i32_array(buf, "Partitions")?,
        };
        skip_tags(buf, "LastMirrorEpochLookups")?;
        Ok(l)
    }
}

impl Codec for DescribeMirrorsRequest {
    const MIN_SIZE: usize = 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        match &self.mirror_names {
            None => put_uvarint(buf, 0),
            Some(names) => put_str_array(buf, names),
        }
        put_bool(buf, self.include_authorized_operations);
        TaggedFields::default()
            .field(0, self.cluster_id.is_some(), |b| {
                put_nullable_str(b, self.cluster_id.as_deref())
            })
            .field(1, !self.lme_lookups.is_empty(), |b| {
                put_struct_array(b, &self.lme_lookups)
            })
            .put(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mut r = DescribeMirrorsRequest {
            mirror_names: get_nullable_array(buf, "MirrorNames", 1, |b| get_str(b, "MirrorNames"))?,
            include_authorized_operations: get_bool(buf, "IncludeAuthorizedOperations")?,
            ..Default::default()
        };
        get_tags(buf, "DescribeMirrorsRequest", |tag, v| {
            match tag {
                0 => r.cluster_id = get_nullable_str(v, "ClusterId")?,
                1 => r.lme_lookups = get_struct_array(v, "LastMirrorEpochLookups")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(r)
    }
}

impl Codec for DescribedMirrorPartition {
    const MIN_SIZE: usize = 4 + 8 + 8 + 8 + 1 + 2 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        let default = DescribedMirrorPartition::default();
        buf.put_i32(self.partition);
        buf.put_i64(self.source_offset);
        buf.put_i64(self.destination_offset);
        buf.put_i64(self.lag);
        put_str(buf, &self.state);
        buf.put_i16(self.retry_attempt);
        put_nullable_str(buf, self.error_message.as_deref());
        TaggedFields::default()
            .field(
                0,
                self.truncated_records != default.truncated_records,
                |b| b.put_i64(self.truncated_records),
            )
            .field(
                1,
                self.last_mirrored_epoch != default.last_mirrored_epoch,
                |b| b.put_i32(self.last_mirrored_epoch),
            )
            .field(2, self.lag_ms != default.lag_ms, |b| b.put_i64(self.lag_ms))
            .put(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mut p = DescribedMirrorPartition {
            partition: get_i32(buf, "PartitionIndex")?,
            source_offset: get_i64(buf, "SourceOffset")?,
            destination_offset: get_i64(buf, "DestinationOffset")?,
            lag: get_i64(buf, "Lag")?,
            state: get_str(buf, "StateValue")?,
            retry_attempt: get_i16(buf, "RetryAttempt")?,
            error_message: get_nullable_str(buf, "ErrorMessage")?,
            ..Default::default()
        };
        get_tags(buf, "DescribedMirrorPartition", |tag, v| {
            match tag {
                0 => p.truncated_records = get_i64(v, "TruncatedRecords")?,
                1 => p.last_mirrored_epoch = get_i32(v, "LastMirroredEpoch")?,
                2 => p.lag_ms = get_i64(v, "LagMs")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(p)
    }
}

impl Codec for DescribedMirrorTopic {
    const MIN_SIZE: usize = 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.name);
        put_struct_array(buf, &self.partitions);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let t = DescribedMirrorTopic {
            name: get_str(buf, "TopicName")?,
            partitions: get_struct_array(buf, "Partitions")?,
        };
        skip_tags(buf, "DescribedMirrorTopic")?;
        Ok(t)
    }
}

impl Codec for DescribedMirror {
    const MIN_SIZE: usize = 2 + 1 + 4 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i16(self.error_code);
        put_str(buf, &self.mirror_name);
        buf.put_i32(self.authorized_operations);
        put_struct_array(buf, &self.topics);
        TaggedFields::default()
            .field(0, !self.sync.is_empty(), |b| {
                put_struct_array(b, &self.sync)
            })
            .put(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mut m = DescribedMirror {
            error_code: get_i16(buf, "ErrorCode")?,
            mirror_name: get_str(buf, "MirrorName")?,
            authorized_operations: get_i32(buf, "AuthorizedOperations")?,
            topics: get_struct_array(buf, "Topics")?,
            sync: Vec::new(),
        };
        get_tags(buf, "DescribedMirror", |tag, v| {
            match tag {
                0 => m.sync = get_struct_array(v, "Sync")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(m)
    }
}

impl Codec for MirrorSyncStatus {
    const MIN_SIZE: usize = 1 + 8 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.step);
        buf.put_i64(self.last_success_ms);
        put_nullable_str(buf, self.last_error.as_deref());
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let s = MirrorSyncStatus {
            step: get_str(buf, "Step")?,
            last_success_ms: get_i64(buf, "LastSuccessMs")?,
            last_error: get_nullable_str(buf, "LastError")?,
        };
        skip_tags(buf, "MirrorSyncStatus")?;
        Ok(s)
    }
}

impl Codec for LmePartition {
    const MIN_SIZE: usize = 4 + 4 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i32(self.partition);
        buf.put_i32(self.last_mirrored_epoch);
        TaggedFields::default()
            .field(0, self.last_mirrored_offset != -1, |b| {
                b.put_i64(self.last_mirrored_offset)
            })
            .put(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mut p = LmePartition {
            partition: get_i32(buf, "PartitionIndex")?,
            last_mirrored_epoch: get_i32(buf, "LastMirrorEpoch")?,
            last_mirrored_offset: -1,
        };
        get_tags(buf, "LmePartition", |tag, v| {
            match tag {
                0 => p.last_mirrored_offset = get_i64(v, "LastMirroredOffset")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(p)
    }
}

impl Codec for LmeResult {
    const MIN_SIZE: usize = 16 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_uuid(buf, &self.topic_id);
        put_struct_array(buf, &self.partitions);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = LmeResult {
            topic_id: get_uuid(buf, "TopicId")?,
            partitions: get_struct_array(buf, "Partitions")?,
        };
        skip_tags(buf, "LookupResults")?;
        Ok(r)
    }
}

impl Codec for DescribeMirrorsResponse {
    const MIN_SIZE: usize = 4 + 2 + 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_nullable_str(buf, self.error_message.as_deref());
        put_struct_array(buf, &self.mirrors);
        TaggedFields::default()
            .field(0, !self.lookup_results.is_empty(), |b| {
                put_struct_array(b, &self.lookup_results)
            })
            .put(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mut r = DescribeMirrorsResponse {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_nullable_str(buf, "ErrorMessage")?,
            mirrors: get_struct_array(buf, "Mirrors")?,
            ..Default::default()
        };
        get_tags(buf, "DescribeMirrorsResponse", |tag, v| {
            match tag {
                0 => r.lookup_results = get_struct_array(v, "LookupResults")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(r)
    }
}

impl Codec for ReadMirrorStatesRequest {
    const MIN_SIZE: usize = 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.mirror_name);
        put_array(buf, &self.topics, |b, (name, partitions)| {
            put_str(b, name);
            put_i32_array(b, partitions);
            put_no_tags(b);
        });
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mirror_name = get_str(buf, "MirrorName")?;
        let topics = get_array(buf, "Topics", 3, |b| {
            let name = get_str(b, "Topics.Name")?;
            let partitions = get_i32_array(b, "Topics.Partitions")?;
            skip_tags(b, "Topics")?;
            Ok((name, partitions))
        })?;
        skip_tags(buf, "ReadMirrorStatesRequest")?;
        Ok(ReadMirrorStatesRequest {
            mirror_name,
            topics,
        })
    }
}

impl Codec for MirrorStateEntry {
    const MIN_SIZE: usize = 4 + 4 + 1 + 2 + 1 + 2 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        let default = MirrorStateEntry::default();
        buf.put_i32(self.partition);
        buf.put_i32(self.last_mirrored_epoch);
        buf.put_i8(self.state);
        buf.put_i16(self.error_code);
        buf.put_i8(self.previous_state);
        buf.put_i16(self.retry_attempt);
        put_nullable_str(buf, self.error_message.as_deref());
        TaggedFields::default()
            .field(0, self.leader_epoch != default.leader_epoch, |b| {
                b.put_i32(self.leader_epoch)
            })
            .field(1, self.state_epoch != default.state_epoch, |b| {
                b.put_i32(self.state_epoch)
            })
            .field(
                2,
                self.truncated_records != default.truncated_records,
                |b| b.put_i64(self.truncated_records),
            )
            .field(
                3,
                self.last_mirrored_offset != default.last_mirrored_offset,
                |b| b.put_i64(self.last_mirrored_offset),
            )
            .put(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let mut e = MirrorStateEntry {
            partition: get_i32(buf, "PartitionIndex")?,
            last_mirrored_epoch: get_i32(buf, "LastMirrorEpoch")?,
            state: get_i8(buf, "State")?,
            error_code: get_i16(buf, "ErrorCode")?,
            previous_state: get_i8(buf, "PreviousState")?,
            retry_attempt: get_i16(buf, "RetryAttempt")?,
            error_message: get_nullable_str(buf, "ErrorMessage")?,
            ..Default::default()
        };
        get_tags(buf, "MirrorStateEntry", |tag, v| {
            match tag {
                0 => e.leader_epoch = get_i32(v, "LeaderEpoch")?,
                1 => e.state_epoch = get_i32(v, "StateEpoch")?,
                2 => e.truncated_records = get_i64(v, "TruncatedRecords")?,
                3 => e.last_mirrored_offset = get_i64(v, "LastMirroredOffset")?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(e)
    }
}

impl Codec for MirrorStatesTopic {
    const MIN_SIZE: usize = 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.name);
        put_struct_array(buf, &self.partitions);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let t = MirrorStatesTopic {
            name: get_str(buf, "Name")?,
            partitions: get_struct_array(buf, "Partitions")?,
        };
        skip_tags(buf, "MirrorStatesTopic")?;
        Ok(t)
    }
}

impl Codec for ReadMirrorStatesResponse {
    const MIN_SIZE: usize = 4 + 2 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_struct_array(buf, &self.topics);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = ReadMirrorStatesResponse {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            topics: get_struct_array(buf, "Topics")?,
        };
        skip_tags(buf, "ReadMirrorStatesResponse")?;
        Ok(r)
    }
}

impl Codec for WriteMirrorStatesRequest {
    const MIN_SIZE: usize = 1 + 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.mirror_name);
        put_struct_array(buf, &self.topics);
        put_str_array(buf, &self.stopped_topics);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = WriteMirrorStatesRequest {
            mirror_name: get_str(buf, "MirrorName")?,
            topics: get_struct_array(buf, "Topics")?,
            stopped_topics: get_str_array(buf, "StoppedTopics")?,
        };
        skip_tags(buf, "WriteMirrorStatesRequest")?;
        Ok(r)
    }
}

impl Codec for PartitionResult {
    const MIN_SIZE: usize = 4 + 2 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i32(self.partition);
        buf.put_i16(self.error_code);
        put_nullable_str(buf, self.error_message.as_deref());
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let p = PartitionResult {
            partition: get_i32(buf, "PartitionIndex")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_nullable_str(buf, "ErrorMessage")?,
        };
        skip_tags(buf, "PartitionResult")?;
        Ok(p)
    }
}

impl Codec for WriteMirrorStatesTopicResult {
    const MIN_SIZE: usize = 1 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        put_str(buf, &self.name);
        put_struct_array(buf, &self.partitions);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let t = WriteMirrorStatesTopicResult {
            name: get_str(buf, "Name")?,
            partitions: get_struct_array(buf, "Partitions")?,
        };
        skip_tags(buf, "WriteMirrorStatesTopicResult")?;
        Ok(t)
    }
}

impl Codec for WriteMirrorStatesResponse {
    const MIN_SIZE: usize = 4 + 1 + 1;

    fn put(&self, buf: &mut BytesMut) {
        buf.put_i32(self.throttle_time_ms);
        put_struct_array(buf, &self.topics);
        put_no_tags(buf);
    }

    fn get(buf: &mut Bytes) -> CodecResult<Self> {
        let r = WriteMirrorStatesResponse {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            topics: get_struct_array(buf, "Topics")?,
        };
        skip_tags(buf, "WriteMirrorStatesResponse")?;
        Ok(r)
    }
}

// --- messages --------------------------------------------------------------------------

impl MirrorRequest {
    /// The API key this request is sent with.
    pub fn api_key(&self) -> i16 {
        match self {
            MirrorRequest::CreateMirror(_) => keys::CREATE_MIRROR,
            MirrorRequest::AddTopicsToMirror(_) => keys::ADD_TOPICS_TO_MIRROR,
            MirrorRequest::RemoveTopicsFromMirror(_) => keys::REMOVE_TOPICS_FROM_MIRROR,
            MirrorRequest::ListMirrors(_) => keys::LIST_MIRRORS,
            MirrorRequest::DescribeMirrors(_) => keys::DESCRIBE_MIRRORS,
            MirrorRequest::ReadMirrorStates(_) => keys::READ_MIRROR_STATES,
            MirrorRequest::WriteMirrorStates(_) => keys::WRITE_MIRROR_STATES,
            MirrorRequest::PauseMirrorTopics(_) => keys::PAUSE_MIRROR_TOPICS,
            MirrorRequest::ResumeMirrorTopics(_) => keys::RESUME_MIRROR_TOPICS,
            MirrorRequest::DeleteMirror(_) => keys::DELETE_MIRROR,
        }
    }

    /// Appends the version 0 body (no request header).
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            MirrorRequest::CreateMirror(r) => r.put(buf),
            MirrorRequest::AddTopicsToMirror(r) => r.put(buf),
            MirrorRequest::RemoveTopicsFromMirror(r) => r.put(buf),
            MirrorRequest::ListMirrors(r) => r.put(buf),
            MirrorRequest::DescribeMirrors(r) => r.put(buf),
            MirrorRequest::ReadMirrorStates(r) => r.put(buf),
            MirrorRequest::WriteMirrorStates(r) => r.put(buf),
            MirrorRequest::PauseMirrorTopics(r) => r.put(buf),
            MirrorRequest::ResumeMirrorTopics(r) => r.put(buf),
            MirrorRequest::DeleteMirror(r) => r.put(buf),
        }
    }

    /// Decodes a version 0 body of `api_key` from the front of `buf`. Bytes after the
    /// body are left in `buf`.
    pub fn decode(api_key: i16, buf: &mut Bytes) -> Result<MirrorRequest, MirrorCodecError> {
        Ok(match api_key {
            keys::CREATE_MIRROR => MirrorRequest::CreateMirror(Codec::get(buf)?),
            keys::ADD_TOPICS_TO_MIRROR => MirrorRequest::AddTopicsToMirror(Codec::get(buf)?),
            keys::REMOVE_TOPICS_FROM_MIRROR => {
                MirrorRequest::RemoveTopicsFromMirror(Codec::get(buf)?)
            }
            keys::LIST_MIRRORS => MirrorRequest::ListMirrors(Codec::get(buf)?),
            keys::DESCRIBE_MIRRORS => MirrorRequest::DescribeMirrors(Codec::get(buf)?),
            keys::READ_MIRROR_STATES => MirrorRequest::ReadMirrorStates(Codec::get(buf)?),
            keys::WRITE_MIRROR_STATES => MirrorRequest::WriteMirrorStates(Codec::get(buf)?),
            keys::PAUSE_MIRROR_TOPICS => MirrorRequest::PauseMirrorTopics(Codec::get(buf)?),
            keys::RESUME_MIRROR_TOPICS => MirrorRequest::ResumeMirrorTopics(Codec::get(buf)?),
            keys::DELETE_MIRROR => MirrorRequest::DeleteMirror(Codec::get(buf)?),
            other => return Err(MirrorCodecError::UnknownApiKey(other)),
        })
    }
}

impl MirrorResponse {
    /// The API key of the request this answers.
    pub fn api_key(&self) -> i16 {
        match self {
            MirrorResponse::CreateMirror(_) => keys::CREATE_MIRROR,
            MirrorResponse::AddTopicsToMirror(_) => keys::ADD_TOPICS_TO_MIRROR,
            MirrorResponse::RemoveTopicsFromMirror(_) => keys::REMOVE_TOPICS_FROM_MIRROR,
            MirrorResponse::ListMirrors(_) => keys::LIST_MIRRORS,
            MirrorResponse::DescribeMirrors(_) => keys::DESCRIBE_MIRRORS,
            MirrorResponse::ReadMirrorStates(_) => keys::READ_MIRROR_STATES,
            MirrorResponse::WriteMirrorStates(_) => keys::WRITE_MIRROR_STATES,
            MirrorResponse::PauseMirrorTopics(_) => keys::PAUSE_MIRROR_TOPICS,
            MirrorResponse::ResumeMirrorTopics(_) => keys::RESUME_MIRROR_TOPICS,
            MirrorResponse::DeleteMirror(_) => keys::DELETE_MIRROR,
        }
    }

    /// Appends the version 0 body (no response header).
    pub fn encode(&self, buf: &mut BytesMut) {
        match self {
            MirrorResponse::CreateMirror(r) => r.put(buf),
            MirrorResponse::AddTopicsToMirror(r) => r.put(buf),
            MirrorResponse::RemoveTopicsFromMirror(r) => r.put(buf),
            MirrorResponse::ListMirrors(r) => r.put(buf),
            MirrorResponse::DescribeMirrors(r) => r.put(buf),
            MirrorResponse::ReadMirrorStates(r) => r.put(buf),
            MirrorResponse::WriteMirrorStates(r) => r.put(buf),
            MirrorResponse::PauseMirrorTopics(r) => r.put(buf),
            MirrorResponse::ResumeMirrorTopics(r) => r.put(buf),
            MirrorResponse::DeleteMirror(r) => r.put(buf),
        }
    }

    /// Decodes a version 0 body of `api_key` from the front of `buf`. Bytes after the
    /// body are left in `buf`.
    pub fn decode(api_key: i16, buf: &mut Bytes) -> Result<MirrorResponse, MirrorCodecError> {
        Ok(match api_key {
            keys::CREATE_MIRROR => MirrorResponse::CreateMirror(Codec::get(buf)?),
            keys::ADD_TOPICS_TO_MIRROR => MirrorResponse::AddTopicsToMirror(Codec::get(buf)?),
            keys::REMOVE_TOPICS_FROM_MIRROR => {
                MirrorResponse::RemoveTopicsFromMirror(Codec::get(buf)?)
            }
            keys::LIST_MIRRORS => MirrorResponse::ListMirrors(Codec::get(buf)?),
            keys::DESCRIBE_MIRRORS => MirrorResponse::DescribeMirrors(Codec::get(buf)?),
            keys::READ_MIRROR_STATES => MirrorResponse::ReadMirrorStates(Codec::get(buf)?),
            keys::WRITE_MIRROR_STATES => MirrorResponse::WriteMirrorStates(Codec::get(buf)?),
            keys::PAUSE_MIRROR_TOPICS => MirrorResponse::PauseMirrorTopics(Codec::get(buf)?),
            keys::RESUME_MIRROR_TOPICS => MirrorResponse::ResumeMirrorTopics(Codec::get(buf)?),
            keys::DELETE_MIRROR => MirrorResponse::DeleteMirror(Codec::get(buf)?),
            other => return Err(MirrorCodecError::UnknownApiKey(other)),
        })
    }
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

    // --- codec -------------------------------------------------------------------------

    use proptest::collection::vec;
    use proptest::option;
    use proptest::prelude::*;

    fn encode_request(r: &MirrorRequest) -> Bytes {
        let mut buf = BytesMut::new();
        r.encode(&mut buf);
        buf.freeze()
    }

    fn encode_response(r: &MirrorResponse) -> Bytes {
        let mut buf = BytesMut::new();
        r.encode(&mut buf);
        buf.freeze()
    }

    fn name() -> impl Strategy<Value = String> {
        // Multi-byte UTF-8 included: lengths are bytes, not chars.
        "\\PC{0,6}"
    }

    fn opt_name() -> impl Strategy<Value = Option<String>> {
        option::of(name())
    }

    fn names() -> impl Strategy<Value = Vec<String>> {
        vec(name(), 0..4)
    }

    fn topic_id() -> impl Strategy<Value = uuid::Uuid> {
        any::<u128>().prop_map(uuid::Uuid::from_u128)
    }

    fn topic_metadata() -> impl Strategy<Value = MirrorTopicMetadata> {
        (topic_id(), name(), any::<i32>()).prop_map(|(topic_id, name, num_partitions)| {
            MirrorTopicMetadata {
                topic_id,
                name,
                num_partitions,
            }
        })
    }

    fn lme_lookup() -> impl Strategy<Value = LmeLookup> {
        (topic_id(), vec(any::<i32>(), 0..4)).prop_map(|(topic_id, partitions)| LmeLookup {
            topic_id,
            partitions,
        })
    }

    fn state_entry() -> impl Strategy<Value = MirrorStateEntry> {
        (
            (any::<i32>(), any::<i32>(), any::<i8>(), any::<i16>()),
            (any::<i8>(), any::<i16>(), opt_name()),
            // Tagged: often their defaults, so both the present and absent paths run.
            (
                prop_oneof![Just(-1), any::<i32>()],
                prop_oneof![Just(0), any::<i32>()],
                prop_oneof![Just(-1), any::<i64>()],
                prop_oneof![Just(-1), any::<i64>()],
            ),
        )
            .prop_map(
                |(
                    (partition, last_mirrored_epoch, state, error_code),
                    (previous_state, retry_attempt, error_message),
                    (leader_epoch, state_epoch, truncated_records, last_mirrored_offset),
                )| MirrorStateEntry {
                    partition,
                    last_mirrored_epoch,
                    state,
                    error_code,
                    previous_state,
                    retry_attempt,
                    error_message,
                    leader_epoch,
                    state_epoch,
                    truncated_records,
                    last_mirrored_offset,
                },
            )
    }

    fn states_topic() -> impl Strategy<Value = MirrorStatesTopic> {
        (name(), vec(state_entry(), 0..3))
            .prop_map(|(name, partitions)| MirrorStatesTopic { name, partitions })
    }

    fn topics_request() -> impl Strategy<Value = MirrorTopicsRequest> {
        (name(), names(), any::<i64>()).prop_map(|(mirror_name, topics, offset)| {
            MirrorTopicsRequest {
                mirror_name,
                topics,
                state_validation_offset: offset,
            }
        })
    }

    fn request() -> impl Strategy<Value = MirrorRequest> {
        prop_oneof![
            (name(), vec((name(), opt_name()), 0..4)).prop_map(|(mirror_name, configs)| {
                MirrorRequest::CreateMirror(CreateMirrorRequest {
                    mirror_name,
                    configs,
                })
            }),
            (
                name(),
                vec(topic_metadata(), 0..3),
                names(),
                names(),
                any::<i64>()
            )
                .prop_map(|(mirror_name, topics, include, exclude, offset)| {
                    MirrorRequest::AddTopicsToMirror(AddTopicsToMirrorRequest {
                        mirror_name,
                        topics,
                        include_patterns: include,
                        exclude_patterns: exclude,
                        state_validation_offset: offset,
                    })
                }),
            (name(), names(), names(), any::<i64>()).prop_map(
                |(mirror_name, topics, patterns, offset)| {
                    MirrorRequest::RemoveTopicsFromMirror(RemoveTopicsFromMirrorRequest {
                        mirror_name,
                        topics,
                        patterns,
                        state_validation_offset: offset,
                    })
                }
            ),
            any::<bool>().prop_map(|include_topic_names| {
                MirrorRequest::ListMirrors(ListMirrorsRequest {
                    include_topic_names,
                })
            }),
            (
                option::of(names()),
                any::<bool>(),
                opt_name(),
                vec(lme_lookup(), 0..3)
            )
                .prop_map(|(mirror_names, include_ops, cluster_id, lme_lookups)| {
                    MirrorRequest::DescribeMirrors(DescribeMirrorsRequest {
                        mirror_names,
                        include_authorized_operations: include_ops,
                        cluster_id,
                        lme_lookups,
                    })
                }),
            (name(), vec((name(), vec(any::<i32>(), 0..4)), 0..3)).prop_map(
                |(mirror_name, topics)| {
                    MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest {
                        mirror_name,
                        topics,
                    })
                }
            ),
            (name(), vec(states_topic(), 0..3), names()).prop_map(
                |(mirror_name, topics, stopped_topics)| {
                    MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest {
                        mirror_name,
                        topics,
                        stopped_topics,
                    })
                }
            ),
            topics_request().prop_map(MirrorRequest::PauseMirrorTopics),
            topics_request().prop_map(MirrorRequest::ResumeMirrorTopics),
            (name(), any::<i64>()).prop_map(|(mirror_name, offset)| {
                MirrorRequest::DeleteMirror(DeleteMirrorRequest {
                    mirror_name,
                    state_validation_offset: offset,
                })
            }),
        ]
    }

    fn simple_response() -> impl Strategy<Value = SimpleMirrorResponse> {
        (any::<i32>(), any::<i16>(), opt_name()).prop_map(|(throttle, code, message)| {
            SimpleMirrorResponse {
                throttle_time_ms: throttle,
                error_code: code,
                error_message: message,
            }
        })
    }

    fn topics_response() -> impl Strategy<Value = MirrorTopicsResponse> {
        let result = (name(), any::<i16>(), opt_name()).prop_map(|(name, code, message)| {
            MirrorTopicResult {
                name,
                error_code: code,
                error_message: message,
            }
        });
        (any::<i32>(), any::<i16>(), opt_name(), vec(result, 0..3)).prop_map(
            |(throttle, code, message, topics)| MirrorTopicsResponse {
                throttle_time_ms: throttle,
                error_code: code,
                error_message: message,
                topics,
            },
        )
    }

    fn described_partition() -> impl Strategy<Value = DescribedMirrorPartition> {
        (
            (any::<i32>(), any::<i64>(), any::<i64>(), any::<i64>()),
            (name(), any::<i16>(), opt_name()),
            (
                prop_oneof![Just(-1), any::<i64>()],
                prop_oneof![Just(-1), any::<i32>()],
                prop_oneof![Just(-1), any::<i64>()],
            ),
        )
            .prop_map(
                |(
                    (partition, source_offset, destination_offset, lag),
                    (state, retry_attempt, error_message),
                    (truncated_records, last_mirrored_epoch, lag_ms),
                )| DescribedMirrorPartition {
                    partition,
                    source_offset,
                    destination_offset,
                    lag,
                    state,
                    retry_attempt,
                    error_message,
                    truncated_records,
                    last_mirrored_epoch,
                    lag_ms,
                },
            )
    }

    fn described_mirror() -> impl Strategy<Value = DescribedMirror> {
        let topic = (name(), vec(described_partition(), 0..3))
            .prop_map(|(name, partitions)| DescribedMirrorTopic { name, partitions });
        let sync =
            (name(), any::<i64>(), opt_name()).prop_map(|(step, last_success_ms, last_error)| {
                MirrorSyncStatus {
                    step,
                    last_success_ms,
                    last_error,
                }
            });
        (
            any::<i16>(),
            name(),
            any::<i32>(),
            vec(topic, 0..3),
            vec(sync, 0..3),
        )
            .prop_map(
                |(error_code, mirror_name, authorized_operations, topics, sync)| DescribedMirror {
                    error_code,
                    mirror_name,
                    authorized_operations,
                    topics,
                    sync,
                },
            )
    }

    fn lme_result() -> impl Strategy<Value = LmeResult> {
        let partition = (
            any::<i32>(),
            any::<i32>(),
            prop_oneof![Just(-1), any::<i64>()],
        )
            .prop_map(|(partition, lme, offset)| LmePartition {
                partition,
                last_mirrored_epoch: lme,
                last_mirrored_offset: offset,
            });
        (topic_id(), vec(partition, 0..3)).prop_map(|(topic_id, partitions)| LmeResult {
            topic_id,
            partitions,
        })
    }

    fn response() -> impl Strategy<Value = MirrorResponse> {
        let listed = (name(), name(), name(), any::<i32>(), names()).prop_map(
            |(mirror_name, source_bootstrap, source_cluster_id, topic_count, topic_names)| {
                ListedMirror {
                    mirror_name,
                    source_bootstrap,
                    source_cluster_id,
                    topic_count,
                    topic_names,
                }
            },
        );
        let partition_result =
            (any::<i32>(), any::<i16>(), opt_name()).prop_map(|(partition, code, message)| {
                PartitionResult {
                    partition,
                    error_code: code,
                    error_message: message,
                }
            });
        let write_topic = (name(), vec(partition_result, 0..3))
            .prop_map(|(name, partitions)| WriteMirrorStatesTopicResult { name, partitions });
        prop_oneof![
            simple_response().prop_map(MirrorResponse::CreateMirror),
            topics_response().prop_map(MirrorResponse::AddTopicsToMirror),
            topics_response().prop_map(MirrorResponse::RemoveTopicsFromMirror),
            (any::<i32>(), any::<i16>(), opt_name(), vec(listed, 0..3)).prop_map(
                |(throttle, code, message, mirrors)| {
                    MirrorResponse::ListMirrors(ListMirrorsResponse {
                        throttle_time_ms: throttle,
                        error_code: code,
                        error_message: message,
                        mirrors,
                    })
                }
            ),
            (
                any::<i32>(),
                any::<i16>(),
                opt_name(),
                vec(described_mirror(), 0..3),
                vec(lme_result(), 0..3)
            )
                .prop_map(|(throttle, code, message, mirrors, lookup_results)| {
                    MirrorResponse::DescribeMirrors(DescribeMirrorsResponse {
                        throttle_time_ms: throttle,
                        error_code: code,
                        error_message: message,
                        mirrors,
                        lookup_results,
                    })
                }),
            (any::<i32>(), any::<i16>(), vec(states_topic(), 0..3)).prop_map(
                |(throttle, code, topics)| {
                    MirrorResponse::ReadMirrorStates(ReadMirrorStatesResponse {
                        throttle_time_ms: throttle,
                        error_code: code,
                        topics,
                    })
                }
            ),
            (any::<i32>(), vec(write_topic, 0..3)).prop_map(|(throttle, topics)| {
                MirrorResponse::WriteMirrorStates(WriteMirrorStatesResponse {
                    throttle_time_ms: throttle,
                    topics,
                })
            }),
            topics_response().prop_map(MirrorResponse::PauseMirrorTopics),
            topics_response().prop_map(MirrorResponse::ResumeMirrorTopics),
            simple_response().prop_map(MirrorResponse::DeleteMirror),
        ]
    }

    /// Every key Twinlog serves, 97 (unused) and a few outside the range.
    const PROBE_KEYS: &[i16] = &[
        94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 0, 93, 105, -1,
    ];

    proptest! {
        #[test]
        fn request_round_trip(r in request()) {
            let mut bytes = encode_request(&r);
            let decoded = MirrorRequest::decode(r.api_key(), &mut bytes);
            prop_assert_eq!(decoded, Ok(r));
            prop_assert!(bytes.is_empty(), "{} bytes left over", bytes.len());
        }

        #[test]
        fn response_round_trip(r in response()) {
            let mut bytes = encode_response(&r);
            let decoded = MirrorResponse::decode(r.api_key(), &mut bytes);
            prop_assert_eq!(decoded, Ok(r));
            prop_assert!(bytes.is_empty(), "{} bytes left over", bytes.len());
        }

        #[test]
        fn trailing_bytes_are_left_alone(r in request(), tail in vec(any::<u8>(), 0..8)) {
            let mut buf = BytesMut::new();
            r.encode(&mut buf);
            buf.put_slice(&tail);
            let mut bytes = buf.freeze();
            prop_assert_eq!(MirrorRequest::decode(r.api_key(), &mut bytes), Ok(r));
            prop_assert_eq!(&bytes[..], &tail[..]);
        }

        #[test]
        fn truncated_request_is_an_error(r in request()) {
            let full = encode_request(&r);
            for cut in 0..full.len() {
                let mut bytes = full.slice(..cut);
                prop_assert!(
                    MirrorRequest::decode(r.api_key(), &mut bytes).is_err(),
                    "a cut at {} of {} bytes decoded", cut, full.len()
                );
            }
        }

        #[test]
        fn truncated_response_is_an_error(r in response()) {
            let full = encode_response(&r);
            for cut in 0..full.len() {
                let mut bytes = full.slice(..cut);
                prop_assert!(
                    MirrorResponse::decode(r.api_key(), &mut bytes).is_err(),
                    "a cut at {} of {} bytes decoded", cut, full.len()
                );
            }
        }

        #[test]
        fn random_bytes_never_panic(data in vec(any::<u8>(), 0..256)) {
            for key in PROBE_KEYS {
                let _ = MirrorRequest::decode(*key, &mut Bytes::from(data.clone()));
                let _ = MirrorResponse::decode(*key, &mut Bytes::from(data.clone()));
            }
        }

        #[test]
        fn corrupted_messages_never_panic(
            req in request(),
            resp in response(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            for (key, full) in [
                (req.api_key(), encode_request(&req)),
                (resp.api_key(), encode_response(&resp)),
            ] {
                let mut data = full.to_vec();
                if !data.is_empty() {
                    let i = at.index(data.len());
                    data[i] = byte;
                }
                let _ = MirrorRequest::decode(key, &mut Bytes::from(data.clone()));
                let _ = MirrorResponse::decode(key, &mut Bytes::from(data));
            }
        }
    }

    #[test]
    fn golden_remove_topics_from_mirror_request() {
        let r = MirrorRequest::RemoveTopicsFromMirror(RemoveTopicsFromMirrorRequest {
            mirror_name: "m1".into(),
            topics: vec!["t".into()],
            patterns: vec!["p.*".into()],
            state_validation_offset: 5,
        });
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x03, b'm', b'1',           // MirrorName: compact string, length 2 + 1
            0x02,                       // Topics: compact array, 1 + 1 elements
            0x02, b't',                 //   TopicName "t"
            0x00,                       //   the element's tagged fields: none
            0, 0, 0, 0, 0, 0, 0, 5,     // StateValidationOffset: int64 5
            0x01,                       // tagged fields: 1
            0x00, 0x05,                 //   tag 0 (Patterns), 5 bytes:
            0x02,                       //     compact array, 1 + 1 elements
            0x04, b'p', b'.', b'*',     //     "p.*"
        ];
        assert_eq!(&encode_request(&r)[..], expected);
        assert_eq!(r.api_key(), 96);
        let mut bytes = Bytes::from_static(expected);
        assert_eq!(MirrorRequest::decode(96, &mut bytes), Ok(r));
    }

    #[test]
    fn golden_describe_mirrors_request() {
        let lookup_id = uuid::Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let r = MirrorRequest::DescribeMirrors(DescribeMirrorsRequest {
            mirror_names: None,
            include_authorized_operations: true,
            cluster_id: Some("c".into()),
            lme_lookups: vec![LmeLookup {
                topic_id: lookup_id,
                partitions: vec![7],
            }],
        });
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00,                       // MirrorNames: null compact array
            0x01,                       // IncludeAuthorizedOperations: true
            0x02,                       // tagged fields: 2
            0x00, 0x02, 0x02, b'c',     //   tag 0 (ClusterId), 2 bytes: "c"
            0x01, 0x17,                 //   tag 1 (LastMirrorEpochLookups), 23 bytes:
            0x02,                       //     compact array, 1 + 1 elements
            1, 2, 3, 4, 5, 6, 7, 8,     //     TopicId
            9, 10, 11, 12, 13, 14, 15, 16,
            0x02, 0, 0, 0, 7,           //     Partitions: [7]
            0x00,                       //     the element's tagged fields: none
        ];
        assert_eq!(&encode_request(&r)[..], expected);
        let mut bytes = Bytes::from_static(expected);
        assert_eq!(MirrorRequest::decode(99, &mut bytes), Ok(r));
    }

    #[test]
    fn golden_read_mirror_states_response() {
        let r = MirrorResponse::ReadMirrorStates(ReadMirrorStatesResponse {
            throttle_time_ms: 0,
            error_code: 0,
            topics: vec![MirrorStatesTopic {
                name: "t".into(),
                partitions: vec![MirrorStateEntry {
                    partition: 1,
                    last_mirrored_epoch: 2,
                    state: MirrorPartitionState::Mirroring.code(),
                    error_code: 0,
                    previous_state: MirrorPartitionState::Preparing.code(),
                    retry_attempt: 0,
                    error_message: None,
                    leader_epoch: 9,
                    state_epoch: 0,
                    truncated_records: -1,
                    last_mirrored_offset: -1,
                }],
            }],
        });
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 0,                 // ThrottleTimeMs
            0, 0,                       // ErrorCode
            0x02,                       // Topics: 1 + 1
            0x02, b't',                 //   Name "t"
            0x02,                       //   Partitions: 1 + 1
            0, 0, 0, 1,                 //     PartitionIndex 1
            0, 0, 0, 2,                 //     LastMirrorEpoch 2
            0x01,                       //     State MIRRORING
            0, 0,                       //     ErrorCode
            0x00,                       //     PreviousState PREPARING
            0, 0,                       //     RetryAttempt
            0x00,                       //     ErrorMessage: null
            0x01,                       //     tagged fields: 1 (StateEpoch 0 and
            0x00, 0x04, 0, 0, 0, 9,     //       TruncatedRecords -1 are defaults)
            0x00,                       //   the topic's tagged fields
            0x00,                       // tagged fields
        ];
        assert_eq!(&encode_response(&r)[..], expected);
        let mut bytes = Bytes::from_static(expected);
        assert_eq!(MirrorResponse::decode(100, &mut bytes), Ok(r));
    }

    #[test]
    fn golden_described_mirror_with_sync_status() {
        let m = DescribedMirror {
            error_code: 0,
            mirror_name: "m".into(),
            authorized_operations: i32::MIN,
            topics: Vec::new(),
            sync: vec![MirrorSyncStatus {
                step: "s".into(),
                last_success_ms: 7,
                last_error: Some("e".into()),
            }],
        };
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0,                       // ErrorCode
            0x02, b'm',                 // MirrorName "m"
            0x80, 0, 0, 0,              // AuthorizedOperations: i32::MIN
            0x01,                       // Topics: empty compact array
            0x01,                       // tagged fields: 1
            0x00, 0x0e,                 //   tag 0 (Sync), 14 bytes:
            0x02,                       //     compact array, 1 + 1 elements
            0x02, b's',                 //     Step "s"
            0, 0, 0, 0, 0, 0, 0, 7,     //     LastSuccessMs 7
            0x02, b'e',                 //     LastError "e"
            0x00,                       //     the element's tagged fields: none
        ];
        let mut buf = BytesMut::new();
        m.put(&mut buf);
        assert_eq!(&buf[..], expected);
        let mut bytes = Bytes::from_static(expected);
        assert_eq!(DescribedMirror::get(&mut bytes), Ok(m.clone()));
        assert!(bytes.is_empty());
        // Without sync steps nothing is written for tag 0: an older reader sees the
        // same bytes as before the field existed.
        let mut buf = BytesMut::new();
        DescribedMirror {
            sync: Vec::new(),
            ..m
        }
        .put(&mut buf);
        assert_eq!(&buf[..], &[0, 0, 0x02, b'm', 0x80, 0, 0, 0, 0x01, 0x00]);
        // A response carrying sync steps round-trips through the public codec.
        let r = MirrorResponse::DescribeMirrors(DescribeMirrorsResponse {
            mirrors: vec![DescribedMirror {
                mirror_name: "m".into(),
                sync: vec![
                    MirrorSyncStatus::default(),
                    MirrorSyncStatus {
                        step: "group-offsets".into(),
                        last_success_ms: 1_700_000_000_000,
                        last_error: None,
                    },
                ],
                ..DescribedMirror::default()
            }],
            ..DescribeMirrorsResponse::default()
        });
        let mut bytes = encode_response(&r);
        assert_eq!(MirrorResponse::decode(99, &mut bytes), Ok(r));
    }

    #[test]
    fn golden_described_partition_lag_ms_is_tag_2() {
        let p = DescribedMirrorPartition {
            partition: 1,
            source_offset: 10,
            destination_offset: 7,
            lag: 3,
            state: "MIRRORING".into(),
            lag_ms: 1500,
            ..DescribedMirrorPartition::default()
        };
        let mut expected: Vec<u8> = Vec::new();
        expected.extend_from_slice(&1i32.to_be_bytes()); // PartitionIndex
        expected.extend_from_slice(&10i64.to_be_bytes()); // SourceOffset
        expected.extend_from_slice(&7i64.to_be_bytes()); // DestinationOffset
        expected.extend_from_slice(&3i64.to_be_bytes()); // Lag
        expected.push(10); // StateValue: compact string of 9 bytes
        expected.extend_from_slice(b"MIRRORING");
        expected.extend_from_slice(&[0, 0]); // RetryAttempt
        expected.push(0); // ErrorMessage: null
        expected.extend_from_slice(&[1, 2, 8]); // one tagged field: tag 2, 8 bytes
        expected.extend_from_slice(&1500i64.to_be_bytes()); // LagMs
        let mut buf = BytesMut::new();
        p.put(&mut buf);
        assert_eq!(&buf[..], &expected[..]);
        let mut bytes = Bytes::from(expected);
        assert_eq!(DescribedMirrorPartition::get(&mut bytes), Ok(p.clone()));
        assert!(bytes.is_empty());
        // Unknown (-1) is the default: nothing is written for tag 2.
        let mut buf = BytesMut::new();
        DescribedMirrorPartition { lag_ms: -1, ..p }.put(&mut buf);
        assert_eq!(buf.last(), Some(&0u8), "no tagged fields");
    }

    #[test]
    fn unknown_tags_are_skipped() {
        // DeleteMirror "m", offset 1, then tags 0 (1 byte) and 7 (3 bytes): DeleteMirror
        // knows no tag.
        #[rustfmt::skip]
        let mut bytes = Bytes::from_static(&[
            0x02, b'm',
            0, 0, 0, 0, 0, 0, 0, 1,
            0x02,
            0x00, 0x01, 0xff,
            0x07, 0x03, 0xaa, 0xbb, 0xcc,
        ]);
        let expected = MirrorRequest::DeleteMirror(DeleteMirrorRequest {
            mirror_name: "m".into(),
            state_validation_offset: 1,
        });
        assert_eq!(MirrorRequest::decode(104, &mut bytes), Ok(expected));
        assert!(bytes.is_empty());
    }

    #[test]
    fn malformed_input_errors() {
        let decode = |key: i16, data: &'static [u8]| {
            MirrorRequest::decode(key, &mut Bytes::from_static(data))
        };
        assert_eq!(decode(97, &[]), Err(MirrorCodecError::UnknownApiKey(97)));
        assert_eq!(
            decode(104, &[0x00]),
            Err(MirrorCodecError::NullString {
                field: "MirrorName"
            })
        );
        assert_eq!(
            decode(104, &[0x03, 0xff, 0xfe]),
            Err(MirrorCodecError::Utf8 {
                field: "MirrorName"
            })
        );
        assert_eq!(
            decode(104, &[0xff, 0xff, 0xff, 0xff, 0x7f]),
            Err(MirrorCodecError::BadVarint {
                field: "MirrorName"
            })
        );
        // A billion-element array in four bytes: refused before allocating.
        assert_eq!(
            decode(102, &[0x01, 0x80, 0x94, 0xeb, 0xdc, 0x03]),
            Err(MirrorCodecError::BadArrayLength {
                field: "Topics",
                count: 999_999_999,
                remaining: 0,
            })
        );
        assert_eq!(
            decode(102, &[0x01, 0x00]),
            Err(MirrorCodecError::NullArray { field: "Topics" })
        );
        // Tag 0 of RemoveTopicsFromMirror declares 3 bytes; its empty array uses 1.
        assert_eq!(
            decode(
                96,
                &[0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x03, 0x01, 0, 0]
            ),
            Err(MirrorCodecError::TaggedFieldSize {
                field: "RemoveTopicsFromMirrorRequest",
                tag: 0,
                declared: 3,
                used: 1,
            })
        );
        assert!(matches!(
            decode(104, &[0x05, b'a']),
            Err(MirrorCodecError::BadStringLength { len: 4, .. })
        ));
    }

    #[test]
    fn varints() {
        for v in [
            0u32,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX >> 1,
            u32::MAX,
        ] {
            let mut buf = BytesMut::new();
            put_uvarint(&mut buf, v);
            let mut bytes = buf.freeze();
            assert_eq!(get_uvarint(&mut bytes, "v"), Ok(v));
            assert!(bytes.is_empty());
        }
    }

    fn min_size_of<T: Codec>(minimal: T) -> (usize, usize) {
        let mut buf = BytesMut::new();
        minimal.put(&mut buf);
        (buf.len(), T::MIN_SIZE)
    }

    /// `MIN_SIZE` bounds array counts: one larger than the smallest encoding would refuse
    /// valid input.
    #[test]
    fn min_sizes_are_the_smallest_encodings() {
        let sizes = [
            min_size_of(SimpleMirrorResponse::default()),
            min_size_of(CreateMirrorRequest::default()),
            min_size_of(MirrorTopicMetadata::default()),
            min_size_of(AddTopicsToMirrorRequest::default()),
            min_size_of(RemoveTopicsFromMirrorRequest::default()),
            min_size_of(MirrorTopicsRequest::default()),
            min_size_of(MirrorTopicResult::default()),
            min_size_of(MirrorTopicsResponse::default()),
            min_size_of(DeleteMirrorRequest::default()),
            min_size_of(ListMirrorsRequest::default()),
            min_size_of(ListedMirror::default()),
            min_size_of(ListMirrorsResponse::default()),
            min_size_of(LmeLookup::default()),
            min_size_of(DescribeMirrorsRequest {
                mirror_names: None,
                ..Default::default()
            }),
            min_size_of(DescribedMirrorPartition {
                state: String::new(),
                ..Default::default()
            }),
            min_size_of(DescribedMirrorTopic::default()),
            min_size_of(DescribedMirror::default()),
            min_size_of(MirrorSyncStatus::default()),
            min_size_of(LmePartition::default()),
            min_size_of(LmeResult::default()),
            min_size_of(DescribeMirrorsResponse::default()),
            min_size_of(ReadMirrorStatesRequest::default()),
            min_size_of(MirrorStateEntry::default()),
            min_size_of(MirrorStatesTopic::default()),
            min_size_of(ReadMirrorStatesResponse::default()),
            min_size_of(WriteMirrorStatesRequest::default()),
            min_size_of(PartitionResult::default()),
            min_size_of(WriteMirrorStatesTopicResult::default()),
            min_size_of(WriteMirrorStatesResponse::default()),
        ];
        for (i, (encoded, min)) in sizes.into_iter().enumerate() {
            assert_eq!(encoded, min, "entry {i}");
        }
        // The element layouts without a struct of their own.
        let mut buf = BytesMut::new();
        put_topic_name_array(&mut buf, &[String::new()]);
        assert_eq!(buf.len(), 1 + 2);
        let mut buf = BytesMut::new();
        CreateMirrorRequest {
            mirror_name: String::new(),
            configs: vec![(String::new(), None)],
        }
        .put(&mut buf);
        assert_eq!(buf.len(), CreateMirrorRequest::MIN_SIZE + 3);
        let mut buf = BytesMut::new();
        ReadMirrorStatesRequest {
            mirror_name: String::new(),
            topics: vec![(String::new(), vec![])],
        }
        .put(&mut buf);
        assert_eq!(buf.len(), ReadMirrorStatesRequest::MIN_SIZE + 3);
    }

    #[test]
    fn check_versions() {
        assert_eq!(check_version(94, 0), Ok(()));
        assert_eq!(
            check_version(94, 1),
            Err(MirrorCodecError::UnsupportedVersion {
                key: 94,
                version: 1
            })
        );
        assert_eq!(
            check_version(97, 0),
            Err(MirrorCodecError::UnknownApiKey(97))
        );
    }
}
