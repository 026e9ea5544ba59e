//! DescribeConfigs, IncrementalAlterConfigs and AlterConfigs on MIRROR config resources
//! (type 64) against real Twinlog processes: secrets are never echoed, the source
//! cluster id is read-only, bad values are refused by the controller, unknown mirrors
//! answer UNKNOWN_CLUSTER_MIRROR. Also: the topic config `mirror.name` stays out of
//! AlterConfigs' reach.

mod mirror_support;
mod support;

use dataplane::client::BlockingConnection;
use dataplane::wire::mirror::errors::UNKNOWN_CLUSTER_MIRROR;
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource, AlterableConfig as FullConfig,
};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncResource, AlterableConfig,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, CreateTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use mirror_support::*;
use support::*;

const BROKER_CONFIG: &str = r#"
"mirror.state.topic.num.partitions" = 3
"offsets.topic.num.partitions" = 3
"num.partitions" = 2
"transaction.state.log.num.partitions" = 3
"#;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_MIRROR: i8 = 64;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// The cluster id a broker reports in Metadata v12.
fn cluster_id(bootstrap: &str) -> String {
    let r = connect(bootstrap)
        .send(
            &MetadataRequest::default().with_topics(Some(Vec::new())),
            12,
        )
        .expect("metadata");
    r.cluster_id.expect("cluster id").to_string()
}

/// DescribeConfigs v4 of one mirror (all keys, or just `keys`).
fn describe_mirror(
    c: &mut BlockingConnection,
    name: &str,
    keys: Option<&[&str]>,
) -> DescribeConfigsResult {
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_MIRROR)
            .with_resource_name(s(name))
            .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect()))]);
    let mut r = c.send(&req, 4).expect("DescribeConfigs");
    assert_eq!(r.results.len(), 1, "{r:?}");
    r.results.remove(0)
}

/// The value of one config in a description; `None` if the value is null. Panics if the
/// key is not described.
fn value_of(r: &DescribeConfigsResult, key: &str) -> Option<String> {
    r.configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .unwrap_or_else(|| panic!("{key} not described: {r:?}"))
        .value
        .as_ref()
        .map(|v| v.to_string())
}

/// IncrementalAlterConfigs v1 of one resource.
fn alter_incremental(
    c: &mut BlockingConnection,
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> IncResponse {
    let req =
        IncrementalAlterConfigsRequest::default().with_resources(vec![IncResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configs(
                ops.iter()
                    .map(|(k, op, v)| {
                        AlterableConfig::default()
                            .with_name(s(k))
                            .with_config_operation(*op)
                            .with_value(v.map(s))
                    })
                    .collect(),
            )]);
    let mut r = c.send(&req, 1).expect("IncrementalAlterConfigs");
    assert_eq!(r.responses.len(), 1, "{r:?}");
    r.responses.remove(0)
}

/// AlterConfigs v2 (full replacement) of one resource.
fn alter_full(
    c: &mut BlockingConnection,
    resource_type: i8,
    name: &str,
    configs: &[(&str, &str)],
) -> AlterConfigsResourceResponse {
    let req = AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| FullConfig::default().with_name(s(k)).with_value(Some(s(v))))
                .collect(),
        )]);
    let mut r = c.send(&req, 2).expect("AlterConfigs");
    assert_eq!(r.responses.len(), 1, "{r:?}");
    r.responses.remove(0)
}

#[test]
fn mirror_configs_are_described_and_altered() {
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let source_id = cluster_id(&a.bootstrap());
    let r = create_mirror(
        &b.bootstrap(),
        "m",
        &a.bootstrap(),
        &[
            ("sasl.jaas.config", "secret"),
            ("ssl.truststore.password", "pw"),
        ],
    );
    assert_eq!(r.error_code, 0, "create mirror: {r:?}\n{}", b.log_tail(40));
    let mut c = connect(&b.bootstrap());

    // Describe: stored configs, the read-only source id, secrets as null, defaults.
    let d = describe_mirror(&mut c, "m", None);
    assert_eq!(d.error_code, 0, "{d:?}");
    assert_eq!(d.resource_type, RESOURCE_MIRROR);
    assert_eq!(value_of(&d, "bootstrap.servers"), Some(a.bootstrap()));
    assert_eq!(value_of(&d, "source.cluster.id"), Some(source_id.clone()));
    for c in &d.configs {
        let name = c.name.as_str();
        assert_eq!(
            c.read_only,
            name == "source.cluster.id",
            "read_only of {name}"
        );
        let secret = name == "sasl.jaas.config" || name == "ssl.truststore.password";
        assert_eq!(c.is_sensitive, secret, "is_sensitive of {name}");
        if secret {
            assert!(c.value.is_none(), "{name} echoed: {c:?}");
        }
    }
    let debug = format!("{d:?}");
    assert!(
        !debug.contains("secret") && !debug.contains("\"pw\""),
        "a secret leaked: {debug}"
    );
    let fmb = d
        .configs
        .iter()
        .find(|c| c.name.as_str() == "fetch.max.bytes")
        .expect("default fetch.max.bytes");
    assert_eq!(fmb.value.as_deref(), Some("1048576"));
    assert_eq!(fmb.config_source, 5, "DEFAULT_CONFIG");
    assert_eq!(value_of(&d, "topics.exclude").as_deref(), Some("__.*"));

    // configuration_keys narrows the answer.
    let d = describe_mirror(&mut c, "m", Some(&["fetch.max.bytes", "no.such.key"]));
    let names: Vec<&str> = d.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["fetch.max.bytes"]);

    // SET takes effect, as a dynamic config.
    let r = alter_incremental(
        &mut c,
        RESOURCE_MIRROR,
        "m",
        &[("fetch.max.bytes", OP_SET, Some("2048"))],
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    let d = describe_mirror(&mut c, "m", Some(&["fetch.max.bytes"]));
    assert_eq!(d.configs.len(), 1, "{d:?}");
    assert_eq!(d.configs[0].value.as_deref(), Some("2048"));
    assert_eq!(d.configs[0].config_source, 1, "a dynamic config");

    // Bad values, the source id, and list operations are refused.
    let r = alter_incremental(
        &mut c,
        RESOURCE_MIRROR,
        "m",
        &[("fetch.max.bytes", OP_SET, Some("abc"))],
    );
    assert_eq!(r.error_code, ResponseError::InvalidConfig.code(), "{r:?}");
    let message = r.error_message.as_deref().unwrap_or("").to_string();
    assert!(
        message.contains("fetch.max.bytes"),
        "names the key: {message}"
    );
    let r = alter_incremental(
        &mut c,
        RESOURCE_MIRROR,
        "m",
        &[("source.cluster.id", OP_DELETE, None)],
    );
    assert_eq!(r.error_code, ResponseError::InvalidConfig.code(), "{r:?}");
    let r = alter_incremental(
        &mut c,
        RESOURCE_MIRROR,
        "m",
        &[("topics.include", OP_APPEND, Some("a.*"))],
    );
    assert_eq!(r.error_code, ResponseError::InvalidRequest.code(), "{r:?}");
    let d = describe_mirror(&mut c, "m", Some(&["fetch.max.bytes", "source.cluster.id"]));
    assert_eq!(
        value_of(&d, "fetch.max.bytes").as_deref(),
        Some("2048"),
        "unchanged"
    );
    assert_eq!(value_of(&d, "source.cluster.id"), Some(source_id.clone()));

    // DELETE returns a key to its default.
    let r = alter_incremental(
        &mut c,
        RESOURCE_MIRROR,
        "m",
        &[("fetch.max.bytes", OP_DELETE, None)],
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    let d = describe_mirror(&mut c, "m", Some(&["fetch.max.bytes"]));
    assert_eq!(d.configs[0].value.as_deref(), Some("1048576"));
    assert_eq!(d.configs[0].config_source, 5);

    // AlterConfigs replaces the whole set: keys not named go (the secrets here).
    let r = alter_full(
        &mut c,
        RESOURCE_MIRROR,
        "m",
        &[
            ("bootstrap.servers", &a.bootstrap()),
            ("source.cluster.id", &source_id),
            ("fetch.wait.max.ms", "100"),
        ],
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    let d = describe_mirror(&mut c, "m", None);
    assert_eq!(value_of(&d, "fetch.wait.max.ms").as_deref(), Some("100"));
    assert!(
        !d.configs
            .iter()
            .any(|c| c.name.as_str() == "sasl.jaas.config"),
        "replaced: {d:?}"
    );
    // A replacement without the source id would remove it.
    let r = alter_full(
        &mut c,
        RESOURCE_MIRROR,
        "m",
        &[("bootstrap.servers", &a.bootstrap())],
    );
    assert_eq!(r.error_code, ResponseError::InvalidConfig.code(), "{r:?}");

    // Unknown mirrors.
    let d = describe_mirror(&mut c, "nope", None);
    assert_eq!(d.error_code, UNKNOWN_CLUSTER_MIRROR, "{d:?}");
    assert_eq!(
        d.error_message.as_deref(),
        Some("Mirror nope does not exist")
    );
    assert!(d.configs.is_empty());
    let r = alter_incremental(
        &mut c,
        RESOURCE_MIRROR,
        "nope",
        &[("fetch.max.bytes", OP_SET, Some("1"))],
    );
    assert_eq!(r.error_code, UNKNOWN_CLUSTER_MIRROR, "{r:?}");
    let r = alter_full(&mut c, RESOURCE_MIRROR, "nope", &[("fetch.max.bytes", "1")]);
    assert_eq!(r.error_code, UNKNOWN_CLUSTER_MIRROR, "{r:?}");
}

#[test]
fn topic_mirror_name_is_not_alterable() {
    let broker = Broker::start(BROKER_CONFIG);
    let mut c = connect(&broker.bootstrap());
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s("plain")))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(10_000);
    let r = c.send(&req, 7).expect("CreateTopics");
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");

    let r = alter_full(&mut c, RESOURCE_TOPIC, "plain", &[("mirror.name", "m")]);
    assert_eq!(r.error_code, ResponseError::InvalidConfig.code(), "{r:?}");
    let r = alter_incremental(
        &mut c,
        RESOURCE_TOPIC,
        "plain",
        &[("mirror.name", OP_SET, Some("m"))],
    );
    assert_eq!(r.error_code, ResponseError::InvalidConfig.code(), "{r:?}");
    // Ordinary topic configs still change.
    let r = alter_full(
        &mut c,
        RESOURCE_TOPIC,
        "plain",
        &[("retention.ms", "60000")],
    );
    assert_eq!(r.error_code, 0, "{r:?}");
}

/// Exclusion is enforced (reference §8.6): a mirrored topic that comes to match the
/// mirror's `topics.exclude` is removed from the mirror by the next metadata sync (it
/// fails over and becomes writable with its data), while the others keep mirroring; and
/// AddTopicsToMirror refuses a topic the mirror excludes.
#[test]
fn topics_that_come_to_match_topics_exclude_leave_the_mirror() {
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    for t in ["keep", "drop-me", "drop-also"] {
        create_topic(&a.bootstrap(), t, 1);
        produce_batch(&a.bootstrap(), t, 0, 20);
    }
    let r = create_mirror(
        &b.bootstrap(),
        "m",
        &a.bootstrap(),
        &[("mirror.metadata.refresh.interval.ms", "200")],
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = add_topics(&b.bootstrap(), "m", &["keep", "drop-me"]);
    assert_eq!(r.error_code, 0, "{r:?}");
    wait_for(
        &b.bootstrap(),
        "m",
        "MIRRORING",
        std::time::Duration::from_secs(60),
        |d| all_in(d, "MIRRORING"),
    );
    let mut c = connect(&b.bootstrap());
    let r = alter_incremental(
        &mut c,
        RESOURCE_MIRROR,
        "m",
        &[("topics.exclude", OP_SET, Some("drop-.*"))],
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    let d = wait_for(
        &b.bootstrap(),
        "m",
        "drop-me STOPPED",
        std::time::Duration::from_secs(60),
        |d| {
            partitions(d)
                .iter()
                .all(|((t, _), p)| (t == "drop-me") == (p.state == "STOPPED"))
        },
    );
    assert!(
        partitions(&d)
            .iter()
            .any(|((t, _), p)| t == "keep" && p.state == "MIRRORING"),
        "{d:#?}"
    );
    produce_batch(&b.bootstrap(), "drop-me", 0, 5);
    // Adding an excluded topic by name is refused.
    let r = add_topics(&b.bootstrap(), "m", &["drop-also"]);
    assert_eq!(
        r.topics[0].error_code,
        ResponseError::InvalidRequest.code(),
        "{r:?}"
    );
    b.assert_healthy();
}
