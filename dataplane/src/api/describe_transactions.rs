//! DescribeTransactions (65), v0: the state of transactional ids on their coordinators
//! (`kafka-transactions describe`, `Admin.describeTransactions`).

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::ResponseError;

use crate::api::str_bytes;
use crate::shard::ShardCtx;
use crate::txn::runtime::{call_txn, TxnCall};
use crate::txn::state::TxnDescription;

async fn describe_one(ctx: &Rc<ShardCtx>, id: String) -> Result<TxnDescription, i16> {
    let key = id.clone();
    call_txn::<Option<TxnDescription>>(ctx, &key, TxnCall::Describe(id))
        .await?
        .ok_or(ResponseError::TransactionalIdNotFound.code())
}

pub async fn handle(
    ctx: &Rc<ShardCtx>,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut states = Vec::with_capacity(request.transactional_ids.len());
    for id in request.transactional_ids {
        let mut s = TransactionState::default().with_transactional_id(id.clone());
        match describe_one(ctx, id.0.to_string()).await {
            Ok(d) => {
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for tp in &d.partitions {
                    by_topic
                        .entry(tp.topic.to_string())
                        .or_default()
                        .push(tp.partition);
                }
                s = s
                    .with_transaction_state(str_bytes(d.state.name()))
                    .with_transaction_timeout_ms(d.txn_timeout_ms)
                    .with_transaction_start_time_ms(d.start_timestamp_ms)
                    .with_producer_id(ProducerId(d.producer_id.0))
                    .with_producer_epoch(d.producer_epoch.0)
                    .with_topics(
                        by_topic
                            .into_iter()
                            .map(|(t, mut ps)| {
                                ps.sort_unstable();
                                TopicData::default()
                                    .with_topic(TopicName(str_bytes(t)))
                                    .with_partitions(ps)
                            })
                            .collect(),
                    );
            }
            Err(code) => {
                s.error_code = code;
                s.producer_id = ProducerId(-1);
                s.producer_epoch = -1;
                s.transaction_start_time_ms = -1;
            }
        }
        states.push(s);
    }
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
