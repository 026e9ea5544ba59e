//! Fetch (1), consumer form. Stored batches go out as they are (the log's `Bytes`),
//! bounded by the high watermark (read_uncommitted) or the last stable offset
//! (read_committed, with the aborted transactions of the range). MinBytes/MaxWaitMs
//! long-poll: the fetch sleeps until the high watermark of one of its partitions moves
//! (each `Partition` signals its own; an append elsewhere wakes no one here) or the
//! wait is over, and reads again. A fetch that names the epoch of its last fetched batch
//! (`LastFetchedEpoch`, v12+) is answered with `DivergingEpoch` instead of records when
//! this log's history for that epoch ends before the fetch offset, and a stale or future
//! `CurrentLeaderEpoch` (v9+) is fenced, as Kafka's `Partition.readRecords` does; mirror
//! fetchers downstream rely on both to follow truncations here. Twinlog does
//! not create incremental fetch sessions: it answers session id 0, which tells clients
//! to keep sending full requests (a correct sessionless answer).

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};
use kafka_protocol::ResponseError;

use crate::api::errors::log_error_code;
use crate::api::topic_name;
use crate::shard::{ShardCtx, ShardReply, ShardRequest};
use crate::types::{LeaderEpoch, Offset, TopicPartition};
use crate::wire::batch::{frame_size, layout};

/// A long-polling fetch re-reads at least this often even without a signal (a safety
/// net for a partition deleted and re-created under it; appends wake it at once).
const LONG_POLL_MAX_SLEEP: Duration = Duration::from_secs(1);

/// Long polls of at least [`LONG_POLL_GRID_MIN_WAIT`] end on a grid of this step, so
/// that the idle polls of many connections expire in one executor wake-up instead of one
/// each (a wake-up costs more than the poll: the reactor's sleep, its membarrier and a
/// context switch). At most this much later than `max_wait_ms`.
const LONG_POLL_GRID: Duration = Duration::from_millis(5);
const LONG_POLL_GRID_MIN_WAIT: Duration = Duration::from_millis(100);

/// When a Fetch received at `started` with `max_wait` answers if nothing arrives: the
/// wait, rounded up to [`LONG_POLL_GRID`] for long polls.
fn poll_deadline(started: Instant, max_wait: Duration) -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let due = started + max_wait;
    if max_wait < LONG_POLL_GRID_MIN_WAIT {
        return due;
    }
    let origin = *ORIGIN.get_or_init(Instant::now);
    let since = due.saturating_duration_since(origin).as_nanos();
    let step = LONG_POLL_GRID.as_nanos();
    let up = (step - since % step) % step;
    due + Duration::from_nanos(up as u64)
}

#[derive(Debug, Clone, Default)]
pub struct PartitionFetchResult {
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub records: Bytes,
    pub aborted: Option<Vec<(i64, i64)>>,
    /// The fetcher's history diverges from this log's: (epoch, end offset) of this
    /// log's answer for its last fetched epoch.
    pub diverging: Option<(i32, i64)>,
}

/// Kafka's divergence check for a fetch at `fetch_offset` whose previous batch had
/// `last_fetched_epoch`; `for_epoch` is this log's (epoch, end offset) for it.
/// `Ok(Some)`: answer DivergingEpoch; `Err`: OFFSET_OUT_OF_RANGE.
fn diverging(
    fetch_offset: i64,
    last_fetched_epoch: i32,
    for_epoch: (i32, i64),
    log_start: i64,
) -> Result<Option<(i32, i64)>, ResponseError> {
    let (epoch, end) = for_epoch;
    if epoch < 0 || end < 0 || fetch_offset < log_start {
        return Err(ResponseError::OffsetOutOfRange);
    }
    Ok((epoch < last_fetched_epoch || end < fetch_offset).then_some((epoch, end)))
}

/// Reads one partition on its owning shard, with a listener for its next high-watermark
/// move, taken before the read.
pub(crate) async fn read_and_listen(
    ctx: Rc<ShardCtx>,
    p: FetchPartition,
    read_committed: bool,
) -> (PartitionFetchResult, Option<event_listener::EventListener>) {
    let listener = ctx.partition(&p.tp).map(|p| p.listen());
    let result = read_on_owner(ctx, p, read_committed).await;
    (result, listener)
}

/// One partition of a Fetch, as its owning shard reads it.
#[derive(Debug, Clone)]
pub struct FetchPartition {
    pub tp: TopicPartition,
    pub fetch_offset: i64,
    /// Fetch v9+: the leader epoch the fetcher believes the partition has (-1: none).
    pub current_leader_epoch: i32,
    /// Fetch v12+: the epoch of the fetcher's last batch (-1: none).
    pub last_fetched_epoch: i32,
    pub max_bytes: usize,
    /// The follower fetching (its node id), or -1 for a consumer.
    pub replica: i32,
}

/// Reads one partition on its owning shard.
async fn read_on_owner(
    ctx: Rc<ShardCtx>,
    wanted: FetchPartition,
    read_committed: bool,
) -> PartitionFetchResult {
    let FetchPartition {
        tp,
        fetch_offset,
        current_leader_epoch,
        last_fetched_epoch,
        max_bytes,
        replica,
    } = wanted;
    let Some(partition) = ctx.partition(&tp).filter(|p| p.is_leader()) else {
        return PartitionFetchResult {
            error_code: ResponseError::NotLeaderOrFollower.code(),
            ..Default::default()
        };
    };
    if let Err(fenced) = partition.check_current_epoch(current_leader_epoch) {
        return PartitionFetchResult {
            error_code: fenced.code(),
            ..Default::default()
        };
    }
    if replica >= 0 {
        // A follower's position is what it asks for: everything below is on its log.
        crate::fetcher::replica::on_replica_fetch(&ctx, &partition, replica, fetch_offset).await;
    }
    let Ok(log) = partition.read().await else {
        return PartitionFetchResult {
            error_code: ResponseError::NotLeaderOrFollower.code(),
            ..Default::default()
        };
    };
    let hw = log.high_watermark();
    let lso = log.last_stable_offset();
    let mut out = PartitionFetchResult {
        error_code: 0,
        high_watermark: hw.0,
        last_stable_offset: lso.0,
        log_start_offset: log.log_start_offset().0,
        records: Bytes::new(),
        aborted: None,
        diverging: None,
    };
    if last_fetched_epoch >= 0 {
        let (e, o) = log.end_offset_for_epoch(LeaderEpoch(last_fetched_epoch));
        match diverging(
            fetch_offset,
            last_fetched_epoch,
            (e.0, o.0),
            log.log_start_offset().0,
        ) {
            Ok(None) => {}
            Ok(Some(at)) => {
                out.diverging = Some(at);
                return out;
            }
            Err(e) => {
                out.error_code = e.code();
                return out;
            }
        }
    }
    // A follower outside the ISR of a partition this leader throttles gets nothing
    // while this shard's budget is spent (Kafka's leader replication quota).
    let throttle = (replica >= 0)
        .then(|| {
            use crate::fetcher::throttle::{rate, Side};
            let image = ctx.metadata.load();
            rate(
                &image,
                &partition,
                replica,
                Side::Leader,
                ctx.router.shard_count(),
            )
        })
        .flatten();
    let now = std::time::Instant::now();
    let quota = &ctx.replication_quotas.0;
    if throttle.is_some_and(|rate| !quota.allows(rate, now)) {
        return out;
    }
    // Followers read up to the log end (what makes the high watermark move); consumers
    // up to the high watermark, or the last stable offset.
    let upper = if replica >= 0 {
        log.log_end_offset()
    } else if read_committed {
        lso
    } else {
        hw
    };
    let offset = Offset(fetch_offset);
    if offset < log.log_start_offset() || offset > log.log_end_offset() {
        out.error_code = ResponseError::OffsetOutOfRange.code();
        return out;
    }
    if offset >= upper || max_bytes == 0 {
        if read_committed {
            out.aborted = Some(Vec::new());
        }
        return out;
    }
    match log.read(offset, max_bytes).await {
        Ok(data) => {
            let (records, end) = cut_at(data.records, upper);
            if read_committed {
                let aborted = log
                    .aborted_transactions(offset, end)
                    .into_iter()
                    .map(|t| (t.producer_id.0, t.first_offset.0))
                    .collect();
                out.aborted = Some(aborted);
            }
            if let Some(rate) = throttle {
                quota.record(records.len(), rate, now);
            }
            out.records = records;
        }
        Err(e) => {
            tracing::warn!(%tp, error = %e, "fetch read failed");
            out.error_code = log_error_code(&e);
        }
    }
    out
}

/// Keeps only whole batches that start below `upper`; returns them and the offset after
/// the last one kept.
fn cut_at(records: Bytes, upper: Offset) -> (Bytes, Offset) {
    let mut at = 0usize;
    let mut end = Offset(0);
    while at + layout::HEADER_SIZE <= records.len() {
        let Ok(size) = frame_size(&records[at..], at as u64) else {
            break;
        };
        let base = i64::from_be_bytes(records[at..at + 8].try_into().unwrap_or([0; 8]));
        if base >= upper.0 {
            break;
        }
        let delta = i32::from_be_bytes(
            records[at + layout::LAST_OFFSET_DELTA..at + layout::LAST_OFFSET_DELTA + 4]
                .try_into()
                .unwrap_or([0; 4]),
        );
        end = Offset(base + i64::from(delta) + 1);
        at += size;
    }
    (records.slice(..at), end)
}

/// A partition of the request and the shard that owns it.
#[derive(Debug, Clone)]
struct Wanted {
    shard: usize,
    partition: FetchPartition,
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    listener: &str,
    request: FetchRequest,
    version: i16,
) -> FetchResponse {
    let started = Instant::now();
    let image = ctx.metadata.load();
    let read_committed = request.isolation_level == 1;
    let replica = if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let min_bytes = request.min_bytes.max(0) as usize;
    let max_bytes = if request.max_bytes <= 0 {
        usize::MAX
    } else {
        request.max_bytes as usize
    };

    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    // Each response topic's name (for the leader look-ups of KIP-951).
    let mut names: Vec<String> = Vec::new();
    let mut wanted: Vec<Wanted> = Vec::new();
    // Results slots, in request order: (topic index, partition index in topic).
    let mut slots: Vec<(usize, usize, Option<PartitionFetchResult>)> = Vec::new();
    for t in request.topics {
        let (name, resolved) = if version >= 13 {
            match image.topic_by_id(t.topic_id) {
                Some(ti) => (ti.name.clone(), true),
                None => (String::new(), false),
            }
        } else {
            let n = t.topic.0.to_string();
            let found = image.topic(&n).is_some();
            (n, found)
        };
        let topic_index = topics.len();
        names.push(name.clone());
        let mut resp = FetchableTopicResponse::default();
        if version >= 13 {
            resp.topic_id = t.topic_id;
        } else {
            resp.topic = topic_name(&name);
        }
        for p in t.partitions {
            let pi = resp.partitions.len();
            resp.partitions
                .push(PartitionData::default().with_partition_index(p.partition));
            let tp = TopicPartition::new(name.clone(), p.partition);
            let owner = if resolved {
                image.partition(&tp).map(|pim| pim.shard)
            } else {
                None
            };
            match owner {
                Some(shard) => {
                    slots.push((topic_index, pi, None));
                    wanted.push(Wanted {
                        shard,
                        partition: FetchPartition {
                            tp,
                            fetch_offset: p.fetch_offset,
                            current_leader_epoch: if version >= 9 {
                                p.current_leader_epoch
                            } else {
                                -1
                            },
                            last_fetched_epoch: if version >= 12 {
                                p.last_fetched_epoch
                            } else {
                                -1
                            },
                            max_bytes: p.partition_max_bytes.max(0) as usize,
                            replica,
                        },
                    });
                }
                None => {
                    let code = if version >= 13 && !resolved {
                        ResponseError::UnknownTopicId.code()
                    } else {
                        ResponseError::UnknownTopicOrPartition.code()
                    };
                    slots.push((
                        topic_index,
                        pi,
                        Some(PartitionFetchResult {
                            error_code: code,
                            ..Default::default()
                        }),
                    ));
                }
            }
        }
        topics.push(resp);
    }

    let deadline = poll_deadline(started, max_wait);
    let (mut results, mut listeners) = read_all(ctx, &wanted, read_committed).await;
    loop {
        let total: usize = results.iter().map(|r| r.records.len()).sum();
        let any_error = results
            .iter()
            .any(|r| r.error_code != 0 || r.diverging.is_some());
        let remaining = deadline.saturating_duration_since(Instant::now());
        if total >= min_bytes.max(1) || any_error || remaining.is_zero() {
            break;
        }
        // Wait for one of these partitions to move (or the deadline), then read again.
        let sleep = async {
            glommio::timer::sleep(remaining.min(LONG_POLL_MAX_SLEEP)).await;
            false
        };
        let woken = if listeners.is_empty() {
            sleep.await
        } else {
            futures_lite::future::or(
                async {
                    futures::future::select_all(listeners).await;
                    true
                },
                sleep,
            )
            .await
        };
        // A consumer's poll that nothing woke by its deadline answers with what it read:
        // every change to a partition's log end, high watermark, log start or leadership
        // wakes its listener, and a new image (a deleted topic, a moved leader) reads
        // again. A follower reads again: the read records its position.
        let unchanged = !woken && replica < 0 && Arc::ptr_eq(&image, &ctx.metadata.load());
        if unchanged && Instant::now() >= deadline {
            break;
        }
        (results, listeners) = read_all(ctx, &wanted, read_committed).await;
    }

    // Enforce the response-wide max_bytes in request order: the first non-empty
    // partition always keeps its data, later ones are dropped once the budget is spent.
    let mut budget = max_bytes;
    let mut first = true;
    for r in &mut results {
        if r.records.is_empty() {
            continue;
        }
        if !first && r.records.len() > budget {
            r.records = Bytes::new();
            continue;
        }
        budget = budget.saturating_sub(r.records.len());
        first = false;
    }

    let mut fetched = results.into_iter();
    // KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the leader (and, v16+, where it is).
    let mut endpoints: std::collections::BTreeSet<i32> = Default::default();
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    for (topic_index, pi, preset) in slots {
        let r = match preset {
            Some(r) => r,
            None => fetched.next().unwrap_or_default(),
        };
        let topic_name = names[topic_index].clone();
        let data = &mut topics[topic_index].partitions[pi];
        if r.error_code == not_leader && version >= 12 {
            let tp = TopicPartition::new(topic_name, data.partition_index);
            if let Some(pim) = image.partition(&tp).filter(|p| p.leader >= 0) {
                data.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(pim.leader))
                    .with_leader_epoch(pim.leader_epoch);
                endpoints.insert(pim.leader);
            }
        }
        data.error_code = r.error_code;
        data.high_watermark = r.high_watermark;
        data.last_stable_offset = r.last_stable_offset;
        if version >= 5 {
            data.log_start_offset = r.log_start_offset;
        }
        if let (Some((epoch, end)), true) = (r.diverging, version >= 12) {
            data.diverging_epoch = EpochEndOffset::default()
                .with_epoch(epoch)
                .with_end_offset(end);
        }
        data.aborted_transactions = r.aborted.map(|v| {
            v.into_iter()
                .map(|(pid, first)| {
                    AbortedTransaction::default()
                        .with_producer_id(ProducerId(pid))
                        .with_first_offset(first)
                })
                .collect()
        });
        data.records = Some(r.records);
    }
    let mut resp = FetchResponse::default().with_responses(topics);
    if version >= 16 {
        resp.node_endpoints = image
            .endpoints(endpoints, listener)
            .into_iter()
            .map(|(id, host, port, rack)| {
                NodeEndpoint::default()
                    .with_node_id(BrokerId(id))
                    .with_host(crate::api::str_bytes(host))
                    .with_port(port)
                    .with_rack(rack.map(crate::api::str_bytes))
            })
            .collect();
    }
    if version >= 7 && request.session_id != 0 {
        resp.error_code = ResponseError::FetchSessionIdNotFound.code();
        resp.responses.clear();
    }
    resp
}

/// Reads every wanted partition, one job per owning shard, in parallel across shards and
/// within each.
async fn read_all(
    ctx: &Rc<ShardCtx>,
    wanted: &[Wanted],
    read_committed: bool,
) -> (
    Vec<PartitionFetchResult>,
    Vec<event_listener::EventListener>,
) {
    let mut by_shard: std::collections::BTreeMap<usize, Vec<(usize, FetchPartition)>> =
        Default::default();
    for (i, w) in wanted.iter().enumerate() {
        by_shard
            .entry(w.shard)
            .or_default()
            .push((i, w.partition.clone()));
    }
    let jobs = by_shard.into_iter().map(|(shard, work)| {
        let ctx = Rc::clone(ctx);
        async move {
            let (idx, partitions): (Vec<usize>, Vec<FetchPartition>) = work.into_iter().unzip();
            let request = ShardRequest::Fetch {
                partitions,
                read_committed,
            };
            let out = match ctx.ask(shard, request).await {
                Ok(ShardReply::Fetched(out)) => out,
                _ => idx
                    .iter()
                    .map(|_| {
                        let gone = PartitionFetchResult {
                            error_code: ResponseError::NotLeaderOrFollower.code(),
                            ..Default::default()
                        };
                        (gone, None)
                    })
                    .collect(),
            };
            idx.into_iter().zip(out).collect::<Vec<_>>()
        }
    });
    let mut all: Vec<(
        usize,
        (PartitionFetchResult, Option<event_listener::EventListener>),
    )> = futures::future::join_all(jobs)
        .await
        .into_iter()
        .flatten()
        .collect();
    all.sort_by_key(|(i, _)| *i);
    let mut listeners = Vec::with_capacity(all.len());
    let results = all
        .into_iter()
        .map(|(_, (r, l))| {
            listeners.extend(l);
            r
        })
        .collect();
    (results, listeners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_poll_ends_on_the_grid_and_never_before_its_wait() {
        let now = Instant::now();
        let wait = Duration::from_millis(500);
        let mut deadlines = std::collections::BTreeSet::new();
        for i in 0..1000u64 {
            let started = now + Duration::from_micros(i * 37);
            let d = poll_deadline(started, wait);
            assert!(d >= started + wait, "{i}: before the wait");
            assert!(d < started + wait + LONG_POLL_GRID, "{i}: a step late");
            deadlines.insert(d);
        }
        // 37 ms of arrivals share 8 or 9 deadlines, not 1,000.
        assert!(deadlines.len() <= 9, "{}", deadlines.len());
        // A short wait (and no wait) is kept as asked.
        for ms in [0, 1, 99] {
            let wait = Duration::from_millis(ms);
            assert_eq!(poll_deadline(now, wait), now + wait);
        }
    }

    #[test]
    fn a_fetch_whose_last_epoch_ends_earlier_here_is_told_where() {
        // Our epoch 4 ends at 500 (epoch 9 follows); the fetcher's last batch was epoch 4
        // and it fetches at 550: its records 500..550 are not ours.
        assert_eq!(diverging(550, 4, (4, 500), 0), Ok(Some((4, 500))));
        // It fetches at our epoch 4's end or before: no divergence.
        assert_eq!(diverging(500, 4, (4, 500), 0), Ok(None));
        assert_eq!(diverging(480, 4, (4, 500), 0), Ok(None));
        // Its epoch 6 is unknown here: our largest epoch below, 4, ends at 500.
        assert_eq!(diverging(450, 6, (4, 500), 0), Ok(Some((4, 500))));
    }

    #[test]
    fn an_epoch_this_log_cannot_place_is_out_of_range() {
        assert_eq!(
            diverging(10, 7, (-1, -1), 0),
            Err(ResponseError::OffsetOutOfRange)
        );
        assert_eq!(
            diverging(10, 3, (3, 100), 20),
            Err(ResponseError::OffsetOutOfRange)
        );
    }
}
