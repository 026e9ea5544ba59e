//! The project's Kafka client (`dataplane::client`) against a real `twinlog serve` on
//! loopback: the blocking connection from a test thread, and the glommio connection and
//! `SourceCluster` from an executor, the way the mirror fetcher uses them.

mod support;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dataplane::client::{
    BlockingConnection, ClientError, ConnectionConfig, KafkaConnection, SourceCluster,
};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use support::Broker;
use uuid::Uuid;

const TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new topic may take to accept produce requests.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(20);
const RECORDS: i64 = 10;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn create_topics_request(name: &str, partitions: i32) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(10_000)
}

/// The topic id in a CreateTopics answer (v7+), after checking it succeeded.
fn check_created(resp: &CreateTopicsResponse, name: &str) -> Uuid {
    assert_eq!(resp.topics.len(), 1, "{resp:?}");
    let t = &resp.topics[0];
    assert_eq!(t.name.0.as_str(), name);
    assert_eq!(t.error_code, 0, "CreateTopics failed: {t:?}");
    t.topic_id
}

/// One uncompressed, non-idempotent batch of `RECORDS` records with keys `k<i>` and
/// values `v<i>`. Sequence = offset - 1 keeps kafka-protocol's encoder from starting a
/// batch per record.
fn batch() -> Bytes {
    encode_batch(RECORDS, "k", |i| (false, -1, -1, i as i32 - 1))
}

/// `count` records with keys `<key><i>` and values `v<i>`; `of(i)` gives each record's
/// (transactional, producer id, producer epoch, sequence).
fn encode_batch(count: i64, key: &str, of: impl Fn(i64) -> (bool, i64, i16, i32)) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| {
            let (transactional, producer_id, producer_epoch, sequence) = of(i);
            Record {
                transactional,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id,
                producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i,
                sequence,
                timestamp: 1_700_000_000_000 + i,
                key: Some(Bytes::from(format!("{key}{i}"))),
                value: Some(Bytes::from(format!("v{i}"))),
                headers: IndexMap::new(),
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("batch encodes");
    buf.freeze()
}

fn produce_request(name: &str, id: Uuid, version: i16) -> ProduceRequest {
    let mut topic =
        TopicProduceData::default().with_partition_data(vec![PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(batch()))]);
    // Produce v13 names topics by id only.
    topic = if version >= 13 {
        topic.with_topic_id(id)
    } else {
        topic.with_name(topic_name(name))
    };
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![topic])
}

/// The error code and base offset of the one partition in a Produce answer.
fn produce_result(resp: &ProduceResponse) -> (i16, i64) {
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn fetch_request(name: &str, id: Uuid, version: i16) -> FetchRequest {
    let mut topic = FetchTopic::default().with_partitions(vec![FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(0)
        .with_partition_max_bytes(1 << 20)]);
    // Fetch v13 names topics by id only.
    topic = if version >= 13 {
        topic.with_topic_id(id)
    } else {
        topic.with_topic(topic_name(name))
    };
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![topic])
}

/// Checks that the Fetch answer holds the produced records at offsets 0..RECORDS.
fn check_fetched(resp: &FetchResponse) {
    assert_eq!(resp.error_code, 0, "{resp:?}");
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "{p:?}");
    assert_eq!(p.high_watermark, RECORDS);
    let mut records = p.records.clone().expect("record set");
    let sets = RecordBatchDecoder::decode_all(&mut records).expect("batches decode");
    let got: Vec<(i64, Option<Bytes>, Option<Bytes>)> = sets
        .into_iter()
        .flat_map(|s| s.records)
        .map(|r| (r.offset, r.key, r.value))
        .collect();
    let expected: Vec<_> = (0..RECORDS)
        .map(|i| {
            (
                i,
                Some(Bytes::from(format!("k{i}"))),
                Some(Bytes::from(format!("v{i}"))),
            )
        })
        .collect();
    assert_eq!(got, expected);
}

/// True for Produce errors a just-created topic may answer until its partition is open.
fn retriable(error_code: i16) -> bool {
    // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER.
    matches!(error_code, 3 | 5 | 6)
}

#[test]
fn blocking_connection_creates_produces_and_fetches() {
    let broker = Broker::start("");
    let mut c =
        BlockingConnection::connect(&broker.bootstrap(), "client-test", TIMEOUT).expect("connects");
    assert_eq!(c.addr(), broker.bootstrap());
    assert_eq!(c.api_range(ApiKey::ApiVersions as i16), Some((0, 3)));
    assert_eq!(c.pick_version(ApiKey::Metadata as i16, 0, 12), Some(12));
    assert_eq!(c.api_range(9999), None);

    let name = "client-blocking";
    let v = c
        .pick_version(ApiKey::CreateTopics as i16, 2, 7)
        .expect("CreateTopics");
    let resp = c
        .send(&create_topics_request(name, 2), v)
        .expect("CreateTopics");
    let mut id = check_created(&resp, name);
    if v < 7 {
        id = Uuid::nil();
    }

    let v = c
        .pick_version(ApiKey::Produce as i16, 3, 13)
        .expect("Produce");
    let started = Instant::now();
    let base_offset = loop {
        let resp = c.send(&produce_request(name, id, v), v).expect("Produce");
        match produce_result(&resp) {
            (0, base) => break base,
            (code, _) if retriable(code) && started.elapsed() < TOPIC_READY_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => panic!("Produce failed: {other:?}\n{}", broker.log_tail(40)),
        }
    };
    assert_eq!(base_offset, 0);

    let v = c.pick_version(ApiKey::Fetch as i16, 4, 16).expect("Fetch");
    let resp = c.send(&fetch_request(name, id, v), v).expect("Fetch");
    check_fetched(&resp);
    check_current_leader_epoch_fencing(&mut c, name, id);

    // A raw request: Metadata v12 is flexible (request header v2, response header v1),
    // the same framing as the mirror RPCs.
    let mut body = BytesMut::new();
    MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false)
        .encode(&mut body, 12)
        .expect("encodes");
    let mut raw = c
        .send_raw(ApiKey::Metadata as i16, 12, &body)
        .expect("raw Metadata");
    let m = MetadataResponse::decode(&mut raw, 12).expect("decodes");
    assert!(
        m.topics
            .iter()
            .any(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(name)),
        "{m:?}"
    );

    // A version the broker does not serve is refused before anything is sent.
    let err = c
        .send(&MetadataRequest::default(), 13)
        .expect_err("Metadata v13");
    assert!(
        matches!(err, ClientError::Unsupported { api_key: 3, .. }),
        "{err}"
    );
    assert!(!c.is_broken());
    c.send(&MetadataRequest::default(), 12)
        .expect("still usable");
}

/// KIP-320: a request naming the leader epoch it believes the partition has is fenced
/// against the partition's own (0 for a new topic) by Fetch, ListOffsets and
/// OffsetForLeaderEpoch alike: older is FENCED_LEADER_EPOCH (74), newer
/// UNKNOWN_LEADER_EPOCH (75), equal or -1 is served.
fn check_current_leader_epoch_fencing(c: &mut BlockingConnection, name: &str, id: Uuid) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{ListOffsetsRequest, OffsetForLeaderEpochRequest};
    for (current, want) in [(-1, 0), (0, 0), (1, 75)] {
        let mut fetch = fetch_request(name, id, 12);
        fetch.topics[0].partitions[0].current_leader_epoch = current;
        let resp = c.send(&fetch, 12).expect("Fetch");
        let code = resp.responses[0].partitions[0].error_code;
        assert_eq!(code, want, "Fetch at current epoch {current}");

        let list = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(name))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(current)
                    .with_timestamp(-1)])]);
        let resp = c.send(&list, 7).expect("ListOffsets");
        let p = &resp.topics[0].partitions[0];
        assert_eq!(
            p.error_code, want,
            "ListOffsets at current epoch {current}: {p:?}"
        );
        if want == 0 {
            assert_eq!((p.offset, p.leader_epoch), (RECORDS, 0));
        }

        let epochs = OffsetForLeaderEpochRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(topic_name(name))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(current)
                    .with_leader_epoch(0)])]);
        let resp = c.send(&epochs, 4).expect("OffsetForLeaderEpoch");
        let p = &resp.topics[0].partitions[0];
        assert_eq!(
            p.error_code, want,
            "OffsetForLeaderEpoch at {current}: {p:?}"
        );
        if want == 0 {
            assert_eq!((p.leader_epoch, p.end_offset), (0, RECORDS));
        }
    }
}

/// Runs `f` on a glommio executor small enough for an 8 MiB memlock limit.
fn on_glommio<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .spawn(|| {
            dataplane::reactor::spawn_tick();
            f()
        })
        .expect("executor starts")
        .join()
        .expect("executor finishes");
}

#[test]
fn source_cluster_on_glommio() {
    let broker = Broker::start("");
    let bootstrap = broker.bootstrap();
    let port = broker.port;
    // A dead address first: the cluster must move on to the live one.
    let dead = support::free_port();
    on_glommio(move || async move {
        let mut config = ConnectionConfig::new("client-test", TIMEOUT);
        config.request_timeout = TIMEOUT;
        let mut cluster = SourceCluster::new(&format!("127.0.0.1:{dead},{bootstrap}"), config)
            .expect("bootstrap parses");
        let name = "client-glommio";

        let c = cluster.any_connection().await.expect("any connection");
        assert_eq!(c.addr(), bootstrap);
        assert_eq!(c.api_range(ApiKey::ApiVersions as i16), Some((0, 3)));
        let v = c
            .pick_version(ApiKey::CreateTopics as i16, 2, 7)
            .expect("CreateTopics");
        let resp = c
            .send(&create_topics_request(name, 3), v)
            .await
            .expect("CreateTopics");
        check_created(&resp, name);

        let m = cluster
            .metadata(Some(&[name.to_string()]))
            .await
            .expect("metadata");
        assert!(m.cluster_id.is_some(), "{m:?}");
        let t = m.topics.get(name).expect("topic in metadata");
        assert_eq!(t.error_code, 0);
        assert_ne!(t.id, Uuid::nil(), "Metadata v12 carries topic ids");
        assert_eq!(t.partitions.len(), 3);
        let leader = m.leader(name, 0).expect("partition 0 has a leader");
        assert!(m.brokers.contains_key(&leader), "{m:?}");
        assert!(t.partitions[0].leader_epoch >= 0);
        assert_eq!(cluster.last_metadata(), Some(&m));
        let id = t.id;

        let conn = cluster.connection(leader).await.expect("leader connection");
        let v = conn
            .pick_version(ApiKey::Produce as i16, 3, 13)
            .expect("Produce");
        let started = Instant::now();
        loop {
            let resp = conn
                .send(&produce_request(name, id, v), v)
                .await
                .expect("Produce");
            match produce_result(&resp) {
                (0, base) => {
                    assert_eq!(base, 0);
                    break;
                }
                (code, _) if retriable(code) && started.elapsed() < TOPIC_READY_TIMEOUT => {
                    glommio::timer::sleep(Duration::from_millis(100)).await;
                }
                other => panic!("Produce failed: {other:?}"),
            }
        }
        let v = conn
            .pick_version(ApiKey::Fetch as i16, 4, 16)
            .expect("Fetch");
        let resp = conn
            .send(&fetch_request(name, id, v), v)
            .await
            .expect("Fetch");
        check_fetched(&resp);

        // A dropped connection is reopened on demand.
        cluster.invalidate(leader);
        let conn = cluster.connection(leader).await.expect("reconnects");
        assert!(!conn.is_broken());
        assert!(matches!(
            cluster.connection(leader + 1000).await,
            Err(ClientError::UnknownBroker { .. })
        ));

        // A host name is looked up off the shard.
        let by_name =
            KafkaConnection::connect(&format!("localhost:{port}"), "client-test", TIMEOUT)
                .await
                .expect("connects by host name");
        assert!(by_name.api_range(ApiKey::Fetch as i16).is_some());
    });
}

/// A transactional batch of `count` records of producer (`pid`, `epoch`) from sequence
/// `first_sequence`.
fn transactional_batch(pid: i64, epoch: i16, first_sequence: i32, count: i64) -> Bytes {
    encode_batch(count, "t", |i| {
        (true, pid, epoch, first_sequence + i as i32)
    })
}

/// KIP-890 (part 1): the partition leader verifies a batch that would open a
/// transaction with the transaction's coordinator. Without AddPartitionsToTxn first the
/// batch is refused with INVALID_TXN_STATE and nothing is appended (no hanging
/// transaction); after it the batch appends; once the transaction ended, a batch trying
/// to open another without adding the partition again is refused again.
#[test]
fn a_transactional_batch_for_a_partition_not_in_the_transaction_is_refused() {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProducerId,
        TransactionalId,
    };
    let broker = Broker::start("");
    let mut c =
        BlockingConnection::connect(&broker.bootstrap(), "client-test", TIMEOUT).expect("connects");
    let name = "client-verified";
    let resp = c
        .send(&create_topics_request(name, 1), 7)
        .expect("CreateTopics");
    check_created(&resp, name);
    let txn_id = TransactionalId(StrBytes::from_static_str("verified-txn"));
    let started = Instant::now();
    let (pid, epoch) = loop {
        let r = c
            .send(
                &InitProducerIdRequest::default()
                    .with_transactional_id(Some(txn_id.clone()))
                    .with_transaction_timeout_ms(60_000),
                4,
            )
            .expect("InitProducerId");
        if r.error_code == 0 {
            break (r.producer_id.0, r.producer_epoch);
        }
        assert!(
            retriable(r.error_code) || r.error_code == 15,
            "InitProducerId: {r:?}"
        );
        assert!(
            started.elapsed() < TOPIC_READY_TIMEOUT,
            "InitProducerId: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let produce = |c: &mut BlockingConnection, sequence: i32| {
        let req = ProduceRequest::default()
            .with_transactional_id(Some(txn_id.clone()))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(name))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(transactional_batch(pid, epoch, sequence, 3)))])]);
        produce_result(&c.send(&req, 9).expect("Produce"))
    };
    let add = |c: &mut BlockingConnection| {
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id.clone())
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(topic_name(name))
                .with_partitions(vec![0])]);
        let r = c.send(&req, 3).expect("AddPartitionsToTxn");
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    };
    let invalid_txn_state = kafka_protocol::ResponseError::InvalidTxnState.code();

    // Not added: refused, nothing appended.
    let (code, _) = produce(&mut c, 0);
    assert_eq!(code, invalid_txn_state, "{}", broker.log_tail(20));
    // Added: the same batch appends at offset 0.
    assert_eq!(add(&mut c), 0);
    assert_eq!(produce(&mut c, 0), (0, 0));
    // The transaction's later batches need no new verification.
    assert_eq!(produce(&mut c, 3), (0, 3));
    let r = c
        .send(
            &EndTxnRequest::default()
                .with_transactional_id(txn_id.clone())
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(true),
            3,
        )
        .expect("EndTxn");
    assert_eq!(r.error_code, 0);
    // The markers are written after EndTxn answers: wait for CompleteCommit.
    let started = Instant::now();
    loop {
        let r = c
            .send(
                &kafka_protocol::messages::DescribeTransactionsRequest::default()
                    .with_transactional_ids(vec![txn_id.clone()]),
                0,
            )
            .expect("DescribeTransactions");
        if r.transaction_states[0].transaction_state.as_str() == "CompleteCommit" {
            break;
        }
        assert!(started.elapsed() < TIMEOUT, "{r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Ended: a batch opening another transaction without AddPartitionsToTxn is refused.
    let (code, _) = produce(&mut c, 6);
    assert_eq!(code, invalid_txn_state);
}
