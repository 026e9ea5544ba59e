//! DescribeGroups (15), v0-v6. From v6 an unknown (Dead) group is GROUP_ID_NOT_FOUND
//! with a message, as in Kafka 4; older versions describe it as Dead.

use std::rc::Rc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use crate::api::str_bytes;
use crate::group::runtime::{call_group, GroupCall};
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for g in request.groups {
        let id = g.0.to_string();
        let wanted = vec![id.clone()];
        let result: Result<Vec<crate::group::DescribedGroup>, i16> =
            call_group(ctx, &id, GroupCall::DescribeGroups(wanted)).await;
        let described = match result {
            Ok(mut v) if !v.is_empty() => {
                let d = v.remove(0);
                DescribedGroup::default()
                    .with_error_code(d.error_code)
                    .with_group_id(GroupId(str_bytes(d.group_id)))
                    .with_group_state(str_bytes(d.state))
                    .with_protocol_type(str_bytes(d.protocol_type))
                    .with_protocol_data(str_bytes(d.protocol_data))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(str_bytes(m.member_id))
                                    .with_group_instance_id(m.group_instance_id.map(str_bytes))
                                    .with_client_id(str_bytes(m.client_id))
                                    .with_client_host(str_bytes(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    )
            }
            Ok(_) => DescribedGroup::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_group_state(str_bytes("Dead")),
            Err(code) => DescribedGroup::default()
                .with_error_code(code)
                .with_group_id(GroupId(str_bytes(id))),
        };
        let described = if version >= 6
            && described.error_code == 0
            && described.group_state.as_str() == "Dead"
        {
            let id = described.group_id.0.to_string();
            DescribedGroup::default()
                .with_error_code(kafka_protocol::ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(str_bytes(format!("Group {id} not found."))))
                .with_group_id(described.group_id)
                .with_group_state(str_bytes("Dead"))
        } else {
            described
        };
        groups.push(described);
    }
    DescribeGroupsResponse::default().with_groups(groups)
}
