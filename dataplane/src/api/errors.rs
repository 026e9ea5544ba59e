//! Kafka error codes for the data plane's errors: the only place they are mapped.

use kafka_protocol::ResponseError;

use crate::log::producer_state::ProducerStateError;
use crate::log::LogError;

pub const NONE: i16 = 0;

pub fn code(e: ResponseError) -> i16 {
    e.code()
}

/// The error code a client gets for a log error.
pub fn log_error_code(e: &LogError) -> i16 {
    let r = match e {
        LogError::Io(_) => ResponseError::KafkaStorageError,
        LogError::InvalidBatch { .. } => ResponseError::CorruptMessage,
        LogError::InconsistentRecordCount { .. } | LogError::ControlBatchFromClient { .. } => {
            ResponseError::InvalidRecord
        }
        LogError::EmptyAppend { .. } | LogError::Rejected { .. } => ResponseError::InvalidRecord,
        LogError::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        LogError::UnexpectedAppendOffset { .. } => ResponseError::UnknownServerError,
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::CorruptMetadata { .. } | LogError::InconsistentTopicId { .. } => {
            ResponseError::KafkaStorageError
        }
        LogError::Producer { source, .. } => match source {
            ProducerStateError::OutOfOrderSequence { .. } => {
                ResponseError::OutOfOrderSequenceNumber
            }
            ProducerStateError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
            ProducerStateError::ProducerFenced { .. } => ResponseError::ProducerFenced,
            ProducerStateError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
            ProducerStateError::TransactionCoordinatorFenced { .. } => {
                ResponseError::TransactionCoordinatorFenced
            }
            ProducerStateError::BadControlRecord { .. } => ResponseError::CorruptMessage,
        },
    };
    r.code()
}
