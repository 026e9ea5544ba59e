//! `MirrorManager`: drives every mirror partition's state machine (`DECISIONS.md`,
//! "Partition states"; reference §4). It compares the desired state each topic's
//! `mirror.name` encodes with the actual state in `__mirror_state`, persists each
//! transition through the [`MirrorStateCoordinator`] before its action runs, and has
//! the owning shard carry the action out (truncation, fetcher start/stop, the STOPPING
//! steps). It also answers DescribeMirrors, including the LME look-ups a destination
//! cluster makes when it fails back from us.
//!
//! It runs on the control plane's mirror thread (a glommio executor that is not a
//! shard), so waiting on a source cluster or on shards never stalls client traffic.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::client::cluster::SourceCluster;
use dataplane::controller::{AdminRequest, AdminResponse, ControllerHandle};
use dataplane::failpoint::fail_point;
use dataplane::fetcher::{MirrorEvent, MirrorFetchConfig};
use dataplane::metadata::{MetadataCell, MetadataImage, TopicImage};
use dataplane::shard::{
    MirrorObservation, ShardReply, ShardRequest, ShardRequestError, ShardRouter,
};
use dataplane::types::TopicPartition;
use dataplane::wire::mirror::{
    errors, keys, DescribeMirrorsRequest, DescribeMirrorsResponse, DescribedMirror,
    DescribedMirrorPartition, DescribedMirrorTopic, DesiredMirrorState, LmeLookup, LmePartition,
    LmeResult, MirrorPartitionState, MirrorRequest, MirrorResponse, MirrorStateEntry,
    MirrorStatesTopic, WriteMirrorStatesRequest,
};
use futures::StreamExt;

use super::coordinator::{MirrorStateCoordinator, MIRROR_STATE_TOPIC};
use super::states::MirrorStates;
pub use super::transitions::MirrorManagerConfig;
use super::transitions::{self, Action, Inputs, Observed};

/// How often the manager compares desired and actual states when nothing wakes it.
const TICK: Duration = Duration::from_millis(200);
/// A STOPPING group of at least this many partitions makes its MIRROR_PID_RESETs
/// durable with one `syncfs` instead of one fdatasync per log: io_uring runs fdatasyncs
/// on its io-wq workers, a few at a time, so 10,000 of them took a second (perf/RESULTS.md).
const SYNCFS_PARTITIONS_MIN: usize = 64;
/// Partition actions running at once (a failover of 1,000 partitions runs them in
/// parallel, bounded).
const ACTIONS_IN_FLIGHT_MAX: usize = 256;

/// A mirror partition as the manager tracks it between ticks.
#[derive(Debug, Clone, Default)]
struct PartitionRuntime {
    /// An action for it is running: the claim of the task that runs it (a task that
    /// ends releases only its own claim, never a newer one's).
    busy: Option<u64>,
    /// FAILED (or a failed STOPPING): retry not before this, while the stored state
    /// still has this state epoch (an operator's `mirror recover` writes a new one).
    retry_at: Option<(Instant, i32)>,
    /// The mirror's fetch config when the partition FAILED: once the operator changes
    /// the mirror's configs (a fixed password), the backoff no longer applies.
    failed_with: Option<MirrorFetchConfig>,
}

type Key = (String, TopicPartition);

/// The mirror side of the control plane.
pub struct MirrorManager {
    router: ShardRouter,
    metadata: Arc<MetadataCell>,
    controller: Arc<dyn ControllerHandle>,
    /// Partition states: the local coordinator's, or another broker's (remote keys).
    states: MirrorStates,
    config: MirrorManagerConfig,
    partitions: RefCell<HashMap<Key, PartitionRuntime>>,
    in_flight: Rc<glommio::sync::Semaphore>,
    wake: event_listener::Event,
    /// Source of the claims of running actions ([`PartitionRuntime::busy`]).
    claims: std::cell::Cell<u64>,
}

/// A mirror partition an action takes as a group with others of its mirror (PREPARING,
/// STOPPING): its topic, number, and stored state when the tick decided.
type Part = (Arc<TopicImage>, i32, MirrorStateEntry);

/// How many partitions of a PREPARING group take their steps at once (each step waits
/// for a replicated state write or for the partition's followers).
const PREPARE_CONCURRENCY: usize = 64;

/// What a group's steps share: the image it started from, its mirror, and the claim
/// its task holds on its partitions.
struct Group<'a> {
    image: &'a MetadataImage,
    mirror: &'a str,
    claim: u64,
}

impl std::fmt::Debug for MirrorManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorManager")
            .field("partitions", &self.partitions.borrow().len())
            .finish_non_exhaustive()
    }
}

/// Why a step failed: the message for FAILED and whether retrying can help.
#[derive(Debug, Clone)]
struct StepError {
    message: String,
    retryable: bool,
    /// Not a failure, nothing to record: the partition's log is not open on its shard
    /// yet (just created), or another broker leads it now. The next tick looks again.
    not_ours: bool,
}

impl From<String> for StepError {
    fn from(message: String) -> Self {
        StepError {
            message,
            retryable: true,
            not_ours: false,
        }
    }
}

/// This broker no longer leads the partition (at the epoch the step started at): the
/// new leader drives it from here; nothing is recorded.
fn lost_leadership(topic: &str, partition: i32) -> StepError {
    StepError {
        message: format!("{topic}-{partition}: this broker no longer leads it"),
        retryable: true,
        not_ours: true,
    }
}

/// When each step of a group's action ended, from its start ("record 2ms, fetchers
/// 3ms, ..."), for the action's summary line.
struct StepClock {
    started: Instant,
    last: Instant,
    steps: Vec<(&'static str, Duration)>,
}

impl Default for StepClock {
    fn default() -> Self {
        let now = Instant::now();
        StepClock {
            started: now,
            last: now,
            steps: Vec::new(),
        }
    }
}

impl StepClock {
    fn mark(&mut self, step: &'static str) {
        let now = Instant::now();
        self.steps.push((step, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for StepClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (step, took) in &self.steps {
            write!(f, "{step} {}ms, ", took.as_millis())?;
        }
        write!(f, "total {}ms", (self.last - self.started).as_millis())
    }
}

/// The partitions of a group's step outcomes, without what each answered.
fn parts_only<T>(kept: Vec<(&Part, T)>) -> Vec<&Part> {
    kept.into_iter().map(|(part, _)| part).collect()
}

/// A shard's refusal as a step's failure.
fn step_error(e: ShardRequestError) -> StepError {
    match e {
        // The controller publishes a new topic before its shards have opened the logs:
        // not a failure, the next tick tries again.
        ShardRequestError::NotOpen { .. } => StepError {
            message: e.to_string(),
            retryable: true,
            not_ours: true,
        },
        e => StepError::from(e.to_string()),
    }
}

fn unexpected(reply: &ShardReply) -> StepError {
    StepError::from(format!("unexpected shard answer {reply:?}"))
}

impl MirrorManager {
    pub fn new(
        router: ShardRouter,
        metadata: Arc<MetadataCell>,
        controller: Arc<dyn ControllerHandle>,
        coordinator: Rc<MirrorStateCoordinator>,
        config: MirrorManagerConfig,
    ) -> Rc<Self> {
        let states = MirrorStates::new(coordinator, Arc::clone(&metadata));
        Rc::new(MirrorManager {
            router,
            metadata,
            controller,
            states,
            config,
            partitions: RefCell::new(HashMap::new()),
            in_flight: Rc::new(glommio::sync::Semaphore::new(ACTIONS_IN_FLIGHT_MAX as u64)),
            wake: event_listener::Event::new(),
            claims: std::cell::Cell::new(0),
        })
    }

    /// The coordinator of the `__mirror_state` partitions this broker leads.
    pub fn coordinator(&self) -> &Rc<MirrorStateCoordinator> {
        self.states.local()
    }

    /// Serves one request the data plane forwarded (ReadMirrorStates, WriteMirrorStates,
    /// DescribeMirrors).
    pub async fn serve(self: &Rc<Self>, request: MirrorRequest) -> MirrorResponse {
        match request {
            MirrorRequest::ReadMirrorStates(r) => {
                MirrorResponse::ReadMirrorStates(self.coordinator().read(&r).await)
            }
            MirrorRequest::WriteMirrorStates(r) => {
                let response = self.coordinator().write(&r).await;
                self.wake.notify(usize::MAX);
                MirrorResponse::WriteMirrorStates(response)
            }
            MirrorRequest::DescribeMirrors(r) => {
                MirrorResponse::DescribeMirrors(self.describe(&r).await)
            }
            other => dataplane::api::mirror::error_response(
                &other,
                kafka_protocol::ResponseError::InvalidRequest.code(),
                "not a request for the mirror manager",
            ),
        }
    }

    /// Runs the manager: fetcher failure events and the reconcile loop.
    pub async fn run(self: Rc<Self>, events: async_channel::Receiver<MirrorEvent>) {
        let me = Rc::clone(&self);
        glommio::spawn_local(async move {
            while let Ok(event) = events.recv().await {
                me.on_event(event).await;
            }
        })
        .detach();
        loop {
            let published = self.metadata.listen();
            self.tick().await;
            let listener = self.wake.listen();
            let woken = futures::future::select(listener, published);
            let _ = futures::future::select(woken, Box::pin(glommio::timer::sleep(TICK))).await;
        }
    }

    /// Wakes the reconcile loop (after a metadata change).
    pub fn poke(&self) {
        self.wake.notify(usize::MAX);
    }

    /// A partition failed outside the manager (its fetcher, or the metadata sync): persist
    /// FAILED (retryable or not). Ignored unless the partition is MIRRORING.
    pub async fn on_event(self: &Rc<Self>, event: MirrorEvent) {
        let MirrorEvent::PartitionFailed {
            mirror,
            tp,
            message,
            retryable,
            truncated_records,
        } = event;
        let image = self.metadata.load();
        let Some(topic) = image.topic(&tp.topic).cloned() else {
            return;
        };
        if image
            .partition(&tp)
            .is_some_and(|p| p.leader != image.node_id)
        {
            // The metadata sync runs on one broker for the whole cluster: the
            // partition's leader drives it, so the failure goes to its stored state.
            self.fail_elsewhere(&image, &topic, &mirror, tp.partition, message, retryable)
                .await;
            return;
        }
        // Only a partition that is still mirroring fails this way.
        let entry = self.states.entry(&mirror, topic.id, tp.partition);
        if MirrorPartitionState::from_code(entry.state) != Some(MirrorPartitionState::Mirroring) {
            return;
        }
        let error = StepError {
            message,
            retryable,
            not_ours: false,
        };
        self.fail(
            &image,
            &topic,
            &mirror,
            tp.partition,
            &entry,
            MirrorPartitionState::Mirroring,
            error,
            truncated_records,
        )
        .await;
        self.poke();
    }

    /// FAILED for a MIRRORING partition another broker leads: written to its stored
    /// state at its leader's epoch (fenced by the state epoch read here); its leader's
    /// next tick stops the fetcher and holds the partition there.
    async fn fail_elsewhere(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        message: String,
        retryable: bool,
    ) {
        let tp = TopicPartition::new(topic.name.as_str(), partition);
        let entry = match self
            .states
            .read_entry(image, mirror, topic, partition)
            .await
        {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(%mirror, %tp, error = %e, "cannot read the state of a partition to fail; the next sync tries again");
                return;
            }
        };
        if MirrorPartitionState::from_code(entry.state) != Some(MirrorPartitionState::Mirroring) {
            return;
        }
        let leader_epoch = image.partition(&tp).map_or(-1, |p| p.leader_epoch);
        let failed = MirrorStateEntry {
            partition,
            last_mirrored_epoch: -1,
            state: MirrorPartitionState::Failed.code(),
            error_code: 0,
            previous_state: MirrorPartitionState::Mirroring.code(),
            retry_attempt: transitions::next_attempt(&entry, retryable),
            error_message: Some(message.clone()),
            leader_epoch: leader_epoch.max(entry.leader_epoch),
            state_epoch: entry.state_epoch,
            truncated_records: entry.truncated_records,
            last_mirrored_offset: -1,
        };
        match self.write_entries(mirror, &topic.name, vec![failed]).await {
            Ok(()) => {
                tracing::warn!(%mirror, %tp, error = %message, "mirror partition FAILED (found by the metadata sync; its leader stops it)")
            }
            Err(e) => {
                tracing::warn!(%mirror, %tp, error = %e.message, "could not persist FAILED; the next sync tries again")
            }
        }
    }

    async fn tick(self: &Rc<Self>) {
        let image = self.metadata.load();
        // `__mirror_state` partitions this broker no longer leads are dropped at once;
        // the ones it newly leads are loaded.
        self.coordinator().resign();
        if image.topic(MIRROR_STATE_TOPIC).is_some() && !self.coordinator().is_loaded() {
            // A partition that cannot load blocks only the mirror partitions whose states
            // it holds (audit B-7): the others go on below.
            if let Err(e) = self.coordinator().load().await {
                if matches!(
                    e,
                    crate::mirror::coordinator::CoordinatorError::NotOpen { .. }
                ) {
                    tracing::debug!(error = %e, "__mirror_state is still being opened");
                } else {
                    tracing::warn!(error = %e, "cannot load every __mirror_state partition yet");
                }
            }
        }
        if image.topic(MIRROR_STATE_TOPIC).is_none() && !image.mirrors.is_empty() {
            return;
        }
        self.forget_deleted_mirrors(&image).await;
        // Only the leader of a mirror partition drives it (reference §6.1): its mirror
        // fetcher, its steps and its state writes move with leadership.
        let led: Vec<(&str, &Arc<TopicImage>, i32)> = image
            .topics
            .values()
            .filter_map(|t| t.mirror().map(|(m, _)| (m, t)))
            .flat_map(|(m, t)| {
                t.partitions
                    .iter()
                    .filter(|p| p.leader == image.node_id)
                    .map(move |p| (m, t, p.partition))
            })
            .collect();
        let asks: Vec<(&str, &TopicImage, i32)> =
            led.iter().map(|(m, t, p)| (*m, t.as_ref(), *p)).collect();
        self.states.refresh(&image, &asks).await;
        // Partitions whose topic left its mirror (DeleteMirror) become ordinary; the
        // ones another broker leads now are its to drive.
        let live: HashSet<Key> = led
            .iter()
            .map(|(m, t, p)| (m.to_string(), TopicPartition::new(t.name.as_str(), *p)))
            .collect();
        let stale: Vec<Key> = self
            .partitions
            .borrow()
            .keys()
            .filter(|k| !live.contains(*k))
            .cloned()
            .collect();
        for key in stale {
            self.partitions.borrow_mut().remove(&key);
            let forget = ShardRequest::ForgetMirrorPartition { tp: key.1.clone() };
            self.on_shard(&image, &key.1, forget).await.ok();
        }
        let observed = self.observe(&image).await;
        let now = Instant::now();
        // PREPARING partitions are grouped per mirror (one LME look-up for all of them),
        // and so are STOPPING ones (one round of steps for a whole failover).
        let mut preparing: BTreeMap<String, Vec<Part>> = BTreeMap::new();
        let mut stopping: BTreeMap<String, Vec<Part>> = BTreeMap::new();
        for topic in image.topics.values() {
            let Some((mirror, desired)) = topic.mirror() else {
                continue;
            };
            if !image.mirrors.contains_key(mirror) {
                continue;
            }
            for p in topic
                .partitions
                .iter()
                .filter(|p| p.leader == image.node_id)
            {
                let key = (
                    mirror.to_string(),
                    TopicPartition::new(topic.name.as_str(), p.partition),
                );
                let runtime = self
                    .partitions
                    .borrow_mut()
                    .entry(key.clone())
                    .or_default()
                    .clone();
                if runtime.busy.is_some() {
                    continue;
                }
                if !self.states.is_loaded_for(mirror, topic.id, p.partition) {
                    continue;
                }
                // A shard that did not answer is asked again next tick.
                let Some(observed) = observed.get(&key.1) else {
                    continue;
                };
                let entry = self.states.entry(mirror, topic.id, p.partition);
                let config = image
                    .mirrors
                    .get(mirror)
                    .map(|m| MirrorFetchConfig::from_image(m));
                let action = transitions::decide(
                    &self.config,
                    Inputs {
                        desired,
                        stored: &entry,
                        observed,
                        config: config.as_ref(),
                        retry_at: runtime
                            .retry_at
                            .filter(|(_, epoch)| *epoch == entry.state_epoch)
                            .filter(|_| runtime.failed_with.as_ref() == config.as_ref())
                            .map(|(at, _)| at),
                        now,
                    },
                );
                if action != Action::None {
                    tracing::debug!(%mirror, topic = %topic.name, partition = p.partition, ?desired, state = entry.state, ?action, "mirror manager decision");
                }
                match action {
                    Action::None => {}
                    Action::Prepare | Action::Stop => {
                        let groups = if action == Action::Prepare {
                            &mut preparing
                        } else {
                            &mut stopping
                        };
                        let part = (Arc::clone(topic), p.partition, entry);
                        groups.entry(mirror.to_string()).or_default().push(part);
                    }
                    action => {
                        let claim = self.claim(&key);
                        let me = Rc::clone(self);
                        let image = Arc::clone(&image);
                        let topic = Arc::clone(topic);
                        let mirror = mirror.to_string();
                        let permit = Rc::clone(&self.in_flight);
                        let partition = p.partition;
                        glommio::spawn_local(async move {
                            let _permit = permit.acquire_permit(1).await;
                            me.act(action, &image, &topic, &mirror, partition, entry)
                                .await;
                            me.release(
                                &(mirror, TopicPartition::new(topic.name.as_str(), partition)),
                                claim,
                            );
                        })
                        .detach();
                    }
                }
            }
        }
        let groups = preparing
            .into_iter()
            .map(|g| (Action::Prepare, g))
            .chain(stopping.into_iter().map(|g| (Action::Stop, g)));
        for (action, (mirror, parts)) in groups {
            let claim = self.next_claim();
            for (topic, p, _) in &parts {
                let key = (mirror.clone(), TopicPartition::new(topic.name.as_str(), *p));
                self.partitions.borrow_mut().entry(key).or_default().busy = Some(claim);
            }
            let me = Rc::clone(self);
            let image = Arc::clone(&image);
            glommio::spawn_local(async move {
                if action == Action::Prepare {
                    me.prepare(&image, &mirror, &parts, claim).await;
                } else {
                    me.stop_all(&image, &mirror, &parts, claim).await;
                }
                for (topic, p, _) in &parts {
                    me.release(
                        &(mirror.clone(), TopicPartition::new(topic.name.as_str(), *p)),
                        claim,
                    );
                }
                // What the group finished (STOPPED, PREPARING done) may decide the next
                // step at once, not a tick later.
                me.poke();
            })
            .detach();
        }
    }

    fn next_claim(&self) -> u64 {
        let c = self.claims.get() + 1;
        self.claims.set(c);
        c
    }

    /// Marks `key` busy for a new task; returns that task's claim.
    fn claim(&self, key: &Key) -> u64 {
        let claim = self.next_claim();
        self.partitions
            .borrow_mut()
            .entry(key.clone())
            .or_default()
            .busy = Some(claim);
        claim
    }

    /// The task holding `claim` is done with `key`.
    fn release(&self, key: &Key, claim: u64) {
        if let Some(rt) = self.partitions.borrow_mut().get_mut(key) {
            if rt.busy == Some(claim) {
                rt.busy = None;
            }
        }
    }

    /// Tombstones the `__mirror_state` keys of mirrors that no longer exist. Which
    /// mirrors those are comes from the loaded table itself, not from memory, so a
    /// restart in the middle of a DeleteMirror still finishes it (audit B-16).
    async fn forget_deleted_mirrors(&self, image: &MetadataImage) {
        // Keys of deleted destination topics (reference §11 #30): a topic re-created
        // under the same id must not find its old states.
        let deleted_topics: Vec<(String, uuid::Uuid)> = self
            .coordinator()
            .topics()
            .into_iter()
            .filter(|(m, id)| image.mirrors.contains_key(m) && image.topic_by_id(*id).is_none())
            .collect();
        for (mirror, id) in deleted_topics {
            match self.coordinator().tombstone_topic(&mirror, id).await {
                Ok(n) => {
                    tracing::info!(%mirror, topic_id = %id, keys = n, "mirror topic deleted: its __mirror_state keys are tombstoned")
                }
                Err(e) => {
                    tracing::warn!(%mirror, topic_id = %id, error = %e, "tombstoning a deleted mirror topic's states failed; retrying")
                }
            }
        }
        let gone: Vec<String> = self
            .coordinator()
            .mirror_names()
            .into_iter()
            .filter(|m| !image.mirrors.contains_key(m))
            .collect();
        for mirror in &gone {
            fail_point("mirror.delete.before_tombstones").await;
            match self.coordinator().tombstone_mirror(mirror).await {
                Ok(n) => {
                    tracing::info!(%mirror, keys = n, "mirror deleted: its __mirror_state keys are tombstoned")
                }
                Err(e) => {
                    tracing::warn!(%mirror, error = %e, "tombstoning a deleted mirror's states failed; retrying");
                    continue;
                }
            }
            for shard in 0..self.router.shard_count() {
                let stop = ShardRequest::StopMirrorFetchers {
                    mirror: mirror.clone(),
                };
                let _ = self.router.request(shard, stop).await;
            }
        }
    }

    /// What each owning shard actually does for every mirror partition this broker
    /// leads: one request per shard per tick. A shard that did not answer leaves its
    /// partitions out.
    async fn observe(&self, image: &MetadataImage) -> HashMap<TopicPartition, Observed> {
        let tps: Vec<TopicPartition> = image
            .topics
            .values()
            .filter(|t| t.mirror().is_some())
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|p| p.leader == image.node_id)
                    .map(|p| TopicPartition::new(t.name.as_str(), p.partition))
            })
            .collect();
        self.observations(image, &tps, false)
            .await
            .into_iter()
            .map(|(tp, o)| {
                let observed = Observed {
                    gate: o.gate,
                    fetch_healthy: o.fetching.as_ref().is_some_and(|f| f.1),
                    fetching_with: o.fetching.map(|f| f.0),
                };
                (tp, observed)
            })
            .collect()
    }

    /// [`MirrorObservation`]s of `tps`, asked of each owning shard once.
    async fn observations(
        &self,
        image: &MetadataImage,
        tps: &[TopicPartition],
        log_ends: bool,
    ) -> HashMap<TopicPartition, MirrorObservation> {
        let mut by_shard: BTreeMap<usize, Vec<TopicPartition>> = BTreeMap::new();
        for tp in tps {
            if let Some(p) = image.partition(tp) {
                by_shard.entry(p.shard).or_default().push(tp.clone());
            }
        }
        let mut out = HashMap::new();
        for (shard, tps) in by_shard {
            match self
                .router
                .request(
                    shard,
                    ShardRequest::ObserveMirrorPartitions {
                        partitions: tps,
                        log_ends,
                    },
                )
                .await
            {
                Ok(ShardReply::Observed(rows)) => {
                    out.extend(rows.into_iter().map(|o| (o.tp.clone(), o)))
                }
                Ok(other) => tracing::warn!(shard, ?other, "mirror manager: unexpected answer"),
                Err(e) => {
                    tracing::debug!(shard, error = %e, "mirror manager: shard did not answer")
                }
            }
        }
        out
    }

    async fn act(
        self: &Rc<Self>,
        action: Action,
        image: &Arc<MetadataImage>,
        topic: &Arc<TopicImage>,
        mirror: &str,
        partition: i32,
        entry: MirrorStateEntry,
    ) {
        let tp = TopicPartition::new(topic.name.as_str(), partition);
        let (target, result) = match action {
            // Groups, per mirror: `prepare`, `stop_all`.
            Action::None | Action::Prepare | Action::Stop => return,
            Action::MarkStopped => (
                MirrorPartitionState::Stopped,
                self.set_shard_state(image, &tp, MirrorPartitionState::Stopped)
                    .await,
            ),
            Action::MarkPaused => (
                MirrorPartitionState::Paused,
                self.set_shard_state(image, &tp, MirrorPartitionState::Paused)
                    .await,
            ),
            Action::MarkFailed => (
                MirrorPartitionState::Failed,
                self.set_shard_state(image, &tp, MirrorPartitionState::Failed)
                    .await,
            ),
            Action::Pause => (
                MirrorPartitionState::Pausing,
                self.pause(image, topic, mirror, partition, &entry).await,
            ),
            Action::Resume => (
                MirrorPartitionState::Mirroring,
                self.resume(image, topic, mirror, partition, &entry).await,
            ),
            Action::ClearRetry => (
                MirrorPartitionState::Mirroring,
                self.clear_retry(image, topic, mirror, partition, &entry)
                    .await,
            ),
        };
        if let Err(e) = result {
            let entry = self.states.entry(mirror, topic.id, partition);
            self.fail(image, topic, mirror, partition, &entry, target, e, 0)
                .await;
        }
        if !matches!(
            action,
            Action::MarkStopped | Action::MarkPaused | Action::MarkFailed | Action::ClearRetry
        ) {
            self.poke();
        }
    }

    /// The leader epoch at which this broker leads `topic`-`partition` now, if it led it
    /// in `image` too (the image an action started from; the epoch may have gone up
    /// since, by STOPPING's own bump): a state write is fenced by it, so a broker that
    /// lost leadership cannot overwrite what the new leader wrote.
    fn led_at(&self, image: &MetadataImage, topic: &str, partition: i32) -> Result<i32, StepError> {
        let tp = TopicPartition::new(topic, partition);
        let then = image
            .partition(&tp)
            .filter(|p| p.leader == image.node_id)
            .map(|p| p.leader_epoch);
        let now = self.metadata.load();
        let still = now
            .partition(&tp)
            .filter(|p| p.leader == now.node_id)
            .map(|p| p.leader_epoch);
        match (then, still) {
            (Some(a), Some(b)) if b >= a => Ok(b),
            _ => Err(lost_leadership(topic, partition)),
        }
    }

    /// Persists `state` for a partition (fenced by the stored state epoch).
    #[allow(clippy::too_many_arguments)]
    async fn write_state(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        state: MirrorPartitionState,
        previous: MirrorPartitionState,
        retry_attempt: i16,
        error: Option<String>,
        truncated_records: i64,
    ) -> Result<(), StepError> {
        let entry = self.state_entry(
            image,
            topic,
            mirror,
            partition,
            state,
            previous,
            retry_attempt,
            error,
            truncated_records,
        )?;
        self.write_entries(mirror, &topic.name, vec![entry]).await?;
        tracing::info!(%mirror, topic = %topic.name, partition, from = %previous, to = %state, "mirror partition state");
        Ok(())
    }

    /// The entry that records `state` for a partition this broker still leads, at its
    /// leader epoch and the stored state epoch.
    #[allow(clippy::too_many_arguments)]
    fn state_entry(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        state: MirrorPartitionState,
        previous: MirrorPartitionState,
        retry_attempt: i16,
        error: Option<String>,
        truncated_records: i64,
    ) -> Result<MirrorStateEntry, StepError> {
        let stored = self.states.entry(mirror, topic.id, partition);
        let leader_epoch = self.led_at(image, &topic.name, partition)?;
        if stored.leader_epoch > leader_epoch {
            return Err(lost_leadership(&topic.name, partition));
        }
        Ok(MirrorStateEntry {
            partition,
            last_mirrored_epoch: -1,
            state: state.code(),
            error_code: 0,
            previous_state: previous.code(),
            retry_attempt,
            error_message: error,
            leader_epoch,
            state_epoch: stored.state_epoch,
            truncated_records: if truncated_records >= 0 {
                truncated_records
            } else {
                stored.truncated_records
            },
            last_mirrored_offset: -1,
        })
    }

    /// The entry that records a partition's LME (and the offset that goes with it).
    fn lme_entry(
        &self,
        mirror: &str,
        topic: &TopicImage,
        partition: i32,
        (lme, offset): (i32, i64),
    ) -> MirrorStateEntry {
        let stored = self.states.entry(mirror, topic.id, partition);
        MirrorStateEntry {
            partition,
            last_mirrored_epoch: lme,
            last_mirrored_offset: offset,
            state: MirrorPartitionState::Unknown.code(),
            leader_epoch: stored.leader_epoch,
            state_epoch: stored.state_epoch,
            ..MirrorStateEntry::default()
        }
    }

    async fn write_entries(
        &self,
        mirror: &str,
        topic: &str,
        entries: Vec<MirrorStateEntry>,
    ) -> Result<(), StepError> {
        let writes = entries.into_iter().map(|e| (topic, e)).collect();
        self.write_many(mirror, writes)
            .await
            .into_iter()
            .collect::<Result<Vec<()>, StepError>>()
            .map(|_| ())
    }

    /// One WriteMirrorStates for entries of `mirror`'s partitions, each with its topic;
    /// each entry's outcome, in order.
    async fn write_many(
        &self,
        mirror: &str,
        writes: Vec<(&str, MirrorStateEntry)>,
    ) -> Vec<Result<(), StepError>> {
        if writes.is_empty() {
            return Vec::new();
        }
        // Consecutive entries of one topic share its request topic; the response
        // answers each request topic and partition in place.
        let mut topics: Vec<MirrorStatesTopic> = Vec::new();
        for (topic, entry) in writes {
            match topics.last_mut() {
                Some(t) if t.name == topic => t.partitions.push(entry),
                _ => topics.push(MirrorStatesTopic {
                    name: topic.to_string(),
                    partitions: vec![entry],
                }),
            }
        }
        let request = WriteMirrorStatesRequest {
            mirror_name: mirror.to_string(),
            topics,
            stopped_topics: Vec::new(),
        };
        let response = self.states.write(&request).await;
        let mut outcomes = Vec::new();
        for (asked, answered) in request.topics.iter().zip(&response.topics) {
            for (entry, p) in asked.partitions.iter().zip(&answered.partitions) {
                outcomes.push(if p.error_code == 0 {
                    Ok(())
                } else {
                    Err(format!(
                        "writing __mirror_state for {}-{}: error {} {}",
                        asked.name,
                        entry.partition,
                        p.error_code,
                        p.error_message.as_deref().unwrap_or_default()
                    )
                    .into())
                });
            }
        }
        let asked: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
        outcomes.resize_with(asked, || {
            Err("no answer for a mirror state write".to_string().into())
        });
        outcomes
    }

    /// FAILED for a step that failed; `cut` is what the partition's fetcher had cut
    /// where the source diverged and not yet recorded (0 for a step's own failure):
    /// FAILED adds it to the stored count, which outlives the fetcher.
    #[allow(clippy::too_many_arguments)]
    async fn fail(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        entry: &MirrorStateEntry,
        during: MirrorPartitionState,
        error: StepError,
        cut: i64,
    ) {
        let tp = TopicPartition::new(topic.name.as_str(), partition);
        if self.led_at(image, &topic.name, partition).is_err() {
            tracing::debug!(%mirror, %tp, reason = %error.message, "mirror step failed after leadership moved: the new leader drives the partition");
            return;
        }
        if error.not_ours {
            // The controller publishes a new topic before its shards have opened the
            // logs, or leadership moved: not a failure, the next tick looks again.
            tracing::debug!(%mirror, %tp, reason = %error.message, "mirror step left to the next tick");
            return;
        }
        let attempt = transitions::next_attempt(entry, error.retryable);
        // A STOPPING that cannot finish is retried too (with backoff), whatever the
        // failure: its steps are local.
        let backoff_attempt = if during == MirrorPartitionState::Stopping {
            entry.retry_attempt.max(0).saturating_add(1)
        } else {
            attempt
        };
        let backoff =
            transitions::retry_backoff(&self.config, backoff_attempt, transitions::jitter());
        tracing::warn!(%mirror, %tp, during = %during, attempt, error = %error.message, retry_in_ms = backoff.as_millis() as u64, "mirror partition FAILED");
        let previous = if during == MirrorPartitionState::Failed {
            MirrorPartitionState::from_code(entry.previous_state)
                .unwrap_or(MirrorPartitionState::Unknown)
        } else {
            during
        };
        if let Err(e) = self
            .write_state(
                image,
                topic,
                mirror,
                partition,
                MirrorPartitionState::Failed,
                previous,
                attempt,
                Some(error.message.clone()),
                if cut > 0 {
                    entry.truncated_records.max(0) + cut
                } else {
                    -1
                },
            )
            .await
        {
            tracing::error!(%mirror, %tp, error = %e.message, "could not persist FAILED");
        }
        let _ = self
            .set_shard_state(image, &tp, MirrorPartitionState::Failed)
            .await;
        let state_epoch = self.states.entry(mirror, topic.id, partition).state_epoch;
        let key = (mirror.to_string(), tp);
        let mut parts = self.partitions.borrow_mut();
        let rt = parts.entry(key).or_default();
        rt.retry_at = Some((Instant::now() + backoff, state_epoch));
        rt.failed_with = image
            .mirrors
            .get(mirror)
            .map(|m| MirrorFetchConfig::from_image(m));
    }

    /// Sends `request` to the shard that owns `tp`.
    async fn on_shard(
        &self,
        image: &MetadataImage,
        tp: &TopicPartition,
        request: ShardRequest,
    ) -> Result<ShardReply, StepError> {
        let shard = image.partition(tp).map(|p| p.shard).ok_or_else(|| {
            StepError::from(format!("partition {tp} is not in the metadata image"))
        })?;
        self.router
            .request(shard, request)
            .await
            .map_err(step_error)
    }

    /// Sends each of `parts` the request `ask` makes for it: one [`ShardRequest::Batch`]
    /// per owning shard, the shards concurrently. Each partition's answer, in order.
    async fn on_shards<'a>(
        &self,
        image: &MetadataImage,
        parts: &[&'a Part],
        ask: impl Fn(&Part) -> ShardRequest,
    ) -> Vec<(&'a Part, Result<ShardReply, StepError>)> {
        let mut by_shard: BTreeMap<usize, (Vec<usize>, Vec<ShardRequest>)> = BTreeMap::new();
        let mut answers: Vec<Option<Result<ShardReply, StepError>>> = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let tp = TopicPartition::new(part.0.name.as_str(), part.1);
            answers.push(None);
            match image.partition(&tp) {
                Some(p) => {
                    let (places, requests) = by_shard.entry(p.shard).or_default();
                    places.push(i);
                    requests.push(ask(part));
                }
                None => {
                    let e = format!("partition {tp} is not in the metadata image");
                    answers[i] = Some(Err(e.into()));
                }
            }
        }
        let sends = by_shard
            .into_iter()
            .map(|(shard, (places, requests))| async move {
                let n = requests.len();
                let replies = match self
                    .router
                    .request(shard, ShardRequest::Batch(requests))
                    .await
                {
                    Ok(ShardReply::Batch(replies)) if replies.len() == n => {
                        replies.into_iter().map(|r| r.map_err(step_error)).collect()
                    }
                    Ok(other) => (0..n).map(|_| Err(unexpected(&other))).collect(),
                    Err(e) => (0..n).map(|_| Err(step_error(e.clone()))).collect(),
                };
                (places, replies)
            });
        for (places, replies) in futures::future::join_all(sends).await {
            let replies: Vec<Result<ShardReply, StepError>> = replies;
            for (i, reply) in places.into_iter().zip(replies) {
                answers[i] = Some(reply);
            }
        }
        parts
            .iter()
            .zip(answers)
            .map(|(part, a)| {
                (
                    *part,
                    a.unwrap_or_else(|| Err("no shard answer".to_string().into())),
                )
            })
            .collect()
    }

    /// Tells the owning shard the partition's state (its read-only gate); any state but
    /// MIRRORING also removes the partition from its fetcher.
    async fn set_shard_state(
        &self,
        image: &MetadataImage,
        tp: &TopicPartition,
        state: MirrorPartitionState,
    ) -> Result<(), StepError> {
        let request = ShardRequest::SetMirrorState {
            tp: tp.clone(),
            state,
        };
        self.on_shard(image, tp, request).await.map(|_| ())
    }

    /// Persists `to` (reached from `from`) and then gives the shard the new state.
    async fn settle(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        from: MirrorPartitionState,
        to: MirrorPartitionState,
    ) -> Result<(), StepError> {
        self.write_state(image, topic, mirror, partition, to, from, 0, None, -1)
            .await?;
        let tp = TopicPartition::new(topic.name.as_str(), partition);
        self.set_shard_state(image, &tp, to).await
    }

    /// PREPARING for a group of partitions of one mirror: persist PREPARING, one LME
    /// look-up on the source, truncate each, then MIRRORING.
    async fn prepare(
        self: &Rc<Self>,
        image: &Arc<MetadataImage>,
        mirror: &str,
        parts: &[Part],
        claim: u64,
    ) {
        // Each partition's steps wait for replicated `__mirror_state` writes and for its
        // followers; the group's partitions take them side by side, not one after another.
        let begun = futures::stream::iter(parts.iter().map(|(topic, p, entry)| async move {
            let current = MirrorPartitionState::from_code(entry.state)
                .unwrap_or(MirrorPartitionState::Unknown);
            let tp = TopicPartition::new(topic.name.as_str(), *p);
            let step = async {
                self.set_shard_state(image, &tp, MirrorPartitionState::Preparing)
                    .await?;
                if current != MirrorPartitionState::Preparing {
                    let previous = if current == MirrorPartitionState::Failed {
                        MirrorPartitionState::from_code(entry.previous_state).unwrap_or(current)
                    } else {
                        current
                    };
                    let retry = if current == MirrorPartitionState::Failed {
                        entry.retry_attempt
                    } else {
                        0
                    };
                    self.write_state(
                        image,
                        topic,
                        mirror,
                        *p,
                        MirrorPartitionState::Preparing,
                        previous,
                        retry,
                        None,
                        -1,
                    )
                    .await?;
                }
                Ok::<(), StepError>(())
            };
            match step.await {
                Ok(()) => Some((Arc::clone(topic), *p)),
                Err(e) => {
                    let entry = self.states.entry(mirror, topic.id, *p);
                    self.fail(
                        image,
                        topic,
                        mirror,
                        *p,
                        &entry,
                        MirrorPartitionState::Preparing,
                        e,
                        0,
                    )
                    .await;
                    None
                }
            }
        }))
        .buffered(PREPARE_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
        let started: Vec<(Arc<TopicImage>, i32)> = begun.into_iter().flatten().collect();
        // Partitions that could not start (a log not open yet, a failed write) are free
        // for the next tick at once, not only when this group's look-up is over.
        for (topic, p, _) in parts {
            if !started.iter().any(|(t, q)| t.name == topic.name && q == p) {
                let key = (
                    mirror.to_string(),
                    TopicPartition::new(topic.name.as_str(), *p),
                );
                self.release(&key, claim);
            }
        }
        if started.is_empty() {
            return;
        }
        // The look-up can take the connect and request timeouts when the source is
        // unreachable; a failover asked for meanwhile must not wait for it (audit B-17).
        let lookup = Box::pin(self.lookup_lmes(image, mirror, &started));
        let abandon = Box::pin(self.desired_no_longer_mirroring(mirror, &started));
        let looked = match futures::future::select(lookup, abandon).await {
            futures::future::Either::Left((looked, _)) => looked,
            futures::future::Either::Right(((), _)) => {
                tracing::info!(%mirror, partitions = started.len(), "desired state changed during PREPARING's LME look-up: the attempt is abandoned");
                self.poke();
                return;
            }
        };
        let (lmes, looped) = match looked {
            Ok(l) => l,
            Err(e) => {
                for (topic, p) in &started {
                    let entry = self.states.entry(mirror, topic.id, *p);
                    self.fail(
                        image,
                        topic,
                        mirror,
                        *p,
                        &entry,
                        MirrorPartitionState::Preparing,
                        e.clone(),
                        0,
                    )
                    .await;
                }
                return;
            }
        };
        let (lmes, looped) = (&lmes, &looped);
        let each = started.into_iter().map(|(topic, p)| async move {
            if let Some(message) = looped.get(&topic.name) {
                let entry = self.states.entry(mirror, topic.id, p);
                let error = StepError {
                    message: message.clone(),
                    retryable: true,
                    not_ours: false,
                };
                self.fail(
                    image,
                    &topic,
                    mirror,
                    p,
                    &entry,
                    MirrorPartitionState::Preparing,
                    error,
                    0,
                )
                .await;
                return;
            }
            let lme = lmes.get(&(topic.id, p)).copied().unwrap_or((-1, -1));
            let tp = TopicPartition::new(topic.name.as_str(), p);
            // A retry keeps its counter until the fetcher is healthy (ClearRetry).
            let retry = self.states.entry(mirror, topic.id, p).retry_attempt.max(0);
            let result = async {
                let request = ShardRequest::PrepareMirrorPartition {
                    tp: tp.clone(),
                    lme,
                };
                let (cut, convergence) = match self.on_shard(image, &tp, request).await? {
                    ShardReply::Truncated(n, c) => (n, c),
                    other => return Err(unexpected(&other)),
                };
                // The count is the mirror's for the partition, over every PREPARING
                // (a retry's finds nothing left to cut) and recorded before the
                // replicas converge, which can fail.
                let stored = self.states.entry(mirror, topic.id, p);
                let truncated = stored.truncated_records.max(0) + cut;
                if cut > 0 {
                    let previous = MirrorPartitionState::from_code(stored.previous_state)
                        .unwrap_or(MirrorPartitionState::Unknown);
                    self.write_state(
                        image,
                        &topic,
                        mirror,
                        p,
                        MirrorPartitionState::Preparing,
                        previous,
                        retry,
                        None,
                        truncated,
                    )
                    .await?;
                }
                let request = ShardRequest::AwaitMirrorConvergence {
                    tp: tp.clone(),
                    convergence,
                };
                self.on_shard(image, &tp, request).await?;
                self.write_state(
                    image,
                    &topic,
                    mirror,
                    p,
                    MirrorPartitionState::Mirroring,
                    MirrorPartitionState::Preparing,
                    retry,
                    None,
                    truncated,
                )
                .await?;
                self.start_fetching(image, mirror, &tp).await
            }
            .await;
            if let Err(e) = result {
                let entry = self.states.entry(mirror, topic.id, p);
                self.fail(
                    image,
                    &topic,
                    mirror,
                    p,
                    &entry,
                    MirrorPartitionState::Preparing,
                    e,
                    0,
                )
                .await;
            }
        });
        futures::stream::iter(each)
            .buffer_unordered(PREPARE_CONCURRENCY)
            .for_each(|()| async {})
            .await;
        self.poke();
    }

    /// Completes once any of `parts` is no longer desired MIRRORING in `mirror` (paused,
    /// removed, its topic or the mirror gone).
    async fn desired_no_longer_mirroring(&self, mirror: &str, parts: &[(Arc<TopicImage>, i32)]) {
        loop {
            let changed = self.metadata.listen();
            let image = self.metadata.load();
            let still = image.mirrors.contains_key(mirror)
                && parts.iter().all(|(topic, _)| {
                    image.topic(&topic.name).and_then(|t| t.mirror())
                        == Some((mirror, DesiredMirrorState::Mirroring))
                });
            if !still {
                return;
            }
            changed.await;
        }
    }

    /// The LMEs the source recorded for these partitions when a mirror from us was
    /// stopped there (failback), -1 where none. A source that does not know
    /// DescribeMirrors answers -1 for all (`DECISIONS.md`).
    async fn lookup_lmes(
        &self,
        image: &MetadataImage,
        mirror: &str,
        parts: &[(Arc<TopicImage>, i32)],
    ) -> Result<
        (
            HashMap<(uuid::Uuid, i32), (i32, i64)>,
            HashMap<String, String>,
        ),
        StepError,
    > {
        let Some(m) = image.mirrors.get(mirror) else {
            return Err(format!("mirror {mirror} no longer exists").into());
        };
        let fetch = MirrorFetchConfig::from_image(m);
        let conn_config = fetch
            .connection(
                &fetch.client_id,
                Duration::from_millis(fetch.request_timeout_ms),
            )
            .map_err(|message| StepError {
                message,
                retryable: false,
                not_ours: false,
            })?;
        let mut cluster =
            SourceCluster::new(&fetch.bootstrap_servers, conn_config).map_err(|e| StepError {
                message: e.to_string(),
                retryable: false,
                not_ours: false,
            })?;
        fail_point("mirror.lme_lookup").await;
        let conn = cluster
            .any_connection()
            .await
            .map_err(|e| StepError::from(format!("LME look-up: cannot reach the source: {e}")))?;
        let mut out = HashMap::new();
        // Loop check (reference §4.5): the source must not be mirroring these topics
        // from us right now, or each side would copy the other (and PREPARING would
        // truncate this cluster's own data to the source's view).
        let mut looped: HashMap<String, String> = HashMap::new();
        if conn.api_range(keys::LIST_MIRRORS).is_some() {
            let request = dataplane::wire::mirror::ListMirrorsRequest {
                include_topic_names: true,
            };
            let list = conn
                .send(&request, 0)
                .await
                .map_err(|e| StepError::from(format!("loop check on the source: {e}")))?;
            {
                for source_mirror in list
                    .mirrors
                    .iter()
                    .filter(|sm| sm.source_cluster_id == image.cluster_id)
                {
                    for (topic, _) in parts {
                        if source_mirror.topic_names.contains(&topic.name) {
                            looped.insert(
                                topic.name.clone(),
                                format!(
                                    "Detected mirror loop: the source cluster is mirroring {} from this cluster (its mirror {}); remove the topic there first",
                                    topic.name, source_mirror.mirror_name
                                ),
                            );
                        }
                    }
                }
            }
        }
        if conn.api_range(keys::DESCRIBE_MIRRORS).is_none() {
            tracing::info!(%mirror, "the source does not support DescribeMirrors: LME -1 (mirroring from scratch where the local log has data)");
            return Ok((out, looped));
        }
        let mut lookups: BTreeMap<uuid::Uuid, Vec<i32>> = BTreeMap::new();
        for (topic, p) in parts {
            lookups.entry(topic.id).or_default().push(*p);
        }
        let request = DescribeMirrorsRequest {
            mirror_names: Some(Vec::new()),
            include_authorized_operations: false,
            cluster_id: Some(image.cluster_id.clone()),
            lme_lookups: lookups
                .into_iter()
                .map(|(topic_id, partitions)| LmeLookup {
                    topic_id,
                    partitions,
                })
                .collect(),
        };
        // Each source broker answers for the keys it coordinates: ask them all and keep
        // the highest LME per partition (reference §2.8).
        let brokers: Vec<i32> = match cluster.metadata(Some(&[])).await {
            Ok(m) => m.brokers.keys().copied().collect(),
            Err(e) => {
                return Err(format!("LME look-up: source metadata: {e}").into());
            }
        };
        for broker in brokers {
            let conn = cluster.connection(broker).await.map_err(|e| {
                StepError::from(format!(
                    "LME look-up: cannot reach source broker {broker}: {e}"
                ))
            })?;
            let d = conn.send(&request, 0).await.map_err(|e| {
                StepError::from(format!("LME look-up on source broker {broker}: {e}"))
            })?;
            if d.error_code != 0 {
                return Err(format!(
                    "LME look-up on source broker {broker}: error {} {}",
                    d.error_code,
                    d.error_message.unwrap_or_default()
                )
                .into());
            }
            for r in d.lookup_results {
                for p in r.partitions {
                    let lme = (p.last_mirrored_epoch, p.last_mirrored_offset);
                    let slot = out.entry((r.topic_id, p.partition)).or_insert(lme);
                    *slot = (*slot).max(lme);
                }
            }
        }
        tracing::info!(%mirror, lookups = out.len(), "LME look-up on the source answered");
        Ok((out, looped))
    }

    async fn start_fetching(
        &self,
        image: &MetadataImage,
        mirror: &str,
        tp: &TopicPartition,
    ) -> Result<(), StepError> {
        let config = image
            .mirrors
            .get(mirror)
            .map(|m| MirrorFetchConfig::from_image(m))
            .ok_or_else(|| StepError::from(format!("mirror {mirror} no longer exists")))?;
        let request = ShardRequest::StartMirrorFetch {
            tp: tp.clone(),
            config,
        };
        self.on_shard(image, tp, request).await?;
        let key = (mirror.to_string(), tp.clone());
        self.partitions
            .borrow_mut()
            .entry(key)
            .or_default()
            .retry_at = None;
        Ok(())
    }

    /// MIRRORING from PAUSED (resume), from FAILED (retry) or after a restart.
    async fn resume(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        entry: &MirrorStateEntry,
    ) -> Result<(), StepError> {
        self.enter(
            image,
            topic,
            mirror,
            partition,
            entry,
            MirrorPartitionState::Mirroring,
        )
        .await?;
        self.start_fetching(
            image,
            mirror,
            &TopicPartition::new(topic.name.as_str(), partition),
        )
        .await
    }

    /// A retried partition fetches again: MIRRORING with the retry counter back at 0.
    async fn clear_retry(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        entry: &MirrorStateEntry,
    ) -> Result<(), StepError> {
        let previous = MirrorPartitionState::from_code(entry.previous_state)
            .unwrap_or(MirrorPartitionState::Unknown);
        self.write_state(
            image,
            topic,
            mirror,
            partition,
            MirrorPartitionState::Mirroring,
            previous,
            0,
            None,
            -1,
        )
        .await?;
        tracing::info!(%mirror, topic = %topic.name, partition, attempts = entry.retry_attempt, "mirror partition fetches again after retries");
        Ok(())
    }

    /// Persists `target` unless the partition is already in it (re-entering a state after
    /// a restart re-runs its action without a new record). A FAILED partition's retry
    /// attempt is carried into the state it retries.
    async fn enter(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        entry: &MirrorStateEntry,
        target: MirrorPartitionState,
    ) -> Result<(), StepError> {
        let current =
            MirrorPartitionState::from_code(entry.state).unwrap_or(MirrorPartitionState::Unknown);
        if current == target {
            return Ok(());
        }
        let retry = if current == MirrorPartitionState::Failed {
            entry.retry_attempt
        } else {
            0
        };
        self.write_state(
            image, topic, mirror, partition, target, current, retry, None, -1,
        )
        .await
    }

    async fn pause(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        mirror: &str,
        partition: i32,
        entry: &MirrorStateEntry,
    ) -> Result<(), StepError> {
        let tp = TopicPartition::new(topic.name.as_str(), partition);
        self.enter(
            image,
            topic,
            mirror,
            partition,
            entry,
            MirrorPartitionState::Pausing,
        )
        .await?;
        self.set_shard_state(image, &tp, MirrorPartitionState::Pausing)
            .await?;
        self.settle(
            image,
            topic,
            mirror,
            partition,
            MirrorPartitionState::Pausing,
            MirrorPartitionState::Paused,
        )
        .await
    }

    /// STOPPING for a group of partitions of one mirror: the six steps of `DECISIONS.md`
    /// (each idempotent), then STOPPED, taken by the whole group at once — one state
    /// write per step, one request per shard per step, one BumpLeaderEpochs — so that a
    /// failover of n partitions costs a few round trips, not a few per partition. A
    /// partition whose step fails leaves the group FAILED and is retried with backoff.
    async fn stop_all(&self, image: &MetadataImage, mirror: &str, parts: &[Part], claim: u64) {
        let source_cluster_id = image
            .mirrors
            .get(mirror)
            .map(|m| m.source_cluster_id().to_string())
            .unwrap_or_default();
        let group = Group {
            image,
            mirror,
            claim,
        };
        let tp_of = |(topic, p, _): &Part| TopicPartition::new(topic.name.as_str(), *p);
        // How long each step took, for the summary line.
        let mut took = StepClock::default();
        // STOPPING recorded (a restart may find it recorded already).
        let entries = parts.iter().map(|(topic, p, entry)| {
            let current = MirrorPartitionState::from_code(entry.state)
                .unwrap_or(MirrorPartitionState::Unknown);
            if current == MirrorPartitionState::Stopping {
                return Ok(None);
            }
            let retry = if current == MirrorPartitionState::Failed {
                entry.retry_attempt
            } else {
                0
            };
            let stopping = MirrorPartitionState::Stopping;
            self.state_entry(image, topic, mirror, *p, stopping, current, retry, None, -1)
                .map(Some)
        });
        let live: Vec<&Part> = parts.iter().collect();
        let written = self.record(mirror, &live, entries.collect()).await;
        let live = parts_only(self.keep(&group, live.into_iter().zip(written)).await);
        took.mark("record");
        fail_point("stopping.after_record").await;
        // 1. Remove the fetchers (the partitions stay read-only meanwhile).
        let asked = self
            .on_shards(image, &live, |part| ShardRequest::SetMirrorState {
                tp: tp_of(part),
                state: MirrorPartitionState::Stopping,
            })
            .await;
        let live = parts_only(self.keep(&group, asked).await);
        took.mark("fetchers");
        fail_point("stopping.after_fetcher_removed").await;
        // 2. Raise each leader epoch above every batch epoch in its log.
        let asked = self
            .on_shards(image, &live, |part| ShardRequest::StopEpochToExceed {
                tp: tp_of(part),
                source_cluster_id: source_cluster_id.clone(),
            })
            .await
            .into_iter()
            .map(|(part, reply)| match reply {
                Ok(ShardReply::EpochToExceed(e)) => (part, Ok(e)),
                Ok(other) => (part, Err(unexpected(&other))),
                Err(e) => (part, Err(e)),
            });
        let exceed = self.keep(&group, asked).await;
        let now = self.metadata.load();
        let bumps: Vec<(TopicPartition, i32)> = exceed
            .iter()
            .filter_map(|(part, epoch)| {
                let tp = tp_of(part);
                let current = now.partition(&tp).map_or(-1, |p| p.leader_epoch);
                epoch.filter(|e| current <= *e).map(|e| (tp, e))
            })
            .collect();
        let mut raised: HashMap<TopicPartition, StepError> = self.raise_epochs(&bumps).await;
        let live: Vec<&Part> = exceed.into_iter().map(|(part, _)| part).collect();
        let bumped = live
            .iter()
            .map(|part| (*part, raised.remove(&tp_of(part)).map_or(Ok(()), Err)));
        let live = parts_only(self.keep(&group, bumped).await);
        took.mark("epochs");
        fail_point("stopping.after_epoch_bump").await;
        // 3. Truncate to the LSO; 4. persist the LMEs.
        let asked = self
            .on_shards(image, &live, |part| ShardRequest::StopTruncate {
                tp: tp_of(part),
                source_cluster_id: source_cluster_id.clone(),
            })
            .await
            .into_iter()
            .map(|(part, reply)| match reply {
                Ok(ShardReply::Lme(lme)) => (part, Ok(lme)),
                Ok(other) => (part, Err(unexpected(&other))),
                Err(e) => (part, Err(e)),
            });
        let truncated = self.keep(&group, asked).await;
        took.mark("truncate");
        fail_point("stopping.after_truncate").await;
        let live: Vec<&Part> = truncated.iter().map(|(part, _)| *part).collect();
        let entries = truncated
            .iter()
            .map(|((topic, p, _), lme)| {
                let lme = lme.filter(|(epoch, _)| *epoch >= 0);
                Ok(lme.map(|lme| self.lme_entry(mirror, topic, *p, lme)))
            })
            .collect();
        let written = self.record(mirror, &live, entries).await;
        let live = parts_only(self.keep(&group, live.into_iter().zip(written)).await);
        took.mark("lme");
        fail_point("stopping.after_lme").await;
        // 5. The MIRROR_PID_RESET control batches, replicated to the ISR, and durable
        // before STOPPED: a large group syncs the filesystem once instead of each log.
        let sync_each = live.len() < SYNCFS_PARTITIONS_MIN;
        let asked = self
            .on_shards(image, &live, |part| ShardRequest::StopAppendPidReset {
                tp: tp_of(part),
                source_cluster_id: source_cluster_id.clone(),
                sync_log: sync_each,
            })
            .await;
        let mut live = parts_only(self.keep(&group, asked).await);
        if !sync_each && !live.is_empty() {
            let shard = image.partition(&tp_of(live[0])).map_or(0, |p| p.shard);
            let synced = match self
                .router
                .request(shard, ShardRequest::SyncFilesystem)
                .await
            {
                Ok(ShardReply::Done) => Ok(()),
                Ok(other) => Err(unexpected(&other)),
                Err(e) => Err(step_error(e)),
            };
            if let Err(e) = synced {
                let failed = live
                    .iter()
                    .map(|part| (*part, Err::<(), StepError>(e.clone())));
                live = parts_only(self.keep(&group, failed).await);
            }
        }
        took.mark("pid_reset");
        fail_point("stopping.after_pid_reset").await;
        // 6. STOPPED: writable.
        let (stopping, stopped) = (
            MirrorPartitionState::Stopping,
            MirrorPartitionState::Stopped,
        );
        let entries = live
            .iter()
            .map(|(topic, p, _)| {
                self.state_entry(image, topic, mirror, *p, stopped, stopping, 0, None, -1)
                    .map(Some)
            })
            .collect();
        let written = self.record(mirror, &live, entries).await;
        let live = parts_only(self.keep(&group, live.into_iter().zip(written)).await);
        let asked = self
            .on_shards(image, &live, |part| ShardRequest::SetMirrorState {
                tp: tp_of(part),
                state: stopped,
            })
            .await;
        let done = parts_only(self.keep(&group, asked).await);
        for (topic, p, _) in &done {
            tracing::debug!(%mirror, topic = %topic.name, partition = p, "mirror partition STOPPED: writable");
        }
        took.mark("stopped");
        tracing::info!(%mirror, partitions = done.len(), of = parts.len(), steps = %took, "mirror partitions STOPPED: writable");
    }

    /// The partitions of a group whose step succeeded, with what it answered; the others
    /// go FAILED (during STOPPING) and are free for the next tick at once.
    async fn keep<'a, T>(
        &self,
        group: &Group<'_>,
        steps: impl IntoIterator<Item = (&'a Part, Result<T, StepError>)>,
    ) -> Vec<(&'a Part, T)> {
        let mut kept = Vec::new();
        for (part, result) in steps {
            match result {
                Ok(t) => kept.push((part, t)),
                Err(e) => {
                    let (topic, p, _) = part;
                    let entry = self.states.entry(group.mirror, topic.id, *p);
                    let during = MirrorPartitionState::Stopping;
                    self.fail(group.image, topic, group.mirror, *p, &entry, during, e, 0)
                        .await;
                    let tp = TopicPartition::new(topic.name.as_str(), *p);
                    self.release(&(group.mirror.to_string(), tp), group.claim);
                }
            }
        }
        kept
    }

    /// Writes the entries of a group's partitions (`None`: nothing to write for that
    /// one) in one WriteMirrorStates; each partition's outcome, in `live`'s order.
    async fn record(
        &self,
        mirror: &str,
        live: &[&Part],
        entries: Vec<Result<Option<MirrorStateEntry>, StepError>>,
    ) -> Vec<Result<(), StepError>> {
        let writes: Vec<(&str, MirrorStateEntry)> = live
            .iter()
            .zip(&entries)
            .filter_map(|((topic, _, _), e)| match e {
                Ok(Some(e)) => Some((topic.name.as_str(), e.clone())),
                _ => None,
            })
            .collect();
        let mut outcomes = self.write_many(mirror, writes).await.into_iter();
        entries
            .into_iter()
            .map(|e| match e {
                Ok(Some(_)) => outcomes.next().unwrap_or_else(|| {
                    Err("no answer for a mirror state write".to_string().into())
                }),
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// One BumpLeaderEpochs for every `(partition, epoch to exceed)`, then the wait until
    /// the image shows each leader epoch above it (and so its owning shard, which takes
    /// leadership changes before the image is published). The partitions that failed,
    /// with why.
    async fn raise_epochs(
        &self,
        bumps: &[(TopicPartition, i32)],
    ) -> HashMap<TopicPartition, StepError> {
        let mut failed = HashMap::new();
        if bumps.is_empty() {
            return failed;
        }
        let answer = self
            .controller
            .submit(AdminRequest::BumpLeaderEpochs {
                partitions: bumps.to_vec(),
            })
            .await;
        let results = match &answer {
            Ok(AdminResponse::Results(r)) if r.len() == bumps.len() => Some(r),
            _ => None,
        };
        let mut waiting: Vec<&(TopicPartition, i32)> = Vec::new();
        for (i, bump) in bumps.iter().enumerate() {
            let tp = &bump.0;
            match results.map(|r| &r[i]) {
                Some(r) if r.error_code == 0 => waiting.push(bump),
                Some(r) => {
                    let e = format!("bumping the leader epoch of {tp}: {r:?}");
                    failed.insert(tp.clone(), e.into());
                }
                None => {
                    let e = format!("bumping the leader epoch of {tp}: {answer:?}");
                    failed.insert(tp.clone(), e.into());
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !waiting.is_empty() {
            let changed = self.metadata.listen();
            let image = self.metadata.load();
            waiting.retain(|(tp, epoch)| match image.partition(tp) {
                Some(p) if p.leader != image.node_id => {
                    failed.insert(tp.clone(), lost_leadership(&tp.topic, tp.partition));
                    false
                }
                Some(p) => p.leader_epoch <= *epoch,
                None => true,
            });
            let left = deadline.saturating_duration_since(Instant::now());
            if waiting.is_empty() {
                break;
            }
            if left.is_zero() {
                for (tp, epoch) in waiting.drain(..) {
                    let e = format!("{tp}: the leader epoch bump above {epoch} did not arrive");
                    failed.insert(tp.clone(), e.into());
                }
                break;
            }
            let _ = futures::future::select(
                changed,
                Box::pin(glommio::timer::sleep(left.min(Duration::from_millis(100)))),
            )
            .await;
        }
        failed
    }

    /// DescribeMirrors: per-partition state and lag of our mirrors, and the LME look-ups
    /// of a cluster that mirrors from us. As in Kafka (reference §2.8), a broker reports
    /// the partitions it leads and the LMEs of the keys it coordinates (-1 for the
    /// others); a client asks every broker and merges (the maximum LME per partition).
    pub async fn describe(&self, request: &DescribeMirrorsRequest) -> DescribeMirrorsResponse {
        let image = self.metadata.load();
        let mut response = DescribeMirrorsResponse::default();
        if let (Some(asker), false) = (&request.cluster_id, request.lme_lookups.is_empty()) {
            let mirrors: Vec<&String> = image
                .mirrors
                .values()
                .filter(|m| m.source_cluster_id() == asker.as_str())
                .map(|m| &m.name)
                .collect();
            let mine = |m: &str, id: uuid::Uuid, p: i32| self.states.coordinates(m, id, p);
            // Answer from the stored state only: -1 from a table not loaded yet would make
            // the asker truncate its whole log (audit B-7). It retries on this error.
            for m in &mirrors {
                for l in &request.lme_lookups {
                    for p in l.partitions.iter().filter(|p| mine(m, l.topic_id, **p)) {
                        if let Err(e) = self
                            .coordinator()
                            .ensure_loaded_for(m, l.topic_id, *p)
                            .await
                        {
                            response.error_code =
                                kafka_protocol::ResponseError::CoordinatorLoadInProgress.code();
                            response.error_message = Some(format!(
                                "the last mirrored epochs of mirror {m} are not loaded yet: {e}"
                            ));
                            return response;
                        }
                    }
                }
            }
            // Failback from us needs our side stopped first (reference §2.8, §4.5;
            // audit B-8): until STOPPING has truncated to the LSO and recorded the LME,
            // the asker would get no LME, or copy a tail we are about to cut.
            for m in &mirrors {
                for l in &request.lme_lookups {
                    for p in l.partitions.iter().filter(|p| mine(m, l.topic_id, **p)) {
                        let entry = self.coordinator().entry(m, l.topic_id, *p);
                        let state = MirrorPartitionState::from_code(entry.state)
                            .unwrap_or(MirrorPartitionState::Unknown);
                        if !matches!(
                            state,
                            MirrorPartitionState::Stopped | MirrorPartitionState::Unknown
                        ) {
                            response.error_code = errors::MIRROR_TOPIC_BEING_STOPPED;
                            response.error_message = Some(format!(
                                "partition {p} of topic id {} is {} in mirror {m} on this cluster: fail back once it is STOPPED",
                                l.topic_id,
                                state.name()
                            ));
                            return response;
                        }
                    }
                }
            }
            for LmeLookup {
                topic_id,
                partitions,
            } in &request.lme_lookups
            {
                response.lookup_results.push(LmeResult {
                    topic_id: *topic_id,
                    partitions: partitions
                        .iter()
                        .map(|p| {
                            let (last_mirrored_epoch, last_mirrored_offset) = mirrors
                                .iter()
                                .filter(|m| mine(m, *topic_id, *p))
                                .map(|m| self.coordinator().lme_position(m, *topic_id, *p))
                                .max()
                                .unwrap_or((-1, -1));
                            LmePartition {
                                partition: *p,
                                last_mirrored_epoch,
                                last_mirrored_offset,
                            }
                        })
                        .collect(),
                });
            }
        }
        let names: Vec<String> = match &request.mirror_names {
            Some(n) if !n.is_empty() => n.clone(),
            _ if !request.lme_lookups.is_empty() => Vec::new(),
            _ => image.mirrors.keys().cloned().collect(),
        };
        for name in names {
            if !image.mirrors.contains_key(&name) {
                response.mirrors.push(DescribedMirror {
                    error_code: errors::UNKNOWN_CLUSTER_MIRROR,
                    mirror_name: name,
                    ..DescribedMirror::default()
                });
                continue;
            }
            let mut described = DescribedMirror {
                mirror_name: name.clone(),
                ..DescribedMirror::default()
            };
            for topic in image.topics.values() {
                if topic.mirror().map(|(m, _)| m) != Some(name.as_str()) {
                    continue;
                }
                let tps: Vec<TopicPartition> = topic
                    .partitions
                    .iter()
                    .filter(|p| p.leader == image.node_id)
                    .map(|p| TopicPartition::new(topic.name.as_str(), p.partition))
                    .collect();
                let progress = self.progress(&image, &tps).await;
                let mut t = DescribedMirrorTopic {
                    name: topic.name.clone(),
                    partitions: Vec::with_capacity(tps.len()),
                };
                for tp in &tps {
                    let entry = self.states.entry(&name, topic.id, tp.partition);
                    let state = MirrorPartitionState::from_code(entry.state)
                        .unwrap_or(MirrorPartitionState::Unknown);
                    let (local_end, source_hw, last_error, fetcher_cut, lag_ms) =
                        progress.get(tp).cloned().unwrap_or((-1, -1, None, 0, -1));
                    let source_hw = if matches!(state, MirrorPartitionState::Stopped) {
                        -1
                    } else {
                        source_hw
                    };
                    t.partitions.push(DescribedMirrorPartition {
                        partition: tp.partition,
                        source_offset: source_hw,
                        destination_offset: local_end,
                        lag: if source_hw >= 0 && local_end >= 0 {
                            (source_hw - local_end).max(0)
                        } else {
                            -1
                        },
                        state: state.name().to_string(),
                        retry_attempt: entry.retry_attempt,
                        error_message: entry.error_message.clone().or(last_error),
                        truncated_records: if entry.truncated_records < 0 && fetcher_cut == 0 {
                            -1
                        } else {
                            entry.truncated_records.max(0) + fetcher_cut
                        },
                        last_mirrored_epoch: entry.last_mirrored_epoch,
                        lag_ms: if source_hw >= 0 { lag_ms } else { -1 },
                    });
                }
                described.topics.push(t);
            }
            response.mirrors.push(described);
        }
        response
    }

    /// (local log end, source high watermark, fetcher's last error, records the fetcher
    /// truncated, lag in ms) per partition, asked of each owning shard once.
    async fn progress(
        &self,
        image: &MetadataImage,
        tps: &[TopicPartition],
    ) -> HashMap<TopicPartition, (i64, i64, Option<String>, i64, i64)> {
        self.observations(image, tps, true)
            .await
            .into_iter()
            .map(|(tp, o)| {
                let status = o.status;
                let hw = status.as_ref().map_or(-1, |s| s.source_high_watermark);
                let cut = status.as_ref().map_or(0, |s| s.truncated_records);
                let lag_ms = status.as_ref().map_or(-1, |s| s.lag_ms);
                let err = status.and_then(|s| s.last_error);
                (tp, (o.log_end_offset, hw, err, cut, lag_ms))
            })
            .collect()
    }
}
