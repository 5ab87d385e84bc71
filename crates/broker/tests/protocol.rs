//! Black-box protocol tests over raw sockets against the real broker binary:
//! produce and fetch byte for byte, restarts after SIGTERM and SIGKILL,
//! idempotence errors, long polling, pipelining, and every kind of bad input
//! (each answered as Kafka 4.3.1 answers it, with nothing acknowledged lost).

mod support;

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use krabka_protocol::compression::Compression;
use krabka_protocol::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use krabka_protocol::fetch_request::{FetchPartition, FetchTopic};
use krabka_protocol::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::records::{NewRecord, RecordBatchBuilder, RecordBatches};
use krabka_protocol::*;
use support::{BrokerProcess, RawClient};

const TOPIC: &str = "raw";

fn create_topic(client: &mut RawClient, name: &str, partitions: i32, configs: &[(&str, &str)]) -> CreateTopicsResponse {
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: 1,
            configs: configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig {
                    name: k.to_string(),
                    value: Some(v.to_string()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    client.request(ApiKey::CreateTopics, 7, &request)
}

fn batch(producer: Option<(i64, i16, i32)>, first_value: u32, count: u32, compression: Compression) -> Bytes {
    let mut builder = RecordBatchBuilder::new(compression);
    if let Some((id, epoch, sequence)) = producer {
        builder = builder.with_producer(id, epoch, sequence);
    }
    for i in first_value..first_value + count {
        let value = format!("value-{i}");
        let key = format!("key-{i}");
        builder
            .append(&NewRecord {
                timestamp_ms: 1_700_000_000_000 + i64::from(i),
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
                headers: &[],
            })
            .expect("append");
    }
    builder.build().expect("build").into_bytes()
}

fn produce(
    client: &mut RawClient,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> produce_response::PartitionProduceResponse {
    let request = ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(records),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: ProduceResponse = client.request(ApiKey::Produce, 11, &request);
    response.responses[0].partition_responses[0].clone()
}

fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32, min_bytes: i32) -> FetchRequest {
    FetchRequest {
        max_wait_ms,
        min_bytes,
        max_bytes: 50 * 1024 * 1024,
        topics: vec![FetchTopic {
            topic: topic.into(),
            partitions: vec![FetchPartition {
                partition,
                fetch_offset: offset,
                partition_max_bytes: 10 * 1024 * 1024,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn fetch(client: &mut RawClient, topic: &str, partition: i32, offset: i64) -> fetch_response::PartitionData {
    let response: FetchResponse = client.request(ApiKey::Fetch, 12, &fetch_request(topic, partition, offset, 0, 0));
    assert_eq!(response.error_code, 0);
    response.responses[0].partitions[0].clone()
}

/// Every record value in a fetched partition, in offset order.
fn values(data: &fetch_response::PartitionData) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for batch in RecordBatches::new(data.records.clone().unwrap_or_default()) {
        let batch = batch.expect("valid batch");
        batch.validate().expect("crc");
        for record in batch.records(usize::MAX).expect("records") {
            let record = record.expect("record");
            out.push((record.offset, String::from_utf8(record.value.unwrap_or_default().to_vec()).unwrap()));
        }
    }
    out
}

fn init_producer_id(client: &mut RawClient) -> (i64, i16) {
    let response: InitProducerIdResponse =
        client.request(ApiKey::InitProducerId, 5, &support::idempotent_producer_init());
    assert_eq!(response.error_code, 0);
    (response.producer_id, response.producer_epoch)
}

#[test]
fn api_versions_lists_served_apis_and_answers_unknown_versions_with_v0() {
    let broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    let response: ApiVersionsResponse = client.request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(response.error_code, 0);
    let produce = response.api_keys.iter().find(|k| k.api_key == ApiKey::Produce as i16).expect("produce");
    assert_eq!((produce.min_version, produce.max_version), (3, 13));
    let fetch = response.api_keys.iter().find(|k| k.api_key == ApiKey::Fetch as i16).expect("fetch");
    assert_eq!(fetch.min_version, 4);
    // An ApiVersions version from the future: v0 error response with the ranges.
    let mut raw = bytes::BytesMut::new();
    use bytes::BufMut;
    raw.put_i32(0);
    raw.put_i16(ApiKey::ApiVersions as i16);
    raw.put_i16(99);
    raw.put_i32(7);
    raw.put_i16(-1);
    let size = (raw.len() - 4) as i32;
    raw[..4].copy_from_slice(&size.to_be_bytes());
    client.stream.write_all(&raw).unwrap();
    let mut frame = client.read_frame().unwrap();
    let header = frame::parse_response_header(ApiKey::ApiVersions, 0, &mut frame).unwrap();
    assert_eq!(header.correlation_id, 7);
    let response = ApiVersionsResponse::decode(&mut frame, 0).unwrap();
    assert_eq!(response.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(!response.api_keys.is_empty());
}

/// A fault in a memory-mapped index write (a full disk) arrives as
/// SIGBUS: the broker halts with status 1 and says why, as for a failed
/// write, instead of dying without a word.
#[test]
fn a_sigbus_halts_the_broker_with_a_reason() {
    let mut broker = BrokerProcess::start(&[]);
    let pid = broker.pid().expect("running");
    let sent = std::process::Command::new("kill").args(["-BUS", &pid.to_string()]).status().unwrap();
    assert!(sent.success());
    support::wait_for("the broker to halt", Duration::from_secs(10), || !broker.is_running());
    let status = broker.stop();
    assert_eq!(status.code(), Some(1), "{status:?}");
    assert!(broker.log().contains("SIGBUS, a write through a memory-mapped index failed"), "{}", broker.log());
}

#[test]
fn produce_and_fetch_survive_sigterm_and_sigkill_restarts() {
    let mut broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    let created = create_topic(&mut client, TOPIC, 2, &[]);
    assert_eq!(created.topics[0].error_code, 0, "{:?}", created.topics[0].error_message);
    let (producer_id, epoch) = init_producer_id(&mut client);
    let codecs = [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
    let mut sent = Vec::new();
    for (i, codec) in codecs.iter().enumerate() {
        let records = batch(Some((producer_id, epoch, i as i32 * 10)), i as u32 * 10, 10, *codec);
        let response = produce(&mut client, TOPIC, 0, records.clone());
        assert_eq!(response.error_code, 0, "{:?}", response.error_message);
        assert_eq!(response.base_offset, i as i64 * 10);
        sent.push(records);
    }
    let expected: Vec<(i64, String)> = (0..50).map(|i| (i, format!("value-{i}"))).collect();
    let data = fetch(&mut client, TOPIC, 0, 0);
    assert_eq!(data.high_watermark, 50);
    assert_eq!(values(&data), expected);
    // The stored bytes are the producer's, with only the base offset patched.
    let stored = data.records.clone().unwrap();
    assert_eq!(stored.len(), sent.iter().map(Bytes::len).sum::<usize>());

    // Graceful stop: exit 0 and the clean-shutdown marker.
    drop(client);
    let status = broker.stop();
    assert!(status.success(), "exit status {status}\n{}", broker.log());
    assert!(broker.data_dir().join(".kafka_cleanshutdown").exists());
    assert!(broker.data_dir().join("recovery-point-offset-checkpoint").exists());
    broker.restart();
    let mut client = RawClient::connect(&broker.bootstrap());
    assert_eq!(values(&fetch(&mut client, TOPIC, 0, 0)), expected);
    // A clean shutdown leaves nothing to repair, the metadata log included.
    let log = broker.log();
    assert!(!log.contains("corrupt") && !log.contains("recovered"), "{log}");

    // The producer's state survived: a retry of its last batch is a duplicate
    // answered with the original offsets; the next sequence appends.
    let retry = produce(&mut client, TOPIC, 0, sent[4].clone());
    assert_eq!((retry.error_code, retry.base_offset), (0, 40));
    let next = produce(&mut client, TOPIC, 0, batch(Some((producer_id, epoch, 50)), 50, 5, Compression::Lz4));
    assert_eq!((next.error_code, next.base_offset), (0, 50));

    // SIGKILL: every acknowledged record is still there after recovery.
    drop(client);
    broker.kill9();
    assert!(!broker.data_dir().join(".kafka_cleanshutdown").exists());
    broker.restart();
    let mut client = RawClient::connect(&broker.bootstrap());
    let after = values(&fetch(&mut client, TOPIC, 0, 0));
    assert_eq!(after.len(), 55);
    assert_eq!(after[54], (54, "value-54".to_string()));
    let metadata: MetadataResponse =
        client.request(ApiKey::Metadata, 12, &MetadataRequest { topics: None, ..Default::default() });
    let topic = metadata.topics.iter().find(|t| t.name.as_deref() == Some(TOPIC)).expect("topic survives");
    assert_eq!(topic.partitions.len(), 2);
    // Producer ids are never reused across restarts.
    let (new_id, _) = init_producer_id(&mut client);
    assert_ne!(new_id, producer_id);
}

#[test]
fn idempotence_errors_match_kafka() {
    let broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    create_topic(&mut client, TOPIC, 1, &[]);
    let (id, epoch) = init_producer_id(&mut client);
    assert_eq!(produce(&mut client, TOPIC, 0, batch(Some((id, epoch, 0)), 0, 3, Compression::None)).error_code, 0);
    // A gap in sequence numbers.
    let gap = produce(&mut client, TOPIC, 0, batch(Some((id, epoch, 7)), 3, 3, Compression::None));
    assert_eq!(gap.error_code, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER");
    // A newer epoch fences the old one.
    assert_eq!(produce(&mut client, TOPIC, 0, batch(Some((id, epoch + 1, 0)), 3, 1, Compression::None)).error_code, 0);
    let fenced = produce(&mut client, TOPIC, 0, batch(Some((id, epoch, 3)), 4, 1, Compression::None));
    assert_eq!(fenced.error_code, 47, "INVALID_PRODUCER_EPOCH");
    assert_eq!(values(&fetch(&mut client, TOPIC, 0, 0)).len(), 4);
}

/// The sequence rules behind the duplicates of an early cut-off
/// (docs/reliability.md, "Duplicates after an early cut-off"), side by
/// side with Apache Kafka 4.3.1 over raw requests: a leader that does not
/// know a producer takes its batch at any sequence (KIP-360), refuses the
/// earlier sequences after it (OUT_OF_ORDER_SEQUENCE_NUMBER), and takes
/// sequence 0 again under the next epoch, which is how a producer that
/// bumps its epoch writes a batch a second time. Both brokers answer alike.
#[test]
fn sequence_rules_of_an_unknown_producer_match_kafka_side_by_side() {
    let krabka = BrokerProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let _kafka = support::KafkaNode::start_combined(dir.path(), port, support::free_port(), "");
    let kafka_bootstrap = format!("127.0.0.1:{port}");
    support::wait_for("Kafka to serve", Duration::from_secs(120), || {
        std::net::TcpStream::connect(&kafka_bootstrap).is_ok()
    });
    let answers = |bootstrap: &str| -> Vec<i16> {
        let mut client = RawClient::connect(bootstrap);
        support::wait_for("the topic", Duration::from_secs(60), || {
            let code = create_topic(&mut client, TOPIC, 1, &[]).topics[0].error_code;
            code == 0 || code == ErrorCode::TOPIC_ALREADY_EXISTS.code()
        });
        support::wait_for("the partition's leader", Duration::from_secs(60), || {
            let request = MetadataRequest { topics: None, ..Default::default() };
            let answer: MetadataResponse = client.request(ApiKey::Metadata, 12, &request);
            let topic = answer.topics.iter().find(|t| t.name.as_deref() == Some(TOPIC));
            topic.is_some_and(|t| t.partitions.first().is_some_and(|p| p.leader_id >= 0))
        });
        // A fresh broker may still be fetching its first block of producer ids.
        let mut producer = None;
        support::wait_for("a producer id", Duration::from_secs(60), || {
            let request = support::idempotent_producer_init();
            let answer: InitProducerIdResponse = client.request(ApiKey::InitProducerId, 5, &request);
            producer = (answer.error_code == 0).then_some((answer.producer_id, answer.producer_epoch));
            producer.is_some()
        });
        let (id, epoch) = producer.expect("a producer id");
        let mut send = |epoch, sequence, first| {
            let records = batch(Some((id, epoch, sequence)), first, 3, Compression::None);
            produce(&mut client, TOPIC, 0, records).error_code
        };
        let codes = vec![
            send(epoch, 165, 0),   // unknown producer, mid-sequence: taken
            send(epoch, 0, 3),     // the earlier batch, retried: out of order
            send(epoch + 1, 0, 6), // the next epoch from 0: taken (a copy, if it was a retry)
            send(epoch + 1, 7, 9), // a gap: out of order
            send(epoch, 3, 12),    // the fenced epoch
        ];
        let written = values(&fetch(&mut client, TOPIC, 0, 0)).len();
        assert_eq!(written, 6, "{bootstrap}: the batches taken");
        codes
    };
    let expected = [0, 45, 0, 45, 47];
    assert_eq!(answers(&krabka.bootstrap()), expected, "krabka");
    assert_eq!(answers(&kafka_bootstrap), expected, "Kafka 4.3.1");
}

#[test]
fn long_poll_is_woken_by_an_append_and_responses_keep_request_order() {
    let broker = BrokerProcess::start(&[]);
    let mut consumer = RawClient::connect(&broker.bootstrap());
    let mut producer = RawClient::connect(&broker.bootstrap());
    create_topic(&mut producer, TOPIC, 1, &[]);
    // Wait expires: an empty answer after about max_wait_ms.
    let started = Instant::now();
    let response: FetchResponse = consumer.request(ApiKey::Fetch, 12, &fetch_request(TOPIC, 0, 0, 300, 1));
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(response.responses[0].partitions[0].records.as_ref().is_none_or(|r| r.is_empty()));
    // A parked fetch, then ApiVersions pipelined behind it on the same connection.
    let started = Instant::now();
    let fetch_id = consumer.send(ApiKey::Fetch, 12, &fetch_request(TOPIC, 0, 0, 20_000, 1));
    let versions_id = consumer.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(produce(&mut producer, TOPIC, 0, batch(None, 0, 1, Compression::None)).error_code, 0);
    let response: FetchResponse = consumer.receive(ApiKey::Fetch, 12, fetch_id);
    assert!(started.elapsed() < Duration::from_secs(10), "the append woke the fetch");
    assert_eq!(values(&response.responses[0].partitions[0]), vec![(0, "value-0".to_string())]);
    let versions: ApiVersionsResponse = consumer.receive(ApiKey::ApiVersions, 3, versions_id);
    assert_eq!(versions.error_code, 0);
}

/// The value of an unlabelled counter on the broker's /metrics page.
fn counter(broker: &BrokerProcess, name: &str) -> u64 {
    let (status, body) = broker.http_get("/metrics");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    let line = text.lines().find(|l| l.split_whitespace().next() == Some(name));
    let value = line.and_then(|l| l.split_whitespace().nth(1)).unwrap_or_else(|| panic!("no {name} in\n{text}"));
    value.parse().unwrap()
}

/// Issue 15: a fetch parked on partition 0 sleeps through 1,000 produces to
/// partition 1 (no answer, and not even woken to look), then answers with
/// partition 0's record as soon as it is produced.
#[test]
fn a_fetch_parked_on_one_partition_sleeps_through_appends_to_another() {
    let broker = BrokerProcess::start(&["krabka.metrics.listener=127.0.0.1:0"]);
    let mut consumer = RawClient::connect(&broker.bootstrap());
    let mut producer = RawClient::connect(&broker.bootstrap());
    create_topic(&mut producer, TOPIC, 2, &[]);
    let started = Instant::now();
    let fetch_id = consumer.send(ApiKey::Fetch, 12, &fetch_request(TOPIC, 0, 0, 60_000, 1));
    std::thread::sleep(Duration::from_millis(200));
    for i in 0..1_000 {
        assert_eq!(produce(&mut producer, TOPIC, 1, batch(None, i, 1, Compression::None)).error_code, 0);
    }
    consumer.stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut byte = [0u8; 1];
    let peeked = consumer.stream.peek(&mut byte);
    assert!(peeked.is_err(), "the fetch answered before its partition had data: {peeked:?}");
    consumer.stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(counter(&broker, "kafka_fetch_wakeups_total"), 0, "appends to partition 1 woke the fetch");
    assert_eq!(produce(&mut producer, TOPIC, 0, batch(None, 1_000, 1, Compression::None)).error_code, 0);
    let response: FetchResponse = consumer.receive(ApiKey::Fetch, 12, fetch_id);
    assert!(started.elapsed() < Duration::from_secs(50), "the append to partition 0 woke the fetch");
    assert_eq!(values(&response.responses[0].partitions[0]), vec![(0, "value-1000".to_string())]);
    assert_eq!(counter(&broker, "kafka_fetch_wakeups_total"), 1);
}

/// Sends raw bytes on a fresh connection and reports whether the broker closed it.
fn closes_on(broker: &BrokerProcess, bytes: &[u8]) -> bool {
    let mut client = RawClient::connect(&broker.bootstrap());
    client.stream.write_all(bytes).unwrap();
    client.is_closed()
}

#[test]
fn bad_input_gets_kafkas_answer_and_the_broker_carries_on() {
    let mut broker = BrokerProcess::start(&["socket.request.max.bytes=1000000", "message.max.bytes=20000"]);
    let mut client = RawClient::connect(&broker.bootstrap());
    create_topic(&mut client, TOPIC, 1, &[]);
    assert_eq!(produce(&mut client, TOPIC, 0, batch(None, 0, 5, Compression::None)).error_code, 0);
    malformed_frames_close_their_connections(&broker);
    refused_batches_get_kafkas_error_codes(&mut client);
    compacted_topics_refuse_records_without_keys(&mut client);
    timestamps_outside_the_topics_window_are_refused(&mut client);
    a_client_sends_one_batch_starting_at_offset_zero(&mut client);
    message_max_bytes_limits_the_whole_batch(&mut client);
    bad_topics_get_kafkas_error_codes(&mut client);

    // Through all of it, the first connection and the acknowledged data are fine.
    let data = values(&fetch(&mut client, TOPIC, 0, 0));
    assert_eq!(data.len(), 6);
    assert_eq!(data[4], (4, "value-4".to_string()));
    offset_for_leader_epoch_answers_as_kafka_does(&mut client);
    assert!(broker.is_running());
    let status = broker.stop();
    assert!(status.success());
}

/// Frames Kafka gives up on close their connection (and only theirs).
fn malformed_frames_close_their_connections(broker: &BrokerProcess) {
    // Garbage: a plausible size then noise that is no request header.
    let mut garbage = 64i32.to_be_bytes().to_vec();
    garbage.extend((0..64u8).map(|i| i.wrapping_mul(97) ^ 0x5a));
    assert!(closes_on(broker, &garbage), "garbage closes the connection");
    // A size prefix past socket.request.max.bytes.
    assert!(closes_on(broker, &2_000_000i32.to_be_bytes()), "oversized frame closes");
    assert!(closes_on(broker, &(-5i32).to_be_bytes()), "negative size closes");
    // An unknown API key, and a known API at an unknown version.
    let mut unknown = Vec::new();
    unknown.extend(10i32.to_be_bytes());
    unknown.extend(999i16.to_be_bytes());
    unknown.extend(0i16.to_be_bytes());
    unknown.extend(1i32.to_be_bytes());
    unknown.extend((-1i16).to_be_bytes());
    assert!(closes_on(broker, &unknown), "unknown api key closes");
    let mut future = Vec::new();
    future.extend(10i32.to_be_bytes());
    future.extend((ApiKey::Metadata as i16).to_be_bytes());
    future.extend(99i16.to_be_bytes());
    future.extend(1i32.to_be_bytes());
    future.extend((-1i16).to_be_bytes());
    assert!(closes_on(broker, &future), "unsupported version closes");
    // A truncated request: the client hangs up mid-frame.
    {
        let mut c = RawClient::connect(&broker.bootstrap());
        c.stream.write_all(&100i32.to_be_bytes()).unwrap();
        c.stream.write_all(&[0, 3, 0, 12]).unwrap();
    }
    // A body that does not decode (Metadata v12 with a truncated topic array).
    let mut body = Vec::new();
    body.extend((ApiKey::Metadata as i16).to_be_bytes());
    body.extend(12i16.to_be_bytes());
    body.extend(5i32.to_be_bytes());
    body.extend((-1i16).to_be_bytes());
    body.push(0); // header tagged fields
    body.push(9); // 8 topics follow... but nothing does
    let mut framed = (body.len() as i32).to_be_bytes().to_vec();
    framed.extend(body);
    assert!(closes_on(broker, &framed), "undecodable body closes");
}

/// Batches to TOPIC that are corrupt, or that Kafka takes from no producer:
/// each is refused, so none of them reaches the log.
fn refused_batches_get_kafkas_error_codes(client: &mut RawClient) {
    // A batch with a flipped CRC byte: CORRUPT_MESSAGE.
    let mut corrupt = batch(None, 100, 3, Compression::None).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let response = produce(client, TOPIC, 0, Bytes::from(corrupt));
    assert_eq!(response.error_code, 2, "CORRUPT_MESSAGE");
    // What Kafka refuses from a producer though a log takes it from a broker:
    // a control batch, an idempotent batch without a sequence number
    // (INVALID_RECORD), a transactional batch without a transactional id.
    let one_record = |builder: RecordBatchBuilder| {
        let mut builder = builder;
        builder.append(&NewRecord { timestamp_ms: 1, key: Some(b"k"), value: Some(b"v"), headers: &[] }).unwrap();
        builder.build().unwrap().into_bytes()
    };
    let control = one_record(RecordBatchBuilder::new(Compression::None).with_control(true));
    assert_eq!(produce(client, TOPIC, 0, control).error_code, 87, "INVALID_RECORD");
    let (producer_id, producer_epoch) = init_producer_id(client);
    let unsequenced =
        one_record(RecordBatchBuilder::new(Compression::None).with_producer(producer_id, producer_epoch, -1));
    assert_eq!(produce(client, TOPIC, 0, unsequenced).error_code, 87, "INVALID_RECORD");
    let transactional = one_record(
        RecordBatchBuilder::new(Compression::None)
            .with_producer(producer_id, producer_epoch, 0)
            .with_transactional(true),
    );
    assert_eq!(produce(client, TOPIC, 0, transactional).error_code, 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED");
}

/// A compacted topic refuses a record without a key (compressed or not).
/// Creates topic `compacted`.
fn compacted_topics_refuse_records_without_keys(client: &mut RawClient) {
    create_topic(client, "compacted", 1, &[("cleanup.policy", "compact")]);
    let mut keyless = RecordBatchBuilder::new(Compression::Zstd);
    keyless.append(&NewRecord { timestamp_ms: 1, key: Some(b"k"), value: Some(b"v"), headers: &[] }).unwrap();
    keyless.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(b"v"), headers: &[] }).unwrap();
    let response = produce(client, "compacted", 0, keyless.build().unwrap().into_bytes());
    assert_eq!(response.error_code, 87, "INVALID_RECORD");
    assert_eq!(produce(client, "compacted", 0, batch(None, 0, 3, Compression::Zstd)).error_code, 0);
}

/// A CreateTime topic takes records whose timestamps lie within
/// message.timestamp.before.max.ms / after.max.ms of the broker's clock and
/// refuses the whole batch otherwise (INVALID_TIMESTAMP), naming each
/// refused record by its index, as Kafka's LogValidator does. Creates topic
/// `stamped`.
fn timestamps_outside_the_topics_window_are_refused(client: &mut RawClient) {
    let window = [("message.timestamp.before.max.ms", "3600000"), ("message.timestamp.after.max.ms", "3600000")];
    create_topic(client, "stamped", 1, &window);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let hour = 3_600_000;
    let stamped = |timestamps: &[i64]| {
        let mut builder = RecordBatchBuilder::new(Compression::Lz4);
        for &timestamp_ms in timestamps {
            builder.append(&NewRecord { timestamp_ms, key: None, value: Some(b"v"), headers: &[] }).unwrap();
        }
        builder.build().unwrap().into_bytes()
    };
    let refused = produce(client, "stamped", 0, stamped(&[now - 2 * hour, now, now + 2 * hour]));
    assert_eq!(refused.error_code, 32, "INVALID_TIMESTAMP");
    let indexes: Vec<i32> = refused.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(indexes, vec![0, 2], "{refused:?}");
    // Inside the window (a minute's slack either side for the clocks) and
    // without a timestamp at all: accepted, the batch stamped with its latest.
    let accepted = produce(client, "stamped", 0, stamped(&[now - hour + 60_000, -1, now + hour - 60_000]));
    assert_eq!((accepted.error_code, accepted.base_offset), (0, 0), "{accepted:?}");
    // A producer may not claim LogAppendTime for its batch on a LogAppendTime topic.
    create_topic(client, "appended", 1, &[("message.timestamp.type", "LogAppendTime")]);
    let mut claimed = RecordBatchBuilder::new(Compression::None).with_log_append_time(now);
    claimed.append(&NewRecord { timestamp_ms: now, key: None, value: Some(b"v"), headers: &[] }).unwrap();
    let refused = produce(client, "appended", 0, claimed.build().unwrap().into_bytes());
    assert_eq!((refused.error_code, refused.record_errors.len()), (32, 1), "{refused:?}");
    assert_eq!(produce(client, "appended", 0, stamped(&[1])).error_code, 0, "no window on LogAppendTime");
}

/// A client's partition data is one batch whose base offset is 0 (Kafka's
/// producers never send otherwise): anything else is INVALID_RECORD.
fn a_client_sends_one_batch_starting_at_offset_zero(client: &mut RawClient) {
    let one = batch(None, 0, 2, Compression::None);
    let two: Bytes = [one.clone(), one.clone()].concat().into();
    assert_eq!(produce(client, TOPIC, 0, two).error_code, 87, "INVALID_RECORD");
    let mut moved = one.to_vec();
    moved[..8].copy_from_slice(&5i64.to_be_bytes());
    assert_eq!(produce(client, TOPIC, 0, moved.into()).error_code, 87, "INVALID_RECORD");
}

/// message.max.bytes is 20000 here; appends one record, at offset 5 of TOPIC.
fn message_max_bytes_limits_the_whole_batch(client: &mut RawClient) {
    // A batch over message.max.bytes: MESSAGE_TOO_LARGE.
    let big = vec![b'x'; 30_000];
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&big), headers: &[] }).unwrap();
    let response = produce(client, TOPIC, 0, builder.build().unwrap().into_bytes());
    assert_eq!(response.error_code, 10, "MESSAGE_TOO_LARGE");
    // A batch exactly at the limit is accepted (the limit counts the whole batch).
    let mut at_limit = 20_000 - 61 - 20;
    let accepted = loop {
        let value = vec![b'y'; at_limit];
        let mut builder = RecordBatchBuilder::new(Compression::None);
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&value), headers: &[] }).unwrap();
        let bytes = builder.build().unwrap().into_bytes();
        if bytes.len() == 20_000 {
            break bytes;
        }
        at_limit = (at_limit as i64 + 20_000 - bytes.len() as i64) as usize;
    };
    assert_eq!(produce(client, TOPIC, 0, accepted).error_code, 0, "a batch of exactly message.max.bytes");
}

/// CreateTopics: invalid names, unknown configs, an impossible replication factor.
fn bad_topics_get_kafkas_error_codes(client: &mut RawClient) {
    // An invalid topic name: INVALID_TOPIC_EXCEPTION.
    let created = create_topic(client, "bad/name", 1, &[]);
    assert_eq!(created.topics[0].error_code, 17);
    let created = create_topic(client, &"x".repeat(250), 1, &[]);
    assert_eq!(created.topics[0].error_code, 17);
    // An unknown topic config: INVALID_CONFIG.
    let created = create_topic(client, "configs", 1, &[("no.such.config", "1")]);
    assert_eq!(created.topics[0].error_code, 40);
    // Replication factor 3 on one node: INVALID_REPLICATION_FACTOR.
    let mut request = CreateTopicsRequest::default();
    request.topics.push(CreatableTopic {
        name: "rf3".into(),
        num_partitions: 1,
        replication_factor: 3,
        ..Default::default()
    });
    let response: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 7, &request);
    assert_eq!(response.topics[0].error_code, 38);
}

/// OffsetForLeaderEpoch as Kafka answers it: the leader's epoch (assigned
/// when the partition opened) ends at the log end; an epoch newer than
/// any known is UNDEFINED (-1, -1).
fn offset_for_leader_epoch_answers_as_kafka_does(client: &mut RawClient) {
    let partition = |leader_epoch| OffsetForLeaderPartition {
        partition: 0,
        current_leader_epoch: -1,
        leader_epoch,
        ..Default::default()
    };
    let request = OffsetForLeaderEpochRequest {
        replica_id: -1,
        topics: vec![OffsetForLeaderTopic {
            topic: TOPIC.into(),
            partitions: vec![partition(0), partition(7)],
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: OffsetForLeaderEpochResponse = client.request(ApiKey::OffsetForLeaderEpoch, 4, &request);
    let answers: Vec<(i16, i32, i64)> =
        response.topics[0].partitions.iter().map(|p| (p.error_code, p.leader_epoch, p.end_offset)).collect();
    assert_eq!(answers, vec![(0, 0, 6), (0, -1, -1)]);
}

#[test]
fn incremental_fetch_sessions_send_only_changes() {
    let broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    create_topic(&mut client, TOPIC, 2, &[]);
    assert_eq!(produce(&mut client, TOPIC, 0, batch(None, 0, 3, Compression::None)).error_code, 0);
    // Open a session over both partitions: a full response.
    let mut request = fetch_request(TOPIC, 0, 0, 0, 0);
    request.session_epoch = 0;
    let mut p1 = request.topics[0].partitions[0].clone();
    p1.partition = 1;
    request.topics[0].partitions.push(p1);
    let full: FetchResponse = client.request(ApiKey::Fetch, 12, &request);
    assert_ne!(full.session_id, 0, "a session was created");
    assert_eq!(full.responses[0].partitions.len(), 2);
    assert_eq!(values(&full.responses[0].partitions[0]).len(), 3);
    // Incremental, position moved to 3: nothing changed, nothing returned.
    let mut next = fetch_request(TOPIC, 0, 3, 0, 0);
    next.session_id = full.session_id;
    next.session_epoch = 1;
    let quiet: FetchResponse = client.request(ApiKey::Fetch, 12, &next);
    assert_eq!(quiet.error_code, 0);
    assert!(quiet.responses.is_empty(), "{:?}", quiet.responses);
    // New data on partition 1 (still at offset 0 in the session): only it comes back.
    assert_eq!(produce(&mut client, TOPIC, 1, batch(None, 10, 2, Compression::None)).error_code, 0);
    let mut empty = FetchRequest { session_id: full.session_id, session_epoch: 2, ..fetch_request(TOPIC, 0, 3, 0, 0) };
    empty.topics.clear();
    let changed: FetchResponse = client.request(ApiKey::Fetch, 12, &empty);
    assert_eq!(changed.responses.len(), 1);
    assert_eq!(changed.responses[0].partitions.len(), 1);
    assert_eq!(changed.responses[0].partitions[0].partition_index, 1);
    assert_eq!(values(&changed.responses[0].partitions[0]).len(), 2);
    // A stale epoch and an unknown session are refused as Kafka refuses them.
    let stale: FetchResponse = client.request(ApiKey::Fetch, 12, &empty);
    assert_eq!(stale.error_code, 71, "INVALID_FETCH_SESSION_EPOCH");
    let unknown: FetchResponse =
        client.request(ApiKey::Fetch, 12, &FetchRequest { session_id: 12345, session_epoch: 1, ..empty.clone() });
    assert_eq!(unknown.error_code, 70, "FETCH_SESSION_ID_NOT_FOUND");
    // Epoch 0 with the old id: the old session closes and a new one opens
    // (how clients reset after INVALID_FETCH_SESSION_EPOCH).
    let mut reset = fetch_request(TOPIC, 0, 0, 0, 0);
    reset.session_id = full.session_id;
    reset.session_epoch = 0;
    let renewed: FetchResponse = client.request(ApiKey::Fetch, 12, &reset);
    assert_eq!(renewed.error_code, 0);
    assert_ne!(renewed.session_id, 0);
    assert_ne!(renewed.session_id, full.session_id);
    assert_eq!(values(&renewed.responses[0].partitions[0]).len(), 3);
    let old: FetchResponse = client.request(ApiKey::Fetch, 12, &FetchRequest { session_epoch: 3, ..empty.clone() });
    assert_eq!(old.error_code, 70, "the old session is gone");
}

#[test]
fn metadata_is_rebuilt_from_a_snapshot_plus_the_log_tail() {
    let mut broker = BrokerProcess::start(&["metadata.log.max.record.bytes.between.snapshots=1500"]);
    let mut client = RawClient::connect(&broker.bootstrap());
    for i in 0..40 {
        let created = create_topic(&mut client, &format!("snap-{i}"), 2, &[("retention.ms", &(1000 + i).to_string())]);
        assert_eq!(created.topics[0].error_code, 0);
    }
    let deleted: DeleteTopicsResponse = client.request(
        ApiKey::DeleteTopics,
        5,
        &DeleteTopicsRequest {
            topic_names: vec!["snap-3".into(), "snap-39".into()],
            timeout_ms: 5000,
            ..Default::default()
        },
    );
    assert!(deleted.responses.iter().all(|r| r.error_code == 0));
    let (first_id, _) = init_producer_id(&mut client);
    let metadata_dir = broker.data_dir().join("__cluster_metadata-0");
    let snapshots = || {
        std::fs::read_dir(&metadata_dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".checkpoint"))
            .count()
    };
    assert_eq!(snapshots(), 1, "one snapshot kept, older ones removed");
    kafka_reads_the_metadata_log_and_snapshot(&metadata_dir);
    drop(client);
    broker.kill9();
    broker.restart();
    let mut client = RawClient::connect(&broker.bootstrap());
    let metadata: MetadataResponse =
        client.request(ApiKey::Metadata, 12, &MetadataRequest { topics: None, ..Default::default() });
    let names: std::collections::BTreeSet<String> = metadata.topics.iter().filter_map(|t| t.name.clone()).collect();
    assert_eq!(names.len(), 38, "{names:?}");
    assert!(!names.contains("snap-3") && !names.contains("snap-39") && names.contains("snap-38"));
    let configs: DescribeConfigsResponse = client.request(
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest {
            resources: vec![describe_configs_request::DescribeConfigsResource {
                resource_type: 2,
                resource_name: "snap-17".into(),
                configuration_keys: Some(vec!["retention.ms".into()]),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    assert_eq!(configs.results[0].configs[0].value.as_deref(), Some("1017"));
    let (next_id, _) = init_producer_id(&mut client);
    assert!(next_id > first_id, "producer ids continue after the snapshot");
}

/// Apache Kafka 4.3.1's `kafka-dump-log --cluster-metadata-decoder` decodes
/// every record of krabka's metadata log segment and of its snapshot.
fn kafka_reads_the_metadata_log_and_snapshot(metadata_dir: &std::path::Path) {
    let mut files: Vec<_> = std::fs::read_dir(metadata_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "checkpoint"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    for file in files {
        let (ok, out) =
            support::kafka_cli("kafka-dump-log", &["--cluster-metadata-decoder", "--files", file.to_str().unwrap()]);
        let decoded = out.lines().filter(|l| l.contains("payload: {\"type\":")).count();
        let bad = out.lines().find(|l| l.contains("Exception") || l.contains("Error") || l.contains("isvalid: false"));
        assert!(ok && decoded > 0 && bad.is_none(), "{}: {decoded} decoded, {bad:?}\n{out}", file.display());
        if file.extension().is_some_and(|x| x == "checkpoint") {
            for control in ["SnapshotHeader", "SnapshotFooter"] {
                assert!(out.contains(control), "{control} not decoded:\n{out}");
            }
            assert!(out.contains("\"TOPIC_RECORD\""), "{out}");
        }
    }
}

/// An ApiVersions v3 request whose frame (after the size prefix) is exactly `size` bytes.
fn api_versions_frame_of_size(size: usize) -> Vec<u8> {
    let encode = |name: &str| {
        let mut buf = bytes::BytesMut::new();
        let request = ApiVersionsRequest {
            client_software_name: name.into(),
            client_software_version: "1".into(),
            ..Default::default()
        };
        frame::encode_request(&mut buf, ApiKey::ApiVersions, 3, 1, Some("limit"), &request).unwrap();
        buf.to_vec()
    };
    let base = encode("a").len() - 4;
    let mut name = "a".repeat(1 + size - base);
    // The compact string length varint may grow by a byte: trim to fit.
    while encode(&name).len() - 4 > size {
        name.pop();
    }
    let frame = encode(&name);
    assert_eq!(frame.len() - 4, size);
    frame
}

#[test]
fn socket_request_max_bytes_is_inclusive() {
    let broker = BrokerProcess::start(&["socket.request.max.bytes=1000"]);
    let mut at_limit = RawClient::connect(&broker.bootstrap());
    at_limit.stream.write_all(&api_versions_frame_of_size(1000)).unwrap();
    let mut response = at_limit.read_frame().expect("a request of exactly the limit is served");
    let header = frame::parse_response_header(ApiKey::ApiVersions, 3, &mut response).unwrap();
    assert_eq!(header.correlation_id, 1);
    assert!(closes_on(&broker, &api_versions_frame_of_size(1001)), "one byte over the limit closes");
}

#[test]
fn max_connections_and_idle_timeout_are_enforced() {
    let broker = BrokerProcess::start(&["max.connections=3", "connections.max.idle.ms=1000"]);
    let mut clients: Vec<RawClient> = (0..3).map(|_| RawClient::connect(&broker.bootstrap())).collect();
    for client in &mut clients {
        let response: ApiVersionsResponse = client.request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert_eq!(response.error_code, 0);
    }
    let mut fourth = RawClient::connect(&broker.bootstrap());
    assert!(fourth.is_closed(), "the connection past max.connections is closed");
    drop(clients.pop());
    support::wait_for("a free connection slot", Duration::from_secs(10), || {
        let mut client = RawClient::connect(&broker.bootstrap());
        client.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        client.read_frame().is_ok()
    });
    // Idle connections are closed after connections.max.idle.ms.
    let started = Instant::now();
    assert!(clients[0].is_closed());
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A connection to `bootstrap` from the loopback address `source`.
fn connect_from(source: [u8; 4], bootstrap: &str) -> RawClient {
    use std::os::fd::FromRawFd;
    let port: u16 = bootstrap.rsplit(':').next().unwrap().parse().unwrap();
    let address = |ip: [u8; 4], port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_be_bytes(ip).to_be() },
        sin_zero: [0; 8],
    };
    let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a fresh socket, bound and connected with valid sockaddr_in
    // values of the size given; the descriptor is handed to TcpStream.
    let stream = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let local = address(source, 0);
        assert_eq!(libc::bind(fd, &local as *const _ as *const libc::sockaddr, size), 0, "bind");
        let remote = address([127, 0, 0, 1], port);
        assert_eq!(libc::connect(fd, &remote as *const _ as *const libc::sockaddr, size), 0, "connect");
        std::net::TcpStream::from_raw_fd(fd)
    };
    RawClient::from_stream(stream)
}

#[test]
fn max_connections_per_ip_and_its_overrides_are_enforced() {
    // The client listener is not the inter-broker one, which no
    // broker-wide creation rate holds back.
    let listeners = format!(
        "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{},CONTROLLER://127.0.0.1:0",
        support::free_port()
    );
    let broker = BrokerProcess::start(&[
        "max.connections.per.ip=2",
        "max.connections.per.ip.overrides=127.0.0.2:1",
        "quota.window.num=2",
        &listeners,
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
    ]);
    let answered = |client: &mut RawClient| {
        client.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        client.read_frame().is_ok()
    };
    let mut first: Vec<RawClient> = (0..2).map(|_| connect_from([127, 0, 0, 1], &broker.bootstrap())).collect();
    assert!(first.iter_mut().all(answered));
    let mut third = connect_from([127, 0, 0, 1], &broker.bootstrap());
    assert!(third.is_closed(), "a third connection from 127.0.0.1 is over max.connections.per.ip");
    let mut other = connect_from([127, 0, 0, 2], &broker.bootstrap());
    assert!(answered(&mut other), "another address has its own count");
    let mut second_other = connect_from([127, 0, 0, 2], &broker.bootstrap());
    assert!(second_other.is_closed(), "127.0.0.2's override is 1");
    drop(first.pop());
    support::wait_for("a free slot for 127.0.0.1", Duration::from_secs(10), || {
        answered(&mut connect_from([127, 0, 0, 1], &broker.bootstrap()))
    });

    // A dynamic cluster-wide max.connections.per.ip applies to the next
    // connection; the override still wins for its address.
    let mut admin = connect_from([127, 0, 0, 3], &broker.bootstrap());
    let mut alter = |name: &str, value: &str| {
        let config = incremental_alter_configs_request::AlterableConfig {
            name: name.into(),
            config_operation: 0,
            value: Some(value.into()),
            ..Default::default()
        };
        let resource = incremental_alter_configs_request::AlterConfigsResource {
            resource_type: 4,
            resource_name: String::new(),
            configs: vec![config],
            ..Default::default()
        };
        let request = IncrementalAlterConfigsRequest { resources: vec![resource], ..Default::default() };
        let altered: IncrementalAlterConfigsResponse = admin.request(ApiKey::IncrementalAlterConfigs, 1, &request);
        altered.responses[0].error_code
    };
    assert_eq!(alter("max.connections.per.ip", "4"), 0);
    support::wait_for("the dynamic limit applied", Duration::from_secs(10), || {
        let mut more: Vec<RawClient> = (0..2).map(|_| connect_from([127, 0, 0, 1], &broker.bootstrap())).collect();
        more.iter_mut().all(answered)
    });
    let mut second_other = connect_from([127, 0, 0, 2], &broker.bootstrap());
    assert!(second_other.is_closed(), "127.0.0.2's override is still 1");

    // The overrides change at run time too; a value that does not parse is
    // refused.
    assert_ne!(alter("max.connections.per.ip.overrides", "127.0.0.2:many"), 0);
    assert_eq!(alter("max.connections.per.ip.overrides", "127.0.0.2:3"), 0);
    support::wait_for("the dynamic override applied", Duration::from_secs(10), || {
        let mut more: Vec<RawClient> = (0..2).map(|_| connect_from([127, 0, 0, 2], &broker.bootstrap())).collect();
        more.iter_mut().all(answered)
    });
    drop(other);

    // So does the broker-wide max.connection.creation.rate: 30 new
    // connections at 5 a second over two one-second windows take seconds.
    // The rate lets its first few through at once, and the broker may not
    // have seen them closed yet: the per-address limit is out of the way.
    assert_eq!(alter("max.connections.per.ip", "1000"), 0);
    assert_eq!(alter("max.connection.creation.rate", "5"), 0);
    drop(first);
    let started = Instant::now();
    let served = (0..30).filter(|_| answered(&mut connect_from([127, 0, 0, 4], &broker.bootstrap()))).count();
    assert_eq!(served, 30, "every connection is served, none refused");
    assert!(started.elapsed() >= Duration::from_secs(3), "30 connections at 5/s took {:?}", started.elapsed());
}

#[test]
fn connections_over_their_address_creation_rate_are_held_then_closed() {
    let broker = BrokerProcess::start(&[]);
    let mut admin = connect_from([127, 0, 0, 3], &broker.bootstrap());
    let entity = alter_client_quotas_request::EntityData {
        entity_type: "ip".into(),
        entity_name: Some("127.0.0.1".into()),
        ..Default::default()
    };
    let op = alter_client_quotas_request::OpData {
        key: "connection_creation_rate".into(),
        value: 2.0,
        ..Default::default()
    };
    let entry = alter_client_quotas_request::EntryData { entity: vec![entity], ops: vec![op], ..Default::default() };
    let request = AlterClientQuotasRequest { entries: vec![entry], ..Default::default() };
    let answer: AlterClientQuotasResponse = admin.request(ApiKey::AlterClientQuotas, 1, &request);
    assert_eq!(answer.entries[0].error_code, 0, "{answer:?}");
    // 2 a second over 11 one-second windows: about 20 connections at once,
    // then each new one is held (never answered) and closed later.
    let answered = |source| {
        let mut client = connect_from(source, &broker.bootstrap());
        client.stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        client.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        client.read_frame().is_ok()
    };
    let served = (0..40).filter(|_| answered([127, 0, 0, 1])).count();
    assert!((15..=25).contains(&served), "{served} of 40 connections from 127.0.0.1 served");
    assert!(answered([127, 0, 0, 2]), "another address has no quota");
}

/// `max.connection.creation.rate` on the listener: connections past the
/// rate wait to be accepted (none is refused), so 30 of them at 5 a
/// second over two one-second windows take seconds where 5 take none.
#[test]
fn a_listeners_connection_creation_rate_paces_its_accepts() {
    let broker = BrokerProcess::start(&[
        "listener.name.plaintext.max.connection.creation.rate=5",
        "quota.window.num=2",
        "krabka.metrics.listener=127.0.0.1:0",
    ]);
    let answered = || {
        let mut client = RawClient::connect(&broker.bootstrap());
        client.stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        client.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        client.read_frame().is_ok()
    };
    let started = Instant::now();
    assert_eq!((0..30).filter(|_| answered()).count(), 30, "every connection is served");
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(3), "30 connections at 5/s accepted in {took:?}");
    let (_, metrics) = broker.http_get("/metrics");
    let metrics = String::from_utf8(metrics).unwrap();
    let throttled = metrics.lines().find_map(|l| l.strip_prefix("kafka_connections_throttled_total "));
    assert!(throttled.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0) > 0, "{metrics}");
}

/// The metric names the expressions of a Grafana dashboard's JSON use
/// (identifiers starting `kafka_` or `process_` in every `"expr"`).
fn charted_metrics(dashboard: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for rest in dashboard.split("\"expr\": \"").skip(1) {
        // The expression ends at the first quote not escaped.
        let end = rest.char_indices().find(|&(i, c)| c == '"' && !rest[..i].ends_with('\\')).map_or(0, |(i, _)| i);
        let expression = &rest[..end];
        let identifiers = expression.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'));
        names.extend(identifiers.filter(|w| w.starts_with("kafka_") || w.starts_with("process_")).map(String::from));
    }
    names
}

/// Issue 20: the Grafana dashboard in packaging/grafana charts Kafka's
/// metric names, and a broker exposes every one of them.
#[test]
fn the_grafana_dashboard_charts_only_what_a_broker_exposes() {
    let dashboard = std::fs::read_to_string(support::repo_root().join("packaging/grafana/krabka-broker.json"))
        .expect("the dashboard");
    let charted = charted_metrics(&dashboard);
    assert!(charted.len() >= 15, "{charted:?}");
    let broker = BrokerProcess::start(&["krabka.metrics.listener=127.0.0.1:0"]);
    let mut client = RawClient::connect(&broker.bootstrap());
    create_topic(&mut client, "charted", 1, &[]);
    assert_eq!(produce(&mut client, "charted", 0, batch(None, 0, 3, Compression::None)).error_code, 0);
    let fetched: FetchResponse = client.request(ApiKey::Fetch, 12, &fetch_request("charted", 0, 0, 0, 1));
    assert_eq!(values(&fetched.responses[0].partitions[0]).len(), 3);
    // The log and controller gauges are published every 5 s.
    let mut missing = Vec::new();
    support::wait_for("every charted metric on /metrics", Duration::from_secs(30), || {
        let (_, body) = broker.http_get("/metrics");
        let text = String::from_utf8(body).expect("utf-8 metrics");
        let exposed =
            |name: &str| text.lines().any(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])));
        missing = charted.iter().filter(|name| !exposed(name)).cloned().collect();
        missing.is_empty()
    });
    assert!(missing.is_empty(), "{missing:?}");
}

/// Issue 20: every error a client is told is counted by API and name, and
/// with `krabka_broker::client_errors` at DEBUG logged with the client,
/// topic and partition.
#[test]
fn errors_clients_see_are_logged_with_their_client_topic_and_partition() {
    let broker = BrokerProcess::start(&[
        "krabka.metrics.listener=127.0.0.1:0",
        "krabka.log.level=info,krabka_broker::client_errors=debug",
    ]);
    let mut client = RawClient::connect(&broker.bootstrap());
    create_topic(&mut client, "audited", 1, &[]);
    let refused = produce(&mut client, "audited", 5, batch(None, 0, 1, Compression::None));
    assert_eq!(refused.error_code, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code());
    let out_of_range = fetch(&mut client, "audited", 0, 1_000);
    assert_eq!(out_of_range.error_code, ErrorCode::OFFSET_OUT_OF_RANGE.code());
    let log = broker.log();
    for (api, partition, error) in [("Produce", 5, "UNKNOWN_TOPIC_OR_PARTITION"), ("Fetch", 0, "OFFSET_OUT_OF_RANGE")] {
        let logged = log.lines().any(|l| {
            l.contains("error answered")
                && l.contains(&format!("api=\"{api}\""))
                && l.contains("client_id=raw-test")
                && l.contains("topic=\"audited\"")
                && l.contains(&format!("partition={partition}"))
                && l.contains(&format!("error=\"{error}\""))
        });
        assert!(logged, "{api} {error} not logged:\n{log}");
        let (_, metrics) = broker.http_get("/metrics");
        let metrics = String::from_utf8(metrics).unwrap();
        let series = format!("krabka_client_errors_total{{api=\"{api}\",error=\"{error}\"}} 1");
        assert!(metrics.lines().any(|l| l == series), "{series} in\n{metrics}");
    }
}

#[test]
fn metrics_and_cpu_profile_are_served_over_http() {
    let broker = BrokerProcess::start(&["krabka.metrics.listener=127.0.0.1:0"]);
    let mut client = RawClient::connect(&broker.bootstrap());
    create_topic(&mut client, TOPIC, 1, &[]);
    assert_eq!(produce(&mut client, TOPIC, 0, batch(None, 0, 5, Compression::None)).error_code, 0);
    fetch(&mut client, TOPIC, 0, 0);
    let (status, body) = broker.http_get("/metrics");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    for expected in [
        "kafka_requests_total{api=\"Produce\"} 1",
        "kafka_topic_bytes_in_total{topic=\"raw\"}",
        "kafka_topic_messages_in_total{topic=\"raw\"} 5",
        "kafka_topic_bytes_out_total{topic=\"raw\"}",
        "kafka_request_latency_seconds_bucket{api=\"Fetch\"",
        "kafka_connections 1",
        "process_resident_memory_bytes",
    ] {
        assert!(text.contains(expected), "missing {expected} in\n{text}");
    }
    let (status, profile) = broker.http_get("/debug/pprof/profile?seconds=1");
    assert_eq!(status, 200);
    assert!(!profile.is_empty());
    assert_eq!(broker.http_get("/readyz"), (200, b"ready\n".to_vec()));
}

/// Issue 20: `krabka-broker --version` names the program and its version.
#[test]
fn the_broker_prints_its_version() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_krabka-broker")).arg("--version").output().unwrap();
    assert!(output.status.success());
    let printed = String::from_utf8_lossy(&output.stdout);
    assert_eq!(printed.trim(), format!("krabka-broker {}", env!("CARGO_PKG_VERSION")));
}

/// Issue 20: `/readyz` says a node that cannot catch up (its controllers
/// out of reach) is not ready, while `/healthz` says it is alive; both
/// answer from the moment its storage is open.
#[test]
fn readyz_waits_for_a_broker_to_catch_up_while_healthz_answers() {
    let nobody = support::free_port();
    let broker = BrokerProcess::launch_broker_only(
        2,
        &format!("1@127.0.0.1:{nobody}"),
        &["krabka.metrics.listener=127.0.0.1:0"],
    );
    support::wait_for("the HTTP endpoint", Duration::from_secs(30), || broker.metrics_port().is_some());
    assert_eq!(broker.http_get("/healthz").0, 200);
    let (status, body) = broker.http_get("/readyz");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("not ready: starting"), "{body}");
}

#[test]
fn invalid_configuration_is_refused_at_start_and_unknown_keys_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    krabka_format::format_log_dir(&data, "a1b2c3d4e5f6g7h8i9j0kw", 1).unwrap();
    let config = dir.path().join("server.properties");
    std::fs::write(
        &config,
        format!(
            "process.roles=broker,controller\nnode.id=1\nlisteners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n\
             controller.listener.names=CONTROLLER\nlog.dirs={}\nno.such.key=1\n",
            data.display()
        ),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_krabka-broker"));
        command.arg(&config);
        for e in extra {
            command.arg("--override").arg(e);
        }
        command.output().unwrap()
    };
    let bad = run(&["num.partitions=0"]);
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("num.partitions"), "{stderr}");
    let bad = run(&["message.max.bytes=lots"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("message.max.bytes"));
    // A valid config with an unknown key starts (and says so); stop it at once.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_krabka-broker"))
        .arg(&config)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains("krabka broker serving") && Instant::now() < deadline {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(seen.contains("no.such.key"), "{seen}");
    assert!(seen.contains("krabka broker serving"), "{seen}");
}

#[test]
fn fetch_sessions_by_topic_id_keep_serving_after_forgetting_partitions() {
    let broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    let created = create_topic(&mut client, TOPIC, 3, &[]);
    let topic_id = created.topics[0].topic_id;
    for p in 0..3 {
        assert_eq!(produce(&mut client, TOPIC, p, batch(None, 0, 2, Compression::None)).error_code, 0);
    }
    let partition = |p: i32, offset: i64| FetchPartition {
        partition: p,
        fetch_offset: offset,
        partition_max_bytes: 1 << 20,
        ..Default::default()
    };
    let topic = |partitions: Vec<FetchPartition>| FetchTopic { topic_id, partitions, ..Default::default() };
    let full = FetchRequest {
        session_epoch: 0,
        max_bytes: 1 << 24,
        topics: vec![topic((0..3).map(|p| partition(p, 0)).collect())],
        ..Default::default()
    };
    let response: FetchResponse = client.request(ApiKey::Fetch, 16, &full);
    assert_ne!(response.session_id, 0);
    assert_eq!(response.responses[0].partitions.len(), 3);
    // Forget partitions 1 and 2, move 0 to its end.
    let forget = FetchRequest {
        session_id: response.session_id,
        session_epoch: 1,
        max_bytes: 1 << 24,
        topics: vec![topic(vec![partition(0, 2)])],
        forgotten_topics_data: vec![fetch_request::ForgottenTopic {
            topic_id,
            partitions: vec![1, 2],
            ..Default::default()
        }],
        ..Default::default()
    };
    let quiet: FetchResponse = client.request(ApiKey::Fetch, 16, &forget);
    assert_eq!(quiet.error_code, 0);
    assert!(quiet.responses.iter().all(|t| t.partitions.iter().all(|p| p.partition_index == 0)));
    // New data on 0 (still in the session) and 1 (forgotten).
    assert_eq!(produce(&mut client, TOPIC, 0, batch(None, 2, 3, Compression::None)).error_code, 0);
    assert_eq!(produce(&mut client, TOPIC, 1, batch(None, 2, 3, Compression::None)).error_code, 0);
    let next = FetchRequest {
        session_id: response.session_id,
        session_epoch: 2,
        max_bytes: 1 << 24,
        topics: Vec::new(),
        ..Default::default()
    };
    let changed: FetchResponse = client.request(ApiKey::Fetch, 16, &next);
    assert_eq!(changed.responses.len(), 1);
    assert_eq!(changed.responses[0].topic_id, topic_id);
    assert_eq!(changed.responses[0].partitions.len(), 1);
    assert_eq!(changed.responses[0].partitions[0].partition_index, 0);
    assert_eq!(values(&changed.responses[0].partitions[0]).len(), 3);
}

/// Kafka 4.3.1's `kafka-features describe` (DescribeFeatures, read from
/// ApiVersions): a new log is finalized at Kafka 4.3.1's metadata.version
/// (4.3-IV0) and group.version 1, and the broker lists its ranges;
/// `kafka-features upgrade/downgrade` through UpdateFeatures.
#[test]
fn kafka_features_describe_shows_the_finalized_levels() {
    let broker = BrokerProcess::start(&[]);
    let (ok, out) = support::kafka_cli("kafka-features", &["--bootstrap-server", &broker.bootstrap(), "describe"]);
    let line = |name: &str| out.lines().find(|l| l.starts_with(&format!("Feature: {name} "))).unwrap_or_default();
    assert!(ok, "{out}");
    assert!(line("metadata.version").contains("FinalizedVersionLevel: 4.3-IV0"), "{out}");
    assert!(line("metadata.version").contains("SupportedMaxVersion: 4.3-IV0"), "{out}");
    assert!(line("group.version").contains("FinalizedVersionLevel: 1"), "{out}");

    // UpdateFeatures: a safe downgrade and an upgrade of what krabka
    // implements; Kafka's refusals of what it does not.
    let features = |args: &[&str]| {
        let bootstrap = broker.bootstrap();
        let all: Vec<&str> =
            ["--bootstrap-server", bootstrap.as_str()].into_iter().chain(args.iter().copied()).collect();
        support::kafka_cli("kafka-features", &all)
    };
    let (ok, out) = features(&["downgrade", "--feature", "group.version=0"]);
    assert!(ok && out.contains("group.version was downgraded to 0"), "{out}");
    let (ok, out) = features(&["upgrade", "--feature", "group.version=1"]);
    assert!(ok && out.contains("group.version was upgraded to 1"), "{out}");
    let (ok, out) = features(&["upgrade", "--feature", "share.version=1"]);
    assert!(!ok && out.contains("Local controller 1 does not support this feature"), "{out}");
    // A new log is at 4.3-IV0, which changed the metadata format: Kafka
    // refuses every metadata.version downgrade from it, unsafe or dry-run.
    let (ok, out) = features(&["downgrade", "--metadata", "3.9"]);
    let refused = "Unsupported metadata.version downgrade from 30 to 21. Refusing to perform the requested downgrade because it might delete metadata information.";
    assert!(!ok && out.contains(refused), "{out}");
    let (ok, out) = features(&["downgrade", "--metadata", "3.9", "--unsafe"]);
    assert!(!ok && out.contains("Unsafe metadata downgrade is not supported in this version."), "{out}");
    let (ok, out) = features(&["downgrade", "--feature", "metadata.version=29", "--dry-run"]);
    assert!(!ok && out.contains("Unsupported metadata.version downgrade from 30 to 29."), "{out}");
    let (ok, out) = features(&["describe"]);
    let line = |name: &str| out.lines().find(|l| l.starts_with(&format!("Feature: {name} "))).unwrap_or_default();
    assert!(ok && line("group.version").contains("FinalizedVersionLevel: 1"), "{out}");
    assert!(line("metadata.version").contains("FinalizedVersionLevel: 4.3-IV0"), "{out}");
}
