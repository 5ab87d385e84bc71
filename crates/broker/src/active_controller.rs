//! Requests this node's broker sends the active controller (Kafka's
//! controller channel): over the controller listener of whichever voter
//! leads the metadata quorum now, as this node's quorum knows it. The
//! lifecycle registers and heartbeats through it; an idempotent
//! producer's InitProducerId gets its producer id blocks through it; a
//! client request only the controller decides (CreateTopics and the
//! like) is forwarded to it in an Envelope, and the broker's own topic
//! creations are sent to it, as Kafka's brokers do both.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use krabka_protocol::frame::RequestFrame;
use krabka_protocol::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, ApiKey, CreateTopicsRequest, CreateTopicsResponse,
    DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse, ErrorCode, Message,
};

use crate::broker::Broker;
use crate::quorum::{Channel, Quorum};
use krabka_security::KafkaPrincipal;

/// AllocateProducerIds' and Envelope's only versions.
const ALLOCATE_PRODUCER_IDS_VERSION: i16 = 0;
const ENVELOPE_VERSION: i16 = 0;
/// The CreateTopics version a broker's own topic creation sends (Kafka
/// 4.3.1's latest).
const CREATE_TOPICS_VERSION: i16 = 7;
/// How long to wait before asking again when the lead is moving.
const RETRY: Duration = Duration::from_millis(100);

/// A connection to the active controller's listener; `purpose` names it
/// in the client id the controller logs. Each exchange may take
/// `controller.quorum.request.timeout.ms`.
pub async fn connect(broker: &Broker, purpose: &str) -> Result<Channel, String> {
    connect_within(broker, purpose, request_timeout(broker)).await
}

async fn connect_within(broker: &Broker, purpose: &str, timeout: Duration) -> Result<Channel, String> {
    connect_to_leader(broker, purpose, timeout).await.map(|(channel, _)| channel)
}

/// A connection to the voter the quorum names leader now, and its id. The
/// attempt is given up when the quorum names another leader first: a
/// leader cut off the network drops the connection attempt silently, and
/// waiting out the timeout would hold the request long after the quorum
/// moved on.
async fn connect_to_leader(broker: &Broker, purpose: &str, timeout: Duration) -> Result<(Channel, i32), String> {
    let quorum = broker.metadata.quorum().ok_or("no shared quorum")?;
    let leader = quorum.status().borrow().leader_id.ok_or("no active controller known")?;
    let address = quorum.endpoint_of(leader).ok_or("the leader's address is not known")?;
    let client_id = format!("broker-{}-{purpose}", broker.node_id);
    tokio::select! {
        connected = Channel::connect_to_controller(
            &address.host, address.port, timeout, client_id, &broker.config.security.controller_client,
        ) => Ok((connected?, leader)),
        () = lead_moves(quorum, leader) => Err(format!("the lead moved from node {leader} while connecting")),
    }
}

/// Resolves once the quorum no longer names `leader` its leader (or stops).
async fn lead_moves(quorum: &Quorum, leader: i32) {
    let mut status = quorum.status();
    while status.borrow_and_update().leader_id == Some(leader) {
        if status.changed().await.is_err() {
            return;
        }
    }
}

fn request_timeout(broker: &Broker) -> Duration {
    Duration::from_millis(broker.config.quorum.request_timeout_ms.max(1) as u64)
}

/// The next block of producer ids for this broker: from the active
/// controller when it shares a quorum, else committed in its own metadata log.
pub async fn reserve_producer_ids(broker: &Broker) -> Result<Range<i64>, String> {
    if broker.metadata.quorum().is_some() {
        return allocate_producer_ids(broker).await;
    }
    let node_id = broker.node_id;
    let (_, block) = broker
        .metadata
        .control(|image| krabka_controller::producer_ids::plan_allocate_producer_ids(image, node_id))
        .await
        .map_err(|e| e.message)?;
    Ok(block)
}

/// The next block of producer ids for this broker (Kafka's
/// RPCProducerIdManager), asking whoever leads until one grants it or a
/// request timeout has passed. Only a registered broker may ask: its
/// broker epoch goes with the request.
pub async fn allocate_producer_ids(broker: &Broker) -> Result<Range<i64>, String> {
    let deadline = Instant::now() + request_timeout(broker);
    loop {
        let broker_epoch = broker.membership.epoch().ok_or("not registered with the active controller yet")?;
        let request = AllocateProducerIdsRequest { broker_id: broker.node_id, broker_epoch, ..Default::default() };
        let answer = async {
            let mut channel = connect(broker, "producer-ids").await?;
            let response: AllocateProducerIdsResponse =
                channel.call(ApiKey::AllocateProducerIds, ALLOCATE_PRODUCER_IDS_VERSION, &request).await?;
            Ok::<_, String>(response)
        };
        let failure = match answer.await {
            Ok(response) if response.error_code == 0 => return granted_block(&response),
            // The lead moved, or this node's view of it lags: ask again.
            Ok(response) if response.error_code == ErrorCode::NOT_CONTROLLER.code() => "NOT_CONTROLLER".to_string(),
            Ok(response) => return Err(format!("AllocateProducerIds answered error {}", response.error_code)),
            Err(reason) => reason,
        };
        if Instant::now() + RETRY > deadline {
            return Err(format!("no active controller granted producer ids in time: {failure}"));
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Why a request was not forwarded: no controller took it (nothing was
/// carried out; the caller answers itself), the exchange failed after
/// the request was sent (it may have been carried out), or the controller
/// refused the Envelope with this error (not carried out).
#[derive(Debug)]
pub enum ForwardError {
    NotTaken(String),
    Failed(String),
    Refused(i16),
}

/// Forwards `request` (from a client at `client`) to the active
/// controller in an Envelope; the controller's response to it, header
/// and body as the client reads them (without the size prefix). The
/// exchange may take `request.timeout.ms`, as Kafka's forwarding does: a
/// controller commit may take the quorum's whole request timeout.
pub async fn forward(
    broker: &Broker,
    request: &RequestFrame,
    (client, principal): (SocketAddr, &KafkaPrincipal),
) -> Result<Bytes, ForwardError> {
    let request_data = request.to_bytes().map_err(|e| ForwardError::NotTaken(e.to_string()))?;
    let envelope = EnvelopeRequest {
        request_data,
        request_principal: Some(serialized_principal(principal)),
        client_host_address: match client.ip() {
            IpAddr::V4(ip) => Bytes::copy_from_slice(&ip.octets()),
            IpAddr::V6(ip) => Bytes::copy_from_slice(&ip.octets()),
        },
        ..Default::default()
    };
    let timeout = Duration::from_millis(broker.config.request_timeout_ms.max(1) as u64);
    let (mut channel, leader) =
        connect_to_leader(broker, "forwarding", timeout).await.map_err(ForwardError::NotTaken)?;
    let quorum = broker.metadata.quorum().ok_or_else(|| ForwardError::NotTaken("no shared quorum".into()))?;
    // Sent: a lead that moves meanwhile may or may not have carried it out.
    let response: EnvelopeResponse = tokio::select! {
        answered = channel.call(ApiKey::Envelope, ENVELOPE_VERSION, &envelope) => answered.map_err(ForwardError::Failed)?,
        () = lead_moves(quorum, leader) => {
            return Err(ForwardError::Failed(format!("the lead moved from node {leader} before it answered")))
        }
    };
    match (response.error_code, response.response_data) {
        (0, Some(data)) => Ok(data),
        (code, _) if code == ErrorCode::NOT_CONTROLLER.code() => {
            Err(ForwardError::NotTaken("the node asked no longer leads".into()))
        }
        (0, None) => Err(ForwardError::Failed("the active controller answered the Envelope without a response".into())),
        (code, _) => Err(ForwardError::Refused(code)),
    }
}

/// CreateTopics on this broker's own behalf (an internal or auto-created
/// topic), sent to the active controller's listener as Kafka's broker
/// sends it (not in an Envelope: the broker acts for itself).
pub async fn create_topics(broker: &Broker, request: &CreateTopicsRequest) -> Result<CreateTopicsResponse, String> {
    let mut channel = connect(broker, "topic-creation").await?;
    channel.call(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, request).await
}

/// The principal a forwarded request acts for, as Kafka's default
/// principal builder serializes it (a version, then DefaultPrincipalData):
/// every client is User:ANONYMOUS until krabka authenticates them.
pub fn serialized_principal(principal: &KafkaPrincipal) -> Bytes {
    const VERSION: i16 = 0;
    let principal = DefaultPrincipalData {
        r#type: principal.principal_type.clone(),
        name: principal.name.clone(),
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    buf.put_i16(VERSION);
    principal.encode(&mut buf, VERSION).expect("DefaultPrincipalData v0 encodes");
    buf.freeze()
}

/// The block a response grants, checked as Kafka's broker checks it.
fn granted_block(response: &AllocateProducerIdsResponse) -> Result<Range<i64>, String> {
    let (start, len) = (response.producer_id_start, i64::from(response.producer_id_len));
    match start.checked_add(len) {
        Some(end) if start >= 0 && len > 0 => Ok(start..end),
        _ => Err(format!("the controller granted an invalid producer id block ({start}, {len} ids)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_granted_block_must_be_non_empty_non_negative_and_not_overflow() {
        let grant = |start, len| AllocateProducerIdsResponse {
            producer_id_start: start,
            producer_id_len: len,
            ..Default::default()
        };
        assert_eq!(granted_block(&grant(2000, 1000)), Ok(2000..3000));
        for (start, len) in [(-1, 1000), (0, 0), (5, -1), (i64::MAX - 10, 1000)] {
            assert!(granted_block(&grant(start, len)).is_err(), "({start}, {len})");
        }
    }
}
