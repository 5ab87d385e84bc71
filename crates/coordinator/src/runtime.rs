//! The runtime a coordinator's state runs on: one shard per partition of
//! its internal topic, each behind its own lock, persisted through a
//! [`CoordinatorLog`] the host provides.
//!
//! The order is always persist, then apply: a change is appended to the
//! shard's partition while the shard's lock is held, and the in-memory
//! state moves only once the log accepted it, so the log's order is the
//! state's order. Loading replays each partition's records into its shard,
//! and a shard is replayed afresh when its node comes to lead the
//! partition at a new leader epoch (the records a follower copied since are
//! in the log, not in the shard), as Kafka loads a coordinator partition
//! when its broker becomes the leader.
//! Time is never read here: callers pass a [`Time`], so tests drive the
//! clock themselves.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::{BufMut, Bytes, BytesMut};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{control_type_id, ControlType, NewRecord, RecordBatch, RecordBatchBuilder};
use krabka_protocol::{ErrorCode, Message};

/// The time a call happens at, as the host's clocks read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Time {
    /// Milliseconds since the Unix epoch: what records and timestamps carry
    /// (commit timestamps, state timestamps, retention).
    pub wall_ms: i64,
    /// Milliseconds of a clock that never goes back (the broker's: since it
    /// started): what session timeouts and deadlines are measured on.
    pub mono_ms: i64,
}

impl Time {
    pub fn new(wall_ms: i64, mono_ms: i64) -> Self {
        Time { wall_ms, mono_ms }
    }

    /// The same moment `ms` later on both clocks.
    pub fn plus_ms(self, ms: i64) -> Self {
        Time { wall_ms: self.wall_ms + ms, mono_ms: self.mono_ms + ms }
    }
}

/// Where a delayed answer goes: the host's completion (the broker's wraps a
/// oneshot sender). It is called, under the shard's lock, once the answer is
/// known; dropped uncalled when the request is answered at once.
pub type Waiter<T> = Box<dyn FnOnce(T) + Send>;

/// A request's answer: now, or later through the [`Waiter`] it was given.
#[derive(Debug, PartialEq)]
pub enum Outcome<T> {
    Now(T),
    Wait,
}

/// The log a coordinator persists to: the partitions of its internal topic
/// (`__consumer_offsets` for groups), which this node leads.
pub trait CoordinatorLog {
    /// Appends one record batch to `partition` as its leader; the offset of
    /// its first record, or the Kafka error the append failed with.
    fn append(&self, partition: usize, batch: &Bytes, now_ms: i64) -> Result<i64, i16>;

    /// Hands `visit` every batch of `partition` below its high watermark, in
    /// offset order (nothing when the topic or partition does not exist).
    /// Stops at the first error, `visit`'s or the log's.
    fn replay(&self, partition: usize, visit: &mut dyn FnMut(RecordBatch) -> Result<(), String>) -> Result<(), String>;

    /// The leader epoch of `partition` if this node leads it, else None.
    fn leader_epoch(&self, partition: usize) -> Option<i32>;
}

/// A shard loaded while its node did not lead its partition.
const NOT_LED: i32 = i32::MIN;

use krabka_protocol::java::string_hash as java_string_hash;

/// One record to persist: (key, value); a None value deletes the key.
pub type KeyValue = (Bytes, Option<Bytes>);

/// What a replay hands a shard, in log order.
#[derive(Debug, PartialEq)]
pub enum Replayed {
    /// A keyed record; `producer_id` when its batch is transactional (it
    /// counts once its producer's commit marker follows).
    Record { offset: i64, key: Bytes, value: Option<Bytes>, producer_id: Option<i64> },
    /// A transaction marker: `producer_id`'s transaction committed or aborted.
    Marker { producer_id: i64, commit: bool },
}

/// The shards of a coordinator, `S` being one shard's state.
pub struct Shards<S> {
    shards: Vec<Mutex<S>>,
    /// The leader epoch each shard's partition had here when the shard was
    /// last replayed (NOT_LED when it was not led here); written under the
    /// shard's lock.
    loaded_at: Vec<AtomicI32>,
}

impl<S: Default> Shards<S> {
    /// `partitions` shards (at least one), each empty.
    pub fn new(partitions: usize) -> Self {
        let count = partitions.max(1);
        Shards {
            shards: (0..count).map(|_| Mutex::new(S::default())).collect(),
            loaded_at: (0..count).map(|_| AtomicI32::new(NOT_LED)).collect(),
        }
    }

    /// Replays shard `index` afresh when this node leads its partition at
    /// another leader epoch than the one it was loaded at: it came to lead
    /// it since (what it copied as a follower is in the log only). True if
    /// this node leads the partition (loaded now or before).
    pub fn load_if_led_anew(
        &self,
        index: usize,
        log: &dyn CoordinatorLog,
        mut apply: impl FnMut(usize, &mut S, Replayed),
    ) -> Result<bool, String> {
        let Some(epoch) = log.leader_epoch(index) else { return Ok(false) };
        if self.loaded_at[index].load(Ordering::Acquire) == epoch {
            return Ok(true);
        }
        let mut shard = self.lock(index);
        if self.loaded_at[index].load(Ordering::Acquire) == epoch {
            return Ok(true); // another caller loaded it meanwhile
        }
        *shard = S::default();
        let applied = replay_shard(log, index, &mut |replayed| apply(index, &mut shard, replayed))?;
        self.loaded_at[index].store(epoch, Ordering::Release);
        tracing::info!(partition = index, leader_epoch = epoch, records = applied, "coordinator partition loaded");
        Ok(true)
    }

    /// Forgets shard `index` once this node no longer leads its partition,
    /// as Kafka unloads a coordinator partition that moved away: `unload`
    /// first answers what waits on the shard's state, which is then
    /// dropped, to be replayed when the node leads the partition again.
    pub fn unload_if_not_led(&self, index: usize, log: &dyn CoordinatorLog, unload: impl FnOnce(&mut S)) {
        // The common case, a partition never led here, reads one atomic.
        if self.loaded_at[index].load(Ordering::Acquire) == NOT_LED || log.leader_epoch(index).is_some() {
            return;
        }
        let mut shard = self.lock(index);
        if self.loaded_at[index].load(Ordering::Acquire) == NOT_LED {
            return; // another caller unloaded it meanwhile
        }
        unload(&mut shard);
        *shard = S::default();
        self.loaded_at[index].store(NOT_LED, Ordering::Release);
        tracing::info!(partition = index, "coordinator partition unloaded");
    }
}

impl<S> Shards<S> {
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The shard a key lives on, as Kafka places it:
    /// `Utils.abs(key.hashCode()) % shards` (a data directory written by
    /// Kafka has its groups where this looks).
    pub fn index_of(&self, key: &str) -> usize {
        krabka_protocol::java::kafka_abs(java_string_hash(key)) as usize % self.shards.len()
    }

    /// The leader epoch shard `index` was last replayed at, None when it
    /// was replayed while not led here.
    pub fn loaded_epoch(&self, index: usize) -> Option<i32> {
        Some(self.loaded_at[index].load(Ordering::Acquire)).filter(|&epoch| epoch != NOT_LED)
    }

    /// Locks shard `index` (a poisoned lock is taken over: state is only
    /// changed after its records were persisted).
    pub fn lock(&self, index: usize) -> MutexGuard<'_, S> {
        self.shards[index].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replays every shard's partition: `apply` gets each record's shard,
    /// offset, key and value (control batches and keyless records are
    /// skipped). Returns the number of records applied.
    pub fn load(
        &self,
        log: &dyn CoordinatorLog,
        mut apply: impl FnMut(usize, &mut S, Replayed),
    ) -> Result<usize, String> {
        let mut loaded = 0;
        for index in 0..self.shards.len() {
            let mut shard = self.lock(index);
            let epoch = log.leader_epoch(index).unwrap_or(NOT_LED);
            loaded += replay_shard(log, index, &mut |replayed| apply(index, &mut shard, replayed))?;
            self.loaded_at[index].store(epoch, Ordering::Release);
        }
        Ok(loaded)
    }
}

/// Hands `apply` every keyed record of partition `index` and every
/// transaction marker (other control batches skipped); the number of
/// records applied.
fn replay_shard(log: &dyn CoordinatorLog, index: usize, apply: &mut dyn FnMut(Replayed)) -> Result<usize, String> {
    let mut applied = 0;
    log.replay(index, &mut |batch| {
        if batch.is_control() {
            if let Some(commit) = marker_of(&batch)? {
                apply(Replayed::Marker { producer_id: batch.producer_id(), commit });
            }
            return Ok(());
        }
        let producer_id = batch.is_transactional().then(|| batch.producer_id());
        for record in batch.records(64 * 1024 * 1024).map_err(|e| e.to_string())? {
            let record = record.map_err(|e| e.to_string())?;
            let Some(key) = record.key else { continue };
            apply(Replayed::Record { offset: record.offset, key, value: record.value, producer_id });
            applied += 1;
        }
        Ok(())
    })?;
    Ok(applied)
}

/// Whether a control batch is a transaction's commit (Some(true)) or abort
/// (Some(false)) marker; None for other control records.
fn marker_of(batch: &RecordBatch) -> Result<Option<bool>, String> {
    if batch.producer_id() < 0 {
        return Ok(None);
    }
    let Some(record) = batch.records(1024).map_err(|e| e.to_string())?.next() else { return Ok(None) };
    let record = record.map_err(|e| e.to_string())?;
    Ok(match record.key.as_deref().and_then(control_type_id) {
        Some(id) if id == ControlType::Commit.id() => Some(true),
        Some(id) if id == ControlType::Abort.id() => Some(false),
        _ => None,
    })
}

/// Appends `records` to partition `shard` in one batch of `producer`'s
/// transaction (its id and epoch; no sequence, as Kafka's coordinator
/// writes it), which counts once the producer's commit marker follows.
pub fn persist_transactional(
    log: &dyn CoordinatorLog,
    shard: usize,
    records: &[KeyValue],
    now_ms: i64,
    producer: (i64, i16),
) -> Result<i64, i16> {
    let builder =
        RecordBatchBuilder::new(Compression::None).with_transactional(true).with_producer(producer.0, producer.1, -1);
    persist_batch(log, shard, records, now_ms, builder)
}

/// `message` at `version` behind an i16 `prefix` (a record type for keys,
/// the version for values): how Kafka frames its coordinators' records.
pub fn version_prefixed<M: Message>(prefix: i16, message: &M, version: i16) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(prefix);
    let written = message.encode(&mut buf, version);
    assert!(written.is_ok(), "coordinator record does not encode: {written:?}");
    buf.freeze()
}

/// Appends `records` to partition `shard` in one batch (the caller holds
/// the shard's lock, and applies the change only when this succeeds).
pub fn persist(log: &dyn CoordinatorLog, shard: usize, records: &[KeyValue], now_ms: i64) -> Result<i64, i16> {
    persist_batch(log, shard, records, now_ms, RecordBatchBuilder::new(Compression::None))
}

fn persist_batch(
    log: &dyn CoordinatorLog,
    shard: usize,
    records: &[KeyValue],
    now_ms: i64,
    mut builder: RecordBatchBuilder,
) -> Result<i64, i16> {
    if records.is_empty() {
        return Ok(-1);
    }
    for (key, value) in records {
        let record = NewRecord { timestamp_ms: now_ms, key: Some(key), value: value.as_deref(), headers: &[] };
        builder.append(&record).map_err(|_| ErrorCode::UNKNOWN_SERVER_ERROR.code())?;
    }
    let batch = builder.build().map_err(|_| ErrorCode::UNKNOWN_SERVER_ERROR.code())?;
    log.append(shard, batch.as_bytes(), now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemoryLog;

    #[test]
    fn keys_land_on_kafkas_partitions() {
        // Java's hash is krabka_protocol::java's (tested there).
        let shards: Shards<()> = Shards::new(50);
        // Kafka's Utils.abs: 1906497762 % 50, not (hash & 0x7fffffff) % 50 (= 36).
        assert_eq!(shards.index_of("my-group"), 12);
        assert_eq!(shards.index_of("a"), 97 % 50);
        // A key whose hash is Integer.MIN_VALUE goes to partition 0.
        let min = min_value_key();
        assert_eq!(java_string_hash(&min), i32::MIN);
        assert_eq!(Shards::<()>::new(7).index_of(&min), 0);
    }

    /// A string whose Java hash is `Integer.MIN_VALUE`: "polygenelubricants"
    /// is the classic one.
    fn min_value_key() -> String {
        "polygenelubricants".to_string()
    }

    #[test]
    fn persisted_records_replay_in_order_per_shard() {
        let log = MemoryLog::new(2);
        let key = |k: &'static [u8]| Bytes::from_static(k);
        persist(&log, 1, &[(key(b"a"), Some(key(b"1"))), (key(b"b"), None)], 5).unwrap();
        persist(&log, 0, &[(key(b"c"), Some(key(b"2")))], 6).unwrap();
        persist(&log, 1, &[], 7).unwrap();
        let shards: Shards<Vec<(usize, Bytes, Option<Bytes>)>> = Shards::new(2);
        let loaded = shards
            .load(&log, |index, shard, replayed| {
                if let Replayed::Record { key, value, .. } = replayed {
                    shard.push((index, key, value));
                }
            })
            .unwrap();
        assert_eq!(loaded, 3);
        assert_eq!(*shards.lock(0), vec![(0, key(b"c"), Some(key(b"2")))]);
        assert_eq!(*shards.lock(1), vec![(1, key(b"a"), Some(key(b"1"))), (1, key(b"b"), None)]);
        log.fail_appends(ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
        assert_eq!(persist(&log, 0, &[(key(b"d"), None)], 8), Err(ErrorCode::NOT_LEADER_OR_FOLLOWER.code()));
    }
}
