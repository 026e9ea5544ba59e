//! Fuzz target bodies, kept in a library so that the libFuzzer binaries in
//! `fuzz_targets/` stay one line each and the same code runs over the committed seeds
//! under plain `cargo test` (see README.md).
//!
//! Each function feeds untrusted bytes to a `wire` decoder. A panic, an arithmetic
//! overflow or a failed `assert!` here is a bug in `wire`, which must turn every input
//! into a value or an error.

use bytes::Bytes;
use dataplane::types::{LeaderEpoch, Offset};
use dataplane::wire::batch::{layout, stamp_offset_and_epoch, MAGIC_V2};
use dataplane::wire::records::{decode_records, read_varlong};
use dataplane::wire::{BatchError, BatchIter, ControlType, RecordBatch};

/// Everything that reads a record batch header: the iterator (with and without CRC
/// checks), `parse` and `parse_verified` on the whole input, and every accessor, the
/// control record and the records of each batch that parses.
pub fn batch_header(data: &[u8]) {
    let buf = Bytes::copy_from_slice(data);
    for verify_crc in [false, true] {
        drain(buf.clone(), verify_crc);
    }
    if let Ok(batch) = RecordBatch::parse_verified(buf.clone(), 0) {
        exercise(&batch);
    }
    let Ok(batch) = RecordBatch::parse(buf, 0) else {
        return;
    };
    exercise(&batch);

    // Mutated inputs almost never carry a valid CRC, so the verified paths would only
    // ever see CRC errors. Repair the CRC and run them again so that the control-record
    // check behind it is fuzzed too.
    let mut raw = data.to_vec();
    let crc = crc32c::crc32c(&raw[layout::ATTRIBUTES..]);
    raw[layout::CRC..layout::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    let repaired = Bytes::from(raw);
    match RecordBatch::parse_verified(repaired.clone(), 0) {
        Ok(verified) => exercise(&verified),
        Err(BatchError::BadControlRecord { .. }) => assert!(batch.is_control()),
        Err(other) => panic!("a batch that parses with a correct CRC failed: {other}"),
    }
    drain(repaired, true);
}

/// `decode_records` directly: the first four bytes are the record count, the rest is the
/// records section.
pub fn records(data: &[u8]) {
    let (count, body) = match data.split_first_chunk::<4>() {
        Some((count, body)) => (i32::from_be_bytes(*count), body),
        None => (1, data),
    };
    let buf = Bytes::copy_from_slice(body);
    if let Ok(recs) = decode_records(&buf, count) {
        assert_eq!(recs.len() as i64, i64::from(count.max(0)));
        for rec in &recs {
            let key_len = rec.key.as_ref().map_or(0, Bytes::len);
            let value_len = rec.value.as_ref().map_or(0, Bytes::len);
            assert!(key_len + value_len <= buf.len());
        }
    }
    // Varlongs back to back until the first error: the reader must never move past
    // the end of the buffer.
    let mut at = 0usize;
    while at < body.len() {
        let before = at;
        if read_varlong(body, &mut at).is_err() {
            break;
        }
        assert!(at > before && at <= body.len());
    }
}

/// The decoders of the coordinators' internal topics (`__consumer_offsets`,
/// `__transaction_state`): keys and values read back from disk at every load. The
/// first byte picks the decoder, the rest is its input.
pub fn coordinator_records(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 5 {
        0 => {
            let _ = dataplane::group::records::RecordKey::decode(rest);
        }
        1 => {
            let _ = dataplane::group::records::OffsetCommitValue::decode(rest);
        }
        2 => {
            let _ = dataplane::group::records::GroupMetadataValue::decode(rest);
        }
        3 => {
            let _ = dataplane::txn::records::decode_key(rest);
        }
        _ => {
            let _ = dataplane::txn::records::decode_value(rest);
        }
    }
}

/// The mirror RPC codecs (keys 94-104), requests and responses: the first byte picks
/// the key and the direction, the rest is the body. Whatever decodes must encode and
/// decode back to the same value.
pub fn mirror_rpc(data: &[u8]) {
    use dataplane::wire::mirror::{keys, MirrorRequest, MirrorResponse};
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let key = keys::ALL[usize::from(which) % keys::ALL.len()];
    let mut buf = Bytes::copy_from_slice(rest);
    if which & 0x80 == 0 {
        if let Ok(request) = MirrorRequest::decode(key, &mut buf) {
            let mut out = bytes::BytesMut::new();
            request.encode(&mut out).expect("what decodes encodes");
            let again = MirrorRequest::decode(key, &mut out.freeze()).expect("re-decode");
            assert_eq!(again, request);
        }
    } else if let Ok(response) = MirrorResponse::decode(key, &mut buf) {
        let mut out = bytes::BytesMut::new();
        response.encode(&mut out).expect("what decodes encodes");
        let again = MirrorResponse::decode(key, &mut out.freeze()).expect("re-decode");
        assert_eq!(again, response);
    }
}

/// A SASL exchange as an unauthenticated client drives it: the input is steps of one
/// op byte, a 2-byte big-endian length and that many bytes (SaslHandshake v1 or v0
/// naming a mechanism, SaslAuthenticate, a bare v0 token). The bytes also go to the
/// PLAIN and JAAS parsers. Only the configured user and password may authenticate,
/// with PLAIN or SCRAM-SHA-256/512.
pub fn sasl_exchange(data: &[u8]) {
    use dataplane::net::sasl::{jaas_plain_users, plain_user, SaslConfig, SaslSession};
    use dataplane::net::scram::{ScramCredential, ScramMechanism};
    static CREDENTIALS: std::sync::OnceLock<Vec<(ScramMechanism, ScramCredential)>> =
        std::sync::OnceLock::new();
    let credentials = CREDENTIALS.get_or_init(|| {
        ScramMechanism::ALL
            .into_iter()
            .map(|m| {
                let salted = m.salted_password(b"secret", b"salt", 4096);
                (
                    m,
                    ScramCredential::from_salted_password(m, b"salt", &salted, 4096),
                )
            })
            .collect()
    });
    let scram = |user: &str, mechanism: ScramMechanism| {
        credentials
            .iter()
            .find(|(m, _)| user == "alice" && *m == mechanism)
            .map(|(_, c)| c.clone())
    };
    use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
    use kafka_protocol::protocol::StrBytes;
    let users: std::collections::BTreeMap<String, String> =
        [("alice".to_string(), "secret".to_string())]
            .into_iter()
            .collect();
    let mut session = SaslSession::new(std::sync::Arc::new(SaslConfig {
        mechanisms: vec![
            "PLAIN".into(),
            "SCRAM-SHA-256".into(),
            "SCRAM-SHA-512".into(),
            "OAUTHBEARER".into(),
        ],
        plain_users: users.clone(),
        reauth_ms: 60_000,
        reauth_ms_by_mechanism: [("OAUTHBEARER".to_string(), 1_000)].into_iter().collect(),
        oauth: Some(std::sync::Arc::new(
            dataplane::net::oauth::OAuthConfig::new(
                dataplane::net::oauth::OAuthValidator::Unsecured,
            ),
        )),
    }));
    let mut rest = data;
    while let [op, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (payload, next) = tail.split_at(len);
        rest = next;
        let text = String::from_utf8_lossy(payload).into_owned();
        let _ = jaas_plain_users(&text);
        if let Ok(user) = plain_user(payload, &users) {
            assert_eq!(user, "alice");
        }
        match op % 4 {
            0 | 1 => {
                let request =
                    SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(text));
                let _ = session.handshake(&request, i16::from(op % 4 == 1));
            }
            2 => {
                let request = SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::copy_from_slice(payload));
                let _ = session.authenticate(&request, &scram);
            }
            _ => {
                let _ = session.authenticate_raw(payload, &scram);
            }
        }
        if let Some(user) = session.principal() {
            assert_eq!(user, "alice", "only the configured user authenticates");
        }
    }
}

fn drain(buf: Bytes, verify_crc: bool) {
    let len = buf.len();
    let mut iter = BatchIter::new(buf, 0, verify_crc);
    let mut valid_prefix = 0usize;
    let mut failed = false;
    for item in iter.by_ref() {
        assert!(!failed, "the iterator went on after an error");
        match item {
            Ok(batch) => {
                valid_prefix += batch.size_in_bytes();
                exercise(&batch);
            }
            Err(e) => {
                assert_eq!(e.position(), valid_prefix as u64);
                let _ = e.to_string();
                failed = true;
            }
        }
    }
    assert_eq!(iter.position(), valid_prefix);
    assert!(valid_prefix <= len);
    assert!(failed || valid_prefix == len);
    assert!(iter.next().is_none());
}

/// Calls every accessor of a batch that parsed and checks what parsing promised.
fn exercise(batch: &RecordBatch) {
    let size = batch.size_in_bytes();
    assert!(size >= layout::HEADER_SIZE);
    assert_eq!(batch.as_bytes().len(), size);
    assert_eq!(
        i64::from(batch.batch_length()) + layout::LOG_OVERHEAD as i64,
        size as i64
    );
    assert_eq!(batch.magic(), MAGIC_V2);
    let record_count = batch.record_count();
    let last_offset_delta = batch.last_offset_delta();
    assert!(record_count >= 0 && last_offset_delta >= 0);
    assert!(i64::from(record_count) <= i64::from(last_offset_delta) + 1);

    let base_offset = batch.base_offset();
    let last_offset = batch.last_offset();
    let next_offset = batch.next_offset();
    assert!(base_offset <= last_offset && last_offset < next_offset);
    let _ = batch.partition_leader_epoch();
    let _ = batch.attributes();
    let _ = batch.compression().name();
    let _ = (
        batch.is_log_append_time(),
        batch.is_transactional(),
        batch.is_control(),
        batch.has_delete_horizon(),
        batch.has_producer_id(),
    );
    let _ = (batch.base_timestamp(), batch.max_timestamp());
    let _ = (batch.producer_id(), batch.producer_epoch());
    let _ = (batch.base_sequence(), batch.last_sequence());
    let _ = format!("{batch:?}");

    let crc_ok = batch.compute_crc() == batch.crc();
    assert_eq!(batch.verify_crc(0).is_ok(), crc_ok);

    // Offset and epoch lie outside the CRC range: restamping never changes validity.
    let mut restamped = batch.as_bytes().to_vec();
    stamp_offset_and_epoch(&mut restamped, Offset(7), LeaderEpoch(3));
    match RecordBatch::parse(Bytes::from(restamped), 0) {
        Ok(b) => assert_eq!(b.verify_crc(0).is_ok(), crc_ok),
        Err(e) => panic!("restamped batch no longer parses: {e}"),
    }

    let records = batch.records();
    assert_eq!(records.len(), size - layout::HEADER_SIZE);
    if let Ok(recs) = decode_records(&records, record_count) {
        assert_eq!(recs.len() as i64, i64::from(record_count));
    }
    if let Ok(control) = batch.control_record() {
        assert_eq!(ControlType::from_i16(control.kind.as_i16()), control.kind);
        let _ = control.kind.name();
    }
    let _ = batch.clone().into_bytes();
}

/// Writes seed inputs built from valid batches (`cargo test -- --ignored write_seeds`).
pub mod seeds {
    use bytes::Bytes;

    /// Valid mirror RPC inputs for [`super::mirror_rpc`]: a selector byte, then a body.
    pub fn mirror_rpcs() -> Vec<(&'static str, Vec<u8>)> {
        use dataplane::wire::mirror::*;
        let index = |key: i16| keys::ALL.iter().position(|k| *k == key).expect("key") as u8;
        let request = |name, r: MirrorRequest| {
            let mut out = bytes::BytesMut::new();
            r.encode(&mut out).expect("seed encodes");
            let mut v = vec![index(r.api_key())];
            v.extend_from_slice(&out);
            (name, v)
        };
        let response = |name, r: MirrorResponse| {
            let mut out = bytes::BytesMut::new();
            r.encode(&mut out).expect("seed encodes");
            let mut v = vec![index(r.api_key()) | 0x80];
            v.extend_from_slice(&out);
            (name, v)
        };
        vec![
            request(
                "create_mirror",
                MirrorRequest::CreateMirror(CreateMirrorRequest {
                    mirror_name: "dr".into(),
                    configs: vec![("bootstrap.servers", Some("a:9092")).into()],
                }),
            ),
            request(
                "add_topics",
                MirrorRequest::AddTopicsToMirror(AddTopicsToMirrorRequest {
                    mirror_name: "dr".into(),
                    topics: vec![MirrorTopicMetadata {
                        topic_id: uuid::Uuid::from_u128(7),
                        name: "orders".into(),
                        num_partitions: 8,
                    }],
                    include_patterns: vec!["pay.*".into()],
                    exclude_patterns: Vec::new(),
                    state_validation_offset: -1,
                }),
            ),
            request(
                "write_states",
                MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest {
                    mirror_name: "dr".into(),
                    topics: vec![MirrorStatesTopic {
                        name: "orders".into(),
                        partitions: vec![MirrorStateEntry {
                            partition: 3,
                            state: 1,
                            error_message: Some("x".into()),
                            truncated_records: 5,
                            ..Default::default()
                        }],
                    }],
                    stopped_topics: vec!["old".into()],
                }),
            ),
            response(
                "describe_mirrors",
                MirrorResponse::DescribeMirrors(DescribeMirrorsResponse {
                    mirrors: vec![DescribedMirror {
                        mirror_name: "dr".into(),
                        topics: vec![DescribedMirrorTopic {
                            name: "orders".into(),
                            partitions: vec![DescribedMirrorPartition::default()],
                        }],
                        ..Default::default()
                    }],
                    lookup_results: vec![LmeResult {
                        topic_id: uuid::Uuid::from_u128(7),
                        partitions: vec![LmePartition {
                            partition: 0,
                            last_mirrored_epoch: 4,
                            last_mirrored_offset: 120,
                        }],
                    }],
                    ..Default::default()
                }),
            ),
        ]
    }
    use dataplane::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};
    use dataplane::wire::batch::BatchBuilder;
    use dataplane::wire::control::{build_mirror_pid_reset, build_txn_marker};
    use dataplane::wire::records::{encode_record, encode_simple_records};

    /// Valid batches of the shapes the broker sees: plain, transactional, idempotent
    /// with a wrapping sequence, both control markers, MIRROR_PID_RESET, and a log
    /// fragment of several batches back to back.
    pub fn batches() -> Vec<(&'static str, Bytes)> {
        let plain = |count: i32, value_size: usize| {
            BatchBuilder {
                base_offset: Offset(100),
                partition_leader_epoch: LeaderEpoch(4),
                last_offset_delta: count - 1,
                record_count: count,
                base_timestamp: 1_700_000_000_000,
                max_timestamp: 1_700_000_000_000 + i64::from(count),
                ..BatchBuilder::default()
            }
            .build(&encode_simple_records(count, 0, value_size))
        };
        let mut keyed = Vec::new();
        encode_record(&mut keyed, 0, 0, Some(b"key"), Some(b"value"));
        encode_record(&mut keyed, 1, 5, None, None);
        let txn = BatchBuilder {
            last_offset_delta: 1,
            record_count: 2,
            producer_id: ProducerId(9),
            producer_epoch: ProducerEpoch(1),
            base_sequence: i32::MAX,
            ..BatchBuilder::default()
        }
        .transactional(true)
        .build(&keyed);
        let mut log = Vec::new();
        log.extend_from_slice(&plain(3, 8));
        log.extend_from_slice(&txn);
        log.extend_from_slice(&build_txn_marker(
            true,
            ProducerId(9),
            ProducerEpoch(1),
            2,
            5,
        ));
        vec![
            ("plain_1", plain(1, 0)),
            ("plain_5", plain(5, 32)),
            ("txn_keyed", txn),
            (
                "commit",
                build_txn_marker(true, ProducerId(9), ProducerEpoch(1), 2, 5),
            ),
            (
                "abort",
                build_txn_marker(false, ProducerId(9), ProducerEpoch(1), 2, 5),
            ),
            ("mirror_pid_reset", build_mirror_pid_reset("source-a", 5)),
            ("log_fragment", Bytes::from(log)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn seed_dir(target: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("seeds")
            .join(target)
    }

    /// Every committed seed and regression input still runs clean on stable.
    #[test]
    fn committed_inputs_do_not_panic() {
        for (target, run) in [
            ("batch_header", batch_header as fn(&[u8])),
            ("records", records as fn(&[u8])),
            ("coordinator_records", coordinator_records as fn(&[u8])),
            ("mirror_rpc", mirror_rpc as fn(&[u8])),
            ("sasl_exchange", sasl_exchange as fn(&[u8])),
        ] {
            let dir = seed_dir(target);
            let entries = std::fs::read_dir(&dir).expect("seed directory exists");
            let mut n = 0;
            for entry in entries {
                let path = entry.expect("dir entry").path();
                run(&std::fs::read(&path).expect("readable seed"));
                n += 1;
            }
            assert!(n > 0, "no seeds in {}", dir.display());
        }
    }

    /// Single-byte flips and truncations of every valid batch: a quick stable-only
    /// stand-in for the fuzzer.
    #[test]
    fn mutated_batches_do_not_panic() {
        for (_, batch) in seeds::batches() {
            let raw = batch.to_vec();
            batch_header(&raw);
            for i in 0..raw.len() {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut m = raw.clone();
                    m[i] ^= flip;
                    batch_header(&m);
                }
                batch_header(&raw[..i]);
            }
        }
    }

    /// Single-byte flips and truncations of valid mirror RPC encodings.
    #[test]
    fn mutated_mirror_rpcs_do_not_panic() {
        for (_, seed) in seeds::mirror_rpcs() {
            mirror_rpc(&seed);
            for i in 1..seed.len() {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut m = seed.clone();
                    m[i] ^= flip;
                    mirror_rpc(&m);
                }
                mirror_rpc(&seed[..i]);
            }
        }
    }

    #[test]
    #[ignore = "writes fuzz/seeds; run by hand when the seed shapes change"]
    fn write_seeds() {
        let batch_dir = seed_dir("batch_header");
        let records_dir = seed_dir("records");
        std::fs::create_dir_all(&batch_dir).expect("mkdir");
        std::fs::create_dir_all(&records_dir).expect("mkdir");
        let mirror_dir = seed_dir("mirror_rpc");
        std::fs::create_dir_all(&mirror_dir).expect("mkdir");
        for (name, seed) in seeds::mirror_rpcs() {
            std::fs::write(mirror_dir.join(name), &seed).expect("write seed");
        }
        for (name, batch) in seeds::batches() {
            std::fs::write(batch_dir.join(name), &batch).expect("write seed");
            if let Ok(b) = RecordBatch::parse(batch.clone(), 0) {
                let mut input = b.record_count().to_be_bytes().to_vec();
                input.extend_from_slice(&b.records());
                std::fs::write(records_dir.join(name), input).expect("write seed");
            }
        }
    }
}
