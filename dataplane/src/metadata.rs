//! The metadata image the data plane follows. The control plane builds a new immutable
//! [`MetadataImage`] for every committed change and publishes it through a
//! [`MetadataCell`]; shards only ever read whole images, never control-plane internals.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use crate::log::LogConfig;
use crate::types::TopicPartition;

/// One partition as the controller placed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionImage {
    pub partition: i32,
    /// Node id of the leader, -1 while no replica can lead.
    pub leader: i32,
    pub leader_epoch: i32,
    /// Moves with every change of leader, ISR or replicas.
    pub partition_epoch: i32,
    /// The nodes that hold a replica, the preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// A reassignment in progress: the replicas being added and being removed (both
    /// among `replicas`; empty otherwise).
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
    /// The data-plane shard of this node that owns the partition (placed by each node
    /// for itself, never replicated).
    pub shard: usize,
}

impl PartitionImage {
    /// A partition whose only replica is `leader`.
    pub fn single(partition: i32, leader: i32, leader_epoch: i32, shard: usize) -> Self {
        PartitionImage {
            partition,
            leader,
            leader_epoch,
            partition_epoch: 0,
            replicas: vec![leader],
            isr: vec![leader],
            adding: Vec::new(),
            removing: Vec::new(),
            shard,
        }
    }

    /// Who leads and who follows, as the owning shard's `Partition` takes it.
    pub fn leadership(&self) -> crate::partition::Leadership {
        crate::partition::Leadership {
            leader: self.leader,
            leader_epoch: crate::types::LeaderEpoch(self.leader_epoch),
            partition_epoch: self.partition_epoch,
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
        }
    }
}

/// One topic: id, partitions, configs (explicitly set ones) and the effective log config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: uuid::Uuid,
    pub partitions: Vec<PartitionImage>,
    /// Topic configs set explicitly (DescribeConfigs reports the rest as defaults).
    pub configs: BTreeMap<String, String>,
    /// Broker defaults with the topic's configs applied.
    pub log_config: LogConfig,
    pub internal: bool,
}

/// An immutable view of the cluster's metadata at one point of the metadata log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataImage {
    pub cluster_id: String,
    pub node_id: i32,
    /// The address clients are told to connect to.
    pub advertised: SocketAddr,
    /// Offset of the last metadata record applied.
    pub offset: u64,
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    pub topics_by_id: HashMap<uuid::Uuid, String>,
    /// Mirrors by name (a mirror exists exactly while it has configs).
    pub mirrors: BTreeMap<String, Arc<MirrorImage>>,
    /// Dynamic broker configs (IncrementalAlterConfigs / AlterConfigs on BROKER): by
    /// resource name, "" for the cluster-wide default, else a node id.
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Registered brokers by node id and the address clients reach them at (empty: this
    /// node alone).
    pub brokers: BTreeMap<i32, SocketAddr>,
    /// Registered brokers that are fenced or shutting down: listed by no Metadata answer.
    pub fenced: std::collections::BTreeSet<i32>,
    /// `broker.rack` of the registered brokers that have one.
    pub racks: BTreeMap<i32, String>,
    /// The client listeners of the brokers (this node's from its config, the others'
    /// as registered) by name, and what each advertises. A broker with none listed
    /// serves every listener at its `brokers` address.
    pub listeners: BTreeMap<i32, BTreeMap<String, SocketAddr>>,
    /// SCRAM credentials by user and mechanism (AlterUserScramCredentials).
    pub scram: Arc<
        BTreeMap<(String, crate::net::scram::ScramMechanism), crate::net::scram::ScramCredential>,
    >,
    /// The cluster's ACLs (CreateAcls), shared between images until they change.
    pub acls: Arc<crate::acl::AclSet>,
    /// The active controller's node id (this node when alone).
    pub controller_id: i32,
}

/// One mirror: its configs as stored (MIRROR config resources, type 64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorImage {
    pub name: String,
    pub configs: BTreeMap<String, String>,
}

impl MirrorImage {
    /// `bootstrap.servers` of the source cluster.
    pub fn bootstrap_servers(&self) -> &str {
        self.configs
            .get("bootstrap.servers")
            .map_or("", String::as_str)
    }

    /// The source cluster id recorded at CreateMirror ("" = unknown).
    pub fn source_cluster_id(&self) -> &str {
        self.configs
            .get("source.cluster.id")
            .map_or("", String::as_str)
    }
}

impl TopicImage {
    /// The mirror this topic belongs to and the desired state its `mirror.name` encodes.
    pub fn mirror(&self) -> Option<(&str, crate::wire::mirror::DesiredMirrorState)> {
        self.configs
            .get(crate::wire::mirror::MIRROR_NAME_CONFIG)
            .filter(|v| !v.is_empty())
            .map(|v| crate::wire::mirror::parse_mirror_name(v))
    }
}

impl MetadataImage {
    pub fn empty(cluster_id: String, node_id: i32, advertised: SocketAddr) -> Self {
        MetadataImage {
            cluster_id,
            node_id,
            advertised,
            offset: 0,
            topics: BTreeMap::new(),
            topics_by_id: HashMap::new(),
            mirrors: BTreeMap::new(),
            broker_configs: BTreeMap::new(),
            brokers: BTreeMap::new(),
            fenced: Default::default(),
            racks: BTreeMap::new(),
            listeners: BTreeMap::new(),
            scram: Arc::default(),
            acls: Arc::default(),
            controller_id: node_id,
        }
    }

    /// The brokers Metadata lists: the registered ones that are not fenced, this node
    /// always among them.
    pub fn live_brokers(&self) -> Vec<(i32, SocketAddr)> {
        let mut all = self.brokers.clone();
        all.retain(|id, _| !self.fenced.contains(id));
        all.insert(self.node_id, self.advertised);
        all.into_iter().collect()
    }

    /// Whether `node` is registered and not fenced (this node always is).
    pub fn is_live(&self, node: i32) -> bool {
        node == self.node_id || (self.brokers.contains_key(&node) && !self.fenced.contains(&node))
    }

    /// The brokers Metadata lists to a client of `listener`, at their addresses on it
    /// (a broker without that listener is left out, as Kafka does).
    pub fn live_brokers_on(&self, listener: &str) -> Vec<(i32, SocketAddr)> {
        self.live_brokers()
            .into_iter()
            .filter_map(|(id, _)| Some((id, self.address_on(id, listener)?)))
            .collect()
    }

    /// Where a client of `listener` reaches broker `node`.
    pub fn address_on(&self, node: i32, listener: &str) -> Option<SocketAddr> {
        match self.listeners.get(&node) {
            Some(by_name) if !by_name.is_empty() => by_name.get(listener).copied(),
            _ => self.broker_address(node),
        }
    }

    /// KIP-951's endpoints of `nodes` on `listener`: (id, host, port, rack), the
    /// unknown ones left out.
    pub fn endpoints(
        &self,
        nodes: impl IntoIterator<Item = i32>,
        listener: &str,
    ) -> Vec<(i32, String, i32, Option<String>)> {
        nodes
            .into_iter()
            .filter_map(|id| {
                let addr = self.address_on(id, listener)?;
                Some((
                    id,
                    addr.ip().to_string(),
                    i32::from(addr.port()),
                    self.racks.get(&id).cloned(),
                ))
            })
            .collect()
    }

    /// Where clients reach broker `node`.
    pub fn broker_address(&self, node: i32) -> Option<SocketAddr> {
        if node == self.node_id {
            return Some(self.advertised);
        }
        self.brokers.get(&node).copied()
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: uuid::Uuid) -> Option<&Arc<TopicImage>> {
        self.topics_by_id.get(&id).and_then(|n| self.topics.get(n))
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<&PartitionImage> {
        let topic = self.topics.get(&tp.topic)?;
        usize::try_from(tp.partition)
            .ok()
            .and_then(|p| topic.partitions.get(p))
    }
}

/// Where the current image is published. Readers clone the `Arc` under a short read
/// lock (never held across an await); the controller swaps in a new image.
#[derive(Debug)]
pub struct MetadataCell {
    current: RwLock<Arc<MetadataImage>>,
    /// Signalled after every publish (the mirror manager reacts at once).
    changed: event_listener::Event,
}

impl MetadataCell {
    pub fn new(image: MetadataImage) -> Self {
        MetadataCell {
            current: RwLock::new(Arc::new(image)),
            changed: event_listener::Event::new(),
        }
    }

    pub fn load(&self) -> Arc<MetadataImage> {
        match self.current.read() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    pub fn publish(&self, image: MetadataImage) {
        let image = Arc::new(image);
        match self.current.write() {
            Ok(mut g) => *g = image,
            Err(poisoned) => *poisoned.into_inner() = image,
        }
        self.changed.notify(usize::MAX);
    }

    /// A listener that completes at the next publish. Take it before reading the image
    /// so a publish in between is not missed.
    pub fn listen(&self) -> event_listener::EventListener {
        self.changed.listen()
    }
}

/// A mirror config's comma-separated regex list (`topics.include`, `groups.exclude`,
/// ...) as one anchored pattern, `^(?:(?:p1)|(?:p2)|...)$`; `None` for an empty list
/// (matches nothing).
pub fn pattern_list(list: &str) -> Result<Option<regex::Regex>, regex::Error> {
    let parts: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| format!("(?:{p})"))
        .collect();
    if parts.is_empty() {
        return Ok(None);
    }
    regex::Regex::new(&format!("^(?:{})$", parts.join("|"))).map(Some)
}

/// Default placement of a partition on a shard: FNV-1a over topic and partition, stable
/// across restarts and processes. The controller records the result in the image.
pub fn default_shard(topic: &str, partition: i32, shards: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in topic.bytes().chain(partition.to_be_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % shards.max(1) as u64) as usize
}
