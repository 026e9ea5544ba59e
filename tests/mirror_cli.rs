//! The operator CLI (`twinlog topic ...`, `twinlog mirror ...`) against real brokers on
//! loopback: a source cluster A and a destination cluster B, each one `twinlog serve`.
//! Every step runs the `twinlog` binary and checks its output and exit code, the way an
//! operator or a script sees them.
//!
//! Run alone: `cargo test -p twinlog --test mirror_cli -- --nocapture`.
//! `TWINLOG_KEEP_TEST_DIRS=1` keeps a failed test's broker directories.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{free_port, produce_batch, run_command, Broker, CmdOutput};

/// Broker config of both clusters: a small `__mirror_state` keeps start-up quick.
const BROKER_CONFIG: &str = "\"mirror.state.topic.num.partitions\" = 3\n";
/// Limit on one CLI run (the CLI's own waits are shorter).
const CLI_TIMEOUT: Duration = Duration::from_secs(120);
/// `--timeout` of the CLI's waits on mirror states.
const STATE_WAIT_S: &str = "60";

/// Runs `twinlog <args> --bootstrap-server <bootstrap>`.
fn twinlog(bootstrap: &str, args: &[&str]) -> CmdOutput {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_twinlog"));
    cmd.args(args)
        .arg("--bootstrap-server")
        .arg(bootstrap)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn");
    run_command(&mut cmd, None, CLI_TIMEOUT)
}

fn logs(brokers: &[&Broker]) -> String {
    brokers.iter().map(|b| b.log_tail(40)).collect()
}

/// Panics unless the command exited 0; returns its stdout.
#[track_caller]
fn ok(out: CmdOutput, brokers: &[&Broker]) -> String {
    if !out.success() {
        panic!("expected success:\n{}\n{}", out.describe(), logs(brokers));
    }
    eprintln!("[cli] ok: {}", out.what);
    out.stdout
}

/// Panics unless the command exited 1 with `error: ... <name>` on stderr; returns stderr.
#[track_caller]
fn fails_with(out: CmdOutput, name: &str, brokers: &[&Broker]) -> String {
    let code = out.status.and_then(|s| s.code());
    let named = out
        .stderr
        .lines()
        .any(|l| l.starts_with("error: ") && l.contains(&format!("{name}: ")));
    if out.timed_out || code != Some(1) || !named {
        panic!(
            "expected exit code 1 and an `error: ...{name}: ...` line:\n{}\n{}",
            out.describe(),
            logs(brokers)
        );
    }
    eprintln!("[cli] failed as expected with {name}: {}", out.what);
    out.stderr
}

/// Panics unless the command exited 1 with every one of `needles` on stderr.
#[track_caller]
fn fails_saying(out: &CmdOutput, needles: &[&str]) {
    let code = out.status.and_then(|s| s.code());
    assert!(
        code == Some(1) && needles.iter().all(|n| out.stderr.contains(n)),
        "expected exit code 1 and {needles:?} on stderr:\n{}",
        out.describe()
    );
}

/// The value after `key: ` on the first line of `twinlog topic describe` output.
/// `twinlog mirror wait NAME --caught-up` against `dst`; its output.
fn wait_caught_up(dst: &str, mirror: &str, brokers: &[&Broker]) -> String {
    ok(
        twinlog(
            dst,
            &[
                "mirror",
                "wait",
                mirror,
                "--caught-up",
                "--poll-ms",
                "20",
                "--timeout",
                STATE_WAIT_S,
            ],
        ),
        brokers,
    )
}

fn describe_field(describe: &str, key: &str) -> String {
    let first = describe.lines().next().unwrap_or("");
    first
        .split('\t')
        .find_map(|f| f.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in {first:?}"))
        .to_string()
}

/// Mirror `name`'s row of `twinlog mirror list`, split into columns.
fn list_row(list: &str, name: &str) -> Option<Vec<String>> {
    list.lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|cols| cols.first().map(String::as_str) == Some(name))
}

#[test]
fn topic_commands_over_the_wire() {
    let a = Broker::start(BROKER_CONFIG);
    let boot = a.bootstrap();
    let bs = [&a];

    let out = ok(
        twinlog(
            &boot,
            &[
                "topic",
                "create",
                "orders",
                "--partitions",
                "3",
                "--config",
                "retention.ms=3600000",
            ],
        ),
        &bs,
    );
    assert!(out.starts_with("created topic orders"), "{out}");
    let err = fails_with(
        twinlog(&boot, &["topic", "create", "orders", "--partitions", "3"]),
        "TOPIC_ALREADY_EXISTS",
        &bs,
    );
    assert!(
        err.contains("error: orders: TOPIC_ALREADY_EXISTS: "),
        "{err}"
    );

    let list = ok(twinlog(&boot, &["topic", "list"]), &bs);
    assert!(list.lines().any(|l| l == "orders"), "{list}");

    let describe = ok(twinlog(&boot, &["topic", "describe", "orders"]), &bs);
    assert_eq!(describe_field(&describe, "Topic"), "orders");
    assert_eq!(describe_field(&describe, "PartitionCount"), "3");
    // Kafka's text form of a topic id: 22 characters of URL-safe base64.
    let id = describe_field(&describe, "TopicId");
    assert_eq!(id.len(), 22, "{describe}");
    assert!(
        id.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "{describe}"
    );
    for p in 0..3 {
        assert!(
            describe.contains(&format!("\tPartition: {p}\tLeader: ")),
            "{describe}"
        );
    }
    assert!(
        describe.contains("\tretention.ms=3600000\t(DYNAMIC_TOPIC_CONFIG"),
        "{describe}"
    );

    fails_with(
        twinlog(&boot, &["topic", "describe", "missing"]),
        "UNKNOWN_TOPIC_OR_PARTITION",
        &bs,
    );

    let out = ok(twinlog(&boot, &["topic", "delete", "orders"]), &bs);
    assert_eq!(out.trim(), "deleted topic orders");
    let list = ok(twinlog(&boot, &["topic", "list"]), &bs);
    assert!(!list.lines().any(|l| l == "orders"), "{list}");
    fails_with(
        twinlog(&boot, &["topic", "delete", "orders"]),
        "UNKNOWN_TOPIC_OR_PARTITION",
        &bs,
    );

    // Nobody listens: a clear connection error, exit 1.
    let nowhere = format!("127.0.0.1:{}", free_port());
    let out = twinlog(&nowhere, &["topic", "list"]);
    fails_saying(&out, &[&format!("error: cannot connect to {nowhere}: ")]);
    assert!(out.stderr.starts_with("error: "), "{}", out.describe());

    // Usage errors are clap's: exit 2.
    for args in [
        &["topic", "create"][..],
        &["mirror", "create", "m"][..],
        &["mirror", "remove", "m"][..],
        &["mirror", "wait", "m", "--state", "SLEEPING"][..],
        &[
            "mirror", "create", "m", "--source", "x:1", "--config", "novalue",
        ][..],
    ] {
        let out = twinlog(&boot, args);
        assert_eq!(
            out.status.and_then(|s| s.code()),
            Some(2),
            "{}",
            out.describe()
        );
    }
}

/// Mirror admin errors, list, describe, pause and resume.
#[test]
fn mirror_admin_over_the_wire() {
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let (src, dst) = (a.bootstrap(), b.bootstrap());
    let bs = [&a, &b];

    ok(
        twinlog(&src, &["topic", "create", "orders", "--partitions", "3"]),
        &bs,
    );
    ok(
        twinlog(&src, &["topic", "create", "payments", "--partitions", "2"]),
        &bs,
    );

    let out = ok(
        twinlog(&dst, &["mirror", "create", "m", "--source", &src]),
        &bs,
    );
    assert_eq!(out.trim(), "created mirror m");
    let err = fails_with(
        twinlog(&dst, &["mirror", "create", "m", "--source", &src]),
        "CLUSTER_MIRROR_ALREADY_EXISTS",
        &bs,
    );
    assert!(
        err.contains("error: CLUSTER_MIRROR_ALREADY_EXISTS: Mirror m already exists"),
        "{err}"
    );
    let err = fails_with(
        twinlog(
            &dst,
            &[
                "mirror",
                "create",
                "bad",
                "--source",
                &src,
                "--config",
                "fetch.max.bytes=abc",
            ],
        ),
        "INVALID_CONFIG",
        &bs,
    );
    assert!(err.contains("fetch.max.bytes"), "{err}");

    let err = fails_with(
        twinlog(&dst, &["mirror", "add", "m", "--topic", "missing"]),
        "UNKNOWN_TOPIC_OR_PARTITION",
        &bs,
    );
    assert!(
        err.contains("error: missing: UNKNOWN_TOPIC_OR_PARTITION: "),
        "{err}"
    );

    let out = ok(
        twinlog(&dst, &["mirror", "add", "m", "--topic", "orders"]),
        &bs,
    );
    assert_eq!(out.trim(), "added orders");
    // A pattern is resolved by the broker against the source's topics.
    let out = ok(
        twinlog(&dst, &["mirror", "add", "m", "--topic", "pay.*"]),
        &bs,
    );
    assert_eq!(out.trim(), "added payments");

    // The mirror topic exists on B with A's topic id and partition count.
    for (topic, partitions) in [("orders", "3"), ("payments", "2")] {
        let on_a = ok(twinlog(&src, &["topic", "describe", topic]), &bs);
        let on_b = ok(twinlog(&dst, &["topic", "describe", topic]), &bs);
        assert_eq!(
            describe_field(&on_a, "TopicId"),
            describe_field(&on_b, "TopicId"),
            "A:\n{on_a}\nB:\n{on_b}"
        );
        assert_eq!(describe_field(&on_b, "PartitionCount"), partitions);
        assert!(on_b.contains("\tmirror.name=m\t"), "{on_b}");
    }

    let list = ok(twinlog(&dst, &["mirror", "list"]), &bs);
    let row = list_row(&list, "m").unwrap_or_else(|| panic!("no mirror m in\n{list}"));
    assert_eq!(row[1], src, "{list}");
    assert_ne!(row[2], "-", "source cluster id missing:\n{list}");
    assert_eq!(row[3], "2", "{list}");
    assert_eq!(row[4], "orders,payments", "{list}");

    let describe = ok(twinlog(&dst, &["mirror", "describe", "m"]), &bs);
    // The partition table, then one line per metadata-sync step.
    let rows: Vec<&str> = describe
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("mirror m sync "))
        .collect();
    assert_eq!(rows.len(), 5, "{describe}");
    assert!(rows.iter().all(|r| r.starts_with("m ")), "{describe}");
    let json = ok(twinlog(&dst, &["mirror", "describe", "--json"]), &bs);
    let json = json.trim();
    assert!(json.starts_with("{\"mirrors\":[{\"name\":\"m\",\"error_code\":0,\"topics\":[{\"name\":\"orders\",\"partitions\":[{\"partition\":0,\"state\":"), "{json}");
    assert!(json.ends_with("}]}]}"), "{json}");
    assert!(json.contains("}]}],\"sync\":[{\"step\":"), "{json}");
    assert_eq!(json.matches("\"partition\":").count(), 5, "{json}");
    assert_eq!(
        json.matches("\"last_mirrored_epoch\":").count(),
        5,
        "{json}"
    );

    // Unknown mirror.
    for args in [
        &["mirror", "describe", "nope"][..],
        &["mirror", "delete", "nope"][..],
        &["mirror", "pause", "nope", "--topic", "orders"][..],
        &["mirror", "add", "nope", "--topic", "orders"][..],
        &["mirror", "add", "nope", "--topic", "ord.*"][..],
        &["mirror", "remove", "nope", "--all-topics"][..],
        &[
            "mirror",
            "wait",
            "nope",
            "--state",
            "STOPPED",
            "--timeout",
            "1",
        ][..],
        &["mirror", "wait", "nope", "--caught-up", "--timeout", "1"][..],
    ] {
        fails_with(twinlog(&dst, args), "UNKNOWN_CLUSTER_MIRROR", &bs);
    }

    // Pause and resume.
    let out = ok(
        twinlog(&dst, &["mirror", "pause", "m", "--topic", "orders"]),
        &bs,
    );
    assert_eq!(out.trim(), "paused orders");
    ok(
        twinlog(
            &dst,
            &[
                "mirror",
                "wait",
                "m",
                "--state",
                "PAUSED",
                "--topic",
                "orders",
                "--timeout",
                STATE_WAIT_S,
            ],
        ),
        &bs,
    );
    // A paused topic never catches up: `wait --caught-up` times out naming it...
    let out = twinlog(
        &dst,
        &[
            "mirror",
            "wait",
            "m",
            "--caught-up",
            "--topic",
            "orders",
            "--timeout",
            "1",
            "--poll-ms",
            "50",
        ],
    );
    fails_saying(&out, &["to catch up; still behind: orders-0 (PAUSED"]);
    // ... and --when-caught-up gives up and removes nothing.
    let out = twinlog(
        &dst,
        &[
            "mirror",
            "remove",
            "m",
            "--topic",
            "orders",
            "--when-caught-up",
            "--timeout",
            "1.5",
        ],
    );
    fails_saying(&out, &["nothing was removed", "orders-0 (PAUSED"]);
    let list = ok(twinlog(&dst, &["mirror", "list"]), &bs);
    assert_eq!(
        list_row(&list, "m").map(|r| r[4].clone()).as_deref(),
        Some("orders,payments")
    );
    // The dry run shows what a failover would do and changes nothing.
    let dry = ok(
        twinlog(
            &dst,
            &["mirror", "remove", "m", "--all-topics", "--dry-run"],
        ),
        &bs,
    );
    assert!(dry.contains("nothing was changed"), "{dry}");
    assert!(dry.contains("RECORDS-DROPPED"), "{dry}");
    assert_eq!(
        dry.lines()
            .filter(|l| l.starts_with("orders ") || l.starts_with("payments "))
            .count(),
        5,
        "{dry}"
    );
    assert!(
        dry.contains("total: 5 partitions, 0 records would be dropped"),
        "{dry}"
    );
    let list = ok(twinlog(&dst, &["mirror", "list"]), &bs);
    assert_eq!(
        list_row(&list, "m").map(|r| r[4].clone()).as_deref(),
        Some("orders,payments")
    );

    let out = ok(
        twinlog(&dst, &["mirror", "resume", "m", "--topic", "orders"]),
        &bs,
    );
    assert_eq!(out.trim(), "resumed orders");
    ok(
        twinlog(
            &dst,
            &[
                "mirror",
                "wait",
                "m",
                "--state",
                "MIRRORING",
                "--timeout",
                STATE_WAIT_S,
            ],
        ),
        &bs,
    );
}

/// The failover and the mirror's end: remove when caught up, STOPPED, delete, re-create.
#[test]
fn mirror_remove_delete_and_recreate() {
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let (src, dst) = (a.bootstrap(), b.bootstrap());
    let bs = [&a, &b];

    ok(
        twinlog(&src, &["topic", "create", "orders", "--partitions", "2"]),
        &bs,
    );
    produce_batch(&src, "orders", 0, 10);
    ok(
        twinlog(&dst, &["mirror", "create", "m", "--source", &src]),
        &bs,
    );
    ok(
        twinlog(&dst, &["mirror", "add", "m", "--topic", "orders"]),
        &bs,
    );
    ok(
        twinlog(
            &dst,
            &[
                "mirror",
                "wait",
                "m",
                "--state",
                "MIRRORING",
                "--timeout",
                STATE_WAIT_S,
            ],
        ),
        &bs,
    );

    let err = fails_with(
        twinlog(&dst, &["mirror", "delete", "m"]),
        "CLUSTER_MIRROR_NOT_EMPTY",
        &bs,
    );
    assert!(err.contains("Mirror m is not empty"), "{err}");

    // Regexes of `remove --topic` match the mirror's topics; one matching none fails.
    let err = twinlog(&dst, &["mirror", "remove", "m", "--topic", "pay.*"]);
    fails_saying(&err, &["no topic of mirror m matches"]);

    let out = wait_caught_up(&dst, "m", &bs);
    assert_eq!(out.trim(), "mirror m: all 2 partitions are caught up");
    let out = ok(
        twinlog(
            &dst,
            &[
                "mirror",
                "remove",
                "m",
                "--all-topics",
                "--when-caught-up",
                "--timeout",
                STATE_WAIT_S,
            ],
        ),
        &bs,
    );
    assert!(out.contains("all 2 partitions are caught up"), "{out}");
    assert!(out.lines().any(|l| l == "removed orders"), "{out}");

    let err = fails_with(
        twinlog(&dst, &["mirror", "pause", "m", "--topic", "orders"]),
        "MIRROR_TOPIC_BEING_STOPPED",
        &bs,
    );
    assert!(
        err.contains("error: orders: MIRROR_TOPIC_BEING_STOPPED: "),
        "{err}"
    );

    ok(
        twinlog(
            &dst,
            &[
                "mirror",
                "wait",
                "m",
                "--state",
                "STOPPED",
                "--timeout",
                STATE_WAIT_S,
            ],
        ),
        &bs,
    );
    // Describe reports the end state too.
    let json = ok(twinlog(&dst, &["mirror", "describe", "m", "--json"]), &bs);
    assert!(
        json.contains("{\"partition\":0,\"state\":\"STOPPED\""),
        "{json}"
    );

    let out = ok(twinlog(&dst, &["mirror", "delete", "m"]), &bs);
    assert_eq!(out.trim(), "deleted mirror m");
    let list = ok(twinlog(&dst, &["mirror", "list"]), &bs);
    assert!(list_row(&list, "m").is_none(), "{list}");
    fails_with(
        twinlog(&dst, &["mirror", "describe", "m"]),
        "UNKNOWN_CLUSTER_MIRROR",
        &bs,
    );
    // The name can be used again.
    ok(
        twinlog(&dst, &["mirror", "create", "m", "--source", &src]),
        &bs,
    );
    let describe = ok(twinlog(&dst, &["mirror", "describe", "m"]), &bs);
    assert!(describe.contains("mirror m has no topics"), "{describe}");
}

/// `twinlog mirror add --topic 'pay-.*'` keeps following its pattern (audit B-6): a
/// matching source topic created later is mirrored by the metadata sync, an excluded
/// or non-matching one is not, and a topic removed from the mirror (failed over) is
/// never added back.
#[test]
fn a_pattern_keeps_adding_matching_source_topics() {
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let (src, dst) = (a.bootstrap(), b.bootstrap());
    let bs = [&a, &b];
    ok(
        twinlog(&src, &["topic", "create", "pay-eu", "--partitions", "1"]),
        &bs,
    );
    ok(
        twinlog(
            &dst,
            &[
                "mirror",
                "create",
                "m",
                "--source",
                &src,
                "--config",
                "mirror.metadata.refresh.interval.ms=200",
                "--config",
                "topics.exclude=pay-test.*",
            ],
        ),
        &bs,
    );
    let out = ok(
        twinlog(&dst, &["mirror", "add", "m", "--topic", "pay-.*"]),
        &bs,
    );
    assert_eq!(out.trim(), "added pay-eu");
    let configs = ok(twinlog(&dst, &["mirror", "describe", "m", "--json"]), &bs);
    // Topics created on the source afterwards.
    for t in ["pay-us", "pay-test-1", "orders"] {
        ok(
            twinlog(&src, &["topic", "create", t, "--partitions", "2"]),
            &bs,
        );
        produce_batch(&src, t, 0, 5);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let list = ok(twinlog(&dst, &["topic", "list"]), &bs);
        if list.lines().any(|l| l.trim() == "pay-us") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "pay-us was not added: {list}\n{configs}\n{}",
            logs(&bs)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_caught_up(&dst, "m", &bs);
    let list = ok(twinlog(&dst, &["topic", "list"]), &bs);
    for absent in ["pay-test-1", "orders"] {
        assert!(
            !list.lines().any(|l| l.trim() == absent),
            "{absent} must not be mirrored: {list}"
        );
    }
    // Failover of pay-us: it stays out of the mirror although the pattern matches.
    ok(
        twinlog(&dst, &["mirror", "remove", "m", "--topic", "pay-us"]),
        &bs,
    );
    ok(
        twinlog(
            &dst,
            &[
                "mirror",
                "wait",
                "m",
                "--state",
                "STOPPED",
                "--topic",
                "pay-us",
                "--timeout",
                STATE_WAIT_S,
            ],
        ),
        &bs,
    );
    std::thread::sleep(Duration::from_millis(1000));
    let json = ok(twinlog(&dst, &["mirror", "describe", "m", "--json"]), &bs);
    assert!(
        json.contains("\"step\":\"topic-discovery\""),
        "the step is reported: {json}"
    );
    produce_batch(&dst, "pay-us", 0, 3);
    // Once every topic of the mirror has failed over, its patterns rest: a matching
    // source topic created afterwards is not mirrored.
    ok(
        twinlog(&dst, &["mirror", "remove", "m", "--topic", "pay-eu"]),
        &bs,
    );
    ok(
        twinlog(
            &dst,
            &[
                "mirror",
                "wait",
                "m",
                "--state",
                "STOPPED",
                "--timeout",
                STATE_WAIT_S,
            ],
        ),
        &bs,
    );
    ok(
        twinlog(&src, &["topic", "create", "pay-late", "--partitions", "1"]),
        &bs,
    );
    std::thread::sleep(Duration::from_millis(1500));
    let list = ok(twinlog(&dst, &["topic", "list"]), &bs);
    assert!(
        !list.lines().any(|l| l.trim() == "pay-late"),
        "a failed-over mirror adds no topic: {list}"
    );
}
