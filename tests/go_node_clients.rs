//! franz-go (`kgo`, `kadm`) and kafkajs 2.x against Twinlog: produce/consume with
//! compression, consumer groups, idempotence, transactions and the admin APIs. The clients
//! are `tests/go` (a Go module) and `tests/node` (an npm package); scripts/test.sh
//! downloads their dependencies.
//!
//! Run alone: `cargo test -p twinlog --test go_node_clients -- --nocapture`.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use support::{missing_program, repo_root, run_command, skip_if, Broker};

const CONFIG: &str = "\"num.partitions\" = 3\n\"offsets.topic.num.partitions\" = 4\n\"transaction.state.log.num.partitions\" = 4\n\"group.initial.rebalance.delay.ms\" = 0\n";

/// On CI a missing client is a failure: scripts/test.sh installs them.
fn required(reason: Option<String>) -> Option<String> {
    if let (Some(r), Some(_)) = (&reason, std::env::var_os("CI")) {
        panic!("{r}: on CI this client is required");
    }
    reason
}

/// The franz-go test program, built once per test binary.
fn go_client() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out_path = repo_root().join("target").join("go-clients");
            let out = run_command(
                Command::new("go")
                    .args(["build", "-mod=readonly", "-o"])
                    .arg(&out_path)
                    .arg(".")
                    .current_dir(repo_root().join("tests").join("go")),
                None,
                Duration::from_secs(300),
            );
            if out.success() {
                Ok(out_path)
            } else {
                Err(format!("go build of tests/go failed:\n{}", out.describe()))
            }
        })
        .clone()
}

fn check(broker: &Broker, out: &support::CmdOutput) {
    if !out.success() {
        panic!("{}\n{}", out.describe(), broker.log_tail(60));
    }
    eprintln!("[harness] ok in {:?}: {}", out.elapsed, out.summary());
    assert!(out.summary().contains("\"ok\":true"), "{}", out.summary());
    broker.assert_healthy();
}

fn franz_go(scenario: &str, extra: &[&str]) {
    if skip_if(
        required(missing_program("go")),
        &format!("franz-go {scenario}"),
    ) {
        return;
    }
    let bin = go_client().unwrap_or_else(|e| panic!("{e}"));
    let broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    let mut cmd = Command::new(bin);
    cmd.args([scenario, "--bootstrap", &b, "--topic-prefix", "fg"])
        .args(extra);
    let out = run_command(&mut cmd, None, Duration::from_secs(120));
    check(&broker, &out);
}

#[test]
fn franz_go_produce_consume_lz4_zstd_gzip_snappy() {
    franz_go(
        "produce-consume",
        &["--compression", "lz4,zstd,gzip,snappy,none"],
    );
}

#[test]
fn franz_go_groups_cooperative_sticky() {
    franz_go("groups", &["--balancer", "cooperative-sticky"]);
}

#[test]
fn franz_go_groups_range() {
    franz_go("groups", &["--balancer", "range"]);
}

#[test]
fn franz_go_transactions() {
    franz_go("transactions", &[]);
}

#[test]
fn franz_go_admin() {
    franz_go("admin", &[]);
}

fn kafkajs(scenario: &str) {
    let node_dir = repo_root().join("tests").join("node");
    let missing = missing_program("node").or_else(|| {
        (!node_dir.join("node_modules").join("kafkajs").is_dir())
            .then(|| "tests/node/node_modules/kafkajs is missing (npm ci)".to_string())
    });
    if skip_if(required(missing), &format!("kafkajs {scenario}")) {
        return;
    }
    let broker = Broker::start(CONFIG);
    let b = broker.bootstrap();
    let mut cmd = Command::new("node");
    cmd.arg("kafkajs_check.js")
        .args([scenario, "--bootstrap", &b, "--topic-prefix", "kj"])
        .current_dir(&node_dir);
    let out = run_command(&mut cmd, None, Duration::from_secs(120));
    check(&broker, &out);
}

#[test]
fn kafkajs_produce_consume() {
    kafkajs("produce-consume");
}

#[test]
fn kafkajs_groups() {
    kafkajs("groups");
}

#[test]
fn kafkajs_idempotence() {
    kafkajs("idempotence");
}

#[test]
fn kafkajs_transactions() {
    kafkajs("transactions");
}

#[test]
fn kafkajs_admin() {
    kafkajs("admin");
}
