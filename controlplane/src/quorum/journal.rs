//! The controller's metadata journal on the quorum: each admin request's records are one
//! Raft entry, committed before the controller applies them, and the metadata is
//! snapshotted into the Raft store every [`SNAPSHOT_EVERY`] entries so the log stays
//! short. Alone, this node is the quorum's only voter and drives it in place: a proposal
//! commits as soon as it is fsynced. As one of several controllers
//! ([`MetadataJournal::open_cluster`]), a member thread talks to the others over TCP;
//! only the leader's proposals are taken, and every member's controller applies what
//! commits as it comes ([`MetadataJournal::take_committed`]).
//!
//! Entry data: the batch's records, each `[u32 length][record]` (`MetadataRecord::encode`).
//! Snapshot data: `[u64 records applied]` then the records that rebuild the state
//! (`ControllerState::image_records`).
//!
//! A data directory from before the quorum (`__cluster_metadata/metadata.log`) is imported
//! once: its records become the first snapshot and the file is renamed
//! `metadata.log.imported`.

use std::path::Path;

use std::collections::VecDeque;

use super::node::{QuorumError, QuorumNode, QuorumTiming};
use super::service::{self, Change, ProposeError, QuorumHandle, Transport};
use super::storage::RaftStore;
use crate::metadata_log::{
    MetadataLog, MetadataLogError, MetadataRecord, METADATA_DIR, METADATA_LOG_FILE,
};

/// Entries between two snapshots.
pub const SNAPSHOT_EVERY: usize = 1000;
/// Entries after which a snapshot is taken even while requests keep the controller
/// busy (it otherwise waits for a moment with nothing queued: a snapshot of 10,000
/// partitions takes a few hundred milliseconds, which a failover's requests should not
/// wait behind).
pub const SNAPSHOT_OVERDUE: usize = 4 * SNAPSHOT_EVERY;
/// How many Ready rounds a single-voter commit may take before it is given up.
const COMMIT_ROUNDS_MAX: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(transparent)]
    Quorum(#[from] QuorumError),
    #[error(transparent)]
    Store(#[from] super::storage::StoreError),
    #[error(transparent)]
    Legacy(#[from] MetadataLogError),
    #[error("metadata entry {index}: {reason}")]
    Corrupt { index: u64, reason: String },
    #[error("the proposal at index {0} did not commit")]
    NotCommitted(u64),
    /// This controller is not the quorum's leader; the leader's node id, if known.
    #[error("not the active controller (the active one: {0:?})")]
    NotLeader(Option<i32>),
    #[error("the metadata quorum: {0}")]
    Propose(ProposeError),
    #[error("importing {path}: {source}")]
    Import {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub fn encode_batch(records: &[MetadataRecord]) -> Result<Vec<u8>, MetadataLogError> {
    let mut out = Vec::new();
    for r in records {
        let payload = r.encode(false)?;
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&payload);
    }
    Ok(out)
}

pub fn decode_batch(index: u64, data: &[u8]) -> Result<Vec<MetadataRecord>, JournalError> {
    let corrupt = |reason: String| JournalError::Corrupt { index, reason };
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let len = data
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| corrupt("a truncated record length".into()))?;
        let payload = data
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| corrupt("a truncated record".into()))?;
        let (record, _) = MetadataRecord::decode(payload).map_err(|e| corrupt(e.to_string()))?;
        out.push(record);
        at += 4 + len;
    }
    Ok(out)
}

fn encode_snapshot(applied: u64, records: &[MetadataRecord]) -> Result<Vec<u8>, MetadataLogError> {
    let mut out = applied.to_be_bytes().to_vec();
    out.extend(encode_batch(records)?);
    Ok(out)
}

/// (records applied when it was taken, its records).
fn decode_snapshot(index: u64, data: &[u8]) -> Result<(u64, Vec<MetadataRecord>), JournalError> {
    if data.is_empty() {
        return Ok((0, Vec::new()));
    }
    let applied = data
        .get(..8)
        .map(|b| u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .ok_or_else(|| JournalError::Corrupt {
            index,
            reason: "a snapshot shorter than its header".into(),
        })?;
    Ok((applied, decode_batch(index, &data[8..])?))
}

/// What the journal hands the controller at open: the snapshot's records and applied
/// count, then the records committed after it.
#[derive(Debug, Default)]
pub struct Replay {
    pub snapshot_applied: u64,
    pub snapshot: Vec<MetadataRecord>,
    pub committed: Vec<MetadataRecord>,
}

/// One committed change, in commit order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    Batch(Vec<MetadataRecord>),
    /// The leader's snapshot replaced this member's log: (records applied, records).
    Snapshot(u64, Vec<MetadataRecord>),
}

#[derive(Debug)]
enum Member {
    Alone(Box<QuorumNode>),
    Cluster(QuorumHandle),
}

/// What a member knows of the others' liveness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeersHeard {
    /// This member leads (only a leader hears from every member).
    pub leading: bool,
    /// How long ago each other member was last heard from, by node id (`None`: never).
    pub heard: std::collections::BTreeMap<i32, Option<std::time::Duration>>,
    /// Members whose process is gone: connecting to them was refused.
    pub gone: std::collections::BTreeSet<i32>,
}

#[derive(Debug)]
pub struct MetadataJournal {
    member: Member,
    /// Alone: batches committed and not yet taken.
    committed: VecDeque<Committed>,
    /// Cluster: entries handed over since the last snapshot (when to snapshot again).
    entries_since_snapshot: usize,
    /// Cluster: the index of the last entry handed over (what a snapshot is as of).
    taken_index: u64,
    /// The voter set lives in the log (`controller.quorum.bootstrap.servers`), so it can
    /// change; a static one (`controller.quorum.voters`) cannot.
    dynamic: bool,
}

/// The Kafka node id of a Raft id.
pub fn node_id_of(raft: u64) -> i32 {
    i32::try_from(raft.saturating_sub(1)).unwrap_or(i32::MAX)
}

/// The Raft id of a Kafka node id (Raft ids start at 1, Kafka's at 0).
pub fn raft_id(node_id: i32) -> u64 {
    u64::try_from(node_id).unwrap_or(0) + 1
}

impl MetadataJournal {
    /// Opens the journal of `node_id` under `data_dir` and replays it.
    pub fn open(data_dir: &Path, node_id: i32) -> Result<(MetadataJournal, Replay), JournalError> {
        let store = RaftStore::open(data_dir)?;
        let id = raft_id(node_id);
        if store.is_fresh() {
            let legacy = data_dir.join(METADATA_DIR).join(METADATA_LOG_FILE);
            let records = if legacy.exists() {
                let (_, records) = MetadataLog::open(data_dir)?;
                records
            } else {
                Vec::new()
            };
            let count = records.len() as u64;
            store.bootstrap_with(&[id], encode_snapshot(count, &records)?)?;
            if legacy.exists() {
                let moved = legacy.with_file_name(format!("{METADATA_LOG_FILE}.imported"));
                std::fs::rename(&legacy, &moved).map_err(|source| JournalError::Import {
                    path: legacy.display().to_string(),
                    source,
                })?;
                tracing::info!(records = count, from = %legacy.display(), "metadata log imported into the quorum's first snapshot");
            }
        }
        let snap = store.latest_snapshot();
        let snap_index = snap.get_metadata().index;
        let (snapshot_applied, snapshot) = decode_snapshot(snap_index, &snap.data)?;
        let mut node = QuorumNode::open(id, &[id], store, QuorumTiming::default())?;
        node.campaign()?;
        let mut replay = Replay {
            snapshot_applied,
            snapshot,
            committed: Vec::new(),
        };
        for _ in 0..COMMIT_ROUNDS_MAX {
            let progress = node.drive()?;
            if progress.committed.is_empty() && progress.messages.is_empty() && !node.has_ready() {
                break;
            }
            for e in progress.committed {
                replay.committed.extend(decode_batch(e.index, &e.data)?);
            }
        }
        let journal = MetadataJournal {
            member: Member::Alone(Box::new(node)),
            committed: VecDeque::new(),
            entries_since_snapshot: 0,
            taken_index: 0,
            dynamic: false,
        };
        Ok((journal, replay))
    }

    /// Opens the journal of `node_id` as a member of a quorum it reaches through
    /// `transport`. The snapshot is replayed at once; committed entries arrive through
    /// [`Self::take_committed`] as the member learns them.
    pub fn open_cluster(
        data_dir: &Path,
        node_id: i32,
        transport: Transport,
        timing: QuorumTiming,
    ) -> Result<(MetadataJournal, Replay), JournalError> {
        let store = RaftStore::open(data_dir)?;
        let snap = store.latest_snapshot();
        let snap_index = snap.get_metadata().index;
        let (snapshot_applied, snapshot) = decode_snapshot(snap_index, &snap.data)?;
        let dynamic = !transport.bootstrap.is_empty();
        let handle = service::start(raft_id(node_id), transport, store, timing)?;
        let journal = MetadataJournal {
            member: Member::Cluster(handle),
            committed: VecDeque::new(),
            entries_since_snapshot: 0,
            taken_index: snap_index,
            dynamic,
        };
        let replay = Replay {
            snapshot_applied,
            snapshot,
            committed: Vec::new(),
        };
        Ok((journal, replay))
    }

    /// The quorum leader's node id, if known (alone: this node).
    pub fn leader(&self) -> Option<i32> {
        match &self.member {
            Member::Alone(node) => node.leader().map(node_id_of),
            Member::Cluster(h) => h.status().and_then(|s| s.leader).map(node_id_of),
        }
    }

    /// Proposes `batch` through whichever member leads, without waiting for it (a quorum
    /// member registering itself). Alone: a plain commit.
    pub fn propose_forwarded(&mut self, batch: &[MetadataRecord]) -> Result<(), JournalError> {
        match &self.member {
            Member::Alone(_) => self.append(batch),
            Member::Cluster(h) => {
                h.propose_forwarded(encode_batch(batch)?);
                Ok(())
            }
        }
    }

    /// How long ago each other member was last heard from, by node id (`None`: never),
    /// and whether this member leads (only a leader hears from every member). Alone:
    /// nothing to hear.
    pub fn peers_heard(&self) -> PeersHeard {
        match &self.member {
            Member::Alone(_) => PeersHeard {
                leading: true,
                ..PeersHeard::default()
            },
            Member::Cluster(h) => match h.status() {
                Some(s) => PeersHeard {
                    leading: s.leader == Some(s.id),
                    heard: s
                        .heard
                        .into_iter()
                        .map(|(id, ago)| (node_id_of(id), ago))
                        .collect(),
                    gone: s.refused.into_iter().map(node_id_of).collect(),
                },
                None => PeersHeard::default(),
            },
        }
    }

    /// The quorum as this member sees it (DescribeQuorum).
    pub fn describe(&self) -> dataplane::controller::QuorumDescription {
        let (id, leader, term, committed, progress, heard, (conf_voters, learners)) =
            match &self.member {
                Member::Alone(node) => (
                    node.id(),
                    node.leader(),
                    node.term(),
                    node.committed(),
                    node.progress(),
                    std::collections::BTreeMap::new(),
                    (
                        std::iter::once(node.id()).collect(),
                        std::collections::BTreeSet::new(),
                    ),
                ),
                Member::Cluster(h) => match h.status() {
                    Some(s) => (
                        s.id,
                        s.leader,
                        s.term,
                        s.committed,
                        s.progress,
                        s.heard,
                        (s.voters, s.learners),
                    ),
                    None => return dataplane::controller::QuorumDescription::default(),
                },
            };
        let mut known: std::collections::BTreeMap<u64, u64> = progress.into_iter().collect();
        // A member that does not lead knows the leader's log reaches at least what is
        // committed (Kafka answers from the leader; this member answers what it knows).
        if let Some(l) = leader.filter(|l| *l != id) {
            known.entry(l).or_insert(committed);
        }
        let (mut voters, mut observers) = (Vec::new(), Vec::new());
        for v in conf_voters.iter().chain(&learners).copied() {
            let end = known.get(&v).map_or(-1, |e| *e as i64);
            let ago = if v == id {
                Some(std::time::Duration::ZERO)
            } else {
                heard.get(&v).copied().flatten()
            };
            let entry = (node_id_of(v), end, ago, None);
            if learners.contains(&v) {
                observers.push(entry);
            } else {
                voters.push(entry);
            }
        }
        dataplane::controller::QuorumDescription {
            leader: leader.map(node_id_of),
            epoch: term as i32,
            high_watermark: committed as i64,
            voters,
            observers,
        }
    }

    /// Makes a new dynamic quorum of this node alone (`twinlog format --standalone`,
    /// Kafka's `kafka-storage format --standalone`): its Raft store starts with this node
    /// as the only voter and its endpoint as the first metadata.
    pub fn format_standalone(
        data_dir: &Path,
        node_id: i32,
        endpoint: MetadataRecord,
    ) -> Result<(), JournalError> {
        let store = RaftStore::open(data_dir)?;
        if !store.is_fresh() {
            return Err(JournalError::Corrupt {
                index: 0,
                reason: "the metadata log already exists; a standalone quorum starts empty".into(),
            });
        }
        store.bootstrap_with(&[raft_id(node_id)], encode_snapshot(1, &[endpoint])?)?;
        Ok(())
    }

    /// Whether the voter set may change (a dynamic quorum).
    pub fn is_dynamic(&self) -> bool {
        self.dynamic
    }

    /// Dials the controller `node_id` at `addr` (its committed endpoint).
    pub fn dial(&self, node_id: i32, addr: std::net::SocketAddr) {
        if let Member::Cluster(h) = &self.member {
            h.dial(raft_id(node_id), addr);
        }
    }

    /// Adds (`add`) or removes a voter; answers once the change is applied here.
    pub fn change_voters(&self, node_id: i32, add: bool) -> Result<(), String> {
        let Member::Cluster(h) = &self.member else {
            return Err("this node is no member of a quorum".into());
        };
        let id = raft_id(node_id);
        h.change_voters(if add {
            Change::Add(id)
        } else {
            Change::Remove(id)
        })
    }

    /// The voters and the learners, by node id, as this member knows them.
    pub fn membership(&self) -> (Vec<i32>, Vec<i32>) {
        match &self.member {
            Member::Alone(node) => (vec![node_id_of(node.id())], Vec::new()),
            Member::Cluster(h) => h.status().map_or_else(Default::default, |s| {
                (
                    s.voters.into_iter().map(node_id_of).collect(),
                    s.learners.into_iter().map(node_id_of).collect(),
                )
            }),
        }
    }

    /// Whether this journal is one member of several.
    pub fn in_quorum(&self) -> bool {
        matches!(self.member, Member::Cluster(_))
    }

    /// Committed changes not yet taken, in order.
    pub fn take_committed(&mut self) -> Result<Vec<Committed>, JournalError> {
        let mut out: Vec<Committed> = self.committed.drain(..).collect();
        if let Member::Cluster(h) = &self.member {
            while let Ok(e) = h.committed.try_recv() {
                if &e.context[..] == b"snapshot" {
                    let (applied, records) = decode_snapshot(e.index, &e.data)?;
                    out.push(Committed::Snapshot(applied, records));
                    self.entries_since_snapshot = 0;
                } else {
                    out.push(Committed::Batch(decode_batch(e.index, &e.data)?));
                    self.entries_since_snapshot += 1;
                }
                self.taken_index = e.index;
            }
        }
        Ok(out)
    }

    /// Commits one batch: durable on a majority on return, and queued for
    /// [`Self::take_committed`] with whatever committed before it.
    pub fn append(&mut self, batch: &[MetadataRecord]) -> Result<(), JournalError> {
        let data = encode_batch(batch)?;
        match &mut self.member {
            Member::Alone(node) => {
                node.propose(data)?;
                let index = node.last_index();
                for _ in 0..COMMIT_ROUNDS_MAX {
                    let progress = node.drive()?;
                    for e in &progress.committed {
                        self.committed
                            .push_back(Committed::Batch(decode_batch(e.index, &e.data)?));
                    }
                    if node.committed() >= index {
                        return Ok(());
                    }
                }
                Err(JournalError::NotCommitted(index))
            }
            Member::Cluster(h) => match h.propose(data) {
                Ok(_) => Ok(()),
                Err(ProposeError::NotLeader(leader)) => {
                    Err(JournalError::NotLeader(leader.map(node_id_of)))
                }
                Err(e) => Err(JournalError::Propose(e)),
            },
        }
    }

    /// Entries since the last snapshot.
    pub fn entries_since_snapshot(&self) -> usize {
        match &self.member {
            Member::Alone(node) => node.store().entry_count(),
            Member::Cluster(_) => self.entries_since_snapshot,
        }
    }

    /// Snapshots the metadata when `min_entries` entries have piled up since the last
    /// one, or a learner needs one. `records` rebuilds the state as of everything
    /// committed; `applied` is its count.
    pub fn maybe_snapshot(
        &mut self,
        min_entries: usize,
        applied: u64,
        records: impl FnOnce() -> Vec<MetadataRecord>,
    ) -> Result<bool, JournalError> {
        let wanted = matches!(&self.member, Member::Cluster(h) if h.snapshot_wanted());
        if self.entries_since_snapshot() < min_entries && !wanted {
            return Ok(false);
        }
        self.snapshot(applied, &records())?;
        Ok(true)
    }

    /// Snapshots the metadata now (as of every change taken so far).
    pub fn snapshot(
        &mut self,
        applied: u64,
        records: &[MetadataRecord],
    ) -> Result<(), JournalError> {
        let data = encode_snapshot(applied, records)?;
        match &mut self.member {
            Member::Alone(node) => node.compact(u64::MAX, data)?,
            Member::Cluster(h) => {
                h.compact(self.taken_index, data);
                self.entries_since_snapshot = 0;
            }
        }
        tracing::info!(
            records = records.len(),
            "metadata snapshot taken; the quorum log is truncated"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests;
