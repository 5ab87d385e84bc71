//! krabka-raft: KRaft, the protocol that commits `__cluster_metadata`, as a
//! state machine: events in (a proposal, a message, a tick), actions out
//! (what was committed, messages to send). The log is a
//! [`krabka_log::ReplicatedLog`]; the network (connections, correlation
//! ids, versions) and the clock are the caller's. It owns the snapshot policy: when
//! enough was committed since the last snapshot it says one is due, and it
//! stores the bytes the caller encodes through the log, then drops the log
//! prefix and the older snapshots they cover.
//!
//! It must never open a socket, spawn a task or read the clock, never know
//! what the records it commits or the snapshots it stores mean (that is
//! krabka-metadata's), never touch a file but through the log, never
//! report an offset committed that is not durable on a majority of voters,
//! and never be on the produce hot path. A node never votes twice in an
//! epoch nor goes back to an older one: the election state it must
//! remember is an action the caller persists before it sends what follows.
//!
//! Two quorums: [`SingleVoter`], the quorum of one a single combined node
//! is (what the broker commits through today), and [`RaftNode`], one node
//! of a multi-voter quorum (KIP-595 with KIP-996's pre-vote): elections,
//! pull-based replication with diverging-epoch truncation, the high
//! watermark and the leader's quorum check, driven by `handle(now, from,
//! message)`, `tick(now)` and `propose`, each returning [`Action`]s. Its
//! messages are an internal enum ([`Message`]) mirroring Kafka's RPCs;
//! [`wire`] maps them onto Kafka's own, as Kafka 4.3.1 fills them, with
//! its checks of what arrives. A new leader opens its epoch with Kafka's
//! LeaderChange control record. Each node snapshots on its own and a
//! follower the leader's log no longer serves fetches the leader's
//! snapshot (KIP-630, `snapshot`). Voters change one at a time (KIP-853,
//! `membership`), and a static quorum becomes dynamic (`kraft_upgrade`). `tests/simulation.rs` checks the node, seeded and
//! deterministic.

mod batch;
pub mod describe;
pub mod election;
pub mod kraft_upgrade;
mod membership;
pub mod message;
pub mod node;
pub mod replication;
mod served;
pub mod single_voter;
pub mod snapshot;
pub mod voters;
pub mod wire;

#[cfg(test)]
mod test_support;

pub use describe::{QuorumDescription, ReplicaDescription};
pub use kraft_upgrade::KraftUpgradeError;
pub use message::{Action, ElectionState, FetchBounds, FetchResponse, Message, RaftError, VoterChangeError};
pub use node::{Membership, RaftConfig, RaftNode, RoleName};
pub use single_voter::{Committed, SingleVoter, Snapshot};
pub use snapshot::SnapshotPolicy;
pub use voters::{Listener, ReplicaKey, VoterNode, VoterSet, KRAFT_VERSION_MAX};
