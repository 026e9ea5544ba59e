//! What a leader append does to client batches beyond assigning offsets, as Kafka's
//! `LogValidator` does: reject records without a key on a compacted topic (INVALID_RECORD
//! with one error per record, KIP-467), recompress to the topic's `compression.type`, and
//! stamp `message.timestamp.type=LogAppendTime` into the header (the CRC is recomputed).
//!
//! Batches that need none of this are not touched (the common case: no decoding). Mirrored
//! (passthrough) batches never come here.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as WireCompression, Record, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions,
};

use crate::wire::batch::{Compression, RecordBatch};
use crate::wire::records::batch_records;

/// The `compression.type` of a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TopicCompression {
    /// Keep what the producer sent (Kafka's default).
    #[default]
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl TopicCompression {
    pub fn parse(value: &str) -> Option<TopicCompression> {
        Some(match value {
            "producer" => TopicCompression::Producer,
            "uncompressed" | "none" => TopicCompression::Uncompressed,
            "gzip" => TopicCompression::Gzip,
            "snappy" => TopicCompression::Snappy,
            "lz4" => TopicCompression::Lz4,
            "zstd" => TopicCompression::Zstd,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            TopicCompression::Producer => "producer",
            TopicCompression::Uncompressed => "uncompressed",
            TopicCompression::Gzip => "gzip",
            TopicCompression::Snappy => "snappy",
            TopicCompression::Lz4 => "lz4",
            TopicCompression::Zstd => "zstd",
        }
    }

    /// The codec a batch must be stored with, `None` for "as the producer sent it".
    fn target(self) -> Option<Compression> {
        Some(match self {
            TopicCompression::Producer => return None,
            TopicCompression::Uncompressed => Compression::None,
            TopicCompression::Gzip => Compression::Gzip,
            TopicCompression::Snappy => Compression::Snappy,
            TopicCompression::Lz4 => Compression::Lz4,
            TopicCompression::Zstd => Compression::Zstd,
        })
    }
}

fn wire_codec(c: Compression) -> WireCompression {
    match c {
        Compression::None => WireCompression::None,
        Compression::Gzip => WireCompression::Gzip,
        Compression::Snappy => WireCompression::Snappy,
        Compression::Lz4 => WireCompression::Lz4,
        Compression::Zstd => WireCompression::Zstd,
        Compression::Unknown(_) => WireCompression::None,
    }
}

/// One rejected record: its index in the batch and why (Produce v8+ `record_errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// Why a batch cannot be validated or rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidateError {
    #[error("One or more records have been rejected due to {} record errors in total: {}", .0.len(), .0.iter().take(3).map(|e| format!("{} ({})", e.message, e.batch_index)).collect::<Vec<_>>().join("; "))]
    Records(Vec<RecordError>),
    #[error("cannot decode the records of the batch at offset {offset}: {reason}")]
    Undecodable { offset: i64, reason: String },
}

/// The indexes of the records of `batch` without a key.
fn null_key_records(batch: &RecordBatch) -> Result<Vec<i32>, ValidateError> {
    let records = batch_records(batch).map_err(|reason| ValidateError::Undecodable {
        offset: batch.base_offset().0,
        reason,
    })?;
    Ok(records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.key.is_none())
        .map(|(i, _)| i as i32)
        .collect())
}

fn decode(batch: &RecordBatch) -> Result<Vec<Record>, ValidateError> {
    let mut buf = batch.as_bytes().clone();
    RecordBatchDecoder::decode(&mut buf)
        .map(|set| set.records)
        .map_err(|e| ValidateError::Undecodable {
            offset: batch.base_offset().0,
            reason: e.to_string(),
        })
}

/// Kafka's `validateKey`: every record of a batch appended to a compacted topic has a key.
pub fn check_keys_for_compaction(batch: &RecordBatch, tp: &str) -> Result<(), ValidateError> {
    let missing = null_key_records(batch)?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(ValidateError::Records(
        missing
            .into_iter()
            .map(|i| RecordError {
                batch_index: i,
                message: format!(
                    "Compacted topic cannot accept message without key in topic partition {tp}."
                ),
            })
            .collect(),
    ))
}

/// The batch re-encoded with the topic's codec, or `None` when it already has it (or the
/// topic keeps the producer's). Producer id, epoch, sequences, the transactional flag and
/// every record (offset delta, timestamp, key, value, headers) are kept.
pub fn recompress(
    batch: &RecordBatch,
    topic: TopicCompression,
) -> Result<Option<Bytes>, ValidateError> {
    let Some(target) = topic.target() else {
        return Ok(None);
    };
    if batch.compression() == target || batch.is_control() {
        return Ok(None);
    }
    let mut records = decode(batch)?;
    // The encoder starts a new batch wherever `offset - sequence` changes: a batch without
    // a producer id numbers its records' sequences from -1 so that it stays one batch
    // with base sequence -1.
    let base_seq = batch.base_sequence();
    for r in &mut records {
        let delta = (r.offset - batch.base_offset().0) as i32;
        r.sequence = if base_seq < 0 {
            delta - 1
        } else {
            base_seq.wrapping_add(delta)
        };
    }
    let mut out = BytesMut::with_capacity(batch.size_in_bytes());
    let options = RecordEncodeOptions {
        version: 2,
        compression: wire_codec(target),
    };
    RecordBatchEncoder::encode(&mut out, records.iter(), &options).map_err(|e| {
        ValidateError::Undecodable {
            offset: batch.base_offset().0,
            reason: format!("re-encoding with {}: {e}", topic.name()),
        }
    })?;
    Ok(Some(out.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::BatchBuilder;
    use crate::wire::records::encode_record;

    fn batch_with_keys(keys: &[Option<&[u8]>]) -> RecordBatch {
        let mut records = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            encode_record(&mut records, i as i32, i as i64, *k, Some(b"v"));
        }
        let bytes = BatchBuilder {
            last_offset_delta: keys.len() as i32 - 1,
            record_count: keys.len() as i32,
            base_timestamp: 1_000,
            max_timestamp: 1_000 + keys.len() as i64 - 1,
            ..BatchBuilder::default()
        }
        .build(&records);
        RecordBatch::parse(bytes, 0).expect("valid batch")
    }

    #[test]
    fn null_keys_are_named_by_index() {
        let ok = batch_with_keys(&[Some(b"a"), Some(b"b")]);
        assert!(check_keys_for_compaction(&ok, "t-0").is_ok());
        let bad = batch_with_keys(&[Some(b"a"), None, Some(b"c"), None]);
        let Err(ValidateError::Records(errors)) = check_keys_for_compaction(&bad, "t-0") else {
            panic!("null keys accepted");
        };
        let indexes: Vec<i32> = errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(indexes, vec![1, 3]);
        assert!(errors[0]
            .message
            .contains("without key in topic partition t-0"));
    }

    #[test]
    fn recompression_keeps_records_and_producer_fields() {
        let plain = batch_with_keys(&[Some(b"a"), None, Some(b"c")]);
        assert_eq!(recompress(&plain, TopicCompression::Producer), Ok(None));
        assert_eq!(recompress(&plain, TopicCompression::Uncompressed), Ok(None));
        let lz4 = recompress(&plain, TopicCompression::Lz4)
            .expect("encodes")
            .expect("rewritten");
        let again = RecordBatch::parse(lz4, 0).expect("one valid batch");
        assert_eq!(again.compression(), Compression::Lz4);
        assert_eq!(again.record_count(), 3);
        assert_eq!(again.last_offset_delta(), 2);
        assert_eq!(again.base_sequence(), plain.base_sequence());
        assert_eq!(again.producer_id(), plain.producer_id());
        assert_eq!(again.size_in_bytes(), again.as_bytes().len());
        let back = decode(&again).expect("decodes");
        let keys: Vec<Option<&[u8]>> = back.iter().map(|r| r.key.as_deref()).collect();
        assert_eq!(keys, vec![Some(&b"a"[..]), None, Some(&b"c"[..])]);
        let plain_again = recompress(&again, TopicCompression::Uncompressed)
            .expect("encodes")
            .expect("rewritten");
        let plain_again = RecordBatch::parse(plain_again, 0).expect("valid");
        assert_eq!(plain_again.compression(), Compression::None);
        assert_eq!(plain_again.record_count(), 3);
    }
}
