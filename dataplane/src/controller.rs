//! What the data plane asks of the controller. The data plane defines these types and
//! the [`ControllerHandle`] trait; the control plane implements it and `src/` wires it
//! in, so `dataplane` never depends on `controlplane`. Requests enter the way a cluster
//! would route them: any connection's handler forwards admin RPCs through this trait.

use futures::channel::oneshot;

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker default (`num.partitions`).
    pub num_partitions: i32,
    /// -1: the broker default (`default.replication.factor`).
    pub replication_factor: i16,
    /// Explicit replica lists, by partition (empty: placed by the controller from the
    /// partition count and replication factor).
    pub assignments: Vec<Vec<i32>>,
    pub configs: Vec<(String, Option<String>)>,
}

/// An admin request the controller applies as metadata records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRequest {
    CreateTopics {
        topics: Vec<NewTopic>,
        validate_only: bool,
    },
    DeleteTopics {
        names: Vec<String>,
    },
    /// Grow topics to `count` partitions each.
    CreatePartitions {
        topics: Vec<(String, i32)>,
        /// Explicit replica lists of the new partitions, by topic (a topic not listed:
        /// placed by the controller).
        assignments: Vec<(String, Vec<Vec<i32>>)>,
        validate_only: bool,
    },
    /// Replace (`incremental == false`, AlterConfigs) or change (IncrementalAlterConfigs:
    /// `None` deletes a key) a topic's configs.
    AlterTopicConfigs {
        topic: String,
        configs: Vec<(String, Option<String>)>,
        incremental: bool,
        validate_only: bool,
    },
    /// Dynamic broker configs of `broker` ("" = the cluster-wide default, else a node
    /// id), replaced or changed like a topic's.
    AlterBrokerConfigs {
        broker: String,
        configs: Vec<(String, Option<String>)>,
        incremental: bool,
        validate_only: bool,
    },
    /// A block of producer ids for a shard's InitProducerId answers.
    AllocateProducerIds {
        count: i64,
    },
    /// CreateMirror: the broker has checked the source (and filled in
    /// `source.cluster.id`). Creates `__mirror_state` with the first mirror.
    CreateMirror {
        name: String,
        configs: Vec<(String, Option<String>)>,
    },
    /// AddTopicsToMirror: topic ids and partition counts come from the source; the broker
    /// has checked the partitions' actual states.
    AddTopicsToMirror {
        mirror: String,
        topics: Vec<crate::wire::mirror::MirrorTopicMetadata>,
        /// The synced part of each source topic's configs, by name: a topic created
        /// here starts with them (an existing one is left to the metadata sync).
        configs: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    },
    /// RemoveTopicsFromMirror, PauseMirrorTopics, ResumeMirrorTopics: move topics of
    /// `mirror` to `desired`.
    SetMirrorTopicsState {
        mirror: String,
        topics: Vec<String>,
        desired: crate::wire::mirror::DesiredMirrorState,
    },
    /// DeleteMirror: the broker has checked that every partition of the mirror is
    /// STOPPED.
    DeleteMirror {
        name: String,
    },
    /// Raise each partition's leader epoch above the given epoch (mirror partitions keep
    /// their epoch above every mirrored batch epoch; STOPPING draws the line).
    BumpLeaderEpochs {
        partitions: Vec<(crate::types::TopicPartition, i32)>,
    },
    /// A partition leader asks for a new ISR (Kafka's AlterPartition): applied only if
    /// the partition still has these leader and partition epochs. Answered once queued
    /// for the quorum; the outcome shows in the next image.
    AlterPartition {
        topic_id: uuid::Uuid,
        partition: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
    },
    /// This broker is about to shut down: move its leaderships away (controlled
    /// shutdown). Answered once queued for the quorum.
    ControlledShutdown,
    /// Kafka's AlterPartitionReassignments: each partition to its target replicas
    /// (`None`: cancel the reassignment in progress). One result per partition, named
    /// `topic-partition`.
    AlterPartitionReassignments {
        partitions: Vec<(crate::types::TopicPartition, Option<Vec<i32>>)>,
    },
    /// DescribeQuorum: the metadata quorum as this node's controller sees it.
    DescribeQuorum,
    /// AddRaftVoter (KIP-853): make controller `node_id`, an observer of a dynamic
    /// quorum, a voter reached at `addr`.
    AddRaftVoter {
        node_id: i32,
        directory_id: uuid::Uuid,
        addr: std::net::SocketAddr,
    },
    /// RemoveRaftVoter (KIP-853): take voter `node_id` out of a dynamic quorum.
    RemoveRaftVoter {
        node_id: i32,
        directory_id: uuid::Uuid,
    },
    /// Kafka's ElectLeaders: the preferred replica (`preferred`) or, unclean, any live
    /// replica leads. One result per partition.
    ElectLeaders {
        preferred: bool,
        partitions: Vec<crate::types::TopicPartition>,
    },
    /// AlterUserScramCredentials, checked by the data plane but for existence: delete
    /// and set credentials, by user. One result per user named in either list; a user
    /// with a failed item changes nothing.
    AlterScramCredentials {
        deletions: Vec<(String, crate::net::scram::ScramMechanism)>,
        upsertions: Vec<(
            String,
            crate::net::scram::ScramMechanism,
            crate::net::scram::ScramCredential,
        )>,
    },
    /// CreateAcls, checked by the data plane: one result per binding, in order; an ACL
    /// that exists already is left as it is.
    CreateAcls {
        bindings: Vec<crate::acl::AclBinding>,
    },
    /// DeleteAcls, filters checked by the data plane: answered with
    /// [`AdminResponse::DeletedAcls`], the ACLs each filter removed.
    DeleteAcls {
        filters: Vec<crate::acl::AclFilter>,
    },
    /// A mirror's ACL sync: ACLs to create (held or not), to hold or release, to
    /// delete. The controller applies only what still holds: it never creates an ACL
    /// that exists, and changes or deletes only ACLs this mirror made.
    SyncMirrorAcls {
        mirror: String,
        changes: Vec<crate::acl::MirrorAclChange>,
    },
    /// Change a mirror's configs (IncrementalAlterConfigs / AlterConfigs on MIRROR).
    AlterMirrorConfigs {
        name: String,
        configs: Vec<(String, Option<String>)>,
        incremental: bool,
        validate_only: bool,
    },
}

/// The per-item outcome of an admin request: a Kafka error code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminResult {
    pub name: String,
    pub error_code: i16,
    pub message: Option<String>,
}

impl AdminResult {
    pub fn ok(name: impl Into<String>) -> Self {
        AdminResult {
            name: name.into(),
            error_code: 0,
            message: None,
        }
    }

    pub fn err(name: impl Into<String>, error_code: i16, message: impl Into<String>) -> Self {
        AdminResult {
            name: name.into(),
            error_code,
            message: Some(message.into()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminResponse {
    /// One result per topic (or per alter-configs resource), in request order.
    Results(Vec<AdminResult>),
    /// `[first, first + count)` is reserved for the asking shard.
    ProducerIds { first: i64, count: i64 },
    /// The whole request failed (e.g. the metadata log could not be written).
    Failed { error_code: i16, message: String },
    /// DescribeQuorum's answer.
    Quorum(QuorumDescription),
    /// DeleteAcls' answer: per filter, the ACLs it removed.
    DeletedAcls(Vec<Vec<crate::acl::AclBinding>>),
}

/// One member in a [`QuorumDescription`]: node id, log end (-1: unknown), last heard
/// from, directory id.
pub type QuorumMember = (i32, i64, Option<std::time::Duration>, Option<uuid::Uuid>);

/// The metadata quorum as one controller sees it (Kafka's DescribeQuorum).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuorumDescription {
    /// Node id of the leader, if known.
    pub leader: Option<i32>,
    /// The Raft term (Kafka's leader epoch of the metadata partition).
    pub epoch: i32,
    /// The commit index (Kafka's high watermark of the metadata log).
    pub high_watermark: i64,
    /// Each voter: node id, its log end as known here (-1: unknown), how long ago it
    /// was last heard from, and its metadata directory id if committed.
    pub voters: Vec<QuorumMember>,
    /// The learners (broker-only nodes and controllers not yet voters, Kafka's
    /// observers), alike.
    pub observers: Vec<QuorumMember>,
}

/// How the data plane reaches the controller. Implementations must be callable from any
/// shard thread and never block it: the answer arrives on the returned channel once the
/// records are durable in the metadata log and the new image is published (and, for new
/// partitions, once their owning shards have created the logs).
pub trait ControllerHandle: Send + Sync + std::fmt::Debug {
    fn submit(&self, request: AdminRequest) -> oneshot::Receiver<AdminResponse>;
}

/// How the data plane reaches the control plane's mirror side: the `__mirror_state`
/// coordinator (ReadMirrorStates, WriteMirrorStates) and the mirror manager
/// (DescribeMirrors: partition states, lag, LME look-ups). Same contract as
/// [`ControllerHandle`]: callable from any shard, never blocks, answers on the channel.
pub trait MirrorHandle: Send + Sync + std::fmt::Debug {
    fn submit(
        &self,
        request: crate::wire::mirror::MirrorRequest,
    ) -> oneshot::Receiver<crate::wire::mirror::MirrorResponse>;
}
