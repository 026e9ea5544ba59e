//! Zero-copy view over Kafka record batches (magic v2).
//!
//! A [`RecordBatch`] is a `Bytes` slice of exactly one batch. Its accessors read the
//! header fields in place; records are never decoded here except the single record of a
//! control batch, whose key says which marker it is. Everything that comes from a socket
//! or a disk goes through [`RecordBatch::parse`] (or [`BatchIter`]), which checks the
//! frame, the magic and the record-count/offset-delta consistency and returns a
//! [`BatchError`] that says what is wrong and where — it never panics.

use bytes::Bytes;

use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};
use crate::wire::control::{ControlRecord, ControlRecordError};

/// Byte offsets of the v2 header fields.
pub mod layout {
    pub const BASE_OFFSET: usize = 0;
    pub const BATCH_LENGTH: usize = 8;
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORD_COUNT: usize = 57;
    /// Size of the v2 header; the records follow.
    pub const HEADER_SIZE: usize = 61;
    /// Base offset and batch length precede what `batch_length` counts.
    pub const LOG_OVERHEAD: usize = 12;
    /// The smallest `batch_length` a v2 batch can carry.
    pub const MIN_BATCH_LENGTH: usize = HEADER_SIZE - LOG_OVERHEAD;
}

/// The only record batch format Twinlog stores.
pub const MAGIC_V2: i8 = 2;

pub(crate) const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_FLAG: i16 = 0x08;
const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;
pub(crate) const DELETE_HORIZON_FLAG: i16 = 0x40;

/// Why bytes are not a valid v2 record batch. `position` is the byte position of the
/// batch within the buffer (or file) that was being read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("truncated batch at position {position}: {available} bytes left, {needed} needed")]
    Truncated {
        position: u64,
        needed: u64,
        available: u64,
    },
    #[error("batch at position {position} (base offset {base_offset}) has length {length}, below the v2 minimum {min}")]
    LengthTooSmall {
        position: u64,
        base_offset: i64,
        length: i32,
        min: usize,
    },
    #[error("batch at position {position} (base offset {base_offset}) has magic {magic}, only v2 is supported")]
    UnsupportedMagic {
        position: u64,
        base_offset: i64,
        magic: i8,
    },
    #[error("batch at position {position} (base offset {base_offset}) fails CRC32C: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        position: u64,
        base_offset: i64,
        stored: u32,
        computed: u32,
    },
    #[error("batch at position {position} (base offset {base_offset}) has record count {record_count} but last offset delta {last_offset_delta}")]
    RecordCountMismatch {
        position: u64,
        base_offset: i64,
        record_count: i32,
        last_offset_delta: i32,
    },
    #[error("batch at position {position} (base offset {base_offset}) has last offset delta {last_offset_delta}, which runs past the largest offset")]
    OffsetOverflow {
        position: u64,
        base_offset: i64,
        last_offset_delta: i32,
    },
    #[error("batch at position {position} (base offset {base_offset}) is a control batch with a bad control record: {source}")]
    BadControlRecord {
        position: u64,
        base_offset: i64,
        #[source]
        source: ControlRecordError,
    },
}

impl BatchError {
    /// Byte position of the offending batch.
    pub fn position(&self) -> u64 {
        match self {
            BatchError::Truncated { position, .. }
            | BatchError::LengthTooSmall { position, .. }
            | BatchError::UnsupportedMagic { position, .. }
            | BatchError::CrcMismatch { position, .. }
            | BatchError::RecordCountMismatch { position, .. }
            | BatchError::OffsetOverflow { position, .. }
            | BatchError::BadControlRecord { position, .. } => *position,
        }
    }
}

/// Compression codec named by the attributes (bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
    /// A codec id Kafka does not define; stored and passed through untouched.
    Unknown(u8),
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
            Compression::Unknown(_) => "unknown",
        }
    }
}

/// One v2 record batch, a zero-copy slice of the buffer it arrived in.
#[derive(Clone, PartialEq, Eq)]
pub struct RecordBatch {
    bytes: Bytes,
}

impl std::fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatch")
            .field("base_offset", &self.base_offset().0)
            .field("last_offset_delta", &self.last_offset_delta())
            .field("size", &self.bytes.len())
            .field("partition_leader_epoch", &self.partition_leader_epoch().0)
            .field("producer_id", &self.producer_id().0)
            .field("attributes", &self.attributes())
            .finish()
    }
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Reads the frame of the batch starting at `buf[0]`: its total size in bytes, after
/// checking that the length field is sane and the whole batch is present.
/// `position` is only used to name the place in errors.
pub fn frame_size(buf: &[u8], position: u64) -> Result<usize, BatchError> {
    if buf.len() < layout::LOG_OVERHEAD {
        return Err(BatchError::Truncated {
            position,
            needed: layout::LOG_OVERHEAD as u64,
            available: buf.len() as u64,
        });
    }
    let base_offset = be_i64(buf, layout::BASE_OFFSET);
    let length = be_i32(buf, layout::BATCH_LENGTH);
    if length < layout::MIN_BATCH_LENGTH as i32 {
        return Err(BatchError::LengthTooSmall {
            position,
            base_offset,
            length,
            min: layout::MIN_BATCH_LENGTH,
        });
    }
    let total = length as usize + layout::LOG_OVERHEAD;
    if buf.len() < total {
        return Err(BatchError::Truncated {
            position,
            needed: total as u64,
            available: buf.len() as u64,
        });
    }
    Ok(total)
}

impl RecordBatch {
    /// Checks the frame, magic, and count/delta consistency of exactly one batch that
    /// occupies all of `bytes`. Does not check the CRC (see [`RecordBatch::verify_crc`]):
    /// readers of trusted local data skip that cost, every writer path calls it.
    pub fn parse(bytes: Bytes, position: u64) -> Result<RecordBatch, BatchError> {
        let total = frame_size(&bytes, position)?;
        if total != bytes.len() {
            // Trailing bytes after one batch: the caller sliced wrongly; report as a
            // length problem at the position of the extra data.
            return Err(BatchError::Truncated {
                position: position + total as u64,
                needed: layout::LOG_OVERHEAD as u64,
                available: (bytes.len() - total) as u64,
            });
        }
        let batch = RecordBatch { bytes };
        batch.check_header(position)?;
        Ok(batch)
    }

    fn check_header(&self, position: u64) -> Result<(), BatchError> {
        let magic = self.magic();
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic {
                position,
                base_offset: self.base_offset().0,
                magic,
            });
        }
        let record_count = self.record_count();
        let last_offset_delta = self.last_offset_delta();
        // Compaction may remove records but keeps the offset range, so fewer records
        // than the range is legal; more is not, nor are negative values.
        if record_count < 0
            || last_offset_delta < 0
            || i64::from(record_count) > i64::from(last_offset_delta) + 1
        {
            return Err(BatchError::RecordCountMismatch {
                position,
                base_offset: self.base_offset().0,
                record_count,
                last_offset_delta,
            });
        }
        // `last_offset` and `next_offset` must be representable: a base offset near
        // i64::MAX from a client or a source cluster would otherwise overflow them.
        let base_offset = self.base_offset().0;
        if base_offset
            .checked_add(i64::from(last_offset_delta) + 1)
            .is_none()
        {
            return Err(BatchError::OffsetOverflow {
                position,
                base_offset,
                last_offset_delta,
            });
        }
        Ok(())
    }

    /// Computes CRC32C over attributes..end and compares with the stored CRC.
    pub fn verify_crc(&self, position: u64) -> Result<(), BatchError> {
        let computed = self.compute_crc();
        let stored = self.crc();
        if computed != stored {
            return Err(BatchError::CrcMismatch {
                position,
                base_offset: self.base_offset().0,
                stored,
                computed,
            });
        }
        Ok(())
    }

    /// Parses and checks the CRC and, for control batches, the control record key.
    pub fn parse_verified(bytes: Bytes, position: u64) -> Result<RecordBatch, BatchError> {
        let batch = Self::parse(bytes, position)?;
        batch.verify_crc(position)?;
        if batch.is_control() {
            batch
                .control_record()
                .map_err(|source| BatchError::BadControlRecord {
                    position,
                    base_offset: batch.base_offset().0,
                    source,
                })?;
        }
        Ok(batch)
    }

    pub fn compute_crc(&self) -> u32 {
        crc32c::crc32c(&self.bytes[layout::ATTRIBUTES..])
    }

    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Total size including base offset and length fields.
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }

    pub fn base_offset(&self) -> Offset {
        Offset(be_i64(&self.bytes, layout::BASE_OFFSET))
    }

    pub fn last_offset(&self) -> Offset {
        Offset(self.base_offset().0 + i64::from(self.last_offset_delta()))
    }

    /// The offset after this batch.
    pub fn next_offset(&self) -> Offset {
        Offset(self.last_offset().0 + 1)
    }

    pub fn batch_length(&self) -> i32 {
        be_i32(&self.bytes, layout::BATCH_LENGTH)
    }

    pub fn partition_leader_epoch(&self) -> LeaderEpoch {
        LeaderEpoch(be_i32(&self.bytes, layout::PARTITION_LEADER_EPOCH))
    }

    pub fn magic(&self) -> i8 {
        self.bytes[layout::MAGIC] as i8
    }

    pub fn crc(&self) -> u32 {
        be_i32(&self.bytes, layout::CRC) as u32
    }

    pub fn attributes(&self) -> i16 {
        be_i16(&self.bytes, layout::ATTRIBUTES)
    }

    pub fn compression(&self) -> Compression {
        match (self.attributes() & COMPRESSION_MASK) as u8 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => Compression::Unknown(other),
        }
    }

    /// True when timestamps are LogAppendTime.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & TIMESTAMP_TYPE_FLAG != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_FLAG != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_FLAG != 0
    }

    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & DELETE_HORIZON_FLAG != 0
    }

    pub fn last_offset_delta(&self) -> i32 {
        be_i32(&self.bytes, layout::LAST_OFFSET_DELTA)
    }

    pub fn base_timestamp(&self) -> i64 {
        be_i64(&self.bytes, layout::BASE_TIMESTAMP)
    }

    pub fn max_timestamp(&self) -> i64 {
        be_i64(&self.bytes, layout::MAX_TIMESTAMP)
    }

    pub fn producer_id(&self) -> ProducerId {
        ProducerId(be_i64(&self.bytes, layout::PRODUCER_ID))
    }

    pub fn producer_epoch(&self) -> ProducerEpoch {
        ProducerEpoch(be_i16(&self.bytes, layout::PRODUCER_EPOCH))
    }

    pub fn base_sequence(&self) -> i32 {
        be_i32(&self.bytes, layout::BASE_SEQUENCE)
    }

    /// Sequence of the last record, wrapping at `i32::MAX` as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base < 0 {
            return -1;
        }
        let last = i64::from(base) + i64::from(self.last_offset_delta());
        if last > i64::from(i32::MAX) {
            (last - i64::from(i32::MAX) - 1) as i32
        } else {
            last as i32
        }
    }

    pub fn record_count(&self) -> i32 {
        be_i32(&self.bytes, layout::RECORD_COUNT)
    }

    pub fn has_producer_id(&self) -> bool {
        self.producer_id().0 >= 0
    }

    /// The records section (compressed or not), without the header.
    pub fn records(&self) -> Bytes {
        self.bytes.slice(layout::HEADER_SIZE..)
    }

    /// For a control batch, the marker its (single) record carries.
    pub fn control_record(&self) -> Result<ControlRecord, ControlRecordError> {
        ControlRecord::from_batch_records(&self.bytes[layout::HEADER_SIZE..])
    }
}

/// Writes `offset` and `epoch` into a batch header in place. Both fields lie outside the
/// CRC range, so the stored CRC stays valid (this is how a leader assigns offsets
/// without re-encoding).
pub fn stamp_offset_and_epoch(header: &mut [u8], base_offset: Offset, epoch: LeaderEpoch) {
    header[layout::BASE_OFFSET..layout::BASE_OFFSET + 8]
        .copy_from_slice(&base_offset.0.to_be_bytes());
    header[layout::PARTITION_LEADER_EPOCH..layout::PARTITION_LEADER_EPOCH + 4]
        .copy_from_slice(&epoch.0.to_be_bytes());
}

/// Marks a batch header as LogAppendTime (Kafka's `setMaxTimestamp(LOG_APPEND_TIME, now)`):
/// the timestamp-type bit and the max timestamp change, so the CRC is recomputed. Only a
/// leader append of a topic with `message.timestamp.type=LogAppendTime` does this.
pub fn stamp_log_append_time(batch: &mut [u8], now_ms: i64) {
    let at = layout::ATTRIBUTES;
    let attributes = i16::from_be_bytes([batch[at], batch[at + 1]]) | TIMESTAMP_TYPE_FLAG;
    batch[at..at + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[layout::MAX_TIMESTAMP..layout::MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&batch[layout::ATTRIBUTES..]);
    batch[layout::CRC..layout::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates the batches of a buffer holding zero or more whole batches (a log segment,
/// a produce request's record set, a fetch response's records).
///
/// `base_position` is added to positions in errors so they name the place in the file.
/// After the first error the iterator stops; [`BatchIter::position`] tells where the
/// valid prefix ends.
#[derive(Debug)]
pub struct BatchIter {
    buf: Bytes,
    at: usize,
    base_position: u64,
    verify_crc: bool,
    failed: bool,
}

impl BatchIter {
    pub fn new(buf: Bytes, base_position: u64, verify_crc: bool) -> Self {
        BatchIter {
            buf,
            at: 0,
            base_position,
            verify_crc,
            failed: false,
        }
    }

    /// Byte position (relative to the buffer) just after the last batch returned.
    pub fn position(&self) -> usize {
        self.at
    }
}

impl Iterator for BatchIter {
    type Item = Result<RecordBatch, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.buf.len() {
            return None;
        }
        let position = self.base_position + self.at as u64;
        let result = frame_size(&self.buf[self.at..], position).and_then(|size| {
            let bytes = self.buf.slice(self.at..self.at + size);
            let batch = if self.verify_crc {
                RecordBatch::parse_verified(bytes, position)
            } else {
                RecordBatch::parse(bytes, position)
            }?;
            Ok((batch, size))
        });
        match result {
            Ok((batch, size)) => {
                self.at += size;
                Some(Ok(batch))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Fields for building a batch header; used by the log for control batches it writes
/// itself and by tests and benches. Records must already be encoded.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    pub base_offset: Offset,
    pub partition_leader_epoch: LeaderEpoch,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            base_offset: Offset(0),
            partition_leader_epoch: LeaderEpoch(0),
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: ProducerId::NONE,
            producer_epoch: ProducerEpoch::NONE,
            base_sequence: -1,
            record_count: 1,
        }
    }
}

impl BatchBuilder {
    pub fn transactional(mut self, yes: bool) -> Self {
        self.set_flag(TRANSACTIONAL_FLAG, yes);
        self
    }

    pub fn control(mut self, yes: bool) -> Self {
        self.set_flag(CONTROL_FLAG, yes);
        self
    }

    fn set_flag(&mut self, flag: i16, yes: bool) {
        if yes {
            self.attributes |= flag;
        } else {
            self.attributes &= !flag;
        }
    }

    /// Encodes header + `records` and computes the CRC.
    pub fn build(&self, records: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(layout::HEADER_SIZE + records.len());
        out.extend_from_slice(&self.base_offset.0.to_be_bytes());
        let length = (layout::HEADER_SIZE - layout::LOG_OVERHEAD + records.len()) as i32;
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.0.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0u8; 4]);
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.0.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.0.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.record_count.to_be_bytes());
        out.extend_from_slice(records);
        let crc = crc32c::crc32c(&out[layout::ATTRIBUTES..]);
        out[layout::CRC..layout::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::records::encode_simple_records;

    fn sample(records: i32) -> Bytes {
        let body = encode_simple_records(records, 0, 16);
        BatchBuilder {
            base_offset: Offset(100),
            partition_leader_epoch: LeaderEpoch(7),
            last_offset_delta: records - 1,
            record_count: records,
            base_timestamp: 1_000,
            max_timestamp: 1_000 + i64::from(records) - 1,
            producer_id: ProducerId(42),
            producer_epoch: ProducerEpoch(3),
            base_sequence: 10,
            ..BatchBuilder::default()
        }
        .build(&body)
    }

    #[test]
    fn header_fields_read_in_place() {
        let b = RecordBatch::parse_verified(sample(5), 0).expect("valid");
        assert_eq!(b.base_offset(), Offset(100));
        assert_eq!(b.last_offset(), Offset(104));
        assert_eq!(b.partition_leader_epoch(), LeaderEpoch(7));
        assert_eq!(b.producer_id(), ProducerId(42));
        assert_eq!(b.producer_epoch(), ProducerEpoch(3));
        assert_eq!(b.base_sequence(), 10);
        assert_eq!(b.last_sequence(), 14);
        assert_eq!(b.record_count(), 5);
        assert_eq!(b.compression(), Compression::None);
        assert!(!b.is_control() && !b.is_transactional());
    }

    #[test]
    fn stamping_offset_and_epoch_keeps_crc_valid() {
        let mut raw = sample(3).to_vec();
        stamp_offset_and_epoch(&mut raw, Offset(9_000), LeaderEpoch(12));
        let b = RecordBatch::parse_verified(Bytes::from(raw), 0).expect("crc still valid");
        assert_eq!(b.base_offset(), Offset(9_000));
        assert_eq!(b.partition_leader_epoch(), LeaderEpoch(12));
    }

    #[test]
    fn errors_name_the_problem_and_place() {
        let good = sample(2);
        let mut bad_crc = good.to_vec();
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 0xff;
        assert!(matches!(
            RecordBatch::parse_verified(Bytes::from(bad_crc), 4096),
            Err(BatchError::CrcMismatch {
                position: 4096,
                base_offset: 100,
                ..
            })
        ));

        let mut bad_magic = good.to_vec();
        bad_magic[layout::MAGIC] = 1;
        assert!(matches!(
            RecordBatch::parse(Bytes::from(bad_magic), 0),
            Err(BatchError::UnsupportedMagic { magic: 1, .. })
        ));

        let short = good.slice(..good.len() - 1);
        assert!(matches!(
            RecordBatch::parse(short, 0),
            Err(BatchError::Truncated { .. })
        ));

        let mut bad_count = good.to_vec();
        bad_count[layout::RECORD_COUNT..layout::RECORD_COUNT + 4]
            .copy_from_slice(&3i32.to_be_bytes());
        assert!(matches!(
            RecordBatch::parse(Bytes::from(bad_count), 0),
            Err(BatchError::RecordCountMismatch {
                record_count: 3,
                last_offset_delta: 1,
                ..
            })
        ));
    }

    #[test]
    fn offset_range_past_i64_max_is_an_error() {
        let mut raw = sample(2).to_vec();
        stamp_offset_and_epoch(&mut raw, Offset(i64::MAX - 1), LeaderEpoch(0));
        assert!(matches!(
            RecordBatch::parse(Bytes::from(raw.clone()), 0),
            Err(BatchError::OffsetOverflow {
                base_offset,
                last_offset_delta: 1,
                ..
            }) if base_offset == i64::MAX - 1
        ));
        stamp_offset_and_epoch(&mut raw, Offset(i64::MAX - 2), LeaderEpoch(0));
        let b = RecordBatch::parse(Bytes::from(raw), 0).expect("last offset fits");
        assert_eq!(b.next_offset(), Offset(i64::MAX));
    }

    #[test]
    fn iterator_stops_at_torn_tail_and_reports_valid_prefix() {
        let mut buf = sample(1).to_vec();
        let first = buf.len();
        buf.extend_from_slice(&sample(2));
        buf.truncate(buf.len() - 3);
        let mut it = BatchIter::new(Bytes::from(buf), 0, true);
        assert!(it.next().expect("one").is_ok());
        let err = it.next().expect("error").expect_err("torn");
        assert_eq!(err.position(), first as u64);
        assert!(it.next().is_none());
        assert_eq!(it.position(), first);
    }

    #[test]
    fn sequence_wraps_like_kafka() {
        let body = encode_simple_records(3, 0, 1);
        let b = BatchBuilder {
            base_sequence: i32::MAX - 1,
            last_offset_delta: 2,
            record_count: 3,
            ..BatchBuilder::default()
        }
        .build(&body);
        let b = RecordBatch::parse(b, 0).expect("valid");
        assert_eq!(b.last_sequence(), 0);
    }
}
