//! `MirrorFetcher`: one task per (shard, mirror), in the shape of Kafka's
//! `AbstractFetcherThread`. It is a consumer of the source cluster: Metadata to find
//! partition leaders, consumer Fetch (replica id -1, READ_UNCOMMITTED) for data.
//! Divergence from the source's history is watched the whole time, not only at start:
//! every Fetch (v12+) carries the epoch of the last local batch (`LastFetchedEpoch`) and
//! a `DivergingEpoch` answer truncates; OffsetsForLeaderEpoch checks when a partition
//! (re)starts, when the source leader or its epoch changes, and on
//! OFFSET_OUT_OF_RANGE before any cut (the decisions are `engine`'s). Fetched record sets are split into batches by header, each CRC is
//! checked, and the bytes are appended with `append_passthrough`: same offsets, epochs,
//! producer ids and sequences; nothing is decompressed or re-encoded.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest,
};
use kafka_protocol::ResponseError;

use super::engine::{
    self, FetchError, LeaderDirectory, LeaderEndpoint, OutOfRange, PartitionError,
    PartitionFetchState, SourceDirectory, Truncation,
};
use super::{MirrorEvent, MirrorFetchConfig, MirrorPartitionStatus};
use crate::client::cluster::ClusterMetadata;
use crate::client::ClientError;
use crate::controller::{AdminRequest, AdminResponse};
use crate::shard::{now_ms, ShardCtx};
use crate::types::{LeaderEpoch, Offset, TopicPartition};
use crate::wire::batch::{frame_size, layout};
use crate::wire::mirror::{MIRROR_SOURCE_TOPIC_ID_CONFIG, NO_SOURCE_TOPIC_ID};
use crate::wire::RecordBatch;

mod lag;

#[cfg(test)]
mod divergence_tests;

/// Bump the destination epoch when a mirrored batch epoch comes this close to it
/// (reference §6.5, `LEADER_EPOCH_BUMP_THRESHOLD`).
const EPOCH_BUMP_THRESHOLD: i32 = 3;
/// How far above the source epoch a bump goes (`LEADER_EPOCH_BUMP_INCREMENT`).
const EPOCH_BUMP_INCREMENT: i32 = 10;
/// A proactive epoch bump asked for is not asked again for this long, while the image
/// has not caught up with it.
const BUMP_REQUEST_TTL: Duration = Duration::from_secs(5);
/// Idle wait when there is nothing to fetch.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// A fetched record set on its way to the log: the pipeline's second stage. The next
/// Fetch is already in flight while these are appended.
struct Fetched {
    tp: TopicPartition,
    /// The offset the Fetch asked for, and the partition's generation when it asked.
    fetch_offset: i64,
    generation: u64,
    records: Bytes,
    /// The whole, CRC-checked batches of `records`, and the length they cover.
    batches: Vec<RecordBatch>,
    complete_len: usize,
    source_log_start: i64,
}

/// What one Fetch round trip left to do once the connection is free again.
#[derive(Default)]
struct FetchOutcome {
    refresh: bool,
    fetched: Vec<Fetched>,
    out_of_range: Vec<TopicPartition>,
    /// The source's DivergingEpoch answers: (partition, epoch, end offset).
    diverging: Vec<(TopicPartition, i32, i64)>,
}

#[derive(Debug, Default)]
struct Inner {
    partitions: BTreeMap<TopicPartition, PartitionFetchState>,
    stopped: bool,
}

/// The fetcher of one mirror on one shard.
#[derive(Debug)]
pub struct MirrorFetcher {
    config: MirrorFetchConfig,
    inner: RefCell<Inner>,
    wake: event_listener::Event,
    /// Source of [`PartitionFetchState::generation`] values, never reused.
    generations: std::cell::Cell<u64>,
}

impl MirrorFetcher {
    /// Creates the fetcher and spawns its task on the current shard.
    pub fn start(ctx: Rc<ShardCtx>, config: MirrorFetchConfig) -> Rc<MirrorFetcher> {
        let fetcher = Rc::new(Self::new(config));
        let task = Rc::clone(&fetcher);
        glommio::spawn_local(async move { task.run(ctx).await }).detach();
        fetcher
    }

    /// A fetcher that does not run yet (`start` runs one).
    fn new(config: MirrorFetchConfig) -> MirrorFetcher {
        MirrorFetcher {
            config,
            inner: RefCell::new(Inner::default()),
            wake: event_listener::Event::new(),
            generations: std::cell::Cell::new(0),
        }
    }

    pub fn config(&self) -> &MirrorFetchConfig {
        &self.config
    }

    pub fn add(&self, tp: TopicPartition) {
        let mut inner = self.inner.borrow_mut();
        if let std::collections::btree_map::Entry::Vacant(slot) = inner.partitions.entry(tp) {
            tracing::info!(mirror = %self.config.mirror, tp = %slot.key(), "mirror fetcher: partition added");
            slot.insert(PartitionFetchState::new(self.next_generation()));
        }
        drop(inner);
        self.wake.notify(usize::MAX);
    }

    /// Returns whether the partition was fetched by this fetcher.
    pub fn remove(&self, tp: &TopicPartition) -> bool {
        let removed = self.inner.borrow_mut().partitions.remove(tp).is_some();
        if removed {
            tracing::info!(mirror = %self.config.mirror, %tp, "mirror fetcher: partition removed");
        }
        removed
    }

    pub fn is_empty(&self) -> bool {
        self.inner.borrow().partitions.is_empty()
    }

    pub fn partitions(&self) -> Vec<TopicPartition> {
        self.inner.borrow().partitions.keys().cloned().collect()
    }

    pub fn status(&self, tp: &TopicPartition) -> Option<MirrorPartitionStatus> {
        self.inner
            .borrow()
            .partitions
            .get(tp)
            .map(|s| s.status.clone())
    }

    pub fn shutdown(&self) {
        self.inner.borrow_mut().stopped = true;
        self.wake.notify(usize::MAX);
    }

    /// Stops and gives up every partition (a restart with a new config): returns them.
    pub fn retire(&self) -> Vec<TopicPartition> {
        let mut inner = self.inner.borrow_mut();
        inner.stopped = true;
        let partitions = std::mem::take(&mut inner.partitions);
        drop(inner);
        self.wake.notify(usize::MAX);
        partitions.into_keys().collect()
    }

    fn next_generation(&self) -> u64 {
        let g = self.generations.get() + 1;
        self.generations.set(g);
        g
    }

    /// The next Fetch of `tp` starts at the local log end, and responses already in
    /// flight for it are dropped.
    fn forget_position(&self, tp: &TopicPartition) {
        let generation = self.next_generation();
        self.with_state(tp, |s| s.forget_position(generation));
    }

    fn contains(&self, tp: &TopicPartition) -> bool {
        self.inner.borrow().partitions.contains_key(tp)
    }

    fn with_state<R>(
        &self,
        tp: &TopicPartition,
        f: impl FnOnce(&mut PartitionFetchState) -> R,
    ) -> Option<R> {
        self.inner.borrow_mut().partitions.get_mut(tp).map(f)
    }

    fn backoff(&self, tp: &TopicPartition, message: String) {
        let base = Duration::from_millis(self.config.fetch_backoff_ms);
        let generation = self.next_generation();
        self.with_state(tp, |s| {
            if s.status.last_error.as_deref() != Some(message.as_str()) {
                tracing::warn!(mirror = %self.config.mirror, %tp, error = %message, "mirror fetch error; retrying");
            }
            s.on_error(message, base, Instant::now(), generation);
        });
    }

    fn fail(&self, ctx: &Rc<ShardCtx>, tp: &TopicPartition, failure: FetchError) {
        let truncated_records = self
            .with_state(tp, |s| s.status.truncated_records)
            .unwrap_or(0);
        if !self.remove(tp) {
            return;
        }
        let retryable = failure.retryable();
        tracing::error!(mirror = %self.config.mirror, %tp, error = %failure, retryable, "mirror partition failed");
        ctx.mirror_fetchers.report(MirrorEvent::PartitionFailed {
            mirror: self.config.mirror.clone(),
            tp: tp.clone(),
            message: failure.to_string(),
            retryable,
            truncated_records,
        });
    }

    async fn run(self: Rc<Self>, ctx: Rc<ShardCtx>) {
        let directory = self
            .config
            .connection(
                &self.config.client_id,
                Duration::from_millis(
                    self.config.request_timeout_ms + self.config.fetch_wait_max_ms.max(0) as u64,
                ),
            )
            .and_then(|mut connection| {
                connection.response_bytes_max =
                    (self.config.fetch_response_max_bytes as usize).saturating_mul(2) + (1 << 20);
                SourceDirectory::new(&self.config.bootstrap_servers, connection)
                    .map_err(|e| e.to_string())
            });
        let directory = match directory {
            Ok(d) => d,
            Err(e) => {
                for tp in self.partitions() {
                    self.fail(
                        &ctx,
                        &tp,
                        FetchError::SourceConfig {
                            mirror: self.config.mirror.clone(),
                            message: e.to_string(),
                        },
                    );
                }
                return;
            }
        };
        self.run_with(ctx, directory).await;
    }

    /// The fetch loop, against any [`LeaderDirectory`].
    async fn run_with<D: LeaderDirectory>(self: Rc<Self>, ctx: Rc<ShardCtx>, mut cluster: D) {
        let mut metadata: Option<ClusterMetadata> = None;
        // Fetched record sets whose appends run alongside the next round's Fetches.
        let mut pending: Vec<Fetched> = Vec::new();
        tracing::info!(mirror = %self.config.mirror, shard = ctx.id, source = %self.config.bootstrap_servers, "mirror fetcher started");
        loop {
            if self.inner.borrow().stopped {
                break;
            }
            self.check_convergence(&ctx);
            let now = Instant::now();
            let ready: Vec<(TopicPartition, bool)> = self
                .inner
                .borrow()
                .partitions
                .iter()
                .filter(|(_, s)| s.is_ready(now))
                .map(|(tp, s)| (tp.clone(), s.truncating))
                .collect();
            if ready.is_empty() {
                if !pending.is_empty() {
                    self.append_all(&ctx, std::mem::take(&mut pending)).await;
                    continue;
                }
                let listener = self.wake.listen();
                let _ =
                    futures::future::select(listener, Box::pin(glommio::timer::sleep(IDLE_WAIT)))
                        .await;
                continue;
            }
            // Source metadata: refreshed when missing, after errors, or when a partition's
            // topic is not in it.
            let need_refresh = metadata
                .as_ref()
                .is_none_or(|m| ready.iter().any(|(tp, _)| leader_of(m, tp).is_none()));
            if need_refresh {
                self.append_all(&ctx, std::mem::take(&mut pending)).await;
                let topics: Vec<String> = ready
                    .iter()
                    .map(|(tp, _)| tp.topic.clone())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                match cluster.metadata(&topics).await {
                    Ok(m) => {
                        if let Some(e) = self.check_cluster_id(&m) {
                            for (tp, _) in &ready {
                                self.fail(&ctx, tp, FetchError::ClusterIdChanged(e.clone()));
                            }
                            continue;
                        }
                        metadata = Some(m);
                    }
                    Err(e) if authentication_failed(&e) => {
                        for (tp, _) in &ready {
                            self.fail(&ctx, tp, FetchError::SourceAuthentication(e.to_string()));
                        }
                        continue;
                    }
                    Err(e)
                        if e.breaks_connection()
                            || matches!(e, ClientError::NoBrokerReachable { .. }) =>
                    {
                        for (tp, _) in &ready {
                            self.fail(&ctx, tp, FetchError::SourceUnreachable(e.to_string()));
                        }
                        continue;
                    }
                    Err(e) => {
                        for (tp, _) in &ready {
                            self.backoff(tp, format!("source metadata: {e}"));
                        }
                        continue;
                    }
                }
            }
            let Some(meta) = metadata.clone() else {
                continue;
            };
            let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, bool)>> = BTreeMap::new();
            for (tp, truncating) in ready {
                match leader_of(&meta, &tp) {
                    Some((leader, epoch)) if leader >= 0 => {
                        // A new leader or epoch may come with a new history: check
                        // divergence before fetching on (audit B-2).
                        let truncating = self
                            .with_state(&tp, |s| {
                                if engine::leader_changed(s.source_leader, (leader, epoch)) {
                                    tracing::info!(mirror = %self.config.mirror, %tp, from = ?s.source_leader, to = ?(leader, epoch), "source leader or epoch changed: checking divergence");
                                }
                                s.on_leader_seen(leader, epoch)
                            })
                            .unwrap_or(truncating);
                        by_leader.entry(leader).or_default().push((tp, truncating));
                    }
                    Some((_, _)) => {
                        self.backoff(&tp, "source partition has no leader".to_string());
                        metadata = None;
                    }
                    None => {
                        let message = match meta.topics.get(&tp.topic) {
                            Some(t) if t.error_code == 0 => format!(
                                "source topic {} has no partition {}",
                                tp.topic, tp.partition
                            ),
                            _ => format!("source topic {} does not exist", tp.topic),
                        };
                        self.backoff(&tp, message);
                        metadata = None;
                    }
                }
            }
            for (leader, parts) in by_leader {
                let conn = match cluster.connection(leader).await {
                    Ok(c) => c,
                    Err(e) => {
                        for (tp, _) in &parts {
                            self.backoff(tp, format!("connecting to source broker {leader}: {e}"));
                        }
                        cluster.invalidate(leader);
                        metadata = None;
                        continue;
                    }
                };
                let truncating: Vec<TopicPartition> = parts
                    .iter()
                    .filter(|(_, t)| *t)
                    .map(|(tp, _)| tp.clone())
                    .collect();
                if !truncating.is_empty() {
                    // Divergence truncates the log: nothing may be on its way into it.
                    self.append_all(&ctx, std::mem::take(&mut pending)).await;
                    match self
                        .resolve_divergence(&ctx, conn, &meta, &truncating)
                        .await
                    {
                        Ok(false) => {}
                        Ok(true) => metadata = None,
                        Err(e) => {
                            for tp in &truncating {
                                self.backoff(
                                    tp,
                                    format!("OffsetsForLeaderEpoch on the source: {e}"),
                                );
                            }
                            if e.breaks_connection() {
                                cluster.invalidate(leader);
                            }
                            metadata = None;
                            continue;
                        }
                    }
                }
                // Asked again after the divergence check: a partition it cut waits for
                // its replicas (the gate), one it failed on backs off.
                let now = Instant::now();
                let fetching: Vec<TopicPartition> = parts
                    .into_iter()
                    .map(|(tp, _)| tp)
                    .filter(|tp| {
                        self.with_state(tp, |s| !s.truncating && s.is_ready(now))
                            .unwrap_or(false)
                    })
                    .collect();
                if fetching.is_empty() {
                    continue;
                }
                // Split the partitions over several connections so several Fetch
                // requests are in flight to this broker.
                let slots = self.config.fetch_connections.min(fetching.len()).max(1);
                let mut groups: Vec<Vec<TopicPartition>> = vec![Vec::new(); slots];
                for (i, tp) in fetching.into_iter().enumerate() {
                    groups[i % slots].push(tp);
                }
                let mut extras: Vec<(usize, D::Leader)> = Vec::new();
                for (slot, group) in groups.iter().enumerate().skip(1) {
                    match cluster.extra_connection(leader, slot, &meta).await {
                        Ok(c) => extras.push((slot, c)),
                        Err(e) => {
                            for tp in group {
                                self.backoff(
                                    tp,
                                    format!("connecting to source broker {leader}: {e}"),
                                );
                            }
                        }
                    }
                }
                // The pooled connection again (the extra ones needed the directory).
                let conn = match cluster.connection(leader).await {
                    Ok(c) => c,
                    Err(e) => {
                        for tp in groups.iter().flatten() {
                            self.backoff(tp, format!("connecting to source broker {leader}: {e}"));
                        }
                        for (slot, c) in extras {
                            cluster.keep_extra_connection(leader, slot, c);
                        }
                        cluster.invalidate(leader);
                        metadata = None;
                        continue;
                    }
                };
                // The pipeline: this round's Fetches go out while the previous round's
                // appends run; positions come from the previous responses.
                let mut outcomes = Vec::with_capacity(slots);
                {
                    let mut calls = Vec::with_capacity(slots);
                    calls.push(Box::pin(self.fetch_once(&ctx, conn, &meta, &groups[0])));
                    for (slot, c) in extras.iter_mut() {
                        calls.push(Box::pin(self.fetch_once(&ctx, c, &meta, &groups[*slot])));
                    }
                    let appends = self.append_all(&ctx, std::mem::take(&mut pending));
                    let (done, ()) =
                        futures::future::join(futures::future::join_all(calls), appends).await;
                    outcomes.extend(done);
                }
                let mut slots_used = vec![0usize];
                slots_used.extend(extras.iter().map(|(slot, _)| *slot));
                let mut broken = false;
                for (slot, outcome) in slots_used.iter().zip(outcomes) {
                    match outcome {
                        Ok(outcome) => {
                            if outcome.refresh {
                                metadata = None;
                            }
                            pending.extend(outcome.fetched);
                            // The previous appends are done: out-of-range resets and the
                            // lag probe may use the log and this slot's connection now.
                            let c: &mut D::Leader = if *slot == 0 {
                                &mut *conn
                            } else {
                                match extras.iter_mut().find(|(s, _)| s == slot) {
                                    Some((_, c)) => c,
                                    None => continue,
                                }
                            };
                            for tp in outcome.out_of_range {
                                if let Err(e) = self.reset_out_of_range(&ctx, c, &tp).await {
                                    self.backoff(&tp, format!("offset out of range: {e}"));
                                }
                            }
                            for (tp, epoch, end) in outcome.diverging {
                                if let Err(e) = self.truncate_diverging(&ctx, &tp, epoch, end).await
                                {
                                    self.backoff(&tp, e);
                                }
                            }
                            self.probe_lag(&ctx, c, &groups[*slot]).await;
                        }
                        Err(e) => {
                            for tp in &groups[*slot] {
                                self.backoff(tp, format!("fetch from source broker {leader}: {e}"));
                            }
                            broken |= *slot == 0 && e.breaks_connection();
                            metadata = None;
                        }
                    }
                }
                for (slot, c) in extras {
                    cluster.keep_extra_connection(leader, slot, c);
                }
                if broken {
                    cluster.invalidate(leader);
                }
            }
        }
        // Record sets still pending are dropped: whoever fetches next starts at the log end.
        drop(pending);
        tracing::info!(mirror = %self.config.mirror, shard = ctx.id, "mirror fetcher stopped");
    }

    fn check_cluster_id(&self, m: &ClusterMetadata) -> Option<String> {
        let expected = &self.config.source_cluster_id;
        match &m.cluster_id {
            Some(id) if !expected.is_empty() && id != expected => Some(format!(
                "source cluster id is {id}, but mirror {} was created for {expected}",
                self.config.mirror
            )),
            _ => None,
        }
    }

    /// OffsetsForLeaderEpoch toward the source for partitions that (re)start: truncates
    /// the local log where the source's history diverges (reference §6.3.2). `Ok(true)`:
    /// a partition's answer says the leader moved, so the source metadata must be
    /// refreshed before the next try (those partitions are still truncating, and send no
    /// Fetch that would find out).
    async fn resolve_divergence(
        &self,
        ctx: &Rc<ShardCtx>,
        conn: &mut impl LeaderEndpoint,
        meta: &ClusterMetadata,
        tps: &[TopicPartition],
    ) -> Result<bool, ClientError> {
        let mut asks: BTreeMap<String, Vec<(i32, i32, i32)>> = BTreeMap::new();
        for tp in tps {
            self.forget_position(tp);
            let latest = match super::latest_epoch(ctx, tp).await {
                Ok(l) => l,
                Err(e) => {
                    self.backoff(tp, e);
                    continue;
                }
            };
            match latest {
                // Nothing to compare: start fetching at the log end.
                None => {
                    self.with_state(tp, |s| s.truncating = false);
                }
                Some(epoch) => {
                    let current = leader_of(meta, tp).map_or(-1, |(_, e)| e);
                    asks.entry(tp.topic.clone())
                        .or_default()
                        .push((tp.partition, epoch, current));
                }
            }
        }
        if asks.is_empty() {
            return Ok(false);
        }
        let Some(version) = conn.pick_version(ApiKey::OffsetForLeaderEpoch as i16, 2, 4) else {
            // A source without OffsetsForLeaderEpoch (tansu): fetch from the log end.
            for tp in tps {
                self.with_state(tp, |s| s.truncating = false);
            }
            return Ok(false);
        };
        let mut refresh = false;
        let mut request = OffsetForLeaderEpochRequest::default().with_topics(
            asks.iter()
                .map(|(topic, parts)| {
                    OffsetForLeaderTopic::default()
                        .with_topic(crate::api::topic_name(topic))
                        .with_partitions(
                            parts
                                .iter()
                                .map(|(p, epoch, current)| {
                                    OffsetForLeaderPartition::default()
                                        .with_partition(*p)
                                        .with_leader_epoch(*epoch)
                                        .with_current_leader_epoch(*current)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
        if version >= 3 {
            request = request.with_replica_id(BrokerId(-1));
        }
        let response = conn.offsets_for_leader_epoch(&request, version).await?;
        for topic in response.topics {
            for p in topic.partitions {
                let tp = TopicPartition::new(topic.topic.as_str(), p.partition);
                if !self.contains(&tp) {
                    continue;
                }
                if let Some(error) = PartitionError::from_code(p.error_code) {
                    // The leader moved or its epoch changed (audit B-5): a partition still
                    // truncating sends no Fetch that would notice, so refresh here.
                    refresh |= error.needs_metadata_refresh();
                    self.backoff(
                        &tp,
                        format!("OffsetsForLeaderEpoch: {}", error_name(p.error_code)),
                    );
                    continue;
                }
                let current = asks
                    .get(&topic.topic.to_string())
                    .and_then(|v| v.iter().find(|(q, _, _)| *q == p.partition))
                    .map_or(-1, |(_, _, c)| *c);
                match self
                    .truncate_to_source(ctx, &tp, p.leader_epoch, p.end_offset, current)
                    .await
                {
                    Ok(complete) => {
                        // An intermediate cut asks again with the new latest epoch.
                        self.with_state(&tp, |s| s.truncating = !complete);
                    }
                    Err(e) => self.backoff(&tp, e),
                }
            }
        }
        Ok(refresh)
    }

    /// Truncates `tp` where its history leaves the source's: the source's history for
    /// `source_epoch` ends at `source_end` (both -1: the source does not know the local
    /// latest epoch; `source_current_epoch` is its leader epoch). Returns whether the
    /// check is complete (false: ask again with the new latest epoch).
    async fn truncate_to_source(
        &self,
        ctx: &Rc<ShardCtx>,
        tp: &TopicPartition,
        source_epoch: i32,
        source_end: i64,
        source_current_epoch: i32,
    ) -> Result<bool, String> {
        let partition = ctx
            .partition(tp)
            .ok_or_else(|| format!("partition {tp} is not open"))?;
        let mut log = partition
            .write()
            .await
            .map_err(|_| format!("partition {tp} is closed"))?;
        if !self.contains(tp) || !partition.is_leader() {
            return Ok(true);
        }
        let end = log.log_end_offset().0;
        let local_for = |log: &crate::log::PartitionLog, epoch: i32| {
            let (e, o) = log.end_offset_for_epoch(LeaderEpoch(epoch));
            (e.0, o.0)
        };
        let truncation = if source_epoch < 0 || source_end < 0 {
            let latest = log.latest_epoch().map_or(-1, |e| e.0);
            engine::on_undefined_epoch(
                latest,
                source_current_epoch,
                local_for(&log, source_current_epoch),
                end,
            )
        } else {
            engine::truncation_target(source_epoch, source_end, local_for(&log, source_epoch), end)
        };
        self.cut_log(ctx, &mut log, tp, truncation, source_epoch)
            .await?;
        Ok(truncation.complete)
    }

    /// Applies a [`Truncation`] to the log (the caller holds its write lock).
    async fn cut_log(
        &self,
        ctx: &ShardCtx,
        log: &mut crate::log::PartitionLog,
        tp: &TopicPartition,
        truncation: Truncation,
        source_epoch: i32,
    ) -> Result<(), String> {
        let Some(target) = truncation.target else {
            return Ok(());
        };
        let end = log.log_end_offset().0;
        if target >= end {
            return Ok(());
        }
        let target = Offset(target);
        log.cut_to(target).await.map_err(|e| e.to_string())?;
        let new_end = log.log_end_offset();
        // No appends past the cut until the replicas have dropped what it discarded: a
        // follower that kept it and got elected would bring it back (reference §10.3).
        let convergence = super::Convergence::after_cut(ctx, tp, log, now_ms());
        self.with_state(tp, |s| {
            s.status.truncated_records += end - new_end.0;
            s.converging = Some(convergence);
        });
        tracing::info!(mirror = %self.config.mirror, %tp, from = end, to = new_end.0, source_epoch, complete = truncation.complete, every_replica = convergence.every_replica, "mirror log truncated where the source diverges; waiting for the replicas to converge");
        Ok(())
    }

    /// Lifts the convergence gate of the partitions whose replicas have converged on
    /// the fetcher's cut; one that does not in time fails (retryable: the retry's
    /// PREPARING waits for the replicas again before anything is copied past the cut).
    fn check_convergence(&self, ctx: &Rc<ShardCtx>) {
        let waiting: Vec<(TopicPartition, super::Convergence)> = self
            .inner
            .borrow()
            .partitions
            .iter()
            .filter_map(|(tp, s)| s.converging.map(|c| (tp.clone(), c)))
            .collect();
        let now = now_ms();
        for (tp, c) in waiting {
            match super::convergence_lacks(ctx, &tp, c) {
                Ok(None) => {
                    tracing::info!(mirror = %self.config.mirror, %tp, "replicas converged on the divergence cut: mirroring on");
                    self.with_state(&tp, |s| {
                        s.converging = None;
                        s.converging_reported_ms = None;
                        s.status.last_error = None;
                    });
                }
                // Overdue, the partition stays held (reference §4.5, ULE_RECOVERY: it
                // waits for its replicas however long they take; a FAILED retry would
                // resume without the gate), and says why in DescribeMirrors and, every
                // CONVERGENCE_TIMEOUT, in the log.
                Ok(Some(why)) if c.overdue(now) => {
                    let every = super::CONVERGENCE_TIMEOUT.as_millis() as i64;
                    let due = self.with_state(&tp, |s| {
                        let due = s.converging_reported_ms.is_none_or(|at| now - at >= every);
                        if due {
                            s.converging_reported_ms = Some(now);
                        }
                        s.status.last_error = Some(why.clone());
                        due
                    });
                    if due == Some(true) {
                        tracing::warn!(mirror = %self.config.mirror, %tp, reason = %why, "mirror partition held: its replicas have not converged on the divergence cut");
                    }
                }
                Ok(Some(_)) => {}
                Err(e) => self.fail(ctx, &tp, FetchError::NotConverged(e)),
            }
        }
    }

    /// A Fetch answered DivergingEpoch: the source's history for `epoch` ends at `end`,
    /// before what the local log holds. Truncates like Kafka's follower does; an
    /// intermediate cut is refined by the next Fetch, which carries the new latest epoch.
    async fn truncate_diverging(
        &self,
        ctx: &Rc<ShardCtx>,
        tp: &TopicPartition,
        epoch: i32,
        end: i64,
    ) -> Result<(), String> {
        // The same rule as an OffsetsForLeaderEpoch answer; an intermediate cut is
        // refined by the next Fetch, which carries the new latest epoch.
        self.truncate_to_source(ctx, tp, epoch, end, -1).await?;
        self.forget_position(tp);
        Ok(())
    }

    /// One Fetch round trip for `tps` (all led by the broker behind `conn`). Touches no
    /// log beyond reading log ends: the previous round's appends may be running. What
    /// it fetched is split and CRC-checked here and appended by the next round.
    async fn fetch_once(
        &self,
        ctx: &Rc<ShardCtx>,
        conn: &mut impl LeaderEndpoint,
        meta: &ClusterMetadata,
        tps: &[TopicPartition],
    ) -> Result<FetchOutcome, ClientError> {
        let mut outcome = FetchOutcome::default();
        let Some(version) = conn.pick_version(ApiKey::Fetch as i16, 4, 16) else {
            for tp in tps {
                self.fail(ctx, tp, FetchError::FetchUnsupported);
            }
            return Ok(outcome);
        };
        let use_ids = version >= 13;
        let mut by_topic: BTreeMap<String, Vec<FetchPartition>> = BTreeMap::new();
        // Per partition: the offset asked for and the generation it was asked under.
        let mut asked: HashMap<TopicPartition, (i64, u64)> = HashMap::new();
        for tp in tps {
            let Some((pipelined, generation)) =
                self.with_state(tp, |s| (s.position(|| (-1, -1)), s.generation))
            else {
                continue;
            };
            // Where to fetch from, and the epoch of the batch before it (the
            // LastFetchedEpoch the source checks our history against): the pipelined
            // position, else the local log end.
            let (fetch_offset, last_fetched_epoch) = if pipelined.0 >= 0 {
                pipelined
            } else {
                let Some(partition) = ctx.partition(tp) else {
                    self.backoff(tp, format!("partition {tp} is not open on this shard"));
                    continue;
                };
                let Ok(log) = partition.read().await else {
                    continue;
                };
                (
                    log.log_end_offset().0,
                    log.latest_epoch().map_or(-1, |e| e.0),
                )
            };
            let current_epoch = leader_of(meta, tp).map_or(-1, |(_, e)| e);
            if let Some(message) = recreated_without_topic_id(ctx, tp, current_epoch).await {
                self.fail(ctx, tp, FetchError::RecreatedWithoutTopicId(message));
                continue;
            }
            asked.insert(tp.clone(), (fetch_offset, generation));
            by_topic.entry(tp.topic.clone()).or_default().push(
                FetchPartition::default()
                    .with_partition(tp.partition)
                    .with_fetch_offset(fetch_offset)
                    .with_partition_max_bytes(self.config.fetch_max_bytes)
                    .with_current_leader_epoch(current_epoch)
                    .with_last_fetched_epoch(if version >= 12 {
                        last_fetched_epoch
                    } else {
                        -1
                    })
                    .with_log_start_offset(-1),
            );
        }
        let mut ids: HashMap<uuid::Uuid, String> = HashMap::new();
        let mut topics = Vec::with_capacity(by_topic.len());
        for (name, partitions) in by_topic {
            let mut t = FetchTopic::default().with_partitions(partitions);
            if use_ids {
                let id = meta.topics.get(&name).map_or(uuid::Uuid::nil(), |t| t.id);
                if id.is_nil() {
                    outcome.refresh = true;
                    return Ok(outcome);
                }
                ids.insert(id, name.clone());
                t = t.with_topic_id(id);
            } else {
                t = t.with_topic(crate::api::topic_name(&name));
            }
            topics.push(t);
        }
        if topics.is_empty() {
            return Ok(outcome);
        }
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(self.config.fetch_wait_max_ms)
            .with_min_bytes(self.config.fetch_min_bytes)
            .with_max_bytes(self.config.fetch_response_max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics);
        let started = Instant::now();
        let response = conn.fetch(&request, version).await?;
        crate::metrics::mirror(&self.config.mirror, ctx.id).fetch_done(started);
        if response.error_code != 0 {
            for tp in tps {
                self.backoff(tp, format!("Fetch: {}", error_name(response.error_code)));
            }
            outcome.refresh = true;
            return Ok(outcome);
        }
        for topic in response.responses {
            let name = if use_ids {
                match ids.get(&topic.topic_id) {
                    Some(n) => n.clone(),
                    None => continue,
                }
            } else {
                topic.topic.to_string()
            };
            for p in topic.partitions {
                let tp = TopicPartition::new(name.as_str(), p.partition_index);
                let Some(&(fetch_offset, generation)) = asked.get(&tp) else {
                    continue;
                };
                tracing::debug!(mirror = %self.config.mirror, %tp, fetch_offset, high_watermark = p.high_watermark, error = p.error_code, bytes = p.records.as_ref().map_or(0, |r| r.len()), "mirror fetch answered");
                let current = self.with_state(&tp, |s| {
                    if p.high_watermark >= 0 {
                        s.status.source_high_watermark = p.high_watermark;
                    }
                    if p.log_start_offset >= 0 {
                        s.status.source_log_start_offset = p.log_start_offset;
                    }
                    s.accepts(generation)
                });
                // Removed, or its position was forgotten while this Fetch was out.
                if current != Some(true) {
                    continue;
                }
                if version >= 12 && p.error_code == 0 && p.diverging_epoch.epoch >= 0 {
                    outcome.diverging.push((
                        tp,
                        p.diverging_epoch.epoch,
                        p.diverging_epoch.end_offset,
                    ));
                    continue;
                }
                match p.error_code {
                    0 => {
                        let records = p.records.unwrap_or_default();
                        let (batches, complete_len) = match split_batches(&records) {
                            Ok(split) => split,
                            Err(message) => {
                                self.fail(ctx, &tp, FetchError::CorruptBatch(message));
                                continue;
                            }
                        };
                        crate::metrics::mirror(&self.config.mirror, ctx.id)
                            .fetched(records.len(), crate::metrics::record_count(&batches));
                        if let Some(last) = batches.last() {
                            let (next, epoch) =
                                (last.next_offset().0, last.partition_leader_epoch().0);
                            self.with_state(&tp, |s| s.on_fetched(fetch_offset, next, epoch));
                        }
                        outcome.fetched.push(Fetched {
                            tp,
                            fetch_offset,
                            generation,
                            records,
                            batches,
                            complete_len,
                            source_log_start: p.log_start_offset,
                        });
                    }
                    code => match PartitionError::from_code(code) {
                        Some(PartitionError::OffsetOutOfRange) => outcome.out_of_range.push(tp),
                        Some(error) => {
                            outcome.refresh |= error.needs_metadata_refresh();
                            if error.needs_epoch_check() {
                                self.with_state(&tp, |s| s.truncating = true);
                            }
                            self.backoff(&tp, format!("Fetch: {}", error_name(code)));
                        }
                        None => {}
                    },
                }
            }
        }
        Ok(outcome)
    }

    /// Appends fetched record sets; different partitions concurrently (each takes its
    /// own log's lock).
    async fn append_all(&self, ctx: &Rc<ShardCtx>, fetched: Vec<Fetched>) {
        if fetched.is_empty() {
            return;
        }
        let appends = fetched.into_iter().map(|f| async move {
            let tp = f.tp.clone();
            let outcome = self.append(ctx, f).await;
            (tp, outcome)
        });
        for (tp, outcome) in futures::future::join_all(appends).await {
            match outcome {
                Ok(()) => {
                    self.with_state(&tp, PartitionFetchState::on_appended);
                }
                Err(failure) if failure.retryable() => self.backoff(&tp, failure.to_string()),
                Err(failure) => self.fail(ctx, &tp, failure),
            }
        }
    }

    /// Appends a fetched record set to its partition, keeping the source's bytes.
    async fn append(&self, ctx: &Rc<ShardCtx>, fetched: Fetched) -> Result<(), FetchError> {
        let Fetched {
            tp,
            fetch_offset,
            generation,
            records,
            batches,
            complete_len,
            source_log_start,
        } = fetched;
        let tp = &tp;
        if self.with_state(tp, |s| s.accepts(generation)) != Some(true) {
            return Ok(());
        }
        if batches.is_empty() {
            return self.follow_log_start(ctx, tp, source_log_start).await;
        }
        // The destination epoch stays at or above every mirrored batch epoch (§6.5).
        let max_epoch = batches
            .iter()
            .map(|b| b.partition_leader_epoch().0)
            .max()
            .unwrap_or(-1);
        let local_epoch = ctx.partition(tp).map_or(0, |p| p.leader_epoch().0);
        if max_epoch > local_epoch - EPOCH_BUMP_THRESHOLD {
            let target = max_epoch + EPOCH_BUMP_INCREMENT;
            if max_epoch > local_epoch {
                // Reactive: nothing is appended until the epoch covers the batches.
                bump_epoch(ctx, tp, target)
                    .await
                    .map_err(FetchError::EpochBump)?;
            } else {
                let now = Instant::now();
                let asked = self
                    .with_state(tp, |s| {
                        let recent = s.bump_requested.is_some_and(|(t, at)| {
                            t >= max_epoch + EPOCH_BUMP_THRESHOLD
                                && now.duration_since(at) < BUMP_REQUEST_TTL
                        });
                        if !recent {
                            s.bump_requested = Some((target, now));
                        }
                        !recent
                    })
                    .unwrap_or(false);
                if asked {
                    let bump = bump_epoch(ctx, tp, target);
                    glommio::spawn_local(async move {
                        let _ = bump.await;
                    })
                    .detach();
                }
            }
        }
        let partition = ctx
            .partition(tp)
            .ok_or_else(|| FetchError::NotOpen(tp.clone()))?;
        let mut log = partition
            .write()
            .await
            .map_err(|_| FetchError::Closed(tp.clone()))?;
        if self.with_state(tp, |s| s.accepts(generation)) != Some(true) || !partition.is_leader() {
            // Removed, or this broker no longer leads the partition: the fetcher is
            // being stopped, and the new leader's copy is the one that grows.
            return Ok(());
        }
        let end = log.log_end_offset();
        if fetch_offset > end.0 {
            // Fetched past the log end (an earlier append did not land): appending
            // would leave a hole. Drop it and fetch again from the log end.
            tracing::debug!(mirror = %self.config.mirror, %tp, fetch_offset, end = end.0, "dropping a pipelined fetch beyond the log end");
            drop(log);
            self.forget_position(tp);
            return Ok(());
        }
        // Batches wholly below the log end were appended already (a retried fetch);
        // a batch straddling it means the two logs' batch boundaries differ.
        let Some(first) = batches.iter().position(|b| b.last_offset() >= end) else {
            return Ok(());
        };
        if batches[first].base_offset() < end && end == log.log_start_offset() {
            // The local log is empty and the source's log start falls inside this batch
            // (DeleteRecords or retention there): start the log at the batch, as Kafka's
            // follower does; the source's log start is followed right after the append.
            tracing::info!(mirror = %self.config.mirror, %tp, from = end.0, to = batches[first].base_offset().0, "the source log starts inside a batch: starting the empty local log at the batch");
            log.truncate_fully_and_start_at(batches[first].base_offset())
                .await
                .map_err(|e| FetchError::Restart(e.to_string()))?;
        } else if batches[first].base_offset() < end {
            self.with_state(tp, |s| s.truncating = true);
            return Err(FetchError::Straddle {
                base: batches[first].base_offset().0,
                last: batches[first].last_offset().0,
                end: end.0,
            });
        }
        let start = batches[..first]
            .iter()
            .map(|b| b.size_in_bytes())
            .sum::<usize>();
        let slice = records.slice(start..complete_len);
        // `split_batches` checked every CRC: append without checking them again.
        log.append_passthrough_verified(slice, &batches[first..], now_ms())
            .await
            .map_err(|e| FetchError::Append {
                message: e.to_string(),
                invalid_batch: matches!(e, crate::log::LogError::InvalidBatch { .. }),
            })?;
        crate::metrics::mirror(&self.config.mirror, ctx.id).appended(
            complete_len - start,
            crate::metrics::record_count(&batches[first..]),
        );
        let new_end = log.log_end_offset();
        if source_log_start > log.log_start_offset().0 {
            let target = Offset(source_log_start.min(new_end.0));
            if let Err(e) = log.advance_log_start_offset(target).await {
                tracing::warn!(%tp, error = %e, "could not follow the source log start offset");
            }
        }
        Ok(())
    }

    async fn follow_log_start(
        &self,
        ctx: &Rc<ShardCtx>,
        tp: &TopicPartition,
        source_log_start: i64,
    ) -> Result<(), FetchError> {
        let Some(partition) = ctx.partition(tp) else {
            return Ok(());
        };
        let Ok(mut log) = partition.write().await else {
            return Ok(());
        };
        if self.contains(tp) && partition.is_leader() && source_log_start > log.log_start_offset().0
        {
            let target = Offset(source_log_start.min(log.log_end_offset().0));
            if let Err(e) = log.advance_log_start_offset(target).await {
                tracing::warn!(%tp, error = %e, "could not follow the source log start offset");
            }
        }
        Ok(())
    }

    /// OFFSET_OUT_OF_RANGE: asks the source for its earliest and latest offsets and
    /// truncates so the next fetch is in range (reference §6.3.1).
    async fn reset_out_of_range(
        &self,
        ctx: &Rc<ShardCtx>,
        conn: &mut impl LeaderEndpoint,
        tp: &TopicPartition,
    ) -> Result<(), String> {
        let version = conn
            .pick_version(ApiKey::ListOffsets as i16, 1, 8)
            .ok_or("the source does not support ListOffsets v1+")?;
        let mut offsets = [0i64; 2];
        for (i, timestamp) in [-2i64, -1].into_iter().enumerate() {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_isolation_level(0)
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(crate::api::topic_name(&tp.topic))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(tp.partition)
                        .with_timestamp(timestamp)])]);
            let response = conn
                .list_offsets(&request, version)
                .await
                .map_err(|e| e.to_string())?;
            let p = response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == tp.partition)
                .ok_or("ListOffsets answered without the partition")?;
            if p.error_code != 0 {
                return Err(format!("ListOffsets: {}", error_name(p.error_code)));
            }
            offsets[i] = p.offset;
        }
        let [earliest, latest] = offsets;
        let answers_epochs = conn
            .pick_version(ApiKey::OffsetForLeaderEpoch as i16, 2, 4)
            .is_some();
        let partition = ctx.partition(tp).ok_or("partition is not open")?;
        let mut log = partition
            .write()
            .await
            .map_err(|_| "partition is closed".to_string())?;
        if !self.contains(tp) || !partition.is_leader() {
            return Ok(());
        }
        let end = log.log_end_offset().0;
        let checked_at = self.with_state(tp, |s| s.out_of_range_checked_at).flatten();
        match engine::on_out_of_range(
            end,
            earliest,
            latest,
            has_source_topic_id(ctx, &tp.topic),
            answers_epochs,
            checked_at,
        ) {
            OutOfRange::Refuse => {
                // Without topic ids a source topic deleted and re-created under the
                // same name looks like this too: stop rather than cut the copy to a
                // new topic.
                return Err(format!(
                    "the source has fewer records than were mirrored (source end {latest}, local end {end}) and reports no topic ids: the source topic may have been deleted and re-created; remove it from the mirror and check"
                ));
            }
            OutOfRange::CheckEpochs => {
                tracing::info!(mirror = %self.config.mirror, %tp, local_end = end, source_end = latest, "local log is ahead of the source: checking divergence by epoch");
                self.with_state(tp, |s| {
                    s.truncating = true;
                    s.out_of_range_checked_at = Some(end);
                });
            }
            OutOfRange::TruncateTo(target) => {
                log.truncate_to(Offset(target))
                    .await
                    .map_err(|e| e.to_string())?;
                let new_end = log.log_end_offset().0;
                self.with_state(tp, |s| s.status.truncated_records += end - new_end);
                tracing::warn!(mirror = %self.config.mirror, %tp, from = end, to = target, "local log was ahead of the source after the epoch check; truncated to the source's end");
            }
            OutOfRange::RestartAt(start) => {
                log.truncate_fully_and_start_at(Offset(start))
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::info!(mirror = %self.config.mirror, %tp, from = end, to = start, "source retention passed the local log end; restarting at the source log start");
            }
            OutOfRange::Retry => {}
        }
        drop(log);
        self.forget_position(tp);
        Ok(())
    }
}

/// Whether the local copy of `topic` carries its source's topic id (false for a source
/// before Kafka 2.8: `mirror.source.topic.id=none`).
fn has_source_topic_id(ctx: &ShardCtx, topic: &str) -> bool {
    ctx.metadata.load().topic(topic).is_none_or(|t| {
        t.configs
            .get(MIRROR_SOURCE_TOPIC_ID_CONFIG)
            .map(String::as_str)
            != Some(NO_SOURCE_TOPIC_ID)
    })
}

/// For a topic whose source has no topic ids: why the source partition is not the one
/// mirrored so far, judged by leader epochs (they never go back in one topic, and a
/// re-created topic starts again at 0). `None` when it may be the same.
async fn recreated_without_topic_id(
    ctx: &Rc<ShardCtx>,
    tp: &TopicPartition,
    source_epoch: i32,
) -> Option<String> {
    if source_epoch < 0 || has_source_topic_id(ctx, &tp.topic) {
        return None;
    }
    let partition = ctx.partition(tp)?;
    let local = partition.read().await.ok()?.latest_epoch()?;
    (local.0 > source_epoch).then(|| {
        format!(
            "the source leader epoch {source_epoch} is below the last mirrored epoch {} and the source reports no topic ids: the source topic was deleted and re-created",
            local.0
        )
    })
}

/// The leader and leader epoch of `tp` in source metadata.
fn leader_of(meta: &ClusterMetadata, tp: &TopicPartition) -> Option<(i32, i32)> {
    let topic = meta.topics.get(&tp.topic)?;
    if topic.error_code != 0 {
        return None;
    }
    topic
        .partitions
        .iter()
        .find(|p| p.partition == tp.partition)
        .map(|p| (p.leader, p.leader_epoch))
}

/// Asks the controller to raise `tp`'s epoch above `min` and waits for the answer.
fn bump_epoch(
    ctx: &Rc<ShardCtx>,
    tp: &TopicPartition,
    min: i32,
) -> impl std::future::Future<Output = Result<(), String>> {
    let rx = ctx.controller.submit(AdminRequest::BumpLeaderEpochs {
        partitions: vec![(tp.clone(), min)],
    });
    let tp = tp.clone();
    async move {
        match rx.await {
            Ok(AdminResponse::Results(r)) if r.iter().all(|r| r.error_code == 0) => Ok(()),
            Ok(other) => Err(format!("bumping the leader epoch of {tp}: {other:?}")),
            Err(_) => Err(format!("bumping the leader epoch of {tp}: controller gone")),
        }
    }
}

/// Splits a fetched record set into whole, CRC-checked v2 batches, ignoring a partial
/// batch at the end (the source cut the response at its size limit). Returns the
/// batches and the length of the complete prefix. `Err`: corrupt data.
pub fn split_batches(records: &Bytes) -> Result<(Vec<RecordBatch>, usize), String> {
    let mut batches = Vec::new();
    let mut at = 0usize;
    while records.len() - at >= layout::LOG_OVERHEAD {
        let rest = &records[at..];
        // A batch cut by the source's size limit ends the usable data (not an error).
        let at_len = layout::BATCH_LENGTH;
        let declared = i32::from_be_bytes([
            rest[at_len],
            rest[at_len + 1],
            rest[at_len + 2],
            rest[at_len + 3],
        ]);
        if declared >= 0 && layout::LOG_OVERHEAD + declared as usize > rest.len() {
            break;
        }
        let size = match frame_size(rest, at as u64) {
            Ok(size) => size,
            Err(e) => return Err(format!("fetched data is not a record batch: {e}")),
        };
        if rest.len() > layout::MAGIC && rest[layout::MAGIC] != 2 {
            return Err(format!(
                "fetched batch at byte {at} has magic {} (only v2 record batches can be mirrored)",
                rest[layout::MAGIC]
            ));
        }
        let batch = RecordBatch::parse_verified(records.slice(at..at + size), at as u64)
            .map_err(|e| format!("fetched batch is corrupt: {e}"))?;
        if let Some(prev) = batches.last() {
            let prev: &RecordBatch = prev;
            if batch.base_offset() <= prev.last_offset() {
                return Err(format!(
                    "fetched batches go backwards: {} after {}",
                    batch.base_offset().0,
                    prev.last_offset().0
                ));
            }
        }
        batches.push(batch);
        at += size;
    }
    Ok((batches, at))
}

fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?} ({code})"),
        None => format!("error {code}"),
    }
}

/// Whether the source refused the mirror's credentials or TLS settings (directly, or as
/// the last error of an unreachable bootstrap list).
fn authentication_failed(e: &ClientError) -> bool {
    match e {
        ClientError::Authentication { .. } => true,
        ClientError::NoBrokerReachable { last_error, .. } => authentication_failed(last_error),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::BatchBuilder;

    fn batch(base: i64, count: i32) -> Bytes {
        BatchBuilder {
            base_offset: Offset(base),
            last_offset_delta: count - 1,
            record_count: count,
            partition_leader_epoch: LeaderEpoch(3),
            ..BatchBuilder::default()
        }
        .build(&[7u8; 40])
    }

    fn concat(parts: &[Bytes]) -> Bytes {
        parts
            .iter()
            .flat_map(|b| b.iter().copied())
            .collect::<Vec<u8>>()
            .into()
    }

    #[test]
    fn split_keeps_whole_batches_and_ignores_a_partial_tail() {
        let a = batch(0, 2);
        let b = batch(2, 3);
        let set = concat(&[a.clone(), b.clone()]);
        let (batches, len) = split_batches(&set).expect("split");
        assert_eq!(batches.len(), 2);
        assert_eq!(len, set.len());
        assert_eq!(batches[1].as_bytes(), &b);
        // The source cut the response inside the second batch.
        let cut = set.slice(..a.len() + b.len() / 2);
        let (batches, len) = split_batches(&cut).expect("split");
        assert_eq!(batches.len(), 1);
        assert_eq!(len, a.len());
        // Only a few bytes of a header.
        let (batches, len) = split_batches(&set.slice(..5)).expect("split");
        assert!(batches.is_empty());
        assert_eq!(len, 0);
    }

    #[test]
    fn split_rejects_corruption_and_going_backwards() {
        let a = batch(0, 2);
        let mut bad = a.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let err = split_batches(&Bytes::from(bad)).expect_err("crc");
        assert!(err.contains("corrupt"), "{err}");
        let backwards = concat(&[batch(5, 2), batch(3, 1)]);
        let err = split_batches(&backwards).expect_err("backwards");
        assert!(err.contains("backwards"), "{err}");
        let mut old = a.to_vec();
        old[layout::MAGIC] = 1;
        let err = split_batches(&Bytes::from(old)).expect_err("magic");
        assert!(err.contains("magic"), "{err}");
    }
}
