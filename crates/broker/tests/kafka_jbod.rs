//! An Apache Kafka 4.3.1 broker with two log directories (JBOD, KIP-858)
//! under krabka controllers. Kafka's broker names the directory of each
//! replica it creates (AssignReplicasToDirs) and krabka's controller
//! writes it into the partition's `directories`. When one directory fails
//! (its disk, a small tmpfs, is full), Kafka's broker keeps serving the
//! other and reports the failed one in its heartbeats; krabka's controller
//! then moves leadership and ISR membership away from the replicas in
//! that directory only: their partitions are led by krabka replicas, the
//! partitions in the healthy directory stay led by Kafka's broker, which
//! stays registered and unfenced.

mod support;

use std::time::Duration;

use support::log_dirs::{
    assigned_to, brokers_listed, directory_id, leaders_and_isrs, partitions_in, produce, SmallDisk,
};
use support::{free_port, BrokerProcess, KafkaNode, TestDir, TEST_CLUSTER_ID};

const KAFKA_ID: i32 = 4;
const TOPIC: &str = "jbod";
/// A JVM starting on a shared 2-core machine, then its registration.
const PATIENCE: Duration = Duration::from_secs(120);

#[test]
fn a_kafka_brokers_failed_log_directory_moves_only_its_partitions() {
    let nodes = BrokerProcess::start_cluster(3, &[]);
    let voters: Vec<String> =
        nodes.iter().enumerate().map(|(i, node)| format!("{}@127.0.0.1:{}", i + 1, node.controller_port)).collect();
    let dir = TestDir::new();
    // The healthy directory first: it holds Kafka's metadata log.
    let (kept, small) = (dir.path().join("kept"), dir.path().join("small"));
    let disk = SmallDisk::mount(&small, "16m");
    let port = free_port();
    let dirs = format!("log.dirs={},{}\n", kept.display(), small.display());
    let _kafka = KafkaNode::start_broker(dir.path(), KAFKA_ID, port, &voters.join(","), TEST_CLUSTER_ID, &dirs);
    let bootstrap = nodes[0].bootstrap();
    support::wait_for("Kafka's broker registered and unfenced", PATIENCE, || {
        brokers_listed(&bootstrap).contains(&KAFKA_ID)
    });

    // Four partitions led by Kafka's broker, each with one krabka replica.
    let assignment = "4:1,4:2,4:3,4:1";
    let (ok, printed) = support::kafka_cli(
        "kafka-topics",
        &["--bootstrap-server", &bootstrap, "--create", "--topic", TOPIC, "--replica-assignment", assignment],
    );
    assert!(ok, "{printed}");
    let whole = |state: &[(i32, Vec<i32>)]| state.len() == 4 && state.iter().all(|(l, isr)| *l == 4 && isr.len() == 2);
    support::wait_for("every partition led by Kafka's broker, both replicas in sync", PATIENCE, || {
        whole(&leaders_and_isrs(&bootstrap, TOPIC))
    });
    support::wait_for("Kafka's broker to create its four replicas", PATIENCE, || {
        partitions_in(&small, TOPIC).len() + partitions_in(&kept, TOPIC).len() == 4
    });
    let (in_small, in_kept) = (partitions_in(&small, TOPIC), partitions_in(&kept, TOPIC));
    assert!(!in_small.is_empty() && !in_kept.is_empty(), "Kafka spreads them: {in_small:?} / {in_kept:?}");
    let small_id = directory_id(&small);
    support::wait_for("krabka's controller to record the directories Kafka's broker named", PATIENCE, || {
        assigned_to(&nodes[0], TOPIC, KAFKA_ID, small_id) == in_small
    });

    // The small disk fills; the next write there fails.
    disk.fill();
    let kafka_bootstrap = format!("127.0.0.1:{port}");
    support::wait_for("Kafka's broker to fail a write to the full directory", PATIENCE, || {
        produce(&kafka_bootstrap, TOPIC, in_small[0], 100, 10_000) != 0
    });

    support::wait_for("the failed directory's partitions led by krabka replicas", PATIENCE, || {
        let state = leaders_and_isrs(&bootstrap, TOPIC);
        state.len() == 4
            && in_small.iter().all(|&p| state[p as usize].0 != KAFKA_ID && !state[p as usize].1.contains(&KAFKA_ID))
    });
    let state = leaders_and_isrs(&bootstrap, TOPIC);
    for &p in &in_kept {
        let (leader, isr) = &state[p as usize];
        assert!(*leader == KAFKA_ID && isr.len() == 2, "partition {p} stays led by Kafka, both in sync: {state:?}");
    }
    assert!(brokers_listed(&bootstrap).contains(&KAFKA_ID), "Kafka's broker stays registered and unfenced");
    for &p in &in_kept {
        assert_eq!(produce(&kafka_bootstrap, TOPIC, p, 10, 100), 0, "Kafka's broker serves partition {p}");
    }
    for &p in &in_small {
        let leader = nodes[(state[p as usize].0 - 1) as usize].bootstrap();
        assert_eq!(produce(&leader, TOPIC, p, 10, 100), 0, "krabka's broker serves partition {p}");
    }
}
