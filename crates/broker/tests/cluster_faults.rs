//! Three combined krabka nodes, each on a host of its own (a network
//! namespace with its own address, `support::netns`), through the faults
//! a real network and real machines bring:
//!
//! - the active controller cut off from the other two (iptables in its
//!   namespace): it steps down once a majority stopped fetching from it,
//!   the majority elects another that commits, and after the link heals
//!   the cut-off node truncates whatever it appended alone and catches up;
//! - the active controller killed with SIGKILL: the other two elect one of
//!   themselves, and the killed node restarts and catches up;
//! - a broker paused with SIGSTOP for longer than its session: the active
//!   controller fences it (no longer listed), and once resumed it
//!   heartbeats again and is unfenced.
//!
//! After every fault, every node lists every topic committed so far and
//! no other, and every node's metadata log holds the same bytes: no
//! committed record lost, none diverging. The times from each fault to the
//! new leader's first commit are printed (docs/reliability.md keeps them).

mod support;

use std::time::{Duration, Instant};

use krabka_protocol::ErrorCode;
use support::cluster::{
    create_and_find_the_controller, describe_quorum, metadata, metadata_log, wait_for_brokers, wait_for_topics,
    ELECTION_PATIENCE,
};
use support::netns::TestNetwork;
use support::BrokerProcess;

/// A session shorter than Kafka's 9 s default, heartbeats well within it.
const SESSION: [&str; 2] = ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500"];
/// How long a pause lasts: past the session timeout, with a margin.
const PAUSE: Duration = Duration::from_secs(6);
/// The longest a fault may take to be repaired by an election and a
/// commit: Kafka's fetch timeout (2 s) and election timeout (1-2 s), a
/// pre-vote and a vote round, and a wide margin for this shared 2-core
/// machine (seen: 3-5 s).
const ELECTION_BOUND: Duration = Duration::from_secs(20);

/// Waits until every node of `alive` lists exactly `topics` and every
/// node of `nodes` (all of them alive) holds the same metadata log bytes.
fn wait_for_agreement(nodes: &[BrokerProcess], alive: &[usize], topics: &[String]) {
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    wait_for_topics(nodes, alive, &names);
    support::wait_for("every node's metadata log to hold the same bytes", ELECTION_PATIENCE, || {
        let logs: Vec<Vec<u8>> = alive.iter().map(|&i| metadata_log(&nodes[i])).collect();
        !logs[0].is_empty() && logs.iter().all(|log| *log == logs[0])
    });
}

/// Commits topic `name` through the nodes of `alive`, notes it in
/// `topics`, and returns the active controller's index.
fn commit(nodes: &[BrokerProcess], alive: &[usize], name: &str, topics: &mut Vec<String>) -> usize {
    let controller = create_and_find_the_controller(nodes, alive, name);
    topics.push(name.to_string());
    topics.sort();
    controller
}

fn others(count: usize, but: usize) -> Vec<usize> {
    (0..count).filter(|&i| i != but).collect()
}

#[test]
fn a_quorum_on_three_hosts_survives_a_cut_link_a_kill_and_a_pause() {
    // Declared first, so it goes last: the processes stop before their hosts.
    let network = TestNetwork::create(3);
    let mut nodes = BrokerProcess::start_cluster_on(network.hosts(), &SESSION);
    let all = [0, 1, 2];
    let mut topics = Vec::new();
    let first = commit(&nodes, &all, "before-faults", &mut topics);
    wait_for_brokers(&nodes, &all, &all, first);
    wait_for_agreement(&nodes, &all, &topics);

    // The active controller loses its links to the other two hosts.
    network.isolate(first);
    let cut_at = Instant::now();
    support::wait_for("the cut-off leader to step down", ELECTION_PATIENCE, || {
        let answer = describe_quorum(&nodes[first].controller_address());
        answer.topics[0].partitions[0].error_code == ErrorCode::NOT_LEADER_OR_FOLLOWER.code()
    });
    let stepped_down = cut_at.elapsed();
    let majority = others(3, first);
    let second = commit(&nodes, &majority, "after-cut", &mut topics);
    let elected = cut_at.elapsed();
    eprintln!("cut: node {} stepped down in {stepped_down:?}; node {} committed in {elected:?}", first + 1, second + 1);
    assert!(elected < ELECTION_BOUND, "an election after a cut took {elected:?}");
    assert_ne!(second, first);
    // The cut-off node still takes the test's requests, and commits nothing.
    assert!(!metadata(&nodes[first]).topics.iter().any(|t| t.name.as_deref() == Some("after-cut")));
    network.heal(first);
    wait_for_agreement(&nodes, &all, &topics);

    // The active controller is killed.
    nodes[second].kill9();
    let killed_at = Instant::now();
    let rest = others(3, second);
    let third = commit(&nodes, &rest, "after-kill", &mut topics);
    let elected = killed_at.elapsed();
    eprintln!("kill -9: node {} committed in {elected:?} after node {} died", third + 1, second + 1);
    assert!(elected < ELECTION_BOUND, "an election after a kill took {elected:?}");
    nodes[second].restart();
    wait_for_agreement(&nodes, &all, &topics);
    wait_for_brokers(&nodes, &all, &all, third);

    // A broker that is not the controller freezes past its session.
    let frozen = others(3, third)[0];
    nodes[frozen].pause();
    let paused_at = Instant::now();
    let awake = others(3, frozen);
    wait_for_brokers(&nodes, &awake, &awake, third);
    eprintln!("SIGSTOP: node {} fenced after {:?}", frozen + 1, paused_at.elapsed());
    std::thread::sleep(PAUSE.saturating_sub(paused_at.elapsed()));
    nodes[frozen].resume();
    wait_for_brokers(&nodes, &all, &all, third);
    commit(&nodes, &all, "after-pause", &mut topics);
    wait_for_agreement(&nodes, &all, &topics);

    for node in &mut nodes {
        assert!(node.stop().success(), "{}", node.log());
    }
}
