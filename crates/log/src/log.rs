//! One partition's log: an ordered set of segments, the last one active.
//!
//! Appends validate each batch (framing, magic 2, CRC-32C, offset range
//! against the record count), assign offsets by patching a copy of each
//! batch's 61-byte header, and write headers and untouched records with one
//! vectored write. Reads return file ranges for sendfile.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use krabka_protocol::records::{RecordBatch, RecordBatchHeader, RecordBatches, RecordError, BATCH_HEADER_BYTES};
use tracing::{info, warn};

use crate::checkpoint::TopicPartition;
use crate::config::{LogConfig, TimestampPolicy};
use crate::fsutil::{flush_in_background, fsync_dir, FlushJob};
use crate::index::AbortedTxn;
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::{
    increment_sequence, ProducerBatch, ProducerStateError, ProducerStateManager, SequenceCheck,
};
use crate::segment::{
    FileSlice, PreparedBatch, Segment, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};

/// Errors the broker maps to Kafka error codes.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// KAFKA_STORAGE_ERROR: the disk failed (ENOSPC, EIO...).
    #[error("storage error: {0}")]
    Io(#[from] io::Error),
    /// CORRUPT_MESSAGE (or UNSUPPORTED_VERSION for an old magic).
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] RecordError),
    /// INVALID_RECORD: the batch header contradicts itself.
    #[error("invalid record batch: {0}")]
    InconsistentBatch(String),
    /// MESSAGE_TOO_LARGE.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge { size: usize, max: u32 },
    /// OFFSET_OUT_OF_RANGE.
    #[error("offset {offset} is outside [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },
    /// INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, ...
    #[error(transparent)]
    ProducerState(#[from] ProducerStateError),
    /// A follower append that does not continue the log.
    #[error("offset {offset} does not follow the log end offset {log_end_offset}")]
    NonMonotonicOffset { offset: i64, log_end_offset: i64 },
}

/// What an append did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// The broker's time when LogAppendTime applies, else -1.
    pub log_append_time_ms: i64,
    pub record_count: i64,
    pub bytes: u64,
}

/// A planned read: file ranges plus the offsets the response reports.
#[derive(Clone, Debug)]
pub struct ReadInfo {
    pub slice: Option<FileSlice>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// What opening the log did, for the operator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    pub segments: usize,
    pub recovered_segments: usize,
    pub truncated_bytes: u64,
}

pub struct PartitionLog {
    pub(crate) dir: PathBuf,
    topic_partition: TopicPartition,
    pub(crate) config: LogConfig,
    pub(crate) segments: BTreeMap<i64, Segment>,
    pub(crate) log_start_offset: i64,
    recovery_point: i64,
    /// Where the background flushes of rolled segments got to; replaced (so
    /// a late flush cannot raise the recovery point) whenever it moves down.
    flushed_to: Arc<AtomicI64>,
    /// A roll created a file whose directory entry is not synced yet.
    dir_needs_sync: bool,
    leader_epochs: LeaderEpochCache,
    producer_state: ProducerStateManager,
    unflushed_records: i64,
    last_flush_ms: i64,
    pub(crate) pending_deletes: Vec<PathBuf>,
    /// The cleaner's progress: offsets below it were compacted (the broker
    /// persists it in the log dir's `cleaner-offset-checkpoint`).
    pub(crate) cleaner_checkpoint: i64,
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

fn parse_base_offset(file_name: &str, suffix: &str) -> Option<i64> {
    let stem = file_name.strip_suffix(suffix)?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse().ok()).flatten()
}

impl PartitionLog {
    /// Opens (or creates) the log in `dir`. After a clean shutdown the
    /// segments are trusted; otherwise every segment from the one holding
    /// `recovery_point` on is re-read, checked and truncated where torn.
    pub fn open(
        dir: &Path,
        config: LogConfig,
        log_start_offset: i64,
        recovery_point: i64,
        clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<(Self, OpenReport), LogError> {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let topic_partition = TopicPartition::from_dir_name(name).unwrap_or_else(|| TopicPartition::new(name, 0));
        let created = !dir.exists();
        std::fs::create_dir_all(dir)?;
        if created {
            if let Some(parent) = dir.parent() {
                fsync_dir(parent)?;
            }
        }
        // A compaction a crash interrupted: drop `.cleaned`, finish `.swap`.
        let swapped = crate::cleaner::recover_leftovers(dir)?;
        let mut base_offsets = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if file_name.ends_with(DELETED_SUFFIX) || file_name.ends_with(".tmp") {
                // Left by a deletion or a checkpoint write a crash interrupted.
                std::fs::remove_file(entry.path())?;
            } else if let Some(base) = parse_base_offset(&file_name, LOG_SUFFIX) {
                base_offsets.push(base);
            }
        }
        base_offsets.sort_unstable();
        // Indexes without a log file are orphans from an interrupted roll or delete.
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let file_name = entry.file_name().to_string_lossy().into_owned();
            for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
                if let Some(base) = parse_base_offset(&file_name, suffix) {
                    if base_offsets.binary_search(&base).is_err() {
                        std::fs::remove_file(entry.path())?;
                    }
                }
            }
        }

        let leader_epochs = LeaderEpochCache::load(dir)?;
        let mut log = PartitionLog {
            dir: dir.to_path_buf(),
            topic_partition,
            config,
            segments: BTreeMap::new(),
            log_start_offset,
            recovery_point,
            flushed_to: Arc::new(AtomicI64::new(i64::MIN)),
            dir_needs_sync: false,
            leader_epochs,
            producer_state: ProducerStateManager::new(dir),
            unflushed_records: 0,
            last_flush_ms: now_ms,
            pending_deletes: Vec::new(),
            cleaner_checkpoint: 0,
        };
        let mut report = OpenReport { segments: base_offsets.len(), ..Default::default() };
        let last_base = base_offsets.last().copied();
        let index_bytes = log.config.segment_index_bytes;
        let interval = log.config.index_interval_bytes;
        let recover_from = base_offsets.iter().rev().find(|&&b| b <= recovery_point).copied().unwrap_or(i64::MIN);
        let mut truncated_at: Option<i64> = None;
        let mut first_recovered: Option<i64> = None;
        for &base in &base_offsets {
            if truncated_at.is_some() {
                // Everything after a truncated segment is unreachable: drop it.
                warn!(partition = %log.topic_partition.dir_name(), base, "deleting segment after a corrupt one");
                Segment::open(dir, base, index_bytes, false, interval, now_ms)?
                    .mark_deleted()?
                    .iter()
                    .try_for_each(std::fs::remove_file)?;
                continue;
            }
            let active = Some(base) == last_base;
            let mut segment = Segment::open(dir, base, index_bytes, active, interval, now_ms)?;
            let needs_recovery = (!clean_shutdown && base >= recover_from) || swapped.contains(&base);
            let index_broken = segment.quick_check_indexes().is_err();
            if needs_recovery || index_broken {
                if index_broken {
                    warn!(partition = %log.topic_partition.dir_name(), base, "rebuilding a corrupt index");
                }
                report.recovered_segments += 1;
                first_recovered.get_or_insert(base);
                // Epochs the checkpoint lost come back from the batches.
                let mut epochs_seen: Vec<(i32, i64)> = Vec::new();
                let truncation = segment.recover(|batch| {
                    let epoch = batch.partition_leader_epoch();
                    if epochs_seen.last().is_none_or(|&(latest, _)| epoch > latest) {
                        epochs_seen.push((epoch, batch.base_offset()));
                    }
                })?;
                for (epoch, start_offset) in epochs_seen {
                    log.leader_epochs.assign(epoch, start_offset)?;
                }
                if let Some(truncation) = truncation {
                    warn!(
                        partition = %log.topic_partition.dir_name(),
                        base,
                        position = truncation.position,
                        bytes = truncation.bytes_removed,
                        reason = %truncation.reason,
                        "truncated a torn or corrupt segment tail"
                    );
                    report.truncated_bytes += truncation.bytes_removed;
                    truncated_at = Some(base);
                }
                if !active && truncated_at.is_none() {
                    segment.seal()?;
                }
            }
            log.segments.insert(base, segment);
        }
        if log.segments.is_empty() {
            let start = log_start_offset.max(0);
            let segment = Segment::create(dir, start, index_bytes, interval, now_ms)?;
            log.segments.insert(start, segment);
            fsync_dir(dir)?;
        } else if truncated_at.is_some() {
            // The last kept segment becomes the active one: make room to append.
            let index_bytes = log.config.segment_index_bytes;
            log.active_mut().resize_indexes(index_bytes)?;
        }
        let first_base = *log.segments.keys().next().expect("a segment");
        log.log_start_offset = log.log_start_offset.max(first_base);
        let end = log.log_end_offset();
        if clean_shutdown {
            // A clean shutdown flushed everything (Kafka's rule too).
            log.recovery_point = end;
        } else {
            // Recovery read the tail from the page cache, which a power
            // loss can still take: the recovery point moves only when a
            // flush puts the tail on disk, so the next unclean open checks
            // it again (Kafka's LogLoader keeps min(checkpoint, end) too).
            log.recovery_point = log.recovery_point.min(end);
            log.leader_epochs.truncate_from_end(end)?;
        }
        log.rebuild_producer_state(first_recovered.unwrap_or(i64::MAX))?;
        if report.recovered_segments > 0 {
            info!(partition = %log.topic_partition.dir_name(), ?report, "recovered log");
        }
        Ok((log, report))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    fn active(&self) -> &Segment {
        self.segments.values().next_back().expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }

    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// Offsets below it are on disk (fsynced), so a restart after a crash
    /// re-reads only from there.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.max(self.flushed_to.load(Ordering::Acquire).min(self.log_end_offset()))
    }

    /// Keeps what background flushes finished, and forgets those still
    /// running (the log is shrinking under them).
    fn reset_background_flushes(&mut self) {
        self.recovery_point = self.recovery_point();
        self.flushed_to = Arc::new(AtomicI64::new(i64::MIN));
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(Segment::size_bytes).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    pub fn leader_epochs(&self) -> &LeaderEpochCache {
        &self.leader_epochs
    }

    /// Drops the state of producers idle for `producer.id.expiration.ms`
    /// (the broker calls this every `producer.id.expiration.check.interval.ms`).
    pub fn remove_expired_producers(&mut self, now_ms: i64) -> usize {
        self.producer_state.remove_expired(now_ms, self.config.producer_id_expiration_ms)
    }

    /// Records that `epoch` starts at the log end, as Kafka does when a
    /// broker becomes the partition's leader (a no-op for a known epoch).
    pub fn assign_leader_epoch(&mut self, epoch: i32) -> Result<(), LogError> {
        let end = self.log_end_offset();
        Ok(self.leader_epochs.assign(epoch, end)?)
    }

    /// OffsetForLeaderEpoch: (epoch, end offset), or None for an unknown epoch.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.leader_epochs.end_offset_for(epoch, self.log_end_offset())
    }

    /// Appends a produce request's records as the leader: validates every
    /// batch, assigns offsets from the log end and stamps `leader_epoch`.
    pub fn append_as_leader(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let log_append_time = self.config.timestamp_policy == TimestampPolicy::LogAppendTime;
        let mut prepared = Vec::new();
        let mut next_offset = self.log_end_offset();
        let first_offset = next_offset;
        let mut record_count = 0i64;
        let mut producer_batches: Vec<ProducerBatch> = Vec::new();
        let compacted = self.config.cleanup_policy.compacts();
        for batch in RecordBatches::new(records.clone()) {
            let batch = batch?;
            batch.validate()?;
            if compacted && !batch.is_control() {
                require_keys(&batch, self.config.max_decompressed_batch_bytes)?;
            }
            let producer_batch = ProducerBatch::from_batch(&batch, next_offset)?;
            if producer_batch.producer_id >= 0 {
                let previous = producer_batches.iter().rev().find(|p| p.producer_id == producer_batch.producer_id);
                match previous {
                    // Later batches of one producer in one request follow the earlier ones.
                    Some(previous) => {
                        if previous.epoch != producer_batch.epoch
                            || increment_sequence(previous.last_seq, 1) != producer_batch.first_seq
                        {
                            return Err(ProducerStateError::OutOfOrderSequence {
                                producer_id: producer_batch.producer_id,
                                expected: increment_sequence(previous.last_seq, 1),
                                received: producer_batch.first_seq,
                            }
                            .into());
                        }
                    }
                    None => {
                        if let SequenceCheck::Duplicate(original) = self.producer_state.check(&producer_batch)? {
                            // A retry: acknowledge the batch already in the log.
                            return Ok(AppendInfo {
                                first_offset: original.first_offset,
                                last_offset: original.last_offset,
                                log_append_time_ms: -1,
                                record_count: 0,
                                bytes: 0,
                            });
                        }
                    }
                }
            }
            producer_batches.push(producer_batch);
            if batch.size_bytes() > self.config.max_message_bytes as usize {
                return Err(LogError::RecordTooLarge { size: batch.size_bytes(), max: self.config.max_message_bytes });
            }
            let count = batch.record_count();
            let delta = batch.last_offset_delta();
            if count <= 0 || delta < 0 || i64::from(delta) + 1 != i64::from(count) {
                return Err(LogError::InconsistentBatch(format!(
                    "record count {count} does not match last offset delta {delta}"
                )));
            }
            let mut header = RecordBatchHeader::of(&batch);
            header.set_base_offset(next_offset);
            header.set_partition_leader_epoch(leader_epoch);
            let rest = batch.as_bytes().slice(BATCH_HEADER_BYTES..);
            let mut max_timestamp = batch.max_timestamp();
            if log_append_time {
                max_timestamp = now_ms;
                header.set_log_append_time(now_ms, &rest);
            }
            let last_offset = next_offset + i64::from(delta);
            prepared.push(PreparedBatch { header, rest, base_offset: next_offset, last_offset, max_timestamp });
            next_offset = last_offset + 1;
            record_count += i64::from(count);
        }
        if prepared.is_empty() {
            return Err(LogError::InconsistentBatch("no record batches".into()));
        }
        if self.leader_epochs.latest_epoch().is_none_or(|e| leader_epoch > e) {
            self.leader_epochs.assign(leader_epoch, first_offset)?;
        }
        let bytes = self.append_prepared(&prepared, now_ms)?;
        self.update_producer_state(&producer_batches)?;
        self.after_append(record_count, now_ms)?;
        Ok(AppendInfo {
            first_offset,
            last_offset: next_offset - 1,
            log_append_time_ms: if log_append_time { now_ms } else { -1 },
            record_count,
            bytes,
        })
    }

    /// Appends batches that already carry offsets (a follower copying its
    /// leader, or the broker's own metadata): they must continue the log.
    pub fn append_as_follower(&mut self, records: &Bytes, now_ms: i64) -> Result<AppendInfo, LogError> {
        let mut prepared = Vec::new();
        let mut producer_batches = Vec::new();
        let mut expected = self.log_end_offset();
        let first_offset = expected;
        let mut record_count = 0i64;
        for batch in RecordBatches::new(records.clone()) {
            let batch = batch?;
            batch.validate()?;
            if batch.base_offset() < expected || batch.last_offset() < batch.base_offset() {
                return Err(LogError::NonMonotonicOffset { offset: batch.base_offset(), log_end_offset: expected });
            }
            let epoch = batch.partition_leader_epoch();
            if self.leader_epochs.latest_epoch().is_none_or(|e| epoch > e) {
                self.leader_epochs.assign(epoch, batch.base_offset())?;
            }
            expected = batch.next_offset();
            record_count += i64::from(batch.record_count().max(0));
            producer_batches.push(ProducerBatch::from_batch(&batch, batch.base_offset())?);
            prepared.push(PreparedBatch::unchanged(&batch));
        }
        let bytes = self.append_prepared(&prepared, now_ms)?;
        self.update_producer_state(&producer_batches)?;
        self.after_append(record_count, now_ms)?;
        Ok(AppendInfo { first_offset, last_offset: expected - 1, log_append_time_ms: -1, record_count, bytes })
    }

    fn append_prepared(&mut self, prepared: &[PreparedBatch], now_ms: i64) -> Result<u64, LogError> {
        let Some(last) = prepared.last() else { return Ok(0) };
        let bytes: u64 = prepared.iter().map(PreparedBatch::size_bytes).sum();
        let first_timestamp = prepared[0].max_timestamp;
        if self.should_roll(bytes, last.last_offset, first_timestamp, now_ms) {
            self.roll(prepared[0].base_offset, now_ms)?;
        }
        self.active_mut().append(prepared)?;
        Ok(bytes)
    }

    fn should_roll(&self, incoming_bytes: u64, last_offset: i64, batch_timestamp: i64, now_ms: i64) -> bool {
        let active = self.active();
        // Even an empty segment rolls when the offsets would not fit in its
        // index (a follower's batch far past the base): Kafka's rule too.
        if !active.can_hold_offset(last_offset) {
            return true;
        }
        if active.is_empty() {
            return false;
        }
        active.size_bytes() + incoming_bytes > self.config.segment_bytes
            || active.indexes_full()
            || active.time_waited_for_roll_ms(now_ms, batch_timestamp) > self.config.segment_ms
    }

    /// Starts a new active segment at `base_offset` (the next offset): the
    /// old one's indexes are trimmed, and the old segment (with any other
    /// unflushed one), the roll's producer snapshot and the directory are
    /// fsynced in the background, as Kafka does; the recovery point moves to
    /// the new base when that is done.
    pub fn roll(&mut self, base_offset: i64, now_ms: i64) -> Result<(), LogError> {
        let base_offset = base_offset.max(self.log_end_offset());
        self.active_mut().seal()?;
        // Kafka snapshots producer state at every roll, named by the new base,
        // and syncs it with the rolled segment in the background.
        let snapshot = self.producer_state.take_snapshot_unsynced()?;
        let segment = Segment::create(
            &self.dir,
            base_offset,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
            now_ms,
        )?;
        self.segments.insert(base_offset, segment);
        // The new file's directory entry is synced by the background job or
        // by the next flush, whichever comes first: waiting here would queue
        // behind the rolled segment's writeback.
        self.dir_needs_sync = true;
        self.flush_rolled_in_background(snapshot);
        Ok(())
    }

    fn after_append(&mut self, record_count: i64, now_ms: i64) -> Result<(), LogError> {
        self.unflushed_records = self.unflushed_records.saturating_add(record_count);
        if self.unflushed_records >= self.config.flush_messages {
            self.flush(now_ms)?;
        }
        Ok(())
    }

    /// `flush.ms`: the broker calls this periodically.
    pub fn maybe_flush_on_time(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.unflushed_records > 0 && now_ms - self.last_flush_ms >= self.config.flush_ms {
            self.flush(now_ms)?;
        }
        Ok(())
    }

    /// Hands the segments not known to be on disk, all now inactive, and the
    /// roll's producer snapshot to the background flusher.
    fn flush_rolled_in_background(&mut self, snapshot: PathBuf) {
        let recovery_point = self.recovery_point();
        let mut job = FlushJob {
            files: Vec::new(),
            paths: Vec::new(),
            flushed_to: self.flushed_to.clone(),
            up_to: self.log_end_offset(),
        };
        for segment in self.segments.values().filter(|s| s.next_offset() > recovery_point) {
            job.files.push(segment.log_file().clone());
            job.paths.push(segment.offset_index().path().to_path_buf());
            job.paths.push(segment.time_index().path().to_path_buf());
            if !segment.txn_index().entries().is_empty() {
                job.paths.push(crate::segment::segment_path(&self.dir, segment.base_offset(), TXN_INDEX_SUFFIX));
            }
        }
        // The directory last: the snapshot's rename.
        job.paths.push(snapshot);
        job.paths.push(self.dir.clone());
        flush_in_background(job);
    }

    /// fsyncs every segment holding offsets past the recovery point.
    pub fn flush(&mut self, now_ms: i64) -> Result<(), LogError> {
        let recovery_point = self.recovery_point();
        for segment in self.segments.values().filter(|s| s.next_offset() > recovery_point) {
            segment.flush()?;
        }
        if self.dir_needs_sync {
            fsync_dir(&self.dir)?;
            self.dir_needs_sync = false;
        }
        self.recovery_point = self.log_end_offset();
        self.unflushed_records = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// Plans a fetch from `offset`: up to `max_bytes` of whole batches from
    /// one segment, none at or past `upper_bound` (the high watermark or the
    /// last stable offset), at least one batch when `min_one_batch` (KIP-74).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u32,
        upper_bound: i64,
        min_one_batch: bool,
    ) -> Result<ReadInfo, LogError> {
        let log_end_offset = self.log_end_offset();
        if offset < self.log_start_offset || offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange { offset, log_start_offset: self.log_start_offset, log_end_offset });
        }
        let mut info = ReadInfo { slice: None, log_start_offset: self.log_start_offset, log_end_offset };
        let upper_bound = upper_bound.min(log_end_offset);
        if offset >= upper_bound {
            return Ok(info);
        }
        for (_, segment) in
            self.segments.range(..=offset).next_back().into_iter().chain(self.segments.range(offset + 1..))
        {
            if segment.base_offset() >= upper_bound {
                break;
            }
            let max_position = if upper_bound < segment.next_offset() {
                segment.find_batch(upper_bound, 0)?.map_or(segment.size_bytes(), |h| h.position)
            } else {
                segment.size_bytes()
            };
            if let Some(slice) = segment.read(offset, max_bytes, max_position, min_one_batch)? {
                info.slice = Some(slice);
                break;
            }
        }
        Ok(info)
    }

    /// Reads the batches of `slice` into memory (lookups inside batches).
    fn batches_in(slice: &FileSlice) -> Result<Vec<RecordBatch>, LogError> {
        let bytes = slice.read_to_bytes()?;
        let mut batches = Vec::new();
        for batch in RecordBatches::new(bytes) {
            match batch {
                Ok(batch) => batches.push(batch),
                Err(RecordError::Truncated { .. }) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(batches)
    }

    /// ListOffsets by timestamp: the first record with timestamp >= `target`,
    /// as (timestamp, offset); `None` when every record is older.
    pub fn offset_for_timestamp(&self, target: i64) -> Result<Option<(i64, i64)>, LogError> {
        // Usually the first candidate segment answers; a later one does when
        // compaction left only empty batch headers (which keep their max
        // timestamp) where the newer records were.
        for segment in self.segments.values().filter(|s| s.max_timestamp().timestamp >= target) {
            if let Some(found) = self.offset_for_timestamp_in(segment, target)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    fn offset_for_timestamp_in(&self, segment: &Segment, target: i64) -> Result<Option<(i64, i64)>, LogError> {
        let from_offset = segment.time_index().lookup(target).map_or(segment.base_offset(), |e| e.offset);
        let start = segment.find_batch(from_offset, 0)?.map_or(0, |h| h.position);
        let mut position = start;
        while let Some(header) = segment.read_header(position)? {
            if header.max_timestamp >= target && header.last_offset >= self.log_start_offset {
                let slice = FileSlice { file: segment.log_file().clone(), position, length: header.size_bytes };
                for batch in Self::batches_in(&slice)? {
                    for record in batch.records(self.config.max_decompressed_batch_bytes)? {
                        let record = record?;
                        if record.timestamp >= target && record.offset >= self.log_start_offset {
                            return Ok(Some((record.timestamp, record.offset)));
                        }
                    }
                }
            }
            position += u64::from(header.size_bytes);
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the record with the largest timestamp (the
    /// first such record), as (timestamp, offset).
    pub fn max_timestamp_offset(&self) -> Result<Option<(i64, i64)>, LogError> {
        let best = self.segments.values().filter(|s| s.max_timestamp().timestamp >= 0).max_by_key(|s| {
            // max_by_key keeps the last maximum: prefer the earliest segment.
            (s.max_timestamp().timestamp, -s.base_offset())
        });
        let Some(segment) = best else { return Ok(None) };
        let target = segment.max_timestamp();
        let Some(header) = segment.find_batch(target.offset, 0)? else { return Ok(None) };
        let slice =
            FileSlice { file: segment.log_file().clone(), position: header.position, length: header.size_bytes };
        for batch in Self::batches_in(&slice)? {
            if batch.max_timestamp() != target.timestamp {
                continue;
            }
            for record in batch.records(self.config.max_decompressed_batch_bytes)? {
                let record = record?;
                if record.timestamp == target.timestamp {
                    return Ok(Some((record.timestamp, record.offset)));
                }
            }
            // LogAppendTime batches carry the time only in the header.
            return Ok(Some((target.timestamp, batch.base_offset())));
        }
        Ok(None)
    }

    /// Removes every offset >= `offset` (a follower diverged from its leader).
    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<u64, LogError> {
        if offset >= self.log_end_offset() {
            return Ok(0);
        }
        if offset <= self.log_start_offset {
            self.truncate_fully_and_start_at(offset, now_ms)?;
            return Ok(0);
        }
        // Compaction below `offset` stays valid; above it the offsets will
        // be written again.
        self.cleaner_checkpoint = self.cleaner_checkpoint.min(offset);
        // The first segment starts at or before the log start offset, which is
        // below `offset`: it survives, so the log keeps a segment.
        let mut removed = 0;
        let doomed: Vec<i64> = self.segments.range(offset..).map(|(base, _)| *base).collect();
        for base in doomed {
            if let Some(mut segment) = self.segments.remove(&base) {
                removed += segment.size_bytes();
                self.pending_deletes.extend(segment.mark_deleted()?);
            }
        }
        removed += self.active_mut().truncate_to(offset)?;
        let index_bytes = self.config.segment_index_bytes;
        self.active_mut().resize_indexes(index_bytes)?;
        self.reset_background_flushes();
        self.recovery_point = self.recovery_point.min(offset);
        self.leader_epochs.truncate_from_end(offset)?;
        self.rebuild_producer_state(offset)?;
        self.delete_pending_files()?;
        fsync_dir(&self.dir)?;
        Ok(removed)
    }

    /// Drops the whole log and starts empty at `offset` (a replica too far
    /// behind its leader).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        for base in bases {
            if let Some(mut segment) = self.segments.remove(&base) {
                self.pending_deletes.extend(segment.mark_deleted()?);
            }
        }
        let segment = Segment::create(
            &self.dir,
            offset,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
            now_ms,
        )?;
        self.segments.insert(offset, segment);
        self.log_start_offset = offset;
        self.cleaner_checkpoint = offset;
        self.reset_background_flushes();
        self.recovery_point = offset;
        self.leader_epochs.clear()?;
        self.producer_state.clear(offset);
        for snapshot in self.producer_state.snapshot_offsets()? {
            std::fs::remove_file(self.dir.join(format!("{snapshot:020}.snapshot")))?;
        }
        self.delete_pending_files()?;
        fsync_dir(&self.dir)?;
        Ok(())
    }

    /// DeleteRecords: moves the log start offset up (the caller checked it is
    /// at most the high watermark) and deletes segments wholly before it.
    pub fn delete_records_before(&mut self, offset: i64, now_ms: i64) -> Result<i64, LogError> {
        if offset > self.log_end_offset() {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset(),
            });
        }
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
            self.leader_epochs.truncate_from_start(offset)?;
        }
        self.delete_segments_where(now_ms, |_, next_base, _| next_base.is_some_and(|n| n <= offset))?;
        Ok(self.log_start_offset)
    }

    /// Applies `retention.ms` and `retention.bytes` (only when `cleanup.policy`
    /// includes `delete`); returns segments deleted.
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<usize, LogError> {
        if !self.config.cleanup_policy.deletes() {
            return Ok(0);
        }
        let retention_ms = self.config.retention_ms;
        let mut deleted = 0;
        if retention_ms >= 0 {
            deleted += self
                .delete_segments_where(now_ms, |segment, _, _| now_ms - segment.largest_timestamp() > retention_ms)?;
        }
        let retention_bytes = self.config.retention_bytes;
        if retention_bytes >= 0 {
            let mut excess = self.size_bytes() as i64 - retention_bytes;
            deleted += self.delete_segments_where(now_ms, |segment, _, _| {
                if excess - segment.size_bytes() as i64 >= 0 {
                    excess -= segment.size_bytes() as i64;
                    true
                } else {
                    false
                }
            })?;
        }
        Ok(deleted)
    }

    /// Deletes the oldest segments while `doomed(segment, next base, is_active)`
    /// holds. The active segment is rolled first when it must go, so a log
    /// always keeps one (empty) segment at its end offset.
    fn delete_segments_where(
        &mut self,
        now_ms: i64,
        mut doomed: impl FnMut(&Segment, Option<i64>, bool) -> bool,
    ) -> Result<usize, LogError> {
        let mut bases = Vec::new();
        let all: Vec<i64> = self.segments.keys().copied().collect();
        for (i, base) in all.iter().enumerate() {
            let segment = &self.segments[base];
            let next = all.get(i + 1).copied();
            let is_active = next.is_none();
            if is_active && segment.is_empty() {
                break;
            }
            if !doomed(segment, next, is_active) {
                break;
            }
            bases.push(*base);
        }
        if bases.is_empty() {
            return Ok(0);
        }
        if bases.len() == self.segments.len() {
            let end = self.log_end_offset();
            self.roll(end, now_ms)?;
        }
        for base in &bases {
            if let Some(mut segment) = self.segments.remove(base) {
                self.pending_deletes.extend(segment.mark_deleted()?);
            }
        }
        let first = *self.segments.keys().next().expect("a segment remains");
        if first > self.log_start_offset {
            self.log_start_offset = first;
            self.leader_epochs.truncate_from_start(first)?;
        }
        self.producer_state.delete_snapshots_before(self.log_start_offset)?;
        fsync_dir(&self.dir)?;
        Ok(bases.len())
    }

    /// Removes the `.deleted` files left by retention and truncation. Kept
    /// apart from the calls that rename them so a broker can run it off the
    /// request path (and after `file.delete.delay.ms`).
    pub fn delete_pending_files(&mut self) -> Result<usize, LogError> {
        let count = self.pending_deletes.len();
        for path in self.pending_deletes.drain(..) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(count)
    }

    /// The cleaner checkpoint: the first offset not yet compacted.
    pub fn cleaner_checkpoint(&self) -> i64 {
        self.cleaner_checkpoint
    }

    /// Restores the cleaner checkpoint (read from `cleaner-offset-checkpoint`).
    pub fn set_cleaner_checkpoint(&mut self, offset: i64) {
        self.cleaner_checkpoint = offset;
    }

    /// One compaction pass (`cleanup.policy=compact`) over the inactive
    /// segments below `upper_bound` (the high watermark); see [`crate::cleaner`].
    pub fn clean(&mut self, now_ms: i64, upper_bound: i64) -> Result<crate::cleaner::CleanReport, LogError> {
        crate::cleaner::clean(self, now_ms, upper_bound)
    }

    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }

    /// The first offset of an open transaction, which bounds the last stable offset.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producer_state.first_unstable_offset()
    }

    /// Applies appended batches to the producer state; an abort marker goes
    /// into the `.txnindex` of the segment that holds it.
    fn update_producer_state(&mut self, batches: &[ProducerBatch]) -> Result<(), LogError> {
        for batch in batches {
            let Some(completed) = self.producer_state.update(batch) else { continue };
            if !completed.aborted {
                continue;
            }
            // Kafka's LSO for the entry: the oldest other open transaction, or
            // just past this marker.
            let last_stable_offset = self
                .producer_state
                .first_unstable_offset()
                .unwrap_or(completed.last_offset + 1)
                .min(completed.last_offset + 1);
            let txn = AbortedTxn {
                producer_id: completed.producer_id,
                first_offset: completed.first_offset,
                last_offset: completed.last_offset,
                last_stable_offset,
            };
            if let Some((_, segment)) = self.segments.range_mut(..=completed.last_offset).next_back() {
                segment.index_aborted_txn(txn)?;
            }
        }
        Ok(())
    }

    /// The aborted transactions a READ_COMMITTED fetch of [fetch_offset,
    /// upper_bound) must report, from every segment the range touches.
    pub fn aborted_transactions(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let start = self.segments.range(..=fetch_offset).next_back().map_or(i64::MIN, |(base, _)| *base);
        self.segments
            .range(start..upper_bound.max(start))
            .flat_map(|(_, segment)| segment.txn_index().overlapping(fetch_offset, upper_bound).copied())
            .collect()
    }

    /// The last stable offset: no READ_COMMITTED consumer reads past an open
    /// transaction or the high watermark.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        self.first_unstable_offset().map_or(high_watermark, |first| first.min(high_watermark))
    }

    /// Loads the newest producer snapshot and replays the batches after it
    /// (all of them when there is none).
    /// Only snapshots at or below `replay_from` are used, so every batch
    /// after it (a recovered segment's markers, say) is replayed.
    fn rebuild_producer_state(&mut self, replay_from: i64) -> Result<(), LogError> {
        let end = self.log_end_offset();
        let snapshot_limit = replay_from.min(end);
        let mut offset =
            self.producer_state.load_latest_snapshot(self.log_start_offset, snapshot_limit)?.max(self.log_start_offset);
        while offset < end {
            let info = self.read(offset, 1 << 20, end, true)?;
            let Some(slice) = info.slice else { break };
            let mut progressed = false;
            for batch in RecordBatches::new(slice.read_to_bytes()?) {
                let Ok(batch) = batch else { break };
                if batch.last_offset() >= offset {
                    self.update_producer_state(&[ProducerBatch::from_batch(&batch, batch.base_offset())?])?;
                }
                offset = batch.next_offset();
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        Ok(())
    }

    /// Checks every segment's indexes against its data.
    pub fn verify_indexes(&self) -> Result<(), String> {
        for segment in self.segments.values() {
            segment.check_indexes().map_err(|e| format!("segment {}: {e}", segment.base_offset()))?;
        }
        Ok(())
    }

    /// Flushes and trims the active segment's indexes: the state a clean
    /// shutdown leaves, which lets the next open skip recovery.
    pub fn close(mut self, now_ms: i64) -> Result<(), LogError> {
        self.prepare_clean_shutdown(now_ms)
    }

    /// What [`PartitionLog::close`] does, for a log shared behind a lock:
    /// afterwards the files are in their clean-shutdown state (an append
    /// would still work, growing the trimmed indexes again).
    pub fn prepare_clean_shutdown(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.flush(now_ms)?;
        self.producer_state.take_snapshot()?;
        self.active_mut().seal()?;
        self.delete_pending_files()?;
        Ok(())
    }
}
