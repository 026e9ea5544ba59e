//! The mirror RPCs (94-104): the broker side. Admin RPCs are validated here (reaching the
//! source cluster where the answer depends on it) and forwarded to the controller;
//! ReadMirrorStates, WriteMirrorStates and DescribeMirrors go to the control plane's
//! mirror side; ListMirrors is answered from the metadata image.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::RequestHeader;
use kafka_protocol::ResponseError;

use crate::client::cluster::SourceCluster;
use crate::client::topic_configs::{
    describe_source_topic_configs, excluded_topic_configs, initial_topic_configs,
};
use crate::client::ConnectionConfig;
use crate::controller::{AdminRequest, AdminResponse, AdminResult};

use crate::shard::ShardCtx;
use crate::wire::mirror::*;

/// Handles one decoded mirror request.
pub async fn handle(
    ctx: &Rc<ShardCtx>,
    header: &RequestHeader,
    request: MirrorRequest,
) -> MirrorResponse {
    let _ = header;
    match request {
        MirrorRequest::CreateMirror(r) => MirrorResponse::CreateMirror(create_mirror(ctx, r).await),
        MirrorRequest::AddTopicsToMirror(r) => {
            MirrorResponse::AddTopicsToMirror(add_topics(ctx, r).await)
        }
        MirrorRequest::RemoveTopicsFromMirror(r) => MirrorResponse::RemoveTopicsFromMirror(
            set_topics_state(
                ctx,
                &r.mirror_name,
                names_of(&r.topics),
                DesiredMirrorState::Stopped,
            )
            .await,
        ),
        MirrorRequest::PauseMirrorTopics(r) => MirrorResponse::PauseMirrorTopics(
            set_topics_state(
                ctx,
                &r.mirror_name,
                names_of(&r.topics),
                DesiredMirrorState::Paused,
            )
            .await,
        ),
        MirrorRequest::ResumeMirrorTopics(r) => MirrorResponse::ResumeMirrorTopics(
            set_topics_state(
                ctx,
                &r.mirror_name,
                names_of(&r.topics),
                DesiredMirrorState::Mirroring,
            )
            .await,
        ),
        MirrorRequest::DeleteMirror(r) => MirrorResponse::DeleteMirror(delete_mirror(ctx, r).await),
        MirrorRequest::ListMirrors(r) => MirrorResponse::ListMirrors(list_mirrors(ctx, &r)),
        other @ (MirrorRequest::DescribeMirrors(_)
        | MirrorRequest::ReadMirrorStates(_)
        | MirrorRequest::WriteMirrorStates(_)) => forward_to_mirror_manager(ctx, other).await,
    }
}

async fn forward_to_mirror_manager(ctx: &Rc<ShardCtx>, request: MirrorRequest) -> MirrorResponse {
    let Some(handle) = ctx.mirror_handle() else {
        return error_response(
            &request,
            ResponseError::CoordinatorNotAvailable.code(),
            "the mirror manager is not running yet",
        );
    };
    let fallback = request.clone();
    match handle.submit(request).await {
        Ok(r) => r,
        Err(_) => error_response(
            &fallback,
            ResponseError::CoordinatorNotAvailable.code(),
            "the mirror manager went away",
        ),
    }
}

/// Sends an admin request to the controller and turns its answer into per-item
/// results (a whole-request failure becomes the same error for every item).
async fn submit(ctx: &Rc<ShardCtx>, request: AdminRequest, names: &[String]) -> Vec<AdminResult> {
    match ctx.controller.submit(request).await {
        Ok(AdminResponse::Results(r)) => r,
        Ok(AdminResponse::Failed {
            error_code,
            message,
        }) => names
            .iter()
            .map(|n| AdminResult::err(n.clone(), error_code, message.clone()))
            .collect(),
        Ok(other) => names
            .iter()
            .map(|n| {
                AdminResult::err(
                    n.clone(),
                    ResponseError::UnknownServerError.code(),
                    format!("unexpected controller answer {other:?}"),
                )
            })
            .collect(),
        Err(_) => names
            .iter()
            .map(|n| {
                AdminResult::err(
                    n.clone(),
                    ResponseError::BrokerNotAvailable.code(),
                    "the controller went away",
                )
            })
            .collect(),
    }
}

fn simple(error_code: i16, message: Option<String>) -> SimpleMirrorResponse {
    SimpleMirrorResponse {
        throttle_time_ms: 0,
        error_code,
        error_message: message,
    }
}

/// The admin connection to a mirror's source, from the mirror's configs. `Err`: a
/// security config is wrong.
fn source_connection_config(
    configs: &BTreeMap<String, String>,
    name: &str,
) -> Result<ConnectionConfig, String> {
    let fetch = crate::fetcher::MirrorFetchConfig::from_image(&crate::metadata::MirrorImage {
        name: name.to_owned(),
        configs: configs.clone(),
    });
    fetch.connection(
        &format!("twinlog-mirror-admin-{name}"),
        Duration::from_millis(fetch.request_timeout_ms),
    )
}

async fn create_mirror(ctx: &Rc<ShardCtx>, r: CreateMirrorRequest) -> SimpleMirrorResponse {
    let mut configs: BTreeMap<String, String> = BTreeMap::new();
    for MirrorConfig { name: k, value: v } in &r.configs {
        match v {
            Some(v) => {
                configs.insert(k.clone(), v.clone());
            }
            None => {
                return simple(
                    ResponseError::InvalidConfig.code(),
                    Some(format!("Null value not supported for mirror config {k}")),
                )
            }
        }
    }
    let Some(bootstrap) = configs.get("bootstrap.servers").cloned() else {
        return simple(
            ResponseError::InvalidConfig.code(),
            Some("Mirror config bootstrap.servers is required".to_string()),
        );
    };
    let image = ctx.metadata.load();
    if image.mirrors.contains_key(&r.mirror_name) {
        return simple(
            errors::CLUSTER_MIRROR_ALREADY_EXISTS,
            Some(format!("Mirror {} already exists", r.mirror_name)),
        );
    }
    // Fill in (or check) the source cluster id by asking the source.
    let given = configs.get("source.cluster.id").cloned();
    let connection = match source_connection_config(&configs, &r.mirror_name) {
        Ok(c) => c,
        Err(e) => {
            return simple(
                ResponseError::InvalidConfig.code(),
                Some(format!("Invalid mirror config {e}")),
            )
        }
    };
    let found = match SourceCluster::new(&bootstrap, connection) {
        Err(e) => {
            return simple(
                ResponseError::InvalidConfig.code(),
                Some(format!("Invalid mirror config bootstrap.servers: {e}")),
            )
        }
        Ok(mut source) => source.metadata(Some(&[])).await.map(|m| m.cluster_id),
    };
    let source_id = match (found, given) {
        (Ok(Some(found)), Some(given)) if found != given => {
            return simple(
                ResponseError::InvalidConfig.code(),
                Some(format!(
                    "Mirror config source.cluster.id is {given} but the cluster at {bootstrap} has id {found}"
                )),
            )
        }
        (Ok(Some(found)), _) => found,
        (Ok(None), Some(given)) => given,
        (Ok(None), None) => {
            return simple(
                ResponseError::InvalidConfig.code(),
                Some(format!(
                    "The cluster at {bootstrap} does not report a cluster id; set source.cluster.id"
                )),
            )
        }
        (Err(_), Some(given)) => given,
        (Err(e), None) => {
            return simple(
                ResponseError::InvalidConfig.code(),
                Some(format!(
                    "Cannot reach the source cluster at {bootstrap} ({e}); give source.cluster.id to create the mirror without reaching it"
                )),
            )
        }
    };
    if source_id == image.cluster_id {
        return simple(
            ResponseError::InvalidConfig.code(),
            Some(format!(
                "The source cluster {source_id} is this cluster; a mirror copies from another cluster"
            )),
        );
    }
    configs.insert("source.cluster.id".to_string(), source_id);
    let name = r.mirror_name.clone();
    let results = submit(
        ctx,
        AdminRequest::CreateMirror {
            name: r.mirror_name,
            configs: configs.into_iter().map(|(k, v)| (k, Some(v))).collect(),
        },
        std::slice::from_ref(&name),
    )
    .await;
    match results.into_iter().next() {
        Some(r) => simple(r.error_code, r.message),
        None => simple(0, None),
    }
}

fn topics_response(results: Vec<AdminResult>) -> MirrorTopicsResponse {
    let first = results.iter().find(|r| r.error_code != 0);
    MirrorTopicsResponse {
        throttle_time_ms: 0,
        error_code: first.map_or(0, |r| r.error_code),
        error_message: first.and_then(|r| r.message.clone()),
        topics: results
            .into_iter()
            .map(|r| MirrorTopicResult {
                name: r.name,
                error_code: r.error_code,
                error_message: r.message,
            })
            .collect(),
    }
}

/// Actual states of every partition of `topic` in `mirror`, from the coordinator.
async fn actual_states(
    ctx: &Rc<ShardCtx>,
    mirror: &str,
    topic: &str,
    partitions: i32,
) -> Result<Vec<MirrorPartitionState>, String> {
    let request = MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest {
        mirror_name: mirror.to_string(),
        topics: vec![ReadMirrorStatesTopic {
            name: topic.to_string(),
            partitions: (0..partitions).collect(),
        }],
    });
    match forward_to_mirror_manager(ctx, request).await {
        MirrorResponse::ReadMirrorStates(r) if r.error_code == 0 => Ok(r
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .map(|p| {
                MirrorPartitionState::from_code(p.state).unwrap_or(MirrorPartitionState::Unknown)
            })
            .collect()),
        MirrorResponse::ReadMirrorStates(r) => Err(format!(
            "cannot read mirror states (error {})",
            r.error_code
        )),
        _ => Err("cannot read mirror states".to_string()),
    }
}

/// The synced part of the source configs of `topics`, by name. A topic the source
/// cannot describe starts without them (logged); the metadata sync retries and
/// reports it.
async fn new_topic_configs(
    source: &mut SourceCluster,
    mirror: &crate::metadata::MirrorImage,
    topics: &[String],
) -> BTreeMap<String, BTreeMap<String, String>> {
    let described = match source.any_connection().await {
        Ok(conn) => describe_source_topic_configs(conn, topics).await,
        Err(e) => Err(format!("cannot reach the source: {e}")),
    };
    let described = match described {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(mirror = %mirror.name, error = %e, "new mirror topics start with this broker's default configs until the metadata sync");
            return BTreeMap::new();
        }
    };
    let excluded = excluded_topic_configs(&mirror.configs);
    let mut out = BTreeMap::new();
    for (topic, configs) in described {
        match configs {
            Ok(c) => {
                out.insert(topic, initial_topic_configs(&c, &excluded));
            }
            Err(e) => {
                tracing::warn!(mirror = %mirror.name, %topic, error = %e, "a new mirror topic starts with this broker's default configs until the metadata sync");
            }
        }
    }
    out
}

async fn add_topics(ctx: &Rc<ShardCtx>, r: AddTopicsToMirrorRequest) -> MirrorTopicsResponse {
    let image = ctx.metadata.load();
    let Some(mirror) = image.mirrors.get(&r.mirror_name).cloned() else {
        let names: Vec<String> = r.topics.iter().map(|t| t.name.clone()).collect();
        return topics_response(
            names
                .into_iter()
                .map(|n| {
                    AdminResult::err(
                        n,
                        errors::UNKNOWN_CLUSTER_MIRROR,
                        format!("Mirror {} does not exist", r.mirror_name),
                    )
                })
                .collect(),
        );
    };
    let mut wanted: Vec<MirrorTopicMetadata> = r.topics.clone();
    let compile = |list: &[String]| -> Result<Vec<regex::Regex>, String> {
        list.iter()
            .map(|p| regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| format!("{p:?}: {e}")))
            .collect()
    };
    // An invalid pattern is an error, an exclude one too: dropping it silently would
    // mirror more topics than asked (audit, smaller items).
    let (patterns, excludes) = match (compile(&r.include_patterns), compile(&r.exclude_patterns)) {
        (Ok(p), Ok(x)) => (p, x),
        (Err(e), _) | (_, Err(e)) => {
            let which = if compile(&r.include_patterns).is_err() {
                "include"
            } else {
                "exclude"
            };
            return topics_response(vec![AdminResult::err(
                r.mirror_name.clone(),
                ResponseError::InvalidRequest.code(),
                format!("Invalid {which} pattern {e}"),
            )]);
        }
    };
    // A topic the mirror excludes (`topics.exclude`) would be removed again by its next
    // metadata sync (exclusion is enforced): refuse it here instead.
    let mirror_excludes = mirror
        .configs
        .get("topics.exclude")
        .and_then(|v| crate::metadata::pattern_list(v).ok().flatten());
    let mut per_topic_errors: BTreeMap<String, AdminResult> = BTreeMap::new();
    for w in &wanted {
        if let Some(x) = mirror_excludes.iter().find(|x| x.is_match(&w.name)) {
            per_topic_errors.insert(
                w.name.clone(),
                AdminResult::err(
                    w.name.clone(),
                    ResponseError::InvalidRequest.code(),
                    format!(
                        "Topic {} matches the mirror's topics.exclude ({}); change topics.exclude first",
                        w.name,
                        x.as_str()
                    ),
                ),
            );
        }
    }
    let mut source_configs = BTreeMap::new();
    // Topic ids and partition counts come from the source, and the source and loop
    // checks run even when the request brings ids and counts (audit, smaller items).
    {
        let mut source =
            match source_connection_config(&mirror.configs, &mirror.name).and_then(|c| {
                SourceCluster::new(mirror.bootstrap_servers(), c).map_err(|e| e.to_string())
            }) {
                Ok(s) => s,
                Err(e) => {
                    return topics_response(
                        wanted
                            .iter()
                            .map(|t| {
                                AdminResult::err(
                                    t.name.clone(),
                                    ResponseError::InvalidConfig.code(),
                                    e.to_string(),
                                )
                            })
                            .collect(),
                    )
                }
            };
        let topics = if patterns.is_empty() {
            let names: Vec<String> = wanted.iter().map(|t| t.name.clone()).collect();
            source.metadata(Some(&names)).await
        } else {
            source.metadata(None).await
        };
        let meta = match topics {
            Ok(m) => m,
            Err(e) => {
                return topics_response(
                    wanted
                        .iter()
                        .map(|t| {
                            AdminResult::err(
                                t.name.clone(),
                                ResponseError::NetworkException.code(),
                                format!(
                                    "Cannot reach the source cluster at {}: {e}",
                                    mirror.bootstrap_servers()
                                ),
                            )
                        })
                        .collect(),
                )
            }
        };
        if let Some(id) = &meta.cluster_id {
            if !mirror.source_cluster_id().is_empty() && id != mirror.source_cluster_id() {
                return topics_response(
                    wanted
                        .iter()
                        .map(|t| {
                            AdminResult::err(
                                t.name.clone(),
                                ResponseError::InvalidConfig.code(),
                                format!(
                                    "The source cluster now has id {id}, not {}",
                                    mirror.source_cluster_id()
                                ),
                            )
                        })
                        .collect(),
                );
            }
        }
        for (name, t) in &meta.topics {
            let matches = patterns.iter().any(|p| p.is_match(name))
                && !name.starts_with("__")
                && !excludes.iter().any(|p| p.is_match(name))
                && !mirror_excludes.iter().any(|p| p.is_match(name));
            if matches && !wanted.iter().any(|w| &w.name == name) {
                wanted.push(MirrorTopicMetadata {
                    topic_id: uuid::Uuid::nil(),
                    name: name.clone(),
                    num_partitions: -1,
                });
            }
            let _ = t;
        }
        // Loop check: the source must not be mirroring these topics from us.
        let reverse = reverse_mirrored_topics(&mut source, &image.cluster_id).await;
        for w in &wanted {
            if let Some(source_mirror) = reverse.get(&w.name) {
                per_topic_errors.insert(
                    w.name.clone(),
                    AdminResult::err(
                        w.name.clone(),
                        errors::TOPIC_ALREADY_IN_CLUSTER_MIRROR,
                        format!(
                            "The source cluster is mirroring {} from this cluster (its mirror {source_mirror}); mirroring it back would make a loop. Remove it from that mirror first",
                            w.name
                        ),
                    ),
                );
            }
        }
        for w in &mut wanted {
            if !w.topic_id.is_nil() && w.num_partitions >= 1 {
                continue;
            }
            match meta.topics.get(&w.name) {
                Some(t) if t.error_code == 0 && !t.id.is_nil() => {
                    w.topic_id = t.id;
                    w.num_partitions = t.partitions.len() as i32;
                }
                // A source before Kafka 2.8 (Metadata below v10) has no topic ids: the
                // controller assigns one here and marks the topic (mirror.source.topic.id).
                Some(t) if t.error_code == 0 && !t.partitions.is_empty() => {
                    w.topic_id = uuid::Uuid::nil();
                    w.num_partitions = t.partitions.len() as i32;
                }
                _ => {
                    per_topic_errors.insert(
                        w.name.clone(),
                        AdminResult::err(
                            w.name.clone(),
                            ResponseError::UnknownTopicOrPartition.code(),
                            format!("Topic {} does not exist on the source cluster", w.name),
                        ),
                    );
                }
            }
        }
        // A topic created here starts with the source's configs: fetching into a topic
        // with the broker's defaults until the first sync would, for one, put a compacted
        // topic's first records in a segment far larger than the source's.
        let new_topics: Vec<String> = wanted
            .iter()
            .filter(|w| !per_topic_errors.contains_key(&w.name) && image.topic(&w.name).is_none())
            .map(|w| w.name.clone())
            .collect();
        if !new_topics.is_empty() {
            source_configs = new_topic_configs(&mut source, &mirror, &new_topics).await;
        }
    }
    // Local topics already in this mirror must be STOPPED or UNKNOWN everywhere (a
    // restart after failover); desired MIRRORING is an idempotent no-op.
    for w in &wanted {
        if per_topic_errors.contains_key(&w.name) {
            continue;
        }
        let Some(local) = image.topic(&w.name) else {
            continue;
        };
        let Some((m, desired)) = local.mirror() else {
            continue;
        };
        // Removed from a mirror (this one or another): every partition must have
        // finished STOPPING first.
        if desired != DesiredMirrorState::Stopped {
            continue;
        }
        match actual_states(ctx, m, &w.name, local.partitions.len() as i32).await {
            Ok(states) => {
                if let Some(s) = states.iter().find(|s| {
                    !matches!(
                        s,
                        MirrorPartitionState::Stopped | MirrorPartitionState::Unknown
                    )
                }) {
                    per_topic_errors.insert(
                        w.name.clone(),
                        AdminResult::err(
                            w.name.clone(),
                            errors::MIRROR_TOPIC_NOT_STOPPED,
                            format!(
                                "Topic {} is still {s} in mirror {m}; wait until it is STOPPED",
                                w.name
                            ),
                        ),
                    );
                }
            }
            Err(e) => {
                per_topic_errors.insert(
                    w.name.clone(),
                    AdminResult::err(
                        w.name.clone(),
                        ResponseError::CoordinatorNotAvailable.code(),
                        e,
                    ),
                );
            }
        }
    }
    let forward: Vec<MirrorTopicMetadata> = wanted
        .iter()
        .filter(|w| !per_topic_errors.contains_key(&w.name))
        .cloned()
        .collect();
    let mut forwarded = if forward.is_empty() {
        Vec::new()
    } else {
        let names: Vec<String> = forward.iter().map(|t| t.name.clone()).collect();
        submit(
            ctx,
            AdminRequest::AddTopicsToMirror {
                mirror: r.mirror_name.clone(),
                topics: forward,
                configs: source_configs,
            },
            &names,
        )
        .await
    }
    .into_iter();
    // The patterns stay with the mirror (`topics.include`, `topics.exclude`): its
    // metadata sync adds matching source topics created later (audit B-6).
    if !r.include_patterns.is_empty() || !r.exclude_patterns.is_empty() {
        let merged = |key: &str, new: &[String]| -> Option<(String, Option<String>)> {
            let mut list: Vec<String> = mirror
                .configs
                .get(key)
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let before = list.len();
            for p in new {
                if !list.contains(p) {
                    list.push(p.clone());
                }
            }
            (list.len() > before).then(|| (key.to_string(), Some(list.join(","))))
        };
        let configs: Vec<(String, Option<String>)> = [
            merged("topics.include", &r.include_patterns),
            merged("topics.exclude", &r.exclude_patterns),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !configs.is_empty() {
            let outcome = submit(
                ctx,
                AdminRequest::AlterMirrorConfigs {
                    name: r.mirror_name.clone(),
                    configs,
                    incremental: true,
                    validate_only: false,
                },
                std::slice::from_ref(&r.mirror_name),
            )
            .await;
            for failed in outcome.iter().filter(|o| o.error_code != 0) {
                tracing::warn!(mirror = %r.mirror_name, error = ?failed.message, "could not keep the topic patterns with the mirror: later source topics will not be added");
            }
        }
    }
    let results = wanted
        .iter()
        .map(|w| match per_topic_errors.remove(&w.name) {
            Some(e) => e,
            None => forwarded
                .next()
                .unwrap_or_else(|| AdminResult::ok(w.name.clone())),
        })
        .collect();
    topics_response(results)
}

/// Topics the source currently mirrors from `our_cluster_id` (not STOPPED there), with
/// the source mirror's name. Empty when the source has no ListMirrors.
async fn reverse_mirrored_topics(
    source: &mut SourceCluster,
    our_cluster_id: &str,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(conn) = source.any_connection().await else {
        return out;
    };
    if conn.api_range(keys::LIST_MIRRORS).is_none() {
        return out;
    }
    let request = ListMirrorsRequest {
        include_topic_names: true,
    };
    let Ok(list) = conn.send(&request, 0).await else {
        return out;
    };
    for m in list
        .mirrors
        .into_iter()
        .filter(|m| m.source_cluster_id == our_cluster_id)
    {
        for t in m.topic_names {
            out.insert(t, m.mirror_name.clone());
        }
    }
    out
}

async fn set_topics_state(
    ctx: &Rc<ShardCtx>,
    mirror: &str,
    topics: Vec<String>,
    desired: DesiredMirrorState,
) -> MirrorTopicsResponse {
    if topics.is_empty() {
        return topics_response(Vec::new());
    }
    let results = submit(
        ctx,
        AdminRequest::SetMirrorTopicsState {
            mirror: mirror.to_string(),
            topics: topics.clone(),
            desired,
        },
        &topics,
    )
    .await;
    topics_response(results)
}

async fn delete_mirror(ctx: &Rc<ShardCtx>, r: DeleteMirrorRequest) -> SimpleMirrorResponse {
    let image = ctx.metadata.load();
    if !image.mirrors.contains_key(&r.mirror_name) {
        return simple(
            errors::UNKNOWN_CLUSTER_MIRROR,
            Some(format!("Mirror {} does not exist", r.mirror_name)),
        );
    }
    // Every partition of the mirror's topics must have finished STOPPING.
    for topic in image.topics.values() {
        let Some((m, _)) = topic.mirror() else {
            continue;
        };
        if m != r.mirror_name {
            continue;
        }
        match actual_states(ctx, m, &topic.name, topic.partitions.len() as i32).await {
            Ok(states) => {
                if let Some((p, s)) = states.iter().enumerate().find(|(_, s)| {
                    !matches!(
                        s,
                        MirrorPartitionState::Stopped | MirrorPartitionState::Unknown
                    )
                }) {
                    return simple(
                        errors::CLUSTER_MIRROR_NOT_EMPTY,
                        Some(format!(
                            "Mirror {m} is not empty: {}-{p} is {s}; remove its topics and wait until they are STOPPED",
                            topic.name
                        )),
                    );
                }
            }
            Err(e) => return simple(ResponseError::CoordinatorNotAvailable.code(), Some(e)),
        }
    }
    let name = r.mirror_name.clone();
    let results = submit(
        ctx,
        AdminRequest::DeleteMirror {
            name: r.mirror_name,
        },
        std::slice::from_ref(&name),
    )
    .await;
    match results.into_iter().next() {
        Some(r) => simple(r.error_code, r.message),
        None => simple(0, None),
    }
}

fn list_mirrors(ctx: &Rc<ShardCtx>, r: &ListMirrorsRequest) -> ListMirrorsResponse {
    let image = ctx.metadata.load();
    let mut response = ListMirrorsResponse::default();
    for mirror in image.mirrors.values() {
        let mut names = Vec::new();
        let mut count = 0;
        for topic in image.topics.values() {
            match topic.mirror() {
                Some((m, desired)) if m == mirror.name => {
                    if desired != DesiredMirrorState::Stopped {
                        names.push(topic.name.clone());
                    }
                    if desired == DesiredMirrorState::Mirroring {
                        count += 1;
                    }
                }
                _ => {}
            }
        }
        response.mirrors.push(ListedMirror {
            mirror_name: mirror.name.clone(),
            source_bootstrap: mirror.bootstrap_servers().to_string(),
            source_cluster_id: mirror.source_cluster_id().to_string(),
            topic_count: count,
            topic_names: if r.include_topic_names {
                names
            } else {
                Vec::new()
            },
        });
    }
    response
}

/// The answer to `request` with one error everywhere.
pub fn error_response(request: &MirrorRequest, error_code: i16, message: &str) -> MirrorResponse {
    let simple = || SimpleMirrorResponse {
        throttle_time_ms: 0,
        error_code,
        error_message: Some(message.to_string()),
    };
    let per_topic = |names: Vec<String>| MirrorTopicsResponse {
        throttle_time_ms: 0,
        error_code,
        error_message: Some(message.to_string()),
        topics: names
            .into_iter()
            .map(|name| MirrorTopicResult {
                name,
                error_code,
                error_message: Some(message.to_string()),
            })
            .collect(),
    };
    match request {
        MirrorRequest::CreateMirror(_) => MirrorResponse::CreateMirror(simple()),
        MirrorRequest::DeleteMirror(_) => MirrorResponse::DeleteMirror(simple()),
        MirrorRequest::AddTopicsToMirror(r) => MirrorResponse::AddTopicsToMirror(per_topic(
            r.topics.iter().map(|t| t.name.clone()).collect(),
        )),
        MirrorRequest::RemoveTopicsFromMirror(r) => {
            MirrorResponse::RemoveTopicsFromMirror(per_topic(names_of(&r.topics)))
        }
        MirrorRequest::PauseMirrorTopics(r) => {
            MirrorResponse::PauseMirrorTopics(per_topic(names_of(&r.topics)))
        }
        MirrorRequest::ResumeMirrorTopics(r) => {
            MirrorResponse::ResumeMirrorTopics(per_topic(names_of(&r.topics)))
        }
        MirrorRequest::ListMirrors(_) => MirrorResponse::ListMirrors(ListMirrorsResponse {
            error_code,
            error_message: Some(message.to_string()),
            ..Default::default()
        }),
        MirrorRequest::DescribeMirrors(_) => {
            MirrorResponse::DescribeMirrors(DescribeMirrorsResponse {
                error_code,
                error_message: Some(message.to_string()),
                ..Default::default()
            })
        }
        MirrorRequest::ReadMirrorStates(r) => {
            MirrorResponse::ReadMirrorStates(ReadMirrorStatesResponse {
                throttle_time_ms: 0,
                error_code,
                topics: r
                    .topics
                    .iter()
                    .map(|t| MirrorStatesTopic {
                        name: t.name.clone(),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| MirrorStateEntry {
                                partition: *p,
                                error_code,
                                ..Default::default()
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
        MirrorRequest::WriteMirrorStates(r) => {
            MirrorResponse::WriteMirrorStates(WriteMirrorStatesResponse {
                throttle_time_ms: 0,
                topics: r.results(error_code, Some(message)),
            })
        }
    }
}
