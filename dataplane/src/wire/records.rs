//! Varint helpers and the v2 record format, used only where Twinlog must look inside a
//! batch: the single record of a control batch, `dump-log --records`, and building
//! batches for control markers, tests and benchmarks. The data path never calls this.

use bytes::Bytes;

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record data ends early at byte {at}")]
    Truncated { at: usize },
    #[error("varint too long at byte {at}")]
    VarintOverflow { at: usize },
    #[error("negative or oversized length {length} at byte {at}")]
    BadLength { at: usize, length: i64 },
}

/// Reads a zig-zag varlong starting at `*at`, advancing it.
pub fn read_varlong(buf: &[u8], at: &mut usize) -> Result<i64, RecordError> {
    let start = *at;
    let mut raw: u64 = 0;
    let mut shift = 0u32;
    loop {
        let byte = *buf.get(*at).ok_or(RecordError::Truncated { at: *at })?;
        *at += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return Err(RecordError::VarintOverflow { at: start });
        }
    }
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// Reads a zig-zag varint (an i32 on the wire).
pub fn read_varint(buf: &[u8], at: &mut usize) -> Result<i32, RecordError> {
    let start = *at;
    let v = read_varlong(buf, at)?;
    i32::try_from(v).map_err(|_| RecordError::VarintOverflow { at: start })
}

/// Appends a zig-zag varlong.
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// One decoded record of an uncompressed batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

fn read_bytes_field(buf: &Bytes, at: &mut usize) -> Result<Option<Bytes>, RecordError> {
    let start = *at;
    let len = read_varint(buf, at)?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    if buf.len() - *at < len {
        return Err(RecordError::BadLength {
            at: start,
            length: len as i64,
        });
    }
    let v = buf.slice(*at..*at + len);
    *at += len;
    Ok(Some(v))
}

/// Decodes `count` records from an uncompressed records section.
pub fn decode_records(buf: &Bytes, count: i32) -> Result<Vec<Record>, RecordError> {
    let mut at = 0usize;
    let mut out = Vec::with_capacity(count.clamp(0, 1024) as usize);
    for _ in 0..count.max(0) {
        let len_at = at;
        let length = read_varint(buf, &mut at)?;
        if length < 0 || (buf.len() - at) < length as usize {
            return Err(RecordError::BadLength {
                at: len_at,
                length: i64::from(length),
            });
        }
        let end = at + length as usize;
        let rec = buf.slice(..end);
        let attributes = *rec.get(at).ok_or(RecordError::Truncated { at })? as i8;
        at += 1;
        let timestamp_delta = read_varlong(&rec, &mut at)?;
        let offset_delta = read_varint(&rec, &mut at)?;
        let key = read_bytes_field(&rec, &mut at)?;
        let value = read_bytes_field(&rec, &mut at)?;
        let header_count = read_varint(&rec, &mut at)?;
        let mut headers = Vec::new();
        for _ in 0..header_count.max(0) {
            let name = read_bytes_field(&rec, &mut at)?.unwrap_or_default();
            let hvalue = read_bytes_field(&rec, &mut at)?;
            headers.push((String::from_utf8_lossy(&name).into_owned(), hvalue));
        }
        at = end;
        out.push(Record {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers,
        });
    }
    Ok(out)
}

/// Encodes one record (no headers) in the v2 format.
pub fn encode_record(
    out: &mut Vec<u8>,
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let mut body =
        Vec::with_capacity(16 + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len));
    body.push(0u8);
    write_varlong(&mut body, timestamp_delta);
    write_varlong(&mut body, i64::from(offset_delta));
    for field in [key, value] {
        match field {
            Some(b) => {
                write_varlong(&mut body, b.len() as i64);
                body.extend_from_slice(b);
            }
            None => write_varlong(&mut body, -1),
        }
    }
    write_varlong(&mut body, 0);
    write_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

/// `count` records with keyless values of `value_size` bytes whose content is derived
/// from the offset delta (tests and benches).
pub fn encode_simple_records(count: i32, first_delta: i32, value_size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(count.max(0) as usize * (value_size + 8));
    for i in 0..count {
        let delta = first_delta + i;
        let value: Vec<u8> = (0..value_size)
            .map(|j| (delta as usize + j) as u8)
            .collect();
        encode_record(&mut out, delta, i64::from(i), None, Some(&value));
    }
    out
}

/// Every record of a v2 batch, compressed or not: uncompressed ones are read in place,
/// compressed ones are decompressed with the codec of the batch's attributes (kafka-protocol).
pub fn batch_records(batch: &crate::wire::RecordBatch) -> Result<Vec<Record>, String> {
    use crate::wire::batch::Compression;
    if batch.compression() == Compression::None {
        return decode_records(&batch.records(), batch.record_count()).map_err(|e| e.to_string());
    }
    let mut buf = batch.as_bytes().clone();
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf)
        .map_err(|e| format!("cannot decompress ({}): {e}", batch.compression().name()))?;
    Ok(set
        .records
        .into_iter()
        .map(|r| Record {
            attributes: 0,
            timestamp_delta: r.timestamp - batch.base_timestamp(),
            offset_delta: (r.offset - batch.base_offset().0) as i32,
            key: r.key,
            value: r.value,
            headers: r
                .headers
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varlong_round_trip() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ] {
            let mut buf = Vec::new();
            write_varlong(&mut buf, v);
            let mut at = 0;
            assert_eq!(read_varlong(&buf, &mut at), Ok(v));
            assert_eq!(at, buf.len());
        }
    }

    #[test]
    fn records_round_trip() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 0, 5, Some(b"k"), Some(b"value"));
        encode_record(&mut buf, 1, 6, None, None);
        let recs = decode_records(&Bytes::from(buf), 2).expect("decodes");
        assert_eq!(recs[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(recs[0].value.as_deref(), Some(&b"value"[..]));
        assert_eq!(recs[1].offset_delta, 1);
        assert_eq!(recs[1].value, None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let buf = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(decode_records(&buf, 1).is_err());
        assert!(decode_records(&Bytes::from_static(&[0x10, 0x00]), 1).is_err());
    }
}
