//! `MirrorSync`: each mirror's periodic metadata sync (reference §8; issue 7). Every
//! refresh interval (the mirror's `mirror.metadata.refresh.interval.ms`, else the
//! broker's) it runs five steps against the mirror's source cluster:
//!
//! 1. `cluster-id`: the source's cluster id must still be the mirror's
//!    `source.cluster.id`. A different id means the bootstrap address now reaches
//!    another cluster: every MIRRORING partition of the mirror goes FAILED
//!    (non-retryable) and the other steps are skipped, because copying configs or
//!    offsets from the wrong cluster would corrupt the destination.
//! 2. `topic-configs`: explicit (DYNAMIC_TOPIC_CONFIG) configs of the source topic are
//!    set locally, and local explicit configs the source no longer sets are removed;
//!    only keys Twinlog knows, never the excluded set (reference §3.3 defaults plus the
//!    mirror's `topic.properties.exclude`; `mirror.name` always).
//! 3. `partitions`: a source topic with more partitions than the local one is grown by
//!    CreatePartitions; the [`MirrorManager`] then prepares and mirrors the new
//!    partitions like any other.
//! 4. `deleted-topics`: a source topic that is gone (UNKNOWN_TOPIC_OR_PARTITION, checked
//!    again against the full topic list because a source may answer from stale metadata)
//!    or that was re-created under another topic id fails its partitions (non-retryable).
//! 5. `group-offsets`: committed offsets of source groups matching `groups.include` and
//!    not `groups.exclude` are committed on this broker, as a client of it (Kafka's
//!    "simple" commit: generation -1, no member id), for groups that are Empty or unknown
//!    here, clamped into the local log's range, never moving a local offset backwards.
//! 6. `topic-discovery`: source topics matching the mirror's `topics.include` (the
//!    patterns `twinlog mirror add --topic 'pay-.*'` gave, kept with the mirror) and not
//!    `topics.exclude`, that have no local topic of that name, are added to the mirror
//!    with AddTopicsToMirror sent to this broker as a client (so every check of a manual
//!    add applies). A local topic, mirrored or not, is never taken over, a topic
//!    removed from the mirror (failed over) is never added back, and a mirror whose
//!    topics have all been failed over adds none. Exclusion is enforced
//!    too (reference §8.6): a topic still mirroring that now matches `topics.exclude`
//!    (the operator changed it) is removed from the mirror — failed over, so it becomes
//!    writable here with its data.
//!
//! Only topics whose desired state is MIRRORING take part: pausing a topic pauses its
//! sync, removing it (failover) ends it, so offsets committed after a failover are never
//! overwritten. Steps do not depend on each other's success (except on the identity
//! check); each keeps its last success time and last error, which DescribeMirrors
//! reports (`DescribedMirror::sync`) and `twinlog mirror describe` prints.
//!
//! It runs on the control plane's mirror thread next to the manager; a mirror's run is
//! one task, and a mirror never has two runs at once.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dataplane::client::topic_configs::{
    describe_source_topic_configs, excluded_topic_configs, plan_topic_configs,
};
use dataplane::client::{
    ClientError, ClusterMetadata, ConnectionConfig, KafkaConnection, SourceCluster,
};
use dataplane::controller::{AdminRequest, AdminResponse, ControllerHandle};
use dataplane::fetcher::{MirrorEvent, MirrorFetchConfig};
use dataplane::log::loader::format_topic_id;
use dataplane::metadata::{pattern_list, MetadataCell, MetadataImage, MirrorImage, TopicImage};
use dataplane::types::TopicPartition;
use dataplane::wire::mirror::{
    keys, AddTopicsToMirrorRequest, DesiredMirrorState, MirrorRequest, MirrorResponse,
    MirrorSyncStatus, MirrorTopicMetadata, RemoveTopicsFromMirrorRequest,
    MIRROR_SOURCE_TOPIC_ID_CONFIG, NO_SOURCE_TOPIC_ID,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest,
    ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::acl_sync::{self, plan_acl_sync, AclRules, AclScope};
use super::manager::MirrorManager;

/// The broker default of `mirror.metadata.refresh.interval.ms` (reference §3.4).
pub const DEFAULT_REFRESH_INTERVAL_MS: u64 = 60_000;
/// Shortest refresh interval honoured (a mirror config of 0 would otherwise spin).
pub const REFRESH_INTERVAL_MIN_MS: u64 = 100;
/// How often the scheduler looks for mirrors whose run is due.
const TICK: Duration = Duration::from_millis(100);
/// Source groups considered per run at most; the rest wait for a later run.
pub const GROUPS_PER_RUN_MAX: usize = 10_000;
/// Groups per DescribeGroups request to this broker.
const DESCRIBE_GROUPS_PER_REQUEST_MAX: usize = 100;
/// Errors named in a step's error message at most (the rest are counted).
const ERRORS_LISTED_MAX: usize = 5;
/// Connect timeout toward this broker (the destination): it is local.
const DESTINATION_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Step names, in the order they run and are reported.
pub mod steps {
    pub const CLUSTER_ID: &str = "cluster-id";
    pub const TOPIC_CONFIGS: &str = "topic-configs";
    pub const PARTITIONS: &str = "partitions";
    pub const DELETED_TOPICS: &str = "deleted-topics";
    pub const GROUP_OFFSETS: &str = "group-offsets";
    pub const TOPIC_DISCOVERY: &str = "topic-discovery";
    pub const ACLS: &str = "acls";

    pub const ALL: [&str; 7] = [
        CLUSTER_ID,
        TOPIC_CONFIGS,
        PARTITIONS,
        DELETED_TOPICS,
        GROUP_OFFSETS,
        TOPIC_DISCOVERY,
        ACLS,
    ];
}

/// ListOffsets timestamps: the log start and the log end.
const EARLIEST_TIMESTAMP: i64 = -2;
const LATEST_TIMESTAMP: i64 = -1;

/// Broker-level settings of the sync (reference §3.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorSyncConfig {
    /// `mirror.metadata.refresh.interval.ms` of the broker: the period of every mirror
    /// that does not set its own.
    pub refresh_interval_ms: u64,
}

impl Default for MirrorSyncConfig {
    fn default() -> Self {
        MirrorSyncConfig {
            refresh_interval_ms: DEFAULT_REFRESH_INTERVAL_MS,
        }
    }
}

/// A committed offset as OffsetFetch reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// -1 unknown.
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Which groups a mirror syncs: `groups.include` minus `groups.exclude`, each a comma
/// separated list of regexes joined into one anchored pattern (reference §3.3 notes).
#[derive(Debug, Clone)]
pub struct GroupFilter {
    include: Option<regex::Regex>,
    exclude: Option<regex::Regex>,
}

impl GroupFilter {
    /// The filter of a mirror's configs (`groups.include` defaults to `.*`).
    pub fn from_configs(configs: &BTreeMap<String, String>) -> Result<Self, String> {
        let list = |key: &str, default: &str| {
            let value = configs.get(key).map_or(default, String::as_str);
            pattern_list(value).map_err(|e| format!("mirror config {key}: {e}"))
        };
        Ok(GroupFilter {
            include: list("groups.include", ".*")?,
            exclude: list("groups.exclude", "")?,
        })
    }

    pub fn matches(&self, group: &str) -> bool {
        self.include.as_ref().is_some_and(|r| r.is_match(group))
            && !self.exclude.as_ref().is_some_and(|r| r.is_match(group))
    }
}

/// Step 6's plan: the source topics the mirror's patterns select that have no local
/// topic yet, in name order. No `topics.include`: none (a mirror of named topics only).
pub fn plan_discovered_topics(
    mirror_configs: &BTreeMap<String, String>,
    source: &ClusterMetadata,
    local: &MetadataImage,
) -> Result<Vec<String>, String> {
    let list = |key: &str| {
        pattern_list(mirror_configs.get(key).map_or("", String::as_str))
            .map_err(|e| format!("mirror config {key}: {e}"))
    };
    let Some(include) = list("topics.include")? else {
        return Ok(Vec::new());
    };
    let exclude = list("topics.exclude")?;
    Ok(source
        .topics
        .iter()
        .filter(|(name, t)| {
            t.error_code == 0
                && !name.starts_with("__")
                && include.is_match(name)
                && !exclude.as_ref().is_some_and(|x| x.is_match(name))
                && local.topic(name).is_none()
        })
        .map(|(name, _)| name.clone())
        .collect())
}

/// Step 6's exclusion: the topics of mirror `name` still MIRRORING (or paused) whose
/// name matches its `topics.exclude`.
pub fn plan_excluded_topics(
    name: &str,
    mirror_configs: &BTreeMap<String, String>,
    local: &MetadataImage,
) -> Result<Vec<String>, String> {
    let Some(exclude) = pattern_list(
        mirror_configs
            .get("topics.exclude")
            .map_or("", String::as_str),
    )
    .map_err(|e| format!("mirror config topics.exclude: {e}"))?
    else {
        return Ok(Vec::new());
    };
    Ok(local
        .topics
        .values()
        .filter(|t| {
            matches!(t.mirror(), Some((m, d)) if m == name && d != DesiredMirrorState::Stopped)
                && exclude.is_match(&t.name)
        })
        .map(|t| t.name.clone())
        .collect())
}

/// The period of a mirror's sync: its own `mirror.metadata.refresh.interval.ms`, else
/// the broker default; never below [`REFRESH_INTERVAL_MIN_MS`].
pub fn refresh_interval(mirror: &MirrorImage, broker_default_ms: u64) -> Duration {
    let ms = mirror
        .configs
        .get("mirror.metadata.refresh.interval.ms")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(broker_default_ms);
    Duration::from_millis(ms.max(REFRESH_INTERVAL_MIN_MS))
}

/// `Err(message)` when the source now reports another cluster id than the one the
/// mirror was created for. An unknown expected id (`""`) or a source too old to report
/// one (Metadata v0-v1) cannot be checked.
pub fn check_source_cluster_id(expected: &str, actual: Option<&str>) -> Result<(), String> {
    match actual {
        Some(actual) if !expected.is_empty() && actual != expected => Err(format!(
            "source cluster id changed from {expected} to {actual}"
        )),
        _ => Ok(()),
    }
}

/// Why a mirrored topic no longer has a source, per one Metadata answer: the source
/// does not know the name, or knows it under another topic id (deleted and re-created:
/// its records are not the ones mirrored so far). `None` while the source has it (or
/// answers with another error, which says nothing about deletion).
pub fn source_topic_gone(local: &TopicImage, meta: &ClusterMetadata) -> Option<String> {
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    match meta.topics.get(&local.name) {
        None => Some(format!("source topic {} was deleted", local.name)),
        Some(t) if t.error_code == unknown => {
            Some(format!("source topic {} was deleted", local.name))
        }
        Some(t)
            if t.error_code == 0
                && t.id.is_nil()
                && local.configs.get(MIRROR_SOURCE_TOPIC_ID_CONFIG).map(String::as_str)
                    == Some(NO_SOURCE_TOPIC_ID)
                && t.partitions.len() < local.partitions.len() =>
        {
            Some(format!(
                "source topic {} has {} partitions, fewer than the {} mirrored, and the source reports no topic ids: it was deleted and re-created",
                local.name,
                t.partitions.len(),
                local.partitions.len()
            ))
        }
        Some(t) if t.error_code == 0 && !t.id.is_nil() && t.id != local.id => Some(format!(
            "source topic {} was deleted and re-created (source topic id {}, mirrored topic id {})",
            local.name,
            format_topic_id(t.id),
            format_topic_id(local.id)
        )),
        Some(_) => None,
    }
}

/// The source's partition count when it is larger than the local one.
pub fn partition_growth(local: &TopicImage, meta: &ClusterMetadata) -> Option<i32> {
    let t = meta.topics.get(&local.name)?;
    if t.error_code != 0 {
        return None;
    }
    let count = t.partitions.iter().map(|p| p.partition + 1).max()?;
    (usize::try_from(count).ok()? > local.partitions.len()).then_some(count)
}

/// What to commit locally for one group: each source offset clamped into the local
/// log's `[start, end]`, skipped where the local committed offset is already at or
/// beyond it (a group's offset never moves backwards here) or where the local range is
/// unknown. An offset that needed clamping loses its leader epoch and metadata: they
/// describe a position the local log does not have.
pub fn plan_group_offsets(
    source: &BTreeMap<TopicPartition, CommittedOffset>,
    local: &BTreeMap<TopicPartition, CommittedOffset>,
    ranges: &BTreeMap<TopicPartition, (i64, i64)>,
) -> Vec<(TopicPartition, CommittedOffset)> {
    let mut out = Vec::new();
    for (tp, src) in source {
        if src.offset < 0 {
            continue;
        }
        let Some(&(start, end)) = ranges.get(tp) else {
            continue;
        };
        if start < 0 || end < start {
            continue;
        }
        let clamped = src.offset.clamp(start, end);
        if local.get(tp).is_some_and(|l| l.offset >= clamped) {
            continue;
        }
        let value = if clamped == src.offset {
            src.clone()
        } else {
            CommittedOffset {
                offset: clamped,
                leader_epoch: -1,
                metadata: Some(String::new()),
            }
        };
        out.push((tp.clone(), value));
    }
    out
}

/// `"a; b; c and 2 more"`.
fn join_errors(errors: &[String]) -> String {
    let mut s = errors
        .iter()
        .take(ERRORS_LISTED_MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if errors.len() > ERRORS_LISTED_MAX {
        s.push_str(&format!(" and {} more", errors.len() - ERRORS_LISTED_MAX));
    }
    s
}

fn errors_to_result(errors: &[String]) -> Result<(), String> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(join_errors(errors))
    }
}

fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?} ({code})"),
        None => format!("error {code}"),
    }
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The highest version of `key` both sides speak within `[min, max]`.
fn version(conn: &KafkaConnection, key: ApiKey, min: i16, max: i16) -> Result<i16, String> {
    conn.pick_version(key as i16, min, max).ok_or_else(|| {
        format!(
            "{} does not serve {key:?} v{min}-v{max} (it serves {:?})",
            conn.addr(),
            conn.api_range(key as i16)
        )
    })
}

fn request_error(what: &str, e: ClientError) -> String {
    format!("{what}: {e}")
}

/// Partitions by topic, for OffsetFetch and ListOffsets.
type TopicPartitions = BTreeMap<String, Vec<i32>>;

/// Groups this cluster lists (ListGroups on one broker): classic and consumer groups,
/// not share or streams groups, whose offsets are not consumer offsets.
async fn list_groups(conn: &mut KafkaConnection) -> Result<Vec<String>, String> {
    let v = version(conn, ApiKey::ListGroups, 0, 5)?;
    let resp = conn
        .send(&ListGroupsRequest::default(), v)
        .await
        .map_err(|e| request_error("ListGroups", e))?;
    if resp.error_code != 0 {
        return Err(format!("ListGroups: {}", error_name(resp.error_code)));
    }
    Ok(resp
        .groups
        .into_iter()
        .filter(|g| matches!(g.group_type.as_str(), "" | "classic" | "consumer"))
        .map(|g| g.group_id.0.to_string())
        .collect())
}

/// The node id of `group`'s coordinator (FindCoordinator).
async fn find_coordinator(conn: &mut KafkaConnection, group: &str) -> Result<i32, String> {
    let v = version(conn, ApiKey::FindCoordinator, 0, 4)?;
    let mut req = FindCoordinatorRequest::default().with_key_type(0);
    if v >= 4 {
        req = req.with_coordinator_keys(vec![str_bytes(group)]);
    } else {
        req = req.with_key(str_bytes(group));
    }
    let resp = conn
        .send(&req, v)
        .await
        .map_err(|e| request_error("FindCoordinator", e))?;
    let (code, node) = if v >= 4 {
        let c = resp
            .coordinators
            .first()
            .ok_or_else(|| "FindCoordinator: empty answer".to_string())?;
        (c.error_code, c.node_id.0)
    } else {
        (resp.error_code, resp.node_id.0)
    };
    if code != 0 {
        return Err(format!("FindCoordinator: {}", error_name(code)));
    }
    Ok(node)
}

/// The committed offsets of `group` for `topics` (OffsetFetch, not requiring stable
/// offsets). Partitions without an offset are left out.
async fn offset_fetch(
    conn: &mut KafkaConnection,
    group: &str,
    topics: &TopicPartitions,
) -> Result<BTreeMap<TopicPartition, CommittedOffset>, String> {
    let v = version(conn, ApiKey::OffsetFetch, 1, 9)?;
    let mut req = OffsetFetchRequest::default();
    if v >= 8 {
        req = req.with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(str_bytes(group)))
            .with_member_id(None)
            .with_member_epoch(-1)
            .with_topics(Some(
                topics
                    .iter()
                    .map(|(t, parts)| {
                        OffsetFetchRequestTopics::default()
                            .with_name(TopicName(str_bytes(t)))
                            .with_partition_indexes(parts.clone())
                    })
                    .collect(),
            ))]);
    } else {
        req = req
            .with_group_id(GroupId(str_bytes(group)))
            .with_topics(Some(
                topics
                    .iter()
                    .map(|(t, parts)| {
                        OffsetFetchRequestTopic::default()
                            .with_name(TopicName(str_bytes(t)))
                            .with_partition_indexes(parts.clone())
                    })
                    .collect(),
            ));
    }
    let resp = conn
        .send(&req, v)
        .await
        .map_err(|e| request_error("OffsetFetch", e))?;
    let mut out = BTreeMap::new();
    let mut keep = |topic: &str,
                    partition: i32,
                    offset: i64,
                    epoch: i32,
                    meta: Option<&StrBytes>,
                    code: i16| {
        if code == 0 && offset >= 0 {
            out.insert(
                TopicPartition::new(topic, partition),
                CommittedOffset {
                    offset,
                    leader_epoch: epoch,
                    metadata: meta.map(|m| m.to_string()),
                },
            );
        }
    };
    if v >= 8 {
        let g = resp
            .groups
            .first()
            .ok_or_else(|| "OffsetFetch: no group in the answer".to_string())?;
        if g.error_code != 0 {
            return Err(format!("OffsetFetch: {}", error_name(g.error_code)));
        }
        for t in &g.topics {
            for p in &t.partitions {
                keep(
                    t.name.0.as_str(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata.as_ref(),
                    p.error_code,
                );
            }
        }
    } else {
        if resp.error_code != 0 {
            return Err(format!("OffsetFetch: {}", error_name(resp.error_code)));
        }
        for t in &resp.topics {
            for p in &t.partitions {
                keep(
                    t.name.0.as_str(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata.as_ref(),
                    p.error_code,
                );
            }
        }
    }
    Ok(out)
}

/// Whether each group may receive synced offsets here: Empty, Dead or unknown groups
/// may; a group with members (Stable, rebalancing) may not.
async fn groups_open_for_sync(
    conn: &mut KafkaConnection,
    groups: &[String],
) -> Result<BTreeMap<String, Result<(), String>>, String> {
    let v = version(conn, ApiKey::DescribeGroups, 0, 5)?;
    let not_found = ResponseError::GroupIdNotFound.code();
    let mut out = BTreeMap::new();
    for chunk in groups.chunks(DESCRIBE_GROUPS_PER_REQUEST_MAX) {
        let req = DescribeGroupsRequest::default()
            .with_groups(chunk.iter().map(|g| GroupId(str_bytes(g))).collect());
        let resp = conn
            .send(&req, v)
            .await
            .map_err(|e| request_error("DescribeGroups on this broker", e))?;
        for g in resp.groups {
            let state = g.group_state.to_string();
            let open = if g.error_code == not_found {
                Ok(())
            } else if g.error_code != 0 {
                Err(format!("DescribeGroups: {}", error_name(g.error_code)))
            } else if matches!(state.as_str(), "Empty" | "Dead") && g.members.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "active here ({state}, {} members)",
                    g.members.len()
                ))
            };
            out.insert(g.group_id.0.to_string(), open);
        }
    }
    Ok(out)
}

/// `[log start, log end]` of each partition on this broker (ListOffsets).
async fn offset_ranges(
    conn: &mut KafkaConnection,
    topics: &TopicPartitions,
) -> Result<BTreeMap<TopicPartition, (i64, i64)>, String> {
    let v = version(conn, ApiKey::ListOffsets, 1, 8)?;
    let mut found: [BTreeMap<TopicPartition, i64>; 2] = [BTreeMap::new(), BTreeMap::new()];
    for (i, timestamp) in [EARLIEST_TIMESTAMP, LATEST_TIMESTAMP]
        .into_iter()
        .enumerate()
    {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(0)
            .with_topics(
                topics
                    .iter()
                    .map(|(t, parts)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(str_bytes(t)))
                            .with_partitions(
                                parts
                                    .iter()
                                    .map(|p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(*p)
                                            .with_current_leader_epoch(-1)
                                            .with_timestamp(timestamp)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp = conn
            .send(&req, v)
            .await
            .map_err(|e| request_error("ListOffsets on this broker", e))?;
        for t in resp.topics {
            for p in t.partitions {
                if p.error_code == 0 && p.offset >= 0 {
                    found[i].insert(
                        TopicPartition::new(t.name.0.as_str(), p.partition_index),
                        p.offset,
                    );
                }
            }
        }
    }
    let [starts, ends] = found;
    Ok(starts
        .into_iter()
        .filter_map(|(tp, start)| ends.get(&tp).map(|end| (tp, (start, *end))))
        .collect())
}

/// Kafka's "simple" OffsetCommit (generation -1, no member): accepted only while the
/// group has no members.
async fn offset_commit(
    conn: &mut KafkaConnection,
    group: &str,
    commits: &[(TopicPartition, CommittedOffset)],
) -> Result<(), String> {
    let v = version(conn, ApiKey::OffsetCommit, 2, 8)?;
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, c) in commits {
        by_topic.entry(tp.topic.as_str()).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition)
                .with_committed_offset(c.offset)
                .with_committed_leader_epoch(c.leader_epoch)
                .with_committed_metadata(c.metadata.as_deref().map(str_bytes)),
        );
    }
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(str_bytes(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::default())
        .with_group_instance_id(None)
        .with_retention_time_ms(-1)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, partitions)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let resp = conn
        .send(&req, v)
        .await
        .map_err(|e| request_error("OffsetCommit on this broker", e))?;
    let failed: Vec<String> = resp
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code != 0)
                .map(move |p| {
                    format!(
                        "{}-{}: {}",
                        t.name.0.as_str(),
                        p.partition_index,
                        error_name(p.error_code)
                    )
                })
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("OffsetCommit: {}", join_errors(&failed)))
    }
}

/// One mirror's sync as the scheduler tracks it.
#[derive(Debug, Default)]
struct MirrorRuntime {
    /// A run is in progress.
    running: bool,
    /// When the last run started.
    last_start: Option<Instant>,
    /// The mirror's topics when the last run started: a topic added since makes the
    /// next run due at once, so its configs and group offsets do not wait a period.
    topics: BTreeSet<String>,
    steps: BTreeMap<&'static str, MirrorSyncStatus>,
}

/// The periodic metadata sync of every mirror (see the module docs).
pub struct MirrorSync {
    metadata: Arc<MetadataCell>,
    controller: Arc<dyn ControllerHandle>,
    manager: Rc<MirrorManager>,
    config: MirrorSyncConfig,
    mirrors: RefCell<BTreeMap<String, MirrorRuntime>>,
}

impl std::fmt::Debug for MirrorSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorSync")
            .field("config", &self.config)
            .field("mirrors", &self.mirrors.borrow().len())
            .finish_non_exhaustive()
    }
}

impl MirrorSync {
    pub fn new(
        metadata: Arc<MetadataCell>,
        controller: Arc<dyn ControllerHandle>,
        manager: Rc<MirrorManager>,
        config: MirrorSyncConfig,
    ) -> Rc<Self> {
        Rc::new(MirrorSync {
            metadata,
            controller,
            manager,
            config,
            mirrors: RefCell::new(BTreeMap::new()),
        })
    }

    /// Runs the scheduler: starts each mirror's run when it is due.
    pub async fn run(self: Rc<Self>) {
        loop {
            self.tick(Instant::now());
            glommio::timer::sleep(TICK).await;
        }
    }

    /// Forgets deleted mirrors and starts the runs that are due at `now`.
    fn tick(self: &Rc<Self>, now: Instant) {
        let image = self.metadata.load();
        let mut mirrors = self.mirrors.borrow_mut();
        mirrors.retain(|name, _| image.mirrors.contains_key(name));
        for (name, mirror) in &image.mirrors {
            if !is_mirror_coordinator(&image, name) {
                // Once per cluster (reference §5.2): the mirror coordinator's broker runs it.
                continue;
            }
            let rt = mirrors.entry(name.clone()).or_default();
            if rt.running {
                continue;
            }
            let interval = refresh_interval(mirror, self.config.refresh_interval_ms);
            let topics: BTreeSet<String> = image
                .topics
                .values()
                .filter(|t| t.mirror().is_some_and(|(m, _)| m == name.as_str()))
                .map(|t| t.name.clone())
                .collect();
            let added = topics.iter().any(|t| !rt.topics.contains(t));
            if !added && rt.last_start.is_some_and(|at| now < at + interval) {
                continue;
            }
            rt.running = true;
            rt.last_start = Some(now);
            rt.topics = topics;
            let me = Rc::clone(self);
            let name = name.clone();
            glommio::spawn_local(async move {
                me.sync_mirror(&name).await;
                if let Some(rt) = me.mirrors.borrow_mut().get_mut(&name) {
                    rt.running = false;
                }
            })
            .detach();
        }
    }

    /// Every step of `mirror` with its last success and last error (steps that never
    /// ran: -1 and none).
    pub fn status(&self, mirror: &str) -> Vec<MirrorSyncStatus> {
        let mirrors = self.mirrors.borrow();
        steps::ALL
            .iter()
            .map(|step| {
                mirrors
                    .get(mirror)
                    .and_then(|rt| rt.steps.get(step))
                    .cloned()
                    .unwrap_or_else(|| MirrorSyncStatus {
                        step: step.to_string(),
                        ..MirrorSyncStatus::default()
                    })
            })
            .collect()
    }

    /// Adds the sync status to each described mirror of a DescribeMirrors answer.
    pub fn annotate(&self, response: &mut MirrorResponse) {
        if let MirrorResponse::DescribeMirrors(r) = response {
            for m in r.mirrors.iter_mut().filter(|m| m.error_code == 0) {
                m.sync = self.status(&m.mirror_name);
            }
        }
    }

    fn record(&self, mirror: &str, step: &'static str, result: Result<(), String>) {
        let mut mirrors = self.mirrors.borrow_mut();
        let Some(rt) = mirrors.get_mut(mirror) else {
            return;
        };
        let status = rt.steps.entry(step).or_insert_with(|| MirrorSyncStatus {
            step: step.to_string(),
            ..MirrorSyncStatus::default()
        });
        match result {
            Ok(()) => {
                if status.last_error.take().is_some() {
                    tracing::info!(%mirror, step, "mirror metadata sync step succeeds again");
                }
                status.last_success_ms = now_ms();
            }
            Err(e) => {
                // Logged when the error changes, not on every run.
                if status.last_error.as_deref() != Some(e.as_str()) {
                    tracing::warn!(%mirror, step, error = %e, "mirror metadata sync step failed");
                }
                status.last_error = Some(e);
            }
        }
    }

    /// One run of every step for `name`.
    async fn sync_mirror(&self, name: &str) {
        let image = self.metadata.load();
        let Some(mirror) = image.mirrors.get(name).cloned() else {
            return;
        };
        let topics: Vec<(Arc<TopicImage>, DesiredMirrorState)> = image
            .topics
            .values()
            .filter_map(|t| match t.mirror() {
                Some((m, desired)) if m == name => Some((Arc::clone(t), desired)),
                _ => None,
            })
            .collect();
        let active: Vec<Arc<TopicImage>> = topics
            .iter()
            .filter(|(_, d)| *d == DesiredMirrorState::Mirroring)
            .map(|(t, _)| Arc::clone(t))
            .collect();
        let fetch = MirrorFetchConfig::from_image(&mirror);
        let mut source = match fetch
            .connection(
                &format!("{}-sync", fetch.client_id),
                Duration::from_millis(fetch.request_timeout_ms),
            )
            .and_then(|c| {
                SourceCluster::new(&fetch.bootstrap_servers, c).map_err(|e| e.to_string())
            }) {
            Ok(s) => s,
            Err(e) => {
                for step in steps::ALL {
                    self.record(name, step, Err(format!("source connection: {e}")));
                }
                return;
            }
        };

        // 1. Source identity, with the metadata of the active topics for 3 and 4.
        let names: Vec<String> = active.iter().map(|t| t.name.clone()).collect();
        let meta = match source.metadata(Some(&names)).await {
            Ok(m) => {
                if let Err(message) =
                    check_source_cluster_id(mirror.source_cluster_id(), m.cluster_id.as_deref())
                {
                    for (topic, _) in &topics {
                        self.fail_partitions(name, topic, &message).await;
                    }
                    self.record(name, steps::CLUSTER_ID, Err(message.clone()));
                    for step in &steps::ALL[1..] {
                        self.record(name, step, Err(format!("skipped: {message}")));
                    }
                    return;
                }
                self.record(name, steps::CLUSTER_ID, Ok(()));
                Some(m)
            }
            Err(e) => {
                let message = format!("source metadata: {e}");
                for step in [steps::CLUSTER_ID, steps::PARTITIONS, steps::DELETED_TOPICS] {
                    self.record(name, step, Err(message.clone()));
                }
                None
            }
        };

        // 4. Deleted source topics (before 2, 3 and 5, which then leave them alone).
        let mut deleted = BTreeSet::new();
        if let Some(meta) = &meta {
            let result = self
                .sync_deleted_topics(name, &active, meta, &mut source, &mut deleted)
                .await;
            self.record(name, steps::DELETED_TOPICS, result);
        }
        let live: Vec<Arc<TopicImage>> = active
            .iter()
            .filter(|t| !deleted.contains(&t.name))
            .cloned()
            .collect();

        // 3. Partition growth.
        if let Some(meta) = &meta {
            let result = self.sync_partitions(&live, meta).await;
            self.record(name, steps::PARTITIONS, result);
        }

        // 2. Topic configs.
        let result = self
            .sync_topic_configs(name, &mirror, &live, &mut source)
            .await;
        self.record(name, steps::TOPIC_CONFIGS, result);

        // 5. Group offsets.
        let result = self
            .sync_group_offsets(name, &mirror, &live, &mut source)
            .await;
        self.record(name, steps::GROUP_OFFSETS, result);

        // 6. Topics the patterns select that appeared on the source; excluded ones out.
        let result = self
            .sync_discovered_topics(name, &mirror, &mut source)
            .await;
        self.record(name, steps::TOPIC_DISCOVERY, result);

        // 7. ACLs of the mirrored topics and synced groups.
        let result = self.sync_acls(name, &mirror, &live, &mut source).await;
        self.record(name, steps::ACLS, result);
    }

    /// Step 7: the source's ACLs in the mirror's scope, made (or held) here; the ones
    /// the mirror made that the source dropped, deleted (see `acl_sync.rs`).
    async fn sync_acls(
        &self,
        mirror_name: &str,
        mirror: &MirrorImage,
        topics: &[Arc<TopicImage>],
        source: &mut SourceCluster,
    ) -> Result<(), String> {
        if topics.is_empty() {
            return Ok(());
        }
        let rules = AclRules::from_configs(&mirror.configs)?;
        let groups = GroupFilter::from_configs(&mirror.configs)?;
        let conn = source
            .any_connection()
            .await
            .map_err(|e| format!("cannot reach the source: {e}"))?;
        let Some(acls) = acl_sync::source_acls(conn).await? else {
            return Ok(());
        };
        let image = self.metadata.load();
        let mirroring: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
        let read_only: Vec<&str> = image
            .topics
            .values()
            .filter(|t| {
                matches!(t.mirror(), Some((m, d)) if m == mirror_name && d != DesiredMirrorState::Stopped)
            })
            .map(|t| t.name.as_str())
            .collect();
        let owned: Vec<(uuid::Uuid, dataplane::acl::AclBinding, bool)> = image
            .acls
            .mirrored_by(mirror_name)
            .map(|(id, acl, held)| (*id, acl.clone(), held))
            .collect();
        let scope = AclScope {
            topics: &mirroring,
            read_only: &read_only,
            groups: &groups,
        };
        let changes = plan_acl_sync(&acls, &rules, &scope, &owned, |a| image.acls.contains(a));
        if changes.is_empty() {
            return Ok(());
        }
        tracing::info!(mirror = %mirror_name, changes = changes.len(), "syncing ACLs from the source");
        self.admin(AdminRequest::SyncMirrorAcls {
            mirror: mirror_name.to_string(),
            changes,
        })
        .await
    }

    /// Step 6: AddTopicsToMirror (to this broker) for new source topics that match.
    async fn sync_discovered_topics(
        &self,
        name: &str,
        mirror: &MirrorImage,
        source: &mut SourceCluster,
    ) -> Result<(), String> {
        let set = |key: &str| {
            mirror
                .configs
                .get(key)
                .is_some_and(|v| !v.trim().is_empty())
        };
        if !set("topics.include") && !set("topics.exclude") {
            // A mirror of named topics only: nothing to discover or enforce.
            return Ok(());
        }
        let all = source
            .metadata(None)
            .await
            .map_err(|e| format!("listing the source topics: {e}"))?;
        let image = self.metadata.load();
        // A mirror whose topics have all been failed over is not pulled back into
        // mirroring by a source topic created later: its patterns rest.
        let mine: Vec<DesiredMirrorState> = image
            .topics
            .values()
            .filter_map(|t| t.mirror().filter(|(m, _)| *m == name).map(|(_, d)| d))
            .collect();
        let found = if !mine.is_empty() && mine.iter().all(|d| *d == DesiredMirrorState::Stopped) {
            Vec::new()
        } else {
            plan_discovered_topics(&mirror.configs, &all, &image)?
        };
        let excluded = plan_excluded_topics(name, &mirror.configs, &image)?;
        if found.is_empty() && excluded.is_empty() {
            return Ok(());
        }
        let mut conn = connect_destination(&image, name).await?;
        let mut failed = Vec::new();
        if !excluded.is_empty() {
            tracing::warn!(mirror = %name, topics = ?excluded, "mirrored topics now match topics.exclude: removing them from the mirror (they fail over)");
            let request = MirrorRequest::RemoveTopicsFromMirror(RemoveTopicsFromMirrorRequest {
                mirror_name: name.to_string(),
                topics: dataplane::wire::mirror::topic_names(excluded),
                patterns: Vec::new(),
                state_validation_offset: -1,
            });
            if let Err(e) = self_request(&mut conn, keys::REMOVE_TOPICS_FROM_MIRROR, request)
                .await
                .and_then(topic_errors)
            {
                failed.push(e);
            }
        }
        if found.is_empty() {
            return errors_to_result(&failed);
        }
        tracing::info!(mirror = %name, topics = ?found, "new source topics match the mirror's patterns: adding them");
        let request = MirrorRequest::AddTopicsToMirror(AddTopicsToMirrorRequest {
            mirror_name: name.to_string(),
            topics: found
                .iter()
                .map(|t| MirrorTopicMetadata {
                    topic_id: uuid::Uuid::nil(),
                    name: t.clone(),
                    num_partitions: -1,
                })
                .collect(),
            include_patterns: Vec::new(),
            exclude_patterns: Vec::new(),
            state_validation_offset: -1,
        });
        if let Err(e) = self_request(&mut conn, keys::ADD_TOPICS_TO_MIRROR, request)
            .await
            .and_then(topic_errors)
        {
            failed.push(e);
        }
        errors_to_result(&failed)
    }

    /// FAILED (non-retryable) for every partition of `topic` that is MIRRORING (the
    /// manager ignores the others).
    async fn fail_partitions(&self, mirror: &str, topic: &TopicImage, message: &str) {
        for p in &topic.partitions {
            self.manager
                .on_event(MirrorEvent::PartitionFailed {
                    mirror: mirror.to_string(),
                    tp: TopicPartition::new(topic.name.as_str(), p.partition),
                    message: message.to_string(),
                    retryable: false,
                    truncated_records: 0,
                })
                .await;
        }
    }

    /// Step 4: fails the partitions of source topics that are gone, after checking the
    /// full topic list (a stale per-topic answer must not fail a healthy topic).
    async fn sync_deleted_topics(
        &self,
        mirror: &str,
        active: &[Arc<TopicImage>],
        meta: &ClusterMetadata,
        source: &mut SourceCluster,
        deleted: &mut BTreeSet<String>,
    ) -> Result<(), String> {
        let candidates: Vec<&Arc<TopicImage>> = active
            .iter()
            .filter(|t| source_topic_gone(t, meta).is_some())
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        let all = source
            .metadata(None)
            .await
            .map_err(|e| format!("listing the source topics to confirm a deletion: {e}"))?;
        let mut messages = Vec::new();
        for topic in candidates {
            let Some(message) = source_topic_gone(topic, &all) else {
                continue;
            };
            deleted.insert(topic.name.clone());
            self.fail_partitions(mirror, topic, &message).await;
            messages.push(message);
        }
        errors_to_result(&messages)
    }

    /// Step 3: CreatePartitions for topics the source has grown.
    async fn sync_partitions(
        &self,
        topics: &[Arc<TopicImage>],
        meta: &ClusterMetadata,
    ) -> Result<(), String> {
        let grow: Vec<(String, i32)> = topics
            .iter()
            .filter_map(|t| partition_growth(t, meta).map(|n| (t.name.clone(), n)))
            .collect();
        if grow.is_empty() {
            return Ok(());
        }
        for (topic, count) in &grow {
            tracing::info!(%topic, partitions = count, "source topic grew: adding partitions to the mirror topic");
        }
        self.admin(AdminRequest::CreatePartitions {
            topics: grow,
            assignments: Vec::new(),
            validate_only: false,
        })
        .await
        .map_err(|e| format!("CreatePartitions: {e}"))
    }

    /// Step 2: the source topics' explicit configs, applied through the controller.
    async fn sync_topic_configs(
        &self,
        mirror_name: &str,
        mirror: &MirrorImage,
        topics: &[Arc<TopicImage>],
        source: &mut SourceCluster,
    ) -> Result<(), String> {
        if topics.is_empty() {
            return Ok(());
        }
        let excluded = excluded_topic_configs(&mirror.configs);
        let conn = source
            .any_connection()
            .await
            .map_err(|e| format!("cannot reach the source: {e}"))?;
        let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
        let described = describe_source_topic_configs(conn, &names).await?;
        let mut errors = Vec::new();
        for (topic, source_explicit) in described {
            let source_explicit = match source_explicit {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("{topic}: {e}"));
                    continue;
                }
            };
            // The freshest local view: the topic may have left the mirror meanwhile.
            let image = self.metadata.load();
            let Some(local) = image.topic(&topic) else {
                continue;
            };
            if local.mirror() != Some((mirror_name, DesiredMirrorState::Mirroring)) {
                continue;
            }
            let changes = plan_topic_configs(&source_explicit, &local.configs, &excluded);
            if changes.is_empty() {
                continue;
            }
            tracing::info!(mirror = %mirror_name, %topic, ?changes, "syncing topic configs from the source");
            if let Err(e) = self
                .admin(AdminRequest::AlterTopicConfigs {
                    topic: topic.clone(),
                    configs: changes,
                    incremental: true,
                    validate_only: false,
                })
                .await
            {
                errors.push(format!("{topic}: {e}"));
            }
        }
        errors_to_result(&errors)
    }

    /// Step 5: committed offsets of the source's groups, for the mirrored partitions.
    async fn sync_group_offsets(
        &self,
        mirror_name: &str,
        mirror: &MirrorImage,
        topics: &[Arc<TopicImage>],
        source: &mut SourceCluster,
    ) -> Result<(), String> {
        if topics.is_empty() {
            return Ok(());
        }
        let filter = GroupFilter::from_configs(&mirror.configs)?;
        let wanted: TopicPartitions = topics
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    t.partitions.iter().map(|p| p.partition).collect(),
                )
            })
            .collect();
        let mut errors = Vec::new();

        // Source groups: ListGroups on every broker (each coordinates some groups).
        let mut groups = BTreeSet::new();
        let brokers: Vec<i32> = source
            .last_metadata()
            .map(|m| m.brokers.keys().copied().collect())
            .unwrap_or_default();
        if brokers.is_empty() {
            let conn = source
                .any_connection()
                .await
                .map_err(|e| format!("cannot reach the source: {e}"))?;
            groups.extend(list_groups(conn).await.map_err(|e| format!("source {e}"))?);
        }
        for broker in brokers {
            let listed = match source.connection(broker).await {
                Ok(conn) => list_groups(conn).await,
                Err(e) => Err(format!("connecting: {e}")),
            };
            match listed {
                Ok(g) => groups.extend(g),
                Err(e) => errors.push(format!("source broker {broker}: {e}")),
            }
        }
        let total = groups.len();
        let groups: Vec<String> = groups
            .into_iter()
            .filter(|g| filter.matches(g))
            .take(GROUPS_PER_RUN_MAX)
            .collect();
        if groups.len() == GROUPS_PER_RUN_MAX {
            tracing::warn!(mirror = %mirror_name, total, max = GROUPS_PER_RUN_MAX, "more source groups than one sync run handles; the rest wait");
        }

        // Their committed offsets on the source.
        let mut source_offsets: BTreeMap<String, BTreeMap<TopicPartition, CommittedOffset>> =
            BTreeMap::new();
        for group in &groups {
            match self.source_group_offsets(source, group, &wanted).await {
                Ok(o) if o.is_empty() => {}
                Ok(o) => {
                    source_offsets.insert(group.clone(), o);
                }
                Err(e) => errors.push(format!("group {group}: {e}")),
            }
        }
        if source_offsets.is_empty() {
            return errors_to_result(&errors);
        }

        // This cluster, as a client of it: each group on its coordinator, each
        // partition's log range on its leader (any broker of a cluster may run the sync).
        let image = self.metadata.load();
        let mut dest = destination_cluster(&image, mirror_name)?;
        dest.metadata(Some(&[]))
            .await
            .map_err(|e| format!("this cluster's metadata: {e}"))?;
        let mut ranges = BTreeMap::new();
        let mut by_leader: BTreeMap<i32, TopicPartitions> = BTreeMap::new();
        for (topic, parts) in &wanted {
            for p in parts {
                if let Some(leader) = image
                    .partition(&TopicPartition::new(topic.as_str(), *p))
                    .map(|p| p.leader)
                    .filter(|l| *l >= 0)
                {
                    by_leader
                        .entry(leader)
                        .or_default()
                        .entry(topic.clone())
                        .or_default()
                        .push(*p);
                }
            }
        }
        for (leader, parts) in &by_leader {
            let found = match dest.connection(*leader).await {
                Ok(conn) => offset_ranges(conn, parts).await,
                Err(e) => Err(format!("connecting to broker {leader}: {e}")),
            };
            match found {
                Ok(r) => ranges.extend(r),
                Err(e) => errors.push(format!("log ranges on broker {leader}: {e}")),
            }
        }
        for (group, offsets) in source_offsets {
            let conn = match coordinator_connection(&mut dest, &group).await {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("group {group} here: {e}"));
                    continue;
                }
            };
            let open = groups_open_for_sync(conn, std::slice::from_ref(&group)).await?;
            match open.get(&group) {
                Some(Ok(())) => {}
                Some(Err(why)) => {
                    tracing::debug!(mirror = %mirror_name, %group, %why, "group offsets not synced");
                    continue;
                }
                None => {
                    errors.push(format!(
                        "group {group}: not described by its coordinator here"
                    ));
                    continue;
                }
            }
            let local = match offset_fetch(conn, &group, &wanted).await {
                Ok(l) => l,
                Err(e) => {
                    errors.push(format!("group {group} here: {e}"));
                    continue;
                }
            };
            // Only partitions of topics still mirroring now: a topic removed (failed
            // over) since the run started is the local consumers' from then on.
            let image = self.metadata.load();
            let offsets: BTreeMap<TopicPartition, CommittedOffset> = offsets
                .into_iter()
                .filter(|(tp, _)| {
                    image.topic(&tp.topic).and_then(|t| t.mirror())
                        == Some((mirror_name, DesiredMirrorState::Mirroring))
                })
                .collect();
            let commits = plan_group_offsets(&offsets, &local, &ranges);
            if commits.is_empty() {
                continue;
            }
            tracing::debug!(mirror = %mirror_name, %group, partitions = commits.len(), "syncing group offsets from the source");
            if let Err(e) = offset_commit(conn, &group, &commits).await {
                errors.push(format!("group {group}: {e}"));
            }
        }
        errors_to_result(&errors)
    }

    /// FindCoordinator, then OffsetFetch on the coordinator.
    async fn source_group_offsets(
        &self,
        source: &mut SourceCluster,
        group: &str,
        wanted: &TopicPartitions,
    ) -> Result<BTreeMap<TopicPartition, CommittedOffset>, String> {
        let conn = coordinator_connection(source, group)
            .await
            .map_err(|e| format!("source {e}"))?;
        offset_fetch(conn, group, wanted).await
    }

    async fn admin(&self, request: AdminRequest) -> Result<(), String> {
        match self.controller.submit(request).await {
            Ok(AdminResponse::Results(results)) => {
                let failed: Vec<String> = results
                    .iter()
                    .filter(|r| r.error_code != 0)
                    .map(|r| {
                        format!(
                            "{}: {} {}",
                            r.name,
                            error_name(r.error_code),
                            r.message.as_deref().unwrap_or("")
                        )
                    })
                    .collect();
                errors_to_result(&failed)
            }
            Ok(AdminResponse::Failed {
                error_code,
                message,
            }) => Err(format!("{} {message}", error_name(error_code))),
            Ok(other) => Err(format!("unexpected controller answer {other:?}")),
            Err(_) => Err("the controller went away".to_string()),
        }
    }
}

/// Sends a mirror RPC to this broker over `conn` and returns its per-topic answer.
async fn self_request(
    conn: &mut KafkaConnection,
    key: i16,
    request: MirrorRequest,
) -> Result<dataplane::wire::mirror::MirrorTopicsResponse, String> {
    let failed = |e| format!("mirror request {key} to this broker: {e}");
    match dataplane::map_mirror_request!(&request, r => conn.send(r, 0).await.map_err(failed)?) {
        MirrorResponse::AddTopicsToMirror(r) | MirrorResponse::RemoveTopicsFromMirror(r) => Ok(r),
        _ => Err(format!("mirror request {key}: unexpected answer")),
    }
}

/// The per-topic errors of an add or remove answer, as one step error.
fn topic_errors(r: dataplane::wire::mirror::MirrorTopicsResponse) -> Result<(), String> {
    let failed: Vec<String> = r
        .topics
        .iter()
        .filter(|t| t.error_code != 0)
        .map(|t| {
            format!(
                "{}: {} {}",
                t.name,
                error_name(t.error_code),
                t.error_message.as_deref().unwrap_or("")
            )
        })
        .collect();
    if failed.is_empty() && r.error_code != 0 {
        return Err(format!(
            "{} {}",
            error_name(r.error_code),
            r.error_message.unwrap_or_default()
        ));
    }
    errors_to_result(&failed)
}

/// This broker is the coordinator of `mirror`: it leads the `__mirror_state` partition
/// of the mirror's name (reference §5.2). Before that topic exists, the lowest live
/// broker is.
pub fn is_mirror_coordinator(image: &MetadataImage, mirror: &str) -> bool {
    match image.topic(super::MIRROR_STATE_TOPIC) {
        Some(state) => {
            let p = super::mirror_partition_for(mirror, state.partitions.len() as i32);
            state
                .partitions
                .iter()
                .any(|sp| sp.partition == p && sp.leader == image.node_id)
        }
        None => image
            .live_brokers()
            .first()
            .is_none_or(|(id, _)| *id == image.node_id),
    }
}

/// A connection to the coordinator of `group` in `cluster` (FindCoordinator, then the
/// cluster's metadata when that broker is new to it).
async fn coordinator_connection<'a>(
    cluster: &'a mut SourceCluster,
    group: &str,
) -> Result<&'a mut KafkaConnection, String> {
    let conn = cluster
        .any_connection()
        .await
        .map_err(|e| format!("cannot reach the cluster: {e}"))?;
    let node = find_coordinator(conn, group).await?;
    let known = cluster
        .last_metadata()
        .is_some_and(|m| m.brokers.contains_key(&node));
    if !known {
        cluster
            .metadata(Some(&[]))
            .await
            .map_err(|e| format!("metadata: {e}"))?;
    }
    cluster
        .connection(node)
        .await
        .map_err(|e| format!("connecting to coordinator {node}: {e}"))
}

/// How the mirror's sync reaches this broker's own cluster: as a broker of it would
/// (the inter-broker listener's security).
fn destination_config(mirror: &str) -> ConnectionConfig {
    ConnectionConfig {
        security: dataplane::client::security::inter_broker(),
        ..ConnectionConfig::new(
            &format!("twinlog-mirror-sync-{mirror}"),
            DESTINATION_CONNECT_TIMEOUT,
        )
    }
}

/// This broker's own cluster, as a client of it, bootstrapped from this broker.
fn destination_cluster(image: &MetadataImage, mirror: &str) -> Result<SourceCluster, String> {
    let config = destination_config(mirror);
    SourceCluster::new(&own_address(image).to_string(), config)
        .map_err(|e| format!("this cluster as a client: {e}"))
}

/// The address this broker advertises (loopback when that is a wildcard address).
fn own_address(image: &MetadataImage) -> std::net::SocketAddr {
    let mut addr = image.advertised;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        });
    }
    addr
}

/// A connection to this broker, as a client: the address it advertises (loopback when
/// that is a wildcard address).
async fn connect_destination(
    image: &MetadataImage,
    mirror: &str,
) -> Result<KafkaConnection, String> {
    let addr = own_address(image);
    let config = destination_config(mirror);
    KafkaConnection::connect_with(&addr.to_string(), &config)
        .await
        .map_err(|e| format!("connecting to this broker at {addr}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::client::{PartitionMetadata, TopicMetadata};
    use dataplane::metadata::PartitionImage;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn mirror(configs: &[(&str, &str)]) -> MirrorImage {
        MirrorImage {
            name: "m".into(),
            configs: map(configs),
        }
    }

    fn topic(name: &str, id: u128, partitions: i32) -> TopicImage {
        TopicImage {
            name: name.into(),
            id: uuid::Uuid::from_u128(id),
            partitions: (0..partitions)
                .map(|p| PartitionImage::single(p, 0, 0, 0))
                .collect(),
            configs: map(&[(dataplane::wire::mirror::MIRROR_NAME_CONFIG, "m")]),
            log_config: Default::default(),
            internal: false,
        }
    }

    fn source_meta(topics: &[(&str, u128, i16, i32)]) -> ClusterMetadata {
        ClusterMetadata {
            cluster_id: Some("src".into()),
            controller_id: 1,
            brokers: BTreeMap::new(),
            topics: topics
                .iter()
                .map(|(name, id, code, partitions)| {
                    (
                        name.to_string(),
                        TopicMetadata {
                            id: uuid::Uuid::from_u128(*id),
                            error_code: *code,
                            partitions: (0..*partitions)
                                .map(|p| PartitionMetadata {
                                    partition: p,
                                    leader: 1,
                                    leader_epoch: 0,
                                    error_code: 0,
                                    replicas: vec![1],
                                    isr: vec![1],
                                })
                                .collect(),
                        },
                    )
                })
                .collect(),
        }
    }

    fn committed(offset: i64, epoch: i32, metadata: &str) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: epoch,
            metadata: Some(metadata.to_string()),
        }
    }

    #[test]
    fn discovery_follows_the_patterns_and_never_takes_a_local_topic() {
        let source = source_meta(&[
            ("pay-eu", 1, 0, 2),
            ("pay-us", 2, 0, 2),
            ("pay-test", 3, 0, 1),
            ("payroll", 4, 0, 1),
            ("__consumer_offsets", 5, 0, 50),
            ("pay-broken", 6, 3, 0),
        ]);
        let mut local =
            MetadataImage::empty("dst".into(), 0, "127.0.0.1:9092".parse().expect("address"));
        // Already here (mirrored, or a removed and failed-over one): left alone.
        local
            .topics
            .insert("pay-eu".into(), Arc::new(topic("pay-eu", 1, 2)));
        let configs = map(&[("topics.include", "pay-.*"), ("topics.exclude", ".*-test")]);
        assert_eq!(
            plan_discovered_topics(&configs, &source, &local).expect("plan"),
            vec!["pay-us".to_string()]
        );
        // Several patterns; no include: nothing.
        let configs = map(&[("topics.include", "pay-us, payroll")]);
        assert_eq!(
            plan_discovered_topics(&configs, &source, &local).expect("plan"),
            vec!["pay-us".to_string(), "payroll".to_string()]
        );
        assert!(plan_discovered_topics(&map(&[]), &source, &local)
            .expect("plan")
            .is_empty());
        let bad = map(&[("topics.include", "pay-(")]);
        assert!(plan_discovered_topics(&bad, &source, &local).is_err());
    }

    #[test]
    fn cluster_id_changes_are_caught() {
        assert_eq!(check_source_cluster_id("a", Some("a")), Ok(()));
        assert_eq!(check_source_cluster_id("", Some("b")), Ok(()));
        assert_eq!(check_source_cluster_id("a", None), Ok(()));
        assert_eq!(
            check_source_cluster_id("a", Some("b")),
            Err("source cluster id changed from a to b".to_string())
        );
    }

    #[test]
    fn refresh_interval_prefers_the_mirror() {
        assert_eq!(
            refresh_interval(&mirror(&[]), 60_000),
            Duration::from_secs(60)
        );
        assert_eq!(
            refresh_interval(
                &mirror(&[("mirror.metadata.refresh.interval.ms", "1000")]),
                60_000
            ),
            Duration::from_secs(1)
        );
        assert_eq!(
            refresh_interval(
                &mirror(&[("mirror.metadata.refresh.interval.ms", "0")]),
                60_000
            ),
            Duration::from_millis(REFRESH_INTERVAL_MIN_MS)
        );
        assert_eq!(
            refresh_interval(
                &mirror(&[("mirror.metadata.refresh.interval.ms", "x")]),
                5000
            ),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn group_filter_is_anchored_and_exclude_wins() {
        let all = GroupFilter::from_configs(&BTreeMap::new()).expect("valid");
        assert!(all.matches("anything"));
        let f = GroupFilter::from_configs(&map(&[
            ("groups.include", "app-.*, billing"),
            ("groups.exclude", "app-test.*"),
        ]))
        .expect("valid");
        assert!(f.matches("app-orders"));
        assert!(f.matches("billing"));
        assert!(!f.matches("billing-2"), "anchored at the end");
        assert!(!f.matches("my-app-orders"), "anchored at the start");
        assert!(!f.matches("app-test-1"), "exclude wins");
        let none = GroupFilter::from_configs(&map(&[("groups.include", "")])).expect("valid");
        assert!(!none.matches("g"));
        assert!(GroupFilter::from_configs(&map(&[("groups.include", "(")])).is_err());
    }

    #[test]
    fn deleted_and_recreated_source_topics() {
        let t = topic("t", 7, 2);
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(source_topic_gone(&t, &source_meta(&[("t", 7, 0, 2)])), None);
        assert_eq!(
            source_topic_gone(&t, &source_meta(&[("t", 0, unknown, 0)])),
            Some("source topic t was deleted".to_string())
        );
        assert_eq!(
            source_topic_gone(&t, &source_meta(&[])),
            Some("source topic t was deleted".to_string())
        );
        let recreated = source_topic_gone(&t, &source_meta(&[("t", 8, 0, 2)])).expect("gone");
        assert!(recreated.contains("re-created"), "{recreated}");
        // Another error (no leader yet) says nothing about deletion.
        let leaderless = ResponseError::LeaderNotAvailable.code();
        assert_eq!(
            source_topic_gone(&t, &source_meta(&[("t", 7, leaderless, 0)])),
            None
        );
        // A source without topic ids (Metadata < v10) cannot tell a re-creation by id.
        assert_eq!(source_topic_gone(&t, &source_meta(&[("t", 0, 0, 2)])), None);
        // A copy marked as such (`mirror.source.topic.id=none`) knows it by a smaller
        // partition count; the same or a larger one says nothing.
        let mut no_id = topic("t", 7, 3);
        no_id.configs.insert(
            MIRROR_SOURCE_TOPIC_ID_CONFIG.into(),
            NO_SOURCE_TOPIC_ID.into(),
        );
        let fewer = source_topic_gone(&no_id, &source_meta(&[("t", 0, 0, 2)])).expect("gone");
        assert!(fewer.contains("fewer than the 3 mirrored"), "{fewer}");
        assert_eq!(
            source_topic_gone(&no_id, &source_meta(&[("t", 0, 0, 3)])),
            None
        );
        assert_eq!(
            source_topic_gone(&no_id, &source_meta(&[("t", 0, 0, 4)])),
            None
        );
        assert_eq!(
            source_topic_gone(&t, &source_meta(&[("t", 0, 0, 1)])),
            None,
            "an unmarked copy is not judged by its partition count"
        );
    }

    #[test]
    fn partitions_grow_only_upwards() {
        let t = topic("t", 7, 2);
        assert_eq!(
            partition_growth(&t, &source_meta(&[("t", 7, 0, 5)])),
            Some(5)
        );
        assert_eq!(partition_growth(&t, &source_meta(&[("t", 7, 0, 2)])), None);
        assert_eq!(partition_growth(&t, &source_meta(&[("t", 7, 0, 1)])), None);
        assert_eq!(partition_growth(&t, &source_meta(&[("t", 7, 3, 0)])), None);
        assert_eq!(partition_growth(&t, &source_meta(&[])), None);
    }

    #[test]
    fn group_offsets_are_clamped_and_never_go_backwards() {
        let tp = |p: i32| TopicPartition::new("t", p);
        let source: BTreeMap<TopicPartition, CommittedOffset> = [
            (tp(0), committed(50, 3, "a")),  // inside the range: copied as is
            (tp(1), committed(500, 3, "b")), // beyond the local end: clamped
            (tp(2), committed(5, 3, "c")),   // below the local start: clamped
            (tp(3), committed(40, 3, "d")),  // local is ahead: left alone
            (tp(4), committed(40, 3, "e")),  // no local range: left alone
            (tp(5), committed(60, 3, "f")),  // local behind: moved forward
            (tp(6), committed(-1, -1, "")),  // nothing committed
        ]
        .into_iter()
        .collect();
        let local: BTreeMap<TopicPartition, CommittedOffset> =
            [(tp(3), committed(45, 1, "")), (tp(5), committed(10, 1, ""))]
                .into_iter()
                .collect();
        let ranges: BTreeMap<TopicPartition, (i64, i64)> = [
            (tp(0), (0, 100)),
            (tp(1), (0, 100)),
            (tp(2), (10, 100)),
            (tp(3), (0, 100)),
            (tp(5), (0, 100)),
            (tp(6), (0, 100)),
        ]
        .into_iter()
        .collect();
        let plan = plan_group_offsets(&source, &local, &ranges);
        let clamped = |offset| CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: Some(String::new()),
        };
        assert_eq!(
            plan,
            vec![
                (tp(0), committed(50, 3, "a")),
                (tp(1), clamped(100)),
                (tp(2), clamped(10)),
                (tp(5), committed(60, 3, "f")),
            ]
        );
        // Equal offsets: nothing to write.
        let local: BTreeMap<TopicPartition, CommittedOffset> =
            [(tp(0), committed(50, 3, "a"))].into_iter().collect();
        let only0: BTreeMap<TopicPartition, CommittedOffset> =
            [(tp(0), committed(50, 3, "a"))].into_iter().collect();
        assert!(plan_group_offsets(&only0, &local, &ranges).is_empty());
    }

    #[test]
    fn errors_are_listed_then_counted() {
        let errors: Vec<String> = (0..8).map(|i| format!("e{i}")).collect();
        assert_eq!(
            join_errors(&errors),
            "e0; e1; e2; e3; e4 and 3 more".to_string()
        );
        assert_eq!(errors_to_result(&[]), Ok(()));
    }
}
