//! Produce (0). Partitions are grouped by owning shard; each shard appends its
//! partitions' record sets (the very `Bytes` decoded off the socket) and the answers
//! are merged back in request order. acks=0 gets no response; acks=1 and acks=-1 are the
//! same on a single node (the log's flush policy decides durability).

use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;

use crate::api::errors::log_error_code;
use crate::api::str_bytes;
use crate::log::validate::ValidateError;
use crate::log::{AppendKind, LogError};
use crate::shard::{now_ms, ShardCtx, ShardReply, ShardRequest};
use crate::types::TopicPartition;

/// The outcome for one partition.
#[derive(Debug, Clone)]
pub struct PartitionProduceResult {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub base_offset: i64,
    pub log_start_offset: i64,
    /// The append time of a LogAppendTime topic, else -1 (Produce v2+).
    pub log_append_time_ms: i64,
    /// Rejected records: (index in the batch, why) (Produce v8+, KIP-467).
    pub record_errors: Vec<(i32, String)>,
}

impl PartitionProduceResult {
    /// No offsets, no error: the base the other results fill in.
    fn empty() -> Self {
        PartitionProduceResult {
            error_code: 0,
            error_message: None,
            base_offset: -1,
            log_start_offset: -1,
            log_append_time_ms: -1,
            record_errors: Vec::new(),
        }
    }

    fn error(code: ResponseError, message: Option<String>) -> Self {
        PartitionProduceResult {
            error_code: code.code(),
            error_message: message,
            ..PartitionProduceResult::empty()
        }
    }
}

/// Why `tp` (owned by this shard) does not accept writes: it belongs to a mirror and
/// has not been STOPPED yet (reference §6.8). `None`: writable.
pub fn read_only_reason(ctx: &ShardCtx, tp: &TopicPartition) -> Option<String> {
    let image = ctx.metadata.load();
    let (mirror, _) = image.topic(&tp.topic)?.mirror()?;
    match ctx.partition(tp) {
        Some(p) => p.read_only_reason(Some(mirror)),
        None => Some(format!("{tp} is a read-only copy in mirror {mirror}")),
    }
}

/// Appends one partition's record set on its owning shard.
pub async fn append_on_owner(
    ctx: Rc<ShardCtx>,
    tp: TopicPartition,
    records: Option<Bytes>,
) -> PartitionProduceResult {
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return PartitionProduceResult::error(
            ResponseError::InvalidRecord,
            Some("empty record set".into()),
        );
    };
    let Some(partition) = ctx.partition(&tp) else {
        return PartitionProduceResult::error(ResponseError::NotLeaderOrFollower, None);
    };
    let Ok(mut log) = partition.write().await else {
        return PartitionProduceResult::error(ResponseError::NotLeaderOrFollower, None);
    };
    // Checked under the log lock (audit B-14): a produce that waited for the lock while
    // a mirror's PREPARING truncated the log must not append after it.
    if let Some(message) = read_only_reason(&ctx, &tp) {
        return PartitionProduceResult {
            error_code: crate::wire::mirror::errors::READ_ONLY_TOPIC,
            error_message: Some(message),
            ..PartitionProduceResult::empty()
        };
    }
    match log
        .append_as_leader(
            records,
            partition.leader_epoch(),
            AppendKind::Client,
            now_ms(),
        )
        .await
    {
        Ok(info) => PartitionProduceResult {
            error_code: 0,
            error_message: None,
            base_offset: info.first_offset.0,
            log_start_offset: info.log_start_offset.0,
            log_append_time_ms: info.log_append_time_ms,
            record_errors: Vec::new(),
        },
        Err(e) => {
            tracing::info!(%tp, error = %e, "produce rejected");
            let (message, record_errors) = match &e {
                LogError::Rejected {
                    source: ValidateError::Records(errors),
                    ..
                } => (
                    ValidateError::Records(errors.clone()).to_string(),
                    errors
                        .iter()
                        .map(|r| (r.batch_index, r.message.clone()))
                        .collect(),
                ),
                _ => (e.to_string(), Vec::new()),
            };
            PartitionProduceResult {
                error_code: log_error_code(&e),
                error_message: Some(message),
                log_start_offset: log.log_start_offset().0,
                record_errors,
                ..PartitionProduceResult::empty()
            }
        }
    }
}

/// (slot in the response, partition, record set, leader epoch).
type PartitionWork = ((usize, usize), (TopicPartition, Option<Bytes>));

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: ProduceRequest,
    version: i16,
) -> Option<ProduceResponse> {
    let image = ctx.metadata.load();
    // (topic index, partition index) -> result; work grouped by owning shard.
    let mut results: BTreeMap<(usize, usize), PartitionProduceResult> = BTreeMap::new();
    let mut per_shard: BTreeMap<usize, Vec<PartitionWork>> = BTreeMap::new();
    let mut names = Vec::new();
    let mut indexes = Vec::new();
    for (ti, topic) in request.topic_data.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let mut parts = Vec::new();
        for (pi, p) in topic.partition_data.into_iter().enumerate() {
            parts.push(p.index);
            let tp = TopicPartition::new(name.clone(), p.index);
            match image.partition(&tp) {
                Some(pim) => per_shard
                    .entry(pim.shard)
                    .or_default()
                    .push(((ti, pi), (tp, p.records))),
                None => {
                    results.insert(
                        (ti, pi),
                        PartitionProduceResult::error(ResponseError::UnknownTopicOrPartition, None),
                    );
                }
            }
        }
        names.push(name);
        indexes.push(parts);
    }
    let jobs = per_shard.into_iter().map(|(shard, work)| {
        let ctx = Rc::clone(ctx);
        async move {
            let (keys, partitions): (Vec<(usize, usize)>, Vec<_>) = work.into_iter().unzip();
            match ctx.ask(shard, ShardRequest::Produce { partitions }).await {
                Ok(ShardReply::Produced(out)) => keys.into_iter().zip(out).collect::<Vec<_>>(),
                _ => keys
                    .into_iter()
                    .map(|k| {
                        (
                            k,
                            PartitionProduceResult::error(ResponseError::NotLeaderOrFollower, None),
                        )
                    })
                    .collect(),
            }
        }
    });
    for done in futures::future::join_all(jobs).await {
        results.extend(done);
    }
    if request.acks == 0 {
        return None;
    }
    let responses = names
        .into_iter()
        .zip(indexes)
        .enumerate()
        .map(|(ti, (name, parts))| {
            let partition_responses = parts
                .into_iter()
                .enumerate()
                .map(|(pi, index)| {
                    let r = results.remove(&(ti, pi)).unwrap_or_else(|| {
                        PartitionProduceResult::error(ResponseError::UnknownServerError, None)
                    });
                    let mut resp = PartitionProduceResponse::default()
                        .with_index(index)
                        .with_error_code(r.error_code)
                        .with_base_offset(r.base_offset);
                    if version >= 2 {
                        resp.log_append_time_ms = r.log_append_time_ms;
                    }
                    if version >= 5 {
                        resp.log_start_offset = r.log_start_offset;
                    }
                    if version >= 8 {
                        resp.error_message = r.error_message.map(str_bytes);
                        resp.record_errors = r
                            .record_errors
                            .into_iter()
                            .map(|(i, m)| {
                                BatchIndexAndErrorMessage::default()
                                    .with_batch_index(i)
                                    .with_batch_index_error_message(Some(str_bytes(m)))
                            })
                            .collect();
                    }
                    resp
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(crate::api::topic_name(&name))
                .with_partition_responses(partition_responses)
        })
        .collect();
    Some(ProduceResponse::default().with_responses(responses))
}
