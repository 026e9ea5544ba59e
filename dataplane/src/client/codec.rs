//! Request frames out, response frames in. No I/O, and no panics on what a broker sends:
//! every decoding step returns a `Result`.
//!
//! A request frame is the whole thing written to the socket: a 4-byte big-endian size,
//! the request header, the body. A response *frame* here is what follows the 4-byte size
//! on the socket (the connection reads the size, checks it with [`response_frame_size`],
//! then reads that many bytes): the response header and the body. Responses are decoded
//! from [`Bytes`], so record sets in Fetch responses are slices of the frame, not copies.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use super::ClientError;

/// Response header version of the mirror RPCs (flexible: v1).
const RAW_RESPONSE_HEADER_VERSION: i16 = 1;
/// Kafka's UNSUPPORTED_VERSION error code.
pub const UNSUPPORTED_VERSION: i16 = 35;

fn protocol(api_key: i16, what: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::Protocol {
        api_key,
        message: format!("{what}: {e}"),
    }
}

/// Encodes `req` at `version` into a length-prefixed request frame, with the request
/// header version the API defines for that version.
pub fn encode_request<R: Request>(
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: &str,
) -> Result<Bytes, ClientError> {
    if version < R::VERSIONS.min || version > R::VERSIONS.max {
        return Err(ClientError::Unsupported {
            api_key: R::KEY,
            version,
            broker_range: None,
        });
    }
    let header_version = R::header_version(version);
    let body_size = req
        .compute_size(version)
        .map_err(|e| protocol(R::KEY, "size request body", e))?;
    let mut buf = BytesMut::with_capacity(4 + 12 + client_id.len() + body_size);
    buf.put_i32(0); // size, patched below
    if header_version == 0 {
        // Only ControlledShutdown v0 has header v0 (no client id); kafka-protocol does not
        // encode it, so it is written here.
        buf.put_i16(R::KEY);
        buf.put_i16(version);
        buf.put_i32(correlation_id);
    } else {
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(client_id.to_string())))
            .encode(&mut buf, header_version)
            .map_err(|e| protocol(R::KEY, "encode request header", e))?;
    }
    req.encode(&mut buf, version)
        .map_err(|e| protocol(R::KEY, "encode request body", e))?;
    patch_size(&mut buf, R::KEY)?;
    Ok(buf.freeze())
}

fn patch_size(buf: &mut BytesMut, api_key: i16) -> Result<(), ClientError> {
    let size = i32::try_from(buf.len() - 4)
        .map_err(|_| protocol(api_key, "encode request", "frame larger than 2 GiB"))?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// Decodes a response frame (without its size prefix) to `R`'s response at `version`.
/// Returns the correlation id from the header; the caller compares it with the one it
/// sent ([`check_correlation`]).
pub fn decode_response<R: Request>(
    frame: Bytes,
    version: i16,
) -> Result<(i32, R::Response), ClientError> {
    let mut buf = frame;
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    let header = ResponseHeader::decode(&mut buf, header_version)
        .map_err(|e| protocol(R::KEY, "decode response header", e))?;
    let body = <R::Response as Decodable>::decode(&mut buf, version)
        .map_err(|e| protocol(R::KEY, &format!("decode response v{version}"), e))?;
    Ok((header.correlation_id, body))
}

/// Decodes an ApiVersions response to a request of `version`. A broker that does not
/// serve `version` answers UNSUPPORTED_VERSION in the v0 format (so that any client can
/// read the ranges it does serve); this tries `version` first and v0 second, the way the
/// Java client does.
pub fn decode_api_versions_response(
    frame: Bytes,
    version: i16,
) -> Result<(i32, ApiVersionsResponse), ClientError> {
    match decode_response::<ApiVersionsRequest>(frame.clone(), version) {
        Ok((corr, resp)) if resp.error_code != UNSUPPORTED_VERSION || version == 0 => {
            Ok((corr, resp))
        }
        first => match decode_response::<ApiVersionsRequest>(frame, 0) {
            Ok((corr, resp)) if resp.error_code == UNSUPPORTED_VERSION => Ok((corr, resp)),
            _ => first,
        },
    }
}

/// Encodes a request of an API kafka-protocol does not know (the mirror RPCs, all
/// flexible) with request header v2. A client id longer than 32767 bytes is cut there.
///
/// # Panics
/// When `body` is larger than 2 GiB (a caller's bug: no request is that large).
pub fn encode_raw_request(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &[u8],
) -> Bytes {
    let mut id_len = client_id.len().min(i16::MAX as usize);
    while !client_id.is_char_boundary(id_len) {
        id_len -= 1;
    }
    let client_id = &client_id.as_bytes()[..id_len];
    let size = 2 + 2 + 4 + 2 + client_id.len() + 1 + body.len();
    let size = i32::try_from(size).expect("a raw request body over 2 GiB");
    let mut buf = BytesMut::with_capacity(4 + size as usize);
    buf.put_i32(size);
    // Request header v2: key, version, correlation id, client id (a nullable string with
    // an i16 length, not a compact one), tagged fields.
    buf.put_i16(api_key);
    buf.put_i16(version);
    buf.put_i32(correlation_id);
    buf.put_i16(id_len as i16);
    buf.put_slice(client_id);
    buf.put_u8(0); // no tagged fields
    buf.put_slice(body);
    debug_assert_eq!(buf.len(), 4 + size as usize);
    buf.freeze()
}

/// Decodes a response frame (without its size prefix) of an API kafka-protocol does not
/// know: response header v1, then the body, returned as a slice of `frame`.
pub fn decode_raw_response(frame: Bytes) -> Result<(i32, Bytes), ClientError> {
    let mut buf = frame;
    let header = ResponseHeader::decode(&mut buf, RAW_RESPONSE_HEADER_VERSION)
        .map_err(|e| protocol(-1, "decode response header", e))?;
    let body = buf.copy_to_bytes(buf.remaining());
    Ok((header.correlation_id, body))
}

/// The size of the response frame that follows a 4-byte size prefix. Refuses sizes that
/// cannot hold a correlation id and sizes over `response_bytes_max` (before anything is
/// allocated for them).
pub fn response_frame_size(
    prefix: [u8; 4],
    response_bytes_max: usize,
) -> Result<usize, ClientError> {
    let size = i32::from_be_bytes(prefix);
    if size < 4 {
        return Err(ClientError::Protocol {
            api_key: -1,
            message: format!("response frame size {size} is too small"),
        });
    }
    let size_usize = size as usize;
    if size_usize > response_bytes_max {
        return Err(ClientError::FrameTooLarge {
            size: i64::from(size),
            max: response_bytes_max,
        });
    }
    Ok(size_usize)
}

/// Checks that a response answers the request sent with `expected`.
pub fn check_correlation(expected: i32, got: i32) -> Result<(), ClientError> {
    if expected == got {
        Ok(())
    } else {
        Err(ClientError::CorrelationMismatch { expected, got })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{
        FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, TopicName,
    };
    use kafka_protocol::protocol::decode_request_header_from_buffer;
    use proptest::prelude::*;

    /// Splits a request frame into its header and body after checking the size prefix.
    fn open_request(frame: Bytes) -> (RequestHeader, Bytes) {
        let mut buf = frame;
        let size = buf.get_i32();
        assert_eq!(size as usize, buf.len());
        let header = decode_request_header_from_buffer(&mut buf).expect("header decodes");
        (header, buf)
    }

    /// A response frame (without size prefix) with the header version of `R`.
    fn response_frame<R: Request>(corr: i32, resp: &R::Response, version: i16) -> Bytes {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(corr)
            .encode(
                &mut buf,
                <R::Response as HeaderVersion>::header_version(version),
            )
            .expect("header encodes");
        resp.encode(&mut buf, version).expect("body encodes");
        buf.freeze()
    }

    #[test]
    fn metadata_request_round_trips_flexible_and_not() {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("orders"))))]))
            .with_allow_auto_topic_creation(false);
        for version in [4i16, 9, 12] {
            let frame = encode_request(&req, version, 77, "cid").expect("encodes");
            let (header, mut body) = open_request(frame);
            assert_eq!(header.request_api_key, 3);
            assert_eq!(header.request_api_version, version);
            assert_eq!(header.correlation_id, 77);
            assert_eq!(header.client_id.as_deref(), Some("cid"));
            let back = MetadataRequest::decode(&mut body, version).expect("body decodes");
            assert_eq!(back, req);
            assert!(body.is_empty());
        }
    }

    #[test]
    fn api_versions_request_v0_and_v3() {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("twinlog"))
            .with_client_software_version(StrBytes::from_static_str("0.1.0"));
        let frame = encode_request(&req, 3, 1, "c").expect("encodes");
        let (header, mut body) = open_request(frame);
        assert_eq!(header.request_api_key, 18);
        let back = ApiVersionsRequest::decode(&mut body, 3).expect("decodes");
        assert_eq!(back, req);

        let frame = encode_request(&ApiVersionsRequest::default(), 0, 2, "c").expect("v0");
        // v0: 4 size + 2 key + 2 version + 4 corr + 2+1 client id, empty body.
        assert_eq!(frame.len(), 15);
    }

    #[test]
    fn version_outside_the_message_range_is_unsupported() {
        let err = encode_request(&MetadataRequest::default(), 99, 1, "c").expect_err("must fail");
        assert!(matches!(
            err,
            ClientError::Unsupported {
                api_key: 3,
                version: 99,
                ..
            }
        ));
    }

    #[test]
    fn hand_built_responses_decode_with_their_correlation_id() {
        let resp = MetadataResponse::default()
            .with_cluster_id(Some(StrBytes::from_static_str("c1")))
            .with_controller_id(3.into());
        for version in [1i16, 2, 9, 12] {
            let frame = response_frame::<MetadataRequest>(4242, &resp, version);
            let (corr, back) = decode_response::<MetadataRequest>(frame, version).expect("decodes");
            assert_eq!(corr, 4242);
            assert_eq!(back.controller_id, 3);
            // ClusterId exists from v2 on.
            let cluster_id = (version >= 2).then_some("c1");
            assert_eq!(back.cluster_id.as_deref(), cluster_id);
        }
        // Hand-written bytes: ApiVersions v0, correlation 9, error 0, one key (3: 0..12).
        let mut raw = BytesMut::new();
        raw.put_i32(9);
        raw.put_i16(0);
        raw.put_i32(1);
        raw.put_i16(3);
        raw.put_i16(0);
        raw.put_i16(12);
        let (corr, back) = decode_response::<ApiVersionsRequest>(raw.freeze(), 0).expect("decodes");
        assert_eq!(corr, 9);
        assert_eq!(back.api_keys.len(), 1);
        assert_eq!(back.api_keys[0].max_version, 12);
    }

    #[test]
    fn fetch_records_are_slices_of_the_frame() {
        let records = Bytes::from(vec![7u8; 300]);
        let resp = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![PartitionData::default()
                .with_partition_index(0)
                .with_records(Some(records.clone()))])]);
        let frame = response_frame::<FetchRequest>(5, &resp, 11);
        let range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let (_, back) = decode_response::<FetchRequest>(frame, 11).expect("decodes");
        let got = back.responses[0].partitions[0]
            .records
            .clone()
            .expect("records");
        assert_eq!(got, records);
        assert!(
            range.contains(&(got.as_ptr() as usize)),
            "records were copied"
        );
    }

    #[test]
    fn truncated_responses_are_errors() {
        let resp = MetadataResponse::default().with_brokers(vec![Default::default()]);
        let frame = response_frame::<MetadataRequest>(1, &resp, 12);
        for cut in 0..frame.len() {
            let err =
                decode_response::<MetadataRequest>(frame.slice(..cut), 12).expect_err("must fail");
            assert!(
                matches!(err, ClientError::Protocol { api_key: 3, .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn correlation_and_frame_size_checks() {
        assert!(check_correlation(3, 3).is_ok());
        assert!(matches!(
            check_correlation(3, 4),
            Err(ClientError::CorrelationMismatch {
                expected: 3,
                got: 4
            })
        ));
        assert_eq!(
            response_frame_size(100i32.to_be_bytes(), 100).ok(),
            Some(100)
        );
        assert!(matches!(
            response_frame_size(101i32.to_be_bytes(), 100),
            Err(ClientError::FrameTooLarge {
                size: 101,
                max: 100
            })
        ));
        assert!(matches!(
            response_frame_size(i32::MAX.to_be_bytes(), 100 << 20),
            Err(ClientError::FrameTooLarge { .. })
        ));
        for bad in [-1i32, 0, 3, i32::MIN] {
            assert!(matches!(
                response_frame_size(bad.to_be_bytes(), 100),
                Err(ClientError::Protocol { .. })
            ));
        }
    }

    #[test]
    fn api_versions_unsupported_falls_back_to_v0_format() {
        let resp = ApiVersionsResponse::default()
            .with_error_code(UNSUPPORTED_VERSION)
            .with_api_keys(vec![ApiVersion::default()
                .with_api_key(18)
                .with_min_version(0)
                .with_max_version(2)]);
        // The broker answers a v3 request in the v0 format.
        let frame = response_frame::<ApiVersionsRequest>(8, &resp, 0);
        let (corr, back) = decode_api_versions_response(frame, 3).expect("decodes");
        assert_eq!(corr, 8);
        assert_eq!(back.error_code, UNSUPPORTED_VERSION);
        assert_eq!(back.api_keys[0].max_version, 2);

        // A normal v3 answer decodes as v3.
        let ok = ApiVersionsResponse::default()
            .with_api_keys(resp.api_keys.clone())
            .with_throttle_time_ms(5);
        let frame = response_frame::<ApiVersionsRequest>(9, &ok, 3);
        let (_, back) = decode_api_versions_response(frame, 3).expect("decodes");
        assert_eq!(back.throttle_time_ms, 5);
        assert_eq!(back.error_code, 0);
    }

    #[test]
    fn raw_request_layout() {
        let frame = encode_raw_request(100, 0, 7, "cid", b"\x01\x02");
        let expected: &[u8] = &[
            0, 0, 0, 16, // size
            0, 100, 0, 0, // key, version
            0, 0, 0, 7, // correlation
            0, 3, b'c', b'i', b'd', // client id
            0,    // tagged fields
            1, 2, // body
        ];
        assert_eq!(&frame[..], expected);
        // kafka-protocol reads the same header (v2) back.
        let mut buf = frame.slice(4..);
        let header = RequestHeader::decode(&mut buf, 2).expect("decodes");
        assert_eq!(header.correlation_id, 7);
        assert_eq!(&buf[..], &[1, 2]);
    }

    #[test]
    fn raw_response_is_header_v1_then_body() {
        let frame = Bytes::from_static(&[0, 0, 1, 0, 0, 0xaa, 0xbb]);
        let (corr, body) = decode_raw_response(frame).expect("decodes");
        assert_eq!(corr, 256);
        assert_eq!(&body[..], &[0xaa, 0xbb]);
        assert!(decode_raw_response(Bytes::from_static(&[0, 0, 1])).is_err());
        // A tagged field in the header is skipped.
        let frame = Bytes::from_static(&[0, 0, 0, 1, 1, 5, 1, 9, 0x42]);
        let (corr, body) = decode_raw_response(frame).expect("decodes");
        assert_eq!(corr, 1);
        assert_eq!(&body[..], &[0x42]);
    }

    proptest! {
        #[test]
        fn raw_round_trip(
            key in 0i16..200,
            corr in any::<i32>(),
            client_id in "[a-z0-9._-]{0,40}",
            body in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let frame = encode_raw_request(key, 0, corr, &client_id, &body);
            let mut buf = frame.slice(4..);
            prop_assert_eq!(frame.len() - 4, i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize);
            let header = RequestHeader::decode(&mut buf, 2).expect("decodes");
            prop_assert_eq!(header.request_api_key, key);
            prop_assert_eq!(header.correlation_id, corr);
            prop_assert_eq!(header.client_id.as_deref(), Some(client_id.as_str()));
            prop_assert_eq!(&buf[..], &body[..]);

            let mut resp = BytesMut::new();
            resp.put_i32(corr);
            resp.put_u8(0);
            resp.put_slice(&body);
            let (c, b) = decode_raw_response(resp.freeze()).expect("decodes");
            prop_assert_eq!(c, corr);
            prop_assert_eq!(&b[..], &body[..]);
        }

        #[test]
        fn arbitrary_response_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let frame = Bytes::from(bytes);
            let _ = decode_response::<MetadataRequest>(frame.clone(), 12);
            let _ = decode_response::<MetadataRequest>(frame.clone(), 1);
            let _ = decode_api_versions_response(frame.clone(), 3);
            let _ = decode_raw_response(frame);
        }
    }
}
