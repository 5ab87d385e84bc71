//! The partitions this broker hosts: their logs, high watermarks and leader
//! epochs, kept in step with the metadata image. On a single node every
//! partition is led here and the ISR is this node alone, so the high
//! watermark is the log end offset as soon as an append returns.
//!
//! Each partition wakes the requests parked on it ([`purgatory`]) when it
//! changes in a way that may complete them. Leader and follower roles (and
//! acks=all waits) are to live here with replication.

mod manager;
mod partition;
pub mod purgatory;

pub use manager::ReplicaManager;
pub use partition::{HostedTopic, Partition, ProducePolicy};
