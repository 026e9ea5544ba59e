//! A source cluster as the mirror fetcher and mirror manager see it: bootstrap servers,
//! the last Metadata answer, one pooled connection per broker.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{join_host_port, split_host_port, ClientError, ConnectionConfig, KafkaConnection};

/// Metadata API key.
const METADATA_KEY: i16 = 3;
/// Highest Metadata version this client speaks (v13 only adds a top-level error code).
pub const METADATA_VERSION_MAX: i16 = 12;

/// One partition in a Metadata answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub partition: i32,
    /// Broker id of the leader, -1 when there is none.
    pub leader: i32,
    /// -1 before Metadata v7.
    pub leader_epoch: i32,
    pub error_code: i16,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// One topic in a Metadata answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Nil before Metadata v10 (no topic ids).
    pub id: Uuid,
    pub error_code: i16,
    /// By partition index.
    pub partitions: Vec<PartitionMetadata>,
}

/// What a Metadata answer says about the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// `None` before Metadata v2.
    pub cluster_id: Option<String>,
    /// -1 before Metadata v1 or when the broker names none.
    pub controller_id: i32,
    /// Broker id to `host:port` (IPv6 hosts in brackets).
    pub brokers: BTreeMap<i32, String>,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicMetadata>,
}

impl ClusterMetadata {
    /// Reads a decoded Metadata response. Topics without a name (only possible when they
    /// were asked for by id) are left out.
    pub fn from_response(resp: &MetadataResponse) -> ClusterMetadata {
        let brokers = resp
            .brokers
            .iter()
            .map(|b| (b.node_id.0, join_host_port(&b.host, b.port)))
            .collect();
        let topics = resp
            .topics
            .iter()
            .filter_map(|t| {
                let name = t.name.as_ref()?.0.to_string();
                let mut partitions: Vec<PartitionMetadata> = t
                    .partitions
                    .iter()
                    .map(|p| PartitionMetadata {
                        partition: p.partition_index,
                        leader: p.leader_id.0,
                        leader_epoch: p.leader_epoch,
                        error_code: p.error_code,
                        replicas: p.replica_nodes.iter().map(|r| r.0).collect(),
                        isr: p.isr_nodes.iter().map(|r| r.0).collect(),
                    })
                    .collect();
                partitions.sort_by_key(|p| p.partition);
                Some((
                    name,
                    TopicMetadata {
                        id: t.topic_id,
                        error_code: t.error_code,
                        partitions,
                    },
                ))
            })
            .collect();
        ClusterMetadata {
            cluster_id: resp.cluster_id.as_ref().map(|c| c.to_string()),
            controller_id: resp.controller_id.0,
            brokers,
            topics,
        }
    }

    /// The leader of `topic`/`partition`, `None` when unknown or leaderless.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.topics
            .get(topic)?
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .map(|p| p.leader)
            .filter(|l| *l >= 0)
    }
}

/// A Metadata request at `version` for `topics` (`None`: every topic). Never asks the
/// broker to create topics (where the version can say so: v4+).
pub fn metadata_request(topics: Option<&[String]>, version: i16) -> MetadataRequest {
    let topics = match topics {
        Some(names) => Some(
            names
                .iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
                })
                .collect(),
        ),
        // v0 has no null array: an empty one means every topic.
        None if version == 0 => Some(Vec::new()),
        None => None,
    };
    MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(version < 4)
}

/// Sends Metadata at the highest version both sides speak (at most
/// [`METADATA_VERSION_MAX`]).
async fn fetch_metadata(
    conn: &mut KafkaConnection,
    topics: Option<&[String]>,
) -> Result<ClusterMetadata, ClientError> {
    let version = conn
        .pick_version(METADATA_KEY, 0, METADATA_VERSION_MAX)
        .ok_or(ClientError::Unsupported {
            api_key: METADATA_KEY,
            version: METADATA_VERSION_MAX,
            broker_range: conn.api_range(METADATA_KEY),
        })?;
    let resp = conn
        .send(&metadata_request(topics, version), version)
        .await?;
    if resp.error_code != 0 {
        return Err(ClientError::ErrorCode {
            api_key: METADATA_KEY,
            error_code: resp.error_code,
        });
    }
    Ok(ClusterMetadata::from_response(&resp))
}

/// Which pooled connection an internal lookup found.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Broker(i32),
    Bootstrap,
}

/// A source cluster known by its `bootstrap.servers`. Lives on one glommio executor
/// (it is `!Send`). Keeps the last Metadata answer and one connection per broker id,
/// reconnecting those that broke. Not a general client: it does not retry requests or
/// follow leaders by itself; callers refresh [`metadata`](Self::metadata) when a broker
/// answers NOT_LEADER_OR_FOLLOWER and the like.
#[derive(Debug)]
pub struct SourceCluster {
    bootstrap_servers: String,
    bootstrap: Vec<String>,
    config: ConnectionConfig,
    metadata: Option<ClusterMetadata>,
    pool: BTreeMap<i32, KafkaConnection>,
    /// A connection to a bootstrap address whose broker id is not known yet.
    bootstrap_conn: Option<KafkaConnection>,
    /// The bootstrap address tried first next time (rotates after each attempt).
    next_bootstrap: usize,
}

impl SourceCluster {
    /// A cluster reached through `bootstrap_servers` (`"h1:p1,h2:p2"`). Connects to
    /// nothing yet.
    pub fn new(bootstrap_servers: &str, config: ConnectionConfig) -> Result<Self, ClientError> {
        let bootstrap: Vec<String> = bootstrap_servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| split_host_port(s).map(|_| s.to_string()))
            .collect::<Result<_, _>>()?;
        if bootstrap.is_empty() {
            return Err(ClientError::InvalidAddress {
                addr: bootstrap_servers.to_string(),
                message: "bootstrap.servers names no address".into(),
            });
        }
        Ok(SourceCluster {
            bootstrap_servers: bootstrap_servers.to_string(),
            bootstrap,
            config,
            metadata: None,
            pool: BTreeMap::new(),
            bootstrap_conn: None,
            next_bootstrap: 0,
        })
    }

    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap_servers
    }

    pub fn config(&self) -> &ConnectionConfig {
        &self.config
    }

    /// The last Metadata answer, if any.
    pub fn last_metadata(&self) -> Option<&ClusterMetadata> {
        self.metadata.as_ref()
    }

    /// Asks for metadata of `topics` (`None`: every topic) at the highest common version
    /// up to 12, on a live connection if there is one, else on each bootstrap address in
    /// turn, then on each broker of the last metadata. Keeps the answer.
    pub async fn metadata(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<ClusterMetadata, ClientError> {
        let mut tried = BTreeSet::new();
        let mut last_error = None;
        loop {
            let slot = self.any_slot(&tried, last_error.take()).await?;
            let Some(conn) = self.slot_mut(slot) else {
                // any_slot just filled this slot; nothing in between removes it.
                unreachable!("the connection any_slot returned is gone");
            };
            tried.insert(conn.addr().to_string());
            match fetch_metadata(conn, topics).await {
                Ok(m) => {
                    self.adopt(m.clone());
                    return Ok(m);
                }
                Err(e) => {
                    tracing::debug!(
                        bootstrap = %self.bootstrap_servers,
                        error = %e,
                        "metadata request failed; trying another broker"
                    );
                    self.drop_slot(slot);
                    last_error = Some(e);
                }
            }
        }
    }

    /// The pooled connection to `broker_id`, opened (again) when there is none or it
    /// broke. The broker must be in the last metadata ([`ClientError::UnknownBroker`]
    /// otherwise).
    pub async fn connection(
        &mut self,
        broker_id: i32,
    ) -> Result<&mut KafkaConnection, ClientError> {
        if self.pool.get(&broker_id).is_some_and(|c| c.is_broken()) {
            self.pool.remove(&broker_id);
        }
        if !self.pool.contains_key(&broker_id) {
            let addr = self
                .metadata
                .as_ref()
                .and_then(|m| m.brokers.get(&broker_id))
                .cloned()
                .ok_or(ClientError::UnknownBroker { broker_id })?;
            let reuse = self
                .bootstrap_conn
                .as_ref()
                .is_some_and(|c| c.addr() == addr && !c.is_broken());
            let conn = match self.bootstrap_conn.take() {
                Some(c) if reuse => c,
                other => {
                    self.bootstrap_conn = other;
                    KafkaConnection::connect_with(&addr, &self.config).await?
                }
            };
            self.pool.insert(broker_id, conn);
        }
        self.pool
            .get_mut(&broker_id)
            .ok_or(ClientError::UnknownBroker { broker_id })
    }

    /// Any live connection, opening one (bootstrap addresses first) when there is none.
    pub async fn any_connection(&mut self) -> Result<&mut KafkaConnection, ClientError> {
        let slot = self.any_slot(&BTreeSet::new(), None).await?;
        let bootstrap = self.bootstrap_servers.clone();
        self.slot_mut(slot).ok_or(ClientError::NoBrokerReachable {
            bootstrap,
            last_error: Box::new(ClientError::Broken {
                addr: "(pooled connection vanished)".into(),
            }),
        })
    }

    /// Closes the pooled connection to `broker_id` (the next [`connection`](Self::connection)
    /// opens a new one).
    pub fn invalidate(&mut self, broker_id: i32) {
        self.pool.remove(&broker_id);
    }

    fn slot_mut(&mut self, slot: Slot) -> Option<&mut KafkaConnection> {
        match slot {
            Slot::Broker(id) => self.pool.get_mut(&id),
            Slot::Bootstrap => self.bootstrap_conn.as_mut(),
        }
    }

    fn drop_slot(&mut self, slot: Slot) {
        match slot {
            Slot::Broker(id) => {
                self.pool.remove(&id);
            }
            Slot::Bootstrap => self.bootstrap_conn = None,
        }
    }

    /// Keeps `m`; files the bootstrap connection under its broker id when its address is
    /// a broker's; closes pooled connections whose broker left or moved.
    fn adopt(&mut self, m: ClusterMetadata) {
        self.pool
            .retain(|id, c| m.brokers.get(id).is_some_and(|addr| addr == c.addr()));
        if let Some(c) = self.bootstrap_conn.take() {
            match m.brokers.iter().find(|(_, addr)| *addr == c.addr()) {
                Some((id, _)) if !self.pool.contains_key(id) && !c.is_broken() => {
                    self.pool.insert(*id, c);
                }
                Some(_) => {}
                None => self.bootstrap_conn = Some(c),
            }
        }
        self.metadata = Some(m);
    }

    /// A live connection whose address is not in `skip`, else a new one: bootstrap
    /// addresses first (rotating), then the brokers of the last metadata.
    async fn any_slot(
        &mut self,
        skip: &BTreeSet<String>,
        mut last_error: Option<ClientError>,
    ) -> Result<Slot, ClientError> {
        let live = |c: &KafkaConnection| !c.is_broken() && !skip.contains(c.addr());
        if let Some(id) = self.pool.iter().find(|(_, c)| live(c)).map(|(id, _)| *id) {
            return Ok(Slot::Broker(id));
        }
        if self.bootstrap_conn.as_ref().is_some_and(live) {
            return Ok(Slot::Bootstrap);
        }
        let n = self.bootstrap.len();
        let mut candidates: Vec<String> = (0..n)
            .map(|i| self.bootstrap[(self.next_bootstrap + i) % n].clone())
            .collect();
        if let Some(m) = &self.metadata {
            for addr in m.brokers.values() {
                if !candidates.contains(addr) {
                    candidates.push(addr.clone());
                }
            }
        }
        for addr in candidates.into_iter().filter(|a| !skip.contains(a)) {
            if self.bootstrap.contains(&addr) {
                self.next_bootstrap = (self.next_bootstrap + 1) % n;
            }
            match KafkaConnection::connect_with(&addr, &self.config).await {
                Ok(c) => {
                    let known = self
                        .metadata
                        .as_ref()
                        .and_then(|m| m.brokers.iter().find(|(_, a)| **a == addr))
                        .map(|(id, _)| *id);
                    return Ok(match known {
                        Some(id) => {
                            self.pool.insert(id, c);
                            Slot::Broker(id)
                        }
                        None => {
                            self.bootstrap_conn = Some(c);
                            Slot::Bootstrap
                        }
                    });
                }
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "cannot connect to source broker");
                    last_error = Some(e);
                }
            }
        }
        Err(ClientError::NoBrokerReachable {
            bootstrap: self.bootstrap_servers.clone(),
            last_error: Box::new(last_error.unwrap_or_else(|| ClientError::InvalidAddress {
                addr: self.bootstrap_servers.clone(),
                message: "every address was tried".into(),
            })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::conn::tests::{fake_broker, Misbehave};
    use crate::test_support::run_glommio;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use std::time::Duration;

    #[test]
    fn metadata_request_shapes() {
        let topics = vec!["a".to_string()];
        let r = metadata_request(None, 0);
        assert_eq!(r.topics, Some(vec![]));
        assert!(r.allow_auto_topic_creation);
        let r = metadata_request(None, 12);
        assert_eq!(r.topics, None);
        assert!(!r.allow_auto_topic_creation);
        let r = metadata_request(Some(&topics), 12);
        assert_eq!(r.topics.as_ref().map(Vec::len), Some(1));
        for v in 0..=METADATA_VERSION_MAX {
            for t in [None, Some(&topics[..])] {
                crate::client::codec::encode_request(&metadata_request(t, v), v, 1, "c")
                    .unwrap_or_else(|e| panic!("v{v}: {e}"));
            }
        }
    }

    #[test]
    fn metadata_from_response() {
        let id = Uuid::from_u128(42);
        let resp = MetadataResponse::default()
            .with_cluster_id(Some(StrBytes::from_static_str("c")))
            .with_controller_id(2.into())
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(2.into())
                .with_host(StrBytes::from_static_str("::1"))
                .with_port(9092)])
            .with_topics(vec![
                MetadataResponseTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                    .with_topic_id(id)
                    .with_partitions(vec![
                        MetadataResponsePartition::default()
                            .with_partition_index(1)
                            .with_leader_id((-1).into()),
                        MetadataResponsePartition::default()
                            .with_partition_index(0)
                            .with_leader_id(2.into())
                            .with_leader_epoch(5)
                            .with_replica_nodes(vec![2.into()]),
                    ]),
                MetadataResponseTopic::default().with_name(None),
            ]);
        let m = ClusterMetadata::from_response(&resp);
        assert_eq!(m.cluster_id.as_deref(), Some("c"));
        assert_eq!(m.controller_id, 2);
        assert_eq!(m.brokers.get(&2).map(String::as_str), Some("[::1]:9092"));
        assert_eq!(m.topics.len(), 1);
        let t = &m.topics["t"];
        assert_eq!(t.id, id);
        assert_eq!(t.partitions[0].partition, 0);
        assert_eq!(t.partitions[0].leader_epoch, 5);
        assert_eq!(t.partitions[0].replicas, vec![2]);
        assert_eq!(m.leader("t", 0), Some(2));
        assert_eq!(m.leader("t", 1), None);
        assert_eq!(m.leader("u", 0), None);
    }

    #[test]
    fn bad_bootstrap_strings() {
        let c = ConnectionConfig::default();
        assert!(SourceCluster::new("", c.clone()).is_err());
        assert!(SourceCluster::new(" , ", c.clone()).is_err());
        assert!(SourceCluster::new("h1:1,h2", c.clone()).is_err());
        assert!(SourceCluster::new("h1:1, h2:2 ,", c).is_ok());
    }

    fn dead_addr() -> String {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("bind")
            .to_string()
    }

    #[test]
    fn bootstrap_falls_through_dead_addresses_and_pools_by_broker() {
        let live = fake_broker(Misbehave::None);
        let bootstrap = format!("{},{live}", dead_addr());
        run_glommio(move || async move {
            let config = ConnectionConfig::new("t", Duration::from_secs(2));
            let mut cluster = SourceCluster::new(&bootstrap, config).expect("valid");
            let m = cluster.metadata(None).await.expect("metadata");
            // The fake broker is broker 1 at its own address, leader of t-0.
            assert_eq!(m.brokers.get(&1), Some(&live));
            assert_eq!(m.leader("t", 0), Some(1));
            assert_ne!(m.topics["t"].id, Uuid::nil());
            assert_eq!(cluster.last_metadata(), Some(&m));
            let c = cluster.connection(1).await.expect("broker 1");
            assert_eq!(c.addr(), live);
            assert!(matches!(
                cluster.connection(9).await,
                Err(ClientError::UnknownBroker { broker_id: 9 })
            ));
            cluster.invalidate(1);
            let c = cluster.connection(1).await.expect("reconnects");
            assert!(!c.is_broken());
            let c = cluster.any_connection().await.expect("any");
            assert_eq!(c.addr(), live);
            // Metadata again goes over the pooled connection.
            let again = cluster
                .metadata(Some(&["t".to_string()]))
                .await
                .expect("again");
            assert_eq!(again.topics.len(), 1);
        });
    }

    #[test]
    fn nothing_reachable() {
        let bootstrap = format!("{},{}", dead_addr(), dead_addr());
        run_glommio(move || async move {
            let config = ConnectionConfig::new("t", Duration::from_secs(2));
            let mut cluster = SourceCluster::new(&bootstrap, config).expect("valid");
            let err = cluster.metadata(None).await.expect_err("must fail");
            match err {
                ClientError::NoBrokerReachable { last_error, .. } => {
                    assert!(
                        matches!(*last_error, ClientError::Io { .. }),
                        "{last_error}"
                    )
                }
                other => panic!("{other}"),
            }
        });
    }
}
