//! OffsetCommit (8), v2-v9.

use std::rc::Rc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::ResponseError;

use crate::group::runtime::{call_group, GroupCall};
use crate::group::{OffsetCommitPartition, OffsetCommitRequest as Commit};
use crate::shard::ShardCtx;
use crate::types::TopicPartition;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group_id = request.group_id.0.to_string();
    let image = ctx.metadata.load();
    // Partitions of unknown topics are answered here and not committed.
    let mut unknown = Vec::new();
    let mut partitions = Vec::new();
    let mut shape: Vec<(kafka_protocol::messages::TopicName, Vec<i32>)> = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut indexes = Vec::new();
        for p in topic.partitions {
            indexes.push(p.partition_index);
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            if image.partition(&tp).is_none() {
                unknown.push(true);
                continue;
            }
            unknown.push(false);
            partitions.push(OffsetCommitPartition {
                partition: tp,
                offset: p.committed_offset,
                leader_epoch: if version >= 6 {
                    p.committed_leader_epoch
                } else {
                    -1
                },
                metadata: p.committed_metadata.map(|m| m.to_string()),
            });
        }
        shape.push((topic.name, indexes));
    }
    let commit = Commit {
        group_id: group_id.clone(),
        generation_id: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        retention_time_ms: if version <= 4 {
            request.retention_time_ms
        } else {
            -1
        },
        partitions,
    };
    let result: Result<crate::group::OffsetCommitResponse, i16> =
        call_group(ctx, &group_id, GroupCall::OffsetCommit(commit)).await;
    let known = unknown.iter().filter(|u| !**u).count();
    let mut known_codes = match result {
        Ok(r) => r.partitions.into_iter().map(|(_, code)| code).collect(),
        Err(code) => vec![code; known],
    }
    .into_iter();
    let unknown_code = ResponseError::UnknownTopicOrPartition.code();
    let mut codes = unknown
        .into_iter()
        .map(|u| {
            if u {
                unknown_code
            } else {
                known_codes.next().unwrap_or(0)
            }
        })
        .collect::<Vec<_>>()
        .into_iter();
    let topics = shape
        .into_iter()
        .map(|(name, indexes)| {
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(
                    indexes
                        .into_iter()
                        .map(|i| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(i)
                                .with_error_code(codes.next().unwrap_or(0))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
