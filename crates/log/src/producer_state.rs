//! Producer state for idempotence and transactions, as Kafka keeps it.
//!
//! Per producer id: its epoch, the last five batches' sequence ranges and
//! offsets (to acknowledge a retried batch with its original offsets), the
//! coordinator epoch of its last transaction marker, and the first offset of
//! its open transaction. Snapshotted to `<offset>.snapshot` (Kafka's version
//! 1 format: version i16, CRC-32C u32 of the rest, then the entries) when a
//! segment rolls and on close, and rebuilt from the log past the snapshot.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};

use bytes::{Buf, BufMut, BytesMut};
use krabka_protocol::records::{crc32c, RecordBatch};

use crate::fsutil::{atomic_write, replace_unsynced};
use crate::segment::file_stem;

pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_ENTRY_BYTES: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;
/// Batches remembered per producer for duplicate detection (the Java
/// client keeps at most five in flight).
pub const BATCHES_PER_PRODUCER: usize = 5;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;

/// Why an idempotent or transactional batch is refused; each maps to the
/// Kafka error code of the same name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProducerStateError {
    #[error("producer {producer_id} epoch {epoch} is older than the current epoch {current}")]
    InvalidProducerEpoch { producer_id: i64, epoch: i16, current: i16 },
    #[error("out of order sequence for producer {producer_id}: expected {expected}, got {received}")]
    OutOfOrderSequence { producer_id: i64, expected: i32, received: i32 },
    #[error("transaction marker for producer {producer_id} from coordinator epoch {epoch} below {current}")]
    TransactionCoordinatorFenced { producer_id: i64, epoch: i32, current: i32 },
    #[error("invalid transaction marker: {0}")]
    InvalidMarker(String),
}

/// One appended batch of a producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    pub batches: VecDeque<BatchMetadata>,
    pub coordinator_epoch: i32,
    pub current_txn_first_offset: Option<i64>,
    pub last_timestamp: i64,
}

impl ProducerEntry {
    fn new(producer_id: i64) -> Self {
        ProducerEntry {
            producer_id,
            epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_timestamp: -1,
        }
    }

    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }
}

/// A transaction ended by a marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub aborted: bool,
}

/// What the producer state says about a batch before it is appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// New data: append it.
    Append,
    /// A retry of a batch already in the log: answer with its offsets.
    Duplicate(BatchMetadata),
}

/// The sequence number `increment` after `sequence`, wrapping past i32::MAX
/// to 0 (Kafka's `incrementSequence`). Total: the header fields it is given
/// may be anything a CRC-valid batch carries.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(increment);
    if sum > i64::from(i32::MAX) {
        (sum - (1 << 31)) as i32
    } else {
        sum as i32
    }
}

/// The sequence number `decrement` before `sequence`, wrapping below 0 to
/// i32::MAX as producers wrap the other way (Kafka's `decrementSequence`).
pub fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    let difference = i64::from(sequence) - i64::from(decrement);
    if sequence < decrement {
        (difference + (1 << 31)) as i32
    } else {
        difference as i32
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// The producer-relevant fields of a batch.
#[derive(Clone, Copy, Debug)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub transactional: bool,
    /// For control batches: (aborted, coordinator epoch) from the marker.
    pub marker: Option<(bool, i32)>,
    /// A control batch without its marker record (emptied by compaction).
    pub empty_control: bool,
}

impl ProducerBatch {
    /// Reads the fields from a batch (the marker from its one record).
    pub fn from_batch(batch: &RecordBatch, first_offset: i64) -> Result<Self, ProducerStateError> {
        let delta = batch.last_offset_delta();
        // A control batch compaction emptied (Kafka's retained empty header)
        // has no marker: its transaction is long complete.
        // Only a producer's control batches are transaction markers; KRaft's
        // (LeaderChange, snapshot header and footer, voters) have no
        // producer, and no producer state, as in Kafka.
        let has_producer = batch.producer_id() >= 0;
        let marker = if has_producer && batch.is_control() && batch.record_count() > 0 {
            Some(read_marker(batch)?)
        } else {
            None
        };
        Ok(ProducerBatch {
            producer_id: batch.producer_id(),
            epoch: batch.producer_epoch(),
            first_seq: batch.base_sequence(),
            last_seq: increment_sequence(batch.base_sequence(), delta),
            first_offset,
            last_offset: first_offset + i64::from(delta),
            max_timestamp: batch.max_timestamp(),
            transactional: batch.is_transactional(),
            marker,
            empty_control: has_producer && batch.is_control() && marker.is_none(),
        })
    }
}

/// A control record's key is (version i16, type i16: 0 abort, 1 commit); its
/// value is (version i16, coordinator epoch i32).
fn read_marker(batch: &RecordBatch) -> Result<(bool, i32), ProducerStateError> {
    let invalid = |reason: &str| ProducerStateError::InvalidMarker(reason.to_string());
    let mut records = batch.records(1024).map_err(|e| ProducerStateError::InvalidMarker(e.to_string()))?;
    let record = records.next().ok_or_else(|| invalid("no record"))?.map_err(|e| invalid(&e.to_string()))?;
    let mut key = record.key.ok_or_else(|| invalid("no key"))?;
    if key.len() < 4 {
        return Err(invalid("short key"));
    }
    let _version = key.get_i16();
    let aborted = match key.get_i16() {
        0 => true,
        1 => false,
        other => return Err(invalid(&format!("control type {other}"))),
    };
    let mut value = record.value.ok_or_else(|| invalid("no value"))?;
    if value.len() < 6 {
        return Err(invalid("short value"));
    }
    let _version = value.get_i16();
    Ok((aborted, value.get_i32()))
}

pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions by first offset (the LSO is the smallest).
    ongoing: BTreeMap<i64, i64>,
    /// The offset up to which the state reflects the log.
    map_end_offset: i64,
}

impl ProducerStateManager {
    pub fn new(dir: &Path) -> Self {
        ProducerStateManager {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            ongoing: BTreeMap::new(),
            map_end_offset: 0,
        }
    }

    pub fn producers(&self) -> &HashMap<i64, ProducerEntry> {
        &self.producers
    }

    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    /// The first offset of the oldest open transaction (bounds the LSO).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// Checks a batch a leader is about to append (Kafka's rules): epoch
    /// fencing, duplicate detection over the last five batches, sequence order.
    pub fn check(&self, batch: &ProducerBatch) -> Result<SequenceCheck, ProducerStateError> {
        if batch.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            // Unknown producer (new, or its state expired with the data): any sequence.
            return Ok(SequenceCheck::Append);
        };
        if batch.epoch < entry.epoch {
            return Err(ProducerStateError::InvalidProducerEpoch {
                producer_id: batch.producer_id,
                epoch: batch.epoch,
                current: entry.epoch,
            });
        }
        if let Some((_, coordinator_epoch)) = batch.marker {
            if coordinator_epoch < entry.coordinator_epoch {
                return Err(ProducerStateError::TransactionCoordinatorFenced {
                    producer_id: batch.producer_id,
                    epoch: coordinator_epoch,
                    current: entry.coordinator_epoch,
                });
            }
            return Ok(SequenceCheck::Append);
        }
        // A batch without a sequence is a coordinator's (the offsets of a
        // transaction, TxnOffsetCommit): Kafka checks no sequence for it;
        // a client's such batch never gets here (the produce path refuses it).
        if batch.first_seq == NO_SEQUENCE {
            return Ok(SequenceCheck::Append);
        }
        if batch.epoch == entry.epoch {
            if let Some(duplicate) =
                entry.batches.iter().find(|b| b.first_seq == batch.first_seq && b.last_seq == batch.last_seq)
            {
                return Ok(SequenceCheck::Duplicate(*duplicate));
            }
            // An epoch without batches (a transactions-v2 marker bumped it)
            // takes sequence 0 only (last_seq is NO_SEQUENCE, one below 0),
            // as Kafka's checkSequence: a later batch that got in first
            // would strand its producer's retries of the earlier ones.
            let last_seq = entry.last_seq();
            if entry.epoch != NO_PRODUCER_EPOCH && !in_sequence(last_seq, batch.first_seq) {
                return Err(ProducerStateError::OutOfOrderSequence {
                    producer_id: batch.producer_id,
                    expected: increment_sequence(last_seq, 1),
                    received: batch.first_seq,
                });
            }
        } else if batch.first_seq != 0 && entry.epoch != NO_PRODUCER_EPOCH {
            // A new epoch starts its sequences at zero.
            return Err(ProducerStateError::OutOfOrderSequence {
                producer_id: batch.producer_id,
                expected: 0,
                received: batch.first_seq,
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Records an appended batch; returns the transaction a marker completed.
    pub fn update(&mut self, batch: &ProducerBatch) -> Option<CompletedTxn> {
        self.map_end_offset = self.map_end_offset.max(batch.last_offset + 1);
        if batch.producer_id < 0 {
            return None;
        }
        let entry = self.producers.entry(batch.producer_id).or_insert_with(|| ProducerEntry::new(batch.producer_id));
        if batch.epoch != entry.epoch {
            entry.epoch = batch.epoch;
            entry.batches.clear();
        }
        // Kafka keeps the last batch's timestamp (producer expiry counts from it).
        entry.last_timestamp = batch.max_timestamp;
        // A control batch compaction emptied completes nothing, but its epoch
        // is the producer's latest (compaction keeps it for fencing). Kafka
        // skips such a batch altogether when rebuilding from the log.
        if batch.empty_control {
            return None;
        }
        if let Some((aborted, coordinator_epoch)) = batch.marker {
            entry.coordinator_epoch = coordinator_epoch;
            let first_offset = entry.current_txn_first_offset.take()?;
            self.ongoing.remove(&first_offset);
            return Some(CompletedTxn {
                producer_id: batch.producer_id,
                first_offset,
                last_offset: batch.last_offset,
                aborted,
            });
        }
        if batch.first_seq != NO_SEQUENCE {
            if entry.batches.len() == BATCHES_PER_PRODUCER {
                entry.batches.pop_front();
            }
            entry.batches.push_back(BatchMetadata {
                first_seq: batch.first_seq,
                last_seq: batch.last_seq,
                first_offset: batch.first_offset,
                last_offset: batch.last_offset,
                timestamp: batch.max_timestamp,
            });
        }
        if batch.transactional && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(batch.first_offset);
            self.ongoing.insert(batch.first_offset, batch.producer_id);
        }
        None
    }

    /// Kafka's producer expiry (`producer.id.expiration.ms`): forgets the
    /// producers with no open transaction whose last batch's timestamp is
    /// `expiration_ms` or more before `now_ms`, so the state (and every
    /// snapshot) stays bounded however many producers come and go. Returns
    /// how many were forgotten.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            entry.current_txn_first_offset.is_some() || now_ms.saturating_sub(entry.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// Forgets everything (the log was truncated fully or is rebuilt).
    pub fn clear(&mut self, start_offset: i64) {
        self.producers.clear();
        self.ongoing.clear();
        self.map_end_offset = start_offset;
    }

    fn snapshot_path(&self, offset: i64) -> PathBuf {
        self.dir.join(format!("{}{SNAPSHOT_SUFFIX}", file_stem(offset)))
    }

    /// The snapshot files present, by offset.
    pub fn snapshot_offsets(&self) -> io::Result<Vec<i64>> {
        let mut offsets = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) {
                if stem.len() == 20 {
                    if let Ok(offset) = stem.parse() {
                        offsets.push(offset);
                    }
                }
            }
        }
        offsets.sort_unstable();
        Ok(offsets)
    }

    /// Writes `<map end offset>.snapshot` in Kafka's format, synced.
    pub fn take_snapshot(&self) -> io::Result<()> {
        atomic_write(&self.snapshot_path(self.map_end_offset), &self.snapshot_bytes())
    }

    /// Writes the snapshot without waiting for the disk (a roll: Kafka's
    /// `takeSnapshot(sync = false)`) and returns its path for a later sync.
    /// A crash before that sync may leave it torn; loading then deletes it
    /// (CRC) and falls back to an older one plus the log.
    pub fn take_snapshot_unsynced(&self) -> io::Result<PathBuf> {
        let path = self.snapshot_path(self.map_end_offset);
        replace_unsynced(&path, &self.snapshot_bytes())?;
        Ok(path)
    }

    fn snapshot_bytes(&self) -> BytesMut {
        let mut producers: Vec<&ProducerEntry> = self.producers.values().collect();
        producers.sort_by_key(|p| p.producer_id);
        let mut buf = BytesMut::with_capacity(10 + producers.len() * SNAPSHOT_ENTRY_BYTES);
        buf.put_i16(SNAPSHOT_VERSION);
        buf.put_u32(0);
        buf.put_i32(producers.len() as i32);
        for p in producers {
            let last = p.batches.back();
            buf.put_i64(p.producer_id);
            buf.put_i16(p.epoch);
            buf.put_i32(last.map_or(NO_SEQUENCE, |b| b.last_seq));
            buf.put_i64(last.map_or(-1, |b| b.last_offset));
            buf.put_i32(last.map_or(0, |b| (b.last_offset - b.first_offset) as i32));
            buf.put_i64(p.last_timestamp);
            buf.put_i32(p.coordinator_epoch);
            buf.put_i64(p.current_txn_first_offset.unwrap_or(-1));
        }
        let crc = crc32c(&buf[6..]);
        buf[2..6].copy_from_slice(&crc.to_be_bytes());
        buf
    }

    /// Reads a snapshot file; corrupt files are errors (the caller deletes them).
    pub fn read_snapshot(path: &Path) -> io::Result<Vec<ProducerEntry>> {
        let raw = std::fs::read(path)?;
        let invalid =
            |reason: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {reason}", path.display()));
        if raw.len() < 10 {
            return Err(invalid("too short"));
        }
        let mut buf = &raw[..];
        if buf.get_i16() != SNAPSHOT_VERSION {
            return Err(invalid("unknown version"));
        }
        if buf.get_u32() != crc32c(&raw[6..]) {
            return Err(invalid("CRC mismatch"));
        }
        let count = buf.get_i32();
        if count < 0 || buf.remaining() != count as usize * SNAPSHOT_ENTRY_BYTES {
            return Err(invalid("entry count does not match the size"));
        }
        let mut entries = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let producer_id = buf.get_i64();
            let epoch = buf.get_i16();
            let last_seq = buf.get_i32();
            let last_offset = buf.get_i64();
            let offset_delta = buf.get_i32();
            let timestamp = buf.get_i64();
            let coordinator_epoch = buf.get_i32();
            let txn_first = buf.get_i64();
            let mut batches = VecDeque::new();
            if last_offset >= 0 {
                // A CRC guards against a torn write, not against a writer's
                // nonsense: fields no log could produce make the snapshot
                // unusable (the state is then rebuilt from the log).
                if last_seq < NO_SEQUENCE || offset_delta < 0 {
                    return Err(invalid("a batch with a negative sequence or offset delta"));
                }
                let first_offset = last_offset
                    .checked_sub(i64::from(offset_delta))
                    .filter(|first| *first >= 0)
                    .ok_or_else(|| invalid("a batch starting below offset 0"))?;
                batches.push_back(BatchMetadata {
                    // A snapshot keeps the last sequence and the offset
                    // delta; the first sequence may have wrapped.
                    first_seq: if last_seq == NO_SEQUENCE {
                        NO_SEQUENCE
                    } else {
                        decrement_sequence(last_seq, offset_delta)
                    },
                    last_seq,
                    first_offset,
                    last_offset,
                    timestamp,
                });
            }
            entries.push(ProducerEntry {
                producer_id,
                epoch,
                batches,
                coordinator_epoch,
                current_txn_first_offset: (txn_first >= 0).then_some(txn_first),
                last_timestamp: timestamp,
            });
        }
        Ok(entries)
    }

    /// Loads the newest valid snapshot at or below `max_offset` (deleting
    /// corrupt ones and any above it). Returns the offset the state covers.
    pub fn load_latest_snapshot(&mut self, log_start_offset: i64, max_offset: i64) -> io::Result<i64> {
        self.clear(log_start_offset);
        for offset in self.snapshot_offsets()?.into_iter().rev() {
            let path = self.snapshot_path(offset);
            if offset > max_offset {
                std::fs::remove_file(&path)?;
                continue;
            }
            match Self::read_snapshot(&path) {
                Ok(entries) => {
                    for entry in entries {
                        if let Some(first) = entry.current_txn_first_offset {
                            self.ongoing.insert(first, entry.producer_id);
                        }
                        self.producers.insert(entry.producer_id, entry);
                    }
                    self.map_end_offset = offset;
                    return Ok(offset);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "deleting a corrupt producer snapshot");
                    std::fs::remove_file(&path)?;
                }
            }
        }
        Ok(log_start_offset)
    }

    /// Deletes snapshots below `offset` except the newest one (retention).
    pub fn delete_snapshots_before(&self, offset: i64) -> io::Result<()> {
        let offsets = self.snapshot_offsets()?;
        for (i, &snapshot) in offsets.iter().enumerate() {
            if snapshot < offset && i + 1 < offsets.len() {
                std::fs::remove_file(self.snapshot_path(snapshot))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, first_seq: i32, count: i32, first_offset: i64) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            epoch,
            first_seq,
            last_seq: increment_sequence(first_seq, count - 1),
            first_offset,
            last_offset: first_offset + i64::from(count) - 1,
            max_timestamp: 1000 + first_offset,
            transactional: false,
            marker: None,
            empty_control: false,
        }
    }

    #[test]
    fn sequences_duplicates_and_fencing() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        let first = batch(7, 0, 0, 5, 100);
        assert_eq!(state.check(&first), Ok(SequenceCheck::Append));
        state.update(&first);
        let second = batch(7, 0, 5, 3, 105);
        assert_eq!(state.check(&second), Ok(SequenceCheck::Append));
        state.update(&second);
        // A retry of the first batch is a duplicate with its original offsets.
        assert!(
            matches!(state.check(&batch(7, 0, 0, 5, 200)), Ok(SequenceCheck::Duplicate(b)) if b.first_offset == 100)
        );
        // A gap is out of order.
        assert!(matches!(
            state.check(&batch(7, 0, 9, 1, 200)),
            Err(ProducerStateError::OutOfOrderSequence { expected: 8, .. })
        ));
        // An older epoch is fenced; a new epoch must start at 0.
        state.update(&batch(7, 1, 0, 1, 108));
        assert!(matches!(state.check(&batch(7, 0, 1, 1, 200)), Err(ProducerStateError::InvalidProducerEpoch { .. })));
        assert!(matches!(state.check(&batch(7, 2, 4, 1, 200)), Err(ProducerStateError::OutOfOrderSequence { .. })));
        assert_eq!(state.check(&batch(7, 2, 0, 1, 200)), Ok(SequenceCheck::Append));
        // Unknown producers may start anywhere.
        assert_eq!(state.check(&batch(8, 0, 42, 1, 200)), Ok(SequenceCheck::Append));
        // A coordinator's batch without a sequence (a transaction's offsets)
        // is checked for its epoch only, also in a new epoch.
        let unsequenced =
            |epoch| ProducerBatch { first_seq: NO_SEQUENCE, last_seq: NO_SEQUENCE, ..batch(7, epoch, 0, 1, 200) };
        assert_eq!(state.check(&unsequenced(2)), Ok(SequenceCheck::Append));
        assert!(matches!(state.check(&unsequenced(0)), Err(ProducerStateError::InvalidProducerEpoch { .. })));
        // Sequences wrap past i32::MAX.
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert!(in_sequence(i32::MAX, 0));
    }

    #[test]
    fn an_epoch_a_marker_opened_takes_sequence_zero_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        let txn = |epoch, first_seq, count, offset| ProducerBatch {
            transactional: true,
            ..batch(0, epoch, first_seq, count, offset)
        };
        state.update(&txn(0, 0, 17, 0));
        // Transactions v2: the coordinator's marker carries the bumped epoch.
        let marker = ProducerBatch {
            first_seq: NO_SEQUENCE,
            last_seq: NO_SEQUENCE,
            marker: Some((true, 0)),
            ..txn(1, 0, 1, 17)
        };
        state.update(&marker);
        // The next transaction's later batch cannot go first (Kafka 4.3.1
        // refuses it too): its producer is still retrying 0-14.
        assert!(matches!(
            state.check(&txn(1, 15, 2, 18)),
            Err(ProducerStateError::OutOfOrderSequence { expected: 0, received: 15, .. })
        ));
        assert_eq!(state.check(&txn(1, 0, 15, 18)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn sequences_wrap_both_ways_as_in_kafka() {
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        assert_eq!(decrement_sequence(5, 3), 2);
        assert_eq!(decrement_sequence(0, 0), 0);
        for (sequence, step) in [(0, 1), (7, 7), (i32::MAX, 5), (3, i32::MAX)] {
            assert_eq!(decrement_sequence(increment_sequence(sequence, step), step), sequence, "{sequence} {step}");
        }
    }

    #[test]
    fn idle_producers_expire_unless_a_transaction_is_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        let at = |mut b: ProducerBatch, timestamp: i64| {
            b.max_timestamp = timestamp;
            b
        };
        state.update(&at(batch(1, 0, 0, 1, 0), 1_000));
        state.update(&at(batch(2, 0, 0, 1, 1), 1_500));
        let mut open = at(batch(3, 0, 0, 1, 2), 1_000);
        open.transactional = true;
        state.update(&open);
        // Exactly the expiration after producer 1's last batch: it goes
        // (Kafka's `>=`); producer 2 is 1 ms short; producer 3's transaction
        // is open.
        assert_eq!(state.remove_expired(11_000, 10_000), 1);
        let mut left: Vec<i64> = state.producers().keys().copied().collect();
        left.sort_unstable();
        assert_eq!(left, vec![2, 3]);
        assert_eq!(state.remove_expired(11_500, 10_000), 1);
        assert_eq!(state.producers().keys().copied().collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn only_five_batches_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        for i in 0..7 {
            state.update(&batch(1, 0, i, 1, i64::from(i)));
        }
        assert_eq!(state.producers()[&1].batches.len(), BATCHES_PER_PRODUCER);
        // The oldest two fell out of the window: a retry of them is out of order.
        assert!(matches!(
            state.check(&batch(1, 0, 0, 1, 99)),
            Err(ProducerStateError::OutOfOrderSequence { expected: 7, received: 0, .. })
        ));
        assert!(matches!(state.check(&batch(1, 0, 3, 1, 99)), Ok(SequenceCheck::Duplicate(_))));
    }

    #[test]
    fn transactions_track_the_first_unstable_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        let mut txn = batch(3, 0, 0, 2, 10);
        txn.transactional = true;
        state.update(&txn);
        assert_eq!(state.first_unstable_offset(), Some(10));
        let mut marker = batch(3, 0, NO_SEQUENCE, 1, 12);
        marker.marker = Some((true, 4));
        marker.transactional = true;
        let completed = state.update(&marker).unwrap();
        assert_eq!(completed, CompletedTxn { producer_id: 3, first_offset: 10, last_offset: 12, aborted: true });
        assert_eq!(state.first_unstable_offset(), None);
        let mut stale = marker;
        stale.marker = Some((false, 3));
        assert!(matches!(state.check(&stale), Err(ProducerStateError::TransactionCoordinatorFenced { .. })));
    }

    #[test]
    fn snapshots_round_trip_and_corrupt_ones_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        state.update(&batch(1, 0, 0, 3, 0));
        let mut txn = batch(2, 5, 0, 1, 3);
        txn.transactional = true;
        state.update(&txn);
        state.take_snapshot().unwrap();
        assert!(dir.path().join("00000000000000000004.snapshot").exists());
        state.update(&batch(1, 0, 3, 1, 4));
        state.take_snapshot().unwrap();
        std::fs::write(dir.path().join("00000000000000000005.snapshot"), b"garbage!!!!!").unwrap();

        let mut loaded = ProducerStateManager::new(dir.path());
        assert_eq!(loaded.load_latest_snapshot(0, 100).unwrap(), 4);
        assert!(!dir.path().join("00000000000000000005.snapshot").exists());
        assert_eq!(loaded.producers()[&1].last_seq(), 2);
        assert_eq!(loaded.producers()[&2].epoch, 5);
        assert_eq!(loaded.first_unstable_offset(), Some(3));
        // The retried last batch is still recognised after the reload.
        assert!(matches!(loaded.check(&batch(1, 0, 0, 3, 50)), Ok(SequenceCheck::Duplicate(b)) if b.last_offset == 2));
    }

    /// The fuzzer's findings: CRC-valid snapshots whose fields no log could
    /// produce (a negative sequence, a huge or negative offset delta next to
    /// an extreme offset) are refused, never an overflow panic.
    #[test]
    fn nonsense_fields_behind_a_valid_crc_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        state.update(&batch(1, 0, 0, 3, 0));
        state.take_snapshot().unwrap();
        let path = dir.path().join("00000000000000000003.snapshot");
        let original = std::fs::read(&path).unwrap();
        // Entry 0 after the 10-byte header: producer id, epoch, then the
        // last sequence (i32 at 20), last offset (i64 at 24), delta (i32 at 32).
        let patched = |edits: &[(usize, &[u8])]| {
            let mut raw = original.clone();
            for (at, bytes) in edits {
                raw[*at..*at + bytes.len()].copy_from_slice(bytes);
            }
            let crc = crc32c(&raw[6..]);
            raw[2..6].copy_from_slice(&crc.to_be_bytes());
            std::fs::write(&path, &raw).unwrap();
        };
        for edits in [
            vec![(20, &(-5i32).to_be_bytes()[..]), (32, &i32::MAX.to_be_bytes()[..])],
            vec![(24, &(i64::MAX - 1).to_be_bytes()[..]), (32, &(-7i32).to_be_bytes()[..])],
            vec![(24, &3i64.to_be_bytes()[..]), (32, &i32::MAX.to_be_bytes()[..])],
        ] {
            patched(&edits);
            assert!(ProducerStateManager::read_snapshot(&path).is_err(), "{edits:?}");
        }
        // A first sequence that wrapped is fine.
        patched(&[(20, &1i32.to_be_bytes()[..]), (32, &2i32.to_be_bytes()[..])]);
        let entries = ProducerStateManager::read_snapshot(&path).unwrap();
        assert_eq!(entries[0].batches[0].first_seq, i32::MAX);
    }
}
