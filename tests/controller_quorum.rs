//! Three `twinlog serve` processes sharing one metadata quorum
//! (`controller.quorum.voters`): admin requests are taken by the active controller and
//! answered NOT_CONTROLLER (with its node id) elsewhere; every node's metadata follows
//! what the active one commits, lists every registered broker and names the active
//! controller; after a SIGKILL of the active controller's process the
//! others elect one of themselves and admin requests keep working, with all the metadata
//! committed before. (Brokers registering with each other and replication are the rest of
//! the cluster issue; these nodes share only the metadata.)
//!
//! Run alone: `cargo test -p twinlog --test controller_quorum`.

mod support;

use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use support::{free_port, Broker};

const NOT_CONTROLLER: i16 = 41;

fn connect(bootstrap: &str) -> dataplane::client::BlockingConnection {
    dataplane::client::BlockingConnection::connect(
        bootstrap,
        "quorum-test",
        Duration::from_secs(10),
    )
    .expect("connect")
}

/// CreateTopics of one topic on one node: (error code, message).
fn create_on(bootstrap: &str, topic: &str) -> (i16, String) {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let r = connect(bootstrap).send(&req, 5).expect("CreateTopics");
    let t = &r.topics[0];
    (
        t.error_code,
        t.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

/// Creates `topic` on whichever node is the active controller, retrying while there is
/// none (an election): the index of the node that took it.
fn create_anywhere(nodes: &[Option<Broker>], topic: &str) -> usize {
    let started = Instant::now();
    loop {
        for (i, n) in nodes.iter().enumerate() {
            let Some(n) = n else { continue };
            match create_on(&n.bootstrap(), topic) {
                (0, _) => return i,
                (NOT_CONTROLLER, _) => {}
                other => panic!("CreateTopics {topic} on node {i}: {other:?}"),
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no node took CreateTopics {topic}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The topic names a node's Metadata lists.
fn topics_on(bootstrap: &str) -> Vec<String> {
    let r = connect(bootstrap)
        .send(&MetadataRequest::default().with_topics(None), 12)
        .expect("Metadata");
    r.topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect()
}

fn wait_listed(node: &Broker, topic: &str) {
    let started = Instant::now();
    while !topics_on(&node.bootstrap()).iter().any(|t| t == topic) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{topic} never reached {}\n{}",
            node.bootstrap(),
            node.log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_quorum_elects_another_controller_when_the_active_one_is_killed() {
    let controller_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let voters = controller_ports
        .iter()
        .enumerate()
        .map(|(id, p)| format!("{id}@127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes: Vec<Option<Broker>> = (0..3)
        .map(|id| {
            Some(Broker::start(&format!(
                "\"node.id\" = {id}\n\"process.roles\" = \"broker,controller\"\n\"controller.quorum.voters\" = \"{voters}\"\n\"num.partitions\" = 1\n\"offsets.topic.num.partitions\" = 1\n\"transaction.state.log.num.partitions\" = 1\n"
            )))
        })
        .collect();
    let active = create_anywhere(&nodes, "before");
    // The others refuse admin requests, naming the active controller.
    for (i, n) in nodes.iter().enumerate().filter(|(i, _)| *i != active) {
        let (code, message) = create_on(&n.as_ref().expect("node").bootstrap(), "elsewhere");
        assert_eq!(code, NOT_CONTROLLER, "node {i}: {message}");
        assert!(message.contains(&format!("node {active}")), "{message}");
    }
    // Every node's metadata follows the active controller, lists every registered broker
    // and names the active controller (so Kafka's AdminClient sends it admin requests).
    for n in nodes.iter().flatten() {
        wait_listed(n, "before");
        wait_cluster(n, 3, active);
    }
    // Kafka's own kafka-topics through a node that is not the active controller: the
    // AdminClient sends CreateTopics to the controller Metadata names.
    if !support::skip_if(
        support::kafka::missing_kafka(),
        "kafka-topics via a follower",
    ) {
        let follower = (0..3).find(|i| *i != active).expect("a follower");
        let via = nodes[follower].as_ref().expect("follower").bootstrap();
        let out = support::kafka::run_tool(
            "kafka-topics",
            &[
                "--bootstrap-server",
                &via,
                "--create",
                "--topic",
                "via-follower",
                "--partitions",
                "1",
            ],
            None,
            Duration::from_secs(60),
        );
        support::kafka::expect_ok(&out, "kafka-topics --create via a follower");
        for n in nodes.iter().flatten() {
            wait_listed(n, "via-follower");
        }
    }
    // The active controller's process dies; one of the others takes over.
    nodes[active].as_mut().expect("active").kill9();
    nodes[active] = None;
    let second = create_anywhere(&nodes, "after");
    assert_ne!(second, active);
    for n in nodes.iter().flatten() {
        wait_listed(n, "before");
        wait_listed(n, "after");
        wait_cluster(n, 3, second);
    }
}

/// Waits until `node`'s Metadata lists `brokers` brokers and names `controller` as the
/// controller.
fn wait_cluster(node: &Broker, brokers: usize, controller: usize) {
    let started = Instant::now();
    loop {
        let r = connect(&node.bootstrap())
            .send(
                &MetadataRequest::default().with_topics(Some(Vec::new())),
                12,
            )
            .expect("Metadata");
        if r.brokers.len() == brokers && r.controller_id.0 == controller as i32 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{}: brokers {:?}, controller {:?}",
            node.bootstrap(),
            r.brokers.iter().map(|b| b.node_id.0).collect::<Vec<_>>(),
            r.controller_id
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
