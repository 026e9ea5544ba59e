//! JoinGroup (11), v0-v9. Forwarded to the shard owning the group's coordinator; the
//! response may be parked until the rebalance completes.

use std::rc::Rc;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader};

use crate::api::str_bytes;
use crate::group::runtime::{call_group, GroupCall};
use crate::group::{JoinGroupProtocol, JoinGroupRequest as Join, JoinGroupResponse as Joined};
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    header: &RequestHeader,
    request: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let group_id = request.group_id.0.to_string();
    let member_id = request.member_id.to_string();
    let join = Join {
        group_id: group_id.clone(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        member_id: member_id.clone(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| JoinGroupProtocol {
                name: p.name.to_string(),
                metadata: p.metadata,
            })
            .collect(),
        client_id: header
            .client_id
            .as_ref()
            .map_or_else(String::new, |c| c.to_string()),
        client_host: "/127.0.0.1".to_string(),
        require_known_member_id: version >= 4,
    };
    let result: Result<Joined, i16> = call_group(ctx, &group_id, GroupCall::Join(join)).await;
    let joined = result.unwrap_or_else(|code| Joined::failed(code, &member_id));
    to_wire(joined, version)
}

fn to_wire(r: Joined, version: i16) -> JoinGroupResponse {
    let mut leader = r.leader;
    let mut members = r.members;
    if r.skip_assignment && version < 9 {
        // KIP-814: an older static leader must not recompute the assignment.
        members.clear();
        leader = String::new();
    }
    let mut resp = JoinGroupResponse::default()
        .with_error_code(r.error_code)
        .with_generation_id(r.generation_id)
        .with_leader(str_bytes(leader))
        .with_member_id(str_bytes(r.member_id))
        .with_members(
            members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(str_bytes))
                        .with_metadata(m.metadata)
                })
                .collect(),
        );
    if version >= 7 {
        resp.protocol_type = r.protocol_type.map(str_bytes);
        resp.protocol_name = r.protocol_name.map(str_bytes);
    } else {
        resp.protocol_name = Some(str_bytes(r.protocol_name.unwrap_or_default()));
    }
    if version >= 9 {
        resp.skip_assignment = r.skip_assignment;
    }
    resp
}
