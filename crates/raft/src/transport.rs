//! How voters reach each other, as the raft state machine sees it: KRaft's
//! RPCs as krabka-protocol's message types, addressed by node id. The
//! implementation (sockets, connections, framing) is the caller's; raft
//! only queues what to send and takes what arrived, and never waits on
//! either.

use krabka_protocol::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest,
    FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, VoteRequest, VoteResponse,
};

/// The RPCs voters and observers exchange over `__cluster_metadata`.
/// Fetches are boxed: they dwarf the others.
#[derive(Clone, Debug)]
pub enum RaftMessage {
    VoteRequest(VoteRequest),
    VoteResponse(VoteResponse),
    BeginQuorumEpochRequest(BeginQuorumEpochRequest),
    BeginQuorumEpochResponse(BeginQuorumEpochResponse),
    EndQuorumEpochRequest(EndQuorumEpochRequest),
    EndQuorumEpochResponse(EndQuorumEpochResponse),
    FetchRequest(Box<FetchRequest>),
    FetchResponse(Box<FetchResponse>),
    FetchSnapshotRequest(Box<FetchSnapshotRequest>),
    FetchSnapshotResponse(Box<FetchSnapshotResponse>),
}

/// A message to or from another node. The correlation id pairs a response
/// with its request, as on the wire.
#[derive(Clone, Debug)]
pub struct Envelope {
    pub node_id: i32,
    pub correlation_id: i32,
    pub message: RaftMessage,
}

pub trait Transport {
    /// Queues `envelope` for `envelope.node_id`. It never blocks: a message
    /// that cannot be delivered is dropped, and raft's timers retry.
    fn send(&mut self, envelope: Envelope);

    /// The next message that arrived (`node_id` is its sender), or None.
    fn receive(&mut self) -> Option<Envelope>;
}
