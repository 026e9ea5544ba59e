//! ListOffsets (2), v1-v10: latest (-1: high watermark, or LSO for read_committed),
//! earliest (-2: log start), max timestamp (-3), earliest local (-4: the log start, there
//! being no tiered storage), latest tiered (-5: none), or the first offset at or after a
//! timestamp. v10's timeout only matters with tiered storage.

use std::rc::Rc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;

use crate::api::errors::log_error_code;
use crate::shard::{ShardCtx, ShardReply, ShardRequest};
use crate::types::{Offset, TopicPartition};

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
/// KIP-1005 (v9): the first offset in local storage; without tiered storage, the log start.
pub const EARLIEST_LOCAL: i64 = -4;
/// KIP-1005 (v9): the last offset in tiered storage; none without it (-1, as Kafka answers).
pub const LATEST_TIERED: i64 = -5;

/// (error code, timestamp, offset, leader epoch) for one partition, on its owner.
/// `current_leader_epoch` (v4+, -1: none) is fenced against the partition's.
pub(crate) async fn lookup_on_owner(
    ctx: &Rc<ShardCtx>,
    tp: TopicPartition,
    timestamp: i64,
    current_leader_epoch: i32,
    read_committed: bool,
) -> (i16, i64, i64, i32) {
    let Some(p) = ctx.partition(&tp).filter(|p| p.is_leader()) else {
        return (ResponseError::NotLeaderOrFollower.code(), -1, -1, -1);
    };
    if let Err(fenced) = p.check_current_epoch(current_leader_epoch) {
        return (fenced.code(), -1, -1, -1);
    }
    let Ok(log) = p.read().await else {
        return (ResponseError::NotLeaderOrFollower.code(), -1, -1, -1);
    };
    let epoch_of = |o: Offset| log.epoch_cache().epoch_for_offset(o).map_or(-1, |e| e.0);
    match timestamp {
        LATEST => {
            let o = if read_committed {
                log.last_stable_offset()
            } else {
                log.high_watermark()
            };
            (0, -1, o.0, log.latest_epoch().map_or(-1, |e| e.0))
        }
        LATEST_TIERED => (0, -1, -1, -1),
        EARLIEST | EARLIEST_LOCAL => {
            let o = log.log_start_offset();
            (0, -1, o.0, epoch_of(o))
        }
        MAX_TIMESTAMP => match log.offset_of_max_timestamp().await {
            Ok(Some((ts, o))) => (0, ts, o.0, epoch_of(o)),
            Ok(None) => (0, -1, -1, -1),
            Err(e) => (log_error_code(&e), -1, -1, -1),
        },
        ts if ts < 0 => (ResponseError::UnsupportedVersion.code(), -1, -1, -1),
        ts => match log.offset_for_timestamp(ts).await {
            Ok(Some((found_ts, o))) => {
                let bound = if read_committed {
                    log.last_stable_offset()
                } else {
                    log.high_watermark()
                };
                if o >= bound {
                    (0, -1, -1, -1)
                } else {
                    (0, found_ts, o.0, epoch_of(o))
                }
            }
            Ok(None) => (0, -1, -1, -1),
            Err(e) => (log_error_code(&e), -1, -1, -1),
        },
    }
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let image = ctx.metadata.load();
    let read_committed = request.isolation_level == 1;
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let name = t.name.0.to_string();
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            let (code, ts, offset, epoch) = match image.partition(&tp) {
                None => (ResponseError::UnknownTopicOrPartition.code(), -1, -1, -1),
                Some(pim) => {
                    let request = ShardRequest::ListOffsets {
                        tp,
                        timestamp: p.timestamp,
                        current_leader_epoch: if version >= 4 {
                            p.current_leader_epoch
                        } else {
                            -1
                        },
                        read_committed,
                    };
                    match ctx.ask(pim.shard, request).await {
                        Ok(ShardReply::Offset(code, ts, offset, epoch)) => {
                            (code, ts, offset, epoch)
                        }
                        _ => (ResponseError::NotLeaderOrFollower.code(), -1, -1, -1),
                    }
                }
            };
            let mut r = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
                .with_timestamp(ts)
                .with_offset(offset);
            if version >= 4 {
                r.leader_epoch = epoch;
            }
            partitions.push(r);
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}
