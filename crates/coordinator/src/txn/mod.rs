//! The transaction coordinator: transactional ids, their producers'
//! epochs and their transactions' states, stored in `__transaction_state`
//! in Kafka's record formats, and answered as Kafka 4.3.1's coordinator
//! answers them (transaction versions 0-2).
//!
//! Ids are spread over the topic's partitions as groups are (Java's
//! string hash, Kafka's `Utils.abs`); each partition is a shard of the
//! runtime. The host writes the markers a prepared transaction hands back
//! to its partitions' leaders and reports them written, and runs the
//! timeout and expiry tasks.
//!
//! Modules point one way: `state` < `records` < `metadata` <
//! `coordinator` < `transactions`, `housekeeping`.

pub mod coordinator;
pub mod housekeeping;
pub mod metadata;
pub mod records;
pub mod state;
pub mod transactions;

pub use coordinator::{Answer, Markers, TransactionCoordinator, TxnConfig, TxnHost, TRANSACTION_STATE_TOPIC};
pub use housekeeping::ListFilter;
pub use metadata::{TopicPartition, TransactionMetadata};
pub use state::TransactionState;
pub use transactions::EndTxn;

#[cfg(test)]
mod tests;
