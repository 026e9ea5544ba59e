//! `Partition`: the one owner of a partition's state on the shard that owns it, in the
//! shape of Kafka's `cluster.Partition`. Every writer — produce, transaction markers,
//! the group, transaction and `__mirror_state` coordinators, the mirror fetcher,
//! PREPARING and STOPPING, DeleteRecords, retention — takes [`Partition::write`], and
//! the high watermark moves and readers wake in exactly one place: when that writer
//! lets go ([`PartitionWriter`]'s drop). Readers take [`Partition::read`] and Fetch
//! long-polls wait on this partition's own signal ([`Partition::listen`]), not on a
//! process-wide one.
//!
//! It owns the partition's leader epoch: the controller sets it after committing it
//! (Kafka's `makeLeader`), every leader append is stamped with it, and requests that
//! name a current leader epoch are fenced against it here, on the owner.
//!
//! It also holds the read-only gate of a mirrored partition: the mirror state the
//! control plane last gave it. A leader append checks it with the writer held, so no
//! append slips in between a state change and the step that follows it.
//!
//! On a single node the leader is the whole ISR, so the high watermark is the log end
//! after every change. The cluster issue replaces that rule here (the minimum of the
//! ISR's log ends, delayed produce waiting on it) without touching the writers.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use glommio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::log::PartitionLog;
use crate::types::{LeaderEpoch, TopicPartition};
use crate::wire::mirror::MirrorPartitionState;

/// The partition's lock was closed (the shard is closing it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("partition {0} is closed")]
pub struct PartitionClosed(pub TopicPartition);

/// A partition owned by this shard.
#[derive(Debug)]
pub struct Partition {
    tp: TopicPartition,
    /// Reads run together; appends, truncation and retention one at a time.
    log: RwLock<PartitionLog>,
    /// Signalled whenever the high watermark moves (appends and truncations). `Send`,
    /// so a Fetch served by another shard's connection can wait on it.
    hw_moved: Arc<event_listener::Event>,
    /// The read-only gate: the mirror state the control plane last set (None: never
    /// set since the log was opened).
    mirror_gate: Cell<Option<MirrorPartitionState>>,
    /// The leader epoch this broker leads the partition at, as the controller last
    /// committed it: every leader append is stamped with it and requests carrying a
    /// current leader epoch are fenced against it.
    leader_epoch: Cell<LeaderEpoch>,
}

impl Partition {
    pub fn new(tp: TopicPartition, log: PartitionLog, leader_epoch: LeaderEpoch) -> Partition {
        Partition {
            tp,
            log: RwLock::new(log),
            hw_moved: Arc::new(event_listener::Event::new()),
            mirror_gate: Cell::new(None),
            leader_epoch: Cell::new(leader_epoch),
        }
    }

    /// The leader epoch leader appends are stamped with.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch.get()
    }

    /// Kafka's `makeLeader`: this broker leads the partition at `epoch`, the one the
    /// controller committed. An epoch never goes back: a stale `epoch` (one that arrives
    /// after a newer one) changes nothing. Returns whether the epoch moved.
    pub fn make_leader(&self, epoch: LeaderEpoch) -> bool {
        if epoch > self.leader_epoch.get() {
            self.leader_epoch.set(epoch);
            true
        } else {
            false
        }
    }

    /// Kafka's current-leader-epoch check (KIP-320) for a request that names the epoch
    /// it believes the leader has: -1 skips it, an older one is FENCED_LEADER_EPOCH, a
    /// newer one UNKNOWN_LEADER_EPOCH (this broker has not caught up with it yet).
    pub fn check_current_epoch(&self, current: i32) -> Result<(), kafka_protocol::ResponseError> {
        crate::api::offset_for_leader_epoch::check_current_epoch(current, self.leader_epoch().0)
    }

    /// Sets (or clears) the read-only gate's mirror state.
    pub fn set_mirror_gate(&self, state: Option<MirrorPartitionState>) {
        self.mirror_gate.set(state);
    }

    pub fn mirror_gate(&self) -> Option<MirrorPartitionState> {
        self.mirror_gate.get()
    }

    /// Why a leader append is refused (reference §6.8): the topic is in `mirror` and
    /// this partition is not STOPPED there. `None`: writable. Check it with the writer
    /// held.
    pub fn read_only_reason(&self, mirror: Option<&str>) -> Option<String> {
        let mirror = mirror?;
        let state = self.mirror_gate.get();
        if state == Some(MirrorPartitionState::Stopped) {
            return None;
        }
        let state = state.unwrap_or(MirrorPartitionState::Unknown);
        Some(format!(
            "{} is a read-only copy in mirror {mirror} (state {state}); remove it from the mirror to make it writable",
            self.tp
        ))
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    /// Shared access for reads.
    pub async fn read(&self) -> Result<RwLockReadGuard<'_, PartitionLog>, PartitionClosed> {
        self.log
            .read()
            .await
            .map_err(|_| PartitionClosed(self.tp.clone()))
    }

    /// Exclusive access for a change; the high watermark follows when it is dropped.
    pub async fn write(&self) -> Result<PartitionWriter<'_>, PartitionClosed> {
        let guard = self
            .log
            .write()
            .await
            .map_err(|_| PartitionClosed(self.tp.clone()))?;
        let before = (guard.log_end_offset(), guard.high_watermark());
        Ok(PartitionWriter {
            guard,
            hw_moved: &self.hw_moved,
            before,
        })
    }

    /// Completes at the next high-watermark move. Take it before reading, so that a
    /// change between the read and the wait is not missed.
    pub fn listen(&self) -> event_listener::EventListener {
        self.hw_moved.listen()
    }

    /// The log, once no one else holds the partition (close, delete).
    pub fn into_log(self) -> Result<PartitionLog, PartitionClosed> {
        let tp = self.tp;
        self.log.into_inner().map_err(|_| PartitionClosed(tp))
    }
}

/// Exclusive access to a partition's log. On drop, the high watermark is advanced to
/// the log end (single node: the leader is the whole ISR) and waiting readers are
/// woken if it moved.
#[derive(Debug)]
pub struct PartitionWriter<'a> {
    guard: RwLockWriteGuard<'a, PartitionLog>,
    hw_moved: &'a event_listener::Event,
    /// (log end, high watermark) when the writer took the log.
    before: (crate::types::Offset, crate::types::Offset),
}

impl Deref for PartitionWriter<'_> {
    type Target = PartitionLog;
    fn deref(&self) -> &PartitionLog {
        &self.guard
    }
}

impl DerefMut for PartitionWriter<'_> {
    fn deref_mut(&mut self) -> &mut PartitionLog {
        &mut self.guard
    }
}

impl Drop for PartitionWriter<'_> {
    fn drop(&mut self) {
        let end = self.guard.log_end_offset();
        if self.guard.high_watermark() != end {
            self.guard.update_high_watermark(end);
        }
        // A truncation may have lowered the high watermark itself: compare with what
        // the writer started from.
        if (end, self.guard.high_watermark()) != self.before {
            self.hw_moved.notify(usize::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;
    use crate::log::LogConfig;
    use crate::test_support::run_glommio as run;
    use crate::types::Offset;
    use crate::wire::batch::BatchBuilder;
    use crate::wire::records::encode_simple_records;

    async fn open(dir: &Path, name: &str) -> Partition {
        let tp = TopicPartition::new(name, 0);
        let log = PartitionLog::open(dir, tp.clone(), None, LogConfig::default(), 0)
            .await
            .expect("log opens");
        Partition::new(tp, log, LeaderEpoch(0))
    }

    fn batch(records: i32) -> bytes::Bytes {
        BatchBuilder {
            last_offset_delta: records - 1,
            record_count: records,
            ..BatchBuilder::default()
        }
        .build(&encode_simple_records(records, 0, 16))
    }

    /// Whether the listener has fired (after letting the executor run once).
    async fn fired(listener: &mut event_listener::EventListener) -> bool {
        glommio::timer::sleep(Duration::from_millis(1)).await;
        (&mut *listener).now_or_never().is_some()
    }

    #[test]
    fn a_mirrored_partition_is_writable_only_once_stopped() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let p = open(dir.path(), "m").await;
            assert_eq!(p.read_only_reason(None), None, "not in a mirror");
            assert!(p.read_only_reason(Some("dr")).is_some(), "gate never set");
            for state in MirrorPartitionState::ALL {
                p.set_mirror_gate(Some(state));
                let refused = p.read_only_reason(Some("dr"));
                assert_eq!(
                    refused.is_none(),
                    state == MirrorPartitionState::Stopped,
                    "{state}: {refused:?}"
                );
            }
            p.set_mirror_gate(Some(MirrorPartitionState::Mirroring));
            let reason = p.read_only_reason(Some("dr")).expect("refused");
            assert!(reason.contains("mirror dr (state MIRRORING)"), "{reason}");
        });
    }

    #[test]
    fn leader_appends_take_the_epoch_the_controller_last_gave_and_it_never_goes_back() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let p = open(dir.path(), "e").await;
            assert!(p.make_leader(LeaderEpoch(5)));
            assert!(!p.make_leader(LeaderEpoch(3)), "a stale epoch is ignored");
            assert!(!p.make_leader(LeaderEpoch(5)));
            assert_eq!(p.leader_epoch(), LeaderEpoch(5));
            {
                let mut log = p.write().await.expect("writer");
                let epoch = p.leader_epoch();
                log.append_as_leader(batch(2), epoch, crate::log::AppendKind::Client, 0)
                    .await
                    .expect("append");
                assert_eq!(log.latest_epoch(), Some(LeaderEpoch(5)));
            }
            // KIP-320 fencing against the partition's own epoch.
            assert_eq!(p.check_current_epoch(-1), Ok(()));
            assert_eq!(p.check_current_epoch(5), Ok(()));
            assert_eq!(
                p.check_current_epoch(4),
                Err(kafka_protocol::ResponseError::FencedLeaderEpoch)
            );
            assert_eq!(
                p.check_current_epoch(6),
                Err(kafka_protocol::ResponseError::UnknownLeaderEpoch)
            );
        });
    }

    #[test]
    fn the_writer_moves_the_high_watermark_and_wakes_only_this_partitions_readers() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let a = open(dir.path(), "a").await;
            let b = open(dir.path(), "b").await;
            let mut on_a = a.listen();
            let mut on_b = b.listen();
            {
                let mut log = a.write().await.expect("writer");
                log.append_as_leader(batch(3), LeaderEpoch(0), crate::log::AppendKind::Client, 0)
                    .await
                    .expect("append");
                // Not visible to readers until the writer lets go.
                assert_eq!(log.high_watermark(), Offset(0));
            }
            assert_eq!(a.read().await.expect("reader").high_watermark(), Offset(3));
            assert!(fired(&mut on_a).await, "a's reader is woken");
            assert!(!fired(&mut on_b).await, "b's reader sleeps on");
            // A writer that changes nothing wakes no one.
            let mut again = a.listen();
            drop(a.write().await.expect("writer"));
            assert!(!fired(&mut again).await);
            // A truncation moves the high watermark down, and wakes.
            {
                let mut log = a.write().await.expect("writer");
                log.truncate_to(Offset(0)).await.expect("truncate");
            }
            assert!(fired(&mut again).await);
            assert_eq!(a.read().await.expect("reader").high_watermark(), Offset(0));
        });
    }
}
