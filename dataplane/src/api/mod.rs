//! Kafka API handlers, one module per API. [`handle`] dispatches a decoded request;
//! [`SUPPORTED`] is what ApiVersions advertises and what the connection accepts.
//! Errors of the log and controller are mapped to Kafka error codes here, at the API
//! boundary, and nowhere else.

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod admin;
pub mod alter_configs;
pub mod api_versions;
pub mod authz;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod elect_leaders;
pub mod end_txn;
pub mod errors;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod mirror;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod raft_voters;
pub mod reassignments;
pub mod scram_credentials;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

use std::rc::Rc;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::shard::ShardCtx;

/// API keys and the versions Twinlog serves.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 10),
    (ApiKey::Fetch, 4, 16),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    // v0: the tokens that follow travel as bare size-prefixed frames; v1: in
    // SaslAuthenticate.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::AddRaftVoter, 0, 0),
    (ApiKey::RemoveRaftVoter, 0, 0),
];

pub fn is_supported(key: ApiKey, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|(k, min, max)| *k == key && (*min..=*max).contains(&version))
}

/// Checks one request against the ACLs (when an authorizer is configured) and
/// dispatches what passes. `None`: the request gets no response (Produce with acks=0).
pub async fn handle(
    ctx: &Rc<ShardCtx>,
    conn: &crate::net::ConnInfo,
    header: &RequestHeader,
    request: RequestKind,
) -> Option<ResponseKind> {
    let version = header.request_api_version;
    let Some(authz) = authz::Authz::new(ctx, conn) else {
        return dispatch(ctx, conn, header, request).await;
    };
    match authz.admit(request, version) {
        authz::Gate::Refuse(response) => Some(response),
        authz::Gate::Pass(request, patch) => {
            let mut response = dispatch(ctx, conn, header, request).await;
            if let (Some(patch), Some(r)) = (patch, response.as_mut()) {
                patch(&authz, r, version);
            }
            response
        }
    }
}

/// Produce requests pipelined on one connection ([`produce::handle_group`]), each
/// checked against the ACLs as [`handle`] does, answered in their order.
pub async fn handle_produce_group(
    ctx: &Rc<ShardCtx>,
    conn: &crate::net::ConnInfo,
    requests: Vec<(RequestHeader, kafka_protocol::messages::ProduceRequest)>,
) -> Vec<Option<ResponseKind>> {
    let authz = authz::Authz::new(ctx, conn);
    let mut answers: Vec<Option<ResponseKind>> = requests.iter().map(|_| None).collect();
    // (slot, version, patch) of each request the ACLs let through, and the request.
    let mut passed = Vec::with_capacity(requests.len());
    let mut group = Vec::with_capacity(requests.len());
    for (i, (header, request)) in requests.into_iter().enumerate() {
        let version = header.request_api_version;
        let Some(authz) = &authz else {
            passed.push((i, version, None));
            group.push((request, version));
            continue;
        };
        match authz.admit(RequestKind::Produce(request), version) {
            authz::Gate::Refuse(response) => answers[i] = Some(response),
            authz::Gate::Pass(RequestKind::Produce(request), patch) => {
                passed.push((i, version, patch));
                group.push((request, version));
            }
            authz::Gate::Pass(other, patch) => {
                let mut response = dispatch(ctx, conn, &header, other).await;
                if let (Some(patch), Some(r)) = (patch, response.as_mut()) {
                    patch(authz, r, version);
                }
                answers[i] = response;
            }
        }
    }
    let responses = produce::handle_group(ctx, &conn.listener, group).await;
    for ((i, version, patch), response) in passed.into_iter().zip(responses) {
        let mut response = response.map(ResponseKind::Produce);
        if let (Some(patch), Some(authz), Some(r)) = (patch, &authz, response.as_mut()) {
            patch(authz, r, version);
        }
        answers[i] = response;
    }
    answers
}

async fn dispatch(
    ctx: &Rc<ShardCtx>,
    conn: &crate::net::ConnInfo,
    header: &RequestHeader,
    request: RequestKind,
) -> Option<ResponseKind> {
    let version = header.request_api_version;
    Some(match request {
        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions::handle(version)),
        // The connection answers these itself on a SASL listener, before any other
        // request; here (a PLAINTEXT listener, or already authenticated) they are out
        // of order, as in Kafka.
        RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(
            kafka_protocol::messages::SaslHandshakeResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.code()),
        ),
        RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(
            kafka_protocol::messages::SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "SASL authentication is not expected on this connection now",
                ))),
        ),
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(find_coordinator::handle(ctx, &conn.listener, r, version))
        }
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(metadata::handle(ctx, &conn.listener, r, version).await)
        }
        RequestKind::Produce(r) => {
            return produce::handle(ctx, &conn.listener, r, version)
                .await
                .map(ResponseKind::Produce)
        }
        RequestKind::Fetch(r) => {
            ResponseKind::Fetch(fetch::handle(ctx, &conn.listener, r, version).await)
        }
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(ctx, r, version).await)
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(ctx, r, version).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(ctx, r, version).await)
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(ctx, r, version).await)
        }
        RequestKind::DescribeQuorum(r) => {
            ResponseKind::DescribeQuorum(describe_quorum::handle(ctx, r, version).await)
        }
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(write_txn_markers::handle(ctx, r).await)
        }
        RequestKind::AddRaftVoter(r) => {
            ResponseKind::AddRaftVoter(raft_voters::handle_add(ctx, r).await)
        }
        RequestKind::RemoveRaftVoter(r) => {
            ResponseKind::RemoveRaftVoter(raft_voters::handle_remove(ctx, r).await)
        }
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(ctx, r, version).await)
        }
        RequestKind::AlterPartitionReassignments(r) => {
            ResponseKind::AlterPartitionReassignments(reassignments::alter(ctx, r, version).await)
        }
        RequestKind::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(reassignments::list(ctx, r, version))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(ctx, r, version).await)
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(alter_configs::handle(ctx, r, version).await)
        }
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            alter_configs::handle_incremental(ctx, r, version).await,
        ),
        RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(
            describe_cluster::handle(ctx, &conn.listener, r, version).await,
        ),
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(ctx, r, version).await)
        }
        RequestKind::OffsetForLeaderEpoch(r) => ResponseKind::OffsetForLeaderEpoch(
            offset_for_leader_epoch::handle(ctx, r, version).await,
        ),
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(ctx, r, version).await)
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(join_group::handle(ctx, header, r, version).await)
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(sync_group::handle(ctx, r, version).await)
        }
        RequestKind::Heartbeat(r) => {
            ResponseKind::Heartbeat(heartbeat::handle(ctx, r, version).await)
        }
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(leave_group::handle(ctx, r, version).await)
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(offset_commit::handle(ctx, r, version).await)
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(offset_fetch::handle(ctx, r, version).await)
        }
        RequestKind::ListGroups(r) => {
            ResponseKind::ListGroups(list_groups::handle(ctx, r, version).await)
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(describe_groups::handle(ctx, r, version).await)
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(delete_groups::handle(ctx, r, version).await)
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(offset_delete::handle(ctx, r, version).await)
        }
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(add_partitions_to_txn::handle(ctx, r, version).await)
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(add_offsets_to_txn::handle(ctx, r, version).await)
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(end_txn::handle(ctx, r, version).await),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(txn_offset_commit::handle(ctx, r, version).await)
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(describe_producers::handle(ctx, r).await)
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(describe_transactions::handle(ctx, r).await)
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(ctx, r, version).await)
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions::handle(ctx, r))
        }
        RequestKind::DescribeUserScramCredentials(r) => {
            ResponseKind::DescribeUserScramCredentials(scram_credentials::describe(ctx, r))
        }
        RequestKind::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(scram_credentials::alter(ctx, r).await)
        }
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(acls::create(ctx, r).await),
        RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(acls::describe(ctx, r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(acls::delete(ctx, r).await),
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(list_transactions::handle(ctx, r, version).await)
        }
        other => {
            // is_supported() filters everything else before decoding.
            tracing::warn!(request = ?std::mem::discriminant(&other), "no handler for a supported API");
            return None;
        }
    })
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}
