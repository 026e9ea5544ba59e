//! Broker configuration: the TOML file `twinlog serve --config` reads, with Kafka's broker
//! config names, plus the topic-level config names that CreateTopics, AlterConfigs and
//! DescribeConfigs speak.
//!
//! Keys are Kafka's dotted names. TOML turns a bare dotted key (`num.partitions = 8`) into
//! nested tables and keeps a quoted one (`"num.partitions" = 8`) whole, so the file is
//! flattened into dotted names before any key is checked; both spellings mean the same
//! thing, and giving one key both ways is an error rather than a silent pick.
//!
//! Every key is checked: an unknown key is an error naming it, because a misspelt
//! retention setting that is silently ignored deletes data on someone else's schedule.
//! Values may be TOML integers and booleans or, as Kafka users write them in
//! `server.properties`, strings holding them (`"1073741824"`, `"true"`).
//!
//! This runs once, on the main thread, before any shard starts, so it uses `std::fs`.
#![allow(dead_code)] // Until `serve` is wired to it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dataplane::log::LogConfig;

/// Kafka's default listener port.
pub const DEFAULT_PORT: u16 = 9092;
/// io_uring memory per shard. glommio registers it in three rings, so 3 x 512 KiB x
/// shards stays under the 8 MiB memlock cap of unprivileged users on small hosts.
pub const DEFAULT_IO_MEMORY_BYTES: usize = 512 << 10;
/// Requests a connection may have in flight before its shard stops reading from it.
pub const DEFAULT_IN_FLIGHT_REQUESTS_MAX: usize = 64;
/// `SO_RCVBUF` / `SO_SNDBUF` for client sockets.
pub const DEFAULT_SOCKET_BUFFER_BYTES: usize = 64 << 10;

const MS_PER_MINUTE: i64 = 60 * 1000;
const MS_PER_HOUR: i64 = 60 * MS_PER_MINUTE;
/// Kafka's `log.roll.hours` and `log.retention.hours` default: one week.
const DEFAULT_WEEK_HOURS: i64 = 168;

/// Why a configuration was rejected. Every variant names the offending key (or file), so
/// the message alone tells the operator what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid TOML in {}: {message}", origin(.path.as_deref()))]
    Syntax {
        /// `None` when the text did not come from a file.
        path: Option<PathBuf>,
        message: String,
    },
    #[error("unknown config key `{key}`")]
    UnknownKey { key: String },
    #[error("config key `{key}` is given twice (once quoted, once as dotted tables)")]
    DuplicateKey { key: String },
    #[error("config key `{key}` is required")]
    MissingKey { key: String },
    #[error("config key `{key}`: expected {expected}, got {value:?}")]
    BadValue {
        key: String,
        /// The value as written (a TOML string without its quotes, anything else as TOML).
        value: String,
        expected: &'static str,
    },
    /// A setting that does not hold together (a listener with no protocol, TLS keys
    /// that do not load, an unknown authorizer, ...): what is wrong, in words.
    #[error("config key `{key}`: {message}")]
    Invalid { key: String, message: String },
}

fn origin(path: Option<&Path>) -> String {
    match path {
        Some(p) => p.display().to_string(),
        None => "config text".to_owned(),
    }
}

/// The broker's settings. Defaults are Kafka's, except where a single-node, single-dir
/// broker differs (noted per field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// Every key the file set, as written (DescribeConfigs reports them as
    /// STATIC_BROKER_CONFIG).
    pub file_keys: BTreeMap<String, String>,
    /// `node.id`.
    pub node_id: i32,
    /// Where the inter-broker listener binds (`inter.broker.listener.name`'s entry of
    /// `listeners`): the address replication, the coordinators and the mirror's own
    /// requests use, and the one the broker registers.
    pub listen: SocketAddr,
    /// The inter-broker listener's entry of `advertised.listeners`; `None` means
    /// `listen`.
    pub advertised_listen: Option<SocketAddr>,
    /// Every client listener of `listeners` (the inter-broker one among them, at
    /// `inter_broker`), each with its protocol's SASL and TLS settings.
    pub listeners: Vec<dataplane::net::ListenerConfig>,
    /// Index of the inter-broker listener in `listeners`.
    pub inter_broker: usize,
    /// How this broker dials the others' inter-broker listener (and its own): the
    /// listener's protocol, its keystore and truststore, and with SASL
    /// `sasl.mechanism.inter.broker.protocol` with the `username` and `password` of the
    /// listener's JAAS config for that mechanism. `sasl: None` on a SASL listener: no
    /// mechanism named (one node only; see `check_roles`).
    pub inter_broker_security: dataplane::client::security::ClientSecurity,
    /// `metrics.listen` (Twinlog): where the Prometheus endpoint (`GET /metrics`) binds,
    /// `host:port`; `None` (the default, or an empty string) leaves it off.
    pub metrics_listen: Option<SocketAddr>,
    /// `log.dirs` (or `log.dir`): the one directory holding every partition log.
    pub data_dir: PathBuf,
    /// `num.partitions`: partitions of an auto-created topic or a CreateTopics request
    /// that leaves the count to the broker.
    pub num_partitions: i32,
    /// `default.replication.factor`: replicas of a topic created with -1.
    pub default_replication_factor: i16,
    /// `offsets.topic.replication.factor` (Twinlog uses it for every internal topic;
    /// `transaction.state.log.replication.factor` is its synonym here), capped at the
    /// cluster's size.
    pub offsets_topic_replication_factor: i16,
    /// `broker.rack`.
    pub broker_rack: Option<String>,
    /// `broker.session.timeout.ms`: a broker not heard from for this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `replica.*`: followers' fetching and the ISR lag limit.
    pub replication: dataplane::fetcher::replica::ReplicationConfig,
    /// `auto.leader.rebalance.enable`, `leader.imbalance.check.interval.seconds`,
    /// `leader.imbalance.per.broker.percentage`.
    pub auto_leader_rebalance: bool,
    pub leader_imbalance_check_interval_seconds: u64,
    pub leader_imbalance_per_broker_percentage: u32,
    /// `auto.create.topics.enable`: create a topic on Metadata for an unknown name.
    pub auto_create_topics_enable: bool,
    /// `authorizer.class.name` set (to Kafka's StandardAuthorizer or AclAuthorizer):
    /// every request is checked against the ACLs, with `super.users` and
    /// `allow.everyone.if.no.acl.found`. `None`: no authorizer, everything allowed.
    pub authorizer: Option<dataplane::acl::AuthorizerConfig>,
    /// `listener.cpu.steering`: each shard's listener sets SO_INCOMING_CPU to its core,
    /// so a connection goes to the shard on the core that received it (see
    /// `dataplane::net::bind`).
    pub listener_cpu_steering: bool,
    /// `socket.request.max.bytes`: the largest request frame read from a client.
    pub socket_request_max_bytes: usize,
    /// `message.max.bytes`: the largest record batch accepted; also the default of the
    /// topic config `max.message.bytes` (`log.max_message_bytes`).
    pub message_max_bytes: usize,
    /// `log.retention.check.interval.ms`: how often each shard runs retention.
    pub log_retention_check_interval_ms: u64,
    /// The `log.*` broker keys: the defaults of every topic's `LogConfig`.
    pub log: LogConfig,
    /// `log.cleaner.*`: the shards' log cleaners.
    pub cleaner: dataplane::log::cleaner::CleanerConfig,
    /// `controller.quorum.voters` (`id@host:port,...`): the controllers of the metadata
    /// quorum by node id (this node's own among them exactly when it is a controller);
    /// empty: this node alone.
    pub quorum_voters: BTreeMap<i32, SocketAddr>,
    /// `process.roles`: what this node is (both, unless set).
    pub roles: ProcessRoles,
    /// `controller.quorum.bootstrap.servers`: controllers of a dynamic quorum (KIP-853)
    /// to dial; the voter set itself is in the metadata log.
    pub quorum_bootstrap: Vec<SocketAddr>,
    /// The `CONTROLLER://` entry of `listeners` (named by `controller.listener.names`):
    /// where a controller of a dynamic quorum listens for the others.
    pub controller_listen: Option<SocketAddr>,
    /// A `CONTROLLER:SSL` listener's keys: its server side (client certificates
    /// required) and the client side this member dials the others with (the same
    /// keystore and truststore). `None`: the quorum's links are plain TCP.
    pub controller_tls: Option<(
        dataplane::net::tls::TlsConfig,
        dataplane::client::security::ClientTls,
    )>,
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets` when created.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.segment.bytes`: its segment size when created.
    pub offsets_topic_segment_bytes: u64,
    /// `transaction.state.log.segment.bytes`: `__transaction_state`'s segment size when
    /// created.
    pub transaction_state_log_segment_bytes: u64,
    /// `group.initial.rebalance.delay.ms`.
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.min.session.timeout.ms`.
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub group_max_session_timeout_ms: i32,
    /// `offsets.retention.minutes`: how long committed offsets of an empty group live.
    pub offsets_retention_minutes: i64,
    /// `transaction.state.log.num.partitions`: partitions of `__transaction_state` when
    /// created.
    pub transaction_state_log_num_partitions: i32,
    /// `mirror.state.topic.num.partitions`: partitions of `__mirror_state` (created with
    /// the first mirror; must not change afterwards).
    pub mirror_state_topic_num_partitions: i32,
    /// `mirror.failed.retry.initial.backoff.ms`: first wait before a FAILED mirror
    /// partition is retried.
    pub mirror_failed_retry_initial_backoff_ms: i64,
    /// `mirror.failed.retry.max.backoff.ms`: longest wait between retries.
    pub mirror_failed_retry_max_backoff_ms: i64,
    /// `mirror.failed.retry.max.attempts`: retries before manual intervention (0: none).
    pub mirror_failed_retry_max_attempts: i32,
    /// `mirror.metadata.refresh.interval.ms`: how often each mirror's metadata sync
    /// (source cluster id, topic configs, partitions, group offsets) runs, unless the
    /// mirror sets its own.
    pub mirror_metadata_refresh_interval_ms: i64,
    /// `transaction.max.timeout.ms`: the longest transaction timeout a producer may ask for.
    pub transaction_max_timeout_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often timed-out
    /// transactions are looked for.
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: i32,
    /// `[[shard]]` tables. Empty until `resolve_shards` when the file has none, then one
    /// per available core.
    pub shards: Vec<ShardConfig>,
}

/// One data-plane shard (a glommio executor pinned to `core`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    /// `core`: the CPU this shard's executor is pinned to.
    pub core: usize,
    /// `io.memory.bytes`: io_uring memory registered by the executor (in three rings).
    pub io_memory_bytes: usize,
    /// `in.flight.requests.max`: requests per connection in flight before reads pause.
    pub in_flight_requests_max: usize,
    /// `socket.receive.buffer.bytes`: `SO_RCVBUF` of client sockets.
    pub receive_buffer_bytes: usize,
    /// `socket.send.buffer.bytes`: `SO_SNDBUF` of client sockets.
    pub send_buffer_bytes: usize,
    /// `inline.write.max.bytes`: buffered log writes at most this large are made in
    /// place when the kernel takes them without waiting, instead of through io_uring
    /// (0: never).
    pub inline_write_max_bytes: usize,
    /// `spin.before.park.us`: how long the executor keeps polling for work before it
    /// sleeps (0: sleeps at once). Spinning saves the sleep and wake-up between
    /// closely spaced requests (small batches) at the price of a busier idle core.
    pub spin_before_park_us: u64,
}

impl ShardConfig {
    /// A shard on `core` with default settings.
    pub fn on_core(core: usize) -> Self {
        ShardConfig {
            core,
            io_memory_bytes: DEFAULT_IO_MEMORY_BYTES,
            in_flight_requests_max: DEFAULT_IN_FLIGHT_REQUESTS_MAX,
            receive_buffer_bytes: DEFAULT_SOCKET_BUFFER_BYTES,
            send_buffer_bytes: DEFAULT_SOCKET_BUFFER_BYTES,
            inline_write_max_bytes: dataplane::log::fs::DEFAULT_INLINE_WRITE_MAX_BYTES,
            spin_before_park_us: 0,
        }
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let log = LogConfig {
            segment_ms: DEFAULT_WEEK_HOURS * MS_PER_HOUR,
            retention_ms: DEFAULT_WEEK_HOURS * MS_PER_HOUR,
            ..LogConfig::default()
        };
        BrokerConfig {
            file_keys: BTreeMap::new(),
            node_id: 0,
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), DEFAULT_PORT),
            advertised_listen: None,
            listeners: vec![dataplane::net::ListenerConfig::plaintext(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                DEFAULT_PORT,
            ))],
            inter_broker: 0,
            inter_broker_security: Default::default(),
            metrics_listen: None,
            data_dir: PathBuf::from("./data"),
            num_partitions: 1,
            default_replication_factor: 1,
            offsets_topic_replication_factor: 3,
            broker_rack: None,
            broker_session_timeout_ms: 9_000,
            replication: dataplane::fetcher::replica::ReplicationConfig::default(),
            auto_leader_rebalance: true,
            leader_imbalance_check_interval_seconds: 300,
            leader_imbalance_per_broker_percentage: 10,
            auto_create_topics_enable: true,
            authorizer: None,
            listener_cpu_steering: true,
            socket_request_max_bytes: 104_857_600,
            message_max_bytes: log.max_message_bytes,
            log_retention_check_interval_ms: 300_000,
            log,
            cleaner: dataplane::log::cleaner::CleanerConfig::default(),
            quorum_voters: BTreeMap::new(),
            roles: ProcessRoles::default(),
            quorum_bootstrap: Vec::new(),
            controller_listen: None,
            controller_tls: None,
            offsets_topic_num_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            transaction_state_log_segment_bytes: 104_857_600,
            group_initial_rebalance_delay_ms: 3_000,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            offsets_retention_minutes: 10_080,
            transaction_state_log_num_partitions: 50,
            mirror_state_topic_num_partitions: 50,
            mirror_failed_retry_initial_backoff_ms: 1000,
            mirror_failed_retry_max_backoff_ms: 300_000,
            mirror_failed_retry_max_attempts: 100,
            mirror_metadata_refresh_interval_ms: 60_000,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            shards: Vec::new(),
        }
    }
}

/// Broker-level keys accepted at the top level of the file (`[[shard]]` aside).
pub const BROKER_CONFIG_NAMES: &[&str] = &[
    "node.id",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "sasl.mechanism.inter.broker.protocol",
    "metrics.listen",
    "log.dirs",
    "log.dir",
    "num.partitions",
    "default.replication.factor",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "broker.rack",
    "broker.session.timeout.ms",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds",
    "leader.imbalance.per.broker.percentage",
    "replica.lag.time.max.ms",
    "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.wait.max.ms",
    "replica.fetch.min.bytes",
    "replica.fetch.backoff.ms",
    "auto.create.topics.enable",
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "listener.cpu.steering",
    "socket.request.max.bytes",
    "message.max.bytes",
    "log.retention.check.interval.ms",
    "log.segment.bytes",
    "log.roll.ms",
    "log.roll.hours",
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.retention.bytes",
    "log.index.interval.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.direct.io",
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    "log.cleanup.policy",
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "producer.id.expiration.ms",
    "offsets.topic.num.partitions",
    "offsets.topic.segment.bytes",
    "transaction.state.log.segment.bytes",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "offsets.retention.minutes",
    "transaction.state.log.num.partitions",
    "mirror.state.topic.num.partitions",
    "mirror.failed.retry.initial.backoff.ms",
    "mirror.failed.retry.max.backoff.ms",
    "mirror.failed.retry.max.attempts",
    "mirror.metadata.refresh.interval.ms",
    "transaction.max.timeout.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
];

/// Keys accepted inside a `[[shard]]` table.
pub const SHARD_CONFIG_NAMES: &[&str] = &[
    "core",
    "io.memory.bytes",
    "in.flight.requests.max",
    "socket.receive.buffer.bytes",
    "socket.send.buffer.bytes",
    "inline.write.max.bytes",
    "spin.before.park.us",
];

impl BrokerConfig {
    /// Reads and parses the config file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, Some(path))
    }

    /// Parses config text; keys not in the text keep their defaults.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        Self::parse(text, None)
    }

    fn parse(text: &str, path: Option<&Path>) -> Result<Self, ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    path: path.map(Path::to_owned),
                    message: e.to_string().trim_end().to_owned(),
                })?;
        let mut keys = BTreeMap::new();
        let mut shard_tables = None;
        for (key, value) in table {
            if key == "shard" {
                shard_tables = Some(value);
            } else {
                flatten(key, value, &mut keys)?;
            }
        }
        if let Some(key) = keys.keys().find(|k| k.starts_with("shard.")) {
            // A quoted `"shard.core"` at the top level: the author meant a [[shard]].
            return Err(not_shard_array(key, &keys[key]));
        }
        if let Some(key) = keys
            .keys()
            .find(|k| !BROKER_CONFIG_NAMES.contains(&k.as_str()) && !is_listener_key(k))
        {
            return Err(ConfigError::UnknownKey { key: key.clone() });
        }
        let mut config = BrokerConfig::default();
        config.apply_broker_keys(&keys)?;
        config.check_roles(&keys)?;
        config.file_keys = keys
            .iter()
            .map(|(k, v)| (k.clone(), Scalar::from_toml(v).shown()))
            .collect();
        if let Some(value) = shard_tables {
            config.shards = parse_shards(value)?;
            check_distinct_cores(&config.shards)?;
        }
        Ok(config)
    }

    /// `listeners`, `advertised.listeners`, `listener.security.protocol.map` and
    /// `inter.broker.listener.name` (or `security.inter.broker.protocol`), with each
    /// listener's SASL and TLS keys. Returns the controller listener's address, if
    /// `listeners` names one.
    fn apply_listeners(
        &mut self,
        keys: &BTreeMap<String, toml::Value>,
        controller_names: &[String],
    ) -> Result<Option<SocketAddr>, ConfigError> {
        use dataplane::net::{ListenerConfig, SecurityProtocol};
        let get = |name: &str| {
            keys.get_key_value(name)
                .map(|(k, v)| (k.as_str(), Scalar::from_toml(v)))
        };
        let listener_error = |key: &str, message: String| ConfigError::Invalid {
            key: key.to_owned(),
            message,
        };
        // Kafka's default map: each protocol's own name, and the controller listeners
        // as PLAINTEXT.
        let mut protocols: BTreeMap<String, SecurityProtocol> = SecurityProtocol::ALL
            .into_iter()
            .map(|p| (p.name().to_owned(), p))
            .collect();
        for name in controller_names {
            protocols.insert(name.clone(), SecurityProtocol::Plaintext);
        }
        if let Some((k, v)) = get("listener.security.protocol.map") {
            protocols.clear();
            for item in v.string(k, PROTOCOL_MAP_EXPECTED)?.split(',') {
                let item = item.trim();
                if item.is_empty() {
                    continue;
                }
                let (name, protocol) = item
                    .split_once(':')
                    .and_then(|(n, p)| Some((n.trim(), SecurityProtocol::parse(p)?)))
                    .filter(|(n, _)| !n.is_empty())
                    .ok_or_else(|| bad_value(k, &v, PROTOCOL_MAP_EXPECTED))?;
                protocols.insert(name.to_ascii_uppercase(), protocol);
            }
        }
        let mut controller = None;
        if let Some((k, v)) = get("listeners") {
            let mut listeners: Vec<ListenerConfig> = Vec::new();
            for item in v.string(k, LISTENER_EXPECTED)?.split(',').map(str::trim) {
                if item.is_empty() {
                    continue;
                }
                let (name, addr) = listener_entry(item);
                let addr = parse_listener(k, addr)?;
                if controller_names.contains(&name) {
                    if controller.replace(addr).is_some() {
                        return Err(bad_value(k, &v, LISTENER_EXPECTED));
                    }
                    continue;
                }
                let protocol = *protocols.get(&name).ok_or_else(|| {
                    listener_error(
                        k,
                        format!("listener {name} has no security protocol: map it in listener.security.protocol.map (e.g. {name}:SASL_SSL)"),
                    )
                })?;
                if listeners.iter().any(|l| l.name == name) {
                    return Err(listener_error(k, format!("listener {name} is named twice")));
                }
                listeners.push(ListenerConfig {
                    name,
                    protocol,
                    bind: addr,
                    advertised: None,
                    sasl: None,
                    tls: None,
                });
            }
            if !listeners.is_empty() {
                self.listeners = listeners;
            }
        }
        if let Some((k, v)) = get("advertised.listeners") {
            for item in v.string(k, LISTENER_EXPECTED)?.split(',').map(str::trim) {
                if item.is_empty() {
                    continue;
                }
                let (name, addr) = listener_entry(item);
                if controller_names.contains(&name) {
                    continue;
                }
                let addr = parse_listener(k, addr)?;
                if addr.ip().is_unspecified() || addr.port() == 0 {
                    return Err(bad_value(k, &v, ADVERTISED_EXPECTED));
                }
                let only_one = self.listeners.len() == 1 && !item.contains("://");
                let index = match self.listeners.iter().position(|l| l.name == name) {
                    Some(i) => i,
                    // One listener: a bare `host:port` advertises it, whatever its name.
                    None if only_one => 0,
                    None => {
                        return Err(listener_error(
                            k,
                            format!("{name} is not a listener of `listeners`"),
                        ))
                    }
                };
                self.listeners[index].advertised = Some(addr);
            }
        }
        self.inter_broker =
            match (
                get("inter.broker.listener.name"),
                get("security.inter.broker.protocol"),
            ) {
                (Some(_), Some(_)) => return Err(listener_error(
                    "inter.broker.listener.name",
                    "set inter.broker.listener.name or security.inter.broker.protocol, not both"
                        .into(),
                )),
                (Some((k, v)), None) | (None, Some((k, v))) => {
                    let name = v.string(k, "a listener name")?.trim().to_ascii_uppercase();
                    self.listeners
                        .iter()
                        .position(|l| l.name == name)
                        .ok_or_else(|| {
                            listener_error(k, format!("{name} is not a listener of `listeners`"))
                        })?
                }
                // Kafka's default is the PLAINTEXT listener; a broker with one listener
                // talks to itself on that one.
                (None, None) => self
                    .listeners
                    .iter()
                    .position(|l| l.name == "PLAINTEXT")
                    .or((self.listeners.len() == 1).then_some(0))
                    .ok_or_else(|| {
                        listener_error(
                            "inter.broker.listener.name",
                            "no PLAINTEXT listener: name the listener brokers use for each other"
                                .into(),
                        )
                    })?,
            };
        for i in 0..self.listeners.len() {
            let (name, protocol) = (self.listeners[i].name.clone(), self.listeners[i].protocol);
            if protocol.uses_sasl() {
                self.listeners[i].sasl = Some(Arc::new(sasl_config(keys, &name)?));
            }
            if protocol.uses_tls() {
                self.listeners[i].tls = Some(Arc::new(tls_config(keys, &name)?));
            }
        }
        let inter_broker = &self.listeners[self.inter_broker];
        self.listen = inter_broker.bind;
        self.advertised_listen = inter_broker.advertised;
        self.inter_broker_security =
            inter_broker_security(keys, &inter_broker.name, inter_broker.protocol)?;
        // The quorum's links: PLAINTEXT or SSL (an unmapped controller name is
        // PLAINTEXT, as before).
        if let Some(name) = controller_names.first() {
            self.controller_tls = match protocols.get(name).copied() {
                None | Some(SecurityProtocol::Plaintext) => None,
                Some(SecurityProtocol::Ssl) => Some(controller_tls(keys, name)?),
                Some(other) => {
                    return Err(listener_error(
                        "listener.security.protocol.map",
                        format!("the controller listener {name} is {}: the quorum's links speak PLAINTEXT or SSL with client certificates, not SASL", other.name()),
                    ))
                }
            };
        }
        Ok(controller)
    }

    /// The client listeners to bind, the inter-broker one at `listen` (which
    /// `--listen` may have moved) and advertising `advertised()`.
    pub fn client_listeners(&self) -> Vec<dataplane::net::ListenerConfig> {
        let mut listeners = self.listeners.clone();
        if let Some(l) = listeners.get_mut(self.inter_broker) {
            l.bind = self.listen;
            l.advertised = self.advertised_listen;
        }
        listeners
    }

    fn apply_broker_keys(
        &mut self,
        keys: &BTreeMap<String, toml::Value>,
    ) -> Result<(), ConfigError> {
        let get = |name: &str| {
            keys.get_key_value(name)
                .map(|(k, v)| (k.as_str(), Scalar::from_toml(v)))
        };

        if let Some((k, v)) = get("node.id") {
            self.node_id = int_in(k, &v, NON_NEGATIVE_I32)? as i32;
        }
        let controller_names: Vec<String> = match get("controller.listener.names") {
            Some((k, v)) => v
                .string(k, "listener names, comma-separated")?
                .split(',')
                .map(|n| n.trim().to_ascii_uppercase())
                .filter(|n| !n.is_empty())
                .collect(),
            None => vec!["CONTROLLER".to_string()],
        };
        if let Some(controller) = self.apply_listeners(keys, &controller_names)? {
            self.controller_listen = Some(controller);
        }
        if let Some((k, v)) = get("controller.quorum.bootstrap.servers") {
            let text = v.string(k, BOOTSTRAP_EXPECTED)?;
            self.quorum_bootstrap = text
                .split(',')
                .map(str::trim)
                .filter(|i| !i.is_empty())
                .map(|i| {
                    parse_listener(k, i)
                        .ok()
                        .filter(|a| !a.ip().is_unspecified() && a.port() != 0)
                        .ok_or_else(|| bad_value(k, &v, BOOTSTRAP_EXPECTED))
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some((k, v)) = get("metrics.listen") {
            let raw = v.string(k, METRICS_LISTEN_EXPECTED)?;
            self.metrics_listen = match raw.trim() {
                "" => None,
                text => Some(
                    parse_listener(k, text)
                        .map_err(|_| bad_value(k, &v, METRICS_LISTEN_EXPECTED))?,
                ),
            };
        }
        // Kafka: `log.dirs` wins over `log.dir`.
        for name in ["log.dir", "log.dirs"] {
            if let Some(v) = keys.get(name) {
                self.data_dir = parse_data_dir(name, v)?;
            }
        }
        if let Some((k, v)) = get("num.partitions") {
            self.num_partitions = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        let factor = IntRule {
            min: 1,
            max: i16::MAX as i64,
            expected: "a replication factor from 1 to 32767",
        };
        if let Some((k, v)) = get("default.replication.factor") {
            self.default_replication_factor = int_in(k, &v, factor)? as i16;
        }
        for name in [
            "transaction.state.log.replication.factor",
            "offsets.topic.replication.factor",
        ] {
            if let Some((k, v)) = get(name) {
                self.offsets_topic_replication_factor = int_in(k, &v, factor)? as i16;
            }
        }
        if let Some((k, v)) = get("broker.rack") {
            let rack = v.string(k, "a rack name")?;
            self.broker_rack = (!rack.is_empty()).then_some(rack);
        }
        if let Some((k, v)) = get("broker.session.timeout.ms") {
            self.broker_session_timeout_ms = int_in(k, &v, POSITIVE_I32)? as u64;
        }
        for name in ["min.insync.replicas", "unclean.leader.election.enable"] {
            if let Some((k, v)) = get(name) {
                let text = match v {
                    Scalar::Int(i) => i.to_string(),
                    Scalar::Bool(b) => b.to_string(),
                    Scalar::Str(s) => s.to_string(),
                    Scalar::Other(o) => o,
                };
                let expected = if name == "min.insync.replicas" {
                    "a positive integer"
                } else {
                    "true or false"
                };
                dataplane::log::config::apply_topic_config(&mut self.log, k, &text).map_err(
                    |_| ConfigError::BadValue {
                        key: k.to_string(),
                        value: text.clone(),
                        expected,
                    },
                )?;
            }
        }
        if let Some((k, v)) = get("auto.leader.rebalance.enable") {
            self.auto_leader_rebalance = v.boolean(k)?;
        }
        if let Some((k, v)) = get("leader.imbalance.check.interval.seconds") {
            self.leader_imbalance_check_interval_seconds = int_in(k, &v, POSITIVE_I32)? as u64;
        }
        if let Some((k, v)) = get("leader.imbalance.per.broker.percentage") {
            let rule = IntRule {
                min: 0,
                max: 100,
                expected: "a percentage from 0 to 100",
            };
            self.leader_imbalance_per_broker_percentage = int_in(k, &v, rule)? as u32;
        }
        if let Some((k, v)) = get("replica.lag.time.max.ms") {
            self.replication.lag_time_max_ms = int_in(k, &v, POSITIVE_I32)?;
        }
        if let Some((k, v)) = get("replica.fetch.max.bytes") {
            self.replication.fetch_max_bytes = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("replica.fetch.response.max.bytes") {
            self.replication.fetch_response_max_bytes = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("replica.fetch.wait.max.ms") {
            self.replication.fetch_wait_max_ms = int_in(k, &v, NON_NEGATIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("replica.fetch.min.bytes") {
            self.replication.fetch_min_bytes = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("replica.fetch.backoff.ms") {
            self.replication.fetch_backoff_ms = int_in(k, &v, NON_NEGATIVE_I32)? as u64;
        }
        if let Some((k, v)) = get("auto.create.topics.enable") {
            self.auto_create_topics_enable = v.boolean(k)?;
        }
        if let Some((k, v)) = get("authorizer.class.name") {
            let class = v.string(k, "an authorizer class name")?;
            self.authorizer = match class.trim() {
                "" => None,
                c if dataplane::acl::AUTHORIZER_CLASSES.contains(&c) => {
                    Some(dataplane::acl::AuthorizerConfig::default())
                }
                c => {
                    return Err(ConfigError::Invalid {
                        key: k.to_owned(),
                        message: format!(
                            "unknown authorizer `{c}`; Twinlog's ACL authorizer answers to {}",
                            dataplane::acl::AUTHORIZER_CLASSES.join(" or ")
                        ),
                    })
                }
            };
        }
        if let Some(authorizer) = self.authorizer.as_mut() {
            if let Some((k, v)) = get("super.users") {
                authorizer.super_users = dataplane::acl::AuthorizerConfig::parse_super_users(
                    &v.string(k, "principals separated by ;")?,
                )
                .map_err(|message| ConfigError::Invalid {
                    key: k.to_owned(),
                    message,
                })?;
            }
            if let Some((k, v)) = get("allow.everyone.if.no.acl.found") {
                authorizer.allow_if_none = v.boolean(k)?;
            }
        }
        if let Some((k, v)) = get("listener.cpu.steering") {
            self.listener_cpu_steering = v.boolean(k)?;
        }
        if let Some((k, v)) = get("socket.request.max.bytes") {
            self.socket_request_max_bytes = to_usize(k, int_in(k, &v, POSITIVE_I32)?)?;
        }
        if let Some((k, v)) = get("message.max.bytes") {
            LogField::MaxMessageBytes.apply(&mut self.log, k, &v)?;
            self.message_max_bytes = self.log.max_message_bytes;
        }
        if let Some((k, v)) = get("offsets.topic.num.partitions") {
            self.offsets_topic_num_partitions = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("group.initial.rebalance.delay.ms") {
            self.group_initial_rebalance_delay_ms = int_in(k, &v, NON_NEGATIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("group.min.session.timeout.ms") {
            self.group_min_session_timeout_ms = int_in(k, &v, NON_NEGATIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("group.max.session.timeout.ms") {
            self.group_max_session_timeout_ms = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("offsets.retention.minutes") {
            self.offsets_retention_minutes = int_in(k, &v, POSITIVE_I32)?;
        }
        if let Some((k, v)) = get("offsets.topic.segment.bytes") {
            self.offsets_topic_segment_bytes = int_in(k, &v, POSITIVE_I32)? as u64;
        }
        if let Some((k, v)) = get("transaction.state.log.segment.bytes") {
            self.transaction_state_log_segment_bytes = int_in(k, &v, POSITIVE_I32)? as u64;
        }
        if let Some((k, v)) = get("transaction.state.log.num.partitions") {
            self.transaction_state_log_num_partitions = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("mirror.state.topic.num.partitions") {
            self.mirror_state_topic_num_partitions = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("mirror.failed.retry.initial.backoff.ms") {
            self.mirror_failed_retry_initial_backoff_ms = int_in(k, &v, POSITIVE_I32)?;
        }
        if let Some((k, v)) = get("mirror.failed.retry.max.backoff.ms") {
            self.mirror_failed_retry_max_backoff_ms = int_in(k, &v, POSITIVE_I32)?;
        }
        if let Some((k, v)) = get("mirror.failed.retry.max.attempts") {
            self.mirror_failed_retry_max_attempts = int_in(k, &v, NON_NEGATIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("mirror.metadata.refresh.interval.ms") {
            self.mirror_metadata_refresh_interval_ms = int_in(k, &v, POSITIVE_I32)?;
        }
        if let Some((k, v)) = get("transaction.max.timeout.ms") {
            self.transaction_max_timeout_ms = int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("transaction.abort.timed.out.transaction.cleanup.interval.ms") {
            self.transaction_abort_timed_out_transaction_cleanup_interval_ms =
                int_in(k, &v, POSITIVE_I32)? as i32;
        }
        if let Some((k, v)) = get("log.retention.check.interval.ms") {
            self.log_retention_check_interval_ms = int_in(k, &v, POSITIVE_I64)? as u64;
        }
        if let Some((k, v)) = get("log.segment.bytes") {
            LogField::SegmentBytes.apply(&mut self.log, k, &v)?;
        }
        // Kafka: `log.roll.ms` wins over `log.roll.hours`. Each unit given is still checked
        // (weakest first, so the strongest is stored last): a bad value is never hidden
        // by a winning one.
        if let Some((k, v)) = get("log.roll.hours") {
            self.log.segment_ms = int_in(k, &v, POSITIVE_I32)? * MS_PER_HOUR;
        }
        if let Some((k, v)) = get("log.roll.ms") {
            LogField::SegmentMs.apply(&mut self.log, k, &v)?;
        }
        // Kafka: `log.retention.ms` wins over `.minutes`, which wins over `.hours`.
        if let Some((k, v)) = get("log.retention.hours") {
            self.log.retention_ms = unlimited_or_scaled(k, &v, MS_PER_HOUR)?;
        }
        if let Some((k, v)) = get("log.retention.minutes") {
            self.log.retention_ms = unlimited_or_scaled(k, &v, MS_PER_MINUTE)?;
        }
        if let Some((k, v)) = get("log.retention.ms") {
            LogField::RetentionMs.apply(&mut self.log, k, &v)?;
        }
        if let Some((k, v)) = get("log.retention.bytes") {
            LogField::RetentionBytes.apply(&mut self.log, k, &v)?;
        }
        if let Some((k, v)) = get("log.index.interval.bytes") {
            LogField::IndexIntervalBytes.apply(&mut self.log, k, &v)?;
        }
        if let Some((k, v)) = get("log.flush.interval.messages") {
            LogField::FlushMessages.apply(&mut self.log, k, &v)?;
        }
        if let Some((k, v)) = get("log.flush.interval.ms") {
            LogField::FlushMs.apply(&mut self.log, k, &v)?;
        }
        if let Some((k, v)) = get("log.direct.io") {
            self.log.direct_io = v.boolean(k)?;
        }
        if let Some((k, v)) = get("producer.id.expiration.ms") {
            self.log.producer_id_expiration_ms = int_in(k, &v, POSITIVE_I32)?;
        }
        // Topic defaults named after the cleaner, checked as the topic configs are.
        for (broker_key, topic_key, expected) in CLEANER_TOPIC_DEFAULTS {
            if let Some((k, v)) = get(broker_key) {
                dataplane::log::config::apply_topic_config(&mut self.log, topic_key, &v.shown())
                    .map_err(|_| bad_value(k, &v, expected))?;
            }
        }
        if let Some((k, v)) = get("process.roles") {
            let roles = v.string(k, PROCESS_ROLES_EXPECTED)?;
            let mut set: Vec<&str> = roles.split(',').map(str::trim).collect();
            set.sort_unstable();
            self.roles = match set.as_slice() {
                ["broker", "controller"] => ProcessRoles::default(),
                ["broker"] => ProcessRoles {
                    broker: true,
                    controller: false,
                },
                ["controller"] => ProcessRoles {
                    broker: false,
                    controller: true,
                },
                _ => return Err(bad_value(k, &v, PROCESS_ROLES_EXPECTED)),
            };
        }
        if let Some((k, v)) = get("controller.quorum.voters") {
            let text = v.string(k, VOTERS_EXPECTED)?;
            let mut voters = BTreeMap::new();
            for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                let (id, addr) = item
                    .split_once('@')
                    .ok_or_else(|| bad_value(k, &v, VOTERS_EXPECTED))?;
                let id: i32 = id
                    .trim()
                    .parse()
                    .map_err(|_| bad_value(k, &v, VOTERS_EXPECTED))?;
                let addr: SocketAddr = addr
                    .trim()
                    .parse()
                    .map_err(|_| bad_value(k, &v, VOTERS_EXPECTED))?;
                if id < 0 || voters.insert(id, addr).is_some() {
                    return Err(bad_value(k, &v, VOTERS_EXPECTED));
                }
            }
            self.quorum_voters = voters;
        }
        if let Some((k, v)) = get("log.cleaner.enable") {
            self.cleaner.enable = v.boolean(k)?;
        }
        if let Some((k, v)) = get("log.cleaner.threads") {
            self.cleaner.threads = int_in(k, &v, POSITIVE_I32)? as usize;
        }
        if let Some((k, v)) = get("log.cleaner.dedupe.buffer.size") {
            let rule = IntRule {
                min: 1 << 20,
                max: i64::MAX,
                expected: "at least 1048576 bytes",
            };
            self.cleaner.dedupe_buffer_size = int_in(k, &v, rule)? as u64;
        }
        if let Some((k, v)) = get("log.cleaner.io.buffer.load.factor") {
            let f = v
                .shown()
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| *f > 0.0 && *f <= 1.0);
            let f = f.ok_or_else(|| bad_value(k, &v, "a number in (0, 1]"))?;
            self.cleaner.io_buffer_load_factor = dataplane::log::config::Ratio::from_f64(f);
        }
        if let Some((k, v)) = get("log.cleaner.io.max.bytes.per.second") {
            let f = v.shown().trim().parse::<f64>().ok().filter(|f| *f > 0.0);
            let f = f.ok_or_else(|| bad_value(k, &v, "a positive number of bytes per second"))?;
            // Kafka's default, Double.MAX_VALUE, means unthrottled.
            self.cleaner.io_max_bytes_per_second = (f < 1e18).then_some(f as u64);
        }
        if let Some((k, v)) = get("log.cleaner.backoff.ms") {
            self.cleaner.backoff_ms = int_in(k, &v, POSITIVE_I64)? as u64;
        }
        Ok(())
    }

    /// Command-line flags win over the file: a flag given replaces the file's value.
    pub fn apply_overrides(&mut self, data_dir: Option<PathBuf>, listen: Option<SocketAddr>) {
        if let Some(dir) = data_dir {
            self.data_dir = dir;
        }
        if let Some(addr) = listen {
            self.listen = addr;
            self.listeners[self.inter_broker].bind = addr;
        }
    }

    /// Fills in one default shard per core `0..available_cores` when the file named no
    /// `[[shard]]`, and checks that every shard's core exists and is used once.
    pub fn resolve_shards(&mut self, available_cores: usize) -> Result<(), ConfigError> {
        let available_cores = available_cores.max(1);
        if self.shards.is_empty() {
            self.shards = (0..available_cores).map(ShardConfig::on_core).collect();
            return Ok(());
        }
        check_distinct_cores(&self.shards)?;
        if let Some(shard) = self.shards.iter().find(|s| s.core >= available_cores) {
            return Err(ConfigError::BadValue {
                key: "shard.core".to_owned(),
                value: shard.core.to_string(),
                expected: "a core id below the number of available cores",
            });
        }
        Ok(())
    }

    /// Bytes of locked memory the shards need (`RLIMIT_MEMLOCK`): glommio registers each
    /// executor's io memory in three rings. Call after `resolve_shards`.
    pub fn memlock_bytes_needed(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.io_memory_bytes)
            .fold(0usize, usize::saturating_add)
            .saturating_mul(3)
    }

    /// `process.roles` against `controller.quorum.voters`, as KRaft checks them: a node
    /// is a voter exactly when it is a controller, and a node with one role belongs to
    /// a quorum.
    fn check_roles(&self, keys: &BTreeMap<String, toml::Value>) -> Result<(), ConfigError> {
        let shown = |key: &str| {
            keys.get(key)
                .map(|v| Scalar::from_toml(v).shown())
                .unwrap_or_default()
        };
        let inter_broker = &self.listeners[self.inter_broker];
        if inter_broker.protocol.uses_sasl()
            && self.inter_broker_security.sasl.is_none()
            && (self.quorum_voters.len() > 1 || !self.quorum_bootstrap.is_empty())
        {
            // Replication and the coordinators reach the other brokers as clients and
            // must log in (Kafka's default mechanism, GSSAPI, is not implemented).
            return Err(ConfigError::Invalid {
                key: "sasl.mechanism.inter.broker.protocol".to_owned(),
                message: format!("the inter-broker listener {} is {}: name the mechanism brokers log in to each other with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER), with username and password in listener.name.{}.<mechanism>.sasl.jaas.config", inter_broker.name, inter_broker.protocol.name(), inter_broker.name.to_ascii_lowercase()),
            });
        }
        if !self.quorum_bootstrap.is_empty() {
            if !self.quorum_voters.is_empty() {
                return Err(ConfigError::BadValue {
                    key: "controller.quorum.bootstrap.servers".to_owned(),
                    value: shown("controller.quorum.bootstrap.servers"),
                    expected:
                        "no controller.quorum.voters beside it (a quorum is static or dynamic)",
                });
            }
            if self.roles.controller && self.controller_listen.is_none() {
                return Err(ConfigError::BadValue {
                    key: "listeners".to_owned(),
                    value: shown("listeners"),
                    expected: "a CONTROLLER://host:port entry (controller.listener.names) for this controller of a dynamic quorum",
                });
            }
            return Ok(());
        }
        let voter = self.quorum_voters.contains_key(&self.node_id);
        if !self.quorum_voters.is_empty() && voter != self.roles.controller {
            return Err(ConfigError::BadValue {
                key: "controller.quorum.voters".to_owned(),
                value: shown("controller.quorum.voters"),
                expected: if self.roles.controller {
                    "a voter set that includes this controller's node.id"
                } else {
                    "a voter set without this broker-only node's node.id (a broker is no voter)"
                },
            });
        }
        if self.quorum_voters.is_empty() && !(self.roles.broker && self.roles.controller) {
            return Err(ConfigError::BadValue {
                key: "process.roles".to_owned(),
                value: shown("process.roles"),
                expected: "broker,controller on a node with no controller.quorum.voters (a single role needs a quorum to belong to)",
            });
        }
        Ok(())
    }

    /// The address clients are told to connect to.
    pub fn advertised(&self) -> SocketAddr {
        self.advertised_listen.unwrap_or(self.listen)
    }
}

/// `process.roles`: a node is a broker (holds replicas, serves clients), a controller
/// (votes in the metadata quorum), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRoles {
    pub broker: bool,
    pub controller: bool,
}

impl Default for ProcessRoles {
    fn default() -> Self {
        ProcessRoles {
            broker: true,
            controller: true,
        }
    }
}

/// What `process.roles` takes.
const PROCESS_ROLES_EXPECTED: &str = "broker, controller, or broker,controller";
/// What `controller.quorum.bootstrap.servers` takes.
const BOOTSTRAP_EXPECTED: &str =
    "host:port entries, comma-separated, each an IP address or localhost (Kafka's controller.quorum.bootstrap.servers)";
/// What `controller.quorum.voters` takes.
const VOTERS_EXPECTED: &str =
    "id@host:port entries, comma-separated, each node id once (Kafka's controller.quorum.voters)";

/// Broker keys that set a cleaner-related topic default: (broker key, topic config, what
/// the value must be).
const CLEANER_TOPIC_DEFAULTS: [(&str, &str, &str); 5] = [
    (
        "log.cleanup.policy",
        "cleanup.policy",
        "delete, compact or compact,delete",
    ),
    (
        "log.cleaner.delete.retention.ms",
        "delete.retention.ms",
        NON_NEGATIVE,
    ),
    (
        "log.cleaner.min.cleanable.ratio",
        "min.cleanable.dirty.ratio",
        "a number from 0 to 1",
    ),
    (
        "log.cleaner.min.compaction.lag.ms",
        "min.compaction.lag.ms",
        NON_NEGATIVE,
    ),
    (
        "log.cleaner.max.compaction.lag.ms",
        "max.compaction.lag.ms",
        POSITIVE,
    ),
];

/// The `LogConfig` fields settable both as a broker default (`log.*`) and per topic.
#[derive(Debug, Clone, Copy)]
enum LogField {
    SegmentBytes,
    SegmentMs,
    RetentionMs,
    RetentionBytes,
    IndexIntervalBytes,
    FlushMessages,
    FlushMs,
    MaxMessageBytes,
}

impl LogField {
    fn from_topic_name(name: &str) -> Option<Self> {
        Some(match name {
            "segment.bytes" => LogField::SegmentBytes,
            "segment.ms" => LogField::SegmentMs,
            "retention.ms" => LogField::RetentionMs,
            "retention.bytes" => LogField::RetentionBytes,
            "index.interval.bytes" => LogField::IndexIntervalBytes,
            "flush.messages" => LogField::FlushMessages,
            "flush.ms" => LogField::FlushMs,
            "max.message.bytes" => LogField::MaxMessageBytes,
            _ => return None,
        })
    }

    /// Parses `value` for this field (errors name `key`) and stores it in `log`.
    fn apply(self, log: &mut LogConfig, key: &str, value: &Scalar<'_>) -> Result<(), ConfigError> {
        // Kafka's Long.MAX_VALUE means "never" for the flush settings.
        let never_or = |v: i64| if v == i64::MAX { u64::MAX } else { v as u64 };
        match self {
            LogField::SegmentBytes => {
                log.segment_bytes = int_in(key, value, POSITIVE_I32)? as u64;
            }
            LogField::SegmentMs => log.segment_ms = int_in(key, value, POSITIVE_I64)?,
            LogField::RetentionMs => {
                log.retention_ms = int_in(key, value, UNLIMITED_OR_NON_NEGATIVE)?;
            }
            LogField::RetentionBytes => {
                log.retention_bytes = int_in(key, value, UNLIMITED_OR_NON_NEGATIVE)?;
            }
            LogField::IndexIntervalBytes => {
                log.index_interval_bytes = int_in(key, value, NON_NEGATIVE_I32)? as u32;
            }
            LogField::FlushMessages => {
                log.flush_messages = never_or(int_in(key, value, POSITIVE_I64)?);
            }
            LogField::FlushMs => log.flush_ms = never_or(int_in(key, value, NON_NEGATIVE_I64)?),
            LogField::MaxMessageBytes => {
                log.max_message_bytes = to_usize(key, int_in(key, value, POSITIVE_I32)?)?;
            }
        }
        Ok(())
    }
}

/// A config value before it is interpreted: a TOML value or a string from a request.
#[derive(Debug)]
enum Scalar<'a> {
    Int(i64),
    Bool(bool),
    Str(&'a str),
    /// Anything else (float, date, array, table), kept for the error message.
    Other(String),
}

impl<'a> Scalar<'a> {
    fn from_toml(v: &'a toml::Value) -> Self {
        match v {
            toml::Value::Integer(i) => Scalar::Int(*i),
            toml::Value::Boolean(b) => Scalar::Bool(*b),
            toml::Value::String(s) => Scalar::Str(s),
            other => Scalar::Other(other.to_string()),
        }
    }

    fn shown(&self) -> String {
        match self {
            Scalar::Int(i) => i.to_string(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Str(s) => (*s).to_owned(),
            Scalar::Other(s) => s.clone(),
        }
    }

    fn string(&self, key: &str, expected: &'static str) -> Result<String, ConfigError> {
        match self {
            Scalar::Str(s) => Ok((*s).to_owned()),
            _ => Err(bad_value(key, self, expected)),
        }
    }

    fn boolean(&self, key: &str) -> Result<bool, ConfigError> {
        match self {
            Scalar::Bool(b) => Ok(*b),
            Scalar::Str(s) if s.trim().eq_ignore_ascii_case("true") => Ok(true),
            Scalar::Str(s) if s.trim().eq_ignore_ascii_case("false") => Ok(false),
            _ => Err(bad_value(key, self, "true or false")),
        }
    }
}

/// An accepted integer range and how to describe it to the operator.
#[derive(Debug, Clone, Copy)]
struct IntRule {
    min: i64,
    max: i64,
    expected: &'static str,
}

const POSITIVE: &str = "a positive integer";
const NON_NEGATIVE: &str = "a non-negative integer";
const POSITIVE_I32: IntRule = IntRule {
    min: 1,
    max: i32::MAX as i64,
    expected: POSITIVE,
};
const POSITIVE_I64: IntRule = IntRule {
    min: 1,
    max: i64::MAX,
    expected: POSITIVE,
};
const NON_NEGATIVE_I32: IntRule = IntRule {
    min: 0,
    max: i32::MAX as i64,
    expected: NON_NEGATIVE,
};
const NON_NEGATIVE_I64: IntRule = IntRule {
    min: 0,
    max: i64::MAX,
    expected: NON_NEGATIVE,
};
/// A shard spins at most 1 s before it sleeps.
const SPIN_BEFORE_PARK_US: IntRule = IntRule {
    min: 0,
    max: 1_000_000,
    expected: "microseconds from 0 to 1000000",
};
const UNLIMITED_OR_NON_NEGATIVE: IntRule = IntRule {
    min: -1,
    max: i64::MAX,
    expected: "-1 (unlimited) or a non-negative integer",
};

/// An integer from a TOML integer or a numeric string, within `rule`.
fn int_in(key: &str, value: &Scalar<'_>, rule: IntRule) -> Result<i64, ConfigError> {
    let parsed = match value {
        Scalar::Int(i) => Some(*i),
        Scalar::Str(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match parsed {
        Some(v) if (rule.min..=rule.max).contains(&v) => Ok(v),
        // Kafka's INT configs: say why a large positive number is refused.
        Some(v) if v > rule.max && rule.max == i64::from(i32::MAX) => Err(bad_value(
            key,
            value,
            "an integer no larger than 2147483647",
        )),
        _ => Err(bad_value(key, value, rule.expected)),
    }
}

/// `log.retention.minutes` / `.hours`: -1 stays unlimited, anything else becomes ms.
fn unlimited_or_scaled(
    key: &str,
    value: &Scalar<'_>,
    ms_per_unit: i64,
) -> Result<i64, ConfigError> {
    let rule = IntRule {
        max: i32::MAX as i64,
        ..UNLIMITED_OR_NON_NEGATIVE
    };
    match int_in(key, value, rule)? {
        -1 => Ok(-1),
        // At most i32::MAX hours: fits in i64 milliseconds.
        v => Ok(v * ms_per_unit),
    }
}

fn to_usize(key: &str, v: i64) -> Result<usize, ConfigError> {
    usize::try_from(v).map_err(|_| ConfigError::BadValue {
        key: key.to_owned(),
        value: v.to_string(),
        expected: "an integer that fits this machine's address space",
    })
}

fn bad_value(key: &str, value: &Scalar<'_>, expected: &'static str) -> ConfigError {
    ConfigError::BadValue {
        key: key.to_owned(),
        value: value.shown(),
        expected,
    }
}

fn not_shard_array(key: &str, value: &toml::Value) -> ConfigError {
    ConfigError::BadValue {
        key: key.to_owned(),
        value: value.to_string(),
        expected: "shard settings inside [[shard]] tables",
    }
}

/// Flattens nested tables into dotted keys: `log = { dirs = "x" }`, which is what the
/// bare key `log.dirs = "x"` parses to, becomes `log.dirs`. Arrays are leaves.
fn flatten(
    key: String,
    value: toml::Value,
    out: &mut BTreeMap<String, toml::Value>,
) -> Result<(), ConfigError> {
    match value {
        toml::Value::Table(table) => {
            for (sub, v) in table {
                flatten(format!("{key}.{sub}"), v, out)?;
            }
            Ok(())
        }
        leaf => {
            if out.contains_key(&key) {
                return Err(ConfigError::DuplicateKey { key });
            }
            out.insert(key, leaf);
            Ok(())
        }
    }
}

const LISTENER_EXPECTED: &str =
    "NAME://host:port entries, comma-separated (a bare host:port is PLAINTEXT), each name once, at most one controller listener, each with an IP address or localhost as host";
const METRICS_LISTEN_EXPECTED: &str =
    "host:port for the Prometheus endpoint (an IP address or localhost), or \"\" for off";
const ADVERTISED_EXPECTED: &str =
    "an address clients can connect to (not a wildcard address, not port 0)";

const PROTOCOL_MAP_EXPECTED: &str =
    "NAME:PROTOCOL pairs, comma-separated, each protocol one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL";

/// Keys a listener takes under `listener.name.<name>.` (and, but for the JAAS
/// configs, at the top level for every listener).
const LISTENER_KEYS: &[&str] = &[
    "sasl.enabled.mechanisms",
    "connections.max.reauth.ms",
    "plain.sasl.jaas.config",
    "scram-sha-256.sasl.jaas.config",
    "scram-sha-512.sasl.jaas.config",
    "oauthbearer.sasl.jaas.config",
    "oauthbearer.sasl.server.callback.handler.class",
    "plain.connections.max.reauth.ms",
    "scram-sha-256.connections.max.reauth.ms",
    "scram-sha-512.connections.max.reauth.ms",
    "oauthbearer.connections.max.reauth.ms",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "oauthbearer.sasl.oauthbearer.jwks.endpoint.url",
    "oauthbearer.sasl.oauthbearer.expected.audience",
    "oauthbearer.sasl.oauthbearer.expected.issuer",
    "oauthbearer.sasl.oauthbearer.sub.claim.name",
    "oauthbearer.sasl.oauthbearer.scope.claim.name",
    "oauthbearer.sasl.oauthbearer.clock.skew.seconds",
    "oauthbearer.sasl.oauthbearer.token.endpoint.url",
    "ssl.endpoint.identification.algorithm",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
    "ssl.enabled.protocols",
];

/// A `listeners` entry's name (upper case; PLAINTEXT for a bare `host:port`) and address.
fn listener_entry(item: &str) -> (String, &str) {
    match item.split_once("://") {
        Some((name, addr)) => (name.trim().to_ascii_uppercase(), addr),
        None => ("PLAINTEXT".to_owned(), item),
    }
}

/// Whether a listener key is one mechanism's (`plain.sasl.jaas.config`,
/// `oauthbearer.connections.max.reauth.ms`): those are per listener only, as in Kafka.
fn is_mechanism_key(key: &str) -> bool {
    ["plain.", "scram-sha-256.", "scram-sha-512.", "oauthbearer."]
        .iter()
        .any(|m| key.starts_with(m))
}

/// `listener.name.<name>.<key>` with `key` one of [`LISTENER_KEYS`], or one of them
/// but a mechanism's at the top level (shared by every listener).
fn is_listener_key(key: &str) -> bool {
    let shared = LISTENER_KEYS.contains(&key) && !is_mechanism_key(key);
    shared
        || key
            .strip_prefix("listener.name.")
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(name, key)| !name.is_empty() && LISTENER_KEYS.contains(&key))
}

/// A listener's setting: `listener.name.<name>.<key>` (the name in lower case, as
/// Kafka writes it), else the top-level `<key>` when `shared`.
fn listener_setting<'a>(
    keys: &'a BTreeMap<String, toml::Value>,
    listener: &str,
    key: &str,
    shared: bool,
) -> Option<(String, Scalar<'a>)> {
    let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
    keys.get_key_value(&prefixed)
        .or_else(|| shared.then(|| keys.get_key_value(key)).flatten())
        .map(|(k, v)| (k.clone(), Scalar::from_toml(v)))
}

/// The JAAS config of PLAIN on the SASL_PLAINTEXT listener (Kafka's per-listener,
/// per-mechanism name), whose `user_<name>="<password>"` options are the users.
pub const PLAIN_JAAS_CONFIG: &str = "listener.name.sasl_plaintext.plain.sasl.jaas.config";

const SASL_MECHANISMS_EXPECTED: &str =
    "mechanisms Twinlog implements, comma-separated (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), for a SASL listener";
const JAAS_EXPECTED: &str = "a PlainLoginModule JAAS config with at least one user_<name>=\"<password>\" (the listener enables PLAIN)";

/// The SASL of a SASL_PLAINTEXT or SASL_SSL listener: its `sasl.enabled.mechanisms`
/// (Kafka's default, GSSAPI, is not implemented, so it must be set) and, with PLAIN,
/// the users of `listener.name.<name>.plain.sasl.jaas.config`.
fn sasl_config(
    keys: &BTreeMap<String, toml::Value>,
    listener: &str,
) -> Result<dataplane::net::sasl::SaslConfig, ConfigError> {
    use dataplane::net::sasl::{jaas_plain_users, SaslConfig, SUPPORTED_MECHANISMS};
    let missing = |key: String, expected| ConfigError::BadValue {
        key,
        value: String::new(),
        expected,
    };
    let (k, v) = listener_setting(keys, listener, "sasl.enabled.mechanisms", true)
        .ok_or_else(|| missing("sasl.enabled.mechanisms".into(), SASL_MECHANISMS_EXPECTED))?;
    let mechanisms: Vec<String> = v
        .string(&k, SASL_MECHANISMS_EXPECTED)?
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .filter(|m| !m.is_empty())
        .collect();
    if mechanisms.is_empty()
        || mechanisms
            .iter()
            .any(|m| !SUPPORTED_MECHANISMS.contains(&m.as_str()))
    {
        return Err(bad_value(&k, &v, SASL_MECHANISMS_EXPECTED));
    }
    let mut plain_users = BTreeMap::new();
    if mechanisms.iter().any(|m| m == "PLAIN") {
        let jaas_key = format!(
            "listener.name.{}.plain.sasl.jaas.config",
            listener.to_ascii_lowercase()
        );
        let (k, v) = listener_setting(keys, listener, "plain.sasl.jaas.config", false)
            .ok_or_else(|| missing(jaas_key, JAAS_EXPECTED))?;
        // The value is a secret: an error shows only that it is there.
        let hidden = || ConfigError::BadValue {
            key: k.clone(),
            value: "[hidden]".to_owned(),
            expected: JAAS_EXPECTED,
        };
        plain_users = jaas_plain_users(&v.string(&k, JAAS_EXPECTED).map_err(|_| hidden())?)
            .ok()
            .filter(|u| !u.is_empty())
            .ok_or_else(hidden)?;
    }
    // KIP-368 re-authentication: a session lives this long, then the client logs in
    // again on the same connection or is disconnected (0: sessions never expire).
    let reauth_ms = listener_setting(keys, listener, "connections.max.reauth.ms", true)
        .map(|(k, v)| int_in(&k, &v, NON_NEGATIVE_I64))
        .transpose()?
        .unwrap_or(0);
    let mut reauth_ms_by_mechanism = BTreeMap::new();
    for m in &mechanisms {
        let key = format!("{}.connections.max.reauth.ms", m.to_ascii_lowercase());
        if let Some((k, v)) = listener_setting(keys, listener, &key, false) {
            reauth_ms_by_mechanism.insert(m.clone(), int_in(&k, &v, NON_NEGATIVE_I64)?);
        }
    }
    let oauth = mechanisms
        .iter()
        .any(|m| m == "OAUTHBEARER")
        .then(|| oauth_config(keys, listener).map(Arc::new))
        .transpose()?;
    Ok(SaslConfig {
        mechanisms,
        plain_users,
        reauth_ms,
        reauth_ms_by_mechanism,
        oauth,
    })
}

const OAUTH_HANDLER_EXPECTED: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler (tokens checked against sasl.oauthbearer.jwks.endpoint.url), or for tests the unsecured validator's class";

/// OAUTHBEARER's validation on a listener: Kafka's JWKS validator
/// (`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` naming
/// `OAuthBearerValidatorCallbackHandler`, or left out with a JWKS URL set) with the
/// `sasl.oauthbearer.*` keys (at the top level, under `listener.name.<l>.`, or under
/// `listener.name.<l>.oauthbearer.`), or the unsecured validator only when that class
/// is named (Kafka falls back to it silently; Twinlog refuses to start instead).
fn oauth_config(
    keys: &BTreeMap<String, toml::Value>,
    listener: &str,
) -> Result<dataplane::net::oauth::OAuthConfig, ConfigError> {
    use dataplane::net::oauth::{
        JwksFile, OAuthConfig, OAuthValidator, JWKS_VALIDATOR_CLASS, UNSECURED_VALIDATOR_CLASS,
    };
    let setting = |key: &str| {
        listener_setting(keys, listener, &format!("oauthbearer.{key}"), false)
            .or_else(|| listener_setting(keys, listener, key, true))
    };
    let string = |key: &str| -> Result<Option<(String, String)>, ConfigError> {
        setting(key)
            .map(|(k, v)| Ok((k.clone(), v.string(&k, "a string")?.trim().to_owned())))
            .transpose()
    };
    let prefix = format!("listener.name.{}.", listener.to_ascii_lowercase());
    let handler = listener_setting(
        keys,
        listener,
        "oauthbearer.sasl.server.callback.handler.class",
        false,
    )
    .map(|(k, v)| Ok::<_, ConfigError>((k.clone(), v.string(&k, OAUTH_HANDLER_EXPECTED)?)))
    .transpose()?;
    let jwks_url = string("sasl.oauthbearer.jwks.endpoint.url")?;
    // The JAAS config's options (the unsecured validator's are read from it).
    let jaas_options = match listener_setting(keys, listener, "oauthbearer.sasl.jaas.config", false)
    {
        None => BTreeMap::new(),
        Some((k, v)) => {
            let text = v.string(&k, "an OAuthBearerLoginModule JAAS config")?;
            let (module, options) =
                dataplane::net::sasl::jaas_options(&text).map_err(|e| ConfigError::Invalid {
                    key: k.clone(),
                    message: e,
                })?;
            if !module.ends_with("OAuthBearerLoginModule") {
                return Err(ConfigError::Invalid {
                    key: k,
                    message: format!("OAUTHBEARER needs the OAuthBearerLoginModule, not {module}"),
                });
            }
            options
        }
    };
    let open_jwks = |(k, url): &(String, String)| {
        JwksFile::open(url)
            .map(|f| OAuthValidator::Jwks(Arc::new(f)))
            .map_err(|message| ConfigError::Invalid {
                key: k.clone(),
                message,
            })
    };
    let validator = match (handler.as_ref().map(|(k, v)| (k, v.trim())), &jwks_url) {
        (None, Some(url)) => open_jwks(url)?,
        (Some((_, class)), Some(url)) if class == JWKS_VALIDATOR_CLASS => open_jwks(url)?,
        (Some((_, class)), None) if class == UNSECURED_VALIDATOR_CLASS => {
            OAuthValidator::Unsecured
        }
        (Some((k, class)), _) if class != JWKS_VALIDATOR_CLASS => {
            return Err(ConfigError::Invalid {
                key: k.clone(),
                message: format!("`{class}` is not a validator Twinlog has: name {OAUTH_HANDLER_EXPECTED}"),
            })
        }
        (Some((_, class)), Some(_)) => {
            // The unsecured class beside a JWKS URL: ambiguous, refused.
            return Err(ConfigError::Invalid {
                key: format!("{prefix}oauthbearer.sasl.server.callback.handler.class"),
                message: format!("`{class}` beside sasl.oauthbearer.jwks.endpoint.url: name the JWKS validator, or drop the URL for unsecured test tokens"),
            });
        }
        _ => {
            return Err(ConfigError::Invalid {
                key: format!("{prefix}sasl.oauthbearer.jwks.endpoint.url"),
                message: format!("listener {listener} enables OAUTHBEARER: set sasl.oauthbearer.jwks.endpoint.url (a file: URL of the identity provider's JWKS), or opt in to unsigned test tokens with {prefix}oauthbearer.sasl.server.callback.handler.class = {UNSECURED_VALIDATOR_CLASS}"),
            })
        }
    };
    let unsecured = validator == OAuthValidator::Unsecured;
    let mut config = OAuthConfig::new(validator);
    if unsecured {
        if let Some(claim) = jaas_options.get("unsecuredValidatorPrincipalClaimName") {
            config.principal_claim = claim.clone();
        }
        if let Some(claim) = jaas_options.get("unsecuredValidatorScopeClaimName") {
            config.scope_claim = claim.clone();
        }
        if let Some(scopes) = jaas_options.get("unsecuredValidatorRequiredScope") {
            config.required_scopes = scopes
                .split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
        if let Some(ms) = jaas_options.get("unsecuredValidatorAllowableClockSkewMs") {
            let ms: u64 = ms.trim().parse().map_err(|_| ConfigError::Invalid {
                key: format!("{prefix}oauthbearer.sasl.jaas.config"),
                message: "unsecuredValidatorAllowableClockSkewMs is not a number of milliseconds"
                    .into(),
            })?;
            config.clock_skew = std::time::Duration::from_millis(ms);
        }
    } else {
        if let Some((_, claim)) = string("sasl.oauthbearer.sub.claim.name")? {
            config.principal_claim = claim;
        }
        if let Some((_, claim)) = string("sasl.oauthbearer.scope.claim.name")? {
            config.scope_claim = claim;
        }
        if let Some((_, audience)) = string("sasl.oauthbearer.expected.audience")? {
            config.expected_audience = audience
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect();
        }
        config.expected_issuer = string("sasl.oauthbearer.expected.issuer")?
            .map(|(_, i)| i)
            .filter(|i| !i.is_empty());
        if let Some((k, v)) = setting("sasl.oauthbearer.clock.skew.seconds") {
            config.clock_skew =
                std::time::Duration::from_secs(int_in(&k, &v, NON_NEGATIVE_I64)? as u64);
        }
    }
    Ok(config)
}

/// A `CONTROLLER:SSL` listener's server TLS (which must require client certificates:
/// the quorum's members are authenticated by them alone) and the client TLS its member
/// dials the others with.
fn controller_tls(
    keys: &BTreeMap<String, toml::Value>,
    listener: &str,
) -> Result<
    (
        dataplane::net::tls::TlsConfig,
        dataplane::client::security::ClientTls,
    ),
    ConfigError,
> {
    let server = tls_config(keys, listener)?;
    if server.client_auth != dataplane::net::tls::ClientAuth::Required {
        return Err(ConfigError::Invalid {
            key: format!("listener.name.{}.ssl.client.auth", listener.to_ascii_lowercase()),
            message: format!("the controller listener {listener} must require client certificates (ssl.client.auth = required): the quorum authenticates its members by certificate"),
        });
    }
    let client = inter_broker_security(keys, listener, dataplane::net::SecurityProtocol::Ssl)?
        .tls
        .ok_or_else(|| ConfigError::Invalid {
            key: "listener.security.protocol.map".to_owned(),
            message: format!("the controller listener {listener} has no client TLS"),
        })?;
    Ok((server, client))
}

/// The inter-broker listener's security as a client of it: Kafka's client keys read
/// from the listener's own settings (the broker presents its keystore and trusts its
/// truststore) and, on a SASL listener, `sasl.mechanism.inter.broker.protocol` with
/// the `username`/`password` of `listener.name.<l>.<mechanism>.sasl.jaas.config`.
fn inter_broker_security(
    keys: &BTreeMap<String, toml::Value>,
    listener: &str,
    protocol: dataplane::net::SecurityProtocol,
) -> Result<dataplane::client::security::ClientSecurity, ConfigError> {
    use dataplane::client::security::ClientSecurity;
    use dataplane::net::SecurityProtocol;
    const MECHANISM_KEY: &str = "sasl.mechanism.inter.broker.protocol";
    const MECHANISM_EXPECTED: &str =
        "a mechanism the inter-broker listener enables: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER";
    let mut client = BTreeMap::new();
    client.insert("security.protocol".to_owned(), protocol.name().to_owned());
    if protocol.uses_tls() {
        for key in [
            "ssl.truststore.location",
            "ssl.truststore.certificates",
            "ssl.keystore.location",
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
            "ssl.endpoint.identification.algorithm",
        ] {
            if let Some((k, v)) = listener_setting(keys, listener, key, true) {
                client.insert(key.to_owned(), v.string(&k, "a string")?);
            }
        }
    }
    let mut jaas_key = None;
    match keys.get(MECHANISM_KEY).filter(|_| protocol.uses_sasl()) {
        // No login of its own on a SASL listener: one node alone needs none (checked in
        // `check_roles`); the TLS, if any, still applies.
        None if protocol.uses_sasl() => {
            let bare = if protocol.uses_tls() {
                SecurityProtocol::Ssl
            } else {
                SecurityProtocol::Plaintext
            };
            client.insert("security.protocol".to_owned(), bare.name().to_owned());
        }
        None => {}
        Some(value) => {
            let v = Scalar::from_toml(value);
            let mechanism = v
                .string(MECHANISM_KEY, MECHANISM_EXPECTED)?
                .trim()
                .to_ascii_uppercase();
            let enabled = listener_setting(keys, listener, "sasl.enabled.mechanisms", true)
                .and_then(|(k, v)| v.string(&k, "").ok())
                .unwrap_or_default();
            if !enabled
                .split(',')
                .any(|m| m.trim().eq_ignore_ascii_case(&mechanism))
            {
                return Err(bad_value(MECHANISM_KEY, &v, MECHANISM_EXPECTED));
            }
            let key = format!("{}.sasl.jaas.config", mechanism.to_ascii_lowercase());
            let (k, jaas) = listener_setting(keys, listener, &key, false).ok_or_else(|| {
                ConfigError::Invalid {
                    key: format!("listener.name.{}.{key}", listener.to_ascii_lowercase()),
                    message: format!("the broker logs in to the inter-broker listener {listener} with {mechanism}: give this JAAS config username and password"),
                }
            })?;
            if mechanism == "OAUTHBEARER" {
                // The broker's own token (Kafka's listener-prefixed login setting).
                if let Some((k, v)) = listener_setting(
                    keys,
                    listener,
                    "oauthbearer.sasl.oauthbearer.token.endpoint.url",
                    false,
                ) {
                    client.insert(
                        "sasl.oauthbearer.token.endpoint.url".to_owned(),
                        v.string(&k, "a file: URL")?,
                    );
                }
            }
            client.insert("sasl.mechanism".to_owned(), mechanism);
            client.insert(
                "sasl.jaas.config".to_owned(),
                jaas.string(&k, "a JAAS config")?,
            );
            jaas_key = Some(k);
        }
    }
    ClientSecurity::from_configs(&client).map_err(|message| ConfigError::Invalid {
        // The message names the client key; the JAAS config itself is never shown.
        key: jaas_key.unwrap_or_else(|| "inter.broker.listener.name".to_owned()),
        message: format!("as a client of the inter-broker listener {listener}: {message}"),
    })
}

const PEM_TYPE_EXPECTED: &str = "PEM (Twinlog reads PEM keystores and truststores only)";
const CLIENT_AUTH_EXPECTED: &str = "none, requested or required";
const TLS_PROTOCOLS_EXPECTED: &str = "TLSv1.2 and/or TLSv1.3, comma-separated";

/// The TLS of an SSL or SASL_SSL listener, from its `ssl.*` keys (Kafka's PEM
/// keystore and truststore), loaded once here so that a bad file fails the start.
fn tls_config(
    keys: &BTreeMap<String, toml::Value>,
    listener: &str,
) -> Result<dataplane::net::tls::TlsConfig, ConfigError> {
    use dataplane::net::tls::{parse_principal_rules, ClientAuth, Pem, TlsConfig};
    let get = |key: &str| listener_setting(keys, listener, key, true);
    let string = |key: &str, expected| -> Result<Option<(String, String)>, ConfigError> {
        get(key)
            .map(|(k, v)| Ok((k.clone(), v.string(&k, expected)?)))
            .transpose()
    };
    for kind in ["ssl.keystore.type", "ssl.truststore.type"] {
        if let Some((k, v)) = get(kind) {
            if !v
                .string(&k, PEM_TYPE_EXPECTED)?
                .trim()
                .eq_ignore_ascii_case("PEM")
            {
                return Err(bad_value(&k, &v, PEM_TYPE_EXPECTED));
            }
        }
    }
    if let Some((k, _)) = get("ssl.key.password") {
        return Err(ConfigError::Invalid {
            key: k,
            message: "encrypted private keys are not supported: give ssl.keystore.location an unencrypted PEM key, readable by the broker only".into(),
        });
    }
    let keystore = match (
        string("ssl.keystore.location", "a PEM file path")?,
        string("ssl.keystore.key", "a PEM private key")?,
        string("ssl.keystore.certificate.chain", "PEM certificates")?,
    ) {
        (Some((_, path)), None, None) => vec![Pem::File(PathBuf::from(path))],
        (None, Some((_, key)), Some((_, chain))) => vec![Pem::Inline(key), Pem::Inline(chain)],
        _ => {
            return Err(ConfigError::Invalid {
                key: format!("listener.name.{}.ssl.keystore.location", listener.to_ascii_lowercase()),
                message: format!("listener {listener} needs its server key and certificates: ssl.keystore.location (one PEM file with both), or ssl.keystore.key with ssl.keystore.certificate.chain"),
            })
        }
    };
    let truststore = match (
        string("ssl.truststore.location", "a PEM file path")?,
        string("ssl.truststore.certificates", "PEM certificates")?,
    ) {
        (Some((_, path)), None) => Some(Pem::File(PathBuf::from(path))),
        (None, Some((_, certs))) => Some(Pem::Inline(certs)),
        (None, None) => None,
        (Some((k, _)), Some(_)) => {
            return Err(ConfigError::Invalid {
                key: k,
                message: "set ssl.truststore.location or ssl.truststore.certificates, not both"
                    .into(),
            })
        }
    };
    let client_auth = match get("ssl.client.auth") {
        Some((k, v)) => ClientAuth::parse(&v.string(&k, CLIENT_AUTH_EXPECTED)?)
            .ok_or_else(|| bad_value(&k, &v, CLIENT_AUTH_EXPECTED))?,
        None => ClientAuth::None,
    };
    let (mut tls12, mut tls13) = (true, true);
    if let Some((k, v)) = get("ssl.enabled.protocols") {
        (tls12, tls13) = (false, false);
        for p in v
            .string(&k, TLS_PROTOCOLS_EXPECTED)?
            .split(',')
            .map(str::trim)
        {
            match p {
                "TLSv1.2" => tls12 = true,
                "TLSv1.3" => tls13 = true,
                "" => {}
                _ => return Err(bad_value(&k, &v, TLS_PROTOCOLS_EXPECTED)),
            }
        }
        if !(tls12 || tls13) {
            return Err(bad_value(&k, &v, TLS_PROTOCOLS_EXPECTED));
        }
    }
    let principal_rules = match string("ssl.principal.mapping.rules", "mapping rules")? {
        Some((k, text)) => parse_principal_rules(&text)
            .map_err(|message| ConfigError::Invalid { key: k, message })?,
        None => parse_principal_rules("DEFAULT").unwrap_or_default(),
    };
    let config = TlsConfig {
        keystore,
        truststore,
        client_auth,
        tls12,
        tls13,
        principal_rules,
    };
    config.load().map_err(|e| ConfigError::Invalid {
        key: format!(
            "listener.name.{}.ssl.keystore.location",
            listener.to_ascii_lowercase()
        ),
        message: format!("the TLS of listener {listener} does not load: {e}"),
    })?;
    Ok(config)
}

/// `host:port` of a `listeners` entry: an empty host means all interfaces, as in
/// Kafka; `localhost` means 127.0.0.1; other host names are refused rather than
/// resolved, so the bound address never depends on DNS.
fn parse_listener(key: &str, raw: &str) -> Result<SocketAddr, ConfigError> {
    let bad = || ConfigError::BadValue {
        key: key.to_owned(),
        value: raw.to_owned(),
        expected: LISTENER_EXPECTED,
    };
    let text = raw.trim();
    let addr = match text.split_once("://") {
        Some((name, rest)) if name.eq_ignore_ascii_case("PLAINTEXT") => rest,
        Some(_) => return Err(bad()),
        None => text,
    };
    if let Ok(sa) = addr.parse::<SocketAddr>() {
        return Ok(sa);
    }
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let ip = match host {
        "" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        h if h.eq_ignore_ascii_case("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        _ => return Err(bad()),
    };
    Ok(SocketAddr::new(ip, port))
}

const DATA_DIR_EXPECTED: &str = "one directory path (Twinlog keeps every partition in one log dir)";

/// `log.dirs` / `log.dir`: a path string, a one-entry comma list, or a one-entry array.
fn parse_data_dir(key: &str, value: &toml::Value) -> Result<PathBuf, ConfigError> {
    let bad = || not_one_dir(key, value);
    let text = match value {
        toml::Value::String(s) => s.as_str(),
        toml::Value::Array(items) => match items.as_slice() {
            [toml::Value::String(s)] => s.as_str(),
            _ => return Err(bad()),
        },
        _ => return Err(bad()),
    };
    let mut dirs = text.split(',').map(str::trim).filter(|d| !d.is_empty());
    match (dirs.next(), dirs.next()) {
        (Some(dir), None) => Ok(PathBuf::from(dir)),
        _ => Err(bad()),
    }
}

fn not_one_dir(key: &str, value: &toml::Value) -> ConfigError {
    ConfigError::BadValue {
        key: key.to_owned(),
        value: match value {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        },
        expected: DATA_DIR_EXPECTED,
    }
}

/// The `[[shard]]` array of tables.
fn parse_shards(value: toml::Value) -> Result<Vec<ShardConfig>, ConfigError> {
    let toml::Value::Array(items) = value else {
        return Err(not_shard_array("shard", &value));
    };
    let mut shards = Vec::with_capacity(items.len());
    for item in items {
        let toml::Value::Table(table) = item else {
            return Err(not_shard_array("shard", &item));
        };
        let mut keys = BTreeMap::new();
        for (key, value) in table {
            flatten(key, value, &mut keys)?;
        }
        shards.push(parse_shard(&keys)?);
    }
    Ok(shards)
}

fn parse_shard(keys: &BTreeMap<String, toml::Value>) -> Result<ShardConfig, ConfigError> {
    if let Some(key) = keys
        .keys()
        .find(|k| !SHARD_CONFIG_NAMES.contains(&k.as_str()))
    {
        return Err(ConfigError::UnknownKey {
            key: format!("shard.{key}"),
        });
    }
    let get = |name: &str| {
        keys.get(name)
            .map(|v| (format!("shard.{name}"), Scalar::from_toml(v)))
    };
    let (k, v) = get("core").ok_or_else(|| ConfigError::MissingKey {
        key: "shard.core".to_owned(),
    })?;
    let mut shard = ShardConfig::on_core(to_usize(&k, int_in(&k, &v, NON_NEGATIVE_I32)?)?);
    if let Some((k, v)) = get("io.memory.bytes") {
        shard.io_memory_bytes = to_usize(&k, int_in(&k, &v, POSITIVE_I64)?)?;
    }
    if let Some((k, v)) = get("in.flight.requests.max") {
        shard.in_flight_requests_max = to_usize(&k, int_in(&k, &v, POSITIVE_I32)?)?;
    }
    if let Some((k, v)) = get("socket.receive.buffer.bytes") {
        shard.receive_buffer_bytes = to_usize(&k, int_in(&k, &v, POSITIVE_I32)?)?;
    }
    if let Some((k, v)) = get("socket.send.buffer.bytes") {
        shard.send_buffer_bytes = to_usize(&k, int_in(&k, &v, POSITIVE_I32)?)?;
    }
    if let Some((k, v)) = get("inline.write.max.bytes") {
        shard.inline_write_max_bytes = to_usize(&k, int_in(&k, &v, NON_NEGATIVE_I32)?)?;
    }
    if let Some((k, v)) = get("spin.before.park.us") {
        shard.spin_before_park_us = int_in(&k, &v, SPIN_BEFORE_PARK_US)? as u64;
    }
    Ok(shard)
}

fn check_distinct_cores(shards: &[ShardConfig]) -> Result<(), ConfigError> {
    let mut seen = BTreeSet::new();
    for shard in shards {
        if !seen.insert(shard.core) {
            return Err(ConfigError::BadValue {
                key: "shard.core".to_owned(),
                value: shard.core.to_string(),
                expected: "a core not used by another [[shard]]",
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> BrokerConfig {
        BrokerConfig::from_toml_str(text).expect("config parses")
    }

    fn parse_err(text: &str) -> ConfigError {
        BrokerConfig::from_toml_str(text).expect_err("config is rejected")
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn a_sasl_plaintext_listener_needs_plain_and_its_users() {
        let jaas = r#""listener.name.sasl_plaintext.plain.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="s3cret";'"#;
        let c = parse(&format!(
            "listeners = \"SASL_PLAINTEXT://127.0.0.1:19092\"\n\"sasl.enabled.mechanisms\" = \"plain\"\n{jaas}"
        ));
        assert_eq!(c.listen, addr("127.0.0.1:19092"));
        let sasl = c.listeners[0].sasl.clone().expect("SASL");
        assert_eq!(sasl.mechanisms, ["PLAIN"]);
        assert_eq!(sasl.plain_users["alice"], "s3cret");
        assert!(
            parse("listeners = \"PLAINTEXT://127.0.0.1:19092\"").listeners[0]
                .sasl
                .is_none()
        );
        let key_of = |e: ConfigError| match e {
            ConfigError::BadValue { key, value, .. } => (key, value),
            other => panic!("{other}"),
        };
        // No mechanisms (Kafka's default GSSAPI is not implemented), or one not
        // implemented.
        let (key, _) = key_of(parse_err(&format!(
            "listeners = \"SASL_PLAINTEXT://127.0.0.1:19092\"\n{jaas}"
        )));
        assert_eq!(key, "sasl.enabled.mechanisms");
        let (key, _) = key_of(parse_err(&format!(
            "listeners = \"SASL_PLAINTEXT://127.0.0.1:19092\"\n\"sasl.enabled.mechanisms\" = \"PLAIN,GSSAPI\"\n{jaas}"
        )));
        assert_eq!(key, "sasl.enabled.mechanisms");
        // A JAAS config without users is refused without showing it.
        let (key, value) = key_of(parse_err(
            "listeners = \"SASL_PLAINTEXT://127.0.0.1:19092\"\n\"sasl.enabled.mechanisms\" = \"PLAIN\"\n\"listener.name.sasl_plaintext.plain.sasl.jaas.config\" = 'PlainLoginModule required username=\"a\" password=\"pw\";'",
        ));
        assert_eq!(
            (key.as_str(), value.as_str()),
            (PLAIN_JAAS_CONFIG, "[hidden]")
        );
        // As the inter-broker listener of a multi-node cluster, brokers log in to each
        // other: a mechanism must be named, and its JAAS config must give this broker's
        // own username and password.
        let cluster = "\"node.id\" = 0\n\"process.roles\" = \"broker,controller\"\n\"controller.quorum.voters\" = \"0@127.0.0.1:19093,1@127.0.0.1:19094\"\n\"sasl.enabled.mechanisms\" = \"PLAIN\"";
        let sasl_cluster = |extra: &str| {
            format!("listeners = \"SASL_PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\"\n{cluster}\n{extra}")
        };
        let invalid_key = |e: ConfigError| match e {
            ConfigError::Invalid { key, message } => (key, message),
            other => panic!("{other}"),
        };
        let (key, message) = invalid_key(parse_err(&sasl_cluster(jaas)));
        assert_eq!(key, "sasl.mechanism.inter.broker.protocol");
        assert!(message.contains("SASL_PLAINTEXT"), "{message}");
        let mechanism = "\"sasl.mechanism.inter.broker.protocol\" = \"PLAIN\"";
        let (key, message) = invalid_key(parse_err(&sasl_cluster(&format!("{mechanism}\n{jaas}"))));
        assert_eq!(key, PLAIN_JAAS_CONFIG);
        assert!(message.contains("username"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
        let login = r#""listener.name.sasl_plaintext.plain.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" user_admin="admin-pw";'"#;
        let c = parse(&sasl_cluster(&format!("{mechanism}\n{login}")));
        let own = c.inter_broker_security.sasl.expect("a login");
        assert_eq!(
            (own.username.as_str(), own.password.as_str()),
            ("admin", "admin-pw")
        );
        assert!(c.inter_broker_security.tls.is_none());
        // A mechanism the listener does not enable is refused.
        let scram = "\"sasl.mechanism.inter.broker.protocol\" = \"SCRAM-SHA-512\"";
        let (key, _) = key_of(parse_err(&sasl_cluster(&format!("{scram}\n{login}"))));
        assert_eq!(key, "sasl.mechanism.inter.broker.protocol");
        // OAUTHBEARER between brokers: the broker's token from the listener's file.
        let oauth = format!(
            "{cluster}\n\"listener.name.sasl_plaintext.sasl.enabled.mechanisms\" = \"OAUTHBEARER\"\n\"sasl.mechanism.inter.broker.protocol\" = \"OAUTHBEARER\"\n\"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class\" = \"{}\"\n\"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config\" = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;'\n\"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.token.endpoint.url\" = \"file:///etc/twinlog/broker.jwt\"",
            dataplane::net::oauth::UNSECURED_VALIDATOR_CLASS
        );
        let c = parse(&format!(
            "listeners = \"SASL_PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\"\n{oauth}"
        ));
        let own = c.inter_broker_security.sasl.expect("a login");
        assert_eq!(
            own.oauth,
            Some(dataplane::client::security::OAuthLogin::TokenFile(
                "/etc/twinlog/broker.jwt".into()
            ))
        );
        // One node alone may leave it out.
        let c = parse(&format!(
            "listeners = \"SASL_PLAINTEXT://127.0.0.1:19092\"\n\"sasl.enabled.mechanisms\" = \"plain\"\n{jaas}"
        ));
        assert!(c.inter_broker_security.sasl.is_none());
        // Beside a PLAINTEXT inter-broker listener it is fine.
        let c = parse(&format!(
            "listeners = \"PLAINTEXT://127.0.0.1:19091,SASL_PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\"\n{cluster}\n{jaas}"
        ));
        assert_eq!((c.listeners.len(), c.inter_broker), (2, 0));
        assert_eq!(c.listen, addr("127.0.0.1:19091"));
    }

    #[test]
    fn an_oauthbearer_listener_needs_a_jwks_or_the_unsecured_validator_named() {
        let base = "listeners = \"SASL_PLAINTEXT://127.0.0.1:19092\"\n\"sasl.enabled.mechanisms\" = \"OAUTHBEARER\"\n";
        let invalid_key = |e: ConfigError| match e {
            ConfigError::Invalid { key, message } => (key, message),
            other => panic!("{other}"),
        };
        // Kafka would fall back to unsigned tokens; Twinlog asks.
        let (key, message) = invalid_key(parse_err(base));
        assert_eq!(
            key,
            "listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.url"
        );
        assert!(
            message.contains("OAuthBearerUnsecuredValidatorCallbackHandler"),
            "{message}"
        );
        let unsecured = format!(
            "{base}\"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class\" = \"{}\"\n\"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config\" = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope=\"kafka\";'\n\"listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms\" = 60000\n",
            dataplane::net::oauth::UNSECURED_VALIDATOR_CLASS
        );
        let sasl = parse(&unsecured).listeners[0].sasl.clone().expect("sasl");
        let oauth = sasl.oauth.clone().expect("oauth");
        assert_eq!(
            oauth.validator,
            dataplane::net::oauth::OAuthValidator::Unsecured
        );
        assert_eq!(oauth.required_scopes, ["kafka"]);
        assert_eq!(sasl.reauth_ms_by_mechanism["OAUTHBEARER"], 60_000);
        // A JWKS file, with Kafka's top-level keys.
        let dir = tempfile::tempdir().expect("dir");
        let jwks = dir.path().join("jwks.json");
        std::fs::write(
            &jwks,
            r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#,
        )
        .expect("jwks");
        let c = parse(&format!(
            "{base}\"sasl.oauthbearer.jwks.endpoint.url\" = \"file://{}\"\n\"sasl.oauthbearer.expected.audience\" = \"kafka, other\"\n\"sasl.oauthbearer.expected.issuer\" = \"https://idp\"\n",
            jwks.display()
        ));
        let oauth = c.listeners[0]
            .sasl
            .clone()
            .expect("sasl")
            .oauth
            .clone()
            .expect("oauth");
        assert!(matches!(
            oauth.validator,
            dataplane::net::oauth::OAuthValidator::Jwks(_)
        ));
        assert_eq!(oauth.expected_audience, ["kafka", "other"]);
        assert_eq!(oauth.expected_issuer.as_deref(), Some("https://idp"));
        // An https endpoint, a missing file, or a validator Twinlog lacks: refused.
        for extra in [
            "\"sasl.oauthbearer.jwks.endpoint.url\" = \"https://idp/keys\"".to_owned(),
            "\"sasl.oauthbearer.jwks.endpoint.url\" = \"file:///nonexistent/jwks.json\"".to_owned(),
            "\"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class\" = \"com.example.Custom\"".to_owned(),
        ] {
            let (_, message) = invalid_key(parse_err(&format!("{base}{extra}\n")));
            assert!(!message.is_empty());
        }
        // A mechanism's keys are per listener only.
        assert!(!is_listener_key("oauthbearer.connections.max.reauth.ms"));
        assert!(is_listener_key(
            "listener.name.x.oauthbearer.connections.max.reauth.ms"
        ));
        assert!(is_listener_key("sasl.oauthbearer.jwks.endpoint.url"));
    }

    /// A PEM file with a self-signed key pair for `localhost`.
    fn test_keystore(dir: &Path) -> PathBuf {
        let params = rcgen::CertificateParams::new(vec!["localhost".into()]).expect("params");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        let path = dir.join("broker.pem");
        std::fs::write(&path, format!("{}{}", key.serialize_pem(), cert.pem())).expect("write");
        path
    }

    #[test]
    fn a_controller_listener_is_plaintext_or_ssl_with_client_certificates() {
        let dir = tempfile::tempdir().expect("dir");
        let pem = test_keystore(dir.path());
        let quorum = |map: &str, extra: &str| {
            format!(
                "listeners = \"PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\"\n\"listener.security.protocol.map\" = \"PLAINTEXT:PLAINTEXT,{map}\"\n\"node.id\" = 0\n\"process.roles\" = \"broker,controller\"\n\"controller.quorum.voters\" = \"0@127.0.0.1:19093,1@127.0.0.1:19094\"\n\"ssl.keystore.location\" = \"{}\"\n\"ssl.truststore.location\" = \"{}\"\n{extra}",
                pem.display(),
                pem.display()
            )
        };
        assert!(parse(&quorum("CONTROLLER:PLAINTEXT", ""))
            .controller_tls
            .is_none());
        let c = parse(&quorum(
            "CONTROLLER:SSL",
            "\"listener.name.controller.ssl.client.auth\" = \"required\"",
        ));
        let (server, client) = c.controller_tls.expect("TLS");
        assert_eq!(
            server.client_auth,
            dataplane::net::tls::ClientAuth::Required
        );
        assert!(client.verify_hostname);
        assert_eq!(client.keystore.len(), 1);
        let invalid_key = |e: ConfigError| match e {
            ConfigError::Invalid { key, message } => (key, message),
            other => panic!("{other}"),
        };
        // Without client certificates anyone reaching the port could join: refused.
        let (key, _) = invalid_key(parse_err(&quorum("CONTROLLER:SSL", "")));
        assert_eq!(key, "listener.name.controller.ssl.client.auth");
        let (key, message) = invalid_key(parse_err(&quorum("CONTROLLER:SASL_SSL", "")));
        assert_eq!(key, "listener.security.protocol.map");
        assert!(message.contains("SASL"), "{message}");
    }

    #[test]
    fn named_listeners_take_their_protocols_addresses_and_settings() {
        use dataplane::net::SecurityProtocol;
        let dir = tempfile::tempdir().expect("dir");
        let pem = test_keystore(dir.path());
        let c = parse(&format!(
            r#"
            listeners = "INTERNAL://127.0.0.1:19091,EXTERNAL://0.0.0.0:19092,SSL://127.0.0.1:19093"
            "advertised.listeners" = "INTERNAL://127.0.0.1:19091,EXTERNAL://10.0.0.1:19092"
            "listener.security.protocol.map" = "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,SSL:SSL"
            "inter.broker.listener.name" = "INTERNAL"
            "ssl.keystore.type" = "PEM"
            "ssl.keystore.location" = "{pem}"
            "listener.name.ssl.ssl.client.auth" = "required"
            "listener.name.ssl.ssl.truststore.location" = "{pem}"
            "listener.name.ssl.ssl.principal.mapping.rules" = "RULE:^CN=(.*)$/$1/L"
            "listener.name.external.sasl.enabled.mechanisms" = "PLAIN"
            "listener.name.external.plain.sasl.jaas.config" = 'PlainLoginModule required user_bob="pw";'
            "#,
            pem = pem.display()
        ));
        let names: Vec<_> = c
            .listeners
            .iter()
            .map(|l| (l.name.as_str(), l.protocol))
            .collect();
        assert_eq!(
            names,
            [
                ("INTERNAL", SecurityProtocol::Plaintext),
                ("EXTERNAL", SecurityProtocol::SaslSsl),
                ("SSL", SecurityProtocol::Ssl)
            ]
        );
        assert_eq!(c.inter_broker, 0);
        assert_eq!(c.advertised(), addr("127.0.0.1:19091"));
        let external = &c.listeners[1];
        assert_eq!(external.advertised(), addr("10.0.0.1:19092"));
        assert!(external.sasl.is_some() && external.tls.is_some());
        assert_eq!(
            external.tls.as_ref().expect("tls").client_auth,
            dataplane::net::tls::ClientAuth::None
        );
        let ssl = c.listeners[2].tls.as_ref().expect("tls");
        assert_eq!(ssl.client_auth, dataplane::net::tls::ClientAuth::Required);
        assert!(c.listeners[2].sasl.is_none());
        assert_eq!(c.listeners[2].advertised(), addr("127.0.0.1:19093"));

        let message = |text: &str| match parse_err(text) {
            ConfigError::Invalid { message, .. } => message,
            other => other.to_string(),
        };
        // A name without a protocol, a name twice, an advertised name not listened on.
        assert!(message("listeners = \"OUTSIDE://127.0.0.1:1\"")
            .contains("listener.security.protocol.map"));
        assert!(
            message("listeners = \"PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2\"")
                .contains("twice")
        );
        assert!(message(
            "listeners = \"PLAINTEXT://127.0.0.1:1\"\n\"advertised.listeners\" = \"SSL://10.0.0.1:1\""
        )
        .contains("not a listener"));
        // Two listeners, neither PLAINTEXT, and no inter-broker name.
        assert!(message(&format!(
            "listeners = \"SSL://127.0.0.1:1,SSL2://127.0.0.1:2\"\n\"listener.security.protocol.map\" = \"SSL:SSL,SSL2:SSL\"\n\"ssl.keystore.location\" = \"{}\"",
            pem.display()
        ))
        .contains("no PLAINTEXT listener"));
        // TLS without keys, with keys that do not load, with a JKS keystore.
        assert!(message("listeners = \"SSL://127.0.0.1:1\"").contains("ssl.keystore.location"));
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "no pem here").expect("write");
        assert!(message(&format!(
            "listeners = \"SSL://127.0.0.1:1\"\n\"ssl.keystore.location\" = \"{}\"",
            junk.display()
        ))
        .contains("does not load"));
        assert!(message(&format!(
            "listeners = \"SSL://127.0.0.1:1\"\n\"ssl.keystore.type\" = \"JKS\"\n\"ssl.keystore.location\" = \"{}\"",
            pem.display()
        ))
        .contains("PEM"));
        // Client certificates asked for with no CAs to check them against.
        assert!(message(&format!(
            "listeners = \"SSL://127.0.0.1:1\"\n\"ssl.client.auth\" = \"required\"\n\"ssl.keystore.location\" = \"{}\"",
            pem.display()
        ))
        .contains("truststore"));
        // A listener key for an unknown setting is an unknown key.
        assert!(matches!(
            parse_err("\"listener.name.ssl.ssl.bogus\" = 1"),
            ConfigError::UnknownKey { .. }
        ));
    }

    #[test]
    fn a_dynamic_quorum_takes_bootstrap_servers_and_a_controller_listener() {
        let c = BrokerConfig::from_toml_str(
            "\"node.id\" = 2\n\"listeners\" = \"PLAINTEXT://10.0.0.2:9092,CONTROLLER://10.0.0.2:9093\"\n\"controller.quorum.bootstrap.servers\" = \"10.0.0.1:9093, 10.0.0.3:9093\"\n",
        )
        .expect("parses");
        assert_eq!(c.listen, addr("10.0.0.2:9092"));
        assert_eq!(c.controller_listen, Some(addr("10.0.0.2:9093")));
        assert_eq!(
            c.quorum_bootstrap,
            vec![addr("10.0.0.1:9093"), addr("10.0.0.3:9093")]
        );
        // Another name for the controller listener.
        let named = BrokerConfig::from_toml_str(
            "\"controller.listener.names\" = \"RAFT\"\n\"listeners\" = \"RAFT://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092\"\n\"controller.quorum.bootstrap.servers\" = \"127.0.0.1:9093\"\n",
        )
        .expect("parses");
        assert_eq!(named.controller_listen, Some(addr("127.0.0.1:9093")));
        for (text, key) in [
            // A controller of a dynamic quorum must listen for the others.
            (
                "\"controller.quorum.bootstrap.servers\" = \"127.0.0.1:9093\"",
                "listeners",
            ),
            // Static or dynamic, not both.
            (
                "\"listeners\" = \"CONTROLLER://127.0.0.1:9093\"\n\"controller.quorum.bootstrap.servers\" = \"127.0.0.1:9093\"\n\"controller.quorum.voters\" = \"0@127.0.0.1:9093\"",
                "controller.quorum.bootstrap.servers",
            ),
            (
                "\"controller.quorum.bootstrap.servers\" = \"nowhere:9093\"",
                "controller.quorum.bootstrap.servers",
            ),
            (
                "\"listeners\" = \"CONTROLLER://127.0.0.1:1,CONTROLLER://127.0.0.1:2\"",
                "listeners",
            ),
        ] {
            match BrokerConfig::from_toml_str(text) {
                Err(ConfigError::BadValue { key: k, .. }) => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        // A broker-only node of a dynamic quorum needs no controller listener.
        BrokerConfig::from_toml_str(
            "\"process.roles\" = \"broker\"\n\"controller.quorum.bootstrap.servers\" = \"127.0.0.1:9093\"\n",
        )
        .expect("a broker-only node parses");
    }

    #[test]
    fn quorum_voters_and_process_roles() {
        let c = BrokerConfig::from_toml_str(
            "\"node.id\" = 1\n\"process.roles\" = \"broker,controller\"\n\"controller.quorum.voters\" = \"0@127.0.0.1:9093, 1@127.0.0.1:9094,2@127.0.0.1:9095\"\n",
        )
        .expect("parses");
        assert_eq!(c.quorum_voters.len(), 3);
        assert_eq!(
            c.quorum_voters[&1],
            "127.0.0.1:9094".parse::<SocketAddr>().expect("addr")
        );
        let broker = BrokerConfig::from_toml_str(
            "\"node.id\" = 3\n\"process.roles\" = \"broker\"\n\"controller.quorum.voters\" = \"0@127.0.0.1:9093\"\n",
        )
        .expect("a broker-only node parses");
        assert_eq!(
            broker.roles,
            ProcessRoles {
                broker: true,
                controller: false
            }
        );
        let controller = BrokerConfig::from_toml_str(
            "\"process.roles\" = \"controller\"\n\"controller.quorum.voters\" = \"0@127.0.0.1:9093\"\n",
        )
        .expect("a controller-only node parses");
        assert!(!controller.roles.broker && controller.roles.controller);
        for (text, key) in [
            // One role needs a quorum to belong to.
            ("\"process.roles\" = \"broker\"", "process.roles"),
            ("\"process.roles\" = \"controller\"", "process.roles"),
            ("\"process.roles\" = \"broker,admin\"", "process.roles"),
            // A broker-only node is no voter.
            (
                "\"process.roles\" = \"broker\"\n\"controller.quorum.voters\" = \"0@127.0.0.1:1\"",
                "controller.quorum.voters",
            ),
            (
                "\"controller.quorum.voters\" = \"0@nowhere\"",
                "controller.quorum.voters",
            ),
            (
                "\"controller.quorum.voters\" = \"0@127.0.0.1:1,0@127.0.0.1:2\"",
                "controller.quorum.voters",
            ),
            // This node (node.id 0) must be one of the voters.
            (
                "\"controller.quorum.voters\" = \"1@127.0.0.1:1\"",
                "controller.quorum.voters",
            ),
        ] {
            match BrokerConfig::from_toml_str(text) {
                Err(ConfigError::BadValue { key: k, .. }) => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn empty_file_gives_kafka_defaults() {
        let c = parse("");
        assert_eq!(c, BrokerConfig::default());
        assert_eq!(c.node_id, 0);
        assert_eq!(c.listen, addr("127.0.0.1:9092"));
        assert_eq!(c.advertised_listen, None);
        assert_eq!(c.advertised(), addr("127.0.0.1:9092"));
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert_eq!(c.num_partitions, 1);
        assert_eq!(c.default_replication_factor, 1);
        assert!(c.auto_create_topics_enable);
        assert_eq!(c.socket_request_max_bytes, 104_857_600);
        assert_eq!(c.message_max_bytes, 1_048_588);
        assert_eq!(c.log_retention_check_interval_ms, 300_000);
        assert_eq!(c.log.segment_bytes, 1 << 30);
        assert_eq!(c.log.segment_ms, 168 * 3_600_000);
        assert_eq!(c.log.retention_ms, 168 * 3_600_000);
        assert_eq!(c.log.retention_bytes, -1);
        assert_eq!(c.log.index_interval_bytes, 4096);
        assert_eq!(c.log.flush_messages, u64::MAX);
        assert_eq!(c.log.flush_ms, u64::MAX);
        assert_eq!(c.log.producer_id_expiration_ms, 86_400_000);
        assert_eq!(c.log.max_message_bytes, 1_048_588);
        assert!(c.shards.is_empty());
        assert_eq!(c.log, LogConfig::default());
    }

    #[test]
    fn mirror_metadata_refresh_interval() {
        assert_eq!(parse("").mirror_metadata_refresh_interval_ms, 60_000);
        let c = parse("\"mirror.metadata.refresh.interval.ms\" = 1000");
        assert_eq!(c.mirror_metadata_refresh_interval_ms, 1000);
        parse_err("\"mirror.metadata.refresh.interval.ms\" = 0");
    }

    /// Every top-level key, quoted. Each value differs from its default.
    const ALL_QUOTED: &str = r#"
        "node.id" = 7
        "listeners" = "PLAINTEXT://0.0.0.0:19092"
        "advertised.listeners" = "PLAINTEXT://10.1.2.3:19092"
        "log.dirs" = "/var/lib/twinlog"
        "num.partitions" = 8
        "default.replication.factor" = 1
        "auto.create.topics.enable" = false
        "listener.cpu.steering" = false
        "socket.request.max.bytes" = 2000000
        "message.max.bytes" = 500000
        "log.retention.check.interval.ms" = 60000
        "log.segment.bytes" = 1048576
        "log.roll.ms" = 3600000
        "log.retention.ms" = 7200000
        "log.retention.bytes" = 1073741824
        "log.index.interval.bytes" = 8192
        "log.flush.interval.messages" = 10000
        "log.flush.interval.ms" = 1000
        "log.direct.io" = true
        "producer.id.expiration.ms" = 3600000
    "#;

    fn assert_all_keys_applied(c: &BrokerConfig) {
        assert_eq!(c.node_id, 7);
        assert_eq!(c.listen, addr("0.0.0.0:19092"));
        assert_eq!(c.advertised_listen, Some(addr("10.1.2.3:19092")));
        assert_eq!(c.advertised(), addr("10.1.2.3:19092"));
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/twinlog"));
        assert_eq!(c.num_partitions, 8);
        assert_eq!(c.default_replication_factor, 1);
        assert!(!c.auto_create_topics_enable);
        assert!(!c.listener_cpu_steering);
        assert_eq!(c.socket_request_max_bytes, 2_000_000);
        assert_eq!(c.message_max_bytes, 500_000);
        assert_eq!(c.log_retention_check_interval_ms, 60_000);
        assert_eq!(
            c.log,
            LogConfig {
                segment_bytes: 1_048_576,
                segment_ms: 3_600_000,
                index_interval_bytes: 8192,
                retention_bytes: 1_073_741_824,
                retention_ms: 7_200_000,
                flush_messages: 10_000,
                flush_ms: 1000,
                producer_id_expiration_ms: 3_600_000,
                max_message_bytes: 500_000,
                direct_io: true,
                ..LogConfig::default()
            }
        );
    }

    #[test]
    fn every_key_quoted() {
        assert_all_keys_applied(&parse(ALL_QUOTED));
    }

    #[test]
    fn every_key_bare_dotted() {
        // Bare dotted keys become nested tables in TOML; they must mean the same thing.
        // Unquote the keys only: every line is `"key" = value`.
        let bare: String = ALL_QUOTED
            .lines()
            .map(|line| match line.trim().split_once(" = ") {
                Some((key, value)) => format!("{} = {value}\n", key.trim_matches('"')),
                None => String::new(),
            })
            .collect();
        assert!(bare.contains("log.retention.ms = 7200000"), "{bare}");
        assert!(bare.contains("listeners = \"PLAINTEXT://"), "{bare}");
        assert_all_keys_applied(&parse(&bare));
    }

    #[test]
    fn every_key_as_table_sections() {
        let text = r#"
            listeners = "0.0.0.0:19092"
            advertised.listeners = "10.1.2.3:19092"
            [node]
            id = 7
            [num]
            partitions = 8
            [default.replication]
            factor = 1
            [auto.create.topics]
            enable = false
            [listener.cpu]
            steering = false
            [socket.request.max]
            bytes = 2000000
            [message.max]
            bytes = 500000
            [log]
            dirs = "/var/lib/twinlog"
            segment.bytes = 1048576
            roll.ms = 3600000
            retention.ms = 7200000
            retention.bytes = 1073741824
            retention.check.interval.ms = 60000
            index.interval.bytes = 8192
            flush.interval = { messages = 10000, ms = 1000 }
            direct.io = true
            [producer.id.expiration]
            ms = 3600000
        "#;
        assert_all_keys_applied(&parse(text));
    }

    #[test]
    fn integers_and_booleans_as_strings() {
        let c = parse(
            r#"
            "node.id" = "7"
            "num.partitions" = " 8 "
            "log.segment.bytes" = "1073741823"
            "log.retention.bytes" = "-1"
            "log.flush.interval.messages" = "9223372036854775807"
            "auto.create.topics.enable" = "FALSE"
            "#,
        );
        assert_eq!(c.node_id, 7);
        assert_eq!(c.num_partitions, 8);
        assert_eq!(c.log.segment_bytes, 1_073_741_823);
        assert_eq!(c.log.retention_bytes, -1);
        assert_eq!(c.log.flush_messages, u64::MAX);
        assert!(!c.auto_create_topics_enable);
        assert!(parse(r#""auto.create.topics.enable" = "true""#).auto_create_topics_enable);
    }

    #[test]
    fn roll_ms_wins_over_hours() {
        assert_eq!(parse("log.roll.hours = 2").log.segment_ms, 2 * 3_600_000);
        let c = parse("log.roll.hours = 2\nlog.roll.ms = 5000");
        assert_eq!(c.log.segment_ms, 5000);
    }

    #[test]
    fn retention_ms_wins_over_minutes_over_hours() {
        assert_eq!(
            parse("log.retention.hours = 3").log.retention_ms,
            3 * 3_600_000
        );
        assert_eq!(
            parse("log.retention.minutes = 3").log.retention_ms,
            3 * 60_000
        );
        let c = parse("log.retention.hours = 3\nlog.retention.minutes = 4");
        assert_eq!(c.log.retention_ms, 4 * 60_000);
        let c = parse("log.retention.hours = 3\nlog.retention.minutes = 4\nlog.retention.ms = 5");
        assert_eq!(c.log.retention_ms, 5);
        let c = parse("log.retention.hours = 3\nlog.retention.ms = 5");
        assert_eq!(c.log.retention_ms, 5);
    }

    #[test]
    fn retention_minus_one_is_unlimited_in_every_unit() {
        for key in [
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ] {
            assert_eq!(parse(&format!("{key} = -1")).log.retention_ms, -1, "{key}");
            assert!(matches!(
                BrokerConfig::from_toml_str(&format!("{key} = -2")),
                Err(ConfigError::BadValue { .. })
            ));
        }
        // A bad lower-precedence key is still an error even though it would lose.
        let e = parse_err("log.retention.ms = 5\nlog.retention.hours = -2");
        assert!(
            e.to_string()
                .starts_with("config key `log.retention.hours`"),
            "{e}"
        );
        let e = parse_err("log.roll.ms = 5\nlog.roll.hours = 0");
        assert!(
            e.to_string().starts_with("config key `log.roll.hours`"),
            "{e}"
        );
        let e = parse_err("log.dirs = \"/a\"\nlog.dir = 5");
        assert!(e.to_string().starts_with("config key `log.dir`"), "{e}");
    }

    #[test]
    fn log_dirs_forms_and_precedence() {
        assert_eq!(parse(r#"log.dir = "/a""#).data_dir, PathBuf::from("/a"));
        assert_eq!(
            parse("log.dir = \"/a\"\nlog.dirs = \"/b\"").data_dir,
            PathBuf::from("/b")
        );
        assert_eq!(parse(r#"log.dirs = ["/c"]"#).data_dir, PathBuf::from("/c"));
        assert_eq!(parse(r#"log.dirs = "/d,""#).data_dir, PathBuf::from("/d"));
        for bad in [
            r#"log.dirs = "/a,/b""#,
            r#"log.dirs = ["/a", "/b"]"#,
            r#"log.dirs = """#,
            "log.dirs = 5",
        ] {
            match parse_err(bad) {
                ConfigError::BadValue { key, expected, .. } => {
                    assert_eq!(key, "log.dirs");
                    assert_eq!(expected, DATA_DIR_EXPECTED);
                }
                other => panic!("{bad}: {other}"),
            }
        }
    }

    #[test]
    fn listener_forms() {
        let l = |s: &str| parse_listener("listeners", s);
        assert_eq!(l("127.0.0.1:9092").expect("plain"), addr("127.0.0.1:9092"));
        assert_eq!(
            l("PLAINTEXT://127.0.0.1:9093").expect("named"),
            addr("127.0.0.1:9093")
        );
        assert_eq!(l("plaintext://[::1]:9094").expect("v6"), addr("[::1]:9094"));
        assert_eq!(
            l("PLAINTEXT://:9095").expect("wildcard"),
            addr("0.0.0.0:9095")
        );
        assert_eq!(
            l("PLAINTEXT://localhost:9096").expect("localhost"),
            addr("127.0.0.1:9096")
        );
        assert_eq!(l("127.0.0.1:0").expect("ephemeral"), addr("127.0.0.1:0"));
        for bad in [
            "SSL://127.0.0.1:9092",
            "PLAINTEXT://a:9092,PLAINTEXT://b:9093",
            "broker.example.com:9092",
            "127.0.0.1",
            "127.0.0.1:99999",
            "",
        ] {
            match l(bad) {
                Err(ConfigError::BadValue {
                    key,
                    value,
                    expected,
                }) => {
                    assert_eq!(key, "listeners");
                    assert_eq!(value, bad);
                    assert_eq!(expected, LISTENER_EXPECTED);
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn metrics_listen_is_off_unless_set() {
        assert_eq!(parse("").metrics_listen, None);
        assert_eq!(parse(r#""metrics.listen" = """#).metrics_listen, None);
        assert_eq!(
            parse(r#""metrics.listen" = "127.0.0.1:9404""#).metrics_listen,
            Some(addr("127.0.0.1:9404"))
        );
        assert_eq!(
            parse("[metrics]\nlisten = \"localhost:9404\"").metrics_listen,
            Some(addr("127.0.0.1:9404"))
        );
        let e = parse_err(r#""metrics.listen" = "metrics.example.com:9404""#);
        assert!(e.to_string().contains("metrics.listen"), "{e}");
        let e = parse_err(r#""metrics.listen" = 9404"#);
        assert!(e.to_string().contains("metrics.listen"), "{e}");
    }

    #[test]
    fn advertised_listener_must_be_connectable() {
        for bad in ["0.0.0.0:9092", "PLAINTEXT://:9092", "127.0.0.1:0"] {
            match parse_err(&format!("advertised.listeners = \"{bad}\"")) {
                ConfigError::BadValue { key, expected, .. } => {
                    assert_eq!(key, "advertised.listeners");
                    assert_eq!(expected, ADVERTISED_EXPECTED);
                }
                other => panic!("{bad}: {other}"),
            }
        }
        assert!(matches!(
            parse_err("listeners = 9092"),
            ConfigError::BadValue { .. }
        ));
    }

    #[test]
    fn unknown_key_names_it_in_both_forms() {
        let e = parse_err("num.partitons = 3");
        assert_eq!(e.to_string(), "unknown config key `num.partitons`");
        let e = parse_err(r#""num.partitons" = 3"#);
        assert_eq!(e.to_string(), "unknown config key `num.partitons`");
        let e = parse_err("[log]\nsegment.byts = 3");
        assert_eq!(e.to_string(), "unknown config key `log.segment.byts`");
        // A prefix of a real key is not a key.
        let e = parse_err("log = 3");
        assert_eq!(e.to_string(), "unknown config key `log`");
    }

    #[test]
    fn bad_value_message_names_key_value_and_expectation() {
        let e = parse_err(r#"log.segment.bytes = "abc""#);
        assert_eq!(
            e.to_string(),
            "config key `log.segment.bytes`: expected a positive integer, got \"abc\""
        );
        let e = parse_err("log.segment.bytes = 0");
        assert_eq!(
            e.to_string(),
            "config key `log.segment.bytes`: expected a positive integer, got \"0\""
        );
        let e = parse_err("log.segment.bytes = 4294967296");
        assert_eq!(
            e.to_string(),
            "config key `log.segment.bytes`: expected an integer no larger than 2147483647, \
             got \"4294967296\""
        );
        let e = parse_err("log.segment.bytes = 1.5");
        assert_eq!(
            e.to_string(),
            "config key `log.segment.bytes`: expected a positive integer, got \"1.5\""
        );
        let e = parse_err(r#"auto.create.topics.enable = "yes""#);
        assert_eq!(
            e.to_string(),
            "config key `auto.create.topics.enable`: expected true or false, got \"yes\""
        );
        let e = parse_err("auto.create.topics.enable = 1");
        assert!(matches!(e, ConfigError::BadValue { .. }), "{e}");
    }

    #[test]
    fn replication_settings_are_read_and_checked() {
        for bad in ["0", "-1", "\"two\""] {
            let e = parse_err(&format!("default.replication.factor = {bad}"));
            assert!(
                e.to_string().starts_with(
                    "config key `default.replication.factor`: expected a replication factor"
                ),
                "{e}"
            );
        }
        let c = parse(
            "default.replication.factor = \"3\"\n\"transaction.state.log.replication.factor\" = 2\n\"broker.rack\" = \"r1\"\n\"broker.session.timeout.ms\" = 3000\n\"replica.lag.time.max.ms\" = 4000\n\"min.insync.replicas\" = 2\n\"unclean.leader.election.enable\" = true\n\"auto.leader.rebalance.enable\" = false\n",
        );
        assert_eq!(c.default_replication_factor, 3);
        assert_eq!(c.offsets_topic_replication_factor, 2);
        assert_eq!(c.broker_rack.as_deref(), Some("r1"));
        assert_eq!(c.broker_session_timeout_ms, 3000);
        assert_eq!(c.replication.lag_time_max_ms, 4000);
        assert_eq!(c.log.min_insync_replicas, 2);
        assert!(c.log.unclean_leader_election);
        assert!(!c.auto_leader_rebalance);
        let e = parse_err("\"min.insync.replicas\" = 0");
        assert!(e.to_string().contains("min.insync.replicas"), "{e}");
    }

    #[test]
    fn range_checks() {
        for bad in [
            "num.partitions = 0",
            "node.id = -1",
            "node.id = 2147483648",
            "socket.request.max.bytes = 0",
            "message.max.bytes = -5",
            "log.retention.check.interval.ms = 0",
            "log.roll.ms = 0",
            "log.roll.hours = 0",
            "log.retention.bytes = -2",
            "log.index.interval.bytes = -1",
            "log.flush.interval.messages = 0",
            "log.flush.interval.ms = -1",
            "producer.id.expiration.ms = 0",
        ] {
            let key = bad.split(' ').next().expect("key");
            match parse_err(bad) {
                ConfigError::BadValue { key: k, .. } => assert_eq!(k, key),
                other => panic!("{bad}: {other}"),
            }
        }
        let c =
            parse("log.index.interval.bytes = 0\nlog.flush.interval.ms = 0\nlog.retention.ms = 0");
        assert_eq!(c.log.index_interval_bytes, 0);
        assert_eq!(c.log.flush_ms, 0);
        assert_eq!(c.log.retention_ms, 0);
    }

    #[test]
    fn same_key_in_both_forms_is_a_duplicate() {
        let e = parse_err("\"num.partitions\" = 2\nnum.partitions = 3");
        assert_eq!(
            e.to_string(),
            "config key `num.partitions` is given twice (once quoted, once as dotted tables)"
        );
    }

    #[test]
    fn syntax_error_names_origin() {
        let e = parse_err("num.partitions = ");
        assert!(matches!(e, ConfigError::Syntax { path: None, .. }), "{e}");
        assert!(
            e.to_string().starts_with("invalid TOML in config text: "),
            "{e}"
        );
    }

    #[test]
    fn load_reads_file_and_reports_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("twinlog.toml");
        std::fs::write(&path, "num.partitions = 4\n").expect("write");
        assert_eq!(BrokerConfig::load(&path).expect("loads").num_partitions, 4);

        std::fs::write(&path, "num.partitions = [").expect("write");
        let e = BrokerConfig::load(&path).expect_err("bad toml");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");

        let missing = dir.path().join("missing.toml");
        let e = BrokerConfig::load(&missing).expect_err("missing");
        assert!(matches!(e, ConfigError::Io { .. }));
        assert!(e.to_string().starts_with("cannot read config file "), "{e}");
        assert!(e.to_string().contains("missing.toml"), "{e}");
    }

    #[test]
    fn example_config_parses_to_defaults() {
        // The example spells out every default; keep it true.
        let text = include_str!("../config/twinlog.example.toml");
        let parsed = parse(text);
        assert!(parsed.file_keys.contains_key("num.partitions"));
        assert_eq!(
            BrokerConfig {
                file_keys: BTreeMap::new(),
                ..parsed
            },
            BrokerConfig::default()
        );
        // Its commented-out settings are valid too: the keys unset by default (at values
        // equal to the defaults, except the two that have none) and the sample shards.
        let uncommented: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| {
                l.starts_with("[[shard]]")
                    || l.split_once(" = ").is_some_and(|(k, _)| {
                        k.chars().all(|c| c.is_ascii_lowercase() || c == '.')
                            && k != "advertised.listeners"
                            && k != "log.flush.interval.ms"
                    })
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            uncommented.contains("log.retention.minutes = 10080"),
            "{uncommented}"
        );
        assert!(
            uncommented.contains("in.flight.requests.max = 64"),
            "{uncommented}"
        );
        let c = parse(&uncommented);
        assert_eq!(
            c.shards,
            vec![ShardConfig::on_core(0), ShardConfig::on_core(1)]
        );
        assert_eq!(c.log, BrokerConfig::default().log);
        assert_eq!(c.data_dir, PathBuf::from("./data"));
    }

    #[test]
    fn shard_tables_both_key_forms() {
        let c = parse(
            r#"
            [[shard]]
            core = 2
            io.memory.bytes = 1048576
            in.flight.requests.max = 16
            [[shard]]
            "core" = "0"
            "socket.receive.buffer.bytes" = 131072
            "socket.send.buffer.bytes" = "262144"
            inline.write.max.bytes = 0
            spin.before.park.us = 50
            "#,
        );
        assert_eq!(
            c.shards,
            vec![
                ShardConfig {
                    core: 2,
                    io_memory_bytes: 1 << 20,
                    in_flight_requests_max: 16,
                    ..ShardConfig::on_core(2)
                },
                ShardConfig {
                    receive_buffer_bytes: 128 << 10,
                    send_buffer_bytes: 256 << 10,
                    inline_write_max_bytes: 0,
                    spin_before_park_us: 50,
                    ..ShardConfig::on_core(0)
                },
            ]
        );
        assert_eq!(ShardConfig::on_core(5).io_memory_bytes, 512 << 10);
        assert_eq!(ShardConfig::on_core(5).in_flight_requests_max, 64);
        assert_eq!(ShardConfig::on_core(5).receive_buffer_bytes, 64 << 10);
        assert_eq!(ShardConfig::on_core(5).send_buffer_bytes, 64 << 10);
        assert_eq!(ShardConfig::on_core(5).inline_write_max_bytes, 64 << 10);
        assert_eq!(ShardConfig::on_core(5).spin_before_park_us, 0);
    }

    #[test]
    fn shard_key_errors() {
        let e = parse_err("[[shard]]\ncore = 0\nio.memory.byts = 5");
        assert_eq!(e.to_string(), "unknown config key `shard.io.memory.byts`");
        let e = parse_err("[[shard]]\nio.memory.bytes = 5");
        assert_eq!(e.to_string(), "config key `shard.core` is required");
        let e = parse_err("[[shard]]\ncore = 0\nin.flight.requests.max = 0");
        assert_eq!(
            e.to_string(),
            "config key `shard.in.flight.requests.max`: expected a positive integer, got \"0\""
        );
        let e = parse_err("[[shard]]\ncore = 0\nspin.before.park.us = 2000000");
        assert_eq!(
            e.to_string(),
            "config key `shard.spin.before.park.us`: expected microseconds from 0 to 1000000, got \"2000000\""
        );
        let e = parse_err("[[shard]]\ncore = -1");
        assert_eq!(
            e.to_string(),
            "config key `shard.core`: expected a non-negative integer, got \"-1\""
        );
        let e = parse_err("[[shard]]\ncore = 1\n[[shard]]\ncore = 1");
        assert!(
            e.to_string()
                .starts_with("config key `shard.core`: expected a core not used"),
            "{e}"
        );
        // [shard] (one table) or a quoted "shard.core" at the top is not a [[shard]].
        for bad in [
            "[shard]\ncore = 1",
            "shard.core = 1",
            "\"shard.core\" = 1",
            "shard = 1",
        ] {
            match parse_err(bad) {
                ConfigError::BadValue { expected, .. } => {
                    assert_eq!(expected, "shard settings inside [[shard]] tables", "{bad}")
                }
                other => panic!("{bad}: {other}"),
            }
        }
    }

    #[test]
    fn resolve_shards_fills_one_per_core() {
        let mut c = BrokerConfig::default();
        c.resolve_shards(4).expect("resolves");
        assert_eq!(
            c.shards,
            (0..4).map(ShardConfig::on_core).collect::<Vec<_>>()
        );
        assert_eq!(c.memlock_bytes_needed(), 3 * 4 * (512 << 10));
        // Resolving again keeps what is there.
        c.resolve_shards(4).expect("idempotent");
        assert_eq!(c.shards.len(), 4);

        let mut c = BrokerConfig::default();
        c.resolve_shards(0).expect("zero cores means one");
        assert_eq!(c.shards, vec![ShardConfig::on_core(0)]);
    }

    #[test]
    fn resolve_shards_validates_configured_cores() {
        let mut c = parse("[[shard]]\ncore = 3\nio.memory.bytes = 1000\n[[shard]]\ncore = 1");
        c.resolve_shards(4).expect("cores exist");
        assert_eq!(c.shards.len(), 2);
        assert_eq!(c.memlock_bytes_needed(), 3 * (1000 + (512 << 10)));

        match c.resolve_shards(3) {
            Err(ConfigError::BadValue {
                key,
                value,
                expected,
            }) => {
                assert_eq!(key, "shard.core");
                assert_eq!(value, "3");
                assert_eq!(expected, "a core id below the number of available cores");
            }
            other => panic!("{other:?}"),
        }

        c.shards.push(ShardConfig::on_core(1));
        match c.resolve_shards(8) {
            Err(ConfigError::BadValue { key, value, .. }) => {
                assert_eq!(key, "shard.core");
                assert_eq!(value, "1");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn memlock_saturates() {
        let mut c = BrokerConfig::default();
        assert_eq!(c.memlock_bytes_needed(), 0);
        c.shards = vec![ShardConfig {
            io_memory_bytes: usize::MAX,
            ..ShardConfig::on_core(0)
        }];
        assert_eq!(c.memlock_bytes_needed(), usize::MAX);
    }

    #[test]
    fn cli_overrides_win_over_file() {
        let mut c = parse("log.dirs = \"/from/file\"\nlisteners = \"127.0.0.1:1111\"");
        c.apply_overrides(None, None);
        assert_eq!(c.data_dir, PathBuf::from("/from/file"));
        assert_eq!(c.listen, addr("127.0.0.1:1111"));
        c.apply_overrides(Some(PathBuf::from("/from/cli")), None);
        assert_eq!(c.data_dir, PathBuf::from("/from/cli"));
        assert_eq!(c.listen, addr("127.0.0.1:1111"));
        c.apply_overrides(None, Some(addr("0.0.0.0:2222")));
        assert_eq!(c.data_dir, PathBuf::from("/from/cli"));
        assert_eq!(c.listen, addr("0.0.0.0:2222"));
    }

    #[test]
    fn group_coordinator_keys() {
        let c = BrokerConfig::default();
        assert_eq!(c.offsets_topic_num_partitions, 50);
        assert_eq!(c.group_initial_rebalance_delay_ms, 3_000);
        assert_eq!(c.group_min_session_timeout_ms, 6_000);
        assert_eq!(c.group_max_session_timeout_ms, 1_800_000);
        assert_eq!(c.offsets_retention_minutes, 10_080);
        let c = parse(
            r#"
            "offsets.topic.num.partitions" = 3
            "group.initial.rebalance.delay.ms" = 0
            "group.min.session.timeout.ms" = 1000
            "group.max.session.timeout.ms" = 60000
            "offsets.retention.minutes" = 60
            "#,
        );
        assert_eq!(c.offsets_topic_num_partitions, 3);
        assert_eq!(c.group_initial_rebalance_delay_ms, 0);
        assert_eq!(c.group_min_session_timeout_ms, 1_000);
        assert_eq!(c.group_max_session_timeout_ms, 60_000);
        assert_eq!(c.offsets_retention_minutes, 60);
        parse_err("\"offsets.topic.num.partitions\" = 0");
    }

    #[test]
    fn transaction_coordinator_keys() {
        let c = BrokerConfig::default();
        assert_eq!(c.transaction_state_log_num_partitions, 50);
        assert_eq!(c.transaction_max_timeout_ms, 900_000);
        assert_eq!(
            c.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            10_000
        );
        let c = parse(
            r#"
            "transaction.state.log.num.partitions" = 4
            "transaction.max.timeout.ms" = 60000
            "transaction.abort.timed.out.transaction.cleanup.interval.ms" = 500
            "#,
        );
        assert_eq!(c.transaction_state_log_num_partitions, 4);
        assert_eq!(c.transaction_max_timeout_ms, 60_000);
        assert_eq!(
            c.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            500
        );
        parse_err("\"transaction.state.log.num.partitions\" = 0");
    }

    #[test]
    fn authorizer_keys_enable_acls_with_super_users() {
        assert_eq!(BrokerConfig::default().authorizer, None);
        let c = parse(
            r#"
            "authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            "super.users" = "User:admin;User:broker"
            "allow.everyone.if.no.acl.found" = true
            "#,
        );
        let a = c.authorizer.expect("authorizer");
        assert!(a.allow_if_none);
        assert!(a.super_users.contains("User:admin") && a.super_users.contains("User:broker"));
        let e = parse_err(r#""authorizer.class.name" = "com.example.Custom""#);
        assert!(e.to_string().contains("StandardAuthorizer"), "{e}");
        let e = parse_err(
            "\"authorizer.class.name\" = \"kafka.security.authorizer.AclAuthorizer\"\n\"super.users\" = \"admin\"",
        );
        assert!(e.to_string().contains("super.users"), "{e}");
    }
}
