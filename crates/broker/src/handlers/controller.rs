//! The controller's own APIs, served on the controller listener to brokers
//! (their own and other nodes'): BrokerRegistration, BrokerHeartbeat,
//! AlterPartition, AllocateProducerIds and ControllerRegistration, translated to and from
//! the cluster control's calls (NOT_CONTROLLER on a node that does not
//! lead); DescribeCluster, which lists the registered controllers to
//! clients bootstrapping from the controllers (KIP-919); and Envelope: a
//! client request a broker forwarded, answered by the client handlers as
//! if the client had sent it here.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use krabka_protocol::frame::RequestFrame;

use krabka_controller::brokers::HeartbeatOutcome;
use krabka_controller::controllers::CONTROLLER_REGISTRATION_LEVEL;
use krabka_metadata::features::METADATA_VERSION;
use krabka_protocol::describe_cluster_response::DescribeClusterBroker;
use krabka_protocol::{
    AddRaftVoterResponse, ApiKey, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
    FetchSnapshotResponse, RemoveRaftVoterResponse, UpdateRaftVoterResponse, VoteResponse,
};
use krabka_protocol::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, AlterPartitionRequest, AlterPartitionResponse,
    AssignReplicasToDirsRequest, AssignReplicasToDirsResponse, BrokerHeartbeatRequest, BrokerHeartbeatResponse,
    BrokerRegistrationRequest, BrokerRegistrationResponse, ControllerRegistrationRequest,
    ControllerRegistrationResponse, DefaultPrincipalData, DescribeClusterRequest, DescribeClusterResponse,
    EnvelopeRequest, EnvelopeResponse, ErrorCode, RequestBody, ResponseBody,
};
use krabka_security::acl::AclOperation;

use super::{api_versions, forwarded};
use crate::broker::Broker;
use crate::cluster_control::ClusterControl;
use crate::quorum::{Caller, ControllerGate, ControllerHandler};
use crate::request::{Chunk, ConnectionInfo, RequestContext};
use crate::wire::{ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS, FORWARDED_APIS};
use krabka_security::KafkaPrincipal;

/// The handler the controller listener hands its controller APIs to.
pub fn handler(control: Arc<ClusterControl>, broker: Arc<Broker>) -> ControllerHandler {
    Arc::new(move |request, version, caller| {
        let control = Arc::clone(&control);
        let broker = Arc::clone(&broker);
        Box::pin(async move {
            match request {
                RequestBody::BrokerRegistration(r) => {
                    Some(ResponseBody::BrokerRegistration(Box::new(register(&control, &r).await)))
                }
                RequestBody::BrokerHeartbeat(r) => {
                    Some(ResponseBody::BrokerHeartbeat(Box::new(heartbeat(&control, &r).await)))
                }
                RequestBody::AlterPartition(r) => {
                    Some(ResponseBody::AlterPartition(Box::new(alter_partition(&control, &r, version).await)))
                }
                RequestBody::AssignReplicasToDirs(r) => {
                    Some(ResponseBody::AssignReplicasToDirs(Box::new(assign_replicas_to_dirs(&control, &r).await)))
                }
                RequestBody::AllocateProducerIds(r) => {
                    Some(ResponseBody::AllocateProducerIds(Box::new(allocate_producer_ids(&control, &r).await)))
                }
                RequestBody::Envelope(r) => Some(ResponseBody::Envelope(Box::new(envelope(&broker, *r).await))),
                RequestBody::ControllerRegistration(r) => {
                    Some(ResponseBody::ControllerRegistration(Box::new(register_controller(&control, &r).await)))
                }
                RequestBody::DescribeCluster(r) => {
                    Some(ResponseBody::DescribeCluster(Box::new(describe_controllers(&broker, &r, (version, &caller)))))
                }
                // The finalized feature levels of this node's image, for the
                // listener's own ApiVersions answer.
                RequestBody::ApiVersions(_) => {
                    let kraft_version = broker.metadata.quorum().map_or(0, |q| q.kraft_version());
                    let image = broker.metadata.image();
                    let answer = api_versions::response_with_features(&image, kraft_version, version);
                    Some(ResponseBody::ApiVersions(Box::new(answer)))
                }
                forwardable => direct(&broker, forwardable, version, caller).await,
            }
        })
    })
}

/// The controller listener's authorization under an authorizer (None
/// without one), as Kafka's ControllerApis checks it: CLUSTER_ACTION on
/// the cluster for raft's and the brokers' requests and for an Envelope
/// (the forwarded request is then checked as its own principal), DESCRIBE
/// for DescribeQuorum, ALTER for voter changes and DescribeCluster. The
/// client APIs served here are checked by their handlers, as the caller.
pub fn gate(broker: Arc<Broker>) -> Option<ControllerGate> {
    broker.config.security.authorizer.as_ref()?;
    Some(Arc::new(move |request: &RequestBody, version: i16, caller: &Caller| {
        let operation = required_operation(request.api_key())?;
        if crate::authorization::cluster_allows(&broker, (&caller.principal, caller.address), operation) {
            return None;
        }
        let message = format!("Principal {} may not {operation:?} the cluster", caller.principal);
        refusal(request, version, &message)
    }))
}

/// The cluster operation a controller-listener API needs, if it is
/// checked here.
fn required_operation(api_key: ApiKey) -> Option<AclOperation> {
    match api_key {
        ApiKey::Vote
        | ApiKey::BeginQuorumEpoch
        | ApiKey::EndQuorumEpoch
        | ApiKey::Fetch
        | ApiKey::FetchSnapshot
        | ApiKey::UpdateRaftVoter
        | ApiKey::BrokerRegistration
        | ApiKey::BrokerHeartbeat
        | ApiKey::AlterPartition
        | ApiKey::AllocateProducerIds
        | ApiKey::AssignReplicasToDirs
        | ApiKey::ControllerRegistration
        | ApiKey::Envelope => Some(AclOperation::ClusterAction),
        ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter | ApiKey::DescribeCluster => Some(AclOperation::Alter),
        _ => None,
    }
}

/// `request` refused with CLUSTER_AUTHORIZATION_FAILED, as Kafka's error
/// response for it.
fn refusal(request: &RequestBody, version: i16, message: &str) -> Option<ResponseBody> {
    let error_code = ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code();
    let error_message = Some(message.to_string());
    Some(match request {
        RequestBody::Vote(_) => ResponseBody::Vote(Box::new(VoteResponse { error_code, ..Default::default() })),
        RequestBody::BeginQuorumEpoch(_) => {
            ResponseBody::BeginQuorumEpoch(Box::new(BeginQuorumEpochResponse { error_code, ..Default::default() }))
        }
        RequestBody::EndQuorumEpoch(_) => {
            ResponseBody::EndQuorumEpoch(Box::new(EndQuorumEpochResponse { error_code, ..Default::default() }))
        }
        RequestBody::Fetch(_) => ResponseBody::Fetch(Box::new(FetchResponse { error_code, ..Default::default() })),
        RequestBody::FetchSnapshot(_) => {
            ResponseBody::FetchSnapshot(Box::new(FetchSnapshotResponse { error_code, ..Default::default() }))
        }
        RequestBody::UpdateRaftVoter(_) => {
            ResponseBody::UpdateRaftVoter(Box::new(UpdateRaftVoterResponse { error_code, ..Default::default() }))
        }
        RequestBody::AddRaftVoter(_) => ResponseBody::AddRaftVoter(Box::new(AddRaftVoterResponse {
            error_code,
            error_message,
            ..Default::default()
        })),
        RequestBody::RemoveRaftVoter(_) => ResponseBody::RemoveRaftVoter(Box::new(RemoveRaftVoterResponse {
            error_code,
            error_message,
            ..Default::default()
        })),
        RequestBody::BrokerRegistration(_) => ResponseBody::BrokerRegistration(Box::new(BrokerRegistrationResponse {
            error_code,
            broker_epoch: -1,
            ..Default::default()
        })),
        RequestBody::BrokerHeartbeat(_) => ResponseBody::BrokerHeartbeat(Box::new(BrokerHeartbeatResponse {
            error_code,
            is_fenced: true,
            ..Default::default()
        })),
        RequestBody::AlterPartition(_) => {
            ResponseBody::AlterPartition(Box::new(AlterPartitionResponse { error_code, ..Default::default() }))
        }
        RequestBody::AllocateProducerIds(_) => {
            ResponseBody::AllocateProducerIds(Box::new(AllocateProducerIdsResponse {
                error_code,
                ..Default::default()
            }))
        }
        RequestBody::AssignReplicasToDirs(_) => {
            ResponseBody::AssignReplicasToDirs(Box::new(AssignReplicasToDirsResponse {
                error_code,
                ..Default::default()
            }))
        }
        RequestBody::ControllerRegistration(_) => {
            ResponseBody::ControllerRegistration(Box::new(ControllerRegistrationResponse {
                error_code,
                error_message,
                ..Default::default()
            }))
        }
        RequestBody::Envelope(_) => {
            ResponseBody::Envelope(Box::new(EnvelopeResponse { error_code, ..Default::default() }))
        }
        RequestBody::DescribeCluster(_) => ResponseBody::DescribeCluster(Box::new(DescribeClusterResponse {
            error_code,
            error_message,
            endpoint_type: ENDPOINT_BROKERS,
            cluster_authorized_operations: i32::MIN,
            ..Default::default()
        })),
        other => return forwarded::error_response(other, version, ErrorCode::CLUSTER_AUTHORIZATION_FAILED, message),
    })
}

async fn register(control: &ClusterControl, request: &BrokerRegistrationRequest) -> BrokerRegistrationResponse {
    match control.register(request).await {
        Ok(broker_epoch) => BrokerRegistrationResponse { broker_epoch, ..Default::default() },
        Err(e) => BrokerRegistrationResponse { error_code: e.code, broker_epoch: -1, ..Default::default() },
    }
}

async fn register_controller(
    control: &ClusterControl,
    request: &ControllerRegistrationRequest,
) -> ControllerRegistrationResponse {
    match control.register_controller(request).await {
        Ok(()) => ControllerRegistrationResponse::default(),
        Err(e) => {
            ControllerRegistrationResponse { error_code: e.code, error_message: Some(e.message), ..Default::default() }
        }
    }
}

/// DescribeCluster on the controller listener (KIP-919), as Kafka's
/// controller answers it: the registered controllers, each on its endpoint
/// of this listener, and the active controller's id (-1 if it has not
/// registered); a request for the brokers' endpoint type is refused.
fn describe_controllers(
    broker: &Broker,
    request: &DescribeClusterRequest,
    (version, caller): (i16, &Caller),
) -> DescribeClusterResponse {
    let refuse = |code: ErrorCode, message: String| DescribeClusterResponse {
        // v0 has no endpoint types: its refusals are INVALID_REQUEST.
        error_code: if version == 0 { ErrorCode::INVALID_REQUEST.code() } else { code.code() },
        error_message: Some(message),
        // Kafka's error answers keep the field's default.
        endpoint_type: ENDPOINT_BROKERS,
        cluster_authorized_operations: i32::MIN,
        ..Default::default()
    };
    // As Kafka's controller: the metadata.version first, then the type.
    let image = broker.metadata.image();
    let level = image.features.get(METADATA_VERSION).copied().unwrap_or(0);
    if level < CONTROLLER_REGISTRATION_LEVEL {
        let message = "Direct-to-controller communication is not supported with the current MetadataVersion.";
        return refuse(ErrorCode::UNSUPPORTED_VERSION, message.into());
    }
    match request.endpoint_type {
        ENDPOINT_CONTROLLERS if version >= 1 => {}
        ENDPOINT_BROKERS => {
            let message = "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type \
                           BROKER";
            return refuse(ErrorCode::MISMATCHED_ENDPOINT_TYPE, message.into());
        }
        other => return refuse(ErrorCode::UNSUPPORTED_ENDPOINT_TYPE, format!("Unsupported endpoint type {other}")),
    }
    let listener = broker.config.controller_listener_names.first().map(String::as_str).unwrap_or_default();
    let brokers: Vec<DescribeClusterBroker> = image
        .controllers
        .values()
        .filter_map(|r| {
            let endpoint = r.end_points.iter().find(|e| e.name == listener)?;
            Some(DescribeClusterBroker {
                broker_id: r.controller_id,
                host: endpoint.host.clone(),
                port: i32::from(endpoint.port),
                ..Default::default()
            })
        })
        .collect();
    let leader = broker.metadata.quorum().and_then(|q| q.status().borrow().leader_id);
    let controller_id = leader.filter(|id| brokers.iter().any(|b| b.broker_id == *id)).unwrap_or(-1);
    DescribeClusterResponse {
        endpoint_type: ENDPOINT_CONTROLLERS,
        cluster_id: broker.cluster_id.clone(),
        controller_id,
        brokers,
        cluster_authorized_operations: if request.include_cluster_authorized_operations {
            let caller = (&caller.principal, caller.address);
            crate::authorization::cluster_operations_of(broker, caller)
        } else {
            i32::MIN
        },
        ..Default::default()
    }
}

async fn heartbeat(control: &ClusterControl, request: &BrokerHeartbeatRequest) -> BrokerHeartbeatResponse {
    match control.heartbeat(request).await {
        Ok(HeartbeatOutcome { is_caught_up, is_fenced, should_shut_down }) => {
            BrokerHeartbeatResponse { is_caught_up, is_fenced, should_shut_down, ..Default::default() }
        }
        Err(e) => BrokerHeartbeatResponse { error_code: e.code, is_fenced: true, ..Default::default() },
    }
}

async fn assign_replicas_to_dirs(
    control: &ClusterControl,
    request: &AssignReplicasToDirsRequest,
) -> AssignReplicasToDirsResponse {
    match control.assign_replicas_to_dirs(request).await {
        Ok(response) => response,
        Err(e) => AssignReplicasToDirsResponse { error_code: e.code, ..Default::default() },
    }
}

async fn alter_partition(
    control: &ClusterControl,
    request: &AlterPartitionRequest,
    version: i16,
) -> AlterPartitionResponse {
    match control.alter_partition(request, version).await {
        Ok(response) => response,
        Err(e) => AlterPartitionResponse { error_code: e.code, ..Default::default() },
    }
}

async fn allocate_producer_ids(
    control: &ClusterControl,
    request: &AllocateProducerIdsRequest,
) -> AllocateProducerIdsResponse {
    match control.allocate_producer_ids(request).await {
        Ok(block) => AllocateProducerIdsResponse {
            producer_id_start: block.start,
            producer_id_len: (block.end - block.start) as i32,
            ..Default::default()
        },
        Err(e) => AllocateProducerIdsResponse { error_code: e.code, ..Default::default() },
    }
}

/// A forwardable client request sent straight to the controller
/// listener (a Kafka broker's own topic creations come so, as they do to
/// Kafka's controllers), answered by the client handlers as from the
/// caller; None for any other API.
async fn direct(broker: &Arc<Broker>, request: RequestBody, api_version: i16, caller: Caller) -> Option<ResponseBody> {
    let listener = &broker.config.inter_broker_listener_name;
    let connection = ConnectionInfo::forwarded(SocketAddr::new(caller.address, 0), listener, Some(caller.principal));
    let ctx = RequestContext {
        broker,
        connection: &connection,
        api_key: request.api_key(),
        api_version,
        correlation_id: 0,
        client_id: None,
        started: Instant::now(),
    };
    super::forwardable(&ctx, request).await.ok()
}

/// Envelope: the forwarded request's response, header and body. Refused
/// whole with NOT_CONTROLLER on a node that does not lead, or when the
/// lead moved while the request waited (a NOT_CONTROLLER anywhere in its
/// response, lifted as Kafka's controller lifts it: the broker forwards
/// again), and with INVALID_REQUEST for a request that does not parse or
/// that brokers do not forward.
async fn envelope(broker: &Arc<Broker>, request: EnvelopeRequest) -> EnvelopeResponse {
    let refuse = |code: ErrorCode| EnvelopeResponse { error_code: code.code(), ..Default::default() };
    if !broker.metadata.is_active_controller() {
        return refuse(ErrorCode::NOT_CONTROLLER);
    }
    let (Ok(frame), Some(client), Some(principal)) = (
        RequestFrame::parse(request.request_data),
        client_address(&request.client_host_address),
        request.request_principal.as_deref().and_then(deserialized_principal),
    ) else {
        return refuse(ErrorCode::INVALID_REQUEST);
    };
    let (api_key, api_version) = (frame.api_key, frame.api_version());
    let served =
        api_versions::supported_apis().iter().any(|&(k, min, max)| k == api_key && (min..=max).contains(&api_version));
    if !FORWARDED_APIS.contains(&api_key) || !served {
        return refuse(ErrorCode::INVALID_REQUEST);
    }
    let Ok(body) = frame.decode_body() else { return refuse(ErrorCode::INVALID_REQUEST) };
    let connection = ConnectionInfo::forwarded(client, &broker.config.inter_broker_listener_name, Some(principal));
    let ctx = RequestContext {
        broker,
        connection: &connection,
        api_key,
        api_version,
        correlation_id: frame.correlation_id(),
        client_id: frame.header.client_id.as_deref(),
        started: Instant::now(),
    };
    let Ok(response) = super::forwardable(&ctx, body).await else { return refuse(ErrorCode::INVALID_REQUEST) };
    if forwarded::mentions(&response, ErrorCode::NOT_CONTROLLER) {
        return refuse(ErrorCode::NOT_CONTROLLER);
    }
    let mut frame = BytesMut::new();
    for chunk in ctx.encode(&response).chunks {
        match chunk {
            Chunk::Bytes(bytes) => frame.extend_from_slice(&bytes),
            // The forwarded APIs answer in bytes only.
            Chunk::File(_) => return refuse(ErrorCode::UNKNOWN_SERVER_ERROR),
        }
    }
    // The client reads the response without its size prefix.
    let response_data = Bytes::from(frame).slice(4..);
    EnvelopeResponse { response_data: Some(response_data), ..Default::default() }
}

/// The forwarded client's address: its 4 or 16 address bytes (no port).
/// The Envelope's principal, as Kafka's DefaultKafkaPrincipalBuilder
/// serializes it: a version (0) and DefaultPrincipalData.
fn deserialized_principal(bytes: &[u8]) -> Option<KafkaPrincipal> {
    let (version, rest) = bytes.split_first_chunk::<2>()?;
    let version = i16::from_be_bytes(*version);
    if version != 0 {
        return None;
    }
    let data = DefaultPrincipalData::decode_body(&mut Bytes::copy_from_slice(rest), version).ok()?;
    Some(KafkaPrincipal { principal_type: data.r#type, name: data.name })
}

fn client_address(bytes: &[u8]) -> Option<SocketAddr> {
    let ip = match bytes.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        _ => return None,
    };
    Some(SocketAddr::new(ip, 0))
}
