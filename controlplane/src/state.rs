//! The controller's state machine, free of I/O: records are applied to a
//! [`ControllerState`], and an admin request is turned into a [`Plan`] (the records to
//! write, the answer, and the partition-log work for the shards) without changing
//! anything. [`crate::controller::Controller`] writes, applies and executes plans.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use dataplane::controller::{AdminRequest, AdminResponse, AdminResult, NewTopic};
use dataplane::log::config::apply_topic_config;
use dataplane::log::LogConfig;
use dataplane::metadata::{default_shard, MetadataImage, PartitionImage, TopicImage};
use dataplane::net::scram::{ScramCredential, ScramMechanism};
use dataplane::types::TopicPartition;
use kafka_protocol::ResponseError;

use crate::metadata_log::{ConfigResourceType, MetadataRecord, PartitionRecord};

/// The most partitions one topic may have (a single node with thousands of partitions
/// per topic is a misconfiguration, and every partition costs open files).
pub const TOPIC_PARTITIONS_MAX: i32 = 10_000;
/// The largest producer-id block one request may reserve.
pub const PRODUCER_ID_BLOCK_MAX: i64 = 1_000_000;
/// Kafka's limit on topic name length.
pub const TOPIC_NAME_LEN_MAX: usize = 249;
/// Topic configs owned by the mirror RPCs: stored with the topic, never altered through
/// AlterConfigs, and not log settings.
pub const MIRROR_TOPIC_CONFIG_NAMES: &[&str] = &["mirror.name", "mirror.source.topic.id"];

/// Kafka's topic name rules: 1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".to_string());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".to_string());
    }
    if name.len() > TOPIC_NAME_LEN_MAX {
        return Err(format!(
            "Topic name is illegal, it can't be longer than {TOPIC_NAME_LEN_MAX} characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!(
            "Topic name {name:?} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Internal topics (`__consumer_offsets`, `__mirror_state`, ...) start with `__`.
pub fn is_internal_topic(name: &str) -> bool {
    name.starts_with("__")
}

pub(crate) fn is_mirror_config(name: &str) -> bool {
    MIRROR_TOPIC_CONFIG_NAMES.contains(&name)
}

/// Broker defaults with a topic's explicit configs applied. Mirror configs are skipped
/// (they are not log settings); a stored value that no longer parses is logged and
/// skipped rather than failing the whole image.
pub fn effective_log_config(default: &LogConfig, configs: &BTreeMap<String, String>) -> LogConfig {
    let mut log = default.clone();
    for (name, value) in configs {
        if is_mirror_config(name) {
            continue;
        }
        if let Err(e) = apply_topic_config(&mut log, name, value) {
            tracing::warn!(config = %name, %value, error = %e, "ignoring a stored topic config");
        }
    }
    log
}

/// The records that turn `current` (one resource's stored configs) into `target`:
/// deletions of keys `target` lacks, then every new or changed value.
fn config_change_records(
    resource_type: ConfigResourceType,
    resource_name: &str,
    current: &BTreeMap<String, String>,
    target: &BTreeMap<String, String>,
) -> Vec<MetadataRecord> {
    let record = |name: &str, value: Option<String>| MetadataRecord::Config {
        resource_type,
        resource_name: resource_name.to_string(),
        name: name.to_string(),
        value,
    };
    let deleted = current
        .keys()
        .filter(|k| !target.contains_key(*k))
        .map(|k| record(k, None));
    let set = target
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| record(k, Some(v.clone())));
    deleted.chain(set).collect()
}

/// A plan that only answers `name` with an error.
fn refused(name: &str, e: ResponseError, message: String) -> Plan {
    Plan::answer(AdminResponse::Results(vec![AdminResult::err(
        name,
        err_code(e),
        message,
    )]))
}

/// `default` with the dynamic broker configs among `others` applied: the cluster-wide
/// default (resource "") first, then `node_id`'s own. A stored value that no longer
/// applies is logged and skipped.
fn topic_defaults_with(
    default: &LogConfig,
    others: &BTreeMap<(ConfigResourceType, String), BTreeMap<String, String>>,
    node_id: i32,
) -> LogConfig {
    let mut log = default.clone();
    for name in [String::new(), node_id.to_string()] {
        if let Some(configs) = others.get(&(ConfigResourceType::Broker, name)) {
            if let Err(e) = dataplane::log::config::apply_broker_defaults(&mut log, configs) {
                tracing::warn!(error = %e, "ignoring a stored dynamic broker config");
            }
        }
    }
    log
}

/// What the controller needs to know about the node it runs on.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub cluster_id: String,
    pub node_id: i32,
    pub advertised: SocketAddr,
    /// Broker defaults every topic's log config starts from.
    pub default_log_config: LogConfig,
    /// `num.partitions`: used when CreateTopics asks for -1.
    pub num_partitions: i32,
    /// Data-plane shards partitions are placed on.
    pub shard_count: usize,
    /// `mirror.state.topic.num.partitions`: partitions of `__mirror_state`.
    pub mirror_state_partitions: i32,
    /// `broker.rack` of this node.
    pub rack: Option<String>,
    /// `default.replication.factor`: used when CreateTopics asks for -1.
    pub default_replication_factor: i16,
    /// `offsets.topic.replication.factor` (and the other internal topics'): capped at
    /// the cluster's size, so a one-node cluster works with the defaults.
    pub internal_replication_factor: i16,
    /// The cluster's size as configured (the controller quorum's voters; 1 alone).
    pub expected_brokers: usize,
    /// This broker's client listeners by name and the address each advertises.
    pub listeners: Vec<(String, SocketAddr)>,
}

/// A registered broker, as the controller knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Where clients reach it.
    pub addr: SocketAddr,
    pub rack: Option<String>,
    /// Its client listeners by name and what each advertises (empty: `addr` serves
    /// every listener, as registered before named listeners).
    pub listeners: BTreeMap<String, SocketAddr>,
    /// No heartbeat within `broker.session.timeout.ms`: it leads nothing and is in no ISR.
    pub fenced: bool,
    /// It asked to shut down: leaderships move away, it takes none.
    pub shutting_down: bool,
}

/// A record that does not fit the state it is applied to (a topic created twice, a
/// partition of an unknown topic, producer ids going backwards).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata record {record:?} does not apply: {reason}")]
pub struct StateError {
    pub record: Box<MetadataRecord>,
    pub reason: String,
}

/// Partition-log work that follows a committed change, run on the owning shard.
/// `result_index` is the request item (index into the `Results` answer) it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionAction {
    Open {
        result_index: usize,
        tp: TopicPartition,
        topic_id: uuid::Uuid,
        config: LogConfig,
        leadership: dataplane::partition::Leadership,
        shard: usize,
    },
    Delete {
        result_index: usize,
        tp: TopicPartition,
        shard: usize,
    },
    UpdateConfig {
        result_index: usize,
        tp: TopicPartition,
        config: LogConfig,
        shard: usize,
    },
    /// The partition's leader, epochs or ISR changed: its owner leads or follows as
    /// `leadership` says now.
    SetLeadership {
        result_index: usize,
        tp: TopicPartition,
        leadership: dataplane::partition::Leadership,
        shard: usize,
    },
}

impl PartitionAction {
    pub fn tp(&self) -> &TopicPartition {
        match self {
            PartitionAction::Open { tp, .. }
            | PartitionAction::Delete { tp, .. }
            | PartitionAction::UpdateConfig { tp, .. }
            | PartitionAction::SetLeadership { tp, .. } => tp,
        }
    }

    pub fn result_index(&self) -> usize {
        match self {
            PartitionAction::Open { result_index, .. }
            | PartitionAction::Delete { result_index, .. }
            | PartitionAction::UpdateConfig { result_index, .. }
            | PartitionAction::SetLeadership { result_index, .. } => *result_index,
        }
    }
}

/// What an admin request does: `records` are committed as one batch and applied, the
/// shard work they mean is worked out from the images (`crate::applier`) and run, then
/// `response` (with that work's failures folded in) is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub records: Vec<MetadataRecord>,
    pub response: AdminResponse,
}

impl Plan {
    pub(crate) fn answer(response: AdminResponse) -> Self {
        Plan {
            records: Vec::new(),
            response,
        }
    }
}

/// The cluster's metadata as of the last applied record: a `*Table`-like view derived
/// from the metadata log.
#[derive(Debug, Clone)]
pub struct ControllerState {
    pub(crate) settings: NodeSettings,
    pub(crate) topics: BTreeMap<String, Arc<TopicImage>>,
    pub(crate) topics_by_id: HashMap<uuid::Uuid, String>,
    /// Broker and mirror configs, by resource.
    other_configs: BTreeMap<(ConfigResourceType, String), BTreeMap<String, String>>,
    /// SCRAM credentials by user and mechanism (shared with the images).
    scram: Arc<BTreeMap<(String, ScramMechanism), ScramCredential>>,
    /// The ACLs (shared with the images).
    pub(crate) acls: Arc<dataplane::acl::AclSet>,
    /// First producer id not yet handed out.
    next_producer_id: i64,
    /// The cluster id the quorum committed ([`MetadataRecord::ClusterId`]); until then
    /// this node's own.
    cluster_id: Option<String>,
    /// Controllers of a dynamic quorum: node id -> (directory id, Raft address).
    voter_endpoints: BTreeMap<i32, (uuid::Uuid, SocketAddr)>,
    /// Registered brokers by node id.
    brokers: BTreeMap<i32, BrokerInfo>,
    /// Records applied so far.
    applied: u64,
    /// Records still to skip after a [`MetadataRecord::Guard`] that did not hold.
    skipping: u32,
    /// The latest guards' outcomes (nonce, held), newest last.
    guards: std::collections::VecDeque<(u64, bool)>,
}

/// How many guard outcomes are remembered (a forwarding controller looks for its own
/// within seconds).
const GUARDS_KEPT: usize = 256;

fn err_code(e: ResponseError) -> i16 {
    e.code()
}

impl ControllerState {
    pub fn new(settings: NodeSettings) -> Self {
        debug_assert!(settings.mirror_state_partitions > 0);
        ControllerState {
            settings,
            topics: BTreeMap::new(),
            topics_by_id: HashMap::new(),
            other_configs: BTreeMap::new(),
            scram: Arc::default(),
            acls: Arc::default(),
            next_producer_id: 0,
            cluster_id: None,
            voter_endpoints: BTreeMap::new(),
            brokers: BTreeMap::new(),
            applied: 0,
            skipping: 0,
            guards: std::collections::VecDeque::new(),
        }
    }

    pub fn settings(&self) -> &NodeSettings {
        &self.settings
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// After a snapshot's records are replayed: how many records the state had applied
    /// when the snapshot was taken.
    pub(crate) fn set_applied(&mut self, applied: u64) {
        self.applied = applied;
    }

    /// Records that rebuild this state from nothing (a snapshot of the metadata): broker
    /// and mirror configs first (topic defaults follow them), then each topic with its
    /// partitions and configs, then the producer-id high-water mark.
    pub fn image_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        if let Some(id) = &self.cluster_id {
            out.push(MetadataRecord::ClusterId { id: id.clone() });
        }
        for (node_id, (directory_id, addr)) in &self.voter_endpoints {
            out.push(MetadataRecord::VoterEndpoint {
                node_id: *node_id,
                directory_id: *directory_id,
                host: addr.ip().to_string(),
                port: i32::from(addr.port()),
            });
        }
        for ((resource_type, resource_name), configs) in &self.other_configs {
            for (name, value) in configs {
                out.push(MetadataRecord::Config {
                    resource_type: *resource_type,
                    resource_name: resource_name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        for topic in self.topics.values() {
            out.push(MetadataRecord::Topic {
                name: topic.name.clone(),
                id: topic.id,
            });
            for p in &topic.partitions {
                out.push(MetadataRecord::Partition(partition_record(topic.id, p)));
            }
            for (name, value) in &topic.configs {
                out.push(MetadataRecord::Config {
                    resource_type: ConfigResourceType::Topic,
                    resource_name: topic.name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        for (node_id, b) in &self.brokers {
            out.push(MetadataRecord::RegisterBroker {
                node_id: *node_id,
                host: b.addr.ip().to_string(),
                port: i32::from(b.addr.port()),
                rack: b.rack.clone(),
                listeners: b
                    .listeners
                    .iter()
                    .map(|(name, a)| (name.clone(), a.ip().to_string(), i32::from(a.port())))
                    .collect(),
            });
            if b.fenced {
                out.push(MetadataRecord::FenceBroker { node_id: *node_id });
            }
            if b.shutting_down {
                out.push(MetadataRecord::ControlledShutdown { node_id: *node_id });
            }
        }
        for ((user, mechanism), credential) in self.scram.iter() {
            out.push(MetadataRecord::ScramCredential {
                user: user.clone(),
                mechanism: *mechanism,
                credential: Some(credential.clone()),
            });
        }
        for (id, binding, origin) in self.acls.iter_all() {
            out.push(MetadataRecord::Acl {
                id: *id,
                binding: Some(binding.clone()),
                origin: origin.cloned(),
            });
        }
        if self.next_producer_id > 0 {
            out.push(MetadataRecord::ProducerIds {
                next_block_start: self.next_producer_id,
            });
        }
        out
    }

    /// Broker (`ConfigResourceType::Broker`) or mirror configs of one resource.
    pub fn resource_configs(
        &self,
        kind: ConfigResourceType,
        name: &str,
    ) -> Option<&BTreeMap<String, String>> {
        self.other_configs.get(&(kind, name.to_string()))
    }

    /// The image of the current state, as published to the data plane.
    pub fn image(&self) -> MetadataImage {
        let s = &self.settings;
        let cluster_id = self.cluster_id.as_ref().unwrap_or(&s.cluster_id);
        let mut image = MetadataImage::empty(cluster_id.clone(), s.node_id, s.advertised);
        image.offset = self.applied;
        image.brokers = self.brokers.iter().map(|(id, b)| (*id, b.addr)).collect();
        image.listeners = self
            .brokers
            .iter()
            .map(|(id, b)| (*id, b.listeners.clone()))
            .collect();
        image
            .listeners
            .insert(s.node_id, s.listeners.iter().cloned().collect());
        image.fenced = self
            .brokers
            .iter()
            .filter(|(_, b)| b.fenced || b.shutting_down)
            .map(|(id, _)| *id)
            .collect();
        image.racks = self
            .brokers
            .iter()
            .filter_map(|(id, b)| Some((*id, b.rack.clone()?)))
            .collect();
        image.topics = self.topics.clone();
        image.scram = Arc::clone(&self.scram);
        image.acls = Arc::clone(&self.acls);
        image.topics_by_id = self.topics_by_id.clone();
        image.mirrors = self
            .other_configs
            .iter()
            .filter(|((kind, _), _)| *kind == ConfigResourceType::Mirror)
            .map(|((_, name), configs)| {
                (
                    name.clone(),
                    Arc::new(dataplane::metadata::MirrorImage {
                        name: name.clone(),
                        configs: configs.clone(),
                    }),
                )
            })
            .collect();
        image.broker_configs = self
            .other_configs
            .iter()
            .filter(|((kind, _), _)| *kind == ConfigResourceType::Broker)
            .map(|((_, name), configs)| (name.clone(), configs.clone()))
            .collect();
        image
    }

    /// The defaults every topic's log config starts from: the broker's config file, then
    /// the dynamic cluster-wide default broker configs, then this broker's own.
    pub fn topic_defaults(&self) -> LogConfig {
        topic_defaults_with(
            &self.settings.default_log_config,
            &self.other_configs,
            self.settings.node_id,
        )
    }

    /// Whether this node is registered with its current address and rack, and not in a
    /// controlled shutdown (a restarted broker registers again).
    pub fn is_registered(&self) -> bool {
        self.brokers.get(&self.settings.node_id).is_some_and(|b| {
            b.addr == self.settings.advertised
                && b.rack == self.settings.rack
                && b.listeners == self.settings.listeners.iter().cloned().collect()
                && !b.shutting_down
        })
    }

    /// The record that registers this node's broker.
    pub fn registration(&self) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            node_id: self.settings.node_id,
            host: self.settings.advertised.ip().to_string(),
            port: i32::from(self.settings.advertised.port()),
            rack: self.settings.rack.clone(),
            listeners: self
                .settings
                .listeners
                .iter()
                .map(|(name, a)| (name.clone(), a.ip().to_string(), i32::from(a.port())))
                .collect(),
        }
    }

    /// The controllers of a dynamic quorum whose endpoints were committed: node id ->
    /// (directory id, Raft address).
    pub fn voter_endpoints(&self) -> &BTreeMap<i32, (uuid::Uuid, SocketAddr)> {
        &self.voter_endpoints
    }

    /// The cluster id the quorum committed, if it did.
    pub fn committed_cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// Registered brokers.
    pub fn brokers(&self) -> &BTreeMap<i32, BrokerInfo> {
        &self.brokers
    }

    /// Whether `node` may lead and be in an ISR: registered, not fenced, not shutting
    /// down. With no broker registered (a node of its own), only this node is.
    pub fn is_live(&self, node: i32) -> bool {
        if self.brokers.is_empty() {
            return node == self.settings.node_id;
        }
        self.brokers
            .get(&node)
            .is_some_and(|b| !b.fenced && !b.shutting_down)
    }

    /// The brokers new replicas may go to, with their racks, by node id.
    fn placeable_brokers(&self) -> Vec<(i32, Option<String>)> {
        if self.brokers.is_empty() {
            return vec![(self.settings.node_id, self.settings.rack.clone())];
        }
        self.brokers
            .iter()
            .filter(|(id, _)| self.is_live(**id))
            .map(|(id, b)| (*id, b.rack.clone()))
            .collect()
    }

    /// Replica lists for partitions `first..first + count` of `topic` with `factor`
    /// replicas each, or why they cannot be placed.
    pub(crate) fn place_replicas(
        &self,
        topic: &str,
        first: i32,
        count: i32,
        factor: i16,
    ) -> Result<Vec<Vec<i32>>, String> {
        let brokers = self.placeable_brokers();
        let factor = usize::try_from(factor).unwrap_or(0);
        if factor == 0 {
            return Err("Replication factor must be larger than 0.".to_string());
        }
        if factor > brokers.len() {
            return Err(format!(
                "Unable to replicate the partition {factor} time(s): The target replication factor of {factor} cannot be reached because only {} broker(s) are registered.",
                brokers.len()
            ));
        }
        Ok(assign_replicas(&brokers, topic, first, count, factor))
    }

    /// The replication factor a new topic asking for `requested` gets (-1: the broker
    /// default; internal topics: their factor, capped at the placeable brokers).
    pub(crate) fn replication_factor_for(&self, name: &str, requested: i16) -> i16 {
        if requested != -1 {
            return requested;
        }
        if is_internal_topic(name) {
            let brokers = i16::try_from(self.settings.expected_brokers).unwrap_or(i16::MAX);
            return self
                .settings
                .internal_replication_factor
                .clamp(1, brokers.max(1));
        }
        self.settings.default_replication_factor
    }

    /// Checks explicit replica lists against the registered brokers.
    pub(crate) fn check_assignments(&self, assignments: &[Vec<i32>]) -> Result<(), String> {
        for (p, replicas) in assignments.iter().enumerate() {
            for r in replicas {
                let known = if self.brokers.is_empty() {
                    *r == self.settings.node_id
                } else {
                    self.brokers.contains_key(r)
                };
                if !known {
                    return Err(format!(
                        "Partition {p}: broker {r} in the assignment {replicas:?} is not registered"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Explicit replica lists for new partitions of a topic with `factor` replicas each.
    fn check_new_assignments(
        &self,
        lists: &[Vec<i32>],
        factor: usize,
    ) -> Result<Vec<Vec<i32>>, String> {
        self.check_assignments(lists)?;
        if let Some(bad) = lists.iter().find(|l| l.len() != factor) {
            return Err(format!(
                "Inconsistent replication factor between partitions: the topic has {factor} replicas per partition, the assignment {bad:?} has {}",
                bad.len()
            ));
        }
        Ok(lists.to_vec())
    }

    /// Kafka's partition state machine after broker changes: every partition whose
    /// leader cannot lead any more (fenced, shutting down, none) gets the first live ISR
    /// member in replica order (a live replica out of the ISR only with
    /// `unclean.leader.election.enable`), and every ISR loses its brokers that are not
    /// live. A new leader raises the leader epoch; any change raises the partition
    /// epoch. With no live ISR member the leader is -1 and the ISR keeps its last
    /// member, which leads again when it comes back.
    pub fn election_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for topic in self.topics.values() {
            for p in &topic.partitions {
                let Some(next) = elect(
                    p,
                    |b| self.is_live(b),
                    topic.log_config.unclean_leader_election,
                ) else {
                    continue;
                };
                out.push(MetadataRecord::Partition(partition_record(topic.id, &next)));
            }
        }
        out
    }

    /// Whether the guarded change with `nonce` took (`None`: not committed yet, or long
    /// ago).
    pub fn guard_outcome(&self, nonce: u64) -> Option<bool> {
        self.guards
            .iter()
            .rev()
            .find(|(n, _)| *n == nonce)
            .map(|(_, held)| *held)
    }

    /// Applies one committed record.
    pub fn apply(&mut self, record: &MetadataRecord) -> Result<(), StateError> {
        let fail = |reason: String| StateError {
            record: Box::new(record.clone()),
            reason,
        };
        if self.skipping > 0 {
            // Behind a guard that did not hold: counted, not applied.
            self.skipping -= 1;
            self.applied += 1;
            return Ok(());
        }
        match record {
            MetadataRecord::Guard {
                nonce,
                expected_applied,
                records,
            } => {
                let held = self.applied == *expected_applied;
                if !held {
                    self.skipping = *records;
                }
                self.guards.push_back((*nonce, held));
                if self.guards.len() > GUARDS_KEPT {
                    self.guards.pop_front();
                }
            }
            MetadataRecord::Topic { name, id } => {
                if self.topics.contains_key(name) {
                    return Err(fail(format!("topic {name} already exists")));
                }
                if self.topics_by_id.contains_key(id) {
                    return Err(fail(format!("topic id {id} already in use")));
                }
                let topic = TopicImage {
                    name: name.clone(),
                    id: *id,
                    partitions: Vec::new(),
                    configs: BTreeMap::new(),
                    log_config: self.topic_defaults(),
                    internal: is_internal_topic(name),
                };
                self.topics.insert(name.clone(), Arc::new(topic));
                self.topics_by_id.insert(*id, name.clone());
            }
            MetadataRecord::Partition(p) => {
                let shards = self.settings.shard_count;
                let topic = self
                    .topic_by_id_mut(p.topic_id)
                    .ok_or_else(|| fail("unknown topic id".into()))?;
                let partition = &p.partition;
                let image = PartitionImage {
                    partition: p.partition,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    adding: p.adding.clone(),
                    removing: p.removing.clone(),
                    // Placement is each node's own: never replicated.
                    shard: default_shard(&topic.name, p.partition, shards),
                };
                let count = topic.partitions.len();
                match usize::try_from(*partition) {
                    Ok(p) if p == count => topic.partitions.push(image),
                    Ok(p) if p < count => topic.partitions[p] = image,
                    _ => return Err(fail(format!("partition {partition} is not in 0..={count}"))),
                }
            }
            MetadataRecord::Config {
                resource_type: ConfigResourceType::Topic,
                resource_name,
                name,
                value,
            } => {
                let default = self.topic_defaults();
                let topic = self
                    .topics
                    .get_mut(resource_name)
                    .map(Arc::make_mut)
                    .ok_or_else(|| fail(format!("unknown topic {resource_name}")))?;
                match value {
                    Some(v) => topic.configs.insert(name.clone(), v.clone()),
                    None => topic.configs.remove(name),
                };
                topic.log_config = effective_log_config(&default, &topic.configs);
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                let key = (*resource_type, resource_name.clone());
                match value {
                    Some(v) => {
                        self.other_configs
                            .entry(key)
                            .or_default()
                            .insert(name.clone(), v.clone());
                    }
                    None => {
                        if let Some(map) = self.other_configs.get_mut(&key) {
                            map.remove(name);
                            if map.is_empty() {
                                self.other_configs.remove(&key);
                            }
                        }
                    }
                }
                if *resource_type == ConfigResourceType::Broker {
                    // The topic defaults may have changed: every topic follows.
                    let defaults = self.topic_defaults();
                    for topic in self.topics.values_mut() {
                        let log = effective_log_config(&defaults, &topic.configs);
                        if log != topic.log_config {
                            Arc::make_mut(topic).log_config = log;
                        }
                    }
                }
            }
            MetadataRecord::RemoveTopic { id } => {
                let name = self
                    .topics_by_id
                    .remove(id)
                    .ok_or_else(|| fail("unknown topic id".into()))?;
                self.topics.remove(&name);
            }
            MetadataRecord::RegisterBroker {
                node_id,
                host,
                port,
                rack,
                listeners,
            } => {
                let addr = format!("{host}:{port}")
                    .parse::<std::net::SocketAddr>()
                    .map_err(|_| fail(format!("broker address {host}:{port} is not ip:port")))?;
                let listeners = listeners
                    .iter()
                    .map(|(name, host, port)| {
                        let a = format!("{host}:{port}")
                            .parse::<SocketAddr>()
                            .map_err(|_| {
                                fail(format!(
                                    "listener {name} address {host}:{port} is not ip:port"
                                ))
                            })?;
                        Ok((name.clone(), a))
                    })
                    .collect::<Result<BTreeMap<_, _>, StateError>>()?;
                self.brokers.insert(
                    *node_id,
                    BrokerInfo {
                        addr,
                        rack: rack.clone(),
                        listeners,
                        fenced: false,
                        shutting_down: false,
                    },
                );
            }
            MetadataRecord::FenceBroker { node_id } => {
                if let Some(b) = self.brokers.get_mut(node_id) {
                    b.fenced = true;
                }
            }
            MetadataRecord::UnfenceBroker { node_id } => {
                if let Some(b) = self.brokers.get_mut(node_id) {
                    b.fenced = false;
                }
            }
            MetadataRecord::ControlledShutdown { node_id } => {
                if let Some(b) = self.brokers.get_mut(node_id) {
                    b.shutting_down = true;
                }
            }
            MetadataRecord::AlterPartition {
                topic_id,
                partition,
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                let live: Vec<bool> = isr.iter().map(|r| self.is_live(*r)).collect();
                if let Some(p) = self
                    .topic_by_id_mut(*topic_id)
                    .and_then(|t| t.partitions.get_mut(usize::try_from(*partition).ok()?))
                {
                    // Conditional: a stale request (another change came first) and an ISR
                    // of brokers that cannot be in it change nothing, on every node alike.
                    let fits = p.leader_epoch == *leader_epoch
                        && p.partition_epoch == *partition_epoch
                        && isr.contains(&p.leader)
                        && isr.iter().all(|r| p.replicas.contains(r))
                        && live.iter().all(|l| *l);
                    if fits {
                        p.isr = isr.clone();
                        p.partition_epoch += 1;
                    }
                }
            }
            MetadataRecord::VoterEndpoint {
                node_id,
                directory_id,
                host,
                port,
            } => {
                let addr = host
                    .parse::<std::net::IpAddr>()
                    .ok()
                    .zip(u16::try_from(*port).ok())
                    .map(SocketAddr::from)
                    .ok_or_else(|| fail(format!("voter endpoint {host}:{port} is no address")))?;
                self.voter_endpoints.insert(*node_id, (*directory_id, addr));
            }
            MetadataRecord::ClusterId { id } => {
                if *id != self.settings.cluster_id {
                    // Kafka refuses such a node (INCONSISTENT_CLUSTER_ID); here the
                    // quorum's id wins and the operator is told.
                    tracing::error!(
                        committed = %id, formatted = %self.settings.cluster_id,
                        "this node's meta.properties names another cluster than its quorum; reporting the quorum's cluster id (format every node with the same id: twinlog format --cluster-id)"
                    );
                }
                if self.cluster_id.is_none() {
                    self.cluster_id = Some(id.clone());
                }
            }
            MetadataRecord::ScramCredential {
                user,
                mechanism,
                credential,
            } => {
                let all = Arc::make_mut(&mut self.scram);
                match credential {
                    Some(c) => {
                        all.insert((user.clone(), *mechanism), c.clone());
                    }
                    None => {
                        all.remove(&(user.clone(), *mechanism));
                    }
                }
            }
            MetadataRecord::Acl {
                id,
                binding,
                origin,
            } => {
                let acls = Arc::make_mut(&mut self.acls);
                match binding {
                    Some(b) => acls.insert_from(*id, b.clone(), origin.clone()),
                    None => {
                        acls.remove(id);
                    }
                }
            }
            MetadataRecord::ProducerIds { next_block_start } => {
                if *next_block_start < self.next_producer_id {
                    return Err(fail(format!(
                        "producer ids would go back from {} to {next_block_start}",
                        self.next_producer_id
                    )));
                }
                self.next_producer_id = *next_block_start;
            }
        }
        self.applied += 1;
        Ok(())
    }

    fn topic_by_id_mut(&mut self, id: uuid::Uuid) -> Option<&mut TopicImage> {
        let name = self.topics_by_id.get(&id)?;
        self.topics.get_mut(name).map(Arc::make_mut)
    }

    /// Turns an admin request into a plan; changes nothing. `new_topic_id` supplies the
    /// ids of created topics (random in production, fixed in tests).
    pub fn plan(
        &self,
        request: &AdminRequest,
        new_topic_id: &mut dyn FnMut() -> uuid::Uuid,
    ) -> Plan {
        match request {
            AdminRequest::CreateTopics {
                topics,
                validate_only,
            } => self.plan_create_topics(topics, *validate_only, new_topic_id),
            AdminRequest::DeleteTopics { names } => self.plan_delete_topics(names),
            AdminRequest::CreatePartitions {
                topics,
                assignments,
                validate_only,
            } => self.plan_create_partitions(topics, assignments, *validate_only),
            AdminRequest::AlterTopicConfigs {
                topic,
                configs,
                incremental,
                validate_only,
            } => self.plan_alter_configs(topic, configs, *incremental, *validate_only),
            AdminRequest::AlterBrokerConfigs {
                broker,
                configs,
                incremental,
                validate_only,
            } => self.plan_alter_broker_configs(broker, configs, *incremental, *validate_only),
            AdminRequest::AllocateProducerIds { count } => self.plan_producer_ids(*count),
            AdminRequest::AlterScramCredentials {
                deletions,
                upsertions,
            } => self.plan_alter_scram(deletions, upsertions),
            AdminRequest::CreateAcls { bindings } => self.plan_create_acls(bindings, new_topic_id),
            AdminRequest::DeleteAcls { filters } => self.plan_delete_acls(filters),
            AdminRequest::SyncMirrorAcls { mirror, changes } => {
                self.plan_sync_mirror_acls(mirror, changes, new_topic_id)
            }
            AdminRequest::CreateMirror { name, configs } => {
                self.plan_create_mirror(name, configs, new_topic_id)
            }
            AdminRequest::AddTopicsToMirror {
                mirror,
                topics,
                configs,
            } => self.plan_add_topics_to_mirror(mirror, topics, configs, new_topic_id),
            AdminRequest::SetMirrorTopicsState {
                mirror,
                topics,
                desired,
            } => self.plan_set_mirror_topics_state(mirror, topics, *desired),
            AdminRequest::DeleteMirror { name } => self.plan_delete_mirror(name),
            AdminRequest::AlterMirrorConfigs {
                name,
                configs,
                incremental,
                validate_only,
            } => self.plan_alter_mirror_configs(name, configs, *incremental, *validate_only),
            AdminRequest::BumpLeaderEpochs { partitions } => {
                self.plan_bump_leader_epochs(partitions)
            }
            AdminRequest::AlterPartitionReassignments { partitions } => {
                self.plan_reassignments(partitions)
            }
            AdminRequest::ElectLeaders {
                preferred,
                partitions,
            } => self.plan_elect_leaders(*preferred, partitions),
            AdminRequest::DescribeQuorum | AdminRequest::RemoveRaftVoter { .. } => {
                Plan::answer(AdminResponse::Results(Vec::new()))
            }
            // The endpoint first, so every member can dial the voter it becomes.
            AdminRequest::AddRaftVoter {
                node_id,
                directory_id,
                addr,
            } => Plan {
                records: vec![MetadataRecord::VoterEndpoint {
                    node_id: *node_id,
                    directory_id: *directory_id,
                    host: addr.ip().to_string(),
                    port: i32::from(addr.port()),
                }],
                response: AdminResponse::Results(Vec::new()),
            },
            AdminRequest::AlterPartition { .. } | AdminRequest::ControlledShutdown => Plan {
                records: self.forwardable_records(request),
                response: AdminResponse::Results(Vec::new()),
            },
        }
    }

    /// The conditional records of a request any quorum member may propose (it applies,
    /// or not, the same way on every node whoever planned it): AlterPartition and
    /// ControlledShutdown. Empty for every other request.
    pub fn forwardable_records(&self, request: &AdminRequest) -> Vec<MetadataRecord> {
        match request {
            AdminRequest::AlterPartition {
                topic_id,
                partition,
                leader_epoch,
                partition_epoch,
                isr,
            } => vec![MetadataRecord::AlterPartition {
                topic_id: *topic_id,
                partition: *partition,
                leader_epoch: *leader_epoch,
                partition_epoch: *partition_epoch,
                isr: isr.clone(),
            }],
            AdminRequest::ControlledShutdown => vec![MetadataRecord::ControlledShutdown {
                node_id: self.settings.node_id,
            }],
            _ => Vec::new(),
        }
    }

    pub(crate) fn new_topic_id(&self, new_topic_id: &mut dyn FnMut() -> uuid::Uuid) -> uuid::Uuid {
        // Kafka never uses the zero uuid (it means "no id") and ids must be unique.
        loop {
            let id = new_topic_id();
            if !id.is_nil() && !self.topics_by_id.contains_key(&id) {
                return id;
            }
        }
    }

    fn plan_create_topics(
        &self,
        topics: &[NewTopic],
        validate_only: bool,
        new_topic_id: &mut dyn FnMut() -> uuid::Uuid,
    ) -> Plan {
        let duplicates = duplicates(topics.iter().map(|t| t.name.as_str()));
        let mut plan = Plan::answer(AdminResponse::Results(Vec::new()));
        let mut results = Vec::with_capacity(topics.len());
        for topic in topics {
            let result = match self.validate_new_topic(topic, &duplicates) {
                Err(result) => result,
                Ok(_) if validate_only => AdminResult::ok(&topic.name),
                Ok((partitions, configs, assignment)) => {
                    let id = self.new_topic_id(new_topic_id);
                    plan.records.push(MetadataRecord::Topic {
                        name: topic.name.clone(),
                        id,
                    });
                    for (p, replicas) in (0..partitions).zip(assignment) {
                        plan.records
                            .push(MetadataRecord::Partition(new_partition(id, p, replicas)));
                    }
                    for (name, value) in configs {
                        plan.records.push(MetadataRecord::Config {
                            resource_type: ConfigResourceType::Topic,
                            resource_name: topic.name.clone(),
                            name,
                            value: Some(value),
                        });
                    }
                    AdminResult::ok(&topic.name)
                }
            };
            results.push(result);
        }
        plan.response = AdminResponse::Results(results);
        plan
    }

    /// The partition count, explicit configs and replica lists of a valid new topic, or
    /// its error.
    fn validate_new_topic(
        &self,
        topic: &NewTopic,
        duplicates: &BTreeSet<&str>,
    ) -> Result<ValidTopic, AdminResult> {
        let name = &topic.name;
        let fail =
            |e: ResponseError, msg: String| AdminResult::err(name.as_str(), err_code(e), msg);
        validate_topic_name(name).map_err(|m| fail(ResponseError::InvalidTopicException, m))?;
        if duplicates.contains(name.as_str()) {
            return Err(fail(
                ResponseError::InvalidRequest,
                format!("Duplicate topic name {name} in the request"),
            ));
        }
        if self.topics.contains_key(name) {
            return Err(fail(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        let partitions = match (topic.num_partitions, topic.assignments.len()) {
            (-1, 0) => self.settings.num_partitions,
            (-1, n) => i32::try_from(n).unwrap_or(i32::MAX),
            (n, _) => n,
        };
        if partitions < 1 {
            return Err(fail(
                ResponseError::InvalidPartitions,
                format!(
                    "Number of partitions must be larger than 0, or -1 to use the default value, got {}",
                    topic.num_partitions
                ),
            ));
        }
        if partitions > TOPIC_PARTITIONS_MAX {
            return Err(fail(
                ResponseError::InvalidPartitions,
                format!("Number of partitions {partitions} exceeds the maximum of {TOPIC_PARTITIONS_MAX}"),
            ));
        }
        let assignment = if topic.assignments.is_empty() {
            let factor = self.replication_factor_for(name, topic.replication_factor);
            if factor < 1 {
                return Err(fail(
                    ResponseError::InvalidReplicationFactor,
                    format!(
                        "Replication factor must be larger than 0, or -1 to use the default value, got {}",
                        topic.replication_factor
                    ),
                ));
            }
            self.place_replicas(name, 0, partitions, factor)
                .map_err(|m| fail(ResponseError::InvalidReplicationFactor, m))?
        } else {
            self.check_assignments(&topic.assignments)
                .map_err(|m| fail(ResponseError::InvalidReplicaAssignment, m))?;
            topic.assignments.clone()
        };
        let mut configs = BTreeMap::new();
        let mut scratch = self.settings.default_log_config.clone();
        for (key, value) in &topic.configs {
            let Some(value) = value else {
                return Err(fail(
                    ResponseError::InvalidConfig,
                    format!("Null value not supported for topic config `{key}`"),
                ));
            };
            if is_mirror_config(key) {
                return Err(fail(
                    ResponseError::InvalidConfig,
                    mirror_config_message(key),
                ));
            }
            apply_topic_config(&mut scratch, key, value)
                .map_err(|m| fail(ResponseError::InvalidConfig, m))?;
            configs.insert(key.clone(), value.clone());
        }
        Ok((partitions, configs, assignment))
    }

    fn plan_delete_topics(&self, names: &[String]) -> Plan {
        let duplicates = duplicates(names.iter().map(String::as_str));
        let mut plan = Plan::answer(AdminResponse::Results(Vec::new()));
        let mut results = Vec::with_capacity(names.len());
        for name in names {
            let fail =
                |e: ResponseError, msg: String| AdminResult::err(name.as_str(), err_code(e), msg);
            let result = if duplicates.contains(name.as_str()) {
                fail(
                    ResponseError::InvalidRequest,
                    format!("Duplicate topic name {name} in the request"),
                )
            } else if let Some(topic) = self.topics.get(name) {
                if topic.internal {
                    fail(
                        ResponseError::InvalidTopicException,
                        format!("Internal topic {name} cannot be deleted"),
                    )
                } else {
                    plan.records
                        .push(MetadataRecord::RemoveTopic { id: topic.id });
                    AdminResult::ok(name)
                }
            } else {
                fail(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic {name} does not exist"),
                )
            };
            results.push(result);
        }
        plan.response = AdminResponse::Results(results);
        plan
    }

    fn plan_create_partitions(
        &self,
        topics: &[(String, i32)],
        assignments: &[(String, Vec<Vec<i32>>)],
        validate_only: bool,
    ) -> Plan {
        let duplicates = duplicates(topics.iter().map(|(n, _)| n.as_str()));
        let mut plan = Plan::answer(AdminResponse::Results(Vec::new()));
        let mut results = Vec::with_capacity(topics.len());
        for (name, count) in topics {
            let fail =
                |e: ResponseError, msg: String| AdminResult::err(name.as_str(), err_code(e), msg);
            let count = *count;
            let result = if duplicates.contains(name.as_str()) {
                fail(
                    ResponseError::InvalidRequest,
                    format!("Duplicate topic name {name} in the request"),
                )
            } else if let Some(topic) = self.topics.get(name) {
                let current = topic.partitions.len() as i32;
                if count == current {
                    fail(
                        ResponseError::InvalidPartitions,
                        format!("Topic already has {current} partition(s)."),
                    )
                } else if count < current {
                    fail(
                        ResponseError::InvalidPartitions,
                        format!(
                            "The topic {name} currently has {current} partition(s); {count} would not be an increase."
                        ),
                    )
                } else if count > TOPIC_PARTITIONS_MAX {
                    fail(
                        ResponseError::InvalidPartitions,
                        format!("Number of partitions {count} exceeds the maximum of {TOPIC_PARTITIONS_MAX}"),
                    )
                } else {
                    let factor = topic.partitions.first().map_or(1, |p| p.replicas.len());
                    let explicit = assignments.iter().find(|(n, _)| n == name).map(|(_, a)| a);
                    let placed = match explicit {
                        Some(lists) if lists.len() as i32 != count - current => Err(format!(
                            "Increasing the number of partitions by {} but {} assignments provided.",
                            count - current,
                            lists.len()
                        )),
                        Some(lists) => self.check_new_assignments(lists, factor),
                        None => self.place_replicas(
                            name,
                            current,
                            count - current,
                            i16::try_from(factor).unwrap_or(i16::MAX),
                        ),
                    };
                    match placed {
                        Err(m) if explicit.is_some() => {
                            fail(ResponseError::InvalidReplicaAssignment, m)
                        }
                        Err(m) => fail(ResponseError::InvalidReplicationFactor, m),
                        Ok(assignment) => {
                            if !validate_only {
                                for (p, replicas) in (current..count).zip(assignment) {
                                    plan.records.push(MetadataRecord::Partition(new_partition(
                                        topic.id, p, replicas,
                                    )));
                                }
                            }
                            AdminResult::ok(name)
                        }
                    }
                }
            } else {
                fail(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic {name} does not exist"),
                )
            };
            results.push(result);
        }
        plan.response = AdminResponse::Results(results);
        plan
    }

    /// Dynamic broker configs, as Kafka's `ConfigAdminManager` checks them: a config of
    /// Kafka's broker catalog that Kafka can change at runtime, of the right type; topic
    /// defaults among them (`log.retention.ms`, ...) reach every topic without an
    /// override of its own.
    fn plan_alter_broker_configs(
        &self,
        broker: &str,
        configs: &[(String, Option<String>)],
        incremental: bool,
        validate_only: bool,
    ) -> Plan {
        let fail = |e: ResponseError, msg: String| refused(broker, e, msg);
        let key = (ConfigResourceType::Broker, broker.to_string());
        let current = self.other_configs.get(&key).cloned().unwrap_or_default();
        let mut target = if incremental {
            current.clone()
        } else {
            BTreeMap::new()
        };
        let mut not_dynamic = Vec::new();
        for (name, value) in configs {
            let Some(def) = dataplane::kafka_configs::broker_config(name) else {
                return fail(
                    ResponseError::InvalidConfig,
                    format!("Unknown broker config name: {name}"),
                );
            };
            if def.read_only {
                not_dynamic.push(name.as_str());
                continue;
            }
            match value {
                Some(v) => {
                    if let Err(m) = dataplane::kafka_configs::validate(def, v) {
                        return fail(ResponseError::InvalidConfig, m);
                    }
                    target.insert(name.clone(), v.clone());
                }
                None => {
                    target.remove(name);
                }
            }
        }
        if !not_dynamic.is_empty() {
            return fail(
                ResponseError::InvalidRequest,
                format!(
                    "Cannot update these configs dynamically: Set({})",
                    not_dynamic.join(", ")
                ),
            );
        }
        // The topic defaults they set must make a valid log config.
        let mut others = self.other_configs.clone();
        if target.is_empty() {
            others.remove(&key);
        } else {
            others.insert(key, target.clone());
        }
        let mut scratch = self.settings.default_log_config.clone();
        if let Err(m) = dataplane::log::config::apply_broker_defaults(&mut scratch, &target) {
            return fail(ResponseError::InvalidConfig, m);
        }
        let mut plan = Plan::answer(AdminResponse::Results(vec![AdminResult::ok(broker)]));
        if validate_only {
            return plan;
        }
        plan.records = config_change_records(ConfigResourceType::Broker, broker, &current, &target);
        plan
    }

    fn plan_alter_configs(
        &self,
        name: &str,
        configs: &[(String, Option<String>)],
        incremental: bool,
        validate_only: bool,
    ) -> Plan {
        let fail = |e: ResponseError, msg: String| refused(name, e, msg);
        let Some(topic) = self.topics.get(name) else {
            return fail(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic {name} does not exist"),
            );
        };
        if let Some((key, _)) = configs.iter().find(|(k, _)| is_mirror_config(k)) {
            return fail(ResponseError::InvalidConfig, mirror_config_message(key));
        }
        let mut target: BTreeMap<String, String> = if incremental {
            topic.configs.clone()
        } else {
            // AlterConfigs replaces the explicit set; mirror configs are not the client's.
            topic
                .configs
                .iter()
                .filter(|(k, _)| is_mirror_config(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let mut scratch = self.settings.default_log_config.clone();
        for (key, value) in configs {
            match value {
                Some(v) => {
                    if let Err(m) = apply_topic_config(&mut scratch, key, v) {
                        return fail(ResponseError::InvalidConfig, m);
                    }
                    target.insert(key.clone(), v.clone());
                }
                None => {
                    if !incremental {
                        // AlterConfigs with a null value: the key is simply not in the new set.
                        continue;
                    }
                    if dataplane::kafka_configs::topic_config(key).is_none()
                        && !dataplane::kafka_configs::REMOVED_TOPIC_CONFIGS.contains(&key.as_str())
                        && key != dataplane::fetcher::SUPPORT_UNCLEAN_ELECTION_CONFIG
                    {
                        return fail(
                            ResponseError::InvalidConfig,
                            format!("Unknown topic config name: {key}"),
                        );
                    }
                    target.remove(key);
                }
            }
        }
        let mut plan = Plan::answer(AdminResponse::Results(vec![AdminResult::ok(name)]));
        if validate_only {
            return plan;
        }
        plan.records =
            config_change_records(ConfigResourceType::Topic, name, &topic.configs, &target);
        if plan.records.is_empty() {
            return plan;
        }
        plan
    }

    /// Raises partition leader epochs to at least `min + 1` (reference §2.10): a no-op
    /// where the epoch is already greater than `min`.
    fn partition_of(&self, tp: &TopicPartition) -> Option<(&Arc<TopicImage>, &PartitionImage)> {
        let t = self.topics.get(&tp.topic)?;
        let p = t.partitions.get(usize::try_from(tp.partition).ok()?)?;
        Some((t, p))
    }

    /// A plan with one answer per partition of `items`: `change` returns the partition's
    /// new state (a Partition record), `None` for nothing to change, or the error it is
    /// answered with; an unknown partition is UNKNOWN_TOPIC_OR_PARTITION.
    fn plan_partitions<'a, T: 'a>(
        &self,
        items: impl ExactSizeIterator<Item = (&'a TopicPartition, T)>,
        change: impl Fn(
            &TopicPartition,
            &PartitionImage,
            T,
        ) -> Result<Option<PartitionImage>, (ResponseError, String)>,
    ) -> Plan {
        let mut plan = Plan::answer(AdminResponse::Results(Vec::new()));
        let mut results = Vec::with_capacity(items.len());
        for (tp, item) in items {
            let outcome = match self.partition_of(tp) {
                None => Err((
                    ResponseError::UnknownTopicOrPartition,
                    format!("Partition {tp} does not exist"),
                )),
                Some((topic, p)) => change(tp, p, item).map(|next| {
                    if let Some(next) = next {
                        plan.records
                            .push(MetadataRecord::Partition(partition_record(topic.id, &next)));
                    }
                }),
            };
            results.push(match outcome {
                Ok(()) => AdminResult::ok(tp.to_string()),
                Err((e, m)) => AdminResult::err(tp.to_string(), err_code(e), m),
            });
        }
        plan.response = AdminResponse::Results(results);
        plan
    }

    fn plan_reassignments(&self, partitions: &[(TopicPartition, Option<Vec<i32>>)]) -> Plan {
        let items = partitions
            .iter()
            .map(|(tp, target)| (tp, target.as_deref()));
        self.plan_partitions(items, |tp, p, target| {
            let ongoing = !p.adding.is_empty() || !p.removing.is_empty();
            match target {
                Some(target) => {
                    let distinct: BTreeSet<i32> = target.iter().copied().collect();
                    if target.is_empty() || distinct.len() != target.len() {
                        return Err((
                            ResponseError::InvalidReplicaAssignment,
                            format!("The target replicas {target:?} of {tp} are empty or repeat a broker"),
                        ));
                    }
                    self.check_assignments(&[target.to_vec()])
                        .map_err(|m| (ResponseError::InvalidReplicaAssignment, m))?;
                    if !ongoing && p.replicas == target {
                        return Ok(None);
                    }
                }
                None if !ongoing => {
                    return Err((
                        ResponseError::NoReassignmentInProgress,
                        format!("No reassignment of {tp} is in progress"),
                    ))
                }
                None => {}
            }
            let next = reassign(p, target);
            Ok(Some(elect(&next, |b| self.is_live(b), false).unwrap_or(next)))
        })
    }

    fn plan_elect_leaders(&self, preferred: bool, partitions: &[TopicPartition]) -> Plan {
        self.plan_partitions(partitions.iter().map(|tp| (tp, ())), |tp, p, ()| {
            let candidate = if preferred {
                let first = p.replicas.first().copied().unwrap_or(-1);
                if p.leader == first {
                    return Err((
                        ResponseError::ElectionNotNeeded,
                        format!("{tp} is led by its preferred replica {first}"),
                    ));
                }
                (self.is_live(first) && p.isr.contains(&first)).then_some(first)
            } else {
                if p.leader >= 0 && self.is_live(p.leader) {
                    return Err((
                        ResponseError::ElectionNotNeeded,
                        format!("{tp} has a live leader"),
                    ));
                }
                p.replicas
                    .iter()
                    .copied()
                    .find(|r| self.is_live(*r) && p.isr.contains(r))
                    .or_else(|| p.replicas.iter().copied().find(|r| self.is_live(*r)))
            };
            match candidate {
                Some(leader) => Ok(Some(led_by(p, leader))),
                None if preferred => Err((
                    ResponseError::PreferredLeaderNotAvailable,
                    format!("The preferred replica of {tp} is not live and in sync"),
                )),
                None => Err((
                    ResponseError::EligibleLeadersNotAvailable,
                    format!("No replica of {tp} is live"),
                )),
            }
        })
    }

    /// Kafka's auto leader rebalance: preferred-leader elections for every broker whose
    /// share of partitions it prefers but does not lead is above `imbalance` (0..1), for
    /// those partitions whose preferred replica is live and in sync.
    pub fn rebalance_records(&self, imbalance: f64) -> Vec<MetadataRecord> {
        let mut preferred: BTreeMap<i32, (usize, usize)> = BTreeMap::new();
        for t in self.topics.values() {
            for p in &t.partitions {
                if let Some(first) = p.replicas.first() {
                    let e = preferred.entry(*first).or_default();
                    e.0 += 1;
                    if p.leader != *first {
                        e.1 += 1;
                    }
                }
            }
        }
        let mut out = Vec::new();
        for t in self.topics.values() {
            for p in &t.partitions {
                let Some(first) = p.replicas.first().copied() else {
                    continue;
                };
                let (total, off) = preferred.get(&first).copied().unwrap_or((1, 0));
                if p.leader == first
                    || (off as f64) / (total.max(1) as f64) <= imbalance
                    || !self.is_live(first)
                    || !p.isr.contains(&first)
                {
                    continue;
                }
                out.push(MetadataRecord::Partition(partition_record(
                    t.id,
                    &led_by(p, first),
                )));
            }
        }
        out
    }

    fn plan_bump_leader_epochs(&self, partitions: &[(TopicPartition, i32)]) -> Plan {
        let mut plan = Plan::answer(AdminResponse::Results(Vec::new()));
        let mut results = Vec::with_capacity(partitions.len());
        let mut bumped: HashMap<&TopicPartition, i32> = HashMap::new();
        for (tp, min) in partitions {
            let label = tp.to_string();
            let Some((topic, p)) = self.topics.get(&tp.topic).and_then(|t| {
                usize::try_from(tp.partition)
                    .ok()
                    .and_then(|i| t.partitions.get(i))
                    .map(|p| (t, p))
            }) else {
                results.push(AdminResult::err(
                    label,
                    err_code(ResponseError::UnknownTopicOrPartition),
                    format!("Partition {tp} does not exist"),
                ));
                continue;
            };
            let current = bumped.get(tp).copied().unwrap_or(p.leader_epoch);
            if current <= *min {
                let epoch = min.saturating_add(1);
                bumped.insert(tp, epoch);
                let mut next = p.clone();
                next.leader_epoch = epoch;
                next.partition_epoch += 1;
                plan.records
                    .push(MetadataRecord::Partition(partition_record(topic.id, &next)));
            }
            results.push(AdminResult::ok(label));
        }
        plan.response = AdminResponse::Results(results);
        plan
    }

    /// AlterUserScramCredentials: per user, every deletion must name a credential that
    /// exists (else RESOURCE_NOT_FOUND and nothing of that user changes).
    fn plan_alter_scram(
        &self,
        deletions: &[(String, ScramMechanism)],
        upsertions: &[(String, ScramMechanism, ScramCredential)],
    ) -> Plan {
        let mut users: Vec<&str> = Vec::new();
        for user in deletions
            .iter()
            .map(|(u, _)| u.as_str())
            .chain(upsertions.iter().map(|(u, _, _)| u.as_str()))
        {
            if !users.contains(&user) {
                users.push(user);
            }
        }
        let mut records = Vec::new();
        let mut results = Vec::new();
        for user in users {
            let missing = deletions
                .iter()
                .filter(|(u, _)| u == user)
                .find(|(u, m)| !self.scram.contains_key(&(u.clone(), *m)));
            if missing.is_some() {
                results.push(AdminResult::err(
                    user,
                    err_code(ResponseError::ResourceNotFound),
                    "Attempt to delete a user credential that does not exist",
                ));
                continue;
            }
            records.extend(deletions.iter().filter(|(u, _)| u == user).map(|(u, m)| {
                MetadataRecord::ScramCredential {
                    user: u.clone(),
                    mechanism: *m,
                    credential: None,
                }
            }));
            records.extend(
                upsertions
                    .iter()
                    .filter(|(u, _, _)| u == user)
                    .map(|(u, m, c)| MetadataRecord::ScramCredential {
                        user: u.clone(),
                        mechanism: *m,
                        credential: Some(c.clone()),
                    }),
            );
            results.push(AdminResult::ok(user));
        }
        Plan {
            records,
            response: AdminResponse::Results(results),
        }
    }

    /// CreateAcls: a new id for each ACL not already present (and not repeated in the
    /// request).
    fn plan_create_acls(
        &self,
        bindings: &[dataplane::acl::AclBinding],
        new_id: &mut dyn FnMut() -> uuid::Uuid,
    ) -> Plan {
        let mut records = Vec::new();
        for (i, b) in bindings.iter().enumerate() {
            if !self.acls.contains(b) && !bindings[..i].contains(b) {
                records.push(MetadataRecord::Acl {
                    id: new_id(),
                    binding: Some(b.clone()),
                    origin: None,
                });
            }
        }
        let results = bindings.iter().map(|_| AdminResult::ok("")).collect();
        Plan {
            records,
            response: AdminResponse::Results(results),
        }
    }

    /// DeleteAcls: every ACL a filter matches goes (once, whichever filters match it).
    fn plan_delete_acls(&self, filters: &[dataplane::acl::AclFilter]) -> Plan {
        let mut gone = std::collections::BTreeSet::new();
        let mut deleted = Vec::new();
        for filter in filters {
            let matched: Vec<_> = self.acls.matching(filter).collect();
            gone.extend(matched.iter().map(|(id, _)| **id));
            deleted.push(matched.into_iter().map(|(_, b)| b.clone()).collect());
        }
        Plan {
            records: gone
                .into_iter()
                .map(|id| MetadataRecord::Acl {
                    id,
                    binding: None,
                    origin: None,
                })
                .collect(),
            response: AdminResponse::DeletedAcls(deleted),
        }
    }

    fn plan_producer_ids(&self, count: i64) -> Plan {
        if !(1..=PRODUCER_ID_BLOCK_MAX).contains(&count) {
            return Plan::answer(AdminResponse::Failed {
                error_code: err_code(ResponseError::InvalidRequest),
                message: format!(
                    "producer id block size must be in 1..={PRODUCER_ID_BLOCK_MAX}, got {count}"
                ),
            });
        }
        let first = self.next_producer_id;
        let Some(next_block_start) = first.checked_add(count) else {
            return Plan::answer(AdminResponse::Failed {
                error_code: err_code(ResponseError::UnknownServerError),
                message: "producer ids are exhausted".to_string(),
            });
        };
        Plan {
            records: vec![MetadataRecord::ProducerIds { next_block_start }],
            response: AdminResponse::ProducerIds { first, count },
        }
    }
}

/// A new topic that passed validation: partition count, explicit configs, replica lists.
type ValidTopic = (i32, BTreeMap<String, String>, Vec<Vec<i32>>);

/// A partition's record as it stands in the image.
pub(crate) fn partition_record(topic_id: uuid::Uuid, p: &PartitionImage) -> PartitionRecord {
    PartitionRecord {
        topic_id,
        partition: p.partition,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        adding: p.adding.clone(),
        removing: p.removing.clone(),
    }
}

/// `p` led by `leader` at the next leader epoch (in the ISR alone if it was not in it:
/// an unclean election).
fn led_by(p: &PartitionImage, leader: i32) -> PartitionImage {
    let mut next = p.clone();
    next.leader = leader;
    next.leader_epoch += 1;
    next.partition_epoch += 1;
    if !next.isr.contains(&leader) {
        next.isr = vec![leader];
    }
    next
}

/// A new partition on `replicas`: the first leads, all are in sync, epochs 0.
pub(crate) fn new_partition(
    topic_id: uuid::Uuid,
    partition: i32,
    replicas: Vec<i32>,
) -> PartitionRecord {
    PartitionRecord {
        topic_id,
        partition,
        leader: replicas.first().copied().unwrap_or(-1),
        leader_epoch: 0,
        partition_epoch: 0,
        isr: replicas.clone(),
        replicas,
        adding: Vec::new(),
        removing: Vec::new(),
    }
}

/// Kafka's replica placement (`assignReplicasToBrokers`): brokers ordered alternating by
/// rack, partition `p`'s first replica at `(start + p) mod n` and the others after it at
/// a shift that grows every `n` partitions, so leaders and followers spread evenly and,
/// with racks, a partition's replicas land on different racks where they can. `start`
/// comes from the topic name, so a plan is the same wherever it is made.
pub fn assign_replicas(
    brokers: &[(i32, Option<String>)],
    topic: &str,
    first: i32,
    count: i32,
    factor: usize,
) -> Vec<Vec<i32>> {
    let ordered = rack_alternated(brokers);
    let n = ordered.len();
    if n == 0 {
        return Vec::new();
    }
    let rack_of = |b: i32| {
        brokers
            .iter()
            .find(|(id, _)| *id == b)
            .and_then(|(_, r)| r.as_deref())
            .unwrap_or("")
    };
    let rack_count = brokers
        .iter()
        .map(|(_, r)| r.as_deref().unwrap_or(""))
        .collect::<BTreeSet<_>>()
        .len();
    let seed = default_shard(topic, 0, usize::MAX);
    let start = seed % n;
    let mut shift = (seed / n) % n.max(1);
    let mut out = Vec::new();
    for p in first..first.saturating_add(count) {
        let p = usize::try_from(p).unwrap_or(0);
        if p > 0 && p % n == 0 {
            shift += 1;
        }
        let lead = (p + start) % n;
        let mut replicas = vec![ordered[lead]];
        let mut racks: BTreeSet<&str> = BTreeSet::from([rack_of(ordered[lead])]);
        for j in 0..factor.saturating_sub(1).min(n - 1) {
            let step = 1 + (shift + j) % (n - 1).max(1);
            // From the shifted position on: the first broker not chosen yet, on a rack
            // not used yet while one is left.
            let candidates = (0..n).map(|k| ordered[(lead + step + k) % n]);
            let fresh_rack = racks.len() < rack_count;
            let pick = candidates
                .clone()
                .find(|b| !replicas.contains(b) && (!fresh_rack || !racks.contains(rack_of(*b))))
                .or_else(|| candidates.clone().find(|b| !replicas.contains(b)));
            if let Some(b) = pick {
                racks.insert(rack_of(b));
                replicas.push(b);
            }
        }
        out.push(replicas);
    }
    out
}

/// Brokers in node-id order, interleaved by rack (r1 b0, r2 b1, r1 b2, ...): Kafka's
/// `getRackAlternatedBrokerList`. Without racks, node-id order.
fn rack_alternated(brokers: &[(i32, Option<String>)]) -> Vec<i32> {
    let mut by_rack: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (id, rack) in brokers {
        by_rack
            .entry(rack.as_deref().unwrap_or(""))
            .or_default()
            .push(*id);
    }
    if by_rack.len() <= 1 {
        let mut all: Vec<i32> = brokers.iter().map(|(id, _)| *id).collect();
        all.sort_unstable();
        return all;
    }
    let mut lists: Vec<std::collections::VecDeque<i32>> = by_rack
        .into_values()
        .map(|mut v| {
            v.sort_unstable();
            v.into()
        })
        .collect();
    let mut out = Vec::with_capacity(brokers.len());
    while out.len() < brokers.len() {
        for l in &mut lists {
            if let Some(id) = l.pop_front() {
                out.push(id);
            }
        }
    }
    out
}

/// The partition after a leader election and ISR clean-up (see
/// [`ControllerState::election_records`]), with a reassignment completed once every
/// target replica is in sync; `None`: it stays as it is.
pub fn elect(
    p: &PartitionImage,
    live: impl Fn(i32) -> bool,
    unclean: bool,
) -> Option<PartitionImage> {
    let mut base = p.clone();
    let mut reassigned = false;
    if !p.adding.is_empty() || !p.removing.is_empty() {
        let target: Vec<i32> = p
            .replicas
            .iter()
            .copied()
            .filter(|r| !p.removing.contains(r))
            .collect();
        if target.iter().all(|r| p.isr.contains(r)) {
            // Kafka's reassignment completion: the target is the replica set, the
            // removed replicas leave the ISR (and their leader leaves too, below).
            base.replicas = target.clone();
            base.isr.retain(|r| target.contains(r));
            base.adding.clear();
            base.removing.clear();
            reassigned = true;
        }
    }
    let p = &base;
    let mut isr: Vec<i32> = p.isr.iter().copied().filter(|r| live(*r)).collect();
    let leader_ok = p.leader >= 0
        && live(p.leader)
        && isr.contains(&p.leader)
        && p.replicas.contains(&p.leader);
    let leader = if leader_ok {
        p.leader
    } else if let Some(r) = p.replicas.iter().copied().find(|r| isr.contains(r)) {
        r
    } else if let Some(r) = p.replicas.iter().copied().find(|r| unclean && live(*r)) {
        // Unclean: a replica out of the ISR leads, and is the ISR.
        isr = vec![r];
        r
    } else {
        -1
    };
    if isr.is_empty() {
        // Nobody in sync is live: keep the last member, the one that can lead cleanly.
        isr = if p.leader >= 0 && p.replicas.contains(&p.leader) {
            vec![p.leader]
        } else {
            p.isr.clone()
        };
    }
    if leader == p.leader && isr == p.isr && !reassigned {
        return None;
    }
    let mut next = p.clone();
    if leader != p.leader {
        next.leader_epoch += 1;
    }
    next.leader = leader;
    next.isr = isr;
    next.partition_epoch += 1;
    Some(next)
}

/// A partition moved to `target` replicas (Kafka's AlterPartitionReassignments): the
/// replica set becomes the target followed by the current replicas not in it, the new
/// ones are `adding` until they are in sync, the others `removing`; a reassignment in
/// progress is replaced, starting from its original replicas. `None` for `target`
/// cancels one in progress (back to the original replicas).
pub fn reassign(p: &PartitionImage, target: Option<&[i32]>) -> PartitionImage {
    let original: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !p.adding.contains(r))
        .collect();
    let mut next = p.clone();
    next.partition_epoch += 1;
    match target {
        None => {
            next.replicas = original;
            next.adding.clear();
            next.removing.clear();
        }
        Some(target) => {
            let mut replicas = target.to_vec();
            replicas.extend(original.iter().copied().filter(|r| !target.contains(r)));
            next.adding = target
                .iter()
                .copied()
                .filter(|r| !original.contains(r))
                .collect();
            next.removing = original
                .iter()
                .copied()
                .filter(|r| !target.contains(r))
                .collect();
            next.replicas = if next.adding.is_empty() && next.removing.is_empty() {
                target.to_vec()
            } else {
                replicas
            };
        }
    }
    next.isr.retain(|r| next.replicas.contains(r));
    next
}

fn mirror_config_message(key: &str) -> String {
    format!("{key} can only be changed by the mirror RPCs")
}

/// Names that occur more than once.
fn duplicates<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut dups = BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            dups.insert(n);
        }
    }
    dups
}

#[cfg(test)]
mod tests;
