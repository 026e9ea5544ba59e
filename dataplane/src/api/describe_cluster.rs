//! DescribeCluster (60): cluster id, controller and brokers (this node). Only the broker
//! endpoint type exists here; asking for controllers (v1, endpoint type 2) is answered
//! UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker does.

use std::rc::Rc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::metadata::MetadataImage;
use crate::shard::ShardCtx;

/// DescribeCluster endpoint types.
pub const ENDPOINT_BROKERS: i8 = 1;

/// Kafka's ACL operations allowed on the cluster resource. Twinlog has no authorizer,
/// so a client asking for its authorized operations gets all of them, as Kafka answers
/// without an authorizer: ALTER (7), CLUSTER_ACTION (9), DESCRIBE_CONFIGS (10),
/// ALTER_CONFIGS (11), IDEMPOTENT_WRITE (12), CREATE (5), DESCRIBE (8).
const CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

fn build(
    image: &MetadataImage,
    listener: &str,
    endpoint_type: i8,
    include_operations: bool,
    version: i16,
) -> DescribeClusterResponse {
    let mut resp = DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(image.cluster_id.clone()))
        .with_controller_id(BrokerId(image.controller_id));
    if version >= 1 {
        resp.endpoint_type = endpoint_type;
    }
    if version >= 1 && endpoint_type != ENDPOINT_BROKERS {
        resp.error_code = ResponseError::UnsupportedEndpointType.code();
        resp.error_message = Some(str_bytes(format!(
            "endpoint type {endpoint_type} is not supported; brokers (1) is"
        )));
        return resp;
    }
    resp.brokers = image
        .live_brokers_on(listener)
        .into_iter()
        .map(|(id, addr)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id))
                .with_host(str_bytes(addr.ip().to_string()))
                .with_port(i32::from(addr.port()))
                .with_rack(image.racks.get(&id).cloned().map(str_bytes))
        })
        .collect();
    if include_operations {
        resp.cluster_authorized_operations = CLUSTER_OPERATIONS;
    }
    resp
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    listener: &str,
    request: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let image = ctx.metadata.load();
    build(
        &image,
        listener,
        request.endpoint_type,
        request.include_cluster_authorized_operations,
        version,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> MetadataImage {
        MetadataImage::empty("cid".into(), 4, "10.0.0.1:9093".parse().expect("addr"))
    }

    #[test]
    fn describes_this_node() {
        let r = build(&image(), "PLAINTEXT", ENDPOINT_BROKERS, false, 1);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.cluster_id.as_str(), "cid");
        assert_eq!(r.controller_id, BrokerId(4));
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(r.brokers[0].host.as_str(), "10.0.0.1");
        assert_eq!(r.brokers[0].port, 9093);
        assert_eq!(r.cluster_authorized_operations, i32::MIN);
        assert_eq!(
            build(&image(), "PLAINTEXT", 1, true, 0).cluster_authorized_operations,
            CLUSTER_OPERATIONS
        );
    }

    #[test]
    fn controller_endpoints_are_unsupported() {
        let r = build(&image(), "PLAINTEXT", 2, false, 1);
        assert_eq!(r.error_code, ResponseError::UnsupportedEndpointType.code());
        assert_eq!(r.endpoint_type, 2);
        assert!(r.brokers.is_empty());
        // v0 has no endpoint type: always brokers.
        assert_eq!(
            build(&image(), "PLAINTEXT", 1, false, 0).endpoint_type,
            ENDPOINT_BROKERS
        );
    }
}

#[cfg(test)]
mod encode_tests {
    use super::*;
    use crate::api::admin::test_support::encodes;

    #[test]
    fn encodes_at_every_version() {
        let image = MetadataImage::empty("c".into(), 0, "127.0.0.1:9092".parse().expect("addr"));
        for v in 0..=1 {
            encodes(&build(&image, "PLAINTEXT", 1, true, v), v);
        }
        encodes(&build(&image, "PLAINTEXT", 2, false, 1), 1);
    }
}
