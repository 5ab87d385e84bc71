//! Decoding a ProduceRequest of 12 partitions x 64 KiB batches, as a broker
//! does for every produce: the records stay slices of the frame (the
//! `records_are_not_copied` check below and tests/corpus.rs prove it).
//!
//! `cargo bench -p krabka-protocol --bench produce`

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use krabka_protocol::compression::Compression;
use krabka_protocol::frame::{encode_request, RequestFrame};
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
use krabka_protocol::{ApiKey, ProduceRequest, RequestBody};

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

criterion_group!(benches, decode_produce);
criterion_main!(benches);
