//! Log compaction with real clients: a Java producer fills a compacted topic with many
//! values per key and tombstones, the broker's cleaner compacts it, and a Java consumer
//! reading from offset 0 sees exactly the last value per key (with offset gaps), also
//! after a SIGKILL and recovery; Kafka's DumpLogSegments reads the cleaned segments
//! without error; committed offsets survive the compaction of `__consumer_offsets` and a
//! restart; and a mirrored compacted topic outlives its retention on the destination and
//! matches the source key for key.
//!
//! Run alone: `cargo test -p twinlog --test compaction -- --nocapture`.

mod mirror_support;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use mirror_support::{
    add_topics, caught_up, connect, create_mirror, describe_topic_configs, read_log, wait_for,
};
use support::kafka::{expect_ok, kafka_dump_problems, missing_kafka, run_java, run_tool};
use support::{skip_if, summary_field, Broker};

/// A cleaner that looks often; small internal topics with small segments.
const CONFIG: &str = r#"
"num.partitions" = 1
"offsets.topic.num.partitions" = 1
"offsets.topic.segment.bytes" = 8192
"transaction.state.log.num.partitions" = 1
"mirror.state.topic.num.partitions" = 1
"group.initial.rebalance.delay.ms" = 0
"log.cleaner.backoff.ms" = 200
"log.retention.check.interval.ms" = 1000
"#;

/// Topic configs of a table that compacts quickly.
const TABLE_CONFIGS: &str = "cleanup.policy=compact,segment.bytes=16384,min.cleanable.dirty.ratio=0.01,delete.retention.ms=100";

/// Bytes of `.log` files of every partition directory of `topic`.
fn log_bytes(data_dir: &Path, topic: &str) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(data_dir).expect("data dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(topic).and_then(|r| r.strip_prefix('-')) else {
            continue;
        };
        if rest.parse::<i32>().is_err() {
            continue;
        }
        for f in std::fs::read_dir(entry.path())
            .expect("partition dir")
            .flatten()
        {
            if f.path().extension().is_some_and(|e| e == "log") {
                total += f.metadata().map_or(0, |m| m.len());
            }
        }
    }
    total
}

/// Waits until `topic`'s logs shrink below `fraction` of their size now.
fn wait_compacted(broker: &Broker, topic: &str, fraction: f64) {
    let before = log_bytes(&broker.data_dir(), topic);
    let started = Instant::now();
    loop {
        let now = log_bytes(&broker.data_dir(), topic);
        if (now as f64) < before as f64 * fraction {
            eprintln!(
                "[harness] {topic}: {before} -> {now} bytes in {:?}",
                started.elapsed()
            );
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{topic} not compacted: {before} -> {now} bytes\n{}",
            broker.log_tail(60)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn java(broker: &Broker, scenario: &str, topic: &str, extra: &[&str]) -> String {
    let b = broker.bootstrap();
    let mut args = vec![scenario, "--bootstrap", &b, "--topic", topic];
    args.extend_from_slice(extra);
    let out = run_java("CompactionChecks", &args, Duration::from_secs(180));
    if !out.success() {
        panic!("{}\n{}", out.describe(), broker.log_tail(60));
    }
    out.summary().to_string()
}

/// Kafka's DumpLogSegments on every segment of `dir`: no error. Offset gaps ("Non-
/// consecutive offsets") are what compaction leaves, in Kafka's own logs too.
fn kafka_reads_segments(dir: &Path) {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("partition dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    assert!(files.len() >= 2, "cleaned and active segments: {files:?}");
    let out = run_tool(
        "kafka-dump-log",
        &[
            "--deep-iteration",
            "--index-sanity-check",
            "--files",
            &files.join(","),
        ],
        None,
        Duration::from_secs(120),
    );
    expect_ok(&out, "kafka-dump-log");
    let problems = kafka_dump_problems(&out.stdout, true);
    assert!(problems.is_empty(), "Kafka found problems: {problems:#?}");
    assert!(out.stdout.contains("baseOffset"), "{}", out.stdout);
}

#[test]
fn a_java_consumer_reads_the_last_value_per_key_of_a_compacted_topic() {
    if skip_if(missing_kafka(), "compaction with the Java clients") {
        return;
    }
    let port = support::free_port();
    let mut broker = Broker::start(&format!(
        "{CONFIG}\"metrics.listen\" = \"127.0.0.1:{port}\"\n"
    ));
    let topic = "table";
    let shape = ["--keys", "100", "--rounds", "30", "--tombstones", "10"];
    let mut produce = shape.to_vec();
    produce.extend_from_slice(&["--partitions", "2", "--config", TABLE_CONFIGS]);
    let sent = summary_field(&java(&broker, "produce", topic, &produce), "sent");
    assert_eq!(sent, 3010);
    wait_compacted(&broker, topic, 0.35);
    let read = java(&broker, "read", topic, &shape);
    assert!(summary_field(&read, "records") < 1500, "compacted: {read}");
    assert!(summary_field(&read, "gaps") > 0, "offset gaps: {read}");
    for p in 0..2 {
        let dir = broker.data_dir().join(format!("{topic}-{p}"));
        kafka_reads_segments(&dir);
        // And Twinlog's own dump reads a cleaned segment through its gaps.
        // (A group whose records were all superseded leaves an empty segment.)
        let first = support::segment_files(&dir)
            .into_iter()
            .find(|f| f.metadata().is_ok_and(|m| m.len() > 0))
            .expect("a non-empty segment");
        let dump = support::run_command(
            std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"))
                .arg("dump-log")
                .arg(&first)
                .arg("--records"),
            None,
            Duration::from_secs(30),
        );
        assert!(dump.success(), "{}", dump.describe());
        assert!(dump.stdout.contains("baseOffset"), "{}", dump.stdout);
    }
    // The cleaner's view, in /metrics and `twinlog topic describe`.
    let describe = support::run_command(
        std::process::Command::new(env!("CARGO_BIN_EXE_twinlog")).args([
            "topic",
            "describe",
            topic,
            "--bootstrap-server",
            &broker.bootstrap(),
        ]),
        None,
        Duration::from_secs(30),
    );
    assert!(describe.success(), "{}", describe.describe());
    eprintln!("[harness] {}", describe.stdout);
    for p in 0..2 {
        let line = describe
            .stdout
            .lines()
            .find(|l| l.contains(&format!("Partition: {p}\tDirtyRatio: ")))
            .unwrap_or_else(|| panic!("cleaner line of partition {p}: {}", describe.stdout));
        assert!(!line.contains("never"), "{line}");
    }
    // A crash and recovery keep the cleaned log as it is.
    broker.restart_kill9();
    let again = java(&broker, "read", topic, &shape);
    assert_eq!(
        summary_field(&again, "records"),
        summary_field(&read, "records"),
        "{again} vs {read}"
    );
    broker.assert_healthy();
}

/// OffsetCommit v2 of `offset` for `topic`-0 in `group` (a group without members:
/// Kafka's simple commit).
fn commit(conn: &mut dataplane::client::BlockingConnection, group: &str, topic: &str, offset: i64) {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(-1)
        .with_retention_time_ms(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let r = conn.send(&req, 2).expect("OffsetCommit");
    assert_eq!(
        r.topics[0].partitions[0].error_code, 0,
        "commit {offset}: {r:?}"
    );
}

fn committed(bootstrap: &str, group: &str, topic: &str) -> i64 {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let started = Instant::now();
    loop {
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.into())))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_indexes(vec![0])]));
        let r = connect(bootstrap).send(&req, 3).expect("OffsetFetch");
        // COORDINATOR_LOAD_IN_PROGRESS while the coordinator replays its partition.
        if r.error_code == 14 && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        assert_eq!(r.error_code, 0, "{r:?}");
        return r.topics[0].partitions[0].committed_offset;
    }
}

#[test]
fn committed_offsets_survive_the_compaction_of_consumer_offsets_and_a_restart() {
    let mut broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    mirror_support::create_topic(&b, "orders", 1);
    let mut conn = connect(&b);
    for offset in 1..=1500 {
        commit(&mut conn, "g1", "orders", offset);
        if offset % 3 == 0 {
            commit(&mut conn, "g2", "orders", offset);
        }
    }
    wait_compacted(&broker, "__consumer_offsets", 0.5);
    assert_eq!(committed(&b, "g1", "orders"), 1500);
    assert_eq!(committed(&b, "g2", "orders"), 1500);
    // The coordinator loads the compacted partition after a crash.
    broker.restart_kill9();
    let b = broker.bootstrap();
    assert_eq!(committed(&b, "g1", "orders"), 1500);
    assert_eq!(committed(&b, "g2", "orders"), 1500);
    broker.assert_healthy();
}

/// Key -> (offset, value) of its latest record.
type Table = BTreeMap<Vec<u8>, (i64, Option<Vec<u8>>)>;

/// The latest value per key of a partition, read with consumer Fetches.
fn table_of(bootstrap: &str, topic: &str) -> Table {
    let mut table = BTreeMap::new();
    for batch in read_log(bootstrap, topic, 0) {
        if batch.is_control() {
            continue;
        }
        let base = batch.base_offset().0;
        for r in dataplane::wire::records::batch_records(&batch).expect("records") {
            let key = r.key.map(|k| k.to_vec()).unwrap_or_default();
            table.insert(
                key,
                (
                    base + i64::from(r.offset_delta),
                    r.value.map(|v| v.to_vec()),
                ),
            );
        }
    }
    table
}

/// `rounds` batches of 10 keyed records (40 keys) to `topic`-0.
fn produce_keyed(bootstrap: &str, topic: &str, rounds: usize) {
    for round in 0..rounds {
        let mut body = Vec::new();
        for i in 0..10 {
            let key = format!("user-{}", (round * 10 + i) % 40);
            let value = format!("v{round}-{i}-{}", "p".repeat(60));
            dataplane::wire::records::encode_record(
                &mut body,
                i as i32,
                0,
                Some(key.as_bytes()),
                Some(value.as_bytes()),
            );
        }
        let batch = dataplane::wire::batch::BatchBuilder {
            last_offset_delta: 9,
            record_count: 10,
            base_timestamp: support::base_timestamp_ms(),
            max_timestamp: support::base_timestamp_ms(),
            ..dataplane::wire::batch::BatchBuilder::default()
        }
        .build(&body);
        support::produce_raw(bootstrap, topic, 0, batch);
    }
}

/// Creates `topic` (one partition) with these configs.
fn create_with_configs(bootstrap: &str, topic: &str, configs: &[(&str, &str)]) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let cfg = |(k, v): &(&str, &str)| {
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(k.to_string()))
            .with_value(Some(StrBytes::from_string(v.to_string())))
    };
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(configs.iter().map(cfg).collect())]);
    let r = connect(bootstrap).send(&req, 5).expect("CreateTopics");
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
}

/// A broker killed at each step of a cleaner swap (a fail point aborts the process
/// there) comes back with the same table and end offset: nothing lost, nothing twice.
#[test]
fn a_crash_at_each_step_of_a_cleaner_swap_loses_and_duplicates_nothing() {
    const POINTS: [&str; 4] = [
        "cleaner.swap.after_range",
        "cleaner.swap.after_swap_files",
        "cleaner.swap.after_old_deleted",
        "cleaner.swap.after_rename",
    ];
    let mut broker = Broker::start(&format!("{CONFIG}\"log.cleaner.enable\" = false\n"));
    let b = broker.bootstrap();
    for i in 0..POINTS.len() {
        let topic = format!("swap-{i}");
        create_with_configs(
            &b,
            &topic,
            &[
                ("cleanup.policy", "compact"),
                ("segment.bytes", "4096"),
                ("min.cleanable.dirty.ratio", "0.01"),
            ],
        );
        produce_keyed(&b, &topic, 60);
    }
    let before: Vec<Table> = (0..POINTS.len())
        .map(|i| table_of(&b, &format!("swap-{i}")))
        .collect();
    for point in POINTS {
        // The cleaner, now on, reaches the point on its first swap and aborts the broker.
        broker.stop_term();
        broker.set_config(CONFIG);
        broker.set_fail_points(&[point]);
        broker.restart_after_stop();
        let status = broker.wait_exit(Duration::from_secs(60));
        assert!(!status.success(), "{point}: the fail point aborts");
        assert!(broker.log_tail(20).contains(point), "{point}: reached");
        broker.set_fail_points(&[]);
        broker.set_config(&format!("{CONFIG}\"log.cleaner.enable\" = false\n"));
        broker.restart_after_stop();
        assert!(
            broker
                .log_tail(100)
                .contains("finished an interrupted cleaner swap"),
            "{point}: recovery finished the swap\n{}",
            broker.log_tail(100)
        );
        // Whichever partition the cleaner was swapping: every one reads as before.
        for (j, expected) in before.iter().enumerate() {
            let topic = format!("swap-{j}");
            let after = table_of(&broker.bootstrap(), &topic);
            assert_eq!(&after, expected, "{point}: {topic} after recovery");
            let offsets: Vec<i64> = read_log(&broker.bootstrap(), &topic, 0)
                .iter()
                .flat_map(|b| b.base_offset().0..=b.last_offset().0)
                .collect();
            assert!(
                offsets.windows(2).all(|w| w[0] < w[1]),
                "{point}: {topic}: no offset twice"
            );
            assert!(
                !broker
                    .data_dir()
                    .join(format!("{topic}-0"))
                    .join("cleaning")
                    .exists(),
                "{point}: recovery removed the cleaner's leftovers"
            );
        }
    }
    // The fail points' own ERROR lines, and no other.
    let (_, _, panicked) = broker.log_problems();
    assert!(!panicked, "{}", broker.log_tail(60));
    let errors = broker.unexpected_errors("fail point reached");
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn a_mirrored_compacted_topic_outlives_its_retention_and_matches_the_source() {
    // The source keeps every record (its cleaner is off), so what the destination
    // compacts, it compacts by itself.
    let source = Broker::start(&format!("{CONFIG}\"log.cleaner.enable\" = false\n"));
    let dest = Broker::start(CONFIG);
    let topic = "profiles";
    let s = source.bootstrap();
    // retention.ms is short, but the policy is compact alone: nothing expires.
    create_with_configs(
        &s,
        topic,
        &[
            ("cleanup.policy", "compact"),
            ("retention.ms", "1000"),
            ("segment.bytes", "4096"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    // 40 keys, 25 values each, written in batches of 10.
    produce_keyed(&s, topic, 100);
    let expected = table_of(&s, topic);
    assert_eq!(expected.len(), 40);
    let r = create_mirror(&dest.bootstrap(), "dr", &s, &[]);
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = add_topics(&dest.bootstrap(), "dr", &[topic]);
    assert_eq!(r.error_code, 0, "{r:?}");
    // The copy is created with the source's configs, before the first metadata sync:
    // its first records already land in 4 KiB segments the cleaner can take.
    let configs = describe_topic_configs(&dest.bootstrap(), topic);
    for (key, value) in [("cleanup.policy", "compact"), ("segment.bytes", "4096")] {
        assert_eq!(configs.get(key).map(String::as_str), Some(value), "{key}");
    }
    let ends = BTreeMap::from([((topic.to_string(), 0), 1000i64)]);
    wait_for(
        &dest.bootstrap(),
        "dr",
        "catch-up",
        Duration::from_secs(60),
        |d| caught_up(d, &ends),
    );
    // The destination's cleaner compacts its copy; then retention.ms passes several
    // times over, with retention checks every second.
    wait_compacted(&dest, topic, 0.5);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        log_bytes(&dest.data_dir(), topic) < log_bytes(&source.data_dir(), topic) / 2,
        "the destination compacted its own copy"
    );
    let copy = table_of(&dest.bootstrap(), topic);
    assert_eq!(copy.len(), 40, "every key is still on the destination");
    assert_eq!(
        copy, expected,
        "the destination matches the source key for key, offsets and values"
    );
    // The destination cleaned its own copy: its surviving records keep their offsets.
    let offsets: Vec<i64> = read_log(&dest.bootstrap(), topic, 0)
        .iter()
        .map(|b| b.base_offset().0)
        .collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    // A source that compacted before the copy: its batches have offset gaps, which the
    // destination keeps as they are.
    let compacting = Broker::start(CONFIG);
    let c = compacting.bootstrap();
    create_with_configs(
        &c,
        "sessions",
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "4096"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    produce_keyed(&c, "sessions", 100);
    wait_compacted(&compacting, "sessions", 0.5);
    let gapped = table_of(&c, "sessions");
    let source_batches: Vec<(i64, i64)> = read_log(&c, "sessions", 0)
        .iter()
        .map(|b| (b.base_offset().0, b.last_offset().0))
        .collect();
    assert!(
        source_batches[0].0 > 0 || source_batches.windows(2).any(|w| w[1].0 > w[0].1 + 1),
        "the source log has gaps: {source_batches:?}"
    );
    let r = create_mirror(&dest.bootstrap(), "dr2", &c, &[]);
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = add_topics(&dest.bootstrap(), "dr2", &["sessions"]);
    assert_eq!(r.error_code, 0, "{r:?}");
    let ends = BTreeMap::from([(("sessions".to_string(), 0), 1000i64)]);
    wait_for(
        &dest.bootstrap(),
        "dr2",
        "catch-up",
        Duration::from_secs(60),
        |d| caught_up(d, &ends),
    );
    assert_eq!(
        table_of(&dest.bootstrap(), "sessions"),
        gapped,
        "the gapped copy matches"
    );
    compacting.assert_healthy();
    source.assert_healthy();
    dest.assert_healthy();
}
