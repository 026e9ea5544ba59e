//! Produce requests pipelined on one connection, the way a client with
//! `max.in.flight.requests.per.connection` > 1 sends them: written to the socket back to
//! back before any answer. A real `twinlog` process answers every one, in order, each
//! with its own offsets (one write for the group), refuses only the one with a sequence
//! gap, answers a retry of an earlier one as a duplicate, and counts them as served in
//! groups; a Metadata request between them is answered in its place.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use dataplane::client::{decode_response, encode_request};
use dataplane::types::{ProducerEpoch, ProducerId};
use dataplane::wire::batch::BatchBuilder;
use dataplane::wire::records::encode_simple_records;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{MetadataRequest, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use support::*;

const TOPIC: &str = "pipelined";
const PRODUCE_VERSION: i16 = 9;
const PID: i64 = 4242;

/// An idempotent batch of `records` records from sequence `seq` (the broker checks the
/// sequence, not the producer id's registration, for a producer it has not seen).
fn batch(seq: i32, records: i32) -> Bytes {
    BatchBuilder {
        last_offset_delta: records - 1,
        record_count: records,
        producer_id: ProducerId(PID),
        producer_epoch: ProducerEpoch(0),
        base_sequence: seq,
        base_timestamp: base_timestamp_ms(),
        max_timestamp: base_timestamp_ms(),
        ..BatchBuilder::default()
    }
    .build(&encode_simple_records(records, 0, 100))
}

fn produce(correlation_id: i32, records: Bytes) -> Bytes {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    encode_request(&request, PRODUCE_VERSION, correlation_id, "pipelined-test").expect("encode")
}

fn read_frame(conn: &mut TcpStream) -> Bytes {
    let mut size = [0u8; 4];
    conn.read_exact(&mut size).expect("response size");
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    conn.read_exact(&mut body).expect("response body");
    Bytes::from(body)
}

/// (error code, base offset) of the one partition of a Produce response.
fn produced(frame: Bytes, correlation_id: i32) -> (i16, i64) {
    let (got, response) =
        decode_response::<ProduceRequest>(frame, PRODUCE_VERSION).expect("produce response");
    assert_eq!(got, correlation_id, "answers come back in request order");
    let response: ProduceResponse = response;
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn metric(addr: SocketAddr, name: &str) -> f64 {
    let mut s = TcpStream::connect(addr).expect("connect to /metrics");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .expect("request /metrics");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read /metrics");
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn pipelined_produce_requests_are_answered_in_order_each_with_its_offsets() {
    let metrics_port = free_port();
    let broker = Broker::start(&format!(
        "\"num.partitions\" = 1\n\"metrics.listen\" = \"127.0.0.1:{metrics_port}\"\n"
    ));
    let metrics: SocketAddr = format!("127.0.0.1:{metrics_port}")
        .parse()
        .expect("address");
    let mut conn = TcpStream::connect(broker.addr()).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    // The topic, auto-created by a Metadata request, then a first produce alone.
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC)))),
    ]));
    conn.write_all(&encode_request(&metadata, 9, -1, "pipelined-test").expect("encode"))
        .expect("send");
    read_frame(&mut conn);
    let mut first = None;
    for attempt in 0..50 {
        conn.write_all(&produce(attempt, batch(0, 2)))
            .expect("send");
        let (code, base) = produced(read_frame(&mut conn), attempt);
        if code == 0 {
            first = Some(base);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(first, Some(0), "the first batch lands at offset 0");

    // Five requests in one write, a Metadata among them, then more behind.
    let mut burst = Vec::new();
    let sets = [(2, 3), (5, 1), (6, 4), (10, 2)];
    for (i, (seq, records)) in sets.iter().enumerate() {
        burst.extend_from_slice(&produce(100 + i as i32, batch(*seq, *records)));
    }
    let metadata = MetadataRequest::default().with_topics(None);
    burst.extend_from_slice(&encode_request(&metadata, 9, 200, "pipelined-test").expect("encode"));
    // After the Metadata: a retry of the (5, 1) set, a gap (sequence 20 where 12 is
    // next) and the next set in sequence.
    for (i, (seq, records)) in [(5, 1), (20, 1), (12, 2)].iter().enumerate() {
        burst.extend_from_slice(&produce(300 + i as i32, batch(*seq, *records)));
    }
    conn.write_all(&burst).expect("send the burst");

    let offsets: Vec<(i16, i64)> = (0..4)
        .map(|i| produced(read_frame(&mut conn), 100 + i))
        .collect();
    assert_eq!(offsets, [(0, 2), (0, 5), (0, 6), (0, 10)]);
    let (correlation, _) =
        decode_response::<MetadataRequest>(read_frame(&mut conn), 9).expect("metadata");
    assert_eq!(correlation, 200, "the Metadata is answered in its place");
    let retry = produced(read_frame(&mut conn), 300);
    assert_eq!(
        retry,
        (0, 5),
        "a retry is answered with its original offset"
    );
    let (gap, _) = produced(read_frame(&mut conn), 301);
    assert_eq!(gap, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER for the gap alone");
    assert_eq!(produced(read_frame(&mut conn), 302), (0, 12));

    // Nothing else went in: the next set lands at the log end the answers add up to.
    conn.write_all(&produce(400, batch(14, 1))).expect("send");
    assert_eq!(produced(read_frame(&mut conn), 400), (0, 14));
    assert!(
        metric(metrics, "twinlog_produce_grouped_requests_total") >= 4.0,
        "the burst was served in groups"
    );
    broker.assert_healthy();
}
