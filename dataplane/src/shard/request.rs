//! The typed requests other shards and threads send a shard about the partitions it
//! owns: a connection's shard (produce, fetch, offsets, DeleteRecords, producer and
//! log-dir descriptions, transaction markers), the controller (open, delete,
//! reconfigure, leader epochs), the mirror manager (gate, fetchers, PREPARING and
//! STOPPING steps, observation) and the `__mirror_state` coordinator (read, append).
//! Each is a plain value with a typed reply, so the set of things anyone else can make
//! a shard do to a partition is this enum and nothing else, and the same messages can
//! cross brokers once partitions live on other nodes (the cluster issue). The
//! in-process transport is [`ShardRouter::request`]; [`ShardCtx::ask`] serves a request
//! in place when the partition is on the asking shard.

use std::collections::HashMap;

use bytes::Bytes;

use super::{ShardCtx, ShardGone, ShardRouter};
use crate::fetcher::{self, MirrorFetchConfig, MirrorFetcherManager, MirrorPartitionStatus};
use crate::log::LogConfig;
use crate::types::TopicPartition;
use crate::wire::mirror::MirrorPartitionState;

/// A request to the shard that owns the partitions it names.
#[derive(Debug, Clone)]
pub enum ShardRequest {
    /// Open (create or recover) a partition's log.
    OpenPartition {
        tp: TopicPartition,
        topic_id: uuid::Uuid,
        config: LogConfig,
        leadership: crate::partition::Leadership,
    },
    /// The controller committed a new leader, leader epoch or ISR for the partition
    /// (Kafka's LeaderAndIsr: `makeLeader` / `makeFollower`): as leader, appends are
    /// stamped with the epoch from now on; as follower, it fetches from the leader.
    SetLeadership {
        tp: TopicPartition,
        leadership: crate::partition::Leadership,
    },
    /// Delete a partition: its fetcher first, then its log and directory.
    DeletePartition { tp: TopicPartition },
    /// A topic config change.
    UpdateConfig {
        tp: TopicPartition,
        config: LogConfig,
    },
    /// Where the shard's fetchers report partition failures (once, at start-up).
    SetMirrorEvents(async_channel::Sender<fetcher::MirrorEvent>),
    /// What the shard does for these mirror partitions: gate state, fetcher, progress;
    /// with `log_ends`, also each local log end (a read of the log: DescribeMirrors
    /// wants it, the reconciler's tick does not).
    ObserveMirrorPartitions {
        partitions: Vec<TopicPartition>,
        log_ends: bool,
    },
    /// Set the read-only gate; any state but MIRRORING also removes the fetcher.
    SetMirrorState {
        tp: TopicPartition,
        state: MirrorPartitionState,
    },
    /// MIRRORING: the gate, and the partition on the mirror's fetcher.
    StartMirrorFetch {
        tp: TopicPartition,
        config: MirrorFetchConfig,
    },
    /// The partition left its mirror: no fetcher, no gate.
    ForgetMirrorPartition { tp: TopicPartition },
    /// Every fetcher of a deleted mirror stops.
    StopMirrorFetchers { mirror: String },
    /// PREPARING's truncation for the (LME, LME offset) the source reported.
    PrepareMirrorPartition { tp: TopicPartition, lme: (i32, i64) },
    /// PREPARING's second phase: the replicas converge on the truncation.
    AwaitMirrorConvergence {
        tp: TopicPartition,
        convergence: fetcher::Convergence,
    },
    /// STOPPING step 2: the epoch to raise the partition's leader epoch above. Every
    /// STOPPING step names the mirror's source cluster: the MIRROR_PID_RESET naming it
    /// is this STOPPING's own (written here or by a leader before this one).
    StopEpochToExceed {
        tp: TopicPartition,
        source_cluster_id: String,
    },
    /// STOPPING step 3: truncation to the LSO; the LME to record.
    StopTruncate {
        tp: TopicPartition,
        source_cluster_id: String,
    },
    /// STOPPING step 5: the MIRROR_PID_RESET control batch, then the wait for the ISR.
    /// `sync_log`: fdatasync the partition's log after it; without, the caller makes
    /// the whole group's resets durable at once with [`ShardRequest::SyncFilesystem`].
    StopAppendPidReset {
        tp: TopicPartition,
        source_cluster_id: String,
        sync_log: bool,
    },
    /// `syncfs` of the filesystem holding the data directory: every append that
    /// completed before it is durable once it answers.
    SyncFilesystem,
    /// Every record of a partition from its log start (coordinator load): keys and
    /// values of the data batches, with the offset of each.
    ReadRecords { tp: TopicPartition },
    /// One batch appended at the partition's leader epoch, as the broker itself
    /// (coordinator records).
    AppendBatch { tp: TopicPartition, batch: Bytes },
    /// Produce: record sets appended as leader, each partition's in order and together
    /// (the sets of pipelined requests), different partitions concurrently.
    Produce {
        sets: Vec<crate::api::produce::ProduceSet>,
    },
    /// Fetch: each partition read from its position, with a listener taken before the
    /// read for the long poll.
    Fetch {
        partitions: Vec<crate::api::fetch::FetchPartition>,
        read_committed: bool,
    },
    /// ListOffsets for one partition.
    ListOffsets {
        tp: TopicPartition,
        timestamp: i64,
        current_leader_epoch: i32,
        read_committed: bool,
    },
    /// OffsetForLeaderEpoch for one partition.
    EpochEndOffset {
        tp: TopicPartition,
        leader_epoch: i32,
        current_leader_epoch: i32,
    },
    /// DeleteRecords: the log start moved up to `offset`.
    DeleteRecords { tp: TopicPartition, offset: i64 },
    /// DescribeProducers: the partition's producer state.
    DescribeProducers { tp: TopicPartition },
    /// Why a leader append to the partition would be refused now (AddPartitionsToTxn).
    ReadOnlyReason { tp: TopicPartition },
    /// DescribeLogDirs: each open partition's size on disk.
    LogSizes { partitions: Vec<TopicPartition> },
    /// A transaction's COMMIT or ABORT marker (WriteTxnMarkers), then, for a
    /// `__consumer_offsets` partition, the group coordinator's completion of the
    /// transaction's offsets.
    WriteTxnMarker {
        marker: crate::txn::state::TxnMarker,
    },
    /// A call to the group coordinator of a `__consumer_offsets` partition.
    Group {
        partition: i32,
        call: crate::group::runtime::GroupCall,
    },
    /// ListGroups: the groups of the shard's loaded coordinators.
    ListGroups { states: Vec<String> },
    /// A call to the transaction coordinator of a `__transaction_state` partition.
    Txn {
        partition: i32,
        call: crate::txn::runtime::TxnCall,
    },
    /// ListTransactions: the transactions of the shard's loaded coordinators.
    ListTransactions,
    /// Requests for partitions of this shard served concurrently, each with its own
    /// answer in [`ShardReply::Batch`]: one hop per shard for a step taken by many
    /// partitions at once (a failover's STOPPING), not one per partition.
    Batch(Vec<ShardRequest>),
}

/// How many requests of one [`ShardRequest::Batch`] a shard serves at once: enough to
/// overlap their fsyncs, few enough that the files they open stay far below the
/// descriptor limit (a failover's batch holds every partition of the shard).
const BATCH_IN_FLIGHT_MAX: usize = 256;

/// One answer of a [`ShardRequest::Batch`] in flight.
type BoxedAnswer<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ShardReply, ShardRequestError>> + 'a>,
>;

/// What a shard observes for one mirror partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorObservation {
    pub tp: TopicPartition,
    /// The gate's state (None: never set since the shard started).
    pub gate: Option<MirrorPartitionState>,
    /// The fetcher that holds it: its config and whether it fetched cleanly since.
    pub fetching: Option<(MirrorFetchConfig, bool)>,
    pub status: Option<MirrorPartitionStatus>,
    /// The local log end offset (-1: not open, or not asked for).
    pub log_end_offset: i64,
}

/// A record read back by [`ShardRequest::ReadRecords`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub offset: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// Why a shard could not carry a request out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardRequestError {
    #[error("partition {tp} is not open on shard {shard}")]
    NotOpen { tp: TopicPartition, shard: usize },
    #[error("{0}")]
    Partition(#[from] crate::partition::PartitionClosed),
    /// A log operation failed: the Kafka error code and the message.
    #[error("{message}")]
    Log { error_code: i16, message: String },
    #[error("{0}")]
    Step(String),
    #[error("{0}")]
    Gone(#[from] ShardGone),
}

impl From<crate::coordinator_log::CoordinatorLogError> for ShardRequestError {
    fn from(e: crate::coordinator_log::CoordinatorLogError) -> Self {
        use crate::coordinator_log::CoordinatorLogError as C;
        match e {
            C::NotOpen { tp, shard } => ShardRequestError::NotOpen { tp, shard },
            C::Closed(c) => ShardRequestError::Partition(c),
            C::Log {
                error_code,
                message,
                ..
            } => ShardRequestError::Log {
                error_code,
                message,
            },
            C::Unreplicated { message, .. } => ShardRequestError::Log {
                error_code: kafka_protocol::ResponseError::RequestTimedOut.code(),
                message,
            },
        }
    }
}

impl ShardRequestError {
    fn log(e: &crate::log::LogError) -> ShardRequestError {
        ShardRequestError::Log {
            error_code: crate::api::errors::log_error_code(e),
            message: e.to_string(),
        }
    }
}

/// The answer to a [`ShardRequest`].
#[derive(Debug)]
pub enum ShardReply {
    Done,
    Observed(Vec<MirrorObservation>),
    /// PREPARING: offsets discarded, and what the replicas must reach.
    Truncated(i64, fetcher::Convergence),
    /// STOPPING step 2.
    EpochToExceed(Option<i32>),
    /// STOPPING step 3: the LME and the log end that goes with it.
    Lme(Option<(i32, i64)>),
    Records(Vec<StoredRecord>),
    Produced(Vec<crate::api::produce::PartitionProduceResult>),
    Fetched(
        Vec<(
            crate::api::fetch::PartitionFetchResult,
            Option<event_listener::EventListener>,
        )>,
    ),
    /// ListOffsets: (error code, timestamp, offset, leader epoch).
    Offset(i16, i64, i64, i32),
    /// OffsetForLeaderEpoch: (error code, epoch, end offset).
    EpochEnd(i16, i32, i64),
    /// DeleteRecords: (error code, low watermark).
    LowWatermark(i16, i64),
    Producers(
        Result<Vec<kafka_protocol::messages::describe_producers_response::ProducerState>, i16>,
    ),
    ReadOnly(Option<String>),
    Sizes(Vec<(TopicPartition, i64)>),
    /// WriteTxnMarker: `Err` is the Kafka error code.
    Marker(Result<(), i16>),
    Group(Result<crate::group::runtime::GroupAnswer, i16>),
    Groups(Vec<crate::group::messages::ListedGroup>),
    Txn(Result<crate::txn::runtime::TxnAnswer, i16>),
    Transactions(Vec<crate::txn::runtime::ListedTransaction>),
    /// The answers to a [`ShardRequest::Batch`], in its order.
    Batch(Vec<Result<ShardReply, ShardRequestError>>),
}

impl ShardRouter {
    /// Sends `request` to `shard` and waits for its reply.
    pub async fn request(
        &self,
        shard: usize,
        request: ShardRequest,
    ) -> Result<ShardReply, ShardRequestError> {
        self.call(shard, move |ctx| async move { serve(&ctx, request).await })
            .await?
    }
}

impl ShardCtx {
    /// Sends `request` to `shard`, or serves it in place when that is this shard (no
    /// queue, no hop).
    pub async fn ask(
        self: &std::rc::Rc<Self>,
        shard: usize,
        request: ShardRequest,
    ) -> Result<ShardReply, ShardRequestError> {
        if shard == self.id {
            serve(self, request).await
        } else {
            self.router.request(shard, request).await
        }
    }
}

/// Sets the read-only gate of a partition this shard owns.
fn set_gate(
    ctx: &ShardCtx,
    tp: &TopicPartition,
    state: Option<MirrorPartitionState>,
) -> Result<(), ShardRequestError> {
    let p = ctx
        .partition(tp)
        .ok_or_else(|| ShardRequestError::NotOpen {
            tp: tp.clone(),
            shard: ctx.id,
        })?;
    p.set_mirror_gate(state);
    Ok(())
}

/// Carries a request out on the shard that received it.
pub async fn serve(
    ctx: &std::rc::Rc<ShardCtx>,
    request: ShardRequest,
) -> Result<ShardReply, ShardRequestError> {
    use ShardRequest as R;
    let step = ShardRequestError::Step;
    match request {
        R::OpenPartition {
            tp,
            topic_id,
            config,
            leadership,
        } => ctx
            .open_partition(tp, topic_id, config, leadership)
            .await
            .map(|()| ShardReply::Done)
            .map_err(|e| ShardRequestError::log(&e)),
        R::SetLeadership { tp, leadership } => {
            if ctx.partition(&tp).is_none() {
                return Err(ShardRequestError::NotOpen {
                    tp: tp.clone(),
                    shard: ctx.id,
                });
            }
            ctx.set_leadership(&tp, leadership);
            Ok(ShardReply::Done)
        }
        R::DeletePartition { tp } => {
            ctx.replica_fetchers.unfollow(&tp);
            // Its fetcher goes with it (audit B-12): a fetcher keeps partitions by name
            // and would copy the source into a topic created later under the same name.
            MirrorFetcherManager::remove_partition(ctx, &tp).await;
            ctx.delete_partition(&tp)
                .await
                .map(|()| ShardReply::Done)
                .map_err(|e| ShardRequestError::log(&e))
        }
        R::UpdateConfig { tp, config } => {
            ctx.update_config(&tp, config).await;
            Ok(ShardReply::Done)
        }
        R::SetMirrorEvents(sender) => {
            ctx.mirror_fetchers.set_events(sender);
            Ok(ShardReply::Done)
        }
        R::ObserveMirrorPartitions {
            partitions,
            log_ends,
        } => {
            let mut out = Vec::with_capacity(partitions.len());
            for tp in partitions {
                let log_end_offset = match ctx.partition(&tp).filter(|_| log_ends) {
                    Some(p) => match p.read().await {
                        Ok(log) => log.log_end_offset().0,
                        Err(_) => -1,
                    },
                    None => -1,
                };
                out.push(MirrorObservation {
                    gate: ctx.partition(&tp).and_then(|p| p.mirror_gate()),
                    fetching: ctx.mirror_fetchers.fetching(&tp),
                    status: ctx.mirror_fetchers.status(&tp),
                    log_end_offset,
                    tp,
                });
            }
            Ok(ShardReply::Observed(out))
        }
        R::SetMirrorState { tp, state } => {
            if state != MirrorPartitionState::Mirroring {
                MirrorFetcherManager::remove_partition(ctx, &tp).await;
            }
            set_gate(ctx, &tp, Some(state))?;
            Ok(ShardReply::Done)
        }
        R::StartMirrorFetch { tp, config } => {
            set_gate(ctx, &tp, Some(MirrorPartitionState::Mirroring))?;
            MirrorFetcherManager::add_partition(ctx, tp, config);
            Ok(ShardReply::Done)
        }
        R::ForgetMirrorPartition { tp } => {
            MirrorFetcherManager::remove_partition(ctx, &tp).await;
            if let Some(p) = ctx.partition(&tp) {
                p.set_mirror_gate(None);
            }
            Ok(ShardReply::Done)
        }
        R::StopMirrorFetchers { mirror } => {
            ctx.mirror_fetchers.remove_mirror(&mirror);
            Ok(ShardReply::Done)
        }
        R::PrepareMirrorPartition { tp, lme } => fetcher::prepare_partition(ctx, &tp, lme)
            .await
            .map(|(n, c)| ShardReply::Truncated(n, c))
            .map_err(step),
        R::AwaitMirrorConvergence { tp, convergence } => {
            fetcher::await_prepared(ctx, &tp, convergence)
                .await
                .map(|()| ShardReply::Done)
                .map_err(step)
        }
        R::StopEpochToExceed {
            tp,
            source_cluster_id,
        } => fetcher::stop_epoch_to_exceed(ctx, &tp, &source_cluster_id)
            .await
            .map(ShardReply::EpochToExceed)
            .map_err(step),
        R::StopTruncate {
            tp,
            source_cluster_id,
        } => fetcher::stop_truncate(ctx, &tp, &source_cluster_id)
            .await
            .map(ShardReply::Lme)
            .map_err(step),
        R::StopAppendPidReset {
            tp,
            source_cluster_id,
            sync_log,
        } => fetcher::stop_append_pid_reset(ctx, &tp, &source_cluster_id, sync_log)
            .await
            .map(|()| ShardReply::Done)
            .map_err(step),
        R::SyncFilesystem => crate::log::fs::sync_filesystem(&ctx.settings.data_dir)
            .await
            .map(|()| ShardReply::Done)
            .map_err(|e| step(e.to_string())),
        R::ReadRecords { tp } => {
            let entries = crate::coordinator_log::replay(ctx, &tp).await?;
            let records = entries
                .into_iter()
                .filter_map(|e| match e {
                    crate::coordinator_log::LogEntry::Record {
                        offset, key, value, ..
                    } => Some(StoredRecord {
                        offset,
                        key: Some(key),
                        value,
                    }),
                    crate::coordinator_log::LogEntry::Marker { .. } => None,
                })
                .collect();
            Ok(ShardReply::Records(records))
        }
        R::AppendBatch { tp, batch } => {
            crate::coordinator_log::append(ctx, &tp, batch).await?;
            Ok(ShardReply::Done)
        }
        R::Produce { sets } => {
            // Partitions append concurrently: each write is an io_uring round trip, and
            // different partitions' writes can be in flight together. One partition's
            // sets (from pipelined requests) stay in order and are appended together.
            let count = sets.len();
            let mut by_partition: Vec<(Vec<usize>, Vec<crate::api::produce::ProduceSet>)> =
                Vec::new();
            let mut index: HashMap<TopicPartition, usize> = HashMap::new();
            for (i, set) in sets.into_iter().enumerate() {
                let at = *index.entry(set.tp.clone()).or_insert_with(|| {
                    by_partition.push((Vec::new(), Vec::new()));
                    by_partition.len() - 1
                });
                by_partition[at].0.push(i);
                by_partition[at].1.push(set);
            }
            let appends = by_partition.into_iter().map(|(slots, sets)| async move {
                let tp = sets[0].tp.clone();
                let out =
                    crate::api::produce::append_sets_on_owner(std::rc::Rc::clone(ctx), tp, sets)
                        .await;
                slots.into_iter().zip(out).collect::<Vec<_>>()
            });
            let mut results: Vec<Option<crate::api::produce::PartitionProduceResult>> =
                (0..count).map(|_| None).collect();
            for (i, r) in futures::future::join_all(appends)
                .await
                .into_iter()
                .flatten()
            {
                results[i] = Some(r);
            }
            Ok(ShardReply::Produced(
                results
                    .into_iter()
                    .map(|r| r.unwrap_or_else(crate::api::produce::PartitionProduceResult::lost))
                    .collect(),
            ))
        }
        R::Fetch {
            partitions,
            read_committed,
        } => {
            // The reads overlap too: each waits on its own io_uring read.
            let reads = partitions.into_iter().map(|p| {
                crate::api::fetch::read_and_listen(std::rc::Rc::clone(ctx), p, read_committed)
            });
            Ok(ShardReply::Fetched(futures::future::join_all(reads).await))
        }
        R::ListOffsets {
            tp,
            timestamp,
            current_leader_epoch,
            read_committed,
        } => {
            let (code, ts, offset, epoch) = crate::api::list_offsets::lookup_on_owner(
                ctx,
                tp,
                timestamp,
                current_leader_epoch,
                read_committed,
            )
            .await;
            Ok(ShardReply::Offset(code, ts, offset, epoch))
        }
        R::EpochEndOffset {
            tp,
            leader_epoch,
            current_leader_epoch,
        } => {
            let (code, epoch, end) = crate::api::offset_for_leader_epoch::end_offset_on_owner(
                ctx,
                tp,
                leader_epoch,
                current_leader_epoch,
            )
            .await;
            Ok(ShardReply::EpochEnd(code, epoch, end))
        }
        R::DeleteRecords { tp, offset } => {
            let (code, low) = crate::api::delete_records::delete_on_owner(ctx, tp, offset).await;
            Ok(ShardReply::LowWatermark(code, low))
        }
        R::DescribeProducers { tp } => Ok(ShardReply::Producers(
            crate::api::describe_producers::producers_on_owner(ctx, tp).await,
        )),
        R::ReadOnlyReason { tp } => Ok(ShardReply::ReadOnly(
            crate::api::produce::read_only_reason(ctx, &tp),
        )),
        R::LogSizes { partitions } => Ok(ShardReply::Sizes(
            crate::api::describe_log_dirs::sizes_on_shard(ctx, partitions).await,
        )),
        R::WriteTxnMarker { marker } => Ok(ShardReply::Marker(
            crate::txn::runtime::write_marker_on_owner(ctx, marker).await,
        )),
        R::Group { partition, call } => Ok(ShardReply::Group(match ctx.group_runtime() {
            Some(runtime) => runtime.serve(ctx, partition, call).await,
            None => Err(kafka_protocol::ResponseError::CoordinatorNotAvailable.code()),
        })),
        R::ListGroups { states } => Ok(ShardReply::Groups(match ctx.group_runtime() {
            Some(runtime) => runtime.list_groups(ctx, &states).await,
            None => Vec::new(),
        })),
        R::Txn { partition, call } => Ok(ShardReply::Txn(match ctx.txn_runtime() {
            Some(runtime) => runtime.serve(ctx, partition, call).await,
            None => Err(kafka_protocol::ResponseError::CoordinatorNotAvailable.code()),
        })),
        R::ListTransactions => Ok(ShardReply::Transactions(match ctx.txn_runtime() {
            Some(runtime) => runtime.list_transactions(ctx).await,
            None => Vec::new(),
        })),
        R::Batch(requests) => {
            use futures::StreamExt;
            let answers = futures::stream::iter(requests)
                .map(|r| Box::pin(serve(ctx, r)) as BoxedAnswer<'_>)
                .buffered(BATCH_IN_FLIGHT_MAX)
                .collect()
                .await;
            Ok(ShardReply::Batch(answers))
        }
    }
}
