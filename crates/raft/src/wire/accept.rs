//! The requests that arrive, checked as Kafka checks them before its quorum
//! state sees them: a request that fails is answered here, with Kafka's
//! error in Kafka's place, and never reaches the node.

use krabka_log::SnapshotId;
use krabka_protocol::{
    BeginQuorumEpochRequest, EndQuorumEpochRequest, ErrorCode, FetchRequest, FetchSnapshotRequest, RequestBody, Uuid,
    VoteRequest,
};

use super::responses::{empty_response, fetch_error_response, fetch_snapshot_error_response, partition_error_response};
use super::{WireContext, METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID};
use crate::message::{ElectionState, FetchBounds, Message};

/// The one partition of a request's topics when it is the metadata
/// partition (its topic's `$field` is `$value`), else None.
macro_rules! metadata_partition {
    ($topics:expr, $field:ident == $value:expr, $index:ident) => {
        match $topics.as_slice() {
            [topic] if topic.$field == $value => match topic.partitions.as_slice() {
                [partition] if partition.$index == METADATA_PARTITION => Some(partition),
                _ => None,
            },
            _ => None,
        }
    };
}

/// What became of a request that arrived.
#[derive(Debug)]
pub enum Accepted {
    /// For the node: the sender (as the request names it) and the message.
    Message { from: i32, message: Message },
    /// Refused: the response to send back.
    Refused(krabka_protocol::ResponseBody),
    /// Not one of raft's requests.
    NotRaft(RequestBody),
}

/// Checks `request` (which arrived at `version`) against this node's
/// identity; `state` fills the leader and epoch of a refusal.
pub fn accept_request(context: &WireContext, state: &ElectionState, request: RequestBody, version: i16) -> Accepted {
    let checked = match &request {
        RequestBody::Vote(vote) => check_vote(context, vote),
        RequestBody::BeginQuorumEpoch(begin) => check_begin(context, begin),
        RequestBody::EndQuorumEpoch(end) => check_end(context, end),
        RequestBody::Fetch(fetch) => check_fetch(context, fetch),
        RequestBody::FetchSnapshot(fetch) => check_fetch_snapshot(context, fetch),
        RequestBody::UpdateRaftVoter(update) => {
            if !context.accepts_cluster(update.cluster_id.as_deref()) {
                return Accepted::Refused(super::voters::update_voter_refused(ErrorCode::INCONSISTENT_CLUSTER_ID));
            }
            return match super::voters::check_update_voter(update) {
                Ok((from, message)) => Accepted::Message { from, message },
                Err(code) => Accepted::Refused(super::voters::update_voter_refused(code)),
            };
        }
        _ => return Accepted::NotRaft(request),
    };
    match checked {
        Ok((from, message)) => Accepted::Message { from, message },
        Err(Refusal::TopLevel(code)) => Accepted::Refused(empty_response(&request, code)),
        Err(Refusal::Partition(code)) => match &request {
            RequestBody::Fetch(_) => Accepted::Refused(fetch_error_response(context, state, code, version)),
            RequestBody::FetchSnapshot(fetch) => {
                let topic = &fetch.topics[0];
                let asked = (topic.name.clone(), topic.partitions[0].partition);
                Accepted::Refused(fetch_snapshot_error_response(state, asked, code))
            }
            _ => Accepted::Refused(partition_error_response(&request, state, code)),
        },
    }
}

/// Where a refusal's error goes: the response's top level, or its one
/// partition.
enum Refusal {
    TopLevel(ErrorCode),
    Partition(ErrorCode),
}

type Checked = Result<(i32, Message), Refusal>;

/// The request's cluster and its one topic-partition (by name, or for a
/// fetch by topic id), as Kafka requires them.
fn check_cluster_and_partition(context: &WireContext, cluster_id: Option<&str>, one: bool) -> Result<(), Refusal> {
    if !context.accepts_cluster(cluster_id) {
        return Err(Refusal::TopLevel(ErrorCode::INCONSISTENT_CLUSTER_ID));
    }
    if !one {
        return Err(Refusal::TopLevel(ErrorCode::INVALID_REQUEST));
    }
    Ok(())
}

/// A voter key names this node: its id (unless the sender left it -1, as
/// v0 does) and, when the sender knows it, its directory.
fn check_voter_key(context: &WireContext, voter_id: i32, voter_directory_id: Uuid) -> Result<(), Refusal> {
    let id_matches = voter_id < 0 || voter_id == context.node_id;
    let directory_matches = voter_directory_id == Uuid::ZERO || voter_directory_id == context.directory_id;
    if voter_id >= 0 && !(id_matches && directory_matches) {
        return Err(Refusal::Partition(ErrorCode::INVALID_VOTER_KEY));
    }
    Ok(())
}

fn check_vote(context: &WireContext, request: &VoteRequest) -> Checked {
    let partition = metadata_partition!(request.topics, topic_name == METADATA_TOPIC, partition_index);
    check_cluster_and_partition(context, request.cluster_id.as_deref(), partition.is_some())?;
    let partition = partition.expect("checked above");
    // A candidate's last epoch is before the epoch it runs in; a
    // prospective's is at most its current one.
    let impossible_epoch = if partition.pre_vote {
        partition.last_offset_epoch > partition.replica_epoch
    } else {
        partition.last_offset_epoch >= partition.replica_epoch
    };
    if partition.last_offset < 0 || partition.last_offset_epoch < 0 || impossible_epoch || partition.replica_id < 0 {
        return Err(Refusal::Partition(ErrorCode::INVALID_REQUEST));
    }
    check_voter_key(context, request.voter_id, partition.voter_directory_id)?;
    let message = Message::VoteRequest {
        epoch: partition.replica_epoch,
        last_epoch: partition.last_offset_epoch,
        last_offset: partition.last_offset,
        pre_vote: partition.pre_vote,
    };
    Ok((partition.replica_id, message))
}

fn check_begin(context: &WireContext, request: &BeginQuorumEpochRequest) -> Checked {
    let partition = metadata_partition!(request.topics, topic_name == METADATA_TOPIC, partition_index);
    check_cluster_and_partition(context, request.cluster_id.as_deref(), partition.is_some())?;
    let partition = partition.expect("checked above");
    if partition.leader_id < 0 || partition.leader_epoch < 0 {
        return Err(Refusal::Partition(ErrorCode::INVALID_REQUEST));
    }
    check_voter_key(context, request.voter_id, partition.voter_directory_id)?;
    Ok((partition.leader_id, Message::BeginQuorumEpoch { epoch: partition.leader_epoch }))
}

fn check_end(context: &WireContext, request: &EndQuorumEpochRequest) -> Checked {
    let partition = metadata_partition!(request.topics, topic_name == METADATA_TOPIC, partition_index);
    check_cluster_and_partition(context, request.cluster_id.as_deref(), partition.is_some())?;
    let partition = partition.expect("checked above");
    if partition.leader_id < 0 || partition.leader_epoch < 0 {
        return Err(Refusal::Partition(ErrorCode::INVALID_REQUEST));
    }
    // v1 names candidates, v0 successors; the same voters, in the same order.
    let preferred_successors = if partition.preferred_candidates.is_empty() {
        partition.preferred_successors.clone()
    } else {
        partition.preferred_candidates.iter().map(|c| c.candidate_id).collect()
    };
    Ok((partition.leader_id, Message::EndQuorumEpoch { epoch: partition.leader_epoch, preferred_successors }))
}

fn check_fetch(context: &WireContext, request: &FetchRequest) -> Checked {
    let partition = metadata_partition!(request.topics, topic_id == METADATA_TOPIC_ID, partition);
    check_cluster_and_partition(context, request.cluster_id.as_deref(), partition.is_some())?;
    let partition = partition.expect("checked above");
    if request.max_wait_ms < 0
        || partition.fetch_offset < 0
        || partition.last_fetched_epoch < 0
        || partition.last_fetched_epoch > partition.current_leader_epoch
    {
        return Err(Refusal::Partition(ErrorCode::INVALID_REQUEST));
    }
    // v15 moved the sender's id into ReplicaState; a negative id is an
    // observer that has none.
    let from =
        if request.replica_state.replica_id >= 0 { request.replica_state.replica_id } else { request.replica_id };
    let message = Message::FetchRequest {
        epoch: partition.current_leader_epoch,
        fetch_offset: partition.fetch_offset,
        last_fetched_epoch: partition.last_fetched_epoch,
        // Zero before v17, which does not carry it.
        directory_id: partition.replica_directory_id,
        // Kafka's leader reads up to the request's MaxBytes (PartitionMaxBytes
        // is not looked at); HighWatermark is Long.MAX_VALUE before v18.
        bounds: FetchBounds {
            max_wait_ms: request.max_wait_ms,
            max_bytes: request.max_bytes,
            high_watermark: partition.high_watermark,
        },
    };
    Ok((from, message))
}

/// Kafka's FetchSnapshot checks: one topic with one partition (else a
/// top-level INVALID_REQUEST), and that one the metadata partition (else
/// UNKNOWN_TOPIC_OR_PARTITION in it). The position and snapshot are the
/// leader's to check (POSITION_OUT_OF_RANGE, SNAPSHOT_NOT_FOUND).
fn check_fetch_snapshot(context: &WireContext, request: &FetchSnapshotRequest) -> Checked {
    let one = matches!(request.topics.as_slice(), [topic] if topic.partitions.len() == 1);
    check_cluster_and_partition(context, request.cluster_id.as_deref(), one)?;
    let partition = metadata_partition!(request.topics, name == METADATA_TOPIC, partition)
        .ok_or(Refusal::Partition(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION))?;
    let id = &partition.snapshot_id;
    let message = Message::FetchSnapshotRequest {
        epoch: partition.current_leader_epoch,
        snapshot: SnapshotId { end_offset: id.end_offset, epoch: id.epoch },
        position: partition.position,
        directory_id: partition.replica_directory_id,
        max_bytes: request.max_bytes,
    };
    Ok((request.replica_id, message))
}
