use bytes::{Bytes, BytesMut};
use krabka_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody, Uuid};

use super::*;
use crate::message::{ElectionState, FetchBounds, FetchResponse, FetchSnapshotResponse, Message, RaftError};
use crate::test_support::OLD_FETCH;
use krabka_log::SnapshotId;

fn context(node_id: i32) -> WireContext {
    let voters = (1..=3).map(|id| (id, Endpoint { host: format!("10.0.0.{id}"), port: 9093 })).collect();
    WireContext {
        cluster_id: "MkU3OEVBNTcwNTJENDM2Qk".into(),
        node_id,
        directory_id: Uuid([node_id as u8; 16]),
        listener: "CONTROLLER".into(),
        voters,
    }
}

fn state() -> ElectionState {
    ElectionState { epoch: 5, voted_for: None, leader_id: Some(2) }
}

/// Through the bytes: encoded at `version`, decoded as Kafka's peer would.
fn over_the_wire_request(body: &RequestBody, version: i16) -> RequestBody {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version).unwrap();
    RequestBody::decode(body.api_key(), version, &mut buf.freeze()).unwrap()
}

fn over_the_wire_response(body: &ResponseBody, version: i16) -> ResponseBody {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version).unwrap();
    ResponseBody::decode(body.api_key(), version, &mut buf.freeze()).unwrap()
}

fn fetch(epoch: i32, fetch_offset: i64, last_fetched_epoch: i32, directory_id: Uuid) -> Message {
    Message::FetchRequest { epoch, fetch_offset, last_fetched_epoch, directory_id, bounds: OLD_FETCH }
}

fn requests() -> Vec<(Message, ApiKey, i16)> {
    vec![
        (Message::VoteRequest { epoch: 5, last_epoch: 4, last_offset: 77, pre_vote: false }, ApiKey::Vote, 2),
        (Message::VoteRequest { epoch: 5, last_epoch: 5, last_offset: 77, pre_vote: true }, ApiKey::Vote, 2),
        (Message::BeginQuorumEpoch { epoch: 6 }, ApiKey::BeginQuorumEpoch, 1),
        (Message::BeginQuorumEpoch { epoch: 6 }, ApiKey::BeginQuorumEpoch, 0),
        (Message::EndQuorumEpoch { epoch: 6, preferred_successors: vec![3, 2] }, ApiKey::EndQuorumEpoch, 1),
        (Message::EndQuorumEpoch { epoch: 6, preferred_successors: vec![3, 2] }, ApiKey::EndQuorumEpoch, 0),
        // The sender's directory id goes with a fetch from v17 (and
        // FetchSnapshot v1): before, it arrives as none.
        (fetch(6, 120, 6, context(1).directory_id), ApiKey::Fetch, 17),
        (fetch(6, 120, 6, Uuid::ZERO), ApiKey::Fetch, 13),
        (
            Message::FetchSnapshotRequest {
                epoch: 6,
                snapshot: SnapshotId { end_offset: 9, epoch: 5 },
                position: 3,
                directory_id: context(1).directory_id,
                max_bytes: 1 << 20,
            },
            ApiKey::FetchSnapshot,
            1,
        ),
    ]
}

#[test]
fn every_request_crosses_the_wire_and_arrives_as_it_was_sent() {
    let (sender, receiver) = (context(1), context(2));
    for (message, key, version) in requests() {
        let body = request(&sender, 2, &message, version).expect("a request");
        assert_eq!(body.api_key(), key);
        let arrived = over_the_wire_request(&body, version);
        match accept_request(&receiver, &state(), arrived, version) {
            Accepted::Message { from, message: got } => {
                assert_eq!((from, &got), (1, &message), "{key:?} v{version}");
            }
            other => panic!("{key:?} v{version} refused: {other:?}"),
        }
    }
}

/// KIP-1166: a Fetch carries the fetcher's high watermark from v18 only;
/// MaxWaitMs and MaxBytes at every version. What arrives is what the
/// leader acts on.
#[test]
fn a_fetch_carries_its_wait_bytes_and_from_v18_its_high_watermark() {
    let (sender, receiver) = (context(1), context(2));
    for (version, high_watermark, arrives_as) in
        [(18, 42, 42), (18, -1, -1), (17, 42, FetchBounds::HIGH_WATERMARK_NOT_SENT)]
    {
        let bounds = FetchBounds { max_wait_ms: 500, max_bytes: 4096, high_watermark };
        let message = Message::FetchRequest {
            epoch: 6,
            fetch_offset: 120,
            last_fetched_epoch: 6,
            directory_id: sender.directory_id,
            bounds,
        };
        let body = request(&sender, 2, &message, version).expect("a request");
        let arrived = over_the_wire_request(&body, version);
        let RequestBody::Fetch(wire) = &arrived else { panic!() };
        assert_eq!((wire.max_wait_ms, wire.max_bytes), (500, 4096));
        assert_eq!(wire.topics[0].partitions[0].high_watermark, arrives_as, "v{version}");
        let Accepted::Message { message: Message::FetchRequest { bounds: got, .. }, .. } =
            accept_request(&receiver, &state(), arrived, version)
        else {
            panic!("v{version} refused")
        };
        assert_eq!(got, FetchBounds { high_watermark: arrives_as, ..bounds }, "v{version}");
    }
}

#[test]
fn requests_are_filled_as_kafka_fills_them() {
    let context = context(1);
    let vote = Message::VoteRequest { epoch: 5, last_epoch: 4, last_offset: 77, pre_vote: true };
    let Some(RequestBody::Vote(vote)) = request(&context, 3, &vote, 2) else { panic!() };
    assert_eq!((vote.cluster_id.as_deref(), vote.voter_id), (Some(context.cluster_id.as_str()), 3));
    let partition = &vote.topics[0].partitions[0];
    assert_eq!(vote.topics[0].topic_name, "__cluster_metadata");
    assert_eq!((partition.replica_id, partition.replica_epoch, partition.pre_vote), (1, 5, true));
    assert_eq!(partition.replica_directory_id, context.directory_id);

    let begin = Message::BeginQuorumEpoch { epoch: 6 };
    let Some(RequestBody::BeginQuorumEpoch(begin)) = request(&context, 2, &begin, 1) else { panic!() };
    let endpoint = &begin.leader_endpoints[0];
    assert_eq!((endpoint.name.as_str(), endpoint.host.as_str(), endpoint.port), ("CONTROLLER", "10.0.0.1", 9093));

    let fetch = fetch(6, 120, 6, Uuid::ZERO);
    let Some(RequestBody::Fetch(new)) = request(&context, 2, &fetch, 17) else { panic!() };
    assert_eq!((new.replica_state.replica_id, new.replica_id, new.max_wait_ms), (1, -1, 50));
    assert_eq!(new.max_bytes, 1 << 20);
    assert_eq!(new.topics[0].topic_id.to_string(), "AAAAAAAAAAAAAAAAAAAAAQ");
    let Some(RequestBody::Fetch(old)) = request(&context, 2, &fetch, 14) else { panic!() };
    assert_eq!((old.replica_state.replica_id, old.replica_id), (-1, 1));
}

fn top_level_code(body: &ResponseBody) -> i16 {
    match body {
        ResponseBody::Vote(r) => r.error_code,
        ResponseBody::BeginQuorumEpoch(r) => r.error_code,
        ResponseBody::EndQuorumEpoch(r) => r.error_code,
        ResponseBody::Fetch(r) => r.error_code,
        ResponseBody::FetchSnapshot(r) => r.error_code,
        other => panic!("not raft: {other:?}"),
    }
}

fn refused(context: &WireContext, body: RequestBody, version: i16) -> ResponseBody {
    match accept_request(context, &state(), body, version) {
        Accepted::Refused(response) => {
            over_the_wire_response(&response, version);
            response
        }
        other => panic!("accepted: {other:?}"),
    }
}

#[test]
fn a_request_from_another_cluster_is_refused_at_the_top_level() {
    let receiver = context(2);
    let mut stranger = context(1);
    stranger.cluster_id = "another-cluster".into();
    for (message, key, version) in requests() {
        let body = request(&stranger, 2, &message, version).unwrap();
        let response = refused(&receiver, body, version);
        assert_eq!(top_level_code(&response), ErrorCode::INCONSISTENT_CLUSTER_ID.code(), "{key:?}");
    }
    // A request without a cluster id (an old client) is accepted.
    let Some(RequestBody::Vote(mut vote)) = request(&context(1), 2, &requests()[0].0, 2) else { panic!() };
    vote.cluster_id = None;
    assert!(matches!(accept_request(&receiver, &state(), RequestBody::Vote(vote), 2), Accepted::Message { .. }));
}

#[test]
fn a_request_for_another_partition_is_an_invalid_request() {
    let receiver = context(2);
    let Some(RequestBody::Vote(mut vote)) = request(&context(1), 2, &requests()[0].0, 2) else { panic!() };
    vote.topics[0].topic_name = "orders".into();
    let response = refused(&receiver, RequestBody::Vote(vote), 2);
    assert_eq!(top_level_code(&response), ErrorCode::INVALID_REQUEST.code());

    let fetch = fetch(6, 120, 6, Uuid::ZERO);
    let Some(RequestBody::Fetch(mut by_name)) = request(&context(1), 2, &fetch, 17) else { panic!() };
    by_name.topics[0].topic_id = Uuid::ZERO;
    let response = refused(&receiver, RequestBody::Fetch(by_name), 17);
    assert_eq!(top_level_code(&response), ErrorCode::INVALID_REQUEST.code(), "a fetch is matched by topic id");
}

/// The partition's error code of a refused Vote, or of a refused Fetch.
fn partition_code(body: &ResponseBody) -> (i16, i32, i32) {
    match body {
        ResponseBody::Vote(r) => {
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.leader_id, p.leader_epoch)
        }
        ResponseBody::Fetch(r) => {
            let p = &r.responses[0].partitions[0];
            assert_eq!(p.high_watermark, -1);
            (p.error_code, p.current_leader.leader_id, p.current_leader.leader_epoch)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn impossible_offsets_epochs_and_voter_keys_are_refused_in_the_partition() {
    let (sender, receiver) = (context(1), context(2));
    let invalid = ErrorCode::INVALID_REQUEST.code();
    let cases = [
        (Message::VoteRequest { epoch: 5, last_epoch: 5, last_offset: 1, pre_vote: false }, invalid),
        (Message::VoteRequest { epoch: 5, last_epoch: 6, last_offset: 1, pre_vote: true }, invalid),
        (Message::VoteRequest { epoch: 5, last_epoch: 4, last_offset: -1, pre_vote: false }, invalid),
        (fetch(5, 3, 6, Uuid::ZERO), invalid),
        (fetch(5, -1, 4, Uuid::ZERO), invalid),
    ];
    for (message, code) in cases {
        let version = if matches!(message, Message::VoteRequest { .. }) { 2 } else { 17 };
        let body = request(&sender, 2, &message, version).unwrap();
        let response = refused(&receiver, body, version);
        assert_eq!(top_level_code(&response), 0);
        assert_eq!(partition_code(&response), (code, 2, 5), "{message:?}");
    }
    // A vote meant for node 3 that reached node 2.
    let vote = Message::VoteRequest { epoch: 5, last_epoch: 4, last_offset: 1, pre_vote: false };
    let body = request(&sender, 3, &vote, 2).unwrap();
    let response = refused(&receiver, body, 2);
    assert_eq!(partition_code(&response).0, ErrorCode::INVALID_VOTER_KEY.code());
}

#[test]
fn responses_cross_the_wire_and_are_read_against_their_request() {
    let (node, peer) = (context(2), context(1));
    let vote = Message::VoteRequest { epoch: 5, last_epoch: 4, last_offset: 1, pre_vote: true };
    let fetch = fetch(6, 120, 6, Uuid::ZERO);
    let fetched = FetchResponse {
        epoch: 6,
        leader_id: Some(2),
        error: RaftError::None,
        fetch_offset: 120,
        last_fetched_epoch: 6,
        high_watermark: 118,
        log_start_offset: 0,
        records: one_batch(),
        diverging_epoch: None,
        snapshot: None,
    };
    let diverged = FetchResponse { diverging_epoch: Some((5, 100)), records: Bytes::new(), ..fetched.clone() };
    let fenced = FetchResponse {
        error: RaftError::FencedLeaderEpoch,
        high_watermark: -1,
        records: Bytes::new(),
        ..fetched.clone()
    };
    let offered = FetchResponse {
        snapshot: Some(SnapshotId { end_offset: 400, epoch: 5 }),
        log_start_offset: 400,
        records: Bytes::new(),
        ..fetched.clone()
    };
    let fetch_snapshot = Message::FetchSnapshotRequest {
        epoch: 6,
        snapshot: SnapshotId { end_offset: 400, epoch: 5 },
        position: 7,
        directory_id: Uuid::ZERO,
        max_bytes: 1 << 20,
    };
    let chunk = FetchSnapshotResponse {
        epoch: 6,
        leader_id: Some(2),
        error: RaftError::None,
        snapshot: SnapshotId { end_offset: 400, epoch: 5 },
        size: 20,
        position: 7,
        bytes: Bytes::from_static(b"unaligned"),
    };
    let gone =
        FetchSnapshotResponse { error: RaftError::SnapshotNotFound, size: 0, bytes: Bytes::new(), ..chunk.clone() };
    let cases = [
        (
            vote.clone(),
            Message::VoteResponse { epoch: 5, error: RaftError::None, granted: true, pre_vote: true, leader_id: None },
            2,
        ),
        (
            vote,
            Message::VoteResponse {
                epoch: 7,
                error: RaftError::FencedLeaderEpoch,
                granted: false,
                pre_vote: true,
                leader_id: Some(3),
            },
            2,
        ),
        (
            Message::BeginQuorumEpoch { epoch: 6 },
            Message::BeginQuorumEpochResponse { epoch: 6, error: RaftError::None, leader_id: Some(1) },
            1,
        ),
        (
            Message::EndQuorumEpoch { epoch: 6, preferred_successors: vec![3] },
            Message::EndQuorumEpochResponse { epoch: 6, error: RaftError::None, leader_id: None },
            1,
        ),
        (fetch.clone(), Message::FetchResponse(fetched), 17),
        (fetch.clone(), Message::FetchResponse(diverged), 13),
        (fetch.clone(), Message::FetchResponse(fenced), 17),
        (fetch, Message::FetchResponse(offered), 17),
        (fetch_snapshot.clone(), Message::FetchSnapshotResponse(chunk), 1),
        (fetch_snapshot.clone(), Message::FetchSnapshotResponse(gone.clone()), 1),
        (fetch_snapshot, Message::FetchSnapshotResponse(gone), 0),
    ];
    for (sent, answer, version) in cases {
        let body = response(&node, &answer, version).expect("a response");
        let arrived = over_the_wire_response(&body, version);
        assert_eq!(accept_response(&sent, arrived), Ok(answer.clone()), "{answer:?} v{version}");
    }
    assert!(request(
        &peer,
        2,
        &Message::BeginQuorumEpochResponse { epoch: 1, error: RaftError::None, leader_id: None },
        1
    )
    .is_none());
}

#[test]
fn a_fetch_answer_carries_the_leaders_endpoint_from_v17() {
    let node = context(2);
    let answer = Message::FetchResponse(served_from_zero(Bytes::new(), 0));
    let Some(ResponseBody::Fetch(v17)) = response(&node, &answer, 17) else { panic!() };
    assert_eq!(v17.node_endpoints.len(), 1);
    assert_eq!((v17.node_endpoints[0].node_id, v17.node_endpoints[0].port), (2, 9093));
    let Some(ResponseBody::Fetch(v16)) = response(&node, &answer, 16) else { panic!() };
    assert!(v16.node_endpoints.is_empty());
}

#[test]
fn a_top_level_error_or_a_half_snapshot_id_is_dropped_with_its_reason() {
    let fetch = fetch(6, 0, 0, Uuid::ZERO);
    let refusal = ResponseBody::Fetch(Box::new(krabka_protocol::FetchResponse {
        error_code: ErrorCode::INCONSISTENT_CLUSTER_ID.code(),
        ..Default::default()
    }));
    assert_eq!(accept_response(&fetch, refusal), Err(Dropped::Error(ErrorCode::INCONSISTENT_CLUSTER_ID)));
    let answer = Message::FetchResponse(served_from_zero(Bytes::new(), 500));
    let Some(ResponseBody::Fetch(mut offer)) = response(&context(2), &answer, 17) else { panic!() };
    // An end offset without an epoch, as Kafka's follower, is logged and dropped.
    offer.responses[0].partitions[0].snapshot_id.end_offset = 400;
    let dropped = accept_response(&fetch, ResponseBody::Fetch(offer));
    assert_eq!(dropped, Err(Dropped::InvalidSnapshotId { end_offset: 400, epoch: -1 }));
    let vote_answer = ResponseBody::Vote(Box::default());
    assert_eq!(accept_response(&fetch, vote_answer), Err(Dropped::Unexpected));
}

#[test]
fn fetch_snapshot_requests_are_checked_as_kafka_checks_them() {
    let (sender, receiver) = (context(1), context(2));
    let id = SnapshotId { end_offset: 400, epoch: 5 };
    for version in 0..=1 {
        // v0 does not carry the sender's directory id.
        let directory_id = if version >= 1 { sender.directory_id } else { Uuid::ZERO };
        let asked =
            Message::FetchSnapshotRequest { epoch: 6, snapshot: id, position: 0, directory_id, max_bytes: 1 << 20 };
        let body = request(&sender, 2, &asked, version).unwrap();
        let arrived = over_the_wire_request(&body, version);
        let Accepted::Message { from, message } = accept_request(&receiver, &state(), arrived, version) else {
            panic!("refused at v{version}")
        };
        assert_eq!((from, message), (1, asked.clone()));
    }
    let asked = Message::FetchSnapshotRequest {
        epoch: 6,
        snapshot: id,
        position: 0,
        directory_id: Uuid::ZERO,
        max_bytes: 1 << 20,
    };
    let RequestBody::FetchSnapshot(mut other) = request(&sender, 2, &asked, 1).unwrap() else { panic!() };
    other.topics[0].name = "other".into();
    let Accepted::Refused(ResponseBody::FetchSnapshot(refused)) =
        accept_request(&receiver, &state(), RequestBody::FetchSnapshot(other.clone()), 1)
    else {
        panic!()
    };
    let partition = &refused.topics[0].partitions[0];
    assert_eq!(partition.error_code, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code());
    other.cluster_id = Some("another".into());
    let Accepted::Refused(ResponseBody::FetchSnapshot(refused)) =
        accept_request(&receiver, &state(), RequestBody::FetchSnapshot(other.clone()), 1)
    else {
        panic!()
    };
    assert_eq!(refused.error_code, ErrorCode::INCONSISTENT_CLUSTER_ID.code());
    other.topics.clear();
    other.cluster_id = None;
    let Accepted::Refused(ResponseBody::FetchSnapshot(refused)) =
        accept_request(&receiver, &state(), RequestBody::FetchSnapshot(other), 1)
    else {
        panic!()
    };
    assert_eq!(refused.error_code, ErrorCode::INVALID_REQUEST.code());
}

/// Whatever arrives (random requests and responses of every raft API at
/// every version, the generator's edge values included) is answered or
/// dropped, never a panic, and every refusal encodes at the request's
/// version.
#[test]
fn random_requests_and_responses_never_panic_the_mapping() {
    use krabka_protocol::testing::Rng;
    use krabka_protocol::{BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, VoteRequest};
    use krabka_protocol::{BeginQuorumEpochResponse, EndQuorumEpochResponse, VoteResponse};
    use krabka_protocol::{FetchSnapshotRequest, FetchSnapshotResponse as WireChunk};
    let node = context(2);
    let sent = requests();
    for seed in 0..20_000u64 {
        let mut rng = Rng::new(seed);
        let (request, version) = match seed % 5 {
            0 => (RequestBody::Vote(Box::new(VoteRequest::random(&mut rng, 2))), 2),
            1 => (RequestBody::BeginQuorumEpoch(Box::new(BeginQuorumEpochRequest::random(&mut rng, 1))), 1),
            2 => (RequestBody::EndQuorumEpoch(Box::new(EndQuorumEpochRequest::random(&mut rng, 1))), 1),
            3 => (RequestBody::FetchSnapshot(Box::new(FetchSnapshotRequest::random(&mut rng, 1))), 1),
            _ => (RequestBody::Fetch(Box::new(FetchRequest::random(&mut rng, 17))), 17),
        };
        if let Accepted::Refused(response) = accept_request(&node, &state(), request, version) {
            let mut buf = BytesMut::new();
            response.encode(&mut buf, version).unwrap();
        }
        let response = match seed % 5 {
            0 => ResponseBody::Vote(Box::new(VoteResponse::random(&mut rng, 2))),
            1 => ResponseBody::BeginQuorumEpoch(Box::new(BeginQuorumEpochResponse::random(&mut rng, 1))),
            2 => ResponseBody::EndQuorumEpoch(Box::new(EndQuorumEpochResponse::random(&mut rng, 1))),
            3 => ResponseBody::FetchSnapshot(Box::new(WireChunk::random(&mut rng, 1))),
            _ => ResponseBody::Fetch(Box::new(krabka_protocol::FetchResponse::random(&mut rng, 17))),
        };
        let _ = accept_response(&sent[(seed as usize / 4) % sent.len()].0, response);
    }
}

/// Leader 2's answer, in epoch 6, to a fetch from offset 0.
fn served_from_zero(records: Bytes, high_watermark: i64) -> FetchResponse {
    FetchResponse {
        epoch: 6,
        leader_id: Some(2),
        error: RaftError::None,
        fetch_offset: 0,
        last_fetched_epoch: 0,
        high_watermark,
        log_start_offset: 0,
        records,
        diverging_epoch: None,
        snapshot: None,
    }
}

/// One whole record batch.
fn one_batch() -> Bytes {
    use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
    let mut builder = RecordBatchBuilder::new(krabka_protocol::compression::Compression::None);
    builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(b"v"), headers: &[] }).unwrap();
    builder.build().unwrap().into_bytes()
}

#[test]
fn a_fetched_partial_batch_at_the_end_is_dropped_as_kafka_drops_it() {
    let batch = one_batch();
    let mut records = BytesMut::new();
    records.extend_from_slice(&batch);
    records.extend_from_slice(&batch[..batch.len() / 2]);
    let answer = Message::FetchResponse(served_from_zero(records.freeze(), 1));
    let body = response(&context(2), &answer, 17).unwrap();
    let sent = fetch(6, 0, 0, Uuid::ZERO);
    let Ok(Message::FetchResponse(read)) = accept_response(&sent, body) else { panic!() };
    assert_eq!(read.records, batch);
}

#[test]
fn describe_quorum_is_answered_as_kafkas_raft_client_answers_it() {
    use crate::describe::{QuorumDescription, ReplicaDescription};
    use krabka_protocol::describe_quorum_request::{PartitionData, TopicData};
    use krabka_protocol::DescribeQuorumRequest;
    let request = |topic: &str, partitions: &[i32]| DescribeQuorumRequest {
        topics: vec![TopicData {
            topic_name: topic.into(),
            partitions: partitions
                .iter()
                .map(|&p| PartitionData { partition_index: p, ..Default::default() })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let voter = |id| ReplicaDescription {
        replica_id: id,
        directory_id: Uuid::ZERO,
        log_end_offset: Some(10),
        last_fetch_ms: Some(1_000),
        last_caught_up_ms: (id == 1).then_some(1_000),
    };
    let description = QuorumDescription {
        leader_id: 1,
        epoch: 4,
        high_watermark: 10,
        voters: vec![voter(1), voter(2), voter(3)],
        observers: vec![voter(7)],
    };
    let context = context(1);
    let answer = |request: &DescribeQuorumRequest, leading: bool, version| {
        let description = leading.then_some(&description);
        describe_quorum_response(&context.listener, &context.voters, request, description, version)
    };
    let metadata = request(METADATA_TOPIC, &[0]);
    // Another partition, or more than one: UNKNOWN_TOPIC_OR_PARTITION in each named.
    for wrong in [request("orders", &[0]), request(METADATA_TOPIC, &[1]), request(METADATA_TOPIC, &[0, 1])] {
        let refused = answer(&wrong, true, 2);
        let codes: Vec<i16> = refused.topics[0].partitions.iter().map(|p| p.error_code).collect();
        assert_eq!(codes.len(), wrong.topics[0].partitions.len());
        assert!(codes.iter().all(|&c| c == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()));
    }
    let refused = answer(&metadata, false, 2);
    assert_eq!(refused.topics[0].partitions[0].error_code, ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
    assert!(refused.nodes.is_empty());
    for version in 0..=2 {
        let body = ResponseBody::DescribeQuorum(Box::new(answer(&metadata, true, version)));
        let ResponseBody::DescribeQuorum(described) = over_the_wire_response(&body, version) else { unreachable!() };
        let partition = &described.topics[0].partitions[0];
        assert_eq!((partition.leader_id, partition.leader_epoch, partition.high_watermark), (1, 4, 10));
        let ids: Vec<i32> = partition.current_voters.iter().map(|v| v.replica_id).collect();
        assert_eq!((ids, partition.observers[0].replica_id), (vec![1, 2, 3], 7));
        // Timestamps from v1 (-1 where unknown), the voters' endpoints from v2.
        let caught_up: Vec<i64> = partition.current_voters.iter().map(|v| v.last_caught_up_timestamp).collect();
        assert_eq!(caught_up, if version == 0 { vec![-1, -1, -1] } else { vec![1_000, -1, -1] });
        let endpoints: Vec<(i32, String, u16)> =
            described.nodes.iter().map(|n| (n.node_id, n.listeners[0].host.clone(), n.listeners[0].port)).collect();
        let expected: Vec<(i32, String, u16)> =
            if version < 2 { Vec::new() } else { (1..=3).map(|id| (id, format!("10.0.0.{id}"), 9093)).collect() };
        assert_eq!(endpoints, expected);
    }
}

/// The answer Kafka's network client gives for a pre-vote to a voter that
/// speaks only Vote v0-v1 reaches the node as the answer to its round.
#[test]
fn an_unsupported_version_vote_answer_reaches_the_node() {
    for pre_vote in [true, false] {
        let sent = Message::VoteRequest { epoch: 4, last_epoch: 3, last_offset: 10, pre_vote };
        let answer = accept_response(&sent, unsupported_vote_response());
        let expected = Message::VoteResponse {
            epoch: 4,
            error: RaftError::UnsupportedVersion,
            granted: false,
            pre_vote,
            leader_id: None,
        };
        assert_eq!(answer, Ok(expected));
    }
    // A pre-vote crosses the wire from v2 only: below it the flag is lost.
    let pre_vote = Message::VoteRequest { epoch: 4, last_epoch: 3, last_offset: 10, pre_vote: true };
    let body = request(&context(1), 2, &pre_vote, PRE_VOTE_MIN_VERSION).unwrap();
    let RequestBody::Vote(arrived) = over_the_wire_request(&body, PRE_VOTE_MIN_VERSION) else { panic!() };
    assert!(arrived.topics[0].partitions[0].pre_vote);
}

/// Kafka's follower truncates only on a DivergingEpoch whose epoch is 0 or
/// more; one of epoch -1 is no divergence, whatever its end offset.
#[test]
fn a_diverging_epoch_of_minus_one_is_none() {
    let sent = fetch(6, 120, 6, Uuid::ZERO);
    let answer = FetchResponse {
        epoch: 6,
        leader_id: Some(2),
        error: RaftError::None,
        fetch_offset: 120,
        last_fetched_epoch: 6,
        high_watermark: 118,
        log_start_offset: 0,
        records: Bytes::new(),
        diverging_epoch: None,
        snapshot: None,
    };
    for ((epoch, end_offset), read_as) in [((-1, -1), None), ((-1, 100), None), ((5, 100), Some((5, 100)))] {
        let Some(ResponseBody::Fetch(mut body)) = response(&context(2), &Message::FetchResponse(answer.clone()), 17)
        else {
            panic!()
        };
        let diverging = &mut body.responses[0].partitions[0].diverging_epoch;
        (diverging.epoch, diverging.end_offset) = (epoch, end_offset);
        let arrived = over_the_wire_response(&ResponseBody::Fetch(body), 17);
        let Ok(Message::FetchResponse(got)) = accept_response(&sent, arrived) else { panic!() };
        assert_eq!(got.diverging_epoch, read_as, "({epoch}, {end_offset})");
    }
}
