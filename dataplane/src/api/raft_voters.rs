//! AddRaftVoter (80) and RemoveRaftVoter (81), KIP-853: `kafka-metadata-quorum
//! add-controller` / `remove-controller` change the voters of a dynamic quorum
//! (`controller.quorum.bootstrap.servers`). Any broker takes them: its controller
//! commits the new voter's endpoint and has the membership change go through the Raft
//! leader, answering once the change is applied.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::rc::Rc;

use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::controller::{AdminRequest, AdminResponse};
use crate::shard::ShardCtx;

/// The error code and message of a controller's answer.
async fn submit(ctx: &Rc<ShardCtx>, request: AdminRequest) -> (i16, Option<StrBytes>) {
    match ctx.controller.submit(request).await {
        Ok(AdminResponse::Results(_)) => (0, None),
        Ok(AdminResponse::Failed {
            error_code,
            message,
        }) => (error_code, Some(str_bytes(message))),
        Ok(other) => (
            ResponseError::UnknownServerError.code(),
            Some(str_bytes(format!("unexpected controller answer {other:?}"))),
        ),
        Err(_) => (
            ResponseError::RequestTimedOut.code(),
            Some(str_bytes("the controller is shutting down".to_string())),
        ),
    }
}

/// A request naming another cluster is refused, as Kafka does.
fn other_cluster(ctx: &ShardCtx, cluster_id: Option<&StrBytes>) -> Option<(i16, Option<StrBytes>)> {
    let ours = ctx.metadata.load().cluster_id.clone();
    let theirs = cluster_id
        .map(|c| c.to_string())
        .filter(|c| !c.is_empty())?;
    (theirs != ours).then(|| {
        (
            ResponseError::InconsistentClusterId.code(),
            Some(str_bytes(format!(
                "cluster id {theirs} is not this cluster's ({ours})"
            ))),
        )
    })
}

/// The voter's controller endpoint: its listener named CONTROLLER, else its first.
fn endpoint(request: &AddRaftVoterRequest) -> Result<SocketAddr, String> {
    let listener = request
        .listeners
        .iter()
        .find(|l| l.name.eq_ignore_ascii_case("CONTROLLER"))
        .or_else(|| request.listeners.first())
        .ok_or("the request names no listener of the new voter")?;
    let ip = match listener.host.as_str() {
        h if h.eq_ignore_ascii_case("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h
            .parse::<IpAddr>()
            .map_err(|_| format!("listener host {h:?} is not an IP address or localhost"))?,
    };
    Ok(SocketAddr::new(ip, listener.port))
}

pub async fn handle_add(ctx: &Rc<ShardCtx>, request: AddRaftVoterRequest) -> AddRaftVoterResponse {
    let (code, message) = match other_cluster(ctx, request.cluster_id.as_ref()) {
        Some(refused) => refused,
        None => match endpoint(&request) {
            Err(m) => (ResponseError::InvalidRequest.code(), Some(str_bytes(m))),
            Ok(addr) => {
                let change = AdminRequest::AddRaftVoter {
                    node_id: request.voter_id,
                    directory_id: request.voter_directory_id,
                    addr,
                };
                submit(ctx, change).await
            }
        },
    };
    AddRaftVoterResponse::default()
        .with_error_code(code)
        .with_error_message(message)
}

pub async fn handle_remove(
    ctx: &Rc<ShardCtx>,
    request: RemoveRaftVoterRequest,
) -> RemoveRaftVoterResponse {
    let (code, message) = match other_cluster(ctx, request.cluster_id.as_ref()) {
        Some(refused) => refused,
        None => {
            let change = AdminRequest::RemoveRaftVoter {
                node_id: request.voter_id,
                directory_id: request.voter_directory_id,
            };
            submit(ctx, change).await
        }
    };
    RemoveRaftVoterResponse::default()
        .with_error_code(code)
        .with_error_message(message)
}
