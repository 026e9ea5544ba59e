//! Record batches as a producer writes them: the v2 format, encoded straight into one
//! buffer per request (no per-record allocation), optionally compressed with the codecs
//! kafka-protocol ships. Also the record payloads, keys and Kafka's default partitioner.
//!
//! kafka-protocol's `RecordBatchEncoder` starts a new batch whenever `offset - sequence`
//! changes and wants a `Record` struct per record; encoding here is direct so that one
//! request costs one pass over the payload bytes (plus the CRC).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::Compressor;

/// v2 batch header size: base offset .. record count.
pub const BATCH_HEADER_BYTES: usize = 61;
/// The record value starts with the intended send time (µs since the Unix epoch, big
/// endian) when it is at least this long; consumers measure end-to-end latency from it.
pub const STAMP_BYTES: usize = 8;

/// Batch header field offsets.
mod at {
    pub const LENGTH: usize = 8;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
}

/// Compression codec of produced batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// The codec id in the batch attributes (bits 0-2).
    fn attribute(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

/// Producer fields of a batch header.
#[derive(Debug, Clone, Copy)]
pub struct BatchProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// -1 for a non-idempotent producer.
    pub base_sequence: i32,
}

impl BatchProducer {
    pub const NONE: BatchProducer = BatchProducer {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// One record to encode.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    /// Written over the first [`STAMP_BYTES`] of `value` when `value` is long enough.
    pub stamp_us: i64,
    pub value: &'a [u8],
}

/// Appends one v2 batch holding `records` (at least one) to `out`.
pub fn encode_batch(
    out: &mut BytesMut,
    codec: Codec,
    producer: BatchProducer,
    records: &[RecordRef<'_>],
) -> Result<(), String> {
    let count = i32::try_from(records.len()).map_err(|_| "too many records".to_string())?;
    if count == 0 {
        return Err("a batch needs at least one record".into());
    }
    let base_ts = records.iter().map(|r| r.timestamp_ms).min().unwrap_or(0);
    let max_ts = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(0);
    let start = out.len();
    out.put_i64(0); // base offset: the broker assigns it
    out.put_i32(0); // batch length, patched below
    out.put_i32(-1); // partition leader epoch: unknown to a producer
    out.put_i8(2); // magic
    out.put_u32(0); // CRC, patched below
    out.put_i16(codec.attribute()); // create time, not transactional, not control
    out.put_i32(count - 1);
    out.put_i64(base_ts);
    out.put_i64(max_ts);
    out.put_i64(producer.producer_id);
    out.put_i16(producer.producer_epoch);
    out.put_i32(producer.base_sequence);
    out.put_i32(count);
    debug_assert_eq!(out.len() - start, BATCH_HEADER_BYTES);
    let write = |buf: &mut BytesMut| {
        write_records(buf, records, base_ts);
        Ok(())
    };
    let compressed = match codec {
        Codec::None => {
            write_records(out, records, base_ts);
            Ok(())
        }
        Codec::Gzip => {
            <kafka_protocol::compression::Gzip as Compressor<BytesMut>>::compress(out, write)
        }
        Codec::Snappy => {
            <kafka_protocol::compression::Snappy as Compressor<BytesMut>>::compress(out, write)
        }
        Codec::Lz4 => {
            <kafka_protocol::compression::Lz4 as Compressor<BytesMut>>::compress(out, write)
        }
        Codec::Zstd => {
            <kafka_protocol::compression::Zstd as Compressor<BytesMut>>::compress(out, write)
        }
    };
    compressed.map_err(|e| format!("{} compression failed: {e}", codec.name()))?;
    let length = i32::try_from(out.len() - start - at::LENGTH - 4)
        .map_err(|_| "batch larger than 2 GiB".to_string())?;
    out[start + at::LENGTH..start + at::LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + at::ATTRIBUTES..]);
    out[start + at::CRC..start + at::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

fn write_records(buf: &mut BytesMut, records: &[RecordRef<'_>], base_ts: i64) {
    for (delta, r) in records.iter().enumerate() {
        let ts_delta = r.timestamp_ms - base_ts;
        let offset_delta = delta as i64;
        let key_len = r.key.map_or(-1, |k| k.len() as i64);
        let value_len = r.value.len() as i64;
        let body = 1
            + varlong_size(ts_delta)
            + varlong_size(offset_delta)
            + varlong_size(key_len)
            + r.key.map_or(0, <[u8]>::len)
            + varlong_size(value_len)
            + r.value.len()
            + 1;
        buf.reserve(body + 5);
        put_varlong(buf, body as i64);
        buf.put_u8(0); // attributes
        put_varlong(buf, ts_delta);
        put_varlong(buf, offset_delta);
        put_varlong(buf, key_len);
        if let Some(k) = r.key {
            buf.put_slice(k);
        }
        put_varlong(buf, value_len);
        if r.value.len() >= STAMP_BYTES {
            buf.put_i64(r.stamp_us);
            buf.put_slice(&r.value[STAMP_BYTES..]);
        } else {
            buf.put_slice(r.value);
        }
        put_varlong(buf, 0); // no headers
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn varlong_size(v: i64) -> usize {
    let raw = zigzag(v);
    (64 - (raw | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varlong(buf: &mut BytesMut, v: i64) {
    let mut raw = zigzag(v);
    while raw >= 0x80 {
        buf.put_u8((raw as u8) | 0x80);
        raw >>= 7;
    }
    buf.put_u8(raw as u8);
}

/// The send-time stamp at the start of a value written by [`encode_batch`], if the value
/// is long enough to carry one.
pub fn read_stamp_us(value: &[u8]) -> Option<i64> {
    value
        .get(..STAMP_BYTES)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(i64::from_be_bytes)
}

/// Record values: windows of a pool of random capital letters, like Kafka's
/// `kafka-producer-perf-test` payloads (compressible, but not trivially).
#[derive(Debug, Clone)]
pub struct Payload {
    pool: Bytes,
    record_size: usize,
}

/// Pool bytes beyond one record, so that consecutive records differ.
const PAYLOAD_POOL_EXTRA: usize = 64 << 10;

impl Payload {
    pub fn new(record_size: usize, seed: u64) -> Payload {
        let mut x = seed | 1;
        let pool: Vec<u8> = (0..record_size + PAYLOAD_POOL_EXTRA)
            .map(|_| {
                // xorshift64*
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                b'A' + (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 59) as u8 % 26
            })
            .collect();
        Payload {
            pool: Bytes::from(pool),
            record_size,
        }
    }

    /// The value of record number `n`.
    pub fn value(&self, n: u64) -> &[u8] {
        let start = (n.wrapping_mul(7919) % PAYLOAD_POOL_EXTRA as u64) as usize;
        &self.pool[start..start + self.record_size]
    }
}

/// Kafka's murmur2 (the Java client's `Utils.murmur2`), used by its default partitioner.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ len as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for `key`.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// Key number `i` of `size` bytes: the decimal number, zero-padded (or cut to its last
/// `size` digits).
pub fn key_bytes(i: u64, size: usize) -> Vec<u8> {
    let digits = format!("{i:0size$}");
    digits.as_bytes()[digits.len() - size..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::wire::{BatchIter, RecordBatch};
    use kafka_protocol::records::RecordBatchDecoder;

    fn sample(payload: &Payload) -> Vec<RecordRef<'_>> {
        (0..5u64)
            .map(|n| RecordRef {
                timestamp_ms: 1_700_000_000_000 + n as i64,
                key: (n % 2 == 0).then_some(&b"key"[..]),
                stamp_us: 1_700_000_000_000_000 + n as i64,
                value: payload.value(n),
            })
            .collect()
    }

    #[test]
    fn batches_decode_with_every_codec() {
        let payload = Payload::new(100, 7);
        let records = sample(&payload);
        for codec in [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy,
            Codec::Lz4,
            Codec::Zstd,
        ] {
            let mut out = BytesMut::new();
            let producer = BatchProducer {
                producer_id: 9,
                producer_epoch: 1,
                base_sequence: 40,
            };
            encode_batch(&mut out, codec, producer, &records).expect("encodes");
            encode_batch(&mut out, codec, BatchProducer::NONE, &records[..1]).expect("encodes");
            let bytes = out.freeze();
            let batches: Vec<RecordBatch> = BatchIter::new(bytes.clone(), 0, true)
                .collect::<Result<_, _>>()
                .unwrap_or_else(|e| panic!("{codec:?}: {e}"));
            assert_eq!(batches.len(), 2);
            let b = &batches[0];
            assert_eq!(b.record_count(), 5);
            assert_eq!(b.last_offset_delta(), 4);
            assert_eq!(b.base_sequence(), 40);
            assert_eq!(b.producer_id().0, 9);
            assert_eq!(b.base_timestamp(), 1_700_000_000_000);
            assert_eq!(b.max_timestamp(), 1_700_000_000_004);
            assert_eq!(b.compression().name(), codec.name());
            assert_eq!(batches[1].base_sequence(), -1);

            let mut buf = bytes;
            let set = RecordBatchDecoder::decode(&mut buf).expect("kafka-protocol decodes");
            assert_eq!(set.records.len(), 5);
            for (n, r) in set.records.iter().enumerate() {
                assert_eq!(r.offset, n as i64);
                assert_eq!(r.timestamp, 1_700_000_000_000 + n as i64);
                let value = r.value.as_ref().expect("value");
                assert_eq!(value.len(), 100);
                assert_eq!(read_stamp_us(value), Some(1_700_000_000_000_000 + n as i64));
                assert_eq!(
                    &value[STAMP_BYTES..],
                    &payload.value(n as u64)[STAMP_BYTES..]
                );
                assert_eq!(r.key.as_deref(), (n % 2 == 0).then_some(&b"key"[..]));
            }
        }
    }

    #[test]
    fn short_values_carry_no_stamp() {
        let mut out = BytesMut::new();
        let r = RecordRef {
            timestamp_ms: 5,
            key: None,
            stamp_us: 99,
            value: b"abc",
        };
        encode_batch(&mut out, Codec::None, BatchProducer::NONE, &[r]).expect("encodes");
        let mut buf = out.freeze();
        let set = RecordBatchDecoder::decode(&mut buf).expect("decodes");
        assert_eq!(set.records[0].value.as_deref(), Some(&b"abc"[..]));
        assert!(encode_batch(&mut BytesMut::new(), Codec::None, BatchProducer::NONE, &[]).is_err());
    }

    #[test]
    fn varlong_sizes_match_encoding() {
        for v in [0i64, 1, -1, 63, 64, -65, 300, 1 << 20, i64::MAX, i64::MIN] {
            let mut b = BytesMut::new();
            put_varlong(&mut b, v);
            assert_eq!(b.len(), varlong_size(v), "{v}");
        }
    }

    #[test]
    fn murmur2_matches_kafka() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        assert_eq!(murmur2(b"abc"), 479_470_107);
        assert!((0..8).contains(&partition_for_key(b"k1", 8)));
    }

    #[test]
    fn keys_and_payloads() {
        assert_eq!(key_bytes(42, 5), b"00042");
        assert_eq!(key_bytes(123_456, 3), b"456");
        let p = Payload::new(16, 1);
        assert_eq!(p.value(0).len(), 16);
        assert_ne!(p.value(0), p.value(1));
        assert!(p.value(3).iter().all(u8::is_ascii_uppercase));
    }
}
