//! Three quorum members in one process, each with its own log directory,
//! controller listener and connections, talking Kafka's raft RPCs over
//! loopback TCP: they elect a leader, commit what it is given, and elect
//! another when it stops.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use krabka_log::LogConfig;
use krabka_protocol::records::RecordBatches;
use krabka_protocol::Uuid;
use krabka_raft::wire::{Endpoint, WireContext};
use krabka_raft::{RaftConfig, RoleName};
use tokio::net::TcpListener;

use super::*;

struct Member {
    quorum: Arc<Quorum>,
    committed: CommittedBatches,
    dir: tempfile::TempDir,
    port: u16,
}

impl Member {
    /// The values of the data records handed out as committed so far, in
    /// offset order (control batches left out).
    fn committed_values(&self) -> Vec<Bytes> {
        let mut values = Vec::new();
        for chunk in self.committed.try_iter() {
            let Committed::Batches(chunk) = chunk else { panic!("a snapshot handed out") };
            for batch in RecordBatches::new(chunk) {
                let batch = batch.unwrap();
                if !batch.is_control() {
                    values.extend(batch.records(usize::MAX).unwrap().map(|r| r.unwrap().value.unwrap()));
                }
            }
        }
        values
    }
}

async fn start_members(count: i32) -> BTreeMap<i32, Member> {
    let mut listeners = BTreeMap::new();
    for id in 1..=count {
        listeners.insert(id, TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let voters: BTreeMap<i32, Endpoint> = listeners
        .iter()
        .map(|(&id, l)| (id, Endpoint { host: "127.0.0.1".into(), port: l.local_addr().unwrap().port() }))
        .collect();
    let mut members = BTreeMap::new();
    for (id, listener) in listeners {
        let member = start_member(id, &voters, listener, tempfile::tempdir().unwrap(), -1);
        members.insert(id, member);
    }
    members
}

/// Member `id` of `voters`, its log in `dir`, its controller listener on
/// `listener`, with `retention_max_bytes`.
fn start_member(
    id: i32,
    voters: &BTreeMap<i32, Endpoint>,
    listener: TcpListener,
    dir: tempfile::TempDir,
    retention_max_bytes: i64,
) -> Member {
    let ids: Vec<i32> = voters.keys().copied().collect();
    start_member_knowing(id, &ids, voters, listener, dir, retention_max_bytes)
}

/// Member `id` of the voters `ids`, knowing where only those of `known`
/// listen.
fn start_member_knowing(
    id: i32,
    ids: &[i32],
    known: &BTreeMap<i32, Endpoint>,
    listener: TcpListener,
    dir: tempfile::TempDir,
    retention_max_bytes: i64,
) -> Member {
    {
        let setup = QuorumSetup {
            context: WireContext {
                cluster_id: "krabka-quorum-test".into(),
                node_id: id,
                directory_id: Uuid([id as u8; 16]),
                listener: "CONTROLLER".into(),
                voters: known.clone(),
            },
            raft: RaftConfig {
                node_id: id,
                voters: ids.to_vec(),
                election_timeout_ms: 300,
                fetch_timeout_ms: 600,
                fetch_max_wait_ms: 100,
                retry_backoff_ms: 20,
                request_timeout_ms: 2000,
                membership: Default::default(),
                max_fetch_bytes: 8 << 20,
                fetch_snapshot_max_bytes: 1 << 20,
                retention_max_bytes,
                retention_ms: -1,
                seed: id as u64,
            },
            log_dir: dir.path().join("__cluster_metadata-0"),
            log_config: LogConfig::default(),
            request_timeout: Duration::from_millis(2000),
            snapshot_every_bytes: u64::MAX,
            snapshot_interval_ms: 0,
            controller_client: Default::default(),
        };
        let port = listener.local_addr().unwrap().port();
        let (quorum, committed) = Quorum::start(setup, &tokio::runtime::Handle::current()).unwrap();
        let quorum = Arc::new(quorum);
        tokio::spawn(serve_controller_listener(
            listener,
            Arc::clone(&quorum),
            None,
            ControllerListenerSecurity::plaintext("CONTROLLER"),
        ));
        Member { quorum, committed, dir, port }
    }
}

/// Waits until every member in `members` agrees on one leader of one epoch.
async fn agreed_leader(members: &BTreeMap<i32, Member>) -> (i32, i32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let statuses: Vec<QuorumStatus> = members.values().map(|m| *m.quorum.status().borrow()).collect();
        let first = statuses[0];
        let agreed =
            statuses.iter().all(|s| s.leader_id.is_some() && (s.leader_id, s.epoch) == (first.leader_id, first.epoch));
        // The leader must be one of them, and know it (a stopped leader is
        // still the others' until they hear it resigned).
        let leader = first
            .leader_id
            .filter(|id| members.get(id).is_some_and(|m| m.quorum.status().borrow().role == RoleName::Leader));
        if let (true, Some(leader)) = (agreed, leader) {
            return (leader, first.epoch);
        }
        assert!(Instant::now() < deadline, "no agreed leader: {statuses:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every member's high watermark is past `offset`.
async fn committed_everywhere(members: &BTreeMap<i32, Member>, offset: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let statuses: Vec<QuorumStatus> = members.values().map(|m| *m.quorum.status().borrow()).collect();
        if statuses.iter().all(|s| s.high_watermark > offset) {
            return;
        }
        assert!(Instant::now() < deadline, "offset {offset} not committed everywhere: {statuses:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_elect_commit_and_fail_over_over_tcp() {
    let mut members = start_members(3).await;
    let (leader, epoch) = agreed_leader(&members).await;
    let values: Vec<Bytes> = (0..10).map(|i| Bytes::from(format!("record-{i}"))).collect();
    let appended =
        members[&leader].quorum.propose(values.clone(), epoch).await.unwrap().expect("the leader takes proposals");
    committed_everywhere(&members, appended.last_offset).await;
    // Every member hands out what was committed, and only that.
    for member in members.values() {
        assert_eq!(member.committed_values(), values);
    }
    let follower = *members.keys().find(|&&id| id != leader).unwrap();
    assert_eq!(members[&follower].quorum.propose(vec![Bytes::from_static(b"x")], epoch).await.unwrap(), None);
    // A plan of another epoch is never appended, even by the leader.
    assert_eq!(members[&leader].quorum.propose(vec![Bytes::from_static(b"x")], epoch - 1).await.unwrap(), None);

    // The leader stops (it resigns): the two others elect one of themselves.
    let stopped = members.remove(&leader).unwrap();
    stopped.quorum.stop();
    let (next, next_epoch) = agreed_leader(&members).await;
    assert!(next != leader && next_epoch > epoch, "{next} of epoch {next_epoch} after {leader} of {epoch}");
    let appended =
        members[&next].quorum.propose(vec![Bytes::from_static(b"after")], next_epoch).await.unwrap().unwrap();
    committed_everywhere(&members, appended.last_offset).await;
    for member in members.values() {
        assert_eq!(member.committed_values(), [Bytes::from_static(b"after")]);
    }
}

/// The port of a stopped member, once its listener task has let it go.
async fn rebind(port: u16) -> TcpListener {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpListener::bind(("127.0.0.1", port)).await {
            Ok(listener) => return listener,
            Err(e) => assert!(Instant::now() < deadline, "port {port} stays taken: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every member snapshots what it committed (as the metadata loader does):
/// a real KRaft snapshot, of an empty image, at its high watermark in
/// `epoch` (every committed batch is of the one epoch here).
async fn snapshot_everywhere(members: &BTreeMap<i32, Member>, epoch: i32) {
    for member in members.values() {
        let end_offset = member.quorum.status().borrow().high_watermark;
        let bytes = krabka_metadata::snapshot::encode(&Default::default(), 1).unwrap();
        member.quorum.store_snapshot(krabka_log::SnapshotId { end_offset, epoch }, bytes);
    }
    // The driver stores it between events: wait until the files are there.
    let deadline = Instant::now() + Duration::from_secs(10);
    for member in members.values() {
        let end_offset = member.quorum.status().borrow().high_watermark;
        let id = krabka_log::SnapshotId { end_offset, epoch };
        let path = member.dir.path().join("__cluster_metadata-0").join(id.file_name());
        while !path.exists() {
            assert!(Instant::now() < deadline, "snapshot {id:?} not stored");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_behind_the_leaders_log_start_fetches_its_snapshot_over_tcp() {
    let mut members = start_members(3).await;
    let voters: BTreeMap<i32, Endpoint> =
        members.iter().map(|(&id, m)| (id, Endpoint { host: "127.0.0.1".into(), port: m.port })).collect();
    let (leader, epoch) = agreed_leader(&members).await;
    let first = members[&leader].quorum.propose(vec![Bytes::from_static(b"first")], epoch).await.unwrap().unwrap();
    committed_everywhere(&members, first.last_offset).await;
    // A follower stops; the others commit on, snapshot twice and, with no
    // room kept (retention 0), cut their logs at the newer snapshot.
    let lagging = *members.keys().find(|&&id| id != leader).unwrap();
    let stopped = members.remove(&lagging).unwrap();
    stopped.quorum.stop();
    for round in 0..2 {
        let value = Bytes::from(format!("round-{round}"));
        let appended = members[&leader].quorum.propose(vec![value], epoch).await.unwrap().unwrap();
        committed_everywhere(&members, appended.last_offset).await;
        snapshot_everywhere(&members, epoch).await;
    }
    // Restarted, a member's log starts at its newest snapshot, which it
    // hands out first (then what follows it).
    let snapshot_end = members[&leader].quorum.status().borrow().high_watermark;
    for id in members.keys().copied().collect::<Vec<_>>() {
        let member = members.remove(&id).unwrap();
        member.quorum.stop();
        let listener = rebind(member.port).await;
        let restarted = start_member(id, &voters, listener, member.dir, 0);
        let first = restarted.committed.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(matches!(first, Committed::Snapshot { id, .. } if id.end_offset == snapshot_end));
        members.insert(id, restarted);
    }

    let listener = rebind(stopped.port).await;
    let back = start_member(lagging, &voters, listener, stopped.dir, -1);
    let (next_leader, next_epoch) = agreed_leader(&members).await;
    let last =
        members[&next_leader].quorum.propose(vec![Bytes::from_static(b"last")], next_epoch).await.unwrap().unwrap();
    members.insert(lagging, back);
    committed_everywhere(&members, last.last_offset).await;
    // The member that was behind the leader's log start got its snapshot.
    let log_dir = members[&lagging].dir.path().join("__cluster_metadata-0");
    let snapshots = krabka_log::snapshots::list(&log_dir).unwrap();
    assert!(snapshots.iter().any(|s| s.end_offset >= snapshot_end), "{snapshots:?}");
    let handed_out: Vec<Committed> = members[&lagging].committed.try_iter().collect();
    assert!(
        matches!(handed_out.first(), Some(Committed::Snapshot { .. })),
        "the fetched snapshot is handed out before the log after it"
    );
}

/// A follower that does not know where its leader listens (in a dynamic
/// quorum: the VotersRecord that added the leader had not reached it
/// before the old leader died) learns it from the leader's
/// BeginQuorumEpoch, as Kafka's follower does, and fetches from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_learns_where_its_leader_listens_from_begin_quorum_epoch() {
    let (first, second) =
        (TcpListener::bind("127.0.0.1:0").await.unwrap(), TcpListener::bind("127.0.0.1:0").await.unwrap());
    let endpoint = |l: &TcpListener| Endpoint { host: "127.0.0.1".into(), port: l.local_addr().unwrap().port() };
    let everyone = BTreeMap::from([(1, endpoint(&first)), (2, endpoint(&second))]);
    let itself = BTreeMap::from([(2, endpoint(&second))]);
    let mut members = BTreeMap::new();
    members.insert(1, start_member_knowing(1, &[1, 2], &everyone, first, tempfile::tempdir().unwrap(), -1));
    members.insert(2, start_member_knowing(2, &[1, 2], &itself, second, tempfile::tempdir().unwrap(), -1));
    // Node 2 cannot ask for votes (it knows no address of node 1): node 1 leads.
    let (leader, epoch) = agreed_leader(&members).await;
    assert_eq!(leader, 1);
    // Committing needs node 2's fetch (two voters).
    let appended = members[&1].quorum.propose(vec![Bytes::from_static(b"x")], epoch).await.unwrap().unwrap();
    committed_everywhere(&members, appended.last_offset).await;
    assert_eq!(members[&2].committed_values(), [Bytes::from_static(b"x")]);
}
