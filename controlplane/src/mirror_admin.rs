//! The controller's half of the mirror admin RPCs: mirror configs (MIRROR config
//! resources, type 64) and the topic-to-mirror association (`mirror.name`). Planning
//! only, like the rest of [`crate::state`]; the broker has already done the checks that
//! need the source cluster or the partitions' actual states.

use std::collections::BTreeMap;

use dataplane::acl::{AclBinding, MirrorAclChange, MirroredAcl};
use dataplane::controller::{AdminResponse, AdminResult};
use dataplane::wire::mirror::{
    errors, mirror_name_value, DesiredMirrorState, MirrorTopicMetadata, MIRROR_NAME_CONFIG,
    MIRROR_SOURCE_TOPIC_ID_CONFIG, NO_SOURCE_TOPIC_ID,
};
use kafka_protocol::ResponseError;

use crate::metadata_log::{ConfigResourceType, MetadataRecord};
use crate::state::{new_partition, ControllerState, Plan};

/// The compacted internal topic holding mirror partition states and LMEs.
pub const MIRROR_STATE_TOPIC: &str = "__mirror_state";

/// Longest mirror name accepted.
pub const MIRROR_NAME_LEN_MAX: usize = 200;

/// Mirror configs whose values are integers >= 0.
const MIRROR_INT_CONFIGS: &[&str] = &[
    "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms",
    "connections.max.idle.ms",
    "fetch.wait.max.ms",
    "fetch.backoff.ms",
    "fetch.min.bytes",
    "fetch.response.max.bytes",
    "fetch.max.bytes",
    "socket.timeout.ms",
    "socket.receive.buffer.bytes",
    "mirror.metadata.refresh.interval.ms",
    "mirror.failed.retry.initial.backoff.ms",
    "mirror.failed.retry.max.backoff.ms",
    "mirror.failed.retry.max.attempts",
    "mirror.fetch.connections",
];

/// Mirror configs with free-form string values.
const MIRROR_STRING_CONFIGS: &[&str] = &[
    "bootstrap.servers",
    "source.cluster.id",
    "topic.properties.exclude",
    "topics.include",
    "topics.exclude",
    "groups.include",
    "groups.exclude",
    "acls.include",
    "security.protocol",
    "client.id",
];

/// Configs that only change what is synced, not how the source is reached: changing
/// them does not reconnect the mirror (reference §3.3).
pub const MIRROR_NON_CONNECTION_CONFIGS: &[&str] = &[
    "topic.properties.exclude",
    "topics.include",
    "topics.exclude",
    "groups.include",
    "groups.exclude",
    "acls.include",
    "mirror.metadata.refresh.interval.ms",
];

/// Whether a mirror config holds a secret (never echoed by DescribeConfigs).
pub use dataplane::api::describe_configs::is_sensitive_mirror_config;

/// Checks one mirror config; `Err` names the key and says what is wrong.
pub fn validate_mirror_config(key: &str, value: &str) -> Result<(), String> {
    if MIRROR_INT_CONFIGS.contains(&key) {
        return match value.trim().parse::<i64>() {
            Ok(v) if v >= 0 => Ok(()),
            _ => Err(format!(
                "Invalid value {value:?} for mirror config {key}: must be an integer >= 0"
            )),
        };
    }
    if key == "bootstrap.servers" {
        let ok = !value.trim().is_empty()
            && value.split(',').all(|hp| {
                let hp = hp.trim();
                hp.rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            });
        return if ok {
            Ok(())
        } else {
            Err(format!(
                "Invalid value {value:?} for mirror config bootstrap.servers: expected host:port[,host:port...]"
            ))
        };
    }
    if key == "security.protocol" {
        return match dataplane::net::listener::SecurityProtocol::parse(value.trim()) {
            Some(_) => Ok(()),
            None => Err(format!(
                "Invalid value {value:?} for mirror config security.protocol: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            )),
        };
    }
    if key == "acls.include" {
        return crate::mirror::acl_sync::AclRules::parse(value)
            .map(|_| ())
            .map_err(|e| format!("Invalid value {value:?} for mirror config acls.include: {e}"));
    }
    for pattern_key in [
        "topics.include",
        "topics.exclude",
        "groups.include",
        "groups.exclude",
    ] {
        if key == pattern_key {
            for p in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                if let Err(e) = regex::Regex::new(&format!("^(?:{p})$")) {
                    return Err(format!("Invalid regex {p:?} in mirror config {key}: {e}"));
                }
            }
            return Ok(());
        }
    }
    if MIRROR_STRING_CONFIGS.contains(&key) || key.starts_with("ssl.") || key.starts_with("sasl.") {
        return Ok(());
    }
    Err(format!("Unknown mirror config {key}"))
}

/// Kafka-like resource name rules for a mirror, and no suffix `mirror.name` reserves.
pub fn validate_mirror_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Mirror name must not be empty".to_string());
    }
    if name.len() > MIRROR_NAME_LEN_MAX {
        return Err(format!(
            "Mirror name is longer than {MIRROR_NAME_LEN_MAX} characters"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!(
            "Mirror name {name:?} contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    if name.ends_with(".paused") || name.ends_with(".removed") {
        return Err(format!(
            "Mirror name {name:?} must not end with .paused or .removed"
        ));
    }
    Ok(())
}

/// An ACL as one line of a result or log: `TOPIC:orders User:bob WRITE ALLOW`.
fn acl_label(acl: &AclBinding) -> String {
    format!(
        "{}:{}{} {} {} {} from {}",
        acl.resource_type,
        acl.resource_name,
        if acl.pattern_type == dataplane::acl::PatternType::Prefixed {
            "*"
        } else {
            ""
        },
        acl.principal,
        acl.operation,
        acl.permission,
        acl.host
    )
}

fn not_mirrors_acl(mirror: &str, id: &uuid::Uuid) -> AdminResult {
    AdminResult::err(
        id.to_string(),
        ResponseError::InvalidRequest.code(),
        format!("ACL {id} was not made by mirror {mirror}"),
    )
}

fn failed(code: i16, message: String) -> Plan {
    Plan::answer(AdminResponse::Failed {
        error_code: code,
        message,
    })
}

impl ControllerState {
    /// Configs of a mirror, if it exists.
    pub fn mirror_configs(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.resource_configs(ConfigResourceType::Mirror, name)
    }

    fn mirror_config_records(
        name: &str,
        configs: impl IntoIterator<Item = (String, Option<String>)>,
    ) -> Vec<MetadataRecord> {
        configs
            .into_iter()
            .map(|(key, value)| MetadataRecord::Config {
                resource_type: ConfigResourceType::Mirror,
                resource_name: name.to_string(),
                name: key,
                value,
            })
            .collect()
    }

    pub(crate) fn plan_create_mirror(
        &self,
        name: &str,
        configs: &[(String, Option<String>)],
        new_topic_id: &mut dyn FnMut() -> uuid::Uuid,
    ) -> Plan {
        if let Err(m) = validate_mirror_name(name) {
            return failed(ResponseError::InvalidRequest.code(), m);
        }
        if self.mirror_configs(name).is_some() {
            return failed(
                errors::CLUSTER_MIRROR_ALREADY_EXISTS,
                format!("Mirror {name} already exists"),
            );
        }
        let mut stored = BTreeMap::new();
        for (key, value) in configs {
            let Some(value) = value else {
                return failed(
                    ResponseError::InvalidConfig.code(),
                    format!("Null value not supported for mirror config {key}"),
                );
            };
            if let Err(m) = validate_mirror_config(key, value) {
                return failed(ResponseError::InvalidConfig.code(), m);
            }
            stored.insert(key.clone(), value.clone());
        }
        if !stored.contains_key("bootstrap.servers") {
            return failed(
                ResponseError::InvalidConfig.code(),
                "Mirror config bootstrap.servers is required".to_string(),
            );
        }
        if let Err(m) = dataplane::client::security::ClientSecurity::from_configs(&stored) {
            return failed(
                ResponseError::InvalidConfig.code(),
                format!("Invalid mirror config {m}"),
            );
        }
        let mut plan = Plan::answer(AdminResponse::Results(vec![AdminResult::ok(name)]));
        plan.records =
            Self::mirror_config_records(name, stored.into_iter().map(|(k, v)| (k, Some(v))));
        if !self.topics.contains_key(MIRROR_STATE_TOPIC) {
            let id = self.new_topic_id(new_topic_id);
            let configs = BTreeMap::from([
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("retention.ms".to_string(), "-1".to_string()),
                // As Kafka's internal topics: segments small enough for the cleaner,
                // which never touches the active one.
                ("segment.bytes".to_string(), "104857600".to_string()),
            ]);
            self.push_new_topic(
                &mut plan,
                MIRROR_STATE_TOPIC,
                id,
                self.settings.mirror_state_partitions,
                configs,
            );
        }
        plan
    }

    /// A topic whose source reports no topic id (`topic_id` nil, partition count set)
    /// gets an id assigned here and the `mirror.source.topic.id=none` config. A topic
    /// created here starts with `source_configs` (the synced part of its source's);
    /// one this broker cannot take (a value Kafka allows and we do not) is left out
    /// with a warning, and the metadata sync reports it.
    pub(crate) fn plan_add_topics_to_mirror(
        &self,
        mirror: &str,
        topics: &[MirrorTopicMetadata],
        source_configs: &BTreeMap<String, BTreeMap<String, String>>,
        new_topic_id: &mut dyn FnMut() -> uuid::Uuid,
    ) -> Plan {
        if self.mirror_configs(mirror).is_none() {
            return failed(
                errors::UNKNOWN_CLUSTER_MIRROR,
                format!("Mirror {mirror} does not exist"),
            );
        }
        let mut plan = Plan::answer(AdminResponse::Results(Vec::new()));
        let mut results = Vec::with_capacity(topics.len());
        let mut claimed_ids = std::collections::HashSet::new();
        for t in topics {
            let name = t.name.as_str();
            let fail = |code: i16, msg: String| AdminResult::err(name, code, msg);
            let result = if let Err(m) = crate::state::validate_topic_name(name) {
                fail(ResponseError::InvalidTopicException.code(), m)
            } else if crate::state::is_internal_topic(name) {
                fail(
                    ResponseError::InvalidTopicException.code(),
                    format!("Internal topic {name} cannot be mirrored"),
                )
            } else if t.num_partitions < 1 {
                fail(
                    ResponseError::InvalidRequest.code(),
                    format!("Topic {name} needs the source partition count"),
                )
            } else if !t.topic_id.is_nil() && !claimed_ids.insert(t.topic_id) {
                fail(
                    ResponseError::InvalidRequest.code(),
                    format!("Topic id {} appears twice in the request", t.topic_id),
                )
            } else if let Some(local) = self.topics.get(name) {
                let no_source_id = local
                    .configs
                    .get(MIRROR_SOURCE_TOPIC_ID_CONFIG)
                    .map(String::as_str)
                    == Some(NO_SOURCE_TOPIC_ID);
                match local.mirror() {
                    // A source without topic ids: the local topic must be the one an
                    // earlier AddTopicsToMirror made for it (failback, re-adding).
                    _ if t.topic_id.is_nil() && !no_source_id => fail(
                        ResponseError::InconsistentTopicId.code(),
                        format!(
                            "Local topic {name} exists and the source reports no topic ids, so it cannot be told to be the same topic; delete the local topic first"
                        ),
                    ),
                    _ if !t.topic_id.is_nil() && local.id != t.topic_id => fail(
                        ResponseError::InconsistentTopicId.code(),
                        format!(
                            "Local topic {name} has id {} but the source topic has id {}; delete the local topic first",
                            dataplane::log::loader::format_topic_id(local.id),
                            dataplane::log::loader::format_topic_id(t.topic_id)
                        ),
                    ),
                    Some((m, DesiredMirrorState::Mirroring)) if m == mirror => AdminResult::ok(name),
                    Some((m, DesiredMirrorState::Paused)) if m == mirror => fail(
                        errors::MIRROR_TOPIC_NOT_STOPPED,
                        format!("Topic {name} is paused in mirror {mirror}; resume it instead"),
                    ),
                    Some((m, desired)) if m != mirror && desired != DesiredMirrorState::Stopped => {
                        fail(
                            errors::TOPIC_ALREADY_IN_CLUSTER_MIRROR,
                            format!("Topic {name} is already in mirror {m}"),
                        )
                    }
                    _ => {
                        let current = local.partitions.len() as i32;
                        for p in current..t.num_partitions {
                            self.push_partition(&mut plan, local, p);
                        }
                        plan.records.push(MetadataRecord::Config {
                            resource_type: ConfigResourceType::Topic,
                            resource_name: name.to_string(),
                            name: MIRROR_NAME_CONFIG.to_string(),
                            value: Some(mirror_name_value(mirror, DesiredMirrorState::Mirroring)),
                        });
                        AdminResult::ok(name)
                    }
                }
            } else if let Some(other) = self.topics_by_id.get(&t.topic_id) {
                fail(
                    ResponseError::TopicAlreadyExists.code(),
                    format!(
                        "Topic id {} is already used by local topic {other}",
                        dataplane::log::loader::format_topic_id(t.topic_id)
                    ),
                )
            } else if t.num_partitions > crate::state::TOPIC_PARTITIONS_MAX {
                fail(
                    ResponseError::InvalidPartitions.code(),
                    format!(
                        "Source topic {name} has {} partitions, more than the maximum of {}",
                        t.num_partitions,
                        crate::state::TOPIC_PARTITIONS_MAX
                    ),
                )
            } else {
                let mut configs = self.initial_mirror_topic_configs(name, source_configs.get(name));
                configs.insert(
                    MIRROR_NAME_CONFIG.to_string(),
                    mirror_name_value(mirror, DesiredMirrorState::Mirroring),
                );
                let id = if t.topic_id.is_nil() {
                    configs.insert(
                        MIRROR_SOURCE_TOPIC_ID_CONFIG.to_string(),
                        NO_SOURCE_TOPIC_ID.to_string(),
                    );
                    let mut id = self.new_topic_id(new_topic_id);
                    // Two such topics of one request must not draw the same id.
                    while !claimed_ids.insert(id) {
                        id = self.new_topic_id(new_topic_id);
                    }
                    id
                } else {
                    t.topic_id
                };
                self.push_new_topic(&mut plan, name, id, t.num_partitions, configs);
                AdminResult::ok(name)
            };
            results.push(result);
        }
        plan.response = AdminResponse::Results(results);
        plan
    }

    /// The topics of `mirror` that are read-only here (MIRRORING or PAUSED), leaving
    /// out `except` (topics this plan fails over).
    fn read_only_topics<'a>(&'a self, mirror: &str, except: &[&str]) -> Vec<&'a str> {
        self.topics
            .values()
            .filter(|t| {
                matches!(t.mirror(), Some((m, d)) if m == mirror && d != DesiredMirrorState::Stopped)
            })
            .map(|t| t.name.as_str())
            .filter(|t| !except.contains(t))
            .collect()
    }

    /// Failover releases the held ACLs of `mirror` that no longer let anyone write to a
    /// read-only topic once `stopping` are writable.
    fn release_mirror_acls(&self, mirror: &str, stopping: &[&str]) -> Vec<MetadataRecord> {
        let read_only = self.read_only_topics(mirror, stopping);
        self.acls
            .mirrored_by(mirror)
            .filter(|(_, acl, held)| {
                *held
                    && !read_only
                        .iter()
                        .any(|t| dataplane::acl::allows_write_to(acl, t))
            })
            .map(|(id, acl, _)| MetadataRecord::Acl {
                id: *id,
                binding: Some(acl.clone()),
                origin: Some(MirroredAcl {
                    mirror: mirror.to_string(),
                    held: false,
                }),
            })
            .collect()
    }

    /// A mirror's ACL sync (see `mirror/acl_sync.rs`). Applied against the state now,
    /// not the sync's view: an ACL that exists is not created again, an ACL that would
    /// let someone write to a read-only topic of the mirror is held whatever the sync
    /// asked, and only this mirror's ACLs are changed or deleted.
    pub(crate) fn plan_sync_mirror_acls(
        &self,
        mirror: &str,
        changes: &[MirrorAclChange],
        new_id: &mut dyn FnMut() -> uuid::Uuid,
    ) -> Plan {
        if self.mirror_configs(mirror).is_none() {
            return failed(
                errors::UNKNOWN_CLUSTER_MIRROR,
                format!("Mirror {mirror} does not exist"),
            );
        }
        let read_only = self.read_only_topics(mirror, &[]);
        let must_hold = |acl: &AclBinding| {
            read_only
                .iter()
                .any(|t| dataplane::acl::allows_write_to(acl, t))
        };
        let origin = |held: bool| {
            Some(MirroredAcl {
                mirror: mirror.to_string(),
                held,
            })
        };
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(changes.len());
        let mut created: Vec<&AclBinding> = Vec::new();
        for change in changes {
            match change {
                MirrorAclChange::Create { acl, held } => {
                    let exists = self.acls.contains(acl)
                        || created.contains(&acl)
                        || self.acls.mirrored_by(mirror).any(|(_, b, _)| b == acl);
                    if !exists {
                        created.push(acl);
                        records.push(MetadataRecord::Acl {
                            id: new_id(),
                            binding: Some(acl.clone()),
                            origin: origin(*held || must_hold(acl)),
                        });
                    }
                    results.push(AdminResult::ok(acl_label(acl)));
                }
                MirrorAclChange::SetHeld { id, held } => match self.acls.find(id) {
                    Some((acl, Some(o))) if o.mirror == mirror => {
                        let held = *held || must_hold(acl);
                        if held != o.held {
                            records.push(MetadataRecord::Acl {
                                id: *id,
                                binding: Some(acl.clone()),
                                origin: origin(held),
                            });
                        }
                        results.push(AdminResult::ok(acl_label(acl)));
                    }
                    _ => results.push(not_mirrors_acl(mirror, id)),
                },
                MirrorAclChange::Delete { id } => match self.acls.find(id) {
                    Some((acl, Some(o))) if o.mirror == mirror => {
                        records.push(MetadataRecord::Acl {
                            id: *id,
                            binding: None,
                            origin: None,
                        });
                        results.push(AdminResult::ok(acl_label(acl)));
                    }
                    _ => results.push(not_mirrors_acl(mirror, id)),
                },
            }
        }
        Plan {
            records,
            response: AdminResponse::Results(results),
        }
    }

    pub(crate) fn plan_set_mirror_topics_state(
        &self,
        mirror: &str,
        topics: &[String],
        desired: DesiredMirrorState,
    ) -> Plan {
        if self.mirror_configs(mirror).is_none() {
            return failed(
                errors::UNKNOWN_CLUSTER_MIRROR,
                format!("Mirror {mirror} does not exist"),
            );
        }
        let mut plan = Plan::answer(AdminResponse::Results(Vec::new()));
        let mut results = Vec::with_capacity(topics.len());
        for name in topics {
            let fail = |code: i16, msg: String| AdminResult::err(name.as_str(), code, msg);
            let Some(topic) = self.topics.get(name) else {
                results.push(fail(
                    ResponseError::UnknownTopicOrPartition.code(),
                    format!("Topic {name} does not exist"),
                ));
                continue;
            };
            let current = match topic.mirror() {
                None => {
                    results.push(fail(
                        errors::UNKNOWN_CLUSTER_MIRROR,
                        format!("Topic {name} is not in any mirror"),
                    ));
                    continue;
                }
                Some((m, _)) if m != mirror => {
                    results.push(fail(
                        errors::TOPIC_NOT_IN_CLUSTER_MIRROR,
                        format!("Topic {name} is in mirror {m}, not {mirror}"),
                    ));
                    continue;
                }
                Some((_, current)) => current,
            };
            use DesiredMirrorState::*;
            let outcome = match (desired, current) {
                (a, b) if a == b => Ok(false),
                (Stopped, _) => Ok(true),
                (Paused, Stopped) => Err(fail(
                    errors::MIRROR_TOPIC_BEING_STOPPED,
                    format!("Topic {name} has been removed from mirror {mirror}"),
                )),
                (Paused, _) => Ok(true),
                (Mirroring, Stopped) => Err(fail(
                    errors::MIRROR_TOPIC_NOT_PAUSED,
                    format!("Topic {name} is not paused (it was removed from mirror {mirror}); add it to the mirror again instead"),
                )),
                (Mirroring, _) => Ok(true),
            };
            match outcome {
                Err(r) => results.push(r),
                Ok(change) => {
                    if change {
                        plan.records.push(MetadataRecord::Config {
                            resource_type: ConfigResourceType::Topic,
                            resource_name: name.clone(),
                            name: MIRROR_NAME_CONFIG.to_string(),
                            value: Some(mirror_name_value(mirror, desired)),
                        });
                    }
                    results.push(AdminResult::ok(name.as_str()));
                }
            }
        }
        if desired == DesiredMirrorState::Stopped && !plan.records.is_empty() {
            let stopping: Vec<&str> = plan
                .records
                .iter()
                .filter_map(|r| match r {
                    MetadataRecord::Config { resource_name, .. } => Some(resource_name.as_str()),
                    _ => None,
                })
                .collect();
            let records = self.release_mirror_acls(mirror, &stopping);
            plan.records.extend(records);
        }
        plan.response = AdminResponse::Results(results);
        plan
    }

    pub(crate) fn plan_delete_mirror(&self, name: &str) -> Plan {
        let Some(configs) = self.mirror_configs(name) else {
            return failed(
                errors::UNKNOWN_CLUSTER_MIRROR,
                format!("Mirror {name} does not exist"),
            );
        };
        let mut plan = Plan::answer(AdminResponse::Results(vec![AdminResult::ok(name)]));
        for topic in self.topics.values() {
            match topic.mirror() {
                Some((m, DesiredMirrorState::Stopped)) if m == name => {
                    plan.records.push(MetadataRecord::Config {
                        resource_type: ConfigResourceType::Topic,
                        resource_name: topic.name.clone(),
                        name: MIRROR_NAME_CONFIG.to_string(),
                        value: None,
                    });
                }
                Some((m, _)) if m == name => {
                    return failed(
                        errors::CLUSTER_MIRROR_NOT_EMPTY,
                        format!(
                            "Mirror {name} still mirrors topic {}; remove its topics first",
                            topic.name
                        ),
                    );
                }
                _ => {}
            }
        }
        plan.records.extend(Self::mirror_config_records(
            name,
            configs.keys().map(|k| (k.clone(), None)),
        ));
        plan
    }

    pub(crate) fn plan_alter_mirror_configs(
        &self,
        name: &str,
        configs: &[(String, Option<String>)],
        incremental: bool,
        validate_only: bool,
    ) -> Plan {
        let fail = |code: i16, msg: String| {
            Plan::answer(AdminResponse::Results(vec![AdminResult::err(
                name, code, msg,
            )]))
        };
        let Some(current) = self.mirror_configs(name) else {
            return fail(
                errors::UNKNOWN_CLUSTER_MIRROR,
                format!("Mirror {name} does not exist"),
            );
        };
        let mut target = if incremental {
            current.clone()
        } else {
            BTreeMap::new()
        };
        for (key, value) in configs {
            match value {
                Some(v) => {
                    if let Err(m) = validate_mirror_config(key, v) {
                        return fail(ResponseError::InvalidConfig.code(), m);
                    }
                    target.insert(key.clone(), v.clone());
                }
                None => {
                    target.remove(key);
                }
            }
        }
        for required in ["bootstrap.servers", "source.cluster.id"] {
            if current.contains_key(required) && !target.contains_key(required) {
                return fail(
                    ResponseError::InvalidConfig.code(),
                    format!("Mirror config {required} cannot be removed"),
                );
            }
        }
        if let Err(m) = dataplane::client::security::ClientSecurity::from_configs(&target) {
            return fail(
                ResponseError::InvalidConfig.code(),
                format!("Invalid mirror config {m}"),
            );
        }
        if target.get("source.cluster.id") != current.get("source.cluster.id") {
            return fail(
                ResponseError::InvalidConfig.code(),
                "Mirror config source.cluster.id cannot be changed; create a new mirror"
                    .to_string(),
            );
        }
        let mut plan = Plan::answer(AdminResponse::Results(vec![AdminResult::ok(name)]));
        if validate_only {
            return plan;
        }
        let mut changes: Vec<(String, Option<String>)> = current
            .keys()
            .filter(|k| !target.contains_key(*k))
            .map(|k| (k.clone(), None))
            .collect();
        changes.extend(
            target
                .iter()
                .filter(|(k, v)| current.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), Some(v.clone()))),
        );
        plan.records = Self::mirror_config_records(name, changes);
        plan
    }

    /// Records for a new topic with a known id.
    /// The source's configs a new mirror topic can take: each one must make a valid
    /// log config with the ones before it, and mirror configs never come from a source.
    fn initial_mirror_topic_configs(
        &self,
        topic: &str,
        source: Option<&BTreeMap<String, String>>,
    ) -> BTreeMap<String, String> {
        let mut scratch = self.settings.default_log_config.clone();
        let mut out = BTreeMap::new();
        for (key, value) in source.into_iter().flatten() {
            if crate::state::is_mirror_config(key) {
                continue;
            }
            match dataplane::log::config::apply_topic_config(&mut scratch, key, value) {
                Ok(()) => {
                    out.insert(key.clone(), value.clone());
                }
                Err(e) => {
                    tracing::warn!(%topic, config = %key, %value, error = %e, "a new mirror topic starts without a source config this broker does not take");
                }
            }
        }
        out
    }

    pub(crate) fn push_new_topic(
        &self,
        plan: &mut Plan,
        name: &str,
        id: uuid::Uuid,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) {
        plan.records.push(MetadataRecord::Topic {
            name: name.to_string(),
            id,
        });
        for (p, replicas) in (0..partitions).zip(self.mirror_replicas(name, 0, partitions, None)) {
            plan.records
                .push(MetadataRecord::Partition(new_partition(id, p, replicas)));
        }
        for (key, value) in configs {
            plan.records.push(MetadataRecord::Config {
                resource_type: ConfigResourceType::Topic,
                resource_name: name.to_string(),
                name: key,
                value: Some(value),
            });
        }
    }

    fn push_partition(&self, plan: &mut Plan, topic: &dataplane::metadata::TopicImage, p: i32) {
        let factor = topic.partitions.first().map(|p| p.replicas.len());
        if let Some(replicas) = self.mirror_replicas(&topic.name, p, 1, factor).pop() {
            plan.records.push(MetadataRecord::Partition(new_partition(
                topic.id, p, replicas,
            )));
        }
    }

    /// Replica lists for mirror partitions: the topic's replication factor (the broker
    /// default for a new topic), fewer when fewer brokers are live (a mirror copy is
    /// never refused for want of brokers; its replicas can be reassigned later).
    fn mirror_replicas(
        &self,
        topic: &str,
        first: i32,
        count: i32,
        factor: Option<usize>,
    ) -> Vec<Vec<i32>> {
        let wanted = factor
            .and_then(|f| i16::try_from(f).ok())
            .unwrap_or_else(|| self.replication_factor_for(topic, -1));
        let mut factor = wanted.max(1);
        loop {
            match self.place_replicas(topic, first, count, factor) {
                Ok(r) => return r,
                Err(_) if factor > 1 => factor -= 1,
                Err(_) => return (0..count).map(|_| vec![self.settings.node_id]).collect(),
            }
        }
    }
}
