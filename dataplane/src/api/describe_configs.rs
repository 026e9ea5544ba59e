//! DescribeConfigs (32). TOPIC resources list every topic config with its effective
//! value and source (set on the topic, from the broker's config file, or Kafka's
//! default), plus the mirror configs stored with the topic (read-only: only the mirror
//! RPCs change them). BROKER resources list a read-only set of broker settings; the
//! broker has no dynamic configs.

use std::rc::Rc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
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
use crate::log::config::describe_topic_config;
use crate::metadata::MetadataImage;
use crate::shard::{ShardCtx, ShardSettings};

/// Mirror configs shown with a topic (stored in `TopicImage::configs`).
const MIRROR_CONFIG_NAMES: &[&str] = &["mirror.name"];

/// One config entry before it is put on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: String,
    value: String,
    source: i8,
    read_only: bool,
    config_type: i8,
}

/// The broker-config name of a topic config (Kafka's synonym one level down).
fn broker_synonym(topic_config: &str) -> &'static str {
    match topic_config {
        "cleanup.policy" => "log.cleanup.policy",
        "compression.type" => "compression.type",
        "flush.messages" => "log.flush.interval.messages",
        "flush.ms" => "log.flush.interval.ms",
        "index.interval.bytes" => "log.index.interval.bytes",
        "max.message.bytes" => "message.max.bytes",
        "message.timestamp.type" => "log.message.timestamp.type",
        "min.insync.replicas" => "min.insync.replicas",
        "retention.bytes" => "log.retention.bytes",
        "retention.ms" => "log.retention.ms",
        "segment.bytes" => "log.segment.bytes",
        "segment.ms" => "log.roll.ms",
        _ => "",
    }
}

/// The broker's settings as read-only configs. Values equal to Kafka's default are
/// reported as DEFAULT_CONFIG, the rest as STATIC_BROKER_CONFIG (the config file).
fn broker_entries(node_id: i32, settings: &ShardSettings) -> Vec<Entry> {
    let entry = |name: &str, value: String, kafka_default: Option<&str>, config_type: i8| Entry {
        name: name.to_string(),
        source: if kafka_default == Some(value.as_str()) {
            DEFAULT_CONFIG
        } else {
            STATIC_BROKER_CONFIG
        },
        value,
        read_only: true,
        config_type,
    };
    let log = &settings.default_log_config;
    let mut out = vec![
        entry("node.id", node_id.to_string(), None, TYPE_INT),
        entry("broker.id", node_id.to_string(), None, TYPE_INT),
        entry(
            "log.dirs",
            settings.data_dir.display().to_string(),
            None,
            admin::TYPE_STRING,
        ),
        entry(
            "num.partitions",
            settings.num_partitions.to_string(),
            Some("1"),
            TYPE_INT,
        ),
        entry(
            "default.replication.factor",
            "1".into(),
            Some("1"),
            TYPE_INT,
        ),
        entry(
            "auto.create.topics.enable",
            settings.auto_create_topics_enable.to_string(),
            Some("true"),
            TYPE_BOOLEAN,
        ),
        entry(
            "socket.request.max.bytes",
            settings.socket_request_max_bytes.to_string(),
            Some("104857600"),
            TYPE_INT,
        ),
        entry(
            "log.retention.check.interval.ms",
            settings.log_retention_check_interval_ms.to_string(),
            Some("300000"),
            TYPE_LONG,
        ),
        entry(
            "producer.id.expiration.ms",
            log.producer_id_expiration_ms.to_string(),
            Some("86400000"),
            TYPE_INT,
        ),
    ];
    for (name, value) in describe_topic_config(log) {
        let broker_name = broker_synonym(name);
        if broker_name.is_empty() {
            continue;
        }
        let kafka_default = admin::kafka_default_topic_value(name);
        out.push(entry(
            broker_name,
            value,
            kafka_default.as_deref(),
            topic_config_type(broker_name),
        ));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
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
        .map(|(name, value, source)| Entry {
            name: name.to_string(),
            value,
            source,
            read_only: false,
            config_type: topic_config_type(name),
        })
        .collect();
    for (k, v) in &topic.configs {
        if MIRROR_CONFIG_NAMES.contains(&k.as_str()) {
            out.push(Entry {
                name: k.clone(),
                value: v.clone(),
                source: DYNAMIC_TOPIC_CONFIG,
                read_only: true,
                config_type: admin::TYPE_STRING,
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
    let results = request
        .resources
        .into_iter()
        .map(|res| {
            let name = res.resource_name.to_string();
            let entries = match res.resource_type {
                RESOURCE_TOPIC => topic_entries(&image, &name),
                RESOURCE_BROKER => {
                    if name.is_empty() || name == image.node_id.to_string() {
                        Ok(broker_entries(image.node_id, &ctx.settings))
                    } else {
                        Err((
                            ResponseError::InvalidRequest,
                            format!(
                                "Unexpected broker id, expected {} or empty string, but received {name}",
                                image.node_id
                            ),
                        ))
                    }
                }
                other => Err((
                    ResponseError::InvalidRequest,
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
                            let mut c = DescribeConfigsResourceResult::default()
                                .with_name(str_bytes(e.name))
                                .with_value(Some(str_bytes(e.value)))
                                .with_read_only(e.read_only)
                                .with_config_source(e.source)
                                .with_is_sensitive(false);
                            c.documentation = None;
                            if version >= 3 {
                                c.config_type = e.config_type;
                            }
                            c
                        })
                        .collect();
                }
                Err((e, message)) => {
                    r.error_code = e.code();
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
    use crate::metadata::TopicImage;

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
        image
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

    fn tests_image() -> MetadataImage {
        let mut image = tests::image_for_handlers();
        image.node_id = 3;
        image
    }
}
