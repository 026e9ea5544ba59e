//! DeleteRecords (21): moves a partition's log start forward, on the shard that owns it.
//! Offset -1 means the high watermark; an offset past it is OFFSET_OUT_OF_RANGE. The
//! answer's low watermark is the new log start (the only replica's).

use std::rc::Rc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

use crate::api::errors::log_error_code;
use crate::shard::{ShardCtx, ShardReply, ShardRequest};
use crate::types::{Offset, TopicPartition};

/// The requested offset that means "up to the high watermark".
pub const HIGH_WATERMARK: i64 = -1;

/// The offset to delete up to, or the error: -1 is the high watermark, other negative
/// values and offsets beyond the high watermark are out of range.
pub fn target_offset(requested: i64, high_watermark: Offset) -> Result<Offset, ResponseError> {
    match requested {
        HIGH_WATERMARK => Ok(high_watermark),
        o if o < 0 || o > high_watermark.0 => Err(ResponseError::OffsetOutOfRange),
        o => Ok(Offset(o)),
    }
}

/// (error code, low watermark) for one partition, on its owner.
pub(crate) async fn delete_on_owner(
    ctx: &Rc<ShardCtx>,
    tp: TopicPartition,
    offset: i64,
) -> (i16, i64) {
    let Some(p) = ctx.partition(&tp).filter(|p| p.is_leader()) else {
        return (ResponseError::NotLeaderOrFollower.code(), -1);
    };
    let Ok(mut log) = p.write().await else {
        return (ResponseError::NotLeaderOrFollower.code(), -1);
    };
    // Under the log lock, like a produce's (audit B-14).
    if let Some(message) = crate::api::produce::read_only_reason(ctx, &tp) {
        tracing::info!(%tp, %message, "DeleteRecords rejected");
        return (crate::wire::mirror::errors::READ_ONLY_TOPIC, -1);
    }
    let target = match target_offset(offset, log.high_watermark()) {
        Ok(t) => t,
        Err(e) => return (e.code(), -1),
    };
    match log.advance_log_start_offset(target).await {
        Ok(start) => {
            tracing::info!(%tp, log_start = start.0, "records deleted");
            (0, start.0)
        }
        Err(e) => {
            tracing::warn!(%tp, error = %e, "delete records failed");
            (log_error_code(&e), -1)
        }
    }
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    let image = ctx.metadata.load();
    let jobs = request.topics.into_iter().map(|t| {
        let name = t.name.0.to_string();
        let image = &image;
        async move {
            let parts = t.partitions.into_iter().map(|p| {
                let tp = TopicPartition::new(name.clone(), p.partition_index);
                let owner = image.partition(&tp).map(|pim| pim.shard);
                async move {
                    let (code, low) = match owner {
                        None => (ResponseError::UnknownTopicOrPartition.code(), -1),
                        Some(shard) => {
                            let request = ShardRequest::DeleteRecords {
                                tp,
                                offset: p.offset,
                            };
                            match ctx.ask(shard, request).await {
                                Ok(ShardReply::LowWatermark(code, low)) => (code, low),
                                _ => (ResponseError::NotLeaderOrFollower.code(), -1),
                            }
                        }
                    };
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_low_watermark(low)
                }
            });
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(futures::future::join_all(parts).await)
        }
    });
    DeleteRecordsResponse::default().with_topics(futures::future::join_all(jobs).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_offsets() {
        let hw = Offset(10);
        assert_eq!(target_offset(-1, hw), Ok(hw));
        assert_eq!(target_offset(0, hw), Ok(Offset(0)));
        assert_eq!(target_offset(10, hw), Ok(hw));
        assert_eq!(target_offset(11, hw), Err(ResponseError::OffsetOutOfRange));
        assert_eq!(target_offset(-2, hw), Err(ResponseError::OffsetOutOfRange));
    }
}
