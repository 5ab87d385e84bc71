//! Fixtures the unit tests share: a node of voters 1-3 elected leader on a
//! real log in a temporary directory, and the messages they send it.

use krabka_log::{LogConfig, PartitionLog};
use krabka_protocol::Uuid;

use crate::message::{FetchBounds, Message, RaftError};
use crate::node::{Membership, RaftConfig, RaftNode, RoleName};
use crate::voters::{Listener, VoterNode};

/// Controller `id` as it tells its leader (UpdateRaftVoter): directory id
/// `[id; 16]`, one CONTROLLER listener, `kraft.version` 0 to 1.
pub(crate) fn controller(id: i32) -> VoterNode {
    VoterNode {
        id,
        directory_id: Uuid([id as u8; 16]),
        listeners: vec![Listener { name: "CONTROLLER".into(), host: "127.0.0.1".into(), port: 9090 + id as u16 }],
        kraft_versions: (0, 1),
    }
}

/// Node 1 of static voters 1-3 (`membership` says who it is), elected
/// leader of epoch 1 at time 1,002 with voter 2's votes; its epoch is not
/// committed yet.
pub(crate) fn leader_of(dir: &std::path::Path, membership: Membership) -> RaftNode<PartitionLog> {
    let (log, _) = PartitionLog::open(dir, LogConfig::default(), 0, 0, true, 1).unwrap();
    let config = RaftConfig {
        node_id: 1,
        voters: vec![1, 2, 3],
        election_timeout_ms: 100,
        fetch_timeout_ms: 300_000_000,
        fetch_max_wait_ms: 50,
        retry_backoff_ms: 60,
        request_timeout_ms: 2000,
        membership,
        max_fetch_bytes: 1 << 20,
        fetch_snapshot_max_bytes: 1 << 20,
        retention_max_bytes: -1,
        retention_ms: -1,
        seed: 7,
    };
    let mut node = RaftNode::open(config, log, None, 0).unwrap();
    node.tick(1_000).unwrap();
    let granted = |pre_vote, epoch| Message::VoteResponse {
        epoch,
        error: RaftError::None,
        granted: true,
        pre_vote,
        leader_id: None,
    };
    node.handle(1_001, 2, granted(true, 0)).unwrap();
    node.handle(1_002, 2, granted(false, 1)).unwrap();
    assert_eq!(node.role(), RoleName::Leader);
    node
}

/// [`leader_of`] as controller 1 (its directory id and listener).
pub(crate) fn controller_leader(dir: &std::path::Path) -> RaftNode<PartitionLog> {
    let me = controller(1);
    leader_of(dir, Membership { directory_id: me.directory_id, listeners: me.listeners, ..Default::default() })
}

/// What a fetcher before Fetch v18 asks: a 50 ms wait, 1 MiB, and no high
/// watermark.
pub(crate) const OLD_FETCH: FetchBounds =
    FetchBounds { max_wait_ms: 50, max_bytes: 1 << 20, high_watermark: FetchBounds::HIGH_WATERMARK_NOT_SENT };

/// A Fetch of epoch 1 from `fetch_offset` after epoch 1, by the replica
/// whose metadata log directory is `directory_id` ([`OLD_FETCH`]).
pub(crate) fn fetch(fetch_offset: i64, directory_id: Uuid) -> Message {
    Message::FetchRequest { epoch: 1, fetch_offset, last_fetched_epoch: 1, directory_id, bounds: OLD_FETCH }
}
