//! One Kafka connection on a glommio executor.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::protocol::Request;

use super::session::{
    self, HandshakeStep, Session, API_VERSIONS_VERSION_MAX, HANDSHAKE_ATTEMPTS_MAX,
};
use super::{codec, io_error, split_host_port, ApiVersionRanges, ClientError, ConnectionConfig};

/// glommio refuses zero timeouts; the smallest one used instead.
const TIMEOUT_MIN: Duration = Duration::from_millis(1);

/// A connection to one broker, used from the glommio executor (shard) that opened it.
/// Requests go one at a time; the API versions the broker serves are known after
/// [`connect`](Self::connect). After an I/O error, a timeout or a mismatched response
/// the connection is broken for good (see [`is_broken`](Self::is_broken)).
#[derive(Debug)]
pub struct KafkaConnection {
    stream: Stream,
    session: Session,
}

/// The socket, in the clear or inside TLS (encrypted on this shard, no thread hop).
#[derive(Debug)]
enum Stream {
    Plain(TcpStream),
    Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }
}

impl futures_lite::AsyncRead for Stream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl futures_lite::AsyncWrite for Stream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_close(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// The addresses of `addr` (`host:port`). Literal IPs are parsed on the spot; a host
/// name is looked up on glommio's blocking thread pool, so the shard never waits in
/// `getaddrinfo`.
pub(crate) async fn resolve(addr: &str) -> Result<Vec<SocketAddr>, ClientError> {
    let (host, port) = split_host_port(addr)?;
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let name = host.to_string();
    let found = glommio::executor()
        .spawn_blocking(move || {
            (name.as_str(), port)
                .to_socket_addrs()
                .map(|a| a.collect::<Vec<_>>())
        })
        .await
        .map_err(|e| io_error(addr, "resolving the host name", e))?;
    if found.is_empty() {
        return Err(ClientError::Io {
            addr: addr.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address for host"),
        });
    }
    Ok(found)
}

impl KafkaConnection {
    /// Connects to `addr` (`host:port`) within `timeout` and negotiates API versions,
    /// with the default request timeout and response size limit.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        Self::connect_with(addr, &ConnectionConfig::new(client_id, timeout)).await
    }

    /// Connects to `addr` (`host:port`) and negotiates API versions: ApiVersions v3
    /// (with the client software name and version), falling back to a lower version on
    /// UNSUPPORTED_VERSION. Every address of a host name is tried in turn, each within
    /// `config.connect_timeout`.
    pub async fn connect_with(addr: &str, config: &ConnectionConfig) -> Result<Self, ClientError> {
        let connect_timeout = config.connect_timeout.max(TIMEOUT_MIN);
        let request_timeout = config.request_timeout.max(TIMEOUT_MIN);
        let mut last_error = None;
        let mut stream = None;
        for sa in resolve(addr).await? {
            match TcpStream::connect_timeout(sa, connect_timeout).await {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last_error = Some(io_error(addr, "connecting", e.into())),
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
        let setup =
            |r: glommio::Result<(), ()>| r.map_err(|e| io_error(addr, "connecting", e.into()));
        setup(stream.set_nodelay(true))?;
        setup(stream.set_read_timeout(Some(request_timeout)))?;
        setup(stream.set_write_timeout(Some(request_timeout)))?;
        let stream = match &config.security.tls {
            None => Stream::Plain(stream),
            Some(tls) => {
                let refused = |message: String| ClientError::Authentication {
                    addr: addr.to_string(),
                    message,
                };
                let client = tls.load().map_err(refused)?;
                let (host, _) = split_host_port(addr)?;
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| refused(format!("{host} is no TLS server name: {e}")))?;
                let tls = futures_rustls::TlsConnector::from(client)
                    .connect(name, stream)
                    .await
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::InvalidData => refused(format!("TLS handshake: {e}")),
                        _ => io_error(addr, "in the TLS handshake", e),
                    })?;
                Stream::Tls(Box::new(tls))
            }
        };
        let mut conn = KafkaConnection {
            stream,
            session: Session::new(addr, config),
        };
        conn.handshake().await?;
        if let Some(login) = &config.security.sasl {
            conn.authenticate(login).await?;
        }
        Ok(conn)
    }

    /// SaslHandshake v1 and SaslAuthenticate (PLAIN: one token; SCRAM: two, and the
    /// broker's signature checked). A refusal is [`ClientError::Authentication`] with
    /// the broker's message.
    async fn authenticate(
        &mut self,
        login: &super::security::SaslLogin,
    ) -> Result<(), ClientError> {
        use super::security::SaslMechanism;
        use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
        use kafka_protocol::protocol::StrBytes;
        let addr = self.session.addr.clone();
        let refused = |message: String| ClientError::Authentication {
            addr: addr.clone(),
            message,
        };
        let mechanism = login.mechanism.name();
        if self.pick_version(17, 1, 1).is_none() {
            return Err(refused("the broker does not serve SaslHandshake v1".into()));
        }
        let handshake =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        let r = self.send(&handshake, 1).await?;
        if r.error_code != 0 {
            let offered: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(refused(format!(
                "the listener does not enable {mechanism} (it offers {})",
                offered.join(", ")
            )));
        }
        let version = self
            .pick_version(36, 0, 2)
            .ok_or_else(|| refused("the broker does not serve SaslAuthenticate".into()))?;
        let step =
            |token: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(token.into());
        let check = |r: &kafka_protocol::messages::SaslAuthenticateResponse| {
            if r.error_code == 0 {
                Ok(())
            } else {
                Err(refused(r.error_message.as_ref().map_or_else(
                    || format!("error code {}", r.error_code),
                    |m| m.to_string(),
                )))
            }
        };
        match login.mechanism {
            SaslMechanism::Plain => {
                let token = format!("\0{}\0{}", login.username, login.password).into_bytes();
                let r = self.send(&step(token), version).await?;
                check(&r)
            }
            SaslMechanism::OAuthBearer => {
                let token = login
                    .oauth
                    .as_ref()
                    .ok_or_else(|| refused("OAUTHBEARER without a token source".into()))?
                    .token()
                    .map_err(&refused)?;
                let first = crate::net::oauth::initial_response(&token);
                let r = self.send(&step(first), version).await?;
                check(&r)?;
                if r.auth_bytes.is_empty() {
                    return Ok(());
                }
                // The broker's challenge (RFC 7628): acknowledge it and take the
                // failure that follows.
                let challenge = String::from_utf8_lossy(&r.auth_bytes).into_owned();
                let ack = step(crate::net::oauth::CHALLENGE_ACK.to_vec());
                let r = self.send(&ack, version).await?;
                check(&r)?;
                Err(refused(format!(
                    "the broker refused the token: {challenge}"
                )))
            }
            SaslMechanism::Scram(m) => {
                let nonce = uuid::Uuid::new_v4().simple().to_string();
                let mut client = crate::net::scram::ScramClient::new(
                    m,
                    &login.username,
                    &login.password,
                    &nonce,
                );
                let r = self
                    .send(&step(client.first_message().into_bytes()), version)
                    .await?;
                check(&r)?;
                let server_first = String::from_utf8_lossy(&r.auth_bytes).into_owned();
                let last = client.final_message(&server_first).map_err(&refused)?;
                let r = self.send(&step(last.into_bytes()), version).await?;
                check(&r)?;
                if client.verify_server(&String::from_utf8_lossy(&r.auth_bytes)) {
                    Ok(())
                } else {
                    Err(refused("the broker's SCRAM signature does not match: it does not know the password".into()))
                }
            }
        }
    }

    async fn handshake(&mut self) -> Result<(), ClientError> {
        let req = session::api_versions_request();
        let mut version = API_VERSIONS_VERSION_MAX;
        for _ in 0..HANDSHAKE_ATTEMPTS_MAX {
            let (frame, corr) = self.session.request(&req, version)?;
            let resp = self.roundtrip(&frame, corr).await?;
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

    /// Changes the limit on each read and write (a Fetch's `max_wait_ms` must fit in it).
    pub fn set_request_timeout(&mut self, timeout: Duration) -> Result<(), ClientError> {
        let timeout = Some(timeout.max(TIMEOUT_MIN));
        let addr = &self.session.addr;
        let set =
            |r: glommio::Result<(), ()>| r.map_err(|e| io_error(addr, "configuring", e.into()));
        set(self.stream.tcp().set_read_timeout(timeout))?;
        set(self.stream.tcp().set_write_timeout(timeout))
    }

    /// Changes the largest response frame accepted.
    pub fn set_response_bytes_max(&mut self, response_bytes_max: usize) {
        self.session.response_bytes_max = response_bytes_max;
    }

    /// Sends `req` at `version` and waits for its response. The version must be one the
    /// broker announced ([`ClientError::Unsupported`] otherwise, before anything is sent).
    pub async fn send<R: Request>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let (frame, corr) = self.session.request(req, version)?;
        let resp = self.roundtrip(&frame, corr).await?;
        let (_, resp) = codec::decode_response::<R>(resp, version)?;
        Ok(resp)
    }

    /// Sends a request kafka-protocol does not know (request header v2, response header
    /// v1: the mirror RPCs) and returns the response body.
    pub async fn send_raw(
        &mut self,
        api_key: i16,
        version: i16,
        body: &[u8],
    ) -> Result<Bytes, ClientError> {
        let (frame, corr) = self.session.raw_request(api_key, version, body)?;
        let resp = self.roundtrip(&frame, corr).await?;
        let (_, body) = codec::decode_raw_response(resp)?;
        Ok(body)
    }

    /// Writes `frame` and reads the response frame with correlation id `corr`.
    async fn roundtrip(&mut self, frame: &[u8], corr: i32) -> Result<Bytes, ClientError> {
        self.session.in_flight = true;
        let result = self.roundtrip_inner(frame, corr).await;
        self.session.in_flight = false;
        result.map_err(|e| self.session.fail(e))
    }

    async fn roundtrip_inner(&mut self, frame: &[u8], corr: i32) -> Result<Bytes, ClientError> {
        let addr = self.session.addr.as_str();
        let write = |e| io_error(addr, "writing a request", e);
        self.stream.write_all(frame).await.map_err(write)?;
        self.stream.flush().await.map_err(write)?;
        let read = |e| io_error(addr, "reading a response", e);
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).await.map_err(read)?;
        let size = self.session.frame_size(prefix)?;
        let mut buf = self.session.recv.take(size);
        self.stream
            .read_exact(&mut buf[..size])
            .await
            .map_err(read)?;
        let frame = self.session.recv.frame(buf, size);
        session::check_frame_correlation(corr, &frame)?;
        Ok(frame)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{
        ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse, RequestHeader,
        ResponseHeader,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::thread;

    use crate::test_support::run_glommio;

    /// What the fake broker does with a request after ApiVersions.
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Misbehave {
        /// Answer Metadata properly.
        None,
        /// Answer with the wrong correlation id.
        WrongCorrelation,
        /// Announce a frame of 1 GiB.
        HugeFrame,
        /// Never answer.
        Silent,
        /// Answer ApiVersions v3 with UNSUPPORTED_VERSION in the v0 format, like an old
        /// broker, then behave.
        OldBroker,
    }

    fn read_request(s: &mut std::net::TcpStream) -> Option<(RequestHeader, Bytes)> {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).ok()?;
        let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
        s.read_exact(&mut buf).ok()?;
        let mut buf = Bytes::from(buf);
        // kafka-protocol refuses unknown keys: raw (mirror) requests use header v2.
        let header = if buf.get(..2) == Some(&100i16.to_be_bytes()[..]) {
            RequestHeader::decode(&mut buf, 2).ok()?
        } else {
            kafka_protocol::protocol::decode_request_header_from_buffer(&mut buf).ok()?
        };
        Some((header, buf))
    }

    fn write_response<M: Encodable + HeaderVersion>(
        s: &mut std::net::TcpStream,
        corr: i32,
        resp: &M,
        version: i16,
    ) {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(corr)
            .encode(&mut buf, M::header_version(version))
            .expect("header");
        resp.encode(&mut buf, version).expect("body");
        let mut out = (buf.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&buf);
        let _ = s.write_all(&out);
    }

    /// A fake broker on a loopback port, one thread per connection: ApiVersions
    /// (Metadata 0..10), then Metadata requests handled according to `mode`. It calls
    /// itself broker 1, leader of partition 0 of topic `t`. Returns its address.
    pub(crate) fn fake_broker(mode: Misbehave) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let own = listener.local_addr().expect("addr");
        thread::spawn(move || {
            while let Ok((s, _)) = listener.accept() {
                thread::spawn(move || serve_fake(s, mode, own));
            }
        });
        addr
    }

    fn serve_fake(mut s: std::net::TcpStream, mode: Misbehave, own: std::net::SocketAddr) {
        use kafka_protocol::messages::metadata_response::{
            MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
        };
        use kafka_protocol::messages::TopicName;
        use kafka_protocol::protocol::StrBytes;
        let old = matches!(mode, Misbehave::OldBroker);
        let keys = vec![
            ApiVersion::default()
                .with_api_key(18)
                .with_min_version(0)
                .with_max_version(if old { 2 } else { 3 }),
            ApiVersion::default()
                .with_api_key(3)
                .with_min_version(0)
                .with_max_version(10),
        ];
        let metadata = MetadataResponse::default()
            .with_controller_id(7.into())
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(1.into())
                .with_host(StrBytes::from_string(own.ip().to_string()))
                .with_port(i32::from(own.port()))])
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_topic_id(uuid::Uuid::from_u128(0x5eed))
                .with_partitions(vec![MetadataResponsePartition::default()
                    .with_partition_index(0)
                    .with_leader_id(1.into())
                    .with_leader_epoch(3)])]);
        while let Some((header, mut body)) = read_request(&mut s) {
            let corr = header.correlation_id;
            let version = header.request_api_version;
            match header.request_api_key {
                18 if old && version > 2 => {
                    let resp = ApiVersionsResponse::default()
                        .with_error_code(35)
                        .with_api_keys(keys.clone());
                    write_response(&mut s, corr, &resp, 0);
                }
                18 => {
                    ApiVersionsRequest::decode(&mut body, version).expect("decodes");
                    let resp = ApiVersionsResponse::default().with_api_keys(keys.clone());
                    write_response(&mut s, corr, &resp, version);
                }
                3 => match mode {
                    Misbehave::None | Misbehave::OldBroker => {
                        MetadataRequest::decode(&mut body, version).expect("decodes");
                        write_response(&mut s, corr, &metadata, version);
                    }
                    Misbehave::WrongCorrelation => {
                        write_response(&mut s, corr + 1, &metadata, version);
                    }
                    Misbehave::HugeFrame => {
                        let _ = s.write_all(&(1i32 << 30).to_be_bytes());
                    }
                    Misbehave::Silent => {}
                },
                100 => {
                    // Echo the raw body after a v1 response header.
                    let mut out = (4 + 1 + body.len() as i32).to_be_bytes().to_vec();
                    out.extend_from_slice(&corr.to_be_bytes());
                    out.push(0);
                    out.extend_from_slice(&body);
                    let _ = s.write_all(&out);
                }
                _ => return,
            }
        }
    }

    fn small_config() -> ConnectionConfig {
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
        run_glommio(move || async move {
            let mut c = KafkaConnection::connect(&addr, "test", Duration::from_secs(5))
                .await
                .expect("connects");
            assert_eq!(c.api_range(3), Some((0, 10)));
            assert_eq!(c.pick_version(3, 0, 12), Some(10));
            assert_eq!(c.pick_version(1, 0, 12), None);
            let resp = c
                .send(&MetadataRequest::default(), 9)
                .await
                .expect("metadata");
            assert_eq!(resp.controller_id, 7);
            let err = c
                .send(&MetadataRequest::default(), 12)
                .await
                .expect_err("must fail");
            assert!(matches!(err, ClientError::Unsupported { .. }), "{err}");
            let body = c.send_raw(100, 0, b"hello").await.expect("raw");
            assert_eq!(&body[..], b"hello");
            assert!(!c.is_broken());
        });
    }

    #[test]
    fn large_responses_reuse_buffers_without_touching_held_ones() {
        let addr = fake_broker(Misbehave::None);
        run_glommio(move || async move {
            let mut c = KafkaConnection::connect(&addr, "test", Duration::from_secs(5))
                .await
                .expect("connects");
            let size = 3 * crate::buffers::REUSE_BYTES_MIN;
            let first = c.send_raw(100, 0, &vec![1; size]).await.expect("raw");
            let second = c.send_raw(100, 0, &vec![2; size]).await.expect("raw");
            assert!(first.len() == size && first.iter().all(|b| *b == 1));
            assert!(second.len() == size && second.iter().all(|b| *b == 2));
            let first_at = first.as_ptr();
            drop(first);
            // The first response's buffer is free again: the third is read into it.
            let third = c.send_raw(100, 0, &vec![3; size - 7]).await.expect("raw");
            assert_eq!(third.as_ptr(), first_at);
            assert!(third.len() == size - 7 && third.iter().all(|b| *b == 3));
            assert!(second.iter().all(|b| *b == 2));
            let small = c.send_raw(100, 0, b"small").await.expect("raw");
            assert_eq!(&small[..], b"small");
        });
    }

    #[test]
    fn old_broker_gets_a_lower_api_versions() {
        let addr = fake_broker(Misbehave::OldBroker);
        run_glommio(move || async move {
            let mut c = KafkaConnection::connect_with(&addr, &small_config())
                .await
                .expect("connects");
            assert_eq!(c.api_range(18), Some((0, 2)));
            c.send(&MetadataRequest::default(), 1)
                .await
                .expect("metadata");
        });
    }

    #[test]
    fn misbehaving_brokers_break_the_connection() {
        for (mode, check) in [
            (
                Misbehave::WrongCorrelation,
                (|e: &ClientError| matches!(e, ClientError::CorrelationMismatch { .. }))
                    as fn(&ClientError) -> bool,
            ),
            (
                Misbehave::HugeFrame,
                |e| matches!(e, ClientError::FrameTooLarge { size, .. } if *size == 1 << 30),
            ),
            (Misbehave::Silent, |e| {
                matches!(e, ClientError::Timeout { .. })
            }),
        ] {
            let addr = fake_broker(mode);
            run_glommio(move || async move {
                let mut c = KafkaConnection::connect_with(&addr, &small_config())
                    .await
                    .expect("connects");
                let err = c
                    .send(&MetadataRequest::default(), 9)
                    .await
                    .expect_err("must fail");
                assert!(check(&err), "{mode:?}: {err}");
                assert!(c.is_broken());
                let again = c
                    .send(&MetadataRequest::default(), 9)
                    .await
                    .expect_err("must fail");
                assert!(matches!(again, ClientError::Broken { .. }), "{again}");
            });
        }
    }

    #[test]
    fn a_request_dropped_half_way_breaks_the_connection() {
        let addr = fake_broker(Misbehave::Silent);
        run_glommio(move || async move {
            let mut c = KafkaConnection::connect_with(&addr, &small_config())
                .await
                .expect("connects");
            let first = futures_lite::future::or(
                async { Some(c.send(&MetadataRequest::default(), 10).await) },
                async {
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                    None
                },
            )
            .await;
            assert!(first.is_none(), "the silent broker answered: {first:?}");
            let err = c
                .send(&MetadataRequest::default(), 10)
                .await
                .expect_err("must fail");
            assert!(matches!(err, ClientError::Broken { .. }), "{err}");
            assert!(c.is_broken());
        });
    }

    #[test]
    fn refused_and_bad_addresses() {
        // A port that was just free: nothing listens there.
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        run_glommio(move || async move {
            let addr = format!("127.0.0.1:{port}");
            let err = KafkaConnection::connect(&addr, "t", Duration::from_secs(2))
                .await
                .expect_err("must fail");
            assert!(matches!(err, ClientError::Io { .. }), "{err}");
            let err = KafkaConnection::connect("nohostport", "t", Duration::from_secs(2))
                .await
                .expect_err("must fail");
            assert!(matches!(err, ClientError::InvalidAddress { .. }), "{err}");
        });
    }

    #[test]
    fn host_names_resolve_off_the_shard() {
        let addr = fake_broker(Misbehave::None);
        let port = addr.rsplit_once(':').expect("port").1.to_string();
        run_glommio(move || async move {
            let found = resolve(&format!("localhost:{port}"))
                .await
                .expect("resolves");
            assert!(found.iter().all(|a| a.ip().is_loopback()), "{found:?}");
            let c =
                KafkaConnection::connect(&format!("localhost:{port}"), "t", Duration::from_secs(5))
                    .await
                    .expect("connects by name");
            assert_eq!(c.addr(), format!("localhost:{port}"));
        });
    }
}
