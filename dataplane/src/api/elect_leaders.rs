//! ElectLeaders (43): preferred-leader elections (`kafka-leader-election
//! --election-type PREFERRED`, and what auto leader rebalance does on its own) and
//! unclean ones (`UNCLEAN`, for partitions without a live leader). One
//! `AdminRequest::ElectLeaders` to the controller; partitions it need not move answer
//! ELECTION_NOT_NEEDED, as Kafka's do.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};

use crate::api::{admin, str_bytes, topic_name};
use crate::controller::AdminRequest;
use crate::shard::ShardCtx;
use crate::types::TopicPartition;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    // v0 knows only preferred elections.
    let preferred = version < 1 || request.election_type == 0;
    let partitions: Option<Vec<TopicPartition>> = request.topic_partitions.map(|ts| {
        ts.into_iter()
            .flat_map(|t| {
                let name = t.topic.0.to_string();
                t.partitions
                    .into_iter()
                    .map(move |p| TopicPartition::new(name.clone(), p))
            })
            .collect()
    });
    let asked: Vec<TopicPartition> = match &partitions {
        Some(p) => p.clone(),
        None => {
            let image = ctx.metadata.load();
            image
                .topics
                .values()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| TopicPartition::new(t.name.clone(), p.partition))
                })
                .collect()
        }
    };
    let names: Vec<String> = asked.iter().map(ToString::to_string).collect();
    let results = admin::submit(
        ctx,
        AdminRequest::ElectLeaders {
            preferred,
            partitions: asked.clone(),
        },
        &names,
    )
    .await;
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for (tp, r) in asked.into_iter().zip(results) {
        by_topic.entry(tp.topic.clone()).or_default().push(
            PartitionResult::default()
                .with_partition_id(tp.partition)
                .with_error_code(r.error_code)
                .with_error_message(r.message.map(str_bytes)),
        );
    }
    let replica_election_results = by_topic
        .into_iter()
        .map(|(name, partition_result)| {
            ReplicaElectionResult::default()
                .with_topic(topic_name(&name))
                .with_partition_result(partition_result)
        })
        .collect();
    // v1+ has a request-level error code: 0, every answer is per partition.
    ElectLeadersResponse::default().with_replica_election_results(replica_election_results)
}
