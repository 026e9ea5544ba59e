//! EndTxn (26), v0-v3. Answered once the transaction's markers are written.

use std::rc::Rc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use crate::shard::ShardCtx;
use crate::txn::runtime::{call_txn, Answer, TxnCall};
use crate::txn::state::fenced_code_for_client;
use crate::txn::EndTxnRequest as End;
use crate::types::{ProducerEpoch, ProducerId};

pub async fn handle(ctx: &Rc<ShardCtx>, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let transactional_id = request.transactional_id.0.to_string();
    let end = End {
        transactional_id: transactional_id.clone(),
        producer_id: ProducerId(request.producer_id.0),
        producer_epoch: ProducerEpoch(request.producer_epoch),
        commit: request.committed,
    };
    let result: Result<Answer<i16>, i16> =
        call_txn(ctx, &transactional_id, TxnCall::EndTxn(end)).await;
    let code = match result {
        Ok(answer) => answer.code(),
        Err(code) => code,
    };
    EndTxnResponse::default()
        .with_error_code(fenced_code_for_client(code, version < 2))
        .with_producer_id(kafka_protocol::messages::ProducerId(-1))
        .with_producer_epoch(-1)
}
