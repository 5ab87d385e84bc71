//! The requests a node sends, filled as Kafka's raft client fills them.

use krabka_protocol::generated::{begin_quorum_epoch_request as begin, end_quorum_epoch_request as end};
use krabka_protocol::generated::{
    fetch_request as fetch, fetch_snapshot_request as fetch_snapshot, vote_request as vote,
};
use krabka_protocol::{
    BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest, RequestBody, Uuid, VoteRequest,
};

use super::{WireContext, METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID};
use crate::message::{FetchBounds, Message};

/// `message` to node `to` as the request Kafka sends at `version` (only
/// Fetch's layout depends on it); None when `message` is a response.
pub fn request(context: &WireContext, to: i32, message: &Message, version: i16) -> Option<RequestBody> {
    Some(match message {
        &Message::VoteRequest { epoch, last_epoch, last_offset, pre_vote } => {
            RequestBody::Vote(Box::new(vote_request(context, to, epoch, (last_epoch, last_offset), pre_vote)))
        }
        &Message::BeginQuorumEpoch { epoch } => {
            RequestBody::BeginQuorumEpoch(Box::new(begin_quorum_epoch(context, to, epoch)))
        }
        Message::EndQuorumEpoch { epoch, preferred_successors } => {
            RequestBody::EndQuorumEpoch(Box::new(end_quorum_epoch(context, *epoch, preferred_successors)))
        }
        // The replica directory id sent is this node's own, the context's
        // (the node names the same one in its message).
        &Message::FetchRequest { epoch, fetch_offset, last_fetched_epoch, bounds, .. } => RequestBody::Fetch(Box::new(
            fetch_request(context, epoch, (fetch_offset, last_fetched_epoch), bounds, version),
        )),
        &Message::FetchSnapshotRequest { epoch, snapshot, position, max_bytes, .. } => RequestBody::FetchSnapshot(
            Box::new(fetch_snapshot_request(context, epoch, snapshot, (position, max_bytes))),
        ),
        Message::UpdateVoterRequest { epoch, voter } => {
            RequestBody::UpdateRaftVoter(Box::new(super::voters::update_voter_request(context, *epoch, voter)))
        }
        Message::AddVoterRequest { voter } => {
            RequestBody::AddRaftVoter(Box::new(super::voters::auto_join_request(context, voter)))
        }
        &Message::RemoveVoterRequest { id, directory_id } => {
            RequestBody::RemoveRaftVoter(Box::new(super::voters::auto_join_removal(context, id, directory_id)))
        }
        Message::VoteResponse { .. }
        | Message::AddVoterResponse { .. }
        | Message::RemoveVoterResponse { .. }
        | Message::UpdateVoterResponse { .. }
        | Message::BeginQuorumEpochResponse { .. }
        | Message::EndQuorumEpochResponse { .. }
        | Message::FetchResponse(_)
        | Message::FetchSnapshotResponse(_) => return None,
    })
}

fn fetch_snapshot_request(
    context: &WireContext,
    epoch: i32,
    snapshot: krabka_log::SnapshotId,
    (position, max_bytes): (i64, i32),
) -> FetchSnapshotRequest {
    let partition = fetch_snapshot::PartitionSnapshot {
        partition: METADATA_PARTITION,
        current_leader_epoch: epoch,
        snapshot_id: fetch_snapshot::SnapshotId {
            end_offset: snapshot.end_offset,
            epoch: snapshot.epoch,
            ..Default::default()
        },
        position,
        replica_directory_id: context.directory_id,
        ..Default::default()
    };
    FetchSnapshotRequest {
        cluster_id: Some(context.cluster_id.clone()),
        replica_id: context.node_id,
        max_bytes,
        topics: vec![fetch_snapshot::TopicSnapshot {
            name: METADATA_TOPIC.into(),
            partitions: vec![partition],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn vote_request(context: &WireContext, to: i32, epoch: i32, log_end: (i32, i64), pre_vote: bool) -> VoteRequest {
    let partition = vote::PartitionData {
        partition_index: METADATA_PARTITION,
        replica_epoch: epoch,
        replica_id: context.node_id,
        replica_directory_id: context.directory_id,
        // Static voters: the target's directory is not known.
        voter_directory_id: Uuid::ZERO,
        last_offset_epoch: log_end.0,
        last_offset: log_end.1,
        pre_vote,
        ..Default::default()
    };
    VoteRequest {
        cluster_id: Some(context.cluster_id.clone()),
        voter_id: to,
        topics: vec![vote::TopicData {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![partition],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn begin_quorum_epoch(context: &WireContext, to: i32, epoch: i32) -> BeginQuorumEpochRequest {
    let partition = begin::PartitionData {
        partition_index: METADATA_PARTITION,
        voter_directory_id: Uuid::ZERO,
        leader_id: context.node_id,
        leader_epoch: epoch,
        ..Default::default()
    };
    // The leader's endpoints, by listener name: a Kafka follower fetches
    // from the one named as its first controller listener.
    let leader_endpoints = context
        .voters
        .get(&context.node_id)
        .map(|endpoint| begin::LeaderEndpoint {
            name: context.listener.clone(),
            host: endpoint.host.clone(),
            port: endpoint.port,
            ..Default::default()
        })
        .into_iter()
        .collect();
    BeginQuorumEpochRequest {
        cluster_id: Some(context.cluster_id.clone()),
        voter_id: to,
        topics: vec![begin::TopicData {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![partition],
            ..Default::default()
        }],
        leader_endpoints,
        ..Default::default()
    }
}

/// Kafka fills both the v0 successor ids and the v1 candidates (ids with
/// unknown directories); each version writes its own.
fn end_quorum_epoch(context: &WireContext, epoch: i32, successors: &[i32]) -> EndQuorumEpochRequest {
    let candidate = |&candidate_id: &i32| end::ReplicaInfo { candidate_id, ..Default::default() };
    let partition = end::PartitionData {
        partition_index: METADATA_PARTITION,
        leader_id: context.node_id,
        leader_epoch: epoch,
        preferred_successors: successors.to_vec(),
        preferred_candidates: successors.iter().map(candidate).collect(),
        ..Default::default()
    };
    EndQuorumEpochRequest {
        cluster_id: Some(context.cluster_id.clone()),
        topics: vec![end::TopicData {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![partition],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The sender's id goes in ReplicaState from v15, in ReplicaId before;
/// the high watermark it knows is written from v18 (KIP-1166) only.
fn fetch_request(
    context: &WireContext,
    epoch: i32,
    (offset, last_epoch): (i64, i32),
    bounds: FetchBounds,
    version: i16,
) -> FetchRequest {
    let partition = fetch::FetchPartition {
        partition: METADATA_PARTITION,
        current_leader_epoch: epoch,
        fetch_offset: offset,
        last_fetched_epoch: last_epoch,
        log_start_offset: -1,
        partition_max_bytes: 0,
        replica_directory_id: context.directory_id,
        high_watermark: bounds.high_watermark,
        ..Default::default()
    };
    let mut request = FetchRequest {
        cluster_id: Some(context.cluster_id.clone()),
        max_wait_ms: bounds.max_wait_ms,
        min_bytes: 0,
        max_bytes: bounds.max_bytes,
        topics: vec![fetch::FetchTopic {
            topic: METADATA_TOPIC.into(),
            topic_id: METADATA_TOPIC_ID,
            partitions: vec![partition],
            ..Default::default()
        }],
        ..Default::default()
    };
    if version >= 15 {
        request.replica_state = fetch::ReplicaState { replica_id: context.node_id, ..Default::default() };
    } else {
        request.replica_id = context.node_id;
    }
    request
}
