//! Heartbeat (12), v0-v4.

use std::rc::Rc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::group::runtime::{call_group, GroupCall};
use crate::group::HeartbeatRequest as Beat;
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: HeartbeatRequest,
    _version: i16,
) -> HeartbeatResponse {
    let group_id = request.group_id.0.to_string();
    let beat = Beat {
        group_id: group_id.clone(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
    };
    let code = call_group(ctx, &group_id, GroupCall::Heartbeat(beat))
        .await
        .unwrap_or_else(|code| code);
    HeartbeatResponse::default().with_error_code(code)
}
