//! CreateAcls (key 30), DescribeAcls (29) and DeleteAcls (31), v1-3: the ACLs
//! `kafka-acls` and AdminClient manage. ACLs are metadata records, so every broker of
//! the cluster authorizes with the same set; DescribeAcls reads this broker's image.
//! Without `authorizer.class.name` all three answer SECURITY_DISABLED, as Kafka does.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::ResponseError;

use super::str_bytes;
use crate::acl::{AclBinding, AclFilter};
use crate::controller::{AdminRequest, AdminResponse};
use crate::shard::ShardCtx;

const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

fn enabled(ctx: &ShardCtx) -> bool {
    ctx.settings.authorizer.is_some()
}

/// What became of a request the controller did not answer as asked.
fn controller_failure(response: Result<AdminResponse, ()>) -> (i16, String) {
    match response {
        Ok(AdminResponse::Failed {
            error_code,
            message,
        }) => (error_code, message),
        Ok(other) => {
            tracing::error!(?other, "controller answer of the wrong shape");
            (
                ResponseError::UnknownServerError.code(),
                "unexpected controller answer".into(),
            )
        }
        Err(()) => (
            ResponseError::NotController.code(),
            "the controller is not available".into(),
        ),
    }
}

pub async fn create(ctx: &Rc<ShardCtx>, request: CreateAclsRequest) -> CreateAclsResponse {
    let result = |code: i16, message: Option<String>| {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(message.map(str_bytes))
    };
    if !enabled(ctx) {
        let code = ResponseError::SecurityDisabled.code();
        return CreateAclsResponse::default().with_results(
            request
                .creations
                .iter()
                .map(|_| result(code, Some(NO_AUTHORIZER.into())))
                .collect(),
        );
    }
    let checked: Vec<Result<AclBinding, String>> = request
        .creations
        .iter()
        .map(|c| {
            AclBinding::from_wire(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let bindings: Vec<AclBinding> = checked.iter().filter_map(|c| c.clone().ok()).collect();
    let outcome: Result<(), (i16, String)> = if bindings.is_empty() {
        Ok(())
    } else {
        let answer = ctx
            .controller
            .submit(AdminRequest::CreateAcls { bindings })
            .await
            .map_err(|_| ());
        match answer {
            Ok(AdminResponse::Results(_)) => Ok(()),
            other => Err(controller_failure(other)),
        }
    };
    let invalid = ResponseError::InvalidRequest.code();
    let results = checked
        .into_iter()
        .map(|c| match (c, &outcome) {
            (Err(message), _) => result(invalid, Some(message)),
            (Ok(_), Ok(())) => result(0, None),
            (Ok(_), Err((code, message))) => result(*code, Some(message.clone())),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

fn filter_of(
    resource_type: i8,
    resource_name: Option<&str>,
    pattern_type: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    AclFilter::from_wire(
        resource_type,
        resource_name,
        pattern_type,
        principal,
        host,
        operation,
        permission,
    )
}

pub fn describe(ctx: &Rc<ShardCtx>, r: DescribeAclsRequest) -> DescribeAclsResponse {
    if !enabled(ctx) {
        return DescribeAclsResponse::default()
            .with_error_code(ResponseError::SecurityDisabled.code())
            .with_error_message(Some(str_bytes(NO_AUTHORIZER)));
    }
    let filter = match filter_of(
        r.resource_type_filter,
        r.resource_name_filter.as_deref(),
        r.pattern_type_filter,
        r.principal_filter.as_deref(),
        r.host_filter.as_deref(),
        r.operation,
        r.permission_type,
    ) {
        Ok(f) => f,
        Err(message) => {
            return DescribeAclsResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(str_bytes(message)))
        }
    };
    let image = ctx.metadata.load();
    // One entry per resource pattern, its ACLs beneath it.
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for (_, acl) in image.acls.matching(&filter) {
        by_resource
            .entry((
                acl.resource_type.code(),
                acl.resource_name.clone(),
                acl.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(str_bytes(acl.principal.clone()))
                    .with_host(str_bytes(acl.host.clone()))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission.code()),
            );
    }
    DescribeAclsResponse::default().with_resources(
        by_resource
            .into_iter()
            .map(|((rt, name, pt), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(rt)
                    .with_resource_name(str_bytes(name))
                    .with_pattern_type(pt)
                    .with_acls(acls)
            })
            .collect(),
    )
}

pub async fn delete(ctx: &Rc<ShardCtx>, r: DeleteAclsRequest) -> DeleteAclsResponse {
    let failed = |code: i16, message: &str| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message)))
    };
    if !enabled(ctx) {
        let code = ResponseError::SecurityDisabled.code();
        return DeleteAclsResponse::default().with_filter_results(
            r.filters
                .iter()
                .map(|_| failed(code, NO_AUTHORIZER))
                .collect(),
        );
    }
    let checked: Vec<Result<AclFilter, String>> = r
        .filters
        .iter()
        .map(|f| {
            filter_of(
                f.resource_type_filter,
                f.resource_name_filter.as_deref(),
                f.pattern_type_filter,
                f.principal_filter.as_deref(),
                f.host_filter.as_deref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let filters: Vec<AclFilter> = checked.iter().filter_map(|c| c.clone().ok()).collect();
    let answer = if filters.is_empty() {
        Ok(Vec::new())
    } else {
        match ctx
            .controller
            .submit(AdminRequest::DeleteAcls { filters })
            .await
            .map_err(|_| ())
        {
            Ok(AdminResponse::DeletedAcls(deleted)) => Ok(deleted),
            other => Err(controller_failure(other)),
        }
    };
    let mut deleted = match &answer {
        Ok(d) => d.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    let invalid = ResponseError::InvalidRequest.code();
    let results = checked
        .into_iter()
        .map(|c| match (c, &answer) {
            (Err(message), _) => failed(invalid, &message),
            (Ok(_), Err((code, message))) => failed(*code, message),
            (Ok(_), Ok(_)) => DeleteAclsFilterResult::default().with_matching_acls(
                deleted
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|acl| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(acl.resource_type.code())
                            .with_resource_name(str_bytes(acl.resource_name))
                            .with_pattern_type(acl.pattern_type.code())
                            .with_principal(str_bytes(acl.principal))
                            .with_host(str_bytes(acl.host))
                            .with_operation(acl.operation.code())
                            .with_permission_type(acl.permission.code())
                    })
                    .collect(),
            ),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
