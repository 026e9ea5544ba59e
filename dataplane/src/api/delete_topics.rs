//! DeleteTopics (20). Topics are named (v1-v5 `topic_names`, v6 `topics` by name) or, from
//! v6, given by id and resolved through the current image. Every resolved name goes to
//! the controller in one `AdminRequest::DeleteTopics`; duplicates are the controller's
//! to reject, exactly as for names.

use std::rc::Rc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use kafka_protocol::ResponseError;

use crate::api::{admin, str_bytes, topic_name};
use crate::controller::{AdminRequest, AdminResult};
use crate::metadata::MetadataImage;
use crate::shard::ShardCtx;

/// One requested topic after resolving ids: the name to delete, or the answer already.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Delete {
        name: String,
        id: uuid::Uuid,
    },
    Answer {
        name: Option<String>,
        id: uuid::Uuid,
        error: ResponseError,
        message: String,
    },
}

fn resolve(image: &MetadataImage, name: Option<String>, id: uuid::Uuid) -> Target {
    match (name, id.is_nil()) {
        (Some(_), false) => Target::Answer {
            name: None,
            id,
            error: ResponseError::InvalidRequest,
            message: "You may not specify both topic name and topic id.".to_string(),
        },
        (Some(name), true) => {
            let id = image.topic(&name).map_or(uuid::Uuid::nil(), |t| t.id);
            Target::Delete { name, id }
        }
        (None, false) => match image.topic_by_id(id) {
            Some(t) => Target::Delete {
                name: t.name.clone(),
                id,
            },
            None => Target::Answer {
                name: None,
                id,
                error: ResponseError::UnknownTopicId,
                message: format!("Topic id {id} does not exist"),
            },
        },
        (None, true) => Target::Answer {
            name: None,
            id,
            error: ResponseError::InvalidRequest,
            message: "Neither topic name nor id were specified.".to_string(),
        },
    }
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let image = ctx.metadata.load();
    let targets: Vec<Target> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| resolve(&image, t.name.map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| resolve(&image, Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let names: Vec<String> = targets
        .iter()
        .filter_map(|t| match t {
            Target::Delete { name, .. } => Some(name.clone()),
            Target::Answer { .. } => None,
        })
        .collect();
    let mut results = admin::submit(
        ctx,
        AdminRequest::DeleteTopics {
            names: names.clone(),
        },
        &names,
    )
    .await
    .into_iter();
    let responses = targets
        .into_iter()
        .map(|t| {
            let (name, id, result) = match t {
                Target::Delete { name, id } => {
                    let result = results.next().unwrap_or_else(|| {
                        AdminResult::err(
                            name.as_str(),
                            ResponseError::UnknownServerError.code(),
                            "no answer",
                        )
                    });
                    (Some(name), id, result)
                }
                Target::Answer {
                    name,
                    id,
                    error,
                    message,
                } => (
                    name.clone(),
                    id,
                    AdminResult::err(name.unwrap_or_default(), error.code(), message),
                ),
            };
            let mut r = DeletableTopicResult::default()
                .with_name(name.map(|n| topic_name(&n)))
                .with_error_code(result.error_code);
            if version >= 5 {
                r.error_message = result.message.map(str_bytes);
            }
            if version >= 6 {
                r.topic_id = id;
            }
            r
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::log::LogConfig;
    use crate::metadata::TopicImage;

    pub(super) fn image_with(name: &str, id: uuid::Uuid) -> MetadataImage {
        let mut image =
            MetadataImage::empty("c".into(), 0, "127.0.0.1:9092".parse().expect("addr"));
        image.topics.insert(
            name.to_string(),
            Arc::new(TopicImage {
                name: name.to_string(),
                id,
                partitions: Vec::new(),
                configs: BTreeMap::new(),
                log_config: LogConfig::default(),
                internal: false,
            }),
        );
        image.topics_by_id.insert(id, name.to_string());
        image
    }

    #[test]
    fn resolves_names_and_ids() {
        let id = uuid::Uuid::from_u128(7);
        let image = image_with("orders", id);
        assert_eq!(
            resolve(&image, Some("orders".into()), uuid::Uuid::nil()),
            Target::Delete {
                name: "orders".into(),
                id
            }
        );
        assert_eq!(
            resolve(&image, None, id),
            Target::Delete {
                name: "orders".into(),
                id
            }
        );
        // An unknown name still goes to the controller, which owns that answer.
        assert_eq!(
            resolve(&image, Some("other".into()), uuid::Uuid::nil()),
            Target::Delete {
                name: "other".into(),
                id: uuid::Uuid::nil()
            }
        );
        let err = |t: Target| match t {
            Target::Answer { error, .. } => Some(error),
            Target::Delete { .. } => None,
        };
        assert_eq!(
            err(resolve(&image, None, uuid::Uuid::from_u128(8))),
            Some(ResponseError::UnknownTopicId)
        );
        assert_eq!(
            err(resolve(&image, Some("orders".into()), id)),
            Some(ResponseError::InvalidRequest)
        );
        assert_eq!(
            err(resolve(&image, None, uuid::Uuid::nil())),
            Some(ResponseError::InvalidRequest)
        );
    }
}

#[cfg(test)]
mod handler_tests {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;

    use super::*;
    use crate::api::admin::test_support::{ctx, encodes};
    use crate::controller::AdminResponse;

    #[test]
    fn deletes_by_name_and_id_at_every_version() {
        let id = uuid::Uuid::from_u128(7);
        let (ctx, _) = ctx(tests::image_with("orders", id), |req| match req {
            AdminRequest::DeleteTopics { names } => {
                AdminResponse::Results(names.iter().map(|n| AdminResult::ok(n.as_str())).collect())
            }
            _ => AdminResponse::Results(Vec::new()),
        });
        for v in 1..=5 {
            let req = DeleteTopicsRequest::default().with_topic_names(vec![topic_name("orders")]);
            let r = futures::executor::block_on(handle(&ctx, req, v));
            assert_eq!(r.responses[0].error_code, 0);
            encodes(&r, v);
        }
        let req = DeleteTopicsRequest::default().with_topics(vec![
            DeleteTopicState::default().with_topic_id(id),
            DeleteTopicState::default().with_topic_id(uuid::Uuid::from_u128(8)),
        ]);
        let r = futures::executor::block_on(handle(&ctx, req, 6));
        assert_eq!(r.responses[0].error_code, 0);
        assert_eq!(
            r.responses[0].name.as_ref().map(|n| n.0.as_str()),
            Some("orders")
        );
        assert_eq!(r.responses[0].topic_id, id);
        assert_eq!(
            r.responses[1].error_code,
            ResponseError::UnknownTopicId.code()
        );
        assert!(r.responses[1].name.is_none());
        encodes(&r, 6);
    }
}
