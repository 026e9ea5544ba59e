//! What the cleaner keeps of each batch: Kafka's `LogCleaner` retention rules, pure
//! functions of a batch, the offset map, the transaction state the walk has seen and the
//! clock. Nothing here reads or writes a file.
//!
//! - A data record survives when it has a key, no later record of the same key is in the
//!   offset map, and it is not a tombstone past its batch's delete horizon. A tombstone
//!   gets its horizon only from a clean whose map holds it, which removes the older
//!   records it deletes in the same pass.
//! - Records of aborted transactions go, and so does an ABORT marker once no record of
//!   its transaction is left; a COMMIT marker goes once no record of its transaction is
//!   left. A marker that can go is first kept once more with a delete horizon
//!   (`now + delete.retention.ms`, KIP-534), so a consumer that read the transaction's
//!   records sees its end; the next clean after the horizon removes it. Tombstones get
//!   the same two passes.
//! - The last batch of a producer still in producer state is kept (as an empty batch if
//!   none of its records survive), so idempotence and transaction state are rebuilt the
//!   same after a restart.
//! - MIRROR_PID_RESET and other control batches are never removed.
//! - Offsets never change: a rewritten batch keeps its base offset, last offset delta,
//!   producer id, epoch and base sequence, leader epoch and codec.

use std::collections::{HashMap, HashSet, VecDeque};

use bytes::{Bytes, BytesMut};

use super::offset_map::OffsetMap;
use crate::log::txn_index::AbortedTxn;
use crate::types::{Offset, ProducerId};
use crate::wire::batch::{BatchBuilder, Compression, COMPRESSION_MASK, DELETE_HORIZON_FLAG};
use crate::wire::records::{batch_records, write_varlong, Record};
use crate::wire::{ControlType, RecordBatch};

/// The transactions the walk over the log has met (Kafka's `CleanedTransactionMetadata`).
/// Fed every batch in offset order, from the first offset the walk covers.
#[derive(Debug, Default)]
pub struct TxnTracker {
    /// Aborted transactions (from the transaction indexes) not reached yet, by first offset.
    pending: VecDeque<AbortedTxn>,
    /// Producer -> its aborted transaction in progress, and whether this walk met one of
    /// its data batches.
    aborted: HashMap<ProducerId, (AbortedTxn, bool)>,
    /// Producers whose committed transaction had a data batch on this walk and whose
    /// COMMIT marker is still ahead.
    committed: HashSet<ProducerId>,
}

/// What may happen to a COMMIT or ABORT marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerFate {
    /// No record of its transaction is left: the marker may go (after its horizon).
    pub can_discard: bool,
    /// An ABORT marker that stays because its transaction's records were met: the entry
    /// the cleaned segment's transaction index keeps for read_committed readers.
    pub index_entry: Option<AbortedTxn>,
}

impl TxnTracker {
    /// A tracker for a walk over the log with these aborted transactions (all that
    /// overlap the walk, in any order).
    pub fn new(mut aborted: Vec<AbortedTxn>) -> TxnTracker {
        aborted.sort_by_key(|t| t.first_offset);
        TxnTracker {
            pending: aborted.into(),
            ..TxnTracker::default()
        }
    }

    fn reach(&mut self, last_offset: Offset) {
        while self
            .pending
            .front()
            .is_some_and(|t| t.first_offset <= last_offset)
        {
            if let Some(t) = self.pending.pop_front() {
                self.aborted.insert(t.producer_id, (t, false));
            }
        }
    }

    /// For a data batch: whether it belongs to an aborted transaction.
    pub fn is_aborted(&mut self, batch: &RecordBatch) -> bool {
        self.reach(batch.last_offset());
        if !batch.is_transactional() {
            return false;
        }
        let pid = batch.producer_id();
        match self.aborted.get_mut(&pid) {
            Some((_, met)) => {
                *met = true;
                true
            }
            None => {
                self.committed.insert(pid);
                false
            }
        }
    }

    /// For a COMMIT (`commit`) or ABORT marker of `producer`.
    pub fn on_marker(&mut self, batch: &RecordBatch, commit: bool) -> MarkerFate {
        self.reach(batch.last_offset());
        let pid = batch.producer_id();
        if commit {
            // Safe to remove when the walk met no record of the transaction.
            return MarkerFate {
                can_discard: !self.committed.remove(&pid),
                index_entry: None,
            };
        }
        match self.aborted.remove(&pid) {
            Some((txn, true)) => MarkerFate {
                can_discard: false,
                index_entry: Some(txn),
            },
            _ => MarkerFate {
                can_discard: true,
                index_entry: None,
            },
        }
    }
}

/// What one clean knows besides the batch.
#[derive(Debug)]
pub struct CleanContext<'a> {
    pub map: &'a OffsetMap,
    /// Offsets from here on are past what the map covers: kept.
    pub map_end: i64,
    /// The clean's clock (fixed for the whole clean).
    pub now_ms: i64,
    /// `delete.retention.ms`.
    pub delete_retention_ms: i64,
    /// Producer -> the last offset of its last data batch, for producers still in
    /// producer state.
    pub last_batch_of_active: &'a HashMap<ProducerId, Offset>,
}

/// What becomes of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Kept byte for byte.
    Keep,
    /// Removed whole.
    Drop,
    /// Replaced by this batch (same offsets; fewer records, an empty header, or a delete
    /// horizon).
    Rewrite(Bytes),
}

/// The verdict on `batch`, and the aborted-transaction index entry the cleaned segment
/// keeps for it. `Err` when the batch's records cannot be decoded: the caller keeps the
/// batch as it is.
pub fn judge(
    batch: &RecordBatch,
    tracker: &mut TxnTracker,
    cx: &CleanContext<'_>,
) -> Result<(Verdict, Option<AbortedTxn>), String> {
    let horizon = batch.has_delete_horizon().then(|| batch.base_timestamp());
    let horizon_passed = horizon.is_some_and(|h| cx.now_ms >= h);
    let new_horizon = cx.now_ms.saturating_add(cx.delete_retention_ms);
    let last_of_active = batch.has_producer_id()
        && cx.last_batch_of_active.get(&batch.producer_id()) == Some(&batch.last_offset());
    if batch.is_control() {
        let commit = match batch.control_record().map(|c| c.kind) {
            Ok(ControlType::Commit) => true,
            Ok(ControlType::Abort) => false,
            // MIRROR_PID_RESET, and kinds this broker does not know: never removed.
            _ => return Ok((Verdict::Keep, None)),
        };
        let fate = tracker.on_marker(batch, commit);
        let verdict = if !fate.can_discard {
            Verdict::Keep
        } else if horizon_passed {
            Verdict::Drop
        } else if horizon.is_none() {
            Verdict::Rewrite(with_delete_horizon(batch, new_horizon))
        } else {
            Verdict::Keep
        };
        return Ok((verdict, fate.index_entry));
    }
    if tracker.is_aborted(batch) {
        let verdict = if last_of_active {
            Verdict::Rewrite(empty_batch(batch))
        } else {
            Verdict::Drop
        };
        return Ok((verdict, None));
    }
    let records = batch_records(batch)?;
    let base = batch.base_offset().0;
    let total = records.len();
    // A batch the offset map does not hold: the older records its tombstones delete were
    // not removed by this clean, so its tombstones get no delete horizon here (one with a
    // horizon got it from a clean that held it, and may go once the horizon passes).
    let in_map = batch.last_offset().0 < cx.map_end;
    let kept: Vec<Record> = records
        .into_iter()
        .filter(|r| {
            let offset = base + i64::from(r.offset_delta);
            let Some(key) = r.key.as_deref() else {
                return false;
            };
            let superseded = offset < cx.map_end && cx.map.get(key).is_some_and(|o| o > offset);
            !superseded && (r.value.is_some() || !horizon_passed)
        })
        .collect();
    let needs_horizon = in_map && horizon.is_none() && kept.iter().any(|r| r.value.is_none());
    let verdict = if kept.len() == total && !needs_horizon {
        Verdict::Keep
    } else if kept.is_empty() {
        if last_of_active {
            Verdict::Rewrite(empty_batch(batch))
        } else {
            Verdict::Drop
        }
    } else {
        let horizon = if needs_horizon {
            Some(new_horizon)
        } else {
            horizon
        };
        Verdict::Rewrite(rebuild(batch, &kept, horizon)?)
    };
    Ok((verdict, None))
}

/// Adds the keys of `batch` to the offset map (Kafka's `buildOffsetMapForSegment`, one
/// batch): control batches and batches of aborted transactions add nothing. `Ok(false)`
/// when a key did not fit: the map then covers only offsets below this batch.
pub fn index_batch(
    batch: &RecordBatch,
    tracker: &mut TxnTracker,
    map: &mut OffsetMap,
) -> Result<bool, String> {
    if batch.is_control() {
        let commit = matches!(
            batch.control_record().map(|c| c.kind),
            Ok(ControlType::Commit)
        );
        let is_marker = commit
            || matches!(
                batch.control_record().map(|c| c.kind),
                Ok(ControlType::Abort)
            );
        if is_marker {
            tracker.on_marker(batch, commit);
        }
        return Ok(true);
    }
    if tracker.is_aborted(batch) {
        return Ok(true);
    }
    let base = batch.base_offset().0;
    for r in batch_records(batch)? {
        if let Some(key) = r.key.as_deref() {
            if !map.put(key, base + i64::from(r.offset_delta)) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The header fields of `batch` for a rebuilt one.
fn header_of(batch: &RecordBatch) -> BatchBuilder {
    BatchBuilder {
        base_offset: batch.base_offset(),
        partition_leader_epoch: batch.partition_leader_epoch(),
        attributes: batch.attributes(),
        last_offset_delta: batch.last_offset_delta(),
        base_timestamp: batch.base_timestamp(),
        max_timestamp: batch.max_timestamp(),
        producer_id: batch.producer_id(),
        producer_epoch: batch.producer_epoch(),
        base_sequence: batch.base_sequence(),
        record_count: batch.record_count(),
    }
}

/// The batch with every record dropped but its header (Kafka's `writeEmptyHeader`): the
/// producer's sequence and offset range stay for producer state.
fn empty_batch(batch: &RecordBatch) -> Bytes {
    let mut h = header_of(batch);
    h.attributes &= !(COMPRESSION_MASK | DELETE_HORIZON_FLAG);
    h.base_timestamp = batch.max_timestamp();
    h.record_count = 0;
    h.build(&[])
}

/// A control batch, kept once more with a delete horizon. Its single record's timestamp
/// delta is re-based on the horizon, which takes the base timestamp's place.
fn with_delete_horizon(batch: &RecordBatch, horizon: i64) -> Bytes {
    match batch_records(batch).and_then(|records| rebuild(batch, &records, Some(horizon))) {
        Ok(b) => b,
        Err(_) => batch.as_bytes().clone(),
    }
}

/// `batch` with only `records` (offset deltas kept), the same codec, and `horizon` as the
/// delete horizon when given. Record timestamps are kept; their deltas are re-based.
fn rebuild(batch: &RecordBatch, records: &[Record], horizon: Option<i64>) -> Result<Bytes, String> {
    let old_base = batch.base_timestamp();
    let timestamp = |r: &Record| old_base.saturating_add(r.timestamp_delta);
    let mut h = header_of(batch);
    h.record_count = records.len() as i32;
    let new_base = match horizon {
        Some(at) => {
            h.attributes |= DELETE_HORIZON_FLAG;
            at
        }
        None => old_base,
    };
    h.base_timestamp = new_base;
    if !batch.is_log_append_time() {
        if let Some(max) = records.iter().map(timestamp).max() {
            h.max_timestamp = max;
        }
    }
    let mut raw = Vec::with_capacity(batch.size_in_bytes());
    for r in records {
        encode_record(&mut raw, r, timestamp(r).saturating_sub(new_base));
    }
    let body = compress(batch.compression(), raw)?;
    Ok(h.build(&body))
}

/// One v2 record with its headers.
fn encode_record(out: &mut Vec<u8>, r: &Record, timestamp_delta: i64) {
    let mut body = Vec::with_capacity(
        16 + r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len()),
    );
    body.push(r.attributes as u8);
    write_varlong(&mut body, timestamp_delta);
    write_varlong(&mut body, i64::from(r.offset_delta));
    put_bytes(&mut body, r.key.as_deref());
    put_bytes(&mut body, r.value.as_deref());
    write_varlong(&mut body, r.headers.len() as i64);
    for (name, value) in &r.headers {
        put_bytes(&mut body, Some(name.as_bytes()));
        put_bytes(&mut body, value.as_deref());
    }
    write_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

fn put_bytes(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        Some(b) => {
            write_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
        None => write_varlong(out, -1),
    }
}

/// The records section compressed with `codec` (the batch's own).
fn compress(codec: Compression, raw: Vec<u8>) -> Result<Vec<u8>, String> {
    use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
    let mut out = BytesMut::new();
    let put = |tmp: &mut BytesMut| {
        tmp.extend_from_slice(&raw);
        Ok(())
    };
    let done = match codec {
        Compression::None => return Ok(raw),
        Compression::Gzip => Gzip::compress(&mut out, put),
        Compression::Snappy => Snappy::compress(&mut out, put),
        Compression::Lz4 => Lz4::compress(&mut out, put),
        Compression::Zstd => Zstd::compress(&mut out, put),
        Compression::Unknown(c) => return Err(format!("unknown codec {c}")),
    };
    done.map_err(|e| format!("compressing with {}: {e}", codec.name()))?;
    Ok(out.to_vec())
}

#[cfg(test)]
mod tests;
