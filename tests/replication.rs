//! A three-node cluster (`process.roles = broker,controller`, one metadata quorum), each
//! node in a network namespace of its own (`support::netns`; loopback and SIGSTOP where
//! namespaces cannot be made), with replication factor 3:
//!
//! * the leader of a partition is SIGKILLed during acks=all idempotent production
//!   (librdkafka): the producer moves to the new leader, every acknowledged record is
//!   there exactly once at its acknowledged offset, nothing is duplicated, and once the
//!   killed node is back and in sync every replica's log is byte-identical;
//! * a follower cut off from the network leaves the ISR (`replica.lag.time.max.ms`), so
//!   acks=all with `min.insync.replicas = 3` is refused with NOT_ENOUGH_REPLICAS while
//!   acks=1 goes on; healed, it catches up, rejoins, and acks=all works again;
//! * the active controller cut off: the other two elect a new one and admin requests go
//!   on; healed, the old one follows the new metadata (`kafka-metadata-quorum describe`
//!   names the leader and the voters first);
//! * a rolling restart (SIGTERM, so each node moves its leaderships away first) of all
//!   three nodes under acks=all load loses no acknowledged record;
//! * a cluster of one node (the quorum's only voter) grows to three: two broker-only
//!   nodes join as the quorum's learners (`kafka-metadata-quorum` lists them as
//!   observers), `kafka-reassign-partitions` moves every partition onto all three while
//!   the Java producer runs, `kafka-leader-election` gives the partitions back to their
//!   preferred leaders, and a killed broker-only node is fenced like any other;
//! * a controller-only node (no client listener, no replicas) runs the quorum of two
//!   broker-only nodes: Metadata lists the brokers alone and names one of them as the
//!   controller, replication and failover work as with combined nodes.
//!
//! Run alone: `cargo test -p twinlog --test replication` (as root for namespaces).

mod support;

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use support::cluster::*;
use support::netns::Net;
use support::{
    assert_success, missing_python_modules, run_python, skip_if, spawn_python, venv_python,
    wait_child, Broker,
};

fn s(x: impl ToString) -> String {
    x.to_string()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn read_logs(dir: &Path, name: &str) -> String {
    let out = std::fs::read_to_string(dir.join(format!("{name}.stdout"))).unwrap_or_default();
    let err = std::fs::read_to_string(dir.join(format!("{name}.stderr"))).unwrap_or_default();
    let tail: Vec<&str> = err.lines().rev().take(40).collect();
    format!(
        "----- {name} stdout -----\n{out}\n----- {name} stderr (tail) -----\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
}

#[test]
fn a_leader_killed_during_acks_all_production_loses_and_duplicates_nothing() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "leader failover",
    ) {
        return;
    }
    let net = Net::new(3);
    let mut nodes = start_cluster(&net, "\"min.insync.replicas\" = 2\n");
    let topic = "failover";
    create_topic(&nodes, topic, 3, &[]);
    let first = nodes[0].as_ref().expect("node 0");
    let before = wait_isr(first, topic, 3, 3);
    let dir = tempfile::tempdir().expect("tempdir");
    let acks = dir.path().join("acks");
    let total = 30_000u32;
    let mut producer = spawn_producer(&py, &nodes, topic, total, 4000, &acks, dir.path());
    // The Java producer on a topic of its own, through the same failover.
    let java = support::kafka::missing_kafka().is_none();
    let java_acks = dir.path().join("java-acks");
    let java_topic = "failover-java";
    let java_total = 6_000u32;
    let mut java_producer = java.then(|| {
        create_topic(&nodes, java_topic, 3, &[]);
        wait_isr(first, java_topic, 3, 3);
        spawn_java_producer(&nodes, java_topic, java_total, 800, &java_acks, dir.path())
    });
    let started = Instant::now();
    while count_lines(&acks) < 2_000 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no acknowledgements\n{}",
            read_logs(dir.path(), "producer")
        );
        if let Ok(Some(st)) = producer.try_wait() {
            panic!(
                "producer exited with {st}\n{}",
                read_logs(dir.path(), "producer")
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
    // SIGKILL the leader of partition 0 mid-stream.
    let victim = before[&0].0 as usize;
    let at_kill = count_lines(&acks);
    let killed_at = Instant::now();
    nodes[victim].as_mut().expect("victim").kill9();
    eprintln!("[replication] SIGKILL of node {victim} (leader of {topic}-0) after {at_kill} acknowledgements");
    // A new leader from the ISR, at a higher epoch, on the survivors.
    let survivor = (0..3).find(|i| *i != victim).expect("survivor");
    let moved = {
        let n = nodes[survivor].as_ref().expect("survivor");
        let started = Instant::now();
        loop {
            let l = leaders(n, topic);
            if l.get(&0)
                .is_some_and(|(leader, _)| *leader >= 0 && *leader != victim as i32)
            {
                break l;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no new leader for {topic}-0: {l:?}\n{}",
                n.log_tail(40)
            );
            thread::sleep(Duration::from_millis(50));
        }
    };
    eprintln!(
        "[replication] {topic}-0 led by node {} {:?} after the SIGKILL",
        moved[&0].0,
        killed_at.elapsed()
    );
    let status = wait_child(&mut producer, Duration::from_secs(170));
    let acked = count_lines(&acks);
    assert!(
        status.is_some_and(|s| s.success()),
        "the producer did not get every record acknowledged across the failover ({acked} of {total}):\n{}",
        read_logs(dir.path(), "producer")
    );
    if let Some(mut jp) = java_producer.take() {
        wait_java_producer(&mut jp, dir.path(), "the failover");
    }
    // The killed node comes back, catches up and rejoins every ISR.
    nodes[victim].as_mut().expect("victim").restart_after_stop();
    wait_isr(nodes[victim].as_ref().expect("victim"), topic, 3, 3);
    if java {
        wait_isr(nodes[victim].as_ref().expect("victim"), java_topic, 3, 3);
        check_java(
            &nodes,
            java_topic,
            java_total,
            &java_acks,
            "after the failover",
        );
        assert_replicas_identical(&nodes, java_topic, 3);
    }
    let out = check_acknowledged(&py, &nodes, topic, total, &acks);
    assert_success(&out, nodes[survivor].as_ref().expect("survivor"));
    assert_replicas_identical(&nodes, topic, 3);
    for n in nodes.iter().flatten() {
        n.assert_healthy();
    }
}

/// librdkafka (confluent-kafka) producing records 0..`total` of `topic` (3 partitions)
/// at `rate` records/s, idempotent with acks=all, acknowledgements into `acks`.
fn spawn_producer(
    py: &Path,
    nodes: &[Option<Broker>],
    topic: &str,
    total: u32,
    rate: u32,
    acks: &Path,
    dir: &Path,
) -> std::process::Child {
    let a = [
        s("--bootstrap"),
        bootstrap_all(nodes),
        s("--topic"),
        s(topic),
        s("--count"),
        s(total),
        s("--partitions"),
        s("3"),
        s("--ack-file"),
        acks.display().to_string(),
        s("--rate"),
        s(rate),
        s("--timeout"),
        s("150"),
    ];
    spawn_python(py, "ck_produce.py", &args(&a), dir, "producer")
}

/// librdkafka reads `topic` back: records 0..`total`, each once, every acknowledged
/// one at its offset.
fn check_acknowledged(
    py: &Path,
    nodes: &[Option<Broker>],
    topic: &str,
    total: u32,
    acks: &Path,
) -> support::CmdOutput {
    let check = [
        s("--bootstrap"),
        bootstrap_all(nodes),
        s("--topic"),
        s(topic),
        s("--partitions"),
        s("3"),
        s("--range"),
        format!("0:{total}"),
        s("--ack-file"),
        acks.display().to_string(),
    ];
    run_python(py, "ck_check.py", &args(&check), Duration::from_secs(120))
}

/// The Java producer (`ReplicationChecks produce`: idempotent, acks=all) sending records
/// 0..`total` of `topic` (3 partitions) at `rate` records/s, acknowledgements into
/// `acks`, output in `dir/java-producer.std{out,err}`.
fn spawn_java_producer(
    nodes: &[Option<Broker>],
    topic: &str,
    total: u32,
    rate: u32,
    acks: &Path,
    dir: &Path,
) -> std::process::Child {
    spawn_java(
        "ReplicationChecks",
        &[
            "produce",
            "--bootstrap",
            &bootstrap_all(nodes),
            "--topic",
            topic,
            "--records",
            &total.to_string(),
            "--partitions",
            "3",
            "--ack-file",
            &acks.display().to_string(),
            "--rate",
            &rate.to_string(),
        ],
        dir,
        "java-producer",
    )
}

/// Waits for the Java producer to have every record acknowledged through `what`.
fn wait_java_producer(producer: &mut std::process::Child, dir: &Path, what: &str) {
    let status = wait_child(producer, Duration::from_secs(170));
    assert!(
        status.is_some_and(|s| s.success()),
        "the Java producer did not get every record acknowledged through {what}:\n{}",
        read_logs(dir, "java-producer")
    );
}

/// The Java consumer (`ReplicationChecks check`) reads `topic` back: records 0..`total`,
/// each once, every acknowledged one at its offset.
fn check_java(nodes: &[Option<Broker>], topic: &str, total: u32, acks: &Path, what: &str) {
    let out = support::kafka::run_java(
        "ReplicationChecks",
        &[
            "check",
            "--bootstrap",
            &bootstrap_all(nodes),
            "--topic",
            topic,
            "--records",
            &total.to_string(),
            "--partitions",
            "3",
            "--ack-file",
            &acks.display().to_string(),
        ],
        Duration::from_secs(120),
    );
    support::kafka::expect_ok(&out, &format!("Java consumer check {what}"));
}

/// Starts a Java test client in the background, its output in `dir/name.std{out,err}`.
fn spawn_java(class: &str, a: &[&str], dir: &Path, name: &str) -> std::process::Child {
    let out = std::fs::File::create(dir.join(format!("{name}.stdout"))).expect("stdout");
    let err = std::fs::File::create(dir.join(format!("{name}.stderr"))).expect("stderr");
    std::process::Command::new("bash")
        .arg(support::kafka::kafka_sh())
        .arg("java")
        .arg(class)
        .args(a)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn java")
}

/// One acks=`acks` produce of a record to partition 0 with kcat: its delivery error, if
/// any.
fn kcat_produce(nodes: &[Option<Broker>], topic: &str, acks: &str) -> Result<(), String> {
    let out = support::run_command(
        std::process::Command::new("kcat")
            .args(["-P", "-b", &bootstrap_all(nodes), "-t", topic, "-p", "0"])
            .args([
                "-X",
                &format!("acks={acks}"),
                "-X",
                "message.timeout.ms=5000",
            ]),
        Some(b"one record\n"),
        Duration::from_secs(30),
    );
    if out.success() && !out.stderr.contains("ERROR") && !out.stderr.contains("failed") {
        Ok(())
    } else {
        Err(out.describe())
    }
}

#[test]
fn a_cut_off_follower_leaves_the_isr_and_min_insync_replicas_is_enforced() {
    if skip_if(support::missing_program("kcat"), "ISR shrink") {
        return;
    }
    let net = Net::new(3);
    let nodes = start_cluster(&net, "");
    let topic = "isr";
    create_topic(&nodes, topic, 1, &[("min.insync.replicas", "3")]);
    // The Java producer on a topic of its own (min.insync.replicas 2) keeps going through
    // the cut and the heal.
    let java = support::kafka::missing_kafka().is_none();
    let dir = tempfile::tempdir().expect("tempdir");
    let (java_topic, java_total, java_acks) = ("isr-java", 6_000u32, dir.path().join("java-acks"));
    let mut java_producer = java.then(|| {
        create_topic(&nodes, java_topic, 3, &[("min.insync.replicas", "2")]);
        wait_isr(nodes[0].as_ref().expect("node 0"), java_topic, 3, 3);
        spawn_java_producer(&nodes, java_topic, java_total, 300, &java_acks, dir.path())
    });
    let l = wait_isr(nodes[0].as_ref().expect("node 0"), topic, 1, 3);
    let leader = l[&0].0 as usize;
    kcat_produce(&nodes, topic, "all").expect("acks=all with a full ISR");
    assert_leader_hints(&nodes, topic, leader);
    // Cut off a follower that is not the active controller (the quorum keeps its
    // majority either way).
    let follower = (0..3).find(|i| *i != leader).expect("a follower");
    net.cut(follower, nodes[follower].as_ref().expect("follower"));
    let leader_node = nodes[leader].as_ref().expect("leader");
    wait_isr(leader_node, topic, 1, 2);
    let others = |nodes: &[Option<Broker>]| -> String {
        nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != follower)
            .filter_map(|(_, n)| n.as_ref().map(Broker::bootstrap))
            .collect::<Vec<_>>()
            .join(",")
    };
    let produce_to = |acks: &str| {
        support::run_command(
            std::process::Command::new("kcat")
                .args(["-P", "-b", &others(&nodes), "-t", topic, "-p", "0"])
                .args([
                    "-X",
                    &format!("acks={acks}"),
                    "-X",
                    "message.timeout.ms=5000",
                ])
                // No retries: the broker's answer is what comes back.
                .args(["-X", "message.send.max.retries=0"]),
            Some(b"one record\n"),
            Duration::from_secs(30),
        )
    };
    let refused = produce_to("all");
    assert!(
        refused.stderr.contains("Not enough in-sync replicas")
            || refused.stderr.contains("NOT_ENOUGH_REPLICAS"),
        "acks=all with 2 of min.insync.replicas=3 in sync must be refused: {}",
        refused.describe()
    );
    let ok = produce_to("1");
    assert!(
        ok.success() && !ok.stderr.contains("ERROR"),
        "acks=1 goes on: {}",
        ok.describe()
    );
    // Healed, the follower catches up and rejoins; acks=all works again.
    net.heal(follower, nodes[follower].as_ref().expect("follower"));
    wait_isr(leader_node, topic, 1, 3);
    kcat_produce(&nodes, topic, "all").expect("acks=all after the follower rejoined");
    assert_replicas_identical(&nodes, topic, 1);
    if let Some(mut jp) = java_producer.take() {
        wait_java_producer(&mut jp, dir.path(), "the follower's cut");
        wait_isr(leader_node, java_topic, 3, 3);
        check_java(
            &nodes,
            java_topic,
            java_total,
            &java_acks,
            "after the follower's cut",
        );
        assert_replicas_identical(&nodes, java_topic, 3);
    }
}

/// KIP-951: a Produce (v10+) or Fetch (v16+) sent to a replica that does not lead names
/// the leader, its epoch and its endpoint, so a client moves without a Metadata round.
fn assert_leader_hints(nodes: &[Option<Broker>], topic: &str, leader: usize) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{FetchRequest, ProduceRequest};
    let follower = (0..nodes.len()).find(|i| *i != leader).expect("a follower");
    let leader_node = nodes[leader].as_ref().expect("leader");
    let mut c = connect(&nodes[follower].as_ref().expect("follower").bootstrap())
        .expect("connects to the follower");
    let batch = support::record_batch(1);
    let produce = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let r = c.send(&produce, 10).expect("produce v10");
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(
        p.error_code,
        kafka_protocol::ResponseError::NotLeaderOrFollower.code()
    );
    assert_eq!(p.current_leader.leader_id.0, leader as i32, "{p:?}");
    assert!(p.current_leader.leader_epoch >= 0, "{p:?}");
    let endpoint = r
        .node_endpoints
        .iter()
        .find(|e| e.node_id.0 == leader as i32)
        .unwrap_or_else(|| panic!("no endpoint of the leader in {:?}", r.node_endpoints));
    assert_eq!(
        (endpoint.host.to_string(), endpoint.port as u16),
        (
            leader_node.addr().ip().to_string(),
            leader_node.addr().port()
        )
    );
    let topic_id = {
        let meta = c
            .send(
                &MetadataRequest::default().with_topics(Some(vec![
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(topic.into())))),
                ])),
                12,
            )
            .expect("metadata");
        meta.topics[0].topic_id
    };
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let r = c.send(&fetch, 16).expect("fetch v16");
    let p = &r.responses[0].partitions[0];
    assert_eq!(
        p.error_code,
        kafka_protocol::ResponseError::NotLeaderOrFollower.code()
    );
    assert_eq!(p.current_leader.leader_id.0, leader as i32, "{p:?}");
    assert!(
        r.node_endpoints
            .iter()
            .any(|e| e.node_id.0 == leader as i32 && e.port as u16 == leader_node.addr().port()),
        "{:?}",
        r.node_endpoints
    );
}

#[test]
fn a_cut_off_controller_is_replaced_and_admin_requests_go_on() {
    let net = Net::new(3);
    let nodes = start_cluster(&net, "");
    create_topic(&nodes, "first", 1, &[]);
    let n0 = nodes[0].as_ref().expect("node 0");
    let active = controller_of(n0);
    // kafka-metadata-quorum names the same leader and all three voters.
    if support::kafka::missing_kafka().is_none() {
        let out = support::kafka::run_tool(
            "kafka-metadata-quorum",
            &[
                "--bootstrap-server",
                &n0.bootstrap(),
                "describe",
                "--status",
            ],
            None,
            Duration::from_secs(60),
        );
        support::kafka::expect_ok(&out, "kafka-metadata-quorum describe --status");
        let field = |name: &str| {
            out.stdout
                .lines()
                .find(|l| l.trim_start().starts_with(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        assert_eq!(field("LeaderId"), active.to_string(), "{}", out.stdout);
        let voters = field("CurrentVoters");
        for id in 0..3 {
            assert!(
                voters.contains(&format!("\"id\": {id}")) || voters.contains(&format!("{id}")),
                "{}",
                out.stdout
            );
        }
        eprintln!(
            "[replication] kafka-metadata-quorum: {}",
            out.stdout.replace('\n', " | ")
        );
    }
    net.cut(active, nodes[active].as_ref().expect("active"));
    let other = (0..3).find(|i| *i != active).expect("other");
    let other_node = nodes[other].as_ref().expect("other");
    let started = Instant::now();
    let second = loop {
        let c = controller_of(other_node);
        if c != active {
            break c;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no new controller after cutting off node {active}\n{}",
            other_node.log_tail(40)
        );
        thread::sleep(Duration::from_millis(100));
    };
    eprintln!("[replication] node {active} cut off; node {second} is the controller now");
    create_topic(std::slice::from_ref(&nodes[other]), "during-cut", 1, &[]);
    net.heal(active, nodes[active].as_ref().expect("active"));
    // The old controller follows the new metadata.
    let old = nodes[active].as_ref().expect("old controller");
    let started = Instant::now();
    while leaders(old, "during-cut").is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "node {active} never learned of during-cut\n{}",
            old.log_tail(40)
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// The active controller a node's Metadata names (waits for one).
fn controller_of(node: &Broker) -> usize {
    let started = Instant::now();
    loop {
        if let Some(mut c) = connect(&node.bootstrap()) {
            if let Ok(r) = c.send(
                &MetadataRequest::default().with_topics(Some(Vec::new())),
                12,
            ) {
                if r.controller_id.0 >= 0 {
                    return r.controller_id.0 as usize;
                }
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no controller named by {}",
            node.bootstrap()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_rolling_restart_under_load_loses_no_acknowledged_record() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "rolling restart",
    ) {
        return;
    }
    let net = Net::new(3);
    let mut nodes = start_cluster(&net, "\"min.insync.replicas\" = 2\n");
    let topic = "rolling";
    create_topic(&nodes, topic, 3, &[]);
    wait_isr(nodes[0].as_ref().expect("node 0"), topic, 3, 3);
    let dir = tempfile::tempdir().expect("tempdir");
    let acks = dir.path().join("acks");
    let total = 40_000u32;
    let mut producer = spawn_producer(&py, &nodes, topic, total, 2500, &acks, dir.path());
    let java = support::kafka::missing_kafka().is_none();
    let (java_topic, java_total, java_acks) =
        ("rolling-java", 8_000u32, dir.path().join("java-acks"));
    let mut java_producer = java.then(|| {
        create_topic(&nodes, java_topic, 3, &[]);
        wait_isr(nodes[0].as_ref().expect("node 0"), java_topic, 3, 3);
        spawn_java_producer(&nodes, java_topic, java_total, 400, &java_acks, dir.path())
    });
    for i in 0..3 {
        let before = count_lines(&acks);
        let started = Instant::now();
        let node = nodes[i].as_mut().expect("node");
        node.restart_term();
        eprintln!(
            "[replication] node {i} restarted (SIGTERM) in {:?} with {before} acknowledged",
            started.elapsed()
        );
        for n in nodes.iter().flatten() {
            wait_isr(n, topic, 3, 3);
        }
    }
    let status = wait_child(&mut producer, Duration::from_secs(170));
    assert!(
        status.is_some_and(|s| s.success()),
        "the producer did not get every record acknowledged through the rolling restart ({} of {total}):\n{}",
        count_lines(&acks),
        read_logs(dir.path(), "producer")
    );
    let out = check_acknowledged(&py, &nodes, topic, total, &acks);
    assert_success(&out, nodes[0].as_ref().expect("node 0"));
    assert_replicas_identical(&nodes, topic, 3);
    if let Some(mut jp) = java_producer.take() {
        wait_java_producer(&mut jp, dir.path(), "the rolling restart");
        wait_isr(nodes[0].as_ref().expect("node 0"), java_topic, 3, 3);
        check_java(
            &nodes,
            java_topic,
            java_total,
            &java_acks,
            "after the rolling restart",
        );
        assert_replicas_identical(&nodes, java_topic, 3);
    }
    for n in nodes.iter().flatten() {
        assert!(
            n.log_tail(100_000).contains("controlled shutdown"),
            "{} did not shut down in a controlled way\n{}",
            n.bootstrap(),
            n.log_tail(30)
        );
    }
}

#[test]
fn a_cluster_of_one_node_grows_to_three_with_kafka_reassign_partitions() {
    if skip_if(support::kafka::missing_kafka(), "kafka-reassign-partitions") {
        return;
    }
    let net = Net::new(3);
    let extra = "\"auto.leader.rebalance.enable\" = false\n";
    // One node: a broker and the quorum's only voter.
    let mut nodes: Vec<Option<Broker>> = vec![None, None, None];
    nodes[0] = start_nodes(&net, &[0], &[0], "broker,controller", extra).pop();
    wait_brokers(&nodes, 1);
    let (topic, java_topic) = ("grow", "grow-java");
    let via = bootstrap_all(&nodes);
    for t in [topic, java_topic] {
        let out = support::kafka::run_tool(
            "kafka-topics",
            &[
                "--bootstrap-server",
                &via,
                "--create",
                "--topic",
                t,
                "--partitions",
                "3",
                "--replication-factor",
                "1",
            ],
            None,
            Duration::from_secs(60),
        );
        support::kafka::expect_ok(&out, "kafka-topics --create on the one node");
    }
    let l = wait_isr(nodes[0].as_ref().expect("node 0"), topic, 3, 1);
    assert!(
        l.values()
            .all(|(leader, isr)| *leader == 0 && isr == &vec![0]),
        "{l:?}"
    );
    kcat_records(&via, topic, "a");
    let dir = tempfile::tempdir().expect("tempdir");
    let (java_total, java_acks) = (4_000u32, dir.path().join("java-acks"));
    let mut java_producer =
        spawn_java_producer(&nodes, java_topic, java_total, 400, &java_acks, dir.path());
    // Two broker-only nodes join the one-voter quorum as learners, while the Java
    // producer runs.
    for (i, b) in (1..).zip(start_nodes(&net, &[1, 2], &[0], "broker", extra)) {
        nodes[i] = Some(b);
    }
    wait_brokers(&nodes, 3);
    let via = bootstrap_all(&nodes);
    let n0 = nodes[0].as_ref().expect("node 0");
    let out = support::kafka::run_tool(
        "kafka-metadata-quorum",
        &["--bootstrap-server", &via, "describe", "--status"],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-metadata-quorum describe --status");
    let field = |name: &str| {
        out.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    eprintln!(
        "[replication] kafka-metadata-quorum: {}",
        out.stdout.replace('\n', " | ")
    );
    assert_eq!(field("LeaderId"), "0", "{}", out.stdout);
    let (voters, observers) = (field("CurrentVoters"), field("CurrentObservers"));
    let names = |list: &str, id: i32| {
        list.contains(&format!("\"id\": {id}")) || list.contains(&format!("[{id}"))
    };
    assert!(
        names(&voters, 0) && !names(&voters, 1) && !names(&voters, 2),
        "{}",
        out.stdout
    );
    assert!(
        names(&observers, 1) && names(&observers, 2),
        "{}",
        out.stdout
    );
    // Every partition of both topics onto all three nodes, each with a different
    // preferred leader.
    let mut plan = Vec::new();
    for t in [topic, java_topic] {
        for (p, replicas) in [(0, "[0,1,2]"), (1, "[1,2,0]"), (2, "[2,0,1]")] {
            plan.push(format!(
                r#"{{"topic":"{t}","partition":{p},"replicas":{replicas}}}"#
            ));
        }
    }
    let plan = dir_file(
        "reassign.json",
        &format!(r#"{{"version":1,"partitions":[{}]}}"#, plan.join(",")),
    );
    reassign_tool(&via, &plan.1, "--execute");
    until(Duration::from_secs(90), || {
        let text = reassign_tool(&via, &plan.1, "--verify");
        done(
            text.matches("is completed").count() >= 6,
            format!("reassignment not completed:\n{text}"),
        )
    });
    let l = wait_isr(n0, topic, 3, 3);
    eprintln!("[replication] after the reassignment: {l:?}");
    wait_isr(n0, java_topic, 3, 3);
    // Preferred leaders back with kafka-leader-election.
    let out = support::kafka::run_tool(
        "kafka-leader-election",
        &[
            "--bootstrap-server",
            &via,
            "--election-type",
            "PREFERRED",
            "--all-topic-partitions",
        ],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-leader-election --election-type PREFERRED");
    until(Duration::from_secs(30), || {
        let l = leaders(n0, topic);
        done(
            l.get(&1).is_some_and(|(leader, _)| *leader == 1)
                && l.get(&2).is_some_and(|(leader, _)| *leader == 2),
            format!("preferred leaders not elected: {l:?}"),
        )
    });
    kcat_records(&via, topic, "b");
    wait_java_producer(&mut java_producer, dir.path(), "the cluster's growth");
    check_java(
        &nodes,
        java_topic,
        java_total,
        &java_acks,
        "after the growth",
    );
    assert_replicas_identical(&nodes, topic, 3);
    assert_replicas_identical(&nodes, java_topic, 3);
    // A broker-only node killed is fenced like any other: its leadership moves.
    nodes[1].as_mut().expect("node 1").kill9();
    let n0 = nodes[0].as_ref().expect("node 0");
    until(Duration::from_secs(30), || {
        let l = leaders(n0, topic);
        done(
            l.get(&1)
                .is_some_and(|(leader, isr)| *leader != 1 && *leader >= 0 && !isr.contains(&1)),
            format!(
                "the killed broker-only node still leads: {l:?}\n{}",
                n0.log_tail(30)
            ),
        )
    });
    kcat_records(&bootstrap_all(&nodes), topic, "c");
}

#[test]
fn a_controller_only_node_runs_the_quorum_of_broker_only_nodes() {
    if skip_if(support::missing_program("kcat"), "process.roles") {
        return;
    }
    let net = Net::new(3);
    // Node 0 is the quorum's only voter and no broker; 1 and 2 are brokers only.
    let controller = start_nodes(&net, &[0], &[0], "controller", "").pop();
    let mut nodes: Vec<Option<Broker>> = vec![None];
    nodes.extend(
        start_nodes(&net, &[1, 2], &[0], "broker", "")
            .into_iter()
            .map(Some),
    );
    wait_brokers(&nodes, 2);
    let b1 = nodes[1].as_ref().expect("node 1");
    assert_eq!(brokers_of(b1), vec![1, 2], "the controller is no broker");
    let named = controller_of(b1);
    assert!(
        named == 1 || named == 2,
        "Metadata names a reachable broker as the controller, not {named}"
    );
    let topic = "roles";
    create_topic_rf(&nodes, topic, 3, 2, &[]);
    let l = wait_isr(b1, topic, 3, 2);
    assert!(
        l.values().all(|(leader, _)| *leader == 1 || *leader == 2),
        "{l:?}"
    );
    let via = bootstrap_all(&nodes);
    kcat_records(&via, topic, "a");
    if support::kafka::missing_kafka().is_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let acks = dir.path().join("java-acks");
        create_topic_rf(&nodes, "roles-java", 3, 2, &[]);
        wait_isr(b1, "roles-java", 3, 2);
        let mut jp = spawn_java_producer(&nodes, "roles-java", 2_000, 500, &acks, dir.path());
        wait_java_producer(&mut jp, dir.path(), "a controller-only quorum");
        check_java(&nodes, "roles-java", 2_000, &acks, "on broker-only nodes");
        let out = support::kafka::run_tool(
            "kafka-metadata-quorum",
            &["--bootstrap-server", &via, "describe", "--replication"],
            None,
            Duration::from_secs(60),
        );
        support::kafka::expect_ok(&out, "kafka-metadata-quorum describe --replication");
        eprintln!(
            "[replication] kafka-metadata-quorum: {}",
            out.stdout.replace('\n', " | ")
        );
        let row = |id: i32| {
            out.stdout
                .lines()
                .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
                .unwrap_or_default()
                .to_string()
        };
        assert!(row(0).contains("Leader"), "{}", out.stdout);
        assert!(
            row(1).contains("Observer") && row(2).contains("Observer"),
            "{}",
            out.stdout
        );
    }
    assert_replicas_identical(&nodes, topic, 3);
    // The broker holding half the leaderships dies; the controller moves them.
    nodes[1].as_mut().expect("node 1").kill9();
    let b2 = nodes[2].as_ref().expect("node 2");
    wait_isr(b2, topic, 3, 1);
    assert!(leaders(b2, topic).values().all(|(leader, _)| *leader == 2));
    kcat_records(&bootstrap_all(&nodes), topic, "b");
    drop(controller);
}

#[test]
fn a_partition_whose_isr_died_comes_back_only_by_an_unclean_election() {
    if skip_if(
        support::kafka::missing_kafka(),
        "kafka-leader-election UNCLEAN",
    ) || skip_if(support::missing_program("kcat"), "unclean election")
    {
        return;
    }
    let net = Net::new(3);
    let mut nodes = start_cluster(&net, "\"auto.leader.rebalance.enable\" = false\n");
    let via = bootstrap_all(&nodes);
    // Two topics on nodes 1 (preferred leader) and 2; node 0 only votes. One may elect
    // an out-of-sync replica by itself (`unclean.leader.election.enable`), the other
    // only when asked.
    for (topic, unclean) in [("unclean-tool", false), ("unclean-auto", true)] {
        create_topic_on_replicas(&via, topic, "1:2", unclean);
        wait_isr(nodes[0].as_ref().expect("node 0"), topic, 1, 2);
        kcat_one(&via, topic, "a");
    }
    // Node 2 stops: it leaves both ISRs, and a record reaches node 1 alone.
    nodes[2].as_ref().expect("node 2").signal("STOP");
    let n0 = nodes[0].as_ref().expect("node 0");
    for topic in ["unclean-tool", "unclean-auto"] {
        wait_isr(n0, topic, 1, 1);
        kcat_one(&bootstrap_all(&nodes[..2]), topic, "b");
    }
    // Node 1, the whole ISR, dies; node 2 comes back out of sync.
    nodes[1].as_mut().expect("node 1").kill9();
    nodes[2].as_ref().expect("node 2").signal("CONT");
    let n0 = nodes[0].as_ref().expect("node 0");
    // Node 2 must be heard again (unfenced) before it can be elected: under the full
    // suite's load that took longer than 30 s in two runs of this session.
    until(Duration::from_secs(90), || {
        let (tool, auto) = (leaders(n0, "unclean-tool"), leaders(n0, "unclean-auto"));
        let offline = tool.get(&0).is_some_and(|(leader, _)| *leader == -1);
        let elected = auto.get(&0).is_some_and(|(leader, _)| *leader == 2);
        done(
            offline && elected,
            format!(
                "expected unclean-tool offline and unclean-auto led by node 2: {tool:?} {auto:?}\n{}",
                n0.log_tail(30)
            ),
        )
    });
    // Kafka's tool elects the out-of-sync replica when asked.
    let live = bootstrap_all(&nodes);
    let out = support::kafka::run_tool(
        "kafka-leader-election",
        &[
            "--bootstrap-server",
            &live,
            "--election-type",
            "UNCLEAN",
            "--topic",
            "unclean-tool",
            "--partition",
            "0",
        ],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-leader-election --election-type UNCLEAN");
    wait_isr(n0, "unclean-tool", 1, 1);
    assert_eq!(leaders(n0, "unclean-tool")[&0].0, 2);
    // What only the dead node had is gone; the new leader takes writes after its own.
    for topic in ["unclean-tool", "unclean-auto"] {
        kcat_one(&live, topic, "c");
        let out = support::run_command(
            std::process::Command::new("kcat").args([
                "-C",
                "-b",
                &live,
                "-t",
                topic,
                "-p",
                "0",
                "-o",
                "beginning",
                "-e",
                "-q",
            ]),
            None,
            Duration::from_secs(30),
        );
        assert!(out.success(), "{}", out.describe());
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["a", "c"],
            "{topic} after the unclean election"
        );
    }
}

#[test]
fn a_reassignment_under_a_throttle_copies_no_faster_than_the_throttle() {
    if skip_if(
        support::kafka::missing_kafka(),
        "kafka-reassign-partitions --throttle",
    ) || skip_if(support::missing_program("kcat"), "replication throttle")
    {
        return;
    }
    let net = Net::new(3);
    let nodes = start_cluster(&net, "\"auto.leader.rebalance.enable\" = false\n");
    let via = bootstrap_all(&nodes);
    let topic = "throttled";
    let out = support::kafka::run_tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &via,
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            "0",
        ],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-topics --create --replica-assignment 0");
    // 8 MB on node 0 alone.
    let line = "x".repeat(999);
    let input: String = (0..8000).map(|_| format!("{line}\n")).collect();
    let out = support::run_command(
        std::process::Command::new("kcat").args(["-P", "-b", &via, "-t", topic, "-p", "0"]),
        Some(input.as_bytes()),
        Duration::from_secs(60),
    );
    assert!(out.success(), "{}", out.describe());
    let full = replica_bytes(&nodes[0].as_ref().expect("node 0").data_dir(), topic, 0).len();
    assert!(full > 7_000_000, "{full} bytes on node 0");
    // Onto node 1 as well, at 100 kB/s.
    let plan = dir_file(
        "reassign.json",
        r#"{"version":1,"partitions":[{"topic":"throttled","partition":0,"replicas":[0,1]}]}"#,
    );
    let out = support::kafka::run_tool(
        "kafka-reassign-partitions",
        &[
            "--bootstrap-server",
            &via,
            "--reassignment-json-file",
            &plan.1,
            "--execute",
            "--throttle",
            "100000",
        ],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-reassign-partitions --execute --throttle");
    thread::sleep(Duration::from_secs(5));
    let copied = replica_bytes(&nodes[1].as_ref().expect("node 1").data_dir(), topic, 0).len();
    eprintln!("[replication] {copied} of {full} bytes copied in 5 s under a 100 kB/s throttle");
    // Unthrottled, loopback copies the 8 MB in about a second; throttled, one second's
    // budget and one overdrawing fetch (at most replica.fetch.max.bytes) go by.
    assert!(
        copied < full / 2,
        "{copied} of {full} bytes copied in 5 s under a 100 kB/s throttle"
    );
    // The throttle lifted, the copy completes and --verify clears the throttle configs.
    for broker in ["0", "1"] {
        let out = support::kafka::run_tool(
            "kafka-configs",
            &[
                "--bootstrap-server",
                &via,
                "--entity-type",
                "brokers",
                "--entity-name",
                broker,
                "--alter",
                "--delete-config",
                "leader.replication.throttled.rate,follower.replication.throttled.rate",
            ],
            None,
            Duration::from_secs(60),
        );
        support::kafka::expect_ok(&out, "kafka-configs --delete-config");
    }
    until(Duration::from_secs(60), || {
        let text = reassign_tool(&via, &plan.1, "--verify");
        done(
            text.contains("is completed"),
            format!("reassignment not completed once unthrottled:\n{text}"),
        )
    });
    assert_replicas_identical(&nodes[..2], topic, 1);
}

/// The arguments of a `tests/clients` script: `mode`, the bootstrap servers, the topic,
/// `flags` and the timeout in seconds.
fn client_args(
    mode: &str,
    bootstrap: &str,
    topic: &str,
    flags: &[(&str, &str)],
    timeout_s: &str,
) -> Vec<String> {
    let mut out = vec![
        s(mode),
        s("--bootstrap"),
        s(bootstrap),
        s("--topic"),
        s(topic),
    ];
    for (flag, value) in flags {
        out.extend([s(flag), s(value)]);
    }
    out.extend([s("--timeout"), s(timeout_s)]);
    out
}

/// Waits until every internal topic is replicated three times, its partitions led.
fn wait_internal_topics(nodes: &[Option<Broker>]) {
    let n = nodes.iter().flatten().next().expect("a node");
    for internal in ["__consumer_offsets", "__transaction_state"] {
        until(Duration::from_secs(60), || {
            let l = leaders(n, internal);
            done(
                l.len() == 3
                    && l.values()
                        .all(|(leader, isr)| *leader >= 0 && isr.len() == 3),
                format!("{internal} not replicated: {l:?}"),
            )
        });
    }
}

/// The node FindCoordinator names for `group`.
fn group_coordinator(node: &Broker, group: &str) -> usize {
    use kafka_protocol::messages::FindCoordinatorRequest;
    let started = Instant::now();
    loop {
        let answer = connect(&node.bootstrap()).and_then(|mut c| {
            c.send(
                &FindCoordinatorRequest::default()
                    .with_key_type(0)
                    .with_coordinator_keys(vec![StrBytes::from_string(group.into())]),
                4,
            )
            .ok()
        });
        if let Some(c) = answer.as_ref().and_then(|r| r.coordinators.first()) {
            if c.error_code == 0 && c.node_id.0 >= 0 {
                return c.node_id.0 as usize;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no coordinator for {group}: {answer:?}"
        );
        thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_groups_committed_offsets_survive_the_death_of_its_coordinators_node() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "groups on a cluster",
    ) {
        return;
    }
    let net = Net::new(3);
    // acks=all commits reach the whole ISR before they are answered, so no
    // min.insync.replicas is needed for them to survive one node (and the Java
    // scenario below makes a topic of one replica).
    let mut nodes = start_cluster(&net, "\"group.initial.rebalance.delay.ms\" = 0\n");
    wait_internal_topics(&nodes);
    let (topic, group) = ("grp", "g-failover");
    create_topic(&nodes, topic, 6, &[]);
    wait_isr(nodes[0].as_ref().expect("node 0"), topic, 6, 3);
    let group_args = |mode: &str, bootstrap: &str| {
        let flags = [
            ("--group", group),
            ("--partitions", "6"),
            ("--count", "6000"),
        ];
        client_args(mode, bootstrap, topic, &flags, "90")
    };
    // Three librdkafka members consume everything with manual commits while the group
    // rebalances.
    let out = run_python(
        &py,
        "ck_group.py",
        &args(&group_args("consume", &bootstrap_all(&nodes))),
        Duration::from_secs(150),
    );
    assert_success(&out, nodes[0].as_ref().expect("node 0"));
    // The node holding the group's coordinator dies.
    let victim = group_coordinator(nodes[0].as_ref().expect("node 0"), group);
    nodes[victim].as_mut().expect("victim").kill9();
    eprintln!("[replication] SIGKILL of node {victim}, the coordinator of {group}");
    let survivors = bootstrap_all(&nodes);
    let alive = nodes.iter().flatten().next().expect("a survivor");
    until(Duration::from_secs(30), || {
        done(
            group_coordinator(alive, group) != victim,
            format!("the coordinator of {group} did not move off node {victim}"),
        )
    });
    // Its committed offsets are all on the new coordinator (the partitions' ends).
    let out = run_python(
        &py,
        "ck_group.py",
        &args(&group_args("check", &survivors)),
        Duration::from_secs(90),
    );
    assert_success(&out, alive);
    // And the Java clients' classic group protocol works against the new coordinators.
    if support::kafka::missing_kafka().is_none() {
        let out = support::kafka::run_java(
            "GroupChecks",
            &["groups", "--bootstrap", &survivors, "--topic", "grp-java"],
            Duration::from_secs(180),
        );
        support::kafka::expect_ok(&out, "Java GroupChecks after the coordinator's death");
    }
}

#[test]
fn transactions_span_brokers_and_survive_their_coordinators_death() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "transactions on a cluster",
    ) {
        return;
    }
    let net = Net::new(3);
    let mut nodes = start_cluster(
        &net,
        "\"group.initial.rebalance.delay.ms\" = 0\n\"transaction.abort.timed.out.transaction.cleanup.interval.ms\" = 500\n\"min.insync.replicas\" = 2\n",
    );
    wait_internal_topics(&nodes);
    // The data topic replicated three times too (the script creates it with RF 1 when
    // it does not exist).
    create_topic(&nodes, "txn", 3, &[]);
    wait_isr(nodes[0].as_ref().expect("node 0"), "txn", 3, 3);
    let txn_args = |mode: &str, bootstrap: &str| {
        let flags = [("--group", "g-txn"), ("--partitions", "3")];
        client_args(mode, bootstrap, "txn", &flags, "30")
    };
    // Commits, aborts, fencing and a timed-out transaction, with the coordinators and
    // the partitions' leaders on different brokers: markers cross brokers
    // (WriteTxnMarkers), and the offsets sent to the transaction are committed by the
    // group coordinator of their partition's leader.
    let out = run_python(
        &py,
        "ck_txn.py",
        &args(&txn_args("run", &bootstrap_all(&nodes))),
        Duration::from_secs(120),
    );
    assert_success(&out, nodes[0].as_ref().expect("node 0"));
    // A node dies: its coordinators load on the new leaders from the replicated logs,
    // read_committed still sees exactly the committed records, and the transactional ids
    // initialise and commit again.
    nodes[0].as_mut().expect("node 0").kill9();
    let survivors = bootstrap_all(&nodes);
    let out = run_python(
        &py,
        "ck_txn.py",
        &args(&txn_args("after-restart", &survivors)),
        Duration::from_secs(120),
    );
    assert_success(&out, nodes[1].as_ref().expect("node 1"));
    for n in nodes.iter().flatten() {
        assert!(
            !n.log_tail(100_000).contains("panicked"),
            "{} panicked\n{}",
            n.bootstrap(),
            n.log_tail(40)
        );
    }
}

/// Node `i` of a dynamic quorum (`controller.quorum.bootstrap.servers` naming node 0's
/// controller listener), a broker and a controller; node 0 is formatted as the quorum's
/// only voter (`twinlog format --standalone`), the others join as observers.
fn start_dynamic(net: &Net, i: usize) -> Broker {
    let controller = |n: usize| format!("{}:{}", net.ip(n), net.port(n, CONTROLLER_PORT));
    let config = format!(
        "\"node.id\" = {i}\n\"process.roles\" = \"broker,controller\"\n\"listeners\" = \"PLAINTEXT://{}:{},CONTROLLER://{}\"\n\"controller.quorum.bootstrap.servers\" = \"{}\"\n\"offsets.topic.num.partitions\" = 3\n\"transaction.state.log.num.partitions\" = 3\n\"broker.session.timeout.ms\" = 3000\n\"num.partitions\" = 3\n",
        net.ip(i),
        net.port(i, KAFKA_PORT),
        controller(i),
        controller(0)
    );
    let at = (net.ip(i), net.port(i, KAFKA_PORT), net.ns(i));
    Broker::start_at_prepared(&config, at, |data, config| {
        let mut format = std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"));
        format
            .arg("format")
            .arg("--data-dir")
            .arg(data)
            .arg("--config")
            .arg(config)
            .args(["--cluster-id", Broker::TEST_CLUSTER_ID]);
        if i == 0 {
            format.arg("--standalone");
        } else {
            format.arg("--no-initial-controllers");
        }
        let out = format.output().expect("twinlog format");
        assert!(out.status.success(), "twinlog format: {out:?}");
    })
}

/// `kafka-metadata-quorum describe --status` through `via`: (leader, voters, observers).
fn quorum_status(via: &str) -> (String, String, String) {
    let out = support::kafka::run_tool(
        "kafka-metadata-quorum",
        &["--bootstrap-server", via, "describe", "--status"],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-metadata-quorum describe --status");
    let field = |name: &str| {
        out.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    (
        field("LeaderId"),
        field("CurrentVoters"),
        field("CurrentObservers"),
    )
}

/// Whether a `CurrentVoters` / `CurrentObservers` list names node `id`.
fn lists(list: &str, id: usize) -> bool {
    list.contains(&format!("\"id\": {id},")) || list.contains(&format!("\"id\": {id}}}"))
}

#[test]
fn a_dynamic_quorum_grows_from_one_controller_to_three_and_drops_a_dead_one() {
    if skip_if(
        support::kafka::missing_kafka(),
        "kafka-metadata-quorum add-controller",
    ) {
        return;
    }
    let net = Net::new(3);
    let mut nodes: Vec<Option<Broker>> = vec![Some(start_dynamic(&net, 0)), None, None];
    wait_brokers(&nodes, 1);
    for (i, slot) in nodes.iter_mut().enumerate().skip(1) {
        *slot = Some(start_dynamic(&net, i));
    }
    wait_brokers(&nodes, 3);
    let via = bootstrap_all(&nodes);
    let (leader, voters, observers) = quorum_status(&via);
    assert_eq!(leader, "0");
    assert!(lists(&voters, 0) && !lists(&voters, 1), "voters {voters}");
    assert!(
        lists(&observers, 1) && lists(&observers, 2),
        "observers {observers}"
    );
    // kafka-metadata-quorum add-controller, with each new controller's own properties.
    for (i, n) in nodes.iter().enumerate().skip(1) {
        let n = n.as_ref().expect("node");
        let props = dir_file(
            "controller.properties",
            &format!(
                "node.id={i}\nprocess.roles=broker,controller\nlog.dirs={}\ncontroller.listener.names=CONTROLLER\nlisteners=CONTROLLER://{}:{}\n",
                n.data_dir().display(),
                net.ip(i),
                net.port(i, CONTROLLER_PORT)
            ),
        );
        let out = support::kafka::run_tool(
            "kafka-metadata-quorum",
            &[
                "--bootstrap-server",
                &via,
                "--command-config",
                &props.1,
                "add-controller",
            ],
            None,
            Duration::from_secs(60),
        );
        support::kafka::expect_ok(&out, "kafka-metadata-quorum add-controller");
        assert!(
            out.stdout.contains(&format!("Added controller {i}")),
            "{}",
            out.stdout
        );
    }
    let (_, voters, _) = quorum_status(&via);
    assert!((0..3).all(|i| lists(&voters, i)), "voters {voters}");
    create_topic(&nodes, "voters", 3, &[]);
    // The first controller dies: the two it added elect one of them, and admin
    // requests go on.
    let dead_dir = nodes[0].as_ref().expect("node 0").data_dir();
    nodes[0].as_mut().expect("node 0").kill9();
    let survivors = bootstrap_all(&nodes[1..]);
    let leader = until(Duration::from_secs(30), || {
        let (leader, _, _) = quorum_status(&survivors);
        if leader == "1" || leader == "2" {
            Ok(leader)
        } else {
            Err(format!("no new quorum leader: {leader}"))
        }
    });
    eprintln!("[replication] node {leader} leads the quorum after node 0's death");
    create_topic_rf(&nodes[1..], "after-the-first", 3, 2, &[]);
    // kafka-metadata-quorum remove-controller takes the dead one out.
    let meta = std::fs::read_to_string(dead_dir.join("meta.properties")).expect("meta.properties");
    let directory = meta
        .lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .expect("a directory.id");
    let out = support::kafka::run_tool(
        "kafka-metadata-quorum",
        &[
            "--bootstrap-server",
            &survivors,
            "remove-controller",
            "--controller-id",
            "0",
            "--controller-directory-id",
            directory,
        ],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-metadata-quorum remove-controller");
    let (_, voters, _) = quorum_status(&survivors);
    assert!(
        !lists(&voters, 0) && lists(&voters, 1) && lists(&voters, 2),
        "voters {voters}"
    );
    create_topic_rf(&nodes[1..], "two-voters", 1, 2, &[]);
}

/// Three records into each of partitions 0..3 of `topic` with kcat (acks=all), values
/// `{partition}-{tag}{i}`.
fn kcat_records(bootstrap: &str, topic: &str, tag: &str) {
    for p in 0..3 {
        let input = format!("{p}-{tag}0\n{p}-{tag}1\n{p}-{tag}2\n");
        let out = support::run_command(
            std::process::Command::new("kcat").args([
                "-P",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-p",
                &p.to_string(),
                "-X",
                "acks=all",
            ]),
            Some(input.as_bytes()),
            Duration::from_secs(30),
        );
        assert!(out.success(), "{}", out.describe());
    }
}

/// `kafka-reassign-partitions` with the plan in `file` and `action` (`--execute`,
/// `--verify`); its stdout.
fn reassign_tool(bootstrap: &str, file: &str, action: &str) -> String {
    let out = support::kafka::run_tool(
        "kafka-reassign-partitions",
        &[
            "--bootstrap-server",
            bootstrap,
            "--reassignment-json-file",
            file,
            action,
        ],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, &format!("kafka-reassign-partitions {action}"));
    out.stdout
}

/// A file in a fresh temporary directory: (the directory, the file's path).
fn dir_file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write");
    (dir, path.display().to_string())
}
