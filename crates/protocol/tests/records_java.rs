//! Batches written by Apache Kafka's own Java client (kafka-clients 4.3.1,
//! `MemoryRecords.withIdempotentRecords` / `withRecords` /
//! `withEndTransactionMarker`, default settings for every codec): the bytes a
//! real producer sends and a real broker stores. They pin the format and the
//! codecs' framing (xerial snappy, Kafka's LZ4 frames, gzip, zstd) to what
//! Kafka writes, independent of this crate's own encoder.
//!
//! `SMALL_*`: base offset 1000, partition leader epoch 5, producer 42 epoch 3
//! base sequence 17, three records (see `check_small`). `LARGE_*`: a 100 KiB
//! value (several LZ4 blocks and xerial chunks) then a small record.

use bytes::Bytes;
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewHeader, NewRecord, Record, RecordBatch, RecordBatchBuilder, TimestampType};

const LIMIT_BYTES: usize = 1024 * 1024;

fn hex(text: &str) -> Bytes {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits.chunks(2).map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap()).collect()
}

fn parse(text: &str) -> (RecordBatch, Vec<Record>) {
    let batch = RecordBatch::new(hex(text)).unwrap();
    batch.validate().unwrap();
    let records = batch.records(LIMIT_BYTES).unwrap().collect::<Result<Vec<_>, _>>().unwrap();
    (batch, records)
}

const SMALL_HEADERS: [NewHeader<'static>; 2] =
    [NewHeader { key: b"trace", value: Some(b"abc") }, NewHeader { key: b"empty", value: None }];

fn small_records() -> [NewRecord<'static>; 3] {
    [
        NewRecord {
            timestamp_ms: 1_700_000_000_000,
            key: Some(b"key-0"),
            value: Some(b"value-0"),
            headers: &SMALL_HEADERS,
        },
        NewRecord { timestamp_ms: 1_700_000_000_005, key: None, value: Some(b"value-1 with no key"), headers: &[] },
        NewRecord { timestamp_ms: 1_699_999_999_990, key: Some(b"key-2"), value: None, headers: &[] },
    ]
}

fn check_small(text: &str, codec: Compression) {
    let (batch, records) = parse(text);
    assert_eq!(batch.compression(), Ok(codec));
    assert_eq!(batch.base_offset(), 1_000);
    assert_eq!(batch.partition_leader_epoch(), 5);
    assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), (42, 3, 17));
    assert_eq!(batch.timestamp_type(), TimestampType::CreateTime);
    assert!(!batch.is_transactional() && !batch.is_control());
    assert_eq!(batch.record_count(), 3);
    assert_eq!(batch.last_offset_delta(), 2);
    assert_eq!((batch.base_timestamp(), batch.max_timestamp()), (1_700_000_000_000, 1_700_000_000_005));

    let expected = small_records();
    assert_eq!(records.len(), expected.len());
    for (i, (read, written)) in records.iter().zip(&expected).enumerate() {
        assert_eq!(read.offset, 1_000 + i as i64);
        assert_eq!(read.timestamp, written.timestamp_ms);
        assert_eq!(read.key.as_deref(), written.key);
        assert_eq!(read.value.as_deref(), written.value);
        let headers: Vec<_> = read.headers.iter().map(|h| (h.key.to_vec(), h.value.map(|v| v.to_vec()))).collect();
        let written_headers: Vec<_> =
            written.headers.iter().map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec))).collect();
        assert_eq!(headers, written_headers);
    }

    // Our builder, given the same records, writes a batch that reads the same.
    let mut builder =
        RecordBatchBuilder::new(codec).with_base_offset(1_000).with_partition_leader_epoch(5).with_producer(42, 3, 17);
    for record in &expected {
        builder.append(record).unwrap();
    }
    let ours = builder.build().unwrap();
    ours.validate().unwrap();
    assert_eq!(ours.records(LIMIT_BYTES).unwrap().collect::<Result<Vec<_>, _>>().unwrap(), records);
    if codec == Compression::None {
        assert_eq!(ours.as_bytes(), batch.as_bytes(), "uncompressed batches are byte-identical to Java's");
    }
}

fn check_large(text: &str, codec: Compression) {
    let (batch, records) = parse(text);
    assert_eq!(batch.compression(), Ok(codec));
    assert_eq!(records.len(), 2);
    let pattern = b"kafka record batch ";
    let expected: Vec<u8> = (0..100 * 1024).map(|i| pattern[i % pattern.len()]).collect();
    assert_eq!(records[0].key.as_deref(), Some(&b"big"[..]));
    assert_eq!(records[0].value.as_deref(), Some(&expected[..]));
    assert_eq!(records[1].key.as_deref(), Some(&b"tail"[..]));
    assert_eq!(records[1].value.as_deref(), Some(&b"end"[..]));
    assert_eq!(records[1].offset, 1);
}

#[test]
fn java_uncompressed_batch() {
    check_small(SMALL_NONE, Compression::None);
}

#[test]
fn java_gzip_batches() {
    check_small(SMALL_GZIP, Compression::Gzip);
    check_large(LARGE_GZIP, Compression::Gzip);
}

#[test]
fn java_snappy_batches_use_xerial_framing() {
    let section = RecordBatch::new(hex(SMALL_SNAPPY)).unwrap().records_section();
    assert!(section.starts_with(b"\x82SNAPPY\x00"));
    check_small(SMALL_SNAPPY, Compression::Snappy);
    check_large(LARGE_SNAPPY, Compression::Snappy);
}

#[test]
fn java_lz4_batches() {
    let section = RecordBatch::new(hex(SMALL_LZ4)).unwrap().records_section();
    assert!(section.starts_with(&[0x04, 0x22, 0x4d, 0x18]), "LZ4 frame magic");
    check_small(SMALL_LZ4, Compression::Lz4);
    check_large(LARGE_LZ4, Compression::Lz4);
}

#[test]
fn java_zstd_batches() {
    check_small(SMALL_ZSTD, Compression::Zstd);
    check_large(LARGE_ZSTD, Compression::Zstd);
}

#[test]
fn java_commit_marker_is_a_transactional_control_batch() {
    let (batch, records) = parse(COMMIT_MARKER);
    assert!(batch.is_control());
    assert!(batch.is_transactional());
    assert_eq!((batch.base_offset(), batch.partition_leader_epoch(), batch.producer_id()), (500, 7, 42));
    assert_eq!(records.len(), 1);
    // Control record key: version 0, type 1 (COMMIT). Value: version 0, coordinator epoch 9.
    assert_eq!(records[0].key.as_deref(), Some(&[0, 0, 0, 1][..]));
    assert!(records[0].value.as_deref().unwrap().starts_with(&[0, 0, 0, 0, 0, 9]));
    assert_eq!(records[0].timestamp, 1_700_000_000_123);
}

const SMALL_NONE: &str = "
    00000000000003e80000007b00000005029861ca850000000000020000018bcfe568000000018bcfe568050000000000
    00002a00030000001100000003460000000a6b65792d300e76616c75652d30040a7472616365066162630a656d707479
    0132000a02012676616c75652d312077697468206e6f206b657900160013040a6b65792d320100
";

const SMALL_GZIP: &str = "
    00000000000003e8000000870000000502528162b30001000000020000018bcfe568000000018bcfe568050000000000
    00002a000300000011000000031f8b08000000000000ff73636060e0ca4eadd435e02b4bcc294dd53560e12a294a4c4e
    654b4c4ae64acd2d28a9643462e062625483481b2a9467966428e4e52b003531883108b380751b313200006ca7568d4a
    000000
";

const LARGE_GZIP: &str = "
    00000000000000000000017dffffffff0254bbc63f0001000000010000018bcfe568000000018bcfe56801ffffffffff
    ffffffffffffffffff000000021f8b08000000000000ffedc8cb0d40401400c01707715081d3b6b6fe42484401aa508f
    d2f42133c779de3a22ca7699eeb75ef3b8e6740edd71f6a9cd573727a594524a29a594524a29a594524a29a594524a29
    a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a59452
    4a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a5
    94524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a
    29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594
    524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594524a29a594fa65451345515d79d9ca61efe3
    0318a75b8d1c900100
";

const SMALL_SNAPPY: &str = "
    00000000000003e80000008f000000050205ce01310002000000020000018bcfe568000000018bcfe568050000000000
    00002a0003000000110000000382534e415050590000000001000000010000004a4aa8460000000a6b65792d300e7661
    6c75652d30040a7472616365066162630a656d7074790132000a02012676051f64312077697468206e6f206b65790016
    0013040a6b65792d320100
";

const LARGE_SNAPPY: &str = "
    000000000000000000001389ffffffff020aeac9b50002000000010000018bcfe568000000018bcfe56801ffffffffff
    ffffffffffffffffff0000000282534e41505059000000000100000001000006248080027c96c00c0000000662696780
    c00c6b61666b61207265636f726420626174636820fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe13007e13000000061780800248206b61666b61207265636f7264206261746368
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300b21300
    000006178080024864206261746368206b61666b61207265636f72fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300
    fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300b21300000000e69c204861207265636f7264206261746368
    206b61666bfe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe
    1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe
    1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe
    1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe1300fe
    1300e6130038001a000202087461696c06656e6400
";

const SMALL_LZ4: &str = "
    00000000000003e80000008a0000000502efb239c50003000000020000018bcfe568000000018bcfe568050000000000
    00002a0003000000110000000304224d186040824a000080460000000a6b65792d300e76616c75652d30040a74726163
    65066162630a656d7074790132000a02012676616c75652d312077697468206e6f206b657900160013040a6b65792d32
    010000000000
";

const LARGE_LZ4: &str = "
    000000000000000000000228ffffffff02a90c131e0003000000010000018bcfe568000000018bcfe56801ffffffffff
    ffffffffffffffffff0000000204224d186040822b010000ff1196c00c0000000662696780c00c6b61666b6120726563
    6f7264206261746368201300ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
    ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
    ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
    ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
    ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
    ffffffffffffffffffffffffffffffffffffffffffffffffffffffffc8507265636f72b9000000ff0464206261746368
    206b61666b61207265636f721300ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
    ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
    ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
    ffffffffffffffffffffffffffff77f000001a000202087461696c06656e640000000000
";

const SMALL_ZSTD: &str = "
    00000000000003e800000087000000050248a259100004000000020000018bcfe568000000018bcfe568050000000000
    00002a0003000000110000000328b52ffd0058500200460000000a6b65792d300e76616c75652d30040a747261636506
    6162630a656d7074790132000a02012676616c75652d312077697468206e6f206b657900160013040a6b65792d320100
    010000
";

const LARGE_ZSTD: &str = "
    000000000000000000000076ffffffff02b6a06a080004000000010000018bcfe568000000018bcfe56801ffffffffff
    ffffffffffffffffff0000000228b52ffd0058cc0100f40296c00c0000000662696780c00c6b61666b61207265636f72
    6420626174636820001a000202087461696c06656e64000100507fb47c3e01010000
";

const COMMIT_MARKER: &str = "
    00000000000001f40000004200000007028c3122da0030000000000000018bcfe5687b0000018bcfe5687b0000000000
    00002a0003ffffffff000000012000000008000000010c00000000000900
";
