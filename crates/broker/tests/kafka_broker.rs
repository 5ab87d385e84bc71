//! An Apache Kafka 4.3.1 broker under krabka controllers: three combined
//! krabka nodes share the quorum, and a broker-only Kafka 4.3.1 process
//! (formatted by Kafka's own storage tool) observes krabka's metadata log,
//! registers with krabka's active controller (passing its checks: a log
//! directory, feature ranges that hold the finalized metadata.version
//! 4.3-IV0), is unfenced, and serves clients. Through it Kafka's
//! `kafka-topics` creates a topic (Kafka forwards it to krabka's
//! controller in an Envelope), whose partitions krabka's controller
//! spreads over all four brokers, Kafka's among them (as it spreads
//! `__consumer_offsets`, so some groups are coordinated by Kafka's broker
//! and some by krabka's), Kafka's idempotent producer writes (its
//! producer ids from a block krabka's controller reserved) and a console
//! consumer in a group reads every record back. Kafka's
//! `kafka-metadata-quorum` through it (DescribeQuorum, forwarded) lists
//! krabka's three voters and the Kafka broker as an observer.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse};
use support::{free_port, BrokerProcess, KafkaNode, RawClient, TEST_CLUSTER_ID};

const KAFKA_ID: i32 = 4;
/// A JVM starting on a shared 2-core machine, then its registration.
const PATIENCE: Duration = Duration::from_secs(120);
/// One replica of `__consumer_offsets`: krabka does not replicate
/// partitions yet.
const ONE_OFFSETS_REPLICA: &str = "offsets.topic.replication.factor=1";

fn listed_brokers(bootstrap: &str) -> BTreeSet<i32> {
    let Ok(stream) = std::net::TcpStream::connect(bootstrap) else { return BTreeSet::new() };
    let request = MetadataRequest { topics: Some(Vec::new()), ..Default::default() };
    let answer: MetadataResponse = RawClient::from_stream(stream).request(ApiKey::Metadata, 12, &request);
    answer.brokers.iter().map(|b| b.node_id).collect()
}

fn partition_leaders(bootstrap: &str, topic: &str) -> Vec<i32> {
    let request = MetadataRequest { topics: None, ..Default::default() };
    let answer: MetadataResponse = RawClient::connect(bootstrap).request(ApiKey::Metadata, 12, &request);
    let found = answer.topics.iter().find(|t| t.name.as_deref() == Some(topic));
    found.map(|t| t.partitions.iter().map(|p| p.leader_id).collect()).unwrap_or_default()
}

#[test]
fn a_kafka_broker_registers_with_krabka_controllers_and_serves_clients() {
    let nodes = BrokerProcess::start_cluster(3, &[ONE_OFFSETS_REPLICA]);
    let voters: Vec<String> =
        nodes.iter().enumerate().map(|(i, node)| format!("{}@127.0.0.1:{}", i + 1, node.controller_port)).collect();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let kafka = KafkaNode::start_broker(
        dir.path(),
        KAFKA_ID,
        port,
        &voters.join(","),
        TEST_CLUSTER_ID,
        &format!("{ONE_OFFSETS_REPLICA}\n"),
    );
    let bootstrap = format!("127.0.0.1:{port}");
    let kafka_log = || std::fs::read_to_string(dir.path().join("kafka.log")).unwrap_or_default();
    let all: BTreeSet<i32> = (1..=4).collect();
    // Registered and unfenced: every krabka node lists it, and it lists
    // every krabka broker (it reads krabka's log).
    for node in &nodes {
        support::wait_for("krabka to list the Kafka broker", PATIENCE, || listed_brokers(&node.bootstrap()) == all);
    }
    support::wait_for("the Kafka broker to list every broker", PATIENCE, || listed_brokers(&bootstrap) == all);
    assert!(kafka_log().contains("The broker has been unfenced"), "{}", kafka_log());

    // Kafka's broker forwards DescribeQuorum to krabka's active controller,
    // which lists its three voters and the Kafka broker observing them.
    let (ok, printed) =
        support::kafka_cli("kafka-metadata-quorum", &["--bootstrap-server", &bootstrap, "describe", "--replication"]);
    let rows: BTreeSet<(String, String)> = printed
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some((fields.first()?.to_string(), fields.last()?.to_string()))
        })
        .collect();
    let observer = ("4".to_string(), "Observer".to_string());
    assert!(ok && rows.len() == 4 && rows.contains(&observer), "{printed}\n{}", kafka_log());

    let (ok, printed) = support::kafka_cli(
        "kafka-topics",
        &["--bootstrap-server", &bootstrap, "--create", "--topic", "through-kafka", "--partitions", "4"],
    );
    assert!(ok && printed.contains("Created topic through-kafka"), "{printed}\n{}", kafka_log());
    // krabka's controller spreads the partitions over the four brokers:
    // Kafka's broker leads one of them.
    support::wait_for("each broker to lead a partition of through-kafka", PATIENCE, || {
        let leaders: BTreeSet<i32> = partition_leaders(&nodes[0].bootstrap(), "through-kafka").into_iter().collect();
        leaders == all
    });
    // Kafka's broker forwards only what krabka's controller listener lists
    // (it learns that list after its first forward): a second one works too.
    let (ok, printed) = support::kafka_cli(
        "kafka-topics",
        &["--bootstrap-server", &bootstrap, "--create", "--topic", "through-kafka-again", "--partitions", "1"],
    );
    assert!(ok && printed.contains("Created topic through-kafka-again"), "{printed}\n{}", kafka_log());
    let (ok, printed) = support::idempotent_perf_producer(&bootstrap, "through-kafka", 300);
    assert!(ok, "{printed}\n{}", kafka_log());
    let (ok, printed) = support::kafka_cli(
        "kafka-console-consumer",
        &["--bootstrap-server", &bootstrap, "--topic", "through-kafka", "--group", "kafka-readers", "--from-beginning"]
            .into_iter()
            .chain(["--max-messages", "300", "--timeout-ms", "60000"])
            .collect::<Vec<_>>(),
    );
    assert!(ok && printed.contains("Processed a total of 300 messages"), "{printed}\n{}", kafka_log());
    drop(kafka);
}
