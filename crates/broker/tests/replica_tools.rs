//! Kafka's replica tools and follower fetching (KIP-392) against a
//! three-node krabka cluster on loopback, with Kafka 4.3.1's tools and
//! console consumer. Apart from `replication.rs`, whose fault test runs on
//! six hosts: tests of one binary run at once.

mod support;

use std::time::Duration;

use support::replicated::create_and_fill;
use support::BrokerProcess;

const PATIENCE: Duration = Duration::from_secs(90);

/// Each partition's replicas as `kafka-log-dirs --describe` lists them:
/// (partition, broker, size, offset lag, is future) for every
/// `"partition":"<topic>-<n>"` entry of its JSON.
fn log_dirs_listing(bootstrap: &str, topic: &str) -> Vec<(String, i32, i64, i64, bool)> {
    let (ok, printed) =
        support::kafka_cli("kafka-log-dirs", &["--bootstrap-server", bootstrap, "--describe", "--topic-list", topic]);
    assert!(ok, "{printed}");
    let number = |text: &str, key: &str| -> i64 {
        let rest = &text[text.find(key).unwrap_or_else(|| panic!("{key} in {text}")) + key.len()..];
        rest.split(|c: char| c != '-' && !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    let mut listed = Vec::new();
    for broker in printed.split("{\"broker\":").skip(1) {
        let id = number(broker, "") as i32;
        for entry in broker.split("{\"partition\":\"").skip(1) {
            let name = entry.split('"').next().unwrap().to_string();
            let future = entry.contains("\"isFuture\":true");
            listed.push((name, id, number(entry, "\"size\":"), number(entry, "\"offsetLag\":"), future));
        }
    }
    listed
}

/// Kafka's replica tools against a krabka cluster (issue 17's tools):
/// `kafka-log-dirs --describe` lists every replica of a three-replica topic
/// on each broker, caught up and of the same size (followers keep the
/// leader's batches as they are); `kafka-replica-verification` fetches each
/// partition from every replica (as a debugging consumer, replica id -2,
/// from followers too) from the earliest offset and finds the same batches
/// (CRC by CRC) up to the high watermark: it reports a maximum lag of 0 at
/// the end of the records, never a mismatch.
#[test]
fn kafkas_replica_tools_find_every_replica_alike() {
    let brokers = BrokerProcess::start_cluster(3, &[]);
    let bootstrap = brokers.iter().map(BrokerProcess::bootstrap).collect::<Vec<_>>().join(",");
    create_and_fill(&bootstrap, "verified", &["--partitions", "3", "--replication-factor", "3"], 30_000);

    let mut listed = Vec::new();
    support::wait_for("every replica listed, caught up, of one size", PATIENCE, || {
        listed = log_dirs_listing(&bootstrap, "verified");
        let sizes = |p: &str| listed.iter().filter(|l| l.0 == p && !l.4).map(|l| l.2).collect::<Vec<_>>();
        listed.len() == 9
            && listed.iter().all(|(_, _, size, lag, future)| *size > 0 && *lag == 0 && !future)
            && ["verified-0", "verified-1", "verified-2"].iter().all(|p| sizes(p).windows(2).all(|w| w[0] == w[1]))
    });
    let brokers_listed: std::collections::BTreeSet<i32> = listed.iter().map(|l| l.1).collect();
    assert_eq!(brokers_listed, [1, 2, 3].into());

    // The tool runs until stopped: 20 s, reporting every second.
    let output = std::process::Command::new("timeout")
        .args(["-s", "KILL", "20"])
        .arg(support::repo_root().join("tools/kafka-reference/kafka-cli"))
        .args(["kafka-replica-verification", "--broker-list", &bootstrap, "--topics-include", "verified"])
        .args(["--time", "-2", "--report-interval-ms", "1000"])
        .output()
        .unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(!printed.contains("doesn't match") && !printed.contains("Exception"), "{printed}");
    // "max lag is 0 for partition verified-2 at offset 9710 among 3
    // partitions": the partition furthest behind, verified to its end.
    let (ok, ends) =
        support::kafka_cli("kafka-get-offsets", &["--bootstrap-server", &bootstrap, "--topic", "verified"]);
    assert!(ok, "{ends}");
    let report = printed.lines().rfind(|l| l.contains("max lag is")).unwrap_or_else(|| panic!("{printed}"));
    let words: Vec<&str> = report.split_whitespace().collect();
    let after = |word: &str| words.iter().position(|w| *w == word).map(|i| words[i + 1]).unwrap_or_default();
    assert_eq!((after("is"), after("among")), ("0", "3"), "{printed}");
    let end = format!("{}:{}", after("partition").replacen("verified-", "verified:", 1), after("offset"));
    assert!(ends.lines().any(|l| l.trim() == end) && !end.ends_with(":0"), "{end} not an end in {ends}");
}

/// KIP-392 with Kafka's consumer: three nodes in racks r1-r3 with Kafka's
/// `RackAwareReplicaSelector`, a partition led by node 1 with a replica on
/// each. A consumer with `client.rack=r2` reads every record from node 2,
/// the follower in its rack: node 2's bytes fetched of the topic grow by at
/// least the records' values, node 3's (the other follower, which no
/// follower fetches from) not at all. A consumer without a rack reads from
/// the leader: node 2's stay where they were.
#[test]
fn a_consumer_with_a_rack_reads_from_the_follower_in_its_rack() {
    const RECORDS: usize = 20_000;
    let selector = "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector";
    let hosts = vec![support::netns::Host::loopback(); 3];
    let extra = [selector, "krabka.metrics.listener=127.0.0.1:0"];
    let brokers = BrokerProcess::start_cluster_each(&hosts, &extra, |id| vec![format!("broker.rack=r{id}")]);
    let bootstrap = brokers.iter().map(BrokerProcess::bootstrap).collect::<Vec<_>>().join(",");
    create_and_fill(&bootstrap, "racked", &["--replica-assignment", "1:2:3"], RECORDS);
    // The selector points a consumer only at a caught-up follower.
    let isr = || support::cluster::partition_state(&brokers[0], "racked", 0).isr_nodes.len();
    support::wait_for("three in-sync replicas", PATIENCE, || isr() == 3);
    let fetched = |node: &BrokerProcess| -> u64 {
        let metrics = String::from_utf8_lossy(&node.http_get("/metrics").1).into_owned();
        let line = metrics.lines().find(|l| l.starts_with("kafka_topic_bytes_out_total{topic=\"racked\"}"));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0)
    };
    let consume = |properties: &[&str]| {
        let count = RECORDS.to_string();
        let args = ["--bootstrap-server", bootstrap.as_str(), "--topic", "racked", "--from-beginning"];
        let args = args.into_iter().chain(["--max-messages", count.as_str(), "--timeout-ms", "30000"]);
        let properties = properties.iter().flat_map(|p| ["--consumer-property", *p]);
        let (ok, printed) = support::kafka_cli("kafka-console-consumer", &args.chain(properties).collect::<Vec<_>>());
        assert!(
            ok && printed.contains(&format!("Processed a total of {RECORDS} messages")),
            "{}",
            &printed[printed.len().saturating_sub(2000)..]
        );
    };

    let before = (fetched(&brokers[1]), fetched(&brokers[2]));
    consume(&["client.rack=r2"]);
    let after = (fetched(&brokers[1]), fetched(&brokers[2]));
    assert!(after.0 - before.0 >= (RECORDS * 50) as u64, "node 2 served the rack's consumer: {before:?} -> {after:?}");
    assert_eq!(after.1, before.1, "node 3 served nothing");
    consume(&[]);
    assert_eq!((fetched(&brokers[1]), fetched(&brokers[2])), after, "a consumer without a rack reads from the leader");
}

/// Established TCP connections of process `pid` to port `port` (`ss`,
/// iproute2): a follower's fetchers' connections to a leader.
fn connections(pid: u32, port: u16) -> usize {
    let output = std::process::Command::new("ss").args(["-tnpH", "state", "established"]).output().unwrap();
    assert!(output.status.success(), "ss: {}", String::from_utf8_lossy(&output.stderr));
    let owner = format!("pid={pid},");
    let peer = format!(":{port}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains(&owner))
        .filter(|line| line.split_whitespace().nth(3).is_some_and(|p| p.ends_with(&peer)))
        .count()
}

/// `num.replica.fetchers`: a follower fetches from each leader over as
/// many connections as Kafka's spread of its partitions over that many
/// fetchers uses (`Utils.abs(31 * topic.hashCode() + partition) %
/// fetchers`; which partition goes where is the unit test's, in
/// krabka-replication's `fetchers.rs`), and a
/// dynamic change of the cluster's default (`kafka-configs --entity-default`)
/// re-spreads them; one below 1, below half or above double the current
/// count is refused, as Kafka's broker refuses it, by the broker it names
/// even when another node is the active controller. Every replica ends up
/// holding the same bytes through both.
#[test]
fn followers_fetch_over_num_replica_fetchers_connections() {
    const TOPIC: &str = "spread";
    // Not 3: three leaders' partitions by turns would all share a fetcher
    // id of 3 (the partition numbers one leader leads are equal mod 3).
    let brokers = BrokerProcess::start_cluster(3, &["num.replica.fetchers=4"]);
    let bootstrap = brokers.iter().map(BrokerProcess::bootstrap).collect::<Vec<_>>().join(",");
    create_and_fill(&bootstrap, TOPIC, &["--partitions", "12", "--replication-factor", "3"], 12_000);
    let leaders: Vec<i32> =
        (0..12).map(|p| support::cluster::partition_state(&brokers[0], TOPIC, p).leader_id).collect();
    // (follower, leader) -> the fetchers it needs, as Kafka spreads them.
    let expected = |fetchers: u32| -> Vec<usize> {
        let mut wanted = Vec::new();
        for follower in 1..=3 {
            for leader in (1..=3).filter(|&l| l != follower) {
                let ids: std::collections::BTreeSet<u32> = (0..12)
                    .filter(|&p| leaders[p as usize] == leader)
                    .map(|p| krabka_replication::fetchers::fetcher_id(TOPIC, p, fetchers))
                    .collect();
                wanted.push(ids.len());
            }
        }
        wanted
    };
    let seen = || -> Vec<usize> {
        let mut seen = Vec::new();
        for follower in 1..=3usize {
            for leader in (1..=3).filter(|&l| l != follower) {
                seen.push(connections(brokers[follower - 1].pid().unwrap(), brokers[leader - 1].port));
            }
        }
        seen
    };
    let spread = expected(4);
    assert!(spread.iter().any(|&n| n > 1), "some leader's partitions over several fetchers: {spread:?}");
    support::wait_for(&format!("fetcher connections {spread:?}"), PATIENCE, || seen() == spread);

    let alter = |value: &str| {
        let setting = format!("num.replica.fetchers={value}");
        let args = ["--bootstrap-server", &bootstrap, "--alter", "--entity-type", "brokers", "--entity-default"];
        support::kafka_cli("kafka-configs", &args.into_iter().chain(["--add-config", &setting]).collect::<Vec<_>>())
    };
    // Kafka's DynamicThreadPool: at least 1, at least half and at most
    // double the current count (4).
    for (value, refusal) in [
        ("0", "Value must be at least 1"),
        ("1", "value should be at least half the current value 4"),
        ("9", "value should not be greater than double the current value 4"),
    ] {
        let (ok, printed) = alter(value);
        assert!(!ok && printed.contains(refusal), "{value} fetchers refused: {printed}");
    }
    let (ok, printed) = alter("2");
    assert!(ok, "{printed}");
    let spread = expected(2);
    assert!(spread.iter().any(|&n| n > 1), "some leader's partitions over two fetchers: {spread:?}");
    support::wait_for(&format!("fetcher connections {spread:?}"), PATIENCE, || seen() == spread);
    // Round robin: every partition gets records (the default sticky
    // partitioner, adaptive to queue sizes, may skip one of twelve).
    let round_robin = "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner";
    let (ok, printed) = support::idempotent_perf_producer_with(&bootstrap, TOPIC, 12_000, &[round_robin]);
    assert!(ok, "{printed}");
    for partition in 0..12 {
        let what = format!("{TOPIC}-{partition}'s replicas to hold the same bytes");
        support::replica_bytes::wait_for_same_bytes(&what, PATIENCE, || {
            brokers.iter().map(|b| support::replica_bytes::partition_log(&b.data_dir(), TOPIC, partition)).collect()
        });
    }

    // A broker's own count, doubled twice (2, 4, 8); removing it would
    // leave the default's 2, under half of 8: refused as Kafka refuses it.
    // The broker is one that is not the active controller: the broker the
    // change names checks it against its own count before it forwards it.
    let controller = support::cluster::create_and_find_the_controller(&brokers, &[0, 1, 2], "probe");
    let node = ((controller + 1) % 3 + 1).to_string();
    let own = |change: &[&str]| {
        let args = ["--bootstrap-server", &bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", &node];
        support::kafka_cli("kafka-configs", &args.into_iter().chain(change.iter().copied()).collect::<Vec<_>>())
    };
    let described = || {
        let args = ["--bootstrap-server", &bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", &node];
        support::kafka_cli("kafka-configs", &args).1
    };
    for count in ["4", "8"] {
        let setting = format!("num.replica.fetchers={count}");
        let (ok, printed) = own(&["--add-config", &setting]);
        assert!(ok, "{printed}");
        support::wait_for(&format!("broker {node}'s own {setting}"), PATIENCE, || described().contains(&setting));
    }
    let (ok, printed) = own(&["--delete-config", "num.replica.fetchers"]);
    assert!(!ok && printed.contains("value should be at least half the current value 8"), "{printed}");
}
