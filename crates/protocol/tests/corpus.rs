//! Golden frames captured from real clients (Java kafka-clients 4.3.1,
//! librdkafka 2.16, Kafka's CLI tools) talking to a real Kafka 4.3.1 broker
//! (see `tests/corpus/README.md`). Every frame must decode and re-encode to
//! exactly the bytes Kafka and its clients sent, and every produced batch
//! must decode, with every codec, to the records the client sent.

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use krabka_protocol::frame::{parse_response_header, RequestFrame};
use krabka_protocol::records::{RecordBatches, NO_TIMESTAMP};
use krabka_protocol::{ApiKey, Message, ProduceRequest, RequestBody, ResponseBody};
use serde_json::Value;

const MAX_DECOMPRESSED_BYTES: usize = 16 << 20;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

struct Frame {
    client: String,
    meta: Value,
    bytes: Bytes,
}

fn frames() -> Vec<Frame> {
    let mut out = Vec::new();
    for client in ["java", "librdkafka", "cli", "kafka-broker"] {
        let dir = corpus_dir().join(client);
        let manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
        for meta in manifest["frames"].as_array().unwrap() {
            let bytes = std::fs::read(dir.join(meta["file"].as_str().unwrap())).unwrap();
            out.push(Frame { client: client.to_string(), meta: meta.clone(), bytes: bytes.into() });
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_request_decodes_and_reencodes_byte_for_byte() {
    let mut checked = 0;
    let mut trailing = 0;
    for frame in frames().iter().filter(|f| f.meta["direction"] == "request") {
        let name = format!("{}/{}", frame.client, frame.meta["file"]);
        let parsed = RequestFrame::parse(frame.bytes.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(parsed.api_key as i64, frame.meta["api_key"].as_i64().unwrap(), "{name}");
        let mut rest = parsed.body.clone();
        let body = RequestBody::decode(parsed.api_key, parsed.api_version(), &mut rest)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let consumed = parsed.body.slice(..parsed.body.len() - rest.len());
        if !rest.is_empty() {
            // Kafka ignores bytes after a request body; librdkafka 2.16 adds
            // three to Metadata v13 requests. Nobody else may.
            assert!(frame.client == "librdkafka" && parsed.api_key == ApiKey::Metadata, "{name}: trailing bytes");
            trailing += 1;
        }
        let mut again = BytesMut::new();
        body.encode(&mut again, parsed.api_version()).unwrap();
        assert_eq!(hex(&again), hex(&consumed), "{name}: re-encoding differs");
        checked += 1;
    }
    assert!(checked >= 150, "only {checked} request frames");
    assert!(trailing <= 3, "{trailing} requests with trailing bytes");
}

#[test]
fn every_response_decodes_and_reencodes_byte_for_byte() {
    let mut checked = 0;
    for frame in frames().iter().filter(|f| f.meta["direction"] == "response") {
        let name = format!("{}/{}", frame.client, frame.meta["file"]);
        let api_key = ApiKey::from_i16(frame.meta["api_key"].as_i64().unwrap() as i16).unwrap();
        let version = frame.meta["api_version"].as_i64().unwrap() as i16;
        let mut rest = frame.bytes.clone();
        let header = parse_response_header(api_key, version, &mut rest).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(i64::from(header.correlation_id), frame.meta["correlation_id"].as_i64().unwrap(), "{name}");
        let body_bytes = rest.clone();
        let body = ResponseBody::decode(api_key, version, &mut rest).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(rest.is_empty(), "{name}: {} bytes left", rest.len());
        let mut again = BytesMut::new();
        body.encode(&mut again, version).unwrap();
        assert_eq!(hex(&again), hex(&body_bytes), "{name}: re-encoding differs");
        checked += 1;
    }
    assert!(checked >= 150, "only {checked} response frames");
}

fn unhex(value: &Value) -> Option<Vec<u8>> {
    let text = value.as_str()?;
    Some((0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect())
}

/// Every codec the clients used decodes to exactly the records they sent,
/// and the records field is a slice of the request frame, not a copy.
#[test]
fn produced_batches_decode_to_the_records_sent() {
    let mut codecs_seen = std::collections::BTreeSet::new();
    let mut records_checked = 0;
    for frame in frames().iter().filter(|f| f.meta["direction"] == "request" && f.meta["api_name"] == "Produce") {
        let name = format!("{}/{}", frame.client, frame.meta["file"]);
        let parsed = RequestFrame::parse(frame.bytes.clone()).unwrap();
        let RequestBody::Produce(request) = parsed.decode_body().unwrap() else { panic!("{name}: not a produce") };
        let request: &ProduceRequest = &request;
        let frame_range = frame.bytes.as_ptr() as usize..frame.bytes.as_ptr() as usize + frame.bytes.len();
        let expected_partitions = frame.meta["partitions"].as_array().cloned().unwrap_or_default();
        for topic in &request.topic_data {
            for partition in &topic.partition_data {
                let records = partition.records.clone().unwrap();
                assert!(frame_range.contains(&(records.as_ptr() as usize)), "{name}: records were copied");
                let meta = expected_partitions
                    .iter()
                    .find(|p| p["partition"].as_i64() == Some(i64::from(partition.index)))
                    .unwrap_or_else(|| panic!("{name}: partition {} not in manifest", partition.index));
                let mut sent = meta["records_sent"].as_array().cloned().unwrap_or_default().into_iter();
                for batch in RecordBatches::new(records) {
                    let batch = batch.unwrap_or_else(|e| panic!("{name}: {e}"));
                    batch.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
                    codecs_seen.insert(format!("{}/{:?}", frame.client, batch.compression().unwrap()));
                    for record in batch.records(MAX_DECOMPRESSED_BYTES).unwrap() {
                        let record = record.unwrap_or_else(|e| panic!("{name}: {e}"));
                        let Some(expected) = sent.next() else { continue };
                        assert_eq!(record.key.as_deref(), unhex(&expected["key"]).as_deref(), "{name}: key");
                        assert_eq!(record.value.as_deref(), unhex(&expected["value"]).as_deref(), "{name}: value");
                        if expected["timestamp"].as_i64().is_some_and(|t| t != NO_TIMESTAMP) {
                            assert_eq!(Some(record.timestamp), expected["timestamp"].as_i64(), "{name}: timestamp");
                        }
                        let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                            record.headers.iter().map(|h| (h.key.to_vec(), h.value.map(|v| v.to_vec()))).collect();
                        let expected_headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = expected["headers"]
                            .as_array()
                            .unwrap()
                            .iter()
                            // Header keys are text in the manifest; values are hex.
                            .map(|h| (h[0].as_str().unwrap().as_bytes().to_vec(), unhex(&h[1])))
                            .collect();
                        assert_eq!(headers, expected_headers, "{name}: headers");
                        records_checked += 1;
                    }
                }
            }
        }
    }
    for codec in ["Gzip", "Snappy", "Lz4", "Zstd", "None"] {
        for client in ["java", "librdkafka"] {
            assert!(
                codecs_seen.contains(&format!("{client}/{codec}")),
                "no {codec} batch from {client}: {codecs_seen:?}"
            );
        }
    }
    assert!(records_checked >= 40, "only {records_checked} records compared");
}

/// Fetch responses carry batches the broker wrote: each one's CRC holds and
/// its records decode.
#[test]
fn fetched_batches_validate_and_iterate() {
    let mut batches_checked = 0;
    for frame in frames().iter().filter(|f| f.meta["direction"] == "response" && f.meta["api_name"] == "Fetch") {
        let name = format!("{}/{}", frame.client, frame.meta["file"]);
        let version = frame.meta["api_version"].as_i64().unwrap() as i16;
        let mut rest = frame.bytes.clone();
        parse_response_header(ApiKey::Fetch, version, &mut rest).unwrap();
        let response = krabka_protocol::FetchResponse::decode(&mut rest, version).unwrap();
        for topic in &response.responses {
            for partition in &topic.partitions {
                let Some(records) = partition.records.clone() else { continue };
                for batch in RecordBatches::new(records) {
                    // A fetch may end in a partial batch: that ends the data.
                    let Ok(batch) = batch else { break };
                    batch.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
                    for record in batch.records(MAX_DECOMPRESSED_BYTES).unwrap() {
                        record.unwrap_or_else(|e| panic!("{name}: {e}"));
                    }
                    batches_checked += 1;
                }
            }
        }
    }
    assert!(batches_checked >= 10, "only {batches_checked} fetched batches");
}
