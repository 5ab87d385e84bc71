//! Valid random requests for hostile-input testing, shared by the
//! `hostile_requests` test and the `wire_fuzz` example: a biased vocabulary
//! (topics the broker has, special integers, record batches), the generated
//! random constructors, a few adjustments so that the request is one a real
//! client could send and the broker answers in bounded time, and a blocking
//! connection that checks what comes back.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::ops::RangeInclusive;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use krabka_protocol::compression::Compression;
use krabka_protocol::create_topics_request::CreatableTopic;
use krabka_protocol::frame::parse_response_header;
use krabka_protocol::metadata_request::MetadataRequestTopic;
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
use krabka_protocol::testing::{Bias, Rng};
use krabka_protocol::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, EncodeError, Message, MetadataRequest,
    MetadataResponse, RequestBody, RequestHeader, ResponseBody, Uuid,
};

/// Failures known and not fixed yet, by API and versions: the test tolerates
/// (and prints) a failure of these, the fuzzer leaves them out of its
/// traffic (one of them could end the broker process). Empty: every API and
/// version the broker advertises must behave. An entry needs an issue.
pub const KNOWN_FAILURES: &[(ApiKey, RangeInclusive<i16>, &str)] = &[];

pub fn known_failure(api_key: ApiKey, version: i16) -> Option<&'static str> {
    KNOWN_FAILURES.iter().find(|(key, versions, _)| *key == api_key && versions.contains(&version)).map(|k| k.2)
}

/// Client id of every request, so broker logs show where traffic came from.
pub const CLIENT_ID: &str = "krabka-hostile";

/// How long a valid request may take: tamed requests never wait on the
/// broker's side for more than about a second.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(20);

/// The names and ids the random values are biased toward.
#[derive(Clone, Debug, Default)]
pub struct Vocabulary {
    pub topics: Vec<(String, Uuid)>,
}

impl Vocabulary {
    pub fn bias(&self) -> Bias {
        // Topic names four times over: most fields are topic names, and a
        // request reaches a handler's real work only when its names exist.
        let names = self.topics.iter().map(|(name, _)| name.clone());
        let mut strings: Vec<String> = names.clone().chain(names.clone()).chain(names.clone()).chain(names).collect();
        // Group ids, the broker's id as a config resource name, config names
        // and values handlers parse, an empty and an over-long name.
        strings.extend(["hostile-group", "1", "", "cleanup.policy", "compact", "retention.ms", "-1"].map(String::from));
        strings
            .extend(["compression.type", "lz4", "max.message.bytes", "1048588", "consumer", "range"].map(String::from));
        strings.push("x".repeat(300));
        Bias {
            strings,
            uuids: self.topics.iter().map(|(_, id)| *id).chain([Uuid::ZERO]).collect(),
            bytes: record_batches(),
            integers: Bias::special_integers(),
            percent: 50,
        }
    }
}

/// Well-formed record batches (plain, compressed, idempotent, empty value).
pub fn record_batches() -> Vec<Bytes> {
    let build = |compression: Compression, producer: Option<(i64, i16, i32)>, count: u32| {
        let mut builder = RecordBatchBuilder::new(compression);
        if let Some((id, epoch, sequence)) = producer {
            builder = builder.with_producer(id, epoch, sequence);
        }
        for i in 0..count {
            let value = format!("hostile-value-{i}");
            let record = NewRecord {
                timestamp_ms: 1_700_000_000_000 + i64::from(i),
                key: Some(b"key"),
                value: (i % 3 != 2).then_some(value.as_bytes()),
                headers: &[],
            };
            builder.append(&record).expect("append to a batch in memory");
        }
        builder.build().expect("build a small batch").into_bytes()
    };
    vec![
        build(Compression::None, None, 3),
        build(Compression::Lz4, None, 5),
        build(Compression::Zstd, Some((0, 0, 0)), 2),
        build(Compression::None, Some((1_000, 0, 0)), 1),
    ]
}

/// A random request for `api_key` at `version`, made one a client could send.
pub fn random_request(api_key: ApiKey, version: i16, rng: &mut Rng, bounded_state: bool) -> RequestBody {
    let mut body = RequestBody::random(api_key, rng, version);
    tame(&mut body, version, bounded_state);
    body
}

/// Adjusts the few fields that make the broker wait (long polls, rebalance
/// timeouts): a wait of i32::MAX ms is valid, but no test can sit it out.
/// With `bounded_state` (the fuzzer), requests that would create topics or
/// change configs only validate, so that the broker's memory measures
/// leaks, not new topics, and its probe is not refused by a config.
fn tame(body: &mut RequestBody, version: i16, bounded_state: bool) {
    match body {
        RequestBody::Fetch(r) => r.max_wait_ms = r.max_wait_ms.min(200),
        RequestBody::JoinGroup(r) => {
            // group.min.session.timeout.ms is 6 s: keep most joins valid.
            if r.session_timeout_ms > 10_000 {
                r.session_timeout_ms = 6_000 + r.session_timeout_ms % 4_000;
            }
            r.rebalance_timeout_ms = r.rebalance_timeout_ms.min(1_000);
        }
        RequestBody::ConsumerGroupHeartbeat(r) => r.rebalance_timeout_ms = r.rebalance_timeout_ms.min(1_000),
        RequestBody::CreateTopics(r) if bounded_state => r.validate_only = true,
        RequestBody::CreatePartitions(r) if bounded_state => r.validate_only = true,
        // Dynamic broker configs (a cluster-wide min.insync.replicas, tiny
        // segments) would change what the fuzzer's integrity probe measures.
        RequestBody::AlterConfigs(r) if bounded_state => r.validate_only = true,
        RequestBody::IncrementalAlterConfigs(r) if bounded_state => r.validate_only = true,
        // Before v4 every Metadata request may create topics (the field is v4+).
        RequestBody::Metadata(r) if bounded_state && version >= 4 => r.allow_auto_topic_creation = false,
        _ => {}
    }
}

/// A Produce with acks=0 has no response (Kafka closes the connection
/// instead when the produce fails).
pub fn expects_no_response(body: &RequestBody) -> bool {
    matches!(body, RequestBody::Produce(r) if r.acks == 0)
}

/// size | request header (the version the API uses) | body.
pub fn encode_frame(body: &RequestBody, version: i16, correlation_id: i32) -> Result<BytesMut, EncodeError> {
    let api_key = body.api_key();
    let header = RequestHeader {
        request_api_key: api_key as i16,
        request_api_version: version,
        correlation_id,
        client_id: Some(CLIENT_ID.into()),
        ..Default::default()
    };
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    header.encode(&mut buf, api_key.info().request_header_version(version))?;
    body.encode(&mut buf, version)?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf)
}

/// Checks one response frame (size prefix removed): its correlation id, that
/// it decodes at `version` with the generated type, with no bytes left over.
pub fn check_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    mut frame: Bytes,
) -> Result<ResponseBody, String> {
    let header = parse_response_header(api_key, version, &mut frame).map_err(|e| format!("response header: {e}"))?;
    if header.correlation_id != correlation_id {
        return Err(format!("correlation id {} where {correlation_id} was expected", header.correlation_id));
    }
    let body = ResponseBody::decode(api_key, version, &mut frame).map_err(|e| format!("response body: {e}"))?;
    if !frame.is_empty() {
        return Err(format!("{} bytes left after the response body", frame.len()));
    }
    Ok(body)
}

/// Why a connection gave no proper answer.
#[derive(Debug)]
pub enum Failure {
    Closed,
    Timeout,
    Io(String),
    BadResponse(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Closed => write!(f, "connection closed"),
            Failure::Timeout => write!(f, "no response within {RESPONSE_TIMEOUT:?}"),
            Failure::Io(e) => write!(f, "i/o error: {e}"),
            Failure::BadResponse(e) => write!(f, "bad response: {e}"),
        }
    }
}

fn io_failure(e: std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::ConnectionAborted
        | std::io::ErrorKind::BrokenPipe => Failure::Closed,
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Failure::Timeout,
        _ => Failure::Io(e.to_string()),
    }
}

/// A blocking connection to the broker.
pub struct Connection {
    pub stream: TcpStream,
    next_correlation_id: i32,
}

/// Responses larger than this are refused by the checks (no test request
/// reads more than a few MiB).
const MAX_RESPONSE_BYTES: usize = 64 << 20;

impl Connection {
    pub fn open(bootstrap: &str) -> Result<Connection, Failure> {
        let stream = TcpStream::connect(bootstrap).map_err(io_failure)?;
        stream.set_read_timeout(Some(RESPONSE_TIMEOUT)).map_err(io_failure)?;
        stream.set_nodelay(true).map_err(io_failure)?;
        Ok(Connection { stream, next_correlation_id: 1 })
    }

    pub fn next_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        id
    }

    /// Sends `body`; returns its correlation id.
    pub fn send(&mut self, body: &RequestBody, version: i16) -> Result<i32, Failure> {
        let id = self.next_id();
        let frame = encode_frame(body, version, id).map_err(|e| Failure::Io(format!("encode: {e}")))?;
        self.stream.write_all(&frame).map_err(io_failure)?;
        Ok(id)
    }

    pub fn read_frame(&mut self) -> Result<Bytes, Failure> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(io_failure)?;
        let size = i32::from_be_bytes(size);
        let size = usize::try_from(size).map_err(|_| Failure::BadResponse(format!("frame size {size}")))?;
        if size > MAX_RESPONSE_BYTES {
            return Err(Failure::BadResponse(format!("frame size {size}")));
        }
        let mut frame = vec![0u8; size];
        self.stream.read_exact(&mut frame).map_err(io_failure)?;
        Ok(Bytes::from(frame))
    }

    /// Reads and checks the response to the request `correlation_id`.
    pub fn receive(&mut self, api_key: ApiKey, version: i16, correlation_id: i32) -> Result<ResponseBody, Failure> {
        let frame = self.read_frame()?;
        check_response(api_key, version, correlation_id, frame).map_err(Failure::BadResponse)
    }

    pub fn request(&mut self, body: &RequestBody, version: i16) -> Result<ResponseBody, Failure> {
        let id = self.send(body, version)?;
        self.receive(body.api_key(), version, id)
    }

    /// ApiVersions v3: what the broker advertises, (api, min, max).
    pub fn api_versions(&mut self) -> Result<Vec<(ApiKey, i16, i16)>, Failure> {
        let request = RequestBody::ApiVersions(Box::new(ApiVersionsRequest {
            client_software_name: "krabka-hostile".into(),
            client_software_version: "1".into(),
            ..Default::default()
        }));
        let ResponseBody::ApiVersions(response) = self.request(&request, 3)? else {
            unreachable!("decoded as ApiVersions")
        };
        advertised(&response)
    }

    /// Metadata v12 of every topic: (name, id).
    pub fn topics(&mut self) -> Result<Vec<(String, Uuid)>, Failure> {
        let request = RequestBody::Metadata(Box::new(MetadataRequest { topics: None, ..Default::default() }));
        let ResponseBody::Metadata(response) = self.request(&request, 12)? else { unreachable!("decoded as Metadata") };
        Ok(topic_ids(&response))
    }

    /// Creates the topics that do not exist yet; returns every topic's id.
    pub fn ensure_topics(&mut self, topics: &[(&str, i32)]) -> Result<Vec<(String, Uuid)>, Failure> {
        let request = CreateTopicsRequest {
            topics: topics
                .iter()
                .map(|&(name, partitions)| CreatableTopic {
                    name: name.into(),
                    num_partitions: partitions,
                    replication_factor: 1,
                    ..Default::default()
                })
                .collect(),
            timeout_ms: 10_000,
            ..Default::default()
        };
        self.request(&RequestBody::CreateTopics(Box::new(request)), 7)?;
        let all = self.topics()?;
        Ok(all.into_iter().filter(|(name, _)| topics.iter().any(|(t, _)| t == name)).collect())
    }
}

fn advertised(response: &ApiVersionsResponse) -> Result<Vec<(ApiKey, i16, i16)>, Failure> {
    if response.error_code != 0 {
        return Err(Failure::BadResponse(format!("ApiVersions error {}", response.error_code)));
    }
    let mut apis = Vec::new();
    for api in &response.api_keys {
        let key = ApiKey::from_i16(api.api_key)
            .ok_or_else(|| Failure::BadResponse(format!("unknown api key {} advertised", api.api_key)))?;
        apis.push((key, api.min_version, api.max_version));
    }
    Ok(apis)
}

fn topic_ids(response: &MetadataResponse) -> Vec<(String, Uuid)> {
    response.topics.iter().filter_map(|t| Some((t.name.clone()?, t.topic_id))).collect()
}

/// Metadata v12 of the named topics (helper for probes).
pub fn metadata_request(names: &[&str]) -> RequestBody {
    let topics = names.iter().map(|n| MetadataRequestTopic { name: Some(n.to_string()), ..Default::default() });
    RequestBody::Metadata(Box::new(MetadataRequest { topics: Some(topics.collect()), ..Default::default() }))
}
