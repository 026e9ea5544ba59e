//! Issue 4 with real clients at scale: three members of one group (confluent-kafka,
//! then kafka-python) consume every record of a 12-partition topic exactly once across
//! a rebalance, their committed offsets surviving a SIGKILL restart.
//! And a consume-transform-produce app (`tests/clients/i4_eos.py`) gives exactly-once
//! output across a broker SIGKILL, driven by Debian's confluent-kafka (librdkafka 2.0.2):
//! with the current wheel (librdkafka 2.16) the client stalls after the restart while
//! tearing down its bootstrap broker handle (see the issue 4 notes), so that client is
//! not used for this one.
//!
//! A test whose client is missing prints why and is skipped. Run alone:
//! `cargo test -p twinlog --test issue4_clients -- --nocapture`.

mod support;

use std::time::{Duration, Instant};

use support::{
    assert_success, debian_python, missing_python_modules, run_python, skip_if, spawn_python,
    venv_python, wait_child, Broker,
};

/// Short group timers and small internal topics keep the runs quick.
const CONFIG: &str = "\"group.initial.rebalance.delay.ms\" = 300\n\"num.partitions\" = 4\n\"transaction.state.log.num.partitions\" = 4\n\"offsets.topic.num.partitions\" = 4\n\"transaction.abort.timed.out.transaction.cleanup.interval.ms\" = 500\n";

#[test]
fn groups_300k_three_consumers_confluent_and_kafka_python() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka", "kafka"]),
        "groups_300k",
    ) {
        return;
    }
    let mut broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    let runs = [
        ("big-ck", "g-big-ck", "consume-ck", "300000"),
        ("big-kp", "g-big-kp", "consume-kp", "30000"),
    ];
    for (topic, group, mode, count) in runs {
        let common = [
            "--bootstrap",
            &b,
            "--topic",
            topic,
            "--group",
            group,
            "--partitions",
            "12",
            "--count",
            count,
        ];
        let produce: Vec<&str> = ["produce"]
            .into_iter()
            .chain(common)
            .chain(["--timeout", "60"])
            .collect();
        let out = run_python(&py, "i4_groups.py", &produce, Duration::from_secs(90));
        assert_success(&out, &broker);
        let consume: Vec<&str> = [mode]
            .into_iter()
            .chain(common)
            .chain(["--timeout", "120"])
            .collect();
        let out = run_python(&py, "i4_groups.py", &consume, Duration::from_secs(150));
        assert_success(&out, &broker);
    }

    broker.restart_kill9();
    for (topic, group, _, _) in runs {
        let check = [
            "check",
            "--bootstrap",
            &b,
            "--topic",
            topic,
            "--group",
            group,
            "--partitions",
            "12",
            "--timeout",
            "60",
        ];
        let out = run_python(&py, "ck_group.py", &check, Duration::from_secs(90));
        assert_success(&out, &broker);
    }
    let (_, _, panicked) = broker.log_problems();
    assert!(!panicked, "the broker panicked\n{}", broker.log_tail(60));
}

#[test]
fn consume_transform_produce_exactly_once_across_sigkill() {
    let py = debian_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "eos_sigkill",
    ) {
        return;
    }
    let mut broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    let out = run_python(
        &py,
        "i4_eos.py",
        &["produce", "--bootstrap", &b],
        Duration::from_secs(90),
    );
    assert_success(&out, &broker);

    let dir = tempfile::tempdir().expect("tempdir");
    let mut app = spawn_python(
        &py,
        "i4_eos.py",
        &["app", "--bootstrap", &b, "--timeout", "150"],
        dir.path(),
        "eos-app",
    );
    // Kill the broker once the app has committed a few transactions.
    let stdout = dir.path().join("eos-app.stdout");
    let started = Instant::now();
    loop {
        let progress = std::fs::read_to_string(&stdout).unwrap_or_default();
        if progress
            .lines()
            .filter(|l| l.starts_with("progress"))
            .count()
            >= 3
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the app made no progress: {progress}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    broker.restart_kill9();
    let status = wait_child(&mut app, Duration::from_secs(170));
    let app_out = std::fs::read_to_string(&stdout).unwrap_or_default();
    let app_err = std::fs::read_to_string(dir.path().join("eos-app.stderr")).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "the app did not finish cleanly ({status:?})\nstdout tail: {}\nstderr tail: {}\nbroker: {}",
        tail(&app_out, 5),
        tail(&app_err, 20),
        broker.log_tail(40)
    );
    let out = run_python(
        &py,
        "i4_eos.py",
        &["verify", "--bootstrap", &b],
        Duration::from_secs(90),
    );
    assert_success(&out, &broker);
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
