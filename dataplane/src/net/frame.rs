//! Response frames as a list of buffers, so a Fetch response's record sets are sent
//! from the buffers they were read into instead of being copied into the frame first.
//!
//! kafka-protocol encodes into any [`ByteBufMut`] and writes a record set with one
//! `put_slice` of the `Bytes` in the response. [`ChunkedBuf`] is told those `Bytes`
//! beforehand; when `put_slice` is handed exactly one of them (same address, same
//! length), it keeps a reference to it as a chunk of its own and copies nothing. Every
//! other byte (sizes, headers, small record sets) goes into owned chunks as before.

use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

/// Record sets at least this large are sent from their own buffer; a smaller one is
/// cheaper to copy than to send separately.
pub const SHARED_MIN_BYTES: usize = 16 << 10;

/// One encoded response: its chunks, sent back to back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseFrame {
    chunks: Vec<Bytes>,
}

impl ResponseFrame {
    pub fn single(bytes: Bytes) -> ResponseFrame {
        ResponseFrame {
            chunks: vec![bytes],
        }
    }

    pub fn chunks(&self) -> &[Bytes] {
        &self.chunks
    }

    /// Bytes in the frame, size prefix included.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame in one buffer (tests and small frames).
    pub fn to_bytes(&self) -> Bytes {
        match self.chunks.as_slice() {
            [one] => one.clone(),
            chunks => {
                let mut out = BytesMut::with_capacity(self.len());
                for c in chunks {
                    out.extend_from_slice(c);
                }
                out.freeze()
            }
        }
    }
}

/// A piece of a frame being encoded.
#[derive(Debug)]
enum Chunk {
    Owned(BytesMut),
    Shared(Bytes),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Owned(b) => b.len(),
            Chunk::Shared(b) => b.len(),
        }
    }
}

/// An encoding buffer that keeps known large `Bytes` by reference (see the module doc).
#[derive(Debug)]
pub struct ChunkedBuf {
    /// Finished pieces, in order.
    chunks: Vec<Chunk>,
    /// Bytes in `chunks`.
    chunks_len: usize,
    /// The owned piece being written.
    tail: BytesMut,
    /// The record sets to keep by reference, sorted by address.
    shared: Vec<Bytes>,
}

impl ChunkedBuf {
    /// A buffer whose owned part starts with room for `owned_capacity` bytes, keeping
    /// each of `shared` by reference when it is written whole.
    pub fn new(owned_capacity: usize, mut shared: Vec<Bytes>) -> ChunkedBuf {
        shared.sort_by_key(|b| b.as_ptr() as usize);
        ChunkedBuf {
            chunks: Vec::with_capacity(2 * shared.len() + 1),
            chunks_len: 0,
            tail: BytesMut::with_capacity(owned_capacity),
            shared,
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.chunks_len + self.tail.len()
    }

    pub fn finish(mut self) -> ResponseFrame {
        if !self.tail.is_empty() {
            self.chunks.push(Chunk::Owned(self.tail));
        }
        ResponseFrame {
            chunks: self
                .chunks
                .into_iter()
                .map(|c| match c {
                    Chunk::Owned(b) => b.freeze(),
                    Chunk::Shared(b) => b,
                })
                .collect(),
        }
    }

    fn shared_match(&self, src: &[u8]) -> Option<Bytes> {
        if src.len() < SHARED_MIN_BYTES {
            return None;
        }
        let addr = src.as_ptr() as usize;
        let i = self
            .shared
            .binary_search_by_key(&addr, |b| b.as_ptr() as usize)
            .ok()?;
        let b = &self.shared[i];
        (b.len() == src.len()).then(|| b.clone())
    }
}

// SAFETY: the three required methods hand the owned tail's `BytesMut` implementation
// through unchanged, so they keep its guarantees: `chunk_mut` is the tail's spare
// capacity, and `advance_mut(cnt)` is called only by callers that initialised `cnt`
// bytes of it, as the trait requires of them.
#[allow(unsafe_code)]
unsafe impl BufMut for ChunkedBuf {
    fn remaining_mut(&self) -> usize {
        self.tail.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of the tail's `chunk_mut`.
        unsafe { self.tail.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.tail.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.shared_match(src) {
            Some(shared) => {
                if !self.tail.is_empty() {
                    let owned = self.tail.split();
                    self.chunks_len += owned.len();
                    self.chunks.push(Chunk::Owned(owned));
                }
                self.chunks_len += shared.len();
                self.chunks.push(Chunk::Shared(shared));
            }
            None => self.tail.extend_from_slice(src),
        }
    }
}

impl ByteBufMut for ChunkedBuf {
    fn offset(&self) -> usize {
        self.len()
    }

    /// Moves the end of the owned tail (kafka-protocol's gaps, which message encoders do
    /// not use). Seeking back before the tail would need a shared record set to move, so
    /// it is a caller's bug.
    fn seek(&mut self, offset: usize) {
        let start = self.chunks_len;
        assert!(
            offset >= start,
            "seek to {offset} before the owned tail at {start}"
        );
        self.tail.resize(offset - start, 0);
    }

    /// Owned bytes written earlier, in the tail or in an earlier owned piece.
    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        let tail_start = self.chunks_len;
        if r.start >= tail_start {
            return &mut self.tail[r.start - tail_start..r.end - tail_start];
        }
        let mut at = 0;
        for chunk in &mut self.chunks {
            let end = at + chunk.len();
            if r.start < end {
                match chunk {
                    Chunk::Owned(b) if r.end <= end => return &mut b[r.start - at..r.end - at],
                    _ => break,
                }
            }
            at = end;
        }
        panic!("range {r:?} is not within one owned piece of the frame")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_large_bytes_are_kept_by_reference_and_the_rest_copied() {
        let big = Bytes::from(vec![7u8; SHARED_MIN_BYTES]);
        let other_big = Bytes::from(vec![9u8; SHARED_MIN_BYTES + 1]);
        let small = Bytes::from(vec![5u8; 100]);
        let mut buf = ChunkedBuf::new(64, vec![big.clone(), small.clone()]);
        buf.put_i32(0);
        buf.put_slice(&big);
        buf.put_slice(&small); // known but small: copied
        buf.put_slice(&other_big); // large but unknown: copied
        buf.put_slice(&big[1..]); // part of a known one: copied
        buf.put_u8(1);
        buf.range(0..4).copy_from_slice(&[0, 0, 0, 42]);
        let len = buf.len();
        let frame = buf.finish();
        assert_eq!(frame.len(), len);
        assert_eq!(frame.chunks().len(), 3);
        assert_eq!(frame.chunks()[1].as_ptr(), big.as_ptr(), "not copied");
        let mut plain = vec![0, 0, 0, 42];
        plain.extend_from_slice(&big);
        plain.extend_from_slice(&small);
        plain.extend_from_slice(&other_big);
        plain.extend_from_slice(&big[1..]);
        plain.push(1);
        assert_eq!(frame.to_bytes(), Bytes::from(plain));
    }

    #[test]
    fn gaps_work_in_the_owned_tail() {
        let mut buf = ChunkedBuf::new(0, Vec::new());
        buf.put_u8(1);
        let gap = buf.put_gap(4);
        buf.put_u8(2);
        buf.gap_buf(gap).copy_from_slice(&[3, 3, 3, 3]);
        assert_eq!(
            buf.finish().to_bytes(),
            Bytes::from_static(&[1, 3, 3, 3, 3, 2])
        );
    }
}
