use super::*;

const GROUP: &str = "g";
const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 30_000;
const DELAY_MS: i64 = 3_000;

fn config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: DELAY_MS as i32,
        ..GroupConfig::default()
    }
}

/// A ConsumerProtocolSubscription v0: version, topics, null user data.
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = vec![0, 0];
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(b)
}

fn protocols(names: &[&str]) -> Vec<JoinGroupProtocol> {
    names
        .iter()
        .map(|n| JoinGroupProtocol {
            name: (*n).to_owned(),
            metadata: subscription(&["t"]),
        })
        .collect()
}

fn join_req(member_id: &str, client: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: GROUP.into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: protocols(&["range", "roundrobin"]),
        client_id: client.into(),
        client_host: "/127.0.0.1".into(),
        require_known_member_id: false,
    }
}

fn sync_req(
    member_id: &str,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
    }
}

fn hb(c: &mut GroupCoordinator, member_id: &str, generation: i32, now: i64) -> i16 {
    c.heartbeat(
        &HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id: generation,
            member_id: member_id.into(),
            group_instance_id: None,
        },
        now,
    )
    .0
}

fn join_resp(e: &Effects, w: WaiterId) -> Option<&JoinGroupResponse> {
    e.join_responses
        .iter()
        .find(|(x, _)| *x == w)
        .map(|(_, r)| r)
}

fn sync_resp(e: &Effects, w: WaiterId) -> Option<&SyncGroupResponse> {
    e.sync_responses
        .iter()
        .find(|(x, _)| *x == w)
        .map(|(_, r)| r)
}

fn assignment_for(id: &str) -> Bytes {
    Bytes::from(format!("assignment-of-{id}"))
}

/// Collects every record appended, as `load` will see them.
#[derive(Default)]
struct Log(Vec<CoordinatorRecord>);

impl Log {
    fn add(&mut self, e: &Effects) {
        self.0.extend(e.records.iter().cloned());
    }
    fn pairs(&self) -> Vec<(&[u8], Option<&[u8]>)> {
        self.0
            .iter()
            .map(|r| (r.key.as_slice(), r.value.as_deref()))
            .collect()
    }
}

/// Members (ids in the order their clients joined) of a group that went through one
/// join/sync round; returns the ids, the leader and the time after it.
fn stable_group(
    c: &mut GroupCoordinator,
    log: &mut Log,
    clients: &[&str],
) -> (Vec<String>, String, i64) {
    let mut now = 0;
    let mut responses: BTreeMap<WaiterId, JoinGroupResponse> = BTreeMap::new();
    for (i, client) in clients.iter().enumerate() {
        let e = c.join_group(join_req("", client), i as WaiterId, now);
        log.add(&e);
        responses.extend(e.join_responses);
        now += 10;
    }
    while responses.len() < clients.len() {
        now = c.next_deadline_ms().expect("a rebalance deadline");
        let e = c.tick(now);
        log.add(&e);
        responses.extend(e.join_responses);
    }
    let ids: Vec<String> = (0..clients.len() as WaiterId)
        .map(|w| responses[&w].member_id.clone())
        .collect();
    let leader = responses[&0].leader.clone();
    let generation = responses[&0].generation_id;
    let assignments = ids
        .iter()
        .map(|id| (id.clone(), assignment_for(id)))
        .collect();
    for id in ids.iter().filter(|id| **id != leader) {
        let e = c.sync_group(sync_req(id, generation, vec![]), 100, now);
        assert!(e.sync_responses.is_empty(), "followers wait for the leader");
    }
    let e = c.sync_group(sync_req(&leader, generation, assignments), 101, now);
    log.add(&e);
    assert_eq!(e.sync_responses.len(), clients.len());
    assert_eq!(c.group_state(GROUP), Some(GroupState::Stable));
    (ids, leader, now)
}

#[test]
fn three_members_join_sync_and_rebalance() {
    let mut c = GroupCoordinator::new(config());
    // The first joiner starts the initial delay; the two others arrive during it.
    let e = c.join_group(join_req("", "a"), 1, 0);
    assert!(e.join_responses.is_empty());
    assert_eq!(c.group_state(GROUP), Some(GroupState::PreparingRebalance));
    assert_eq!(e.next_deadline_ms, Some(DELAY_MS));
    assert!(c
        .join_group(join_req("", "b"), 2, 100)
        .join_responses
        .is_empty());
    assert!(c
        .join_group(join_req("", "c"), 3, 200)
        .join_responses
        .is_empty());
    // New members arrived during the delay: it is extended once more.
    let e = c.tick(DELAY_MS);
    assert!(e.join_responses.is_empty());
    assert_eq!(e.next_deadline_ms, Some(2 * DELAY_MS));
    let e = c.tick(2 * DELAY_MS);
    assert_eq!(e.join_responses.len(), 3);
    assert_eq!(c.group_state(GROUP), Some(GroupState::CompletingRebalance));
    let a = join_resp(&e, 1).expect("a answered").clone();
    let b = join_resp(&e, 2).expect("b answered").clone();
    let cc = join_resp(&e, 3).expect("c answered").clone();
    assert!(a.member_id.starts_with("a-"), "{}", a.member_id);
    assert_eq!(a.generation_id, 1);
    assert_eq!(a.protocol_name.as_deref(), Some("range"));
    assert_eq!(a.leader, a.member_id, "first joiner leads");
    assert_eq!(a.members.len(), 3, "the leader sees every member");
    assert!(a.members.iter().all(|m| m.metadata == subscription(&["t"])));
    assert!(b.members.is_empty() && cc.members.is_empty());
    assert_eq!(b.leader, a.member_id);

    // Followers first: they wait. Then the leader's assignment reaches everyone.
    let now = 2 * DELAY_MS + 10;
    let e = c.sync_group(sync_req(&b.member_id, 1, vec![]), 12, now);
    assert!(e.sync_responses.is_empty());
    assert_eq!(
        hb(&mut c, &b.member_id, 1, now),
        0,
        "heartbeats fine while completing"
    );
    let assignments = [&a, &b, &cc]
        .iter()
        .map(|r| (r.member_id.clone(), assignment_for(&r.member_id)))
        .collect();
    let e = c.sync_group(sync_req(&a.member_id, 1, assignments), 11, now);
    assert_eq!(c.group_state(GROUP), Some(GroupState::Stable));
    assert_eq!(
        sync_resp(&e, 11).expect("leader").assignment,
        assignment_for(&a.member_id)
    );
    assert_eq!(
        sync_resp(&e, 12).expect("b").assignment,
        assignment_for(&b.member_id)
    );
    assert_eq!(
        e.records.len(),
        1,
        "group metadata stored with the assignment"
    );
    let stored =
        GroupMetadataValue::decode(e.records[0].value.as_deref().expect("value")).expect("decodes");
    assert_eq!(stored.generation, 1);
    assert_eq!(stored.members.len(), 3);
    assert_eq!(e.records[0].partition, partition_for(GROUP, 50));
    // A late follower gets its assignment at once.
    let e = c.sync_group(sync_req(&cc.member_id, 1, vec![]), 13, now);
    assert_eq!(
        sync_resp(&e, 13).expect("c").assignment,
        assignment_for(&cc.member_id)
    );

    // Wrong generation and unknown members are refused.
    assert_eq!(
        hb(&mut c, &a.member_id, 0, now),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        hb(&mut c, "nobody", 1, now),
        ResponseError::UnknownMemberId.code()
    );

    // The leader rejoins (as after a metadata change): a rebalance for everyone.
    let e = c.join_group(join_req(&a.member_id, "a"), 21, now + 1);
    assert!(e.join_responses.is_empty());
    assert_eq!(
        hb(&mut c, &b.member_id, 1, now + 2),
        ResponseError::RebalanceInProgress.code()
    );
    let e = c.sync_group(sync_req(&b.member_id, 1, vec![]), 22, now + 2);
    assert_eq!(
        sync_resp(&e, 22).expect("b").error_code,
        ResponseError::RebalanceInProgress.code()
    );
    c.join_group(join_req(&b.member_id, "b"), 22, now + 3);
    let e = c.join_group(join_req(&cc.member_id, "c"), 23, now + 4);
    assert_eq!(
        e.join_responses.len(),
        3,
        "all rejoined: no need to wait for the timeout"
    );
    assert!(e
        .join_responses
        .iter()
        .all(|(_, r)| r.generation_id == 2 && r.error_code == 0));
}

#[test]
fn member_leaves_and_another_joins() {
    let mut c = GroupCoordinator::new(config());
    let mut log = Log::default();
    let (ids, leader, now) = stable_group(&mut c, &mut log, &["a", "b", "c"]);
    let gone = ids
        .iter()
        .find(|id| **id != leader)
        .expect("a follower")
        .clone();
    let (resp, e) = c.leave_group(
        &LeaveGroupRequest {
            group_id: GROUP.into(),
            members: vec![LeavingMember {
                member_id: gone.clone(),
                group_instance_id: None,
            }],
        },
        now,
    );
    assert_eq!(resp.members[0].1, 0);
    assert!(e.join_responses.is_empty());
    assert_eq!(c.group_state(GROUP), Some(GroupState::PreparingRebalance));
    // A newcomer joins while the remaining members are told to rejoin.
    assert!(c
        .join_group(join_req("", "d"), 40, now + 1)
        .join_responses
        .is_empty());
    let remaining: Vec<&String> = ids.iter().filter(|id| **id != gone).collect();
    for id in &remaining {
        assert_eq!(
            hb(&mut c, id, 1, now + 2),
            ResponseError::RebalanceInProgress.code()
        );
    }
    let mut e = Effects::default();
    for (i, id) in remaining.iter().enumerate() {
        e = c.join_group(join_req(id, "x"), 41 + i as WaiterId, now + 3);
    }
    assert_eq!(e.join_responses.len(), 3);
    let d = join_resp(&e, 40).expect("newcomer answered").clone();
    assert_eq!(d.generation_id, 2);
    let leader_resp = e
        .join_responses
        .iter()
        .map(|(_, r)| r)
        .find(|r| r.member_id == r.leader)
        .expect("a leader");
    assert_eq!(leader_resp.leader, leader, "the leader stays");
    let members: BTreeSet<&str> = leader_resp
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert!(members.contains(d.member_id.as_str()) && !members.contains(gone.as_str()));
    let assignments = members
        .iter()
        .map(|id| ((*id).to_owned(), assignment_for(id)))
        .collect();
    let e = c.sync_group(sync_req(&d.member_id, 2, vec![]), 50, now + 4);
    assert!(e.sync_responses.is_empty());
    let e = c.sync_group(sync_req(&leader, 2, assignments), 51, now + 4);
    assert_eq!(
        sync_resp(&e, 50).expect("d").assignment,
        assignment_for(&d.member_id)
    );
    assert_eq!(c.group_generation(GROUP), Some(2));
}

#[test]
fn expired_session_triggers_rebalance() {
    let mut c = GroupCoordinator::new(config());
    let mut log = Log::default();
    let (ids, _leader, now) = stable_group(&mut c, &mut log, &["a", "b"]);
    let (alive, dead) = (&ids[0], &ids[1]);
    assert_eq!(hb(&mut c, alive, 1, now + 5_000), 0);
    assert_eq!(
        c.next_deadline_ms(),
        Some(now + i64::from(SESSION_MS)),
        "b's session"
    );
    let e = c.tick(now + i64::from(SESSION_MS) - 1);
    assert_eq!(c.group_state(GROUP), Some(GroupState::Stable));
    assert!(e.records.is_empty());
    c.tick(now + i64::from(SESSION_MS));
    assert_eq!(c.group_state(GROUP), Some(GroupState::PreparingRebalance));
    assert_eq!(
        hb(&mut c, dead, 1, now + 10_001),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        hb(&mut c, alive, 1, now + 10_001),
        ResponseError::RebalanceInProgress.code()
    );
    let e = c.join_group(join_req(alive, "a"), 9, now + 10_002);
    let r = join_resp(&e, 9).expect("alone: completes at once");
    assert_eq!((r.generation_id, r.members.len()), (2, 1));

    // A member that never rejoins is dropped when the rebalance timeout passes.
    let (ids, _, now) = {
        let mut c2 = GroupCoordinator::new(config());
        let out = stable_group(&mut c2, &mut Log::default(), &["a", "b"]);
        c = c2;
        out
    };
    c.join_group(join_req(&ids[0], "a"), 60, now);
    // b keeps heartbeating but does not rejoin.
    for t in (now..now + i64::from(REBALANCE_MS)).step_by(5_000) {
        hb(&mut c, &ids[1], 1, t);
    }
    let e = c.tick(now + i64::from(REBALANCE_MS));
    let r = join_resp(&e, 60).expect("completed by the rebalance timeout");
    assert_eq!((r.generation_id, r.members.len()), (2, 1));
}

#[test]
fn static_member_rejoins_without_rebalance() {
    let mut c = GroupCoordinator::new(GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..config()
    });
    let static_req = |member: &str, instance: &str| JoinGroupRequest {
        group_instance_id: Some(instance.into()),
        ..join_req(member, "client")
    };
    let e = c.join_group(static_req("", "i-a"), 1, 0);
    let a = join_resp(&e, 1).expect("alone: immediate").clone();
    assert!(a.member_id.starts_with("i-a-"));
    c.sync_group(
        sync_req(
            &a.member_id,
            1,
            vec![(a.member_id.clone(), assignment_for("a"))],
        ),
        2,
        0,
    );
    // b joins: a rebalance to generation 2.
    assert!(c
        .join_group(static_req("", "i-b"), 3, 10)
        .join_responses
        .is_empty());
    let e = c.join_group(static_req(&a.member_id, "i-a"), 4, 10);
    let b = join_resp(&e, 3).expect("b").clone();
    assert_eq!(b.generation_id, 2);
    let assignments = vec![
        (a.member_id.clone(), assignment_for("a")),
        (b.member_id.clone(), assignment_for("b")),
    ];
    c.sync_group(sync_req(&a.member_id, 2, assignments), 5, 20);
    assert_eq!(c.group_state(GROUP), Some(GroupState::Stable));

    // b restarts and joins without its member id: it takes its old place.
    let e = c.join_group(static_req("", "i-b"), 6, 1_000);
    let b2 = join_resp(&e, 6).expect("answered at once").clone();
    assert_eq!(b2.error_code, 0);
    assert_ne!(b2.member_id, b.member_id);
    assert_eq!(b2.generation_id, 2, "no rebalance");
    assert!(
        !b2.skip_assignment && b2.members.is_empty(),
        "b is not the leader"
    );
    assert_eq!(c.group_state(GROUP), Some(GroupState::Stable));
    let stored =
        GroupMetadataValue::decode(e.records[0].value.as_deref().expect("value")).expect("decodes");
    assert!(stored.members.iter().any(|m| m.member_id == b2.member_id));
    // The old incarnation is fenced; the new one carries on with b's assignment.
    let fenced = c
        .heartbeat(
            &HeartbeatRequest {
                group_id: GROUP.into(),
                generation_id: 2,
                member_id: b.member_id.clone(),
                group_instance_id: Some("i-b".into()),
            },
            1_001,
        )
        .0;
    assert_eq!(fenced, ResponseError::FencedInstanceId.code());
    assert_eq!(hb(&mut c, &b2.member_id, 2, 1_001), 0);
    let e = c.sync_group(sync_req(&b2.member_id, 2, vec![]), 7, 1_002);
    assert_eq!(
        sync_resp(&e, 7).expect("b2").assignment,
        assignment_for("b")
    );
}

#[test]
fn member_id_required_handshake() {
    let mut c = GroupCoordinator::new(GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..config()
    });
    let req = JoinGroupRequest {
        require_known_member_id: true,
        ..join_req("", "a")
    };
    let e = c.join_group(req.clone(), 1, 0);
    let r = join_resp(&e, 1).expect("answered");
    assert_eq!(r.error_code, ResponseError::MemberIdRequired.code());
    let id = r.member_id.clone();
    assert!(id.starts_with("a-"));
    let e = c.join_group(
        JoinGroupRequest {
            member_id: id.clone(),
            ..req.clone()
        },
        2,
        5,
    );
    let r = join_resp(&e, 2).expect("joined");
    assert_eq!(
        (r.error_code, r.generation_id, r.leader.as_str()),
        (0, 1, id.as_str())
    );
    // A pending id that never comes back expires after the session timeout.
    let e = c.join_group(req, 3, 10);
    let pending = join_resp(&e, 3).expect("answered").member_id.clone();
    c.tick(10 + i64::from(SESSION_MS));
    let e = c.join_group(join_req(&pending, "a"), 4, 20_000);
    assert_eq!(
        join_resp(&e, 4).expect("answered").error_code,
        ResponseError::UnknownMemberId.code()
    );
}

fn commit_req(member: &str, generation: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        retention_time_ms: -1,
        partitions: vec![OffsetCommitPartition {
            partition: TopicPartition::new("t", 0),
            offset,
            leader_epoch: 3,
            metadata: Some("meta".into()),
        }],
    }
}

fn fetch(c: &GroupCoordinator, group: &str) -> i64 {
    c.offset_fetch(&OffsetFetchRequest {
        group_id: group.into(),
        partitions: Some(vec![TopicPartition::new("t", 0)]),
        require_stable: false,
    })
    .partitions[0]
        .offset
}

#[test]
fn commits_are_fenced_by_generation_and_member() {
    let mut c = GroupCoordinator::new(config());
    let mut log = Log::default();
    let (ids, _, now) = stable_group(&mut c, &mut log, &["a", "b"]);
    let (resp, e) = c.offset_commit(&commit_req(&ids[0], 1, 42), now);
    assert_eq!(resp.partitions[0].1, 0);
    assert_eq!(e.records.len(), 1);
    assert_eq!(fetch(&c, GROUP), 42);
    let code_of = |c: &mut GroupCoordinator, r: OffsetCommitRequest| {
        c.offset_commit(&r, now).0.partitions[0].1
    };
    assert_eq!(
        code_of(&mut c, commit_req(&ids[0], 0, 43)),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        code_of(&mut c, commit_req("zombie", 1, 43)),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        code_of(&mut c, commit_req("", -1, 43)),
        ResponseError::UnknownMemberId.code(),
        "simple commits only while the group has no members"
    );
    let mut big = commit_req(&ids[0], 1, 43);
    big.partitions[0].metadata = Some("x".repeat(5000));
    assert_eq!(
        code_of(&mut c, big),
        ResponseError::OffsetMetadataTooLarge.code()
    );
    assert_eq!(fetch(&c, GROUP), 42);
    // During a rebalance: allowed while preparing, refused while completing.
    c.join_group(join_req(&ids[0], "a"), 1, now);
    assert_eq!(code_of(&mut c, commit_req(&ids[1], 1, 44)), 0);
    c.join_group(join_req(&ids[1], "b"), 2, now);
    assert_eq!(c.group_state(GROUP), Some(GroupState::CompletingRebalance));
    assert_eq!(
        code_of(&mut c, commit_req(&ids[1], 2, 45)),
        ResponseError::RebalanceInProgress.code()
    );
    assert_eq!(fetch(&c, GROUP), 44);

    // A group that only stores offsets.
    let mut simple = commit_req("", -1, 7);
    simple.group_id = "simple".into();
    assert_eq!(c.offset_commit(&simple, now).0.partitions[0].1, 0);
    assert_eq!(fetch(&c, "simple"), 7);
    assert_eq!(fetch(&c, "unknown"), -1);
    let all = c.offset_fetch(&OffsetFetchRequest {
        group_id: "simple".into(),
        partitions: None,
        require_stable: false,
    });
    assert_eq!(all.partitions.len(), 1);
    assert_eq!(
        (
            all.partitions[0].leader_epoch,
            all.partitions[0].metadata.as_str()
        ),
        (3, "meta")
    );
}

#[test]
fn delete_groups_only_when_empty() {
    let mut c = GroupCoordinator::new(config());
    let mut log = Log::default();
    let (ids, _, now) = stable_group(&mut c, &mut log, &["a"]);
    c.offset_commit(&commit_req(&ids[0], 1, 5), now);
    let (r, e) = c.delete_groups(&[GROUP.into(), "nope".into()], now);
    assert_eq!(r[0].1, ResponseError::NonEmptyGroup.code());
    assert_eq!(r[1].1, ResponseError::GroupIdNotFound.code());
    assert!(e.records.is_empty());
    let (_, e) = c.leave_group(
        &LeaveGroupRequest {
            group_id: GROUP.into(),
            members: vec![LeavingMember {
                member_id: ids[0].clone(),
                group_instance_id: None,
            }],
        },
        now,
    );
    assert_eq!(c.group_state(GROUP), Some(GroupState::Empty));
    assert_eq!(e.records.len(), 1, "the empty generation is stored");
    let listed = c.list_groups(&["Empty".into()]);
    assert_eq!(listed.len(), 1);
    let (r, e) = c.delete_groups(&[GROUP.into()], now);
    assert_eq!(r[0].1, 0);
    assert_eq!(e.records.len(), 2, "offset and group tombstones");
    assert!(e.records.iter().all(|r| r.value.is_none()));
    assert_eq!(c.group_state(GROUP), None);
}

#[test]
fn offset_delete_refuses_subscribed_topics() {
    let mut c = GroupCoordinator::new(config());
    let mut log = Log::default();
    let (ids, _, now) = stable_group(&mut c, &mut log, &["a"]);
    let mut req = commit_req(&ids[0], 1, 5);
    req.partitions.push(OffsetCommitPartition {
        partition: TopicPartition::new("old", 0),
        offset: 9,
        leader_epoch: -1,
        metadata: None,
    });
    c.offset_commit(&req, now);
    let (r, e) = c.offset_delete(
        GROUP,
        &[TopicPartition::new("t", 0), TopicPartition::new("old", 0)],
        now,
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(
        r.partitions[0].1,
        ResponseError::GroupSubscribedToTopic.code()
    );
    assert_eq!(r.partitions[1].1, 0);
    assert_eq!(e.records.len(), 1);
    assert_eq!(fetch(&c, GROUP), 5);
}

#[test]
fn offsets_of_empty_groups_expire() {
    let retention = 60_000;
    let mut c = GroupCoordinator::new(GroupConfig {
        offsets_retention_ms: retention,
        offsets_retention_check_interval_ms: 1_000,
        ..config()
    });
    let mut simple = commit_req("", -1, 7);
    simple.group_id = "simple".into();
    c.offset_commit(&simple, 0);
    let e = c.tick(retention - 1_000);
    assert!(e.records.is_empty());
    assert_eq!(fetch(&c, "simple"), 7);
    let e = c.tick(retention);
    assert_eq!(
        e.records.len(),
        1,
        "one tombstone, no group tombstone for generation 0"
    );
    assert!(e.records[0].value.is_none());
    assert_eq!(fetch(&c, "simple"), -1);
    assert_eq!(c.group_state("simple"), None);
}

#[test]
fn load_rebuilds_groups_and_offsets() {
    let mut c = GroupCoordinator::new(config());
    let mut log = Log::default();
    let (ids, leader, now) = stable_group(&mut c, &mut log, &["a", "b"]);
    let (_, e) = c.offset_commit(&commit_req(&ids[0], 1, 42), now);
    log.add(&e);
    let mut simple = commit_req("", -1, 7);
    simple.group_id = "simple".into();
    let (_, e) = c.offset_commit(&simple, now);
    log.add(&e);
    let (_, e) = c.offset_commit(&simple, now + 1);
    log.add(&e);

    let mut loaded = GroupCoordinator::new(config());
    loaded.load(log.pairs(), now + 100).expect("loads");
    assert_eq!(loaded.group_state(GROUP), Some(GroupState::Stable));
    assert_eq!(loaded.group_generation(GROUP), Some(1));
    assert_eq!(
        loaded.describe_groups(&[GROUP.into()]),
        c.describe_groups(&[GROUP.into()])
    );
    assert_eq!(fetch(&loaded, GROUP), 42);
    assert_eq!(fetch(&loaded, "simple"), 7);
    assert_eq!(hb(&mut loaded, &leader, 1, now + 200), 0);
    // Sessions restart at load time.
    assert_eq!(
        loaded.next_deadline_ms(),
        Some(now + 100 + i64::from(SESSION_MS))
    );

    // Deleting writes tombstones that a replay honours.
    let (_, e) = c.delete_groups(&["simple".into()], now + 2);
    log.add(&e);
    let mut reloaded = GroupCoordinator::new(config());
    reloaded.load(log.pairs(), now + 100).expect("loads");
    assert_eq!(reloaded.group_state("simple"), None);
    assert_eq!(fetch(&reloaded, "simple"), -1);
    assert_eq!(reloaded.group_state(GROUP), Some(GroupState::Stable));

    // A corrupt value fails the load.
    let key = GroupMetadataKey { group: "x".into() }.encode();
    let bad: Vec<(&[u8], Option<&[u8]>)> = vec![(key.as_slice(), Some(&[0u8, 3, 0][..]))];
    assert!(GroupCoordinator::new(config()).load(bad, 0).is_err());
}

#[test]
fn protocol_is_chosen_by_vote() {
    let mut c = GroupCoordinator::new(config());
    let with = |client: &str, names: &[&str]| JoinGroupRequest {
        protocols: protocols(names),
        ..join_req("", client)
    };
    c.join_group(with("a", &["range", "roundrobin", "sticky"]), 1, 0);
    c.join_group(with("b", &["sticky", "roundrobin"]), 2, 0);
    c.join_group(with("c", &["roundrobin", "sticky"]), 3, 0);
    // Inconsistent: nothing in common with the members.
    let e = c.join_group(with("d", &["other"]), 4, 0);
    assert_eq!(
        join_resp(&e, 4).expect("refused").error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    let e = c.tick(DELAY_MS);
    let e = if e.join_responses.is_empty() {
        c.tick(2 * DELAY_MS)
    } else {
        e
    };
    // Candidates: roundrobin, sticky. Votes: a roundrobin, b sticky, c roundrobin.
    assert!(e
        .join_responses
        .iter()
        .all(|(_, r)| r.protocol_name.as_deref() == Some("roundrobin")));
}

#[test]
fn parked_sync_is_kept_alive_and_leave_batches_by_instance_id() {
    let mut c = GroupCoordinator::new(config());
    let static_req = |instance: &str| JoinGroupRequest {
        group_instance_id: Some(instance.into()),
        ..join_req("", instance)
    };
    c.join_group(static_req("i-a"), 1, 0);
    c.join_group(static_req("i-b"), 2, 0);
    c.join_group(join_req("", "dyn"), 3, 0);
    c.tick(DELAY_MS);
    let e = c.tick(2 * DELAY_MS);
    assert_eq!(e.join_responses.len(), 3);
    let leader = join_resp(&e, 1).expect("a").leader.clone();
    let followers: Vec<String> = e
        .join_responses
        .iter()
        .map(|(_, r)| r.member_id.clone())
        .filter(|id| *id != leader)
        .collect();
    // The followers wait in SyncGroup far past their sessions; the leader heartbeats.
    let now = 2 * DELAY_MS;
    for (i, f) in followers.iter().enumerate() {
        c.sync_group(sync_req(f, 1, vec![]), 10 + i as WaiterId, now);
    }
    for t in (now..now + 3 * i64::from(SESSION_MS)).step_by(5_000) {
        assert_eq!(hb(&mut c, &leader, 1, t), 0);
        c.tick(t);
    }
    assert_eq!(c.group_state(GROUP), Some(GroupState::CompletingRebalance));
    let later = now + 3 * i64::from(SESSION_MS);
    let e = c.sync_group(sync_req(&leader, 1, vec![]), 20, later);
    assert_eq!(sync_resp(&e, 10).expect("follower answered").error_code, 0);
    assert_eq!(sync_resp(&e, 11).expect("follower answered").error_code, 0);
    assert_eq!(c.group_state(GROUP), Some(GroupState::Stable));

    // LeaveGroup v3+: two static members by instance id, one unknown.
    let (resp, _) = c.leave_group(
        &LeaveGroupRequest {
            group_id: GROUP.into(),
            members: vec![
                LeavingMember {
                    member_id: String::new(),
                    group_instance_id: Some("i-a".into()),
                },
                LeavingMember {
                    member_id: String::new(),
                    group_instance_id: Some("i-b".into()),
                },
                LeavingMember {
                    member_id: "ghost".into(),
                    group_instance_id: None,
                },
            ],
        },
        later,
    );
    let codes: Vec<i16> = resp.members.iter().map(|(_, code)| *code).collect();
    assert_eq!(codes, [0, 0, ResponseError::UnknownMemberId.code()]);
    assert_eq!(c.group_state(GROUP), Some(GroupState::PreparingRebalance));
    let described = c.describe_groups(&[GROUP.into()]);
    assert_eq!(described[0].members.len(), 1);
    assert_eq!(described[0].state, "PreparingRebalance");
    assert!(described[0].protocol_data.is_empty());
}

fn txn_commit(group: &str, pid: i64, offset: i64) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        transactional_id: "tx".into(),
        group_id: group.into(),
        producer_id: ProducerId(pid),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions: commit_req("", -1, offset).partitions,
    }
}

fn fetch_stable(c: &GroupCoordinator, group: &str) -> (i64, i16) {
    let r = c.offset_fetch(&OffsetFetchRequest {
        group_id: group.into(),
        partitions: Some(vec![TopicPartition::new("t", 0)]),
        require_stable: true,
    });
    (r.partitions[0].offset, r.partitions[0].error_code)
}

#[test]
fn transactional_commits_wait_for_the_marker() {
    let mut c = GroupCoordinator::new(config());
    let partition = partition_for("eos", 50);
    let (r, e) = c.txn_offset_commit(&txn_commit("eos", 7, 10), 0);
    assert_eq!(r.partitions[0].1, 0);
    assert_eq!(e.records.len(), 1);
    assert_eq!(fetch(&c, "eos"), -1, "invisible until the marker");
    assert_eq!(
        fetch_stable(&c, "eos"),
        (-1, ResponseError::UnstableOffsetCommit.code())
    );
    // A marker for another partition or producer changes nothing.
    c.complete_txn(ProducerId(7), &[partition + 1], true, 1);
    c.complete_txn(ProducerId(8), &[partition], true, 1);
    assert_eq!(fetch(&c, "eos"), -1);
    c.complete_txn(ProducerId(7), &[partition], true, 2);
    assert_eq!(fetch_stable(&c, "eos"), (10, 0));
    // Aborted: dropped.
    c.txn_offset_commit(&txn_commit("eos", 7, 20), 3);
    c.complete_txn(ProducerId(7), &[partition], false, 4);
    assert_eq!(fetch_stable(&c, "eos"), (10, 0));
    // A plain commit written after the transactional one wins.
    c.txn_offset_commit(&txn_commit("eos", 7, 30), 5);
    let mut plain = commit_req("", -1, 31);
    plain.group_id = "eos".into();
    c.offset_commit(&plain, 6);
    c.complete_txn(ProducerId(7), &[partition], true, 7);
    assert_eq!(fetch(&c, "eos"), 31);
    // An aborted transaction in a group that holds nothing else leaves nothing behind.
    c.txn_offset_commit(&txn_commit("gone", 9, 1), 8);
    c.complete_txn(ProducerId(9), &[partition_for("gone", 50)], false, 9);
    assert_eq!(c.group_state("gone"), None);
}

#[test]
fn load_replays_transaction_markers() {
    let mut c = GroupCoordinator::new(config());
    let committed = c.txn_offset_commit(&txn_commit("eos", 7, 10), 0).1.records;
    let aborted = c.txn_offset_commit(&txn_commit("eos", 8, 20), 0).1.records;
    let open = c.txn_offset_commit(&txn_commit("open", 9, 30), 0).1.records;
    fn rec(r: &CoordinatorRecord, pid: i64) -> LoadEntry<'_> {
        LoadEntry::Record {
            key: &r.key,
            value: r.value.as_deref(),
            producer_id: Some(ProducerId(pid)),
        }
    }
    let entries = vec![
        rec(&committed[0], 7),
        rec(&aborted[0], 8),
        rec(&open[0], 9),
        LoadEntry::TxnMarker {
            producer_id: ProducerId(8),
            commit: false,
        },
        LoadEntry::TxnMarker {
            producer_id: ProducerId(7),
            commit: true,
        },
    ];
    let mut loaded = GroupCoordinator::new(config());
    loaded.load_entries(entries, 0).expect("loads");
    assert_eq!(fetch_stable(&loaded, "eos"), (10, 0));
    assert_eq!(
        fetch_stable(&loaded, "open"),
        (-1, ResponseError::UnstableOffsetCommit.code())
    );
    loaded.complete_txn(ProducerId(9), &[partition_for("open", 50)], true, 1);
    assert_eq!(fetch(&loaded, "open"), 30);
}

fn check_invariants(c: &GroupCoordinator) {
    for g in c.groups.values() {
        if let Some(leader) = &g.leader {
            assert!(g.members.contains_key(leader), "leader is a member");
        }
        assert_eq!(
            g.leader.is_some(),
            !g.members.is_empty(),
            "a leader iff members"
        );
        for (instance, id) in &g.static_members {
            let m = g.members.get(id).expect("static member present");
            assert_eq!(m.group_instance_id.as_deref(), Some(instance.as_str()));
        }
        match g.state {
            GroupState::Empty => assert!(g.members.is_empty()),
            GroupState::Stable | GroupState::CompletingRebalance => {
                assert!(g.members.values().all(|m| m.join_waiter.is_none()));
                assert!(g.join_deadline_ms.is_none());
            }
            GroupState::PreparingRebalance => assert!(g.join_deadline_ms.is_some()),
            GroupState::Dead => panic!("dead groups are dropped"),
        }
        if g.state != GroupState::CompletingRebalance {
            assert!(g.members.values().all(|m| m.sync_waiter.is_none()));
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Join {
        client: usize,
        fresh: bool,
        static_member: bool,
    },
    Sync {
        client: usize,
    },
    Heartbeat {
        client: usize,
    },
    Leave {
        client: usize,
    },
    Advance {
        ms: i64,
    },
}

fn arb_op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0..4usize, any::<bool>(), any::<bool>()).prop_map(|(client, fresh, static_member)| {
            Op::Join {
                client,
                fresh,
                static_member,
            }
        }),
        (0..4usize).prop_map(|client| Op::Sync { client }),
        (0..4usize).prop_map(|client| Op::Heartbeat { client }),
        (0..4usize).prop_map(|client| Op::Leave { client }),
        (0..40_000i64).prop_map(|ms| Op::Advance { ms }),
    ]
}

proptest::proptest! {
    /// Random clients against the state machine: invariants hold after every call, and
    /// every parked JoinGroup and SyncGroup is answered exactly once in the end.
    #[test]
    fn random_clients_keep_invariants(ops in proptest::collection::vec(arb_op(), 1..60)) {
        let mut c = GroupCoordinator::new(config());
        let mut now = 0;
        let mut next_waiter: WaiterId = 0;
        let mut issued = BTreeSet::new();
        let mut answered: BTreeMap<WaiterId, usize> = BTreeMap::new();
        // Per client: member id and generation from its last successful JoinGroup.
        let mut known: [(String, i32); 4] = Default::default();
        let mut record = |e: &Effects, known: &mut [(String, i32); 4]| {
            for (w, r) in &e.join_responses {
                *answered.entry(*w).or_default() += 1;
                let client = (*w % 4) as usize;
                if r.error_code == 0 || r.error_code == ResponseError::MemberIdRequired.code() {
                    known[client] = (r.member_id.clone(), r.generation_id);
                }
            }
            for (w, _) in &e.sync_responses {
                *answered.entry(*w).or_default() += 1;
            }
        };
        for op in ops {
            // Waiter ids encode the client so responses can be attributed.
            let mut waiter = |client: usize| {
                next_waiter += 4;
                let w = next_waiter + client as WaiterId;
                issued.insert(w);
                w
            };
            match op {
                Op::Join { client, fresh, static_member } => {
                    let member_id = if fresh { String::new() } else { known[client].0.clone() };
                    let req = JoinGroupRequest {
                        group_instance_id: static_member.then(|| format!("i-{client}")),
                        require_known_member_id: true,
                        ..join_req(&member_id, &format!("c{client}"))
                    };
                    let e = c.join_group(req, waiter(client), now);
                    record(&e, &mut known);
                }
                Op::Sync { client } => {
                    let (id, generation) = known[client].clone();
                    let assignments = vec![(id.clone(), assignment_for(&id))];
                    let e = c.sync_group(sync_req(&id, generation, assignments), waiter(client), now);
                    record(&e, &mut known);
                }
                Op::Heartbeat { client } => {
                    let (id, generation) = known[client].clone();
                    hb(&mut c, &id, generation, now);
                }
                Op::Leave { client } => {
                    let (e_resp, e) = c.leave_group(
                        &LeaveGroupRequest {
                            group_id: GROUP.into(),
                            members: vec![LeavingMember {
                                member_id: known[client].0.clone(),
                                group_instance_id: None,
                            }],
                        },
                        now,
                    );
                    proptest::prop_assert_eq!(e_resp.members.len(), 1);
                    record(&e, &mut known);
                }
                Op::Advance { ms } => {
                    now += ms;
                    let e = c.tick(now);
                    record(&e, &mut known);
                }
            }
            check_invariants(&c);
        }
        // Everyone goes quiet: timers drain the group and answer every parked request.
        for _ in 0..50 {
            let Some(deadline) = c.deadlines.first().map(|(d, _)| *d) else { break };
            now = now.max(deadline);
            let e = c.tick(now);
            record(&e, &mut known);
            check_invariants(&c);
        }
        proptest::prop_assert!(c.deadlines.is_empty(), "timers drained");
        proptest::prop_assert!(answered.values().all(|n| *n == 1), "answered once: {answered:?}");
        let unanswered: Vec<_> = issued.iter().filter(|w| !answered.contains_key(w)).collect();
        proptest::prop_assert!(unanswered.is_empty(), "unanswered {unanswered:?}");
    }
}
