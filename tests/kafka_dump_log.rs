//! Kafka reads Twinlog's files and Twinlog reads Kafka's. Kafka's own DumpLogSegments
//! (`kafka-dump-log --deep-iteration --index-sanity-check`) finds no error in the
//! `.log`, `.index`, `.timeindex` and `.txnindex` files of a Twinlog broker that took
//! leader appends (idempotent lz4, transactions with aborts, a recompressed topic,
//! LogAppendTime, several segments), mirrored appends (from Apache Kafka) and a recovery
//! after SIGKILL; and `twinlog dump-log --records` prints Kafka's segments exactly as
//! `kafka-dump-log --print-data-log` does.
//!
//! Run alone: `cargo test -p twinlog --test kafka_dump_log -- --nocapture`.

mod mirror_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mirror_support::*;
use support::kafka::{
    expect_ok, kafka_dump_problems, missing_kafka, run_java, run_tool, shared_kafka,
};
use support::{run_command, skip_if, Broker};

/// Small segments (several per partition) and a dense offset index.
const CONFIG: &str = "\"num.partitions\" = 1\n\"offsets.topic.num.partitions\" = 2\n\"transaction.state.log.num.partitions\" = 2\n\"mirror.state.topic.num.partitions\" = 2\n\"group.initial.rebalance.delay.ms\" = 0\n\"log.segment.bytes\" = 65536\n\"log.index.interval.bytes\" = 1024\n";

/// Every log file of the partition directories under `data` whose name starts with one
/// of `prefixes`.
fn log_files(data: &Path, prefixes: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(data)
        .expect("data dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| prefixes.iter().any(|x| n.starts_with(x)))
        })
        .collect();
    dirs.sort();
    for d in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
            .expect("partition dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| matches!(x, "log" | "index" | "timeindex" | "txnindex"))
            })
            .collect();
        files.sort();
        out.extend(files);
    }
    out
}

#[test]
fn kafka_dump_log_finds_no_error_in_twinlog_files_and_twinlog_dumps_kafkas() {
    if skip_if(missing_kafka(), "kafka-dump-log") {
        return;
    }
    let kafka = shared_kafka();
    let mut broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    let java = |args: &[&str]| {
        let out = run_java(args[0], &args[1..], Duration::from_secs(120));
        if !out.success() {
            panic!("{}\n{}", out.describe(), broker.log_tail(40));
        }
    };
    // Leader appends.
    java(&[
        "ProducerChecks",
        "idempotent",
        "--bootstrap",
        &b,
        "--topic",
        "dl-idem",
        "--records",
        "6000",
    ]);
    java(&[
        "ProducerChecks",
        "transactions",
        "--bootstrap",
        &b,
        "--topic",
        "dl-txn",
    ]);
    java(&[
        "ProducerChecks",
        "topic-rules",
        "--bootstrap",
        &b,
        "--topic",
        "dl-rules",
    ]);
    // Mirrored appends from Kafka.
    let t = format!("dl{}", std::process::id());
    let out = run_java(
        "MirrorLoad",
        &["load", "--bootstrap", &kafka.bootstrap, "--topic", &t],
        Duration::from_secs(120),
    );
    expect_ok(&out, "load Kafka");
    let r = create_mirror(&b, "dl", &kafka.bootstrap, &[]);
    assert_eq!(r.error_code, 0, "{r:?}");
    let lz4 = format!("{t}-lz4");
    let zstd = format!("{t}-zstd");
    let r = add_topics(&b, "dl", &[&lz4, &zstd]);
    assert_eq!(r.error_code, 0, "{r:?}");
    let mut ends = std::collections::BTreeMap::new();
    for (topic, n) in [(&lz4, 3), (&zstd, 2)] {
        for p in 0..n {
            let end = read_log(&kafka.bootstrap, topic, p)
                .last()
                .map_or(0, |x| x.next_offset().0);
            ends.insert((topic.to_string(), p), end);
        }
    }
    wait_for(&b, "dl", "catch-up", Duration::from_secs(120), |m| {
        caught_up(m, &ends)
    });
    // A crash, recovery, and more leader appends after it.
    broker.restart_kill9();
    let b = broker.bootstrap();
    let out = run_java(
        "ProducerChecks",
        &[
            "produce",
            "--bootstrap",
            &b,
            "--topic",
            "dl-idem",
            "--records",
            "3000",
            "--compression",
            "snappy",
        ],
        Duration::from_secs(120),
    );
    expect_ok(&out, "produce after recovery");
    // Kafka reads files that are at rest.
    let status = broker.stop_term();
    assert!(status.success(), "{}", broker.log_tail(40));

    let files = log_files(
        &broker.data_dir(),
        &[
            "dl-",
            &format!("{t}-"),
            "__consumer_offsets",
            "__transaction_state",
        ],
    );
    assert!(files
        .iter()
        .any(|f| f.extension().is_some_and(|x| x == "txnindex")));
    assert!(
        files
            .iter()
            .filter(|f| f.extension().is_some_and(|x| x == "log"))
            .count()
            > 15,
        "several segments: {files:?}"
    );
    let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let out = run_tool(
        "kafka-dump-log",
        &[
            "--deep-iteration",
            "--index-sanity-check",
            "--files",
            &list.join(","),
        ],
        None,
        Duration::from_secs(240),
    );
    expect_ok(&out, "kafka-dump-log --index-sanity-check");
    let problems = kafka_dump_problems(&out.stdout, false);
    assert!(problems.is_empty(), "Kafka found problems: {problems:#?}");
    // DumpLogSegments' deep iteration: every index and the data it points at agree.
    let out = run_tool(
        "kafka-dump-log",
        &[
            "--deep-iteration",
            "--verify-index-only",
            "--files",
            &list.join(","),
        ],
        None,
        Duration::from_secs(240),
    );
    expect_ok(&out, "kafka-dump-log --verify-index-only");
    let problems = kafka_dump_problems(&out.stdout, false);
    assert!(
        problems.is_empty(),
        "Kafka found index problems: {problems:#?}"
    );
    assert!(
        out.stdout.matches("Dumping ").count() >= files.len(),
        "{}",
        out.stdout
    );

    // Twinlog reads Kafka's segments as Kafka prints them.
    if kafka.dir.as_os_str().is_empty() {
        return;
    }
    for topic_dir in [format!("{t}-lz4-0"), format!("{t}-zstd-1")] {
        let dir = kafka.dir.join("data").join(&topic_dir);
        let seg = dir.join("00000000000000000000.log");
        let ours = run_command(
            Command::new(env!("CARGO_BIN_EXE_twinlog"))
                .arg("dump-log")
                .arg(&seg)
                .arg("--records"),
            None,
            Duration::from_secs(60),
        );
        assert!(ours.success(), "{}", ours.describe());
        let theirs = run_tool(
            "kafka-dump-log",
            &["--print-data-log", "--files", &seg.display().to_string()],
            None,
            Duration::from_secs(60),
        );
        expect_ok(&theirs, "kafka-dump-log --print-data-log");
        assert_eq!(
            ours.stdout.trim_end(),
            theirs.stdout.trim_end(),
            "twinlog dump-log and kafka-dump-log differ on {}",
            seg.display()
        );
    }
}
