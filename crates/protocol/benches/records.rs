//! Record batch hot-path micro-benchmarks: CRC-32C (crc-fast against the
//! crc32c crate, side by side), validating and iterating a tiny batch, and
//! validating a 64 KiB batch uncompressed and LZ4, and walking a batch of
//! many small records (the load generator's 100 B cell: key, two headers).
//!
//! `cargo bench -p krabka-protocol --bench records -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{crc32c, NewHeader, NewRecord, RecordBatch, RecordBatchBuilder, RecordError};

const KIB: usize = 1024;
const MAX_DECOMPRESSED_BYTES: usize = 8 * 1024 * KIB;

/// Text-like bytes from a small vocabulary: compresses about as well as
/// typical JSON payloads, so LZ4 numbers are not flattered by zeros.
fn text_bytes(length: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "order",
        "id",
        "customer",
        "\"amount\":",
        "12.50",
        "EUR",
        "status",
        "shipped",
        "{",
        "}",
        "2024-06-01T12:00:00Z",
        "warehouse",
        "sku-",
        "4711",
        "quantity",
        ",",
    ];
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut out = Vec::with_capacity(length + 32);
    while out.len() < length {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        out.extend_from_slice(WORDS[(state >> 60) as usize].as_bytes());
        out.push(if state & 0x100 == 0 { b' ' } else { (state >> 20) as u8 });
    }
    out.truncate(length);
    out
}

fn batch_of(codec: Compression, record_count: usize, value_bytes: usize) -> (Bytes, usize) {
    let mut builder = RecordBatchBuilder::new(codec);
    for i in 0..record_count {
        let key = format!("key-{i}");
        let value = text_bytes(value_bytes, i as u64);
        let record = NewRecord {
            timestamp_ms: 1_700_000_000_000 + i as i64,
            key: Some(key.as_bytes()),
            value: Some(&value),
            headers: &[],
        };
        builder.append(&record).expect("benchmark records fit a batch");
    }
    let uncompressed_bytes = builder.uncompressed_bytes();
    (builder.build().expect("benchmark batch builds").into_bytes(), uncompressed_bytes)
}

/// What the produce path does per batch: frame, check the CRC, walk the
/// records (borrowed, as validation needs no owned copies).
fn validate_and_iterate(bytes: &Bytes) -> Result<usize, RecordError> {
    let batch = RecordBatch::new(bytes.clone())?;
    batch.validate()?;
    let mut value_bytes = 0;
    for record in &batch.decode_records(MAX_DECOMPRESSED_BYTES)? {
        value_bytes += record?.value.map_or(0, <[u8]>::len);
    }
    Ok(value_bytes)
}

/// The same with owned records (`Bytes` keys and values).
fn validate_and_iterate_owned(bytes: &Bytes) -> Result<usize, RecordError> {
    let batch = RecordBatch::new(bytes.clone())?;
    batch.validate()?;
    let mut value_bytes = 0;
    for record in batch.records(MAX_DECOMPRESSED_BYTES)? {
        value_bytes += record?.value.map_or(0, |v| v.len());
    }
    Ok(value_bytes)
}

fn validate(bytes: &Bytes) -> Result<(), RecordError> {
    RecordBatch::new(bytes.clone())?.validate()
}

fn crc(c: &mut Criterion) {
    let data = text_bytes(64 * KIB, 7);
    let mut group = c.benchmark_group("crc32c_64KiB");
    group.throughput(Throughput::Bytes(data.len() as u64));
    group.bench_function("krabka", |b| b.iter(|| crc32c(black_box(&data))));
    group.bench_function("crc-fast", |b| {
        b.iter(|| crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, black_box(&data)))
    });
    group.bench_function("crc32c-crate", |b| b.iter(|| crc32c::crc32c(black_box(&data))));
    group.finish();
}

fn one_record(c: &mut Criterion) {
    let (bytes, _) = batch_of(Compression::None, 1, 100);
    c.bench_function("validate_iterate_one_record_batch", |b| {
        b.iter(|| validate_and_iterate(black_box(&bytes)).expect("valid batch"))
    });
    c.bench_function("validate_iterate_one_record_batch_owned", |b| {
        b.iter(|| validate_and_iterate_owned(black_box(&bytes)).expect("valid batch"))
    });
}

fn batch_64k(c: &mut Criterion) {
    // 63 records of 1 KiB values: just under 64 KiB uncompressed.
    let mut group = c.benchmark_group("batch_64KiB_1KiB_records");
    for codec in [Compression::None, Compression::Lz4] {
        let (bytes, uncompressed_bytes) = batch_of(codec, 63, KIB);
        // Throughput counts uncompressed batch bytes, so codecs compare on the same work.
        group.throughput(Throughput::Bytes(uncompressed_bytes as u64));
        group.bench_function(format!("validate/{codec}"), |b| {
            b.iter(|| validate(black_box(&bytes)).expect("valid batch"))
        });
        group.bench_function(format!("validate_iterate/{codec}"), |b| {
            b.iter(|| validate_and_iterate(black_box(&bytes)).expect("valid batch"))
        });
    }
    group.finish();
}

/// 655 records of 100 B values, each with a key and two headers, as the
/// load generator's 100 B batches carry: the per-record parsing cost, and
/// what a leader does to such a batch (decompress it, read every record).
fn small_records(c: &mut Criterion) {
    let text = small_records_batch(Compression::None, |_| text_bytes(100, 3));
    let batch = RecordBatch::new(text).expect("benchmark batch frames");
    let records = batch.decode_records(MAX_DECOMPRESSED_BYTES).expect("benchmark batch decodes");
    let mut group = c.benchmark_group("batch_655_100B_records");
    group.throughput(Throughput::Elements(SMALL_RECORDS as u64));
    group.bench_function("iterate", |b| {
        b.iter(|| {
            let mut value_bytes = 0;
            for record in black_box(&records) {
                value_bytes += record.expect("valid record").value.map_or(0, <[u8]>::len);
            }
            value_bytes
        })
    });
    group.bench_function("facts", |b| {
        b.iter(|| {
            let mut max_timestamp = 0;
            black_box(&records)
                .for_each_fact(|fact| max_timestamp = max_timestamp.max(fact.timestamp))
                .expect("valid records");
            max_timestamp
        })
    });
    // Random values, as the capacity cells send: LZ4 keeps them as literals
    // and matches only the keys and headers.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let random = small_records_batch(Compression::Lz4, |_| {
        (0..100)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 56) as u8
            })
            .collect()
    });
    let batch = RecordBatch::new(random).expect("benchmark batch frames");
    let mut scratch = Vec::new();
    group.bench_function("leader_check_lz4_random", |b| {
        b.iter(|| {
            let records =
                black_box(&batch).decode_records_reusing(MAX_DECOMPRESSED_BYTES, &mut scratch).expect("decodes");
            let mut max_timestamp = 0;
            records.for_each_fact(|fact| max_timestamp = max_timestamp.max(fact.timestamp)).expect("valid records");
            records.recycle(&mut scratch);
            max_timestamp
        })
    });
    group.finish();
}

const SMALL_RECORDS: usize = 655;

/// The load generator's record shape with values from `value`.
fn small_records_batch(codec: Compression, mut value: impl FnMut(usize) -> Vec<u8>) -> Bytes {
    let mut builder = RecordBatchBuilder::new(codec);
    for i in 0..SMALL_RECORDS {
        let key = format!("key-{i:08}");
        let ns = (1_700_000_000_000_000_000u64 + i as u64).to_be_bytes();
        let headers =
            [NewHeader { key: b"run", value: Some(b"0123456789abcdef") }, NewHeader { key: b"ns", value: Some(&ns) }];
        let value = value(i);
        let record = NewRecord {
            timestamp_ms: 1_700_000_000_000 + i as i64,
            key: Some(key.as_bytes()),
            value: Some(&value),
            headers: &headers,
        };
        builder.append(&record).expect("benchmark records fit a batch");
    }
    builder.build().expect("benchmark batch builds").into_bytes()
}

criterion_group!(benches, crc, one_record, batch_64k, small_records);
criterion_main!(benches);
