//! Transactions with Kafka's own Java client (kafka-clients 4.3.1, through
//! tests/clients/java), librdkafka, franz-go and Kafka's
//! `kafka-transactions` tool: commits,
//! aborts, a zombie producer fenced by its successor, read_committed reads,
//! group offsets committed in transactions (sendOffsetsToTransaction),
//! a transaction left open by a crashed producer aborted after its timeout
//! or ended with `kafka-transactions abort` and `forceTerminateTransaction`,
//! transactions whose partitions are led by other brokers (markers sent
//! with WriteTxnMarkers), also by Apache Kafka brokers in the same cluster
//! (coordinators and leaders of both kinds), and a Kafka Streams exactly-once app killed
//! mid-stream (2 kills; 10 with KRABKA_LONG_TESTS=1).

mod support;

use std::process::Command;
use std::time::Duration;

use support::{kafka_cli, repo_root, wait_for, BrokerProcess};

/// Runs the Java client check `args`; its one-line summary.
fn client_check(args: &[&str]) -> String {
    run_client(&[repo_root().join("tests/clients/java/run").display().to_string()], args)
}

fn create_topic(bootstrap: &str, topic: &str, partitions: &str, replication_factor: &str) {
    let args = ["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", partitions];
    let (ok, printed) = kafka_cli("kafka-topics", &[&args[..], &["--replication-factor", replication_factor]].concat());
    assert!(ok, "{printed}");
}

/// `kafka-transactions describe` of `id`: its row (coordinator, id,
/// producer id, epoch, state, ...), split on whitespace.
fn describe(bootstrap: &str, id: &str) -> Vec<String> {
    let (ok, printed) =
        kafka_cli("kafka-transactions", &["--bootstrap-server", bootstrap, "describe", "--transactional-id", id]);
    assert!(ok, "{printed}");
    printed.lines().last().unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

/// The three-node tests take turns: two clusters at once on two cores
/// starve each other's elections.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_cluster_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

const SUMMARY: &str =
    r#"{"committed":150,"aborted":100,"read_committed":150,"read_uncommitted":250,"group_offset":42}"#;

#[test]
fn java_transactional_producers_commit_abort_and_are_fenced() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "orders", "3", "1");
    assert_eq!(client_check(&["transactions", &bootstrap, "orders", "3"]), SUMMARY);
    let (ok, listed) = kafka_cli("kafka-transactions", &["--bootstrap-server", &bootstrap, "list"]);
    assert!(ok, "{listed}");
    // The check's last transaction (offsets of 99) was aborted.
    assert!(
        listed.lines().any(|l| l.starts_with("client-check-transactions") && l.contains("CompleteAbort")),
        "{listed}"
    );
    let row = describe(&bootstrap, "client-check-transactions");
    assert_eq!(row[4], "CompleteAbort", "{row:?}");
    let (ok, producers) = kafka_cli(
        "kafka-transactions",
        &["--bootstrap-server", &bootstrap, "describe-producers", "--topic", "orders", "--partition", "0"],
    );
    assert!(ok && producers.lines().last().is_some_and(|l| l.trim_end().ends_with("None")), "{producers}");
}

#[test]
fn a_transaction_left_open_is_aborted_after_its_timeout_and_stays_aborted() {
    let interval = "transaction.abort.timed.out.transaction.cleanup.interval.ms=200";
    let mut broker = BrokerProcess::start(&[interval]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "events", "2", "1");
    // A timeout long enough to see it open, however slow the machine.
    assert_eq!(client_check(&["transactions-hang", &bootstrap, "events", "2", "15000"]), r#"{"hanging":50}"#);
    let row = describe(&bootstrap, "client-check-hanging");
    assert_eq!((row[3].as_str(), row[4].as_str()), ("0", "Ongoing"), "{row:?}");
    wait_for("the coordinator to abort the transaction", Duration::from_secs(60), || {
        describe(&bootstrap, "client-check-hanging")[4] == "CompleteAbort"
    });
    // Fenced: the epoch was bumped for the abort.
    assert_eq!(describe(&bootstrap, "client-check-hanging")[3], "1");
    broker.kill9();
    broker.restart();
    let bootstrap = broker.bootstrap();
    let row = describe(&bootstrap, "client-check-hanging");
    assert_eq!((row[3].as_str(), row[4].as_str()), ("1", "CompleteAbort"), "{row:?}");
    // Nothing of it reaches a read_committed consumer, and nothing is left open.
    let (ok, read) = kafka_cli(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "events",
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            "--timeout-ms",
            "5000",
        ],
    );
    assert!(read.contains("Processed a total of 0 messages"), "{ok} {read}");
}

#[test]
fn transactions_span_the_brokers_of_a_cluster() {
    let _turn = one_cluster_at_a_time();
    let nodes = BrokerProcess::start_cluster(3, &["transaction.state.log.replication.factor=3"]);
    let bootstrap = nodes[0].bootstrap();
    // Six partitions at RF3: led by every node, so most markers go to
    // other brokers than the coordinator, with WriteTxnMarkers.
    create_topic(&bootstrap, "ledger", "6", "3");
    assert_eq!(client_check(&["transactions", &bootstrap, "ledger", "6"]), SUMMARY);
    let row = describe(&bootstrap, "client-check-transactions");
    assert_eq!(row[4], "CompleteAbort", "{row:?}");
    // The coordinator dies: another broker leads its __transaction_state
    // partition, loads it, and goes on from the epoch it left.
    let mut nodes = nodes;
    let coordinator: usize = row[0].parse::<usize>().expect("coordinator id") - 1;
    let epoch: i16 = row[3].parse().expect("epoch");
    nodes[coordinator].kill9();
    let bootstrap = nodes[(coordinator + 1) % 3].bootstrap();
    create_topic(&bootstrap, "ledger-after", "6", "3");
    assert_eq!(client_check(&["transactions", &bootstrap, "ledger-after", "6"]), SUMMARY);
    let row = describe(&bootstrap, "client-check-transactions");
    assert_ne!(row[0], (coordinator + 1).to_string(), "{row:?}");
    assert!(row[3].parse::<i16>().expect("epoch") > epoch, "{row:?}");
}

/// A cluster of three krabka nodes and an Apache Kafka 4.3.1 broker (id 4):
/// `__transaction_state` (one partition, replicas on both kinds) is led
/// first by Kafka's broker, then, after a reassignment and a preferred
/// election, by a krabka broker, which loads what Kafka's coordinator
/// wrote. The topic's partitions are led by both kinds too, so each
/// coordinator sends markers to the other's partitions (WriteTxnMarkers)
/// and each kind of leader asks the other's coordinator before a
/// transaction's first batch (AddPartitionsToTxn between brokers).
#[test]
fn transactions_span_krabka_and_kafka_brokers() {
    const KAFKA_ID: &str = "4";
    let _turn = one_cluster_at_a_time();
    let config = ["transaction.state.log.num.partitions=1", "offsets.topic.replication.factor=1"];
    let nodes = BrokerProcess::start_cluster(3, &config);
    let voters: Vec<String> =
        nodes.iter().enumerate().map(|(i, node)| format!("{}@127.0.0.1:{}", i + 1, node.controller_port)).collect();
    let dir = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let kafka = support::KafkaNode::start_broker(
        dir.path(),
        KAFKA_ID.parse().unwrap(),
        port,
        &voters.join(","),
        support::TEST_CLUSTER_ID,
        &format!("{}\n{}\n", config[0], config[1]),
    );
    let kafka_log = || std::fs::read_to_string(dir.path().join("kafka.log")).unwrap_or_default();
    wait_for("the Kafka broker to be unfenced", Duration::from_secs(120), || {
        kafka_log().contains("The broker has been unfenced")
    });
    let bootstrap = nodes[0].bootstrap();
    let create = |topic: &str, assignment: &str, extra: &[&str]| {
        let args = ["--bootstrap-server", &bootstrap, "--create", "--topic", topic, "--replica-assignment", assignment];
        let (ok, printed) = kafka_cli("kafka-topics", &[&args[..], extra].concat());
        assert!(ok, "{printed}");
    };
    let compacted = ["--config", "cleanup.policy=compact", "--config", "min.insync.replicas=2"];
    create("__transaction_state", "4:1:2", &compacted);
    for topic in ["mixed-ledger", "mixed-ledger-after"] {
        create(topic, "4:1:2,1:4:3,2:3:4", &["--config", "min.insync.replicas=2"]);
    }
    let kafka_bootstrap = format!("127.0.0.1:{port}");
    let summary = client_check(&["transactions", &kafka_bootstrap, "mixed-ledger", "3"]);
    assert_eq!(summary, SUMMARY, "{}", kafka_log());
    let row = describe(&bootstrap, "client-check-transactions");
    assert_eq!((row[0].as_str(), row[4].as_str()), (KAFKA_ID, "CompleteAbort"), "{row:?}");
    let epoch: i16 = row[3].parse().expect("epoch");

    // Krabka broker 1 takes __transaction_state over from Kafka's.
    let plan = dir.path().join("reassignment.json");
    let moved = r#"{"version":1,"partitions":[{"topic":"__transaction_state","partition":0,"replicas":[1,4,2]}]}"#;
    std::fs::write(&plan, moved).unwrap();
    let reassign = |action: &str| {
        let args = ["--bootstrap-server", &bootstrap, "--reassignment-json-file", plan.to_str().unwrap(), action];
        kafka_cli("kafka-reassign-partitions", &args)
    };
    let (ok, printed) = reassign("--execute");
    assert!(ok, "{printed}");
    wait_for("the reassignment to complete", Duration::from_secs(60), || {
        reassign("--verify").1.contains("Reassignment of partition __transaction_state-0 is completed")
    });
    let elect = ["--bootstrap-server", &bootstrap, "--election-type", "preferred", "--topic", "__transaction_state"];
    let (ok, printed) = kafka_cli("kafka-leader-election", &[&elect[..], &["--partition", "0"]].concat());
    assert!(ok, "{printed}");
    wait_for("krabka broker 1 to coordinate the id", Duration::from_secs(60), || {
        describe(&bootstrap, "client-check-transactions").first().map(String::as_str) == Some("1")
    });
    let summary = client_check(&["transactions", &kafka_bootstrap, "mixed-ledger-after", "3"]);
    assert_eq!(summary, SUMMARY, "{}", kafka_log());
    let row = describe(&kafka_bootstrap, "client-check-transactions");
    assert_eq!((row[0].as_str(), row[4].as_str()), ("1", "CompleteAbort"), "{row:?}");
    assert!(row[3].parse::<i16>().expect("epoch") > epoch, "went on from Kafka's epoch: {row:?}");
    drop(kafka);
}

#[test]
fn kafka_transactions_aborts_a_hanging_transaction_and_force_terminates_its_id() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "stuck", "2", "1");
    // Open for ten minutes: only the tools end it.
    assert_eq!(client_check(&["transactions-hang", &bootstrap, "stuck", "2", "600000"]), r#"{"hanging":50}"#);
    let producers = |partition: &str| {
        let args =
            ["--bootstrap-server", &bootstrap, "describe-producers", "--topic", "stuck", "--partition", partition];
        let (ok, printed) = kafka_cli("kafka-transactions", &args);
        assert!(ok, "{printed}");
        printed.lines().last().unwrap_or_default().split_whitespace().last().unwrap_or_default().to_string()
    };
    assert_eq!(producers("0"), "0", "the transaction starts at offset 0");
    // `abort` writes the marker to the partition itself (WriteTxnMarkers).
    let args =
        ["--bootstrap-server", &bootstrap, "abort", "--topic", "stuck", "--partition", "0", "--start-offset", "0"];
    let (ok, printed) = kafka_cli("kafka-transactions", &args);
    assert!(ok, "{printed}");
    assert_eq!(producers("0"), "None");
    assert_eq!(producers("1"), "0", "only the partition named is aborted");
    // forceTerminateTransaction fences the producer: the coordinator aborts
    // the whole transaction and the id starts over at a new epoch.
    let args =
        ["--bootstrap-server", &bootstrap, "forceTerminateTransaction", "--transactionalId", "client-check-hanging"];
    let (ok, printed) = kafka_cli("kafka-transactions", &args);
    assert!(ok, "{printed}");
    wait_for("the transaction to be ended", Duration::from_secs(30), || producers("1") == "None");
    let row = describe(&bootstrap, "client-check-hanging");
    assert_eq!((row[3].as_str(), row[4].as_str()), ("2", "Empty"), "{row:?}");
}

/// Runs a client program (argv) with `args`; its one-line summary.
fn run_client(argv: &[String], args: &[&str]) -> String {
    let output = Command::new(&argv[0]).args(&argv[1..]).args(args).current_dir(repo_root()).output().expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{argv:?} {args:?} failed:\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.trim().to_string()
}

#[test]
fn librdkafka_and_franz_go_transactional_producers_commit_and_abort() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    let path = |p: &str| repo_root().join(p).display().to_string();
    let librdkafka = [path("target/client-venv/bin/python"), path("tests/clients/python/check_confluent.py")];
    let franz = [path("target/client-bin/franz-check")];
    for (topic, client) in [("librdkafka", &librdkafka[..]), ("franz-go", &franz[..])] {
        create_topic(&bootstrap, topic, "3", "1");
        let summary = run_client(client, &["transactions", &bootstrap, topic, "3"]);
        // Key order differs between the two programs' JSON.
        for part in [r#""committed":100"#, r#""aborted":50"#, r#""read_committed":100"#] {
            assert!(summary.contains(part), "{topic}: {summary}");
        }
    }
}

/// Writes `lines` (`key:value`) to `topic` with Kafka's console producer.
fn produce_keyed(bootstrap: &str, topic: &str, lines: &str) {
    use std::io::Write;
    let mut child = Command::new(repo_root().join("tools/kafka-reference/kafka-cli"))
        .args(["kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic])
        .args(["--reader-property", "parse.key=true", "--reader-property", "key.separator=:"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("console producer");
    child.stdin.take().expect("stdin").write_all(lines.as_bytes()).expect("write records");
    assert!(child.wait().expect("console producer").success(), "console producer failed");
}

/// The Streams app of `streams-count`, started; returns once it processes.
fn start_streams_app(bootstrap: &str, state_dir: &std::path::Path) -> std::process::Child {
    use std::io::BufRead;
    let mut child = Command::new(repo_root().join("tests/clients/java/run"))
        .args(["streams-count", bootstrap, "words", "counts", "krabka-count"])
        .arg(state_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("streams app");
    let stdout = child.stdout.take().expect("stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let line = receiver.recv_timeout(Duration::from_secs(120)).expect("the Streams app to reach RUNNING");
    assert!(line.contains("running"), "{line}");
    // Later lines (it may report RUNNING again after a rebalance) are drained by the thread.
    child
}

/// Every count the app wrote, per key in order, read_committed.
fn counts_written(bootstrap: &str) -> std::collections::BTreeMap<String, Vec<u64>> {
    let (_, printed) = kafka_cli(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "counts",
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            "--timeout-ms",
            "4000",
            "--formatter-property",
            "print.key=true",
            "--value-deserializer",
            "org.apache.kafka.common.serialization.LongDeserializer",
        ],
    );
    let mut counts: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for line in printed.lines() {
        let mut fields = line.split('\t');
        if let (Some(key), Some(Ok(count)), None) = (fields.next(), fields.next().map(str::parse), fields.next()) {
            counts.entry(key.to_string()).or_default().push(count);
        }
    }
    counts
}

/// Kafka Streams 4.3.1 with exactly_once_v2 and a state store, killed with
/// SIGKILL while it processes and restarted: every key's counts in the
/// output are exactly 1, 2, ..., n (no update lost or repeated).
#[test]
fn a_kafka_streams_exactly_once_app_killed_mid_stream_counts_exactly() {
    let broker = BrokerProcess::start(&["transaction.abort.timed.out.transaction.cleanup.interval.ms=500"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "words", "3", "1");
    create_topic(&bootstrap, "counts", "3", "1");
    let state = tempfile::tempdir().expect("state dir");
    let kills = if std::env::var("KRABKA_LONG_TESTS").as_deref() == Ok("1") { 10 } else { 2 };
    let (keys, per_round) = (10, 400);
    let chunk = |round: usize| -> String { (0..per_round).map(|i| format!("k{}:r{round}-{i}\n", i % keys)).collect() };
    for round in 0..kills {
        let mut app = start_streams_app(&bootstrap, state.path());
        produce_keyed(&bootstrap, "words", &chunk(round));
        std::thread::sleep(Duration::from_millis(300 + 400 * (round as u64 % 3)));
        app.kill().expect("SIGKILL");
        app.wait().expect("reaped");
    }
    let mut app = start_streams_app(&bootstrap, state.path());
    produce_keyed(&bootstrap, "words", &chunk(kills));
    let expected = ((kills + 1) * per_round / keys) as u64;
    let mut counts = Default::default();
    wait_for("the app to count every record", Duration::from_secs(180), || {
        counts = counts_written(&bootstrap);
        counts.len() == keys && counts.values().all(|c| c.last() == Some(&expected))
    });
    app.kill().expect("SIGKILL");
    let _ = app.wait();
    for (key, written) in &counts {
        let exact: Vec<u64> = (1..=expected).collect();
        assert_eq!(written, &exact, "{key}: every count once, in order");
    }
}

/// A commit prepared but not completed (a partition leader frozen, so its
/// marker cannot be written) when the coordinator is killed (SIGKILL), and
/// again when it is stopped (SIGTERM, a controlled shutdown): after it
/// restarts and the leader thaws, the transaction completes and a
/// read_committed consumer reads all of it.
#[test]
fn a_commit_prepared_when_its_coordinator_dies_completes_after_the_restart() {
    let _turn = one_cluster_at_a_time();
    let mut nodes = BrokerProcess::start_cluster(3, &["transaction.state.log.replication.factor=3"]);
    let kill: fn(&mut BrokerProcess) = BrokerProcess::kill9;
    let term: fn(&mut BrokerProcess) = |node| assert!(node.stop().success(), "a clean exit after SIGTERM");
    for (topic, stop) in [("cue", kill), ("cue-term", term)] {
        commit_prepared_then_coordinator_stops(&mut nodes, topic, stop);
    }
}

fn commit_prepared_then_coordinator_stops(nodes: &mut [BrokerProcess], topic: &str, stop: fn(&mut BrokerProcess)) {
    use std::io::{BufRead, Write};
    let bootstrap = nodes.iter().map(|n| n.bootstrap()).collect::<Vec<_>>().join(",");
    // One partition on each node (RF1), so one node's freeze stops one marker.
    let args = ["--bootstrap-server", &bootstrap, "--create", "--topic", topic, "--replica-assignment", "1,2,3"];
    let (ok, printed) = kafka_cli("kafka-topics", &args);
    assert!(ok, "{printed}");
    let mut producer = Command::new(repo_root().join("tests/clients/java/run"))
        .args(["transactions-commit-on-cue", &bootstrap, topic, "3"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("producer");
    let mut lines = std::io::BufReader::new(producer.stdout.take().expect("stdout")).lines();
    assert_eq!(lines.next().expect("a line").expect("read"), r#"{"flushed":50}"#);
    let row = describe(&bootstrap, "client-check-on-cue");
    let coordinator = row[0].parse::<usize>().expect("coordinator id") - 1;
    let frozen = (coordinator + 1) % 3;
    nodes[frozen].pause();
    writeln!(producer.stdin.take().expect("stdin")).expect("cue");
    assert_eq!(lines.next().expect("a line").expect("read"), r#"{"committed":50}"#);
    assert!(producer.wait().expect("producer").success());
    let live = nodes[coordinator].bootstrap();
    assert_eq!(describe(&live, "client-check-on-cue")[4], "PrepareCommit", "the frozen leader's marker is missing");
    stop(&mut nodes[coordinator]);
    nodes[coordinator].restart();
    nodes[frozen].resume();
    wait_for("the transaction to complete", Duration::from_secs(90), || {
        describe(&bootstrap, "client-check-on-cue").get(4).map(String::as_str) == Some("CompleteCommit")
    });
    // Every partition's leader may still be settling after the restart:
    // read again until all 50 arrive (never more).
    wait_for("read_committed to read the 50 records", Duration::from_secs(90), || {
        let args = ["--bootstrap-server", &bootstrap, "--topic", topic, "--from-beginning"];
        let (_, read) = kafka_cli(
            "kafka-console-consumer",
            &[&args[..], &["--isolation-level", "read_committed", "--timeout-ms", "5000"]].concat(),
        );
        let count = read.lines().filter(|l| l.starts_with("flushed-")).count();
        assert!(count <= 50, "{read}");
        count == 50
    });
}

/// Requests Kafka refuses, refused with its error codes (over raw sockets).
#[test]
fn bad_transaction_requests_get_kafkas_errors() {
    use krabka_protocol::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use krabka_protocol::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
    use krabka_protocol::*;
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "bad", "1", "1");
    let mut client = support::RawClient::connect(&bootstrap);
    let find = FindCoordinatorRequest { key_type: 1, coordinator_keys: vec!["bad-id".into()], ..Default::default() };
    let found: FindCoordinatorResponse = client.request(ApiKey::FindCoordinator, 4, &find);
    assert_eq!(found.coordinators[0].error_code, 0, "{found:?}");
    let end = |client: &mut support::RawClient, id: &str, pid, epoch, committed| -> i16 {
        let request = EndTxnRequest {
            transactional_id: id.into(),
            producer_id: pid,
            producer_epoch: epoch,
            committed,
            ..Default::default()
        };
        client.request::<_, EndTxnResponse>(ApiKey::EndTxn, 3, &request).error_code
    };
    assert_eq!(end(&mut client, "unknown-id", 1, 0, true), ErrorCode::INVALID_PRODUCER_ID_MAPPING.code());
    let init = |client: &mut support::RawClient, timeout| -> InitProducerIdResponse {
        let request = InitProducerIdRequest {
            transactional_id: Some("bad-id".into()),
            transaction_timeout_ms: timeout,
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        };
        client.request(ApiKey::InitProducerId, 4, &request)
    };
    assert_eq!(init(&mut client, 0).error_code, ErrorCode::INVALID_TRANSACTION_TIMEOUT.code());
    assert_eq!(init(&mut client, 900_001).error_code, ErrorCode::INVALID_TRANSACTION_TIMEOUT.code());
    let producer = init(&mut client, 60_000);
    assert_eq!((producer.error_code, producer.producer_epoch), (0, 0));
    let pid = producer.producer_id;
    let add = |client: &mut support::RawClient, version, epoch, topics: &[(&str, i32)]| -> Vec<i16> {
        let topics = topics
            .iter()
            .map(|(name, p)| AddPartitionsToTxnTopic {
                name: name.to_string(),
                partitions: vec![*p],
                ..Default::default()
            })
            .collect();
        let request = AddPartitionsToTxnRequest {
            v3_and_below_transactional_id: "bad-id".into(),
            v3_and_below_producer_id: pid,
            v3_and_below_producer_epoch: epoch,
            v3_and_below_topics: topics,
            ..Default::default()
        };
        let response: AddPartitionsToTxnResponse = client.request(ApiKey::AddPartitionsToTxn, version, &request);
        response
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| t.results_by_partition.iter())
            .map(|p| p.partition_error_code)
            .collect()
    };
    // A wrong epoch: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before v2.
    assert_eq!(add(&mut client, 3, 1, &[("bad", 0)]), [ErrorCode::PRODUCER_FENCED.code()]);
    assert_eq!(add(&mut client, 1, 1, &[("bad", 0)]), [ErrorCode::INVALID_PRODUCER_EPOCH.code()]);
    // An unknown partition fails the request; the others are not attempted.
    assert_eq!(
        add(&mut client, 3, 0, &[("bad", 0), ("nowhere", 0)]),
        [ErrorCode::OPERATION_NOT_ATTEMPTED.code(), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()]
    );
    // Nothing open: a commit is an invalid transition, an abort too (before
    // transactions v2); a wrong epoch is fenced first.
    assert_eq!(end(&mut client, "bad-id", pid, 0, true), ErrorCode::INVALID_TXN_STATE.code());
    assert_eq!(end(&mut client, "bad-id", pid, 0, false), ErrorCode::INVALID_TXN_STATE.code());
    assert_eq!(end(&mut client, "bad-id", pid, 1, false), ErrorCode::PRODUCER_FENCED.code());
    // A transactional batch to a partition not in the transaction is refused
    // (KIP-890 part 1): INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v11.
    let produce = |client: &mut support::RawClient, version, sequence| -> i16 {
        use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
        use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
        let mut builder = RecordBatchBuilder::new(compression::Compression::None)
            .with_transactional(true)
            .with_producer(pid, 0, sequence);
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(b"v"), headers: &[] }).unwrap();
        let request = ProduceRequest {
            transactional_id: Some("bad-id".into()),
            acks: -1,
            timeout_ms: 10_000,
            topic_data: vec![TopicProduceData {
                name: "bad".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(builder.build().unwrap().into_bytes()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let response: ProduceResponse = client.request(ApiKey::Produce, version, &request);
        response.responses[0].partition_responses[0].error_code
    };
    assert_eq!(produce(&mut client, 9, 0), ErrorCode::INVALID_TXN_STATE.code());
    assert_eq!(produce(&mut client, 11, 0), ErrorCode::TRANSACTION_ABORTABLE.code());
    assert_eq!(add(&mut client, 3, 0, &[("bad", 0)]), [0]);
    assert_eq!(produce(&mut client, 9, 0), 0, "in the transaction now");
    assert_eq!(end(&mut client, "bad-id", pid, 0, false), 0);
    // The check is a dynamic broker config, as in Kafka: switched off
    // cluster-wide, a batch outside the transaction goes in.
    let off = ["--alter", "--entity-default", "--add-config", "transaction.partition.verification.enable=false"];
    let (ok, printed) = kafka_cli(
        "kafka-configs",
        &[&["--bootstrap-server", &bootstrap, "--entity-type", "brokers"], &off[..]].concat(),
    );
    assert!(ok, "{printed}");
    assert_eq!(produce(&mut client, 11, 1), 0, "verification off");
    // The coordinator knows nothing of that batch's transaction: a hanging
    // one, which `kafka-transactions find-hanging` finds and `abort` ends.
    let tool = |args: &[&str]| {
        let (ok, printed) = kafka_cli("kafka-transactions", &[&["--bootstrap-server", &bootstrap], args].concat());
        assert!(ok, "{args:?}: {printed}");
        printed
    };
    let hanging = tool(&["find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"]);
    let row = hanging.lines().find(|l| l.starts_with("bad ")).unwrap_or_else(|| panic!("not found: {hanging}"));
    // Topic, Partition, ProducerId, ProducerEpoch, CoordinatorEpoch, StartOffset, ...
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(fields[2], pid.to_string(), "{row}");
    tool(&["abort", "--topic", "bad", "--partition", "0", "--start-offset", fields[5]]);
    let hanging = tool(&["find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"]);
    assert!(!hanging.lines().any(|l| l.starts_with("bad ")), "{hanging}");
    // Markers from an older coordinator epoch than the partition has seen are fenced.
    let marker = |client: &mut support::RawClient, coordinator_epoch| -> i16 {
        let request = WriteTxnMarkersRequest {
            markers: vec![WritableTxnMarker {
                producer_id: 999_999,
                producer_epoch: 0,
                transaction_result: false,
                topics: vec![WritableTxnMarkerTopic {
                    name: "bad".into(),
                    partition_indexes: vec![0],
                    ..Default::default()
                }],
                coordinator_epoch,
                ..Default::default()
            }],
            ..Default::default()
        };
        let response: WriteTxnMarkersResponse = client.request(ApiKey::WriteTxnMarkers, 1, &request);
        response.markers[0].topics[0].partitions[0].error_code
    };
    assert_eq!(marker(&mut client, 5), 0);
    assert_eq!(marker(&mut client, 3), ErrorCode::TRANSACTION_COORDINATOR_FENCED.code());
    let described: DescribeTransactionsResponse = client.request(
        ApiKey::DescribeTransactions,
        0,
        &DescribeTransactionsRequest { transactional_ids: vec!["nobody".into()], ..Default::default() },
    );
    assert_eq!(described.transaction_states[0].error_code, ErrorCode::TRANSACTIONAL_ID_NOT_FOUND.code());
    let listed: ListTransactionsResponse = client.request(
        ApiKey::ListTransactions,
        2,
        &ListTransactionsRequest {
            transactional_id_pattern: Some("(".into()),
            duration_filter: -1,
            ..Default::default()
        },
    );
    assert_eq!(listed.error_code, ErrorCode::INVALID_REGULAR_EXPRESSION.code());
}

/// The classic protocol once `transaction.version` is downgraded to 0 (a
/// new cluster finalizes 2, as Kafka 4.3.1 formats one): the Java client
/// adds partitions and the group's offsets itself (AddPartitionsToTxn,
/// AddOffsetsToTxn), EndTxn below v5 keeps the epoch; the same checks hold.
#[test]
fn transactions_v0_hold_the_same_with_the_java_client() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    let (ok, printed) = kafka_cli(
        "kafka-features",
        &["--bootstrap-server", &bootstrap, "downgrade", "--feature", "transaction.version=0"],
    );
    assert!(ok && printed.contains("transaction.version was downgraded to 0"), "{printed}");
    create_topic(&bootstrap, "orders-v0", "3", "1");
    assert_eq!(client_check(&["transactions", &bootstrap, "orders-v0", "3"]), SUMMARY);
    let row = describe(&bootstrap, "client-check-transactions");
    // Only the InitProducerIds bumped the epoch.
    assert!(row[3].parse::<i16>().expect("epoch") < 8, "{row:?}");
}
