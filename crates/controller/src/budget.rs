//! `RecordBudget`: the count of records an operation plans, held to
//! `MAX_RECORDS_PER_USER_OP` before any is built.

use crate::error::ApiError;
use crate::limits::MAX_RECORDS_PER_USER_OP;

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

    /// The records planned so far.
    pub fn planned(&self) -> usize {
        self.planned
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::ErrorCode;

    #[test]
    fn the_limit_itself_is_allowed_one_more_is_not() {
        let mut budget = RecordBudget::default();
        budget.take(MAX_RECORDS_PER_USER_OP - 1).unwrap();
        budget.take(1).unwrap();
        assert_eq!(budget.planned(), MAX_RECORDS_PER_USER_OP);
        let refused = budget.take(1).unwrap_err();
        assert_eq!(refused.code, ErrorCode::POLICY_VIOLATION.code());
        assert_eq!(refused.message, "Unable to perform excessively large batch operation.");
    }

    #[test]
    fn a_huge_request_does_not_overflow_the_count() {
        let mut budget = RecordBudget::default();
        budget.take(usize::MAX).unwrap_err();
        budget.take(usize::MAX).unwrap_err();
        assert_eq!(budget.planned(), usize::MAX);
    }
}
