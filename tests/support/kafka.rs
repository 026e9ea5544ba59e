//! Apache Kafka as a test peer (`scripts/kafka.sh`): the Java test clients of
//! `tests/java`, Kafka's CLI tools, and one Kafka broker shared by every test of a test
//! binary (or of the whole suite: `TWINLOG_TEST_KAFKA=HOST:PORT` names a running one, as
//! scripts/test.sh does). Everything listens on 127.0.0.1.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::{repo_root, run_command, CmdOutput};

pub fn kafka_sh() -> PathBuf {
    repo_root().join("scripts").join("kafka.sh")
}

/// `Some(reason)` when the Kafka jars or the compiled Java test clients are missing.
/// On CI (`CI` set) that is a failure, not a skip: scripts/test.sh installs them.
pub fn missing_kafka() -> Option<String> {
    let root = repo_root().join("compat").join("kafka");
    let reason = if !root.join("lib").is_dir() {
        Some("compat/kafka/lib is missing (scripts/kafka.sh install)".to_string())
    } else if !root.join("classes").join(".built").is_file() {
        Some("tests/java is not compiled (scripts/kafka.sh install)".to_string())
    } else {
        None
    };
    if let (Some(r), Some(_)) = (&reason, std::env::var_os("CI")) {
        panic!("{r}: on CI the Kafka peer is required");
    }
    reason
}

/// Runs a class of the Java test clients (or any class on Kafka's classpath).
pub fn run_java(class: &str, args: &[&str], timeout: Duration) -> CmdOutput {
    let mut cmd = Command::new("bash");
    cmd.arg(kafka_sh()).arg("java").arg(class).args(args);
    run_command(&mut cmd, None, timeout)
}

/// Runs one of Kafka's CLI tools by its `bin/` name (`kafka-topics`, ...).
pub fn run_tool(tool: &str, args: &[&str], stdin: Option<&[u8]>, timeout: Duration) -> CmdOutput {
    run_tool_with_jvm(tool, args, "", stdin, timeout)
}

/// [`run_tool`] with extra JVM options (`-Dkey=value ...`, as `KAFKA_JAVA_OPTS`).
pub fn run_tool_with_jvm(
    tool: &str,
    args: &[&str],
    jvm_options: &str,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> CmdOutput {
    let mut cmd = Command::new("bash");
    cmd.arg(kafka_sh()).arg("tool").arg(tool).args(args);
    if !jvm_options.is_empty() {
        cmd.env("KAFKA_JAVA_OPTS", jvm_options);
    }
    run_command(&mut cmd, stdin, timeout)
}

/// The Kafka broker this test binary shares.
#[derive(Debug)]
pub struct KafkaPeer {
    pub bootstrap: String,
    pub dir: PathBuf,
    /// `kafka.sh attach` of a broker this process started: it stops the broker when this
    /// process exits and the pipe closes.
    _attached: Option<Mutex<(Child, ChildStdin)>>,
}

/// The shared Kafka broker: `TWINLOG_TEST_KAFKA`, or one started on first use.
pub fn shared_kafka() -> &'static KafkaPeer {
    static PEER: OnceLock<KafkaPeer> = OnceLock::new();
    PEER.get_or_init(|| {
        if let Ok(b) = std::env::var("TWINLOG_TEST_KAFKA") {
            let dir = std::env::var("TWINLOG_TEST_KAFKA_DIR").unwrap_or_default();
            eprintln!("[harness] using the Kafka broker at {b}");
            return KafkaPeer {
                bootstrap: b,
                dir: PathBuf::from(dir),
                _attached: None,
            };
        }
        start_attached()
    })
}

/// Starts a Kafka broker of its own (for a test that restarts or inspects it).
pub fn start_attached() -> KafkaPeer {
    let dir = tempfile::Builder::new()
        .prefix("twinlog-kafka-peer-")
        .tempdir()
        .expect("tempdir")
        .keep();
    let mut child = Command::new("bash")
        .arg(kafka_sh())
        .arg("attach")
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kafka.sh attach");
    let stdin = child.stdin.take().expect("stdin piped");
    let stdout = child.stdout.take().expect("stdout piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the bootstrap");
    let bootstrap = line.trim().to_string();
    assert!(
        bootstrap.starts_with("127.0.0.1:"),
        "kafka.sh attach printed no bootstrap (log: {}/server.log)",
        dir.display()
    );
    eprintln!(
        "[harness] Kafka broker serving on {bootstrap} (dir {})",
        dir.display()
    );
    KafkaPeer {
        bootstrap,
        dir,
        _attached: Some(Mutex::new((child, stdin))),
    }
}

/// Panics with the command's output unless it exited 0; returns its JSON summary line.
#[track_caller]
pub fn expect_ok(out: &CmdOutput, context: &str) -> String {
    if !out.success() {
        panic!("{context}\n{}", out.describe());
    }
    eprintln!("[harness] ok in {:?}: {}", out.elapsed, out.summary());
    out.summary().to_string()
}

/// Problems Kafka's DumpLogSegments reports in its output. For a `compacted` log, offset
/// gaps ("Non-consecutive offsets") and empty segments ("has no entries") are what
/// compaction leaves, in Kafka's own logs too, and are not problems.
pub fn kafka_dump_problems(stdout: &str, compacted: bool) -> Vec<String> {
    let markers = [
        "isvalid: false",
        "mismatch",
        "Mismatch",
        "Non-consecutive",
        "out of order",
        "failed sanity",
        "Exception",
        "Corrupt",
        "corrupt",
        "has no entries",
    ];
    let allowed: &[&str] = if compacted {
        &["Non-consecutive", "has no entries"]
    } else {
        &[]
    };
    stdout
        .lines()
        .filter(|l| markers.iter().any(|m| l.contains(m)))
        .filter(|l| !allowed.iter().any(|a| l.contains(a)))
        .map(str::to_string)
        .collect()
}
