//! Three members over an in-memory network: election, replication, a member lost and
//! restarted, and a member brought up from the leader's snapshot. The state machine is a
//! list of strings; a snapshot's data is that list, one per line.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

const VOTERS: [u64; 3] = [1, 2, 3];

struct Member {
    node: QuorumNode,
    applied: Vec<String>,
}

struct Net {
    dirs: BTreeMap<u64, tempfile::TempDir>,
    members: BTreeMap<u64, Member>,
}

fn timing() -> QuorumTiming {
    QuorumTiming {
        tick_ms: 0,
        election_ticks: 10,
        heartbeat_ticks: 2,
    }
}

fn decode(data: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(data)
        .lines()
        .map(str::to_string)
        .collect()
}

impl Net {
    fn new() -> Net {
        let mut net = Net {
            dirs: BTreeMap::new(),
            members: BTreeMap::new(),
        };
        for id in VOTERS {
            net.dirs.insert(id, tempfile::tempdir().expect("tempdir"));
            net.start(id);
        }
        net
    }

    /// Opens member `id` from its directory (fresh, or as it was left).
    fn start(&mut self, id: u64) {
        let store = RaftStore::open(self.dirs[&id].path()).expect("store");
        let applied = decode(&store.latest_snapshot().data);
        let node = QuorumNode::open(id, &VOTERS, store, timing()).expect("node");
        self.members.insert(id, Member { node, applied });
    }

    /// Member `id` stops (what it persisted stays).
    fn stop(&mut self, id: u64) {
        self.members.remove(&id);
    }

    /// Drives every member and delivers messages until the network is quiet.
    fn settle(&mut self) {
        for _ in 0..1000 {
            let mut mail: Vec<Message> = Vec::new();
            let ids: Vec<u64> = self.members.keys().copied().collect();
            for id in ids {
                let m = self.members.get_mut(&id).expect("member");
                let progress = m.node.drive().expect("drive");
                if let Some(snap) = progress.snapshot {
                    m.applied = decode(&snap.data);
                }
                for e in progress.committed {
                    m.applied
                        .push(String::from_utf8_lossy(&e.data).into_owned());
                }
                mail.extend(progress.messages);
            }
            if mail.is_empty() {
                return;
            }
            for msg in mail {
                if let Some(m) = self.members.get_mut(&msg.to) {
                    m.node.step(msg).expect("step");
                }
            }
        }
        panic!("the network never went quiet");
    }

    fn tick(&mut self, times: usize) {
        for _ in 0..times {
            for m in self.members.values_mut() {
                m.node.tick();
            }
            self.settle();
        }
    }

    /// Ticks until exactly one member leads and the others know it.
    fn leader(&mut self) -> u64 {
        for _ in 0..200 {
            self.tick(1);
            let leaders: BTreeSet<u64> = self
                .members
                .values()
                .filter(|m| m.node.is_leader())
                .map(|m| m.node.id())
                .collect();
            if let [l] = leaders.iter().copied().collect::<Vec<_>>()[..] {
                if self.members.values().all(|m| m.node.leader() == Some(l)) {
                    return l;
                }
            }
        }
        panic!("no leader elected");
    }

    fn propose(&mut self, leader: u64, values: impl IntoIterator<Item = String>) {
        for v in values {
            let m = self.members.get_mut(&leader).expect("leader");
            m.node.propose(v.into_bytes()).expect("propose");
            self.settle();
        }
    }

    fn applied(&self, id: u64) -> &[String] {
        &self.members[&id].applied
    }
}

fn values(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("r{i}")).collect()
}

#[test]
fn three_members_elect_one_leader_and_apply_the_same_entries_in_order() {
    let mut net = Net::new();
    let leader = net.leader();
    net.propose(leader, values(0..50));
    for id in VOTERS {
        assert_eq!(net.applied(id), values(0..50), "member {id}");
    }
    // Only the leader takes proposals.
    let follower = VOTERS
        .iter()
        .copied()
        .find(|id| *id != leader)
        .expect("a follower");
    let refused = net
        .members
        .get_mut(&follower)
        .expect("follower")
        .node
        .propose(b"x".to_vec());
    assert!(
        matches!(refused, Err(QuorumError::NotLeader(Some(l))) if l == leader),
        "{refused:?}"
    );
}

#[test]
fn the_survivors_elect_a_new_leader_and_a_restarted_member_catches_up() {
    let mut net = Net::new();
    let first = net.leader();
    let term = net.members[&first].node.term();
    net.propose(first, values(0..10));
    net.stop(first);
    let second = net.leader();
    assert_ne!(second, first);
    assert!(net.members[&second].node.term() > term);
    net.propose(second, values(10..30));
    // The old leader comes back from its files: it replays what it had, then catches up.
    net.start(first);
    net.tick(30);
    for id in VOTERS {
        assert_eq!(net.applied(id), values(0..30), "member {id}");
    }
    assert_eq!(
        net.leader(),
        second,
        "a returning member does not disrupt (pre-vote)"
    );
}

#[test]
fn a_member_behind_the_leaders_snapshot_catches_up_from_it() {
    let mut net = Net::new();
    let leader = net.leader();
    let lagging = VOTERS
        .iter()
        .copied()
        .find(|id| *id != leader)
        .expect("a follower");
    net.stop(lagging);
    net.propose(leader, values(0..100));
    // Every live member snapshots its state machine and drops its log.
    for m in net.members.values_mut() {
        let data = m.applied.join("\n").into_bytes();
        m.node.compact(u64::MAX, data).expect("compact");
        assert_eq!(m.node.store().entry_count(), 0);
    }
    net.start(lagging);
    net.tick(30);
    assert_eq!(
        net.applied(lagging),
        values(0..100),
        "restored from the snapshot"
    );
    net.propose(leader, values(100..110));
    for id in VOTERS {
        assert_eq!(net.applied(id), values(0..110), "member {id}");
    }
}
