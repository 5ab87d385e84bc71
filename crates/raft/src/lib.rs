//! krabka-raft: KRaft, the protocol that commits `__cluster_metadata`, as a
//! state machine: events in (a proposal, a message, a tick), actions out
//! (what was committed, messages to send). The log is a
//! [`krabka_log::ReplicatedLog`] and the network a [`Transport`]; the
//! caller owns both, and the clock. It owns the snapshot policy: when
//! enough was committed since the last snapshot it says one is due, and it
//! stores the bytes the caller encodes through the log, then drops the log
//! prefix and the older snapshots they cover.
//!
//! It must never open a socket, spawn a task or read the clock, never know
//! what the records it commits or the snapshots it stores mean (that is
//! krabka-metadata's), never touch a file but through the log, never
//! report an offset committed that is not durable on a majority of voters,
//! and never be on the produce hot path. Today it has the one quorum a
//! single combined node needs, [`SingleVoter`]; elections, replication to
//! followers and snapshot transfer come with the multi-node quorum.

pub mod election;
pub mod message;
pub mod node;
pub mod replication;
pub mod single_voter;
pub mod transport;

pub use message::{Action, ElectionState, FetchError, FetchResponse, Message};
pub use node::{LEADER_CHANGE, RaftConfig, RaftNode, RoleName};
pub use single_voter::{Committed, SingleVoter, Snapshot};
pub use transport::{Envelope, RaftMessage, Transport};
