//! Black-box tests of the group coordinator over raw sockets against the
//! real broker binary: the classic rebalance protocol step by step, Kafka's
//! error codes for stale generations, unknown members, unknown partitions
//! and oversized metadata, session expiry of a member that dies without
//! leaving, group deletion rules, and committed offsets surviving restarts
//! (also one in the middle of a rebalance).

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use krabka_protocol::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use krabka_protocol::join_group_request::JoinGroupRequestProtocol;
use krabka_protocol::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use krabka_protocol::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use krabka_protocol::sync_group_request::SyncGroupRequestAssignment;
use krabka_protocol::*;
use support::{BrokerProcess, RawClient};

const GROUP: &str = "raw-group";
const FAST_GROUPS: [&str; 2] = ["group.min.session.timeout.ms=500", "group.initial.rebalance.delay.ms=0"];

fn create_topic(client: &mut RawClient, name: &str, partitions: i32) {
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: 1,
            configs: vec![CreatableTopicConfig {
                name: "retention.ms".into(),
                value: Some("-1".into()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let response: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 7, &request);
    assert_eq!(response.topics[0].error_code, 0);
}

fn join_request(member_id: &str, session_timeout_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: GROUP.into(),
        session_timeout_ms,
        rebalance_timeout_ms: 5_000,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(b"meta"),
            ..Default::default()
        }],
        reason: None,
        ..Default::default()
    }
}

/// Joins with the KIP-394 two-step: the first join returns the member id.
fn join(client: &mut RawClient, session_timeout_ms: i32) -> JoinGroupResponse {
    let first: JoinGroupResponse = client.request(ApiKey::JoinGroup, 9, &join_request("", session_timeout_ms));
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    assert!(!first.member_id.is_empty());
    client.request(ApiKey::JoinGroup, 9, &join_request(&first.member_id, session_timeout_ms))
}

fn sync(
    client: &mut RawClient,
    member_id: &str,
    generation_id: i32,
    assignments: &[(&str, &[u8])],
) -> SyncGroupResponse {
    let request = SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: assignments
            .iter()
            .map(|(m, a)| SyncGroupRequestAssignment {
                member_id: m.to_string(),
                assignment: Bytes::copy_from_slice(a),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    client.request(ApiKey::SyncGroup, 5, &request)
}

fn heartbeat(client: &mut RawClient, member_id: &str, generation_id: i32) -> i16 {
    let request = HeartbeatRequest {
        group_id: GROUP.into(),
        generation_id,
        member_id: member_id.into(),
        group_instance_id: None,
        ..Default::default()
    };
    let response: HeartbeatResponse = client.request(ApiKey::Heartbeat, 4, &request);
    response.error_code
}

fn commit(
    client: &mut RawClient,
    member_id: &str,
    generation_id: i32,
    topic: &str,
    offsets: &[(i32, i64)],
    metadata: &str,
) -> Vec<i16> {
    let request = OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id_or_member_epoch: generation_id,
        member_id: member_id.into(),
        group_instance_id: None,
        topics: vec![OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: offsets
                .iter()
                .map(|(p, o)| OffsetCommitRequestPartition {
                    partition_index: *p,
                    committed_offset: *o,
                    committed_leader_epoch: -1,
                    committed_metadata: Some(metadata.into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: OffsetCommitResponse = client.request(ApiKey::OffsetCommit, 9, &request);
    response.topics[0].partitions.iter().map(|p| p.error_code).collect()
}

fn fetch_offsets(client: &mut RawClient, topic: &str, partitions: &[i32]) -> Vec<i64> {
    let request = OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: GROUP.into(),
            member_id: None,
            member_epoch: -1,
            topics: Some(vec![OffsetFetchRequestTopics {
                name: topic.into(),
                partition_indexes: partitions.to_vec(),
                ..Default::default()
            }]),
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, 9, &request);
    assert_eq!(response.groups[0].error_code, 0);
    response.groups[0].topics[0].partitions.iter().map(|p| p.committed_offset).collect()
}

fn describe(client: &mut RawClient) -> describe_groups_response::DescribedGroup {
    let response: DescribeGroupsResponse = client.request(
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest { groups: vec![GROUP.into()], ..Default::default() },
    );
    response.groups[0].clone()
}

fn find_coordinator(client: &mut RawClient, port: u16) {
    let response: FindCoordinatorResponse = client.request(
        ApiKey::FindCoordinator,
        4,
        &FindCoordinatorRequest { key_type: 0, coordinator_keys: vec![GROUP.into()], ..Default::default() },
    );
    assert_eq!(response.coordinators[0].error_code, 0);
    assert_eq!(response.coordinators[0].node_id, 1);
    assert_eq!(response.coordinators[0].port, i32::from(port));
}

#[test]
fn classic_rebalance_and_kafkas_error_codes() {
    let broker = BrokerProcess::start(&FAST_GROUPS);
    let mut admin = RawClient::connect(&broker.bootstrap());
    create_topic(&mut admin, "orders", 4);
    find_coordinator(&mut admin, broker.port);
    let mut a = RawClient::connect(&broker.bootstrap());
    session_timeouts_outside_the_limits_are_refused(&mut a);
    let a_id = lone_member_leads_generation_one(&mut a, &mut admin);
    stale_members_and_bad_partitions_get_their_codes(&mut a, &a_id, &mut admin);
    let b = second_member_rebalances_into_generation_two(&broker, &mut a, &a_id, &mut admin);
    // Deleting a group with members is refused.
    assert_eq!(delete_group(&mut admin), 68, "NON_EMPTY_GROUP");
    member_expires_after_its_session_timeout(b, &mut a, &a_id);
    leaving_empties_the_group_and_deleting_drops_its_offsets(&mut a, &a_id, &mut admin);
}

/// DeleteGroups of GROUP: its error code.
fn delete_group(admin: &mut RawClient) -> i16 {
    let deleted: DeleteGroupsResponse = admin.request(
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest { groups_names: vec![GROUP.into()], ..Default::default() },
    );
    deleted.results[0].error_code
}

/// `group.min.session.timeout.ms` (500 here) and the default
/// `group.max.session.timeout.ms` (30 minutes): one past either is
/// INVALID_SESSION_TIMEOUT, and no member is made.
fn session_timeouts_outside_the_limits_are_refused(a: &mut RawClient) {
    for timeout in [499, 1_800_001] {
        let refused: JoinGroupResponse = a.request(ApiKey::JoinGroup, 9, &join_request("", timeout));
        assert_eq!((refused.error_code, refused.member_id.as_str()), (26, ""), "INVALID_SESSION_TIMEOUT at {timeout}");
    }
}

/// One member: it leads generation 1 and assigns itself everything. Its member id.
fn lone_member_leads_generation_one(a: &mut RawClient, admin: &mut RawClient) -> String {
    let joined = join(a, 10_000);
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, joined.member_id);
    assert_eq!(joined.members.len(), 1);
    let a_id = joined.member_id.clone();
    let synced = sync(a, &a_id, 1, &[(&a_id, b"all")]);
    assert_eq!((synced.error_code, synced.assignment.as_ref()), (0, &b"all"[..]));
    assert_eq!(heartbeat(a, &a_id, 1), 0);
    assert_eq!(describe(admin).group_state, "Stable");
    a_id
}

/// Stale generation, unknown member; unknown partitions and oversized
/// metadata, per partition.
fn stale_members_and_bad_partitions_get_their_codes(a: &mut RawClient, a_id: &str, admin: &mut RawClient) {
    assert_eq!(heartbeat(a, a_id, 0), 22, "ILLEGAL_GENERATION");
    assert_eq!(heartbeat(a, "nobody", 1), 25, "UNKNOWN_MEMBER_ID");
    assert_eq!(commit(a, a_id, 7, "orders", &[(0, 5)], ""), vec![22]);
    assert_eq!(commit(a, "nobody", 1, "orders", &[(0, 5)], ""), vec![25]);
    assert_eq!(commit(a, a_id, 1, "orders", &[(0, 5), (9, 5)], ""), vec![0, 3]);
    assert_eq!(commit(a, a_id, 1, "nope", &[(0, 5)], ""), vec![3]);
    assert_eq!(commit(a, a_id, 1, "orders", &[(1, 6)], &"m".repeat(4097)), vec![12], "OFFSET_METADATA_TOO_LARGE");
    assert_eq!(commit(a, a_id, 1, "orders", &[(1, 6)], &"m".repeat(4096)), vec![0], "metadata at the limit");
    assert_eq!(fetch_offsets(admin, "orders", &[0, 1, 2]), vec![5, 6, -1]);
}

/// A second member joins: the first learns of the rebalance by heartbeat,
/// rejoins, and both form generation 2 with one leader. The second member's
/// connection.
fn second_member_rebalances_into_generation_two(
    broker: &BrokerProcess,
    a: &mut RawClient,
    a_id: &str,
    admin: &mut RawClient,
) -> RawClient {
    let mut b = RawClient::connect(&broker.bootstrap());
    let first: JoinGroupResponse = b.request(ApiKey::JoinGroup, 9, &join_request("", 10_000));
    let b_id = first.member_id.clone();
    let b_join = b.send(ApiKey::JoinGroup, 9, &join_request(&b_id, 10_000));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(heartbeat(a, a_id, 1), 27, "REBALANCE_IN_PROGRESS");
    assert_eq!(
        commit(a, a_id, 1, "orders", &[(0, 7)], ""),
        vec![0],
        "commits of the old generation still count while preparing"
    );
    let a_rejoined: JoinGroupResponse = a.request(ApiKey::JoinGroup, 9, &join_request(a_id, 10_000));
    let b_joined: JoinGroupResponse = b.receive(ApiKey::JoinGroup, 9, b_join);
    assert_eq!((a_rejoined.generation_id, b_joined.generation_id), (2, 2));
    assert_eq!(a_rejoined.leader, a_id, "the leader stays");
    assert_eq!(a_rejoined.members.len(), 2);
    assert!(b_joined.members.is_empty(), "followers get no member list");
    // The follower's SyncGroup waits for the leader's assignment.
    let b_sync = b.send(
        ApiKey::SyncGroup,
        5,
        &SyncGroupRequest { group_id: GROUP.into(), generation_id: 2, member_id: b_id.clone(), ..Default::default() },
    );
    let leader_sync = sync(a, a_id, 2, &[(a_id, b"p0p1"), (&b_id, b"p2p3")]);
    assert_eq!(leader_sync.assignment.as_ref(), b"p0p1");
    let follower_sync: SyncGroupResponse = b.receive(ApiKey::SyncGroup, 5, b_sync);
    assert_eq!(follower_sync.assignment.as_ref(), b"p2p3");
    assert_eq!(describe(admin).members.len(), 2);
    b
}

/// Member b dies without leaving: after its session timeout, a rebalance
/// drops it and a carries on alone.
fn member_expires_after_its_session_timeout(b: RawClient, a: &mut RawClient, a_id: &str) {
    drop(b);
    let started = Instant::now();
    let mut generation = 2;
    loop {
        let code = heartbeat(a, a_id, generation);
        if code == 27 {
            let rejoined: JoinGroupResponse = a.request(ApiKey::JoinGroup, 9, &join_request(a_id, 10_000));
            generation = rejoined.generation_id;
            assert_eq!(rejoined.members.len(), 1, "the dead member is gone");
            assert_eq!(sync(a, a_id, generation, &[(a_id, b"all")]).error_code, 0);
            break;
        }
        assert_eq!(code, 0);
        assert!(started.elapsed() < Duration::from_secs(30), "b never expired");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(started.elapsed() >= Duration::from_secs(9), "not before b's 10 s session timeout");
    assert_eq!(generation, 3);
}

/// Leaving empties the group; then it can be deleted with its offsets.
fn leaving_empties_the_group_and_deleting_drops_its_offsets(a: &mut RawClient, a_id: &str, admin: &mut RawClient) {
    let left: LeaveGroupResponse = a.request(
        ApiKey::LeaveGroup,
        5,
        &LeaveGroupRequest {
            group_id: GROUP.into(),
            members: vec![leave_group_request::MemberIdentity { member_id: a_id.to_string(), ..Default::default() }],
            ..Default::default()
        },
    );
    assert_eq!(left.members[0].error_code, 0);
    assert_eq!(describe(admin).group_state, "Empty");
    let listed: ListGroupsResponse = admin.request(ApiKey::ListGroups, 5, &ListGroupsRequest::default());
    assert!(listed.groups.iter().any(|g| g.group_id == GROUP && g.group_state == "Empty"));
    assert_eq!(delete_group(admin), 0);
    assert_eq!(fetch_offsets(admin, "orders", &[0, 1]), vec![-1, -1]);
    let gone: DescribeGroupsResponse = admin.request(
        ApiKey::DescribeGroups,
        6,
        &DescribeGroupsRequest { groups: vec![GROUP.into()], ..Default::default() },
    );
    assert_eq!(gone.groups[0].error_code, 69, "GROUP_ID_NOT_FOUND");
}

/// A `__consumer_offsets` partition larger than one replay read (4 MiB):
/// the broker loads it whole at its next start (a read ending inside a
/// batch once stopped the start with "record batch truncated").
#[test]
fn a_coordinator_partition_larger_than_one_read_loads_at_restart() {
    let mut broker = BrokerProcess::start(&FAST_GROUPS);
    let mut admin = RawClient::connect(&broker.bootstrap());
    create_topic(&mut admin, "bulky", 1);
    find_coordinator(&mut admin, broker.port);
    // About 1,300 commits of 4,000 bytes of metadata each: over 5 MiB, in
    // batches of a little over 4 KiB, so a 4 MiB read ends inside one.
    let metadata = "m".repeat(4_000);
    for offset in 0..1_300 {
        assert_eq!(commit(&mut admin, "", -1, "bulky", &[(0, offset)], &metadata), vec![0]);
    }
    assert!(broker.stop().success());
    broker.restart();
    let mut admin = RawClient::connect(&broker.bootstrap());
    find_coordinator(&mut admin, broker.port);
    assert_eq!(fetch_offsets(&mut admin, "bulky", &[0]), vec![1_299], "{}", broker.log());
}

#[test]
fn committed_offsets_survive_restarts_even_mid_rebalance() {
    let mut broker = BrokerProcess::start(&FAST_GROUPS);
    let mut admin = RawClient::connect(&broker.bootstrap());
    create_topic(&mut admin, "ledger", 3);
    find_coordinator(&mut admin, broker.port);
    // An admin-style commit (no member, generation -1) to an empty group.
    assert_eq!(commit(&mut admin, "", -1, "ledger", &[(0, 10), (1, 20), (2, 30)], "note"), vec![0, 0, 0]);
    let mut a = RawClient::connect(&broker.bootstrap());
    let joined = join(&mut a, 10_000);
    let a_id = joined.member_id.clone();
    assert_eq!(sync(&mut a, &a_id, joined.generation_id, &[(&a_id, b"x")]).error_code, 0);
    assert_eq!(commit(&mut a, &a_id, joined.generation_id, "ledger", &[(0, 11)], ""), vec![0]);
    // A second member starts a rebalance; the broker is killed mid-way.
    let mut b = RawClient::connect(&broker.bootstrap());
    let first: JoinGroupResponse = b.request(ApiKey::JoinGroup, 9, &join_request("", 10_000));
    b.send(ApiKey::JoinGroup, 9, &join_request(&first.member_id, 10_000));
    std::thread::sleep(Duration::from_millis(200));
    drop((a, b, admin));
    broker.kill9();
    broker.restart();
    let mut admin = RawClient::connect(&broker.bootstrap());
    assert_eq!(fetch_offsets(&mut admin, "ledger", &[0, 1, 2]), vec![11, 20, 30]);
    // And after a clean restart too.
    assert!(broker.stop().success());
    broker.restart();
    let mut admin = RawClient::connect(&broker.bootstrap());
    assert_eq!(fetch_offsets(&mut admin, "ledger", &[0, 1, 2]), vec![11, 20, 30]);
    // The restored group lets its old member rejoin or expire; either way
    // the group works: a new member can join and commit.
    let mut c = RawClient::connect(&broker.bootstrap());
    let first: JoinGroupResponse = c.request(ApiKey::JoinGroup, 9, &join_request("", 10_000));
    let c_join = c.send(ApiKey::JoinGroup, 9, &join_request(&first.member_id, 10_000));
    let joined: JoinGroupResponse = c.receive(ApiKey::JoinGroup, 9, c_join);
    assert_eq!(joined.error_code, 0);
    assert_eq!(sync(&mut c, &joined.member_id, joined.generation_id, &[(&joined.member_id, b"y")]).error_code, 0);
    assert_eq!(commit(&mut c, &joined.member_id, joined.generation_id, "ledger", &[(2, 31)], ""), vec![0]);
    assert_eq!(fetch_offsets(&mut admin, "ledger", &[2]), vec![31]);
}

#[test]
fn a_join_parked_at_shutdown_is_answered_not_coordinator_and_holds_nothing_up() {
    let mut broker = BrokerProcess::start(&FAST_GROUPS);
    let mut a = RawClient::connect(&broker.bootstrap());
    let joined = join(&mut a, 10_000);
    let a_id = joined.member_id.clone();
    assert_eq!(sync(&mut a, &a_id, joined.generation_id, &[(&a_id, b"x")]).error_code, 0);
    // A second member with a minute's rebalance timeout: its join waits
    // for the first member, who never rejoins.
    let mut b = RawClient::connect(&broker.bootstrap());
    let first: JoinGroupResponse = b.request(ApiKey::JoinGroup, 9, &join_request("", 10_000));
    let parked = JoinGroupRequest { rebalance_timeout_ms: 60_000, ..join_request(&first.member_id, 10_000) };
    let b_join = b.send(ApiKey::JoinGroup, 9, &parked);
    std::thread::sleep(Duration::from_millis(300));
    let stopping = Instant::now();
    assert!(broker.stop().success());
    // Answered, not cut off by the 10 s shutdown grace: as Kafka unloads
    // its coordinator, so that the member finds the next one.
    let stopped_in = stopping.elapsed();
    let answer: JoinGroupResponse = b.receive(ApiKey::JoinGroup, 9, b_join);
    assert_eq!((answer.error_code, answer.member_id.as_str()), (16, first.member_id.as_str()), "NOT_COORDINATOR");
    assert!(stopped_in < Duration::from_secs(5), "the shutdown waited {stopped_in:?} for a parked join");
}

#[test]
fn group_max_size_is_enforced_at_the_limit() {
    let broker = BrokerProcess::start(&[
        "group.min.session.timeout.ms=500",
        "group.initial.rebalance.delay.ms=0",
        "group.max.size=2",
    ]);
    let mut admin = RawClient::connect(&broker.bootstrap());
    create_topic(&mut admin, "sized", 1);
    let mut first = RawClient::connect(&broker.bootstrap());
    let joined = join(&mut first, 10_000);
    assert_eq!(sync(&mut first, &joined.member_id, 1, &[(&joined.member_id, b"a")]).error_code, 0);
    // The second member (the limit) gets in; the third is refused.
    let mut second = RawClient::connect(&broker.bootstrap());
    let id2: JoinGroupResponse = second.request(ApiKey::JoinGroup, 9, &join_request("", 10_000));
    let pending = second.send(ApiKey::JoinGroup, 9, &join_request(&id2.member_id, 10_000));
    // The second join travels on its own connection: wait until the group
    // holds it, or the third could be judged against one member.
    support::wait_for("second member in the group", Duration::from_secs(10), || {
        describe(&mut admin).members.len() == 2
    });
    let mut third = RawClient::connect(&broker.bootstrap());
    let refused: JoinGroupResponse = third.request(ApiKey::JoinGroup, 9, &join_request("", 10_000));
    assert_eq!(refused.error_code, 81, "GROUP_MAX_SIZE_REACHED");
    let rejoined: JoinGroupResponse = first.request(ApiKey::JoinGroup, 9, &join_request(&joined.member_id, 10_000));
    assert_eq!(rejoined.members.len(), 2);
    let second_joined: JoinGroupResponse = second.receive(ApiKey::JoinGroup, 9, pending);
    assert_eq!(second_joined.error_code, 0);
}

#[test]
fn offsets_of_an_empty_group_expire_after_offsets_retention_minutes() {
    // One minute is the smallest retention the key can express. The
    // broker's wall clock, which stamps commits and expires them, runs ten
    // times fast (libfaketime), so its minute passes in six seconds; its
    // monotonic clock, which paces the checks, stays true.
    let mut broker = BrokerProcess::start(&["offsets.retention.minutes=1", "offsets.retention.check.interval.ms=1000"]);
    assert!(broker.stop().success());
    broker.skew_clock(Some("+0 x10"));
    broker.restart();
    let mut admin = RawClient::connect(&broker.bootstrap());
    create_topic(&mut admin, "fleeting", 1);
    find_coordinator(&mut admin, broker.port);
    let committed = Instant::now();
    assert_eq!(commit(&mut admin, "", -1, "fleeting", &[(0, 42)], ""), vec![0]);
    std::thread::sleep(Duration::from_millis(4_500));
    assert_eq!(fetch_offsets(&mut admin, "fleeting", &[0]), vec![42], "kept within the retention");
    support::wait_for("offset expiry", Duration::from_secs(20), || {
        fetch_offsets(&mut admin, "fleeting", &[0]) == vec![-1]
    });
    assert!(committed.elapsed() >= Duration::from_secs(6), "not before offsets.retention.minutes");
    let listed: ListGroupsResponse = admin.request(ApiKey::ListGroups, 5, &ListGroupsRequest::default());
    assert!(!listed.groups.iter().any(|g| g.group_id == GROUP), "the emptied group is removed");
}

#[test]
fn offset_fetch_answers_the_same_offsets_at_every_version() {
    let broker = BrokerProcess::start(&FAST_GROUPS);
    let mut admin = RawClient::connect(&broker.bootstrap());
    create_topic(&mut admin, "versions", 3);
    find_coordinator(&mut admin, broker.port);
    assert_eq!(commit(&mut admin, "", -1, "versions", &[(0, 7), (2, 9)], "meta"), vec![0, 0]);
    let topic_id = {
        let metadata: MetadataResponse =
            admin.request(ApiKey::Metadata, 12, &MetadataRequest { topics: None, ..Default::default() });
        metadata.topics.iter().find(|t| t.name.as_deref() == Some("versions")).expect("topic").topic_id
    };
    for version in 1..=10 {
        let (committed, metadata): (Vec<(i32, i64)>, Vec<Option<String>>) = if version < 8 {
            let request = OffsetFetchRequest {
                group_id: GROUP.into(),
                topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopic {
                    name: "versions".into(),
                    partition_indexes: vec![0, 1, 2],
                    ..Default::default()
                }]),
                ..Default::default()
            };
            let response: OffsetFetchResponse = admin.request(ApiKey::OffsetFetch, version, &request);
            assert_eq!(response.topics.len(), 1, "v{version}");
            assert_eq!(response.topics[0].name, "versions");
            let partitions = &response.topics[0].partitions;
            (
                partitions.iter().map(|p| (p.partition_index, p.committed_offset)).collect(),
                partitions.iter().map(|p| p.metadata.clone()).collect(),
            )
        } else {
            let request = OffsetFetchRequest {
                groups: vec![OffsetFetchRequestGroup {
                    group_id: GROUP.into(),
                    member_epoch: -1,
                    topics: Some(vec![OffsetFetchRequestTopics {
                        name: if version >= 10 { String::new() } else { "versions".into() },
                        topic_id: if version >= 10 { topic_id } else { Uuid::ZERO },
                        partition_indexes: vec![0, 1, 2],
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            };
            let response: OffsetFetchResponse = admin.request(ApiKey::OffsetFetch, version, &request);
            let topic = &response.groups[0].topics[0];
            if version >= 10 {
                assert_eq!(topic.topic_id, topic_id, "v{version} names topics by id");
            } else {
                assert_eq!(topic.name, "versions");
            }
            (
                topic.partitions.iter().map(|p| (p.partition_index, p.committed_offset)).collect(),
                topic.partitions.iter().map(|p| p.metadata.clone()).collect(),
            )
        };
        assert_eq!(committed, vec![(0, 7), (1, -1), (2, 9)], "v{version}");
        assert_eq!(metadata, vec![Some("meta".into()), Some(String::new()), Some("meta".into())], "v{version}");
    }
}

/// Kafka's cleanup removes an empty group that has no offsets left at once;
/// offsets themselves wait `offsets.retention.minutes` (KIP-211).
#[test]
fn an_empty_group_without_offsets_is_removed_at_the_next_cleanup() {
    let broker = BrokerProcess::start(&[FAST_GROUPS[0], FAST_GROUPS[1], "offsets.retention.check.interval.ms=500"]);
    let mut admin = RawClient::connect(&broker.bootstrap());
    create_topic(&mut admin, "kept", 1);
    find_coordinator(&mut admin, broker.port);
    let listed = |admin: &mut RawClient| -> bool {
        let groups: ListGroupsResponse = admin.request(ApiKey::ListGroups, 5, &ListGroupsRequest::default());
        groups.groups.iter().any(|g| g.group_id == GROUP)
    };
    let mut member = RawClient::connect(&broker.bootstrap());
    let joined = join(&mut member, 10_000);
    assert_eq!(sync(&mut member, &joined.member_id, joined.generation_id, &[(&joined.member_id, b"a")]).error_code, 0);
    let left: LeaveGroupResponse = member.request(
        ApiKey::LeaveGroup,
        5,
        &LeaveGroupRequest {
            group_id: GROUP.into(),
            members: vec![leave_group_request::MemberIdentity {
                member_id: joined.member_id.clone(),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    assert_eq!(left.members[0].error_code, 0);
    support::wait_for("the empty group to be removed", Duration::from_secs(20), || !listed(&mut admin));
    // With an offset committed the group stays (for the retention).
    assert_eq!(commit(&mut admin, "", -1, "kept", &[(0, 5)], ""), vec![0]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(listed(&mut admin), "a group with offsets is kept");
    assert_eq!(fetch_offsets(&mut admin, "kept", &[0]), vec![5]);
}
