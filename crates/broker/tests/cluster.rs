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
//! A topic's partitions are spread over the three brokers, each node
//! answering for those it leads (NOT_LEADER_OR_FOLLOWER for the others),
//! and a killed broker's partitions are leaderless until it is back, with
//! every acknowledged record. A group's coordinator is the leader of its
//! `__consumer_offsets` partition: every node names it, the others answer
//! NOT_COORDINATOR, and Kafka's console consumer reads through any node.

mod support;

use std::collections::BTreeSet;
use std::time::Instant;

use krabka_protocol::offset_fetch_request::OffsetFetchRequestGroup;
use krabka_protocol::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, ApiKey, ErrorCode, FindCoordinatorRequest,
    FindCoordinatorResponse, InitProducerIdResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use support::cluster::{
    create_and_find_the_controller, create_topic, create_topic_with, describe_quorum, latest_offsets, metadata,
    metadata_log, wait_for_brokers, wait_for_topics, ELECTION_PATIENCE,
};
use support::{BrokerProcess, RawClient};

/// Waits until every node in `alive` names `leaders[p]` the leader of
/// partition p of `topic` (-1: none, with LEADER_NOT_AVAILABLE).
fn wait_for_leaders(nodes: &[BrokerProcess], alive: &[usize], topic: &str, leaders: &[i32]) {
    for &i in alive {
        support::wait_for(
            &format!("node {} to name {leaders:?} the leaders of {topic}", i + 1),
            ELECTION_PATIENCE,
            || {
                let answer = metadata(&nodes[i]);
                let found = answer.topics.iter().find(|t| t.name.as_deref() == Some(topic));
                let named: Vec<(i32, i16)> = found
                    .map(|t| t.partitions.iter().map(|p| (p.leader_id, p.error_code)).collect())
                    .unwrap_or_default();
                let expected: Vec<(i32, i16)> = leaders
                    .iter()
                    .map(|&l| (l, if l < 0 { ErrorCode::LEADER_NOT_AVAILABLE.code() } else { 0 }))
                    .collect();
                named == expected
            },
        );
    }
}

/// The leader of each partition of `topic`, as `node` names them.
fn leaders(node: &BrokerProcess, topic: &str) -> Vec<i32> {
    let answer = metadata(node);
    let found = answer.topics.iter().find(|t| t.name.as_deref() == Some(topic)).expect("topic listed");
    found.partitions.iter().map(|p| p.leader_id).collect()
}

/// The latest offset of each partition of `topic` on `node`: Some from the
/// partitions it leads, None (NOT_LEADER_OR_FOLLOWER) from the others.
fn end_offsets(node: &BrokerProcess, topic: &str, partitions: i32) -> Vec<Option<i64>> {
    let not_led = ErrorCode::NOT_LEADER_OR_FOLLOWER.code();
    let answers = latest_offsets(node, topic, partitions);
    answers
        .iter()
        .map(|p| match p.error_code {
            0 => Some(p.offset),
            code => {
                assert_eq!(code, not_led, "ListOffsets {topic}-{}", p.partition_index);
                None
            }
        })
        .collect()
}

/// Every partition of `topic` answers ListOffsets on its leader alone;
/// returns the records they hold in all.
fn records_where_placed(nodes: &[BrokerProcess], alive: &[usize], topic: &str, placed: &[i32]) -> i64 {
    let mut total = 0;
    for &i in alive {
        let offsets = end_offsets(&nodes[i], topic, placed.len() as i32);
        for (p, offset) in offsets.iter().enumerate() {
            assert_eq!(offset.is_some(), placed[p] == i as i32 + 1, "{topic}-{p} on node {}: {offsets:?}", i + 1);
            total += offset.unwrap_or(0);
        }
    }
    total
}

/// The coordinator of `group` as `node` names it (FindCoordinator v4),
/// once `__consumer_offsets` exists and its partition has a leader.
fn find_coordinator(node: &BrokerProcess, group: &str) -> i32 {
    let request = FindCoordinatorRequest { key_type: 0, coordinator_keys: vec![group.into()], ..Default::default() };
    let mut coordinator = -1;
    support::wait_for(&format!("{} to find the coordinator of {group}", node.bootstrap()), ELECTION_PATIENCE, || {
        let answer: FindCoordinatorResponse =
            RawClient::connect(&node.bootstrap()).request(ApiKey::FindCoordinator, 4, &request);
        let found = &answer.coordinators[0];
        coordinator = found.node_id;
        found.error_code == 0
    });
    coordinator
}

/// OffsetFetch v8 of `group` through `node`: the group's error code.
fn offset_fetch_error(node: &BrokerProcess, group: &str) -> i16 {
    let request = OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup { group_id: group.into(), topics: None, ..Default::default() }],
        ..Default::default()
    };
    let answer: OffsetFetchResponse = RawClient::connect(&node.bootstrap()).request(ApiKey::OffsetFetch, 8, &request);
    answer.groups[0].error_code
}

/// A group's coordinator is the leader of its `__consumer_offsets`
/// partition, which every node names alike; the others answer its
/// requests NOT_COORDINATOR. Kafka's console consumer, bootstrapped from a
/// node that does not coordinate its group, reads every record of `topic`.
fn check_group_coordinators(nodes: &[BrokerProcess], topic: &str, records: usize) {
    let group = "readers";
    let coordinator = find_coordinator(&nodes[0], group);
    for node in nodes {
        assert_eq!(find_coordinator(node, group), coordinator, "{}", node.bootstrap());
        let expected =
            if node.port == nodes[coordinator as usize - 1].port { 0 } else { ErrorCode::NOT_COORDINATOR.code() };
        assert_eq!(offset_fetch_error(node, group), expected, "{}", node.bootstrap());
    }
    let elsewhere = nodes.iter().position(|n| n.port != nodes[coordinator as usize - 1].port).unwrap();
    let bootstrap = nodes[elsewhere].bootstrap();
    let count = records.to_string();
    let (ok, printed) = support::kafka_cli(
        "kafka-console-consumer",
        &["--bootstrap-server", &bootstrap, "--topic", topic, "--group", group, "--from-beginning"]
            .into_iter()
            .chain(["--max-messages", &count, "--timeout-ms", "60000"])
            .collect::<Vec<_>>(),
    );
    assert!(ok && printed.contains(&format!("Processed a total of {records} messages")), "{printed}");
}

/// A producer id for an idempotent producer, from `node`.
fn init_producer_id(node: &BrokerProcess) -> i64 {
    let request = support::idempotent_producer_init();
    let response: InitProducerIdResponse =
        RawClient::connect(&node.bootstrap()).request(ApiKey::InitProducerId, 5, &request);
    assert_eq!(response.error_code, 0, "InitProducerId on {}", node.bootstrap());
    assert_eq!(response.producer_epoch, 0);
    response.producer_id
}

/// AllocateProducerIds sent straight to `node`'s controller listener.
fn allocate_producer_ids(node: &BrokerProcess, broker_id: i32, broker_epoch: i64) -> AllocateProducerIdsResponse {
    let request = AllocateProducerIdsRequest { broker_id, broker_epoch, ..Default::default() };
    let mut client = RawClient::connect(&node.controller_address());
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

/// DescribeQuorum: the active controller lists the three voters, each
/// caught up and fetching, with its controller endpoint; a node that does
/// not lead forwards a client's request to it and answers
/// NOT_LEADER_OR_FOLLOWER on its own controller listener (as Kafka's raft
/// client does). Kafka's `kafka-metadata-quorum` reads the answer.
fn check_describe_quorum(nodes: &[BrokerProcess], controller: usize) {
    let follower = (controller + 1) % nodes.len();
    let leader_id = controller as i32 + 1;
    let endpoints: BTreeSet<(i32, u16)> =
        nodes.iter().enumerate().map(|(i, n)| (i as i32 + 1, n.controller_port)).collect();
    let addresses =
        [nodes[controller].bootstrap(), nodes[follower].bootstrap(), nodes[controller].controller_address()];
    for address in addresses {
        support::wait_for(&format!("{address} to describe every voter fetching"), ELECTION_PATIENCE, || {
            let answer = describe_quorum(&address);
            let partition = &answer.topics[0].partitions[0];
            let voters: Vec<i32> = partition.current_voters.iter().map(|v| v.replica_id).collect();
            let listed: BTreeSet<(i32, u16)> =
                answer.nodes.iter().flat_map(|n| n.listeners.iter().map(|l| (n.node_id, l.port))).collect();
            assert_eq!(
                (partition.error_code, partition.leader_id, &voters),
                (0, leader_id, &vec![1, 2, 3]),
                "{address}"
            );
            assert_eq!(listed, endpoints, "{address}");
            partition.high_watermark > 0
                && partition.current_voters.iter().all(|v| v.log_end_offset > 0 && v.last_fetch_timestamp > 0)
        });
    }
    let refused = describe_quorum(&nodes[follower].controller_address());
    assert_eq!(refused.topics[0].partitions[0].error_code, ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
    let bootstrap = nodes[follower].bootstrap();
    let (ok, printed) =
        support::kafka_cli("kafka-metadata-quorum", &["--bootstrap-server", &bootstrap, "describe", "--status"]);
    let leader_line = printed.lines().find_map(|l| l.strip_prefix("LeaderId:")).map(str::trim);
    assert!(ok && leader_line == Some(leader_id.to_string().as_str()), "{printed}");
    let (ok, printed) =
        support::kafka_cli("kafka-metadata-quorum", &["--bootstrap-server", &bootstrap, "describe", "--replication"]);
    let role = |line: &str| line.split_whitespace().last().map(str::to_string);
    let roles: Vec<String> = printed.lines().skip(1).filter_map(role).collect();
    assert!(ok && roles == ["Leader", "Follower", "Follower"], "{printed}");
}

#[test]
fn three_combined_nodes_commit_metadata_through_the_quorum_and_fail_over() {
    // A short session (Kafka's default is 9 s) with heartbeats well within it.
    // One replica of `__consumer_offsets`, as the partitions here.
    let config =
        ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500", "offsets.topic.replication.factor=1"];
    let mut nodes = BrokerProcess::start_cluster(3, &config);
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
    // With every broker unfenced, the controller spreads a topic's
    // partitions over them, two each; every node names the leaders the
    // image holds.
    assert_eq!(create_topic_with(&nodes[first], "spread", 6), 0);
    wait_for_topics(&nodes, &all, &["before", "forwarded", "spread"]);
    let placed = leaders(&nodes[first], "spread");
    for id in 1..=3 {
        assert_eq!(placed.iter().filter(|&&l| l == id).count(), 2, "{placed:?}");
    }
    wait_for_leaders(&nodes, &all, "spread", &placed);
    let ids_before = check_producer_ids(&nodes, &all, first);
    // Kafka's own idempotent producer, bootstrapped from a node that does
    // not lead the quorum, writes to every partition's leader; each node
    // answers for the partitions it leads, NOT_LEADER_OR_FOLLOWER for the
    // others.
    let other = *all.iter().find(|&&i| i != first).unwrap();
    let (ok, printed) = support::idempotent_perf_producer(&nodes[other].bootstrap(), "spread", 300);
    assert!(ok, "{printed}");
    assert_eq!(records_where_placed(&nodes, &all, "spread", &placed), 300);

    // The active controller dies: the other two elect one of themselves,
    // which plans on an image that already holds "before".
    nodes[first].kill9();
    let rest: Vec<usize> = all.iter().copied().filter(|&i| i != first).collect();
    let started = Instant::now();
    let second = create_and_find_the_controller(&nodes, &rest, "after");
    eprintln!("node {} committed after node {} was killed, in {:?}", second + 1, first + 1, started.elapsed());
    assert_ne!(second, first);
    wait_for_topics(&nodes, &rest, &["after", "before", "forwarded", "spread"]);
    // The killed broker's session expires on the new controller: fenced,
    // no longer listed, and its partitions (their one replica) have no
    // leader; the others keep theirs.
    wait_for_brokers(&nodes, &rest, &rest, second);
    let without_first: Vec<i32> = placed.iter().map(|&l| if l == first as i32 + 1 { -1 } else { l }).collect();
    wait_for_leaders(&nodes, &rest, "spread", &without_first);

    // The killed node restarts on its log and catches up.
    nodes[first].restart();
    wait_for_topics(&nodes, &all, &["after", "before", "forwarded", "spread"]);
    // It registers again, as a new incarnation, with the new controller.
    wait_for_brokers(&nodes, &all, &all, second);
    // Unfenced, it leads its partitions again, with every record.
    wait_for_leaders(&nodes, &all, "spread", &placed);
    assert_eq!(records_where_placed(&nodes, &all, "spread", &placed), 300);
    check_group_coordinators(&nodes, "spread", 300);
    check_describe_quorum(&nodes, second);
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
