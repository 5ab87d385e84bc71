//! Metadata snapshots in a three-node quorum (KIP-630), with real processes
//! on loopback. Each node snapshots its image every
//! `metadata.log.max.record.bytes.between.snapshots` and, with
//! `metadata.max.retention.bytes=0`, its log then starts at its newest
//! snapshot. A node killed with SIGKILL while the others commit on comes
//! back behind the leader's log start: the leader sends it to its snapshot,
//! it fetches it over FetchSnapshot, replaces its log with it and loads its
//! image from it, and knows every topic. A node restarted on its own
//! snapshots loads its image from its newest one and replays the log after
//! it. Kafka's `kafka-dump-log --cluster-metadata-decoder` reads the
//! fetched snapshot. Every node, killed and restarted in turn on a snapshot
//! older than a topic, keeps that topic's records (it waits to catch up
//! before it looks for stray partitions).

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use krabka_log::SnapshotId;
use support::cluster::{
    create_and_find_the_controller, create_topic, create_topic_with, latest_offsets, metadata, topic_names,
    ELECTION_PATIENCE,
};
use support::{wait_for, BrokerProcess};

fn metadata_dir(node: &BrokerProcess) -> PathBuf {
    node.data_dir().join("__cluster_metadata-0")
}

/// The snapshots a node's metadata log directory holds.
fn snapshots(node: &BrokerProcess) -> Vec<SnapshotId> {
    krabka_log::snapshots::list(&metadata_dir(node)).unwrap()
}

/// The base offsets of a node's metadata log segments.
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".log")?.parse().ok())
        .collect();
    bases.sort_unstable();
    bases
}

/// Creates `names` through whichever live node is the active controller.
fn create_topics(nodes: &[BrokerProcess], alive: &[usize], names: &[String]) {
    for name in names {
        wait_for(&format!("{name} to be created"), ELECTION_PATIENCE, || {
            alive.iter().any(|&i| match create_topic(&nodes[i], name) {
                0 => true,
                code if code == krabka_protocol::ErrorCode::TOPIC_ALREADY_EXISTS.code() => true,
                _ => false,
            })
        });
    }
}

fn wait_for_all_topics(nodes: &[BrokerProcess], alive: &[usize], names: &BTreeSet<String>) {
    for &i in alive {
        wait_for(&format!("node {} to know {} topics", i + 1, names.len()), ELECTION_PATIENCE, || {
            topic_names(&nodes[i]) == *names
        });
    }
}

/// The records `topic`'s partitions hold on the brokers that lead them.
fn records_of(nodes: &[BrokerProcess], topic: &str, partitions: i32) -> i64 {
    let led = |i: usize| latest_offsets(&nodes[i], topic, partitions).into_iter().filter(|p| p.error_code == 0);
    (0..nodes.len()).flat_map(led).map(|p| p.offset).sum()
}

/// The end offset of the snapshot a node's log says it installed from its
/// leader.
fn installed_snapshot_end(log: &str) -> i64 {
    let line = log.lines().find(|l| l.contains("metadata log replaced by the leader's snapshot")).expect("installed");
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("end_offset=")).expect("end_offset field");
    field.trim_matches(|c: char| !c.is_ascii_digit()).parse().expect("an offset")
}

#[test]
fn a_node_behind_the_leaders_log_start_fetches_its_snapshot_and_a_restart_loads_its_own() {
    // A short broker session: a node killed and restarted registers again
    // once its old session has expired (Kafka's controller refuses a new
    // incarnation while the old one's session lives: 9 s by default).
    let config = [
        "metadata.log.max.record.bytes.between.snapshots=1024",
        "metadata.max.retention.bytes=0",
        "broker.session.timeout.ms=3000",
        "broker.heartbeat.interval.ms=500",
    ];
    let mut nodes = BrokerProcess::start_cluster(3, &config);
    let controller = create_and_find_the_controller(&nodes, &[0, 1, 2], "t-000");
    let mut names: BTreeSet<String> = BTreeSet::from(["t-000".to_string()]);

    // A node other than the controller dies; the others commit on, each
    // snapshotting and cutting its log at its newest snapshot.
    let lagging = (controller + 1) % 3;
    let alive: Vec<usize> = (0..3).filter(|&i| i != lagging).collect();
    nodes[lagging].kill9();
    let batch: Vec<String> = (1..=40).map(|i| format!("t-{i:03}")).collect();
    create_topics(&nodes, &alive, &batch);
    names.extend(batch);
    wait_for_all_topics(&nodes, &alive, &names);
    let lagging_end = segment_bases(&metadata_dir(&nodes[lagging])).last().copied().unwrap_or(0);
    for &i in &alive {
        wait_for(&format!("node {} to cut its log at a snapshot", i + 1), ELECTION_PATIENCE, || {
            let newest = snapshots(&nodes[i]).last().map_or(0, |s| s.end_offset);
            newest > 0 && nodes[i].log().contains("metadata snapshot stored")
        });
    }

    // Back, it is behind the leader's log start: it fetches the snapshot.
    let before = nodes[lagging].log().len();
    nodes[lagging].restart();
    wait_for_all_topics(&nodes, &[0, 1, 2], &names);
    let log = nodes[lagging].log()[before..].to_string();
    assert!(log.contains("metadata log replaced by the leader's snapshot"), "{log}");
    assert!(log.contains("metadata image loaded from a snapshot"), "{log}");
    // The node may have taken snapshots of its own since: the one it
    // fetched is the one its log says it installed.
    let installed = installed_snapshot_end(&log);
    let bases = segment_bases(&metadata_dir(&nodes[lagging]));
    assert!(bases.iter().all(|&b| b >= installed), "its log starts at the snapshot {installed}: {bases:?}");
    assert!(installed > lagging_end, "{installed} after {lagging_end}");
    let fetched = *snapshots(&nodes[lagging]).iter().find(|s| s.end_offset >= installed).expect("a snapshot is stored");
    // Copied first: the node's next snapshot may replace it meanwhile.
    let copy = tempfile::tempdir().unwrap();
    let file = copy.path().join(fetched.file_name());
    let original = metadata_dir(&nodes[lagging]).join(fetched.file_name());
    if std::fs::copy(&original, &file).is_err() {
        let newest = *snapshots(&nodes[lagging]).last().unwrap();
        std::fs::copy(metadata_dir(&nodes[lagging]).join(newest.file_name()), &file).unwrap();
    }
    let (ok, out) =
        support::kafka_cli("kafka-dump-log", &["--cluster-metadata-decoder", "--files", file.to_str().unwrap()]);
    assert!(ok && out.contains("SnapshotFooter") && out.contains("\"TOPIC_RECORD\""), "{out}");

    // The controller dies too and comes back: its image loads from its own
    // newest snapshot, and it learns what was committed without it.
    nodes[controller].kill9();
    let survivors: Vec<usize> = (0..3).filter(|&i| i != controller).collect();
    let later: Vec<String> = (41..=45).map(|i| format!("t-{i:03}")).collect();
    create_topics(&nodes, &survivors, &later);
    names.extend(later);
    let before = nodes[controller].log().len();
    nodes[controller].restart();
    wait_for_all_topics(&nodes, &[0, 1, 2], &names);
    let log = nodes[controller].log()[before..].to_string();
    assert!(log.contains("metadata image loaded from a snapshot"), "{log}");
    // A topic created after the nodes' newest snapshots, with records on
    // every broker: a node restarted on its snapshot must not take its
    // partitions for strays before it has caught up (its image at the
    // snapshot lacks the topic).
    wait_for("late to be created", ELECTION_PATIENCE, || {
        (0..3).any(|i| matches!(create_topic_with(&nodes[i], "late", 3), 0 | 36))
    });
    names.insert("late".to_string());
    wait_for_all_topics(&nodes, &[0, 1, 2], &names);
    let (ok, out) = support::idempotent_perf_producer(&nodes[0].bootstrap(), "late", 300);
    assert!(ok, "{out}");
    for i in 0..3 {
        nodes[i].kill9();
        nodes[i].restart();
        wait_for_all_topics(&nodes, &[0, 1, 2], &names);
        wait_for(&format!("every record of late after node {} restarted", i + 1), ELECTION_PATIENCE, || {
            records_of(&nodes, "late", 3) == 300
        });
    }
    // Every node lists the three brokers, and agrees on the controller.
    wait_for("every node to list three brokers and one controller", ELECTION_PATIENCE, || {
        let answers: Vec<_> = (0..3).map(|i| metadata(&nodes[i])).collect();
        let controllers: BTreeSet<i32> = answers.iter().map(|a| a.controller_id).collect();
        answers.iter().all(|a| a.brokers.len() == 3) && controllers.len() == 1
    });
}
