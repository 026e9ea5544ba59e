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
//! Raft sends again). A frame is `[u32 length][raft Message, protobuf]`. With
//! [`Transport::tls`] every connection is TLS, certificates checked both ways
//! ([`super::tls`]).
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
use super::tls::{Conn, QuorumTls};

/// The largest message a peer may send (a snapshot of the metadata fits).
const FRAME_BYTES_MAX: usize = 256 << 20;
/// Messages waiting for one peer before new ones are dropped.
const PEER_QUEUE: usize = 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Marks a control frame in the length word (a raft message never comes near 2 GiB).
const JOIN_FLAG: u32 = 1 << 31;
/// How often a learner without a connection to a voter dials it again.
const REDIAL: Duration = Duration::from_millis(500);

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
        stream: Conn,
    },
    /// A learner's connection `conn` closed.
    Left {
        id: u64,
        conn: u64,
    },
    /// A link dialled to a bootstrap server reached voter `id`: `tx` is its route.
    Linked {
        id: u64,
        tx: SyncSender<Message>,
    },
    /// Dial the voter `id` at this address (its endpoint, committed in the metadata).
    Dial(u64, SocketAddr),
    /// Change the voter set; answered once the change is applied.
    ChangeVoters(Change, Sender<Result<(), String>>),
}

/// A change of the voter set (KIP-853's AddRaftVoter / RemoveRaftVoter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Make a member (usually a caught-up learner) a voter.
    Add(u64),
    /// Take a voter out.
    Remove(u64),
}

/// A membership change waiting to be applied.
type VoterChange = (Change, Instant, Sender<Result<(), String>>);

/// How long a membership change may take to commit.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(15);

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

    /// Dials the voter `id` at `addr` unless a route to it exists.
    pub fn dial(&self, id: u64, addr: SocketAddr) {
        let _ = self.events.send(Event::Dial(id, addr));
    }

    /// Changes the voter set; answers once the change is applied here.
    pub fn change_voters(&self, change: Change) -> Result<(), String> {
        let (tx, rx) = mpsc::channel();
        self.events
            .send(Event::ChangeVoters(change, tx))
            .map_err(|_| "the quorum member stopped".to_string())?;
        rx.recv_timeout(CHANGE_TIMEOUT + Duration::from_secs(5))
            .map_err(|_| "the quorum member did not answer".to_string())?
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

fn write_frame(stream: &mut impl Write, m: &Message) -> std::io::Result<()> {
    let bytes = m.write_to_bytes().map_err(std::io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + bytes.len());
    buf.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    buf.extend_from_slice(&bytes);
    stream.write_all(&buf)
}

fn write_join(stream: &mut impl Write, id: u64) -> std::io::Result<()> {
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

fn read_frame(stream: &mut impl Read) -> std::io::Result<Frame> {
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
    (queue, tls): (Receiver<Message>, Option<QuorumTls>),
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicBool>,
) {
    let mut conn: Option<Conn> = None;
    let mut failure = DialFailure::default();
    while let Ok(m) = queue.recv() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if conn.is_none() {
            match Conn::connect(addr, CONNECT_TIMEOUT, tls.as_ref()) {
                Ok(c) => {
                    let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
                    refused.store(false, Ordering::SeqCst);
                    failure.cleared();
                    conn = Some(c);
                }
                Err(e) => {
                    let gone = e.kind() == std::io::ErrorKind::ConnectionRefused;
                    refused.store(gone, Ordering::SeqCst);
                    failure.saw(to, addr, &e);
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

/// Logs a peer that cannot be dialled for another reason than nothing listening there
/// (a TLS handshake refused: a certificate the other side does not trust), once per
/// distinct reason, so a misconfigured quorum says why.
#[derive(Default)]
struct DialFailure(Option<String>);

impl DialFailure {
    fn saw(&mut self, peer: u64, addr: SocketAddr, e: &std::io::Error) {
        use std::io::ErrorKind::{ConnectionRefused, TimedOut, WouldBlock};
        if matches!(e.kind(), ConnectionRefused | TimedOut | WouldBlock) {
            return;
        }
        let why = e.to_string();
        if self.0.as_ref() != Some(&why) {
            tracing::warn!(peer, %addr, error = %why, "cannot open a quorum link");
            self.0 = Some(why);
        }
    }

    fn cleared(&mut self) {
        self.0 = None;
    }
}

/// Reads frames from one accepted connection (number `conn`) into the member's events,
/// after its TLS handshake when the quorum has TLS. A learner's join hands the member a
/// writing end of the same connection.
fn peer_reader(
    (me, conn): (u64, u64),
    (socket, tls): (TcpStream, Option<QuorumTls>),
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
) {
    let peer = socket.peer_addr().ok();
    let mut stream = match Conn::accept(socket, tls.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(peer = ?peer, error = %e, "a quorum connection failed its TLS handshake");
            return;
        }
    };
    let mut joined = None;
    while !stop.load(Ordering::SeqCst) {
        let event = match read_frame(&mut stream) {
            Ok(Frame::Raft(m)) => Event::Message(m),
            // Answered with this member's id (its hello), before anything else is
            // written back.
            Ok(Frame::Join(id)) => match stream.try_clone() {
                Ok(mut back) => {
                    if write_join(&mut back, me).is_err() {
                        break;
                    }
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

/// A link to one voter: dials it (again, whenever the connection broke), joins,
/// reads what the voter sends back into the member's events, and writes what the queue
/// holds. The voter answers a join with its own id: a link dialled to a bootstrap
/// server (`target` unknown) learns whom it reaches from that, and offers its queue
/// (`tx`) to the member as that voter's route.
struct Link {
    me: u64,
    target: Option<u64>,
    addr: SocketAddr,
    tx: SyncSender<Message>,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
    /// The last dial was refused: nothing listens there.
    refused: Arc<AtomicBool>,
    tls: Option<QuorumTls>,
}

fn learner_link(link: Link, queue: Receiver<Message>) {
    let Link {
        me,
        target,
        addr,
        tx,
        events,
        stop,
        refused,
        tls,
    } = link;
    let mut conn: Option<(Conn, Arc<AtomicBool>)> = None;
    let mut failure = DialFailure::default();
    while !stop.load(Ordering::SeqCst) {
        if conn
            .as_ref()
            .is_some_and(|(_, broken)| broken.load(Ordering::SeqCst))
        {
            conn = None;
        }
        if conn.is_none() {
            match Conn::connect(addr, CONNECT_TIMEOUT, tls.as_ref()) {
                Ok(mut c) => {
                    refused.store(false, Ordering::SeqCst);
                    failure.cleared();
                    let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
                    let broken = Arc::new(AtomicBool::new(false));
                    if let (Ok(()), Ok(mut back)) = (write_join(&mut c, me), c.try_clone()) {
                        let events = events.clone();
                        let (stop, flag, tx) = (Arc::clone(&stop), Arc::clone(&broken), tx.clone());
                        let _ = std::thread::Builder::new()
                            .name(format!("quorum-link-{me}"))
                            .spawn(move || {
                                while !stop.load(Ordering::SeqCst) {
                                    let event = match read_frame(&mut back) {
                                        Ok(Frame::Raft(m)) => Event::Message(m),
                                        // The voter's hello: who this link reaches.
                                        Ok(Frame::Join(id)) if target.is_none() && id != me => {
                                            Event::Linked { id, tx: tx.clone() }
                                        }
                                        Ok(Frame::Join(_)) => continue,
                                        Err(_) => break,
                                    };
                                    if events.send(event).is_err() {
                                        break;
                                    }
                                }
                                flag.store(true, Ordering::SeqCst);
                            });
                        conn = Some((c, broken));
                    }
                }
                Err(e) => {
                    let gone = e.kind() == std::io::ErrorKind::ConnectionRefused;
                    refused.store(gone, Ordering::SeqCst);
                    failure.saw(target.unwrap_or_default(), addr, &e);
                }
            }
        }
        match queue.recv_timeout(REDIAL) {
            Ok(m) => {
                if let Some((stream, _)) = conn.as_mut() {
                    if write_frame(stream, &m).is_err() {
                        stream.shutdown();
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
fn learner_writer(mut stream: Conn, queue: Receiver<Message>, stop: Arc<AtomicBool>) {
    while let Ok(m) = queue.recv() {
        if stop.load(Ordering::SeqCst) || write_frame(&mut stream, &m).is_err() {
            stream.shutdown();
            return;
        }
    }
}

/// An OS error of the member's start, as a [`QuorumError`].
fn os_error(op: &'static str, what: &str) -> impl FnOnce(std::io::Error) -> QuorumError {
    let path = std::path::PathBuf::from(what);
    move |source| QuorumError::Store(super::storage::StoreError::Io { op, path, source })
}

/// How a member reaches the others and is reached.
#[derive(Debug, Clone, Default)]
pub struct Transport {
    /// `controller.quorum.voters`: a static quorum's voters, Raft id -> address.
    pub voters: Voters,
    /// `controller.quorum.bootstrap.servers`: dialled without knowing whom they are (a
    /// dynamic quorum); each voter's hello names it.
    pub bootstrap: Vec<SocketAddr>,
    /// Where this member listens for the others (a controller); `None`: it only dials
    /// (a broker-only learner).
    pub listen: Option<SocketAddr>,
    /// The voters a fresh store starts with (empty: it waits for the leader's
    /// snapshot).
    pub initial_voters: Vec<u64>,
    /// TLS on every link (a `CONTROLLER:SSL` listener); `None`: plain TCP.
    pub tls: Option<QuorumTls>,
}

impl Transport {
    /// Member `id` of the static quorum `voters`: a voter listens on its own address
    /// there (port 0 picks one: see [`QuorumHandle::addr`]); a learner only dials them
    /// and starts with no configuration (the leader's snapshot brings it).
    pub fn static_quorum(id: u64, voters: Voters, voter: bool) -> Transport {
        Transport {
            listen: voter.then(|| {
                voters
                    .get(&id)
                    .copied()
                    .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)))
            }),
            initial_voters: if voter {
                voters.keys().copied().collect()
            } else {
                Vec::new()
            },
            voters,
            bootstrap: Vec::new(),
            tls: None,
        }
    }
}

/// Starts member `id` over `store`, reaching the others as `transport` says.
pub fn start(
    id: u64,
    transport: Transport,
    store: RaftStore,
    timing: QuorumTiming,
) -> Result<QuorumHandle, QuorumError> {
    let node = QuorumNode::open(id, &transport.initial_voters, store.clone(), timing)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (events_tx, events) = mpsc::channel::<Event>();
    let (committed_tx, committed) = mpsc::channel::<Entry>();
    let addr = transport
        .listen
        .map(|at| listen(id, at, (&events_tx, transport.tls.clone()), &stop))
        .transpose()?;
    let mut links = Links {
        me: id,
        events: events_tx.clone(),
        stop: Arc::clone(&stop),
        peers: HashMap::new(),
        refusals: BTreeMap::new(),
        tls: transport.tls.clone(),
    };
    // A voter of a static quorum writes to the others over connections of its own;
    // every other member dials links that the far end also writes back on.
    let writes_only = addr.is_some() && transport.bootstrap.is_empty();
    for (&peer, &peer_addr) in transport.voters.iter().filter(|(p, _)| **p != id) {
        if writes_only {
            links.writer(peer, peer_addr)?;
        } else {
            links.dial(Some(peer), peer_addr)?;
        }
    }
    for at in &transport.bootstrap {
        links.dial(None, *at)?;
    }
    let loop_stop = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name(format!("quorum-{id}"))
        .spawn(move || run(node, events, committed_tx, links, timing, loop_stop))
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

/// A member's own routes to the other voters.
struct Links {
    me: u64,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
    /// Raft id -> the queue of the connection this member writes to it on.
    peers: HashMap<u64, SyncSender<Message>>,
    /// Raft id -> whether its last dial was refused.
    refusals: BTreeMap<u64, Arc<AtomicBool>>,
    tls: Option<QuorumTls>,
}

impl Links {
    /// A write-only connection to static voter `peer` (a static voter's own).
    fn writer(&mut self, peer: u64, addr: SocketAddr) -> Result<(), QuorumError> {
        let (tx, rx) = mpsc::sync_channel(PEER_QUEUE);
        let stop = Arc::clone(&self.stop);
        let refused = Arc::new(AtomicBool::new(false));
        self.refusals.insert(peer, Arc::clone(&refused));
        std::thread::Builder::new()
            .name(format!("quorum-send-{}-{peer}", self.me))
            .spawn({
                let tls = self.tls.clone();
                move || peer_writer(peer, addr, (rx, tls), stop, refused)
            })
            .map_err(os_error("spawn", "a quorum peer link"))?;
        self.peers.insert(peer, tx);
        Ok(())
    }

    /// A link to the voter at `addr` (`target`: its id, when known).
    fn dial(&mut self, target: Option<u64>, addr: SocketAddr) -> Result<(), QuorumError> {
        let (tx, rx) = mpsc::sync_channel(PEER_QUEUE);
        let refused = Arc::new(AtomicBool::new(false));
        if let Some(peer) = target {
            self.refusals.insert(peer, Arc::clone(&refused));
            self.peers.insert(peer, tx.clone());
        }
        let link = Link {
            me: self.me,
            target,
            addr,
            tx,
            events: self.events.clone(),
            stop: Arc::clone(&self.stop),
            refused,
            tls: self.tls.clone(),
        };
        std::thread::Builder::new()
            .name(format!("quorum-link-{}", self.me))
            .spawn(move || learner_link(link, rx))
            .map_err(os_error("spawn", "a quorum peer link"))?;
        Ok(())
    }
}

/// Listens on `at` for member `id` and reads every accepted connection on a thread of
/// its own; answers the address bound.
fn listen(
    id: u64,
    at: SocketAddr,
    (events, tls): (&Sender<Event>, Option<QuorumTls>),
    stop: &Arc<AtomicBool>,
) -> Result<SocketAddr, QuorumError> {
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
                let events = events.clone();
                let stop = Arc::clone(&stop);
                let tls = tls.clone();
                let _ = std::thread::Builder::new()
                    .name(format!("quorum-read-{id}"))
                    .spawn(move || peer_reader((id, conn), (stream, tls), events, stop));
            }
        })
        .map_err(os_error("spawn", "the quorum listener"))?;
    Ok(addr)
}

fn run(
    mut node: QuorumNode,
    events: Receiver<Event>,
    committed: Sender<Entry>,
    mut links: Links,
    timing: QuorumTiming,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let tick = Duration::from_millis(timing.tick_ms.max(1));
    let mut next_tick = Instant::now() + tick;
    // Proposals waiting for their entry to commit: index -> (term proposed in, answer).
    let mut waiting: BTreeMap<u64, (u64, Sender<Result<u64, ProposeError>>)> = BTreeMap::new();
    // When each peer's last message arrived.
    let mut heard: BTreeMap<u64, Option<Instant>> =
        links.peers.keys().map(|id| (*id, None)).collect();
    // Membership changes asked for: (add or remove, Raft id, until when, answer).
    let mut changes: Vec<VoterChange> = Vec::new();
    // The learners that dialled in: raft id -> (connection, queue to its writer).
    let mut learners: HashMap<u64, (u64, SyncSender<Message>)> = HashMap::new();
    // Learners whose connection closed and did not come back.
    let mut left = std::collections::BTreeSet::new();
    if node.conf_state().voters == [node.id()] {
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
            Ok(Event::Joined { id, conn, stream }) => {
                // A route back to whoever dialled in (a learner's only one; a voter's
                // when this member has no link of its own to it).
                let (tx, rx) = mpsc::sync_channel(PEER_QUEUE);
                let stop = Arc::clone(&stop);
                let _ = std::thread::Builder::new()
                    .name(format!("quorum-send-{}-{id}", node.id()))
                    .spawn(move || learner_writer(stream, rx, stop));
                learners.insert(id, (conn, tx));
                heard.insert(id, Some(Instant::now()));
                left.remove(&id);
                tracing::debug!(member = id, "a quorum member dialled in");
            }
            Ok(Event::Linked { id, tx }) => {
                if let std::collections::hash_map::Entry::Vacant(e) = links.peers.entry(id) {
                    e.insert(tx);
                    heard.entry(id).or_insert(None);
                    tracing::info!(voter = id, "linked to a bootstrap controller");
                }
            }
            Ok(Event::Dial(id, addr)) => {
                if id != node.id() && !links.peers.contains_key(&id) {
                    if let Err(e) = links.dial(Some(id), addr) {
                        tracing::warn!(voter = id, error = %e, "cannot dial a controller");
                    }
                    heard.entry(id).or_insert(None);
                }
            }
            Ok(Event::ChangeVoters(change, answer)) => {
                let proposed = match change {
                    Change::Add(id) => node.add_voter(id),
                    Change::Remove(id) => node.remove_voter(id),
                };
                match proposed {
                    Ok(()) => changes.push((change, Instant::now() + CHANGE_TIMEOUT, answer)),
                    Err(e) => {
                        let _ = answer.send(Err(e.to_string()));
                    }
                }
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
                    refused: links
                        .refusals
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
            let route = links
                .peers
                .get(&to)
                .or_else(|| learners.get(&to).map(|(_, q)| q));
            if let Some(q) = route {
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
        if !changes.is_empty() {
            let conf = node.conf_state();
            changes.retain(|(change, until, answer)| {
                let done = match change {
                    Change::Add(id) => conf.voters.contains(id),
                    Change::Remove(id) => !conf.voters.contains(id),
                };
                if done {
                    let _ = answer.send(Ok(()));
                } else if Instant::now() >= *until {
                    let _ = answer.send(Err(
                        "the membership change did not commit in time (is the quorum's leader up?)"
                            .into(),
                    ));
                }
                !done && Instant::now() < *until
            });
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
