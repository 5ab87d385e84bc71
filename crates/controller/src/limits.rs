//! Kafka's controller limits on one user operation.

/// The most metadata records one user operation may write, as Kafka's
/// controller (`MAX_RECORDS_PER_USER_OP`): one commit is one batch, applied
/// atomically, so an unbounded one would be an unbounded allocation.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;
