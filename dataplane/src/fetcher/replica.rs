//! Followers: Kafka's `ReplicaFetcherThread`. A shard that holds follower replicas runs
//! one [`ReplicaFetcher`] task per leader broker for them, on one connection to that
//! leader (connections between brokers are per shard and leader, never per partition).
//! Each Fetch names this node as the replica (`ReplicaState`), carries every partition's
//! log end, current leader epoch and `LastFetchedEpoch`, and the leader answers with
//! records up to its log end and its high watermark; its `DivergingEpoch` answers cut the
//! local log where the histories part (`engine::truncation_target`, the same rule the
//! mirror fetcher follows). Like the mirror fetcher it talks to its leader through the
//! fetch engine's `LeaderEndpoint` (a `KafkaConnection` here). Fetched batches are CRC-checked and appended exactly as the
//! leader stored them (offsets, epochs, producer ids), and the follower's high watermark
//! is the leader's, capped at its own log end.
//!
//! On the leader side the same Fetch moves the follower's position ([`on_replica_fetch`]),
//! which may move the high watermark (and so complete acks=all produces) or bring the
//! follower back into the ISR; [`maintain_isr`] drops followers that lag
//! longer than `replica.lag.time.max.ms`. ISR changes go to the controller as
//! conditional records, fenced by the partition epoch.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest};
use kafka_protocol::ResponseError;

use super::engine;
use super::mirror::split_batches;
use super::throttle::{self, Side};
use crate::client::{ClientError, ConnectionConfig, KafkaConnection};
use crate::controller::AdminRequest;
use crate::partition::{Leadership, Partition};
use crate::shard::{now_ms, ShardCtx};
use crate::types::{LeaderEpoch, Offset, TopicPartition};

/// How followers fetch and when the leader drops them from the ISR (Kafka's
/// `replica.*` broker configs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `replica.lag.time.max.ms`: a follower that has not caught up for this long leaves
    /// the ISR.
    pub lag_time_max_ms: i64,
    /// `replica.fetch.max.bytes`: per partition.
    pub fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`.
    pub fetch_response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms`.
    pub fetch_wait_max_ms: i32,
    /// `replica.fetch.min.bytes`.
    pub fetch_min_bytes: i32,
    /// `replica.fetch.backoff.ms`: the wait after a failed Fetch.
    pub fetch_backoff_ms: u64,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            lag_time_max_ms: 30_000,
            fetch_max_bytes: 1 << 20,
            fetch_response_max_bytes: 10 << 20,
            fetch_wait_max_ms: 500,
            fetch_min_bytes: 1,
            fetch_backoff_ms: 1000,
        }
    }
}

/// One followed partition.
#[derive(Debug, Clone)]
struct Follow {
    /// The leader epoch the partition is followed at (the Fetch's current leader epoch).
    leader_epoch: i32,
    /// Changes whenever the partition is (re)added: an answer to an older Fetch is
    /// dropped.
    generation: u64,
    retry_at: Option<Instant>,
    errors: u32,
}

/// The partitions this shard follows from one leader, and the task that fetches them.
#[derive(Debug)]
pub struct ReplicaFetcher {
    leader: i32,
    partitions: RefCell<BTreeMap<TopicPartition, Follow>>,
    wake: event_listener::Event,
    stopped: Cell<bool>,
}

/// A shard's replica fetchers, by leader.
#[derive(Debug, Default)]
pub struct ReplicaFetchers {
    by_leader: RefCell<BTreeMap<i32, Rc<ReplicaFetcher>>>,
    generations: Cell<u64>,
}

impl ReplicaFetchers {
    /// The partition follows `leadership`'s leader from now on (or nobody, when this
    /// node leads it or no one does). Idempotent.
    pub fn follow(ctx: &Rc<ShardCtx>, tp: &TopicPartition, leadership: &Leadership) {
        let me = ctx.metadata.load().node_id;
        let this = &ctx.replica_fetchers;
        let leader = leadership.leader;
        let same = this
            .by_leader
            .borrow()
            .get(&leader)
            .and_then(|f| {
                f.partitions
                    .borrow()
                    .get(tp)
                    .map(|p| p.leader_epoch == leadership.leader_epoch.0)
            })
            .unwrap_or(false);
        if same {
            return;
        }
        this.unfollow(tp);
        if leader < 0 || leader == me {
            return;
        }
        let generation = this.generations.get() + 1;
        this.generations.set(generation);
        let fetcher = {
            let mut all = this.by_leader.borrow_mut();
            let f = all.entry(leader).or_insert_with(|| {
                let f = Rc::new(ReplicaFetcher {
                    leader,
                    partitions: RefCell::new(BTreeMap::new()),
                    wake: event_listener::Event::new(),
                    stopped: Cell::new(false),
                });
                glommio::spawn_local(Rc::clone(&f).run(Rc::clone(ctx))).detach();
                f
            });
            Rc::clone(f)
        };
        fetcher.partitions.borrow_mut().insert(
            tp.clone(),
            Follow {
                leader_epoch: leadership.leader_epoch.0,
                generation,
                retry_at: None,
                errors: 0,
            },
        );
        fetcher.wake.notify(usize::MAX);
        tracing::debug!(%tp, leader, epoch = leadership.leader_epoch.0, "following");
    }

    /// The partition is followed from no one.
    pub fn unfollow(&self, tp: &TopicPartition) {
        let mut all = self.by_leader.borrow_mut();
        let mut empty = None;
        for (leader, f) in all.iter() {
            if f.partitions.borrow_mut().remove(tp).is_some() && f.partitions.borrow().is_empty() {
                empty = Some(*leader);
            }
        }
        if let Some(leader) = empty {
            if let Some(f) = all.remove(&leader) {
                f.stop();
            }
        }
    }

    /// The leader `tp` is followed from, if any.
    pub fn leader_of(&self, tp: &TopicPartition) -> Option<i32> {
        self.by_leader
            .borrow()
            .iter()
            .find(|(_, f)| f.partitions.borrow().contains_key(tp))
            .map(|(l, _)| *l)
    }

    /// Stops every fetcher (shutdown).
    pub fn shutdown(&self) {
        for (_, f) in std::mem::take(&mut *self.by_leader.borrow_mut()) {
            f.stop();
        }
    }
}

/// What a follower's answer for one partition asks for.
enum Outcome {
    Fine,
    Retry(String),
}

impl ReplicaFetcher {
    fn stop(&self) {
        self.stopped.set(true);
        self.wake.notify(usize::MAX);
    }

    fn ready(&self, now: Instant) -> Vec<(TopicPartition, Follow)> {
        self.partitions
            .borrow()
            .iter()
            .filter(|(_, f)| f.retry_at.is_none_or(|at| at <= now))
            .map(|(tp, f)| (tp.clone(), f.clone()))
            .collect()
    }

    /// Still following `tp` under `generation`.
    fn accepts(&self, tp: &TopicPartition, generation: u64) -> bool {
        !self.stopped.get()
            && self
                .partitions
                .borrow()
                .get(tp)
                .is_some_and(|f| f.generation == generation)
    }

    fn backoff(&self, tp: &TopicPartition, generation: u64, base: Duration, why: &str) {
        if let Some(f) = self.partitions.borrow_mut().get_mut(tp) {
            if f.generation != generation {
                return;
            }
            f.errors = f.errors.saturating_add(1);
            let wait = (Duration::from_millis(50) * (1u32 << f.errors.min(5))).min(base);
            f.retry_at = Some(Instant::now() + wait);
            if f.errors == 1 || f.errors.is_multiple_of(20) {
                tracing::info!(%tp, leader = self.leader, errors = f.errors, why, "replica fetch backing off");
            }
        }
    }

    fn clear_errors(&self, tp: &TopicPartition, generation: u64) {
        if let Some(f) = self.partitions.borrow_mut().get_mut(tp) {
            if f.generation == generation {
                f.errors = 0;
                f.retry_at = None;
            }
        }
    }

    async fn idle(&self, wait: Duration) {
        let listener = self.wake.listen();
        futures_lite::future::or(
            async {
                listener.await;
            },
            glommio::timer::sleep(wait),
        )
        .await;
    }

    async fn run(self: Rc<Self>, ctx: Rc<ShardCtx>) {
        let config = ctx.settings.replication.clone();
        let backoff = Duration::from_millis(config.fetch_backoff_ms.max(1));
        let mut conn: Option<KafkaConnection> = None;
        while !self.stopped.get() {
            let ready = self.ready(Instant::now());
            if ready.is_empty() {
                self.idle(Duration::from_millis(100)).await;
                continue;
            }
            if conn.as_ref().is_none_or(|c| c.is_broken()) {
                conn = None;
                let Some(addr) = ctx.metadata.load().broker_address(self.leader) else {
                    self.idle(backoff).await;
                    continue;
                };
                let cc = ConnectionConfig {
                    client_id: format!("twinlog-replica-{}", ctx.id),
                    connect_timeout: Duration::from_secs(5),
                    request_timeout: Duration::from_millis(
                        config.fetch_wait_max_ms.max(0) as u64 + 30_000,
                    ),
                    response_bytes_max: (config.fetch_response_max_bytes.max(1 << 20) as usize)
                        .saturating_mul(2),
                    security: crate::client::security::inter_broker(),
                };
                match KafkaConnection::connect_with(&addr.to_string(), &cc).await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        tracing::debug!(leader = self.leader, error = %e, "cannot reach the leader");
                        self.idle(backoff).await;
                        continue;
                    }
                }
            }
            let Some(c) = conn.as_mut() else { continue };
            if let Err(e) = self.fetch_round(&ctx, c, &config, ready).await {
                tracing::debug!(leader = self.leader, error = %e, "replica fetch failed");
                conn = None;
                self.idle(backoff).await;
            }
        }
    }

    async fn fetch_round(
        &self,
        ctx: &Rc<ShardCtx>,
        conn: &mut impl engine::LeaderEndpoint,
        config: &ReplicationConfig,
        ready: Vec<(TopicPartition, Follow)>,
    ) -> Result<(), ClientError> {
        let image = ctx.metadata.load();
        let Some(version) = conn.pick_version(ApiKey::Fetch as i16, 12, 16) else {
            return Err(ClientError::Unsupported {
                api_key: ApiKey::Fetch as i16,
                version: 12,
                broker_range: None,
            });
        };
        let mut by_topic: BTreeMap<String, (uuid::Uuid, Vec<FetchPartition>)> = BTreeMap::new();
        // Per partition: the offset asked for and the generation asked under.
        let mut asked: BTreeMap<TopicPartition, (i64, u64)> = BTreeMap::new();
        let now = Instant::now();
        let quota = &ctx.replication_quotas.1;
        // Per partition fetched under the follower throttle: its rate.
        let mut throttled: BTreeMap<TopicPartition, u64> = BTreeMap::new();
        for (tp, follow) in &ready {
            let Some(topic) = image.topic(&tp.topic) else {
                continue;
            };
            let Some(partition) = ctx.partition(tp) else {
                continue;
            };
            // A partition outside the ISR that this follower throttles waits while the
            // shard's budget is spent (Kafka's follower replication quota).
            let shards = ctx.router.shard_count();
            let me = image.node_id;
            if let Some(rate) = throttle::rate(&image, &partition, me, Side::Follower, shards) {
                if !quota.allows(rate, now) {
                    continue;
                }
                throttled.insert(tp.clone(), rate);
            }
            let Ok(log) = partition.read().await else {
                continue;
            };
            let end = log.log_end_offset().0;
            let last_epoch = log.latest_epoch().map_or(-1, |e| e.0);
            let log_start = log.log_start_offset().0;
            drop(log);
            asked.insert(tp.clone(), (end, follow.generation));
            by_topic
                .entry(tp.topic.clone())
                .or_insert_with(|| (topic.id, Vec::new()))
                .1
                .push(
                    FetchPartition::default()
                        .with_partition(tp.partition)
                        .with_current_leader_epoch(follow.leader_epoch)
                        .with_fetch_offset(end)
                        .with_last_fetched_epoch(last_epoch)
                        .with_log_start_offset(log_start)
                        .with_partition_max_bytes(config.fetch_max_bytes),
                );
        }
        if asked.is_empty() {
            self.idle(Duration::from_millis(100)).await;
            return Ok(());
        }
        let me = BrokerId(image.node_id);
        let mut request = FetchRequest::default()
            .with_max_wait_ms(config.fetch_wait_max_ms)
            .with_min_bytes(config.fetch_min_bytes)
            .with_max_bytes(config.fetch_response_max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(name, (id, partitions))| {
                        let t = FetchTopic::default().with_partitions(partitions);
                        if version >= 13 {
                            t.with_topic_id(id)
                        } else {
                            t.with_topic(crate::api::topic_name(&name))
                        }
                    })
                    .collect(),
            );
        if version >= 15 {
            request.replica_state = ReplicaState::default()
                .with_replica_id(me)
                .with_replica_epoch(-1);
        } else {
            request.replica_id = me;
        }
        let response = conn.fetch(&request, version).await?;
        if response.error_code != 0 {
            for (tp, (_, generation)) in &asked {
                self.backoff(
                    tp,
                    *generation,
                    Duration::from_millis(config.fetch_backoff_ms),
                    "fetch refused",
                );
            }
            return Ok(());
        }
        let image = ctx.metadata.load();
        for topic in response.responses {
            let name = if version >= 13 {
                match image.topic_by_id(topic.topic_id) {
                    Some(t) => t.name.clone(),
                    None => continue,
                }
            } else {
                topic.topic.0.to_string()
            };
            for p in topic.partitions {
                let tp = TopicPartition::new(name.clone(), p.partition_index);
                let Some((fetch_offset, generation)) = asked.get(&tp).copied() else {
                    continue;
                };
                if !self.accepts(&tp, generation) {
                    continue;
                }
                if let (Some(rate), Some(records)) = (throttled.get(&tp), &p.records) {
                    quota.record(records.len(), *rate, Instant::now());
                }
                let outcome = match ctx.partition(&tp) {
                    Some(partition) => {
                        self.take_answer(&tp, &partition, generation, fetch_offset, p)
                            .await
                    }
                    None => Outcome::Retry("not open".into()),
                };
                match outcome {
                    Outcome::Fine => self.clear_errors(&tp, generation),
                    Outcome::Retry(why) => self.backoff(
                        &tp,
                        generation,
                        Duration::from_millis(config.fetch_backoff_ms),
                        &why,
                    ),
                }
            }
        }
        Ok(())
    }

    /// Applies the leader's answer for one partition: a cut where histories diverge,
    /// the fetched batches, the leader's high watermark and log start.
    async fn take_answer(
        &self,
        tp: &TopicPartition,
        partition: &Partition,
        generation: u64,
        fetch_offset: i64,
        p: kafka_protocol::messages::fetch_response::PartitionData,
    ) -> Outcome {
        if p.error_code == ResponseError::OffsetOutOfRange.code() {
            return self
                .out_of_range(tp, partition, generation, fetch_offset, &p)
                .await;
        }
        if p.error_code != 0 {
            return Outcome::Retry(error_name(p.error_code));
        }
        let Ok(mut log) = partition.write().await else {
            return Outcome::Retry("closed".into());
        };
        if !self.accepts(tp, generation) || partition.is_leader() {
            return Outcome::Fine;
        }
        let end = log.log_end_offset().0;
        if end != fetch_offset {
            // The log moved while the Fetch was out (a cut): ask again from its end.
            return Outcome::Fine;
        }
        if p.diverging_epoch.epoch >= 0 && p.diverging_epoch.end_offset >= 0 {
            let (epoch, at) = (p.diverging_epoch.epoch, p.diverging_epoch.end_offset);
            let (le, lo) = log.end_offset_for_epoch(LeaderEpoch(epoch));
            let cut = engine::truncation_target(epoch, at, (le.0, lo.0), end);
            if let Some(target) = cut.target {
                tracing::info!(%tp, leader = self.leader, from = end, to = target, epoch, "follower truncates where the leader's history diverges");
                if let Err(e) = log.truncate_to(Offset(target)).await {
                    return Outcome::Retry(format!("truncation failed: {e}"));
                }
            }
            return Outcome::Fine;
        }
        partition.set_leader_high_watermark(p.high_watermark);
        let records = p.records.unwrap_or_default();
        if !records.is_empty() {
            let (batches, complete) = match split_batches(&records) {
                Ok(b) => b,
                Err(e) => return Outcome::Retry(e),
            };
            if let Some(first) = batches.iter().position(|b| b.last_offset().0 >= end) {
                if batches[first].base_offset().0 < end {
                    if end == log.log_start_offset().0 {
                        if let Err(e) = log
                            .truncate_fully_and_start_at(batches[first].base_offset())
                            .await
                        {
                            return Outcome::Retry(e.to_string());
                        }
                    } else {
                        return Outcome::Retry(format!(
                            "the leader's batch {}..={} straddles the local log end {end}",
                            batches[first].base_offset().0,
                            batches[first].last_offset().0
                        ));
                    }
                }
                let start: usize = batches[..first].iter().map(|b| b.size_in_bytes()).sum();
                if let Err(e) = log
                    .append_passthrough_verified(
                        records.slice(start..complete),
                        &batches[first..],
                        now_ms(),
                    )
                    .await
                {
                    return Outcome::Retry(format!("append failed: {e}"));
                }
            }
        }
        let new_end = log.log_end_offset().0;
        if p.log_start_offset > log.log_start_offset().0 {
            let target = Offset(p.log_start_offset.min(new_end));
            if let Err(e) = log.advance_log_start_offset(target).await {
                tracing::warn!(%tp, error = %e, "could not follow the leader's log start");
            }
        }
        Outcome::Fine
    }

    /// OFFSET_OUT_OF_RANGE: the leader's log starts after the local end (retention,
    /// DeleteRecords): start again at its log start. Ahead of the leader with matching
    /// epochs cannot happen (the epoch check answers first); it is retried.
    async fn out_of_range(
        &self,
        tp: &TopicPartition,
        partition: &Partition,
        generation: u64,
        fetch_offset: i64,
        p: &kafka_protocol::messages::fetch_response::PartitionData,
    ) -> Outcome {
        let Ok(mut log) = partition.write().await else {
            return Outcome::Retry("closed".into());
        };
        if !self.accepts(tp, generation) || log.log_end_offset().0 != fetch_offset {
            return Outcome::Fine;
        }
        if p.log_start_offset > fetch_offset {
            tracing::info!(%tp, from = fetch_offset, to = p.log_start_offset, "the leader's log starts past this follower's end: starting over there");
            return match log
                .truncate_fully_and_start_at(Offset(p.log_start_offset))
                .await
            {
                Ok(()) => Outcome::Fine,
                Err(e) => Outcome::Retry(e.to_string()),
            };
        }
        // Kafka's `handleOutOfRangeError`: the leader's log ends before this follower's
        // (it was cut with no epoch left to answer a divergence check by, a mirror's
        // PREPARING on an empty epoch cache): cut back to what the leader has committed
        // and fetch the rest from it.
        if let Some(target) =
            out_of_range_cut(fetch_offset, p.high_watermark, log.log_start_offset().0)
        {
            tracing::warn!(%tp, leader = self.leader, from = fetch_offset, to = target, "the leader's log ends before this follower's: truncating to its high watermark");
            return match log.cut_to(Offset(target)).await {
                Ok(()) => Outcome::Fine,
                Err(e) => Outcome::Retry(format!("truncation failed: {e}")),
            };
        }
        Outcome::Retry("offset out of range".into())
    }
}

/// Where a follower whose Fetch from `fetch_offset` was out of range cuts its log:
/// back to the leader's high watermark `leader_hw` (never before its own log start)
/// when the leader's log ends before this follower's; `None` otherwise.
fn out_of_range_cut(fetch_offset: i64, leader_hw: i64, log_start: i64) -> Option<i64> {
    (leader_hw >= 0 && leader_hw < fetch_offset).then_some(leader_hw.max(log_start))
}

fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?}"),
        None => format!("error {code}"),
    }
}

/// The leader's side of a follower's Fetch of `partition` from `fetch_offset`: its
/// position moves, the high watermark follows (taking the writer only when it can
/// move), and a follower that caught up is proposed for the ISR.
pub async fn on_replica_fetch(
    ctx: &Rc<ShardCtx>,
    partition: &Rc<Partition>,
    replica: i32,
    fetch_offset: i64,
) {
    let (end, hw) = match partition.read().await {
        Ok(log) => (log.log_end_offset().0, log.high_watermark().0),
        Err(_) => return,
    };
    let now = now_ms();
    let seen = partition.on_follower_fetch(replica, fetch_offset, end, hw, now);
    if seen.high_watermark_may_move {
        // The writer's drop moves the high watermark and wakes whoever waits on it.
        drop(partition.write().await);
    }
    if seen.may_join_isr {
        let lag_max = ctx.settings.replication.lag_time_max_ms;
        if let Some(change) = partition.isr_change(Some(replica), now, lag_max, ISR_RETRY_MS) {
            ask_isr_change(ctx, partition.topic_partition(), change);
        }
    }
}

/// An ISR change asked for and not yet in the image is asked again after this long.
const ISR_RETRY_MS: i64 = 2_000;

fn ask_isr_change(ctx: &ShardCtx, tp: &TopicPartition, (was, isr): (Leadership, Vec<i32>)) {
    let image = ctx.metadata.load();
    let Some(topic) = image.topic(&tp.topic) else {
        return;
    };
    tracing::info!(%tp, from = ?was.isr, to = ?isr, "asking the controller to change the ISR");
    let rx = ctx.controller.submit(AdminRequest::AlterPartition {
        topic_id: topic.id,
        partition: tp.partition,
        leader_epoch: was.leader_epoch.0,
        partition_epoch: was.partition_epoch,
        isr,
    });
    // The answer is the next image; the receiver only says the request was queued.
    drop(rx);
}

/// Every `replica.lag.time.max.ms / 2`, the ISR of each partition this shard leads
/// drops the followers that have not caught up within `replica.lag.time.max.ms`.
pub async fn maintain_isr(ctx: Rc<ShardCtx>) {
    let lag_max = ctx.settings.replication.lag_time_max_ms.max(1);
    let every = Duration::from_millis((lag_max / 2).clamp(50, 5_000) as u64);
    loop {
        glommio::timer::sleep(every).await;
        let now = now_ms();
        for p in ctx.partitions() {
            if !p.is_leader() || p.leadership().isr.len() <= 1 {
                continue;
            }
            if let Some(change) = p.isr_change(None, now, lag_max, ISR_RETRY_MS) {
                ask_isr_change(&ctx, p.topic_partition(), change);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::out_of_range_cut;

    #[test]
    fn a_follower_ahead_of_its_leader_cuts_back_to_the_leaders_high_watermark() {
        // The leader was cut to 0 with no epoch left: the follower at 2 starts over.
        assert_eq!(out_of_range_cut(2, 0, 0), Some(0));
        assert_eq!(out_of_range_cut(10, 7, 0), Some(7));
        // Never before its own log start.
        assert_eq!(out_of_range_cut(10, 3, 5), Some(5));
        // Behind the leader, or no high watermark in the answer: nothing to cut.
        assert_eq!(out_of_range_cut(4, 7, 0), None);
        assert_eq!(out_of_range_cut(7, 7, 0), None);
        assert_eq!(out_of_range_cut(4, -1, 0), None);
    }
}
