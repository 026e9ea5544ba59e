//! DeleteGroups (42), v0-v2.

use std::rc::Rc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};

use crate::api::str_bytes;
use crate::group::runtime::{call_group, GroupCall};
use crate::shard::ShardCtx;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: DeleteGroupsRequest,
    _version: i16,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for g in request.groups_names {
        let id = g.0.to_string();
        let ids = vec![id.clone()];
        let code = call_group::<Vec<(String, i16)>>(ctx, &id, GroupCall::DeleteGroups(ids))
            .await
            .map_or_else(|code| code, |r| r.first().map_or(0, |(_, code)| *code));
        results.push(
            DeletableGroupResult::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
