//! TxnOffsetCommit (28), v0-v3: offsets committed as part of a transaction, pending in
//! the group coordinator until the transaction's marker reaches `__consumer_offsets`.

use std::rc::Rc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

use crate::group::runtime::{call_group, GroupCall};
use crate::group::{OffsetCommitPartition, TxnOffsetCommitRequest as Commit};
use crate::shard::ShardCtx;
use crate::types::{ProducerId, TopicPartition};

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let group_id = request.group_id.0.to_string();
    let image = ctx.metadata.load();
    let mut unknown = Vec::new();
    let mut partitions = Vec::new();
    let mut shape = Vec::new();
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
                leader_epoch: if version >= 2 {
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
        transactional_id: request.transactional_id.0.to_string(),
        group_id: group_id.clone(),
        producer_id: ProducerId(request.producer_id.0),
        generation_id: if version >= 3 {
            request.generation_id
        } else {
            -1
        },
        member_id: if version >= 3 {
            request.member_id.to_string()
        } else {
            String::new()
        },
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        partitions,
    };
    let known = unknown.iter().filter(|u| !**u).count();
    let result = if known == 0 {
        Ok(Vec::new())
    } else {
        call_group::<crate::group::OffsetCommitResponse>(
            ctx,
            &group_id,
            GroupCall::TxnOffsetCommit(commit),
        )
        .await
        .map(|r| r.partitions)
    };
    let mut known_codes = match result {
        Ok(r) => r.into_iter().map(|(_, code)| code).collect(),
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
            TxnOffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(
                    indexes
                        .into_iter()
                        .map(|i| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(i)
                                .with_error_code(codes.next().unwrap_or(0))
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
