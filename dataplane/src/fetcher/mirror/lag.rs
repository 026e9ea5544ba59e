//! Mirror lag in time (the RPO an operator alerts on): about once a second per
//! partition the fetcher asks the source for the timestamp of its newest record
//! (ListOffsets v7+, timestamp -3 = MAX_TIMESTAMP, every due partition led by that
//! broker in one request) and compares it with the newest timestamp in the local log.
//! A source without ListOffsets v7 leaves the lag unknown (-1). A failed probe only
//! logs: it never stops or delays fetching beyond its own round trip.

use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, ListOffsetsRequest};

use super::MirrorFetcher;
use crate::fetcher::engine::LeaderEndpoint;
use crate::shard::ShardCtx;
use crate::types::{Offset, TopicPartition};

/// How often each partition's lag is probed.
const LAG_PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// ListOffsets' MAX_TIMESTAMP (KIP-734), answered from v7 on.
const MAX_TIMESTAMP: i64 = -3;
const LIST_OFFSETS_MAX_TIMESTAMP_MIN_VERSION: i16 = 7;
/// The newest ListOffsets version the fetcher speaks (as in `reset_out_of_range`).
const LIST_OFFSETS_MAX_VERSION: i16 = 8;

impl MirrorFetcher {
    /// Probes the lag of the partitions of `tps` (all led by the broker behind `conn`)
    /// whose last probe is older than [`LAG_PROBE_INTERVAL`].
    pub(super) async fn probe_lag(
        &self,
        ctx: &Rc<ShardCtx>,
        conn: &mut impl LeaderEndpoint,
        tps: &[TopicPartition],
    ) {
        let now = Instant::now();
        let due: Vec<&TopicPartition> = tps
            .iter()
            .filter(|tp| {
                self.with_state(tp, |s| {
                    let due = s
                        .lag_probed_at
                        .is_none_or(|at| now.duration_since(at) >= LAG_PROBE_INTERVAL);
                    if due {
                        s.lag_probed_at = Some(now);
                    }
                    due
                })
                .unwrap_or(false)
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let Some(version) = conn.pick_version(
            ApiKey::ListOffsets as i16,
            LIST_OFFSETS_MAX_TIMESTAMP_MIN_VERSION,
            LIST_OFFSETS_MAX_VERSION,
        ) else {
            return;
        };
        let mut by_topic: std::collections::BTreeMap<&str, Vec<ListOffsetsPartition>> =
            std::collections::BTreeMap::new();
        for tp in &due {
            by_topic.entry(tp.topic.as_str()).or_default().push(
                ListOffsetsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_timestamp(MAX_TIMESTAMP),
            );
        }
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(0)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(topic, partitions)| {
                        ListOffsetsTopic::default()
                            .with_name(crate::api::topic_name(topic))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let response = match conn.list_offsets(&request, version).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(mirror = %self.config.mirror, error = %e, "lag probe (ListOffsets MAX_TIMESTAMP) failed");
                return;
            }
        };
        for topic in response.topics {
            for p in topic.partitions {
                let tp = TopicPartition::new(topic.name.as_str(), p.partition_index);
                if !self.contains(&tp) {
                    continue;
                }
                let lag_ms = if p.error_code != 0 {
                    -1
                } else {
                    let Some(owned) = ctx.partition(&tp) else {
                        continue;
                    };
                    let Ok(log) = owned.read().await else {
                        continue;
                    };
                    lag_ms(
                        p.timestamp,
                        p.offset,
                        log.log_end_offset(),
                        log.max_timestamp_and_offset(),
                    )
                };
                self.with_state(&tp, |s| s.status.lag_ms = lag_ms);
            }
        }
    }
}

/// The source's newest record timestamp minus the newest mirrored one, in ms; 0 when
/// the record carrying the source's newest timestamp is already in the local log (or
/// the source is empty), -1 when it cannot be told.
pub(crate) fn lag_ms(
    source_timestamp: i64,
    source_offset: i64,
    local_end: Offset,
    local_newest: Option<(i64, Offset)>,
) -> i64 {
    if source_offset < 0 {
        return 0;
    }
    if local_end.0 > source_offset {
        return 0;
    }
    if source_timestamp < 0 {
        return -1;
    }
    match local_newest {
        Some((ts, _)) if ts >= 0 => source_timestamp.saturating_sub(ts).max(0),
        _ => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_the_timestamp_gap_until_the_newest_record_is_mirrored() {
        // Empty source: nothing to lag behind.
        assert_eq!(lag_ms(-1, -1, Offset(0), None), 0);
        // The source's newest record (offset 9) is mirrored: no lag.
        assert_eq!(lag_ms(5_000, 9, Offset(10), Some((4_000, Offset(3)))), 0);
        // Behind: source newest at 5 s, ours at 3.5 s.
        assert_eq!(
            lag_ms(5_000, 20, Offset(10), Some((3_500, Offset(9)))),
            1_500
        );
        // Out-of-order timestamps never make the lag negative.
        assert_eq!(lag_ms(5_000, 20, Offset(10), Some((6_000, Offset(9)))), 0);
        // Nothing mirrored yet, or no timestamp from the source: unknown.
        assert_eq!(lag_ms(5_000, 20, Offset(0), None), -1);
        assert_eq!(lag_ms(-1, 20, Offset(10), Some((1, Offset(9)))), -1);
    }
}
