//! `twinlog-bridge`: a MirrorMaker-style consume-and-re-produce bridge on librdkafka, the
//! baseline that native mirroring is compared with (issue 8, perf/scripts/compare.sh).
//!
//! MirrorMaker 1 and 2, uReplicator and Brooklin all copy a topic this way: a consumer
//! fetches from the source cluster, every record is decoded into the client's memory,
//! and a producer re-encodes it into new batches for the destination cluster. This
//! program does the same with librdkafka's tuned consumer and producer:
//!
//! ```text
//! twinlog-bridge --source HOST:PORT --destination HOST:PORT --topic T [--partitions N]
//! ```
//!
//! It captures the source's end offsets at start, consumes every partition from the
//! beginning (assigned, no group), produces each record to the same partition of the same
//! topic on the destination with its key, value, headers and timestamp, stops when every
//! partition reached its captured end and the producer has flushed, and prints one JSON
//! line: `{"records": N, "bytes": B, "seconds": S, "mb_per_s": X, "records_per_s": Y}`.
//! `bytes` counts keys, values and header keys and values; `seconds` runs from the
//! assignment to the end of the flush (connection set-up and the end-offset look-up are
//! before it).

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer,
};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

#[derive(Parser, Debug)]
#[command(
    name = "twinlog-bridge",
    about = "Copy a topic from one Kafka cluster to another by consuming and re-producing (MirrorMaker-style, librdkafka)"
)]
struct Args {
    /// Source cluster bootstrap server, HOST:PORT.
    #[arg(long)]
    source: String,
    /// Destination cluster bootstrap server, HOST:PORT (the topic must exist there with
    /// at least as many partitions).
    #[arg(long)]
    destination: String,
    /// Topic to copy (same name on both sides).
    #[arg(long)]
    topic: String,
    /// Partitions to copy, 0..N (default: every partition of the source topic).
    #[arg(long)]
    partitions: Option<i32>,
    /// How the producer is driven: `base` polls delivery reports from the copy loop,
    /// `threaded` from a background thread.
    #[arg(long, value_enum, default_value_t = ProducerKind::Base)]
    producer: ProducerKind,
    /// Extra or overriding consumer settings, KEY=VALUE (librdkafka names); repeatable.
    #[arg(short = 'C', long = "consumer-config", value_name = "KEY=VALUE")]
    consumer_config: Vec<String>,
    /// Extra or overriding producer settings, KEY=VALUE (librdkafka names); repeatable.
    #[arg(short = 'P', long = "producer-config", value_name = "KEY=VALUE")]
    producer_config: Vec<String>,
    /// Print a progress line on stderr every second.
    #[arg(long)]
    progress: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout_s: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProducerKind {
    Base,
    Threaded,
}

/// Counts delivery reports.
#[derive(Debug, Default)]
struct Delivered {
    ok: AtomicU64,
    failed: AtomicU64,
}

#[derive(Debug, Clone)]
struct BridgeContext(Arc<Delivered>);

impl ClientContext for BridgeContext {}

impl ProducerContext for BridgeContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                if self.0.failed.fetch_add(1, Ordering::Relaxed) < 10 {
                    eprintln!("twinlog-bridge: delivery failed: {e}");
                }
            }
        }
    }
}

/// The two ways of driving librdkafka's producer, behind one interface.
enum Sink {
    Base(BaseProducer<BridgeContext>),
    Threaded(ThreadedProducer<BridgeContext>),
}

/// A record to produce: keys and values are byte slices of the consumed message.
type Record<'a> = BaseRecord<'a, [u8], [u8]>;

impl Sink {
    // The record comes back on error (rdkafka's own signature), hence the large Err.
    #[allow(clippy::result_large_err)]
    fn send<'a>(&self, record: Record<'a>) -> Result<(), (KafkaError, Record<'a>)> {
        match self {
            Sink::Base(p) => p.send(record),
            Sink::Threaded(p) => p.send(record),
        }
    }

    /// Serves delivery reports (a no-op for the threaded producer, whose thread does it).
    fn poll(&self, timeout: Duration) {
        match self {
            Sink::Base(p) => p.poll(timeout),
            Sink::Threaded(_) => std::thread::sleep(timeout),
        }
    }

    fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        match self {
            Sink::Base(p) => p.flush(timeout),
            Sink::Threaded(p) => p.flush(timeout),
        }
    }

    fn in_flight(&self) -> i32 {
        match self {
            Sink::Base(p) => p.in_flight_count(),
            Sink::Threaded(p) => p.in_flight_count(),
        }
    }
}

fn apply_overrides(config: &mut ClientConfig, overrides: &[String]) -> Result<(), String> {
    for kv in overrides {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("expected KEY=VALUE, got {kv:?}"))?;
        config.set(k, v);
    }
    Ok(())
}

fn consumer_config(args: &Args) -> Result<ClientConfig, String> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &args.source)
        .set("client.id", "twinlog-bridge")
        // Assigned partitions, no group membership and nothing committed; librdkafka
        // still wants a group.id for assign().
        .set("group.id", "twinlog-bridge")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        // Throughput: large fetches, a deep pre-fetch queue, short broker waits.
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "4194304")
        .set("receive.message.max.bytes", "104857600")
        .set("queued.min.messages", "1000000")
        .set("queued.max.messages.kbytes", "1048576")
        .set("fetch.wait.max.ms", "100")
        .set("fetch.min.bytes", "1")
        .set("check.crcs", "false")
        .set("socket.receive.buffer.bytes", "4194304");
    apply_overrides(&mut c, &args.consumer_config)?;
    Ok(c)
}

fn producer_config(args: &Args) -> Result<ClientConfig, String> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &args.destination)
        .set("client.id", "twinlog-bridge")
        // MirrorMaker 2's producer defaults: acks=all, idempotent.
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("max.in.flight.requests.per.connection", "5")
        .set("compression.type", "none")
        // Throughput: 1 MiB batches, a short linger, a large queue.
        .set("linger.ms", "10")
        .set("batch.size", "1048576")
        .set("batch.num.messages", "100000")
        .set("message.max.bytes", "1048588")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("queue.buffering.max.messages", "2000000")
        .set("socket.send.buffer.bytes", "4194304")
        .set("message.timeout.ms", "300000");
    apply_overrides(&mut c, &args.producer_config)?;
    Ok(c)
}

fn record_bytes(msg: &BorrowedMessage<'_>) -> u64 {
    let mut n = msg.key_len() as u64 + msg.payload_len() as u64;
    if let Some(h) = msg.headers() {
        for header in h.iter() {
            n += header.key.len() as u64 + header.value.map_or(0, |v| v.len() as u64);
        }
    }
    n
}

fn run(args: Args) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(args.timeout_s);
    let consumer: BaseConsumer = consumer_config(&args)?
        .create()
        .map_err(|e| format!("source consumer: {e}"))?;
    let meta_timeout = Duration::from_secs(30);
    let partitions = match args.partitions {
        Some(n) => n,
        None => {
            let md = consumer
                .fetch_metadata(Some(&args.topic), meta_timeout)
                .map_err(|e| format!("source metadata: {e}"))?;
            let t = md
                .topics()
                .iter()
                .find(|t| t.name() == args.topic)
                .ok_or_else(|| format!("topic {} not in source metadata", args.topic))?;
            if let Some(e) = t.error() {
                return Err(format!("source topic {}: {:?}", args.topic, e));
            }
            t.partitions().len() as i32
        }
    };
    if partitions <= 0 {
        return Err(format!("topic {} has no partitions", args.topic));
    }

    // Captured end offsets: the copy stops at these.
    let mut end: HashMap<i32, i64> = HashMap::new();
    let mut done: HashMap<i32, bool> = HashMap::new();
    let mut pending = 0usize;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        let (low, high) = consumer
            .fetch_watermarks(&args.topic, p, meta_timeout)
            .map_err(|e| format!("source end offset of {}-{p}: {e}", args.topic))?;
        end.insert(p, high);
        done.insert(p, high <= low);
        if high > low {
            pending += 1;
            tpl.add_partition_offset(&args.topic, p, Offset::Beginning)
                .map_err(|e| e.to_string())?;
        }
    }

    let delivered = Arc::new(Delivered::default());
    let ctx = BridgeContext(delivered.clone());
    let pconf = producer_config(&args)?;
    let sink = match args.producer {
        ProducerKind::Base => Sink::Base(
            pconf
                .create_with_context(ctx)
                .map_err(|e| format!("destination producer: {e}"))?,
        ),
        ProducerKind::Threaded => Sink::Threaded(
            pconf
                .create_with_context(ctx)
                .map_err(|e| format!("destination producer: {e}"))?,
        ),
    };

    let start = Instant::now();
    consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
    let mut records: u64 = 0;
    let mut bytes: u64 = 0;
    let mut since_poll: u32 = 0;
    let mut last_progress = Instant::now();
    let mut last_records = 0u64;
    while pending > 0 {
        if Instant::now() > deadline {
            return Err(format!(
                "timed out after {} s with {pending} partition(s) not caught up",
                args.timeout_s
            ));
        }
        if args.progress && last_progress.elapsed() >= Duration::from_secs(1) {
            let dt = last_progress.elapsed().as_secs_f64();
            eprintln!(
                "{:6.1} s  {records} records  {:.0} records/s  in flight {}",
                start.elapsed().as_secs_f64(),
                (records - last_records) as f64 / dt,
                sink.in_flight()
            );
            last_progress = Instant::now();
            last_records = records;
        }
        let msg = match consumer.poll(Duration::from_millis(100)) {
            None => {
                sink.poll(Duration::ZERO);
                continue;
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                // Reached the partition's current end, which is at or past the captured
                // end (the end may sit on a transaction marker no record reaches).
                if let Some(d) = done.get_mut(&p) {
                    if !*d {
                        *d = true;
                        pending -= 1;
                    }
                }
                continue;
            }
            Some(Err(e)) => return Err(format!("consume: {e}")),
            Some(Ok(m)) => m,
        };
        let p = msg.partition();
        let offset = msg.offset();
        if offset >= end[&p] {
            // Appended after the start: not part of this copy.
            continue;
        }
        let mut record: Record<'_> = BaseRecord::to(&args.topic).partition(p);
        if let Some(k) = msg.key() {
            record = record.key(k);
        }
        if let Some(v) = msg.payload() {
            record = record.payload(v);
        }
        if let Some(ts) = msg.timestamp().to_millis() {
            record = record.timestamp(ts);
        }
        if let Some(h) = msg.headers() {
            record = record.headers(h.detach());
        }
        bytes += record_bytes(&msg);
        let mut record = record;
        loop {
            match sink.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    sink.poll(Duration::from_millis(5));
                }
                Err((e, _)) => return Err(format!("produce: {e}")),
            }
        }
        records += 1;
        since_poll += 1;
        if since_poll >= 1000 {
            sink.poll(Duration::ZERO);
            since_poll = 0;
        }
        if offset + 1 >= end[&p] {
            let d = done.get_mut(&p).expect("assigned partition");
            if !*d {
                *d = true;
                pending -= 1;
            }
        }
    }
    let remaining = deadline.saturating_duration_since(Instant::now());
    sink.flush(remaining).map_err(|e| format!("flush: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let ok = delivered.ok.load(Ordering::Relaxed);
    let failed = delivered.failed.load(Ordering::Relaxed);
    if failed > 0 || ok != records {
        return Err(format!(
            "{records} records sent, {ok} delivered, {failed} failed"
        ));
    }
    println!(
        "{{\"records\": {records}, \"bytes\": {bytes}, \"seconds\": {seconds:.3}, \"mb_per_s\": {:.1}, \"records_per_s\": {:.0}}}",
        bytes as f64 / 1e6 / seconds,
        records as f64 / seconds
    );
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("twinlog-bridge: {e}");
            ExitCode::FAILURE
        }
    }
}
