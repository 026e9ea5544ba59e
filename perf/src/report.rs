//! The report of one run: what `--json-out` writes, what `report` reads back, and the
//! summary printed at the end of a run. Throughput in MB is 10^6 bytes of record
//! batches as they travel and are stored (headers included, compressed if compressed);
//! latencies are in milliseconds.

use std::collections::BTreeMap;
use std::path::Path;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::util::thousands;

/// Version of the JSON layout.
pub const REPORT_FORMAT: u32 = 1;

/// The percentiles every latency summary carries, with their JSON names.
pub const PERCENTILES: [(&str, f64); 4] =
    [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9)];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p99_9_ms: f64,
    pub max_ms: f64,
}

impl LatencySummary {
    /// From a histogram in microseconds; `None` when it is empty.
    pub fn from_histogram(h: &Histogram<u64>) -> Option<LatencySummary> {
        if h.is_empty() {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Some(LatencySummary {
            count: h.len(),
            mean_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p99_9_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        })
    }

    /// (label, ms) for p50, p90, p99, p99.9 and max, in that order.
    pub fn points(&self) -> [(&'static str, f64); 5] {
        [
            (PERCENTILES[0].0, self.p50_ms),
            (PERCENTILES[1].0, self.p90_ms),
            (PERCENTILES[2].0, self.p99_ms),
            (PERCENTILES[3].0, self.p99_9_ms),
            ("max", self.max_ms),
        ]
    }

    pub fn line(&self) -> String {
        format!(
            "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms ({} samples)",
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.p99_9_ms,
            self.max_ms,
            thousands(self.count)
        )
    }
}

/// Min, mean, percentiles and max of a sampled value (mirror lag).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SampleSummary {
    pub samples: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl SampleSummary {
    pub fn of(values: &[f64]) -> SampleSummary {
        if values.is_empty() {
            return SampleSummary::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        SampleSummary {
            samples: v.len() as u64,
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: at(0.5),
            p99: at(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// Records and bytes moved in some time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Throughput {
    pub records: u64,
    /// Record batch bytes.
    pub bytes: u64,
    pub seconds: f64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
}

impl Throughput {
    pub fn new(records: u64, bytes: u64, seconds: f64) -> Throughput {
        let per = |x: u64| {
            if seconds > 0.0 {
                x as f64 / seconds
            } else {
                0.0
            }
        };
        Throughput {
            records,
            bytes,
            seconds,
            records_per_s: per(records),
            mb_per_s: per(bytes) / 1e6,
        }
    }

    pub fn line(&self) -> String {
        format!(
            "{} records, {:.1} MB in {:.2} s: {:.1} MB/s, {} records/s",
            thousands(self.records),
            self.bytes as f64 / 1e6,
            self.seconds,
            self.mb_per_s,
            thousands(self.records_per_s.round() as u64)
        )
    }
}

/// One second of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeriesPoint {
    pub t_s: f64,
    pub produced_records_per_s: f64,
    pub produced_mb_per_s: f64,
    pub consumed_records_per_s: f64,
    pub consumed_mb_per_s: f64,
}

/// One sample of mirror progress or lag.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MirrorPoint {
    pub t_s: f64,
    /// Records on the destination (catch-up) so far.
    pub mirrored_records: u64,
    /// Catch-up: records per second since the previous sample.
    pub records_per_s: f64,
    /// Steady: sum over partitions of DescribeMirrors' lag.
    pub lag_records: i64,
    /// Steady: largest per-partition difference of newest record timestamps, source
    /// minus destination.
    pub lag_ms: i64,
}

/// Catch-up of a filled topic.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CatchUp {
    /// From AddTopicsToMirror until every partition is MIRRORING with lag 0 at the
    /// source's end offsets.
    pub throughput: Throughput,
    /// Seconds until the first mirrored record showed up (PREPARING and the first fetch).
    pub first_record_s: Option<f64>,
    pub series: Vec<MirrorPoint>,
}

/// Mirror lag under a steady produce rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Steady {
    pub rate: f64,
    pub seconds: f64,
    pub produce: Throughput,
    pub lag_records: SampleSummary,
    pub lag_ms: SampleSummary,
    pub series: Vec<MirrorPoint>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MirrorReport {
    pub source: String,
    pub destination: String,
    pub mirror_name: String,
    pub partitions: i32,
    pub fill: Throughput,
    pub catch_up: CatchUp,
    pub steady: Option<Steady>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MachineInfo {
    pub cores: usize,
    pub cpu_model: String,
    pub kernel: String,
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunReport {
    pub format: u32,
    /// Short name for charts (`--label`, else the workload and its main settings).
    pub label: String,
    /// produce, consume, e2e or mirror.
    pub workload: String,
    pub command: String,
    /// UTC, RFC 3339.
    pub date: String,
    pub machine: MachineInfo,
    /// The workload's settings.
    pub config: BTreeMap<String, serde_json::Value>,
    pub produce: Option<Throughput>,
    pub consume: Option<Throughput>,
    /// Produce acknowledgement latency (from the intended send time).
    pub produce_latency: Option<LatencySummary>,
    /// From the record's send-time stamp to its arrival at a consumer.
    pub e2e_latency: Option<LatencySummary>,
    /// Round trip of each Fetch.
    pub fetch_latency: Option<LatencySummary>,
    /// Error -> count.
    pub errors: BTreeMap<String, u64>,
    pub series: Vec<SeriesPoint>,
    pub mirror: Option<MirrorReport>,
}

impl RunReport {
    pub fn new(workload: &str, label: Option<&str>, default_label: String) -> RunReport {
        let m = crate::ceilings::Machine::describe();
        RunReport {
            format: REPORT_FORMAT,
            label: label.map_or(default_label, str::to_string),
            workload: workload.to_string(),
            command: crate::util::command_line(),
            date: crate::util::utc_now_rfc3339(),
            machine: MachineInfo {
                cores: m.cpus,
                cpu_model: m.cpu_model,
                kernel: m.kernel,
            },
            ..RunReport::default()
        }
    }

    pub fn set(&mut self, key: &str, value: impl Serialize) {
        if let Ok(v) = serde_json::to_value(value) {
            self.config.insert(key.to_string(), v);
        }
    }

    /// The run's headline throughput: mirror catch-up, else consume for consume runs,
    /// else produce.
    pub fn headline(&self) -> Option<&Throughput> {
        if let Some(m) = &self.mirror {
            return Some(&m.catch_up.throughput);
        }
        match self.workload.as_str() {
            "consume" => self.consume.as_ref(),
            _ => self.produce.as_ref().or(self.consume.as_ref()),
        }
    }

    /// The run's headline latency: end to end when measured, else produce.
    pub fn headline_latency(&self) -> Option<(&'static str, &LatencySummary)> {
        if let Some(l) = &self.e2e_latency {
            return Some(("end-to-end", l));
        }
        if let Some(l) = &self.produce_latency {
            return Some(("produce ack", l));
        }
        self.fetch_latency.as_ref().map(|l| ("fetch", l))
    }

    pub fn write_json(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn read_json(path: &Path) -> Result<RunReport, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The summary printed at the end of a run.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line(format!("{} ({})", self.label, self.date));
        line(format!("  command: {}", self.command));
        line(format!(
            "  machine: {} cores, {}",
            self.machine.cores, self.machine.cpu_model
        ));
        if let Some(t) = &self.produce {
            line(format!("  produced: {}", t.line()));
        }
        if let Some(l) = &self.produce_latency {
            line(format!("  produce latency: {}", l.line()));
        }
        if let Some(t) = &self.consume {
            line(format!("  consumed: {}", t.line()));
        }
        if let Some(l) = &self.e2e_latency {
            line(format!("  end-to-end latency: {}", l.line()));
        }
        if let Some(l) = &self.fetch_latency {
            line(format!("  fetch round trip: {}", l.line()));
        }
        if let Some(m) = &self.mirror {
            line(format!("  fill: {}", m.fill.line()));
            line(format!(
                "  mirror catch-up: {}",
                m.catch_up.throughput.line()
            ));
            if let Some(s) = m.catch_up.first_record_s {
                line(format!("    first mirrored record after {s:.2} s"));
            }
            if let Some(s) = &m.steady {
                line(format!(
                    "  steady {} records/s for {:.0} s: produced {}",
                    thousands(s.rate.round() as u64),
                    s.seconds,
                    s.produce.line()
                ));
                line(format!(
                    "    mirror lag: records p50 {:.0}, p99 {:.0}, max {:.0}; ms p50 {:.0}, p99 {:.0}, max {:.0} ({} samples)",
                    s.lag_records.p50,
                    s.lag_records.p99,
                    s.lag_records.max,
                    s.lag_ms.p50,
                    s.lag_ms.p99,
                    s.lag_ms.max,
                    s.lag_ms.samples
                ));
            }
        }
        let errors: u64 = self.errors.values().sum();
        line(format!("  errors: {errors}"));
        for (what, n) in &self.errors {
            line(format!("    {n} x {what}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_summary_from_histogram() {
        let mut h = crate::runtime::latency_histogram();
        assert!(LatencySummary::from_histogram(&h).is_none());
        for us in 1..=1000u64 {
            h.record(us * 1000).expect("in range");
        }
        let s = LatencySummary::from_histogram(&h).expect("samples");
        assert_eq!(s.count, 1000);
        assert!((s.p50_ms - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.p99_ms - 990.0).abs() < 2.0, "{s:?}");
        assert!((s.max_ms - 1000.0).abs() < 1.0, "{s:?}");
        assert_eq!(s.points()[4].0, "max");
    }

    #[test]
    fn sample_summary() {
        let s = SampleSummary::of(&[3.0, 1.0, 2.0]);
        assert_eq!(s.samples, 3);
        assert_eq!(s.p50, 2.0);
        assert_eq!(s.max, 3.0);
        assert_eq!(SampleSummary::of(&[]).samples, 0);
    }

    #[test]
    fn reports_round_trip_through_json() {
        let mut r = RunReport::new("produce", None, "produce 1 KiB".into());
        r.set("record_size", 1024);
        r.produce = Some(Throughput::new(1000, 1_000_000, 2.0));
        r.errors.insert("produce: NotLeaderOrFollower".into(), 2);
        let dir = std::env::temp_dir().join(format!("twinlog-perf-report-{}", std::process::id()));
        let path = dir.with_extension("json");
        r.write_json(&path).expect("writes");
        let back = RunReport::read_json(&path).expect("reads");
        let _ = std::fs::remove_file(&path);
        assert_eq!(back, r);
        assert_eq!(back.headline().map(|t| t.mb_per_s), Some(0.5));
        assert!(r.summary().contains("2 x produce: NotLeaderOrFollower"));
        // Unknown and missing fields are fine (older and newer reports).
        let old: RunReport =
            serde_json::from_str(r#"{"label": "x", "extra": 1}"#).expect("lenient");
        assert_eq!(old.label, "x");
    }
}
