//! The controller listener: where the other voters (and observers) reach
//! this node's raft, and brokers its controller. It answers ApiVersions
//! with the APIs it serves, hands Vote, BeginQuorumEpoch, EndQuorumEpoch,
//! Fetch and FetchSnapshot to the quorum and BrokerRegistration, BrokerHeartbeat,
//! AllocateProducerIds and Envelope to the controller's handler; any other request closes the connection, as
//! a Kafka controller closes on an API its listener does not serve.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use krabka_protocol::frame::RequestFrame;
use krabka_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};
use krabka_raft::wire::MIN_FETCH_VERSION;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::driver::Quorum;
use crate::wire::{api_versions_response, encode_frame, served_range, FORWARDED_APIS};

/// A request frame larger than this closes the connection (raft's largest
/// are fetch responses, which go the other way).
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// What answers the controller's own APIs (BrokerRegistration,
/// BrokerHeartbeat, AlterPartition, AllocateProducerIds, Envelope, ControllerRegistration,
/// DescribeCluster) and the forwardable
/// client APIs a broker may send it directly (`FORWARDED_APIS`): the broker's, which knows the metadata store. None
/// for a request it does not answer.
pub type ControllerHandler =
    Arc<dyn Fn(RequestBody, i16) -> Pin<Box<dyn Future<Output = Option<ResponseBody>> + Send>> + Send + Sync>;

/// The APIs handed to the `ControllerHandler`.
const CONTROLLER_APIS: [ApiKey; 7] = [
    ApiKey::BrokerRegistration,
    ApiKey::BrokerHeartbeat,
    ApiKey::AlterPartition,
    ApiKey::AllocateProducerIds,
    ApiKey::Envelope,
    ApiKey::ControllerRegistration,
    ApiKey::DescribeCluster,
];

/// The APIs the controller listener serves, with the versions it speaks
/// (Fetch from v13, which carries the topic id raft checks).
fn controller_apis() -> Vec<(ApiKey, i16, i16)> {
    let raft = krabka_raft::wire::RAFT_APIS;
    std::iter::once(ApiKey::ApiVersions)
        .chain(raft)
        .chain(CONTROLLER_APIS)
        .chain(FORWARDED_APIS)
        .map(served_range)
        .map(|(key, min, max)| (key, if key == ApiKey::Fetch { min.max(MIN_FETCH_VERSION) } else { min }, max))
        .collect()
}

/// Accepts connections on `listener`, serving each, until the quorum
/// stops (then the listener and its connections close) or accepting fails.
pub async fn serve_controller_listener(
    listener: TcpListener,
    quorum: Arc<Quorum>,
    controller: Option<ControllerHandler>,
) {
    let quorum_stopped = stopped(&quorum);
    tokio::pin!(quorum_stopped);
    loop {
        let accepted = tokio::select! {
            () = &mut quorum_stopped => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let quorum = Arc::clone(&quorum);
                let controller = controller.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = stopped(&quorum) => {}
                        served = serve(stream, &quorum, controller.as_ref()) => {
                            if let Err(reason) = served {
                                tracing::debug!(%peer, %reason, "controller connection closed");
                            }
                        }
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "the controller listener stopped accepting");
                return;
            }
        }
    }
}

/// Resolves once the quorum's driver has stopped (its status closes).
async fn stopped(quorum: &Quorum) {
    let mut status = quorum.status();
    while status.changed().await.is_ok() {}
}

async fn serve(mut stream: TcpStream, quorum: &Quorum, controller: Option<&ControllerHandler>) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    loop {
        let size = match stream.read_i32().await {
            Ok(size) => size,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        let size = usize::try_from(size).ok().filter(|&s| s <= MAX_REQUEST_BYTES).ok_or("bad frame size")?;
        let mut frame = vec![0u8; size];
        stream.read_exact(&mut frame).await.map_err(|e| e.to_string())?;
        let response = answer(Bytes::from(frame), quorum, controller).await?;
        stream.write_all(&response).await.map_err(|e| e.to_string())?;
    }
}

/// The response frame to one request frame, or why the connection closes.
async fn answer(frame: Bytes, quorum: &Quorum, controller: Option<&ControllerHandler>) -> Result<BytesMut, String> {
    let request = RequestFrame::parse(frame).map_err(|e| e.to_string())?;
    let (key, version, correlation_id) = (request.api_key, request.api_version(), request.correlation_id());
    let served = controller_apis().into_iter().find(|&(k, ..)| k == key);
    let supported = served.is_some_and(|(_, min, max)| (min..=max).contains(&version));
    if key == ApiKey::ApiVersions {
        // KIP-511: a version this listener does not speak is answered at v0
        // with UNSUPPORTED_VERSION and the ranges, so the client retries.
        let (code, answer_version) =
            if supported { (ErrorCode::NONE, version) } else { (ErrorCode::UNSUPPORTED_VERSION, 0) };
        let mut response = api_versions_response(&controller_apis(), code.code());
        // The features this controller supports (Kafka's leader reads
        // kraft.version's range before it adds a voter, KIP-853) and the
        // levels finalized in its image, which `kafka-features
        // --bootstrap-controller describe` prints, as Kafka's controller
        // lists them.
        if supported && version >= 3 {
            response.supported_features = crate::wire::supported_feature_keys(version);
            let ask = RequestBody::ApiVersions(Box::default());
            if let Some(ResponseBody::ApiVersions(image)) = match controller {
                Some(controller) => controller(ask, version).await,
                None => None,
            } {
                response.finalized_features = image.finalized_features;
                response.finalized_features_epoch = image.finalized_features_epoch;
            }
        }
        let body = ResponseBody::ApiVersions(Box::new(response));
        return Ok(encode_frame(key, answer_version, correlation_id, &body));
    }
    if !supported {
        return Err(format!("{key:?} v{version} is not served on the controller listener"));
    }
    let body: RequestBody = request.decode_body().map_err(|e| e.to_string())?;
    let response = if CONTROLLER_APIS.contains(&key) || FORWARDED_APIS.contains(&key) {
        let controller = controller.ok_or("this listener has no controller")?;
        controller(body, version).await.ok_or("the controller gave no answer")?
    } else if matches!(key, ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter) {
        quorum.voter_change(body).await.ok_or("the quorum gave no answer")?
    } else {
        quorum.request(body, version).await.ok_or("the quorum gave no answer")?
    };
    Ok(encode_frame(key, version, correlation_id, &response))
}
