//! The log's one error type, which the broker maps to Kafka error codes
//! (`crates/broker/src/errors.rs`). Every module of the crate returns it, so
//! it lives apart from all of them.

use std::io;

use krabka_protocol::records::RecordError;

use crate::producer_state::ProducerStateError;

/// Errors the broker maps to Kafka error codes.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// KAFKA_STORAGE_ERROR: the disk failed (ENOSPC, EIO...).
    #[error("storage error: {0}")]
    Io(#[from] io::Error),
    /// CORRUPT_MESSAGE (or UNSUPPORTED_VERSION for an old magic).
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] RecordError),
    /// INVALID_RECORD: the batch header contradicts itself.
    #[error("invalid record batch: {0}")]
    InconsistentBatch(String),
    /// INVALID_TIMESTAMP when any record's timestamp is refused, else
    /// INVALID_RECORD: records a leader refuses (Kafka's record errors),
    /// each named by its index in the batch.
    #[error("{message}")]
    RecordsRefused { invalid_timestamp: bool, message: String, record_errors: Vec<RecordRefusal> },
    /// MESSAGE_TOO_LARGE.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge { size: usize, max: u32 },
    /// OFFSET_OUT_OF_RANGE.
    #[error("offset {offset} is outside [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },
    /// INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, ...
    #[error(transparent)]
    ProducerState(#[from] ProducerStateError),
    /// A follower append that does not continue the log.
    #[error("offset {offset} does not follow the log end offset {log_end_offset}")]
    NonMonotonicOffset { offset: i64, log_end_offset: i64 },
    /// INCONSISTENT_TOPIC_ID: the directory a new log would take holds
    /// the log of another topic of the same name.
    #[error("{} holds the log of topic id {found}, not of {wanted}", dir.display())]
    InconsistentTopicId { dir: std::path::PathBuf, found: krabka_protocol::Uuid, wanted: krabka_protocol::Uuid },
}

/// One refused record: its index in its batch and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRefusal {
    pub index: i32,
    pub message: String,
}
