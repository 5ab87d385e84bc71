//! The partitions this broker hosts: their logs, high watermarks, leader
//! epochs and whether they are led here, kept in step with the metadata
//! image (a node that is its quorum's only voter hosts and leads every
//! partition; in a shared quorum, those placed on it). Every partition has
//! one replica, so the high watermark is the log end offset as soon as an
//! append returns.
//!
//! Each partition wakes the requests parked on it ([`purgatory`]) when it
//! changes in a way that may complete them. Leader and follower roles (and
//! acks=all waits) are to live here with replication.

mod manager;
mod partition;
pub mod purgatory;

pub use manager::{Hosting, ReplicaManager};
pub use partition::{AppendError, HostedTopic, Partition, ProducePolicy};
