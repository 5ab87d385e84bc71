//! Requests this node's broker sends the active controller (Kafka's
//! controller channel): over the controller listener of whichever voter
//! leads the metadata quorum now, as this node's quorum knows it. The
//! lifecycle registers and heartbeats through it; an idempotent
//! producer's InitProducerId gets its producer id blocks through it; a
//! request only the controller decides (CreateTopics and the like) is
//! forwarded to it in an Envelope, as Kafka's brokers forward them.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use krabka_protocol::frame::{encode_request, parse_response_header, RequestFrame, SIZE_PREFIX_BYTES};
use krabka_protocol::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, ApiKey, CreateTopicsRequest, CreateTopicsResponse,
    DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse, ErrorCode, Message,
};

use crate::broker::Broker;
use crate::quorum::Channel;

/// AllocateProducerIds' and Envelope's only versions.
const ALLOCATE_PRODUCER_IDS_VERSION: i16 = 0;
const ENVELOPE_VERSION: i16 = 0;
/// The CreateTopics version a broker's own topic creation sends (Kafka
/// 4.3.1's latest).
const CREATE_TOPICS_VERSION: i16 = 7;
/// How long to wait before asking again when the lead is moving.
const RETRY: Duration = Duration::from_millis(100);

/// A connection to the active controller's listener; `purpose` names it
/// in the client id the controller logs.
pub async fn connect(broker: &Broker, purpose: &str) -> Result<Channel, String> {
    let quorum = broker.metadata.quorum().ok_or("no shared quorum")?;
    let leader = quorum.status().borrow().leader_id.ok_or("no active controller known")?;
    let address = broker.config.quorum.voters.get(&leader).ok_or("the leader is not a voter")?;
    let client_id = format!("broker-{}-{purpose}", broker.node_id);
    Channel::connect(&address.host, address.port, request_timeout(broker), client_id).await
}

fn request_timeout(broker: &Broker) -> Duration {
    Duration::from_millis(broker.config.quorum.request_timeout_ms.max(1) as u64)
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

/// Forwards `request` (from a client at `client`) to the active
/// controller in an Envelope; the controller's response to it, header
/// and body as the client reads them (without the size prefix). An
/// Envelope refused as a whole (NOT_CONTROLLER: the lead moved) or a
/// failed exchange is an error, and the caller answers itself.
pub async fn forward(broker: &Broker, request: &RequestFrame, client: SocketAddr) -> Result<Bytes, String> {
    envelope(broker, request.to_bytes().map_err(|e| e.to_string())?, client.ip()).await
}

/// CreateTopics on this broker's own behalf (an internal or auto-created
/// topic), forwarded to the active controller as Kafka's broker sends it.
pub async fn create_topics(broker: &Broker, request: &CreateTopicsRequest) -> Result<CreateTopicsResponse, String> {
    let mut frame = BytesMut::new();
    let client_id = format!("broker-{}-topic-creation", broker.node_id);
    encode_request(&mut frame, ApiKey::CreateTopics, CREATE_TOPICS_VERSION, 0, Some(&client_id), request)
        .map_err(|e| e.to_string())?;
    let request_data = frame.freeze().slice(SIZE_PREFIX_BYTES..);
    let own_address = IpAddr::from([127, 0, 0, 1]);
    let mut response = envelope(broker, request_data, own_address).await?;
    parse_response_header(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, &mut response).map_err(|e| e.to_string())?;
    CreateTopicsResponse::decode(&mut response, CREATE_TOPICS_VERSION).map_err(|e| e.to_string())
}

/// One request (its frame without the size prefix) in an Envelope to the
/// active controller; the response frame it carries back.
async fn envelope(broker: &Broker, request_data: Bytes, client: IpAddr) -> Result<Bytes, String> {
    let envelope = EnvelopeRequest {
        request_data,
        request_principal: Some(serialized_principal()),
        client_host_address: match client {
            IpAddr::V4(ip) => Bytes::copy_from_slice(&ip.octets()),
            IpAddr::V6(ip) => Bytes::copy_from_slice(&ip.octets()),
        },
        ..Default::default()
    };
    let mut channel = connect(broker, "forwarding").await?;
    let response: EnvelopeResponse = channel.call(ApiKey::Envelope, ENVELOPE_VERSION, &envelope).await?;
    match (response.error_code, response.response_data) {
        (0, Some(data)) => Ok(data),
        (code, _) => Err(format!("the active controller refused the Envelope with error {code}")),
    }
}

/// The principal a forwarded request acts for, as Kafka's default
/// principal builder serializes it (a version, then DefaultPrincipalData):
/// every client is User:ANONYMOUS until krabka authenticates them.
pub fn serialized_principal() -> Bytes {
    const VERSION: i16 = 0;
    let principal = DefaultPrincipalData { r#type: "User".into(), name: "ANONYMOUS".into(), ..Default::default() };
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
