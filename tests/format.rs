//! `twinlog format` (Kafka's `kafka-storage format`) and `twinlog random-uuid`: a data
//! directory prepared with a cluster id and node id serves with that cluster id; a
//! formatted directory is refused (or left alone with --ignore-formatted); a bad cluster
//! id is an error that says what is expected.
//!
//! Run alone: `cargo test -p twinlog --test format`.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::{run_command, Broker, CmdOutput};

fn twinlog(args: &[&str]) -> CmdOutput {
    run_command(
        Command::new(env!("CARGO_BIN_EXE_twinlog")).args(args),
        None,
        Duration::from_secs(30),
    )
}

fn format(dir: &Path, cluster_id: &str, extra: &[&str]) -> CmdOutput {
    let d = dir.display().to_string();
    let mut args = vec![
        "format",
        "--data-dir",
        &d,
        "--cluster-id",
        cluster_id,
        "--node-id",
        "0",
    ];
    args.extend_from_slice(extra);
    twinlog(&args)
}

#[test]
fn a_formatted_directory_serves_with_its_cluster_id() {
    let id = twinlog(&["random-uuid"]);
    assert!(id.success(), "{}", id.describe());
    let cluster_id = id.stdout.trim().to_string();
    assert_eq!(cluster_id.len(), 22, "{cluster_id}");
    let broker = Broker::start_prepared("", |data| {
        let out = format(data, &cluster_id, &[]);
        assert!(out.success(), "{}", out.describe());
        assert!(out.stdout.contains(&cluster_id), "{}", out.stdout);
        // Formatting it again is refused, with Kafka's advice.
        let again = format(data, &cluster_id, &[]);
        assert!(!again.success());
        assert!(
            again.stderr.contains("already formatted"),
            "{}",
            again.stderr
        );
        let ignored = format(data, &cluster_id, &["--ignore-formatted"]);
        assert!(ignored.success(), "{}", ignored.describe());
    });
    let meta = support::metadata_cluster_id(&broker.bootstrap());
    assert_eq!(
        meta, cluster_id,
        "the broker serves the formatted cluster id"
    );
    broker.assert_healthy();
}

#[test]
fn a_cluster_id_that_is_not_a_uuid_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for bad in ["not-a-uuid", "AAAAAAAAAAAAAAAAAAAAAA"] {
        let out = format(dir.path(), bad, &[]);
        assert!(!out.success(), "{bad}");
        assert!(out.stderr.contains("cluster id"), "{bad}: {}", out.stderr);
    }
    assert!(
        !dir.path().join("meta.properties").exists(),
        "nothing written"
    );
}
