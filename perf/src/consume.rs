//! Consumers with assigned partitions: one connection per consumer and partition leader,
//! Fetch after Fetch (no fetch sessions), counting the record batches that come back
//! (their size as stored: the bytes a broker serves). For end-to-end runs each record's
//! send-time stamp is read back to measure latency from produce to consume.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dataplane::client::{ClientError, ConnectionConfig, KafkaConnection};
use dataplane::wire::batch::Compression;
use dataplane::wire::records::decode_records;
use dataplane::wire::{BatchError, BatchIter, RecordBatch};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use crate::admin::TopicLayout;
use crate::batch::read_stamp_us;
use crate::runtime::{Counters, ThreadCtx};
use crate::util::{connect_for, error_name, wall_now_us};

/// Fetch versions spoken: v4 added isolation levels; v13 names topics by id.
const FETCH_VERSION_MIN: i16 = 4;
const FETCH_VERSION_MAX: i16 = 12;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const RECONNECT_BACKOFF: Duration = Duration::from_millis(200);
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// A stamp further from the consume time than this is not one of ours: fall back to
/// the record timestamp.
const STAMP_PLAUSIBLE_US: i64 = 3_600_000_000;

/// What every consumer of a run shares.
#[derive(Debug)]
pub struct ConsumeConfig {
    pub topic: String,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub check_crc: bool,
    /// Decode records and measure end-to-end latency from their stamps.
    pub e2e: bool,
    /// Stop once the consumers together have this many records.
    pub records_max: Option<u64>,
    /// End to end: after the deadline, go on until every produced record has arrived,
    /// but at most this long.
    pub drain: Option<Duration>,
    pub client_id: String,
}

/// One consumer's partitions on one leader.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub addr: String,
    /// (partition, first offset to fetch).
    pub partitions: Vec<(i32, i64)>,
    /// Stop each partition at this offset (`--to-end`): partition -> end offset.
    pub ends: Option<BTreeMap<i32, i64>>,
}

/// Consumers for `partitions`: dealt round robin over `consumers`, then one spec per
/// (consumer, leader).
pub fn plan_consumers(
    layout: &TopicLayout,
    partitions: &[i32],
    consumers: usize,
    starts: &BTreeMap<i32, i64>,
    ends: Option<&BTreeMap<i32, i64>>,
) -> Vec<ConsumerSpec> {
    let consumers = consumers.clamp(1, partitions.len().max(1));
    let mut specs = Vec::new();
    for c in 0..consumers {
        let mut by_leader: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        for p in partitions.iter().skip(c).step_by(consumers) {
            if let Some(addr) = layout.leaders.get(p) {
                let start = starts.get(p).copied().unwrap_or(0);
                by_leader
                    .entry(addr.as_str())
                    .or_default()
                    .push((*p, start));
            }
        }
        for (addr, parts) in by_leader {
            specs.push(ConsumerSpec {
                addr: addr.to_string(),
                ends: ends.map(|e| {
                    parts
                        .iter()
                        .map(|(p, _)| (*p, e.get(p).copied().unwrap_or(0)))
                        .collect()
                }),
                partitions: parts,
            });
        }
    }
    specs
}

async fn connect(addr: &str, cfg: &ConsumeConfig) -> Result<(KafkaConnection, i16), ClientError> {
    let config = ConnectionConfig {
        client_id: cfg.client_id.clone(),
        connect_timeout: CONNECT_TIMEOUT,
        // A Fetch may wait max_wait_ms at the broker before it answers.
        request_timeout: Duration::from_millis(cfg.max_wait_ms.max(0) as u64)
            + Duration::from_secs(30),
        response_bytes_max: (cfg.max_bytes.max(0) as usize).max(1 << 20) + (16 << 20),
        ..Default::default()
    };
    connect_for::<FetchRequest>(addr, &config, (FETCH_VERSION_MIN, FETCH_VERSION_MAX)).await
}

/// Runs one consumer until the deadline (or its drain), the record limit, the ends of
/// its partitions, or the run's stop flag.
pub async fn run_consumer(spec: ConsumerSpec, cfg: &ConsumeConfig, ctx: &ThreadCtx) {
    let shared = &ctx.shared;
    let clock = shared.clock;
    let counters: &Counters = &shared.consumed;
    let mut offsets: Vec<i64> = spec.partitions.iter().map(|(_, o)| *o).collect();
    let ends: Vec<Option<i64>> = spec
        .partitions
        .iter()
        .map(|(p, _)| spec.ends.as_ref().and_then(|e| e.get(p).copied()))
        .collect();
    let mut conn: Option<(KafkaConnection, i16)> = None;
    loop {
        if shared.stopped() {
            break;
        }
        if cfg.records_max.is_some_and(|max| counters.records() >= max) {
            break;
        }
        let open: Vec<usize> = (0..offsets.len())
            .filter(|i| ends[*i].is_none_or(|end| offsets[*i] < end))
            .collect();
        if open.is_empty() {
            break;
        }
        let now = Instant::now();
        if now >= clock.deadline {
            // Every producer has had its last answer, and all it wrote has arrived.
            let drained = shared.lanes_running.load(Ordering::SeqCst) == 0
                && counters.records() >= shared.produced.records();
            match cfg.drain {
                Some(d) if now < clock.deadline + d && !drained => {}
                _ => break,
            }
        }
        if conn.is_none() {
            match connect(&spec.addr, cfg).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    ctx.error(counters, format!("connect: {e}"));
                    glommio::timer::sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            }
        }
        let Some((c, version)) = conn.as_mut() else {
            continue;
        };
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(cfg.max_wait_ms)
            .with_min_bytes(cfg.min_bytes)
            .with_max_bytes(cfg.max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(cfg.topic.clone())))
                .with_partitions(
                    open.iter()
                        .map(|i| {
                            FetchPartition::default()
                                .with_partition(spec.partitions[*i].0)
                                .with_current_leader_epoch(-1)
                                .with_fetch_offset(offsets[*i])
                                .with_last_fetched_epoch(-1)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(cfg.partition_max_bytes)
                        })
                        .collect(),
                )]);
        let sent_at = Instant::now();
        let response = match c.send(&request, *version).await {
            Ok(r) => r,
            Err(e) => {
                ctx.error(counters, format!("fetch: {e}"));
                conn = None;
                glommio::timer::sleep(RECONNECT_BACKOFF).await;
                continue;
            }
        };
        let arrived_at = Instant::now();
        ctx.stats
            .borrow_mut()
            .fetch_latency
            .saturating_record((arrived_at.duration_since(sent_at).as_micros() as u64).max(1));
        if response.error_code != 0 {
            ctx.error(
                counters,
                format!("fetch: {}", error_name(response.error_code)),
            );
            glommio::timer::sleep(RECONNECT_BACKOFF).await;
            continue;
        }
        let arrived_wall_us = wall_now_us();
        let (mut records, mut bytes) = (0u64, 0u64);
        for t in &response.responses {
            for p in &t.partitions {
                let Some(i) = spec
                    .partitions
                    .iter()
                    .position(|(q, _)| *q == p.partition_index)
                else {
                    continue;
                };
                if p.error_code != 0 {
                    ctx.error(counters, format!("fetch: {}", error_name(p.error_code)));
                    if p.error_code == OFFSET_OUT_OF_RANGE && p.log_start_offset >= 0 {
                        offsets[i] = p.log_start_offset;
                    }
                    continue;
                }
                let data: Bytes = p.records.clone().unwrap_or_default();
                for batch in BatchIter::new(data, 0, cfg.check_crc) {
                    let batch = match batch {
                        Ok(b) => b,
                        // A fetch may end with part of a batch: fetch it again next time.
                        Err(BatchError::Truncated { .. }) => break,
                        Err(e) => {
                            ctx.error(counters, format!("fetch: bad batch: {e}"));
                            break;
                        }
                    };
                    let from = offsets[i];
                    if batch.next_offset().0 <= from {
                        continue;
                    }
                    if !batch.is_control() {
                        let skipped = (from - batch.base_offset().0).max(0);
                        let count = (i64::from(batch.last_offset_delta()) + 1 - skipped).max(0);
                        records += count as u64;
                        bytes += batch.size_in_bytes() as u64;
                        if cfg.e2e {
                            e2e_latencies(ctx, &batch, from, arrived_wall_us);
                        }
                    }
                    offsets[i] = batch.next_offset().0;
                }
            }
        }
        counters.add(records, bytes);
    }
}

/// Records the end-to-end latency of every record of `batch` at or after offset `from`.
fn e2e_latencies(ctx: &ThreadCtx, batch: &RecordBatch, from: i64, arrived_wall_us: i64) {
    let base = batch.base_offset().0;
    let mut stamps: Vec<(i64, Option<i64>)> = Vec::new(); // (timestamp ms, stamp µs)
    if batch.compression() == Compression::None {
        match decode_records(&batch.records(), batch.record_count()) {
            Ok(recs) => {
                for r in recs {
                    if base + i64::from(r.offset_delta) >= from {
                        stamps.push((
                            batch.base_timestamp() + r.timestamp_delta,
                            r.value.as_deref().and_then(read_stamp_us),
                        ));
                    }
                }
            }
            Err(e) => {
                ctx.error(&ctx.shared.consumed, format!("e2e: bad records: {e}"));
                return;
            }
        }
    } else {
        let mut buf = batch.as_bytes().clone();
        match RecordBatchDecoder::decode(&mut buf) {
            Ok(set) => {
                for r in set.records {
                    if r.offset >= from {
                        stamps.push((r.timestamp, r.value.as_deref().and_then(read_stamp_us)));
                    }
                }
            }
            Err(e) => {
                ctx.error(&ctx.shared.consumed, format!("e2e: cannot decode: {e}"));
                return;
            }
        }
    }
    let mut stats = ctx.stats.borrow_mut();
    for (timestamp_ms, stamp_us) in stamps {
        let latency_us = match stamp_us {
            Some(s) if (0..STAMP_PLAUSIBLE_US).contains(&(arrived_wall_us - s)) => {
                arrived_wall_us - s
            }
            _ => (arrived_wall_us / 1000 - timestamp_ms) * 1000,
        };
        stats
            .e2e_latency
            .saturating_record(latency_us.max(1) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumers_get_partitions_round_robin_per_leader() {
        let layout = TopicLayout {
            topic: "t".into(),
            leaders: (0..6).map(|p| (p, format!("h:{}", p % 2))).collect(),
        };
        let starts: BTreeMap<i32, i64> = (0..6).map(|p| (p, 10 * i64::from(p))).collect();
        let parts: Vec<i32> = (0..6).collect();
        let specs = plan_consumers(&layout, &parts, 2, &starts, Some(&starts));
        // Consumer 0: 0, 2, 4 (all on h:0); consumer 1: 1, 3, 5 (all on h:1).
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].partitions, vec![(0, 0), (2, 20), (4, 40)]);
        assert_eq!(specs[1].addr, "h:1");
        assert_eq!(specs[1].ends.as_ref().map(|e| e[&3]), Some(30));
        // More consumers than partitions: one each.
        assert_eq!(plan_consumers(&layout, &[1], 4, &starts, None).len(), 1);
    }
}
