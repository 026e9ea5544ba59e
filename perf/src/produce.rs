//! Producer lanes. A lane is one connection to one partition leader, owning a fixed set
//! of partitions, with one request in flight at a time (the project's client does one
//! request per connection); `--in-flight N` gives a producer up to N lanes per broker.
//! Because a partition belongs to exactly one lane, its batches go out in order, which is
//! what idempotent sequence numbers need. `--pipeline N` keeps up to N requests in
//! flight on each lane's connection instead (closed loop only), as Kafka's producer does
//! with `max.in.flight.requests.per.connection`: the way to feed one partition small
//! batches as fast as a broker takes them.
//!
//! Closed loop (no `--rate`): each request carries one full batch per partition of the
//! lane, built when the previous one is acknowledged; latency is the request's round
//! trip, counted once per record.
//!
//! Open loop (`--rate R`): record `n` of a lane is *due* at `t0 + n / rate`. A request
//! goes out when a batch's worth of records is due, or when the oldest due record has
//! waited `--linger-ms`. Latency of each record is measured from its due time, not from
//! when it was actually sent, so a stalled broker shows up as the queueing delay it
//! causes instead of being hidden (coordinated omission).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use dataplane::client::{
    check_correlation, decode_response, encode_request, ClientError, ConnectionConfig,
    KafkaConnection,
};
use dataplane::net::{ConnectionError, FrameReader};
use futures_lite::AsyncWriteExt;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::admin::TopicLayout;
use crate::batch::{
    encode_batch, key_bytes, partition_for_key, BatchProducer, Codec, Payload, RecordRef,
    BATCH_HEADER_BYTES,
};
use crate::runtime::{Counters, ThreadCtx};
use crate::util::{connect_for, error_name};

/// Produce versions spoken: v3 introduced record batches v2; v13 names topics by id.
const PRODUCE_VERSION_MIN: i16 = 3;
const PRODUCE_VERSION_MAX: i16 = 12;
/// The broker's time limit for acks=-1, and the client's for the whole request.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const RECONNECT_BACKOFF: Duration = Duration::from_millis(200);
/// A request that failed on its connection is sent again this many times at most (the
/// same batches with the same sequence numbers, which an idempotent broker dedups).
const SEND_ATTEMPTS_MAX: u32 = 3;
/// Open loop: the shortest sleep while waiting for records to come due.
const SLEEP_MIN: Duration = Duration::from_micros(50);
/// The largest Produce answer a pipelined lane reads.
const RESPONSE_BYTES_MAX: usize = 16 << 20;

/// What every lane of a produce workload shares.
#[derive(Debug)]
pub struct ProduceConfig {
    pub topic: String,
    /// All partitions of the topic (the keyed partitioner hashes over these).
    pub topic_partitions: i32,
    pub record_size: usize,
    /// `Some(size)`: records carry keys of `size` bytes drawn from `key_space` values,
    /// partitioned by murmur2 like Kafka's default partitioner.
    pub key_size: Option<usize>,
    pub key_space: u64,
    pub acks: i16,
    pub codec: Codec,
    /// Records per batch (from `--batch-size` bytes).
    pub batch_records: usize,
    pub linger: Duration,
    /// Requests in flight per connection (closed loop; 1: one at a time).
    pub pipeline: usize,
    pub client_id: String,
}

impl ProduceConfig {
    /// Key and value bytes of one record.
    pub fn payload_bytes(&self) -> u64 {
        (self.record_size + self.key_size.unwrap_or(0)) as u64
    }
}

/// One lane: a connection to `addr` producing to `partitions`.
#[derive(Debug, Clone)]
pub struct LaneSpec {
    pub addr: String,
    pub partitions: Vec<i32>,
    /// Records per second for this lane; `None`: as fast as acknowledgements allow.
    pub rate: Option<f64>,
    /// Stop after this many records.
    pub quota: Option<u64>,
    /// Idempotent producer id and epoch.
    pub producer: Option<(i64, i16)>,
}

/// How the records of a produce run are spread over producers and lanes.
#[derive(Debug, Clone)]
pub struct LanePlan {
    pub producers: usize,
    pub in_flight: usize,
    /// Total records per second over all producers.
    pub rate: Option<f64>,
    /// Total records over all producers.
    pub records: Option<u64>,
    /// One (id, epoch) per producer when idempotent.
    pub producer_ids: Option<Vec<(i64, i16)>>,
}

/// Lanes for `partitions` of `layout`: every producer writes to every partition; each
/// producer has up to `in_flight` lanes per leader, partitions dealt round robin.
pub fn plan_lanes(layout: &TopicLayout, partitions: &[i32], plan: &LanePlan) -> Vec<LaneSpec> {
    let mut by_leader: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
    for p in partitions {
        if let Some(addr) = layout.leaders.get(p) {
            by_leader.entry(addr.as_str()).or_default().push(*p);
        }
    }
    let mut lanes = Vec::new();
    for producer in 0..plan.producers.max(1) {
        for (addr, parts) in &by_leader {
            let n = plan.in_flight.clamp(1, parts.len());
            let mut groups = vec![Vec::new(); n];
            for (i, p) in parts.iter().enumerate() {
                groups[i % n].push(*p);
            }
            for group in groups {
                lanes.push(LaneSpec {
                    addr: addr.to_string(),
                    partitions: group,
                    rate: None,
                    quota: None,
                    producer: plan
                        .producer_ids
                        .as_ref()
                        .and_then(|ids| ids.get(producer).copied()),
                });
            }
        }
    }
    // Rate and quota in proportion to each lane's share of (producer, partition) pairs.
    let shares: u64 = lanes.iter().map(|l| l.partitions.len() as u64).sum();
    if let Some(rate) = plan.rate {
        for lane in &mut lanes {
            lane.rate = Some(rate * lane.partitions.len() as f64 / shares.max(1) as f64);
        }
    }
    if let Some(records) = plan.records {
        let mut given = 0u64;
        for lane in &mut lanes {
            let q = records * lane.partitions.len() as u64 / shares.max(1);
            lane.quota = Some(q);
            given += q;
        }
        for lane in lanes.iter_mut().take((records - given) as usize) {
            lane.quota = lane.quota.map(|q| q + 1);
        }
        lanes.retain(|l| l.quota != Some(0));
    }
    lanes
}

/// A lane's connection: a client connection, or for acks=0 a bare socket (the broker
/// does not answer acks=0 requests, so they cannot go through the client).
enum Link {
    Acked { conn: KafkaConnection, version: i16 },
    Fire(Pipe),
}

impl Link {
    async fn open(addr: &str, cfg: &ProduceConfig) -> Result<Link, ClientError> {
        let (conn, version) = negotiate(addr, cfg).await?;
        if cfg.acks != 0 {
            return Ok(Link::Acked { conn, version });
        }
        drop(conn);
        Ok(Link::Fire(Pipe::on(addr, version).await?))
    }

    /// Sends `req`; the response, or `None` for acks=0 (once the bytes are written).
    async fn send(
        &mut self,
        req: &ProduceRequest,
        client_id: &str,
    ) -> Result<Option<ProduceResponse>, ClientError> {
        match self {
            Link::Acked { conn, version } => conn.send(req, *version).await.map(Some),
            Link::Fire(pipe) => {
                let correlation_id = pipe.next_correlation_id();
                let frame = encode_request(req, pipe.version, correlation_id, client_id)?;
                pipe.write(&frame).await?;
                Ok(None)
            }
        }
    }
}

/// A client connection to `addr` and the Produce version it speaks.
async fn negotiate(addr: &str, cfg: &ProduceConfig) -> Result<(KafkaConnection, i16), ClientError> {
    let config = ConnectionConfig {
        client_id: cfg.client_id.clone(),
        connect_timeout: CONNECT_TIMEOUT,
        request_timeout: REQUEST_TIMEOUT,
        ..ConnectionConfig::default()
    };
    connect_for::<ProduceRequest>(addr, &config, (PRODUCE_VERSION_MIN, PRODUCE_VERSION_MAX)).await
}

/// One partition's batches in a request.
struct PartitionLoad {
    partition: i32,
    records: u64,
    bytes: u64,
    /// Record numbers, relative to the request's first, in this partition's batches.
    members: Vec<u32>,
}

/// Instant record `n` of a lane producing `rate` records per second is due.
fn due_at(t0: Instant, n: u64, rate: f64) -> Instant {
    t0 + Duration::from_secs_f64(n as f64 / rate)
}

/// A lane's state between requests.
struct Lane<'a> {
    spec: LaneSpec,
    cfg: &'a ProduceConfig,
    payload: &'a Payload,
    /// Keyed: (key, index into `spec.partitions`) for every key that lands on this lane.
    keys: Vec<(Vec<u8>, usize)>,
    /// Next sequence number per lane partition (idempotent).
    sequences: Vec<i32>,
    /// Keyless: the lane partition the next batch goes to (sticky partitioning).
    sticky: usize,
}

impl Lane<'_> {
    /// Builds the request for records `first..first + count`. Record `n` is stamped with
    /// its due time (`built_at` in the closed loop).
    fn build(
        &mut self,
        ctx: &ThreadCtx,
        first: u64,
        count: u64,
        built_at: Instant,
    ) -> Result<(ProduceRequest, Vec<PartitionLoad>), String> {
        let clock = ctx.shared.clock;
        let lane_partitions = self.spec.partitions.len();
        let batch_records = self.cfg.batch_records;
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); lane_partitions];
        if self.keys.is_empty() {
            let chunks = (count as usize).div_ceil(batch_records);
            for chunk in 0..chunks {
                let lp = (self.sticky + chunk) % lane_partitions;
                let from = chunk * batch_records;
                let to = ((chunk + 1) * batch_records).min(count as usize);
                groups[lp].extend(from as u32..to as u32);
            }
            self.sticky = (self.sticky + chunks) % lane_partitions;
        } else {
            for j in 0..count {
                let (_, lp) = &self.keys[self.key_index(first + j)];
                groups[*lp].push(j as u32);
            }
        }
        let estimate = count as usize * (self.cfg.payload_bytes() as usize + 16)
            + BATCH_HEADER_BYTES * lane_partitions;
        let mut buf = BytesMut::with_capacity(estimate);
        let mut loads = Vec::new();
        let mut partition_data = Vec::new();
        let mut records = Vec::with_capacity(batch_records);
        for (lp, members) in groups.into_iter().enumerate() {
            if members.is_empty() {
                continue;
            }
            for chunk in members.chunks(batch_records) {
                records.clear();
                for &j in chunk {
                    let n = first + u64::from(j);
                    let due = match self.spec.rate {
                        Some(rate) => due_at(clock.t0, n, rate),
                        None => built_at,
                    };
                    let stamp_us = clock.wall_us(due);
                    records.push(RecordRef {
                        timestamp_ms: stamp_us.div_euclid(1000),
                        key: if self.keys.is_empty() {
                            None
                        } else {
                            Some(self.keys[self.key_index(n)].0.as_slice())
                        },
                        stamp_us,
                        value: self.payload.value(n),
                    });
                }
                let producer = match self.spec.producer {
                    Some((producer_id, producer_epoch)) => {
                        let base_sequence = self.sequences[lp];
                        self.sequences[lp] = ((i64::from(base_sequence) + chunk.len() as i64)
                            % (i64::from(i32::MAX) + 1))
                            as i32;
                        BatchProducer {
                            producer_id,
                            producer_epoch,
                            base_sequence,
                        }
                    }
                    None => BatchProducer::NONE,
                };
                encode_batch(&mut buf, self.cfg.codec, producer, &records)?;
            }
            let bytes = buf.split().freeze();
            loads.push(PartitionLoad {
                partition: self.spec.partitions[lp],
                records: members.len() as u64,
                bytes: bytes.len() as u64,
                members,
            });
            partition_data.push(
                PartitionProduceData::default()
                    .with_index(self.spec.partitions[lp])
                    .with_records(Some(bytes)),
            );
        }
        let request = ProduceRequest::default()
            .with_transactional_id(None)
            .with_acks(self.cfg.acks)
            .with_timeout_ms(PRODUCE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(self.cfg.topic.clone())))
                .with_partition_data(partition_data)]);
        Ok((request, loads))
    }

    /// Which key record `n` carries: spread over the lane's keys by a multiplicative hash.
    fn key_index(&self, n: u64) -> usize {
        ((n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % self.keys.len() as u64) as usize
    }
}

/// Runs one lane until the deadline, its quota, or the run's stop flag.
pub async fn run_lane(spec: LaneSpec, cfg: &ProduceConfig, payload: &Payload, ctx: &ThreadCtx) {
    if cfg.pipeline > 1 && spec.rate.is_none() {
        return run_pipelined_lane(spec, cfg, payload, ctx).await;
    }
    let shared = &ctx.shared;
    let clock = shared.clock;
    let counters: &Counters = &shared.produced;
    if spec.partitions.is_empty() {
        return;
    }
    let keys = match cfg.key_size {
        Some(size) => {
            let keys: Vec<(Vec<u8>, usize)> = (0..cfg.key_space.max(1))
                .filter_map(|i| {
                    let key = key_bytes(i, size);
                    let p = partition_for_key(&key, cfg.topic_partitions);
                    let lp = spec.partitions.iter().position(|q| *q == p)?;
                    Some((key, lp))
                })
                .collect();
            if keys.is_empty() {
                ctx.error(
                    counters,
                    format!(
                        "no key of the {} in the key space hashes to partitions {:?}",
                        cfg.key_space, spec.partitions
                    ),
                );
                return;
            }
            keys
        }
        None => Vec::new(),
    };
    let batch_records = cfg.batch_records.max(1) as u64;
    let request_records_max = batch_records * spec.partitions.len() as u64;
    let mut lane = Lane {
        sequences: vec![0; spec.partitions.len()],
        spec,
        cfg,
        payload,
        keys,
        sticky: 0,
    };
    let mut link: Option<Link> = None;
    let mut sent: u64 = 0;
    loop {
        if shared.stopped() || Instant::now() >= clock.deadline {
            break;
        }
        let quota_left = lane.spec.quota.map_or(u64::MAX, |q| q - sent);
        if quota_left == 0 {
            break;
        }
        if link.is_none() {
            match Link::open(&lane.spec.addr, cfg).await {
                Ok(l) => link = Some(l),
                Err(e) => {
                    ctx.error(counters, format!("connect: {e}"));
                    glommio::timer::sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            }
        }
        let now = Instant::now();
        let take = match lane.spec.rate {
            None => request_records_max,
            Some(rate) => {
                let due = (now.duration_since(clock.t0).as_secs_f64() * rate) as u64 + 1;
                let pending = due.saturating_sub(sent);
                let oldest = due_at(clock.t0, sent, rate);
                if pending >= batch_records || (pending > 0 && now >= oldest + cfg.linger) {
                    pending.min(request_records_max)
                } else {
                    let full_at = due_at(clock.t0, sent + batch_records - 1, rate);
                    let wake = full_at.min(oldest + cfg.linger).min(clock.deadline);
                    glommio::timer::sleep(wake.saturating_duration_since(now).max(SLEEP_MIN)).await;
                    continue;
                }
            }
        }
        .min(quota_left);
        let built_at = Instant::now();
        let (request, loads) = match lane.build(ctx, sent, take, built_at) {
            Ok(r) => r,
            Err(e) => {
                ctx.error(counters, format!("building a request: {e}"));
                shared
                    .stop
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                break;
            }
        };
        let mut attempt = 0;
        let response = loop {
            attempt += 1;
            let Some(l) = link.as_mut() else {
                match Link::open(&lane.spec.addr, cfg).await {
                    Ok(l) => link = Some(l),
                    Err(e) => {
                        ctx.error(counters, format!("connect: {e}"));
                        if attempt >= SEND_ATTEMPTS_MAX {
                            break Err(());
                        }
                        glommio::timer::sleep(RECONNECT_BACKOFF).await;
                    }
                }
                continue;
            };
            match l.send(&request, &cfg.client_id).await {
                Ok(r) => break Ok(r),
                Err(e) => {
                    ctx.error(counters, format!("produce: {e}"));
                    link = None;
                    if attempt >= SEND_ATTEMPTS_MAX {
                        break Err(());
                    }
                    glommio::timer::sleep(RECONNECT_BACKOFF).await;
                }
            }
        };
        let acked_at = Instant::now();
        sent += take;
        let Ok(response) = response else {
            continue;
        };
        account(
            ctx,
            &lane.spec,
            &loads,
            response.as_ref(),
            built_at,
            sent - take,
            acked_at,
        );
    }
}

/// A request sent on a pipelined connection and not yet answered.
struct Pending {
    correlation_id: i32,
    loads: Vec<PartitionLoad>,
    built_at: Instant,
    first: u64,
}

/// A closed-loop lane with up to `cfg.pipeline` requests in flight on its one
/// connection. Each turn builds requests for every free slot and writes them with one
/// send, then reads what has arrived and accounts every whole answer in it. Answers come
/// back in request order (Kafka answers a connection's requests in order), each checked
/// against its correlation id. A failed connection counts an error for each request it
/// left unanswered and is opened again; those requests are not sent again, so an
/// idempotent lane stops instead (its sequence numbers would be broken).
async fn run_pipelined_lane(
    spec: LaneSpec,
    cfg: &ProduceConfig,
    payload: &Payload,
    ctx: &ThreadCtx,
) {
    let shared = &ctx.shared;
    let clock = shared.clock;
    let counters: &Counters = &shared.produced;
    if spec.partitions.is_empty() {
        return;
    }
    let request_records_max = cfg.batch_records.max(1) as u64 * spec.partitions.len() as u64;
    let mut lane = Lane {
        sequences: vec![0; spec.partitions.len()],
        spec,
        cfg,
        payload,
        keys: Vec::new(),
        sticky: 0,
    };
    let mut pipe: Option<Pipe> = None;
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut sent: u64 = 0;
    loop {
        let running = !shared.stopped() && Instant::now() < clock.deadline;
        let quota_left = lane.spec.quota.map_or(u64::MAX, |q| q - sent);
        let more = running && quota_left > 0;
        if pending.is_empty() && !more {
            break;
        }
        let p = match pipe.as_mut() {
            Some(p) => p,
            None => match Pipe::open(&lane.spec.addr, cfg).await {
                Ok(p) => pipe.insert(p),
                Err(e) => {
                    ctx.error(counters, format!("connect: {e}"));
                    glommio::timer::sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            },
        };
        let mut out = BytesMut::new();
        let mut quota_left = if more { quota_left } else { 0 };
        while quota_left > 0 && pending.len() < cfg.pipeline {
            let take = request_records_max.min(quota_left);
            let built_at = Instant::now();
            let built = lane
                .build(ctx, sent, take, built_at)
                .and_then(|(request, loads)| {
                    let correlation_id = p.next_correlation_id();
                    let frame = encode_request(&request, p.version, correlation_id, &cfg.client_id)
                        .map_err(|e| e.to_string())?;
                    Ok((correlation_id, frame, loads))
                });
            let (correlation_id, frame, loads) = match built {
                Ok(b) => b,
                Err(e) => {
                    ctx.error(counters, format!("building a request: {e}"));
                    shared
                        .stop
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
            };
            out.extend_from_slice(&frame);
            pending.push_back(Pending {
                correlation_id,
                loads,
                built_at,
                first: sent,
            });
            sent += take;
            quota_left -= take;
        }
        let turn = async {
            if !out.is_empty() {
                p.write(&out).await?;
            }
            p.read_answers(&mut pending, |done, response| {
                account(
                    ctx,
                    &lane.spec,
                    &done.loads,
                    Some(&response),
                    done.built_at,
                    done.first,
                    Instant::now(),
                );
            })
            .await
        };
        let Err(e) = turn.await else {
            continue;
        };
        ctx.error(counters, format!("produce: {e}"));
        for _ in &pending {
            ctx.error(
                counters,
                "produce: connection lost with the request in flight".into(),
            );
        }
        pending.clear();
        pipe = None;
        if lane.spec.producer.is_some() {
            break;
        }
        glommio::timer::sleep(RECONNECT_BACKOFF).await;
    }
}

/// A connection without the client: an acks=0 lane's (written only) or a pipelined
/// lane's (requests written as they are built, answers read in order through the
/// broker's own [`FrameReader`]).
struct Pipe {
    stream: glommio::net::TcpStream,
    addr: String,
    version: i16,
    correlation_id: i32,
    reader: FrameReader,
}

impl Pipe {
    async fn open(addr: &str, cfg: &ProduceConfig) -> Result<Pipe, ClientError> {
        let (conn, version) = negotiate(addr, cfg).await?;
        drop(conn);
        Pipe::on(addr, version).await
    }

    /// A bare socket to `addr` speaking Produce `version` (acks=0 and pipelined lanes:
    /// the client's connection does one request at a time).
    async fn on(addr: &str, version: i16) -> Result<Pipe, ClientError> {
        let io = |e: std::io::Error| ClientError::Io {
            addr: addr.to_string(),
            source: e,
        };
        let stream = glommio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| io(e.into()))?;
        stream.set_nodelay(true).map_err(|e| io(e.into()))?;
        Ok(Pipe {
            stream,
            addr: addr.to_string(),
            version,
            correlation_id: 0,
            reader: FrameReader::new(),
        })
    }

    fn next_correlation_id(&mut self) -> i32 {
        self.correlation_id = self.correlation_id.wrapping_add(1) & i32::MAX;
        self.correlation_id
    }

    fn io(&self, what: &'static str) -> impl FnOnce(std::io::Error) -> ClientError + '_ {
        move |e| ClientError::Io {
            addr: format!("{} ({what})", self.addr),
            source: e,
        }
    }

    async fn write(&mut self, frames: &[u8]) -> Result<(), ClientError> {
        let written = self.stream.write_all(frames).await;
        written.map_err(self.io("writing requests"))
    }

    /// Waits for the next answer, then hands it and every other whole answer already
    /// read to `answered` with the request each answers (the front of `pending`).
    async fn read_answers(
        &mut self,
        pending: &mut VecDeque<Pending>,
        mut answered: impl FnMut(Pending, ProduceResponse),
    ) -> Result<(), ClientError> {
        if pending.is_empty() {
            return Ok(());
        }
        let next = self.reader.next(&mut self.stream, RESPONSE_BYTES_MAX).await;
        let mut frame = match next {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                let eof = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
                return Err(self.io("reading answers")(eof));
            }
            Err(ConnectionError::Io(e)) => return Err(self.io("reading answers")(e)),
            Err(ConnectionError::FrameTooLarge { size, max }) => {
                return Err(ClientError::FrameTooLarge { size, max })
            }
            Err(e) => {
                return Err(ClientError::Protocol {
                    api_key: ProduceRequest::KEY,
                    message: e.to_string(),
                })
            }
        };
        while let Some(done) = pending.pop_front() {
            let (correlation_id, response) =
                decode_response::<ProduceRequest>(frame, self.version)?;
            check_correlation(done.correlation_id, correlation_id)?;
            answered(done, response);
            if pending.is_empty() {
                break;
            }
            match self.reader.next_buffered(RESPONSE_BYTES_MAX, |_| true) {
                Some(f) => frame = f,
                None => break,
            }
        }
        Ok(())
    }
}

/// Counts the acknowledged records of a request and their latencies.
fn account(
    ctx: &ThreadCtx,
    spec: &LaneSpec,
    loads: &[PartitionLoad],
    response: Option<&ProduceResponse>,
    built_at: Instant,
    first: u64,
    acked_at: Instant,
) {
    let clock = ctx.shared.clock;
    let counters = &ctx.shared.produced;
    let mut failed: Vec<(i32, i16)> = Vec::new();
    if let Some(resp) = response {
        for t in &resp.responses {
            for p in &t.partition_responses {
                if p.error_code != 0 {
                    failed.push((p.index, p.error_code));
                }
            }
        }
        for load in loads {
            let answered = resp
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .any(|p| p.index == load.partition);
            if !answered {
                failed.push((load.partition, -1));
            }
        }
    }
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut stats = ctx.stats.borrow_mut();
    for load in loads {
        if let Some((_, code)) = failed.iter().find(|(p, _)| *p == load.partition) {
            drop(stats);
            let what = if *code == -1 {
                "produce: partition missing from the response".to_string()
            } else {
                format!("produce: {}", error_name(*code))
            };
            ctx.error(counters, what);
            stats = ctx.stats.borrow_mut();
            continue;
        }
        records += load.records;
        bytes += load.bytes;
        match spec.rate {
            None => {
                let us = acked_at.duration_since(built_at).as_micros() as u64;
                stats
                    .produce_latency
                    .saturating_record_n(us.max(1), load.records);
            }
            Some(rate) => {
                for &j in &load.members {
                    let due = due_at(clock.t0, first + u64::from(j), rate);
                    let us = acked_at.saturating_duration_since(due).as_micros() as u64;
                    stats.produce_latency.saturating_record(us.max(1));
                }
            }
        }
    }
    counters.add(records, bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn layout(partitions: i32, brokers: i32) -> TopicLayout {
        TopicLayout {
            topic: "t".into(),
            leaders: (0..partitions)
                .map(|p| (p, format!("127.0.0.1:{}", 9000 + p % brokers)))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn lanes_split_partitions_rate_and_quota() {
        let l = layout(8, 1);
        let parts: Vec<i32> = (0..8).collect();
        let plan = LanePlan {
            producers: 2,
            in_flight: 3,
            rate: Some(1600.0),
            records: Some(1001),
            producer_ids: Some(vec![(7, 0), (8, 0)]),
        };
        let lanes = plan_lanes(&l, &parts, &plan);
        assert_eq!(lanes.len(), 6);
        let rate: f64 = lanes.iter().filter_map(|l| l.rate).sum();
        assert!((rate - 1600.0).abs() < 1e-6);
        assert_eq!(lanes.iter().filter_map(|l| l.quota).sum::<u64>(), 1001);
        assert_eq!(lanes[0].partitions, vec![0, 3, 6]);
        assert_eq!(lanes[0].producer, Some((7, 0)));
        assert_eq!(lanes[5].producer, Some((8, 0)));
        // Every producer covers every partition exactly once.
        for producer in [0, 1] {
            let mut all: Vec<i32> = lanes[producer * 3..producer * 3 + 3]
                .iter()
                .flat_map(|l| l.partitions.clone())
                .collect();
            all.sort();
            assert_eq!(all, parts);
        }
    }

    #[test]
    fn lanes_follow_leaders_and_in_flight_is_capped_by_partitions() {
        let l = layout(4, 2);
        let plan = LanePlan {
            producers: 1,
            in_flight: 5,
            rate: None,
            records: None,
            producer_ids: None,
        };
        let lanes = plan_lanes(&l, &[0, 1, 2, 3], &plan);
        assert_eq!(lanes.len(), 4);
        for lane in &lanes {
            for p in &lane.partitions {
                assert_eq!(l.leaders[p], lane.addr);
            }
        }
        let few = plan_lanes(
            &l,
            &[0],
            &LanePlan {
                records: Some(3),
                ..plan
            },
        );
        assert_eq!(few.len(), 1);
        assert_eq!(few[0].quota, Some(3));
    }
}
