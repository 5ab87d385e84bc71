//! KRaft on the wire: a [`Message`] as Kafka 4.3.1 writes its RPC (Vote,
//! BeginQuorumEpoch, EndQuorumEpoch, the `__cluster_metadata` Fetch and
//! FetchSnapshot, and their responses), and an RPC that arrived as a [`Message`], after
//! Kafka's checks of it. Sans-IO like the rest of the crate: the driver
//! owns connections, correlation ids and version negotiation, and passes
//! the version it negotiated where the bytes depend on it.
//!
//! What is checked here, before the node sees a request, is what Kafka
//! checks before its quorum state does: the cluster id (a request from
//! another cluster gets a top-level INCONSISTENT_CLUSTER_ID), the one
//! topic-partition (top-level INVALID_REQUEST), impossible offsets and
//! epochs and negative sender ids (INVALID_REQUEST in the partition), and
//! a voter key naming another node (INVALID_VOTER_KEY). The epoch checks
//! (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) are
//! the node's, which answers with a [`RaftError`].
//!
//! - `requests`: the requests a node sends;
//! - `accept`: the requests that arrive, checked;
//! - `responses`: the responses a node sends and reads back;
//! - `describe`: DescribeQuorum's answer from the leader's description;
//! - `voters`: KIP-853's UpdateRaftVoter, and the voter changes' error codes.

mod accept;
mod describe;
mod requests;
mod responses;
mod voters;

use std::collections::BTreeMap;

use krabka_protocol::{ApiKey, ErrorCode, ResponseBody, Uuid};

pub use accept::{accept_request, Accepted};
pub use describe::describe_quorum_response;
pub use requests::request;
pub use responses::{accept_response, response, Dropped};
pub use voters::{accept_voter_change, voter_change_code, voter_change_error, voter_change_response, VoterChange};

use crate::message::RaftError;

/// The metadata log's topic, its one partition and its topic id (Kafka's
/// `Uuid.METADATA_TOPIC_ID`, `AAAAAAAAAAAAAAAAAAAAAQ`).
pub const METADATA_TOPIC: &str = "__cluster_metadata";
pub const METADATA_PARTITION: i32 = 0;
pub const METADATA_TOPIC_ID: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
/// The oldest Vote version that carries PreVote (KIP-996).
pub const PRE_VOTE_MIN_VERSION: i16 = 2;

/// The answer Kafka's network client gives raft for a Vote it cannot send
/// at any version the peer speaks: a top-level UNSUPPORTED_VERSION.
pub fn unsupported_vote_response() -> ResponseBody {
    let response = krabka_protocol::VoteResponse { error_code: ErrorCode::UNSUPPORTED_VERSION.0, ..Default::default() };
    ResponseBody::Vote(Box::new(response))
}

/// The oldest Fetch version raft can use: Kafka's leader checks the topic
/// id, which Fetch carries from v13.
pub const MIN_FETCH_VERSION: i16 = 13;

/// The KRaft RPCs a node sends its peers and serves on its controller
/// listener (a peer negotiates a version of each; AddRaftVoter and
/// RemoveRaftVoter are also an admin client's).
pub const RAFT_APIS: [ApiKey; 8] = [
    ApiKey::Vote,
    ApiKey::BeginQuorumEpoch,
    ApiKey::EndQuorumEpoch,
    ApiKey::Fetch,
    ApiKey::FetchSnapshot,
    ApiKey::UpdateRaftVoter,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
];

/// Where a voter listens for raft, on the controller listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

/// Who this node is on the wire, and where the voters are.
#[derive(Clone, Debug)]
pub struct WireContext {
    pub cluster_id: String,
    pub node_id: i32,
    /// This node's metadata log directory id (zero when it has none).
    pub directory_id: Uuid,
    /// The listener raft speaks on: the first of `controller.listener.names`.
    pub listener: String,
    /// Every voter's endpoint on that listener (static voters:
    /// `controller.quorum.voters`).
    pub voters: BTreeMap<i32, Endpoint>,
}

impl WireContext {
    /// A request's cluster id is acceptable: none (an old client), or ours.
    fn accepts_cluster(&self, cluster_id: Option<&str>) -> bool {
        cluster_id.is_none_or(|id| id == self.cluster_id)
    }
}

/// The code of a [`RaftError`] on the wire.
pub fn error_code(error: RaftError) -> ErrorCode {
    match error {
        RaftError::None => ErrorCode::NONE,
        RaftError::FencedLeaderEpoch => ErrorCode::FENCED_LEADER_EPOCH,
        RaftError::UnknownLeaderEpoch => ErrorCode::UNKNOWN_LEADER_EPOCH,
        RaftError::NotLeader => ErrorCode::NOT_LEADER_OR_FOLLOWER,
        RaftError::SnapshotNotFound => ErrorCode::SNAPSHOT_NOT_FOUND,
        RaftError::PositionOutOfRange => ErrorCode::POSITION_OUT_OF_RANGE,
        RaftError::UnsupportedVersion => ErrorCode::UNSUPPORTED_VERSION,
    }
}

/// The [`RaftError`] a partition's code is, None for one raft does not act
/// on (the driver logs it and backs off, as Kafka does).
pub fn raft_error(code: i16) -> Option<RaftError> {
    match ErrorCode(code) {
        ErrorCode::NONE => Some(RaftError::None),
        ErrorCode::FENCED_LEADER_EPOCH => Some(RaftError::FencedLeaderEpoch),
        ErrorCode::UNKNOWN_LEADER_EPOCH => Some(RaftError::UnknownLeaderEpoch),
        ErrorCode::NOT_LEADER_OR_FOLLOWER => Some(RaftError::NotLeader),
        ErrorCode::SNAPSHOT_NOT_FOUND => Some(RaftError::SnapshotNotFound),
        ErrorCode::POSITION_OUT_OF_RANGE => Some(RaftError::PositionOutOfRange),
        _ => None,
    }
}

/// -1, Kafka's "no leader", for None.
fn leader_or_none(leader_id: Option<i32>) -> i32 {
    leader_id.unwrap_or(-1)
}

/// A leader id read off the wire: None for any negative one.
fn known_leader(leader_id: i32) -> Option<i32> {
    (leader_id >= 0).then_some(leader_id)
}

#[cfg(test)]
mod tests;
