//! FindCoordinator (10). On a single node every group and transaction coordinator is this
//! node. (librdkafka also reads the presence of this API as "the broker is new enough
//! for LZ4 and the v2 record format", so it must be advertised.)

use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use crate::api::str_bytes;
use crate::shard::ShardCtx;

pub fn handle(
    ctx: &Rc<ShardCtx>,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let image = ctx.metadata.load();
    let node = BrokerId(image.node_id);
    let host = str_bytes(image.advertised.ip().to_string());
    let port = i32::from(image.advertised.port());
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(node)
                    .with_host(host.clone())
                    .with_port(port)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    FindCoordinatorResponse::default()
        .with_node_id(node)
        .with_host(host)
        .with_port(port)
}
