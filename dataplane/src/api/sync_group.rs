//! SyncGroup (14), v0-v5. Followers' responses are parked until the leader's
//! assignment arrives (and is written).

use std::rc::Rc;

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use crate::api::str_bytes;
use crate::group::runtime::{call_group, GroupCall};
use crate::group::SyncGroupRequest as Sync;
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let group_id = request.group_id.0.to_string();
    let sync = Sync {
        group_id: group_id.clone(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        protocol_type: request.protocol_type.map(|s| s.to_string()),
        protocol_name: request.protocol_name.map(|s| s.to_string()),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let result: Result<crate::group::SyncGroupResponse, i16> =
        call_group(ctx, &group_id, GroupCall::Sync(sync)).await;
    match result {
        Ok(r) => {
            let mut resp = SyncGroupResponse::default()
                .with_error_code(r.error_code)
                .with_assignment(r.assignment);
            if version >= 5 {
                resp.protocol_type = r.protocol_type.map(str_bytes);
                resp.protocol_name = r.protocol_name.map(str_bytes);
            }
            resp
        }
        Err(code) => SyncGroupResponse::default().with_error_code(code),
    }
}
