//! What the glommio and the blocking connection share apart from the socket: correlation
//! ids, negotiated versions, the broken flag, the ApiVersions handshake steps, the
//! reused response buffers. No I/O.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Request, StrBytes};

use super::codec::{self, UNSUPPORTED_VERSION};
use super::{
    ApiVersionRanges, ClientError, ConnectionConfig, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
};

/// The ApiVersions version tried first.
pub(crate) const API_VERSIONS_VERSION_MAX: i16 = 3;
/// ApiVersions answers UNSUPPORTED_VERSION at most this often before giving up.
pub(crate) const HANDSHAKE_ATTEMPTS_MAX: usize = 3;
const API_VERSIONS_KEY: i16 = 18;

/// The next step of the ApiVersions handshake.
#[derive(Debug)]
pub(crate) enum HandshakeStep {
    Done(ApiVersionRanges),
    Retry(i16),
}

#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) addr: String,
    pub(crate) client_id: String,
    pub(crate) response_bytes_max: usize,
    pub(crate) ranges: ApiVersionRanges,
    pub(crate) broken: bool,
    /// Set while a request waits for its response. Still set when the next request
    /// starts means the caller dropped the previous one half-way (a timeout or select
    /// around `send`): the response may still arrive, so the connection is broken.
    pub(crate) in_flight: bool,
    /// Buffers response frames are read into, reused from one response to the next.
    pub(crate) recv: RecvBuffers,
    next_correlation_id: i32,
}

impl Session {
    pub(crate) fn new(addr: &str, config: &ConnectionConfig) -> Session {
        Session {
            addr: addr.to_string(),
            client_id: config.client_id.clone(),
            response_bytes_max: config.response_bytes_max,
            ranges: ApiVersionRanges::default(),
            broken: false,
            in_flight: false,
            recv: RecvBuffers::default(),
            next_correlation_id: 0,
        }
    }

    fn check_usable(&mut self) -> Result<(), ClientError> {
        if self.in_flight {
            self.broken = true;
        }
        if self.broken {
            Err(ClientError::Broken {
                addr: self.addr.clone(),
            })
        } else {
            Ok(())
        }
    }

    /// Refuses a version the broker did not announce (once the handshake is done).
    fn check_version(&self, api_key: i16, version: i16) -> Result<(), ClientError> {
        if self.ranges.is_empty() {
            return Ok(());
        }
        match self.ranges.get(api_key) {
            Some((min, max)) if (min..=max).contains(&version) => Ok(()),
            broker_range => Err(ClientError::Unsupported {
                api_key,
                version,
                broker_range,
            }),
        }
    }

    fn next_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1) & i32::MAX;
        id
    }

    /// The frame to write for `req` and the correlation id it carries.
    pub(crate) fn request<R: Request>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<(Bytes, i32), ClientError> {
        self.check_usable()?;
        self.check_version(R::KEY, version)?;
        let corr = self.next_correlation_id();
        Ok((
            codec::encode_request(req, version, corr, &self.client_id)?,
            corr,
        ))
    }

    /// The frame to write for a raw request. The version is not checked against
    /// ApiVersions: brokers need not announce the mirror RPCs.
    pub(crate) fn raw_request(
        &mut self,
        api_key: i16,
        version: i16,
        body: &[u8],
    ) -> Result<(Bytes, i32), ClientError> {
        self.check_usable()?;
        let corr = self.next_correlation_id();
        Ok((
            codec::encode_raw_request(api_key, version, corr, &self.client_id, body),
            corr,
        ))
    }

    pub(crate) fn frame_size(&self, prefix: [u8; 4]) -> Result<usize, ClientError> {
        codec::response_frame_size(prefix, self.response_bytes_max)
    }

    /// Marks the connection broken when `e` leaves it unusable; passes `e` on.
    pub(crate) fn fail(&mut self, e: ClientError) -> ClientError {
        if e.breaks_connection() {
            self.broken = true;
        }
        e
    }
}

/// Frames at least this large are read into a reused buffer. Smaller ones get a buffer
/// of their own, exactly their size: allocating and zeroing a few KiB is cheap, and a
/// caller that keeps a small decoded response (names in a Metadata response are slices
/// of its frame) then does not pin a large buffer.
pub(crate) const RECV_REUSE_BYTES_MIN: usize = 64 << 10;
/// A kept buffer is used for a frame only when it is at most this many times the frame's
/// size, so a frame the caller keeps pins at most that much more memory than its own.
pub(crate) const RECV_OVERSIZE_MAX: usize = 4;
/// A buffer larger than this is not kept after its frame, so an idle connection holds
/// at most `RECV_BUFFERS_MAX` buffers of this size (the mirror's default Fetch response
/// limit is 10 MiB).
pub(crate) const RECV_KEEP_BYTES_MAX: usize = 32 << 20;
/// Buffers kept per connection: two, so that a caller still holding the previous
/// response (appending its record batches) while it reads the next one does not force
/// a fresh allocation.
pub(crate) const RECV_BUFFERS_MAX: usize = 2;

/// The buffers a connection reads large response frames into.
///
/// A fresh zero-filled buffer per response costs a page fault per 4 KiB and a memset of
/// the whole frame before `recv` overwrites it (a tenth of the mirror destination's CPU).
/// Instead the whole buffer behind each frame is kept here; once the caller has dropped
/// every `Bytes` of that frame it is taken back as it is, bytes initialised, length
/// intact, so the next frame is read into warm memory without zeroing it again. A buffer
/// whose frame is still referenced is never written: uniqueness is checked first.
#[derive(Debug, Default)]
pub(crate) struct RecvBuffers {
    kept: VecDeque<Bytes>,
}

impl RecvBuffers {
    /// A buffer of at least `size` initialised bytes to read a frame of `size` bytes
    /// into (its first `size` bytes): a kept one no longer referenced elsewhere and not
    /// too large for the frame, or a new one.
    pub(crate) fn take(&mut self, size: usize) -> BytesMut {
        if size >= RECV_REUSE_BYTES_MIN {
            let fits = |b: &Bytes| b.len() / RECV_OVERSIZE_MAX <= size && b.is_unique();
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
        if size >= RECV_REUSE_BYTES_MIN && buf.len() <= RECV_KEEP_BYTES_MAX {
            if self.kept.len() >= RECV_BUFFERS_MAX {
                self.kept.pop_front();
            }
            self.kept.push_back(buf);
        }
        frame
    }
}

/// Checks the correlation id at the start of a response frame (the frame size check
/// guarantees four bytes).
pub(crate) fn check_frame_correlation(expected: i32, frame: &[u8]) -> Result<(), ClientError> {
    let got = frame
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_be_bytes)
        .ok_or_else(|| ClientError::Protocol {
            api_key: -1,
            message: "response frame without a correlation id".into(),
        })?;
    codec::check_correlation(expected, got)
}

pub(crate) fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str(CLIENT_SOFTWARE_NAME))
        .with_client_software_version(StrBytes::from_static_str(CLIENT_SOFTWARE_VERSION))
}

/// Reads an ApiVersions answer to a request of `version`: the broker's ranges, or the
/// lower version to try next after UNSUPPORTED_VERSION (the highest the broker announced
/// for ApiVersions itself, v0 when it announced nothing usable).
pub(crate) fn handshake_step(
    resp: &ApiVersionsResponse,
    version: i16,
) -> Result<HandshakeStep, ClientError> {
    match resp.error_code {
        0 => Ok(HandshakeStep::Done(ApiVersionRanges::from_ranges(
            resp.api_keys
                .iter()
                .map(|k| (k.api_key, k.min_version, k.max_version)),
        ))),
        UNSUPPORTED_VERSION if version > 0 => {
            let next = resp
                .api_keys
                .iter()
                .find(|k| k.api_key == API_VERSIONS_KEY)
                .map(|k| k.max_version.min(version - 1))
                .filter(|v| *v >= 0)
                .unwrap_or(0);
            Ok(HandshakeStep::Retry(next))
        }
        error_code => Err(ClientError::ErrorCode {
            api_key: API_VERSIONS_KEY,
            error_code,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::MetadataRequest;

    fn range(key: i16, min: i16, max: i16) -> ApiVersion {
        ApiVersion::default()
            .with_api_key(key)
            .with_min_version(min)
            .with_max_version(max)
    }

    #[test]
    fn handshake_steps() {
        let ok = ApiVersionsResponse::default().with_api_keys(vec![range(3, 0, 12)]);
        match handshake_step(&ok, 3) {
            Ok(HandshakeStep::Done(r)) => assert_eq!(r.get(3), Some((0, 12))),
            other => panic!("{other:?}"),
        }
        let unsupported = ApiVersionsResponse::default()
            .with_error_code(UNSUPPORTED_VERSION)
            .with_api_keys(vec![range(18, 0, 2)]);
        assert!(matches!(
            handshake_step(&unsupported, 3),
            Ok(HandshakeStep::Retry(2))
        ));
        let bare = ApiVersionsResponse::default().with_error_code(UNSUPPORTED_VERSION);
        assert!(matches!(
            handshake_step(&bare, 3),
            Ok(HandshakeStep::Retry(0))
        ));
        assert!(matches!(
            handshake_step(&bare, 0),
            Err(ClientError::ErrorCode {
                api_key: 18,
                error_code: UNSUPPORTED_VERSION
            })
        ));
    }

    #[test]
    fn versions_outside_the_broker_range_are_refused_and_broken_sticks() {
        let mut s = Session::new("h:1", &ConnectionConfig::default());
        // Before the handshake anything goes.
        assert!(s.request(&MetadataRequest::default(), 12).is_ok());
        s.ranges = ApiVersionRanges::from_ranges([(3, 0, 9)]);
        assert!(matches!(
            s.request(&MetadataRequest::default(), 12),
            Err(ClientError::Unsupported {
                api_key: 3,
                version: 12,
                broker_range: Some((0, 9))
            })
        ));
        let (_, c1) = s.request(&MetadataRequest::default(), 9).expect("ok");
        let (_, c2) = s.raw_request(100, 0, b"").expect("ok");
        assert_eq!(c2, c1 + 1);
        // A version error does not break the connection; a correlation error does.
        assert!(!s.broken);
        let e = s.fail(ClientError::CorrelationMismatch {
            expected: 1,
            got: 2,
        });
        assert!(matches!(e, ClientError::CorrelationMismatch { .. }));
        assert!(matches!(
            s.request(&MetadataRequest::default(), 9),
            Err(ClientError::Broken { .. })
        ));
    }

    #[test]
    fn correlation_ids_stay_non_negative() {
        let mut s = Session::new("h:1", &ConnectionConfig::default());
        s.next_correlation_id = i32::MAX;
        assert_eq!(s.next_correlation_id(), i32::MAX);
        assert_eq!(s.next_correlation_id(), 0);
    }

    #[test]
    fn recv_buffers_come_back_only_once_their_frames_are_dropped() {
        let mut r = RecvBuffers::default();
        let size = 2 * RECV_REUSE_BYTES_MIN;
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
        let mut r = RecvBuffers::default();
        let small = r.take(100);
        assert_eq!(small.len(), 100);
        assert_eq!(r.frame(small, 100).len(), 100);
        assert!(r.kept.is_empty(), "small frames get their own buffer");

        let big_size = (RECV_OVERSIZE_MAX + 1) * RECV_REUSE_BYTES_MIN;
        let big = r.take(big_size);
        let big_at = big.as_ptr();
        drop(r.frame(big, big_size));
        let buf = r.take(RECV_REUSE_BYTES_MIN);
        assert_ne!(
            buf.as_ptr(),
            big_at,
            "a buffer over 4x the frame is not used"
        );
        assert_eq!(buf.len(), RECV_REUSE_BYTES_MIN);
        drop(r.frame(buf, RECV_REUSE_BYTES_MIN));

        let held: Vec<Bytes> = (0..3)
            .map(|_| {
                let buf = r.take(RECV_REUSE_BYTES_MIN);
                r.frame(buf, RECV_REUSE_BYTES_MIN)
            })
            .collect();
        assert_eq!(r.kept.len(), RECV_BUFFERS_MAX);
        drop(held);

        let huge = r.take(RECV_KEEP_BYTES_MAX + 1);
        let huge_at = huge.as_ptr();
        let frame = r.frame(huge, RECV_KEEP_BYTES_MAX + 1);
        assert!(r.kept.iter().all(|b| b.as_ptr() != huge_at));
        drop(frame);
    }

    #[test]
    fn frame_correlation() {
        assert!(check_frame_correlation(5, &[0, 0, 0, 5, 1]).is_ok());
        assert!(matches!(
            check_frame_correlation(5, &[0, 0, 0, 6]),
            Err(ClientError::CorrelationMismatch { .. })
        ));
        assert!(check_frame_correlation(5, &[0, 0]).is_err());
    }
}
