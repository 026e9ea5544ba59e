//! ListGroups (16), v0-v5: the groups of every coordinator on every shard.

use std::rc::Rc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use crate::api::str_bytes;
use crate::group::runtime::list_all_groups;
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let states: Vec<String> = if version >= 4 {
        request
            .states_filter
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        Vec::new()
    };
    if version >= 5
        && !request.types_filter.is_empty()
        && !request
            .types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case("classic"))
    {
        return ListGroupsResponse::default();
    }
    let groups = list_all_groups(ctx, states)
        .await
        .into_iter()
        .map(|g| {
            let mut out = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id)))
                .with_protocol_type(str_bytes(g.protocol_type));
            if version >= 4 {
                out.group_state = str_bytes(g.state);
            }
            if version >= 5 {
                out.group_type = str_bytes("classic");
            }
            out
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
