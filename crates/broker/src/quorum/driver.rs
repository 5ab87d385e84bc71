//! The thread that drives a `RaftNode`: events in (a request from a voter,
//! a response from one, a proposal, the clock), the node's actions out, in
//! the order it gives them.
//!
//! One thread, not a task: the node's log appends and fsyncs, and the
//! `quorum-state` file must be durable before the vote that follows it is
//! sent, so the driver blocks on the disk; nothing else waits on it but the
//! callers of `request` and `propose`.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI16, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use krabka_log::quorum_state::{self, QuorumState};
use krabka_log::{open_replicated_log, AppendInfo, LogConfig, LogError, PartitionLog, ReplicatedLog, SnapshotId};
use krabka_protocol::records::RecordBatches;
use krabka_protocol::{DescribeQuorumRequest, DescribeQuorumResponse, RequestBody, ResponseBody, Uuid};
use krabka_raft::wire::{self, Accepted, Endpoint, VoterChange, WireContext};
use krabka_raft::{
    Action, ElectionState, KraftUpgradeError, Message, QuorumDescription, RaftConfig, RaftNode, RoleName, VoterSet,
};
use tokio::sync::{mpsc as tokio_mpsc, oneshot, watch};

use super::event::Event;
use super::peer;
use crate::config::security::ControllerClient;

/// How much of the committed log one chunk handed to the loader holds.
const COMMITTED_CHUNK_BYTES: u32 = 1024 * 1024;

/// How often the node's timers are looked at: well under every raft
/// timeout (Kafka's smallest default is the 20 ms retry backoff).
const TICK: Duration = Duration::from_millis(5);

/// What a quorum member needs to start.
#[derive(Clone, Debug)]
pub struct QuorumSetup {
    pub context: WireContext,
    pub raft: RaftConfig,
    /// The metadata log's directory (`<metadata.log.dir>/__cluster_metadata-0`).
    pub log_dir: PathBuf,
    pub log_config: LogConfig,
    /// `controller.quorum.request.timeout.ms`.
    pub request_timeout: Duration,
    /// `metadata.log.max.record.bytes.between.snapshots` and
    /// `metadata.log.max.snapshot.interval.ms`: when whoever reads the
    /// committed log snapshots its state.
    pub snapshot_every_bytes: u64,
    pub snapshot_interval_ms: i64,
    /// How this node connects to the other controllers' listener.
    pub controller_client: Arc<ControllerClient>,
}

/// The node's state as its users see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuorumStatus {
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub role: RoleName,
    /// The high watermark once the node learned it (from its leader, or as
    /// the leader), 0 before.
    pub high_watermark: i64,
    pub log_end_offset: i64,
}

/// A running quorum member.
pub struct Quorum {
    events: mpsc::Sender<Event>,
    /// Where each node the driver knows of listens (for the active
    /// controller's address: a dynamic quorum's voters are in its log).
    addresses: Arc<Mutex<BTreeMap<i32, Endpoint>>>,
    /// The latest voter set's ids.
    voter_ids: Arc<Mutex<Vec<i32>>>,
    /// The latest `kraft.version` of the log.
    kraft_version: Arc<AtomicI16>,
    status: watch::Receiver<QuorumStatus>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What the quorum committed, in offset order: a snapshot first when the
/// log starts after one (at the start, or when the node replaced its log
/// with its leader's snapshot), then whole batches, each chunk as the high
/// watermark passed it.
pub enum Committed {
    /// Everything before `id.end_offset`, as the snapshot holds it.
    Snapshot {
        id: SnapshotId,
        bytes: Bytes,
    },
    Batches(Bytes),
}

pub type CommittedBatches = mpsc::Receiver<Committed>;

impl Quorum {
    /// Opens the metadata log and the election state in `setup.log_dir` and
    /// starts the driver, with one connection task per other voter on
    /// `runtime`. Everything the quorum commits comes out of the receiver.
    pub fn start(setup: QuorumSetup, runtime: &tokio::runtime::Handle) -> Result<(Quorum, CommittedBatches), LogError> {
        let started = Instant::now();
        let log = open_replicated_log(&setup.log_dir, setup.log_config.clone(), false, crate::clock::now_ms())?;
        let persisted = quorum_state::read(&setup.log_dir)?.map(|state| election_state(&state));
        let voters = setup.raft.voters.clone();
        let node = RaftNode::open(setup.raft.clone(), log, persisted, 0)?;
        let (events, receiver) = mpsc::channel();
        let configured = setup.context.voters.clone();
        let addresses = Arc::new(Mutex::new(configured.clone()));
        let voter_ids = Arc::new(Mutex::new(node.voter_ids()));
        let kraft_version = Arc::new(AtomicI16::new(node.kraft_version()));
        let context = Arc::new(setup.context);
        let (status_sender, status) = watch::channel(status_of(&node));
        let (committed, committed_batches) = mpsc::channel();
        let driver = Driver {
            delivered_end: 0,
            committed,
            node,
            context,
            dir: setup.log_dir,
            voters,
            peers: BTreeMap::new(),
            addresses: Addresses { configured, learned: BTreeMap::new(), shared: Arc::clone(&addresses) },
            voter_ids: Arc::clone(&voter_ids),
            kraft_version: Arc::clone(&kraft_version),
            known_voters: VoterSet::default(),
            voter_changes: BTreeMap::new(),
            next_change: 0,
            runtime: runtime.clone(),
            events: events.clone(),
            request_timeout: setup.request_timeout,
            controller_client: setup.controller_client,
            pending: BTreeMap::new(),
            status: status_sender,
            started,
        };
        let thread = std::thread::Builder::new().name("krabka-quorum".into()).spawn(move || driver.run(receiver))?;
        let quorum = Quorum { events, addresses, voter_ids, kraft_version, status, thread: Mutex::new(Some(thread)) };
        Ok((quorum, committed_batches))
    }

    /// A raft request another node sent, which arrived at `version`: its
    /// response, or None when it is not one of raft's or the quorum stopped.
    pub async fn request(&self, request: RequestBody, version: i16) -> Option<ResponseBody> {
        let (reply, answer) = oneshot::channel();
        self.events.send(Event::Request { request, version, reply }).ok()?;
        answer.await.ok()
    }

    /// Appends `values` as one batch when this node leads `epoch` (None
    /// when it does not: a plan made in one epoch is never appended in
    /// another); they are committed once the high watermark passes the batch.
    pub async fn propose(&self, values: Vec<Bytes>, epoch: i32) -> Result<Option<AppendInfo>, LogError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || LogError::Io(std::io::Error::other("the quorum stopped"));
        self.events.send(Event::Propose { values, epoch, reply }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// DescribeQuorum's answer, as Kafka's raft client gives it (the
    /// quorum from its leader, NOT_LEADER_OR_FOLLOWER elsewhere); None
    /// when the quorum stopped.
    pub async fn describe(&self, request: DescribeQuorumRequest, version: i16) -> Option<DescribeQuorumResponse> {
        let (reply, answer) = oneshot::channel();
        self.events.send(Event::DescribeQuorum { request, version, reply }).ok()?;
        answer.await.ok()
    }

    /// Keeps `bytes`, the metadata state after every offset before
    /// `id.end_offset`, as a snapshot (the loader's, when its policy says
    /// one is due); the driver stores it and applies the retention.
    pub fn store_snapshot(&self, id: SnapshotId, bytes: Bytes) {
        let _ = self.events.send(Event::StoreSnapshot { id, bytes });
    }

    pub fn status(&self) -> watch::Receiver<QuorumStatus> {
        self.status.clone()
    }

    /// Where node `id` listens on the controller listener, as far as this
    /// node knows (a voter, a configured one, or a leader a response named).
    pub fn endpoint_of(&self, id: i32) -> Option<Endpoint> {
        self.addresses.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned()
    }

    /// The voters' ids (static, or the latest voter set in the log).
    pub fn voter_ids(&self) -> Vec<i32> {
        self.voter_ids.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The log's latest `kraft.version`, committed or not (what Kafka's
    /// nodes report as its finalized level): 1 for a dynamic quorum.
    pub fn kraft_version(&self) -> i16 {
        self.kraft_version.load(Ordering::Relaxed)
    }

    /// Upgrades `kraft.version` (this node must lead): see
    /// `RaftNode::upgrade_kraft_version`. A stopped quorum does not lead.
    pub async fn upgrade_kraft_version(&self, version: i16, validate_only: bool) -> Result<(), KraftUpgradeError> {
        let (reply, answer) = oneshot::channel();
        let event = Event::UpgradeKraftVersion { version, validate_only, reply };
        self.events.send(event).map_err(|_| KraftUpgradeError::NotLeader)?;
        answer.await.unwrap_or(Err(KraftUpgradeError::NotLeader))
    }

    /// An AddRaftVoter or RemoveRaftVoter (KIP-853): its answer, once the
    /// change is committed or refused; None when the quorum stopped.
    pub async fn voter_change(&self, request: RequestBody) -> Option<ResponseBody> {
        let (reply, answer) = oneshot::channel();
        self.events.send(Event::VoterChange { request, reply }).ok()?;
        answer.await.ok()
    }

    /// Resigns if leading (the voters are told to elect another at once),
    /// then stops the driver and waits for it.
    pub fn stop(&self) {
        let _ = self.events.send(Event::Stop);
        if let Some(thread) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Quorum {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The kind of RPC a message belongs to: a response answers the oldest
/// request of its kind from the node it goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Vote,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    Fetch,
    FetchSnapshot,
    UpdateRaftVoter,
    AddRaftVoter,
    RemoveRaftVoter,
}

/// The RPC `message` is part of, and whether it is the response.
fn kind(message: &Message) -> (Kind, bool) {
    match message {
        Message::VoteRequest { .. } => (Kind::Vote, false),
        Message::VoteResponse { .. } => (Kind::Vote, true),
        Message::BeginQuorumEpoch { .. } => (Kind::BeginQuorumEpoch, false),
        Message::BeginQuorumEpochResponse { .. } => (Kind::BeginQuorumEpoch, true),
        Message::EndQuorumEpoch { .. } => (Kind::EndQuorumEpoch, false),
        Message::EndQuorumEpochResponse { .. } => (Kind::EndQuorumEpoch, true),
        Message::FetchRequest { .. } => (Kind::Fetch, false),
        Message::FetchResponse(_) => (Kind::Fetch, true),
        Message::FetchSnapshotRequest { .. } => (Kind::FetchSnapshot, false),
        Message::FetchSnapshotResponse(_) => (Kind::FetchSnapshot, true),
        Message::UpdateVoterRequest { .. } => (Kind::UpdateRaftVoter, false),
        Message::UpdateVoterResponse { .. } => (Kind::UpdateRaftVoter, true),
        Message::AddVoterRequest { .. } => (Kind::AddRaftVoter, false),
        Message::AddVoterResponse { .. } => (Kind::AddRaftVoter, true),
        Message::RemoveVoterRequest { .. } => (Kind::RemoveRaftVoter, false),
        Message::RemoveVoterResponse { .. } => (Kind::RemoveRaftVoter, true),
    }
}

/// A request waiting for the node's answer.
struct Pending {
    reply: oneshot::Sender<ResponseBody>,
    version: i16,
}

/// Where the other nodes are: the configured voters and bootstrap servers
/// (and this node), and the leaders' endpoints learned from responses; a
/// dynamic quorum's voters' come from the voter set in the log.
struct Addresses {
    configured: BTreeMap<i32, Endpoint>,
    learned: BTreeMap<i32, Endpoint>,
    /// All of them, for [`Quorum::endpoint_of`].
    shared: Arc<Mutex<BTreeMap<i32, Endpoint>>>,
}

struct Driver {
    node: RaftNode<PartitionLog>,
    /// Rebuilt when the voter set changes (responses name the leader's
    /// endpoint from it).
    context: Arc<WireContext>,
    dir: PathBuf,
    voters: Vec<i32>,
    /// One connection per node sent to, by id, with the endpoint it goes to.
    peers: BTreeMap<i32, (Endpoint, tokio_mpsc::UnboundedSender<Message>)>,
    addresses: Addresses,
    /// The voter set the context was built from.
    known_voters: VoterSet,
    voter_ids: Arc<Mutex<Vec<i32>>>,
    kraft_version: Arc<AtomicI16>,
    /// The AddRaftVoter and RemoveRaftVoter waiting for their change.
    voter_changes: BTreeMap<u64, (bool, oneshot::Sender<ResponseBody>)>,
    next_change: u64,
    runtime: tokio::runtime::Handle,
    events: mpsc::Sender<Event>,
    request_timeout: Duration,
    controller_client: Arc<ControllerClient>,
    pending: BTreeMap<(i32, Kind), VecDeque<Pending>>,
    status: watch::Sender<QuorumStatus>,
    /// Where the committed log handed out so far ends.
    delivered_end: i64,
    committed: mpsc::Sender<Committed>,
    started: Instant,
}

impl Driver {
    fn now_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    fn run(mut self, events: mpsc::Receiver<Event>) {
        let mut next_tick = Instant::now();
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            let outcome = match events.recv_timeout(wait) {
                Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(event) => self.on_event(event),
                Err(RecvTimeoutError::Timeout) => Ok(()),
            };
            let outcome = outcome.and_then(|()| {
                if Instant::now() < next_tick {
                    return Ok(());
                }
                next_tick = Instant::now() + TICK;
                let actions = self.node.tick(self.now_ms())?;
                self.perform(actions)
            });
            if let Err(e) = outcome {
                // As Kafka's raft thread: a log that cannot be written ends
                // the member rather than let it vote or lead on a lie.
                tracing::error!(error = %e, "the metadata quorum stopped: its log failed");
                return;
            }
        }
        let actions = self.node.resign(self.now_ms());
        if let Err(e) = self.perform(actions) {
            tracing::warn!(error = %e, "resigning the metadata quorum's lead failed");
        }
        // As Kafka closes its metadata log: flushed, the active segment's
        // indexes trimmed, so that the next start finds them whole.
        if let Err(e) = self.node.into_log().close(crate::clock::now_ms()) {
            tracing::warn!(error = %e, "closing the metadata log failed");
        }
    }

    fn on_event(&mut self, event: Event) -> Result<(), LogError> {
        let now = self.now_ms();
        match event {
            Event::Request { request, version, reply } => {
                // Learned only from a request the wire layer accepts (this
                // cluster's, well formed).
                let endpoints = endpoints_in_request(&request, &self.context.listener);
                match wire::accept_request(&self.context, &self.node.election_state(), request, version) {
                    Accepted::Message { from, message } => {
                        self.learn_endpoints(endpoints);
                        self.pending.entry((from, kind(&message).0)).or_default().push_back(Pending { reply, version });
                        let actions = self.node.handle(now, from, message)?;
                        self.perform(actions)?;
                    }
                    Accepted::Refused(response) => {
                        let _ = reply.send(response);
                    }
                    Accepted::NotRaft(_) => {}
                }
            }
            Event::Response { peer, sent, result } => match result.map(|body| {
                self.learn_endpoints(endpoints_in_response(&body));
                wire::accept_response(&sent, body)
            }) {
                Ok(Ok(message)) => match self.node.handle(now, peer, message) {
                    Ok(actions) => self.perform(actions)?,
                    // What a peer sent that the log refuses (a bad batch, a
                    // gap) is dropped; only the disk failing stops the
                    // member. The node keeps any action it had queued and
                    // returns it with the next.
                    Err(LogError::Io(e)) => return Err(LogError::Io(e)),
                    Err(refused) => tracing::warn!(peer, error = %refused, "a raft response was refused by the log"),
                },
                Ok(Err(dropped)) => tracing::debug!(peer, ?dropped, "a raft response gave nothing to act on"),
                Err(error) => tracing::debug!(peer, %error, "a raft request failed"),
            },
            Event::Propose { values, epoch, reply } => {
                if self.node.epoch() != epoch {
                    let _ = reply.send(Ok(None));
                    return Ok(());
                }
                let proposed = self.node.propose(&values, now);
                let (answer, outcome) = match proposed {
                    Ok(Some((info, actions))) => (Ok(Some(info)), self.perform(actions)),
                    Ok(None) => (Ok(None), Ok(())),
                    Err(e) => (Err(LogError::Io(std::io::Error::other(e.to_string()))), Err(e)),
                };
                let _ = reply.send(answer);
                outcome?;
            }
            Event::DescribeQuorum { request, version, reply } => {
                let description = self.node.describe_quorum(now).map(|d| in_wall_time(d, now, crate::clock::now_ms()));
                let (listener, voters) = (&self.context.listener, &self.context.voters);
                let _ = reply.send(wire::describe_quorum_response(
                    listener,
                    voters,
                    &request,
                    description.as_ref(),
                    version,
                ));
            }
            Event::StoreSnapshot { id, bytes } => {
                if self.node.store_snapshot(id, &bytes, now)? {
                    let start = self.node.log().log_start_offset();
                    tracing::info!(
                        end_offset = id.end_offset,
                        epoch = id.epoch,
                        bytes = bytes.len(),
                        log_start = start,
                        "metadata snapshot stored"
                    );
                }
            }
            Event::VoterChange { request, reply } => self.on_voter_change(now, request, reply)?,
            Event::Probed { request, kraft_versions } => {
                let actions = self.node.voter_probed(now, request, kraft_versions)?;
                self.perform(actions)?;
            }
            Event::UpgradeKraftVersion { version, validate_only, reply } => {
                let (upgraded, actions) = self.node.upgrade_kraft_version(now, version, validate_only)?;
                let _ = reply.send(upgraded);
                self.perform(actions)?;
            }
            Event::Stop => {}
        }
        Ok(())
    }

    /// AddRaftVoter or RemoveRaftVoter: checked on the wire, then the
    /// node's, answered when the node says the change ended.
    fn on_voter_change(
        &mut self,
        now: i64,
        request: RequestBody,
        reply: oneshot::Sender<ResponseBody>,
    ) -> Result<(), LogError> {
        let change = match wire::accept_voter_change(&self.context, &request) {
            None => return Ok(()),
            Some(Err(refused)) => {
                let _ = reply.send(refused);
                return Ok(());
            }
            Some(Ok(change)) => change,
        };
        self.next_change += 1;
        let id = self.next_change;
        let is_add = matches!(change, VoterChange::Add(..));
        self.voter_changes.insert(id, (is_add, reply));
        let actions = match change {
            VoterChange::Add(voter, ack_when_committed) => {
                self.node.add_voter_acked(now, id, voter, ack_when_committed)
            }
            VoterChange::Remove { id: voter, directory_id } => self.node.remove_voter(now, id, voter, directory_id)?,
        };
        self.perform(actions)
    }

    /// Remembers where the nodes a message names listen: an observer that
    /// asked a bootstrap server learns where its leader is, and a follower
    /// whose voter set does not hold its new leader yet (the VotersRecord
    /// that added it had not reached this node) can still fetch from it.
    fn learn_endpoints(&mut self, endpoints: Vec<(i32, Endpoint)>) {
        for (id, endpoint) in endpoints.into_iter().filter(|(id, _)| *id >= 0) {
            if self.addresses.learned.get(&id) != Some(&endpoint) {
                self.addresses.shared.lock().unwrap_or_else(|e| e.into_inner()).insert(id, endpoint.clone());
                self.addresses.learned.insert(id, endpoint);
            }
        }
    }

    /// Asks `voter`, on the controller listener, for the `kraft.version`
    /// range it supports (ApiVersions' supported features, as Kafka's
    /// leader asks it), and reports the answer as [`Event::Probed`].
    fn probe(&self, request: u64, voter: &krabka_raft::VoterNode) {
        let endpoint = voter.listener(&self.context.listener).map(|l| (l.host.clone(), l.port));
        let (events, timeout, client_id) =
            (self.events.clone(), self.request_timeout, format!("raft-client-{}", self.context.node_id));
        let client = Arc::clone(&self.controller_client);
        self.runtime.spawn(async move {
            let kraft_versions = match endpoint {
                Some((host, port)) => peer::probe_kraft_versions(&host, port, timeout, (client_id, &client)).await,
                None => None,
            };
            let _ = events.send(Event::Probed { request, kraft_versions });
        });
    }

    /// The node's actions, in order: an election state reaches the disk
    /// before anything after it leaves.
    fn perform(&mut self, actions: Vec<Action>) -> Result<(), LogError> {
        for action in actions {
            match action {
                Action::PersistElectionState(state) => {
                    // Kafka's data version 1 (no voter list) once the voters
                    // are in the log (KIP-853), 0 with static voters.
                    let version = i16::from(self.node.kraft_version() >= 1);
                    let voters = (version == 0).then_some(&self.voters[..]);
                    quorum_state::write(&self.dir, &quorum_state(&state, voters), version)?;
                }
                Action::Send { to, message } => self.send(to, message),
                Action::SnapshotInstalled { id } => {
                    tracing::info!(
                        end_offset = id.end_offset,
                        epoch = id.epoch,
                        "metadata log replaced by the leader's snapshot"
                    );
                }
                Action::Committed { .. } | Action::BecameLeader { .. } | Action::SteppedDown { .. } => {}
                Action::ProbeVoter { request, voter } => self.probe(request, &voter),
                Action::VoterChangeDone { request, error } => {
                    if let Some((is_add, reply)) = self.voter_changes.remove(&request) {
                        let code = wire::voter_change_code(error);
                        let _ = reply.send(wire::voter_change_response(is_add, code, None));
                    }
                }
            }
        }
        self.deliver_committed()?;
        self.refresh_voters();
        let status = status_of(&self.node);
        self.status.send_if_modified(|current| {
            if (current.epoch, current.leader_id, current.role) != (status.epoch, status.leader_id, status.role) {
                // As Kafka's raft client logs each transition.
                tracing::info!(epoch = status.epoch, leader = ?status.leader_id, role = ?status.role, "metadata quorum state changed");
            }
            std::mem::replace(current, status) != status
        });
        Ok(())
    }

    /// Hands out what the high watermark passed since the last call, after
    /// the log's snapshot when what was handed out ends before the log's
    /// start. The high watermark never goes back and the log is never cut
    /// below it, so what was handed out stays committed.
    fn deliver_committed(&mut self) -> Result<(), LogError> {
        if self.delivered_end < self.node.log().log_start_offset() {
            let Some((id, bytes)) = self.node.log().latest_snapshot()? else {
                let start = self.node.log().log_start_offset();
                return Err(LogError::Io(std::io::Error::other(format!(
                    "the metadata log starts at {start} after no snapshot"
                ))));
            };
            debug_assert!(id.end_offset >= self.node.log().log_start_offset(), "a snapshot before the log start");
            self.delivered_end = id.end_offset;
            let _ = self.committed.send(Committed::Snapshot { id, bytes });
        }
        let high_watermark = self.node.high_watermark();
        while self.delivered_end < high_watermark {
            let read = ReplicatedLog::read(self.node.log(), self.delivered_end, COMMITTED_CHUNK_BYTES, high_watermark)?;
            // A read may end inside a batch: only whole ones are handed out.
            let Some((end, bytes)) = whole_batches(&read) else {
                break;
            };
            debug_assert!(end > self.delivered_end && end <= high_watermark, "a chunk outside what is committed");
            self.delivered_end = end;
            // Nobody listening (the broker is stopping) is not the quorum's failure.
            let _ = self.committed.send(Committed::Batches(read.slice(..bytes)));
        }
        Ok(())
    }

    /// When the voter set changed, the context (whose endpoints responses
    /// name) is rebuilt with its voters' endpoints.
    fn refresh_voters(&mut self) {
        self.kraft_version.store(self.node.kraft_version(), Ordering::Relaxed);
        if self.node.voter_set() == &self.known_voters {
            return;
        }
        self.known_voters = self.node.voter_set().clone();
        *self.voter_ids.lock().unwrap_or_else(|e| e.into_inner()) = self.known_voters.ids();
        let mut context = (*self.context).clone();
        for voter in self.known_voters.nodes() {
            if let Some(l) = voter.listener(&context.listener) {
                context.voters.insert(voter.id, Endpoint { host: l.host.clone(), port: l.port });
            }
        }
        let mut shared = self.addresses.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.extend(context.voters.iter().map(|(id, e)| (*id, e.clone())));
        drop(shared);
        self.context = Arc::new(context);
    }

    /// Where node `to` is: the voter set's endpoint, a configured one, or
    /// one a response named.
    fn endpoint_of(&self, to: i32) -> Option<Endpoint> {
        let from_voters = self.node.voter_set().get(to).and_then(|v| v.listener(&self.context.listener));
        from_voters
            .map(|l| Endpoint { host: l.host.clone(), port: l.port })
            .or_else(|| self.addresses.configured.get(&to).cloned())
            .or_else(|| self.addresses.learned.get(&to).cloned())
    }

    /// A request to `to`, over its connection (opened on first use, and
    /// again when its endpoint changed); dropped when its address is unknown.
    fn send_request(&mut self, to: i32, message: Message) {
        let Some(endpoint) = self.endpoint_of(to) else {
            tracing::debug!(to, "no address for a raft request's target");
            return;
        };
        let current = self.peers.get(&to).is_some_and(|(at, _)| *at == endpoint);
        if !current {
            let connection = peer::Connection {
                id: to,
                endpoint: endpoint.clone(),
                timeout: self.request_timeout,
                client: Arc::clone(&self.controller_client),
            };
            let sender = peer::spawn(&self.runtime, connection, Arc::clone(&self.context), self.events.clone());
            self.peers.insert(to, (endpoint, sender));
        }
        if let Some((_, peer)) = self.peers.get(&to) {
            let _ = peer.send(message);
        }
    }

    fn send(&mut self, to: i32, message: Message) {
        let (kind, is_response) = kind(&message);
        if !is_response {
            self.send_request(to, message);
            return;
        }
        let waiting = self.pending.get_mut(&(to, kind)).and_then(VecDeque::pop_front);
        debug_assert!(waiting.is_some(), "a response to {to} that no request of its asked for: {message:?}");
        if let Some(Pending { reply, version }) = waiting {
            if let Some(response) = wire::response(&self.context, &message, version) {
                let _ = reply.send(response);
            }
        }
    }
}

/// The offset after the last whole batch of `batches` and the bytes up to
/// its end; None when there is no whole batch.
fn whole_batches(batches: &Bytes) -> Option<(i64, usize)> {
    let mut whole = None;
    let mut bytes = 0;
    for batch in RecordBatches::new(batches.clone()).map_while(Result::ok) {
        bytes += batch.as_bytes().len();
        whole = Some((batch.next_offset(), bytes));
    }
    whole
}

/// `description` with its times (the driver's clock, `now_ms` now) as
/// wall-clock milliseconds (`wall_now_ms` now), as DescribeQuorum reports them.
fn in_wall_time(mut description: QuorumDescription, now_ms: i64, wall_now_ms: i64) -> QuorumDescription {
    let wall = |at: Option<i64>| at.map(|at| wall_now_ms - (now_ms - at));
    for replica in description.voters.iter_mut().chain(description.observers.iter_mut()) {
        replica.last_fetch_ms = wall(replica.last_fetch_ms);
        replica.last_caught_up_ms = wall(replica.last_caught_up_ms);
    }
    description
}

fn status_of(node: &RaftNode<PartitionLog>) -> QuorumStatus {
    QuorumStatus {
        epoch: node.epoch(),
        leader_id: node.leader_id(),
        role: node.role(),
        // 0 until learned from the leader: a restarted node's log start
        // (its snapshot) is committed, but is not yet what the quorum has
        // committed, and a node must not count itself caught up with it.
        high_watermark: node.known_high_watermark().unwrap_or(0),
        log_end_offset: node.log().log_end_offset(),
    }
}

/// The election state as Kafka's `quorum-state` holds it: with the static
/// voter set at data version 0, without at 1.
fn quorum_state(state: &ElectionState, voters: Option<&[i32]>) -> QuorumState {
    QuorumState {
        leader_epoch: state.epoch,
        leader_id: state.leader_id.unwrap_or(-1),
        voted_id: state.voted_for.unwrap_or(-1),
        voted_directory_id: Uuid::ZERO,
        current_voters: voters.map(<[i32]>::to_vec),
    }
}

/// What a `quorum-state` file says, as the node takes it; Kafka's -1s are
/// "none" (a fresh file's epoch -1 is epoch 0).
fn election_state(state: &QuorumState) -> ElectionState {
    ElectionState {
        epoch: state.leader_epoch.max(0),
        voted_for: (state.voted_id >= 0).then_some(state.voted_id),
        leader_id: (state.leader_id >= 0).then_some(state.leader_id),
    }
}

/// The nodes' endpoints a raft response names (NodeEndpoints: Vote,
/// BeginQuorumEpoch and EndQuorumEpoch v1+, Fetch v17+, FetchSnapshot v1+),
/// as Kafka's replicas learn them (KIP-853).
fn endpoints_in_response(body: &ResponseBody) -> Vec<(i32, Endpoint)> {
    let endpoint = |host: &String, port: u16| Endpoint { host: host.clone(), port };
    match body {
        ResponseBody::Vote(r) => r.node_endpoints.iter().map(|e| (e.node_id, endpoint(&e.host, e.port))).collect(),
        ResponseBody::BeginQuorumEpoch(r) => {
            r.node_endpoints.iter().map(|e| (e.node_id, endpoint(&e.host, e.port))).collect()
        }
        ResponseBody::EndQuorumEpoch(r) => {
            r.node_endpoints.iter().map(|e| (e.node_id, endpoint(&e.host, e.port))).collect()
        }
        ResponseBody::Fetch(r) => r
            .node_endpoints
            .iter()
            .filter_map(|e| Some((e.node_id, endpoint(&e.host, u16::try_from(e.port).ok()?))))
            .collect(),
        ResponseBody::FetchSnapshot(r) => {
            r.node_endpoints.iter().map(|e| (e.node_id, endpoint(&e.host, e.port))).collect()
        }
        _ => Vec::new(),
    }
}

/// The sender's endpoint on `listener` that a BeginQuorumEpoch or
/// EndQuorumEpoch (v1+) carries: the leader says where to fetch from.
fn endpoints_in_request(body: &RequestBody, listener: &str) -> Vec<(i32, Endpoint)> {
    let (leader, endpoints): (Option<i32>, Vec<(&str, &String, u16)>) = match body {
        RequestBody::BeginQuorumEpoch(r) => (
            r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.leader_id).next(),
            r.leader_endpoints.iter().map(|e| (e.name.as_str(), &e.host, e.port)).collect(),
        ),
        RequestBody::EndQuorumEpoch(r) => (
            r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.leader_id).next(),
            r.leader_endpoints.iter().map(|e| (e.name.as_str(), &e.host, e.port)).collect(),
        ),
        _ => return Vec::new(),
    };
    let Some(leader) = leader else { return Vec::new() };
    endpoints
        .into_iter()
        .filter(|(name, ..)| *name == listener)
        .map(|(_, host, port)| (leader, Endpoint { host: host.clone(), port }))
        .collect()
}
