//! The ACL gate in front of the API handlers: with `authorizer.class.name` set, every
//! request is checked for exactly the operations Kafka's `KafkaApis` checks, before the
//! handler sees it. Three shapes:
//! - a request the principal may not make at all (a group, transactional-id or cluster
//!   operation) is answered here with the API's error ([`Gate::Refuse`]);
//! - items the principal may not touch (topics of a Produce, Fetch, CreateTopics, ...)
//!   are taken out of the request, so the handler never acts on them, and put back into
//!   the response with TOPIC_AUTHORIZATION_FAILED by a [`Patch`];
//! - read-only answers (Metadata, OffsetFetch, ListGroups, DescribeConfigs, ...) are
//!   filtered after the handler: unauthorized topics are hidden from listings and
//!   answered with the error when named.
//!
//! Without an authorizer, or for a super user, [`Authz::new`] returns `None` and requests
//! go straight to their handlers. Decisions are cached per connection for one
//! generation of the ACLs (`acl::DecisionCache`).

use std::sync::Arc;

use kafka_protocol::messages::{RequestKind, ResponseKind};
use kafka_protocol::ResponseError;

use crate::acl::{AclSet, AuthorizerConfig, Operation, ResourceType, CLUSTER_NAME};
use crate::metadata::MetadataImage;
use crate::net::ConnInfo;
use crate::shard::ShardCtx;

use Operation::*;
use ResourceType as R;

/// Puts the refused items back into the handler's response (or filters it).
pub type Patch = Box<dyn FnOnce(&Authz<'_>, &mut ResponseKind, i16)>;

/// What the gate decided about a request.
#[allow(missing_debug_implementations)]
pub enum Gate {
    /// Hand the (possibly trimmed) request to its handler, then apply the patch.
    Pass(RequestKind, Option<Patch>),
    /// Answer this instead; the handler is not called.
    Refuse(ResponseKind),
}

/// The authorizer's view of one request: the session and the ACLs at its start.
#[derive(Debug)]
pub struct Authz<'a> {
    conn: &'a ConnInfo,
    config: &'a AuthorizerConfig,
    image: Arc<MetadataImage>,
}

/// The mirror config resource type of Describe/AlterConfigs (DECISIONS.md).
const MIRROR_CONFIG_RESOURCE: i8 = 64;
const TOPIC_CONFIG_RESOURCE: i8 = 2;
const BROKER_CONFIG_RESOURCE: i8 = 4;
const BROKER_LOGGER_CONFIG_RESOURCE: i8 = 8;

fn code(e: ResponseError) -> i16 {
    e.code()
}

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;
const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;
const MIRROR_DENIED: i16 = crate::wire::mirror::errors::CLUSTER_MIRROR_AUTHORIZATION_FAILED;

/// Moves the items `deny` picks out of `items`, keeping the order of both.
fn take<T>(items: &mut Vec<T>, mut deny: impl FnMut(&T) -> bool) -> Vec<T> {
    let (denied, kept): (Vec<T>, Vec<T>) = std::mem::take(items).into_iter().partition(|t| deny(t));
    *items = kept;
    denied
}

fn patch(f: impl FnOnce(&Authz<'_>, &mut ResponseKind, i16) + 'static) -> Option<Patch> {
    Some(Box::new(f))
}

impl<'a> Authz<'a> {
    /// `None`: every request is allowed (no authorizer, or a super user).
    pub fn new(ctx: &'a ShardCtx, conn: &'a ConnInfo) -> Option<Authz<'a>> {
        let config = ctx.settings.authorizer.as_ref()?;
        if config.super_users.contains(&conn.principal) {
            return None;
        }
        Some(Authz {
            conn,
            config,
            image: ctx.metadata.load(),
        })
    }

    fn acls(&self) -> &AclSet {
        &self.image.acls
    }

    /// Whether the session may perform `operation` on the resource.
    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        let acls = self.acls();
        self.conn
            .decisions
            .get_or(acls.generation(), operation, resource_type, name, || {
                let allowed = acls.authorize(
                    &self.conn.principal,
                    &self.conn.host,
                    operation,
                    resource_type,
                    name,
                    self.config.allow_if_none,
                );
                if !allowed {
                    tracing::info!(
                        target: "twinlog::authorizer",
                        principal = %self.conn.principal,
                        host = %self.conn.host,
                        operation = %operation,
                        resource = %format_args!("{resource_type}:{name}"),
                        "denied"
                    );
                }
                allowed
            })
    }

    pub fn cluster(&self, operation: Operation) -> bool {
        self.allows(operation, R::Cluster, CLUSTER_NAME)
    }

    fn topic(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, R::Topic, name)
    }

    fn group(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, R::Group, name)
    }

    /// Kafka's `authorized_operations` bit field for one resource.
    pub fn operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        resource_type
            .operations()
            .iter()
            .filter(|op| self.allows(**op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }

    /// Kafka's `authorizeByResourceType`: whether some ALLOW ACL lets the session do
    /// `operation` on some resource of the type (InitProducerId without a transactional
    /// id needs WRITE on any topic or IDEMPOTENT_WRITE on the cluster).
    fn allows_some(&self, operation: Operation, resource_type: ResourceType) -> bool {
        let acls = self.acls();
        acls.allows_some(
            &self.conn.principal,
            &self.conn.host,
            operation,
            resource_type,
            self.config.allow_if_none,
        )
    }

    /// The topic a request names by id (v13+ Fetch), if known.
    fn topic_by_id(&self, id: uuid::Uuid) -> Option<String> {
        self.image.topics_by_id.get(&id).cloned()
    }

    /// Checks one request (see the module docs).
    pub fn admit(&self, request: RequestKind, version: i16) -> Gate {
        match request {
            RequestKind::Produce(r) => self.produce(r),
            RequestKind::Fetch(r) => self.fetch(r),
            RequestKind::Metadata(r) => self.metadata(r),
            RequestKind::ListOffsets(r) => self.list_offsets(r),
            RequestKind::OffsetForLeaderEpoch(r) => self.offset_for_leader_epoch(r),
            RequestKind::DescribeTopicPartitions(r) => self.describe_topic_partitions(r),
            RequestKind::DescribeProducers(r) => self.describe_producers(r),
            RequestKind::CreateTopics(r) => self.create_topics(r),
            RequestKind::DeleteTopics(r) => self.delete_topics(r),
            RequestKind::DeleteRecords(r) => self.delete_records(r),
            RequestKind::CreatePartitions(r) => self.create_partitions(r),
            RequestKind::DescribeConfigs(r) => self.describe_configs(r),
            RequestKind::AlterConfigs(r) => self.alter_configs(r),
            RequestKind::IncrementalAlterConfigs(r) => self.incremental_alter_configs(r),
            RequestKind::FindCoordinator(r) => self.find_coordinator(r),
            RequestKind::JoinGroup(r) => self.whole_group(
                self.group(Read, &r.group_id.0),
                RequestKind::JoinGroup(r),
                || {
                    ResponseKind::JoinGroup(
                        kafka_protocol::messages::JoinGroupResponse::default()
                            .with_error_code(code(GROUP_DENIED)),
                    )
                },
            ),
            RequestKind::SyncGroup(r) => self.whole_group(
                self.group(Read, &r.group_id.0),
                RequestKind::SyncGroup(r),
                || {
                    ResponseKind::SyncGroup(
                        kafka_protocol::messages::SyncGroupResponse::default()
                            .with_error_code(code(GROUP_DENIED)),
                    )
                },
            ),
            RequestKind::Heartbeat(r) => self.whole_group(
                self.group(Read, &r.group_id.0),
                RequestKind::Heartbeat(r),
                || {
                    ResponseKind::Heartbeat(
                        kafka_protocol::messages::HeartbeatResponse::default()
                            .with_error_code(code(GROUP_DENIED)),
                    )
                },
            ),
            RequestKind::LeaveGroup(r) => self.whole_group(
                self.group(Read, &r.group_id.0),
                RequestKind::LeaveGroup(r),
                || {
                    ResponseKind::LeaveGroup(
                        kafka_protocol::messages::LeaveGroupResponse::default()
                            .with_error_code(code(GROUP_DENIED)),
                    )
                },
            ),
            RequestKind::OffsetCommit(r) => self.offset_commit(r),
            RequestKind::OffsetFetch(r) => self.offset_fetch(r, version),
            RequestKind::ListGroups(r) => self.list_groups(r),
            RequestKind::DescribeGroups(r) => self.describe_groups(r),
            RequestKind::DeleteGroups(r) => self.delete_groups(r),
            RequestKind::OffsetDelete(r) => self.offset_delete(r),
            RequestKind::InitProducerId(r) => self.init_producer_id(r),
            RequestKind::AddPartitionsToTxn(r) => self.add_partitions_to_txn(r),
            RequestKind::AddOffsetsToTxn(r) => self.add_offsets_to_txn(r),
            RequestKind::EndTxn(r) => {
                if self.allows(Write, R::TransactionalId, &r.transactional_id.0) {
                    Gate::Pass(RequestKind::EndTxn(r), None)
                } else {
                    Gate::Refuse(ResponseKind::EndTxn(
                        kafka_protocol::messages::EndTxnResponse::default()
                            .with_error_code(code(TXN_DENIED)),
                    ))
                }
            }
            RequestKind::TxnOffsetCommit(r) => self.txn_offset_commit(r),
            RequestKind::DescribeTransactions(r) => self.describe_transactions(r),
            RequestKind::ListTransactions(r) => Gate::Pass(
                RequestKind::ListTransactions(r),
                patch(|a, resp, _| {
                    if let ResponseKind::ListTransactions(resp) = resp {
                        resp.transaction_states.retain(|t| {
                            a.allows(Describe, R::TransactionalId, &t.transactional_id.0)
                        });
                    }
                }),
            ),
            RequestKind::WriteTxnMarkers(r) => self.write_txn_markers(r),
            RequestKind::DescribeCluster(r) => Gate::Pass(
                RequestKind::DescribeCluster(r.clone()),
                patch(move |a, resp, _| {
                    if let ResponseKind::DescribeCluster(resp) = resp {
                        if r.include_cluster_authorized_operations {
                            resp.cluster_authorized_operations =
                                a.operations(R::Cluster, CLUSTER_NAME);
                        }
                    }
                }),
            ),
            other => self.cluster_request(other),
        }
    }

    /// A request answered here with GROUP_AUTHORIZATION_FAILED unless the session may
    /// READ the group (`allowed`).
    fn whole_group(
        &self,
        allowed: bool,
        request: RequestKind,
        refused: impl FnOnce() -> ResponseKind,
    ) -> Gate {
        if allowed {
            Gate::Pass(request, None)
        } else {
            Gate::Refuse(refused())
        }
    }

    /// The requests that need one operation on the cluster (and the SASL, ApiVersions
    /// and other requests that need none).
    fn cluster_request(&self, request: RequestKind) -> Gate {
        use kafka_protocol::messages::*;
        let needs = match &request {
            RequestKind::CreateAcls(_)
            | RequestKind::DeleteAcls(_)
            | RequestKind::ElectLeaders(_)
            | RequestKind::AlterPartitionReassignments(_)
            | RequestKind::AddRaftVoter(_)
            | RequestKind::RemoveRaftVoter(_)
            | RequestKind::AlterUserScramCredentials(_) => Some(Alter),
            RequestKind::DescribeAcls(_)
            | RequestKind::DescribeLogDirs(_)
            | RequestKind::ListPartitionReassignments(_)
            | RequestKind::DescribeQuorum(_)
            | RequestKind::DescribeUserScramCredentials(_) => Some(Describe),
            _ => None,
        };
        match needs {
            Some(op) if !self.cluster(op) => {}
            _ => return Gate::Pass(request, None),
        }
        let c = code(CLUSTER_DENIED);
        let message = || Some(super::str_bytes("Cluster authorization failed."));
        Gate::Refuse(match request {
            RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(
                CreateAclsResponse::default().with_results(
                    r.creations
                        .iter()
                        .map(|_| {
                            create_acls_response::AclCreationResult::default()
                                .with_error_code(c)
                                .with_error_message(message())
                        })
                        .collect(),
                ),
            ),
            RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(
                DeleteAclsResponse::default().with_filter_results(
                    r.filters
                        .iter()
                        .map(|_| {
                            delete_acls_response::DeleteAclsFilterResult::default()
                                .with_error_code(c)
                                .with_error_message(message())
                        })
                        .collect(),
                ),
            ),
            RequestKind::DescribeAcls(_) => ResponseKind::DescribeAcls(
                DescribeAclsResponse::default()
                    .with_error_code(c)
                    .with_error_message(message()),
            ),
            RequestKind::DescribeLogDirs(_) => {
                ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(c))
            }
            RequestKind::ElectLeaders(r) => ResponseKind::ElectLeaders(
                ElectLeadersResponse::default()
                    .with_error_code(c)
                    .with_replica_election_results(
                        r.topic_partitions
                            .unwrap_or_default()
                            .into_iter()
                            .map(|t| {
                                elect_leaders_response::ReplicaElectionResult::default()
                                    .with_topic(t.topic)
                                    .with_partition_result(
                                        t.partitions
                                            .into_iter()
                                            .map(|p| {
                                                elect_leaders_response::PartitionResult::default()
                                                    .with_partition_id(p)
                                                    .with_error_code(c)
                                                    .with_error_message(message())
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    ),
            ),
            RequestKind::AlterPartitionReassignments(_) => {
                ResponseKind::AlterPartitionReassignments(
                    AlterPartitionReassignmentsResponse::default()
                        .with_error_code(c)
                        .with_error_message(message()),
                )
            }
            RequestKind::ListPartitionReassignments(_) => ResponseKind::ListPartitionReassignments(
                ListPartitionReassignmentsResponse::default()
                    .with_error_code(c)
                    .with_error_message(message()),
            ),
            RequestKind::DescribeQuorum(_) => ResponseKind::DescribeQuorum(
                DescribeQuorumResponse::default()
                    .with_error_code(c)
                    .with_error_message(message()),
            ),
            RequestKind::AddRaftVoter(_) => ResponseKind::AddRaftVoter(
                AddRaftVoterResponse::default()
                    .with_error_code(c)
                    .with_error_message(message()),
            ),
            RequestKind::RemoveRaftVoter(_) => ResponseKind::RemoveRaftVoter(
                RemoveRaftVoterResponse::default()
                    .with_error_code(c)
                    .with_error_message(message()),
            ),
            RequestKind::DescribeUserScramCredentials(_) => {
                ResponseKind::DescribeUserScramCredentials(
                    DescribeUserScramCredentialsResponse::default()
                        .with_error_code(c)
                        .with_error_message(message()),
                )
            }
            RequestKind::AlterUserScramCredentials(r) => {
                let mut users: Vec<String> = Vec::new();
                for name in r
                    .deletions
                    .iter()
                    .map(|d| d.name.to_string())
                    .chain(r.upsertions.iter().map(|u| u.name.to_string()))
                {
                    if !users.contains(&name) {
                        users.push(name);
                    }
                }
                ResponseKind::AlterUserScramCredentials(
                    AlterUserScramCredentialsResponse::default().with_results(
                        users
                            .into_iter()
                            .map(|u| {
                                alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                                    .with_user(super::str_bytes(u))
                                    .with_error_code(c)
                                    .with_error_message(message())
                            })
                            .collect(),
                    ),
                )
            }
            other => return Gate::Pass(other, None),
        })
    }

    fn produce(&self, mut r: kafka_protocol::messages::ProduceRequest) -> Gate {
        use kafka_protocol::messages::produce_response::*;
        let error_partitions = |t: &kafka_protocol::messages::produce_request::TopicProduceData,
                                error: ResponseError| {
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(
                    t.partition_data
                        .iter()
                        .map(|p| {
                            PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_error_code(code(error))
                                .with_base_offset(-1)
                                .with_log_start_offset(-1)
                        })
                        .collect(),
                )
        };
        if let Some(id) = &r.transactional_id {
            if !self.allows(Write, R::TransactionalId, &id.0) {
                let responses = r
                    .topic_data
                    .iter()
                    .map(|t| error_partitions(t, TXN_DENIED))
                    .collect();
                return Gate::Refuse(ResponseKind::Produce(
                    kafka_protocol::messages::ProduceResponse::default().with_responses(responses),
                ));
            }
        }
        let denied = take(&mut r.topic_data, |t| !self.topic(Write, &t.name.0));
        if denied.is_empty() {
            return Gate::Pass(RequestKind::Produce(r), None);
        }
        let refused: Vec<_> = denied
            .iter()
            .map(|t| error_partitions(t, TOPIC_DENIED))
            .collect();
        Gate::Pass(
            RequestKind::Produce(r),
            patch(move |_, resp, _| {
                if let ResponseKind::Produce(resp) = resp {
                    resp.responses.extend(refused);
                }
            }),
        )
    }

    fn fetch(&self, mut r: kafka_protocol::messages::FetchRequest) -> Gate {
        use kafka_protocol::messages::fetch_response::*;
        let follower = r.replica_id.0 >= 0 || r.replica_state.replica_id.0 >= 0;
        let denied = if follower {
            if self.cluster(ClusterAction) {
                Vec::new()
            } else {
                std::mem::take(&mut r.topics)
            }
        } else {
            take(&mut r.topics, |t| {
                let name = if t.topic.0.is_empty() {
                    match self.topic_by_id(t.topic_id) {
                        Some(n) => n,
                        // An unknown id: the handler answers UNKNOWN_TOPIC_ID.
                        None => return false,
                    }
                } else {
                    t.topic.0.to_string()
                };
                !self.topic(Read, &name)
            })
        };
        if denied.is_empty() {
            return Gate::Pass(RequestKind::Fetch(r), None);
        }
        let refused: Vec<FetchableTopicResponse> = denied
            .into_iter()
            .map(|t| {
                FetchableTopicResponse::default()
                    .with_topic(t.topic)
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                PartitionData::default()
                                    .with_partition_index(p.partition)
                                    .with_error_code(code(TOPIC_DENIED))
                                    .with_high_watermark(-1)
                            })
                            .collect(),
                    )
            })
            .collect();
        Gate::Pass(
            RequestKind::Fetch(r),
            patch(move |_, resp, version| {
                if let ResponseKind::Fetch(resp) = resp {
                    resp.responses.extend(refused.into_iter().map(|mut t| {
                        if version >= 13 {
                            t.topic = Default::default();
                        } else {
                            t.topic_id = uuid::Uuid::nil();
                        }
                        t
                    }));
                }
            }),
        )
    }

    fn metadata(&self, mut r: kafka_protocol::messages::MetadataRequest) -> Gate {
        use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
        let mut refused: Vec<MetadataResponseTopic> = Vec::new();
        if let Some(topics) = r.topics.as_mut() {
            let may_create = r.allow_auto_topic_creation && self.cluster(Create);
            let denied = take(topics, |t| {
                let name = match &t.name {
                    Some(n) => n.0.to_string(),
                    None => match self.topic_by_id(t.topic_id) {
                        Some(n) => n,
                        None => return false,
                    },
                };
                if !self.topic(Describe, &name) {
                    return true;
                }
                // Auto-creation needs CREATE on the cluster or the topic.
                r.allow_auto_topic_creation
                    && self.image.topic(&name).is_none()
                    && !may_create
                    && !self.topic(Create, &name)
            });
            refused = denied
                .into_iter()
                .map(|t| {
                    // Asked by id: the id is no secret, the name is.
                    MetadataResponseTopic::default()
                        .with_error_code(code(TOPIC_DENIED))
                        .with_name(t.name.clone())
                        .with_topic_id(if t.name.is_some() {
                            uuid::Uuid::nil()
                        } else {
                            t.topic_id
                        })
                })
                .collect();
        }
        let all_topics = r.topics.is_none();
        let topic_ops = r.include_topic_authorized_operations;
        let cluster_ops = r.include_cluster_authorized_operations;
        Gate::Pass(
            RequestKind::Metadata(r),
            patch(move |a, resp, _| {
                let ResponseKind::Metadata(resp) = resp else {
                    return;
                };
                if all_topics {
                    resp.topics
                        .retain(|t| t.name.as_ref().is_some_and(|n| a.topic(Describe, &n.0)));
                }
                if topic_ops {
                    for t in &mut resp.topics {
                        if let Some(n) = &t.name {
                            t.topic_authorized_operations = a.operations(R::Topic, &n.0);
                        }
                    }
                }
                resp.topics.extend(refused);
                if cluster_ops && a.cluster(Describe) {
                    resp.cluster_authorized_operations = a.operations(R::Cluster, CLUSTER_NAME);
                }
            }),
        )
    }

    fn list_offsets(&self, r: kafka_protocol::messages::ListOffsetsRequest) -> Gate {
        Gate::Pass(
            RequestKind::ListOffsets(r),
            patch(|a, resp, _| {
                if let ResponseKind::ListOffsets(resp) = resp {
                    for t in resp
                        .topics
                        .iter_mut()
                        .filter(|t| !a.topic(Describe, &t.name.0))
                    {
                        for p in &mut t.partitions {
                            *p = kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code(TOPIC_DENIED))
                                .with_timestamp(-1)
                                .with_offset(-1)
                                .with_leader_epoch(-1);
                        }
                    }
                }
            }),
        )
    }

    fn offset_for_leader_epoch(
        &self,
        r: kafka_protocol::messages::OffsetForLeaderEpochRequest,
    ) -> Gate {
        if self.cluster(ClusterAction) {
            return Gate::Pass(RequestKind::OffsetForLeaderEpoch(r), None);
        }
        Gate::Pass(
            RequestKind::OffsetForLeaderEpoch(r),
            patch(|a, resp, _| {
                if let ResponseKind::OffsetForLeaderEpoch(resp) = resp {
                    for t in resp
                        .topics
                        .iter_mut()
                        .filter(|t| !a.topic(Describe, &t.topic.0))
                    {
                        for p in &mut t.partitions {
                            *p = kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset::default()
                                .with_partition(p.partition)
                                .with_error_code(code(TOPIC_DENIED))
                                .with_leader_epoch(-1)
                                .with_end_offset(-1);
                        }
                    }
                }
            }),
        )
    }

    fn describe_topic_partitions(
        &self,
        r: kafka_protocol::messages::DescribeTopicPartitionsRequest,
    ) -> Gate {
        let listing = r.topics.is_empty();
        Gate::Pass(
            RequestKind::DescribeTopicPartitions(r),
            patch(move |a, resp, _| {
                let ResponseKind::DescribeTopicPartitions(resp) = resp else {
                    return;
                };
                let allowed = |t: &kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic| {
                    t.name.as_ref().is_some_and(|n| a.topic(Describe, &n.0))
                };
                if listing {
                    resp.topics.retain(allowed);
                }
                for t in &mut resp.topics {
                    if allowed(t) {
                        if let Some(n) = &t.name {
                            t.topic_authorized_operations = a.operations(R::Topic, &n.0);
                        }
                    } else {
                        *t = kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_error_code(code(TOPIC_DENIED));
                    }
                }
            }),
        )
    }

    fn describe_producers(&self, r: kafka_protocol::messages::DescribeProducersRequest) -> Gate {
        Gate::Pass(
            RequestKind::DescribeProducers(r),
            patch(|a, resp, _| {
                if let ResponseKind::DescribeProducers(resp) = resp {
                    for t in resp.topics.iter_mut().filter(|t| !a.topic(Read, &t.name.0)) {
                        for p in &mut t.partitions {
                            p.error_code = code(TOPIC_DENIED);
                            p.error_message = None;
                            p.active_producers.clear();
                        }
                    }
                }
            }),
        )
    }

    fn create_topics(&self, mut r: kafka_protocol::messages::CreateTopicsRequest) -> Gate {
        use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
        let on_cluster = self.cluster(Create);
        let denied = take(&mut r.topics, |t| {
            !on_cluster && !self.topic(Create, &t.name.0)
        });
        let refused: Vec<CreatableTopicResult> = denied
            .into_iter()
            .map(|t| {
                CreatableTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(code(TOPIC_DENIED))
                    .with_error_message(Some(super::str_bytes("Authorization failed.")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
            })
            .collect();
        Gate::Pass(
            RequestKind::CreateTopics(r),
            patch(move |a, resp, _| {
                if let ResponseKind::CreateTopics(resp) = resp {
                    for t in resp
                        .topics
                        .iter_mut()
                        .filter(|t| !a.topic(DescribeConfigs, &t.name.0))
                    {
                        t.topic_config_error_code = code(TOPIC_DENIED);
                        t.configs = None;
                    }
                    resp.topics.extend(refused);
                }
            }),
        )
    }

    fn delete_topics(&self, mut r: kafka_protocol::messages::DeleteTopicsRequest) -> Gate {
        use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
        let result = |name: Option<kafka_protocol::messages::TopicName>, id: uuid::Uuid| {
            DeletableTopicResult::default()
                .with_name(name)
                .with_topic_id(id)
                .with_error_code(code(TOPIC_DENIED))
                .with_error_message(Some(super::str_bytes("Authorization failed.")))
        };
        let mut refused: Vec<DeletableTopicResult> =
            take(&mut r.topic_names, |n| !self.topic(Delete, &n.0))
                .into_iter()
                .map(|n| result(Some(n), uuid::Uuid::nil()))
                .collect();
        refused.extend(
            take(&mut r.topics, |t| {
                let name = match &t.name {
                    Some(n) => n.0.to_string(),
                    None => match self.topic_by_id(t.topic_id) {
                        Some(n) => n,
                        None => return false,
                    },
                };
                !self.topic(Delete, &name)
            })
            .into_iter()
            .map(|t| result(t.name, t.topic_id)),
        );
        if refused.is_empty() {
            return Gate::Pass(RequestKind::DeleteTopics(r), None);
        }
        Gate::Pass(
            RequestKind::DeleteTopics(r),
            patch(move |_, resp, _| {
                if let ResponseKind::DeleteTopics(resp) = resp {
                    resp.responses.extend(refused);
                }
            }),
        )
    }

    fn delete_records(&self, mut r: kafka_protocol::messages::DeleteRecordsRequest) -> Gate {
        use kafka_protocol::messages::delete_records_response::*;
        let denied = take(&mut r.topics, |t| !self.topic(Delete, &t.name.0));
        if denied.is_empty() {
            return Gate::Pass(RequestKind::DeleteRecords(r), None);
        }
        let refused: Vec<DeleteRecordsTopicResult> = denied
            .into_iter()
            .map(|t| {
                DeleteRecordsTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                DeleteRecordsPartitionResult::default()
                                    .with_partition_index(p.partition_index)
                                    .with_low_watermark(-1)
                                    .with_error_code(code(TOPIC_DENIED))
                            })
                            .collect(),
                    )
            })
            .collect();
        Gate::Pass(
            RequestKind::DeleteRecords(r),
            patch(move |_, resp, _| {
                if let ResponseKind::DeleteRecords(resp) = resp {
                    resp.topics.extend(refused);
                }
            }),
        )
    }

    fn create_partitions(&self, mut r: kafka_protocol::messages::CreatePartitionsRequest) -> Gate {
        use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
        let denied = take(&mut r.topics, |t| !self.topic(Alter, &t.name.0));
        if denied.is_empty() {
            return Gate::Pass(RequestKind::CreatePartitions(r), None);
        }
        let refused: Vec<CreatePartitionsTopicResult> = denied
            .into_iter()
            .map(|t| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(code(TOPIC_DENIED))
                    .with_error_message(Some(super::str_bytes(
                        "The topic authorization is failed.",
                    )))
            })
            .collect();
        Gate::Pass(
            RequestKind::CreatePartitions(r),
            patch(move |_, resp, _| {
                if let ResponseKind::CreatePartitions(resp) = resp {
                    resp.results.extend(refused);
                }
            }),
        )
    }

    /// Whether the session may `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) the config
    /// resource; the error if not.
    fn config_resource(&self, operation: Operation, resource_type: i8, name: &str) -> Option<i16> {
        let (allowed, error) = match resource_type {
            TOPIC_CONFIG_RESOURCE => (self.topic(operation, name), code(TOPIC_DENIED)),
            BROKER_CONFIG_RESOURCE | BROKER_LOGGER_CONFIG_RESOURCE => {
                (self.cluster(operation), code(CLUSTER_DENIED))
            }
            MIRROR_CONFIG_RESOURCE => (
                self.allows(operation, R::ClusterMirror, name),
                MIRROR_DENIED,
            ),
            // Unknown types: the handler answers INVALID_REQUEST.
            _ => (true, 0),
        };
        (!allowed).then_some(error)
    }

    fn describe_configs(&self, r: kafka_protocol::messages::DescribeConfigsRequest) -> Gate {
        Gate::Pass(
            RequestKind::DescribeConfigs(r),
            patch(|a, resp, _| {
                if let ResponseKind::DescribeConfigs(resp) = resp {
                    for result in &mut resp.results {
                        if let Some(error) = a.config_resource(
                            DescribeConfigs,
                            result.resource_type,
                            &result.resource_name,
                        ) {
                            result.error_code = error;
                            result.error_message = None;
                            result.configs.clear();
                        }
                    }
                }
            }),
        )
    }

    fn alter_configs(&self, mut r: kafka_protocol::messages::AlterConfigsRequest) -> Gate {
        use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
        let mut refused = Vec::new();
        r.resources.retain(|res| {
            match self.config_resource(AlterConfigs, res.resource_type, &res.resource_name) {
                None => true,
                Some(error) => {
                    refused.push(
                        AlterConfigsResourceResponse::default()
                            .with_error_code(error)
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name.clone()),
                    );
                    false
                }
            }
        });
        if refused.is_empty() {
            return Gate::Pass(RequestKind::AlterConfigs(r), None);
        }
        Gate::Pass(
            RequestKind::AlterConfigs(r),
            patch(move |_, resp, _| {
                if let ResponseKind::AlterConfigs(resp) = resp {
                    resp.responses.extend(refused);
                }
            }),
        )
    }

    fn incremental_alter_configs(
        &self,
        mut r: kafka_protocol::messages::IncrementalAlterConfigsRequest,
    ) -> Gate {
        use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
        let mut refused = Vec::new();
        r.resources.retain(|res| {
            match self.config_resource(AlterConfigs, res.resource_type, &res.resource_name) {
                None => true,
                Some(error) => {
                    refused.push(
                        AlterConfigsResourceResponse::default()
                            .with_error_code(error)
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name.clone()),
                    );
                    false
                }
            }
        });
        if refused.is_empty() {
            return Gate::Pass(RequestKind::IncrementalAlterConfigs(r), None);
        }
        Gate::Pass(
            RequestKind::IncrementalAlterConfigs(r),
            patch(move |_, resp, _| {
                if let ResponseKind::IncrementalAlterConfigs(resp) = resp {
                    resp.responses.extend(refused);
                }
            }),
        )
    }

    /// FindCoordinator: DESCRIBE on the group or transactional id.
    fn coordinator_key(&self, key_type: i8, key: &str) -> Option<ResponseError> {
        match key_type {
            0 if !self.group(Describe, key) => Some(GROUP_DENIED),
            1 if !self.allows(Describe, R::TransactionalId, key) => Some(TXN_DENIED),
            _ => None,
        }
    }

    fn find_coordinator(&self, r: kafka_protocol::messages::FindCoordinatorRequest) -> Gate {
        if r.coordinator_keys.is_empty() {
            if let Some(error) = self.coordinator_key(r.key_type, &r.key) {
                return Gate::Refuse(ResponseKind::FindCoordinator(
                    kafka_protocol::messages::FindCoordinatorResponse::default()
                        .with_error_code(code(error))
                        .with_node_id(kafka_protocol::messages::BrokerId(-1))
                        .with_port(-1),
                ));
            }
            return Gate::Pass(RequestKind::FindCoordinator(r), None);
        }
        let key_type = r.key_type;
        Gate::Pass(
            RequestKind::FindCoordinator(r),
            patch(move |a, resp, _| {
                if let ResponseKind::FindCoordinator(resp) = resp {
                    for c in &mut resp.coordinators {
                        if let Some(error) = a.coordinator_key(key_type, &c.key) {
                            *c = kafka_protocol::messages::find_coordinator_response::Coordinator::default()
                                .with_key(c.key.clone())
                                .with_node_id(kafka_protocol::messages::BrokerId(-1))
                                .with_port(-1)
                                .with_error_code(code(error));
                        }
                    }
                }
            }),
        )
    }

    fn offset_commit(&self, mut r: kafka_protocol::messages::OffsetCommitRequest) -> Gate {
        use kafka_protocol::messages::offset_commit_response::*;
        let refuse = |topics: &[kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic],
                      error: ResponseError| {
            topics
                .iter()
                .map(|t| {
                    OffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_topic_id(t.topic_id)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    OffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code(error))
                                })
                                .collect(),
                        )
                })
                .collect::<Vec<_>>()
        };
        if !self.group(Read, &r.group_id.0) {
            return Gate::Refuse(ResponseKind::OffsetCommit(
                kafka_protocol::messages::OffsetCommitResponse::default()
                    .with_topics(refuse(&r.topics, GROUP_DENIED)),
            ));
        }
        let denied = take(&mut r.topics, |t| !self.topic(Read, &t.name.0));
        if denied.is_empty() {
            return Gate::Pass(RequestKind::OffsetCommit(r), None);
        }
        let refused = refuse(&denied, TOPIC_DENIED);
        Gate::Pass(
            RequestKind::OffsetCommit(r),
            patch(move |_, resp, _| {
                if let ResponseKind::OffsetCommit(resp) = resp {
                    resp.topics.extend(refused);
                }
            }),
        )
    }

    /// OffsetFetch: DESCRIBE on the group, and offsets only of topics the session may
    /// DESCRIBE (named ones answered with the error, the others left out).
    fn offset_fetch(&self, r: kafka_protocol::messages::OffsetFetchRequest, version: i16) -> Gate {
        if version < 8 && !self.group(Describe, &r.group_id.0) {
            return Gate::Refuse(ResponseKind::OffsetFetch(
                kafka_protocol::messages::OffsetFetchResponse::default()
                    .with_error_code(code(GROUP_DENIED)),
            ));
        }
        let named_single = r.topics.is_some();
        let named_groups: Vec<String> = r
            .groups
            .iter()
            .filter(|g| g.topics.is_some())
            .map(|g| g.group_id.0.to_string())
            .collect();
        Gate::Pass(
            RequestKind::OffsetFetch(r),
            patch(move |a, resp, _| {
                let ResponseKind::OffsetFetch(resp) = resp else {
                    return;
                };
                if named_single {
                    for t in resp
                        .topics
                        .iter_mut()
                        .filter(|t| !a.topic(Describe, &t.name.0))
                    {
                        for p in &mut t.partitions {
                            p.committed_offset = -1;
                            p.committed_leader_epoch = -1;
                            p.metadata = None;
                            p.error_code = code(TOPIC_DENIED);
                        }
                    }
                } else {
                    resp.topics.retain(|t| a.topic(Describe, &t.name.0));
                }
                for g in &mut resp.groups {
                    if !a.group(Describe, &g.group_id.0) {
                        g.error_code = code(GROUP_DENIED);
                        g.topics.clear();
                    } else if named_groups
                        .iter()
                        .any(|n| n.as_str() == g.group_id.0.as_str())
                    {
                        for t in g
                            .topics
                            .iter_mut()
                            .filter(|t| !a.topic(Describe, &t.name.0))
                        {
                            for p in &mut t.partitions {
                                p.committed_offset = -1;
                                p.committed_leader_epoch = -1;
                                p.metadata = None;
                                p.error_code = code(TOPIC_DENIED);
                            }
                        }
                    } else {
                        g.topics.retain(|t| a.topic(Describe, &t.name.0));
                    }
                }
            }),
        )
    }

    fn list_groups(&self, r: kafka_protocol::messages::ListGroupsRequest) -> Gate {
        if self.cluster(Describe) {
            return Gate::Pass(RequestKind::ListGroups(r), None);
        }
        Gate::Pass(
            RequestKind::ListGroups(r),
            patch(|a, resp, _| {
                if let ResponseKind::ListGroups(resp) = resp {
                    resp.groups.retain(|g| a.group(Describe, &g.group_id.0));
                }
            }),
        )
    }

    fn describe_groups(&self, r: kafka_protocol::messages::DescribeGroupsRequest) -> Gate {
        let with_ops = r.include_authorized_operations;
        Gate::Pass(
            RequestKind::DescribeGroups(r),
            patch(move |a, resp, _| {
                if let ResponseKind::DescribeGroups(resp) = resp {
                    for g in &mut resp.groups {
                        if !a.group(Describe, &g.group_id.0) {
                            *g = kafka_protocol::messages::describe_groups_response::DescribedGroup::default()
                                .with_group_id(g.group_id.clone())
                                .with_error_code(code(GROUP_DENIED));
                        } else if with_ops {
                            g.authorized_operations = a.operations(R::Group, &g.group_id.0);
                        }
                    }
                }
            }),
        )
    }

    fn delete_groups(&self, mut r: kafka_protocol::messages::DeleteGroupsRequest) -> Gate {
        use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
        let denied = take(&mut r.groups_names, |g| !self.group(Delete, &g.0));
        if denied.is_empty() {
            return Gate::Pass(RequestKind::DeleteGroups(r), None);
        }
        let refused: Vec<DeletableGroupResult> = denied
            .into_iter()
            .map(|g| {
                DeletableGroupResult::default()
                    .with_group_id(g)
                    .with_error_code(code(GROUP_DENIED))
            })
            .collect();
        Gate::Pass(
            RequestKind::DeleteGroups(r),
            patch(move |_, resp, _| {
                if let ResponseKind::DeleteGroups(resp) = resp {
                    resp.results.extend(refused);
                }
            }),
        )
    }

    fn offset_delete(&self, mut r: kafka_protocol::messages::OffsetDeleteRequest) -> Gate {
        use kafka_protocol::messages::offset_delete_response::*;
        if !self.group(Delete, &r.group_id.0) {
            return Gate::Refuse(ResponseKind::OffsetDelete(
                kafka_protocol::messages::OffsetDeleteResponse::default()
                    .with_error_code(code(GROUP_DENIED)),
            ));
        }
        let denied = take(&mut r.topics, |t| !self.topic(Read, &t.name.0));
        if denied.is_empty() {
            return Gate::Pass(RequestKind::OffsetDelete(r), None);
        }
        let refused: Vec<OffsetDeleteResponseTopic> = denied
            .into_iter()
            .map(|t| {
                OffsetDeleteResponseTopic::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetDeleteResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code(TOPIC_DENIED))
                            })
                            .collect(),
                    )
            })
            .collect();
        Gate::Pass(
            RequestKind::OffsetDelete(r),
            patch(move |_, resp, _| {
                if let ResponseKind::OffsetDelete(resp) = resp {
                    resp.topics.extend(refused);
                }
            }),
        )
    }

    fn init_producer_id(&self, r: kafka_protocol::messages::InitProducerIdRequest) -> Gate {
        let error = match &r.transactional_id {
            Some(id) if !self.allows(Write, R::TransactionalId, &id.0) => Some(TXN_DENIED),
            None if !self.cluster(IdempotentWrite) && !self.allows_some(Write, R::Topic) => {
                Some(CLUSTER_DENIED)
            }
            _ => None,
        };
        match error {
            None => Gate::Pass(RequestKind::InitProducerId(r), None),
            Some(e) => Gate::Refuse(ResponseKind::InitProducerId(
                kafka_protocol::messages::InitProducerIdResponse::default()
                    .with_error_code(code(e))
                    .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                    .with_producer_epoch(-1),
            )),
        }
    }

    /// AddPartitionsToTxn (v0-3): WRITE on the transactional id and on every topic; if
    /// any topic is refused nothing is added and the others answer OPERATION_NOT_ATTEMPTED,
    /// as in Kafka.
    fn add_partitions_to_txn(
        &self,
        r: kafka_protocol::messages::AddPartitionsToTxnRequest,
    ) -> Gate {
        use kafka_protocol::messages::add_partitions_to_txn_response::*;
        let txn_ok = self.allows(
            Write,
            R::TransactionalId,
            &r.v3_and_below_transactional_id.0,
        );
        let denied_topic = |name: &str| !self.topic(Write, name);
        if txn_ok
            && !r
                .v3_and_below_topics
                .iter()
                .any(|t| denied_topic(&t.name.0))
        {
            return Gate::Pass(RequestKind::AddPartitionsToTxn(r), None);
        }
        let results = r
            .v3_and_below_topics
            .iter()
            .map(|t| {
                let error = if !txn_ok {
                    TXN_DENIED
                } else if denied_topic(&t.name.0) {
                    TOPIC_DENIED
                } else {
                    ResponseError::OperationNotAttempted
                };
                AddPartitionsToTxnTopicResult::default()
                    .with_name(t.name.clone())
                    .with_results_by_partition(
                        t.partitions
                            .iter()
                            .map(|p| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(*p)
                                    .with_partition_error_code(code(error))
                            })
                            .collect(),
                    )
            })
            .collect();
        Gate::Refuse(ResponseKind::AddPartitionsToTxn(
            kafka_protocol::messages::AddPartitionsToTxnResponse::default()
                .with_results_by_topic_v3_and_below(results),
        ))
    }

    fn add_offsets_to_txn(&self, r: kafka_protocol::messages::AddOffsetsToTxnRequest) -> Gate {
        let error = if !self.allows(Write, R::TransactionalId, &r.transactional_id.0) {
            TXN_DENIED
        } else if !self.group(Read, &r.group_id.0) {
            GROUP_DENIED
        } else {
            return Gate::Pass(RequestKind::AddOffsetsToTxn(r), None);
        };
        Gate::Refuse(ResponseKind::AddOffsetsToTxn(
            kafka_protocol::messages::AddOffsetsToTxnResponse::default()
                .with_error_code(code(error)),
        ))
    }

    fn txn_offset_commit(&self, mut r: kafka_protocol::messages::TxnOffsetCommitRequest) -> Gate {
        use kafka_protocol::messages::txn_offset_commit_response::*;
        let refuse = |topics: &[kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic],
                      error: ResponseError| {
            topics
                .iter()
                .map(|t| {
                    TxnOffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    TxnOffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code(error))
                                })
                                .collect(),
                        )
                })
                .collect::<Vec<_>>()
        };
        let whole = if !self.allows(Write, R::TransactionalId, &r.transactional_id.0) {
            Some(TXN_DENIED)
        } else if !self.group(Read, &r.group_id.0) {
            Some(GROUP_DENIED)
        } else {
            None
        };
        if let Some(error) = whole {
            return Gate::Refuse(ResponseKind::TxnOffsetCommit(
                kafka_protocol::messages::TxnOffsetCommitResponse::default()
                    .with_topics(refuse(&r.topics, error)),
            ));
        }
        let denied = take(&mut r.topics, |t| !self.topic(Read, &t.name.0));
        if denied.is_empty() {
            return Gate::Pass(RequestKind::TxnOffsetCommit(r), None);
        }
        let refused = refuse(&denied, TOPIC_DENIED);
        Gate::Pass(
            RequestKind::TxnOffsetCommit(r),
            patch(move |_, resp, _| {
                if let ResponseKind::TxnOffsetCommit(resp) = resp {
                    resp.topics.extend(refused);
                }
            }),
        )
    }

    fn describe_transactions(
        &self,
        r: kafka_protocol::messages::DescribeTransactionsRequest,
    ) -> Gate {
        Gate::Pass(
            RequestKind::DescribeTransactions(r),
            patch(|a, resp, _| {
                if let ResponseKind::DescribeTransactions(resp) = resp {
                    for t in &mut resp.transaction_states {
                        if !a.allows(Describe, R::TransactionalId, &t.transactional_id.0) {
                            *t = kafka_protocol::messages::describe_transactions_response::TransactionState::default()
                                .with_transactional_id(t.transactional_id.clone())
                                .with_error_code(code(TXN_DENIED));
                        }
                    }
                }
            }),
        )
    }

    fn write_txn_markers(&self, r: kafka_protocol::messages::WriteTxnMarkersRequest) -> Gate {
        use kafka_protocol::messages::write_txn_markers_response::*;
        if self.cluster(ClusterAction) {
            return Gate::Pass(RequestKind::WriteTxnMarkers(r), None);
        }
        let markers = r
            .markers
            .iter()
            .map(|m| {
                WritableTxnMarkerResult::default()
                    .with_producer_id(m.producer_id)
                    .with_topics(
                        m.topics
                            .iter()
                            .map(|t| {
                                WritableTxnMarkerTopicResult::default()
                                    .with_name(t.name.clone())
                                    .with_partitions(
                                        t.partition_indexes
                                            .iter()
                                            .map(|p| {
                                                WritableTxnMarkerPartitionResult::default()
                                                    .with_partition_index(*p)
                                                    .with_error_code(code(CLUSTER_DENIED))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
            })
            .collect();
        Gate::Refuse(ResponseKind::WriteTxnMarkers(
            kafka_protocol::messages::WriteTxnMarkersResponse::default().with_markers(markers),
        ))
    }

    /// The mirror RPCs (reference §2.15). `Err` is the answer when refused.
    pub fn admit_mirror(
        &self,
        request: &crate::wire::mirror::MirrorRequest,
    ) -> Result<(), crate::wire::mirror::MirrorResponse> {
        use crate::wire::mirror::MirrorRequest as M;
        let mirror = |op: Operation, name: &str| self.allows(op, R::ClusterMirror, name);
        // Changing a mirror's topics needs ALTER on the mirror and ALTER_CONFIGS on
        // every topic; one refused topic refuses the whole request.
        let alter_topics = |name: &str, topics: Vec<&str>| {
            if !mirror(Alter, name) {
                Some((
                    MIRROR_DENIED,
                    "ALTER on the cluster mirror is not authorized",
                ))
            } else if topics.iter().any(|t| !self.topic(AlterConfigs, t)) {
                Some((
                    code(TOPIC_DENIED),
                    "ALTER_CONFIGS on a topic of the request is not authorized",
                ))
            } else {
                None
            }
        };
        let refusal: Option<(i16, &str)> = match request {
            M::CreateMirror(r) => (!mirror(Create, &r.mirror_name)).then_some((
                MIRROR_DENIED,
                "CREATE on the cluster mirror is not authorized",
            )),
            M::DeleteMirror(r) => (!mirror(Delete, &r.mirror_name)).then_some((
                MIRROR_DENIED,
                "DELETE on the cluster mirror is not authorized",
            )),
            M::AddTopicsToMirror(r) => alter_topics(
                &r.mirror_name,
                r.topics.iter().map(|t| t.name.as_str()).collect(),
            ),
            M::RemoveTopicsFromMirror(r) => alter_topics(
                &r.mirror_name,
                r.topics.iter().map(|t| t.name.as_str()).collect(),
            ),
            M::PauseMirrorTopics(r) => alter_topics(
                &r.mirror_name,
                r.topics.iter().map(|t| t.name.as_str()).collect(),
            ),
            M::ResumeMirrorTopics(r) => alter_topics(
                &r.mirror_name,
                r.topics.iter().map(|t| t.name.as_str()).collect(),
            ),
            M::ReadMirrorStates(_) | M::WriteMirrorStates(_) => (!self.cluster(ClusterAction))
                .then_some((
                    code(CLUSTER_DENIED),
                    "CLUSTER_ACTION on the cluster is not authorized",
                )),
            M::ListMirrors(_) | M::DescribeMirrors(_) => None,
        };
        match refusal {
            Some((error, message)) => {
                Err(crate::api::mirror::error_response(request, error, message))
            }
            None => Ok(()),
        }
    }

    /// ListMirrors and DescribeMirrors answer only for the mirrors the session may
    /// DESCRIBE: others are left out of listings and answered with the error when named.
    pub fn filter_mirror_response(
        &self,
        named: bool,
        response: &mut crate::wire::mirror::MirrorResponse,
    ) {
        use crate::wire::mirror::MirrorResponse as M;
        let may = |name: &str| self.allows(Describe, R::ClusterMirror, name);
        match response {
            M::ListMirrors(r) => r.mirrors.retain(|m| may(&m.mirror_name)),
            M::DescribeMirrors(r) => {
                if !named {
                    r.mirrors.retain(|m| may(&m.mirror_name));
                }
                for m in &mut r.mirrors {
                    if !may(&m.mirror_name) {
                        m.error_code = MIRROR_DENIED;
                        m.topics.clear();
                        m.sync.clear();
                    } else if m.authorized_operations != i32::MIN {
                        m.authorized_operations = self.operations(R::ClusterMirror, &m.mirror_name);
                    }
                }
            }
            _ => {}
        }
    }
}
