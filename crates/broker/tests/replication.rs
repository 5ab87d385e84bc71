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
//!
//! Beside it, on loopback: a reassignment held to its throttle (Kafka's
//! replica tools and KIP-392 are in `replica_tools.rs`).

mod support;

use std::time::{Duration, Instant};

use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse};
use support::netns::TestNetwork;
use support::replica_bytes::wait_for_same_bytes;
use support::replicated::{
    acknowledged, check, create_and_fill, create_topic, partitions, read_all, segments, start_verifiable_producer,
    QUICK_FAILOVER as CONFIG, TOPIC,
};
use support::{BrokerProcess, RawClient};

const PATIENCE: Duration = Duration::from_secs(90);
/// From a leader's kill to its partitions led elsewhere: the session
/// timeout, a fencing commit, the metadata reaching the brokers; wide for
/// this shared 2-core machine.
const FAILOVER_BOUND: Duration = Duration::from_secs(20);

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
            // 19,000 of the 20,000: records of every partition (about
            // 6,667 each), so the group commits an offset for each.
            .chain(["--max-messages", "19000", "--timeout-ms", "30000"])
            .collect::<Vec<_>>(),
    );
    let tail = &printed[printed.len().saturating_sub(2000)..];
    assert!(ok && printed.contains("Processed a total of 19000 messages"), "{tail}");
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
    create_and_fill(bootstrap, "moved", &["--replica-assignment", "4:5", "--config", "min.insync.replicas=1"], 500);
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
    create_topic(&bootstrap);
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
        let what = format!("{TOPIC}-{partition}'s replicas to hold the same bytes");
        wait_for_same_bytes(&what, PATIENCE, || brokers.iter().map(|b| segments(b, partition)).collect());
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

/// `kafka-reassign-partitions --throttle` (KIP-73): the replica a move adds
/// catches up no faster than the throttle lets it (about 2.4 MB at
/// 100 kB/s: over 20 s, where unthrottled it takes a second or two; the
/// bound asserted is half of that), and
/// `--verify` once the move is done clears the brokers' throttle rates.
#[test]
fn a_throttled_reassignment_moves_no_faster_than_its_throttle() {
    let brokers = BrokerProcess::start_cluster(3, &[]);
    let bootstrap = brokers.iter().map(BrokerProcess::bootstrap).collect::<Vec<_>>().join(",");
    create_and_fill(&bootstrap, "throttled", &["--replica-assignment", "1:2"], 40_000);
    let scratch = tempfile::tempdir().unwrap();
    let plan = scratch.path().join("reassignment.json");
    std::fs::write(&plan, r#"{"version":1,"partitions":[{"topic":"throttled","partition":0,"replicas":[2,3]}]}"#)
        .unwrap();
    let tool = |action: &str, extra: &[&str]| {
        let args =
            ["--bootstrap-server", bootstrap.as_str(), "--reassignment-json-file", plan.to_str().unwrap(), action];
        support::kafka_cli(
            "kafka-reassign-partitions",
            &args.into_iter().chain(extra.iter().copied()).collect::<Vec<_>>(),
        )
    };
    let (ok, printed) = tool("--execute", &["--throttle", "100000"]);
    assert!(ok && printed.contains("Successfully started partition reassignment"), "{printed}");
    // Timed from here (the tool's own start-up left out) to the move's end:
    // the controller drops broker 1 once broker 3 is in the ISR.
    let started = Instant::now();
    let replicas = || support::cluster::partition_state(&brokers[1], "throttled", 0).replica_nodes;
    support::wait_for("the throttled move to complete", Duration::from_secs(180), || replicas() == [2, 3]);
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(12), "2.4 MB moved at 100 kB/s in {took:?}");
    // start_cluster's nodes are 1, 2 and 3.
    let rates = |id: usize| {
        let args = ["--bootstrap-server", &bootstrap, "--entity-type", "brokers", "--describe", "--entity-name"];
        let id = id.to_string();
        support::kafka_cli("kafka-configs", &args.into_iter().chain([id.as_str()]).collect::<Vec<_>>()).1
    };
    let set = rates(3);
    assert!(set.contains("follower.replication.throttled.rate=100000"), "{set}");
    let (ok, printed) = tool("--verify", &[]);
    assert!(ok && printed.contains("Reassignment of partition throttled-0 is completed"), "{printed}");
    for id in 1..=brokers.len() {
        let left = rates(id);
        assert!(!left.contains("replication.throttled.rate"), "{left}");
    }
    eprintln!("2.4 MB moved with a 100 kB/s throttle in {took:?}");
}
