//! `twinlog topic ...`: create, list, describe and delete topics with the standard Kafka
//! admin APIs (CreateTopics, Metadata, DescribeConfigs, DeleteTopics), so it works against
//! any Kafka-protocol broker.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use dataplane::client::{metadata_request, ClusterMetadata, METADATA_VERSION_MAX};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{
    check_code, finish, kafka_error_line, parse_key_value, topic_id_base64, Admin, CliError,
    DEFAULT_BOOTSTRAP,
};

/// How long the broker may take to create or delete a topic.
const ADMIN_TIMEOUT_MS: i32 = 30_000;
/// DescribeConfigs resource type of a topic.
const RESOURCE_TYPE_TOPIC: i8 = 2;
/// DescribeConfigs resource type of a broker.
const RESOURCE_TYPE_BROKER: i8 = 4;
/// Metadata API key.
const METADATA_KEY: i16 = 3;

#[derive(Debug, Args)]
pub struct TopicArgs {
    /// A broker of the cluster, HOST:PORT.
    #[arg(long, global = true, value_name = "HOST:PORT", default_value = DEFAULT_BOOTSTRAP)]
    bootstrap_server: String,
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(Debug, Subcommand)]
enum TopicCommand {
    /// Create a topic (CreateTopics).
    Create {
        name: String,
        /// Partitions; the broker's num.partitions when not given.
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
        partitions: Option<i32>,
        /// A topic config, key=value (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
    },
    /// List the topics (Metadata).
    List,
    /// Show a topic's partitions, leaders, epochs, id and configs.
    Describe { name: String },
    /// Delete a topic (DeleteTopics).
    Delete { name: String },
}

/// Runs `twinlog topic ...`.
pub fn run(args: TopicArgs) -> ExitCode {
    finish(execute(args))
}

fn execute(args: TopicArgs) -> Result<(), CliError> {
    let mut admin = Admin::connect(&args.bootstrap_server)?;
    match args.command {
        TopicCommand::Create {
            name,
            partitions,
            configs,
        } => create(&mut admin, name, partitions, configs),
        TopicCommand::List => {
            let meta = metadata(&mut admin, None)?;
            for name in meta.topics.keys() {
                outln!("{name}");
            }
            Ok(())
        }
        TopicCommand::Describe { name } => describe(&mut admin, &name),
        TopicCommand::Delete { name } => delete(&mut admin, name),
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn metadata(admin: &mut Admin, topics: Option<&[String]>) -> Result<ClusterMetadata, CliError> {
    let version = admin.version(METADATA_KEY, "Metadata", 1, METADATA_VERSION_MAX)?;
    let (response, _) = admin.kafka(
        &metadata_request(topics, version),
        "Metadata",
        version,
        version,
    )?;
    Ok(ClusterMetadata::from_response(&response))
}

fn create(
    admin: &mut Admin,
    name: String,
    partitions: Option<i32>,
    configs: Vec<(String, String)>,
) -> Result<(), CliError> {
    let topic = CreatableTopic::default()
        .with_name(topic_name(&name))
        // -1: the broker's default (v4+).
        .with_num_partitions(partitions.unwrap_or(-1))
        .with_replication_factor(-1)
        .with_configs(
            configs
                .into_iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k))
                        .with_value(Some(StrBytes::from_string(v)))
                })
                .collect(),
        );
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let (response, _) = admin.kafka(&request, "CreateTopics", 4, 7)?;
    let result = response
        .topics
        .into_iter()
        .find(|t| t.name.0.as_str() == name)
        .ok_or_else(|| CliError::Other(format!("the broker did not answer for topic {name}")))?;
    if result.error_code != 0 {
        eprintln!(
            "error: {name}: {}",
            kafka_error_line(result.error_code, result.error_message.as_deref())
        );
        return Err(CliError::Reported);
    }
    if result.topic_id.is_nil() {
        outln!("created topic {name}");
    } else {
        outln!(
            "created topic {name} (id {}, {} partitions)",
            topic_id_base64(&result.topic_id),
            result.num_partitions
        );
    }
    Ok(())
}

fn describe(admin: &mut Admin, name: &str) -> Result<(), CliError> {
    let meta = metadata(admin, Some(&[name.to_string()]))?;
    let topic = meta
        .topics
        .get(name)
        .ok_or_else(|| CliError::Other(format!("the broker did not answer for topic {name}")))?;
    if topic.error_code != 0 {
        return Err(CliError::Kafka {
            code: topic.error_code,
            message: Some(if topic.error_code == 3 {
                format!("Topic {name} does not exist")
            } else {
                format!("Cannot describe topic {name}")
            }),
        });
    }
    let replication = topic.partitions.first().map_or(0, |p| p.replicas.len());
    outln!(
        "Topic: {name}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {replication}",
        if topic.id.is_nil() {
            "-".to_string()
        } else {
            topic_id_base64(&topic.id)
        },
        topic.partitions.len()
    );
    let ids = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    for p in &topic.partitions {
        let mut line = format!(
            "\tPartition: {}\tLeader: {}\tLeaderEpoch: {}\tReplicas: {}\tIsr: {}",
            p.partition,
            p.leader,
            p.leader_epoch,
            ids(&p.replicas),
            ids(&p.isr)
        );
        if p.error_code != 0 {
            line.push_str(&format!("\tError: {}", super::error_name(p.error_code)));
        }
        outln!("{line}");
    }
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TYPE_TOPIC)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(None)]);
    let (response, _) = admin.kafka(&request, "DescribeConfigs", 1, 4)?;
    let result = response
        .results
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Other(format!("no DescribeConfigs answer for {name}")))?;
    check_code(result.error_code, result.error_message.as_deref())?;
    let mut configs = result.configs;
    configs.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    let compacted = configs.iter().any(|c| {
        c.name.as_str() == "cleanup.policy"
            && c.value
                .as_ref()
                .is_some_and(|v| v.as_str().contains("compact"))
    });
    outln!("Configs:");
    for c in configs {
        let value = if c.is_sensitive {
            "<sensitive>".to_string()
        } else {
            c.value.as_ref().map_or("null", |v| v.as_str()).to_string()
        };
        outln!(
            "\t{}={value}\t({}{})",
            c.name.as_str(),
            config_source_name(c.config_source),
            if c.read_only { ", read-only" } else { "" }
        );
    }
    if compacted {
        let leaders: Vec<(i32, i32)> = topic
            .partitions
            .iter()
            .map(|p| (p.partition, p.leader))
            .collect();
        describe_cleaner(admin, name, &leaders);
    }
    Ok(())
}

/// The log cleaner's view of a compacted topic's partitions (dirty ratio, last clean),
/// from the `/metrics` endpoint of each partition's leader (`metrics.listen`, found with
/// DescribeConfigs). Kafka has no API for it; a broker without the endpoint (or not a
/// Twinlog) gets a line saying so.
fn describe_cleaner(admin: &mut Admin, topic: &str, leaders: &[(i32, i32)]) {
    outln!("Cleaner:");
    let mut by_broker: std::collections::BTreeMap<i32, Option<String>> = Default::default();
    for (_, leader) in leaders {
        if !by_broker.contains_key(leader) {
            let text = metrics_listen(admin, *leader).and_then(|addr| scrape(&addr));
            by_broker.insert(*leader, text);
        }
    }
    for (partition, leader) in leaders {
        let Some(Some(text)) = by_broker.get(leader) else {
            outln!("	Partition: {partition}	(no metrics.listen on broker {leader}: cleaner state unknown)");
            continue;
        };
        let labels = format!("{{topic=\"{topic}\",partition=\"{partition}\"}}");
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}{labels} ")))
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        let ratio = value("twinlog_log_cleaner_dirty_ratio")
            .map_or_else(|| "-".to_string(), |r| format!("{r:.3}"));
        let last = value("twinlog_log_cleaner_last_clean_timestamp_seconds").map_or_else(
            || "never since start".to_string(),
            |s| {
                let ms = (s * 1000.0) as i64;
                let ago = (dataplane::shard::now_ms() - ms).max(0) / 1000;
                format!("{ms} ({ago} s ago)")
            },
        );
        outln!("	Partition: {partition}	DirtyRatio: {ratio}	LastCleanMs: {last}");
    }
}

/// The broker's `metrics.listen` (a static broker config), if set.
fn metrics_listen(admin: &mut Admin, broker: i32) -> Option<String> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TYPE_BROKER)
            .with_resource_name(StrBytes::from_string(broker.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("metrics.listen")]))]);
    let (response, _) = admin.kafka(&request, "DescribeConfigs", 1, 4).ok()?;
    let result = response.results.into_iter().next()?;
    result
        .configs
        .into_iter()
        .find(|c| c.name.as_str() == "metrics.listen")
        .and_then(|c| c.value)
        .map(|v| v.to_string())
        .filter(|v| !v.trim().is_empty())
}

/// `GET /metrics` from `addr` (HTTP/1.0, a few seconds at most).
fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(5);
    let sock: std::net::SocketAddr = addr.parse().ok()?;
    let mut stream = std::net::TcpStream::connect_timeout(&sock, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream
        .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .ok()?;
    let mut body = String::new();
    stream.read_to_string(&mut body).ok()?;
    Some(body)
}

/// Kafka's `ConfigSource` names (DescribeConfigs v1+).
fn config_source_name(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

fn delete(admin: &mut Admin, name: String) -> Result<(), CliError> {
    let version = admin.version(20, "DeleteTopics", 1, 6)?;
    let mut request = DeleteTopicsRequest::default().with_timeout_ms(ADMIN_TIMEOUT_MS);
    if version >= 6 {
        request = request.with_topics(vec![
            DeleteTopicState::default().with_name(Some(topic_name(&name)))
        ]);
    } else {
        request = request.with_topic_names(vec![topic_name(&name)]);
    }
    let (response, _) = admin.kafka(&request, "DeleteTopics", version, version)?;
    let result =
        response.responses.into_iter().next().ok_or_else(|| {
            CliError::Other(format!("the broker did not answer for topic {name}"))
        })?;
    if result.error_code != 0 {
        eprintln!(
            "error: {name}: {}",
            kafka_error_line(result.error_code, result.error_message.as_deref())
        );
        return Err(CliError::Reported);
    }
    outln!("deleted topic {name}");
    Ok(())
}
