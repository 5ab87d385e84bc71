//! Concatenated record batches (v2), as they arrive in a Produce request's
//! `records`, a Fetch response, or a log segment.
//!
//! Input: byte 0 is flags, the rest the batches. Flag bit 0 recomputes each
//! framed batch's CRC-32C before validation, so mutations get past the CRC
//! and reach the header and record parsing; without it the CRC is taken as
//! the input has it (and almost always fails, which is checked too).
//!
//! Checks, besides never panicking:
//! - splitting: each batch is framed (magic 2, `batchLength` agrees with its
//!   size), `RecordBatch::new` on its bytes agrees, and the bytes yielded plus
//!   the bytes left equal the input;
//! - records of a valid batch (decompressed with a 1 MiB cap) yield at most
//!   `recordCount` records, exactly that many when none fails, and each
//!   record's headers iterate to the count they declare;
//! - the records agree, field for field and on where the first error falls,
//!   with a plain reference reader of the record format written here from
//!   the protocol's description (the library's reader is tuned for speed);
//! - a valid batch whose records all parse rebuilds with `RecordBatchBuilder`
//!   (same codec and header fields) into a valid batch with the same records;
//! - `RecordBatchMut` patches keep a valid batch valid and read back.
#![no_main]

use bytes::Bytes;
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{
    DecodedRecords, Header, NewHeader, NewRecord, Record, RecordBatch, RecordBatchBuilder, RecordBatchMut,
    RecordBatches, RecordFacts, TimestampType, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES, MAGIC_V2,
};
use libfuzzer_sys::fuzz_target;

const MAX_DECOMPRESSED_BYTES: usize = 1024 * 1024;
const FIX_CRC: u8 = 1;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, batches)) = data.split_first() else { return };
    let mut buf = batches.to_vec();
    if flags & FIX_CRC != 0 {
        fix_crcs(&mut buf);
    }
    let input = Bytes::from(buf);

    let mut batches = RecordBatches::new(input.clone());
    let mut yielded_bytes = 0;
    while let Some(item) = batches.next() {
        let batch = match item {
            Ok(batch) => batch,
            Err(_) => {
                assert!(batches.next().is_none(), "RecordBatches goes on after an error");
                break;
            }
        };
        assert_eq!(&input[yielded_bytes..yielded_bytes + batch.size_bytes()], &batch.as_bytes()[..]);
        yielded_bytes += batch.size_bytes();
        assert!(batch.size_bytes() >= BATCH_HEADER_BYTES);
        assert_eq!(batch.size_bytes(), LOG_OVERHEAD_BYTES + batch.batch_length() as usize);
        assert_eq!(batch.magic(), MAGIC_V2);
        assert_eq!(RecordBatch::new(batch.as_bytes().clone()).as_ref(), Ok(&batch));
        let _ = format!("{batch:?}");
        check_batch(&batch);
    }
    assert_eq!(yielded_bytes + batches.remaining().len(), input.len());
});

/// Stamps the right CRC on every batch the splitter can frame.
fn fix_crcs(buf: &mut [u8]) {
    let mut at = 0;
    for item in RecordBatches::new(Bytes::copy_from_slice(buf)) {
        let Ok(batch) = item else { break };
        let end = at + batch.size_bytes();
        RecordBatchMut::new(&mut buf[at..end]).expect("a framed batch is patchable").update_crc();
        at = end;
    }
}

fn check_batch(batch: &RecordBatch) {
    let valid = batch.validate().is_ok();
    if valid {
        assert_eq!(batch.crc(), batch.compute_crc());
        assert!(batch.compression().is_ok());
        assert!(batch.record_count() >= 0);
        check_patches(batch);
    }
    // Callers should validate first, but reading records must be safe anyway.
    let Ok(records) = batch.records(MAX_DECOMPRESSED_BYTES) else { return };
    check_against_reference(batch);
    let count = usize::try_from(batch.record_count()).expect("records() accepted a negative count");
    assert!(records.len() == count);
    let mut parsed = Vec::new();
    let mut failed = false;
    for item in records {
        match item {
            Ok(record) => {
                assert!(!failed, "a record after an error");
                let headers: Vec<Header> = record.headers.iter().collect();
                assert_eq!(headers.len(), record.headers.len());
                parsed.push(record);
            }
            Err(_) => failed = true,
        }
    }
    assert!(parsed.len() <= count);
    if !failed {
        assert_eq!(parsed.len(), count);
        if valid {
            check_rebuild(batch, &parsed);
        }
    }
}

/// Rebuilds the batch from its parsed records and compares.
fn check_rebuild(batch: &RecordBatch, records: &[Record]) {
    let codec = batch.compression().expect("validated");
    let mut builder = RecordBatchBuilder::new(codec)
        .with_base_offset(batch.base_offset())
        .with_partition_leader_epoch(batch.partition_leader_epoch())
        .with_producer(batch.producer_id(), batch.producer_epoch(), batch.base_sequence())
        .with_transactional(batch.is_transactional())
        .with_control(batch.is_control());
    if let Some(delete_horizon_ms) = batch.delete_horizon_ms() {
        builder = builder.with_delete_horizon_ms(delete_horizon_ms);
    }
    if batch.timestamp_type() == TimestampType::LogAppendTime {
        builder = builder.with_log_append_time(batch.max_timestamp());
    }
    for record in records {
        let headers: Vec<Header> = record.headers.iter().collect();
        let new_headers: Vec<NewHeader> =
            headers.iter().map(|h| NewHeader { key: &h.key, value: h.value.as_deref() }).collect();
        let new_record = NewRecord {
            timestamp_ms: batch.base_timestamp().wrapping_add(record.timestamp_delta),
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: &new_headers,
        };
        // Arbitrary input may have offsets the builder refuses (not
        // increasing, before the base): nothing to compare then.
        if builder.append_with_offset(record.offset, &new_record).is_err() {
            return;
        }
    }
    let rebuilt = builder.build().unwrap_or_else(|e| panic!("rebuilding a valid batch failed: {e}"));
    rebuilt.validate().unwrap_or_else(|e| panic!("rebuilt batch is invalid: {e}"));
    assert_eq!(rebuilt.base_offset(), batch.base_offset());
    assert_eq!(rebuilt.partition_leader_epoch(), batch.partition_leader_epoch());
    assert_eq!(rebuilt.compression(), batch.compression());
    assert_eq!(rebuilt.timestamp_type(), batch.timestamp_type());
    assert_eq!(rebuilt.is_transactional(), batch.is_transactional());
    assert_eq!(rebuilt.is_control(), batch.is_control());
    assert_eq!(rebuilt.delete_horizon_ms(), batch.delete_horizon_ms());
    assert_eq!(rebuilt.producer_id(), batch.producer_id());
    assert_eq!(rebuilt.producer_epoch(), batch.producer_epoch());
    assert_eq!(rebuilt.base_sequence(), batch.base_sequence());
    assert_eq!(rebuilt.record_count(), batch.record_count());
    if codec == Compression::None && rebuilt.base_timestamp() == batch.base_timestamp() {
        // Canonical varints are never longer than the input's. (The builder
        // takes the first record's timestamp as the base, so an input whose
        // base differs has other timestamp deltas, which may take more bytes.)
        assert!(rebuilt.size_bytes() <= batch.size_bytes());
    }
    let again: Vec<Record> = rebuilt
        .records(2 * MAX_DECOMPRESSED_BYTES)
        .unwrap_or_else(|e| panic!("rebuilt batch's records: {e}"))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("rebuilt batch's records: {e}"));
    assert_eq!(again.len(), records.len());
    for (before, after) in records.iter().zip(&again) {
        assert_eq!(after.offset, before.offset);
        assert_eq!(after.offset_delta, before.offset_delta);
        assert_eq!(after.timestamp, before.timestamp);
        assert_eq!(after.key, before.key);
        assert_eq!(after.value, before.value);
        assert_eq!(after.headers, before.headers);
    }
}

/// The fields a leader patches on append.
fn check_patches(batch: &RecordBatch) {
    let mut bytes = batch.as_bytes().to_vec();
    let mut patch = RecordBatchMut::new(&mut bytes).expect("a valid batch is patchable");
    let base_offset = batch.base_offset() ^ 0x0123_4567_89ab_cdef;
    let epoch = batch.partition_leader_epoch().wrapping_add(1);
    patch.set_base_offset(base_offset);
    patch.set_partition_leader_epoch(epoch);
    let patched = RecordBatch::new(Bytes::from(bytes.clone())).expect("patched batch frames");
    patched.validate().expect("baseOffset and partitionLeaderEpoch are outside the CRC");
    assert_eq!(patched.base_offset(), base_offset);
    assert_eq!(patched.partition_leader_epoch(), epoch);

    let log_append_time_ms = batch.max_timestamp().wrapping_add(1);
    let mut patch = RecordBatchMut::new(&mut bytes).expect("still patchable");
    patch.set_log_append_time(log_append_time_ms);
    assert_eq!(patch.timestamp_type(), TimestampType::LogAppendTime);
    let patched = RecordBatch::new(Bytes::from(bytes)).expect("patched batch frames");
    patched.validate().expect("set_log_append_time recomputes the CRC");
    assert_eq!(patched.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(patched.max_timestamp(), log_append_time_ms);
    assert_eq!(patched.records_section(), batch.records_section());
}

/// One record as the reference reader sees it.
#[derive(Debug, PartialEq)]
struct PlainRecord {
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// The library's borrowed and owned records against the reference reader.
fn check_against_reference(batch: &RecordBatch) {
    let Ok(decoded) = batch.decode_records(MAX_DECOMPRESSED_BYTES) else { return };
    let (expected, expect_error) = reference_records(decoded.as_bytes(), decoded.len());
    let mut borrowed = Vec::new();
    let mut borrowed_error = false;
    for item in decoded.iter() {
        match item {
            Ok(r) => borrowed.push(PlainRecord {
                attributes: r.attributes,
                timestamp_delta: r.timestamp_delta,
                offset_delta: r.offset_delta,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r.headers.iter().map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec))).collect(),
            }),
            Err(_) => borrowed_error = true,
        }
    }
    assert_eq!(borrowed, expected, "borrowed records differ from the reference reader's");
    assert_eq!(borrowed_error, expect_error, "borrowed records and the reference disagree on an error");
    check_facts(&decoded);
    let owned: Vec<PlainRecord> = decoded
        .into_iter()
        .map_while(Result::ok)
        .map(|r| PlainRecord {
            attributes: r.attributes,
            timestamp_delta: r.timestamp_delta,
            offset_delta: r.offset_delta,
            key: r.key.map(|k| k.to_vec()),
            value: r.value.map(|v| v.to_vec()),
            headers: r.headers.iter().map(|h| (h.key.to_vec(), h.value.map(|v| v.to_vec()))).collect(),
        })
        .collect();
    assert_eq!(owned, expected, "owned records differ from the reference reader's");
}

/// The leader's walk (`for_each_fact`) sees what the iterator yields, and
/// ends on the same error.
fn check_facts(decoded: &DecodedRecords) {
    let mut facts = Vec::new();
    let walked = decoded.for_each_fact(|fact| facts.push(fact));
    let mut iterated = Vec::new();
    let mut first_error = None;
    for item in decoded.iter() {
        match item {
            Ok(r) => iterated.push(RecordFacts::from(&r)),
            Err(e) => first_error = Some(e),
        }
    }
    assert_eq!(facts, iterated, "for_each_fact and the iterator disagree");
    assert_eq!(walked.err(), first_error, "for_each_fact and the iterator end differently");
}

/// Reads `count` records from `section` the plain way: the records before
/// the first malformed one, and whether one was (leftover bytes count).
fn reference_records(section: &[u8], count: usize) -> (Vec<PlainRecord>, bool) {
    let mut at = 0;
    let mut records = Vec::new();
    for _ in 0..count {
        match reference_record(section, &mut at) {
            Some(record) => records.push(record),
            None => return (records, true),
        }
    }
    (records, at != section.len())
}

fn reference_record(section: &[u8], at: &mut usize) -> Option<PlainRecord> {
    let length = usize::try_from(zigzag(varint(section, at, 5)?)).ok()?;
    if length > section.len() - *at {
        return None;
    }
    let start = *at;
    let attributes = *section.get(*at)? as i8;
    *at += 1;
    let timestamp_delta = zigzag(varint(section, at, 10)?);
    let offset_delta = zigzag(varint(section, at, 5)?) as i32;
    let key = field(section, at)?;
    let value = field(section, at)?;
    let header_count = usize::try_from(zigzag(varint(section, at, 5)?)).ok()?;
    let mut headers = Vec::new();
    for _ in 0..header_count {
        let key = field(section, at)??;
        headers.push((key, field(section, at)?));
    }
    (*at - start == length).then_some(PlainRecord { attributes, timestamp_delta, offset_delta, key, value, headers })
}

/// A length-prefixed field: `Some(None)` is null, `None` malformed.
fn field(section: &[u8], at: &mut usize) -> Option<Option<Vec<u8>>> {
    let length = zigzag(varint(section, at, 5)?);
    if length == -1 {
        return Some(None);
    }
    let length = usize::try_from(length).ok().filter(|&n| n <= section.len() - *at)?;
    let bytes = section[*at..*at + length].to_vec();
    *at += length;
    Some(Some(bytes))
}

/// An unsigned varint of at most `max_bytes` (5 for 32 bits, 10 for 64),
/// whose last possible byte holds only the bits that are left (the library
/// refuses the rest; Kafka's own reader drops them).
fn varint(section: &[u8], at: &mut usize, max_bytes: usize) -> Option<u64> {
    let last_byte_max = if max_bytes == 5 { 0x0f } else { 0x01 };
    let mut value = 0u64;
    for i in 0..max_bytes {
        let byte = *section.get(*at)?;
        *at += 1;
        if i == max_bytes - 1 && byte > last_byte_max {
            return None;
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn zigzag(raw: u64) -> i64 {
    ((raw >> 1) as i64) ^ -((raw & 1) as i64)
}
