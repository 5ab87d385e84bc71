//! What an append checks before a byte reaches the disk, and the headers it
//! patches.
//!
//! A leader append takes a producer's batches: each must be framed, pass its
//! CRC, carry a key on a compacted topic, continue its producer's sequence
//! (within the request, then against the producer state), fit
//! `max.message.bytes`, and have a record count that agrees with its last
//! offset delta. The checks run in that order, so a request that breaks two
//! rules gets the error Kafka would send. Nothing here changes the log: the
//! caller writes what comes back, or nothing when an error does.

use bytes::Bytes;
use krabka_protocol::records::{RecordBatch, RecordBatchHeader, RecordBatches, BATCH_HEADER_BYTES};

use crate::config::LogConfig;
use crate::error::LogError;
use crate::producer_state::{
    increment_sequence, ProducerBatch, ProducerStateError, ProducerStateManager, SequenceCheck,
};
use crate::segment::PreparedBatch;

/// The outcome of checking a leader append.
#[derive(Debug)]
pub(crate) enum LeaderAppend {
    /// New batches, their offsets assigned from the log end.
    Batches(ValidatedBatches),
    /// A producer's retry of batches already in the log: answer with the
    /// offsets they got, append nothing.
    Duplicate { first_offset: i64, last_offset: i64 },
}

/// Batches ready for the segment, and what the producer state learns from them.
#[derive(Debug)]
pub(crate) struct ValidatedBatches {
    pub prepared: Vec<PreparedBatch>,
    pub producer_batches: Vec<ProducerBatch>,
    pub last_offset: i64,
    pub record_count: i64,
}

/// Where a leader append lands and how it is stamped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeaderStamp {
    /// The log end offset: the first batch's base offset.
    pub first_offset: i64,
    pub leader_epoch: i32,
    /// `Some(now)` when the topic uses LogAppendTime.
    pub log_append_time_ms: Option<i64>,
}

/// Checks a produce request's batches for a leader append and prepares
/// their headers (base offset, leader epoch, LogAppendTime).
pub(crate) fn leader_append(
    records: &Bytes,
    stamp: LeaderStamp,
    config: &LogConfig,
    producer_state: &ProducerStateManager,
) -> Result<LeaderAppend, LogError> {
    let mut prepared = Vec::new();
    let mut producer_batches: Vec<ProducerBatch> = Vec::new();
    let mut next_offset = stamp.first_offset;
    let mut record_count = 0i64;
    for batch in RecordBatches::new(records.clone()) {
        let batch = batch?;
        batch.validate()?;
        if config.cleanup_policy.compacts() && !batch.is_control() {
            require_keys(&batch, config.max_decompressed_batch_bytes)?;
        }
        let producer_batch = ProducerBatch::from_batch(&batch, next_offset)?;
        if let Some((first_offset, last_offset)) = check_sequence(&producer_batch, &producer_batches, producer_state)? {
            return Ok(LeaderAppend::Duplicate { first_offset, last_offset });
        }
        producer_batches.push(producer_batch);
        check_size_and_count(&batch, config)?;
        let batch = prepare(&batch, next_offset, stamp);
        next_offset = batch.last_offset + 1;
        record_count += i64::from(batch.record_count);
        prepared.push(batch.prepared);
    }
    if prepared.is_empty() {
        return Err(LogError::InconsistentBatch("no record batches".into()));
    }
    let validated = ValidatedBatches { prepared, producer_batches, last_offset: next_offset - 1, record_count };
    Ok(LeaderAppend::Batches(validated))
}

/// Checks a batch a follower copies (or the broker appends with its own
/// offsets): valid, and continuing the log at `log_end_offset`.
pub(crate) fn follower_batch(batch: &RecordBatch, log_end_offset: i64) -> Result<(), LogError> {
    batch.validate()?;
    if batch.base_offset() < log_end_offset || batch.last_offset() < batch.base_offset() {
        return Err(LogError::NonMonotonicOffset { offset: batch.base_offset(), log_end_offset });
    }
    Ok(())
}

/// A compacted topic keeps the latest record per key, so a record without
/// one could never be kept: Kafka refuses it at produce (INVALID_RECORD)
/// rather than let the cleaner drop it silently.
fn require_keys(batch: &RecordBatch, max_decompressed_bytes: usize) -> Result<(), LogError> {
    for record in batch.records(max_decompressed_bytes)? {
        if record?.key.is_none() {
            return Err(LogError::InconsistentBatch("compacted topic cannot accept a record without a key".into()));
        }
    }
    Ok(())
}

/// The sequence rules: later batches of one producer in one request follow
/// the earlier ones; the first is checked against the producer state, which
/// may find it a retry (returned as the offsets it was given).
fn check_sequence(
    batch: &ProducerBatch,
    earlier_in_request: &[ProducerBatch],
    producer_state: &ProducerStateManager,
) -> Result<Option<(i64, i64)>, LogError> {
    if batch.producer_id < 0 {
        return Ok(None);
    }
    match earlier_in_request.iter().rev().find(|p| p.producer_id == batch.producer_id) {
        Some(previous) => {
            let expected = increment_sequence(previous.last_seq, 1);
            if previous.epoch != batch.epoch || expected != batch.first_seq {
                return Err(ProducerStateError::OutOfOrderSequence {
                    producer_id: batch.producer_id,
                    expected,
                    received: batch.first_seq,
                }
                .into());
            }
            Ok(None)
        }
        None => match producer_state.check(batch)? {
            SequenceCheck::Duplicate(original) => Ok(Some((original.first_offset, original.last_offset))),
            SequenceCheck::Append => Ok(None),
        },
    }
}

fn check_size_and_count(batch: &RecordBatch, config: &LogConfig) -> Result<(), LogError> {
    if batch.size_bytes() > config.max_message_bytes as usize {
        return Err(LogError::RecordTooLarge { size: batch.size_bytes(), max: config.max_message_bytes });
    }
    let count = batch.record_count();
    let delta = batch.last_offset_delta();
    if count <= 0 || delta < 0 || i64::from(delta) + 1 != i64::from(count) {
        return Err(LogError::InconsistentBatch(format!(
            "record count {count} does not match last offset delta {delta}"
        )));
    }
    Ok(())
}

struct Prepared {
    prepared: PreparedBatch,
    last_offset: i64,
    record_count: i32,
}

/// The batch with a patched copy of its header in front of its untouched
/// records, which are never copied.
fn prepare(batch: &RecordBatch, base_offset: i64, stamp: LeaderStamp) -> Prepared {
    let mut header = RecordBatchHeader::of(batch);
    header.set_base_offset(base_offset);
    header.set_partition_leader_epoch(stamp.leader_epoch);
    let rest = batch.as_bytes().slice(BATCH_HEADER_BYTES..);
    let mut max_timestamp = batch.max_timestamp();
    if let Some(now_ms) = stamp.log_append_time_ms {
        max_timestamp = now_ms;
        header.set_log_append_time(now_ms, &rest);
    }
    let last_offset = base_offset + i64::from(batch.last_offset_delta());
    Prepared {
        prepared: PreparedBatch { header, rest, base_offset, last_offset, max_timestamp },
        last_offset,
        record_count: batch.record_count(),
    }
}
