//! The operator commands `twinlog mirror ...` and `twinlog topic ...`: admin clients that
//! talk the Kafka protocol to any broker, like `kafka-cluster-mirrors.sh` or `rpk`.
//!
//! Each command opens one [`BlockingConnection`] to `--bootstrap-server`, sends its
//! requests and prints what came back. Every failure prints one line
//! `error: <KAFKA_ERROR_NAME>: <sentence>` on stderr and makes the process exit 1; usage
//! errors exit 2 (clap). Per-item results (one line per topic) go to stdout, their errors
//! to stderr, and any failed item makes the exit code 1.

/// `println!` that ignores a closed stdout (`twinlog topic describe t | head`), where
/// `println!` would panic.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that ignores a closed stdout.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

pub mod mirror;
pub mod topic;

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use dataplane::client::{BlockingConnection, ClientError};
use dataplane::wire::mirror::{MirrorRequest, MirrorResponse};
use kafka_protocol::protocol::Request;
use kafka_protocol::ResponseError;

/// Where the commands connect when `--bootstrap-server` is not given.
pub const DEFAULT_BOOTSTRAP: &str = "127.0.0.1:9092";
/// How long to wait for the TCP connection and for each response.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a command failed. `Display` is the text after `error: `.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot connect to {addr}: {}", connect_reason(.source))]
    Connect { addr: String, source: ClientError },
    #[error("request to {addr} failed: {source}")]
    Client { addr: String, source: ClientError },
    /// The broker answered with a Kafka (or mirror) error code.
    #[error("{}", kafka_error_line(*.code, .message.as_deref()))]
    Kafka { code: i16, message: Option<String> },
    #[error("the broker at {addr} does not serve {api} (api key {api_key}){hint}")]
    Unsupported {
        addr: String,
        api: &'static str,
        api_key: i16,
        hint: &'static str,
    },
    /// Anything else, as a full sentence.
    #[error("{0}")]
    Other(String),
    /// The failure was already printed (per-item errors); only the exit code is left.
    #[error("see above")]
    Reported,
}

fn connect_reason(e: &ClientError) -> String {
    match e {
        ClientError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// Prints a command's outcome and turns it into the process exit code.
pub fn finish(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Reported) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Kafka's name of an error code (`UNKNOWN_TOPIC_OR_PARTITION`), mirror codes included.
pub fn error_name(code: i16) -> String {
    if let Some(name) = dataplane::wire::mirror::errors::name(code) {
        return name.to_string();
    }
    match ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE_{c}"),
        // kafka-protocol names its variants in CamelCase; Kafka's names are the same words
        // in upper snake case.
        Some(e) => upper_snake(&e.to_string()),
    }
}

fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// `NAME: sentence` for an error code and the broker's message (a generic sentence when
/// the broker sent none).
pub fn kafka_error_line(code: i16, message: Option<&str>) -> String {
    match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => format!("{}: {m}", error_name(code)),
        None => format!(
            "{}: the broker rejected the request (error code {code})",
            error_name(code)
        ),
    }
}

/// Fails with the Kafka error when `code` is not 0.
pub fn check_code(code: i16, message: Option<&str>) -> Result<(), CliError> {
    if code == 0 {
        Ok(())
    } else {
        Err(CliError::Kafka {
            code,
            message: message.map(str::to_string),
        })
    }
}

/// A connection to one broker with the error reporting of the commands.
#[derive(Debug)]
pub struct Admin {
    conn: BlockingConnection,
    addr: String,
    /// Connections to the cluster's other brokers, by address, kept between the polls
    /// of a command that asks every broker (`mirror wait`).
    peers: std::collections::BTreeMap<String, Admin>,
}

impl Admin {
    /// Connects to `addr` (`host:port`) and negotiates API versions.
    pub fn connect(addr: &str) -> Result<Admin, CliError> {
        let conn = BlockingConnection::connect(addr, "twinlog-cli", CONNECT_TIMEOUT).map_err(
            |source| CliError::Connect {
                addr: addr.to_string(),
                source,
            },
        )?;
        Ok(Admin {
            conn,
            addr: addr.to_string(),
            peers: std::collections::BTreeMap::new(),
        })
    }

    /// The connection to another broker of the cluster at `addr`, opened on first use
    /// and again after it broke.
    pub fn peer(&mut self, addr: &str) -> Result<&mut Admin, CliError> {
        if self.peers.get(addr).is_some_and(|a| a.conn.is_broken()) {
            self.peers.remove(addr);
        }
        if !self.peers.contains_key(addr) {
            let admin = Admin::connect(addr)?;
            self.peers.insert(addr.to_string(), admin);
        }
        self.peers.get_mut(addr).ok_or_else(|| CliError::Connect {
            addr: addr.to_string(),
            source: dataplane::client::ClientError::Broken {
                addr: addr.to_string(),
            },
        })
    }

    /// Sends a mirror RPC (v0) and decodes its answer.
    pub fn mirror(&mut self, request: &MirrorRequest) -> Result<MirrorResponse, CliError> {
        let api_key = request.api_key();
        let api = mirror_api_name(api_key);
        if self.conn.api_range(api_key).is_none_or(|(min, _)| min > 0) {
            return Err(CliError::Unsupported {
                addr: self.addr.clone(),
                api,
                api_key,
                hint: "; cluster mirroring needs a Twinlog broker",
            });
        }
        let conn = &mut self.conn;
        let client = |source| CliError::Client {
            addr: self.addr.clone(),
            source,
        };
        Ok(dataplane::map_mirror_request!(request, r => conn.send(r, 0).map_err(client)?))
    }

    /// The `host:port` of every broker of the cluster (Metadata), this one's first.
    pub fn broker_addresses(&mut self) -> Result<Vec<String>, CliError> {
        let request = dataplane::client::cluster::metadata_request(Some(&[]), 1);
        let (response, _) = self.kafka(&request, "Metadata", 1, 12)?;
        let mut out = vec![self.addr.clone()];
        for b in response.brokers {
            let addr = format!("{}:{}", b.host, b.port);
            if !out.contains(&addr) {
                out.push(addr);
            }
        }
        Ok(out)
    }

    /// Sends a Kafka request at the highest version both sides speak within
    /// `ours_min..=ours_max`.
    pub fn kafka<R: Request>(
        &mut self,
        request: &R,
        api: &'static str,
        ours_min: i16,
        ours_max: i16,
    ) -> Result<(R::Response, i16), CliError> {
        let version = self.version(R::KEY, api, ours_min, ours_max)?;
        let response = self
            .conn
            .send(request, version)
            .map_err(|source| CliError::Client {
                addr: self.addr.clone(),
                source,
            })?;
        Ok((response, version))
    }

    /// The version of `api_key` this command will use.
    pub fn version(
        &self,
        api_key: i16,
        api: &'static str,
        ours_min: i16,
        ours_max: i16,
    ) -> Result<i16, CliError> {
        self.conn
            .pick_version(api_key, ours_min, ours_max)
            .ok_or(CliError::Unsupported {
                addr: self.addr.clone(),
                api,
                api_key,
                hint: "",
            })
    }
}

fn mirror_api_name(api_key: i16) -> &'static str {
    use dataplane::wire::mirror::keys;
    match api_key {
        keys::CREATE_MIRROR => "CreateMirror",
        keys::ADD_TOPICS_TO_MIRROR => "AddTopicsToMirror",
        keys::REMOVE_TOPICS_FROM_MIRROR => "RemoveTopicsFromMirror",
        keys::LIST_MIRRORS => "ListMirrors",
        keys::DESCRIBE_MIRRORS => "DescribeMirrors",
        keys::READ_MIRROR_STATES => "ReadMirrorStates",
        keys::WRITE_MIRROR_STATES => "WriteMirrorStates",
        keys::PAUSE_MIRROR_TOPICS => "PauseMirrorTopics",
        keys::RESUME_MIRROR_TOPICS => "ResumeMirrorTopics",
        keys::DELETE_MIRROR => "DeleteMirror",
        _ => "a mirror RPC",
    }
}

/// Parses a `--config key=value` argument (clap value parser).
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected key=value, got {s:?}")),
    }
}

/// A Kafka topic id in Kafka's text form: URL-safe base64 without padding (22 chars).
pub fn topic_id_base64(id: &uuid::Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize] as char);
        }
    }
    out
}

/// `s` as a JSON string literal, quotes included.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An optional string as JSON (`null` when absent).
pub fn json_opt_string(s: Option<&str>) -> String {
    s.map_or_else(|| "null".to_string(), json_string)
}

/// A number, or `-` when it is negative (unknown).
pub fn or_dash(n: i64) -> String {
    if n < 0 {
        "-".to_string()
    } else {
        n.to_string()
    }
}

/// Lays out rows under a header with columns padded to the widest cell; the last column
/// is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 < widths.len() {
                let _ = write!(l, "{cell:<w$}  ", w = widths[i]);
            } else {
                l.push_str(cell);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// True when `s` can only be a topic name (Kafka's legal characters: ASCII letters,
/// digits, `.`, `_`, `-`), so that it is not meant as a regular expression. `.` is legal in
/// names and therefore not taken as a regex character.
pub fn is_plain_topic_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A pattern matched against whole topic names, like the broker does (`^(?:p)$`).
pub fn topic_regex(pattern: &str) -> Result<regex::Regex, CliError> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| CliError::Other(format!("invalid topic pattern {pattern:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafka_names() {
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(40), "INVALID_CONFIG");
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(136), "CLUSTER_MIRROR_ALREADY_EXISTS");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(31_000), "UNKNOWN_ERROR_CODE_31000");
        assert_eq!(
            kafka_error_line(136, Some("Mirror m1 already exists")),
            "CLUSTER_MIRROR_ALREADY_EXISTS: Mirror m1 already exists"
        );
    }

    #[test]
    fn topic_ids_print_like_kafka() {
        // Kafka: Uuid(0x0123456789abcdef, 0x0123456789abcdef).toString()
        let id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        assert_eq!(topic_id_base64(&id), "ASNFZ4mrze8BI0VniavN7w");
        assert_eq!(
            topic_id_base64(&uuid::Uuid::nil()),
            "AAAAAAAAAAAAAAAAAAAAAA"
        );
        let max = uuid::Uuid::from_u128(u128::MAX);
        assert_eq!(topic_id_base64(&max), "_____________________w");
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(
            json_string("a\"b\\c\nd\u{1}é"),
            "\"a\\\"b\\\\c\\nd\\u0001é\""
        );
        assert_eq!(json_opt_string(None), "null");
    }

    #[test]
    fn plain_names_and_patterns() {
        assert!(is_plain_topic_name("orders.v1_x-2"));
        assert!(!is_plain_topic_name("orders.*"));
        assert!(!is_plain_topic_name("a|b"));
        assert!(!is_plain_topic_name(""));
        assert!(topic_regex("ord.*").expect("valid").is_match("orders"));
        assert!(!topic_regex("ord").expect("valid").is_match("orders"));
        assert!(topic_regex("(").is_err());
    }

    #[test]
    fn key_values_and_tables() {
        assert_eq!(
            parse_key_value("a.b=c=d"),
            Ok(("a.b".to_string(), "c=d".to_string()))
        );
        assert!(parse_key_value("novalue").is_err());
        let t = table(&["A", "BB"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "A    BB\nxyz  1\n");
    }
}
