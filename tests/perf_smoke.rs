//! `twinlog-perf` against real brokers: every workload runs for a few seconds and the
//! report renders. Smoke only: no timing assertions, just that records moved, nothing
//! failed, and the reports are there.
//!
//! The binary belongs to the `twinlog-perf` package, so cargo does not build it for this
//! package's tests: it is looked up next to the `twinlog` binary (the same target
//! directory and profile), which `cargo build --workspace` (scripts/test.sh) and
//! `cargo test --workspace` both produce. The tests skip with a message when it is not
//! there.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::*;

const BROKER_CONFIG: &str = r#"
"mirror.state.topic.num.partitions" = 3
"offsets.topic.num.partitions" = 3
"num.partitions" = 4
"transaction.state.log.num.partitions" = 3
"#;

/// A workload's time limit: its few seconds of load plus start-up, fill and drain.
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// `twinlog-perf` next to `twinlog`, if it was built.
fn perf_binary() -> Option<PathBuf> {
    let twinlog = PathBuf::from(env!("CARGO_BIN_EXE_twinlog"));
    let perf = twinlog.with_file_name(format!("twinlog-perf{}", std::env::consts::EXE_SUFFIX));
    perf.is_file().then_some(perf)
}

fn perf_or_skip(test: &str) -> Option<PathBuf> {
    let perf = perf_binary();
    if perf.is_none() {
        eprintln!(
            "SKIPPED {test}: twinlog-perf is not next to {} (build the workspace first: \
             `cargo build --workspace`, as scripts/test.sh does)",
            env!("CARGO_BIN_EXE_twinlog")
        );
    }
    perf
}

/// Runs `twinlog-perf ARGS` and fails the test (with the brokers' logs) unless it
/// succeeded.
fn perf(bin: &Path, args: &[&str], brokers: &[&Broker]) -> String {
    let out = run_command(Command::new(bin).args(args), None, RUN_TIMEOUT);
    if !out.success() {
        let logs: Vec<String> = brokers.iter().map(|b| b.log_tail(40)).collect();
        panic!("{}\n{}", out.describe(), logs.join("\n"));
    }
    out.stdout
}

/// The number after `label` in the summary (`produced: 1,234 records`).
fn count_after(stdout: &str, label: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{stdout}"));
    line.trim_start()[label.len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no count in {line:?}"))
}

fn errors(stdout: &str) -> u64 {
    count_after(stdout, "errors:")
}

fn json(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

/// produce, consume and e2e for three seconds each against one broker, then one HTML
/// report of the three runs.
#[test]
fn produce_consume_e2e_and_report() {
    let Some(bin) = perf_or_skip("produce_consume_e2e_and_report") else {
        return;
    };
    let broker = Broker::start(BROKER_CONFIG);
    let bootstrap = broker.bootstrap();
    let dir = tempfile::tempdir().expect("tempdir");

    let produce_json = json(dir.path(), "produce.json");
    let out = perf(
        &bin,
        &[
            "produce",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "smoke",
            "--create-partitions",
            "4",
            "--duration",
            "3s",
            "--record-size",
            "512",
            "--producers",
            "2",
            "--json-out",
            &produce_json,
        ],
        &[&broker],
    );
    let produced = count_after(&out, "produced:");
    assert!(produced > 0, "{out}");
    assert_eq!(errors(&out), 0, "{out}");
    assert!(out.contains("produce latency: p50"), "{out}");

    // Read back from the beginning, up to the end offsets at the start.
    let consume_json = json(dir.path(), "consume.json");
    let out = perf(
        &bin,
        &[
            "consume",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "smoke",
            "--duration",
            "3s",
            "--to-end",
            "--consumers",
            "2",
            "--json-out",
            &consume_json,
        ],
        &[&broker],
    );
    // Three seconds may not be enough to read it all on a busy machine (no timing
    // assertions): some records, never more than were produced.
    let consumed = count_after(&out, "consumed:");
    assert!(consumed > 0 && consumed <= produced, "{out}");
    assert_eq!(errors(&out), 0, "{out}");

    // Keyed, compressed, idempotent, at a fixed rate; consumers see every record.
    let e2e_json = json(dir.path(), "e2e.json");
    let out = perf(
        &bin,
        &[
            "e2e",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "smoke-e2e",
            "--create-partitions",
            "4",
            "--duration",
            "3s",
            "--rate",
            "2000",
            "--keyed",
            "--compression",
            "lz4",
            "--idempotent",
            // The drain ends as soon as every record has arrived; the long limit only
            // keeps a slow machine from failing the count below.
            "--drain",
            "60s",
            "--json-out",
            &e2e_json,
        ],
        &[&broker],
    );
    let e2e_produced = count_after(&out, "produced:");
    assert!(e2e_produced > 0, "{out}");
    assert_eq!(count_after(&out, "consumed:"), e2e_produced, "{out}");
    assert!(out.contains("end-to-end latency: p50"), "{out}");
    assert_eq!(errors(&out), 0, "{out}");

    for path in [&produce_json, &consume_json, &e2e_json] {
        let text = std::fs::read_to_string(path).expect("run report written");
        assert!(text.contains("\"label\""), "{path}: {text}");
    }
    let html = dir.path().join("runs.html");
    let html_arg = html.to_string_lossy().into_owned();
    perf(
        &bin,
        &[
            "report",
            &produce_json,
            &consume_json,
            &e2e_json,
            "--html",
            &html_arg,
        ],
        &[&broker],
    );
    let page = std::fs::read_to_string(&html).expect("report written");
    assert!(page.contains("<svg"), "no chart in the report");
    assert!(
        page.contains("smoke") || page.contains("produce 512 B"),
        "{page}"
    );
}

/// Small batches pipelined on one connection (`--pipeline 5`, one 1 KiB record per
/// batch) into one partition of a shard that spins before it parks: every record is
/// acknowledged once and reads back, in the count sent.
#[test]
fn pipelined_small_batches_on_a_spinning_shard() {
    let Some(bin) = perf_or_skip("pipelined_small_batches_on_a_spinning_shard") else {
        return;
    };
    let broker = Broker::start(&format!(
        "{BROKER_CONFIG}\n[[shard]]\ncore = 0\nspin.before.park.us = 50\n"
    ));
    let bootstrap = broker.bootstrap();
    let out = perf(
        &bin,
        &[
            "produce",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "small",
            "--create-partitions",
            "1",
            "--partitions",
            "1",
            "--records",
            "3000",
            "--record-size",
            "1024",
            "--batch-size",
            "1024",
            "--in-flight",
            "1",
            "--pipeline",
            "5",
            "--threads",
            "1",
            "--duration",
            "120s",
        ],
        &[&broker],
    );
    assert_eq!(count_after(&out, "produced:"), 3000, "{out}");
    assert_eq!(errors(&out), 0, "{out}");
    let out = perf(
        &bin,
        &[
            "consume",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "small",
            "--duration",
            "120s",
            "--to-end",
        ],
        &[&broker],
    );
    assert_eq!(count_after(&out, "consumed:"), 3000, "{out}");
    assert_eq!(errors(&out), 0, "{out}");
}

/// Fill a topic on one broker, mirror it into another, wait for catch-up, then two
/// seconds at a steady rate with lag samples.
#[test]
fn mirror_fill_catch_up_and_steady_lag() {
    let Some(bin) = perf_or_skip("mirror_fill_catch_up_and_steady_lag") else {
        return;
    };
    let source = Broker::start(BROKER_CONFIG);
    let destination = Broker::start(BROKER_CONFIG);
    let dir = tempfile::tempdir().expect("tempdir");
    let mirror_json = json(dir.path(), "mirror.json");
    let out = perf(
        &bin,
        &[
            "mirror",
            "--source",
            &source.bootstrap(),
            "--destination",
            &destination.bootstrap(),
            "--topic",
            "mirrored",
            "--create-partitions",
            "4",
            "--records",
            "20000",
            "--catch-up-timeout",
            "120s",
            "--steady-rate",
            "1000",
            "--duration",
            "2s",
            "--json-out",
            &mirror_json,
        ],
        &[&source, &destination],
    );
    assert_eq!(count_after(&out, "fill:"), 20_000, "{out}");
    assert_eq!(count_after(&out, "mirror catch-up:"), 20_000, "{out}");
    assert!(out.contains("mirror lag: records"), "{out}");
    assert_eq!(errors(&out), 0, "{out}");

    let html = dir.path().join("mirror.html");
    let html_arg = html.to_string_lossy().into_owned();
    perf(
        &bin,
        &["report", &mirror_json, "--html", &html_arg],
        &[&source, &destination],
    );
    let page = std::fs::read_to_string(&html).expect("report written");
    assert!(page.contains("<svg"), "no chart in the report");
    assert!(page.contains("Catch-up"), "no mirror chart");
}
