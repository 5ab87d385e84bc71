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

use krabka_protocol::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use krabka_raft::wire::{self, Endpoint, WireContext, MIN_FETCH_VERSION};
use krabka_raft::Message;
use tokio::sync::mpsc as tokio_mpsc;

use super::channel::Channel;
use super::event::{Event, PeerResult};
use crate::config::security::ControllerClient;

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_millis(500);
/// The ApiVersions version raft's client opens with (flexible, with the
/// client's name).
const API_VERSIONS_VERSION: i16 = 3;

/// The voter a connection goes to.
pub(super) struct Connection {
    pub id: i32,
    pub endpoint: Endpoint,
    pub timeout: Duration,
    pub client: Arc<ControllerClient>,
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
    channel: Channel,
    versions: BTreeMap<ApiKey, i16>,
    peer: i32,
    context: Arc<WireContext>,
}

impl Session {
    async fn open(connection: &Connection, context: &Arc<WireContext>) -> Result<Session, String> {
        let Endpoint { host, port } = &connection.endpoint;
        let client_id = format!("raft-client-{}", context.node_id);
        let channel =
            Channel::connect_to_controller(host, *port, connection.timeout, client_id, &connection.client).await?;
        let mut session =
            Session { channel, versions: BTreeMap::new(), peer: connection.id, context: Arc::clone(context) };
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
        let response: ApiVersionsResponse =
            self.channel.call(ApiKey::ApiVersions, API_VERSIONS_VERSION, &request).await?;
        if response.error_code != 0 {
            return Err(format!("ApiVersions answered error {}", response.error_code));
        }
        let raft_apis = wire::RAFT_APIS;
        for key in raft_apis {
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

    /// Sends `message` and waits for its response.
    async fn exchange(&mut self, message: &Message) -> PeerResult {
        let key = match message {
            Message::VoteRequest { .. } => ApiKey::Vote,
            Message::BeginQuorumEpoch { .. } => ApiKey::BeginQuorumEpoch,
            Message::EndQuorumEpoch { .. } => ApiKey::EndQuorumEpoch,
            Message::FetchSnapshotRequest { .. } => ApiKey::FetchSnapshot,
            Message::UpdateVoterRequest { .. } => ApiKey::UpdateRaftVoter,
            Message::AddVoterRequest { .. } => ApiKey::AddRaftVoter,
            Message::RemoveVoterRequest { .. } => ApiKey::RemoveRaftVoter,
            _ => ApiKey::Fetch,
        };
        let Some(&version) = self.versions.get(&key) else {
            return Err(format!("voter {} does not speak {key:?}", self.peer));
        };
        // A pre-vote needs Vote v2 (KIP-996). Kafka's network client does
        // not send a request the peer cannot take and answers it with
        // UNSUPPORTED_VERSION instead, on which its Prospective runs for
        // election at once.
        if version < wire::PRE_VOTE_MIN_VERSION && matches!(message, Message::VoteRequest { pre_vote: true, .. }) {
            return Ok(wire::unsupported_vote_response());
        }
        let Some(body) = wire::request(&self.context, self.peer, message, version) else {
            return Err(format!("not a request: {message:?}"));
        };
        self.channel.call_body(key, version, &body).await
    }
}

/// The `kraft.version` range the node at `host:port` supports, from its
/// ApiVersions' supported features (as Kafka's leader probes a voter it is
/// asked to add); None when it does not answer or names none.
pub(super) async fn probe_kraft_versions(
    host: &str,
    port: u16,
    timeout: Duration,
    (client_id, client): (String, &ControllerClient),
) -> Option<(i16, i16)> {
    let mut channel = Channel::connect_to_controller(host, port, timeout, client_id, client).await.ok()?;
    let request = ApiVersionsRequest {
        client_software_name: "krabka".into(),
        client_software_version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    };
    // v4: below it a range starting at 0, as kraft.version's, is left out.
    let call = channel.call::<_, ApiVersionsResponse>(ApiKey::ApiVersions, 4, &request);
    let response = tokio::time::timeout(timeout, call).await.ok()?.ok()?;
    let feature = response.supported_features.iter().find(|f| f.name == "kraft.version")?;
    (response.error_code == 0).then_some((feature.min_version, feature.max_version))
}
