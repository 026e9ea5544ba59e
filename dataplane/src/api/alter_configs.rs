//! AlterConfigs (33) and IncrementalAlterConfigs (44). TOPIC resources become one
//! `AdminRequest::AlterTopicConfigs` each (replace, or change key by key), validated and
//! applied by the controller. MIRROR resources (type 64) likewise become one
//! `AdminRequest::AlterMirrorConfigs` each (only SET and DELETE; APPEND and SUBTRACT
//! are refused). BROKER resources (this broker's id, or "" for the cluster-wide default)
//! become `AdminRequest::AlterBrokerConfigs`: Kafka's dynamic broker configs. A resource
//! named twice in one request is refused, as in Kafka.

use std::rc::Rc;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::api::admin::{self, duplicates, RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::api::describe_configs::RESOURCE_MIRROR;
use crate::api::str_bytes;
use crate::controller::AdminRequest;
use crate::shard::ShardCtx;

/// IncrementalAlterConfigs operations.
pub const OP_SET: i8 = 0;
pub const OP_DELETE: i8 = 1;
pub const OP_APPEND: i8 = 2;
pub const OP_SUBTRACT: i8 = 3;

/// Config keys whose Kafka type is a list (APPEND and SUBTRACT apply to them).
const LIST_CONFIG_NAMES: &[&str] = &["cleanup.policy"];

/// The outcome for one resource: error code and message (`None` on success).
type Outcome = (i16, Option<String>);

/// Controller changes for a topic or mirror: `Some(value)` sets a key, `None` deletes it.
type ConfigChanges = Vec<(String, Option<String>)>;

/// One incremental operation as a controller change: `Some(value)` sets, `None` deletes.
pub fn incremental_op(
    name: &str,
    op: i8,
    value: Option<&str>,
) -> Result<Option<String>, (ResponseError, String)> {
    match op {
        OP_SET => match value {
            Some(v) => Ok(Some(v.to_string())),
            None => Err((
                ResponseError::InvalidRequest,
                format!("Null value not supported for : {name}"),
            )),
        },
        OP_DELETE => Ok(None),
        OP_APPEND | OP_SUBTRACT if LIST_CONFIG_NAMES.contains(&name) => Err((
            ResponseError::InvalidRequest,
            format!("list ops (APPEND, SUBTRACT) are not supported for `{name}`; use SET"),
        )),
        OP_APPEND | OP_SUBTRACT => Err((
            ResponseError::InvalidConfig,
            format!("Config value append is not allowed for config key: {name}"),
        )),
        other => Err((
            ResponseError::InvalidRequest,
            format!("Unknown config operation {other} for {name}"),
        )),
    }
}

/// One incremental operation on a mirror config: SET and DELETE only.
pub fn mirror_incremental_op(
    name: &str,
    op: i8,
    value: Option<&str>,
) -> Result<Option<String>, (ResponseError, String)> {
    match op {
        OP_SET | OP_DELETE => incremental_op(name, op, value),
        OP_APPEND | OP_SUBTRACT => Err((
            ResponseError::InvalidRequest,
            format!("APPEND and SUBTRACT are not supported for mirror configs ({name}); use SET"),
        )),
        other => Err((
            ResponseError::InvalidRequest,
            format!("Unknown config operation {other} for {name}"),
        )),
    }
}

/// The answer for a resource the controller does not handle, or `None` for a topic, a
/// broker or a mirror.
fn refused_outcome(resource_type: i8) -> Option<Outcome> {
    match resource_type {
        RESOURCE_TOPIC | RESOURCE_MIRROR | RESOURCE_BROKER => None,
        other => Some((
            ResponseError::InvalidRequest.code(),
            Some(format!("Unsupported resource type: {other}")),
        )),
    }
}

/// Submits the change of one topic's, broker's or mirror's configs and returns the
/// controller's answer for it. A broker resource is this broker's id or "" (the
/// cluster-wide default); an unknown mirror comes back as UNKNOWN_CLUSTER_MIRROR from the
/// controller.
async fn alter(
    ctx: &ShardCtx,
    resource_type: i8,
    name: String,
    configs: ConfigChanges,
    incremental: bool,
    validate_only: bool,
) -> Outcome {
    let names = [name.clone()];
    if resource_type == RESOURCE_BROKER {
        let node = ctx.metadata.load().node_id;
        if !name.is_empty() && name != node.to_string() {
            return (
                ResponseError::InvalidRequest.code(),
                Some(format!(
                    "Unexpected broker id, expected {node} or empty string, but received {name}"
                )),
            );
        }
    }
    let request = if resource_type == RESOURCE_BROKER {
        AdminRequest::AlterBrokerConfigs {
            broker: name,
            configs,
            incremental,
            validate_only,
        }
    } else if resource_type == RESOURCE_MIRROR {
        AdminRequest::AlterMirrorConfigs {
            name,
            configs,
            incremental,
            validate_only,
        }
    } else {
        AdminRequest::AlterTopicConfigs {
            topic: name,
            configs,
            incremental,
            validate_only,
        }
    };
    let result = admin::submit(ctx, request, &names).await;
    match result.into_iter().next() {
        Some(r) => (r.error_code, r.message),
        None => (ResponseError::UnknownServerError.code(), None),
    }
}

fn resource_key(resource_type: i8, name: &StrBytes) -> String {
    format!("{resource_type}/{name}")
}

const DUPLICATE_RESOURCE: &str = "Each resource must appear at most once.";

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: AlterConfigsRequest,
    _version: i16,
) -> AlterConfigsResponse {
    let keys: Vec<String> = request
        .resources
        .iter()
        .map(|r| resource_key(r.resource_type, &r.resource_name))
        .collect();
    let dup = duplicates(keys.iter().map(String::as_str));
    let mut responses = Vec::with_capacity(request.resources.len());
    for (res, key) in request.resources.into_iter().zip(keys) {
        let (code, message) = if dup.contains(&key) {
            (
                ResponseError::InvalidRequest.code(),
                Some(DUPLICATE_RESOURCE.to_string()),
            )
        } else if let Some(outcome) = refused_outcome(res.resource_type) {
            outcome
        } else {
            // A full replacement: keys not named (or named with a null value) go.
            let configs = res
                .configs
                .into_iter()
                .map(|c| (c.name.to_string(), c.value.map(|v| v.to_string())))
                .collect();
            alter(
                ctx,
                res.resource_type,
                res.resource_name.to_string(),
                configs,
                false,
                request.validate_only,
            )
            .await
        };
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

pub async fn handle_incremental(
    ctx: &Rc<ShardCtx>,
    request: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
    let keys: Vec<String> = request
        .resources
        .iter()
        .map(|r| resource_key(r.resource_type, &r.resource_name))
        .collect();
    let dup = duplicates(keys.iter().map(String::as_str));
    let mut responses = Vec::with_capacity(request.resources.len());
    for (res, key) in request.resources.into_iter().zip(keys) {
        let (code, message) = if dup.contains(&key) {
            (
                ResponseError::InvalidRequest.code(),
                Some(DUPLICATE_RESOURCE.to_string()),
            )
        } else if let Some(outcome) = refused_outcome(res.resource_type) {
            outcome
        } else {
            let op = if res.resource_type == RESOURCE_MIRROR {
                mirror_incremental_op
            } else {
                incremental_op
            };
            match incremental_changes(&res.configs, op) {
                Ok(configs) => {
                    alter(
                        ctx,
                        res.resource_type,
                        res.resource_name.to_string(),
                        configs,
                        true,
                        request.validate_only,
                    )
                    .await
                }
                Err((e, message)) => (e.code(), Some(message)),
            }
        };
        responses.push(
            IncrementalResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// One incremental operation as a controller change ([`incremental_op`] for topics,
/// [`mirror_incremental_op`] for mirrors).
type OpFn = fn(&str, i8, Option<&str>) -> Result<Option<String>, (ResponseError, String)>;

/// A resource's incremental operations as controller changes; a key named twice is
/// refused, as in Kafka.
fn incremental_changes(
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
    op: OpFn,
) -> Result<ConfigChanges, (ResponseError, String)> {
    let dup = duplicates(configs.iter().map(|c| c.name.as_str()));
    if let Some(name) = dup.first() {
        return Err((
            ResponseError::InvalidRequest,
            format!("Error due to duplicate config keys: {name}"),
        ));
    }
    configs
        .iter()
        .map(|c| {
            let name = c.name.to_string();
            let value = op(&name, c.config_operation, c.value.as_deref())?;
            Ok((name, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;

    use super::*;

    #[test]
    fn incremental_ops_map_to_set_and_delete() {
        assert_eq!(
            incremental_op("retention.ms", OP_SET, Some("5")),
            Ok(Some("5".to_string()))
        );
        assert_eq!(incremental_op("retention.ms", OP_DELETE, None), Ok(None));
        assert_eq!(
            incremental_op("retention.ms", OP_DELETE, Some("x")),
            Ok(None)
        );
        let code = |r: Result<Option<String>, (ResponseError, String)>| r.err().map(|e| e.0);
        assert_eq!(
            code(incremental_op("retention.ms", OP_SET, None)),
            Some(ResponseError::InvalidRequest)
        );
        assert_eq!(
            code(incremental_op("cleanup.policy", OP_APPEND, Some("compact"))),
            Some(ResponseError::InvalidRequest)
        );
        assert_eq!(
            code(incremental_op(
                "cleanup.policy",
                OP_SUBTRACT,
                Some("delete")
            )),
            Some(ResponseError::InvalidRequest)
        );
        assert_eq!(
            code(incremental_op("retention.ms", OP_APPEND, Some("1"))),
            Some(ResponseError::InvalidConfig)
        );
        assert_eq!(
            code(incremental_op("retention.ms", 9, Some("1"))),
            Some(ResponseError::InvalidRequest)
        );
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let c = |name: &str, op: i8, value: Option<&str>| {
            AlterableConfig::default()
                .with_name(str_bytes(name))
                .with_config_operation(op)
                .with_value(value.map(str_bytes))
        };
        assert_eq!(
            incremental_changes(
                &[
                    c("retention.ms", OP_SET, Some("1")),
                    c("segment.ms", OP_DELETE, None)
                ],
                incremental_op
            ),
            Ok(vec![
                ("retention.ms".to_string(), Some("1".to_string())),
                ("segment.ms".to_string(), None)
            ])
        );
        assert_eq!(
            incremental_changes(
                &[
                    c("retention.ms", OP_SET, Some("1")),
                    c("retention.ms", OP_DELETE, None)
                ],
                incremental_op
            )
            .map_err(|e| e.0),
            Err(ResponseError::InvalidRequest)
        );
    }

    #[test]
    fn broker_and_other_resources_are_refused() {
        assert_eq!(refused_outcome(RESOURCE_TOPIC), None);
        assert_eq!(refused_outcome(RESOURCE_MIRROR), None);
        assert!(refused_outcome(RESOURCE_BROKER).is_none());
        assert!(refused_outcome(8).is_some());
    }

    #[test]
    fn mirror_ops_are_set_and_delete_only() {
        assert_eq!(
            mirror_incremental_op("fetch.max.bytes", OP_SET, Some("2048")),
            Ok(Some("2048".to_string()))
        );
        assert_eq!(
            mirror_incremental_op("fetch.max.bytes", OP_DELETE, None),
            Ok(None)
        );
        for op in [OP_APPEND, OP_SUBTRACT] {
            let (e, m) =
                mirror_incremental_op("topics.include", op, Some("x")).expect_err("refused");
            assert_eq!(e, ResponseError::InvalidRequest);
            assert!(m.contains("not supported for mirror configs"), "{m}");
        }
        assert_eq!(
            mirror_incremental_op("fetch.max.bytes", OP_SET, None).map_err(|e| e.0),
            Err(ResponseError::InvalidRequest)
        );
        assert_eq!(
            mirror_incremental_op("fetch.max.bytes", 7, Some("1")).map_err(|e| e.0),
            Err(ResponseError::InvalidRequest)
        );
    }
}

#[cfg(test)]
mod handler_tests {
    use kafka_protocol::messages::alter_configs_request::{
        AlterConfigsResource, AlterableConfig as FullConfig,
    };
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource as IncResource, AlterableConfig,
    };

    use super::*;
    use crate::api::admin::test_support::{ctx, encodes, image};
    use crate::controller::{AdminResponse, AdminResult};

    #[test]
    fn topics_and_this_broker_go_to_the_controller() {
        let (ctx, controller) = ctx(image(), |req| match req {
            AdminRequest::AlterTopicConfigs { topic, .. } => {
                AdminResponse::Results(vec![AdminResult::ok(topic.as_str())])
            }
            AdminRequest::AlterBrokerConfigs { broker, .. } => {
                AdminResponse::Results(vec![AdminResult::ok(broker.as_str())])
            }
            _ => AdminResponse::Results(Vec::new()),
        });
        let node = ctx.metadata.load().node_id.to_string();
        // Another broker's id is refused here; this one's and "" are the controller's.
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
            IncResource::default()
                .with_resource_type(RESOURCE_BROKER)
                .with_resource_name(str_bytes("9999")),
            IncResource::default()
                .with_resource_type(RESOURCE_BROKER)
                .with_resource_name(str_bytes(node.clone())),
        ]);
        let r = futures::executor::block_on(handle_incremental(&ctx, req, 1));
        assert_eq!(
            r.responses[0].error_code,
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(r.responses[1].error_code, 0);
        controller.requests.lock().expect("lock").clear();
        for v in 0..=1 {
            let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
                IncResource::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(str_bytes("t"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(str_bytes("retention.ms"))
                        .with_config_operation(OP_DELETE)
                        .with_value(None)]),
                IncResource::default()
                    .with_resource_type(8)
                    .with_resource_name(str_bytes("0")),
            ]);
            let r = futures::executor::block_on(handle_incremental(&ctx, req, v));
            assert_eq!(r.responses[0].error_code, 0);
            assert!(r.responses[0].error_message.is_none());
            assert_eq!(
                r.responses[1].error_code,
                ResponseError::InvalidRequest.code()
            );
            encodes(&r, v);
        }
        for v in 0..=2 {
            let req = AlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(str_bytes("t"))
                    .with_configs(vec![FullConfig::default()
                        .with_name(str_bytes("retention.ms"))
                        .with_value(Some(str_bytes("5")))]),
                AlterConfigsResource::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(str_bytes("t")),
            ]);
            let r = futures::executor::block_on(handle(&ctx, req, v));
            // Named twice: both refused, nothing forwarded.
            assert!(r
                .responses
                .iter()
                .all(|x| x.error_code == ResponseError::InvalidRequest.code()));
            encodes(&r, v);
        }
        let sent = controller.requests.lock().expect("lock").clone();
        assert_eq!(sent.len(), 2);
        assert!(sent.iter().all(|r| matches!(
            r,
            AdminRequest::AlterTopicConfigs { topic, configs, incremental: true, .. }
                if topic == "t" && configs == &vec![("retention.ms".to_string(), None)]
        )));
    }

    #[test]
    fn mirrors_go_to_the_controller() {
        use crate::wire::mirror::errors::UNKNOWN_CLUSTER_MIRROR;
        let (ctx, controller) = ctx(image(), |req| match req {
            AdminRequest::AlterMirrorConfigs { name, .. } if name == "m" => {
                AdminResponse::Results(vec![AdminResult::ok(name.as_str())])
            }
            AdminRequest::AlterMirrorConfigs { name, .. } => {
                AdminResponse::Results(vec![AdminResult::err(
                    name.as_str(),
                    UNKNOWN_CLUSTER_MIRROR,
                    format!("Mirror {name} does not exist"),
                )])
            }
            _ => AdminResponse::Results(Vec::new()),
        });
        let inc = |name: &str, configs: Vec<AlterableConfig>| {
            IncResource::default()
                .with_resource_type(RESOURCE_MIRROR)
                .with_resource_name(str_bytes(name))
                .with_configs(configs)
        };
        let op = |name: &str, op: i8, value: Option<&str>| {
            AlterableConfig::default()
                .with_name(str_bytes(name))
                .with_config_operation(op)
                .with_value(value.map(str_bytes))
        };
        for v in 0..=1 {
            let req = IncrementalAlterConfigsRequest::default()
                .with_validate_only(v == 1)
                .with_resources(vec![
                    inc(
                        "m",
                        vec![
                            op("fetch.max.bytes", OP_SET, Some("2048")),
                            op("fetch.min.bytes", OP_DELETE, None),
                        ],
                    ),
                    inc("gone", vec![op("fetch.max.bytes", OP_SET, Some("1"))]),
                    inc("m2", vec![op("topics.include", OP_APPEND, Some("a.*"))]),
                ]);
            let r = futures::executor::block_on(handle_incremental(&ctx, req, v));
            let codes: Vec<i16> = r.responses.iter().map(|x| x.error_code).collect();
            assert_eq!(
                codes,
                vec![
                    0,
                    UNKNOWN_CLUSTER_MIRROR,
                    ResponseError::InvalidRequest.code()
                ]
            );
            assert_eq!(r.responses[0].resource_type, RESOURCE_MIRROR);
            assert_eq!(
                r.responses[1].error_message.as_deref(),
                Some("Mirror gone does not exist")
            );
            encodes(&r, v);
        }
        let req =
            AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(RESOURCE_MIRROR)
                .with_resource_name(str_bytes("m"))
                .with_configs(vec![FullConfig::default()
                    .with_name(str_bytes("bootstrap.servers"))
                    .with_value(Some(str_bytes("h:1")))])]);
        let r = futures::executor::block_on(handle(&ctx, req, 1));
        assert_eq!(r.responses[0].error_code, 0);
        let sent = controller.requests.lock().expect("lock").clone();
        let m_set = vec![
            ("fetch.max.bytes".to_string(), Some("2048".to_string())),
            ("fetch.min.bytes".to_string(), None),
        ];
        assert_eq!(
            sent,
            vec![
                AdminRequest::AlterMirrorConfigs {
                    name: "m".into(),
                    configs: m_set.clone(),
                    incremental: true,
                    validate_only: false,
                },
                AdminRequest::AlterMirrorConfigs {
                    name: "gone".into(),
                    configs: vec![("fetch.max.bytes".to_string(), Some("1".to_string()))],
                    incremental: true,
                    validate_only: false,
                },
                AdminRequest::AlterMirrorConfigs {
                    name: "m".into(),
                    configs: m_set,
                    incremental: true,
                    validate_only: true,
                },
                AdminRequest::AlterMirrorConfigs {
                    name: "gone".into(),
                    configs: vec![("fetch.max.bytes".to_string(), Some("1".to_string()))],
                    incremental: true,
                    validate_only: true,
                },
                AdminRequest::AlterMirrorConfigs {
                    name: "m".into(),
                    configs: vec![("bootstrap.servers".to_string(), Some("h:1".to_string()))],
                    incremental: false,
                    validate_only: false,
                },
            ]
        );
    }
}
