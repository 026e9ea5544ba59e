//! WriteTxnMarkers (27), the inter-broker RPC a transaction coordinator sends the leader
//! of each partition its transaction wrote to: the COMMIT or ABORT marker goes into the
//! partition on the shard that owns it (for `__consumer_offsets`, the group coordinator
//! then completes the transaction's offsets), and each partition gets its error code.
//! A partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER; the coordinator
//! looks the leader up again and resends.

use std::rc::Rc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::ResponseError;

use crate::shard::{ShardCtx, ShardReply, ShardRequest};
use crate::txn::TxnMarker;
use crate::types::{ProducerEpoch, ProducerId, TopicPartition};

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let mut markers = Vec::with_capacity(request.markers.len());
    for m in request.markers {
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let name = t.name.0.to_string();
            let mut partitions = Vec::with_capacity(t.partition_indexes.len());
            for p in t.partition_indexes {
                let marker = TxnMarker {
                    transactional_id: String::new(),
                    topic_partition: TopicPartition::new(name.clone(), p),
                    producer_id: ProducerId(m.producer_id.0),
                    producer_epoch: ProducerEpoch(m.producer_epoch),
                    commit: m.transaction_result,
                    coordinator_epoch: m.coordinator_epoch,
                };
                let error_code = write_one(ctx, marker).await;
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(error_code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// One marker on the shard owning its partition: its error code.
async fn write_one(ctx: &Rc<ShardCtx>, marker: TxnMarker) -> i16 {
    let image = ctx.metadata.load();
    let Some(shard) = image.partition(&marker.topic_partition).map(|p| p.shard) else {
        return ResponseError::UnknownTopicOrPartition.code();
    };
    match ctx
        .ask(shard, ShardRequest::WriteTxnMarker { marker })
        .await
    {
        Ok(ShardReply::Marker(Ok(()))) => 0,
        Ok(ShardReply::Marker(Err(code))) => code,
        _ => ResponseError::NotLeaderOrFollower.code(),
    }
}
