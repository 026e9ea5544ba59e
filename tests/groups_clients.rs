//! Consumer groups (classic protocol) against real clients: confluent-kafka members
//! rebalancing over a 12-partition topic with manual commits, the committed offsets
//! surviving a SIGTERM and a SIGKILL restart, and kcat's balanced consumer (`-G`).
//!
//! A test whose client is missing prints why and is skipped. Run alone:
//! `cargo test -p twinlog --test groups_clients -- --nocapture --test-threads=1`.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{
    assert_success, missing_program, missing_python_modules, run_command, run_python, skip_if,
    venv_python, Broker,
};

/// Group timers short enough for a test: the first rebalance waits 300 ms for members.
const GROUP_CONFIG: &str = "\"group.initial.rebalance.delay.ms\" = 300\n\"num.partitions\" = 4\n";

/// 1. confluent-kafka: three members of one group consume 30,000 records over 12
///    partitions exactly once between them while one member leaves and another joins;
///    the committed offsets end at the partitions' ends and are still there after a
///    SIGTERM restart and after a SIGKILL restart; AdminClient then lists, describes
///    and deletes the group.
#[test]
fn confluent_kafka_group_rebalance_commits_survive_restarts() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "confluent_kafka_group",
    ) {
        return;
    }
    let mut broker = Broker::start(GROUP_CONFIG);
    let b = broker.bootstrap();
    let common = ["--bootstrap", &b, "--topic", "grouped", "--group", "g-ck"];
    let consume: Vec<&str> = ["consume"]
        .into_iter()
        .chain(common)
        .chain(["--partitions", "12", "--count", "30000", "--timeout", "150"])
        .collect();
    let out = run_python(&py, "ck_group.py", &consume, Duration::from_secs(200));
    assert_success(&out, &broker);
    let check: Vec<&str> = ["check"]
        .into_iter()
        .chain(common)
        .chain(["--partitions", "12", "--timeout", "60"])
        .collect();
    let out = run_python(&py, "ck_group.py", &check, Duration::from_secs(90));
    assert_success(&out, &broker);

    broker.restart_term();
    let out = run_python(&py, "ck_group.py", &check, Duration::from_secs(90));
    assert_success(&out, &broker);

    broker.restart_kill9();
    let out = run_python(&py, "ck_group.py", &check, Duration::from_secs(90));
    assert_success(&out, &broker);
    // AdminClient: ListGroups, DescribeGroups (Empty), OffsetFetch, DeleteGroups.
    let admin: Vec<&str> = ["admin"]
        .into_iter()
        .chain(common)
        .chain(["--partitions", "12"])
        .collect();
    let out = run_python(&py, "ck_group.py", &admin, Duration::from_secs(90));
    assert_success(&out, &broker);
    let (_, _, panicked) = broker.log_problems();
    assert!(!panicked, "the broker panicked\n{}", broker.log_tail(60));
}

/// 2. kcat's balanced consumer: `-G` from the beginning reads every record; a second
///    run of the same group resumes at the committed offsets and reads only new ones.
#[test]
fn kcat_group_consume_resumes_from_commits() {
    if skip_if(missing_program("kcat"), "kcat_group") {
        return;
    }
    let broker = Broker::start(GROUP_CONFIG);
    let b = broker.bootstrap();
    let t = Duration::from_secs(60);
    let topic = "kcat-grouped";
    let produce = |from: usize, to: usize| {
        let lines: String = (from..to)
            .map(|i| format!("kcat group line {i}\n"))
            .collect();
        let out = run_command(
            Command::new("kcat").args(["-b", &b, "-P", "-t", topic, "-K", ":"]),
            Some(
                lines
                    .lines()
                    .enumerate()
                    .map(|(n, l)| format!("k{}:{l}\n", from + n))
                    .collect::<String>()
                    .as_bytes(),
            ),
            t,
        );
        assert_success(&out, &broker);
    };
    produce(0, 1000);
    let consume = |extra: &[&str]| {
        let mut args = vec!["-b", &b, "-G", "g-kcat"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-e", "-X", "auto.offset.reset=earliest", topic]);
        let out = run_command(Command::new("kcat").args(&args), None, t);
        assert_success(&out, &broker);
        out.stdout.lines().count()
    };
    assert_eq!(
        consume(&["-o", "beginning"]),
        1000,
        "first read of the group"
    );
    produce(1000, 1100);
    assert_eq!(
        consume(&[]),
        100,
        "the group resumes at its committed offsets"
    );
}
