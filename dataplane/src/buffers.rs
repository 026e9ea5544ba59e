//! Large buffers reused once every `Bytes` sliced from them is dropped: the frames a
//! client connection receives (`client::session`) and the windows a segment read fills
//! (`log::fs`). Reusing them saves a page fault per 4 KiB and a memset of the whole
//! buffer each time, without `unsafe`: a kept buffer is only written again after
//! `Bytes::is_unique` says nothing else refers to it.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Frames at least this large are read into a reused buffer. Smaller ones get a buffer
/// of their own, exactly their size: allocating and zeroing a few KiB is cheap, and a
/// caller that keeps a small decoded response (names in a Metadata response are slices
/// of its frame) then does not pin a large buffer.
pub(crate) const REUSE_BYTES_MIN: usize = 64 << 10;
/// A kept buffer is used for a frame only when it is at most this many times the frame's
/// size, so a frame the caller keeps pins at most that much more memory than its own.
pub(crate) const OVERSIZE_MAX: usize = 4;
/// A buffer larger than this is not kept after its frame, so an idle connection holds
/// at most `RECV_BUFFERS_MAX` buffers of this size (the mirror's default Fetch response
/// limit is 10 MiB).
pub(crate) const KEEP_BYTES_MAX: usize = 32 << 20;
/// Buffers kept per connection: two, so that a caller still holding the previous
/// response (appending its record batches) while it reads the next one does not force
/// a fresh allocation.
pub(crate) const RECV_BUFFERS_MAX: usize = 2;

/// The buffers a connection reads large response frames into, or a shard its segment
/// read windows (a "frame" below is either).
///
/// A fresh zero-filled buffer per response costs a page fault per 4 KiB and a memset of
/// the whole frame before `recv` overwrites it (a tenth of the mirror destination's CPU).
/// Instead the whole buffer behind each frame is kept here; once the caller has dropped
/// every `Bytes` of that frame it is taken back as it is, bytes initialised, length
/// intact, so the next frame is read into warm memory without zeroing it again. A buffer
/// whose frame is still referenced is never written: uniqueness is checked first.
#[derive(Debug)]
pub(crate) struct ReusedBuffers {
    pub(crate) kept: VecDeque<Bytes>,
    /// Buffers kept at most.
    max: usize,
}

impl Default for ReusedBuffers {
    fn default() -> Self {
        ReusedBuffers::keeping(RECV_BUFFERS_MAX)
    }
}

impl ReusedBuffers {
    /// A pool that keeps up to `max` buffers.
    pub(crate) fn keeping(max: usize) -> ReusedBuffers {
        ReusedBuffers {
            kept: VecDeque::new(),
            max: max.max(1),
        }
    }

    /// A buffer of at least `size` initialised bytes to read a frame of `size` bytes
    /// into (its first `size` bytes): a kept one no longer referenced elsewhere and not
    /// too large for the frame, or a new one.
    pub(crate) fn take(&mut self, size: usize) -> BytesMut {
        if size >= REUSE_BYTES_MIN {
            let fits = |b: &Bytes| b.len() / OVERSIZE_MAX <= size && b.is_unique();
            if let Some(at) = self.kept.iter().position(fits) {
                if let Some(Ok(mut buf)) = self.kept.remove(at).map(Bytes::try_into_mut) {
                    if buf.len() < size {
                        // Only the growth is zeroed; a realloc may keep the allocation.
                        buf.resize(size, 0);
                    }
                    return buf;
                }
            }
        }
        BytesMut::zeroed(size)
    }

    /// The frame read into the first `size` bytes of `buf` (from [`take`](Self::take));
    /// `buf` is kept for a later frame when it is worth keeping.
    pub(crate) fn frame(&mut self, buf: BytesMut, size: usize) -> Bytes {
        let buf = buf.freeze();
        let frame = buf.slice(..size);
        if size >= REUSE_BYTES_MIN && buf.len() <= KEEP_BYTES_MAX {
            if self.kept.len() >= self.max {
                self.kept.pop_front();
            }
            self.kept.push_back(buf);
        }
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recv_buffers_come_back_only_once_their_frames_are_dropped() {
        let mut r = ReusedBuffers::default();
        let size = 2 * REUSE_BYTES_MIN;
        let mut buf = r.take(size);
        assert_eq!(buf.len(), size);
        buf.fill(1);
        let first_at = buf.as_ptr();
        let first = r.frame(buf, size);
        // The first frame is still held: the next one goes elsewhere, the first stays.
        let mut buf = r.take(size);
        assert_ne!(buf.as_ptr(), first_at);
        buf.fill(2);
        let second = r.frame(buf, size);
        assert!(first.iter().all(|b| *b == 1));
        assert!(second.iter().all(|b| *b == 2));
        drop(first);
        // Dropped: its buffer comes back as it was left, not zeroed again, and serves a
        // smaller frame too.
        let buf = r.take(size - 1);
        assert_eq!(buf.as_ptr(), first_at);
        assert_eq!(buf.len(), size);
        assert!(buf.iter().all(|b| *b == 1));
        let third = r.frame(buf, size - 1);
        assert_eq!(third.len(), size - 1);
        assert_eq!(r.kept.len(), 2);
        drop((second, third));
        // A larger frame grows a kept buffer; the growth is zeroed.
        let buf = r.take(2 * size);
        assert_eq!(buf.len(), 2 * size);
        assert!(buf[size..].iter().all(|b| *b == 0));
    }

    #[test]
    fn small_oversized_huge_and_surplus_buffers_are_not_reused() {
        let mut r = ReusedBuffers::default();
        let small = r.take(100);
        assert_eq!(small.len(), 100);
        assert_eq!(r.frame(small, 100).len(), 100);
        assert!(r.kept.is_empty(), "small frames get their own buffer");

        let big_size = (OVERSIZE_MAX + 1) * REUSE_BYTES_MIN;
        let big = r.take(big_size);
        let big_at = big.as_ptr();
        drop(r.frame(big, big_size));
        let buf = r.take(REUSE_BYTES_MIN);
        assert_ne!(
            buf.as_ptr(),
            big_at,
            "a buffer over 4x the frame is not used"
        );
        assert_eq!(buf.len(), REUSE_BYTES_MIN);
        drop(r.frame(buf, REUSE_BYTES_MIN));

        let held: Vec<Bytes> = (0..3)
            .map(|_| {
                let buf = r.take(REUSE_BYTES_MIN);
                r.frame(buf, REUSE_BYTES_MIN)
            })
            .collect();
        assert_eq!(r.kept.len(), RECV_BUFFERS_MAX);
        drop(held);

        let huge = r.take(KEEP_BYTES_MAX + 1);
        let huge_at = huge.as_ptr();
        let frame = r.frame(huge, KEEP_BYTES_MAX + 1);
        assert!(r.kept.iter().all(|b| b.as_ptr() != huge_at));
        drop(frame);
    }
}
