//! The mirror RPCs (94-104): the broker side. Admin RPCs are validated here (reaching the
//! source cluster where the answer depends on it) and forwarded to the controller;
//! ReadMirrorStates, WriteMirrorStates and DescribeMirrors go to the control plane's
//! mirror side; ListMirrors is answered from the metadata image.

use std::rc::Rc;

use kafka_protocol::messages::RequestHeader;
use kafka_protocol::ResponseError;

use crate::shard::ShardCtx;
use crate::wire::mirror::*;

/// Handles one decoded mirror request.
pub async fn handle(
    ctx: &Rc<ShardCtx>,
    header: &RequestHeader,
    request: MirrorRequest,
) -> MirrorResponse {
    let _ = (ctx, header);
    error_response(
        &request,
        ResponseError::UnsupportedVersion.code(),
        "not implemented yet",
    )
}

/// The answer to `request` with one error everywhere.
pub fn error_response(request: &MirrorRequest, error_code: i16, message: &str) -> MirrorResponse {
    let simple = || SimpleMirrorResponse {
        throttle_time_ms: 0,
        error_code,
        error_message: Some(message.to_string()),
    };
    let per_topic = |names: Vec<String>| MirrorTopicsResponse {
        throttle_time_ms: 0,
        error_code,
        error_message: Some(message.to_string()),
        topics: names
            .into_iter()
            .map(|name| MirrorTopicResult {
                name,
                error_code,
                error_message: Some(message.to_string()),
            })
            .collect(),
    };
    match request {
        MirrorRequest::CreateMirror(_) => MirrorResponse::CreateMirror(simple()),
        MirrorRequest::DeleteMirror(_) => MirrorResponse::DeleteMirror(simple()),
        MirrorRequest::AddTopicsToMirror(r) => MirrorResponse::AddTopicsToMirror(per_topic(
            r.topics.iter().map(|t| t.name.clone()).collect(),
        )),
        MirrorRequest::RemoveTopicsFromMirror(r) => {
            MirrorResponse::RemoveTopicsFromMirror(per_topic(r.topics.clone()))
        }
        MirrorRequest::PauseMirrorTopics(r) => {
            MirrorResponse::PauseMirrorTopics(per_topic(r.topics.clone()))
        }
        MirrorRequest::ResumeMirrorTopics(r) => {
            MirrorResponse::ResumeMirrorTopics(per_topic(r.topics.clone()))
        }
        MirrorRequest::ListMirrors(_) => MirrorResponse::ListMirrors(ListMirrorsResponse {
            error_code,
            error_message: Some(message.to_string()),
            ..Default::default()
        }),
        MirrorRequest::DescribeMirrors(_) => {
            MirrorResponse::DescribeMirrors(DescribeMirrorsResponse {
                error_code,
                error_message: Some(message.to_string()),
                ..Default::default()
            })
        }
        MirrorRequest::ReadMirrorStates(r) => {
            MirrorResponse::ReadMirrorStates(ReadMirrorStatesResponse {
                throttle_time_ms: 0,
                error_code,
                topics: r
                    .topics
                    .iter()
                    .map(|(name, parts)| MirrorStatesTopic {
                        name: name.clone(),
                        partitions: parts
                            .iter()
                            .map(|p| MirrorStateEntry {
                                partition: *p,
                                error_code,
                                ..Default::default()
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
        MirrorRequest::WriteMirrorStates(r) => {
            MirrorResponse::WriteMirrorStates(WriteMirrorStatesResponse {
                throttle_time_ms: 0,
                topics: r
                    .topics
                    .iter()
                    .map(|t| WriteMirrorStatesTopicResult {
                        name: t.name.clone(),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| PartitionResult {
                                partition: p.partition,
                                error_code,
                                error_message: Some(message.to_string()),
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
    }
}
