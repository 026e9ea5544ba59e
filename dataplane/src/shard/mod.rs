//! Shards: one pinned glommio executor per core. Each partition is owned by exactly one
//! shard ([`crate::metadata::PartitionImage::shard`]); only that shard touches its log.
//! Work for another shard travels as a [`Job`] over that shard's bounded channel and its
//! answer comes back on a oneshot channel. Everyone else — other shards routing a
//! client's request to the partition's owner, the controller, the mirror manager and
//! coordinator — reaches a shard only with typed requests ([`request::ShardRequest`]);
//! the closure a job carries is the transport's, never the caller's.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::channel::oneshot;

use crate::controller::ControllerHandle;
use crate::log::{LogConfig, LogError, PartitionLog};
use crate::metadata::MetadataCell;
use crate::partition::{Leadership, Partition};
use crate::types::TopicPartition;

pub mod request;
pub use request::{MirrorObservation, ShardReply, ShardRequest, ShardRequestError, StoredRecord};

/// A unit of work run on a shard with that shard's context.
pub type Job = Box<dyn FnOnce(Rc<ShardCtx>) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// The shard is gone (shutting down); the request cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shard {0} is not running")]
pub struct ShardGone(pub usize);

/// Senders to every shard's job queue. Cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct ShardRouter {
    senders: Vec<async_channel::Sender<Job>>,
}

impl ShardRouter {
    /// A router for `shards` shards whose queues hold at most `queue_max` jobs each, and
    /// the receiving ends (one per shard, handed to [`ShardCtx::run_jobs`]).
    pub fn new(
        shards: usize,
        queue_max: usize,
    ) -> (ShardRouter, Vec<async_channel::Receiver<Job>>) {
        let (senders, receivers) = (0..shards)
            .map(|_| async_channel::bounded(queue_max.max(1)))
            .unzip();
        (ShardRouter { senders }, receivers)
    }

    pub fn shard_count(&self) -> usize {
        self.senders.len()
    }

    /// Jobs waiting in `shard`'s queue (metrics; 0 for an unknown shard).
    pub fn queue_len(&self, shard: usize) -> usize {
        self.senders.get(shard).map_or(0, |s| s.len())
    }

    /// The bound of `shard`'s queue (metrics; 0 for an unknown shard).
    pub fn queue_capacity(&self, shard: usize) -> usize {
        self.senders
            .get(shard)
            .and_then(|s| s.capacity())
            .unwrap_or(0)
    }

    /// Runs `f` on `shard` and returns its result: the in-process transport of
    /// [`ShardRouter::request`]. Waits (asynchronously) when the shard's queue is full:
    /// the bound is the back-pressure between shards.
    async fn call<R, F, Fut>(&self, shard: usize, f: F) -> Result<R, ShardGone>
    where
        R: Send + 'static,
        F: FnOnce(Rc<ShardCtx>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
    {
        let sender = self.senders.get(shard).ok_or(ShardGone(shard))?;
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |ctx| {
            Box::pin(async move {
                let _ = tx.send(f(ctx).await);
            })
        });
        sender.send(job).await.map_err(|_| ShardGone(shard))?;
        rx.await.map_err(|_| ShardGone(shard))
    }

    /// Closes every queue: shards finish the jobs already queued and stop.
    pub fn close(&self) {
        for s in &self.senders {
            s.close();
        }
    }
}

/// Broker settings the shards need.
#[derive(Debug, Clone)]
pub struct ShardSettings {
    pub data_dir: PathBuf,
    pub socket_request_max_bytes: usize,
    pub in_flight_requests_max: usize,
    pub auto_create_topics_enable: bool,
    pub num_partitions: i32,
    pub log_retention_check_interval_ms: u64,
    pub default_log_config: LogConfig,
    /// `replica.*`: how followers fetch and when they leave the ISR.
    pub replication: crate::fetcher::replica::ReplicationConfig,
    /// `log.cleaner.*`.
    pub cleaner: crate::log::cleaner::CleanerConfig,
    /// `offsets.topic.segment.bytes` and `transaction.state.log.segment.bytes`: the
    /// segment size the internal compacted topics are created with.
    pub internal_segment_bytes: (u64, u64),
    /// The broker configs this broker was started with (the config file's keys and the
    /// listeners), by Kafka name, as DescribeConfigs reports them.
    pub static_configs: std::collections::BTreeMap<String, String>,
    /// The client listeners every shard binds.
    pub listeners: Vec<crate::net::ListenerConfig>,
    /// The ACL authorizer's settings; `None`: no authorizer, every request allowed.
    pub authorizer: Option<crate::acl::AuthorizerConfig>,
}

/// Everything one shard owns.
#[derive(Debug)]
pub struct ShardCtx {
    pub id: usize,
    pub router: ShardRouter,
    pub metadata: Arc<MetadataCell>,
    pub controller: Arc<dyn ControllerHandle>,
    pub settings: Arc<ShardSettings>,
    partitions: RefCell<HashMap<TopicPartition, Rc<Partition>>>,
    /// Producer ids reserved for this shard's InitProducerId answers: [next, end).
    producer_ids: RefCell<(i64, i64)>,
    /// Serializes partition opens: start-up and the controller can ask for the same
    /// partition at once, and two opens of one directory race on its temp files.
    opening: glommio::sync::Semaphore,
    /// The group coordinators of the `__consumer_offsets` partitions this shard owns.
    group_runtime: std::cell::OnceCell<Rc<crate::group::runtime::GroupRuntime>>,
    /// The transaction coordinators of the `__transaction_state` partitions this shard
    /// owns.
    txn_runtime: std::cell::OnceCell<Rc<crate::txn::runtime::TxnRuntime>>,
    /// The control plane's mirror side (installed at start-up).
    mirror: std::cell::OnceCell<Arc<dyn crate::controller::MirrorHandle>>,
    /// Mirror fetchers of the partitions this shard owns.
    pub mirror_fetchers: crate::fetcher::MirrorFetcherManager,
    /// Replica fetchers of the partitions this shard follows, by leader.
    pub replica_fetchers: crate::fetcher::replica::ReplicaFetchers,
    /// This shard's replication throttle budgets (leader side, follower side).
    pub replication_quotas: (
        crate::fetcher::throttle::Quota,
        crate::fetcher::throttle::Quota,
    ),
    /// The log cleaner's counters and per-partition state.
    pub cleaner: crate::log::cleaner::CleanerState,
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl ShardCtx {
    pub fn new(
        id: usize,
        router: ShardRouter,
        metadata: Arc<MetadataCell>,
        controller: Arc<dyn ControllerHandle>,
        settings: Arc<ShardSettings>,
    ) -> Rc<ShardCtx> {
        Rc::new(ShardCtx {
            id,
            router,
            metadata,
            controller,
            settings,
            partitions: RefCell::new(HashMap::new()),
            producer_ids: RefCell::new((0, 0)),
            opening: glommio::sync::Semaphore::new(1),
            group_runtime: std::cell::OnceCell::new(),
            txn_runtime: std::cell::OnceCell::new(),
            mirror: std::cell::OnceCell::new(),
            mirror_fetchers: crate::fetcher::MirrorFetcherManager::default(),
            replica_fetchers: Default::default(),
            replication_quotas: Default::default(),
            cleaner: crate::log::cleaner::CleanerState::default(),
        })
    }

    /// Installs this shard's group runtime (once, at start-up).
    pub fn set_group_runtime(&self, runtime: Rc<crate::group::runtime::GroupRuntime>) {
        let _ = self.group_runtime.set(runtime);
    }

    /// This shard's group runtime; `None` before start-up installed one.
    pub fn group_runtime(&self) -> Option<Rc<crate::group::runtime::GroupRuntime>> {
        self.group_runtime.get().cloned()
    }

    /// Installs this shard's transaction runtime (once, at start-up).
    pub fn set_txn_runtime(&self, runtime: Rc<crate::txn::runtime::TxnRuntime>) {
        let _ = self.txn_runtime.set(runtime);
    }

    /// This shard's transaction runtime; `None` before start-up installed one.
    pub fn txn_runtime(&self) -> Option<Rc<crate::txn::runtime::TxnRuntime>> {
        self.txn_runtime.get().cloned()
    }

    /// Installs the handle to the control plane's mirror side (once, at start-up).
    pub fn set_mirror_handle(&self, handle: Arc<dyn crate::controller::MirrorHandle>) {
        let _ = self.mirror.set(handle);
    }

    /// The control plane's mirror side; `None` before start-up installed it.
    pub fn mirror_handle(&self) -> Option<Arc<dyn crate::controller::MirrorHandle>> {
        self.mirror.get().cloned()
    }

    /// Serves jobs from other shards (and the controller) until the queue closes.
    pub async fn run_jobs(self: Rc<Self>, jobs: async_channel::Receiver<Job>) {
        while let Ok(job) = jobs.recv().await {
            glommio::spawn_local(job(Rc::clone(&self))).detach();
        }
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<Rc<Partition>> {
        self.partitions.borrow().get(tp).cloned()
    }

    /// Every partition this shard owns.
    pub fn partitions(&self) -> Vec<Rc<Partition>> {
        self.partitions.borrow().values().cloned().collect()
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.borrow().len()
    }

    /// Opens (creating or recovering) the log of a partition this shard owns, led and
    /// followed as `leadership` says. Idempotent (an open partition only takes a newer
    /// leadership).
    pub async fn open_partition(
        self: &Rc<Self>,
        tp: TopicPartition,
        topic_id: uuid::Uuid,
        config: LogConfig,
        leadership: Leadership,
    ) -> Result<(), LogError> {
        let _permit = self.opening.acquire_permit(1).await.ok();
        if self.partition(&tp).is_some() {
            self.set_leadership(&tp, leadership);
            return Ok(());
        }
        let log = PartitionLog::open(
            &self.settings.data_dir,
            tp.clone(),
            Some(topic_id),
            config,
            now_ms(),
        )
        .await?;
        let node_id = self.metadata.load().node_id;
        let partition = Partition::with_leadership(tp.clone(), log, node_id, leadership, now_ms());
        self.partitions
            .borrow_mut()
            .entry(tp.clone())
            .or_insert_with(|| Rc::new(partition));
        if let Some(p) = self.partition(&tp) {
            crate::fetcher::replica::ReplicaFetchers::follow(self, &tp, &p.leadership());
        }
        Ok(())
    }

    /// The controller committed `leadership` for `tp`: the partition takes it (if newer)
    /// and is followed from its leader, or from no one when this node leads.
    pub fn set_leadership(self: &Rc<Self>, tp: &TopicPartition, leadership: Leadership) {
        let Some(p) = self.partition(tp) else {
            return;
        };
        if p.set_leadership(leadership, now_ms()) {
            let now = p.leadership();
            tracing::debug!(%tp, leader = now.leader, epoch = now.leader_epoch.0, isr = ?now.isr, "leadership changed");
            // A smaller ISR can move the high watermark (and so complete produces
            // waiting for acks=all): the writer's drop works it out.
            let moved = Rc::clone(&p);
            glommio::spawn_local(async move {
                drop(moved.write().await);
            })
            .detach();
        }
        crate::fetcher::replica::ReplicaFetchers::follow(self, tp, &p.leadership());
        if !p.is_leader() {
            // Only the leader runs a partition's mirror fetcher (reference §6.1): a
            // follower replicates the mirrored batches from the new leader instead, and
            // its gate is set again if it leads again.
            p.set_mirror_gate(None);
            if self.mirror_fetchers.status(tp).is_some() {
                let ctx = Rc::clone(self);
                let tp = tp.clone();
                glommio::spawn_local(async move {
                    crate::fetcher::MirrorFetcherManager::remove_partition(&ctx, &tp).await;
                    tracing::info!(%tp, "mirror fetcher stopped: this broker no longer leads the partition");
                })
                .detach();
            }
        }
    }

    /// Deletes a partition's log and directory.
    pub async fn delete_partition(&self, tp: &TopicPartition) -> Result<(), LogError> {
        let Some(p) = self.partitions.borrow_mut().remove(tp) else {
            return Ok(());
        };
        let guard = p.write().await.map_err(|_| closed_lock(tp))?;
        drop(guard);
        match Rc::try_unwrap(p) {
            Ok(owned) => {
                let log = owned.into_log().map_err(|_| closed_lock(tp))?;
                log.delete().await
            }
            Err(_) => {
                // Still referenced by an in-flight request: it finishes against the old
                // handle; the directory is removed when the last user lets go.
                tracing::warn!(%tp, "partition deleted while in use; files removed on next start");
                Ok(())
            }
        }
    }

    /// Applies a new log config (topic config change).
    pub async fn update_config(&self, tp: &TopicPartition, config: LogConfig) {
        if let Some(p) = self.partition(tp) {
            if let Ok(mut log) = p.write().await {
                log.set_config(config);
            }
        }
    }

    /// Closes every log cleanly (flush, snapshots, clean-shutdown marker).
    pub async fn close_all(&self) {
        let all: Vec<(TopicPartition, Rc<Partition>)> =
            self.partitions.borrow_mut().drain().collect();
        for (tp, p) in all {
            if let Ok(g) = p.write().await {
                drop(g);
            }
            match Rc::try_unwrap(p) {
                Ok(owned) => match owned.into_log() {
                    Ok(log) => {
                        if let Err(e) = log.close(now_ms()).await {
                            tracing::error!(%tp, error = %e, "clean close failed");
                        }
                    }
                    Err(_) => tracing::error!(%tp, "log lock closed at shutdown"),
                },
                Err(_) => {
                    tracing::warn!(%tp, "partition still in use at shutdown; next start recovers it")
                }
            }
        }
    }

    /// Retention and producer-id expiration for every owned partition.
    pub async fn housekeeping(&self) {
        let all: Vec<(TopicPartition, Rc<Partition>)> = self
            .partitions
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), Rc::clone(v)))
            .collect();
        let now = now_ms();
        for (tp, p) in all {
            if let Ok(mut log) = p.write().await {
                if let Err(e) = log.delete_old_segments(now).await {
                    tracing::error!(%tp, error = %e, "retention failed");
                }
                log.remove_expired_producers(now);
            }
        }
    }

    /// Hands out one producer id, asking the controller for a new block when needed.
    pub async fn next_producer_id(&self) -> Result<i64, i16> {
        {
            let mut ids = self.producer_ids.borrow_mut();
            if ids.0 < ids.1 {
                ids.0 += 1;
                return Ok(ids.0 - 1);
            }
        }
        let rx = self
            .controller
            .submit(crate::controller::AdminRequest::AllocateProducerIds { count: 1000 });
        match rx.await {
            Ok(crate::controller::AdminResponse::ProducerIds { first, count }) => {
                let mut ids = self.producer_ids.borrow_mut();
                *ids = (first + 1, first + count);
                Ok(first)
            }
            Ok(crate::controller::AdminResponse::Failed { error_code, .. }) => Err(error_code),
            _ => Err(kafka_protocol::ResponseError::UnknownServerError.code()),
        }
    }
}

fn closed_lock(tp: &TopicPartition) -> LogError {
    LogError::CorruptMetadata {
        tp: tp.clone(),
        path: PathBuf::new(),
        reason: "partition lock closed".to_string(),
    }
}
