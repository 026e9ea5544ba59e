//! Where the load runs: one glommio executor per thread, each running its share of the
//! producer lanes and consumers as local tasks; shared counters for the per-second
//! progress line; per-thread latency histograms merged at the end.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::consume::{self, ConsumeConfig, ConsumerSpec};
use crate::produce::{self, LaneSpec, ProduceConfig};
use crate::report::SeriesPoint;
use crate::util::{mb_per_s, per_s, thousands, wall_now_us};

/// glommio registers io_memory as fixed buffers in three rings per executor; the load
/// generator needs little (sockets only), and it must fit an 8 MiB memlock cap next to
/// a broker on the same machine.
const IO_MEMORY_BYTES: usize = 512 << 10;
/// The last partial second of a run is kept in the series when at least this long.
const LAST_SAMPLE_MIN: Duration = Duration::from_millis(200);
/// Latencies are recorded in microseconds up to an hour.
const LATENCY_MAX_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds.
pub fn latency_histogram() -> Histogram<u64> {
    // Bounds are constants within what hdrhistogram accepts.
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("valid histogram bounds")
}

/// Records, bytes and errors so far; shared by every thread for the progress line.
#[derive(Debug)]
pub struct Counters {
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
    /// Microseconds from the start of the run to the last `add` of records.
    last_add_us: AtomicU64,
    t0: Instant,
}

impl Counters {
    fn new(t0: Instant) -> Counters {
        Counters {
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            last_add_us: AtomicU64::new(0),
            t0,
        }
    }

    pub fn add(&self, records: u64, bytes: u64) {
        if records == 0 {
            return;
        }
        self.records.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.last_add_us
            .fetch_max(self.t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// The time throughput is measured over: from the start of the run to the last
    /// records counted (so that a drain, a consumer waiting at the end of its partitions
    /// or the shutdown do not dilute it); `elapsed` when nothing was counted.
    pub fn active(&self, elapsed: Duration) -> Duration {
        match self.last_add_us.load(Ordering::Relaxed) {
            0 => elapsed,
            us => Duration::from_micros(us),
        }
    }

    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// The clock of one run: when it started (monotonic and wall) and when load stops.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    pub t0: Instant,
    pub wall0_us: i64,
    pub deadline: Instant,
}

impl RunClock {
    pub fn start(duration: Duration) -> RunClock {
        let t0 = Instant::now();
        RunClock {
            t0,
            wall0_us: wall_now_us(),
            deadline: t0 + duration,
        }
    }

    /// Wall-clock microseconds of the monotonic instant `at`.
    pub fn wall_us(&self, at: Instant) -> i64 {
        match at.checked_duration_since(self.t0) {
            Some(d) => self.wall0_us + d.as_micros() as i64,
            None => self.wall0_us - self.t0.duration_since(at).as_micros() as i64,
        }
    }
}

/// What every thread of one run shares.
#[derive(Debug)]
pub struct RunShared {
    pub clock: RunClock,
    pub produced: Counters,
    pub consumed: Counters,
    /// Set to end the run early (every record quota reached, or a fatal error).
    pub stop: AtomicBool,
    /// Producer lanes not finished yet (end-to-end consumers drain until it is 0).
    pub lanes_running: AtomicUsize,
}

impl RunShared {
    pub fn new(clock: RunClock) -> Arc<RunShared> {
        Arc::new(RunShared {
            clock,
            produced: Counters::new(clock.t0),
            consumed: Counters::new(clock.t0),
            stop: AtomicBool::new(false),
            lanes_running: AtomicUsize::new(0),
        })
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Latencies and errors one thread saw.
#[derive(Debug)]
pub struct ThreadStats {
    /// Produce: from the intended send time to the acknowledgement.
    pub produce_latency: Histogram<u64>,
    /// Consume: from the send-time stamp in the record to its arrival at the consumer.
    pub e2e_latency: Histogram<u64>,
    /// Consume: round trip of each Fetch.
    pub fetch_latency: Histogram<u64>,
    /// Error description -> count.
    pub errors: BTreeMap<String, u64>,
}

impl Default for ThreadStats {
    fn default() -> Self {
        ThreadStats {
            produce_latency: latency_histogram(),
            e2e_latency: latency_histogram(),
            fetch_latency: latency_histogram(),
            errors: BTreeMap::new(),
        }
    }
}

impl ThreadStats {
    pub fn merge(&mut self, other: &ThreadStats) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.produce_latency.add(&other.produce_latency);
        let _ = self.e2e_latency.add(&other.e2e_latency);
        let _ = self.fetch_latency.add(&other.fetch_latency);
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
    }
}

/// One executor's view: the run's shared state and its own statistics.
#[derive(Debug)]
pub struct ThreadCtx {
    pub shared: Arc<RunShared>,
    pub stats: RefCell<ThreadStats>,
}

impl ThreadCtx {
    /// Counts an error under `what` (kept short: it is a tally key).
    pub fn error(&self, counters: &Counters, what: String) {
        counters.errors.fetch_add(1, Ordering::Relaxed);
        *self.stats.borrow_mut().errors.entry(what).or_default() += 1;
    }
}

/// The work of one executor thread.
#[derive(Debug, Default)]
pub struct ThreadPlan {
    pub lanes: Vec<LaneSpec>,
    pub consumers: Vec<ConsumerSpec>,
}

/// Configuration shared by every lane and consumer of a run.
#[derive(Debug, Default)]
pub struct Workload {
    pub produce: Option<ProduceConfig>,
    pub consume: Option<ConsumeConfig>,
}

/// How the threads run and what the main thread shows meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    pub pin_cores: bool,
    /// Print a progress line every second (when stdout is a terminal).
    pub progress: bool,
}

/// What a finished run leaves behind.
#[derive(Debug)]
pub struct RunOutcome {
    pub stats: ThreadStats,
    pub series: Vec<SeriesPoint>,
    /// From the start until the last thread finished.
    pub elapsed: Duration,
}

/// Counts a finished thread, also when it unwinds.
struct DoneGuard(Arc<AtomicUsize>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs `plans` (one executor each) until every lane and consumer has finished, while
/// the calling thread samples the counters every second (calling `tick` with the
/// second number too).
pub fn run(
    plans: Vec<ThreadPlan>,
    workload: Arc<Workload>,
    shared: Arc<RunShared>,
    options: RunOptions,
    tick: &mut dyn FnMut(u64),
) -> Result<RunOutcome, String> {
    let threads = plans.len();
    let lanes: usize = if workload.produce.is_some() {
        plans.iter().map(|p| p.lanes.len()).sum()
    } else {
        0
    };
    shared.lanes_running.fetch_add(lanes, Ordering::SeqCst);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let done = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(threads);
    for (i, plan) in plans.into_iter().enumerate() {
        let placement = if options.pin_cores {
            glommio::Placement::Fixed(i % cores)
        } else {
            glommio::Placement::Unbound
        };
        let shared = shared.clone();
        let workload = workload.clone();
        let guard = DoneGuard(done.clone());
        let handle = glommio::LocalExecutorBuilder::new(placement)
            .name(&format!("perf-{i}"))
            .io_memory(IO_MEMORY_BYTES)
            .spawn(move || async move {
                dataplane::reactor::spawn_tick();
                let _guard = guard;
                run_thread(plan, workload, shared).await
            })
            .map_err(|e| format!("cannot start executor {i}: {e}"))?;
        handles.push(handle);
    }
    let series = monitor(&shared, &done, threads, options.progress, tick);
    let mut stats = ThreadStats::default();
    for (i, h) in handles.into_iter().enumerate() {
        let s = h.join().map_err(|e| format!("executor {i} failed: {e}"))?;
        stats.merge(&s);
    }
    Ok(RunOutcome {
        stats,
        series,
        elapsed: shared.clock.t0.elapsed(),
    })
}

async fn run_thread(
    plan: ThreadPlan,
    workload: Arc<Workload>,
    shared: Arc<RunShared>,
) -> ThreadStats {
    let ctx = Rc::new(ThreadCtx {
        shared,
        stats: RefCell::new(ThreadStats::default()),
    });
    let mut tasks = Vec::new();
    if let Some(cfg) = &workload.produce {
        let payload = Rc::new(crate::batch::Payload::new(cfg.record_size, 0x5eed));
        for lane in plan.lanes {
            let ctx = ctx.clone();
            let workload = workload.clone();
            let payload = payload.clone();
            tasks.push(glommio::spawn_local(async move {
                if let Some(cfg) = &workload.produce {
                    produce::run_lane(lane, cfg, &payload, &ctx).await;
                }
                ctx.shared.lanes_running.fetch_sub(1, Ordering::SeqCst);
            }));
        }
    }
    if workload.consume.is_some() {
        for spec in plan.consumers {
            let ctx = ctx.clone();
            let workload = workload.clone();
            tasks.push(glommio::spawn_local(async move {
                if let Some(cfg) = &workload.consume {
                    consume::run_consumer(spec, cfg, &ctx).await;
                }
            }));
        }
    }
    for t in tasks {
        t.await;
    }
    ctx.stats.take()
}

/// Samples the counters once a second until `threads` threads are done.
fn monitor(
    shared: &RunShared,
    done: &AtomicUsize,
    threads: usize,
    progress: bool,
    tick: &mut dyn FnMut(u64),
) -> Vec<SeriesPoint> {
    let show = progress && std::io::stdout().is_terminal();
    let t0 = shared.clock.t0;
    let mut series = Vec::new();
    let mut last = (0u64, 0u64, 0u64, 0u64);
    let mut last_at = t0;
    let mut second = 1u64;
    while done.load(Ordering::SeqCst) < threads {
        let next = t0 + Duration::from_secs(second);
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
            continue;
        }
        let now_counts = (
            shared.produced.records(),
            shared.produced.bytes(),
            shared.consumed.records(),
            shared.consumed.bytes(),
        );
        let span = now.duration_since(last_at);
        let point = SeriesPoint {
            t_s: now.duration_since(t0).as_secs_f64(),
            produced_records_per_s: per_s(now_counts.0 - last.0, span),
            produced_mb_per_s: mb_per_s(now_counts.1 - last.1, span),
            consumed_records_per_s: per_s(now_counts.2 - last.2, span),
            consumed_mb_per_s: mb_per_s(now_counts.3 - last.3, span),
        };
        if show {
            let errors = shared.produced.errors() + shared.consumed.errors();
            let mut line = format!("[{second:>4}s]");
            if now_counts.0 > 0 || now_counts.2 == 0 {
                line.push_str(&format!(
                    " produced {:>8.1} MB/s {:>10} rec/s",
                    point.produced_mb_per_s,
                    thousands(point.produced_records_per_s as u64)
                ));
            }
            if now_counts.2 > 0 {
                line.push_str(&format!(
                    " consumed {:>8.1} MB/s {:>10} rec/s",
                    point.consumed_mb_per_s,
                    thousands(point.consumed_records_per_s as u64)
                ));
            }
            line.push_str(&format!(" errors {errors}"));
            println!("{line}");
        }
        series.push(point);
        last = now_counts;
        last_at = now;
        tick(second);
        // A slow tick must not make the next samples come in a burst.
        second = (second + 1).max(t0.elapsed().as_secs() + 1);
    }
    // The last, partial second, when it is long enough to mean something.
    let now = Instant::now();
    let span = now.duration_since(last_at);
    if span >= LAST_SAMPLE_MIN {
        series.push(SeriesPoint {
            t_s: now.duration_since(t0).as_secs_f64(),
            produced_records_per_s: per_s(shared.produced.records() - last.0, span),
            produced_mb_per_s: mb_per_s(shared.produced.bytes() - last.1, span),
            consumed_records_per_s: per_s(shared.consumed.records() - last.2, span),
            consumed_mb_per_s: mb_per_s(shared.consumed.bytes() - last.3, span),
        });
    }
    series
}
