//! Mirroring from a real Apache Kafka 4.1 source: topics written by Kafka's Java producer
//! (idempotent lz4; transactional zstd with committed and aborted transactions) and a
//! Java consumer group's committed offsets. The destination's segment files are
//! byte-identical to Kafka's, topic ids and offsets match, topic configs and group
//! offsets sync; after failover (`mirror remove`) a Java consumer of the same group
//! resumes exactly where it was on Kafka and a fresh idempotent producer writes with
//! nothing lost. Kafka has no mirror RPCs: asked for its own last mirrored epoch it has
//! none (-1), so nothing is truncated when mirroring starts.
//!
//! Run alone: `cargo test -p twinlog --test mirror_from_kafka -- --nocapture`.

mod mirror_support;
mod support;

use std::time::Duration;

use mirror_support::*;
use support::kafka::{expect_ok, missing_kafka, run_java, run_tool, shared_kafka};
use support::{segment_files, skip_if, Broker};

const CONFIG: &str = "\"num.partitions\" = 1\n\"offsets.topic.num.partitions\" = 4\n\"transaction.state.log.num.partitions\" = 4\n\"mirror.state.topic.num.partitions\" = 3\n\"group.initial.rebalance.delay.ms\" = 0\n";

/// The topic configs `kafka-configs --describe` lists as set on `topic`.
fn dynamic_configs(bootstrap: &str, topic: &str) -> String {
    let out = run_tool(
        "kafka-configs",
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            topic,
        ],
        None,
        Duration::from_secs(60),
    );
    expect_ok(&out, "kafka-configs --describe");
    out.stdout
}

#[test]
fn mirror_from_apache_kafka_is_byte_identical_and_fails_over() {
    if skip_if(missing_kafka(), "mirror from Kafka") {
        return;
    }
    let kafka = shared_kafka();
    let t = format!("mk{}", std::process::id());
    let lz4 = format!("{t}-lz4");
    let zstd = format!("{t}-zstd");
    let out = run_java(
        "MirrorLoad",
        &["load", "--bootstrap", &kafka.bootstrap, "--topic", &t],
        Duration::from_secs(120),
    );
    expect_ok(&out, "load the Kafka source");

    let dest = Broker::start(CONFIG);
    let d = dest.bootstrap();
    let r = create_mirror(
        &d,
        "from-kafka",
        &kafka.bootstrap,
        &[("mirror.metadata.refresh.interval.ms", "1000")],
    );
    assert_eq!(
        r.error_code,
        0,
        "create mirror: {r:?}\n{}",
        dest.log_tail(40)
    );
    let r = add_topics(&d, "from-kafka", &[&lz4, &zstd]);
    assert_eq!(r.error_code, 0, "add topics: {r:?}\n{}", dest.log_tail(40));

    let mut ends = std::collections::BTreeMap::new();
    for (topic, partitions) in [(&lz4, 3), (&zstd, 2)] {
        for p in 0..partitions {
            let end = read_log(&kafka.bootstrap, topic, p)
                .last()
                .map_or(0, |b| b.next_offset().0);
            assert!(end > 0, "{topic}-{p} is empty on Kafka");
            ends.insert((topic.to_string(), p), end);
        }
    }
    wait_for(
        &d,
        "from-kafka",
        "catch-up",
        Duration::from_secs(120),
        |m| caught_up(m, &ends),
    );

    // A transactional client on the destination cannot write into the copy: neither its
    // records nor an ABORT marker land (AddPartitionsToTxn answers READ_ONLY_TOPIC), so
    // the copy stays the source's, as the comparisons below check.
    let out = run_java(
        "ProducerChecks",
        &["txn-refused", "--bootstrap", &d, "--topic", &lz4],
        Duration::from_secs(90),
    );
    expect_ok(&out, "a transaction into the mirrored topic is refused");
    let m = describe(&d, "from-kafka");
    assert!(caught_up(&m, &ends), "the copy moved: {m:?}");

    // Same topic ids; byte-identical batches over the wire and in the files.
    for topic in [&lz4, &zstd] {
        assert_eq!(
            topic_id(&kafka.bootstrap, topic),
            topic_id(&d, topic),
            "{topic}: topic id and partition count"
        );
    }
    for (topic, p) in ends.keys() {
        let theirs = read_log(&kafka.bootstrap, topic, *p);
        let ours = read_log(&d, topic, *p);
        assert_eq!(theirs.len(), ours.len(), "{topic}-{p}: batch count");
        for (a, b) in theirs.iter().zip(&ours) {
            assert_eq!(
                a.as_bytes(),
                b.as_bytes(),
                "{topic}-{p} at {}",
                a.base_offset().0
            );
        }
        if kafka.dir.as_os_str().is_empty() {
            continue;
        }
        let kafka_dir = kafka.dir.join("data").join(format!("{topic}-{p}"));
        let our_dir = dest.data_dir().join(format!("{topic}-{p}"));
        let (k, o) = (segment_files(&kafka_dir), segment_files(&our_dir));
        assert_eq!(k.len(), o.len(), "{topic}-{p}: segment count");
        for (ks, os) in k.iter().zip(&o) {
            assert_eq!(ks.file_name(), os.file_name());
            let (kb, ob) = (
                std::fs::read(ks).expect("read"),
                std::fs::read(os).expect("read"),
            );
            assert!(
                kb == ob,
                "{}: {} vs {} bytes differ",
                ks.display(),
                kb.len(),
                ob.len()
            );
        }
    }

    // The source topic's config and the group's offsets arrive with the sync.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !dynamic_configs(&d, &lz4).contains("retention.ms=987654321") {
        assert!(
            std::time::Instant::now() < deadline,
            "retention.ms never synced\n{}",
            dest.log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = run_tool(
            "kafka-consumer-groups",
            &[
                "--bootstrap-server",
                &d,
                "--describe",
                "--group",
                &format!("{t}-group"),
            ],
            None,
            Duration::from_secs(60),
        );
        let synced = out.stdout.lines().filter(|l| l.contains(&lz4)).count();
        if synced == 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "group offsets never synced: {}\n{}",
            out.describe(),
            dest.log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // Failover: STOPPED; the last mirrored epoch is the epoch of Kafka's last batch (a
    // single Kafka broker that never changed leaders: 0).
    let r = remove_topics(&d, "from-kafka", &[&lz4, &zstd]);
    assert_eq!(r.error_code, 0, "remove: {r:?}");
    let m = wait_for(&d, "from-kafka", "STOPPED", Duration::from_secs(60), |m| {
        all_in(m, "STOPPED")
    });
    for p in partitions(&m).values() {
        assert_eq!(p.last_mirrored_epoch, 0, "LME of a Kafka source: {p:?}");
    }
    let out = run_java(
        "MirrorLoad",
        &["resume", "--bootstrap", &d, "--topic", &t],
        Duration::from_secs(90),
    );
    let summary = expect_ok(&out, "the group resumes on the copy");
    assert!(summary.contains("\"resumed_records\":1200"), "{summary}");
    assert!(summary.contains("\"metadata_p1\":\"m1\""), "{summary}");
    let out = run_java(
        "MirrorLoad",
        &["produce-after", "--bootstrap", &d, "--topic", &t],
        Duration::from_secs(90),
    );
    expect_ok(&out, "produce after failover");
    dest.assert_healthy();
}
