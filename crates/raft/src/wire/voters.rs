//! KIP-853's UpdateRaftVoter on the wire (a follower voter's request to
//! its leader, and the answer), and the error codes of the voter changes.

use krabka_protocol::generated::update_raft_voter_request as update;
use krabka_protocol::generated::update_raft_voter_response as update_response;
use krabka_protocol::{ErrorCode, ResponseBody, UpdateRaftVoterRequest, UpdateRaftVoterResponse, Uuid};

use super::{known_leader, leader_or_none, WireContext};
use crate::message::{Message, VoterChangeError};
use crate::voters::{Listener, VoterNode};

/// The code of a [`VoterChangeError`] on the wire.
pub fn voter_change_code(error: VoterChangeError) -> ErrorCode {
    match error {
        VoterChangeError::None => ErrorCode::NONE,
        VoterChangeError::RequestTimedOut => ErrorCode::REQUEST_TIMED_OUT,
        VoterChangeError::UnsupportedVersion => ErrorCode::UNSUPPORTED_VERSION,
        VoterChangeError::DuplicateVoter => ErrorCode::DUPLICATE_VOTER,
        VoterChangeError::VoterNotFound => ErrorCode::VOTER_NOT_FOUND,
        VoterChangeError::InvalidRequest => ErrorCode::INVALID_REQUEST,
        VoterChangeError::NotLeader => ErrorCode::NOT_LEADER_OR_FOLLOWER,
        VoterChangeError::FencedLeaderEpoch => ErrorCode::FENCED_LEADER_EPOCH,
        VoterChangeError::UnknownLeaderEpoch => ErrorCode::UNKNOWN_LEADER_EPOCH,
    }
}

/// The [`VoterChangeError`] a code is; None for one no voter change answers.
pub fn voter_change_error(code: i16) -> Option<VoterChangeError> {
    [
        VoterChangeError::None,
        VoterChangeError::RequestTimedOut,
        VoterChangeError::UnsupportedVersion,
        VoterChangeError::DuplicateVoter,
        VoterChangeError::VoterNotFound,
        VoterChangeError::InvalidRequest,
        VoterChangeError::NotLeader,
        VoterChangeError::FencedLeaderEpoch,
        VoterChangeError::UnknownLeaderEpoch,
    ]
    .into_iter()
    .find(|error| voter_change_code(*error).code() == code)
}

/// UpdateRaftVoter as Kafka's follower fills it: its key, its listeners
/// and the `kraft.version` range it supports.
pub(super) fn update_voter_request(context: &WireContext, epoch: i32, voter: &VoterNode) -> UpdateRaftVoterRequest {
    UpdateRaftVoterRequest {
        cluster_id: Some(context.cluster_id.clone()),
        current_leader_epoch: epoch,
        voter_id: voter.id,
        voter_directory_id: voter.directory_id,
        listeners: voter
            .listeners
            .iter()
            .map(|l| update::Listener {
                name: l.name.clone(),
                host: l.host.clone(),
                port: l.port,
                ..Default::default()
            })
            .collect(),
        k_raft_version_feature: update::KRaftVersionFeature {
            min_supported_version: voter.kraft_versions.0,
            max_supported_version: voter.kraft_versions.1,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// RemoveRaftVoter as a controller joining by itself sends it for the voter
/// of its id that has another directory id (a replaced disk).
pub(super) fn auto_join_removal(
    context: &WireContext,
    id: i32,
    directory_id: Uuid,
) -> krabka_protocol::RemoveRaftVoterRequest {
    krabka_protocol::RemoveRaftVoterRequest {
        cluster_id: Some(context.cluster_id.clone()),
        voter_id: id,
        voter_directory_id: directory_id,
        ..Default::default()
    }
}

/// AddRaftVoter as a controller joining by itself sends it (Kafka's
/// `controller.quorum.auto.join.enable`): its own key and listeners,
/// answered once appended.
pub(super) fn auto_join_request(context: &WireContext, voter: &VoterNode) -> krabka_protocol::AddRaftVoterRequest {
    use krabka_protocol::generated::add_raft_voter_request as add;
    krabka_protocol::AddRaftVoterRequest {
        cluster_id: Some(context.cluster_id.clone()),
        timeout_ms: 30_000,
        voter_id: voter.id,
        voter_directory_id: voter.directory_id,
        listeners: voter
            .listeners
            .iter()
            .map(|l| add::Listener { name: l.name.clone(), host: l.host.clone(), port: l.port, ..Default::default() })
            .collect(),
        ack_when_committed: false,
        ..Default::default()
    }
}

/// An UpdateRaftVoter that arrived, checked as Kafka's leader checks it
/// before its handler: a directory id, a valid version range.
pub(super) fn check_update_voter(request: &UpdateRaftVoterRequest) -> Result<(i32, Message), ErrorCode> {
    let range = &request.k_raft_version_feature;
    let valid_range = range.min_supported_version >= 0 && range.min_supported_version <= range.max_supported_version;
    if request.voter_id < 0 || request.voter_directory_id == Uuid::ZERO || !valid_range {
        return Err(ErrorCode::INVALID_REQUEST);
    }
    let voter = VoterNode {
        id: request.voter_id,
        directory_id: request.voter_directory_id,
        listeners: request
            .listeners
            .iter()
            .map(|l| Listener { name: l.name.clone(), host: l.host.clone(), port: l.port })
            .collect(),
        kraft_versions: (range.min_supported_version, range.max_supported_version),
    };
    Ok((request.voter_id, Message::UpdateVoterRequest { epoch: request.current_leader_epoch, voter }))
}

/// The answer, with the leader and its endpoint on the raft listener.
pub(super) fn update_voter_response(
    context: &WireContext,
    epoch: i32,
    error: VoterChangeError,
    leader_id: Option<i32>,
) -> UpdateRaftVoterResponse {
    let endpoint = leader_id.and_then(|id| context.voters.get(&id));
    UpdateRaftVoterResponse {
        error_code: voter_change_code(error).code(),
        current_leader: update_response::CurrentLeader {
            leader_id: leader_or_none(leader_id),
            leader_epoch: epoch,
            host: endpoint.map(|e| e.host.clone()).unwrap_or_default(),
            port: endpoint.map_or(-1, |e| i32::from(e.port)),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// An UpdateRaftVoter response, read back.
pub(super) fn accept_update_voter_response(answer: &UpdateRaftVoterResponse) -> Option<Message> {
    Some(Message::UpdateVoterResponse {
        epoch: answer.current_leader.leader_epoch,
        error: voter_change_error(answer.error_code)?,
        leader_id: known_leader(answer.current_leader.leader_id),
    })
}

/// An UpdateRaftVoter refused with `code` before the node saw it.
pub(super) fn update_voter_refused(code: ErrorCode) -> ResponseBody {
    ResponseBody::UpdateRaftVoter(Box::new(UpdateRaftVoterResponse { error_code: code.code(), ..Default::default() }))
}

/// An AddRaftVoter or RemoveRaftVoter, as the node takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoterChange {
    /// The new voter's id, directory id and listeners (its version range
    /// is learned from its ApiVersions), and whether to answer only once
    /// the change is committed (v1's `AckWhenCommitted`; v0: true).
    Add(VoterNode, bool),
    Remove {
        id: i32,
        directory_id: Uuid,
    },
}

/// An AddRaftVoter or RemoveRaftVoter that arrived, checked as Kafka's raft
/// client checks it before its handler (the cluster id, a voter with a
/// directory id); Err with the response when it is refused, None when the
/// request is neither.
pub fn accept_voter_change(
    context: &WireContext,
    request: &krabka_protocol::RequestBody,
) -> Option<Result<VoterChange, ResponseBody>> {
    use krabka_protocol::RequestBody;
    let (cluster_id, id, directory_id, is_add) = match request {
        RequestBody::AddRaftVoter(add) => (add.cluster_id.as_deref(), add.voter_id, add.voter_directory_id, true),
        RequestBody::RemoveRaftVoter(remove) => {
            (remove.cluster_id.as_deref(), remove.voter_id, remove.voter_directory_id, false)
        }
        _ => return None,
    };
    let refuse = |code| Err(voter_change_response(is_add, code, None));
    if !context.accepts_cluster(cluster_id) {
        return Some(refuse(ErrorCode::INCONSISTENT_CLUSTER_ID));
    }
    if id < 0 || directory_id == Uuid::ZERO {
        return Some(refuse(ErrorCode::INVALID_REQUEST));
    }
    Some(Ok(match request {
        RequestBody::AddRaftVoter(add) => {
            let voter = VoterNode {
                id,
                directory_id,
                listeners: add
                    .listeners
                    .iter()
                    .map(|l| Listener { name: l.name.clone(), host: l.host.clone(), port: l.port })
                    .collect(),
                kraft_versions: (0, 0),
            };
            VoterChange::Add(voter, add.ack_when_committed)
        }
        _ => VoterChange::Remove { id, directory_id },
    }))
}

/// The AddRaftVoter (`is_add`) or RemoveRaftVoter answer with `code`.
pub fn voter_change_response(is_add: bool, code: ErrorCode, message: Option<String>) -> ResponseBody {
    use krabka_protocol::{AddRaftVoterResponse, RemoveRaftVoterResponse};
    if is_add {
        ResponseBody::AddRaftVoter(Box::new(AddRaftVoterResponse {
            error_code: code.code(),
            error_message: message,
            ..Default::default()
        }))
    } else {
        ResponseBody::RemoveRaftVoter(Box::new(RemoveRaftVoterResponse {
            error_code: code.code(),
            error_message: message,
            ..Default::default()
        }))
    }
}
