//! Three members on loopback TCP, each on its own thread with its own directory:
//! election, commits seen by every member in order, proposals to a follower refused
//! with the leader's id, the leader stopped and replaced, and its return; a learner
//! that dials a lone voter, is added, and catches up from a snapshot taken after it
//! joined.

use super::*;

fn timing() -> QuorumTiming {
    QuorumTiming {
        tick_ms: 20,
        election_ticks: 10,
        heartbeat_ticks: 2,
    }
}

/// A port free now, on a loopback address of its own (127.0.0.2 and up): the members
/// bind it a moment later, and on 127.0.0.1 an outgoing connection of another test (or
/// of this one) could take it as its ephemeral port in between (AddrInUse).
fn free_addr() -> SocketAddr {
    static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    let host = 2 + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 250;
    let l = TcpListener::bind(("127.0.0.".to_string() + &host.to_string(), 0)).expect("bind");
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
            let h = start(
                id,
                Transport::static_quorum(id, voters.clone(), true),
                store,
                timing(),
            )
            .expect("start");
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
    let back = start(
        leader,
        Transport::static_quorum(leader, voters.clone(), true),
        store,
        timing(),
    )
    .expect("restart");
    assert_eq!(take(&back, 30), values(0..30), "replayed, then caught up");
    members.insert(leader, back);
    assert_eq!(wait_leader(&members), second);
    for (_, h) in members {
        h.stop().expect("stops");
    }
}

/// The next committed thing a member hands its owner: a snapshot's data or an entry's.
fn next(handle: &QuorumHandle) -> (bool, String) {
    let e = handle
        .committed
        .recv_timeout(Duration::from_secs(20))
        .expect("a committed entry");
    (
        &e.context[..] == b"snapshot",
        String::from_utf8_lossy(&e.data).into_owned(),
    )
}

fn wait_status(handle: &QuorumHandle, what: &str, ok: impl Fn(&Status) -> bool) -> Status {
    let started = Instant::now();
    loop {
        let s = handle.status().expect("status");
        if ok(&s) {
            return s;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{what}: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_learner_dials_a_lone_voter_joins_and_catches_up_from_a_fresh_snapshot() {
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().expect("dir")).collect();
    let voters: Voters = std::iter::once((1, free_addr())).collect();
    let store = RaftStore::open(dirs[0].path()).expect("store");
    let voter = start(
        1,
        Transport::static_quorum(1, voters.clone(), true),
        store,
        timing(),
    )
    .expect("voter");
    wait_status(&voter, "the lone voter leads", |s| s.leader == Some(1));
    for v in values(0..5) {
        voter.propose(v.into_bytes()).expect("committed");
    }
    assert_eq!(take(&voter, 5), values(0..5));
    // The voter's snapshot is taken before the learner exists: its configuration does
    // not name the learner, which would refuse it.
    voter.compact(u64::MAX, b"state@5".to_vec());
    wait_status(&voter, "compacted", |_| true);

    let store = RaftStore::open(dirs[1].path()).expect("store");
    let learner = start(
        2,
        Transport::static_quorum(2, voters.clone(), false),
        store,
        timing(),
    )
    .expect("learner");
    assert_eq!(learner.addr, None, "a learner listens nowhere");
    let seen = wait_status(&voter, "the learner is added", |s| s.learners.contains(&2));
    assert_eq!(seen.voters.iter().copied().collect::<Vec<_>>(), vec![1]);
    // The stored snapshot cannot serve the learner: a newer one is asked for.
    wait_status(&voter, "a snapshot is wanted", |_| voter.snapshot_wanted());
    voter.compact(u64::MAX, b"state@5+learner".to_vec());
    assert_eq!(
        next(&learner),
        (true, "state@5+learner".to_string()),
        "the learner starts from the new snapshot"
    );
    for v in values(5..8) {
        voter.propose(v.into_bytes()).expect("committed");
    }
    assert_eq!(take(&learner, 3), values(5..8), "then follows the log");
    assert_eq!(
        learner.propose(b"x".to_vec()),
        Err(ProposeError::NotLeader(Some(1))),
        "a learner never leads"
    );
    let heard = wait_status(&voter, "the learner is heard", |s| {
        s.heard.get(&2).copied().flatten().is_some()
    });
    assert!(!heard.refused.contains(&2));
    // The learner's process ends: its connection closes, and the voter knows it gone.
    learner.stop().expect("stops");
    wait_status(&voter, "the learner is gone", |s| s.refused.contains(&2));
    // It comes back from its directory and catches up on what it missed.
    voter.propose(b"v8".to_vec()).expect("committed");
    let store = RaftStore::open(dirs[1].path()).expect("store");
    let back = start(
        2,
        Transport::static_quorum(2, voters, false),
        store,
        timing(),
    )
    .expect("learner again");
    let mut got = Vec::new();
    while got.last().map(String::as_str) != Some("v8") {
        got.push(next(&back).1);
    }
    wait_status(&voter, "the learner is back", |s| !s.refused.contains(&2));
    back.stop().expect("stops");
    voter.stop().expect("stops");
}

/// A member of a dynamic quorum: listens on `addr`, dials `bootstrap`.
fn dynamic(
    id: u64,
    dir: &std::path::Path,
    addr: SocketAddr,
    bootstrap: &[SocketAddr],
) -> QuorumHandle {
    let transport = Transport {
        listen: Some(addr),
        bootstrap: bootstrap.to_vec(),
        initial_voters: if bootstrap.is_empty() {
            vec![id]
        } else {
            Vec::new()
        },
        ..Transport::default()
    };
    let store = RaftStore::open(dir).expect("store");
    start(id, transport, store, timing()).expect("start")
}

#[test]
fn a_lone_voter_grows_to_three_voters_loses_its_first_and_the_others_remove_it() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let first = dynamic(1, dirs[0].path(), addrs[0], &[]);
    wait_status(&first, "the lone voter leads", |s| s.leader == Some(1));
    first.propose(b"v0".to_vec()).expect("committed");
    // Two controllers join through the first one's address alone, as learners first.
    let second = dynamic(2, dirs[1].path(), addrs[1], &[addrs[0]]);
    let third = dynamic(3, dirs[2].path(), addrs[2], &[addrs[0]]);
    wait_status(&first, "both are learners", |s| {
        s.learners.contains(&2) && s.learners.contains(&3)
    });
    // Their first snapshot, as the controller takes it when asked.
    wait_status(&first, "a snapshot is wanted", |_| first.snapshot_wanted());
    first.compact(u64::MAX, b"s".to_vec());
    for h in [&second, &third] {
        assert_eq!(
            next(h),
            (true, "s".to_string()),
            "caught up from the snapshot"
        );
    }
    first.change_voters(Change::Add(2)).expect("2 votes");
    // A change asked of a member that does not lead goes through the leader.
    second.change_voters(Change::Add(3)).expect("3 votes");
    let s = wait_status(&first, "three voters", |s| s.voters.len() == 3);
    assert!(s.learners.is_empty(), "{s:?}");
    // The newest dials the other (as it would from the committed endpoints).
    third.dial(2, addrs[1]);
    third
        .propose(b"x".to_vec())
        .expect_err("only the leader takes proposals");
    first.propose(b"v1".to_vec()).expect("committed by three");
    // The first one stops: the two others elect one of them.
    first.stop().expect("stops");
    let members = BTreeMap::from([(2, second), (3, third)]);
    let leader = wait_leader(&members);
    members[&leader]
        .propose(b"v2".to_vec())
        .expect("committed by two of three");
    members[&leader]
        .change_voters(Change::Remove(1))
        .expect("1 removed");
    for h in members.values() {
        let s = wait_status(h, "two voters", |s| s.voters.len() == 2);
        assert!(!s.voters.contains(&1), "{s:?}");
    }
    members[&leader]
        .propose(b"v3".to_vec())
        .expect("committed by two of two");
    for h in members.values() {
        let mut got = Vec::new();
        while got.last().map(String::as_str) != Some("v3") {
            got.push(next(h).1);
        }
        let data: Vec<&String> = got.iter().filter(|v| v.starts_with('v')).collect();
        // v0 came with the snapshot.
        assert_eq!(data, ["v1", "v2", "v3"], "{got:?}");
    }
    for (_, h) in members {
        h.stop().expect("stops");
    }
}

/// A CA and, per call, a member's key pair for 127.0.0.1 signed by it, as quorum TLS.
struct Pki {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_pem: String,
}

impl Pki {
    fn new(name: &str) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca_pem = params.self_signed(&key).expect("CA cert").pem();
        Pki {
            issuer: Issuer::new(params, key),
            ca_pem,
        }
    }

    /// A member's TLS: its certificate for `ip` from this CA, trusting `trusted`'s CA.
    fn member(&self, trusted: &Pki, ip: std::net::IpAddr) -> crate::quorum::QuorumTls {
        use dataplane::net::tls::{client_config, ClientAuth, Pem, TlsConfig};
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec![ip.to_string()]).expect("params");
        let cert = params.signed_by(&key, &self.issuer).expect("cert");
        let keystore = vec![Pem::Inline(format!(
            "{}{}",
            key.serialize_pem(),
            cert.pem()
        ))];
        let truststore = Pem::Inline(trusted.ca_pem.clone());
        let server = TlsConfig {
            keystore: keystore.clone(),
            truststore: Some(truststore.clone()),
            client_auth: ClientAuth::Required,
            tls12: true,
            tls13: true,
            principal_rules: Vec::new(),
        }
        .load()
        .expect("server config");
        let client = client_config(Some(&truststore), &keystore, true).expect("client config");
        crate::quorum::QuorumTls { server, client }
    }
}

#[test]
fn members_over_tls_commit_and_a_learner_joins_but_a_stranger_s_certificate_is_refused() {
    let pki = Pki::new("quorum CA");
    let dirs: BTreeMap<u64, tempfile::TempDir> = (1..=5)
        .map(|id| (id, tempfile::tempdir().expect("tempdir")))
        .collect();
    let voters: Voters = (1..=3).map(|id| (id, free_addr())).collect();
    let tls_member = |id: u64, voter: bool, tls: crate::quorum::QuorumTls| {
        let store = RaftStore::open(dirs[&id].path()).expect("store");
        let transport = Transport {
            tls: Some(tls),
            ..Transport::static_quorum(id, voters.clone(), voter)
        };
        start(id, transport, store, timing()).expect("start")
    };
    let members: BTreeMap<u64, QuorumHandle> = (1..=3)
        .map(|id| (id, tls_member(id, true, pki.member(&pki, voters[&id].ip()))))
        .collect();
    let leader = wait_leader(&members);
    // Snapshot-sized frames cross the TLS links too.
    let big = "x".repeat(3 << 20);
    members[&leader]
        .propose(big.clone().into_bytes())
        .expect("committed");
    for v in values(0..20) {
        members[&leader].propose(v.into_bytes()).expect("committed");
    }
    for (id, h) in &members {
        let mut all = vec![big.clone()];
        all.extend(values(0..20));
        assert_eq!(take(h, 21), all, "member {id}");
    }
    // A learner with a certificate of the quorum's CA dials in and catches up over the
    // one connection both ends write on: a snapshot of megabytes, then the log.
    let leads = &members[&leader];
    leads.compact(u64::MAX, b"state".to_vec());
    wait_status(leads, "compacted", |_| true);
    let localhost = std::net::IpAddr::from([127, 0, 0, 1]);
    let learner = tls_member(4, false, pki.member(&pki, localhost));
    wait_status(leads, "the learner is added", |s| s.learners.contains(&4));
    wait_status(leads, "a snapshot is wanted", |_| leads.snapshot_wanted());
    let snapshot = format!("state+learner{big}");
    leads.compact(u64::MAX, snapshot.clone().into_bytes());
    assert_eq!(next(&learner), (true, snapshot), "the learner's snapshot");
    for v in values(20..23) {
        leads.propose(v.into_bytes()).expect("committed");
    }
    assert_eq!(take(&learner, 3), values(20..23), "then the log");
    learner.stop().expect("stops");
    // A member whose certificate no member's CA signed gets no link: it never hears of
    // a leader, and the quorum never hears of it.
    let stranger_ca = Pki::new("another CA");
    let stranger = tls_member(5, false, stranger_ca.member(&pki, localhost));
    std::thread::sleep(Duration::from_millis(1500));
    let status = stranger.status().expect("status");
    assert_eq!(status.leader, None, "{status:?}");
    members[&leader]
        .propose(b"after".to_vec())
        .expect("committed");
    assert!(
        stranger
            .committed
            .recv_timeout(Duration::from_secs(2))
            .is_err(),
        "nothing reached the stranger"
    );
    stranger.stop().expect("stops");
    for (_, h) in members {
        h.stop().expect("stops");
    }
}

#[test]
fn a_tls_conn_carries_frames_both_ways_between_clones() {
    use crate::quorum::tls::Conn;
    use std::io::{Read, Write};
    let pki = Pki::new("conn CA");
    let localhost = std::net::IpAddr::from([127, 0, 0, 1]);
    let (a, b) = (pki.member(&pki, localhost), pki.member(&pki, localhost));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = std::thread::spawn(move || {
        let (socket, _) = listener.accept().expect("accept");
        let mut conn = Conn::accept(socket, Some(&b)).expect("server handshake");
        let mut got = vec![0u8; 5];
        conn.read_exact(&mut got).expect("read");
        conn.write_all(&got).expect("echo");
        got
    });
    let mut conn = Conn::connect(addr, Duration::from_secs(2), Some(&a)).expect("client handshake");
    let mut reader = conn.try_clone().expect("clone");
    conn.write_all(b"hello").expect("write");
    let mut echo = vec![0u8; 5];
    reader.read_exact(&mut echo).expect("read the echo");
    assert_eq!(&echo, b"hello");
    assert_eq!(server.join().expect("server"), b"hello");
}
