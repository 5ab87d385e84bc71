//! Kafka's error codes and the one place internal errors map onto them.

use krabka_log::producer_state::ProducerStateError;
use krabka_log::LogError;
use krabka_protocol::records::RecordError;

/// Kafka's numeric error codes (org.apache.kafka.common.protocol.Errors).
pub mod code {
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const RECORD_LIST_TOO_LARGE: i16 = 18;
    pub const NOT_ENOUGH_REPLICAS: i16 = 19;
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    pub const INVALID_TIMESTAMP: i16 = 32;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    pub const INVALID_CONFIG: i16 = 40;
    pub const INVALID_REQUEST: i16 = 42;
    pub const POLICY_VIOLATION: i16 = 44;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const LOG_DIR_NOT_FOUND: i16 = 57;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const TOPIC_DELETION_DISABLED: i16 = 73;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
    pub const INVALID_RECORD: i16 = 87;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const INCONSISTENT_TOPIC_ID: i16 = 103;
    pub const RESOURCE_NOT_FOUND: i16 = 91;
}

/// The Kafka error code and message for a failed log operation.
pub fn log_error_code(error: &LogError) -> i16 {
    match error {
        LogError::Io(_) => code::KAFKA_STORAGE_ERROR,
        LogError::InvalidBatch(RecordError::UnsupportedMagic(_)) => code::UNSUPPORTED_VERSION,
        LogError::InvalidBatch(_) => code::CORRUPT_MESSAGE,
        LogError::InconsistentBatch(_) => code::INVALID_RECORD,
        LogError::RecordTooLarge { .. } => code::MESSAGE_TOO_LARGE,
        LogError::OffsetOutOfRange { .. } => code::OFFSET_OUT_OF_RANGE,
        LogError::ProducerState(state) => match state {
            ProducerStateError::InvalidProducerEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
            ProducerStateError::OutOfOrderSequence { .. } => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
            ProducerStateError::TransactionCoordinatorFenced { .. } => code::TRANSACTION_COORDINATOR_FENCED,
            ProducerStateError::InvalidMarker(_) => code::INVALID_TXN_STATE,
        },
        LogError::NonMonotonicOffset { .. } => code::UNKNOWN_SERVER_ERROR,
    }
}
