//! The typed requests other threads send a shard about the partitions it owns: the
//! controller (open, delete, reconfigure), the mirror manager (gate, fetchers, PREPARING
//! and STOPPING steps, observation) and the `__mirror_state` coordinator (read, append).
//! Each is a plain value with a typed reply, so the set of things another thread can
//! make a shard do is this enum and nothing else, and the same messages can cross
//! brokers once partitions live on other nodes (the cluster issue). The in-process
//! transport is [`ShardRouter::request`].

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
    /// STOPPING step 2: the epoch to raise the partition's leader epoch above.
    StopEpochToExceed { tp: TopicPartition },
    /// STOPPING step 3: truncation to the LSO; the LME to record.
    StopTruncate { tp: TopicPartition },
    /// STOPPING step 5: the MIRROR_PID_RESET control batch.
    StopAppendPidReset {
        tp: TopicPartition,
        source_cluster_id: String,
    },
    /// Every record of a partition from its log start (coordinator load): keys and
    /// values of the data batches, with the offset of each.
    ReadRecords { tp: TopicPartition },
    /// One batch appended at the partition's leader epoch, as the broker itself
    /// (coordinator records).
    AppendBatch { tp: TopicPartition, batch: Bytes },
}

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
    /// PREPARING: offsets discarded.
    Truncated(i64),
    /// STOPPING step 2.
    EpochToExceed(Option<i32>),
    /// STOPPING step 3: the LME and the log end that goes with it.
    Lme(Option<(i32, i64)>),
    Records(Vec<StoredRecord>),
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
        } => ctx
            .open_partition(tp, topic_id, config)
            .await
            .map(|()| ShardReply::Done)
            .map_err(|e| ShardRequestError::log(&e)),
        R::DeletePartition { tp } => {
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
            .map(ShardReply::Truncated)
            .map_err(step),
        R::StopEpochToExceed { tp } => fetcher::stop_epoch_to_exceed(ctx, &tp)
            .await
            .map(ShardReply::EpochToExceed)
            .map_err(step),
        R::StopTruncate { tp } => fetcher::stop_truncate(ctx, &tp)
            .await
            .map(ShardReply::Lme)
            .map_err(step),
        R::StopAppendPidReset {
            tp,
            source_cluster_id,
        } => fetcher::stop_append_pid_reset(ctx, &tp, &source_cluster_id)
            .await
            .map(|()| ShardReply::Done)
            .map_err(step),
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
    }
}
