//! `twinlog dump-log` against a partition log written by the real `PartitionLog`, and
//! against corrupt copies of its files: every corruption is reported (`isvalid: false`
//! or an `error:` line, exit code 2), never a panic. `--mirror-state` against a
//! `__mirror_state` log written by the real `MirrorStateCoordinator` on a shard.

use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use dataplane::log::loader::format_topic_id;
use dataplane::log::{AppendKind, LogConfig, PartitionLog};
use dataplane::types::{LeaderEpoch, ProducerEpoch, ProducerId, TopicPartition};
use dataplane::wire::batch::BatchBuilder;
use dataplane::wire::control::{build_mirror_pid_reset, build_txn_marker};
use dataplane::wire::records::encode_simple_records;

const SOURCE_CLUSTER: &str = "source-cluster-1";

fn run_glommio<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .spawn(|| {
            dataplane::reactor::spawn_tick();
            f()
        })
        .expect("executor starts");
    ex.join().expect("executor finishes");
}

fn data_batch(pid: i64, epoch: i16, seq: i32, records: i32, transactional: bool) -> Bytes {
    BatchBuilder {
        last_offset_delta: records - 1,
        record_count: records,
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(epoch),
        base_sequence: seq,
        base_timestamp: 1_000,
        max_timestamp: 1_000 + i64::from(records) - 1,
        ..BatchBuilder::default()
    }
    .transactional(transactional)
    .build(&encode_simple_records(records, 0, 10))
}

/// Writes this log and closes it cleanly; returns the partition directory.
///
/// | offsets | batch                                          | leader epoch |
/// |---------|------------------------------------------------|--------------|
/// | 0..2    | plain, 3 records                               | 3            |
/// | 3..4    | producer 7 epoch 1, transactional, seq 0..1    | 3            |
/// | 5       | ABORT for producer 7, coordinator epoch 3      | 3            |
/// | 6       | producer 8 epoch 0, idempotent, seq 0          | 3            |
/// | 7       | producer 9 epoch 0, transactional, seq 0       | 3            |
/// | 8       | COMMIT for producer 9, coordinator epoch 4     | 3            |
/// | 9       | MIRROR_PID_RESET from SOURCE_CLUSTER           | 4            |
/// | 10..11  | producer 10 epoch 2, idempotent, seq 5..6      | 4            |
fn write_log(data_dir: &Path, topic_id: uuid::Uuid) -> PathBuf {
    let data_dir = data_dir.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    run_glommio(move || async move {
        let config = LogConfig {
            index_interval_bytes: 1,
            ..LogConfig::default()
        };
        let mut log = PartitionLog::open(
            &data_dir,
            TopicPartition::new("dump", 0),
            Some(topic_id),
            config,
            0,
        )
        .await
        .expect("log opens");
        let appends: Vec<(Bytes, i32, AppendKind)> = vec![
            (data_batch(-1, -1, -1, 3, false), 3, AppendKind::Client),
            (data_batch(7, 1, 0, 2, true), 3, AppendKind::Client),
            (
                build_txn_marker(false, ProducerId(7), ProducerEpoch(1), 3, 1_100),
                3,
                AppendKind::Coordinator,
            ),
            (data_batch(8, 0, 0, 1, false), 3, AppendKind::Client),
            (data_batch(9, 0, 0, 1, true), 3, AppendKind::Client),
            (
                build_txn_marker(true, ProducerId(9), ProducerEpoch(0), 4, 1_200),
                3,
                AppendKind::Coordinator,
            ),
            (
                build_mirror_pid_reset(SOURCE_CLUSTER, 1_300),
                4,
                AppendKind::Coordinator,
            ),
            (data_batch(10, 2, 5, 2, false), 4, AppendKind::Client),
        ];
        for (records, epoch, kind) in appends {
            log.append_as_leader(records, LeaderEpoch(epoch), kind, 0)
                .await
                .expect("append");
        }
        assert_eq!(log.log_end_offset().0, 12);
        assert_eq!(
            log.producer_state().len(),
            1,
            "only producer 10 after reset"
        );
        tx.send(log.dir().to_path_buf()).expect("send dir");
        log.close(0).await.expect("close");
    });
    rx.recv().expect("partition dir")
}

struct Dump {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn dump_log(files: &[&Path], records: bool) -> Dump {
    dump_log_with(files, if records { &["--records"] } else { &[] })
}

fn dump_log_with(files: &[&Path], flags: &[&str]) -> Dump {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_twinlog"));
    cmd.arg("dump-log")
        .args(files)
        .args(flags)
        .env("RUST_LOG", "warn");
    let out = cmd.output().expect("twinlog runs");
    let dump = Dump {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !dump.stderr.contains("panicked"),
        "dump-log panicked on {files:?}:\n{}",
        dump.stderr
    );
    assert!(
        dump.code.is_some(),
        "dump-log was killed by a signal on {files:?}:\n{}",
        dump.stderr
    );
    dump
}

fn seg(dir: &Path, suffix: &str) -> PathBuf {
    dir.join(format!("{:020}{suffix}", 0))
}

/// The value of `key: value` in a dump line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let pat = format!("{key}: ");
    let at = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in {line:?}"));
    let rest = &line[at + pat.len()..];
    rest.split(' ').next().unwrap_or_default()
}

fn num(line: &str, key: &str) -> i64 {
    field(line, key)
        .parse()
        .unwrap_or_else(|e| panic!("{key} in {line:?}: {e}"))
}

fn batch_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("baseOffset: "))
        .collect()
}

#[test]
fn dump_log_prints_every_file_of_a_clean_log() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let topic_id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
    let dir = write_log(tmp.path(), topic_id);

    // The segment, with records.
    let log = seg(&dir, ".log");
    let d = dump_log(&[&log], true);
    assert_eq!(d.code, Some(0), "{}\n{}", d.stdout, d.stderr);
    let mut lines = d.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("Dumping {}", log.display()).as_str())
    );
    assert_eq!(lines.next(), Some("Log starting offset: 0"));
    let batches = batch_lines(&d.stdout);
    let expected: [(i64, i64, i64, i64, bool, bool, i64); 8] = [
        // base, last, producerId, partitionLeaderEpoch, transactional, control, count
        (0, 2, -1, 3, false, false, 3),
        (3, 4, 7, 3, true, false, 2),
        (5, 5, 7, 3, true, true, 1),
        (6, 6, 8, 3, false, false, 1),
        (7, 7, 9, 3, true, false, 1),
        (8, 8, 9, 3, true, true, 1),
        (9, 9, -1, 4, false, true, 1),
        (10, 11, 10, 4, false, false, 2),
    ];
    assert_eq!(batches.len(), expected.len(), "{}", d.stdout);
    let mut position = 0;
    for (line, (base, last, pid, epoch, txn, control, count)) in batches.iter().zip(expected) {
        assert_eq!(num(line, "baseOffset"), base, "{line}");
        assert_eq!(num(line, "lastOffset"), last, "{line}");
        assert_eq!(num(line, "producerId"), pid, "{line}");
        assert_eq!(num(line, "partitionLeaderEpoch"), epoch, "{line}");
        assert_eq!(field(line, "isTransactional"), txn.to_string(), "{line}");
        assert_eq!(field(line, "isControl"), control.to_string(), "{line}");
        assert_eq!(num(line, "count"), count, "{line}");
        assert_eq!(field(line, "isvalid"), "true", "{line}");
        assert_eq!(field(line, "magic"), "2", "{line}");
        assert_eq!(field(line, "compresscodec"), "none", "{line}");
        assert_eq!(num(line, "position"), position, "{line}");
        position += num(line, "size");
    }
    assert_eq!(
        position,
        i64::try_from(std::fs::metadata(&log).expect("stat").len()).expect("size")
    );
    // Sequences of idempotent batches.
    assert_eq!(num(batches[1], "baseSequence"), 0);
    assert_eq!(num(batches[1], "lastSequence"), 1);
    assert_eq!(num(batches[7], "baseSequence"), 5);
    assert_eq!(num(batches[7], "lastSequence"), 6);
    assert_eq!(num(batches[7], "producerEpoch"), 2);
    assert_eq!(num(batches[0], "baseSequence"), -1);

    // Record lines: one per data record, offsets 0..=11 minus the three control batches.
    let record_lines: Vec<&str> = d
        .stdout
        .lines()
        .filter(|l| {
            l.starts_with("| offset: ")
                && l.contains("valueSize")
                && !l.contains("endTxnMarker")
                && !l.contains("MIRROR_PID_RESET")
        })
        .collect();
    let offsets: Vec<i64> = record_lines.iter().map(|l| num(l, "offset")).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 4, 6, 7, 10, 11]);
    for l in &record_lines {
        assert_eq!(num(l, "valueSize"), 10, "{l}");
        assert_eq!(num(l, "keySize"), -1, "{l}");
    }
    assert_eq!(num(record_lines[3], "sequence"), 0);
    assert_eq!(num(record_lines[4], "sequence"), 1);
    assert_eq!(num(record_lines[8], "sequence"), 6);
    assert_eq!(num(record_lines[0], "sequence"), -1);
    assert_eq!(num(record_lines[1], "CreateTime"), 1_001);
    // Control records by name.
    assert!(
        d.stdout
            .lines()
            .any(|l| l.starts_with("| offset: 5 CreateTime: ")
                && l.ends_with(
                    " sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 3"
                )),
        "{}",
        d.stdout
    );
    assert!(
        d.stdout
            .lines()
            .any(|l| l.starts_with("| offset: 8 CreateTime: ")
                && l.ends_with(" endTxnMarker: COMMIT coordinatorEpoch: 4")),
        "{}",
        d.stdout
    );
    assert!(
        d.stdout
            .lines()
            .any(|l| l.starts_with("| offset: 9 CreateTime: ")
                && l.ends_with(&format!(
                    " MIRROR_PID_RESET sourceClusterId: {SOURCE_CLUSTER}"
                ))),
        "{}",
        d.stdout
    );
    assert!(!d.stdout.contains("error"), "{}", d.stdout);

    // Without --records only batch and control lines.
    let plain = dump_log(&[&log], false);
    assert_eq!(plain.code, Some(0));
    assert_eq!(batch_lines(&plain.stdout), batches);
    assert!(!plain.stdout.lines().any(|l| l.contains("valueSize")
        && !l.contains("endTxnMarker")
        && !l.contains("MIRROR_PID_RESET")));
    assert!(plain.stdout.contains("MIRROR_PID_RESET sourceClusterId: "));
    assert!(plain.stdout.contains("endTxnMarker: ABORT"));

    // Offset index: each entry is the last offset of the append at that position.
    let by_position: std::collections::HashMap<i64, i64> = batches
        .iter()
        .map(|l| (num(l, "position"), num(l, "lastOffset")))
        .collect();
    let d = dump_log(&[&seg(&dir, ".index")], false);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    let index: Vec<(i64, i64)> = d
        .stdout
        .lines()
        .filter(|l| l.starts_with("offset: "))
        .map(|l| (num(l, "offset"), num(l, "position")))
        .collect();
    assert!(!index.is_empty(), "{}", d.stdout);
    for (offset, position) in &index {
        assert_eq!(by_position.get(position), Some(offset), "{}", d.stdout);
    }

    // Time index: timestamps and offsets never decrease, offsets are in the log.
    let d = dump_log(&[&seg(&dir, ".timeindex")], false);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    let times: Vec<(i64, i64)> = d
        .stdout
        .lines()
        .filter(|l| l.starts_with("timestamp: "))
        .map(|l| (num(l, "timestamp"), num(l, "offset")))
        .collect();
    assert!(!times.is_empty(), "{}", d.stdout);
    assert!(times
        .windows(2)
        .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    assert!(times
        .iter()
        .all(|(ts, o)| *ts >= 1_000 && (0..12).contains(o)));

    // Transaction index: the aborted transaction of producer 7.
    let d = dump_log(&[&seg(&dir, ".txnindex")], false);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    assert!(
        d.stdout
            .lines()
            .any(|l| l
                == "version: 0 producerId: 7 firstOffset: 3 lastOffset: 5 lastStableOffset: 6"),
        "{}",
        d.stdout
    );
    assert_eq!(
        d.stdout
            .lines()
            .filter(|l| l.starts_with("version"))
            .count(),
        1
    );

    // Producer snapshot at the log end: only producer 10 survived the reset.
    let snapshot = dir.join(format!("{:020}.snapshot", 12));
    let d = dump_log(&[&snapshot], false);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    let entries: Vec<&str> = d
        .stdout
        .lines()
        .filter(|l| l.starts_with("producerId: "))
        .collect();
    assert_eq!(
        entries,
        vec![
            "producerId: 10 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: None \
             lastTimestamp: 1001 [firstSequence: 5 lastSequence: 6 lastOffset: 11 offsetDelta: 1 \
             timestamp: 1001]"
        ],
        "{}",
        d.stdout
    );

    // Leader epoch checkpoint and partition metadata.
    let d = dump_log(&[&dir.join("leader-epoch-checkpoint")], false);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    let epochs: Vec<&str> = d
        .stdout
        .lines()
        .filter(|l| l.starts_with("epoch: "))
        .collect();
    assert_eq!(
        epochs,
        vec!["epoch: 3 startOffset: 0", "epoch: 4 startOffset: 9"]
    );
    let d = dump_log(&[&dir.join("partition.metadata")], false);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    assert!(
        d.stdout
            .lines()
            .any(|l| l == format!("topic_id: {} ({topic_id})", format_topic_id(topic_id))),
        "{}",
        d.stdout
    );

    // All files at once: one "Dumping" header each, success overall.
    let all = [
        seg(&dir, ".log"),
        seg(&dir, ".index"),
        seg(&dir, ".timeindex"),
        seg(&dir, ".txnindex"),
        snapshot,
        dir.join("leader-epoch-checkpoint"),
        dir.join("partition.metadata"),
    ];
    let refs: Vec<&Path> = all.iter().map(PathBuf::as_path).collect();
    let d = dump_log(&refs, true);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    assert_eq!(
        d.stdout
            .lines()
            .filter(|l| l.starts_with("Dumping "))
            .count(),
        all.len()
    );
}

/// A clean log's segment bytes and the (position, size) of each batch.
fn segment_and_batches(tmp: &Path) -> (Vec<u8>, Vec<(usize, usize)>) {
    let dir = write_log(tmp, uuid::Uuid::from_u128(7));
    let log = seg(&dir, ".log");
    let d = dump_log(&[&log], false);
    assert_eq!(d.code, Some(0));
    let batches = batch_lines(&d.stdout)
        .iter()
        .map(|l| {
            (
                usize::try_from(num(l, "position")).expect("position"),
                usize::try_from(num(l, "size")).expect("size"),
            )
        })
        .collect();
    (std::fs::read(&log).expect("read segment"), batches)
}

/// Writes `bytes` as `<copy dir>/<name>` and dumps it.
fn dump_copy(root: &Path, case: &str, name: &str, bytes: &[u8], records: bool) -> Dump {
    let dir = root.join(case);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write copy");
    dump_log(&[&path], records)
}

fn assert_reported(d: &Dump, what: &str) {
    assert_eq!(
        d.code,
        Some(2),
        "{what}: exit code\n{}\n{}",
        d.stdout,
        d.stderr
    );
    assert!(
        d.stdout.contains("isvalid: false") || d.stdout.lines().any(|l| l.starts_with("error:")),
        "{what}: no isvalid: false nor error: line\n{}",
        d.stdout
    );
}

/// Deterministic pseudo-random bytes (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).expect("fits")
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next().to_le_bytes()[0]).collect()
    }
}

const SEGMENT: &str = "00000000000000000000.log";

#[test]
fn flipped_record_byte_is_reported_invalid() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (bytes, batches) = segment_and_batches(tmp.path());
    // Flip the last byte (a record value byte) of the second batch.
    let (pos, size) = batches[1];
    let mut bad = bytes.clone();
    bad[pos + size - 1] ^= 0x5a;
    let d = dump_copy(tmp.path(), "flip", SEGMENT, &bad, true);
    assert_reported(&d, "flipped record byte");
    let lines = batch_lines(&d.stdout);
    assert_eq!(
        lines.len(),
        2,
        "stops after the corrupt batch:\n{}",
        d.stdout
    );
    assert_eq!(field(lines[0], "isvalid"), "true");
    assert_eq!(field(lines[1], "isvalid"), "false");
    assert_eq!(num(lines[1], "baseOffset"), 3);

    // A flipped byte in the control record of the MIRROR_PID_RESET batch.
    let (pos, size) = batches[6];
    let mut bad = bytes.clone();
    bad[pos + size - 2] ^= 0xff;
    let d = dump_copy(tmp.path(), "flip-reset", SEGMENT, &bad, true);
    assert_reported(&d, "flipped control record byte");
    let lines = batch_lines(&d.stdout);
    assert_eq!(lines.len(), 7, "{}", d.stdout);
    assert_eq!(field(lines[6], "isvalid"), "false");
}

#[test]
fn truncated_segment_is_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (bytes, batches) = segment_and_batches(tmp.path());
    let (pos, size) = batches[3];
    // Cut inside the header, inside the records, and one byte short of the end.
    for (i, cut) in [pos + 5, pos + 20, pos + size - 1, bytes.len() - 1]
        .into_iter()
        .enumerate()
    {
        let d = dump_copy(
            tmp.path(),
            &format!("cut-{i}"),
            SEGMENT,
            &bytes[..cut],
            true,
        );
        assert_reported(&d, &format!("truncated at {cut}"));
        let error = d
            .stdout
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_else(|| panic!("no error line:\n{}", d.stdout));
        let expected_at = if cut < pos + size { pos } else { batches[7].0 };
        assert!(
            error.ends_with(&format!("stopping at position {expected_at}")),
            "{error}"
        );
        assert!(batch_lines(&d.stdout)
            .iter()
            .all(|l| field(l, "isvalid") == "true"));
    }
    // An empty segment is fine.
    let d = dump_copy(tmp.path(), "empty", SEGMENT, &[], true);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    // The zero padding of an O_DIRECT append (`log.direct.io`) is named, not an error.
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().next_multiple_of(4096) + 4096, 0);
    let d = dump_copy(tmp.path(), "padded", SEGMENT, &padded, true);
    assert_eq!(d.code, Some(0), "{}", d.stdout);
    assert_eq!(batch_lines(&d.stdout).len(), batches.len(), "{}", d.stdout);
    let expected = format!(
        "padding: {} zero bytes at position {}",
        padded.len() - bytes.len(),
        bytes.len()
    );
    assert!(d.stdout.contains(&expected), "{}", d.stdout);
}

#[test]
fn hostile_header_fields_are_reported_without_panicking() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (bytes, batches) = segment_and_batches(tmp.path());
    let (pos, _) = batches[0];
    let put =
        |b: &mut Vec<u8>, at: usize, v: &[u8]| b[pos + at..pos + at + v.len()].copy_from_slice(v);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("length-negative", {
            let mut b = bytes.clone();
            put(&mut b, 8, &(-1i32).to_be_bytes());
            b
        }),
        ("length-huge", {
            let mut b = bytes.clone();
            put(&mut b, 8, &i32::MAX.to_be_bytes());
            b
        }),
        ("length-zero", {
            let mut b = bytes.clone();
            put(&mut b, 8, &0i32.to_be_bytes());
            b
        }),
        ("magic", {
            let mut b = bytes.clone();
            put(&mut b, 16, &[1]);
            b
        }),
        ("record-count-max", {
            // Offset delta and count both i32::MAX: structurally consistent, but the
            // records are not there.
            let mut b = bytes.clone();
            put(&mut b, 23, &i32::MAX.to_be_bytes());
            put(&mut b, 57, &i32::MAX.to_be_bytes());
            b
        }),
        ("record-count-negative", {
            let mut b = bytes.clone();
            put(&mut b, 57, &(-5i32).to_be_bytes());
            b
        }),
        ("compressed-attribute", {
            let mut b = bytes.clone();
            put(&mut b, 21, &3i16.to_be_bytes());
            b
        }),
        ("control-attribute-on-data", {
            let mut b = bytes.clone();
            put(&mut b, 21, &0x20i16.to_be_bytes());
            b
        }),
        ("record-length-varint", {
            let mut b = bytes.clone();
            // First record length varint: 0xff.. runs into an overlong varint.
            for i in 0..10 {
                b[pos + 61 + i] = 0xff;
            }
            b
        }),
    ];
    for (case, bad) in cases {
        let d = dump_copy(tmp.path(), case, SEGMENT, &bad, true);
        assert_reported(&d, case);
    }
}

#[test]
fn random_corruption_of_a_segment_never_panics() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (bytes, batches) = segment_and_batches(tmp.path());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..60 {
        let mut bad = bytes.clone();
        let at = rng.below(bad.len());
        let mask = u8::try_from(rng.below(255) + 1).expect("byte");
        bad[at] ^= mask;
        let d = dump_copy(tmp.path(), &format!("rand-{i}"), SEGMENT, &bad, true);
        assert!(matches!(d.code, Some(0 | 2)), "{}\n{}", d.stdout, d.stderr);
        // Everything from the attributes on is covered by the CRC (CRC32C detects every
        // single-byte error), and so is the CRC itself.
        let (pos, _) = batches
            .iter()
            .copied()
            .rev()
            .find(|(p, _)| *p <= at)
            .expect("a batch holds every byte");
        if at - pos >= 17 {
            assert_reported(&d, &format!("byte {at} (batch at {pos}) ^ {mask:#x}"));
        }
    }
    // Whole files of garbage, of many sizes.
    for (i, len) in [1, 11, 12, 61, 62, 100, 4096].into_iter().enumerate() {
        let garbage = rng.bytes(len);
        let d = dump_copy(tmp.path(), &format!("garbage-{i}"), SEGMENT, &garbage, true);
        assert_reported(&d, &format!("{len} bytes of garbage"));
    }
}

#[test]
fn corrupt_companion_files_are_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = write_log(tmp.path(), uuid::Uuid::from_u128(42));
    let snapshot_name = format!("{:020}.snapshot", 12);
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let names = [
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "00000000000000000000.txnindex",
        snapshot_name.as_str(),
        "leader-epoch-checkpoint",
        "partition.metadata",
    ];
    for name in names {
        let good = std::fs::read(dir.join(name)).expect("read companion");
        // Random garbage of an odd size.
        let d = dump_copy(
            tmp.path(),
            &format!("garbage-{name}"),
            name,
            &rng.bytes(1001),
            false,
        );
        assert_reported(&d, &format!("garbage {name}"));
        // Binary files truncated by one byte; text files cut in half (a missing final
        // newline is harmless there).
        let text = name == "leader-epoch-checkpoint" || name == "partition.metadata";
        let keep = if text {
            good.len() / 2
        } else {
            good.len().saturating_sub(1)
        };
        if !good.is_empty() {
            let d = dump_copy(
                tmp.path(),
                &format!("short-{name}"),
                name,
                &good[..keep],
                false,
            );
            assert_reported(&d, &format!("truncated {name}"));
        }
    }
    // Specific corruptions with the right sizes.
    let index = std::fs::read(dir.join(names[0])).expect("index");
    assert!(index.len() >= 16, "at least two index entries");
    let mut bad = index.clone();
    bad.swap(3, 11); // relative offsets out of order
    let d = dump_copy(tmp.path(), "index-order", names[0], &bad, false);
    assert_reported(&d, "index entries out of order");
    let mut bad = index;
    bad[4] = 0x80; // negative position
    let d = dump_copy(tmp.path(), "index-negative", names[0], &bad, false);
    assert_reported(&d, "negative index position");

    let snapshot = std::fs::read(dir.join(&snapshot_name)).expect("snapshot");
    let mut bad = snapshot.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let d = dump_copy(tmp.path(), "snapshot-crc", &snapshot_name, &bad, false);
    assert_reported(&d, "snapshot payload flipped");

    let d = dump_copy(
        tmp.path(),
        "epochs",
        "leader-epoch-checkpoint",
        b"0\n2\n3 0\n",
        false,
    );
    assert_reported(&d, "epoch checkpoint count mismatch");
    let d = dump_copy(
        tmp.path(),
        "metadata",
        "partition.metadata",
        b"version: 0\ntopic_id: not-base64!\n",
        false,
    );
    assert_reported(&d, "bad topic id");

    // Unknown and missing files.
    let d = dump_copy(tmp.path(), "unknown", "notes.txt", b"hello", false);
    assert_reported(&d, "unknown file");
    let missing = tmp.path().join("missing").join(SEGMENT);
    let d = dump_log(&[&missing], false);
    assert_reported(&d, "missing file");

    // One bad file among good ones still fails the whole run, but dumps the rest.
    let bad_dir = tmp.path().join("garbage-partition.metadata");
    let d = dump_log(
        &[&seg(&dir, ".log"), &bad_dir.join("partition.metadata")],
        false,
    );
    assert_reported(&d, "mixed");
    assert_eq!(batch_lines(&d.stdout).len(), 8);
}

/// Writes a one-partition `__mirror_state` log the way the `MirrorStateCoordinator`
/// does (uncompressed batches of coordinator records, appended as the coordinator) and
/// returns the partition directory.
///
/// | offsets | records                                                               |
/// |---------|-----------------------------------------------------------------------|
/// | 0       | state m/orders-3: PREPARING                                           |
/// | 1..2    | state m/orders-3: MIRRORING (truncated 5, error "slow source"), LME 4 |
/// | 3       | state gone/orders-0: PREPARING                                        |
/// | 4       | tombstone of gone/orders-0 (state)                                    |
fn write_mirror_state_log(data_dir: &Path, orders_id: uuid::Uuid) -> PathBuf {
    use controlplane::mirror::{
        encode_value, MirrorRecordKind, MirrorStateKey, MirrorStateValue, StateValue,
        MIRROR_STATE_TOPIC,
    };
    use dataplane::wire::mirror::MirrorPartitionState as S;
    use dataplane::wire::records::encode_record;

    let key = |kind, mirror: &str, partition| {
        MirrorStateKey::new(kind, mirror, orders_id, partition)
            .encode()
            .expect("key encodes")
    };
    let state = |state, previous_state, state_epoch| StateValue {
        state,
        previous_state,
        retry_attempt: 0,
        error_message: None,
        leader_epoch: 2,
        state_epoch,
        truncated_records: -1,
    };
    let value = |v: MirrorStateValue| Some(encode_value(&v));
    let batches: Vec<Vec<controlplane::mirror::KeyedRecord>> = vec![
        vec![(
            key(MirrorRecordKind::State, "m", 3),
            value(MirrorStateValue::State(state(S::Preparing, S::Unknown, 1))),
        )],
        vec![
            (
                key(MirrorRecordKind::State, "m", 3),
                value(MirrorStateValue::State(StateValue {
                    truncated_records: 5,
                    error_message: Some("slow source".to_string()),
                    ..state(S::Mirroring, S::Preparing, 2)
                })),
            ),
            (
                key(MirrorRecordKind::Lme, "m", 3),
                value(MirrorStateValue::Lme {
                    last_mirrored_epoch: 4,
                    last_mirrored_offset: 120,
                }),
            ),
        ],
        vec![(
            key(MirrorRecordKind::State, "gone", 0),
            value(MirrorStateValue::State(state(S::Preparing, S::Unknown, 1))),
        )],
        vec![(key(MirrorRecordKind::State, "gone", 0), None)],
    ];
    let data_dir = data_dir.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    run_glommio(move || async move {
        let mut log = PartitionLog::open(
            &data_dir,
            TopicPartition::new(MIRROR_STATE_TOPIC, 0),
            Some(uuid::Uuid::from_u128(0x5151)),
            LogConfig::default(),
            0,
        )
        .await
        .expect("log opens");
        for records in batches {
            let mut body = Vec::new();
            for (i, (k, v)) in records.iter().enumerate() {
                encode_record(&mut body, i as i32, 0, Some(k), v.as_deref());
            }
            let n = records.len() as i32;
            let batch = BatchBuilder {
                last_offset_delta: n - 1,
                record_count: n,
                base_timestamp: 2_000,
                max_timestamp: 2_000,
                ..BatchBuilder::default()
            }
            .build(&body);
            log.append_as_leader(batch, LeaderEpoch(0), AppendKind::Coordinator, 0)
                .await
                .expect("append");
        }
        assert_eq!(log.log_end_offset().0, 5);
        tx.send(log.dir().to_path_buf()).expect("send dir");
        log.close(0).await.expect("close");
    });
    rx.recv().expect("partition dir")
}

#[test]
fn dump_log_decodes_mirror_state_records() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let orders_id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
    let topic = format_topic_id(orders_id);
    let dir = write_mirror_state_log(tmp.path(), orders_id);
    let log = seg(&dir, ".log");

    let d = dump_log_with(&[&log], &["--mirror-state"]);
    assert_eq!(d.code, Some(0), "{}\n{}", d.stdout, d.stderr);
    assert_eq!(batch_lines(&d.stdout).len(), 4, "{}", d.stdout);
    let records: Vec<(i64, &str)> = d
        .stdout
        .lines()
        .filter(|l| l.starts_with("| offset: "))
        .map(|l| {
            let decoded = &l[l.find("key: ").unwrap_or_else(|| panic!("no key in {l}"))..];
            (num(l, "offset"), decoded)
        })
        .collect();
    let expected = [
        format!(
            "key: state mirror=m topic={topic} partition=3 value: state=PREPARING prev=UNKNOWN \
             retry=0 leader_epoch=2 state_epoch=1 truncated_records=-1 error=null"
        ),
        format!(
            "key: state mirror=m topic={topic} partition=3 value: state=MIRRORING prev=PREPARING \
             retry=0 leader_epoch=2 state_epoch=2 truncated_records=5 error=\"slow source\""
        ),
        format!("key: lme mirror=m topic={topic} partition=3 value: last_mirrored_epoch=4 last_mirrored_offset=120"),
        format!(
            "key: state mirror=gone topic={topic} partition=0 value: state=PREPARING \
             prev=UNKNOWN retry=0 leader_epoch=2 state_epoch=1 truncated_records=-1 error=null"
        ),
        format!("key: state mirror=gone topic={topic} partition=0 tombstone"),
    ];
    let got: Vec<(i64, String)> = records.iter().map(|(o, l)| (*o, l.to_string())).collect();
    let want: Vec<(i64, String)> = (0..).zip(expected).collect();
    assert_eq!(got, want, "{}", d.stdout);
    // Kafka's flag name works too.
    let k = dump_log_with(&[&log], &["--mirror-state-decoder"]);
    assert_eq!(k.stdout, d.stdout);

    // Without the flag the records print as bytes, as before.
    let raw = dump_log(&[&log], true);
    assert_eq!(raw.code, Some(0));
    assert_eq!(batch_lines(&raw.stdout), batch_lines(&d.stdout));
    assert_eq!(
        raw.stdout
            .lines()
            .filter(|l| l.starts_with("| offset: ") && l.contains("keySize: "))
            .count(),
        5
    );
    assert!(!raw.stdout.contains("mirror="));

    // Records that are not __mirror_state records are reported, not fatal.
    let other = write_log(&tmp.path().join("other"), uuid::Uuid::from_u128(3));
    let d = dump_log_with(&[&seg(&other, ".log")], &["--mirror-state"]);
    assert_eq!(d.code, Some(0), "{}\n{}", d.stdout, d.stderr);
    assert!(
        d.stdout.contains("error: record without a key"),
        "{}",
        d.stdout
    );
    assert!(d.stdout.contains("MIRROR_PID_RESET"), "{}", d.stdout);
    // Random corruption never panics.
    let bytes = std::fs::read(&log).expect("segment");
    let mut rng = Rng(0xfeed_beef);
    for i in 0..30 {
        let mut bad = bytes.clone();
        let at = 61 + rng.below(bad.len() - 61);
        bad[at] ^= u8::try_from(rng.below(255) + 1).expect("byte");
        let d = dump_copy_with(tmp.path(), &format!("ms-{i}"), &bad, &["--mirror-state"]);
        assert!(matches!(d.code, Some(0 | 2)), "{}\n{}", d.stdout, d.stderr);
    }
}

fn dump_copy_with(root: &Path, case: &str, bytes: &[u8], flags: &[&str]) -> Dump {
    let dir = root.join(case);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join(SEGMENT);
    std::fs::write(&path, bytes).expect("write copy");
    dump_log_with(&[&path], flags)
}
