//! What the glommio and the blocking connection share apart from the socket: correlation
//! ids, negotiated versions, the broken flag, the ApiVersions handshake steps, the
//! reused response buffers. No I/O.

use bytes::Bytes;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Request, StrBytes};

pub(crate) use crate::buffers::ReusedBuffers;

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
    pub(crate) recv: ReusedBuffers,
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
            recv: ReusedBuffers::default(),
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
    fn frame_correlation() {
        assert!(check_frame_correlation(5, &[0, 0, 0, 5, 1]).is_ok());
        assert!(matches!(
            check_frame_correlation(5, &[0, 0, 0, 6]),
            Err(ClientError::CorrelationMismatch { .. })
        ));
        assert!(check_frame_correlation(5, &[0, 0]).is_err());
    }
}
