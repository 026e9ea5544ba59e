//! Kafka's `__consumer_offsets` record formats, byte for byte.
//!
//! Keys start with an `int16` version that says what the record is: 0 and 1 are offset
//! commits (`group`, `topic`, `partition`), 2 is group metadata (`group`). Values start
//! with their own `int16` version. All versions read here are Kafka's non-flexible ones:
//! `string` is an `int16` length and UTF-8 bytes (`-1` for a null nullable string),
//! `bytes` an `int32` length, arrays an `int32` count. A tombstone is a key with no value.
//!
//! Decoding never panics: the bytes come from disk (and, through mirroring, from other
//! clusters), so anything malformed is a [`RecordError`].

use bytes::Bytes;

/// Why a `__consumer_offsets` key or value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("{what}: record ends at byte {len}, needed {needed} more")]
    Truncated {
        what: &'static str,
        len: usize,
        needed: usize,
    },
    #[error("{what}: negative length {length}")]
    NegativeLength { what: &'static str, length: i64 },
    #[error("{what}: string is not UTF-8")]
    InvalidUtf8 { what: &'static str },
    #[error("{what}: unsupported version {version}")]
    UnsupportedVersion { what: &'static str, version: i16 },
    #[error("{what}: {extra} trailing bytes")]
    TrailingBytes { what: &'static str, extra: usize },
    #[error("{what}: null where a value is required")]
    UnexpectedNull { what: &'static str },
}

/// Key version of an offset commit written by current Kafka (version 0 is read too).
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Key version of group metadata.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// Group metadata value version written (the newest non-flexible one).
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// The key of an offset commit record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetCommitKey {
    pub group: String,
    pub topic: String,
    pub partition: i32,
}

/// The key of a group metadata record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupMetadataKey {
    pub group: String,
}

/// A decoded `__consumer_offsets` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    OffsetCommit(OffsetCommitKey),
    GroupMetadata(GroupMetadataKey),
    /// A key version this broker does not know (Kafka logs and skips these on load: they
    /// can be left over from an aborted upgrade).
    Unknown {
        version: i16,
    },
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: i64,
    /// `-1` when unknown; only value version 3 stores it.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// Only value version 1 stores it: an explicit expiry from a v1-v4 OffsetCommit
    /// `retention_time_ms`. Encoding writes version 1 when it is set, else version 3.
    pub expire_timestamp_ms: Option<i64>,
}

/// One member inside a group metadata value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadataValue {
    pub member_id: String,
    /// Version 3 only.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Version 1 and up; version 0 records read back with the session timeout here, as
    /// Kafka does.
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A group's membership as stored after each completed rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// Version 2 and up; `-1` when absent.
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberMetadataValue>,
}

/// Java's `Utils.abs(groupId.hashCode()) % partitions`: the `__consumer_offsets`
/// partition (and so the coordinator) of a group.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    assert!(
        partitions > 0,
        "__consumer_offsets needs at least one partition"
    );
    let hash = java_string_hash(group);
    // Kafka's Utils.abs maps Integer.MIN_VALUE to 0 instead of overflowing.
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions
}

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units,
/// wrapping at 32 bits.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

impl OffsetCommitKey {
    /// Encodes with key version 1 (version 0 is identical but for the number).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(OFFSET_COMMIT_KEY_VERSION);
        w.string(&self.group);
        w.string(&self.topic);
        w.i32(self.partition);
        w.0
    }
}

impl GroupMetadataKey {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(GROUP_METADATA_KEY_VERSION);
        w.string(&self.group);
        w.0
    }
}

impl RecordKey {
    pub fn decode(buf: &[u8]) -> Result<Self, RecordError> {
        const WHAT: &str = "__consumer_offsets key";
        let mut r = Reader::new(buf, WHAT);
        let version = r.i16()?;
        let key = match version {
            0 | 1 => RecordKey::OffsetCommit(OffsetCommitKey {
                group: r.string()?,
                topic: r.string()?,
                partition: r.i32()?,
            }),
            2 => RecordKey::GroupMetadata(GroupMetadataKey { group: r.string()? }),
            version => return Ok(RecordKey::Unknown { version }),
        };
        r.finish()?;
        Ok(key)
    }
}

impl OffsetCommitValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self.expire_timestamp_ms {
            Some(expire) => {
                w.i16(1);
                w.i64(self.offset);
                w.string(&self.metadata);
                w.i64(self.commit_timestamp_ms);
                w.i64(expire);
            }
            None => {
                w.i16(3);
                w.i64(self.offset);
                w.i32(self.leader_epoch);
                w.string(&self.metadata);
                w.i64(self.commit_timestamp_ms);
            }
        }
        w.0
    }

    /// Decodes value versions 0 to 3.
    pub fn decode(buf: &[u8]) -> Result<Self, RecordError> {
        const WHAT: &str = "offset commit value";
        let mut r = Reader::new(buf, WHAT);
        let version = r.i16()?;
        if !(0..=3).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                what: WHAT,
                version,
            });
        }
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.string()?;
        let commit_timestamp_ms = r.i64()?;
        let expire_timestamp_ms = if version == 1 { Some(r.i64()?) } else { None };
        r.finish()?;
        Ok(OffsetCommitValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms,
            expire_timestamp_ms,
        })
    }
}

impl GroupMetadataValue {
    /// Encodes with value version 3.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_version(GROUP_METADATA_VALUE_VERSION)
    }

    /// Encodes an older version (fields the version lacks are dropped); for tests and
    /// for writing logs an older broker must read.
    pub fn encode_version(&self, version: i16) -> Vec<u8> {
        assert!(
            (0..=3).contains(&version),
            "group metadata value v{version}"
        );
        let mut w = Writer::default();
        w.i16(version);
        w.string(&self.protocol_type);
        w.i32(self.generation);
        w.nullable_string(self.protocol.as_deref());
        w.nullable_string(self.leader.as_deref());
        if version >= 2 {
            w.i64(self.current_state_timestamp_ms);
        }
        assert!(
            self.members.len() <= i32::MAX as usize,
            "member count fits in i32"
        );
        w.i32(self.members.len() as i32);
        for m in &self.members {
            w.string(&m.member_id);
            if version >= 3 {
                w.nullable_string(m.group_instance_id.as_deref());
            }
            w.string(&m.client_id);
            w.string(&m.client_host);
            if version >= 1 {
                w.i32(m.rebalance_timeout_ms);
            }
            w.i32(m.session_timeout_ms);
            w.bytes(&m.subscription);
            w.bytes(&m.assignment);
        }
        w.0
    }

    /// Decodes value versions 0 to 3.
    pub fn decode(buf: &[u8]) -> Result<Self, RecordError> {
        const WHAT: &str = "group metadata value";
        let mut r = Reader::new(buf, WHAT);
        let version = r.i16()?;
        if !(0..=3).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                what: WHAT,
                version,
            });
        }
        let protocol_type = r.string()?;
        let generation = r.i32()?;
        let protocol = r.nullable_string()?;
        let leader = r.nullable_string()?;
        let current_state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
        let count = r.array_len()?;
        // Each member takes at least 20 bytes, so a huge count cannot make us reserve
        // memory the record does not back.
        let mut members = Vec::with_capacity(count.min(r.remaining() / 20));
        for _ in 0..count {
            let member_id = r.string()?;
            let group_instance_id = if version >= 3 {
                r.nullable_string()?
            } else {
                None
            };
            let client_id = r.string()?;
            let client_host = r.string()?;
            let rebalance_timeout = if version >= 1 { Some(r.i32()?) } else { None };
            let session_timeout_ms = r.i32()?;
            members.push(MemberMetadataValue {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms: rebalance_timeout.unwrap_or(session_timeout_ms),
                session_timeout_ms,
                subscription: r.bytes()?,
                assignment: r.bytes()?,
            });
        }
        r.finish()?;
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp_ms,
            members,
        })
    }
}

/// The topics of a `consumer` protocol subscription (ConsumerProtocolSubscription v0-v3
/// start with a version and the topic array), or `None` when the bytes do not parse.
pub fn consumer_subscription_topics(subscription: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader::new(subscription, "consumer subscription");
    let version = r.i16().ok()?;
    if version < 0 {
        return None;
    }
    let count = r.array_len().ok()?;
    let mut topics = Vec::with_capacity(count.min(r.remaining() / 2));
    for _ in 0..count {
        topics.push(r.string().ok()?);
    }
    Some(topics)
}

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn string(&mut self, s: &str) {
        // Kafka strings on the wire are at most i16::MAX bytes, so nothing that came in
        // through a request can be longer.
        assert!(
            s.len() <= i16::MAX as usize,
            "string longer than 32767 bytes"
        );
        self.i16(s.len() as i16);
        self.0.extend_from_slice(s.as_bytes());
    }
    fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.i16(-1),
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        assert!(b.len() <= i32::MAX as usize, "bytes longer than 2 GiB");
        self.i32(b.len() as i32);
        self.0.extend_from_slice(b);
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.remaining() < n {
            return Err(RecordError::Truncated {
                what: self.what,
                len: self.buf.len(),
                needed: n - self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn nullable_string(&mut self) -> Result<Option<String>, RecordError> {
        let len = self.i16()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| RecordError::NegativeLength {
            what: self.what,
            length: i64::from(len),
        })?;
        let raw = self.take(len)?;
        let s =
            std::str::from_utf8(raw).map_err(|_| RecordError::InvalidUtf8 { what: self.what })?;
        Ok(Some(s.to_owned()))
    }

    fn string(&mut self) -> Result<String, RecordError> {
        self.nullable_string()?
            .ok_or(RecordError::UnexpectedNull { what: self.what })
    }

    fn bytes(&mut self) -> Result<Bytes, RecordError> {
        let len = self.i32()?;
        let len = usize::try_from(len).map_err(|_| RecordError::NegativeLength {
            what: self.what,
            length: i64::from(len),
        })?;
        Ok(Bytes::copy_from_slice(self.take(len)?))
    }

    fn array_len(&mut self) -> Result<usize, RecordError> {
        let len = self.i32()?;
        usize::try_from(len).map_err(|_| RecordError::NegativeLength {
            what: self.what,
            length: i64::from(len),
        })
    }

    fn finish(self) -> Result<(), RecordError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(RecordError::TrailingBytes {
                what: self.what,
                extra,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offset_commit_key_matches_hand_computed_bytes() {
        let key = OffsetCommitKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        let bytes = key.encode();
        assert_eq!(
            bytes,
            [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3],
            "version 1, string g, string t, int32 3"
        );
        assert_eq!(
            RecordKey::decode(&bytes).expect("decodes"),
            RecordKey::OffsetCommit(key.clone())
        );
        // Version 0 keys carry the same fields.
        let mut v0 = bytes.clone();
        v0[1] = 0;
        assert_eq!(
            RecordKey::decode(&v0).expect("v0 decodes"),
            RecordKey::OffsetCommit(key)
        );
    }

    #[test]
    fn group_metadata_key_matches_hand_computed_bytes() {
        let key = GroupMetadataKey { group: "ab".into() };
        assert_eq!(key.encode(), [0, 2, 0, 2, b'a', b'b']);
        assert_eq!(
            RecordKey::decode(&key.encode()).expect("decodes"),
            RecordKey::GroupMetadata(key)
        );
        assert_eq!(
            RecordKey::decode(&[0, 9, 1, 2]).expect("unknown is not an error"),
            RecordKey::Unknown { version: 9 }
        );
    }

    #[test]
    fn offset_commit_value_v3_bytes() {
        let v = OffsetCommitValue {
            offset: 5,
            leader_epoch: 2,
            metadata: "m".into(),
            commit_timestamp_ms: 7,
            expire_timestamp_ms: None,
        };
        let mut want = vec![0, 3];
        want.extend_from_slice(&5i64.to_be_bytes());
        want.extend_from_slice(&2i32.to_be_bytes());
        want.extend_from_slice(&[0, 1, b'm']);
        want.extend_from_slice(&7i64.to_be_bytes());
        assert_eq!(v.encode(), want);
        assert_eq!(OffsetCommitValue::decode(&want).expect("decodes"), v);
    }

    #[test]
    fn partition_for_matches_java() {
        // "foo".hashCode() = 102*31^2 + 111*31 + 111 = 101574; 101574 % 50 = 24.
        assert_eq!(java_string_hash("foo"), 101_574);
        assert_eq!(partition_for("foo", 50), 24);
        assert_eq!(partition_for("", 50), 0);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs gives 0.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // A long name overflows 32 bits; check against arithmetic modulo 2^32.
        let s = "consumer-group-with-a-long-name";
        let mut h: i64 = 0;
        for u in s.encode_utf16() {
            h = (h * 31 + i64::from(u)) & 0xffff_ffff;
        }
        let h = h as u32 as i32;
        assert_eq!(java_string_hash(s), h);
        assert_eq!(partition_for(s, 50), h.unsigned_abs() as i32 % 50);
    }

    #[test]
    fn truncated_and_garbage_values_are_errors() {
        let v = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: Some("range".into()),
            leader: Some("a".into()),
            current_state_timestamp_ms: 9,
            members: vec![],
        }
        .encode();
        for n in 0..v.len() {
            assert!(GroupMetadataValue::decode(&v[..n]).is_err(), "prefix {n}");
        }
        let mut trailing = v.clone();
        trailing.push(0);
        assert!(GroupMetadataValue::decode(&trailing).is_err());
        assert!(OffsetCommitValue::decode(&[0, 4, 0]).is_err());
    }

    fn arb_member(version: i16) -> impl Strategy<Value = MemberMetadataValue> {
        (
            "[a-z0-9-]{0,12}",
            proptest::option::of("[a-z]{1,5}"),
            "[a-z]{0,6}",
            "/[0-9.]{0,15}",
            any::<i32>(),
            any::<i32>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(move |(id, inst, client, host, rt, st, sub, asg)| {
                MemberMetadataValue {
                    member_id: id,
                    group_instance_id: if version >= 3 { inst } else { None },
                    client_id: client,
                    client_host: host,
                    rebalance_timeout_ms: if version >= 1 { rt } else { st },
                    session_timeout_ms: st,
                    subscription: Bytes::from(sub),
                    assignment: Bytes::from(asg),
                }
            })
    }

    fn arb_group_value() -> impl Strategy<Value = (i16, GroupMetadataValue)> {
        (0i16..=3).prop_flat_map(|version| {
            (
                "[a-z]{0,10}",
                any::<i32>(),
                proptest::option::of("[a-z]{0,8}"),
                proptest::option::of("[a-z0-9-]{0,8}"),
                any::<i64>(),
                proptest::collection::vec(arb_member(version), 0..4),
            )
                .prop_map(move |(pt, generation, protocol, leader, ts, members)| {
                    (
                        version,
                        GroupMetadataValue {
                            protocol_type: pt,
                            generation,
                            protocol,
                            leader,
                            current_state_timestamp_ms: if version >= 2 { ts } else { -1 },
                            members,
                        },
                    )
                })
        })
    }

    proptest! {
        #[test]
        fn group_metadata_value_round_trips((version, value) in arb_group_value()) {
            let bytes = value.encode_version(version);
            prop_assert_eq!(GroupMetadataValue::decode(&bytes).expect("decodes"), value);
        }

        #[test]
        fn offset_commit_round_trips(
            group in "[a-z]{0,10}", topic in "[a-z.]{1,10}", partition in any::<i32>(),
            offset in any::<i64>(), epoch in any::<i32>(), metadata in "\\PC{0,20}",
            commit in any::<i64>(), expire in proptest::option::of(any::<i64>()),
        ) {
            let key = OffsetCommitKey { group, topic, partition };
            prop_assert_eq!(
                RecordKey::decode(&key.encode()).expect("decodes"),
                RecordKey::OffsetCommit(key)
            );
            let value = OffsetCommitValue {
                offset,
                // Version 1 (written when an expiry is set) has no leader epoch.
                leader_epoch: if expire.is_some() { -1 } else { epoch },
                metadata,
                commit_timestamp_ms: commit,
                expire_timestamp_ms: expire,
            };
            prop_assert_eq!(OffsetCommitValue::decode(&value.encode()).expect("decodes"), value);
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = RecordKey::decode(&bytes);
            let _ = OffsetCommitValue::decode(&bytes);
            let _ = GroupMetadataValue::decode(&bytes);
            let _ = consumer_subscription_topics(&bytes);
        }
    }
}
