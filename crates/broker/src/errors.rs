//! The one place internal errors map onto Kafka's error codes (whose
//! numbers live in `krabka_protocol::ErrorCode`).

use krabka_log::producer_state::ProducerStateError;
use krabka_log::LogError;
use krabka_protocol::records::RecordError;
use krabka_protocol::ErrorCode;

/// The Kafka error code and message for a failed log operation.
pub fn log_error_code(error: &LogError) -> i16 {
    log_error(error).code()
}

/// The Kafka error for a failed log operation.
pub fn log_error(error: &LogError) -> ErrorCode {
    match error {
        LogError::Io(_) => ErrorCode::KAFKA_STORAGE_ERROR,
        LogError::InvalidBatch(RecordError::UnsupportedMagic(_)) => ErrorCode::UNSUPPORTED_VERSION,
        LogError::InvalidBatch(_) => ErrorCode::CORRUPT_MESSAGE,
        LogError::InconsistentBatch(_) => ErrorCode::INVALID_RECORD,
        LogError::RecordsRefused { invalid_timestamp: true, .. } => ErrorCode::INVALID_TIMESTAMP,
        LogError::RecordsRefused { invalid_timestamp: false, .. } => ErrorCode::INVALID_RECORD,
        LogError::RecordTooLarge { .. } => ErrorCode::MESSAGE_TOO_LARGE,
        LogError::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
        LogError::ProducerState(state) => match state {
            ProducerStateError::InvalidProducerEpoch { .. } => ErrorCode::INVALID_PRODUCER_EPOCH,
            ProducerStateError::OutOfOrderSequence { .. } => ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
            ProducerStateError::TransactionCoordinatorFenced { .. } => ErrorCode::TRANSACTION_COORDINATOR_FENCED,
            ProducerStateError::InvalidMarker(_) => ErrorCode::INVALID_TXN_STATE,
        },
        LogError::NonMonotonicOffset { .. } => ErrorCode::UNKNOWN_SERVER_ERROR,
        LogError::InconsistentTopicId { .. } => ErrorCode::INCONSISTENT_TOPIC_ID,
    }
}
