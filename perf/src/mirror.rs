//! The `mirror` command: how fast native mirroring copies and how far behind it runs.
//!
//! 1. Fill: produce `--records` to the source topic (max rate).
//! 2. Catch-up: CreateMirror and AddTopicsToMirror on the destination, then poll
//!    DescribeMirrors until every partition is MIRRORING with lag 0 and its destination
//!    log end equals the source end offset measured after the fill. Throughput is the
//!    filled bytes over the time from AddTopicsToMirror to that moment.
//! 3. Steady (`--steady-rate`): produce to the source at a fixed rate and sample, every
//!    second, the lag in records (DescribeMirrors, summed over partitions) and in
//!    milliseconds (newest record timestamp on the source minus that on the
//!    destination, the largest over partitions: the recovery point an operator sees).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::wire::mirror::{
    errors as mirror_errors, AddTopicsToMirrorRequest, CreateMirrorRequest, DescribeMirrorsRequest,
    DescribedMirrorPartition, MirrorRequest, MirrorResponse, MirrorTopicMetadata,
};

use crate::admin::{Admin, AdminError, TopicLayout, LATEST};
use crate::produce::{plan_lanes, LanePlan};
use crate::report::{
    CatchUp, MirrorPoint, MirrorReport, RunReport, SampleSummary, Steady, Throughput,
};
use crate::runtime::{self, RunClock, RunOptions, RunShared, Workload};
use crate::util::error_name;
use crate::workload::{deal, finish, produce_config, producer_ids, PerfError};
use crate::MirrorArgs;

/// Catch-up progress is kept at most this often (seconds).
const CATCH_UP_SAMPLE_MIN_S: f64 = 0.1;
/// The fill has no time limit of its own, only its record count.
const FILL_DURATION_MAX: Duration = Duration::from_secs(24 * 3600);

pub fn run(args: &MirrorArgs) -> Result<(), String> {
    Ok(run_inner(args)?)
}

fn run_inner(args: &MirrorArgs) -> Result<(), PerfError> {
    let client_id = &args.run.client_id;
    let mut source = Admin::new(&args.source, client_id)?;
    let mut destination = Admin::new(&args.destination, client_id)?;
    let layout = source.ensure_topic(&args.topic, Some(args.create_partitions))?;
    let partitions: Vec<i32> = layout.leaders.keys().copied().collect();
    let cfg = produce_config(&args.load, &args.topic, layout.partition_count(), client_id)?;
    let ids = producer_ids(&mut source, &args.load)?;
    let options = RunOptions {
        pin_cores: args.run.pin_cores,
        progress: !args.run.quiet,
    };
    let mut report = RunReport::new(
        "mirror",
        args.run.label.as_deref(),
        format!(
            "mirror {} x {} B, {} partitions",
            args.records,
            args.load.record_size,
            partitions.len()
        ),
    );
    report.set("source", &args.source);
    report.set("destination", &args.destination);
    report.set("topic", &args.topic);
    report.set("records", args.records);
    report.set("record_size", args.load.record_size);
    report.set("compression", cfg.codec);
    report.set("batch_size", args.load.batch_size);
    report.set("producers", args.load.producers);
    report.set("steady_rate", args.steady_rate);
    report.set("duration_s", args.duration.as_secs_f64());
    let workload = Arc::new(Workload {
        produce: Some(cfg),
        consume: None,
    });

    // 1. Fill.
    eprintln!(
        "twinlog-perf: filling {} with {} records",
        args.topic, args.records
    );
    let lanes = plan_lanes(
        &layout,
        &partitions,
        &LanePlan {
            producers: args.load.producers,
            in_flight: args.load.in_flight,
            rate: None,
            records: Some(args.records),
            producer_ids: ids.clone(),
        },
    );
    let shared = RunShared::new(RunClock::start(FILL_DURATION_MAX));
    let fill_run = runtime::run(
        deal(lanes, Vec::new(), args.run.threads()),
        workload.clone(),
        shared.clone(),
        options,
        &mut |_| {},
    )
    .map_err(PerfError::Run)?;
    let fill = Throughput::new(
        shared.produced.records(),
        shared.produced.bytes(),
        shared.produced.active(fill_run.elapsed).as_secs_f64(),
    );
    let mut errors = fill_run.stats.errors.clone();
    if fill.records < args.records {
        return Err(PerfError::Run(format!(
            "the fill produced {} of {} records; errors: {errors:?}",
            fill.records, args.records
        )));
    }
    let ends = source.list_offsets(&layout, LATEST)?;
    let total_records: i64 = ends.values().sum();

    // 2. Catch-up.
    let mut configs = vec![("bootstrap.servers".to_string(), Some(args.source.clone()))];
    for kv in &args.mirror_configs {
        let (k, v) = kv.split_once('=').ok_or_else(|| {
            PerfError::Usage(format!("--mirror-config {kv:?}: expected key=value"))
        })?;
        configs.push((k.to_string(), Some(v.to_string())));
    }
    match destination.mirror(&MirrorRequest::CreateMirror(CreateMirrorRequest {
        mirror_name: args.mirror_name.clone(),
        configs: configs.into_iter().map(Into::into).collect(),
    }))? {
        MirrorResponse::CreateMirror(r) if r.error_code == 0 => {}
        MirrorResponse::CreateMirror(r)
            if r.error_code == mirror_errors::CLUSTER_MIRROR_ALREADY_EXISTS =>
        {
            eprintln!(
                "twinlog-perf: mirror {} exists on the destination; reusing it",
                args.mirror_name
            );
        }
        MirrorResponse::CreateMirror(r) => {
            return Err(PerfError::Run(format!(
                "CreateMirror {}: {}{}",
                args.mirror_name,
                error_name(r.error_code),
                r.error_message
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            )))
        }
        other => return Err(unexpected(&other)),
    }
    eprintln!(
        "twinlog-perf: mirroring {} ({} records in {} partitions) into {}",
        args.topic,
        total_records,
        partitions.len(),
        args.destination
    );
    let added_at = Instant::now();
    match destination.mirror(&MirrorRequest::AddTopicsToMirror(
        AddTopicsToMirrorRequest {
            mirror_name: args.mirror_name.clone(),
            topics: vec![MirrorTopicMetadata {
                // The destination looks both up on the source.
                topic_id: uuid::Uuid::nil(),
                name: args.topic.clone(),
                num_partitions: -1,
            }],
            state_validation_offset: -1,
            ..Default::default()
        },
    ))? {
        MirrorResponse::AddTopicsToMirror(r) => {
            let failed: Vec<String> = r
                .topics
                .iter()
                .filter(|t| t.error_code != 0)
                .map(|t| format!("{}: {}", t.name, error_name(t.error_code)))
                .collect();
            if r.error_code != 0 || !failed.is_empty() {
                return Err(PerfError::Run(format!(
                    "AddTopicsToMirror: {} {}",
                    error_name(r.error_code),
                    failed.join(", ")
                )));
            }
        }
        other => return Err(unexpected(&other)),
    }
    let catch_up = wait_caught_up(args, &mut destination, &ends, added_at)?;
    let seconds = catch_up.0.as_secs_f64();
    // The filled bytes, scaled when the topic held records before this run.
    let bytes = if total_records as u64 == fill.records || fill.records == 0 {
        fill.bytes
    } else {
        (fill.bytes as f64 * total_records as f64 / fill.records as f64) as u64
    };
    let mut mirror = MirrorReport {
        source: args.source.clone(),
        destination: args.destination.clone(),
        mirror_name: args.mirror_name.clone(),
        partitions: layout.partition_count(),
        fill,
        catch_up: CatchUp {
            throughput: Throughput::new(total_records.max(0) as u64, bytes, seconds),
            first_record_s: catch_up.1,
            series: catch_up.2,
        },
        steady: None,
    };

    // 3. Steady rate.
    if let Some(rate) = args.steady_rate {
        eprintln!(
            "twinlog-perf: producing {rate} records/s to the source for {:.0} s",
            args.duration.as_secs_f64()
        );
        let dest_layout = destination
            .topic_layout(&args.topic)?
            .ok_or_else(|| PerfError::Run(format!("{} is not on the destination", args.topic)))?;
        let lanes = plan_lanes(
            &layout,
            &partitions,
            &LanePlan {
                producers: args.load.producers,
                in_flight: args.load.in_flight,
                rate: Some(rate),
                records: None,
                producer_ids: ids,
            },
        );
        let shared = RunShared::new(RunClock::start(args.duration));
        let t0 = shared.clock.t0;
        let mut samples: Vec<MirrorPoint> = Vec::new();
        let mut sample_errors: BTreeMap<String, u64> = BTreeMap::new();
        let mut tick = |_second: u64| match sample_lag(
            args,
            &mut source,
            &mut destination,
            &layout,
            &dest_layout,
        ) {
            Ok((lag_records, lag_ms)) => samples.push(MirrorPoint {
                t_s: t0.elapsed().as_secs_f64(),
                lag_records,
                lag_ms,
                ..MirrorPoint::default()
            }),
            Err(e) => *sample_errors.entry(format!("lag sample: {e}")).or_default() += 1,
        };
        let steady_run = runtime::run(
            deal(lanes, Vec::new(), args.run.threads()),
            workload,
            shared.clone(),
            options,
            &mut tick,
        )
        .map_err(PerfError::Run)?;
        for (k, v) in steady_run.stats.errors.iter().chain(&sample_errors) {
            *errors.entry(k.clone()).or_default() += v;
        }
        let lag_records: Vec<f64> = samples.iter().map(|s| s.lag_records as f64).collect();
        let lag_ms: Vec<f64> = samples.iter().map(|s| s.lag_ms as f64).collect();
        report.produce_latency =
            crate::report::LatencySummary::from_histogram(&steady_run.stats.produce_latency);
        report.series = steady_run.series.clone();
        mirror.steady = Some(Steady {
            rate,
            seconds: steady_run.elapsed.as_secs_f64(),
            produce: Throughput::new(
                shared.produced.records(),
                shared.produced.bytes(),
                shared.produced.active(steady_run.elapsed).as_secs_f64(),
            ),
            lag_records: SampleSummary::of(&lag_records),
            lag_ms: SampleSummary::of(&lag_ms),
            series: samples,
        });
    } else {
        report.series = fill_run.series.clone();
    }
    report.produce = Some(mirror.fill.clone());
    report.errors = errors;
    report.mirror = Some(mirror);
    finish(&report, &args.run)
}

fn unexpected(r: &MirrorResponse) -> PerfError {
    PerfError::Run(format!("unexpected mirror response (key {})", r.api_key()))
}

/// The mirror's partitions of `topic`, by partition.
fn describe(
    admin: &mut Admin,
    mirror: &str,
    topic: &str,
) -> Result<BTreeMap<i32, DescribedMirrorPartition>, AdminError> {
    match admin.mirror(&MirrorRequest::DescribeMirrors(DescribeMirrorsRequest {
        mirror_names: Some(vec![mirror.to_string()]),
        ..Default::default()
    }))? {
        MirrorResponse::DescribeMirrors(r) => {
            if r.error_code != 0 {
                return Err(AdminError::Kafka {
                    what: format!("DescribeMirrors {mirror}"),
                    code: r.error_code,
                });
            }
            let mut out = BTreeMap::new();
            for m in r.mirrors {
                if m.error_code != 0 {
                    return Err(AdminError::Kafka {
                        what: format!("DescribeMirrors {}", m.mirror_name),
                        code: m.error_code,
                    });
                }
                for t in m.topics.into_iter().filter(|t| t.name == topic) {
                    for p in t.partitions {
                        out.insert(p.partition, p);
                    }
                }
            }
            Ok(out)
        }
        other => Err(AdminError::Other(format!(
            "unexpected mirror response (key {})",
            other.api_key()
        ))),
    }
}

/// Polls until every partition is caught up with `ends`. Returns the time taken, when
/// the first record arrived, and a sample per second.
fn wait_caught_up(
    args: &MirrorArgs,
    destination: &mut Admin,
    ends: &BTreeMap<i32, i64>,
    added_at: Instant,
) -> Result<(Duration, Option<f64>, Vec<MirrorPoint>), PerfError> {
    let mut series = vec![MirrorPoint::default()];
    let mut first_record_s = None;
    let mut next_progress = 1.0;
    let mut last_sample = (0.0f64, 0u64);
    let poll = Duration::from_millis(args.poll_ms.max(1));
    let show = !args.run.quiet && std::io::IsTerminal::is_terminal(&std::io::stdout());
    loop {
        let parts = describe(destination, &args.mirror_name, &args.topic)?;
        let t = added_at.elapsed().as_secs_f64();
        let mirrored: u64 = parts
            .values()
            .map(|p| p.destination_offset.max(0) as u64)
            .sum();
        if mirrored > 0 && first_record_s.is_none() {
            first_record_s = Some(t);
        }
        let done = parts.len() == ends.len()
            && ends.iter().all(|(p, end)| {
                parts.get(p).is_some_and(|d| {
                    d.state == "MIRRORING" && d.lag == 0 && d.destination_offset == *end
                })
            });
        if done || t - last_sample.0 >= CATCH_UP_SAMPLE_MIN_S {
            let span = t - last_sample.0;
            series.push(MirrorPoint {
                t_s: t,
                mirrored_records: mirrored,
                records_per_s: if span > 0.0 {
                    mirrored.saturating_sub(last_sample.1) as f64 / span
                } else {
                    0.0
                },
                ..MirrorPoint::default()
            });
            last_sample = (t, mirrored);
        }
        if show && t >= next_progress {
            let states: BTreeMap<&str, usize> = parts.values().fold(BTreeMap::new(), |mut m, p| {
                *m.entry(p.state.as_str()).or_default() += 1;
                m
            });
            println!(
                "[{t:>6.1}s] mirrored {mirrored} of {} records, states {states:?}",
                ends.values().sum::<i64>()
            );
            next_progress = t.floor() + 1.0;
        }
        if done {
            return Ok((added_at.elapsed(), first_record_s, series));
        }
        if added_at.elapsed() > args.catch_up_timeout {
            return Err(PerfError::Run(format!(
                "mirror not caught up after {:.0} s: {parts:?}",
                args.catch_up_timeout.as_secs_f64()
            )));
        }
        std::thread::sleep(poll);
    }
}

/// (lag in records summed over partitions, largest lag in ms) right now.
fn sample_lag(
    args: &MirrorArgs,
    source: &mut Admin,
    destination: &mut Admin,
    source_layout: &TopicLayout,
    dest_layout: &TopicLayout,
) -> Result<(i64, i64), AdminError> {
    let parts = describe(destination, &args.mirror_name, &args.topic)?;
    let lag_records: i64 = parts.values().map(|p| p.lag.max(0)).sum();
    // Destination first: the source is read after it, so the time the reads take can
    // only make the lag look larger, never hide it.
    let dest_ends = destination.list_offsets(dest_layout, LATEST)?;
    let dest_ts = destination.newest_timestamps(dest_layout, &dest_ends)?;
    let source_ends = source.list_offsets(source_layout, LATEST)?;
    let source_ts = source.newest_timestamps(source_layout, &source_ends)?;
    let lag_ms = source_ts
        .iter()
        .filter_map(|(p, ts)| {
            let src = (*ts)?;
            // A partition with nothing mirrored yet has no timestamp to compare.
            let dst = dest_ts.get(p).copied().flatten()?;
            Some((src - dst).max(0))
        })
        .max()
        .unwrap_or(0);
    Ok((lag_records, lag_ms))
}
