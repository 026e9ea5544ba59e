//! Three `twinlog serve` processes sharing one metadata quorum
//! (`controller.quorum.voters`): admin requests are taken by every node (a node that is
//! not the active controller forwards its planned change through the quorum, KIP-590's
//! forwarding); every node's metadata follows what commits, lists every live broker and
//! names the active controller; after a SIGKILL of the active controller's process the
//! others elect one of themselves, fence the dead broker, and admin requests keep
//! working, with all the metadata committed before. Replication is `tests/replication.rs`.
//!
//! Run alone: `cargo test -p twinlog --test controller_quorum`.

mod support;

use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use support::{free_port, Broker};

const REQUEST_TIMED_OUT: i16 = 7;

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

/// Creates `topic` through any live node, retrying while the quorum has no leader (an
/// election).
fn create_anywhere(nodes: &[Option<Broker>], topic: &str) {
    let started = Instant::now();
    loop {
        for (i, n) in nodes.iter().enumerate() {
            let Some(n) = n else { continue };
            match create_on(&n.bootstrap(), topic) {
                (0, _) => return,
                (REQUEST_TIMED_OUT, _) => {}
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

/// The active controller a node's Metadata names.
fn controller_on(bootstrap: &str) -> i32 {
    connect(bootstrap)
        .send(
            &MetadataRequest::default().with_topics(Some(Vec::new())),
            12,
        )
        .expect("Metadata")
        .controller_id
        .0
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
                "\"node.id\" = {id}\n\"process.roles\" = \"broker,controller\"\n\"controller.quorum.voters\" = \"{voters}\"\n\"num.partitions\" = 1\n\"offsets.topic.num.partitions\" = 1\n\"transaction.state.log.num.partitions\" = 1\n\"broker.session.timeout.ms\" = 3000\n"
            )))
        })
        .collect();
    create_anywhere(&nodes, "before");
    let active = controller_on(&nodes[0].as_ref().expect("node 0").bootstrap()) as usize;
    // The others take admin requests too: they forward them through the quorum.
    for (i, n) in nodes.iter().enumerate().filter(|(i, _)| *i != active) {
        let topic = format!("via-node-{i}");
        let (code, message) = create_on(&n.as_ref().expect("node").bootstrap(), &topic);
        assert_eq!(code, 0, "node {i}: {message}");
        for m in nodes.iter().flatten() {
            wait_listed(m, &topic);
        }
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
    // The active controller's process dies; one of the others takes over and fences it.
    nodes[active].as_mut().expect("active").kill9();
    nodes[active] = None;
    create_anywhere(&nodes, "after");
    let survivor = nodes.iter().flatten().next().expect("a survivor");
    let second = controller_on(&survivor.bootstrap()) as usize;
    assert_ne!(second, active);
    for n in nodes.iter().flatten() {
        wait_listed(n, "before");
        wait_listed(n, "after");
        wait_cluster(n, 2, second);
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
