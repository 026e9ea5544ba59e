//! `GET /metrics`: the Prometheus endpoint (`metrics.listen`).
//!
//! A small blocking HTTP server (tiny_http) on its own thread, not a shard: a scrape
//! encodes [`dataplane::metrics`] (atomics, plus the shards' sampled snapshots behind a
//! lock that no shard ever waits on), so nothing here can stall the data plane, and a
//! slow or stuck scraper only ties up this thread.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use dataplane::shard::ShardRouter;

/// Why the endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsHttpError {
    #[error("cannot listen on {addr}: {message}")]
    Bind { addr: SocketAddr, message: String },
    #[error("cannot start the metrics thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// The running endpoint. Dropping it stops the thread.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Binds `addr` and serves `/metrics` from a new thread; `router` gives the shards'
/// queue depths at scrape time.
pub fn start(addr: SocketAddr, router: ShardRouter) -> Result<MetricsServer, MetricsHttpError> {
    dataplane::metrics::watch_router(router);
    let server = tiny_http::Server::http(addr).map_err(|e| MetricsHttpError::Bind {
        addr,
        message: e.to_string(),
    })?;
    let local = server.server_addr().to_ip().unwrap_or(addr);
    let server = Arc::new(server);
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let server = Arc::clone(&server);
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("metrics-http".to_string())
            .spawn(move || serve(&server, &stop))?
    };
    tracing::info!(addr = %local, "metrics endpoint listening (GET /metrics)");
    Ok(MetricsServer {
        server,
        stop,
        thread: Some(thread),
        addr: local,
    })
}

impl MetricsServer {
    /// The bound address (the configured one, with the port filled in when it was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(server: &tiny_http::Server, stop: &AtomicBool) {
    loop {
        let request = match server.recv() {
            Ok(r) => r,
            Err(_) if stop.load(Ordering::SeqCst) => break,
            Err(e) => {
                // An accept error (e.g. out of file descriptors): keep serving.
                tracing::warn!(error = %e, "metrics endpoint: accept failed");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let (status, content_type, body) = respond(request.method(), request.url());
        let mut response = tiny_http::Response::from_string(body).with_status_code(status);
        if let Ok(h) = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
        {
            response = response.with_header(h);
        }
        if let Err(e) = request.respond(response) {
            tracing::debug!(error = %e, "metrics endpoint: response not delivered");
        }
    }
    tracing::debug!("metrics endpoint stopped");
}

/// Status, content type and body for a request (HEAD is answered like GET; tiny_http
/// leaves the body out).
fn respond(method: &tiny_http::Method, url: &str) -> (u16, &'static str, String) {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let readable = matches!(method, tiny_http::Method::Get | tiny_http::Method::Head);
    match path {
        "/metrics" if readable => (
            200,
            dataplane::metrics::CONTENT_TYPE,
            dataplane::metrics::encode_text(),
        ),
        "/metrics" => (405, "text/plain", "only GET /metrics\n".to_string()),
        "/" if readable => (200, "text/plain", "Twinlog: GET /metrics\n".to_string()),
        _ => (
            404,
            "text/plain",
            "not found; try GET /metrics\n".to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(request.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn serves_metrics_and_refuses_the_rest() {
        let (router, _receivers) = ShardRouter::new(2, 8);
        let server = start("127.0.0.1:0".parse().expect("addr"), router).expect("starts");
        let addr = server.local_addr();
        let ok = get(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(
            ok.starts_with("HTTP/1.0 200") || ok.starts_with("HTTP/1.1 200"),
            "{ok}"
        );
        assert!(ok.contains("text/plain; version=0.0.4"), "{ok}");
        assert!(
            ok.contains("twinlog_shard_queue_depth{shard=\"1\"} 0"),
            "{ok}"
        );
        assert!(
            ok.contains("twinlog_shard_queue_capacity{shard=\"0\"} 8"),
            "{ok}"
        );
        let missing = get(addr, "GET /nope HTTP/1.0\r\n\r\n");
        assert!(missing.contains(" 404 "), "{missing}");
        let post = get(addr, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
        assert!(post.contains(" 405 "), "{post}");
        // Dropping the server stops its thread (the test would hang otherwise).
        drop(server);
    }
}
