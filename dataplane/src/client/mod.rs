//! A small Kafka client: enough of the protocol to talk to a *source* cluster (any
//! Kafka-protocol broker: Twinlog, Apache Kafka, librdkafka's mock cluster, tansu) and to
//! drive a Twinlog broker from tools and tests.
//!
//! - [`codec`] turns kafka-protocol messages into length-prefixed frames and back. No I/O.
//!   Responses are decoded from [`bytes::Bytes`], so Fetch record sets stay slices of the
//!   received frame (no copy) and can be appended exactly as received.
//! - [`KafkaConnection`] is one connection on a glommio executor (a shard): connect with
//!   a timeout, negotiate versions with ApiVersions, then one request at a time.
//! - [`BlockingConnection`] is the same API over `std::net`, for code that runs outside the
//!   shards: the CLI, tests, tools. Never use it on a shard thread.
//! - [`SourceCluster`] knows a cluster by its `bootstrap.servers`, keeps the last
//!   Metadata answer and a pool of connections, one per broker.
//!
//! One request is in flight per connection; callers that want parallelism open several
//! connections. After an I/O error, a timeout, a response that does not match its
//! request, or a request whose future was dropped before its response arrived, a
//! connection is *broken*: every later call fails with [`ClientError::Broken`] and the
//! caller (or [`SourceCluster`]) reconnects.
//!
//! Timeouts: `connect_timeout` bounds each TCP connect; `request_timeout` bounds each
//! socket read and write of a request and its response (so it must exceed a Fetch's
//! `max_wait_ms`). Host names are resolved on glommio's blocking thread pool, never on
//! the shard itself; literal IPs are parsed directly.
//!
//! Produce with `acks = 0` gets no response from a broker: do not send it through this
//! client, the request would wait for its timeout.

pub mod blocking;
pub mod cluster;
pub mod codec;
pub mod conn;
pub mod security;
mod session;
pub mod topic_configs;

use std::collections::BTreeMap;
use std::time::Duration;

pub use blocking::BlockingConnection;
pub use cluster::{
    metadata_request, ClusterMetadata, PartitionMetadata, SourceCluster, TopicMetadata,
    METADATA_VERSION_MAX,
};
pub use codec::{
    check_correlation, decode_raw_response, decode_response, encode_raw_request, encode_request,
};
pub use conn::KafkaConnection;

/// Default time to wait for a TCP connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time to wait for each read and write of a request and its response.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default largest response frame accepted (100 MiB); a larger one is an error.
pub const DEFAULT_RESPONSE_BYTES_MAX: usize = 100 << 20;
/// The name sent in ApiVersions v3+ (`ClientSoftwareName`).
pub const CLIENT_SOFTWARE_NAME: &str = "twinlog";
/// The version sent in ApiVersions v3+ (`ClientSoftwareVersion`).
pub const CLIENT_SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Everything wrong that a client call can report.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A socket call failed (connection refused, reset, name not resolved...).
    #[error("I/O error with {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// Connecting, writing a request or reading its response took longer than allowed.
    #[error("timed out with {addr} while {what}")]
    Timeout { addr: String, what: &'static str },
    /// A message could not be encoded, or a response could not be decoded.
    #[error("protocol error (api key {api_key}): {message}")]
    Protocol { api_key: i16, message: String },
    /// The broker announced a response larger than `response_bytes_max`.
    #[error("response frame of {size} bytes is larger than the limit of {max} bytes")]
    FrameTooLarge { size: i64, max: usize },
    /// The response does not answer the request that was sent: the connection is out of
    /// step with the broker.
    #[error("correlation id {got} in the response, expected {expected}")]
    CorrelationMismatch { expected: i32, got: i32 },
    /// Neither side can speak the version asked for (or the broker does not serve the
    /// API at all: `broker_range` is `None`).
    #[error(
        "api key {api_key} version {version} is not supported (broker serves {broker_range:?})"
    )]
    Unsupported {
        api_key: i16,
        version: i16,
        broker_range: Option<(i16, i16)>,
    },
    /// The broker answered with an error code where the client cannot go on (for example
    /// ApiVersions failing with something other than UNSUPPORTED_VERSION).
    #[error("broker answered api key {api_key} with error code {error_code}")]
    ErrorCode { api_key: i16, error_code: i16 },
    /// No bootstrap or known broker address answered.
    #[error("no broker of {bootstrap} is reachable; last error: {last_error}")]
    NoBrokerReachable {
        bootstrap: String,
        #[source]
        last_error: Box<ClientError>,
    },
    /// The broker id is not in the last metadata (refresh the metadata first).
    #[error("broker {broker_id} is not in the cluster metadata")]
    UnknownBroker { broker_id: i32 },
    /// An earlier error left this connection unusable; open a new one.
    #[error("connection to {addr} is broken by an earlier error")]
    Broken { addr: String },
    /// The broker refused the credentials (SASL), or the TLS handshake failed: the
    /// security settings are wrong, and retrying with them will not help.
    #[error("authentication with {addr} failed: {message}")]
    Authentication { addr: String, message: String },
    /// A malformed address or `bootstrap.servers` string.
    #[error("invalid address {addr:?}: {message}")]
    InvalidAddress { addr: String, message: String },
}

impl ClientError {
    /// True for errors after which the connection cannot be used again.
    pub fn breaks_connection(&self) -> bool {
        matches!(
            self,
            ClientError::Io { .. }
                | ClientError::Timeout { .. }
                | ClientError::FrameTooLarge { .. }
                | ClientError::CorrelationMismatch { .. }
                | ClientError::Broken { .. }
        )
    }
}

/// How a connection is made and how long it may wait.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `client.id` sent in every request header.
    pub client_id: String,
    /// Limit for establishing the TCP connection (to one address).
    pub connect_timeout: Duration,
    /// Limit for each write of a request and each read of its response. A zero duration
    /// is treated as one millisecond.
    pub request_timeout: Duration,
    /// Largest response frame accepted; a larger one breaks the connection with
    /// [`ClientError::FrameTooLarge`] instead of allocating.
    pub response_bytes_max: usize,
    /// TLS and SASL for a secured listener (default: PLAINTEXT).
    pub security: security::ClientSecurity,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            client_id: CLIENT_SOFTWARE_NAME.to_string(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            response_bytes_max: DEFAULT_RESPONSE_BYTES_MAX,
            security: security::ClientSecurity::default(),
        }
    }
}

impl ConnectionConfig {
    /// The defaults with the given client id and connect timeout.
    pub fn new(client_id: &str, connect_timeout: Duration) -> Self {
        ConnectionConfig {
            client_id: client_id.to_string(),
            connect_timeout,
            ..ConnectionConfig::default()
        }
    }
}

/// The API version ranges a broker announced in ApiVersions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiVersionRanges {
    ranges: BTreeMap<i16, (i16, i16)>,
}

impl ApiVersionRanges {
    /// Ranges from `(api_key, min, max)` triples.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (i16, i16, i16)>) -> Self {
        ApiVersionRanges {
            ranges: ranges
                .into_iter()
                .map(|(key, min, max)| (key, (min, max)))
                .collect(),
        }
    }

    /// `(min, max)` the broker serves for `api_key`, `None` when it does not serve it.
    pub fn get(&self, api_key: i16) -> Option<(i16, i16)> {
        self.ranges.get(&api_key).copied()
    }

    /// The highest version both sides speak, `None` when the ranges do not overlap.
    pub fn pick(&self, api_key: i16, ours_min: i16, ours_max: i16) -> Option<i16> {
        let (min, max) = self.get(api_key)?;
        let hi = max.min(ours_max);
        (hi >= min.max(ours_min)).then_some(hi)
    }

    /// Every `(api_key, (min, max))`, by key.
    pub fn iter(&self) -> impl Iterator<Item = (i16, (i16, i16))> + '_ {
        self.ranges.iter().map(|(k, r)| (*k, *r))
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// `host:port` split into its parts; `[v6]:port` loses its brackets.
pub(crate) fn split_host_port(addr: &str) -> Result<(&str, u16), ClientError> {
    let invalid = |message: &str| ClientError::InvalidAddress {
        addr: addr.to_string(),
        message: message.to_string(),
    };
    let (host, port) = addr
        .trim()
        .rsplit_once(':')
        .ok_or_else(|| invalid("expected host:port"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(invalid("empty host"));
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| invalid("port is not a number in 0..=65535"))?;
    Ok((host, port))
}

/// `host:port` of a broker as Metadata describes it (IPv6 hosts in brackets).
pub(crate) fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Maps an I/O error to [`ClientError::Timeout`] or [`ClientError::Io`].
pub(crate) fn io_error(addr: &str, what: &'static str, e: std::io::Error) -> ClientError {
    match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => ClientError::Timeout {
            addr: addr.to_string(),
            what,
        },
        _ => ClientError::Io {
            addr: addr.to_string(),
            source: e,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_parsing() {
        assert_eq!(split_host_port("h1:9092").ok(), Some(("h1", 9092)));
        assert_eq!(split_host_port("[::1]:9092").ok(), Some(("::1", 9092)));
        assert_eq!(split_host_port(" 10.0.0.1:1 ").ok(), Some(("10.0.0.1", 1)));
        assert!(split_host_port("h1").is_err());
        assert!(split_host_port(":9092").is_err());
        assert!(split_host_port("h1:99999").is_err());
        assert_eq!(join_host_port("::1", 9092), "[::1]:9092");
        assert_eq!(join_host_port("h", 1), "h:1");
    }

    #[test]
    fn version_pick_is_highest_common() {
        let r = ApiVersionRanges::from_ranges([(1, 4, 16), (3, 0, 12)]);
        assert_eq!(r.pick(1, 0, 12), Some(12));
        assert_eq!(r.pick(1, 0, 3), None);
        assert_eq!(r.pick(3, 0, 20), Some(12));
        assert_eq!(r.pick(3, 12, 20), Some(12));
        assert_eq!(r.pick(3, 13, 20), None);
        assert_eq!(r.pick(2, 0, 20), None);
        assert_eq!(r.get(1), Some((4, 16)));
    }
}
