//! Sparse, memory-mapped indexes beside each segment, in Kafka's layout:
//! fixed-size big-endian entries, sorted, preallocated to
//! `segment.index.bytes` while the segment is active and trimmed to the
//! entries actually written when it rolls or the log closes.
//!
//! The offset and time indexes are one type, [`Index`] (`sparse.rs`), over
//! the mapped file of `file.rs`; what differs between them is the entry
//! ([`IndexEntry`]) and the rules for adding and checking entries, in
//! `offset.rs` and `time.rs`. The `.txnindex` (`txn.rs`) is a plain file of
//! Kafka's aborted-transaction entries.

mod file;
pub mod offset;
mod sparse;
pub mod time;
pub mod txn;

pub use offset::{OffsetIndex, OffsetPosition};
pub use sparse::{Index, IndexEntry};
pub use time::{TimeIndex, TimestampOffset};
pub use txn::{AbortedTxn, TransactionIndex};
