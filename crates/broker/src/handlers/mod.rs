//! Request dispatch: decode the body, call the API's handler, encode the
//! response frame (or, on a node that is not the active controller,
//! forward a request only the controller decides). One module per API
//! family; each handler takes the decoded request and returns the
//! response body.

pub mod acls;
pub mod admin;
pub mod api_versions;
pub mod client_quotas;
pub mod configs;
pub mod controller;
pub mod features;
pub mod fetch;
pub mod forwarded;
pub mod groups;
pub mod leader_hints;
pub mod list_offsets;
pub mod log_dirs;
pub mod metadata;
pub mod produce;
pub mod producer_ids;
pub mod recompress;
pub mod scram_credentials;
pub mod topics;
pub mod transactions;

use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use krabka_protocol::frame::RequestFrame;
use krabka_protocol::ErrorCode;
use krabka_protocol::{ApiKey, RequestBody, ResponseBody};

use crate::active_controller::{self, ForwardError};
use crate::broker::Broker;
use crate::observability::FailureKind;
use crate::request::{Close, ConnectionInfo, Reply, RequestContext, Response};
use crate::wire::{encode_frame, FORWARDED_APIS};

pub use api_versions::supported_apis;

/// The handlers of the requests only the controller decides
/// (`FORWARDED_APIS`), for the client listener and for the controller
/// listener's direct requests; any other request is handed back.
pub async fn forwardable(ctx: &RequestContext<'_>, body: RequestBody) -> Result<ResponseBody, RequestBody> {
    // The cluster-wide operations, refused whole without their ACL.
    if let Some(operation) = cluster_operation(&body) {
        if !crate::authorization::allowed_on_cluster(ctx, operation) {
            let (code, message) = crate::authorization::cluster_denied();
            let refused =
                forwarded::error_response(&body, ctx.api_version, ErrorCode::from(code), &message.unwrap_or_default());
            return refused.ok_or(body);
        }
    }
    Ok(match body {
        RequestBody::CreateTopics(r) => ResponseBody::CreateTopics(Box::new(topics::create_topics(ctx, *r).await)),
        RequestBody::DeleteTopics(r) => ResponseBody::DeleteTopics(Box::new(topics::delete_topics(ctx, *r).await)),
        RequestBody::CreatePartitions(r) => {
            ResponseBody::CreatePartitions(Box::new(topics::create_partitions(ctx, *r).await))
        }
        RequestBody::AlterConfigs(r) => ResponseBody::AlterConfigs(Box::new(configs::alter(ctx, *r).await)),
        RequestBody::IncrementalAlterConfigs(r) => {
            ResponseBody::IncrementalAlterConfigs(Box::new(configs::incremental_alter(ctx, *r).await))
        }
        RequestBody::DescribeQuorum(r) => ResponseBody::DescribeQuorum(Box::new(admin::describe_quorum(ctx, *r).await)),
        RequestBody::ElectLeaders(r) => ResponseBody::ElectLeaders(Box::new(topics::elect_leaders(ctx, *r).await)),
        RequestBody::AlterPartitionReassignments(r) => {
            ResponseBody::AlterPartitionReassignments(Box::new(topics::alter_partition_reassignments(ctx, *r).await))
        }
        RequestBody::ListPartitionReassignments(r) => {
            ResponseBody::ListPartitionReassignments(Box::new(topics::list_partition_reassignments(ctx, *r).await))
        }
        RequestBody::UpdateFeatures(r) => {
            ResponseBody::UpdateFeatures(Box::new(features::update_features(ctx, *r).await))
        }
        RequestBody::AlterClientQuotas(r) => {
            ResponseBody::AlterClientQuotas(Box::new(client_quotas::alter(ctx, *r).await))
        }
        RequestBody::AlterUserScramCredentials(r) => {
            ResponseBody::AlterUserScramCredentials(Box::new(scram_credentials::alter(ctx, *r).await))
        }
        RequestBody::CreateAcls(r) => ResponseBody::CreateAcls(Box::new(acls::create(ctx, *r).await)),
        RequestBody::DeleteAcls(r) => ResponseBody::DeleteAcls(Box::new(acls::delete(ctx, *r).await)),
        other => return Err(other),
    })
}

/// The operation on the cluster a forwarded request needs, for those
/// Kafka authorizes on the cluster as a whole.
fn cluster_operation(body: &RequestBody) -> Option<krabka_security::acl::AclOperation> {
    use krabka_security::acl::AclOperation::{Alter, Describe};
    match body {
        RequestBody::ElectLeaders(_) | RequestBody::AlterPartitionReassignments(_) | RequestBody::UpdateFeatures(_) => {
            Some(Alter)
        }
        RequestBody::ListPartitionReassignments(_) | RequestBody::DescribeQuorum(_) => Some(Describe),
        _ => None,
    }
}

fn size_prefixed(frame: &[u8]) -> Bytes {
    let mut framed = BytesMut::with_capacity(4 + frame.len());
    framed.put_u32(frame.len() as u32);
    framed.extend_from_slice(frame);
    framed.freeze()
}

fn is_supported(api_key: ApiKey, version: i16) -> bool {
    supported_apis().iter().any(|&(key, min, max)| key == api_key && (min..=max).contains(&version))
}

/// The request's body; one that does not decode closes the connection,
/// as Kafka drops the connection of a request it cannot parse.
fn decode_body(request: &RequestFrame) -> Result<RequestBody, Close> {
    request.decode_body().map_err(|e| {
        let (api_key, api_version) = (request.api_key, request.api_version());
        Close::failure(
            FailureKind::UndecodableRequest,
            format!("cannot decode {api_key:?} v{api_version} request: {e}"),
        )
    })
}

pub async fn handle(broker: &Arc<Broker>, connection: &ConnectionInfo, request: RequestFrame) -> Result<Reply, Close> {
    let api_key = request.api_key;
    let api_version = request.api_version();
    if !is_supported(api_key, api_version) {
        if api_key == ApiKey::ApiVersions {
            return unsupported_version(broker, api_key, api_version, request.correlation_id());
        }
        // Kafka drops the connection of a request it cannot parse.
        return Err(Close::failure(
            FailureKind::UnsupportedRequest,
            format!("{api_key:?} v{api_version} is not supported"),
        ));
    }
    if FORWARDED_APIS.contains(&api_key) && !connection.forwarded && broker.metadata.defers_to_another_controller() {
        if let Some(reply) = forward(broker, connection, &request).await? {
            return Ok(reply);
        }
    }
    let body = decode_body(&request)?;
    let ctx = RequestContext::of(broker, connection, &request);
    let body = match forwardable(&ctx, body).await {
        Ok(response) => return Ok(ctx.reply(response)),
        Err(body) => body,
    };
    let response = match body {
        RequestBody::Produce(r) => return Ok(produce::handle(&ctx, *r).await),
        RequestBody::Fetch(r) => return Ok(fetch::handle(&ctx, *r)),
        RequestBody::ApiVersions(_) => ResponseBody::ApiVersions(Box::new(api_versions::response_with_features(
            &broker.metadata.image(),
            broker.metadata.quorum().map_or(0, |q| q.kraft_version()),
            api_version,
        ))),
        RequestBody::Metadata(r) => ResponseBody::Metadata(Box::new(metadata::handle(&ctx, *r).await)),
        RequestBody::ListOffsets(r) => ResponseBody::ListOffsets(Box::new(list_offsets::handle(&ctx, *r))),
        RequestBody::DescribeTopicPartitions(r) => {
            ResponseBody::DescribeTopicPartitions(Box::new(topics::describe_topic_partitions(&ctx, *r)))
        }
        RequestBody::InitProducerId(r) => ResponseBody::InitProducerId(Box::new(producer_ids::handle(&ctx, *r).await)),
        RequestBody::DescribeConfigs(r) => ResponseBody::DescribeConfigs(Box::new(configs::describe(&ctx, *r))),
        RequestBody::DeleteRecords(r) => ResponseBody::DeleteRecords(Box::new(admin::delete_records(&ctx, *r))),
        RequestBody::DescribeCluster(r) => ResponseBody::DescribeCluster(Box::new(admin::describe_cluster(&ctx, *r))),
        RequestBody::DescribeClientQuotas(r) => {
            ResponseBody::DescribeClientQuotas(Box::new(client_quotas::describe(&ctx, *r)))
        }
        RequestBody::DescribeAcls(r) => ResponseBody::DescribeAcls(Box::new(acls::describe(&ctx, *r))),
        RequestBody::DescribeUserScramCredentials(r) => {
            ResponseBody::DescribeUserScramCredentials(Box::new(scram_credentials::describe(&ctx, *r)))
        }
        RequestBody::DescribeLogDirs(r) => {
            ResponseBody::DescribeLogDirs(Box::new(log_dirs::describe_log_dirs(&ctx, *r)))
        }
        RequestBody::AlterReplicaLogDirs(r) => {
            ResponseBody::AlterReplicaLogDirs(Box::new(log_dirs::alter_replica_log_dirs(&ctx, *r)))
        }
        RequestBody::OffsetForLeaderEpoch(r) => {
            ResponseBody::OffsetForLeaderEpoch(Box::new(admin::offset_for_leader_epoch(&ctx, *r)))
        }
        RequestBody::DescribeProducers(r) => {
            ResponseBody::DescribeProducers(Box::new(admin::describe_producers(&ctx, *r)))
        }
        RequestBody::FindCoordinator(r) => {
            ResponseBody::FindCoordinator(Box::new(groups::find_coordinator(&ctx, *r).await))
        }
        RequestBody::JoinGroup(r) => return Ok(groups::join_group(&ctx, *r).await),
        RequestBody::SyncGroup(r) => return Ok(groups::sync_group(&ctx, *r)),
        RequestBody::Heartbeat(r) => ResponseBody::Heartbeat(Box::new(groups::heartbeat(&ctx, *r))),
        RequestBody::LeaveGroup(r) => ResponseBody::LeaveGroup(Box::new(groups::leave_group(&ctx, *r))),
        RequestBody::OffsetCommit(r) => ResponseBody::OffsetCommit(Box::new(groups::offset_commit(&ctx, *r).await)),
        RequestBody::OffsetFetch(r) => ResponseBody::OffsetFetch(Box::new(groups::offset_fetch(&ctx, *r))),
        RequestBody::ListGroups(r) => ResponseBody::ListGroups(Box::new(groups::list_groups(&ctx, *r))),
        RequestBody::DescribeGroups(r) => ResponseBody::DescribeGroups(Box::new(groups::describe_groups(&ctx, *r))),
        RequestBody::DeleteGroups(r) => ResponseBody::DeleteGroups(Box::new(groups::delete_groups(&ctx, *r))),
        RequestBody::OffsetDelete(r) => ResponseBody::OffsetDelete(Box::new(groups::offset_delete(&ctx, *r))),
        RequestBody::ConsumerGroupHeartbeat(r) => {
            ResponseBody::ConsumerGroupHeartbeat(Box::new(groups::consumer_group_heartbeat(&ctx, *r).await))
        }
        RequestBody::ConsumerGroupDescribe(r) => {
            ResponseBody::ConsumerGroupDescribe(Box::new(groups::consumer_group_describe(&ctx, *r)))
        }
        RequestBody::AddPartitionsToTxn(r) => {
            ResponseBody::AddPartitionsToTxn(Box::new(transactions::add_partitions_to_txn(&ctx, *r)))
        }
        RequestBody::EndTxn(r) => ResponseBody::EndTxn(Box::new(transactions::end_txn(&ctx, *r).await)),
        RequestBody::AddOffsetsToTxn(r) => {
            ResponseBody::AddOffsetsToTxn(Box::new(transactions::add_offsets_to_txn(&ctx, *r).await))
        }
        RequestBody::TxnOffsetCommit(r) => {
            ResponseBody::TxnOffsetCommit(Box::new(transactions::txn_offset_commit(&ctx, *r).await))
        }
        RequestBody::WriteTxnMarkers(r) => {
            ResponseBody::WriteTxnMarkers(Box::new(transactions::write_txn_markers(&ctx, *r).await))
        }
        RequestBody::DescribeTransactions(r) => {
            ResponseBody::DescribeTransactions(Box::new(transactions::describe_transactions(&ctx, *r)))
        }
        RequestBody::ListTransactions(r) => {
            ResponseBody::ListTransactions(Box::new(transactions::list_transactions(&ctx, *r)))
        }
        other => {
            return Err(Close::failure(FailureKind::UnsupportedRequest, format!("{:?} is not served", other.api_key())))
        }
    };
    Ok(ctx.reply(response))
}

/// How the active controller answered a forwarded request.
enum Forwarded {
    /// Its response frame (header and body).
    Answered(Bytes),
    /// It refused the Envelope with this error.
    Refused(i16),
}

/// A request only the active controller decides, on a node that is not
/// it: forwarded there, after a config change's checks that only the
/// broker it was sent to can make. None when no controller took it (the
/// caller answers it here: NOT_CONTROLLER, which the client retries).
async fn forward(
    broker: &Arc<Broker>,
    connection: &ConnectionInfo,
    request: &RequestFrame,
) -> Result<Option<Reply>, Close> {
    if matches!(request.api_key, ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs) {
        return forward_config_change(broker, connection, request).await;
    }
    forward_whole(broker, connection, request).await
}

/// Kafka's broker preprocessing of AlterConfigs and IncrementalAlterConfigs
/// (`configs::preprocess`): what it refuses is answered here, the rest
/// forwarded, and the two merged into one response.
async fn forward_config_change(
    broker: &Arc<Broker>,
    connection: &ConnectionInfo,
    request: &RequestFrame,
) -> Result<Option<Reply>, Close> {
    let (api_key, api_version) = (request.api_key, request.api_version());
    let ctx = RequestContext::of(broker, connection, request);
    let body = decode_body(request)?;
    let (rest, refusals) = match configs::preprocess(&ctx, body) {
        configs::Preprocessed::Whole => return forward_whole(broker, connection, request).await,
        configs::Preprocessed::Refused(response) => return Ok(Some(ctx.reply(response))),
        configs::Preprocessed::Rest(rest, refusals) => (rest, refusals),
    };
    let mut body = BytesMut::new();
    rest.encode(&mut body, api_version)
        .map_err(|e| Close::routine(format!("re-encoding {api_key:?} to forward: {e}")))?;
    let frame = RequestFrame { api_key, header: request.header.clone(), body: body.freeze() };
    match forward_frame(broker, connection, &frame).await? {
        None => Ok(None),
        Some(Forwarded::Refused(code)) => refused_by_controller(broker, request, code).map(Some),
        Some(Forwarded::Answered(mut response)) => {
            let answer = krabka_protocol::frame::parse_response_header(api_key, api_version, &mut response)
                .and_then(|_| ResponseBody::decode(api_key, api_version, &mut response))
                .map_err(|e| Close::routine(format!("the active controller's {api_key:?} answer: {e}")))?;
            Ok(Some(ctx.reply(configs::merged(refusals, answer))))
        }
    }
}

/// Forwards the request as the client sent it.
async fn forward_whole(
    broker: &Arc<Broker>,
    connection: &ConnectionInfo,
    request: &RequestFrame,
) -> Result<Option<Reply>, Close> {
    let started = Instant::now();
    Ok(match forward_frame(broker, connection, request).await? {
        None => None,
        Some(Forwarded::Answered(response)) => {
            broker.metrics.request_completed(request.api_key.info().name, 0, started.elapsed());
            Some(Reply::Now(Response::from_bytes(size_prefixed(&response))))
        }
        Some(Forwarded::Refused(code)) => Some(refused_by_controller(broker, request, code)?),
    })
}

/// Sends `request` to the active controller in an Envelope.
async fn forward_frame(
    broker: &Arc<Broker>,
    connection: &ConnectionInfo,
    request: &RequestFrame,
) -> Result<Option<Forwarded>, Close> {
    let api_key = request.api_key;
    match active_controller::forward(broker, request, (connection.peer, &connection.principal)).await {
        Ok(response) => Ok(Some(Forwarded::Answered(response))),
        // No controller took it: answered here, NOT_CONTROLLER, which
        // the client retries.
        Err(ForwardError::NotTaken(reason)) => {
            tracing::debug!(%reason, ?api_key, "no active controller took the forwarded request");
            Ok(None)
        }
        // It may have been carried out: the client sees a lost
        // connection, as when a broker dies mid-request, and retries.
        Err(ForwardError::Failed(reason)) => {
            Err(Close::routine(format!("forwarding {api_key:?} to the active controller: {reason}")))
        }
        Err(ForwardError::Refused(code)) => Ok(Some(Forwarded::Refused(code))),
    }
}

/// The active controller refused the Envelope (not NOT_CONTROLLER): the
/// client gets UNKNOWN_SERVER_ERROR in its own request's response, as
/// from Kafka's forwarding broker.
fn refused_by_controller(broker: &Arc<Broker>, request: &RequestFrame, code: i16) -> Result<Reply, Close> {
    const MESSAGE: &str = "The server experienced an unexpected error when processing the request.";
    let (api_key, api_version, correlation_id) = (request.api_key, request.api_version(), request.correlation_id());
    tracing::warn!(?api_key, code, "the active controller refused a forwarded request's Envelope");
    let body = decode_body(request)?;
    let response = forwarded::error_response(&body, api_version, ErrorCode::UNKNOWN_SERVER_ERROR, MESSAGE)
        .expect("only forwarded APIs are forwarded");
    broker.metrics.request_completed(api_key.info().name, ErrorCode::UNKNOWN_SERVER_ERROR.code(), Default::default());
    Ok(Reply::Now(Response::from_bytes(encode_frame(api_key, api_version, correlation_id, &response).freeze())))
}

/// ApiVersions at a version the broker does not know: answer v0 with
/// UNSUPPORTED_VERSION and the supported ranges, so the client can retry
/// with one it shares (KIP-511). Any other API: close, as Kafka does.
pub fn unsupported_version(
    broker: &Arc<Broker>,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
) -> Result<Reply, Close> {
    if api_key != ApiKey::ApiVersions {
        return Err(Close::failure(
            FailureKind::UnsupportedRequest,
            format!("{api_key:?} v{api_version} is not supported"),
        ));
    }
    let body = ResponseBody::ApiVersions(Box::new(api_versions::response(ErrorCode::UNSUPPORTED_VERSION.code())));
    broker.metrics.request_completed("ApiVersions", ErrorCode::UNSUPPORTED_VERSION.code(), Default::default());
    Ok(Reply::Now(Response::from_bytes(encode_frame(api_key, 0, correlation_id, &body).freeze())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of served APIs in docs/compatibility.md is the one this
    /// code serves (the test prints the right table when they differ).
    #[test]
    fn compatibility_doc_lists_the_served_apis() {
        let mut table = String::from("| key | API | versions served | Kafka 4.3.1 |\n|---|---|---|---|\n");
        for (key, min, max) in supported_apis() {
            let info = key.info();
            table.push_str(&format!(
                "| {} | {} | {min}-{max} | {}-{} |\n",
                key as i16, info.name, info.min_version, info.max_version
            ));
        }
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/compatibility.md")).unwrap();
        let start = doc.find("<!-- broker-apis:start -->\n").map(|i| i + "<!-- broker-apis:start -->\n".len());
        let end = doc.find("<!-- broker-apis:end -->");
        let current = match (start, end) {
            (Some(start), Some(end)) if start <= end => &doc[start..end],
            _ => "",
        };
        assert_eq!(current, table, "docs/compatibility.md broker-apis table is stale; expected:\n{table}");
    }
}
