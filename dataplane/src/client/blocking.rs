//! The same connection over `std::net`, for threads that may block: the CLI, tests and
//! tools. Never use it on a shard.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::protocol::Request;

use super::session::{
    self, HandshakeStep, Session, API_VERSIONS_VERSION_MAX, HANDSHAKE_ATTEMPTS_MAX,
};
use super::{codec, io_error, split_host_port, ApiVersionRanges, ClientError, ConnectionConfig};

/// std refuses zero timeouts; the smallest one used instead.
const TIMEOUT_MIN: Duration = Duration::from_millis(1);

/// A blocking connection to one broker; the API of
/// [`KafkaConnection`](super::KafkaConnection) without `async`.
#[derive(Debug)]
pub struct BlockingConnection {
    stream: TcpStream,
    session: Session,
}

impl BlockingConnection {
    /// Connects to `addr` (`host:port`) within `timeout` and negotiates API versions,
    /// with the default request timeout and response size limit.
    pub fn connect(addr: &str, client_id: &str, timeout: Duration) -> Result<Self, ClientError> {
        Self::connect_with(addr, &ConnectionConfig::new(client_id, timeout))
    }

    /// Connects to `addr` and negotiates API versions (see
    /// [`KafkaConnection::connect_with`](super::KafkaConnection::connect_with)).
    pub fn connect_with(addr: &str, config: &ConnectionConfig) -> Result<Self, ClientError> {
        let (host, port) = split_host_port(addr)?;
        let addrs: Vec<_> = (host, port)
            .to_socket_addrs()
            .map_err(|e| io_error(addr, "resolving the host name", e))?
            .collect();
        let connect_timeout = config.connect_timeout.max(TIMEOUT_MIN);
        let request_timeout = config.request_timeout.max(TIMEOUT_MIN);
        let mut last_error = None;
        let mut stream = None;
        for sa in &addrs {
            match TcpStream::connect_timeout(sa, connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last_error = Some(io_error(addr, "connecting", e)),
            }
        }
        let stream = match (stream, last_error) {
            (Some(s), _) => s,
            (None, Some(e)) => return Err(e),
            (None, None) => {
                return Err(ClientError::InvalidAddress {
                    addr: addr.to_string(),
                    message: "no address to connect to".into(),
                })
            }
        };
        let setup = |r: std::io::Result<()>| r.map_err(|e| io_error(addr, "connecting", e));
        setup(stream.set_nodelay(true))?;
        setup(stream.set_read_timeout(Some(request_timeout)))?;
        setup(stream.set_write_timeout(Some(request_timeout)))?;
        let mut conn = BlockingConnection {
            stream,
            session: Session::new(addr, config),
        };
        conn.handshake()?;
        Ok(conn)
    }

    fn handshake(&mut self) -> Result<(), ClientError> {
        let req = session::api_versions_request();
        let mut version = API_VERSIONS_VERSION_MAX;
        for _ in 0..HANDSHAKE_ATTEMPTS_MAX {
            let (frame, corr) = self.session.request(&req, version)?;
            let resp = self.roundtrip(&frame, corr)?;
            let (_, resp) = codec::decode_api_versions_response(resp, version)?;
            match session::handshake_step(&resp, version)? {
                HandshakeStep::Done(ranges) => {
                    self.session.ranges = ranges;
                    return Ok(());
                }
                HandshakeStep::Retry(v) => version = v,
            }
        }
        Err(ClientError::ErrorCode {
            api_key: 18,
            error_code: codec::UNSUPPORTED_VERSION,
        })
    }

    /// `host:port` this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.session.addr
    }

    /// True after an error that left the connection unusable; open a new one.
    pub fn is_broken(&self) -> bool {
        self.session.broken
    }

    /// Every API range the broker announced.
    pub fn api_versions(&self) -> &ApiVersionRanges {
        &self.session.ranges
    }

    /// `(min, max)` the broker serves for `api_key`; `None` when it does not serve it.
    pub fn api_range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.session.ranges.get(api_key)
    }

    /// The highest version of `api_key` in both the broker's range and ours.
    pub fn pick_version(&self, api_key: i16, ours_min: i16, ours_max: i16) -> Option<i16> {
        self.session.ranges.pick(api_key, ours_min, ours_max)
    }

    /// Changes the limit on each read and write.
    pub fn set_request_timeout(&mut self, timeout: Duration) -> Result<(), ClientError> {
        let timeout = Some(timeout.max(TIMEOUT_MIN));
        let addr = &self.session.addr;
        let set = |r: std::io::Result<()>| r.map_err(|e| io_error(addr, "configuring", e));
        set(self.stream.set_read_timeout(timeout))?;
        set(self.stream.set_write_timeout(timeout))
    }

    /// Changes the largest response frame accepted.
    pub fn set_response_bytes_max(&mut self, response_bytes_max: usize) {
        self.session.response_bytes_max = response_bytes_max;
    }

    /// Sends `req` at `version` and waits for its response.
    pub fn send<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response, ClientError> {
        let (frame, corr) = self.session.request(req, version)?;
        let resp = self.roundtrip(&frame, corr)?;
        let (_, resp) = codec::decode_response::<R>(resp, version)?;
        Ok(resp)
    }

    /// Sends a request kafka-protocol does not know (the mirror RPCs) and returns the
    /// response body.
    pub fn send_raw(
        &mut self,
        api_key: i16,
        version: i16,
        body: &[u8],
    ) -> Result<Bytes, ClientError> {
        let (frame, corr) = self.session.raw_request(api_key, version, body)?;
        let resp = self.roundtrip(&frame, corr)?;
        let (_, body) = codec::decode_raw_response(resp)?;
        Ok(body)
    }

    fn roundtrip(&mut self, frame: &[u8], corr: i32) -> Result<Bytes, ClientError> {
        self.session.in_flight = true;
        let result = self.roundtrip_inner(frame, corr);
        self.session.in_flight = false;
        result.map_err(|e| self.session.fail(e))
    }

    fn roundtrip_inner(&mut self, frame: &[u8], corr: i32) -> Result<Bytes, ClientError> {
        let addr = self.session.addr.as_str();
        let write = |e| io_error(addr, "writing a request", e);
        self.stream.write_all(frame).map_err(write)?;
        self.stream.flush().map_err(write)?;
        let read = |e| io_error(addr, "reading a response", e);
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).map_err(read)?;
        let size = self.session.frame_size(prefix)?;
        let mut buf = self.session.recv.take(size);
        self.stream.read_exact(&mut buf[..size]).map_err(read)?;
        let frame = self.session.recv.frame(buf, size);
        session::check_frame_correlation(corr, &frame)?;
        Ok(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::conn::tests::{fake_broker, Misbehave};
    use kafka_protocol::messages::MetadataRequest;

    fn config() -> ConnectionConfig {
        ConnectionConfig {
            client_id: "test".into(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_millis(500),
            response_bytes_max: 1 << 20,
            ..Default::default()
        }
    }

    #[test]
    fn negotiates_and_sends() {
        let addr = fake_broker(Misbehave::None);
        let mut c =
            BlockingConnection::connect(&addr, "t", Duration::from_secs(5)).expect("connects");
        assert_eq!(c.api_range(3), Some((0, 10)));
        assert_eq!(c.pick_version(3, 4, 12), Some(10));
        let resp = c.send(&MetadataRequest::default(), 9).expect("metadata");
        assert_eq!(resp.controller_id, 7);
        assert_eq!(&c.send_raw(100, 0, b"xy").expect("raw")[..], b"xy");
    }

    #[test]
    fn old_broker_and_misbehaviour() {
        let addr = fake_broker(Misbehave::OldBroker);
        let c = BlockingConnection::connect_with(&addr, &config()).expect("connects");
        assert_eq!(c.api_range(18), Some((0, 2)));

        for mode in [
            Misbehave::WrongCorrelation,
            Misbehave::HugeFrame,
            Misbehave::Silent,
        ] {
            let addr = fake_broker(mode);
            let mut c = BlockingConnection::connect_with(&addr, &config()).expect("connects");
            let err = c
                .send(&MetadataRequest::default(), 9)
                .expect_err("must fail");
            let expected = match mode {
                Misbehave::WrongCorrelation => {
                    matches!(err, ClientError::CorrelationMismatch { .. })
                }
                Misbehave::HugeFrame => matches!(err, ClientError::FrameTooLarge { .. }),
                _ => matches!(err, ClientError::Timeout { .. }),
            };
            assert!(expected, "{mode:?}: {err}");
            assert!(c.is_broken());
            assert!(matches!(
                c.send(&MetadataRequest::default(), 9),
                Err(ClientError::Broken { .. })
            ));
        }
    }
}
