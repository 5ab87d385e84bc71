//! Dynamic KRaft quorums (KIP-853), as an operator runs them: the first
//! controller formatted `--standalone`, the others `--no-initial-controllers`
//! (krabka-format's code, or Kafka 4.3.1's own storage tool), every node
//! finding the quorum through `controller.quorum.bootstrap.servers`, and
//! controllers added and removed with Apache Kafka 4.3.1's
//! `kafka-metadata-quorum add-controller` / `remove-controller`
//! (AddRaftVoter, RemoveRaftVoter), or joining by themselves
//! (`controller.quorum.auto.join.enable`). Real processes on loopback: krabka
//! nodes, and Kafka 4.3.1 controllers in the interop tests. A voter set
//! grown to three survives the SIGKILL of its leader; a removed leader
//! hands over and goes on as an observer; a krabka controller joins a
//! Kafka quorum and a Kafka controller a krabka one, and every node's
//! metadata log ends up the same bytes. A static quorum
//! (`controller.quorum.voters`) becomes a dynamic one through
//! `kafka-features upgrade --feature kraft.version=1`.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use krabka_format::dynamic_quorum::QuorumFlags;
use krabka_protocol::{DescribeQuorumResponse, ErrorCode};
use support::cluster::{create_topic, describe_quorum, metadata_log, ELECTION_PATIENCE};
use support::{free_port, kafka_cli, wait_for, BrokerProcess, KafkaNode, TEST_CLUSTER_ID};

fn standalone() -> QuorumFlags {
    QuorumFlags { standalone: true, ..Default::default() }
}

fn joining() -> QuorumFlags {
    QuorumFlags { no_initial_controllers: true, ..Default::default() }
}

/// The leader and voters DescribeQuorum at `address` reports, when it
/// answers without an error (it leads, or forwards to the leader).
fn quorum(address: &str) -> Option<(i32, BTreeSet<i32>, BTreeSet<i32>)> {
    // A node still starting (or killed) is not listening yet.
    std::net::TcpStream::connect(address).ok()?;
    let answer: DescribeQuorumResponse = describe_quorum(address);
    let partition = answer.topics.first()?.partitions.first()?;
    (partition.error_code == ErrorCode::NONE.code()).then(|| {
        let ids = |replicas: &[krabka_protocol::describe_quorum_response::ReplicaState]| {
            replicas.iter().map(|r| r.replica_id).collect::<BTreeSet<i32>>()
        };
        (partition.leader_id, ids(&partition.current_voters), ids(&partition.observers))
    })
}

/// Waits until the leader reached at one of `addresses` reports exactly
/// `voters`; its id.
fn wait_for_voters(addresses: &[String], voters: &[i32]) -> i32 {
    let wanted: BTreeSet<i32> = voters.iter().copied().collect();
    let mut leader = -1;
    wait_for(&format!("the voters {voters:?}"), ELECTION_PATIENCE, || {
        addresses.iter().filter_map(|a| quorum(a)).any(|(id, found, _)| {
            leader = id;
            found == wanted && voters.contains(&id)
        })
    });
    leader
}

/// `kafka-metadata-quorum --bootstrap-controller <at> add-controller`, for
/// the controller whose config is `config`: what it printed.
fn add_controller(at: &str, config: &Path) -> String {
    let config = config.to_str().unwrap();
    let (ok, out) = kafka_cli(
        "kafka-metadata-quorum",
        &["--bootstrap-controller", at, "--command-config", config, "add-controller"],
    );
    assert!(ok, "add-controller failed: {out}");
    out
}

fn remove_controller(at: &str, id: i32, directory_id: &str) -> String {
    let id = id.to_string();
    let args = ["--bootstrap-controller", at, "remove-controller", "--controller-id", &id];
    let (ok, out) =
        kafka_cli("kafka-metadata-quorum", &[&args[..], &["--controller-directory-id", directory_id]].concat());
    assert!(ok, "remove-controller failed: {out}");
    out
}

/// Waits until every file of `logs` holds the same bytes (the quorum is
/// quiet: nothing is being written).
fn wait_for_identical_logs(what: &str, logs: &[&dyn Fn() -> Vec<u8>]) {
    wait_for(what, ELECTION_PATIENCE, || {
        let first = logs[0]();
        !first.is_empty() && logs[1..].iter().all(|log| log() == first)
    });
}

#[test]
fn controllers_join_and_leave_a_krabka_quorum_through_kafkas_tool() {
    let _serial = serial();
    let ports = [free_port(), free_port(), free_port()];
    let bootstrap = ports.map(|p| format!("127.0.0.1:{p}")).join(",");
    let mut first = BrokerProcess::start_dynamic(1, "broker,controller", ports[0], &bootstrap, &standalone(), &[]);
    let second = BrokerProcess::start_dynamic(2, "controller", ports[1], &bootstrap, &joining(), &[]);
    // Node 3 joins by itself (`controller.quorum.auto.join.enable`).
    let auto_join = ["controller.quorum.auto.join.enable=true"];
    let third = BrokerProcess::start_dynamic(3, "controller", ports[2], &bootstrap, &joining(), &auto_join);
    let addresses: Vec<String> = [&first, &second, &third].iter().map(|n| n.controller_address()).collect();
    assert_eq!(wait_for_voters(&addresses, &[1]), 1);
    // Node 3 adds itself; node 2 found the leader through the bootstrap
    // servers and follows it as an observer until Kafka's tool adds it.
    assert_eq!(wait_for_voters(&addresses, &[1, 3]), 1);
    wait_for("node 2 to observe", ELECTION_PATIENCE, || {
        quorum(&addresses[0]).is_some_and(|(_, _, observers)| observers.contains(&2))
    });
    let out = add_controller(&addresses[0], &second.dir.path().join("server.properties"));
    assert!(out.contains("Added controller 2"), "{out}");
    assert_eq!(wait_for_voters(&addresses, &[1, 2, 3]), 1);
    assert_eq!(create_topic(&first, "before"), 0);

    // Three voters survive their leader's SIGKILL; it comes back a follower.
    first.kill9();
    let leader = wait_for_voters(&addresses[1..], &[1, 2, 3]);
    assert!(leader == 2 || leader == 3, "node {leader} leads");
    first.restart();
    assert_eq!(create_topic(&first, "after"), 0, "forwarded to the new active controller");

    // Node 1 leaves the voters and goes on as a broker observing them.
    let directory_id = first.directory_id().to_string();
    let out = remove_controller(&addresses[leader as usize - 1], 1, &directory_id);
    assert!(out.contains("Removed"), "{out}");
    wait_for_voters(&addresses[1..], &[2, 3]);
    assert_eq!(create_topic(&first, "third"), 0);
    wait_for("node 1 to observe", ELECTION_PATIENCE, || {
        quorum(&addresses[leader as usize - 1]).is_some_and(|(_, _, observers)| observers.contains(&1))
    });
    let nodes = [&first, &second, &third];
    let logs: Vec<Box<dyn Fn() -> Vec<u8>>> =
        nodes.iter().map(|n| Box::new(move || metadata_log(n)) as Box<dyn Fn() -> Vec<u8>>).collect();
    let logs: Vec<&dyn Fn() -> Vec<u8>> = logs.iter().map(|l| l.as_ref()).collect();
    wait_for_identical_logs("every node's metadata log to agree", &logs);
}

/// `kafka-features <args>` against `bootstrap`: whether it succeeded, and
/// what it printed.
fn kafka_features(bootstrap: &str, args: &[&str]) -> (bool, String) {
    kafka_cli("kafka-features", &[&["--bootstrap-server", bootstrap][..], args].concat())
}

/// `kraft.version`'s finalized level, as `kafka-features describe` prints it.
fn finalized_kraft_version(bootstrap: &str) -> String {
    let (ok, out) = kafka_features(bootstrap, &["describe"]);
    let line = out.lines().find(|l| l.starts_with("Feature: kraft.version")).filter(|_| ok);
    let line = line.unwrap_or_else(|| panic!("no kraft.version in: {out}"));
    assert!(
        line.split_whitespace().collect::<Vec<_>>().windows(2).any(|w| w == ["SupportedMaxVersion:", "1"]),
        "{line}"
    );
    let level = line.split("FinalizedVersionLevel:").nth(1).and_then(|rest| rest.split_whitespace().next());
    level.unwrap_or_else(|| panic!("no level in: {line}")).to_string()
}

/// `kafka-features <via...> upgrade --feature kraft.version=1`, repeated
/// until accepted; every refusal must say one of `waiting`. How many
/// refusals there were.
fn upgrade_kraft_version(via: &[&str], waiting: &[&str]) -> usize {
    let mut refusals = 0;
    wait_for("the kraft.version upgrade", ELECTION_PATIENCE * 2, || {
        let (ok, out) = kafka_cli("kafka-features", &[via, &["upgrade", "--feature", "kraft.version=1"]].concat());
        if !ok {
            refusals += 1;
            assert!(waiting.iter().any(|w| out.contains(w)), "{out}");
        }
        ok
    });
    eprintln!("upgraded after {refusals} refusals");
    refusals
}

/// `id@127.0.0.1:port,...` for voters 1, 2, ... on `ports`.
fn static_voters(ports: &[u16]) -> String {
    let voters: Vec<String> = ports.iter().enumerate().map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1)).collect();
    voters.join(",")
}

/// Waits until krabka's metadata log and those of the Kafka controllers in
/// `kafka_dirs` are the same bytes, then checks Kafka logged no error.
fn assert_logs_agree_with_kafka(krabka: &BrokerProcess, kafka_dirs: &[tempfile::TempDir]) {
    let readers: Vec<Box<dyn Fn() -> Vec<u8>>> = kafka_dirs
        .iter()
        .map(|d| {
            let segment = kafka_segment(d.path());
            Box::new(move || std::fs::read(&segment).unwrap_or_default()) as Box<dyn Fn() -> Vec<u8>>
        })
        .chain(std::iter::once(Box::new(|| metadata_log(krabka)) as Box<dyn Fn() -> Vec<u8>>))
        .collect();
    let logs: Vec<&dyn Fn() -> Vec<u8>> = readers.iter().map(|l| l.as_ref()).collect();
    wait_for_identical_logs("Kafka's and krabka's metadata logs to agree", &logs);
    for dir in kafka_dirs {
        assert_no_kafka_errors(dir.path());
    }
}

#[test]
fn a_static_krabka_quorum_becomes_dynamic_through_kafkas_tool() {
    let _serial = serial();
    // `controller.quorum.voters`: kraft.version 0.
    let nodes = BrokerProcess::start_cluster(3, &[]);
    let bootstrap = nodes[0].bootstrap();
    assert_eq!(finalized_kraft_version(&bootstrap), "0");
    assert_eq!(create_topic(&nodes[0], "static"), 0);
    // Each follower tells the leader its directory id and listeners
    // (UpdateRaftVoter at kraft.version 0); until both have, the upgrade is
    // refused as Kafka refuses it.
    upgrade_kraft_version(&["--bootstrap-server", &bootstrap], &["because not all of the voters support it"]);
    assert_eq!(finalized_kraft_version(&bootstrap), "1");
    // A controller's listener lists the finalized levels too.
    let controller = nodes[1].controller_address();
    let (ok, out) = kafka_cli("kafka-features", &["--bootstrap-controller", &controller, "describe"]);
    let finalized = |feature: &str| {
        let line = out.lines().find(|l| l.starts_with(&format!("Feature: {feature} ")));
        line.and_then(|l| l.split("FinalizedVersionLevel:").nth(1)?.split_whitespace().next().map(str::to_string))
    };
    assert!(ok && finalized("kraft.version").as_deref() == Some("1"), "{out}");
    assert_eq!(finalized("metadata.version").as_deref(), Some("4.3-IV0"), "{out}");
    let (ok, out) = kafka_features(&bootstrap, &["downgrade", "--feature", "kraft.version=0"]);
    assert!(!ok && out.contains("Can't downgrade the version of this feature."), "{out}");

    // The voters are in the log now, each with its own directory id.
    let addresses: Vec<String> = nodes.iter().map(|n| n.controller_address()).collect();
    let leader = wait_for_voters(&addresses, &[1, 2, 3]);
    let answer = describe_quorum(&addresses[leader as usize - 1]);
    let voters = &answer.topics[0].partitions[0].current_voters;
    for node in &nodes {
        let id = node.directory_id();
        assert!(voters.iter().any(|v| v.replica_directory_id == id), "{id:?} not among {voters:?}");
    }
    // A dynamic quorum: a voter can leave (RemoveRaftVoter), and the rest
    // go on committing.
    let leaving = if leader == 3 { 2 } else { 3 };
    let directory_id = nodes[leaving as usize - 1].directory_id().to_string();
    let out = remove_controller(&addresses[leader as usize - 1], leaving, &directory_id);
    assert!(out.contains("Removed"), "{out}");
    let remaining: Vec<i32> = [1, 2, 3].into_iter().filter(|&id| id != leaving).collect();
    wait_for_voters(&addresses, &remaining);
    assert_eq!(create_topic(&nodes[0], "dynamic"), 0);
    let logs: Vec<Box<dyn Fn() -> Vec<u8>>> =
        nodes.iter().map(|n| Box::new(move || metadata_log(n)) as Box<dyn Fn() -> Vec<u8>>).collect();
    let logs: Vec<&dyn Fn() -> Vec<u8>> = logs.iter().map(|l| l.as_ref()).collect();
    wait_for_identical_logs("every node's metadata log to agree", &logs);
}

#[test]
fn a_kafka_leader_makes_a_static_quorum_with_a_krabka_voter_dynamic() {
    let _serial = serial();
    let ports = [free_port(), free_port(), free_port()];
    let voters = static_voters(&ports);
    let kafka_dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    // Kafka's controllers time out first and lead; krabka's follows, sends
    // Kafka's leader UpdateRaftVoter at kraft.version 0 and registers.
    let quick = "controller.quorum.election.timeout.ms=500\n";
    let _kafka: Vec<KafkaNode> = (0..2)
        .map(|i| {
            KafkaNode::start_controller(kafka_dirs[i].path(), i as i32 + 1, ports[i], &voters, TEST_CLUSTER_ID, quick)
        })
        .collect();
    let krabka =
        BrokerProcess::start_static_controller(3, ports[2], &voters, &["controller.quorum.election.timeout.ms=20000"]);
    let kafka_address = format!("127.0.0.1:{}", ports[0]);
    let waiting = ["not all of the voters support it", "has not registered", "Timed out", "NOT_CONTROLLER"];
    upgrade_kraft_version(&["--bootstrap-controller", &kafka_address], &waiting);
    // Kafka's leader wrote the voter set, krabka's directory id in it.
    let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let leader = wait_for_voters(&addresses[..2], &[1, 2, 3]);
    assert!(leader == 1 || leader == 2, "node {leader} leads");
    let answer = describe_quorum(&addresses[leader as usize - 1]);
    let listed = &answer.topics[0].partitions[0].current_voters;
    assert!(listed.iter().any(|v| v.replica_id == 3 && v.replica_directory_id == krabka.directory_id()), "{listed:?}");
    assert_logs_agree_with_kafka(&krabka, &kafka_dirs);
}

#[test]
fn a_krabka_leader_makes_a_static_quorum_with_kafka_voters_dynamic() {
    let _serial = serial();
    let ports = [free_port(), free_port(), free_port()];
    let voters = static_voters(&ports);
    // krabka's controller times out first and leads; Kafka's follow, send
    // it UpdateRaftVoter at kraft.version 0 and register with it.
    let kafka_dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let slow = "controller.quorum.election.timeout.ms=20000\n";
    let _kafka: Vec<KafkaNode> = (0..2)
        .map(|i| {
            let id = i as i32 + 2;
            KafkaNode::start_controller(kafka_dirs[i].path(), id, ports[i + 1], &voters, TEST_CLUSTER_ID, slow)
        })
        .collect();
    // Started once Kafka's are up: it serves once the quorum has a leader.
    let quick = ["controller.quorum.election.timeout.ms=300"];
    let krabka = BrokerProcess::start_static_controller(1, ports[0], &voters, &quick);
    let krabka_address = krabka.controller_address();
    assert_eq!(wait_for_voters(std::slice::from_ref(&krabka_address), &[1, 2, 3]), 1);
    let waiting = ["not all of the voters support it", "has not registered"];
    upgrade_kraft_version(&["--bootstrap-controller", &krabka_address], &waiting);
    let answer = describe_quorum(&krabka_address);
    let listed = &answer.topics[0].partitions[0].current_voters;
    assert!(listed.iter().all(|v| v.replica_directory_id != krabka_protocol::Uuid::ZERO), "{listed:?}");
    assert_logs_agree_with_kafka(&krabka, &kafka_dirs);
}

#[test]
fn a_controller_with_a_replaced_disk_rejoins_by_itself() {
    let _serial = serial();
    let ports = [free_port(), free_port(), free_port()];
    let bootstrap = ports.map(|p| format!("127.0.0.1:{p}")).join(",");
    let auto_join = ["controller.quorum.auto.join.enable=true"];
    let first = BrokerProcess::start_dynamic(1, "broker,controller", ports[0], &bootstrap, &standalone(), &auto_join);
    let _second = BrokerProcess::start_dynamic(2, "controller", ports[1], &bootstrap, &joining(), &auto_join);
    let third = BrokerProcess::start_dynamic(3, "controller", ports[2], &bootstrap, &joining(), &auto_join);
    let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    assert_eq!(wait_for_voters(&addresses, &[1, 2, 3]), 1);
    assert_eq!(create_topic(&first, "before"), 0);
    // Node 3's disk is lost: a fresh directory, formatted -N, a new
    // directory id. It must not vote as the old voter 3 (it lacks its log):
    // it asks the leader to remove that voter, then to add itself.
    let old_directory = third.directory_id();
    drop(third);
    let third = BrokerProcess::start_dynamic(3, "controller", ports[2], &bootstrap, &joining(), &auto_join);
    let new_directory = third.directory_id();
    assert_ne!(old_directory, new_directory);
    wait_for("voter 3 with its new directory", ELECTION_PATIENCE * 2, || {
        let answer = describe_quorum(&addresses[0]);
        let voters = &answer.topics[0].partitions[0].current_voters;
        voters.len() == 3 && voters.iter().any(|v| v.replica_id == 3 && v.replica_directory_id == new_directory)
    });
    assert_eq!(create_topic(&first, "after"), 0);
}

/// A Kafka controller's metadata segment.
fn kafka_segment(dir: &Path) -> PathBuf {
    dir.join("logs/__cluster_metadata-0/00000000000000000000.log")
}

#[test]
fn krabka_controllers_join_a_kafka_quorum_and_take_it_over() {
    let _serial = serial();
    let ports = [free_port(), free_port(), free_port()];
    let bootstrap = ports.map(|p| format!("127.0.0.1:{p}")).join(",");
    let kafka_dir = tempfile::tempdir().unwrap();
    let kafka = KafkaNode::start_dynamic_controller(
        kafka_dir.path(),
        (1, ports[0]),
        &bootstrap,
        TEST_CLUSTER_ID,
        "--standalone",
        "",
    );
    let kafka_address = format!("127.0.0.1:{}", ports[0]);
    wait_for_voters(std::slice::from_ref(&kafka_address), &[1]);
    let second = BrokerProcess::start_dynamic(2, "controller", ports[1], &bootstrap, &joining(), &[]);
    // Kafka's leader probes each krabka node's ApiVersions for its
    // kraft.version range and checks it caught up before adding it: node
    // 2 through Kafka's tool, node 3 asking by itself (AddRaftVoter v1,
    // `controller.quorum.auto.join.enable`).
    let out = add_controller(&kafka_address, &second.dir.path().join("server.properties"));
    assert!(out.contains("Added controller 2"), "{out}");
    let auto_join = ["controller.quorum.auto.join.enable=true"];
    let third = BrokerProcess::start_dynamic(3, "controller", ports[2], &bootstrap, &joining(), &auto_join);
    let addresses = [kafka_address.clone(), second.controller_address(), third.controller_address()];
    assert_eq!(wait_for_voters(&addresses, &[1, 2, 3]), 1);
    // Kafka's leader killed: the krabka voters elect one of themselves.
    drop(kafka);
    let leader = wait_for_voters(&addresses[1..], &[1, 2, 3]);
    assert!(leader == 2 || leader == 3, "node {leader} leads");
    // Back, Kafka follows the krabka leader, and all three logs agree.
    let _kafka = KafkaNode::start_dynamic_controller(
        kafka_dir.path(),
        (1, ports[0]),
        &bootstrap,
        TEST_CLUSTER_ID,
        "--standalone",
        "",
    );
    let segment = kafka_segment(kafka_dir.path());
    let kafka_log = move || std::fs::read(&segment).unwrap_or_default();
    let (second_log, third_log) = (|| metadata_log(&second), || metadata_log(&third));
    wait_for_identical_logs("Kafka's and krabka's metadata logs to agree", &[&kafka_log, &second_log, &third_log]);
    assert_no_kafka_errors(kafka_dir.path());
}

#[test]
fn a_kafka_controller_joins_a_krabka_quorum_by_itself() {
    let _serial = serial();
    let ports = [free_port(), free_port()];
    let bootstrap = ports.map(|p| format!("127.0.0.1:{p}")).join(",");
    let first = BrokerProcess::start_dynamic(1, "broker,controller", ports[0], &bootstrap, &standalone(), &[]);
    let kafka_dir = tempfile::tempdir().unwrap();
    // Kafka's controller sends krabka's leader AddRaftVoter v1 with
    // AckWhenCommitted false, its own key and listeners.
    let auto_join = "controller.quorum.auto.join.enable=true\n";
    let flag = "--no-initial-controllers";
    let _kafka = KafkaNode::start_dynamic_controller(
        kafka_dir.path(),
        (2, ports[1]),
        &bootstrap,
        TEST_CLUSTER_ID,
        flag,
        auto_join,
    );
    let krabka_address = first.controller_address();
    assert_eq!(wait_for_voters(std::slice::from_ref(&krabka_address), &[1, 2]), 1);
    assert_eq!(create_topic(&first, "with-kafka"), 0, "committed by both voters");
    assert_no_kafka_errors(kafka_dir.path());
}

#[test]
fn a_kafka_controller_joins_a_krabka_quorum() {
    let _serial = serial();
    let ports = [free_port(), free_port()];
    let bootstrap = ports.map(|p| format!("127.0.0.1:{p}")).join(",");
    let first = BrokerProcess::start_dynamic(1, "broker,controller", ports[0], &bootstrap, &standalone(), &[]);
    let kafka_dir = tempfile::tempdir().unwrap();
    let _kafka = KafkaNode::start_dynamic_controller(
        kafka_dir.path(),
        (2, ports[1]),
        &bootstrap,
        TEST_CLUSTER_ID,
        "--no-initial-controllers",
        "",
    );
    // Kafka's controller finds krabka's leader through the bootstrap
    // servers, fetches as an observer, and krabka's leader adds it after
    // probing its kraft.version range.
    let krabka_address = first.controller_address();
    wait_for("Kafka's controller to observe", ELECTION_PATIENCE, || {
        quorum(&krabka_address).is_some_and(|(_, _, observers)| observers.contains(&2))
    });
    let out = add_controller(&krabka_address, &kafka_dir.path().join("server.properties"));
    assert!(out.contains("Added controller 2"), "{out}");
    assert_eq!(wait_for_voters(std::slice::from_ref(&krabka_address), &[1, 2]), 1);
    assert_eq!(create_topic(&first, "with-kafka"), 0, "committed by both voters");
    let segment = kafka_segment(kafka_dir.path());
    let kafka_log = move || std::fs::read(&segment).unwrap_or_default();
    let krabka_log = || metadata_log(&first);
    wait_for_identical_logs("Kafka's and krabka's metadata logs to agree", &[&krabka_log, &kafka_log]);
    assert_no_kafka_errors(kafka_dir.path());
}

/// No Kafka node logged an error (Kafka's own logs of refused requests
/// would show a wire difference).
fn assert_no_kafka_errors(dir: &Path) {
    let log = std::fs::read_to_string(dir.join("kafka.log")).unwrap_or_default();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "Kafka logged errors:\n{}", errors.join("\n"));
}

/// The tests start several JVMs and nodes each: one at a time on this
/// two-core machine, so elections are not starved.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}
