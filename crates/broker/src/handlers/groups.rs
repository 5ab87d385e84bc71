//! The group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups,
//! DeleteGroups and OffsetDelete, translated to and from the coordinator
//! (krabka-coordinator's group coordinator). JoinGroup and SyncGroup may
//! answer later: the coordinator keeps a waiter that fills a oneshot, and
//! the connection gets a task that waits on it.

use krabka_protocol::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use krabka_protocol::find_coordinator_response::Coordinator;
use krabka_protocol::leave_group_response::MemberResponse;
use krabka_protocol::list_groups_response::ListedGroup;
use krabka_protocol::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use krabka_protocol::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use krabka_protocol::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use krabka_protocol::ErrorCode;
use krabka_protocol::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    ResponseBody, SyncGroupRequest, SyncGroupResponse, Uuid,
};

use super::topics::ensure_internal_topic;
use crate::authorization::{allowed_on_cluster, Access};
use crate::clock::coordinator_time;
use crate::request::RequestContext;
use crate::request::{Reply, Response};
use crate::wire::encode_frame;
use krabka_coordinator::group::assignor::Assignment;
use krabka_coordinator::group::classic::{GroupState, JoinRequest};
use krabka_coordinator::group::consumer::HeartbeatRequest as ConsumerHeartbeat;
use krabka_coordinator::group::{CommittedOffset, OFFSETS_TOPIC};
use krabka_coordinator::runtime::{Outcome, Waiter};
use krabka_security::acl::{AclOperation, ResourceType};

/// FindCoordinator key types.
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

const NOT_COORDINATOR: i16 = ErrorCode::NOT_COORDINATOR.code();
const NOT_COORDINATOR_MESSAGE: &str = "This is not the correct coordinator.";

/// Whether `group_id` belongs to another broker's coordinator. An empty id
/// is the coordinator's to refuse (INVALID_GROUP_ID comes first, as Kafka).
pub(super) fn not_coordinator(ctx: &RequestContext<'_>, group_id: &str) -> bool {
    !group_id.is_empty() && !ctx.broker.coordinates(group_id)
}

/// Creates `__consumer_offsets` on first use, as Kafka does.
pub(super) async fn ensure_offsets_topic(ctx: &RequestContext<'_>) -> Result<(), i16> {
    let partitions = ctx.broker.groups.config().offsets_partitions as i32;
    let configs = [("cleanup.policy", "compact"), ("compression.type", "producer"), ("segment.bytes", "104857600")];
    let replication_factor = ctx.broker.config.offsets_topic_replication_factor;
    coordinator_topic(ensure_internal_topic(ctx.broker, OFFSETS_TOPIC, partitions, replication_factor, &configs).await)
}

/// Creates `__transaction_state` on first use, with Kafka's configs.
async fn ensure_transaction_state_topic(ctx: &RequestContext<'_>) -> Result<(), i16> {
    let settings = &ctx.broker.config.transactions;
    let (min_isr, segment_bytes) =
        (settings.state_log_min_isr.to_string(), settings.state_log_segment_bytes.to_string());
    let configs = [
        ("cleanup.policy", "compact"),
        ("compression.type", "uncompressed"),
        ("unclean.leader.election.enable", "false"),
        ("min.insync.replicas", min_isr.as_str()),
        ("segment.bytes", segment_bytes.as_str()),
    ];
    let name = krabka_coordinator::txn::TRANSACTION_STATE_TOPIC;
    let (partitions, replication_factor) = (settings.state_log_num_partitions, settings.state_log_replication_factor);
    coordinator_topic(ensure_internal_topic(ctx.broker, name, partitions, replication_factor, &configs).await)
}

/// A coordinator topic's creation as FindCoordinator answers it.
fn coordinator_topic(created: Result<(), i16>) -> Result<(), i16> {
    // While the topic is being created (through the active controller, on
    // a node that is not it) or cannot be, the client is told what Kafka
    // tells it meanwhile.
    created.map_err(|code| {
        let not_yet =
            [ErrorCode::NOT_CONTROLLER, ErrorCode::LEADER_NOT_AVAILABLE, ErrorCode::INVALID_REPLICATION_FACTOR];
        if not_yet.iter().any(|e| e.code() == code) {
            ErrorCode::COORDINATOR_NOT_AVAILABLE.code()
        } else {
            code
        }
    })
}

pub async fn find_coordinator(ctx: &RequestContext<'_>, request: FindCoordinatorRequest) -> FindCoordinatorResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    let valid_key = |key: &str| !key.is_empty() || ctx.api_version >= 4;
    let (group, transaction) = (request.key_type == KEY_TYPE_GROUP, request.key_type == KEY_TYPE_TRANSACTION);
    let valid_keys = request.coordinator_keys.iter().any(|k| valid_key(k)) || valid_key(&request.key);
    // The coordinator's topic is created on the first lookup of a valid key, as Kafka does.
    let topic = match (group, transaction) {
        (true, _) if valid_keys => ensure_offsets_topic(ctx).await,
        (_, true) if valid_keys => ensure_transaction_state_topic(ctx).await,
        _ => Ok(()),
    };
    let answer = |key: &str| -> Coordinator {
        let error = if !group && !transaction {
            // Share groups are not served yet.
            Some((ErrorCode::COORDINATOR_NOT_AVAILABLE.code(), "The coordinator is not available."))
        } else if group && !access.allows(AclOperation::Describe, ResourceType::Group, key) {
            Some((ErrorCode::GROUP_AUTHORIZATION_FAILED.code(), "Group authorization failed."))
        } else if transaction && !access.allows(AclOperation::Describe, ResourceType::TransactionalId, key) {
            let code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();
            Some((code, "Transactional Id authorization failed."))
        } else if key.is_empty() && ctx.api_version < 4 {
            let invalid = if group { ErrorCode::INVALID_GROUP_ID } else { ErrorCode::INVALID_REQUEST };
            Some((invalid.code(), "The key is invalid."))
        } else {
            topic.err().map(|c| (c, "The coordinator is not available."))
        };
        let coordinator = match error {
            Some(_) => None,
            None if group => broker.group_coordinator(key, &ctx.connection.listener_name),
            None => broker.txn_coordinator(key, &ctx.connection.listener_name),
        };
        match (error, coordinator) {
            (None, Some(coordinator)) => Coordinator {
                key: key.into(),
                node_id: coordinator.id,
                host: coordinator.host,
                port: i32::from(coordinator.port),
                ..Default::default()
            },
            (error, _) => {
                let (code, message) =
                    error.unwrap_or((ErrorCode::COORDINATOR_NOT_AVAILABLE.code(), "The coordinator is not available."));
                Coordinator {
                    key: key.into(),
                    node_id: -1,
                    host: String::new(),
                    port: -1,
                    error_code: code,
                    error_message: Some(message.into()),
                    ..Default::default()
                }
            }
        }
    };
    if ctx.api_version >= 4 {
        let coordinators = request.coordinator_keys.iter().map(|k| answer(k)).collect();
        return FindCoordinatorResponse { coordinators, ..Default::default() };
    }
    let c = answer(&request.key);
    FindCoordinatorResponse {
        error_code: c.error_code,
        error_message: if ctx.api_version >= 1 { c.error_message } else { None },
        node_id: c.node_id,
        host: c.host,
        port: c.port,
        ..Default::default()
    }
}

/// READ on the group: what joining, syncing, heartbeating, leaving and
/// committing take under an authorizer.
fn may_read_group(ctx: &RequestContext<'_>, group_id: &str) -> bool {
    Access::of(ctx).allows(AclOperation::Read, ResourceType::Group, group_id)
}

fn join_error(ctx: &RequestContext<'_>, member_id: &str, code: i16) -> JoinGroupResponse {
    normalize_join(
        ctx.api_version,
        JoinGroupResponse { error_code: code, generation_id: -1, member_id: member_id.into(), ..Default::default() },
    )
}

/// Older JoinGroup versions have a non-nullable protocol name and no protocol type.
fn normalize_join(version: i16, mut response: JoinGroupResponse) -> JoinGroupResponse {
    if version < 7 {
        response.protocol_name = Some(response.protocol_name.unwrap_or_default());
        response.protocol_type = None;
    }
    response
}

fn normalize_sync(version: i16, mut response: SyncGroupResponse) -> SyncGroupResponse {
    if version < 5 {
        response.protocol_type = None;
        response.protocol_name = None;
    }
    response
}

/// A reply that waits for the coordinator to answer.
/// A waiter for the coordinator that sends the answer down a oneshot.
fn oneshot_waiter<T: Send + 'static>() -> (Waiter<T>, tokio::sync::oneshot::Receiver<T>) {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    (
        Box::new(move |value| {
            let _ = sender.send(value);
        }),
        receiver,
    )
}

fn later<T: Send + 'static>(
    ctx: &RequestContext<'_>,
    receiver: tokio::sync::oneshot::Receiver<T>,
    gone: T,
    body: impl FnOnce(T) -> ResponseBody + Send + 'static,
) -> Reply {
    let (api_key, version, correlation_id) = (ctx.api_key, ctx.api_version, ctx.correlation_id);
    let metrics = ctx.broker.metrics.clone();
    let started = ctx.started;
    let audience = crate::request::ErrorAudience::of(ctx);
    Reply::Later(tokio::spawn(async move {
        let value = receiver.await.unwrap_or(gone);
        let body = body(value);
        crate::request::report_errors(&metrics, audience.as_ref(), api_key.info().name, &body);
        let frame = encode_frame(api_key, version, correlation_id, &body);
        metrics.request_completed(api_key.info().name, 0, started.elapsed());
        Response::from_bytes(frame.freeze())
    }))
}

pub async fn join_group(ctx: &RequestContext<'_>, request: JoinGroupRequest) -> Reply {
    let version = ctx.api_version;
    if !may_read_group(ctx, &request.group_id) {
        let body = join_error(ctx, &request.member_id, ErrorCode::GROUP_AUTHORIZATION_FAILED.code());
        return ctx.reply(ResponseBody::JoinGroup(Box::new(body)));
    }
    if request.group_id.is_empty() {
        let body = join_error(ctx, &request.member_id, ErrorCode::INVALID_GROUP_ID.code());
        return ctx.reply(ResponseBody::JoinGroup(Box::new(body)));
    }
    // Before the coordinator is looked for, as Kafka's group coordinator
    // service checks it: a member with a timeout no coordinator accepts
    // learns so from any broker.
    if !ctx.broker.groups.config().classic.accepts_session_timeout(request.session_timeout_ms) {
        let body = join_error(ctx, &request.member_id, ErrorCode::INVALID_SESSION_TIMEOUT.code());
        return ctx.reply(ResponseBody::JoinGroup(Box::new(body)));
    }
    if let Err(code) = ensure_offsets_topic(ctx).await {
        return ctx.reply(ResponseBody::JoinGroup(Box::new(join_error(ctx, &request.member_id, code))));
    }
    if not_coordinator(ctx, &request.group_id) {
        let body = join_error(ctx, &request.member_id, NOT_COORDINATOR);
        return ctx.reply(ResponseBody::JoinGroup(Box::new(body)));
    }
    let join = JoinRequest {
        member_id: request.member_id.clone(),
        group_instance_id: request.group_instance_id.clone(),
        client_id: ctx.client_id.unwrap_or_default().to_string(),
        client_host: format!("/{}", ctx.connection.peer.ip()),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: it is the session timeout.
        rebalance_timeout_ms: if version >= 1 { request.rebalance_timeout_ms } else { request.session_timeout_ms },
        protocol_type: request.protocol_type.clone(),
        protocols: request.protocols.iter().map(|p| (p.name.clone(), p.metadata.clone())).collect(),
        require_known_member_id: version >= 4,
    };
    let (waiter, receiver) = oneshot_waiter();
    match ctx.broker.groups.join(&ctx.broker.group_host(), &request.group_id, join, waiter) {
        Outcome::Now(response) => ctx.reply(ResponseBody::JoinGroup(Box::new(normalize_join(version, response)))),
        Outcome::Wait => {
            let gone = JoinGroupResponse {
                error_code: ErrorCode::UNKNOWN_MEMBER_ID.code(),
                generation_id: -1,
                member_id: request.member_id.clone(),
                ..Default::default()
            };
            later(ctx, receiver, gone, move |r| ResponseBody::JoinGroup(Box::new(normalize_join(version, r))))
        }
    }
}

pub fn sync_group(ctx: &RequestContext<'_>, request: SyncGroupRequest) -> Reply {
    let version = ctx.api_version;
    if !may_read_group(ctx, &request.group_id) {
        let body = SyncGroupResponse { error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.code(), ..Default::default() };
        return ctx.reply(ResponseBody::SyncGroup(Box::new(normalize_sync(version, body))));
    }
    if not_coordinator(ctx, &request.group_id) {
        let body = SyncGroupResponse { error_code: NOT_COORDINATOR, ..Default::default() };
        return ctx.reply(ResponseBody::SyncGroup(Box::new(normalize_sync(version, body))));
    }
    let assignments = request.assignments.iter().map(|a| (a.member_id.clone(), a.assignment.clone())).collect();
    let (waiter, receiver) = oneshot_waiter();
    let result = ctx.broker.groups.sync(
        &ctx.broker.group_host(),
        &request.group_id,
        &request.member_id,
        request.generation_id,
        assignments,
        waiter,
    );
    match result {
        Outcome::Now(response) => ctx.reply(ResponseBody::SyncGroup(Box::new(normalize_sync(version, response)))),
        Outcome::Wait => {
            let gone = SyncGroupResponse { error_code: ErrorCode::REBALANCE_IN_PROGRESS.code(), ..Default::default() };
            later(ctx, receiver, gone, move |r| ResponseBody::SyncGroup(Box::new(normalize_sync(version, r))))
        }
    }
}

pub fn heartbeat(ctx: &RequestContext<'_>, request: HeartbeatRequest) -> HeartbeatResponse {
    if !may_read_group(ctx, &request.group_id) {
        return HeartbeatResponse { error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.code(), ..Default::default() };
    }
    if not_coordinator(ctx, &request.group_id) {
        return HeartbeatResponse { error_code: NOT_COORDINATOR, ..Default::default() };
    }
    let error_code =
        ctx.broker.groups.heartbeat(&request.group_id, &request.member_id, request.generation_id, coordinator_time());
    HeartbeatResponse { error_code, ..Default::default() }
}

pub fn leave_group(ctx: &RequestContext<'_>, request: LeaveGroupRequest) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if ctx.api_version >= 3 {
        request.members.iter().map(|m| (m.member_id.clone(), m.group_instance_id.clone())).collect()
    } else {
        vec![(request.member_id.clone(), None)]
    };
    let left = if !may_read_group(ctx, &request.group_id) {
        Err(ErrorCode::GROUP_AUTHORIZATION_FAILED.code())
    } else if !not_coordinator(ctx, &request.group_id) {
        ctx.broker.groups.leave(&ctx.broker.group_host(), &request.group_id, &members)
    } else {
        Err(NOT_COORDINATOR)
    };
    match left {
        Err(code) => LeaveGroupResponse { error_code: code, ..Default::default() },
        Ok(results) if ctx.api_version >= 3 => LeaveGroupResponse {
            members: members
                .into_iter()
                .zip(results)
                .map(|((member_id, group_instance_id), error_code)| MemberResponse {
                    member_id,
                    group_instance_id,
                    error_code,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
        Ok(results) => LeaveGroupResponse {
            error_code: results.first().copied().unwrap_or(ErrorCode::NONE.code()),
            ..Default::default()
        },
    }
}

pub async fn offset_commit(ctx: &RequestContext<'_>, request: OffsetCommitRequest) -> OffsetCommitResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    let image = broker.metadata.image();
    let by_id = ctx.api_version >= 10;
    // Topics named by id (v10) are resolved to names; unknown ids fail.
    let offsets: Vec<(String, i32, i64, i32, Option<String>)> = request
        .topics
        .iter()
        .flat_map(|t| {
            let name = if by_id {
                image.topic_by_id(&t.topic_id).map(|i| i.name.clone()).unwrap_or_default()
            } else {
                t.name.clone()
            };
            t.partitions.iter().map(move |p| {
                (
                    name.clone(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata.clone(),
                )
            })
        })
        .collect();
    // Under an authorizer the topics it may not READ are refused, the
    // others committed.
    let denied: Vec<bool> =
        offsets.iter().map(|(topic, ..)| !access.allows(AclOperation::Read, ResourceType::Topic, topic)).collect();
    let permitted: Vec<_> = offsets.iter().zip(&denied).filter(|(_, d)| !**d).map(|(o, _)| o.clone()).collect();
    let codes = if !may_read_group(ctx, &request.group_id) {
        vec![ErrorCode::GROUP_AUTHORIZATION_FAILED.code(); offsets.len()]
    } else if request.group_id.is_empty() {
        vec![ErrorCode::INVALID_GROUP_ID.code(); offsets.len()]
    } else if let Err(code) = ensure_offsets_topic(ctx).await {
        vec![code; offsets.len()]
    } else if not_coordinator(ctx, &request.group_id) {
        vec![NOT_COORDINATOR; offsets.len()]
    } else {
        let committed = broker.groups.commit_offsets(
            &broker.group_host(),
            &request.group_id,
            &request.member_id,
            request.group_instance_id.as_deref(),
            request.generation_id_or_member_epoch,
            &permitted,
        );
        let mut committed = committed.into_iter();
        let topic_denied = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
        denied.iter().map(|&d| if d { topic_denied } else { committed.next().unwrap_or(topic_denied) }).collect()
    };
    let mut codes = codes.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|t| OffsetCommitResponseTopic {
            name: if by_id { String::new() } else { t.name.clone() },
            topic_id: if by_id { t.topic_id } else { Uuid::ZERO },
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let mut code = codes.next().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR.code());
                    if by_id
                        && code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()
                        && image.topic_by_id(&t.topic_id).is_none()
                    {
                        code = ErrorCode::UNKNOWN_TOPIC_ID.code();
                    }
                    OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code,
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    OffsetCommitResponse { topics, ..Default::default() }
}

fn committed_fields(committed: Option<CommittedOffset>) -> (i64, i32, Option<String>) {
    match committed {
        Some(c) => (c.offset, c.leader_epoch, Some(c.metadata)),
        None => (-1, -1, Some(String::new())),
    }
}

/// The partitions a request names per topic (None: every committed one).
type WantedOffsets = Option<Vec<(String, Vec<i32>)>>;

pub fn offset_fetch(ctx: &RequestContext<'_>, request: OffsetFetchRequest) -> OffsetFetchResponse {
    let access = Access::of(ctx);
    let image = ctx.broker.metadata.image();
    let by_id = ctx.api_version >= 10;
    // v0-7 ask for one group in top-level fields: it is answered as v8+
    // answers each group, then moved up.
    let asked: Vec<(&str, WantedOffsets)> = if ctx.api_version < 8 {
        let wanted = request
            .topics
            .as_ref()
            .map(|ts| ts.iter().map(|t| (t.name.clone(), t.partition_indexes.clone())).collect());
        vec![(request.group_id.as_str(), wanted)]
    } else {
        let name_of = |t: &krabka_protocol::offset_fetch_request::OffsetFetchRequestTopics| {
            if by_id {
                image.topic_by_id(&t.topic_id).map(|i| i.name.clone()).unwrap_or_default()
            } else {
                t.name.clone()
            }
        };
        request
            .groups
            .iter()
            .map(|g| {
                let wanted =
                    g.topics.as_ref().map(|ts| ts.iter().map(|t| (name_of(t), t.partition_indexes.clone())).collect());
                (g.group_id.as_str(), wanted)
            })
            .collect()
    };
    let groups: Vec<OffsetFetchResponseGroup> = asked
        .into_iter()
        .map(|(group_id, wanted)| {
            if !access.allows(AclOperation::Describe, ResourceType::Group, group_id) {
                let error_code = ErrorCode::GROUP_AUTHORIZATION_FAILED.code();
                return OffsetFetchResponseGroup { group_id: group_id.to_string(), error_code, ..Default::default() };
            }
            if not_coordinator(ctx, group_id) {
                let error_code = NOT_COORDINATOR;
                return OffsetFetchResponseGroup { group_id: group_id.to_string(), error_code, ..Default::default() };
            }
            let found = ctx.broker.groups.fetch_offsets(group_id, wanted.as_deref());
            // RequireStable (KIP-447): offsets a transaction may still change are not answered.
            let unstable =
                if request.require_stable { ctx.broker.groups.pending_partitions(group_id) } else { Vec::new() };
            // Topics it may not DESCRIBE: left out of "every committed
            // offset", refused where named.
            let may_describe = |name: &str| access.allows(AclOperation::Describe, ResourceType::Topic, name);
            let topics = found
                .into_iter()
                .filter(|(name, _)| wanted.is_some() || may_describe(name))
                .map(|(name, partitions)| {
                    let mut partitions: Vec<_> = partitions.into_iter().map(committed_partition).collect();
                    if !may_describe(&name) {
                        for p in &mut partitions {
                            (p.error_code, p.committed_offset) = (ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(), -1);
                        }
                    }
                    for p in partitions.iter_mut().filter(|p| unstable.contains(&(name.clone(), p.partition_index))) {
                        p.error_code = ErrorCode::UNSTABLE_OFFSET_COMMIT.code();
                        p.committed_offset = -1;
                    }
                    OffsetFetchResponseTopics {
                        topic_id: if by_id { image.topic(&name).map_or(Uuid::ZERO, |t| t.id) } else { Uuid::ZERO },
                        name: if by_id { String::new() } else { name },
                        partitions,
                        ..Default::default()
                    }
                })
                .collect();
            OffsetFetchResponseGroup { group_id: group_id.to_string(), topics, ..Default::default() }
        })
        .collect();
    if ctx.api_version >= 8 {
        return OffsetFetchResponse { groups, ..Default::default() };
    }
    let group = groups.into_iter().next().unwrap_or_default();
    // v2-7 carry a group's error at the top level (v0-1 have none).
    let error_code = if ctx.api_version >= 2 { group.error_code } else { ErrorCode::NONE.code() };
    let topics = group.topics.into_iter().map(top_level_topic).collect();
    OffsetFetchResponse { error_code, topics, ..Default::default() }
}

fn committed_partition((partition_index, committed): (i32, Option<CommittedOffset>)) -> OffsetFetchResponsePartitions {
    let (committed_offset, committed_leader_epoch, metadata) = committed_fields(committed);
    OffsetFetchResponsePartitions {
        partition_index,
        committed_offset,
        committed_leader_epoch,
        metadata,
        ..Default::default()
    }
}

/// A v8+ topic answer in the v0-7 (one group, top-level) shape.
fn top_level_topic(topic: OffsetFetchResponseTopics) -> OffsetFetchResponseTopic {
    let partitions = topic
        .partitions
        .into_iter()
        .map(|p| OffsetFetchResponsePartition {
            partition_index: p.partition_index,
            committed_offset: p.committed_offset,
            committed_leader_epoch: p.committed_leader_epoch,
            metadata: p.metadata,
            error_code: p.error_code,
            ..Default::default()
        })
        .collect();
    OffsetFetchResponseTopic { name: topic.name, partitions, ..Default::default() }
}

pub fn list_groups(ctx: &RequestContext<'_>, request: ListGroupsRequest) -> ListGroupsResponse {
    let access = Access::of(ctx);
    let states: Vec<String> = request.states_filter.iter().map(|s| s.to_ascii_lowercase()).collect();
    let types: Vec<String> = request.types_filter.iter().map(|s| s.to_ascii_lowercase()).collect();
    // DESCRIBE on the cluster lists every group, else those it may DESCRIBE.
    let every_group = allowed_on_cluster(ctx, AclOperation::Describe);
    let groups = ctx
        .broker
        .groups
        .list_groups()
        .into_iter()
        .filter(|(group_id, ..)| !not_coordinator(ctx, group_id))
        .filter(|(group_id, ..)| every_group || access.allows(AclOperation::Describe, ResourceType::Group, group_id))
        .filter(|(_, _, state, _)| states.is_empty() || states.contains(&state.to_ascii_lowercase()))
        .filter(|(_, _, _, kind)| types.is_empty() || types.iter().any(|t| t == kind))
        .map(|(group_id, protocol_type, state, kind)| ListedGroup {
            group_id,
            protocol_type,
            group_state: if ctx.api_version >= 4 { state } else { String::new() },
            group_type: if ctx.api_version >= 5 { kind.into() } else { String::new() },
            ..Default::default()
        })
        .collect();
    ListGroupsResponse { groups, ..Default::default() }
}

pub fn describe_groups(ctx: &RequestContext<'_>, request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let access = Access::of(ctx);
    let groups = request
        .groups
        .iter()
        .map(|group_id| match ctx.broker.groups.describe_group(group_id) {
            _ if !access.allows(AclOperation::Describe, ResourceType::Group, group_id) => DescribedGroup {
                group_id: group_id.clone(),
                error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.code(),
                ..Default::default()
            },
            _ if not_coordinator(ctx, group_id) => {
                DescribedGroup { group_id: group_id.clone(), error_code: NOT_COORDINATOR, ..Default::default() }
            }
            Some(described) => DescribedGroup {
                group_id: group_id.clone(),
                group_state: described.state,
                protocol_type: described.protocol_type,
                protocol_data: described.protocol_name,
                members: described
                    .members
                    .into_iter()
                    .map(
                        |(member_id, group_instance_id, client_id, client_host, member_metadata, member_assignment)| {
                            DescribedGroupMember {
                                member_id,
                                group_instance_id: if ctx.api_version >= 4 { group_instance_id } else { None },
                                client_id,
                                client_host,
                                member_metadata,
                                member_assignment,
                                ..Default::default()
                            }
                        },
                    )
                    .collect(),
                ..Default::default()
            },
            None => DescribedGroup {
                group_id: group_id.clone(),
                // v6 (KIP-1043) reports a missing group as an error.
                error_code: if ctx.api_version >= 6 {
                    ErrorCode::GROUP_ID_NOT_FOUND.code()
                } else {
                    ErrorCode::NONE.code()
                },
                error_message: (ctx.api_version >= 6).then(|| format!("Group {group_id} not found.")),
                group_state: GroupState::Dead.name().into(),
                ..Default::default()
            },
        })
        .collect();
    let mut groups: Vec<DescribedGroup> = groups;
    if ctx.api_version >= 3 && request.include_authorized_operations {
        for group in groups.iter_mut().filter(|g| g.error_code == ErrorCode::NONE.code()) {
            group.authorized_operations = access.authorized_operations(ResourceType::Group, &group.group_id);
        }
    }
    DescribeGroupsResponse { groups, ..Default::default() }
}

pub fn delete_groups(ctx: &RequestContext<'_>, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let access = Access::of(ctx);
    let results = request
        .groups_names
        .iter()
        .map(|group_id| krabka_protocol::delete_groups_response::DeletableGroupResult {
            group_id: group_id.clone(),
            error_code: if !access.allows(AclOperation::Delete, ResourceType::Group, group_id) {
                ErrorCode::GROUP_AUTHORIZATION_FAILED.code()
            } else if !not_coordinator(ctx, group_id) {
                ctx.broker.groups.delete_group(&ctx.broker.group_host(), group_id)
            } else {
                NOT_COORDINATOR
            },
            ..Default::default()
        })
        .collect();
    DeleteGroupsResponse { results, ..Default::default() }
}

pub fn offset_delete(ctx: &RequestContext<'_>, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let access = Access::of(ctx);
    let topics: Vec<(String, Vec<i32>)> = request
        .topics
        .iter()
        .map(|t| (t.name.clone(), t.partitions.iter().map(|p| p.partition_index).collect()))
        .collect();
    if !access.allows(AclOperation::Delete, ResourceType::Group, &request.group_id) {
        return OffsetDeleteResponse { error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.code(), ..Default::default() };
    }
    if not_coordinator(ctx, &request.group_id) {
        return OffsetDeleteResponse { error_code: NOT_COORDINATOR, ..Default::default() };
    }
    // Topics it may not READ are refused partition by partition, the
    // others passed to the coordinator (as Kafka's KafkaApis).
    let denied: Vec<bool> =
        topics.iter().map(|(name, _)| !access.allows(AclOperation::Read, ResourceType::Topic, name)).collect();
    let permitted: Vec<_> = topics.iter().zip(&denied).filter(|(_, d)| !**d).map(|(t, _)| t.clone()).collect();
    let (error_code, deleted) =
        ctx.broker.groups.delete_offsets(&ctx.broker.group_host(), &request.group_id, &permitted);
    if error_code != ErrorCode::NONE.code() {
        return OffsetDeleteResponse { error_code, ..Default::default() };
    }
    let refused = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
    let mut deleted_codes = deleted.into_iter();
    let codes: Vec<Vec<i16>> = topics
        .iter()
        .zip(&denied)
        .map(|((_, partitions), denied)| match denied {
            true => vec![refused; partitions.len()],
            false => deleted_codes.next().unwrap_or_default(),
        })
        .collect();
    OffsetDeleteResponse {
        topics: topics
            .into_iter()
            .zip(codes)
            .map(|((name, partitions), codes)| OffsetDeleteResponseTopic {
                name,
                partitions: partitions
                    .into_iter()
                    .zip(codes)
                    .map(|(partition_index, error_code)| OffsetDeleteResponsePartition {
                        partition_index,
                        error_code,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn assignment_from(partitions: &[krabka_protocol::consumer_group_heartbeat_request::TopicPartitions]) -> Assignment {
    let mut out = Assignment::new();
    for tp in partitions {
        out.entry(tp.topic_id).or_default().extend(tp.partitions.iter().copied());
    }
    out.retain(|_, set| !set.is_empty());
    out
}

pub async fn consumer_group_heartbeat(
    ctx: &RequestContext<'_>,
    request: krabka_protocol::ConsumerGroupHeartbeatRequest,
) -> krabka_protocol::ConsumerGroupHeartbeatResponse {
    let access = Access::of(ctx);
    use krabka_protocol::consumer_group_heartbeat_response::{Assignment as WireAssignment, TopicPartitions};
    use krabka_protocol::ConsumerGroupHeartbeatResponse;
    let fail = |code: i16, message: &str| ConsumerGroupHeartbeatResponse {
        error_code: code,
        error_message: Some(message.into()),
        member_id: None,
        member_epoch: -1,
        ..Default::default()
    };
    if !may_read_group(ctx, &request.group_id) {
        return fail(ErrorCode::GROUP_AUTHORIZATION_FAILED.code(), "Group authorization failed.");
    }
    let subscribed = request.subscribed_topic_names.iter().flatten();
    let mut unauthorized: Vec<&String> =
        subscribed.filter(|t| !access.allows(AclOperation::Describe, ResourceType::Topic, t)).collect();
    if !unauthorized.is_empty() {
        unauthorized.sort();
        let names = unauthorized.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ");
        let message = format!("The group has subscribed to topics that are not authorized: {names}");
        return fail(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(), &message);
    }
    if request.group_id.is_empty() {
        return fail(ErrorCode::INVALID_GROUP_ID.code(), "GroupId can't be empty.");
    }
    // v1 clients make their member id (KIP-1082); v0 ones get one on joining.
    let mut member_id = request.member_id.clone();
    if member_id.is_empty() {
        if ctx.api_version >= 1 || request.member_epoch != 0 {
            return fail(ErrorCode::INVALID_REQUEST.code(), "MemberId can't be empty.");
        }
        member_id = Uuid::random().map(|u| u.to_string()).unwrap_or_else(|_| format!("member-{}", ctx.correlation_id));
    }
    if let Err(code) = ensure_offsets_topic(ctx).await {
        return fail(code, "The coordinator is not available.");
    }
    if not_coordinator(ctx, &request.group_id) {
        return fail(NOT_COORDINATOR, NOT_COORDINATOR_MESSAGE);
    }
    let heartbeat = ConsumerHeartbeat {
        member_id,
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.clone(),
        rack_id: request.rack_id.clone(),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request.subscribed_topic_names.clone(),
        subscribed_topic_regex: request.subscribed_topic_regex.clone(),
        server_assignor: request.server_assignor.clone(),
        owned: request.topic_partitions.as_deref().map(assignment_from),
        client_id: ctx.client_id.unwrap_or_default().to_string(),
        client_host: format!("/{}", ctx.connection.peer.ip()),
    };
    let response = ctx.broker.groups.consumer_heartbeat(&ctx.broker.group_host(), &request.group_id, heartbeat);
    ConsumerGroupHeartbeatResponse {
        error_code: response.error_code,
        error_message: response.error_message,
        member_id: Some(response.member_id),
        member_epoch: response.member_epoch,
        heartbeat_interval_ms: ctx.broker.groups.config().consumer.heartbeat_interval_ms,
        assignment: response.assignment.map(|a| WireAssignment {
            topic_partitions: a
                .into_iter()
                .map(|(topic_id, set)| TopicPartitions {
                    topic_id,
                    partitions: set.into_iter().collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn consumer_group_describe(
    ctx: &RequestContext<'_>,
    request: krabka_protocol::ConsumerGroupDescribeRequest,
) -> krabka_protocol::ConsumerGroupDescribeResponse {
    use krabka_protocol::consumer_group_describe_response::{
        Assignment as WireAssignment, DescribedGroup, Member, TopicPartitions,
    };
    let access = Access::of(ctx);
    let image = ctx.broker.metadata.image();
    let wire = |assignment: &Assignment| WireAssignment {
        topic_partitions: assignment
            .iter()
            .map(|(id, set)| TopicPartitions {
                topic_id: *id,
                topic_name: image.topic_by_id(id).map(|t| t.name.clone()).unwrap_or_default(),
                partitions: set.iter().copied().collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let groups = request
        .group_ids
        .iter()
        .map(|group_id| {
            if !access.allows(AclOperation::Describe, ResourceType::Group, group_id) {
                return DescribedGroup {
                    group_id: group_id.clone(),
                    error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.code(),
                    authorized_operations: i32::MIN,
                    ..Default::default()
                };
            }
            if not_coordinator(ctx, group_id) {
                return DescribedGroup {
                    group_id: group_id.clone(),
                    error_code: NOT_COORDINATOR,
                    error_message: Some(NOT_COORDINATOR_MESSAGE.into()),
                    authorized_operations: i32::MIN,
                    ..Default::default()
                };
            }
            let described = ctx.broker.groups.with_consumer_group(group_id, |group| DescribedGroup {
                group_id: group_id.clone(),
                group_state: group.state_name().into(),
                group_epoch: group.group_epoch,
                assignment_epoch: group.assignment_epoch,
                assignor_name: group.assignor.clone(),
                members: group
                    .members
                    .values()
                    .map(|m| Member {
                        member_id: m.member_id.clone(),
                        instance_id: m.instance_id.clone(),
                        rack_id: m.rack_id.clone(),
                        member_epoch: m.member_epoch,
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
                        subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                        assignment: wire(&m.assigned),
                        target_assignment: wire(group.target.get(&m.member_id).unwrap_or(&Assignment::new())),
                        // KIP-1099: 0 for classic members of a migrated group, 1 for consumer-protocol ones.
                        member_type: if ctx.api_version < 1 {
                            -1
                        } else if m.classic.is_some() {
                            0
                        } else {
                            1
                        },
                        ..Default::default()
                    })
                    .collect(),
                authorized_operations: if request.include_authorized_operations {
                    access.authorized_operations(ResourceType::Group, group_id)
                } else {
                    i32::MIN
                },
                ..Default::default()
            });
            described.unwrap_or_else(|(code, message)| DescribedGroup {
                group_id: group_id.clone(),
                error_code: code,
                error_message: Some(message),
                group_state: GroupState::Dead.name().into(),
                authorized_operations: i32::MIN,
                ..Default::default()
            })
        })
        .collect();
    krabka_protocol::ConsumerGroupDescribeResponse { groups, ..Default::default() }
}
