//! The reference run for `fault_rounds.rs`'s early cut-off: the same
//! rounds against Apache Kafka 4.3.1's own nodes, to learn whether
//! Kafka's brokers, behind the same Java producer, give records up and
//! hold duplicates as krabka's did (docs/reliability.md, "Duplicates after
//! an early cut-off").
//!
//! Three Kafka controllers and three Kafka brokers, each on a host of its
//! own (`support::netns`), the configuration of `fault_rounds.rs`
//! (`QUICK_FAILOVER`), its topic (three partitions, three replicas,
//! `min.insync.replicas=2`) and producer (VerifiableProducer, idempotent,
//! acks=all, 4,000 records a round). Each round one broker is cut off by
//! iptables 0.5-1.5 s after the producer starts, for 5 s, and healed; the
//! delays and targets come from the same seeded draws as `fault_rounds.rs`
//! with `KRABKA_FAULT_ONLY=2` (`KRABKA_FAULT_SEED`, default 1), so the two
//! runs strike alike.
//!
//! The checks are the ones krabka's rounds pass, but duplicates are
//! counted rather than refused (they are what this run measures): every
//! record acknowledged or given up (only as KAFKA-14359 gives up), no
//! acknowledged record lost or moved, offsets rising, every replica the
//! same bytes at the end.
//!
//! Long mode only (`KRABKA_LONG_TESTS=1`; six JVMs): 100 rounds, or
//! `KRABKA_FAULT_ROUNDS`. With `KRABKA_FAULT_KEEP=DIR` the nodes' data and
//! logs and each round's producer output stay in DIR (kafka-dump-log
//! reads the segments).

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse};
use support::netns::TestNetwork;
use support::replica_bytes::{partition_log, wait_for_same_bytes};
use support::replicated::{
    assert_in_order, create_topic, duplicates_by_round, lost, read_all_at, round_outcome, start_verifiable_producer,
    wait_whole_at, Draws, QUICK_FAILOVER, TOPIC,
};
use support::{KafkaNode, RawClient};

/// JVMs starting on a shared 2-core machine, then elections.
const PATIENCE: Duration = Duration::from_secs(180);
const RECORDS_PER_ROUND: usize = 4_000;

/// Kafka's nodes, then their hosts (fields drop in order).
struct KafkaCluster {
    _controllers: Vec<KafkaNode>,
    _brokers: Vec<KafkaNode>,
    network: TestNetwork,
    root: PathBuf,
}

impl KafkaCluster {
    fn start(root: PathBuf) -> Self {
        let network = TestNetwork::create(6);
        let hosts = network.hosts();
        let (controllers, brokers) =
            KafkaNode::start_split_cluster_on(&root, &hosts[..3], &hosts[3..], &QUICK_FAILOVER.join("\n"));
        let cluster = KafkaCluster { _controllers: controllers, _brokers: brokers, network, root };
        for address in cluster.addresses() {
            support::wait_for(&format!("Kafka's broker at {address} to list three brokers"), PATIENCE, || {
                registered_brokers(&address) == 3
            });
        }
        cluster
    }

    fn addresses(&self) -> Vec<String> {
        self.network.hosts()[3..].iter().map(|h| format!("{}:9092", h.address)).collect()
    }

    /// The segments of `TOPIC`-`partition` on each broker (nodes 4-6).
    fn replicas(&self, partition: i32) -> Vec<Vec<u8>> {
        (4..=6).map(|id| partition_log(&self.root.join(format!("node-{id}/logs")), TOPIC, partition)).collect()
    }
}

/// How many brokers the broker at `address` lists (0 while it cannot answer).
fn registered_brokers(address: &str) -> usize {
    let Ok(stream) = std::net::TcpStream::connect(address) else { return 0 };
    let asked = std::panic::catch_unwind(|| {
        let request = MetadataRequest { topics: Some(Vec::new()), ..Default::default() };
        let answer: MetadataResponse = RawClient::from_stream(stream).request(ApiKey::Metadata, 12, &request);
        answer.brokers.len()
    });
    asked.unwrap_or(0)
}

fn long() -> bool {
    std::env::var("KRABKA_LONG_TESTS").as_deref() == Ok("1")
}

#[test]
fn kafka_brokers_under_early_cut_offs() {
    if !long() {
        eprintln!("the Kafka reference run of early cut-offs is in the long mode (KRABKA_LONG_TESTS=1)");
        return;
    }
    let rounds: u64 = std::env::var("KRABKA_FAULT_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    // Drawn in fault_rounds.rs's order: its cut-offs, round by round.
    let mut draws = Draws::from_env();
    let kept = std::env::var("KRABKA_FAULT_KEEP").ok().map(PathBuf::from);
    let scratch = tempfile::tempdir().unwrap();
    let root = kept.as_ref().map_or_else(|| scratch.path().join("kafka"), |k| k.join("kafka"));
    let cluster = KafkaCluster::start(root);
    let addresses = cluster.addresses();
    let bootstrap = addresses.join(",");
    create_topic(&bootstrap);
    let (mut acked, mut given_up) = (Vec::new(), BTreeMap::<u64, usize>::new());
    for round in 0..rounds {
        wait_whole_at(&addresses, "every ISR whole", PATIENCE);
        let started = Instant::now();
        let producer =
            start_verifiable_producer(&bootstrap, RECORDS_PER_ROUND, 2_000, Some(round as u32 + 1), scratch.path());
        std::thread::sleep(Duration::from_millis(500 + draws.next(1_000)));
        let target = draws.next(3) as usize;
        cluster.network.isolate(3 + target);
        std::thread::sleep(Duration::from_secs(5));
        cluster.network.heal(3 + target);
        wait_whole_at(&addresses, "every ISR whole within the round", PATIENCE);
        let output = producer.wait_with_output().expect("producer");
        if let Some(dir) = &kept {
            std::fs::write(dir.join(format!("producer-{round}.out")), &output.stdout).unwrap();
            std::fs::write(dir.join(format!("producer-{round}.err")), &output.stderr).unwrap();
        }
        let outcome = round_outcome(round, &output, RECORDS_PER_ROUND).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "round {round}: broker {} cut off, {} acknowledged, {} given up, {:?}",
            target + 4,
            outcome.acknowledged.len(),
            outcome.given_up,
            started.elapsed()
        );
        if outcome.given_up > 0 {
            given_up.insert(round, outcome.given_up);
        }
        acked.extend(outcome.acknowledged);
    }
    wait_whole_at(&addresses, "every ISR whole at the end", PATIENCE);
    let read = read_all_at(&addresses);
    let lost = lost(&acked, &read);
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost or moved, first {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    assert_in_order(&read);
    for partition in 0..3 {
        let what = format!("{TOPIC}-{partition}'s replicas on Kafka's brokers to hold the same bytes");
        wait_for_same_bytes(&what, PATIENCE, || cluster.replicas(partition));
    }
    let duplicated = duplicates_by_round(&read);
    eprintln!("{rounds} early cut-offs of Kafka 4.3.1's brokers: {} acknowledged records checked, 0 lost", acked.len());
    eprintln!("given up (KAFKA-14359), by round: {given_up:?} ({} records)", given_up.values().sum::<usize>());
    eprintln!("duplicates, by round: {duplicated:?} ({} records)", duplicated.values().sum::<usize>());
}
