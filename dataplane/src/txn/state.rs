//! The transaction coordinator's state machine: Kafka's `TransactionCoordinator`,
//! `TransactionStateManager` and `TransactionMetadata` (transaction protocol versions 0
//! and 1, i.e. AddPartitionsToTxn v3 and below), without I/O.
//!
//! One [`TransactionCoordinator`] owns the transactional ids of one `__transaction_state`
//! partition; its coordinator epoch is that partition's leader epoch.
//!
//! Every state change follows Kafka's two-phase shape. A handler validates the request
//! and either answers at once ([`Step::Reply`]) or prepares a transition and returns the
//! record to append to `__transaction_state` ([`Step::Append`]). While that append is in
//! flight the transactional id has a pending transition and every other request for it
//! gets `CONCURRENT_TRANSACTIONS`. The caller appends the record and reports the outcome
//! to [`TransactionCoordinator::append_completed`]; only then does the transition take
//! effect, and the completion carries the client's answer and any transaction markers
//! to write.
//!
//! Ending a transaction: EndTxn logs PrepareCommit/PrepareAbort, answers the client, and
//! hands out one [`TxnMarker`] per partition. The caller writes each marker (locally or
//! through the owning shard) and reports it to [`TransactionCoordinator::marker_written`];
//! after the last one the coordinator returns the CompleteCommit/CompleteAbort record.
//!
//! Fencing: InitProducerId for a transactional id with an ongoing transaction, and a
//! transaction past its timeout ([`TransactionCoordinator::tick`]), bump the producer
//! epoch and abort the transaction with the bumped epoch (Kafka's PrepareEpochFence,
//! which is never logged), so the old producer's next request gets `PRODUCER_FENCED`.
//! InitProducerId answers `CONCURRENT_TRANSACTIONS` until the abort completes; the
//! client retries and gets a second bump (or a new producer id if the epoch is spent).

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use kafka_protocol::ResponseError;

use crate::types::{ProducerEpoch, ProducerId, TopicPartition};
use crate::wire::control::build_txn_marker;

use super::records::{
    decode_key, decode_value, encode_key, encode_value, TxnLogValue, TxnState,
    VALUE_VERSION_WRITTEN,
};

/// The consumer offsets topic; AddOffsetsToTxn adds one of its partitions.
pub const GROUP_METADATA_TOPIC: &str = "__consumer_offsets";

/// Kafka's `transaction.max.timeout.ms` default (15 minutes).
pub const TRANSACTION_MAX_TIMEOUT_MS_DEFAULT: i32 = 900_000;

const NONE: i16 = 0;
const CONCURRENT_TRANSACTIONS: i16 = ResponseError::ConcurrentTransactions.code();
const INVALID_PRODUCER_ID_MAPPING: i16 = ResponseError::InvalidProducerIdMapping.code();
const INVALID_REQUEST: i16 = ResponseError::InvalidRequest.code();
const INVALID_TRANSACTION_TIMEOUT: i16 = ResponseError::InvalidTransactionTimeout.code();
const INVALID_TXN_STATE: i16 = ResponseError::InvalidTxnState.code();
const PRODUCER_FENCED: i16 = ResponseError::ProducerFenced.code();
const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();

/// Coordinator settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionConfig {
    /// `transaction.max.timeout.ms`: the longest transaction timeout a producer may ask for.
    pub transaction_max_timeout_ms: i32,
}

impl Default for TransactionConfig {
    fn default() -> Self {
        Self {
            transaction_max_timeout_ms: TRANSACTION_MAX_TIMEOUT_MS_DEFAULT,
        }
    }
}

/// Hands out cluster-unique producer ids (Kafka's `ProducerIdManager`). An error is the
/// Kafka error code to answer InitProducerId with (e.g. `COORDINATOR_LOAD_IN_PROGRESS`
/// while a new block is being fetched).
pub trait ProducerIdAllocator {
    fn allocate(&mut self) -> Result<ProducerId, i16>;
}

/// An allocator counting up from a start id: for tests and single-node setups whose
/// starting point is itself persisted elsewhere.
#[derive(Debug, Clone)]
pub struct SequentialProducerIds {
    pub next: ProducerId,
}

impl ProducerIdAllocator for SequentialProducerIds {
    fn allocate(&mut self) -> Result<ProducerId, i16> {
        let id = self.next;
        self.next = ProducerId(id.0 + 1);
        Ok(id)
    }
}

/// InitProducerId. `producer_id`/`producer_epoch` are the client's current ones (KIP-360,
/// v3+), both -1 for a fresh producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: i32,
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub error_code: i16,
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
}

impl InitProducerIdResponse {
    fn error(error_code: i16) -> Self {
        Self {
            error_code,
            producer_id: ProducerId::NONE,
            producer_epoch: ProducerEpoch::NONE,
        }
    }
}

/// AddPartitionsToTxn for one transactional id (v3 and below). The answer is one error
/// code that applies to every partition of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsToTxnRequest {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub partitions: Vec<TopicPartition>,
}

/// AddOffsetsToTxn: adds the `__consumer_offsets` partition of `group_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddOffsetsToTxnRequest {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub group_id: String,
}

/// EndTxn: `commit` true for COMMIT, false for ABORT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxnRequest {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub commit: bool,
}

/// What a handler asks of its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<R> {
    /// Answer the client now; nothing changed.
    Reply(R),
    /// Append this record to `__transaction_state`, then call
    /// [`TransactionCoordinator::append_completed`]; its completion has the answer.
    Append(TxnLogAppend),
}

/// A record to append to `__transaction_state` (key and value in Kafka's format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogAppend {
    pub transactional_id: String,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// Identifies the pending transition; passed back to `append_completed`.
    pub seq: u64,
}

/// A COMMIT or ABORT marker to write to one partition (WriteTxnMarkers semantics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMarker {
    pub transactional_id: String,
    pub topic_partition: TopicPartition,
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

impl TxnMarker {
    /// The control batch to append to the partition.
    pub fn batch(&self, timestamp_ms: i64) -> Bytes {
        build_txn_marker(
            self.commit,
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            timestamp_ms,
        )
    }
}

/// The answer to the request that is waiting on an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnResponse {
    InitProducerId(InitProducerIdResponse),
    /// AddPartitionsToTxn, AddOffsetsToTxn or EndTxn.
    ErrorCode(i16),
}

/// What follows a finished `__transaction_state` append.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendCompletion {
    /// The answer for the waiting client request; `None` for coordinator-internal
    /// transitions (timeouts, completing a transaction).
    pub response: Option<TxnResponse>,
    /// Markers to write now.
    pub markers: Vec<TxnMarker>,
    /// A further record to append (a transaction with nothing to mark completes at
    /// once; a failed CompleteCommit/CompleteAbort append is retried).
    pub next_append: Option<TxnLogAppend>,
}

/// What [`TransactionCoordinator::load`] found to resume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadOutcome {
    /// Markers of transactions loaded in PrepareCommit/PrepareAbort, to (re)send.
    pub markers: Vec<TxnMarker>,
    /// Completion records for prepared transactions that had no partitions.
    pub appends: Vec<TxnLogAppend>,
    /// Records that did not decode and were skipped.
    pub skipped_records: usize,
}

/// A read-only view of one transactional id (tests, DescribeTransactions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnDescription {
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub state: TxnState,
    pub txn_timeout_ms: i32,
    pub partitions: Vec<TopicPartition>,
    pub start_timestamp_ms: i64,
    /// A transition is being logged or markers are being written.
    pub transition_pending: bool,
}

/// Maps the PRODUCER_FENCED code to INVALID_PRODUCER_EPOCH for clients too old to know
/// it, as KafkaApis does: InitProducerId below v4 and AddPartitionsToTxn,
/// AddOffsetsToTxn and EndTxn below v2 (`legacy_client` true for those).
pub fn fenced_code_for_client(error_code: i16, legacy_client: bool) -> i16 {
    if legacy_client && error_code == PRODUCER_FENCED {
        ResponseError::InvalidProducerEpoch.code()
    } else {
        error_code
    }
}

/// Kafka's mapping of a failed `__transaction_state` append to the coordinator error
/// the client sees (`TransactionStateManager.appendTransactionToLog`).
pub fn append_error_to_client(error_code: i16) -> i16 {
    const COORDINATOR_NOT_AVAILABLE: i16 = ResponseError::CoordinatorNotAvailable.code();
    match error_code {
        c if c == ResponseError::UnknownTopicOrPartition.code()
            || c == ResponseError::NotEnoughReplicas.code()
            || c == ResponseError::NotEnoughReplicasAfterAppend.code()
            || c == ResponseError::RequestTimedOut.code() =>
        {
            COORDINATOR_NOT_AVAILABLE
        }
        c if c == ResponseError::NotLeaderOrFollower.code()
            || c == ResponseError::KafkaStorageError.code() =>
        {
            NOT_COORDINATOR
        }
        c if c == ResponseError::MessageTooLarge.code()
            || c == ResponseError::RecordListTooLarge.code() =>
        {
            ResponseError::UnknownServerError.code()
        }
        other => other,
    }
}

/// Kafka's `TransactionMetadata.isEpochExhausted`: the last epochs are kept for fencing.
fn is_epoch_exhausted(epoch: ProducerEpoch) -> bool {
    epoch.0 >= i16::MAX - 1
}

/// The persisted part of a transactional id's metadata: what one log value holds, plus
/// the last producer id/epoch Kafka keeps for InitProducerId retries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TxnData {
    producer_id: ProducerId,
    last_producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    last_producer_epoch: ProducerEpoch,
    txn_timeout_ms: i32,
    state: TxnState,
    partitions: BTreeSet<TopicPartition>,
    start_timestamp_ms: i64,
    last_update_timestamp_ms: i64,
}

impl TxnData {
    fn to_value(&self) -> TxnLogValue {
        TxnLogValue {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            txn_timeout_ms: self.txn_timeout_ms,
            state: self.state,
            partitions: self.partitions.iter().cloned().collect(),
            last_update_timestamp_ms: self.last_update_timestamp_ms,
            start_timestamp_ms: self.start_timestamp_ms,
            previous_producer_id: ProducerId::NONE,
            next_producer_id: ProducerId::NONE,
            client_transaction_version: 0,
        }
    }

    fn from_value(v: TxnLogValue) -> Self {
        Self {
            producer_id: v.producer_id,
            last_producer_id: v.previous_producer_id,
            producer_epoch: v.producer_epoch,
            last_producer_epoch: ProducerEpoch::NONE,
            txn_timeout_ms: v.txn_timeout_ms,
            state: v.state,
            partitions: v.partitions.into_iter().collect(),
            start_timestamp_ms: v.start_timestamp_ms,
            last_update_timestamp_ms: v.last_update_timestamp_ms,
        }
    }
}

/// Why a transition is being logged: decides the answer once it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    InitProducerId,
    AddPartitions,
    EndTxn,
    /// Abort with a bumped epoch because InitProducerId found an ongoing transaction.
    FenceForInit,
    /// Abort with a bumped epoch because the transaction timed out.
    FenceForTimeout,
    /// CompleteCommit/CompleteAbort after every marker was written.
    Complete,
}

#[derive(Debug, Clone)]
struct Pending {
    seq: u64,
    transit: TxnData,
    purpose: Purpose,
}

#[derive(Debug, Clone)]
struct TxnMetadata {
    data: TxnData,
    pending: Option<Pending>,
    /// Partitions whose marker is not yet written (while a Complete is pending).
    markers_unwritten: BTreeSet<TopicPartition>,
    /// An epoch-fencing abort failed to be logged; its bump is already in `data` and is
    /// not repeated (Kafka's `hasFailedEpochFence`).
    has_failed_epoch_fence: bool,
}

/// The transaction coordinator of one `__transaction_state` partition.
#[derive(Debug)]
pub struct TransactionCoordinator {
    config: TransactionConfig,
    coordinator_epoch: i32,
    txns: HashMap<String, TxnMetadata>,
    next_seq: u64,
}

impl TransactionCoordinator {
    /// A coordinator with no transactional ids (a new partition).
    pub fn new(config: TransactionConfig, coordinator_epoch: i32) -> Self {
        Self {
            config,
            coordinator_epoch,
            txns: HashMap::new(),
            next_seq: 1,
        }
    }

    /// Rebuilds state from the partition's records in log order (key, value; `None` is a
    /// tombstone) and resumes transactions left in PrepareCommit/PrepareAbort: their
    /// markers are returned to be written again (markers are idempotent for partitions).
    /// Records that do not decode are skipped and counted.
    pub fn load<I, K, V>(
        config: TransactionConfig,
        coordinator_epoch: i32,
        records: I,
        now_ms: i64,
    ) -> (Self, LoadOutcome)
    where
        I: IntoIterator<Item = (K, Option<V>)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let mut coordinator = Self::new(config, coordinator_epoch);
        let mut outcome = LoadOutcome::default();
        for (key, value) in records {
            let key = match decode_key(key.as_ref()) {
                Ok(k) => k,
                Err(e) => {
                    tracing::warn!(error = %e, "skipping undecodable __transaction_state key");
                    outcome.skipped_records += 1;
                    continue;
                }
            };
            let Some(value) = value else {
                coordinator.txns.remove(&key.transactional_id);
                continue;
            };
            match decode_value(value.as_ref()) {
                Ok(v) if v.state == TxnState::Dead => {
                    coordinator.txns.remove(&key.transactional_id);
                }
                Ok(v) => {
                    coordinator.txns.insert(
                        key.transactional_id,
                        TxnMetadata {
                            data: TxnData::from_value(v),
                            pending: None,
                            markers_unwritten: BTreeSet::new(),
                            has_failed_epoch_fence: false,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(
                        transactional_id = %key.transactional_id,
                        error = %e,
                        "skipping undecodable __transaction_state value"
                    );
                    outcome.skipped_records += 1;
                }
            }
        }

        let mut prepared: Vec<String> = coordinator
            .txns
            .iter()
            .filter(|(_, m)| {
                matches!(
                    m.data.state,
                    TxnState::PrepareCommit | TxnState::PrepareAbort
                )
            })
            .map(|(id, _)| id.clone())
            .collect();
        prepared.sort();
        for id in prepared {
            let (markers, append) = coordinator.begin_markers(&id, now_ms);
            outcome.markers.extend(markers);
            outcome.appends.extend(append);
        }
        (coordinator, outcome)
    }

    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// The current state of `transactional_id`, if known.
    pub fn describe(&self, transactional_id: &str) -> Option<TxnDescription> {
        self.txns.get(transactional_id).map(|m| TxnDescription {
            producer_id: m.data.producer_id,
            producer_epoch: m.data.producer_epoch,
            state: m.data.state,
            txn_timeout_ms: m.data.txn_timeout_ms,
            partitions: m.data.partitions.iter().cloned().collect(),
            start_timestamp_ms: m.data.start_timestamp_ms,
            transition_pending: m.pending.is_some(),
        })
    }

    /// Every transactional id of this partition with its description (ListTransactions).
    pub fn list(&self) -> Vec<(String, TxnDescription)> {
        let mut out: Vec<(String, TxnDescription)> = self
            .txns
            .keys()
            .filter_map(|id| self.describe(id).map(|d| (id.clone(), d)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// InitProducerId (`TransactionCoordinator.handleInitProducerId`).
    pub fn init_producer_id(
        &mut self,
        req: &InitProducerIdRequest,
        allocator: &mut dyn ProducerIdAllocator,
        now_ms: i64,
    ) -> Step<InitProducerIdResponse> {
        let reply = |code| Step::Reply(InitProducerIdResponse::error(code));
        let expected = match (req.producer_id, req.producer_epoch) {
            (ProducerId::NONE, ProducerEpoch::NONE) => None,
            (ProducerId::NONE, _) | (_, ProducerEpoch::NONE) => return reply(INVALID_REQUEST),
            (id, epoch) => Some((id, epoch)),
        };
        let Some(transactional_id) = req.transactional_id.as_deref() else {
            // An idempotent producer: always a fresh id.
            return match allocator.allocate() {
                Ok(producer_id) => Step::Reply(InitProducerIdResponse {
                    error_code: NONE,
                    producer_id,
                    producer_epoch: ProducerEpoch(0),
                }),
                Err(code) => reply(code),
            };
        };
        if transactional_id.is_empty() {
            return reply(INVALID_REQUEST);
        }
        if req.transaction_timeout_ms <= 0
            || req.transaction_timeout_ms > self.config.transaction_max_timeout_ms
        {
            return reply(INVALID_TRANSACTION_TIMEOUT);
        }

        if !self.txns.contains_key(transactional_id) {
            let producer_id = match allocator.allocate() {
                Ok(id) => id,
                Err(code) => return reply(code),
            };
            self.txns.insert(
                transactional_id.to_string(),
                TxnMetadata {
                    data: TxnData {
                        producer_id,
                        last_producer_id: ProducerId::NONE,
                        producer_epoch: ProducerEpoch::NONE,
                        last_producer_epoch: ProducerEpoch::NONE,
                        txn_timeout_ms: req.transaction_timeout_ms,
                        state: TxnState::Empty,
                        partitions: BTreeSet::new(),
                        start_timestamp_ms: -1,
                        last_update_timestamp_ms: now_ms,
                    },
                    pending: None,
                    markers_unwritten: BTreeSet::new(),
                    has_failed_epoch_fence: false,
                },
            );
        }
        let Some(meta) = self.txns.get(transactional_id) else {
            return reply(ResponseError::UnknownServerError.code());
        };
        if meta.pending.is_some() {
            return reply(CONCURRENT_TRANSACTIONS);
        }
        let d = &meta.data;
        if let Some((expected_id, expected_epoch)) = expected {
            // KIP-360: a client recovering with its old id/epoch is fenced unless the
            // metadata is brand new, the id is the current one (the epoch is checked
            // below), or it is a retry after a rotation to a new id.
            let valid = d.producer_epoch == ProducerEpoch::NONE
                || expected_id == d.producer_id
                || (expected_id == d.last_producer_id && is_epoch_exhausted(expected_epoch));
            if !valid {
                return reply(PRODUCER_FENCED);
            }
        }
        match d.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => reply(CONCURRENT_TRANSACTIONS),
            TxnState::Ongoing | TxnState::PrepareEpochFence => {
                Step::Append(self.fence_and_abort(transactional_id, Purpose::FenceForInit, now_ms))
            }
            // Dead ids are dropped on load and never created in memory.
            TxnState::Dead => reply(CONCURRENT_TRANSACTIONS),
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let expected_epoch = expected.map(|(_, e)| e);
                let transit = if is_epoch_exhausted(d.producer_epoch)
                    && expected_epoch.is_none_or(|e| e == d.producer_epoch)
                {
                    // The epoch is spent: rotate to a new producer id at epoch 0.
                    let new_id = match allocator.allocate() {
                        Ok(id) => id,
                        Err(code) => return reply(code),
                    };
                    TxnData {
                        producer_id: new_id,
                        last_producer_id: d.producer_id,
                        producer_epoch: ProducerEpoch(0),
                        last_producer_epoch: if expected_epoch.is_some() {
                            d.producer_epoch
                        } else {
                            ProducerEpoch::NONE
                        },
                        txn_timeout_ms: req.transaction_timeout_ms,
                        state: TxnState::Empty,
                        partitions: BTreeSet::new(),
                        start_timestamp_ms: -1,
                        last_update_timestamp_ms: now_ms,
                    }
                } else {
                    let bumped = ProducerEpoch(d.producer_epoch.0 + 1);
                    let (epoch, last_epoch) = match expected_epoch {
                        None => (bumped, ProducerEpoch::NONE),
                        Some(e)
                            if d.producer_epoch == ProducerEpoch::NONE || e == d.producer_epoch =>
                        {
                            (bumped, d.producer_epoch)
                        }
                        // A retry of an InitProducerId that succeeded: same epoch again.
                        Some(e) if e == d.last_producer_epoch => {
                            (d.producer_epoch, d.last_producer_epoch)
                        }
                        Some(_) => return reply(PRODUCER_FENCED),
                    };
                    TxnData {
                        producer_id: d.producer_id,
                        last_producer_id: d.last_producer_id,
                        producer_epoch: epoch,
                        last_producer_epoch: last_epoch,
                        txn_timeout_ms: req.transaction_timeout_ms,
                        state: TxnState::Empty,
                        partitions: BTreeSet::new(),
                        start_timestamp_ms: -1,
                        last_update_timestamp_ms: now_ms,
                    }
                };
                Step::Append(self.prepare(transactional_id, transit, Purpose::InitProducerId))
            }
        }
    }

    /// AddPartitionsToTxn (v3 and below).
    pub fn add_partitions_to_txn(
        &mut self,
        req: &AddPartitionsToTxnRequest,
        now_ms: i64,
    ) -> Step<i16> {
        if req.transactional_id.is_empty() {
            return Step::Reply(INVALID_REQUEST);
        }
        let Some(meta) = self.txns.get(&req.transactional_id) else {
            return Step::Reply(INVALID_PRODUCER_ID_MAPPING);
        };
        let d = &meta.data;
        if d.producer_id != req.producer_id {
            return Step::Reply(INVALID_PRODUCER_ID_MAPPING);
        }
        if d.producer_epoch != req.producer_epoch {
            return Step::Reply(PRODUCER_FENCED);
        }
        if meta.pending.is_some()
            || matches!(d.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
        {
            return Step::Reply(CONCURRENT_TRANSACTIONS);
        }
        if d.state == TxnState::Ongoing && req.partitions.iter().all(|tp| d.partitions.contains(tp))
        {
            return Step::Reply(NONE);
        }
        let start_timestamp_ms = match d.state {
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => now_ms,
            _ => d.start_timestamp_ms,
        };
        let mut transit = d.clone();
        transit.state = TxnState::Ongoing;
        transit.partitions.extend(req.partitions.iter().cloned());
        transit.start_timestamp_ms = start_timestamp_ms;
        transit.last_update_timestamp_ms = now_ms;
        let id = req.transactional_id.clone();
        Step::Append(self.prepare(&id, transit, Purpose::AddPartitions))
    }

    /// AddOffsetsToTxn: adds partition `group_partition_for(group_id)` of
    /// `__consumer_offsets` (the group coordinator's `partitionFor`).
    pub fn add_offsets_to_txn(
        &mut self,
        req: &AddOffsetsToTxnRequest,
        group_partition_for: impl Fn(&str) -> i32,
        now_ms: i64,
    ) -> Step<i16> {
        let add = AddPartitionsToTxnRequest {
            transactional_id: req.transactional_id.clone(),
            producer_id: req.producer_id,
            producer_epoch: req.producer_epoch,
            partitions: vec![TopicPartition::new(
                GROUP_METADATA_TOPIC,
                group_partition_for(&req.group_id),
            )],
        };
        self.add_partitions_to_txn(&add, now_ms)
    }

    /// EndTxn from a client.
    pub fn end_txn(&mut self, req: &EndTxnRequest, now_ms: i64) -> Step<i16> {
        if req.transactional_id.is_empty() {
            return Step::Reply(INVALID_REQUEST);
        }
        let Some(meta) = self.txns.get(&req.transactional_id) else {
            return Step::Reply(INVALID_PRODUCER_ID_MAPPING);
        };
        let d = &meta.data;
        if d.producer_id != req.producer_id {
            return Step::Reply(INVALID_PRODUCER_ID_MAPPING);
        }
        if d.producer_epoch != req.producer_epoch {
            return Step::Reply(PRODUCER_FENCED);
        }
        if meta.pending.is_some() {
            return Step::Reply(CONCURRENT_TRANSACTIONS);
        }
        let code = match (d.state, req.commit) {
            (TxnState::Ongoing, commit) => {
                let mut transit = d.clone();
                transit.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                transit.last_update_timestamp_ms = now_ms;
                let id = req.transactional_id.clone();
                return Step::Append(self.prepare(&id, transit, Purpose::EndTxn));
            }
            // Retries of an EndTxn that already completed succeed.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => NONE,
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                CONCURRENT_TRANSACTIONS
            }
            _ => INVALID_TXN_STATE,
        };
        Step::Reply(code)
    }

    /// Aborts every ongoing transaction older than its timeout, bumping the producer
    /// epoch so the zombie producer is fenced (`abortTimedOutTransactions`).
    pub fn tick(&mut self, now_ms: i64) -> Vec<TxnLogAppend> {
        let mut expired: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, m)| {
                m.pending.is_none()
                    && m.data.state == TxnState::Ongoing
                    && m.data.start_timestamp_ms + i64::from(m.data.txn_timeout_ms) < now_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        expired.sort();
        expired
            .into_iter()
            .map(|id| {
                tracing::info!(transactional_id = %id, "aborting timed-out transaction");
                self.fence_and_abort(&id, Purpose::FenceForTimeout, now_ms)
            })
            .collect()
    }

    /// Reports the outcome of appending `append`: `Ok` once the record is durable, or the
    /// produce error code. A stale or unknown append is ignored.
    pub fn append_completed(
        &mut self,
        transactional_id: &str,
        seq: u64,
        result: Result<(), i16>,
        now_ms: i64,
    ) -> AppendCompletion {
        let Some(meta) = self.txns.get_mut(transactional_id) else {
            return AppendCompletion::default();
        };
        let Some(pending) = meta.pending.take_if(|p| p.seq == seq) else {
            tracing::debug!(
                transactional_id,
                seq,
                "ignoring completion of a stale append"
            );
            return AppendCompletion::default();
        };

        if let Err(code) = result {
            let client_code = append_error_to_client(code);
            let mut completion = AppendCompletion::default();
            match pending.purpose {
                Purpose::Complete => {
                    if client_code == NOT_COORDINATOR {
                        // The partition moved; its new coordinator resumes from the log.
                        meta.pending = Some(pending);
                    } else {
                        completion.next_append = Some(Self::append_for(transactional_id, &pending));
                        meta.pending = Some(pending);
                    }
                    return completion;
                }
                Purpose::FenceForInit | Purpose::FenceForTimeout => {
                    meta.has_failed_epoch_fence = true;
                }
                _ => {}
            }
            tracing::warn!(
                transactional_id,
                error_code = code,
                "__transaction_state append failed"
            );
            completion.response = match pending.purpose {
                Purpose::InitProducerId | Purpose::FenceForInit => Some(
                    TxnResponse::InitProducerId(InitProducerIdResponse::error(client_code)),
                ),
                Purpose::AddPartitions | Purpose::EndTxn => {
                    Some(TxnResponse::ErrorCode(client_code))
                }
                Purpose::FenceForTimeout | Purpose::Complete => None,
            };
            return completion;
        }

        // The transition is durable: it takes effect.
        let transit = pending.transit;
        if transit.producer_id == meta.data.producer_id {
            assert!(
                transit.producer_epoch >= meta.data.producer_epoch,
                "producer epoch of {transactional_id} going backwards: {} -> {}",
                meta.data.producer_epoch,
                transit.producer_epoch
            );
        }
        meta.data = transit;
        let mut completion = AppendCompletion::default();
        match pending.purpose {
            Purpose::InitProducerId => {
                completion.response = Some(TxnResponse::InitProducerId(InitProducerIdResponse {
                    error_code: NONE,
                    producer_id: meta.data.producer_id,
                    producer_epoch: meta.data.producer_epoch,
                }));
            }
            Purpose::AddPartitions => completion.response = Some(TxnResponse::ErrorCode(NONE)),
            Purpose::EndTxn | Purpose::FenceForInit | Purpose::FenceForTimeout => {
                meta.has_failed_epoch_fence = false;
                completion.response = match pending.purpose {
                    Purpose::EndTxn => Some(TxnResponse::ErrorCode(NONE)),
                    // The client retries and gets the second epoch bump.
                    Purpose::FenceForInit => Some(TxnResponse::InitProducerId(
                        InitProducerIdResponse::error(CONCURRENT_TRANSACTIONS),
                    )),
                    _ => None,
                };
                let (markers, append) = self.begin_markers(transactional_id, now_ms);
                completion.markers = markers;
                completion.next_append = append;
            }
            Purpose::Complete => {}
        }
        completion
    }

    /// Reports that `marker` was written to its partition (or that the partition no
    /// longer exists). After the transaction's last marker, returns the
    /// CompleteCommit/CompleteAbort record to append.
    pub fn marker_written(&mut self, marker: &TxnMarker) -> Option<TxnLogAppend> {
        let meta = self.txns.get_mut(&marker.transactional_id)?;
        let pending = meta.pending.as_ref()?;
        if pending.purpose != Purpose::Complete
            || meta.data.producer_id != marker.producer_id
            || meta.data.producer_epoch != marker.producer_epoch
        {
            return None;
        }
        if meta.markers_unwritten.remove(&marker.topic_partition)
            && meta.markers_unwritten.is_empty()
        {
            Some(Self::append_for(&marker.transactional_id, pending))
        } else {
            None
        }
    }

    /// Every marker not yet reported written, to resend after a failure.
    pub fn unwritten_markers(&self) -> Vec<TxnMarker> {
        let mut ids: Vec<&String> = self
            .txns
            .iter()
            .filter(|(_, m)| !m.markers_unwritten.is_empty())
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        ids.into_iter()
            .flat_map(|id| self.markers_of(id, &self.txns[id]))
            .collect()
    }

    fn markers_of(&self, id: &str, meta: &TxnMetadata) -> Vec<TxnMarker> {
        let commit = meta.data.state == TxnState::PrepareCommit;
        meta.markers_unwritten
            .iter()
            .map(|tp| TxnMarker {
                transactional_id: id.to_string(),
                topic_partition: tp.clone(),
                producer_id: meta.data.producer_id,
                producer_epoch: meta.data.producer_epoch,
                commit,
                coordinator_epoch: self.coordinator_epoch,
            })
            .collect()
    }

    /// A transaction is in PrepareCommit/PrepareAbort: prepares its completion
    /// (`prepareComplete`) and returns its markers, or the completion record right away
    /// when there is nothing to mark.
    fn begin_markers(&mut self, id: &str, now_ms: i64) -> (Vec<TxnMarker>, Option<TxnLogAppend>) {
        let seq = self.next_seq();
        let Some(meta) = self.txns.get_mut(id) else {
            return (Vec::new(), None);
        };
        let mut transit = meta.data.clone();
        transit.state = match meta.data.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => panic!("begin_markers for {id} in state {other:?}"),
        };
        transit.partitions.clear();
        transit.last_update_timestamp_ms = now_ms;
        meta.markers_unwritten = meta.data.partitions.clone();
        let pending = Pending {
            seq,
            transit,
            purpose: Purpose::Complete,
        };
        let append = meta
            .markers_unwritten
            .is_empty()
            .then(|| Self::append_for(id, &pending));
        meta.pending = Some(pending);
        let meta = &self.txns[id];
        (self.markers_of(id, meta), append)
    }

    /// Fences the producer (epoch bump, unless a failed fence already bumped it or the
    /// epoch is at its maximum) and prepares PrepareAbort with the bumped epoch.
    fn fence_and_abort(&mut self, id: &str, purpose: Purpose, now_ms: i64) -> TxnLogAppend {
        let meta = self
            .txns
            .get_mut(id)
            .unwrap_or_else(|| panic!("fence_and_abort for unknown transactional id {id}"));
        if !meta.has_failed_epoch_fence && meta.data.producer_epoch.0 < i16::MAX {
            meta.data.producer_epoch = ProducerEpoch(meta.data.producer_epoch.0 + 1);
        }
        meta.data.last_producer_epoch = ProducerEpoch::NONE;
        let mut transit = meta.data.clone();
        transit.state = TxnState::PrepareAbort;
        transit.last_update_timestamp_ms = now_ms;
        self.prepare(id, transit, purpose)
    }

    fn prepare(&mut self, id: &str, transit: TxnData, purpose: Purpose) -> TxnLogAppend {
        let seq = self.next_seq();
        let meta = self
            .txns
            .get_mut(id)
            .unwrap_or_else(|| panic!("prepare for unknown transactional id {id}"));
        assert!(
            meta.pending.is_none(),
            "{id} already has a pending transition"
        );
        let pending = Pending {
            seq,
            transit,
            purpose,
        };
        let append = Self::append_for(id, &pending);
        meta.pending = Some(pending);
        append
    }

    fn append_for(id: &str, pending: &Pending) -> TxnLogAppend {
        TxnLogAppend {
            transactional_id: id.to_string(),
            key: encode_key(id),
            value: encode_value(&pending.transit.to_value(), VALUE_VERSION_WRITTEN),
            seq: pending.seq,
        }
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT_MS: i32 = 60_000;

    fn coordinator() -> (TransactionCoordinator, SequentialProducerIds) {
        (
            TransactionCoordinator::new(TransactionConfig::default(), 7),
            SequentialProducerIds {
                next: ProducerId(1000),
            },
        )
    }

    fn expect_append<R: std::fmt::Debug>(step: Step<R>) -> TxnLogAppend {
        match step {
            Step::Append(a) => a,
            Step::Reply(r) => panic!("expected an append, got reply {r:?}"),
        }
    }

    fn expect_reply<R>(step: Step<R>) -> R {
        match step {
            Step::Reply(r) => r,
            Step::Append(a) => panic!("expected a reply, got append {a:?}"),
        }
    }

    /// Appends succeed: completes the append and returns the completion.
    fn ok(c: &mut TransactionCoordinator, a: &TxnLogAppend, now_ms: i64) -> AppendCompletion {
        c.append_completed(&a.transactional_id, a.seq, Ok(()), now_ms)
    }

    fn init(
        c: &mut TransactionCoordinator,
        ids: &mut SequentialProducerIds,
        id: &str,
        now_ms: i64,
    ) -> InitProducerIdResponse {
        let req = InitProducerIdRequest {
            transactional_id: Some(id.into()),
            transaction_timeout_ms: TIMEOUT_MS,
            producer_id: ProducerId::NONE,
            producer_epoch: ProducerEpoch::NONE,
        };
        let a = expect_append(c.init_producer_id(&req, ids, now_ms));
        match ok(c, &a, now_ms).response {
            Some(TxnResponse::InitProducerId(r)) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn add(
        c: &mut TransactionCoordinator,
        id: &str,
        p: InitProducerIdResponse,
        tps: &[(&str, i32)],
        now_ms: i64,
    ) -> Step<i16> {
        c.add_partitions_to_txn(
            &AddPartitionsToTxnRequest {
                transactional_id: id.into(),
                producer_id: p.producer_id,
                producer_epoch: p.producer_epoch,
                partitions: tps
                    .iter()
                    .map(|(t, n)| TopicPartition::new(*t, *n))
                    .collect(),
            },
            now_ms,
        )
    }

    fn end(
        c: &mut TransactionCoordinator,
        id: &str,
        p: InitProducerIdResponse,
        commit: bool,
        now_ms: i64,
    ) -> Step<i16> {
        c.end_txn(
            &EndTxnRequest {
                transactional_id: id.into(),
                producer_id: p.producer_id,
                producer_epoch: p.producer_epoch,
                commit,
            },
            now_ms,
        )
    }

    fn state_of(c: &TransactionCoordinator, id: &str) -> TxnState {
        c.describe(id).expect("known id").state
    }

    /// Writes every marker; returns the completion record.
    fn write_markers(c: &mut TransactionCoordinator, markers: &[TxnMarker]) -> TxnLogAppend {
        let mut done = None;
        for (i, m) in markers.iter().enumerate() {
            let r = c.marker_written(m);
            if i + 1 < markers.len() {
                assert!(r.is_none());
            } else {
                done = r;
            }
        }
        done.expect("the last marker completes the transaction")
    }

    fn logged_state(a: &TxnLogAppend) -> TxnState {
        decode_value(&a.value).expect("valid value").state
    }

    #[test]
    fn init_add_commit_happy_path_with_markers() {
        let (mut c, mut ids) = coordinator();
        let p = init(&mut c, &mut ids, "tx", 0);
        assert_eq!(p.error_code, NONE);
        assert_eq!(p.producer_id, ProducerId(1000));
        assert_eq!(p.producer_epoch, ProducerEpoch(0));
        assert_eq!(state_of(&c, "tx"), TxnState::Empty);

        let a = expect_append(add(&mut c, "tx", p, &[("t", 0), ("t", 1)], 10));
        assert_eq!(logged_state(&a), TxnState::Ongoing);
        // Pending: the state has not changed yet and other requests must wait.
        assert_eq!(state_of(&c, "tx"), TxnState::Empty);
        assert_eq!(
            expect_reply(end(&mut c, "tx", p, true, 11)),
            CONCURRENT_TRANSACTIONS
        );
        assert_eq!(
            ok(&mut c, &a, 12).response,
            Some(TxnResponse::ErrorCode(NONE))
        );
        assert_eq!(state_of(&c, "tx"), TxnState::Ongoing);
        // Already-added partitions answer at once; offsets add __consumer_offsets.
        assert_eq!(expect_reply(add(&mut c, "tx", p, &[("t", 1)], 13)), NONE);
        let a = expect_append(c.add_offsets_to_txn(
            &AddOffsetsToTxnRequest {
                transactional_id: "tx".into(),
                producer_id: p.producer_id,
                producer_epoch: p.producer_epoch,
                group_id: "g".into(),
            },
            |_| 3,
            14,
        ));
        ok(&mut c, &a, 14);
        assert!(c
            .describe("tx")
            .expect("known")
            .partitions
            .contains(&TopicPartition::new(GROUP_METADATA_TOPIC, 3)));

        let a = expect_append(end(&mut c, "tx", p, true, 20));
        assert_eq!(logged_state(&a), TxnState::PrepareCommit);
        let done = ok(&mut c, &a, 21);
        assert_eq!(done.response, Some(TxnResponse::ErrorCode(NONE)));
        assert_eq!(done.markers.len(), 3);
        for m in &done.markers {
            assert!(m.commit);
            assert_eq!(m.producer_id, p.producer_id);
            assert_eq!(m.producer_epoch, p.producer_epoch);
            assert_eq!(m.coordinator_epoch, 7);
            assert!(!m.batch(21).is_empty());
        }
        assert_eq!(state_of(&c, "tx"), TxnState::PrepareCommit);
        // While markers are in flight the producer must wait.
        assert_eq!(
            expect_reply(add(&mut c, "tx", p, &[("t", 2)], 22)),
            CONCURRENT_TRANSACTIONS
        );
        assert_eq!(c.unwritten_markers(), done.markers);

        let complete = write_markers(&mut c, &done.markers);
        assert_eq!(logged_state(&complete), TxnState::CompleteCommit);
        assert_eq!(ok(&mut c, &complete, 23), AppendCompletion::default());
        assert_eq!(state_of(&c, "tx"), TxnState::CompleteCommit);
        assert!(c.unwritten_markers().is_empty());
        // A retried commit succeeds; an abort now is invalid.
        assert_eq!(expect_reply(end(&mut c, "tx", p, true, 24)), NONE);
        assert_eq!(
            expect_reply(end(&mut c, "tx", p, false, 24)),
            INVALID_TXN_STATE
        );

        // The next transaction starts from CompleteCommit.
        let a = expect_append(add(&mut c, "tx", p, &[("u", 0)], 30));
        ok(&mut c, &a, 30);
        let d = c.describe("tx").expect("known");
        assert_eq!(d.state, TxnState::Ongoing);
        assert_eq!(d.start_timestamp_ms, 30);
        assert_eq!(d.partitions, vec![TopicPartition::new("u", 0)]);
    }

    #[test]
    fn abort_writes_abort_markers() {
        let (mut c, mut ids) = coordinator();
        let p = init(&mut c, &mut ids, "tx", 0);
        let a = expect_append(add(&mut c, "tx", p, &[("t", 0)], 1));
        ok(&mut c, &a, 1);
        let a = expect_append(end(&mut c, "tx", p, false, 2));
        assert_eq!(logged_state(&a), TxnState::PrepareAbort);
        let done = ok(&mut c, &a, 2);
        assert_eq!(done.markers.len(), 1);
        assert!(!done.markers[0].commit);
        // A concurrent commit while aborting is invalid; a concurrent abort must wait.
        assert_eq!(
            expect_reply(end(&mut c, "tx", p, true, 3)),
            CONCURRENT_TRANSACTIONS
        );
        let complete = write_markers(&mut c, &done.markers);
        assert_eq!(logged_state(&complete), TxnState::CompleteAbort);
        ok(&mut c, &complete, 4);
        assert_eq!(state_of(&c, "tx"), TxnState::CompleteAbort);
        assert_eq!(
            expect_reply(end(&mut c, "tx", p, true, 5)),
            INVALID_TXN_STATE
        );
        // EndTxn with nothing ongoing is invalid.
        let (mut c2, mut ids2) = coordinator();
        let p2 = init(&mut c2, &mut ids2, "other", 0);
        assert_eq!(
            expect_reply(end(&mut c2, "other", p2, true, 1)),
            INVALID_TXN_STATE
        );
    }

    #[test]
    fn second_producer_fences_the_first() {
        let (mut c, mut ids) = coordinator();
        let old = init(&mut c, &mut ids, "tx", 0);
        let a = expect_append(add(&mut c, "tx", old, &[("t", 0)], 1));
        ok(&mut c, &a, 1);

        // The new producer's InitProducerId aborts the ongoing transaction first.
        let req = InitProducerIdRequest {
            transactional_id: Some("tx".into()),
            transaction_timeout_ms: TIMEOUT_MS,
            producer_id: ProducerId::NONE,
            producer_epoch: ProducerEpoch::NONE,
        };
        let a = expect_append(c.init_producer_id(&req, &mut ids, 2));
        let fenced = decode_value(&a.value).expect("valid");
        assert_eq!(fenced.state, TxnState::PrepareAbort);
        assert_eq!(fenced.producer_epoch, ProducerEpoch(1));
        // The old producer is fenced as soon as the fence is prepared.
        assert_eq!(
            expect_reply(end(&mut c, "tx", old, true, 2)),
            PRODUCER_FENCED
        );
        let done = ok(&mut c, &a, 3);
        assert_eq!(
            done.response,
            Some(TxnResponse::InitProducerId(InitProducerIdResponse::error(
                CONCURRENT_TRANSACTIONS
            )))
        );
        assert_eq!(done.markers.len(), 1);
        assert!(!done.markers[0].commit);
        assert_eq!(done.markers[0].producer_epoch, ProducerEpoch(1));
        // Retrying while the abort completes still answers CONCURRENT_TRANSACTIONS.
        assert_eq!(
            expect_reply(c.init_producer_id(&req, &mut ids, 4)).error_code,
            CONCURRENT_TRANSACTIONS
        );
        let complete = write_markers(&mut c, &done.markers);
        ok(&mut c, &complete, 5);

        let new = init(&mut c, &mut ids, "tx", 6);
        assert_eq!(new.producer_id, old.producer_id);
        assert_eq!(new.producer_epoch, ProducerEpoch(2));
        assert_eq!(
            expect_reply(add(&mut c, "tx", old, &[("t", 1)], 7)),
            PRODUCER_FENCED
        );
        assert_eq!(
            expect_reply(end(&mut c, "tx", old, false, 7)),
            PRODUCER_FENCED
        );
        assert_eq!(
            fenced_code_for_client(PRODUCER_FENCED, true),
            ResponseError::InvalidProducerEpoch.code()
        );
        let stranger = InitProducerIdResponse {
            error_code: NONE,
            producer_id: ProducerId(99),
            producer_epoch: ProducerEpoch(0),
        };
        assert_eq!(
            expect_reply(add(&mut c, "tx", stranger, &[("t", 1)], 7)),
            INVALID_PRODUCER_ID_MAPPING
        );
        assert_eq!(
            expect_reply(add(&mut c, "nobody", stranger, &[("t", 1)], 7)),
            INVALID_PRODUCER_ID_MAPPING
        );
    }

    #[test]
    fn init_validates_timeout_and_handles_idempotent_producers() {
        let (mut c, mut ids) = coordinator();
        let mut req = InitProducerIdRequest {
            transactional_id: Some("tx".into()),
            transaction_timeout_ms: TRANSACTION_MAX_TIMEOUT_MS_DEFAULT + 1,
            producer_id: ProducerId::NONE,
            producer_epoch: ProducerEpoch::NONE,
        };
        assert_eq!(
            expect_reply(c.init_producer_id(&req, &mut ids, 0)).error_code,
            INVALID_TRANSACTION_TIMEOUT
        );
        req.transaction_timeout_ms = 0;
        assert_eq!(
            expect_reply(c.init_producer_id(&req, &mut ids, 0)).error_code,
            INVALID_TRANSACTION_TIMEOUT
        );
        req.transactional_id = None;
        let r = expect_reply(c.init_producer_id(&req, &mut ids, 0));
        assert_eq!((r.error_code, r.producer_epoch), (NONE, ProducerEpoch(0)));
        req.transactional_id = Some(String::new());
        req.transaction_timeout_ms = TIMEOUT_MS;
        assert_eq!(
            expect_reply(c.init_producer_id(&req, &mut ids, 0)).error_code,
            INVALID_REQUEST
        );
    }

    #[test]
    fn exhausted_epoch_rotates_the_producer_id() {
        let (mut c, mut ids) = coordinator();
        let first = init(&mut c, &mut ids, "tx", 0);
        c.txns.get_mut("tx").expect("known").data.producer_epoch = ProducerEpoch(i16::MAX - 1);
        let next = init(&mut c, &mut ids, "tx", 1);
        assert_ne!(next.producer_id, first.producer_id);
        assert_eq!(next.producer_epoch, ProducerEpoch(0));
    }

    #[test]
    fn timed_out_transaction_is_aborted_and_the_zombie_fenced() {
        let (mut c, mut ids) = coordinator();
        let p = init(&mut c, &mut ids, "tx", 0);
        let a = expect_append(add(&mut c, "tx", p, &[("t", 0), ("t", 1)], 1_000));
        ok(&mut c, &a, 1_000);
        assert!(c.tick(1_000 + i64::from(TIMEOUT_MS)).is_empty());

        let appends = c.tick(1_001 + i64::from(TIMEOUT_MS));
        assert_eq!(appends.len(), 1);
        let v = decode_value(&appends[0].value).expect("valid");
        assert_eq!(v.state, TxnState::PrepareAbort);
        assert_eq!(v.producer_epoch, ProducerEpoch(1));
        // Not aborted twice while the first abort is pending.
        assert!(c.tick(2_000_000).is_empty());
        let done = ok(&mut c, &appends[0], 70_000);
        assert_eq!(done.response, None);
        assert_eq!(done.markers.len(), 2);
        assert!(done
            .markers
            .iter()
            .all(|m| !m.commit && m.producer_epoch == ProducerEpoch(1)));
        let complete = write_markers(&mut c, &done.markers);
        ok(&mut c, &complete, 70_001);
        assert_eq!(state_of(&c, "tx"), TxnState::CompleteAbort);
        // The zombie's commit is fenced.
        assert_eq!(
            expect_reply(end(&mut c, "tx", p, true, 70_002)),
            PRODUCER_FENCED
        );
    }

    #[test]
    fn failed_append_reverts_and_failed_fence_does_not_bump_twice() {
        let (mut c, mut ids) = coordinator();
        let p = init(&mut c, &mut ids, "tx", 0);
        let a = expect_append(add(&mut c, "tx", p, &[("t", 0)], 1));
        let failed = c.append_completed(
            "tx",
            a.seq,
            Err(ResponseError::NotLeaderOrFollower.code()),
            1,
        );
        assert_eq!(
            failed.response,
            Some(TxnResponse::ErrorCode(NOT_COORDINATOR))
        );
        assert_eq!(state_of(&c, "tx"), TxnState::Empty);
        let a = expect_append(add(&mut c, "tx", p, &[("t", 0)], 2));
        ok(&mut c, &a, 2);

        let fence = c.tick(1_000_000);
        c.append_completed(
            "tx",
            fence[0].seq,
            Err(ResponseError::RequestTimedOut.code()),
            3,
        );
        assert_eq!(state_of(&c, "tx"), TxnState::Ongoing);
        let again = c.tick(1_000_001);
        assert_eq!(
            decode_value(&again[0].value).expect("valid").producer_epoch,
            ProducerEpoch(1)
        );
        // A stale completion is ignored.
        assert_eq!(
            c.append_completed("tx", fence[0].seq, Ok(()), 4),
            AppendCompletion::default()
        );
    }

    #[test]
    fn load_resumes_prepare_commit() {
        let (mut c, mut ids) = coordinator();
        let mut log: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        let mut record = |a: &TxnLogAppend| log.push((a.key.clone(), Some(a.value.clone())));

        let p = init(&mut c, &mut ids, "tx", 0);
        // Re-create the init record as the log would hold it.
        let mut d = c.txns["tx"].data.clone();
        record(&TxnLogAppend {
            transactional_id: "tx".into(),
            key: encode_key("tx"),
            value: encode_value(&d.to_value(), 0),
            seq: 0,
        });
        let a = expect_append(add(&mut c, "tx", p, &[("t", 0), ("u", 3)], 1));
        record(&a);
        ok(&mut c, &a, 1);
        let a = expect_append(end(&mut c, "tx", p, true, 2));
        record(&a);
        ok(&mut c, &a, 2);
        // A second id that completed, and a third that was deleted.
        d.producer_id = ProducerId(5);
        d.state = TxnState::CompleteAbort;
        record(&TxnLogAppend {
            transactional_id: "done".into(),
            key: encode_key("done"),
            value: encode_value(&d.to_value(), 0),
            seq: 0,
        });
        log.push((encode_key("gone"), Some(encode_value(&d.to_value(), 0))));
        log.push((encode_key("gone"), None));
        log.push((vec![0, 9], Some(vec![1, 2, 3])));

        // The broker crashes before any marker is written.
        let (mut loaded, outcome) =
            TransactionCoordinator::load(TransactionConfig::default(), 8, log, 100);
        assert_eq!(outcome.skipped_records, 1);
        assert!(outcome.appends.is_empty());
        assert!(loaded.describe("gone").is_none());
        assert_eq!(state_of(&loaded, "done"), TxnState::CompleteAbort);
        assert_eq!(state_of(&loaded, "tx"), TxnState::PrepareCommit);
        assert_eq!(outcome.markers.len(), 2);
        for m in &outcome.markers {
            assert!(m.commit);
            assert_eq!(m.coordinator_epoch, 8);
            assert_eq!(
                (m.producer_id, m.producer_epoch),
                (p.producer_id, p.producer_epoch)
            );
        }
        // The producer retrying its commit waits for the markers.
        assert_eq!(
            expect_reply(end(&mut loaded, "tx", p, true, 101)),
            CONCURRENT_TRANSACTIONS
        );
        let complete = write_markers(&mut loaded, &outcome.markers);
        assert_eq!(logged_state(&complete), TxnState::CompleteCommit);
        ok(&mut loaded, &complete, 102);
        assert_eq!(state_of(&loaded, "tx"), TxnState::CompleteCommit);
        assert_eq!(expect_reply(end(&mut loaded, "tx", p, true, 103)), NONE);
    }
}
