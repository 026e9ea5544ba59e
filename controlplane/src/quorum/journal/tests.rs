use super::*;
use crate::metadata_log::ConfigResourceType;

fn topic(name: &str, id: u128) -> MetadataRecord {
    MetadataRecord::Topic {
        name: name.to_string(),
        id: uuid::Uuid::from_u128(id),
    }
}

fn config(name: &str, value: &str) -> MetadataRecord {
    MetadataRecord::Config {
        resource_type: ConfigResourceType::Broker,
        resource_name: String::new(),
        name: name.to_string(),
        value: Some(value.to_string()),
    }
}

#[test]
fn committed_batches_replay_in_order_after_a_reopen_and_a_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut j, replay) = MetadataJournal::open(dir.path(), 0).expect("open");
    assert!(replay.snapshot.is_empty() && replay.committed.is_empty());
    j.append(&[topic("a", 1), config("log.retention.ms", "1")])
        .expect("append");
    j.append(&[topic("b", 2)]).expect("append");
    drop(j);
    let (mut j, replay) = MetadataJournal::open(dir.path(), 0).expect("reopen");
    assert_eq!(
        replay.committed,
        vec![
            topic("a", 1),
            config("log.retention.ms", "1"),
            topic("b", 2)
        ]
    );
    // A snapshot replaces what it covers; later batches follow it.
    j.snapshot(3, &[topic("a", 1), topic("b", 2)])
        .expect("snapshot");
    assert_eq!(j.entries_since_snapshot(), 0);
    j.append(&[topic("c", 3)]).expect("append");
    drop(j);
    let (_, replay) = MetadataJournal::open(dir.path(), 0).expect("reopen");
    assert_eq!(replay.snapshot_applied, 3);
    assert_eq!(replay.snapshot, vec![topic("a", 1), topic("b", 2)]);
    assert_eq!(replay.committed, vec![topic("c", 3)]);
}

#[test]
fn a_metadata_log_from_before_the_quorum_is_imported_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut legacy, _) = MetadataLog::open(dir.path()).expect("legacy log");
        legacy.append(&[topic("old", 9)]).expect("append");
    }
    let (mut j, replay) = MetadataJournal::open(dir.path(), 2).expect("open");
    assert_eq!(replay.snapshot, vec![topic("old", 9)]);
    assert_eq!(replay.snapshot_applied, 1);
    let dir_meta = dir.path().join(METADATA_DIR);
    assert!(!dir_meta.join(METADATA_LOG_FILE).exists());
    assert!(dir_meta.join("metadata.log.imported").exists());
    j.append(&[topic("new", 10)]).expect("append");
    drop(j);
    let (_, replay) = MetadataJournal::open(dir.path(), 2).expect("reopen");
    assert_eq!(replay.snapshot, vec![topic("old", 9)]);
    assert_eq!(replay.committed, vec![topic("new", 10)]);
}
