//! Pipelined requests. A client may send several requests before the first answer
//! (Kafka's `max.in.flight.requests.per.connection`, 5 by default). [`FrameReader`]
//! reads whatever the socket holds into one buffer, so the frames that arrived together
//! are seen together without a read each; consecutive Produce frames among them are
//! served as one group ([`crate::api::handle_produce_group`]): every partition's record
//! sets go to its shard in one message and into its log with one write (group
//! commit), and the answers go back in one send, in request order. Any other request
//! is served alone, in its place, as before; Kafka answers a connection's requests in
//! order and so does this.

use bytes::{Buf, Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{ConnectionError, ResponseFrame};

/// The least a read asks the socket for: room for a dozen pipelined 1 KiB produce
/// requests, so one read usually takes all a client has in flight.
const READ_MIN: usize = 16 << 10;

/// Answers of a group at most this large are copied into one buffer and sent with one
/// write; larger ones go chunk by chunk, as a single answer does.
const COALESCE_MAX: usize = 64 << 10;

/// Size-prefixed frames read through one buffer.
#[derive(Debug, Default)]
pub struct FrameReader {
    /// Bytes read and not yet handed out: whole frames, then the start of the next.
    buf: BytesMut,
}

impl FrameReader {
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// The next frame; `None` on a clean EOF between frames. A frame's size prefix above
    /// `max` is an error before its body is read.
    pub async fn next<S>(
        &mut self,
        stream: &mut S,
        max: usize,
    ) -> Result<Option<Bytes>, ConnectionError>
    where
        S: AsyncRead + Unpin,
    {
        loop {
            if let Some(frame) = self.take(max)? {
                return Ok(Some(frame));
            }
            let have = self.buf.len();
            // A frame larger than a read's room is read to its end, straight into the
            // buffer it will be handed out from (no copy after the kernel's).
            let room = match self.frame_size(max)? {
                Some(size) => (4 + size - have).max(READ_MIN),
                None => READ_MIN,
            };
            self.buf.resize(have + room, 0);
            let read = stream.read(&mut self.buf[have..]).await;
            let n = *read.as_ref().unwrap_or(&0);
            self.buf.truncate(have + n);
            if read? == 0 {
                if have == 0 {
                    return Ok(None);
                }
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
        }
    }

    /// The next frame if it is already whole in the buffer and `wanted` accepts it
    /// (request bytes, without the size prefix); reads nothing.
    pub fn next_buffered(&mut self, max: usize, wanted: impl Fn(&[u8]) -> bool) -> Option<Bytes> {
        let size = self.frame_size(max).ok()??;
        if self.buf.len() < 4 + size || !wanted(&self.buf[4..4 + size]) {
            return None;
        }
        self.take(max).ok()?
    }

    /// The size of the frame at the front of the buffer, once its prefix is in.
    fn frame_size(&self, max: usize) -> Result<Option<usize>, ConnectionError> {
        let Some(prefix) = self.buf.get(..4) else {
            return Ok(None);
        };
        let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        if size < 0 || size as usize > max {
            return Err(ConnectionError::FrameTooLarge {
                size: i64::from(size),
                max,
            });
        }
        Ok(Some(size as usize))
    }

    /// Hands out the frame at the front of the buffer if it is whole.
    fn take(&mut self, max: usize) -> Result<Option<Bytes>, ConnectionError> {
        let Some(size) = self.frame_size(max)? else {
            return Ok(None);
        };
        if self.buf.len() < 4 + size {
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(size).freeze()))
    }
}

/// Sends `frames` back to back: small ones copied into one buffer and sent with one
/// write, larger ones chunk by chunk.
pub async fn write_frames<S>(stream: &mut S, frames: &[ResponseFrame]) -> std::io::Result<()>
where
    S: AsyncWrite + Unpin,
{
    let total: usize = frames.iter().map(ResponseFrame::len).sum();
    if frames.len() > 1 && total <= COALESCE_MAX {
        let mut out = Vec::with_capacity(total);
        for chunk in frames.iter().flat_map(ResponseFrame::chunks) {
            out.extend_from_slice(chunk);
        }
        stream.write_all(&out).await?;
    } else {
        for chunk in frames.iter().flat_map(ResponseFrame::chunks) {
            stream.write_all(chunk).await?;
        }
    }
    // TLS holds the last record until flushed; a TCP stream has nothing to flush.
    stream.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(bodies: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    /// A stream that hands out its bytes at most `step` at a time.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.step).min(self.data.len() - self.at);
            let at = self.at;
            buf[..n].copy_from_slice(&self.data[at..at + n]);
            self.at += n;
            std::task::Poll::Ready(Ok(n))
        }
    }

    fn read_all(data: Vec<u8>, step: usize, max: usize) -> Result<Vec<Bytes>, ConnectionError> {
        let mut stream = Trickle { data, at: 0, step };
        let mut reader = FrameReader::new();
        futures_lite::future::block_on(async {
            let mut out = Vec::new();
            while let Some(f) = reader.next(&mut stream, max).await? {
                out.push(f);
            }
            Ok(out)
        })
    }

    #[test]
    fn frames_come_out_whole_however_the_bytes_arrive() {
        let big = vec![7u8; 100_000];
        let bodies: [&[u8]; 4] = [b"first", b"", &big, b"last"];
        for step in [1, 3, 4, 5, 4096, 1 << 20] {
            let got = read_all(framed(&bodies), step, 1 << 20).expect("frames");
            let got: Vec<&[u8]> = got.iter().map(|b| b.as_ref()).collect();
            assert_eq!(got, bodies, "step {step}");
        }
    }

    #[test]
    fn eof_inside_a_frame_is_an_error_and_between_frames_is_not() {
        let mut data = framed(&[b"whole"]);
        assert_eq!(read_all(data.clone(), 2, 100).expect("one frame").len(), 1);
        data.extend_from_slice(&10i32.to_be_bytes());
        data.extend_from_slice(b"part");
        assert!(matches!(
            read_all(data, 2, 100),
            Err(ConnectionError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof
        ));
    }

    #[test]
    fn an_oversized_or_negative_prefix_is_refused_before_its_body() {
        let mut data = 1000i32.to_be_bytes().to_vec();
        data.extend_from_slice(&[0; 10]);
        assert!(matches!(
            read_all(data, 64, 100),
            Err(ConnectionError::FrameTooLarge {
                size: 1000,
                max: 100
            })
        ));
        assert!(matches!(
            read_all((-1i32).to_be_bytes().to_vec(), 64, 100),
            Err(ConnectionError::FrameTooLarge { size: -1, .. })
        ));
    }

    #[test]
    fn next_buffered_takes_only_whole_wanted_frames_and_reads_nothing() {
        let mut data = framed(&[b"a1", b"a2", b"b1", b"a3"]);
        data.extend_from_slice(&5i32.to_be_bytes());
        data.extend_from_slice(b"a4"); // incomplete
        let mut stream = Trickle {
            data,
            at: 0,
            step: 1 << 20,
        };
        let mut reader = FrameReader::new();
        let first =
            futures_lite::future::block_on(reader.next(&mut stream, 100)).expect("first frame");
        assert_eq!(first.as_deref(), Some(&b"a1"[..]));
        let is_a = |f: &[u8]| f.first() == Some(&b'a');
        assert_eq!(reader.next_buffered(100, is_a).as_deref(), Some(&b"a2"[..]));
        assert_eq!(reader.next_buffered(100, is_a), None, "b1 is not wanted");
        assert_eq!(
            reader.next_buffered(100, |_| true).as_deref(),
            Some(&b"b1"[..])
        );
        assert_eq!(reader.next_buffered(100, is_a).as_deref(), Some(&b"a3"[..]));
        assert_eq!(reader.next_buffered(100, is_a), None, "a4 is not whole");
        assert_eq!(reader.next_buffered(1, is_a), None, "too large for max");
    }
}
