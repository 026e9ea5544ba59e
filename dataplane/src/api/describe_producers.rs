//! DescribeProducers (61), v0: the active producers of each partition, read from its
//! producer state on the owning shard (`kafka-transactions describe-producers`,
//! `Admin.describeProducers`).

use std::rc::Rc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::shard::{ShardCtx, ShardReply, ShardRequest};
use crate::types::TopicPartition;

/// The producers of one partition, on its owner.
pub(crate) async fn producers_on_owner(
    ctx: &Rc<ShardCtx>,
    tp: TopicPartition,
) -> Result<Vec<ProducerState>, i16> {
    let p = ctx
        .partition(&tp)
        .ok_or(ResponseError::NotLeaderOrFollower.code())?;
    let log = p
        .read()
        .await
        .map_err(|_| ResponseError::NotLeaderOrFollower.code())?;
    let mut out: Vec<ProducerState> = log
        .producer_state()
        .entries()
        .filter(|e| !e.is_empty() || e.current_txn_first_offset.is_some())
        .map(|e| {
            ProducerState::default()
                .with_producer_id(ProducerId(e.producer_id.0))
                .with_producer_epoch(i32::from(e.producer_epoch.0))
                .with_last_sequence(e.batches.back().map_or(-1, |b| b.last_seq))
                .with_last_timestamp(e.last_timestamp_ms)
                .with_coordinator_epoch(e.coordinator_epoch)
                .with_current_txn_start_offset(e.current_txn_first_offset.map_or(-1, |o| o.0))
        })
        .collect();
    out.sort_by_key(|s| s.producer_id.0);
    Ok(out)
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let image = ctx.metadata.load();
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let name = t.name.0.to_string();
        let mut partitions = Vec::with_capacity(t.partition_indexes.len());
        for index in t.partition_indexes {
            let tp = TopicPartition::new(name.clone(), index);
            let result = match image.partition(&tp) {
                None => Err(ResponseError::UnknownTopicOrPartition.code()),
                Some(pim) => match ctx
                    .ask(pim.shard, ShardRequest::DescribeProducers { tp })
                    .await
                {
                    Ok(ShardReply::Producers(producers)) => producers,
                    _ => Err(ResponseError::NotLeaderOrFollower.code()),
                },
            };
            let mut r = PartitionResponse::default().with_partition_index(index);
            match result {
                Ok(producers) => r.active_producers = producers,
                Err(code) => {
                    r.error_code = code;
                    r.error_message =
                        ResponseError::try_from_code(code).map(|e| str_bytes(e.to_string()));
                }
            }
            partitions.push(r);
        }
        topics.push(
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    DescribeProducersResponse::default().with_topics(topics)
}
