//! `RaftNode`: one node of a KRaft quorum (Kafka's `KafkaRaftClient` with
//! its `QuorumState`), as a sans-IO state machine over a [`ReplicatedLog`].
//!
//! Inputs are [`RaftNode::handle`] (a message from a node), [`RaftNode::tick`]
//! (the timers) and [`RaftNode::propose`]; each returns the [`Action`]s the
//! driver must perform, in order. Times are arguments; the election
//! timeout's jitter comes from a seeded generator, so a run is a function
//! of its inputs.
//!
//! States (Kafka's): Unattached (an epoch, maybe a vote, no leader),
//! Prospective (KIP-996: asks for pre-votes, which change no one's state,
//! before it bumps the epoch), Candidate (voted for itself in a new epoch),
//! Leader, Follower (knows the leader of its epoch and fetches from it) and
//! Resigned (a leader that gave up its epoch). An observer (not a voter)
//! is only ever Unattached or Follower: it fetches and never votes.
//!
//! Replication is pull-based: a follower fetches from its log end with the
//! epoch of its last entry; the leader answers with records, or with the
//! diverging epoch (its end offset for that epoch) for the follower to
//! truncate to and fetch again. The leader moves the high watermark to the
//! largest offset a majority of voters fetched, but only past the first
//! offset of its own epoch (it appends a LeaderChange control record when
//! it is elected), so it never commits an older epoch's entry by counting alone.
//! The high watermark never goes back. A leader that has not heard a fetch
//! from a majority within the fetch timeout resigns.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use krabka_log::{AppendInfo, LogError, ReplicatedLog, SnapshotId};

use krabka_protocol::Uuid;

use crate::message::{Action, ElectionState, Message, RaftError};
use crate::served::Served;
use crate::voters::{
    KraftUpgrade, Listener, PendingChange, ReplicaKey, VoterHistory, VoterNode, VoterSet, KRAFT_VERSION_MAX,
    SNAPSHOT_HEAD_BYTES,
};

/// Timers, in milliseconds, and the seed of the election jitter.
#[derive(Clone, Debug)]
pub struct RaftConfig {
    pub node_id: i32,
    /// The static voters (`controller.quorum.voters`), the voter set at
    /// `kraft.version` 0; empty for a dynamic quorum, whose voters are in
    /// its log (KIP-853, [`crate::voters`]).
    pub voters: Vec<i32>,
    /// Who this node is to a dynamic quorum, and whom it asks first.
    pub membership: Membership,
    /// `controller.quorum.election.timeout.ms`; each timeout is drawn from
    /// [election_timeout, 2 * election_timeout).
    pub election_timeout_ms: i64,
    /// `controller.quorum.fetch.timeout.ms`: a follower that has not heard
    /// from its leader for this long runs for election; a leader that has
    /// not heard from a majority resigns.
    pub fetch_timeout_ms: i64,
    /// The MaxWaitMs this node's fetches ask for (Kafka's fixed 500 ms): how
    /// long a leader may hold one with nothing to return.
    pub fetch_max_wait_ms: i64,
    /// How long a request may go unanswered before it is sent again.
    pub retry_backoff_ms: i64,
    /// `controller.quorum.request.timeout.ms`: how long a voter change
    /// (AddRaftVoter, RemoveRaftVoter) may wait for its turn and answers.
    pub request_timeout_ms: i64,
    /// `controller.quorum.fetch.max.bytes`: the MaxBytes this node's
    /// fetches ask for (a leader returns up to each fetch's own), and the
    /// chunk it serves of a snapshot.
    pub max_fetch_bytes: u32,
    /// `controller.quorum.fetch.snapshot.max.bytes`: the MaxBytes of this
    /// follower's FetchSnapshot requests (the leader sends at most that of
    /// a snapshot in one response).
    pub fetch_snapshot_max_bytes: i32,
    /// `metadata.max.retention.bytes`: once the log and its snapshots hold
    /// more, the oldest snapshot goes and the log before the next one with
    /// it (the newest snapshot always stays); -1 for no limit.
    pub retention_max_bytes: i64,
    /// `metadata.max.retention.ms`: a snapshot whose last contained log
    /// timestamp is older goes, and the log before the next one with it
    /// (the newest snapshot always stays); -1 for no limit.
    pub retention_ms: i64,
    pub seed: u64,
}

/// This node as a dynamic quorum knows it (KIP-853): its metadata log
/// directory's id, the listeners it is reached on (a controller's; none for
/// a broker-only node), and the nodes it asks for the leader when it knows
/// none (`controller.quorum.bootstrap.servers`, by the ids the driver gives
/// them; empty: the voters).
#[derive(Clone, Debug)]
pub struct Membership {
    pub directory_id: Uuid,
    pub listeners: Vec<Listener>,
    pub bootstrap: Vec<i32>,
    /// `controller.quorum.auto.join.enable`: a controller not among the
    /// voters asks its leader to add it.
    pub auto_join: bool,
}

impl Default for Membership {
    fn default() -> Self {
        Membership { directory_id: Uuid::ZERO, listeners: Vec::new(), bootstrap: Vec::new(), auto_join: false }
    }
}

/// A fetch the leader answers, or holds until it has something to
/// return: what the answer echoes and how many bytes it may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeldFetch {
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
    pub max_bytes: i32,
}

/// How often retention runs besides after each snapshot stored: Kafka's
/// raft client cleans its metadata log every minute, so that snapshots
/// age out by `metadata.max.retention.ms` with no new one taken.
pub(crate) const CLEAN_INTERVAL_MS: i64 = 60_000;

/// What the leader knows of one replica.
#[derive(Clone, Debug, Default)]
pub(crate) struct Progress {
    /// The replica holds the leader's log below it.
    pub(crate) fetch_offset: i64,
    pub(crate) last_fetch_ms: Option<i64>,
    /// A fetch with nothing to return yet, answered by the time given
    /// (its MaxWaitMs after it came).
    pub(crate) parked: Option<(i64, HeldFetch)>,
    /// The fetches served it, for DescribeQuorum.
    pub(crate) served: Option<Served>,
    /// When it last fetched up to the leader's log end (an observer must
    /// have, to be added as a voter).
    pub(crate) caught_up_ms: Option<i64>,
}

/// A snapshot a follower is fetching (KIP-630), and what it holds of it
/// so far.
#[derive(Clone, Debug)]
pub(crate) struct Download {
    pub(crate) id: SnapshotId,
    /// How many bytes of it the log's partial snapshot holds (the next
    /// chunk's position).
    pub(crate) received: u64,
}

#[derive(Clone, Debug)]
pub(crate) enum Role {
    Unattached {
        election_at: i64,
    },
    /// `leader`: the leader it followed of this epoch, if it did (Kafka's
    /// Prospective keeps it: it goes back to following it when the pre-vote
    /// fails, and a response naming it does not end the pre-vote).
    Prospective {
        granted: BTreeSet<i32>,
        rejected: BTreeSet<i32>,
        election_at: i64,
        leader: Option<i32>,
    },
    Candidate {
        granted: BTreeSet<i32>,
        rejected: BTreeSet<i32>,
        election_at: i64,
    },
    /// `progress`: every voter under its key, and the observers that
    /// fetched lately under theirs (two with one id and different
    /// directory ids are two replicas).
    Leader {
        progress: BTreeMap<ReplicaKey, Progress>,
        epoch_start: i64,
        check_at: i64,
        begin_at: i64,
    },
    /// `download`: the snapshot it fetches from the leader (KIP-630)
    /// instead of the log, when the leader sent it to one.
    Follower {
        leader: i32,
        fetch_deadline: i64,
        last_sent: Option<i64>,
        heard_ms: Option<i64>,
        download: Option<Download>,
    },
    Resigned {
        election_at: i64,
    },
}

/// The state's name, as Kafka's `QuorumState` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleName {
    Unattached,
    Prospective,
    Candidate,
    Leader,
    Follower,
    Resigned,
}

pub struct RaftNode<L> {
    pub(crate) config: RaftConfig,
    pub(crate) log: L,
    pub(crate) epoch: i32,
    pub(crate) voted_for: Option<i32>,
    pub(crate) role: Role,
    pub(crate) high_watermark: i64,
    /// Whether this node learned the high watermark since it opened (from
    /// its leader's fetch answers, or as the leader committing its epoch):
    /// before that, `high_watermark` is only the log start, and a node must
    /// not count itself caught up with it (Kafka's high watermark is
    /// unknown until the leader tells it).
    pub(crate) high_watermark_learned: bool,
    /// The log's snapshots (their sizes), kept here as every change to
    /// them is the node's; bootstrap snapshots (end offset 0) are not
    /// among them (they are never sent, as in Kafka).
    pub(crate) snapshots: BTreeMap<SnapshotId, u64>,
    /// `kraft.version` and the voter sets, as the log says them.
    pub(crate) voters: VoterHistory,
    /// The voter change the leader works on (one at a time).
    pub(crate) pending_change: Option<PendingChange>,
    /// When a follower voter next checks that the voter set has its
    /// listeners (UpdateRaftVoter), or an observer asks to join: Kafka's
    /// follower's update-voter-set period, which each follower state starts
    /// afresh (`RaftNode::update_voter_period`).
    pub(crate) update_voter_at: i64,
    /// The leader's upgrade to a dynamic quorum (`kraft_upgrade`).
    pub(crate) kraft_upgrade: KraftUpgrade,
    /// The epoch whose leader took this static voter's UpdateRaftVoter.
    pub(crate) told_leader_epoch: Option<i32>,
    rng: u64,
    pub(crate) actions: Vec<Action>,
    /// Fetches the node held as leader and must still answer (with
    /// NOT_LEADER_OR_FOLLOWER, as Kafka does) once it stopped leading: every
    /// request gets exactly one answer, so a driver can pair them in order.
    pub(crate) released_fetches: Vec<(i32, (i64, i32))>,
    /// When retention runs next with no snapshot stored meanwhile.
    pub(crate) next_clean_ms: i64,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl<L: ReplicatedLog> RaftNode<L> {
    /// Starts a node on `log` with the election state persisted before (None
    /// on a first start). A node that knew a leader follows it again; one
    /// that was the leader comes back Resigned; any other waits out an
    /// election timeout. The high watermark starts at the log start (what
    /// is before it is in a snapshot, committed; the rest is not persisted:
    /// the leader tells it again). Snapshots before the log start are
    /// removed: nothing needs them.
    pub fn open(
        config: RaftConfig,
        mut log: L,
        persisted: Option<ElectionState>,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let mut state = persisted.unwrap_or(ElectionState { epoch: 0, voted_for: None, leader_id: None });
        log.delete_snapshots_before(log.log_start_offset())?;
        // Only whole snapshots count (a torn newest one is skipped, as the
        // log skips it), and bootstrap ones (end offset 0) never.
        let whole = log.latest_snapshot_id()?.filter(|id| id.end_offset > 0);
        if let Some(latest) = whole {
            // Kafka's `truncateToLatestSnapshot` at start: a snapshot past
            // the log (a crash between storing one fetched from the leader
            // and replacing the log with it) replaces the log.
            let last_epoch = log.last_epoch().unwrap_or(0);
            let past =
                latest.epoch > last_epoch || (latest.epoch == last_epoch && latest.end_offset > log.log_end_offset());
            if past {
                log.truncate_fully_and_start_at(latest.end_offset, now_ms)?;
                log.delete_snapshots_before(latest.end_offset)?;
            }
        }
        let snapshots: BTreeMap<SnapshotId, u64> = log
            .snapshots()?
            .into_iter()
            .filter(|(id, _)| id.end_offset > 0 && whole.is_some_and(|latest| *id <= latest))
            .collect();
        let high_watermark = log.log_start_offset();
        let voters = read_voter_history(&log, &config)?;
        let rng = config.seed ^ (config.node_id as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
        // A follower's first UpdateRaftVoter (or auto-join) waits a period,
        // as Kafka's FollowerState starts its timer.
        let update_voter_at = now_ms + config.fetch_timeout_ms;
        let mut node = RaftNode {
            config,
            log,
            epoch: state.epoch,
            voted_for: state.voted_for,
            role: Role::Unattached { election_at: now_ms },
            high_watermark,
            high_watermark_learned: false,
            snapshots,
            voters,
            pending_change: None,
            update_voter_at,
            kraft_upgrade: KraftUpgrade::Empty,
            told_leader_epoch: None,
            rng,
            actions: Vec::new(),
            released_fetches: Vec::new(),
            next_clean_ms: now_ms + CLEAN_INTERVAL_MS,
        };
        // As Kafka: an election state behind the log (lost, or never
        // written) starts Unattached in the log's last epoch, so the node's
        // requests are never for an epoch older than its own entries.
        let log_epoch = node.last_fetched_epoch();
        let behind = state.epoch < log_epoch;
        if behind {
            state = ElectionState { epoch: log_epoch, voted_for: None, leader_id: None };
            (node.epoch, node.voted_for) = (state.epoch, state.voted_for);
        }
        let election_at = node.election_deadline(now_ms);
        node.role = match state.leader_id {
            Some(leader) if leader == node.config.node_id => Role::Resigned { election_at },
            Some(leader) => Role::Follower {
                leader,
                fetch_deadline: now_ms + node.config.fetch_timeout_ms,
                last_sent: None,
                heard_ms: None,
                download: None,
            },
            None => Role::Unattached { election_at },
        };
        if behind {
            node.persist();
        }
        Ok(node)
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    pub fn voted_for(&self) -> Option<i32> {
        self.voted_for
    }

    /// One past the last committed offset (the log start until the node
    /// learns more: what a snapshot holds is committed).
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The high watermark once this node learned it since it opened, from
    /// its leader or as the leader; None before (Kafka's unknown high
    /// watermark), when only the log start is known to be committed.
    pub fn known_high_watermark(&self) -> Option<i64> {
        self.high_watermark_learned.then_some(self.high_watermark)
    }

    pub fn log(&self) -> &L {
        &self.log
    }

    /// The log back, as a driver stopping the node takes it.
    pub fn into_log(self) -> L {
        self.log
    }

    /// Whether this node is in the latest voter set: its id, and its
    /// directory id where the set has one (Kafka's `ReplicaKey`). A node
    /// whose disk was replaced has the id of a voter but not its log, and
    /// must not vote or run in its place (it asks to be removed and added
    /// again, `maybe_auto_join`).
    pub fn is_voter(&self) -> bool {
        self.holds_me(self.voters.latest())
    }

    /// Whether `set` has this node (see [`RaftNode::is_voter`]).
    fn holds_me(&self, set: &VoterSet) -> bool {
        let mine = self.config.membership.directory_id;
        set.get(self.config.node_id)
            .is_some_and(|v| v.directory_id == mine || v.directory_id == Uuid::ZERO || mine == Uuid::ZERO)
    }

    /// Whether `id` is in the latest voter set.
    pub(crate) fn is_voter_id(&self, id: i32) -> bool {
        self.voters.latest().contains(id)
    }

    /// Whether this node may run for election: a voter of its latest set,
    /// or of the set before it while the latest, which removes it, is not
    /// known to be committed (the Raft dissertation's 4.2.2: it may still
    /// be needed). Kafka lets only the latest set's voters run, and a
    /// quorum of two whose leader removed itself and lost the lead (a
    /// crash, the quorum check) before the other voter fetched the removal
    /// was left with no leader for good: the other voter still counted it,
    /// and it, holding the longer log, refused its vote and never ran.
    /// Such a candidate counts the votes of its latest set, without its own.
    pub(crate) fn may_run(&self) -> bool {
        if self.is_voter() {
            return true;
        }
        let Some(offset) = self.voters.latest_offset() else { return false };
        let before = self.voters.at(offset).1;
        offset >= self.high_watermark && before.is_some_and(|set| self.holds_me(&set))
    }

    /// The votes a candidate starts with: its own, when its latest voter
    /// set counts it.
    pub(crate) fn own_vote(&self) -> BTreeSet<i32> {
        self.is_voter().then_some(self.config.node_id).into_iter().collect()
    }

    /// The latest voter set's ids (committed or not, as Kafka counts them).
    pub fn voter_ids(&self) -> Vec<i32> {
        self.voters.latest().ids()
    }

    /// The latest voter set (static voters carry ids only).
    pub fn voter_set(&self) -> &VoterSet {
        self.voters.latest()
    }

    /// `kraft.version` and the voter set (None when static) after every
    /// offset before `end_offset`: what a snapshot ending there must hold
    /// in its first batch (KIP-853).
    pub fn voters_at(&self, end_offset: i64) -> (i16, Option<VoterSet>) {
        self.voters.at(end_offset)
    }

    /// `kraft.version` as the log says it.
    pub fn kraft_version(&self) -> i16 {
        self.voters.kraft_version()
    }

    /// This node as a voter: its id, directory id, listeners and the
    /// `kraft.version` range it supports.
    pub fn local_voter(&self) -> VoterNode {
        VoterNode {
            id: self.config.node_id,
            directory_id: self.config.membership.directory_id,
            listeners: self.config.membership.listeners.clone(),
            kraft_versions: (0, KRAFT_VERSION_MAX),
        }
    }

    pub fn role(&self) -> RoleName {
        match self.role {
            Role::Unattached { .. } => RoleName::Unattached,
            Role::Prospective { .. } => RoleName::Prospective,
            Role::Candidate { .. } => RoleName::Candidate,
            Role::Leader { .. } => RoleName::Leader,
            Role::Follower { .. } => RoleName::Follower,
            Role::Resigned { .. } => RoleName::Resigned,
        }
    }

    /// The leader of the current epoch, when this node knows it.
    pub fn leader_id(&self) -> Option<i32> {
        match self.role {
            Role::Leader { .. } | Role::Resigned { .. } => Some(self.config.node_id),
            Role::Follower { leader, .. } | Role::Prospective { leader: Some(leader), .. } => Some(leader),
            _ => None,
        }
    }

    pub fn election_state(&self) -> ElectionState {
        ElectionState { epoch: self.epoch, voted_for: self.voted_for, leader_id: self.leader_id() }
    }

    /// A message from node `from`.
    pub fn handle(&mut self, now_ms: i64, from: i32, message: Message) -> Result<Vec<Action>, LogError> {
        let epoch_before = self.epoch;
        match message {
            Message::VoteRequest { epoch, last_epoch, last_offset, pre_vote } => {
                self.on_vote_request(now_ms, from, epoch, (last_epoch, last_offset), pre_vote)?
            }
            Message::VoteResponse { error: RaftError::UnsupportedVersion, .. } => self.on_vote_unsupported(now_ms)?,
            Message::VoteResponse { epoch, error: _, granted, pre_vote, leader_id } => {
                self.on_vote_response(now_ms, from, epoch, granted, pre_vote, leader_id)?
            }
            Message::BeginQuorumEpoch { epoch } => {
                if epoch >= self.epoch {
                    self.observe(now_ms, epoch, Some(from))?;
                }
                let (epoch, error, leader_id) = self.epoch_answer(epoch);
                self.send(from, Message::BeginQuorumEpochResponse { epoch, error, leader_id });
            }
            Message::EndQuorumEpoch { epoch, preferred_successors } => {
                self.on_end_quorum_epoch(now_ms, from, epoch, &preferred_successors)?;
                let (epoch, error, leader_id) = self.epoch_answer(epoch);
                self.send(from, Message::EndQuorumEpochResponse { epoch, error, leader_id });
            }
            Message::BeginQuorumEpochResponse { epoch, leader_id, .. }
            | Message::EndQuorumEpochResponse { epoch, leader_id, .. } => {
                // Kafka's common response handling: a newer epoch, or the
                // leader of this one, is learnt from any answer.
                if epoch > self.epoch || (epoch == self.epoch && leader_id.is_some()) {
                    self.observe(now_ms, epoch, leader_id)?;
                }
            }
            Message::FetchRequest { epoch, fetch_offset, last_fetched_epoch, directory_id, bounds } => {
                let from = ReplicaKey { id: from, directory_id };
                self.on_fetch_request(now_ms, from, epoch, (fetch_offset, last_fetched_epoch), bounds)?
            }
            Message::FetchResponse(response) => self.on_fetch_response(now_ms, from, response)?,
            Message::FetchSnapshotRequest { epoch, snapshot, position, directory_id, max_bytes } => {
                let from = ReplicaKey { id: from, directory_id };
                self.on_fetch_snapshot_request(now_ms, from, epoch, snapshot, (position, max_bytes))?
            }
            Message::FetchSnapshotResponse(response) => self.on_fetch_snapshot_response(now_ms, from, response)?,
            Message::UpdateVoterRequest { epoch, voter } => self.on_update_voter_request(now_ms, from, epoch, voter)?,
            Message::UpdateVoterResponse { epoch, leader_id, error } => {
                self.on_update_voter_response(epoch, error);
                if epoch > self.epoch || (epoch == self.epoch && leader_id.is_some()) {
                    self.observe(now_ms, epoch, leader_id)?;
                }
            }
            // A leader takes AddRaftVoter from its driver (`add_voter`), not
            // as a message; the answer to this node's own changes nothing
            // (it sees itself added in the log) but when it asks next.
            Message::AddVoterResponse { error } => {
                self.on_auto_join_response(now_ms, error, crate::message::VoterChangeError::DuplicateVoter)
            }
            Message::RemoveVoterResponse { error } => {
                self.on_auto_join_response(now_ms, error, crate::message::VoterChangeError::VoterNotFound)
            }
            Message::AddVoterRequest { .. } | Message::RemoveVoterRequest { .. } => {}
        }
        debug_assert!(self.epoch >= epoch_before, "the epoch went back");
        Ok(self.finish())
    }

    /// The timers: elections, fetch retries and timeouts, the leader's
    /// quorum check and its held fetches.
    pub fn tick(&mut self, now_ms: i64) -> Result<Vec<Action>, LogError> {
        if now_ms >= self.next_clean_ms {
            // Time-based retention needs time to pass, not a new snapshot.
            self.next_clean_ms = now_ms + CLEAN_INTERVAL_MS;
            self.clean_snapshots(now_ms)?;
        }
        let (is_voter, may_run) = (self.is_voter(), self.may_run());
        match &mut self.role {
            Role::Unattached { election_at } | Role::Resigned { election_at } => {
                if now_ms >= *election_at {
                    if may_run {
                        self.become_prospective(now_ms)?;
                    } else {
                        *election_at = now_ms + self.config.retry_backoff_ms;
                        self.discover_leader();
                    }
                }
            }
            // A voter removed while it ran for election stops running.
            Role::Prospective { .. } | Role::Candidate { .. } if !may_run => {
                self.role = Role::Unattached { election_at: now_ms };
            }
            Role::Prospective { election_at, .. } => {
                if now_ms >= *election_at {
                    self.lose_pre_vote(now_ms);
                }
            }
            Role::Candidate { election_at, .. } => {
                if now_ms >= *election_at {
                    self.become_prospective(now_ms)?;
                }
            }
            &mut Role::Follower { fetch_deadline, last_sent, .. } => {
                // One fetch in flight, as Kafka's follower: the leader may
                // hold it for the fetch wait, so it is sent again only after
                // that and a backoff (an answer sends the next at once).
                let resend_after = self.config.fetch_max_wait_ms + self.config.retry_backoff_ms;
                if now_ms >= fetch_deadline {
                    self.fetch_timed_out(now_ms)?;
                } else if is_voter && self.maybe_send_update_voter(now_ms) {
                    // Kafka's follower sends UpdateRaftVoter in place of a fetch.
                } else if !is_voter && self.maybe_auto_join(now_ms) {
                    // As Kafka's observer, AddRaftVoter in place of a fetch.
                } else if last_sent.is_none_or(|sent| now_ms - sent >= resend_after) {
                    self.send_fetch(now_ms);
                }
            }
            Role::Leader { .. } => self.leader_tick(now_ms)?,
        }
        Ok(self.finish())
    }

    /// Appends `values` (one record each) as one batch in the leader's
    /// epoch and flushes it; None when this node is not the leader. It is
    /// committed once a majority fetched it ([`Action::Committed`]).
    pub fn propose(&mut self, values: &[Bytes], now_ms: i64) -> Result<Option<(AppendInfo, Vec<Action>)>, LogError> {
        if !matches!(self.role, Role::Leader { .. }) {
            return Ok(None);
        }
        let info = self.append_as_leader(values, now_ms)?;
        self.leader_appended(now_ms)?;
        Ok(Some((info, self.finish())))
    }

    /// Gives up the lead (a graceful shutdown): the voters are told to run
    /// for election, the most caught-up first.
    pub fn resign(&mut self, now_ms: i64) -> Vec<Action> {
        self.resign_lead(now_ms);
        self.finish()
    }

    pub(crate) fn resign_lead(&mut self, now_ms: i64) {
        self.release_held_fetches();
        self.end_voter_change(crate::message::VoterChangeError::NotLeader);
        if let Role::Leader { progress, .. } = &self.role {
            let mut successors: Vec<(i64, i32)> = self
                .voters
                .latest()
                .nodes()
                .filter(|v| v.id != self.config.node_id)
                .map(|v| (progress.get(&v.key()).map_or(0, |p| p.fetch_offset), v.id))
                .collect();
            successors.sort_by(|a, b| b.cmp(a));
            let preferred_successors: Vec<i32> = successors.iter().map(|(_, id)| *id).collect();
            for &to in &preferred_successors {
                let message =
                    Message::EndQuorumEpoch { epoch: self.epoch, preferred_successors: preferred_successors.clone() };
                self.actions.push(Action::Send { to, message });
            }
            self.actions.push(Action::SteppedDown { epoch: self.epoch });
            let election_at = self.election_deadline(now_ms);
            self.role = Role::Resigned { election_at };
        }
    }

    /// Takes the fetches a leader holds, to answer once it no longer leads.
    fn release_held_fetches(&mut self) {
        if let Role::Leader { progress, .. } = &mut self.role {
            for (key, entry) in progress.iter_mut() {
                if let Some((_, fetch)) = entry.parked.take() {
                    self.released_fetches.push((key.id, (fetch.fetch_offset, fetch.last_fetched_epoch)));
                }
            }
        }
    }

    pub(crate) fn finish(&mut self) -> Vec<Action> {
        for (id, (fetch_offset, last_fetched_epoch)) in std::mem::take(&mut self.released_fetches) {
            self.answer_not_leader(id, fetch_offset, last_fetched_epoch);
        }
        debug_assert!(self.high_watermark <= self.log.log_end_offset(), "the high watermark is past the log end");
        std::mem::take(&mut self.actions)
    }

    pub(crate) fn election_deadline(&mut self, now_ms: i64) -> i64 {
        let timeout = self.config.election_timeout_ms.max(1);
        now_ms + timeout + (splitmix64(&mut self.rng) % timeout as u64) as i64
    }

    /// What a voter answers a BeginQuorumEpoch or EndQuorumEpoch of
    /// `request_epoch` with: its epoch, FENCED_LEADER_EPOCH when the request
    /// is older, and the leader it knows.
    fn epoch_answer(&self, request_epoch: i32) -> (i32, RaftError, Option<i32>) {
        let error = if request_epoch < self.epoch { RaftError::FencedLeaderEpoch } else { RaftError::None };
        (self.epoch, error, self.leader_id())
    }

    pub(crate) fn majority(&self) -> usize {
        self.voters.latest().len() / 2 + 1
    }

    /// The log's end: the epoch of its last entry (or of the snapshot it
    /// starts after, when it holds none) and its end offset.
    pub(crate) fn log_end(&self) -> (i32, i64) {
        (self.last_fetched_epoch(), self.log.log_end_offset())
    }

    pub(crate) fn persist(&mut self) {
        let state = self.election_state();
        self.actions.push(Action::PersistElectionState(state));
    }

    pub(crate) fn send(&mut self, to: i32, message: Message) {
        self.actions.push(Action::Send { to, message });
    }

    pub(crate) fn step_down_if_leader(&mut self) {
        self.release_held_fetches();
        self.end_voter_change(crate::message::VoterChangeError::NotLeader);
        if matches!(self.role, Role::Leader { .. }) {
            self.actions.push(Action::SteppedDown { epoch: self.epoch });
        }
    }

    /// A message of `epoch`, whose leader is `leader` when the sender knows
    /// it. A newer epoch moves this node to it (Unattached, or Follower of
    /// the leader); the leader of its own epoch, once known, is followed.
    pub(crate) fn observe(&mut self, now_ms: i64, epoch: i32, leader: Option<i32>) -> Result<(), LogError> {
        let leader = leader.filter(|&id| id != self.config.node_id);
        if epoch > self.epoch {
            self.step_down_if_leader();
            self.epoch = epoch;
            self.voted_for = None;
            match leader {
                Some(leader) => self.become_follower(now_ms, leader),
                None => {
                    let election_at = self.election_deadline(now_ms);
                    self.role = Role::Unattached { election_at };
                    self.persist();
                }
            }
        } else if epoch == self.epoch {
            // A second leader claimed for a known one's epoch comes from the
            // network, and proves nothing here: it is ignored (the
            // simulation checks that elections never make two).
            if let Some(leader) = leader {
                match self.role {
                    Role::Follower { .. } | Role::Leader { .. } | Role::Resigned { .. } => {}
                    Role::Prospective { leader: Some(_), .. } => {}
                    _ => self.become_follower(now_ms, leader),
                }
            }
        }
        Ok(())
    }

    pub(crate) fn become_follower(&mut self, now_ms: i64, leader: i32) {
        self.update_voter_at = now_ms + self.update_voter_period();
        self.role = Role::Follower {
            leader,
            fetch_deadline: now_ms + self.config.fetch_timeout_ms,
            last_sent: None,
            heard_ms: None,
            download: None,
        };
        self.persist();
        self.send_fetch(now_ms);
    }

    pub(crate) fn fetch_timed_out(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.may_run() {
            self.become_prospective(now_ms)
        } else {
            let election_at = now_ms;
            self.role = Role::Unattached { election_at };
            Ok(())
        }
    }

    /// An observer without a leader asks a random bootstrap server (or
    /// voter), which answers with the epoch and leader it knows.
    pub(crate) fn discover_leader(&mut self) {
        let candidates = if self.config.membership.bootstrap.is_empty() {
            self.voter_ids()
        } else {
            self.config.membership.bootstrap.clone()
        };
        if candidates.is_empty() {
            return;
        }
        let index = (splitmix64(&mut self.rng) % candidates.len() as u64) as usize;
        let to = candidates[index];
        let (last_fetched_epoch, fetch_offset) = self.log_end();
        let directory_id = self.config.membership.directory_id;
        let bounds = self.fetch_bounds();
        self.send(
            to,
            Message::FetchRequest { epoch: self.epoch, fetch_offset, last_fetched_epoch, directory_id, bounds },
        );
    }
}

/// The voter history of `log`: from the snapshot it starts after (a
/// bootstrap one included), then its batches.
///
/// Not from the newest snapshot only when it ends at the log start: a node
/// keeps its log past the snapshots it takes until retention cuts it, so
/// the newest one often ends after the log start, and the voters and
/// `kraft.version` of the snapshot the log starts after were then lost at
/// every restart (a voter of a dynamic quorum came back at `kraft.version`
/// 0, or with no voters at all when its log held no voter record). Should
/// that snapshot be gone, the newest one and the log after it say the
/// latest voters, as Kafka's `KRaftControlRecordStateMachine` reads them.
fn read_voter_history<L: ReplicatedLog>(log: &L, config: &RaftConfig) -> Result<VoterHistory, LogError> {
    let mut history = VoterHistory::new(VoterSet::from_ids(&config.voters));
    let start = log.log_start_offset();
    let mut offset = start;
    let at_start = log.snapshots()?.into_iter().map(|(id, _)| id).rfind(|id| id.end_offset == start);
    // The voters are in the snapshot's first batch: its head is enough.
    let head = match at_start.map_or_else(|| log.latest_snapshot_id(), |id| Ok(Some(id)))? {
        Some(id) => log.read_snapshot(id, 0, SNAPSHOT_HEAD_BYTES)?.map(|(_, bytes)| (id, bytes)),
        None => None,
    };
    if let Some((id, bytes)) = head {
        history.reset_to_snapshot(id.end_offset, &bytes);
        offset = offset.max(id.end_offset);
    }
    let end = log.log_end_offset();
    while offset < end {
        let batches = log.read(offset, 1 << 20, end)?;
        let Some(last) = krabka_protocol::records::RecordBatches::new(batches.clone())
            .map_while(Result::ok)
            .map(|batch| batch.last_offset())
            .last()
        else {
            break;
        };
        history.read_batches(&batches);
        offset = last + 1;
    }
    Ok(history)
}
