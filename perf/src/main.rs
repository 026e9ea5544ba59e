//! `twinlog-perf`: load generators and reports for Twinlog.
//!
//! Every number it prints is meant to land in perf/RESULTS.md next to the command that
//! produced it and the machine it ran on, so each subcommand prints both.
//!
//! The load runs on glommio executors (`--threads`, one per core by default) and speaks
//! the Kafka protocol through the project's own client (`dataplane::client`); set-up
//! and sampling (metadata, offsets, mirror RPCs) go over its blocking connection on the
//! main thread.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

mod admin;
mod batch;
mod ceilings;
mod consume;
mod html;
mod idle_floor;
mod mirror;
mod produce;
mod report;
mod runtime;
mod util;
mod workload;

#[derive(Debug, Parser)]
#[command(name = "twinlog-perf", about = "Twinlog load generators and reports")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure this machine's physical ceilings (CRC32C, memcpy, sequential disk write,
    /// loopback TCP), the numbers a broker's throughput is judged against.
    Ceilings(ceilings::CeilingsArgs),
    /// Answer idle long polls as cheaply as a server can (one epoll thread, no broker):
    /// the floor that perf/scripts/idle_consumers.sh measures beside the brokers.
    IdleFloor(idle_floor::IdleFloorArgs),
    /// Produce to a topic: max rate (closed loop) or a fixed rate (open loop, latency
    /// measured from each record's intended send time).
    Produce(ProduceArgs),
    /// Consume a topic with assigned partitions.
    Consume(ConsumeArgs),
    /// Produce and consume together: end-to-end latency from each record's send time.
    E2e(E2eArgs),
    /// Fill a source topic, mirror it into a destination cluster and measure catch-up
    /// throughput; optionally then mirror lag under a steady produce rate.
    Mirror(MirrorArgs),
    /// Render run reports (--json-out files) side by side as one HTML page.
    Report(ReportArgs),
}

/// How a run executes and where its report goes.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// glommio executors (threads) running the load; default: one per core.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Pin executor i to core i (modulo the core count).
    #[arg(long)]
    pub pin_cores: bool,
    /// Write the run report as JSON to this file (input of `report`).
    #[arg(long, value_name = "RUN.json")]
    pub json_out: Option<PathBuf>,
    /// Name of the run in reports (default: the workload and its main settings).
    #[arg(long)]
    pub label: Option<String>,
    /// client.id in every request.
    #[arg(long, default_value = "twinlog-perf")]
    pub client_id: String,
    /// No progress line, even on a terminal.
    #[arg(long)]
    pub quiet: bool,
}

impl RunArgs {
    pub fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
            .max(1)
    }
}

/// How records are made and sent.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Producers; each writes to every selected partition over its own connections.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Requests in flight per producer and broker: the producer's partitions on a broker
    /// are split over this many connections (at most one per partition), one request
    /// at a time each.
    #[arg(long, default_value_t = 5)]
    pub in_flight: usize,
    /// Requests in flight on each connection (closed loop only): a connection sends its
    /// next request before the previous ones are answered, up to this many, as Kafka's
    /// `max.in.flight.requests.per.connection` does. 1: one request at a time.
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// Value bytes per record (the first 8 carry the send time).
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Give records keys (`--key-size` bytes, `--key-space` distinct values), partitioned
    /// by murmur2 like Kafka's default partitioner. Without: sticky partitioning.
    #[arg(long)]
    pub keyed: bool,
    /// Bytes per key (with --keyed).
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Distinct keys (with --keyed).
    #[arg(long, default_value_t = 10_000)]
    pub key_space: u64,
    /// 0 (no answer), 1 (leader) or -1 (all in-sync replicas). Default 1, or -1 with
    /// --idempotent.
    #[arg(long, allow_negative_numbers = true)]
    pub acks: Option<i16>,
    /// Compression of the record batches.
    #[arg(long, value_enum, default_value_t = batch::Codec::None)]
    pub compression: batch::Codec,
    /// Bytes of records per batch (one batch per partition per request).
    #[arg(long, default_value_t = 128 * 1024)]
    pub batch_size: usize,
    /// Fixed rate only: how long a partly filled batch waits for more records.
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u64,
    /// Idempotent producers: InitProducerId, then sequence numbers per partition.
    #[arg(long)]
    pub idempotent: bool,
}

/// Fetch settings of consumers.
#[derive(Debug, Clone, clap::Args)]
pub struct FetchArgs {
    #[arg(long, default_value_t = 500)]
    pub fetch_max_wait_ms: i32,
    #[arg(long, default_value_t = 1)]
    pub fetch_min_bytes: i32,
    #[arg(long, default_value_t = 50 << 20)]
    pub fetch_max_bytes: i32,
    #[arg(long, default_value_t = 1 << 20)]
    pub max_partition_fetch_bytes: i32,
    /// Skip the CRC32C check of fetched batches (Kafka consumers check by default).
    #[arg(long)]
    pub no_check_crc: bool,
}

fn duration_arg(s: &str) -> Result<Duration, String> {
    util::parse_duration(s)
}

#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    /// A broker of the cluster (host:port[,host:port...]).
    #[arg(long, visible_alias = "bootstrap")]
    pub bootstrap_server: String,
    #[arg(long)]
    pub topic: String,
    /// How long to produce (30s, 500ms, 2m).
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub duration: Duration,
    /// Produce to partitions 0..N only (default: every partition of the topic).
    #[arg(long)]
    pub partitions: Option<i32>,
    /// Records per second over all producers (open loop); default: as fast as possible.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Stop after this many records (over all producers).
    #[arg(long)]
    pub records: Option<u64>,
    /// Create the topic with this many partitions when it does not exist.
    #[arg(long, default_value_t = 8)]
    pub create_partitions: i32,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

/// Where consumers start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StartFrom {
    Earliest,
    Latest,
}

#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    /// A broker of the cluster (host:port[,host:port...]).
    #[arg(long, visible_alias = "bootstrap")]
    pub bootstrap_server: String,
    #[arg(long)]
    pub topic: String,
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub duration: Duration,
    /// Consume partitions 0..N only (default: every partition).
    #[arg(long)]
    pub partitions: Option<i32>,
    /// Consumers; partitions are assigned to them round robin.
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    #[arg(long, value_enum, default_value_t = StartFrom::Earliest)]
    pub from: StartFrom,
    /// Stop each partition at the end offset it had when the run started.
    #[arg(long)]
    pub to_end: bool,
    /// Stop after this many records (over all consumers).
    #[arg(long)]
    pub records: Option<u64>,
    #[command(flatten)]
    pub fetch: FetchArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, clap::Args)]
pub struct E2eArgs {
    /// A broker of the cluster (host:port[,host:port...]).
    #[arg(long, visible_alias = "bootstrap")]
    pub bootstrap_server: String,
    #[arg(long)]
    pub topic: String,
    /// How long to produce; consumers then drain for up to --drain.
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub duration: Duration,
    #[arg(long)]
    pub partitions: Option<i32>,
    /// Records per second over all producers (open loop); default: as fast as possible
    /// (then end-to-end latency is mostly queueing).
    #[arg(long)]
    pub rate: Option<f64>,
    #[arg(long, default_value_t = 8)]
    pub create_partitions: i32,
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// After producing stops, how long consumers may take to receive the rest.
    #[arg(long, default_value = "5s", value_parser = duration_arg)]
    pub drain: Duration,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub fetch: FetchArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, clap::Args)]
pub struct MirrorArgs {
    /// The source cluster (what the destination mirrors from).
    #[arg(long)]
    pub source: String,
    /// The destination cluster (a Twinlog broker: it receives the mirror RPCs).
    #[arg(long)]
    pub destination: String,
    #[arg(long)]
    pub topic: String,
    /// Records to fill the source topic with before mirroring starts.
    #[arg(long, default_value_t = 200_000)]
    pub records: u64,
    /// Create the source topic with this many partitions when it does not exist.
    #[arg(long, default_value_t = 8)]
    pub create_partitions: i32,
    /// Name of the mirror created on the destination (an existing one is reused).
    #[arg(long, default_value = "perf")]
    pub mirror_name: String,
    /// Extra mirror configs (`key=value`), repeatable.
    #[arg(long = "mirror-config", value_name = "KEY=VALUE")]
    pub mirror_configs: Vec<String>,
    /// Give up waiting for catch-up after this long.
    #[arg(long, default_value = "300s", value_parser = duration_arg)]
    pub catch_up_timeout: Duration,
    /// How often DescribeMirrors is polled during catch-up.
    #[arg(long, default_value_t = 100)]
    pub poll_ms: u64,
    /// After catch-up: produce to the source at this many records/s for --duration and
    /// sample the mirror lag every second.
    #[arg(long)]
    pub steady_rate: Option<f64>,
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub duration: Duration,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Run reports written with --json-out.
    #[arg(required = true, value_name = "RUN.json")]
    pub runs: Vec<PathBuf>,
    /// The HTML page to write.
    #[arg(long, value_name = "OUT.html")]
    pub html: PathBuf,
    #[arg(long, default_value = "Twinlog performance runs")]
    pub title: String,
}

fn report(args: &ReportArgs) -> Result<(), String> {
    let runs = args
        .runs
        .iter()
        .map(|p| report::RunReport::read_json(p))
        .collect::<Result<Vec<_>, _>>()?;
    let page = html::render(&args.title, &runs);
    std::fs::write(&args.html, page).map_err(|e| format!("{}: {e}", args.html.display()))?;
    println!("wrote {} ({} runs)", args.html.display(), runs.len());
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ceilings(args) => ceilings::run(&args).map_err(|e| e.to_string()),
        Command::IdleFloor(args) => idle_floor::run(&args).map_err(|e| e.to_string()),
        Command::Produce(args) => workload::produce(&args),
        Command::Consume(args) => workload::consume(&args),
        Command::E2e(args) => workload::e2e(&args),
        Command::Mirror(args) => mirror::run(&args),
        Command::Report(args) => report(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("twinlog-perf: {e}");
            ExitCode::FAILURE
        }
    }
}
