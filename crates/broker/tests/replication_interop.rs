//! Replication between krabka and Apache Kafka 4.3.1 brokers: three
//! combined krabka nodes (the quorum and three brokers) and a broker-only
//! Kafka 4.3.1 process share one cluster, and a topic with three replicas
//! per partition mixes them: partition 0 is led by Kafka's broker with two
//! krabka followers, partitions 1 and 2 by krabka brokers with Kafka's
//! broker among their followers. Kafka's idempotent producer writes with
//! acks=all and min.insync.replicas=2 through a krabka broker, each
//! partition's ISR stays whole, every replica's segment files end up
//! holding the same bytes (followers on both sides write batches as their
//! leader sent them), and Kafka's console consumer reads every record back
//! through Kafka's broker.
//!
//!
//! Then a divergence is forced each way: the leader takes records with
//! acks=1 while its followers are frozen (SIGSTOP), is killed with
//! SIGKILL, a follower of the other kind takes over and gets other records
//! at the same offsets, and the old leader restarts and must truncate its
//! tail: Kafka's broker following a krabka leader (partition 0), a krabka
//! broker following Kafka's (partition 1). Afterwards every replica of the
//! partition holds the same bytes again.
//!
//! Not here yet: Kafka controllers over krabka brokers with several
//! replicas; see docs/compatibility.md.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use krabka_protocol::compression::Compression;
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse};
use support::replica_bytes::{partition_log, wait_for_same_bytes};
use support::{free_port, BrokerProcess, KafkaNode, RawClient, TEST_CLUSTER_ID};

const KAFKA_ID: i32 = 4;
/// A JVM starting on a shared 2-core machine, then its registration.
const PATIENCE: Duration = Duration::from_secs(120);
const CONFIG: [&str; 2] = ["offsets.topic.replication.factor=1", "broker.session.timeout.ms=6000"];
const TOPIC: &str = "mixed";
const RECORDS: usize = 3000;

/// Each partition's (leader, replicas, ISR) as `bootstrap` lists them.
fn partitions(bootstrap: &str, topic: &str) -> Vec<(i32, Vec<i32>, Vec<i32>)> {
    let Ok(stream) = std::net::TcpStream::connect(bootstrap) else { return Vec::new() };
    let request = MetadataRequest { topics: None, ..Default::default() };
    let answer: MetadataResponse = RawClient::from_stream(stream).request(ApiKey::Metadata, 12, &request);
    let found = answer.topics.iter().find(|t| t.name.as_deref() == Some(topic));
    let mut listed: Vec<_> = found
        .map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id, p.replica_nodes.clone(), p.isr_nodes.clone()))
                .collect()
        })
        .unwrap_or_default();
    listed.sort();
    listed.into_iter().map(|(_, leader, replicas, isr)| (leader, replicas, isr)).collect()
}

/// Whether `bytes` hold `what`.
fn holds(bytes: &[u8], what: &str) -> bool {
    bytes.windows(what.len()).any(|w| w == what.as_bytes())
}

/// `count` records of `tag` in one batch.
fn batch(tag: &str, count: u32) -> Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for i in 0..count {
        let value = format!("{tag}-{i}");
        let record =
            NewRecord { timestamp_ms: 1_700_000_000_000, key: None, value: Some(value.as_bytes()), headers: &[] };
        builder.append(&record).expect("append");
    }
    builder.build().expect("build").into_bytes()
}

/// One Produce of `records` to `TOPIC`-`partition` at `bootstrap`: its error code.
fn produce(bootstrap: &str, partition: i32, acks: i16, records: Bytes) -> i16 {
    let request = ProduceRequest {
        acks,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: TOPIC.into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(records),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: ProduceResponse = RawClient::connect(bootstrap).request(ApiKey::Produce, 11, &request);
    response.responses[0].partition_responses[0].error_code
}

#[test]
fn krabka_and_kafka_brokers_replicate_each_others_partitions() {
    let mut nodes = BrokerProcess::start_cluster(3, &CONFIG);
    let voters: Vec<String> =
        nodes.iter().enumerate().map(|(i, node)| format!("{}@127.0.0.1:{}", i + 1, node.controller_port)).collect();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!("{}\n{}\n", CONFIG[0], CONFIG[1]);
    let kafka = KafkaNode::start_broker(dir.path(), KAFKA_ID, port, &voters.join(","), TEST_CLUSTER_ID, &extra);
    let kafka_bootstrap = format!("127.0.0.1:{port}");
    let kafka_log = || std::fs::read_to_string(dir.path().join("kafka.log")).unwrap_or_default();
    support::wait_for("the Kafka broker to be unfenced", PATIENCE, || {
        kafka_log().contains("The broker has been unfenced")
    });

    // Partition 0 led by Kafka, 1 and 2 by krabka with Kafka following.
    let (ok, printed) = support::kafka_cli(
        "kafka-topics",
        &["--bootstrap-server", &nodes[0].bootstrap(), "--create", "--topic", TOPIC]
            .into_iter()
            .chain(["--replica-assignment", "4:1:2,1:4:3,2:3:4", "--config", "min.insync.replicas=2"])
            .collect::<Vec<_>>(),
    );
    assert!(ok && printed.contains(&format!("Created topic {TOPIC}")), "{printed}");
    let whole = |listed: &[(i32, Vec<i32>, Vec<i32>)]| {
        listed.len() == 3 && listed.iter().all(|(leader, replicas, isr)| *leader == replicas[0] && isr.len() == 3)
    };
    support::wait_for("every partition led by its first replica with a whole ISR", PATIENCE, || {
        whole(&partitions(&nodes[0].bootstrap(), TOPIC)) && whole(&partitions(&kafka_bootstrap, TOPIC))
    });

    // Round robin: every partition gets records (sticky batches might skip one).
    let round_robin = "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner";
    let (ok, printed) = support::idempotent_perf_producer_with(&nodes[1].bootstrap(), TOPIC, RECORDS, &[round_robin]);
    assert!(ok, "{printed}\n{}", kafka_log());
    let listed = partitions(&nodes[0].bootstrap(), TOPIC);
    assert!(whole(&listed), "the ISR stayed whole: {listed:?}");

    // Every replica of each partition holds the leader's bytes.
    let log_dir = |broker: i32| match broker {
        KAFKA_ID => dir.path().join("logs"),
        id => nodes[(id - 1) as usize].data_dir(),
    };
    for (partition, (_, replicas, _)) in listed.iter().enumerate() {
        let what = format!("the replicas of {TOPIC}-{partition} to hold the same bytes");
        wait_for_same_bytes(&what, PATIENCE, || {
            replicas.iter().map(|&id| partition_log(&log_dir(id), TOPIC, partition as i32)).collect()
        });
    }

    let (ok, printed) = support::kafka_cli(
        "kafka-console-consumer",
        &["--bootstrap-server", &kafka_bootstrap, "--topic", TOPIC, "--group", "mixed-readers", "--from-beginning"]
            .into_iter()
            .chain(["--max-messages", &RECORDS.to_string(), "--timeout-ms", "60000"])
            .collect::<Vec<_>>(),
    );
    assert!(ok && printed.contains(&format!("Processed a total of {RECORDS} messages")), "{printed}\n{}", kafka_log());

    // Kafka leads partition 0 (4:1:2) and takes records alone (its krabka
    // followers frozen for less than their session), then dies; krabka
    // broker 1 takes over and writes others at those offsets; Kafka's
    // broker comes back as a follower and truncates.
    let watch = nodes[2].bootstrap();
    let dirs: Vec<(i32, PathBuf)> = vec![
        (1, nodes[0].data_dir()),
        (2, nodes[1].data_dir()),
        (3, nodes[2].data_dir()),
        (KAFKA_ID, dir.path().join("logs")),
    ];
    let led_by =
        |leader: i32, partition: usize| partitions(&watch, TOPIC).get(partition).is_some_and(|(l, _, _)| *l == leader);
    let in_sync = |partition: usize| partitions(&watch, TOPIC).get(partition).is_some_and(|(_, _, isr)| isr.len() == 3);
    let same_bytes = |partition: usize| {
        let copies: Vec<Vec<u8>> =
            dirs.iter().map(|(_, d)| partition_log(d, TOPIC, partition as i32)).filter(|c| !c.is_empty()).collect();
        copies.len() == 3 && copies.iter().all(|c| *c == copies[0])
    };
    let mut kafka = kafka;
    nodes[0].pause();
    nodes[1].pause();
    // Fetches already parked at the leader are answered empty after
    // replica.fetch.wait.max.ms (500 ms): none may carry what follows.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(produce(&kafka_bootstrap, 0, 1, batch("kafka-alone", 20)), 0);
    kafka.kill9();
    nodes[0].resume();
    nodes[1].resume();
    support::wait_for("krabka broker 1 to lead partition 0", PATIENCE, || led_by(1, 0));
    assert_eq!(produce(&nodes[0].bootstrap(), 0, -1, batch("after-kafka", 30)), 0);
    let kafka = KafkaNode::start_broker(dir.path(), KAFKA_ID, port, &voters.join(","), TEST_CLUSTER_ID, &extra);
    support::wait_for("Kafka's broker back in partition 0's ISR", PATIENCE, || in_sync(0));
    support::wait_for("partition 0's replicas to hold the same bytes", PATIENCE, || same_bytes(0));
    // Kafka's broker dropped what it took alone and has the new leader's records.
    let kafka_copy = partition_log(&dirs[3].1, TOPIC, 0);
    assert!(
        !holds(&kafka_copy, "kafka-alone") && holds(&kafka_copy, "after-kafka"),
        "Kafka's broker truncated its tail"
    );

    // krabka broker 1 leads partition 1 (1:4:3) and takes records alone,
    // then dies; Kafka's broker takes over, and krabka broker 1 comes back
    // as its follower and truncates.
    support::wait_for("krabka broker 1 to lead partition 1", PATIENCE, || led_by(1, 1));
    kafka.pause();
    nodes[2].pause();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(produce(&nodes[0].bootstrap(), 1, 1, batch("krabka-alone", 20)), 0);
    nodes[0].kill9();
    kafka.resume();
    nodes[2].resume();
    support::wait_for("Kafka's broker to lead partition 1", PATIENCE, || led_by(KAFKA_ID, 1));
    assert_eq!(produce(&kafka_bootstrap, 1, -1, batch("after-krabka", 30)), 0);
    nodes[0].restart();
    support::wait_for("krabka broker 1 back in partition 1's ISR", PATIENCE, || in_sync(1));
    support::wait_for("partition 1's replicas to hold the same bytes", PATIENCE, || same_bytes(1));
    let krabka_copy = partition_log(&dirs[0].1, TOPIC, 1);
    assert!(!holds(&krabka_copy, "krabka-alone") && holds(&krabka_copy, "after-krabka"), "krabka broker 1 truncated");
    assert!(
        nodes[0].log().contains("truncating a diverged follower"),
        "krabka broker 1 truncated on a diverging epoch"
    );
    drop(kafka);
}
