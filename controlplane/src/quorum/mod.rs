//! The metadata quorum (issue 17, first part): the metadata log replicated by raft-rs
//! (TiKV's Raft engine, chosen in ARCHITECTURE.md), with our storage ([`storage`]: the
//! Raft log, hard state and snapshots on disk, fsynced) and a member driven by its owner
//! ([`node`]), run on its own thread over TCP between members ([`service`]). The
//! controller commits its records through [`journal`], as the quorum's only voter for
//! now; a multi-member controller on [`service`] is the cluster issue's next step.

pub mod journal;
pub mod node;
pub mod service;
pub mod storage;

pub use journal::{JournalError, MetadataJournal, Replay};
pub use node::{Progress, QuorumError, QuorumNode, QuorumTiming};
pub use service::{Change, ProposeError, QuorumHandle, Role, Status, Transport, Voters};
pub use storage::{RaftStore, StoreError};
