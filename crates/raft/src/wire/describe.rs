//! DescribeQuorum on the wire, answered as Kafka's raft client answers it:
//! a request that is not for `__cluster_metadata-0` alone gets
//! UNKNOWN_TOPIC_OR_PARTITION in each partition it names; a node that does
//! not lead answers NOT_LEADER_OR_FOLLOWER; the leader lists every voter
//! (with its endpoint from v2) and the observers it heard from lately.

use krabka_protocol::describe_quorum_response::{Listener, Node, PartitionData, ReplicaState, TopicData};
use krabka_protocol::{DescribeQuorumRequest, DescribeQuorumResponse, ErrorCode};

use std::collections::BTreeMap;

use super::{Endpoint, METADATA_PARTITION, METADATA_TOPIC};
use crate::describe::{QuorumDescription, ReplicaDescription};

/// Kafka's messages for the two errors DescribeQuorum answers with.
const NOT_LEADER_MESSAGE: &str = "For requests intended only for the leader, this error indicates that the broker \
                                  is not the current leader. For requests intended for any replica, this error \
                                  indicates that the broker is not a replica of the topic partition.";
const UNKNOWN_PARTITION_MESSAGE: &str = "This server does not host this topic-partition.";

/// The answer to `request` at `version` by a node whose quorum is
/// `description` (None when it does not lead); its times are wall-clock
/// milliseconds. `listener` and `endpoints` name where each voter listens
/// (a [`WireContext`]'s controller listener and voters).
///
/// [`WireContext`]: super::WireContext
pub fn describe_quorum_response(
    listener: &str,
    endpoints: &BTreeMap<i32, Endpoint>,
    request: &DescribeQuorumRequest,
    description: Option<&QuorumDescription>,
    version: i16,
) -> DescribeQuorumResponse {
    let message = |text: &str| (version >= 2).then(|| text.to_string());
    if !names_the_metadata_partition(request) {
        let topics = request
            .topics
            .iter()
            .map(|topic| TopicData {
                topic_name: topic.topic_name.clone(),
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| PartitionData {
                        partition_index: p.partition_index,
                        error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                        error_message: message(UNKNOWN_PARTITION_MESSAGE),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        return DescribeQuorumResponse { topics, ..Default::default() };
    }
    let Some(description) = description else {
        let partition = PartitionData {
            partition_index: METADATA_PARTITION,
            error_code: ErrorCode::NOT_LEADER_OR_FOLLOWER.code(),
            error_message: message(NOT_LEADER_MESSAGE),
            ..Default::default()
        };
        return one_partition(partition, Vec::new());
    };
    let replicas = |replicas: &[ReplicaDescription]| replicas.iter().map(|r| replica_state(r, version)).collect();
    let partition = PartitionData {
        partition_index: METADATA_PARTITION,
        leader_id: description.leader_id,
        leader_epoch: description.epoch,
        high_watermark: description.high_watermark,
        current_voters: replicas(&description.voters),
        observers: replicas(&description.observers),
        ..Default::default()
    };
    let nodes = if version >= 2 { voter_nodes(listener, endpoints, description) } else { Vec::new() };
    one_partition(partition, nodes)
}

/// Kafka's `hasValidTopicPartition`: one topic, `__cluster_metadata`, with
/// one partition, 0.
fn names_the_metadata_partition(request: &DescribeQuorumRequest) -> bool {
    matches!(request.topics.as_slice(), [topic] if topic.topic_name == METADATA_TOPIC
        && matches!(topic.partitions.as_slice(), [p] if p.partition_index == METADATA_PARTITION))
}

fn one_partition(partition: PartitionData, nodes: Vec<Node>) -> DescribeQuorumResponse {
    let topic = TopicData { topic_name: METADATA_TOPIC.to_string(), partitions: vec![partition], ..Default::default() };
    DescribeQuorumResponse { topics: vec![topic], nodes, ..Default::default() }
}

fn replica_state(replica: &ReplicaDescription, version: i16) -> ReplicaState {
    // v0 has no timestamps: they stay at their default (-1).
    let timestamp = |at: Option<i64>| if version >= 1 { at.unwrap_or(-1) } else { -1 };
    ReplicaState {
        replica_id: replica.replica_id,
        // Zero for static voters (`controller.quorum.voters`), and for an
        // observer whose fetches name none (Fetch before v17).
        replica_directory_id: replica.directory_id,
        log_end_offset: replica.log_end_offset.unwrap_or(-1),
        last_fetch_timestamp: timestamp(replica.last_fetch_ms),
        last_caught_up_timestamp: timestamp(replica.last_caught_up_ms),
        ..Default::default()
    }
}

/// Each voter with its endpoint on the controller listener, as Kafka's
/// leader lists the voter set.
fn voter_nodes(listener: &str, endpoints: &BTreeMap<i32, Endpoint>, description: &QuorumDescription) -> Vec<Node> {
    description
        .voters
        .iter()
        .map(|voter| Node {
            node_id: voter.replica_id,
            listeners: endpoints
                .get(&voter.replica_id)
                .map(|endpoint| Listener {
                    name: listener.to_string(),
                    host: endpoint.host.clone(),
                    port: endpoint.port,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        })
        .collect()
}
