//! LeaveGroup (13), v0-v5 (v3 and up: a batch of members).

use std::rc::Rc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use crate::api::str_bytes;
use crate::group::runtime::{call_group, GroupCall};
use crate::group::{LeaveGroupRequest as Leave, LeavingMember};
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let group_id = request.group_id.0.to_string();
    let members = if version >= 3 {
        request
            .members
            .into_iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.map(|s| s.to_string()),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let leave = Leave {
        group_id: group_id.clone(),
        members,
    };
    let result: Result<crate::group::LeaveGroupResponse, i16> =
        call_group(ctx, &group_id, GroupCall::Leave(leave)).await;
    match result {
        Ok(r) => {
            if version >= 3 {
                LeaveGroupResponse::default()
                    .with_error_code(r.error_code)
                    .with_members(
                        r.members
                            .into_iter()
                            .map(|(m, code)| {
                                MemberResponse::default()
                                    .with_member_id(str_bytes(m.member_id))
                                    .with_group_instance_id(m.group_instance_id.map(str_bytes))
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            } else {
                let code = if r.error_code != 0 {
                    r.error_code
                } else {
                    r.members.first().map_or(0, |(_, c)| *c)
                };
                LeaveGroupResponse::default().with_error_code(code)
            }
        }
        Err(code) => LeaveGroupResponse::default().with_error_code(code),
    }
}
