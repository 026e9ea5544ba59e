//! A quorum member on its own thread, talking to its peers over TCP: the thread owns the
//! [`QuorumNode`], ticks it, steps what the peers send, proposes what its owner asks
//! and hands back committed entries in order. Owners (the controller) see only
//! [`QuorumHandle`]: `propose` answers once the entry is committed (or with the leader
//! to go to), and `committed` yields every committed entry, on leaders and followers
//! alike.
//!
//! Transport: each member listens on its controller address; to each peer it keeps one
//! outgoing connection (reconnected when it breaks) fed by a bounded queue, so a slow
//! or dead peer never blocks the member (a message that does not fit is dropped: Raft
//! sends again). A frame is `[u32 length][raft Message, protobuf]`.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use protobuf::Message as _;
use raft::eraftpb::{Entry, Message};

use super::node::{QuorumError, QuorumNode, QuorumTiming};
use super::storage::RaftStore;

/// The largest message a peer may send (a snapshot of the metadata fits).
const FRAME_BYTES_MAX: usize = 256 << 20;
/// Messages waiting for one peer before new ones are dropped.
const PEER_QUEUE: usize = 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Where the members are: Raft id -> controller address (`controller.quorum.voters`).
pub type Voters = BTreeMap<u64, SocketAddr>;

/// Why a proposal was not committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error("not the quorum leader (leader: {0:?})")]
    NotLeader(Option<u64>),
    #[error("the proposal was lost (a leader change before it committed)")]
    Lost,
    #[error("the quorum member stopped: {0}")]
    Stopped(String),
}

enum Event {
    Message(Message),
    Propose(Vec<u8>, Sender<Result<u64, ProposeError>>),
    Forward(Vec<u8>),
    Compact(Vec<u8>),
    Status(Sender<Status>),
}

/// What a member knows of the quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub id: u64,
    pub leader: Option<u64>,
    pub term: u64,
    pub committed: u64,
    /// How long ago each peer was last heard from (a leader hears every live member at
    /// each heartbeat; a follower mostly the leader). `None`: never since start.
    pub heard: BTreeMap<u64, Option<Duration>>,
    /// Peers whose last connection attempt was refused: no process listens there.
    pub refused: std::collections::BTreeSet<u64>,
    /// Each voter's log end as this member knows it (`QuorumNode::progress`).
    pub progress: Vec<(u64, u64)>,
}

/// The owner's side of a running member.
#[derive(Debug)]
pub struct QuorumHandle {
    events: Sender<Event>,
    /// Every committed entry with data, in index order.
    pub committed: Receiver<Entry>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), String>>>,
    pub addr: SocketAddr,
}

impl QuorumHandle {
    /// Proposes `data`; answers with its index once committed.
    pub fn propose(&self, data: Vec<u8>) -> Result<u64, ProposeError> {
        let (tx, rx) = mpsc::channel();
        self.events
            .send(Event::Propose(data, tx))
            .map_err(|_| ProposeError::Stopped("gone".into()))?;
        rx.recv()
            .map_err(|_| ProposeError::Stopped("gone".into()))?
    }

    /// Proposes `data` from any member, without waiting (see
    /// [`QuorumNode::propose_forwarded`]).
    pub fn propose_forwarded(&self, data: Vec<u8>) {
        let _ = self.events.send(Event::Forward(data));
    }

    /// Snapshots `data` (the state machine as of every entry received from
    /// `committed` so far) and truncates the log.
    pub fn compact(&self, data: Vec<u8>) {
        let _ = self.events.send(Event::Compact(data));
    }

    pub fn status(&self) -> Option<Status> {
        let (tx, rx) = mpsc::channel();
        self.events.send(Event::Status(tx)).ok()?;
        rx.recv_timeout(Duration::from_secs(5)).ok()
    }

    /// Stops the member (what it persisted stays) and waits for its thread.
    pub fn stop(mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the listener so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, CONNECT_TIMEOUT);
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| "the quorum thread panicked".to_string())?,
            None => Ok(()),
        }
    }
}

impl Drop for QuorumHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, CONNECT_TIMEOUT);
    }
}

fn write_frame(stream: &mut TcpStream, m: &Message) -> std::io::Result<()> {
    let bytes = m.write_to_bytes().map_err(std::io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + bytes.len());
    buf.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    buf.extend_from_slice(&bytes);
    stream.write_all(&buf)
}

fn read_frame(stream: &mut TcpStream) -> std::io::Result<Message> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(std::io::Error::other(format!("a frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Message::parse_from_bytes(&body).map_err(std::io::Error::other)
}

/// The writer of one peer: connects (again) when needed, sends what the queue holds.
/// `refused` says whether the last connection attempt was refused: nothing listens at
/// the peer's address, so its process is gone (a cut network times out instead).
fn peer_writer(
    to: u64,
    addr: SocketAddr,
    queue: Receiver<Message>,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicBool>,
) {
    let mut conn: Option<TcpStream> = None;
    while let Ok(m) = queue.recv() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if conn.is_none() {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(c) => {
                    let _ = c.set_nodelay(true);
                    let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
                    refused.store(false, Ordering::SeqCst);
                    conn = Some(c);
                }
                Err(e) => {
                    let gone = e.kind() == std::io::ErrorKind::ConnectionRefused;
                    refused.store(gone, Ordering::SeqCst);
                }
            }
        }
        let Some(stream) = conn.as_mut() else {
            tracing::debug!(peer = to, %addr, "quorum peer unreachable; message dropped");
            continue;
        };
        if write_frame(stream, &m).is_err() {
            conn = None;
        }
    }
}

/// Reads frames from one accepted connection into the member's events.
fn peer_reader(mut stream: TcpStream, events: Sender<Event>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        match read_frame(&mut stream) {
            Ok(m) => {
                if events.send(Event::Message(m)).is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// An OS error of the member's start, as a [`QuorumError`].
fn os_error(op: &'static str, what: &str) -> impl FnOnce(std::io::Error) -> QuorumError {
    let path = std::path::PathBuf::from(what);
    move |source| QuorumError::Store(super::storage::StoreError::Io { op, path, source })
}

/// Starts member `id` of `voters` over `store`, listening on its own address in
/// `voters` (port 0 picks one: see [`QuorumHandle::addr`]).
pub fn start(
    id: u64,
    voters: Voters,
    store: RaftStore,
    timing: QuorumTiming,
) -> Result<QuorumHandle, QuorumError> {
    let ids: Vec<u64> = voters.keys().copied().collect();
    let node = QuorumNode::open(id, &ids, store, timing)?;
    let listen = voters
        .get(&id)
        .copied()
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let what = listen.to_string();
    let listener = TcpListener::bind(listen).map_err(os_error("listen", &what))?;
    let addr = listener.local_addr().map_err(os_error("listen", &what))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (events_tx, events) = mpsc::channel::<Event>();
    let (committed_tx, committed) = mpsc::channel::<Entry>();
    {
        let events_tx = events_tx.clone();
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name(format!("quorum-listen-{id}"))
            .spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let _ = stream.set_nodelay(true);
                    let events = events_tx.clone();
                    let stop = Arc::clone(&stop);
                    let _ = std::thread::Builder::new()
                        .name(format!("quorum-read-{id}"))
                        .spawn(move || peer_reader(stream, events, stop));
                }
            })
            .map_err(os_error("spawn", "the quorum listener"))?;
    }
    let mut peers: HashMap<u64, SyncSender<Message>> = HashMap::new();
    let mut refusals: BTreeMap<u64, Arc<AtomicBool>> = BTreeMap::new();
    for (&peer, &peer_addr) in voters.iter().filter(|(p, _)| **p != id) {
        let (tx, rx) = mpsc::sync_channel(PEER_QUEUE);
        let stop = Arc::clone(&stop);
        let refused = Arc::new(AtomicBool::new(false));
        refusals.insert(peer, Arc::clone(&refused));
        let _ = std::thread::Builder::new()
            .name(format!("quorum-send-{id}-{peer}"))
            .spawn(move || peer_writer(peer, peer_addr, rx, stop, refused));
        peers.insert(peer, tx);
    }
    let loop_stop = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name(format!("quorum-{id}"))
        .spawn(move || {
            run(
                node,
                events,
                committed_tx,
                (peers, refusals),
                timing,
                loop_stop,
            )
        })
        .map_err(os_error("spawn", "the quorum thread"))?;
    Ok(QuorumHandle {
        events: events_tx,
        committed,
        stop,
        thread: Some(thread),
        addr,
    })
}

type Peers = (
    HashMap<u64, SyncSender<Message>>,
    BTreeMap<u64, Arc<AtomicBool>>,
);

fn run(
    mut node: QuorumNode,
    events: Receiver<Event>,
    committed: Sender<Entry>,
    (peers, refusals): Peers,
    timing: QuorumTiming,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let tick = Duration::from_millis(timing.tick_ms.max(1));
    let mut next_tick = Instant::now() + tick;
    // Proposals waiting for their entry to commit: index -> (term proposed in, answer).
    let mut waiting: BTreeMap<u64, (u64, Sender<Result<u64, ProposeError>>)> = BTreeMap::new();
    // When each peer's last message arrived.
    let mut heard: BTreeMap<u64, Option<Instant>> = peers.keys().map(|id| (*id, None)).collect();
    if peers.is_empty() {
        // A lone voter leads at once.
        node.campaign().map_err(|e| e.to_string())?;
    }
    while !stop.load(Ordering::SeqCst) {
        let wait = next_tick.saturating_duration_since(Instant::now());
        match events.recv_timeout(wait) {
            Ok(Event::Message(m)) => {
                if let Some(at) = heard.get_mut(&m.from) {
                    *at = Some(Instant::now());
                }
                if let Err(e) = node.step(m) {
                    tracing::debug!(error = %e, "quorum message dropped");
                }
            }
            Ok(Event::Propose(data, answer)) => match node.propose(data) {
                Ok(()) => {
                    waiting.insert(node.last_index(), (node.term(), answer));
                }
                Err(QuorumError::NotLeader(leader)) => {
                    let _ = answer.send(Err(ProposeError::NotLeader(leader)));
                }
                Err(e) => {
                    let _ = answer.send(Err(ProposeError::Stopped(e.to_string())));
                }
            },
            Ok(Event::Forward(data)) => {
                if let Err(e) = node.propose_forwarded(data) {
                    tracing::debug!(error = %e, "forwarded proposal dropped (no leader yet)");
                }
            }
            Ok(Event::Compact(data)) => {
                if let Err(e) = node.compact(data) {
                    tracing::error!(error = %e, "quorum snapshot failed");
                }
            }
            Ok(Event::Status(answer)) => {
                let _ = answer.send(Status {
                    id: node.id(),
                    leader: node.leader(),
                    term: node.term(),
                    committed: node.committed(),
                    heard: heard
                        .iter()
                        .map(|(id, at)| (*id, at.map(|t| t.elapsed())))
                        .collect(),
                    refused: refusals
                        .iter()
                        .filter(|(_, r)| r.load(Ordering::SeqCst))
                        .map(|(id, _)| *id)
                        .collect(),
                    progress: node.progress(),
                });
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
        if Instant::now() >= next_tick {
            node.tick();
            next_tick += tick;
        }
        let progress = node.drive().map_err(|e| e.to_string())?;
        for m in progress.messages {
            let to = m.to;
            if let Some(q) = peers.get(&to) {
                match q.try_send(m) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => node.report_unreachable(to),
                    Err(TrySendError::Disconnected(_)) => node.report_unreachable(to),
                }
            }
        }
        if let Some(snap) = progress.snapshot {
            // The owner replaces its state with the snapshot's: an entry of index 0 whose
            // data is the snapshot's, before what follows it.
            let e = Entry {
                index: 0,
                term: snap.get_metadata().term,
                data: snap.data.clone(),
                context: b"snapshot".to_vec().into(),
                ..Entry::default()
            };
            let _ = committed.send(e);
        }
        for e in progress.committed {
            let index = e.index;
            let term = e.term;
            // The entry is in the owner's stream before its proposer hears of the commit,
            // so a proposer that drains the stream after its answer finds its entry.
            let _ = committed.send(e);
            if let Some((proposed_in, answer)) = waiting.remove(&index) {
                let _ = answer.send(if proposed_in == term {
                    Ok(index)
                } else {
                    Err(ProposeError::Lost)
                });
            }
        }
        // Proposals below what is committed that never came back were overwritten.
        let done = node.committed();
        let lost: Vec<u64> = waiting.range(..=done).map(|(i, _)| *i).collect();
        for i in lost {
            if let Some((_, answer)) = waiting.remove(&i) {
                let _ = answer.send(Err(ProposeError::Lost));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
