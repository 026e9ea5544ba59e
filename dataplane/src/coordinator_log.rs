//! The runtime pieces every coordinator shares — groups (`__consumer_offsets`), transactions
//! (`__transaction_state`) and mirror states (`__mirror_state`), Kafka's
//! `CoordinatorRuntime` in this codebase: replay an internal-topic partition into
//! entries at load, and append a coordinator's records as one batch at the partition's
//! leader epoch; and the per-shard set of loaded coordinators with the permit that runs
//! their calls, appends and loads one at a time ([`CoordinatorSet`]). The coordinators
//! themselves stay pure state machines; this is what they had each written again.

use bytes::Bytes;

use crate::log::{AppendKind, LogAppendInfo, LogError};
use crate::partition::{Partition, PartitionClosed};
use crate::shard::{now_ms, ShardCtx};
use crate::types::{ProducerId, TopicPartition};
use crate::wire::batch::{BatchBuilder, Compression};
use crate::wire::records::{decode_records, encode_record};
use crate::wire::ControlType;

/// The coordinators of the internal-topic partitions one shard has loaded, by
/// partition, and the permit that serializes their calls with the appends of their
/// records (and loads), so records reach the log in the order the state machines made
/// them.
#[derive(Debug)]
pub struct CoordinatorSet<C> {
    coordinators: std::cell::RefCell<std::collections::HashMap<i32, C>>,
    /// The leader epoch of its partition each coordinator was loaded at: a coordinator
    /// is only as current as the leadership it was loaded under.
    epochs: std::cell::RefCell<std::collections::HashMap<i32, i32>>,
    permit: glommio::sync::Semaphore,
}

impl<C> Default for CoordinatorSet<C> {
    fn default() -> Self {
        CoordinatorSet {
            coordinators: std::cell::RefCell::new(std::collections::HashMap::new()),
            epochs: std::cell::RefCell::new(std::collections::HashMap::new()),
            permit: glommio::sync::Semaphore::new(1),
        }
    }
}

/// The leader epoch of `tp` if this node leads it.
pub fn led_epoch(ctx: &ShardCtx, tp: &TopicPartition) -> Option<i32> {
    ctx.partition(tp)
        .filter(|p| p.is_leader())
        .map(|p| p.leader_epoch().0)
}

impl<C> CoordinatorSet<C> {
    /// The partitions of `topic` this shard holds and this node leads, with no
    /// coordinator loaded yet: the ones to load.
    pub fn to_load(&self, ctx: &ShardCtx, topic: &str) -> Vec<i32> {
        let image = ctx.metadata.load();
        let Some(t) = image.topics.get(topic) else {
            return Vec::new();
        };
        t.partitions
            .iter()
            .filter(|p| p.shard == ctx.id && !self.is_loaded(p.partition))
            .filter(|p| {
                led_epoch(ctx, &TopicPartition::new(topic.to_string(), p.partition)).is_some()
            })
            .map(|p| p.partition)
            .collect()
    }

    pub fn is_loaded(&self, partition: i32) -> bool {
        self.coordinators.borrow().contains_key(&partition)
    }

    /// Adds the coordinator of `partition`, loaded while this node led it at `epoch`.
    pub fn insert(&self, partition: i32, coordinator: C, epoch: i32) {
        self.coordinators
            .borrow_mut()
            .insert(partition, coordinator);
        self.epochs.borrow_mut().insert(partition, epoch);
    }

    /// Takes out every coordinator of `topic` (or only `partition`'s) whose partition
    /// this node no longer leads at the epoch it was loaded at (leadership moved away,
    /// or away and back: the log may hold what another leader's coordinator wrote
    /// meanwhile). Kafka's coordinator unload on resignation.
    pub fn take_stale(&self, ctx: &ShardCtx, topic: &str, partition: Option<i32>) -> Vec<(i32, C)> {
        let stale: Vec<i32> = self
            .epochs
            .borrow()
            .iter()
            .filter(|(p, _)| partition.is_none_or(|only| only == **p))
            .filter(|(p, epoch)| {
                led_epoch(ctx, &TopicPartition::new(topic.to_string(), **p)) != Some(**epoch)
            })
            .map(|(p, _)| *p)
            .collect();
        let mut out = Vec::with_capacity(stale.len());
        for p in stale {
            self.epochs.borrow_mut().remove(&p);
            if let Some(c) = self.coordinators.borrow_mut().remove(&p) {
                out.push((p, c));
            }
        }
        out
    }

    /// The partitions loaded here.
    pub fn partitions(&self) -> Vec<i32> {
        self.coordinators.borrow().keys().copied().collect()
    }

    pub fn borrow(&self) -> std::cell::Ref<'_, std::collections::HashMap<i32, C>> {
        self.coordinators.borrow()
    }

    pub fn borrow_mut(&self) -> std::cell::RefMut<'_, std::collections::HashMap<i32, C>> {
        self.coordinators.borrow_mut()
    }

    /// The permit; `Err`: COORDINATOR_NOT_AVAILABLE (the shard is closing).
    pub async fn permit(&self) -> Result<glommio::sync::Permit<'_>, i16> {
        self.permit
            .acquire_permit(1)
            .await
            .map_err(|_| kafka_protocol::ResponseError::CoordinatorNotAvailable.code())
    }
}

/// Makes each variant of a coordinator's answer enum convert to the value it carries,
/// so `call_group` / `call_txn` hand a caller the answer its call has; another kind of
/// answer is UNKNOWN_SERVER_ERROR (a bug, logged).
macro_rules! answer_carries {
    ($answer:ident, $what:literal; $($variant:ident => $ty:ty),* $(,)?) => {$(
        impl TryFrom<$answer> for $ty {
            type Error = i16;
            fn try_from(answer: $answer) -> Result<$ty, i16> {
                match answer {
                    $answer::$variant(v) => Ok(v),
                    other => {
                        tracing::error!(?other, concat!("the ", $what, " coordinator answered another call"));
                        Err(kafka_protocol::ResponseError::UnknownServerError.code())
                    }
                }
            }
        }
    )*};
}
pub(crate) use answer_carries;

/// One entry of an internal-topic partition, as a coordinator replays it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEntry {
    /// A keyed record (`value` `None`: a tombstone); `producer_id` when it was written
    /// in a transaction (offsets committed by TxnOffsetCommit).
    Record {
        offset: i64,
        key: Bytes,
        value: Option<Bytes>,
        producer_id: Option<ProducerId>,
    },
    /// A transaction marker of `producer_id`.
    Marker {
        producer_id: ProducerId,
        commit: bool,
    },
}

/// Why a coordinator's log operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinatorLogError {
    #[error("{tp} is not open (or not led) on shard {shard}")]
    NotOpen { tp: TopicPartition, shard: usize },
    #[error(transparent)]
    Closed(#[from] PartitionClosed),
    #[error("{tp}: {message}")]
    Log {
        tp: TopicPartition,
        error_code: i16,
        message: String,
    },
    /// Appended on the leader, but the ISR did not have it in time (or is below
    /// `min.insync.replicas`): the caller answers as Kafka does for a failed acks=all
    /// write (the client retries).
    #[error("{tp}: {message}")]
    Unreplicated { tp: TopicPartition, message: String },
}

/// How long a coordinator's append waits for the ISR (Kafka's
/// `offsets.commit.timeout.ms`, 5 s by default).
const REPLICATION_TIMEOUT_MS: i32 = 5_000;

impl CoordinatorLogError {
    fn log(tp: &TopicPartition, e: &LogError) -> Self {
        CoordinatorLogError::Log {
            tp: tp.clone(),
            error_code: crate::api::errors::log_error_code(e),
            message: e.to_string(),
        }
    }
}

fn owned(
    ctx: &ShardCtx,
    tp: &TopicPartition,
) -> Result<std::rc::Rc<Partition>, CoordinatorLogError> {
    // Only the leader's coordinator reads and writes the partition.
    ctx.partition(tp)
        .filter(|p| p.is_leader())
        .ok_or_else(|| CoordinatorLogError::NotOpen {
            tp: tp.clone(),
            shard: ctx.id,
        })
}

/// Every entry of `tp` from its log start: keyed records of data batches and the
/// markers of control batches. Coordinators write uncompressed batches only; a
/// compressed or undecodable one is logged and skipped.
pub async fn replay(
    ctx: &ShardCtx,
    tp: &TopicPartition,
) -> Result<Vec<LogEntry>, CoordinatorLogError> {
    let partition = owned(ctx, tp)?;
    replay_partition(&partition).await
}

async fn replay_partition(partition: &Partition) -> Result<Vec<LogEntry>, CoordinatorLogError> {
    let tp = partition.topic_partition();
    let log = partition.read().await?;
    let mut entries = Vec::new();
    let start = log.log_start_offset();
    log.for_each_batch(start, |batch| {
        let producer_id = batch.is_transactional().then(|| batch.producer_id());
        if batch.is_control() {
            if let (Some(producer_id), Ok(marker)) = (producer_id, batch.control_record()) {
                match marker.kind {
                    ControlType::Commit => entries.push(LogEntry::Marker {
                        producer_id,
                        commit: true,
                    }),
                    ControlType::Abort => entries.push(LogEntry::Marker {
                        producer_id,
                        commit: false,
                    }),
                    _ => {}
                }
            }
            return;
        }
        let base = batch.base_offset().0;
        if batch.compression() != Compression::None {
            tracing::warn!(%tp, offset = base, "compressed internal-topic batch skipped");
            return;
        }
        match decode_records(&batch.records(), batch.record_count()) {
            Ok(records) => entries.extend(records.into_iter().filter_map(|r| {
                Some(LogEntry::Record {
                    offset: base + i64::from(r.offset_delta),
                    key: r.key?,
                    value: r.value,
                    producer_id,
                })
            })),
            Err(e) => {
                tracing::warn!(%tp, offset = base, error = %e, "undecodable internal-topic batch skipped")
            }
        }
    })
    .await
    .map_err(|e| {
        tracing::error!(%tp, error = %e, "cannot read an internal topic partition");
        CoordinatorLogError::log(tp, &e)
    })?;
    Ok(entries)
}

/// One uncompressed batch of keyed records (`None` value: a tombstone), timestamped now.
pub fn batch_of<'a>(records: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>) -> Bytes {
    let mut body = Vec::new();
    let mut n = 0i32;
    for (i, (key, value)) in records.into_iter().enumerate() {
        encode_record(&mut body, i as i32, 0, Some(key), value);
        n += 1;
    }
    let now = now_ms();
    BatchBuilder {
        last_offset_delta: n - 1,
        record_count: n,
        base_timestamp: now,
        max_timestamp: now,
        ..BatchBuilder::default()
    }
    .build(&body)
}

/// Appends a coordinator's batch to `tp` at the partition's leader epoch, as the broker
/// itself (the read-only gate does not apply: internal topics are never mirrored).
pub async fn append(
    ctx: &ShardCtx,
    tp: &TopicPartition,
    batch: Bytes,
) -> Result<LogAppendInfo, CoordinatorLogError> {
    let partition = owned(ctx, tp)?;
    let (info, end, min_isr) = {
        let mut log = partition.write().await?;
        let info = log
            .append_as_leader(
                batch,
                partition.leader_epoch(),
                AppendKind::Coordinator,
                now_ms(),
            )
            .await
            .map_err(|e| {
                tracing::error!(%tp, error = %e, "cannot append coordinator records");
                CoordinatorLogError::log(tp, &e)
            })?;
        let min_isr = log.config().min_insync_replicas.max(1) as usize;
        (info, log.log_end_offset(), min_isr)
    };
    // Coordinators write with acks=all (Kafka's `offsets.commit.required.acks` = -1): a
    // committed offset or transaction state survives the leader's loss.
    crate::api::produce::wait_for_isr(&partition, end, min_isr, REPLICATION_TIMEOUT_MS)
        .await
        .map_err(|(_, message)| CoordinatorLogError::Unreplicated {
            tp: tp.clone(),
            message,
        })?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{LogConfig, PartitionLog};
    use crate::test_support::run_glommio as run;
    use crate::types::{LeaderEpoch, ProducerEpoch};
    use crate::wire::control::build_txn_marker;

    #[test]
    fn replay_returns_keyed_records_with_offsets_tombstones_and_markers() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let tp = TopicPartition::new("__consumer_offsets", 0);
            let log = PartitionLog::open(dir.path(), tp.clone(), None, LogConfig::default(), 0)
                .await
                .expect("log opens");
            let partition = Partition::new(tp, log, LeaderEpoch(0));
            {
                let mut log = partition.write().await.expect("writer");
                let batch = batch_of([(b"a".as_slice(), Some(b"1".as_slice())), (b"b", None)]);
                log.append_as_leader(batch, LeaderEpoch(0), AppendKind::Coordinator, 0)
                    .await
                    .expect("append");
                let marker = build_txn_marker(true, ProducerId(7), ProducerEpoch(0), 0, 0);
                log.append_as_leader(marker, LeaderEpoch(0), AppendKind::Coordinator, 0)
                    .await
                    .expect("marker");
            }
            let entries = replay_partition(&partition).await.expect("replay");
            assert_eq!(
                entries,
                vec![
                    LogEntry::Record {
                        offset: 0,
                        key: Bytes::from_static(b"a"),
                        value: Some(Bytes::from_static(b"1")),
                        producer_id: None,
                    },
                    LogEntry::Record {
                        offset: 1,
                        key: Bytes::from_static(b"b"),
                        value: None,
                        producer_id: None,
                    },
                    LogEntry::Marker {
                        producer_id: ProducerId(7),
                        commit: true,
                    },
                ]
            );
        });
    }
}
