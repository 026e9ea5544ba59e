//! The metadata quorum: the metadata log replicated by raft-rs (TiKV's Raft engine,
//! chosen in ARCHITECTURE.md), with our storage ([`storage`]: the Raft log, hard state
//! and snapshots on disk, fsynced) and a member driven by its owner ([`node`]), run on
//! its own thread over TCP between members ([`service`]: voters, learners that dial in,
//! bootstrap links of a dynamic quorum; [`tls`] for a `CONTROLLER:SSL` listener). The controller commits its records through
//! [`journal`]: alone, as the only voter driving the node in place; in a quorum, through
//! the member thread.

pub mod journal;
pub mod node;
pub mod service;
pub mod storage;
pub mod tls;

pub use journal::{JournalError, MetadataJournal, Replay};
pub use node::{Progress, QuorumError, QuorumNode, QuorumTiming};
pub use service::{Change, ProposeError, QuorumHandle, Status, Transport, Voters};
pub use storage::{RaftStore, StoreError};
pub use tls::QuorumTls;
