//! DescribeQuorum (55), so `kafka-metadata-quorum describe --status / --replication`
//! works: the metadata quorum as this node's controller sees it (the leader, the Raft
//! term as the leader epoch, the commit index as the high watermark, each voter's log
//! end and last contact). The leader knows every voter's log end; another member knows
//! its own, the rest are -1. Broker-only nodes are the quorum's learners: its
//! observers.

use std::rc::Rc;

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::ResponseError;

use crate::api::{str_bytes, topic_name};
use crate::controller::{AdminRequest, AdminResponse};
use crate::shard::{now_ms, ShardCtx};

/// The metadata log's name in Kafka.
const METADATA_TOPIC: &str = "__cluster_metadata";

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    _request: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let answer = ctx.controller.submit(AdminRequest::DescribeQuorum).await;
    let q = match answer {
        Ok(AdminResponse::Quorum(q)) => q,
        Ok(AdminResponse::Failed {
            error_code,
            message,
        }) => {
            return DescribeQuorumResponse::default()
                .with_error_code(error_code)
                .with_error_message(Some(str_bytes(message)))
        }
        _ => {
            return DescribeQuorumResponse::default()
                .with_error_code(ResponseError::UnknownServerError.code())
        }
    };
    let now = now_ms();
    let replica = |(id, end, ago, directory): &crate::controller::QuorumMember| {
        let seen = ago.map_or(-1, |d| now - d.as_millis() as i64);
        let mut r = ReplicaState::default()
            .with_replica_id(BrokerId(*id))
            .with_log_end_offset(*end);
        if version >= 1 {
            r.last_fetch_timestamp = seen;
            r.last_caught_up_timestamp = if *end >= q.high_watermark { seen } else { -1 };
        }
        if version >= 2 {
            r.replica_directory_id = directory.unwrap_or_default();
        }
        r
    };
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(q.leader.unwrap_or(-1)))
        .with_leader_epoch(q.epoch)
        .with_high_watermark(q.high_watermark)
        .with_current_voters(q.voters.iter().map(replica).collect())
        .with_observers(q.observers.iter().map(replica).collect());
    let mut resp = DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(topic_name(METADATA_TOPIC))
        .with_partitions(vec![partition])]);
    if version >= 2 {
        // Where each voter's brokers are reached (its Kafka listener).
        let image = ctx.metadata.load();
        resp.nodes = q
            .voters
            .iter()
            .filter_map(|(id, _, _, _)| {
                let addr = image.broker_address(*id)?;
                Some(Node::default().with_node_id(BrokerId(*id)).with_listeners(
                    vec![Listener::default()
                            .with_name(str_bytes("PLAINTEXT"))
                            .with_host(str_bytes(addr.ip().to_string()))
                            .with_port(addr.port())],
                ))
            })
            .collect();
    }
    resp
}
