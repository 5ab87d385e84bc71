//! krabka-controller: Kafka's controller, the one writer of cluster
//! metadata. It validates what a request may change (topics, partitions,
//! topic configs, producer-id blocks; replica placement over the
//! registered brokers, one replica each for now), builds the metadata
//! records that change it, within
//! Kafka's 10,000 records per user operation, and commits them through
//! raft (`krabka_raft::SingleVoter` today) to the image it keeps.
//!
//! It is sans-IO: it must never open a socket or a file, use tokio, spawn
//! a thread or task, or read the clock (`now_ms` is passed in; tests pass a
//! fixed one). The log it commits to is a `krabka_log::ReplicatedLog` its
//! caller opened; when raft says a snapshot is due it encodes the image
//! and hands raft the bytes to store; publishing images is the broker's.
//! It must never commit a batch over `MAX_RECORDS_PER_USER_OP` records,
//! never commit a record that was not validated against the image it
//! applies to, and never depend on the broker.
//!
//! Each request's decision is a plan: a pure function of the image and
//! the request giving the records to commit and the request's result
//! (`topics::plan_create_topics`, `delete_topics::plan_delete_topics`, ...).
//! Whoever commits runs it against the image it commits on: `Controller`
//! over the single voter, or the broker's quorum writer over a multi-voter
//! quorum.
//!
//! Files import one way, from the top down: `controller` (`Controller`:
//! commit, replay) -> `topics` -> `partitions`, `delete_topics`,
//! `configs`, `producer_ids`, `brokers`, `controllers`, `directories` -> `placement`, `features`,
//! `budget` -> `error` -> `limits`.

pub mod acls;
pub mod alter_partition;
pub mod brokers;
pub mod budget;
pub mod client_quotas;
pub mod configs;
pub mod controller;
pub mod controllers;
pub mod delete_topics;
pub mod directories;
pub mod elect_leaders;
pub mod elections;
pub mod error;
pub mod features;
pub mod limits;
pub mod partition_change;
pub mod partitions;
pub mod placement;
pub mod producer_ids;
pub mod reassignment;
pub mod scram;
#[cfg(test)]
mod test_images;
pub mod topics;
pub mod update_features;

pub use budget::RecordBudget;
pub use controller::{Commit, Controller};
pub use error::{ApiError, MetadataError};
pub use limits::MAX_RECORDS_PER_USER_OP;
pub use placement::Placement;
pub use topics::{CreatedTopics, NewTopic, TopicDefaults};
