//! Replica placement, elections and ISR changes as the controller's state applies them.

use super::*;

fn settings(node_id: i32) -> NodeSettings {
    NodeSettings {
        cluster_id: "c".into(),
        node_id,
        advertised: "127.0.0.1:9092".parse().expect("addr"),
        default_log_config: LogConfig::default(),
        num_partitions: 1,
        shard_count: 2,
        mirror_state_partitions: 3,
        rack: None,
        default_replication_factor: 3,
        internal_replication_factor: 3,
        expected_brokers: 3,
        listeners: Vec::new(),
    }
}

fn register(state: &mut ControllerState, node: i32, rack: Option<&str>) {
    state
        .apply(&MetadataRecord::RegisterBroker {
            node_id: node,
            host: "127.0.0.1".into(),
            port: 9092 + node,
            rack: rack.map(str::to_string),
            listeners: Vec::new(),
        })
        .expect("register");
}

fn cluster(nodes: i32) -> ControllerState {
    let mut state = ControllerState::new(settings(0));
    for n in 0..nodes {
        register(&mut state, n, None);
    }
    state
}

fn create(state: &mut ControllerState, name: &str, partitions: i32, factor: i16) -> Vec<i16> {
    let plan = state.plan(
        &AdminRequest::CreateTopics {
            topics: vec![NewTopic {
                name: name.into(),
                num_partitions: partitions,
                replication_factor: factor,
                assignments: Vec::new(),
                configs: Vec::new(),
            }],
            validate_only: false,
        },
        &mut || uuid::Uuid::new_v4(),
    );
    for r in &plan.records {
        state.apply(r).expect("apply");
    }
    match plan.response {
        AdminResponse::Results(r) => r.iter().map(|r| r.error_code).collect(),
        other => panic!("{other:?}"),
    }
}

fn partition(state: &ControllerState, name: &str, p: usize) -> PartitionImage {
    state.topic(name).expect("topic").partitions[p].clone()
}

fn apply_all(state: &mut ControllerState, records: &[MetadataRecord]) {
    for r in records {
        state.apply(r).expect("apply");
    }
}

#[test]
fn replicas_spread_leaders_and_followers_over_every_broker() {
    let brokers: Vec<(i32, Option<String>)> = (0..3).map(|b| (b, None)).collect();
    let lists = assign_replicas(&brokers, "orders", 0, 6, 3);
    assert_eq!(lists.len(), 6);
    for l in &lists {
        let distinct: BTreeSet<i32> = l.iter().copied().collect();
        assert_eq!(distinct.len(), 3, "{l:?}");
    }
    let mut leaders = [0; 3];
    for l in &lists {
        leaders[l[0] as usize] += 1;
    }
    assert_eq!(leaders, [2, 2, 2], "leaders spread evenly: {lists:?}");
    // Deterministic: the same plan wherever it is made.
    assert_eq!(lists, assign_replicas(&brokers, "orders", 0, 6, 3));
}

#[test]
fn with_racks_a_partitions_replicas_land_on_different_racks() {
    let brokers = vec![
        (0, Some("a".to_string())),
        (1, Some("a".to_string())),
        (2, Some("b".to_string())),
        (3, Some("b".to_string())),
    ];
    for l in assign_replicas(&brokers, "t", 0, 8, 2) {
        let racks: BTreeSet<&str> = l
            .iter()
            .map(|b| brokers[*b as usize].1.as_deref().unwrap_or(""))
            .collect();
        assert_eq!(racks.len(), 2, "{l:?}");
    }
}

#[test]
fn create_topics_places_the_replication_factor_and_refuses_more_than_the_brokers() {
    let mut state = cluster(3);
    assert_eq!(create(&mut state, "t", 4, -1), vec![0], "default factor 3");
    let p = partition(&state, "t", 0);
    assert_eq!(p.replicas.len(), 3);
    assert_eq!(p.isr, p.replicas);
    assert_eq!(p.leader, p.replicas[0]);
    assert_eq!(
        create(&mut state, "u", 1, 4),
        vec![ResponseError::InvalidReplicationFactor.code()]
    );
    // A fenced broker takes no new replicas.
    state
        .apply(&MetadataRecord::FenceBroker { node_id: 2 })
        .expect("fence");
    assert_eq!(
        create(&mut state, "v", 1, 3),
        vec![ResponseError::InvalidReplicationFactor.code()]
    );
    assert_eq!(create(&mut state, "w", 2, 2), vec![0]);
    assert!(partition(&state, "w", 0).replicas.iter().all(|r| *r != 2));
}

#[test]
fn a_fenced_leader_is_replaced_by_the_next_in_sync_replica_at_a_new_epoch() {
    let mut state = cluster(3);
    create(&mut state, "t", 1, 3);
    let before = partition(&state, "t", 0);
    let leader = before.leader;
    state
        .apply(&MetadataRecord::FenceBroker { node_id: leader })
        .expect("fence");
    let records = state.election_records();
    assert_eq!(records.len(), 1);
    apply_all(&mut state, &records);
    let after = partition(&state, "t", 0);
    assert_ne!(after.leader, leader);
    assert!(before.isr.contains(&after.leader));
    assert!(!after.isr.contains(&leader));
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert_eq!(after.partition_epoch, before.partition_epoch + 1);
    assert!(state.election_records().is_empty(), "settled");
    // The old leader comes back: it is not in the ISR, so it does not lead; its leader
    // adds it to the ISR once it caught up (AlterPartition).
    state
        .apply(&MetadataRecord::UnfenceBroker { node_id: leader })
        .expect("unfence");
    assert!(state.election_records().is_empty());
}

#[test]
fn with_no_live_in_sync_replica_the_partition_is_offline_until_one_returns() {
    let mut state = cluster(3);
    create(&mut state, "t", 1, 3);
    let p = partition(&state, "t", 0);
    let topic_id = state.topic("t").expect("t").id;
    // The ISR shrinks to the leader alone, then the leader goes.
    apply_all(
        &mut state,
        &[MetadataRecord::AlterPartition {
            topic_id,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: vec![p.leader],
        }],
    );
    state
        .apply(&MetadataRecord::FenceBroker { node_id: p.leader })
        .expect("fence");
    let records = state.election_records();
    apply_all(&mut state, &records);
    let offline = partition(&state, "t", 0);
    assert_eq!(offline.leader, -1, "no clean candidate");
    assert_eq!(
        offline.isr,
        vec![p.leader],
        "the last in-sync replica is kept"
    );
    // It comes back and leads again, cleanly.
    state
        .apply(&MetadataRecord::UnfenceBroker { node_id: p.leader })
        .expect("unfence");
    let records = state.election_records();
    apply_all(&mut state, &records);
    assert_eq!(partition(&state, "t", 0).leader, p.leader);
}

#[test]
fn unclean_election_takes_a_live_replica_out_of_the_isr_only_when_enabled() {
    let shrunk = PartitionImage {
        partition: 0,
        leader: 0,
        leader_epoch: 4,
        partition_epoch: 9,
        replicas: vec![0, 1, 2],
        isr: vec![0],
        adding: Vec::new(),
        removing: Vec::new(),
        shard: 0,
    };
    let live = |b: i32| b != 0;
    let clean = elect(&shrunk, live, false).expect("changes");
    assert_eq!((clean.leader, clean.isr.clone()), (-1, vec![0]));
    let unclean = elect(&shrunk, live, true).expect("changes");
    assert_eq!((unclean.leader, unclean.isr.clone()), (1, vec![1]));
    assert_eq!(unclean.leader_epoch, 5);
    assert!(elect(&shrunk, |_| true, false).is_none(), "nothing to do");
}

#[test]
fn alter_partition_applies_only_at_the_epochs_it_was_asked_at() {
    let mut state = cluster(3);
    create(&mut state, "t", 1, 3);
    let p = partition(&state, "t", 0);
    let topic_id = state.topic("t").expect("t").id;
    let shrink = |isr: Vec<i32>, partition_epoch: i32| MetadataRecord::AlterPartition {
        topic_id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch,
        isr,
    };
    let follower = p.replicas[2];
    let without: Vec<i32> = p.isr.iter().copied().filter(|r| *r != follower).collect();
    apply_all(&mut state, &[shrink(without.clone(), p.partition_epoch)]);
    let after = partition(&state, "t", 0);
    assert_eq!(after.isr, without);
    assert_eq!(after.partition_epoch, p.partition_epoch + 1);
    // The same request again (stale partition epoch) changes nothing.
    apply_all(&mut state, &[shrink(vec![p.leader], p.partition_epoch)]);
    assert_eq!(partition(&state, "t", 0).isr, without);
    // An ISR without the leader, or with a fenced broker, is refused.
    apply_all(
        &mut state,
        &[shrink(vec![p.replicas[1]], after.partition_epoch)],
    );
    assert_eq!(partition(&state, "t", 0).isr, without);
    state
        .apply(&MetadataRecord::FenceBroker { node_id: follower })
        .expect("fence");
    apply_all(
        &mut state,
        &[shrink(p.replicas.clone(), after.partition_epoch)],
    );
    assert_eq!(partition(&state, "t", 0).isr, without);
}

#[test]
fn a_controlled_shutdown_moves_leadership_and_a_new_registration_ends_it() {
    let mut state = cluster(3);
    create(&mut state, "t", 6, 3);
    state
        .apply(&MetadataRecord::ControlledShutdown { node_id: 1 })
        .expect("shutdown");
    let records = state.election_records();
    apply_all(&mut state, &records);
    let t = state.topic("t").expect("t");
    assert!(t
        .partitions
        .iter()
        .all(|p| p.leader != 1 && !p.isr.contains(&1)));
    assert!(state.image().fenced.contains(&1));
    register(&mut state, 1, None);
    assert!(!state.image().fenced.contains(&1));
}

#[test]
fn snapshot_records_keep_replicas_isr_and_broker_states() {
    let mut state = cluster(3);
    create(&mut state, "t", 2, 3);
    state
        .apply(&MetadataRecord::FenceBroker { node_id: 2 })
        .expect("fence");
    let records = state.election_records();
    apply_all(&mut state, &records);
    let mut again = ControllerState::new(settings(0));
    apply_all(&mut again, &state.image_records());
    assert_eq!(again.image().topics, state.image().topics);
    assert_eq!(again.brokers(), state.brokers());
}

fn plan_apply(state: &mut ControllerState, request: AdminRequest) -> Vec<i16> {
    let plan = state.plan(&request, &mut || uuid::Uuid::new_v4());
    apply_all(state, &plan.records);
    match plan.response {
        AdminResponse::Results(r) => r.iter().map(|r| r.error_code).collect(),
        other => panic!("{other:?}"),
    }
}

fn settle(state: &mut ControllerState) {
    for _ in 0..4 {
        let records = state.election_records();
        apply_all(state, &records);
    }
}

#[test]
fn a_reassignment_adds_replicas_then_drops_the_old_ones_once_the_new_are_in_sync() {
    let mut state = cluster(3);
    let topic_id = {
        let plan = state.plan(
            &AdminRequest::CreateTopics {
                topics: vec![NewTopic {
                    name: "t".into(),
                    num_partitions: -1,
                    replication_factor: -1,
                    assignments: vec![vec![0]],
                    configs: Vec::new(),
                }],
                validate_only: false,
            },
            &mut || uuid::Uuid::from_u128(5),
        );
        apply_all(&mut state, &plan.records);
        state.topic("t").expect("t").id
    };
    assert_eq!(partition(&state, "t", 0).replicas, vec![0]);
    let tp = TopicPartition::new("t", 0);
    let codes = plan_apply(
        &mut state,
        AdminRequest::AlterPartitionReassignments {
            partitions: vec![(tp.clone(), Some(vec![1, 2]))],
        },
    );
    assert_eq!(codes, vec![0]);
    let moving = partition(&state, "t", 0);
    assert_eq!(moving.replicas, vec![1, 2, 0]);
    assert_eq!(
        (moving.adding.clone(), moving.removing.clone()),
        (vec![1, 2], vec![0])
    );
    assert_eq!(
        moving.leader, 0,
        "the old replica leads until the new ones are in sync"
    );
    settle(&mut state);
    assert_eq!(
        partition(&state, "t", 0).replicas,
        vec![1, 2, 0],
        "not in sync yet"
    );
    // The new replicas caught up: the leader adds them to the ISR.
    apply_all(
        &mut state,
        &[MetadataRecord::AlterPartition {
            topic_id,
            partition: 0,
            leader_epoch: moving.leader_epoch,
            partition_epoch: moving.partition_epoch,
            isr: vec![1, 2, 0],
        }],
    );
    settle(&mut state);
    let done = partition(&state, "t", 0);
    assert_eq!(done.replicas, vec![1, 2]);
    assert!(done.adding.is_empty() && done.removing.is_empty());
    assert_eq!(done.isr, vec![1, 2]);
    assert_eq!(done.leader, 1, "a target replica leads");
    assert!(done.leader_epoch > moving.leader_epoch);
    // Nothing in progress: cancelling is an error.
    assert_eq!(
        plan_apply(
            &mut state,
            AdminRequest::AlterPartitionReassignments {
                partitions: vec![(tp.clone(), None)],
            },
        ),
        vec![ResponseError::NoReassignmentInProgress.code()]
    );
    // Unknown brokers and repeated ones are refused.
    for bad in [vec![1, 7], vec![1, 1], vec![]] {
        assert_eq!(
            plan_apply(
                &mut state,
                AdminRequest::AlterPartitionReassignments {
                    partitions: vec![(tp.clone(), Some(bad.clone()))],
                },
            ),
            vec![ResponseError::InvalidReplicaAssignment.code()],
            "{bad:?}"
        );
    }
}

#[test]
fn a_cancelled_reassignment_goes_back_to_the_original_replicas() {
    let mut state = cluster(3);
    create(&mut state, "t", 1, 2);
    let before = partition(&state, "t", 0);
    let spare = (0..3)
        .find(|b| !before.replicas.contains(b))
        .expect("a spare");
    let tp = TopicPartition::new("t", 0);
    plan_apply(
        &mut state,
        AdminRequest::AlterPartitionReassignments {
            partitions: vec![(tp.clone(), Some(vec![spare, before.replicas[0]]))],
        },
    );
    assert_eq!(partition(&state, "t", 0).adding, vec![spare]);
    assert_eq!(
        plan_apply(
            &mut state,
            AdminRequest::AlterPartitionReassignments {
                partitions: vec![(tp, None)],
            },
        ),
        vec![0]
    );
    let after = partition(&state, "t", 0);
    assert_eq!(after.replicas, before.replicas);
    assert!(after.adding.is_empty() && after.removing.is_empty());
}

#[test]
fn preferred_leader_election_and_auto_rebalance_give_leadership_back() {
    let mut state = cluster(3);
    create(&mut state, "t", 3, 3);
    // Node 0 goes away and comes back: its partitions are led elsewhere and it is out of
    // their ISR; once back in, a preferred election hands them back.
    state
        .apply(&MetadataRecord::FenceBroker { node_id: 0 })
        .expect("fence");
    settle(&mut state);
    state
        .apply(&MetadataRecord::UnfenceBroker { node_id: 0 })
        .expect("unfence");
    let t = state.topic("t").expect("t").clone();
    let preferring_0: Vec<i32> = t
        .partitions
        .iter()
        .filter(|p| p.replicas[0] == 0)
        .map(|p| p.partition)
        .collect();
    assert!(!preferring_0.is_empty());
    let p = preferring_0[0];
    let tp = TopicPartition::new("t", p);
    assert_eq!(
        plan_apply(
            &mut state,
            AdminRequest::ElectLeaders {
                preferred: true,
                partitions: vec![tp.clone()],
            },
        ),
        vec![ResponseError::PreferredLeaderNotAvailable.code()],
        "out of the ISR: not yet"
    );
    // Back in every ISR.
    for part in &t.partitions {
        let now = partition(&state, "t", part.partition as usize);
        let mut isr = now.isr.clone();
        isr.push(0);
        apply_all(
            &mut state,
            &[MetadataRecord::AlterPartition {
                topic_id: t.id,
                partition: part.partition,
                leader_epoch: now.leader_epoch,
                partition_epoch: now.partition_epoch,
                isr,
            }],
        );
    }
    assert!(!state.rebalance_records(0.10).is_empty());
    assert_eq!(
        plan_apply(
            &mut state,
            AdminRequest::ElectLeaders {
                preferred: true,
                partitions: vec![tp.clone()],
            },
        ),
        vec![0]
    );
    assert_eq!(partition(&state, "t", p as usize).leader, 0);
    assert_eq!(
        plan_apply(
            &mut state,
            AdminRequest::ElectLeaders {
                preferred: true,
                partitions: vec![tp],
            },
        ),
        vec![ResponseError::ElectionNotNeeded.code()]
    );
    let moves = state.rebalance_records(0.10);
    apply_all(&mut state, &moves);
    let t = state.topic("t").expect("t");
    assert!(t.partitions.iter().all(|p| p.leader == p.replicas[0]));
}

#[test]
fn a_guarded_batch_applies_only_if_nothing_committed_since_it_was_planned() {
    let mut state = cluster(3);
    let planned_at = state.applied();
    let topic = |name: &str, id: u128| MetadataRecord::Topic {
        name: name.into(),
        id: uuid::Uuid::from_u128(id),
    };
    // Two members planned the same topic against the same state; the first to commit
    // wins, the other's batch is skipped everywhere (no "already exists" on apply).
    let first = [
        MetadataRecord::Guard {
            nonce: 1,
            expected_applied: planned_at,
            records: 1,
        },
        topic("t", 10),
    ];
    let second = [
        MetadataRecord::Guard {
            nonce: 2,
            expected_applied: planned_at,
            records: 1,
        },
        topic("t", 11),
    ];
    apply_all(&mut state, &first);
    apply_all(&mut state, &second);
    assert_eq!(state.guard_outcome(1), Some(true));
    assert_eq!(state.guard_outcome(2), Some(false));
    assert_eq!(state.topic("t").expect("t").id, uuid::Uuid::from_u128(10));
    assert_eq!(
        state.applied(),
        planned_at + 4,
        "skipped records still count"
    );
    // Every record after the skipped batch applies again.
    apply_all(&mut state, &[topic("u", 12)]);
    assert!(state.topic("u").is_some());
    assert_eq!(state.guard_outcome(3), None);
}

#[test]
fn new_partitions_take_explicit_replica_lists_of_the_topics_factor() {
    let mut state = cluster(3);
    create(&mut state, "t", 1, 2);
    let grow = |assignments: Vec<Vec<i32>>, count: i32| AdminRequest::CreatePartitions {
        topics: vec![("t".into(), count)],
        assignments: vec![("t".into(), assignments)],
        validate_only: false,
    };
    assert_eq!(
        plan_apply(&mut state, grow(vec![vec![2, 1, 0]], 2)),
        vec![ResponseError::InvalidReplicaAssignment.code()],
        "three replicas for a topic of two"
    );
    assert_eq!(
        plan_apply(&mut state, grow(vec![vec![2, 9]], 2)),
        vec![ResponseError::InvalidReplicaAssignment.code()],
        "an unknown broker"
    );
    assert_eq!(
        plan_apply(&mut state, grow(vec![vec![2, 1]], 3)),
        vec![ResponseError::InvalidReplicaAssignment.code()],
        "two new partitions, one list"
    );
    assert_eq!(plan_apply(&mut state, grow(vec![vec![2, 1]], 2)), vec![0]);
    let p = partition(&state, "t", 1);
    assert_eq!((p.replicas.clone(), p.leader), (vec![2, 1], 2));
}

#[test]
fn the_committed_cluster_id_is_every_nodes_and_survives_a_snapshot() {
    let mut state = cluster(3);
    assert_eq!(
        state.image().cluster_id,
        "c",
        "until committed: this node's own"
    );
    let id = MetadataRecord::ClusterId {
        id: "quorum-id".into(),
    };
    state.apply(&id).expect("apply");
    assert_eq!(state.image().cluster_id, "quorum-id");
    // The first committed id stays.
    state
        .apply(&MetadataRecord::ClusterId { id: "later".into() })
        .expect("apply");
    assert_eq!(state.committed_cluster_id(), Some("quorum-id"));
    let mut rebuilt = ControllerState::new(settings(1));
    for r in state.image_records() {
        rebuilt.apply(&r).expect("replay");
    }
    assert_eq!(rebuilt.image().cluster_id, "quorum-id");
}

#[test]
fn a_mirror_into_a_cluster_of_several_brokers_is_planned_like_one_into_a_single_broker() {
    let request = AdminRequest::CreateMirror {
        name: "m".into(),
        configs: vec![(
            "bootstrap.servers".into(),
            Some("10.0.0.9:9092".to_string()),
        )],
    };
    for brokers in [1, 3] {
        let plan = cluster(brokers).plan(&request, &mut || uuid::Uuid::new_v4());
        assert!(
            matches!(plan.response, AdminResponse::Results(_)),
            "{brokers} brokers: {:?}",
            plan.response
        );
        assert!(!plan.records.is_empty(), "{brokers} brokers mirror");
    }
}

#[test]
fn brokers_are_listed_at_their_address_on_the_clients_listener() {
    let mut state = ControllerState::new(NodeSettings {
        listeners: vec![
            ("PLAINTEXT".into(), "127.0.0.1:9092".parse().expect("addr")),
            ("EXTERNAL".into(), "10.0.0.1:9094".parse().expect("addr")),
        ],
        ..settings(0)
    });
    state.apply(&state.registration()).expect("register self");
    assert!(state.is_registered());
    state
        .apply(&MetadataRecord::RegisterBroker {
            node_id: 1,
            host: "127.0.0.2".into(),
            port: 9092,
            rack: None,
            listeners: vec![
                ("PLAINTEXT".into(), "127.0.0.2".into(), 9092),
                ("EXTERNAL".into(), "10.0.0.2".into(), 9094),
            ],
        })
        .expect("register 1");
    // Registered before named listeners: one address for every listener.
    register(&mut state, 2, None);
    let image = state.image();
    let on = |listener: &str| {
        image
            .live_brokers_on(listener)
            .into_iter()
            .map(|(id, a)| (id, a.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        on("EXTERNAL"),
        [
            (0, "10.0.0.1:9094".into()),
            (1, "10.0.0.2:9094".into()),
            (2, "127.0.0.1:9094".into())
        ]
    );
    assert_eq!(on("PLAINTEXT")[1], (1, "127.0.0.2:9092".into()));
    // A listener a broker does not have leaves it out, as Kafka does.
    assert_eq!(on("OTHER"), [(2, "127.0.0.1:9094".into())]);
    assert_eq!(image.endpoints([1], "EXTERNAL")[0].2, 9094);
}

#[test]
fn a_new_mirror_topic_starts_with_the_source_configs_this_broker_takes() {
    let mut state = cluster(1);
    let created = AdminRequest::CreateMirror {
        name: "m".into(),
        configs: vec![("bootstrap.servers".into(), Some("10.0.0.9:9092".into()))],
    };
    assert_eq!(plan_apply(&mut state, created), vec![0]);
    let source = BTreeMap::from([(
        "t".to_string(),
        BTreeMap::from([
            ("segment.bytes".to_string(), "4096".to_string()),
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("retention.ms".to_string(), "not-a-number".to_string()),
            ("mirror.name".to_string(), "other".to_string()),
        ]),
    )]);
    let add = AdminRequest::AddTopicsToMirror {
        mirror: "m".into(),
        topics: vec![dataplane::wire::mirror::MirrorTopicMetadata {
            topic_id: uuid::Uuid::from_u128(7),
            name: "t".into(),
            num_partitions: 2,
        }],
        configs: source,
    };
    assert_eq!(plan_apply(&mut state, add), vec![0]);
    let image = state.image();
    let t = image.topic("t").expect("created");
    assert_eq!(
        t.configs.get("segment.bytes").map(String::as_str),
        Some("4096")
    );
    assert_eq!(
        t.configs.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    assert!(
        !t.configs.contains_key("retention.ms"),
        "an invalid value is left out"
    );
    assert_eq!(t.configs.get("mirror.name").map(String::as_str), Some("m"));
    assert_eq!(t.log_config.segment_bytes, 4096);
}
