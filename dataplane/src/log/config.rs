//! Per-partition log settings, named after Kafka's topic configs.

use crate::kafka_configs::{self, REMOVED_TOPIC_CONFIGS};
use crate::log::validate::TopicCompression;

/// Log settings. Defaults are Kafka's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment when an append would grow it past this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is older than this.
    pub segment_ms: i64,
    /// `index.interval.bytes`: bytes between two offset-index entries.
    pub index_interval_bytes: u32,
    /// `retention.bytes` (-1: unlimited): delete whole old segments beyond this size.
    pub retention_bytes: i64,
    /// `retention.ms` (-1: unlimited): delete whole segments whose newest record is older.
    pub retention_ms: i64,
    /// `flush.messages`: fsync after this many records (u64::MAX: leave it to the OS).
    pub flush_messages: u64,
    /// `flush.ms`: fsync when the last flush is older than this (u64::MAX: never by time).
    pub flush_ms: u64,
    /// `producer.id.expiration.ms`: forget idle producer ids after this long.
    pub producer_id_expiration_ms: i64,
    /// `max.message.bytes`: the largest record batch accepted from a client.
    pub max_message_bytes: usize,
    /// `cleanup.policy` includes `compact`: the log cleaner keeps the last record per
    /// key, and client records need a key.
    pub compact: bool,
    /// `cleanup.policy` includes `delete`: retention by time and size applies.
    pub delete: bool,
    /// `delete.retention.ms`: how long the cleaner keeps tombstones and removable
    /// transaction markers after it first sees them (their batch's delete horizon).
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this forces a clean whatever
    /// the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`: clean once this share of the cleanable bytes is dirty.
    pub min_cleanable_dirty_ratio: Ratio,
    /// `compression.type`: the codec leader appends store batches with.
    pub compression: TopicCompression,
    /// `message.timestamp.type=LogAppendTime`: a leader append stamps the append time
    /// into each batch (Kafka's LogAppendTime; the CRC is recomputed).
    pub log_append_time: bool,
    /// `min.insync.replicas`: an acks=all produce needs at least this many in-sync
    /// replicas (NOT_ENOUGH_REPLICAS otherwise).
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable`: with no in-sync replica left, a replica out of
    /// the ISR may lead (losing what it lacks).
    pub unclean_leader_election: bool,
    /// Broker-wide `log.direct.io` (no topic-level key): `.log` appends bypass the page
    /// cache with O_DIRECT. See `LogSegment`.
    pub direct_io: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            retention_bytes: -1,
            retention_ms: 7 * 24 * 3600 * 1000,
            flush_messages: u64::MAX,
            flush_ms: u64::MAX,
            producer_id_expiration_ms: 24 * 3600 * 1000,
            max_message_bytes: 1_048_588,
            compact: false,
            delete: true,
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: Ratio::from_f64(0.5),
            compression: TopicCompression::Producer,
            log_append_time: false,
            min_insync_replicas: 1,
            unclean_leader_election: false,
            direct_io: false,
        }
    }
}

/// A ratio in [0, 1] kept in millionths, so that configs stay `Eq` and print back as
/// Java prints a double (`0.5`, `1.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio(u32);

impl Ratio {
    pub fn from_f64(v: f64) -> Ratio {
        Ratio((v.clamp(0.0, 1.0) * 1_000_000.0).round() as u32)
    }

    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / 1_000_000.0
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.as_f64();
        if v.fract() == 0.0 {
            write!(f, "{v:.1}")
        } else {
            write!(f, "{v}")
        }
    }
}

/// The topic configs that change what Twinlog's log does. Kafka's other topic configs are
/// accepted, stored and described (`crate::kafka_configs`).
pub const TOPIC_CONFIG_NAMES: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.message.bytes",
    "message.timestamp.type",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.ms",
    "unclean.leader.election.enable",
];

/// Parses an integer config; the error is Kafka's (`ConfigDef.parseType`). `_what`
/// says what is expected, for the reader of the call.
fn parse_int<T: std::str::FromStr>(name: &str, value: &str, _what: &str) -> Result<T, String> {
    value.trim().parse::<T>().map_err(|_| {
        let ty = match kafka_configs::topic_config(name).map(|d| d.config_type) {
            Some(kafka_configs::types::INT) => "INT",
            _ => "LONG",
        };
        format!("Invalid value {value} for configuration {name}: Not a number of type {ty}")
    })
}

/// A LONG config that must be at least 0.
fn non_negative(name: &str, value: &str) -> Result<i64, String> {
    let v: i64 = parse_int(name, value, "a non-negative integer")?;
    if v < 0 {
        return Err(at_least(name, value, 0));
    }
    Ok(v)
}

/// Kafka's message for a value below a config's minimum (`ConfigDef.Range.atLeast`).
fn at_least(name: &str, value: &str, min: i64) -> String {
    format!("Invalid value {value} for configuration {name}: Value must be at least {min}")
}

/// Applies one topic config to a log config. Errors name the key and say what was
/// expected. Names that do not change the log (cleanup.policy, compression.type, ...) are
/// validated only.
pub fn apply_topic_config(log: &mut LogConfig, name: &str, value: &str) -> Result<(), String> {
    match name {
        "segment.bytes" => {
            let v: i32 = parse_int(name, value, "an integer from 14 to 2147483647")?;
            if v < 14 {
                return Err(at_least(name, value, 14));
            }
            log.segment_bytes = v as u64;
        }
        "segment.ms" => {
            log.segment_ms = parse_int::<i64>(name, value, "a positive integer")?.max(1)
        }
        "retention.ms" => log.retention_ms = parse_int(name, value, "an integer (-1: unlimited)")?,
        "retention.bytes" => {
            log.retention_bytes = parse_int(name, value, "an integer (-1: unlimited)")?
        }
        "index.interval.bytes" => {
            log.index_interval_bytes = parse_int(name, value, "a non-negative integer")?
        }
        "flush.messages" => {
            let v: i64 = parse_int(name, value, "a positive integer")?;
            log.flush_messages = if v <= 0 || v == i64::MAX {
                u64::MAX
            } else {
                v as u64
            };
        }
        "flush.ms" => {
            let v: i64 = parse_int(name, value, "a non-negative integer")?;
            log.flush_ms = if v < 0 || v == i64::MAX {
                u64::MAX
            } else {
                v as u64
            };
        }
        "max.message.bytes" => {
            let v: i32 = parse_int(name, value, "an integer from 0 to 2147483647")?;
            if v < 0 {
                return Err(at_least(name, value, 0));
            }
            log.max_message_bytes = v as usize;
        }
        "cleanup.policy" => {
            let (mut compact, mut delete) = (false, false);
            for p in value.split(',') {
                match p.trim() {
                    "delete" => delete = true,
                    "compact" => compact = true,
                    _ => {
                        return Err(format!(
                            "config `{name}`: expected delete and/or compact, got {value:?}"
                        ))
                    }
                }
            }
            log.compact = compact;
            log.delete = delete;
        }
        "delete.retention.ms" => log.delete_retention_ms = non_negative(name, value)?,
        "min.compaction.lag.ms" => log.min_compaction_lag_ms = non_negative(name, value)?,
        "max.compaction.lag.ms" => {
            let v: i64 = parse_int(name, value, "a positive integer")?;
            if v < 1 {
                return Err(at_least(name, value, 1));
            }
            log.max_compaction_lag_ms = v;
        }
        "min.cleanable.dirty.ratio" => {
            let v: f64 = value.trim().parse().map_err(|_| {
                format!(
                    "Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
                )
            })?;
            if !(0.0..=1.0).contains(&v) {
                return Err(format!(
                    "Invalid value {value} for configuration {name}: Value must be between 0 and 1"
                ));
            }
            log.min_cleanable_dirty_ratio = Ratio::from_f64(v);
        }
        "compression.type" => {
            log.compression = TopicCompression::parse(value)
                .ok_or_else(|| format!("config `{name}`: unknown codec {value:?}"))?;
        }
        "message.timestamp.type" => {
            log.log_append_time = match value {
                "CreateTime" => false,
                "LogAppendTime" => true,
                _ => {
                    return Err(format!(
                        "config `{name}`: expected CreateTime or LogAppendTime, got {value:?}"
                    ))
                }
            };
        }
        "min.insync.replicas" => {
            let v: i32 = parse_int(name, value, "a positive integer")?;
            if v < 1 {
                return Err(at_least(name, value, 1));
            }
            log.min_insync_replicas = v;
        }
        "unclean.leader.election.enable" => {
            log.unclean_leader_election = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(format!(
                        "Invalid value {value} for configuration {name}: Expected value to be either true or false"
                    ))
                }
            };
        }
        // KIP-1279's topic config (read by the mirror from the metadata image).
        crate::fetcher::SUPPORT_UNCLEAN_ELECTION_CONFIG => {
            if !matches!(value.trim().to_ascii_lowercase().as_str(), "true" | "false") {
                return Err(format!(
                    "Invalid value {value} for configuration {name}: Expected value to be either true or false"
                ));
            }
        }
        // Kafka's other topic configs (and two that Kafka 4 removed): checked by type,
        // stored and described, no effect on the log yet (kafka_configs.rs).
        _ if REMOVED_TOPIC_CONFIGS.contains(&name) => {}
        _ => match kafka_configs::topic_config(name) {
            Some(def) => kafka_configs::validate(def, value)?,
            None => return Err(format!("Unknown topic config name: {name}")),
        },
    }
    Ok(())
}

/// The broker configs that set a topic config's default, most specific first within a
/// topic config (Kafka's synonyms: `log.retention.ms` wins over `.minutes` over
/// `.hours`), with the factor that turns the broker value into the topic value.
pub const BROKER_TOPIC_DEFAULTS: &[(&str, &str, i64)] = &[
    ("log.cleanup.policy", "cleanup.policy", 1),
    ("log.cleaner.delete.retention.ms", "delete.retention.ms", 1),
    (
        "log.cleaner.max.compaction.lag.ms",
        "max.compaction.lag.ms",
        1,
    ),
    (
        "log.cleaner.min.cleanable.ratio",
        "min.cleanable.dirty.ratio",
        1,
    ),
    (
        "log.cleaner.min.compaction.lag.ms",
        "min.compaction.lag.ms",
        1,
    ),
    ("compression.type", "compression.type", 1),
    ("log.flush.interval.messages", "flush.messages", 1),
    ("log.flush.interval.ms", "flush.ms", 1),
    ("log.index.interval.bytes", "index.interval.bytes", 1),
    ("message.max.bytes", "max.message.bytes", 1),
    ("log.message.timestamp.type", "message.timestamp.type", 1),
    ("min.insync.replicas", "min.insync.replicas", 1),
    (
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
        1,
    ),
    ("log.retention.bytes", "retention.bytes", 1),
    ("log.retention.ms", "retention.ms", 1),
    ("log.retention.minutes", "retention.ms", 60_000),
    ("log.retention.hours", "retention.ms", 3_600_000),
    ("log.segment.bytes", "segment.bytes", 1),
    ("log.roll.ms", "segment.ms", 1),
    ("log.roll.hours", "segment.ms", 3_600_000),
];

/// The broker config a topic config's default is named after (Kafka's synonym one level
/// down: `segment.ms` -> `log.roll.ms`), if it has one.
pub fn broker_config_of(topic_config: &str) -> Option<&'static str> {
    BROKER_TOPIC_DEFAULTS
        .iter()
        .find(|(_, t, factor)| *t == topic_config && *factor == 1)
        .map(|(b, _, _)| *b)
}

/// Applies broker configs (dynamic ones, as stored) to the topic defaults `log`: each
/// topic config takes its most specific broker synonym that is set. Errors name the key.
pub fn apply_broker_defaults(
    log: &mut LogConfig,
    broker: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let mut done: Vec<&str> = Vec::new();
    for (broker_name, topic_name, factor) in BROKER_TOPIC_DEFAULTS {
        if done.contains(topic_name) {
            continue;
        }
        let Some(value) = broker.get(*broker_name) else {
            continue;
        };
        let value = if *factor == 1 {
            value.clone()
        } else {
            let v: i64 = parse_int(broker_name, value, "an integer")?;
            if v < 0 {
                "-1".to_string()
            } else {
                v.saturating_mul(*factor).to_string()
            }
        };
        apply_topic_config(log, topic_name, &value).map_err(|e| format!("{broker_name}: {e}"))?;
        done.push(topic_name);
    }
    Ok(())
}

/// The current value of every topic config, as DescribeConfigs reports it.
pub fn describe_topic_config(log: &LogConfig) -> Vec<(&'static str, String)> {
    let unlimited = |v: u64| {
        if v == u64::MAX {
            i64::MAX.to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        (
            "cleanup.policy",
            match (log.compact, log.delete) {
                (true, true) => "compact,delete",
                (true, false) => "compact",
                _ => "delete",
            }
            .to_string(),
        ),
        ("compression.type", log.compression.name().to_string()),
        ("delete.retention.ms", log.delete_retention_ms.to_string()),
        (
            "max.compaction.lag.ms",
            log.max_compaction_lag_ms.to_string(),
        ),
        (
            "min.cleanable.dirty.ratio",
            log.min_cleanable_dirty_ratio.to_string(),
        ),
        (
            "min.compaction.lag.ms",
            log.min_compaction_lag_ms.to_string(),
        ),
        ("flush.messages", unlimited(log.flush_messages)),
        ("flush.ms", unlimited(log.flush_ms)),
        ("index.interval.bytes", log.index_interval_bytes.to_string()),
        ("max.message.bytes", log.max_message_bytes.to_string()),
        (
            "message.timestamp.type",
            if log.log_append_time {
                "LogAppendTime"
            } else {
                "CreateTime"
            }
            .to_string(),
        ),
        ("min.insync.replicas", log.min_insync_replicas.to_string()),
        ("retention.bytes", log.retention_bytes.to_string()),
        ("retention.ms", log.retention_ms.to_string()),
        ("segment.bytes", log.segment_bytes.to_string()),
        ("segment.ms", log.segment_ms.to_string()),
        (
            "unclean.leader.election.enable",
            log.unclean_leader_election.to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_round_trips_through_apply() {
        let custom = LogConfig {
            segment_bytes: 1000,
            segment_ms: 2000,
            index_interval_bytes: 0,
            retention_bytes: 3000,
            retention_ms: -1,
            flush_messages: 5,
            flush_ms: 0,
            max_message_bytes: 7000,
            compact: true,
            delete: false,
            delete_retention_ms: 10,
            min_compaction_lag_ms: 20,
            max_compaction_lag_ms: 30,
            min_cleanable_dirty_ratio: Ratio::from_f64(0.25),
            compression: TopicCompression::Zstd,
            log_append_time: true,
            ..LogConfig::default()
        };
        for log in [LogConfig::default(), custom] {
            let mut rebuilt = LogConfig::default();
            for (name, value) in describe_topic_config(&log) {
                assert!(TOPIC_CONFIG_NAMES.contains(&name), "{name}");
                apply_topic_config(&mut rebuilt, name, &value).expect(name);
            }
            assert_eq!(rebuilt, log);
        }
    }

    #[test]
    fn bad_values_name_the_key() {
        let mut log = LogConfig::default();
        let e = apply_topic_config(&mut log, "segment.bytes", "abc").expect_err("bad");
        assert!(e.contains("segment.bytes"), "{e}");
        assert!(apply_topic_config(&mut log, "segment.bytes", "2147483648").is_err());
        let mut compacted = LogConfig::default();
        assert!(apply_topic_config(&mut compacted, "cleanup.policy", "delete,compact").is_ok());
        assert!(compacted.compact);
        assert!(apply_topic_config(&mut log, "retention.hours", "1")
            .expect_err("unknown")
            .contains("Unknown topic config name"));
        // Kafka's other topic configs are checked by type and accepted.
        assert!(apply_topic_config(&mut log, "delete.retention.ms", "soon").is_err());
        assert!(
            apply_topic_config(&mut log, "min.cleanable.dirty.ratio", "1.5")
                .expect_err("out of range")
                .contains("between 0 and 1")
        );
        assert!(apply_topic_config(&mut log, "max.compaction.lag.ms", "0").is_err());
        assert!(apply_topic_config(&mut log, "message.format.version", "2.8").is_ok());
        assert_eq!(log, LogConfig::default());
        assert_eq!(Ratio::from_f64(1.0).to_string(), "1.0");
        assert_eq!(Ratio::from_f64(0.01).to_string(), "0.01");
    }
}
