//! DescribeConfigs (32). TOPIC resources list every topic config with its effective
//! value and source (set on the topic, from the broker's config file, or Kafka's
//! default, or a dynamic broker config), plus the mirror configs stored with the topic
//! (read-only: only the mirror RPCs change them). BROKER resources list every broker
//! config of Kafka's catalog with the dynamic ones over the config file's and Kafka's
//! defaults; the resource "" lists the cluster-wide dynamic defaults only, as in Kafka.
//! MIRROR resources (type 64) list a mirror's stored
//! configs plus the defaults its fetcher uses for keys not set; secrets are never echoed.

use std::rc::Rc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::api::admin::{
    self, topic_config_type, topic_configs_with_source, DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG,
    RESOURCE_BROKER, RESOURCE_TOPIC, STATIC_BROKER_CONFIG, TYPE_BOOLEAN, TYPE_INT, TYPE_LONG,
};
use crate::api::metadata::valid_topic_name;
use crate::api::str_bytes;
use crate::kafka_configs;
use crate::log::config::{broker_config_of, describe_topic_config};
use crate::metadata::MetadataImage;
use crate::shard::{ShardCtx, ShardSettings};
use crate::wire::mirror::errors::UNKNOWN_CLUSTER_MIRROR;

/// Mirror configs shown with a topic (stored in `TopicImage::configs`).
const MIRROR_CONFIG_NAMES: &[&str] = &["mirror.name", "mirror.source.topic.id"];

/// The config resource type of a cluster mirror (`ConfigResource.Type.CLUSTER_MIRROR`).
pub const RESOURCE_MIRROR: i8 = 64;

/// Kafka's `ConfigType` for secrets (reported with sensitive configs).
const TYPE_PASSWORD: i8 = 9;

/// Mirror configs that only the mirror RPCs set: shown read-only.
const READ_ONLY_MIRROR_CONFIGS: &[&str] = &["source.cluster.id"];

/// Defaults of mirror configs, reported when a mirror does not set them. They are the
/// values the mirror fetcher and the source connection fall back to.
const MIRROR_CONFIG_DEFAULTS: &[(&str, &str)] = &[
    ("acls.include", "*"),
    ("fetch.backoff.ms", "1000"),
    ("fetch.max.bytes", "1048576"),
    ("fetch.min.bytes", "1"),
    ("fetch.response.max.bytes", "10485760"),
    ("fetch.wait.max.ms", "500"),
    ("groups.include", ".*"),
    ("mirror.metadata.refresh.interval.ms", "60000"),
    ("request.timeout.ms", "30000"),
    ("security.protocol", "PLAINTEXT"),
    ("socket.connection.setup.timeout.ms", "10000"),
    ("topics.exclude", "__.*"),
];

/// Whether a mirror config holds a secret: DescribeConfigs reports it with a null value
/// and `is_sensitive`, so passwords are never echoed. The controller
/// (`controlplane::mirror_admin::is_sensitive_mirror_config`) has the same rule; keep
/// the two in step.
pub fn is_sensitive_mirror_config(key: &str) -> bool {
    key.ends_with(".password") || key == "sasl.jaas.config" || key.ends_with(".key")
}

/// Whether a broker config key of the file holds a secret: the mirror configs' rule,
/// and a listener's `listener.name.<l>.<mechanism>.sasl.jaas.config`.
pub fn is_sensitive_broker_key(key: &str) -> bool {
    is_sensitive_mirror_config(key) || key.ends_with(".sasl.jaas.config")
}

/// One config entry before it is put on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Entry {
    name: String,
    /// Empty for a sensitive entry (sent as null).
    value: String,
    /// The config has no value (Kafka's null default, e.g. `log.retention.minutes`).
    null: bool,
    source: i8,
    read_only: bool,
    config_type: i8,
    sensitive: bool,
    /// Where the value could come from, most specific first (`include_synonyms`).
    synonyms: Vec<Synonym>,
}

/// One synonym of a config: a name, its value there (`None`: null) and that source.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Synonym {
    name: String,
    value: Option<String>,
    source: i8,
}

impl Entry {
    /// Kafka's synonyms: where the value is set (on the resource, or as the broker config
    /// `broker_name` in the config file), then the broker-level default `default` (name
    /// and value) when Kafka lists one.
    fn with_synonyms(mut self, broker_name: &str, default: Option<(&str, Option<&str>)>) -> Entry {
        if self.source != DEFAULT_CONFIG {
            self.synonyms.push(Synonym {
                name: if self.source == STATIC_BROKER_CONFIG {
                    broker_name.to_string()
                } else {
                    self.name.clone()
                },
                value: (!self.sensitive).then(|| self.value.clone()),
                source: self.source,
            });
        }
        if let Some((name, value)) = default {
            self.synonyms.push(Synonym {
                name: name.to_string(),
                value: value.map(str::to_string),
                source: DEFAULT_CONFIG,
            });
        }
        self
    }
}

/// Broker configs whose Kafka default is none but that a Twinlog broker always has (Kafka
/// requires them in its config file): reported with their value, never as null.
const ALWAYS_SET: &[&str] = &[
    "node.id",
    "broker.id",
    "log.dirs",
    "listeners",
    "advertised.listeners",
];

/// The broker's static configs: every config of Kafka's catalog, with the value this
/// broker runs with. A key of the config file (or the listeners) is STATIC_BROKER_CONFIG;
/// a setting Twinlog chose where Kafka has a default is STATIC_BROKER_CONFIG when it
/// differs from Kafka's; otherwise Kafka's default (null where Kafka has none, as Kafka
/// shows `log.retention.ms` when only `log.retention.hours` applies).
fn broker_entries(node_id: i32, settings: &ShardSettings) -> Vec<Entry> {
    let entry = |name: &str, value: String, config_type: i8| {
        let def = kafka_configs::broker_config(name);
        let kafka_default = def.and_then(|d| d.default);
        let configured = settings.static_configs.get(name);
        let (value, null, source) = match configured {
            Some(v) => (v.clone(), false, STATIC_BROKER_CONFIG),
            None if kafka_default == Some(value.as_str()) => (value, false, DEFAULT_CONFIG),
            None if def.is_some() && kafka_default.is_none() && !ALWAYS_SET.contains(&name) => {
                (String::new(), true, DEFAULT_CONFIG)
            }
            None => (value, false, STATIC_BROKER_CONFIG),
        };
        // A secret of the config file (a listener's JAAS config) is never echoed.
        let sensitive = def.is_some_and(|d| d.sensitive) || is_sensitive_broker_key(name);
        let value = if sensitive { String::new() } else { value };
        // Kafka lists the DEFAULT_CONFIG synonym only where it has a default.
        Entry {
            name: name.to_string(),
            value,
            null,
            source,
            read_only: true,
            config_type: def.map_or(config_type, |d| d.config_type),
            sensitive,
            ..Entry::default()
        }
        .with_synonyms(name, kafka_default.map(|d| (name, Some(d))))
    };
    let log = &settings.default_log_config;
    // What this single-node broker runs with where its value is its own.
    let mut own: Vec<(&str, String, i8)> = vec![
        ("node.id", node_id.to_string(), TYPE_INT),
        ("broker.id", node_id.to_string(), TYPE_INT),
        (
            "log.dirs",
            settings.data_dir.display().to_string(),
            admin::TYPE_STRING,
        ),
        (
            "num.partitions",
            settings.num_partitions.to_string(),
            TYPE_INT,
        ),
        ("default.replication.factor", "1".into(), TYPE_INT),
        (
            "offsets.topic.replication.factor",
            "1".into(),
            admin::TYPE_STRING,
        ),
        (
            "transaction.state.log.replication.factor",
            "1".into(),
            admin::TYPE_STRING,
        ),
        ("transaction.state.log.min.isr", "1".into(), TYPE_INT),
        (
            "auto.create.topics.enable",
            settings.auto_create_topics_enable.to_string(),
            TYPE_BOOLEAN,
        ),
        (
            "socket.request.max.bytes",
            settings.socket_request_max_bytes.to_string(),
            TYPE_INT,
        ),
        (
            "log.retention.check.interval.ms",
            settings.log_retention_check_interval_ms.to_string(),
            TYPE_LONG,
        ),
        (
            "producer.id.expiration.ms",
            log.producer_id_expiration_ms.to_string(),
            TYPE_INT,
        ),
    ];
    for (name, value) in describe_topic_config(log) {
        if let Some(broker_name) = broker_config_of(name) {
            own.push((broker_name, value, topic_config_type(broker_name)));
        }
    }
    let mut listed: std::collections::HashSet<&str> = own.iter().map(|(n, _, _)| *n).collect();
    let mut out: Vec<Entry> = own
        .iter()
        .map(|(name, value, config_type)| entry(name, value.clone(), *config_type))
        .collect();
    // The rest of Kafka's broker configs: from the config file, or at Kafka's default.
    for def in kafka_configs::broker_configs() {
        if listed.insert(def.name) {
            out.push(entry(
                def.name,
                def.default.unwrap_or_default().to_string(),
                def.config_type,
            ));
        }
    }
    // Twinlog's own keys of the config file (not Kafka's), as written.
    for (k, v) in &settings.static_configs {
        if !listed.contains(k.as_str()) {
            out.push(entry(k, v.clone(), admin::TYPE_STRING));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Kafka's `ConfigSource` values of dynamic broker configs.
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;

/// The dynamic broker configs that apply to this broker, most specific first: its own
/// (resource = node id), then the cluster-wide default (resource "").
fn dynamic_broker_value(image: &MetadataImage, name: &str) -> Vec<Synonym> {
    let mut out = Vec::new();
    for (resource, source) in [
        (image.node_id.to_string(), DYNAMIC_BROKER_CONFIG),
        (String::new(), DYNAMIC_DEFAULT_BROKER_CONFIG),
    ] {
        if let Some(v) = image
            .broker_configs
            .get(&resource)
            .and_then(|m| m.get(name))
        {
            out.push(Synonym {
                name: name.to_string(),
                value: Some(v.clone()),
                source,
            });
        }
    }
    out
}

/// This broker's configs: the static and default ones with the dynamic ones over them
/// (value and source from the most specific, all of them first among the synonyms).
/// Configs Kafka can change at runtime are not read-only.
fn with_dynamic_broker_configs(mut entries: Vec<Entry>, image: &MetadataImage) -> Vec<Entry> {
    for e in &mut entries {
        if let Some(def) = kafka_configs::broker_config(&e.name) {
            e.read_only = def.read_only;
        }
        let mut dynamic = dynamic_broker_value(image, &e.name);
        if dynamic.is_empty() {
            continue;
        }
        if let Some(first) = dynamic.first() {
            e.value = first.value.clone().unwrap_or_default();
            e.source = first.source;
            e.null = false;
        }
        if e.sensitive {
            dynamic.iter_mut().for_each(|s| s.value = None);
        }
        let rest = std::mem::take(&mut e.synonyms);
        e.synonyms = dynamic;
        e.synonyms.extend(rest);
    }
    entries
}

/// The cluster-wide dynamic default broker configs (DescribeConfigs of broker "").
fn default_broker_entries(image: &MetadataImage) -> Vec<Entry> {
    let Some(configs) = image.broker_configs.get("") else {
        return Vec::new();
    };
    configs
        .iter()
        .map(|(k, v)| {
            let def = kafka_configs::broker_config(k);
            let sensitive = def.is_some_and(|d| d.sensitive);
            Entry {
                name: k.clone(),
                value: if sensitive { String::new() } else { v.clone() },
                source: DYNAMIC_DEFAULT_BROKER_CONFIG,
                read_only: def.is_none_or(|d| d.read_only),
                config_type: def.map_or(admin::TYPE_STRING, |d| d.config_type),
                sensitive,
                synonyms: vec![Synonym {
                    name: k.clone(),
                    value: (!sensitive).then(|| v.clone()),
                    source: DYNAMIC_DEFAULT_BROKER_CONFIG,
                }],
                ..Entry::default()
            }
        })
        .collect()
}

/// A topic config's default set as a dynamic broker config: (broker config, synonym).
fn dynamic_topic_default(image: &MetadataImage, topic_config: &str) -> Option<Synonym> {
    crate::log::config::BROKER_TOPIC_DEFAULTS
        .iter()
        .filter(|(_, t, _)| *t == topic_config)
        .find_map(|(b, _, _)| dynamic_broker_value(image, b).into_iter().next())
}

/// A topic's configs, or the error for its resource.
fn topic_entries(image: &MetadataImage, name: &str) -> Result<Vec<Entry>, (ResponseError, String)> {
    if !valid_topic_name(name) {
        return Err((
            ResponseError::InvalidTopicException,
            format!("Topic name {name:?} is illegal"),
        ));
    }
    let Some(topic) = image.topic(name) else {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("Topic {name} does not exist"),
        ));
    };
    let mut out: Vec<Entry> = topic_configs_with_source(&topic.log_config, &topic.configs)
        .into_iter()
        .map(|(name, value, source)| {
            // Kafka names a topic config's broker-level default only where it lists a
            // synonym (the catalog's); `retention.ms`, for one, has none.
            let def = kafka_configs::topic_config(name);
            let default = def.and_then(|d| d.synonyms.first().map(|syn| (*syn, d.default)));
            let broker_name = broker_config_of(name).unwrap_or(name);
            let mut e = Entry {
                name: name.to_string(),
                value,
                source,
                config_type: topic_config_type(name),
                ..Entry::default()
            };
            // Not set on the topic, but as a dynamic broker config: that is its source.
            let dynamic = (source != DYNAMIC_TOPIC_CONFIG)
                .then(|| dynamic_topic_default(image, name))
                .flatten();
            if let Some(d) = &dynamic {
                e.source = d.source;
            }
            let mut e = e.with_synonyms(broker_name, default);
            if let Some(d) = dynamic {
                e.synonyms.retain(|s| s.source == DEFAULT_CONFIG);
                e.synonyms.insert(0, d);
            }
            e
        })
        .collect();
    for (k, v) in &topic.configs {
        if MIRROR_CONFIG_NAMES.contains(&k.as_str()) {
            out.push(
                Entry {
                    name: k.clone(),
                    value: v.clone(),
                    source: DYNAMIC_TOPIC_CONFIG,
                    read_only: true,
                    config_type: admin::TYPE_STRING,
                    ..Entry::default()
                }
                .with_synonyms(k, None),
            );
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The `ConfigType` of a mirror config, as Kafka's client config of the same name has it.
fn mirror_config_type(name: &str) -> i8 {
    match name {
        _ if is_sensitive_mirror_config(name) => TYPE_PASSWORD,
        "bootstrap.servers"
        | "topics.include"
        | "topics.exclude"
        | "groups.include"
        | "groups.exclude"
        | "acls.include"
        | "topic.properties.exclude" => admin::TYPE_LIST,
        // Kafka's consumer has these two as INT and its other `*.ms` configs as LONG.
        "request.timeout.ms"
        | "fetch.wait.max.ms"
        | "mirror.failed.retry.max.attempts"
        | "mirror.fetch.connections" => TYPE_INT,
        _ if name.ends_with(".ms") => TYPE_LONG,
        _ if name.ends_with(".bytes") => TYPE_INT,
        _ => admin::TYPE_STRING,
    }
}

/// A mirror's configs (stored ones, then defaults for the well-known keys it does not
/// set), or the error for its resource.
fn mirror_entries(image: &MetadataImage, name: &str) -> Result<Vec<Entry>, (i16, String)> {
    let Some(mirror) = image.mirrors.get(name) else {
        return Err((
            UNKNOWN_CLUSTER_MIRROR,
            format!("Mirror {name} does not exist"),
        ));
    };
    // Mirror configs are dynamic configs of one resource, stored as config records in
    // the metadata log, exactly like a topic's. Kafka has no ConfigSource of its own
    // for CLUSTER_MIRROR, and DYNAMIC_TOPIC_CONFIG (1) is the per-resource dynamic
    // source every client knows; a new code would read as UNKNOWN in Kafka's clients.
    let mut out: Vec<Entry> = mirror
        .configs
        .iter()
        .map(|(k, v)| {
            let sensitive = is_sensitive_mirror_config(k);
            Entry {
                name: k.clone(),
                value: if sensitive { String::new() } else { v.clone() },
                source: DYNAMIC_TOPIC_CONFIG,
                read_only: READ_ONLY_MIRROR_CONFIGS.contains(&k.as_str()),
                config_type: mirror_config_type(k),
                sensitive,
                ..Entry::default()
            }
        })
        .collect();
    for (k, v) in MIRROR_CONFIG_DEFAULTS {
        if !mirror.configs.contains_key(*k) {
            out.push(Entry {
                name: k.to_string(),
                value: v.to_string(),
                source: DEFAULT_CONFIG,
                config_type: mirror_config_type(k),
                ..Entry::default()
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Keeps only the requested keys (`None` or an empty list: all).
fn filter_keys(entries: Vec<Entry>, keys: Option<&[StrBytes]>) -> Vec<Entry> {
    match keys {
        Some(keys) if !keys.is_empty() => entries
            .into_iter()
            .filter(|e| keys.iter().any(|k| k.as_str() == e.name))
            .collect(),
        _ => entries,
    }
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let image = ctx.metadata.load();
    let include_synonyms = request.include_synonyms;
    let mut synonyms = Vec::new();
    let results = request
        .resources
        .into_iter()
        .map(|res| {
            let name = res.resource_name.to_string();
            let entries = match res.resource_type {
                RESOURCE_TOPIC => topic_entries(&image, &name).map_err(|(e, m)| (e.code(), m)),
                RESOURCE_MIRROR => mirror_entries(&image, &name),
                RESOURCE_BROKER => {
                    if name.is_empty() {
                        Ok(default_broker_entries(&image))
                    } else if name == image.node_id.to_string() {
                        Ok(with_dynamic_broker_configs(
                            broker_entries(image.node_id, &ctx.settings),
                            &image,
                        ))
                    } else {
                        Err((
                            ResponseError::InvalidRequest.code(),
                            format!(
                                "Unexpected broker id, expected {} or empty string, but received {name}",
                                image.node_id
                            ),
                        ))
                    }
                }
                other => Err((
                    ResponseError::InvalidRequest.code(),
                    format!("Unsupported resource type: {other}"),
                )),
            };
            let mut r = DescribeConfigsResult::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name);
            match entries {
                Ok(entries) => {
                    r.error_message = None;
                    r.configs = filter_keys(entries, res.configuration_keys.as_deref())
                        .into_iter()
                        .map(|e| {
                            // A secret's value never goes on the wire.
                            let value = (!e.sensitive && !e.null).then(|| str_bytes(e.value));
                            if include_synonyms {
                                synonyms = e
                                    .synonyms
                                    .into_iter()
                                    .map(|s| {
                                        DescribeConfigsSynonym::default()
                                            .with_name(str_bytes(s.name))
                                            .with_value(s.value.map(str_bytes))
                                            .with_source(s.source)
                                    })
                                    .collect();
                            }
                            let mut c = DescribeConfigsResourceResult::default()
                                .with_name(str_bytes(e.name))
                                .with_value(value)
                                .with_read_only(e.read_only)
                                .with_config_source(e.source)
                                .with_is_sensitive(e.sensitive);
                            c.documentation = None;
                            c.synonyms = std::mem::take(&mut synonyms);
                            if version >= 3 {
                                c.config_type = e.config_type;
                            }
                            c
                        })
                        .collect();
                }
                Err((code, message)) => {
                    r.error_code = code;
                    r.error_message = Some(str_bytes(message));
                }
            }
            r
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::log::LogConfig;
    use crate::metadata::{MirrorImage, TopicImage};

    pub(super) fn image_for_handlers() -> MetadataImage {
        image()
    }

    fn image() -> MetadataImage {
        let mut image =
            MetadataImage::empty("c".into(), 3, "127.0.0.1:9092".parse().expect("addr"));
        let mut configs = BTreeMap::new();
        configs.insert("retention.ms".to_string(), "1000".to_string());
        configs.insert("mirror.name".to_string(), "east".to_string());
        let log_config = LogConfig {
            retention_ms: 1000,
            ..LogConfig::default()
        };
        image.topics.insert(
            "t".into(),
            Arc::new(TopicImage {
                name: "t".into(),
                id: uuid::Uuid::from_u128(1),
                partitions: Vec::new(),
                configs,
                log_config,
                internal: false,
            }),
        );
        let mirror_configs: BTreeMap<String, String> = [
            ("bootstrap.servers", "src:9092"),
            ("source.cluster.id", "src-id"),
            ("fetch.max.bytes", "2048"),
            ("sasl.jaas.config", "secret"),
            ("ssl.truststore.password", "pw"),
            ("ssl.keystore.key", "k"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        image.mirrors.insert(
            "m".into(),
            Arc::new(MirrorImage {
                name: "m".into(),
                configs: mirror_configs,
            }),
        );
        image
    }

    #[test]
    fn sensitive_mirror_configs() {
        for k in [
            "sasl.jaas.config",
            "ssl.truststore.password",
            "ssl.keystore.password",
            "ssl.key.password",
            "ssl.keystore.key",
        ] {
            assert!(is_sensitive_mirror_config(k), "{k}");
        }
        for k in [
            "bootstrap.servers",
            "sasl.mechanism",
            "ssl.truststore.location",
            "fetch.max.bytes",
            "ssl.keystore.type",
        ] {
            assert!(!is_sensitive_mirror_config(k), "{k}");
        }
    }

    #[test]
    fn mirror_entries_hide_secrets_and_add_defaults() {
        let entries = mirror_entries(&image(), "m").expect("known mirror");
        let get = |n: &str| entries.iter().find(|e| e.name == n).cloned().expect(n);
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "entries in name order");
        let bootstrap = get("bootstrap.servers");
        assert_eq!(
            (
                bootstrap.value.as_str(),
                bootstrap.source,
                bootstrap.read_only
            ),
            ("src:9092", DYNAMIC_TOPIC_CONFIG, false)
        );
        let id = get("source.cluster.id");
        assert_eq!((id.value.as_str(), id.read_only), ("src-id", true));
        for k in [
            "sasl.jaas.config",
            "ssl.truststore.password",
            "ssl.keystore.key",
        ] {
            let e = get(k);
            assert!(e.sensitive, "{k}");
            assert!(e.value.is_empty(), "{k} echoed");
            assert_eq!(e.config_type, TYPE_PASSWORD);
        }
        // Set explicitly: the stored value, not the default.
        let fmb = get("fetch.max.bytes");
        assert_eq!(
            (fmb.value.as_str(), fmb.source, fmb.config_type),
            ("2048", DYNAMIC_TOPIC_CONFIG, TYPE_INT)
        );
        assert_eq!(names.iter().filter(|n| **n == "fetch.max.bytes").count(), 1);
        // Not set: Kafka-style defaults.
        for (k, v) in MIRROR_CONFIG_DEFAULTS {
            if *k == "fetch.max.bytes" {
                continue;
            }
            let e = get(k);
            assert_eq!(
                (e.value.as_str(), e.source, e.read_only, e.sensitive),
                (*v, DEFAULT_CONFIG, false, false),
                "{k}"
            );
        }
        assert_eq!(get("topics.exclude").value, "__.*");
        assert_eq!(get("topics.exclude").config_type, admin::TYPE_LIST);
        assert_eq!(
            get("mirror.metadata.refresh.interval.ms").config_type,
            TYPE_LONG
        );
        assert_eq!(get("security.protocol").config_type, admin::TYPE_STRING);
        let err = mirror_entries(&image(), "nope").expect_err("unknown mirror");
        assert_eq!(err.0, UNKNOWN_CLUSTER_MIRROR);
        assert_eq!(err.1, "Mirror nope does not exist");
    }

    #[test]
    fn topic_entries_report_sources_and_mirror_configs() {
        let entries = topic_entries(&image(), "t").expect("known topic");
        let get = |n: &str| entries.iter().find(|e| e.name == n).cloned().expect(n);
        let retention = get("retention.ms");
        assert_eq!(
            (retention.value.as_str(), retention.source),
            ("1000", DYNAMIC_TOPIC_CONFIG)
        );
        assert_eq!(get("segment.bytes").source, DEFAULT_CONFIG);
        let mirror = get("mirror.name");
        assert!(mirror.read_only);
        assert_eq!(mirror.value, "east");
        assert_eq!(
            topic_entries(&image(), "nope").map_err(|e| e.0),
            Err(ResponseError::UnknownTopicOrPartition)
        );
        assert_eq!(
            topic_entries(&image(), "bad/name").map_err(|e| e.0),
            Err(ResponseError::InvalidTopicException)
        );
    }

    #[test]
    fn keys_filter_entries() {
        let entries = topic_entries(&image(), "t").expect("known topic");
        let all = entries.len();
        let keys = [str_bytes("retention.ms"), str_bytes("no.such.key")];
        let some = filter_keys(entries.clone(), Some(&keys));
        assert_eq!(some.len(), 1);
        assert_eq!(filter_keys(entries.clone(), None).len(), all);
        assert_eq!(filter_keys(entries, Some(&[])).len(), all);
    }

    #[test]
    fn broker_entries_are_read_only() {
        let settings = ShardSettings {
            data_dir: "/data".into(),
            socket_request_max_bytes: 104_857_600,
            in_flight_requests_max: 5,
            auto_create_topics_enable: false,
            num_partitions: 1,
            log_retention_check_interval_ms: 300_000,
            default_log_config: LogConfig::default(),
            replication: Default::default(),
            cleaner: Default::default(),
            internal_segment_bytes: (104_857_600, 104_857_600),
            static_configs: Default::default(),
            listeners: Vec::new(),
            authorizer: None,
        };
        let entries = broker_entries(3, &settings);
        assert!(entries.iter().all(|e| e.read_only));
        let get = |n: &str| entries.iter().find(|e| e.name == n).cloned().expect(n);
        assert_eq!(get("node.id").value, "3");
        assert_eq!(get("num.partitions").source, DEFAULT_CONFIG);
        let auto = get("auto.create.topics.enable");
        assert_eq!(
            (auto.value.as_str(), auto.source),
            ("false", STATIC_BROKER_CONFIG)
        );
        assert_eq!(get("log.segment.bytes").source, DEFAULT_CONFIG);
        assert_eq!(get("log.dirs").value, "/data");
    }
}

#[cfg(test)]
mod handler_tests {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;

    use super::*;
    use crate::api::admin::test_support::{ctx, encodes};
    use crate::controller::AdminResponse;

    #[test]
    fn describes_topics_and_broker_at_every_version() {
        let (ctx, _) = ctx(tests_image(), |_| AdminResponse::Results(Vec::new()));
        let res = |t: i8, n: &str| {
            DescribeConfigsResource::default()
                .with_resource_type(t)
                .with_resource_name(str_bytes(n))
                .with_configuration_keys(None)
        };
        for v in 1..=4 {
            let req = DescribeConfigsRequest::default().with_resources(vec![
                res(RESOURCE_TOPIC, "t"),
                res(RESOURCE_TOPIC, "missing"),
                res(RESOURCE_BROKER, "3"),
                res(RESOURCE_BROKER, "9"),
            ]);
            let r = futures::executor::block_on(handle(&ctx, req, v));
            let codes: Vec<i16> = r.results.iter().map(|x| x.error_code).collect();
            assert_eq!(
                codes,
                vec![
                    0,
                    ResponseError::UnknownTopicOrPartition.code(),
                    0,
                    ResponseError::InvalidRequest.code()
                ]
            );
            assert!(r.results[0].error_message.is_none());
            assert!(!r.results[2].configs.is_empty());
            encodes(&r, v);
        }
    }

    #[test]
    fn describes_mirrors_without_echoing_secrets() {
        let (ctx, controller) = ctx(tests_image(), |_| AdminResponse::Results(Vec::new()));
        let res = |n: &str, keys: Option<Vec<&str>>| {
            DescribeConfigsResource::default()
                .with_resource_type(RESOURCE_MIRROR)
                .with_resource_name(str_bytes(n))
                .with_configuration_keys(keys.map(|k| k.into_iter().map(str_bytes).collect()))
        };
        for v in 1..=4 {
            let req = DescribeConfigsRequest::default().with_resources(vec![
                res("m", None),
                res("missing", None),
                res("m", Some(vec!["sasl.jaas.config", "fetch.wait.max.ms"])),
            ]);
            let r = futures::executor::block_on(handle(&ctx, req, v));
            let codes: Vec<i16> = r.results.iter().map(|x| x.error_code).collect();
            assert_eq!(codes, vec![0, UNKNOWN_CLUSTER_MIRROR, 0]);
            assert_eq!(
                r.results[1].error_message.as_deref(),
                Some("Mirror missing does not exist")
            );
            let all = &r.results[0].configs;
            let get = |n: &str| all.iter().find(|c| c.name.as_str() == n).expect(n);
            let jaas = get("sasl.jaas.config");
            assert!(jaas.is_sensitive);
            assert!(jaas.value.is_none());
            assert!(get("ssl.truststore.password").value.is_none());
            assert!(get("source.cluster.id").read_only);
            assert_eq!(get("bootstrap.servers").value.as_deref(), Some("src:9092"));
            let wait = get("fetch.wait.max.ms");
            assert_eq!(
                (wait.value.as_deref(), wait.config_source),
                (Some("500"), DEFAULT_CONFIG)
            );
            let names: Vec<&str> = r.results[2]
                .configs
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(names, vec!["fetch.wait.max.ms", "sasl.jaas.config"]);
            encodes(&r, v);
        }
        // Describing never reaches the controller.
        assert!(controller.requests.lock().expect("lock").is_empty());
    }

    fn tests_image() -> MetadataImage {
        let mut image = tests::image_for_handlers();
        image.node_id = 3;
        image
    }
}
