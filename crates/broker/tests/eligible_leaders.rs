//! Eligible Leader Replicas (KIP-966), on in a new krabka cluster as in a
//! new Kafka 4.3.1 one, in a production layout: three controller-only
//! krabka nodes and three broker-only krabka nodes (ids 4-6), each on a
//! host of its own. A topic of three partitions, three replicas each,
//! `min.insync.replicas=2`, written by Kafka's VerifiableProducer.
//!
//! - The brokers stop cleanly one after the other (6, 5, then 4): a
//!   replica that leaves an ISR already at `min.insync.replicas` joins the
//!   ELR, and Kafka's `kafka-topics --describe` lists it ("Elr: 5").
//! - Broker 5 comes back first: without ELR the partitions would wait for
//!   broker 4, the last in the ISR; with it broker 5 leads them.
//! - Broker 5 is killed with SIGKILL and restarted: its registration says
//!   its last shutdown was not clean, so the controller drops it from every
//!   ELR and it may not lead; the partitions wait for broker 4, which leads
//!   them once back.
//! - Every acknowledged record is read back once everything is up.

mod support;

use std::time::Duration;

use support::netns::TestNetwork;
use support::replicated::{
    acknowledged, check, create_topic, partitions, read_all, start_verifiable_producer, QUICK_FAILOVER as CONFIG, TOPIC,
};
use support::BrokerProcess;

const PATIENCE: Duration = Duration::from_secs(60);

/// Each partition's `Elr:` and `LastKnownElr:` as Kafka's `kafka-topics
/// --describe` prints them through `bootstrap` (DescribeTopicPartitions).
fn described_elrs(bootstrap: &str) -> Vec<(String, String)> {
    let (ok, printed) =
        support::kafka_cli("kafka-topics", &["--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC]);
    if !ok {
        return Vec::new();
    }
    let field = |line: &str, name: &str| {
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        fields.iter().find_map(|f| f.strip_prefix(name)).map_or(String::new(), |v| v.trim().to_string())
    };
    printed
        .lines()
        .filter(|l| l.trim_start().starts_with("Topic:") && l.contains("Partition:"))
        .map(|l| (field(l, "Elr:"), field(l, "LastKnownElr:")))
        .collect()
}

/// Waits until every partition, as `observer` lists it, satisfies `want`
/// (leader, ISR).
fn wait_for_partitions(observer: &BrokerProcess, what: &str, want: impl Fn(i32, &[i32]) -> bool) {
    support::wait_for(what, PATIENCE, || {
        let listed = partitions(&observer.bootstrap());
        listed.len() == 3 && listed.iter().all(|(leader, _, isr)| want(*leader, isr))
    });
}

#[test]
fn eligible_leader_replicas_lead_after_a_clean_shutdown_and_not_after_a_crash() {
    // Declared first, so it goes last: the processes stop before their hosts.
    let network = TestNetwork::create(6);
    let (_controllers, mut brokers) =
        BrokerProcess::start_split_cluster_on(&network.hosts()[..3], &network.hosts()[3..], &CONFIG);
    let bootstrap = brokers.iter().map(BrokerProcess::bootstrap).collect::<Vec<_>>().join(",");
    let (ok, features) = support::kafka_cli("kafka-features", &["--bootstrap-server", &bootstrap, "describe"]);
    let elr = features.lines().find(|l| l.contains("Feature: eligible.leader.replicas.version"));
    assert!(ok && elr.is_some_and(|l| l.contains("FinalizedVersionLevel: 1")), "{features}");
    create_topic(&bootstrap);
    wait_for_partitions(&brokers[0], "three in-sync replicas everywhere", |_, isr| isr.len() == 3);
    let scratch = tempfile::tempdir().unwrap();
    let producer = start_verifiable_producer(&bootstrap, 3_000, 3_000, None, scratch.path());
    let output = producer.wait_with_output().expect("producer");
    let acked = acknowledged(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(acked.len(), 3_000, "{}", String::from_utf8_lossy(&output.stderr));
    // The followers learn the final high watermark on their next fetch.
    std::thread::sleep(Duration::from_secs(2));

    // Clean stops: 6 leaves ISRs of three (no ELR), 5 one of two (ELR).
    assert!(brokers[2].stop().success());
    wait_for_partitions(&brokers[0], "ISRs of brokers 4 and 5", |_, isr| isr.len() == 2 && !isr.contains(&6));
    assert!(brokers[1].stop().success());
    wait_for_partitions(&brokers[0], "broker 4 alone in the ISRs, leading", |leader, isr| leader == 4 && isr == [4]);
    support::wait_for("kafka-topics to list broker 5 as eligible", PATIENCE, || {
        let listed = described_elrs(&brokers[0].bootstrap());
        listed.len() == 3 && listed.iter().all(|(elr, _)| elr == "5")
    });
    assert!(brokers[0].stop().success());

    // Broker 5 back first: eligible, it leads.
    brokers[1].restart();
    wait_for_partitions(&brokers[1], "broker 5 leading from the ELR", |leader, isr| leader == 5 && isr == [5]);
    // Its clean stop closed every log, the metadata log too: nothing to rebuild.
    let log = brokers[1].log();
    assert!(!log.contains("rebuilding a corrupt index"), "{log}");

    // Killed, it comes back unclean: out of every ELR, leading nothing.
    brokers[1].kill9();
    std::thread::sleep(Duration::from_secs(5));
    brokers[1].restart();
    wait_for_partitions(&brokers[1], "no leader while only broker 4 is eligible", |leader, isr| {
        leader == -1 && isr.is_empty()
    });
    support::wait_for("kafka-topics to list only broker 4 as eligible", PATIENCE, || {
        let listed = described_elrs(&brokers[1].bootstrap());
        listed.len() == 3 && listed.iter().all(|(elr, _)| elr == "4")
    });

    // Broker 4, shut down cleanly, leads again; everyone catches up.
    brokers[0].restart();
    wait_for_partitions(&brokers[1], "broker 4 leading", |leader, _| leader == 4);
    brokers[2].restart();
    wait_for_partitions(&brokers[1], "three in-sync replicas again", |_, isr| isr.len() == 3);
    check(&acked, &read_all(&brokers, None));
}
