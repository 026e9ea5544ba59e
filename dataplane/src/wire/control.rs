//! Control records: transaction markers (COMMIT, ABORT) and Twinlog's MIRROR_PID_RESET.
//!
//! A control batch holds one record whose key is `int16 version, int16 type`. Markers
//! carry `int16 version, int32 coordinator epoch` as value; MIRROR_PID_RESET carries
//! `int16 version, STRING source cluster id` (see shared/spec/DECISIONS.md).

use bytes::Bytes;

use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};
use crate::wire::batch::BatchBuilder;
use crate::wire::records::{decode_records, encode_record, RecordError};

/// Control record types Kafka (and Twinlog) define.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    Abort,
    Commit,
    /// Written when mirroring of a partition stops: clears all producer state.
    MirrorPidReset,
    /// A type this broker does not know (e.g. Kafka's LeaderChange = 2 or KRaft's
    /// snapshot/voter records); stored and passed through, no effect on state.
    Other(i16),
}

impl ControlType {
    pub fn from_i16(v: i16) -> ControlType {
        match v {
            0 => ControlType::Abort,
            1 => ControlType::Commit,
            7 => ControlType::MirrorPidReset,
            other => ControlType::Other(other),
        }
    }

    pub fn as_i16(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
            ControlType::MirrorPidReset => 7,
            ControlType::Other(v) => v,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ControlType::Abort => "ABORT",
            ControlType::Commit => "COMMIT",
            ControlType::MirrorPidReset => "MIRROR_PID_RESET",
            ControlType::Other(_) => "UNKNOWN",
        }
    }
}

/// The decoded control record of a control batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlRecord {
    pub version: i16,
    pub kind: ControlType,
    /// Transaction markers: the coordinator epoch from the value (absent for others).
    pub coordinator_epoch: Option<i32>,
    /// MIRROR_PID_RESET: the source cluster id from the value.
    pub source_cluster_id: Option<String>,
}

/// Why a control batch's record is not a valid control record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlRecordError {
    #[error("control batch is compressed; Kafka never compresses control batches")]
    Compressed,
    #[error("control batch has no record")]
    Empty,
    #[error("control record: {0}")]
    Record(#[from] RecordError),
    #[error("control record key is {len} bytes, expected at least 4")]
    ShortKey { len: usize },
    #[error("{kind} control record value is malformed: {reason}")]
    BadValue {
        kind: &'static str,
        reason: &'static str,
    },
}

impl ControlRecord {
    /// Decodes the first record of an uncompressed control batch's records section.
    pub fn from_batch_records(records: &[u8]) -> Result<ControlRecord, ControlRecordError> {
        let buf = Bytes::copy_from_slice(records);
        let mut recs = decode_records(&buf, 1)?;
        let rec = recs.pop().ok_or(ControlRecordError::Empty)?;
        let key = rec.key.unwrap_or_default();
        if key.len() < 4 {
            return Err(ControlRecordError::ShortKey { len: key.len() });
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        let kind = ControlType::from_i16(i16::from_be_bytes([key[2], key[3]]));
        let value = rec.value.unwrap_or_default();
        let mut out = ControlRecord {
            version,
            kind,
            coordinator_epoch: None,
            source_cluster_id: None,
        };
        match kind {
            ControlType::Abort | ControlType::Commit => {
                if value.len() < 6 {
                    return Err(ControlRecordError::BadValue {
                        kind: kind.name(),
                        reason: "value shorter than version + coordinator epoch",
                    });
                }
                out.coordinator_epoch =
                    Some(i32::from_be_bytes([value[2], value[3], value[4], value[5]]));
            }
            ControlType::MirrorPidReset => {
                if value.len() < 2 {
                    return Err(ControlRecordError::BadValue {
                        kind: kind.name(),
                        reason: "value shorter than its version",
                    });
                }
                out.source_cluster_id = mirror_pid_reset_source(&value[2..]);
            }
            ControlType::Other(_) => {}
        }
        Ok(out)
    }
}

/// The source cluster id of a MIRROR_PID_RESET value after its version, in any of the
/// encodings a KIP-1279 cluster writes (audit B-20): Twinlog's (int16 length and bytes),
/// the flexible v0 of Kafka's first design (compact string, then tagged fields), or the
/// current design's version only (nothing, or just an empty tagged-field count). The id
/// is for verification only: a value none of these fits still counts as a reset, with no
/// id, rather than as corruption.
fn mirror_pid_reset_source(rest: &[u8]) -> Option<String> {
    if rest.is_empty() || rest == [0] {
        return None;
    }
    // int16 length + bytes, exactly filling the value.
    if rest.len() >= 2 {
        let len = i16::from_be_bytes([rest[0], rest[1]]);
        if len >= 0 && rest.len() == 2 + len as usize {
            return Some(String::from_utf8_lossy(&rest[2..]).into_owned());
        }
    }
    // Compact string (unsigned varint of length + 1), then a tagged-field count.
    let mut len: u64 = 0;
    let mut at = 0;
    for shift in (0..35).step_by(7) {
        let b = *rest.get(at)?;
        at += 1;
        len |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
    }
    let n = usize::try_from(len.checked_sub(1)?).ok()?;
    let id = rest.get(at..at.checked_add(n)?)?;
    Some(String::from_utf8_lossy(id).into_owned())
}

fn control_batch(
    kind: ControlType,
    value: &[u8],
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    transactional: bool,
    timestamp_ms: i64,
) -> Bytes {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.as_i16().to_be_bytes());
    let mut records = Vec::new();
    encode_record(&mut records, 0, 0, Some(&key), Some(value));
    BatchBuilder {
        base_offset: Offset(0),
        partition_leader_epoch: LeaderEpoch(0),
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms,
        producer_id,
        producer_epoch,
        ..BatchBuilder::default()
    }
    .control(true)
    .transactional(transactional)
    .build(&records)
}

/// A COMMIT or ABORT marker batch for `producer_id`, as a transaction coordinator writes it.
pub fn build_txn_marker(
    commit: bool,
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Bytes {
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let kind = if commit {
        ControlType::Commit
    } else {
        ControlType::Abort
    };
    control_batch(
        kind,
        &value,
        producer_id,
        producer_epoch,
        true,
        timestamp_ms,
    )
}

/// The MIRROR_PID_RESET batch of DECISIONS.md: control, not transactional, producer id
/// and epoch -1, base sequence -1, uncompressed, one record.
pub fn build_mirror_pid_reset(source_cluster_id: &str, timestamp_ms: i64) -> Bytes {
    let id = source_cluster_id.as_bytes();
    let id_len = i16::try_from(id.len()).unwrap_or(i16::MAX);
    let mut value = Vec::with_capacity(4 + id.len());
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&id_len.to_be_bytes());
    value.extend_from_slice(&id[..id_len as usize]);
    control_batch(
        ControlType::MirrorPidReset,
        &value,
        ProducerId::NONE,
        ProducerEpoch::NONE,
        false,
        timestamp_ms,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::RecordBatch;

    #[test]
    fn markers_decode() {
        let b = RecordBatch::parse_verified(
            build_txn_marker(false, ProducerId(5), ProducerEpoch(2), 9, 77),
            0,
        )
        .expect("valid");
        assert!(b.is_control() && b.is_transactional());
        let c = b.control_record().expect("control");
        assert_eq!(c.kind, ControlType::Abort);
        assert_eq!(c.coordinator_epoch, Some(9));
    }

    #[test]
    fn mirror_pid_reset_decodes() {
        let b = RecordBatch::parse_verified(build_mirror_pid_reset("src-cluster-A", 1), 0)
            .expect("valid");
        assert!(b.is_control() && !b.is_transactional());
        assert_eq!(b.producer_id(), ProducerId::NONE);
        assert_eq!(b.base_sequence(), -1);
        let c = b.control_record().expect("control");
        assert_eq!(c.kind, ControlType::MirrorPidReset);
        assert_eq!(c.source_cluster_id.as_deref(), Some("src-cluster-A"));
    }

    #[test]
    fn upstream_mirror_pid_reset_values_are_read() {
        // Twinlog's own, Kafka's flexible v0 (compact string + tags), version only.
        assert_eq!(
            mirror_pid_reset_source(&[0, 3, b'a', b'b', b'c']).as_deref(),
            Some("abc")
        );
        assert_eq!(
            mirror_pid_reset_source(&[4, b'a', b'b', b'c', 0]).as_deref(),
            Some("abc")
        );
        assert_eq!(mirror_pid_reset_source(&[]), None);
        assert_eq!(mirror_pid_reset_source(&[0]), None);
        // Garbage is a reset with no id, never a panic.
        for junk in [
            &[0xff_u8, 0xff, 0xff][..],
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80],
            &[9, 1],
        ] {
            let _ = mirror_pid_reset_source(junk);
        }
    }
}
