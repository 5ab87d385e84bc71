//! Helpers shared by the log's integration tests: building produce-style
//! batches and reading a log back record by record.

#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use krabka_log::{LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatch, RecordBatchBuilder, RecordBatches};

/// A producer-style batch (base offset 0) whose values are `values`.
pub fn batch(values: &[String], timestamp_ms: i64, compression: Compression) -> Bytes {
    let mut builder = RecordBatchBuilder::new(compression);
    for value in values {
        builder
            .append(&NewRecord { timestamp_ms, key: Some(b"k"), value: Some(value.as_bytes()), headers: &[] })
            .unwrap();
    }
    builder.build().unwrap().into_bytes()
}

/// A control batch with one marker record: key (version 0, type 0 abort or
/// 1 commit), value (version 0, coordinator epoch).
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Bytes {
    let key = [0u8, 0, 0, u8::from(commit)];
    let mut value = vec![0u8, 0];
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_producer(producer_id, producer_epoch, -1)
        .with_transactional(true)
        .with_control(true);
    builder.append(&NewRecord { timestamp_ms, key: Some(&key), value: Some(&value), headers: &[] }).unwrap();
    builder.build().unwrap().into_bytes()
}

/// Several batches back to back, as one produce request carries them.
pub fn batches(parts: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    for part in parts {
        out.extend_from_slice(part);
    }
    out.freeze()
}

/// Every record from `from` to the log end, as (offset, timestamp, value).
pub fn read_all(log: &PartitionLog, from: i64) -> Vec<(i64, i64, String)> {
    let mut out = Vec::new();
    let mut offset = from;
    let end = log.log_end_offset();
    while offset < end {
        let info = log.read(offset, 64 * 1024, end, true).unwrap();
        let Some(slice) = info.slice else { break };
        let mut progressed = false;
        for batch in RecordBatches::new(slice.read_to_bytes().unwrap()) {
            let Ok(batch) = batch else { break };
            batch.validate().unwrap();
            for record in batch.records(1 << 24).unwrap() {
                let record = record.unwrap();
                if record.offset >= offset {
                    let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
                    out.push((record.offset, record.timestamp, value));
                }
            }
            offset = batch.next_offset();
            progressed = true;
        }
        assert!(progressed, "a read at {offset} returned no whole batch");
    }
    out
}

pub fn small_segments() -> LogConfig {
    LogConfig { segment_bytes: 512, index_interval_bytes: 128, segment_index_bytes: 4096, ..LogConfig::default() }
}

pub fn values(range: std::ops::Range<i64>) -> Vec<String> {
    range.map(|i| format!("value-{i}")).collect()
}

pub fn parse_batches(bytes: Bytes) -> Vec<RecordBatch> {
    RecordBatches::new(bytes).map(|b| b.unwrap()).collect()
}
