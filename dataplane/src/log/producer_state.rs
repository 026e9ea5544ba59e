//! Producer state: Kafka's `ProducerStateManager`, `ProducerAppendInfo` and
//! `ProducerStateEntry` (storage module), rebuilt from record batch headers only.
//!
//! For every idempotent or transactional producer of a partition the manager keeps its
//! epoch, the metadata of its last [`NUM_BATCHES_TO_RETAIN`] batches (for duplicate
//! detection and sequence checks), its coordinator epoch and the first offset of its
//! open transaction. Ongoing transactions, ordered by first offset, give the first
//! unstable offset and so the last stable offset (LSO) that `read_committed` consumers
//! may read up to.
//!
//! An append is validated first, without touching the manager: [`ProducerStateManager::
//! begin_append`] returns an owned [`ProducerAppend`] overlay that checks every batch of
//! the append in order; only when the whole append was accepted and written does
//! [`ProducerStateManager::commit`] apply it. A rejected append is simply dropped.
//!
//! Twinlog's MIRROR_PID_RESET control batch (shared/spec/DECISIONS.md) removes every
//! producer entry and ongoing transaction, whatever the origin of the append.
//!
//! This module does no I/O: snapshots are encoded to and decoded from bytes, and the
//! caller writes and reads the files.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::{Offset, ProducerEpoch, ProducerId};
use crate::wire::batch::RecordBatch;
use crate::wire::control::{ControlRecordError, ControlType};

/// How many batches' metadata are kept per producer: the most a producer may have in
/// flight (`max.in.flight.requests.per.connection` <= 5 for idempotence).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

/// Kafka's `RecordBatch.NO_SEQUENCE`.
const NO_SEQUENCE: i32 = -1;
/// Kafka's `RecordBatch.NO_TIMESTAMP`.
const NO_TIMESTAMP: i64 = -1;
/// Coordinator epoch of a producer that has never seen a marker.
const NO_COORDINATOR_EPOCH: i32 = -1;

/// Who is appending, which decides how strictly batches are checked (Kafka's
/// `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A produce request: epochs, sequences and transaction state are all checked.
    Client,
    /// The broker's own writes (transaction markers, the MIRROR_PID_RESET batch):
    /// epochs and transaction state are checked, sequences are not.
    Coordinator,
    /// Batches that were already accepted elsewhere: follower replication, mirror
    /// passthrough and log recovery. Nothing is rejected; anomalies are logged.
    Replication,
}

/// What is remembered of one appended data batch (Kafka's `BatchMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub last_offset: Offset,
    /// `last_offset - first_offset`.
    pub offset_delta: i32,
    /// The batch's max timestamp.
    pub timestamp_ms: i64,
}

impl BatchMetadata {
    pub fn first_offset(&self) -> Offset {
        Offset(self.last_offset.0 - i64::from(self.offset_delta))
    }
}

/// The state of one producer id in one partition (Kafka's `ProducerStateEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: ProducerId,
    /// [`ProducerEpoch::NONE`] for a producer this partition has not seen yet.
    pub producer_epoch: ProducerEpoch,
    /// The last batches of the current epoch, oldest first, at most
    /// [`NUM_BATCHES_TO_RETAIN`].
    pub batches: VecDeque<BatchMetadata>,
    /// Epoch of the transaction coordinator that wrote the last marker; -1 if none.
    pub coordinator_epoch: i32,
    pub last_timestamp_ms: i64,
    /// First offset of the producer's open transaction.
    pub current_txn_first_offset: Option<Offset>,
}

impl ProducerStateEntry {
    /// The state of a producer id that has no history here.
    pub fn empty(producer_id: ProducerId) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: ProducerEpoch::NONE,
            batches: VecDeque::new(),
            coordinator_epoch: NO_COORDINATOR_EPOCH,
            last_timestamp_ms: NO_TIMESTAMP,
            current_txn_first_offset: None,
        }
    }

    /// True when no batch metadata is retained.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// First sequence of the oldest retained batch, or -1.
    pub fn first_seq(&self) -> i32 {
        self.batches.front().map_or(NO_SEQUENCE, |b| b.first_seq)
    }

    /// Last sequence of the newest retained batch, or -1.
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// First offset of the oldest retained batch, or [`Offset::UNDEFINED`].
    pub fn first_data_offset(&self) -> Offset {
        self.batches
            .front()
            .map_or(Offset::UNDEFINED, BatchMetadata::first_offset)
    }

    /// Last offset of the newest retained batch, or [`Offset::UNDEFINED`].
    pub fn last_data_offset(&self) -> Offset {
        self.batches
            .back()
            .map_or(Offset::UNDEFINED, |b| b.last_offset)
    }

    /// The retained batch that `batch` retries: same epoch and same sequence range.
    pub fn find_duplicate_batch(&self, batch: &RecordBatch) -> Option<&BatchMetadata> {
        if batch.producer_epoch() != self.producer_epoch {
            return None;
        }
        let first_seq = batch.base_sequence();
        let last_seq = batch.last_sequence();
        self.batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
    }

    /// A new epoch forgets the batches of the old one.
    fn maybe_update_producer_epoch(&mut self, producer_epoch: ProducerEpoch) {
        if self.producer_epoch != producer_epoch {
            self.batches.clear();
            self.producer_epoch = producer_epoch;
        }
    }

    fn add_batch_metadata(&mut self, batch: BatchMetadata) {
        if self.batches.len() >= NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
    }

    fn add_batch(&mut self, producer_epoch: ProducerEpoch, batch: BatchMetadata) {
        self.maybe_update_producer_epoch(producer_epoch);
        self.add_batch_metadata(batch);
        self.last_timestamp_ms = batch.timestamp_ms;
    }

    /// Folds the entry an append produced into this committed one (Kafka's
    /// `ProducerStateEntry.update`).
    fn update(&mut self, next: ProducerStateEntry) {
        assert_eq!(
            self.producer_id, next.producer_id,
            "producer state update applied to the wrong producer"
        );
        self.maybe_update_producer_epoch(next.producer_epoch);
        for batch in next.batches {
            self.add_batch_metadata(batch);
        }
        self.coordinator_epoch = next.coordinator_epoch;
        self.current_txn_first_offset = next.current_txn_first_offset;
        self.last_timestamp_ms = next.last_timestamp_ms;
    }
}

/// Where an earlier copy of a retried batch was written, for the produce response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DuplicateBatch {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub timestamp_ms: i64,
}

/// A transaction that a COMMIT or ABORT marker ended (Kafka's `CompletedTxn`, with the
/// LSO the transaction index entry needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: ProducerId,
    pub first_offset: Offset,
    /// Offset of the marker.
    pub last_offset: Offset,
    pub is_aborted: bool,
    /// The LSO right after this transaction completed (Kafka's
    /// `lastStableOffset(completedTxn)`): the first offset of the earliest other ongoing
    /// transaction, else `last_offset + 1`.
    pub last_stable_offset: Offset,
}

/// Why a batch is rejected. Each maps to the Kafka error code of the same name at the
/// API boundary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerStateError {
    #[error("out of order sequence number for producer {producer_id} at offset {offset}: first sequence {first_seq}, expected {expected_seq} (batch epoch {producer_epoch}, current epoch {current_epoch}, current last sequence {current_last_seq})")]
    OutOfOrderSequence {
        producer_id: ProducerId,
        offset: Offset,
        producer_epoch: ProducerEpoch,
        current_epoch: ProducerEpoch,
        first_seq: i32,
        current_last_seq: i32,
        expected_seq: i32,
    },
    #[error("epoch of producer {producer_id} at offset {offset} is {producer_epoch}, smaller than the last seen epoch {current_epoch}")]
    InvalidProducerEpoch {
        producer_id: ProducerId,
        offset: Offset,
        producer_epoch: ProducerEpoch,
        current_epoch: ProducerEpoch,
    },
    #[error("transaction marker for producer {producer_id} at offset {offset} has epoch {producer_epoch}, smaller than the last seen epoch {current_epoch}")]
    ProducerFenced {
        producer_id: ProducerId,
        offset: Offset,
        producer_epoch: ProducerEpoch,
        current_epoch: ProducerEpoch,
    },
    #[error("non-transactional batch from producer {producer_id} at offset {offset} while its transaction from offset {txn_first_offset} is open")]
    InvalidTxnState {
        producer_id: ProducerId,
        offset: Offset,
        txn_first_offset: Offset,
    },
    #[error("transaction marker for producer {producer_id} at offset {offset} has coordinator epoch {coordinator_epoch}, older than the current {current_coordinator_epoch}")]
    TransactionCoordinatorFenced {
        producer_id: ProducerId,
        offset: Offset,
        coordinator_epoch: i32,
        current_coordinator_epoch: i32,
    },
    #[error("control batch of producer {producer_id} at offset {offset} has a bad control record: {source}")]
    BadControlRecord {
        producer_id: ProducerId,
        offset: Offset,
        #[source]
        source: ControlRecordError,
    },
}

/// Gives each manager an identity so that an append overlay is never committed to a
/// manager it was not validated against.
static NEXT_MANAGER_ID: AtomicU64 = AtomicU64::new(0);

/// The producer state of one partition (Kafka's `ProducerStateManager`).
#[derive(Debug)]
pub struct ProducerStateManager {
    entries: HashMap<ProducerId, ProducerStateEntry>,
    /// Open transactions by first offset.
    ongoing_txns: BTreeMap<Offset, ProducerId>,
    /// Completed transactions whose marker is not yet below the high watermark, by
    /// first offset, with the marker offset. They still bound the LSO: a replica that
    /// becomes leader may not have the marker.
    unreplicated_txns: BTreeMap<Offset, (ProducerId, Offset)>,
    /// The offset after the last batch the state reflects.
    map_end_offset: Offset,
    producer_id_expiration_ms: i64,
    manager_id: u64,
    /// Bumped by every mutation; an overlay must be committed at the generation it
    /// began at.
    generation: u64,
}

impl ProducerStateManager {
    pub fn new(producer_id_expiration_ms: i64) -> Self {
        ProducerStateManager {
            entries: HashMap::new(),
            ongoing_txns: BTreeMap::new(),
            unreplicated_txns: BTreeMap::new(),
            map_end_offset: Offset(0),
            producer_id_expiration_ms,
            manager_id: NEXT_MANAGER_ID.fetch_add(1, Ordering::Relaxed),
            generation: 0,
        }
    }

    pub fn producer_id_expiration_ms(&self) -> i64 {
        self.producer_id_expiration_ms
    }

    /// For a client batch that retries one already written: where it was written.
    /// Kafka checks this for [`AppendOrigin::Client`] appends only, before validation.
    pub fn find_duplicate(&self, batch: &RecordBatch) -> Option<DuplicateBatch> {
        if !batch.has_producer_id() {
            return None;
        }
        let entry = self.entries.get(&batch.producer_id())?;
        entry
            .find_duplicate_batch(batch)
            .map(|meta| DuplicateBatch {
                base_offset: meta.first_offset(),
                last_offset: meta.last_offset,
                timestamp_ms: meta.timestamp_ms,
            })
    }

    /// Starts validating one append. The overlay borrows nothing; pass this manager to
    /// each [`ProducerAppend::append`] and then to [`ProducerStateManager::commit`]
    /// without changing it in between.
    pub fn begin_append(&self, origin: AppendOrigin) -> ProducerAppend {
        ProducerAppend {
            origin,
            manager_id: self.manager_id,
            generation: self.generation,
            done: Vec::new(),
            current: AppendPhase::default(),
            last_offset: None,
        }
    }

    /// Applies a validated append: updates the entries, opens and completes
    /// transactions, and moves the map end offset past the append's last batch.
    /// Returns the completed transactions in marker order, each with its LSO, for the
    /// transaction index.
    pub fn commit(&mut self, append: ProducerAppend) -> Vec<CompletedTxn> {
        append.assert_validated_against(self);
        let ProducerAppend {
            done,
            current,
            last_offset,
            ..
        } = append;
        let mut completed = Vec::new();
        for phase in done.into_iter().chain(std::iter::once(current)) {
            if phase.reset_before {
                self.entries.clear();
                self.ongoing_txns.clear();
            }
            for (producer_id, info) in phase.producers {
                match self.entries.get_mut(&producer_id) {
                    Some(entry) => entry.update(info.updated),
                    None => {
                        self.entries.insert(producer_id, info.updated);
                    }
                }
            }
            for (first_offset, producer_id) in phase.started_txns {
                let previous = self.ongoing_txns.insert(first_offset, producer_id);
                assert!(
                    previous.is_none(),
                    "two ongoing transactions start at offset {first_offset}: producers {producer_id} and {previous:?}"
                );
            }
            for txn in phase.completed_txns {
                let last_stable_offset = self.last_stable_offset(txn.producer_id, txn.last_offset);
                let removed = self.ongoing_txns.remove(&txn.first_offset);
                assert_eq!(
                    removed,
                    Some(txn.producer_id),
                    "completed transaction of producer {} from offset {} was not ongoing",
                    txn.producer_id,
                    txn.first_offset
                );
                self.unreplicated_txns
                    .insert(txn.first_offset, (txn.producer_id, txn.last_offset));
                completed.push(CompletedTxn {
                    producer_id: txn.producer_id,
                    first_offset: txn.first_offset,
                    last_offset: txn.last_offset,
                    is_aborted: txn.is_aborted,
                    last_stable_offset,
                });
            }
        }
        if let Some(last_offset) = last_offset {
            self.map_end_offset = Offset(last_offset.0 + 1);
        }
        self.generation += 1;
        completed
    }

    /// Kafka's `lastStableOffset(completedTxn)`, computed before the transaction is
    /// removed from the ongoing set.
    fn last_stable_offset(&self, producer_id: ProducerId, marker_offset: Offset) -> Offset {
        self.ongoing_txns
            .iter()
            .find(|(_, pid)| **pid != producer_id)
            .map_or(Offset(marker_offset.0 + 1), |(first, _)| *first)
    }

    /// The first offset that `read_committed` consumers may not read yet: the start of
    /// the earliest ongoing transaction or of the earliest completed one whose marker
    /// is not yet below the high watermark. The LSO is the smaller of this and the
    /// high watermark. Call [`ProducerStateManager::on_high_watermark_updated`] when the
    /// high watermark moves.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        let unreplicated = self.unreplicated_txns.keys().next().copied();
        let undecided = self.first_undecided_offset();
        match (unreplicated, undecided) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The first offset of the earliest transaction without a marker.
    pub fn first_undecided_offset(&self) -> Option<Offset> {
        self.ongoing_txns.keys().next().copied()
    }

    /// Forgets completed transactions whose marker is below `high_watermark`.
    pub fn on_high_watermark_updated(&mut self, high_watermark: Offset) {
        self.unreplicated_txns
            .retain(|_, (_, last_offset)| *last_offset >= high_watermark);
        self.generation += 1;
    }

    /// Ongoing transactions as (first offset, producer id), by first offset.
    pub fn ongoing_txns(&self) -> impl Iterator<Item = (Offset, ProducerId)> + '_ {
        self.ongoing_txns.iter().map(|(o, p)| (*o, *p))
    }

    pub fn last_entry(&self, producer_id: ProducerId) -> Option<&ProducerStateEntry> {
        self.entries.get(&producer_id)
    }

    /// All entries, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.entries.values()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn map_end_offset(&self) -> Offset {
        self.map_end_offset
    }

    /// Kafka's `updateMapEndOffset`: the state now reflects the log up to `offset`
    /// (exclusive), e.g. after an append of batches without producer ids.
    pub fn set_map_end_offset(&mut self, offset: Offset) {
        self.map_end_offset = offset;
        self.generation += 1;
    }

    /// Removes producers without an open transaction whose last write is at least
    /// `producer_id_expiration_ms` old (Kafka's `removeExpiredProducers`).
    pub fn remove_expired(&mut self, now_ms: i64) {
        let expiration_ms = self.producer_id_expiration_ms;
        self.entries.retain(|_, entry| {
            entry.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(entry.last_timestamp_ms) < expiration_ms
        });
        self.generation += 1;
    }

    /// Forgets every producer and transaction; the map end offset is kept (set it with
    /// [`ProducerStateManager::set_map_end_offset`] when truncating).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        self.generation += 1;
    }

    /// The snapshot file contents: entries (with all retained batch metadata) and the
    /// map end offset. Ongoing transactions are rebuilt from the entries on decode;
    /// unreplicated completed transactions are not kept, as in Kafka.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut entries: Vec<&ProducerStateEntry> = self.entries.values().collect();
        entries.sort_by_key(|e| e.producer_id);
        let snapshot = SnapshotV1 {
            map_end_offset: self.map_end_offset.0,
            entries: entries.into_iter().map(SnapshotEntry::from_entry).collect(),
        };
        let payload = rkyv::to_bytes::<rkyv::rancor::Error>(&snapshot).unwrap_or_else(|e| {
            // Serializing plain owned data into a growable buffer has no failure mode
            // short of allocation failure.
            panic!("producer state snapshot serialization failed: {e}")
        });
        let payload_len = u32::try_from(payload.len()).unwrap_or_else(|_| {
            panic!(
                "producer state snapshot payload of {} bytes exceeds u32",
                payload.len()
            )
        });
        let mut out = Vec::with_capacity(SNAPSHOT_HEADER_SIZE + payload.len());
        out.extend_from_slice(&SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
        out.extend_from_slice(&payload_len.to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// Rebuilds a manager from snapshot bytes. Expired producers are not removed here;
    /// call [`ProducerStateManager::remove_expired`] with the current time.
    pub fn decode_snapshot(
        bytes: &[u8],
        producer_id_expiration_ms: i64,
    ) -> Result<ProducerStateManager, SnapshotError> {
        let (map_end_offset, entries) = decode_snapshot_parts(bytes)?;
        let mut psm = ProducerStateManager::new(producer_id_expiration_ms);
        psm.map_end_offset = map_end_offset;
        for entry in entries {
            if let Some(first_offset) = entry.current_txn_first_offset {
                if psm
                    .ongoing_txns
                    .insert(first_offset, entry.producer_id)
                    .is_some()
                {
                    return Err(SnapshotError::InvalidEntry {
                        producer_id: entry.producer_id.0,
                        reason:
                            "its open transaction starts at the same offset as another producer's",
                    });
                }
            }
            if psm.entries.insert(entry.producer_id, entry).is_some() {
                // Entries are written sorted; a repeated id is corruption.
                return Err(SnapshotError::Malformed {
                    reason: "a producer id appears twice".to_string(),
                });
            }
        }
        Ok(psm)
    }
}

/// The entries of a snapshot, sorted by producer id (for `dump-log`-style tools).
pub fn decode_snapshot_entries(bytes: &[u8]) -> Result<Vec<ProducerStateEntry>, SnapshotError> {
    decode_snapshot_parts(bytes).map(|(_, entries)| entries)
}

/// The map end offset recorded in a snapshot.
pub fn decode_snapshot_map_end_offset(bytes: &[u8]) -> Result<Offset, SnapshotError> {
    decode_snapshot_parts(bytes).map(|(offset, _)| offset)
}

/// A completion recorded by the overlay; its LSO is computed at commit.
#[derive(Debug, Clone, Copy)]
struct PendingCompletion {
    producer_id: ProducerId,
    first_offset: Offset,
    last_offset: Offset,
    is_aborted: bool,
}

/// One producer's view during an append (Kafka's `ProducerAppendInfo`): `current` is
/// the committed entry when the append began, `updated` accumulates this append.
#[derive(Debug)]
struct ProducerAppendInfo {
    current: ProducerStateEntry,
    updated: ProducerStateEntry,
}

impl ProducerAppendInfo {
    fn new(current: ProducerStateEntry) -> Self {
        let updated = ProducerStateEntry {
            batches: VecDeque::new(),
            ..current.clone()
        };
        ProducerAppendInfo { current, updated }
    }

    fn producer_id(&self) -> ProducerId {
        self.updated.producer_id
    }

    /// Kafka's `checkProducerEpoch`.
    fn check_producer_epoch(
        &self,
        origin: AppendOrigin,
        producer_epoch: ProducerEpoch,
        offset: Offset,
        is_marker: bool,
    ) -> Result<(), ProducerStateError> {
        let current_epoch = self.updated.producer_epoch;
        if producer_epoch >= current_epoch {
            return Ok(());
        }
        let producer_id = self.producer_id();
        match origin {
            AppendOrigin::Replication => {
                tracing::warn!(
                    %producer_id, %offset, %producer_epoch, %current_epoch,
                    "producer epoch is smaller than the last seen epoch; accepted from replication"
                );
                Ok(())
            }
            AppendOrigin::Client | AppendOrigin::Coordinator if is_marker => {
                Err(ProducerStateError::ProducerFenced {
                    producer_id,
                    offset,
                    producer_epoch,
                    current_epoch,
                })
            }
            AppendOrigin::Client | AppendOrigin::Coordinator => {
                Err(ProducerStateError::InvalidProducerEpoch {
                    producer_id,
                    offset,
                    producer_epoch,
                    current_epoch,
                })
            }
        }
    }

    /// Kafka's `checkSequence` (client appends only).
    fn check_sequence(
        &self,
        producer_epoch: ProducerEpoch,
        first_seq: i32,
        offset: Offset,
    ) -> Result<(), ProducerStateError> {
        let error = |current_last_seq: i32, expected_seq: i32| {
            Err(ProducerStateError::OutOfOrderSequence {
                producer_id: self.producer_id(),
                offset,
                producer_epoch,
                current_epoch: self.updated.producer_epoch,
                first_seq,
                current_last_seq,
                expected_seq,
            })
        };
        if producer_epoch != self.updated.producer_epoch {
            // A new epoch starts at sequence 0, unless the producer was unknown.
            if first_seq != 0 && self.updated.producer_epoch != ProducerEpoch::NONE {
                return error(self.updated.last_seq(), 0);
            }
            return Ok(());
        }
        let current_last_seq = if !self.updated.is_empty() {
            self.updated.last_seq()
        } else if producer_epoch == self.current.producer_epoch {
            self.current.last_seq()
        } else {
            NO_SEQUENCE
        };
        // Without a known epoch (state lost to retention or DeleteRecords) any sequence
        // is accepted.
        if self.current.producer_epoch == ProducerEpoch::NONE
            || in_sequence(current_last_seq, first_seq)
        {
            Ok(())
        } else {
            error(current_last_seq, next_seq(current_last_seq))
        }
    }

    /// Kafka's `appendDataBatch`. Checks everything before changing anything.
    fn append_data_batch(
        &mut self,
        origin: AppendOrigin,
        batch: &RecordBatch,
        first_offset: Offset,
        last_offset: Offset,
        started_txns: &mut Vec<(Offset, ProducerId)>,
    ) -> Result<(), ProducerStateError> {
        let producer_epoch = batch.producer_epoch();
        let first_seq = batch.base_sequence();
        self.check_producer_epoch(origin, producer_epoch, first_offset, false)?;
        if origin == AppendOrigin::Client {
            self.check_sequence(producer_epoch, first_seq, first_offset)?;
        }
        let open_txn = self.updated.current_txn_first_offset;
        if let Some(txn_first_offset) = open_txn {
            if !batch.is_transactional() {
                let producer_id = self.producer_id();
                if origin == AppendOrigin::Replication {
                    tracing::warn!(
                        %producer_id, offset = %first_offset, %txn_first_offset,
                        "non-transactional batch while the producer's transaction is open; accepted from replication"
                    );
                } else {
                    return Err(ProducerStateError::InvalidTxnState {
                        producer_id,
                        offset: first_offset,
                        txn_first_offset,
                    });
                }
            }
        }
        self.updated.add_batch(
            producer_epoch,
            BatchMetadata {
                first_seq,
                last_seq: batch.last_sequence(),
                last_offset,
                offset_delta: batch.last_offset_delta(),
                timestamp_ms: batch.max_timestamp(),
            },
        );
        if open_txn.is_none() && batch.is_transactional() {
            self.updated.current_txn_first_offset = Some(first_offset);
            started_txns.push((first_offset, self.producer_id()));
        }
        Ok(())
    }

    /// Kafka's `appendEndTxnMarker`. A marker for a producer without an open
    /// transaction completes nothing (it cannot move the LSO).
    fn append_end_txn_marker(
        &mut self,
        origin: AppendOrigin,
        batch: &RecordBatch,
        marker_offset: Offset,
        is_aborted: bool,
        coordinator_epoch: i32,
    ) -> Result<Option<PendingCompletion>, ProducerStateError> {
        let producer_epoch = batch.producer_epoch();
        self.check_producer_epoch(origin, producer_epoch, marker_offset, true)?;
        let current_coordinator_epoch = self.updated.coordinator_epoch;
        if current_coordinator_epoch > coordinator_epoch {
            let producer_id = self.producer_id();
            if origin == AppendOrigin::Replication {
                tracing::info!(
                    %producer_id, offset = %marker_offset, coordinator_epoch, current_coordinator_epoch,
                    "transaction marker from an older coordinator epoch; accepted from replication"
                );
            } else {
                return Err(ProducerStateError::TransactionCoordinatorFenced {
                    producer_id,
                    offset: marker_offset,
                    coordinator_epoch,
                    current_coordinator_epoch,
                });
            }
        }
        let completed =
            self.updated
                .current_txn_first_offset
                .map(|first_offset| PendingCompletion {
                    producer_id: self.producer_id(),
                    first_offset,
                    last_offset: marker_offset,
                    is_aborted,
                });
        self.updated.maybe_update_producer_epoch(producer_epoch);
        self.updated.current_txn_first_offset = None;
        self.updated.coordinator_epoch = coordinator_epoch;
        self.updated.last_timestamp_ms = batch.max_timestamp();
        Ok(completed)
    }
}

/// `next` follows `last`, wrapping after `i32::MAX`; anything follows "no sequence".
fn in_sequence(last_seq: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last_seq) + 1 || (next == 0 && last_seq == i32::MAX)
}

fn next_seq(last_seq: i32) -> i32 {
    if last_seq == i32::MAX {
        0
    } else {
        last_seq + 1
    }
}

/// The part of an append between two MIRROR_PID_RESET batches.
#[derive(Debug, Default)]
struct AppendPhase {
    /// A MIRROR_PID_RESET precedes this phase: the committed state is wiped first.
    reset_before: bool,
    producers: HashMap<ProducerId, ProducerAppendInfo>,
    started_txns: Vec<(Offset, ProducerId)>,
    completed_txns: Vec<PendingCompletion>,
}

/// The effect of one append on producer state, validated but not yet applied (Kafka's
/// map of `ProducerAppendInfo`s in `analyzeAndValidateProducerState`).
///
/// Feed it the append's batches in log order with [`ProducerAppend::append`]; if one
/// fails, drop the overlay and reject the append. Otherwise write the batches and hand
/// the overlay to [`ProducerStateManager::commit`].
#[derive(Debug)]
pub struct ProducerAppend {
    origin: AppendOrigin,
    manager_id: u64,
    generation: u64,
    /// Phases closed by a MIRROR_PID_RESET batch.
    done: Vec<AppendPhase>,
    current: AppendPhase,
    last_offset: Option<Offset>,
}

impl ProducerAppend {
    pub fn origin(&self) -> AppendOrigin {
        self.origin
    }

    fn assert_validated_against(&self, psm: &ProducerStateManager) {
        assert_eq!(
            (self.manager_id, self.generation),
            (psm.manager_id, psm.generation),
            "producer append used with a different or since-changed ProducerStateManager"
        );
    }

    /// Validates one batch and records its effect. `first_offset` is the offset the
    /// batch is (or will be) written at: the leader's assignment, or
    /// `batch.base_offset()` for replication. On error the overlay is unchanged.
    pub fn append(
        &mut self,
        psm: &ProducerStateManager,
        batch: &RecordBatch,
        first_offset: Offset,
    ) -> Result<(), ProducerStateError> {
        self.assert_validated_against(psm);
        let last_offset = Offset(first_offset.0 + i64::from(batch.last_offset_delta()));
        if batch.is_control() {
            self.append_control_batch(psm, batch, first_offset)?;
        } else if batch.has_producer_id() {
            let origin = self.origin;
            let (mut info, existed) = self.take_info(psm, batch.producer_id());
            let result = info.append_data_batch(
                origin,
                batch,
                first_offset,
                last_offset,
                &mut self.current.started_txns,
            );
            self.put_info(info, existed, result.is_ok());
            result?;
        }
        self.last_offset = Some(last_offset);
        Ok(())
    }

    fn append_control_batch(
        &mut self,
        psm: &ProducerStateManager,
        batch: &RecordBatch,
        offset: Offset,
    ) -> Result<(), ProducerStateError> {
        let producer_id = batch.producer_id();
        let record = match batch.control_record() {
            Ok(record) => record,
            // Compaction removed the record: nothing left to apply, as in Kafka.
            Err(ControlRecordError::Empty) => return Ok(()),
            Err(source) => {
                return Err(ProducerStateError::BadControlRecord {
                    producer_id,
                    offset,
                    source,
                })
            }
        };
        let is_aborted = match record.kind {
            ControlType::MirrorPidReset => {
                let closed = std::mem::replace(
                    &mut self.current,
                    AppendPhase {
                        reset_before: true,
                        ..AppendPhase::default()
                    },
                );
                self.done.push(closed);
                return Ok(());
            }
            ControlType::Abort => true,
            ControlType::Commit => false,
            ControlType::Other(_) => return Ok(()),
        };
        if !batch.has_producer_id() {
            return Ok(());
        }
        let Some(coordinator_epoch) = record.coordinator_epoch else {
            return Err(ProducerStateError::BadControlRecord {
                producer_id,
                offset,
                source: ControlRecordError::BadValue {
                    kind: record.kind.name(),
                    reason: "marker without coordinator epoch",
                },
            });
        };
        let origin = self.origin;
        let (mut info, existed) = self.take_info(psm, producer_id);
        let result =
            info.append_end_txn_marker(origin, batch, offset, is_aborted, coordinator_epoch);
        self.put_info(info, existed, result.is_ok());
        if let Some(completed) = result? {
            self.current.completed_txns.push(completed);
        }
        Ok(())
    }

    /// The producer's overlay, taken out of the map, and whether it was there.
    fn take_info(
        &mut self,
        psm: &ProducerStateManager,
        producer_id: ProducerId,
    ) -> (ProducerAppendInfo, bool) {
        if let Some(info) = self.current.producers.remove(&producer_id) {
            return (info, true);
        }
        // After a reset in this append the committed state no longer counts.
        let reset_seen = !self.done.is_empty();
        let current = if reset_seen {
            None
        } else {
            psm.entries.get(&producer_id).cloned()
        }
        .unwrap_or_else(|| ProducerStateEntry::empty(producer_id));
        (ProducerAppendInfo::new(current), false)
    }

    /// Puts an overlay back; a fresh one that failed validation is dropped so that the
    /// commit does not create an entry for it.
    fn put_info(&mut self, info: ProducerAppendInfo, existed: bool, ok: bool) {
        if ok || existed {
            self.current.producers.insert(info.producer_id(), info);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------

const SNAPSHOT_MAGIC: [u8; 4] = *b"TLPS";
const SNAPSHOT_VERSION: u16 = 1;
/// magic, version, CRC32C, payload length.
const SNAPSHOT_HEADER_SIZE: usize = 4 + 2 + 4 + 4;

/// Why snapshot bytes cannot be loaded. The caller falls back to rebuilding the state
/// from the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("producer snapshot is {len} bytes, shorter than its {needed}-byte header")]
    TooShort { len: usize, needed: usize },
    #[error("producer snapshot magic is {found:?}, expected \"TLPS\"")]
    BadMagic { found: [u8; 4] },
    #[error("producer snapshot version {version} is not supported (this build reads {supported})")]
    UnsupportedVersion { version: u16, supported: u16 },
    #[error(
        "producer snapshot header declares a {declared}-byte payload but {available} bytes follow"
    )]
    LengthMismatch { declared: u32, available: usize },
    #[error(
        "producer snapshot payload fails CRC32C: stored {stored:#010x}, computed {computed:#010x}"
    )]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("producer snapshot payload is malformed: {reason}")]
    Malformed { reason: String },
    #[error("producer snapshot entry for producer {producer_id} is invalid: {reason}")]
    InvalidEntry {
        producer_id: i64,
        reason: &'static str,
    },
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapshotV1 {
    map_end_offset: i64,
    entries: Vec<SnapshotEntry>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapshotEntry {
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    last_timestamp_ms: i64,
    current_txn_first_offset: Option<i64>,
    batches: Vec<SnapshotBatch>,
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct SnapshotBatch {
    first_seq: i32,
    last_seq: i32,
    last_offset: i64,
    offset_delta: i32,
    timestamp_ms: i64,
}

impl SnapshotEntry {
    fn from_entry(entry: &ProducerStateEntry) -> Self {
        SnapshotEntry {
            producer_id: entry.producer_id.0,
            producer_epoch: entry.producer_epoch.0,
            coordinator_epoch: entry.coordinator_epoch,
            last_timestamp_ms: entry.last_timestamp_ms,
            current_txn_first_offset: entry.current_txn_first_offset.map(|o| o.0),
            batches: entry
                .batches
                .iter()
                .map(|b| SnapshotBatch {
                    first_seq: b.first_seq,
                    last_seq: b.last_seq,
                    last_offset: b.last_offset.0,
                    offset_delta: b.offset_delta,
                    timestamp_ms: b.timestamp_ms,
                })
                .collect(),
        }
    }
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Checks the frame and the payload, and reads the entries (sorted by producer id).
fn decode_snapshot_parts(bytes: &[u8]) -> Result<(Offset, Vec<ProducerStateEntry>), SnapshotError> {
    if bytes.len() < SNAPSHOT_HEADER_SIZE {
        return Err(SnapshotError::TooShort {
            len: bytes.len(),
            needed: SNAPSHOT_HEADER_SIZE,
        });
    }
    let found = [bytes[0], bytes[1], bytes[2], bytes[3]];
    if found != SNAPSHOT_MAGIC {
        return Err(SnapshotError::BadMagic { found });
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotError::UnsupportedVersion {
            version,
            supported: SNAPSHOT_VERSION,
        });
    }
    let stored = be_u32(&bytes[6..10]);
    let declared = be_u32(&bytes[10..14]);
    let payload = &bytes[SNAPSHOT_HEADER_SIZE..];
    if u64::from(declared) != payload.len() as u64 {
        return Err(SnapshotError::LengthMismatch {
            declared,
            available: payload.len(),
        });
    }
    let computed = crc32c::crc32c(payload);
    if computed != stored {
        return Err(SnapshotError::CrcMismatch { stored, computed });
    }

    // rkyv reads archived values in place and needs them aligned; the payload follows
    // a 14-byte header, so it is copied unless it happens to be aligned already.
    let aligned_copy;
    let payload = if payload.as_ptr().align_offset(16) == 0 {
        payload
    } else {
        let mut v = rkyv::util::AlignedVec::<16>::with_capacity(payload.len());
        v.extend_from_slice(payload);
        aligned_copy = v;
        aligned_copy.as_slice()
    };
    let archived =
        rkyv::access::<ArchivedSnapshotV1, rkyv::rancor::Error>(payload).map_err(|e| {
            SnapshotError::Malformed {
                reason: e.to_string(),
            }
        })?;

    let map_end_offset = archived.map_end_offset.to_native();
    if map_end_offset < 0 {
        return Err(SnapshotError::Malformed {
            reason: format!("negative map end offset {map_end_offset}"),
        });
    }
    let mut entries = Vec::with_capacity(archived.entries.len());
    let mut previous_id: Option<i64> = None;
    for e in archived.entries.iter() {
        let producer_id = e.producer_id.to_native();
        let invalid = |reason| SnapshotError::InvalidEntry {
            producer_id,
            reason,
        };
        if producer_id < 0 {
            return Err(invalid("negative producer id"));
        }
        if previous_id.is_some_and(|p| p >= producer_id) {
            return Err(invalid("producer ids are not strictly increasing"));
        }
        previous_id = Some(producer_id);
        if e.batches.len() > NUM_BATCHES_TO_RETAIN {
            return Err(invalid("more batch metadata than is ever retained"));
        }
        let mut batches = VecDeque::with_capacity(e.batches.len());
        for b in e.batches.iter() {
            let offset_delta = b.offset_delta.to_native();
            let last_offset = b.last_offset.to_native();
            if offset_delta < 0 || last_offset < i64::from(offset_delta) {
                return Err(invalid("batch metadata has a negative offset"));
            }
            batches.push_back(BatchMetadata {
                first_seq: b.first_seq.to_native(),
                last_seq: b.last_seq.to_native(),
                last_offset: Offset(last_offset),
                offset_delta,
                timestamp_ms: b.timestamp_ms.to_native(),
            });
        }
        let current_txn_first_offset = e.current_txn_first_offset.as_ref().map(|o| o.to_native());
        if current_txn_first_offset.is_some_and(|o| o < 0) {
            return Err(invalid("open transaction has a negative first offset"));
        }
        entries.push(ProducerStateEntry {
            producer_id: ProducerId(producer_id),
            producer_epoch: ProducerEpoch(e.producer_epoch.to_native()),
            batches,
            coordinator_epoch: e.coordinator_epoch.to_native(),
            last_timestamp_ms: e.last_timestamp_ms.to_native(),
            current_txn_first_offset: current_txn_first_offset.map(Offset),
        });
    }
    Ok((Offset(map_end_offset), entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::BatchBuilder;
    use crate::wire::control::{build_mirror_pid_reset, build_txn_marker};
    use crate::wire::records::encode_simple_records;

    const P1: ProducerId = ProducerId(1);
    const P2: ProducerId = ProducerId(2);

    fn data(
        pid: ProducerId,
        epoch: i16,
        base_seq: i32,
        count: i32,
        transactional: bool,
        ts: i64,
    ) -> RecordBatch {
        let body = encode_simple_records(count, 0, 4);
        let bytes = BatchBuilder {
            last_offset_delta: count - 1,
            record_count: count,
            base_timestamp: ts,
            max_timestamp: ts,
            producer_id: pid,
            producer_epoch: ProducerEpoch(epoch),
            base_sequence: base_seq,
            ..BatchBuilder::default()
        }
        .transactional(transactional)
        .build(&body);
        RecordBatch::parse_verified(bytes, 0).expect("valid batch")
    }

    fn marker(commit: bool, pid: ProducerId, epoch: i16, coordinator_epoch: i32) -> RecordBatch {
        let bytes = build_txn_marker(commit, pid, ProducerEpoch(epoch), coordinator_epoch, 500);
        RecordBatch::parse_verified(bytes, 0).expect("valid marker")
    }

    fn reset() -> RecordBatch {
        RecordBatch::parse_verified(build_mirror_pid_reset("src", 600), 0).expect("valid reset")
    }

    fn append(
        psm: &mut ProducerStateManager,
        origin: AppendOrigin,
        batch: &RecordBatch,
        offset: i64,
    ) -> Result<Vec<CompletedTxn>, ProducerStateError> {
        let mut a = psm.begin_append(origin);
        a.append(psm, batch, Offset(offset))?;
        Ok(psm.commit(a))
    }

    fn ok(
        psm: &mut ProducerStateManager,
        origin: AppendOrigin,
        batch: &RecordBatch,
        offset: i64,
    ) -> Vec<CompletedTxn> {
        append(psm, origin, batch, offset).expect("append accepted")
    }

    #[test]
    fn duplicate_detection_returns_original_offsets() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 0, 3, false, 10),
            100,
        );
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 3, 2, false, 20),
            103,
        );
        assert_eq!(
            psm.find_duplicate(&data(P1, 0, 0, 3, false, 10)),
            Some(DuplicateBatch {
                base_offset: Offset(100),
                last_offset: Offset(102),
                timestamp_ms: 10
            })
        );
        assert_eq!(
            psm.find_duplicate(&data(P1, 0, 3, 2, false, 20))
                .map(|d| d.base_offset),
            Some(Offset(103))
        );
        // Different range, different epoch, unknown producer: not duplicates.
        assert_eq!(psm.find_duplicate(&data(P1, 0, 0, 2, false, 10)), None);
        assert_eq!(psm.find_duplicate(&data(P1, 1, 0, 3, false, 10)), None);
        assert_eq!(psm.find_duplicate(&data(P2, 0, 0, 3, false, 10)), None);
        assert_eq!(psm.map_end_offset(), Offset(105));
    }

    #[test]
    fn only_five_batches_are_retained() {
        let mut psm = ProducerStateManager::new(60_000);
        for i in 0..7 {
            ok(
                &mut psm,
                AppendOrigin::Client,
                &data(P1, 0, i, 1, false, 1),
                i64::from(i),
            );
        }
        let entry = psm.last_entry(P1).expect("entry");
        assert_eq!(entry.batches.len(), NUM_BATCHES_TO_RETAIN);
        assert_eq!(entry.first_seq(), 2);
        assert_eq!(entry.last_seq(), 6);
        assert_eq!(psm.find_duplicate(&data(P1, 0, 1, 1, false, 1)), None);
        assert!(psm.find_duplicate(&data(P1, 0, 2, 1, false, 1)).is_some());
    }

    #[test]
    fn out_of_order_sequence_is_rejected() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 0, 3, false, 1),
            0,
        );
        let err = append(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 5, 1, false, 1),
            3,
        )
        .expect_err("gap");
        assert_eq!(
            err,
            ProducerStateError::OutOfOrderSequence {
                producer_id: P1,
                offset: Offset(3),
                producer_epoch: ProducerEpoch(0),
                current_epoch: ProducerEpoch(0),
                first_seq: 5,
                current_last_seq: 2,
                expected_seq: 3,
            }
        );
        // The rejected append changed nothing.
        assert_eq!(psm.last_entry(P1).expect("entry").last_seq(), 2);
        assert_eq!(psm.map_end_offset(), Offset(3));
        // Several batches of one append are checked against each other.
        let mut a = psm.begin_append(AppendOrigin::Client);
        a.append(&psm, &data(P1, 0, 3, 2, false, 1), Offset(3))
            .expect("in order");
        let err = a
            .append(&psm, &data(P1, 0, 3, 2, false, 1), Offset(5))
            .expect_err("repeat within the append");
        assert!(matches!(
            err,
            ProducerStateError::OutOfOrderSequence {
                expected_seq: 5,
                ..
            }
        ));
    }

    #[test]
    fn new_producer_accepts_any_sequence_and_rejected_batch_leaves_overlay_unchanged() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 3, 42, 1, false, 1),
            0,
        );
        assert_eq!(
            psm.last_entry(P1).expect("entry").producer_epoch,
            ProducerEpoch(3)
        );

        let mut a = psm.begin_append(AppendOrigin::Client);
        a.append(&psm, &data(P2, 0, 0, 1, false, 1), Offset(1))
            .expect("ok");
        // A rejected batch leaves the overlay as it was; the rest of it still commits.
        assert!(a
            .append(&psm, &data(P1, 2, 0, 1, false, 1), Offset(2))
            .is_err());
        a.append(&psm, &data(P1, 3, 43, 1, false, 1), Offset(2))
            .expect("in order after the rejected batch");
        psm.commit(a);
        assert_eq!(psm.len(), 2);
        assert_eq!(psm.last_entry(P1).expect("entry").last_seq(), 43);
        assert_eq!(psm.map_end_offset(), Offset(3));
    }

    #[test]
    fn fenced_epoch_is_rejected_but_replication_applies_it() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 5, 0, 1, false, 1),
            0,
        );
        let err = append(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 4, 1, 1, false, 1),
            1,
        )
        .expect_err("fenced");
        assert_eq!(
            err,
            ProducerStateError::InvalidProducerEpoch {
                producer_id: P1,
                offset: Offset(1),
                producer_epoch: ProducerEpoch(4),
                current_epoch: ProducerEpoch(5),
            }
        );
        assert!(matches!(
            append(
                &mut psm,
                AppendOrigin::Coordinator,
                &data(P1, 4, 1, 1, false, 1),
                1
            ),
            Err(ProducerStateError::InvalidProducerEpoch { .. })
        ));
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P1, 4, 9, 1, false, 1),
            1,
        );
        let entry = psm.last_entry(P1).expect("entry");
        assert_eq!(entry.producer_epoch, ProducerEpoch(4));
        assert_eq!(entry.batches.len(), 1);
    }

    #[test]
    fn epoch_bump_requires_sequence_zero_and_resets_batches() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 0, 2, false, 1),
            0,
        );
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 2, 2, false, 1),
            2,
        );
        assert!(matches!(
            append(
                &mut psm,
                AppendOrigin::Client,
                &data(P1, 1, 4, 1, false, 1),
                4
            ),
            Err(ProducerStateError::OutOfOrderSequence {
                expected_seq: 0,
                ..
            })
        ));
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 1, 0, 1, false, 1),
            4,
        );
        let entry = psm.last_entry(P1).expect("entry");
        assert_eq!(entry.producer_epoch, ProducerEpoch(1));
        assert_eq!(entry.batches.len(), 1);
        assert_eq!(entry.first_data_offset(), Offset(4));
        // The old epoch's batches no longer count as duplicates.
        assert_eq!(psm.find_duplicate(&data(P1, 0, 0, 2, false, 1)), None);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 1, 1, 1, false, 1),
            5,
        );
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, i32::MAX - 1, 2, false, 1),
            0,
        );
        assert_eq!(psm.last_entry(P1).expect("entry").last_seq(), i32::MAX);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 0, 1, false, 1),
            2,
        );
        // A batch that itself wraps.
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, i32::MAX - 1, 3, false, 1),
            0,
        );
        assert_eq!(psm.last_entry(P1).expect("entry").last_seq(), 0);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 1, 1, false, 1),
            3,
        );
        assert!(matches!(
            append(
                &mut psm,
                AppendOrigin::Client,
                &data(P1, 0, 0, 1, false, 1),
                4
            ),
            Err(ProducerStateError::OutOfOrderSequence {
                expected_seq: 2,
                ..
            })
        ));
    }

    #[test]
    fn replication_accepts_sequence_gaps() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P1, 0, 0, 1, false, 1),
            0,
        );
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P1, 0, 10, 1, false, 1),
            1,
        );
        ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &data(P1, 0, 50, 1, false, 1),
            2,
        );
        assert_eq!(psm.last_entry(P1).expect("entry").last_seq(), 50);
    }

    #[test]
    fn interleaved_transactions_commit_and_abort() {
        let mut psm = ProducerStateManager::new(60_000);
        assert_eq!(psm.first_unstable_offset(), None);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 0, 2, true, 1),
            10,
        );
        assert_eq!(psm.first_unstable_offset(), Some(Offset(10)));
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P2, 0, 0, 1, true, 1),
            12,
        );
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 2, 1, true, 1),
            13,
        );
        assert_eq!(
            psm.last_entry(P1).expect("entry").current_txn_first_offset,
            Some(Offset(10))
        );
        assert!(matches!(
            append(
                &mut psm,
                AppendOrigin::Client,
                &data(P1, 0, 3, 1, false, 1),
                14
            ),
            Err(ProducerStateError::InvalidTxnState {
                txn_first_offset: Offset(10),
                ..
            })
        ));
        // P1 commits while P2 is still open: the LSO stops at P2's first offset.
        let done = ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &marker(true, P1, 0, 3),
            14,
        );
        assert_eq!(
            done,
            vec![CompletedTxn {
                producer_id: P1,
                first_offset: Offset(10),
                last_offset: Offset(14),
                is_aborted: false,
                last_stable_offset: Offset(12),
            }]
        );
        assert_eq!(psm.first_undecided_offset(), Some(Offset(12)));
        // Until the high watermark passes P1's marker, P1's transaction stays unstable.
        assert_eq!(psm.first_unstable_offset(), Some(Offset(10)));
        psm.on_high_watermark_updated(Offset(15));
        assert_eq!(psm.first_unstable_offset(), Some(Offset(12)));
        let entry = psm.last_entry(P1).expect("entry");
        assert_eq!(entry.current_txn_first_offset, None);
        assert_eq!(entry.coordinator_epoch, 3);
        assert_eq!(entry.last_seq(), 2, "a marker adds no batch metadata");

        // P1 opens another transaction, then P2 aborts: the LSO stops at P1's new one.
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 3, 1, true, 1),
            15,
        );
        let done = ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &marker(false, P2, 0, 3),
            16,
        );
        assert_eq!(
            done,
            vec![CompletedTxn {
                producer_id: P2,
                first_offset: Offset(12),
                last_offset: Offset(16),
                is_aborted: true,
                last_stable_offset: Offset(15),
            }]
        );
        let done = ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &marker(true, P1, 0, 3),
            17,
        );
        assert_eq!(done[0].last_stable_offset, Offset(18));
        psm.on_high_watermark_updated(Offset(18));
        assert_eq!(psm.first_unstable_offset(), None);

        // A marker without an open transaction completes nothing.
        let done = ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &marker(false, P1, 0, 3),
            18,
        );
        assert!(done.is_empty());
    }

    #[test]
    fn several_completions_in_one_append_see_each_other() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P1, 0, 0, 1, true, 1),
            0,
        );
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P2, 0, 0, 1, true, 1),
            1,
        );
        let mut a = psm.begin_append(AppendOrigin::Replication);
        a.append(&psm, &marker(true, P1, 0, 0), Offset(2))
            .expect("ok");
        a.append(&psm, &marker(false, P2, 0, 0), Offset(3))
            .expect("ok");
        let done = psm.commit(a);
        assert_eq!(done.len(), 2);
        assert_eq!(done[0].last_stable_offset, Offset(1));
        assert_eq!(done[1].last_stable_offset, Offset(4));
        assert_eq!(psm.first_undecided_offset(), None);
    }

    #[test]
    fn marker_epoch_and_coordinator_epoch_fencing() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 2, 0, 1, true, 1),
            0,
        );
        ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &marker(false, P1, 2, 5),
            1,
        );
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 2, 1, 1, true, 1),
            2,
        );
        assert_eq!(
            append(
                &mut psm,
                AppendOrigin::Coordinator,
                &marker(true, P1, 1, 5),
                3
            ),
            Err(ProducerStateError::ProducerFenced {
                producer_id: P1,
                offset: Offset(3),
                producer_epoch: ProducerEpoch(1),
                current_epoch: ProducerEpoch(2),
            })
        );
        assert_eq!(
            append(
                &mut psm,
                AppendOrigin::Coordinator,
                &marker(true, P1, 2, 4),
                3
            ),
            Err(ProducerStateError::TransactionCoordinatorFenced {
                producer_id: P1,
                offset: Offset(3),
                coordinator_epoch: 4,
                current_coordinator_epoch: 5,
            })
        );
        assert_eq!(psm.first_undecided_offset(), Some(Offset(2)));
        // Replication takes the marker anyway.
        let done = ok(
            &mut psm,
            AppendOrigin::Replication,
            &marker(true, P1, 2, 4),
            3,
        );
        assert_eq!(done.len(), 1);
        assert_eq!(psm.last_entry(P1).expect("entry").coordinator_epoch, 4);
        // A marker with a higher epoch bumps the producer's epoch.
        ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &marker(false, P1, 3, 6),
            4,
        );
        let entry = psm.last_entry(P1).expect("entry");
        assert_eq!(entry.producer_epoch, ProducerEpoch(3));
        assert!(entry.batches.is_empty());
    }

    #[test]
    fn mirror_pid_reset_clears_every_producer_and_transaction() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P1, 0, 0, 1, true, 1),
            0,
        );
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P2, 0, 0, 1, false, 1),
            1,
        );
        assert_eq!(psm.first_unstable_offset(), Some(Offset(0)));
        ok(&mut psm, AppendOrigin::Coordinator, &reset(), 2);
        assert!(psm.is_empty());
        assert_eq!(psm.first_unstable_offset(), None);
        assert_eq!(psm.map_end_offset(), Offset(3));
        // A reused producer id starts afresh: any epoch and sequence.
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 7, 1, false, 1),
            3,
        );

        // Within one append, batches after the reset see an empty state, and those
        // before it still complete their transactions.
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P1, 5, 0, 1, true, 1),
            0,
        );
        ok(
            &mut psm,
            AppendOrigin::Replication,
            &data(P2, 0, 0, 1, true, 1),
            1,
        );
        let mut a = psm.begin_append(AppendOrigin::Replication);
        a.append(&psm, &marker(false, P1, 5, 0), Offset(2))
            .expect("ok");
        a.append(&psm, &reset(), Offset(3)).expect("ok");
        a.append(&psm, &data(P1, 0, 0, 1, false, 9), Offset(4))
            .expect("ok");
        let done = psm.commit(a);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].last_stable_offset, Offset(1));
        assert_eq!(psm.len(), 1);
        let entry = psm.last_entry(P1).expect("entry");
        assert_eq!(entry.producer_epoch, ProducerEpoch(0));
        assert_eq!(entry.last_data_offset(), Offset(4));
        assert_eq!(psm.first_undecided_offset(), None);
    }

    #[test]
    fn batches_without_producer_id_and_unknown_control_batches_are_ignored() {
        let mut psm = ProducerStateManager::new(60_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(ProducerId::NONE, -1, -1, 3, false, 1),
            0,
        );
        assert!(psm.is_empty());
        assert_eq!(psm.map_end_offset(), Offset(3));
        // A control batch of an unknown type (Kafka's LEADER_CHANGE = 2).
        let mut records = Vec::new();
        let key = [0u8, 0, 0, 2];
        crate::wire::records::encode_record(&mut records, 0, 0, Some(&key), Some(&[0u8; 4]));
        let bytes = BatchBuilder::default().control(true).build(&records);
        let batch = RecordBatch::parse_verified(bytes, 0).expect("valid");
        ok(&mut psm, AppendOrigin::Replication, &batch, 3);
        assert!(psm.is_empty());
    }

    #[test]
    fn expiration_keeps_open_transactions() {
        let mut psm = ProducerStateManager::new(1_000);
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P1, 0, 0, 1, false, 100),
            0,
        );
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P2, 0, 0, 1, true, 100),
            1,
        );
        psm.remove_expired(1_099);
        assert_eq!(psm.len(), 2);
        psm.remove_expired(1_100);
        assert_eq!(psm.len(), 1);
        assert!(psm.last_entry(P2).is_some());
        ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &marker(true, P2, 0, 0),
            2,
        );
        psm.remove_expired(10_000);
        assert!(psm.is_empty());
    }

    fn sorted_entries(psm: &ProducerStateManager) -> Vec<ProducerStateEntry> {
        let mut v: Vec<_> = psm.entries().cloned().collect();
        v.sort_by_key(|e| e.producer_id);
        v
    }

    fn sample_manager() -> ProducerStateManager {
        let mut psm = ProducerStateManager::new(60_000);
        for i in 0..7 {
            ok(
                &mut psm,
                AppendOrigin::Client,
                &data(P1, 1, i * 2, 2, false, 1_000 + i64::from(i)),
                i64::from(i) * 2,
            );
        }
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(P2, 0, 0, 1, true, 2_000),
            14,
        );
        ok(
            &mut psm,
            AppendOrigin::Client,
            &data(ProducerId(77), 3, 0, 1, true, 2_001),
            15,
        );
        ok(
            &mut psm,
            AppendOrigin::Coordinator,
            &marker(false, ProducerId(77), 3, 9),
            16,
        );
        psm
    }

    #[test]
    fn snapshot_round_trip() {
        let psm = sample_manager();
        let bytes = psm.encode_snapshot();
        assert_eq!(&bytes[..4], b"TLPS");
        let back = ProducerStateManager::decode_snapshot(&bytes, 60_000).expect("decodes");
        assert_eq!(sorted_entries(&back), sorted_entries(&psm));
        assert_eq!(back.map_end_offset(), Offset(17));
        assert_eq!(back.first_unstable_offset(), Some(Offset(14)));
        assert_eq!(
            back.ongoing_txns().collect::<Vec<_>>(),
            vec![(Offset(14), P2)]
        );
        assert_eq!(back.encode_snapshot(), bytes, "encoding is deterministic");
        assert_eq!(
            decode_snapshot_entries(&bytes).expect("entries"),
            sorted_entries(&psm)
        );
        // Decoding from an unaligned slice works too.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        assert_eq!(
            decode_snapshot_entries(&shifted[1..])
                .expect("entries")
                .len(),
            3
        );
        // The restored state keeps validating sequences and detecting duplicates.
        let mut back = back;
        assert!(back
            .find_duplicate(&data(P1, 1, 12, 2, false, 1_006))
            .is_some());
        ok(
            &mut back,
            AppendOrigin::Client,
            &data(P1, 1, 14, 1, false, 1),
            17,
        );

        let empty = ProducerStateManager::new(5);
        let back =
            ProducerStateManager::decode_snapshot(&empty.encode_snapshot(), 5).expect("empty");
        assert!(back.is_empty());
    }

    #[test]
    fn corrupted_snapshots_are_rejected() {
        let bytes = sample_manager().encode_snapshot();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            let err = ProducerStateManager::decode_snapshot(&bad, 1).expect_err("flipped byte");
            let expected = match i {
                0..=3 => matches!(err, SnapshotError::BadMagic { .. }),
                4..=5 => matches!(err, SnapshotError::UnsupportedVersion { .. }),
                6..=9 => matches!(err, SnapshotError::CrcMismatch { .. }),
                10..=13 => matches!(err, SnapshotError::LengthMismatch { .. }),
                _ => matches!(err, SnapshotError::CrcMismatch { .. }),
            };
            assert!(expected, "byte {i}: {err}");
        }
        for len in 0..bytes.len() {
            let err =
                ProducerStateManager::decode_snapshot(&bytes[..len], 1).expect_err("truncated");
            assert!(
                matches!(
                    err,
                    SnapshotError::TooShort { .. } | SnapshotError::LengthMismatch { .. }
                ),
                "length {len}: {err}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(
            decode_snapshot_entries(&long),
            Err(SnapshotError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn garbage_payload_with_valid_crc_is_rejected_without_panic() {
        // A correct frame around bytes that are not an archive.
        for payload in [vec![], vec![0xffu8; 3], vec![0xabu8; 64], vec![0u8; 7]] {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(b"TLPS");
            bytes.extend_from_slice(&1u16.to_be_bytes());
            bytes.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
            bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            bytes.extend_from_slice(&payload);
            assert!(decode_snapshot_entries(&bytes).is_err());
        }
    }

    #[test]
    #[should_panic(expected = "since-changed")]
    fn overlay_from_a_changed_manager_is_refused() {
        let mut psm = ProducerStateManager::new(1);
        let a = psm.begin_append(AppendOrigin::Client);
        psm.set_map_end_offset(Offset(5));
        psm.commit(a);
    }
}
