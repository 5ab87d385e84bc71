//! The layout of a production cluster: three controller-only krabka nodes
//! (`process.roles=controller`) and three broker-only ones
//! (`process.roles=broker`), each on a host of its own (network
//! namespaces, `support::netns`). The brokers observe the controllers'
//! quorum, register with the active controller and are unfenced; a
//! topic's partitions are spread over the brokers (never the
//! controllers), CreateTopics through a broker is forwarded to the active
//! controller, and Kafka's idempotent producer writes through them.
//! DescribeQuorum lists the controllers as voters and the brokers as
//! observers; the controllers register themselves (KIP-919), so
//! DescribeCluster on any controller lists them and Kafka's
//! `kafka-metadata-quorum --bootstrap-controller` works. Then the faults: the active controller killed with SIGKILL
//! (another is elected, commits, and the killed one catches up on
//! restart), and a broker paused with SIGSTOP past its session (fenced,
//! its partitions leaderless, then back with every record). At the end
//! every node's metadata log, controllers and brokers alike, holds the
//! same bytes.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use krabka_protocol::metadata_request::MetadataRequestTopic;
use krabka_protocol::{
    ApiKey, DescribeClusterRequest, DescribeClusterResponse, ErrorCode, MetadataRequest, MetadataResponse,
};
use support::cluster::{create_topic_with, describe_quorum, latest_offsets, metadata_log, ELECTION_PATIENCE};
use support::netns::TestNetwork;
use support::{BrokerProcess, RawClient};

const SESSION: [&str; 3] =
    ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500", "offsets.topic.replication.factor=1"];
const PARTITIONS: i32 = 6;
const RECORDS: usize = 300;

fn metadata(broker: &BrokerProcess) -> MetadataResponse {
    let request = MetadataRequest { topics: None, ..Default::default() };
    RawClient::connect(&broker.bootstrap()).request(ApiKey::Metadata, 12, &request)
}

/// A Metadata request for `topic` through `broker` that may auto-create
/// it: the topic's error code and its partitions' leaders.
fn metadata_creating(broker: &BrokerProcess, topic: &str) -> (i16, Vec<i32>) {
    let request = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic { name: Some(topic.into()), ..Default::default() }]),
        allow_auto_topic_creation: true,
        ..Default::default()
    };
    let answer: MetadataResponse = RawClient::connect(&broker.bootstrap()).request(ApiKey::Metadata, 12, &request);
    let topic = &answer.topics[0];
    (topic.error_code, topic.partitions.iter().map(|p| p.leader_id).collect())
}

/// The leaders of `topic`'s partitions as `broker` names them.
fn leaders(broker: &BrokerProcess, topic: &str) -> Vec<i32> {
    let answer = metadata(broker);
    let found = answer.topics.iter().find(|t| t.name.as_deref() == Some(topic));
    found.map(|t| t.partitions.iter().map(|p| p.leader_id).collect()).unwrap_or_default()
}

/// Waits until each broker of `asked` lists exactly the broker ids `listed`.
fn wait_for_listed(brokers: &[BrokerProcess], asked: &[usize], listed: &[i32]) {
    let wanted: BTreeSet<i32> = listed.iter().copied().collect();
    for &i in asked {
        support::wait_for(&format!("broker {} to list {listed:?}", i + 4), ELECTION_PATIENCE, || {
            metadata(&brokers[i]).brokers.iter().map(|b| b.node_id).collect::<BTreeSet<i32>>() == wanted
        });
    }
}

/// The active controller's id, as DescribeQuorum through `broker` names it
/// (forwarded to the active controller), once one leads.
fn active_controller(broker: &BrokerProcess) -> i32 {
    let mut leader = -1;
    support::wait_for("a controller to lead", ELECTION_PATIENCE, || {
        let answer = describe_quorum(&broker.bootstrap());
        let partition = answer.topics.first().and_then(|t| t.partitions.first());
        leader = partition.filter(|p| p.error_code == 0).map_or(-1, |p| p.leader_id);
        leader > 0
    });
    leader
}

/// The records `topic` holds, from each partition's leader.
fn records(brokers: &[BrokerProcess], topic: &str) -> i64 {
    let placed = leaders(&brokers[0], topic);
    let leader_of = |p: usize| &brokers[placed[p] as usize - 4];
    (0..placed.len()).map(|p| latest_offsets(leader_of(p), topic, PARTITIONS)[p].offset).sum()
}

/// DescribeCluster v1 on a controller listener: the error, the controller
/// id, and each registered controller's (id, port).
fn describe_controllers(controller: &BrokerProcess, endpoint_type: i8) -> (i16, i32, BTreeSet<(i32, i32)>) {
    let request = DescribeClusterRequest { endpoint_type, ..Default::default() };
    let answer: DescribeClusterResponse =
        RawClient::connect(&controller.controller_address()).request(ApiKey::DescribeCluster, 1, &request);
    let listed = answer.brokers.iter().map(|b| (b.broker_id, b.port)).collect();
    (answer.error_code, answer.controller_id, listed)
}

/// Every controller lists the three registered controllers and names the
/// active one; a request for the brokers' endpoint type is refused; Kafka's
/// `kafka-metadata-quorum --bootstrap-controller` describes the quorum.
fn check_controllers(controllers: &[BrokerProcess], active: i32) {
    let all: BTreeSet<(i32, i32)> = (1..=3).map(|id| (id, 9093)).collect();
    for controller in controllers {
        support::wait_for("every controller to be registered", ELECTION_PATIENCE, || {
            describe_controllers(controller, 2) == (0, active, all.clone())
        });
        let (refused, ..) = describe_controllers(controller, 1);
        assert_eq!(refused, ErrorCode::MISMATCHED_ENDPOINT_TYPE.code());
    }
    let bootstrap = controllers[0].controller_address();
    let (ok, printed) =
        support::kafka_cli("kafka-metadata-quorum", &["--bootstrap-controller", &bootstrap, "describe", "--status"]);
    let leader_line = printed.lines().find_map(|l| l.strip_prefix("LeaderId:")).map(str::trim);
    assert!(ok && leader_line == Some(active.to_string().as_str()), "{printed}");
}

/// Creates `topic` through `broker` (forwarded to the active controller),
/// retrying while no controller leads.
fn create(broker: &BrokerProcess, topic: &str) {
    support::wait_for(&format!("{topic} to be created"), ELECTION_PATIENCE, || {
        create_topic_with(broker, topic, PARTITIONS) == 0
    });
}

#[test]
fn three_controllers_and_three_brokers_on_their_own_hosts() {
    // Declared first, so it goes last: the processes stop before their hosts.
    let network = TestNetwork::create(6);
    let (controller_hosts, broker_hosts) = network.hosts().split_at(3);
    let (mut controllers, mut brokers) =
        BrokerProcess::start_split_cluster_on(controller_hosts, broker_hosts, &SESSION);
    let all = [0, 1, 2];
    wait_for_listed(&brokers, &all, &[4, 5, 6]);

    // Partitions go to the brokers, two each, never to a controller.
    create(&brokers[0], "orders");
    support::wait_for("every broker to know orders", ELECTION_PATIENCE, || {
        all.iter().all(|&i| leaders(&brokers[i], "orders").len() == PARTITIONS as usize)
    });
    let placed = leaders(&brokers[1], "orders");
    for id in 4..=6 {
        assert_eq!(placed.iter().filter(|&&l| l == id).count(), 2, "{placed:?}");
    }
    // A Metadata request through a broker auto-creates a topic: answered
    // at once (not there yet), created through the active controller.
    let (code, _) = metadata_creating(&brokers[1], "auto");
    assert_eq!(code, ErrorCode::LEADER_NOT_AVAILABLE.code());
    support::wait_for("the auto-created topic to have a broker leading it", ELECTION_PATIENCE, || {
        let (code, leaders) = metadata_creating(&brokers[2], "auto");
        code == 0 && leaders.len() == 1 && leaders[0] >= 4
    });
    let (ok, printed) = support::idempotent_perf_producer(&brokers[2].bootstrap(), "orders", RECORDS);
    assert!(ok, "{printed}");
    assert_eq!(records(&brokers, "orders"), RECORDS as i64);

    // The controllers vote; the brokers observe.
    let answer = describe_quorum(&brokers[0].bootstrap());
    let partition = &answer.topics[0].partitions[0];
    let voters: Vec<i32> = partition.current_voters.iter().map(|v| v.replica_id).collect();
    let observers: BTreeSet<i32> = partition.observers.iter().map(|o| o.replica_id).collect();
    assert_eq!((voters, observers), (vec![1, 2, 3], BTreeSet::from([4, 5, 6])), "{answer:?}");

    // The controllers register themselves (KIP-919): DescribeCluster on a
    // controller lists them, and Kafka's tools bootstrap from them.
    let first = active_controller(&brokers[0]);
    check_controllers(&controllers, first);

    // The active controller is killed: another leads and commits.
    controllers[first as usize - 1].kill9();
    let killed_at = Instant::now();
    create(&brokers[1], "after-kill");
    let second = active_controller(&brokers[1]);
    eprintln!("kill -9 of controller {first}: controller {second} committed in {:?}", killed_at.elapsed());
    assert_ne!(second, first);
    controllers[first as usize - 1].restart();

    // A broker freezes past its session: fenced, its partitions leaderless;
    // resumed, it leads them again with every record.
    let frozen = 2;
    brokers[frozen].pause();
    let paused_at = Instant::now();
    wait_for_listed(&brokers, &[0, 1], &[4, 5]);
    let without: Vec<i32> = placed.iter().map(|&l| if l == 6 { -1 } else { l }).collect();
    support::wait_for("broker 6's partitions to be leaderless", ELECTION_PATIENCE, || {
        leaders(&brokers[0], "orders") == without
    });
    std::thread::sleep(Duration::from_secs(6).saturating_sub(paused_at.elapsed()));
    brokers[frozen].resume();
    wait_for_listed(&brokers, &all, &[4, 5, 6]);
    support::wait_for("broker 6 to lead its partitions again", ELECTION_PATIENCE, || {
        all.iter().all(|&i| leaders(&brokers[i], "orders") == placed)
    });
    assert_eq!(records(&brokers, "orders"), RECORDS as i64);

    support::wait_for("every node's metadata log to hold the same bytes", ELECTION_PATIENCE, || {
        let logs: Vec<Vec<u8>> = controllers.iter().chain(&brokers).map(metadata_log).collect();
        !logs[0].is_empty() && logs.iter().all(|log| *log == logs[0])
    });
    for node in brokers.iter_mut().chain(controllers.iter_mut()) {
        assert!(node.stop().success(), "{}", node.log());
    }
}
