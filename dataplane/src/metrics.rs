//! Process-wide metrics, exposed in the Prometheus text format (v0.0.4) by the control
//! plane's `/metrics` endpoint (`controlplane::metrics_http`).
//!
//! No hot path takes a lock. Every series a shard updates is an atomic behind an `Arc`
//! handle (prometheus-client's `Counter`, our [`LatencyHistogram`]); a shard looks its
//! handles up once in the family (the only time the family's lock is taken) and keeps
//! them in a thread-local map, so later updates are one relaxed atomic add each.
//! Values that are cheaper to sample than to count — partitions owned, mirror partition
//! states and lag, glommio's io_uring counters — are sampled once a second by a task on
//! each shard ([`run_shard_sampler`]) into that shard's snapshot; the shard only ever
//! `try_lock`s the snapshot table (a scrape in progress makes it skip one sample), so it
//! never waits on the scraping thread. Job-queue depths are read at scrape time from the
//! [`ShardRouter`] (channel lengths are atomics).
//!
//! Series (all names start with `twinlog_`):
//! - `requests_total{shard,api,outcome}`: requests per API key; `outcome` is `ok` or why
//!   the connection was closed (`decode_error`, `unsupported_version`, ...).
//! - `request_duration_seconds{shard,api}`: histogram, frame read to response encoded.
//! - `response_errors_total{shard,api,code,error}`: non-zero error codes in responses
//!   (top-level and per partition; Produce, Fetch, ListOffsets, Metadata, group and
//!   transaction APIs).
//! - `shard_queue_depth{shard}`, `shard_queue_capacity{shard}`: jobs waiting in each
//!   shard's cross-shard queue.
//! - `shard_partitions{shard}`: partitions the shard owns.
//! - `io_uring_ops_total{shard,ring,op}`, `io_uring_bytes_total{shard,ring,op}`: file
//!   operations completed through each glommio ring (glommio counts file I/O only, not
//!   socket I/O).
//! - `mirror_bytes_fetched_total{mirror,shard}`, `mirror_records_fetched_total`,
//!   `mirror_bytes_appended_total`, `mirror_records_appended_total`: what the mirror
//!   fetchers received from the source and appended locally.
//! - `mirror_fetch_duration_seconds{mirror,shard}`: histogram of Fetch round trips to
//!   the source.
//! - `mirror_partitions{mirror,state}`: mirror partitions per state (the owning shard's
//!   view, as the mirror manager last set it).
//! - `mirror_partition_lag_records{mirror,topic,partition}`: source high watermark minus
//!   the local log end.
//! - `mirror_partition_lag_seconds{mirror,topic,partition}`: the source's newest record
//!   timestamp minus the newest mirrored one (absent while unknown).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, ResponseKind};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::net::ConnectionError;
use crate::shard::{ShardCtx, ShardRouter};
use crate::types::TopicPartition;
use crate::wire::mirror::MirrorPartitionState;

/// `Content-Type` of [`encode_text`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// How often each shard samples its gauges and glommio's io counters.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Upper bounds (seconds) of the latency histograms' buckets.
const LATENCY_BOUNDS_S: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A latency histogram made of atomics only: observing is three relaxed adds, no lock
/// (prometheus-client's own `Histogram` takes a lock per observation).
#[derive(Debug, Clone, Default)]
pub struct LatencyHistogram(Arc<LatencyCells>);

#[derive(Debug, Default)]
struct LatencyCells {
    /// Per bucket (not cumulative); observations above the last bound are only in
    /// `count` (the `+Inf` bucket).
    buckets: [AtomicU64; LATENCY_BOUNDS_S.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl LatencyHistogram {
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = LATENCY_BOUNDS_S.iter().position(|b| seconds <= *b) {
            self.0.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.0.count.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.0.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.0.count.load(Ordering::Relaxed)
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = LATENCY_BOUNDS_S
            .iter()
            .zip(&self.0.buckets)
            .map(|(bound, n)| (*bound, n.load(Ordering::Relaxed)))
            .collect();
        // Reads are not one snapshot: keep `count` >= the finite buckets' total.
        let count = self
            .count()
            .max(buckets.iter().map(|(_, n)| *n).sum::<u64>());
        let sum = self.0.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    shard: usize,
    api: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    shard: usize,
    api: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    shard: usize,
    api: String,
    code: i16,
    error: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IoLabels {
    shard: usize,
    ring: &'static str,
    op: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MirrorLabels {
    mirror: String,
    shard: usize,
}

/// Every family, registered once in the process-wide registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: Family<ApiLabels, LatencyHistogram>,
    response_errors: Family<ErrorLabels, Counter>,
    io_ops: Family<IoLabels, Counter>,
    io_bytes: Family<IoLabels, Counter>,
    mirror_fetched_bytes: Family<MirrorLabels, Counter>,
    mirror_fetched_records: Family<MirrorLabels, Counter>,
    mirror_appended_bytes: Family<MirrorLabels, Counter>,
    mirror_appended_records: Family<MirrorLabels, Counter>,
    mirror_fetch_duration: Family<MirrorLabels, LatencyHistogram>,
    produce_groups: Family<ShardLabels, Counter>,
    produce_grouped_requests: Family<ShardLabels, Counter>,
    inline_writes: Family<ShardLabels, Counter>,
    inline_write_bytes: Family<ShardLabels, Counter>,
    sampled: Arc<Sampled>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process-wide metrics.
pub fn global() -> &'static Metrics {
    &METRICS
}

/// Every series in the Prometheus text format, for a scrape.
pub fn encode_text() -> String {
    let mut out = String::with_capacity(16 << 10);
    if let Err(e) =
        prometheus_client::encoding::prometheus_text::encode(&mut out, &global().registry)
    {
        tracing::warn!(error = %e, "encoding metrics failed");
    }
    out
}

/// Lets a scrape read the shards' queue depths (called once by whoever serves
/// `/metrics`).
pub fn watch_router(router: ShardRouter) {
    let _ = global().sampled.router.set(router);
}

impl Metrics {
    fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            request_duration: Family::default(),
            response_errors: Family::default(),
            io_ops: Family::default(),
            io_bytes: Family::default(),
            mirror_fetched_bytes: Family::default(),
            mirror_fetched_records: Family::default(),
            mirror_appended_bytes: Family::default(),
            mirror_appended_records: Family::default(),
            mirror_fetch_duration: Family::default(),
            produce_groups: Family::default(),
            produce_grouped_requests: Family::default(),
            inline_writes: Family::default(),
            inline_write_bytes: Family::default(),
            sampled: Arc::new(Sampled::default()),
        };
        let mut r = Registry::default();
        r.register(
            "twinlog_requests",
            "Requests served, by shard, API key and outcome (ok, or why the connection was closed)",
            m.requests.clone(),
        );
        r.register(
            "twinlog_request_duration_seconds",
            "Time from a request frame read to its response encoded, by shard and API key",
            m.request_duration.clone(),
        );
        r.register(
            "twinlog_response_errors",
            "Non-zero error codes in responses (top-level and per partition), by shard, API key and code",
            m.response_errors.clone(),
        );
        r.register(
            "twinlog_produce_groups",
            "Groups of pipelined Produce requests served together (their appends coalesced), by shard",
            m.produce_groups.clone(),
        );
        r.register(
            "twinlog_produce_grouped_requests",
            "Produce requests served in a pipelined group, by shard",
            m.produce_grouped_requests.clone(),
        );
        r.register(
            "twinlog_inline_writes",
            "Buffered file writes made in place, not through io_uring (inline.write.max.bytes), by shard",
            m.inline_writes.clone(),
        );
        r.register(
            "twinlog_inline_write_bytes",
            "Bytes of the buffered file writes made in place, by shard",
            m.inline_write_bytes.clone(),
        );
        r.register(
            "twinlog_io_uring_ops",
            "File operations completed through each glommio io_uring ring, by shard, ring and operation",
            m.io_ops.clone(),
        );
        r.register(
            "twinlog_io_uring_bytes",
            "Bytes moved by file operations through each glommio io_uring ring",
            m.io_bytes.clone(),
        );
        r.register(
            "twinlog_mirror_bytes_fetched",
            "Record bytes mirror fetchers received from the source, by mirror and shard",
            m.mirror_fetched_bytes.clone(),
        );
        r.register(
            "twinlog_mirror_records_fetched",
            "Records (in whole batches) mirror fetchers received from the source",
            m.mirror_fetched_records.clone(),
        );
        r.register(
            "twinlog_mirror_bytes_appended",
            "Record bytes mirror fetchers appended to local logs",
            m.mirror_appended_bytes.clone(),
        );
        r.register(
            "twinlog_mirror_records_appended",
            "Records mirror fetchers appended to local logs",
            m.mirror_appended_records.clone(),
        );
        r.register(
            "twinlog_mirror_fetch_duration_seconds",
            "Fetch round trips of mirror fetchers to the source, by mirror and shard",
            m.mirror_fetch_duration.clone(),
        );
        r.register_collector(Box::new(Arc::clone(&m.sampled)));
        Metrics { registry: r, ..m }
    }
}

// ---- requests -------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct RequestHandles {
    count: Counter,
    duration: LatencyHistogram,
}

thread_local! {
    static REQUESTS: RefCell<HashMap<(usize, i16, &'static str), RequestHandles>> =
        RefCell::new(HashMap::new());
    static ERRORS: RefCell<HashMap<(usize, i16, i16), Counter>> = RefCell::new(HashMap::new());
    static MIRRORS: RefCell<HashMap<(usize, String), Rc<MirrorMetrics>>> =
        RefCell::new(HashMap::new());
}

/// The label of API key `raw` (kafka-protocol's name, or the mirror RPC's); `None` for
/// a key nobody knows, which is counted as `unknown`.
fn api_name(raw: i16) -> Option<String> {
    use crate::wire::mirror::keys;
    let mirror = match raw {
        keys::CREATE_MIRROR => "CreateMirror",
        keys::ADD_TOPICS_TO_MIRROR => "AddTopicsToMirror",
        keys::REMOVE_TOPICS_FROM_MIRROR => "RemoveTopicsFromMirror",
        keys::LIST_MIRRORS => "ListMirrors",
        keys::DESCRIBE_MIRRORS => "DescribeMirrors",
        keys::READ_MIRROR_STATES => "ReadMirrorStates",
        keys::WRITE_MIRROR_STATES => "WriteMirrorStates",
        keys::PAUSE_MIRROR_TOPICS => "PauseMirrorTopics",
        keys::RESUME_MIRROR_TOPICS => "ResumeMirrorTopics",
        keys::DELETE_MIRROR => "DeleteMirror",
        _ => return ApiKey::try_from(raw).ok().map(|k| format!("{k:?}")),
    };
    Some(mirror.to_string())
}

/// The `outcome` label of a request that closed its connection.
fn outcome_of(e: &ConnectionError) -> &'static str {
    match e {
        ConnectionError::Io(_) => "io_error",
        ConnectionError::FrameTooLarge { .. } => "frame_too_large",
        ConnectionError::ShortFrame(_) => "short_frame",
        ConnectionError::UnknownApiKey(_) => "unknown_api_key",
        ConnectionError::Unauthenticated(_) => "unauthenticated",
        ConnectionError::UnsupportedVersion { .. }
        | ConnectionError::UnsupportedMirrorVersion { .. } => "unsupported_version",
        ConnectionError::Decode { .. } | ConnectionError::MirrorDecode { .. } => "decode_error",
        ConnectionError::Encode { .. } | ConnectionError::MirrorEncode { .. } => "encode_error",
    }
}

/// Times one request frame; [`RequestTimer::finish`] records it.
#[derive(Debug)]
pub struct RequestTimer {
    shard: usize,
    api_key: i16,
    started: Instant,
}

impl RequestTimer {
    /// Starts timing `frame` (a request without its size prefix).
    pub fn start(shard: usize, frame: &[u8]) -> RequestTimer {
        let api_key = match frame {
            [a, b, ..] => i16::from_be_bytes([*a, *b]),
            _ => -1,
        };
        RequestTimer {
            shard,
            api_key,
            started: Instant::now(),
        }
    }

    /// Counts the request under its API key and outcome, observes its latency, and
    /// passes `result` through.
    pub fn finish<T>(self, result: Result<T, ConnectionError>) -> Result<T, ConnectionError> {
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => outcome_of(e),
        };
        record_request(self.shard, self.api_key, outcome, self.started.elapsed());
        result
    }
}

fn record_request(shard: usize, raw_key: i16, outcome: &'static str, elapsed: Duration) {
    let name = api_name(raw_key);
    let key = if name.is_some() { raw_key } else { -1 };
    let handles = REQUESTS.with(|cache| {
        cache
            .borrow_mut()
            .entry((shard, key, outcome))
            .or_insert_with(|| {
                let api = name.unwrap_or_else(|| "unknown".to_string());
                let m = global();
                RequestHandles {
                    count: m.requests.get_or_create_owned(&RequestLabels {
                        shard,
                        api: api.clone(),
                        outcome,
                    }),
                    duration: m
                        .request_duration
                        .get_or_create_owned(&ApiLabels { shard, api }),
                }
            })
            .clone()
    });
    handles.count.inc();
    handles.duration.observe(elapsed);
}

/// This shard's counters of in-place writes: (writes, bytes).
pub fn inline_write_counters(shard: usize) -> (Counter, Counter) {
    let m = global();
    let labels = ShardLabels { shard };
    (
        m.inline_writes.get_or_create_owned(&labels),
        m.inline_write_bytes.get_or_create_owned(&labels),
    )
}

/// Counts a group of `requests` pipelined Produce requests served together.
pub fn record_produce_group(shard: usize, requests: usize) {
    let m = global();
    let labels = ShardLabels { shard };
    m.produce_groups.get_or_create(&labels).inc();
    m.produce_grouped_requests
        .get_or_create(&labels)
        .inc_by(requests as u64);
}

/// Counts the non-zero error codes of a response (top-level and per partition).
pub fn record_response_errors(shard: usize, response: &ResponseKind) {
    let mut codes: Vec<i16> = Vec::new();
    let (key, top): (ApiKey, Option<i16>) = match response {
        ResponseKind::Produce(r) => {
            for t in &r.responses {
                codes.extend(t.partition_responses.iter().map(|p| p.error_code));
            }
            (ApiKey::Produce, None)
        }
        ResponseKind::Fetch(r) => {
            for t in &r.responses {
                codes.extend(t.partitions.iter().map(|p| p.error_code));
            }
            (ApiKey::Fetch, Some(r.error_code))
        }
        ResponseKind::ListOffsets(r) => {
            for t in &r.topics {
                codes.extend(t.partitions.iter().map(|p| p.error_code));
            }
            (ApiKey::ListOffsets, None)
        }
        ResponseKind::Metadata(r) => {
            codes.extend(r.topics.iter().map(|t| t.error_code));
            (ApiKey::Metadata, None)
        }
        ResponseKind::OffsetCommit(r) => {
            for t in &r.topics {
                codes.extend(t.partitions.iter().map(|p| p.error_code));
            }
            (ApiKey::OffsetCommit, None)
        }
        ResponseKind::FindCoordinator(r) => {
            codes.extend(r.coordinators.iter().map(|c| c.error_code));
            (ApiKey::FindCoordinator, Some(r.error_code))
        }
        ResponseKind::JoinGroup(r) => (ApiKey::JoinGroup, Some(r.error_code)),
        ResponseKind::SyncGroup(r) => (ApiKey::SyncGroup, Some(r.error_code)),
        ResponseKind::Heartbeat(r) => (ApiKey::Heartbeat, Some(r.error_code)),
        ResponseKind::LeaveGroup(r) => (ApiKey::LeaveGroup, Some(r.error_code)),
        ResponseKind::InitProducerId(r) => (ApiKey::InitProducerId, Some(r.error_code)),
        ResponseKind::EndTxn(r) => (ApiKey::EndTxn, Some(r.error_code)),
        ResponseKind::CreateTopics(r) => {
            codes.extend(r.topics.iter().map(|t| t.error_code));
            (ApiKey::CreateTopics, None)
        }
        _ => return,
    };
    codes.extend(top);
    for code in codes.into_iter().filter(|c| *c != 0) {
        count_error(shard, key, code);
    }
}

fn count_error(shard: usize, key: ApiKey, code: i16) {
    let counter = ERRORS.with(|cache| {
        cache
            .borrow_mut()
            .entry((shard, key as i16, code))
            .or_insert_with(|| {
                global().response_errors.get_or_create_owned(&ErrorLabels {
                    shard,
                    api: format!("{key:?}"),
                    code,
                    error: error_name(code),
                })
            })
            .clone()
    });
    counter.inc();
}

/// Kafka's name of an error code (`NOT_LEADER_OR_FOLLOWER`), or the mirror error's.
fn error_name(code: i16) -> String {
    if let Some(name) = crate::wire::mirror::errors::name(code) {
        return name.to_string();
    }
    // kafka-protocol names a code it does not know `Unknown(code)`.
    match kafka_protocol::ResponseError::try_from_code(code).map(|e| format!("{e:?}")) {
        Some(name) if !name.contains('(') => screaming_snake(&name),
        _ => "UNKNOWN".to_string(),
    }
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

// ---- mirror fetchers ------------------------------------------------------------------

/// The counters of one mirror on one shard.
#[derive(Debug)]
pub struct MirrorMetrics {
    fetched_bytes: Counter,
    fetched_records: Counter,
    appended_bytes: Counter,
    appended_records: Counter,
    fetch_duration: LatencyHistogram,
}

impl MirrorMetrics {
    /// A record set received from the source (whole batches: `records` counts them).
    pub fn fetched(&self, bytes: usize, records: u64) {
        self.fetched_bytes.inc_by(bytes as u64);
        self.fetched_records.inc_by(records);
    }

    /// Batches appended to a local log.
    pub fn appended(&self, bytes: usize, records: u64) {
        self.appended_bytes.inc_by(bytes as u64);
        self.appended_records.inc_by(records);
    }

    /// One Fetch round trip to the source that started at `started`.
    pub fn fetch_done(&self, started: Instant) {
        self.fetch_duration.observe(started.elapsed());
    }
}

/// The handles of `mirror` on `shard` (cached on this thread after the first call).
pub fn mirror(mirror: &str, shard: usize) -> Rc<MirrorMetrics> {
    MIRRORS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(m) = cache.get(&(shard, mirror.to_string())) {
            return Rc::clone(m);
        }
        let m = global();
        let labels = MirrorLabels {
            mirror: mirror.to_string(),
            shard,
        };
        let handles = Rc::new(MirrorMetrics {
            fetched_bytes: m.mirror_fetched_bytes.get_or_create_owned(&labels),
            fetched_records: m.mirror_fetched_records.get_or_create_owned(&labels),
            appended_bytes: m.mirror_appended_bytes.get_or_create_owned(&labels),
            appended_records: m.mirror_appended_records.get_or_create_owned(&labels),
            fetch_duration: m.mirror_fetch_duration.get_or_create_owned(&labels),
        });
        cache.insert((shard, mirror.to_string()), Rc::clone(&handles));
        handles
    })
}

/// Records in whole batches of a record set (`RecordBatch::record_count` of each).
pub fn record_count(batches: &[crate::wire::RecordBatch]) -> u64 {
    batches
        .iter()
        .map(|b| u64::try_from(b.record_count()).unwrap_or(0))
        .sum()
}

// ---- sampled per shard ----------------------------------------------------------------

/// One mirror partition's lag, as the owning shard last sampled it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PartitionLag {
    mirror: String,
    tp: TopicPartition,
    /// Source high watermark minus local log end.
    records: i64,
    /// -1 unknown.
    ms: i64,
}

/// What one shard sampled last.
#[derive(Debug, Clone, Default, PartialEq)]
struct ShardSnapshot {
    partitions: usize,
    /// (mirror, state name) -> partitions.
    mirror_states: BTreeMap<(String, &'static str), u64>,
    lag: Vec<PartitionLag>,
    /// The log cleaner's counters: bytes read, bytes written, cleans, failures.
    cleaner: [u64; 4],
    /// Compacted partitions: dirty ratio, last clean (ms, -1: none since start).
    cleaning: Vec<(TopicPartition, f64, i64)>,
}

/// The sampled series: shard snapshots and the router, encoded at each scrape.
#[derive(Debug, Default)]
struct Sampled {
    shards: Mutex<BTreeMap<usize, ShardSnapshot>>,
    router: OnceLock<ShardRouter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShardLabels {
    shard: usize,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    mirror: String,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    mirror: String,
    topic: String,
    partition: i32,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicPartitionLabels {
    topic: String,
    partition: i32,
}

fn counters<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut rows = rows.into_iter().peekable();
    if rows.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in rows {
        prometheus_client::metrics::counter::ConstCounter::new(value)
            .encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauges<L: EncodeLabelSet, V: prometheus_client::encoding::EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (L, V)>,
) -> Result<(), std::fmt::Error> {
    let mut rows = rows.into_iter().peekable();
    if rows.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for Sampled {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        if let Some(router) = self.router.get() {
            let shards = 0..router.shard_count();
            gauges(
                &mut encoder,
                "twinlog_shard_queue_depth",
                "Jobs waiting in each shard's cross-shard queue (read at scrape time)",
                shards
                    .clone()
                    .map(|shard| (ShardLabels { shard }, router.queue_len(shard) as i64)),
            )?;
            gauges(
                &mut encoder,
                "twinlog_shard_queue_capacity",
                "Bound of each shard's cross-shard queue",
                shards.map(|shard| (ShardLabels { shard }, router.queue_capacity(shard) as i64)),
            )?;
        }
        let shards = match self.shards.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        gauges(
            &mut encoder,
            "twinlog_shard_partitions",
            "Partitions each shard owns",
            shards
                .iter()
                .map(|(shard, s)| (ShardLabels { shard: *shard }, s.partitions as i64)),
        )?;
        let mut states: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
        for s in shards.values() {
            for (k, n) in &s.mirror_states {
                *states.entry(k.clone()).or_default() += n;
            }
        }
        gauges(
            &mut encoder,
            "twinlog_mirror_partitions",
            "Mirror partitions per mirror and state (the owning shards' view)",
            states.into_iter().map(|((mirror, state), n)| {
                (
                    StateLabels { mirror, state },
                    i64::try_from(n).unwrap_or(i64::MAX),
                )
            }),
        )?;
        for (i, (name, help)) in [
            (
                "twinlog_log_cleaner_read_bytes",
                "Bytes the log cleaner read, per shard",
            ),
            (
                "twinlog_log_cleaner_written_bytes",
                "Bytes the log cleaner wrote, per shard",
            ),
            (
                "twinlog_log_cleaner_cleans",
                "Partition cleans finished, per shard",
            ),
            (
                "twinlog_log_cleaner_failures",
                "Partition cleans that failed, per shard",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            counters(
                &mut encoder,
                name,
                help,
                shards
                    .iter()
                    .map(|(shard, s)| (ShardLabels { shard: *shard }, s.cleaner[i])),
            )?;
        }
        let cleaning: Vec<&(TopicPartition, f64, i64)> =
            shards.values().flat_map(|s| s.cleaning.iter()).collect();
        let tp_labels = |tp: &TopicPartition| TopicPartitionLabels {
            topic: tp.topic.clone(),
            partition: tp.partition,
        };
        gauges(
            &mut encoder,
            "twinlog_log_cleaner_dirty_ratio",
            "Dirty bytes over cleanable bytes of each compacted partition, at the cleaner's last look",
            cleaning.iter().map(|(tp, ratio, _)| (tp_labels(tp), *ratio)),
        )?;
        gauges(
            &mut encoder,
            "twinlog_log_cleaner_last_clean_timestamp_seconds",
            "When the cleaner last finished cleaning each compacted partition (absent: not since start)",
            cleaning
                .iter()
                .filter(|(_, _, at)| *at >= 0)
                .map(|(tp, _, at)| (tp_labels(tp), *at as f64 / 1000.0)),
        )?;
        let lag: Vec<&PartitionLag> = shards.values().flat_map(|s| s.lag.iter()).collect();
        let labels = |l: &PartitionLag| PartitionLabels {
            mirror: l.mirror.clone(),
            topic: l.tp.topic.clone(),
            partition: l.tp.partition,
        };
        gauges(
            &mut encoder,
            "twinlog_mirror_partition_lag_records",
            "Source high watermark minus the local log end, per mirror partition",
            lag.iter().map(|l| (labels(l), l.records)),
        )?;
        gauges(
            &mut encoder,
            "twinlog_mirror_partition_lag_seconds",
            "The source's newest record timestamp minus the newest mirrored record's, per mirror partition (absent while unknown)",
            lag.iter()
                .filter(|l| l.ms >= 0)
                .map(|l| (labels(l), l.ms as f64 / 1000.0)),
        )?;
        Ok(())
    }
}

/// glommio's io counters, accumulated per shard (its `io_stats` hands out the counts
/// since the previous call).
#[derive(Debug)]
struct IoCounters {
    cells: Vec<IoCell>,
}

/// The counters of one (ring, operation).
#[derive(Debug)]
struct IoCell {
    ring: &'static str,
    op: &'static str,
    ops: Counter,
    /// `None` for opens and closes, which move no bytes.
    bytes: Option<Counter>,
}

const IO_RINGS: [&str; 3] = ["main", "latency", "poll"];
const IO_OPS: [&str; 7] = [
    "open",
    "close",
    "read",
    "buffered_read",
    "deduped_read",
    "write",
    "buffered_write",
];

impl IoCounters {
    fn new(shard: usize) -> IoCounters {
        let m = global();
        let mut cells = Vec::new();
        for ring in IO_RINGS {
            for op in IO_OPS {
                let labels = IoLabels { shard, ring, op };
                cells.push(IoCell {
                    ring,
                    op,
                    ops: m.io_ops.get_or_create_owned(&labels),
                    bytes: (!matches!(op, "open" | "close"))
                        .then(|| m.io_bytes.get_or_create_owned(&labels)),
                });
            }
        }
        IoCounters { cells }
    }

    fn add(&self, ring: &str, stats: &glommio::RingIoStats) {
        for cell in self.cells.iter().filter(|c| c.ring == ring) {
            let (n, b) = match cell.op {
                "open" => (stats.files_opened(), 0),
                "close" => (stats.files_closed(), 0),
                "read" => stats.file_reads(),
                "buffered_read" => stats.file_buffered_reads(),
                "deduped_read" => stats.file_deduped_reads(),
                "write" => stats.file_writes(),
                "buffered_write" => stats.file_buffered_writes(),
                _ => (0, 0),
            };
            cell.ops.inc_by(n);
            if let Some(bytes) = &cell.bytes {
                bytes.inc_by(b);
            }
        }
    }
}

/// Samples this shard's gauges and glommio's io counters every [`SAMPLE_INTERVAL`],
/// forever: spawn it detached on each shard.
pub async fn run_shard_sampler(ctx: Rc<ShardCtx>) {
    let io = IoCounters::new(ctx.id);
    loop {
        // The first call also hands over what glommio counted before the sampler
        // started (opening the logs).
        let stats = glommio::executor().io_stats();
        io.add("main", &stats.main_ring);
        io.add("latency", &stats.latency_ring);
        io.add("poll", &stats.poll_ring);
        let snapshot = sample_shard(&ctx).await;
        // Never wait on a scrape: if one holds the table, this sample is skipped and the
        // next tick publishes a fresh one.
        if let Ok(mut shards) = global().sampled.shards.try_lock() {
            shards.insert(ctx.id, snapshot);
        }
        glommio::timer::sleep(SAMPLE_INTERVAL).await;
    }
}

async fn sample_shard(ctx: &Rc<ShardCtx>) -> ShardSnapshot {
    let c = &ctx.cleaner;
    let mut snapshot = ShardSnapshot {
        partitions: ctx.partition_count(),
        cleaner: [
            c.bytes_read.get(),
            c.bytes_written.get(),
            c.cleans.get(),
            c.failures.get(),
        ],
        cleaning: c
            .partitions
            .borrow()
            .iter()
            .filter(|(tp, _)| ctx.partition(tp).is_some())
            .map(|(tp, p)| (tp.clone(), p.dirty_ratio, p.last_clean_ms))
            .collect(),
        ..ShardSnapshot::default()
    };
    let image = ctx.metadata.load();
    for topic in image.topics.values() {
        let Some((mirror, _)) = topic.mirror() else {
            continue;
        };
        for p in topic.partitions.iter().filter(|p| p.shard == ctx.id) {
            let tp = TopicPartition::new(topic.name.as_str(), p.partition);
            let state = ctx
                .partition(&tp)
                .and_then(|p| p.mirror_gate())
                .unwrap_or(MirrorPartitionState::Unknown);
            *snapshot
                .mirror_states
                .entry((mirror.to_string(), state.name()))
                .or_default() += 1;
            let Some(status) = ctx.mirror_fetchers.status(&tp) else {
                continue;
            };
            let local_end = match ctx.partition(&tp) {
                Some(owned) => match owned.read().await {
                    Ok(log) => log.log_end_offset().0,
                    Err(_) => continue,
                },
                None => continue,
            };
            if status.source_high_watermark < 0 {
                continue;
            }
            snapshot.lag.push(PartitionLag {
                mirror: mirror.to_string(),
                tp,
                records: (status.source_high_watermark - local_end).max(0),
                ms: status.lag_ms,
            });
        }
    }
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_count_and_sum() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let mut registry = Registry::default();
        registry.register("lat", "help", h.clone());
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).expect("encodes");
        assert!(out.contains("# TYPE lat histogram"), "{out}");
        assert!(out.contains("lat_bucket{le=\"0.0001\"} 1\n"), "{out}");
        assert!(out.contains("lat_bucket{le=\"0.005\"} 2\n"), "{out}");
        assert!(out.contains("lat_bucket{le=\"10\"} 2\n"), "{out}");
        assert!(out.contains("lat_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("lat_count 3\n"), "{out}");
        assert!(out.contains("lat_sum 60.00305\n"), "{out}");
    }

    #[test]
    fn requests_and_errors_are_counted_per_api() {
        let frame = [0u8, 0, 0, 9, 0, 0, 0, 1];
        RequestTimer::start(7, &frame)
            .finish::<()>(Ok(()))
            .expect("passes through");
        let _ = RequestTimer::start(7, &[0x7f, 0x7f, 0, 0])
            .finish::<()>(Err(ConnectionError::UnknownApiKey(0x7f7f)));
        let mut produce = kafka_protocol::messages::ProduceResponse::default();
        let mut topic = kafka_protocol::messages::produce_response::TopicProduceResponse::default();
        topic.partition_responses = vec![
            kafka_protocol::messages::produce_response::PartitionProduceResponse::default()
                .with_error_code(6),
            kafka_protocol::messages::produce_response::PartitionProduceResponse::default(),
        ];
        produce.responses = vec![topic];
        record_response_errors(7, &ResponseKind::Produce(produce));
        let text = encode_text();
        assert!(
            text.contains("twinlog_requests_total{shard=\"7\",api=\"Produce\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "twinlog_requests_total{shard=\"7\",api=\"unknown\",outcome=\"unknown_api_key\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("twinlog_request_duration_seconds_count{shard=\"7\",api=\"Produce\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "twinlog_response_errors_total{shard=\"7\",api=\"Produce\",code=\"6\",error=\"NOT_LEADER_OR_FOLLOWER\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn mirror_counters_accumulate() {
        let m = mirror("metrics-test", 3);
        m.fetched(100, 4);
        mirror("metrics-test", 3).appended(60, 2);
        m.fetch_done(Instant::now());
        let text = encode_text();
        assert!(
            text.contains(
                "twinlog_mirror_bytes_fetched_total{mirror=\"metrics-test\",shard=\"3\"} 100"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "twinlog_mirror_records_appended_total{mirror=\"metrics-test\",shard=\"3\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "twinlog_mirror_fetch_duration_seconds_count{mirror=\"metrics-test\",shard=\"3\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(1), "OFFSET_OUT_OF_RANGE");
        assert_eq!(error_name(134), "READ_ONLY_TOPIC");
        assert_eq!(error_name(-12345), "UNKNOWN");
    }
}
