use std::io::Write;

use raft::Storage;

use super::*;

fn entry(index: u64, term: u64, data: &str) -> Entry {
    Entry {
        index,
        term,
        data: data.as_bytes().to_vec().into(),
        ..Entry::default()
    }
}

/// (first index, last index).
fn range(store: &RaftStore) -> (u64, u64) {
    (
        store.first_index().expect("first index"),
        store.last_index().expect("last index"),
    )
}

fn datas(store: &RaftStore, low: u64, high: u64) -> Vec<String> {
    store
        .entries(low, high, None, GetEntriesContext::empty(false))
        .expect("entries")
        .iter()
        .map(|e| String::from_utf8_lossy(&e.data).into_owned())
        .collect()
}

#[test]
fn entries_hard_state_and_voters_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RaftStore::open(dir.path()).expect("open");
    assert!(store.is_fresh());
    store.bootstrap(&[1, 2, 3]).expect("bootstrap");
    store
        .append(&[entry(2, 1, "a"), entry(3, 1, "b"), entry(4, 2, "c")])
        .expect("append");
    let hs = HardState {
        term: 2,
        vote: 3,
        commit: 3,
        ..HardState::default()
    };
    store.set_hard_state(&hs).expect("hard state");
    drop(store);
    let store = RaftStore::open(dir.path()).expect("reopen");
    assert!(!store.is_fresh());
    let state = store.initial_state().expect("state");
    // Term and vote are durable; the commit index alone is not (it is learnt again),
    // and never goes below the snapshot's.
    assert_eq!((state.hard_state.term, state.hard_state.vote), (2, 3));
    assert!(
        (1..=3).contains(&state.hard_state.commit),
        "{:?}",
        state.hard_state
    );
    assert_eq!(state.conf_state.voters, vec![1, 2, 3]);
    assert_eq!(range(&store), (2, 4));
    assert_eq!(datas(&store, 2, 5), vec!["a", "b", "c"]);
    assert_eq!(
        store.term(1).expect("term"),
        1,
        "the bootstrap snapshot's term"
    );
    assert_eq!(store.term(4).expect("term"), 2);
}

#[test]
fn a_new_leaders_entries_replace_the_suffix_they_overlap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RaftStore::open(dir.path()).expect("open");
    store.bootstrap(&[1]).expect("bootstrap");
    store
        .append(&[entry(2, 1, "a"), entry(3, 1, "b"), entry(4, 1, "c")])
        .expect("append");
    store
        .append(&[entry(3, 2, "B"), entry(4, 2, "C"), entry(5, 2, "D")])
        .expect("overwrite");
    assert_eq!(datas(&store, 2, 6), vec!["a", "B", "C", "D"]);
    drop(store);
    let store = RaftStore::open(dir.path()).expect("reopen");
    assert_eq!(
        datas(&store, 2, 6),
        vec!["a", "B", "C", "D"],
        "on disk as well"
    );
}

#[test]
fn a_torn_tail_is_cut_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RaftStore::open(dir.path()).expect("open");
    store.bootstrap(&[1]).expect("bootstrap");
    store
        .append(&[entry(2, 1, "a"), entry(3, 1, "b")])
        .expect("append");
    drop(store);
    // Half a frame at the end, as a crash mid-write leaves it.
    let path = dir.path().join(RAFT_DIR).join(LOG_FILE);
    let whole = frame(&entry(4, 1, "c"));
    let mut f = OpenOptions::new().append(true).open(&path).expect("log");
    f.write_all(&whole[..whole.len() - 3]).expect("torn write");
    drop(f);
    let store = RaftStore::open(dir.path()).expect("reopen");
    assert_eq!(store.last_index().expect("last index"), 3);
    // And the next append lands where the torn frame was.
    store.append(&[entry(4, 1, "d")]).expect("append");
    drop(store);
    let store = RaftStore::open(dir.path()).expect("reopen");
    assert_eq!(datas(&store, 2, 5), vec!["a", "b", "d"]);
}

#[test]
fn compaction_keeps_what_follows_the_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RaftStore::open(dir.path()).expect("open");
    store.bootstrap(&[1, 2]).expect("bootstrap");
    let batch: Vec<Entry> = (2..=10).map(|i| entry(i, 1, &format!("e{i}"))).collect();
    store.append(&batch).expect("append");
    store.compact(6, b"state@6".to_vec()).expect("compact");
    assert_eq!(store.first_index().expect("first index"), 7);
    assert_eq!(store.term(6).expect("term"), 1);
    assert!(matches!(
        store.entries(5, 8, None, GetEntriesContext::empty(false)),
        Err(raft::Error::Store(StorageError::Compacted))
    ));
    let snap = store.snapshot(6, 2).expect("snapshot");
    assert_eq!(snap.get_metadata().index, 6);
    assert_eq!(&snap.data[..], b"state@6");
    assert_eq!(snap.get_metadata().get_conf_state().voters, vec![1, 2]);
    drop(store);
    let store = RaftStore::open(dir.path()).expect("reopen");
    assert_eq!(datas(&store, 7, 11), vec!["e7", "e8", "e9", "e10"]);
    assert_eq!(store.entry_count(), 4);
    // A snapshot from the leader replaces everything.
    let mut theirs = Snapshot::default();
    theirs.mut_metadata().index = 20;
    theirs.mut_metadata().term = 3;
    theirs.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
    theirs.data = b"state@20".to_vec().into();
    store.apply_snapshot(theirs).expect("apply");
    assert_eq!(range(&store), (21, 20));
    assert_eq!(store.hard_state().commit, 20);
    assert_eq!(store.conf_state().voters, vec![1, 2, 3]);
}
