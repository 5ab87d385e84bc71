//! A krabka broker with two log directories (JBOD, KIP-858) in a
//! three-node krabka cluster. It names the directory of each replica it
//! creates (AssignReplicasToDirs) and the controller records it; when one
//! directory fails (its disk, a small tmpfs, fills), the broker stops
//! serving the replicas in it only (KAFKA_STORAGE_ERROR), reports the
//! directory in its heartbeat, and the controller moves leadership and ISR
//! membership of those partitions alone to the other brokers; the broker
//! stays up, registered and unfenced, leading the partitions in its other
//! directory. Freed and restarted, it takes its replicas back. A directory
//! that cannot be read at start is left offline the same way, and none of
//! its replicas is re-created empty in the other directory.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use krabka_protocol::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use krabka_protocol::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, ErrorCode, MetadataRequest, MetadataResponse,
};
use support::log_dirs::{
    assigned_to, brokers_listed, describe_log_dirs, directory_id, leaders_and_isrs, partitions_in, produce, SmallDisk,
};
use support::{BrokerProcess, RawClient};

const TOPIC: &str = "jbod";
/// Node 1, the broker with two directories.
const JBOD_ID: i32 = 1;
const PATIENCE: Duration = Duration::from_secs(60);

/// Creates `TOPIC` with four partitions led by node 1, each with one
/// follower on node 2 or 3.
fn create_topic(bootstrap: &str) {
    let followers = [2, 3, 2, 3];
    let assignments = followers
        .iter()
        .enumerate()
        .map(|(index, &follower)| CreatableReplicaAssignment {
            partition_index: index as i32,
            broker_ids: vec![JBOD_ID, follower],
            ..Default::default()
        })
        .collect();
    let topic = CreatableTopic {
        name: TOPIC.into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments,
        ..Default::default()
    };
    let request = CreateTopicsRequest { topics: vec![topic], timeout_ms: 10_000, ..Default::default() };
    let response: CreateTopicsResponse = RawClient::connect(bootstrap).request(ApiKey::CreateTopics, 7, &request);
    assert_eq!(response.topics[0].error_code, 0, "{:?}", response.topics[0].error_message);
}

/// Each partition of `TOPIC`'s offline replicas (Metadata), by index.
fn offline_replicas(bootstrap: &str) -> Vec<Vec<i32>> {
    let request = MetadataRequest { topics: None, ..Default::default() };
    let answer: MetadataResponse = RawClient::connect(bootstrap).request(ApiKey::Metadata, 12, &request);
    let topic = answer.topics.iter().find(|t| t.name.as_deref() == Some(TOPIC)).expect("the topic");
    let mut partitions: Vec<_> =
        topic.partitions.iter().map(|p| (p.partition_index, p.offline_replicas.clone())).collect();
    partitions.sort();
    partitions.into_iter().map(|(_, offline)| offline).collect()
}

/// A three-node cluster whose node 1 has a second log directory on a
/// small disk, added as an operator adds one (listed in log.dirs, left
/// unformatted: the broker names it), and `TOPIC` on it: returns the nodes,
/// the small disk, node 1's directories (kept, small) and the partitions
/// in each, once the controller recorded where they are.
fn cluster_with_a_small_disk(extra: &[&str]) -> (Vec<BrokerProcess>, SmallDisk, [PathBuf; 2], [Vec<i32>; 2]) {
    let mut nodes = BrokerProcess::start_cluster(3, extra);
    let small = nodes[0].dir.path().join("small");
    let disk = SmallDisk::mount(&small, "16m");
    let (dirs, partitions) = add_a_directory_to_node_1(&mut nodes, &small);
    (nodes, disk, dirs, partitions)
}

/// Adds directory `second` to node 1's `log.dirs` (restarting it), then
/// creates `TOPIC`: node 1's directories (the first, `second`) and the
/// partitions in each, once the controller recorded where they are.
fn add_a_directory_to_node_1(nodes: &mut [BrokerProcess], second: &std::path::Path) -> ([PathBuf; 2], [Vec<i32>; 2]) {
    nodes[0].stop();
    let kept = nodes[0].data_dir();
    let config_path = nodes[0].dir.path().join("server.properties");
    let config = std::fs::read_to_string(&config_path).unwrap();
    let one_dir = format!("log.dirs={}\n", kept.display());
    assert!(config.contains(&one_dir));
    let two_dirs = format!("log.dirs={},{}\n", kept.display(), second.display());
    std::fs::write(&config_path, config.replace(&one_dir, &two_dirs)).unwrap();
    nodes[0].restart();
    let bootstrap = nodes[1].bootstrap();
    support::wait_for("node 1 registered and unfenced again", PATIENCE, || {
        brokers_listed(&bootstrap).contains(&JBOD_ID)
    });

    create_topic(&bootstrap);
    support::wait_for("every partition led by node 1, both replicas in sync", PATIENCE, || {
        whole(&leaders_and_isrs(&bootstrap, TOPIC))
    });
    let (in_second, in_kept) = (partitions_in(second, TOPIC), partitions_in(&kept, TOPIC));
    assert_eq!(in_second.len() + in_kept.len(), 4, "{in_second:?} / {in_kept:?}");
    assert!(!in_second.is_empty() && !in_kept.is_empty(), "spread over both: {in_second:?} / {in_kept:?}");
    let (second_id, kept_id) = (directory_id(second), directory_id(&kept));
    support::wait_for("the controller to record the directories node 1 named", PATIENCE, || {
        assigned_to(&nodes[1], TOPIC, JBOD_ID, second_id) == in_second
            && assigned_to(&nodes[1], TOPIC, JBOD_ID, kept_id) == in_kept
    });
    ([kept, second.to_path_buf()], [in_kept, in_second])
}

/// Every partition of `TOPIC` led by node 1 with both replicas in sync.
fn whole(state: &[(i32, Vec<i32>)]) -> bool {
    state.len() == 4 && state.iter().all(|(leader, isr)| *leader == JBOD_ID && isr.len() == 2)
}

/// Waits for the partitions `moved` to be led by the other brokers without
/// node 1 in their ISR, then checks node 1 stays up, registered and
/// unfenced, leading the partitions `kept` with both replicas in sync.
fn only_the_failed_directory_moves(nodes: &mut [BrokerProcess], moved: &[i32], kept: &[i32]) {
    let bootstrap = nodes[1].bootstrap();
    support::wait_for("the failed directory's partitions led by the other brokers", PATIENCE, || {
        let state = leaders_and_isrs(&bootstrap, TOPIC);
        state.len() == 4
            && moved.iter().all(|&p| state[p as usize].0 != JBOD_ID && !state[p as usize].1.contains(&JBOD_ID))
    });
    assert!(nodes[0].is_running(), "node 1 stays up");
    assert!(brokers_listed(&bootstrap).contains(&JBOD_ID), "node 1 stays registered and unfenced");
    let state = leaders_and_isrs(&bootstrap, TOPIC);
    for &p in kept {
        let (leader, isr) = &state[p as usize];
        assert!(*leader == JBOD_ID && isr.len() == 2, "partition {p} stays led by node 1, both in sync: {state:?}");
    }
}

/// Node 1 reports its directory `[online, offline]` as Kafka's broker
/// does: its OfflineReplicaCount (`replicas` offline) and
/// OfflineLogDirectoryCount gauges, and DescribeLogDirs.
fn node_1_reports_offline(node: &BrokerProcess, [online, offline]: [&std::path::Path; 2], replicas: usize) {
    let gauges = [
        format!("kafka_server_replicamanager_offlinereplicacount {replicas}\n"),
        "kafka_log_logmanager_offlinelogdirectorycount 1\n".to_string(),
    ];
    support::wait_for("node 1's gauges to count what is offline", PATIENCE, || {
        let metrics = String::from_utf8_lossy(&node.http_get("/metrics").1).into_owned();
        gauges.iter().all(|g| metrics.contains(g.as_str()))
    });
    let described = describe_log_dirs(&node.bootstrap());
    let error_of =
        |dir: &std::path::Path| described.iter().find(|r| r.log_dir == dir.display().to_string()).map(|r| r.error_code);
    assert_eq!(error_of(offline), Some(ErrorCode::KAFKA_STORAGE_ERROR.code()), "{described:?}");
    assert_eq!(error_of(online), Some(0), "{described:?}");
}

#[test]
fn a_failed_log_directory_moves_only_its_partitions_and_the_broker_stays_up() {
    let (mut nodes, disk, [kept, small], [in_kept, in_small]) =
        cluster_with_a_small_disk(&["krabka.metrics.listener=127.0.0.1:0"]);
    let bootstrap = nodes[1].bootstrap();

    // The small disk fills; the next write there fails.
    disk.fill();
    let jbod = nodes[0].bootstrap();
    let refused = produce(&jbod, TOPIC, in_small[0], 100, 10_000);
    assert_eq!(refused, ErrorCode::KAFKA_STORAGE_ERROR.code(), "a write to the full directory");

    only_the_failed_directory_moves(&mut nodes, &in_small, &in_kept);
    let state = leaders_and_isrs(&bootstrap, TOPIC);
    for &p in &in_kept {
        assert_eq!(produce(&jbod, TOPIC, p, 10, 100), 0, "node 1 serves partition {p}");
    }
    for &p in &in_small {
        let leader = nodes[(state[p as usize].0 - 1) as usize].bootstrap();
        assert_eq!(produce(&leader, TOPIC, p, 10, 100), 0, "the new leader serves partition {p}");
        let code = produce(&jbod, TOPIC, p, 1, 100);
        assert_eq!(code, ErrorCode::KAFKA_STORAGE_ERROR.code(), "node 1's replica of {p} is offline");
    }
    let offline = offline_replicas(&bootstrap);
    for p in 0..4 {
        let expected = if in_small.contains(&p) { vec![JBOD_ID] } else { Vec::new() };
        assert_eq!(offline[p as usize], expected, "partition {p}'s offline replicas");
    }
    node_1_reports_offline(&nodes[0], [&kept, &small], in_small.len());

    // Space freed and the broker restarted: its replicas catch up and rejoin.
    disk.free();
    nodes[0].stop();
    nodes[0].restart();
    support::wait_for("every replica of node 1 back in sync", PATIENCE, || {
        let state = leaders_and_isrs(&bootstrap, TOPIC);
        state.len() == 4 && state.iter().all(|(_, isr)| isr.contains(&JBOD_ID) && isr.len() == 2)
    });
}

#[test]
fn a_directory_whose_checkpoints_cannot_be_written_goes_offline_without_a_produce() {
    // Offset checkpoints every second: the first write after the disk
    // fills is theirs, not a client's.
    let extra = ["log.flush.offset.checkpoint.interval.ms=1000"];
    let (mut nodes, disk, _, [in_kept, in_small]) = cluster_with_a_small_disk(&extra);
    disk.fill();
    only_the_failed_directory_moves(&mut nodes, &in_small, &in_kept);
    assert!(nodes[0].log().contains("writing its checkpoints"), "the checkpoints' write took the directory offline");
}

#[test]
fn a_directory_unreadable_at_start_leaves_its_replicas_closed_and_unelected_until_it_is_back() {
    let mut nodes = BrokerProcess::start_cluster(3, &["krabka.metrics.listener=127.0.0.1:0"]);
    let second = nodes[0].dir.path().join("second");
    let ([kept, second], [in_kept, in_second]) = add_a_directory_to_node_1(&mut nodes, &second);
    let bootstrap = nodes[1].bootstrap();
    let jbod = nodes[0].bootstrap();
    for p in 0..4 {
        assert_eq!(produce(&jbod, TOPIC, p, 10, 100), 0, "node 1 leads partition {p}");
    }

    // The disk is gone while node 1 is down: its directory's path is a
    // file now, so nothing in it can be read (ENOTDIR), as root or not.
    nodes[0].stop();
    let away = second.with_extension("away");
    std::fs::rename(&second, &away).unwrap();
    std::fs::write(&second, b"not a directory").unwrap();
    nodes[0].restart();
    support::wait_for("node 1 registered and unfenced, its readable directory's replicas in sync", PATIENCE, || {
        let state = leaders_and_isrs(&bootstrap, TOPIC);
        brokers_listed(&bootstrap).contains(&JBOD_ID)
            && state.len() == 4
            && in_kept.iter().all(|&p| state[p as usize].1.contains(&JBOD_ID))
    });
    assert!(nodes[0].log().contains("meta.properties cannot be read"), "said why the directory is offline");
    // Not one of the unreadable directory's replicas was created empty in
    // the other directory: it could have been elected and lost them all.
    assert_eq!(partitions_in(&kept, TOPIC), in_kept, "no replica re-created in the readable directory");
    let state = leaders_and_isrs(&bootstrap, TOPIC);
    let offline = offline_replicas(&bootstrap);
    for &p in &in_second {
        let (leader, isr) = &state[p as usize];
        assert!(*leader != JBOD_ID && !isr.contains(&JBOD_ID), "partition {p} neither led nor in sync here: {state:?}");
        assert_eq!(offline[p as usize], vec![JBOD_ID], "partition {p}'s replica on node 1 is offline");
        let code = produce(&jbod, TOPIC, p, 1, 100);
        assert_eq!(code, ErrorCode::KAFKA_STORAGE_ERROR.code(), "node 1's replica of {p} is offline");
    }
    node_1_reports_offline(&nodes[0], [&kept, &second], in_second.len());

    // The disk is back: node 1 restarted finds its replicas where they
    // were, with their records, and they rejoin the ISR.
    nodes[0].stop();
    std::fs::remove_file(&second).unwrap();
    std::fs::rename(&away, &second).unwrap();
    nodes[0].restart();
    support::wait_for("every replica of node 1 back in sync", PATIENCE, || {
        let state = leaders_and_isrs(&bootstrap, TOPIC);
        state.len() == 4 && state.iter().all(|(_, isr)| isr.contains(&JBOD_ID) && isr.len() == 2)
    });
    assert_eq!(partitions_in(&second, TOPIC), in_second, "the replicas are where they were");
    assert!(offline_replicas(&bootstrap).iter().all(Vec::is_empty), "nothing offline");
}

/// AlterReplicaLogDirs (KIP-113) with Kafka's own tool: node 1's replica
/// of a partition moves to its other directory while a producer writes to
/// it. The future replica copies the current one and is swapped in once
/// the controller recorded its new directory; nothing acknowledged is
/// lost, the moved replica holds the same bytes as the follower's, and a
/// restart finds it in its new place.
#[test]
fn a_replica_moves_to_another_directory_with_kafkas_tool_while_it_is_written() {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    let (mut nodes, [kept, second], plan) = a_cluster_planning_a_move();
    let (bootstrap, jbod, moved) = (nodes[1].bootstrap(), nodes[0].bootstrap(), plan.moved);
    let acked = std::sync::Arc::new(AtomicI64::new(8_000));
    let writing = std::sync::Arc::new(AtomicBool::new(true));
    let writer = {
        let (acked, writing, jbod) = (acked.clone(), writing.clone(), jbod.clone());
        std::thread::spawn(move || {
            while writing.load(Ordering::Relaxed) {
                assert_eq!(produce(&jbod, TOPIC, moved, 10, 1_000), 0, "a produce during the move");
                acked.fetch_add(10, Ordering::Relaxed);
            }
        })
    };
    let (ok, printed) = plan.tool(&bootstrap, &["--execute"]);
    assert!(ok && printed.contains("Successfully started moving log directory"), "{printed}");
    plan.wait_for_completion(&bootstrap);
    writing.store(false, Ordering::Relaxed);
    writer.join().expect("the writer");
    let acked = acked.load(Ordering::Relaxed);
    plan.check_moved(&nodes, &kept, &second);
    let end = || support::cluster::latest_offsets(&nodes[0], TOPIC, 4)[moved as usize].offset;
    support::wait_for("every acknowledged record in the moved replica (its high watermark)", PATIENCE, || {
        end() == acked
    });

    // Restarted, node 1 finds the replica in its new place, whole.
    nodes[0].stop();
    nodes[0].restart();
    support::wait_for("every replica of node 1 back in sync", PATIENCE, || {
        let state = leaders_and_isrs(&bootstrap, TOPIC);
        state.len() == 4 && state.iter().all(|(_, isr)| isr.contains(&JBOD_ID) && isr.len() == 2)
    });
    plan.check_moved(&nodes, &kept, &second);
}

/// A move held back by Kafka's tool's `--replica-alter-log-dirs-throttle`
/// is listed by DescribeLogDirs as a future replica behind its current
/// one; node 1 killed (SIGKILL) in the middle of it resumes it when it
/// starts again, and the moved replica ends whole in its new directory.
#[test]
fn a_move_interrupted_by_a_kill_resumes_at_the_next_start() {
    let (mut nodes, [kept, second], plan) = a_cluster_planning_a_move();
    let (bootstrap, jbod, moved) = (nodes[1].bootstrap(), nodes[0].bootstrap(), plan.moved);
    support::wait_for("every record replicated", PATIENCE, || {
        support::cluster::latest_offsets(&nodes[0], TOPIC, 4)[moved as usize].offset == 8_000
    });
    // 200 kB/s (after the first ten seconds' worth): some 30 s for 8 MB.
    let (ok, printed) = plan.tool(&bootstrap, &["--execute", "--replica-alter-log-dirs-throttle", "200000"]);
    assert!(ok && printed.contains("Successfully started moving log directory"), "{printed}");
    let behind = || {
        let described = describe_log_dirs(&jbod);
        let in_second = described.iter().find(|r| r.log_dir == second.display().to_string());
        let topics = in_second.map(|r| r.topics.clone()).unwrap_or_default();
        let partitions = topics.into_iter().filter(|t| t.name == TOPIC).flat_map(|t| t.partitions);
        partitions.filter(|p| p.partition_index == moved && p.is_future_key).map(|p| p.offset_lag).next()
    };
    support::wait_for("DescribeLogDirs to list the future replica behind", PATIENCE, || {
        behind().is_some_and(|lag| lag > 0)
    });
    let (_, printed) = plan.tool(&bootstrap, &["--verify", "--preserve-throttles"]);
    let in_progress = format!("Reassignment of replica {TOPIC}-{moved}-{JBOD_ID} is still in progress.");
    assert!(printed.contains(&in_progress), "{printed}");

    nodes[0].kill9();
    assert_eq!(futures_in(&second), 1, "killed in the middle of the move");
    nodes[0].restart();
    // The throttle off, the resumed move ends quickly.
    let throttle = "replica.alter.log.dirs.io.max.bytes.per.second";
    let alter = ["--bootstrap-server", &bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "1"];
    let (ok, printed) = support::kafka_cli(
        "kafka-configs",
        &alter.iter().chain(&["--delete-config", throttle]).copied().collect::<Vec<_>>(),
    );
    assert!(ok, "{printed}");
    plan.wait_for_completion(&bootstrap);
    plan.check_moved(&nodes, &kept, &second);
}

/// The destination of a move fills in the middle of it: the destination
/// directory goes offline (its own replicas move away, as for any failed
/// directory), the move is given up, and the moving replica stays where
/// it was, led by node 1 and written.
#[test]
fn a_move_whose_destination_fills_is_given_up_and_the_replica_stays_where_it_was() {
    let (mut nodes, disk, [kept, small], [in_kept, in_small]) = cluster_with_a_small_disk(&[]);
    let (bootstrap, jbod) = (nodes[1].bootstrap(), nodes[0].bootstrap());
    let plan = ReplicaMove::of_a_written_replica(&jbod, &in_kept, &small);
    let (ok, printed) = plan.tool(&bootstrap, &["--execute", "--replica-alter-log-dirs-throttle", "200000"]);
    assert!(ok && printed.contains("Successfully started moving log directory"), "{printed}");
    support::wait_for("the move to start", PATIENCE, || futures_in(&small) == 1);
    disk.fill();
    only_the_failed_directory_moves(&mut nodes, &in_small, &in_kept);
    assert!(nodes[0].log().contains("moving a replica failed"), "the move's write failed");
    assert_eq!(partitions_in(&kept, TOPIC), in_kept, "the moving replica stays where it was");
    assert_eq!(produce(&jbod, TOPIC, plan.moved, 10, 100), 0, "and node 1 keeps serving it");
    let described = describe_log_dirs(&jbod);
    let listed = |dir: &std::path::Path| described.iter().find(|r| r.log_dir == dir.display().to_string()).cloned();
    let in_kept_dir = listed(&kept).expect("the kept directory");
    let partitions: Vec<_> =
        in_kept_dir.topics.iter().filter(|t| t.name == TOPIC).flat_map(|t| t.partitions.clone()).collect();
    assert!(partitions.iter().any(|p| p.partition_index == plan.moved && !p.is_future_key), "{partitions:?}");
    assert!(partitions.iter().all(|p| !p.is_future_key), "no future replica left: {partitions:?}");
    assert_eq!(listed(&small).map(|r| r.error_code), Some(ErrorCode::KAFKA_STORAGE_ERROR.code()));
}

/// A move of node 1's replica of partition `moved` (first in its first
/// directory) to another of its directories, with Kafka's tool.
struct ReplicaMove {
    moved: i32,
    follower: i32,
    plan: PathBuf,
    _scratch: tempfile::TempDir,
}

impl ReplicaMove {
    /// Writes 8 MB (8,000 records) to node 1's replica of `in_kept[0]`
    /// (several rounds of the mover) and plans its move to `dest`.
    fn of_a_written_replica(jbod: &str, in_kept: &[i32], dest: &std::path::Path) -> Self {
        let moved = in_kept[0];
        let follower = [2, 3, 2, 3][moved as usize];
        for _ in 0..80 {
            assert_eq!(produce(jbod, TOPIC, moved, 100, 1_000), 0);
        }
        let scratch = tempfile::tempdir().unwrap();
        let plan = scratch.path().join("move.json");
        let json = format!(
            r#"{{"version":1,"partitions":[{{"topic":"{TOPIC}","partition":{moved},"replicas":[{JBOD_ID},{follower}],"log_dirs":["{}","any"]}}]}}"#,
            dest.display()
        );
        std::fs::write(&plan, json).unwrap();
        ReplicaMove { moved, follower, plan, _scratch: scratch }
    }

    /// `kafka-reassign-partitions` with the plan and `args`.
    fn tool(&self, bootstrap: &str, args: &[&str]) -> (bool, String) {
        let base = ["--bootstrap-server", bootstrap, "--reassignment-json-file", self.plan.to_str().unwrap()];
        support::kafka_cli("kafka-reassign-partitions", &base.iter().chain(args).copied().collect::<Vec<_>>())
    }

    /// Waits for `--verify` to say the move completed.
    fn wait_for_completion(&self, bootstrap: &str) {
        let done = format!("Reassignment of replica {TOPIC}-{}-{JBOD_ID} completed successfully", self.moved);
        support::wait_for("Kafka's tool to see the move complete", PATIENCE, || {
            let (ok, printed) = self.tool(bootstrap, &["--verify"]);
            ok && printed.contains(&done)
        });
    }

    /// Checks the replica ended in `dest` and not `source`, with no future
    /// replica left, the controller recording it there (read at `node`),
    /// and the same bytes as the follower's.
    fn check_moved(&self, nodes: &[BrokerProcess], source: &std::path::Path, dest: &std::path::Path) {
        assert!(partitions_in(dest, TOPIC).contains(&self.moved), "the replica is in its new directory");
        assert!(!partitions_in(source, TOPIC).contains(&self.moved), "and no longer in the old one");
        assert_eq!(futures_in(dest), 0, "no future replica left");
        let dest_id = directory_id(dest);
        support::wait_for("the controller to record the new directory", PATIENCE, || {
            assigned_to(&nodes[1], TOPIC, JBOD_ID, dest_id).contains(&self.moved)
        });
        let follower = nodes[(self.follower - 1) as usize].data_dir();
        support::replica_bytes::wait_for_same_bytes("the moved replica and the follower's", PATIENCE, || {
            vec![
                support::replica_bytes::partition_log(dest, TOPIC, self.moved),
                support::replica_bytes::partition_log(&follower, TOPIC, self.moved),
            ]
        });
    }
}

/// A three-node cluster whose node 1 has a second (plain) directory, and
/// a move of one of its replicas there ([`ReplicaMove::of_a_written_replica`]).
fn a_cluster_planning_a_move() -> (Vec<BrokerProcess>, [PathBuf; 2], ReplicaMove) {
    let mut nodes = BrokerProcess::start_cluster(3, &[]);
    let second = nodes[0].dir.path().join("second");
    let ([kept, second], [in_kept, _]) = add_a_directory_to_node_1(&mut nodes, &second);
    let plan = ReplicaMove::of_a_written_replica(&nodes[0].bootstrap(), &in_kept, &second);
    (nodes, [kept, second], plan)
}

/// How many future replicas (`-future` directories) `dir` holds.
fn futures_in(dir: &std::path::Path) -> usize {
    let entries = std::fs::read_dir(dir).map(|e| e.flatten().collect::<Vec<_>>()).unwrap_or_default();
    entries.iter().filter(|e| e.file_name().to_string_lossy().ends_with("-future")).count()
}
