//! TLS for the quorum's links (a `CONTROLLER:SSL` listener): rustls over the blocking
//! sockets of [`super::service`], both ways authenticated by certificate.
//!
//! A link's reader and writer are separate threads on clones of one connection. For
//! TLS the clones share the rustls state behind a mutex that is never held across a
//! socket read or write: the reader reads the socket unlocked and feeds what came to
//! rustls; a writer encrypts under the lock into a buffer and writes that to the socket
//! unlocked, under a second lock that keeps the records of two writers in order. So a
//! reader never waits on a writer stuck on a full socket (both ends of a link may be
//! writing a snapshot at once), and nothing deadlocks. The handshake runs once, before
//! the connection is shared, within [`HANDSHAKE_TIMEOUT`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The keys of a TLS quorum: this member's server side (its controller listener, which
/// must ask for client certificates) and its client side (the same key pair and
/// truststore, dialling the others).
#[derive(Debug, Clone)]
pub struct QuorumTls {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}

/// How long a TLS handshake on a quorum link may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Plaintext handed to rustls at a time (its default send buffer limit is 64 KiB).
const WRITE_CHUNK: usize = 16 << 10;

/// One end of a quorum link: plain TCP, or TLS over it. Clones (for a reader and a
/// writer thread) share the connection.
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Tls(TlsConn),
}

#[derive(Debug)]
pub struct TlsConn {
    socket: TcpStream,
    shared: Arc<Shared>,
    /// TLS bytes read from the socket that rustls has not taken yet (this clone's).
    pending: Vec<u8>,
}

#[derive(Debug)]
struct Shared {
    tls: Mutex<rustls::Connection>,
    /// Held while a clone writes TLS records to the socket: records go out in order.
    writing: Mutex<()>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Conn {
    /// Dials `addr` within `timeout`, and makes the TLS handshake when `tls` says so.
    pub fn connect(
        addr: SocketAddr,
        timeout: Duration,
        tls: Option<&QuorumTls>,
    ) -> io::Result<Conn> {
        let socket = TcpStream::connect_timeout(&addr, timeout)?;
        let _ = socket.set_nodelay(true);
        match tls {
            None => Ok(Conn::Plain(socket)),
            Some(t) => {
                // Members are named by address: the certificate must name the IP.
                let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
                let client = rustls::ClientConnection::new(Arc::clone(&t.client), name)
                    .map_err(io::Error::other)?;
                handshake(socket, client.into())
            }
        }
    }

    /// An accepted connection, after the TLS handshake when `tls` says so.
    pub fn accept(socket: TcpStream, tls: Option<&QuorumTls>) -> io::Result<Conn> {
        let _ = socket.set_nodelay(true);
        match tls {
            None => Ok(Conn::Plain(socket)),
            Some(t) => {
                let server = rustls::ServerConnection::new(Arc::clone(&t.server))
                    .map_err(io::Error::other)?;
                handshake(socket, server.into())
            }
        }
    }

    /// Another end of the same connection (for a second thread).
    pub fn try_clone(&self) -> io::Result<Conn> {
        Ok(match self {
            Conn::Plain(s) => Conn::Plain(s.try_clone()?),
            Conn::Tls(t) => Conn::Tls(TlsConn {
                socket: t.socket.try_clone()?,
                shared: Arc::clone(&t.shared),
                pending: Vec::new(),
            }),
        })
    }

    fn socket(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => &t.socket,
        }
    }

    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket().set_write_timeout(timeout)
    }

    /// Closes both directions (every clone sees the end).
    pub fn shutdown(&self) {
        let _ = self.socket().shutdown(Shutdown::Both);
    }
}

/// Runs the handshake on `socket` (blocking, within [`HANDSHAKE_TIMEOUT`]).
fn handshake(mut socket: TcpStream, mut tls: rustls::Connection) -> io::Result<Conn> {
    socket.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    socket.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    while tls.is_handshaking() {
        tls.complete_io(&mut socket)?;
    }
    // Anything the handshake left to send (TLS 1.3 tickets, a last flight).
    while tls.wants_write() {
        tls.write_tls(&mut socket)?;
    }
    socket.set_read_timeout(None)?;
    socket.set_write_timeout(None)?;
    Ok(Conn::Tls(TlsConn {
        socket,
        shared: Arc::new(Shared {
            tls: Mutex::new(tls),
            writing: Mutex::new(()),
        }),
        pending: Vec::new(),
    }))
}

impl TlsConn {
    /// Sends the TLS records rustls has queued, outside the state's lock.
    fn flush_records(&self) -> io::Result<()> {
        let _order = locked(&self.shared.writing);
        loop {
            let mut records = Vec::new();
            {
                let mut tls = locked(&self.shared.tls);
                while tls.wants_write() {
                    tls.write_tls(&mut records)?;
                }
            }
            if records.is_empty() {
                return Ok(());
            }
            (&self.socket).write_all(&records)?;
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = match self {
            Conn::Plain(s) => return s.read(buf),
            Conn::Tls(t) => t,
        };
        loop {
            {
                let mut tls = locked(&t.shared.tls);
                match tls.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if !t.pending.is_empty() {
                    let mut from = &t.pending[..];
                    let taken = tls.read_tls(&mut from)?;
                    t.pending.drain(..taken);
                    tls.process_new_packets().map_err(io::Error::other)?;
                    continue;
                }
            }
            let mut raw = vec![0u8; 32 << 10];
            let n = (&t.socket).read(&mut raw)?;
            if n == 0 {
                return Ok(0);
            }
            raw.truncate(n);
            t.pending = raw;
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let t = match self {
            Conn::Plain(s) => return s.write(buf),
            Conn::Tls(t) => t,
        };
        let chunk = &buf[..buf.len().min(WRITE_CHUNK)];
        let n = locked(&t.shared.tls).writer().write(chunk)?;
        t.flush_records()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(t) => t.flush_records(),
        }
    }
}
