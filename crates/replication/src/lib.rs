//! krabka-replication: the rules of partition replication as Kafka's
//! brokers follow them, with no I/O, no clock and no locks: what a leader
//! knows of its followers and the high watermark and ISR changes that
//! follow from it ([`replica_set`]), and where a follower's log parts from
//! its leader's (KIP-320, [`divergence`]), and the replication throttles
//! of a reassignment (KIP-73, [`throttle`]), and which fetcher copies a
//! partition ([`fetchers`]). The broker keeps one
//! `ReplicaSet` per partition it leads, under the partition's lock, and
//! calls these with the time and its log's offsets.

pub mod divergence;
pub mod fetchers;
pub mod replica_set;
pub mod throttle;

pub use replica_set::{FollowerProgress, PendingIsr, ReplicaSet};
pub use throttle::{ReplicationQuota, Throttled};
