//! The transaction coordinator core: `__transaction_state` record formats
//! ([`records`]) and the per-transactional-id state machine ([`state`]), both free of
//! I/O so the broker can drive them from a shard and tests can drive them directly.
//!
//! What the caller wires in: appending [`state::TxnLogAppend`] records to the
//! coordinator's `__transaction_state` partition, writing [`state::TxnMarker`]s to the
//! partitions of a transaction (locally or on the owning shard), producer id
//! allocation ([`state::ProducerIdAllocator`]), the clock (`now_ms`) and a periodic
//! [`state::TransactionCoordinator::tick`] for transaction timeouts.

pub mod records;
pub mod runtime;
pub mod state;
pub mod verify;

pub use records::{partition_for, TxnState, TRANSACTION_STATE_TOPIC};
pub use state::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AppendCompletion, EndTxnRequest,
    InitProducerIdRequest, InitProducerIdResponse, LoadOutcome, ProducerIdAllocator, Step,
    TransactionConfig, TransactionCoordinator, TxnLogAppend, TxnMarker, TxnResponse,
};
