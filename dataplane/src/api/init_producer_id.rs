//! InitProducerId (22). Idempotent producers: every request gets a fresh producer id
//! with epoch 0 from this shard's block (`ShardCtx::next_producer_id`). That is what
//! Kafka's coordinator does for a null transactional id, even when a v3+ request names
//! its current id and epoch (clients bump an idempotent producer's epoch locally and only
//! ask for a new id when the epoch is exhausted). Transactional producers go to the
//! transaction coordinator of their id (COORDINATOR_NOT_AVAILABLE while there is none).

use std::rc::Rc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use crate::shard::ShardCtx;
use crate::txn::runtime::{call_txn, Answer, TxnCall};
use crate::txn::state::{fenced_code_for_client, TxnResponse};

/// Kafka's "no producer id" and "no producer epoch".
const NO_PRODUCER_ID: i64 = -1;
const NO_PRODUCER_EPOCH: i16 = -1;

/// What to do with a request before allocating anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// Hand out a new producer id, epoch 0.
    NewId,
    /// Ask the transaction coordinator.
    Transactional,
    Refuse(ResponseError),
}

fn decide(
    transactional_id: Option<&str>,
    producer_id: i64,
    producer_epoch: i16,
    version: i16,
) -> Decision {
    // v3+ may name the current id and epoch; both or neither (Kafka's check).
    if version >= 3 && ((producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH)) {
        return Decision::Refuse(ResponseError::InvalidRequest);
    }
    match transactional_id {
        None => Decision::NewId,
        Some("") => Decision::Refuse(ResponseError::InvalidRequest),
        Some(_) => Decision::Transactional,
    }
}

fn error_response(e: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(e)
        .with_producer_id(ProducerId(NO_PRODUCER_ID))
        .with_producer_epoch(NO_PRODUCER_EPOCH)
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let decision = decide(
        request.transactional_id.as_ref().map(|t| t.0.as_str()),
        request.producer_id.0,
        request.producer_epoch,
        version,
    );
    match decision {
        Decision::Refuse(e) => error_response(e.code()),
        Decision::Transactional => transactional(ctx, request, version).await,
        Decision::NewId => match ctx.next_producer_id().await {
            Ok(id) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Err(code) => {
                tracing::warn!(code, "could not allocate a producer id");
                error_response(code)
            }
        },
    }
}

async fn transactional(
    ctx: &Rc<ShardCtx>,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let transactional_id = request
        .transactional_id
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let req = crate::txn::InitProducerIdRequest {
        transactional_id: Some(transactional_id.clone()),
        transaction_timeout_ms: request.transaction_timeout_ms,
        producer_id: crate::types::ProducerId(request.producer_id.0),
        producer_epoch: crate::types::ProducerEpoch(request.producer_epoch),
    };
    let result: Result<Answer<crate::txn::InitProducerIdResponse>, i16> =
        call_txn(ctx, &transactional_id, TxnCall::InitProducerId(req)).await;
    let answer = match result {
        Ok(Answer::Reply(r)) | Ok(Answer::Completed(Some(TxnResponse::InitProducerId(r)))) => r,
        Ok(Answer::Completed(_)) => {
            return error_response(ResponseError::UnknownServerError.code());
        }
        Err(code) => return error_response(code),
    };
    if answer.error_code != 0 {
        return error_response(fenced_code_for_client(answer.error_code, version < 4));
    }
    InitProducerIdResponse::default()
        .with_producer_id(ProducerId(answer.producer_id.0))
        .with_producer_epoch(answer.producer_epoch.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotent_producers_get_new_ids() {
        assert_eq!(decide(None, -1, -1, 0), Decision::NewId);
        assert_eq!(decide(None, -1, -1, 4), Decision::NewId);
        // A v3+ idempotent producer naming its id still gets a new one, as in Kafka.
        assert_eq!(decide(None, 42, 3, 4), Decision::NewId);
    }

    #[test]
    fn refusals() {
        assert_eq!(
            decide(None, 42, -1, 3),
            Decision::Refuse(ResponseError::InvalidRequest)
        );
        assert_eq!(
            decide(None, -1, 0, 4),
            Decision::Refuse(ResponseError::InvalidRequest)
        );
        assert_eq!(
            decide(Some(""), -1, -1, 2),
            Decision::Refuse(ResponseError::InvalidRequest)
        );
        assert_eq!(decide(Some("txn"), -1, -1, 4), Decision::Transactional);
        let e = error_response(ResponseError::CoordinatorNotAvailable.code());
        assert_eq!((e.producer_id.0, e.producer_epoch), (-1, -1));
    }
}

#[cfg(test)]
mod handler_tests {
    use kafka_protocol::messages::TransactionalId;

    use super::*;
    use crate::api::admin::test_support::{ctx, encodes, image};
    use crate::api::str_bytes;
    use crate::controller::AdminResponse;

    #[test]
    fn ids_come_from_the_shard_block() {
        let (ctx, _) = ctx(image(), |_| AdminResponse::ProducerIds {
            first: 1000,
            count: 10,
        });
        for (i, v) in (0..=4).enumerate() {
            let r = futures::executor::block_on(handle(
                &ctx,
                InitProducerIdRequest::default().with_transactional_id(None),
                v,
            ));
            assert_eq!(r.error_code, 0);
            assert_eq!((r.producer_id.0, r.producer_epoch), (1000 + i as i64, 0));
            encodes(&r, v);
        }
        let txn = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(str_bytes("t"))));
        let r = futures::executor::block_on(handle(&ctx, txn, 4));
        assert_eq!(r.error_code, ResponseError::CoordinatorNotAvailable.code());
        encodes(&r, 4);
    }
}
