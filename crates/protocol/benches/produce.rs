//! Decoding a ProduceRequest of 12 partitions x 64 KiB batches, as a broker
//! does for every produce: the records stay slices of the frame (the
//! `records_are_not_copied` check below and tests/corpus.rs prove it).
//!
//! Beside it, what the broker does to every response it sends: walk it for
//! error codes (`ResponseBody::for_each_error`, for the client-error
//! metric) against encoding it, on a 12-partition ProduceResponse and a
//! 100-partition FetchResponse without records (a fetch session's worst
//! case for the walk: many partitions, few bytes).
//!
//! `cargo bench -p krabka-protocol --bench produce`

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use krabka_protocol::compression::Compression;
use krabka_protocol::fetch_response::{FetchableTopicResponse, PartitionData};
use krabka_protocol::frame::{encode_request, RequestFrame};
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
use krabka_protocol::{
    ApiKey, FetchResponse, Message, ProduceRequest, ProduceResponse, RequestBody, ResponseBody, ResponseHeader,
};

fn produce_frame() -> Bytes {
    let value = vec![7u8; 1000];
    let mut builder = RecordBatchBuilder::new(Compression::None);
    while builder.uncompressed_bytes() + 1100 < 64 * 1024 {
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&value), headers: &[] }).unwrap();
    }
    let batch = builder.build().unwrap().into_bytes();
    let request = ProduceRequest {
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![TopicProduceData {
            name: "bench".into(),
            partition_data: (0..12)
                .map(|index| PartitionProduceData { index, records: Some(batch.clone()), ..Default::default() })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    encode_request(&mut buf, ApiKey::Produce, 11, 1, Some("bench"), &request).unwrap();
    buf.freeze().slice(4..)
}

fn records_are_not_copied(frame: &Bytes) {
    let RequestBody::Produce(request) = RequestFrame::parse(frame.clone()).unwrap().decode_body().unwrap() else {
        panic!("not a produce request")
    };
    let range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
    for partition in &request.topic_data[0].partition_data {
        let records = partition.records.as_ref().unwrap();
        assert!(range.contains(&(records.as_ptr() as usize)), "records were copied out of the frame");
    }
}

fn decode_produce(c: &mut Criterion) {
    let frame = produce_frame();
    records_are_not_copied(&frame);
    let mut group = c.benchmark_group("produce_request_12x64k");
    group.throughput(Throughput::Bytes(frame.len() as u64));
    group.bench_function("parse_and_decode", |b| {
        b.iter(|| {
            let parsed = RequestFrame::parse(std::hint::black_box(frame.clone())).unwrap();
            std::hint::black_box(parsed.decode_body().unwrap())
        })
    });
    group.finish();
}

fn produce_response() -> ResponseBody {
    let partitions =
        (0..12).map(|index| PartitionProduceResponse { index, base_offset: 1 << 20, ..Default::default() });
    let topic =
        TopicProduceResponse { name: "bench".into(), partition_responses: partitions.collect(), ..Default::default() };
    ResponseBody::Produce(Box::new(ProduceResponse { responses: vec![topic], ..Default::default() }))
}

fn fetch_response() -> ResponseBody {
    let partitions = (0..100).map(|partition_index| PartitionData {
        partition_index,
        high_watermark: 1 << 20,
        last_stable_offset: 1 << 20,
        records: Some(Bytes::new()),
        ..Default::default()
    });
    let topic =
        FetchableTopicResponse { topic: "bench".into(), partitions: partitions.collect(), ..Default::default() };
    ResponseBody::Fetch(Box::new(FetchResponse { responses: vec![topic], ..Default::default() }))
}

/// The error walk and the encoding of the same response, in one group so
/// that their ratio comes from one run.
fn response_errors(c: &mut Criterion) {
    for (name, api_key, version, body) in [
        ("produce_response_12", ApiKey::Produce, 11, produce_response()),
        ("fetch_response_100", ApiKey::Fetch, 16, fetch_response()),
    ] {
        let mut group = c.benchmark_group(name);
        group.bench_function("for_each_error", |b| {
            b.iter(|| {
                let mut errors = 0u32;
                std::hint::black_box(&body).for_each_error(&mut |_| errors += 1);
                std::hint::black_box(errors)
            })
        });
        group.bench_function("encode", |b| {
            // As the broker frames a response (the header, then the body).
            let header_version = api_key.info().response_header_version(version);
            let mut buf = BytesMut::with_capacity(64 * 1024);
            b.iter(|| {
                buf.clear();
                ResponseHeader { correlation_id: 1, ..Default::default() }.encode(&mut buf, header_version).unwrap();
                std::hint::black_box(&body).encode(&mut buf, version).unwrap();
                std::hint::black_box(buf.len())
            })
        });
        group.finish();
    }
}

criterion_group!(benches, decode_produce, response_errors);
criterion_main!(benches);
