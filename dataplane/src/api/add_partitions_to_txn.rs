//! AddPartitionsToTxn (24), v0-v3 (one transactional id per request). Partitions of a
//! mirror that is not STOPPED are refused with READ_ONLY_TOPIC.

use std::collections::HashSet;
use std::rc::Rc;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use kafka_protocol::ResponseError;

use crate::shard::{ShardCtx, ShardReply, ShardRequest};
use crate::txn::runtime::{call_txn, Answer, TxnCall};
use crate::txn::state::fenced_code_for_client;
use crate::txn::AddPartitionsToTxnRequest as Add;
use crate::types::{ProducerEpoch, ProducerId, TopicPartition};

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let transactional_id = request.v3_and_below_transactional_id.0.to_string();
    let image = ctx.metadata.load();
    let mut partitions = Vec::new();
    let mut unknown = false;
    for topic in &request.v3_and_below_topics {
        for p in &topic.partitions {
            let tp = TopicPartition::new(topic.name.0.to_string(), *p);
            unknown |= image.partition(&tp).is_none();
            partitions.push(tp);
        }
    }
    // Partitions of a mirror that is not STOPPED take no transactional data or markers
    // (reference §6.8): READ_ONLY_TOPIC, asked of each partition's owning shard.
    let mut read_only: HashSet<TopicPartition> = HashSet::new();
    for tp in &partitions {
        let Some(pim) = image.partition(tp) else {
            continue;
        };
        if image.topic(&tp.topic).and_then(|t| t.mirror()).is_none() {
            continue;
        }
        let request = ShardRequest::ReadOnlyReason { tp: tp.clone() };
        let refused = !matches!(
            ctx.ask(pim.shard, request).await,
            Ok(ShardReply::ReadOnly(None))
        );
        if refused {
            read_only.insert(tp.clone());
        }
    }
    let refused = unknown || !read_only.is_empty();
    // Kafka: unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, the others
    // OPERATION_NOT_ATTEMPTED, and nothing is added.
    let code_for = |tp: &TopicPartition, code: i16| {
        if !refused {
            code
        } else if image.partition(tp).is_none() {
            ResponseError::UnknownTopicOrPartition.code()
        } else if read_only.contains(tp) {
            crate::wire::mirror::errors::READ_ONLY_TOPIC
        } else {
            ResponseError::OperationNotAttempted.code()
        }
    };
    let code = if refused {
        0
    } else {
        let add = Add {
            transactional_id: transactional_id.clone(),
            producer_id: ProducerId(request.v3_and_below_producer_id.0),
            producer_epoch: ProducerEpoch(request.v3_and_below_producer_epoch),
            partitions,
        };
        let result: Result<Answer<i16>, i16> =
            call_txn(ctx, &transactional_id, TxnCall::AddPartitions(add)).await;
        let code = match result {
            Ok(answer) => answer.code(),
            Err(code) => code,
        };
        fenced_code_for_client(code, version < 2)
    };
    let results = request
        .v3_and_below_topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name)
                .with_results_by_partition(
                    topic
                        .partitions
                        .into_iter()
                        .map(|p| {
                            let tp = TopicPartition::new(name.clone(), p);
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code_for(&tp, code))
                        })
                        .collect(),
                )
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}
