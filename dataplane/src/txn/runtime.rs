//! The transaction coordinator at work on a shard: one [`TransactionCoordinator`] per
//! `__transaction_state` partition the shard owns, loaded from that partition's log, with
//! its effects applied (state records appended, COMMIT/ABORT markers written to the
//! partitions of a transaction) and its timeouts driven.
//!
//! A transactional id's requests may arrive on any shard; [`call_txn`] forwards them to
//! the shard owning its `__transaction_state` partition. Every coordinator call, the
//! appends of its records and the writing of its markers happen under one per-shard
//! permit, so records reach the log in the order the state machine produced them. A
//! request that ends a transaction is answered once its markers are written.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::state::{ProducerIdAllocator, TxnResponse};
use super::{
    AppendCompletion, Step, TransactionConfig, TransactionCoordinator, TxnLogAppend, TxnMarker,
    TRANSACTION_STATE_TOPIC,
};
use crate::api::errors::log_error_code;
use crate::coordinator_log::{self, CoordinatorLogError, CoordinatorSet, LogEntry};
use crate::group::runtime::OFFSETS_TOPIC;
use crate::log::AppendKind;
use crate::shard::{now_ms, ShardCtx, ShardReply, ShardRequest};
use crate::types::{ProducerId, TopicPartition};

/// How long a marker may wait for the ISR to have it.
const MARKER_ACK_TIMEOUT_MS: i32 = 30_000;

/// How often the runtime looks for leadership changes of its partitions.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// Runtime settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRuntimeConfig {
    pub coordinator: TransactionConfig,
    /// Partitions of `__transaction_state`.
    pub state_topic_partitions: i32,
    /// How often timed-out transactions are aborted and unwritten markers resent.
    pub cleanup_interval_ms: u64,
}

impl Default for TxnRuntimeConfig {
    fn default() -> Self {
        Self {
            coordinator: TransactionConfig::default(),
            state_topic_partitions: super::records::TRANSACTION_STATE_PARTITIONS_DEFAULT,
            cleanup_interval_ms: 10_000,
        }
    }
}

/// The outcome of a coordinator call: an immediate reply, or the answer that followed
/// the append it asked for (`None` when there was none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<R> {
    Reply(R),
    Completed(Option<TxnResponse>),
}

impl Answer<i16> {
    /// The error code of AddPartitionsToTxn, AddOffsetsToTxn or EndTxn.
    pub fn code(&self) -> i16 {
        match self {
            Answer::Reply(code) | Answer::Completed(Some(TxnResponse::ErrorCode(code))) => *code,
            _ => ResponseError::UnknownServerError.code(),
        }
    }
}

/// Hands out the one producer id allocated before the coordinator call.
#[derive(Debug)]
pub struct OneProducerId(pub Option<ProducerId>);

impl ProducerIdAllocator for OneProducerId {
    fn allocate(&mut self) -> Result<ProducerId, i16> {
        self.0
            .take()
            .ok_or(ResponseError::CoordinatorLoadInProgress.code())
    }
}

/// One shard's transaction coordinators.
pub struct TxnRuntime {
    config: TxnRuntimeConfig,
    coordinators: CoordinatorSet<TransactionCoordinator>,
    /// Set at shutdown: new calls are refused.
    closing: Cell<bool>,
    /// Connections to other brokers for their partitions' markers (WriteTxnMarkers) and
    /// for transaction verification, by node id; one is taken out while in use.
    marker_links:
        std::cell::RefCell<std::collections::HashMap<i32, crate::client::KafkaConnection>>,
}

impl std::fmt::Debug for TxnRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnRuntime")
            .field("config", &self.config)
            .field(
                "loaded",
                &self.coordinators.borrow().keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn coordinator_not_available() -> i16 {
    ResponseError::CoordinatorNotAvailable.code()
}

/// Work left after an append: markers to write and records to append, in order.
#[derive(Default)]
struct Work {
    markers: VecDeque<TxnMarker>,
    appends: VecDeque<TxnLogAppend>,
}

impl Work {
    fn add(&mut self, completion: AppendCompletion) -> Option<TxnResponse> {
        self.markers.extend(completion.markers);
        self.appends.extend(completion.next_append);
        completion.response
    }
}

impl TxnRuntime {
    pub fn new(config: TxnRuntimeConfig) -> Rc<TxnRuntime> {
        Rc::new(TxnRuntime {
            config,
            coordinators: CoordinatorSet::default(),
            closing: Cell::new(false),
            marker_links: Default::default(),
        })
    }

    pub fn config(&self) -> &TxnRuntimeConfig {
        &self.config
    }

    /// The `__transaction_state` partition of `transactional_id`.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        super::partition_for(transactional_id, self.config.state_topic_partitions.max(1))
    }

    /// This shard's connection to broker `node` for transaction traffic (markers,
    /// verification), taken out while a request is on it: the cached one, or a new one.
    pub(crate) async fn take_link(
        &self,
        image: &crate::metadata::MetadataImage,
        node: i32,
    ) -> Result<crate::client::KafkaConnection, String> {
        let cached = self.marker_links.borrow_mut().remove(&node);
        if let Some(c) = cached.filter(|c| !c.is_broken()) {
            return Ok(c);
        }
        let addr = image
            .broker_address(node)
            .ok_or_else(|| format!("broker {node} is not known"))?;
        let config = crate::client::ConnectionConfig {
            client_id: format!("twinlog-txn-{}", image.node_id),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            response_bytes_max: 1 << 20,
            security: crate::client::security::inter_broker(),
        };
        crate::client::KafkaConnection::connect_with(&addr.to_string(), &config)
            .await
            .map_err(|e| format!("connecting to broker {node}: {e}"))
    }

    /// Gives back a connection [`take_link`](Self::take_link) took.
    pub(crate) fn put_link(&self, node: i32, conn: crate::client::KafkaConnection) {
        self.marker_links.borrow_mut().insert(node, conn);
    }

    /// The partitions loaded here.
    pub fn loaded_partitions(&self) -> Vec<i32> {
        self.coordinators.partitions()
    }

    /// Loads the coordinator of `partition` unless it is loaded already.
    pub async fn ensure_loaded(&self, ctx: &Rc<ShardCtx>, partition: i32) -> Result<(), i16> {
        self.unload_stale(ctx, Some(partition));
        if self.coordinators.is_loaded(partition) {
            return Ok(());
        }
        let _permit = self.coordinators.permit().await?;
        self.load_locked(ctx, partition).await
    }

    /// Unloads the coordinators of partitions this node no longer leads at the epoch
    /// they were loaded at (the new leader loads them from the log, with the markers
    /// still to write).
    fn unload_stale(&self, ctx: &ShardCtx, only: Option<i32>) {
        for (partition, _) in self
            .coordinators
            .take_stale(ctx, TRANSACTION_STATE_TOPIC, only)
        {
            tracing::info!(
                partition,
                "transaction coordinator unloaded: this broker no longer leads its partition"
            );
        }
    }

    async fn load_locked(&self, ctx: &Rc<ShardCtx>, partition: i32) -> Result<(), i16> {
        self.unload_stale(ctx, Some(partition));
        if self.coordinators.is_loaded(partition) {
            return Ok(());
        }
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC.to_string(), partition);
        // The coordinator lives on the partition's leader; its epoch fences the markers.
        let Some(coordinator_epoch) = coordinator_log::led_epoch(ctx, &tp) else {
            return Err(ResponseError::NotCoordinator.code());
        };
        let entries: Vec<(Bytes, Option<Bytes>)> = coordinator_log::replay(ctx, &tp)
            .await
            .map_err(|_| coordinator_not_available())?
            .into_iter()
            .filter_map(|e| match e {
                LogEntry::Record { key, value, .. } => Some((key, value)),
                LogEntry::Marker { .. } => None,
            })
            .collect();
        let count = entries.len();
        let (coordinator, outcome) = TransactionCoordinator::load(
            self.config.coordinator.clone(),
            coordinator_epoch,
            entries,
            now_ms(),
        );
        if count > 0 {
            tracing::info!(
                %tp,
                records = count,
                skipped = outcome.skipped_records,
                "transaction coordinator loaded"
            );
        } else {
            tracing::debug!(%tp, "transaction coordinator loaded (empty)");
        }
        self.coordinators
            .insert(partition, coordinator, coordinator_epoch);
        let mut work = Work {
            markers: outcome.markers.into(),
            appends: outcome.appends.into(),
        };
        self.drive(ctx, partition, &mut work).await;
        Ok(())
    }

    /// Calls the coordinator of `partition`; when it asks for an append, appends the
    /// record, writes the markers that follow and appends the completion records, then
    /// answers. `Err`: a Kafka error code (coordinator not available).
    pub async fn call<R>(
        &self,
        ctx: &Rc<ShardCtx>,
        partition: i32,
        f: impl FnOnce(&mut TransactionCoordinator, i64) -> Step<R>,
    ) -> Result<Answer<R>, i16> {
        if self.closing.get() {
            return Err(ResponseError::NotCoordinator.code());
        }
        let _permit = self.coordinators.permit().await?;
        self.load_locked(ctx, partition).await?;
        let step = {
            let mut all = self.coordinators.borrow_mut();
            let coordinator = all
                .get_mut(&partition)
                .ok_or_else(coordinator_not_available)?;
            f(coordinator, now_ms())
        };
        match step {
            Step::Reply(r) => Ok(Answer::Reply(r)),
            Step::Append(append) => {
                let mut work = Work::default();
                let response = self
                    .append_and_complete(ctx, partition, &append, &mut work)
                    .await;
                self.drive(ctx, partition, &mut work).await;
                Ok(Answer::Completed(response))
            }
        }
    }

    /// Appends `append` and reports the outcome to the coordinator.
    async fn append_and_complete(
        &self,
        ctx: &Rc<ShardCtx>,
        partition: i32,
        append: &TxnLogAppend,
        work: &mut Work,
    ) -> Option<TxnResponse> {
        let result = self.append_record(ctx, partition, append).await;
        let completion = {
            let mut all = self.coordinators.borrow_mut();
            let coordinator = all.get_mut(&partition)?;
            coordinator.append_completed(&append.transactional_id, append.seq, result, now_ms())
        };
        work.add(completion)
    }

    /// Writes markers and appends records until nothing is left (a failed marker stays
    /// unwritten and is resent by the timer task).
    async fn drive(&self, ctx: &Rc<ShardCtx>, partition: i32, work: &mut Work) {
        loop {
            if let Some(marker) = work.markers.pop_front() {
                match write_marker(ctx, &marker).await {
                    Ok(()) => {
                        let next = self
                            .coordinators
                            .borrow_mut()
                            .get_mut(&partition)
                            .and_then(|c| c.marker_written(&marker));
                        work.appends.extend(next);
                    }
                    Err(code) => tracing::warn!(
                        tp = %marker.topic_partition,
                        transactional_id = %marker.transactional_id,
                        code,
                        "cannot write transaction marker; will retry"
                    ),
                }
                continue;
            }
            if let Some(append) = work.appends.pop_front() {
                let _ = self
                    .append_and_complete(ctx, partition, &append, work)
                    .await;
                continue;
            }
            break;
        }
    }

    async fn append_record(
        &self,
        ctx: &Rc<ShardCtx>,
        partition: i32,
        append: &TxnLogAppend,
    ) -> Result<(), i16> {
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC.to_string(), partition);
        let batch = coordinator_log::batch_of([(append.key.as_ref(), Some(append.value.as_ref()))]);
        match coordinator_log::append(ctx, &tp, batch).await {
            Ok(_) => Ok(()),
            Err(CoordinatorLogError::Log { error_code, .. }) => Err(error_code),
            Err(_) => Err(ResponseError::NotLeaderOrFollower.code()),
        }
    }

    /// Aborts timed-out transactions and resends unwritten markers of every loaded
    /// coordinator.
    async fn cleanup(&self, ctx: &Rc<ShardCtx>) {
        let Ok(_permit) = self.coordinators.permit().await else {
            return;
        };
        let partitions = self.loaded_partitions();
        for p in partitions {
            let mut work = Work::default();
            {
                let mut all = self.coordinators.borrow_mut();
                let Some(c) = all.get_mut(&p) else { continue };
                work.markers.extend(c.unwritten_markers());
                work.appends.extend(c.tick(now_ms()));
            }
            self.drive(ctx, p, &mut work).await;
        }
    }

    /// At shutdown: refuses further calls.
    pub fn shutdown(&self) {
        self.closing.set(true);
    }

    /// Follows leadership (unloads the coordinators of partitions this node stopped
    /// leading, loads those this shard now leads, every [`FOLLOW_EVERY`]) and aborts
    /// timed-out transactions every cleanup interval, until the shard stops.
    pub async fn run(self: Rc<Self>, ctx: Rc<ShardCtx>) {
        let every = Duration::from_millis(self.config.cleanup_interval_ms.max(10));
        let mut cleaned_at = std::time::Instant::now();
        loop {
            self.unload_stale(&ctx, None);
            self.load_owned(&ctx).await;
            if self.closing.get() {
                return;
            }
            if cleaned_at.elapsed() >= every {
                cleaned_at = std::time::Instant::now();
                self.cleanup(&ctx).await;
            }
            glommio::timer::sleep(every.min(FOLLOW_EVERY)).await;
        }
    }

    /// Loads the coordinators of the `__transaction_state` partitions this shard holds
    /// and leads.
    async fn load_owned(&self, ctx: &Rc<ShardCtx>) {
        for p in self.coordinators.to_load(ctx, TRANSACTION_STATE_TOPIC) {
            if let Err(code) = self.ensure_loaded(ctx, p).await {
                tracing::debug!(partition = p, code, "transaction coordinator not loaded");
            }
        }
    }
}

/// Writes `marker` to its partition on the owning shard; for a `__consumer_offsets`
/// partition the group coordinator then completes the transaction's pending offsets.
/// A partition that no longer exists counts as written.
async fn write_marker(ctx: &Rc<ShardCtx>, marker: &TxnMarker) -> Result<(), i16> {
    let image = ctx.metadata.load();
    let Some(pim) = image.partition(&marker.topic_partition) else {
        tracing::info!(tp = %marker.topic_partition, "marker for a deleted partition skipped");
        return Ok(());
    };
    if pim.leader != image.node_id {
        // Another broker leads the partition: Kafka's inter-broker WriteTxnMarkers.
        return Box::pin(write_marker_remote(ctx, &image, pim.leader, marker)).await;
    }
    let request = ShardRequest::WriteTxnMarker {
        marker: marker.clone(),
    };
    // Boxed: a marker is written from inside a coordinator call that a shard request
    // started, so the request future would otherwise contain itself.
    match Box::pin(ctx.ask(pim.shard, request)).await {
        Ok(ShardReply::Marker(written)) => written,
        _ => Err(coordinator_not_available()),
    }
}

/// Sends `marker` to `leader` (WriteTxnMarkers v1) over this runtime's connection to
/// it, and answers the partition's error code. No leader, or no connection: the marker
/// stays unwritten and the timer task resends it.
async fn write_marker_remote(
    ctx: &Rc<ShardCtx>,
    image: &crate::metadata::MetadataImage,
    leader: i32,
    marker: &TxnMarker,
) -> Result<(), i16> {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use kafka_protocol::messages::WriteTxnMarkersRequest;
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let rt = ctx.txn_runtime().ok_or_else(coordinator_not_available)?;
    let mut conn = rt.take_link(image, leader).await.map_err(|_| not_leader)?;
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(kafka_protocol::messages::ProducerId(marker.producer_id.0))
            .with_producer_epoch(marker.producer_epoch.0)
            .with_transaction_result(marker.commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(crate::api::topic_name(&marker.topic_partition.topic))
                .with_partition_indexes(vec![marker.topic_partition.partition])])]);
    let answer = conn.send(&request, 1).await;
    if !conn.is_broken() {
        rt.put_link(leader, conn);
    }
    let response = answer.map_err(|_| not_leader)?;
    let code = response
        .markers
        .first()
        .and_then(|m| m.topics.first())
        .and_then(|t| t.partitions.first())
        .map_or(not_leader, |p| p.error_code);
    if code == 0 {
        Ok(())
    } else {
        Err(code)
    }
}

/// Writes `marker` on the shard that owns its partition (WriteTxnMarkers for one
/// partition); for a `__consumer_offsets` partition the group coordinator then
/// completes the transaction's pending offsets.
pub(crate) async fn write_marker_on_owner(
    ctx: &Rc<ShardCtx>,
    marker: TxnMarker,
) -> Result<(), i16> {
    let tp = marker.topic_partition.clone();
    let owned = ctx
        .partition(&tp)
        .filter(|p| p.is_leader())
        .ok_or(ResponseError::NotLeaderOrFollower.code())?;
    let now = now_ms();
    let end = {
        let mut log = owned
            .write()
            .await
            .map_err(|_| ResponseError::NotLeaderOrFollower.code())?;
        // A mirrored partition takes no leader append but the STOPPING reset (reference
        // §6.8): a marker there would shift its offsets against the source's for good.
        // AddPartitionsToTxn refuses such partitions; this covers one added before its
        // topic joined a mirror. Its data was refused too, so the marker has nothing to
        // end: it counts as written.
        if let Some(reason) = crate::api::produce::read_only_reason(ctx, &tp) {
            tracing::warn!(%tp, %reason, commit = marker.commit, "transaction marker not written into a read-only mirror partition");
            return Ok(());
        }
        let epoch = owned.leader_epoch();
        if let Err(e) = log
            .append_as_leader(marker.batch(now), epoch, AppendKind::Coordinator, now)
            .await
        {
            tracing::warn!(%tp, error = %e, "cannot append transaction marker");
            return Err(log_error_code(&e));
        }
        log.log_end_offset()
    };
    // As Kafka writes markers with acks=all: the marker counts once the ISR has it.
    crate::api::produce::wait_for_isr(&owned, end, 1, MARKER_ACK_TIMEOUT_MS)
        .await
        .map_err(|(e, message)| {
            tracing::warn!(%tp, %message, "transaction marker not replicated");
            e.code()
        })?;
    if tp.topic == OFFSETS_TOPIC {
        let rt = ctx.group_runtime().ok_or_else(coordinator_not_available)?;
        let (pid, commit, p) = (marker.producer_id, marker.commit, tp.partition);
        rt.call(ctx, p, move |c, now| {
            ((), c.complete_txn(pid, &[p], commit, now))
        })
        .await?;
    }
    Ok(())
}

/// A request to a transaction coordinator, as it travels to the shard that holds it.
#[derive(Debug, Clone)]
pub enum TxnCall {
    InitProducerId(super::InitProducerIdRequest),
    AddPartitions(super::AddPartitionsToTxnRequest),
    /// AddOffsetsToTxn; `offsets_partitions` places the group's offsets partition.
    AddOffsets {
        add: super::AddOffsetsToTxnRequest,
        offsets_partitions: i32,
    },
    EndTxn(super::EndTxnRequest),
    Describe(String),
}

/// A transaction coordinator's answer to a [`TxnCall`].
#[derive(Debug)]
pub enum TxnAnswer {
    /// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn.
    Code(Answer<i16>),
    ProducerId(Answer<super::InitProducerIdResponse>),
    Described(Option<super::state::TxnDescription>),
}

/// ListTransactions: (transactional id, producer id, state, start timestamp).
pub type ListedTransaction = (String, i64, super::TxnState, i64);

crate::coordinator_log::answer_carries! {
    TxnAnswer, "transaction";
    Code => Answer<i16>,
    ProducerId => Answer<super::InitProducerIdResponse>,
    Described => Option<super::state::TxnDescription>,
}

impl TxnRuntime {
    /// Carries `call` out against the coordinator of `partition` on this shard.
    pub async fn serve(
        &self,
        ctx: &Rc<ShardCtx>,
        partition: i32,
        call: TxnCall,
    ) -> Result<TxnAnswer, i16> {
        match call {
            TxnCall::InitProducerId(req) => {
                // The coordinator allocates synchronously: take an id beforehand (an
                // unused one is simply skipped).
                let id = ctx.next_producer_id().await?;
                let mut ids = OneProducerId(Some(ProducerId(id)));
                self.call(ctx, partition, |c, now| {
                    c.init_producer_id(&req, &mut ids, now)
                })
                .await
                .map(TxnAnswer::ProducerId)
            }
            TxnCall::AddPartitions(add) => self
                .call(ctx, partition, |c, now| c.add_partitions_to_txn(&add, now))
                .await
                .map(TxnAnswer::Code),
            TxnCall::AddOffsets {
                add,
                offsets_partitions,
            } => self
                .call(ctx, partition, |c, now| {
                    c.add_offsets_to_txn(
                        &add,
                        |group| crate::group::partition_for(group, offsets_partitions),
                        now,
                    )
                })
                .await
                .map(TxnAnswer::Code),
            TxnCall::EndTxn(end) => self
                .call(ctx, partition, |c, now| c.end_txn(&end, now))
                .await
                .map(TxnAnswer::Code),
            TxnCall::Describe(id) => {
                match self
                    .call(ctx, partition, move |c, _| Step::Reply(c.describe(&id)))
                    .await?
                {
                    Answer::Reply(d) => Ok(TxnAnswer::Described(d)),
                    Answer::Completed(_) => Err(ResponseError::UnknownServerError.code()),
                }
            }
        }
    }

    /// ListTransactions on this shard: the transactional ids of the
    /// `__transaction_state` partitions it owns.
    pub async fn list_transactions(&self, ctx: &Rc<ShardCtx>) -> Vec<ListedTransaction> {
        let image = ctx.metadata.load();
        let Some(topic) = image.topics.get(TRANSACTION_STATE_TOPIC) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (index, p) in topic.partitions.iter().enumerate() {
            if p.shard != ctx.id {
                continue;
            }
            let listed = self
                .call(ctx, index as i32, |c, _| Step::Reply(c.list()))
                .await;
            if let Ok(Answer::Reply(list)) = listed {
                out.extend(
                    list.into_iter()
                        .map(|(id, d)| (id, d.producer_id.0, d.state, d.start_timestamp_ms)),
                );
            }
        }
        out
    }
}

/// Sends `call` to the shard owning `transactional_id`'s coordinator, for the id's
/// `__transaction_state` partition, and returns the answer's value. `Err`: a Kafka
/// error code.
pub async fn call_txn<T: TryFrom<TxnAnswer, Error = i16>>(
    ctx: &Rc<ShardCtx>,
    transactional_id: &str,
    call: TxnCall,
) -> Result<T, i16> {
    let runtime = ctx.txn_runtime().ok_or_else(coordinator_not_available)?;
    let image = ctx.metadata.load();
    let topic = image
        .topics
        .get(TRANSACTION_STATE_TOPIC)
        .ok_or_else(coordinator_not_available)?;
    let partition = runtime.partition_for(transactional_id);
    let shard = topic
        .partitions
        .get(partition as usize)
        .ok_or_else(coordinator_not_available)?
        .shard;
    match ctx.ask(shard, ShardRequest::Txn { partition, call }).await {
        Ok(ShardReply::Txn(answer)) => T::try_from(answer?),
        _ => Err(coordinator_not_available()),
    }
}

/// ListTransactions across every shard.
pub async fn list_all_transactions(ctx: &Rc<ShardCtx>) -> Vec<ListedTransaction> {
    let mut out = Vec::new();
    for shard in 0..ctx.router.shard_count() {
        if let Ok(ShardReply::Transactions(listed)) =
            ctx.ask(shard, ShardRequest::ListTransactions).await
        {
            out.extend(listed);
        }
    }
    out
}
