//! The controller: applies admin requests one at a time. For each request it plans (see
//! [`crate::state`]), commits the records to the metadata quorum (a majority fsynced;
//! a node that does not lead forwards them behind a guard), applies them, publishes the
//! new [`MetadataImage`], runs the partition-log work on the owning shards, and only
//! then answers. On the active controller it also keeps the cluster: liveness and
//! fencing, elections, auto leader rebalance, and membership changes of a dynamic
//! quorum.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use dataplane::controller::{AdminRequest, AdminResponse, AdminResult};
use dataplane::log::LogConfig;
use dataplane::metadata::{MetadataCell, MetadataImage};
use dataplane::shard::{ShardRequest, ShardRouter};
use dataplane::types::TopicPartition;
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use kafka_protocol::ResponseError;

use crate::meta_properties::{load_or_create_cluster_id, MetaPropertiesError};
use crate::metadata_log::{MetadataLogError, MetadataRecord};
use crate::quorum::{JournalError, MetadataJournal};
use crate::state::{ControllerState, NodeSettings, PartitionAction, StateError};

/// How the controller is set up.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub data_dir: PathBuf,
    pub node_id: i32,
    /// The address clients are told to connect to.
    pub advertised: SocketAddr,
    /// Broker defaults each topic's log config starts from.
    pub default_log_config: LogConfig,
    /// `num.partitions`: partitions of a topic created with -1.
    pub num_partitions: i32,
    /// Admin requests waiting for the controller; more are refused at once.
    pub queue_max: usize,
    /// `mirror.state.topic.num.partitions`.
    pub mirror_state_partitions: i32,
    /// `controller.quorum.voters`: the quorum this node is a member of. `None`: this
    /// node alone, with no quorum configured.
    pub quorum: Option<QuorumMembership>,
    /// Replication and broker liveness settings.
    pub cluster: ClusterSettings,
}

/// This node's part in a quorum of controllers.
#[derive(Debug, Clone)]
pub struct QuorumMembership {
    /// How it reaches the others: the static voters, or the bootstrap controllers of a
    /// dynamic quorum, and where it listens if it is a controller.
    pub transport: crate::quorum::Transport,
    pub timing: crate::quorum::QuorumTiming,
}

/// The cluster side of the controller's config (Kafka's names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// `process.roles` has `broker`: this node registers and holds replicas (a
    /// controller-only node does neither).
    pub broker: bool,
    /// `broker.rack` of this node.
    pub rack: Option<String>,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `offsets.topic.replication.factor` (also used for the other internal topics).
    pub internal_replication_factor: i16,
    /// `broker.session.timeout.ms`: a broker not heard from for this long is fenced.
    pub session_timeout_ms: u64,
    /// How many brokers the cluster has (the voters; 1 alone): internal topics wait for
    /// that many, up to their replication factor.
    pub expected_brokers: usize,
    /// `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms.
    pub leader_imbalance_check_ms: u64,
    /// `leader.imbalance.per.broker.percentage`.
    pub leader_imbalance_percentage: u32,
    /// This broker's client listeners by name and what each advertises, registered so
    /// that every broker can tell a client where the others are on its listener.
    pub listeners: Vec<(String, SocketAddr)>,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            broker: true,
            rack: None,
            default_replication_factor: 1,
            internal_replication_factor: 3,
            session_timeout_ms: 9_000,
            expected_brokers: 1,
            auto_leader_rebalance: true,
            leader_imbalance_check_ms: 300_000,
            leader_imbalance_percentage: 10,
            listeners: Vec::new(),
        }
    }
}

impl ControllerConfig {
    pub const DEFAULT_QUEUE_MAX: usize = 1024;
}

/// How often a change is planned again when changes committed ahead of it.
const FORWARD_ATTEMPTS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    MetaProperties(#[from] MetaPropertiesError),
    #[error(transparent)]
    MetadataLog(#[from] MetadataLogError),
    #[error("metadata journal: {0}")]
    Journal(#[from] JournalError),
    /// The metadata log holds a record that does not fit the state before it.
    #[error("replaying the metadata log: {0}")]
    Replay(#[from] StateError),
    #[error("could not start the controller thread: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("the controller thread panicked")]
    Panicked,
}

/// Runs partition-log work on the shards that own the partitions. The production
/// implementation is [`ShardRouter`]; tests use a fake.
pub trait PartitionOps: Send + std::fmt::Debug {
    fn shard_count(&self) -> usize;
    /// Runs every action (concurrently where possible) and returns one result per action.
    fn execute(&self, actions: &[PartitionAction]) -> Vec<Result<(), String>>;
}

impl PartitionOps for ShardRouter {
    fn shard_count(&self) -> usize {
        ShardRouter::shard_count(self)
    }

    fn execute(&self, actions: &[PartitionAction]) -> Vec<Result<(), String>> {
        // The controller runs on its own thread, never on a shard, so blocking here is
        // fine; all calls are started before any is awaited.
        let calls: Vec<LocalBoxFuture<'_, Result<(), String>>> = actions
            .iter()
            .cloned()
            .map(|action| {
                let (shard, request) = match action {
                    PartitionAction::Open {
                        tp,
                        topic_id,
                        config,
                        leadership,
                        shard,
                        ..
                    } => (
                        shard,
                        ShardRequest::OpenPartition {
                            tp,
                            topic_id,
                            config,
                            leadership,
                        },
                    ),
                    PartitionAction::Delete { tp, shard, .. } => {
                        (shard, ShardRequest::DeletePartition { tp })
                    }
                    PartitionAction::UpdateConfig {
                        tp, config, shard, ..
                    } => (shard, ShardRequest::UpdateConfig { tp, config }),
                    PartitionAction::SetLeadership {
                        tp,
                        leadership,
                        shard,
                        ..
                    } => (shard, ShardRequest::SetLeadership { tp, leadership }),
                };
                async move {
                    self.request(shard, request)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                }
                .boxed_local()
            })
            .collect();
        futures::executor::block_on(futures::future::join_all(calls))
    }
}

/// A partition to open at startup on its owning shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionToOpen {
    pub tp: TopicPartition,
    pub topic_id: uuid::Uuid,
    pub config: LogConfig,
    pub shard: usize,
    pub leadership: dataplane::partition::Leadership,
}

/// Every partition of `image` with a replica on this node, with the topic's effective
/// log config, its shard and its leadership, so that each shard can open the partitions
/// it owns before serving clients.
pub fn topics_to_open(image: &MetadataImage) -> Vec<PartitionToOpen> {
    let node = image.node_id;
    image
        .topics
        .values()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .filter(move |p| p.replicas.contains(&node))
                .map(move |p| PartitionToOpen {
                    tp: TopicPartition::new(topic.name.clone(), p.partition),
                    topic_id: topic.id,
                    config: topic.log_config.clone(),
                    shard: p.shard,
                    leadership: p.leadership(),
                })
        })
        .collect()
}

/// The controller: state, metadata log, the published image and the shards.
pub struct Controller<P: PartitionOps> {
    state: ControllerState,
    journal: MetadataJournal,
    metadata: Arc<MetadataCell>,
    ops: P,
    new_topic_id: Box<dyn FnMut() -> uuid::Uuid + Send>,
    /// The active controller the last published image named.
    published_controller: Option<i32>,
    /// When this node last proposed its broker registration (quorum members).
    registered_at: Option<std::time::Instant>,
    /// This broker asked for a controlled shutdown: it does not register again.
    shutting_down: bool,
    /// Since when this node has led the quorum (fencing waits a session timeout after
    /// it starts leading: until then it has not heard every member).
    leading_since: Option<std::time::Instant>,
    /// `broker.session.timeout.ms`.
    session_timeout: std::time::Duration,
    /// Auto leader rebalance: the check interval (None: off), the allowed imbalance, and
    /// when it last ran.
    rebalance: Option<(std::time::Duration, f64)>,
    rebalanced_at: std::time::Instant,
    /// The applied-record count the last election pass saw.
    elections_at: Option<u64>,
    /// This node has the broker role ([`ClusterSettings::broker`]).
    broker: bool,
    /// Controllers whose committed endpoint the quorum was told to dial.
    dialled: std::collections::BTreeSet<i32>,
}

impl<P: PartitionOps> std::fmt::Debug for Controller<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("state", &self.state)
            .field("journal", &self.journal)
            .field("ops", &self.ops)
            .finish_non_exhaustive()
    }
}

impl<P: PartitionOps> Controller<P> {
    /// Reads (or creates) the cluster id, opens and replays the metadata log, moves
    /// partitions off shards that no longer exist, and publishes the image.
    pub fn open(
        config: &ControllerConfig,
        metadata: Arc<MetadataCell>,
        ops: P,
    ) -> Result<Self, ControllerError> {
        let cluster_id = load_or_create_cluster_id(&config.data_dir, config.node_id)?;
        let opened = MetadataJournal::open(&config.data_dir, config.node_id)?;
        Self::open_with(config, metadata, ops, cluster_id, opened)
    }

    /// [`Self::open`] as one member of a quorum of controllers. Only the quorum's
    /// leader commits; every member applies what is committed ([`Self::catch_up`]).
    pub fn open_in_quorum(
        config: &ControllerConfig,
        metadata: Arc<MetadataCell>,
        ops: P,
        membership: &QuorumMembership,
    ) -> Result<Self, ControllerError> {
        let cluster_id = load_or_create_cluster_id(&config.data_dir, config.node_id)?;
        let opened = MetadataJournal::open_cluster(
            &config.data_dir,
            config.node_id,
            membership.transport.clone(),
            membership.timing,
        )?;
        Self::open_with(config, metadata, ops, cluster_id, opened)
    }

    fn open_with(
        config: &ControllerConfig,
        metadata: Arc<MetadataCell>,
        ops: P,
        cluster_id: String,
        (journal, replay): (MetadataJournal, crate::quorum::Replay),
    ) -> Result<Self, ControllerError> {
        let mut state = ControllerState::new(NodeSettings {
            cluster_id,
            node_id: config.node_id,
            advertised: config.advertised,
            default_log_config: config.default_log_config.clone(),
            num_partitions: config.num_partitions,
            shard_count: ops.shard_count(),
            mirror_state_partitions: config.mirror_state_partitions.max(1),
            rack: config.cluster.rack.clone(),
            default_replication_factor: config.cluster.default_replication_factor,
            internal_replication_factor: config.cluster.internal_replication_factor,
            expected_brokers: config.cluster.expected_brokers.max(1),
            listeners: config.cluster.listeners.clone(),
        });
        for record in &replay.snapshot {
            state.apply(record)?;
        }
        if replay.snapshot_applied > 0 {
            state.set_applied(replay.snapshot_applied);
        }
        for record in &replay.committed {
            state.apply(record)?;
        }
        let mut controller = Controller {
            state,
            journal,
            metadata,
            ops,
            new_topic_id: Box::new(uuid::Uuid::new_v4),
            published_controller: None,
            registered_at: None,
            shutting_down: false,
            leading_since: None,
            session_timeout: std::time::Duration::from_millis(config.cluster.session_timeout_ms),
            rebalance: config.cluster.auto_leader_rebalance.then(|| {
                (
                    std::time::Duration::from_millis(config.cluster.leader_imbalance_check_ms),
                    f64::from(config.cluster.leader_imbalance_percentage) / 100.0,
                )
            }),
            rebalanced_at: std::time::Instant::now(),
            elections_at: None,
            broker: config.cluster.broker,
            dialled: std::collections::BTreeSet::new(),
        };
        tracing::info!(
            records = controller.state.applied(),
            topics = controller.metadata_image().topics.len(),
            cluster_id = %controller.state.settings().cluster_id,
            "metadata log replayed"
        );
        controller.publish();
        Ok(controller)
    }

    /// Replaces the source of new topic ids (tests).
    pub fn with_topic_ids(mut self, ids: impl FnMut() -> uuid::Uuid + Send + 'static) -> Self {
        self.new_topic_id = Box::new(ids);
        self
    }

    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    pub fn ops(&self) -> &P {
        &self.ops
    }

    /// The image of the current state (also what is published).
    pub fn metadata_image(&self) -> MetadataImage {
        self.state.image()
    }

    fn publish(&mut self) {
        // Every controller of a dynamic quorum whose endpoint is committed is dialled.
        let me = self.state.settings().node_id;
        for (node, (_, addr)) in self.state.voter_endpoints() {
            if *node != me && self.dialled.insert(*node) {
                self.journal.dial(*node, *addr);
            }
        }
        let mut image = self.state.image();
        let active = self.journal.leader();
        // Clients send admin requests to the controller Metadata names, so it must be a
        // broker they can reach: the active controller when it is one, else this broker
        // (every broker forwards), as KRaft names a broker too.
        let reachable = |id: &i32| image.brokers.contains_key(id) && !image.fenced.contains(id);
        image.controller_id = match active {
            Some(id) if reachable(&id) => id,
            _ if self.broker => image.node_id,
            _ => image
                .brokers
                .keys()
                .copied()
                .find(reachable)
                .unwrap_or(image.node_id),
        };
        self.published_controller = active;
        self.metadata.publish(image);
    }

    /// A quorum member registers its broker (with the address clients reach it at) until
    /// the registration is committed, proposing again at most once a second.
    fn register(&mut self) {
        if !self.broker
            || !self.journal.in_quorum()
            || self.state.is_registered()
            || self.shutting_down
        {
            return;
        }
        let due = self
            .registered_at
            .is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(1));
        if !due {
            return;
        }
        self.registered_at = Some(std::time::Instant::now());
        if let Err(e) = self.journal.propose_forwarded(&[self.state.registration()]) {
            tracing::warn!(error = %e, "cannot propose this broker's registration");
        }
    }

    /// Applies every change the journal has committed and not yet handed over, in order.
    /// Returns whether there was any.
    fn apply_taken(&mut self) -> bool {
        let changes = match self.journal.take_committed() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot read committed metadata");
                return false;
            }
        };
        let any = !changes.is_empty();
        for change in changes {
            match change {
                crate::quorum::journal::Committed::Batch(records) => {
                    for record in &records {
                        // Plans are made against the state they apply to: a record that
                        // does not apply is a bug, logged, not a reason to stop.
                        if let Err(e) = self.state.apply(record) {
                            tracing::error!(error = %e, "a committed metadata record does not apply");
                        }
                    }
                }
                crate::quorum::journal::Committed::Snapshot(applied, records) => {
                    // The leader's snapshot replaces this member's metadata.
                    self.state = ControllerState::new(self.state.settings().clone());
                    for record in &records {
                        if let Err(e) = self.state.apply(record) {
                            tracing::error!(error = %e, "a metadata snapshot record does not apply");
                        }
                    }
                    self.state.set_applied(applied);
                }
            }
        }
        any
    }

    /// Applies what other controllers committed (a quorum follower's side): the state and
    /// image follow, and this node's shards get the work it means. Returns whether
    /// anything changed.
    pub fn catch_up(&mut self) -> bool {
        self.register();
        let before = self.metadata.load();
        let changed = if self.apply_taken() {
            self.publish();
            self.run_actions(&before, &[]);
            true
        } else {
            // The active controller may still have moved: Metadata names it.
            if self.journal.in_quorum() && self.journal.leader() != self.published_controller {
                self.publish();
            }
            false
        };
        self.maybe_snapshot();
        self.maintain_cluster() || changed
    }

    /// Snapshots the metadata when the log grew long enough, or a learner needs one:
    /// the controller thread calls it when nothing else is queued.
    pub fn snapshot_if_due(&mut self) {
        self.snapshot_past(crate::quorum::journal::SNAPSHOT_EVERY);
    }

    /// Snapshots the metadata in the middle of work only once the log grew far longer
    /// than [`snapshot_if_due`](Self::snapshot_if_due) lets it (or a learner needs one).
    fn maybe_snapshot(&mut self) {
        self.snapshot_past(crate::quorum::journal::SNAPSHOT_OVERDUE);
    }

    fn snapshot_past(&mut self, min_entries: usize) {
        let state = &self.state;
        if let Err(e) = self
            .journal
            .maybe_snapshot(min_entries, state.applied(), || state.image_records())
        {
            // The log just stays longer until the next attempt.
            tracing::error!(error = %e, "cannot take a metadata snapshot");
        }
    }

    /// The shard work from `before` to the published image, run; failures logged.
    fn run_actions(&self, before: &MetadataImage, results: &[AdminResult]) {
        let actions = crate::applier::actions_between(before, &self.metadata.load(), results);
        if actions.is_empty() {
            return;
        }
        for (action, outcome) in actions.iter().zip(self.ops.execute(&actions)) {
            if let Err(message) = outcome {
                tracing::error!(?action, error = %message, "partition log operation failed");
            }
        }
    }

    /// The active controller's own changes: brokers not heard from within the session
    /// timeout, or whose process is gone (their controller port refuses connections:
    /// nothing listens there, which a cut network never looks like), are fenced, and
    /// heard-from fenced ones unfenced; then every partition
    /// whose leader or ISR those changes affect gets its election. Returns whether
    /// anything was committed.
    fn maintain_cluster(&mut self) -> bool {
        if !self.journal.in_quorum() {
            return false;
        }
        let peers = self.journal.peers_heard();
        if !peers.leading {
            self.leading_since = None;
            return false;
        }
        let since = *self
            .leading_since
            .get_or_insert_with(std::time::Instant::now);
        // Silence counts only once this node has led for a session timeout (before, it
        // has not heard every member); a refused connection is news at once.
        let judge_silence = since.elapsed() >= self.session_timeout;
        let me = self.state.settings().node_id;
        let mut liveness = Vec::new();
        for (id, b) in self.state.brokers() {
            if *id == me {
                // Leading is being heard: a leader fenced by its predecessor while it
                // was unreachable (stopped, cut off) unfences itself, or nobody would.
                if b.fenced && !b.shutting_down {
                    tracing::info!(node = id, "unfencing this broker: it leads the quorum");
                    liveness.push(MetadataRecord::UnfenceBroker { node_id: *id });
                }
                continue;
            }
            let ago = peers.heard.get(id).copied().flatten();
            let silent = ago.is_none_or(|d| d > self.session_timeout);
            let gone = peers.gone.contains(id);
            if !b.fenced && gone {
                tracing::warn!(
                    node = id,
                    "fencing a broker whose process is gone (its controller port refuses connections)"
                );
                liveness.push(MetadataRecord::FenceBroker { node_id: *id });
            } else if !b.fenced && silent && judge_silence {
                tracing::warn!(
                    node = id,
                    "fencing a broker not heard from within broker.session.timeout.ms"
                );
                liveness.push(MetadataRecord::FenceBroker { node_id: *id });
            } else if b.fenced && !silent && !gone && !b.shutting_down {
                tracing::info!(node = id, "unfencing a broker heard from again");
                liveness.push(MetadataRecord::UnfenceBroker { node_id: *id });
            }
        }
        if self.state.committed_cluster_id().is_none() {
            let id = self.state.settings().cluster_id.clone();
            liveness.insert(0, MetadataRecord::ClusterId { id });
        }
        let mut changed = self.commit_own(liveness);
        // Elections depend on the metadata alone: worked out again only once it moved.
        if self.elections_at != Some(self.state.applied()) {
            self.elections_at = Some(self.state.applied());
            let elections = self.state.election_records();
            changed |= self.commit_own(elections);
        }
        if let Some((every, imbalance)) = self.rebalance {
            if self.rebalanced_at.elapsed() >= every {
                self.rebalanced_at = std::time::Instant::now();
                let moves = self.state.rebalance_records(imbalance);
                if !moves.is_empty() {
                    tracing::info!(
                        partitions = moves.len(),
                        "auto leader rebalance: preferred replicas lead again"
                    );
                }
                changed |= self.commit_own(moves);
            }
        }
        changed
    }

    /// The state's plan for `request`, less the new topics and partitions this node has
    /// no open files left for ([`crate::capacity`]).
    fn plan(&mut self, request: &AdminRequest) -> crate::state::Plan {
        let mut plan = self.state.plan(request, &mut *self.new_topic_id);
        let creates = matches!(
            request,
            AdminRequest::CreateTopics { .. } | AdminRequest::CreatePartitions { .. }
        );
        if creates && !plan.records.is_empty() {
            if let Some(budget) = crate::capacity::FileBudget::of_this_process() {
                let settings = self.state.settings();
                let per_partition = if settings.default_log_config.direct_io {
                    2
                } else {
                    1
                };
                let state = &self.state;
                crate::capacity::enforce(
                    &mut plan,
                    settings.node_id,
                    per_partition,
                    budget,
                    &|name| state.topic(name).map(|t| t.id),
                );
            }
        }
        plan
    }

    /// A quorum member that does not lead handles a request the way KIP-590's
    /// forwarding does, through the quorum rather than a second RPC: it plans the change
    /// against its own (caught-up) state and proposes it behind a
    /// [`MetadataRecord::Guard`], which applies it only if nothing else committed in
    /// between. It then waits for the guard's outcome: applied, the plan's answer is the
    /// answer (the shard work already ran as for any committed change); skipped, it
    /// plans again. Clients never see NOT_CONTROLLER while the quorum has a leader.
    fn forward(&mut self, request: &AdminRequest) -> AdminResponse {
        const WAIT: std::time::Duration = std::time::Duration::from_secs(3);
        for _ in 0..FORWARD_ATTEMPTS {
            self.catch_up();
            let plan = self.plan(request);
            if plan.records.is_empty() {
                // Refused, or nothing to change: answered from the state as it is.
                log_outcome(request, &plan.response);
                return plan.response;
            }
            let nonce = self.new_nonce();
            let mut batch = Vec::with_capacity(plan.records.len() + 1);
            batch.push(MetadataRecord::Guard {
                nonce,
                expected_applied: self.state.applied(),
                records: u32::try_from(plan.records.len()).unwrap_or(u32::MAX),
            });
            batch.extend(plan.records.iter().cloned());
            if let Err(e) = self.journal.propose_forwarded(&batch) {
                return AdminResponse::Failed {
                    error_code: ResponseError::KafkaStorageError.code(),
                    message: format!("could not forward the metadata change: {e}"),
                };
            }
            let started = std::time::Instant::now();
            while started.elapsed() < WAIT {
                self.catch_up();
                match self.state.guard_outcome(nonce) {
                    Some(true) => {
                        log_outcome(request, &plan.response);
                        return plan.response;
                    }
                    Some(false) => break,
                    None => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        }
        AdminResponse::Failed {
            error_code: ResponseError::RequestTimedOut.code(),
            message: match self.journal.leader() {
                Some(n) => format!("the change forwarded to the active controller (node {n}) did not commit in time"),
                None => "there is no active controller right now".to_string(),
            },
        }
    }

    /// The leader commits `records`, applies them and publishes the image. In a quorum
    /// they go behind a guard (as forwarded changes do): a change forwarded by another
    /// member may sit in the log ahead of them, unseen when they were planned, and then
    /// they must not apply. `Ok(false)`: they did not (plan again).
    fn commit_guarded(&mut self, records: &[MetadataRecord]) -> Result<bool, JournalError> {
        if !self.journal.in_quorum() {
            self.journal.append(records)?;
            self.apply_taken();
            self.publish();
            return Ok(true);
        }
        let nonce = self.new_nonce();
        let mut batch = Vec::with_capacity(records.len() + 1);
        batch.push(MetadataRecord::Guard {
            nonce,
            expected_applied: self.state.applied(),
            records: u32::try_from(records.len()).unwrap_or(u32::MAX),
        });
        batch.extend(records.iter().cloned());
        self.journal.append(&batch)?;
        self.apply_taken();
        self.publish();
        Ok(self.state.guard_outcome(nonce) == Some(true))
    }

    /// A guard nonce no remembered guard has.
    fn new_nonce(&self) -> u64 {
        loop {
            let n = uuid::Uuid::new_v4().as_u64_pair().0;
            if self.state.guard_outcome(n).is_none() {
                return n;
            }
        }
    }

    /// Commits records this controller decided on its own (no request to answer),
    /// applies them and runs their shard work.
    fn commit_own(&mut self, records: Vec<MetadataRecord>) -> bool {
        if records.is_empty() {
            return false;
        }
        let before = self.metadata.load();
        match self.commit_guarded(&records) {
            Ok(held) => {
                // Skipped: the next tick decides again on the newer state.
                self.run_actions(&before, &[]);
                held
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot commit the controller's own metadata change");
                false
            }
        }
    }

    /// The active controller's node id, as the quorum knows it.
    pub fn active_controller(&self) -> Option<i32> {
        self.journal.leader()
    }

    /// Applies one admin request and returns its answer.
    pub fn handle(&mut self, request: &AdminRequest) -> AdminResponse {
        // Plan against everything committed so far (a new leader may have some to apply).
        self.catch_up();
        if matches!(request, AdminRequest::ControlledShutdown) {
            self.shutting_down = true;
        }
        match request {
            AdminRequest::DescribeQuorum => {
                let mut q = self.journal.describe();
                for v in q.voters.iter_mut().chain(q.observers.iter_mut()) {
                    v.3 = self.state.voter_endpoints().get(&v.0).map(|e| e.0);
                }
                return AdminResponse::Quorum(q);
            }
            AdminRequest::AddRaftVoter { .. } | AdminRequest::RemoveRaftVoter { .. } => {
                return self.change_voters(request);
            }
            _ => {}
        }
        self.commit_request(request)
    }

    /// AddRaftVoter / RemoveRaftVoter on a dynamic quorum. An added controller must be
    /// an observer already (it runs with `controller.quorum.bootstrap.servers` and the
    /// leader made it a learner); its endpoint is committed first so every member dials
    /// it, then the membership change goes through the quorum (from any member).
    fn change_voters(&mut self, request: &AdminRequest) -> AdminResponse {
        let failed = |error: ResponseError, message: String| AdminResponse::Failed {
            error_code: error.code(),
            message,
        };
        if !self.journal.is_dynamic() {
            return failed(
                ResponseError::UnsupportedVersion,
                "the voters are static (controller.quorum.voters): start the controllers with controller.quorum.bootstrap.servers to change them".into(),
            );
        }
        let (voters, learners) = self.journal.membership();
        let (node_id, add) = match request {
            AdminRequest::AddRaftVoter { node_id, .. } => (*node_id, true),
            AdminRequest::RemoveRaftVoter {
                node_id,
                directory_id,
            } => {
                let known = self.state.voter_endpoints().get(node_id).map(|e| e.0);
                if !voters.contains(node_id) || known.is_some_and(|d| d != *directory_id) {
                    return failed(
                        ResponseError::VoterNotFound,
                        format!("node {node_id} with directory id {directory_id} is not a voter"),
                    );
                }
                (*node_id, false)
            }
            _ => unreachable!("only voter changes come here"),
        };
        if add {
            if voters.contains(&node_id) {
                return failed(
                    ResponseError::DuplicateVoter,
                    format!("node {node_id} is already a voter"),
                );
            }
            if !learners.contains(&node_id) {
                return failed(
                    ResponseError::RequestTimedOut,
                    format!("node {node_id} is not an observer of the quorum yet (start it with controller.quorum.bootstrap.servers naming a controller)"),
                );
            }
            let endpoint = self.commit_request(request);
            if !matches!(&endpoint, AdminResponse::Results(r) if r.iter().all(|r| r.error_code == 0))
            {
                return endpoint;
            }
        }
        match self.journal.change_voters(node_id, add) {
            Ok(()) => {
                tracing::info!(
                    node = node_id,
                    "{}",
                    if add {
                        "a controller became a voter"
                    } else {
                        "a voter was removed from the quorum"
                    }
                );
                self.publish();
                AdminResponse::Results(Vec::new())
            }
            Err(message) => failed(ResponseError::RequestTimedOut, message),
        }
    }

    /// Plans `request`, commits its records (or forwards them) and applies them.
    fn commit_request(&mut self, request: &AdminRequest) -> AdminResponse {
        // Conditional records any member may propose: through the leader, unanswered
        // (the asker sees the outcome in a later image).
        let forwardable = self.state.forwardable_records(request);
        if !forwardable.is_empty()
            && self.journal.in_quorum()
            && self.journal.leader() != Some(self.state.settings().node_id)
        {
            if let Err(e) = self.journal.propose_forwarded(&forwardable) {
                tracing::warn!(error = %e, "cannot forward a metadata change to the active controller");
            }
            return AdminResponse::Results(Vec::new());
        }
        if self.journal.in_quorum() && self.journal.leader() != Some(self.state.settings().node_id)
        {
            return self.forward(request);
        }
        // The published image is the state's: what it was before this change.
        let mut before = self.metadata.load();
        let mut plan = self.plan(request);
        let mut attempts = 0;
        while !plan.records.is_empty() {
            match self.commit_guarded(&plan.records) {
                Ok(true) => break,
                // A forwarded change came first: plan again against it.
                Ok(false) if attempts < FORWARD_ATTEMPTS => {
                    attempts += 1;
                    // The change that came first has its shard work here too.
                    self.run_actions(&before, &[]);
                    before = self.metadata.load();
                    plan = self.plan(request);
                }
                Ok(false) => {
                    self.run_actions(&before, &[]);
                    return AdminResponse::Failed {
                        error_code: ResponseError::RequestTimedOut.code(),
                        message: "concurrent metadata changes kept this one from committing"
                            .to_string(),
                    };
                }
                Err(JournalError::NotLeader(_)) => {
                    // Lost the lead since the check: forward instead.
                    return self.forward(request);
                }
                Err(e) => {
                    return AdminResponse::Failed {
                        error_code: ResponseError::KafkaStorageError.code(),
                        message: format!("could not write the metadata log: {e}"),
                    };
                }
            }
        }
        if !plan.records.is_empty() {
            self.maybe_snapshot();
        }
        let mut response = plan.response;
        log_outcome(request, &response);
        if plan.records.is_empty() {
            return response;
        }
        // What the committed change means for this node's shards, from the images (the
        // same work a node that did not plan the change would do).
        let results: &[AdminResult] = match &response {
            AdminResponse::Results(r) => r,
            _ => &[],
        };
        let actions = crate::applier::actions_between(&before, &self.metadata.load(), results);
        if actions.is_empty() {
            return response;
        }
        let outcomes = self.ops.execute(&actions);
        assert_eq!(
            outcomes.len(),
            actions.len(),
            "one outcome per partition action"
        );
        for (action, outcome) in actions.iter().zip(outcomes) {
            let Err(message) = outcome else { continue };
            tracing::error!(?action, error = %message, "partition log operation failed");
            if let AdminResponse::Results(results) = &mut response {
                if let Some(r) = results.get_mut(action.result_index()) {
                    if r.error_code == 0 {
                        *r = AdminResult::err(
                            r.name.clone(),
                            ResponseError::KafkaStorageError.code(),
                            message,
                        );
                    }
                }
            }
        }
        response
    }
}

/// One log line per admin change that took effect (topic created, deleted, grown,
/// reconfigured); rejected items are logged at debug.
fn log_outcome(request: &AdminRequest, response: &AdminResponse) {
    let AdminResponse::Results(results) = response else {
        return;
    };
    let what = match request {
        AdminRequest::CreateTopics {
            validate_only: true,
            ..
        }
        | AdminRequest::CreatePartitions {
            validate_only: true,
            ..
        }
        | AdminRequest::AlterTopicConfigs {
            validate_only: true,
            ..
        }
        | AdminRequest::AlterBrokerConfigs {
            validate_only: true,
            ..
        } => return,
        AdminRequest::AlterBrokerConfigs { .. } => "broker configs changed",
        AdminRequest::AlterScramCredentials { .. } => "SCRAM credentials changed",
        AdminRequest::CreateAcls { .. } => "ACLs created",
        AdminRequest::DeleteAcls { .. } => "ACLs deleted",
        AdminRequest::SyncMirrorAcls { .. } => "mirror ACLs synced",
        AdminRequest::CreateTopics { .. } => "topic created",
        AdminRequest::DeleteTopics { .. } => "topic deleted",
        AdminRequest::CreatePartitions { .. } => "partitions added",
        AdminRequest::AlterTopicConfigs { .. } => "topic configs changed",
        AdminRequest::AllocateProducerIds { .. }
        | AdminRequest::BumpLeaderEpochs { .. }
        | AdminRequest::AlterPartition { .. }
        | AdminRequest::ControlledShutdown => return,
        AdminRequest::AlterMirrorConfigs {
            validate_only: true,
            ..
        } => return,
        AdminRequest::CreateMirror { .. } => "mirror created",
        AdminRequest::AddTopicsToMirror { .. } => "topic added to mirror",
        AdminRequest::SetMirrorTopicsState { desired, .. } => match desired {
            dataplane::wire::mirror::DesiredMirrorState::Mirroring => "mirror topic resumed",
            dataplane::wire::mirror::DesiredMirrorState::Paused => "mirror topic paused",
            dataplane::wire::mirror::DesiredMirrorState::Stopped => "topic removed from mirror",
        },
        AdminRequest::DeleteMirror { .. } => "mirror deleted",
        AdminRequest::AlterMirrorConfigs { .. } => "mirror configs changed",
        AdminRequest::AlterPartitionReassignments { .. } => "partition reassignment",
        AdminRequest::ElectLeaders { .. } => "leader elected",
        AdminRequest::DescribeQuorum
        | AdminRequest::AddRaftVoter { .. }
        | AdminRequest::RemoveRaftVoter { .. } => return,
    };
    for r in results {
        if r.error_code == 0 {
            tracing::info!(topic = %r.name, "{what}");
        } else {
            tracing::debug!(topic = %r.name, error_code = r.error_code, message = ?r.message, "{what}: rejected");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use dataplane::controller::NewTopic;
    use dataplane::metadata::default_shard;

    use super::*;

    fn code(e: ResponseError) -> i16 {
        e.code()
    }

    /// Records every action; fails those whose partition is listed in `fail`.
    #[derive(Debug, Clone, Default)]
    struct FakeShards {
        shards: usize,
        done: Arc<Mutex<Vec<PartitionAction>>>,
        fail: Arc<Mutex<Vec<TopicPartition>>>,
    }

    impl PartitionOps for FakeShards {
        fn shard_count(&self) -> usize {
            self.shards
        }

        fn execute(&self, actions: &[PartitionAction]) -> Vec<Result<(), String>> {
            let fail = self.fail.lock().expect("lock").clone();
            let mut done = self.done.lock().expect("lock");
            actions
                .iter()
                .map(|a| {
                    done.push(a.clone());
                    let tp = match a {
                        PartitionAction::Open { tp, .. }
                        | PartitionAction::Delete { tp, .. }
                        | PartitionAction::UpdateConfig { tp, .. }
                        | PartitionAction::SetLeadership { tp, .. } => tp,
                    };
                    if fail.contains(tp) {
                        Err(format!("disk full for {tp}"))
                    } else {
                        Ok(())
                    }
                })
                .collect()
        }
    }

    impl FakeShards {
        fn new(shards: usize) -> Self {
            FakeShards {
                shards,
                ..Default::default()
            }
        }

        fn take(&self) -> Vec<PartitionAction> {
            std::mem::take(&mut *self.done.lock().expect("lock"))
        }
    }

    fn config(dir: &std::path::Path) -> ControllerConfig {
        ControllerConfig {
            data_dir: dir.to_path_buf(),
            node_id: 0,
            advertised: "127.0.0.1:9092".parse().expect("addr"),
            default_log_config: LogConfig::default(),
            num_partitions: 3,
            queue_max: 16,
            mirror_state_partitions: 3,
            quorum: None,
            cluster: ClusterSettings::default(),
        }
    }

    fn open(dir: &std::path::Path, shards: usize) -> (Controller<FakeShards>, Arc<MetadataCell>) {
        let cell = Arc::new(MetadataCell::new(MetadataImage::empty(
            String::new(),
            0,
            "127.0.0.1:9092".parse().expect("addr"),
        )));
        let c = Controller::open(&config(dir), Arc::clone(&cell), FakeShards::new(shards))
            .expect("open controller");
        (c, cell)
    }

    fn topic(name: &str, partitions: i32, configs: &[(&str, &str)]) -> NewTopic {
        NewTopic {
            name: name.to_string(),
            num_partitions: partitions,
            replication_factor: -1,
            assignments: Vec::new(),
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
        }
    }

    fn create(c: &mut Controller<FakeShards>, topics: Vec<NewTopic>) -> Vec<AdminResult> {
        match c.handle(&AdminRequest::CreateTopics {
            topics,
            validate_only: false,
        }) {
            AdminResponse::Results(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn results(r: AdminResponse) -> Vec<AdminResult> {
        match r {
            AdminResponse::Results(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn codes(r: &[AdminResult]) -> Vec<i16> {
        r.iter().map(|r| r.error_code).collect()
    }

    #[test]
    fn create_topics_validates_and_places_partitions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 4);
        let long = "x".repeat(250);
        let mut rf3 = topic("rf3", 1, &[]);
        rf3.replication_factor = 3;
        let r = create(
            &mut c,
            vec![
                topic("orders", 2, &[("retention.ms", "1000")]),
                topic("defaults", -1, &[]),
                topic("bad name", 1, &[]),
                topic(".", 1, &[]),
                topic(&long, 1, &[]),
                topic("zero", 0, &[]),
                topic("negative", -2, &[]),
                rf3,
                topic("badcfg", 1, &[("retention.ms", "soon")]),
                topic("unknowncfg", 1, &[("no.such", "1")]),
                topic("mirrored", 1, &[("mirror.name", "m")]),
                topic("dup", 1, &[]),
                topic("dup", 1, &[]),
            ],
        );
        assert_eq!(
            codes(&r),
            vec![
                0,
                0,
                code(ResponseError::InvalidTopicException),
                code(ResponseError::InvalidTopicException),
                code(ResponseError::InvalidTopicException),
                code(ResponseError::InvalidPartitions),
                code(ResponseError::InvalidPartitions),
                code(ResponseError::InvalidReplicationFactor),
                code(ResponseError::InvalidConfig),
                code(ResponseError::InvalidConfig),
                code(ResponseError::InvalidConfig),
                code(ResponseError::InvalidRequest),
                code(ResponseError::InvalidRequest),
            ]
        );
        assert!(r[7]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("only 1 broker(s) are registered")));
        assert!(r[8]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("retention.ms")));
        assert!(r[10]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("mirror RPCs")));

        let image = cell.load();
        assert_eq!(image.topics.len(), 2);
        let orders = image.topic("orders").expect("orders");
        assert_eq!(orders.partitions.len(), 2);
        assert_eq!(orders.log_config.retention_ms, 1000);
        assert_eq!(
            orders.configs,
            BTreeMap::from([("retention.ms".to_string(), "1000".to_string())])
        );
        for p in &orders.partitions {
            assert_eq!(p.leader, 0);
            assert_eq!(p.leader_epoch, 0);
            assert_eq!(p.shard, default_shard("orders", p.partition, 4));
        }
        assert_eq!(
            image.topic("defaults").expect("defaults").partitions.len(),
            3
        );
        assert_eq!(
            image.topic_by_id(orders.id).map(|t| t.name.as_str()),
            Some("orders")
        );
        // 2 topics + 5 partitions + 1 config.
        assert_eq!(image.offset, 8);
        let opened = c.ops().take();
        assert_eq!(opened.len(), 5);
        assert!(opened
            .iter()
            .all(|a| matches!(a, PartitionAction::Open { .. })));

        let r = create(&mut c, vec![topic("orders", 1, &[])]);
        assert_eq!(codes(&r), vec![code(ResponseError::TopicAlreadyExists)]);
    }

    #[test]
    fn validate_only_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 2);
        let r = results(c.handle(&AdminRequest::CreateTopics {
            topics: vec![topic("a", 2, &[]), topic("b", 0, &[])],
            validate_only: true,
        }));
        assert_eq!(codes(&r), vec![0, code(ResponseError::InvalidPartitions)]);
        assert!(cell.load().topics.is_empty());
        assert_eq!(c.state().applied(), 0);
        assert!(c.ops().take().is_empty());
        create(&mut c, vec![topic("a", 1, &[])]);
        let r = results(c.handle(&AdminRequest::CreatePartitions {
            topics: vec![("a".into(), 4)],
            assignments: Vec::new(),
            validate_only: true,
        }));
        assert_eq!(codes(&r), vec![0]);
        assert_eq!(cell.load().topic("a").expect("a").partitions.len(), 1);
    }

    #[test]
    fn failed_open_reports_storage_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, _) = open(dir.path(), 2);
        c.ops()
            .fail
            .lock()
            .expect("lock")
            .push(TopicPartition::new("b", 1));
        let r = create(&mut c, vec![topic("a", 2, &[]), topic("b", 2, &[])]);
        assert_eq!(r[0], AdminResult::ok("a"));
        assert_eq!(r[1].error_code, code(ResponseError::KafkaStorageError));
        assert!(r[1]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("disk full")));
    }

    #[test]
    fn a_bumped_leader_epoch_is_committed_then_handed_to_the_owning_shard() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 2);
        create(&mut c, vec![topic("a", 2, &[])]);
        c.ops().take();
        let a = |p| TopicPartition::new("a", p);
        let r = results(c.handle(&AdminRequest::BumpLeaderEpochs {
            partitions: vec![(a(0), 4), (a(1), -1), (a(0), 6), (a(7), 0)],
        }));
        assert_eq!(
            codes(&r),
            vec![0, 0, 0, code(ResponseError::UnknownTopicOrPartition)]
        );
        let image = cell.load();
        let epoch = |p: i32| image.partition(&a(p)).expect("partition").leader_epoch;
        // a-0 above 4, then above 6; a-1 is already above -1.
        assert_eq!((epoch(0), epoch(1)), (7, 0));
        let made: Vec<(TopicPartition, i32, usize)> = c
            .ops()
            .take()
            .into_iter()
            .map(|action| match action {
                PartitionAction::SetLeadership {
                    tp,
                    leadership,
                    shard,
                    ..
                } => (tp, leadership.leader_epoch.0, shard),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        let shard = image.partition(&a(0)).expect("partition").shard;
        // The shard is told the epoch the batch ends at (the applier works from images).
        assert_eq!(made, vec![(a(0), 7, shard)]);
    }

    #[test]
    fn delete_topics() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 2);
        create(
            &mut c,
            vec![topic("a", 2, &[]), topic("__consumer_offsets", 1, &[])],
        );
        assert!(
            cell.load()
                .topic("__consumer_offsets")
                .expect("internal")
                .internal
        );
        c.ops().take();
        let r = results(c.handle(&AdminRequest::DeleteTopics {
            names: vec!["a".into(), "missing".into(), "__consumer_offsets".into()],
        }));
        assert_eq!(
            codes(&r),
            vec![
                0,
                code(ResponseError::UnknownTopicOrPartition),
                code(ResponseError::InvalidTopicException)
            ]
        );
        let image = cell.load();
        assert!(image.topic("a").is_none());
        assert_eq!(image.topics_by_id.len(), 1);
        let deleted = c.ops().take();
        assert_eq!(deleted.len(), 2);
        assert!(deleted
            .iter()
            .all(|a| matches!(a, PartitionAction::Delete { .. })));
        // The name can be used again, with a new id.
        assert_eq!(codes(&create(&mut c, vec![topic("a", 1, &[])])), vec![0]);
    }

    #[test]
    fn create_partitions_only_grows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 3);
        create(&mut c, vec![topic("a", 2, &[("segment.bytes", "1000")])]);
        c.ops().take();
        let r = results(c.handle(&AdminRequest::CreatePartitions {
            topics: vec![("a".into(), 5), ("missing".into(), 2)],
            assignments: Vec::new(),
            validate_only: false,
        }));
        assert_eq!(
            codes(&r),
            vec![0, code(ResponseError::UnknownTopicOrPartition)]
        );
        let a = cell.load().topic("a").expect("a").clone();
        assert_eq!(a.partitions.len(), 5);
        let opened = c.ops().take();
        assert_eq!(opened.len(), 3);
        for action in opened {
            let PartitionAction::Open {
                tp,
                config,
                shard,
                topic_id,
                ..
            } = action
            else {
                panic!("not open")
            };
            assert!(tp.partition >= 2);
            assert_eq!(topic_id, a.id);
            assert_eq!(config.segment_bytes, 1000);
            assert_eq!(shard, default_shard("a", tp.partition, 3));
        }
        for n in [5, 4] {
            let r = results(c.handle(&AdminRequest::CreatePartitions {
                topics: vec![("a".into(), n)],
                assignments: Vec::new(),
                validate_only: false,
            }));
            assert_eq!(r[0].error_code, code(ResponseError::InvalidPartitions));
            assert!(r[0].message.is_some());
        }
    }

    #[test]
    fn alter_configs_replace_and_incremental() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 2);
        create(
            &mut c,
            vec![topic(
                "a",
                2,
                &[("retention.ms", "1000"), ("segment.bytes", "2048")],
            )],
        );
        c.ops().take();
        let alter =
            |configs: &[(&str, Option<&str>)], incremental: bool| AdminRequest::AlterTopicConfigs {
                topic: "a".into(),
                configs: configs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                    .collect(),
                incremental,
                validate_only: false,
            };
        // Incremental: set one, delete one, keep the rest.
        let r = results(c.handle(&alter(
            &[("retention.bytes", Some("5000")), ("segment.bytes", None)],
            true,
        )));
        assert_eq!(codes(&r), vec![0]);
        let a = cell.load().topic("a").expect("a").clone();
        assert_eq!(
            a.configs,
            BTreeMap::from([
                ("retention.bytes".to_string(), "5000".to_string()),
                ("retention.ms".to_string(), "1000".to_string())
            ])
        );
        assert_eq!(
            a.log_config.segment_bytes,
            LogConfig::default().segment_bytes
        );
        assert_eq!(a.log_config.retention_bytes, 5000);
        let updates = c.ops().take();
        assert_eq!(updates.len(), 2);
        for u in &updates {
            let PartitionAction::UpdateConfig { config, .. } = u else {
                panic!("not update")
            };
            assert_eq!(config, &a.log_config);
        }
        // Replace: the new set is exactly what was sent.
        let r = results(c.handle(&alter(&[("segment.ms", Some("60000"))], false)));
        assert_eq!(codes(&r), vec![0]);
        let a = cell.load().topic("a").expect("a").clone();
        assert_eq!(
            a.configs,
            BTreeMap::from([("segment.ms".to_string(), "60000".to_string())])
        );
        assert_eq!(a.log_config.retention_ms, LogConfig::default().retention_ms);
        assert_eq!(c.ops().take().len(), 2);
        // Errors.
        let before = c.state().applied();
        let r = results(c.handle(&alter(&[("retention.ms", Some("x"))], true)));
        assert_eq!(codes(&r), vec![code(ResponseError::InvalidConfig)]);
        let r = results(c.handle(&alter(&[("mirror.name", Some("m"))], false)));
        assert_eq!(r[0].error_code, code(ResponseError::InvalidConfig));
        assert_eq!(
            r[0].message.as_deref(),
            Some("mirror.name can only be changed by the mirror RPCs")
        );
        let r = results(c.handle(&AdminRequest::AlterTopicConfigs {
            topic: "nope".into(),
            configs: vec![],
            incremental: true,
            validate_only: false,
        }));
        assert_eq!(
            codes(&r),
            vec![code(ResponseError::UnknownTopicOrPartition)]
        );
        let r = results(c.handle(&AdminRequest::AlterTopicConfigs {
            topic: "a".into(),
            configs: vec![("retention.ms".into(), Some("1".into()))],
            incremental: true,
            validate_only: true,
        }));
        assert_eq!(codes(&r), vec![0]);
        assert_eq!(c.state().applied(), before);
        assert!(c.ops().take().is_empty());
    }

    #[test]
    fn mirror_name_survives_replace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 1);
        create(&mut c, vec![topic("a", 1, &[])]);
        // The mirror RPCs (later) write mirror.name directly as a record.
        let record = crate::metadata_log::MetadataRecord::Config {
            resource_type: crate::metadata_log::ConfigResourceType::Topic,
            resource_name: "a".into(),
            name: "mirror.name".into(),
            value: Some("m".into()),
        };
        c.journal
            .append(std::slice::from_ref(&record))
            .expect("append");
        assert!(c.catch_up(), "the appended record is applied");
        let r = results(c.handle(&AdminRequest::AlterTopicConfigs {
            topic: "a".into(),
            configs: vec![("retention.ms".into(), Some("5".into()))],
            incremental: false,
            validate_only: false,
        }));
        assert_eq!(codes(&r), vec![0]);
        let a = cell.load().topic("a").expect("a").clone();
        assert_eq!(a.configs.get("mirror.name").map(String::as_str), Some("m"));
        assert_eq!(a.log_config.retention_ms, 5);
    }

    /// A source without topic ids (nil id, partition count known): the controller
    /// assigns an id and marks the topic; re-adding it after failover finds it by that
    /// mark, and a local topic without the mark is refused.
    #[test]
    fn topics_of_a_source_without_topic_ids_get_an_id_here() {
        use dataplane::wire::mirror::MirrorTopicMetadata;
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 2);
        let created = c.handle(&AdminRequest::CreateMirror {
            name: "m".into(),
            configs: vec![("bootstrap.servers".into(), Some("old:9092".into()))],
        });
        assert_eq!(codes(&results(created)), vec![0]);
        let no_id = |name: &str| MirrorTopicMetadata {
            topic_id: uuid::Uuid::nil(),
            name: name.into(),
            num_partitions: 2,
        };
        let add = |c: &mut Controller<FakeShards>, names: &[&str]| {
            results(c.handle(&AdminRequest::AddTopicsToMirror {
                mirror: "m".into(),
                topics: names.iter().map(|n| no_id(n)).collect(),
                configs: Default::default(),
            }))
        };
        assert_eq!(codes(&add(&mut c, &["old-a", "old-b"])), vec![0, 0]);
        let image = cell.load();
        let (a, b) = (
            image.topic("old-a").expect("a"),
            image.topic("old-b").expect("b"),
        );
        assert!(!a.id.is_nil() && !b.id.is_nil() && a.id != b.id);
        assert_eq!(a.partitions.len(), 2);
        assert_eq!(
            a.configs.get("mirror.source.topic.id").map(String::as_str),
            Some("none")
        );
        // Idempotent while mirroring; a plain local topic of that name is refused.
        assert_eq!(codes(&add(&mut c, &["old-a"])), vec![0]);
        create(&mut c, vec![topic("plain", 1, &[])]);
        assert_eq!(
            codes(&add(&mut c, &["plain"])),
            vec![code(ResponseError::InconsistentTopicId)]
        );
    }

    /// Dynamic broker configs: a cluster-wide `log.retention.ms` reaches topics without
    /// their own and the shards get the new log config; a per-broker value wins over the
    /// default; read-only and mistyped configs are refused; all of it survives a reopen.
    #[test]
    fn dynamic_broker_configs_set_topic_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 2);
        create(
            &mut c,
            vec![
                topic("plain", 2, &[]),
                topic("own", 1, &[("retention.ms", "5")]),
            ],
        );
        c.ops.take();
        let alter = |c: &mut Controller<FakeShards>, broker: &str, k: &str, v: Option<&str>| {
            results(c.handle(&AdminRequest::AlterBrokerConfigs {
                broker: broker.into(),
                configs: vec![(k.into(), v.map(str::to_string))],
                incremental: true,
                validate_only: false,
            }))
        };
        assert_eq!(
            codes(&alter(&mut c, "", "log.retention.ms", Some("3600000"))),
            vec![0]
        );
        let image = cell.load();
        assert_eq!(
            image.topic("plain").expect("plain").log_config.retention_ms,
            3_600_000
        );
        assert_eq!(image.topic("own").expect("own").log_config.retention_ms, 5);
        assert_eq!(
            image
                .broker_configs
                .get("")
                .and_then(|m| m.get("log.retention.ms"))
                .map(String::as_str),
            Some("3600000")
        );
        let updated = c.ops.take();
        assert_eq!(
            updated.len(),
            2,
            "both partitions of `plain`, not `own`: {updated:?}"
        );
        assert_eq!(
            codes(&alter(&mut c, "0", "log.retention.ms", Some("7200000"))),
            vec![0]
        );
        // Kafka cannot change log.retention.hours at runtime (only log.retention.ms).
        assert_eq!(
            codes(&alter(&mut c, "0", "log.retention.hours", Some("2"))),
            vec![code(ResponseError::InvalidRequest)]
        );
        assert_eq!(
            cell.load()
                .topic("plain")
                .expect("plain")
                .log_config
                .retention_ms,
            7_200_000,
            "the broker's own value wins over the cluster default"
        );
        assert_eq!(
            codes(&alter(&mut c, "0", "broker.id", Some("7"))),
            vec![code(ResponseError::InvalidRequest)]
        );
        assert_eq!(
            codes(&alter(&mut c, "", "log.retention.ms", Some("soon"))),
            vec![code(ResponseError::InvalidConfig)]
        );
        assert_eq!(
            codes(&alter(&mut c, "", "no.such.config", Some("1"))),
            vec![code(ResponseError::InvalidConfig)]
        );
        drop(c);
        let (_c, cell) = open(dir.path(), 2);
        assert_eq!(
            cell.load()
                .topic("plain")
                .expect("plain")
                .log_config
                .retention_ms,
            7_200_000
        );
    }

    #[test]
    fn replay_after_reopen_gives_the_same_image() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 4);
        create(
            &mut c,
            vec![
                topic("a", 3, &[("retention.ms", "77")]),
                topic("b", 1, &[]),
                topic("c", 2, &[]),
            ],
        );
        c.handle(&AdminRequest::DeleteTopics {
            names: vec!["b".into()],
        });
        c.handle(&AdminRequest::CreatePartitions {
            topics: vec![("c".into(), 4)],
            assignments: Vec::new(),
            validate_only: false,
        });
        c.handle(&AdminRequest::AlterTopicConfigs {
            topic: "c".into(),
            configs: vec![("segment.bytes".into(), Some("4096".into()))],
            incremental: true,
            validate_only: false,
        });
        c.handle(&AdminRequest::AllocateProducerIds { count: 10 });
        let before = cell.load();
        drop(c);
        let (c2, cell2) = open(dir.path(), 4);
        assert_eq!(*cell2.load(), *before);
        assert_eq!(c2.state().next_producer_id(), 10);
        assert_eq!(before.cluster_id.len(), 22);
        let opens = topics_to_open(&cell2.load());
        assert_eq!(opens.len(), 3 + 4);
        let c3 = opens
            .iter()
            .find(|o| o.tp == TopicPartition::new("c", 3))
            .expect("c-3");
        assert_eq!(c3.config.segment_bytes, 4096);
    }

    /// The metadata snapshot (every `SNAPSHOT_EVERY` entries, taken here at once) holds the
    /// whole state: topics, partitions with their epochs, topic and broker configs and the
    /// producer-id mark; with the entries after it, a reopen gives the same image.
    #[test]
    fn a_snapshot_and_the_entries_after_it_give_the_same_image() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, cell) = open(dir.path(), 4);
        create(
            &mut c,
            vec![topic("a", 3, &[("retention.ms", "77")]), topic("b", 2, &[])],
        );
        c.handle(&AdminRequest::AlterBrokerConfigs {
            broker: String::new(),
            configs: vec![("log.retention.ms".into(), Some("3600000".into()))],
            incremental: true,
            validate_only: false,
        });
        c.handle(&AdminRequest::BumpLeaderEpochs {
            partitions: vec![(TopicPartition::new("a", 1), 4)],
        });
        c.handle(&AdminRequest::AllocateProducerIds { count: 10 });
        let state = &c.state;
        c.journal
            .snapshot(state.applied(), &state.image_records())
            .expect("snapshot");
        c.handle(&AdminRequest::DeleteTopics {
            names: vec!["b".into()],
        });
        create(&mut c, vec![topic("c", 1, &[("segment.bytes", "4096")])]);
        let before = cell.load();
        drop(c);
        let (c2, cell2) = open(dir.path(), 4);
        assert_eq!(*cell2.load(), *before);
        assert_eq!(c2.state().next_producer_id(), 10);
        let a1 = cell2
            .load()
            .partition(&TopicPartition::new("a", 1))
            .expect("a-1")
            .leader_epoch;
        assert_eq!(a1, 5);
    }

    /// Three controllers in one quorum (loopback TCP): the leader commits admin requests
    /// and the others forward theirs behind a guard, every member applies what commits,
    /// and after the leader is gone another one leads with the same metadata.
    #[test]
    fn three_controllers_commit_on_the_leader_and_every_member_applies() {
        use std::time::{Duration, Instant};
        let timing = crate::quorum::QuorumTiming {
            tick_ms: 20,
            election_ticks: 10,
            heartbeat_ticks: 2,
        };
        let dirs: Vec<tempfile::TempDir> = (0..3)
            .map(|_| tempfile::tempdir().expect("tempdir"))
            .collect();
        let voters: crate::quorum::Voters = (1..=3u64)
            .map(|id| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                (id, l.local_addr().expect("addr"))
            })
            .collect();
        let mut members: BTreeMap<i32, (Controller<FakeShards>, Arc<MetadataCell>)> = (0..3)
            .map(|n: i32| {
                let mut cfg = config(dirs[n as usize].path());
                cfg.node_id = n;
                let cell = Arc::new(MetadataCell::new(MetadataImage::empty(
                    String::new(),
                    n,
                    "127.0.0.1:9092".parse().expect("addr"),
                )));
                let c = Controller::open_in_quorum(
                    &cfg,
                    Arc::clone(&cell),
                    FakeShards::new(2),
                    &QuorumMembership {
                        transport: crate::quorum::Transport::static_quorum(
                            crate::quorum::journal::raft_id(n),
                            voters.clone(),
                            true,
                        ),
                        timing,
                    },
                )
                .expect("open in quorum");
                (n, (c, cell))
            })
            .collect();
        let leader_of = |members: &BTreeMap<i32, (Controller<FakeShards>, Arc<MetadataCell>)>| {
            let started = Instant::now();
            loop {
                let seen: Vec<Option<i32>> = members
                    .values()
                    .map(|(c, _)| c.active_controller())
                    .collect();
                if let Some(Some(l)) = seen.first() {
                    if members.contains_key(l) && seen.iter().all(|s| s == &Some(*l)) {
                        return *l;
                    }
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "no leader: {seen:?}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let wait_for_topic = |c: &mut Controller<FakeShards>, cell: &MetadataCell, name: &str| {
            let started = Instant::now();
            while cell.load().topic(name).is_none() {
                c.catch_up();
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "{name} never arrived"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let leader = leader_of(&members);
        let follower = *members.keys().find(|n| **n != leader).expect("a follower");
        // A follower takes the request too: it forwards its plan behind a guard.
        let r = create(
            &mut members.get_mut(&follower).expect("follower").0,
            vec![topic("t", 3, &[])],
        );
        assert_eq!(codes(&r), vec![0]);
        // The same request again, through the leader, finds it there.
        let r = create(
            &mut members.get_mut(&leader).expect("leader").0,
            vec![topic("t", 3, &[])],
        );
        assert_eq!(codes(&r), vec![code(ResponseError::TopicAlreadyExists)]);
        for (c, cell) in members.values_mut() {
            wait_for_topic(c, cell, "t");
            assert_eq!(cell.load().topic("t").expect("t").partitions.len(), 3);
        }
        // The leader goes; one of the others leads and already has everything.
        members.remove(&leader);
        let second = leader_of(&members);
        assert_ne!(second, leader);
        let (c, cell) = members.get_mut(&second).expect("second");
        let r = create(c, vec![topic("u", 1, &[])]);
        assert_eq!(
            codes(&r),
            vec![0],
            "{:?}",
            cell.load().topics.keys().collect::<Vec<_>>()
        );
        assert!(cell.load().topic("t").is_some());
        for (c, cell) in members.values_mut() {
            wait_for_topic(c, cell, "u");
        }
    }

    #[test]
    fn a_leader_fenced_by_its_predecessor_unfences_itself() {
        use std::time::{Duration, Instant};
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr");
        let voters: crate::quorum::Voters = [(crate::quorum::journal::raft_id(0), port)]
            .into_iter()
            .collect();
        let cell = Arc::new(MetadataCell::new(MetadataImage::empty(
            String::new(),
            0,
            "127.0.0.1:9092".parse().expect("addr"),
        )));
        let mut c = Controller::open_in_quorum(
            &config(dir.path()),
            Arc::clone(&cell),
            FakeShards::new(1),
            &QuorumMembership {
                transport: crate::quorum::Transport::static_quorum(
                    crate::quorum::journal::raft_id(0),
                    voters,
                    true,
                ),
                timing: crate::quorum::QuorumTiming {
                    tick_ms: 20,
                    election_ticks: 10,
                    heartbeat_ticks: 2,
                },
            },
        )
        .expect("open in quorum");
        let started = Instant::now();
        while c.active_controller() != Some(0) {
            assert!(started.elapsed() < Duration::from_secs(20), "never led");
            std::thread::sleep(Duration::from_millis(20));
        }
        // What the previous leader committed while this node was unreachable.
        assert!(c.commit_own(vec![
            MetadataRecord::RegisterBroker {
                node_id: 0,
                host: "127.0.0.1".into(),
                port: 9092,
                rack: None,
                listeners: Vec::new(),
            },
            MetadataRecord::FenceBroker { node_id: 0 },
        ]));
        assert!(c.state.brokers()[&0].fenced);
        c.maintain_cluster();
        assert!(
            !c.state.brokers()[&0].fenced,
            "the leader is alive by leading"
        );
        // A broker in controlled shutdown stays as it is.
        assert!(c.commit_own(vec![
            MetadataRecord::ControlledShutdown { node_id: 0 },
            MetadataRecord::FenceBroker { node_id: 0 },
        ]));
        c.maintain_cluster();
        assert!(c.state.brokers()[&0].fenced);
    }

    #[test]
    fn shard_placement_is_each_nodes_own_and_follows_its_shard_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut c, _) = open(dir.path(), 8);
        create(&mut c, vec![topic("a", 16, &[])]);
        drop(c);
        let (_, cell) = open(dir.path(), 2);
        let image = cell.load();
        let a = image.topic("a").expect("a");
        assert!(a.partitions.iter().all(|p| p.shard < 2));
        let offset = image.offset;
        drop(image);
        // Placement is not replicated: nothing was written for it.
        let (_, cell) = open(dir.path(), 3);
        assert_eq!(cell.load().offset, offset);
        assert!(cell
            .load()
            .topic("a")
            .expect("a")
            .partitions
            .iter()
            .all(|p| p.shard < 3));
    }

    #[test]
    fn producer_id_blocks_never_overlap_across_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut blocks = Vec::new();
        for _ in 0..3 {
            let (mut c, _) = open(dir.path(), 1);
            for count in [1000, 1, 50] {
                match c.handle(&AdminRequest::AllocateProducerIds { count }) {
                    AdminResponse::ProducerIds { first, count: n } => {
                        assert_eq!(n, count);
                        blocks.push((first, first + n));
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            for bad in [0, -5, crate::state::PRODUCER_ID_BLOCK_MAX + 1] {
                assert!(matches!(
                    c.handle(&AdminRequest::AllocateProducerIds { count: bad }),
                    AdminResponse::Failed { error_code, .. } if error_code == code(ResponseError::InvalidRequest)
                ));
            }
        }
        blocks.sort();
        assert_eq!(blocks[0].0, 0);
        for w in blocks.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap: {w:?}");
        }
    }

    #[test]
    fn topic_name_rules() {
        use crate::state::validate_topic_name;
        assert!(validate_topic_name("a.b_c-D9").is_ok());
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        for bad in ["", ".", "..", "a b", "a/b", "ü", &"a".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }
}
