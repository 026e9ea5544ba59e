//! The group coordinator at work on a shard: one [`GroupCoordinator`] per
//! `__consumer_offsets` partition the shard owns, loaded from that partition's log, with
//! its effects applied (records appended, then parked JoinGroup/SyncGroup responses
//! delivered) and its timers driven.
//!
//! A group's requests may arrive on any shard; [`call_group`] forwards them to the shard
//! owning the group's `__consumer_offsets` partition. Every coordinator call and the
//! append of its records happen under one per-shard permit, so records reach the log in
//! the order the state machine produced them.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use futures::channel::oneshot;
use kafka_protocol::ResponseError;

use super::messages::*;
use super::{GroupConfig, GroupCoordinator};
use crate::coordinator_log::{self, CoordinatorLogError, CoordinatorSet, LogEntry};
use crate::shard::{now_ms, ShardCtx, ShardReply, ShardRequest};
use crate::types::TopicPartition;

/// The internal topic holding groups and committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// How often the timer task looks for due coordinator deadlines.
const TICK_EVERY: Duration = Duration::from_millis(100);

enum Waiter {
    Join(oneshot::Sender<JoinGroupResponse>),
    Sync(oneshot::Sender<SyncGroupResponse>),
}

/// One shard's group coordinators.
pub struct GroupRuntime {
    config: GroupConfig,
    coordinators: CoordinatorSet<GroupCoordinator>,
    waiters: RefCell<HashMap<WaiterId, Waiter>>,
    next_waiter: Cell<WaiterId>,
    /// Set at shutdown: parked responses were answered and new calls are refused.
    closing: Cell<bool>,
}

impl std::fmt::Debug for GroupRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupRuntime")
            .field("config", &self.config)
            .field(
                "loaded",
                &self.coordinators.borrow().keys().collect::<Vec<_>>(),
            )
            .field("waiters", &self.waiters.borrow().len())
            .finish()
    }
}

fn coordinator_not_available() -> i16 {
    ResponseError::CoordinatorNotAvailable.code()
}

impl GroupRuntime {
    pub fn new(config: GroupConfig) -> Rc<GroupRuntime> {
        Rc::new(GroupRuntime {
            config,
            coordinators: CoordinatorSet::default(),
            waiters: RefCell::new(HashMap::new()),
            next_waiter: Cell::new(1),
            closing: Cell::new(false),
        })
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The `__consumer_offsets` partition of `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        super::partition_for(group_id, self.config.offsets_topic_partitions.max(1))
    }

    fn new_waiter(&self, waiter: Waiter) -> WaiterId {
        let id = self.next_waiter.get();
        self.next_waiter.set(id + 1);
        self.waiters.borrow_mut().insert(id, waiter);
        id
    }

    /// A waiter for a JoinGroup response and where it arrives.
    pub fn register_join(&self) -> (WaiterId, oneshot::Receiver<JoinGroupResponse>) {
        let (tx, rx) = oneshot::channel();
        (self.new_waiter(Waiter::Join(tx)), rx)
    }

    /// A waiter for a SyncGroup response and where it arrives.
    pub fn register_sync(&self) -> (WaiterId, oneshot::Receiver<SyncGroupResponse>) {
        let (tx, rx) = oneshot::channel();
        (self.new_waiter(Waiter::Sync(tx)), rx)
    }

    pub fn forget_waiter(&self, id: WaiterId) {
        self.waiters.borrow_mut().remove(&id);
    }

    /// Loads the coordinator of offsets partition `partition` from its log unless it is
    /// loaded already.
    pub async fn ensure_loaded(&self, ctx: &Rc<ShardCtx>, partition: i32) -> Result<(), i16> {
        self.unload_stale(ctx, Some(partition));
        if self.coordinators.is_loaded(partition) {
            return Ok(());
        }
        let _permit = self.coordinators.permit().await?;
        self.load_locked(ctx, partition).await
    }

    async fn load_locked(&self, ctx: &Rc<ShardCtx>, partition: i32) -> Result<(), i16> {
        self.unload_stale(ctx, Some(partition));
        if self.coordinators.is_loaded(partition) {
            return Ok(());
        }
        let tp = TopicPartition::new(OFFSETS_TOPIC.to_string(), partition);
        // The coordinator lives on the partition's leader, at its leader epoch.
        let Some(epoch) = coordinator_log::led_epoch(ctx, &tp) else {
            return Err(ResponseError::NotCoordinator.code());
        };
        let entries = coordinator_log::replay(ctx, &tp)
            .await
            .map_err(|_| coordinator_not_available())?;
        let mut coordinator = GroupCoordinator::new(self.config.clone());
        let count = entries.len();
        let load = entries.iter().map(|e| match e {
            LogEntry::Record {
                key,
                value,
                producer_id,
                ..
            } => LoadEntry::Record {
                key,
                value: value.as_deref(),
                producer_id: *producer_id,
            },
            LogEntry::Marker {
                producer_id,
                commit,
            } => LoadEntry::TxnMarker {
                producer_id: *producer_id,
                commit: *commit,
            },
        });
        if let Err(e) = coordinator.load_entries(load, now_ms()) {
            tracing::error!(%tp, error = %e, "cannot load __consumer_offsets");
            return Err(coordinator_not_available());
        }
        if count > 0 {
            tracing::info!(%tp, records = count, "group coordinator loaded");
        } else {
            tracing::debug!(%tp, "group coordinator loaded (empty)");
        }
        self.coordinators.insert(partition, coordinator, epoch);
        Ok(())
    }

    /// Unloads the coordinators of partitions this node no longer leads at the epoch
    /// they were loaded at; their parked JoinGroup/SyncGroup calls get NOT_COORDINATOR,
    /// so the members look up the new coordinator.
    fn unload_stale(&self, ctx: &ShardCtx, only: Option<i32>) {
        for (partition, coordinator) in self.coordinators.take_stale(ctx, OFFSETS_TOPIC, only) {
            let parked = coordinator.parked_waiters();
            tracing::info!(
                partition,
                parked = parked.len(),
                "group coordinator unloaded: this broker no longer leads its partition"
            );
            let mut waiters = self.waiters.borrow_mut();
            for id in parked {
                if let Some(w) = waiters.remove(&id) {
                    answer_not_coordinator(w);
                }
            }
        }
    }

    /// Calls the coordinator of `partition`, appends the records of its effects, then
    /// delivers the parked responses. `Err`: a Kafka error code (coordinator not
    /// available, or the records could not be written).
    pub async fn call<R>(
        &self,
        ctx: &Rc<ShardCtx>,
        partition: i32,
        f: impl FnOnce(&mut GroupCoordinator, i64) -> (R, Effects),
    ) -> Result<R, i16> {
        if self.closing.get() {
            return Err(ResponseError::NotCoordinator.code());
        }
        let _permit = self.coordinators.permit().await?;
        self.load_locked(ctx, partition).await?;
        let (out, effects) = {
            let mut all = self.coordinators.borrow_mut();
            let coordinator = all
                .get_mut(&partition)
                .ok_or_else(coordinator_not_available)?;
            f(coordinator, now_ms())
        };
        let written = self.append(ctx, &effects.records).await;
        self.deliver(effects, written.err());
        written.map(|()| out)
    }

    /// Reads a loaded coordinator (loading it first).
    pub async fn read<R>(
        &self,
        ctx: &Rc<ShardCtx>,
        partition: i32,
        f: impl FnOnce(&GroupCoordinator) -> R,
    ) -> Result<R, i16> {
        self.ensure_loaded(ctx, partition).await?;
        let all = self.coordinators.borrow();
        let coordinator = all.get(&partition).ok_or_else(coordinator_not_available)?;
        Ok(f(coordinator))
    }

    /// The offsets partitions loaded here.
    pub fn loaded_partitions(&self) -> Vec<i32> {
        self.coordinators.partitions()
    }

    async fn append(&self, ctx: &Rc<ShardCtx>, records: &[CoordinatorRecord]) -> Result<(), i16> {
        let mut start = 0;
        while start < records.len() {
            let partition = records[start].partition;
            let end = records[start..]
                .iter()
                .position(|r| r.partition != partition)
                .map_or(records.len(), |n| start + n);
            self.append_batch(ctx, partition, &records[start..end])
                .await?;
            start = end;
        }
        Ok(())
    }

    async fn append_batch(
        &self,
        ctx: &Rc<ShardCtx>,
        partition: i32,
        records: &[CoordinatorRecord],
    ) -> Result<(), i16> {
        let tp = TopicPartition::new(OFFSETS_TOPIC.to_string(), partition);
        let batch =
            coordinator_log::batch_of(records.iter().map(|r| (r.key.as_ref(), r.value.as_deref())));
        match coordinator_log::append(ctx, &tp, batch).await {
            Ok(_) => Ok(()),
            Err(CoordinatorLogError::Log { .. }) => Err(ResponseError::UnknownServerError.code()),
            Err(_) => Err(coordinator_not_available()),
        }
    }

    fn deliver(&self, effects: Effects, failed: Option<i16>) {
        let mut waiters = self.waiters.borrow_mut();
        for (id, mut resp) in effects.join_responses {
            if let (Some(code), 0) = (failed, resp.error_code) {
                resp.error_code = code;
            }
            if let Some(Waiter::Join(tx)) = waiters.remove(&id) {
                let _ = tx.send(resp);
            }
        }
        for (id, mut resp) in effects.sync_responses {
            if let (Some(code), 0) = (failed, resp.error_code) {
                resp.error_code = code;
            }
            if let Some(Waiter::Sync(tx)) = waiters.remove(&id) {
                let _ = tx.send(resp);
            }
        }
    }

    /// At shutdown: answers every parked JoinGroup/SyncGroup with NOT_COORDINATOR (the
    /// client looks the coordinator up again) so no connection waits for a rebalance
    /// that will not complete here, and refuses further calls.
    pub fn shutdown(&self) {
        self.closing.set(true);
        for (_, waiter) in self.waiters.borrow_mut().drain() {
            answer_not_coordinator(waiter);
        }
    }

    /// Follows leadership every [`TICK_EVERY`]: unloads the coordinators of partitions
    /// this node stopped leading, loads those of the offsets partitions this shard now
    /// leads, and ticks due coordinators, until the shard stops.
    pub async fn run(self: Rc<Self>, ctx: Rc<ShardCtx>) {
        loop {
            self.unload_stale(&ctx, None);
            self.load_owned(&ctx).await;
            let now = now_ms();
            let due: Vec<i32> = self
                .coordinators
                .borrow()
                .iter()
                .filter(|(_, c)| c.next_deadline_ms().is_some_and(|d| d <= now))
                .map(|(p, _)| *p)
                .collect();
            for p in due {
                if let Err(code) = self.call(&ctx, p, |c, now| ((), c.tick(now))).await {
                    tracing::warn!(partition = p, code, "group coordinator tick failed");
                }
            }
            glommio::timer::sleep(TICK_EVERY).await;
        }
    }

    /// Loads the coordinators of the offsets partitions this shard holds and leads.
    async fn load_owned(&self, ctx: &Rc<ShardCtx>) {
        for p in self.coordinators.to_load(ctx, OFFSETS_TOPIC) {
            if let Err(code) = self.ensure_loaded(ctx, p).await {
                tracing::debug!(partition = p, code, "group coordinator not loaded");
            }
        }
    }
}

/// Answers a parked JoinGroup/SyncGroup with NOT_COORDINATOR (the client looks the
/// coordinator up again).
fn answer_not_coordinator(waiter: Waiter) {
    let code = ResponseError::NotCoordinator.code();
    match waiter {
        Waiter::Join(tx) => {
            let _ = tx.send(JoinGroupResponse::failed(code, ""));
        }
        Waiter::Sync(tx) => {
            let _ = tx.send(SyncGroupResponse::failed(code));
        }
    }
}

/// A request to a group coordinator, as it travels to the shard that holds it.
#[derive(Debug, Clone)]
pub enum GroupCall {
    Join(JoinGroupRequest),
    Sync(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    Leave(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    OffsetDelete {
        group_id: String,
        partitions: Vec<TopicPartition>,
    },
    DeleteGroups(Vec<String>),
    DescribeGroups(Vec<String>),
}

/// A group coordinator's answer to a [`GroupCall`], variant for variant.
#[derive(Debug)]
pub enum GroupAnswer {
    Joined(JoinGroupResponse),
    Synced(SyncGroupResponse),
    /// Heartbeat: the error code.
    Beat(i16),
    Left(LeaveGroupResponse),
    Committed(OffsetCommitResponse),
    Fetched(OffsetFetchResponse),
    OffsetsDeleted(OffsetDeleteResponse),
    Deleted(Vec<(String, i16)>),
    Described(Vec<DescribedGroup>),
}

crate::coordinator_log::answer_carries! {
    GroupAnswer, "group";
    Joined => JoinGroupResponse,
    Synced => SyncGroupResponse,
    Beat => i16,
    Left => LeaveGroupResponse,
    Committed => OffsetCommitResponse,
    Fetched => OffsetFetchResponse,
    OffsetsDeleted => OffsetDeleteResponse,
    Deleted => Vec<(String, i16)>,
    Described => Vec<DescribedGroup>,
}

impl GroupRuntime {
    /// Carries `call` out against the coordinator of `partition` on this shard.
    pub async fn serve(
        &self,
        ctx: &Rc<ShardCtx>,
        partition: i32,
        call: GroupCall,
    ) -> Result<GroupAnswer, i16> {
        let gone = || ResponseError::CoordinatorNotAvailable.code();
        match call {
            GroupCall::Join(join) => {
                let (waiter, rx) = self.register_join();
                if let Err(code) = self
                    .call(ctx, partition, |c, now| {
                        ((), c.join_group(join, waiter, now))
                    })
                    .await
                {
                    self.forget_waiter(waiter);
                    return Err(code);
                }
                rx.await.map(GroupAnswer::Joined).map_err(|_| gone())
            }
            GroupCall::Sync(sync) => {
                let (waiter, rx) = self.register_sync();
                if let Err(code) = self
                    .call(ctx, partition, |c, now| {
                        ((), c.sync_group(sync, waiter, now))
                    })
                    .await
                {
                    self.forget_waiter(waiter);
                    return Err(code);
                }
                rx.await.map(GroupAnswer::Synced).map_err(|_| gone())
            }
            GroupCall::Heartbeat(beat) => self
                .call(ctx, partition, |c, now| c.heartbeat(&beat, now))
                .await
                .map(GroupAnswer::Beat),
            GroupCall::Leave(leave) => self
                .call(ctx, partition, |c, now| c.leave_group(&leave, now))
                .await
                .map(GroupAnswer::Left),
            GroupCall::OffsetCommit(commit) => self
                .call(ctx, partition, |c, now| c.offset_commit(&commit, now))
                .await
                .map(GroupAnswer::Committed),
            GroupCall::TxnOffsetCommit(commit) => self
                .call(ctx, partition, |c, now| c.txn_offset_commit(&commit, now))
                .await
                .map(GroupAnswer::Committed),
            GroupCall::OffsetFetch(req) => self
                .read(ctx, partition, |c| c.offset_fetch(&req))
                .await
                .map(GroupAnswer::Fetched),
            GroupCall::OffsetDelete {
                group_id,
                partitions,
            } => self
                .call(ctx, partition, |c, now| {
                    c.offset_delete(&group_id, &partitions, now)
                })
                .await
                .map(GroupAnswer::OffsetsDeleted),
            GroupCall::DeleteGroups(ids) => self
                .call(ctx, partition, |c, now| c.delete_groups(&ids, now))
                .await
                .map(GroupAnswer::Deleted),
            GroupCall::DescribeGroups(ids) => self
                .read(ctx, partition, |c| c.describe_groups(&ids))
                .await
                .map(GroupAnswer::Described),
        }
    }

    /// ListGroups on this shard: the groups of every loaded coordinator in `states`.
    pub async fn list_groups(&self, ctx: &Rc<ShardCtx>, states: &[String]) -> Vec<ListedGroup> {
        let mut out = Vec::new();
        for p in self.loaded_partitions() {
            if let Ok(groups) = self.read(ctx, p, |c| c.list_groups(states)).await {
                out.extend(groups);
            }
        }
        out
    }
}

/// Sends `call` to the shard owning `group_id`'s coordinator, for the group's offsets
/// partition, and returns the answer's value. `Err`: a Kafka error code.
pub async fn call_group<T: TryFrom<GroupAnswer, Error = i16>>(
    ctx: &Rc<ShardCtx>,
    group_id: &str,
    call: GroupCall,
) -> Result<T, i16> {
    let runtime = ctx.group_runtime().ok_or_else(coordinator_not_available)?;
    let image = ctx.metadata.load();
    let topic = image
        .topics
        .get(OFFSETS_TOPIC)
        .ok_or_else(coordinator_not_available)?;
    if topic.partitions.len() as i32 != runtime.config().offsets_topic_partitions {
        tracing::warn!(
            have = topic.partitions.len(),
            want = runtime.config().offsets_topic_partitions,
            "__consumer_offsets partition count differs from the coordinator's"
        );
    }
    let partition = runtime.partition_for(group_id);
    let shard = topic
        .partitions
        .get(partition as usize)
        .ok_or_else(coordinator_not_available)?
        .shard;
    match ctx
        .ask(shard, ShardRequest::Group { partition, call })
        .await
    {
        Ok(ShardReply::Group(answer)) => T::try_from(answer?),
        _ => Err(coordinator_not_available()),
    }
}

/// ListGroups across every shard: the groups in `states` (all when empty).
pub async fn list_all_groups(ctx: &Rc<ShardCtx>, states: Vec<String>) -> Vec<ListedGroup> {
    let mut out = Vec::new();
    for shard in 0..ctx.router.shard_count() {
        let request = ShardRequest::ListGroups {
            states: states.clone(),
        };
        if let Ok(ShardReply::Groups(groups)) = ctx.ask(shard, request).await {
            out.extend(groups);
        }
    }
    out
}
