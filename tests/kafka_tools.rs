//! Apache Kafka 4.1's own CLI tools against a real Twinlog broker: kafka-topics,
//! kafka-configs, kafka-console-producer/-consumer, kafka-consumer-groups,
//! kafka-get-offsets, kafka-delete-records, kafka-producer-perf-test,
//! kafka-consumer-perf-test and kafka-transactions. Each test checks that the tool's answer
//! has the shape Kafka's has (same header lines and columns) and the right numbers; the
//! output is compared exactly where it is deterministic.
//!
//! Every assertion holds against Kafka too: `TWINLOG_TOOLS_PEER=kafka` runs the same tests
//! against the shared Kafka broker of `support::kafka`.
//!
//! Run alone: `cargo test -p twinlog --test kafka_tools -- --nocapture`.

mod support;

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::kafka::{kafka_sh, missing_kafka, run_java, run_tool, shared_kafka};
use support::{metadata_roundtrip, skip_if, wait_child, Broker, CmdOutput};

/// Small internal topics keep start-up quick; groups rebalance without delay.
const CONFIG: &str = "\"num.partitions\" = 1\n\"offsets.topic.num.partitions\" = 4\n\"transaction.state.log.num.partitions\" = 4\n\"group.initial.rebalance.delay.ms\" = 0\n";

/// Every tool run is bounded by this.
const TIMEOUT: Duration = Duration::from_secs(60);

/// True when the tests run against the shared Kafka broker instead of Twinlog.
fn against_kafka() -> bool {
    std::env::var("TWINLOG_TOOLS_PEER").is_ok_and(|v| v == "kafka")
}

/// The broker under test: a fresh Twinlog, or the shared Kafka broker.
struct Peer {
    twinlog: Option<Broker>,
    bootstrap: String,
    node_id: i32,
    /// Appended to topic, group and transactional ids (unique names on a shared Kafka).
    suffix: String,
    /// Scratch files (JSON offset files, background tool output).
    scratch: tempfile::TempDir,
}

impl Peer {
    /// `None` when the Kafka tools are not installed (the test is skipped).
    fn start(test: &str) -> Option<Peer> {
        if skip_if(missing_kafka(), test) {
            return None;
        }
        let (twinlog, bootstrap, suffix) = if against_kafka() {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let suffix = format!("-{}-{}", std::process::id(), nanos % 100_000);
            (None, shared_kafka().bootstrap.clone(), suffix)
        } else {
            let b = Broker::start(CONFIG);
            let bootstrap = b.bootstrap();
            (Some(b), bootstrap, String::new())
        };
        let addr: SocketAddr = bootstrap.parse().expect("bootstrap is HOST:PORT");
        let brokers = metadata_roundtrip(addr, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("Metadata from {bootstrap}: {e}"));
        Some(Peer {
            twinlog,
            bootstrap,
            node_id: brokers[0].0,
            suffix,
            scratch: tempfile::Builder::new()
                .prefix("twinlog-kafka-tools-")
                .tempdir()
                .expect("tempdir"),
        })
    }

    /// `base` made unique on this broker.
    fn name(&self, base: &str) -> String {
        format!("{base}{}", self.suffix)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }

    /// The last lines of the Twinlog broker's log, for failure messages.
    fn log_tail(&self) -> String {
        self.twinlog
            .as_ref()
            .map(|b| b.log_tail(40))
            .unwrap_or_default()
    }

    /// Runs `tool --bootstrap-server B args...`.
    fn run(&self, tool: &str, args: &[&str]) -> CmdOutput {
        self.run_stdin(tool, args, None)
    }

    fn run_stdin(&self, tool: &str, args: &[&str], stdin: Option<&[u8]>) -> CmdOutput {
        let mut all = vec!["--bootstrap-server", self.bootstrap.as_str()];
        all.extend_from_slice(args);
        let out = run_tool(tool, &all, stdin, TIMEOUT);
        eprintln!(
            "[kafka-tools] {tool} {} ({:?}, {:?})",
            args.join(" "),
            out.status.and_then(|s| s.code()),
            out.elapsed
        );
        out
    }

    /// Runs the tool and panics unless it exited 0.
    #[track_caller]
    fn ok(&self, tool: &str, args: &[&str]) -> CmdOutput {
        let out = self.run(tool, args);
        self.expect_success(&out);
        out
    }

    #[track_caller]
    fn expect_success(&self, out: &CmdOutput) {
        if !out.success() {
            panic!("{}\n{}", out.describe(), self.log_tail());
        }
    }

    /// Runs the tool and panics unless it exited non-zero (in time).
    #[track_caller]
    fn fails(&self, tool: &str, args: &[&str]) -> CmdOutput {
        let out = self.run(tool, args);
        if out.success() || out.timed_out {
            panic!(
                "expected a failure exit\n{}\n{}",
                out.describe(),
                self.log_tail()
            );
        }
        out
    }

    /// Starts a tool in the background, its stdout and stderr in scratch files.
    fn spawn(&self, tool: &str, args: &[&str], name: &str) -> Background {
        let stdout = self.file(&format!("{name}.stdout"));
        let stderr = self.file(&format!("{name}.stderr"));
        let child = Command::new("bash")
            .arg(kafka_sh())
            .arg("tool")
            .arg(tool)
            .args(args)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&stdout).expect("stdout file"))
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn a background tool");
        Background {
            child,
            stdout,
            stderr,
        }
    }

    /// The Twinlog broker logged no errors and did not panic.
    fn finish(self) {
        if let Some(b) = &self.twinlog {
            let (_, errors, panicked) = b.log_problems();
            assert!(!panicked, "the broker panicked\n{}", b.log_tail(60));
            assert_eq!(errors, 0, "errors in the broker log\n{}", b.log_tail(60));
        }
    }

    /// The value a broker config has in the broker's config file, if it is set there.
    fn configured(&self, key: &str) -> Option<String> {
        let text = match &self.twinlog {
            Some(_) => CONFIG.to_string(),
            None => fs::read_to_string(shared_kafka().dir.join("server.properties")).ok()?,
        };
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim().trim_matches('"') == key).then(|| v.trim().trim_matches('"').to_string())
        })
    }
}

/// A tool running in the background.
struct Background {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Background {
    /// Waits for it to exit 0; returns its stdout.
    #[track_caller]
    fn wait_ok(mut self, peer: &Peer) -> String {
        let status = wait_child(&mut self.child, TIMEOUT);
        let stdout = fs::read_to_string(&self.stdout).unwrap_or_default();
        let stderr = fs::read_to_string(&self.stderr).unwrap_or_default();
        assert!(
            status.is_some_and(|s| s.success()),
            "background tool exited with {status:?}\n----- stdout -----\n{stdout}\n----- stderr -----\n{stderr}\n{}",
            peer.log_tail()
        );
        stdout
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Lines of `s` (no trailing empty line).
fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

/// The table under the first line whose first word is `first_column`: its header words
/// and the whitespace-split words of each following non-empty line.
#[track_caller]
fn table(text: &str, first_column: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let all = lines(text);
    let at = all
        .iter()
        .position(|l| l.split_whitespace().next() == Some(first_column))
        .unwrap_or_else(|| panic!("no table with a {first_column} column in\n{text}"));
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let rows = all[at + 1..]
        .iter()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| words(l))
        .collect();
    (words(all[at]), rows)
}

/// kafka-transactions prints tab-separated, space-padded tables whose cells may be empty.
#[track_caller]
fn tab_table(text: &str, first_column: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let all = lines(text);
    let at = all
        .iter()
        .position(|l| l.contains('\t') && l.split('\t').next().map(str::trim) == Some(first_column))
        .unwrap_or_else(|| panic!("no table with a {first_column} column in\n{text}"));
    let cells = |l: &str| {
        let mut c: Vec<String> = l.split('\t').map(|c| c.trim().to_string()).collect();
        // Every cell ends with a tab: drop the empty one after the last.
        if c.last().is_some_and(|c| c.is_empty()) {
            c.pop();
        }
        c
    };
    let rows = all[at + 1..]
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| cells(l))
        .collect();
    (cells(all[at]), rows)
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The config lines of a kafka-configs --describe answer, after checking its header line:
/// (`name=value sensitive=B`, the whole line).
#[track_caller]
fn config_lines(out: &CmdOutput, header: &str) -> Vec<(String, String)> {
    let all = lines(&out.stdout);
    assert_eq!(all.first().copied(), Some(header), "{}", out.stdout);
    all[1..]
        .iter()
        .map(|l| {
            let l = l
                .strip_prefix("  ")
                .unwrap_or_else(|| panic!("config line {l:?}"));
            let (head, synonyms) = l
                .split_once(" synonyms=")
                .unwrap_or_else(|| panic!("no synonyms in {l:?}"));
            assert!(
                synonyms.starts_with('{') && synonyms.ends_with('}'),
                "synonyms of {l:?}"
            );
            assert!(
                head.ends_with(" sensitive=false") || head.ends_with(" sensitive=true"),
                "config line {l:?}"
            );
            (head.to_string(), l.to_string())
        })
        .collect()
}

/// The value of `name` in a kafka-configs --describe answer.
fn config_value(entries: &[(String, String)], name: &str) -> Option<String> {
    entries.iter().find_map(|(head, _)| {
        let (n, rest) = head.split_once('=')?;
        let value = rest.rsplit_once(" sensitive=")?.0;
        (n == name).then(|| value.to_string())
    })
}

/// Polls `check` (which runs tools) until it returns `Some`, for at most `within`.
#[track_caller]
fn eventually<T>(within: Duration, what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let started = Instant::now();
    loop {
        match check() {
            Ok(v) => return v,
            Err(e) if started.elapsed() > within => panic!("{what} within {within:?}: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(300)),
        }
    }
}

fn write_file(path: &Path, text: &str) -> String {
    fs::write(path, text).expect("write scratch file");
    path.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------
// kafka-topics

/// `kafka-topics --describe --topic T`, after checking its topic line and the first
/// columns of each partition line: the topic id, the Configs column and the rest of each
/// partition line (the ELR columns).
#[track_caller]
fn describe_topic(peer: &Peer, topic: &str, partitions: usize) -> (String, String, Vec<String>) {
    let out = peer.ok("kafka-topics", &["--describe", "--topic", topic]);
    let all = lines(&out.stdout);
    assert_eq!(all.len(), 1 + partitions, "{}", out.stdout);
    let fields: Vec<&str> = all[0].split('\t').collect();
    assert_eq!(fields.len(), 5, "topic line {:?}", all[0]);
    assert_eq!(fields[0], format!("Topic: {topic}"));
    let topic_id = fields[1].strip_prefix("TopicId: ").expect("TopicId");
    assert_eq!(topic_id.len(), 22, "a base64 UUID: {topic_id:?}");
    assert_ne!(topic_id, "AAAAAAAAAAAAAAAAAAAAAA", "the zero UUID");
    assert_eq!(fields[2], format!("PartitionCount: {partitions}"));
    assert_eq!(fields[3], "ReplicationFactor: 1");
    let configs = fields[4].strip_prefix("Configs: ").expect("Configs");
    let n = peer.node_id;
    let mut rest = Vec::new();
    for (p, line) in all[1..].iter().enumerate() {
        let prefix =
            format!("\tTopic: {topic}\tPartition: {p}\tLeader: {n}\tReplicas: {n}\tIsr: {n}\t");
        let tail = line
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("partition line {line:?}, expected {prefix:?}..."));
        rest.push(tail.to_string());
    }
    (topic_id.to_string(), configs.to_string(), rest)
}

#[track_caller]
fn list_topics(peer: &Peer) -> Vec<String> {
    let out = peer.ok("kafka-topics", &["--list", "--exclude-internal"]);
    out.stdout.lines().map(str::to_string).collect()
}

#[test]
fn topics_create_describe_list_alter_delete() {
    let Some(peer) = Peer::start("kafka-topics") else {
        return;
    };
    let topic = peer.name("tools-topics");
    let out = peer.ok(
        "kafka-topics",
        &[
            "--create",
            "--topic",
            &topic,
            "--partitions",
            "3",
            "--config",
            "retention.ms=123456",
            "--config",
            "cleanup.policy=compact",
        ],
    );
    assert_eq!(out.stdout, format!("Created topic {topic}.\n"));

    let (topic_id, configs, _) = describe_topic(&peer, &topic, 3);
    let configs: Vec<&str> = configs.split(',').collect();
    assert!(configs.contains(&"cleanup.policy=compact"), "{configs:?}");
    assert!(configs.contains(&"retention.ms=123456"), "{configs:?}");
    assert!(list_topics(&peer).contains(&topic));

    let again = peer.fails(
        "kafka-topics",
        &["--create", "--topic", &topic, "--partitions", "1"],
    );
    assert!(
        again.stdout.contains(&format!(
            "Error while executing topic command : Topic '{topic}' already exists."
        )),
        "{}",
        again.describe()
    );

    let out = peer.ok(
        "kafka-topics",
        &["--alter", "--topic", &topic, "--partitions", "5"],
    );
    assert_eq!(out.stdout, "");
    let (id_after, _, _) = describe_topic(&peer, &topic, 5);
    assert_eq!(id_after, topic_id, "the topic id survives --alter");

    // Fewer partitions: refused (Kafka's and Twinlog's messages differ; the error class
    // is the same).
    let fewer = peer.fails(
        "kafka-topics",
        &["--alter", "--topic", &topic, "--partitions", "2"],
    );
    assert!(
        fewer
            .stdout
            .starts_with("Error while executing topic command : ")
            && fewer.stderr.contains("InvalidPartitionsException"),
        "{}",
        fewer.describe()
    );

    let out = peer.ok("kafka-topics", &["--delete", "--topic", &topic]);
    assert_eq!(out.stdout, "");
    eventually(Duration::from_secs(30), "the topic leaves --list", || {
        let topics = list_topics(&peer);
        if topics.contains(&topic) {
            Err(format!("{topics:?}"))
        } else {
            Ok(())
        }
    });
    let gone = peer.fails("kafka-topics", &["--describe", "--topic", &topic]);
    assert!(
        gone.stdout.contains(&format!(
            "Error while executing topic command : Topic '{topic}' does not exist as expected"
        )),
        "{}",
        gone.describe()
    );
    peer.finish();
}

/// Kafka describes partitions with DescribeTopicPartitions (API 75) and prints the
/// (empty) ELR lists; without it the tool falls back to Metadata and prints N/A.
#[test]
fn topics_describe_prints_empty_elr_lists() {
    let Some(peer) = Peer::start("kafka-topics elr") else {
        return;
    };
    let topic = peer.name("tools-elr");
    peer.ok(
        "kafka-topics",
        &["--create", "--topic", &topic, "--partitions", "2"],
    );
    let (_, _, rest) = describe_topic(&peer, &topic, 2);
    for r in rest {
        assert_eq!(r, "Elr: \tLastKnownElr: ");
    }
    peer.finish();
}

// ---------------------------------------------------------------------------------------
// kafka-configs

/// `kafka-configs --describe --all` of a topic with no configs of its own, as Kafka 4.1
/// prints it (but min.insync.replicas: Kafka 4.1 sets it as a dynamic cluster default
/// when it formats its storage, so its synonyms there start with
/// DYNAMIC_DEFAULT_BROKER_CONFIG).
const TOPIC_DEFAULT_CONFIGS: &[&str] = &[
    "cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}",
    "compression.gzip.level=-1 sensitive=false synonyms={DEFAULT_CONFIG:compression.gzip.level=-1}",
    "compression.lz4.level=9 sensitive=false synonyms={DEFAULT_CONFIG:compression.lz4.level=9}",
    "compression.type=producer sensitive=false synonyms={DEFAULT_CONFIG:compression.type=producer}",
    "compression.zstd.level=3 sensitive=false synonyms={DEFAULT_CONFIG:compression.zstd.level=3}",
    "delete.retention.ms=86400000 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}",
    "file.delete.delay.ms=60000 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}",
    "flush.messages=9223372036854775807 sensitive=false synonyms={DEFAULT_CONFIG:log.flush.interval.messages=9223372036854775807}",
    "flush.ms=9223372036854775807 sensitive=false synonyms={}",
    "follower.replication.throttled.replicas= sensitive=false synonyms={}",
    "index.interval.bytes=4096 sensitive=false synonyms={DEFAULT_CONFIG:log.index.interval.bytes=4096}",
    "leader.replication.throttled.replicas= sensitive=false synonyms={}",
    "local.retention.bytes=-2 sensitive=false synonyms={DEFAULT_CONFIG:log.local.retention.bytes=-2}",
    "local.retention.ms=-2 sensitive=false synonyms={DEFAULT_CONFIG:log.local.retention.ms=-2}",
    "max.compaction.lag.ms=9223372036854775807 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.max.compaction.lag.ms=9223372036854775807}",
    "max.message.bytes=1048588 sensitive=false synonyms={DEFAULT_CONFIG:message.max.bytes=1048588}",
    "message.timestamp.after.max.ms=3600000 sensitive=false synonyms={DEFAULT_CONFIG:log.message.timestamp.after.max.ms=3600000}",
    "message.timestamp.before.max.ms=9223372036854775807 sensitive=false synonyms={DEFAULT_CONFIG:log.message.timestamp.before.max.ms=9223372036854775807}",
    "message.timestamp.type=CreateTime sensitive=false synonyms={DEFAULT_CONFIG:log.message.timestamp.type=CreateTime}",
    "min.cleanable.dirty.ratio=0.5 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5}",
    "min.compaction.lag.ms=0 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.min.compaction.lag.ms=0}",
    "min.insync.replicas=1 sensitive=false synonyms={DEFAULT_CONFIG:min.insync.replicas=1}",
    "preallocate=false sensitive=false synonyms={DEFAULT_CONFIG:log.preallocate=false}",
    "remote.log.copy.disable=false sensitive=false synonyms={}",
    "remote.log.delete.on.disable=false sensitive=false synonyms={}",
    "remote.storage.enable=false sensitive=false synonyms={}",
    "retention.bytes=-1 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.bytes=-1}",
    "retention.ms=604800000 sensitive=false synonyms={}",
    "segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}",
    "segment.index.bytes=10485760 sensitive=false synonyms={DEFAULT_CONFIG:log.index.size.max.bytes=10485760}",
    "segment.jitter.ms=0 sensitive=false synonyms={}",
    "segment.ms=604800000 sensitive=false synonyms={}",
    "unclean.leader.election.enable=false sensitive=false synonyms={DEFAULT_CONFIG:unclean.leader.election.enable=false}",
];

/// Kafka's `--describe --all` lines of a topic with the `set` configs of its own
/// (name, value, the broker synonym's line part or "").
fn expected_topic_configs(set: &[(&str, &str)]) -> Vec<String> {
    TOPIC_DEFAULT_CONFIGS
        .iter()
        .map(|line| {
            let name = line.split('=').next().expect("name");
            match set.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => {
                    let old = line.split(" synonyms={").nth(1).expect("synonyms");
                    let old = old.trim_end_matches('}');
                    if old.is_empty() {
                        format!("{name}={v} sensitive=false synonyms={{DYNAMIC_TOPIC_CONFIG:{name}={v}}}")
                    } else {
                        format!("{name}={v} sensitive=false synonyms={{DYNAMIC_TOPIC_CONFIG:{name}={v}, {old}}}")
                    }
                }
                None => line.to_string(),
            }
        })
        .collect()
}

/// Only `name=value sensitive=B` of each line.
fn heads(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.split(" synonyms=").next().unwrap_or("").to_string())
        .collect()
}

#[track_caller]
fn describe_topic_configs(peer: &Peer, topic: &str, all: bool) -> Vec<(String, String)> {
    let mut args = vec![
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
    ];
    if all {
        args.push("--all");
    }
    let out = peer.ok("kafka-configs", &args);
    let header = if all {
        format!("All configs for topic {topic} are:")
    } else {
        format!("Dynamic configs for topic {topic} are:")
    };
    config_lines(&out, &header)
}

#[test]
fn configs_topic_describe_alter_delete_config() {
    let Some(peer) = Peer::start("kafka-configs topic") else {
        return;
    };
    let topic = peer.name("tools-configs");
    peer.ok(
        "kafka-topics",
        &[
            "--create",
            "--topic",
            &topic,
            "--config",
            "retention.ms=123456",
            "--config",
            "cleanup.policy=compact",
        ],
    );
    let dynamic = describe_topic_configs(&peer, &topic, false);
    let got: Vec<String> = dynamic.iter().map(|(h, _)| h.clone()).collect();
    assert_eq!(
        got,
        strs(&[
            "cleanup.policy=compact sensitive=false",
            "retention.ms=123456 sensitive=false"
        ])
    );
    for (head, line) in &dynamic {
        let setting = head.split(' ').next().expect("name=value");
        assert!(
            line.contains(&format!("synonyms={{DYNAMIC_TOPIC_CONFIG:{setting}")),
            "{line}"
        );
    }
    let all = describe_topic_configs(&peer, &topic, true);
    let got: Vec<String> = all.iter().map(|(h, _)| h.clone()).collect();
    let want = expected_topic_configs(&[("cleanup.policy", "compact"), ("retention.ms", "123456")]);
    assert_eq!(got, heads(&want));

    let out = peer.ok(
        "kafka-configs",
        &[
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &topic,
            "--add-config",
            "retention.ms=999,max.message.bytes=2000",
        ],
    );
    assert_eq!(
        out.stdout,
        format!("Completed updating config for topic {topic}.\n")
    );
    let out = peer.ok(
        "kafka-configs",
        &[
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &topic,
            "--delete-config",
            "cleanup.policy",
        ],
    );
    assert_eq!(
        out.stdout,
        format!("Completed updating config for topic {topic}.\n")
    );
    let dynamic = describe_topic_configs(&peer, &topic, false);
    let got: Vec<String> = dynamic.iter().map(|(h, _)| h.clone()).collect();
    assert_eq!(
        got,
        strs(&[
            "max.message.bytes=2000 sensitive=false",
            "retention.ms=999 sensitive=false"
        ])
    );
    let all = describe_topic_configs(&peer, &topic, true);
    let got: Vec<String> = all.iter().map(|(h, _)| h.clone()).collect();
    let want = expected_topic_configs(&[("max.message.bytes", "2000"), ("retention.ms", "999")]);
    assert_eq!(got, heads(&want));
    // kafka-topics --describe lists the topic's own configs too.
    let (_, configs, _) = describe_topic(&peer, &topic, 1);
    let configs: Vec<&str> = configs.split(',').collect();
    assert!(configs.contains(&"retention.ms=999"), "{configs:?}");
    assert!(configs.contains(&"max.message.bytes=2000"), "{configs:?}");
    assert!(
        !configs.iter().any(|c| c.starts_with("cleanup.policy=")),
        "{configs:?}"
    );

    // Bad values and unknown names are refused (the message of a bad value differs).
    let bad = peer.fails(
        "kafka-configs",
        &[
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &topic,
            "--add-config",
            "retention.ms=abc",
        ],
    );
    assert!(
        bad.stderr.contains(
            "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.InvalidConfigurationException: "
        ) && bad.stderr.contains("retention.ms"),
        "{}",
        bad.describe()
    );
    let unknown = peer.fails(
        "kafka-configs",
        &[
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &topic,
            "--add-config",
            "foo.bar=1",
        ],
    );
    assert!(
        unknown.stderr.contains(
            "org.apache.kafka.common.errors.InvalidConfigurationException: Unknown topic config name: foo.bar"
        ),
        "{}",
        unknown.describe()
    );
    // Nothing changed.
    let got: Vec<String> = describe_topic_configs(&peer, &topic, false)
        .iter()
        .map(|(h, _)| h.clone())
        .collect();
    assert_eq!(
        got,
        strs(&[
            "max.message.bytes=2000 sensitive=false",
            "retention.ms=999 sensitive=false"
        ])
    );
    peer.finish();
}

/// The synonyms Kafka lists: the broker config a topic config defaults to, where that
/// has a value (`compression.type`'s is `compression.type` itself; retention.ms's broker
/// synonyms log.retention.{ms,minutes} are null and log.retention.hours is not listed;
/// flush.ms, segment.ms, remote.storage.enable, ... have none).
#[test]
fn configs_topic_synonyms_are_kafkas() {
    let Some(peer) = Peer::start("kafka-configs synonyms") else {
        return;
    };
    let topic = peer.name("tools-synonyms");
    peer.ok(
        "kafka-topics",
        &[
            "--create",
            "--topic",
            &topic,
            "--config",
            "retention.ms=123456",
        ],
    );
    let got: Vec<String> = describe_topic_configs(&peer, &topic, true)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let want = expected_topic_configs(&[("retention.ms", "123456")]);
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, w) in got.iter().zip(&want) {
        if w.starts_with("min.insync.replicas=") {
            // Kafka's own broker lists a dynamic cluster default first.
            assert!(g.ends_with("DEFAULT_CONFIG:min.insync.replicas=1}"), "{g}");
        } else {
            assert_eq!(g, w);
        }
    }
    peer.finish();
}

/// Kafka lists no synonym for a broker config without a value (`synonyms={}`), and
/// log.flush.interval.ms, log.retention.ms and log.roll.ms are null by default (their
/// topic configs default to other settings).
#[test]
fn configs_broker_defaults_and_synonyms_are_kafkas() {
    let Some(peer) = Peer::start("kafka-configs broker synonyms") else {
        return;
    };
    let all = describe_broker_configs(&peer, true);
    let mut wrong = Vec::new();
    for (head, line) in &all {
        if head.contains("=null sensitive=") && !line.ends_with(" synonyms={}") {
            wrong.push(line.clone());
        }
    }
    assert!(
        wrong.is_empty(),
        "{} null configs with synonyms: {wrong:#?}",
        wrong.len()
    );
    for key in ["log.flush.interval.ms", "log.retention.ms", "log.roll.ms"] {
        if peer.configured(key).is_none() {
            assert_eq!(config_value(&all, key).as_deref(), Some("null"), "{key}");
        }
    }
    let id = peer.node_id;
    let broker_id = all
        .iter()
        .find(|(h, _)| h.starts_with("broker.id="))
        .map(|(_, l)| l.as_str());
    assert_eq!(
        broker_id,
        Some(format!("broker.id={id} sensitive=false synonyms={{STATIC_BROKER_CONFIG:broker.id={id}, DEFAULT_CONFIG:broker.id=-1}}").as_str())
    );
    peer.finish();
}

#[track_caller]
fn describe_broker_configs(peer: &Peer, all: bool) -> Vec<(String, String)> {
    let id = peer.node_id.to_string();
    let mut args = vec![
        "--describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        &id,
    ];
    if all {
        args.push("--all");
    }
    let out = peer.ok("kafka-configs", &args);
    let header = if all {
        format!("All configs for broker {id} are:")
    } else {
        format!("Dynamic configs for broker {id} are:")
    };
    config_lines(&out, &header)
}

#[test]
fn configs_broker_describe_all() {
    let Some(peer) = Peer::start("kafka-configs broker") else {
        return;
    };
    let all = describe_broker_configs(&peer, true);
    // Kafka 4.1 lists 316 broker configs.
    assert!(all.len() >= 300, "{} broker configs", all.len());
    let id = peer.node_id.to_string();
    for (name, value) in [
        ("broker.id", id.as_str()),
        ("node.id", id.as_str()),
        ("num.partitions", "1"),
        ("message.max.bytes", "1048588"),
        ("log.segment.bytes", "1073741824"),
        ("log.retention.hours", "168"),
        ("log.cleanup.policy", "delete"),
        ("compression.type", "producer"),
        ("auto.create.topics.enable", "true"),
        ("default.replication.factor", "1"),
    ] {
        assert_eq!(
            config_value(&all, name).as_deref(),
            Some(value),
            "broker config {name}"
        );
    }
    let sensitive: Vec<&str> = all
        .iter()
        .filter(|(h, _)| h.ends_with(" sensitive=true"))
        .map(|(h, _)| h.split('=').next().unwrap_or(""))
        .collect();
    assert!(sensitive.contains(&"sasl.jaas.config"), "{sensitive:?}");
    assert!(
        sensitive.contains(&"ssl.keystore.password"),
        "{sensitive:?}"
    );
    // The names are sorted, once each.
    let names: Vec<&str> = all
        .iter()
        .map(|(h, _)| h.split('=').next().unwrap_or(""))
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted);

    // Without --all: only dynamic configs (the header line at least; another test may
    // set one on a shared Kafka).
    describe_broker_configs(&peer, false);
    let out = peer.ok(
        "kafka-configs",
        &["--describe", "--entity-type", "brokers", "--entity-default"],
    );
    assert_eq!(
        lines(&out.stdout).first().copied(),
        Some("Default configs for brokers in the cluster are:")
    );
    peer.finish();
}

/// The broker configs the broker was started with, as DescribeConfigs reports them.
#[test]
fn configs_broker_describe_reports_configured_values() {
    let Some(peer) = Peer::start("kafka-configs broker values") else {
        return;
    };
    let all = describe_broker_configs(&peer, true);
    let mut checked = 0;
    for key in [
        "num.partitions",
        "offsets.topic.num.partitions",
        "transaction.state.log.num.partitions",
        "group.initial.rebalance.delay.ms",
    ] {
        if let Some(v) = peer.configured(key) {
            assert_eq!(config_value(&all, key), Some(v), "broker config {key}");
            checked += 1;
        }
    }
    assert!(checked > 0, "no configured values to check");
    let port = peer.bootstrap.rsplit(':').next().unwrap_or("").to_string();
    for key in ["listeners", "advertised.listeners"] {
        let v = config_value(&all, key).unwrap_or_default();
        assert!(v.contains(&format!(":{port}")), "{key}={v}");
    }
    peer.finish();
}

/// A broker config changed at run time (DYNAMIC_BROKER_CONFIG), described, and removed.
#[test]
fn configs_broker_alter_dynamic_config() {
    let Some(peer) = Peer::start("kafka-configs broker alter") else {
        return;
    };
    let id = peer.node_id.to_string();
    let alter = |op: &str, value: &str| {
        peer.ok(
            "kafka-configs",
            &[
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-name",
                &id,
                op,
                value,
            ],
        )
    };
    let out = alter("--add-config", "log.cleaner.threads=2");
    assert_eq!(
        out.stdout,
        format!("Completed updating config for broker {id}.\n")
    );
    let dynamic = describe_broker_configs(&peer, false);
    let line = dynamic
        .iter()
        .find(|(h, _)| h.starts_with("log.cleaner.threads="))
        .map(|(_, l)| l.as_str());
    assert_eq!(
        line,
        Some(
            "log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}"
        )
    );
    let all = describe_broker_configs(&peer, true);
    assert_eq!(
        config_value(&all, "log.cleaner.threads").as_deref(),
        Some("2")
    );
    let out = alter("--delete-config", "log.cleaner.threads");
    assert_eq!(
        out.stdout,
        format!("Completed updating config for broker {id}.\n")
    );
    let dynamic = describe_broker_configs(&peer, false);
    assert!(
        !dynamic
            .iter()
            .any(|(h, _)| h.starts_with("log.cleaner.threads=")),
        "{dynamic:?}"
    );
    peer.finish();
}

// ---------------------------------------------------------------------------------------
// kafka-console-producer, kafka-console-consumer

#[test]
fn console_producer_then_console_consumer() {
    let Some(peer) = Peer::start("console producer/consumer") else {
        return;
    };
    let topic = peer.name("tools-console");
    peer.ok("kafka-topics", &["--create", "--topic", &topic]);
    // An empty key, an empty value, the separator in the value, non-ASCII text, then
    // enough lines for several batches.
    let mut input =
        String::from("k1:v1\nk2:v2\nk1:v3\n:empty-key\nk3:\nsep:in:value\nclé:größe ✓\n");
    for i in 0..500 {
        input.push_str(&format!("key-{}:value-{i}-{}\n", i % 7, "x".repeat(i % 50)));
    }
    let n = input.lines().count();
    let out = peer.run_stdin(
        "kafka-console-producer",
        &[
            "--topic",
            &topic,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        Some(input.as_bytes()),
    );
    peer.expect_success(&out);
    assert_eq!(out.stdout, "");

    let n_s = n.to_string();
    let consume = |extra: &[&str], max: &str| {
        let mut args = vec![
            "--topic",
            topic.as_str(),
            "--from-beginning",
            "--max-messages",
            max,
            "--timeout-ms",
            "30000",
        ];
        args.extend_from_slice(extra);
        peer.ok("kafka-console-consumer", &args)
    };
    let out = consume(&["--property", "print.key=true"], &n_s);
    let want: String = input
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(':').expect("key:value");
            format!("{k}\t{v}\n")
        })
        .collect();
    assert_eq!(out.stdout, want);
    assert!(
        out.stderr
            .contains(&format!("Processed a total of {n} messages")),
        "{}",
        out.stderr
    );

    // Partition, offset and (no) headers, with a ':' separator.
    let out = consume(
        &[
            "--property",
            "print.key=true",
            "--property",
            "print.offset=true",
            "--property",
            "print.partition=true",
            "--property",
            "print.headers=true",
            "--property",
            "key.separator=:",
        ],
        "7",
    );
    assert_eq!(
        out.stdout,
        "Partition:0:Offset:0:NO_HEADERS:k1:v1\n\
         Partition:0:Offset:1:NO_HEADERS:k2:v2\n\
         Partition:0:Offset:2:NO_HEADERS:k1:v3\n\
         Partition:0:Offset:3:NO_HEADERS::empty-key\n\
         Partition:0:Offset:4:NO_HEADERS:k3:\n\
         Partition:0:Offset:5:NO_HEADERS:sep:in:value\n\
         Partition:0:Offset:6:NO_HEADERS:clé:größe ✓\n"
    );

    // From an offset of one partition.
    let out = peer.ok(
        "kafka-console-consumer",
        &[
            "--topic",
            &topic,
            "--partition",
            "0",
            "--offset",
            "4",
            "--max-messages",
            "3",
            "--timeout-ms",
            "30000",
        ],
    );
    assert_eq!(out.stdout, "\nin:value\ngröße ✓\n");

    // Headers.
    let headers_topic = peer.name("tools-console-headers");
    peer.ok("kafka-topics", &["--create", "--topic", &headers_topic]);
    let out = peer.run_stdin(
        "kafka-console-producer",
        &[
            "--topic",
            &headers_topic,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            "--property",
            "parse.headers=true",
        ],
        Some(b"h1:a,h2:b\tk1:v1\nh3:c\tk2:v2\n"),
    );
    peer.expect_success(&out);
    let out = peer.ok(
        "kafka-console-consumer",
        &[
            "--topic",
            &headers_topic,
            "--from-beginning",
            "--max-messages",
            "2",
            "--timeout-ms",
            "30000",
            "--property",
            "print.key=true",
            "--property",
            "print.headers=true",
        ],
    );
    assert_eq!(out.stdout, "h1:a,h2:b\tk1\tv1\nh3:c\tk2\tv2\n");
    peer.finish();
}

// ---------------------------------------------------------------------------------------
// kafka-consumer-groups

const DESCRIBE_COLUMNS: &[&str] = &[
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
];

/// The tool says so on stderr when the group is Empty.
#[track_caller]
fn assert_no_active_members(out: &CmdOutput, group: &str) {
    assert!(
        out.stderr.contains(&format!(
            "\nConsumer group '{group}' has no active members.\n"
        )),
        "{}",
        out.describe()
    );
}

/// `--describe --group G` of a group without members: rows of (partition, current,
/// log end, lag) for `topic`.
#[track_caller]
fn describe_offsets(peer: &Peer, group: &str, topic: &str) -> Vec<(i32, i64, i64, i64)> {
    let out = peer.ok("kafka-consumer-groups", &["--describe", "--group", group]);
    assert_no_active_members(&out, group);
    let (header, rows) = table(&out.stdout, "GROUP");
    assert_eq!(header, strs(DESCRIBE_COLUMNS));
    let mut got: Vec<(i32, i64, i64, i64)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r.len(), 9, "row {r:?}");
            assert_eq!(r[0], group);
            assert_eq!(r[1], topic);
            assert_eq!(&r[6..], ["-", "-", "-"], "row {r:?}");
            let n = |i: usize| r[i].parse::<i64>().unwrap_or_else(|_| panic!("row {r:?}"));
            (n(2) as i32, n(3), n(4), n(5))
        })
        .collect();
    got.sort();
    got
}

/// `--reset-offsets ...`: the (partition, new offset) rows.
#[track_caller]
fn reset_offsets(peer: &Peer, group: &str, topic: &str, args: &[&str]) -> Vec<(i32, i64)> {
    let mut all = vec!["--reset-offsets", "--group", group];
    all.extend_from_slice(args);
    let out = peer.ok("kafka-consumer-groups", &all);
    let (header, rows) = table(&out.stdout, "GROUP");
    assert_eq!(header, strs(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]));
    let mut got: Vec<(i32, i64)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r.len(), 4, "row {r:?}");
            assert_eq!(r[0], group);
            assert_eq!(r[1], topic);
            (
                r[2].parse().expect("partition"),
                r[3].parse().expect("offset"),
            )
        })
        .collect();
    got.sort();
    got
}

/// kafka-get-offsets for a topic: (partition, offset), sorted.
#[track_caller]
fn get_offsets(peer: &Peer, topic: &str, time: Option<&str>) -> Vec<(i32, i64)> {
    let mut args = vec!["--topic", topic];
    if let Some(t) = time {
        args.extend_from_slice(&["--time", t]);
    }
    let out = peer.ok("kafka-get-offsets", &args);
    let mut got: Vec<(i32, i64)> = out
        .stdout
        .lines()
        .map(|l| {
            let mut f = l.rsplitn(3, ':');
            let offset = f.next().and_then(|o| o.parse().ok());
            let partition = f.next().and_then(|p| p.parse().ok());
            assert_eq!(f.next(), Some(topic), "line {l:?}");
            (
                partition.unwrap_or_else(|| panic!("line {l:?}")),
                offset.unwrap_or_else(|| panic!("line {l:?}")),
            )
        })
        .collect();
    got.sort();
    got
}

/// Writes `n` keyed lines to `topic` with kafka-console-producer.
#[track_caller]
fn produce_lines(peer: &Peer, topic: &str, from: usize, n: usize) {
    let input: String = (from..from + n)
        .map(|i| format!("key-{i}:value-{i}\n"))
        .collect();
    let out = peer.run_stdin(
        "kafka-console-producer",
        &[
            "--topic",
            topic,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        Some(input.as_bytes()),
    );
    peer.expect_success(&out);
}

#[track_caller]
fn list_groups_with_state(peer: &Peer) -> Vec<(String, String)> {
    let out = peer.ok("kafka-consumer-groups", &["--list", "--state"]);
    let (header, rows) = table(&out.stdout, "GROUP");
    assert_eq!(header, strs(&["GROUP", "STATE"]));
    rows.into_iter()
        .map(|r| {
            assert_eq!(r.len(), 2, "row {r:?}");
            (r[0].clone(), r[1].clone())
        })
        .collect()
}

#[test]
fn consumer_groups_list_describe_reset_delete() {
    let Some(peer) = Peer::start("kafka-consumer-groups") else {
        return;
    };
    let topic = peer.name("tools-groups");
    let group = peer.name("tools-group");
    peer.ok(
        "kafka-topics",
        &["--create", "--topic", &topic, "--partitions", "2"],
    );
    produce_lines(&peer, &topic, 0, 20);
    let ends = get_offsets(&peer, &topic, None);
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(ends.iter().map(|e| e.1).sum::<i64>(), 20, "{ends:?}");
    // The console consumer commits its position when it closes.
    peer.ok(
        "kafka-console-consumer",
        &[
            "--topic",
            &topic,
            "--group",
            &group,
            "--from-beginning",
            "--max-messages",
            "20",
            "--timeout-ms",
            "30000",
        ],
    );

    let out = peer.ok("kafka-consumer-groups", &["--list"]);
    assert!(out.stdout.lines().any(|l| l == group), "{}", out.stdout);
    let listed = list_groups_with_state(&peer);
    assert!(
        listed.contains(&(group.clone(), "Empty".to_string())),
        "{listed:?}"
    );
    let out = peer.ok("kafka-consumer-groups", &["--list", "--type"]);
    let (header, rows) = table(&out.stdout, "GROUP");
    assert_eq!(header, strs(&["GROUP", "TYPE"]));
    assert!(
        rows.contains(&vec![group.clone(), "Classic".to_string()]),
        "{rows:?}"
    );

    let at_end: Vec<(i32, i64, i64, i64)> = ends.iter().map(|&(p, e)| (p, e, e, 0)).collect();
    assert_eq!(describe_offsets(&peer, &group, &topic), at_end);
    let out = peer.ok(
        "kafka-consumer-groups",
        &["--describe", "--group", &group, "--state"],
    );
    let (header, rows) = table(&out.stdout, "GROUP");
    assert_eq!(
        header,
        strs(&[
            "GROUP",
            "COORDINATOR",
            "(ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "#MEMBERS"
        ])
    );
    assert_eq!(
        rows,
        vec![strs(&[
            &group,
            &peer.bootstrap,
            &format!("({})", peer.node_id),
            "-",
            "Empty",
            "0"
        ])]
    );

    // --dry-run changes nothing; --execute does.
    let earliest = reset_offsets(
        &peer,
        &group,
        &topic,
        &["--topic", &topic, "--to-earliest", "--dry-run"],
    );
    assert_eq!(earliest, vec![(0, 0), (1, 0)]);
    assert_eq!(describe_offsets(&peer, &group, &topic), at_end);
    let earliest = reset_offsets(
        &peer,
        &group,
        &topic,
        &["--topic", &topic, "--to-earliest", "--execute"],
    );
    assert_eq!(earliest, vec![(0, 0), (1, 0)]);
    let at_start: Vec<(i32, i64, i64, i64)> = ends.iter().map(|&(p, e)| (p, 0, e, e)).collect();
    assert_eq!(describe_offsets(&peer, &group, &topic), at_start);

    let tp0 = format!("{topic}:0");
    let moved = reset_offsets(
        &peer,
        &group,
        &topic,
        &["--topic", &tp0, "--to-offset", "3", "--execute"],
    );
    assert_eq!(moved, vec![(0, 3)]);
    let mut want = at_start.clone();
    want[0] = (0, 3, ends[0].1, ends[0].1 - 3);
    assert_eq!(describe_offsets(&peer, &group, &topic), want);

    let shifted = reset_offsets(
        &peer,
        &group,
        &topic,
        &["--all-topics", "--shift-by", "-1", "--execute"],
    );
    assert_eq!(shifted, vec![(0, 2), (1, 0)]);
    let latest = reset_offsets(
        &peer,
        &group,
        &topic,
        &["--topic", &topic, "--to-latest", "--execute"],
    );
    assert_eq!(latest, ends);

    let out = peer.ok(
        "kafka-consumer-groups",
        &["--delete-offsets", "--group", &group, "--topic", &topic],
    );
    let status = out.stdout.replace(&format!("{topic} "), "T ");
    assert!(
        out.stdout.starts_with(&format!(
            "Request succeeded for deleting offsets from group {group}.\n"
        )),
        "{}",
        out.stdout
    );
    let (header, rows) = table(&status, "TOPIC");
    assert_eq!(header, strs(&["TOPIC", "PARTITION", "STATUS"]));
    assert_eq!(
        rows,
        vec![
            strs(&["T", "0", "Successful"]),
            strs(&["T", "1", "Successful"])
        ]
    );
    let out = peer.ok("kafka-consumer-groups", &["--describe", "--group", &group]);
    assert_eq!(out.stdout.trim(), "", "{}", out.describe());
    assert_no_active_members(&out, &group);

    let out = peer.ok("kafka-consumer-groups", &["--delete", "--group", &group]);
    assert_eq!(
        out.stdout,
        format!("Deletion of requested consumer groups ('{group}') was successful.\n")
    );
    let listed = list_groups_with_state(&peer);
    assert!(!listed.iter().any(|(g, _)| *g == group), "{listed:?}");
    let nosuch = peer.name("tools-no-such-group");
    let out = peer.ok("kafka-consumer-groups", &["--delete", "--group", &nosuch]);
    assert_eq!(
        out.stdout,
        format!(
            "\nError: Deletion of some consumer groups failed:\n* Group '{nosuch}' could not be deleted due to: org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.\n"
        )
    );
    peer.finish();
}

/// Kafka 4.1's DescribeGroups v6 answers GROUP_ID_NOT_FOUND for a group that does not
/// exist; Twinlog supports v0-v5, where the group is Dead without an error, and the tool
/// prints `Error: Consumer group 'G' does not exist.`
#[test]
fn consumer_groups_describe_unknown_group_is_group_id_not_found() {
    let Some(peer) = Peer::start("kafka-consumer-groups unknown") else {
        return;
    };
    let group = peer.name("tools-never-existed");
    let out = peer.ok("kafka-consumer-groups", &["--describe", "--group", &group]);
    assert!(
        out.stdout.starts_with(&format!(
            "\nError: Executing consumer group command failed due to org.apache.kafka.common.errors.GroupIdNotFoundException: Group {group} not found.\n"
        )),
        "{}",
        out.describe()
    );
    peer.finish();
}

#[test]
fn consumer_groups_with_an_active_member() {
    let Some(peer) = Peer::start("kafka-consumer-groups active") else {
        return;
    };
    let topic = peer.name("tools-active");
    let group = peer.name("tools-active-group");
    peer.ok("kafka-topics", &["--create", "--topic", &topic]);
    produce_lines(&peer, &topic, 0, 5);
    // Reads the 5 records, then waits for a sixth.
    let consumer = peer.spawn(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            &peer.bootstrap,
            "--topic",
            &topic,
            "--group",
            &group,
            "--from-beginning",
            "--max-messages",
            "6",
            "--timeout-ms",
            "55000",
            "--property",
            "print.key=true",
        ],
        "consumer",
    );
    let member = eventually(Duration::from_secs(40), "a member", || {
        let out = peer.run("kafka-consumer-groups", &["--describe", "--group", &group]);
        if !out.stdout.contains("console-consumer-") {
            return Err(out.describe());
        }
        let (header, rows) = table(&out.stdout, "GROUP");
        assert_eq!(header, strs(DESCRIBE_COLUMNS));
        assert_eq!(rows.len(), 1, "{rows:?}");
        let r = &rows[0];
        assert_eq!(r.len(), 9, "{r:?}");
        assert_eq!(
            (r[0].as_str(), r[1].as_str(), r[2].as_str()),
            (group.as_str(), topic.as_str(), "0")
        );
        assert_eq!(r[4], "5", "{r:?}");
        assert!(r[6].starts_with("console-consumer-"), "{r:?}");
        assert_eq!(
            (r[7].as_str(), r[8].as_str()),
            ("/127.0.0.1", "console-consumer")
        );
        Ok(r[6].clone())
    });

    let out = peer.ok(
        "kafka-consumer-groups",
        &["--describe", "--group", &group, "--state"],
    );
    let (_, rows) = table(&out.stdout, "GROUP");
    assert_eq!(
        rows,
        vec![strs(&[
            &group,
            &peer.bootstrap,
            &format!("({})", peer.node_id),
            "range",
            "Stable",
            "1"
        ])]
    );
    let out = peer.ok(
        "kafka-consumer-groups",
        &["--describe", "--group", &group, "--members", "--verbose"],
    );
    let (header, rows) = table(&out.stdout, "GROUP");
    assert_eq!(
        header,
        strs(&[
            "GROUP",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT",
            "TARGET-EPOCH",
            "TARGET-ASSIGNMENT"
        ])
    );
    let assignment = format!("{topic}:0");
    assert_eq!(
        rows,
        vec![strs(&[
            &group,
            &member,
            "/127.0.0.1",
            "console-consumer",
            "1",
            "-",
            &assignment,
            "-",
            "-"
        ])]
    );
    let listed = list_groups_with_state(&peer);
    assert!(
        listed.contains(&(group.clone(), "Stable".to_string())),
        "{listed:?}"
    );

    // What an active group refuses.
    let out = peer.ok("kafka-consumer-groups", &["--delete", "--group", &group]);
    assert_eq!(
        out.stdout,
        format!(
            "\nError: Deletion of some consumer groups failed:\n* Group '{group}' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.\n"
        )
    );
    let out = peer.ok(
        "kafka-consumer-groups",
        &[
            "--reset-offsets",
            "--group",
            &group,
            "--topic",
            &topic,
            "--to-earliest",
            "--execute",
        ],
    );
    assert!(
        out.stdout.starts_with(&format!(
            "\nError: Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable.\n"
        )),
        "{}",
        out.stdout
    );
    let out = peer.ok(
        "kafka-consumer-groups",
        &["--delete-offsets", "--group", &group, "--topic", &topic],
    );
    assert!(
        out.stdout.starts_with(
            "\nError: Encountered some partition-level error, see the follow-up details.\n"
        ),
        "{}",
        out.stdout
    );
    let subscribed = "Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.";
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with(&format!("{topic} ")) && l.ends_with(subscribed)),
        "{}",
        out.stdout
    );

    // The sixth record ends the consumer, which leaves the group and commits.
    produce_lines(&peer, &topic, 5, 1);
    let stdout = consumer.wait_ok(&peer);
    let want: String = (0..6).map(|i| format!("key-{i}\tvalue-{i}\n")).collect();
    assert_eq!(stdout, want);
    assert_eq!(describe_offsets(&peer, &group, &topic), vec![(0, 6, 6, 0)]);
    let out = peer.ok("kafka-consumer-groups", &["--delete", "--group", &group]);
    assert_eq!(
        out.stdout,
        format!("Deletion of requested consumer groups ('{group}') was successful.\n")
    );
    peer.finish();
}

// ---------------------------------------------------------------------------------------
// kafka-get-offsets, kafka-delete-records

#[track_caller]
fn delete_records(peer: &Peer, topic: &str, offset: i64) -> CmdOutput {
    let json = format!(
        "{{\"partitions\":[{{\"topic\":\"{topic}\",\"partition\":0,\"offset\":{offset}}}],\"version\":1}}"
    );
    let path = write_file(&peer.file(&format!("delete-{offset}.json")), &json);
    peer.ok("kafka-delete-records", &["--offset-json-file", &path])
}

#[test]
fn get_offsets_and_delete_records() {
    let Some(peer) = Peer::start("kafka-get-offsets, kafka-delete-records") else {
        return;
    };
    let topic = peer.name("tools-offsets");
    peer.ok("kafka-topics", &["--create", "--topic", &topic]);
    produce_lines(&peer, &topic, 0, 6);
    assert_eq!(get_offsets(&peer, &topic, None), vec![(0, 6)]);
    assert_eq!(get_offsets(&peer, &topic, Some("-1")), vec![(0, 6)]);
    assert_eq!(get_offsets(&peer, &topic, Some("-2")), vec![(0, 0)]);

    // -3: the first offset with the largest timestamp.
    let out = peer.ok(
        "kafka-console-consumer",
        &[
            "--topic",
            &topic,
            "--from-beginning",
            "--max-messages",
            "6",
            "--timeout-ms",
            "30000",
            "--property",
            "print.timestamp=true",
            "--property",
            "print.offset=true",
        ],
    );
    let stamped: Vec<(i64, i64)> = out
        .stdout
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let ts = f[0]
                .strip_prefix("CreateTime:")
                .and_then(|t| t.parse().ok());
            let off = f
                .get(1)
                .and_then(|o| o.strip_prefix("Offset:"))
                .and_then(|o| o.parse().ok());
            (
                ts.unwrap_or_else(|| panic!("line {l:?}")),
                off.unwrap_or_else(|| panic!("line {l:?}")),
            )
        })
        .collect();
    assert_eq!(stamped.len(), 6, "{}", out.stdout);
    let max_ts = stamped.iter().map(|s| s.0).max().unwrap_or_default();
    let first_max = stamped
        .iter()
        .find(|s| s.0 == max_ts)
        .map(|s| s.1)
        .unwrap_or(-1);
    assert_eq!(get_offsets(&peer, &topic, Some("-3")), vec![(0, first_max)]);
    // By timestamp: the first offset at or after it.
    let ts = stamped[0].0.to_string();
    assert_eq!(get_offsets(&peer, &topic, Some(&ts)), vec![(0, 0)]);
    let later = (max_ts + 60_000).to_string();
    let out = peer.ok("kafka-get-offsets", &["--topic", &topic, "--time", &later]);
    assert_eq!(out.stdout, "", "no offset after the last timestamp");
    // --topic-partitions.
    let tp = format!("{topic}:0");
    let out = peer.ok("kafka-get-offsets", &["--topic-partitions", &tp]);
    assert_eq!(out.stdout, format!("{topic}:0:6\n"));

    let out = delete_records(&peer, &topic, 2);
    assert_eq!(
        out.stdout,
        format!(
            "Executing records delete operation\nRecords delete operation completed:\npartition: {topic}-0\tlow_watermark: 2\n"
        )
    );
    assert_eq!(get_offsets(&peer, &topic, Some("-2")), vec![(0, 2)]);
    assert_eq!(get_offsets(&peer, &topic, Some("-1")), vec![(0, 6)]);
    let out = peer.ok(
        "kafka-console-consumer",
        &[
            "--topic",
            &topic,
            "--from-beginning",
            "--max-messages",
            "4",
            "--timeout-ms",
            "30000",
            "--property",
            "print.key=true",
        ],
    );
    assert_eq!(
        out.stdout,
        "key-2\tvalue-2\nkey-3\tvalue-3\nkey-4\tvalue-4\nkey-5\tvalue-5\n"
    );

    // Beyond the end: a partition-level error, exit status 0.
    let out = delete_records(&peer, &topic, 99);
    assert_eq!(
        out.stdout,
        format!(
            "Executing records delete operation\nRecords delete operation completed:\npartition: {topic}-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is not within the range of offsets maintained by the server.\n"
        )
    );
    // -1: up to the high watermark.
    let out = delete_records(&peer, &topic, -1);
    assert_eq!(
        out.stdout,
        format!(
            "Executing records delete operation\nRecords delete operation completed:\npartition: {topic}-0\tlow_watermark: 6\n"
        )
    );
    assert_eq!(get_offsets(&peer, &topic, Some("-2")), vec![(0, 6)]);
    assert_eq!(get_offsets(&peer, &topic, Some("-1")), vec![(0, 6)]);
    peer.finish();
}

/// `--time -4` (earliest-local, KIP-1005) needs ListOffsets v9.
#[test]
fn get_offsets_earliest_local() {
    let Some(peer) = Peer::start("kafka-get-offsets -4") else {
        return;
    };
    let topic = peer.name("tools-offsets-local");
    peer.ok("kafka-topics", &["--create", "--topic", &topic]);
    produce_lines(&peer, &topic, 0, 3);
    assert_eq!(get_offsets(&peer, &topic, Some("-4")), vec![(0, 0)]);
    peer.finish();
}

// ---------------------------------------------------------------------------------------
// kafka-producer-perf-test, kafka-consumer-perf-test

/// The number before `suffix` in `text` (`"20000 records sent"` -> 20000).
fn number_before(text: &str, suffix: &str) -> Option<f64> {
    let at = text.find(suffix)?;
    text[..at].split([' ', '(']).next_back()?.parse().ok()
}

#[test]
fn producer_and_consumer_perf_tests() {
    let Some(peer) = Peer::start("perf tests") else {
        return;
    };
    let topic = peer.name("tools-perf");
    peer.ok(
        "kafka-topics",
        &["--create", "--topic", &topic, "--partitions", "2"],
    );
    let props = format!("bootstrap.servers={}", peer.bootstrap);
    let out = run_tool(
        "kafka-producer-perf-test",
        &[
            "--topic",
            &topic,
            "--num-records",
            "20000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            &props,
            "acks=all",
        ],
        None,
        TIMEOUT,
    );
    peer.expect_success(&out);
    // `20000 records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency,
    // P ms 50th, P ms 95th, P ms 99th, P ms 99.9th.`
    let last = out.stdout.lines().last().unwrap_or("");
    assert!(last.starts_with("20000 records sent, "), "{}", out.stdout);
    for suffix in [
        " records/sec (",
        " MB/sec), ",
        " ms avg latency, ",
        " ms max latency, ",
        " ms 50th, ",
        " ms 95th, ",
        " ms 99th, ",
        " ms 99.9th.",
    ] {
        let v = number_before(last, suffix);
        assert!(v.is_some_and(|v| v >= 0.0), "{suffix:?} in {last:?}");
    }
    assert!(last.ends_with(" ms 99.9th."), "{last:?}");
    let ends = get_offsets(&peer, &topic, None);
    assert_eq!(ends.iter().map(|e| e.1).sum::<i64>(), 20000, "{ends:?}");

    let out = peer.ok(
        "kafka-consumer-perf-test",
        &[
            "--topic",
            &topic,
            "--messages",
            "20000",
            "--timeout",
            "30000",
        ],
    );
    let all = lines(&out.stdout);
    assert_eq!(all.len(), 2, "{}", out.stdout);
    assert_eq!(
        all[0],
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    );
    let f: Vec<&str> = all[1].split(", ").collect();
    assert_eq!(f.len(), 10, "{:?}", all[1]);
    // 20000 records of 100 bytes.
    assert_eq!(f[2], "1.9073", "{:?}", all[1]);
    assert_eq!(f[4], "20000", "{:?}", all[1]);
    for v in &f[2..] {
        assert!(v.parse::<f64>().is_ok_and(|v| v >= 0.0), "{:?}", all[1]);
    }
    peer.finish();
}

// ---------------------------------------------------------------------------------------
// kafka-transactions

const DESCRIBE_TXN_COLUMNS: &[&str] = &[
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
];

const PRODUCER_COLUMNS: &[&str] = &[
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
];

/// `kafka-transactions list`: the row of `id`, if listed.
#[track_caller]
fn list_transaction(peer: &Peer, id: &str) -> Option<Vec<String>> {
    let out = peer.ok("kafka-transactions", &["list"]);
    let (header, rows) = tab_table(&out.stdout, "TransactionalId");
    assert_eq!(
        header,
        strs(&[
            "TransactionalId",
            "Coordinator",
            "ProducerId",
            "TransactionState"
        ])
    );
    rows.into_iter().find(|r| r[0] == id)
}

/// `kafka-transactions describe`: its one row.
#[track_caller]
fn describe_transaction(peer: &Peer, id: &str) -> Vec<String> {
    let out = peer.ok(
        "kafka-transactions",
        &["describe", "--transactional-id", id],
    );
    let (header, mut rows) = tab_table(&out.stdout, "CoordinatorId");
    assert_eq!(header, strs(DESCRIBE_TXN_COLUMNS));
    assert_eq!(rows.len(), 1, "{}", out.stdout);
    let mut row = rows.remove(0);
    // An empty TopicPartitions cell.
    if row.len() == 8 {
        row.push(String::new());
    }
    assert_eq!(row.len(), 9, "{row:?}");
    assert_eq!(row[0], peer.node_id.to_string());
    assert_eq!(row[1], id);
    for i in [2, 3, 5, 6, 7] {
        assert!(row[i].parse::<i64>().is_ok_and(|v| v >= 0), "{row:?}");
    }
    row
}

#[track_caller]
fn describe_producers(peer: &Peer, topic: &str, partition: &str) -> Vec<Vec<String>> {
    let out = peer.ok(
        "kafka-transactions",
        &[
            "describe-producers",
            "--topic",
            topic,
            "--partition",
            partition,
        ],
    );
    let (header, rows) = tab_table(&out.stdout, "ProducerId");
    assert_eq!(header, strs(PRODUCER_COLUMNS));
    for r in &rows {
        assert_eq!(r.len(), 6, "{r:?}");
        for v in &r[..5] {
            assert!(v.parse::<i64>().is_ok(), "{r:?}");
        }
    }
    rows
}

#[test]
fn transactions_list_describe_describe_producers() {
    let Some(peer) = Peer::start("kafka-transactions") else {
        return;
    };
    let topic = peer.name("tools-txn");
    let txn_id = format!("{topic}-txn");
    peer.ok("kafka-topics", &["--create", "--topic", &topic]);
    // One transaction of 200 records at 10 records/s: open for about 20 s.
    let props = format!("bootstrap.servers={}", peer.bootstrap);
    let producer = peer.spawn(
        "kafka-producer-perf-test",
        &[
            "--topic",
            &topic,
            "--num-records",
            "200",
            "--record-size",
            "50",
            "--throughput",
            "10",
            "--transactional-id",
            &txn_id,
            "--transaction-duration-ms",
            "60000",
            "--producer-props",
            &props,
        ],
        "txn-producer",
    );
    let listed =
        eventually(
            Duration::from_secs(30),
            "an ongoing transaction",
            || match list_transaction(&peer, &txn_id) {
                Some(r) if r[3] == "Ongoing" => Ok(r),
                other => Err(format!("{other:?}")),
            },
        );
    assert_eq!(listed[1], peer.node_id.to_string());
    let producer_id = listed[2].clone();
    assert!(
        producer_id.parse::<i64>().is_ok_and(|p| p >= 0),
        "{listed:?}"
    );

    let row = describe_transaction(&peer, &txn_id);
    assert_eq!(row[2], producer_id);
    assert_eq!(row[4], "Ongoing");
    assert_eq!(row[5], "60000");
    assert_eq!(row[8], format!("{topic}-0"));
    let producers = describe_producers(&peer, &topic, "0");
    assert_eq!(producers.len(), 1, "{producers:?}");
    let p = &producers[0];
    assert_eq!(p[0], producer_id);
    assert_eq!(p[2], "-1", "no marker written yet: {p:?}");
    assert!(p[3].parse::<i64>().is_ok_and(|s| s >= 0), "{p:?}");
    assert_eq!(p[5], "0", "the transaction starts at offset 0: {p:?}");
    // Not hanging: the coordinator knows it.
    let out = peer.ok(
        "kafka-transactions",
        &["find-hanging", "--broker-id", &peer.node_id.to_string()],
    );
    assert_eq!(
        out.stdout,
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)\t\n"
    );

    let stdout = producer.wait_ok(&peer);
    assert!(stdout.contains("200 records sent, "), "{stdout}");
    let row = describe_transaction(&peer, &txn_id);
    assert_eq!(row[2], producer_id);
    assert_eq!(row[4], "CompleteCommit");
    assert_eq!(row[8], "", "{row:?}");
    let producers = describe_producers(&peer, &topic, "0");
    assert_eq!(producers.len(), 1, "{producers:?}");
    assert_eq!(producers[0][0], producer_id);
    assert_eq!(producers[0][5], "None", "{producers:?}");
    // 200 records and the commit marker.
    assert_eq!(get_offsets(&peer, &topic, None), vec![(0, 201)]);

    let pattern = format!("{topic}-.*");
    let out = peer.ok(
        "kafka-transactions",
        &["list", "--transactional-id-pattern", &pattern],
    );
    let (_, rows) = tab_table(&out.stdout, "TransactionalId");
    assert_eq!(
        rows,
        vec![strs(&[
            &txn_id,
            &peer.node_id.to_string(),
            &producer_id,
            "CompleteCommit"
        ])]
    );
    let nosuch = peer.name("tools-no-such-txn");
    let out = peer.fails(
        "kafka-transactions",
        &["describe", "--transactional-id", &nosuch],
    );
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "Failed to describe transaction state of transactional-id `{nosuch}`: DescribeTransactions request for transactionalId `{nosuch}` failed because the ID could not be found. Enable debug logging for additional detail.\n"
        )
    );

    // A Java producer's commits and aborts (ProducerChecks leaves `<topic>-txn` after an
    // abort). Its own read-back checks are java_clients' business.
    let java_topic = peer.name("tools-jtxn");
    let java = run_java(
        "ProducerChecks",
        &[
            "transactions",
            "--bootstrap",
            &peer.bootstrap,
            "--topic",
            &java_topic,
        ],
        Duration::from_secs(120),
    );
    eprintln!(
        "[kafka-tools] ProducerChecks transactions: {}",
        java.summary()
    );
    let java_txn = format!("{java_topic}-txn");
    let row = list_transaction(&peer, &java_txn)
        .unwrap_or_else(|| panic!("{java_txn} is not listed\n{}", java.describe()));
    assert_eq!(row[3], "CompleteAbort", "{row:?}\n{}", java.describe());
    let described = describe_transaction(&peer, &java_txn);
    assert_eq!(described[4], "CompleteAbort");
    assert_eq!(described[2], row[2]);
    for partition in ["0", "1"] {
        let producers = describe_producers(&peer, &java_topic, partition);
        assert!(
            producers.iter().any(|p| p[0] == row[2] && p[5] == "None"),
            "partition {partition}: {producers:?}"
        );
    }
    peer.finish();
}

/// kafka-log-dirs (DescribeLogDirs): one log directory with every partition of the topic
/// and a size that grows with what was written to it.
#[test]
fn log_dirs_describe() {
    let Some(peer) = Peer::start("kafka-log-dirs") else {
        return;
    };
    let topic = peer.name("tools-logdirs");
    peer.ok(
        "kafka-topics",
        &["--create", "--topic", &topic, "--partitions", "2"],
    );
    produce_lines(&peer, &topic, 0, 50);
    let out = peer.ok("kafka-log-dirs", &["--describe", "--topic-list", &topic]);
    let json = out
        .stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line\n{}", out.describe()));
    assert!(json.contains("\"logDirs\":[{"), "{json}");
    assert!(json.contains("\"error\":null"), "{json}");
    for p in 0..2 {
        assert!(
            json.contains(&format!("\"partition\":\"{topic}-{p}\"")),
            "{topic}-{p} missing: {json}"
        );
    }
    let sizes: Vec<i64> = json
        .split("\"size\":")
        .skip(1)
        .filter_map(|s| s.split(',').next()?.parse().ok())
        .collect();
    assert_eq!(sizes.len(), 2, "{json}");
    assert!(
        sizes.iter().sum::<i64>() > 50 * 10,
        "50 records are in the sizes: {json}"
    );
    peer.finish();
}
