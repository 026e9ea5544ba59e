//! ListTransactions (66), v0-v2: the transactional ids of every transaction coordinator
//! on every shard, filtered by state, producer id, duration (v1) and id pattern (v2), as
//! Kafka's `TransactionStateManager.listTransactionStates` does.

use std::rc::Rc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::shard::ShardCtx;
use crate::txn::runtime::list_all_transactions;
use crate::txn::TxnState;

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    let mut states = Vec::new();
    let mut unknown = Vec::new();
    for s in &request.state_filters {
        match TxnState::from_name(s.as_str()) {
            Some(state) => states.push(state),
            None => unknown.push(s.clone()),
        }
    }
    let pattern = match (version >= 2)
        .then_some(request.transactional_id_pattern.as_ref())
        .flatten()
        .filter(|p| !p.is_empty())
    {
        Some(p) => match regex::Regex::new(&format!("^(?:{})$", p.as_str())) {
            Ok(re) => Some(re),
            Err(_) => {
                return ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code());
            }
        },
        None => None,
    };
    let duration = if version >= 1 {
        request.duration_filter
    } else {
        -1
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let transaction_states = list_all_transactions(ctx)
        .await
        .into_iter()
        .filter(|(_, _, state, _)| states.is_empty() || states.contains(state))
        .filter(|(_, pid, _, _)| {
            request.producer_id_filters.is_empty()
                || request.producer_id_filters.iter().any(|f| f.0 == *pid)
        })
        .filter(|(_, _, _, start)| duration < 0 || (*start >= 0 && now - *start >= duration))
        .filter(|(id, _, _, _)| pattern.as_ref().is_none_or(|re| re.is_match(id)))
        .map(|(id, pid, state, _)| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(id)))
                .with_producer_id(ProducerId(pid))
                .with_transaction_state(str_bytes(state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(transaction_states)
}
