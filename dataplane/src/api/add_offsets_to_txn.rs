//! AddOffsetsToTxn (25), v0-v3.

use std::rc::Rc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use crate::shard::ShardCtx;
use crate::txn::runtime::{call_txn, Answer, TxnCall};
use crate::txn::state::fenced_code_for_client;
use crate::txn::AddOffsetsToTxnRequest as Add;
use crate::types::{ProducerEpoch, ProducerId};

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let transactional_id = request.transactional_id.0.to_string();
    let offsets_partitions = ctx
        .group_runtime()
        .map_or(1, |rt| rt.config().offsets_topic_partitions.max(1));
    let add = Add {
        transactional_id: transactional_id.clone(),
        producer_id: ProducerId(request.producer_id.0),
        producer_epoch: ProducerEpoch(request.producer_epoch),
        group_id: request.group_id.0.to_string(),
    };
    let call = TxnCall::AddOffsets {
        add,
        offsets_partitions,
    };
    let result: Result<Answer<i16>, i16> = call_txn(ctx, &transactional_id, call).await;
    let code = match result {
        Ok(answer) => answer.code(),
        Err(code) => code,
    };
    AddOffsetsToTxnResponse::default().with_error_code(fenced_code_for_client(code, version < 2))
}
