//! One member of the metadata quorum: raft-rs's `RawNode` over [`RaftStore`], driven by
//! its owner (the controller thread): [`QuorumNode::tick`] on a timer, [`QuorumNode::step`]
//! for each message from a peer, [`QuorumNode::propose`] for records to commit, and
//! [`QuorumNode::drive`] after any of them, which persists what raft-rs asks (entries,
//! hard state, snapshots: fsynced first), hands back the messages to send and the
//! committed entries to apply, in raft-rs's documented order. The transport is the
//! owner's, so the same node runs over TCP between processes and over an in-memory
//! network in tests.

use raft::eraftpb::{
    ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, Message, Snapshot,
};
use raft::{RawNode, StateRole};

use super::storage::{RaftStore, StoreError};

/// Why the quorum cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// Not the leader; the leader this member knows, if any.
    #[error("not the quorum leader (leader: {0:?})")]
    NotLeader(Option<u64>),
}

/// How often the owner calls [`QuorumNode::tick`], and what raft-rs counts in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuorumTiming {
    pub tick_ms: u64,
    /// Ticks without a leader before a follower campaigns (randomized up to twice this).
    pub election_ticks: usize,
    pub heartbeat_ticks: usize,
}

impl Default for QuorumTiming {
    fn default() -> Self {
        // Kafka's controller.quorum.election.timeout.ms is 1000 and its fetch (heartbeat)
        // every 500 ms at most; 100 ms ticks give an election after 1-2 s.
        QuorumTiming {
            tick_ms: 100,
            election_ticks: 10,
            heartbeat_ticks: 2,
        }
    }
}

/// What one [`QuorumNode::drive`] produced.
#[derive(Debug, Default)]
pub struct Progress {
    /// To send to the peers they name (`Message::to`).
    pub messages: Vec<Message>,
    /// Committed normal entries with data, in order, to apply to the state machine.
    pub committed: Vec<Entry>,
    /// A snapshot from the leader: the state machine is replaced by its data first.
    pub snapshot: Option<Snapshot>,
}

/// Forwards raft-rs's slog records to `tracing`.
struct TracingDrain;

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &slog::Record<'_>, _: &slog::OwnedKVList) -> Result<(), slog::Never> {
        let msg = record.msg().to_string();
        match record.level() {
            slog::Level::Critical | slog::Level::Error => tracing::error!(target: "raft", "{msg}"),
            slog::Level::Warning => tracing::warn!(target: "raft", "{msg}"),
            slog::Level::Info => tracing::info!(target: "raft", "{msg}"),
            _ => tracing::debug!(target: "raft", "{msg}"),
        }
        Ok(())
    }
}

pub struct QuorumNode {
    raw: RawNode<RaftStore>,
    store: RaftStore,
}

impl std::fmt::Debug for QuorumNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumNode")
            .field("id", &self.id())
            .field("role", &self.raw.raft.state)
            .field("term", &self.raw.raft.term)
            .field("leader", &self.leader())
            .finish()
    }
}

impl QuorumNode {
    /// The member `id` over `store`. A fresh store is first bootstrapped with `voters`
    /// (every member of a new quorum starts from the same configuration).
    pub fn open(
        id: u64,
        voters: &[u64],
        store: RaftStore,
        timing: QuorumTiming,
    ) -> Result<QuorumNode, QuorumError> {
        // A fresh learner (no voters given) waits for the leader's snapshot instead.
        if store.is_fresh() && !voters.is_empty() {
            store.bootstrap(voters)?;
        }
        let applied = store.latest_snapshot().get_metadata().index;
        let config = raft::Config {
            id,
            election_tick: timing.election_ticks,
            heartbeat_tick: timing.heartbeat_ticks,
            applied,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..raft::Config::default()
        };
        config.validate()?;
        let logger = slog::Logger::root(slog::Fuse(TracingDrain), slog::o!("node" => id));
        let raw = RawNode::new(&config, store.clone(), &logger)?;
        Ok(QuorumNode { raw, store })
    }

    pub fn id(&self) -> u64 {
        self.raw.raft.id
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The current leader's id, if one is known.
    pub fn leader(&self) -> Option<u64> {
        let l = self.raw.raft.leader_id;
        (l != raft::INVALID_ID).then_some(l)
    }

    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// Each voter's log end as this member knows it: every voter's matched index when
    /// leading, its own last index otherwise.
    pub fn progress(&self) -> Vec<(u64, u64)> {
        if self.is_leader() {
            let mut all: Vec<(u64, u64)> = self
                .raw
                .raft
                .prs()
                .iter()
                .map(|(id, p)| (*id, p.matched))
                .collect();
            all.sort_unstable();
            all
        } else {
            vec![(self.id(), self.last_index())]
        }
    }

    pub fn store(&self) -> &RaftStore {
        &self.store
    }

    pub fn tick(&mut self) {
        self.raw.tick();
    }

    /// Starts an election now (a single voter wins it at once).
    pub fn campaign(&mut self) -> Result<(), QuorumError> {
        Ok(self.raw.campaign()?)
    }

    /// Whether [`Self::drive`] has something to do.
    pub fn has_ready(&self) -> bool {
        self.raw.has_ready()
    }

    /// The index of the last entry in this member's log.
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// The highest index this member knows to be committed.
    pub fn committed(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// A message from a peer.
    pub fn step(&mut self, m: Message) -> Result<(), QuorumError> {
        match self.raw.step(m) {
            // A message from a member that left, or for a stale term: dropped, as raft-rs
            // documents.
            Err(raft::Error::StepPeerNotFound | raft::Error::StepLocalMsg) => Ok(()),
            other => other.map_err(QuorumError::from),
        }
    }

    /// Proposes `data` for commit. Only the leader takes proposals: the active
    /// controller validates and plans before it proposes, and the others answer
    /// NOT_CONTROLLER with the leader they know, as in KRaft (raft-rs would forward a
    /// follower's proposal, with no answer to give back).
    pub fn propose(&mut self, data: Vec<u8>) -> Result<(), QuorumError> {
        if !self.is_leader() {
            return Err(QuorumError::NotLeader(self.leader()));
        }
        Ok(self.raw.propose(Vec::new(), data)?)
    }

    /// Proposes `data` from any member: a follower's proposal is forwarded to the leader
    /// and its outcome is not reported (the proposer watches for it among the committed
    /// entries). For idempotent records, such as a broker's registration.
    pub fn propose_forwarded(&mut self, data: Vec<u8>) -> Result<(), QuorumError> {
        Ok(self.raw.propose(Vec::new(), data)?)
    }

    /// Proposes a membership change (added or removed voters).
    pub fn propose_conf_change(&mut self, cc: ConfChangeV2) -> Result<(), QuorumError> {
        Ok(self.raw.propose_conf_change(Vec::new(), cc)?)
    }

    /// The configuration in force (voters and learners).
    pub fn conf_state(&self) -> ConfState {
        self.raw.raft.prs().conf().to_conf_state()
    }

    /// Whether a membership change is proposed and not yet applied.
    pub fn has_pending_conf(&self) -> bool {
        self.raw.raft.has_pending_conf()
    }

    /// Proposes adding `id` as a learner (it receives the log and never votes).
    pub fn add_learner(&mut self, id: u64) -> Result<(), QuorumError> {
        self.change(ConfChangeType::AddLearnerNode, id)
    }

    /// Proposes making `id` a voter (from any member: a follower forwards it).
    pub fn add_voter(&mut self, id: u64) -> Result<(), QuorumError> {
        self.change(ConfChangeType::AddNode, id)
    }

    /// Proposes taking `id` out of the configuration.
    pub fn remove_voter(&mut self, id: u64) -> Result<(), QuorumError> {
        self.change(ConfChangeType::RemoveNode, id)
    }

    fn change(&mut self, kind: ConfChangeType, id: u64) -> Result<(), QuorumError> {
        let mut single = ConfChangeSingle::default();
        single.set_change_type(kind);
        single.node_id = id;
        let mut cc = ConfChangeV2::default();
        cc.mut_changes().push(single);
        self.propose_conf_change(cc)
    }

    /// A peer could not be reached (the transport failed to send to it).
    pub fn report_unreachable(&mut self, id: u64) {
        self.raw.report_unreachable(id);
    }

    /// Snapshots the state machine (`data`, as of the entry at `index`, which is
    /// applied) and drops the log it covers.
    pub fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<(), QuorumError> {
        let applied = self.raw.raft.raft_log.applied;
        let index = self.store.past_dataless(index.min(applied), applied);
        Ok(self.store.compact(index, data)?)
    }

    /// Persists and collects what raft-rs has ready.
    pub fn drive(&mut self) -> Result<Progress, QuorumError> {
        let mut out = Progress::default();
        if !self.raw.has_ready() {
            return Ok(out);
        }
        let mut ready = self.raw.ready();
        // A leader may send before persisting (raft's parallel append).
        out.messages.extend(ready.take_messages());
        if !ready.snapshot().is_empty() {
            let snap = ready.snapshot().clone();
            self.store.apply_snapshot(snap.clone())?;
            out.snapshot = Some(snap);
        }
        let committed = ready.take_committed_entries();
        self.collect_committed(committed, &mut out)?;
        self.store.append(ready.entries())?;
        if let Some(hs) = ready.hs() {
            self.store.set_hard_state(hs)?;
        }
        out.messages.extend(ready.take_persisted_messages());
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.store.set_commit(commit)?;
        }
        out.messages.extend(light.take_messages());
        let committed = light.take_committed_entries();
        self.collect_committed(committed, &mut out)?;
        self.raw.advance_apply();
        Ok(out)
    }

    fn collect_committed(
        &mut self,
        entries: Vec<Entry>,
        out: &mut Progress,
    ) -> Result<(), QuorumError> {
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal => {
                    // A new leader's first entry is empty: nothing to apply.
                    if !e.data.is_empty() {
                        out.committed.push(e);
                    }
                }
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    let cs = if e.get_entry_type() == EntryType::EntryConfChangeV2 {
                        let mut cc = ConfChangeV2::default();
                        protobuf::Message::merge_from_bytes(&mut cc, &e.data)
                            .map_err(raft::Error::CodecError)?;
                        self.raw.apply_conf_change(&cc)?
                    } else {
                        let mut cc = raft::eraftpb::ConfChange::default();
                        protobuf::Message::merge_from_bytes(&mut cc, &e.data)
                            .map_err(raft::Error::CodecError)?;
                        self.raw.apply_conf_change(&cc)?
                    };
                    self.store.set_conf_state(&cs)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
