//! Apache Kafka's own Java clients (kafka-clients 4.1) and Kafka Streams against Twinlog:
//! an idempotent producer with acks=all, a transactional producer with read_committed
//! readers and sendOffsetsToTransaction, the classic consumer group protocol (two members,
//! rebalance, commitSync/commitAsync, seek, pause/resume, static membership), the
//! AdminClient, and a Kafka Streams word count with exactly_once_v2 that is killed and
//! restarted. The clients are `tests/java/*.java`, compiled by `scripts/kafka.sh install`.
//!
//! Run alone: `cargo test -p twinlog --test java_clients -- --nocapture`.

mod support;

use std::time::Duration;

use support::kafka::{expect_ok, missing_kafka, run_java};
use support::{skip_if, Broker};

/// Small internal topics keep start-up quick; groups rebalance without delay.
const CONFIG: &str = "\"num.partitions\" = 1\n\"offsets.topic.num.partitions\" = 4\n\"transaction.state.log.num.partitions\" = 4\n\"group.initial.rebalance.delay.ms\" = 0\n";

/// Runs one Java scenario against a fresh Twinlog and checks the broker stayed healthy.
fn scenario(class: &str, name: &str, topic: &str, extra: &[&str], timeout_s: u64) {
    if skip_if(missing_kafka(), &format!("{class} {name}")) {
        return;
    }
    let broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    let mut args = vec![name, "--bootstrap", &b, "--topic", topic];
    args.extend_from_slice(extra);
    let out = run_java(class, &args, Duration::from_secs(timeout_s));
    if !out.success() {
        panic!("{}\n{}", out.describe(), broker.log_tail(60));
    }
    eprintln!("[harness] ok in {:?}: {}", out.elapsed, out.summary());
    broker.assert_healthy();
}

#[test]
fn java_idempotent_producer_acks_all_lz4() {
    scenario(
        "ProducerChecks",
        "idempotent",
        "j-idem",
        &["--compression", "lz4"],
        120,
    );
}

#[test]
fn java_idempotent_producer_zstd() {
    scenario(
        "ProducerChecks",
        "idempotent",
        "j-idem-z",
        &["--compression", "zstd", "--records", "2000"],
        120,
    );
}

#[test]
fn java_transactions_read_committed_and_send_offsets() {
    scenario("ProducerChecks", "transactions", "j-txn", &[], 120);
}

#[test]
fn java_consumer_groups_classic_protocol() {
    scenario("GroupChecks", "groups", "j-groups", &[], 180);
}

/// KIP-848 (`group.protocol=consumer`) is not served: the Java consumer fails cleanly
/// and names the fix (`group.protocol=classic`), as with a cluster that predates it.
#[test]
fn java_consumer_protocol_fails_cleanly() {
    scenario("GroupChecks", "consumer-protocol", "j-848", &[], 90);
}

#[test]
fn java_admin_client() {
    scenario("AdminChecks", "admin", "j-admin", &[], 120);
}

/// Kafka Streams, exactly_once_v2: the instance is halted (like a SIGKILL) after 300 of
/// 500 lines; after more input and a restart on the same state directory, every word's
/// counts are exactly 1, 2, ..., n on a read_committed reader.
#[test]
fn java_streams_exactly_once_word_count_survives_a_crash() {
    if skip_if(missing_kafka(), "streams word count") {
        return;
    }
    let broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    let state = tempfile::tempdir().expect("state dir");
    let state_dir = state.path().to_string_lossy().to_string();
    let wc = |args: &[&str], timeout: u64| {
        let mut all = vec![args[0], "--bootstrap", &b, "--topic", "j-wc"];
        all.extend_from_slice(&args[1..]);
        run_java("StreamsWordCount", &all, Duration::from_secs(timeout))
    };
    let out = run_java(
        "ProducerChecks",
        &[
            "create-topic",
            "--bootstrap",
            &b,
            "--topic",
            "j-wc-input",
            "--partitions",
            "2",
        ],
        Duration::from_secs(60),
    );
    expect_ok(&out, "create the input topic");
    expect_ok(&wc(&["produce", "--lines", "500"], 60), "produce 500 lines");
    let crashed = wc(
        &["run", "--state-dir", &state_dir, "--halt-after", "300"],
        150,
    );
    assert_eq!(
        crashed.status.and_then(|s| s.code()),
        Some(137),
        "the first instance should halt after 300 records\n{}\n{}",
        crashed.describe(),
        broker.log_tail(40)
    );
    let more = wc(&["produce", "--lines", "500", "--from", "500"], 60);
    expect_ok(&more, "produce 500 more lines");
    let out = wc(&["run", "--state-dir", &state_dir, "--lines", "1000"], 240);
    if !out.success() {
        panic!("{}\n{}", out.describe(), broker.log_tail(60));
    }
    assert!(
        out.summary().contains("\"alpha\":1000"),
        "{}",
        out.summary()
    );
    broker.assert_healthy();
}

/// The batches stored in one partition's segment files.
fn stored_batches(broker: &Broker, topic: &str) -> Vec<dataplane::wire::RecordBatch> {
    let mut out = Vec::new();
    for s in support::segment_files(&broker.data_dir().join(format!("{topic}-0"))) {
        let bytes = bytes::Bytes::from(std::fs::read(&s).expect("read segment"));
        for b in dataplane::wire::BatchIter::new(bytes, 0, true) {
            out.push(b.expect("a valid stored batch"));
        }
    }
    out
}

/// Topic configs the leader enforces, seen by the Java producer and consumer and in the
/// stored segments: no null keys on a compacted topic (KIP-467 per-record errors),
/// LogAppendTime stamped into the batch, the topic's compression.type applied.
#[test]
fn java_topic_rules_compaction_keys_log_append_time_compression() {
    if skip_if(missing_kafka(), "topic rules") {
        return;
    }
    let broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    let out = run_java(
        "ProducerChecks",
        &["topic-rules", "--bootstrap", &b, "--topic", "j-rules"],
        Duration::from_secs(90),
    );
    if !out.success() {
        panic!("{}\n{}", out.describe(), broker.log_tail(60));
    }
    let gzip = stored_batches(&broker, "j-rules-gzip");
    assert!(!gzip.is_empty());
    for batch in &gzip {
        assert_eq!(
            batch.compression(),
            dataplane::wire::batch::Compression::Gzip,
            "stored codec of the gzip topic"
        );
    }
    let stamped = stored_batches(&broker, "j-rules-appendtime");
    assert_eq!(stamped.len(), 1);
    assert!(stamped[0].is_log_append_time(), "LogAppendTime flag stored");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    assert!(
        (now - stamped[0].max_timestamp()).abs() < 120_000,
        "the stored max timestamp is the append time"
    );
    let compacted = stored_batches(&broker, "j-rules-compacted");
    assert_eq!(compacted.len(), 2, "the rejected batch is not stored");
    broker.assert_healthy();
}
