//! AlterPartitionReassignments (45) and ListPartitionReassignments (46), so that
//! `kafka-reassign-partitions --execute / --verify / --cancel` work. A reassignment goes
//! to the controller as one `AdminRequest::AlterPartitionReassignments`; the controller
//! adds the new replicas (they fetch and join the ISR), and once every target replica is
//! in sync makes the target the replica set and drops the others. Listing reads the
//! image: every partition with replicas being added or removed.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::ResponseError;

use crate::api::{admin, str_bytes, topic_name};
use crate::controller::{AdminRequest, AdminResult};
use crate::shard::ShardCtx;
use crate::types::TopicPartition;

pub async fn alter(
    ctx: &Rc<ShardCtx>,
    request: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let image = ctx.metadata.load();
    // v1+: a reassignment may be refused a change of replication factor.
    let allow_factor_change = version < 1 || request.allow_replication_factor_change;
    // Per topic, its partitions and the answers known without the controller.
    type Answers = Vec<(i32, Option<AdminResult>)>;
    let mut order: Vec<(String, Answers)> = Vec::new();
    let mut forward: Vec<(TopicPartition, Option<Vec<i32>>)> = Vec::new();
    for t in request.topics {
        let name = t.name.0.to_string();
        let mut parts = Vec::new();
        for p in t.partitions {
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            let target: Option<Vec<i32>> = p.replicas.map(|r| r.iter().map(|b| b.0).collect());
            let current = image.partition(&tp).map(|pi| {
                pi.replicas
                    .iter()
                    .filter(|r| !pi.adding.contains(r))
                    .count()
            });
            let changes_factor = matches!((&target, current), (Some(t), Some(c)) if t.len() != c);
            if changes_factor && !allow_factor_change {
                parts.push((
                    p.partition_index,
                    Some(AdminResult::err(
                        tp.to_string(),
                        ResponseError::InvalidReplicationFactor.code(),
                        "The replication factor is changed but allowReplicationFactorChange is false",
                    )),
                ));
                continue;
            }
            parts.push((p.partition_index, None));
            forward.push((tp, target));
        }
        order.push((name, parts));
    }
    let names: Vec<String> = forward.iter().map(|(tp, _)| tp.to_string()).collect();
    let mut results = admin::submit(
        ctx,
        AdminRequest::AlterPartitionReassignments {
            partitions: forward,
        },
        &names,
    )
    .await
    .into_iter();
    let responses = order
        .into_iter()
        .map(|(name, parts)| {
            let partitions = parts
                .into_iter()
                .map(|(index, known)| {
                    let r = known.or_else(|| results.next()).unwrap_or_else(|| {
                        AdminResult::err("", ResponseError::UnknownServerError.code(), "no answer")
                    });
                    ReassignablePartitionResponse::default()
                        .with_partition_index(index)
                        .with_error_code(r.error_code)
                        .with_error_message(r.message.map(str_bytes))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(topic_name(&name))
                .with_partitions(partitions)
        })
        .collect();
    let mut resp = AlterPartitionReassignmentsResponse::default().with_responses(responses);
    if version >= 1 {
        resp.allow_replication_factor_change = allow_factor_change;
    }
    resp
}

pub fn list(
    ctx: &Rc<ShardCtx>,
    request: ListPartitionReassignmentsRequest,
    _version: i16,
) -> ListPartitionReassignmentsResponse {
    let image = ctx.metadata.load();
    // None: every topic; else the named partitions.
    let wanted: Option<BTreeMap<String, Vec<i32>>> = request.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let mut topics = Vec::new();
    for t in image.topics.values() {
        let only = match &wanted {
            Some(w) => match w.get(&t.name) {
                Some(parts) => Some(parts),
                None => continue,
            },
            None => None,
        };
        let partitions: Vec<OngoingPartitionReassignment> = t
            .partitions
            .iter()
            .filter(|p| only.is_none_or(|o| o.contains(&p.partition)))
            .filter(|p| !p.adding.is_empty() || !p.removing.is_empty())
            .map(|p| {
                OngoingPartitionReassignment::default()
                    .with_partition_index(p.partition)
                    .with_replicas(ids(&p.replicas))
                    .with_adding_replicas(ids(&p.adding))
                    .with_removing_replicas(ids(&p.removing))
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(
                OngoingTopicReassignment::default()
                    .with_name(topic_name(&t.name))
                    .with_partitions(partitions),
            );
        }
    }
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}
