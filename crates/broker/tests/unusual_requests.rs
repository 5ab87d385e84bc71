//! Valid requests at unusual values, each answered as Kafka 4.3.1 answers
//! it, with the broker and the connection still up: partition counts past
//! the controller's per-operation cap, ListOffsets at the versions without a
//! leader epoch, and parked requests whose connection goes away.

mod support;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use krabka_protocol::create_partitions_request::CreatePartitionsTopic;
use krabka_protocol::create_topics_request::CreatableTopic;
use krabka_protocol::fetch_request::{FetchPartition, FetchTopic};
use krabka_protocol::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
use krabka_protocol::*;
use support::{BrokerProcess, RawClient};

const POLICY_VIOLATION: i16 = 44;
const TOO_MANY_PARTITIONS: &str = "Excessively large number of partitions per request.";
const TOO_MANY_RECORDS: &str = "Unable to perform excessively large batch operation.";

fn topic(name: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic { name: name.into(), num_partitions: partitions, replication_factor: 1, ..Default::default() }
}

fn create_topics(client: &mut RawClient, topics: Vec<CreatableTopic>, validate_only: bool) -> CreateTopicsResponse {
    let request = CreateTopicsRequest { topics, timeout_ms: 10_000, validate_only, ..Default::default() };
    client.request(ApiKey::CreateTopics, 7, &request)
}

fn create_partitions(client: &mut RawClient, name: &str, count: i32, validate_only: bool) -> (i16, Option<String>) {
    let request = CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic { name: name.into(), count, assignments: None, ..Default::default() }],
        timeout_ms: 10_000,
        validate_only,
        ..Default::default()
    };
    let response: CreatePartitionsResponse = client.request(ApiKey::CreatePartitions, 3, &request);
    (response.results[0].error_code, response.results[0].error_message.clone())
}

fn batch_of(value: &str) -> bytes::Bytes {
    let mut builder = RecordBatchBuilder::new(krabka_protocol::compression::Compression::None);
    let record = NewRecord { timestamp_ms: 1_700_000_000_000, key: None, value: Some(value.as_bytes()), headers: &[] };
    builder.append(&record).expect("append");
    builder.build().expect("batch").into_bytes()
}

fn produce_one(client: &mut RawClient, name: &str, value: &str) {
    let request = ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: name.into(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(batch_of(value)),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: ProduceResponse = client.request(ApiKey::Produce, 11, &request);
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
}

fn assert_api_versions_answered(client: &mut RawClient) {
    let response: ApiVersionsResponse = client.request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(response.error_code, 0, "the connection still serves requests");
}

#[test]
fn partition_counts_past_the_per_operation_cap_are_refused_and_the_broker_stays_up() {
    let mut broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    let rss_before = broker.rss_kib().expect("rss");

    // One topic of i32::MAX partitions: refused before anything is built.
    let response = create_topics(&mut client, vec![topic("huge", i32::MAX)], false);
    assert_eq!(response.topics[0].error_code, POLICY_VIOLATION);
    assert_eq!(response.topics[0].error_message.as_deref(), Some(TOO_MANY_PARTITIONS));
    // The cap counts the partitions of every topic of the request, -1 as num.partitions (1).
    let response = create_topics(&mut client, vec![topic("a", 5_000), topic("b", 5_000), topic("c", -1)], true);
    assert!(response.topics.iter().all(|t| t.error_code == POLICY_VIOLATION), "{response:?}");
    assert!(response.topics.iter().all(|t| t.error_message.as_deref() == Some(TOO_MANY_PARTITIONS)));
    // At the cap the partition check passes; the records (topic + partitions) are one too many.
    let response = create_topics(&mut client, vec![topic("at-cap", 10_000)], true);
    assert_eq!(response.topics[0].error_code, POLICY_VIOLATION, "{response:?}");
    assert_eq!(response.topics[0].error_message.as_deref(), Some(TOO_MANY_RECORDS));
    let response = create_topics(&mut client, vec![topic("below-cap", 9_999)], true);
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");

    let response = create_topics(&mut client, vec![topic("small", 1)], false);
    assert_eq!(response.topics[0].error_code, 0);
    for validate_only in [true, false] {
        let (error, message) = create_partitions(&mut client, "small", i32::MAX, validate_only);
        assert_eq!((error, message.as_deref()), (POLICY_VIOLATION, Some(TOO_MANY_RECORDS)));
    }
    assert_eq!(create_partitions(&mut client, "small", 10_001, true).0, 0, "10,000 new partitions fit");
    assert_eq!(create_partitions(&mut client, "small", 10_002, true).0, POLICY_VIOLATION);
    assert_eq!(create_partitions(&mut client, "small", 3, false).0, 0);

    assert_api_versions_answered(&mut client);
    assert!(broker.is_running());
    let rss_after = broker.rss_kib().expect("rss");
    assert!(rss_after < rss_before + 64 * 1024, "RSS grew from {rss_before} KiB to {rss_after} KiB");
}

fn list_offsets(name: &str, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest {
        replica_id: -1,
        topics: vec![ListOffsetsTopic {
            name: name.into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: -1,
                timestamp,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn list_offsets_is_answered_at_every_version_pipelined_on_one_connection() {
    let broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    assert_eq!(create_topics(&mut client, vec![topic("offsets", 1)], false).topics[0].error_code, 0);
    for i in 0..3 {
        produce_one(&mut client, "offsets", &format!("record-{i}"));
    }
    // Sent back to back, as kafkajs and aiokafka pipeline them: one failure
    // would lose every response behind it.
    let mut sent = Vec::new();
    for version in 1..=10 {
        for (timestamp, offset) in [(-1, 3), (-2, 0)] {
            sent.push((
                version,
                offset,
                client.send(ApiKey::ListOffsets, version, &list_offsets("offsets", timestamp)),
            ));
        }
    }
    for (version, offset, correlation_id) in sent {
        let response: ListOffsetsResponse = client.receive(ApiKey::ListOffsets, version, correlation_id);
        let partition = &response.topics[0].partitions[0];
        assert_eq!((partition.error_code, partition.offset), (0, offset), "v{version}: {partition:?}");
        let epoch = if version >= 4 { 0 } else { -1 };
        assert_eq!(partition.leader_epoch, epoch, "v{version}");
    }
    assert_api_versions_answered(&mut client);
}

fn parked_fetch(name: &str) -> FetchRequest {
    FetchRequest {
        max_wait_ms: 60_000,
        min_bytes: 1,
        max_bytes: 1024 * 1024,
        topics: vec![FetchTopic {
            topic: name.into(),
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: 0,
                partition_max_bytes: 1024 * 1024,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Closes clients whose requests are parked; the broker must close its side
/// at once (no CLOSE-WAIT left), not when the waits run out.
fn close_parked(broker: &BrokerProcess, clients: Vec<RawClient>) {
    std::thread::sleep(Duration::from_millis(500));
    for client in &clients {
        client.stream.shutdown(Shutdown::Both).expect("close");
    }
    drop(clients);
    support::wait_for("the broker to close the parked connections", Duration::from_secs(10), || {
        broker.close_wait_sockets() == 0
    });
}

#[test]
fn a_parked_fetch_does_not_outlive_its_connection() {
    let broker = BrokerProcess::start(&[]);
    let mut admin = RawClient::connect(&broker.bootstrap());
    assert_eq!(create_topics(&mut admin, vec![topic("quiet", 1)], false).topics[0].error_code, 0);
    let mut clients: Vec<RawClient> = (0..5).map(|_| RawClient::connect(&broker.bootstrap())).collect();
    for client in &mut clients {
        client.send(ApiKey::Fetch, 12, &parked_fetch("quiet"));
    }
    close_parked(&broker, clients);
    assert_api_versions_answered(&mut admin);
}

#[test]
fn a_connection_whose_only_activity_is_a_parked_fetch_is_idle() {
    let broker = BrokerProcess::start(&["connections.max.idle.ms=1500"]);
    let mut client = RawClient::connect(&broker.bootstrap());
    assert_eq!(create_topics(&mut client, vec![topic("quiet", 1)], false).topics[0].error_code, 0);
    client.send(ApiKey::Fetch, 12, &parked_fetch("quiet"));
    let started = Instant::now();
    client.stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let mut byte = [0u8; 1];
    let read = client.stream.read(&mut byte);
    assert!(matches!(read, Ok(0)), "the broker closes the idle connection (read: {read:?})");
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(10), "closed after {waited:?}, the fetch waits 60 s");
    // Active connections are not idle: a request every 500 ms keeps one open for 3 s.
    let mut busy = RawClient::connect(&broker.bootstrap());
    for _ in 0..6 {
        assert_api_versions_answered(&mut busy);
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_api_versions_answered(&mut busy);
    let _ = busy.stream.flush();
}

/// Connects to `bootstrap` until `stop` is set; every connection that
/// opens is asked for ApiVersions. Returns when the first connection opened
/// (wall clock), how many opened, and the slowest answer.
fn probe_until(bootstrap: &str, stop: &AtomicBool) -> (Option<SystemTime>, usize, Duration) {
    let (mut first, mut opened, mut slowest) = (None, 0, Duration::ZERO);
    while !stop.load(Ordering::Relaxed) {
        let Ok(stream) = std::net::TcpStream::connect(bootstrap) else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        first = first.or(Some(SystemTime::now()));
        opened += 1;
        let mut client = RawClient::from_stream(stream);
        let asked = Instant::now();
        assert_api_versions_answered(&mut client);
        slowest = slowest.max(asked.elapsed());
    }
    (first, opened, slowest)
}

/// The time of a log line, from its RFC 3339 UTC prefix
/// (`2026-12-01T10:08:26.530450Z`).
fn log_line_time(line: &str) -> SystemTime {
    let stamp = line.split_whitespace().next().expect("timestamp");
    let number = |range: std::ops::Range<usize>| -> i64 { stamp[range].parse().expect("timestamp digits") };
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    // Days from 1970-01-01 to the date (the civil-from-days inverse).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + number(11..13) * 3_600 + number(14..16) * 60 + number(17..19);
    let micros: u64 = stamp[20..26].parse().expect("microseconds");
    UNIX_EPOCH + Duration::from_secs(seconds as u64) + Duration::from_micros(micros)
}

fn produce_to_every_partition(client: &mut RawClient, name: &str, partitions: i32) {
    let records = batch_of("recovered");
    let request = ProduceRequest {
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![TopicProduceData {
            name: name.into(),
            partition_data: (0..partitions)
                .map(|index| PartitionProduceData { index, records: Some(records.clone()), ..Default::default() })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: ProduceResponse = client.request(ApiKey::Produce, 11, &request);
    assert!(response.responses[0].partition_responses.iter().all(|p| p.error_code == 0));
}

#[test]
fn a_broker_recovering_after_kill_9_does_not_accept_connections_it_cannot_answer() {
    const PARTITIONS: i32 = 300;
    let mut broker = BrokerProcess::start(&["num.recovery.threads.per.data.dir=2"]);
    let mut client = RawClient::connect(&broker.bootstrap());
    assert_eq!(create_topics(&mut client, vec![topic("many", PARTITIONS)], false).topics[0].error_code, 0);
    produce_to_every_partition(&mut client, "many", PARTITIONS);
    drop(client);
    broker.kill9();
    let stop = AtomicBool::new(false);
    let bootstrap = broker.bootstrap();
    let (first, opened, slowest, restart) = std::thread::scope(|scope| {
        let prober = scope.spawn(|| probe_until(&bootstrap, &stop));
        let started = Instant::now();
        broker.restart();
        let restart = started.elapsed();
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        let (first, opened, slowest) = prober.join().expect("prober");
        (first, opened, slowest, restart)
    });
    println!("restart with {PARTITIONS} partitions after kill -9: {restart:?}; {opened} probe connections");
    let log = broker.log();
    let loaded: Vec<&str> = log.lines().filter(|l| l.contains("groups loaded")).collect();
    for line in log.lines().filter(|l| l.contains("loaded")) {
        println!("{line}");
    }
    let ready = log_line_time(loaded.last().expect("the restart loaded its groups"));
    let first = first.expect("the prober reached the restarted broker");
    // Nothing is accepted before the storage is open: during recovery a
    // connection would wait for all of it.
    assert!(first >= ready, "a connection opened {:?} before the broker was ready", ready.duration_since(first));
    assert!(slowest < Duration::from_secs(2), "a connection waited {slowest:?} (restart took {restart:?})");
    let mut client = RawClient::connect(&broker.bootstrap());
    let request = FetchRequest { max_wait_ms: 0, ..parked_fetch("many") };
    let response: FetchResponse = client.request(ApiKey::Fetch, 12, &request);
    assert!(response.responses[0].partitions[0].records.as_ref().is_some_and(|r| !r.is_empty()));
}

/// A CreateTopics v7 frame cut short inside its body: the header parses,
/// the body does not.
fn undecodable_frame() -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    let request = CreateTopicsRequest { topics: vec![topic("cut", 1)], timeout_ms: 1000, ..Default::default() };
    krabka_protocol::frame::encode_request(&mut buf, ApiKey::CreateTopics, 7, 1, Some("cut"), &request)
        .expect("encode");
    let mut frame = buf.to_vec();
    frame.truncate(frame.len() - 6);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}

#[test]
fn a_failure_that_repeats_per_request_is_logged_once_and_counted() {
    let broker = BrokerProcess::start(&["krabka.metrics.listener=127.0.0.1:0"]);
    let frame = undecodable_frame();
    for _ in 0..200 {
        let mut client = RawClient::connect(&broker.bootstrap());
        client.stream.write_all(&frame).expect("write");
        assert!(client.is_closed(), "Kafka closes a connection whose request does not decode");
    }
    let (status, body) = broker.http_get("/metrics");
    assert_eq!(status, 200);
    let metrics = String::from_utf8(body).expect("utf-8");
    assert!(
        metrics.lines().any(|l| l == "krabka_request_failures_total{kind=\"undecodable_request\"} 200"),
        "every failure is counted:\n{}",
        metrics.lines().filter(|l| l.contains("failures")).collect::<Vec<_>>().join("\n")
    );
    let logged = broker.log().lines().filter(|l| l.contains("cannot decode CreateTopics")).count();
    assert_eq!(logged, 1, "logged once, not per request:\n{}", broker.log());
    let mut client = RawClient::connect(&broker.bootstrap());
    assert_api_versions_answered(&mut client);
}

#[test]
fn max_incremental_fetch_session_cache_slots_is_honoured_at_zero() {
    for (slots, sessions) in [("0", false), ("1000", true)] {
        let broker = BrokerProcess::start(&[&format!("max.incremental.fetch.session.cache.slots={slots}")]);
        let mut client = RawClient::connect(&broker.bootstrap());
        assert_eq!(create_topics(&mut client, vec![topic("sessions", 1)], false).topics[0].error_code, 0);
        // Session id 0 with epoch 0 asks for a new incremental session.
        let request = FetchRequest { max_wait_ms: 0, session_id: 0, session_epoch: 0, ..parked_fetch("sessions") };
        let response: FetchResponse = client.request(ApiKey::Fetch, 12, &request);
        assert_eq!(response.error_code, 0);
        assert_eq!(response.session_id != 0, sessions, "slots={slots}: session id {}", response.session_id);
    }
}

fn join_group(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: "parked".into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 60_000,
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![krabka_protocol::join_group_request::JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: bytes::Bytes::from_static(b"meta"),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn a_parked_join_group_does_not_outlive_its_connection() {
    // The first rebalance of a new group waits this long for more members.
    let broker = BrokerProcess::start(&["group.initial.rebalance.delay.ms=60000"]);
    let mut clients: Vec<RawClient> = (0..3).map(|_| RawClient::connect(&broker.bootstrap())).collect();
    for client in &mut clients {
        let first: JoinGroupResponse = client.request(ApiKey::JoinGroup, 9, &join_group(""));
        assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
        // Parked until the rebalance completes, a minute from now.
        client.send(ApiKey::JoinGroup, 9, &join_group(&first.member_id));
    }
    close_parked(&broker, clients);
    let mut admin = RawClient::connect(&broker.bootstrap());
    assert_api_versions_answered(&mut admin);
}

#[test]
fn a_metadata_request_naming_a_missing_topic_twice_creates_it_once() {
    let broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    let wanted =
        || krabka_protocol::metadata_request::MetadataRequestTopic { name: Some("twice".into()), ..Default::default() };
    let request = MetadataRequest {
        topics: Some(vec![wanted(), wanted()]),
        allow_auto_topic_creation: true,
        ..Default::default()
    };
    let _: MetadataResponse = client.request(ApiKey::Metadata, 12, &request);
    let all: MetadataResponse =
        client.request(ApiKey::Metadata, 12, &MetadataRequest { topics: None, ..Default::default() });
    let created: Vec<_> = all.topics.iter().filter(|t| t.name.as_deref() == Some("twice")).collect();
    assert_eq!(created.len(), 1, "{:?}", all.topics);
    assert_eq!(created[0].error_code, 0);
    assert_api_versions_answered(&mut client);
}

/// A produce to several partitions wakes a fetch parked on them once they
/// are all appended (as Kafka completes delayed fetches after the whole
/// request), so the fetch answers with every partition's records at once.
#[test]
fn a_fetch_parked_on_two_partitions_answers_with_both_after_one_produce() {
    let broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    assert_eq!(create_topics(&mut client, vec![topic("pair", 2)], false).topics[0].error_code, 0);
    for _ in 0..20 {
        let mut fetcher = RawClient::connect(&broker.bootstrap());
        let mut request = parked_fetch("pair");
        let mut second = request.topics[0].partitions[0].clone();
        second.partition = 1;
        request.topics[0].partitions.push(second);
        // Each round starts at the partitions' current ends.
        let now: FetchResponse =
            fetcher.request(ApiKey::Fetch, 12, &FetchRequest { max_wait_ms: 0, ..request.clone() });
        for (p, data) in request.topics[0].partitions.iter_mut().zip(&now.responses[0].partitions) {
            p.fetch_offset = data.high_watermark;
        }
        let id = fetcher.send(ApiKey::Fetch, 12, &request);
        std::thread::sleep(Duration::from_millis(100));
        produce_to_every_partition(&mut client, "pair", 2);
        let response: FetchResponse = fetcher.receive(ApiKey::Fetch, 12, id);
        let with_records = response.responses[0]
            .partitions
            .iter()
            .filter(|p| p.records.as_ref().is_some_and(|r| !r.is_empty()))
            .count();
        assert_eq!(with_records, 2, "both partitions' records in the one answer: {response:?}");
    }
}
