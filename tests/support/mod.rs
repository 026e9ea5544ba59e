//! Shared harness of the real-client integration tests: starts `twinlog serve` on a free
//! loopback port in a temporary directory, restarts it (SIGTERM or SIGKILL), runs client
//! programs with a time limit and speaks just enough of the Kafka protocol by hand to
//! check that the broker answers. Every wait is bounded; all traffic stays on 127.0.0.1.

#![allow(dead_code)]

pub mod cluster;
pub mod kafka;
pub mod netns;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the broker may take to serve after it is started.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a SIGTERM shutdown may take.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Root of the repository (the `twinlog` package).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The client scripts under `tests/clients`.
pub fn client_script(name: &str) -> PathBuf {
    repo_root().join("tests").join("clients").join(name)
}

/// The project's virtualenv interpreter (created by scripts/test.sh).
pub fn venv_python() -> PathBuf {
    repo_root().join(".venv").join("bin").join("python")
}

/// Debian's interpreter, which sees python3-confluent-kafka and python3-kafka.
pub fn debian_python() -> PathBuf {
    PathBuf::from("/usr/bin/python3")
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// `Some(reason)` when `python` cannot import every module in `modules`.
pub fn missing_python_modules(python: &Path, modules: &[&str]) -> Option<String> {
    if !python.exists() {
        return Some(format!("{} does not exist", python.display()));
    }
    let code = format!("import {}", modules.join(", "));
    let out = run_command(
        Command::new(python).arg("-c").arg(&code),
        None,
        Duration::from_secs(60),
    );
    if out.success() {
        None
    } else {
        Some(format!(
            "{} cannot `{code}`: {}",
            python.display(),
            out.stderr.trim()
        ))
    }
}

/// `Some(reason)` when `program` is not on PATH.
pub fn missing_program(program: &str) -> Option<String> {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        .unwrap_or(false);
    if found {
        None
    } else {
        Some(format!("`{program}` is not on PATH"))
    }
}

/// Prints why a test is skipped. Returns true when it is.
pub fn skip_if(reason: Option<String>, test: &str) -> bool {
    match reason {
        Some(r) => {
            eprintln!("SKIPPED {test}: {r} (scripts/test.sh installs the clients)");
            true
        }
        None => false,
    }
}

/// A running (or stopped) broker with its data directory.
#[derive(Debug)]
pub struct Broker {
    dir: tempfile::TempDir,
    pub port: u16,
    /// The address it listens on (127.0.0.1, or its network namespace's).
    host: std::net::IpAddr,
    /// The network namespace it runs in (`ip netns exec`), if any.
    netns: Option<String>,
    config: Option<PathBuf>,
    child: Option<Child>,
    /// Starts so far; names the log file of each incarnation.
    starts: u32,
    /// Extra environment of the next starts (fail points).
    env: Vec<(String, String)>,
    /// The PLAINTEXT listener the harness talks to when the `--listen` one (the
    /// inter-broker listener) is secured; `None`: `port` itself.
    client_port: Option<u16>,
}

impl Broker {
    /// Starts a broker with the given TOML config (may be empty) and waits until it
    /// serves.
    pub fn start(config_toml: &str) -> Broker {
        Broker::start_prepared(config_toml, |_| {})
    }

    /// [`Broker::start`] on `host:port`, inside network namespace `netns` when given
    /// (cluster tests: a node that can be cut off, not only killed).
    pub fn start_at(
        config_toml: &str,
        host: std::net::IpAddr,
        port: u16,
        netns: Option<String>,
    ) -> Broker {
        Broker::start_with(config_toml, |_| {}, host, Some(port), netns, None)
    }

    /// [`Broker::start_at`] after `prepare` ran on the (empty) data directory, with the
    /// path of the config file (written beside it).
    pub fn start_at_prepared(
        config_toml: &str,
        (host, port, netns): (std::net::IpAddr, u16, Option<String>),
        prepare: impl FnOnce(&Path, &Path),
    ) -> Broker {
        let with_config = |data: &Path| {
            let config = data.parent().expect("a parent").join("twinlog.toml");
            prepare(data, &config);
        };
        Broker::start_with(config_toml, with_config, host, Some(port), netns, None)
    }

    /// [`Broker::start_at_prepared`] for a node whose inter-broker listener (at `port`)
    /// is secured: the harness's own requests go to its PLAINTEXT listener at
    /// `client_port` (which `config_toml` must name).
    pub fn start_at_with_client_port(
        config_toml: &str,
        (host, port, netns): (std::net::IpAddr, u16, Option<String>),
        client_port: u16,
        prepare: impl FnOnce(&Path, &Path),
    ) -> Broker {
        let with_config = |data: &Path| {
            let config = data.parent().expect("a parent").join("twinlog.toml");
            prepare(data, &config);
        };
        Broker::start_with(
            config_toml,
            with_config,
            host,
            Some(port),
            netns,
            Some(client_port),
        )
    }

    /// The cluster id every node of a test quorum is formatted with.
    pub const TEST_CLUSTER_ID: &'static str = "MkU3OEVBNTcwNTJENDM2Qg";

    /// [`Broker::start`] after `prepare` ran on the (empty) data directory.
    pub fn start_prepared(config_toml: &str, prepare: impl FnOnce(&Path)) -> Broker {
        Broker::start_with(
            config_toml,
            prepare,
            std::net::IpAddr::from([127, 0, 0, 1]),
            None,
            None,
            None,
        )
    }

    fn start_with(
        config_toml: &str,
        prepare: impl FnOnce(&Path),
        host: std::net::IpAddr,
        port: Option<u16>,
        netns: Option<String>,
        client_port: Option<u16>,
    ) -> Broker {
        let dir = tempfile::Builder::new()
            .prefix("twinlog-clients-")
            .tempdir()
            .expect("tempdir");
        let config = if config_toml.trim().is_empty() {
            None
        } else {
            let path = dir.path().join("twinlog.toml");
            fs::write(&path, config_toml).expect("write config");
            Some(path)
        };
        fs::create_dir_all(dir.path().join("data")).expect("data dir");
        prepare(&dir.path().join("data"));
        let in_quorum = config_toml.contains("controller.quorum.voters")
            || config_toml.contains("controller.quorum.bootstrap.servers");
        if in_quorum && !dir.path().join("data/meta.properties").exists() {
            format_node(&dir.path().join("data"), config_toml);
        }
        let mut broker = Broker {
            dir,
            port: port.unwrap_or_else(free_port),
            host,
            netns,
            config,
            child: None,
            starts: 0,
            env: Vec::new(),
            client_port,
        };
        broker.spawn_and_wait();
        broker
    }

    pub fn bootstrap(&self) -> String {
        self.addr().to_string()
    }

    /// Where the harness and the tests' clients reach it.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.host, self.client_port.unwrap_or(self.port))
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self, n: u32) -> PathBuf {
        self.dir.path().join(format!("broker-{n}.log"))
    }

    /// stderr of the current (last) incarnation.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path(self.starts)).unwrap_or_default()
    }

    /// The last `lines` lines of every incarnation's stderr.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut s = String::new();
        for n in 1..=self.starts {
            let text = fs::read_to_string(self.log_path(n)).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            s.push_str(&format!(
                "----- broker start #{n} stderr (last {} of {} lines) -----\n",
                all.len() - from,
                all.len()
            ));
            // A crash report may sit above the tail: show it first.
            if let Some(at) = all[..from].iter().position(|l| is_crash_line(l)) {
                s.push_str("(crash report above the tail:)\n");
                for l in all[at..].iter().take(6) {
                    s.push_str(l);
                    s.push('\n');
                }
                s.push_str("(...)\n");
            }
            for l in &all[from..] {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }

    fn spawn_and_wait(&mut self) {
        assert!(self.child.is_none(), "broker already running");
        self.starts += 1;
        let log_path = self.log_path(self.starts);
        let log = fs::File::create(&log_path).expect("create broker log");
        let mut cmd = match &self.netns {
            // `ip netns exec` execs the broker itself: the child is the broker.
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns])
                    .arg(env!("CARGO_BIN_EXE_twinlog"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_twinlog")),
        };
        cmd.arg("serve");
        if let Some(c) = &self.config {
            cmd.arg("--config").arg(c);
        }
        cmd.arg("--data-dir")
            .arg(self.data_dir())
            .arg("--listen")
            .arg(SocketAddr::new(self.host, self.port).to_string())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log fd"))
            .stderr(log);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        // Plain log lines (no ANSI colours), so that they can be searched.
        cmd.env("NO_COLOR", "1");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn twinlog serve");
        self.child = Some(child);
        let started = Instant::now();
        let mut last_err: String;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                // Another process took the free port between the probe and the bind:
                // try a new one (only possible before the first successful start).
                if self.starts == 1
                    && self.netns.is_none()
                    && self.log().contains("cannot listen on")
                {
                    eprintln!("[harness] port {} was taken; trying another", self.port);
                    self.port = free_port();
                    self.starts = 0;
                    return self.spawn_and_wait();
                }
                panic!(
                    "broker exited during start-up with {status}\n{}",
                    self.log_tail(60)
                );
            }
            if self.log().contains("twinlog ready") && !self.serves_clients() {
                break;
            }
            if self.log().contains("twinlog ready") {
                match metadata_roundtrip(self.addr(), Duration::from_secs(5)) {
                    Ok(_) => break,
                    Err(e) => last_err = e,
                }
            } else {
                last_err = "no \"twinlog ready\" in stderr yet".into();
            }
            if started.elapsed() > START_TIMEOUT {
                let tail = self.log_tail(60);
                self.kill9();
                panic!("broker did not serve within {START_TIMEOUT:?} ({last_err})\n{tail}");
            }
            thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "[harness] broker #{} serving on {} after {:?} (dir {})",
            self.starts,
            self.bootstrap(),
            started.elapsed(),
            self.dir.path().display()
        );
    }

    /// Whether this node answers a client without credentials (a controller-only node
    /// serves no client; a SASL listener only clients that authenticate).
    fn serves_clients(&self) -> bool {
        let config = self
            .config
            .as_ref()
            .and_then(|c| fs::read_to_string(c).ok())
            .unwrap_or_default();
        !config.contains("\"process.roles\" = \"controller\"")
            && !config.contains("SASL_PLAINTEXT://")
    }

    /// Replaces the TOML config for the next starts.
    pub fn set_config(&mut self, config_toml: &str) {
        let path = self.dir.path().join("twinlog.toml");
        fs::write(&path, config_toml).expect("write config");
        self.config = Some(path);
    }

    /// Arms these fail points (`dataplane::failpoint`) from the next start on; an empty
    /// list disarms them.
    pub fn set_fail_points(&mut self, points: &[&str]) {
        self.env.retain(|(k, _)| k != "TWINLOG_FAIL_POINTS");
        if !points.is_empty() {
            self.env
                .push(("TWINLOG_FAIL_POINTS".to_string(), points.join(",")));
        }
    }

    /// Waits until the process exits by itself (a fail point), then reaps it.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            let child = self.child.as_mut().expect("broker is running");
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status;
            }
            assert!(
                started.elapsed() < timeout,
                "broker did not exit within {timeout:?}\n{}",
                self.log_tail(40)
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the broker again on the same port and data directory.
    pub fn restart_after_stop(&mut self) {
        self.spawn_and_wait();
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the broker process runs.
    pub fn is_alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGTERM and wait for a clean exit (exit status 0), bounded by STOP_TIMEOUT.
    pub fn stop_term(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("broker is running");
        let pid = child.id().to_string();
        let ok = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill -TERM {pid} failed");
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                eprintln!(
                    "[harness] broker stopped by SIGTERM in {:?}: {status}",
                    started.elapsed()
                );
                return status;
            }
            if started.elapsed() > STOP_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "broker did not exit within {STOP_TIMEOUT:?} of SIGTERM\n{}",
                    self.log_tail(60)
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends a signal (`STOP`, `CONT`, ...) to the running broker.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().expect("broker is running").to_string();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill -{signal} {pid} failed");
    }

    /// SIGKILL (kill -9) and reap.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("[harness] broker killed with SIGKILL");
        }
    }

    /// Restart with SIGTERM; asserts the shutdown was clean.
    pub fn restart_term(&mut self) {
        let status = self.stop_term();
        assert!(
            status.success(),
            "broker exited with {status} after SIGTERM\n{}",
            self.log_tail(60)
        );
        self.spawn_and_wait();
    }

    /// Restart after SIGKILL.
    pub fn restart_kill9(&mut self) {
        self.kill9();
        self.spawn_and_wait();
    }

    /// Counts of the broker's WARN/ERROR lines and whether any line mentions a panic.
    pub fn log_problems(&self) -> (usize, usize, bool) {
        let mut warn = 0;
        let mut error = 0;
        let mut panicked = false;
        for n in 1..=self.starts {
            let text = fs::read_to_string(self.log_path(n)).unwrap_or_default();
            for l in text.lines() {
                if l.contains(" WARN ") {
                    warn += 1;
                }
                if l.contains(" ERROR ") {
                    error += 1;
                }
                if is_crash_line(l) {
                    panicked = true;
                }
            }
        }
        (warn, error, panicked)
    }
}

impl Broker {
    /// The ERROR lines of every incarnation's log that do not contain `expected`.
    pub fn unexpected_errors(&self, expected: &str) -> Vec<String> {
        (1..=self.starts)
            .flat_map(|n| {
                fs::read_to_string(self.log_path(n))
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains(" ERROR ") && !l.contains(expected))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Panics (with the log's tail) when the broker panicked or logged an ERROR line.
    #[track_caller]
    pub fn assert_healthy(&self) {
        let (_, errors, panicked) = self.log_problems();
        assert!(!panicked, "the broker panicked\n{}", self.log_tail(60));
        assert_eq!(errors, 0, "errors in the broker log\n{}", self.log_tail(60));
    }
}

/// `twinlog format` of a cluster node's data directory with [`Broker::TEST_CLUSTER_ID`]:
/// the nodes of one test cluster share it, as `kafka-storage format` gives every node
/// of a Kafka cluster the same id.
fn format_node(data: &Path, config_toml: &str) {
    let node_id = config_toml
        .lines()
        .find_map(|l| l.strip_prefix("\"node.id\" = "))
        .map_or_else(|| "0".to_string(), |v| v.trim().to_string());
    format_node_as(data, &node_id, Broker::TEST_CLUSTER_ID);
}

/// `twinlog format` of a data directory as node `node_id` of cluster `cluster_id`.
pub fn format_node_as(data: &Path, node_id: &str, cluster_id: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_twinlog"))
        .arg("format")
        .arg("--data-dir")
        .arg(data)
        .args(["--cluster-id", cluster_id, "--node-id", node_id])
        .output()
        .expect("run twinlog format");
    assert!(out.status.success(), "twinlog format: {out:?}");
}

/// The segment files (`.log`) of one partition directory, in offset order.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    out.sort();
    out
}

/// A line of a Rust panic or allocation-failure abort.
fn is_crash_line(l: &str) -> bool {
    l.contains("panicked at") || l.starts_with("memory allocation of")
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if thread::panicking() && std::env::var_os("TWINLOG_KEEP_TEST_DIRS").is_some() {
            eprintln!("[harness] keeping {}", self.dir.path().display());
            // Swap the TempDir out and keep it, so that it is not removed.
            if let Ok(empty) = tempfile::tempdir() {
                let _ = std::mem::replace(&mut self.dir, empty).keep();
            }
        }
    }
}

/// Output of a finished (or timed-out) command.
#[derive(Debug)]
pub struct CmdOutput {
    pub what: String,
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl CmdOutput {
    pub fn success(&self) -> bool {
        !self.timed_out && self.status.map(|s| s.success()).unwrap_or(false)
    }

    pub fn describe(&self) -> String {
        format!(
            "`{}` {} after {:?}\n----- stdout -----\n{}\n----- stderr -----\n{}",
            self.what,
            if self.timed_out {
                "TIMED OUT".to_string()
            } else {
                format!("exited with {:?}", self.status)
            },
            self.elapsed,
            tail_chars(&self.stdout, 8000),
            tail_chars(&self.stderr, 8000)
        )
    }

    /// The last line of stdout that parses as a JSON object (the scripts' summary).
    pub fn summary(&self) -> &str {
        self.stdout
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .unwrap_or("")
    }
}

fn tail_chars(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut from = s.len() - n;
    while !s.is_char_boundary(from) {
        from += 1;
    }
    &s[from..]
}

/// Runs `cmd` with an optional stdin, killing it after `timeout`.
pub fn run_command(cmd: &mut Command, stdin: Option<&[u8]>, timeout: Duration) -> CmdOutput {
    let what = format!("{cmd:?}");
    let started = Instant::now();
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return CmdOutput {
                what,
                status: None,
                timed_out: false,
                stdout: String::new(),
                stderr: format!("cannot spawn: {e}"),
                elapsed: started.elapsed(),
            }
        }
    };
    let writer = stdin.map(|data| {
        let mut pipe = child.stdin.take().expect("stdin piped");
        let data = data.to_vec();
        thread::spawn(move || {
            let _ = pipe.write_all(&data);
        })
    });
    let out_reader = reader_thread(child.stdout.take().expect("stdout piped"));
    let err_reader = reader_thread(child.stderr.take().expect("stderr piped"));
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        if started.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
            break child.wait().ok();
        }
        thread::sleep(Duration::from_millis(20));
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    CmdOutput {
        what,
        status,
        timed_out,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    }
}

fn reader_thread<R: Read + Send + 'static>(mut r: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// CreateTime of record 0 in the client scripts (`KT_BASE_TS`): ten minutes before
/// this test process started, the same for every script it runs.
pub fn base_timestamp_ms() -> i64 {
    static BASE: OnceLock<i64> = OnceLock::new();
    *BASE.get_or_init(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(1_700_000_000_000);
        (now - 600_000) / 1000 * 1000
    })
}

/// Runs a client script under `tests/clients` with `python`.
pub fn run_python(python: &Path, script: &str, args: &[&str], timeout: Duration) -> CmdOutput {
    let mut cmd = Command::new(python);
    cmd.arg("-u").arg(client_script(script)).args(args);
    cmd.env("PYTHONDONTWRITEBYTECODE", "1")
        .env("KT_BASE_TS", base_timestamp_ms().to_string());
    run_command(&mut cmd, None, timeout)
}

/// Panics with the command's full output unless it exited 0.
#[track_caller]
pub fn assert_success(out: &CmdOutput, broker: &Broker) {
    if !out.success() {
        panic!("{}\n{}", out.describe(), broker.log_tail(40));
    }
    eprintln!(
        "[harness] ok in {:?}: {}",
        out.elapsed,
        if out.summary().is_empty() {
            out.stdout.lines().last().unwrap_or("")
        } else {
            out.summary()
        }
    );
}

/// Starts a client script in the background (stdout/stderr to files in `dir`).
pub fn spawn_python(python: &Path, script: &str, args: &[&str], dir: &Path, name: &str) -> Child {
    let out = fs::File::create(dir.join(format!("{name}.stdout"))).expect("stdout file");
    let err = fs::File::create(dir.join(format!("{name}.stderr"))).expect("stderr file");
    Command::new(python)
        .arg("-u")
        .arg(client_script(script))
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("KT_BASE_TS", base_timestamp_ms().to_string())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn background client")
}

/// Waits for a background child, killing it after `timeout`. `None`: timed out.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------
// Just enough of the Kafka protocol to check the broker answers.

/// A request frame with a v1 request header (non-flexible APIs/versions).
pub fn request_frame_v1(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let client_id = b"twinlog-harness";
    let mut payload = Vec::new();
    payload.extend_from_slice(&api_key.to_be_bytes());
    payload.extend_from_slice(&version.to_be_bytes());
    payload.extend_from_slice(&correlation_id.to_be_bytes());
    payload.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    payload.extend_from_slice(client_id);
    payload.extend_from_slice(body);
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&payload);
    frame
}

fn read_response(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .map_err(|e| format!("read response length: {e}"))?;
    let len = i32::from_be_bytes(len);
    if !(4..=64 << 20).contains(&len) {
        return Err(format!("bad response length {len}"));
    }
    let mut buf = vec![0u8; len as usize];
    stream
        .read_exact(&mut buf)
        .map_err(|e| format!("read response body: {e}"))?;
    Ok(buf)
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.pos + n > self.buf.len() {
            return Err(format!(
                "response truncated at {} (+{n}) of {}",
                self.pos,
                self.buf.len()
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.i16()?;
        if n < 0 {
            return Ok(String::new());
        }
        Ok(String::from_utf8_lossy(self.take(n as usize)?).into_owned())
    }
}

/// Brokers (node id, host, port) from a Metadata v1 request for no topics.
pub fn metadata_roundtrip(
    addr: SocketAddr,
    timeout: Duration,
) -> Result<Vec<(i32, String, i32)>, String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    // Metadata v1 body: topics = [] (an empty, non-null array: no topics).
    let frame = request_frame_v1(3, 1, 4242, &0i32.to_be_bytes());
    s.write_all(&frame).map_err(|e| format!("write: {e}"))?;
    let resp = read_response(&mut s)?;
    let mut c = Cursor { buf: &resp, pos: 0 };
    let corr = c.i32()?;
    if corr != 4242 {
        return Err(format!("correlation id {corr}, expected 4242"));
    }
    let n = c.i32()?;
    if !(1..=16).contains(&n) {
        return Err(format!("{n} brokers in Metadata response"));
    }
    let mut brokers = Vec::new();
    for _ in 0..n {
        let id = c.i32()?;
        let host = c.string()?;
        let port = c.i32()?;
        let _rack = c.string()?;
        brokers.push((id, host, port));
    }
    Ok(brokers)
}

/// ApiVersions v0 round trip; returns the error code and the number of API keys.
pub fn api_versions_roundtrip(addr: SocketAddr, timeout: Duration) -> Result<(i16, i32), String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let frame = request_frame_v1(18, 0, 77, &[]);
    s.write_all(&frame).map_err(|e| format!("write: {e}"))?;
    let resp = read_response(&mut s)?;
    let mut c = Cursor { buf: &resp, pos: 0 };
    let corr = c.i32()?;
    if corr != 77 {
        return Err(format!("correlation id {corr}, expected 77"));
    }
    let err = c.i16()?;
    let n = c.i32()?;
    Ok((err, n))
}

/// Small deterministic PRNG (xorshift64*), so that no extra crate is needed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// What `twinlog dump-log` says about a partition's segments.
#[derive(Debug, Default)]
pub struct LogSummary {
    pub batches: usize,
    /// Batches per `compresscodec`.
    pub codecs: std::collections::BTreeMap<String, usize>,
    /// Batches with producerId -1 (not idempotent).
    pub without_producer_id: usize,
}

/// Runs `twinlog dump-log` over every segment of `<data>/<topic>-<partition>`.
pub fn dump_log_summary(data_dir: &Path, topic: &str, partition: i32) -> LogSummary {
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let mut logs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    assert!(!logs.is_empty(), "no segments in {}", dir.display());
    let out = run_command(
        Command::new(env!("CARGO_BIN_EXE_twinlog"))
            .arg("dump-log")
            .args(&logs),
        None,
        Duration::from_secs(120),
    );
    assert!(out.success(), "{}", out.describe());
    let mut s = LogSummary::default();
    for l in out.stdout.lines() {
        if !l.starts_with("baseOffset:") {
            continue;
        }
        s.batches += 1;
        let field = |name: &str| {
            l.split(&format!("{name}: "))
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or("?")
                .to_string()
        };
        *s.codecs.entry(field("compresscodec")).or_default() += 1;
        if field("producerId") == "-1" {
            s.without_producer_id += 1;
        }
    }
    s
}

/// An integer field of the one-line JSON summary a test client prints last (`"f": 1` as
/// Python writes it, `"f":1` as the Java clients do).
pub fn summary_field(out: &str, field: &str) -> i64 {
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or("");
    let key = format!("\"{field}\":");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {field} in {out:?}"));
    line[at + key.len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("{field} is not a number in {line}"))
}

/// The cluster id a broker's Metadata (v12) answers with.
pub fn metadata_cluster_id(bootstrap: &str) -> String {
    let mut conn = dataplane::client::BlockingConnection::connect(
        bootstrap,
        "twinlog-test",
        Duration::from_secs(10),
    )
    .expect("connect");
    let r = conn
        .send(
            &kafka_protocol::messages::MetadataRequest::default().with_topics(Some(Vec::new())),
            12,
        )
        .expect("metadata");
    r.cluster_id.map(|c| c.to_string()).unwrap_or_default()
}

/// One uncompressed batch of `count` records (keys `k<i>`, values `v<i>`).
pub fn record_batch(count: i64) -> bytes::Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i,
            key: Some(bytes::Bytes::from(format!("k{i}"))),
            value: Some(bytes::Bytes::from(format!("v{i}"))),
            headers: kafka_protocol::indexmap::IndexMap::new(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("batch encodes");
    buf.freeze()
}

/// Produces one batch of `count` records to `topic`-`partition` (acks=all), retrying
/// while a new topic is not ready.
pub fn produce_batch(bootstrap: &str, topic: &str, partition: i32, count: i64) {
    produce_raw(bootstrap, topic, partition, record_batch(count));
}

/// Produces `batch` to `topic`-`partition` (acks=all), retrying while a new topic is not
/// ready.
pub fn produce_raw(bootstrap: &str, topic: &str, partition: i32, batch: bytes::Bytes) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut conn = dataplane::client::BlockingConnection::connect(
        bootstrap,
        "twinlog-test",
        Duration::from_secs(10),
    )
    .expect("connect to produce");
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    let started = Instant::now();
    loop {
        let resp = conn.send(&request, 9).expect("produce");
        let code = resp.responses[0].partition_responses[0].error_code;
        if code == 0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "produce to {topic}-{partition} keeps failing with {code}"
        );
        thread::sleep(Duration::from_millis(100));
    }
}
