//! Produce (0). Partitions are grouped by owning shard; each shard appends its
//! partitions' record sets (the very `Bytes` decoded off the socket) and the answers
//! are merged back in request order. acks=0 gets no response; acks=1 answers after the
//! leader's append; acks=-1 (all) needs `min.insync.replicas` in-sync replicas before
//! the append (NOT_ENOUGH_REPLICAS) and answers once the high watermark covers the
//! records (Kafka's delayed produce, waiting on the partition's own signal), with
//! NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below it meanwhile and
//! REQUEST_TIMED_OUT after the request's timeout. Alone in its ISR, the high watermark
//! is the log end as soon as the append is done, so acks=-1 costs nothing more.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;

use crate::api::errors::log_error_code;
use crate::api::str_bytes;
use crate::log::validate::ValidateError;
use crate::log::{AppendKind, LogError};
use crate::shard::{now_ms, ShardCtx, ShardReply, ShardRequest};
use crate::types::{Offset, TopicPartition};

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

    /// A set whose answer went missing (no path leaves one out; answered, not lost).
    pub fn lost() -> Self {
        PartitionProduceResult::error(ResponseError::UnknownServerError, None)
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

/// KIP-890 verification (`txn/verify.rs`) of a transactional batch that would open a
/// transaction in `tp`: its producer has no open transaction here at that epoch yet.
async fn verify_opening(
    ctx: &Rc<ShardCtx>,
    partition: &crate::partition::Partition,
    tp: &TopicPartition,
    records: &Bytes,
    transactional_id: &str,
) -> Result<(), crate::txn::verify::Refusal> {
    let Some(Ok(first)) = crate::wire::BatchIter::new(records.clone(), 0, false).next() else {
        return Ok(());
    };
    if !first.is_transactional() || first.is_control() {
        return Ok(());
    }
    let (pid, epoch) = (first.producer_id(), first.producer_epoch());
    let open = match partition.read().await {
        Ok(log) => log
            .producer_state()
            .last_entry(pid)
            .is_some_and(|e| e.current_txn_first_offset.is_some() && e.producer_epoch == epoch),
        Err(_) => return Ok(()),
    };
    if open {
        return Ok(());
    }
    crate::txn::verify::verify(ctx, transactional_id, pid, epoch, tp).await
}

/// The error code for a produce [`read_only_reason`] refuses: READ_ONLY_TOPIC, except
/// for a partition being failed over whose gate this leader has not set yet (just
/// elected): LEADER_NOT_AVAILABLE, which clients retry, so a failed-over partition that
/// changes leader does not fail its producers for the moment the new leader's mirror
/// manager takes to open the gate.
fn read_only_code(ctx: &ShardCtx, tp: &TopicPartition) -> i16 {
    let image = ctx.metadata.load();
    let stopping = image
        .topic(&tp.topic)
        .and_then(|t| t.mirror())
        .is_some_and(|(_, d)| d == crate::wire::mirror::DesiredMirrorState::Stopped);
    let gate_unset = ctx.partition(tp).is_some_and(|p| p.mirror_gate().is_none());
    if stopping && gate_unset {
        ResponseError::LeaderNotAvailable.code()
    } else {
        crate::wire::mirror::errors::READ_ONLY_TOPIC
    }
}

/// One produce request's record set for one partition, with that request's terms.
#[derive(Debug, Clone)]
pub struct ProduceSet {
    pub tp: TopicPartition,
    pub records: Option<Bytes>,
    pub acks: i16,
    pub timeout_ms: i32,
    pub transactional_id: Option<Arc<str>>,
}

/// Appends record sets of one partition on its owning shard, in order: the sets of
/// produce requests pipelined on one connection go into the log as one write when they
/// can (group commit, [`crate::log::PartitionLog::append_sets_as_leader`]). A set with
/// `acks` = -1 then waits (at most its `timeout_ms`) until the ISR has it.
pub async fn append_sets_on_owner(
    ctx: Rc<ShardCtx>,
    tp: TopicPartition,
    sets: Vec<ProduceSet>,
) -> Vec<PartitionProduceResult> {
    let mut results: Vec<Option<PartitionProduceResult>> = sets.iter().map(|_| None).collect();
    let Some(partition) = ctx.partition(&tp) else {
        return answer_rest(
            results,
            PartitionProduceResult::error(ResponseError::NotLeaderOrFollower, None),
        );
    };
    for (set, slot) in sets.iter().zip(results.iter_mut()) {
        let Some(records) = set.records.as_ref().filter(|r| !r.is_empty()) else {
            *slot = Some(PartitionProduceResult::error(
                ResponseError::InvalidRecord,
                Some("empty record set".into()),
            ));
            continue;
        };
        if let Some(id) = &set.transactional_id {
            if let Err((code, message)) = verify_opening(&ctx, &partition, &tp, records, id).await {
                *slot = Some(PartitionProduceResult {
                    error_code: code,
                    error_message: Some(message),
                    ..PartitionProduceResult::empty()
                });
            }
        }
    }
    let Ok(mut log) = partition.write().await else {
        return answer_rest(
            results,
            PartitionProduceResult::error(ResponseError::NotLeaderOrFollower, None),
        );
    };
    if !partition.is_leader() {
        return answer_rest(
            results,
            PartitionProduceResult::error(ResponseError::NotLeaderOrFollower, None),
        );
    }
    let min_isr = log.config().min_insync_replicas.max(1) as usize;
    let isr = partition.leadership().isr.len();
    for (set, slot) in sets.iter().zip(results.iter_mut()) {
        if set.acks == -1 && isr < min_isr && slot.is_none() {
            *slot = Some(PartitionProduceResult::error(
                ResponseError::NotEnoughReplicas,
                Some(format!(
                    "{tp} has {isr} in-sync replicas; min.insync.replicas is {min_isr}"
                )),
            ));
        }
    }
    // Checked under the log lock (audit B-14): a produce that waited for the lock while
    // a mirror's PREPARING truncated the log must not append after it.
    if let Some(message) = read_only_reason(&ctx, &tp) {
        return answer_rest(
            results,
            PartitionProduceResult {
                error_code: read_only_code(&ctx, &tp),
                error_message: Some(message),
                ..PartitionProduceResult::empty()
            },
        );
    }
    let todo: Vec<usize> = (0..sets.len()).filter(|&i| results[i].is_none()).collect();
    let records = todo
        .iter()
        .filter_map(|&i| sets[i].records.clone())
        .collect();
    let outcomes = log
        .append_sets_as_leader(
            records,
            partition.leader_epoch(),
            AppendKind::Client,
            now_ms(),
        )
        .await;
    let mut waits = Vec::new();
    for (&i, outcome) in todo.iter().zip(outcomes) {
        results[i] = Some(match outcome {
            Ok(info) => {
                if sets[i].acks == -1 {
                    waits.push((i, Offset(info.last_offset.0 + 1)));
                }
                PartitionProduceResult {
                    error_code: 0,
                    error_message: None,
                    base_offset: info.first_offset.0,
                    log_start_offset: info.log_start_offset.0,
                    log_append_time_ms: info.log_append_time_ms,
                    record_errors: Vec::new(),
                }
            }
            Err(e) => rejected(&tp, &e, log.log_start_offset().0),
        });
    }
    // The writer's drop moves the high watermark as far as the ISR allows.
    drop(log);
    let waited = futures::future::join_all(waits.into_iter().map(|(i, needed)| {
        let partition = &partition;
        let timeout_ms = sets[i].timeout_ms;
        async move {
            (
                i,
                wait_for_isr(partition, needed, min_isr, timeout_ms).await,
            )
        }
    }))
    .await;
    for (i, outcome) in waited {
        if let (Err((code, message)), Some(r)) = (outcome, results[i].as_mut()) {
            r.error_code = code.code();
            r.error_message = Some(message);
        }
    }
    answer_rest(results, PartitionProduceResult::lost())
}

/// The answers of `results`, `rest` for every set not answered yet.
fn answer_rest(
    results: Vec<Option<PartitionProduceResult>>,
    rest: PartitionProduceResult,
) -> Vec<PartitionProduceResult> {
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| rest.clone()))
        .collect()
}

/// The answer to a record set the log refused.
fn rejected(tp: &TopicPartition, e: &LogError, log_start_offset: i64) -> PartitionProduceResult {
    tracing::info!(%tp, error = %e, "produce rejected");
    let (message, record_errors) = match e {
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
        error_code: log_error_code(e),
        error_message: Some(message),
        log_start_offset,
        record_errors,
        ..PartitionProduceResult::empty()
    }
}

/// Kafka's delayed produce: waits until the high watermark reaches `needed` (the ISR
/// has every record below it), this broker stops leading, or `timeout_ms` passes.
pub(crate) async fn wait_for_isr(
    partition: &crate::partition::Partition,
    needed: crate::types::Offset,
    min_isr: usize,
    timeout_ms: i32,
) -> Result<(), (ResponseError, String)> {
    let deadline =
        std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms.max(0) as u64);
    let tp = partition.topic_partition().clone();
    loop {
        let listener = partition.listen();
        if !partition.is_leader() {
            return Err((
                ResponseError::NotLeaderOrFollower,
                format!("this broker stopped leading {tp} before the ISR had the records"),
            ));
        }
        let hw = match partition.read().await {
            Ok(log) => log.high_watermark(),
            Err(_) => {
                return Err((
                    ResponseError::NotLeaderOrFollower,
                    format!("{tp} was closed"),
                ))
            }
        };
        if hw >= needed {
            let isr = partition.leadership().isr.len();
            if isr < min_isr {
                return Err((
                    ResponseError::NotEnoughReplicasAfterAppend,
                    format!("{tp} has {isr} in-sync replicas after the append; min.insync.replicas is {min_isr}"),
                ));
            }
            return Ok(());
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err((
                ResponseError::RequestTimedOut,
                format!("the ISR of {tp} did not reach offset {} in time", needed.0),
            ));
        }
        // Leadership changes move nothing the listener sees: look again at least every
        // 100 ms.
        let wait = left.min(std::time::Duration::from_millis(100));
        futures_lite::future::or(
            async {
                listener.await;
            },
            glommio::timer::sleep(wait),
        )
        .await;
    }
}

/// Where a partition's answer goes: (request, topic index, partition index).
type Slot = (usize, usize, usize);

/// Produce, one request.
pub async fn handle(
    ctx: &Rc<ShardCtx>,
    listener: &str,
    request: ProduceRequest,
    version: i16,
) -> Option<ProduceResponse> {
    handle_group(ctx, listener, vec![(request, version)])
        .await
        .pop()
        .flatten()
}

/// Produce requests pipelined on one connection, answered in their order (`None`:
/// acks=0, no answer). Every partition's record sets, from all of them, go to its
/// owning shard in one message, in request order, and are appended there together.
pub async fn handle_group(
    ctx: &Rc<ShardCtx>,
    listener: &str,
    requests: Vec<(ProduceRequest, i16)>,
) -> Vec<Option<ProduceResponse>> {
    let image = ctx.metadata.load();
    let mut results: BTreeMap<Slot, PartitionProduceResult> = BTreeMap::new();
    let mut per_shard: BTreeMap<usize, Vec<(Slot, ProduceSet)>> = BTreeMap::new();
    // Per request: its acks and version, and per topic its name and partition indexes.
    let mut shapes = Vec::with_capacity(requests.len());
    for (ri, (request, version)) in requests.into_iter().enumerate() {
        let (acks, timeout_ms) = (request.acks, request.timeout_ms);
        let transactional_id: Option<Arc<str>> = request
            .transactional_id
            .as_ref()
            .map(|t| Arc::from(t.0.as_str()));
        let mut topics = Vec::with_capacity(request.topic_data.len());
        for (ti, topic) in request.topic_data.into_iter().enumerate() {
            let name = topic.name.0.to_string();
            let mut parts = Vec::with_capacity(topic.partition_data.len());
            for (pi, p) in topic.partition_data.into_iter().enumerate() {
                parts.push(p.index);
                let tp = TopicPartition::new(name.clone(), p.index);
                match image.partition(&tp) {
                    Some(pim) => per_shard.entry(pim.shard).or_default().push((
                        (ri, ti, pi),
                        ProduceSet {
                            tp,
                            records: p.records,
                            acks,
                            timeout_ms,
                            transactional_id: transactional_id.clone(),
                        },
                    )),
                    None => {
                        results.insert(
                            (ri, ti, pi),
                            PartitionProduceResult::error(
                                ResponseError::UnknownTopicOrPartition,
                                None,
                            ),
                        );
                    }
                }
            }
            topics.push((name, parts));
        }
        shapes.push((acks, version, topics));
    }
    let jobs = per_shard.into_iter().map(|(shard, work)| {
        let ctx = Rc::clone(ctx);
        async move {
            let (slots, sets): (Vec<Slot>, Vec<ProduceSet>) = work.into_iter().unzip();
            match ctx.ask(shard, ShardRequest::Produce { sets }).await {
                Ok(ShardReply::Produced(out)) => slots.into_iter().zip(out).collect::<Vec<_>>(),
                _ => slots
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
    // KIP-951: NOT_LEADER_OR_FOLLOWER answers name the current leader and where it is.
    let image = ctx.metadata.load();
    shapes
        .into_iter()
        .enumerate()
        .map(|(ri, (acks, version, topics))| {
            (acks != 0).then(|| {
                response(&image, listener, version, topics, |ti, pi| {
                    results
                        .remove(&(ri, ti, pi))
                        .unwrap_or_else(PartitionProduceResult::lost)
                })
            })
        })
        .collect()
}

/// One request's answer: `topics` (name, partition indexes) with each partition's
/// result from `result(topic index, partition index)`.
fn response(
    image: &crate::metadata::MetadataImage,
    listener: &str,
    version: i16,
    topics: Vec<(String, Vec<i32>)>,
    mut result: impl FnMut(usize, usize) -> PartitionProduceResult,
) -> ProduceResponse {
    let mut endpoints: std::collections::BTreeSet<i32> = Default::default();
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let responses = topics
        .into_iter()
        .enumerate()
        .map(|(ti, (name, parts))| {
            let partition_responses = parts
                .into_iter()
                .enumerate()
                .map(|(pi, index)| {
                    let r = result(ti, pi);
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
                    if version >= 10 && r.error_code == not_leader {
                        let tp = TopicPartition::new(name.clone(), index);
                        if let Some(p) = image.partition(&tp).filter(|p| p.leader >= 0) {
                            resp.current_leader = LeaderIdAndEpoch::default()
                                .with_leader_id(BrokerId(p.leader))
                                .with_leader_epoch(p.leader_epoch);
                            endpoints.insert(p.leader);
                        }
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
    let mut response = ProduceResponse::default().with_responses(responses);
    if version >= 10 {
        response.node_endpoints = image
            .endpoints(endpoints, listener)
            .into_iter()
            .map(|(id, host, port, rack)| {
                NodeEndpoint::default()
                    .with_node_id(BrokerId(id))
                    .with_host(str_bytes(host))
                    .with_port(port)
                    .with_rack(rack.map(str_bytes))
            })
            .collect();
    }
    response
}
