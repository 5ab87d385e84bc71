//! The smaller admin APIs: DeleteRecords, DescribeCluster,
//! OffsetForLeaderEpoch, DescribeProducers and DescribeQuorum.

use krabka_protocol::ErrorCode;
use std::collections::BTreeMap;

use krabka_protocol::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use krabka_protocol::describe_cluster_response::DescribeClusterBroker;
use krabka_protocol::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use krabka_protocol::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use krabka_protocol::{
    DeleteRecordsRequest, DeleteRecordsResponse, DescribeClusterRequest, DescribeClusterResponse,
    DescribeProducersRequest, DescribeProducersResponse, DescribeQuorumRequest, DescribeQuorumResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};

use krabka_raft::wire::{describe_quorum_response, Endpoint};
use krabka_raft::{QuorumDescription, ReplicaDescription};

use crate::authorization::Access;
use crate::clock::now_ms;
use crate::errors::log_error_code;
use crate::request::RequestContext;
use crate::wire::{ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS};
use krabka_security::acl::{AclOperation, ResourceType};

/// DeleteRecords' "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub fn delete_records(ctx: &RequestContext<'_>, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let broker = ctx.broker;
    let now = now_ms();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let mut out = DeleteRecordsPartitionResult {
                        partition_index: p.partition_index,
                        low_watermark: -1,
                        ..Default::default()
                    };
                    let partition = match broker.replicas.leader_partition(&topic.name, p.partition_index, -1) {
                        Ok(partition) => partition,
                        Err(code) => {
                            out.error_code = code;
                            return out;
                        }
                    };
                    let high_watermark = partition.high_watermark();
                    let offset = if p.offset == HIGH_WATERMARK { high_watermark } else { p.offset };
                    if offset < 0 || offset > high_watermark {
                        out.error_code = ErrorCode::OFFSET_OUT_OF_RANGE.code();
                        return out;
                    }
                    match partition.delete_records_before(offset, now) {
                        Ok(low_watermark) => out.low_watermark = low_watermark,
                        Err(e) => out.error_code = log_error_code(&e),
                    }
                    out
                })
                .collect();
            DeleteRecordsTopicResult { name: topic.name, partitions, ..Default::default() }
        })
        .collect();
    DeleteRecordsResponse { topics, ..Default::default() }
}

/// DescribeCluster on a broker listener: the live brokers (KIP-919's
/// controllers' endpoint type is refused here).
pub fn describe_cluster(ctx: &RequestContext<'_>, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let broker = ctx.broker;
    let brokers = broker
        .live_brokers_on(&ctx.connection.listener_name)
        .into_iter()
        .map(|b| DescribeClusterBroker {
            broker_id: b.id,
            host: b.host,
            port: i32::from(b.port),
            rack: b.rack,
            is_fenced: false,
            ..Default::default()
        })
        .collect();
    let mut response = DescribeClusterResponse {
        endpoint_type: ENDPOINT_BROKERS,
        cluster_id: broker.cluster_id.clone(),
        controller_id: broker.controller_id(),
        brokers,
        cluster_authorized_operations: i32::MIN,
        ..Default::default()
    };
    // As Kafka: a request for the controllers' endpoint type is refused
    // (MISMATCHED_ENDPOINT_TYPE), an unknown type too.
    if ctx.api_version >= 1 && request.endpoint_type != ENDPOINT_BROKERS {
        let (code, message) = if request.endpoint_type == ENDPOINT_CONTROLLERS {
            let wanted =
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER";
            (ErrorCode::MISMATCHED_ENDPOINT_TYPE, wanted.to_string())
        } else {
            (ErrorCode::UNSUPPORTED_ENDPOINT_TYPE, format!("Unsupported endpoint type {}", request.endpoint_type))
        };
        return DescribeClusterResponse {
            error_code: code.code(),
            error_message: Some(message),
            endpoint_type: ENDPOINT_BROKERS,
            cluster_authorized_operations: i32::MIN,
            ..Default::default()
        };
    }
    if request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = Access::of(ctx).cluster_operations();
    }
    response
}

pub fn offset_for_leader_epoch(
    ctx: &RequestContext<'_>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let broker = ctx.broker;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let mut out = EpochEndOffset {
                        partition: p.partition,
                        leader_epoch: -1,
                        end_offset: -1,
                        ..Default::default()
                    };
                    let partition =
                        match broker.replicas.leader_partition(&topic.topic, p.partition, p.current_leader_epoch) {
                            Ok(partition) => partition,
                            Err(error_code) => {
                                out.error_code = error_code;
                                return out;
                            }
                        };
                    let epoch = partition.leader_epoch();
                    let log = partition.lock_log();
                    if let Some((leader_epoch, end_offset)) = log.end_offset_for_epoch(p.leader_epoch) {
                        out.leader_epoch = leader_epoch;
                        out.end_offset = end_offset;
                    } else if log.leader_epochs().entries().is_empty() {
                        // An empty log: its end offset closes every epoch.
                        out.leader_epoch = epoch;
                        out.end_offset = log.log_end_offset();
                    }
                    out
                })
                .collect();
            OffsetForLeaderTopicResult { topic: topic.topic, partitions, ..Default::default() }
        })
        .collect();
    OffsetForLeaderEpochResponse { topics, ..Default::default() }
}

pub fn describe_producers(ctx: &RequestContext<'_>, request: DescribeProducersRequest) -> DescribeProducersResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let denied = !access.allows(AclOperation::Read, ResourceType::Topic, &topic.name);
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let mut out = PartitionResponse { partition_index: index, ..Default::default() };
                    if denied {
                        out.error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
                        return out;
                    }
                    let partition = match broker.replicas.leader_partition(&topic.name, index, -1) {
                        Ok(partition) => partition,
                        Err(code) => {
                            out.error_code = code;
                            return out;
                        }
                    };
                    let log = partition.lock_log();
                    let mut producers: Vec<ProducerState> = log
                        .producer_state()
                        .producers()
                        .values()
                        .map(|p| ProducerState {
                            producer_id: p.producer_id,
                            producer_epoch: i32::from(p.epoch),
                            last_sequence: p.last_seq(),
                            last_timestamp: p.last_timestamp,
                            coordinator_epoch: p.coordinator_epoch,
                            current_txn_start_offset: p.current_txn_first_offset.unwrap_or(-1),
                            ..Default::default()
                        })
                        .collect();
                    producers.sort_by_key(|p| p.producer_id);
                    out.active_producers = producers;
                    out
                })
                .collect();
            TopicResponse { name: topic.name, partitions, ..Default::default() }
        })
        .collect();
    DescribeProducersResponse { topics, ..Default::default() }
}

/// DescribeQuorum. A node sharing a quorum answers as Kafka's raft client
/// does: the leader describes the quorum, any other node answers
/// NOT_LEADER_OR_FOLLOWER (a client's request reaches it only when no
/// active controller took the forward). The only voter describes itself.
pub async fn describe_quorum(ctx: &RequestContext<'_>, request: DescribeQuorumRequest) -> DescribeQuorumResponse {
    let broker = ctx.broker;
    let version = ctx.api_version;
    if let Some(quorum) = broker.metadata.quorum() {
        let stopped = || describe_quorum_response("", &BTreeMap::new(), &request, None, version);
        return quorum.describe(request.clone(), version).await.unwrap_or_else(stopped);
    }
    let view = broker.metadata.quorum_view(broker.node_id);
    let now = now_ms();
    let me = ReplicaDescription {
        replica_id: broker.node_id,
        directory_id: krabka_protocol::Uuid::ZERO,
        log_end_offset: Some(view.log_end_offset),
        last_fetch_ms: Some(now),
        last_caught_up_ms: Some(now),
    };
    let description = QuorumDescription {
        leader_id: broker.node_id,
        epoch: view.epoch.max(1),
        high_watermark: view.high_watermark,
        voters: vec![me],
        observers: Vec::new(),
    };
    // A single node has no controller listener: its clients' is where it is.
    let listener = broker.config.advertised_listener();
    let endpoints = BTreeMap::from([(broker.node_id, Endpoint { host: listener.host.clone(), port: listener.port })]);
    describe_quorum_response(&listener.name, &endpoints, &request, Some(&description), version)
}
