//! Replicated partitions through broker failures, in a production layout:
//! three controller-only krabka nodes and three broker-only krabka nodes,
//! each on a host of its own (a network namespace, `support::netns`). A
//! topic of three partitions, three replicas each, `min.insync.replicas=2`.
//!
//! - Kafka 4.3.1's VerifiableProducer (idempotent, acks=all) writes while
//!   the leader of partition 0 is killed with SIGKILL: another in-sync
//!   replica takes over, the killed broker leaves the ISR, and every record
//!   the producer saw acknowledged is read back at the partition and offset
//!   it was acknowledged at, none twice, offsets in order (the checker
//!   below).
//! - The killed broker restarts, catches up and rejoins the ISR; every
//!   replica's segments then hold the same bytes; Kafka's
//!   `kafka-leader-election --election-type preferred` gives every
//!   partition back to its first replica.
//! - A broker stopped with SIGTERM goes through controlled shutdown: its
//!   leadership moves to other replicas before it exits.
//! - With one broker gone and another frozen (SIGSTOP) past its session,
//!   the ISR is one replica: acks=all producers get NOT_ENOUGH_REPLICAS.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse};
use support::netns::TestNetwork;
use support::{repo_root, BrokerProcess, RawClient};

const TOPIC: &str = "replicated";
/// Broker sessions shorter than Kafka's 9 s default, so fencing is quick.
const CONFIG: [&str; 4] = [
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=4000",
    "offsets.topic.replication.factor=3",
];
const PATIENCE: Duration = Duration::from_secs(90);
/// From a leader's kill to its partitions led elsewhere: the session
/// timeout, a fencing commit, the metadata reaching the brokers; wide for
/// this shared 2-core machine.
const FAILOVER_BOUND: Duration = Duration::from_secs(20);

/// Each partition's (leader, replicas, ISR) as the broker at `bootstrap` lists them.
fn partitions(bootstrap: &str) -> Vec<(i32, Vec<i32>, Vec<i32>)> {
    let Ok(stream) = std::net::TcpStream::connect(bootstrap) else { return Vec::new() };
    let request = MetadataRequest { topics: None, ..Default::default() };
    let answer: MetadataResponse = RawClient::from_stream(stream).request(ApiKey::Metadata, 12, &request);
    let Some(topic) = answer.topics.iter().find(|t| t.name.as_deref() == Some(TOPIC)) else { return Vec::new() };
    let mut listed: Vec<_> = topic
        .partitions
        .iter()
        .map(|p| (p.partition_index, (p.leader_id, p.replica_nodes.clone(), p.isr_nodes.clone())))
        .collect();
    listed.sort();
    listed.into_iter().map(|(_, state)| state).collect()
}

/// A record the producer saw acknowledged, or the consumer read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Placed {
    partition: i32,
    offset: i64,
    value: String,
}

/// The value of `"name":` in one JSON line of VerifiableProducer's (flat
/// objects of numbers, strings and nulls).
fn json_field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("\"{name}\":"))? + name.len() + 3;
    let rest = &line[start..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

/// Kafka's VerifiableProducer, started in the background: idempotent,
/// acks=all, `count` records at `rate` per second, each value its number.
/// Values are the record's number, after `prefix.` when given.
fn start_verifiable_producer(
    bootstrap: &str,
    count: usize,
    rate: usize,
    prefix: Option<u32>,
    dir: &std::path::Path,
) -> std::process::Child {
    let config = dir.join(format!("producer-{}.properties", prefix.unwrap_or(0)));
    let mut file = std::fs::File::create(&config).unwrap();
    // Round robin: every partition gets records (sticky batches might skip
    // one); requests to a leader cut off time out in 5 s, then go elsewhere.
    let partitioner = "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner";
    writeln!(file, "enable.idempotence=true\nretries=2147483647\ndelivery.timeout.ms=120000\n{partitioner}").unwrap();
    writeln!(file, "request.timeout.ms=5000\nmetadata.max.age.ms=2000").unwrap();
    let prefix = prefix.map(|p| vec!["--value-prefix".to_string(), p.to_string()]).unwrap_or_default();
    Command::new(repo_root().join("tools/kafka-reference/kafka-cli"))
        .args(["org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", bootstrap, "--topic", TOPIC])
        .args(["--max-messages", &count.to_string(), "--throughput", &rate.to_string(), "--acks", "-1"])
        .args(["--producer.config", config.to_str().unwrap()])
        .args(prefix)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start VerifiableProducer")
}

/// The records a VerifiableProducer's output says were acknowledged.
fn acknowledged(output: &str) -> Vec<Placed> {
    output
        .lines()
        .filter(|line| json_field(line, "name") == Some("producer_send_success"))
        .map(|line| Placed {
            partition: json_field(line, "partition").and_then(|v| v.parse().ok()).expect("partition"),
            offset: json_field(line, "offset").and_then(|v| v.parse().ok()).expect("offset"),
            value: json_field(line, "value").expect("value").to_string(),
        })
        .collect()
}

/// Every record of the topic, read back with Kafka's console consumer
/// from the beginning (`expected` of them, the sum of the log ends).
fn read_back(bootstrap: &str, expected: usize) -> Vec<Placed> {
    let (ok, printed) = support::kafka_cli(
        "kafka-console-consumer",
        &["--bootstrap-server", bootstrap, "--topic", TOPIC, "--from-beginning", "--timeout-ms", "30000"]
            .into_iter()
            .chain(["--max-messages", &expected.to_string()])
            .chain(["--property", "print.partition=true", "--property", "print.offset=true"])
            .collect::<Vec<_>>(),
    );
    assert!(ok, "{printed}");
    printed
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let field = |prefix: &str| fields.iter().find_map(|f| f.strip_prefix(prefix)).map(str::to_string);
            Some(Placed {
                partition: field("Partition:")?.parse().ok()?,
                offset: field("Offset:")?.parse().ok()?,
                value: fields.last()?.to_string(),
            })
        })
        .collect()
}

/// Every record of the topic, read through the brokers but `skip`, up
/// to each partition's end as its leader gives it (a follower refuses).
fn read_all(brokers: &[BrokerProcess], skip: Option<usize>) -> Vec<Placed> {
    let live: Vec<&BrokerProcess> =
        brokers.iter().enumerate().filter(|(i, _)| Some(*i) != skip).map(|(_, b)| b).collect();
    let ends: Vec<Vec<_>> = live.iter().map(|b| support::cluster::latest_offsets(b, TOPIC, 3)).collect();
    let total: i64 = (0..3)
        .map(|p| ends.iter().filter(|e| e[p].error_code == 0).map(|e| e[p].offset).max().expect("a leader"))
        .sum();
    let bootstrap = live.iter().map(|b| b.bootstrap()).collect::<Vec<_>>().join(",");
    read_back(&bootstrap, total as usize)
}

/// The checker: every acknowledged record where it was acknowledged, no
/// value twice (idempotence), offsets rising within each partition.
fn check(acked: &[Placed], read: &[Placed]) {
    let at: BTreeMap<(i32, i64), &str> = read.iter().map(|r| ((r.partition, r.offset), r.value.as_str())).collect();
    let summary = |records: &[Placed]| {
        let mut ranges: BTreeMap<i32, (usize, i64, i64)> = BTreeMap::new();
        for r in records {
            let e = ranges.entry(r.partition).or_insert((0, i64::MAX, -1));
            *e = (e.0 + 1, e.1.min(r.offset), e.2.max(r.offset));
        }
        ranges
    };
    eprintln!("acknowledged (count, first, last) by partition: {:?}", summary(acked));
    eprintln!("read back (count, first, last) by partition: {:?}", summary(read));
    let lost: Vec<&Placed> =
        acked.iter().filter(|a| at.get(&(a.partition, a.offset)) != Some(&a.value.as_str())).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost or moved, first {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    let mut values = BTreeSet::new();
    let duplicates: Vec<&Placed> = read.iter().filter(|r| !values.insert(r.value.clone())).collect();
    assert!(duplicates.is_empty(), "duplicates: {:?}", &duplicates[..duplicates.len().min(5)]);
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for record in read {
        let previous = last.insert(record.partition, record.offset);
        assert!(previous.is_none_or(|p| p < record.offset), "offsets out of order at {record:?}");
    }
}

/// The bytes of every segment of `TOPIC`-`partition` in a broker's data directory.
fn segments(node: &BrokerProcess, partition: usize) -> Vec<u8> {
    let dir = node.data_dir().join(format!("{TOPIC}-{partition}"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "log")).collect()
        })
        .unwrap_or_default();
    files.sort();
    files.iter().flat_map(|f| std::fs::read(f).unwrap_or_default()).collect()
}

/// The group's coordinator (its broker id), as `kafka-consumer-groups` names it.
fn coordinator_of(bootstrap: &str, group: &str) -> Option<i32> {
    let (_, printed) = support::kafka_cli(
        "kafka-consumer-groups",
        &["--bootstrap-server", bootstrap, "--describe", "--group", group, "--state"],
    );
    let line = printed.lines().find(|l| l.starts_with(group))?;
    line.split('(').nth(1)?.split(')').next()?.trim().parse().ok()
}

/// The offsets `group` committed on `TOPIC`, summed over its partitions.
fn committed_offsets(bootstrap: &str, group: &str) -> Option<i64> {
    let (ok, printed) =
        support::kafka_cli("kafka-consumer-groups", &["--bootstrap-server", bootstrap, "--describe", "--group", group]);
    let rows: Vec<i64> = printed
        .lines()
        .filter(|l| l.starts_with(group) && l.contains(TOPIC))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse().ok())
        .collect();
    (ok && rows.len() == 3).then(|| rows.iter().sum())
}

fn committed_offsets_survive_their_coordinator(brokers: &mut [BrokerProcess], bootstrap: &str) {
    let (ok, printed) = support::kafka_cli(
        "kafka-console-consumer",
        &["--bootstrap-server", bootstrap, "--topic", TOPIC, "--group", "readers", "--from-beginning"]
            .into_iter()
            .chain(["--max-messages", "1000", "--timeout-ms", "30000"])
            .collect::<Vec<_>>(),
    );
    assert!(ok && printed.contains("Processed a total of 1000 messages"), "{printed}");
    let before = committed_offsets(bootstrap, "readers").expect("committed offsets");
    assert!(before >= 1000, "the group committed what it read: {before}");
    let coordinator = coordinator_of(bootstrap, "readers").expect("a coordinator");
    let index = (coordinator - 4) as usize;
    brokers[index].kill9();
    let others = brokers
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .map(|(_, b)| b.bootstrap())
        .collect::<Vec<_>>()
        .join(",");
    support::wait_for("another broker to coordinate the group with its offsets", FAILOVER_BOUND * 2, || {
        coordinator_of(&others, "readers").is_some_and(|c| c != coordinator)
            && committed_offsets(&others, "readers") == Some(before)
    });
    brokers[index].restart();
}

/// Moves `moved`-0 from brokers 4, 5 to 5, 6 while it holds records.
fn reassign_with_kafkas_tool(brokers: &[BrokerProcess], bootstrap: &str, scratch: &std::path::Path) {
    let create = ["--create", "--topic", "moved", "--replica-assignment", "4:5", "--config", "min.insync.replicas=1"];
    let (ok, printed) = support::kafka_cli(
        "kafka-topics",
        &["--bootstrap-server", bootstrap].into_iter().chain(create).collect::<Vec<_>>(),
    );
    assert!(ok, "{printed}");
    let (ok, printed) = support::idempotent_perf_producer(bootstrap, "moved", 500);
    assert!(ok, "{printed}");
    let plan = scratch.join("reassignment.json");
    std::fs::write(&plan, r#"{"version":1,"partitions":[{"topic":"moved","partition":0,"replicas":[5,6]}]}"#).unwrap();
    let tool = |action: &str, extra: &[&str]| {
        let args = ["--bootstrap-server", bootstrap, "--reassignment-json-file", plan.to_str().unwrap(), action];
        support::kafka_cli(
            "kafka-reassign-partitions",
            &args.into_iter().chain(extra.iter().copied()).collect::<Vec<_>>(),
        )
    };
    let (ok, printed) = tool("--execute", &[]);
    assert!(ok && printed.contains("Successfully started partition reassignment"), "{printed}");
    support::wait_for("the reassignment to complete", PATIENCE, || {
        let (ok, printed) = tool("--verify", &["--preserve-throttles"]);
        ok && printed.contains("Reassignment of partition moved-0 is completed")
    });
    let request = MetadataRequest { topics: None, ..Default::default() };
    let answer: MetadataResponse = RawClient::connect(&brokers[1].bootstrap()).request(ApiKey::Metadata, 12, &request);
    let moved = answer.topics.iter().find(|t| t.name.as_deref() == Some("moved")).expect("moved listed");
    let p = &moved.partitions[0];
    assert_eq!((p.replica_nodes.clone(), sorted(p.isr_nodes.clone())), (vec![5, 6], vec![5, 6]), "{p:?}");
    support::wait_for("broker 4 to drop its copy", PATIENCE, || !brokers[0].data_dir().join("moved-0").exists());
    let copy = |b: &BrokerProcess| {
        let dir = b.data_dir().join("moved-0");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        files.sort();
        files.iter().flat_map(|f| std::fs::read(f).unwrap()).collect::<Vec<u8>>()
    };
    support::wait_for("brokers 5 and 6 to hold the same bytes", PATIENCE, || {
        let (five, six) = (copy(&brokers[1]), copy(&brokers[2]));
        !five.is_empty() && five == six
    });
}

fn sorted(mut ids: Vec<i32>) -> Vec<i32> {
    ids.sort_unstable();
    ids
}

#[test]
fn acknowledged_records_survive_failover_and_leadership_follows_the_brokers() {
    // Declared first, so it goes last: the processes stop before their hosts.
    let network = TestNetwork::create(6);
    let (_controllers, mut brokers) =
        BrokerProcess::start_split_cluster_on(&network.hosts()[..3], &network.hosts()[3..], &CONFIG);
    let id_of = |index: usize| index as i32 + 4;
    let index_of = |id: i32| (id - 4) as usize;
    let bootstrap = brokers.iter().map(BrokerProcess::bootstrap).collect::<Vec<_>>().join(",");
    let (ok, printed) = support::kafka_cli(
        "kafka-topics",
        &["--bootstrap-server", &bootstrap, "--create", "--topic", TOPIC, "--partitions", "3"]
            .into_iter()
            .chain(["--replication-factor", "3", "--config", "min.insync.replicas=2"])
            .collect::<Vec<_>>(),
    );
    assert!(ok, "{printed}");
    let whole =
        |listed: &[(i32, Vec<i32>, Vec<i32>)]| listed.len() == 3 && listed.iter().all(|(_, _, isr)| isr.len() == 3);
    support::wait_for("every partition with three in-sync replicas", PATIENCE, || {
        whole(&partitions(&brokers[0].bootstrap()))
    });

    // A first consumer creates `__consumer_offsets`, three replicas per
    // partition, while every broker is up.
    let (ok, printed) = support::kafka_cli(
        "kafka-console-consumer",
        &["--bootstrap-server", &bootstrap, "--topic", TOPIC, "--group", "warm-up", "--timeout-ms", "2000"],
    );
    assert!(ok || printed.contains("Processed a total of 0 messages"), "{printed}");

    // Kill partition 0's leader while the producer writes.
    let scratch = tempfile::tempdir().unwrap();
    let producer = start_verifiable_producer(&bootstrap, 20_000, 2_000, None, scratch.path());
    std::thread::sleep(Duration::from_secs(6));
    let victim = index_of(partitions(&brokers[0].bootstrap())[0].0);
    let survivor = (victim + 1) % 3;
    brokers[victim].kill9();
    let killed_at = Instant::now();
    support::wait_for("the killed broker's partitions led elsewhere, out of every ISR", FAILOVER_BOUND, || {
        let listed = partitions(&brokers[survivor].bootstrap());
        listed.len() == 3
            && listed
                .iter()
                .all(|(leader, _, isr)| *leader >= 0 && *leader != id_of(victim) && !isr.contains(&id_of(victim)))
    });
    eprintln!("failover after the leader's SIGKILL: {:?}", killed_at.elapsed());
    let output = producer.wait_with_output().expect("producer");
    let printed = String::from_utf8_lossy(&output.stdout);
    let acked = acknowledged(&printed);
    assert!(
        acked.len() == 20_000,
        "every record acknowledged in the end: {} of 20000\n{}",
        acked.len(),
        String::from_utf8_lossy(&output.stderr)
    );

    // Read back through the survivors, then the killed broker rejoins.
    check(&acked, &read_all(&brokers, Some(victim)));
    brokers[victim].restart();
    support::wait_for("the restarted broker back in every ISR", PATIENCE, || {
        whole(&partitions(&brokers[survivor].bootstrap()))
    });
    for partition in 0..3 {
        support::wait_for(&format!("{TOPIC}-{partition}'s replicas to hold the same bytes"), PATIENCE, || {
            let copies: Vec<Vec<u8>> = brokers.iter().map(|b| segments(b, partition)).collect();
            !copies[0].is_empty() && copies.iter().all(|c| *c == copies[0])
        });
    }

    // Leadership stayed where the failover put it; Kafka's
    // kafka-leader-election moves it back to each partition's first replica.
    let (ok, printed) = support::kafka_cli(
        "kafka-leader-election",
        &["--bootstrap-server", &bootstrap, "--election-type", "preferred", "--all-topic-partitions"],
    );
    assert!(ok, "{printed}");
    support::wait_for("every partition led by its first replica", FAILOVER_BOUND, || {
        let listed = partitions(&brokers[survivor].bootstrap());
        listed.len() == 3 && listed.iter().all(|(leader, replicas, _)| *leader == replicas[0])
    });

    // Committed offsets survive their coordinator: a group commits, the
    // broker leading its `__consumer_offsets` partition is killed, and the
    // new leader's coordinator has every offset.
    committed_offsets_survive_their_coordinator(&mut brokers, &bootstrap);
    support::wait_for("every ISR whole again", PATIENCE, || whole(&partitions(&brokers[survivor].bootstrap())));

    // The leader of partition 1 is cut off from every other host while
    // the producer goes on writing to it (the test's own address still
    // reaches it): its high watermark cannot move, so nothing it takes
    // alone is acknowledged; the controller fences it, another replica
    // leads, and once healed it truncates what it took alone.
    let isolated = index_of(partitions(&brokers[0].bootstrap())[1].0);
    let producer = start_verifiable_producer(&bootstrap, 10_000, 2_000, Some(2), scratch.path());
    std::thread::sleep(Duration::from_secs(3));
    network.isolate(3 + isolated);
    let watcher = (isolated + 1) % 3;
    support::wait_for("the isolated leader's partitions led elsewhere", FAILOVER_BOUND, || {
        let listed = partitions(&brokers[watcher].bootstrap());
        listed.len() == 3 && listed.iter().all(|(leader, _, _)| *leader >= 0 && *leader != id_of(isolated))
    });
    std::thread::sleep(Duration::from_secs(2));
    network.heal(3 + isolated);
    let output = producer.wait_with_output().expect("producer");
    let mut also = acknowledged(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(also.len(), 10_000, "{}", String::from_utf8_lossy(&output.stderr));
    support::wait_for("the healed broker back in every ISR", PATIENCE, || {
        whole(&partitions(&brokers[watcher].bootstrap()))
    });
    let mut every = acked.clone();
    every.append(&mut also);
    check(&every, &read_all(&brokers, None));
    let truncations = brokers[isolated].log().matches("truncating a diverged follower").count();
    eprintln!("the isolated leader truncated {truncations} diverged partition tails after the heal");

    // Reassignment: a two-replica topic moves from brokers 4 and 5 to 5
    // and 6 with Kafka's kafka-reassign-partitions; broker 6 catches up,
    // joins the ISR, broker 4 leaves and drops its copy.
    reassign_with_kafkas_tool(&brokers, &bootstrap, scratch.path());

    // Controlled shutdown: leadership moves before the process exits.
    let leader = index_of(partitions(&brokers[0].bootstrap())[1].0);
    let other = (leader + 1) % 3;
    assert!(brokers[leader].stop().success());
    assert!(
        brokers[leader].log().contains("the active controller fenced this broker for its shutdown"),
        "{}",
        brokers[leader].log()
    );
    // Within less than a session: the move, not the session's expiry.
    support::wait_for("no partition led by the stopped broker", Duration::from_secs(2), || {
        let listed = partitions(&brokers[other].bootstrap());
        listed.len() == 3 && listed.iter().all(|(l, _, _)| *l >= 0 && *l != id_of(leader))
    });

    // One broker stopped, another frozen past its session: one in-sync
    // replica left, under min.insync.replicas.
    let frozen = (leader + 2) % 3;
    brokers[frozen].pause();
    support::wait_for("every ISR down to the one live broker", FAILOVER_BOUND, || {
        let listed = partitions(&brokers[other].bootstrap());
        listed.len() == 3 && listed.iter().all(|(_, _, isr)| isr == &vec![id_of(other)])
    });
    let (ok, printed) = support::idempotent_perf_producer_with(
        &brokers[other].bootstrap(),
        TOPIC,
        10,
        // No retry: the broker's first answer is the producer's error.
        &["enable.idempotence=false", "retries=0", "delivery.timeout.ms=5000", "request.timeout.ms=4000"],
    );
    assert!(!ok && printed.contains("NotEnoughReplicas"), "{printed}");
    brokers[frozen].resume();
}

/// The long fault workload (`KRABKA_LONG_TESTS=1`; `KRABKA_FAULT_ROUNDS`,
/// default 20): rounds of a seeded fault (`KRABKA_FAULT_SEED`) while
/// Kafka's VerifiableProducer writes 4,000 records: a broker killed with
/// SIGKILL and restarted, one frozen past its session and resumed, one
/// cut off from every other host and healed, one stopped with SIGTERM and
/// restarted, the active controller killed with SIGKILL and restarted, two
/// brokers killed in turn, a rolling restart of every broker. After each round every ISR must be whole again; at the end
/// the checker reads everything back and every partition's replicas hold
/// the same bytes.
#[test]
fn long_fault_rounds_lose_nothing_acknowledged() {
    if std::env::var("KRABKA_LONG_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: the long fault workload runs with KRABKA_LONG_TESTS=1");
        return;
    }
    let rounds: u64 = std::env::var("KRABKA_FAULT_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let mut seed: u64 = std::env::var("KRABKA_FAULT_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut next = move |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let network = TestNetwork::create(6);
    let (mut controllers, mut brokers) =
        BrokerProcess::start_split_cluster_on(&network.hosts()[..3], &network.hosts()[3..], &CONFIG);
    let bootstrap = brokers.iter().map(BrokerProcess::bootstrap).collect::<Vec<_>>().join(",");
    let (ok, printed) = support::kafka_cli(
        "kafka-topics",
        &["--bootstrap-server", &bootstrap, "--create", "--topic", TOPIC, "--partitions", "3"]
            .into_iter()
            .chain(["--replication-factor", "3", "--config", "min.insync.replicas=2"])
            .collect::<Vec<_>>(),
    );
    assert!(ok, "{printed}");
    let whole =
        |listed: &[(i32, Vec<i32>, Vec<i32>)]| listed.len() == 3 && listed.iter().all(|(_, _, isr)| isr.len() == 3);
    let scratch = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    for round in 0..rounds {
        let watcher = |brokers: &[BrokerProcess]| brokers.iter().map(|b| partitions(&b.bootstrap())).find(|l| whole(l));
        support::wait_for("every ISR whole", PATIENCE, || watcher(&brokers).is_some());
        let producer = start_verifiable_producer(&bootstrap, 4_000, 2_000, Some(round as u32 + 1), scratch.path());
        std::thread::sleep(Duration::from_millis(500 + next(1_000)));
        let target = next(3) as usize;
        let fault = next(7);
        let wait_whole = |brokers: &[BrokerProcess]| {
            support::wait_for("every ISR whole within the round", PATIENCE, || {
                brokers.iter().any(|b| {
                    // A broker just restarted may close a connection while it starts.
                    let listed = std::panic::catch_unwind(|| partitions(&b.bootstrap())).unwrap_or_default();
                    whole(&listed)
                })
            })
        };
        match fault {
            0 => {
                brokers[target].kill9();
                std::thread::sleep(Duration::from_secs(4));
                brokers[target].restart();
            }
            1 => {
                brokers[target].pause();
                std::thread::sleep(Duration::from_secs(5));
                brokers[target].resume();
            }
            2 => {
                network.isolate(3 + target);
                std::thread::sleep(Duration::from_secs(5));
                network.heal(3 + target);
            }
            3 => {
                assert!(brokers[target].stop().success());
                std::thread::sleep(Duration::from_secs(2));
                brokers[target].restart();
            }
            4 => {
                // The active controller dies; the other two elect one.
                let answer = support::cluster::describe_quorum(&brokers[target].bootstrap());
                let leader = answer.topics[0].partitions[0].leader_id;
                assert!((1..=3).contains(&leader), "an active controller: {answer:?}");
                controllers[(leader - 1) as usize].kill9();
                std::thread::sleep(Duration::from_secs(3));
                controllers[(leader - 1) as usize].restart();
            }
            5 => {
                // Two brokers in turn: the second dies once the first is back in sync.
                brokers[target].kill9();
                std::thread::sleep(Duration::from_secs(4));
                brokers[target].restart();
                wait_whole(&brokers);
                let second = (target + 1) % 3;
                brokers[second].kill9();
                std::thread::sleep(Duration::from_secs(4));
                brokers[second].restart();
            }
            _ => {
                // A rolling restart: each broker stopped cleanly and back in sync before the next.
                for i in 0..3 {
                    assert!(brokers[i].stop().success());
                    brokers[i].restart();
                    wait_whole(&brokers);
                }
            }
        }
        let output = producer.wait_with_output().expect("producer");
        let mut these = acknowledged(&String::from_utf8_lossy(&output.stdout));
        eprintln!("round {round}: fault {fault} on broker {}, {} acknowledged", target + 4, these.len());
        if these.len() != 4_000 {
            let reserved: Vec<String> = controllers
                .iter()
                .flat_map(|c| {
                    c.log().lines().filter(|l| l.contains("producer ids")).map(String::from).collect::<Vec<_>>()
                })
                .collect();
            let stderr = String::from_utf8_lossy(&output.stderr);
            let errors: Vec<&str> = stderr
                .lines()
                .filter(|l| !l.contains("NOT_LEADER") && !l.contains("invalid metadata"))
                .take(20)
                .collect();
            panic!(
                "round {round}: {} of 4000 acknowledged\n{}\n{}",
                these.len(),
                reserved.join("\n"),
                errors.join("\n")
            );
        }
        acked.append(&mut these);
    }
    support::wait_for("every ISR whole at the end", PATIENCE, || whole(&partitions(&brokers[0].bootstrap())));
    check(&acked, &read_all(&brokers, None));
    for partition in 0..3 {
        support::wait_for(&format!("{TOPIC}-{partition}'s replicas to hold the same bytes"), PATIENCE, || {
            let copies: Vec<Vec<u8>> = brokers.iter().map(|b| segments(b, partition)).collect();
            !copies[0].is_empty() && copies.iter().all(|c| *c == copies[0])
        });
    }
    eprintln!("{rounds} rounds: {} acknowledged records checked", acked.len());
}
