//! Kafka's config catalog: every topic and broker config Apache Kafka 4.1 defines, with its
//! type, default, read-only and sensitive flags and its broker synonyms, as a fresh Kafka
//! broker describes them (`kafka_configs.tsv`, regenerated with `tests/java/ConfigDump.java`
//! against the peer broker of `scripts/kafka.sh`).
//!
//! Twinlog accepts every topic config Kafka accepts (validated by its type, like Kafka's
//! `ConfigDef`), stores it, and DescribeConfigs lists the whole catalog. Only the configs
//! in [`crate::log::config::TOPIC_CONFIG_NAMES`] change what the log does; the others are
//! kept and reported (the README's compatibility table names them). Two configs Kafka 4
//! removed (KIP-724) are still accepted as no-ops, because clients and mirror sources of
//! Kafka 3.x set them: [`REMOVED_TOPIC_CONFIGS`].

use std::collections::HashMap;
use std::sync::LazyLock;

/// Kafka's `ConfigType` values (DescribeConfigs v3+).
pub mod types {
    pub const BOOLEAN: i8 = 1;
    pub const STRING: i8 = 2;
    pub const INT: i8 = 3;
    pub const SHORT: i8 = 4;
    pub const LONG: i8 = 5;
    pub const DOUBLE: i8 = 6;
    pub const LIST: i8 = 7;
    pub const CLASS: i8 = 8;
    pub const PASSWORD: i8 = 9;
}

/// Topic configs Kafka 4 removed that Kafka 3.x clients and sources still send. Accepted,
/// not described, no effect.
pub const REMOVED_TOPIC_CONFIGS: &[&str] =
    &["message.format.version", "message.downconversion.enable"];

/// Whether a config belongs to topics or to brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Topic,
    Broker,
}

/// One config of Kafka's catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDef {
    pub scope: Scope,
    pub name: &'static str,
    /// A [`types`] value.
    pub config_type: i8,
    /// Kafka refuses to change it at runtime (broker configs only).
    pub read_only: bool,
    pub sensitive: bool,
    /// Kafka's default (`None`: Kafka has none, e.g. `log.retention.minutes`).
    pub default: Option<&'static str>,
    /// The broker configs a topic config falls back to, most specific first.
    pub synonyms: Vec<&'static str>,
}

/// The catalog in file order, and an index by (scope, name): DescribeConfigs looks up
/// every config of a resource.
struct Catalog {
    defs: Vec<ConfigDef>,
    index: HashMap<(Scope, &'static str), usize>,
}

/// Kafka's dynamic-only broker configs (`DynamicConfig.Broker`: the replication throttle
/// quotas `kafka-reassign-partitions --throttle` sets and `--verify` clears), which a
/// fresh broker's DescribeConfigs does not list and so ConfigDump does not see. Twinlog
/// stores them; it does not throttle replication yet.
const DYNAMIC_ONLY_BROKER_CONFIGS: &str = "\
broker\tleader.replication.throttled.rate\tLONG\tfalse\tfalse\t9223372036854775807\t
broker\tfollower.replication.throttled.rate\tLONG\tfalse\tfalse\t9223372036854775807\t
broker\treplica.alter.log.dirs.io.max.bytes.per.second\tLONG\tfalse\tfalse\t9223372036854775807\t
";

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
    let mut defs = parse(include_str!("kafka_configs.tsv"));
    defs.extend(parse(DYNAMIC_ONLY_BROKER_CONFIGS));
    let index = defs
        .iter()
        .enumerate()
        .map(|(i, d)| ((d.scope, d.name), i))
        .collect();
    Catalog { defs, index }
});

fn type_code(name: &str) -> i8 {
    match name {
        "BOOLEAN" => types::BOOLEAN,
        "INT" => types::INT,
        "SHORT" => types::SHORT,
        "LONG" => types::LONG,
        "DOUBLE" => types::DOUBLE,
        "LIST" => types::LIST,
        "CLASS" => types::CLASS,
        "PASSWORD" => types::PASSWORD,
        _ => types::STRING,
    }
}

fn parse(tsv: &'static str) -> Vec<ConfigDef> {
    tsv.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&'static str> = l.split('\t').collect();
            let [scope, name, ty, read_only, sensitive, default, synonyms] = f[..] else {
                return None;
            };
            Some(ConfigDef {
                scope: if scope == "topic" {
                    Scope::Topic
                } else {
                    Scope::Broker
                },
                name,
                config_type: type_code(ty),
                read_only: read_only == "true",
                sensitive: sensitive == "true",
                default: (default != "\\N").then_some(default),
                synonyms: synonyms.split(',').filter(|s| !s.is_empty()).collect(),
            })
        })
        .collect()
}

/// Every topic config of Kafka's catalog, in name order.
pub fn topic_configs() -> impl Iterator<Item = &'static ConfigDef> {
    CATALOG.defs.iter().filter(|d| d.scope == Scope::Topic)
}

/// Every broker config of Kafka's catalog, in name order.
pub fn broker_configs() -> impl Iterator<Item = &'static ConfigDef> {
    CATALOG.defs.iter().filter(|d| d.scope == Scope::Broker)
}

fn lookup(scope: Scope, name: &str) -> Option<&'static ConfigDef> {
    let catalog: &'static Catalog = &CATALOG;
    catalog
        .index
        .get(&(scope, name))
        .and_then(|i| catalog.defs.get(*i))
}

pub fn topic_config(name: &str) -> Option<&'static ConfigDef> {
    lookup(Scope::Topic, name)
}

pub fn broker_config(name: &str) -> Option<&'static ConfigDef> {
    lookup(Scope::Broker, name)
}

/// Checks `value` against a config's type as Kafka's `ConfigDef.parseType` does. The
/// error names the key and what was expected.
pub fn validate(def: &ConfigDef, value: &str) -> Result<(), String> {
    let v = value.trim();
    let bad = |what: &str| {
        Err(format!(
            "Invalid value {value} for configuration {}: {what}",
            def.name
        ))
    };
    let problem = match def.config_type {
        types::BOOLEAN if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") => {
            "Expected value to be either true or false"
        }
        types::INT if v.parse::<i32>().is_err() => "Not a number of type INT",
        types::SHORT if v.parse::<i16>().is_err() => "Not a number of type SHORT",
        types::LONG if v.parse::<i64>().is_err() => "Not a number of type LONG",
        types::DOUBLE if v.parse::<f64>().is_err() => "Not a number of type DOUBLE",
        _ => return Ok(()),
    };
    bad(problem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_has_kafkas_topic_and_broker_configs() {
        let topics: Vec<&str> = topic_configs().map(|d| d.name).collect();
        assert!(topics.len() >= 30, "{topics:?}");
        for name in crate::log::config::TOPIC_CONFIG_NAMES {
            assert!(topics.contains(name), "{name} is not a Kafka topic config");
        }
        let retention = topic_config("delete.retention.ms").expect("delete.retention.ms");
        assert_eq!(retention.config_type, types::LONG);
        assert_eq!(retention.default, Some("86400000"));
        assert_eq!(retention.synonyms, vec!["log.cleaner.delete.retention.ms"]);
        assert!(broker_configs().count() >= 300);
        let key = broker_config("ssl.keystore.password").expect("ssl.keystore.password");
        assert!(key.sensitive);
        assert_eq!(key.default, None);
        assert!(broker_config("node.id").is_some_and(|d| d.read_only));
    }

    #[test]
    fn values_are_checked_by_type() {
        let int = topic_config("segment.index.bytes").expect("int config");
        assert!(validate(int, "4096").is_ok());
        let e = validate(int, "lots").expect_err("not an int");
        assert!(e.contains("segment.index.bytes"), "{e}");
        assert!(validate(int, "2147483648").is_err());
        let b = topic_config("preallocate").expect("bool config");
        assert!(validate(b, "TRUE").is_ok());
        assert!(validate(b, "yes").is_err());
        let d = topic_config("min.cleanable.dirty.ratio").expect("double config");
        assert!(validate(d, "0.25").is_ok());
        assert!(validate(d, "half").is_err());
    }
}
