//! The `MirrorStateCoordinator`: the state machine over `__mirror_state`
//! (`kip1279-reference.md` §5.4, fencing as §4.6 recommends).
//!
//! It runs on a control-plane thread (a local executor: `Rc`, `RefCell`, no `Send`) and
//! never touches a log itself. The `__mirror_state` partitions are owned by data-plane
//! shards; appends and replays travel to the owning shard as jobs (through a
//! [`MirrorStateLog`], in production [`ShardMirrorStateLog`] over the
//! [`ShardRouter`]). What the log holds is mirrored in memory in a [`MirrorStateTable`],
//! which answers reads.
//!
//! Rules:
//! - Topics in requests are addressed by name and turned into topic ids through the
//!   current metadata image; keys carry topic ids.
//! - A `__mirror_state` partition is replayed (loaded) before its first read or write,
//!   and every write and load of one partition runs under that partition's lock, so
//!   writes to one key are serialized, fencing checks see every earlier write, and a
//!   load never races an append.
//! - The table changes only after the append succeeded.
//! - A state write must carry a leader epoch no older than the stored one and the state
//!   epoch it read; the stored state epoch goes up by one on every write.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use dataplane::metadata::{MetadataCell, TopicImage};
use dataplane::shard::{ShardReply, ShardRequest, ShardRequestError, ShardRouter};
use dataplane::types::TopicPartition;
use dataplane::wire::mirror::{
    errors, MirrorPartitionState, MirrorStateEntry, MirrorStatesTopic, ReadMirrorStatesRequest,
    ReadMirrorStatesResponse, ReadMirrorStatesTopic, WriteMirrorStatesRequest,
    WriteMirrorStatesResponse, WriteMirrorStatesTopicResult,
};
use futures::future::LocalBoxFuture;
use futures::lock::Mutex as AsyncMutex;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::records::{
    decode_record, encode_value, partition_for, MirrorRecordError, MirrorRecordKind,
    MirrorStateKey, MirrorStateValue, StateValue,
};

/// The internal topic holding mirror partition states and LMEs.
pub const MIRROR_STATE_TOPIC: &str = "__mirror_state";

/// Records in one appended batch; a write or tombstone pass with more is split (each
/// batch is atomic, the whole call is not).
pub const RECORDS_PER_BATCH_MAX: usize = 1000;

/// A record as the coordinator hands it to the log: key bytes and value bytes (`None`:
/// a tombstone).
pub type KeyedRecord = (Vec<u8>, Option<Vec<u8>>);

/// Why the coordinator could not load, read or write a `__mirror_state` partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinatorError {
    #[error("{MIRROR_STATE_TOPIC} does not exist yet")]
    TopicMissing,
    #[error("shard {shard} is not running")]
    ShardGone { shard: usize },
    #[error("{tp} is not open on shard {shard}")]
    NotOpen { tp: TopicPartition, shard: usize },
    #[error("{tp}: the partition log is closing")]
    LogClosed { tp: TopicPartition },
    /// The partition log refused or failed the operation; `error_code` is the data
    /// plane's mapping of the log error.
    #[error("{tp}: {message}")]
    Log {
        tp: TopicPartition,
        error_code: i16,
        message: String,
    },
    #[error(transparent)]
    Record(#[from] MirrorRecordError),
    /// Another broker leads this `__mirror_state` partition (or none does): its
    /// coordinator is there.
    #[error("{MIRROR_STATE_TOPIC}-{partition} is not led by this broker")]
    NotCoordinator { partition: i32 },
}

impl CoordinatorError {
    /// The Kafka error code a ReadMirrorStates/WriteMirrorStates caller gets.
    pub fn error_code(&self) -> i16 {
        match self {
            CoordinatorError::TopicMissing
            | CoordinatorError::ShardGone { .. }
            | CoordinatorError::NotOpen { .. }
            | CoordinatorError::LogClosed { .. } => ResponseError::CoordinatorNotAvailable.code(),
            CoordinatorError::Log { error_code, .. } => *error_code,
            CoordinatorError::Record(_) => ResponseError::InvalidRequest.code(),
            CoordinatorError::NotCoordinator { .. } => ResponseError::NotCoordinator.code(),
        }
    }
}

/// What `__mirror_state` holds for one (mirror, topic id, partition): the values of its
/// two records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredState {
    /// The LastMirroredEpochs record: (epoch, offset; -1 unknown).
    pub last_mirrored_epoch: Option<(i32, i64)>,
    /// The MirrorPartitionState record.
    pub state: Option<StateValue>,
}

impl StoredState {
    fn is_empty(&self) -> bool {
        self.last_mirrored_epoch.is_none() && self.state.is_none()
    }

    fn apply(&mut self, kind: MirrorRecordKind, value: Option<&MirrorStateValue>) {
        match (kind, value) {
            (
                _,
                Some(MirrorStateValue::Lme {
                    last_mirrored_epoch,
                    last_mirrored_offset,
                }),
            ) => self.last_mirrored_epoch = Some((*last_mirrored_epoch, *last_mirrored_offset)),
            (_, Some(MirrorStateValue::State(v))) => self.state = Some(v.clone()),
            (MirrorRecordKind::Lme, None) => self.last_mirrored_epoch = None,
            (MirrorRecordKind::State, None) => self.state = None,
        }
    }

    /// The entry ReadMirrorStates answers with.
    pub fn to_entry(&self, partition: i32) -> MirrorStateEntry {
        let mut entry = MirrorStateEntry {
            partition,
            last_mirrored_epoch: self.last_mirrored_epoch.map_or(-1, |l| l.0),
            last_mirrored_offset: self.last_mirrored_epoch.map_or(-1, |l| l.1),
            ..MirrorStateEntry::default()
        };
        if let Some(s) = &self.state {
            entry.state = s.state.code();
            entry.previous_state = s.previous_state.code();
            entry.retry_attempt = s.retry_attempt;
            entry.error_message = s.error_message.clone();
            entry.leader_epoch = s.leader_epoch;
            entry.state_epoch = s.state_epoch;
            entry.truncated_records = s.truncated_records;
        }
        entry
    }

    fn kinds(&self) -> impl Iterator<Item = MirrorRecordKind> {
        let lme = self.last_mirrored_epoch.map(|_| MirrorRecordKind::Lme);
        let state = self.state.as_ref().map(|_| MirrorRecordKind::State);
        lme.into_iter().chain(state)
    }
}

type TableKey = (String, Uuid, i32);

/// In-memory state derived from `__mirror_state` records: the latest value of every key,
/// with tombstones applied. Built by replaying a partition (on its shard) and kept up to
/// date by the coordinator's writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorStateTable {
    entries: BTreeMap<TableKey, StoredState>,
}

impl MirrorStateTable {
    /// Applies one record: a value replaces the key's value, a tombstone removes it.
    pub fn apply(&mut self, key: &MirrorStateKey, value: Option<&MirrorStateValue>) {
        let table_key = (key.mirror.clone(), key.topic_id, key.partition);
        let stored = self.entries.entry(table_key.clone()).or_default();
        stored.apply(key.kind, value);
        if stored.is_empty() {
            self.entries.remove(&table_key);
        }
    }

    /// Decodes and applies one record as read from the log.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), MirrorRecordError> {
        let (key, value) = decode_record(key, value)?;
        self.apply(&key, value.as_ref());
        Ok(())
    }

    pub fn get(&self, mirror: &str, topic_id: Uuid, partition: i32) -> Option<&StoredState> {
        self.entries.get(&(mirror.to_string(), topic_id, partition))
    }

    /// Every (mirror, topic id, partition) with something stored, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Uuid, i32, &StoredState)> {
        self.entries
            .iter()
            .map(|((m, id, p), s)| (m.as_str(), *id, *p, s))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn merge(&mut self, other: MirrorStateTable) {
        self.entries.extend(other.entries);
    }
}

/// Where the coordinator's records live. Production: [`ShardMirrorStateLog`]; tests can
/// supply an in-memory log.
pub trait MirrorStateLog: std::fmt::Debug {
    /// Appends `records` (at most [`RECORDS_PER_BATCH_MAX`]) to `tp`, owned by `shard`,
    /// as one uncompressed batch with the coordinator's append kind.
    fn append(
        &self,
        tp: TopicPartition,
        shard: usize,
        records: Vec<KeyedRecord>,
    ) -> LocalBoxFuture<'_, Result<(), CoordinatorError>>;

    /// Replays `tp`, owned by `shard`, from its log start: the resulting table and how
    /// many records were read. Undecodable records are logged and skipped.
    fn replay(
        &self,
        tp: TopicPartition,
        shard: usize,
    ) -> LocalBoxFuture<'_, Result<(MirrorStateTable, usize), CoordinatorError>>;
}

/// The `__mirror_state` partitions on the data-plane shards, reached through the router.
#[derive(Debug, Clone)]
pub struct ShardMirrorStateLog {
    router: ShardRouter,
}

impl ShardMirrorStateLog {
    pub fn new(router: ShardRouter) -> Self {
        ShardMirrorStateLog { router }
    }
}

/// A shard's refusal, in the coordinator's terms.
fn shard_error(tp: &TopicPartition, e: ShardRequestError) -> CoordinatorError {
    match e {
        ShardRequestError::NotOpen { tp, shard } => CoordinatorError::NotOpen { tp, shard },
        ShardRequestError::Partition(_) => CoordinatorError::LogClosed { tp: tp.clone() },
        ShardRequestError::Gone(g) => CoordinatorError::ShardGone { shard: g.0 },
        ShardRequestError::Log {
            error_code,
            message,
        } => CoordinatorError::Log {
            tp: tp.clone(),
            error_code,
            message,
        },
        ShardRequestError::Step(message) => CoordinatorError::Log {
            tp: tp.clone(),
            error_code: ResponseError::UnknownServerError.code(),
            message,
        },
    }
}

impl MirrorStateLog for ShardMirrorStateLog {
    fn append(
        &self,
        tp: TopicPartition,
        shard: usize,
        records: Vec<KeyedRecord>,
    ) -> LocalBoxFuture<'_, Result<(), CoordinatorError>> {
        Box::pin(async move {
            if records.is_empty() {
                return Ok(());
            }
            let batch = dataplane::coordinator_log::batch_of(
                records
                    .iter()
                    .map(|(key, value)| (key.as_slice(), value.as_deref())),
            );
            self.router
                .request(
                    shard,
                    ShardRequest::AppendBatch {
                        tp: tp.clone(),
                        batch,
                    },
                )
                .await
                .map(|_| ())
                .map_err(|e| shard_error(&tp, e))
        })
    }

    fn replay(
        &self,
        tp: TopicPartition,
        shard: usize,
    ) -> LocalBoxFuture<'_, Result<(MirrorStateTable, usize), CoordinatorError>> {
        Box::pin(async move {
            let reply = self
                .router
                .request(shard, ShardRequest::ReadRecords { tp: tp.clone() })
                .await
                .map_err(|e| shard_error(&tp, e))?;
            let ShardReply::Records(records) = reply else {
                return Err(shard_error(
                    &tp,
                    ShardRequestError::Step(format!("unexpected answer {reply:?}")),
                ));
            };
            let mut table = MirrorStateTable::default();
            let mut count = 0usize;
            for r in records {
                let Some(key) = r.key else { continue };
                count += 1;
                if let Err(e) = table.replay(&key, r.value.as_deref()) {
                    tracing::warn!(%tp, offset = r.offset, error = %e, "undecodable __mirror_state record skipped");
                }
            }
            Ok((table, count))
        })
    }
}

/// Which `__mirror_state` the table was loaded from.
#[derive(Debug, Default)]
struct Loaded {
    /// The topic id of `__mirror_state` (a deleted and recreated topic starts over).
    topic_id: Option<Uuid>,
    /// The loaded partitions and the leader epoch each was loaded at: a partition led
    /// again after another broker led it is loaded again (that broker wrote meanwhile).
    partitions: BTreeMap<i32, i32>,
}

/// The leader epoch of `partition` of the state topic when this broker leads it.
fn led_epoch(
    image: &dataplane::metadata::MetadataImage,
    topic: &TopicImage,
    partition: i32,
) -> Option<i32> {
    topic
        .partitions
        .iter()
        .find(|p| p.partition == partition)
        .filter(|p| p.leader == image.node_id)
        .map(|p| p.leader_epoch)
}

/// One partition of a WriteMirrorStates request, located in the request.
struct WriteItem<'a> {
    topic_index: usize,
    partition_index: usize,
    topic_id: Uuid,
    entry: &'a dataplane::wire::mirror::MirrorStateEntry,
}

/// The outcome of one write item: (topic index, partition index, error code, message).
type ItemOutcome = (usize, usize, i16, Option<String>);

/// A record to write, decoded: the key and its new value (`None`: a tombstone).
type Update = (MirrorStateKey, Option<MirrorStateValue>);

/// Records of several items that go into one batch, and what they change.
#[derive(Default)]
struct Chunk {
    records: Vec<KeyedRecord>,
    updates: Vec<Update>,
    items: Vec<(usize, usize)>,
}

/// The coordinator of every `__mirror_state` partition of this node (single node: all of
/// them). See the module docs for its rules.
pub struct MirrorStateCoordinator {
    log: Rc<dyn MirrorStateLog>,
    metadata: Arc<MetadataCell>,
    table: RefCell<MirrorStateTable>,
    loaded: RefCell<Loaded>,
    /// `load` has run at least once.
    load_called: Cell<bool>,
    /// One lock per `__mirror_state` partition: loads and writes of a partition run one
    /// at a time.
    locks: RefCell<HashMap<i32, Rc<AsyncMutex<()>>>>,
}

impl std::fmt::Debug for MirrorStateCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorStateCoordinator")
            .field("log", &self.log)
            .field("entries", &self.table.borrow().len())
            .field("loaded", &*self.loaded.borrow())
            .finish_non_exhaustive()
    }
}

fn unknown_topic() -> i16 {
    ResponseError::UnknownTopicOrPartition.code()
}

fn has_partition(topic: &TopicImage, partition: i32) -> bool {
    topic.partitions.iter().any(|p| p.partition == partition)
}

impl MirrorStateCoordinator {
    /// A coordinator whose records live on the shards behind `router`.
    pub fn new(router: ShardRouter, metadata: Arc<MetadataCell>) -> Rc<Self> {
        Self::with_log(Rc::new(ShardMirrorStateLog::new(router)), metadata)
    }

    /// A coordinator over any [`MirrorStateLog`].
    pub fn with_log(log: Rc<dyn MirrorStateLog>, metadata: Arc<MetadataCell>) -> Rc<Self> {
        Rc::new(MirrorStateCoordinator {
            log,
            metadata,
            table: RefCell::new(MirrorStateTable::default()),
            loaded: RefCell::new(Loaded::default()),
            load_called: Cell::new(false),
            locks: RefCell::new(HashMap::new()),
        })
    }

    fn state_topic(&self) -> Option<Arc<TopicImage>> {
        self.metadata.load().topic(MIRROR_STATE_TOPIC).cloned()
    }

    fn lock(&self, partition: i32) -> Rc<AsyncMutex<()>> {
        Rc::clone(
            self.locks
                .borrow_mut()
                .entry(partition)
                .or_insert_with(|| Rc::new(AsyncMutex::new(()))),
        )
    }

    /// Replays every `__mirror_state` partition this broker leads that is not loaded
    /// yet at its current leader epoch (nothing to do while the topic does not exist);
    /// [`resign`](Self::resign) drops the ones it no longer leads. Idempotent; call it
    /// again after leadership changes. Partitions that fail are reported (the first
    /// error) and retried by the next call or on first use.
    pub async fn load(&self) -> Result<(), CoordinatorError> {
        self.load_called.set(true);
        let Some(topic) = self.state_topic() else {
            tracing::debug!("{MIRROR_STATE_TOPIC} does not exist yet: nothing to load");
            return Ok(());
        };
        let image = self.metadata.load();
        let mut first_error = None;
        for p in topic.partitions.iter().map(|p| p.partition) {
            if led_epoch(&image, &topic, p).is_none() {
                continue;
            }
            let lock = self.lock(p);
            let _guard = lock.lock().await;
            if let Err(e) = self.load_partition_locked(&topic, p).await {
                // Right after the topic is created the image names partitions that the
                // shards are still opening: retried by the next call, not worth a warning.
                if matches!(
                    e,
                    CoordinatorError::NotOpen { .. } | CoordinatorError::NotCoordinator { .. }
                ) {
                    tracing::debug!(partition = p, error = %e, "__mirror_state partition not open yet");
                } else {
                    tracing::warn!(partition = p, error = %e, "cannot load __mirror_state partition");
                }
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Drops what this broker holds for the `__mirror_state` partitions it no longer
    /// leads, or leads at a newer epoch than it loaded them at (reference §5.4: on
    /// resignation the partition's state is dropped). Returns how many were dropped.
    pub fn resign(&self) -> usize {
        let image = self.metadata.load();
        let Some(topic) = image.topic(MIRROR_STATE_TOPIC).cloned() else {
            return 0;
        };
        let num_partitions = topic.partitions.len() as i32;
        let mut loaded = self.loaded.borrow_mut();
        if loaded.topic_id != Some(topic.id) {
            return 0;
        }
        let gone: Vec<i32> = loaded
            .partitions
            .iter()
            .filter(|(p, at)| led_epoch(&image, &topic, **p) != Some(**at))
            .map(|(p, _)| *p)
            .collect();
        if gone.is_empty() {
            return 0;
        }
        for p in &gone {
            loaded.partitions.remove(p);
            tracing::info!(partition = p, "mirror state coordinator resigned: another broker leads {MIRROR_STATE_TOPIC}-{p} now");
        }
        self.table
            .borrow_mut()
            .entries
            .retain(|(m, id, p), _| !gone.contains(&partition_for(m, *id, *p, num_partitions)));
        gone.len()
    }

    /// `load` has run and every `__mirror_state` partition this broker leads in the
    /// current image is loaded at its leader epoch (true while the topic does not
    /// exist: there is nothing to load).
    pub fn is_loaded(&self) -> bool {
        if !self.load_called.get() {
            return false;
        }
        let Some(topic) = self.state_topic() else {
            return true;
        };
        let image = self.metadata.load();
        let loaded = self.loaded.borrow();
        loaded.topic_id == Some(topic.id)
            && topic.partitions.iter().all(|p| {
                led_epoch(&image, &topic, p.partition)
                    .is_none_or(|epoch| loaded.partitions.get(&p.partition) == Some(&epoch))
            })
    }

    /// `partition` is loaded at the leader epoch this broker leads it at now.
    fn is_current(&self, topic: &TopicImage, partition: i32) -> bool {
        let image = self.metadata.load();
        let loaded = self.loaded.borrow();
        loaded.topic_id == Some(topic.id)
            && led_epoch(&image, topic, partition)
                .is_some_and(|epoch| loaded.partitions.get(&partition) == Some(&epoch))
    }

    /// Loads `partition` unless it is loaded at its current leader epoch; the caller
    /// holds its lock. A partition another broker leads is refused (NOT_COORDINATOR).
    async fn load_partition_locked(
        &self,
        topic: &TopicImage,
        partition: i32,
    ) -> Result<(), CoordinatorError> {
        let image = self.metadata.load();
        let Some(epoch) = led_epoch(&image, topic, partition) else {
            return Err(CoordinatorError::NotCoordinator { partition });
        };
        {
            let mut loaded = self.loaded.borrow_mut();
            if loaded.topic_id != Some(topic.id) {
                if let Some(old) = loaded.topic_id {
                    tracing::warn!(%old, new = %topic.id, "{MIRROR_STATE_TOPIC} was recreated: forgetting its old state");
                    self.table.borrow_mut().entries.clear();
                }
                *loaded = Loaded {
                    topic_id: Some(topic.id),
                    partitions: BTreeMap::new(),
                };
            }
            if loaded.partitions.get(&partition) == Some(&epoch) {
                return Ok(());
            }
        }
        let shard = topic
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .map(|p| p.shard)
            .ok_or(CoordinatorError::TopicMissing)?;
        let tp = TopicPartition::new(MIRROR_STATE_TOPIC, partition);
        let (replayed, records) = self.log.replay(tp.clone(), shard).await?;
        let mut loaded = self.loaded.borrow_mut();
        if loaded.topic_id != Some(topic.id) {
            // The topic was recreated while this replay ran: the next use loads again.
            return Err(CoordinatorError::TopicMissing);
        }
        if led_epoch(&self.metadata.load(), topic, partition) != Some(epoch) {
            // Leadership moved while the replay ran: the next use loads again.
            return Err(CoordinatorError::NotCoordinator { partition });
        }
        let num_partitions = topic.partitions.len() as i32;
        let keys = replayed.len();
        let mut table = self.table.borrow_mut();
        table
            .entries
            .retain(|(m, id, p), _| partition_for(m, *id, *p, num_partitions) != partition);
        table.merge(replayed);
        loaded.partitions.insert(partition, epoch);
        tracing::info!(%tp, records, keys, leader_epoch = epoch, "mirror state coordinator loaded");
        Ok(())
    }

    /// Loads the `__mirror_state` partition of a key unless it is loaded.
    async fn ensure_loaded(
        &self,
        topic: &TopicImage,
        partition: i32,
    ) -> Result<(), CoordinatorError> {
        if self.is_current(topic, partition) {
            return Ok(());
        }
        let lock = self.lock(partition);
        let _guard = lock.lock().await;
        self.load_partition_locked(topic, partition).await
    }

    /// ReadMirrorStates: the stored entries of the asked partitions. Missing keys answer
    /// the UNKNOWN default; unknown topic names UNKNOWN_TOPIC_OR_PARTITION.
    pub async fn read(&self, req: &ReadMirrorStatesRequest) -> ReadMirrorStatesResponse {
        let image = self.metadata.load();
        let state_topic = image.topic(MIRROR_STATE_TOPIC).cloned();
        let mut topics = Vec::with_capacity(req.topics.len());
        for ReadMirrorStatesTopic { name, partitions } in &req.topics {
            let topic = image.topic(name);
            let mut entries = Vec::with_capacity(partitions.len());
            for &partition in partitions {
                let failed = |error_code| MirrorStateEntry {
                    partition,
                    error_code,
                    ..MirrorStateEntry::default()
                };
                let entry = match (topic, &state_topic) {
                    (Some(t), _) if !has_partition(t, partition) => failed(unknown_topic()),
                    (None, _) => failed(unknown_topic()),
                    (Some(_), None) => MirrorStateEntry {
                        partition,
                        ..MirrorStateEntry::default()
                    },
                    (Some(t), Some(st)) => {
                        let n = st.partitions.len() as i32;
                        let p = partition_for(&req.mirror_name, t.id, partition, n);
                        match self.ensure_loaded(st, p).await {
                            Ok(()) => self.entry(&req.mirror_name, t.id, partition),
                            Err(e) => failed(e.error_code()),
                        }
                    }
                };
                entries.push(entry);
            }
            topics.push(MirrorStatesTopic {
                name: name.clone(),
                partitions: entries,
            });
        }
        ReadMirrorStatesResponse {
            throttle_time_ms: 0,
            error_code: 0,
            topics,
        }
    }

    /// WriteMirrorStates: per partition, a state record when `state` is not UNKNOWN
    /// (fenced by leader epoch and state epoch) and an LME record when
    /// `last_mirrored_epoch >= 0`. The records of one `__mirror_state` partition go in
    /// one batch; the partitions are written concurrently. `stopped_topics` is not used
    /// (upstream passes it empty too).
    pub async fn write(&self, req: &WriteMirrorStatesRequest) -> WriteMirrorStatesResponse {
        let mut results: Vec<WriteMirrorStatesTopicResult> = req.results(0, None);
        let image = self.metadata.load();
        let Some(state_topic) = image.topic(MIRROR_STATE_TOPIC).cloned() else {
            let code = ResponseError::CoordinatorNotAvailable.code();
            for r in results.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                r.error_code = code;
                r.error_message = Some(format!("{MIRROR_STATE_TOPIC} does not exist yet"));
            }
            return WriteMirrorStatesResponse {
                throttle_time_ms: 0,
                topics: results,
            };
        };
        let n = state_topic.partitions.len() as i32;
        let mut groups: BTreeMap<i32, Vec<WriteItem<'_>>> = BTreeMap::new();
        for (ti, t) in req.topics.iter().enumerate() {
            let topic = image.topic(&t.name);
            for (pi, entry) in t.partitions.iter().enumerate() {
                match topic {
                    Some(topic) if has_partition(topic, entry.partition) => {
                        let p = partition_for(&req.mirror_name, topic.id, entry.partition, n);
                        groups.entry(p).or_default().push(WriteItem {
                            topic_index: ti,
                            partition_index: pi,
                            topic_id: topic.id,
                            entry,
                        });
                    }
                    _ => {
                        let r = &mut results[ti].partitions[pi];
                        r.error_code = unknown_topic();
                        r.error_message = Some(format!(
                            "unknown topic or partition {}-{}",
                            t.name, entry.partition
                        ));
                    }
                }
            }
        }
        let writes = groups
            .into_iter()
            .map(|(p, items)| self.write_partition(&state_topic, p, &req.mirror_name, items));
        for outcomes in futures::future::join_all(writes).await {
            for (ti, pi, error_code, error_message) in outcomes {
                let r = &mut results[ti].partitions[pi];
                r.error_code = error_code;
                r.error_message = error_message;
            }
        }
        WriteMirrorStatesResponse {
            throttle_time_ms: 0,
            topics: results,
        }
    }

    /// Writes the items whose keys live in `__mirror_state` partition `partition`.
    async fn write_partition(
        &self,
        state_topic: &TopicImage,
        partition: i32,
        mirror: &str,
        items: Vec<WriteItem<'_>>,
    ) -> Vec<ItemOutcome> {
        let lock = self.lock(partition);
        let _guard = lock.lock().await;
        if let Err(e) = self.load_partition_locked(state_topic, partition).await {
            let (code, message) = (e.error_code(), e.to_string());
            return items
                .iter()
                .map(|i| {
                    (
                        i.topic_index,
                        i.partition_index,
                        code,
                        Some(message.clone()),
                    )
                })
                .collect();
        }
        let mut outcomes = Vec::with_capacity(items.len());
        // Later items of this request see the effect of earlier ones on the same key.
        let mut pending: HashMap<TableKey, StoredState> = HashMap::new();
        let mut chunks: Vec<Chunk> = vec![Chunk::default()];
        for item in &items {
            let table_key = (mirror.to_string(), item.topic_id, item.entry.partition);
            let stored = pending.get(&table_key).cloned().unwrap_or_else(|| {
                self.table
                    .borrow()
                    .entries
                    .get(&table_key)
                    .cloned()
                    .unwrap_or_default()
            });
            let updates = match validate(mirror, item, &stored) {
                Ok(u) => u,
                Err((code, message)) => {
                    outcomes.push((item.topic_index, item.partition_index, code, Some(message)));
                    continue;
                }
            };
            let mut records = Vec::with_capacity(updates.len());
            let mut encode_error = None;
            for (key, value) in &updates {
                match key.encode() {
                    Ok(k) => records.push((k, value.as_ref().map(encode_value))),
                    Err(e) => encode_error = Some(CoordinatorError::from(e)),
                }
            }
            if let Some(e) = encode_error {
                outcomes.push((
                    item.topic_index,
                    item.partition_index,
                    e.error_code(),
                    Some(e.to_string()),
                ));
                continue;
            }
            let mut next = stored;
            for (key, value) in &updates {
                next.apply(key.kind, value.as_ref());
            }
            pending.insert(table_key, next);
            let fits = chunks
                .last()
                .is_some_and(|c| c.records.len() + records.len() <= RECORDS_PER_BATCH_MAX);
            if !fits {
                chunks.push(Chunk::default());
            }
            if let Some(chunk) = chunks.last_mut() {
                chunk.records.extend(records);
                chunk.updates.extend(updates);
                chunk.items.push((item.topic_index, item.partition_index));
            }
        }
        let tp = TopicPartition::new(MIRROR_STATE_TOPIC, partition);
        let shard = state_topic
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .map_or(0, |p| p.shard);
        let mut failed: Option<CoordinatorError> = None;
        for chunk in chunks {
            if failed.is_none() && !chunk.records.is_empty() {
                match self.log.append(tp.clone(), shard, chunk.records).await {
                    Ok(()) => {
                        let mut table = self.table.borrow_mut();
                        for (key, value) in &chunk.updates {
                            table.apply(key, value.as_ref());
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%tp, error = %e, "mirror state write failed");
                        failed = Some(e);
                    }
                }
            }
            // A failed batch fails the later ones too: they were checked against its
            // effects.
            let (code, message) = failed
                .as_ref()
                .map_or((0, None), |e| (e.error_code(), Some(e.to_string())));
            outcomes.extend(
                chunk
                    .items
                    .into_iter()
                    .map(|(ti, pi)| (ti, pi, code, message.clone())),
            );
        }
        outcomes
    }

    /// Tombstones every key (both kinds) of `mirror`; returns how many keys. Partitions
    /// are done one at a time; the first failure stops the pass (the caller retries).
    pub async fn tombstone_mirror(&self, mirror: &str) -> Result<usize, CoordinatorError> {
        self.tombstone_where(&|m, _| m == mirror).await
    }

    /// Tombstones the keys of one topic of `mirror` (the destination topic was deleted,
    /// reference §11 #30).
    pub async fn tombstone_topic(
        &self,
        mirror: &str,
        topic_id: Uuid,
    ) -> Result<usize, CoordinatorError> {
        self.tombstone_where(&|m, id| m == mirror && id == topic_id)
            .await
    }

    /// (mirror, topic id) pairs with keys in the loaded table.
    pub fn topics(&self) -> BTreeSet<(String, Uuid)> {
        self.table
            .borrow()
            .iter()
            .map(|(m, id, _, _)| (m.to_string(), id))
            .collect()
    }

    async fn tombstone_where(
        &self,
        select: &dyn Fn(&str, Uuid) -> bool,
    ) -> Result<usize, CoordinatorError> {
        let Some(topic) = self.state_topic() else {
            return Ok(0);
        };
        let n = topic.partitions.len() as i32;
        let image = self.metadata.load();
        let mut total = 0;
        // Each coordinator tombstones the keys of the partitions it leads (reference
        // §5.4): the others' leaders do theirs.
        for pi in topic
            .partitions
            .iter()
            .filter(|pi| led_epoch(&image, &topic, pi.partition).is_some())
        {
            let p = pi.partition;
            let lock = self.lock(p);
            let _guard = lock.lock().await;
            self.load_partition_locked(&topic, p).await?;
            let keys: Vec<MirrorStateKey> = self
                .table
                .borrow()
                .iter()
                .filter(|(m, id, part, _)| select(m, *id) && partition_for(m, *id, *part, n) == p)
                .flat_map(|(m, id, part, stored)| {
                    stored
                        .kinds()
                        .map(move |kind| MirrorStateKey::new(kind, m, id, part))
                })
                .collect();
            let tp = TopicPartition::new(MIRROR_STATE_TOPIC, p);
            for chunk in keys.chunks(RECORDS_PER_BATCH_MAX) {
                let records = chunk
                    .iter()
                    .map(|k| k.encode().map(|k| (k, None)))
                    .collect::<Result<Vec<KeyedRecord>, _>>()?;
                self.log.append(tp.clone(), pi.shard, records).await?;
                let mut table = self.table.borrow_mut();
                for key in chunk {
                    table.apply(key, None);
                }
                total += chunk.len();
            }
        }
        Ok(total)
    }

    /// The cached entry of a partition (the UNKNOWN default when there is none).
    pub fn entry(&self, mirror: &str, topic_id: Uuid, partition: i32) -> MirrorStateEntry {
        match self.table.borrow().get(mirror, topic_id, partition) {
            Some(stored) => stored.to_entry(partition),
            None => MirrorStateEntry {
                partition,
                ..MirrorStateEntry::default()
            },
        }
    }

    /// Every cached (topic id, partition, entry) of a mirror, in order.
    pub fn entries_of(&self, mirror: &str) -> Vec<(Uuid, i32, MirrorStateEntry)> {
        self.table
            .borrow()
            .iter()
            .filter(|(m, _, _, _)| *m == mirror)
            .map(|(_, id, p, stored)| (id, p, stored.to_entry(p)))
            .collect()
    }

    /// Loads the `__mirror_state` partition that holds (mirror, topic id, partition)
    /// unless it is loaded, so that [`lme`](Self::lme) answers from the stored state and
    /// not from an empty table (audit B-7). No state topic: nothing was ever recorded.
    pub async fn ensure_loaded_for(
        &self,
        mirror: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<(), CoordinatorError> {
        let Some(topic) = self.state_topic() else {
            return Ok(());
        };
        let state_partition =
            partition_for(mirror, topic_id, partition, topic.partitions.len() as i32);
        self.ensure_loaded(&topic, state_partition).await
    }

    /// The `__mirror_state` partition that holds (mirror, topic id, partition) is loaded
    /// (true while the topic does not exist: nothing was ever recorded).
    pub fn is_loaded_for(&self, mirror: &str, topic_id: Uuid, partition: i32) -> bool {
        let Some(topic) = self.state_topic() else {
            return true;
        };
        let state_partition =
            partition_for(mirror, topic_id, partition, topic.partitions.len() as i32);
        self.is_current(&topic, state_partition)
    }

    /// The mirrors that have keys in the loaded part of the table.
    pub fn mirror_names(&self) -> BTreeSet<String> {
        self.table
            .borrow()
            .iter()
            .map(|(m, _, _, _)| m.to_string())
            .collect()
    }

    /// The LME recorded for (mirror, topic id, partition), -1 if none.
    pub fn lme(&self, mirror: &str, topic_id: Uuid, partition: i32) -> i32 {
        self.lme_position(mirror, topic_id, partition).0
    }

    /// The LME and the offset recorded with it ((-1, -1) if none; offset -1 when it
    /// was recorded without one).
    pub fn lme_position(&self, mirror: &str, topic_id: Uuid, partition: i32) -> (i32, i64) {
        self.table
            .borrow()
            .get(mirror, topic_id, partition)
            .and_then(|s| s.last_mirrored_epoch)
            .unwrap_or((-1, -1))
    }
}

/// Checks one write against what is stored and returns the records it makes, or the
/// error code and message it is rejected with.
fn validate(
    mirror: &str,
    item: &WriteItem<'_>,
    stored: &StoredState,
) -> Result<Vec<Update>, (i16, String)> {
    let e = item.entry;
    let mut updates = Vec::with_capacity(2);
    if e.state != MirrorPartitionState::Unknown.code() {
        let invalid = |what: &str, code: i8| {
            (
                errors::INVALID_CLUSTER_MIRROR_STATES,
                format!("unknown {what} code {code}"),
            )
        };
        let state =
            MirrorPartitionState::from_code(e.state).ok_or_else(|| invalid("state", e.state))?;
        let previous_state = MirrorPartitionState::from_code(e.previous_state)
            .ok_or_else(|| invalid("previous state", e.previous_state))?;
        let (stored_leader_epoch, stored_state_epoch) = stored
            .state
            .as_ref()
            .map_or((-1, 0), |s| (s.leader_epoch, s.state_epoch));
        if e.leader_epoch < stored_leader_epoch {
            return Err((
                ResponseError::FencedLeaderEpoch.code(),
                format!(
                    "leader epoch {} is older than the stored {stored_leader_epoch}",
                    e.leader_epoch
                ),
            ));
        }
        if e.state_epoch != stored_state_epoch {
            return Err((
                errors::INVALID_CLUSTER_MIRROR_STATES,
                format!(
                    "stale state epoch {}, current {stored_state_epoch}",
                    e.state_epoch
                ),
            ));
        }
        updates.push((
            MirrorStateKey::new(MirrorRecordKind::State, mirror, item.topic_id, e.partition),
            Some(MirrorStateValue::State(StateValue {
                state,
                previous_state,
                retry_attempt: e.retry_attempt,
                error_message: e.error_message.clone(),
                leader_epoch: e.leader_epoch,
                state_epoch: stored_state_epoch.wrapping_add(1),
                truncated_records: e.truncated_records,
            })),
        ));
    }
    if e.last_mirrored_epoch >= 0 {
        updates.push((
            MirrorStateKey::new(MirrorRecordKind::Lme, mirror, item.topic_id, e.partition),
            Some(MirrorStateValue::Lme {
                last_mirrored_epoch: e.last_mirrored_epoch,
                last_mirrored_offset: e.last_mirrored_offset,
            }),
        ));
    }
    Ok(updates)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use dataplane::log::LogConfig;
    use dataplane::metadata::{MetadataImage, PartitionImage};
    use dataplane::wire::mirror::MirrorStatesTopic;
    use futures::executor::block_on;

    use super::*;

    /// Yields to the executor once, so concurrent calls interleave at the append.
    struct YieldOnce(bool);

    impl Future for YieldOnce {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                Poll::Ready(())
            } else {
                self.0 = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    /// `__mirror_state` partitions in memory: every appended batch, in order.
    #[derive(Debug, Default)]
    struct MemoryLog {
        batches: RefCell<BTreeMap<i32, Vec<Vec<KeyedRecord>>>>,
        /// The next append fails with this log error code.
        fail_next: Cell<Option<i16>>,
        /// Replays of this partition fail (a partition that cannot load).
        fail_replay_of: Cell<Option<i32>>,
        replays: Cell<usize>,
    }

    impl MemoryLog {
        fn records(&self, partition: i32) -> Vec<KeyedRecord> {
            self.batches
                .borrow()
                .get(&partition)
                .map(|b| b.concat())
                .unwrap_or_default()
        }

        fn batch_count(&self) -> usize {
            self.batches.borrow().values().map(Vec::len).sum()
        }
    }

    impl MirrorStateLog for MemoryLog {
        fn append(
            &self,
            tp: TopicPartition,
            _shard: usize,
            records: Vec<KeyedRecord>,
        ) -> LocalBoxFuture<'_, Result<(), CoordinatorError>> {
            Box::pin(async move {
                assert!(!records.is_empty() && records.len() <= RECORDS_PER_BATCH_MAX);
                YieldOnce(false).await;
                if let Some(error_code) = self.fail_next.take() {
                    return Err(CoordinatorError::Log {
                        tp,
                        error_code,
                        message: "disk on fire".to_string(),
                    });
                }
                self.batches
                    .borrow_mut()
                    .entry(tp.partition)
                    .or_default()
                    .push(records);
                Ok(())
            })
        }

        fn replay(
            &self,
            tp: TopicPartition,
            _shard: usize,
        ) -> LocalBoxFuture<'_, Result<(MirrorStateTable, usize), CoordinatorError>> {
            Box::pin(async move {
                self.replays.set(self.replays.get() + 1);
                if self.fail_replay_of.get() == Some(tp.partition) {
                    return Err(CoordinatorError::Log {
                        tp,
                        error_code: ResponseError::KafkaStorageError.code(),
                        message: "unreadable segment".to_string(),
                    });
                }
                let mut table = MirrorStateTable::default();
                let records = self.records(tp.partition);
                for (k, v) in &records {
                    let _ = table.replay(k, v.as_deref());
                }
                Ok((table, records.len()))
            })
        }
    }

    const STATE_PARTITIONS: i32 = 5;

    fn topic(name: &str, id: Uuid, partitions: i32) -> Arc<TopicImage> {
        Arc::new(TopicImage {
            name: name.to_string(),
            id,
            partitions: (0..partitions)
                .map(|p| PartitionImage::single(p, 0, 0, 0))
                .collect(),
            configs: BTreeMap::new(),
            log_config: LogConfig::default(),
            internal: name.starts_with("__"),
        })
    }

    fn orders_id() -> Uuid {
        Uuid::from_u128(0xabcd)
    }

    fn image(with_state_topic: bool) -> MetadataImage {
        let mut image =
            MetadataImage::empty("cid".into(), 0, "127.0.0.1:9092".parse().expect("addr"));
        let mut topics = vec![topic("orders", orders_id(), 8)];
        if with_state_topic {
            topics.push(topic(
                MIRROR_STATE_TOPIC,
                Uuid::from_u128(0x5),
                STATE_PARTITIONS,
            ));
        }
        for t in topics {
            image.topics_by_id.insert(t.id, t.name.clone());
            image.topics.insert(t.name.clone(), t);
        }
        image
    }

    fn setup() -> (Rc<MemoryLog>, Arc<MetadataCell>, Rc<MirrorStateCoordinator>) {
        let log = Rc::new(MemoryLog::default());
        let cell = Arc::new(MetadataCell::new(image(true)));
        let c = MirrorStateCoordinator::with_log(log.clone(), Arc::clone(&cell));
        (log, cell, c)
    }

    fn state_entry(
        partition: i32,
        state: MirrorPartitionState,
        previous: MirrorPartitionState,
        leader_epoch: i32,
        state_epoch: i32,
    ) -> MirrorStateEntry {
        MirrorStateEntry {
            partition,
            state: state.code(),
            previous_state: previous.code(),
            leader_epoch,
            state_epoch,
            ..MirrorStateEntry::default()
        }
    }

    fn write_req(
        mirror: &str,
        topic: &str,
        entries: Vec<MirrorStateEntry>,
    ) -> WriteMirrorStatesRequest {
        WriteMirrorStatesRequest {
            mirror_name: mirror.to_string(),
            topics: vec![MirrorStatesTopic {
                name: topic.to_string(),
                partitions: entries,
            }],
            stopped_topics: Vec::new(),
        }
    }

    /// The (error code, message) of every partition of a write response.
    fn codes(resp: &WriteMirrorStatesResponse) -> Vec<(i32, i16)> {
        resp.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.error_code)))
            .collect()
    }

    fn read(
        c: &MirrorStateCoordinator,
        mirror: &str,
        topic: &str,
        partitions: Vec<i32>,
    ) -> Vec<MirrorStateEntry> {
        let resp = block_on(c.read(&ReadMirrorStatesRequest {
            mirror_name: mirror.to_string(),
            topics: vec![(topic, partitions).into()],
        }));
        assert_eq!(resp.error_code, 0);
        resp.topics.into_iter().flat_map(|t| t.partitions).collect()
    }

    use MirrorPartitionState::{Mirroring, Paused, Pausing, Preparing, Stopped, Stopping, Unknown};

    #[test]
    fn write_then_read_back() {
        let (log, _cell, c) = setup();
        block_on(c.load()).expect("load");
        assert!(c.is_loaded());
        // Nothing stored: the UNKNOWN default with the partition set.
        assert_eq!(
            read(&c, "m", "orders", vec![3]),
            vec![MirrorStateEntry {
                partition: 3,
                ..MirrorStateEntry::default()
            }]
        );
        let resp = block_on(c.write(&write_req(
            "m",
            "orders",
            vec![
                state_entry(3, Preparing, Unknown, 2, 0),
                MirrorStateEntry {
                    truncated_records: 17,
                    retry_attempt: 1,
                    error_message: Some("slow".into()),
                    ..state_entry(4, Preparing, Unknown, 2, 0)
                },
            ],
        )));
        assert_eq!(codes(&resp), vec![(3, 0), (4, 0)]);
        let entries = read(&c, "m", "orders", vec![3, 4, 5]);
        assert_eq!(entries[0].state, Preparing.code());
        assert_eq!(entries[0].previous_state, Unknown.code());
        assert_eq!(entries[0].leader_epoch, 2);
        assert_eq!(entries[0].state_epoch, 1);
        assert_eq!(entries[0].last_mirrored_epoch, -1);
        assert_eq!(entries[1].truncated_records, 17);
        assert_eq!(entries[1].retry_attempt, 1);
        assert_eq!(entries[1].error_message.as_deref(), Some("slow"));
        assert_eq!(entries[2].state, Unknown.code());
        assert_eq!(c.entry("m", orders_id(), 3), entries[0]);
        // Another mirror's keys are separate.
        assert_eq!(c.entry("other", orders_id(), 3).state, Unknown.code());

        // The next transition carries the state epoch it read.
        let resp = block_on(c.write(&write_req(
            "m",
            "orders",
            vec![state_entry(3, Mirroring, Preparing, 2, 1)],
        )));
        assert_eq!(codes(&resp), vec![(3, 0)]);
        let e = c.entry("m", orders_id(), 3);
        assert_eq!(
            (e.state, e.previous_state, e.state_epoch),
            (Mirroring.code(), Preparing.code(), 2)
        );

        // Records landed in the partition the key hashes to.
        let p3 = partition_for("m", orders_id(), 3, STATE_PARTITIONS);
        let key = MirrorStateKey::new(MirrorRecordKind::State, "m", orders_id(), 3)
            .encode()
            .expect("key");
        assert!(log.records(p3).iter().any(|(k, _)| *k == key));
    }

    /// `image` with partition `state_partition` of `__mirror_state` led by `leader` at
    /// `epoch`.
    fn led_by(
        mut image: MetadataImage,
        state_partition: i32,
        leader: i32,
        epoch: i32,
    ) -> MetadataImage {
        let mut topic = (**image.topics.get(MIRROR_STATE_TOPIC).expect("state topic")).clone();
        topic.partitions[state_partition as usize] =
            PartitionImage::single(state_partition, leader, epoch, 0);
        image
            .topics
            .insert(MIRROR_STATE_TOPIC.to_string(), Arc::new(topic));
        image
    }

    #[test]
    fn the_coordinator_follows_the_leadership_of_its_partitions() {
        let (log, cell, c) = setup();
        let p3 = partition_for("m", orders_id(), 3, STATE_PARTITIONS);
        block_on(c.load()).expect("load");
        let w =
            |c: &MirrorStateCoordinator, e| block_on(c.write(&write_req("m", "orders", vec![e])));
        assert_eq!(
            codes(&w(&c, state_entry(3, Preparing, Unknown, 1, 0))),
            vec![(3, 0)]
        );

        // Another broker leads the key's partition now: dropped, and refused.
        cell.publish(led_by(image(true), p3, 1, 1));
        assert_eq!(c.resign(), 1);
        assert!(!c.is_loaded_for("m", orders_id(), 3));
        assert!(c.is_loaded(), "every partition this broker leads is loaded");
        assert_eq!(
            read(&c, "m", "orders", vec![3])[0].error_code,
            ResponseError::NotCoordinator.code()
        );
        assert_eq!(
            codes(&w(&c, state_entry(3, Mirroring, Preparing, 1, 1))),
            vec![(3, ResponseError::NotCoordinator.code())]
        );

        // That broker wrote meanwhile (its own coordinator over the same log).
        let other = MirrorStateCoordinator::with_log(
            log.clone(),
            Arc::new(MetadataCell::new({
                let mut i = led_by(image(true), p3, 1, 1);
                i.node_id = 1;
                i
            })),
        );
        assert_eq!(
            codes(&w(&other, state_entry(3, Mirroring, Preparing, 1, 1))),
            vec![(3, 0)]
        );

        // Led here again, at a newer epoch: loaded again, with that write.
        cell.publish(led_by(image(true), p3, 0, 2));
        assert!(!c.is_loaded());
        block_on(c.load()).expect("load");
        assert!(c.is_loaded_for("m", orders_id(), 3));
        let e = c.entry("m", orders_id(), 3);
        assert_eq!((e.state, e.state_epoch), (Mirroring.code(), 2));
    }

    #[test]
    fn stale_writers_are_fenced() {
        let (log, _cell, c) = setup();
        let w = |e| block_on(c.write(&write_req("m", "orders", vec![e])));
        assert_eq!(
            codes(&w(state_entry(1, Preparing, Unknown, 5, 0))),
            vec![(1, 0)]
        );
        let batches = log.batch_count();
        // Older leader epoch.
        let resp = w(state_entry(1, Mirroring, Preparing, 4, 1));
        assert_eq!(
            codes(&resp),
            vec![(1, ResponseError::FencedLeaderEpoch.code())]
        );
        // Stale state epoch (a writer that read before the last transition).
        let resp = w(state_entry(1, Mirroring, Preparing, 5, 0));
        assert_eq!(
            codes(&resp),
            vec![(1, errors::INVALID_CLUSTER_MIRROR_STATES)]
        );
        assert_eq!(
            resp.topics[0].partitions[0].error_message.as_deref(),
            Some("stale state epoch 0, current 1")
        );
        // A state epoch from the future is just as wrong.
        let resp = w(state_entry(1, Mirroring, Preparing, 5, 7));
        assert_eq!(
            codes(&resp),
            vec![(1, errors::INVALID_CLUSTER_MIRROR_STATES)]
        );
        // Nothing was appended and nothing changed.
        assert_eq!(log.batch_count(), batches);
        let e = c.entry("m", orders_id(), 1);
        assert_eq!(
            (e.state, e.leader_epoch, e.state_epoch),
            (Preparing.code(), 5, 1)
        );
        // A newer leader with the current state epoch wins.
        assert_eq!(
            codes(&w(state_entry(1, Mirroring, Preparing, 6, 1))),
            vec![(1, 0)]
        );
        let e = c.entry("m", orders_id(), 1);
        assert_eq!(
            (e.state, e.leader_epoch, e.state_epoch),
            (Mirroring.code(), 6, 2)
        );
        // Unknown state codes are rejected.
        let resp = w(MirrorStateEntry {
            state: 42,
            ..state_entry(1, Mirroring, Preparing, 6, 2)
        });
        assert_eq!(
            codes(&resp),
            vec![(1, errors::INVALID_CLUSTER_MIRROR_STATES)]
        );
    }

    #[test]
    fn lme_and_state_are_separate_keys() {
        let (_log, _cell, c) = setup();
        let w = |e| block_on(c.write(&write_req("m", "orders", vec![e])));
        let stopping = state_entry(2, Stopping, Mirroring, 3, 0);
        assert_eq!(codes(&w(stopping)), vec![(2, 0)]);
        // LME only (state UNKNOWN): no state record, no fencing.
        let lme_only = MirrorStateEntry {
            partition: 2,
            last_mirrored_epoch: 9,
            ..MirrorStateEntry::default()
        };
        assert_eq!(codes(&w(lme_only)), vec![(2, 0)]);
        assert_eq!(c.lme("m", orders_id(), 2), 9);
        assert_eq!(c.entry("m", orders_id(), 2).state, Stopping.code());
        // A later state write leaves the LME alone.
        assert_eq!(
            codes(&w(state_entry(2, Stopped, Stopping, 3, 1))),
            vec![(2, 0)]
        );
        let e = c.entry("m", orders_id(), 2);
        assert_eq!(
            (e.state, e.last_mirrored_epoch, e.state_epoch),
            (Stopped.code(), 9, 2)
        );
        // State and LME in one entry.
        let both = MirrorStateEntry {
            last_mirrored_epoch: 11,
            ..state_entry(2, Preparing, Stopped, 3, 2)
        };
        assert_eq!(codes(&w(both)), vec![(2, 0)]);
        assert_eq!(c.lme("m", orders_id(), 2), 11);
        assert_eq!(c.lme("m", orders_id(), 3), -1);
        let entries = c.entries_of("m");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].0, orders_id());
        assert_eq!(entries[0].1, 2);
        assert_eq!(entries[0].2.state, Preparing.code());
    }

    #[test]
    fn unknown_topics_and_missing_state_topic() {
        let (_log, cell, c) = setup();
        let resp = block_on(c.write(&write_req(
            "m",
            "nope",
            vec![state_entry(0, Preparing, Unknown, 0, 0)],
        )));
        assert_eq!(codes(&resp), vec![(0, unknown_topic())]);
        // A partition the topic does not have.
        let resp = block_on(c.write(&write_req(
            "m",
            "orders",
            vec![state_entry(8, Preparing, Unknown, 0, 0)],
        )));
        assert_eq!(codes(&resp), vec![(8, unknown_topic())]);
        let entries = read(&c, "m", "nope", vec![1]);
        assert_eq!(entries[0].error_code, unknown_topic());
        assert_eq!(entries[0].partition, 1);

        // Without __mirror_state: reads answer defaults, writes fail.
        cell.publish(image(false));
        let c = MirrorStateCoordinator::with_log(Rc::new(MemoryLog::default()), Arc::clone(&cell));
        assert!(!c.is_loaded());
        block_on(c.load()).expect("load skips");
        assert!(c.is_loaded());
        let entries = read(&c, "m", "orders", vec![1]);
        assert_eq!(entries[0].error_code, 0);
        assert_eq!(entries[0].state, Unknown.code());
        let resp = block_on(c.write(&write_req(
            "m",
            "orders",
            vec![state_entry(1, Preparing, Unknown, 0, 0)],
        )));
        assert_eq!(
            codes(&resp),
            vec![(1, ResponseError::CoordinatorNotAvailable.code())]
        );
        assert_eq!(block_on(c.tombstone_mirror("m")), Ok(0));
        // The topic appears: not loaded until load runs again (or first use).
        cell.publish(image(true));
        assert!(!c.is_loaded());
        block_on(c.load()).expect("load");
        assert!(c.is_loaded());
    }

    /// Audit B-7(a): a `__mirror_state` partition that cannot load holds back only the
    /// keys it holds; the others load and answer.
    #[test]
    fn a_partition_that_cannot_load_blocks_only_its_own_keys() {
        let (log, cell, c) = setup();
        let orders = cell.load().topic("orders").expect("topic").id;
        let holder = |p: i32| partition_for("m", orders, p, STATE_PARTITIONS);
        // Two partitions of orders whose keys live in different state partitions.
        let (a, b) = (0..64)
            .flat_map(|x| (0..64).map(move |y| (x, y)))
            .find(|(x, y)| holder(*x) != holder(*y))
            .expect("two state partitions");
        log.fail_replay_of.set(Some(holder(a)));
        assert!(block_on(c.load()).is_err(), "the first error is reported");
        assert!(!c.is_loaded(), "not everything is loaded");
        assert!(!c.is_loaded_for("m", orders, a));
        assert!(c.is_loaded_for("m", orders, b), "the others are");
        // Once it can be read, the next load completes it.
        log.fail_replay_of.set(None);
        block_on(c.load()).expect("load");
        assert!(c.is_loaded() && c.is_loaded_for("m", orders, a));
    }

    #[test]
    fn failed_append_leaves_the_cache_alone() {
        let (log, _cell, c) = setup();
        let w = |e| block_on(c.write(&write_req("m", "orders", vec![e])));
        assert_eq!(
            codes(&w(state_entry(0, Preparing, Unknown, 1, 0))),
            vec![(0, 0)]
        );
        let storage = ResponseError::KafkaStorageError.code();
        log.fail_next.set(Some(storage));
        let resp = w(MirrorStateEntry {
            last_mirrored_epoch: 4,
            ..state_entry(0, Mirroring, Preparing, 1, 1)
        });
        assert_eq!(codes(&resp), vec![(0, storage)]);
        assert!(resp.topics[0].partitions[0]
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("disk on fire")));
        let e = c.entry("m", orders_id(), 0);
        assert_eq!(
            (e.state, e.state_epoch, e.last_mirrored_epoch),
            (Preparing.code(), 1, -1)
        );
        // The same write succeeds once the log works again.
        assert_eq!(
            codes(&w(MirrorStateEntry {
                last_mirrored_epoch: 4,
                ..state_entry(0, Mirroring, Preparing, 1, 1)
            })),
            vec![(0, 0)]
        );
        assert_eq!(c.lme("m", orders_id(), 0), 4);
    }

    #[test]
    fn concurrent_writes_to_one_key_are_serialized() {
        let (_log, _cell, c) = setup();
        block_on(c.load()).expect("load");
        // Two writers that both read state epoch 0: exactly one wins.
        let a = write_req(
            "m",
            "orders",
            vec![state_entry(6, Preparing, Unknown, 1, 0)],
        );
        let b = write_req("m", "orders", vec![state_entry(6, Paused, Unknown, 1, 0)]);
        let (ra, rb) = block_on(futures::future::join(c.write(&a), c.write(&b)));
        let mut results = vec![codes(&ra)[0].1, codes(&rb)[0].1];
        results.sort_unstable();
        assert_eq!(results, vec![0, errors::INVALID_CLUSTER_MIRROR_STATES]);
        assert_eq!(c.entry("m", orders_id(), 6).state_epoch, 1);
        // Two entries for one key in one request: the second sees the first.
        let resp = block_on(c.write(&write_req(
            "m",
            "orders",
            vec![
                state_entry(7, Preparing, Unknown, 1, 0),
                state_entry(7, Mirroring, Preparing, 1, 1),
                state_entry(7, Pausing, Mirroring, 1, 1),
            ],
        )));
        assert_eq!(
            codes(&resp),
            vec![(7, 0), (7, 0), (7, errors::INVALID_CLUSTER_MIRROR_STATES)]
        );
        let e = c.entry("m", orders_id(), 7);
        assert_eq!((e.state, e.state_epoch), (Mirroring.code(), 2));
    }

    #[test]
    fn one_batch_per_state_partition_and_split_when_large() {
        let (log, _cell, c) = setup();
        block_on(c.load()).expect("load");
        let entries: Vec<MirrorStateEntry> = (0..8)
            .map(|p| MirrorStateEntry {
                last_mirrored_epoch: 1,
                ..state_entry(p, Preparing, Unknown, 0, 0)
            })
            .collect();
        let used: BTreeSet<i32> = (0..8)
            .map(|p| partition_for("m", orders_id(), p, STATE_PARTITIONS))
            .collect();
        let resp = block_on(c.write(&write_req("m", "orders", entries)));
        assert!(codes(&resp).iter().all(|(_, code)| *code == 0));
        assert_eq!(log.batch_count(), used.len());

        // A topic with many partitions: batches stay within the bound.
        let mut image = image(true);
        let big = topic("big", Uuid::from_u128(0xb19), 3000);
        image.topics_by_id.insert(big.id, big.name.clone());
        image.topics.insert(big.name.clone(), big);
        let cell = Arc::new(MetadataCell::new(image));
        let log = Rc::new(MemoryLog::default());
        let c = MirrorStateCoordinator::with_log(log.clone(), Arc::clone(&cell));
        let entries = (0..3000)
            .map(|p| MirrorStateEntry {
                last_mirrored_epoch: 2,
                ..state_entry(p, Mirroring, Preparing, 0, 0)
            })
            .collect();
        let resp = block_on(c.write(&write_req("m", "big", entries)));
        assert!(codes(&resp).iter().all(|(_, code)| *code == 0));
        assert!(log.batch_count() > STATE_PARTITIONS as usize);
        assert_eq!(c.entries_of("m").len(), 3000);
        assert_eq!(block_on(c.tombstone_mirror("m")), Ok(6000));
        assert!(c.entries_of("m").is_empty());
    }

    #[test]
    fn tombstones_and_replay() {
        let (log, cell, c) = setup();
        let w = |c: &MirrorStateCoordinator, mirror: &str, e| {
            codes(&block_on(c.write(&write_req(mirror, "orders", vec![e]))))
        };
        for p in 0..4 {
            assert_eq!(
                w(&c, "m", state_entry(p, Preparing, Unknown, 1, 0)),
                vec![(p, 0)]
            );
            assert_eq!(
                w(&c, "keep", state_entry(p, Mirroring, Preparing, 1, 0)),
                vec![(p, 0)]
            );
        }
        assert_eq!(
            w(&c, "m", state_entry(0, Mirroring, Preparing, 1, 1)),
            vec![(0, 0)]
        );
        let lme = MirrorStateEntry {
            partition: 1,
            last_mirrored_epoch: 3,
            ..MirrorStateEntry::default()
        };
        assert_eq!(w(&c, "m", lme), vec![(1, 0)]);

        // A fresh coordinator replaying the same log sees the same entries.
        let fresh = MirrorStateCoordinator::with_log(log.clone(), Arc::clone(&cell));
        block_on(fresh.load()).expect("load");
        assert!(fresh.is_loaded());
        assert_eq!(fresh.entries_of("m"), c.entries_of("m"));
        assert_eq!(fresh.entries_of("keep"), c.entries_of("keep"));
        assert_eq!(fresh.lme("m", orders_id(), 1), 3);
        // Loading again is a no-op.
        let replays = log.replays.get();
        block_on(fresh.load()).expect("load");
        assert_eq!(log.replays.get(), replays);

        // Tombstones: 4 state keys + 1 LME key of "m".
        assert_eq!(block_on(c.tombstone_mirror("m")), Ok(5));
        assert!(c.entries_of("m").is_empty());
        assert_eq!(c.entries_of("keep").len(), 4);
        assert_eq!(c.lme("m", orders_id(), 1), -1);
        assert_eq!(block_on(c.tombstone_mirror("m")), Ok(0));
        let fresh = MirrorStateCoordinator::with_log(log.clone(), Arc::clone(&cell));
        block_on(fresh.load()).expect("load");
        assert!(fresh.entries_of("m").is_empty());
        assert_eq!(fresh.entries_of("keep"), c.entries_of("keep"));
        // After the tombstone a new state starts again at state epoch 0.
        assert_eq!(
            w(&fresh, "m", state_entry(0, Preparing, Unknown, 1, 0)),
            vec![(0, 0)]
        );
    }

    #[test]
    fn undecodable_records_are_skipped_on_replay() {
        let (log, cell, c) = setup();
        assert_eq!(
            codes(&block_on(c.write(&write_req(
                "m",
                "orders",
                vec![state_entry(0, Preparing, Unknown, 1, 0)]
            )))),
            vec![(0, 0)]
        );
        let p = partition_for("m", orders_id(), 0, STATE_PARTITIONS);
        let good_key = MirrorStateKey::new(MirrorRecordKind::State, "m", orders_id(), 0)
            .encode()
            .expect("key");
        block_on(log.append(
            TopicPartition::new(MIRROR_STATE_TOPIC, p),
            0,
            vec![
                (vec![0, 9, 1], Some(vec![1, 2, 3])),
                (good_key, Some(vec![0, 0, 99])),
            ],
        ))
        .expect("append");
        let fresh = MirrorStateCoordinator::with_log(log.clone(), Arc::clone(&cell));
        block_on(fresh.load()).expect("load");
        assert_eq!(fresh.entries_of("m"), c.entries_of("m"));
    }

    #[test]
    fn stored_state_to_entry() {
        let stored = StoredState {
            last_mirrored_epoch: Some((4, 77)),
            state: Some(StateValue {
                state: Stopped,
                previous_state: Stopping,
                retry_attempt: -1,
                error_message: Some("x".into()),
                leader_epoch: 8,
                state_epoch: 3,
                truncated_records: 12,
            }),
        };
        let e = stored.to_entry(5);
        assert_eq!(
            e,
            MirrorStateEntry {
                partition: 5,
                last_mirrored_epoch: 4,
                state: Stopped.code(),
                error_code: 0,
                previous_state: Stopping.code(),
                retry_attempt: -1,
                error_message: Some("x".into()),
                leader_epoch: 8,
                state_epoch: 3,
                truncated_records: 12,
                last_mirrored_offset: 77,
            }
        );
        assert_eq!(
            StoredState::default().to_entry(2),
            MirrorStateEntry {
                partition: 2,
                ..MirrorStateEntry::default()
            }
        );
    }

    /// A controller for shards that never need one.
    #[derive(Debug)]
    struct NoController;

    impl dataplane::controller::ControllerHandle for NoController {
        fn submit(
            &self,
            _request: dataplane::controller::AdminRequest,
        ) -> futures::channel::oneshot::Receiver<dataplane::controller::AdminResponse> {
            let (tx, rx) = futures::channel::oneshot::channel();
            let _ = tx.send(dataplane::controller::AdminResponse::Failed {
                error_code: ResponseError::UnknownServerError.code(),
                message: "no controller in this test".to_string(),
            });
            rx
        }
    }

    /// Starts `shards` shards on the current glommio executor, with the
    /// `__mirror_state` partitions of the image opened on their shards.
    async fn start_shards(
        dir: &std::path::Path,
        cell: &Arc<MetadataCell>,
        shards: usize,
    ) -> (ShardRouter, Vec<Rc<dataplane::shard::ShardCtx>>) {
        let (router, queues) = ShardRouter::new(shards, 64);
        let settings = Arc::new(dataplane::shard::ShardSettings {
            replication: Default::default(),
            data_dir: dir.to_path_buf(),
            socket_request_max_bytes: 1 << 20,
            in_flight_requests_max: 5,
            auto_create_topics_enable: false,
            num_partitions: 1,
            log_retention_check_interval_ms: 300_000,
            default_log_config: LogConfig::default(),
            cleaner: Default::default(),
            internal_segment_bytes: (104_857_600, 104_857_600),
            static_configs: Default::default(),
            listeners: Vec::new(),
            authorizer: None,
        });
        let mut ctxs = Vec::new();
        for (id, queue) in queues.into_iter().enumerate() {
            let ctx = dataplane::shard::ShardCtx::new(
                id,
                router.clone(),
                Arc::clone(cell),
                Arc::new(NoController),
                Arc::clone(&settings),
            );
            glommio::spawn_local(Rc::clone(&ctx).run_jobs(queue)).detach();
            ctxs.push(ctx);
        }
        let image = cell.load();
        let topic = image.topic(MIRROR_STATE_TOPIC).expect("state topic");
        for p in &topic.partitions {
            ctxs[p.shard]
                .open_partition(
                    TopicPartition::new(MIRROR_STATE_TOPIC, p.partition),
                    topic.id,
                    LogConfig::default(),
                    p.leadership(),
                )
                .await
                .expect("open __mirror_state partition");
        }
        (router, ctxs)
    }

    async fn stop_shards(router: ShardRouter, ctxs: Vec<Rc<dataplane::shard::ShardCtx>>) {
        router.close();
        for ctx in ctxs {
            ctx.close_all().await;
        }
    }

    /// The whole coordinator against real partition logs on two shards: write, read
    /// back, fencing, a fresh coordinator replaying, tombstones, and a restart from disk.
    #[test]
    fn real_shards_write_replay_and_tombstone() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(256 << 10)
            .spawn(move || async move {
                dataplane::reactor::spawn_tick();
                let mut img = image(true);
                // Spread the state partitions over both shards.
                let mut state = (*img.topics[MIRROR_STATE_TOPIC]).clone();
                for p in &mut state.partitions {
                    p.shard = (p.partition % 2) as usize;
                }
                img.topics
                    .insert(MIRROR_STATE_TOPIC.to_string(), Arc::new(state));
                let cell = Arc::new(MetadataCell::new(img));
                let (router, ctxs) = start_shards(&dir, &cell, 2).await;

                let c = MirrorStateCoordinator::new(router.clone(), Arc::clone(&cell));
                c.load().await.expect("load");
                assert!(c.is_loaded());
                let entries: Vec<MirrorStateEntry> = (0..8)
                    .map(|p| state_entry(p, Preparing, Unknown, 1, 0))
                    .collect();
                let resp = c.write(&write_req("m", "orders", entries)).await;
                assert!(codes(&resp).iter().all(|(_, code)| *code == 0), "{resp:?}");
                let lme = MirrorStateEntry {
                    last_mirrored_epoch: 6,
                    ..state_entry(3, Mirroring, Preparing, 2, 1)
                };
                let resp = c.write(&write_req("m", "orders", vec![lme])).await;
                assert_eq!(codes(&resp), vec![(3, 0)]);
                let resp = c
                    .write(&write_req(
                        "other",
                        "orders",
                        vec![state_entry(0, Preparing, Unknown, 1, 0)],
                    ))
                    .await;
                assert_eq!(codes(&resp), vec![(0, 0)]);

                // Read back.
                let read = c
                    .read(&ReadMirrorStatesRequest {
                        mirror_name: "m".to_string(),
                        topics: vec![("orders", vec![3, 4]).into()],
                    })
                    .await;
                let got = &read.topics[0].partitions;
                assert_eq!(
                    (got[0].state, got[0].state_epoch, got[0].last_mirrored_epoch),
                    (Mirroring.code(), 2, 6)
                );
                assert_eq!(
                    (got[1].state, got[1].state_epoch, got[1].leader_epoch),
                    (Preparing.code(), 1, 1)
                );

                // Fencing.
                let resp = c
                    .write(&write_req(
                        "m",
                        "orders",
                        vec![state_entry(3, Paused, Mirroring, 1, 2)],
                    ))
                    .await;
                assert_eq!(
                    codes(&resp),
                    vec![(3, ResponseError::FencedLeaderEpoch.code())]
                );
                let resp = c
                    .write(&write_req(
                        "m",
                        "orders",
                        vec![state_entry(3, Paused, Mirroring, 2, 1)],
                    ))
                    .await;
                assert_eq!(
                    codes(&resp),
                    vec![(3, errors::INVALID_CLUSTER_MIRROR_STATES)]
                );

                // The records are in the logs: a fresh coordinator sees the same. Before
                // any load its table is empty; a look-up loads what it needs first.
                let cold = MirrorStateCoordinator::new(router.clone(), Arc::clone(&cell));
                assert_eq!(cold.lme("m", orders_id(), 3), -1, "nothing loaded yet");
                cold.ensure_loaded_for("m", orders_id(), 3)
                    .await
                    .expect("load for a look-up");
                assert_eq!(cold.lme("m", orders_id(), 3), 6);
                let fresh = MirrorStateCoordinator::new(router.clone(), Arc::clone(&cell));
                fresh.load().await.expect("load");
                assert_eq!(fresh.entries_of("m"), c.entries_of("m"));
                assert_eq!(fresh.entries_of("m").len(), 8);
                assert_eq!(fresh.lme("m", orders_id(), 3), 6);

                // Tombstones: 8 state keys and one LME key.
                assert_eq!(c.tombstone_mirror("m").await, Ok(9));
                assert!(c.entries_of("m").is_empty());
                let before_restart = c.entries_of("other");
                assert_eq!(before_restart.len(), 1);
                stop_shards(router, ctxs).await;

                // After a restart the logs replay to the same state.
                let (router, ctxs) = start_shards(&dir, &cell, 2).await;
                let restarted = MirrorStateCoordinator::new(router.clone(), Arc::clone(&cell));
                restarted.load().await.expect("load");
                assert!(restarted.entries_of("m").is_empty());
                assert_eq!(restarted.entries_of("other"), before_restart);
                assert_eq!(restarted.lme("m", orders_id(), 3), -1);

                // A partition that is not open answers COORDINATOR_NOT_AVAILABLE.
                ctxs[1]
                    .delete_partition(&TopicPartition::new(MIRROR_STATE_TOPIC, 1))
                    .await
                    .expect("delete");
                let cold = MirrorStateCoordinator::new(router.clone(), Arc::clone(&cell));
                assert!(matches!(
                    cold.load().await,
                    Err(CoordinatorError::NotOpen { .. })
                ));
                assert!(!cold.is_loaded());
                stop_shards(router, ctxs).await;
            })
            .expect("executor starts");
        ex.join().expect("executor finishes");
    }
}
