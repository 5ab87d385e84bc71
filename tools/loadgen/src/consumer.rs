//! Reads the run's records back with Fetch, from the offsets each partition
//! had before producing, and hands every record to the [`Verifier`].
//!
//! A partition is read until its high watermark and until every record the
//! producer had acknowledged has been seen; reading on to the watermark is
//! what finds duplicates past the last expected record. When nothing new
//! arrives for the idle timeout the rest counts as missing.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::time::Duration;

use anyhow::bail;
use bytes::Bytes;
use krabka_protocol::fetch_request::{FetchPartition, FetchTopic};
use krabka_protocol::fetch_response::PartitionData;
use krabka_protocol::records::{RecordBatch, RecordBatches, RecordError};
use krabka_protocol::{ApiKey, ErrorCode, FetchRequest, FetchResponse};
use tokio::time::Instant;

use crate::cluster::ClusterView;
use crate::verify::{ReadRecord, Verifier};
use crate::wire::{self, Client};

const FETCH_MAX_WAIT_MS: i32 = 500;
const FETCH_MAX_BYTES: i32 = 64 << 20;
const PARTITION_MAX_BYTES: i32 = 8 << 20;
/// Decompressed size allowed per batch: far above any batch we build.
const MAX_DECOMPRESSED_BYTES: usize = 256 << 20;

/// Where the consumer is in one partition.
#[derive(Debug, Clone)]
struct Position {
    partition: i32,
    offset: i64,
    /// From the last fetch response; -1 before one.
    high_watermark: i64,
}

/// Reads every partition from `start` (index = partition); returns the
/// number of records read.
pub async fn consume(
    view: &mut ClusterView,
    start: &[i64],
    verifier: &mut Verifier,
    idle_timeout: Duration,
) -> anyhow::Result<u64> {
    let mut positions: Vec<Position> = start
        .iter()
        .enumerate()
        .map(|(p, &offset)| Position { partition: p as i32, offset, high_watermark: -1 })
        .collect();
    let mut clients: HashMap<i32, Client> = HashMap::new();
    let mut read = 0u64;
    let mut last_progress = Instant::now();
    loop {
        positions.retain(|pos| !is_done(pos, verifier));
        if positions.is_empty() {
            return Ok(read);
        }
        if last_progress.elapsed() > idle_timeout {
            eprintln!(
                "[loadgen] consumer: nothing new for {idle_timeout:?}; {} partitions unfinished",
                positions.len()
            );
            return Ok(read);
        }
        let (records, stale) = fetch_round(view, &mut clients, &mut positions, verifier).await?;
        if records > 0 {
            read += records;
            last_progress = Instant::now();
        }
        if stale {
            clients.clear();
            if let Err(error) = view.refresh().await {
                eprintln!("[loadgen] consumer: metadata refresh failed: {error:#}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn is_done(pos: &Position, verifier: &Verifier) -> bool {
    pos.high_watermark >= 0 && pos.offset >= pos.high_watermark && verifier.is_complete(pos.partition)
}

/// One fetch to each leader; returns the records read and whether metadata
/// needs a refresh.
async fn fetch_round(
    view: &ClusterView,
    clients: &mut HashMap<i32, Client>,
    positions: &mut [Position],
    verifier: &mut Verifier,
) -> anyhow::Result<(u64, bool)> {
    let mut by_leader: HashMap<i32, Vec<usize>> = HashMap::new();
    let mut stale = false;
    for (i, pos) in positions.iter().enumerate() {
        match view.leader(pos.partition as usize) {
            Some(leader) => by_leader.entry(leader).or_default().push(i),
            None => stale = true,
        }
    }
    let mut read = 0;
    for (leader, indexes) in by_leader {
        let asked: Vec<Position> = indexes.iter().map(|&i| positions[i].clone()).collect();
        let response = match fetch(view, clients, leader, &asked).await {
            Ok(response) => response,
            Err(error) => {
                eprintln!("[loadgen] consumer: fetch from broker {leader}: {error:#}");
                clients.remove(&leader);
                stale = true;
                continue;
            }
        };
        for data in response.responses.iter().filter(|t| t.topic == view.topic).flat_map(|t| &t.partitions) {
            let Some(&i) = indexes.iter().find(|&&i| positions[i].partition == data.partition_index) else { continue };
            match apply(&mut positions[i], data, verifier)? {
                Some(records) => read += records,
                None => stale = true,
            }
        }
    }
    Ok((read, stale))
}

async fn fetch(
    view: &ClusterView,
    clients: &mut HashMap<i32, Client>,
    leader: i32,
    positions: &[Position],
) -> anyhow::Result<FetchResponse> {
    let client = match clients.entry(leader) {
        Entry::Occupied(entry) => entry.into_mut(),
        Entry::Vacant(entry) => {
            let Some(address) = view.address(leader) else { bail!("no address for broker {leader}") };
            entry.insert(Client::connect(address).await?)
        }
    };
    let partitions = positions.iter().map(|pos| FetchPartition {
        partition: pos.partition,
        fetch_offset: pos.offset,
        partition_max_bytes: PARTITION_MAX_BYTES,
        ..Default::default()
    });
    let topic = FetchTopic { topic: view.topic.clone(), partitions: partitions.collect(), ..Default::default() };
    let request = FetchRequest {
        max_wait_ms: FETCH_MAX_WAIT_MS,
        min_bytes: 1,
        max_bytes: FETCH_MAX_BYTES,
        topics: vec![topic],
        ..Default::default()
    };
    client.call(ApiKey::Fetch, wire::FETCH_VERSION, &request).await
}

/// Takes one partition's part of a fetch response: Some(records read), or
/// None when its leader moved.
fn apply(pos: &mut Position, data: &PartitionData, verifier: &mut Verifier) -> anyhow::Result<Option<u64>> {
    let code = ErrorCode::from(data.error_code);
    if code.is_retriable() {
        return Ok(None);
    }
    if code != ErrorCode::NONE {
        bail!("fetching partition {} at offset {}: {code}", pos.partition, pos.offset);
    }
    pos.high_watermark = data.high_watermark;
    let Some(records) = data.records.clone() else { return Ok(Some(0)) };
    read_batches(pos, records, verifier)
}

fn read_batches(pos: &mut Position, records: Bytes, verifier: &mut Verifier) -> anyhow::Result<Option<u64>> {
    let mut read = 0;
    for batch in RecordBatches::new(records) {
        let batch = match batch {
            Ok(batch) => batch,
            // The response's byte limit cut the last batch: fetched again next time.
            Err(RecordError::Truncated { .. }) => break,
            Err(error) => bail!("partition {} at offset {}: unreadable batch: {error}", pos.partition, pos.offset),
        };
        if batch.next_offset() <= pos.offset {
            continue;
        }
        if !batch.is_control() {
            read += read_records(pos, &batch, verifier);
        }
        pos.offset = batch.next_offset();
    }
    Ok(Some(read))
}

/// Hands the batch's records at or past the position to the verifier.
fn read_records(pos: &Position, batch: &RecordBatch, verifier: &mut Verifier) -> u64 {
    if !verifier.checks_contents() {
        return read_headers(pos, batch, verifier);
    }
    let decoded = batch.validate().and_then(|()| batch.decode_records(MAX_DECOMPRESSED_BYTES));
    let Ok(decoded) = decoded else {
        verifier.corrupt_batch();
        return 0;
    };
    let mut read = 0;
    for record in decoded.iter() {
        let Ok(record) = record else {
            verifier.corrupt_batch();
            break;
        };
        if record.offset < pos.offset {
            continue;
        }
        // A batch without a producer has sequence -1: not ours, and the
        // verifier tells by the producer id before it looks at the sequence.
        let seq = i64::from(batch.base_sequence()) + i64::from(record.offset_delta);
        verifier.record(&ReadRecord {
            partition: pos.partition,
            producer_id: batch.producer_id(),
            seq: u64::try_from(seq).unwrap_or(u64::MAX),
            key: record.key,
            value_len: record.value.map(<[u8]>::len),
        });
        read += 1;
    }
    read
}

/// `--verify batches`: the records' sequences from the batch header alone,
/// the CRC standing for their contents (it covers the compressed records
/// the generator sent), so a reader costs a CRC per batch, not a decode.
fn read_headers(pos: &Position, batch: &RecordBatch, verifier: &mut Verifier) -> u64 {
    if batch.validate().is_err() {
        verifier.corrupt_batch();
        return 0;
    }
    let first = pos.offset.max(batch.base_offset());
    for offset in first..=batch.last_offset() {
        let seq = i64::from(batch.base_sequence()) + (offset - batch.base_offset());
        let partition = pos.partition;
        let seq = u64::try_from(seq).unwrap_or(u64::MAX);
        verifier.record(&ReadRecord { partition, producer_id: batch.producer_id(), seq, key: None, value_len: None });
    }
    (batch.last_offset() - first + 1).max(0) as u64
}
