//! FindCoordinator (10). A group's coordinator is the leader of its `__consumer_offsets`
//! partition, a transactional id's the leader of its `__transaction_state` partition;
//! before the topic exists (it is created on first use), this node. (librdkafka also
//! reads the presence of this API as "the broker is new enough for LZ4 and the v2 record
//! format", so it must be advertised.)

use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::metadata::MetadataImage;
use crate::shard::ShardCtx;

pub fn handle(
    ctx: &Rc<ShardCtx>,
    listener: &str,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let image = ctx.metadata.load();
    let key_type = request.key_type;
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let c = Coordinator::default();
                match coordinator_of(&image, listener, key_type, &key) {
                    Some((node, addr)) => c
                        .with_node_id(BrokerId(node))
                        .with_host(str_bytes(addr.ip().to_string()))
                        .with_port(i32::from(addr.port())),
                    None => c
                        .with_node_id(BrokerId(-1))
                        .with_error_code(ResponseError::CoordinatorNotAvailable.code()),
                }
                .with_key(key)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match coordinator_of(&image, listener, key_type, &request.key) {
        Some((node, addr)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(node))
            .with_host(str_bytes(addr.ip().to_string()))
            .with_port(i32::from(addr.port())),
        None => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(-1))
            .with_error_code(ResponseError::CoordinatorNotAvailable.code()),
    }
}

/// The node coordinating `key` (a group for key type 0, a transactional id for 1) and
/// its address: the leader of the key's internal-topic partition, or this node while
/// that topic does not exist. `None`: the partition has no leader right now.
fn coordinator_of(
    image: &MetadataImage,
    listener: &str,
    key_type: i8,
    key: &StrBytes,
) -> Option<(i32, std::net::SocketAddr)> {
    let (topic, partition_for): (&str, fn(&str, i32) -> i32) = if key_type == 1 {
        (
            crate::txn::records::TRANSACTION_STATE_TOPIC,
            crate::txn::records::partition_for,
        )
    } else {
        (
            crate::group::runtime::OFFSETS_TOPIC,
            crate::group::records::partition_for,
        )
    };
    let Some(t) = image.topic(topic).filter(|t| !t.partitions.is_empty()) else {
        return Some((image.node_id, image.address_on(image.node_id, listener)?));
    };
    let p = partition_for(key, t.partitions.len() as i32);
    let leader = t.partitions.get(p as usize)?.leader;
    if leader < 0 {
        return None;
    }
    Some((leader, image.address_on(leader, listener)?))
}
