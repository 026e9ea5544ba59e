//! Metadata (3): brokers (this node), cluster id, controller, topics with ids and
//! partitions. Unknown topics are created when the client allows it and
//! `auto.create.topics.enable` is on.

use std::rc::Rc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::ResponseError;

use crate::api::{str_bytes, topic_name};
use crate::controller::{AdminRequest, NewTopic};
use crate::metadata::{MetadataImage, TopicImage};
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    listener: &str,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let mut image = ctx.metadata.load();
    // Topics named by the request (by name, or by id from v10), or None for all.
    // v0 has no null topic list: an empty one means all topics.
    let topics = request.topics.filter(|ts| version > 0 || !ts.is_empty());
    let wanted: Option<Vec<(Option<String>, uuid::Uuid)>> = topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id))
            .collect()
    });
    let auto_create = ctx.settings.auto_create_topics_enable
        && (version < 4 || request.allow_auto_topic_creation);
    if let (Some(wanted), true) = (&wanted, auto_create) {
        let missing: Vec<NewTopic> = wanted
            .iter()
            .filter_map(|(name, _)| name.as_ref())
            .filter(|n| image.topic(n).is_none())
            .map(|n| NewTopic {
                name: n.clone(),
                num_partitions: -1,
                replication_factor: -1,
                assignments: Vec::new(),
                configs: Vec::new(),
            })
            .collect();
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|t| t.name.clone()).collect();
            let rx = ctx.controller.submit(AdminRequest::CreateTopics {
                topics: missing,
                validate_only: false,
            });
            match rx.await {
                Ok(resp) => tracing::info!(topics = ?names, ?resp, "auto-created topics"),
                Err(_) => {
                    tracing::warn!(topics = ?names, "controller went away during auto-create")
                }
            }
            image = ctx.metadata.load();
        }
    }

    let topics: Vec<MetadataResponseTopic> = match wanted {
        None => image
            .topics
            .values()
            .map(|t| topic_response(t, &image, version))
            .collect(),
        Some(wanted) => wanted
            .into_iter()
            .map(|(name, id)| {
                let found = match &name {
                    Some(n) => image.topic(n),
                    None => image.topic_by_id(id),
                };
                match found {
                    Some(t) => topic_response(t, &image, version),
                    None => {
                        let err = if name.as_deref().is_some_and(|n| !valid_topic_name(n)) {
                            ResponseError::InvalidTopicException
                        } else if name.is_none() {
                            ResponseError::UnknownTopicId
                        } else {
                            ResponseError::UnknownTopicOrPartition
                        };
                        let mut t = MetadataResponseTopic::default().with_error_code(err.code());
                        t.name = name.map(|n| topic_name(&n));
                        if version >= 10 {
                            t.topic_id = id;
                        }
                        t
                    }
                }
            })
            .collect(),
    };
    build(&image, listener, topics, version)
}

fn build(
    image: &MetadataImage,
    listener: &str,
    topics: Vec<MetadataResponseTopic>,
    version: i16,
) -> MetadataResponse {
    let brokers = image
        .live_brokers_on(listener)
        .into_iter()
        .map(|(id, addr)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(str_bytes(addr.ip().to_string()))
                .with_port(i32::from(addr.port()))
                .with_rack(image.racks.get(&id).cloned().map(str_bytes))
        })
        .collect();
    let mut resp = MetadataResponse::default()
        .with_brokers(brokers)
        .with_topics(topics);
    if version >= 2 {
        resp.cluster_id = Some(str_bytes(image.cluster_id.clone()));
    }
    if version >= 1 {
        resp.controller_id = BrokerId(image.controller_id);
    }
    resp
}

/// A topic's partitions as Metadata lists them: leader (-1 and LEADER_NOT_AVAILABLE
/// while none can lead), replicas, ISR, and (v5+) the replicas on brokers that are not
/// live.
fn topic_response(
    t: &TopicImage,
    image: &crate::metadata::MetadataImage,
    version: i16,
) -> MetadataResponseTopic {
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let partitions = t
        .partitions
        .iter()
        .map(|p| {
            let mut r = MetadataResponsePartition::default()
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(p.leader))
                .with_replica_nodes(ids(&p.replicas))
                .with_isr_nodes(ids(&p.isr));
            if p.leader < 0 {
                r.error_code = kafka_protocol::ResponseError::LeaderNotAvailable.code();
            }
            if version >= 5 {
                let offline: Vec<i32> = p
                    .replicas
                    .iter()
                    .copied()
                    .filter(|b| !image.is_live(*b))
                    .collect();
                r.offline_replicas = ids(&offline);
            }
            if version >= 7 {
                r.leader_epoch = p.leader_epoch;
            }
            r
        })
        .collect();
    let mut r = MetadataResponseTopic::default()
        .with_name(Some(topic_name(&t.name)))
        .with_is_internal(version >= 1 && t.internal)
        .with_partitions(partitions);
    if version >= 10 {
        r.topic_id = t.id;
    }
    r
}

/// Kafka's topic name rule: 1-249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}
