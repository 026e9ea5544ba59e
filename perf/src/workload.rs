//! The `produce`, `consume` and `e2e` commands: set up on the main thread (topic,
//! offsets, producer ids), run the load on the executors, then print and save the report.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::admin::{Admin, AdminError, TopicLayout, EARLIEST, LATEST};
use crate::consume::{plan_consumers, ConsumeConfig, ConsumerSpec};
use crate::produce::{plan_lanes, LanePlan, LaneSpec, ProduceConfig};
use crate::report::{LatencySummary, RunReport, Throughput};
use crate::runtime::{self, RunClock, RunOptions, RunOutcome, RunShared, ThreadPlan, Workload};
use crate::{ConsumeArgs, E2eArgs, FetchArgs, LoadArgs, ProduceArgs, RunArgs, StartFrom};

/// Everything that can end a run early.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Run(String),
}

impl From<PerfError> for String {
    fn from(e: PerfError) -> String {
        e.to_string()
    }
}

/// Partitions `0..n` of the layout (all when `n` is `None`).
pub fn select_partitions(layout: &TopicLayout, n: Option<i32>) -> Result<Vec<i32>, PerfError> {
    let all: Vec<i32> = layout.leaders.keys().copied().collect();
    match n {
        None => Ok(all),
        Some(n) if n >= 1 && n <= all.len() as i32 => Ok(all[..n as usize].to_vec()),
        Some(n) => Err(PerfError::Usage(format!(
            "--partitions {n}: topic {} has {} partitions",
            layout.topic,
            all.len()
        ))),
    }
}

/// The produce settings from the command line.
pub fn produce_config(
    load: &LoadArgs,
    topic: &str,
    topic_partitions: i32,
    client_id: &str,
) -> Result<ProduceConfig, PerfError> {
    let acks = load.acks.unwrap_or(if load.idempotent { -1 } else { 1 });
    if ![0, 1, -1].contains(&acks) {
        return Err(PerfError::Usage(format!("--acks {acks}: use 0, 1 or -1")));
    }
    if load.idempotent && acks != -1 {
        return Err(PerfError::Usage(
            "--idempotent needs --acks -1 (as in Kafka)".into(),
        ));
    }
    if load.record_size == 0 && !load.keyed {
        return Err(PerfError::Usage("--record-size must be at least 1".into()));
    }
    if load.pipeline == 0 {
        return Err(PerfError::Usage("--pipeline must be at least 1".into()));
    }
    if load.pipeline > 1 && load.keyed {
        return Err(PerfError::Usage(
            "--pipeline does not take --keyed: pipelined lanes send keyless batches".into(),
        ));
    }
    if load.pipeline > 1 && acks == 0 {
        return Err(PerfError::Usage(
            "--pipeline needs --acks 1 or -1 (acks=0 requests are never answered)".into(),
        ));
    }
    let record_bytes = load.record_size + if load.keyed { load.key_size } else { 0 } + 12;
    Ok(ProduceConfig {
        topic: topic.to_string(),
        topic_partitions,
        record_size: load.record_size,
        key_size: load.keyed.then_some(load.key_size.max(1)),
        key_space: load.key_space.max(1),
        acks,
        codec: load.compression,
        batch_records: (load.batch_size / record_bytes).max(1),
        linger: Duration::from_millis(load.linger_ms),
        pipeline: load.pipeline,
        client_id: client_id.to_string(),
    })
}

/// Producer ids for idempotent producers (one per producer), else `None`.
pub fn producer_ids(
    admin: &mut Admin,
    load: &LoadArgs,
) -> Result<Option<Vec<(i64, i16)>>, PerfError> {
    if !load.idempotent {
        return Ok(None);
    }
    let ids = (0..load.producers.max(1))
        .map(|_| admin.init_producer_id())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(ids))
}

fn consume_config(fetch: &FetchArgs, topic: &str, client_id: &str) -> ConsumeConfig {
    ConsumeConfig {
        topic: topic.to_string(),
        max_wait_ms: fetch.fetch_max_wait_ms,
        min_bytes: fetch.fetch_min_bytes,
        max_bytes: fetch.fetch_max_bytes,
        partition_max_bytes: fetch.max_partition_fetch_bytes,
        check_crc: !fetch.no_check_crc,
        e2e: false,
        records_max: None,
        drain: None,
        client_id: client_id.to_string(),
    }
}

/// Deals lanes and consumers round robin over at most `threads` executors.
pub fn deal(lanes: Vec<LaneSpec>, consumers: Vec<ConsumerSpec>, threads: usize) -> Vec<ThreadPlan> {
    let items = lanes.len() + consumers.len();
    let threads = threads.clamp(1, items.max(1));
    let mut plans: Vec<ThreadPlan> = (0..threads).map(|_| ThreadPlan::default()).collect();
    let mut i = 0;
    for lane in lanes {
        plans[i % threads].lanes.push(lane);
        i += 1;
    }
    for c in consumers {
        plans[i % threads].consumers.push(c);
        i += 1;
    }
    plans
}

fn options(run: &RunArgs) -> RunOptions {
    RunOptions {
        pin_cores: run.pin_cores,
        progress: !run.quiet,
    }
}

/// Fills in what every workload reports from the finished run.
fn fill_report(report: &mut RunReport, outcome: &RunOutcome, shared: &RunShared) {
    if shared.produced.records() > 0 || report.workload != "consume" {
        report.produce = Some(Throughput::new(
            shared.produced.records(),
            shared.produced.bytes(),
            shared.produced.active(outcome.elapsed).as_secs_f64(),
        ));
    }
    if report.workload != "produce" && report.workload != "mirror" {
        report.consume = Some(Throughput::new(
            shared.consumed.records(),
            shared.consumed.bytes(),
            shared.consumed.active(outcome.elapsed).as_secs_f64(),
        ));
    }
    report.produce_latency = LatencySummary::from_histogram(&outcome.stats.produce_latency);
    report.e2e_latency = LatencySummary::from_histogram(&outcome.stats.e2e_latency);
    report.fetch_latency = LatencySummary::from_histogram(&outcome.stats.fetch_latency);
    report.errors = outcome.stats.errors.clone();
    report.series = outcome.series.clone();
}

/// Prints the summary, writes the JSON report, and fails a run that moved nothing.
pub fn finish(report: &RunReport, run: &RunArgs) -> Result<(), PerfError> {
    print!("{}", report.summary());
    if let Some(path) = &run.json_out {
        report.write_json(path).map_err(PerfError::Run)?;
        println!("  report: {}", path.display());
    }
    let moved = report.produce.as_ref().map_or(0, |t| t.records)
        + report.consume.as_ref().map_or(0, |t| t.records);
    let errors: u64 = report.errors.values().sum();
    let produced_nothing =
        report.workload != "consume" && report.produce.as_ref().is_none_or(|t| t.records == 0);
    if produced_nothing || (moved == 0 && errors > 0) {
        return Err(PerfError::Run(format!(
            "the run moved no records ({errors} errors)"
        )));
    }
    Ok(())
}

/// The report of a run that produces (`produce`, `e2e`), with its default label and
/// the settings every such run records.
#[allow(clippy::too_many_arguments)]
fn producer_report(
    workload: &str,
    run: &RunArgs,
    load: &LoadArgs,
    cfg: &ProduceConfig,
    bootstrap_server: &str,
    topic: &str,
    partitions: usize,
    rate: Option<f64>,
    duration: Duration,
) -> RunReport {
    let mut report = RunReport::new(
        workload,
        run.label.as_deref(),
        format!(
            "{workload} {} B x {partitions} partitions{}",
            load.record_size,
            rate.map_or(String::new(), |r| format!(" @ {r} rec/s"))
        ),
    );
    report.set("producers", load.producers);
    report.set("in_flight", load.in_flight);
    report.set("pipeline", load.pipeline);
    report.set("record_size", load.record_size);
    report.set("keyed", load.keyed);
    if load.keyed {
        report.set("key_size", load.key_size);
        report.set("key_space", load.key_space);
    }
    report.set("acks", cfg.acks);
    report.set("compression", cfg.codec);
    report.set("batch_size", load.batch_size);
    report.set("batch_records", cfg.batch_records);
    report.set("linger_ms", load.linger_ms);
    report.set("idempotent", load.idempotent);
    report.set("bootstrap_server", bootstrap_server);
    report.set("topic", topic);
    report.set("partitions", partitions);
    report.set("rate", rate);
    report.set("duration_s", duration.as_secs_f64());
    report.set("threads", run.threads());
    report
}

/// What `produce` and `e2e` set up alike: the topic (created if missing), the chosen
/// partitions, the producer config and the lanes that carry it.
struct ProducerSetup {
    admin: Admin,
    layout: TopicLayout,
    partitions: Vec<i32>,
    cfg: ProduceConfig,
    lanes: Vec<LaneSpec>,
}

#[allow(clippy::too_many_arguments)]
fn set_up_producers(
    bootstrap_server: &str,
    topic: &str,
    create_partitions: i32,
    partitions: Option<i32>,
    load: &LoadArgs,
    run: &RunArgs,
    rate: Option<f64>,
    records: Option<u64>,
) -> Result<ProducerSetup, String> {
    let mut admin = Admin::new(bootstrap_server, &run.client_id).map_err(PerfError::from)?;
    let layout = admin
        .ensure_topic(topic, Some(create_partitions))
        .map_err(PerfError::from)?;
    let partitions = select_partitions(&layout, partitions)?;
    let cfg = produce_config(load, topic, layout.partition_count(), &run.client_id)?;
    if cfg.pipeline > 1 && rate.is_some() {
        return Err(
            PerfError::Usage("--pipeline is for the closed loop: leave out --rate".into()).into(),
        );
    }
    let lanes = plan_lanes(
        &layout,
        &partitions,
        &LanePlan {
            producers: load.producers,
            in_flight: load.in_flight,
            rate,
            records,
            producer_ids: producer_ids(&mut admin, load)?,
        },
    );
    Ok(ProducerSetup {
        admin,
        layout,
        partitions,
        cfg,
        lanes,
    })
}

pub fn produce(args: &ProduceArgs) -> Result<(), String> {
    let ProducerSetup {
        partitions,
        cfg,
        lanes,
        ..
    } = set_up_producers(
        &args.bootstrap_server,
        &args.topic,
        args.create_partitions,
        args.partitions,
        &args.load,
        &args.run,
        args.rate,
        args.records,
    )?;
    let mut report = producer_report(
        "produce",
        &args.run,
        &args.load,
        &cfg,
        &args.bootstrap_server,
        &args.topic,
        partitions.len(),
        args.rate,
        args.duration,
    );
    report.set("records", args.records);
    let plans = deal(lanes, Vec::new(), args.run.threads());
    let shared = RunShared::new(RunClock::start(args.duration));
    let workload = Arc::new(Workload {
        produce: Some(cfg),
        consume: None,
    });
    let outcome = runtime::run(
        plans,
        workload,
        shared.clone(),
        options(&args.run),
        &mut |_| {},
    )
    .map_err(PerfError::Run)?;
    fill_report(&mut report, &outcome, &shared);
    finish(&report, &args.run)?;
    Ok(())
}

pub fn consume(args: &ConsumeArgs) -> Result<(), String> {
    let mut admin =
        Admin::new(&args.bootstrap_server, &args.run.client_id).map_err(PerfError::from)?;
    let layout = admin
        .ensure_topic(&args.topic, None)
        .map_err(PerfError::from)?;
    let partitions = select_partitions(&layout, args.partitions)?;
    let starts = admin
        .list_offsets(
            &layout,
            if args.from == StartFrom::Earliest {
                EARLIEST
            } else {
                LATEST
            },
        )
        .map_err(PerfError::from)?;
    let ends: Option<BTreeMap<i32, i64>> = if args.to_end {
        Some(
            admin
                .list_offsets(&layout, LATEST)
                .map_err(PerfError::from)?,
        )
    } else {
        None
    };
    let specs = plan_consumers(&layout, &partitions, args.consumers, &starts, ends.as_ref());
    let mut cfg = consume_config(&args.fetch, &args.topic, &args.run.client_id);
    cfg.records_max = args.records;
    let mut report = RunReport::new(
        "consume",
        args.run.label.as_deref(),
        format!("consume x {} partitions", partitions.len()),
    );
    report.set("bootstrap_server", &args.bootstrap_server);
    report.set("topic", &args.topic);
    report.set("partitions", partitions.len());
    report.set("consumers", args.consumers);
    report.set("from", format!("{:?}", args.from).to_lowercase());
    report.set("to_end", args.to_end);
    report.set("records", args.records);
    report.set("duration_s", args.duration.as_secs_f64());
    report.set("fetch_max_wait_ms", args.fetch.fetch_max_wait_ms);
    report.set("fetch_max_bytes", args.fetch.fetch_max_bytes);
    report.set(
        "max_partition_fetch_bytes",
        args.fetch.max_partition_fetch_bytes,
    );
    report.set("check_crc", cfg.check_crc);
    report.set("threads", args.run.threads());
    let plans = deal(Vec::new(), specs, args.run.threads());
    let shared = RunShared::new(RunClock::start(args.duration));
    let workload = Arc::new(Workload {
        produce: None,
        consume: Some(cfg),
    });
    let outcome = runtime::run(
        plans,
        workload,
        shared.clone(),
        options(&args.run),
        &mut |_| {},
    )
    .map_err(PerfError::Run)?;
    fill_report(&mut report, &outcome, &shared);
    finish(&report, &args.run)?;
    Ok(())
}

pub fn e2e(args: &E2eArgs) -> Result<(), String> {
    let ProducerSetup {
        mut admin,
        layout,
        partitions,
        cfg: pcfg,
        lanes,
    } = set_up_producers(
        &args.bootstrap_server,
        &args.topic,
        args.create_partitions,
        args.partitions,
        &args.load,
        &args.run,
        args.rate,
        None,
    )?;
    // Consumers start at the end: they see exactly what this run produces.
    let starts = admin
        .list_offsets(&layout, LATEST)
        .map_err(PerfError::from)?;
    let specs = plan_consumers(&layout, &partitions, args.consumers, &starts, None);
    let mut ccfg = consume_config(&args.fetch, &args.topic, &args.run.client_id);
    ccfg.e2e = true;
    ccfg.drain = Some(args.drain);
    let mut report = producer_report(
        "e2e",
        &args.run,
        &args.load,
        &pcfg,
        &args.bootstrap_server,
        &args.topic,
        partitions.len(),
        args.rate,
        args.duration,
    );
    report.set("consumers", args.consumers);
    let plans = deal(lanes, specs, args.run.threads());
    let shared = RunShared::new(RunClock::start(args.duration));
    let workload = Arc::new(Workload {
        produce: Some(pcfg),
        consume: Some(ccfg),
    });
    let outcome = runtime::run(
        plans,
        workload,
        shared.clone(),
        options(&args.run),
        &mut |_| {},
    )
    .map_err(PerfError::Run)?;
    fill_report(&mut report, &outcome, &shared);
    finish(&report, &args.run)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load() -> LoadArgs {
        LoadArgs {
            producers: 1,
            in_flight: 5,
            pipeline: 1,
            record_size: 1024,
            keyed: false,
            key_size: 16,
            key_space: 100,
            acks: None,
            compression: crate::batch::Codec::None,
            batch_size: 128 * 1024,
            linger_ms: 5,
            idempotent: false,
        }
    }

    #[test]
    fn produce_settings() {
        let cfg = produce_config(&load(), "t", 8, "c").expect("valid");
        assert_eq!(cfg.acks, 1);
        assert_eq!(cfg.batch_records, 128 * 1024 / 1036);
        let idem = LoadArgs {
            idempotent: true,
            ..load()
        };
        assert_eq!(produce_config(&idem, "t", 8, "c").expect("valid").acks, -1);
        let bad = LoadArgs {
            idempotent: true,
            acks: Some(1),
            ..load()
        };
        assert!(produce_config(&bad, "t", 8, "c").is_err());
        let bad = LoadArgs {
            acks: Some(2),
            ..load()
        };
        assert!(produce_config(&bad, "t", 8, "c").is_err());
    }

    #[test]
    fn partitions_and_dealing() {
        let layout = TopicLayout {
            topic: "t".into(),
            leaders: (0..4).map(|p| (p, "h:1".to_string())).collect(),
        };
        assert_eq!(select_partitions(&layout, None).expect("all").len(), 4);
        assert_eq!(
            select_partitions(&layout, Some(2)).expect("two"),
            vec![0, 1]
        );
        assert!(select_partitions(&layout, Some(5)).is_err());
        assert!(select_partitions(&layout, Some(0)).is_err());
        let lanes = plan_lanes(
            &layout,
            &[0, 1, 2, 3],
            &LanePlan {
                producers: 1,
                in_flight: 4,
                rate: None,
                records: None,
                producer_ids: None,
            },
        );
        let plans = deal(lanes, Vec::new(), 3);
        assert_eq!(plans.len(), 3);
        assert_eq!(plans.iter().map(|p| p.lanes.len()).sum::<usize>(), 4);
        assert_eq!(deal(Vec::new(), Vec::new(), 4).len(), 1);
    }
}
