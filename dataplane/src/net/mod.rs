//! Kafka listener on one shard. Every shard binds the same address with SO_REUSEPORT
//! (glommio sets it), so the kernel spreads connections over the shards and no acceptor
//! thread hands sockets around. A connection is served by the shard that accepted it;
//! partition work it needs from other shards goes through the shard router.
//!
//! Frames: a 4-byte size then the request. A frame larger than
//! `socket.request.max.bytes`, or one whose header or body does not decode, closes the
//! connection with a log line naming the client. Requests on one connection are
//! answered in order; Produce requests pipelined behind one another are served as one
//! group ([`pipeline`]), everything else one at a time.
//!
//! The mirror RPCs (keys 94-104, v0, flexible) are not known to kafka-protocol: they are
//! recognised by key before the Kafka dispatch and go through [`wire::mirror`]'s codec.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures_lite::AsyncWriteExt;
use glommio::net::{TcpListener, TcpStream};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

mod frame;
pub mod listener;
pub mod oauth;
mod pipeline;

pub use pipeline::FrameReader;
pub mod sasl;
pub mod scram;
pub mod tls;

pub use frame::ResponseFrame;
pub use listener::{ListenerConfig, SecurityProtocol};

use crate::api;
use crate::shard::ShardCtx;
use crate::wire;
use crate::wire::mirror::{MirrorRequest, MirrorResponse};

/// Request header version of the mirror RPCs (all flexible).
const MIRROR_REQUEST_HEADER_VERSION: i16 = 2;
/// Response header version of the mirror RPCs: correlation id and tagged fields.
const MIRROR_RESPONSE_HEADER_VERSION: i16 = 1;

/// Why a connection was closed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {size} bytes exceeds socket.request.max.bytes {max}")]
    FrameTooLarge { size: i64, max: usize },
    #[error("request too short to hold a header ({0} bytes)")]
    ShortFrame(usize),
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("{0:?} request before SASL authentication")]
    Unauthenticated(ApiKey),
    #[error("{key:?} v{version} is not supported")]
    UnsupportedVersion { key: ApiKey, version: i16 },
    #[error("cannot decode {key:?} v{version} request: {message}")]
    Decode {
        key: ApiKey,
        version: i16,
        message: String,
    },
    #[error("cannot encode {key:?} v{version} response: {message}")]
    Encode {
        key: ApiKey,
        version: i16,
        message: String,
    },
    #[error("mirror API key {key} v{version} is not supported")]
    UnsupportedMirrorVersion { key: i16, version: i16 },
    #[error("cannot decode mirror API key {key} v0 request: {message}")]
    MirrorDecode { key: i16, message: String },
    #[error("cannot encode mirror API key {key} v0 response: {message}")]
    MirrorEncode { key: i16, message: String },
}

/// One listener as a shard serves it: its config and, for SSL and SASL_SSL, the
/// shard's TLS acceptor.
#[derive(Debug)]
pub struct ShardListener {
    pub config: ListenerConfig,
    pub tls: Option<tls::ShardTls>,
}

impl ShardListener {
    pub fn new(config: ListenerConfig) -> Result<ShardListener, tls::TlsError> {
        let tls = config
            .tls
            .as_ref()
            .map(|t| tls::ShardTls::new(&config.name, Arc::clone(t)))
            .transpose()?;
        Ok(ShardListener { config, tls })
    }
}

/// Who is on the other end of a connection, as the API handlers see it.
#[derive(Debug)]
pub struct ConnInfo {
    /// The client's address, for log lines.
    pub peer: String,
    /// The client's IP address, as ACL hosts name it.
    pub host: String,
    /// The listener it connected to (upper case).
    pub listener: String,
    /// Kafka's principal: `User:<name>` once SASL authenticated it, `User:<subject>`
    /// from a TLS client certificate, `User:ANONYMOUS` otherwise.
    pub principal: String,
    /// The authorizer's recent decisions for this connection.
    pub decisions: crate::acl::DecisionCache,
}

impl ConnInfo {
    /// A connection on the PLAINTEXT listener (tests and internal callers).
    pub fn anonymous(peer: &str) -> ConnInfo {
        ConnInfo {
            peer: peer.to_owned(),
            host: host_of(peer),
            listener: "PLAINTEXT".into(),
            principal: "User:ANONYMOUS".into(),
            decisions: Default::default(),
        }
    }
}

/// The IP address of a `host:port` peer string (the whole string if it is no socket
/// address).
fn host_of(peer: &str) -> String {
    peer.parse::<std::net::SocketAddr>()
        .map_or_else(|_| peer.to_owned(), |a| a.ip().to_string())
}

/// How long a client may take to finish its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Accepts connections until `stop` closes; each connection runs as its own task.
/// Connections are spawned in `gate`, so shutdown can wait for them to finish.
pub async fn run_listener(
    ctx: Rc<ShardCtx>,
    listener: TcpListener,
    spec: Rc<ShardListener>,
    stop: async_channel::Receiver<()>,
    gate: glommio::sync::Gate,
) {
    let addr = listener.local_addr().ok();
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            let _ = stop.recv().await;
            None
        })
        .await;
        match accepted {
            None => break,
            Some(Ok(stream)) => {
                let ctx = Rc::clone(&ctx);
                let stop = stop.clone();
                let spec = Rc::clone(&spec);
                match gate.spawn(async move { serve_connection(ctx, stream, spec, stop).await }) {
                    Ok(task) => {
                        task.detach();
                    }
                    Err(_) => break, // the gate is closing: shutting down
                }
            }
            Some(Err(e)) => {
                tracing::warn!(shard = ctx.id, error = %e, "accept failed");
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
    tracing::debug!(shard = ctx.id, ?addr, listener = %spec.config.name, "listener stopped");
}

/// Binds the shard's listener socket (SO_REUSEPORT). With `incoming_cpu` (the core the
/// shard runs on), the socket also sets SO_INCOMING_CPU: the kernel (Linux 6.1 and later)
/// then hands a connection whose SYN was processed on that core to this shard, and
/// spreads the rest by hash as before. Over a NIC, that keeps a connection on the core its
/// receive queue interrupts; over loopback, on the core the client connected from, so
/// a peer whose connections come from different cores (a mirror's fetchers, one per
/// destination shard) gets them on different shards instead of, by the hash's chance,
/// one shard doing all the sending.
pub fn bind(addr: SocketAddr, incoming_cpu: Option<usize>) -> std::io::Result<TcpListener> {
    let domain = socket2::Domain::for_address(addr);
    let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    socket.set_reuse_port(true)?;
    if let Some(cpu) = incoming_cpu {
        socket.set_cpu_affinity(cpu)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(into_glommio_listener(socket))
}

/// glommio 0.9 builds a listener from an fd only (no safe conversion from a socket it
/// did not create, and its own `bind` offers no socket options).
#[allow(unsafe_code)]
fn into_glommio_listener(socket: socket2::Socket) -> TcpListener {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: `into_raw_fd` gives up the socket's only owner, so the listener becomes the
    // sole owner of a bound, listening TCP socket, as `from_raw_fd` requires.
    unsafe { TcpListener::from_raw_fd(socket.into_raw_fd()) }
}

async fn serve_connection(
    ctx: Rc<ShardCtx>,
    stream: TcpStream,
    spec: Rc<ShardListener>,
    stop: async_channel::Receiver<()>,
) {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "unknown".to_string(), |a| a.to_string());
    let _ = stream.set_nodelay(true);
    let mut conn = ConnInfo {
        host: host_of(&peer),
        peer,
        listener: spec.config.name.clone(),
        principal: "User:ANONYMOUS".into(),
        decisions: Default::default(),
    };
    let Some(tls) = &spec.tls else {
        return serve_stream(&ctx, stream, &spec, conn, stop).await;
    };
    let handshake = futures_lite::future::or(
        async {
            match glommio::timer::timeout(TLS_HANDSHAKE_TIMEOUT, async {
                Ok(tls.acceptor().accept(stream).await)
            })
            .await
            {
                Ok(done) => Some(done),
                Err(_) => Some(Err(std::io::Error::from(std::io::ErrorKind::TimedOut))),
            }
        },
        async {
            let _ = stop.recv().await;
            None
        },
    )
    .await;
    let stream = match handshake {
        None => return,
        Some(Ok(stream)) => stream,
        Some(Err(e)) => {
            tracing::info!(client = %conn.peer, listener = %conn.listener, error = %e, "TLS handshake failed; closing connection");
            return;
        }
    };
    match tls.config.principal(stream.get_ref().1.peer_certificates()) {
        Ok(principal) => conn.principal = principal,
        Err(e) => {
            tracing::warn!(client = %conn.peer, listener = %conn.listener, error = %e, "TLS client refused; closing connection");
            let mut stream = stream;
            let _ = stream.close().await;
            return;
        }
    }
    tracing::debug!(client = %conn.peer, principal = %conn.principal, "TLS connection");
    serve_stream(&ctx, stream, &spec, conn, stop).await;
}

/// Serves one connection's frames, over TCP or TLS.
async fn serve_stream<S>(
    ctx: &Rc<ShardCtx>,
    mut stream: S,
    spec: &ShardListener,
    mut conn: ConnInfo,
    stop: async_channel::Receiver<()>,
) where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    let mut sasl = spec.config.sasl.clone().map(sasl::SaslSession::new);
    // When the session ends (KIP-368: `connections.max.reauth.ms`, told to the client
    // in SaslAuthenticate v1+): a request after it closes the connection, unless the
    // client has re-authenticated.
    let mut expires: Option<std::time::Instant> = None;
    let mut reader = pipeline::FrameReader::new();
    loop {
        // Before authentication a frame is at most a SASL token's size (Kafka's
        // `sasl.server.max.receive.size`): an unauthenticated peer cannot make the
        // broker allocate `socket.request.max.bytes`.
        let authenticating = sasl.as_ref().is_some_and(|s| s.principal().is_none());
        let max = if authenticating {
            sasl::MAX_RECEIVE_BYTES
        } else {
            ctx.settings.socket_request_max_bytes
        };
        let frame = futures_lite::future::or(reader.next(&mut stream, max), async {
            let _ = stop.recv().await;
            Ok(None)
        })
        .await;
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(ConnectionError::Io(e)) if is_disconnect(&e) => break,
            Err(e) => {
                tracing::warn!(client = %conn.peer, shard = ctx.id, error = %e, "closing connection");
                break;
            }
        };
        // A SaslHandshake on an authenticated connection re-authenticates it.
        let renewal = sasl
            .as_ref()
            .filter(|_| !authenticating && api_key_of(&frame) == Some(ApiKey::SaslHandshake))
            .and_then(sasl::SaslSession::renewal);
        if let Some(renewal) = renewal {
            sasl = Some(renewal);
        }
        // A SASL listener serves nothing but ApiVersions and the exchange itself until
        // the connection has authenticated.
        if let Some(session) = sasl
            .as_mut()
            .filter(|s| authenticating || s.is_renewal() && s.principal().is_none())
        {
            match sasl_step(ctx, session, frame, &conn).await {
                Ok((response, sasl::Next::Continue, lifetime)) => {
                    if let Some(response) = response {
                        if write_frame(&mut stream, &response).await.is_err() {
                            break;
                        }
                    }
                    if let Some(user) = session.principal() {
                        expires = lifetime.map(|l| std::time::Instant::now() + l);
                        if session.is_renewal() {
                            tracing::debug!(client = %conn.peer, principal = %conn.principal, "re-authenticated");
                        } else {
                            conn.principal = format!("User:{user}");
                            conn.decisions = Default::default();
                            tracing::debug!(client = %conn.peer, principal = %conn.principal, "authenticated");
                        }
                    }
                }
                Ok((response, sasl::Next::Close, _)) => {
                    tracing::info!(client = %conn.peer, shard = ctx.id, "SASL authentication refused; closing connection");
                    if let Some(response) = response {
                        let _ = write_frame(&mut stream, &response).await;
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!(client = %conn.peer, shard = ctx.id, error = %e, "closing connection");
                    break;
                }
            }
            continue;
        }
        if expires.is_some_and(|at| std::time::Instant::now() >= at) {
            tracing::info!(client = %conn.peer, principal = %conn.principal, shard = ctx.id, "SASL session expired (connections.max.reauth.ms) and the client did not re-authenticate; closing connection");
            break;
        }
        // Produce requests pipelined behind this one and already read are served
        // with it, as one group.
        let mut frames = vec![frame];
        if api_key_of(&frames[0]) == Some(ApiKey::Produce) {
            while frames.len() < ctx.settings.in_flight_requests_max {
                match reader.next_buffered(max, |f| api_key_of(f) == Some(ApiKey::Produce)) {
                    Some(f) => frames.push(f),
                    None => break,
                }
            }
        }
        let served = if frames.len() > 1 {
            serve_produce_group(ctx, &mut stream, frames, &conn).await
        } else {
            serve_frame(ctx, &mut stream, frames.remove(0), &conn).await
        };
        if !served {
            break;
        }
    }
    let _ = stream.close().await;
}

/// One frame of a connection that has not authenticated yet: ApiVersions as ever, the
/// SASL exchange by `session` (after a SaslHandshake v0 the frame is the bare token, and
/// so is the reply; a refused one gets none), and anything else refused (Kafka closes
/// the connection: "Unexpected Kafka request ... during SASL handshake").
async fn sasl_step(
    ctx: &Rc<ShardCtx>,
    session: &mut sasl::SaslSession,
    mut frame: Bytes,
    conn: &ConnInfo,
) -> Result<
    (
        Option<ResponseFrame>,
        sasl::Next,
        Option<std::time::Duration>,
    ),
    ConnectionError,
> {
    let image = ctx.metadata.load();
    let scram = |user: &str, mechanism| image.scram.get(&(user.to_owned(), mechanism)).cloned();
    if session.expects_raw_token() {
        return Ok(match session.authenticate_raw(&frame, &scram) {
            Some(reply) => {
                let mut out = BytesMut::with_capacity(4 + reply.len());
                out.put_i32(i32::try_from(reply.len()).unwrap_or(i32::MAX));
                out.put_slice(&reply);
                // A v0 client cannot learn a session lifetime: its session never
                // expires.
                (
                    Some(ResponseFrame::single(out.freeze())),
                    sasl::Next::Continue,
                    None,
                )
            }
            None => (None, sasl::Next::Close, None),
        });
    }
    if frame.len() < 8 {
        return Err(ConnectionError::ShortFrame(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| ConnectionError::UnknownApiKey(raw_key))?;
    match key {
        ApiKey::ApiVersions => {
            let response = handle_frame(ctx, frame, conn).await?;
            return Ok((response, sasl::Next::Continue, None));
        }
        ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {}
        other => return Err(ConnectionError::Unauthenticated(other)),
    }
    if !api::is_supported(key, version) {
        return Err(ConnectionError::UnsupportedVersion { key, version });
    }
    let decode = |e: anyhow::Error| ConnectionError::Decode {
        key,
        version,
        message: e.to_string(),
    };
    let header =
        RequestHeader::decode(&mut frame, key.request_header_version(version)).map_err(decode)?;
    let request = RequestKind::decode(key, &mut frame, version).map_err(decode)?;
    let mut lifetime = None;
    let (body, next) = match request {
        RequestKind::SaslHandshake(r) => {
            let (response, next) = session.handshake(&r, version);
            (ResponseKind::SaslHandshake(response), next)
        }
        RequestKind::SaslAuthenticate(r) => {
            let (mut response, next) = session.authenticate(&r, &scram);
            // SaslAuthenticate v1+ tells the client when its session ends.
            if version >= 1 && session.principal().is_some() {
                lifetime = session.lifetime();
                response.session_lifetime_ms =
                    lifetime.map_or(0, |l| i64::try_from(l.as_millis()).unwrap_or(i64::MAX));
            }
            (ResponseKind::SaslAuthenticate(response), next)
        }
        _ => return Err(ConnectionError::Unauthenticated(key)),
    };
    Ok((
        Some(encode_response(key, version, header.correlation_id, &body)?),
        next,
        lifetime,
    ))
}

/// The API key a request frame starts with, if it is one Twinlog knows.
fn api_key_of(frame: &[u8]) -> Option<ApiKey> {
    let raw = i16::from_be_bytes([*frame.first()?, *frame.get(1)?]);
    ApiKey::try_from(raw).ok()
}

async fn write_frame<S>(stream: &mut S, frame: &ResponseFrame) -> std::io::Result<()>
where
    S: futures_lite::AsyncWrite + Unpin,
{
    for chunk in frame.chunks() {
        stream.write_all(chunk).await?;
    }
    // TLS holds the last record until flushed; a TCP stream has nothing to flush.
    stream.flush().await
}

fn is_disconnect(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionAborted
    )
}

/// Serves one request and sends its answer; `false`: the connection is to close.
async fn serve_frame<S>(ctx: &Rc<ShardCtx>, stream: &mut S, frame: Bytes, conn: &ConnInfo) -> bool
where
    S: futures_lite::AsyncWrite + Unpin,
{
    let timer = crate::metrics::RequestTimer::start(ctx.id, &frame);
    match timer.finish(handle_frame(ctx, frame, conn).await) {
        Ok(Some(response)) => {
            if let Err(e) = write_frame(stream, &response).await {
                if !is_disconnect(&e) {
                    tracing::debug!(client = %conn.peer, error = %e, "write failed");
                }
                return false;
            }
            true
        }
        Ok(None) => true,
        Err(e) => {
            tracing::warn!(client = %conn.peer, shard = ctx.id, error = %e, "closing connection");
            false
        }
    }
}

/// Serves pipelined Produce frames as one group ([`pipeline`]) and sends their answers
/// in order. A frame that does not decode, and every frame after it, is served alone
/// afterwards, so its error closes the connection exactly where it would have.
async fn serve_produce_group<S>(
    ctx: &Rc<ShardCtx>,
    stream: &mut S,
    frames: Vec<Bytes>,
    conn: &ConnInfo,
) -> bool
where
    S: futures_lite::AsyncWrite + Unpin,
{
    let mut timers = Vec::with_capacity(frames.len());
    let mut requests = Vec::with_capacity(frames.len());
    let mut rest = Vec::new();
    for frame in frames {
        if !rest.is_empty() {
            rest.push(frame);
            continue;
        }
        let timer = crate::metrics::RequestTimer::start(ctx.id, &frame);
        match decode_request(frame.clone()) {
            Ok(Decoded {
                request: RequestKind::Produce(request),
                header,
                correlation_id,
                ..
            }) => {
                tracing::trace!(client = %conn.peer, version = header.request_api_version, correlation_id, "produce request (pipelined)");
                timers.push((timer, header.request_api_version, correlation_id));
                requests.push((header, request));
            }
            _ => rest.push(frame),
        }
    }
    crate::metrics::record_produce_group(ctx.id, requests.len());
    let answers = api::handle_produce_group(ctx, conn, requests).await;
    let mut out = Vec::with_capacity(answers.len());
    let mut failed = None;
    for ((timer, version, correlation_id), answer) in timers.into_iter().zip(answers) {
        let encoded = answer
            .map(|response| {
                crate::metrics::record_response_errors(ctx.id, &response);
                encode_response(ApiKey::Produce, version, correlation_id, &response)
            })
            .transpose();
        match timer.finish(encoded) {
            Ok(Some(frame)) => out.push(frame),
            Ok(None) => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Err(e) = pipeline::write_frames(stream, &out).await {
        if !is_disconnect(&e) {
            tracing::debug!(client = %conn.peer, error = %e, "write failed");
        }
        return false;
    }
    if let Some(e) = failed {
        tracing::warn!(client = %conn.peer, shard = ctx.id, error = %e, "closing connection");
        return false;
    }
    for frame in rest {
        if !serve_frame(ctx, stream, frame, conn).await {
            return false;
        }
    }
    true
}

/// A Kafka request (not a mirror RPC) off its frame.
struct Decoded {
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    header: RequestHeader,
    request: RequestKind,
}

/// Decodes a Kafka request's header and body; an unknown key, an unsupported version
/// or bytes that do not decode are errors.
fn decode_request(mut frame: Bytes) -> Result<Decoded, ConnectionError> {
    if frame.len() < 8 {
        return Err(ConnectionError::ShortFrame(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| ConnectionError::UnknownApiKey(raw_key))?;
    if !api::is_supported(key, version) {
        return Err(ConnectionError::UnsupportedVersion { key, version });
    }
    let header =
        RequestHeader::decode(&mut frame, key.request_header_version(version)).map_err(|e| {
            ConnectionError::Decode {
                key,
                version,
                message: e.to_string(),
            }
        })?;
    let request =
        RequestKind::decode(key, &mut frame, version).map_err(|e| ConnectionError::Decode {
            key,
            version,
            message: e.to_string(),
        })?;
    Ok(Decoded {
        key,
        version,
        correlation_id,
        header,
        request,
    })
}

/// Decodes, dispatches and encodes one request. `Ok(None)`: no response (acks=0).
pub async fn handle_frame(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    conn: &ConnInfo,
) -> Result<Option<ResponseFrame>, ConnectionError> {
    if frame.len() < 8 {
        return Err(ConnectionError::ShortFrame(frame.len()));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    if wire::mirror::keys::ALL.contains(&raw_key) {
        return handle_mirror_frame(ctx, frame, raw_key, version, conn)
            .await
            .map(|b| Some(ResponseFrame::single(b)));
    }
    if raw_key == ApiKey::ApiVersions as i16 && !api::is_supported(ApiKey::ApiVersions, version) {
        // Clients probe with their newest ApiVersions; answer v0 with the error and our
        // versions so they can retry (KIP-511).
        let body = api::api_versions::unsupported_version_response();
        return encode_response(ApiKey::ApiVersions, 0, correlation_id, &body).map(Some);
    }
    let Decoded {
        key,
        version,
        correlation_id,
        header,
        request,
    } = decode_request(frame)?;
    let client_id = header
        .client_id
        .as_ref()
        .map_or("", |c| c.as_str())
        .to_string();
    tracing::trace!(client = %conn.peer, %client_id, ?key, version, correlation_id, "request");
    let Some(response) = api::handle(ctx, conn, &header, request).await else {
        return Ok(None);
    };
    crate::metrics::record_response_errors(ctx.id, &response);
    encode_response(key, version, correlation_id, &response).map(Some)
}

/// Encodes the size prefix, header and body of a Kafka response. A Fetch response's
/// large record sets stay in their own buffers ([`frame::ChunkedBuf`]); everything else
/// goes into a buffer sized exactly beforehand, without a growing buffer's reallocations
/// copying it again.
fn encode_response(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<ResponseFrame, ConnectionError> {
    if let Some(frame) = encode_chunked(version, correlation_id, body) {
        return Ok(frame);
    }
    encode_plain(key, version, correlation_id, body).map(ResponseFrame::single)
}

/// A Fetch response with record sets of at least [`frame::SHARED_MIN_BYTES`], encoded
/// without copying them; `None` for anything else, or when sizing and encoding disagree
/// (the plain encoder then says why, or does it right).
fn encode_chunked(version: i16, correlation_id: i32, body: &ResponseKind) -> Option<ResponseFrame> {
    let ResponseKind::Fetch(fetch) = body else {
        return None;
    };
    let shared: Vec<Bytes> = fetch
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.clone())
        .filter(|r| r.len() >= frame::SHARED_MIN_BYTES)
        .collect();
    if shared.is_empty() {
        return None;
    }
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = ApiKey::Fetch.response_header_version(version);
    let size = header.compute_size(header_version).ok()? + fetch.compute_size(version).ok()?;
    let shared_len: usize = shared.iter().map(Bytes::len).sum();
    let mut buf = frame::ChunkedBuf::new((4 + size).saturating_sub(shared_len), shared);
    buf.put_i32(i32::try_from(size).ok()?);
    header.encode(&mut buf, header_version).ok()?;
    fetch.encode(&mut buf, version).ok()?;
    (buf.len() == 4 + size).then(|| buf.finish())
}

fn encode_plain(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, ConnectionError> {
    let encode_error = |message: String| ConnectionError::Encode {
        key,
        version,
        message,
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = key.response_header_version(version);
    // Sizing only saves reallocations: where it fails, `encode` below says why.
    let capacity = header
        .compute_size(header_version)
        .ok()
        .zip(body_size(body, version))
        .map_or(256, |(header_size, body_size)| 4 + header_size + body_size);
    let mut buf = BytesMut::with_capacity(capacity);
    buf.put_i32(0);
    header
        .encode(&mut buf, header_version)
        .map_err(|e| encode_error(e.to_string()))?;
    body.encode(&mut buf, version)
        .map_err(|e| encode_error(e.to_string()))?;
    // The prefix comes from what was written, so a `compute_size` that disagreed with
    // `encode` would only cost a reallocation, never a frame the client misreads.
    let size = i32::try_from(buf.len() - 4)
        .map_err(|_| encode_error(format!("response of {} bytes", buf.len() - 4)))?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// The encoded size of `body` where it is worth knowing before encoding: Fetch, the one
/// response that carries megabytes (its record sets). Others are small and sized as
/// they are encoded; `None` too where sizing fails.
fn body_size(body: &ResponseKind, version: i16) -> Option<usize> {
    match body {
        ResponseKind::Fetch(fetch) => fetch.compute_size(version).ok(),
        _ => None,
    }
}

/// A mirror RPC (keys 94-104): v0 only, flexible request header v2, response header v1.
async fn handle_mirror_frame(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    raw_key: i16,
    version: i16,
    conn: &ConnInfo,
) -> Result<Bytes, ConnectionError> {
    let peer = &conn.peer;
    let (header, request) = decode_mirror_request(frame, raw_key, version)?;
    tracing::trace!(
        client = %peer,
        client_id = header.client_id.as_ref().map_or("", |c| c.as_str()),
        key = raw_key,
        correlation_id = header.correlation_id,
        "mirror request"
    );
    let authz = api::authz::Authz::new(ctx, conn);
    if let Some(a) = &authz {
        if let Err(refused) = a.admit_mirror(&request) {
            return encode_mirror_response(raw_key, header.correlation_id, &refused);
        }
    }
    let named = matches!(&request, MirrorRequest::DescribeMirrors(r) if r.mirror_names.is_some());
    let mut response = api::mirror::handle(ctx, &header, request).await;
    if let Some(a) = &authz {
        a.filter_mirror_response(named, &mut response);
    }
    encode_mirror_response(raw_key, header.correlation_id, &response)
}

/// Checks the version and decodes the header and body of a mirror request frame (the
/// frame without its size prefix). Bytes after the body are ignored, as kafka-protocol
/// does for the other keys.
fn decode_mirror_request(
    mut frame: Bytes,
    raw_key: i16,
    version: i16,
) -> Result<(RequestHeader, MirrorRequest), ConnectionError> {
    if wire::mirror::check_version(raw_key, version).is_err() {
        return Err(ConnectionError::UnsupportedMirrorVersion {
            key: raw_key,
            version,
        });
    }
    let header = RequestHeader::decode(&mut frame, MIRROR_REQUEST_HEADER_VERSION).map_err(|e| {
        ConnectionError::MirrorDecode {
            key: raw_key,
            message: format!("request header: {e}"),
        }
    })?;
    let request =
        MirrorRequest::decode(raw_key, &mut frame).map_err(|e| ConnectionError::MirrorDecode {
            key: raw_key,
            message: e.to_string(),
        })?;
    Ok((header, request))
}

/// Size prefix, response header v1 and the body of the answer to mirror key `raw_key`.
fn encode_mirror_response(
    raw_key: i16,
    correlation_id: i32,
    response: &MirrorResponse,
) -> Result<Bytes, ConnectionError> {
    if response.api_key() != raw_key {
        return Err(ConnectionError::MirrorEncode {
            key: raw_key,
            message: format!("the handler answered key {}", response.api_key()),
        });
    }
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, MIRROR_RESPONSE_HEADER_VERSION)
        .map_err(|e| ConnectionError::MirrorEncode {
            key: raw_key,
            message: e.to_string(),
        })?;
    response
        .encode(&mut buf)
        .map_err(|e| ConnectionError::MirrorEncode {
            key: raw_key,
            message: e.to_string(),
        })?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| ConnectionError::MirrorEncode {
        key: raw_key,
        message: format!("response of {} bytes", buf.len() - 4),
    })?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::wire::mirror::{keys, DeleteMirrorRequest, SimpleMirrorResponse};

    fn mirror_frame(key: i16, version: i16, request: &MirrorRequest) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(42)
            .with_client_id(Some(StrBytes::from_static_str("tool")))
            .encode(&mut buf, MIRROR_REQUEST_HEADER_VERSION)
            .expect("request header encodes");
        request.encode(&mut buf).expect("request encodes");
        buf.freeze()
    }

    fn delete_request() -> MirrorRequest {
        MirrorRequest::DeleteMirror(DeleteMirrorRequest {
            mirror_name: "m1".into(),
            state_validation_offset: 7,
        })
    }

    #[test]
    fn mirror_request_frame_decodes() {
        let frame = mirror_frame(keys::DELETE_MIRROR, 0, &delete_request());
        let (header, request) =
            decode_mirror_request(frame, keys::DELETE_MIRROR, 0).expect("frame decodes");
        assert_eq!(header.correlation_id, 42);
        assert_eq!(header.client_id.as_deref(), Some("tool"));
        assert_eq!(request, delete_request());
    }

    #[test]
    fn mirror_request_other_versions_are_refused() {
        let frame = mirror_frame(keys::DELETE_MIRROR, 1, &delete_request());
        assert!(matches!(
            decode_mirror_request(frame, keys::DELETE_MIRROR, 1),
            Err(ConnectionError::UnsupportedMirrorVersion {
                key: keys::DELETE_MIRROR,
                version: 1
            })
        ));
    }

    #[test]
    fn mirror_request_truncated_body_is_refused() {
        let frame = mirror_frame(keys::DELETE_MIRROR, 0, &delete_request());
        let cut = frame.slice(..frame.len() - 1);
        assert!(matches!(
            decode_mirror_request(cut, keys::DELETE_MIRROR, 0),
            Err(ConnectionError::MirrorDecode { .. })
        ));
    }

    /// The frame `encode_response` must produce: the plain encoding with its size prefix.
    fn plain_frame(key: ApiKey, version: i16, correlation_id: i32, body: &ResponseKind) -> Bytes {
        let mut plain = BytesMut::new();
        plain.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut plain, key.response_header_version(version))
            .expect("header encodes");
        body.encode(&mut plain, version).expect("body encodes");
        let size = (plain.len() - 4) as i32;
        plain[..4].copy_from_slice(&size.to_be_bytes());
        plain.freeze()
    }

    #[test]
    fn fetch_response_is_sized_exactly_for_every_version() {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        use kafka_protocol::messages::{FetchResponse, TopicName};

        let partitions: Vec<PartitionData> =
            [None, Some(Bytes::new()), Some(vec![7u8; 70_000].into())]
                .into_iter()
                .enumerate()
                .map(|(i, records)| {
                    PartitionData::default()
                        .with_partition_index(i as i32)
                        .with_high_watermark(100 + i as i64)
                        .with_records(records)
                })
                .collect();
        let body = ResponseKind::Fetch(FetchResponse::default().with_responses(vec![
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(partitions),
        ]));
        for version in 4..=16 {
            let frame = encode_response(ApiKey::Fetch, version, 42, &body).expect("encodes");
            // The 70,000-byte record set is sent from its own buffer: no copy.
            assert!(
                frame.chunks().iter().any(|c| c.len() == 70_000),
                "Fetch v{version}: {} chunks",
                frame.chunks().len()
            );
            let frame = frame.to_bytes();
            assert_eq!(
                frame,
                plain_frame(ApiKey::Fetch, version, 42, &body),
                "Fetch v{version}"
            );
            let header_size = ResponseHeader::default()
                .compute_size(ApiKey::Fetch.response_header_version(version))
                .expect("header sized");
            let body_size = body_size(&body, version).expect("Fetch is sized");
            assert_eq!(frame.len(), 4 + header_size + body_size, "Fetch v{version}");
        }
    }

    #[test]
    fn responses_without_a_size_still_encode() {
        use kafka_protocol::messages::SaslHandshakeResponse;

        let body = ResponseKind::SaslHandshake(SaslHandshakeResponse::default());
        assert_eq!(body_size(&body, 1), None);
        let frame = encode_response(ApiKey::SaslHandshake, 1, 7, &body).expect("encodes");
        assert_eq!(frame.chunks().len(), 1);
        assert_eq!(
            frame.to_bytes(),
            plain_frame(ApiKey::SaslHandshake, 1, 7, &body)
        );
    }

    #[test]
    fn mirror_response_frame_layout() {
        let response = MirrorResponse::DeleteMirror(SimpleMirrorResponse::default());
        let bytes = encode_mirror_response(keys::DELETE_MIRROR, 42, &response).expect("encodes");
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 13,      // size
            0, 0, 0, 42,      // correlation id
            0x00,             // header tagged fields
            0, 0, 0, 0,       // ThrottleTimeMs
            0, 0,             // ErrorCode
            0x00,             // ErrorMessage: null
            0x00,             // tagged fields
        ];
        assert_eq!(&bytes[..], expected);
        assert!(matches!(
            encode_mirror_response(keys::CREATE_MIRROR, 42, &response),
            Err(ConnectionError::MirrorEncode { .. })
        ));
    }
}
