//! CreatePartitions (37). Topics go to the controller as one
//! `AdminRequest::CreatePartitions`, with manual assignments (one replica list per new
//! partition) when given: their count and shape are checked here, the brokers and the
//! replication factor by the controller (INVALID_REPLICA_ASSIGNMENT, as Kafka).
//! A topic in a mirror (not yet failed over) takes its partition count from the source
//! (reference §6, "partition counts follow the source": the mirror's metadata sync
//! grows it): a client's CreatePartitions on it is INVALID_REQUEST.

use std::rc::Rc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::ResponseError;

use crate::api::{admin, str_bytes, topic_name};
use crate::controller::{AdminRequest, AdminResult};
use crate::shard::ShardCtx;

/// Checks manual assignments (one broker list per new partition). `current`: the
/// topic's partition count in the image, when known; the controller rejects unknown
/// topics and counts that do not grow.
fn check_assignments(
    count: i32,
    current: Option<i32>,
    assignments: Option<&[Vec<i32>]>,
) -> Result<(), String> {
    // An empty list is what some clients send for "no assignment".
    let Some(assignments) = assignments.filter(|a| !a.is_empty()) else {
        return Ok(());
    };
    if let Some(current) = current {
        let added = i64::from(count) - i64::from(current);
        if added > 0 && added != assignments.len() as i64 {
            return Err(format!(
                "Increasing the number of partitions by {added} but {} assignments provided.",
                assignments.len()
            ));
        }
    }
    for brokers in assignments {
        let distinct: std::collections::BTreeSet<i32> = brokers.iter().copied().collect();
        if brokers.is_empty() || distinct.len() != brokers.len() {
            return Err(format!(
                "Replica assignment {brokers:?} is empty or repeats a broker"
            ));
        }
    }
    Ok(())
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: CreatePartitionsRequest,
    _version: i16,
) -> CreatePartitionsResponse {
    let image = ctx.metadata.load();
    // (name, answer already known).
    let mut order: Vec<(String, Option<AdminResult>)> = Vec::with_capacity(request.topics.len());
    let mut forward: Vec<(String, i32)> = Vec::new();
    let mut explicit: Vec<(String, Vec<Vec<i32>>)> = Vec::new();
    for t in request.topics {
        let name = t.name.0.to_string();
        let current = image
            .topic(&name)
            .map(|ti| i32::try_from(ti.partitions.len()).unwrap_or(i32::MAX));
        let assignments: Option<Vec<Vec<i32>>> = t.assignments.map(|a| {
            a.into_iter()
                .map(|x| x.broker_ids.into_iter().map(|b| b.0).collect())
                .collect()
        });
        let mirrored = image
            .topic(&name)
            .and_then(|ti| ti.mirror())
            .filter(|(_, desired)| *desired != crate::wire::mirror::DesiredMirrorState::Stopped);
        if let Some((mirror, _)) = mirrored {
            let r = AdminResult::err(
                name.as_str(),
                ResponseError::InvalidRequest.code(),
                format!(
                    "Topic {name} is mirrored by mirror {mirror}: its partitions follow the source topic's (add them there); remove it from the mirror to manage it here"
                ),
            );
            order.push((name, Some(r)));
            continue;
        }
        match check_assignments(t.count, current, assignments.as_deref()) {
            Ok(()) => {
                if let Some(a) = assignments.filter(|a| !a.is_empty()) {
                    explicit.push((name.clone(), a));
                }
                forward.push((name.clone(), t.count));
                order.push((name, None));
            }
            Err(message) => {
                let r = AdminResult::err(
                    name.as_str(),
                    ResponseError::InvalidReplicaAssignment.code(),
                    message,
                );
                order.push((name, Some(r)));
            }
        }
    }
    let names: Vec<String> = forward.iter().map(|(n, _)| n.clone()).collect();
    let mut results = admin::submit(
        ctx,
        AdminRequest::CreatePartitions {
            topics: forward,
            assignments: explicit,
            validate_only: request.validate_only,
        },
        &names,
    )
    .await
    .into_iter();
    let topics = order
        .into_iter()
        .map(|(name, known)| {
            let r = known.or_else(|| results.next()).unwrap_or_else(|| {
                AdminResult::err(
                    name.as_str(),
                    ResponseError::UnknownServerError.code(),
                    "no answer",
                )
            });
            CreatePartitionsTopicResult::default()
                .with_name(topic_name(&name))
                .with_error_code(r.error_code)
                .with_error_message(r.message.map(str_bytes))
        })
        .collect();
    CreatePartitionsResponse::default().with_results(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_give_one_list_of_distinct_brokers_per_new_partition() {
        assert_eq!(check_assignments(4, Some(2), None), Ok(()));
        assert_eq!(check_assignments(4, Some(2), Some(&[])), Ok(()));
        assert_eq!(
            check_assignments(4, Some(2), Some(&[vec![0, 1], vec![1, 2]])),
            Ok(())
        );
        assert!(check_assignments(4, Some(2), Some(&[vec![0]])).is_err());
        assert!(check_assignments(3, Some(2), Some(&[vec![0, 0]])).is_err());
        assert!(check_assignments(3, Some(2), Some(&[vec![]])).is_err());
        // Unknown topic or a shrinking count: left to the controller's answer.
        assert_eq!(check_assignments(3, None, Some(&[vec![7]])), Ok(()));
        assert_eq!(check_assignments(1, Some(2), Some(&[vec![0]])), Ok(()));
    }
}

#[cfg(test)]
mod handler_tests {
    use kafka_protocol::messages::create_partitions_request::{
        CreatePartitionsAssignment, CreatePartitionsTopic,
    };
    use kafka_protocol::messages::BrokerId;

    use super::*;
    use crate::api::admin::test_support::{ctx, encodes, image};
    use crate::controller::AdminResponse;

    #[test]
    fn bad_assignments_are_not_forwarded() {
        let (ctx, controller) = ctx(image(), |req| match req {
            AdminRequest::CreatePartitions { topics, .. } => AdminResponse::Results(
                topics
                    .iter()
                    .map(|(n, _)| AdminResult::ok(n.as_str()))
                    .collect(),
            ),
            _ => AdminResponse::Results(Vec::new()),
        });
        for v in 0..=3 {
            let req = CreatePartitionsRequest::default().with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(topic_name("a"))
                    .with_count(3)
                    .with_assignments(None),
                CreatePartitionsTopic::default()
                    .with_name(topic_name("b"))
                    .with_count(3)
                    .with_assignments(Some(vec![CreatePartitionsAssignment::default()
                        .with_broker_ids(vec![BrokerId(5), BrokerId(5)])])),
            ]);
            let r = futures::executor::block_on(handle(&ctx, req, v));
            assert_eq!(r.results[0].error_code, 0);
            assert_eq!(
                r.results[1].error_code,
                ResponseError::InvalidReplicaAssignment.code()
            );
            encodes(&r, v);
        }
        let sent = controller.requests.lock().expect("lock").clone();
        assert!(sent.iter().all(|r| matches!(
            r,
            AdminRequest::CreatePartitions { topics, .. } if topics == &vec![("a".to_string(), 3)]
        )));
    }
}
