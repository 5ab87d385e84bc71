//! The segment set of one partition: segments by base offset, the last one
//! active (the only one taking appends), never empty once the log is open.
//!
//! It answers where an offset or a timestamp lives, decides and performs
//! rolls, cuts the set for truncation and retention, and holds the files
//! renamed to `.deleted` until [`SegmentSet::delete_pending_files`] removes
//! them off the append path. What the log keeps beside its segments
//! (recovery point, leader epochs, producer state) is `log.rs`'s; the
//! cleaner rewrites segments through this set too, so both depend on it and
//! it on neither.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use krabka_protocol::records::{RecordBatch, RecordBatches, RecordError};

use crate::config::LogConfig;
use crate::error::LogError;
use crate::fsutil::FlushJob;
use crate::index::AbortedTxn;
use crate::segment::{segment_path, FileSlice, Segment, TXN_INDEX_SUFFIX};

pub struct SegmentSet {
    dir: PathBuf,
    /// Boxed because a B-tree node holds eleven values however few are in
    /// use: with segments inline, the one node of a one-segment log took
    /// about 4 KiB, most of what a hosted partition cost.
    segments: BTreeMap<i64, Box<Segment>>,
    /// Files renamed to `.deleted` whose removal is still to come.
    pending_deletes: Vec<PathBuf>,
}

impl SegmentSet {
    /// An empty set in `dir`; the loader fills it before the log uses it.
    pub(crate) fn new(dir: &Path) -> Self {
        SegmentSet { dir: dir.to_path_buf(), segments: BTreeMap::new(), pending_deletes: Vec::new() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn len(&self) -> usize {
        self.segments.len()
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// The segment based at `base`, which the caller knows is in the set.
    pub fn segment(&self, base: i64) -> &Segment {
        &self.segments[&base]
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Segment> {
        self.segments.values().map(|segment| &**segment)
    }

    pub fn base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    pub fn first_base(&self) -> i64 {
        *self.segments.keys().next().expect("a log always has a segment")
    }

    pub fn active(&self) -> &Segment {
        self.segments.values().next_back().expect("a log always has an active segment")
    }

    pub(crate) fn active_mut(&mut self) -> &mut Segment {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }

    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|segment| segment.size_bytes()).sum()
    }

    pub(crate) fn insert(&mut self, segment: Segment) {
        self.segments.insert(segment.base_offset(), Box::new(segment));
    }

    /// Creates an empty segment at `base_offset` (the new active one).
    pub(crate) fn create(&mut self, base_offset: i64, config: &LogConfig, now_ms: i64) -> io::Result<()> {
        let segment =
            Segment::create(&self.dir, base_offset, config.segment_index_bytes, config.index_interval_bytes, now_ms)?;
        self.insert(segment);
        Ok(())
    }

    /// Takes a segment out of the set (to delete or replace it).
    pub(crate) fn take(&mut self, base: i64) -> Option<Segment> {
        self.segments.remove(&base).map(|segment| *segment)
    }

    /// Renames a segment taken out of the set to `.deleted`; its files go
    /// with the next [`SegmentSet::delete_pending_files`]. Returns its size.
    pub(crate) fn defer_delete(&mut self, mut segment: Segment) -> io::Result<u64> {
        let size = segment.size_bytes();
        self.pending_deletes.extend(segment.mark_deleted()?);
        Ok(size)
    }

    /// Removes the `.deleted` files left by retention, truncation and
    /// compaction.
    pub(crate) fn delete_pending_files(&mut self) -> io::Result<usize> {
        let count = self.pending_deletes.len();
        for path in self.pending_deletes.drain(..) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(count)
    }

    /// Whether an append of `incoming_bytes` ending at `last_offset` needs a
    /// new segment: `segment.bytes`, a full index, `segment.ms`, or offsets
    /// the active segment's index cannot hold.
    pub(crate) fn should_roll(
        &self,
        config: &LogConfig,
        incoming_bytes: u64,
        last_offset: i64,
        batch_timestamp: i64,
        now_ms: i64,
    ) -> bool {
        let active = self.active();
        // Even an empty segment rolls when the offsets would not fit in its
        // index (a follower's batch far past the base): Kafka's rule too.
        if !active.can_hold_offset(last_offset) {
            return true;
        }
        if active.is_empty() {
            return false;
        }
        active.size_bytes() + incoming_bytes > config.segment_bytes
            || active.indexes_full()
            || active.time_waited_for_roll_ms(now_ms, batch_timestamp) > config.segment_ms
    }

    /// The segments holding offsets at or past `recovery_point`: what a
    /// flush must sync.
    pub(crate) fn unflushed(&self, recovery_point: i64) -> impl Iterator<Item = &Segment> {
        self.iter().filter(move |s| s.next_offset() > recovery_point)
    }

    /// Adds the files of every unflushed segment to a background flush.
    pub(crate) fn add_unflushed_to(&self, job: &mut FlushJob, recovery_point: i64) {
        for segment in self.unflushed(recovery_point) {
            job.files.push(segment.log_file().clone());
            job.paths.push(segment.offset_index().path().to_path_buf());
            job.paths.push(segment.time_index().path().to_path_buf());
            if !segment.txn_index().entries().is_empty() {
                job.paths.push(segment_path(&self.dir, segment.base_offset(), TXN_INDEX_SUFFIX));
            }
        }
    }

    /// Plans a read from `offset` (inside the log): whole batches from one
    /// segment, none at or past `upper_bound` (at most the log end).
    pub(crate) fn read(
        &self,
        offset: i64,
        max_bytes: u32,
        upper_bound: i64,
        min_one_batch: bool,
    ) -> io::Result<Option<FileSlice>> {
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
                return Ok(Some(slice));
            }
        }
        Ok(None)
    }

    /// The first record with timestamp >= `target` at or past
    /// `log_start_offset`, as (timestamp, offset).
    pub(crate) fn offset_for_timestamp(
        &self,
        target: i64,
        log_start_offset: i64,
        max_decompressed_bytes: usize,
    ) -> Result<Option<(i64, i64)>, LogError> {
        // Usually the first candidate segment answers; a later one does when
        // compaction left only empty batch headers (which keep their max
        // timestamp) where the newer records were.
        for segment in self.segments.values().filter(|s| s.max_timestamp().timestamp >= target) {
            let found = offset_for_timestamp_in(segment, target, log_start_offset, max_decompressed_bytes)?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// The first record with the largest timestamp, as (timestamp, offset).
    pub(crate) fn max_timestamp_offset(&self, max_decompressed_bytes: usize) -> Result<Option<(i64, i64)>, LogError> {
        let best = self.segments.values().filter(|s| s.max_timestamp().timestamp >= 0).max_by_key(|s| {
            // max_by_key keeps the last maximum: prefer the earliest segment.
            (s.max_timestamp().timestamp, -s.base_offset())
        });
        let Some(segment) = best else { return Ok(None) };
        let target = segment.max_timestamp();
        let Some(header) = segment.find_batch(target.offset, 0)? else { return Ok(None) };
        let slice =
            FileSlice { file: segment.log_file().clone(), position: header.position, length: header.size_bytes };
        for batch in batches_in(&slice)? {
            if batch.max_timestamp() != target.timestamp {
                continue;
            }
            for record in batch.records(max_decompressed_bytes)? {
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

    /// The segment whose offsets include `offset` (the last based at or below it).
    pub(crate) fn holding_mut(&mut self, offset: i64) -> Option<&mut Segment> {
        self.segments.range_mut(..=offset).next_back().map(|(_, segment)| &mut **segment)
    }

    /// The aborted transactions overlapping [fetch_offset, upper_bound),
    /// from every segment the range touches.
    pub(crate) fn aborted_transactions(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let start = self.segments.range(..=fetch_offset).next_back().map_or(i64::MIN, |(base, _)| *base);
        self.segments
            .range(start..upper_bound.max(start))
            .flat_map(|(_, segment)| segment.txn_index().overlapping(fetch_offset, upper_bound).copied())
            .collect()
    }

    /// Removes every offset >= `offset`, which is above the first segment's
    /// base (so a segment survives, and becomes the active one); returns the
    /// bytes removed.
    pub(crate) fn truncate_to(&mut self, offset: i64, config: &LogConfig) -> io::Result<u64> {
        debug_assert!(offset > self.first_base(), "truncation to {offset} would empty the segment set");
        let mut removed = 0;
        let doomed: Vec<i64> = self.segments.range(offset..).map(|(base, _)| *base).collect();
        for base in doomed {
            if let Some(segment) = self.take(base) {
                removed += self.defer_delete(segment)?;
            }
        }
        removed += self.active_mut().truncate_to(offset)?;
        self.active_mut().resize_indexes(config.segment_index_bytes)?;
        Ok(removed)
    }

    /// Replaces every segment by one empty segment at `offset`.
    pub(crate) fn replace_all(&mut self, offset: i64, config: &LogConfig, now_ms: i64) -> io::Result<()> {
        for base in self.base_offsets() {
            if let Some(segment) = self.take(base) {
                self.defer_delete(segment)?;
            }
        }
        self.create(offset, config, now_ms)
    }

    /// The bases of the oldest segments while `doomed(segment, next base,
    /// is_active)` holds; an empty active segment is never doomed.
    pub(crate) fn oldest_while(&self, mut doomed: impl FnMut(&Segment, Option<i64>, bool) -> bool) -> Vec<i64> {
        let mut bases = Vec::new();
        let all = self.base_offsets();
        for (i, base) in all.iter().enumerate() {
            let segment = &self.segments[base];
            let next = all.get(i + 1).copied();
            let is_active = next.is_none();
            if (is_active && segment.is_empty()) || !doomed(segment, next, is_active) {
                break;
            }
            bases.push(*base);
        }
        bases
    }

    /// Checks every segment's indexes against its data.
    pub(crate) fn verify_indexes(&self) -> Result<(), String> {
        for segment in self.segments.values() {
            segment.check_indexes().map_err(|e| format!("segment {}: {e}", segment.base_offset()))?;
        }
        Ok(())
    }
}

fn offset_for_timestamp_in(
    segment: &Segment,
    target: i64,
    log_start_offset: i64,
    max_decompressed_bytes: usize,
) -> Result<Option<(i64, i64)>, LogError> {
    let from_offset = segment.time_index().lookup(target).map_or(segment.base_offset(), |e| e.offset);
    let start = segment.find_batch(from_offset, 0)?.map_or(0, |h| h.position);
    let mut position = start;
    while let Some(header) = segment.read_header(position)? {
        if header.max_timestamp >= target && header.last_offset >= log_start_offset {
            let slice = FileSlice { file: segment.log_file().clone(), position, length: header.size_bytes };
            for batch in batches_in(&slice)? {
                for record in batch.records(max_decompressed_bytes)? {
                    let record = record?;
                    if record.timestamp >= target && record.offset >= log_start_offset {
                        return Ok(Some((record.timestamp, record.offset)));
                    }
                }
            }
        }
        position += u64::from(header.size_bytes);
    }
    Ok(None)
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
