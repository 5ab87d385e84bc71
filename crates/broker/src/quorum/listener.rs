//! The controller listener: where the other voters (and observers) reach
//! this node's raft, and brokers its controller. It answers ApiVersions
//! with the APIs it serves, hands Vote, BeginQuorumEpoch, EndQuorumEpoch,
//! Fetch and FetchSnapshot to the quorum and BrokerRegistration, BrokerHeartbeat,
//! AllocateProducerIds and Envelope to the controller's handler; any other request closes the connection, as
//! a Kafka controller closes on an API its listener does not serve.
//!
//! The listener's security protocol is served as a client listener's: TLS
//! through rustls, SASL through the same authenticator, before any request
//! reaches the quorum or the controller. SCRAM credentials live in the
//! metadata log, so the controller listener checks PLAIN's JAAS users
//! (and OAUTHBEARER tokens), not SCRAM's.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use krabka_metadata::MetadataImage;
use krabka_protocol::frame::RequestFrame;
use krabka_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody};
use krabka_raft::wire::MIN_FETCH_VERSION;
use krabka_security::KafkaPrincipal;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

use super::driver::Quorum;
use crate::authentication::{Admission, Authenticator};
use crate::config::security::{ClientListener, SecurityConfig};
use crate::transport::{self, AcceptError, ResponseWriter};
use crate::wire::{api_versions_response, encode_frame, served_range, FORWARDED_APIS};

/// A request frame larger than this closes the connection (raft's largest
/// are fetch responses, which go the other way).
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// Who sent a request on the controller listener: the principal its
/// connection authenticated as, from where.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: KafkaPrincipal,
    pub address: IpAddr,
}

/// Whether a caller may send a request (None), or the refusal to answer
/// it with: the node's authorization of its controller listener, as
/// Kafka's controller checks each API it serves.
pub type ControllerGate = Arc<dyn Fn(&RequestBody, i16, &Caller) -> Option<ResponseBody> + Send + Sync>;

/// What answers the controller's own APIs (BrokerRegistration,
/// BrokerHeartbeat, AlterPartition, AllocateProducerIds, AssignReplicasToDirs, Envelope,
/// ControllerRegistration, DescribeCluster) and the forwardable
/// client APIs a broker may send it directly (`FORWARDED_APIS`): the broker's, which knows the metadata store. None
/// for a request it does not answer.
pub type ControllerHandler =
    Arc<dyn Fn(RequestBody, i16, Caller) -> Pin<Box<dyn Future<Output = Option<ResponseBody>> + Send>> + Send + Sync>;

/// The APIs handed to the `ControllerHandler`.
const CONTROLLER_APIS: [ApiKey; 8] = [
    ApiKey::BrokerRegistration,
    ApiKey::BrokerHeartbeat,
    ApiKey::AlterPartition,
    ApiKey::AllocateProducerIds,
    ApiKey::AssignReplicasToDirs,
    ApiKey::Envelope,
    ApiKey::ControllerRegistration,
    ApiKey::DescribeCluster,
];

/// How long a TLS handshake may take on the controller listener.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How the controller listener authenticates its connections: the
/// listener's own settings and the node's SASL limits.
pub struct ControllerListenerSecurity {
    pub listener: Arc<ClientListener>,
    /// `connections.max.reauth.ms`.
    pub max_reauth_ms: i64,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_authentication_delay: Duration,
    /// `sasl.server.max.receive.size`.
    pub sasl_max_receive_bytes: u32,
    /// The authorization of each request (None: every request is served).
    pub gate: Option<ControllerGate>,
}

impl ControllerListenerSecurity {
    /// Listener `name`'s, from the node's security config; None when
    /// the node does not serve it.
    pub fn of(security: &SecurityConfig, name: &str) -> Option<Self> {
        Some(ControllerListenerSecurity {
            listener: Arc::clone(security.controller_listener(name)?),
            max_reauth_ms: security.connections_max_reauth_ms,
            failed_authentication_delay: Duration::from_millis(security.failed_authentication_delay_ms),
            sasl_max_receive_bytes: security.sasl_server_max_receive_size,
            gate: None,
        })
    }

    /// A PLAINTEXT listener `name` (tests' quorums).
    pub fn plaintext(name: &str) -> Self {
        let listener = ClientListener {
            name: name.to_string(),
            protocol: crate::config::security::SecurityProtocol::Plaintext,
            sasl: None,
            tls: None,
            max_connection_creation_rate: None,
        };
        ControllerListenerSecurity {
            listener: Arc::new(listener),
            max_reauth_ms: 0,
            failed_authentication_delay: Duration::from_millis(100),
            sasl_max_receive_bytes: 524_288,
            gate: None,
        }
    }
}

/// The APIs the controller listener serves, with the versions it speaks
/// (Fetch from v13, which carries the topic id raft checks). SaslHandshake
/// and SaslAuthenticate are listed, as Kafka's controller lists them, for
/// the clients that look for them before they authenticate.
fn controller_apis() -> Vec<(ApiKey, i16, i16)> {
    let raft = krabka_raft::wire::RAFT_APIS;
    [ApiKey::ApiVersions, ApiKey::SaslHandshake, ApiKey::SaslAuthenticate]
        .into_iter()
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
    security: ControllerListenerSecurity,
) {
    let security = Arc::new(security);
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
                let security = Arc::clone(&security);
                tokio::spawn(async move {
                    tokio::select! {
                        () = stopped(&quorum) => {}
                        served = serve((stream, peer.ip()), &quorum, controller.as_ref(), &security) => {
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

async fn serve(
    (stream, address): (TcpStream, IpAddr),
    quorum: &Quorum,
    controller: Option<&ControllerHandler>,
    security: &ControllerListenerSecurity,
) -> Result<(), String> {
    let (transport, principal) =
        transport::accept(stream, &security.listener, HANDSHAKE_TIMEOUT).await.map_err(|e| match e {
            AcceptError::Closed(reason) | AcceptError::AuthenticationFailed(reason) => reason,
        })?;
    let mut authenticator = Authenticator::new(Arc::clone(&security.listener), security.max_reauth_ms, principal);
    let (mut reader, mut writer) = transport.split();
    // The controller listener has no SCRAM credentials to look up: one
    // empty image for the whole process.
    static NO_CREDENTIALS: std::sync::LazyLock<Arc<MetadataImage>> = std::sync::LazyLock::new(Default::default);
    let no_credentials = || Arc::clone(&NO_CREDENTIALS);
    loop {
        let size = match reader.read_i32().await {
            Ok(size) => size,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        let max_bytes = authenticator.max_frame_bytes(MAX_REQUEST_BYTES as u32, security.sasl_max_receive_bytes);
        let size = u32::try_from(size).ok().filter(|&s| s <= max_bytes).ok_or("bad frame size")?;
        let mut frame = vec![0u8; size as usize];
        reader.read_exact(&mut frame).await.map_err(|e| e.to_string())?;
        let frame = Bytes::from(frame);
        let admission = if authenticator.expects_raw_token() {
            authenticator.raw_token(&frame, &no_credentials)
        } else {
            authenticator.admit(RequestFrame::parse(frame).map_err(|e| e.to_string())?, &no_credentials)
        };
        match admission {
            Admission::Serve(request) => {
                let caller = Caller { principal: authenticator.principal(), address };
                let gate = security.gate.as_ref();
                write(&mut writer, &answer(request, quorum, (controller, gate), caller).await?).await?
            }
            Admission::Answer(answer) => write(&mut writer, &answer).await?,
            Admission::Fail { answer, reason } => {
                // As on a client listener (KIP-306).
                tokio::time::sleep(security.failed_authentication_delay).await;
                if let Some(answer) = answer {
                    let _ = write(&mut writer, &answer).await;
                }
                tracing::info!(%reason, "failed authentication on the controller listener");
                return Err(reason);
            }
            Admission::Close(close) => return Err(close.reason),
        }
    }
}

async fn write(writer: &mut ResponseWriter, bytes: &[u8]) -> Result<(), String> {
    writer.write_bytes(bytes).await.map_err(|e| e.to_string())?;
    writer.flush().await.map_err(|e| e.to_string())
}

/// The response frame to one request, or why the connection closes.
async fn answer(
    request: RequestFrame,
    quorum: &Quorum,
    (controller, gate): (Option<&ControllerHandler>, Option<&ControllerGate>),
    caller: Caller,
) -> Result<BytesMut, String> {
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
                Some(controller) => controller(ask, version, caller).await,
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
    if let Some(refusal) = gate.and_then(|gate| gate(&body, version, &caller)) {
        return Ok(encode_frame(key, version, correlation_id, &refusal));
    }
    let response = if CONTROLLER_APIS.contains(&key) || FORWARDED_APIS.contains(&key) {
        let controller = controller.ok_or("this listener has no controller")?;
        controller(body, version, caller).await.ok_or("the controller gave no answer")?
    } else if matches!(key, ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter) {
        quorum.voter_change(body).await.ok_or("the quorum gave no answer")?
    } else {
        quorum.request(body, version).await.ok_or("the quorum gave no answer")?
    };
    Ok(encode_frame(key, version, correlation_id, &response))
}
