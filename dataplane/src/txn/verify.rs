//! Transaction verification on the partition leader (KIP-890 part 1): before a
//! partition takes the first batch of a transaction, its leader asks the transaction's
//! coordinator whether the transaction is ongoing with this partition added (by this
//! producer id and epoch). A late or stray transactional write (a producer that lost its
//! AddPartitionsToTxn, or whose transaction already ended) is refused with
//! INVALID_TXN_STATE instead of opening a transaction no marker will ever close: the
//! hanging transaction that would hold the partition's LSO back for good.
//!
//! The coordinator is asked in place when this node leads its `__transaction_state`
//! partition, and with DescribeTransactions on the coordinator's broker otherwise (one
//! cached connection per broker on the shard's transaction runtime). Kafka sends
//! AddPartitionsToTxn v4 with `VerifyOnly`; DescribeTransactions carries the same facts
//! and every Twinlog broker serves it.
//!
//! Only a batch that would open a transaction is verified: one whose producer has no
//! open transaction in this partition yet. The rest of the transaction's batches append
//! as before.

use std::rc::Rc;

use kafka_protocol::messages::DescribeTransactionsRequest;
use kafka_protocol::ResponseError;

use super::runtime::{call_txn, TxnCall};
use super::state::TxnDescription;
use super::{TxnState, TRANSACTION_STATE_TOPIC};
use crate::shard::ShardCtx;
use crate::types::{ProducerEpoch, ProducerId, TopicPartition};

/// Why a transactional write is refused: the Kafka error code and a message.
pub type Refusal = (i16, String);

/// What the coordinator says of one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: TxnState,
    pub partitions: Vec<TopicPartition>,
}

impl From<TxnDescription> for Described {
    fn from(d: TxnDescription) -> Self {
        Described {
            producer_id: d.producer_id.0,
            producer_epoch: d.producer_epoch.0,
            state: d.state,
            partitions: d.partitions,
        }
    }
}

/// The rule: the transaction is ongoing, for this producer id and epoch, with `tp` in it.
pub fn check(
    described: Option<&Described>,
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    tp: &TopicPartition,
) -> Result<(), Refusal> {
    let invalid = |why: String| Err((ResponseError::InvalidTxnState.code(), why));
    let Some(d) = described else {
        return invalid(format!(
            "no transaction is known for the producer writing to {tp}"
        ));
    };
    if d.producer_id != producer_id.0 {
        return invalid(format!(
            "the transaction belongs to producer id {}, not {}",
            d.producer_id, producer_id.0
        ));
    }
    if d.producer_epoch != producer_epoch.0 {
        return Err((
            ResponseError::InvalidProducerEpoch.code(),
            format!(
                "producer epoch {} is not the transaction's ({})",
                producer_epoch.0, d.producer_epoch
            ),
        ));
    }
    if d.state != TxnState::Ongoing || !d.partitions.contains(tp) {
        return invalid(format!(
            "{tp} is not in an ongoing transaction of producer {} (state {:?}): add it with AddPartitionsToTxn first",
            producer_id.0, d.state
        ));
    }
    Ok(())
}

/// Verifies that `tp` may take a batch opening a transaction of `transactional_id` by
/// (`producer_id`, `producer_epoch`). A coordinator that cannot be asked answers
/// NOT_ENOUGH_REPLICAS, which every producer retries.
pub async fn verify(
    ctx: &Rc<ShardCtx>,
    transactional_id: &str,
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    tp: &TopicPartition,
) -> Result<(), Refusal> {
    let described = describe(ctx, transactional_id).await.map_err(|why| {
        (
            ResponseError::NotEnoughReplicas.code(),
            format!("cannot verify the transaction writing to {tp} yet: {why}"),
        )
    })?;
    check(described.as_ref(), producer_id, producer_epoch, tp)
}

/// The coordinator's view of `transactional_id` (`None`: it knows no such id).
async fn describe(ctx: &Rc<ShardCtx>, transactional_id: &str) -> Result<Option<Described>, String> {
    let image = ctx.metadata.load();
    let runtime = ctx
        .txn_runtime()
        .ok_or_else(|| "no transaction runtime".to_string())?;
    let partition = runtime.partition_for(transactional_id);
    let leader = image
        .topic(TRANSACTION_STATE_TOPIC)
        .and_then(|t| t.partitions.get(partition as usize))
        .map(|p| p.leader)
        .ok_or_else(|| format!("{TRANSACTION_STATE_TOPIC} is not there yet"))?;
    if leader == image.node_id {
        let d: Option<TxnDescription> = call_txn(
            ctx,
            transactional_id,
            TxnCall::Describe(transactional_id.to_string()),
        )
        .await
        .map_err(|code| format!("coordinator error {code}"))?;
        return Ok(d.map(Described::from));
    }
    let mut conn = runtime.take_link(&image, leader).await?;
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![
        kafka_protocol::messages::TransactionalId(crate::api::str_bytes(transactional_id)),
    ]);
    let answer = conn.send(&request, 0).await;
    if !conn.is_broken() {
        runtime.put_link(leader, conn);
    }
    let response = answer.map_err(|e| format!("DescribeTransactions on broker {leader}: {e}"))?;
    let Some(state) = response.transaction_states.into_iter().next() else {
        return Err(format!("broker {leader} answered nothing"));
    };
    if state.error_code == ResponseError::TransactionalIdNotFound.code() {
        return Ok(None);
    }
    if state.error_code != 0 {
        return Err(format!("broker {leader}: error {}", state.error_code));
    }
    let parsed = TxnState::from_name(state.transaction_state.as_str()).ok_or_else(|| {
        format!(
            "unknown transaction state {}",
            state.transaction_state.as_str()
        )
    })?;
    Ok(Some(Described {
        producer_id: state.producer_id.0,
        producer_epoch: state.producer_epoch,
        state: parsed,
        partitions: state
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| TopicPartition::new(t.topic.0.as_str(), *p))
            })
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_ongoing_transaction_with_the_partition_added_takes_its_first_batch() {
        let tp = TopicPartition::new("t", 1);
        let ongoing = Described {
            producer_id: 7,
            producer_epoch: 2,
            state: TxnState::Ongoing,
            partitions: vec![TopicPartition::new("t", 0), tp.clone()],
        };
        let (pid, epoch) = (ProducerId(7), ProducerEpoch(2));
        assert_eq!(check(Some(&ongoing), pid, epoch, &tp), Ok(()));
        let invalid = ResponseError::InvalidTxnState.code();
        let code = |d: Option<&Described>, pid, epoch, tp: &TopicPartition| {
            check(d, pid, epoch, tp).err().map(|(c, _)| c)
        };
        assert_eq!(code(None, pid, epoch, &tp), Some(invalid));
        assert_eq!(
            code(Some(&ongoing), pid, epoch, &TopicPartition::new("t", 2)),
            Some(invalid),
            "a partition never added"
        );
        assert_eq!(
            code(Some(&ongoing), ProducerId(8), epoch, &tp),
            Some(invalid)
        );
        assert_eq!(
            code(Some(&ongoing), pid, ProducerEpoch(1), &tp),
            Some(ResponseError::InvalidProducerEpoch.code())
        );
        for state in [
            TxnState::PrepareCommit,
            TxnState::CompleteAbort,
            TxnState::Empty,
        ] {
            let ended = Described {
                state,
                ..ongoing.clone()
            };
            assert_eq!(
                code(Some(&ended), pid, epoch, &tp),
                Some(invalid),
                "{state:?}"
            );
        }
    }
}
