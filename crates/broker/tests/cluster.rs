//! Three combined krabka processes (broker and controller each) sharing one
//! KRaft quorum over loopback: the active controller commits a CreateTopics
//! through the quorum and every node's image follows; the others forward
//! it to the active controller in an Envelope; killing the active controller with SIGKILL elects
//! another that commits on the same image; the killed node comes back and
//! catches up; afterwards every node's metadata log holds the same bytes.
//! Every node registers its broker with the active controller (Kafka's
//! BrokerRegistration and BrokerHeartbeat on the controller listener), so
//! Metadata on any node lists all three and names the active controller;
//! the killed broker is fenced once its session expires, and listed again
//! once it restarts and registers anew (its partitions leaderless in
//! between); a cleanly stopped one asks to be fenced first. Idempotent
//! producers get ids from every node, each node's block reserved by the
//! active controller (AllocateProducerIds), before and after the failover.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use krabka_protocol::create_topics_request::CreatableTopic;
use krabka_protocol::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, ApiKey, CreateTopicsRequest, CreateTopicsResponse,
    ErrorCode, InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse,
};
use support::{BrokerProcess, RawClient};

/// Long enough for an election after a SIGKILL: Kafka's fetch timeout
/// (2 s) for the followers to notice, an election timeout (1-2 s), and a
/// margin for this shared machine.
const ELECTION_PATIENCE: Duration = Duration::from_secs(30);

fn create_topic(node: &BrokerProcess, name: &str) -> i16 {
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: 2,
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let response: CreateTopicsResponse =
        RawClient::connect(&node.bootstrap()).request(ApiKey::CreateTopics, 7, &request);
    response.topics[0].error_code
}

/// Creates `name` through the nodes of `alive` in turn until one answers
/// without error (a node that does not lead forwards it to the one that
/// does; while none leads, NOT_CONTROLLER), then returns the index of the
/// active controller, once every node of `alive` names the same one.
fn create_and_find_the_controller(nodes: &[BrokerProcess], alive: &[usize], name: &str) -> usize {
    let deadline = Instant::now() + ELECTION_PATIENCE;
    'created: loop {
        for &i in alive {
            match create_topic(&nodes[i], name) {
                0 => break 'created,
                code if code == ErrorCode::NOT_CONTROLLER.code() => {}
                // A leader not caught up yet, or one that lost its lead mid-commit.
                code if code == ErrorCode::REQUEST_TIMED_OUT.code() => eprintln!("node {}: timed out", i + 1),
                code => panic!("CreateTopics {name} on node {}: error {code}", i + 1),
            }
        }
        if Instant::now() >= deadline {
            for &i in alive {
                eprintln!("--- node {} ---\n{}", i + 1, nodes[i].log());
            }
            panic!("no node committed {name} within {ELECTION_PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut controller = 0;
    support::wait_for("every node to name one live controller", ELECTION_PATIENCE, || {
        let named: BTreeSet<i32> = alive.iter().map(|&i| metadata(&nodes[i]).controller_id).collect();
        let agreed = named.iter().next().copied().filter(|_| named.len() == 1);
        controller = agreed.map_or(-1, |id| id - 1);
        alive.iter().any(|&i| i as i32 == controller)
    });
    controller as usize
}

fn metadata(node: &BrokerProcess) -> MetadataResponse {
    RawClient::connect(&node.bootstrap()).request(
        ApiKey::Metadata,
        12,
        &MetadataRequest { topics: None, ..Default::default() },
    )
}

fn topic_names(node: &BrokerProcess) -> BTreeSet<String> {
    metadata(node).topics.iter().filter_map(|t| t.name.clone()).collect()
}

/// Waits until every node in `alive` lists exactly the brokers of `listed`
/// (indexes into `nodes`: each registered with the active controller and
/// unfenced, each on its own client port) and names `controller` (an
/// index) as the controller.
fn wait_for_brokers(nodes: &[BrokerProcess], alive: &[usize], listed: &[usize], controller: usize) {
    let wanted: BTreeSet<(i32, i32)> = listed.iter().map(|&i| (i as i32 + 1, i32::from(nodes[i].port))).collect();
    for &i in alive {
        support::wait_for(&format!("node {} to list every broker", i + 1), ELECTION_PATIENCE, || {
            let answer = metadata(&nodes[i]);
            let listed: BTreeSet<(i32, i32)> = answer.brokers.iter().map(|b| (b.node_id, b.port)).collect();
            listed == wanted && answer.controller_id == controller as i32 + 1
        });
    }
}

fn wait_for_topics(nodes: &[BrokerProcess], alive: &[usize], names: &[&str]) {
    let wanted: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    for &i in alive {
        support::wait_for(&format!("node {} to know {names:?}", i + 1), ELECTION_PATIENCE, || {
            topic_names(&nodes[i]) == wanted
        });
    }
}

/// Waits until every node in `alive` names `leader` as the leader of every
/// partition of `topic` (-1: none, with LEADER_NOT_AVAILABLE).
fn wait_for_leader(nodes: &[BrokerProcess], alive: &[usize], topic: &str, leader: i32) {
    let error = if leader < 0 { ErrorCode::LEADER_NOT_AVAILABLE.code() } else { 0 };
    for &i in alive {
        support::wait_for(&format!("node {} to name {leader} the leader of {topic}", i + 1), ELECTION_PATIENCE, || {
            let answer = metadata(&nodes[i]);
            let found = answer.topics.iter().find(|t| t.name.as_deref() == Some(topic));
            found.is_some_and(|t| t.partitions.iter().all(|p| p.leader_id == leader && p.error_code == error))
        });
    }
}

/// A producer id for an idempotent producer, from `node`.
fn init_producer_id(node: &BrokerProcess) -> i64 {
    let request = InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    };
    let response: InitProducerIdResponse =
        RawClient::connect(&node.bootstrap()).request(ApiKey::InitProducerId, 5, &request);
    assert_eq!(response.error_code, 0, "InitProducerId on {}", node.bootstrap());
    assert_eq!(response.producer_epoch, 0);
    response.producer_id
}

/// AllocateProducerIds sent straight to `node`'s controller listener.
fn allocate_producer_ids(node: &BrokerProcess, broker_id: i32, broker_epoch: i64) -> AllocateProducerIdsResponse {
    let request = AllocateProducerIdsRequest { broker_id, broker_epoch, ..Default::default() };
    let mut client = RawClient::connect(&format!("127.0.0.1:{}", node.controller_port));
    client.request(ApiKey::AllocateProducerIds, 0, &request)
}

/// Every node hands out producer ids: each from its own block, which the
/// active controller reserved for it (the other nodes ask for theirs over
/// the controller listener). The controller refuses a request naming no
/// registration, and a node that does not lead refuses all of them.
fn check_producer_ids(nodes: &[BrokerProcess], alive: &[usize], controller: usize) -> BTreeSet<i64> {
    let mut ids = BTreeSet::new();
    let mut blocks = BTreeSet::new();
    for &i in alive {
        let (first, second) = (init_producer_id(&nodes[i]), init_producer_id(&nodes[i]));
        assert_eq!(second, first + 1, "node {} hands out its block in order", i + 1);
        assert!(ids.insert(first) && ids.insert(second), "a producer id handed out twice: {ids:?}");
        assert!(blocks.insert(first / 1000), "node {} shares a block: {ids:?}", i + 1);
    }
    let stale = allocate_producer_ids(&nodes[controller], controller as i32 + 1, 0);
    assert_eq!(stale.error_code, ErrorCode::STALE_BROKER_EPOCH.code());
    for &i in alive.iter().filter(|&&i| i != controller) {
        let refused = allocate_producer_ids(&nodes[i], i as i32 + 1, 0);
        assert_eq!(refused.error_code, ErrorCode::NOT_CONTROLLER.code(), "node {}", i + 1);
    }
    ids
}

fn metadata_log(node: &BrokerProcess) -> Vec<u8> {
    let dir = node.data_dir().join("__cluster_metadata-0");
    std::fs::read(dir.join("00000000000000000000.log")).unwrap_or_default()
}

#[test]
fn three_combined_nodes_commit_metadata_through_the_quorum_and_fail_over() {
    // A short session (Kafka's default is 9 s) with heartbeats well within it.
    let mut nodes =
        BrokerProcess::start_cluster(3, &["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500"]);
    let all = [0, 1, 2];
    let first = create_and_find_the_controller(&nodes, &all, "before");
    wait_for_topics(&nodes, &all, &["before"]);
    // The nodes that do not lead forward CreateTopics to the one that does
    // (Envelope), and hand back its answer.
    let followers: Vec<usize> = all.iter().copied().filter(|&i| i != first).collect();
    assert_eq!(create_topic(&nodes[followers[0]], "forwarded"), 0);
    assert_eq!(create_topic(&nodes[followers[1]], "forwarded"), ErrorCode::TOPIC_ALREADY_EXISTS.code());
    assert_eq!(create_topic(&nodes[first], "before"), ErrorCode::TOPIC_ALREADY_EXISTS.code());
    wait_for_topics(&nodes, &all, &["before", "forwarded"]);
    // Every broker registered with the active controller, which unfenced it.
    wait_for_brokers(&nodes, &all, &all, first);
    // Every node names the partitions' leader from the image: the node
    // that placed them (the active controller, for now).
    wait_for_leader(&nodes, &all, "before", first as i32 + 1);
    let ids_before = check_producer_ids(&nodes, &all, first);
    // Kafka's own idempotent producer, bootstrapped from a node that does
    // not lead the quorum, writes to the partitions the controller leads.
    let other = *all.iter().find(|&&i| i != first).unwrap();
    let (ok, printed) = support::idempotent_perf_producer(&nodes[other].bootstrap(), "before", 200);
    assert!(ok, "{printed}");

    // The active controller dies: the other two elect one of themselves,
    // which plans on an image that already holds "before".
    nodes[first].kill9();
    let rest: Vec<usize> = all.iter().copied().filter(|&i| i != first).collect();
    let started = Instant::now();
    let second = create_and_find_the_controller(&nodes, &rest, "after");
    eprintln!("node {} committed after node {} was killed, in {:?}", second + 1, first + 1, started.elapsed());
    assert_ne!(second, first);
    wait_for_topics(&nodes, &rest, &["after", "before", "forwarded"]);
    // The killed broker's session expires on the new controller: fenced,
    // no longer listed, and its partitions have no leader.
    wait_for_brokers(&nodes, &rest, &rest, second);
    wait_for_leader(&nodes, &rest, "before", -1);

    // The killed node restarts on its log and catches up.
    nodes[first].restart();
    wait_for_topics(&nodes, &all, &["after", "before", "forwarded"]);
    // It registers again, as a new incarnation, with the new controller.
    wait_for_brokers(&nodes, &all, &all, second);
    // Unfenced, it leads its partitions again.
    wait_for_leader(&nodes, &all, "before", first as i32 + 1);
    // The survivors go on in their blocks; the restarted node abandons its
    // old one and the new controller reserves it one past every block so far.
    let ids_after = check_producer_ids(&nodes, &all, second);
    assert!(ids_after.is_disjoint(&ids_before), "{ids_before:?} then {ids_after:?}");
    let restarted = init_producer_id(&nodes[first]);
    assert!(ids_before.iter().all(|&id| id / 1000 < restarted / 1000), "{ids_before:?} then {restarted}");
    support::wait_for("every node's metadata log to hold the same bytes", ELECTION_PATIENCE, || {
        let logs: Vec<Vec<u8>> = nodes.iter().map(metadata_log).collect();
        !logs[0].is_empty() && logs.iter().all(|log| *log == logs[0])
    });
    // A clean stop of a broker that is not the controller: it asks the
    // controller to fence it (WantShutDown) before its storage closes.
    let leaving = *all.iter().find(|&&i| i != second).unwrap();
    assert!(nodes[leaving].stop().success(), "{}", nodes[leaving].log());
    assert!(
        nodes[leaving].log().contains("the active controller fenced this broker for its shutdown"),
        "{}",
        nodes[leaving].log()
    );
    let staying: Vec<usize> = all.iter().copied().filter(|&i| i != leaving).collect();
    wait_for_brokers(&nodes, &staying, &staying, second);
    for &i in &staying {
        assert!(nodes[i].stop().success(), "{}", nodes[i].log());
    }
}
