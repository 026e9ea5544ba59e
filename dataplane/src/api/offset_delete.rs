//! OffsetDelete (47), v0.

use std::rc::Rc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::api::topic_name;
use crate::group::runtime::{call_group, GroupCall};
use crate::shard::ShardCtx;
use crate::types::TopicPartition;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: OffsetDeleteRequest,
    _version: i16,
) -> OffsetDeleteResponse {
    let group_id = request.group_id.0.to_string();
    let partitions: Vec<TopicPartition> = request
        .topics
        .iter()
        .flat_map(|t| {
            let name = t.name.0.to_string();
            t.partitions
                .iter()
                .map(move |p| TopicPartition::new(name.clone(), p.partition_index))
        })
        .collect();
    let call = GroupCall::OffsetDelete {
        group_id: group_id.clone(),
        partitions,
    };
    let result: Result<crate::group::OffsetDeleteResponse, i16> =
        call_group(ctx, &group_id, call).await;
    let r = match result {
        Ok(r) => r,
        Err(code) => return OffsetDeleteResponse::default().with_error_code(code),
    };
    if r.error_code != 0 {
        return OffsetDeleteResponse::default().with_error_code(r.error_code);
    }
    let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
    for (tp, code) in r.partitions {
        let part = OffsetDeleteResponsePartition::default()
            .with_partition_index(tp.partition)
            .with_error_code(code);
        match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.partitions.push(part),
            None => topics.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(topic_name(&tp.topic))
                    .with_partitions(vec![part]),
            ),
        }
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
