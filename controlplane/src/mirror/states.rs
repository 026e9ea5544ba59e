//! `MirrorStates`: where the mirror manager reads and writes partition states on a
//! cluster (reference §2.9, §5.4). The state of a mirror partition lives with the
//! coordinator of its key, the leader of `__mirror_state` partition
//! `partition_for(mirror, topic id, partition)`. When that leader is this broker the
//! local [`MirrorStateCoordinator`] answers (the local shortcut); otherwise the state
//! travels as ReadMirrorStates / WriteMirrorStates to the leader's broker, the same
//! request types the local path serves.
//!
//! Rules:
//! - Remote entries are cached from the last [`refresh`](MirrorStates::refresh) (one
//!   ReadMirrorStates per coordinator and mirror, every manager tick) and re-read after
//!   each write, so a decision never uses a state older than this broker's own last
//!   write. A refresh that overlapped a write does not overwrite what the write read
//!   back.
//! - A key whose coordinator did not answer is not loaded: the manager skips its
//!   partition this tick (as it does for an unloaded local partition).
//! - Fencing stays with the coordinator: every write carries the leader epoch and state
//!   epoch it was based on, so a broker that lost leadership cannot overwrite the new
//!   leader's state.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use dataplane::client::{ClientError, ConnectionConfig, KafkaConnection};
use dataplane::metadata::{MetadataCell, MetadataImage, TopicImage};
use dataplane::wire::mirror::{
    MirrorRequest, MirrorResponse, MirrorStateEntry, MirrorStatesTopic, ReadMirrorStatesRequest,
    ReadMirrorStatesTopic, WriteMirrorStatesRequest, WriteMirrorStatesResponse,
    WriteMirrorStatesTopicResult,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::coordinator::{MirrorStateCoordinator, MIRROR_STATE_TOPIC};
use super::records::partition_for;

type Key = (String, Uuid, i32);

/// Topic name -> (topic id, partitions): what one ReadMirrorStates asks.
type Asked = BTreeMap<String, (Uuid, Vec<i32>)>;

/// Who coordinates a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coordinator {
    /// `__mirror_state` does not exist: nothing was ever recorded.
    NoStateTopic,
    Local,
    Remote(i32),
    /// The key's `__mirror_state` partition has no live leader.
    Unavailable,
}

/// The mirror manager's view of mirror partition states (see the module docs).
pub struct MirrorStates {
    local: Rc<MirrorStateCoordinator>,
    metadata: Arc<MetadataCell>,
    remote: RefCell<HashMap<Key, MirrorStateEntry>>,
    /// Remote writes so far: a refresh that saw this change while it ran keeps the
    /// entries the writes read back.
    writes: Cell<u64>,
    /// Connections to other brokers' coordinators, by node id; one is taken out while
    /// a request is on it.
    links: RefCell<HashMap<i32, KafkaConnection>>,
}

impl std::fmt::Debug for MirrorStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorStates")
            .field("local", &self.local)
            .field("remote", &self.remote.borrow().len())
            .finish_non_exhaustive()
    }
}

impl MirrorStates {
    pub fn new(local: Rc<MirrorStateCoordinator>, metadata: Arc<MetadataCell>) -> Self {
        MirrorStates {
            local,
            metadata,
            remote: RefCell::new(HashMap::new()),
            writes: Cell::new(0),
            links: RefCell::new(HashMap::new()),
        }
    }

    /// The coordinator of the `__mirror_state` partitions this broker leads.
    pub fn local(&self) -> &Rc<MirrorStateCoordinator> {
        &self.local
    }

    fn coordinator_of(
        image: &MetadataImage,
        mirror: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Coordinator {
        let Some(state) = image.topic(MIRROR_STATE_TOPIC) else {
            return Coordinator::NoStateTopic;
        };
        let n = state.partitions.len() as i32;
        let p = partition_for(mirror, topic_id, partition, n);
        match state.partitions.iter().find(|sp| sp.partition == p) {
            Some(sp) if sp.leader == image.node_id => Coordinator::Local,
            Some(sp) if sp.leader >= 0 && image.is_live(sp.leader) => {
                Coordinator::Remote(sp.leader)
            }
            _ => Coordinator::Unavailable,
        }
    }

    /// This broker coordinates the key (or nothing does: no `__mirror_state` yet).
    pub fn coordinates(&self, mirror: &str, topic_id: Uuid, partition: i32) -> bool {
        let image = self.metadata.load();
        matches!(
            Self::coordinator_of(&image, mirror, topic_id, partition),
            Coordinator::NoStateTopic | Coordinator::Local
        )
    }

    /// The state of the key can be read now: its coordinator is loaded (local) or
    /// answered the last refresh (remote).
    pub fn is_loaded_for(&self, mirror: &str, topic_id: Uuid, partition: i32) -> bool {
        let image = self.metadata.load();
        match Self::coordinator_of(&image, mirror, topic_id, partition) {
            Coordinator::NoStateTopic | Coordinator::Local => {
                self.local.is_loaded_for(mirror, topic_id, partition)
            }
            Coordinator::Remote(_) => {
                self.remote
                    .borrow()
                    .contains_key(&(mirror.to_string(), topic_id, partition))
            }
            Coordinator::Unavailable => false,
        }
    }

    /// The stored state of the key as last seen (the UNKNOWN default when none).
    pub fn entry(&self, mirror: &str, topic_id: Uuid, partition: i32) -> MirrorStateEntry {
        let image = self.metadata.load();
        match Self::coordinator_of(&image, mirror, topic_id, partition) {
            Coordinator::Remote(_) => self
                .remote
                .borrow()
                .get(&(mirror.to_string(), topic_id, partition))
                .cloned()
                .unwrap_or(MirrorStateEntry {
                    partition,
                    ..MirrorStateEntry::default()
                }),
            _ => self.local.entry(mirror, topic_id, partition),
        }
    }

    /// The stored state of one key read now from its coordinator (local or remote),
    /// not from the cache: for a broker that does not lead the partition.
    pub async fn read_entry(
        &self,
        image: &MetadataImage,
        mirror: &str,
        topic: &TopicImage,
        partition: i32,
    ) -> Result<MirrorStateEntry, String> {
        match Self::coordinator_of(image, mirror, topic.id, partition) {
            Coordinator::NoStateTopic | Coordinator::Local => {
                self.local
                    .ensure_loaded_for(mirror, topic.id, partition)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(self.local.entry(mirror, topic.id, partition))
            }
            Coordinator::Remote(node) => {
                let topics = BTreeMap::from([(topic.name.clone(), (topic.id, vec![partition]))]);
                self.read_remote(image, node, mirror, &topics)
                    .await?
                    .into_iter()
                    .next()
                    .map(|(_, e)| e)
                    .ok_or_else(|| {
                        format!(
                            "coordinator {node} did not answer for {}-{partition}",
                            topic.name
                        )
                    })
            }
            Coordinator::Unavailable => Err(format!(
                "no live leader for the {MIRROR_STATE_TOPIC} partition of {}-{partition}",
                topic.name
            )),
        }
    }

    /// Reads the states of `parts` (mirror, topic, partition) whose coordinators are
    /// other brokers: one ReadMirrorStates per coordinator and mirror. Entries of keys
    /// not asked for are dropped.
    pub async fn refresh(&self, image: &MetadataImage, parts: &[(&str, &TopicImage, i32)]) {
        let mut asks: BTreeMap<(i32, String), Asked> = BTreeMap::new();
        for (mirror, topic, p) in parts {
            if let Coordinator::Remote(node) = Self::coordinator_of(image, mirror, topic.id, *p) {
                asks.entry((node, mirror.to_string()))
                    .or_default()
                    .entry(topic.name.clone())
                    .or_insert_with(|| (topic.id, Vec::new()))
                    .1
                    .push(*p);
            }
        }
        let writes_before = self.writes.get();
        let reads = asks.into_iter().map(|((node, mirror), topics)| async move {
            let read = self.read_remote(image, node, &mirror, &topics).await;
            (node, mirror, read)
        });
        let mut fresh: HashMap<Key, MirrorStateEntry> = HashMap::new();
        for (node, mirror, read) in futures::future::join_all(reads).await {
            match read {
                Ok(entries) => fresh.extend(entries),
                Err(e) => {
                    tracing::debug!(node, %mirror, error = %e, "mirror states of a remote coordinator not read this tick")
                }
            }
        }
        let mut remote = self.remote.borrow_mut();
        if self.writes.get() != writes_before {
            // A write read its keys back while this ran: those are newer.
            for (key, entry) in fresh {
                remote.entry(key).or_insert(entry);
            }
        } else {
            *remote = fresh;
        }
    }

    /// ReadMirrorStates for `topics` (name -> (id, partitions)) of `mirror` on `node`.
    async fn read_remote(
        &self,
        image: &MetadataImage,
        node: i32,
        mirror: &str,
        topics: &Asked,
    ) -> Result<Vec<(Key, MirrorStateEntry)>, String> {
        let request = MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest {
            mirror_name: mirror.to_string(),
            topics: topics
                .iter()
                .map(|(name, (_, ps))| ReadMirrorStatesTopic {
                    name: name.clone(),
                    partitions: ps.clone(),
                })
                .collect(),
        });
        let MirrorResponse::ReadMirrorStates(response) = self.call(image, node, request).await?
        else {
            return Err("unexpected answer to ReadMirrorStates".into());
        };
        if response.error_code != 0 {
            return Err(format!("ReadMirrorStates: error {}", response.error_code));
        }
        let mut out = Vec::new();
        for t in response.topics {
            let Some((id, _)) = topics.get(&t.name) else {
                continue;
            };
            for e in t.partitions {
                if e.error_code == 0 {
                    out.push(((mirror.to_string(), *id, e.partition), e));
                }
            }
        }
        Ok(out)
    }

    /// WriteMirrorStates: the local coordinator writes the keys it coordinates, the
    /// other brokers' coordinators theirs (read back after the write).
    pub async fn write(&self, req: &WriteMirrorStatesRequest) -> WriteMirrorStatesResponse {
        let image = self.metadata.load();
        // Per coordinator: the request's items for it, with their places in `req`.
        let mut split: BTreeMap<Option<i32>, Vec<(usize, usize)>> = BTreeMap::new();
        let mut results: Vec<WriteMirrorStatesTopicResult> = req.results(0, None);
        for (ti, t) in req.topics.iter().enumerate() {
            let id = image.topic(&t.name).map(|t| t.id);
            for (pi, e) in t.partitions.iter().enumerate() {
                let at = id.map_or(Coordinator::Local, |id| {
                    Self::coordinator_of(&image, &req.mirror_name, id, e.partition)
                });
                match at {
                    Coordinator::NoStateTopic | Coordinator::Local => {
                        split.entry(None).or_default().push((ti, pi))
                    }
                    Coordinator::Remote(node) => {
                        split.entry(Some(node)).or_default().push((ti, pi))
                    }
                    Coordinator::Unavailable => {
                        let r = &mut results[ti].partitions[pi];
                        r.error_code = ResponseError::CoordinatorNotAvailable.code();
                        r.error_message = Some(format!(
                            "no live leader for the {MIRROR_STATE_TOPIC} partition of this key"
                        ));
                    }
                }
            }
        }
        for (node, items) in split {
            let part = sub_request(req, &items);
            let answer = match node {
                None => Ok(self.local.write(&part).await),
                Some(node) => {
                    self.writes.set(self.writes.get() + 1);
                    match self
                        .call(&image, node, MirrorRequest::WriteMirrorStates(part.clone()))
                        .await
                    {
                        Ok(MirrorResponse::WriteMirrorStates(r)) => Ok(r),
                        Ok(_) => Err("unexpected answer to WriteMirrorStates".to_string()),
                        Err(e) => Err(e),
                    }
                }
            };
            match answer {
                Ok(r) => {
                    place(&mut results, &items, &r);
                    if let Some(node) = node {
                        self.read_back(&image, node, &part).await;
                    }
                }
                Err(e) => {
                    for (ti, pi) in &items {
                        let r = &mut results[*ti].partitions[*pi];
                        r.error_code = ResponseError::CoordinatorNotAvailable.code();
                        r.error_message = Some(format!("coordinator {node:?}: {e}"));
                    }
                    if let Some(node) = node {
                        // Whatever happened remotely is read again before it is used.
                        self.forget(&image, &part);
                        tracing::debug!(node, error = %e, "remote mirror state write failed");
                    }
                }
            }
        }
        WriteMirrorStatesResponse {
            throttle_time_ms: 0,
            topics: results,
        }
    }

    /// Reads back the keys of a remote write, so the next decision sees the state epoch
    /// the coordinator gave them.
    async fn read_back(&self, image: &MetadataImage, node: i32, part: &WriteMirrorStatesRequest) {
        let topics: Asked = part
            .topics
            .iter()
            .filter_map(|t| {
                let id = image.topic(&t.name)?.id;
                Some((
                    t.name.clone(),
                    (id, t.partitions.iter().map(|e| e.partition).collect()),
                ))
            })
            .collect();
        match self
            .read_remote(image, node, &part.mirror_name, &topics)
            .await
        {
            Ok(entries) => self.remote.borrow_mut().extend(entries),
            Err(_) => self.forget(image, part),
        }
    }

    /// Drops the cached entries of the keys of `part`: not loaded until read again.
    fn forget(&self, image: &MetadataImage, part: &WriteMirrorStatesRequest) {
        let mut remote = self.remote.borrow_mut();
        for t in &part.topics {
            if let Some(topic) = image.topic(&t.name) {
                for e in &t.partitions {
                    remote.remove(&(part.mirror_name.clone(), topic.id, e.partition));
                }
            }
        }
    }

    /// Sends one mirror-state request to `node` on a cached connection.
    async fn call(
        &self,
        image: &MetadataImage,
        node: i32,
        request: MirrorRequest,
    ) -> Result<MirrorResponse, String> {
        let addr = image
            .broker_address(node)
            .ok_or_else(|| format!("broker {node} has no address"))?;
        let cached = self.links.borrow_mut().remove(&node);
        let mut conn = match cached.filter(|c| !c.is_broken()) {
            Some(c) => c,
            None => {
                let config = ConnectionConfig {
                    client_id: format!("twinlog-mirror-states-{}", image.node_id),
                    connect_timeout: Duration::from_secs(5),
                    request_timeout: Duration::from_secs(15),
                    response_bytes_max: 64 << 20,
                    security: dataplane::client::security::inter_broker(),
                };
                KafkaConnection::connect_with(&addr.to_string(), &config)
                    .await
                    .map_err(|e| format!("connecting to broker {node}: {e}"))?
            }
        };
        let answer: Result<MirrorResponse, ClientError> =
            async { Ok(dataplane::map_mirror_request!(&request, r => conn.send(r, 0).await?)) }
                .await;
        if !conn.is_broken() {
            self.links.borrow_mut().insert(node, conn);
        }
        answer.map_err(|e| format!("broker {node}: {e}"))
    }
}

/// The items of `req` at `items` (topic index, partition index), as a request of their own.
fn sub_request(
    req: &WriteMirrorStatesRequest,
    items: &[(usize, usize)],
) -> WriteMirrorStatesRequest {
    let mut topics: Vec<MirrorStatesTopic> = Vec::new();
    for (ti, pi) in items {
        let t = &req.topics[*ti];
        if topics.last().is_none_or(|last| last.name != t.name) {
            topics.push(MirrorStatesTopic {
                name: t.name.clone(),
                partitions: Vec::new(),
            });
        }
        if let Some(last) = topics.last_mut() {
            last.partitions.push(t.partitions[*pi].clone());
        }
    }
    WriteMirrorStatesRequest {
        mirror_name: req.mirror_name.clone(),
        topics,
        stopped_topics: Vec::new(),
    }
}

/// Copies the per-partition results of a sub-request back to the places of its items.
fn place(
    results: &mut [WriteMirrorStatesTopicResult],
    items: &[(usize, usize)],
    answer: &WriteMirrorStatesResponse,
) {
    let answered = answer.topics.iter().flat_map(|t| t.partitions.iter());
    for ((ti, pi), r) in items.iter().zip(answered) {
        results[*ti].partitions[*pi] = r.clone();
    }
}
