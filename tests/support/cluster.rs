//! Clusters of Twinlog nodes for the cluster tests (`tests/replication.rs`,
//! `tests/mirror_cluster.rs`): nodes started together on a [`Net`], waiting for them,
//! topics through any node, leaders and ISRs from Metadata, and the replicas' bytes on
//! disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::netns::Net;
use super::Broker;

pub const KAFKA_PORT: u16 = 9092;
pub const CONTROLLER_PORT: u16 = 9093;

/// Partition -> (leader, ISR) as a node's Metadata has them.
pub type Leaders = BTreeMap<i32, (i32, Vec<i32>)>;

pub fn connect(bootstrap: &str) -> Option<dataplane::client::BlockingConnection> {
    dataplane::client::BlockingConnection::connect(
        bootstrap,
        "replication-test",
        Duration::from_secs(3),
    )
    .ok()
}

/// Three nodes sharing one quorum, on `net`.
pub fn start_cluster(net: &Net, extra: &str) -> Vec<Option<Broker>> {
    let all: Vec<usize> = (0..net.len()).collect();
    let nodes: Vec<Option<Broker>> = start_nodes(net, &all, &all, "broker,controller", extra)
        .into_iter()
        .map(Some)
        .collect();
    wait_brokers(&nodes, net.len());
    nodes
}

/// Nodes `ids` of `net` with `process.roles = roles`, in the quorum whose voters are
/// nodes `voters`, started together: each waits for its own "ready", not the others'.
pub fn start_nodes(
    net: &Net,
    ids: &[usize],
    voters: &[usize],
    roles: &str,
    extra: &str,
) -> Vec<Broker> {
    start_nodes_of(net, ids, voters, roles, extra, Broker::TEST_CLUSTER_ID)
}

/// [`start_nodes`] for a cluster formatted with `cluster_id` (two clusters of one test,
/// a mirror's source and destination, have ids of their own).
pub fn start_nodes_of(
    net: &Net,
    ids: &[usize],
    voters: &[usize],
    roles: &str,
    extra: &str,
    cluster_id: &str,
) -> Vec<Broker> {
    start_nodes_with(net, ids, voters, roles, cluster_id, |_| {
        (extra.to_owned(), None)
    })
}

/// [`start_nodes_of`] with each node's own extra config and, for a node whose
/// inter-broker listener is secured, the port of the PLAINTEXT listener the harness
/// talks to (see [`Broker::start_at_with_client_port`]).
pub fn start_nodes_with(
    net: &Net,
    ids: &[usize],
    voters: &[usize],
    roles: &str,
    cluster_id: &str,
    node: impl Fn(usize) -> (String, Option<u16>),
) -> Vec<Broker> {
    let voters = voters
        .iter()
        .map(|i| format!("{i}@{}:{}", net.ip(*i), net.port(*i, CONTROLLER_PORT)))
        .collect::<Vec<_>>()
        .join(",");
    let handles: Vec<_> = ids
        .iter()
        .map(|&i| {
            let (extra, client_port) = node(i);
            let config = format!(
                "\"node.id\" = {i}\n\"process.roles\" = \"{roles}\"\n\"controller.quorum.voters\" = \"{voters}\"\n\"offsets.topic.num.partitions\" = 3\n\"transaction.state.log.num.partitions\" = 3\n\"broker.session.timeout.ms\" = 3000\n\"replica.lag.time.max.ms\" = 3000\n\"num.partitions\" = 3\n\"default.replication.factor\" = 3\n{extra}"
            );
            let at = (net.ip(i), net.port(i, KAFKA_PORT), net.ns(i));
            let cluster_id = cluster_id.to_string();
            thread::spawn(move || {
                let format = |data: &Path, _: &Path| {
                    super::format_node_as(data, &i.to_string(), &cluster_id)
                };
                match client_port {
                    None => Broker::start_at_prepared(&config, at, format),
                    Some(port) => Broker::start_at_with_client_port(&config, at, port, format),
                }
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("node starts"))
        .collect()
}

/// The brokers a node's Metadata lists, by id.
pub fn brokers_of(node: &Broker) -> Vec<i32> {
    connect(&node.bootstrap())
        .and_then(|mut c| {
            c.send(
                &MetadataRequest::default().with_topics(Some(Vec::new())),
                12,
            )
            .ok()
        })
        .map(|r| r.brokers.iter().map(|b| b.node_id.0).collect())
        .unwrap_or_default()
}

/// Waits until every running broker among `nodes` lists `count` brokers.
pub fn wait_brokers(nodes: &[Option<Broker>], count: usize) {
    for n in nodes.iter().flatten() {
        let started = Instant::now();
        loop {
            let brokers = brokers_of(n);
            if brokers.len() == count {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} lists brokers {brokers:?}, not {count}\n{}",
                n.bootstrap(),
                n.log_tail(30)
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Polls `poll` every 200 ms until it answers `Ok`; after `timeout` fails with the
/// last `Err` (what was seen instead).
pub fn until<T>(timeout: Duration, mut poll: impl FnMut() -> Result<T, String>) -> T {
    let started = Instant::now();
    loop {
        match poll() {
            Ok(v) => return v,
            Err(seen) => assert!(started.elapsed() < timeout, "after {timeout:?}: {seen}"),
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// `Ok` when `ok`, else what was seen, for [`until`].
pub fn done(ok: bool, seen: String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(seen)
    }
}

pub fn bootstrap_all(nodes: &[Option<Broker>]) -> String {
    nodes
        .iter()
        .flatten()
        .map(Broker::bootstrap)
        .collect::<Vec<_>>()
        .join(",")
}

/// CreateTopics (replication factor 3) through any node (non-leaders forward), retried
/// over elections.
pub fn create_topic(
    nodes: &[Option<Broker>],
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    create_topic_rf(nodes, name, partitions, 3, configs);
}

/// [`create_topic`] with replication factor `rf`.
pub fn create_topic_rf(
    nodes: &[Option<Broker>],
    name: &str,
    partitions: i32,
    rf: i16,
    configs: &[(&str, &str)],
) {
    let started = Instant::now();
    let mut last = None;
    loop {
        for n in nodes.iter().flatten() {
            // A forwarded change may take a few seconds while the quorum elects.
            let Some(mut c) = dataplane::client::BlockingConnection::connect(
                &n.bootstrap(),
                "replication-test",
                Duration::from_secs(15),
            )
            .ok() else {
                continue;
            };
            let req = CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.into())))
                    .with_num_partitions(partitions)
                    .with_replication_factor(rf)
                    .with_configs(
                        configs
                            .iter()
                            .map(|(k, v)| {
                                CreatableTopicConfig::default()
                                    .with_name(StrBytes::from_string(k.to_string()))
                                    .with_value(Some(StrBytes::from_string(v.to_string())))
                            })
                            .collect(),
                    )]);
            let answer = c.send(&req, 5);
            last = Some(format!(
                "{:?}",
                answer
                    .as_ref()
                    .map(|r| (r.topics[0].error_code, r.topics[0].error_message.clone()))
            ));
            if let Ok(r) = answer {
                match r.topics[0].error_code {
                    0 | 36 => return,
                    // Timed out, not the controller, or not every broker registered yet.
                    7 | 38 | 41 => {}
                    code => panic!(
                        "CreateTopics {name}: {code} {:?}",
                        r.topics[0].error_message
                    ),
                }
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(45),
            "{name} not created (last answer: {last:?})\n{}",
            nodes
                .iter()
                .flatten()
                .map(|n| n.log_tail(25))
                .collect::<Vec<_>>()
                .join("\n")
        );
        thread::sleep(Duration::from_millis(200));
    }
}

/// Leaders and ISRs of `topic` as `node` answers Metadata (empty when it cannot).
pub fn leaders(node: &Broker, topic: &str) -> Leaders {
    let Some(mut c) = connect(&node.bootstrap()) else {
        return Leaders::new();
    };
    let req = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.into())))),
    ]));
    let Ok(r) = c.send(&req, 12) else {
        return Leaders::new();
    };
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                (
                    p.leader_id.0,
                    p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                ),
            )
        })
        .collect()
}

/// Waits until `node` shows every partition of `topic` led, with an ISR of `isr` nodes.
pub fn wait_isr(node: &Broker, topic: &str, partitions: i32, isr: usize) -> Leaders {
    let started = Instant::now();
    loop {
        let l = leaders(node, topic);
        if l.len() == partitions as usize
            && l.values().all(|(leader, i)| *leader >= 0 && i.len() == isr)
        {
            return l;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{topic} on {}: ISRs never reached {isr}: {l:?}\n{}",
            node.bootstrap(),
            node.log_tail(40)
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// A partition's records on one node: its `.log` files in offset order, concatenated.
pub fn replica_bytes(data_dir: &Path, topic: &str, partition: i32) -> Vec<u8> {
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    logs.iter()
        .flat_map(|p| std::fs::read(p).unwrap_or_default())
        .collect()
}

/// Waits until every replica of every partition of `topic` holds the same bytes (the
/// followers caught up with the leader), and says how long they are.
pub fn assert_replicas_identical(nodes: &[Option<Broker>], topic: &str, partitions: i32) {
    for p in 0..partitions {
        let started = Instant::now();
        loop {
            let copies: Vec<Vec<u8>> = nodes
                .iter()
                .flatten()
                .map(|n| replica_bytes(&n.data_dir(), topic, p))
                .collect();
            if copies.windows(2).all(|w| w[0] == w[1]) && !copies[0].is_empty() {
                eprintln!(
                    "[replication] {topic}-{p}: {} replicas hold the same {} bytes",
                    copies.len(),
                    copies[0].len()
                );
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{topic}-{p}: replicas differ: sizes {:?}",
                copies.iter().map(Vec::len).collect::<Vec<_>>()
            );
            thread::sleep(Duration::from_millis(200));
        }
    }
}

/// One record `value` into partition 0 of `topic` with kcat (acks=all).
pub fn kcat_one(bootstrap: &str, topic: &str, value: &str) {
    let out = super::run_command(
        std::process::Command::new("kcat").args([
            "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-X", "acks=all",
        ]),
        Some(format!("{value}\n").as_bytes()),
        Duration::from_secs(30),
    );
    assert!(out.success(), "{}", out.describe());
    eprintln!(
        "[kcat] {topic} <- {value} in {:?}: {}",
        out.elapsed,
        out.stderr.trim()
    );
}

/// `topic`, one partition on the replicas `assignment` (Kafka's `1:2` form), with
/// `unclean.leader.election.enable` set to `unclean`, created with Kafka's own
/// `kafka-topics` through `via`.
pub fn create_topic_on_replicas(via: &str, topic: &str, assignment: &str, unclean: bool) {
    let out = super::kafka::run_tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            via,
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            assignment,
            "--config",
            &format!("unclean.leader.election.enable={unclean}"),
        ],
        None,
        Duration::from_secs(60),
    );
    super::kafka::expect_ok(
        &out,
        &format!("kafka-topics --create --replica-assignment {assignment}"),
    );
}
