//! A quorum member on its own thread, talking to its peers over TCP: the thread owns the
//! [`QuorumNode`], ticks it, steps what the peers send, proposes what its owner asks
//! and hands back committed entries in order. Owners (the controller) see only
//! [`QuorumHandle`]: `propose` answers once the entry is committed (or with the leader
//! to go to), and `committed` yields every committed entry, on leaders and followers
//! alike.
//!
//! Transport: each voter listens on its controller address; to each peer voter it keeps
//! one outgoing connection (reconnected when it breaks) fed by a bounded queue, so a
//! slow or dead peer never blocks the member (a message that does not fit is dropped:
//! Raft sends again). A frame is `[u32 length][raft Message, protobuf]`.
//!
//! A learner (a broker-only node, Kafka's observer) listens nowhere: it dials every
//! voter and opens each connection with a join frame (`[u32 length | JOIN_FLAG][u64
//! raft id]`); the voter then sends that learner's messages back over the same
//! connection, and the leader adds it to the configuration as a learner. So the voters
//! need no address for it, and a learner whose connections all closed is gone (its
//! process exited: a cut network does not close them).

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
/// Marks a control frame in the length word (a raft message never comes near 2 GiB).
const JOIN_FLAG: u32 = 1 << 31;
/// How often a learner without a connection to a voter dials it again.
const REDIAL: Duration = Duration::from_millis(500);

/// How a member takes part in the quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Votes and may lead (`process.roles` with `controller`).
    Voter,
    /// Receives the log and never votes (`process.roles = broker`).
    Learner,
}

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
    /// Snapshot the state machine as of the entry at this index.
    Compact(u64, Vec<u8>),
    Status(Sender<Status>),
    /// A learner dialled in: its messages go back over `stream` (connection `conn`).
    Joined {
        id: u64,
        conn: u64,
        stream: TcpStream,
    },
    /// A learner's connection `conn` closed.
    Left {
        id: u64,
        conn: u64,
    },
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
    /// Peers whose process is gone: a voter refused the last connection attempt (no
    /// process listens there), or a learner's connection closed.
    pub refused: std::collections::BTreeSet<u64>,
    /// The configuration: who votes, and who learns.
    pub voters: std::collections::BTreeSet<u64>,
    pub learners: std::collections::BTreeSet<u64>,
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
    /// Where this member listens (a learner: nowhere).
    pub addr: Option<SocketAddr>,
    store: RaftStore,
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

    /// Snapshots `data` (the state machine as of the entry at `index`, the last one
    /// taken from `committed`) and truncates the log.
    pub fn compact(&self, index: u64, data: Vec<u8>) {
        let _ = self.events.send(Event::Compact(index, data));
    }

    /// Whether a peer needs a snapshot newer than the stored one (see
    /// [`RaftStore::snapshot_wanted`]).
    pub fn snapshot_wanted(&self) -> bool {
        self.store.snapshot_wanted()
    }

    pub fn status(&self) -> Option<Status> {
        let (tx, rx) = mpsc::channel();
        self.events.send(Event::Status(tx)).ok()?;
        rx.recv_timeout(Duration::from_secs(5)).ok()
    }

    /// Stops the member (what it persisted stays) and waits for its thread.
    pub fn stop(mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::SeqCst);
        self.wake_listener();
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| "the quorum thread panicked".to_string())?,
            None => Ok(()),
        }
    }
}

impl QuorumHandle {
    /// Wakes the listener so it sees the stop flag.
    fn wake_listener(&self) {
        if let Some(addr) = self.addr {
            let _ = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT);
        }
    }
}

impl Drop for QuorumHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake_listener();
    }
}

fn write_frame(stream: &mut TcpStream, m: &Message) -> std::io::Result<()> {
    let bytes = m.write_to_bytes().map_err(std::io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + bytes.len());
    buf.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    buf.extend_from_slice(&bytes);
    stream.write_all(&buf)
}

fn write_join(stream: &mut TcpStream, id: u64) -> std::io::Result<()> {
    let mut buf = (8 | JOIN_FLAG).to_be_bytes().to_vec();
    buf.extend_from_slice(&id.to_be_bytes());
    stream.write_all(&buf)
}

/// What a connection carries.
enum Frame {
    Raft(Message),
    /// A learner's first frame: its raft id.
    Join(u64),
}

fn read_frame(stream: &mut TcpStream) -> std::io::Result<Frame> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let word = u32::from_be_bytes(len);
    if word & JOIN_FLAG != 0 {
        if word & !JOIN_FLAG != 8 {
            return Err(std::io::Error::other(format!("a join frame of {word:#x}")));
        }
        let mut id = [0u8; 8];
        stream.read_exact(&mut id)?;
        return Ok(Frame::Join(u64::from_be_bytes(id)));
    }
    let len = word as usize;
    if len > FRAME_BYTES_MAX {
        return Err(std::io::Error::other(format!("a frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Message::parse_from_bytes(&body)
        .map(Frame::Raft)
        .map_err(std::io::Error::other)
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

/// Reads frames from one accepted connection (number `conn`) into the member's events.
/// A learner's join hands the member a writing end of the same connection.
fn peer_reader(conn: u64, mut stream: TcpStream, events: Sender<Event>, stop: Arc<AtomicBool>) {
    let mut joined = None;
    while !stop.load(Ordering::SeqCst) {
        let event = match read_frame(&mut stream) {
            Ok(Frame::Raft(m)) => Event::Message(m),
            Ok(Frame::Join(id)) => match stream.try_clone() {
                Ok(back) => {
                    joined = Some(id);
                    Event::Joined {
                        id,
                        conn,
                        stream: back,
                    }
                }
                Err(_) => break,
            },
            Err(_) => break,
        };
        if events.send(event).is_err() {
            return;
        }
    }
    if let Some(id) = joined {
        let _ = events.send(Event::Left { id, conn });
    }
}

/// A learner's link to one voter: dials it (again, whenever the connection broke),
/// joins, reads what the voter sends back into the member's events, and writes what
/// the queue holds.
fn learner_link(
    me: u64,
    addr: SocketAddr,
    queue: Receiver<Message>,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
) {
    let mut conn: Option<(TcpStream, Arc<AtomicBool>)> = None;
    while !stop.load(Ordering::SeqCst) {
        if conn
            .as_ref()
            .is_some_and(|(_, broken)| broken.load(Ordering::SeqCst))
        {
            conn = None;
        }
        if conn.is_none() {
            if let Ok(mut c) = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                let _ = c.set_nodelay(true);
                let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
                let broken = Arc::new(AtomicBool::new(false));
                if let (Ok(()), Ok(mut back)) = (write_join(&mut c, me), c.try_clone()) {
                    let events = events.clone();
                    let (stop, flag) = (Arc::clone(&stop), Arc::clone(&broken));
                    let _ = std::thread::Builder::new()
                        .name(format!("quorum-learn-{me}"))
                        .spawn(move || {
                            while !stop.load(Ordering::SeqCst) {
                                match read_frame(&mut back) {
                                    Ok(Frame::Raft(m)) => {
                                        if events.send(Event::Message(m)).is_err() {
                                            break;
                                        }
                                    }
                                    Ok(Frame::Join(_)) | Err(_) => break,
                                }
                            }
                            flag.store(true, Ordering::SeqCst);
                        });
                    conn = Some((c, broken));
                }
            }
        }
        match queue.recv_timeout(REDIAL) {
            Ok(m) => {
                if let Some((stream, _)) = conn.as_mut() {
                    if write_frame(stream, &m).is_err() {
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                        conn = None;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Writes a learner's messages over the connection it dialled in on, until it breaks.
fn learner_writer(mut stream: TcpStream, queue: Receiver<Message>, stop: Arc<AtomicBool>) {
    while let Ok(m) = queue.recv() {
        if stop.load(Ordering::SeqCst) || write_frame(&mut stream, &m).is_err() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// An OS error of the member's start, as a [`QuorumError`].
fn os_error(op: &'static str, what: &str) -> impl FnOnce(std::io::Error) -> QuorumError {
    let path = std::path::PathBuf::from(what);
    move |source| QuorumError::Store(super::storage::StoreError::Io { op, path, source })
}

/// Starts member `id` over `store`: a voter of `voters` listening on its own address
/// there (port 0 picks one: see [`QuorumHandle::addr`]), or a learner dialling them.
pub fn start(
    id: u64,
    voters: Voters,
    store: RaftStore,
    timing: QuorumTiming,
    role: Role,
) -> Result<QuorumHandle, QuorumError> {
    // A learner starts with no configuration: the leader's snapshot brings it.
    let ids: Vec<u64> = match role {
        Role::Voter => voters.keys().copied().collect(),
        Role::Learner => Vec::new(),
    };
    let node = QuorumNode::open(id, &ids, store.clone(), timing)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (events_tx, events) = mpsc::channel::<Event>();
    let (committed_tx, committed) = mpsc::channel::<Entry>();
    let addr = match role {
        Role::Voter => Some(listen(id, &voters, &events_tx, &stop)?),
        Role::Learner => None,
    };
    let mut peers: HashMap<u64, SyncSender<Message>> = HashMap::new();
    let mut refusals: BTreeMap<u64, Arc<AtomicBool>> = BTreeMap::new();
    for (&peer, &peer_addr) in voters.iter().filter(|(p, _)| **p != id) {
        let (tx, rx) = mpsc::sync_channel(PEER_QUEUE);
        let stop = Arc::clone(&stop);
        let spawned = match role {
            Role::Voter => {
                let refused = Arc::new(AtomicBool::new(false));
                refusals.insert(peer, Arc::clone(&refused));
                std::thread::Builder::new()
                    .name(format!("quorum-send-{id}-{peer}"))
                    .spawn(move || peer_writer(peer, peer_addr, rx, stop, refused))
            }
            Role::Learner => {
                let events = events_tx.clone();
                std::thread::Builder::new()
                    .name(format!("quorum-link-{id}-{peer}"))
                    .spawn(move || learner_link(id, peer_addr, rx, events, stop))
            }
        };
        spawned.map_err(os_error("spawn", "a quorum peer link"))?;
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
        store,
    })
}

/// Listens on voter `id`'s address and reads every accepted connection on a thread of
/// its own; answers the address bound.
fn listen(
    id: u64,
    voters: &Voters,
    events: &Sender<Event>,
    stop: &Arc<AtomicBool>,
) -> Result<SocketAddr, QuorumError> {
    let at = voters
        .get(&id)
        .copied()
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let what = at.to_string();
    let listener = TcpListener::bind(at).map_err(os_error("listen", &what))?;
    let addr = listener.local_addr().map_err(os_error("listen", &what))?;
    let events = events.clone();
    let stop = Arc::clone(stop);
    std::thread::Builder::new()
        .name(format!("quorum-listen-{id}"))
        .spawn(move || {
            for (conn, stream) in (0u64..).zip(listener.incoming()) {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let _ = stream.set_nodelay(true);
                let events = events.clone();
                let stop = Arc::clone(&stop);
                let _ = std::thread::Builder::new()
                    .name(format!("quorum-read-{id}"))
                    .spawn(move || peer_reader(conn, stream, events, stop));
            }
        })
        .map_err(os_error("spawn", "the quorum listener"))?;
    Ok(addr)
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
    // The learners that dialled in: raft id -> (connection, queue to its writer).
    let mut learners: HashMap<u64, (u64, SyncSender<Message>)> = HashMap::new();
    // Learners whose connection closed and did not come back.
    let mut left = std::collections::BTreeSet::new();
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
            Ok(Event::Joined { id, conn, stream }) if !peers.contains_key(&id) => {
                let (tx, rx) = mpsc::sync_channel(PEER_QUEUE);
                let stop = Arc::clone(&stop);
                let _ = std::thread::Builder::new()
                    .name(format!("quorum-send-{}-{id}", node.id()))
                    .spawn(move || learner_writer(stream, rx, stop));
                learners.insert(id, (conn, tx));
                heard.insert(id, Some(Instant::now()));
                left.remove(&id);
                tracing::info!(learner = id, "a quorum learner connected");
            }
            Ok(Event::Joined { id, .. }) => {
                tracing::warn!(peer = id, "a voter tried to join as a learner; ignored");
            }
            Ok(Event::Left { id, conn }) => {
                if learners.get(&id).is_some_and(|(c, _)| *c == conn) {
                    learners.remove(&id);
                    left.insert(id);
                }
            }
            Ok(Event::Compact(index, data)) => {
                if let Err(e) = node.compact(index, data) {
                    tracing::error!(error = %e, "quorum snapshot failed");
                }
            }
            Ok(Event::Status(answer)) => {
                let conf = node.conf_state();
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
                        .chain(left.iter().copied())
                        .collect(),
                    voters: conf.voters.into_iter().collect(),
                    learners: conf.learners.into_iter().collect(),
                    progress: node.progress(),
                });
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
        if Instant::now() >= next_tick {
            node.tick();
            next_tick += tick;
            admit_learner(&mut node, learners.keys().copied());
        }
        let progress = node.drive().map_err(|e| e.to_string())?;
        for m in progress.messages {
            let to = m.to;
            if let Some(q) = peers.get(&to).or_else(|| learners.get(&to).map(|(_, q)| q)) {
                match q.try_send(m) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => node.report_unreachable(to),
                    Err(TrySendError::Disconnected(_)) => node.report_unreachable(to),
                }
            }
        }
        if let Some(snap) = progress.snapshot {
            // The owner replaces its state with the snapshot's: an entry marked
            // `snapshot` (at the snapshot's index) whose data is the snapshot's, before
            // what follows it.
            let e = Entry {
                index: snap.get_metadata().index,
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

/// The leader adds one connected learner the configuration lacks (Raft takes one
/// membership change at a time; the next tick adds the next).
fn admit_learner(node: &mut QuorumNode, connected: impl Iterator<Item = u64>) {
    if !node.is_leader() || node.has_pending_conf() {
        return;
    }
    let conf = node.conf_state();
    let member = |id: &u64| conf.voters.contains(id) || conf.learners.contains(id);
    let mut connected: Vec<u64> = connected.filter(|id| !member(id)).collect();
    connected.sort_unstable();
    if let Some(id) = connected.first() {
        match node.add_learner(*id) {
            Ok(()) => tracing::info!(learner = id, "adding a learner to the quorum"),
            Err(e) => tracing::warn!(learner = id, error = %e, "cannot add a learner"),
        }
    }
}

#[cfg(test)]
mod tests;
