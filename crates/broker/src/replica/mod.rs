//! The partitions this broker hosts: their logs, high watermarks, leader
//! epochs and roles, kept in step with the metadata image (a node that is
//! its quorum's only voter hosts and leads every partition; in a shared
//! quorum, those placed on it, leading those the image says and following
//! the others).
//!
//! A leader tracks its followers (krabka-replication's `ReplicaSet`): the high watermark is
//! the smallest log end offset of the in-sync replicas, and the ISR
//! changes it wants go to the controller ([`isr_changes`]). A follower's
//! log is written by the replica fetcher (`crate::replica_fetcher`).
//! Each partition wakes the requests parked on it ([`purgatory`]) when it
//! changes in a way that may complete them (an append, a high watermark
//! that moved, a role that changed).

pub mod dir_assignments;
mod future_replica;
pub mod isr_changes;
mod log_dir_moves;
mod log_dirs;
mod manager;
mod partition;
pub mod purgatory;
pub mod throttles;

pub use future_replica::MoveStep;
pub use log_dir_moves::{MoveRound, Mover};
pub use log_dirs::{halt_on_sigbus, LogDirectories};
pub use manager::{Hosting, ReplicaManager};
pub use partition::{AppendError, FetchedFromLeader, HostedTopic, IsrProposal, Partition, ProducePolicy, Role};
