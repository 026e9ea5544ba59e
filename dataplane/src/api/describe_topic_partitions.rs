//! DescribeTopicPartitions (75), v0 (KIP-966): topics and their partitions from the
//! metadata image, with Kafka's paging: topics in name order from the request's cursor,
//! at most `response_partition_limit` partitions (capped like Kafka's
//! `max.request.partition.size.limit`), and a next cursor where the limit cut a topic
//! list short. `kafka-topics --describe` and the Java AdminClient's `describeTopics` use
//! it. One node: every replica list is the leader alone; ELR lists are empty.

use std::rc::Rc;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};
use kafka_protocol::ResponseError;

use crate::api::topic_name;
use crate::shard::ShardCtx;

/// Kafka's `max.request.partition.size.limit` default.
const PARTITION_LIMIT_MAX: i32 = 2000;

pub fn handle(
    ctx: &Rc<ShardCtx>,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let image = ctx.metadata.load();
    let mut names: Vec<String> = if request.topics.is_empty() {
        image.topics.keys().cloned().collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect()
    };
    names.sort();
    names.dedup();
    let (from_topic, from_partition) = match &request.cursor {
        Some(c) => (c.topic_name.0.to_string(), c.partition_index.max(0)),
        None => (String::new(), 0),
    };
    let mut budget = match request.response_partition_limit {
        l if l <= 0 => PARTITION_LIMIT_MAX,
        l => l.min(PARTITION_LIMIT_MAX),
    };
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names.into_iter().filter(|n| *n >= from_topic) {
        let Some(t) = image.topic(&name) else {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    .with_name(Some(topic_name(&name)))
                    .with_topic_authorized_operations(i32::MIN),
            );
            continue;
        };
        if budget == 0 {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(&name))
                    .with_partition_index(0),
            );
            break;
        }
        let first = if name == from_topic {
            from_partition
        } else {
            0
        };
        let mut partitions = Vec::new();
        for p in t.partitions.iter().filter(|p| p.partition >= first) {
            if budget == 0 {
                next_cursor = Some(
                    Cursor::default()
                        .with_topic_name(topic_name(&name))
                        .with_partition_index(p.partition),
                );
                break;
            }
            budget -= 1;
            partitions.push(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(p.partition)
                    .with_leader_id(BrokerId(p.leader))
                    .with_leader_epoch(p.leader_epoch)
                    .with_replica_nodes(p.replicas.iter().map(|b| BrokerId(*b)).collect())
                    .with_isr_nodes(p.isr.iter().map(|b| BrokerId(*b)).collect())
                    .with_offline_replicas(
                        p.replicas
                            .iter()
                            .filter(|b| !image.is_live(**b))
                            .map(|b| BrokerId(*b))
                            .collect(),
                    )
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new())),
            );
        }
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_topic_id(t.id)
                .with_is_internal(t.internal)
                .with_partitions(partitions)
                .with_topic_authorized_operations(i32::MIN),
        );
        if next_cursor.is_some() {
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_topic_partitions_request::{self as req};
    use kafka_protocol::messages::TopicName;

    use super::*;
    use crate::api::admin::test_support::{ctx, encodes, image};
    use crate::controller::AdminResponse;

    fn ask(
        names: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                names
                    .iter()
                    .map(|n| req::TopicRequest::default().with_name(topic_name(n)))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                req::Cursor::default()
                    .with_topic_name(TopicName(crate::api::str_bytes(t.to_string())))
                    .with_partition_index(p)
            }))
    }

    #[test]
    fn pages_by_partition_limit_and_reports_unknown_topics() {
        let mut im = image();
        let t = "orders".to_string();
        let count = 3;
        im.topics.insert(
            t.clone(),
            std::sync::Arc::new(crate::metadata::TopicImage {
                name: t.clone(),
                id: uuid::Uuid::new_v4(),
                partitions: (0..count)
                    .map(|p| crate::metadata::PartitionImage::single(p, 0, 2, 0))
                    .collect(),
                configs: Default::default(),
                log_config: crate::log::LogConfig::default(),
                internal: false,
            }),
        );
        let (ctx, _) = ctx(im, |_| AdminResponse::Results(Vec::new()));
        let r = handle(&ctx, ask(&[&t, "nope"], 0, None));
        encodes(&r, 0);
        let by_name = |r: &DescribeTopicPartitionsResponse, n: &str| {
            r.topics
                .iter()
                .find(|x| x.name.as_ref().is_some_and(|m| m.0.as_str() == n))
                .cloned()
                .expect(n)
        };
        assert_eq!(
            by_name(&r, "nope").error_code,
            ResponseError::UnknownTopicOrPartition.code()
        );
        let full = by_name(&r, &t);
        assert_eq!(full.partitions.len() as i32, count);
        assert!(r.next_cursor.is_none());
        assert_eq!(full.partitions[1].leader_epoch, 2);
        {
            let first = handle(&ctx, ask(&[&t], 1, None));
            assert_eq!(first.topics[0].partitions.len(), 1);
            let c = first.next_cursor.expect("a cursor after one partition");
            assert_eq!(c.partition_index, 1);
            let rest = handle(&ctx, ask(&[&t], 0, Some((&t, 1))));
            assert_eq!(rest.topics[0].partitions.len() as i32, count - 1);
        }
    }
}
