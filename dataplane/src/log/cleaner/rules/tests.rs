use super::*;
use crate::types::{LeaderEpoch, ProducerEpoch};
use crate::wire::control::{build_mirror_pid_reset, build_txn_marker};
use crate::wire::records::encode_record as encode_plain;

const NOW: i64 = 1_000_000;
const RETENTION: i64 = 500;

/// A batch at `base` of (key, value) records, timestamps 100 + i.
fn batch_at(base: i64, records: &[(Option<&str>, Option<&str>)]) -> RecordBatch {
    producer_batch(base, records, ProducerId::NONE, false)
}

fn producer_batch(
    base: i64,
    records: &[(Option<&str>, Option<&str>)],
    pid: ProducerId,
    transactional: bool,
) -> RecordBatch {
    let mut body = Vec::new();
    for (i, (k, v)) in records.iter().enumerate() {
        encode_plain(
            &mut body,
            i as i32,
            i as i64,
            k.map(str::as_bytes),
            v.map(str::as_bytes),
        );
    }
    let n = records.len() as i32;
    let bytes = BatchBuilder {
        base_offset: Offset(base),
        partition_leader_epoch: LeaderEpoch(3),
        last_offset_delta: n - 1,
        record_count: n,
        base_timestamp: 100,
        max_timestamp: 100 + i64::from(n) - 1,
        producer_id: pid,
        producer_epoch: if pid.0 >= 0 {
            ProducerEpoch(1)
        } else {
            ProducerEpoch::NONE
        },
        base_sequence: if pid.0 >= 0 { 0 } else { -1 },
        ..BatchBuilder::default()
    }
    .transactional(transactional)
    .build(&body);
    RecordBatch::parse_verified(bytes, 0).expect("valid batch")
}

fn marker(offset: i64, pid: i64, commit: bool) -> RecordBatch {
    let mut bytes =
        BytesMut::from(&build_txn_marker(commit, ProducerId(pid), ProducerEpoch(1), 0, 100)[..]);
    bytes[..8].copy_from_slice(&offset.to_be_bytes());
    RecordBatch::parse_verified(bytes.freeze(), 0).expect("marker")
}

fn map_of(entries: &[(&str, i64)]) -> OffsetMap {
    let mut m = OffsetMap::new(1 << 20);
    for (k, o) in entries {
        assert!(m.put(k.as_bytes(), *o));
    }
    m
}

fn cx<'a>(
    map: &'a OffsetMap,
    active: &'a HashMap<ProducerId, Offset>,
    now: i64,
) -> CleanContext<'a> {
    CleanContext {
        map,
        map_end: 1000,
        now_ms: now,
        delete_retention_ms: RETENTION,
        last_batch_of_active: active,
    }
}

/// One record as the tests look at it: (offset, key, value, timestamp).
type Seen = (i64, Option<String>, Option<String>, i64);

/// The batch and each of its records.
fn contents(bytes: &Bytes) -> (RecordBatch, Vec<Seen>) {
    let b = RecordBatch::parse_verified(bytes.clone(), 0).expect("a valid rewritten batch");
    let s = |v: &Option<Bytes>| v.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
    let recs = batch_records(&b)
        .expect("records decode")
        .iter()
        .map(|r| {
            (
                b.base_offset().0 + i64::from(r.offset_delta),
                s(&r.key),
                s(&r.value),
                b.base_timestamp() + r.timestamp_delta,
            )
        })
        .collect();
    (b, recs)
}

fn judge_now(batch: &RecordBatch, map: &OffsetMap, now: i64) -> Verdict {
    let active = HashMap::new();
    judge(batch, &mut TxnTracker::default(), &cx(map, &active, now))
        .expect("judged")
        .0
}

#[test]
fn only_the_latest_record_per_key_survives_and_offsets_stay() {
    let b = batch_at(
        10,
        &[
            (Some("a"), Some("1")),
            (Some("b"), Some("1")),
            (Some("a"), Some("2")),
        ],
    );
    let map = map_of(&[("a", 12), ("b", 11)]);
    let Verdict::Rewrite(bytes) = judge_now(&b, &map, NOW) else {
        panic!("expected a rewrite");
    };
    let (nb, recs) = contents(&bytes);
    assert_eq!(
        recs,
        vec![
            (11, Some("b".into()), Some("1".into()), 101),
            (12, Some("a".into()), Some("2".into()), 102)
        ]
    );
    // Offsets, epoch and the producer fields of the header stay.
    assert_eq!(
        (nb.base_offset(), nb.last_offset()),
        (Offset(10), Offset(12))
    );
    assert_eq!(nb.partition_leader_epoch(), LeaderEpoch(3));
    assert_eq!(nb.record_count(), 2);
    assert_eq!(nb.max_timestamp(), 102);
    assert!(!nb.has_delete_horizon());
}

#[test]
fn a_batch_that_keeps_every_record_is_kept_byte_for_byte_and_one_that_keeps_none_goes() {
    let b = batch_at(0, &[(Some("a"), Some("1")), (Some("b"), Some("1"))]);
    assert_eq!(
        judge_now(&b, &map_of(&[("a", 0), ("b", 1)]), NOW),
        Verdict::Keep
    );
    assert_eq!(
        judge_now(&b, &map_of(&[("a", 5), ("b", 6)]), NOW),
        Verdict::Drop
    );
    // Past the offset map's end nothing is superseded.
    let active = HashMap::new();
    let map = map_of(&[("a", 5), ("b", 6)]);
    let mut c = cx(&map, &active, NOW);
    c.map_end = 0;
    let (v, _) = judge(&b, &mut TxnTracker::default(), &c).expect("judged");
    assert_eq!(v, Verdict::Keep);
}

#[test]
fn records_without_a_key_are_removed() {
    let b = batch_at(0, &[(None, Some("x")), (Some("a"), Some("1"))]);
    let Verdict::Rewrite(bytes) = judge_now(&b, &map_of(&[("a", 1)]), NOW) else {
        panic!("expected a rewrite");
    };
    assert_eq!(contents(&bytes).1.len(), 1);
}

#[test]
fn a_tombstone_gets_a_delete_horizon_first_and_goes_after_it() {
    let b = batch_at(0, &[(Some("a"), None)]);
    let map = map_of(&[("a", 0)]);
    // First clean: kept, with the horizon now + delete.retention.ms as base timestamp.
    let Verdict::Rewrite(bytes) = judge_now(&b, &map, NOW) else {
        panic!("expected the horizon to be set");
    };
    let (marked, recs) = contents(&bytes);
    assert!(marked.has_delete_horizon());
    assert_eq!(marked.base_timestamp(), NOW + RETENTION);
    assert_eq!(
        recs,
        vec![(0, Some("a".into()), None, 100)],
        "record timestamp kept"
    );
    // Before the horizon: kept as it is; at it: removed.
    assert_eq!(judge_now(&marked, &map, NOW + RETENTION - 1), Verdict::Keep);
    assert_eq!(judge_now(&marked, &map, NOW + RETENTION), Verdict::Drop);
}

#[test]
fn a_tombstone_past_the_offset_map_gets_no_delete_horizon() {
    let b = batch_at(10, &[(Some("a"), None)]);
    let map = map_of(&[("b", 3)]);
    let active = HashMap::new();
    let mut c = cx(&map, &active, NOW);
    // The map ends at the tombstone or inside its batch: kept as it is, no horizon.
    for map_end in [10, 5] {
        c.map_end = map_end;
        let (v, _) = judge(&b, &mut TxnTracker::default(), &c).expect("judged");
        assert_eq!(v, Verdict::Keep, "map ending at {map_end}");
    }
    // The map holds it: the horizon is set.
    c.map_end = 11;
    let (v, _) = judge(&b, &mut TxnTracker::default(), &c).expect("judged");
    let Verdict::Rewrite(bytes) = v else {
        panic!("expected the horizon to be set, got {v:?}");
    };
    assert!(contents(&bytes).0.has_delete_horizon());
}

#[test]
fn aborted_records_go_and_their_marker_goes_once_nothing_of_them_is_left() {
    let pid = ProducerId(7);
    let data = producer_batch(0, &[(Some("a"), Some("1"))], pid, true);
    let abort = marker(1, 7, false);
    let txn = AbortedTxn {
        producer_id: pid,
        first_offset: Offset(0),
        last_offset: Offset(1),
        last_stable_offset: Offset(0),
    };
    let map = map_of(&[("a", 0)]);
    let active = HashMap::new();
    let c = cx(&map, &active, NOW);
    // First clean: the data goes, the marker stays with its index entry.
    let mut t = TxnTracker::new(vec![txn]);
    assert_eq!(judge(&data, &mut t, &c).expect("data").0, Verdict::Drop);
    assert_eq!(
        judge(&abort, &mut t, &c).expect("marker"),
        (Verdict::Keep, Some(txn))
    );
    // Next clean: no data left: the marker gets its horizon, then goes after it.
    let mut t = TxnTracker::new(vec![txn]);
    let (v, entry) = judge(&abort, &mut t, &c).expect("marker");
    assert_eq!(entry, None);
    let Verdict::Rewrite(bytes) = v else {
        panic!("expected the horizon to be set: {v:?}");
    };
    let marked = RecordBatch::parse_verified(bytes, 0).expect("valid");
    assert!(marked.is_control() && marked.has_delete_horizon());
    assert_eq!(
        marked.control_record().expect("control").kind,
        ControlType::Abort
    );
    let later = cx(&map, &active, NOW + RETENTION);
    let mut t = TxnTracker::new(vec![txn]);
    assert_eq!(
        judge(&marked, &mut t, &later).expect("marker").0,
        Verdict::Drop
    );
}

#[test]
fn a_commit_marker_stays_while_records_of_its_transaction_do() {
    let pid = ProducerId(9);
    let data = producer_batch(0, &[(Some("a"), Some("1"))], pid, true);
    let commit = marker(1, 9, true);
    let map = map_of(&[("a", 0)]);
    let active = HashMap::new();
    let c = cx(&map, &active, NOW);
    let mut t = TxnTracker::default();
    assert_eq!(judge(&data, &mut t, &c).expect("data").0, Verdict::Keep);
    assert_eq!(judge(&commit, &mut t, &c).expect("marker").0, Verdict::Keep);
    // Its record superseded later: that clean removes the record but, having met it,
    // keeps the marker (Kafka's rule: the pass that removes the data keeps the marker).
    let newer = map_of(&[("a", 5)]);
    let c = cx(&newer, &active, NOW);
    let mut t = TxnTracker::default();
    assert_eq!(judge(&data, &mut t, &c).expect("data").0, Verdict::Drop);
    assert_eq!(judge(&commit, &mut t, &c).expect("marker").0, Verdict::Keep);
    // The next clean meets no record of it: the marker may go, after a horizon.
    let mut t = TxnTracker::default();
    assert!(matches!(
        judge(&commit, &mut t, &c).expect("marker").0,
        Verdict::Rewrite(_)
    ));
}

#[test]
fn the_last_batch_of_an_active_producer_stays_as_an_empty_header() {
    let pid = ProducerId(4);
    let b = producer_batch(
        20,
        &[(Some("a"), Some("1")), (Some("b"), Some("1"))],
        pid,
        false,
    );
    let map = map_of(&[("a", 30), ("b", 31)]);
    let active = HashMap::from([(pid, Offset(21))]);
    let (v, _) = judge(&b, &mut TxnTracker::default(), &cx(&map, &active, NOW)).expect("judged");
    let Verdict::Rewrite(bytes) = v else {
        panic!("expected an empty header: {v:?}");
    };
    let e = RecordBatch::parse_verified(bytes, 0).expect("valid");
    assert_eq!(e.record_count(), 0);
    assert_eq!((e.base_offset(), e.last_offset()), (Offset(20), Offset(21)));
    assert_eq!(
        (e.producer_id(), e.base_sequence(), e.last_sequence()),
        (pid, 0, 1)
    );
    // Not its last batch: removed.
    let active = HashMap::from([(pid, Offset(40))]);
    let (v, _) = judge(&b, &mut TxnTracker::default(), &cx(&map, &active, NOW)).expect("judged");
    assert_eq!(v, Verdict::Drop);
}

#[test]
fn mirror_pid_resets_are_never_removed() {
    let mut bytes = BytesMut::from(&build_mirror_pid_reset("src", 100)[..]);
    bytes[..8].copy_from_slice(&5i64.to_be_bytes());
    let reset = RecordBatch::parse_verified(bytes.freeze(), 0).expect("reset");
    assert_eq!(judge_now(&reset, &map_of(&[]), NOW), Verdict::Keep);
    assert_eq!(judge_now(&reset, &map_of(&[]), i64::MAX), Verdict::Keep);
}

#[test]
fn a_compressed_batch_is_rewritten_with_its_codec() {
    let plain = batch_at(
        0,
        &[
            (Some("a"), Some("1")),
            (Some("b"), Some("1")),
            (Some("a"), Some("2")),
        ],
    );
    let lz4 = crate::log::validate::recompress(&plain, crate::log::validate::TopicCompression::Lz4)
        .expect("recompress")
        .expect("lz4 batch");
    let lz4 = RecordBatch::parse_verified(lz4, 0).expect("valid");
    assert_eq!(lz4.compression(), Compression::Lz4);
    let Verdict::Rewrite(bytes) = judge_now(&lz4, &map_of(&[("a", 2), ("b", 1)]), NOW) else {
        panic!("expected a rewrite");
    };
    let (nb, recs) = contents(&bytes);
    assert_eq!(nb.compression(), Compression::Lz4);
    assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2]);
}

#[test]
fn the_offset_map_takes_keys_of_data_but_not_of_aborted_transactions() {
    let pid = ProducerId(7);
    let aborted = producer_batch(0, &[(Some("x"), Some("1"))], pid, true);
    let plain = batch_at(2, &[(Some("y"), Some("1")), (Some("y"), Some("2"))]);
    let txn = AbortedTxn {
        producer_id: pid,
        first_offset: Offset(0),
        last_offset: Offset(1),
        last_stable_offset: Offset(0),
    };
    let mut t = TxnTracker::new(vec![txn]);
    let mut map = OffsetMap::new(1 << 20);
    assert_eq!(index_batch(&aborted, &mut t, &mut map), Ok(true));
    assert_eq!(
        index_batch(&marker(1, 7, false), &mut t, &mut map),
        Ok(true)
    );
    assert_eq!(index_batch(&plain, &mut t, &mut map), Ok(true));
    assert_eq!((map.get(b"x"), map.get(b"y")), (None, Some(3)));
    // A full map says so.
    let mut small = OffsetMap::new(super::super::offset_map::ENTRY_OVERHEAD + 1);
    assert_eq!(
        index_batch(&plain, &mut TxnTracker::default(), &mut small),
        Ok(true)
    );
    let other = batch_at(4, &[(Some("z"), Some("1"))]);
    assert_eq!(
        index_batch(&other, &mut TxnTracker::default(), &mut small),
        Ok(false)
    );
}
