//! Cluster metadata decisions, as Kafka's controller makes them: what a
//! request may change and the metadata records that change it. It decides
//! and builds records; committing them and opening the logs they create is
//! the broker's. On the single combined node the broker is its own
//! controller; with a quorum this becomes the controller crate.

pub mod producer_ids;
pub mod topics;

use crate::metadata::store::MAX_RECORDS_PER_USER_OP;
use crate::metadata::MetadataError;
use krabka_protocol::ErrorCode;

/// An error code and message for one resource of a request (Kafka's `ApiError`).
#[derive(Debug)]
pub struct ApiError {
    pub code: i16,
    pub message: String,
}

impl ApiError {
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into() }
    }
}

impl From<MetadataError> for ApiError {
    fn from(e: MetadataError) -> Self {
        if let MetadataError::TooManyRecords { .. } = e {
            return ApiError::too_many_records();
        }
        tracing::error!(error = %e, "metadata commit failed");
        ApiError::new(ErrorCode::KAFKA_STORAGE_ERROR.code(), e.to_string())
    }
}

impl ApiError {
    /// Kafka's answer to an operation over `MAX_RECORDS_PER_USER_OP` records.
    pub fn too_many_records() -> Self {
        ApiError::new(ErrorCode::POLICY_VIOLATION.code(), "Unable to perform excessively large batch operation.")
    }
}

/// Counts the records an operation plans, and fails the whole operation
/// before one past `MAX_RECORDS_PER_USER_OP` is built (validate-only
/// requests count too, as Kafka's controller builds their records as well).
#[derive(Default)]
pub struct RecordBudget {
    planned: usize,
}

impl RecordBudget {
    pub fn take(&mut self, records: usize) -> Result<(), ApiError> {
        self.planned = self.planned.saturating_add(records);
        if self.planned > MAX_RECORDS_PER_USER_OP {
            return Err(ApiError::too_many_records());
        }
        Ok(())
    }
}
