//! The topic configs a mirror copies from its source (reference §3.3): the source
//! topic's explicit configs, less the excluded ones. The control plane's metadata sync
//! keeps a mirror topic's configs equal to them; AddTopicsToMirror creates a new mirror
//! topic with them, so its first records already land under the source's segment,
//! cleanup and retention settings (a compacted topic created with the broker's default
//! `segment.bytes` would hold everything fetched before the first sync in one segment,
//! which the cleaner never touches while it is active).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::KafkaConnection;
use crate::wire::mirror::MIRROR_NAME_CONFIG;

/// Topic configs never synced unless a mirror says otherwise (reference §3.3, both the
/// base and the newer list). `mirror.name` is excluded on top of these, always.
pub const DEFAULT_TOPIC_PROPERTIES_EXCLUDE: &[&str] = &[
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms",
    "message.timestamp.type",
    "unclean.leader.election.enable",
    "min.insync.replicas",
    "mirror.replication.throttled.replicas",
    "mirror.support.unclean.leader.election",
];

/// Topics per DescribeConfigs request to the source.
const RESOURCES_PER_REQUEST_MAX: usize = 100;
/// `ConfigSource` of a config set on the topic itself.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// `ConfigResource.Type.TOPIC`.
const RESOURCE_TOPIC: i8 = 2;

/// Topic configs never synced for a mirror: the defaults, the mirror's own
/// `topic.properties.exclude` list, and `mirror.name`.
pub fn excluded_topic_configs(mirror_configs: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = DEFAULT_TOPIC_PROPERTIES_EXCLUDE
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(list) = mirror_configs.get("topic.properties.exclude") {
        out.extend(
            list.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_string),
        );
    }
    out.insert(MIRROR_NAME_CONFIG.to_string());
    out
}

/// The IncrementalAlterConfigs changes (`None`: delete) that make a local topic's
/// synced configs equal the source's explicit ones. Keys outside Kafka's catalog and
/// excluded keys are left alone on both sides.
pub fn plan_topic_configs(
    source_explicit: &BTreeMap<String, String>,
    local_explicit: &BTreeMap<String, String>,
    excluded: &BTreeSet<String>,
) -> Vec<(String, Option<String>)> {
    let synced = |k: &str| {
        crate::kafka_configs::topic_config(k).is_some()
            && !excluded.contains(k)
            && k != MIRROR_NAME_CONFIG
    };
    let mut out = Vec::new();
    for (k, v) in source_explicit.iter().filter(|(k, _)| synced(k)) {
        if local_explicit.get(k) != Some(v) {
            out.push((k.clone(), Some(v.clone())));
        }
    }
    for k in local_explicit.keys() {
        if synced(k) && !source_explicit.contains_key(k) {
            out.push((k.clone(), None));
        }
    }
    out
}

/// The configs a new mirror topic starts with: the synced part of the source's.
pub fn initial_topic_configs(
    source_explicit: &BTreeMap<String, String>,
    excluded: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    plan_topic_configs(source_explicit, &BTreeMap::new(), excluded)
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect()
}

/// One source topic's explicit, non-sensitive configs, or why DescribeConfigs could
/// not say.
pub type SourceTopicConfigs = (String, Result<BTreeMap<String, String>, String>);

/// DescribeConfigs of `topics` on the source, `RESOURCES_PER_REQUEST_MAX` at a time.
/// `Err`: the source could not be asked at all (no common version, the connection).
pub async fn describe_source_topic_configs(
    conn: &mut KafkaConnection,
    topics: &[String],
) -> Result<Vec<SourceTopicConfigs>, String> {
    let key = ApiKey::DescribeConfigs as i16;
    let Some(v) = conn.pick_version(key, 1, 4) else {
        return Err(format!(
            "{} does not serve DescribeConfigs v1-v4 (it serves {:?})",
            conn.addr(),
            conn.api_range(key)
        ));
    };
    let mut out = Vec::with_capacity(topics.len());
    for chunk in topics.chunks(RESOURCES_PER_REQUEST_MAX) {
        let req = DescribeConfigsRequest::default().with_resources(
            chunk
                .iter()
                .map(|t| {
                    DescribeConfigsResource::default()
                        .with_resource_type(RESOURCE_TOPIC)
                        .with_resource_name(StrBytes::from_string(t.clone()))
                        .with_configuration_keys(None)
                })
                .collect(),
        );
        let resp = conn
            .send(&req, v)
            .await
            .map_err(|e| format!("DescribeConfigs on the source: {e}"))?;
        for r in resp.results {
            let topic = r.resource_name.to_string();
            if r.error_code != 0 {
                let name = match ResponseError::try_from_code(r.error_code) {
                    Some(e) => format!("{e:?} ({})", r.error_code),
                    None => format!("error {}", r.error_code),
                };
                out.push((
                    topic,
                    Err(format!(
                        "DescribeConfigs on the source: {name} {}",
                        r.error_message.as_deref().unwrap_or("")
                    )),
                ));
                continue;
            }
            let explicit = r
                .configs
                .iter()
                .filter(|c| c.config_source == DYNAMIC_TOPIC_CONFIG && !c.is_sensitive)
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            out.push((topic, Ok(explicit)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn excluded_configs_add_the_mirror_list_to_the_defaults() {
        let ex = excluded_topic_configs(&map(&[(
            "topic.properties.exclude",
            " retention.bytes ,, segment.ms",
        )]));
        assert!(ex.contains("min.insync.replicas"));
        assert!(ex.contains("message.timestamp.type"));
        assert!(ex.contains("retention.bytes"));
        assert!(ex.contains("segment.ms"));
        assert!(ex.contains(MIRROR_NAME_CONFIG));
        assert!(!ex.contains("retention.ms"));
    }

    #[test]
    fn config_plan_sets_changes_and_removes_what_the_source_dropped() {
        let excluded =
            excluded_topic_configs(&map(&[("topic.properties.exclude", "retention.bytes")]));
        let source = map(&[
            ("retention.ms", "1000"),
            ("cleanup.policy", "compact"),
            ("min.insync.replicas", "2"),
            ("retention.bytes", "5"),
            ("some.unknown.key", "x"),
            (MIRROR_NAME_CONFIG, "other"),
        ]);
        let local = map(&[
            ("retention.ms", "1000"),
            ("segment.ms", "99"),
            ("retention.bytes", "7"),
            ("min.insync.replicas", "1"),
            (MIRROR_NAME_CONFIG, "m"),
        ]);
        assert_eq!(
            plan_topic_configs(&source, &local, &excluded),
            vec![
                ("cleanup.policy".to_string(), Some("compact".to_string())),
                ("segment.ms".to_string(), None),
            ]
        );
        // In step: nothing to do.
        let same = map(&[("retention.ms", "1000"), (MIRROR_NAME_CONFIG, "m")]);
        assert!(plan_topic_configs(&map(&[("retention.ms", "1000")]), &same, &excluded).is_empty());
    }

    #[test]
    fn a_new_mirror_topic_starts_with_the_synced_source_configs_only() {
        let excluded =
            excluded_topic_configs(&map(&[("topic.properties.exclude", "retention.ms")]));
        let source = map(&[
            ("segment.bytes", "4096"),
            ("cleanup.policy", "compact"),
            ("retention.ms", "1000"),
            ("min.insync.replicas", "2"),
            ("mirror.name", "other"),
            ("not.a.kafka.config", "x"),
        ]);
        assert_eq!(
            initial_topic_configs(&source, &excluded),
            map(&[("cleanup.policy", "compact"), ("segment.bytes", "4096")])
        );
    }
}
