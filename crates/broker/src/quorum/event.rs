//! What reaches the driver thread: from the controller listener, from the
//! peer connections, and from the quorum's users.

use bytes::Bytes;
use krabka_log::{AppendInfo, LogError, SnapshotId};
use krabka_protocol::{DescribeQuorumRequest, DescribeQuorumResponse, RequestBody, ResponseBody};
use krabka_raft::{KraftUpgradeError, Message};
use tokio::sync::oneshot;

/// What came of one request to a voter: its response, or why there is none.
pub(super) type PeerResult = Result<ResponseBody, String>;

pub(super) enum Event {
    /// A raft request that arrived at `version`; the response goes to `reply`.
    Request {
        request: RequestBody,
        version: i16,
        reply: oneshot::Sender<ResponseBody>,
    },
    /// The outcome of `sent`, a request to voter `peer`.
    Response {
        peer: i32,
        sent: Message,
        result: PeerResult,
    },
    /// Values to append as one batch, if this node leads `epoch`.
    Propose {
        values: Vec<Bytes>,
        epoch: i32,
        reply: oneshot::Sender<Result<Option<AppendInfo>, LogError>>,
    },
    /// A DescribeQuorum that arrived at `version`.
    DescribeQuorum {
        request: DescribeQuorumRequest,
        version: i16,
        reply: oneshot::Sender<DescribeQuorumResponse>,
    },
    /// A snapshot of the state after every offset before `id.end_offset`.
    StoreSnapshot {
        id: SnapshotId,
        bytes: Bytes,
    },
    /// An AddRaftVoter or RemoveRaftVoter; the response goes to `reply`.
    VoterChange {
        request: RequestBody,
        reply: oneshot::Sender<ResponseBody>,
    },
    /// The `kraft.version` range a voter being added answered the probe of
    /// voter change `request` with (None: it did not answer).
    Probed {
        request: u64,
        kraft_versions: Option<(i16, i16)>,
    },
    /// UpdateFeatures of `kraft.version` on this node (its leader's part).
    UpgradeKraftVersion {
        version: i16,
        validate_only: bool,
        reply: oneshot::Sender<Result<(), KraftUpgradeError>>,
    },
    Stop,
}
