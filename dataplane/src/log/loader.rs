//! Opening a partition log: Kafka's LogLoader. After a clean shutdown the indexes and
//! the producer snapshot at the log end are trusted; otherwise the segments from the
//! newest usable producer snapshot onward are scanned batch by batch (frame, CRC,
//! offsets), a torn or corrupt tail is cut off and logged, and indexes, epoch cache,
//! producer state and aborted-transaction index are rebuilt from what remains.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;

use crate::log::cleaner;
use crate::log::config::LogConfig;
use crate::log::epoch_cache::LeaderEpochCache;
use crate::log::fs;
use crate::log::partition_log::{
    LogError, PartitionLog, CLEAN_SHUTDOWN_FILE, EPOCH_CHECKPOINT_FILE, LOG_START_CHECKPOINT_FILE,
    PARTITION_METADATA_FILE,
};
use crate::log::producer_state::{AppendOrigin, ProducerStateManager};
use crate::log::segment::{file_name, LogSegment};
use crate::log::txn_index::AbortedTxn;
use crate::types::{Offset, TopicPartition};

/// Parses Kafka's `partition.metadata` ("version: 0\ntopic_id: <base64 uuid>\n").
pub fn parse_partition_metadata(text: &str) -> Result<uuid::Uuid, String> {
    let mut version = None;
    let mut id = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("version: ") {
            version = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("topic_id: ") {
            id = Some(v.trim().to_string());
        }
    }
    if version.as_deref() != Some("0") {
        return Err(format!("unsupported or missing version {version:?}"));
    }
    let id = id.ok_or("missing topic_id")?;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(id.as_bytes())
        .map_err(|e| format!("topic_id is not base64: {e}"))?;
    let bytes: [u8; 16] = raw
        .try_into()
        .map_err(|_| "topic_id is not 16 bytes".to_string())?;
    Ok(uuid::Uuid::from_bytes(bytes))
}

/// Formats a topic id the way Kafka prints it (URL-safe base64 without padding).
pub fn format_topic_id(id: uuid::Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

impl PartitionLog {
    /// Opens (creating if needed) the log of `tp` under `data_dir`, recovering it as
    /// described in the module docs. `topic_id`, when given, is written to
    /// `partition.metadata` or checked against it.
    pub async fn open(
        data_dir: &Path,
        tp: TopicPartition,
        topic_id: Option<uuid::Uuid>,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<PartitionLog, LogError> {
        // glommio opens directories relative to nothing: make the path absolute.
        let dir =
            std::path::absolute(data_dir.join(tp.dir_name())).map_err(|source| fs::FsError {
                op: "resolve",
                path: data_dir.to_path_buf(),
                source,
            })?;
        fs::create_dir_all(&dir).await?;
        let topic_id = check_topic_id(&dir, &tp, topic_id).await?;
        let mut names = fs::list_dir(&dir).await?;
        if cleaner::recover_swap(&dir, &names).await? {
            names = fs::list_dir(&dir).await?;
        }
        let first_dirty = cleaner::read_checkpoint(&dir).await?;
        let clean = names.iter().any(|n| n == CLEAN_SHUTDOWN_FILE);
        let mut bases = Vec::new();
        for name in &names {
            if name.ends_with(".tmp") || name.ends_with(".deleted") || name.ends_with(".cleaned") {
                fs::remove_file(&dir.join(name)).await?;
            } else if let Some(base) = name
                .strip_suffix(".log")
                .and_then(|b| b.parse::<i64>().ok())
            {
                bases.push(Offset(base));
            }
        }
        for name in &names {
            let orphan = [".index", ".timeindex", ".txnindex"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .and_then(|b| b.parse::<i64>().ok())
                    .is_some_and(|b| !bases.contains(&Offset(b)))
            });
            if orphan {
                fs::remove_file(&dir.join(name)).await?;
            }
        }
        bases.sort();

        let checkpoint_start = read_log_start_checkpoint(&dir, &tp).await?;
        let mut segments = BTreeMap::new();
        for base in &bases {
            let seg = LogSegment::open(
                &dir,
                *base,
                config.index_interval_bytes,
                config.direct_io,
                now_ms,
            )
            .await?;
            segments.insert(*base, seg);
        }
        if segments.is_empty() {
            let base = checkpoint_start.unwrap_or(Offset(0));
            segments.insert(
                base,
                LogSegment::create(
                    &dir,
                    base,
                    config.index_interval_bytes,
                    config.direct_io,
                    now_ms,
                )
                .await?,
            );
        }
        let first_base = *segments.keys().next().expect("at least one segment");
        let log_start_offset = checkpoint_start.map_or(first_base, |c| c.max(first_base));

        let (mut epoch_cache, epochs_trusted) = match fs::read_all(&dir.join(EPOCH_CHECKPOINT_FILE))
            .await?
        {
            None => (LeaderEpochCache::new(), false),
            Some(raw) => match LeaderEpochCache::parse_checkpoint(&String::from_utf8_lossy(&raw)) {
                Ok(c) => (c, true),
                Err(e) => {
                    tracing::warn!(%tp, error = %e, "corrupt leader-epoch-checkpoint; rebuilding from the log");
                    (LeaderEpochCache::new(), false)
                }
            },
        };

        let mut log = PartitionLog {
            tp: tp.clone(),
            dir: dir.clone(),
            config,
            segments: BTreeMap::new(),
            log_start_offset,
            log_end_offset: first_base,
            high_watermark: first_base,
            recovery_point: first_base,
            epoch_cache: LeaderEpochCache::new(),
            epochs_unwritten: false,
            producer_state: ProducerStateManager::new(0),
            topic_id,
            unflushed_records: 0,
            last_flush_ms: now_ms,
            snapshots: names
                .iter()
                .filter_map(|n| n.strip_suffix(".snapshot")?.parse::<i64>().ok().map(Offset))
                .collect(),
            generation: 0,
            first_dirty_offset: first_dirty.unwrap_or(log_start_offset),
            last_clean_ms: -1,
        };
        log.producer_state = ProducerStateManager::new(log.config.producer_id_expiration_ms);

        // Where recovery has to start scanning: after a clean shutdown nowhere, else at
        // the newest segment whose start has a usable producer snapshot.
        let mut snapshots = load_snapshot_candidates(&mut log, &segments).await?;
        let (mut psm, scan_from) = if clean {
            match snapshots.pop() {
                Some((_, psm)) => (psm, None),
                None => (empty_state(&log), None),
            }
        } else {
            match snapshots
                .iter()
                .rposition(|(off, _)| segments.contains_key(off))
            {
                Some(i) => {
                    let (off, psm) = snapshots.swap_remove(i);
                    (psm, Some(off))
                }
                None => (empty_state(&log), Some(first_base)),
            }
        };
        if !epochs_trusted {
            // Rebuild epochs from every batch header; cheap compared to a CRC scan.
            epoch_cache = LeaderEpochCache::new();
        }

        let mut cut_at: Option<Offset> = None;
        let bases: Vec<Offset> = segments.keys().copied().collect();
        for (i, base) in bases.iter().enumerate() {
            let Some(mut seg) = segments.remove(base) else {
                continue;
            };
            if cut_at.is_some() {
                tracing::warn!(%tp, base_offset = base.0, "deleting segment after a corrupt one");
                seg.delete().await?;
                continue;
            }
            let next_base = bases.get(i + 1).copied();
            let must_scan = scan_from.is_some_and(|from| next_base.is_none_or(|n| n > from));
            if must_scan {
                let from = psm.map_end_offset();
                let cache = &mut epoch_cache;
                let state = &mut psm;
                let cut = seg
                    .recover(|batch| replay(state, cache, batch, from))
                    .await?;
                if let Some(cut) = cut {
                    tracing::warn!(
                        %tp, segment = %seg.log_path().display(), position = cut.position,
                        bytes_removed = cut.bytes_removed, reason = %cut.reason,
                        "recovery truncated a torn or corrupt tail"
                    );
                    cut_at = Some(seg.next_offset());
                }
            } else {
                let ok = seg.load_indexes().await?;
                if !ok {
                    tracing::warn!(%tp, segment = %seg.log_path().display(), "indexes missing or inconsistent; rebuilding");
                    let cache = &mut epoch_cache;
                    let cut = seg
                        .recover(|batch| {
                            if !epochs_trusted {
                                cache.assign(batch.partition_leader_epoch(), batch.base_offset());
                            }
                            Vec::new()
                        })
                        .await?;
                    seg.reload_txn_index().await?;
                    if let Some(cut) = cut {
                        tracing::warn!(
                            %tp, segment = %seg.log_path().display(), position = cut.position,
                            bytes_removed = cut.bytes_removed, reason = %cut.reason,
                            "recovery truncated a corrupt segment"
                        );
                        cut_at = Some(seg.next_offset());
                    }
                } else if !epochs_trusted {
                    let cache = &mut epoch_cache;
                    seg.scan(0, false, |batch, _| {
                        cache.assign(batch.partition_leader_epoch(), batch.base_offset());
                        std::ops::ControlFlow::Continue(())
                    })
                    .await?;
                }
            }
            log.segments.insert(*base, seg);
        }
        let end = log
            .segments
            .values()
            .next_back()
            .map_or(first_base, LogSegment::next_offset);
        log.log_end_offset = end;
        log.log_start_offset = log.log_start_offset.min(end);
        epoch_cache.truncate_from_end(end);
        epoch_cache.truncate_from_start(log.log_start_offset);
        log.epoch_cache = epoch_cache;
        log.high_watermark = end;

        if psm.map_end_offset() > end || (clean && psm.map_end_offset() < end) || cut_at.is_some() {
            // The snapshot is ahead of what survived, or behind the log end: rebuild.
            log.rebuild_producer_state(end).await?;
        } else {
            psm.set_map_end_offset(end);
            log.producer_state = psm;
            log.delete_snapshots(|o| o > end).await?;
        }
        log.producer_state
            .on_high_watermark_updated(log.high_watermark);
        log.producer_state.remove_expired(now_ms);

        for seg in log.segments.values_mut() {
            seg.flush(true).await?;
        }
        log.recovery_point = end;
        log.write_epoch_checkpoint().await?;
        fs::remove_file(&dir.join(CLEAN_SHUTDOWN_FILE)).await?;
        fs::sync_dir(&dir).await?;
        tracing::info!(
            %tp, clean, log_start = log.log_start_offset.0, log_end = end.0,
            segments = log.segments.len(), producers = log.producer_state.len(),
            "opened partition log"
        );
        Ok(log)
    }
}

fn empty_state(log: &PartitionLog) -> ProducerStateManager {
    let mut p = ProducerStateManager::new(log.config.producer_id_expiration_ms);
    p.set_map_end_offset(log.log_start_offset);
    p
}

/// Applies one recovered batch to producer state (from `from` on) and the epoch cache;
/// returns the aborted transactions it completes.
fn replay(
    psm: &mut ProducerStateManager,
    cache: &mut LeaderEpochCache,
    batch: &crate::wire::batch::RecordBatch,
    from: Offset,
) -> Vec<AbortedTxn> {
    // Kafka's LogSegment.recover: only a newer epoch is assigned, so replaying a
    // segment into the checkpointed cache cannot rewrite earlier epochs' history.
    let epoch = batch.partition_leader_epoch();
    if cache.latest_epoch().is_none_or(|latest| epoch > latest) {
        cache.assign(epoch, batch.base_offset());
    }
    if batch.base_offset() < from {
        return Vec::new();
    }
    let mut append = psm.begin_append(AppendOrigin::Replication);
    if let Err(e) = append.append(psm, batch, batch.base_offset()) {
        tracing::warn!(offset = batch.base_offset().0, error = %e, "producer state replay skipped a batch");
        return Vec::new();
    }
    let done = psm.commit(append);
    psm.set_map_end_offset(batch.next_offset());
    done.into_iter()
        .filter(|t| t.is_aborted)
        .map(|t| AbortedTxn {
            producer_id: t.producer_id,
            first_offset: t.first_offset,
            last_offset: t.last_offset,
            last_stable_offset: t.last_stable_offset,
        })
        .collect()
}

async fn load_snapshot_candidates(
    log: &mut PartitionLog,
    segments: &BTreeMap<Offset, LogSegment>,
) -> Result<Vec<(Offset, ProducerStateManager)>, LogError> {
    let offsets = log.snapshot_offsets();
    let mut out = Vec::new();
    let last_base = segments.keys().next_back().copied().unwrap_or(Offset(0));
    for off in offsets {
        let path = log.dir.join(file_name(off, ".snapshot"));
        if off < log.log_start_offset && off < last_base && !segments.contains_key(&off) {
            continue;
        }
        let Some(bytes) = fs::read_all(&path).await? else {
            continue;
        };
        match ProducerStateManager::decode_snapshot(&bytes, log.config.producer_id_expiration_ms) {
            Ok(mut psm) => {
                psm.set_map_end_offset(off);
                out.push((off, psm));
            }
            Err(e) => {
                tracing::warn!(tp = %log.tp, path = %path.display(), error = %e, "discarding corrupt producer snapshot");
                fs::remove_file(&path).await?;
                log.snapshots.remove(&off);
            }
        }
    }
    Ok(out)
}

async fn check_topic_id(
    dir: &Path,
    tp: &TopicPartition,
    expected: Option<uuid::Uuid>,
) -> Result<Option<uuid::Uuid>, LogError> {
    let path = dir.join(PARTITION_METADATA_FILE);
    match fs::read_all(&path).await? {
        Some(raw) => {
            let stored =
                parse_partition_metadata(&String::from_utf8_lossy(&raw)).map_err(|reason| {
                    LogError::CorruptMetadata {
                        tp: tp.clone(),
                        path: path.clone(),
                        reason,
                    }
                })?;
            match expected {
                Some(e) if e != stored => Err(LogError::InconsistentTopicId {
                    tp: tp.clone(),
                    stored,
                    expected: e,
                }),
                _ => Ok(Some(stored)),
            }
        }
        None => {
            if let Some(id) = expected {
                let text = format!("version: 0\ntopic_id: {}\n", format_topic_id(id));
                fs::write_atomic(&path, text.into_bytes()).await?;
            }
            Ok(expected)
        }
    }
}

async fn read_log_start_checkpoint(
    dir: &Path,
    tp: &TopicPartition,
) -> Result<Option<Offset>, LogError> {
    let path = dir.join(LOG_START_CHECKPOINT_FILE);
    let Some(raw) = fs::read_all(&path).await? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&raw);
    let corrupt = |reason: &str| LogError::CorruptMetadata {
        tp: tp.clone(),
        path: path.clone(),
        reason: reason.to_string(),
    };
    let mut lines = text.lines();
    if lines.next() != Some("0") {
        return Err(corrupt("unsupported checkpoint version"));
    }
    let _count = lines.next();
    let entry = lines.next().ok_or_else(|| corrupt("missing entry"))?;
    let offset = entry
        .rsplit(' ')
        .next()
        .and_then(|o| o.parse::<i64>().ok())
        .ok_or_else(|| corrupt("entry has no offset"))?;
    Ok(Some(Offset(offset)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_metadata_round_trip() {
        let id = uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788);
        let text = format!("version: 0\ntopic_id: {}\n", format_topic_id(id));
        assert_eq!(parse_partition_metadata(&text), Ok(id));
        assert!(
            parse_partition_metadata("version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n").is_err()
        );
        assert!(parse_partition_metadata("version: 0\ntopic_id: !!\n").is_err());
    }
}
