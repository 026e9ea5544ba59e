//! `twinlog mirror ...`: cluster mirrors on the destination cluster, over the mirror RPCs
//! (API keys 94-104) and, for the failover dry run, ListOffsets.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use dataplane::wire::mirror::{
    topic_names, AddTopicsToMirrorRequest, CreateMirrorRequest, DeleteMirrorRequest,
    DescribeMirrorsRequest, DescribeMirrorsResponse, DescribedMirror, DescribedMirrorPartition,
    ListMirrorsRequest, ListedMirror, MirrorPartitionState, MirrorRequest, MirrorResponse,
    MirrorStateEntry, MirrorStatesTopic, MirrorTopicMetadata, MirrorTopicsResponse,
    PauseMirrorTopicsRequest, ReadMirrorStatesRequest, ReadMirrorStatesTopic,
    RemoveTopicsFromMirrorRequest, ResumeMirrorTopicsRequest, WriteMirrorStatesRequest,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{
    check_code, error_name, finish, is_plain_topic_name, json_opt_string, json_string,
    kafka_error_line, or_dash, parse_key_value, table, topic_regex, Admin, CliError,
    DEFAULT_BOOTSTRAP,
};

/// How often `--when-caught-up` and `wait` ask for the mirror's state, by default (ms).
const POLL_INTERVAL_MS: u64 = 500;
/// How long `mirror add` waits for the broker's answer.
const ADD_TIMEOUT: Duration = Duration::from_secs(300);
/// Default of `--timeout` (seconds).
const DEFAULT_TIMEOUT_S: &str = "60";
/// Partitions named in a "still behind" message at most (the rest are counted).
const BEHIND_LISTED_MAX: usize = 20;

#[derive(Debug, Args)]
pub struct MirrorArgs {
    /// A broker of the destination cluster (the one that mirrors), HOST:PORT.
    #[arg(long, global = true, value_name = "HOST:PORT", default_value = DEFAULT_BOOTSTRAP)]
    bootstrap_server: String,
    #[command(subcommand)]
    command: MirrorCommand,
}

#[derive(Debug, Subcommand)]
enum MirrorCommand {
    /// Create a mirror of the cluster at --source (CreateMirror).
    Create {
        name: String,
        /// bootstrap.servers of the source cluster.
        #[arg(long, value_name = "BOOTSTRAP")]
        source: String,
        /// A mirror config, key=value (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
    },
    /// Start mirroring topics (AddTopicsToMirror). A value with regex characters is a
    /// pattern the broker matches against the source cluster's topics.
    Add {
        name: String,
        #[arg(long = "topic", value_name = "TOPIC|REGEX", required = true)]
        topics: Vec<String>,
    },
    /// Stop mirroring topics and make them writable: the failover
    /// (RemoveTopicsFromMirror).
    Remove {
        name: String,
        /// A topic or a regex matched against the mirror's topics (repeatable).
        #[arg(
            long = "topic",
            value_name = "REGEX",
            required_unless_present = "all_topics",
            conflicts_with = "all_topics"
        )]
        topics: Vec<String>,
        /// Every topic of the mirror.
        #[arg(long)]
        all_topics: bool,
        /// Print the state, lag and records the failover would drop; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Wait until every partition is MIRRORING with no lag before removing.
        #[arg(long)]
        when_caught_up: bool,
        /// Seconds --when-caught-up waits before giving up (removing nothing).
        #[arg(long, value_name = "SECONDS", default_value = DEFAULT_TIMEOUT_S,
              value_parser = parse_seconds, requires = "when_caught_up")]
        timeout: Duration,
    },
    /// Pause mirroring of topics (PauseMirrorTopics).
    Pause {
        name: String,
        #[arg(long = "topic", value_name = "TOPIC", required = true)]
        topics: Vec<String>,
    },
    /// Resume mirroring of paused topics (ResumeMirrorTopics).
    Resume {
        name: String,
        #[arg(long = "topic", value_name = "TOPIC", required = true)]
        topics: Vec<String>,
    },
    /// Delete a mirror whose topics are all removed and STOPPED (DeleteMirror).
    Delete { name: String },
    /// Retry FAILED partitions now, with a fresh retry budget: after
    /// `mirror.failed.retry.max.attempts` or a non-retryable failure, once the cause is
    /// fixed (ReadMirrorStates, then WriteMirrorStates with the retry counter at 0).
    Recover {
        name: String,
        /// Only these topics (default: every topic of the mirror).
        #[arg(long = "topic", value_name = "TOPIC")]
        topics: Vec<String>,
    },
    /// List the mirrors (ListMirrors).
    List,
    /// Show every mirrored partition (DescribeMirrors); all mirrors when none is named.
    Describe {
        names: Vec<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Wait until every partition (of the given topics, or of the mirror) is in --state,
    /// or with --caught-up, MIRRORING with no lag.
    #[command(group = clap::ArgGroup::new("until").required(true).args(["state", "caught_up"]))]
    Wait {
        name: String,
        /// A partition state: PREPARING, MIRRORING, PAUSED, STOPPED, FAILED...
        #[arg(long, value_parser = parse_state)]
        state: Option<MirrorPartitionState>,
        /// Wait until every partition is MIRRORING and has copied the source's end.
        #[arg(long)]
        caught_up: bool,
        #[arg(long = "topic", value_name = "TOPIC")]
        topics: Vec<String>,
        /// Seconds to wait before giving up.
        #[arg(long, value_name = "SECONDS", default_value = DEFAULT_TIMEOUT_S,
              value_parser = parse_seconds)]
        timeout: Duration,
        /// Milliseconds between two DescribeMirrors requests.
        #[arg(long, value_name = "MS", default_value_t = POLL_INTERVAL_MS,
              value_parser = clap::value_parser!(u64).range(1..=60_000))]
        poll_ms: u64,
    },
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1e9).contains(&v) => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("expected a number of seconds, got {s:?}")),
    }
}

fn parse_state(s: &str) -> Result<MirrorPartitionState, String> {
    MirrorPartitionState::from_name(&s.trim().to_ascii_uppercase()).ok_or_else(|| {
        let names: Vec<&str> = MirrorPartitionState::ALL.iter().map(|s| s.name()).collect();
        format!("unknown state {s:?}; one of {}", names.join(", "))
    })
}

/// Runs `twinlog mirror ...`.
pub fn run(args: MirrorArgs) -> ExitCode {
    finish(execute(args))
}

fn execute(args: MirrorArgs) -> Result<(), CliError> {
    let mut admin = Admin::connect(&args.bootstrap_server)?;
    match args.command {
        MirrorCommand::Create {
            name,
            source,
            configs,
        } => create(&mut admin, name, source, configs),
        MirrorCommand::Add { name, topics } => add(&mut admin, name, topics),
        MirrorCommand::Remove {
            name,
            topics,
            all_topics,
            dry_run,
            when_caught_up,
            timeout,
        } => remove(
            &mut admin,
            &name,
            &topics,
            all_topics,
            dry_run,
            when_caught_up.then_some(timeout),
        ),
        MirrorCommand::Pause { name, topics } => {
            let request = MirrorRequest::PauseMirrorTopics(PauseMirrorTopicsRequest {
                mirror_name: name,
                topics: topic_names(topics),
                state_validation_offset: -1,
            });
            match admin.mirror(&request)? {
                MirrorResponse::PauseMirrorTopics(r) => print_topic_results(&r, "paused"),
                other => Err(unexpected(&other)),
            }
        }
        MirrorCommand::Resume { name, topics } => {
            let request = MirrorRequest::ResumeMirrorTopics(ResumeMirrorTopicsRequest {
                mirror_name: name,
                topics: topic_names(topics),
                state_validation_offset: -1,
            });
            match admin.mirror(&request)? {
                MirrorResponse::ResumeMirrorTopics(r) => print_topic_results(&r, "resumed"),
                other => Err(unexpected(&other)),
            }
        }
        MirrorCommand::Delete { name } => {
            let request = MirrorRequest::DeleteMirror(DeleteMirrorRequest {
                mirror_name: name.clone(),
                state_validation_offset: -1,
            });
            match admin.mirror(&request)? {
                MirrorResponse::DeleteMirror(r) => {
                    check_code(r.error_code, r.error_message.as_deref())?;
                    outln!("deleted mirror {name}");
                    Ok(())
                }
                other => Err(unexpected(&other)),
            }
        }
        MirrorCommand::Recover { name, topics } => recover(&mut admin, &name, &topics),
        MirrorCommand::List => list(&mut admin),
        MirrorCommand::Describe { names, json } => describe(&mut admin, names, json),
        MirrorCommand::Wait {
            name,
            state,
            caught_up,
            topics,
            timeout,
            poll_ms,
        } => {
            let poll = Duration::from_millis(poll_ms);
            // clap's "until" group makes exactly one of --state and --caught-up present.
            if let Some(state) = state.filter(|_| !caught_up) {
                return wait(&mut admin, &name, state, &topics, timeout, poll);
            }
            let topics = if topics.is_empty() {
                resolve_topics(&mut admin, &name, &[], true)?
            } else {
                topics
            };
            wait_caught_up(&mut admin, &name, &topics, timeout, poll, "")
        }
    }
}

fn unexpected(response: &MirrorResponse) -> CliError {
    CliError::Other(format!(
        "the broker answered with a response of api key {} to a different request",
        response.api_key()
    ))
}

fn create(
    admin: &mut Admin,
    name: String,
    source: String,
    configs: Vec<(String, String)>,
) -> Result<(), CliError> {
    if configs.iter().any(|(k, _)| k == "bootstrap.servers") {
        return Err(CliError::Other(
            "give the source cluster with --source, not --config bootstrap.servers".into(),
        ));
    }
    let mut all = vec![("bootstrap.servers".to_string(), Some(source))];
    all.extend(configs.into_iter().map(|(k, v)| (k, Some(v))));
    let request = MirrorRequest::CreateMirror(CreateMirrorRequest {
        mirror_name: name.clone(),
        configs: all.into_iter().map(Into::into).collect(),
    });
    match admin.mirror(&request)? {
        MirrorResponse::CreateMirror(r) => {
            check_code(r.error_code, r.error_message.as_deref())?;
            outln!("created mirror {name}");
            Ok(())
        }
        other => Err(unexpected(&other)),
    }
}

fn add(admin: &mut Admin, name: String, values: Vec<String>) -> Result<(), CliError> {
    let mut topics = Vec::new();
    let mut patterns = Vec::new();
    for v in values {
        if is_plain_topic_name(&v) {
            topics.push(MirrorTopicMetadata {
                topic_id: uuid::Uuid::nil(),
                name: v,
                num_partitions: -1,
            });
        } else {
            // Checked here so that a typo is a usage error, not a broker round trip.
            topic_regex(&v)?;
            patterns.push(v);
        }
    }
    let request = MirrorRequest::AddTopicsToMirror(AddTopicsToMirrorRequest {
        mirror_name: name.clone(),
        topics,
        include_patterns: patterns.clone(),
        exclude_patterns: Vec::new(),
        state_validation_offset: -1,
    });
    // The broker answers once it has created every partition of the new mirror topics,
    // which for a topic of 10,000 partitions on a small machine is longer than the 30 s a
    // request gets otherwise.
    admin
        .conn
        .set_request_timeout(ADD_TIMEOUT)
        .map_err(|source| CliError::Connect {
            addr: admin.addr.clone(),
            source,
        })?;
    let response = match admin.mirror(&request)? {
        MirrorResponse::AddTopicsToMirror(r) => r,
        other => return Err(unexpected(&other)),
    };
    if response.topics.is_empty() {
        // Only patterns, and nothing matched, or the broker refused before matching: an
        // unknown mirror gets no per-topic result to carry its error.
        check_code(response.error_code, response.error_message.as_deref())?;
        if !list_mirrors(admin)?.iter().any(|m| m.mirror_name == name) {
            return Err(unknown_mirror(&name));
        }
        return Err(CliError::Other(format!(
            "no topic of the source cluster of mirror {name} matches {}",
            patterns.join(", ")
        )));
    }
    print_topic_results(&response, "added")
}

/// One line per topic: `<verb> <topic>` or `error: <topic>: NAME: message`.
fn print_topic_results(response: &MirrorTopicsResponse, verb: &str) -> Result<(), CliError> {
    if response.topics.is_empty() {
        return check_code(response.error_code, response.error_message.as_deref());
    }
    let mut failed = false;
    for t in &response.topics {
        if t.error_code == 0 {
            outln!("{verb} {}", t.name);
        } else {
            failed = true;
            eprintln!(
                "error: {}: {}",
                t.name,
                kafka_error_line(t.error_code, t.error_message.as_deref())
            );
        }
    }
    if failed {
        Err(CliError::Reported)
    } else {
        Ok(())
    }
}

fn list_mirrors(admin: &mut Admin) -> Result<Vec<ListedMirror>, CliError> {
    let request = MirrorRequest::ListMirrors(ListMirrorsRequest {
        include_topic_names: true,
    });
    match admin.mirror(&request)? {
        MirrorResponse::ListMirrors(r) => {
            check_code(r.error_code, r.error_message.as_deref())?;
            Ok(r.mirrors)
        }
        other => Err(unexpected(&other)),
    }
}

fn list(admin: &mut Admin) -> Result<(), CliError> {
    let mut mirrors = list_mirrors(admin)?;
    mirrors.sort_by(|a, b| a.mirror_name.cmp(&b.mirror_name));
    let rows: Vec<Vec<String>> = mirrors
        .iter()
        .map(|m| {
            vec![
                m.mirror_name.clone(),
                m.source_bootstrap.clone(),
                if m.source_cluster_id.is_empty() {
                    "-".to_string()
                } else {
                    m.source_cluster_id.clone()
                },
                m.topic_count.to_string(),
                if m.topic_names.is_empty() {
                    "-".to_string()
                } else {
                    m.topic_names.join(",")
                },
            ]
        })
        .collect();
    out!(
        "{}",
        table(
            &[
                "NAME",
                "SOURCE-BOOTSTRAP",
                "SOURCE-CLUSTER-ID",
                "TOPIC-COUNT",
                "TOPICS"
            ],
            &rows
        )
    );
    Ok(())
}

/// DescribeMirrors on every broker of the cluster, merged: each broker reports the
/// partitions it leads (reference §2.8), the one asked first also the sync status.
fn describe_mirrors(
    admin: &mut Admin,
    names: Vec<String>,
) -> Result<DescribeMirrorsResponse, CliError> {
    let request = MirrorRequest::DescribeMirrors(DescribeMirrorsRequest {
        mirror_names: Some(names),
        include_authorized_operations: false,
        cluster_id: None,
        lme_lookups: Vec::new(),
    });
    let ask = |admin: &mut Admin| match admin.mirror(&request)? {
        MirrorResponse::DescribeMirrors(r) => {
            check_code(r.error_code, r.error_message.as_deref())?;
            Ok(r)
        }
        other => Err(unexpected(&other)),
    };
    let mut merged = ask(admin)?;
    for addr in admin.broker_addresses()?.into_iter().skip(1) {
        let other = admin.peer(&addr)?;
        merge_described(&mut merged, ask(other)?);
    }
    for m in &mut merged.mirrors {
        for t in &mut m.topics {
            t.partitions.sort_by_key(|p| p.partition);
        }
    }
    Ok(merged)
}

/// Adds the partition rows of `other` (another broker's answer) to `into`.
fn merge_described(into: &mut DescribeMirrorsResponse, other: DescribeMirrorsResponse) {
    for m in other.mirrors {
        let Some(mine) = into
            .mirrors
            .iter_mut()
            .find(|x| x.mirror_name == m.mirror_name)
        else {
            into.mirrors.push(m);
            continue;
        };
        for t in m.topics {
            match mine.topics.iter_mut().find(|x| x.name == t.name) {
                Some(topic) => topic.partitions.extend(t.partitions),
                None => mine.topics.push(t),
            }
        }
    }
}

/// `twinlog mirror recover`: every FAILED partition of the mirror (or of `topics`) gets
/// its retry counter reset to 0, fenced by the state epoch it was read at; the mirror
/// manager then retries it at once.
fn recover(admin: &mut Admin, name: &str, topics: &[String]) -> Result<(), CliError> {
    let mirror = described_mirror(describe_mirrors(admin, vec![name.to_string()])?, name)?;
    let failed: BTreeMap<String, Vec<i32>> = mirror
        .topics
        .iter()
        .filter(|t| topics.is_empty() || topics.contains(&t.name))
        .map(|t| {
            let parts = t
                .partitions
                .iter()
                .filter(|p| p.state == MirrorPartitionState::Failed.name())
                .map(|p| p.partition)
                .collect::<Vec<_>>();
            (t.name.clone(), parts)
        })
        .filter(|(_, parts)| !parts.is_empty())
        .collect();
    if failed.is_empty() {
        outln!("mirror {name}: no FAILED partition to recover");
        return Ok(());
    }
    let read = MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest {
        mirror_name: name.to_string(),
        topics: failed
            .into_iter()
            .map(|(name, partitions)| ReadMirrorStatesTopic { name, partitions })
            .collect(),
    });
    let states = match admin.mirror(&read)? {
        MirrorResponse::ReadMirrorStates(r) => {
            check_code(r.error_code, None)?;
            r
        }
        other => return Err(unexpected(&other)),
    };
    let topics: Vec<MirrorStatesTopic> = states
        .topics
        .into_iter()
        .map(|t| MirrorStatesTopic {
            name: t.name,
            partitions: t
                .partitions
                .into_iter()
                .filter(|e| e.error_code == 0 && e.state == MirrorPartitionState::Failed.code())
                .map(|e| MirrorStateEntry {
                    retry_attempt: 0,
                    last_mirrored_epoch: -1,
                    last_mirrored_offset: -1,
                    error_message: e
                        .error_message
                        .as_ref()
                        .map(|m| format!("recovered by an operator after: {m}")),
                    ..e
                })
                .collect(),
        })
        .filter(|t| !t.partitions.is_empty())
        .collect();
    let write = MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest {
        mirror_name: name.to_string(),
        topics,
        stopped_topics: Vec::new(),
    });
    let written = match admin.mirror(&write)? {
        MirrorResponse::WriteMirrorStates(r) => r,
        other => return Err(unexpected(&other)),
    };
    let mut errors = Vec::new();
    for t in &written.topics {
        for p in &t.partitions {
            if p.error_code == 0 {
                outln!("recovered {}-{}", t.name, p.partition);
            } else {
                errors.push(format!(
                    "{}-{}: {}",
                    t.name,
                    p.partition,
                    p.error_message
                        .clone()
                        .unwrap_or_else(|| format!("error {}", p.error_code))
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(CliError::Other(format!(
            "could not recover {}",
            errors.join("; ")
        )))
    }
}

/// The one mirror `name` of a DescribeMirrors answer, or its error.
fn described_mirror(
    response: DescribeMirrorsResponse,
    name: &str,
) -> Result<DescribedMirror, CliError> {
    let mirror = response
        .mirrors
        .into_iter()
        .find(|m| m.mirror_name == name)
        .ok_or_else(|| CliError::Other(format!("the broker did not describe mirror {name}")))?;
    if mirror.error_code != 0 {
        return Err(CliError::Kafka {
            code: mirror.error_code,
            message: Some(mirror_error_sentence(mirror.error_code, name)),
        });
    }
    Ok(mirror)
}

fn unknown_mirror(name: &str) -> CliError {
    CliError::Kafka {
        code: dataplane::wire::mirror::errors::UNKNOWN_CLUSTER_MIRROR,
        message: Some(format!("Mirror {name} does not exist")),
    }
}

fn mirror_error_sentence(code: i16, name: &str) -> String {
    if code == dataplane::wire::mirror::errors::UNKNOWN_CLUSTER_MIRROR {
        format!("Mirror {name} does not exist")
    } else {
        format!("Cannot describe mirror {name}")
    }
}

fn describe(admin: &mut Admin, names: Vec<String>, json: bool) -> Result<(), CliError> {
    let response = describe_mirrors(admin, names)?;
    let mut mirrors = response.mirrors;
    mirrors.sort_by(|a, b| a.mirror_name.cmp(&b.mirror_name));
    for m in &mut mirrors {
        m.topics.sort_by(|a, b| a.name.cmp(&b.name));
        for t in &mut m.topics {
            t.partitions.sort_by_key(|p| p.partition);
        }
    }
    if json {
        outln!("{}", describe_json(&mirrors));
    } else if mirrors.is_empty() || mirrors.iter().any(|m| m.error_code == 0) {
        out!("{}", describe_table(&mirrors));
        out!("{}", sync_lines(&mirrors, now_ms()));
    }
    let mut failed = false;
    for m in mirrors.iter().filter(|m| m.error_code != 0) {
        failed = true;
        eprintln!(
            "error: {}: {}",
            m.mirror_name,
            kafka_error_line(
                m.error_code,
                Some(&mirror_error_sentence(m.error_code, &m.mirror_name))
            )
        );
    }
    if failed {
        Err(CliError::Reported)
    } else {
        Ok(())
    }
}

fn describe_table(mirrors: &[DescribedMirror]) -> String {
    let mut rows = Vec::new();
    let mut empty = Vec::new();
    for m in mirrors.iter().filter(|m| m.error_code == 0) {
        if m.topics.is_empty() {
            empty.push(m.mirror_name.as_str());
        }
        for t in &m.topics {
            for p in &t.partitions {
                rows.push(vec![
                    m.mirror_name.clone(),
                    t.name.clone(),
                    p.partition.to_string(),
                    p.state.clone(),
                    or_dash(p.source_offset),
                    or_dash(p.destination_offset),
                    or_dash(p.lag),
                    or_dash(p.lag_ms),
                    p.retry_attempt.to_string(),
                    or_dash(p.truncated_records),
                    or_dash(i64::from(p.last_mirrored_epoch)),
                    p.error_message
                        .as_deref()
                        .filter(|e| !e.is_empty())
                        .unwrap_or("-")
                        .to_string(),
                ]);
            }
        }
    }
    let mut out = table(
        &[
            "MIRROR",
            "TOPIC",
            "PARTITION",
            "STATE",
            "SOURCE-END",
            "LOCAL-END",
            "LAG",
            "LAG-MS",
            "RETRIES",
            "TRUNCATED",
            "LME",
            "LAST-ERROR",
        ],
        &rows,
    );
    for name in empty {
        let _ = writeln!(out, "mirror {name} has no topics");
    }
    out
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How long ago `at_ms` was, for a person: `never`, `850ms ago`, `12.3s ago`, `4m05s ago`.
fn ago(now_ms: i64, at_ms: i64) -> String {
    if at_ms < 0 {
        return "never".to_string();
    }
    let d = now_ms.saturating_sub(at_ms).max(0);
    if d < 1000 {
        format!("{d}ms ago")
    } else if d < 60_000 {
        format!("{:.1}s ago", d as f64 / 1000.0)
    } else {
        format!("{}m{:02}s ago", d / 60_000, (d % 60_000) / 1000)
    }
}

/// One line per metadata-sync step of each mirror (printed under the partition table).
fn sync_lines(mirrors: &[DescribedMirror], now_ms: i64) -> String {
    let mut out = String::new();
    for m in mirrors.iter().filter(|m| m.error_code == 0) {
        for s in &m.sync {
            let _ = writeln!(
                out,
                "mirror {} sync {}: last success {}, last error {}",
                m.mirror_name,
                s.step,
                ago(now_ms, s.last_success_ms),
                s.last_error
                    .as_deref()
                    .filter(|e| !e.is_empty())
                    .unwrap_or("-")
            );
        }
    }
    out
}

fn describe_json(mirrors: &[DescribedMirror]) -> String {
    let mirrors: Vec<String> = mirrors
        .iter()
        .map(|m| {
            let topics: Vec<String> = m
                .topics
                .iter()
                .map(|t| {
                    let partitions: Vec<String> = t.partitions.iter().map(partition_json).collect();
                    format!(
                        "{{\"name\":{},\"partitions\":[{}]}}",
                        json_string(&t.name),
                        partitions.join(",")
                    )
                })
                .collect();
            let sync: Vec<String> = m
                .sync
                .iter()
                .map(|s| {
                    format!(
                        "{{\"step\":{},\"last_success_ms\":{},\"last_error\":{}}}",
                        json_string(&s.step),
                        s.last_success_ms,
                        json_opt_string(s.last_error.as_deref())
                    )
                })
                .collect();
            format!(
                "{{\"name\":{},\"error_code\":{},\"topics\":[{}],\"sync\":[{}]}}",
                json_string(&m.mirror_name),
                m.error_code,
                topics.join(","),
                sync.join(",")
            )
        })
        .collect();
    format!("{{\"mirrors\":[{}]}}", mirrors.join(","))
}

fn partition_json(p: &DescribedMirrorPartition) -> String {
    format!(
        "{{\"partition\":{},\"state\":{},\"source_offset\":{},\"destination_offset\":{},\"lag\":{},\"lag_ms\":{},\"retry_attempt\":{},\"truncated_records\":{},\"last_mirrored_epoch\":{},\"error\":{}}}",
        p.partition,
        json_string(&p.state),
        p.source_offset,
        p.destination_offset,
        p.lag,
        p.lag_ms,
        p.retry_attempt,
        p.truncated_records,
        p.last_mirrored_epoch,
        json_opt_string(p.error_message.as_deref()),
    )
}

/// The topics `--topic` values (regexes) or `--all-topics` choose among the mirror's
/// topics as ListMirrors reports them. A plain name that matches nothing is kept so that
/// the broker says why it cannot be removed; a pattern that matches nothing is an error.
fn resolve_topics(
    admin: &mut Admin,
    name: &str,
    values: &[String],
    all_topics: bool,
) -> Result<Vec<String>, CliError> {
    let mirror = list_mirrors(admin)?
        .into_iter()
        .find(|m| m.mirror_name == name)
        .ok_or_else(|| unknown_mirror(name))?;
    if all_topics {
        let mut topics = mirror.topic_names;
        topics.sort();
        topics.dedup();
        return Ok(topics);
    }
    let mut chosen = BTreeSet::new();
    for v in values {
        let re = topic_regex(v)?;
        let mut matched = false;
        for t in mirror.topic_names.iter().filter(|t| re.is_match(t)) {
            matched = true;
            chosen.insert(t.clone());
        }
        if !matched {
            if is_plain_topic_name(v) {
                chosen.insert(v.clone());
            } else {
                return Err(CliError::Other(format!(
                    "no topic of mirror {name} matches {v:?}"
                )));
            }
        }
    }
    Ok(chosen.into_iter().collect())
}

fn remove(
    admin: &mut Admin,
    name: &str,
    values: &[String],
    all_topics: bool,
    dry_run: bool,
    when_caught_up: Option<Duration>,
) -> Result<(), CliError> {
    let topics = resolve_topics(admin, name, values, all_topics)?;
    if topics.is_empty() {
        outln!("mirror {name} has no topics to remove");
        return Ok(());
    }
    if dry_run {
        return remove_dry_run(admin, name, &topics);
    }
    if let Some(timeout) = when_caught_up {
        let poll = Duration::from_millis(POLL_INTERVAL_MS);
        wait_caught_up(admin, name, &topics, timeout, poll, "; nothing was removed")?;
    }
    let request = MirrorRequest::RemoveTopicsFromMirror(RemoveTopicsFromMirrorRequest {
        mirror_name: name.to_string(),
        topics: topic_names(topics),
        patterns: Vec::new(),
        state_validation_offset: -1,
    });
    match admin.mirror(&request)? {
        MirrorResponse::RemoveTopicsFromMirror(r) => print_topic_results(&r, "removed"),
        other => Err(unexpected(&other)),
    }
}

/// `(topic, partition)` to its described state, for the given topics of one mirror.
fn chosen_partitions<'a>(
    mirror: &'a DescribedMirror,
    topics: &[String],
) -> BTreeMap<(String, i32), &'a DescribedMirrorPartition> {
    let mut out = BTreeMap::new();
    for t in mirror.topics.iter().filter(|t| topics.contains(&t.name)) {
        for p in &t.partitions {
            out.insert((t.name.clone(), p.partition), p);
        }
    }
    out
}

fn is_caught_up(p: &DescribedMirrorPartition) -> bool {
    p.state == MirrorPartitionState::Mirroring.name()
        && p.source_offset >= 0
        && p.destination_offset >= 0
        && p.source_offset == p.destination_offset
}

fn behind_list(behind: &[String]) -> String {
    let mut s = behind
        .iter()
        .take(BEHIND_LISTED_MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if behind.len() > BEHIND_LISTED_MAX {
        let _ = write!(s, " and {} more", behind.len() - BEHIND_LISTED_MAX);
    }
    s
}

fn wait_caught_up(
    admin: &mut Admin,
    name: &str,
    topics: &[String],
    timeout: Duration,
    poll: Duration,
    outcome: &str,
) -> Result<(), CliError> {
    let started = Instant::now();
    loop {
        let mirror = described_mirror(describe_mirrors(admin, vec![name.to_string()])?, name)?;
        let partitions = chosen_partitions(&mirror, topics);
        let mut behind: Vec<String> = partitions
            .iter()
            .filter(|(_, p)| !is_caught_up(p))
            .map(|((t, n), p)| {
                let lag = if p.source_offset >= 0 && p.destination_offset >= 0 {
                    (p.source_offset - p.destination_offset).to_string()
                } else {
                    "unknown".to_string()
                };
                format!("{t}-{n} ({}, lag {lag})", p.state)
            })
            .collect();
        for t in topics {
            if !partitions.keys().any(|(name, _)| name == t) {
                behind.push(format!("{t} (no partitions in mirror {name} yet)"));
            }
        }
        if topics.is_empty() {
            behind.push(format!("mirror {name} has no topics"));
        }
        if behind.is_empty() {
            outln!(
                "mirror {name}: all {} partitions are caught up",
                partitions.len()
            );
            return Ok(());
        }
        if started.elapsed() >= timeout {
            return Err(CliError::Other(format!(
                "timed out after {:.1}s waiting for mirror {name} to catch up{outcome}; still behind: {}",
                timeout.as_secs_f64(),
                behind_list(&behind)
            )));
        }
        thread::sleep(poll.min(timeout.saturating_sub(started.elapsed())));
    }
}

fn remove_dry_run(admin: &mut Admin, name: &str, topics: &[String]) -> Result<(), CliError> {
    let mirror = described_mirror(describe_mirrors(admin, vec![name.to_string()])?, name)?;
    let partitions = chosen_partitions(&mirror, topics);
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions.keys() {
        by_topic.entry(t.clone()).or_default().push(*p);
    }
    // LSO (READ_COMMITTED) and LEO (READ_UNCOMMITTED) on this broker: a failover truncates
    // the log to its LSO, dropping what lies between.
    let lso = end_offsets(admin, &by_topic, 1)?;
    let leo = end_offsets(admin, &by_topic, 0)?;
    let mut rows = Vec::new();
    let mut dropped_total = 0i64;
    for ((t, n), p) in &partitions {
        let key = (t.clone(), *n);
        let (lso, leo) = (
            lso.get(&key).copied().unwrap_or(-1),
            leo.get(&key).copied().unwrap_or(-1),
        );
        let dropped = if lso >= 0 && leo >= 0 {
            let d = (leo - lso).max(0);
            dropped_total += d;
            d.to_string()
        } else {
            "-".to_string()
        };
        rows.push(vec![
            t.clone(),
            n.to_string(),
            p.state.clone(),
            or_dash(p.lag),
            or_dash(lso),
            or_dash(leo),
            dropped,
        ]);
    }
    outln!("dry run: nothing was changed; removing these topics from mirror {name} would:");
    out!(
        "{}",
        table(
            &[
                "TOPIC",
                "PARTITION",
                "STATE",
                "LAG",
                "LAST-STABLE-OFFSET",
                "LOG-END-OFFSET",
                "RECORDS-DROPPED"
            ],
            &rows
        )
    );
    for t in topics.iter().filter(|t| !by_topic.contains_key(*t)) {
        outln!("topic {t} is not in mirror {name}");
    }
    outln!(
        "total: {} partitions, {dropped_total} records would be dropped",
        partitions.len()
    );
    Ok(())
}

/// Latest offsets (timestamp -1) at `isolation_level` (0 uncommitted: the log end offset,
/// 1 committed: the last stable offset), `-1` where the broker reports an error.
fn end_offsets(
    admin: &mut Admin,
    topics: &BTreeMap<String, Vec<i32>>,
    isolation_level: i8,
) -> Result<BTreeMap<(String, i32), i64>, CliError> {
    if topics.is_empty() {
        return Ok(BTreeMap::new());
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(
            topics
                .iter()
                .map(|(t, parts)| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.clone())))
                        .with_partitions(
                            parts
                                .iter()
                                .map(|p| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(*p)
                                        .with_current_leader_epoch(-1)
                                        .with_timestamp(-1)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    // Isolation levels need v2+.
    let (response, _) = admin.kafka(&request, "ListOffsets", 2, 8)?;
    let mut out = BTreeMap::new();
    for t in response.topics {
        for p in t.partitions {
            let offset = if p.error_code == 0 { p.offset } else { -1 };
            if p.error_code != 0 {
                eprintln!(
                    "warning: ListOffsets {}-{}: {}",
                    t.name.0.as_str(),
                    p.partition_index,
                    error_name(p.error_code)
                );
            }
            out.insert((t.name.0.to_string(), p.partition_index), offset);
        }
    }
    Ok(out)
}

fn wait(
    admin: &mut Admin,
    name: &str,
    state: MirrorPartitionState,
    topics: &[String],
    timeout: Duration,
    poll: Duration,
) -> Result<(), CliError> {
    let started = Instant::now();
    loop {
        let mirror = described_mirror(describe_mirrors(admin, vec![name.to_string()])?, name)?;
        let mut not_there: Vec<String> = Vec::new();
        let mut count = 0usize;
        for t in &mirror.topics {
            if !topics.is_empty() && !topics.contains(&t.name) {
                continue;
            }
            for p in &t.partitions {
                count += 1;
                if p.state != state.name() {
                    not_there.push(format!("{}-{} ({})", t.name, p.partition, p.state));
                }
            }
        }
        for t in topics {
            if !mirror.topics.iter().any(|m| &m.name == t) {
                not_there.push(format!("{t} (not in mirror {name})"));
            }
        }
        if count == 0 && topics.is_empty() {
            not_there.push(format!("mirror {name} has no topics"));
        }
        if not_there.is_empty() {
            outln!("mirror {name}: all {count} partitions are {state}");
            return Ok(());
        }
        if started.elapsed() >= timeout {
            return Err(CliError::Other(format!(
                "timed out after {:.1}s waiting for mirror {name} to be {state}; not yet: {}",
                timeout.as_secs_f64(),
                behind_list(&not_there)
            )));
        }
        thread::sleep(poll.min(timeout.saturating_sub(started.elapsed())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::wire::mirror::MirrorSyncStatus;

    fn partition(p: i32, state: &str, src: i64, dst: i64) -> DescribedMirrorPartition {
        DescribedMirrorPartition {
            partition: p,
            source_offset: src,
            destination_offset: dst,
            lag: if src >= 0 && dst >= 0 { src - dst } else { -1 },
            state: state.to_string(),
            ..DescribedMirrorPartition::default()
        }
    }

    #[test]
    fn caught_up_means_mirroring_without_lag() {
        assert!(is_caught_up(&partition(0, "MIRRORING", 5, 5)));
        assert!(!is_caught_up(&partition(0, "MIRRORING", 6, 5)));
        assert!(!is_caught_up(&partition(0, "MIRRORING", -1, -1)));
        assert!(!is_caught_up(&partition(0, "PAUSED", 5, 5)));
    }

    #[test]
    fn json_has_the_documented_shape() {
        let mut p = partition(0, "MIRRORING", 7, 5);
        p.error_message = Some("boom \"x\"".into());
        let m = DescribedMirror {
            mirror_name: "m".into(),
            topics: vec![dataplane::wire::mirror::DescribedMirrorTopic {
                name: "t".into(),
                partitions: vec![p, partition(1, "STOPPED", -1, 3)],
            }],
            sync: vec![MirrorSyncStatus {
                step: "group-offsets".into(),
                last_success_ms: 5,
                last_error: Some("e".into()),
            }],
            ..DescribedMirror::default()
        };
        assert_eq!(
            describe_json(&[m]),
            "{\"mirrors\":[{\"name\":\"m\",\"error_code\":0,\"topics\":[{\"name\":\"t\",\"partitions\":[\
             {\"partition\":0,\"state\":\"MIRRORING\",\"source_offset\":7,\"destination_offset\":5,\"lag\":2,\"lag_ms\":-1,\"retry_attempt\":0,\"truncated_records\":-1,\"last_mirrored_epoch\":-1,\"error\":\"boom \\\"x\\\"\"},\
             {\"partition\":1,\"state\":\"STOPPED\",\"source_offset\":-1,\"destination_offset\":3,\"lag\":-1,\"lag_ms\":-1,\"retry_attempt\":0,\"truncated_records\":-1,\"last_mirrored_epoch\":-1,\"error\":null}]}],\
             \"sync\":[{\"step\":\"group-offsets\",\"last_success_ms\":5,\"last_error\":\"e\"}]}]}"
        );
    }

    #[test]
    fn sync_steps_print_one_line_each() {
        let m = DescribedMirror {
            mirror_name: "m".into(),
            sync: vec![
                MirrorSyncStatus {
                    step: "cluster-id".into(),
                    last_success_ms: 10_000,
                    last_error: None,
                },
                MirrorSyncStatus {
                    step: "group-offsets".into(),
                    last_success_ms: -1,
                    last_error: Some("boom".into()),
                },
            ],
            ..DescribedMirror::default()
        };
        assert_eq!(
            sync_lines(&[m], 12_500),
            "mirror m sync cluster-id: last success 2.5s ago, last error -\n\
             mirror m sync group-offsets: last success never, last error boom\n"
        );
        assert_eq!(ago(100_000, 99_150), "850ms ago");
        assert_eq!(ago(400_000, 155_000), "4m05s ago");
    }

    #[test]
    fn arguments_parse() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_seconds("-1").is_err());
        assert_eq!(parse_state("stopped"), Ok(MirrorPartitionState::Stopped));
        assert!(parse_state("GONE").is_err());
    }
}
