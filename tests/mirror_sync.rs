//! The mirror metadata sync (issue 7) end to end: real Twinlog processes on loopback,
//! confluent-kafka consumer groups, admin requests over the project's blocking client.
//! Every mirror here refreshes every second (`mirror.metadata.refresh.interval.ms`).

mod mirror_support;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use dataplane::wire::mirror::{DescribedMirror, MirrorSyncStatus};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, DeleteTopicsRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    GroupId, IncrementalAlterConfigsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use mirror_support::*;
use support::*;

const BROKER_CONFIG: &str = r#"
"mirror.state.topic.num.partitions" = 3
"offsets.topic.num.partitions" = 3
"num.partitions" = 1
"transaction.state.log.num.partitions" = 3
"mirror.failed.retry.initial.backoff.ms" = 200
"group.initial.rebalance.delay.ms" = 0
"#;

/// Every mirror of these tests syncs once a second.
const REFRESH: (&str, &str) = ("mirror.metadata.refresh.interval.ms", "1000");
/// Long enough for several refreshes.
const SYNC_TIMEOUT: Duration = Duration::from_secs(20);

const RESOURCE_TOPIC: i8 = 2;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn create_partitions(bootstrap: &str, topic: &str, count: i32) {
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(s(topic)))
            .with_count(count)
            .with_assignments(None)])
        .with_timeout_ms(10_000);
    let r = connect(bootstrap).send(&req, 3).expect("CreatePartitions");
    assert_eq!(r.results[0].error_code, 0, "grow {topic}: {r:?}");
}

fn delete_topic(bootstrap: &str, topic: &str) {
    let req = DeleteTopicsRequest::default()
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(TopicName(s(topic))))
        ])
        .with_timeout_ms(10_000);
    let r = connect(bootstrap).send(&req, 6).expect("DeleteTopics");
    assert_eq!(r.responses[0].error_code, 0, "delete {topic}: {r:?}");
}

/// IncrementalAlterConfigs v1 of one topic: `Some` sets, `None` deletes.
fn alter_topic(bootstrap: &str, topic: &str, ops: &[(&str, Option<&str>)]) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(s(topic))
            .with_configs(
                ops.iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(s(k))
                            .with_config_operation(if v.is_some() { OP_SET } else { OP_DELETE })
                            .with_value(v.map(s))
                    })
                    .collect(),
            ),
    ]);
    let r = connect(bootstrap)
        .send(&req, 1)
        .expect("IncrementalAlterConfigs");
    assert_eq!(r.responses[0].error_code, 0, "alter {topic}: {r:?}");
}

/// The configs of a topic set on the topic itself (DescribeConfigs v4).
fn explicit_configs(bootstrap: &str, topic: &str) -> BTreeMap<String, String> {
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(s(topic))
            .with_configuration_keys(None)]);
    let r = connect(bootstrap).send(&req, 4).expect("DescribeConfigs");
    let result = &r.results[0];
    assert_eq!(result.error_code, 0, "describe {topic}: {r:?}");
    result
        .configs
        .iter()
        .filter(|c| c.config_source == DYNAMIC_TOPIC_CONFIG)
        .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
        .collect()
}

/// Committed offsets of `group` on `topic` (OffsetFetch v7); partitions without one are
/// left out.
fn committed(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes((0..partitions).collect())]));
    let r = connect(bootstrap).send(&req, 7).expect("OffsetFetch");
    assert_eq!(r.error_code, 0, "offset fetch {group}: {r:?}");
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter(|p| p.error_code == 0 && p.committed_offset >= 0)
        .map(|p| (p.partition_index, p.committed_offset))
        .collect()
}

/// Kafka's "simple" commit (generation -1, no member) of `offsets` for `group`.
fn simple_commit(bootstrap: &str, group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(
                offsets
                    .iter()
                    .map(|(p, o)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(*p)
                            .with_committed_offset(*o)
                            .with_committed_leader_epoch(-1)
                    })
                    .collect(),
            )]);
    let r = connect(bootstrap).send(&req, 7).expect("OffsetCommit");
    for p in &r.topics[0].partitions {
        assert_eq!(p.error_code, 0, "commit {group}: {r:?}");
    }
}

/// (state, member count) of a group (DescribeGroups v5).
fn group_state(bootstrap: &str, group: &str) -> (String, usize) {
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
    let r = connect(bootstrap).send(&req, 5).expect("DescribeGroups");
    let g = &r.groups[0];
    (g.group_state.to_string(), g.members.len())
}

/// The cluster id a broker reports in Metadata v12.
fn cluster_id(bootstrap: &str) -> String {
    let r = connect(bootstrap)
        .send(
            &MetadataRequest::default().with_topics(Some(Vec::new())),
            12,
        )
        .expect("metadata");
    r.cluster_id.expect("cluster id").to_string()
}

/// Polls `check` every 200 ms until it returns `Some`, or panics after `timeout`.
fn wait_until<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            eprintln!("[test] {what} after {:?}", start.elapsed());
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One sync step of a described mirror.
fn step(d: &DescribedMirror, name: &str) -> MirrorSyncStatus {
    d.sync
        .iter()
        .find(|s| s.step == name)
        .cloned()
        .unwrap_or_else(|| panic!("no sync step {name} in {:?}", d.sync))
}

fn produce(py: &std::path::Path, broker: &Broker, topic: &str, partitions: i32, count: usize) {
    produce_with_prefix(
        py,
        broker,
        topic,
        partitions,
        count,
        &format!("{topic}{partitions}"),
    );
}

fn produce_with_prefix(
    py: &std::path::Path,
    broker: &Broker,
    topic: &str,
    partitions: i32,
    count: usize,
    prefix: &str,
) {
    let (p, n) = (partitions.to_string(), count.to_string());
    let out = run_python(
        py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &broker.bootstrap(),
            "--topic",
            topic,
            "--partitions",
            &p,
            "--count",
            &n,
            "--prefix",
            prefix,
        ],
        Duration::from_secs(120),
    );
    assert_success(&out, broker);
}

fn log_ends(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<(String, i32), i64> {
    (0..partitions)
        .map(|p| {
            let end = read_log(bootstrap, topic, p)
                .last()
                .map_or(0, |b| b.next_offset().0);
            ((topic.to_string(), p), end)
        })
        .collect()
}

/// A mirror `m` of `source` on `dest` with the given extra configs and topics, waited
/// until every partition has caught up.
fn mirror_and_catch_up(
    dest: &Broker,
    source: &Broker,
    extra: &[(&str, &str)],
    topics: &[(&str, i32)],
) {
    let r = create_mirror(&dest.bootstrap(), "m", &source.bootstrap(), extra);
    assert_eq!(r.error_code, 0, "create mirror: {r:?}");
    let names: Vec<&str> = topics.iter().map(|(t, _)| *t).collect();
    let r = add_topics(&dest.bootstrap(), "m", &names);
    assert_eq!(r.error_code, 0, "add topics: {r:?}\n{}", dest.log_tail(40));
    let mut ends = BTreeMap::new();
    for (t, n) in topics {
        ends.extend(log_ends(&source.bootstrap(), t, *n));
    }
    wait_for(
        &dest.bootstrap(),
        "m",
        "catch-up",
        Duration::from_secs(60),
        |d| caught_up(d, &ends),
    );
}

fn read_keys(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

fn python_or_skip(test: &str) -> Option<std::path::PathBuf> {
    let py = venv_python();
    if skip_if(missing_python_modules(&py, &["confluent_kafka"]), test) {
        return None;
    }
    Some(py)
}

/// `retention.ms` and `cleanup.policy` set on the source reach the destination within a
/// few refreshes; excluded keys (a default one and one from the mirror's
/// `topic.properties.exclude`) do not; a config removed on the source is removed here.
/// DescribeMirrors and `twinlog mirror describe` report the steps.
#[test]
fn topic_configs_follow_the_source_except_excluded_keys() {
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    create_topic(&a.bootstrap(), "cfg", 2);
    // Set before the mirror exists: the first run copies it.
    alter_topic(&a.bootstrap(), "cfg", &[("segment.ms", Some("600000"))]);
    mirror_and_catch_up(
        &b,
        &a,
        &[REFRESH, ("topic.properties.exclude", "retention.bytes")],
        &[("cfg", 2)],
    );

    alter_topic(
        &a.bootstrap(),
        "cfg",
        &[
            ("retention.ms", Some("3600000")),
            ("cleanup.policy", Some("compact")),
            ("retention.bytes", Some("1048576")),
            ("min.insync.replicas", Some("1")),
        ],
    );
    let source_cleanup = explicit_configs(&a.bootstrap(), "cfg")
        .get("cleanup.policy")
        .cloned();
    assert_eq!(
        source_cleanup.as_deref(),
        Some("compact"),
        "the source reports what was set"
    );
    let synced = wait_until(
        "retention.ms and cleanup.policy on the destination",
        SYNC_TIMEOUT,
        || {
            let c = explicit_configs(&b.bootstrap(), "cfg");
            (c.get("retention.ms").map(String::as_str) == Some("3600000")
                && c.get("cleanup.policy") == source_cleanup.as_ref())
            .then_some(c)
        },
    );
    assert_eq!(synced.get("segment.ms").map(String::as_str), Some("600000"));
    // Two more refreshes: excluded keys are still not set here.
    std::thread::sleep(Duration::from_millis(2500));
    let c = explicit_configs(&b.bootstrap(), "cfg");
    assert!(
        !c.contains_key("retention.bytes"),
        "mirror exclude list: {c:?}"
    );
    assert!(
        !c.contains_key("min.insync.replicas"),
        "default exclude list: {c:?}"
    );
    assert_eq!(c.get("mirror.name").map(String::as_str), Some("m"), "{c:?}");

    // A config the source no longer sets goes back to the default here.
    alter_topic(&a.bootstrap(), "cfg", &[("retention.ms", None)]);
    wait_until(
        "retention.ms removed on the destination",
        SYNC_TIMEOUT,
        || {
            let c = explicit_configs(&b.bootstrap(), "cfg");
            (!c.contains_key("retention.ms") && c.contains_key("cleanup.policy")).then_some(())
        },
    );

    let d = describe(&b.bootstrap(), "m");
    let names: Vec<&str> = d.sync.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(
        names,
        [
            "cluster-id",
            "topic-configs",
            "partitions",
            "deleted-topics",
            "group-offsets",
            "topic-discovery",
            "acls"
        ]
    );
    for s in &d.sync {
        assert!(s.last_success_ms > 0, "{s:?}");
        assert_eq!(s.last_error, None, "{s:?}");
    }

    let cli = |args: &[&str]| {
        let out = run_command(
            std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"))
                .args(["mirror", "describe", "m", "--bootstrap-server"])
                .arg(b.bootstrap())
                .args(args),
            None,
            Duration::from_secs(30),
        );
        assert!(out.success(), "{}", out.describe());
        out.stdout
    };
    let text = cli(&[]);
    for step in &names {
        assert!(
            text.contains(&format!("mirror m sync {step}: last success ")),
            "{text}"
        );
    }
    let json = cli(&["--json"]);
    assert!(
        json.contains("\"sync\":[{\"step\":\"cluster-id\",\"last_success_ms\":"),
        "{json}"
    );
}

/// A confluent-kafka group consumes half of an 8-partition topic on the source and
/// commits; the sync copies its offsets; after failover the same group on the
/// destination reads exactly the other half: no duplicate, no gap.
#[test]
fn a_group_resumes_on_the_destination_at_the_next_record_after_failover() {
    let Some(py) = python_or_skip("a_group_resumes_on_the_destination") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let topic = "orders";
    create_topic(&a.bootstrap(), topic, 8);
    // Eight rounds: several batches per partition, so that a consumer fetching one batch
    // per partition at a time stops half-way through most partitions.
    for round in 0..8 {
        produce_with_prefix(&py, &a, topic, 8, 500, &format!("round{round}"));
    }
    mirror_and_catch_up(&b, &a, &[REFRESH], &[(topic, 8)]);

    let half_keys = a.dir().join("half.keys");
    let out = run_python(
        &py,
        "sync_group.py",
        &[
            "consume-half",
            "--bootstrap",
            &a.bootstrap(),
            "--topic",
            topic,
            "--group",
            "app",
            "--count",
            "2000",
            "--partition-fetch-bytes",
            "1024",
            "--keys-out",
            half_keys.to_str().expect("utf-8 path"),
        ],
        Duration::from_secs(120),
    );
    assert_success(&out, &a);
    let on_source = committed(&a.bootstrap(), "app", topic, 8);
    assert_eq!(
        on_source.values().sum::<i64>(),
        2000,
        "offsets start at 0 and the group consumed 2000 records: {on_source:?}"
    );
    let partial = on_source.values().filter(|o| **o > 0 && **o < 500).count();
    assert!(
        partial >= 4,
        "most partitions are consumed half-way: {on_source:?}"
    );
    let started = Instant::now();
    wait_until(
        "the group's offsets on the destination",
        SYNC_TIMEOUT,
        || (committed(&b.bootstrap(), "app", topic, 8) == on_source).then_some(()),
    );
    eprintln!(
        "[test] offsets synced {:?} after the commit",
        started.elapsed()
    );
    assert_eq!(
        step(&describe(&b.bootstrap(), "m"), "group-offsets").last_error,
        None
    );

    let r = remove_topics(&b.bootstrap(), "m", &[topic]);
    assert_eq!(r.error_code, 0, "remove: {r:?}");
    wait_for(
        &b.bootstrap(),
        "m",
        "STOPPED",
        Duration::from_secs(60),
        |d| all_in(d, "STOPPED"),
    );
    // Failed over: the source's later commits no longer reach the destination.
    simple_commit(&a.bootstrap(), "app", topic, &[(0, 0)]);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(committed(&b.bootstrap(), "app", topic, 8), on_source);

    let rest_keys = b.dir().join("rest.keys");
    let out = run_python(
        &py,
        "sync_group.py",
        &[
            "consume-rest",
            "--bootstrap",
            &b.bootstrap(),
            "--topic",
            topic,
            "--group",
            "app",
            "--partitions",
            "8",
            "--keys-out",
            rest_keys.to_str().expect("utf-8 path"),
        ],
        Duration::from_secs(120),
    );
    assert_success(&out, &b);
    let half = read_keys(&half_keys);
    let rest = read_keys(&rest_keys);
    let half_set: BTreeSet<&String> = half.iter().collect();
    let rest_set: BTreeSet<&String> = rest.iter().collect();
    assert_eq!(half_set.len(), half.len(), "duplicates in the first half");
    assert_eq!(rest_set.len(), rest.len(), "duplicates after failover");
    let both: Vec<&&String> = half_set.intersection(&rest_set).take(5).collect();
    assert!(both.is_empty(), "read twice: {both:?}");
    assert_eq!(half.len() + rest.len(), 4000, "no gap: {}", out.stdout);
}

/// A group with an active member on the destination keeps its own offsets while the
/// source's differ; an idle group is synced meanwhile; an excluded group never is. Once
/// the member leaves, the group follows the source.
#[test]
fn an_active_destination_group_is_never_overwritten() {
    let Some(py) = python_or_skip("an_active_destination_group_is_never_overwritten") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let topic = "clicks";
    create_topic(&a.bootstrap(), topic, 4);
    produce(&py, &a, topic, 4, 400);
    mirror_and_catch_up(
        &b,
        &a,
        &[REFRESH, ("groups.exclude", "skip-.*")],
        &[(topic, 4)],
    );

    let stop = b.dir().join("hold.stop");
    let mut hold = spawn_python(
        &py,
        "sync_group.py",
        &[
            "hold",
            "--bootstrap",
            &b.bootstrap(),
            "--topic",
            topic,
            "--group",
            "busy",
            "--partitions",
            "4",
            "--commit-offset",
            "1",
            "--stop-file",
            stop.to_str().expect("utf-8 path"),
        ],
        b.dir(),
        "hold",
    );
    let ones: BTreeMap<i32, i64> = (0..4).map(|p| (p, 1)).collect();
    wait_until(
        "an active member with its own offsets",
        Duration::from_secs(60),
        || {
            let (state, members) = group_state(&b.bootstrap(), "busy");
            (state == "Stable"
                && members == 1
                && committed(&b.bootstrap(), "busy", topic, 4) == ones)
                .then_some(())
        },
    );

    let all = |o: i64| -> Vec<(i32, i64)> { (0..4).map(|p| (p, o)).collect() };
    simple_commit(&a.bootstrap(), "busy", topic, &all(50));
    simple_commit(&a.bootstrap(), "idle", topic, &all(70));
    simple_commit(&a.bootstrap(), "skip-me", topic, &all(80));
    let seventy: BTreeMap<i32, i64> = all(70).into_iter().collect();
    wait_until("the idle group synced", SYNC_TIMEOUT, || {
        (committed(&b.bootstrap(), "idle", topic, 4) == seventy).then_some(())
    });
    // Two more refreshes.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(committed(&b.bootstrap(), "busy", topic, 4), ones);
    assert_eq!(
        group_state(&b.bootstrap(), "busy"),
        ("Stable".to_string(), 1)
    );
    assert!(committed(&b.bootstrap(), "skip-me", topic, 4).is_empty());
    assert_eq!(
        step(&describe(&b.bootstrap(), "m"), "group-offsets").last_error,
        None
    );

    // The member leaves: the group is Empty and follows the source (forward from 1).
    std::fs::write(&stop, b"").expect("stop file");
    let status = wait_child(&mut hold, Duration::from_secs(60));
    assert!(
        status.is_some_and(|s| s.success()),
        "hold exited with {status:?}: {}",
        std::fs::read_to_string(b.dir().join("hold.stderr")).unwrap_or_default()
    );
    let fifty: BTreeMap<i32, i64> = all(50).into_iter().collect();
    wait_until(
        "the group follows the source once empty",
        SYNC_TIMEOUT,
        || (committed(&b.bootstrap(), "busy", topic, 4) == fifty).then_some(()),
    );
}

/// Partitions added on the source appear on the destination and mirror byte-identically.
#[test]
fn partitions_added_on_the_source_are_created_and_mirrored() {
    let Some(py) = python_or_skip("partitions_added_on_the_source") else {
        return;
    };
    let a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    let topic = "grow";
    create_topic(&a.bootstrap(), topic, 2);
    produce(&py, &a, topic, 2, 200);
    mirror_and_catch_up(&b, &a, &[REFRESH], &[(topic, 2)]);

    create_partitions(&a.bootstrap(), topic, 5);
    produce(&py, &a, topic, 5, 500);
    let ends = log_ends(&a.bootstrap(), topic, 5);
    assert!(ends.values().all(|e| *e > 0), "{ends:?}");
    let started = Instant::now();
    wait_for(
        &b.bootstrap(),
        "m",
        "5 partitions caught up",
        Duration::from_secs(60),
        |d| caught_up(d, &ends),
    );
    eprintln!("[test] new partitions caught up in {:?}", started.elapsed());
    assert_eq!(
        topic_id(&a.bootstrap(), topic),
        topic_id(&b.bootstrap(), topic)
    );
    for p in 0..5 {
        let left = read_log(&a.bootstrap(), topic, p);
        let right = read_log(&b.bootstrap(), topic, p);
        assert_eq!(left.len(), right.len(), "{topic}-{p}: batch counts differ");
        for (x, y) in left.iter().zip(&right) {
            assert_eq!(x.as_bytes(), y.as_bytes(), "{topic}-{p}: batches differ");
        }
    }
    let d = describe(&b.bootstrap(), "m");
    assert_eq!(step(&d, "partitions").last_error, None);
    assert!(step(&d, "partitions").last_success_ms > 0);
}

/// A deleted source topic fails its partitions (non-retryable) and leaves the others
/// mirroring; a source restarted with a new cluster id fails the whole mirror.
#[test]
fn a_deleted_source_topic_and_a_new_source_cluster_id_fail_the_mirror() {
    let Some(py) = python_or_skip("a_deleted_source_topic_and_a_new_source_cluster_id") else {
        return;
    };
    let mut a = Broker::start(BROKER_CONFIG);
    let b = Broker::start(BROKER_CONFIG);
    create_topic(&a.bootstrap(), "doomed", 2);
    create_topic(&a.bootstrap(), "kept", 2);
    produce(&py, &a, "doomed", 2, 100);
    produce(&py, &a, "kept", 2, 100);
    mirror_and_catch_up(&b, &a, &[REFRESH], &[("doomed", 2), ("kept", 2)]);

    delete_topic(&a.bootstrap(), "doomed");
    let message = "source topic doomed was deleted";
    let d = wait_for(&b.bootstrap(), "m", "doomed FAILED", SYNC_TIMEOUT, |d| {
        let p = partitions(d);
        (0..2).all(|i| {
            p.get(&("doomed".to_string(), i)).is_some_and(|p| {
                p.state == "FAILED"
                    && p.retry_attempt == -1
                    && p.error_message.as_deref() == Some(message)
            })
        })
    });
    let p = partitions(&d);
    for i in 0..2 {
        assert_eq!(p[&("kept".to_string(), i)].state, "MIRRORING", "{d:#?}");
    }
    assert_eq!(
        step(&d, "deleted-topics").last_error.as_deref(),
        Some(message)
    );

    let old_id = cluster_id(&a.bootstrap());
    a.stop_term();
    std::fs::remove_file(a.data_dir().join("meta.properties")).expect("remove meta.properties");
    a.restart_after_stop();
    let new_id = cluster_id(&a.bootstrap());
    assert_ne!(old_id, new_id);
    wait_for(
        &b.bootstrap(),
        "m",
        "kept FAILED after the cluster id changed",
        SYNC_TIMEOUT,
        |d| {
            let p = partitions(d);
            (0..2).all(|i| {
                p.get(&("kept".to_string(), i)).is_some_and(|p| {
                    p.state == "FAILED"
                        && p.retry_attempt == -1
                        && p.error_message
                            .as_deref()
                            .is_some_and(|m| m.contains(&new_id) && m.contains(&old_id))
                })
            })
        },
    );
    let expected = format!("source cluster id changed from {old_id} to {new_id}");
    let d = wait_for(
        &b.bootstrap(),
        "m",
        "cluster-id step error",
        SYNC_TIMEOUT,
        |d| step(d, "cluster-id").last_error.as_deref() == Some(expected.as_str()),
    );
    assert!(
        step(&d, "topic-configs")
            .last_error
            .is_some_and(|e| e.starts_with("skipped")),
        "{:?}",
        d.sync
    );
    // Non-retryable: still FAILED two refreshes later.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(all_in(&describe(&b.bootstrap(), "m"), "FAILED"), "{d:#?}");
}
