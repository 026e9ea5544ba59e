//! CreateTopics (19). All topics of a request go to the controller as one
//! `AdminRequest::CreateTopics`; a name that appears more than once is answered
//! INVALID_REQUEST once and not forwarded (Kafka's controller does the same). From v5
//! the answer carries the topic's partition count, replication factor and configs: read
//! from the new image after a create, computed from the request for validate_only.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::ResponseError;

use crate::api::admin::{self, duplicates, topic_configs_with_source};
use crate::api::{str_bytes, topic_name};
use crate::controller::{AdminRequest, AdminResult, NewTopic};
use crate::log::config::apply_topic_config;
use crate::log::LogConfig;
use crate::shard::ShardCtx;

/// What a v5+ answer reports about a created (or validated) topic.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CreatedTopic {
    topic_id: uuid::Uuid,
    num_partitions: i32,
    replication_factor: i16,
    configs: Vec<(&'static str, String, i8)>,
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let dup = duplicates(request.topics.iter().map(|t| t.name.0.as_str()));
    // One answer per distinct name, in first-occurrence order; `early` holds the ones
    // answered here without asking the controller.
    let mut order: Vec<String> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut early: BTreeMap<String, AdminResult> = BTreeMap::new();
    let mut forward: Vec<NewTopic> = Vec::new();
    for t in request.topics {
        let name = t.name.0.to_string();
        if !seen.insert(name.clone()) {
            continue;
        }
        order.push(name.clone());
        if dup.contains(&name) {
            let code = ResponseError::InvalidRequest.code();
            early.insert(
                name.clone(),
                AdminResult::err(name, code, "Duplicate topic name."),
            );
            continue;
        }
        let assignments: Vec<(i32, Vec<i32>)> = t
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect();
        match partitions_and_replication(t.num_partitions, t.replication_factor, &assignments) {
            Ok((num_partitions, replication_factor, assignments)) => forward.push(NewTopic {
                name,
                num_partitions,
                replication_factor,
                assignments,
                configs: t
                    .configs
                    .into_iter()
                    .map(|c| (c.name.to_string(), c.value.map(|v| v.to_string())))
                    .collect(),
            }),
            Err((e, message)) => {
                early.insert(name.clone(), AdminResult::err(name, e.code(), message));
            }
        }
    }

    let names: Vec<String> = forward.iter().map(|t| t.name.clone()).collect();
    let validate_only = request.validate_only;
    let requested: BTreeMap<String, NewTopic> = forward
        .iter()
        .map(|t| (t.name.clone(), t.clone()))
        .collect();
    let results = admin::submit(
        ctx,
        AdminRequest::CreateTopics {
            topics: forward,
            validate_only,
        },
        &names,
    )
    .await;
    let mut by_name: BTreeMap<String, AdminResult> =
        results.into_iter().map(|r| (r.name.clone(), r)).collect();
    by_name.append(&mut early);

    let image = ctx.metadata.load();
    let topics = order
        .into_iter()
        .map(|name| {
            let result = by_name.remove(&name).unwrap_or_else(|| {
                AdminResult::err(
                    name.as_str(),
                    ResponseError::UnknownServerError.code(),
                    "no answer",
                )
            });
            let created = if result.error_code != 0 {
                None
            } else if validate_only {
                requested.get(&name).and_then(|t| {
                    validated_topic(
                        t,
                        ctx.settings.num_partitions,
                        &ctx.settings.default_log_config,
                    )
                })
            } else {
                image.topic(&name).map(|t| CreatedTopic {
                    topic_id: t.id,
                    num_partitions: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
                    replication_factor: t.partitions.first().map_or(1, |p| p.replicas.len() as i16),
                    configs: topic_configs_with_source(&t.log_config, &t.configs),
                })
            };
            result_for(&name, result, created, version)
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

/// Partition count, replication factor and explicit replica lists (by partition).
type Replication = (i32, i16, Vec<Vec<i32>>);

/// The partition count, replication factor and explicit replica lists (by partition) to
/// ask the controller for. Explicit assignments (Kafka's alternative to the two numbers)
/// must name partitions 0..n, each with the same number of distinct brokers; whether
/// those brokers exist is the controller's check.
fn partitions_and_replication(
    num_partitions: i32,
    replication_factor: i16,
    assignments: &[(i32, Vec<i32>)],
) -> Result<Replication, (ResponseError, String)> {
    if assignments.is_empty() {
        return Ok((num_partitions, replication_factor, Vec::new()));
    }
    if num_partitions != -1 || replication_factor != -1 {
        return Err((
            ResponseError::InvalidRequest,
            "Both numPartitions or replicationFactor and replicasAssignments were set. \
             Both cannot be used at the same time."
                .to_string(),
        ));
    }
    let mut sorted: Vec<(i32, Vec<i32>)> = assignments.to_vec();
    sorted.sort_by_key(|(p, _)| *p);
    if sorted.iter().zip(0..).any(|((p, _), want)| *p != want) {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            "Partitions should be a consecutive 0-based integer sequence".to_string(),
        ));
    }
    let factor = sorted[0].1.len();
    for (p, brokers) in &sorted {
        if brokers.is_empty() {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!("Partition {p}: the replica list is empty"),
            ));
        }
        if brokers.len() != factor {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                "All partitions should have the same number of replicas".to_string(),
            ));
        }
        let distinct: BTreeSet<i32> = brokers.iter().copied().collect();
        if distinct.len() != brokers.len() {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!("Partition {p}: duplicate brokers in {brokers:?}"),
            ));
        }
    }
    Ok((
        i32::try_from(sorted.len()).unwrap_or(i32::MAX),
        i16::try_from(factor).unwrap_or(i16::MAX),
        sorted.into_iter().map(|(_, b)| b).collect(),
    ))
}

/// The v5+ description of a topic that validate_only accepted: the request's values with
/// the broker defaults filled in.
fn validated_topic(
    topic: &NewTopic,
    default_partitions: i32,
    default_log_config: &LogConfig,
) -> Option<CreatedTopic> {
    let mut log = default_log_config.clone();
    let mut explicit = BTreeMap::new();
    for (k, v) in &topic.configs {
        let v = v.as_ref()?;
        apply_topic_config(&mut log, k, v).ok()?;
        explicit.insert(k.clone(), v.clone());
    }
    Some(CreatedTopic {
        topic_id: uuid::Uuid::nil(),
        num_partitions: if topic.num_partitions == -1 {
            default_partitions
        } else {
            topic.num_partitions
        },
        replication_factor: 1,
        configs: topic_configs_with_source(&log, &explicit),
    })
}

fn result_for(
    name: &str,
    result: AdminResult,
    created: Option<CreatedTopic>,
    version: i16,
) -> CreatableTopicResult {
    let mut r = CreatableTopicResult::default()
        .with_name(topic_name(name))
        .with_error_code(result.error_code)
        .with_error_message(result.message.map(str_bytes));
    if version >= 5 {
        match created {
            Some(c) => {
                r.num_partitions = c.num_partitions;
                r.replication_factor = c.replication_factor;
                r.configs = Some(
                    c.configs
                        .into_iter()
                        .map(|(k, v, source)| {
                            CreatableTopicConfigs::default()
                                .with_name(str_bytes(k))
                                .with_value(Some(str_bytes(v)))
                                .with_read_only(false)
                                .with_config_source(source)
                                .with_is_sensitive(false)
                        })
                        .collect(),
                );
                if version >= 7 {
                    r.topic_id = c.topic_id;
                }
            }
            None => {
                r.num_partitions = -1;
                r.replication_factor = -1;
                r.configs = None;
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_topic(partitions: i32, configs: &[(&str, Option<&str>)]) -> NewTopic {
        NewTopic {
            name: "t".into(),
            num_partitions: partitions,
            replication_factor: -1,
            assignments: Vec::new(),
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
        }
    }

    #[test]
    fn validated_topic_fills_in_defaults() {
        let defaults = LogConfig::default();
        let t = validated_topic(
            &new_topic(-1, &[("retention.ms", Some("10"))]),
            3,
            &defaults,
        )
        .expect("valid");
        assert_eq!(t.num_partitions, 3);
        assert_eq!(t.replication_factor, 1);
        let retention = t
            .configs
            .iter()
            .find(|(k, _, _)| *k == "retention.ms")
            .expect("retention.ms described");
        assert_eq!(
            (retention.1.as_str(), retention.2),
            ("10", admin::DYNAMIC_TOPIC_CONFIG)
        );
        assert!(validated_topic(&new_topic(2, &[("retention.ms", None)]), 1, &defaults).is_none());
    }

    #[test]
    fn replica_assignments_name_every_partition_once_with_the_same_replica_count() {
        assert_eq!(
            partitions_and_replication(3, 1, &[]),
            Ok((3, 1, Vec::new()))
        );
        assert_eq!(
            partitions_and_replication(-1, -1, &[]),
            Ok((-1, -1, Vec::new()))
        );
        let ok = [(1, vec![7, 8]), (0, vec![8, 7])];
        assert_eq!(
            partitions_and_replication(-1, -1, &ok),
            Ok((2, 2, vec![vec![8, 7], vec![7, 8]]))
        );
        let code = |r: Result<Replication, (ResponseError, String)>| r.err().map(|e| e.0);
        assert_eq!(
            code(partitions_and_replication(2, -1, &ok)),
            Some(ResponseError::InvalidRequest)
        );
        for bad in [
            vec![(0, vec![7]), (2, vec![7])],
            vec![(0, vec![7]), (1, vec![7, 8])],
            vec![(0, vec![7, 7])],
            vec![(0, vec![])],
        ] {
            assert_eq!(
                code(partitions_and_replication(-1, -1, &bad)),
                Some(ResponseError::InvalidReplicaAssignment),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn error_results_carry_no_topic_details() {
        let r = result_for(
            "t",
            AdminResult::err("t", ResponseError::TopicAlreadyExists.code(), "exists"),
            None,
            7,
        );
        assert_eq!(r.num_partitions, -1);
        assert_eq!(r.replication_factor, -1);
        assert!(r.configs.is_none());
        assert!(r.topic_id.is_nil());
        // v4 has none of the v5 fields: they keep their defaults.
        let ok = result_for("t", AdminResult::ok("t"), None, 4);
        assert_eq!(ok.error_message, None);
        assert_eq!(ok.configs, Some(Vec::new()));
    }
}

#[cfg(test)]
mod handler_tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};

    use super::*;
    use crate::api::admin::test_support::{ctx, encodes, image};
    use crate::controller::AdminResponse;
    use crate::metadata::{PartitionImage, TopicImage};

    fn topic(name: &str, partitions: i32) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)
    }

    #[test]
    fn duplicates_are_answered_here_and_created_topics_described() {
        // The image already holds "new" as the controller would publish it.
        let mut img = image();
        let id = uuid::Uuid::from_u128(9);
        img.topics.insert(
            "new".into(),
            Arc::new(TopicImage {
                name: "new".into(),
                id,
                partitions: (0..2).map(|p| PartitionImage::single(p, 0, 0, 0)).collect(),
                configs: BTreeMap::from([("retention.ms".to_string(), "5".to_string())]),
                log_config: LogConfig {
                    retention_ms: 5,
                    ..LogConfig::default()
                },
                internal: false,
            }),
        );
        let (ctx, controller) = ctx(img, |req| match req {
            AdminRequest::CreateTopics { topics, .. } => AdminResponse::Results(
                topics
                    .iter()
                    .map(|t| AdminResult::ok(t.name.as_str()))
                    .collect(),
            ),
            _ => AdminResponse::Results(Vec::new()),
        });
        let request = CreateTopicsRequest::default().with_topics(vec![
            topic("dup", 1),
            topic("new", 2).with_configs(vec![CreatableTopicConfig::default()
                .with_name(str_bytes("retention.ms"))
                .with_value(Some(str_bytes("5")))]),
            topic("dup", 1),
        ]);
        let resp = futures::executor::block_on(handle(&ctx, request, 7));
        let sent = controller.requests.lock().expect("lock").clone();
        match sent.as_slice() {
            [AdminRequest::CreateTopics { topics, .. }] => {
                assert_eq!(topics.len(), 1);
                assert_eq!(topics[0].name, "new");
            }
            other => panic!("unexpected requests {other:?}"),
        }
        assert_eq!(resp.topics.len(), 2);
        assert_eq!(resp.topics[0].name.0.as_str(), "dup");
        assert_eq!(
            resp.topics[0].error_code,
            ResponseError::InvalidRequest.code()
        );
        let created = &resp.topics[1];
        assert_eq!(created.error_code, 0);
        assert_eq!(created.num_partitions, 2);
        assert_eq!(created.replication_factor, 1);
        assert_eq!(created.topic_id, id);
        let configs = created.configs.as_ref().expect("configs");
        let retention = configs
            .iter()
            .find(|c| c.name.as_str() == "retention.ms")
            .expect("retention.ms");
        assert_eq!(retention.config_source, admin::DYNAMIC_TOPIC_CONFIG);
        for v in 2..=7 {
            let r = futures::executor::block_on(handle(
                &ctx,
                CreateTopicsRequest::default().with_topics(vec![topic("new", 2)]),
                v,
            ));
            encodes(&r, v);
        }
    }
}
