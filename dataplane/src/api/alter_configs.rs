//! AlterConfigs (33) and IncrementalAlterConfigs (44). TOPIC resources become one
//! `AdminRequest::AlterTopicConfigs` each (replace, or change key by key), validated and
//! applied by the controller. BROKER resources are refused: broker settings come from
//! the config file only. A resource named twice in one request is refused, as in Kafka.

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

const BROKER_CONFIGS_MESSAGE: &str =
    "dynamic broker configs are not supported; edit the config file";

/// The outcome for one resource: error code and message (`None` on success).
type Outcome = (i16, Option<String>);

/// Controller changes for a topic: `Some(value)` sets a key, `None` deletes it.
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

/// The answer for a resource that is not a topic, or `None` for a topic.
fn non_topic_outcome(resource_type: i8) -> Option<Outcome> {
    match resource_type {
        RESOURCE_TOPIC => None,
        RESOURCE_BROKER => Some((
            ResponseError::InvalidRequest.code(),
            Some(BROKER_CONFIGS_MESSAGE.to_string()),
        )),
        other => Some((
            ResponseError::InvalidRequest.code(),
            Some(format!("Unsupported resource type: {other}")),
        )),
    }
}

async fn alter_topic(
    ctx: &ShardCtx,
    topic: String,
    configs: ConfigChanges,
    incremental: bool,
    validate_only: bool,
) -> Outcome {
    let names = [topic.clone()];
    let request = AdminRequest::AlterTopicConfigs {
        topic,
        configs,
        incremental,
        validate_only,
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
        } else if let Some(outcome) = non_topic_outcome(res.resource_type) {
            outcome
        } else {
            let configs = res
                .configs
                .into_iter()
                .map(|c| (c.name.to_string(), c.value.map(|v| v.to_string())))
                .collect();
            alter_topic(
                ctx,
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
        } else if let Some(outcome) = non_topic_outcome(res.resource_type) {
            outcome
        } else {
            match incremental_changes(&res.configs) {
                Ok(configs) => {
                    alter_topic(
                        ctx,
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

/// A resource's incremental operations as controller changes; a key named twice is
/// refused, as in Kafka.
fn incremental_changes(
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
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
            let value = incremental_op(&name, c.config_operation, c.value.as_deref())?;
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
            incremental_changes(&[
                c("retention.ms", OP_SET, Some("1")),
                c("segment.ms", OP_DELETE, None)
            ]),
            Ok(vec![
                ("retention.ms".to_string(), Some("1".to_string())),
                ("segment.ms".to_string(), None)
            ])
        );
        assert_eq!(
            incremental_changes(&[
                c("retention.ms", OP_SET, Some("1")),
                c("retention.ms", OP_DELETE, None)
            ])
            .map_err(|e| e.0),
            Err(ResponseError::InvalidRequest)
        );
    }

    #[test]
    fn broker_and_other_resources_are_refused() {
        assert_eq!(non_topic_outcome(RESOURCE_TOPIC), None);
        let broker = non_topic_outcome(RESOURCE_BROKER).expect("refused");
        assert_eq!(broker.0, ResponseError::InvalidRequest.code());
        assert_eq!(broker.1.as_deref(), Some(BROKER_CONFIGS_MESSAGE));
        assert!(non_topic_outcome(8).is_some());
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
    fn topics_go_to_the_controller_and_brokers_are_refused() {
        let (ctx, controller) = ctx(image(), |req| match req {
            AdminRequest::AlterTopicConfigs { topic, .. } => {
                AdminResponse::Results(vec![AdminResult::ok(topic.as_str())])
            }
            _ => AdminResponse::Results(Vec::new()),
        });
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
                    .with_resource_type(RESOURCE_BROKER)
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
}
