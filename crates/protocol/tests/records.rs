//! Record batches end to end: the builder against hand-written bytes, round
//! trips through every codec, CRC and framing checks, patching, and random
//! input that must never panic.

use bytes::{Bytes, BytesMut};
use krabka_protocol::compression::{self, Compression, CompressionError};
use krabka_protocol::records::{
    crc32c, crc32c_append, whole_batches, DecodedRecords, NewHeader, NewRecord, Record, RecordBatch,
    RecordBatchBuilder, RecordBatchMut, RecordBatches, RecordError, RecordFacts, TimestampType, BATCH_HEADER_BYTES,
};
use krabka_protocol::DecodeError;
use proptest::prelude::*;

const LIMIT_BYTES: usize = 1024 * 1024;

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits.chunks(2).map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap()).collect()
}

fn records_of(batch: &RecordBatch) -> Vec<Record> {
    batch.records(LIMIT_BYTES).unwrap().collect::<Result<Vec<_>, _>>().unwrap()
}

fn record<'a>(timestamp_ms: i64, key: &'a [u8], value: &'a [u8]) -> NewRecord<'a> {
    NewRecord { timestamp_ms, key: Some(key), value: Some(value), headers: &[] }
}

/// A one-record batch written out field by field from the Kafka protocol
/// guide (and identical to what kafka-clients 4.3.1's
/// `MemoryRecords.withRecords` writes for the same record).
const ONE_RECORD_BATCH: &str = "
    0000000000000000    baseOffset 0
    0000003e            batchLength 62 (74 bytes in all)
    ffffffff            partitionLeaderEpoch -1
    02                  magic 2
    36ff4dc3            crc: CRC-32C of everything from attributes on
    0000                attributes: no compression, CreateTime
    00000000            lastOffsetDelta 0
    0000018bcfe56800    baseTimestamp 1700000000000
    0000018bcfe56800    maxTimestamp 1700000000000
    ffffffffffffffff    producerId -1
    ffff                producerEpoch -1
    ffffffff            baseSequence -1
    00000001            recordCount 1
    18                  record length 12 (zig-zag)
    00                  attributes
    00                  timestampDelta 0
    00                  offsetDelta 0
    02 6b               keyLength 1, 'k'
    0a 68656c6c6f       valueLength 5, 'hello'
    00                  headersCount 0
";

#[test]
fn crc32c_known_answer_and_independent_implementation_agree() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    let data: Vec<u8> = (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    for length in [0, 1, 7, 8, 15, 16, 63, 64, 65, 4095, 4096, 65_536, 100_000] {
        assert_eq!(crc32c(&data[..length]), crc32c::crc32c(&data[..length]), "length {length}");
    }
}

#[test]
fn builder_writes_the_hand_built_batch_exactly() {
    // Annotated with prose, so strip the notes before decoding the hex.
    let expected: String = ONE_RECORD_BATCH
        .lines()
        .map(|line| {
            line.split_whitespace()
                .take_while(|w| w.len() % 2 == 0 && w.bytes().all(|b| b.is_ascii_hexdigit()))
                .collect::<String>()
        })
        .collect();
    let expected = hex(&expected);
    assert_eq!(expected.len(), 74);
    assert_eq!(crc32c::crc32c(&expected[21..]), 0x36ff_4dc3, "the independent CRC agrees");

    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.append(&record(1_700_000_000_000, b"k", b"hello")).unwrap();
    let batch = builder.build().unwrap();
    assert_eq!(&batch.as_bytes()[..], &expected[..]);

    let parsed = RecordBatch::new(Bytes::from(expected)).unwrap();
    parsed.validate().unwrap();
    assert_eq!(parsed.base_offset(), 0);
    assert_eq!(parsed.batch_length(), 62);
    assert_eq!(parsed.partition_leader_epoch(), -1);
    assert_eq!(parsed.magic(), 2);
    assert_eq!(parsed.crc(), 0x36ff_4dc3);
    assert_eq!(parsed.compression(), Ok(Compression::None));
    assert_eq!(parsed.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(parsed.max_timestamp(), 1_700_000_000_000);
    assert_eq!(parsed.record_count(), 1);
    let records = records_of(&parsed);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(records[0].value.as_deref(), Some(&b"hello"[..]));
    assert_eq!(records[0].timestamp, 1_700_000_000_000);
    assert!(records[0].headers.is_empty());
}

#[test]
fn header_fields_and_flags_round_trip() {
    let headers = [NewHeader { key: b"h1", value: Some(b"v1") }, NewHeader { key: b"h2", value: None }];
    let mut builder = RecordBatchBuilder::new(Compression::Zstd)
        .with_base_offset(1_000)
        .with_partition_leader_epoch(9)
        .with_producer(42, 3, 17)
        .with_transactional(true);
    builder.append(&NewRecord { timestamp_ms: 50, key: None, value: Some(b"a"), headers: &headers }).unwrap();
    builder
        .append_with_offset(1_005, &NewRecord { timestamp_ms: 40, key: Some(b"k"), value: None, headers: &[] })
        .unwrap();
    let batch = builder.build().unwrap();
    batch.validate().unwrap();
    assert_eq!(batch.base_offset(), 1_000);
    assert_eq!(batch.last_offset_delta(), 5);
    assert_eq!(batch.last_offset(), 1_005);
    assert_eq!(batch.next_offset(), 1_006);
    assert_eq!(batch.partition_leader_epoch(), 9);
    assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), (42, 3, 17));
    assert!(batch.is_transactional());
    assert!(!batch.is_control());
    assert_eq!(batch.compression(), Ok(Compression::Zstd));
    assert_eq!(batch.attributes(), 0x14);
    assert_eq!((batch.base_timestamp(), batch.max_timestamp()), (50, 50));
    assert_eq!(batch.delete_horizon_ms(), None);

    let records = records_of(&batch);
    assert_eq!(records.iter().map(|r| (r.offset, r.timestamp)).collect::<Vec<_>>(), vec![(1_000, 50), (1_005, 40)]);
    assert_eq!(records[1].timestamp_delta, -10);
    let headers: Vec<_> = records[0].headers.iter().collect();
    assert_eq!(headers.len(), 2);
    assert_eq!((&headers[0].key[..], headers[0].value.as_deref()), (&b"h1"[..], Some(&b"v1"[..])));
    assert_eq!((&headers[1].key[..], headers[1].value.as_deref()), (&b"h2"[..], None));
}

#[test]
fn delete_horizon_is_the_base_timestamp() {
    let mut builder = RecordBatchBuilder::new(Compression::None).with_delete_horizon_ms(5_000);
    builder.append(&record(7_000, b"k", b"v")).unwrap();
    let batch = builder.build().unwrap();
    assert!(batch.has_delete_horizon_ms());
    assert_eq!(batch.delete_horizon_ms(), Some(5_000));
    assert_eq!(records_of(&batch)[0].timestamp, 7_000);
    assert_eq!(records_of(&batch)[0].timestamp_delta, 2_000);
}

#[test]
fn empty_batches_build_and_read() {
    for codec in Compression::ALL {
        let batch = RecordBatchBuilder::new(codec).with_base_offset(7).build().unwrap();
        batch.validate().unwrap();
        assert_eq!(batch.record_count(), 0);
        assert_eq!((batch.base_timestamp(), batch.max_timestamp()), (-1, -1));
        assert_eq!(records_of(&batch), vec![]);
    }
}

#[test]
fn builder_rejects_offsets_that_do_not_increase_or_do_not_fit() {
    let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(100);
    builder.append_with_offset(105, &record(0, b"k", b"v")).unwrap();
    assert_eq!(
        builder.append_with_offset(105, &record(0, b"k", b"v")),
        Err(RecordError::OffsetNotIncreasing { offset: 105, previous: 105 })
    );
    assert!(matches!(
        builder.append_with_offset(100 + i64::from(i32::MAX) + 1, &record(0, b"k", b"v")),
        Err(RecordError::OffsetDeltaOutOfRange { .. })
    ));
    let mut below_base = RecordBatchBuilder::new(Compression::None).with_base_offset(100);
    assert!(matches!(
        below_base.append_with_offset(99, &record(0, b"k", b"v")),
        Err(RecordError::OffsetDeltaOutOfRange { .. })
    ));
    // A failed append leaves the builder as it was.
    assert_eq!(builder.append(&record(0, b"k", b"v")), Ok(106));
    assert_eq!(builder.build().unwrap().record_count(), 2);
}

fn one_batch(codec: Compression, base_offset: i64, values: &[&[u8]]) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new(codec).with_base_offset(base_offset);
    for (i, value) in values.iter().enumerate() {
        builder.append(&record(1_000 + i as i64, b"key", value)).unwrap();
    }
    builder.build().unwrap()
}

#[test]
fn legacy_message_sets_are_unsupported_and_other_magics_invalid() {
    // A v1 message: offset, size, crc (CRC-32 over the rest), magic 1,
    // attributes, timestamp, key, value. Only its magic matters here.
    let mut v1 = hex("0000000000000000 00000018 00000000 01 00 0000018bcfe56800 ffffffff 00000002 6869");
    assert_eq!(v1.len(), 12 + 0x18);
    assert_eq!(RecordBatch::new(Bytes::from(v1.clone())), Err(RecordError::UnsupportedMagic(1)));
    v1[16] = 0;
    assert_eq!(RecordBatches::new(Bytes::from(v1.clone())).next(), Some(Err(RecordError::UnsupportedMagic(0))));
    v1[16] = 3;
    assert_eq!(RecordBatch::new(Bytes::from(v1.clone())), Err(RecordError::InvalidMagic(3)));
    v1[16] = 0xff;
    assert_eq!(RecordBatch::new(Bytes::from(v1)), Err(RecordError::InvalidMagic(-1)));
}

#[test]
fn framing_errors_are_typed() {
    let batch = one_batch(Compression::None, 0, &[b"value"]).into_bytes();
    assert_eq!(RecordBatch::new(batch.slice(..10)), Err(RecordError::Truncated { needed: 17, remaining: 10 }));
    assert_eq!(
        RecordBatch::new(batch.slice(..batch.len() - 1)),
        Err(RecordError::Truncated { needed: batch.len(), remaining: batch.len() - 1 })
    );
    let mut extra = BytesMut::from(&batch[..]);
    extra.extend_from_slice(b"x");
    assert_eq!(
        RecordBatch::new(extra.freeze()),
        Err(RecordError::BatchSizeMismatch { batch_bytes: batch.len(), buffer_bytes: batch.len() + 1 })
    );
    let mut short = BytesMut::from(&batch[..]);
    short[8..12].copy_from_slice(&48i32.to_be_bytes());
    assert_eq!(RecordBatch::new(short.freeze()), Err(RecordError::InvalidBatchLength(48)));
}

/// Rewrites covered bytes of a batch and fixes the CRC, to reach checks past it.
fn with_fixed_crc(mut bytes: BytesMut, edit: impl FnOnce(&mut BytesMut)) -> RecordBatch {
    edit(&mut bytes);
    RecordBatchMut::new(&mut bytes).unwrap().update_crc();
    RecordBatch::new(bytes.freeze()).unwrap()
}

#[test]
fn record_count_and_record_lengths_are_checked() {
    let batch = one_batch(Compression::None, 0, &[b"one", b"two"]);
    let bytes = BytesMut::from(&batch.as_bytes()[..]);

    let negative = with_fixed_crc(bytes.clone(), |b| b[57..61].copy_from_slice(&(-1i32).to_be_bytes()));
    assert!(matches!(negative.validate(), Err(RecordError::InvalidRecordCount { count: -1, .. })));
    assert!(matches!(negative.records(LIMIT_BYTES), Err(RecordError::InvalidRecordCount { count: -1, .. })));

    let huge = with_fixed_crc(bytes.clone(), |b| b[57..61].copy_from_slice(&i32::MAX.to_be_bytes()));
    assert!(matches!(huge.validate(), Err(RecordError::InvalidRecordCount { .. })));

    // One record fewer than present: Kafka reports the leftover bytes.
    let fewer = with_fixed_crc(bytes.clone(), |b| b[57..61].copy_from_slice(&1i32.to_be_bytes()));
    fewer.validate().unwrap();
    let results: Vec<_> = fewer.records(LIMIT_BYTES).unwrap().collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(RecordError::TrailingRecordBytes { count: 1, .. })));
    let decoded = fewer.decode_records(LIMIT_BYTES).unwrap();
    let results: Vec<_> = decoded.iter().collect();
    assert_eq!(results.len(), 2);
    assert!(matches!(results[1], Err(RecordError::TrailingRecordBytes { count: 1, .. })));
    assert!(matches!(facts_agree_with_iter(&decoded), Some(RecordError::TrailingRecordBytes { count: 1, .. })));

    // One record more than present.
    let more = with_fixed_crc(bytes.clone(), |b| b[57..61].copy_from_slice(&3i32.to_be_bytes()));
    let results: Vec<_> = more.records(LIMIT_BYTES).unwrap().collect();
    assert_eq!(results.len(), 3);
    assert!(results[2].is_err());

    // A record length one byte short of its fields.
    let short = with_fixed_crc(bytes.clone(), |b| b[BATCH_HEADER_BYTES] -= 2);
    let first = short.records(LIMIT_BYTES).unwrap().next().unwrap();
    assert!(matches!(first, Err(RecordError::RecordSizeMismatch { .. })), "{first:?}");
    let walked = facts_agree_with_iter(&short.decode_records(LIMIT_BYTES).unwrap());
    assert!(matches!(walked, Some(RecordError::RecordSizeMismatch { .. })), "{walked:?}");
    // Negative lengths (zigzag: odd values): the record's, then its key's.
    let negative_length = with_fixed_crc(bytes.clone(), |b| b[BATCH_HEADER_BYTES] = 0x03);
    let walked = facts_agree_with_iter(&negative_length.decode_records(LIMIT_BYTES).unwrap());
    assert_eq!(walked, Some(RecordError::InvalidRecordLength(-2)));
    let negative_key = with_fixed_crc(bytes.clone(), |b| b[BATCH_HEADER_BYTES + 4] = 0x05);
    let walked = facts_agree_with_iter(&negative_key.decode_records(LIMIT_BYTES).unwrap());
    assert_eq!(walked, Some(RecordError::InvalidFieldLength { what: "key", length: -3 }));

    // An unknown codec id.
    let codec7 = with_fixed_crc(bytes, |b| b[22] |= 0x07);
    assert_eq!(codec7.validate(), Err(RecordError::Compression(CompressionError::UnknownCodec(7))));
}

/// `batch` with `tail` appended to its records section and one more record
/// declared, so the extra record is read from `tail` alone.
fn with_extra_record_bytes(batch: &RecordBatch, tail: &[u8]) -> RecordBatch {
    with_fixed_crc(BytesMut::from(&batch.as_bytes()[..]), |b| {
        b.extend_from_slice(tail);
        let batch_length = i32::try_from(b.len() - 12).unwrap();
        b[8..12].copy_from_slice(&batch_length.to_be_bytes());
        let count = i32::from_be_bytes(b[57..61].try_into().unwrap()) + 1;
        b[57..61].copy_from_slice(&count.to_be_bytes());
    })
}

#[test]
fn a_varint_cut_off_or_too_long_at_the_end_of_the_section_is_an_error() {
    let batch = one_batch(Compression::None, 0, &[b"one"]);
    let cases: [(&[u8], RecordError); 3] = [
        (&[0x80], DecodeError::Truncated { needed: 1, remaining: 0 }.into()),
        (&[0xff, 0xff], DecodeError::Truncated { needed: 1, remaining: 0 }.into()),
        (&[0xff, 0xff, 0xff, 0xff, 0x1f], DecodeError::VarintTooLong(5).into()),
    ];
    for (tail, expected) in cases {
        let extended = with_extra_record_bytes(&batch, tail);
        extended.validate().unwrap();
        let owned: Vec<_> = extended.records(LIMIT_BYTES).unwrap().collect();
        assert_eq!(owned.len(), 2, "{tail:?}");
        assert!(owned[0].is_ok());
        assert_eq!(owned[1].as_ref().unwrap_err(), &expected, "{tail:?}");
        let decoded = extended.decode_records(LIMIT_BYTES).unwrap();
        let borrowed: Vec<_> = decoded.iter().collect();
        assert_eq!(borrowed[1].as_ref().unwrap_err(), &expected, "{tail:?}");
        assert_eq!(facts_agree_with_iter(&decoded), Some(expected), "{tail:?}");
    }
}

#[test]
fn decompression_is_capped_inside_a_batch() {
    let value = vec![0u8; 2 * LIMIT_BYTES];
    for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let batch = one_batch(codec, 0, &[&value]);
        batch.validate().unwrap();
        assert!(batch.size_bytes() < LIMIT_BYTES / 4, "{codec}: {}", batch.size_bytes());
        assert_eq!(
            batch.records(LIMIT_BYTES).unwrap_err(),
            RecordError::Compression(CompressionError::TooLarge { codec, max_output_bytes: LIMIT_BYTES })
        );
        assert_eq!(records_of_with_limit(&batch, 3 * LIMIT_BYTES)[0].value.as_deref(), Some(&value[..]));
    }
}

fn records_of_with_limit(batch: &RecordBatch, limit: usize) -> Vec<Record> {
    batch.records(limit).unwrap().collect::<Result<Vec<_>, _>>().unwrap()
}

#[test]
fn patching_base_offset_and_epoch_keeps_the_crc() {
    let batch = one_batch(Compression::Lz4, 0, &[b"a", b"b", b"c"]);
    let crc = batch.crc();
    let mut bytes = BytesMut::from(&batch.as_bytes()[..]);
    let mut patch = RecordBatchMut::new(&mut bytes).unwrap();
    patch.set_base_offset(1_234_567);
    patch.set_partition_leader_epoch(12);
    let patched = RecordBatch::new(bytes.freeze()).unwrap();
    patched.validate().unwrap();
    assert_eq!(patched.crc(), crc);
    assert_eq!(patched.base_offset(), 1_234_567);
    assert_eq!(patched.partition_leader_epoch(), 12);
    assert_eq!(
        records_of(&patched).iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![1_234_567, 1_234_568, 1_234_569]
    );
}

#[test]
fn log_append_time_rewrites_max_timestamp_and_crc() {
    let batch = one_batch(Compression::Gzip, 0, &[b"a", b"b"]);
    let mut bytes = BytesMut::from(&batch.as_bytes()[..]);
    let mut patch = RecordBatchMut::new(&mut bytes).unwrap();
    assert_eq!(patch.timestamp_type(), TimestampType::CreateTime);
    patch.set_log_append_time(99_999);
    assert_eq!(patch.timestamp_type(), TimestampType::LogAppendTime);
    let patched = RecordBatch::new(bytes.freeze()).unwrap();
    patched.validate().unwrap();
    assert_ne!(patched.crc(), batch.crc());
    assert_eq!(patched.max_timestamp(), 99_999);
    assert_eq!(patched.base_timestamp(), batch.base_timestamp());
    assert_eq!(patched.attributes(), batch.attributes() | 0x08);
    assert!(records_of(&patched).iter().all(|r| r.timestamp == 99_999));

    // Same as the builder's LogAppendTime batches.
    let mut builder = RecordBatchBuilder::new(Compression::Gzip).with_log_append_time(99_999);
    builder.append(&record(1_000, b"key", b"a")).unwrap();
    builder.append(&record(1_001, b"key", b"b")).unwrap();
    assert_eq!(builder.build().unwrap(), patched);
}

#[test]
fn patching_needs_exactly_one_framed_batch() {
    let batch = one_batch(Compression::None, 0, &[b"a"]);
    let mut two = BytesMut::from(&batch.as_bytes()[..]);
    two.extend_from_slice(batch.as_bytes());
    assert!(matches!(RecordBatchMut::new(&mut two), Err(RecordError::BatchSizeMismatch { .. })));
    assert!(matches!(RecordBatchMut::new(&mut [0u8; 5]), Err(RecordError::Truncated { .. })));
}

#[test]
fn splitting_yields_each_batch_then_stops_at_a_partial_one() {
    let a = one_batch(Compression::None, 0, &[b"a"]);
    let b = one_batch(Compression::Snappy, 1, &[b"b", b"bb"]);
    let mut joined = BytesMut::new();
    joined.extend_from_slice(a.as_bytes());
    joined.extend_from_slice(b.as_bytes());
    joined.extend_from_slice(&a.as_bytes()[..30]);
    let mut batches = RecordBatches::new(joined.freeze());
    assert_eq!(batches.next(), Some(Ok(a.clone())));
    assert_eq!(batches.next(), Some(Ok(b)));
    assert_eq!(batches.next(), Some(Err(RecordError::Truncated { needed: a.size_bytes(), remaining: 30 })));
    assert_eq!(batches.remaining().len(), 30);
    assert_eq!(batches.next(), None);
    assert_eq!(RecordBatches::new(Bytes::new()).count(), 0);
}

#[test]
fn whole_batches_drop_a_partial_batch_at_the_end_and_keep_anything_else() {
    let a = one_batch(Compression::None, 0, &[b"a"]);
    let b = one_batch(Compression::Lz4, 1, &[b"b", b"bb"]);
    let mut joined = BytesMut::new();
    joined.extend_from_slice(a.as_bytes());
    joined.extend_from_slice(b.as_bytes());
    let whole = joined.len();
    joined.extend_from_slice(&a.as_bytes()[..30]);
    let joined = joined.freeze();
    assert_eq!(whole_batches(joined.clone()), joined.slice(..whole));
    assert_eq!(whole_batches(joined.slice(..10)), Bytes::new());
    assert_eq!(whole_batches(Bytes::new()), Bytes::new());
    // Not a partial batch but a corrupt one: left whole for the log to refuse.
    let mut corrupt = BytesMut::from(&joined[..whole]);
    corrupt[a.size_bytes() + 16] = 7;
    assert_eq!(whole_batches(corrupt.clone().freeze()), corrupt.freeze());
}

// ---------------------------------------------------------------- properties

#[derive(Debug, Clone)]
struct TestRecord {
    offset_gap: i64,
    timestamp_ms: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

#[derive(Debug, Clone)]
struct TestBatch {
    codec: Compression,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer: (i64, i16, i32),
    is_transactional: bool,
    is_control: bool,
    log_append_time_ms: Option<i64>,
    delete_horizon_ms: Option<i64>,
    records: Vec<TestRecord>,
}

fn small_bytes(max_len: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max_len)
}

fn test_record() -> impl Strategy<Value = TestRecord> {
    (
        prop_oneof![4 => Just(1i64), 1 => 1i64..1_000],
        prop_oneof![3 => 1_600_000_000_000i64..1_800_000_000_000, 1 => any::<i64>()],
        proptest::option::weighted(0.8, small_bytes(40)),
        // Values whose lengths take one, two and three varint bytes.
        proptest::option::weighted(
            0.9,
            prop_oneof![8 => small_bytes(200), 2 => Just(vec![b'x'; 3_000]), 1 => Just(vec![b'y'; 20_000])],
        ),
        proptest::collection::vec((small_bytes(10), proptest::option::of(small_bytes(10))), 0..3),
    )
        .prop_map(|(offset_gap, timestamp_ms, key, value, headers)| TestRecord {
            offset_gap,
            timestamp_ms,
            key,
            value,
            headers,
        })
}

fn test_batch() -> impl Strategy<Value = TestBatch> {
    (
        proptest::sample::select(Compression::ALL.to_vec()),
        0i64..(1 << 50),
        any::<i32>(),
        (any::<i64>(), any::<i16>(), any::<i32>()),
        any::<(bool, bool)>(),
        proptest::option::weighted(0.2, any::<i64>()),
        proptest::option::weighted(0.2, any::<i64>()),
        proptest::collection::vec(test_record(), 0..12),
    )
        .prop_map(
            |(
                codec,
                base_offset,
                partition_leader_epoch,
                producer,
                (is_transactional, is_control),
                log_append_time_ms,
                delete_horizon_ms,
                records,
            )| TestBatch {
                codec,
                base_offset,
                partition_leader_epoch,
                producer,
                is_transactional,
                is_control,
                log_append_time_ms,
                delete_horizon_ms,
                records,
            },
        )
}

fn build(spec: &TestBatch) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new(spec.codec)
        .with_base_offset(spec.base_offset)
        .with_partition_leader_epoch(spec.partition_leader_epoch)
        .with_producer(spec.producer.0, spec.producer.1, spec.producer.2)
        .with_transactional(spec.is_transactional)
        .with_control(spec.is_control);
    if let Some(time) = spec.log_append_time_ms {
        builder = builder.with_log_append_time(time);
    }
    if let Some(horizon) = spec.delete_horizon_ms {
        builder = builder.with_delete_horizon_ms(horizon);
    }
    let mut offset = spec.base_offset - 1;
    for record in &spec.records {
        offset += record.offset_gap;
        let headers: Vec<NewHeader<'_>> =
            record.headers.iter().map(|(key, value)| NewHeader { key, value: value.as_deref() }).collect();
        let new = NewRecord {
            timestamp_ms: record.timestamp_ms,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: &headers,
        };
        builder.append_with_offset(offset, &new).unwrap();
    }
    builder.build().unwrap()
}

/// Bytes that look like a v2 batch (magic, length, CRC right) around a
/// random body, so the parser gets past framing into records and codecs.
fn plausible_batch(attributes: i16, record_count: i32, body: &[u8]) -> RecordBatch {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder.append(&record(0, b"", b"")).unwrap();
    let template = builder.build().unwrap();
    let mut bytes = BytesMut::from(&template.as_bytes()[..BATCH_HEADER_BYTES]);
    bytes.extend_from_slice(body);
    let batch_length = (bytes.len() - 12) as i32;
    bytes[8..12].copy_from_slice(&batch_length.to_be_bytes());
    bytes[21..23].copy_from_slice(&attributes.to_be_bytes());
    bytes[57..61].copy_from_slice(&record_count.to_be_bytes());
    with_fixed_crc(bytes, |_| {})
}

/// Drives every reader over a batch; only panics matter.
/// A leader's walk (`for_each_fact`) sees the records the iterator yields
/// and ends on the same error; returns that error.
fn facts_agree_with_iter(decoded: &DecodedRecords) -> Option<RecordError> {
    let mut facts = Vec::new();
    let walked = decoded.for_each_fact(|fact| facts.push(fact));
    let mut iterated = Vec::new();
    let mut error = None;
    for item in decoded.iter() {
        match item {
            Ok(r) => iterated.push(RecordFacts::from(&r)),
            Err(e) => error = Some(e),
        }
    }
    assert_eq!(facts, iterated);
    assert_eq!(walked.err(), error);
    error
}

fn exercise(batch: &RecordBatch) {
    let _ = batch.validate();
    let _ = format!("{batch:?}");
    if let Ok(decoded) = batch.decode_records(64 * 1024) {
        facts_agree_with_iter(&decoded);
        for record in decoded.iter().flatten() {
            for header in record.headers.iter() {
                let _ = (header.key.len(), header.value.map(<[u8]>::len));
            }
        }
    }
    if let Ok(records) = batch.records(64 * 1024) {
        // The iterator ends after its first error, so flattening stops there.
        for record in records.flatten() {
            for header in record.headers.iter() {
                let _ = (header.key.len(), header.value.map(|v| v.len()));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn built_batches_read_back_equal(spec in test_batch()) {
        let batch = build(&spec);
        batch.validate().unwrap();
        prop_assert_eq!(batch.compression(), Ok(spec.codec));
        prop_assert_eq!(batch.base_offset(), spec.base_offset);
        prop_assert_eq!(batch.partition_leader_epoch(), spec.partition_leader_epoch);
        prop_assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), spec.producer);
        prop_assert_eq!(batch.is_transactional(), spec.is_transactional);
        prop_assert_eq!(batch.is_control(), spec.is_control);
        prop_assert_eq!(batch.delete_horizon_ms(), spec.delete_horizon_ms);
        prop_assert_eq!(batch.record_count() as usize, spec.records.len());
        let create_max = spec.records.iter().map(|r| r.timestamp_ms).max().unwrap_or(-1).max(-1);
        prop_assert_eq!(batch.max_timestamp(), spec.log_append_time_ms.unwrap_or(create_max));

        let records = records_of(&batch);
        prop_assert_eq!(records.len(), spec.records.len());
        let mut offset = spec.base_offset - 1;
        for (read, written) in records.iter().zip(&spec.records) {
            offset += written.offset_gap;
            prop_assert_eq!(read.offset, offset);
            prop_assert_eq!(read.timestamp, spec.log_append_time_ms.unwrap_or(written.timestamp_ms));
            prop_assert_eq!(read.key.as_deref(), written.key.as_deref());
            prop_assert_eq!(read.value.as_deref(), written.value.as_deref());
            let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                read.headers.iter().map(|h| (h.key.to_vec(), h.value.map(|v| v.to_vec()))).collect();
            prop_assert_eq!(&headers, &written.headers);
        }
        if let Some(last) = records.last() {
            prop_assert_eq!(batch.last_offset(), last.offset);
        }
        // The borrowed view reads the same records.
        let decoded = batch.decode_records(LIMIT_BYTES).unwrap();
        prop_assert_eq!(decoded.len(), records.len());
        let borrowed = decoded.iter().collect::<Result<Vec<_>, _>>().unwrap();
        prop_assert_eq!(borrowed.len(), records.len());
        for (by_ref, owned) in borrowed.iter().zip(&records) {
            prop_assert_eq!((by_ref.offset, by_ref.timestamp, by_ref.offset_delta), (owned.offset, owned.timestamp, owned.offset_delta));
            prop_assert_eq!((by_ref.attributes, by_ref.timestamp_delta), (owned.attributes, owned.timestamp_delta));
            prop_assert_eq!(by_ref.key, owned.key.as_deref());
            prop_assert_eq!(by_ref.value, owned.value.as_deref());
            prop_assert_eq!(by_ref.headers.len(), owned.headers.len());
            for (h_ref, h_owned) in by_ref.headers.iter().zip(owned.headers.iter()) {
                prop_assert_eq!(h_ref.key, &h_owned.key[..]);
                prop_assert_eq!(h_ref.value, h_owned.value.as_deref());
            }
        }
    }

    #[test]
    fn any_flipped_covered_byte_fails_the_crc(spec in test_batch(), position in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let batch = build(&spec);
        let mut bytes = BytesMut::from(&batch.as_bytes()[..]);
        // The CRC itself and everything after it.
        let at = 17 + position.index(bytes.len() - 17);
        bytes[at] ^= flip;
        let corrupt = RecordBatch::new(bytes.freeze()).unwrap();
        let result = corrupt.validate();
        prop_assert!(matches!(result, Err(RecordError::CrcMismatch { .. })), "{:?}", result);
    }

    #[test]
    fn a_corrupt_second_batch_does_not_touch_the_first(
        first in test_batch(),
        second in test_batch(),
        position in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let first = build(&first);
        let second = build(&second);
        let mut joined = BytesMut::from(&first.as_bytes()[..]);
        joined.extend_from_slice(second.as_bytes());
        let at = first.size_bytes() + position.index(second.size_bytes());
        joined[at] ^= flip;
        let mut batches = RecordBatches::new(joined.freeze());
        let read_first = batches.next().unwrap().unwrap();
        prop_assert_eq!(&read_first, &first);
        read_first.validate().unwrap();
        prop_assert_eq!(records_of(&read_first), records_of(&first));
        // The second batch fails somewhere: framing, CRC, or (for a flipped
        // base offset or leader epoch, which the CRC does not cover) not at all.
        let second_ok = matches!(batches.next(), Some(Ok(batch)) if batch.validate().is_ok());
        let uncovered = at - first.size_bytes() < 16 && !(8..12).contains(&(at - first.size_bytes()));
        prop_assert_eq!(second_ok, uncovered);
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        for batch in RecordBatches::new(Bytes::from(data.clone())).flatten() {
            exercise(&batch);
        }
        let _ = RecordBatch::new(Bytes::from(data.clone()));
        let _ = RecordBatchMut::new(&mut data.clone()).map(|mut b| b.set_log_append_time(1));
        for codec in Compression::ALL {
            let _ = compression::decompress(codec, &data, 64 * 1024);
        }
    }

    #[test]
    fn random_bodies_behind_a_valid_header_never_panic(
        codec in 0i16..8,
        record_count in prop_oneof![0i32..20, any::<i32>()],
        body in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        exercise(&plausible_batch(codec, record_count, &body));
    }

    #[test]
    fn mutated_real_batches_never_panic(spec in test_batch(), edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let batch = build(&spec);
        let mut bytes = BytesMut::from(&batch.as_bytes()[..]);
        let body_bytes = bytes.len() - BATCH_HEADER_BYTES;
        if body_bytes > 0 {
            for (position, value) in &edits {
                bytes[BATCH_HEADER_BYTES + position.index(body_bytes)] = *value;
            }
        }
        // Fix the CRC so the records and codecs see the damage.
        if let Ok(mut patch) = RecordBatchMut::new(&mut bytes) {
            patch.update_crc();
        }
        if let Ok(mutated) = RecordBatch::new(bytes.freeze()) {
            exercise(&mutated);
        }
    }

    #[test]
    fn crc32c_matches_the_crc32c_crate(data in proptest::collection::vec(any::<u8>(), 0..5_000), split in any::<prop::sample::Index>()) {
        let expected = crc32c::crc32c(&data);
        prop_assert_eq!(crc32c(&data), expected);
        let (head, tail) = data.split_at(split.index(data.len() + 1));
        prop_assert_eq!(crc32c_append(crc32c(head), tail), expected);
    }
}

/// Decoding into a reused buffer reads the same records as a fresh decode,
/// and the buffer comes back for the next batch; an uncompressed batch
/// leaves it alone.
#[test]
fn decoding_into_a_reused_buffer_reads_the_same_records_and_returns_it() {
    let mut scratch = Vec::new();
    for compression in [Compression::Lz4, Compression::Zstd, Compression::None] {
        let mut builder = RecordBatchBuilder::new(compression);
        for i in 0..50u8 {
            builder.append(&record(1_000 + i64::from(i), &[i], &[i; 300])).unwrap();
        }
        let batch = builder.build().unwrap();
        let fresh: Vec<_> = batch.decode_records(1 << 20).unwrap().into_iter().map(Result::unwrap).collect();
        let reused = batch.decode_records_reusing(1 << 20, &mut scratch).unwrap();
        {
            // Owned records hold slices of the buffer: the buffer comes back
            // only once they are gone.
            let reused_records: Vec<_> = reused.clone().into_iter().map(Result::unwrap).collect();
            assert_eq!(fresh, reused_records, "{compression:?}");
        }
        reused.recycle(&mut scratch);
        if compression != Compression::None {
            assert!(scratch.capacity() >= 50 * 300, "{compression:?}: the buffer came back");
        }
    }
}
