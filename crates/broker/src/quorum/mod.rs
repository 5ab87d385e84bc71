//! The KRaft quorum's IO: what turns krabka-raft's sans-IO `RaftNode` into
//! a voter other nodes (krabka's or Apache Kafka's) talk to.
//!
//! - `driver`: one thread owns the node, its log (`__cluster_metadata-0`)
//!   and its `quorum-state` file, and feeds it requests, responses,
//!   proposals and the clock; it performs the node's actions in order (an
//!   election state is durable before anything after it is sent).
//! - `peer`: one connection per other voter, as Kafka's raft client keeps
//!   them: ApiVersions first, then one request in flight, reconnecting
//!   with a backoff; what comes back goes to the driver.
//! - `channel`: one Kafka connection to a controller listener (requests
//!   one at a time, correlation ids checked, a timeout on each), what the
//!   peers and the broker's registration talk through.
//! - `event`: what reaches the driver, from the other two and from users.
//! - `listener`: the controller listener, serving ApiVersions and raft's
//!   RPCs to the other voters.
//! - `setup`: a member's setup from the broker's config.
//!
//! The wire mapping and Kafka's checks are krabka-raft's (`wire`); nothing
//! here decides anything about the quorum.

mod channel;
mod driver;
mod event;
mod listener;
mod peer;
mod setup;

pub use channel::Channel;
pub use driver::{Committed, CommittedBatches, Quorum, QuorumSetup, QuorumStatus};
pub use listener::{serve_controller_listener, Caller, ControllerGate, ControllerHandler, ControllerListenerSecurity};

#[cfg(test)]
mod tests;
