//! One connection to another voter, as Kafka's raft client keeps it
//! (KafkaRaftManager's NetworkClient): connect on demand, ApiVersions
//! first to learn the versions both sides speak, then one request in
//! flight at a time; a failure drops the connection and what was queued
//! (raft's timers send again), and the next connect waits a backoff from
//! 50 ms doubling to 500 ms.

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use krabka_protocol::frame::{encode_request, encode_request_body, parse_response_header};
use krabka_protocol::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, Message as _, ResponseBody};
use krabka_raft::wire::{self, Endpoint, WireContext, MIN_FETCH_VERSION};
use krabka_raft::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc as tokio_mpsc;
use tokio::time::timeout;

use super::event::{Event, PeerResult};

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_millis(500);
/// The ApiVersions version raft's client opens with (flexible, with the
/// client's name).
const API_VERSIONS_VERSION: i16 = 3;
/// A response frame larger than this is a peer gone wrong.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// The voter a connection goes to.
pub(super) struct Connection {
    pub id: i32,
    pub endpoint: Endpoint,
    pub timeout: Duration,
}

/// Starts the connection task; messages sent on the returned channel go to
/// the voter, and each one's outcome comes back to the driver.
pub(super) fn spawn(
    runtime: &tokio::runtime::Handle,
    connection: Connection,
    context: Arc<WireContext>,
    events: mpsc::Sender<Event>,
) -> tokio_mpsc::UnboundedSender<Message> {
    let (sender, receiver) = tokio_mpsc::unbounded_channel();
    runtime.spawn(run(connection, context, receiver, events));
    sender
}

async fn run(
    connection: Connection,
    context: Arc<WireContext>,
    mut queue: tokio_mpsc::UnboundedReceiver<Message>,
    events: mpsc::Sender<Event>,
) {
    let mut backoff = BACKOFF_MIN;
    let mut backlog = VecDeque::new();
    while let Some(first) = next_message(&mut queue, &mut backlog).await {
        match Session::open(&connection, &context).await {
            Ok(mut session) => {
                backoff = BACKOFF_MIN;
                let mut next = Some(first);
                while let Some(message) = next.take() {
                    let result = session.exchange(&message).await;
                    let failed = result.is_err();
                    if events.send(Event::Response { peer: connection.id, sent: message, result }).is_err() {
                        return; // the driver is gone
                    }
                    if failed {
                        break;
                    }
                    next = next_message(&mut queue, &mut backlog).await;
                }
            }
            Err(error) => {
                tracing::debug!(peer = connection.id, %error, "cannot reach a voter");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
        // What queued while the connection failed is stale: raft resends.
        while queue.try_recv().is_ok() {}
        backlog.clear();
    }
}

/// The next message to send: what queued while the last one was in flight,
/// in order, but only the newest fetch (the older ones ask for a log end
/// the node has moved past, and each would be held by the leader in turn).
async fn next_message(
    queue: &mut tokio_mpsc::UnboundedReceiver<Message>,
    backlog: &mut VecDeque<Message>,
) -> Option<Message> {
    while let Ok(message) = queue.try_recv() {
        if matches!(message, Message::FetchRequest { .. }) {
            backlog.retain(|queued| !matches!(queued, Message::FetchRequest { .. }));
        }
        backlog.push_back(message);
    }
    match backlog.pop_front() {
        Some(message) => Some(message),
        None => queue.recv().await,
    }
}

/// An open connection and the versions it speaks.
struct Session {
    stream: TcpStream,
    versions: BTreeMap<ApiKey, i16>,
    correlation_id: i32,
    timeout: Duration,
    peer: i32,
    context: Arc<WireContext>,
    client_id: String,
}

impl Session {
    async fn open(connection: &Connection, context: &Arc<WireContext>) -> Result<Session, String> {
        let address = (connection.endpoint.host.as_str(), connection.endpoint.port);
        let connect = timeout(connection.timeout, TcpStream::connect(address)).await;
        let stream = connect.map_err(|_| "connect timed out".to_string())?.map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let mut session = Session {
            stream,
            versions: BTreeMap::new(),
            correlation_id: 0,
            timeout: connection.timeout,
            peer: connection.id,
            context: Arc::clone(context),
            client_id: format!("raft-client-{}", context.node_id),
        };
        session.negotiate().await?;
        Ok(session)
    }

    /// ApiVersions, then for each raft API the highest version both sides
    /// speak (Fetch from v13, which carries the topic id).
    async fn negotiate(&mut self) -> Result<(), String> {
        let request = ApiVersionsRequest {
            client_software_name: "krabka".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        let correlation_id = self.next_correlation_id();
        encode_request(
            &mut frame,
            ApiKey::ApiVersions,
            API_VERSIONS_VERSION,
            correlation_id,
            Some(&self.client_id),
            &request,
        )
        .map_err(|e| e.to_string())?;
        let mut body = self.round_trip(&frame, ApiKey::ApiVersions, API_VERSIONS_VERSION, correlation_id).await?;
        let response = ApiVersionsResponse::decode(&mut body, API_VERSIONS_VERSION).map_err(|e| e.to_string())?;
        if response.error_code != 0 {
            return Err(format!("ApiVersions answered error {}", response.error_code));
        }
        for key in [ApiKey::Vote, ApiKey::BeginQuorumEpoch, ApiKey::EndQuorumEpoch, ApiKey::Fetch] {
            let ours = key.info();
            let theirs = response.api_keys.iter().find(|k| k.api_key == key as i16);
            let Some(theirs) = theirs else { continue };
            let low =
                ours.min_version.max(theirs.min_version).max(if key == ApiKey::Fetch { MIN_FETCH_VERSION } else { 0 });
            let high = ours.max_version.min(theirs.max_version);
            if low <= high {
                self.versions.insert(key, high);
            }
        }
        Ok(())
    }

    fn next_correlation_id(&mut self) -> i32 {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        self.correlation_id
    }

    /// Sends `message` and waits for its response.
    async fn exchange(&mut self, message: &Message) -> PeerResult {
        let key = match message {
            Message::VoteRequest { .. } => ApiKey::Vote,
            Message::BeginQuorumEpoch { .. } => ApiKey::BeginQuorumEpoch,
            Message::EndQuorumEpoch { .. } => ApiKey::EndQuorumEpoch,
            _ => ApiKey::Fetch,
        };
        let Some(&version) = self.versions.get(&key) else {
            return Err(format!("voter {} does not speak {key:?}", self.peer));
        };
        let Some(body) = wire::request(&self.context, self.peer, message, version) else {
            return Err(format!("not a request: {message:?}"));
        };
        let correlation_id = self.next_correlation_id();
        let mut frame = BytesMut::new();
        encode_request_body(&mut frame, version, correlation_id, Some(&self.client_id), &body)
            .map_err(|e| e.to_string())?;
        let mut response = self.round_trip(&frame, key, version, correlation_id).await?;
        ResponseBody::decode(key, version, &mut response).map_err(|e| e.to_string())
    }

    /// Writes one request frame and reads its response's body.
    async fn round_trip(
        &mut self,
        frame: &[u8],
        key: ApiKey,
        version: i16,
        correlation_id: i32,
    ) -> Result<Bytes, String> {
        let exchange = async {
            self.stream.write_all(frame).await?;
            let size = self.stream.read_i32().await?;
            let size = usize::try_from(size).ok().filter(|&s| s <= MAX_RESPONSE_BYTES);
            let size = size.ok_or_else(|| std::io::Error::other("bad response size"))?;
            let mut body = vec![0u8; size];
            self.stream.read_exact(&mut body).await?;
            Ok::<_, std::io::Error>(Bytes::from(body))
        };
        let mut body = timeout(self.timeout, exchange)
            .await
            .map_err(|_| "request timed out".to_string())?
            .map_err(|e| e.to_string())?;
        let header = parse_response_header(key, version, &mut body).map_err(|e| e.to_string())?;
        if header.correlation_id != correlation_id {
            return Err(format!("correlation id {} answers {correlation_id}", header.correlation_id));
        }
        Ok(body)
    }
}
