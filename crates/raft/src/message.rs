//! What a [`crate::RaftNode`] takes in and gives out: KRaft's RPCs between
//! voters and observers, the actions it asks its driver to perform, and the
//! election state it asks to persist (Kafka's `quorum-state` file).
//!
//! The messages are a small internal enum mirroring the fields of Kafka's
//! Vote (with KIP-996's PreVote flag), BeginQuorumEpoch, EndQuorumEpoch,
//! Fetch (the `__cluster_metadata` Fetch with ReplicaState, LastFetchedEpoch,
//! DivergingEpoch and SnapshotId) and FetchSnapshot (KIP-630), and their
//! responses, rather than krabka-protocol's
//! generated types: the generated ones carry topics, partitions, cluster
//! ids and tagged fields a quorum of one partition does not need.
//! [`crate::wire`] maps them onto Kafka's RPCs and back.

use bytes::Bytes;
use krabka_log::SnapshotId;
use krabka_protocol::Uuid;

use crate::voters::VoterNode;

/// A KRaft RPC between two nodes; the sender is given beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Vote, or with `pre_vote` KIP-996's pre-vote. `epoch` is the
    /// candidate's epoch: for a vote the one it runs in, for a pre-vote its
    /// current one (it bumps it only once a majority pre-voted), as Kafka
    /// sends it. The candidate's log end: its last epoch and end offset.
    VoteRequest {
        epoch: i32,
        last_epoch: i32,
        last_offset: i64,
        pre_vote: bool,
    },
    /// The receiver's epoch, whether it granted, and the leader it knows.
    VoteResponse {
        epoch: i32,
        error: RaftError,
        granted: bool,
        pre_vote: bool,
        leader_id: Option<i32>,
    },
    /// The sender is the leader of `epoch`; the receiver starts fetching.
    BeginQuorumEpoch {
        epoch: i32,
    },
    /// The receiver's epoch and the leader it knows, after the request.
    BeginQuorumEpochResponse {
        epoch: i32,
        error: RaftError,
        leader_id: Option<i32>,
    },
    /// The sender, leader of `epoch`, resigned; `preferred_successors`
    /// (most caught-up first) should run for election sooner.
    EndQuorumEpoch {
        epoch: i32,
        preferred_successors: Vec<i32>,
    },
    EndQuorumEpochResponse {
        epoch: i32,
        error: RaftError,
        leader_id: Option<i32>,
    },
    /// A replica (voter or observer) asks for the log from `fetch_offset`;
    /// `last_fetched_epoch` is the epoch of its entry before it.
    /// `directory_id` is its metadata log directory's (Fetch v17's
    /// ReplicaDirectoryId; zero when it names none): the leader counts it
    /// as a voter only when the voter set has it with that directory.
    FetchRequest {
        epoch: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
        directory_id: Uuid,
        bounds: FetchBounds,
    },
    /// The answer to a fetch from `fetch_offset` after `last_fetched_epoch`
    /// (both echoed, so a late or duplicated answer is recognised: it is
    /// applied only while the fetcher's log still ends there).
    FetchResponse(FetchResponse),
    /// KIP-630: a follower the leader sent to a snapshot asks for its bytes
    /// from `position` (the bytes it holds so far), at most `max_bytes` of
    /// them (the request's MaxBytes). `directory_id` as in
    /// [`Message::FetchRequest`] (FetchSnapshot v1's ReplicaDirectoryId).
    FetchSnapshotRequest {
        epoch: i32,
        snapshot: SnapshotId,
        position: i64,
        directory_id: Uuid,
        max_bytes: i32,
    },
    FetchSnapshotResponse(FetchSnapshotResponse),
    /// KIP-853: a voter of `epoch` tells its leader its listeners and the
    /// `kraft.version` range it supports, when the voter set has others.
    UpdateVoterRequest {
        epoch: i32,
        voter: VoterNode,
    },
    UpdateVoterResponse {
        epoch: i32,
        error: VoterChangeError,
        leader_id: Option<i32>,
    },
    /// `controller.quorum.auto.join.enable`: an observer that is a
    /// controller asks its leader to add it (AddRaftVoter with
    /// `AckWhenCommitted` false, as Kafka's controller sends it).
    AddVoterRequest {
        voter: VoterNode,
    },
    AddVoterResponse {
        error: VoterChangeError,
    },
    /// Auto-join of a controller whose id votes with another directory id
    /// (its disk was replaced): it first asks its leader to remove that
    /// voter (RemoveRaftVoter), as Kafka's controller does.
    RemoveVoterRequest {
        id: i32,
        directory_id: Uuid,
    },
    RemoveVoterResponse {
        error: VoterChangeError,
    },
}

/// How a voter change (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter)
/// ended: Kafka's error codes for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoterChangeError {
    None,
    /// REQUEST_TIMED_OUT: another change is under way, the leader has not
    /// committed its epoch or the last change yet, the new voter did not
    /// answer or is not caught up.
    RequestTimedOut,
    /// UNSUPPORTED_VERSION: `kraft.version` is 0 (static voters).
    UnsupportedVersion,
    /// DUPLICATE_VOTER: the id votes already.
    DuplicateVoter,
    /// VOTER_NOT_FOUND: no voter with that id and directory id.
    VoterNotFound,
    /// INVALID_REQUEST: a version range without the finalized version, or
    /// no endpoint on the controller listener.
    InvalidRequest,
    /// NOT_LEADER_OR_FOLLOWER: this node does not lead (any more).
    NotLeader,
    /// FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH: an UpdateRaftVoter of an
    /// older or a newer epoch than the leader's.
    FencedLeaderEpoch,
    UnknownLeaderEpoch,
}

/// What a Fetch asks of the leader besides its offsets: Kafka's Fetch
/// MaxWaitMs, MaxBytes and (v18, KIP-1166) the partition's HighWatermark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchBounds {
    /// How long the leader may hold the fetch while it has nothing to
    /// return; 0 answers at once.
    pub max_wait_ms: i32,
    /// About how many record bytes to return (always one whole batch when
    /// there is any, even a larger one).
    pub max_bytes: i32,
    /// The high watermark the fetcher knows: -1 when it knows none, and
    /// [`FetchBounds::HIGH_WATERMARK_NOT_SENT`] before Fetch v18, which
    /// does not carry it. The leader answers at once when its own is ahead.
    pub high_watermark: i64,
}

impl FetchBounds {
    /// Kafka's wire default for HighWatermark: the fetcher did not say.
    pub const HIGH_WATERMARK_NOT_SENT: i64 = i64::MAX;
}

/// Kafka's FetchSnapshot response, one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSnapshotResponse {
    /// The responder's epoch and the leader it knows of that epoch.
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub error: RaftError,
    pub snapshot: SnapshotId,
    /// The snapshot's whole size, and where `bytes` start in it.
    pub size: i64,
    pub position: i64,
    pub bytes: Bytes,
}

/// Kafka's Fetch response for `__cluster_metadata`, one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponse {
    /// The responder's epoch and the leader it knows of that epoch.
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub error: RaftError,
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
    /// The responder's high watermark.
    pub high_watermark: i64,
    /// The first offset of the responder's log.
    pub log_start_offset: i64,
    /// Whole batches from `fetch_offset`, empty when there are none.
    pub records: Bytes,
    /// Set when the fetcher's log diverges from the leader's: the largest
    /// epoch at or below its last fetched epoch and where it ends.
    pub diverging_epoch: Option<(i32, i64)>,
    /// Set when the fetched offsets are only in the leader's snapshot
    /// (below its log start): the follower fetches this snapshot.
    pub snapshot: Option<SnapshotId>,
}

/// The error codes raft answers with and acts on (Kafka's, for the
/// partition of a KRaft response).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaftError {
    None,
    /// FENCED_LEADER_EPOCH: the request's epoch is older than the receiver's.
    FencedLeaderEpoch,
    /// UNKNOWN_LEADER_EPOCH: a fetch for an epoch newer than the receiver's.
    UnknownLeaderEpoch,
    /// NOT_LEADER_OR_FOLLOWER: the receiver does not lead this epoch.
    NotLeader,
    /// SNAPSHOT_NOT_FOUND: the leader no longer holds the snapshot asked for.
    SnapshotNotFound,
    /// POSITION_OUT_OF_RANGE: a FetchSnapshot position outside the snapshot.
    PositionOutOfRange,
    /// UNSUPPORTED_VERSION, the top-level error of a Vote response: the
    /// peer speaks no Vote version that carries the request (a pre-vote
    /// needs v2, KIP-996), as Kafka's network client answers for it.
    UnsupportedVersion,
}

/// Kafka's `quorum-state`: what a node must remember across a restart so
/// that it never votes twice in an epoch nor goes back to an older one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElectionState {
    pub epoch: i32,
    pub voted_for: Option<i32>,
    pub leader_id: Option<i32>,
}

/// What the driver must do, in order.
///
/// Ordering: a [`Action::PersistElectionState`] must be durable (written
/// and fsynced) before any action after it in the same list is performed,
/// in particular before the [`Action::Send`] of a granted vote: a vote
/// sent and then forgotten in a crash could be given twice in one epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    PersistElectionState(ElectionState),
    Send {
        to: i32,
        message: Message,
    },
    /// The high watermark moved up: every offset below it is committed.
    Committed {
        high_watermark: i64,
    },
    BecameLeader {
        epoch: i32,
    },
    /// The node stopped being the leader of `epoch` (resigned or fenced).
    SteppedDown {
        epoch: i32,
    },
    /// The node replaced its log with snapshot `id`, fetched from its
    /// leader: what the log held is gone, and the snapshot (committed) is
    /// where whoever reads the committed log starts again.
    SnapshotInstalled {
        id: SnapshotId,
    },
    /// Ask `voter` (on the controller listener) which `kraft.version`
    /// range it supports (Kafka sends it ApiVersions), then report the
    /// answer with [`crate::RaftNode::voter_probed`] under `request`.
    ProbeVoter {
        request: u64,
        voter: VoterNode,
    },
    /// The voter change asked for under `request` ended.
    VoterChangeDone {
        request: u64,
        error: VoterChangeError,
    },
}
