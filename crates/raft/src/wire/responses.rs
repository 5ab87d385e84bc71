//! The responses a node sends, filled as Kafka's raft fills them, and the
//! responses that come back, read in the light of the request they answer.

use bytes::Bytes;
use krabka_log::SnapshotId;
use krabka_protocol::generated::{begin_quorum_epoch_response as begin, end_quorum_epoch_response as end};
use krabka_protocol::generated::{
    fetch_response as fetch, fetch_snapshot_response as fetch_snapshot, vote_response as vote,
};
use krabka_protocol::records::whole_batches;
use krabka_protocol::{
    BeginQuorumEpochResponse, EndQuorumEpochResponse, ErrorCode, FetchResponse, FetchSnapshotResponse, RequestBody,
    ResponseBody, VoteResponse,
};

use super::{
    error_code, known_leader, leader_or_none, raft_error, WireContext, METADATA_PARTITION, METADATA_TOPIC,
    METADATA_TOPIC_ID,
};
use crate::message::{self, ElectionState, Message, RaftError};

/// Why a response that came back gives the node nothing to act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// A top-level error, or one in the partition raft does not act on
    /// (the driver backs off before it sends to that node again).
    Error(ErrorCode),
    /// Not about the metadata partition, or not an answer to the request.
    Unexpected,
    /// A snapshot id with a negative end offset or epoch (Kafka's follower
    /// logs it and drops the response).
    InvalidSnapshotId { end_offset: i64, epoch: i32 },
}

/// A Vote, BeginQuorumEpoch or EndQuorumEpoch response of one partition:
/// the three share Kafka's layout but not a type.
macro_rules! epoch_response {
    ($response:ident, $module:ident, $code:expr, $partition:expr, $endpoint:expr) => {
        $response {
            error_code: $code,
            topics: vec![$module::TopicData {
                topic_name: METADATA_TOPIC.into(),
                partitions: $partition.into_iter().collect(),
                ..Default::default()
            }],
            node_endpoints: $endpoint
                .map(|(node_id, host, port)| $module::NodeEndpoint { node_id, host, port, ..Default::default() })
                .into_iter()
                .collect(),
            ..Default::default()
        }
    };
}

/// The partition of an epoch response.
macro_rules! epoch_partition {
    ($module:ident, $error:expr, $leader_id:expr, $epoch:expr) => {
        $module::PartitionData {
            partition_index: METADATA_PARTITION,
            error_code: $error.code(),
            leader_id: leader_or_none($leader_id),
            leader_epoch: $epoch,
            ..Default::default()
        }
    };
}

/// `message` as the response Kafka sends at `version`; None when it is a
/// request.
pub fn response(context: &WireContext, message: &Message, version: i16) -> Option<ResponseBody> {
    Some(match message {
        &Message::VoteResponse { epoch, error, granted, leader_id, .. } => {
            let partition = vote::PartitionData {
                vote_granted: granted,
                ..epoch_partition!(vote, error_code(error), leader_id, epoch)
            };
            let endpoint = leader_endpoint(context, leader_id, version >= 1);
            ResponseBody::Vote(Box::new(epoch_response!(VoteResponse, vote, 0, Some(partition), endpoint)))
        }
        &Message::BeginQuorumEpochResponse { epoch, error, leader_id } => {
            let partition = epoch_partition!(begin, error_code(error), leader_id, epoch);
            let endpoint = leader_endpoint(context, leader_id, version >= 1);
            let body = epoch_response!(BeginQuorumEpochResponse, begin, 0, Some(partition), endpoint);
            ResponseBody::BeginQuorumEpoch(Box::new(body))
        }
        &Message::EndQuorumEpochResponse { epoch, error, leader_id } => {
            let partition = epoch_partition!(end, error_code(error), leader_id, epoch);
            let endpoint = leader_endpoint(context, leader_id, version >= 1);
            let body = epoch_response!(EndQuorumEpochResponse, end, 0, Some(partition), endpoint);
            ResponseBody::EndQuorumEpoch(Box::new(body))
        }
        Message::FetchResponse(answer) => ResponseBody::Fetch(Box::new(fetch_response(context, answer, version))),
        Message::FetchSnapshotResponse(answer) => {
            ResponseBody::FetchSnapshot(Box::new(fetch_snapshot_response(context, answer, version)))
        }
        &Message::UpdateVoterResponse { epoch, error, leader_id } => ResponseBody::UpdateRaftVoter(Box::new(
            super::voters::update_voter_response(context, epoch, error, leader_id),
        )),
        // The leader answers AddRaftVoter from its driver, not as a message.
        Message::AddVoterResponse { .. } | Message::RemoveVoterResponse { .. } => return None,
        Message::VoteRequest { .. }
        | Message::AddVoterRequest { .. }
        | Message::RemoveVoterRequest { .. }
        | Message::UpdateVoterRequest { .. }
        | Message::BeginQuorumEpoch { .. }
        | Message::EndQuorumEpoch { .. }
        | Message::FetchRequest { .. }
        | Message::FetchSnapshotRequest { .. } => return None,
    })
}

/// FetchSnapshot's answer, with the leader's endpoint from v1.
fn fetch_snapshot_response(
    context: &WireContext,
    answer: &message::FetchSnapshotResponse,
    version: i16,
) -> FetchSnapshotResponse {
    let partition = fetch_snapshot::PartitionSnapshot {
        index: METADATA_PARTITION,
        error_code: error_code(answer.error).code(),
        snapshot_id: fetch_snapshot::SnapshotId {
            end_offset: answer.snapshot.end_offset,
            epoch: answer.snapshot.epoch,
            ..Default::default()
        },
        current_leader: fetch_snapshot::LeaderIdAndEpoch {
            leader_id: leader_or_none(answer.leader_id),
            leader_epoch: answer.epoch,
            ..Default::default()
        },
        size: answer.size,
        position: answer.position,
        unaligned_records: answer.bytes.clone(),
        ..Default::default()
    };
    FetchSnapshotResponse {
        topics: vec![fetch_snapshot::TopicSnapshot {
            name: METADATA_TOPIC.into(),
            partitions: vec![partition],
            ..Default::default()
        }],
        node_endpoints: leader_endpoint(context, answer.leader_id, version >= 1)
            .map(|(node_id, host, port)| fetch_snapshot::NodeEndpoint { node_id, host, port, ..Default::default() })
            .into_iter()
            .collect(),
        ..Default::default()
    }
}

/// The leader's endpoint on the raft listener, for a response's
/// NodeEndpoints (only from the versions that carry it).
fn leader_endpoint(context: &WireContext, leader_id: Option<i32>, carried: bool) -> Option<(i32, String, u16)> {
    let leader_id = leader_id.filter(|_| carried)?;
    let endpoint = context.voters.get(&leader_id)?;
    Some((leader_id, endpoint.host.clone(), endpoint.port))
}

fn fetch_response(context: &WireContext, answer: &message::FetchResponse, version: i16) -> FetchResponse {
    let served = answer.error == RaftError::None;
    let (diverging_epoch, diverging_end) = answer.diverging_epoch.unwrap_or((-1, -1));
    let mut partition = fetch::PartitionData {
        partition_index: METADATA_PARTITION,
        error_code: error_code(answer.error).code(),
        high_watermark: if served { answer.high_watermark } else { -1 },
        log_start_offset: answer.log_start_offset,
        diverging_epoch: fetch::EpochEndOffset {
            epoch: diverging_epoch,
            end_offset: diverging_end,
            ..Default::default()
        },
        current_leader: fetch::LeaderIdAndEpoch {
            leader_id: leader_or_none(answer.leader_id),
            leader_epoch: answer.epoch,
            ..Default::default()
        },
        records: Some(answer.records.clone()),
        ..Default::default()
    };
    if let Some(id) = answer.snapshot {
        partition.snapshot_id = fetch::SnapshotId { end_offset: id.end_offset, epoch: id.epoch, ..Default::default() };
    }
    fetch_body(context, partition, answer.leader_id, version)
}

/// A Fetch response of the one partition, with the leader's endpoint
/// from v17 (as Kafka's raft fills it).
fn fetch_body(
    context: &WireContext,
    partition: fetch::PartitionData,
    leader_id: Option<i32>,
    version: i16,
) -> FetchResponse {
    let node_endpoints = leader_endpoint(context, leader_id, version >= 17)
        .map(|(node_id, host, port)| fetch::NodeEndpoint {
            node_id,
            host,
            port: i32::from(port),
            rack: None,
            ..Default::default()
        })
        .into_iter()
        .collect();
    FetchResponse {
        responses: vec![fetch::FetchableTopicResponse {
            topic: METADATA_TOPIC.into(),
            topic_id: METADATA_TOPIC_ID,
            partitions: vec![partition],
            ..Default::default()
        }],
        node_endpoints,
        ..Default::default()
    }
}

/// The answer to `request` with only a top-level error (and no topics).
pub(super) fn empty_response(request: &RequestBody, code: ErrorCode) -> ResponseBody {
    let code = code.code();
    match request {
        RequestBody::Vote(_) => ResponseBody::Vote(Box::new(VoteResponse { error_code: code, ..Default::default() })),
        RequestBody::BeginQuorumEpoch(_) => ResponseBody::BeginQuorumEpoch(Box::new(BeginQuorumEpochResponse {
            error_code: code,
            ..Default::default()
        })),
        RequestBody::EndQuorumEpoch(_) => {
            ResponseBody::EndQuorumEpoch(Box::new(EndQuorumEpochResponse { error_code: code, ..Default::default() }))
        }
        RequestBody::FetchSnapshot(_) => {
            ResponseBody::FetchSnapshot(Box::new(FetchSnapshotResponse { error_code: code, ..Default::default() }))
        }
        _ => ResponseBody::Fetch(Box::new(FetchResponse { error_code: code, ..Default::default() })),
    }
}

/// A FetchSnapshot answered with `code` in its partition (Kafka's
/// UNKNOWN_TOPIC_OR_PARTITION for another partition), with the leader and
/// epoch this node knows.
pub(super) fn fetch_snapshot_error_response(
    state: &ElectionState,
    (topic, partition): (String, i32),
    code: ErrorCode,
) -> ResponseBody {
    let partition = fetch_snapshot::PartitionSnapshot {
        index: partition,
        error_code: code.code(),
        current_leader: fetch_snapshot::LeaderIdAndEpoch {
            leader_id: leader_or_none(state.leader_id),
            leader_epoch: state.epoch,
            ..Default::default()
        },
        ..Default::default()
    };
    ResponseBody::FetchSnapshot(Box::new(FetchSnapshotResponse {
        topics: vec![fetch_snapshot::TopicSnapshot { name: topic, partitions: vec![partition], ..Default::default() }],
        ..Default::default()
    }))
}

/// The answer to a Vote, BeginQuorumEpoch or EndQuorumEpoch `request` with
/// `code` in its partition, and this node's epoch and leader.
pub(super) fn partition_error_response(request: &RequestBody, state: &ElectionState, code: ErrorCode) -> ResponseBody {
    let (leader, epoch) = (state.leader_id, state.epoch);
    let none: Option<(i32, String, u16)> = None;
    match request {
        RequestBody::Vote(_) => {
            let partition = epoch_partition!(vote, code, leader, epoch);
            ResponseBody::Vote(Box::new(epoch_response!(VoteResponse, vote, 0, Some(partition), none)))
        }
        RequestBody::BeginQuorumEpoch(_) => {
            let partition = epoch_partition!(begin, code, leader, epoch);
            let body = epoch_response!(BeginQuorumEpochResponse, begin, 0, Some(partition), none);
            ResponseBody::BeginQuorumEpoch(Box::new(body))
        }
        _ => {
            let partition = epoch_partition!(end, code, leader, epoch);
            ResponseBody::EndQuorumEpoch(Box::new(epoch_response!(
                EndQuorumEpochResponse,
                end,
                0,
                Some(partition),
                none
            )))
        }
    }
}

/// A Fetch answered with `code` in its partition: no high watermark, and
/// the leader this node knows.
pub(super) fn fetch_error_response(
    context: &WireContext,
    state: &ElectionState,
    code: ErrorCode,
    version: i16,
) -> ResponseBody {
    let partition = fetch::PartitionData {
        partition_index: METADATA_PARTITION,
        error_code: code.code(),
        high_watermark: -1,
        current_leader: fetch::LeaderIdAndEpoch {
            leader_id: leader_or_none(state.leader_id),
            leader_epoch: state.epoch,
            ..Default::default()
        },
        records: Some(Bytes::new()),
        ..Default::default()
    };
    ResponseBody::Fetch(Box::new(fetch_body(context, partition, state.leader_id, version)))
}

/// The one metadata partition of a response's topics, by topic name.
macro_rules! answered_partition {
    ($response:expr) => {
        match $response.topics.as_slice() {
            [topic] if topic.topic_name == METADATA_TOPIC => match topic.partitions.as_slice() {
                [partition] if partition.partition_index == METADATA_PARTITION => Some(partition),
                _ => None,
            },
            _ => None,
        }
    };
}

/// The error of an answered partition raft acts on, or why it is dropped.
fn partition_error(code: i16) -> Result<RaftError, Dropped> {
    raft_error(code).ok_or(Dropped::Error(ErrorCode(code)))
}

/// A response from a node to `sent` (the request it answers) as the node's
/// message, or why it gives the node nothing.
pub fn accept_response(sent: &Message, response: ResponseBody) -> Result<Message, Dropped> {
    match (sent, response) {
        (&Message::VoteRequest { epoch, pre_vote, .. }, ResponseBody::Vote(answer)) => {
            // Kafka's Prospective acts on this top-level error (it moves to
            // Candidate); it is the answer to this node's round.
            if ErrorCode(answer.error_code) == ErrorCode::UNSUPPORTED_VERSION {
                let error = RaftError::UnsupportedVersion;
                return Ok(Message::VoteResponse { epoch, error, granted: false, pre_vote, leader_id: None });
            }
            top_level(answer.error_code)?;
            let partition = answered_partition!(answer).ok_or(Dropped::Unexpected)?;
            Ok(Message::VoteResponse {
                epoch: partition.leader_epoch,
                error: partition_error(partition.error_code)?,
                granted: partition.vote_granted,
                pre_vote,
                leader_id: known_leader(partition.leader_id),
            })
        }
        (Message::BeginQuorumEpoch { .. }, ResponseBody::BeginQuorumEpoch(answer)) => {
            top_level(answer.error_code)?;
            let partition = answered_partition!(answer).ok_or(Dropped::Unexpected)?;
            let (epoch, leader_id) = (partition.leader_epoch, known_leader(partition.leader_id));
            Ok(Message::BeginQuorumEpochResponse { epoch, error: partition_error(partition.error_code)?, leader_id })
        }
        (Message::EndQuorumEpoch { .. }, ResponseBody::EndQuorumEpoch(answer)) => {
            top_level(answer.error_code)?;
            let partition = answered_partition!(answer).ok_or(Dropped::Unexpected)?;
            let (epoch, leader_id) = (partition.leader_epoch, known_leader(partition.leader_id));
            Ok(Message::EndQuorumEpochResponse { epoch, error: partition_error(partition.error_code)?, leader_id })
        }
        (&Message::FetchRequest { fetch_offset, last_fetched_epoch, .. }, ResponseBody::Fetch(answer)) => {
            accept_fetch(*answer, fetch_offset, last_fetched_epoch)
        }
        (Message::FetchSnapshotRequest { .. }, ResponseBody::FetchSnapshot(answer)) => accept_fetch_snapshot(*answer),
        (Message::AddVoterRequest { .. }, ResponseBody::AddRaftVoter(answer)) => {
            let error = super::voters::voter_change_error(answer.error_code);
            error.map(|error| Message::AddVoterResponse { error }).ok_or(Dropped::Error(ErrorCode(answer.error_code)))
        }
        (Message::RemoveVoterRequest { .. }, ResponseBody::RemoveRaftVoter(answer)) => {
            let error = super::voters::voter_change_error(answer.error_code);
            error
                .map(|error| Message::RemoveVoterResponse { error })
                .ok_or(Dropped::Error(ErrorCode(answer.error_code)))
        }
        (Message::UpdateVoterRequest { .. }, ResponseBody::UpdateRaftVoter(answer)) => {
            super::voters::accept_update_voter_response(&answer).ok_or(Dropped::Error(ErrorCode(answer.error_code)))
        }
        _ => Err(Dropped::Unexpected),
    }
}

fn accept_fetch_snapshot(answer: FetchSnapshotResponse) -> Result<Message, Dropped> {
    top_level(answer.error_code)?;
    let partition = match answer.topics.as_slice() {
        [topic] if topic.name == METADATA_TOPIC => match topic.partitions.as_slice() {
            [partition] if partition.index == METADATA_PARTITION => partition.clone(),
            _ => return Err(Dropped::Unexpected),
        },
        _ => return Err(Dropped::Unexpected),
    };
    Ok(Message::FetchSnapshotResponse(message::FetchSnapshotResponse {
        epoch: partition.current_leader.leader_epoch,
        leader_id: known_leader(partition.current_leader.leader_id),
        error: partition_error(partition.error_code)?,
        snapshot: SnapshotId { end_offset: partition.snapshot_id.end_offset, epoch: partition.snapshot_id.epoch },
        size: partition.size,
        position: partition.position,
        bytes: partition.unaligned_records,
    }))
}

fn top_level(code: i16) -> Result<(), Dropped> {
    match ErrorCode(code) {
        ErrorCode::NONE => Ok(()),
        other => Err(Dropped::Error(other)),
    }
}

fn accept_fetch(answer: FetchResponse, fetch_offset: i64, last_fetched_epoch: i32) -> Result<Message, Dropped> {
    top_level(answer.error_code)?;
    let Some(partition) = (match answer.responses.as_slice() {
        [topic] if topic.topic_id == METADATA_TOPIC_ID || topic.topic == METADATA_TOPIC => {
            match topic.partitions.as_slice() {
                [partition] if partition.partition_index == METADATA_PARTITION => Some(partition.clone()),
                _ => None,
            }
        }
        _ => None,
    }) else {
        return Err(Dropped::Unexpected);
    };
    let error = partition_error(partition.error_code)?;
    let snapshot = &partition.snapshot_id;
    let (end_offset, epoch) = (snapshot.end_offset, snapshot.epoch);
    let snapshot = match (end_offset >= 0, epoch >= 0) {
        _ if error != RaftError::None => None,
        (true, true) => Some(SnapshotId { end_offset, epoch }),
        (false, false) => None,
        _ => return Err(Dropped::InvalidSnapshotId { end_offset, epoch }),
    };
    let diverging = &partition.diverging_epoch;
    Ok(Message::FetchResponse(message::FetchResponse {
        epoch: partition.current_leader.leader_epoch,
        leader_id: known_leader(partition.current_leader.leader_id),
        error,
        fetch_offset,
        last_fetched_epoch,
        high_watermark: partition.high_watermark,
        log_start_offset: partition.log_start_offset,
        records: whole_batches(partition.records.unwrap_or_default()),
        diverging_epoch: (diverging.epoch >= 0).then_some((diverging.epoch, diverging.end_offset)),
        snapshot,
    }))
}
