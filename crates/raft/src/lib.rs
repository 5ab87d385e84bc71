//! krabka-raft: KRaft, the protocol that commits `__cluster_metadata`, as a
//! state machine: events in (a proposal, a message, a tick), actions out
//! (what was committed, messages to send). The log is a
//! [`krabka_log::ReplicatedLog`] and the network a [`Transport`]; the
//! caller owns both, and the clock.
//!
//! It must never open a socket, spawn a task or read the clock, never know
//! what the records it commits mean (that is krabka-metadata's), never
//! report an offset committed that is not durable on a majority of voters,
//! and never be on the produce hot path. Today it has the one quorum a
//! single combined node needs, [`SingleVoter`]; elections, replication to
//! followers and snapshot transfer come with the multi-node quorum.

pub mod single_voter;
pub mod transport;

pub use single_voter::{Committed, SingleVoter};
pub use transport::{Envelope, RaftMessage, Transport};
