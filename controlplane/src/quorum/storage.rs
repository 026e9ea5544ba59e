//! The Raft log of the metadata quorum on disk, `<data_dir>/__cluster_metadata/raft/`,
//! behind raft-rs's `Storage` trait:
//!
//! - `log`: the entries since the last snapshot, one frame each,
//!   `[u32 length][u32 crc32c][raft Entry, protobuf]` (big endian; the CRC covers the
//!   entry). Appends are written and fsynced before raft-rs is told they are stable; an
//!   append that overwrites a suffix (a new leader's log wins) first cuts the file there.
//!   At open the first torn or corrupt frame and everything after it are cut off.
//! - `state`: the hard state (term, vote, commit) and the voters, replaced atomically
//!   (temp file, fsync, rename, directory fsync).
//! - `snapshot`: the latest snapshot (index, term, voters and the state machine's bytes),
//!   replaced atomically; the log then keeps only what follows it.
//!
//! Every entry is kept in memory too: the metadata log is small (a snapshot truncates it),
//! and raft-rs reads entries synchronously.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

/// The directory of the quorum's files inside the data directory.
pub const RAFT_DIR: &str = "__cluster_metadata/raft";
const LOG_FILE: &str = "log";
const STATE_FILE: &str = "state";
const SNAPSHOT_FILE: &str = "snapshot";
const FRAME_HEADER: usize = 8;
/// The largest entry a frame may hold; a larger length is corruption.
const ENTRY_BYTES_MAX: usize = 64 << 20;

/// Why the quorum's storage failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{op} {}: {source}", .path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {reason}", .path.display())]
    Corrupt { path: PathBuf, reason: String },
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { op, path, source }
}

/// The quorum's Raft storage: cheap to clone (one shared core), as raft-rs wants it.
#[derive(Clone)]
pub struct RaftStore {
    core: Arc<RwLock<Core>>,
    /// A peer asked for a snapshot whose configuration lacks it (a learner added after
    /// the stored one was taken): the owner should snapshot again.
    wanted: Arc<std::sync::atomic::AtomicBool>,
}

struct Core {
    dir: PathBuf,
    log: File,
    /// Entries after the snapshot, in index order, each with its frame's file offset.
    entries: Vec<(Entry, u64)>,
    log_len: u64,
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Snapshot,
}

impl std::fmt::Debug for RaftStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.rl();
        f.debug_struct("RaftStore")
            .field("dir", &c.dir)
            .field("first_index", &c.first_index())
            .field("last_index", &c.last_index())
            .field("commit", &c.hard_state.commit)
            .finish()
    }
}

fn frame(entry: &Entry) -> Vec<u8> {
    let payload = entry.write_to_bytes().unwrap_or_default();
    let mut out = Vec::with_capacity(FRAME_HEADER + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Replaces `path` with `data` durably.
fn write_atomic(dir: &Path, name: &str, data: &[u8]) -> Result<(), StoreError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp).map_err(io("create", &tmp))?;
    f.write_all(data).map_err(io("write", &tmp))?;
    f.sync_all().map_err(io("fsync", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(io("rename", &tmp))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync", dir))
}

fn read_file(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("read", path)(e)),
    }
}

/// `state`: `[u32 len][HardState][u32 len][ConfState]`.
fn encode_state(hs: &HardState, cs: &ConfState) -> Vec<u8> {
    let mut out = Vec::new();
    for bytes in [
        hs.write_to_bytes().unwrap_or_default(),
        cs.write_to_bytes().unwrap_or_default(),
    ] {
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

fn decode_state(path: &Path, raw: &[u8]) -> Result<(HardState, ConfState), StoreError> {
    let corrupt = |reason: &str| StoreError::Corrupt {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let mut parts = Vec::new();
    let mut at = 0usize;
    for _ in 0..2 {
        let len = raw
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| corrupt("truncated"))?;
        let body = raw
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| corrupt("truncated"))?;
        parts.push(body);
        at += 4 + len;
    }
    let hs = HardState::parse_from_bytes(parts[0]).map_err(|e| corrupt(&e.to_string()))?;
    let cs = ConfState::parse_from_bytes(parts[1]).map_err(|e| corrupt(&e.to_string()))?;
    Ok((hs, cs))
}

impl RaftStore {
    /// Opens (creating if needed) the quorum's storage under `data_dir`.
    pub fn open(data_dir: &Path) -> Result<RaftStore, StoreError> {
        let dir = data_dir.join(RAFT_DIR);
        std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        let snapshot = match read_file(&dir.join(SNAPSHOT_FILE))? {
            Some(raw) => Snapshot::parse_from_bytes(&raw).map_err(|e| StoreError::Corrupt {
                path: dir.join(SNAPSHOT_FILE),
                reason: e.to_string(),
            })?,
            None => Snapshot::default(),
        };
        let (mut hard_state, mut conf_state) = match read_file(&dir.join(STATE_FILE))? {
            Some(raw) => decode_state(&dir.join(STATE_FILE), &raw)?,
            None => (HardState::default(), ConfState::default()),
        };
        let meta = snapshot.get_metadata();
        if meta.index > 0 {
            // The state file is replaced after the snapshot: never behind it.
            hard_state.commit = hard_state.commit.max(meta.index);
            hard_state.term = hard_state.term.max(meta.term);
            if conf_state.voters.is_empty() {
                conf_state = meta.get_conf_state().clone();
            }
        }
        let log_path = dir.join(LOG_FILE);
        let mut log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)
            .map_err(io("open", &log_path))?;
        let mut raw = Vec::new();
        log.read_to_end(&mut raw).map_err(io("read", &log_path))?;
        let mut entries: Vec<(Entry, u64)> = Vec::new();
        let mut at = 0usize;
        let mut cut: Option<String> = None;
        while at < raw.len() {
            let Some(header) = raw.get(at..at + FRAME_HEADER) else {
                cut = Some("a torn frame header".into());
                break;
            };
            let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
            let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
            if len > ENTRY_BYTES_MAX {
                cut = Some(format!("a frame length of {len}"));
                break;
            }
            let Some(payload) = raw.get(at + FRAME_HEADER..at + FRAME_HEADER + len) else {
                cut = Some("a torn frame".into());
                break;
            };
            if crc32c::crc32c(payload) != crc {
                cut = Some("a CRC mismatch".into());
                break;
            }
            let Ok(entry) = Entry::parse_from_bytes(payload) else {
                cut = Some("an entry that does not decode".into());
                break;
            };
            let continuous = entries
                .last()
                .is_none_or(|(prev, _)| entry.index == prev.index + 1);
            if !continuous {
                cut = Some(format!("index {} out of order", entry.index));
                break;
            }
            entries.push((entry, at as u64));
            at += FRAME_HEADER + len;
        }
        if let Some(reason) = cut {
            tracing::warn!(path = %log_path.display(), position = at, %reason, "quorum log: cutting a torn or corrupt tail");
            log.set_len(at as u64).map_err(io("truncate", &log_path))?;
            log.sync_all().map_err(io("fsync", &log_path))?;
        }
        // Entries the snapshot covers are not needed (a crash between the snapshot and
        // the log's rewrite leaves them).
        entries.retain(|(e, _)| e.index > meta.index);
        let core = Core {
            dir,
            log,
            entries,
            log_len: at as u64,
            hard_state,
            conf_state,
            snapshot,
        };
        Ok(RaftStore {
            core: Arc::new(RwLock::new(core)),
            wanted: Arc::default(),
        })
    }

    fn rl(&self) -> RwLockReadGuard<'_, Core> {
        self.core.read().unwrap_or_else(|p| p.into_inner())
    }

    fn wl(&self) -> RwLockWriteGuard<'_, Core> {
        self.core.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether nothing was ever stored (a node that was never started).
    /// The last index from `index` on, up to `upto`, reached over entries the state
    /// machine never sees (a new leader's empty entry, membership changes): a snapshot
    /// as of `index` is as of that one too.
    pub fn past_dataless(&self, index: u64, upto: u64) -> u64 {
        let c = self.rl();
        let mut at = index;
        for (e, _) in c
            .entries
            .iter()
            .filter(|(e, _)| e.index > index && e.index <= upto)
        {
            let dataless = e.data.is_empty() || e.get_entry_type() != EntryType::EntryNormal;
            if e.index != at + 1 || !dataless {
                break;
            }
            at = e.index;
        }
        at
    }

    /// Whether a peer needs a snapshot taken after it joined the configuration.
    pub fn snapshot_wanted(&self) -> bool {
        self.wanted.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn is_fresh(&self) -> bool {
        let c = self.rl();
        c.entries.is_empty()
            && c.snapshot.get_metadata().index == 0
            && c.conf_state.voters.is_empty()
            && c.hard_state.term == 0
    }

    /// Starts a new quorum with these voters: a first snapshot at index 1, term 1 (the
    /// configuration every member starts from).
    pub fn bootstrap(&self, voters: &[u64]) -> Result<(), StoreError> {
        self.bootstrap_with(voters, Vec::new())
    }

    /// [`Self::bootstrap`] with a first state machine (`data`: what an imported log held).
    pub fn bootstrap_with(&self, voters: &[u64], data: Vec<u8>) -> Result<(), StoreError> {
        let mut snap = Snapshot {
            data: data.into(),
            ..Snapshot::default()
        };
        let meta = snap.mut_metadata();
        meta.index = 1;
        meta.term = 1;
        meta.mut_conf_state().voters = voters.to_vec();
        self.apply_snapshot(snap)
    }

    pub fn hard_state(&self) -> HardState {
        self.rl().hard_state.clone()
    }

    pub fn conf_state(&self) -> ConfState {
        self.rl().conf_state.clone()
    }

    /// The latest snapshot (index 0: none).
    pub fn latest_snapshot(&self) -> Snapshot {
        self.rl().snapshot.clone()
    }

    /// Appends entries from a Ready, cutting any suffix they replace; durable on return.
    pub fn append(&self, entries: &[Entry]) -> Result<(), StoreError> {
        let Some(first) = entries.first() else {
            return Ok(());
        };
        let mut c = self.wl();
        let path = c.dir.join(LOG_FILE);
        if let Some(pos) = c.entries.iter().position(|(e, _)| e.index >= first.index) {
            let offset = c.entries[pos].1;
            c.entries.truncate(pos);
            c.log.set_len(offset).map_err(io("truncate", &path))?;
            c.log_len = offset;
        }
        let mut buf = Vec::new();
        let mut offsets = Vec::with_capacity(entries.len());
        for e in entries {
            offsets.push(c.log_len + buf.len() as u64);
            buf.extend_from_slice(&frame(e));
        }
        let at = c.log_len;
        c.log.write_all_at(&buf, at).map_err(io("write", &path))?;
        c.log.sync_data().map_err(io("fsync", &path))?;
        c.log_len += buf.len() as u64;
        for (e, off) in entries.iter().zip(offsets) {
            c.entries.push((e.clone(), off));
        }
        Ok(())
    }

    /// Stores a new hard state. A new term or vote is durable on return (Raft's safety
    /// rests on them); a commit index alone is kept in memory and written with the next
    /// durable change: after a restart a member learns what is committed again (a lone
    /// voter by committing its log in its new term), and an fsync per commit would double
    /// the cost of every metadata change.
    pub fn set_hard_state(&self, hs: &HardState) -> Result<(), StoreError> {
        let mut c = self.wl();
        if &c.hard_state == hs {
            return Ok(());
        }
        let durable = c.hard_state.term != hs.term || c.hard_state.vote != hs.vote;
        c.hard_state = hs.clone();
        if !durable {
            return Ok(());
        }
        let data = encode_state(&c.hard_state, &c.conf_state);
        write_atomic(&c.dir, STATE_FILE, &data)
    }

    /// Moves the commit index (raft-rs's light ready).
    pub fn set_commit(&self, commit: u64) -> Result<(), StoreError> {
        let mut hs = self.hard_state();
        if hs.commit >= commit {
            return Ok(());
        }
        hs.commit = commit;
        self.set_hard_state(&hs)
    }

    /// Stores the voters after a configuration change is applied.
    pub fn set_conf_state(&self, cs: &ConfState) -> Result<(), StoreError> {
        let mut c = self.wl();
        c.conf_state = cs.clone();
        let data = encode_state(&c.hard_state, &c.conf_state);
        write_atomic(&c.dir, STATE_FILE, &data)
    }

    /// Replaces the whole log with a snapshot received from the leader (or the bootstrap
    /// one).
    pub fn apply_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        let mut c = self.wl();
        let meta = snapshot.get_metadata().clone();
        write_atomic(
            &c.dir,
            SNAPSHOT_FILE,
            &snapshot.write_to_bytes().unwrap_or_default(),
        )?;
        c.snapshot = snapshot;
        let path = c.dir.join(LOG_FILE);
        c.entries.clear();
        c.log.set_len(0).map_err(io("truncate", &path))?;
        c.log.sync_all().map_err(io("fsync", &path))?;
        c.log_len = 0;
        c.hard_state.commit = c.hard_state.commit.max(meta.index);
        c.hard_state.term = c.hard_state.term.max(meta.term);
        c.conf_state = meta.get_conf_state().clone();
        let data = encode_state(&c.hard_state, &c.conf_state);
        write_atomic(&c.dir, STATE_FILE, &data)
    }

    /// Takes a snapshot of the state machine at `applied` (which it has applied) with
    /// `data`, and drops the log entries it covers.
    pub fn compact(&self, applied: u64, data: Vec<u8>) -> Result<(), StoreError> {
        let mut c = self.wl();
        if applied <= c.snapshot.get_metadata().index {
            return Ok(());
        }
        let term = c
            .entries
            .iter()
            .find(|(e, _)| e.index == applied)
            .map(|(e, _)| e.term)
            .ok_or_else(|| StoreError::Corrupt {
                path: c.dir.join(LOG_FILE),
                reason: format!("no entry at the applied index {applied} to snapshot"),
            })?;
        let mut snap = Snapshot {
            data: data.into(),
            ..Snapshot::default()
        };
        let meta = snap.mut_metadata();
        meta.index = applied;
        meta.term = term;
        meta.set_conf_state(c.conf_state.clone());
        write_atomic(
            &c.dir,
            SNAPSHOT_FILE,
            &snap.write_to_bytes().unwrap_or_default(),
        )?;
        c.snapshot = snap;
        self.wanted
            .store(false, std::sync::atomic::Ordering::SeqCst);
        // Rewrite the log with what follows the snapshot.
        let kept: Vec<Entry> = c
            .entries
            .iter()
            .filter(|(e, _)| e.index > applied)
            .map(|(e, _)| e.clone())
            .collect();
        let mut buf = Vec::new();
        let mut entries = Vec::with_capacity(kept.len());
        for e in kept {
            let off = buf.len() as u64;
            buf.extend_from_slice(&frame(&e));
            entries.push((e, off));
        }
        let dir = c.dir.clone();
        write_atomic(&dir, LOG_FILE, &buf)?;
        let path = dir.join(LOG_FILE);
        c.log = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io("open", &path))?;
        c.log_len = buf.len() as u64;
        c.entries = entries;
        Ok(())
    }

    /// Entries in the log (after the snapshot).
    pub fn entry_count(&self) -> usize {
        self.rl().entries.len()
    }
}

impl Core {
    fn first_index(&self) -> u64 {
        self.snapshot.get_metadata().index + 1
    }

    fn last_index(&self) -> u64 {
        self.entries
            .last()
            .map_or(self.snapshot.get_metadata().index, |(e, _)| e.index)
    }
}

fn unavailable() -> raft::Error {
    raft::Error::Store(StorageError::Unavailable)
}

impl raft::Storage for RaftStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let c = self.rl();
        Ok(RaftState::new(c.hard_state.clone(), c.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let c = self.rl();
        if low < c.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > c.last_index() + 1 {
            return Err(unavailable());
        }
        let max = max_size.into().unwrap_or(u64::MAX);
        let start = (low - c.first_index()) as usize;
        let end = (high - c.first_index()) as usize;
        let mut out = Vec::new();
        let mut size = 0u64;
        for (e, _) in &c.entries[start..end] {
            size += u64::from(e.compute_size());
            if !out.is_empty() && size > max {
                break;
            }
            out.push(e.clone());
        }
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let c = self.rl();
        let meta = c.snapshot.get_metadata();
        if idx == meta.index {
            return Ok(meta.term);
        }
        if idx < c.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > c.last_index() {
            return Err(unavailable());
        }
        Ok(c.entries[(idx - c.first_index()) as usize].0.term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.rl().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.rl().last_index())
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let c = self.rl();
        let conf = c.snapshot.get_metadata().get_conf_state();
        let names_peer = conf.voters.contains(&to) || conf.learners.contains(&to);
        if c.snapshot.get_metadata().index < request_index || !names_peer {
            // raft-rs asks again later; a peer missing from the snapshot's configuration
            // would refuse it, so a newer one is taken first.
            if !names_peer {
                self.wanted.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(c.snapshot.clone())
    }
}

#[cfg(test)]
mod tests;
