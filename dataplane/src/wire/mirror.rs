//! The mirror RPCs (API keys 94-104, all version 0, flexible) and the mirror partition
//! state numbering. Field layouts follow the upstream schemas of the same keys
//! (`kip1279-reference.md` §2) with Twinlog's message names (`DECISIONS.md`).
//!
//! The messages are defined as JSON schemas in Kafka's message format
//! (`dataplane/messages/*.json`); `codegen/` generates their structs and codecs
//! ([`generated`]) on kafka-protocol's wire types, so each request is an ordinary
//! kafka-protocol `Request` (sent with `KafkaConnection::send` like any other). This file
//! keeps what is not wire layout: keys, error codes, state numbering, `mirror.name`
//! values, and [`MirrorRequest`] / [`MirrorResponse`] for the broker's dispatch by key.
//! Like the rest of `wire`, decoding never panics on input.

use std::fmt;

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable};

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


#[rustfmt::skip]
mod generated;
pub use generated::*;

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

impl From<&str> for MirrorTopicName {
    fn from(name: &str) -> Self {
        MirrorTopicName {
            name: name.to_string(),
        }
    }
}

impl From<String> for MirrorTopicName {
    fn from(name: String) -> Self {
        MirrorTopicName { name }
    }
}

impl<N: Into<String>, V: Into<String>> From<(N, Option<V>)> for MirrorConfig {
    fn from((name, value): (N, Option<V>)) -> Self {
        MirrorConfig {
            name: name.into(),
            value: value.map(Into::into),
        }
    }
}

impl<N: Into<String>> From<(N, Vec<i32>)> for ReadMirrorStatesTopic {
    fn from((name, partitions): (N, Vec<i32>)) -> Self {
        ReadMirrorStatesTopic {
            name: name.into(),
            partitions,
        }
    }
}

/// The `Topics: []{ Name }` of RemoveTopicsFromMirror, Pause and Resume.
pub fn topic_names<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Vec<MirrorTopicName> {
    names
        .into_iter()
        .map(|n| MirrorTopicName { name: n.into() })
        .collect()
}

/// The names in a `Topics: []{ Name }` list.
pub fn names_of(topics: &[MirrorTopicName]) -> Vec<String> {
    topics.iter().map(|t| t.name.clone()).collect()
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
    PauseMirrorTopics(PauseMirrorTopicsRequest),
    ResumeMirrorTopics(ResumeMirrorTopicsRequest),
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

/// Runs `$body` with `$r` bound to the typed request inside a [`MirrorRequest`] and wraps
/// its value (the typed response) in the matching [`MirrorResponse`]. `$body` is expanded
/// once per key, so it can be generic over the request type, e.g.
/// `map_mirror_request!(request, r => conn.send(r, 0).await?)`.
#[macro_export]
macro_rules! map_mirror_request {
    ($request:expr, $r:ident => $body:expr) => {{
        use $crate::wire::mirror::{MirrorRequest as Q, MirrorResponse as A};
        match $request {
            Q::CreateMirror($r) => A::CreateMirror($body),
            Q::AddTopicsToMirror($r) => A::AddTopicsToMirror($body),
            Q::RemoveTopicsFromMirror($r) => A::RemoveTopicsFromMirror($body),
            Q::ListMirrors($r) => A::ListMirrors($body),
            Q::DescribeMirrors($r) => A::DescribeMirrors($body),
            Q::ReadMirrorStates($r) => A::ReadMirrorStates($body),
            Q::WriteMirrorStates($r) => A::WriteMirrorStates($body),
            Q::PauseMirrorTopics($r) => A::PauseMirrorTopics($body),
            Q::ResumeMirrorTopics($r) => A::ResumeMirrorTopics($body),
            Q::DeleteMirror($r) => A::DeleteMirror($body),
        }
    }};
}

/// Why a mirror message did not decode or encode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorCodecError {
    #[error("unknown mirror API key {0}")]
    UnknownApiKey(i16),
    #[error("mirror API key {key} v{version} is not supported (v0 only)")]
    UnsupportedVersion { key: i16, version: i16 },
    #[error("malformed mirror message (API key {key}): {message}")]
    Malformed { key: i16, message: String },
    #[error("cannot encode mirror message (API key {key}): {message}")]
    Encode { key: i16, message: String },
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

fn encode_body<T: Encodable>(key: i16, message: &T, buf: &mut BytesMut) -> CodecResult<()> {
    message
        .encode(buf, 0)
        .map_err(|e| MirrorCodecError::Encode {
            key,
            message: e.to_string(),
        })
}

fn decode_body<T: Decodable>(key: i16, buf: &mut Bytes) -> CodecResult<T> {
    T::decode(buf, 0).map_err(|e| MirrorCodecError::Malformed {
        key,
        message: e.to_string(),
    })
}

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
    pub fn encode(&self, buf: &mut BytesMut) -> CodecResult<()> {
        let key = self.api_key();
        match self {
            MirrorRequest::CreateMirror(r) => encode_body(key, r, buf),
            MirrorRequest::AddTopicsToMirror(r) => encode_body(key, r, buf),
            MirrorRequest::RemoveTopicsFromMirror(r) => encode_body(key, r, buf),
            MirrorRequest::ListMirrors(r) => encode_body(key, r, buf),
            MirrorRequest::DescribeMirrors(r) => encode_body(key, r, buf),
            MirrorRequest::ReadMirrorStates(r) => encode_body(key, r, buf),
            MirrorRequest::WriteMirrorStates(r) => encode_body(key, r, buf),
            MirrorRequest::PauseMirrorTopics(r) => encode_body(key, r, buf),
            MirrorRequest::ResumeMirrorTopics(r) => encode_body(key, r, buf),
            MirrorRequest::DeleteMirror(r) => encode_body(key, r, buf),
        }
    }

    /// Decodes a version 0 body of `api_key` from the front of `buf`. Bytes after the
    /// body are left in `buf`.
    pub fn decode(api_key: i16, buf: &mut Bytes) -> CodecResult<MirrorRequest> {
        let k = api_key;
        Ok(match api_key {
            keys::CREATE_MIRROR => MirrorRequest::CreateMirror(decode_body(k, buf)?),
            keys::ADD_TOPICS_TO_MIRROR => MirrorRequest::AddTopicsToMirror(decode_body(k, buf)?),
            keys::REMOVE_TOPICS_FROM_MIRROR => {
                MirrorRequest::RemoveTopicsFromMirror(decode_body(k, buf)?)
            }
            keys::LIST_MIRRORS => MirrorRequest::ListMirrors(decode_body(k, buf)?),
            keys::DESCRIBE_MIRRORS => MirrorRequest::DescribeMirrors(decode_body(k, buf)?),
            keys::READ_MIRROR_STATES => MirrorRequest::ReadMirrorStates(decode_body(k, buf)?),
            keys::WRITE_MIRROR_STATES => MirrorRequest::WriteMirrorStates(decode_body(k, buf)?),
            keys::PAUSE_MIRROR_TOPICS => MirrorRequest::PauseMirrorTopics(decode_body(k, buf)?),
            keys::RESUME_MIRROR_TOPICS => MirrorRequest::ResumeMirrorTopics(decode_body(k, buf)?),
            keys::DELETE_MIRROR => MirrorRequest::DeleteMirror(decode_body(k, buf)?),
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
    pub fn encode(&self, buf: &mut BytesMut) -> CodecResult<()> {
        let key = self.api_key();
        match self {
            MirrorResponse::CreateMirror(r) | MirrorResponse::DeleteMirror(r) => {
                encode_body(key, r, buf)
            }
            MirrorResponse::AddTopicsToMirror(r)
            | MirrorResponse::RemoveTopicsFromMirror(r)
            | MirrorResponse::PauseMirrorTopics(r)
            | MirrorResponse::ResumeMirrorTopics(r) => encode_body(key, r, buf),
            MirrorResponse::ListMirrors(r) => encode_body(key, r, buf),
            MirrorResponse::DescribeMirrors(r) => encode_body(key, r, buf),
            MirrorResponse::ReadMirrorStates(r) => encode_body(key, r, buf),
            MirrorResponse::WriteMirrorStates(r) => encode_body(key, r, buf),
        }
    }

    /// Decodes a version 0 body of `api_key` from the front of `buf`. Bytes after the
    /// body are left in `buf`.
    pub fn decode(api_key: i16, buf: &mut Bytes) -> CodecResult<MirrorResponse> {
        let k = api_key;
        Ok(match api_key {
            keys::CREATE_MIRROR => MirrorResponse::CreateMirror(decode_body(k, buf)?),
            keys::ADD_TOPICS_TO_MIRROR => MirrorResponse::AddTopicsToMirror(decode_body(k, buf)?),
            keys::REMOVE_TOPICS_FROM_MIRROR => {
                MirrorResponse::RemoveTopicsFromMirror(decode_body(k, buf)?)
            }
            keys::LIST_MIRRORS => MirrorResponse::ListMirrors(decode_body(k, buf)?),
            keys::DESCRIBE_MIRRORS => MirrorResponse::DescribeMirrors(decode_body(k, buf)?),
            keys::READ_MIRROR_STATES => MirrorResponse::ReadMirrorStates(decode_body(k, buf)?),
            keys::WRITE_MIRROR_STATES => MirrorResponse::WriteMirrorStates(decode_body(k, buf)?),
            keys::PAUSE_MIRROR_TOPICS => MirrorResponse::PauseMirrorTopics(decode_body(k, buf)?),
            keys::RESUME_MIRROR_TOPICS => MirrorResponse::ResumeMirrorTopics(decode_body(k, buf)?),
            keys::DELETE_MIRROR => MirrorResponse::DeleteMirror(decode_body(k, buf)?),
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

    fn size<T: Encodable>(m: &T) -> usize {
        m.compute_size(0).expect("sized")
    }

    /// The request's encoding, checked against its `compute_size`.
    fn encode_request(r: &MirrorRequest) -> Bytes {
        let mut buf = BytesMut::new();
        r.encode(&mut buf).expect("encodes");
        let computed = match r {
            MirrorRequest::CreateMirror(m) => size(m),
            MirrorRequest::AddTopicsToMirror(m) => size(m),
            MirrorRequest::RemoveTopicsFromMirror(m) => size(m),
            MirrorRequest::ListMirrors(m) => size(m),
            MirrorRequest::DescribeMirrors(m) => size(m),
            MirrorRequest::ReadMirrorStates(m) => size(m),
            MirrorRequest::WriteMirrorStates(m) => size(m),
            MirrorRequest::PauseMirrorTopics(m) => size(m),
            MirrorRequest::ResumeMirrorTopics(m) => size(m),
            MirrorRequest::DeleteMirror(m) => size(m),
        };
        assert_eq!(computed, buf.len(), "compute_size of {r:?}");
        buf.freeze()
    }

    /// The response's encoding, checked against its `compute_size`.
    fn encode_response(r: &MirrorResponse) -> Bytes {
        let mut buf = BytesMut::new();
        r.encode(&mut buf).expect("encodes");
        let computed = match r {
            MirrorResponse::CreateMirror(m) | MirrorResponse::DeleteMirror(m) => size(m),
            MirrorResponse::AddTopicsToMirror(m)
            | MirrorResponse::RemoveTopicsFromMirror(m)
            | MirrorResponse::PauseMirrorTopics(m)
            | MirrorResponse::ResumeMirrorTopics(m) => size(m),
            MirrorResponse::ListMirrors(m) => size(m),
            MirrorResponse::DescribeMirrors(m) => size(m),
            MirrorResponse::ReadMirrorStates(m) => size(m),
            MirrorResponse::WriteMirrorStates(m) => size(m),
        };
        assert_eq!(computed, buf.len(), "compute_size of {r:?}");
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

    fn topic_name_list() -> impl Strategy<Value = Vec<MirrorTopicName>> {
        names().prop_map(topic_names)
    }

    fn topics_request() -> impl Strategy<Value = (String, Vec<MirrorTopicName>, i64)> {
        (name(), topic_name_list(), any::<i64>())
    }

    fn request() -> impl Strategy<Value = MirrorRequest> {
        prop_oneof![
            (name(), vec((name(), opt_name()), 0..4)).prop_map(|(mirror_name, configs)| {
                MirrorRequest::CreateMirror(CreateMirrorRequest {
                    mirror_name,
                    configs: configs.into_iter().map(Into::into).collect(),
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
            (name(), topic_name_list(), names(), any::<i64>()).prop_map(
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
                        topics: topics
                            .into_iter()
                            .map(|(name, partitions)| ReadMirrorStatesTopic { name, partitions })
                            .collect(),
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
            topics_request().prop_map(|(mirror_name, topics, offset)| {
                MirrorRequest::PauseMirrorTopics(PauseMirrorTopicsRequest {
                    mirror_name,
                    topics,
                    state_validation_offset: offset,
                })
            }),
            topics_request().prop_map(|(mirror_name, topics, offset)| {
                MirrorRequest::ResumeMirrorTopics(ResumeMirrorTopicsRequest {
                    mirror_name,
                    topics,
                    state_validation_offset: offset,
                })
            }),
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
            r.encode(&mut buf).expect("encodes");
            buf.extend_from_slice(&tail);
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
            topics: topic_names(["t"]),
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
        m.encode(&mut buf, 0).expect("encodes");
        assert_eq!(&buf[..], expected);
        let mut bytes = Bytes::from_static(expected);
        assert_eq!(DescribedMirror::decode(&mut bytes, 0).ok(), Some(m.clone()));
        assert!(bytes.is_empty());
        // Without sync steps nothing is written for tag 0: an older reader sees the
        // same bytes as before the field existed.
        let mut buf = BytesMut::new();
        DescribedMirror {
            sync: Vec::new(),
            ..m
        }
        .encode(&mut buf, 0)
        .expect("encodes");
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
        p.encode(&mut buf, 0).expect("encodes");
        assert_eq!(&buf[..], &expected[..]);
        let mut bytes = Bytes::from(expected);
        assert_eq!(
            DescribedMirrorPartition::decode(&mut bytes, 0).ok(),
            Some(p.clone())
        );
        assert!(bytes.is_empty());
        // Unknown (-1) is the default: nothing is written for tag 2.
        let mut buf = BytesMut::new();
        DescribedMirrorPartition { lag_ms: -1, ..p }
            .encode(&mut buf, 0)
            .expect("encodes");
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
        let malformed = [
            // A null MirrorName.
            (104, &[0x00][..]),
            // Not UTF-8.
            (104, &[0x03, 0xff, 0xfe]),
            // A string length past the end.
            (104, &[0xff, 0xff, 0xff, 0xff, 0x7f]),
            (104, &[0x05, b'a']),
            // A billion-element array in four bytes: refused before allocating.
            (102, &[0x01, 0x80, 0x94, 0xeb, 0xdc, 0x03]),
            // A null Topics array.
            (102, &[0x01, 0x00]),
            // Tag 0 of RemoveTopicsFromMirror declares 3 bytes; its empty array uses 1.
            (
                96,
                &[
                    0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x03, 0x01, 0, 0,
                ],
            ),
        ];
        for (key, data) in malformed {
            match decode(key, data) {
                Err(MirrorCodecError::Malformed { key: k, message }) => {
                    assert_eq!(k, key);
                    assert!(!message.is_empty());
                }
                other => panic!("{data:?} as key {key}: {other:?}"),
            }
        }
    }

    /// The smallest messages: every string empty, every array empty, tagged fields at
    /// their defaults (so absent).
    #[test]
    fn empty_messages_take_one_byte_per_field() {
        let create = MirrorRequest::CreateMirror(CreateMirrorRequest::default());
        assert_eq!(&encode_request(&create)[..], &[0x01, 0x01, 0x00]);
        let config = MirrorRequest::CreateMirror(CreateMirrorRequest {
            mirror_name: String::new(),
            configs: vec![MirrorConfig::default()],
        });
        // One config: an empty name, a null value, no tags.
        assert_eq!(
            &encode_request(&config)[..],
            &[0x01, 0x02, 0x01, 0x00, 0x00, 0x00]
        );
        let read = MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest {
            mirror_name: String::new(),
            topics: vec![ReadMirrorStatesTopic::default()],
        });
        assert_eq!(
            &encode_request(&read)[..],
            &[0x01, 0x02, 0x01, 0x01, 0x00, 0x00]
        );
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
