//! The controller's two errors: `MetadataError`, a commit that failed (the
//! log, a corrupt record, an oversized batch), and `ApiError`, the error
//! code and message one resource of a request is answered with.

use krabka_log::LogError;
use krabka_metadata::records::CorruptRecord;
use krabka_protocol::ErrorCode;

use crate::limits::MAX_RECORDS_PER_USER_OP;

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("metadata log: {0}")]
    Log(#[from] LogError),
    #[error("metadata log record at offset {offset}: {reason}")]
    Corrupt { offset: i64, reason: String },
    #[error("{records} metadata records in one operation, more than {MAX_RECORDS_PER_USER_OP}")]
    TooManyRecords { records: usize },
    /// This node is not the active controller (or stopped being it before
    /// the commit): the client asks the controller it finds next.
    #[error("this node is not the active controller")]
    NotController,
    /// The quorum did not commit in time; the records may still commit.
    #[error("the metadata quorum did not commit within {timeout_ms} ms")]
    Timeout { timeout_ms: u64 },
}

impl From<CorruptRecord> for MetadataError {
    fn from(e: CorruptRecord) -> Self {
        MetadataError::Corrupt { offset: e.offset, reason: e.reason }
    }
}

/// An error code and message for one resource of a request (Kafka's `ApiError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: i16,
    pub message: String,
}

impl ApiError {
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into() }
    }

    /// Kafka's answer to an operation over `MAX_RECORDS_PER_USER_OP` records.
    pub fn too_many_records() -> Self {
        ApiError::new(ErrorCode::POLICY_VIOLATION.code(), "Unable to perform excessively large batch operation.")
    }
}

impl From<MetadataError> for ApiError {
    fn from(e: MetadataError) -> Self {
        match e {
            MetadataError::TooManyRecords { .. } => return ApiError::too_many_records(),
            // Kafka's messages for the two; a client retries both.
            MetadataError::NotController => {
                let message = "This is not the correct controller for this cluster.";
                return ApiError::new(ErrorCode::NOT_CONTROLLER.code(), message);
            }
            MetadataError::Timeout { .. } => return ApiError::new(ErrorCode::REQUEST_TIMED_OUT.code(), e.to_string()),
            MetadataError::Log(_) | MetadataError::Corrupt { .. } => {}
        }
        tracing::error!(error = %e, "metadata commit failed");
        ApiError::new(ErrorCode::KAFKA_STORAGE_ERROR.code(), e.to_string())
    }
}

/// KIP-599's controller mutation quota as a plan sees it: each topic
/// created, deleted or grown asks for its partition count before it is
/// planned; a refusal (THROTTLING_QUOTA_EXCEEDED) is that topic's outcome,
/// as Kafka's ReplicationControlManager applies `applyPartitionChangeQuota`.
pub type MutationQuota<'a> = &'a mut dyn FnMut(usize) -> Result<(), ApiError>;

/// Kafka's text for THROTTLING_QUOTA_EXCEEDED.
pub const THROTTLED: &str = "The throttling quota has been exceeded.";

/// No quota: every mutation is allowed.
pub fn unlimited_mutations(_partitions: usize) -> Result<(), ApiError> {
    Ok(())
}
