//! What the multi-node tests share: CreateTopics and Metadata over a raw
//! client, waiting for a cluster to agree on its controller, brokers and
//! topics, reading a node's metadata log, and DescribeQuorum.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use krabka_protocol::create_topics_request::CreatableTopic;
use krabka_protocol::describe_quorum_request::{PartitionData, TopicData};
use krabka_protocol::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use krabka_protocol::list_offsets_response::ListOffsetsPartitionResponse;
use krabka_protocol::metadata_response::MetadataResponsePartition;
use krabka_protocol::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DescribeQuorumRequest, DescribeQuorumResponse, ErrorCode,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
};

use super::{wait_for, BrokerProcess, RawClient};

/// Long enough for an election after a SIGKILL: Kafka's fetch timeout
/// (2 s) for the followers to notice, an election timeout (1-2 s), and a
/// margin for this shared machine.
pub const ELECTION_PATIENCE: Duration = Duration::from_secs(30);

/// CreateTopics of `name` with two partitions through `node`: the error code.
pub fn create_topic(node: &BrokerProcess, name: &str) -> i16 {
    create_topic_with(node, name, 2)
}

/// A CreateTopics of `name` with `partitions` partitions, one replica each.
pub fn create_topics_request(name: &str, partitions: i32) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    }
}

pub fn create_topic_with(node: &BrokerProcess, name: &str, partitions: i32) -> i16 {
    let request = create_topics_request(name, partitions);
    let response: CreateTopicsResponse =
        RawClient::connect(&node.bootstrap()).request(ApiKey::CreateTopics, 7, &request);
    response.topics[0].error_code
}

/// Creates `name` through the nodes of `alive` in turn until one answers
/// without error (a node that does not lead forwards it to the one that
/// does; while none leads, NOT_CONTROLLER; while no broker is unfenced,
/// INVALID_REPLICATION_FACTOR), then returns the index of the
/// active controller, once every node of `alive` names the same one.
pub fn create_and_find_the_controller(nodes: &[BrokerProcess], alive: &[usize], name: &str) -> usize {
    let deadline = Instant::now() + ELECTION_PATIENCE;
    'created: loop {
        for &i in alive {
            match create_topic(&nodes[i], name) {
                0 => break 'created,
                code if code == ErrorCode::NOT_CONTROLLER.code() => {}
                // No broker registered and unfenced yet: nowhere to place it.
                code if code == ErrorCode::INVALID_REPLICATION_FACTOR.code() => {}
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
    wait_for("every node to name one live controller", ELECTION_PATIENCE, || {
        let named: BTreeSet<i32> = alive.iter().map(|&i| metadata(&nodes[i]).controller_id).collect();
        let agreed = named.iter().next().copied().filter(|_| named.len() == 1);
        controller = agreed.map_or(-1, |id| id - 1);
        alive.iter().any(|&i| i as i32 == controller)
    });
    controller as usize
}

pub fn metadata(node: &BrokerProcess) -> MetadataResponse {
    RawClient::connect(&node.bootstrap()).request(
        ApiKey::Metadata,
        12,
        &MetadataRequest { topics: None, ..Default::default() },
    )
}

/// Partition `index` of `topic` as `node` lists it (leader, replicas, ISR, ...).
pub fn partition_state(node: &BrokerProcess, topic: &str, index: usize) -> MetadataResponsePartition {
    let mut answer = metadata(node);
    let found = answer.topics.iter_mut().find(|t| t.name.as_deref() == Some(topic));
    let partitions = &mut found.unwrap_or_else(|| panic!("{topic} listed")).partitions;
    let at = partitions.iter().position(|p| p.partition_index == index as i32);
    partitions.swap_remove(at.unwrap_or_else(|| panic!("{topic}-{index} listed")))
}

pub fn topic_names(node: &BrokerProcess) -> BTreeSet<String> {
    metadata(node).topics.iter().filter_map(|t| t.name.clone()).collect()
}

pub fn wait_for_topics(nodes: &[BrokerProcess], alive: &[usize], names: &[&str]) {
    let wanted: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    for &i in alive {
        wait_for(&format!("node {} to know {names:?}", i + 1), ELECTION_PATIENCE, || topic_names(&nodes[i]) == wanted);
    }
}

pub fn metadata_log(node: &BrokerProcess) -> Vec<u8> {
    let dir = node.data_dir().join("__cluster_metadata-0");
    std::fs::read(dir.join("00000000000000000000.log")).unwrap_or_default()
}

/// Waits until every node in `alive` lists exactly the brokers of `listed`
/// (indexes into `nodes`: each registered with the active controller and
/// unfenced, each on its own client port) and names `controller` (an
/// index) as the controller.
pub fn wait_for_brokers(nodes: &[BrokerProcess], alive: &[usize], listed: &[usize], controller: usize) {
    let wanted: BTreeSet<(i32, i32)> = listed.iter().map(|&i| (i as i32 + 1, i32::from(nodes[i].port))).collect();
    for &i in alive {
        wait_for(&format!("node {} to list every broker", i + 1), ELECTION_PATIENCE, || {
            let answer = metadata(&nodes[i]);
            let listed: BTreeSet<(i32, i32)> = answer.brokers.iter().map(|b| (b.node_id, b.port)).collect();
            listed == wanted && answer.controller_id == controller as i32 + 1
        });
    }
}

/// DescribeQuorum v2 for `__cluster_metadata-0`, sent to `address` (a
/// client or controller listener).
pub fn describe_quorum(address: &str) -> DescribeQuorumResponse {
    let request = DescribeQuorumRequest {
        topics: vec![TopicData {
            topic_name: "__cluster_metadata".into(),
            partitions: vec![PartitionData { partition_index: 0, ..Default::default() }],
            ..Default::default()
        }],
        ..Default::default()
    };
    RawClient::connect(address).request(ApiKey::DescribeQuorum, 2, &request)
}

/// ListOffsets (latest) of each of `topic`'s `partitions` through `node`:
/// each partition's answer.
pub fn latest_offsets(node: &BrokerProcess, topic: &str, partitions: i32) -> Vec<ListOffsetsPartitionResponse> {
    latest_offsets_at(&node.bootstrap(), topic, partitions)
}

/// As [`latest_offsets`], from the broker at `address` (Kafka's too).
pub fn latest_offsets_at(address: &str, topic: &str, partitions: i32) -> Vec<ListOffsetsPartitionResponse> {
    let partitions = (0..partitions)
        .map(|p| ListOffsetsPartition {
            partition_index: p,
            current_leader_epoch: -1,
            timestamp: -1,
            ..Default::default()
        })
        .collect();
    let request = ListOffsetsRequest {
        replica_id: -1,
        topics: vec![ListOffsetsTopic { name: topic.into(), partitions, ..Default::default() }],
        ..Default::default()
    };
    let mut response: ListOffsetsResponse = RawClient::connect(address).request(ApiKey::ListOffsets, 7, &request);
    response.topics.swap_remove(0).partitions
}
