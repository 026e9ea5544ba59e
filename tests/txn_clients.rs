//! Transactions against a real client: a confluent-kafka transactional producer commits
//! and aborts transactions over 4 partitions (with consumer-group offsets sent to one),
//! read_committed and read_uncommitted consumers see what they should, and a second
//! producer with the same `transactional.id` fences the first, a transaction left open
//! past its timeout is aborted by the broker, and after a SIGTERM restart the
//! coordinator state loaded from `__transaction_state` serves the same id again.
//!
//! A test whose client is missing prints why and is skipped. Run alone:
//! `cargo test -p twinlog --test txn_clients -- --nocapture`.

mod support;

use std::time::Duration;

use support::{assert_success, missing_python_modules, run_python, skip_if, venv_python, Broker};

/// Small internal topics keep start-up quick; timed-out transactions are looked for
/// every 500 ms.
const TXN_CONFIG: &str = "\"transaction.state.log.num.partitions\" = 4\n\"offsets.topic.num.partitions\" = 4\n\"group.initial.rebalance.delay.ms\" = 0\n\"transaction.abort.timed.out.transaction.cleanup.interval.ms\" = 500\n";

#[test]
fn confluent_kafka_transactions_commit_abort_fence() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "confluent_kafka_txn",
    ) {
        return;
    }
    let mut broker = Broker::start(TXN_CONFIG);
    let b = broker.bootstrap();
    let args = |mode| {
        [
            mode,
            "--bootstrap",
            &b,
            "--topic",
            "txn",
            "--group",
            "g-txn",
            "--partitions",
            "4",
            "--timeout",
            "20",
        ]
    };
    let out = run_python(&py, "ck_txn.py", &args("run"), Duration::from_secs(90));
    assert_success(&out, &broker);
    broker.restart_term();
    let out = run_python(
        &py,
        "ck_txn.py",
        &args("after-restart"),
        Duration::from_secs(60),
    );
    assert_success(&out, &broker);
    let (_, errors, panicked) = broker.log_problems();
    assert!(!panicked, "the broker panicked\n{}", broker.log_tail(60));
    assert_eq!(
        errors,
        0,
        "errors in the broker log\n{}",
        broker.log_tail(60)
    );
}
