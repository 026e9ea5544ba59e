//! What the workloads ask a cluster outside the load itself: topic layout, topic
//! creation, producer ids, offsets, newest record timestamps and the mirror RPCs. Runs
//! on the main thread over the project's blocking client (one pooled connection per
//! broker address), never on the load generator's executors.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dataplane::client::{metadata_request, BlockingConnection, ClientError, ClusterMetadata};
use dataplane::wire::mirror::{MirrorRequest, MirrorResponse};
use dataplane::wire::BatchIter;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, FetchRequest, InitProducerIdRequest, ListOffsetsRequest,
    TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::util::error_name;

/// How long to wait for a TCP connection and for each response.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a new topic may take to get a leader for every partition.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Kafka's error codes the admin calls look at.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const TOPIC_ALREADY_EXISTS: i16 = 36;
/// ListOffsets timestamps.
pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{addr}: {source}")]
    Client {
        addr: String,
        #[source]
        source: ClientError,
    },
    #[error("{what}: {}", error_name(*.code))]
    Kafka { what: String, code: i16 },
    #[error("{0}")]
    Other(String),
}

/// Partition -> leader address of one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicLayout {
    pub topic: String,
    /// By partition index.
    pub leaders: BTreeMap<i32, String>,
}

impl TopicLayout {
    pub fn partition_count(&self) -> i32 {
        self.leaders.len() as i32
    }
}

/// The admin side of one cluster.
#[derive(Debug)]
pub struct Admin {
    bootstrap: Vec<String>,
    client_id: String,
    pool: BTreeMap<String, BlockingConnection>,
    metadata: Option<ClusterMetadata>,
}

impl Admin {
    /// Knows the cluster by `bootstrap` (`host:port[,host:port...]`); connects lazily.
    pub fn new(bootstrap: &str, client_id: &str) -> Result<Admin, AdminError> {
        let bootstrap: Vec<String> = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if bootstrap.is_empty() {
            return Err(AdminError::Other("empty --bootstrap-server".into()));
        }
        Ok(Admin {
            bootstrap,
            client_id: client_id.to_string(),
            pool: BTreeMap::new(),
            metadata: None,
        })
    }

    /// The pooled connection to `addr`, opened (again) when missing or broken.
    fn conn(&mut self, addr: &str) -> Result<&mut BlockingConnection, AdminError> {
        if self
            .pool
            .get(addr)
            .is_some_and(BlockingConnection::is_broken)
        {
            self.pool.remove(addr);
        }
        if !self.pool.contains_key(addr) {
            let c = BlockingConnection::connect(addr, &self.client_id, ADMIN_TIMEOUT).map_err(
                |source| AdminError::Client {
                    addr: addr.to_string(),
                    source,
                },
            )?;
            self.pool.insert(addr.to_string(), c);
        }
        self.pool
            .get_mut(addr)
            .ok_or_else(|| AdminError::Other(format!("no connection to {addr}")))
    }

    /// Sends `req` to `addr` at the highest version both sides speak in `ours`.
    fn send<R: Request>(
        &mut self,
        addr: &str,
        req: &R,
        ours: (i16, i16),
    ) -> Result<R::Response, AdminError> {
        let conn = self.conn(addr)?;
        let version =
            conn.pick_version(R::KEY, ours.0, ours.1)
                .ok_or_else(|| AdminError::Client {
                    addr: addr.to_string(),
                    source: ClientError::Unsupported {
                        api_key: R::KEY,
                        version: ours.1,
                        broker_range: conn.api_range(R::KEY),
                    },
                })?;
        conn.send(req, version)
            .map_err(|source| AdminError::Client {
                addr: addr.to_string(),
                source,
            })
    }

    /// Any reachable bootstrap address.
    fn any_addr(&mut self) -> Result<String, AdminError> {
        let mut last = None;
        for addr in self.bootstrap.clone() {
            match self.conn(&addr) {
                Ok(_) => return Ok(addr),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| AdminError::Other("no bootstrap address".into())))
    }

    /// The topic's partitions and their leaders, `None` when the topic does not exist.
    pub fn topic_layout(&mut self, topic: &str) -> Result<Option<TopicLayout>, AdminError> {
        let addr = self.any_addr()?;
        let conn = self.conn(&addr)?;
        let version = conn.pick_version(3, 1, 12).unwrap_or(1);
        let names = [topic.to_string()];
        let resp = conn
            .send(&metadata_request(Some(&names), version), version)
            .map_err(|source| AdminError::Client {
                addr: addr.clone(),
                source,
            })?;
        let meta = ClusterMetadata::from_response(&resp);
        let Some(t) = meta.topics.get(topic) else {
            return Ok(None);
        };
        if t.error_code == UNKNOWN_TOPIC_OR_PARTITION {
            return Ok(None);
        }
        if t.error_code != 0 {
            return Err(AdminError::Kafka {
                what: format!("metadata of {topic}"),
                code: t.error_code,
            });
        }
        let mut leaders = BTreeMap::new();
        for p in &t.partitions {
            let leader = (p.leader >= 0)
                .then(|| meta.brokers.get(&p.leader))
                .flatten()
                .ok_or_else(|| {
                    AdminError::Other(format!("{topic}-{} has no leader yet", p.partition))
                })?;
            leaders.insert(p.partition, leader.clone());
        }
        self.metadata = Some(meta);
        Ok(Some(TopicLayout {
            topic: topic.to_string(),
            leaders,
        }))
    }

    /// Creates `topic` with `partitions` partitions (an existing topic is fine).
    pub fn create_topic(&mut self, topic: &str, partitions: i32) -> Result<(), AdminError> {
        let addr = self.any_addr()?;
        let req = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)])
            .with_timeout_ms(30_000);
        let resp = self.send(&addr, &req, (2, 7))?;
        for t in &resp.topics {
            if t.error_code != 0 && t.error_code != TOPIC_ALREADY_EXISTS {
                return Err(AdminError::Kafka {
                    what: format!(
                        "create topic {topic}{}",
                        t.error_message
                            .as_ref()
                            .map(|m| format!(" ({m})"))
                            .unwrap_or_default()
                    ),
                    code: t.error_code,
                });
            }
        }
        Ok(())
    }

    /// The layout of `topic`, created with `create_partitions` partitions first when it
    /// does not exist (and `create_partitions` is given). Waits until every partition has
    /// a leader.
    pub fn ensure_topic(
        &mut self,
        topic: &str,
        create_partitions: Option<i32>,
    ) -> Result<TopicLayout, AdminError> {
        let start = Instant::now();
        let mut created = false;
        loop {
            let last = match self.topic_layout(topic) {
                Ok(Some(layout)) if !layout.leaders.is_empty() => return Ok(layout),
                Ok(_) => match create_partitions {
                    Some(n) if !created => {
                        eprintln!("twinlog-perf: creating topic {topic} with {n} partitions");
                        self.create_topic(topic, n)?;
                        created = true;
                        continue;
                    }
                    Some(_) => AdminError::Other(format!("topic {topic} has no partitions yet")),
                    None => {
                        return Err(AdminError::Other(format!(
                            "topic {topic} does not exist (--create-partitions N creates it)"
                        )))
                    }
                },
                Err(e) => e,
            };
            if start.elapsed() > TOPIC_READY_TIMEOUT {
                return Err(last);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// InitProducerId for an idempotent (not transactional) producer: (id, epoch).
    pub fn init_producer_id(&mut self) -> Result<(i64, i16), AdminError> {
        let addr = self.any_addr()?;
        let req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1);
        let resp = self.send(&addr, &req, (0, 5))?;
        if resp.error_code != 0 {
            return Err(AdminError::Kafka {
                what: "InitProducerId".into(),
                code: resp.error_code,
            });
        }
        Ok((resp.producer_id.0, resp.producer_epoch))
    }

    /// ListOffsets at `timestamp` ([`LATEST`], [`EARLIEST`]) for every partition of the
    /// layout, asked of each partition's leader.
    pub fn list_offsets(
        &mut self,
        layout: &TopicLayout,
        timestamp: i64,
    ) -> Result<BTreeMap<i32, i64>, AdminError> {
        let mut by_leader: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (p, addr) in &layout.leaders {
            by_leader.entry(addr.as_str()).or_default().push(*p);
        }
        let mut out = BTreeMap::new();
        for (addr, partitions) in by_leader {
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(layout.topic.clone())))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(*p)
                                    .with_current_leader_epoch(-1)
                                    .with_timestamp(timestamp)
                            })
                            .collect(),
                    )]);
            let resp = self.send(addr, &req, (1, 8))?;
            for t in &resp.topics {
                for p in &t.partitions {
                    if p.error_code != 0 {
                        return Err(AdminError::Kafka {
                            what: format!("ListOffsets {}-{}", layout.topic, p.partition_index),
                            code: p.error_code,
                        });
                    }
                    out.insert(p.partition_index, p.offset);
                }
            }
        }
        Ok(out)
    }

    /// The timestamp of the newest record of each partition (the max timestamp of the
    /// batch holding offset `end - 1`), `None` for an empty partition. `ends` are the
    /// log end offsets.
    pub fn newest_timestamps(
        &mut self,
        layout: &TopicLayout,
        ends: &BTreeMap<i32, i64>,
    ) -> Result<BTreeMap<i32, Option<i64>>, AdminError> {
        let mut by_leader: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for (p, addr) in &layout.leaders {
            match ends.get(p) {
                Some(end) if *end > 0 => by_leader
                    .entry(addr.as_str())
                    .or_default()
                    .push((*p, end - 1)),
                _ => {
                    out.insert(*p, None);
                }
            }
        }
        for (addr, partitions) in by_leader {
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_min_bytes(0)
                .with_max_bytes(64 << 20)
                .with_isolation_level(0)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(layout.topic.clone())))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|(p, offset)| {
                                FetchPartition::default()
                                    .with_partition(*p)
                                    .with_current_leader_epoch(-1)
                                    .with_fetch_offset(*offset)
                                    .with_last_fetched_epoch(-1)
                                    .with_log_start_offset(-1)
                                    // The first batch always comes back whole.
                                    .with_partition_max_bytes(1)
                            })
                            .collect(),
                    )]);
            let resp = self.send(addr, &req, (4, 12))?;
            for t in &resp.responses {
                for p in &t.partitions {
                    if p.error_code != 0 {
                        return Err(AdminError::Kafka {
                            what: format!("Fetch {}-{}", layout.topic, p.partition_index),
                            code: p.error_code,
                        });
                    }
                    let records: Bytes = p.records.clone().unwrap_or_default();
                    let newest = BatchIter::new(records, 0, false)
                        .map_while(Result::ok)
                        .filter(|b| !b.is_control())
                        .map(|b| b.max_timestamp())
                        .max();
                    out.insert(p.partition_index, newest);
                }
            }
        }
        Ok(out)
    }

    /// Sends a mirror RPC (v0) to a bootstrap broker and decodes the answer.
    pub fn mirror(&mut self, request: &MirrorRequest) -> Result<MirrorResponse, AdminError> {
        let addr = self.any_addr()?;
        let conn = self.conn(&addr)?;
        let key = request.api_key();
        if conn.api_range(key).is_none() {
            return Err(AdminError::Other(format!(
                "{addr} does not serve the mirror RPCs (api key {key}): not a Twinlog broker?"
            )));
        }
        let client = |source| AdminError::Client {
            addr: addr.clone(),
            source,
        };
        Ok(dataplane::map_mirror_request!(request, r => conn.send(r, 0).map_err(client)?))
    }
}
