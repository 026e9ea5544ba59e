//! The `__mirror_state` record formats, byte for byte as Kafka's coordinator-record serde
//! writes them (`kip1279-reference.md` §5.3), and the key-to-partition hash (§5.2).
//!
//! - Key bytes: `int16` record type, then the key fields at version 0. Keys are not
//!   flexible: the mirror name is a classic `STRING` (`int16` length + UTF-8), the topic
//!   id 16 raw bytes, the partition an `int32`.
//! - Value bytes: `int16` value version (0), then the fields, flexible: strings are compact
//!   (unsigned varint length + 1, 0 = null) and the value ends with a tagged-field
//!   section.
//! - A tombstone is a key with a null value.
//!
//! | type | key                   | value (version 0)                                     |
//! |------|-----------------------|-------------------------------------------------------|
//! | 1    | LastMirroredEpochs    | LastMirrorEpoch int32                                 |
//! | 2    | MirrorPartitionState  | State int8, PreviousState int8, RetryAttempt int16,   |
//! |      |                       | ErrorMessage compact nullable string, LeaderEpoch     |
//! |      |                       | int32, StateEpoch int32; tag 0 (Twinlog):             |
//! |      |                       | TruncatedRecords int64, written only when != -1       |
//!
//! Pure code, no I/O. The bytes come from disk (and possibly from other clusters' tools),
//! so decoding never panics: anything malformed is a [`MirrorRecordError`].

use dataplane::wire::mirror::MirrorPartitionState;
use uuid::Uuid;

/// Record type of a LastMirroredEpochs key.
pub const LME_RECORD_TYPE: i16 = 1;
/// Record type of a MirrorPartitionState key.
pub const STATE_RECORD_TYPE: i16 = 2;
/// The only value version written and read.
pub const VALUE_VERSION: i16 = 0;
/// Twinlog's tagged field of the state value: records the last PREPARING truncation
/// discarded.
pub const TRUNCATED_RECORDS_TAG: u32 = 0;
/// Tagged field of the LastMirroredEpochs value: the offset that goes with the epoch.
pub const LAST_MIRRORED_OFFSET_TAG: u32 = 0;

/// Why a `__mirror_state` key or value could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorRecordError {
    #[error("{what}: record ends at byte {len}, needed {needed} more")]
    Truncated {
        what: &'static str,
        len: usize,
        needed: usize,
    },
    #[error("unknown __mirror_state record type {record_type}")]
    UnknownRecordType { record_type: i16 },
    #[error("{what}: unsupported value version {version}")]
    UnsupportedVersion { what: &'static str, version: i16 },
    #[error("{what}: negative length {length}")]
    NegativeLength { what: &'static str, length: i64 },
    #[error("{what}: null where a value is required")]
    UnexpectedNull { what: &'static str },
    #[error("{what}: string is not UTF-8")]
    InvalidUtf8 { what: &'static str },
    #[error("{what}: unsigned varint too long")]
    VarintOverflow { what: &'static str },
    #[error("{what}: unknown partition state code {code}")]
    UnknownState { what: &'static str, code: i8 },
    #[error("{what}: tagged field {tag} has {size} bytes, expected {expected}")]
    BadTaggedField {
        what: &'static str,
        tag: u32,
        size: usize,
        expected: usize,
    },
    #[error("{what}: {extra} trailing bytes")]
    TrailingBytes { what: &'static str, extra: usize },
    #[error("mirror name of {len} bytes does not fit a STRING (at most {max})")]
    NameTooLong { len: usize, max: usize },
}

/// Which of the two records a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MirrorRecordKind {
    /// LastMirroredEpochs (type 1): the LME recorded at STOPPING.
    Lme,
    /// MirrorPartitionState (type 2): the partition's mirror state.
    State,
}

impl MirrorRecordKind {
    pub fn record_type(self) -> i16 {
        match self {
            MirrorRecordKind::Lme => LME_RECORD_TYPE,
            MirrorRecordKind::State => STATE_RECORD_TYPE,
        }
    }

    pub fn from_record_type(record_type: i16) -> Option<Self> {
        match record_type {
            LME_RECORD_TYPE => Some(MirrorRecordKind::Lme),
            STATE_RECORD_TYPE => Some(MirrorRecordKind::State),
            _ => None,
        }
    }

    /// A short name for logs and `dump-log`.
    pub fn name(self) -> &'static str {
        match self {
            MirrorRecordKind::Lme => "lme",
            MirrorRecordKind::State => "state",
        }
    }
}

/// The key of a `__mirror_state` record: one per (mirror, topic id, partition) and kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MirrorStateKey {
    pub kind: MirrorRecordKind,
    pub mirror: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

/// A stored partition state (the value of a MirrorPartitionState record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateValue {
    pub state: MirrorPartitionState,
    /// The state before this one; `Unknown` when there was none.
    pub previous_state: MirrorPartitionState,
    /// 0 normally; the attempt count in FAILED; -1 for a non-retryable failure.
    pub retry_attempt: i16,
    pub error_message: Option<String>,
    /// The partition leader epoch of the writer (fences older leaders).
    pub leader_epoch: i32,
    /// +1 on every transition (fences stale writers of the same leader epoch).
    pub state_epoch: i32,
    /// Records the last PREPARING truncation discarded; -1 unknown.
    pub truncated_records: i64,
}

impl Default for StateValue {
    fn default() -> Self {
        StateValue {
            state: MirrorPartitionState::Unknown,
            previous_state: MirrorPartitionState::Unknown,
            retry_attempt: 0,
            error_message: None,
            leader_epoch: -1,
            state_epoch: 0,
            truncated_records: -1,
        }
    }
}

/// The value of a `__mirror_state` record (a tombstone has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorStateValue {
    Lme {
        last_mirrored_epoch: i32,
        /// Tag 0 (Twinlog): the log end offset that goes with the epoch, -1 unknown.
        last_mirrored_offset: i64,
    },
    State(StateValue),
}

impl MirrorStateValue {
    pub fn kind(&self) -> MirrorRecordKind {
        match self {
            MirrorStateValue::Lme { .. } => MirrorRecordKind::Lme,
            MirrorStateValue::State(_) => MirrorRecordKind::State,
        }
    }
}

/// The largest mirror name a classic `STRING` holds.
pub const MIRROR_NAME_BYTES_MAX: usize = i16::MAX as usize;

impl MirrorStateKey {
    pub fn new(kind: MirrorRecordKind, mirror: &str, topic_id: Uuid, partition: i32) -> Self {
        MirrorStateKey {
            kind,
            mirror: mirror.to_string(),
            topic_id,
            partition,
        }
    }

    /// Key bytes: record type, then the version-0 key fields.
    pub fn encode(&self) -> Result<Vec<u8>, MirrorRecordError> {
        let name = self.mirror.as_bytes();
        let len = i16::try_from(name.len()).map_err(|_| MirrorRecordError::NameTooLong {
            len: name.len(),
            max: MIRROR_NAME_BYTES_MAX,
        })?;
        let mut out = Vec::with_capacity(2 + 2 + name.len() + 16 + 4);
        out.extend_from_slice(&self.kind.record_type().to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(self.topic_id.as_bytes());
        out.extend_from_slice(&self.partition.to_be_bytes());
        Ok(out)
    }

    pub fn decode(buf: &[u8]) -> Result<Self, MirrorRecordError> {
        const WHAT: &str = "__mirror_state key";
        let mut r = Reader::new(buf, WHAT);
        let record_type = r.i16()?;
        let kind = MirrorRecordKind::from_record_type(record_type)
            .ok_or(MirrorRecordError::UnknownRecordType { record_type })?;
        let mirror = r.string()?;
        let topic_id = Uuid::from_bytes(r.array::<16>()?);
        let partition = r.i32()?;
        r.finish()?;
        Ok(MirrorStateKey {
            kind,
            mirror,
            topic_id,
            partition,
        })
    }

    /// The `__mirror_state` partition holding this key.
    pub fn partition_for(&self, num_partitions: i32) -> i32 {
        partition_for(&self.mirror, self.topic_id, self.partition, num_partitions)
    }
}

/// Value bytes: version 0, the fields, the tagged-field section.
pub fn encode_value(value: &MirrorStateValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(&VALUE_VERSION.to_be_bytes());
    match value {
        MirrorStateValue::Lme {
            last_mirrored_epoch,
            last_mirrored_offset,
        } => {
            out.extend_from_slice(&last_mirrored_epoch.to_be_bytes());
            put_optional_i64_tag(&mut out, LAST_MIRRORED_OFFSET_TAG, *last_mirrored_offset);
        }
        MirrorStateValue::State(v) => {
            out.extend_from_slice(&v.state.code().to_be_bytes());
            out.extend_from_slice(&v.previous_state.code().to_be_bytes());
            out.extend_from_slice(&v.retry_attempt.to_be_bytes());
            match &v.error_message {
                None => write_uvarint(&mut out, 0),
                Some(m) => {
                    write_uvarint(&mut out, m.len() as u64 + 1);
                    out.extend_from_slice(m.as_bytes());
                }
            }
            out.extend_from_slice(&v.leader_epoch.to_be_bytes());
            out.extend_from_slice(&v.state_epoch.to_be_bytes());
            put_optional_i64_tag(&mut out, TRUNCATED_RECORDS_TAG, v.truncated_records);
        }
    }
    out
}

/// The tagged-field section of a value with one optional int64 field: empty when the
/// value is -1 (unknown), else the one tag.
fn put_optional_i64_tag(out: &mut Vec<u8>, tag: u32, value: i64) {
    if value == -1 {
        write_uvarint(out, 0);
    } else {
        write_uvarint(out, 1);
        write_uvarint(out, u64::from(tag));
        write_uvarint(out, 8);
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// An int64 tagged field's bytes.
fn tagged_i64(what: &'static str, tag: u32, data: &[u8]) -> Result<i64, MirrorRecordError> {
    let bytes: [u8; 8] = data
        .try_into()
        .map_err(|_| MirrorRecordError::BadTaggedField {
            what,
            tag,
            size: data.len(),
            expected: 8,
        })?;
    Ok(i64::from_be_bytes(bytes))
}

/// Decodes the value of a record whose key is of `kind`.
pub fn decode_value(
    kind: MirrorRecordKind,
    buf: &[u8],
) -> Result<MirrorStateValue, MirrorRecordError> {
    let what = match kind {
        MirrorRecordKind::Lme => "LastMirroredEpochs value",
        MirrorRecordKind::State => "MirrorPartitionState value",
    };
    let mut r = Reader::new(buf, what);
    let version = r.i16()?;
    if version != VALUE_VERSION {
        return Err(MirrorRecordError::UnsupportedVersion { what, version });
    }
    let value = match kind {
        MirrorRecordKind::Lme => {
            let last_mirrored_epoch = r.i32()?;
            let mut last_mirrored_offset = -1;
            r.tagged_fields(|tag, data| {
                if tag == LAST_MIRRORED_OFFSET_TAG {
                    last_mirrored_offset = tagged_i64(what, tag, data)?;
                }
                Ok(())
            })?;
            MirrorStateValue::Lme {
                last_mirrored_epoch,
                last_mirrored_offset,
            }
        }
        MirrorRecordKind::State => {
            let state = state_from(r.i8()?, what)?;
            let previous_state = state_from(r.i8()?, what)?;
            let retry_attempt = r.i16()?;
            let error_message = r.compact_nullable_string()?;
            let leader_epoch = r.i32()?;
            let state_epoch = r.i32()?;
            let mut truncated_records = -1;
            r.tagged_fields(|tag, data| {
                if tag == TRUNCATED_RECORDS_TAG {
                    truncated_records = tagged_i64(what, tag, data)?;
                }
                Ok(())
            })?;
            MirrorStateValue::State(StateValue {
                state,
                previous_state,
                retry_attempt,
                error_message,
                leader_epoch,
                state_epoch,
                truncated_records,
            })
        }
    };
    r.finish()?;
    Ok(value)
}

/// Decodes a whole record: its key and, unless it is a tombstone, its value.
pub fn decode_record(
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(MirrorStateKey, Option<MirrorStateValue>), MirrorRecordError> {
    let key = MirrorStateKey::decode(key)?;
    let value = value.map(|v| decode_value(key.kind, v)).transpose()?;
    Ok((key, value))
}

fn state_from(code: i8, what: &'static str) -> Result<MirrorPartitionState, MirrorRecordError> {
    MirrorPartitionState::from_code(code).ok_or(MirrorRecordError::UnknownState { what, code })
}

/// Java's `String.hashCode`: `h = 31*h + c` over UTF-16 code units, wrapping at 32 bits.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs`: `abs(i32::MIN)` is 0 instead of overflowing.
pub fn kafka_abs(v: i32) -> i32 {
    if v == i32::MIN {
        0
    } else {
        v.abs()
    }
}

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding, 22 characters.
pub fn kafka_uuid_string(id: Uuid) -> String {
    dataplane::log::loader::format_topic_id(id)
}

/// The `__mirror_state` partition of a per-partition key, exactly as Kafka computes it:
/// `Utils.abs("<mirror>:<topicId>:<partition>".hashCode()) % num_partitions`, with the
/// topic id in Kafka's base64 form. With no partitions (`num_partitions <= 0`) it is 0:
/// callers only ask for a topic that exists.
pub fn partition_for(mirror: &str, topic_id: Uuid, partition: i32, num_partitions: i32) -> i32 {
    let key = format!("{mirror}:{}:{partition}", kafka_uuid_string(topic_id));
    hash_to_partition(&key, num_partitions)
}

/// The `__mirror_state` partition whose leader is a mirror's coordinator (per-mirror work:
/// metadata sync, topic discovery): `Utils.abs(mirror.hashCode()) % num_partitions`.
pub fn mirror_partition_for(mirror: &str, num_partitions: i32) -> i32 {
    hash_to_partition(mirror, num_partitions)
}

fn hash_to_partition(key: &str, num_partitions: i32) -> i32 {
    if num_partitions <= 0 {
        return 0;
    }
    kafka_abs(java_string_hash(key)) % num_partitions
}

fn write_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A bounds-checked cursor: every read returns an error instead of panicking.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, at: 0, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], MirrorRecordError> {
        let rest = &self.buf[self.at..];
        if rest.len() < n {
            return Err(MirrorRecordError::Truncated {
                what: self.what,
                len: self.buf.len(),
                needed: n - rest.len(),
            });
        }
        self.at += n;
        Ok(&rest[..n])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], MirrorRecordError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i8(&mut self) -> Result<i8, MirrorRecordError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    fn i16(&mut self) -> Result<i16, MirrorRecordError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, MirrorRecordError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn uvarint(&mut self) -> Result<u64, MirrorRecordError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(MirrorRecordError::VarintOverflow { what: self.what })
    }

    /// A length that must fit the remaining bytes (so a hostile length never allocates).
    fn length(&mut self, v: u64) -> Result<usize, MirrorRecordError> {
        let remaining = self.buf.len() - self.at;
        match usize::try_from(v) {
            Ok(n) if n <= remaining => Ok(n),
            _ => Err(MirrorRecordError::Truncated {
                what: self.what,
                len: self.buf.len(),
                needed: usize::try_from(v)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(remaining),
            }),
        }
    }

    fn utf8(&self, bytes: &[u8]) -> Result<String, MirrorRecordError> {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| MirrorRecordError::InvalidUtf8 { what: self.what })
    }

    /// A classic non-nullable `STRING`: `int16` length, UTF-8.
    fn string(&mut self) -> Result<String, MirrorRecordError> {
        let len = self.i16()?;
        if len == -1 {
            return Err(MirrorRecordError::UnexpectedNull { what: self.what });
        }
        if len < 0 {
            return Err(MirrorRecordError::NegativeLength {
                what: self.what,
                length: i64::from(len),
            });
        }
        let bytes = self.take(len as usize)?;
        self.utf8(bytes)
    }

    /// A `COMPACT_NULLABLE_STRING`: unsigned varint length + 1 (0 = null), UTF-8.
    fn compact_nullable_string(&mut self) -> Result<Option<String>, MirrorRecordError> {
        let n = self.uvarint()?;
        if n == 0 {
            return Ok(None);
        }
        let len = self.length(n - 1)?;
        let bytes = self.take(len)?;
        self.utf8(bytes).map(Some)
    }

    /// The tagged-field section: count, then (tag, size, data) each. `visit` sees every
    /// field; unknown tags are for it to ignore.
    fn tagged_fields(
        &mut self,
        mut visit: impl FnMut(u32, &[u8]) -> Result<(), MirrorRecordError>,
    ) -> Result<(), MirrorRecordError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let tag = u32::try_from(tag)
                .map_err(|_| MirrorRecordError::VarintOverflow { what: self.what })?;
            let size = self.uvarint()?;
            let size = self.length(size)?;
            let data = self.take(size)?;
            visit(tag, data)?;
        }
        Ok(())
    }

    fn finish(&self) -> Result<(), MirrorRecordError> {
        match self.buf.len() - self.at {
            0 => Ok(()),
            extra => Err(MirrorRecordError::TrailingBytes {
                what: self.what,
                extra,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states() -> impl Iterator<Item = MirrorPartitionState> {
        MirrorPartitionState::ALL.into_iter()
    }

    fn sample_keys() -> Vec<MirrorStateKey> {
        let ids = [
            Uuid::nil(),
            Uuid::from_u128(1),
            Uuid::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210),
            Uuid::from_u128(u128::MAX),
        ];
        let mut out = Vec::new();
        for kind in [MirrorRecordKind::Lme, MirrorRecordKind::State] {
            for mirror in ["", "m", "east-to-west", "ünïcødé-mirror", &"x".repeat(300)] {
                for id in ids {
                    for partition in [0, 1, 49, i32::MAX, -1] {
                        out.push(MirrorStateKey::new(kind, mirror, id, partition));
                    }
                }
            }
        }
        out
    }

    fn sample_values() -> Vec<MirrorStateValue> {
        let mut out: Vec<MirrorStateValue> = [-1, 0, 7, i32::MAX, i32::MIN]
            .into_iter()
            .zip([-1, 0, 1234, i64::MAX, -1])
            .map(|(e, o)| MirrorStateValue::Lme {
                last_mirrored_epoch: e,
                last_mirrored_offset: o,
            })
            .collect();
        for state in states() {
            for previous_state in states() {
                for (retry_attempt, error_message) in [
                    (0, None),
                    (-1, Some("source topic deleted".to_string())),
                    (3, Some(String::new())),
                    (i16::MAX, Some("é".repeat(200))),
                ] {
                    for (leader_epoch, state_epoch, truncated_records) in [
                        (-1, 0, -1),
                        (5, 12, 0),
                        (i32::MAX, i32::MIN, i64::MAX),
                        (0, 1, 42),
                    ] {
                        out.push(MirrorStateValue::State(StateValue {
                            state,
                            previous_state,
                            retry_attempt,
                            error_message: error_message.clone(),
                            leader_epoch,
                            state_epoch,
                            truncated_records,
                        }));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn keys_round_trip() {
        for key in sample_keys() {
            let bytes = key.encode().expect("encodes");
            assert_eq!(MirrorStateKey::decode(&bytes), Ok(key));
        }
    }

    #[test]
    fn values_round_trip() {
        for value in sample_values() {
            let bytes = encode_value(&value);
            assert_eq!(decode_value(value.kind(), &bytes), Ok(value.clone()));
            let key = MirrorStateKey::new(value.kind(), "m", Uuid::from_u128(9), 2);
            let key_bytes = key.encode().expect("encodes");
            assert_eq!(
                decode_record(&key_bytes, Some(&bytes)),
                Ok((key.clone(), Some(value)))
            );
            assert_eq!(decode_record(&key_bytes, None), Ok((key, None)));
        }
    }

    #[test]
    fn key_layout_is_kafkas() {
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let key = MirrorStateKey::new(MirrorRecordKind::State, "ab", id, 3);
        let mut expected = vec![0, 2, 0, 2, b'a', b'b'];
        expected.extend_from_slice(id.as_bytes());
        expected.extend_from_slice(&[0, 0, 0, 3]);
        assert_eq!(key.encode().expect("encodes"), expected);
        let lme = MirrorStateKey::new(MirrorRecordKind::Lme, "ab", id, 3);
        assert_eq!(lme.encode().expect("encodes")[..2], [0, 1]);
    }

    #[test]
    fn value_layout_is_kafkas() {
        assert_eq!(
            encode_value(&MirrorStateValue::Lme {
                last_mirrored_epoch: 7,
                last_mirrored_offset: -1,
            }),
            vec![0, 0, 0, 0, 0, 7, 0]
        );
        // The offset travels as tagged field 0: a reader that does not know it skips it.
        assert_eq!(
            encode_value(&MirrorStateValue::Lme {
                last_mirrored_epoch: 7,
                last_mirrored_offset: 300,
            }),
            vec![0, 0, 0, 0, 0, 7, 1, 0, 8, 0, 0, 0, 0, 0, 0, 1, 44]
        );
        let v = StateValue {
            state: MirrorPartitionState::Mirroring,
            previous_state: MirrorPartitionState::Preparing,
            retry_attempt: 2,
            error_message: Some("x".to_string()),
            leader_epoch: 4,
            state_epoch: 5,
            truncated_records: -1,
        };
        let plain = vec![0, 0, 1, 0, 0, 2, 2, b'x', 0, 0, 0, 4, 0, 0, 0, 5, 0];
        assert_eq!(encode_value(&MirrorStateValue::State(v.clone())), plain);
        // Null message: compact length 0. Truncated records: one tagged field.
        let v = StateValue {
            error_message: None,
            truncated_records: 258,
            ..v
        };
        let mut tagged = vec![0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 4, 0, 0, 0, 5, 1, 0, 8];
        tagged.extend_from_slice(&258i64.to_be_bytes());
        assert_eq!(encode_value(&MirrorStateValue::State(v)), tagged);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        // A state value with tag 0 and an unknown tag 5 of 3 bytes.
        let mut bytes = vec![0, 0, 5, 4, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 2, 0, 8];
        bytes.extend_from_slice(&77i64.to_be_bytes());
        bytes.extend_from_slice(&[5, 3, 0xaa, 0xbb, 0xcc]);
        match decode_value(MirrorRecordKind::State, &bytes) {
            Ok(MirrorStateValue::State(v)) => {
                assert_eq!(v.state, MirrorPartitionState::Stopped);
                assert_eq!(v.previous_state, MirrorPartitionState::Stopping);
                assert_eq!(v.truncated_records, 77);
                assert_eq!(v.state_epoch, 9);
            }
            other => panic!("unexpected {other:?}"),
        }
        // Tag 0 of the wrong size.
        let bad = vec![0, 0, 5, 4, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 1, 0, 2, 0, 0];
        assert!(matches!(
            decode_value(MirrorRecordKind::State, &bad),
            Err(MirrorRecordError::BadTaggedField {
                tag: 0,
                size: 2,
                ..
            })
        ));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for key in sample_keys().into_iter().step_by(7) {
            let bytes = key.encode().expect("encodes");
            for cut in 0..bytes.len() {
                assert!(
                    MirrorStateKey::decode(&bytes[..cut]).is_err(),
                    "{key:?} cut at {cut}"
                );
            }
        }
        for value in sample_values().into_iter().step_by(5) {
            let bytes = encode_value(&value);
            for cut in 0..bytes.len() {
                assert!(
                    decode_value(value.kind(), &bytes[..cut]).is_err(),
                    "{value:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn malformed_input_is_an_error() {
        let id = Uuid::from_u128(5);
        let good = MirrorStateKey::new(MirrorRecordKind::State, "m", id, 0)
            .encode()
            .expect("encodes");
        // Unknown record type.
        let mut bad = good.clone();
        bad[1] = 9;
        assert_eq!(
            MirrorStateKey::decode(&bad),
            Err(MirrorRecordError::UnknownRecordType { record_type: 9 })
        );
        // Null, negative and oversized name lengths.
        for (len, ok) in [(-1i16, false), (-7, false), (i16::MAX, false)] {
            let mut bad = good.clone();
            bad[2..4].copy_from_slice(&len.to_be_bytes());
            assert_eq!(MirrorStateKey::decode(&bad).is_ok(), ok, "{len}");
        }
        // Invalid UTF-8.
        let mut bad = good.clone();
        bad[4] = 0xff;
        assert_eq!(
            MirrorStateKey::decode(&bad),
            Err(MirrorRecordError::InvalidUtf8 {
                what: "__mirror_state key"
            })
        );
        // Trailing bytes.
        let mut bad = good.clone();
        bad.push(0);
        assert!(matches!(
            MirrorStateKey::decode(&bad),
            Err(MirrorRecordError::TrailingBytes { extra: 1, .. })
        ));
        // Unsupported value version, unknown state codes, huge compact length, overlong
        // varint.
        assert!(matches!(
            decode_value(MirrorRecordKind::Lme, &[0, 1, 0, 0, 0, 0, 0]),
            Err(MirrorRecordError::UnsupportedVersion { version: 1, .. })
        ));
        assert!(matches!(
            decode_value(MirrorRecordKind::State, &[0, 0, 7, 0, 0, 0, 0]),
            Err(MirrorRecordError::UnknownState { code: 7, .. })
        ));
        let huge = [0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(matches!(
            decode_value(MirrorRecordKind::State, &huge),
            Err(MirrorRecordError::Truncated { .. })
        ));
        let mut overlong = vec![0, 0, 1, 0, 0, 0];
        overlong.extend_from_slice(&[0xff; 11]);
        assert!(matches!(
            decode_value(MirrorRecordKind::State, &overlong),
            Err(MirrorRecordError::VarintOverflow { .. })
        ));
        // A name too long for a STRING cannot be encoded.
        let long = MirrorStateKey::new(MirrorRecordKind::Lme, &"n".repeat(40_000), id, 0);
        assert!(matches!(
            long.encode(),
            Err(MirrorRecordError::NameTooLong { len: 40_000, .. })
        ));
    }

    /// Deterministic pseudo-random bytes (xorshift64*).
    fn garbage(seed: &mut u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *seed ^= *seed >> 12;
                *seed ^= *seed << 25;
                *seed ^= *seed >> 27;
                seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes()[0]
            })
            .collect()
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..200 {
            for _ in 0..20 {
                let bytes = garbage(&mut seed, len);
                let _ = MirrorStateKey::decode(&bytes);
                let _ = decode_value(MirrorRecordKind::Lme, &bytes);
                let _ = decode_value(MirrorRecordKind::State, &bytes);
            }
        }
        // Single-byte corruptions of valid values.
        for value in sample_values().into_iter().step_by(11) {
            let bytes = encode_value(&value);
            for at in 0..bytes.len() {
                let mut bad = bytes.clone();
                bad[at] ^= 0xff;
                let _ = decode_value(value.kind(), &bad);
            }
        }
    }

    /// Values from Java's `String.hashCode`.
    #[test]
    fn java_hash_codes() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("Hello, World!"), 1_498_789_909);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(java_string_hash("Aa"), java_string_hash("BB"));
        // Outside the BMP: two UTF-16 code units.
        assert_eq!(java_string_hash("😀"), 1_772_899);
        assert_eq!(java_string_hash("ünïcødé"), -609_219_977);
        assert_eq!(kafka_abs(java_string_hash("polygenelubricants")), 0);
        assert_eq!(kafka_abs(-5), 5);
        assert_eq!(mirror_partition_for("polygenelubricants", 50), 0);
        assert_eq!(mirror_partition_for("hello", 50), 99_162_322 % 50);
    }

    /// Vectors computed by Java (`String.hashCode`, `Base64.getUrlEncoder()
    /// .withoutPadding()` over the uuid's 16 bytes, Kafka's `Utils.abs`).
    #[test]
    fn key_partition_matches_java() {
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        assert_eq!(kafka_uuid_string(id), "ASNFZ4mrze8AESIzRFVmdw");
        let cases: [(&str, i32, i32, i32); 9] = [
            ("m1", 0, -321_553_274, 24),
            ("m1", 7, -321_553_267, 17),
            ("m1", 123, 224_951_560, 10),
            ("east-to-west", 0, -1_372_090_727, 27),
            ("east-to-west", 7, -1_372_090_720, 20),
            ("east-to-west", 123, -24_226_213, 13),
            ("ünïcødé", 0, 776_817_363, 13),
            ("ünïcødé", 7, 776_817_370, 20),
            ("ünïcødé", 123, -802_821_099, 49),
        ];
        for (mirror, partition, hash, expected) in cases {
            let s = format!("{mirror}:{}:{partition}", kafka_uuid_string(id));
            assert_eq!(java_string_hash(&s), hash, "{s}");
            assert_eq!(partition_for(mirror, id, partition, 50), expected, "{s}");
            for kind in [MirrorRecordKind::Lme, MirrorRecordKind::State] {
                // Both record kinds of a partition live in the same __mirror_state
                // partition.
                let key = MirrorStateKey::new(kind, mirror, id, partition);
                assert_eq!(key.partition_for(50), expected);
            }
        }
        let all_ones = Uuid::from_u128(u128::MAX);
        assert_eq!(kafka_uuid_string(all_ones), "_____________________w");
        assert_eq!(partition_for("m", all_ones, 0, 50), 47);
        assert_eq!(partition_for("m", all_ones, 0, 7), 4);
        for n in 1..60 {
            for p in 0..20 {
                assert!((0..n).contains(&partition_for("east", id, p, n)));
            }
        }
        assert_eq!(partition_for("m1", id, 7, 0), 0);
        assert_eq!(partition_for("m1", id, 7, -3), 0);
    }
}
