//! Shared pieces of the admin handlers (CreateTopics, DeleteTopics, CreatePartitions,
//! AlterConfigs, DescribeConfigs): forwarding to the controller and lining its answers up
//! with the request, duplicate detection, and the config sources DescribeConfigs and
//! CreateTopics report.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use crate::controller::{AdminRequest, AdminResponse, AdminResult};
use crate::kafka_configs;
use crate::log::config::describe_topic_config;
use crate::log::LogConfig;
use crate::shard::ShardCtx;

/// Kafka's `ConfigSource` values (DescribeConfigs v1+, CreateTopics v5+).
pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
pub const STATIC_BROKER_CONFIG: i8 = 4;
pub const DEFAULT_CONFIG: i8 = 5;

/// Kafka's `ConfigType` values (DescribeConfigs v3+).
pub const TYPE_BOOLEAN: i8 = 1;
pub const TYPE_STRING: i8 = 2;
pub const TYPE_INT: i8 = 3;
pub const TYPE_LONG: i8 = 5;
pub const TYPE_LIST: i8 = 7;

/// Kafka's resource types in the config APIs.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Submits one admin request and returns exactly one result per name in `names`, in
/// order. A whole-request failure, a dropped channel or an answer of the wrong shape
/// becomes the same error for every name, so callers never index out of bounds on a
/// controller bug.
pub async fn submit(ctx: &ShardCtx, request: AdminRequest, names: &[String]) -> Vec<AdminResult> {
    let all = |code: i16, message: &str| {
        names
            .iter()
            .map(|n| AdminResult::err(n.as_str(), code, message))
            .collect()
    };
    if names.is_empty() {
        return Vec::new();
    }
    match ctx.controller.submit(request).await {
        Ok(AdminResponse::Results(results)) if results.len() == names.len() => results
            .into_iter()
            .zip(names)
            .map(|(mut r, name)| {
                // The controller answers in request order; the name is ours, not its.
                r.name.clone_from(name);
                r
            })
            .collect(),
        Ok(AdminResponse::Failed {
            error_code,
            message,
        }) => all(error_code, &message),
        Ok(other) => {
            tracing::error!(
                ?other,
                expected = names.len(),
                "controller answer of the wrong shape"
            );
            all(
                ResponseError::UnknownServerError.code(),
                "unexpected controller answer",
            )
        }
        Err(_) => {
            // The controller went away (shutdown): a retriable error.
            all(
                ResponseError::NotController.code(),
                "the controller is not available",
            )
        }
    }
}

/// The names that occur more than once.
pub fn duplicates<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut dup = BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            dup.insert(n.to_string());
        }
    }
    dup
}

/// The value Kafka itself would use for a topic config when neither the topic nor the
/// broker sets it.
pub fn kafka_default_topic_value(name: &str) -> Option<String> {
    kafka_configs::topic_config(name)
        .and_then(|d| d.default)
        .map(str::to_string)
}

/// Where a topic config's value comes from: set on the topic (`explicit`), set in the
/// broker's config file (the value differs from Kafka's default), or Kafka's default.
pub fn topic_config_source(
    name: &str,
    value: &str,
    explicit: &BTreeMap<String, String>,
    kafka_default: Option<&str>,
) -> i8 {
    if explicit.contains_key(name) {
        DYNAMIC_TOPIC_CONFIG
    } else if kafka_default.is_some_and(|d| d != value) {
        STATIC_BROKER_CONFIG
    } else {
        DEFAULT_CONFIG
    }
}

/// Every topic config of Kafka's catalog with its value and source, in name order. The
/// configs the log acts on come from `log_config` (which holds the broker's defaults);
/// the others are what the topic set, or Kafka's default.
pub fn topic_configs_with_source(
    log_config: &LogConfig,
    explicit: &BTreeMap<String, String>,
) -> Vec<(&'static str, String, i8)> {
    let effective = describe_topic_config(log_config);
    kafka_configs::topic_configs()
        .map(|def| {
            let name = def.name;
            let value = explicit
                .get(name)
                .cloned()
                .or_else(|| {
                    effective
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, v)| v.clone())
                })
                .unwrap_or_else(|| def.default.unwrap_or_default().to_string());
            let source = topic_config_source(name, &value, explicit, def.default);
            (name, value, source)
        })
        .collect()
}

/// The `ConfigType` of a topic config, or of a broker config (Kafka's catalog).
pub fn topic_config_type(name: &str) -> i8 {
    kafka_configs::topic_config(name)
        .or_else(|| kafka_configs::broker_config(name))
        .map_or(TYPE_STRING, |d| d.config_type)
}

/// A shard context with a scripted controller, for handler tests that need no partition
/// (everything here runs on `futures::executor::block_on`).
#[cfg(test)]
pub(crate) mod test_support {
    use std::rc::Rc;
    use std::sync::{Arc, Mutex};

    use futures::channel::oneshot;

    use crate::controller::{AdminRequest, AdminResponse, ControllerHandle};
    use crate::log::LogConfig;
    use crate::metadata::{MetadataCell, MetadataImage};
    use crate::shard::{ShardCtx, ShardRouter, ShardSettings};

    type Script = Box<dyn Fn(&AdminRequest) -> AdminResponse + Send + Sync>;

    /// Answers every request with `script` and remembers the requests.
    pub struct FakeController {
        pub requests: Mutex<Vec<AdminRequest>>,
        script: Script,
    }

    impl std::fmt::Debug for FakeController {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("FakeController").finish_non_exhaustive()
        }
    }

    impl ControllerHandle for FakeController {
        fn submit(&self, request: AdminRequest) -> oneshot::Receiver<AdminResponse> {
            let (tx, rx) = oneshot::channel();
            let _ = tx.send((self.script)(&request));
            if let Ok(mut r) = self.requests.lock() {
                r.push(request);
            }
            rx
        }
    }

    pub fn settings() -> ShardSettings {
        ShardSettings {
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
        }
    }

    pub fn image() -> MetadataImage {
        MetadataImage::empty("cid".into(), 0, "127.0.0.1:9092".parse().expect("addr"))
    }

    pub fn ctx(
        image: MetadataImage,
        script: impl Fn(&AdminRequest) -> AdminResponse + Send + Sync + 'static,
    ) -> (Rc<ShardCtx>, Arc<FakeController>) {
        ctx_with(image, settings(), script)
    }

    /// [`ctx`] with these settings (a data directory of the test's own).
    pub fn ctx_with(
        image: MetadataImage,
        settings: ShardSettings,
        script: impl Fn(&AdminRequest) -> AdminResponse + Send + Sync + 'static,
    ) -> (Rc<ShardCtx>, Arc<FakeController>) {
        let controller = Arc::new(FakeController {
            requests: Mutex::new(Vec::new()),
            script: Box::new(script),
        });
        let (router, _queues) = ShardRouter::new(1, 1);
        let ctx = ShardCtx::new(
            0,
            router,
            Arc::new(MetadataCell::new(image)),
            controller.clone(),
            Arc::new(settings),
        );
        (ctx, controller)
    }

    /// Encodes a response at `version`: kafka-protocol refuses fields a version lacks.
    pub fn encodes<M: kafka_protocol::protocol::Encodable>(m: &M, version: i16) {
        let mut buf = bytes::BytesMut::new();
        if let Err(e) = m.encode(&mut buf, version) {
            panic!("encoding at v{version} failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_reported_once() {
        let d = duplicates(["a", "b", "a", "c", "a", "b"]);
        assert_eq!(
            d.into_iter().collect::<Vec<_>>(),
            vec!["a".to_string(), "b".to_string()]
        );
        assert!(duplicates(["x", "y"]).is_empty());
    }

    #[test]
    fn config_source_decision() {
        let mut explicit = BTreeMap::new();
        explicit.insert("retention.ms".to_string(), "1000".to_string());
        assert_eq!(
            topic_config_source("retention.ms", "1000", &explicit, Some("604800000")),
            DYNAMIC_TOPIC_CONFIG
        );
        // Set explicitly to Kafka's default value: still the topic's own setting.
        explicit.insert("segment.bytes".to_string(), "1073741824".to_string());
        assert_eq!(
            topic_config_source("segment.bytes", "1073741824", &explicit, Some("1073741824")),
            DYNAMIC_TOPIC_CONFIG
        );
        assert_eq!(
            topic_config_source("segment.ms", "1000", &explicit, Some("604800000")),
            STATIC_BROKER_CONFIG
        );
        assert_eq!(
            topic_config_source("segment.ms", "604800000", &explicit, Some("604800000")),
            DEFAULT_CONFIG
        );
        assert_eq!(
            topic_config_source("unknown", "x", &explicit, None),
            DEFAULT_CONFIG
        );
    }

    #[test]
    fn configs_with_source_cover_every_topic_config() {
        let log = LogConfig {
            retention_ms: 5,
            segment_bytes: 1 << 20,
            ..LogConfig::default()
        };
        let mut explicit = BTreeMap::new();
        explicit.insert("retention.ms".to_string(), "5".to_string());
        let all = topic_configs_with_source(&log, &explicit);
        assert_eq!(all.len(), crate::kafka_configs::topic_configs().count());
        let source = |n: &str| all.iter().find(|(k, _, _)| *k == n).map(|(_, _, s)| *s);
        assert_eq!(source("retention.ms"), Some(DYNAMIC_TOPIC_CONFIG));
        assert_eq!(source("segment.bytes"), Some(STATIC_BROKER_CONFIG));
        assert_eq!(source("cleanup.policy"), Some(DEFAULT_CONFIG));
        // A config the log does not act on is listed with Kafka's default.
        let value = |n: &str| {
            all.iter()
                .find(|(k, _, _)| *k == n)
                .map(|(_, v, _)| v.clone())
        };
        assert_eq!(source("delete.retention.ms"), Some(DEFAULT_CONFIG));
        assert_eq!(value("delete.retention.ms").as_deref(), Some("86400000"));
        assert_eq!(
            kafka_default_topic_value("max.message.bytes").as_deref(),
            Some("1048588")
        );
    }
}
