//! OffsetFetch (9), v1-v9 (v8 and up: several groups per request).

use std::rc::Rc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};

use crate::api::{str_bytes, topic_name};
use crate::group::runtime::{call_group, GroupCall};
use crate::group::{
    OffsetFetchPartition, OffsetFetchRequest as Fetch, OffsetFetchResponse as Fetched,
};
use crate::shard::ShardCtx;
use crate::types::TopicPartition;

async fn fetch_one(ctx: &Rc<ShardCtx>, req: Fetch) -> Fetched {
    let wanted = req.partitions.clone();
    let group_id = req.group_id.clone();
    let result: Result<Fetched, i16> =
        call_group(ctx, &group_id, GroupCall::OffsetFetch(req)).await;
    result.unwrap_or_else(|code| Fetched {
        error_code: code,
        partitions: wanted
            .unwrap_or_default()
            .into_iter()
            .map(|tp| OffsetFetchPartition {
                partition: tp,
                offset: -1,
                leader_epoch: -1,
                metadata: String::new(),
                error_code: code,
            })
            .collect(),
    })
}

/// Groups partitions by topic, in order of first appearance.
fn by_topic(partitions: Vec<OffsetFetchPartition>) -> Vec<(String, Vec<OffsetFetchPartition>)> {
    let mut out: Vec<(String, Vec<OffsetFetchPartition>)> = Vec::new();
    for p in partitions {
        match out.iter_mut().find(|(t, _)| *t == p.partition.topic) {
            Some((_, v)) => v.push(p),
            None => out.push((p.partition.topic.clone(), vec![p])),
        }
    }
    out
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let mut groups = Vec::with_capacity(request.groups.len());
        for g in request.groups {
            let group_id = g.group_id.0.to_string();
            let partitions = g.topics.map(|topics| {
                topics
                    .into_iter()
                    .flat_map(|t| {
                        let name = t.name.0.to_string();
                        t.partition_indexes
                            .into_iter()
                            .map(move |i| TopicPartition::new(name.clone(), i))
                    })
                    .collect()
            });
            let r = fetch_one(
                ctx,
                Fetch {
                    group_id: group_id.clone(),
                    partitions,
                    require_stable: request.require_stable,
                },
            )
            .await;
            let topics = if r.error_code != 0 {
                Vec::new()
            } else {
                by_topic(r.partitions)
                    .into_iter()
                    .map(|(name, ps)| {
                        OffsetFetchResponseTopics::default()
                            .with_name(topic_name(&name))
                            .with_partitions(
                                ps.into_iter()
                                    .map(|p| {
                                        OffsetFetchResponsePartitions::default()
                                            .with_partition_index(p.partition.partition)
                                            .with_committed_offset(p.offset)
                                            .with_committed_leader_epoch(p.leader_epoch)
                                            .with_metadata(Some(str_bytes(p.metadata)))
                                            .with_error_code(p.error_code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect()
            };
            groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(GroupId(str_bytes(group_id)))
                    .with_topics(topics)
                    .with_error_code(r.error_code),
            );
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let group_id = request.group_id.0.to_string();
    let partitions = request.topics.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let name = t.name.0.to_string();
                t.partition_indexes
                    .into_iter()
                    .map(move |i| TopicPartition::new(name.clone(), i))
            })
            .collect()
    });
    let r = fetch_one(
        ctx,
        Fetch {
            group_id,
            partitions,
            require_stable: version >= 7 && request.require_stable,
        },
    )
    .await;
    let topics = by_topic(r.partitions)
        .into_iter()
        .map(|(name, ps)| {
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(&name))
                .with_partitions(
                    ps.into_iter()
                        .map(|p| {
                            let mut out = OffsetFetchResponsePartition::default()
                                .with_partition_index(p.partition.partition)
                                .with_committed_offset(p.offset)
                                .with_metadata(Some(str_bytes(p.metadata)))
                                .with_error_code(p.error_code);
                            if version >= 5 {
                                out.committed_leader_epoch = p.leader_epoch;
                            }
                            out
                        })
                        .collect(),
                )
        })
        .collect();
    let mut resp = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        resp.error_code = r.error_code;
    }
    resp
}
