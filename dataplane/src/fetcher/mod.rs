//! Mirror partitions on their owning shard: the [`MirrorFetcherManager`] (one per shard)
//! runs one [`mirror::MirrorFetcher`] task per mirror for the partitions this shard owns,
//! keeps the read-only gate's view of each partition's mirror state, and carries out
//! the log steps of the state machine the control plane drives (PREPARING truncation,
//! the STOPPING steps). Only this shard touches these logs.

pub mod engine;
pub mod mirror;
pub mod replica;
pub mod throttle;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use crate::log::AppendKind;
use crate::metadata::MirrorImage;
use crate::shard::{now_ms, ShardCtx};
use crate::types::{LeaderEpoch, Offset, TopicPartition};
use crate::wire::control::{build_mirror_pid_reset, ControlType};
use crate::wire::RecordBatch;

/// What a fetcher tells the control plane's mirror manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorEvent {
    /// The partition stopped fetching because of an error; `retryable == false` for
    /// errors retrying cannot fix (corrupt data from the source, a source topic that is
    /// gone).
    PartitionFailed {
        mirror: String,
        tp: TopicPartition,
        message: String,
        retryable: bool,
        /// Offsets the fetcher cut where the source diverged and had not reported yet
        /// (the manager adds them to the partition's stored count).
        truncated_records: i64,
    },
}

/// How a mirror reaches its source, from the mirror's configs (reference §3.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorFetchConfig {
    pub mirror: String,
    pub bootstrap_servers: String,
    pub source_cluster_id: String,
    pub client_id: String,
    pub fetch_wait_max_ms: i32,
    pub fetch_min_bytes: i32,
    pub fetch_response_max_bytes: i32,
    /// Per partition.
    pub fetch_max_bytes: i32,
    pub fetch_backoff_ms: u64,
    pub request_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// Connections (so Fetch requests in flight) per source broker per shard
    /// (`mirror.fetch.connections`, default 1): a shard's partitions led by one source
    /// broker are split across them. With the pipelined fetcher one connection per
    /// shard was fastest (perf/RESULTS.md): more split each response and wait for the
    /// slowest.
    pub fetch_connections: usize,
    /// TLS and SASL toward the source (`security.protocol`, `ssl.*`, `sasl.*`); `Err`
    /// says which of those configs is wrong.
    pub security: Result<crate::client::security::ClientSecurity, String>,
}

impl MirrorFetchConfig {
    pub fn from_image(mirror: &MirrorImage) -> Self {
        let c = &mirror.configs;
        let int = |k: &str, default: i64| -> i64 {
            c.get(k)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(default)
        };
        MirrorFetchConfig {
            mirror: mirror.name.clone(),
            bootstrap_servers: mirror.bootstrap_servers().to_string(),
            source_cluster_id: mirror.source_cluster_id().to_string(),
            client_id: c
                .get("client.id")
                .cloned()
                .unwrap_or_else(|| format!("twinlog-mirror-{}", mirror.name)),
            fetch_wait_max_ms: int("fetch.wait.max.ms", 500).clamp(0, 60_000) as i32,
            fetch_min_bytes: int("fetch.min.bytes", 1).clamp(0, i64::from(i32::MAX)) as i32,
            fetch_response_max_bytes: int("fetch.response.max.bytes", 10 << 20).clamp(1, 256 << 20)
                as i32,
            fetch_max_bytes: int("fetch.max.bytes", 1 << 20).clamp(1, 64 << 20) as i32,
            fetch_backoff_ms: int("fetch.backoff.ms", 1000).clamp(0, 300_000) as u64,
            request_timeout_ms: int("request.timeout.ms", 30_000).clamp(100, 600_000) as u64,
            connect_timeout_ms: int("socket.connection.setup.timeout.ms", 10_000)
                .clamp(100, 600_000) as u64,
            fetch_connections: int("mirror.fetch.connections", 1).clamp(1, 8) as usize,
            security: crate::client::security::ClientSecurity::from_configs(c),
        }
    }

    /// How a connection to the source is made: `client_id`, the connect timeout, the
    /// request timeout given and the security settings. `Err`: a security config is
    /// wrong.
    pub fn connection(
        &self,
        client_id: &str,
        request_timeout: std::time::Duration,
    ) -> Result<crate::client::ConnectionConfig, String> {
        let mut c = crate::client::ConnectionConfig::new(
            client_id,
            std::time::Duration::from_millis(self.connect_timeout_ms),
        );
        c.request_timeout = request_timeout;
        c.security = self.security.clone()?;
        Ok(c)
    }
}

/// A partition's fetch progress, for DescribeMirrors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorPartitionStatus {
    /// The source's high watermark at the last fetch, -1 unknown.
    pub source_high_watermark: i64,
    /// The source's log start offset at the last fetch, -1 unknown.
    pub source_log_start_offset: i64,
    /// The source partition leader epoch last seen, -1 unknown.
    pub source_leader_epoch: i32,
    /// The last error the fetcher hit (cleared by a successful fetch).
    pub last_error: Option<String>,
    /// Offsets the fetcher discarded where the source's history diverged from the
    /// local log (failback: the old primary's unreplicated tail).
    pub truncated_records: i64,
    /// The source's newest record timestamp minus the newest mirrored one, in ms (the
    /// RPO), probed about once a second; -1 unknown.
    pub lag_ms: i64,
}

/// Per-shard owner of mirror fetchers (the read-only gate is each `Partition`'s).
#[derive(Debug, Default)]
pub struct MirrorFetcherManager {
    fetchers: RefCell<BTreeMap<String, Rc<mirror::MirrorFetcher>>>,
    events: RefCell<Option<async_channel::Sender<MirrorEvent>>>,
}

impl MirrorFetcherManager {
    /// Where fetchers report failures (set once by the control plane).
    pub fn set_events(&self, sender: async_channel::Sender<MirrorEvent>) {
        *self.events.borrow_mut() = Some(sender);
    }

    pub(crate) fn report(&self, event: MirrorEvent) {
        let sender = self.events.borrow().clone();
        match sender {
            Some(s) => {
                if s.try_send(event.clone()).is_err() {
                    tracing::warn!(?event, "mirror event dropped (manager queue full or gone)");
                }
            }
            None => tracing::warn!(?event, "mirror event with no manager to report to"),
        }
    }

    /// Fetch progress of a partition, if a fetcher has it.
    pub fn status(&self, tp: &TopicPartition) -> Option<MirrorPartitionStatus> {
        self.fetchers.borrow().values().find_map(|f| f.status(tp))
    }

    /// The fetcher that holds `tp`, if one does: its config, and whether it has fetched
    /// from the source without error since it took the partition. The mirror manager
    /// compares this with the stored state on every tick.
    pub fn fetching(&self, tp: &TopicPartition) -> Option<(MirrorFetchConfig, bool)> {
        self.fetchers.borrow().values().find_map(|f| {
            let status = f.status(tp)?;
            let healthy = status.last_error.is_none() && status.source_high_watermark >= 0;
            Some((f.config().clone(), healthy))
        })
    }

    /// Starts fetching `tp` from the mirror's source (idempotent). A changed config
    /// restarts that mirror's fetcher with the new settings.
    pub fn add_partition(ctx: &Rc<ShardCtx>, tp: TopicPartition, config: MirrorFetchConfig) {
        let manager = &ctx.mirror_fetchers;
        let existing = manager.fetchers.borrow().get(&config.mirror).cloned();
        let fetcher = match existing {
            Some(f) if f.config() == &config => f,
            other => {
                // The old fetcher gives its partitions up at once: an append it has in
                // flight then fails its membership check under the log lock, so nothing
                // it fetched lands after a later removal (audit B-19).
                let carried = other.map(|old| old.retire());
                let f = mirror::MirrorFetcher::start(Rc::clone(ctx), config.clone());
                for p in carried.into_iter().flatten() {
                    f.add(p);
                }
                manager
                    .fetchers
                    .borrow_mut()
                    .insert(config.mirror.clone(), Rc::clone(&f));
                f
            }
        };
        fetcher.add(tp);
    }

    /// Stops fetching `tp`. When this returns no append of the fetcher to `tp` is in
    /// flight and none will start.
    pub async fn remove_partition(ctx: &Rc<ShardCtx>, tp: &TopicPartition) {
        let fetchers: Vec<Rc<mirror::MirrorFetcher>> = ctx
            .mirror_fetchers
            .fetchers
            .borrow()
            .values()
            .cloned()
            .collect();
        for f in fetchers {
            if f.remove(tp) && f.is_empty() {
                f.shutdown();
                let mut all = ctx.mirror_fetchers.fetchers.borrow_mut();
                if all
                    .get(f.config().mirror.as_str())
                    .is_some_and(|g| Rc::ptr_eq(g, &f))
                {
                    all.remove(f.config().mirror.as_str());
                }
            }
        }
        // The fetcher checks membership under the log's write lock: taking it once here
        // waits out an append that started before the removal.
        if let Some(p) = ctx.partition(tp) {
            let _guard = p.write().await;
        }
    }

    /// Stops every fetcher of a mirror (DeleteMirror, shutdown).
    pub fn remove_mirror(&self, mirror: &str) {
        if let Some(f) = self.fetchers.borrow_mut().remove(mirror) {
            f.shutdown();
        }
    }

    pub fn shutdown(&self) {
        for (_, f) in std::mem::take(&mut *self.fetchers.borrow_mut()) {
            f.shutdown();
        }
    }
}

/// Errors of the mirror log steps, as text for the FAILED record.
pub type StepResult<T> = Result<T, String>;

/// The partition `tp` of this shard, or why a step cannot run on it.
fn owned(ctx: &ShardCtx, tp: &TopicPartition) -> StepResult<Rc<crate::partition::Partition>> {
    let p = ctx
        .partition(tp)
        .ok_or_else(|| format!("partition {tp} is not open on shard {}", ctx.id))?;
    // Only the leader carries a mirror step out; its followers copy the result.
    if !p.is_leader() {
        return Err(format!("partition {tp} is not led by this broker"));
    }
    Ok(p)
}

/// PREPARING's first phase: truncates `tp` for the last mirrored epoch the source
/// reported (`DECISIONS.md`, "LME and PREPARING"; reference §4.5), and the offset
/// recorded with it when there is one (audit B-10). Returns the number of offsets
/// discarded and what the replicas must reach before anything is copied past the cut
/// ([`await_prepared`], the second phase): the caller records the count in between, so
/// that a second phase that fails does not lose it (a retry finds nothing left to cut).
pub async fn prepare_partition(
    ctx: &Rc<ShardCtx>,
    tp: &TopicPartition,
    (lme, lme_offset): (i32, i64),
) -> StepResult<(i64, Convergence)> {
    let partition = owned(ctx, tp)?;
    let mut log = partition
        .write()
        .await
        .map_err(|_| format!("partition {tp} is closed"))?;
    let end = log.log_end_offset();
    let target = prepare_target(
        lme,
        lme_offset,
        log.epoch_cache().entries().first().map(|e| e.epoch.0),
        log.latest_epoch().map(|e| e.0),
        log.end_offset_for_epoch(LeaderEpoch(lme.max(0))).1 .0,
        end.0,
    );
    let target = Offset(target);
    let truncated_at = now_ms();
    let discarded = if end <= target {
        0
    } else {
        log.cut_to(target).await.map_err(|e| e.to_string())?;
        let new_end = log.log_end_offset();
        tracing::info!(%tp, lme, from = end.0, to = new_end.0, discarded = end.0 - target.0, "PREPARING truncated the log to the last mirrored epoch");
        end.0 - target.0
    };
    Ok((
        discarded,
        Convergence::after_cut(ctx, tp, &log, truncated_at),
    ))
}

/// PREPARING's second phase: waits until the replicas of `tp` converged on the cut
/// [`prepare_partition`] made, or fails as [`check_converged`] does.
pub async fn await_prepared(
    ctx: &Rc<ShardCtx>,
    tp: &TopicPartition,
    convergence: Convergence,
) -> StepResult<()> {
    owned(ctx, tp)?;
    await_converged(ctx, tp, convergence).await
}

impl Convergence {
    /// Whether the replicas have had [`CONVERGENCE_TIMEOUT`] to converge by `now_ms`.
    pub(crate) fn overdue(&self, now_ms: i64) -> bool {
        now_ms - self.since_ms >= CONVERGENCE_TIMEOUT.as_millis() as i64
    }

    /// What the replicas of `tp` must reach after its leader log was cut at `cut_at_ms`
    /// (the caller holds the log's lock, so its end is the cut's).
    pub(crate) fn after_cut(
        ctx: &ShardCtx,
        tp: &TopicPartition,
        log: &crate::log::PartitionLog,
        cut_at_ms: i64,
    ) -> Convergence {
        let every_replica = ctx
            .metadata
            .load()
            .topic(&tp.topic)
            .and_then(|t| t.configs.get(SUPPORT_UNCLEAN_ELECTION_CONFIG))
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Convergence {
            leader_end: log.log_end_offset().0,
            since_ms: cut_at_ms,
            min_isr: log.config().min_insync_replicas.max(1) as usize,
            every_replica,
        }
    }
}

/// Whether the replicas of `tp` reached `c` (after PREPARING's truncation, and the mirror
/// fetcher's gate after it cut the log where the source diverged; reference §10.3):
/// `Ok(false)` while they have not,
/// an error once they have not for [`CONVERGENCE_TIMEOUT`] or when this broker no longer
/// leads the partition.
pub(crate) fn check_converged(
    ctx: &ShardCtx,
    tp: &TopicPartition,
    c: Convergence,
    now_ms: i64,
) -> StepResult<bool> {
    match convergence_lacks(ctx, tp, c)? {
        None => Ok(true),
        Some(why) if c.overdue(now_ms) => Err(why),
        Some(_) => Ok(false),
    }
}

/// What the replicas of `tp` still lack to reach `c` (`None`: nothing), or why this
/// broker cannot tell (it no longer leads the partition).
pub(crate) fn convergence_lacks(
    ctx: &ShardCtx,
    tp: &TopicPartition,
    c: Convergence,
) -> StepResult<Option<String>> {
    let partition = owned(ctx, tp)?;
    let leadership = partition.leadership();
    Ok(
        not_converged(&leadership, &partition.followers(), leadership.leader, c).map(|why| {
            format!(
                "the replicas of {tp} did not converge on the cut at {}: {why}",
                c.leader_end
            )
        }),
    )
}

/// The topic config that makes PREPARING wait for every assigned replica, not only the
/// ISR (reference §3.5, §10.3).
pub const SUPPORT_UNCLEAN_ELECTION_CONFIG: &str = "mirror.support.unclean.leader.election";

/// How long PREPARING waits for the replicas to converge (then it fails, retryable); a
/// mirror fetcher held on a divergence cut says why after this long, and keeps waiting.
pub(crate) const CONVERGENCE_TIMEOUT: Duration = Duration::from_secs(30);

/// What PREPARING's second phase waits for (reference §4.5, "two-phase convergence"),
/// and what the mirror fetcher waits for after cutting its log mid-copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Convergence {
    /// The leader's log end after its truncation.
    leader_end: i64,
    /// When the leader truncated: a follower's position counts from a fetch after it.
    since_ms: i64,
    min_isr: usize,
    /// `mirror.support.unclean.leader.election`: every assigned replica, in the ISR.
    every_replica: bool,
}

/// Why the replicas have not converged yet (`None`: they have). The relevant replicas
/// are the ISR's followers (every assigned replica with `every_replica`, which also
/// needs the whole assignment in the ISR); each must have fetched since the truncation
/// from no further than the leader's end, so that none keeps a record the leader cut
/// and could bring it back by being elected.
fn not_converged(
    leadership: &crate::partition::Leadership,
    followers: &std::collections::BTreeMap<i32, crate::partition::FollowerState>,
    node: i32,
    c: Convergence,
) -> Option<String> {
    if c.every_replica && leadership.isr.len() < leadership.replicas.len() {
        return Some(format!(
            "ISR {:?} is not every replica {:?} ({SUPPORT_UNCLEAN_ELECTION_CONFIG}=true)",
            leadership.isr, leadership.replicas
        ));
    }
    if leadership.isr.len() < c.min_isr {
        return Some(format!(
            "ISR {:?} is below min.insync.replicas {}",
            leadership.isr, c.min_isr
        ));
    }
    let relevant = if c.every_replica {
        &leadership.replicas
    } else {
        &leadership.isr
    };
    for r in relevant.iter().filter(|r| **r != node) {
        match followers.get(r) {
            Some(f) if f.last_fetch_ms >= c.since_ms && f.log_end <= c.leader_end => {}
            Some(f) => {
                return Some(format!(
                    "replica {r} is at {} (leader end {})",
                    f.log_end, c.leader_end
                ))
            }
            None => return Some(format!("replica {r} has not fetched")),
        }
    }
    None
}

/// Waits until [`check_converged`] says the replicas converged (PREPARING's second
/// phase), or fails as it does.
async fn await_converged(ctx: &ShardCtx, tp: &TopicPartition, c: Convergence) -> StepResult<()> {
    while !check_converged(ctx, tp, c, now_ms())? {
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The latest batch epoch in the log (`None`: no batches with an epoch).
pub async fn latest_epoch(ctx: &Rc<ShardCtx>, tp: &TopicPartition) -> StepResult<Option<i32>> {
    let partition = owned(ctx, tp)?;
    let log = partition
        .read()
        .await
        .map_err(|_| format!("partition {tp} is closed"))?;
    Ok(log.latest_epoch().map(|e| e.0))
}

/// STOPPING step 2: the epoch the partition's leader epoch must be raised above — the
/// latest batch epoch in the log — or `None` when there is nothing to raise: no batch
/// with an epoch, or this STOPPING's own MIRROR_PID_RESET is already the last batch (a
/// re-run after a crash past step 5, or on a new leader that replicated it; raising
/// again would write a second one).
pub async fn stop_epoch_to_exceed(
    ctx: &Rc<ShardCtx>,
    tp: &TopicPartition,
    source_cluster_id: &str,
) -> StepResult<Option<i32>> {
    let partition = owned(ctx, tp)?;
    let epoch = partition.leader_epoch().0;
    let log = partition
        .read()
        .await
        .map_err(|_| format!("partition {tp} is closed"))?;
    if last_batch_is_own_pid_reset(&log, epoch, source_cluster_id).await? {
        return Ok(None);
    }
    Ok(log.latest_epoch().map(|e| e.0))
}

/// PREPARING's truncation target (reference §4.5): the end of the LME epoch in the local
/// epoch cache — the log end when the LME is at or above the latest local epoch (the
/// local log is all shared history), 0 when the LME is unknown or below every local
/// epoch — and never past the offset recorded with the LME, where the other side's
/// copy of that history ended (so a tail the local log added in the same epoch goes
/// even when the other side's retention no longer lets an epoch check find it).
pub fn prepare_target(
    lme: i32,
    lme_offset: i64,
    earliest_epoch: Option<i32>,
    latest_epoch: Option<i32>,
    end_for_lme: i64,
    log_end: i64,
) -> i64 {
    let by_epoch = match (earliest_epoch, latest_epoch) {
        _ if lme < 0 => 0,
        (None, _) | (_, None) => 0,
        (Some(first), _) if lme < first => 0,
        (_, Some(latest)) if lme >= latest => log_end,
        _ if end_for_lme < 0 => 0,
        _ => end_for_lme,
    };
    if lme >= 0 && lme_offset >= 0 {
        by_epoch.min(lme_offset)
    } else {
        by_epoch
    }
}

/// STOPPING step 3: truncates to the LSO. Returns the LME to persist (step 4) with the
/// log end that goes with it, or `None` when this STOPPING's own MIRROR_PID_RESET batch
/// is already the log's last batch: a re-run after a crash, whose LME was persisted
/// before the batch was written.
pub async fn stop_truncate(
    ctx: &Rc<ShardCtx>,
    tp: &TopicPartition,
    source_cluster_id: &str,
) -> StepResult<Option<(i32, i64)>> {
    let partition = owned(ctx, tp)?;
    let mut log = partition
        .write()
        .await
        .map_err(|_| format!("partition {tp} is closed"))?;
    let epoch = partition.leader_epoch().0;
    if last_batch_is_own_pid_reset(&log, epoch, source_cluster_id).await? {
        return Ok(None);
    }
    // The start of the earliest transaction without a marker, not the high watermark
    // (nor a decided transaction whose marker the followers have not fetched yet): on a
    // cluster the high watermark lags the mirrored appends, and on a leader just elected
    // it lags until the followers fetch; the records above it are the source's decided
    // history, and the wait for the ISR after the reset replicates them.
    let end = log.log_end_offset();
    let lso = log.first_undecided_offset().map_or(end, |o| o.min(end));
    if lso < end {
        log.truncate_to(lso).await.map_err(|e| e.to_string())?;
        let new_end = log.log_end_offset();
        tracing::info!(%tp, from = end.0, to = new_end.0, "STOPPING truncated the log to its last stable offset");
    }
    Ok(Some((
        log.latest_epoch().map_or(-1, |e| e.0),
        log.log_end_offset().0,
    )))
}

/// STOPPING step 5: appends the MIRROR_PID_RESET control batch at the partition's
/// current leader epoch, unless this STOPPING's own is already the last batch.
/// `sync_log`: make it durable here (else the caller syncs the filesystem once for
/// every partition of its group).
pub async fn stop_append_pid_reset(
    ctx: &Rc<ShardCtx>,
    tp: &TopicPartition,
    source_cluster_id: &str,
    sync_log: bool,
) -> StepResult<()> {
    let partition = owned(ctx, tp)?;
    let mut log = partition
        .write()
        .await
        .map_err(|_| format!("partition {tp} is closed"))?;
    let epoch = partition.leader_epoch().0;
    if !last_batch_is_own_pid_reset(&log, epoch, source_cluster_id).await? {
        let now = now_ms();
        let batch = build_mirror_pid_reset(source_cluster_id, now);
        log.append_as_leader(batch, LeaderEpoch(epoch), AppendKind::Coordinator, now)
            .await
            .map_err(|e| e.to_string())?;
        if sync_log && log.config().flush_messages > 1 {
            // The reset is the failover's barrier: make it durable before STOPPED is
            // persisted, whatever the topic's flush settings (its bytes: recovery
            // rebuilds the rest from them).
            log.sync_data().await.map_err(|e| e.to_string())?;
        }
    }
    let (end, min_isr) = (
        log.log_end_offset(),
        log.config().min_insync_replicas.max(1) as usize,
    );
    drop(log);
    // acks=all (reference §4.5 on a cluster): the ISR has the truncation and the reset
    // before STOPPED makes the partition writable, so no replica that could lead next
    // lacks them. A re-run after a leader change waits again on the new leader.
    crate::api::produce::wait_for_isr(&partition, end, min_isr, PID_RESET_REPLICATION_TIMEOUT_MS)
        .await
        .map_err(|(_, message)| format!("MIRROR_PID_RESET of {tp} not replicated: {message}"))
}

/// How long STOPPING waits for the ISR to have its MIRROR_PID_RESET (a failed wait is
/// retried with backoff, like any STOPPING step).
const PID_RESET_REPLICATION_TIMEOUT_MS: i32 = 30_000;

/// Whether the log ends with this STOPPING's own MIRROR_PID_RESET: one naming the
/// mirror's source cluster (written by this leader or by one before it, whose followers
/// replicated it), or, for a source without a cluster id, one written at `epoch`. A
/// reset mirrored from upstream (a chain, or a failback right after the other side
/// failed over) names another cluster and carries a lower epoch: it does not count
/// (audit B-11).
async fn last_batch_is_own_pid_reset(
    log: &crate::log::PartitionLog,
    epoch: i32,
    source_cluster_id: &str,
) -> StepResult<bool> {
    let end = log.log_end_offset();
    if end.0 == 0 || end <= log.log_start_offset() {
        return Ok(false);
    }
    let data = log
        .read(Offset(end.0 - 1), 1 << 20)
        .await
        .map_err(|e| e.to_string())?;
    let mut last: Option<RecordBatch> = None;
    for b in crate::wire::BatchIter::new(data.records, 0, false) {
        match b {
            Ok(b) => last = Some(b),
            Err(_) => break,
        }
    }
    Ok(last.is_some_and(|b| {
        b.last_offset().0 == end.0 - 1
            && b.is_control()
            && matches!(b.control_record(), Ok(c) if c.kind == ControlType::MirrorPidReset
            && if source_cluster_id.is_empty() {
                b.partition_leader_epoch().0 >= epoch
            } else {
                c.source_cluster_id.as_deref() == Some(source_cluster_id)
            })
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{not_converged, prepare_target, Convergence};
    use crate::partition::{FollowerState, Leadership};
    use crate::types::LeaderEpoch;

    #[test]
    fn preparing_completes_once_every_relevant_replica_fetched_from_the_cut() {
        let leadership = |isr: &[i32]| Leadership {
            leader: 1,
            leader_epoch: LeaderEpoch(4),
            partition_epoch: 0,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
        };
        let at = |log_end, last_fetch_ms| FollowerState {
            log_end,
            last_caught_up_ms: 0,
            last_fetch_ms,
            last_fetch_leader_end: 0,
        };
        let c = Convergence {
            leader_end: 100,
            since_ms: 1_000,
            min_isr: 2,
            every_replica: false,
        };
        let followers =
            |two: FollowerState, three: FollowerState| BTreeMap::from([(2, two), (3, three)]);
        let converged = followers(at(100, 1_001), at(90, 1_002));
        assert_eq!(
            not_converged(&leadership(&[1, 2, 3]), &converged, 1, c),
            None
        );
        // A follower still past the cut, or whose last fetch is from before it.
        let ahead = followers(at(150, 1_001), at(90, 1_002));
        assert!(not_converged(&leadership(&[1, 2, 3]), &ahead, 1, c).is_some());
        let stale = followers(at(100, 999), at(90, 1_002));
        assert!(not_converged(&leadership(&[1, 2, 3]), &stale, 1, c).is_some());
        // Out of the ISR it does not count, unless every replica must converge.
        let out = followers(at(100, 1_001), at(150, 500));
        assert_eq!(not_converged(&leadership(&[1, 2]), &out, 1, c), None);
        let all = Convergence {
            every_replica: true,
            ..c
        };
        let why = not_converged(&leadership(&[1, 2]), &out, 1, all).expect("waits");
        assert!(why.contains("every replica"), "{why}");
        assert!(not_converged(&leadership(&[1, 2, 3]), &out, 1, all).is_some());
        assert_eq!(
            not_converged(&leadership(&[1, 2, 3]), &converged, 1, all),
            None
        );
        // Below min.insync.replicas nothing completes.
        assert!(not_converged(&leadership(&[1]), &converged, 1, c).is_some());
        // A partition with no other replica completes at once.
        let alone = Leadership {
            replicas: vec![1],
            isr: vec![1],
            ..leadership(&[1])
        };
        let one = Convergence { min_isr: 1, ..c };
        assert_eq!(not_converged(&alone, &BTreeMap::new(), 1, one), None);
    }

    #[test]
    fn preparing_cuts_at_the_lme_epoch_end_and_never_past_its_offset() {
        // Epochs 2..=7 locally, log end 900; epoch 4 ends at 500.
        let t = |lme, off| prepare_target(lme, off, Some(2), Some(7), 500, 900);
        assert_eq!(t(4, -1), 500);
        assert_eq!(t(4, 450), 450, "the recorded offset bounds the epoch's end");
        assert_eq!(t(4, 700), 500);
        // An LME at or above the latest local epoch keeps the log (audit B-10: it used
        // to truncate everything) unless its offset says where the shared part ended.
        assert_eq!(t(7, -1), 900);
        assert_eq!(t(12, -1), 900);
        assert_eq!(t(12, 880), 880);
        // No LME, or one below every local epoch: mirror from scratch.
        assert_eq!(t(-1, -1), 0);
        assert_eq!(t(1, 300), 0);
        assert_eq!(prepare_target(3, -1, None, None, -1, 0), 0);
    }
}
