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

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use krabka_metadata::records::decode_batches;
use krabka_metadata::MetadataRecord;
use krabka_protocol::compression::Compression;
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, Uuid};
use support::cluster::metadata_log;
use support::{free_port, BrokerProcess, KafkaNode, RawClient, TestDir, TEST_CLUSTER_ID};

const KAFKA_ID: i32 = 4;
const TOPIC: &str = "jbod";
/// A JVM starting on a shared 2-core machine, then its registration.
const PATIENCE: Duration = Duration::from_secs(120);

/// A tmpfs mounted for the test, unmounted however it ends (lazily: the
/// broker may still hold files there).
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        let options = format!("size={size}");
        let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", &options, "tmpfs"]).arg(at).status();
        assert!(mounted.is_ok_and(|s| s.success()), "mount a tmpfs (needs root)");
        SmallDisk(at.to_path_buf())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Each partition of `TOPIC` as (leader, ISR), by index.
fn leaders_and_isrs(bootstrap: &str) -> Vec<(i32, Vec<i32>)> {
    let Ok(stream) = std::net::TcpStream::connect(bootstrap) else { return Vec::new() };
    let request = MetadataRequest { topics: None, ..Default::default() };
    let answer: MetadataResponse = RawClient::from_stream(stream).request(ApiKey::Metadata, 12, &request);
    let Some(topic) = answer.topics.iter().find(|t| t.name.as_deref() == Some(TOPIC)) else { return Vec::new() };
    let mut partitions: Vec<_> =
        topic.partitions.iter().map(|p| (p.partition_index, (p.leader_id, p.isr_nodes.clone()))).collect();
    partitions.sort();
    partitions.into_iter().map(|(_, state)| state).collect()
}

fn brokers_listed(bootstrap: &str) -> Vec<i32> {
    let request = MetadataRequest { topics: Some(Vec::new()), ..Default::default() };
    let answer: MetadataResponse = RawClient::connect(bootstrap).request(ApiKey::Metadata, 12, &request);
    answer.brokers.iter().map(|b| b.node_id).collect()
}

/// One Produce of `count` records of `size` bytes to `TOPIC`-`partition`
/// (acks=1): its error code.
fn produce(bootstrap: &str, partition: i32, count: usize, size: usize) -> i16 {
    let value = vec![b'x'; size];
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for _ in 0..count {
        let record = NewRecord { timestamp_ms: 1_700_000_000_000, key: None, value: Some(&value), headers: &[] };
        builder.append(&record).expect("append");
    }
    let records: Bytes = builder.build().expect("build").into_bytes();
    let partition_data = vec![PartitionProduceData { index: partition, records: Some(records), ..Default::default() }];
    let topic_data = vec![TopicProduceData { name: TOPIC.into(), partition_data, ..Default::default() }];
    let request = ProduceRequest { acks: 1, timeout_ms: 10_000, topic_data, ..Default::default() };
    let Ok(stream) = std::net::TcpStream::connect(bootstrap) else { return -1 };
    let response: ProduceResponse = RawClient::from_stream(stream).request(ApiKey::Produce, 11, &request);
    response.responses[0].partition_responses[0].error_code
}

/// The `directory.id` Kafka's storage tool wrote into `dir`.
fn directory_id(dir: &Path) -> Uuid {
    let text = std::fs::read_to_string(dir.join("meta.properties")).unwrap();
    let id = text.lines().find_map(|l| l.strip_prefix("directory.id=")).expect("a directory.id");
    krabka_format::dynamic_voters::parse_java_uuid(id.trim()).expect("a Kafka uuid")
}

/// The partitions of `TOPIC` whose replica on Kafka's broker krabka's
/// metadata log (at `node`) places in `directory`.
fn assigned_to(node: &BrokerProcess, directory: Uuid) -> Vec<i32> {
    let Ok((records, _)) = decode_batches(Bytes::from(metadata_log(node)), 0) else { return Vec::new() };
    let mut placed: Vec<i32> = records
        .iter()
        .filter_map(|(_, record)| match record {
            MetadataRecord::PartitionChange(change) => Some(change),
            _ => None,
        })
        .filter(|change| change.directories.as_ref().is_some_and(|dirs| dirs.first() == Some(&directory)))
        .map(|change| change.partition_id)
        .collect();
    placed.sort_unstable();
    placed.dedup();
    placed
}

/// The partitions of `TOPIC` in a Kafka log directory.
fn partitions_in(dir: &Path) -> Vec<i32> {
    let prefix = format!("{TOPIC}-");
    let mut found: Vec<i32> = std::fs::read_dir(dir)
        .map(|entries| {
            entries.flatten().filter_map(|e| e.file_name().to_str()?.strip_prefix(&prefix)?.parse().ok()).collect()
        })
        .unwrap_or_default();
    found.sort_unstable();
    found
}

#[test]
fn a_kafka_brokers_failed_log_directory_moves_only_its_partitions() {
    let nodes = BrokerProcess::start_cluster(3, &[]);
    let voters: Vec<String> =
        nodes.iter().enumerate().map(|(i, node)| format!("{}@127.0.0.1:{}", i + 1, node.controller_port)).collect();
    let dir = TestDir::new();
    // The healthy directory first: it holds Kafka's metadata log.
    let (kept, small) = (dir.path().join("kept"), dir.path().join("small"));
    let _disk = SmallDisk::mount(&small, "16m");
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
        whole(&leaders_and_isrs(&bootstrap))
    });
    support::wait_for("Kafka's broker to create its four replicas", PATIENCE, || {
        partitions_in(&small).len() + partitions_in(&kept).len() == 4
    });
    let (in_small, in_kept) = (partitions_in(&small), partitions_in(&kept));
    assert!(!in_small.is_empty() && !in_kept.is_empty(), "Kafka spreads them: {in_small:?} / {in_kept:?}");
    let small_id = directory_id(&small);
    support::wait_for("krabka's controller to record the directories Kafka's broker named", PATIENCE, || {
        assigned_to(&nodes[0], small_id) == in_small
    });

    // The small disk fills; the next write there fails.
    let _ = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", small.join("filler").display()))
        .args(["bs=1M", "status=none"])
        .status();
    let kafka_bootstrap = format!("127.0.0.1:{port}");
    support::wait_for("Kafka's broker to fail a write to the full directory", PATIENCE, || {
        produce(&kafka_bootstrap, in_small[0], 100, 10_000) != 0
    });

    support::wait_for("the failed directory's partitions led by krabka replicas", PATIENCE, || {
        let state = leaders_and_isrs(&bootstrap);
        state.len() == 4
            && in_small.iter().all(|&p| state[p as usize].0 != KAFKA_ID && !state[p as usize].1.contains(&KAFKA_ID))
    });
    let state = leaders_and_isrs(&bootstrap);
    for &p in &in_kept {
        let (leader, isr) = &state[p as usize];
        assert!(*leader == KAFKA_ID && isr.len() == 2, "partition {p} stays led by Kafka, both in sync: {state:?}");
    }
    assert!(brokers_listed(&bootstrap).contains(&KAFKA_ID), "Kafka's broker stays registered and unfenced");
    for &p in &in_kept {
        assert_eq!(produce(&kafka_bootstrap, p, 10, 100), 0, "Kafka's broker serves partition {p}");
    }
    for &p in &in_small {
        let leader = nodes[(state[p as usize].0 - 1) as usize].bootstrap();
        assert_eq!(produce(&leader, p, 10, 100), 0, "krabka's broker serves partition {p}");
    }
}
