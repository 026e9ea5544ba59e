//! `twinlog-perf idle-floor`: the least CPU any server can spend answering idle long
//! polls on this machine. One thread, one epoll: it reads each request frame, holds it
//! for `--wait-ms` and answers with one frame the size of Twinlog's empty Fetch v4
//! answer (`--response-bytes` after the correlation id). It decodes nothing, keeps no
//! log and allocates nothing per request, so what it spends is the kernel's part of a
//! long poll: the receive, the send over loopback TCP and the wake-ups. A broker cannot
//! go below it on the same machine; `perf/scripts/idle_consumers.sh` measures it in the
//! same run as the brokers. The answers are not Fetch responses (the load generator
//! only counts frames): this is a floor, not a broker.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::event::epoll;

/// The epoll token of the listening socket (connections use their index + 1).
const LISTENER: u64 = 0;

#[derive(Debug, clap::Args)]
pub struct IdleFloorArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// How long each request is held before its answer (a long poll's max_wait_ms).
    #[arg(long, default_value_t = 500)]
    wait_ms: u64,
    /// Bytes of each answer after its correlation id (48: Twinlog's empty Fetch v4
    /// answer for one partition of a topic named "idle").
    #[arg(long, default_value_t = 48)]
    response_bytes: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum IdleFloorError {
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> IdleFloorError {
    move |source| IdleFloorError::Io { what, source }
}

struct Conn {
    stream: TcpStream,
    /// Bytes read and not yet a whole frame.
    buf: Vec<u8>,
}

/// Serves until killed. Prints `listening on ADDR` once it accepts connections.
pub fn run(args: &IdleFloorArgs) -> Result<(), IdleFloorError> {
    let listener = TcpListener::bind(&args.listen).map_err(io("bind"))?;
    listener.set_nonblocking(true).map_err(io("listener"))?;
    let poll = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| io("epoll")(e.into()))?;
    epoll::add(
        &poll,
        listener.as_fd(),
        epoll::EventData::new_u64(LISTENER),
        epoll::EventFlags::IN,
    )
    .map_err(|e| io("epoll add")(e.into()))?;
    println!(
        "listening on {}",
        listener.local_addr().map_err(io("local address"))?
    );
    let wait = Duration::from_millis(args.wait_ms);
    let mut answer = vec![0u8; 8 + args.response_bytes];
    let size = i32::try_from(4 + args.response_bytes).unwrap_or(i32::MAX);
    answer[..4].copy_from_slice(&size.to_be_bytes());
    let mut conns: Vec<Option<Conn>> = Vec::new();
    // (due, connection, correlation id): one wait for all, so due times only grow.
    let mut held: VecDeque<(Instant, usize, [u8; 4])> = VecDeque::new();
    let mut events = Vec::with_capacity(256);
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        let timeout = held.front().map(|(due, _, _)| {
            let left = due.saturating_duration_since(Instant::now());
            rustix::time::Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: i64::from(left.subsec_nanos()),
            }
        });
        events.clear();
        match epoll::wait(
            &poll,
            rustix::buffer::spare_capacity(&mut events),
            timeout.as_ref(),
        ) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(io("epoll wait")(e.into())),
        }
        for event in &events {
            let token = event.data.u64();
            if token == LISTENER {
                accept_all(&listener, &poll, &mut conns)?;
                continue;
            }
            let index = (token - 1) as usize;
            let Some(conn) = conns.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            if !read_frames(conn, &mut chunk, |correlation| {
                held.push_back((Instant::now() + wait, index, correlation));
            }) {
                conns[index] = None;
            }
        }
        let now = Instant::now();
        while held.front().is_some_and(|(due, _, _)| *due <= now) {
            let Some((_, index, correlation)) = held.pop_front() else {
                break;
            };
            let Some(conn) = conns.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            answer[4..8].copy_from_slice(&correlation);
            if conn.stream.write_all(&answer).is_err() {
                conns[index] = None;
            }
        }
    }
}

fn accept_all(
    listener: &TcpListener,
    poll: &impl AsFd,
    conns: &mut Vec<Option<Conn>>,
) -> Result<(), IdleFloorError> {
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(io("accept")(e)),
        };
        stream.set_nonblocking(true).map_err(io("connection"))?;
        stream.set_nodelay(true).map_err(io("connection"))?;
        let index = conns.len();
        epoll::add(
            poll,
            stream.as_fd(),
            epoll::EventData::new_u64(index as u64 + 1),
            epoll::EventFlags::IN,
        )
        .map_err(|e| io("epoll add")(e.into()))?;
        conns.push(Some(Conn {
            stream,
            buf: Vec::new(),
        }));
    }
}

/// Reads what the socket holds and hands each whole frame's correlation id to `held`.
/// False when the connection is over.
fn read_frames(conn: &mut Conn, chunk: &mut [u8], mut held: impl FnMut([u8; 4])) -> bool {
    // Epoll is level-triggered: a read that did not fill the chunk took all there was,
    // and anything left wakes the next wait.
    loop {
        match conn.stream.read(chunk) {
            Ok(0) => return false,
            Ok(n) => {
                conn.buf.extend_from_slice(&chunk[..n]);
                if n < chunk.len() {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    let mut at = 0;
    while let Some(prefix) = conn.buf.get(at..at + 4) {
        let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        let Ok(size) = usize::try_from(size) else {
            return false;
        };
        let Some(frame) = conn.buf.get(at + 4..at + 4 + size) else {
            break;
        };
        // Request header: api key (2), version (2), correlation id (4).
        let Some(correlation) = frame.get(4..8) else {
            return false;
        };
        held([
            correlation[0],
            correlation[1],
            correlation[2],
            correlation[3],
        ]);
        at += 4 + size;
    }
    conn.buf.drain(..at);
    true
}
