//! KRaft interop with Apache Kafka 4.3.1 (jars from Maven Central through
//! `tools/kafka-reference/install`): quorums of three static voters mixing
//! krabka quorum members (in this process, each with its own directory,
//! listener and connections) and Apache Kafka 4.3.1 controller processes.
//! Election timeouts of a minute on one side make the other run first, so
//! each test knows who must lead. After every election the new epoch's
//! first record must commit, and at the end every node's
//! `__cluster_metadata-0` segment holds the same committed bytes. A voter
//! left behind the leader's log start fetches the leader's snapshot over
//! FetchSnapshot, krabka's from Kafka and Kafka's from krabka, and keeps
//! it byte for byte.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use krabka_broker::quorum::QuorumStatus;
use krabka_broker::quorum::{serve_controller_listener, ControllerListenerSecurity, Quorum, QuorumSetup};
use krabka_log::LogConfig;
use krabka_protocol::Uuid;
use krabka_raft::wire::{Endpoint, WireContext};
use krabka_raft::{RaftConfig, RoleName};
use support::{free_port, KafkaNode};

/// The committed batches of a `__cluster_metadata-0` segment below
/// `high_watermark`, as (base offset, bytes).
fn committed_batches(segment: &Path, high_watermark: i64) -> Vec<(i64, Vec<u8>)> {
    let bytes = std::fs::read(segment).unwrap();
    let mut batches = Vec::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let base = i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if base >= high_watermark || at + 12 + length > bytes.len() {
            break;
        }
        batches.push((base, bytes[at..at + 12 + length].to_vec()));
        at += 12 + length;
    }
    batches
}

const CLUSTER_ID: &str = "AAECAwQFBgcICQoLDA0ODw";
/// An election timeout long enough that the other side always runs first
/// (each is drawn from [T, 2T), so at least a minute), even when a loaded
/// machine takes many seconds to start a JVM.
const PATIENT_MS: i64 = 60_000;
/// One cluster at a time: the tests' JVMs would otherwise start together
/// on a 2-core machine and stretch every timeout.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Who a voter is.
#[derive(Clone, Copy)]
enum Voter {
    Krabka {
        election_timeout_ms: i64,
    },
    Kafka {
        election_timeout_ms: i64,
    },
    /// Listed in the voter set, never started.
    Absent,
}

struct Cluster {
    dir: tempfile::TempDir,
    ports: BTreeMap<i32, u16>,
    krabka: BTreeMap<i32, Arc<Quorum>>,
    kafka: BTreeMap<i32, KafkaNode>,
    timeouts: BTreeMap<i32, i64>,
    /// Kafka nodes' config lines beyond the election timeout.
    kafka_extra: String,
    /// krabka members' `metadata.max.retention.bytes`.
    retention: i64,
}

impl Cluster {
    async fn start(voters: &[(i32, Voter)]) -> Cluster {
        Self::start_with(voters, "", -1).await
    }

    /// A cluster whose Kafka nodes take `kafka_extra` config lines and whose
    /// krabka members keep `retention` bytes of metadata log and snapshots.
    async fn start_with(voters: &[(i32, Voter)], kafka_extra: &str, retention: i64) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ports: BTreeMap<i32, u16> = voters.iter().map(|&(id, _)| (id, free_port())).collect();
        let mut cluster = Cluster {
            dir,
            ports,
            krabka: BTreeMap::new(),
            kafka: BTreeMap::new(),
            timeouts: BTreeMap::new(),
            kafka_extra: kafka_extra.into(),
            retention,
        };
        for &(id, voter) in voters {
            match voter {
                Voter::Kafka { election_timeout_ms } => {
                    cluster.timeouts.insert(id, election_timeout_ms);
                    cluster.start_kafka(id);
                }
                Voter::Krabka { election_timeout_ms } => {
                    cluster.timeouts.insert(id, election_timeout_ms);
                }
                Voter::Absent => {}
            }
        }
        let krabka: Vec<i32> =
            voters.iter().filter(|(_, v)| matches!(v, Voter::Krabka { .. })).map(|&(id, _)| id).collect();
        for id in krabka {
            cluster.start_krabka(id).await;
        }
        cluster
    }

    /// Starts (or restarts, on what it left) Kafka controller `id`.
    fn start_kafka(&mut self, id: i32) {
        let dir = self.node_dir(id);
        std::fs::create_dir_all(&dir).unwrap();
        let voters = self.ports.iter().map(|(id, port)| format!("{id}@127.0.0.1:{port}")).collect::<Vec<_>>();
        let extra = format!("controller.quorum.election.timeout.ms={}\n{}", self.timeouts[&id], self.kafka_extra);
        let kafka = KafkaNode::start_controller(&dir, id, self.ports[&id], &voters.join(","), CLUSTER_ID, &extra);
        self.kafka.insert(id, kafka);
    }

    fn is_kafka(&self, id: i32) -> bool {
        self.node_dir(id).join("server.properties").exists()
    }

    /// Node `id`'s metadata log directory.
    fn metadata_dir(&self, id: i32) -> PathBuf {
        let base = if self.is_kafka(id) { self.node_dir(id).join("logs") } else { self.node_dir(id) };
        base.join("__cluster_metadata-0")
    }

    /// The snapshots in node `id`'s metadata log directory, bootstrap
    /// snapshots (end offset 0) left out.
    fn snapshots(&self, id: i32) -> Vec<krabka_log::SnapshotId> {
        let found = krabka_log::snapshots::list(&self.metadata_dir(id)).unwrap();
        found.into_iter().filter(|s| s.end_offset > 0).collect()
    }

    fn node_dir(&self, id: i32) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    /// The node's metadata segment (Kafka's under `logs/`).
    fn segment(&self, id: i32) -> PathBuf {
        self.metadata_dir(id).join("00000000000000000000.log")
    }

    /// Starts (or restarts, on what it left) krabka member `id`.
    async fn start_krabka(&mut self, id: i32) {
        let voters: BTreeMap<i32, Endpoint> =
            self.ports.iter().map(|(&id, &port)| (id, Endpoint { host: "127.0.0.1".into(), port })).collect();
        let setup = QuorumSetup {
            context: WireContext {
                cluster_id: CLUSTER_ID.into(),
                node_id: id,
                directory_id: Uuid([id as u8; 16]),
                listener: "CONTROLLER".into(),
                voters: voters.clone(),
            },
            raft: RaftConfig {
                node_id: id,
                voters: voters.keys().copied().collect(),
                election_timeout_ms: self.timeouts[&id],
                fetch_timeout_ms: 2000,
                fetch_max_wait_ms: 500,
                retry_backoff_ms: 20,
                request_timeout_ms: 2000,
                membership: Default::default(),
                max_fetch_bytes: 8 << 20,
                fetch_snapshot_max_bytes: 1 << 20,
                retention_max_bytes: self.retention,
                retention_ms: -1,
                seed: id as u64,
            },
            log_dir: self.node_dir(id).join("__cluster_metadata-0"),
            log_config: LogConfig::default(),
            request_timeout: Duration::from_millis(2000),
            snapshot_every_bytes: u64::MAX,
            snapshot_interval_ms: 0,
            controller_client: Default::default(),
        };
        // A restart waits for the stopped member's listener task to let go.
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match tokio::net::TcpListener::bind(("127.0.0.1", self.ports[&id])).await {
                Ok(listener) => break listener,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("rebinding node {id}'s listener: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("node {id}'s listener: {e}"),
            }
        };
        // What it commits is compared on disk, not through the loader's stream.
        let (quorum, _committed) = Quorum::start(setup, &tokio::runtime::Handle::current()).unwrap();
        let quorum = Arc::new(quorum);
        tokio::spawn(serve_controller_listener(
            listener,
            Arc::clone(&quorum),
            None,
            ControllerListenerSecurity::plaintext("CONTROLLER"),
        ));
        self.krabka.insert(id, quorum);
    }

    /// Stops node `id`: a krabka member resigns and stops, a Kafka process
    /// is killed (SIGKILL).
    fn stop(&mut self, id: i32) {
        if let Some(quorum) = self.krabka.remove(&id) {
            quorum.stop();
        }
        self.kafka.remove(&id);
    }

    /// Waits until every running krabka member agrees on a leader of an
    /// epoch after `after_epoch` that is running (a krabka member that
    /// leads, or a live Kafka node), and its high watermark is past
    /// `committed`: the new epoch's first record is committed.
    async fn elected(&self, after_epoch: i32, committed: i64) -> QuorumStatus {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let statuses: Vec<QuorumStatus> = self.krabka.values().map(|q| *q.status().borrow()).collect();
            let first = statuses[0];
            let live = first.leader_id.is_some_and(|id| {
                self.kafka.contains_key(&id)
                    || self.krabka.get(&id).is_some_and(|q| q.status().borrow().role == RoleName::Leader)
            });
            let agreed = statuses.iter().all(|s| (s.leader_id, s.epoch) == (first.leader_id, first.epoch));
            if live && agreed && first.epoch > after_epoch && statuses.iter().all(|s| s.high_watermark > committed) {
                return first;
            }
            assert!(
                Instant::now() < deadline,
                "no new leader with a committed epoch: {statuses:?}; see {:?}",
                self.dir.path()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops everything, then checks the committed batches (below
    /// `high_watermark`) are the same bytes on every node in `ids`, and that
    /// no Kafka node logged an error.
    fn stop_and_compare(mut self, ids: &[i32], high_watermark: i64) -> usize {
        for id in self.ports.keys().copied().collect::<Vec<_>>() {
            self.stop(id);
        }
        let reference = committed_batches(&self.segment(ids[0]), high_watermark);
        assert!(!reference.is_empty());
        for &id in &ids[1..] {
            assert_eq!(
                committed_batches(&self.segment(id), high_watermark),
                reference,
                "node {id} differs from {}",
                ids[0]
            );
        }
        self.check_kafka_logs();
        reference.len()
    }

    /// No Kafka node logged an error.
    fn check_kafka_logs(&self) {
        for (id, voter) in self.ports.keys().map(|&id| (id, self.node_dir(id).join("kafka.log"))) {
            let Ok(log) = std::fs::read_to_string(&voter) else { continue };
            // Expected: these quorum members run without a controller, so a
            // Kafka controller's ControllerRegistration to a krabka leader
            // fails, which Kafka logs and retries. (UpdateRaftVoter is
            // served since KIP-853's slice: no error of it is let through.)
            // And a Kafka controller on a loaded machine (the test suite
            // runs beside it) logs its own slow events at ERROR.
            let expected =
                |l: &str| l.contains("ControllerRegistration") || l.contains("Exceptionally slow controller event");
            let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR") && !expected(l)).collect();
            assert!(errors.is_empty(), "Kafka node {id} logged errors:\n{}", errors.join("\n"));
        }
    }
}

/// Voters 1 (krabka) and 2 (Kafka) of three: neither elects nor commits
/// without the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_controller_follows_a_krabka_leader() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let voters = [
        (1, Voter::Krabka { election_timeout_ms: 300 }),
        (2, Voter::Kafka { election_timeout_ms: PATIENT_MS }),
        (3, Voter::Absent),
    ];
    let cluster = Cluster::start(&voters).await;
    let status = cluster.elected(0, 0).await;
    assert_eq!(status.leader_id, Some(1), "{status:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = *cluster.krabka[&1].status().borrow();
    assert_eq!(status.leader_id, Some(1), "the lead moved: {status:?}");
    cluster.stop_and_compare(&[1, 2], status.high_watermark);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_krabka_member_follows_a_kafka_leader() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let voters = [
        (1, Voter::Krabka { election_timeout_ms: PATIENT_MS }),
        (2, Voter::Kafka { election_timeout_ms: 1000 }),
        (3, Voter::Absent),
    ];
    let cluster = Cluster::start(&voters).await;
    let status = cluster.elected(0, 0).await;
    assert_eq!(status.leader_id, Some(2), "{status:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = *cluster.krabka[&1].status().borrow();
    assert_eq!(status.leader_id, Some(2), "the lead moved: {status:?}");
    let batches = cluster.stop_and_compare(&[1, 2], status.high_watermark);
    assert!(batches > 1, "Kafka's bootstrap records replicated");
}

/// Two krabka members and a Kafka controller: krabka 1 leads; when it stops
/// (resigning), Kafka runs first and the other krabka member elects it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_krabka_members_and_a_kafka_controller_fail_over_to_kafka() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let voters = [
        (1, Voter::Krabka { election_timeout_ms: 300 }),
        (2, Voter::Krabka { election_timeout_ms: PATIENT_MS }),
        (3, Voter::Kafka { election_timeout_ms: 1000 }),
    ];
    let mut cluster = Cluster::start(&voters).await;
    let first = cluster.elected(0, 0).await;
    assert_eq!(first.leader_id, Some(1), "{first:?}");
    // Kafka follows too before the lead moves.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let before = *cluster.krabka[&2].status().borrow();
    cluster.stop(1);
    let next = cluster.elected(first.epoch, before.high_watermark).await;
    assert_eq!(next.leader_id, Some(3), "{next:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = *cluster.krabka[&2].status().borrow();
    cluster.stop_and_compare(&[2, 3], status.high_watermark);
}

/// Two Kafka controllers and a krabka member: krabka leads with a Kafka
/// vote; when it stops (resigning), the Kafka nodes elect one of
/// themselves, and krabka, restarted on the log and `quorum-state` it
/// left, follows the new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_krabka_member_and_two_kafka_controllers_fail_over_to_kafka() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let voters = [
        (1, Voter::Krabka { election_timeout_ms: 300 }),
        // Patient, so krabka leads first; krabka's resignation makes its
        // preferred successor run at once.
        (2, Voter::Kafka { election_timeout_ms: PATIENT_MS }),
        (3, Voter::Kafka { election_timeout_ms: PATIENT_MS }),
    ];
    let mut cluster = Cluster::start(&voters).await;
    let first = cluster.elected(0, 0).await;
    assert_eq!(first.leader_id, Some(1), "{first:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = *cluster.krabka[&1].status().borrow();
    cluster.stop(1);
    cluster.timeouts.insert(1, PATIENT_MS);
    cluster.start_krabka(1).await;
    let next = cluster.elected(first.epoch, before.high_watermark).await;
    assert!(matches!(next.leader_id, Some(2 | 3)), "{next:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = *cluster.krabka[&1].status().borrow();
    cluster.stop_and_compare(&[1, 2, 3], status.high_watermark);
}

/// Waits (up to `patience`) for `check`, sleeping between looks.
async fn eventually(what: &str, patience: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Kafka controllers snapshotting often and keeping nothing before their
/// newest snapshot (their cleaner runs each minute).
const KAFKA_SNAPSHOTS: &str = "metadata.log.max.record.bytes.between.snapshots=512\nmetadata.max.retention.bytes=0\n\
     metadata.max.idle.interval.ms=100\n";

/// A krabka member stopped while a Kafka leader commits on, snapshots and
/// cuts its log: restarted, it is behind the leader's log start, fetches
/// Kafka's snapshot over FetchSnapshot (chunks of Kafka's unaligned
/// records), replaces its log with it, and follows on. The snapshot it
/// stores is Kafka's, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_krabka_member_behind_a_kafka_leaders_log_start_fetches_its_snapshot() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let voters = [
        (1, Voter::Krabka { election_timeout_ms: PATIENT_MS }),
        (2, Voter::Kafka { election_timeout_ms: 1000 }),
        (3, Voter::Kafka { election_timeout_ms: PATIENT_MS }),
    ];
    let mut cluster = Cluster::start_with(&voters, KAFKA_SNAPSHOTS, -1).await;
    let first = cluster.elected(0, 0).await;
    assert_eq!(first.leader_id, Some(2), "{first:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left_at = cluster.krabka[&1].status().borrow().log_end_offset;
    cluster.stop(1);
    // Kafka's cleaner (once a minute) moves its log start past where the
    // krabka member stopped: every snapshot it keeps ends after it.
    eventually("Kafka's log to start after the stopped member's end", Duration::from_secs(150), || {
        let kept = cluster.snapshots(2);
        !kept.is_empty() && kept.iter().all(|s| s.end_offset > left_at) && cluster.kafka_cleaned(2)
    })
    .await;
    cluster.start_krabka(1).await;
    let status = cluster.elected(0, left_at).await;
    assert_eq!(status.leader_id, Some(2), "{status:?}");
    let fetched = *cluster.snapshots(1).last().expect("the member stored Kafka's snapshot");
    assert!(fetched.end_offset > left_at, "{fetched:?}");
    let ours = std::fs::read(cluster.metadata_dir(1).join(fetched.file_name())).unwrap();
    if let Ok(theirs) = std::fs::read(cluster.metadata_dir(2).join(fetched.file_name())) {
        assert_eq!(ours, theirs, "snapshot {fetched:?} differs from Kafka's");
    }
    cluster.check_kafka_logs();
}

impl Cluster {
    /// Kafka node `id` deleted a snapshot: its cleaner has run and moved
    /// the log start to its newest.
    fn kafka_cleaned(&self, id: i32) -> bool {
        let log = std::fs::read_to_string(self.node_dir(id).join("kafka.log")).unwrap_or_default();
        log.contains("for deletion because the log size")
    }
}

/// A Kafka controller stopped while krabka members commit on, snapshot and
/// cut their logs (retention 0): restarted, it is behind the krabka
/// leader's log start, fetches krabka's snapshot over FetchSnapshot, loads
/// it into its own image and follows on, logging no error; its copy of the
/// snapshot is krabka's, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_controller_behind_a_krabka_leaders_log_start_fetches_its_snapshot() {
    use krabka_metadata::{MetadataImage, MetadataRecord};
    use krabka_protocol::{FeatureLevelRecord, PartitionRecord, TopicRecord};
    let _serial = ONE_AT_A_TIME.lock().await;
    let voters = [
        (1, Voter::Krabka { election_timeout_ms: 300 }),
        (2, Voter::Kafka { election_timeout_ms: PATIENT_MS }),
        (3, Voter::Krabka { election_timeout_ms: PATIENT_MS }),
    ];
    let mut cluster = Cluster::start_with(&voters, "", 0).await;
    let first = cluster.elected(0, 0).await;
    assert_eq!(first.leader_id, Some(1), "{first:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.stop(2);
    // Records Kafka's controller replays: the metadata version, then a
    // topic each round; each round ends with a snapshot on both members.
    let mut image = MetadataImage::default();
    // Kafka 4.3.1's metadata.version (4.3-IV0), the highest krabka supports.
    let level = krabka_metadata::features::SUPPORTED_FEATURES[0].max;
    let feature = FeatureLevelRecord { name: "metadata.version".into(), feature_level: level, ..Default::default() };
    let mut pending = vec![MetadataRecord::FeatureLevel(feature)];
    for round in 0..2u8 {
        let topic_id = krabka_protocol::Uuid([round + 1; 16]);
        let topic = TopicRecord { name: format!("round-{round}"), topic_id, ..Default::default() };
        pending.push(MetadataRecord::Topic(topic));
        let partition = PartitionRecord {
            partition_id: 0,
            topic_id,
            replicas: vec![1],
            isr: vec![1],
            leader: 1,
            ..Default::default()
        };
        pending.push(MetadataRecord::Partition(partition));
        for record in &pending {
            image.apply(record).unwrap();
        }
        let values = pending.drain(..).map(|r| r.encode()).collect();
        let appended = cluster.krabka[&1].propose(values, first.epoch).await.unwrap().expect("the leader takes it");
        let status = cluster.elected(0, appended.last_offset).await;
        let id = krabka_log::SnapshotId { end_offset: status.high_watermark, epoch: first.epoch };
        for quorum in cluster.krabka.values() {
            quorum.store_snapshot(id, krabka_metadata::snapshot::encode(&image, 1).unwrap());
        }
        eventually("both members to store the snapshot", Duration::from_secs(10), || {
            [1, 3].iter().all(|&m| cluster.snapshots(m).contains(&id))
        })
        .await;
    }
    let newest = *cluster.snapshots(1).last().unwrap();
    cluster.start_kafka(2);
    eventually("Kafka to fetch krabka's snapshot", Duration::from_secs(90), || cluster.snapshots(2).contains(&newest))
        .await;
    let ours = std::fs::read(cluster.metadata_dir(1).join(newest.file_name())).unwrap();
    let theirs = std::fs::read(cluster.metadata_dir(2).join(newest.file_name())).unwrap();
    assert_eq!(ours, theirs, "Kafka's copy of {newest:?} differs");
    // It follows on from the snapshot: the leader's next record reaches it.
    let topic_id = krabka_protocol::Uuid([9; 16]);
    let after = MetadataRecord::Topic(TopicRecord { name: "after".into(), topic_id, ..Default::default() });
    let appended =
        cluster.krabka[&1].propose(vec![after.encode()], first.epoch).await.unwrap().expect("the leader takes it");
    let leader = Arc::clone(&cluster.krabka[&1]);
    let mut kafka_end = -1;
    let deadline = Instant::now() + Duration::from_secs(30);
    while kafka_end <= appended.last_offset {
        assert!(Instant::now() < deadline, "Kafka stopped at {kafka_end}, before {}", appended.last_offset);
        tokio::time::sleep(Duration::from_millis(200)).await;
        kafka_end = voter_log_end(&leader, 2).await;
    }
    cluster.check_kafka_logs();
}

/// Voter `id`'s log end offset as the leader `quorum` describes it.
async fn voter_log_end(quorum: &Quorum, id: i32) -> i64 {
    use krabka_protocol::generated::describe_quorum_request::{PartitionData, TopicData};
    let request = krabka_protocol::DescribeQuorumRequest {
        topics: vec![TopicData {
            topic_name: "__cluster_metadata".into(),
            partitions: vec![PartitionData { partition_index: 0, ..Default::default() }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let answer = quorum.describe(request, 2).await.expect("the quorum answers");
    let partition = &answer.topics[0].partitions[0];
    partition.current_voters.iter().find(|v| v.replica_id == id).map_or(-1, |v| v.log_end_offset)
}
