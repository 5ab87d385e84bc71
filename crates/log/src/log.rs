//! One partition's log: [`PartitionLog`], the API the broker calls.
//!
//! The work is done by the modules around it: `validate.rs` checks each
//! appended batch and patches its header, `segments.rs` holds the segments
//! (roll, lookups, truncation), `loader.rs` opens a directory and recovers
//! it, `cleaner.rs` compacts. What is left here is what ties them together:
//! the log start offset, the recovery point and its background flushes, the
//! leader epochs, the producer state and the cleaner's checkpoint, each moved
//! in step with the segments.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use krabka_protocol::records::RecordBatches;
use tracing::info;

use crate::checkpoint::TopicPartition;
use crate::cleaner::{CleanReport, CleanerInput};
use crate::config::{LogConfig, TimestampPolicy};
pub use crate::error::LogError;
use crate::fsutil::{flush_in_background, fsync_dir, FlushJob};
use crate::index::AbortedTxn;
use crate::leader_epoch::LeaderEpochCache;
pub use crate::loader::OpenReport;
use crate::loader::{Checkpoints, Loaded};
use crate::producer_state::{ProducerBatch, ProducerStateManager};
use crate::segment::{FileSlice, PreparedBatch, Segment};
use crate::segments::SegmentSet;
use crate::validate::{LeaderAppend, LeaderStamp};

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

pub struct PartitionLog {
    topic_partition: TopicPartition,
    config: LogConfig,
    segments: SegmentSet,
    log_start_offset: i64,
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
    /// The cleaner's progress: offsets below it were compacted (the broker
    /// persists it in the log dir's `cleaner-offset-checkpoint`).
    cleaner_checkpoint: i64,
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
        let from = Checkpoints { log_start_offset, recovery_point, clean_shutdown };
        let Loaded { topic_partition, segments, leader_epochs, log_start_offset, recovery_point, report, replay_from } =
            crate::loader::load(dir, &config, from, now_ms)?;
        let mut log = PartitionLog {
            topic_partition,
            config,
            segments,
            log_start_offset,
            recovery_point,
            flushed_to: Arc::new(AtomicI64::new(i64::MIN)),
            dir_needs_sync: false,
            leader_epochs,
            producer_state: ProducerStateManager::new(dir),
            unflushed_records: 0,
            last_flush_ms: now_ms,
            cleaner_checkpoint: 0,
        };
        log.rebuild_producer_state(replay_from)?;
        if report.recovered_segments > 0 {
            info!(partition = %log.topic_partition.dir_name(), ?report, "recovered log");
        }
        Ok((log, report))
    }

    pub fn dir(&self) -> &Path {
        self.segments.dir()
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

    pub fn log_end_offset(&self) -> i64 {
        self.segments.log_end_offset()
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
        self.segments.size_bytes()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.base_offsets()
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
        let first_offset = self.log_end_offset();
        let stamp = LeaderStamp { first_offset, leader_epoch, now_ms };
        let batches = match crate::validate::leader_append(records, stamp, &self.config, &self.producer_state)? {
            LeaderAppend::Batches(batches) => batches,
            // A retry: acknowledge the batch already in the log.
            LeaderAppend::Duplicate { first_offset, last_offset } => {
                return Ok(AppendInfo { first_offset, last_offset, log_append_time_ms: -1, record_count: 0, bytes: 0 });
            }
        };
        if self.leader_epochs.latest_epoch().is_none_or(|e| leader_epoch > e) {
            self.leader_epochs.assign(leader_epoch, first_offset)?;
        }
        debug_assert_eq!(
            batches.prepared[0].base_offset,
            self.log_end_offset(),
            "a leader append starts at the log end"
        );
        let bytes = self.append_prepared(&batches.prepared, now_ms)?;
        // The pair of append_prepared's check: a leader append fills the offsets it was given, no more.
        debug_assert_eq!(self.log_end_offset(), batches.last_offset + 1, "a leader append ends where its batches do");
        self.update_producer_state(&batches.producer_batches)?;
        self.after_append(batches.record_count, now_ms)?;
        Ok(AppendInfo {
            first_offset,
            last_offset: batches.last_offset,
            log_append_time_ms: if log_append_time { now_ms } else { -1 },
            record_count: batches.record_count,
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
            crate::validate::follower_batch(&batch, expected)?;
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
        debug_assert_eq!(self.log_end_offset(), expected, "a follower append ends where its batches do");
        self.update_producer_state(&producer_batches)?;
        self.after_append(record_count, now_ms)?;
        Ok(AppendInfo { first_offset, last_offset: expected - 1, log_append_time_ms: -1, record_count, bytes })
    }

    fn append_prepared(&mut self, prepared: &[PreparedBatch], now_ms: i64) -> Result<u64, LogError> {
        let Some(last) = prepared.last() else { return Ok(0) };
        // Offsets only grow: the batches continue the log and each other.
        debug_assert!(prepared[0].base_offset >= self.log_end_offset(), "an append below the log end offset");
        debug_assert!(
            prepared.windows(2).all(|pair| pair[0].last_offset < pair[1].base_offset)
                && prepared.iter().all(|batch| batch.base_offset <= batch.last_offset),
            "an append's offsets do not increase"
        );
        let bytes: u64 = prepared.iter().map(PreparedBatch::size_bytes).sum();
        let first_timestamp = prepared[0].max_timestamp;
        if self.segments.should_roll(&self.config, bytes, last.last_offset, first_timestamp, now_ms) {
            self.roll(prepared[0].base_offset, now_ms)?;
        }
        self.segments.active_mut().append(prepared)?;
        Ok(bytes)
    }

    /// Starts a new active segment at `base_offset` (the next offset): the
    /// old one's indexes are trimmed, and the old segment (with any other
    /// unflushed one), the roll's producer snapshot and the directory are
    /// fsynced in the background, as Kafka does; the recovery point moves to
    /// the new base when that is done.
    pub fn roll(&mut self, base_offset: i64, now_ms: i64) -> Result<(), LogError> {
        let base_offset = base_offset.max(self.log_end_offset());
        self.segments.active_mut().seal()?;
        // Kafka snapshots producer state at every roll, named by the new base,
        // and syncs it with the rolled segment in the background.
        let snapshot = self.producer_state.take_snapshot_unsynced()?;
        self.segments.create(base_offset, &self.config, now_ms)?;
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
        self.segments.add_unflushed_to(&mut job, recovery_point);
        // The directory last: the snapshot's rename.
        job.paths.push(snapshot);
        job.paths.push(self.dir().to_path_buf());
        flush_in_background(job);
    }

    /// fsyncs every segment holding offsets past the recovery point.
    pub fn flush(&mut self, now_ms: i64) -> Result<(), LogError> {
        for segment in self.segments.unflushed(self.recovery_point()) {
            segment.flush()?;
        }
        if self.dir_needs_sync {
            fsync_dir(self.dir())?;
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
        if offset < upper_bound {
            info.slice = self.segments.read(offset, max_bytes, upper_bound, min_one_batch)?;
        }
        Ok(info)
    }

    /// ListOffsets by timestamp: the first record with timestamp >= `target`,
    /// as (timestamp, offset); `None` when every record is older.
    pub fn offset_for_timestamp(&self, target: i64) -> Result<Option<(i64, i64)>, LogError> {
        self.segments.offset_for_timestamp(target, self.log_start_offset, self.config.max_decompressed_batch_bytes)
    }

    /// ListOffsets MAX_TIMESTAMP: the record with the largest timestamp (the
    /// first such record), as (timestamp, offset).
    pub fn max_timestamp_offset(&self) -> Result<Option<(i64, i64)>, LogError> {
        self.segments.max_timestamp_offset(self.config.max_decompressed_batch_bytes)
    }

    /// Removes every offset >= `offset` (a follower diverged from its leader).
    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<u64, LogError> {
        if offset >= self.log_end_offset() {
            // No record goes, but an epoch may: a broker that became leader
            // recorded its epoch's start at its log end, then lost the lead
            // before appending anything. Its new leader never had that
            // epoch, so as the last fetched epoch it would diverge on every
            // fetch (Kafka's truncateTo drops it the same way).
            self.leader_epochs.truncate_from_end(self.log_end_offset())?;
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
        let removed = self.segments.truncate_to(offset, &self.config)?;
        self.reset_background_flushes();
        self.recovery_point = self.recovery_point.min(offset);
        self.leader_epochs.truncate_from_end(offset)?;
        self.rebuild_producer_state(offset)?;
        self.delete_pending_files()?;
        fsync_dir(self.dir())?;
        Ok(removed)
    }

    /// Drops the whole log and starts empty at `offset` (a replica too far
    /// behind its leader).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
        self.segments.replace_all(offset, &self.config, now_ms)?;
        self.log_start_offset = offset;
        self.cleaner_checkpoint = offset;
        self.reset_background_flushes();
        self.recovery_point = offset;
        self.leader_epochs.clear()?;
        self.producer_state.clear(offset);
        for snapshot in self.producer_state.snapshot_offsets()? {
            std::fs::remove_file(self.dir().join(format!("{snapshot:020}.snapshot")))?;
        }
        self.delete_pending_files()?;
        fsync_dir(self.dir())?;
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
        doomed: impl FnMut(&Segment, Option<i64>, bool) -> bool,
    ) -> Result<usize, LogError> {
        let bases = self.segments.oldest_while(doomed);
        if bases.is_empty() {
            return Ok(0);
        }
        if bases.len() == self.segments.len() {
            let end = self.log_end_offset();
            self.roll(end, now_ms)?;
        }
        for base in &bases {
            if let Some(segment) = self.segments.take(*base) {
                self.segments.defer_delete(segment)?;
            }
        }
        let first = self.segments.first_base();
        if first > self.log_start_offset {
            self.log_start_offset = first;
            self.leader_epochs.truncate_from_start(first)?;
        }
        self.producer_state.delete_snapshots_before(self.log_start_offset)?;
        fsync_dir(self.dir())?;
        Ok(bases.len())
    }

    /// Removes the `.deleted` files left by retention and truncation. Kept
    /// apart from the calls that rename them so a broker can run it off the
    /// request path (and after `file.delete.delay.ms`).
    pub fn delete_pending_files(&mut self) -> Result<usize, LogError> {
        Ok(self.segments.delete_pending_files()?)
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
    pub fn clean(&mut self, now_ms: i64, upper_bound: i64) -> Result<CleanReport, LogError> {
        let input = CleanerInput {
            config: &self.config,
            producer_state: &self.producer_state,
            log_start_offset: self.log_start_offset,
            cleaner_checkpoint: self.cleaner_checkpoint,
        };
        let report = crate::cleaner::clean(&mut self.segments, input, now_ms, upper_bound)?;
        self.cleaner_checkpoint = report.checkpoint;
        Ok(report)
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
            if let Some(segment) = self.segments.holding_mut(completed.last_offset) {
                segment.index_aborted_txn(txn)?;
            }
        }
        Ok(())
    }

    /// The aborted transactions a READ_COMMITTED fetch of [fetch_offset,
    /// upper_bound) must report, from every segment the range touches.
    pub fn aborted_transactions(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        self.segments.aborted_transactions(fetch_offset, upper_bound)
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
        self.segments.verify_indexes()
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
        self.segments.active_mut().seal()?;
        self.delete_pending_files()?;
        Ok(())
    }
}
