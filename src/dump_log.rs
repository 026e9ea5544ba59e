//! `twinlog dump-log`: prints segment files and their companions the way
//! kafka-dump-log.sh `--print-data-log` does. A debugging tool run outside the shards,
//! so plain blocking std I/O is fine here. Corrupt input is reported, never a crash.
//!
//! `--mirror-state` (Kafka's `--mirror-state-decoder`) decodes the records of
//! `__mirror_state` segments into words instead of printing their bytes.

use std::io::{self, Write};
use std::path::PathBuf;

use bytes::Bytes;
use controlplane::mirror::records::{decode_record, MirrorStateValue};
use dataplane::log::epoch_cache::LeaderEpochCache;
use dataplane::log::index::{OffsetIndex, TimeIndex};
use dataplane::log::loader::{format_topic_id, parse_partition_metadata};
use dataplane::log::producer_state::decode_snapshot_entries;
use dataplane::log::segment::is_direct_io_padding;
use dataplane::log::txn_index::TransactionIndex;
use dataplane::types::Offset;
use dataplane::wire::batch::{BatchIter, RecordBatch};
use dataplane::wire::control::ControlType;
use dataplane::wire::records::{batch_records, decode_records, Record};

/// What to print of the records of a segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpOptions {
    /// Every record, key and value as text (Kafka's `--print-data-log`).
    pub records: bool,
    /// Every record decoded as a `__mirror_state` key and value (implies `records`).
    pub mirror_state: bool,
}

/// Dumps each file; returns `Ok(false)` when any of them was corrupt.
pub fn dump_files(
    files: &[PathBuf],
    options: DumpOptions,
    out: &mut impl Write,
) -> io::Result<bool> {
    let mut all_ok = true;
    for path in files {
        writeln!(out, "Dumping {}", path.display())?;
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) => {
                writeln!(out, "error: cannot read {}: {e}", path.display())?;
                all_ok = false;
                continue;
            }
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let base = name
            .split('.')
            .next()
            .and_then(|b| b.parse::<i64>().ok())
            .map(Offset);
        let ok = match (name.rsplit_once('.').map(|(_, ext)| ext), base) {
            (Some("log"), Some(base)) => dump_segment(base, Bytes::from(data), options, out)?,
            (Some("index"), Some(base)) => dump_offset_index(base, &data, out)?,
            (Some("timeindex"), Some(base)) => dump_time_index(base, &data, out)?,
            (Some("txnindex"), Some(base)) => dump_txn_index(base, &data, out)?,
            (Some("snapshot"), Some(_)) => dump_snapshot(&data, out)?,
            _ if name == "leader-epoch-checkpoint" => dump_epochs(&data, out)?,
            _ if name == "partition.metadata" => dump_metadata(&data, out)?,
            _ => {
                writeln!(
                    out,
                    "error: {} is not a file dump-log knows (by name)",
                    path.display()
                )?;
                false
            }
        };
        all_ok &= ok;
    }
    Ok(all_ok)
}

fn dump_segment(
    base: Offset,
    data: Bytes,
    options: DumpOptions,
    out: &mut impl Write,
) -> io::Result<bool> {
    writeln!(out, "Log starting offset: {base}")?;
    let mut iter = BatchIter::new(data.clone(), 0, false);
    let mut position = 0usize;
    while let Some(next) = iter.next() {
        let batch = match next {
            Ok(b) => b,
            Err(_) if is_direct_io_padding(&data[position..], data.len() as u64) => {
                writeln!(
                    out,
                    "padding: {} zero bytes at position {position} (a `log.direct.io` append's; \
                     cut at the next fsync or by recovery)",
                    data.len() - position
                )?;
                return Ok(true);
            }
            Err(e) => {
                writeln!(out, "error: {e}; stopping at position {position}")?;
                return Ok(false);
            }
        };
        let crc_ok = batch.compute_crc() == batch.crc();
        writeln!(
            out,
            "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} \
             producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} \
             deleteHorizonMs: {} position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} \
             isvalid: {}",
            batch.base_offset(),
            batch.last_offset(),
            batch.record_count(),
            batch.base_sequence(),
            batch.last_sequence(),
            batch.producer_id(),
            batch.producer_epoch(),
            batch.partition_leader_epoch(),
            batch.is_transactional(),
            batch.is_control(),
            // Kafka's DumpLogSegments prints Java's OptionalLong here.
            if batch.has_delete_horizon() {
                format!("OptionalLong[{}]", batch.base_timestamp())
            } else {
                "OptionalLong.empty".to_string()
            },
            position,
            if batch.is_log_append_time() { "LogAppendTime" } else { "CreateTime" },
            batch.max_timestamp(),
            batch.size_in_bytes(),
            batch.magic(),
            batch.compression().name(),
            batch.crc(),
            crc_ok,
        )?;
        if batch.is_control() {
            print_control(&batch, out)?;
        } else if options.mirror_state {
            print_records(&batch, out, print_mirror_state_record)?;
        } else if options.records {
            print_records(&batch, out, print_raw_record)?;
        }
        position = iter.position();
        if !crc_ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What Kafka's DumpLogSegments prints before a control record's own fields.
fn control_prefix(batch: &RecordBatch) -> String {
    let (key, value) = decode_records(&batch.records(), batch.record_count())
        .ok()
        .and_then(|r| r.into_iter().next())
        .map_or((-1, -1), |r| {
            (
                r.key.as_ref().map_or(-1, |k| k.len() as i64),
                r.value.as_ref().map_or(-1, |v| v.len() as i64),
            )
        });
    format!(
        "| offset: {} {}: {} keySize: {key} valueSize: {value} sequence: -1 headerKeys: []",
        batch.base_offset(),
        if batch.is_log_append_time() {
            "LogAppendTime"
        } else {
            "CreateTime"
        },
        batch.max_timestamp()
    )
}

fn print_control(batch: &RecordBatch, out: &mut impl Write) -> io::Result<()> {
    let prefix = control_prefix(batch);
    match batch.control_record() {
        Ok(c) => match c.kind {
            ControlType::Commit | ControlType::Abort => writeln!(
                out,
                "{prefix} endTxnMarker: {} coordinatorEpoch: {}",
                c.kind.name(),
                c.coordinator_epoch.unwrap_or(-1)
            ),
            ControlType::MirrorPidReset => writeln!(
                out,
                "{prefix} MIRROR_PID_RESET sourceClusterId: {}",
                c.source_cluster_id.unwrap_or_default()
            ),
            ControlType::Other(t) => {
                writeln!(
                    out,
                    "{prefix} control record type {t} version {}",
                    c.version
                )
            }
        },
        Err(e) => writeln!(
            out,
            "| offset: {} error: bad control record: {e}",
            batch.base_offset()
        ),
    }
}

fn print_records<W: Write>(
    batch: &RecordBatch,
    out: &mut W,
    print: fn(&RecordBatch, &Record, &mut W) -> io::Result<()>,
) -> io::Result<()> {
    match batch_records(batch) {
        Ok(recs) => {
            for r in &recs {
                print(batch, r, out)?;
            }
            Ok(())
        }
        Err(e) => writeln!(
            out,
            "| error: records of batch {} do not decode: {e}",
            batch.base_offset()
        ),
    }
}

fn print_raw_record(batch: &RecordBatch, r: &Record, out: &mut impl Write) -> io::Result<()> {
    let seq = if batch.base_sequence() >= 0 {
        batch.base_sequence().wrapping_add(r.offset_delta)
    } else {
        -1
    };
    // Kafka prints Java's list format: `[a, b]`.
    let headers: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
    let headers = format!("[{}]", headers.join(", "));
    writeln!(
        out,
        "| offset: {} CreateTime: {} keySize: {} valueSize: {} sequence: {} headerKeys: {} key: {} payload: {}",
        batch.base_offset().0 + i64::from(r.offset_delta),
        batch.base_timestamp() + r.timestamp_delta,
        r.key.as_ref().map_or(-1, |k| k.len() as i64),
        r.value.as_ref().map_or(-1, |v| v.len() as i64),
        seq,
        headers,
        r.key.as_ref().map_or(String::new(), |k| printable(k)),
        r.value.as_ref().map_or(String::new(), |v| printable(v)),
    )
}

/// A `__mirror_state` record in words: `key: <kind> mirror=.. topic=.. partition=..`
/// then `value: ...` or `tombstone`. A record that does not decode is shown with the
/// reason (the batch itself is fine, so the dump does not fail).
fn print_mirror_state_record(
    batch: &RecordBatch,
    r: &Record,
    out: &mut impl Write,
) -> io::Result<()> {
    write!(
        out,
        "| offset: {} CreateTime: {} ",
        batch.base_offset().0 + i64::from(r.offset_delta),
        batch.base_timestamp() + r.timestamp_delta,
    )?;
    let Some(key) = &r.key else {
        return writeln!(out, "error: record without a key");
    };
    match decode_record(key, r.value.as_deref()) {
        Ok((key, value)) => {
            write!(
                out,
                "key: {} mirror={} topic={} partition={} ",
                key.kind.name(),
                printable(key.mirror.as_bytes()),
                format_topic_id(key.topic_id),
                key.partition
            )?;
            match value {
                None => writeln!(out, "tombstone"),
                Some(MirrorStateValue::Lme {
                    last_mirrored_epoch,
                    last_mirrored_offset,
                }) if last_mirrored_offset >= 0 => writeln!(
                    out,
                    "value: last_mirrored_epoch={last_mirrored_epoch} last_mirrored_offset={last_mirrored_offset}"
                ),
                Some(MirrorStateValue::Lme {
                    last_mirrored_epoch,
                    ..
                }) => writeln!(out, "value: last_mirrored_epoch={last_mirrored_epoch}"),
                Some(MirrorStateValue::State(v)) => writeln!(
                    out,
                    "value: state={} prev={} retry={} leader_epoch={} state_epoch={} \
                     truncated_records={} error={}",
                    v.state,
                    v.previous_state,
                    v.retry_attempt,
                    v.leader_epoch,
                    v.state_epoch,
                    v.truncated_records,
                    v.error_message
                        .as_deref()
                        .map_or("null".to_string(), |m| format!("{m:?}")),
                ),
            }
        }
        Err(e) => writeln!(out, "error: not a __mirror_state record: {e}"),
    }
}

/// One line per record whatever the bytes hold: UTF-8 shown with escapes for control
/// characters, other bytes as `\xNN`.
fn printable(bytes: &[u8]) -> String {
    bytes.utf8_chunks().fold(String::new(), |mut out, chunk| {
        out.extend(chunk.valid().escape_debug());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
        out
    })
}

fn dump_offset_index(base: Offset, data: &[u8], out: &mut impl Write) -> io::Result<bool> {
    match OffsetIndex::parse(base, data) {
        Ok(idx) => {
            for (offset, position) in idx.entries() {
                writeln!(out, "offset: {offset} position: {position}")?;
            }
            Ok(true)
        }
        Err(e) => writeln!(out, "error: {e}").map(|()| false),
    }
}

fn dump_time_index(base: Offset, data: &[u8], out: &mut impl Write) -> io::Result<bool> {
    match TimeIndex::parse(base, data) {
        Ok(idx) => {
            for (ts, offset) in idx.entries() {
                writeln!(out, "timestamp: {ts} offset: {offset}")?;
            }
            Ok(true)
        }
        Err(e) => writeln!(out, "error: {e}").map(|()| false),
    }
}

fn dump_txn_index(base: Offset, data: &[u8], out: &mut impl Write) -> io::Result<bool> {
    match TransactionIndex::parse(base, data) {
        Ok(idx) => {
            for t in idx.entries() {
                writeln!(
                    out,
                    "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                    t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
                )?;
            }
            Ok(true)
        }
        Err(e) => writeln!(out, "error: {e}").map(|()| false),
    }
}

fn dump_snapshot(data: &[u8], out: &mut impl Write) -> io::Result<bool> {
    match decode_snapshot_entries(data) {
        Ok(entries) => {
            for e in entries {
                let txn = e
                    .current_txn_first_offset
                    .map_or("None".to_string(), |o| o.to_string());
                write!(
                    out,
                    "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {} lastTimestamp: {}",
                    e.producer_id, e.producer_epoch, e.coordinator_epoch, txn, e.last_timestamp_ms
                )?;
                for b in &e.batches {
                    write!(
                        out,
                        " [firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}]",
                        b.first_seq, b.last_seq, b.last_offset, b.offset_delta, b.timestamp_ms
                    )?;
                }
                writeln!(out)?;
            }
            Ok(true)
        }
        Err(e) => writeln!(out, "error: {e}").map(|()| false),
    }
}

fn dump_epochs(data: &[u8], out: &mut impl Write) -> io::Result<bool> {
    match LeaderEpochCache::parse_checkpoint(&String::from_utf8_lossy(data)) {
        Ok(cache) => {
            for e in cache.entries() {
                writeln!(out, "epoch: {} startOffset: {}", e.epoch, e.start_offset)?;
            }
            Ok(true)
        }
        Err(e) => writeln!(out, "error: {e}").map(|()| false),
    }
}

fn dump_metadata(data: &[u8], out: &mut impl Write) -> io::Result<bool> {
    match parse_partition_metadata(&String::from_utf8_lossy(data)) {
        Ok(id) => writeln!(out, "topic_id: {} ({id})", format_topic_id(id)).map(|()| true),
        Err(e) => writeln!(out, "error: {e}").map(|()| false),
    }
}
