//! What an append checks before a byte reaches the disk, and the headers it
//! patches.
//!
//! A leader append takes a producer's batches: each must be framed, pass its
//! CRC, fit `max.message.bytes`, have a record count that agrees with its
//! last offset delta, hold records a leader accepts (every one read, as
//! Kafka's LogValidator reads them: a key on a compacted topic, a timestamp
//! within `message.timestamp.before.max.ms`/`after.max.ms` of the leader's
//! clock on a CreateTime topic, no producer-set LogAppendTime), and continue
//! its producer's sequence (within the request, then against the producer
//! state). The checks run in Kafka's order, so a request that breaks two
//! rules gets the error Kafka would send. Nothing here changes the log: the
//! caller writes what comes back, or nothing when an error does.

use bytes::Bytes;
use krabka_protocol::records::{
    DecodedRecords, NewHeader, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatchHeader, RecordBatches,
    RecordFacts, TimestampType, BATCH_HEADER_BYTES, NO_TIMESTAMP,
};

use crate::config::{LogConfig, TimestampPolicy};
use crate::error::{LogError, RecordRefusal};
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
    /// The leader's clock: CreateTime timestamps are checked against it, and
    /// a LogAppendTime topic stamps it.
    pub now_ms: i64,
}

/// Checks a produce request's batches for a leader append and prepares
/// their headers (base offset, leader epoch, max timestamp or LogAppendTime).
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
        check_size_and_count(&batch, config)?;
        let (batch, max_timestamp) = check_records(batch, stamp.now_ms, config)?;
        let producer_batch = ProducerBatch::from_batch(&batch, next_offset)?;
        if let Some((first_offset, last_offset)) = check_sequence(&producer_batch, &producer_batches, producer_state)? {
            return Ok(LeaderAppend::Duplicate { first_offset, last_offset });
        }
        producer_batches.push(producer_batch);
        let batch = prepare(&batch, next_offset, stamp, config.timestamp_policy, max_timestamp);
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

/// Reads every record of `batch` as Kafka's LogValidator does and returns
/// the batch to append with the latest record timestamp. All refused
/// records are reported together. A compressed batch whose records' offset
/// deltas are not 0, 1, 2... (older clients wrote them so) is rewritten with
/// the right ones, as Kafka rewrites it rather than refuse it.
fn check_records(batch: RecordBatch, now_ms: i64, config: &LogConfig) -> Result<(RecordBatch, i64), LogError> {
    SCRATCH.with_borrow_mut(|scratch| {
        let records = batch.decode_records_reusing(config.max_decompressed_batch_bytes, scratch)?;
        let checked = check_decoded(&batch, &records, now_ms, config);
        records.recycle(scratch);
        if scratch.capacity() > MAX_SCRATCH_BYTES {
            *scratch = Vec::new();
        }
        let (rewrite, max_timestamp) = checked?;
        match rewrite {
            Some(rewritten) => Ok((rewritten, max_timestamp)),
            None => Ok((batch, max_timestamp)),
        }
    })
}

thread_local! {
    /// Where each append thread decompresses the batches it checks: reused,
    /// so checking a batch allocates and page-faults nothing (profiled: fresh
    /// buffers per batch cost more than the decompression). Appends run on
    /// the runtime's worker threads (at most one per CPU, parallel appends
    /// included: they are tasks, not blocking threads), so few of these live.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A scratch buffer grown past this (a rare huge batch) is freed, not kept.
const MAX_SCRATCH_BYTES: usize = 8 * 1024 * 1024;

/// [`check_records`] over decoded records: the latest timestamp, and the
/// batch rewritten when its inner offsets need it.
fn check_decoded(
    batch: &RecordBatch,
    records: &DecodedRecords,
    now_ms: i64,
    config: &LogConfig,
) -> Result<(Option<RecordBatch>, i64), LogError> {
    let rules = RecordRules::of(batch, now_ms, config);
    let mut refusals = Vec::new();
    let mut max_timestamp = NO_TIMESTAMP;
    let mut deltas_in_order = true;
    let mut index = 0i32;
    records.for_each_fact(|record| {
        match rules.refusal(&record, index) {
            Some(refusal) => refusals.push(refusal),
            None => {
                max_timestamp = max_timestamp.max(record.timestamp);
                deltas_in_order &= record.offset_delta == index;
            }
        }
        index += 1;
    })?;
    if !refusals.is_empty() {
        return Err(refused(refusals));
    }
    if deltas_in_order || batch.compression()? == krabka_protocol::compression::Compression::None {
        return Ok((None, max_timestamp));
    }
    Ok((Some(rewritten_in_order(batch, records)?), max_timestamp))
}

/// What each record of one batch is held to.
struct RecordRules {
    /// Compacted topic, and not a control batch: records need keys.
    needs_key: bool,
    /// CreateTime topic: [earliest, latest] allowed timestamps.
    window: Option<(i64, i64)>,
    /// The producer marked the batch LogAppendTime, which only a broker may.
    producer_log_append_time: bool,
}

impl RecordRules {
    fn of(batch: &RecordBatch, now_ms: i64, config: &LogConfig) -> RecordRules {
        let window = (config.timestamp_policy == TimestampPolicy::CreateTime).then(|| {
            (
                now_ms.saturating_sub(config.timestamp_before_max_ms),
                now_ms.saturating_add(config.timestamp_after_max_ms),
            )
        });
        RecordRules {
            needs_key: config.cleanup_policy.compacts() && !batch.is_control(),
            window,
            producer_log_append_time: batch.timestamp_type() == TimestampType::LogAppendTime,
        }
    }

    /// Kafka's order: the key first, then the timestamp. A CreateTime
    /// record without a timestamp (-1) is not range checked.
    fn refusal(&self, record: &RecordFacts, index: i32) -> Option<(bool, RecordRefusal)> {
        let (timestamp, offset) = (record.timestamp, record.offset);
        if self.needs_key && !record.has_key {
            let message = "Compacted topic cannot accept message without key".to_string();
            return Some((false, RecordRefusal { index, message }));
        }
        match self.window {
            Some((earliest, latest)) if timestamp != NO_TIMESTAMP => {
                (timestamp < earliest || timestamp > latest).then(|| {
                    let message = format!(
                        "Timestamp {timestamp} of message with offset {offset} is out of range. \
                         The timestamp should be within [{earliest}, {latest}]"
                    );
                    (true, RecordRefusal { index, message })
                })
            }
            _ if self.producer_log_append_time => {
                let message = "Invalid timestamp type in message. Producer should not set timestamp type to \
                               LogAppendTime."
                    .to_string();
                Some((true, RecordRefusal { index, message }))
            }
            _ => None,
        }
    }
}

/// Kafka's answer to refused records: INVALID_TIMESTAMP when any timestamp
/// was among the reasons, INVALID_RECORD naming the first three otherwise.
fn refused(refusals: Vec<(bool, RecordRefusal)>) -> LogError {
    let invalid_timestamp = refusals.iter().any(|(timestamp, _)| *timestamp);
    let record_errors: Vec<RecordRefusal> = refusals.into_iter().map(|(_, refusal)| refusal).collect();
    let message = if invalid_timestamp {
        "One or more records have been rejected due to invalid timestamp".to_string()
    } else {
        let first: Vec<String> = record_errors
            .iter()
            .take(3)
            .map(|e| format!("RecordError(batchIndex={}, message='{}')", e.index, e.message))
            .collect();
        format!(
            "One or more records have been rejected due to {} record errors in total, and only showing the first \
             three errors at most: [{}]",
            record_errors.len(),
            first.join(", ")
        )
    };
    LogError::RecordsRefused { invalid_timestamp, message, record_errors }
}

/// `batch` rebuilt in its own codec with offset deltas 0, 1, 2..., keeping
/// every record's timestamp, key, value and headers.
fn rewritten_in_order(batch: &RecordBatch, records: &DecodedRecords) -> Result<RecordBatch, LogError> {
    let mut builder = RecordBatchBuilder::like(batch, batch.compression()?);
    for (index, record) in records.iter().enumerate() {
        let record = record?;
        let headers: Vec<NewHeader<'_>> =
            record.headers.iter().map(|h| NewHeader { key: h.key, value: h.value }).collect();
        let new = NewRecord { timestamp_ms: record.timestamp, key: record.key, value: record.value, headers: &headers };
        builder.append_with_offset(batch.base_offset() + index as i64, &new)?;
    }
    let rewritten = builder.build()?;
    debug_assert_eq!(rewritten.record_count(), batch.record_count(), "a rewrite keeps every record");
    Ok(rewritten)
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
/// records, which are never copied. On a CreateTime topic the header's max
/// timestamp becomes the latest record's, as Kafka sets it.
fn prepare(
    batch: &RecordBatch,
    base_offset: i64,
    stamp: LeaderStamp,
    policy: TimestampPolicy,
    records_max_timestamp: i64,
) -> Prepared {
    let mut header = RecordBatchHeader::of(batch);
    header.set_base_offset(base_offset);
    header.set_partition_leader_epoch(stamp.leader_epoch);
    let rest = batch.as_bytes().slice(BATCH_HEADER_BYTES..);
    let max_timestamp = match policy {
        TimestampPolicy::LogAppendTime => {
            header.set_log_append_time(stamp.now_ms, &rest);
            stamp.now_ms
        }
        TimestampPolicy::CreateTime => {
            header.set_create_time(records_max_timestamp, &rest);
            records_max_timestamp
        }
    };
    let last_offset = base_offset + i64::from(batch.last_offset_delta());
    Prepared {
        prepared: PreparedBatch { header, rest, base_offset, last_offset, max_timestamp },
        last_offset,
        record_count: batch.record_count(),
    }
}
