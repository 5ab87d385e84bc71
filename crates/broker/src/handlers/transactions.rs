//! The transaction APIs: InitProducerId with a transactional id,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
//! DescribeTransactions and ListTransactions, translated to and from the
//! transaction coordinator (krabka-coordinator's `txn`), and TxnOffsetCommit
//! to and from the group coordinator.

use krabka_coordinator::txn::{Answer, EndTxn, ListFilter, TopicPartition, TransactionState};
use krabka_protocol::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use krabka_protocol::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use krabka_protocol::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use krabka_protocol::{describe_transactions_response as describe, list_transactions_response as list};
use krabka_protocol::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, ErrorCode, InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
    ListTransactionsResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use krabka_coordinator::group::transactional::TxnCommitter;
use krabka_coordinator::group::{OffsetToCommit, OFFSETS_TOPIC};
use krabka_protocol::txn_offset_commit_response::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic};
use krabka_protocol::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};

use crate::authorization::{allowed_on_cluster, Access};
use crate::request::RequestContext;
use crate::transactions::{append_marker, by_topic, check_in_transaction, spawn_markers};
use krabka_security::acl::{AclOperation, ResourceType};

/// Calls the coordinator; when the broker's block of producer ids is used
/// up, fetches the next one and calls again with an id of it in hand.
async fn with_producer_ids<T>(
    ctx: &RequestContext<'_>,
    call: impl Fn(&krabka_coordinator::txn::TxnHost<'_>) -> Answer<T>,
) -> Answer<T> {
    let broker = ctx.broker;
    let answer = broker.with_txn_host(None, &call);
    if answer.result.as_ref().err() != Some(&ErrorCode::COORDINATOR_LOAD_IN_PROGRESS) {
        return answer;
    }
    match broker.producer_ids.next_id(|| crate::active_controller::reserve_producer_ids(broker)).await {
        Ok(id) => broker.with_txn_host(Some(id), &call),
        Err(_) => answer,
    }
}

/// InitProducerId for a transactional producer.
pub async fn init_producer_id(
    ctx: &RequestContext<'_>,
    request: &InitProducerIdRequest,
    transactional_id: &str,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse { producer_id: -1, producer_epoch: -1, ..Default::default() };
    let expected = match (request.producer_id, request.producer_epoch) {
        (-1, -1) => None,
        (-1, _) | (_, -1) => {
            response.error_code = ErrorCode::INVALID_REQUEST.code();
            return response;
        }
        given => Some(given),
    };
    // Two-phase commit (KIP-939) is off, as Kafka's default.
    if request.enable2_pc {
        response.error_code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();
        return response;
    }
    if request.keep_prepared_txn {
        response.error_code = ErrorCode::UNSUPPORTED_VERSION.code();
        return response;
    }
    let timeout = request.transaction_timeout_ms;
    let answer =
        with_producer_ids(ctx, |host| ctx.broker.txns.init_producer_id(host, transactional_id, timeout, expected))
            .await;
    if let Some(markers) = answer.markers {
        spawn_markers(ctx.broker, markers);
    }
    match answer.result {
        Ok((producer_id, producer_epoch)) => {
            response.producer_id = producer_id;
            response.producer_epoch = producer_epoch;
        }
        Err(code) => response.error_code = fenced_before(ctx.api_version, 4, code).code(),
    }
    response
}

/// PRODUCER_FENCED as versions below `first` know it (INVALID_PRODUCER_EPOCH).
fn fenced_before(version: i16, first: i16, code: ErrorCode) -> ErrorCode {
    if code == ErrorCode::PRODUCER_FENCED && version < first {
        ErrorCode::INVALID_PRODUCER_EPOCH
    } else {
        code
    }
}

fn partitions_of(topics: &[AddPartitionsToTxnTopic]) -> Vec<TopicPartition> {
    topics.iter().flat_map(|t| t.partitions.iter().map(|&p| (t.name.clone(), p))).collect()
}

fn topic_results(results: Vec<(TopicPartition, ErrorCode)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let results = results.into_iter().map(|((topic, partition_index), code)| {
        let result = AddPartitionsToTxnPartitionResult {
            partition_index,
            partition_error_code: code.code(),
            ..Default::default()
        };
        (topic, result)
    });
    by_topic(results)
        .into_iter()
        .map(|(name, results_by_partition)| AddPartitionsToTxnTopicResult {
            name,
            results_by_partition,
            ..Default::default()
        })
        .collect()
}

/// AddPartitionsToTxn: v0-3 from a producer (one transaction), v4+ from
/// brokers (several, each added or only verified).
pub fn add_partitions_to_txn(
    ctx: &RequestContext<'_>,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let broker = ctx.broker;
    if ctx.api_version <= 3 {
        let partitions = partitions_of(&request.v3_and_below_topics);
        let (id, pid, epoch) = (
            &request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
        );
        if let Some(results) = unauthorized_partitions(ctx, id, &partitions) {
            return AddPartitionsToTxnResponse {
                results_by_topic_v3_and_below: topic_results(results),
                ..Default::default()
            };
        }
        let unknown = unknown_partitions(ctx, &partitions);
        let results = if !unknown.is_empty() {
            let code = |tp: &TopicPartition| {
                if unknown.contains(tp) {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                } else {
                    ErrorCode::OPERATION_NOT_ATTEMPTED
                }
            };
            partitions.iter().map(|tp| (tp.clone(), code(tp))).collect()
        } else {
            let code = broker
                .with_txn_host(None, |host| broker.txns.add_partitions(host, id, pid, epoch, &partitions, 0))
                .err()
                .map_or(ErrorCode::NONE, |code| fenced_before(ctx.api_version, 2, code));
            partitions.iter().map(|tp| (tp.clone(), code)).collect()
        };
        return AddPartitionsToTxnResponse {
            results_by_topic_v3_and_below: topic_results(results),
            ..Default::default()
        };
    }
    // v4+ batches come from brokers verifying their producers' writes.
    if !allowed_on_cluster(ctx, AclOperation::ClusterAction) {
        return AddPartitionsToTxnResponse {
            error_code: ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code(),
            ..Default::default()
        };
    }
    let results_by_transaction = request
        .transactions
        .iter()
        .map(|txn| {
            let partitions = partitions_of(&txn.topics);
            let (id, pid, epoch) = (&txn.transactional_id, txn.producer_id, txn.producer_epoch);
            let results = broker.with_txn_host(None, |host| {
                if txn.verify_only {
                    broker.txns.verify_partitions(host, id, pid, epoch, &partitions)
                } else {
                    let code = broker.txns.add_partitions(host, id, pid, epoch, &partitions, 2).err();
                    partitions.iter().map(|tp| (tp.clone(), code.unwrap_or(ErrorCode::NONE))).collect()
                }
            });
            AddPartitionsToTxnResult {
                transactional_id: id.clone(),
                topic_results: topic_results(results),
                ..Default::default()
            }
        })
        .collect();
    AddPartitionsToTxnResponse { results_by_transaction, ..Default::default() }
}

/// WRITE on the transactional id and on each topic, under an authorizer:
/// None when all is allowed, else every partition's answer (those of
/// allowed topics not attempted), as Kafka's AddPartitionsToTxn v0-3.
fn unauthorized_partitions(
    ctx: &RequestContext<'_>,
    transactional_id: &str,
    partitions: &[TopicPartition],
) -> Option<Vec<(TopicPartition, ErrorCode)>> {
    let access = Access::of(ctx);
    if !may_write_transaction(ctx, transactional_id) {
        let code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        return Some(partitions.iter().map(|tp| (tp.clone(), code)).collect());
    }
    let denied = |(topic, _): &TopicPartition| !access.allows(AclOperation::Write, ResourceType::Topic, topic);
    if !partitions.iter().any(denied) {
        return None;
    }
    let code = |tp: &TopicPartition| {
        if denied(tp) {
            ErrorCode::TOPIC_AUTHORIZATION_FAILED
        } else {
            ErrorCode::OPERATION_NOT_ATTEMPTED
        }
    };
    Some(partitions.iter().map(|tp| (tp.clone(), code(tp))).collect())
}

/// WRITE on the transactional id, under an authorizer.
fn may_write_transaction(ctx: &RequestContext<'_>, transactional_id: &str) -> bool {
    Access::of(ctx).allows(AclOperation::Write, ResourceType::TransactionalId, transactional_id)
}

/// The partitions of `partitions` that do not exist.
fn unknown_partitions(ctx: &RequestContext<'_>, partitions: &[TopicPartition]) -> Vec<TopicPartition> {
    let image = ctx.broker.metadata.image();
    let exists =
        |(topic, p): &TopicPartition| image.topic(topic).is_some_and(|t| *p >= 0 && (*p as usize) < t.partitions.len());
    partitions.iter().filter(|tp| !exists(tp)).cloned().collect()
}

/// EndTxn: the transaction prepared, its markers written in the background.
pub async fn end_txn(ctx: &RequestContext<'_>, request: EndTxnRequest) -> EndTxnResponse {
    if !may_write_transaction(ctx, &request.transactional_id) {
        let error_code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();
        return EndTxnResponse { error_code, producer_id: -1, producer_epoch: -1, ..Default::default() };
    }
    let end = EndTxn {
        producer_id: request.producer_id,
        producer_epoch: request.producer_epoch,
        commit: request.committed,
        client_transaction_version: if ctx.api_version >= 5 { 2 } else { 0 },
    };
    let id = request.transactional_id.as_str();
    let answer = with_producer_ids(ctx, |host| ctx.broker.txns.end_txn(host, id, end)).await;
    if let Some(markers) = answer.markers {
        spawn_markers(ctx.broker, markers);
    }
    let mut response = EndTxnResponse { producer_id: -1, producer_epoch: -1, ..Default::default() };
    match answer.result {
        Ok((producer_id, producer_epoch)) => {
            (response.producer_id, response.producer_epoch) = (producer_id, producer_epoch)
        }
        Err(code) => response.error_code = fenced_before(ctx.api_version, 2, code).code(),
    }
    response
}

/// WriteTxnMarkers from a transaction coordinator: each marker appended
/// to its partitions as their leader, answered once followers have it.
pub async fn write_txn_markers(ctx: &RequestContext<'_>, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    // Only brokers write markers: CLUSTER_ACTION, under an authorizer.
    let refused = !allowed_on_cluster(ctx, AclOperation::ClusterAction);
    let mut markers = Vec::with_capacity(request.markers.len());
    for marker in &request.markers {
        let written = (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch);
        let mut topics = Vec::with_capacity(marker.topics.len());
        for topic in &marker.topics {
            let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
            for &partition in &topic.partition_indexes {
                let code = if refused {
                    ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code()
                } else {
                    append_marker(ctx.broker, written, &topic.name, partition).await.err().unwrap_or(0)
                };
                partitions.push(WritableTxnMarkerPartitionResult {
                    partition_index: partition,
                    error_code: code,
                    ..Default::default()
                });
            }
            topics.push(WritableTxnMarkerTopicResult { name: topic.name.clone(), partitions, ..Default::default() });
        }
        markers.push(WritableTxnMarkerResult { producer_id: marker.producer_id, topics, ..Default::default() });
    }
    WriteTxnMarkersResponse { markers, ..Default::default() }
}

pub fn describe_transactions(
    ctx: &RequestContext<'_>,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    let transaction_states = request
        .transactional_ids
        .iter()
        .map(|id| {
            let mut state = describe::TransactionState { transactional_id: id.clone(), ..Default::default() };
            if !access.allows(AclOperation::Describe, ResourceType::TransactionalId, id) {
                state.error_code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();
                return state;
            }
            let described = broker.with_txn_host(None, |host| broker.txns.describe(host, id));
            match described {
                Ok(meta) => {
                    state.transaction_state = meta.state.name().into();
                    state.transaction_timeout_ms = meta.timeout_ms;
                    state.transaction_start_time_ms = meta.start_ms;
                    state.producer_id = meta.producer_id;
                    state.producer_epoch = meta.producer_epoch;
                    state.topics = by_topic(meta.partitions)
                        .into_iter()
                        .map(|(topic, partitions)| describe::TopicData { topic, partitions, ..Default::default() })
                        .collect();
                }
                Err(code) => state.error_code = code.code(),
            }
            state
        })
        .collect();
    DescribeTransactionsResponse { transaction_states, ..Default::default() }
}

pub fn list_transactions(ctx: &RequestContext<'_>, request: ListTransactionsRequest) -> ListTransactionsResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    let mut response = ListTransactionsResponse::default();
    let mut states = Vec::new();
    for name in &request.state_filters {
        match TransactionState::from_name(name) {
            Some(state) => states.push(state),
            None => response.unknown_state_filters.push(name.clone()),
        }
    }
    let pattern = match request.transactional_id_pattern.as_deref().filter(|p| !p.is_empty()) {
        None => None,
        Some(pattern) => match regex::Regex::new(&format!("^(?:{pattern})$")) {
            Ok(regex) => Some(regex),
            Err(_) => {
                response.error_code = ErrorCode::INVALID_REGULAR_EXPRESSION.code();
                return response;
            }
        },
    };
    // Only the transactions it may DESCRIBE are listed.
    let matches = |id: &str| {
        pattern.as_ref().is_none_or(|r| r.is_match(id))
            && access.allows(AclOperation::Describe, ResourceType::TransactionalId, id)
    };
    let filter = ListFilter {
        states: &states,
        producer_ids: &request.producer_id_filters,
        min_duration_ms: request.duration_filter,
        id_matches: Some(&matches),
    };
    // Unknown states named only: nothing can match.
    if states.is_empty() && !request.state_filters.is_empty() {
        return response;
    }
    let listed = broker.with_txn_host(None, |host| broker.txns.list(host, &filter));
    response.transaction_states = listed
        .into_iter()
        .map(|(transactional_id, producer_id, state)| list::TransactionState {
            transactional_id,
            producer_id,
            transaction_state: state.name().into(),
            ..Default::default()
        })
        .collect();
    response
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the
/// transaction (its offsets are committed with it).
pub async fn add_offsets_to_txn(ctx: &RequestContext<'_>, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    if !may_write_transaction(ctx, &request.transactional_id) {
        return AddOffsetsToTxnResponse {
            error_code: ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code(),
            ..Default::default()
        };
    }
    if !access.allows(AclOperation::Read, ResourceType::Group, &request.group_id) {
        return AddOffsetsToTxnResponse {
            error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.code(),
            ..Default::default()
        };
    }
    // The partition must exist for its marker to be written.
    if let Err(code) = super::groups::ensure_offsets_topic(ctx).await {
        return AddOffsetsToTxnResponse { error_code: code, ..Default::default() };
    }
    let partition = (OFFSETS_TOPIC.to_string(), broker.groups.partition_for(&request.group_id) as i32);
    let (id, pid, epoch) = (&request.transactional_id, request.producer_id, request.producer_epoch);
    let added = broker.with_txn_host(None, |host| broker.txns.add_partitions(host, id, pid, epoch, &[partition], 0));
    let error_code = added.err().map_or(0, |code| fenced_before(ctx.api_version, 2, code).code());
    AddOffsetsToTxnResponse { error_code, ..Default::default() }
}

/// TxnOffsetCommit: the offsets written in the producer's transaction,
/// counted once it commits. From v4 the group's offsets partition must be
/// in the transaction (KIP-890 part 1); v5 (transactions v2) adds it.
pub async fn txn_offset_commit(ctx: &RequestContext<'_>, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    let mut in_transaction = ErrorCode::NONE;
    if ctx.api_version >= 4 && !super::groups::not_coordinator(ctx, &request.group_id) {
        let partition = (OFFSETS_TOPIC.to_string(), broker.groups.partition_for(&request.group_id) as i32);
        let producer = (request.producer_id, request.producer_epoch);
        let (id, add) = (&request.transactional_id, ctx.api_version >= 5);
        let answers = check_in_transaction(broker, id, producer, vec![partition], add).await;
        in_transaction = answers.first().map_or(ErrorCode::NONE, |(_, code)| *code);
    }
    let offsets: Vec<OffsetToCommit> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.clone(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata.clone(),
                )
            })
        })
        .collect();
    let codes = if !may_write_transaction(ctx, &request.transactional_id) {
        vec![ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code(); offsets.len()]
    } else if !access.allows(AclOperation::Read, ResourceType::Group, &request.group_id) {
        vec![ErrorCode::GROUP_AUTHORIZATION_FAILED.code(); offsets.len()]
    } else if offsets.iter().any(|(topic, ..)| !access.allows(AclOperation::Read, ResourceType::Topic, topic)) {
        let denied = |topic: &str| !access.allows(AclOperation::Read, ResourceType::Topic, topic);
        let code = |topic: &str| {
            if denied(topic) {
                ErrorCode::TOPIC_AUTHORIZATION_FAILED
            } else {
                ErrorCode::OPERATION_NOT_ATTEMPTED
            }
        };
        offsets.iter().map(|(topic, ..)| code(topic).code()).collect()
    } else if super::groups::not_coordinator(ctx, &request.group_id) {
        vec![ErrorCode::NOT_COORDINATOR.code(); offsets.len()]
    } else if in_transaction != ErrorCode::NONE {
        vec![in_transaction.code(); offsets.len()]
    } else {
        let committer = TxnCommitter {
            producer_id: request.producer_id,
            producer_epoch: request.producer_epoch,
            member_id: &request.member_id,
            group_instance_id: request.group_instance_id.as_deref(),
            generation_id: request.generation_id,
        };
        let host = broker.group_host();
        let codes = broker.groups.commit_transactional_offsets(&host, &request.group_id, committer, &offsets);
        codes.into_iter().map(|c| fenced_before(ctx.api_version, 2, ErrorCode::from(c)).code()).collect()
    };
    let answers = offsets.iter().zip(codes).map(|((topic, partition, ..), error_code)| {
        (
            topic.clone(),
            TxnOffsetCommitResponsePartition { partition_index: *partition, error_code, ..Default::default() },
        )
    });
    let topics = by_topic(answers)
        .into_iter()
        .map(|(name, partitions)| TxnOffsetCommitResponseTopic { name, partitions, ..Default::default() })
        .collect();
    TxnOffsetCommitResponse { topics, ..Default::default() }
}
