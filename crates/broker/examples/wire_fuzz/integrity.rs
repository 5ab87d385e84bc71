//! The fuzzer's integrity probe: records produced with acks=all to a topic
//! no fuzzed request can name, and a check that every acknowledged record
//! reads back exactly, at its offset, and nothing else is there.

use bytes::Bytes;
use krabka_protocol::fetch_request::{FetchPartition, FetchTopic};
use krabka_protocol::produce_request::{PartitionProduceData, TopicProduceData};
use krabka_protocol::records::{NewRecord, RecordBatchBuilder, RecordBatches};
use krabka_protocol::{compression::Compression, FetchRequest, ProduceRequest, RequestBody, ResponseBody};

use crate::requests::Connection;

/// Not in the fuzzer's vocabulary, and longer than any random name (and with
/// a dash), so only the probe writes to it.
pub const TOPIC: &str = "integrity-probe-topic";
pub const PARTITIONS: i32 = 2;

/// What the broker acknowledged, per partition: (offset, value) in order.
#[derive(Default)]
pub struct Ledger {
    partitions: Vec<Vec<(i64, String)>>,
    batches: u64,
}

impl Ledger {
    pub fn records(&self) -> usize {
        self.partitions.iter().map(Vec::len).sum()
    }

    /// Produces one batch of `count` records with acks=all and remembers them.
    pub fn produce(&mut self, connection: &mut Connection, count: u32) -> Result<(), String> {
        self.partitions.resize(PARTITIONS as usize, Vec::new());
        let partition = (self.batches % PARTITIONS as u64) as i32;
        let values: Vec<String> = (0..count).map(|i| format!("integrity-{}-{i}", self.batches)).collect();
        let compression = if self.batches.is_multiple_of(2) { Compression::None } else { Compression::Zstd };
        let mut builder = RecordBatchBuilder::new(compression);
        // Now, not a fixed date: records older than retention.ms (7 days)
        // are rightly deleted by the first retention check, 5 min in.
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        for value in &values {
            let record = NewRecord { timestamp_ms: now_ms, key: None, value: Some(value.as_bytes()), headers: &[] };
            builder.append(&record).map_err(|e| format!("building a batch: {e}"))?;
        }
        let records = builder.build().map_err(|e| format!("building a batch: {e}"))?.into_bytes();
        let request = ProduceRequest {
            acks: -1,
            timeout_ms: 10_000,
            topic_data: vec![TopicProduceData {
                name: TOPIC.into(),
                partition_data: vec![PartitionProduceData {
                    index: partition,
                    records: Some(records),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let response = connection.request(&RequestBody::Produce(Box::new(request)), 11).map_err(|e| e.to_string())?;
        let ResponseBody::Produce(response) = response else { unreachable!("decoded as Produce") };
        let answer = response.responses.first().and_then(|t| t.partition_responses.first());
        let answer = answer.ok_or("a Produce response without the partition")?;
        if answer.error_code != 0 {
            return Err(format!("integrity produce failed with error {}", answer.error_code));
        }
        let ledger = &mut self.partitions[partition as usize];
        ledger.extend(values.into_iter().enumerate().map(|(i, v)| (answer.base_offset + i as i64, v)));
        self.batches += 1;
        Ok(())
    }

    /// Reads every partition from offset 0 and compares it with the ledger.
    pub fn verify(&self, connection: &mut Connection) -> Result<(), String> {
        for (partition, expected) in self.partitions.iter().enumerate() {
            let found = read_partition(connection, partition as i32, expected.len())?;
            if &found != expected {
                let first =
                    found.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(found.len().min(expected.len()));
                return Err(format!(
                    "partition {partition}: {} records read, {} acknowledged; first difference at #{first}: read {:?}, acknowledged {:?}",
                    found.len(),
                    expected.len(),
                    found.get(first),
                    expected.get(first)
                ));
            }
        }
        Ok(())
    }
}

/// Fetches a partition from offset 0 until the high watermark.
fn read_partition(connection: &mut Connection, partition: i32, expected: usize) -> Result<Vec<(i64, String)>, String> {
    let mut out: Vec<(i64, String)> = Vec::new();
    let mut offset = 0i64;
    loop {
        let (records, high_watermark) = fetch(connection, partition, offset)?;
        let before = out.len();
        for batch in RecordBatches::new(records) {
            let batch = batch.map_err(|e| format!("partition {partition}: bad batch: {e}"))?;
            batch.validate().map_err(|e| format!("partition {partition}: batch fails its CRC: {e}"))?;
            for record in batch.records(1 << 20).map_err(|e| format!("partition {partition}: records: {e}"))? {
                let record = record.map_err(|e| format!("partition {partition}: record: {e}"))?;
                let value = String::from_utf8_lossy(&record.value.unwrap_or_default()).into_owned();
                if record.offset >= offset {
                    out.push((record.offset, value));
                }
            }
        }
        offset = out.last().map_or(offset, |(o, _)| o + 1);
        // Stop at the high watermark, or when a read brings nothing (and
        // more records than acknowledged would be a finding of their own).
        if offset >= high_watermark || out.len() == before || out.len() > expected + 1000 {
            return Ok(out);
        }
    }
}

fn fetch(connection: &mut Connection, partition: i32, offset: i64) -> Result<(Bytes, i64), String> {
    let request = FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 4 << 20,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: TOPIC.into(),
            partitions: vec![FetchPartition {
                partition,
                fetch_offset: offset,
                partition_max_bytes: 1 << 20,
                log_start_offset: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let response = connection.request(&RequestBody::Fetch(Box::new(request)), 12).map_err(|e| e.to_string())?;
    let ResponseBody::Fetch(response) = response else { unreachable!("decoded as Fetch") };
    let data = response
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or("a Fetch response without the partition")?;
    if response.error_code != 0 || data.error_code != 0 {
        return Err(format!(
            "integrity fetch of partition {partition} failed: {} / {}",
            response.error_code, data.error_code
        ));
    }
    Ok((data.records.clone().unwrap_or_default(), data.high_watermark))
}
