//! The Prometheus endpoint during a real mirror: two Twinlog processes with
//! `metrics.listen`, confluent-kafka producing on the source, the destination mirroring
//! it; `GET /metrics` on both answers with the request, shard, io_uring and mirror
//! series, with values that match what happened.

mod mirror_support;
mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use mirror_support::*;
use support::*;

const BROKER_CONFIG: &str = r#"
"mirror.state.topic.num.partitions" = 3
"offsets.topic.num.partitions" = 3
"num.partitions" = 4
"transaction.state.log.num.partitions" = 3
"mirror.failed.retry.initial.backoff.ms" = 200
"#;

const TOPIC: &str = "metered";
const PARTITIONS: usize = 4;
const RECORDS: usize = 20_000;

/// One sample line: name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// `GET /metrics` over a plain HTTP/1.0 request; panics unless it answers 200 with the
/// Prometheus text format.
fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to /metrics");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .expect("send request");
    let mut response = String::new();
    s.read_to_string(&mut response).expect("read response");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {response:?}"));
    assert!(head.starts_with("HTTP/1."), "{head}");
    assert!(head.contains(" 200 "), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.to_string()
}

fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad sample line {line:?}"));
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|_| panic!("bad value in {line:?}")),
            };
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => {
                    let inner = rest.strip_suffix('}').expect("closing brace");
                    let labels = inner
                        .split("\",")
                        .filter(|kv| !kv.is_empty())
                        .map(|kv| {
                            let (k, v) = kv.split_once("=\"").expect("label k=\"v\"");
                            (k.to_string(), v.trim_end_matches('"').to_string())
                        })
                        .collect();
                    (name.to_string(), labels)
                }
                None => (series.to_string(), BTreeMap::new()),
            };
            Sample {
                name,
                labels,
                value,
            }
        })
        .collect()
}

/// The samples named `name` whose labels include every pair of `with`.
fn select<'a>(samples: &'a [Sample], name: &str, with: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && with
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

fn sum(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    select(samples, name, with).iter().map(|s| s.value).sum()
}

fn log_ends(bootstrap: &str) -> BTreeMap<(String, i32), i64> {
    (0..PARTITIONS as i32)
        .map(|p| {
            let end = read_log(bootstrap, TOPIC, p)
                .last()
                .map_or(0, |b| b.next_offset().0);
            ((TOPIC.to_string(), p), end)
        })
        .collect()
}

/// Scrapes until `check` holds (the gauges are sampled once a second, lag is probed
/// once a second), then returns the samples; panics with the last scrape after
/// `timeout`.
fn scrape_until(
    addr: SocketAddr,
    what: &str,
    timeout: Duration,
    check: impl Fn(&[Sample]) -> Result<(), String>,
) -> Vec<Sample> {
    let start = Instant::now();
    loop {
        let text = scrape(addr);
        let samples = parse(&text);
        match check(&samples) {
            Ok(()) => return samples,
            Err(why) if start.elapsed() > timeout => {
                panic!("timed out waiting for {what}: {why}\n--- last scrape ---\n{text}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

fn broker_with_metrics() -> (Broker, SocketAddr) {
    let port = free_port();
    let config = format!("{BROKER_CONFIG}\"metrics.listen\" = \"127.0.0.1:{port}\"\n");
    let broker = Broker::start(&config);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    (broker, addr)
}

#[test]
fn metrics_endpoint_answers_with_request_shard_and_mirror_series_during_a_mirror() {
    let py = venv_python();
    if skip_if(
        missing_python_modules(&py, &["confluent_kafka"]),
        "metrics_endpoint_answers_with_request_shard_and_mirror_series_during_a_mirror",
    ) {
        return;
    }
    let (a, a_metrics) = broker_with_metrics();
    let (b, b_metrics) = broker_with_metrics();
    let partition_count = PARTITIONS.to_string();
    let created = run_command(
        Command::new(env!("CARGO_BIN_EXE_twinlog"))
            .args(["topic", "create", TOPIC, "--partitions", &partition_count])
            .arg("--bootstrap-server")
            .arg(a.bootstrap()),
        None,
        Duration::from_secs(30),
    );
    assert!(created.success(), "{}", created.describe());
    let count = RECORDS.to_string();
    let out = run_python(
        &py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &a.bootstrap(),
            "--topic",
            TOPIC,
            "--partitions",
            &partition_count,
            "--count",
            &count,
        ],
        Duration::from_secs(240),
    );
    assert_success(&out, &a);
    let ends = log_ends(&a.bootstrap());
    let total: i64 = ends.values().sum();
    assert_eq!(total, RECORDS as i64, "every record is on the source");

    let r = create_mirror(&b.bootstrap(), "m", &a.bootstrap(), &[]);
    assert_eq!(r.error_code, 0, "create mirror: {r:?}");
    let r = add_topics(&b.bootstrap(), "m", &[TOPIC]);
    assert_eq!(r.error_code, 0, "add topics: {r:?}\n{}", b.log_tail(40));
    wait_for(
        &b.bootstrap(),
        "m",
        "catch-up",
        Duration::from_secs(120),
        |d| caught_up(d, &ends),
    );

    // A write to the read-only mirror topic is refused: counted as a Produce error.
    let rejected = run_python(
        &py,
        "mirror_load.py",
        &[
            "--bootstrap",
            &b.bootstrap(),
            "--topic",
            TOPIC,
            "--partitions",
            &partition_count,
            "--count",
            "10",
        ],
        Duration::from_secs(120),
    );
    assert!(!rejected.success(), "produce to a mirror topic must fail");

    // DescribeMirrors (and the CLI) show the lag in ms once it has been probed.
    let d = wait_for(
        &b.bootstrap(),
        "m",
        "lag_ms probed",
        Duration::from_secs(30),
        |d| {
            let p = partitions(d);
            p.len() == PARTITIONS && p.values().all(|p| p.lag_ms >= 0)
        },
    );
    for p in partitions(&d).values() {
        assert_eq!(p.lag_ms, 0, "caught up, so no lag in time: {p:?}");
    }
    let described = run_command(
        Command::new(env!("CARGO_BIN_EXE_twinlog"))
            .args(["mirror", "describe", "m", "--json"])
            .arg("--bootstrap-server")
            .arg(b.bootstrap()),
        None,
        Duration::from_secs(30),
    );
    assert!(described.success(), "{}", described.describe());
    assert!(
        described.stdout.contains("\"lag_ms\":0"),
        "{}",
        described.stdout
    );

    // The destination: mirror series.
    let labels_m = [("mirror", "m")];
    let samples = scrape_until(
        b_metrics,
        "mirror series on the destination",
        Duration::from_secs(30),
        |s| {
            let appended = sum(s, "twinlog_mirror_records_appended_total", &labels_m);
            if appended < total as f64 {
                return Err(format!("records appended {appended} < {total}"));
            }
            let mirroring = sum(
                s,
                "twinlog_mirror_partitions",
                &[("mirror", "m"), ("state", "MIRRORING")],
            );
            if mirroring != PARTITIONS as f64 {
                return Err(format!("{mirroring} partitions MIRRORING"));
            }
            let lagged = select(s, "twinlog_mirror_partition_lag_seconds", &labels_m).len();
            if lagged != PARTITIONS {
                return Err(format!("lag_seconds for {lagged} partitions"));
            }
            Ok(())
        },
    );
    assert_eq!(
        sum(&samples, "twinlog_mirror_records_appended_total", &labels_m),
        total as f64,
        "every source record appended exactly once"
    );
    assert!(
        sum(&samples, "twinlog_mirror_records_fetched_total", &labels_m) >= total as f64,
        "fetched at least what was appended"
    );
    let bytes_appended = sum(&samples, "twinlog_mirror_bytes_appended_total", &labels_m);
    assert!(
        bytes_appended > 0.0
            && bytes_appended <= sum(&samples, "twinlog_mirror_bytes_fetched_total", &labels_m),
        "bytes appended {bytes_appended}"
    );
    assert!(
        sum(
            &samples,
            "twinlog_mirror_fetch_duration_seconds_count",
            &labels_m
        ) > 0.0
    );
    for p in 0..PARTITIONS {
        let p = p.to_string();
        let one = [("mirror", "m"), ("topic", TOPIC), ("partition", p.as_str())];
        let records = select(&samples, "twinlog_mirror_partition_lag_records", &one);
        assert_eq!(records.len(), 1, "lag_records for partition {p}");
        assert_eq!(records[0].value, 0.0, "caught up: {:?}", records[0]);
        let seconds = select(&samples, "twinlog_mirror_partition_lag_seconds", &one);
        assert_eq!(seconds.len(), 1, "lag_seconds for partition {p}");
        assert_eq!(seconds[0].value, 0.0, "caught up: {:?}", seconds[0]);
    }
    // Shards: partitions owned (the mirrored topic plus internal topics) and queues.
    assert!(sum(&samples, "twinlog_shard_partitions", &[]) >= PARTITIONS as f64);
    assert!(!select(&samples, "twinlog_shard_queue_depth", &[("shard", "0")]).is_empty());
    assert!(sum(&samples, "twinlog_shard_queue_capacity", &[]) > 0.0);
    // The appends went to the page cache: through glommio's buffered writes on the
    // io_uring, or, the small ones, in place (inline.write.max.bytes).
    let written = |io: &str, inline: &str| {
        sum(&samples, io, &[("op", "buffered_write")]) + sum(&samples, inline, &[])
    };
    assert!(written("twinlog_io_uring_ops_total", "twinlog_inline_writes_total") > 0.0);
    assert!(
        written(
            "twinlog_io_uring_bytes_total",
            "twinlog_inline_write_bytes_total"
        ) > 0.0
    );
    // Requests the destination served, and the refused produce.
    assert!(
        sum(
            &samples,
            "twinlog_requests_total",
            &[("api", "DescribeMirrors"), ("outcome", "ok")]
        ) > 0.0
    );
    assert_eq!(
        sum(
            &samples,
            "twinlog_requests_total",
            &[("api", "CreateMirror"), ("outcome", "ok")]
        ),
        1.0
    );
    assert!(
        sum(
            &samples,
            "twinlog_response_errors_total",
            &[
                ("api", "Produce"),
                ("code", "134"),
                ("error", "READ_ONLY_TOPIC")
            ]
        ) > 0.0,
        "the refused produce is counted by error code"
    );

    // The source: the producer's and the mirror fetcher's requests, with latencies.
    let samples = parse(&scrape(a_metrics));
    for api in ["Produce", "Fetch", "Metadata", "ListOffsets", "ApiVersions"] {
        let n = sum(
            &samples,
            "twinlog_requests_total",
            &[("api", api), ("outcome", "ok")],
        );
        assert!(n > 0.0, "{api} requests counted on the source");
        let timed = sum(
            &samples,
            "twinlog_request_duration_seconds_count",
            &[("api", api)],
        );
        // The fetcher keeps sending Fetch, Metadata and ListOffsets while the scrape
        // runs (the histogram is encoded after the counter): equal only for Produce,
        // which stopped with the load.
        if api == "Produce" {
            assert_eq!(timed, n, "every {api} request is timed");
        } else {
            assert!(timed >= n, "every {api} request is timed: {timed} < {n}");
        }
        let inf = sum(
            &samples,
            "twinlog_request_duration_seconds_bucket",
            &[("api", api), ("le", "+Inf")],
        );
        assert_eq!(inf, timed, "{api}: the +Inf bucket holds every request");
    }
    assert_eq!(
        sum(
            &samples,
            "twinlog_response_errors_total",
            &[("api", "Produce")]
        ),
        0.0,
        "no produce errors on the source"
    );
    assert!(select(&samples, "twinlog_mirror_partitions", &[]).is_empty());
    drop(a);
    drop(b);
}
