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
//! - a valid batch whose records all parse rebuilds with `RecordBatchBuilder`
//!   (same codec and header fields) into a valid batch with the same records;
//! - `RecordBatchMut` patches keep a valid batch valid and read back.
#![no_main]

use bytes::Bytes;
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{
    Header, NewHeader, NewRecord, Record, RecordBatch, RecordBatchBuilder, RecordBatchMut, RecordBatches,
    TimestampType, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES, MAGIC_V2,
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
    if codec == Compression::None {
        // Canonical varints are never longer than the input's.
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
