//! Mirroring between two three-node clusters (replication factor 3 on both, each node
//! in a network namespace of its own; loopback and SIGSTOP where namespaces cannot be
//! made), adapted from the KIP-1279 system-test scenarios:
//!
//! * a copy made under a transactional and idempotent load while the destination leader
//!   of a mirrored partition is SIGKILLed mid-copy: its fetcher moves to the new leader
//!   with the partition's state (read back from the `__mirror_state` coordinator, on
//!   whichever broker leads its partition), and afterwards every replica of every
//!   mirrored partition on both clusters holds the same bytes;
//! * the link between the clusters cut for 30 s (every source node cut off): the
//!   partitions go FAILED (source unreachable), are retried with backoff, and resume
//!   once the source is back with no gap and no duplicate; then a source broker leading
//!   a partition is SIGKILLed and restarted under load, and the copy follows;
//! * failover with a destination leader SIGKILLed in the middle of it: every partition
//!   ends STOPPED with exactly one MIRROR_PID_RESET after the mirrored data on every
//!   replica, and producers write to the destination at once;
//! * failover with a transaction still open on the source: each partition ends at the
//!   source's LSO plus one reset, and read_committed consumers read to the end; then,
//!   with writes on both sides, failback: the old source discards exactly its own
//!   post-failover records (found by asking every broker of the new primary for the
//!   LMEs) and ends with the new primary's log on every replica.
//!
//! Run alone: `cargo test -p twinlog --test mirror_cluster` (as root for namespaces).

mod mirror_support;
mod support;

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use dataplane::wire::control::ControlType;
use dataplane::wire::mirror::{DescribedMirror, DescribedMirrorPartition};
use mirror_support::{
    add_topics, assert_same_batches, create_mirror, read_log, remove_topics, rpc,
};
use support::cluster::*;
use support::netns::Net;
use support::{
    assert_success, missing_python_modules, run_python, skip_if, summary_field, venv_python, Broker,
};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const SOURCE: [usize; 3] = [0, 1, 2];
const DESTINATION: [usize; 3] = [3, 4, 5];
/// The destination cluster's id (the source has the harness's [`Broker::TEST_CLUSTER_ID`]).
const DESTINATION_CLUSTER_ID: &str = "RGVzdGluYXRpb25DbHVzdA";

const EXTRA: &str = r#"
"mirror.state.topic.num.partitions" = 3
"mirror.failed.retry.initial.backoff.ms" = 200
"mirror.failed.retry.max.backoff.ms" = 2000
"mirror.metadata.refresh.interval.ms" = 2000
"#;

type Nodes = Vec<Option<Broker>>;

fn start(net: &Net, ids: &[usize], cluster_id: &str) -> Nodes {
    let nodes: Nodes = start_nodes_of(net, ids, ids, "broker,controller", EXTRA, cluster_id)
        .into_iter()
        .map(Some)
        .collect();
    wait_brokers(&nodes, ids.len());
    nodes
}

/// DescribeMirrors of `topic` in `mirror` on every running node, merged by partition:
/// each broker reports the partitions it leads.
fn describe_all(
    nodes: &Nodes,
    mirror: &str,
    topic: &str,
) -> BTreeMap<i32, DescribedMirrorPartition> {
    let mut out = BTreeMap::new();
    for n in nodes.iter().flatten() {
        let Some(_) = connect(&n.bootstrap()) else {
            continue;
        };
        let request = dataplane::wire::mirror::MirrorRequest::DescribeMirrors(
            dataplane::wire::mirror::DescribeMirrorsRequest {
                mirror_names: Some(vec![mirror.to_string()]),
                ..Default::default()
            },
        );
        let described: Option<DescribedMirror> =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                rpc(&n.bootstrap(), request)
            }))
            .ok()
            .and_then(|r| match r {
                dataplane::wire::mirror::MirrorResponse::DescribeMirrors(mut r)
                    if !r.mirrors.is_empty() =>
                {
                    Some(r.mirrors.remove(0))
                }
                _ => None,
            });
        for t in described.into_iter().flat_map(|d| d.topics) {
            if t.name != topic {
                continue;
            }
            for p in t.partitions {
                out.insert(p.partition, p);
            }
        }
    }
    out
}

/// The states of the mirrored partitions, for messages.
fn states(d: &BTreeMap<i32, DescribedMirrorPartition>) -> String {
    d.values()
        .map(|p| {
            format!(
                "{}:{}@{}{}",
                p.partition,
                p.state,
                p.destination_offset,
                p.error_message
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn node(nodes: &Nodes, index: usize) -> &Broker {
    nodes
        .iter()
        .flatten()
        .find(|n| node_id(n) == index)
        .unwrap_or_else(|| panic!("node {index} is not running"))
}

/// A node's id, from the config it was started with.
fn node_id(n: &Broker) -> usize {
    std::fs::read_to_string(n.dir().join("twinlog.toml"))
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("\"node.id\" = "))
                .and_then(|v| v.trim().parse().ok())
        })
        .expect("node.id in the config")
}

/// Mirror `name`, created through `on` with `configs`, copying `topic` from `from`.
fn start_mirror(on: &str, name: &str, from: &Nodes, topic: &str, configs: &[(&str, &str)]) {
    let r = create_mirror(on, name, &bootstrap_all(from), configs);
    assert_eq!(r.error_code, 0, "create mirror {name}: {r:?}");
    let r = add_topics(on, name, &[topic]);
    assert_eq!(r.error_code, 0, "add {topic} to {name}: {r:?}");
}

/// Every batch of `topic`-`partition` as its leader in `nodes` serves it, asked again
/// while leadership settles (a node's Metadata may still name the old leader).
fn read_at_leader(nodes: &Nodes, topic: &str, partition: i32) -> Vec<dataplane::wire::RecordBatch> {
    until(Duration::from_secs(30), || {
        let leader = node(nodes, leader_of(nodes, topic, partition)).bootstrap();
        std::panic::catch_unwind(|| read_log(&leader, topic, partition))
            .map_err(|_| format!("{topic}-{partition} not readable at {leader} yet"))
    })
}

/// Each partition's log end on its leader in `nodes`.
fn log_ends_of(nodes: &Nodes, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    (0..partitions)
        .map(|p| {
            let end = read_at_leader(nodes, topic, p)
                .last()
                .map_or(0, |b| b.next_offset().0);
            (p, end)
        })
        .collect()
}

fn log_ends(nodes: &Nodes) -> BTreeMap<i32, i64> {
    log_ends_of(nodes, TOPIC, PARTITIONS)
}

/// Waits until every partition of `topic` in `mirror` on `destination` is MIRRORING at
/// the log end `source` has.
fn wait_mirrored(
    (source, destination): (&Nodes, &Nodes),
    mirror: &str,
    (topic, partitions): (&str, i32),
    what: &str,
) {
    let ends = log_ends_of(source, topic, partitions);
    until(Duration::from_secs(180), || {
        let d = describe_all(destination, mirror, topic);
        let ok = ends.iter().all(|(p, end)| {
            d.get(p)
                .is_some_and(|x| x.state == "MIRRORING" && x.destination_offset == *end)
        });
        done(
            ok,
            format!("{what}: ends {ends:?}, destination {}", states(&d)),
        )
    });
}

fn wait_caught_up(source: &Nodes, destination: &Nodes, what: &str) {
    wait_mirrored((source, destination), "dr", (TOPIC, PARTITIONS), what);
}

/// Every replica of every partition on both clusters holds the same bytes.
fn assert_all_replicas_identical(source: &Nodes, destination: &Nodes) {
    assert_replicas_identical(source, TOPIC, PARTITIONS);
    assert_replicas_identical(destination, TOPIC, PARTITIONS);
    for p in 0..PARTITIONS {
        let a = replica_bytes(&node(source, SOURCE[0]).data_dir(), TOPIC, p);
        let b = replica_bytes(&node(destination, DESTINATION[0]).data_dir(), TOPIC, p);
        assert!(
            a == b,
            "{TOPIC}-{p}: source and destination replicas differ ({} and {} bytes)",
            a.len(),
            b.len()
        );
    }
}

/// `mirror_load.py` through `nodes` into `topic` over `partitions` partitions.
fn load_into(
    py: &std::path::Path,
    nodes: &Nodes,
    (topic, partitions): (&str, i32),
    extra: &[&str],
) -> String {
    let bootstrap = bootstrap_all(nodes);
    let p = partitions.to_string();
    let mut a = vec![
        "--bootstrap",
        &bootstrap,
        "--topic",
        topic,
        "--partitions",
        &p,
    ];
    a.extend_from_slice(extra);
    let out = run_python(py, "mirror_load.py", &a, Duration::from_secs(240));
    assert_success(&out, nodes.iter().flatten().next().expect("a node"));
    out.stdout
}

fn load(py: &std::path::Path, nodes: &Nodes, extra: &[&str]) -> String {
    load_into(py, nodes, (TOPIC, PARTITIONS), extra)
}

#[test]
fn mirroring_between_three_node_clusters_survives_broker_loss_a_cut_link_and_fails_over() {
    let test =
        "mirroring_between_three_node_clusters_survives_broker_loss_a_cut_link_and_fails_over";
    let py = venv_python();
    if skip_if(missing_python_modules(&py, &["confluent_kafka"]), test) {
        return;
    }
    let net = Net::new(6);
    let mut source = start(&net, &SOURCE, Broker::TEST_CLUSTER_ID);
    let mut destination = start(&net, &DESTINATION, DESTINATION_CLUSTER_ID);
    create_topic(&source, TOPIC, PARTITIONS, &[]);
    wait_isr(node(&source, 0), TOPIC, PARTITIONS, 3);
    let out = load(&py, &source, &["--count", "40000", "--txn-rounds", "4"]);
    assert_eq!(summary_field(&out, "acked"), 40_000);

    // The mirror, created and fed through any destination node.
    let dest_any = node(&destination, DESTINATION[1]).bootstrap();
    // Timeouts short enough that a cut link shows within the cut.
    let timeouts = [
        ("request.timeout.ms", "5000"),
        ("socket.connection.setup.timeout.ms", "2000"),
    ];
    start_mirror(&dest_any, "dr", &source, TOPIC, &timeouts);

    // SIGKILL the destination leader of partition 0 as soon as it mirrors.
    until(Duration::from_secs(60), || {
        let d = describe_all(&destination, "dr", TOPIC);
        done(
            d.get(&0).is_some_and(|p| p.state == "MIRRORING"),
            states(&d),
        )
    });
    let victim = leader_of(&destination, TOPIC, 0);
    eprintln!("[mirror-cluster] SIGKILL of destination node {victim}, the leader of {TOPIC}-0");
    let slot = destination
        .iter()
        .position(|n| n.as_ref().is_some_and(|n| node_id(n) == victim))
        .expect("victim");
    let mut killed = destination[slot].take().expect("running");
    killed.kill9();
    until(Duration::from_secs(30), || {
        let l = leader_of(&destination, TOPIC, 0);
        done(l != victim, format!("{TOPIC}-0 still led by {l}"))
    });
    wait_caught_up(&source, &destination, "after the leader's death");
    killed.restart_after_stop();
    destination[slot] = Some(killed);
    wait_isr(node(&destination, DESTINATION[0]), TOPIC, PARTITIONS, 3);
    wait_caught_up(&source, &destination, "with the killed node back");
    assert_all_replicas_identical(&source, &destination);

    // The link between the clusters cut for 30 s: FAILED, retried, resumed.
    for (i, n) in source.iter().enumerate() {
        net.cut(SOURCE[i], n.as_ref().expect("running"));
    }
    let cut_at = Instant::now();
    let mut failed_seen = None;
    while cut_at.elapsed() < Duration::from_secs(30) {
        let d = describe_all(&destination, "dr", TOPIC);
        if failed_seen.is_none() && d.values().any(|p| p.state == "FAILED") {
            eprintln!(
                "[mirror-cluster] {:?} into the cut: {}",
                cut_at.elapsed(),
                states(&d)
            );
            failed_seen = Some(cut_at.elapsed());
        }
        thread::sleep(Duration::from_millis(500));
    }
    for (i, n) in source.iter().enumerate() {
        net.heal(SOURCE[i], n.as_ref().expect("running"));
    }
    assert!(
        failed_seen.is_some(),
        "no partition went FAILED while the source was unreachable: {}",
        states(&describe_all(&destination, "dr", TOPIC))
    );
    wait_brokers(&source, 3);
    wait_isr(node(&source, 0), TOPIC, PARTITIONS, 3);
    // Under load, the source leader of partition 2 SIGKILLed and restarted: the mirror
    // follows the source's leader moves.
    let bootstrap = bootstrap_all(&source);
    let p = PARTITIONS.to_string();
    let mut late = support::spawn_python(
        &py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &bootstrap,
            "--topic",
            TOPIC,
            "--partitions",
            &p,
            "--count",
            "30000",
            "--prefix",
            "late",
        ],
        node(&source, 0).dir(),
        "late-producer",
    );
    thread::sleep(Duration::from_secs(1));
    let victim = leader_of(&source, TOPIC, 2);
    eprintln!("[mirror-cluster] SIGKILL and restart of source node {victim} under load");
    source
        .iter_mut()
        .flatten()
        .find(|n| node_id(n) == victim)
        .expect("victim")
        .restart_kill9();
    // Then, still under load, the destination leader of the same partition: its fetcher
    // moves to a new leader, which must go on from exactly where the copy ends.
    let victim = leader_of(&destination, TOPIC, 2);
    eprintln!("[mirror-cluster] SIGKILL and restart of destination node {victim} under load");
    destination
        .iter_mut()
        .flatten()
        .find(|n| node_id(n) == victim)
        .expect("victim")
        .restart_kill9();
    let status = support::wait_child(&mut late, Duration::from_secs(180));
    assert!(
        status.is_some_and(|s| s.success()),
        "the load through a source broker's restart: {status:?}"
    );
    wait_isr(node(&source, 0), TOPIC, PARTITIONS, 3);
    wait_isr(node(&destination, DESTINATION[0]), TOPIC, PARTITIONS, 3);
    wait_caught_up(&source, &destination, "after the cut and both bounces");
    assert_all_replicas_identical(&source, &destination);

    // Every source broker SIGKILLed: each partition goes FAILED and is retried with
    // backoff, attempt after attempt; once the brokers are back (with more records),
    // the mirror resumes on its own.
    for n in source.iter_mut().flatten() {
        n.kill9();
    }
    let down_at = Instant::now();
    until(Duration::from_secs(90), || {
        let d = describe_all(&destination, "dr", TOPIC);
        done(
            d.len() == PARTITIONS as usize
                && d.values()
                    .all(|p| p.state == "FAILED" && p.retry_attempt >= 3),
            format!(
                "{} (retry attempts {:?})",
                states(&d),
                d.values().map(|p| p.retry_attempt).collect::<Vec<_>>()
            ),
        )
    });
    eprintln!(
        "[mirror-cluster] {:?} after the source died: every partition FAILED, retried 3 times",
        down_at.elapsed()
    );
    thread::scope(|s| {
        for n in source.iter_mut().flatten() {
            s.spawn(move || n.restart_after_stop());
        }
    });
    wait_brokers(&source, 3);
    wait_isr(node(&source, 0), TOPIC, PARTITIONS, 3);
    let out = load(&py, &source, &["--count", "5000", "--prefix", "back"]);
    assert_eq!(summary_field(&out, "acked"), 5000);
    wait_caught_up(&source, &destination, "after the whole source came back");
    until(Duration::from_secs(30), || {
        let d = describe_all(&destination, "dr", TOPIC);
        done(
            d.values().all(|p| p.retry_attempt <= 0),
            format!("a healthy fetcher clears the retry count: {d:?}"),
        )
    });
    assert_all_replicas_identical(&source, &destination);
    let before = log_ends(&destination);

    // Failover, with the leader of partition 1 SIGKILLed in the middle of STOPPING.
    let r = remove_topics(&dest_any, "dr", &[TOPIC]);
    assert_eq!(r.error_code, 0, "remove: {r:?}");
    let victim = leader_of(&destination, TOPIC, 1);
    let slot = destination
        .iter()
        .position(|n| n.as_ref().is_some_and(|n| node_id(n) == victim))
        .expect("victim");
    destination[slot].as_mut().expect("running").kill9();
    eprintln!("[mirror-cluster] SIGKILL of destination node {victim} during STOPPING");
    until(Duration::from_secs(60), || {
        let d = describe_all(&destination, "dr", TOPIC);
        done(
            d.len() == PARTITIONS as usize && d.values().all(|p| p.state == "STOPPED"),
            states(&d),
        )
    });
    destination[slot]
        .as_mut()
        .expect("stopped node")
        .restart_after_stop();
    wait_isr(node(&destination, DESTINATION[0]), TOPIC, PARTITIONS, 3);
    assert_replicas_identical(&destination, TOPIC, PARTITIONS);
    // Every partition: the mirrored data, then exactly one MIRROR_PID_RESET.
    for p in 0..PARTITIONS {
        let batches = read_at_leader(&destination, TOPIC, p);
        let resets: Vec<i64> = batches
            .iter()
            .filter(|b| {
                b.is_control()
                    && b.control_record()
                        .is_ok_and(|c| c.kind == ControlType::MirrorPidReset)
            })
            .map(|b| b.base_offset().0)
            .collect();
        assert_eq!(
            resets,
            vec![before[&p]],
            "{TOPIC}-{p}: one MIRROR_PID_RESET right after the mirrored data"
        );
    }
    // Writable at once, on every partition.
    let out = load(&py, &destination, &["--count", "3000", "--prefix", "post"]);
    assert_eq!(summary_field(&out, "acked"), 3000);
    for n in source.iter().chain(destination.iter()).flatten() {
        let (_, _, panicked) = n.log_problems();
        assert!(!panicked, "a node panicked\n{}", n.log_tail(60));
    }
}

/// The last stable offset of `topic`-`partition` on its leader in `nodes` (ListOffsets,
/// read_committed, latest).
fn last_stable_offset(nodes: &Nodes, topic: &str, partition: i32) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let leader = node(nodes, leader_of(nodes, topic, partition));
    let mut c = connect(&leader.bootstrap()).expect("connect to the leader");
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(1)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)])]);
    let r = c.send(&req, 4).expect("ListOffsets");
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "ListOffsets {topic}-{partition}: {p:?}");
    p.offset
}

/// The node index that leads `topic`-`partition` in `nodes`.
fn leader_of(nodes: &Nodes, topic: &str, partition: i32) -> usize {
    until(Duration::from_secs(30), || {
        for n in nodes.iter().flatten() {
            if let Some((leader, _)) = leaders(n, topic).get(&partition) {
                if *leader >= 0 {
                    return Ok(*leader as usize);
                }
            }
        }
        Err(format!("no leader of {topic}-{partition}"))
    })
}

/// Batches of every partition of `topic` read from each cluster's leaders are the same.
fn assert_leaders_identical(a: &Nodes, b: &Nodes, topic: &str, partitions: i32) {
    for p in 0..partitions {
        let (left, right) = (read_at_leader(a, topic, p), read_at_leader(b, topic, p));
        assert_same_batches(&left, &right, topic, p);
    }
}

/// Stop with a pending transaction, then failback with writes on both sides:
/// after failover each partition of the destination ends exactly at the source's LSO
/// plus one MIRROR_PID_RESET and read_committed consumers read to the end there; then
/// the old source, which took writes of its own meanwhile, mirrors back from the new
/// primary: its PREPARING asks every broker of the other cluster for the LMEs, discards
/// exactly its own post-failover records (the open transaction's and its tail), and it
/// ends with the new primary's log on every replica.
#[test]
fn a_pending_transaction_at_failover_and_a_failback_between_three_node_clusters() {
    let test = "a_pending_transaction_at_failover_and_a_failback_between_three_node_clusters";
    let py = venv_python();
    if skip_if(missing_python_modules(&py, &["confluent_kafka"]), test) {
        return;
    }
    const LEDGER: &str = "ledger";
    const PARTS: i32 = 3;
    let net = Net::new(6);
    let source = start(&net, &SOURCE, Broker::TEST_CLUSTER_ID);
    let destination = start(&net, &DESTINATION, DESTINATION_CLUSTER_ID);
    create_topic(&source, LEDGER, PARTS, &[]);
    wait_isr(node(&source, 0), LEDGER, PARTS, 3);
    let run = |nodes: &Nodes, extra: &[&str]| load_into(&py, nodes, (LEDGER, PARTS), extra);
    run(&source, &["--count", "6000", "--txn-rounds", "2"]);
    // A transaction left open on the source.
    let bootstrap = bootstrap_all(&source);
    let p = PARTS.to_string();
    let mut open = support::spawn_python(
        &py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &bootstrap,
            "--topic",
            LEDGER,
            "--partitions",
            &p,
            "--txn-rounds",
            "1",
            "--txn-records",
            "30",
            "--open-txn",
            "--prefix",
            "open",
            "--txn-id",
            "open-txn",
            "--txn-timeout-ms",
            "600000",
        ],
        node(&source, 0).dir(),
        "open-txn",
    );
    let lsos: BTreeMap<i32, i64> = until(Duration::from_secs(60), || {
        let lsos: BTreeMap<i32, i64> = (0..PARTS)
            .map(|p| (p, last_stable_offset(&source, LEDGER, p)))
            .collect();
        let ends = log_ends_of(&source, LEDGER, PARTS);
        let open_everywhere = (0..PARTS).all(|p| ends[&p] > lsos[&p]);
        if open_everywhere {
            Ok(lsos)
        } else {
            Err(format!(
                "the open transaction is not in every partition yet: LSOs {lsos:?}, ends {ends:?}"
            ))
        }
    });

    let dest_any = node(&destination, DESTINATION[2]).bootstrap();
    start_mirror(&dest_any, "dr", &source, LEDGER, &[]);
    // Caught up, the open transaction's records included.
    wait_mirrored(
        (&source, &destination),
        "dr",
        (LEDGER, PARTS),
        "the first copy",
    );

    // Failover with the transaction still open.
    let r = remove_topics(&dest_any, "dr", &[LEDGER]);
    assert_eq!(r.error_code, 0, "remove: {r:?}");
    until(Duration::from_secs(60), || {
        let d = describe_all(&destination, "dr", LEDGER);
        done(
            d.len() == PARTS as usize && d.values().all(|p| p.state == "STOPPED"),
            states(&d),
        )
    });
    for p in 0..PARTS {
        let leader = node(&destination, leader_of(&destination, LEDGER, p));
        let batches = read_at_leader(&destination, LEDGER, p);
        let last = batches.last().expect("batches");
        assert!(
            last.is_control()
                && last
                    .control_record()
                    .is_ok_and(|c| c.kind == ControlType::MirrorPidReset),
            "{LEDGER}-{p}: the log ends with the reset"
        );
        if last.base_offset().0 != lsos[&p] {
            let show = |bs: &[dataplane::wire::RecordBatch]| {
                bs.iter()
                    .filter(|b| b.last_offset().0 >= lsos[&p] - 40)
                    .map(|b| {
                        format!(
                            "{}..={} pid {} txn {} ctl {} epoch {}",
                            b.base_offset().0,
                            b.last_offset().0,
                            b.producer_id().0,
                            b.is_transactional(),
                            b.is_control(),
                            b.partition_leader_epoch().0
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let src = read_log(
                &node(&source, leader_of(&source, LEDGER, p)).bootstrap(),
                LEDGER,
                p,
            );
            panic!(
                "{LEDGER}-{p}: reset at {}, the source's LSO is {}\ndestination:\n{}\nsource:\n{}\n{}",
                last.base_offset().0,
                lsos[&p],
                show(&batches),
                show(&src),
                leader.log_tail(60)
            );
        }
    }
    assert_replicas_identical(&destination, LEDGER, PARTS);
    // read_committed reads to the end, without the open transaction's records.
    let consume = |nodes: &Nodes| {
        let bootstrap = bootstrap_all(nodes);
        let p = PARTS.to_string();
        let out = run_python(
            &py,
            "mirror_consume.py",
            &[
                "--bootstrap",
                &bootstrap,
                "--topic",
                LEDGER,
                "--partitions",
                &p,
            ],
            Duration::from_secs(120),
        );
        assert_success(&out, nodes.iter().flatten().next().expect("a node"));
        out.stdout
    };
    let seen = consume(&destination);
    assert!(
        seen.contains("\"complete\": true") && !seen.contains("\"open\""),
        "read_committed on the new primary: {seen}"
    );

    // Writes on both sides: the old source takes a tail of its own, the new primary new data.
    run(&source, &["--count", "300", "--prefix", "tail"]);
    run(&destination, &["--count", "2000", "--prefix", "post"]);
    let _ = open.kill();
    let _ = open.wait();

    // Failback: the old source mirrors from the new primary.
    let source_any = node(&source, SOURCE[1]).bootstrap();
    start_mirror(&source_any, "back", &destination, LEDGER, &[]);
    wait_mirrored(
        (&destination, &source),
        "back",
        (LEDGER, PARTS),
        "the failback",
    );
    // (the replicas first: a leader's Fetch stops at its high watermark)
    assert_replicas_identical(&source, LEDGER, PARTS);
    assert_leaders_identical(&destination, &source, LEDGER, PARTS);
    // `twinlog mirror describe`, asked of one broker, shows every partition: each
    // broker reports the ones it leads and the CLI merges them.
    let out = support::run_command(
        std::process::Command::new(env!("CARGO_BIN_EXE_twinlog"))
            .args(["mirror", "describe", "back", "--json", "--bootstrap-server"])
            .arg(&source_any),
        None,
        Duration::from_secs(30),
    );
    assert!(out.success(), "{}", out.describe());
    assert_eq!(
        out.stdout.matches("\"state\":\"MIRRORING\"").count(),
        PARTS as usize,
        "{}",
        out.stdout
    );
    // Exactly the old source's own post-failover records were discarded: the open
    // transaction's 30 and the 300 of its tail.
    let d = describe_all(&source, "back", LEDGER);
    let discarded: i64 = d.values().map(|p| p.truncated_records.max(0)).sum();
    assert_eq!(
        discarded,
        330,
        "records the failback discarded: {}",
        states(&d)
    );
    let seen = consume(&source);
    assert!(
        !seen.contains("\"tail\"") && !seen.contains("\"open\"") && seen.contains("\"post\": 2000"),
        "the old source reads the new primary's history: {seen}"
    );
}

/// The log end of `topic`-0 on its leader in `nodes`.
fn end_of(nodes: &Nodes, topic: &str) -> i64 {
    log_ends_of(nodes, topic, 1)[&0]
}

/// A source unclean election, mirrored: the source's only in-sync replica dies after a
/// record the mirror has already copied, and an out-of-sync replica is elected
/// (`unclean.leader.election.enable`). The copy must follow the source's new history:
/// the fetcher cuts the record the source no longer has and, before copying past the
/// cut, waits for its replicas to drop it too (reference §10.3). With
/// `mirror.support.unclean.leader.election=true` on the destination topic that is every
/// assigned replica (a stopped follower holds the copy back until it returns); without,
/// the ISR (the copy goes on while the follower is away, and the follower truncates
/// when it comes back). Afterwards every destination replica of both topics holds the
/// bytes of the source's new leader.
#[test]
fn a_source_unclean_election_is_followed_with_and_without_mirror_support_unclean_leader_election() {
    let test = "a_source_unclean_election_is_followed_with_and_without_mirror_support_unclean_leader_election";
    if skip_if(support::kafka::missing_kafka(), test)
        || skip_if(support::missing_program("kcat"), test)
    {
        return;
    }
    const ALL: &str = "ule-all";
    const ISR: &str = "ule-isr";
    let net = Net::new(6);
    let mut source = start(&net, &SOURCE, Broker::TEST_CLUSTER_ID);
    let destination = start(&net, &DESTINATION, DESTINATION_CLUSTER_ID);
    let via = bootstrap_all(&source);
    // Both topics on source nodes 1 (preferred leader) and 2; node 0 only votes.
    for topic in [ALL, ISR] {
        create_topic_on_replicas(&via, topic, "1:2", true);
        wait_isr(node(&source, 0), topic, 1, 2);
        kcat_one(&via, topic, "a");
    }
    let dest_any = node(&destination, DESTINATION[0]).bootstrap();
    // Timeouts short enough that a stopped source node costs seconds, not minutes.
    let timeouts = [
        ("request.timeout.ms", "5000"),
        ("socket.connection.setup.timeout.ms", "2000"),
    ];
    let r = create_mirror(&dest_any, "ule", &via, &timeouts);
    assert_eq!(r.error_code, 0, "create mirror: {r:?}");
    let r = add_topics(&dest_any, "ule", &[ALL, ISR]);
    assert_eq!(r.error_code, 0, "add topics: {r:?}");
    for topic in [ALL, ISR] {
        wait_mirrored(
            (&source, &destination),
            "ule",
            (topic, 1),
            "the first record",
        );
    }
    let out = support::kafka::run_tool(
        "kafka-configs",
        &[
            "--bootstrap-server",
            &bootstrap_all(&destination),
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            ALL,
            "--add-config",
            "mirror.support.unclean.leader.election=true",
        ],
        None,
        Duration::from_secs(60),
    );
    support::kafka::expect_ok(&out, "kafka-configs --add-config mirror.support...=true");

    // Source node 2 stops: it leaves both ISRs, and "b" reaches node 1 alone, then the
    // destination (every destination replica).
    source[2].as_ref().expect("node 2").signal("STOP");
    for topic in [ALL, ISR] {
        wait_isr(node(&source, 0), topic, 1, 1);
        kcat_one(&bootstrap_all(&source[..2]), topic, "b");
        let topic_end = end_of(&source, topic);
        assert_eq!(topic_end, 2, "{topic} on the source");
        let waited = std::panic::catch_unwind(|| {
            wait_mirrored(
                (&source, &destination),
                "ule",
                (topic, 1),
                "the record node 1 alone has",
            )
        });
        if let Err(e) = waited {
            eprintln!("describe: {:?}", describe_all(&destination, "ule", topic));
            print_logs(&destination, &source, topic);
            std::panic::resume_unwind(e);
        }
        wait_isr(node(&destination, DESTINATION[0]), topic, 1, 3);
    }
    // A destination follower of both partitions stops (it keeps "b").
    let leaders: Vec<usize> = [ALL, ISR]
        .iter()
        .map(|t| leader_of(&destination, t, 0))
        .collect();
    let away = *DESTINATION
        .iter()
        .find(|n| !leaders.contains(n))
        .expect("a node that leads neither");
    let away_slot = DESTINATION.iter().position(|n| *n == away).expect("slot");
    let watcher = DESTINATION[(away_slot + 1) % 3];
    eprintln!("[mirror-cluster] SIGSTOP of destination node {away} (leaders {leaders:?})");
    destination[away_slot]
        .as_ref()
        .expect("running")
        .signal("STOP");
    for topic in [ALL, ISR] {
        wait_isr(node(&destination, watcher), topic, 1, 2);
    }

    // Node 1, the source's whole ISR, dies; node 2 comes back out of sync and is
    // elected uncleanly: the source's history no longer has "b".
    source[1].as_mut().expect("node 1").kill9();
    source[2].as_ref().expect("node 2").signal("CONT");
    let n0 = node(&source, 0);
    until(Duration::from_secs(90), || {
        let l: Vec<_> = [ALL, ISR].iter().map(|t| leaders_of_zero(n0, t)).collect();
        done(
            l.iter().all(|x| *x == 2),
            format!("source leaders {l:?}\n{}", n0.log_tail(20)),
        )
    });
    let live = bootstrap_all(&source);
    for topic in [ALL, ISR] {
        kcat_one(&live, topic, "c");
    }

    // Without the option the copy follows at once ("b" cut, "c" copied) though a
    // replica is away; with it, nothing past the cut until that replica is back.
    wait_mirrored(
        (&source, &destination),
        "ule",
        (ISR, 1),
        "the ISR topic after the election",
    );
    let held = Instant::now();
    while held.elapsed() < Duration::from_secs(5) {
        let values = values_at_leader(&destination, ALL);
        if values.contains(&b"c".to_vec()) {
            print_logs(&destination, &source, "ule-");
            panic!("{ALL} copied past the cut with replica {away} away: {values:?}");
        }
        thread::sleep(Duration::from_millis(250));
    }
    destination[away_slot]
        .as_ref()
        .expect("stopped")
        .signal("CONT");
    wait_mirrored(
        (&source, &destination),
        "ule",
        (ALL, 1),
        "every replica back",
    );

    // Every destination replica holds the new leader's bytes; "b" is gone.
    let new_leader = node(&source, 2).data_dir();
    for topic in [ALL, ISR] {
        assert_replicas_identical(&destination, topic, 1);
        let expected = replica_bytes(&new_leader, topic, 0);
        let copy = replica_bytes(&node(&destination, DESTINATION[0]).data_dir(), topic, 0);
        assert!(
            expected == copy,
            "{topic}: destination differs from the source's new leader"
        );
        assert_eq!(
            values_at_leader(&destination, topic),
            vec![b"a".to_vec(), b"c".to_vec()],
            "{topic} on the destination"
        );
    }
    for topic in [ALL, ISR] {
        let d = describe_all(&destination, "ule", topic);
        assert!(
            d.len() == 1 && d.values().all(|p| p.state == "MIRRORING"),
            "{topic} after the election: {}",
            states(&d)
        );
    }
}

/// For a failure: each node's log lines about `topic`, and its warnings.
fn print_logs(destination: &Nodes, source: &Nodes, topic: &str) {
    for n in destination.iter().chain(source.iter()).flatten() {
        let tail = n.log_tail(3000);
        let lines: Vec<&str> = tail
            .lines()
            .filter(|l| (l.contains(topic) || l.contains("WARN")) && !l.contains("replica:"))
            .collect();
        eprintln!(
            "=== node {}\n{}",
            node_id(n),
            lines[lines.len().saturating_sub(120)..].join("\n")
        );
    }
}

/// The record values of `topic`-0 as its leader in `nodes` serves them.
fn values_at_leader(nodes: &Nodes, topic: &str) -> Vec<Vec<u8>> {
    read_at_leader(nodes, topic, 0)
        .iter()
        .flat_map(|b| dataplane::wire::records::batch_records(b).unwrap_or_default())
        .filter_map(|r| r.value.map(|v| v.to_vec()))
        .collect()
}

/// The leader of `topic`-0 as `n` sees it, -1 for none.
fn leaders_of_zero(n: &Broker, topic: &str) -> i32 {
    leaders(n, topic).get(&0).map_or(-1, |(l, _)| *l)
}
