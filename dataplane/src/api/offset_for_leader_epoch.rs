//! OffsetForLeaderEpoch (23), consumer form (replica id -1, or -2 for debugging tools;
//! a follower's id is served the same way, there being no followers yet). For each
//! partition: the request's current leader epoch is checked against the image, then the
//! owner shard answers the end offset of the requested epoch from its epoch cache.

use std::rc::Rc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::ResponseError;

use crate::shard::{ShardCtx, ShardReply, ShardRequest};
use crate::types::{LeaderEpoch, TopicPartition};

/// Kafka's fencing of a request's current leader epoch against the partition's: -1
/// (unknown) is not checked; newer than ours is UNKNOWN_LEADER_EPOCH (our metadata is
/// behind), older is FENCED_LEADER_EPOCH (the client's is).
pub fn check_current_epoch(requested: i32, partition_epoch: i32) -> Result<(), ResponseError> {
    if requested == LeaderEpoch::UNDEFINED.0 {
        return Ok(());
    }
    match requested.cmp(&partition_epoch) {
        std::cmp::Ordering::Greater => Err(ResponseError::UnknownLeaderEpoch),
        std::cmp::Ordering::Less => Err(ResponseError::FencedLeaderEpoch),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// (error code, epoch, end offset) on the owner, after fencing the request's
/// `current_leader_epoch` against the partition's.
pub(crate) async fn end_offset_on_owner(
    ctx: &Rc<ShardCtx>,
    tp: TopicPartition,
    epoch: i32,
    current_leader_epoch: i32,
) -> (i16, i32, i64) {
    let Some(p) = ctx.partition(&tp).filter(|p| p.is_leader()) else {
        return (ResponseError::NotLeaderOrFollower.code(), -1, -1);
    };
    if let Err(fenced) = p.check_current_epoch(current_leader_epoch) {
        return (fenced.code(), -1, -1);
    }
    let Ok(log) = p.read().await else {
        return (ResponseError::NotLeaderOrFollower.code(), -1, -1);
    };
    let (e, o) = log.end_offset_for_epoch(LeaderEpoch(epoch));
    (0, e.0, o.0)
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: OffsetForLeaderEpochRequest,
    _version: i16,
) -> OffsetForLeaderEpochResponse {
    let image = ctx.metadata.load();
    let jobs = request.topics.into_iter().map(|t| {
        let name = t.topic.0.to_string();
        let image = &image;
        async move {
            let parts = t.partitions.into_iter().map(|p| {
                let tp = TopicPartition::new(name.clone(), p.partition);
                let pim = image.partition(&tp).cloned();
                async move {
                    let (code, epoch, end) = match pim {
                        None => (ResponseError::UnknownTopicOrPartition.code(), -1, -1),
                        Some(pim) => {
                            let request = ShardRequest::EpochEndOffset {
                                tp,
                                leader_epoch: p.leader_epoch,
                                current_leader_epoch: p.current_leader_epoch,
                            };
                            match ctx.ask(pim.shard, request).await {
                                Ok(ShardReply::EpochEnd(code, epoch, end)) => (code, epoch, end),
                                _ => (ResponseError::NotLeaderOrFollower.code(), -1, -1),
                            }
                        }
                    };
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_error_code(code)
                        .with_leader_epoch(epoch)
                        .with_end_offset(end)
                }
            });
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(futures::future::join_all(parts).await)
        }
    });
    OffsetForLeaderEpochResponse::default().with_topics(futures::future::join_all(jobs).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_epoch_fencing() {
        assert_eq!(check_current_epoch(-1, 5), Ok(()));
        assert_eq!(check_current_epoch(5, 5), Ok(()));
        assert_eq!(
            check_current_epoch(6, 5),
            Err(ResponseError::UnknownLeaderEpoch)
        );
        assert_eq!(
            check_current_epoch(4, 5),
            Err(ResponseError::FencedLeaderEpoch)
        );
    }
}
