//! Three members on loopback TCP, each on its own thread with its own directory:
//! election, commits seen by every member in order, proposals to a follower refused
//! with the leader's id, the leader stopped and replaced, and its return.

use super::*;

fn timing() -> QuorumTiming {
    QuorumTiming {
        tick_ms: 20,
        election_ticks: 10,
        heartbeat_ticks: 2,
    }
}

fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

fn wait_leader(members: &BTreeMap<u64, QuorumHandle>) -> u64 {
    let started = Instant::now();
    loop {
        let statuses: Vec<Status> = members.values().filter_map(QuorumHandle::status).collect();
        // One of these members leads, and the others know it (a stopped member is not
        // a leader, whatever the others still believe).
        if let Some(l) = statuses.first().and_then(|s| s.leader) {
            let agreed =
                statuses.len() == members.len() && statuses.iter().all(|s| s.leader == Some(l));
            if agreed && members.contains_key(&l) {
                return l;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no leader: {statuses:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The next `n` entries a member hands its owner, as strings.
fn take(handle: &QuorumHandle, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let e = handle
                .committed
                .recv_timeout(Duration::from_secs(20))
                .expect("a committed entry");
            String::from_utf8_lossy(&e.data).into_owned()
        })
        .collect()
}

fn values(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("v{i}")).collect()
}

#[test]
fn three_members_over_tcp_commit_in_order_and_survive_the_leaders_loss() {
    let dirs: BTreeMap<u64, tempfile::TempDir> = (1..=3)
        .map(|id| (id, tempfile::tempdir().expect("tempdir")))
        .collect();
    let voters: Voters = (1..=3).map(|id| (id, free_addr())).collect();
    let mut members: BTreeMap<u64, QuorumHandle> = voters
        .keys()
        .map(|&id| {
            let store = RaftStore::open(dirs[&id].path()).expect("store");
            let h = start(id, voters.clone(), store, timing()).expect("start");
            (id, h)
        })
        .collect();
    let leader = wait_leader(&members);
    for v in values(0..20) {
        members[&leader].propose(v.into_bytes()).expect("committed");
    }
    for (id, h) in &members {
        assert_eq!(take(h, 20), values(0..20), "member {id}");
    }
    let follower = *members
        .keys()
        .find(|id| **id != leader)
        .expect("a follower");
    assert_eq!(
        members[&follower].propose(b"x".to_vec()),
        Err(ProposeError::NotLeader(Some(leader)))
    );
    // The leader stops; the two others elect one of them and go on.
    members
        .remove(&leader)
        .expect("leader")
        .stop()
        .expect("stops");
    let second = wait_leader(&members);
    assert_ne!(second, leader);
    for v in values(20..30) {
        members[&second].propose(v.into_bytes()).expect("committed");
    }
    for h in members.values() {
        assert_eq!(take(h, 10), values(20..30));
    }
    // The old leader comes back from its directory and catches up.
    let store = RaftStore::open(dirs[&leader].path()).expect("store");
    let back = start(leader, voters.clone(), store, timing()).expect("restart");
    assert_eq!(take(&back, 30), values(0..30), "replayed, then caught up");
    members.insert(leader, back);
    assert_eq!(wait_leader(&members), second);
    for (_, h) in members {
        h.stop().expect("stops");
    }
}
