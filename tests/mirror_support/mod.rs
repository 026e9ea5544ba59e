//! Mirror helpers for the integration tests: mirror RPCs, Fetch of whole logs and
//! polling, over the project's blocking client.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dataplane::client::BlockingConnection;
use dataplane::wire::mirror::*;
use dataplane::wire::{BatchIter, RecordBatch};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, MetadataRequest};

pub const TIMEOUT: Duration = Duration::from_secs(10);

pub fn connect(bootstrap: &str) -> BlockingConnection {
    BlockingConnection::connect(bootstrap, "twinlog-test", TIMEOUT).expect("connect")
}

pub fn rpc(bootstrap: &str, request: MirrorRequest) -> MirrorResponse {
    let mut conn = connect(bootstrap);
    dataplane::map_mirror_request!(&request, r => conn.send(r, 0).expect("mirror rpc"))
}

pub fn create_mirror(
    dest: &str,
    name: &str,
    source: &str,
    extra: &[(&str, &str)],
) -> SimpleMirrorResponse {
    let mut configs = vec![("bootstrap.servers".to_string(), Some(source.to_string()))];
    for (k, v) in extra {
        configs.push((k.to_string(), Some(v.to_string())));
    }
    match rpc(
        dest,
        MirrorRequest::CreateMirror(CreateMirrorRequest {
            mirror_name: name.to_string(),
            configs: configs.into_iter().map(Into::into).collect(),
        }),
    ) {
        MirrorResponse::CreateMirror(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

pub fn add_topics(dest: &str, mirror: &str, topics: &[&str]) -> MirrorTopicsResponse {
    match rpc(
        dest,
        MirrorRequest::AddTopicsToMirror(AddTopicsToMirrorRequest {
            mirror_name: mirror.to_string(),
            topics: topics
                .iter()
                .map(|t| MirrorTopicMetadata {
                    topic_id: uuid::Uuid::nil(),
                    name: t.to_string(),
                    num_partitions: -1,
                })
                .collect(),
            state_validation_offset: -1,
            ..Default::default()
        }),
    ) {
        MirrorResponse::AddTopicsToMirror(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

pub fn remove_topics(dest: &str, mirror: &str, topics: &[&str]) -> MirrorTopicsResponse {
    match rpc(
        dest,
        MirrorRequest::RemoveTopicsFromMirror(RemoveTopicsFromMirrorRequest {
            mirror_name: mirror.to_string(),
            topics: topic_names(topics.iter().copied()),
            patterns: Vec::new(),
            state_validation_offset: -1,
        }),
    ) {
        MirrorResponse::RemoveTopicsFromMirror(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

pub fn pause_resume(
    dest: &str,
    mirror: &str,
    topics: &[&str],
    pause: bool,
) -> MirrorTopicsResponse {
    let mirror_name = mirror.to_string();
    let topics = topic_names(topics.iter().copied());
    let request = if pause {
        MirrorRequest::PauseMirrorTopics(PauseMirrorTopicsRequest {
            mirror_name,
            topics,
            state_validation_offset: -1,
        })
    } else {
        MirrorRequest::ResumeMirrorTopics(ResumeMirrorTopicsRequest {
            mirror_name,
            topics,
            state_validation_offset: -1,
        })
    };
    match rpc(dest, request) {
        MirrorResponse::PauseMirrorTopics(r) | MirrorResponse::ResumeMirrorTopics(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

pub fn delete_mirror(dest: &str, mirror: &str) -> SimpleMirrorResponse {
    match rpc(
        dest,
        MirrorRequest::DeleteMirror(DeleteMirrorRequest {
            mirror_name: mirror.to_string(),
            state_validation_offset: -1,
        }),
    ) {
        MirrorResponse::DeleteMirror(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

pub fn describe(dest: &str, mirror: &str) -> DescribedMirror {
    match rpc(
        dest,
        MirrorRequest::DescribeMirrors(DescribeMirrorsRequest {
            mirror_names: Some(vec![mirror.to_string()]),
            ..Default::default()
        }),
    ) {
        MirrorResponse::DescribeMirrors(mut r) => r.mirrors.remove(0),
        other => panic!("unexpected {other:?}"),
    }
}

/// (topic, partition) -> described partition.
pub fn partitions(d: &DescribedMirror) -> BTreeMap<(String, i32), DescribedMirrorPartition> {
    d.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| ((t.name.clone(), p.partition), p.clone()))
        })
        .collect()
}

/// Waits until `check` holds for the mirror's description.
pub fn wait_for(
    dest: &str,
    mirror: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&DescribedMirror) -> bool,
) -> DescribedMirror {
    let start = Instant::now();
    loop {
        let d = describe(dest, mirror);
        if check(&d) {
            return d;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}; last: {d:#?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every partition in `state`.
pub fn all_in(d: &DescribedMirror, state: &str) -> bool {
    let p = partitions(d);
    !p.is_empty() && p.values().all(|p| p.state == state)
}

/// Every partition MIRRORING and caught up with `expected_ends` (local log end).
pub fn caught_up(d: &DescribedMirror, expected_ends: &BTreeMap<(String, i32), i64>) -> bool {
    let p = partitions(d);
    expected_ends.iter().all(|(k, end)| {
        p.get(k)
            .is_some_and(|p| p.state == "MIRRORING" && p.destination_offset == *end)
    })
}

/// Topic id and partition count from Metadata.
pub fn topic_id(bootstrap: &str, topic: &str) -> (uuid::Uuid, usize) {
    let mut conn = connect(bootstrap);
    let req = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default().with_name(
            Some(kafka_protocol::messages::TopicName(
                kafka_protocol::protocol::StrBytes::from_string(topic.to_string()),
            )),
        ),
    ]));
    let r = conn.send(&req, 12).expect("metadata");
    let t = r.topics.first().expect("topic");
    assert_eq!(t.error_code, 0, "metadata of {topic}: {t:?}");
    (t.topic_id, t.partitions.len())
}

/// Every batch of a partition, as stored, read with consumer Fetches (v12, by name).
pub fn read_log(bootstrap: &str, topic: &str, partition: i32) -> Vec<RecordBatch> {
    let mut conn = connect(bootstrap);
    let mut out: Vec<RecordBatch> = Vec::new();
    let mut offset = 0i64;
    let mut empty_answers = 0;
    loop {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(8 << 20)
            .with_isolation_level(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(kafka_protocol::messages::TopicName(
                    kafka_protocol::protocol::StrBytes::from_string(topic.to_string()),
                ))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(4 << 20)])]);
        let r = conn.send(&req, 12).expect("fetch");
        // Some brokers (tansu) answer an empty response when nothing is ready yet.
        let Some(p) = r.responses.first().and_then(|t| t.partitions.first()) else {
            empty_answers += 1;
            assert!(empty_answers < 50, "{topic}-{partition}: no fetch answer");
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        // A log that does not start at 0 (DeleteRecords, retention): read from its start.
        if p.error_code == 1 && offset == 0 && p.log_start_offset > 0 {
            offset = p.log_start_offset;
            continue;
        }
        assert_eq!(p.error_code, 0, "fetch {topic}-{partition}@{offset}");
        let records: Bytes = p.records.clone().unwrap_or_default();
        let mut got = false;
        for b in BatchIter::new(records, 0, true) {
            let Ok(b) = b else { break };
            if b.last_offset().0 < offset {
                continue;
            }
            offset = b.next_offset().0;
            out.push(b);
            got = true;
        }
        if !got || offset >= p.high_watermark {
            break;
        }
    }
    out
}

/// A topic's configs (name -> value) from DescribeConfigs.
pub fn describe_topic_configs(bootstrap: &str, topic: &str) -> BTreeMap<String, String> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let mut conn = connect(bootstrap);
    let req = kafka_protocol::messages::DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(kafka_protocol::protocol::StrBytes::from_string(
                topic.to_string(),
            )),
    ]);
    let r = conn.send(&req, 4).expect("describe configs");
    let res = r.results.first().expect("one resource");
    assert_eq!(res.error_code, 0, "describe configs of {topic}: {res:?}");
    res.configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

/// DeleteRecords: moves the log start of `topic`-`partition` to `offset`.
pub fn delete_records(bootstrap: &str, topic: &str, partition: i32, offset: i64) {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::DeleteRecordsRequest;
    let mut conn = connect(bootstrap);
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(kafka_protocol::messages::TopicName(
                kafka_protocol::protocol::StrBytes::from_string(topic.to_string()),
            ))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])]);
    let r = conn.send(&request, 2).expect("delete records");
    let code = r.topics[0].partitions[0].error_code;
    assert_eq!(code, 0, "DeleteRecords {topic}-{partition} to {offset}");
}

/// CreateTopics v7 of one topic (replication factor 1).
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(kafka_protocol::protocol::StrBytes::from_string(
                topic.to_string(),
            )))
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(10_000);
    let r = connect(bootstrap).send(&req, 7).expect("CreateTopics");
    assert_eq!(r.topics[0].error_code, 0, "create {topic}: {r:?}");
}

/// Two copies of `topic`-`partition` hold the same batches, byte for byte.
pub fn assert_same_batches(
    left: &[RecordBatch],
    right: &[RecordBatch],
    topic: &str,
    partition: i32,
) {
    assert_eq!(
        left.len(),
        right.len(),
        "{topic}-{partition}: batch counts differ"
    );
    for (x, y) in left.iter().zip(right) {
        assert_eq!(
            x.as_bytes(),
            y.as_bytes(),
            "{topic}-{partition}: batch at offset {} differs",
            x.base_offset().0
        );
    }
}
