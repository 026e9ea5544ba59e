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
//! It knows who leads and who follows ([`Leadership`], from the controller). As leader
//! it tracks each follower's log end from the follower's Fetches (Kafka's `Replica`
//! state) and the high watermark is the lowest log end of the in-sync replicas; alone in
//! its ISR that is its own log end after every change. As follower the high watermark is
//! the leader's, capped at the local log end.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
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

/// Who leads a partition and who follows, as the controller last committed it (Kafka's
/// LeaderAndIsr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    /// Node id of the leader, -1 while none can lead.
    pub leader: i32,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

impl Leadership {
    /// `node` is the only replica.
    pub fn alone(node: i32, leader_epoch: LeaderEpoch) -> Leadership {
        Leadership {
            leader: node,
            leader_epoch,
            partition_epoch: 0,
            replicas: vec![node],
            isr: vec![node],
        }
    }

    /// Whether `next` is newer than this (a higher leader epoch, or the same one with a
    /// higher partition epoch): older or equal ones arrive late and change nothing.
    pub fn is_older_than(&self, next: &Leadership) -> bool {
        (next.leader_epoch, next.partition_epoch) > (self.leader_epoch, self.partition_epoch)
    }
}

/// What a leader knows of one follower, from its Fetches (Kafka's `Replica` state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's log end: the offset it last fetched from (-1: not known yet).
    pub log_end: i64,
    /// When it last had everything the leader had (ms): what `replica.lag.time.max.ms`
    /// is measured against.
    pub last_caught_up_ms: i64,
    /// When it last fetched, and the leader's log end then.
    pub last_fetch_ms: i64,
    pub last_fetch_leader_end: i64,
}

/// What a follower's Fetch means for the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FollowerFetch {
    /// The high watermark may move: take the writer to move it.
    pub high_watermark_may_move: bool,
    /// The follower is out of the ISR and has caught up: ask the controller to add it.
    pub may_join_isr: bool,
}

/// A partition owned by this shard.
#[derive(Debug)]
pub struct Partition {
    tp: TopicPartition,
    /// Reads run together; appends, truncation and retention one at a time.
    log: RwLock<PartitionLog>,
    /// Signalled whenever the log end, the high watermark or the log start moves
    /// (appends, truncations, retention) and at every leadership change. `Send`, so a
    /// Fetch served by another shard's connection can wait on it.
    hw_moved: Arc<event_listener::Event>,
    /// The read-only gate: the mirror state the control plane last set (None: never
    /// set since the log was opened).
    mirror_gate: Cell<Option<MirrorPartitionState>>,
    /// This node's id.
    node_id: i32,
    /// Who leads and follows, as the controller last committed it: its leader epoch
    /// stamps every leader append and fences requests naming a current leader epoch.
    leadership: RefCell<Leadership>,
    /// As leader: each follower's state (replicas other than this node).
    followers: RefCell<BTreeMap<i32, FollowerState>>,
    /// As follower: the leader's high watermark from its last Fetch answer.
    leader_high_watermark: Cell<i64>,
    /// The ISR change last asked of the controller, with when (ms): asked again only
    /// once the image moved or it is old.
    isr_change_asked: RefCell<Option<(Vec<i32>, i64)>>,
}

impl Partition {
    /// A partition on a node of its own (tests, single-node tools): node 0 leads it
    /// alone.
    pub fn new(tp: TopicPartition, log: PartitionLog, leader_epoch: LeaderEpoch) -> Partition {
        Partition::with_leadership(tp, log, 0, Leadership::alone(0, leader_epoch), 0)
    }

    /// A partition on node `node_id`, led and followed as `leadership` says (`now_ms`
    /// starts the followers' lag clocks).
    pub fn with_leadership(
        tp: TopicPartition,
        log: PartitionLog,
        node_id: i32,
        leadership: Leadership,
        now_ms: i64,
    ) -> Partition {
        let p = Partition {
            tp,
            log: RwLock::new(log),
            hw_moved: Arc::new(event_listener::Event::new()),
            mirror_gate: Cell::new(None),
            node_id,
            leadership: RefCell::new(leadership),
            followers: RefCell::new(BTreeMap::new()),
            leader_high_watermark: Cell::new(0),
            isr_change_asked: RefCell::new(None),
        };
        p.reset_followers(now_ms);
        p
    }

    /// Whether this node leads the partition.
    pub fn is_leader(&self) -> bool {
        self.leadership.borrow().leader == self.node_id
    }

    /// The leader's node id (-1: none).
    pub fn leader(&self) -> i32 {
        self.leadership.borrow().leader
    }

    pub fn leadership(&self) -> Leadership {
        self.leadership.borrow().clone()
    }

    /// Kafka's `makeLeader` / `makeFollower`: the controller committed `next`. An older
    /// or equal one changes nothing (returns false); the leader epoch never goes back.
    /// Becoming leader (or a new leader epoch) starts every follower unknown, caught up
    /// as of `now_ms` (so none is dropped from the ISR before it could fetch).
    pub fn set_leadership(&self, next: Leadership, now_ms: i64) -> bool {
        let old = self.leadership.borrow().clone();
        if !old.is_older_than(&next) {
            return false;
        }
        let new_epoch = next.leader_epoch != old.leader_epoch;
        tracing::debug!(tp = %self.tp, ?old, ?next, "leadership changed");
        *self.leadership.borrow_mut() = next;
        // A long poll waiting here answers at once (NOT_LEADER_OR_FOLLOWER, a new epoch),
        // as Kafka's DelayedFetch completes when the broker stops leading.
        self.hw_moved.notify(usize::MAX);
        *self.isr_change_asked.borrow_mut() = None;
        if new_epoch {
            self.reset_followers(now_ms);
        } else {
            // Same leader, new replicas or ISR: keep what is known, add the new ones.
            let l = self.leadership.borrow();
            let mut f = self.followers.borrow_mut();
            f.retain(|id, _| l.replicas.contains(id));
            for r in l.replicas.iter().filter(|r| **r != self.node_id) {
                f.entry(*r).or_insert(FollowerState {
                    log_end: -1,
                    last_caught_up_ms: now_ms,
                    last_fetch_ms: 0,
                    last_fetch_leader_end: -1,
                });
            }
        }
        true
    }

    fn reset_followers(&self, now_ms: i64) {
        let l = self.leadership.borrow();
        *self.followers.borrow_mut() = l
            .replicas
            .iter()
            .filter(|r| **r != self.node_id)
            .map(|r| {
                (
                    *r,
                    FollowerState {
                        log_end: -1,
                        last_caught_up_ms: now_ms,
                        last_fetch_ms: 0,
                        last_fetch_leader_end: -1,
                    },
                )
            })
            .collect();
    }

    /// As leader: follower `replica` fetched from `fetch_offset` (so it holds everything
    /// below) at `now_ms`, when this log ended at `leader_end` and the high watermark was
    /// `high_watermark`. Kafka's `updateFollowerFetchState`.
    pub fn on_follower_fetch(
        &self,
        replica: i32,
        fetch_offset: i64,
        leader_end: i64,
        high_watermark: i64,
        now_ms: i64,
    ) -> FollowerFetch {
        let mut followers = self.followers.borrow_mut();
        let Some(f) = followers.get_mut(&replica) else {
            return FollowerFetch::default();
        };
        if fetch_offset >= leader_end {
            f.last_caught_up_ms = now_ms;
        } else if f.last_fetch_leader_end >= 0 && fetch_offset >= f.last_fetch_leader_end {
            f.last_caught_up_ms = f.last_fetch_ms;
        }
        f.log_end = fetch_offset;
        f.last_fetch_ms = now_ms;
        f.last_fetch_leader_end = leader_end;
        let l = self.leadership.borrow();
        let in_isr = l.isr.contains(&replica);
        FollowerFetch {
            high_watermark_may_move: in_isr && high_watermark < leader_end,
            may_join_isr: !in_isr && fetch_offset >= high_watermark,
        }
    }

    /// As leader: the followers' states.
    pub fn followers(&self) -> BTreeMap<i32, FollowerState> {
        self.followers.borrow().clone()
    }

    /// As follower: the leader's high watermark from its last Fetch answer.
    pub fn set_leader_high_watermark(&self, hw: i64) {
        self.leader_high_watermark.set(hw);
    }

    /// The ISR this leader should ask the controller for at `now_ms`: in-sync members
    /// whose last catch-up is older than `lag_max_ms` drop out, and `joining` (a caught
    /// up follower) comes in. `None`: no change, or the same change was asked within
    /// `retry_ms` and the image has not moved since.
    pub fn isr_change(
        &self,
        joining: Option<i32>,
        now_ms: i64,
        lag_max_ms: i64,
        retry_ms: i64,
    ) -> Option<(Leadership, Vec<i32>)> {
        let l = self.leadership.borrow();
        if l.leader != self.node_id {
            return None;
        }
        let followers = self.followers.borrow();
        let mut isr: Vec<i32> = l
            .isr
            .iter()
            .copied()
            .filter(|r| {
                *r == self.node_id
                    || followers
                        .get(r)
                        .is_some_and(|f| now_ms - f.last_caught_up_ms <= lag_max_ms)
            })
            .collect();
        if let Some(j) = joining.filter(|j| l.replicas.contains(j) && !isr.contains(j)) {
            isr.push(j);
        }
        // Replica order, as Kafka keeps it.
        isr.sort_by_key(|r| l.replicas.iter().position(|x| x == r));
        if isr == l.isr {
            return None;
        }
        let mut asked = self.isr_change_asked.borrow_mut();
        if let Some((prev, at)) = asked.as_ref() {
            if *prev == isr && now_ms - at < retry_ms {
                return None;
            }
        }
        *asked = Some((isr.clone(), now_ms));
        Some((l.clone(), isr))
    }

    /// Where the high watermark goes after a change that left the log ending at `end`:
    /// as leader the lowest log end of the ISR (never lower than `current`), as follower
    /// the leader's high watermark; never past `end`.
    fn high_watermark_target(&self, end: i64, current: i64) -> i64 {
        let l = self.leadership.borrow();
        if l.leader != self.node_id {
            return self.leader_high_watermark.get().min(end);
        }
        let followers = self.followers.borrow();
        let mut hw = end;
        for r in l.isr.iter().filter(|r| **r != self.node_id) {
            match followers.get(r) {
                Some(f) if f.log_end >= 0 => hw = hw.min(f.log_end),
                // A member whose position is not known yet holds the watermark.
                _ => hw = hw.min(current),
            }
        }
        hw.max(current.min(end))
    }

    /// The leader epoch leader appends are stamped with.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leadership.borrow().leader_epoch
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
        let before = (
            guard.log_end_offset(),
            guard.high_watermark(),
            guard.log_start_offset(),
        );
        Ok(PartitionWriter {
            guard,
            partition: self,
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

/// Exclusive access to a partition's log. On drop, the high watermark follows (the
/// lowest log end of the ISR as leader, the leader's as follower) and waiting readers
/// are woken if the log end or the high watermark moved.
#[derive(Debug)]
pub struct PartitionWriter<'a> {
    guard: RwLockWriteGuard<'a, PartitionLog>,
    partition: &'a Partition,
    /// (log end, high watermark, log start) when the writer took the log.
    before: (
        crate::types::Offset,
        crate::types::Offset,
        crate::types::Offset,
    ),
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
        let current = self.guard.high_watermark();
        let target = self.partition.high_watermark_target(end.0, current.0);
        if target != current.0 {
            self.guard
                .update_high_watermark(crate::types::Offset(target));
            tracing::trace!(tp = %self.partition.tp, from = current.0, to = target, end = end.0, "high watermark moved");
        }
        // A truncation may have lowered the high watermark itself: compare with what
        // the writer started from. A moved log start (retention, DeleteRecords) wakes the
        // readers too: a long poll that nothing woke answers with what it first read.
        let after = (
            end,
            self.guard.high_watermark(),
            self.guard.log_start_offset(),
        );
        if after != self.before {
            self.partition.hw_moved.notify(usize::MAX);
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
            assert!(p.set_leadership(Leadership::alone(0, LeaderEpoch(5)), 0));
            assert!(
                !p.set_leadership(Leadership::alone(0, LeaderEpoch(3)), 0),
                "a stale epoch is ignored"
            );
            assert!(!p.set_leadership(Leadership::alone(0, LeaderEpoch(5)), 0));
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

    fn replicated(leader: i32, isr: &[i32]) -> Leadership {
        Leadership {
            leader,
            leader_epoch: LeaderEpoch(1),
            partition_epoch: 1,
            replicas: vec![0, 1, 2],
            isr: isr.to_vec(),
        }
    }

    async fn open_as(dir: &Path, node: i32, leadership: Leadership) -> Partition {
        let tp = TopicPartition::new("r", 0);
        let log = PartitionLog::open(dir, tp.clone(), None, LogConfig::default(), 0)
            .await
            .expect("log opens");
        Partition::with_leadership(tp, log, node, leadership, 0)
    }

    async fn append(p: &Partition, records: i32) {
        let mut log = p.write().await.expect("writer");
        let epoch = p.leader_epoch();
        log.append_as_leader(batch(records), epoch, crate::log::AppendKind::Client, 0)
            .await
            .expect("append");
    }

    async fn hw(p: &Partition) -> i64 {
        p.read().await.expect("reader").high_watermark().0
    }

    #[test]
    fn the_leaders_high_watermark_is_the_lowest_log_end_of_its_isr() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let p = open_as(dir.path(), 0, replicated(0, &[0, 1, 2])).await;
            append(&p, 5).await;
            assert_eq!(hw(&p).await, 0, "followers' positions are not known yet");
            let seen = p.on_follower_fetch(1, 5, 5, 0, 10);
            assert!(seen.high_watermark_may_move && !seen.may_join_isr);
            drop(p.write().await);
            assert_eq!(hw(&p).await, 0, "follower 2 holds it");
            p.on_follower_fetch(2, 3, 5, 0, 10);
            drop(p.write().await);
            assert_eq!(hw(&p).await, 3);
            // It never goes back on the leader, even if a follower's fetch is older.
            p.on_follower_fetch(2, 1, 5, 3, 11);
            drop(p.write().await);
            assert_eq!(hw(&p).await, 3);
            // Alone in the ISR, the log end.
            let alone = Leadership {
                isr: vec![0],
                partition_epoch: 2,
                ..replicated(0, &[0])
            };
            assert!(p.set_leadership(alone, 12));
            drop(p.write().await);
            assert_eq!(hw(&p).await, 5);
        });
    }

    #[test]
    fn a_follower_that_lags_too_long_leaves_the_isr_and_one_that_caught_up_joins() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let p = open_as(dir.path(), 0, replicated(0, &[0, 1, 2])).await;
            append(&p, 4).await;
            // Follower 1 keeps up; follower 2 never fetches.
            p.on_follower_fetch(1, 4, 4, 0, 1_000);
            assert_eq!(p.isr_change(None, 1_000, 30_000, 2_000), None);
            p.on_follower_fetch(1, 4, 4, 0, 31_000);
            let (was, isr) = p
                .isr_change(None, 31_000, 30_000, 2_000)
                .expect("2 lags past replica.lag.time.max.ms");
            assert_eq!((was.partition_epoch, isr.clone()), (1, vec![0, 1]));
            assert_eq!(
                p.isr_change(None, 31_500, 30_000, 2_000),
                None,
                "not asked again at once"
            );
            // The controller committed it.
            assert!(p.set_leadership(
                Leadership {
                    isr: vec![0, 1],
                    partition_epoch: 2,
                    ..replicated(0, &[0, 1])
                },
                31_600
            ));
            // Follower 2 catches up to the high watermark: it may join.
            drop(p.write().await);
            let hw_now = hw(&p).await;
            let seen = p.on_follower_fetch(2, hw_now, 4, hw_now, 32_000);
            assert!(seen.may_join_isr);
            let (_, isr) = p.isr_change(Some(2), 32_000, 30_000, 2_000).expect("joins");
            assert_eq!(isr, vec![0, 1, 2]);
        });
    }

    #[test]
    fn a_follower_takes_the_leaders_high_watermark_capped_at_its_own_log_end() {
        run(|| async {
            let dir = tempfile::tempdir().expect("tempdir");
            let p = open_as(dir.path(), 1, replicated(0, &[0, 1, 2])).await;
            assert!(!p.is_leader());
            p.set_leader_high_watermark(10);
            append(&p, 4).await;
            assert_eq!(hw(&p).await, 4);
            p.set_leader_high_watermark(2);
            drop(p.write().await);
            assert_eq!(hw(&p).await, 2);
            assert_eq!(p.isr_change(None, 100_000, 1, 1), None, "only leaders ask");
        });
    }
}
