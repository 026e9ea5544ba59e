//! Kafka's `__transaction_state` record formats, byte for byte: `TransactionLogKey`
//! (version 0) and `TransactionLogValue` (versions 0 and 1), as `TransactionLog` in
//! Kafka's transaction-coordinator module writes and reads them.
//!
//! Key: `int16 version (0), STRING transactional_id`.
//!
//! Value version 0: `int16 version, int64 producer_id, int16 producer_epoch,
//! int32 txn_timeout_ms, int8 state, ARRAY(nullable) [STRING topic, ARRAY int32
//! partition_ids], int64 last_update_timestamp_ms, int64 start_timestamp_ms`.
//!
//! Value version 1 is the first flexible version (KIP-915): the same fields with compact
//! strings and arrays, an (empty) tagged-field section after every struct, and three
//! top-level tagged fields: `PreviousProducerId` (tag 0), `NextProducerId` (tag 1) and
//! `ClientTransactionVersion` (tag 2). Kafka writes version 1 only with transaction
//! version 2 (KIP-890); the coordinator here implements the older protocol and writes
//! version 0, but reads both. Neither version stores the last producer *epoch*: Kafka
//! reloads it as -1.
//!
//! A tombstone (a key with a null value) removes a transactional id. Nothing here does
//! I/O or panics on input: every decoder returns [`TxnLogError`].

use std::collections::BTreeMap;

use crate::types::{ProducerEpoch, ProducerId, TopicPartition};

/// The internal topic that holds transaction coordinator state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Kafka's `transaction.state.log.num.partitions` default.
pub const TRANSACTION_STATE_PARTITIONS_DEFAULT: i32 = 50;

/// The value version the coordinator writes (transaction protocol versions 0 and 1).
pub const VALUE_VERSION_WRITTEN: i16 = 0;

/// A transaction's state, with the ids Kafka's `TransactionState` stores in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction in progress; the producer id and epoch are assigned.
    Empty,
    /// Partitions were added; data may be written.
    Ongoing,
    /// EndTxn(commit) was logged; COMMIT markers are being written.
    PrepareCommit,
    /// EndTxn(abort) or a timeout was logged; ABORT markers are being written.
    PrepareAbort,
    /// All COMMIT markers were written.
    CompleteCommit,
    /// All ABORT markers were written.
    CompleteAbort,
    /// The transactional id expired and is being removed.
    Dead,
    /// The producer is being fenced before its ongoing transaction is aborted. Kafka
    /// never writes this state to the log; it is decoded for completeness.
    PrepareEpochFence,
}

impl TxnState {
    /// The state byte in the log.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// Kafka's name of the state (ListTransactions, DescribeTransactions, the tools).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state of a Kafka state name (ListTransactions' state filter).
    pub fn from_name(name: &str) -> Option<TxnState> {
        (0..=7)
            .filter_map(TxnState::from_id)
            .find(|s| s.name() == name)
    }

    /// The state for a log state byte, `None` for an unknown one.
    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }
}

/// Why bytes read from `__transaction_state` are not a valid record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnLogError {
    #[error(
        "transaction log record truncated: needed {needed} bytes at offset {at}, {len} in total"
    )]
    Truncated {
        needed: usize,
        at: usize,
        len: usize,
    },
    #[error("unsupported transaction log key version {0}")]
    UnsupportedKeyVersion(i16),
    #[error("unsupported transaction log value version {0}")]
    UnsupportedValueVersion(i16),
    #[error("unknown transaction state byte {0}")]
    UnknownState(i8),
    #[error("invalid length {len} for {field}")]
    InvalidLength { field: &'static str, len: i64 },
    #[error("{field} is not valid UTF-8")]
    InvalidUtf8 { field: &'static str },
    #[error("varint at offset {at} is longer than 5 bytes")]
    VarintTooLong { at: usize },
}

/// A decoded `TransactionLogKey`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogKey {
    pub transactional_id: String,
}

/// A decoded `TransactionLogValue`: a transactional id's metadata as of one state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogValue {
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub txn_timeout_ms: i32,
    pub state: TxnState,
    /// Partitions of the transaction, sorted; empty when the log holds a null array.
    pub partitions: Vec<TopicPartition>,
    pub last_update_timestamp_ms: i64,
    pub start_timestamp_ms: i64,
    /// Version 1 tag 0: the producer id of the last committed transaction (-1 if none).
    pub previous_producer_id: ProducerId,
    /// Version 1 tag 1: the producer id last handed to the client (-1 if none).
    pub next_producer_id: ProducerId,
    /// Version 1 tag 2: the transaction version the client uses (0 before KIP-890).
    pub client_transaction_version: i16,
}

/// Encodes a version 0 key.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

/// Decodes a key; versions other than 0 are refused.
pub fn decode_key(bytes: &[u8]) -> Result<TxnLogKey, TxnLogError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(TxnLogError::UnsupportedKeyVersion(version));
    }
    let transactional_id = r.string("transactional_id")?;
    Ok(TxnLogKey { transactional_id })
}

/// Encodes a value in `version` (0 or 1; anything else is a caller bug).
pub fn encode_value(value: &TxnLogValue, version: i16) -> Vec<u8> {
    assert!(
        version == 0 || version == 1,
        "transaction log value version {version} is not writable"
    );
    let flexible = version >= 1;
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&value.producer_id.0.to_be_bytes());
    out.extend_from_slice(&value.producer_epoch.0.to_be_bytes());
    out.extend_from_slice(&value.txn_timeout_ms.to_be_bytes());
    out.push(value.state.id() as u8);

    // Kafka writes a null partition array for the Empty state and a (possibly empty)
    // array for every other state.
    if value.state == TxnState::Empty {
        if flexible {
            put_uvarint(&mut out, 0);
        } else {
            out.extend_from_slice(&(-1i32).to_be_bytes());
        }
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &value.partitions {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        put_array_len(&mut out, by_topic.len(), flexible);
        for (topic, ids) in by_topic {
            if flexible {
                put_compact_string(&mut out, topic);
            } else {
                put_string(&mut out, topic);
            }
            put_array_len(&mut out, ids.len(), flexible);
            for id in ids {
                out.extend_from_slice(&id.to_be_bytes());
            }
            if flexible {
                put_uvarint(&mut out, 0); // PartitionsSchema tagged fields
            }
        }
    }
    out.extend_from_slice(&value.last_update_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&value.start_timestamp_ms.to_be_bytes());

    if flexible {
        // Tagged fields in ascending tag order, each only when not its default.
        let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
        if value.previous_producer_id != ProducerId::NONE {
            tags.push((0, value.previous_producer_id.0.to_be_bytes().to_vec()));
        }
        if value.next_producer_id != ProducerId::NONE {
            tags.push((1, value.next_producer_id.0.to_be_bytes().to_vec()));
        }
        if value.client_transaction_version != 0 {
            tags.push((2, value.client_transaction_version.to_be_bytes().to_vec()));
        }
        put_uvarint(&mut out, tags.len() as u32);
        for (tag, data) in tags {
            put_uvarint(&mut out, tag);
            put_uvarint(&mut out, data.len() as u32);
            out.extend_from_slice(&data);
        }
    }
    out
}

/// Decodes a value of version 0 or 1. Unknown tagged fields are skipped, as Kafka does.
pub fn decode_value(bytes: &[u8]) -> Result<TxnLogValue, TxnLogError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(TxnLogError::UnsupportedValueVersion(version));
    }
    let flexible = version >= 1;
    let producer_id = ProducerId(r.i64()?);
    let producer_epoch = ProducerEpoch(r.i16()?);
    let txn_timeout_ms = r.i32()?;
    let state_id = r.i8()?;
    let state = TxnState::from_id(state_id).ok_or(TxnLogError::UnknownState(state_id))?;

    let mut partitions = Vec::new();
    if let Some(topics) = r.array_len("transaction_partitions", flexible)? {
        for _ in 0..topics {
            let topic = if flexible {
                r.compact_string("topic")?
            } else {
                r.string("topic")?
            };
            let ids =
                r.array_len("partition_ids", flexible)?
                    .ok_or(TxnLogError::InvalidLength {
                        field: "partition_ids",
                        len: -1,
                    })?;
            for _ in 0..ids {
                partitions.push(TopicPartition::new(topic.clone(), r.i32()?));
            }
            if flexible {
                r.skip_tagged_fields(|_, _| Ok(()))?;
            }
        }
    }
    partitions.sort();
    partitions.dedup();
    let last_update_timestamp_ms = r.i64()?;
    let start_timestamp_ms = r.i64()?;

    let mut value = TxnLogValue {
        producer_id,
        producer_epoch,
        txn_timeout_ms,
        state,
        partitions,
        last_update_timestamp_ms,
        start_timestamp_ms,
        previous_producer_id: ProducerId::NONE,
        next_producer_id: ProducerId::NONE,
        client_transaction_version: 0,
    };
    if flexible {
        r.skip_tagged_fields(|tag, data| {
            let mut t = Reader::new(data);
            match tag {
                0 => value.previous_producer_id = ProducerId(t.i64()?),
                1 => value.next_producer_id = ProducerId(t.i64()?),
                2 => value.client_transaction_version = t.i16()?,
                _ => {}
            }
            Ok(())
        })?;
    }
    Ok(value)
}

/// The `__transaction_state` partition that owns `transactional_id`: Kafka's
/// `Utils.abs(transactionalId.hashCode) % partitionCount`, with Java's `String.hashCode`
/// over UTF-16 code units and `Utils.abs(Integer.MIN_VALUE) == 0`.
pub fn partition_for(transactional_id: &str, partition_count: i32) -> i32 {
    assert!(partition_count > 0, "partition count must be positive");
    let hash = java_string_hash(transactional_id);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partition_count
}

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units,
/// wrapping in 32 bits.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    // Transactional ids and topic names are far below 32 KiB; a longer one is a bug
    // upstream (the API layer validates client input).
    assert!(
        s.len() <= i16::MAX as usize,
        "string of {} bytes does not fit a Kafka STRING",
        s.len()
    );
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_compact_string(out: &mut Vec<u8>, s: &str) {
    put_uvarint(out, s.len() as u32 + 1);
    out.extend_from_slice(s.as_bytes());
}

fn put_array_len(out: &mut Vec<u8>, len: usize, flexible: bool) {
    if flexible {
        put_uvarint(out, len as u32 + 1);
    } else {
        out.extend_from_slice(&(len as i32).to_be_bytes());
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A bounds-checked big-endian reader.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], TxnLogError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.buf.len())
            .ok_or(TxnLogError::Truncated {
                needed: n,
                at: self.at,
                len: self.buf.len(),
            })?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TxnLogError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn i8(&mut self) -> Result<i8, TxnLogError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    fn i16(&mut self) -> Result<i16, TxnLogError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, TxnLogError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, TxnLogError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn uvarint(&mut self) -> Result<u32, TxnLogError> {
        let start = self.at;
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self.array::<1>()?[0];
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(TxnLogError::VarintTooLong { at: start })
    }

    fn utf8(&mut self, n: usize, field: &'static str) -> Result<String, TxnLogError> {
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| TxnLogError::InvalidUtf8 { field })
    }

    fn string(&mut self, field: &'static str) -> Result<String, TxnLogError> {
        let len = self.i16()?;
        let n = usize::try_from(len).map_err(|_| TxnLogError::InvalidLength {
            field,
            len: i64::from(len),
        })?;
        self.utf8(n, field)
    }

    fn compact_string(&mut self, field: &'static str) -> Result<String, TxnLogError> {
        let len = self.uvarint()?;
        if len == 0 {
            return Err(TxnLogError::InvalidLength { field, len: -1 });
        }
        self.utf8(len as usize - 1, field)
    }

    /// An array length; `None` for a null array. A length that cannot fit in the
    /// remaining bytes (every element takes at least one byte) is refused, so a corrupt
    /// length never drives a huge loop.
    fn array_len(
        &mut self,
        field: &'static str,
        flexible: bool,
    ) -> Result<Option<usize>, TxnLogError> {
        let len: i64 = if flexible {
            i64::from(self.uvarint()?) - 1
        } else {
            i64::from(self.i32()?)
        };
        if len < 0 {
            return if len == -1 {
                Ok(None)
            } else {
                Err(TxnLogError::InvalidLength { field, len })
            };
        }
        let remaining = self.buf.len() - self.at;
        if len as u64 > remaining as u64 {
            return Err(TxnLogError::InvalidLength { field, len });
        }
        Ok(Some(len as usize))
    }

    fn skip_tagged_fields(
        &mut self,
        mut on_field: impl FnMut(u32, &[u8]) -> Result<(), TxnLogError>,
    ) -> Result<(), TxnLogError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            let data = self.take(size)?;
            on_field(tag, data)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(state: TxnState) -> TxnLogValue {
        TxnLogValue {
            producer_id: ProducerId(4000),
            producer_epoch: ProducerEpoch(3),
            txn_timeout_ms: 60_000,
            state,
            partitions: if state == TxnState::Empty {
                Vec::new()
            } else {
                vec![
                    TopicPartition::new("a", 0),
                    TopicPartition::new("a", 2),
                    TopicPartition::new("b", 1),
                ]
            },
            last_update_timestamp_ms: 1_700_000_000_123,
            start_timestamp_ms: 1_700_000_000_000,
            previous_producer_id: ProducerId::NONE,
            next_producer_id: ProducerId::NONE,
            client_transaction_version: 0,
        }
    }

    #[test]
    fn key_is_byte_exact_and_round_trips() {
        let key = encode_key("tx-1");
        assert_eq!(key, vec![0, 0, 0, 4, b't', b'x', b'-', b'1']);
        assert_eq!(
            decode_key(&key).expect("decodes"),
            TxnLogKey {
                transactional_id: "tx-1".into()
            }
        );
        assert_eq!(
            decode_key(&[0, 1, 0, 0]),
            Err(TxnLogError::UnsupportedKeyVersion(1))
        );
    }

    #[test]
    fn value_v0_is_byte_exact() {
        let mut v = sample(TxnState::Ongoing);
        v.partitions = vec![TopicPartition::new("t", 7)];
        let bytes = encode_value(&v, 0);
        let mut expected = Vec::new();
        expected.extend_from_slice(&0i16.to_be_bytes());
        expected.extend_from_slice(&4000i64.to_be_bytes());
        expected.extend_from_slice(&3i16.to_be_bytes());
        expected.extend_from_slice(&60_000i32.to_be_bytes());
        expected.push(1);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b't']);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&7i32.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn empty_state_writes_a_null_partition_array() {
        let bytes = encode_value(&sample(TxnState::Empty), 0);
        assert_eq!(&bytes[2 + 8 + 2 + 4 + 1..][..4], &(-1i32).to_be_bytes());
        assert_eq!(
            decode_value(&bytes).expect("decodes"),
            sample(TxnState::Empty)
        );
    }

    #[test]
    fn values_round_trip_in_both_versions_and_all_states() {
        for id in 0..=7 {
            let state = TxnState::from_id(id).expect("known state");
            for version in 0..=1 {
                let mut v = sample(state);
                if version == 1 {
                    v.previous_producer_id = ProducerId(17);
                    v.next_producer_id = ProducerId(4001);
                    v.client_transaction_version = 2;
                }
                let bytes = encode_value(&v, version);
                assert_eq!(decode_value(&bytes).expect("decodes"), v);
            }
        }
    }

    #[test]
    fn value_v1_skips_unknown_tags() {
        let mut bytes = encode_value(&sample(TxnState::Ongoing), 1);
        // Replace the empty top-level tag section with one unknown tag 9 of 2 bytes.
        assert_eq!(bytes.pop(), Some(0));
        bytes.extend_from_slice(&[1, 9, 2, 0xAB, 0xCD]);
        assert_eq!(
            decode_value(&bytes).expect("decodes"),
            sample(TxnState::Ongoing)
        );
    }

    #[test]
    fn decoding_garbage_never_panics() {
        let good = encode_value(&sample(TxnState::PrepareCommit), 0);
        for cut in 0..good.len() {
            assert!(decode_value(&good[..cut]).is_err(), "cut at {cut}");
        }
        let good1 = encode_value(&sample(TxnState::PrepareCommit), 1);
        for cut in 0..good1.len() {
            assert!(decode_value(&good1[..cut]).is_err(), "v1 cut at {cut}");
        }
        let mut bad_state = good.clone();
        bad_state[16] = 42;
        assert_eq!(decode_value(&bad_state), Err(TxnLogError::UnknownState(42)));
        let mut huge = good.clone();
        huge[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_value(&huge).is_err());
        assert_eq!(
            decode_value(&[0, 5]),
            Err(TxnLogError::UnsupportedValueVersion(5))
        );
        for seed in 0u32..2000 {
            let bytes: Vec<u8> = (0..(seed % 64))
                .map(|i| (seed.wrapping_mul(2_654_435_761).wrapping_add(i * 97) >> 7) as u8)
                .collect();
            let _ = decode_value(&bytes);
            let _ = decode_key(&bytes);
        }
    }

    #[test]
    fn partition_for_matches_java() {
        // Values computed with Java's String.hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        // Negative hash: abs before mod.
        let h = java_string_hash("my-transactional-id-0123456789");
        assert_eq!(
            partition_for("my-transactional-id-0123456789", 50),
            h.abs() % 50
        );
        // Non-BMP characters hash as two UTF-16 code units.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }
}
