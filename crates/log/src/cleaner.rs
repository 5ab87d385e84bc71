//! Log compaction (`cleanup.policy=compact`), after Kafka's `LogCleaner`.
//!
//! One pass over one log:
//! - The cleanable range is the inactive segments from the log start up to
//!   (not including) the first segment that is too new for
//!   `min.compaction.lag.ms`, reaches past the upper bound (the high
//!   watermark) or past the first unstable offset (an open transaction). The
//!   active segment is never cleaned.
//! - The pass is skipped when the dirty bytes (segments past the cleaner
//!   checkpoint) are below `min.cleanable.dirty.ratio` of the cleanable bytes.
//! - An offset map (key -> last offset) is built from the dirty part, then
//!   every cleanable segment is rewritten one-to-one keeping, per key, only
//!   the record at the mapped offset or later.
//!
//! Semantics chosen:
//! - Records without a key are dropped, as Kafka's cleaner does (it counts
//!   them as invalid: a compacted topic rejects them at produce).
//! - Tombstones (null value): the pre-KIP-534 rule on record timestamps. A
//!   tombstone is kept while its segment's largest timestamp is newer than
//!   `now - delete.retention.ms`, and removed by the first pass after that.
//!   Batches are not stamped with a delete horizon.
//! - Control batches (transaction markers) are kept whole, always (Kafka
//!   removes them once past the delete horizon; not done here).
//! - Transactional data batches are kept whole and stay out of the offset
//!   map: aborted records never shadow committed ones, at the price of not
//!   compacting transactional data (Kafka drops aborted records and compacts
//!   committed ones).
//! - A filtered batch keeps its base offset, last offset delta (so the
//!   producer's last sequence is unchanged), producer id/epoch/base sequence,
//!   partition leader epoch, codec and timestamp type, as Kafka's
//!   `MemoryRecords.filterTo` does. A batch left empty is dropped, unless it
//!   is the last batch the producer state knows for its producer id: then an
//!   empty batch header is kept (Kafka's `RETAIN_EMPTY`), so the producer's
//!   sequence survives a rebuild of producer state from the log.
//! - A segment left empty stays as an empty file (offsets never move).
//!
//! Crash safety: each segment is written to `<base>.{log,index,timeindex,
//! txnindex}.cleaned`, synced, renamed to `.swap` (indexes first, the log
//! last), the old segment renamed to `.deleted`, then `.swap` renamed to the
//! final names (indexes first, the log last), syncing the directory between
//! steps. [`recover_leftovers`] undoes or completes an interrupted swap.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use krabka_protocol::records::{
    NewHeader, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatchMut, TimestampType, BATCH_HEADER_BYTES,
};

use crate::fsutil::fsync_dir;
use crate::index::{OffsetIndex, TimeIndex, TransactionIndex};
use crate::log::{LogError, PartitionLog};
use crate::segment::{segment_path, Segment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX};

pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";

const SEGMENT_SUFFIXES: [&str; 4] = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX];

/// What a cleaner pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CleanReport {
    /// False when nothing was cleanable or the dirty ratio was too low.
    pub cleaned: bool,
    pub dirty_ratio: f64,
    /// Segments rewritten.
    pub segments: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_read: u64,
    pub records_removed: u64,
    /// The cleaner checkpoint after the pass.
    pub checkpoint: i64,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Parses `<20 digits><segment suffix><leftover suffix>`.
fn leftover_base(name: &str, leftover: &str) -> Option<(i64, &'static str)> {
    let stem = name.strip_suffix(leftover)?;
    SEGMENT_SUFFIXES.iter().find_map(|suffix| {
        let digits = stem.strip_suffix(suffix)?;
        (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok().map(|base| (base, *suffix)))
            .flatten()
    })
}

/// On open: deletes `.cleaned` files (a pass that never reached the swap) and
/// completes swaps. A `<base>.log.swap` means every new file of that segment
/// reached `.swap` (the log is renamed last), so they all replace the
/// originals; index `.swap` files without a log `.swap` are from a pass that
/// had not finished renaming, and are deleted. Returns the bases swapped in,
/// whose indexes the caller rebuilds.
pub fn recover_leftovers(dir: &Path) -> io::Result<Vec<i64>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut swaps: Vec<(i64, &'static str, PathBuf)> = Vec::new();
    let mut changed = false;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(CLEANED_SUFFIX) {
            std::fs::remove_file(entry.path())?;
            changed = true;
        } else if let Some((base, suffix)) = leftover_base(&name, SWAP_SUFFIX) {
            swaps.push((base, suffix, entry.path()));
        }
    }
    let mut swapped: Vec<i64> = swaps.iter().filter(|(_, s, _)| *s == LOG_SUFFIX).map(|(b, _, _)| *b).collect();
    swapped.sort_unstable();
    swapped.dedup();
    // Indexes before the log, as the cleaner renames them.
    swaps.sort_by_key(|(base, suffix, _)| (*base, *suffix == LOG_SUFFIX));
    for (base, suffix, path) in swaps {
        if swapped.binary_search(&base).is_ok() {
            tracing::warn!(dir = %dir.display(), base, "completing an interrupted compaction swap");
            std::fs::rename(&path, segment_path(dir, base, suffix))?;
        } else {
            std::fs::remove_file(&path)?;
        }
        changed = true;
    }
    if changed {
        fsync_dir(dir)?;
    }
    Ok(swapped)
}

/// Runs one pass; see the module documentation.
pub fn clean(log: &mut PartitionLog, now_ms: i64, upper_bound: i64) -> Result<CleanReport, LogError> {
    let config = log.config.clone();
    let mut report = CleanReport { checkpoint: log.cleaner_checkpoint, ..Default::default() };
    if !config.cleanup_policy.compacts() {
        return Ok(report);
    }
    let first_unstable = log.first_unstable_offset().unwrap_or(i64::MAX);
    let limit = upper_bound.min(first_unstable);
    let lag_horizon = now_ms.saturating_sub(config.min_compaction_lag_ms.max(0));
    let active_base = *log.segments.keys().next_back().expect("a log always has an active segment");
    let mut cleanable: Vec<i64> = Vec::new();
    for (&base, segment) in &log.segments {
        if base == active_base || segment.next_offset() > limit {
            break;
        }
        // The largest timestamp (or file time) must be past min.compaction.lag.ms.
        if config.min_compaction_lag_ms > 0 && segment.largest_timestamp() > lag_horizon {
            break;
        }
        cleanable.push(base);
    }
    let Some(&last_base) = cleanable.last() else { return Ok(report) };
    let clean_end = log.segments[&last_base].next_offset();
    let first_dirty = log.cleaner_checkpoint.max(log.log_start_offset);
    let (mut clean_bytes, mut dirty_bytes) = (0u64, 0u64);
    for base in &cleanable {
        let segment = &log.segments[base];
        if segment.next_offset() > first_dirty {
            dirty_bytes += segment.size_bytes();
        } else {
            clean_bytes += segment.size_bytes();
        }
    }
    let total = clean_bytes + dirty_bytes;
    report.dirty_ratio = if total == 0 { 0.0 } else { dirty_bytes as f64 / total as f64 };
    if dirty_bytes == 0 || report.dirty_ratio < config.min_cleanable_dirty_ratio {
        return Ok(report);
    }

    let max_decompressed = config.max_decompressed_batch_bytes;
    // The offset map, from the dirty part of the cleanable range.
    let mut offset_map: HashMap<Bytes, i64> = HashMap::new();
    for base in &cleanable {
        let segment = &log.segments[base];
        if segment.next_offset() <= first_dirty {
            continue;
        }
        for batch in segment_batches(segment)? {
            let batch = batch?;
            if batch.is_control() || batch.is_transactional() || batch.last_offset() < first_dirty {
                continue;
            }
            for record in batch.records(max_decompressed)? {
                let record = record?;
                if let (Some(key), true) = (record.key, record.offset >= first_dirty) {
                    offset_map.insert(key, record.offset);
                }
            }
        }
    }
    // The last batch of each producer keeps an (empty) header.
    let last_producer_offsets: HashMap<i64, i64> = log
        .producer_state()
        .producers()
        .iter()
        .filter_map(|(id, entry)| entry.batches.back().map(|b| (*id, b.last_offset)))
        .collect();
    let delete_horizon = now_ms.saturating_sub(config.delete_retention_ms);

    for base in cleanable {
        let segment = &log.segments[&base];
        report.bytes_before += segment.size_bytes();
        let retain_tombstones = segment.largest_timestamp() > delete_horizon;
        let mut writer =
            CleanedWriter::create(&log.dir, base, config.segment_index_bytes, config.index_interval_bytes)?;
        for batch in segment_batches(segment)? {
            let batch = batch?;
            let filtered = filter_batch(
                &batch,
                &offset_map,
                retain_tombstones,
                last_producer_offsets.get(&batch.producer_id()) == Some(&batch.last_offset()),
                max_decompressed,
                &mut report,
            )?;
            if let Some(bytes) = filtered {
                // The retained records' max timestamp (maxTimestamp, bytes 35..43).
                let max_timestamp = i64::from_be_bytes(bytes[35..43].try_into().expect("a batch header"));
                writer.append(&bytes, batch.last_offset(), max_timestamp)?;
            }
        }
        for txn in segment.txn_index().entries() {
            writer.txn_index.append(*txn)?;
        }
        report.bytes_after += writer.size_bytes;
        writer.finish()?;
        swap_in(log, base, now_ms)?;
        report.segments += 1;
    }
    log.delete_pending_files()?;
    log.cleaner_checkpoint = clean_end;
    report.checkpoint = clean_end;
    report.cleaned = true;
    Ok(report)
}

/// Every batch of a segment, read one at a time.
fn segment_batches(segment: &Segment) -> io::Result<impl Iterator<Item = Result<RecordBatch, LogError>> + '_> {
    let mut position = 0u64;
    Ok(std::iter::from_fn(move || {
        let header = match segment.read_header(position) {
            Ok(Some(header)) => header,
            Ok(None) => return None,
            Err(e) => return Some(Err(e.into())),
        };
        let mut buf = BytesMut::zeroed(header.size_bytes as usize);
        if let Err(e) = std::os::unix::fs::FileExt::read_exact_at(&**segment.log_file(), &mut buf, position) {
            return Some(Err(e.into()));
        }
        position += u64::from(header.size_bytes);
        Some(RecordBatch::new(buf.freeze()).map_err(LogError::from))
    }))
}

/// The batch as it should be written after cleaning, or `None` to drop it.
fn filter_batch(
    batch: &RecordBatch,
    offset_map: &HashMap<Bytes, i64>,
    retain_tombstones: bool,
    last_of_producer: bool,
    max_decompressed: usize,
    report: &mut CleanReport,
) -> Result<Option<Bytes>, LogError> {
    let count = batch.record_count().max(0) as u64;
    report.records_read += count;
    if batch.is_control() || batch.is_transactional() {
        return Ok(Some(batch.as_bytes().clone()));
    }
    let records = batch.records(max_decompressed)?.collect::<Result<Vec<_>, _>>()?;
    let kept: Vec<_> = records
        .iter()
        .filter(|record| {
            let Some(key) = &record.key else { return false };
            let redundant = offset_map.get(key).is_some_and(|&latest| record.offset < latest);
            let obsolete_tombstone = !retain_tombstones && record.value.is_none();
            !redundant && !obsolete_tombstone
        })
        .collect();
    report.records_removed += count - kept.len() as u64;
    if kept.len() == records.len() {
        return Ok(Some(batch.as_bytes().clone()));
    }
    if kept.is_empty() && !(batch.producer_id() >= 0 && last_of_producer) {
        return Ok(None);
    }
    let mut builder = RecordBatchBuilder::new(batch.compression()?)
        .with_base_offset(batch.base_offset())
        .with_partition_leader_epoch(batch.partition_leader_epoch())
        .with_producer(batch.producer_id(), batch.producer_epoch(), batch.base_sequence());
    if batch.timestamp_type() == TimestampType::LogAppendTime {
        builder = builder.with_log_append_time(batch.max_timestamp());
    }
    for record in &kept {
        let headers: Vec<_> = record.headers.iter().collect();
        let new_headers: Vec<NewHeader<'_>> =
            headers.iter().map(|h| NewHeader { key: &h.key, value: h.value.as_deref() }).collect();
        builder.append_with_offset(
            record.offset,
            &NewRecord {
                timestamp_ms: record.timestamp,
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                headers: &new_headers,
            },
        )?;
    }
    let rebuilt = builder.build()?;
    // Kafka keeps the original last offset (the producer's last sequence) and,
    // for an empty batch, the original max timestamp.
    let mut bytes = BytesMut::from(rebuilt.as_bytes().as_ref());
    bytes[23..27].copy_from_slice(&batch.last_offset_delta().to_be_bytes());
    if kept.is_empty() || batch.timestamp_type() == TimestampType::LogAppendTime {
        bytes[35..43].copy_from_slice(&batch.max_timestamp().to_be_bytes());
    }
    RecordBatchMut::new(&mut bytes[..])?.update_crc();
    debug_assert!(bytes.len() >= BATCH_HEADER_BYTES);
    Ok(Some(bytes.freeze()))
}

/// A cleaned segment being written under `.cleaned` names.
struct CleanedWriter {
    dir: PathBuf,
    base: i64,
    log: File,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    size_bytes: u64,
    bytes_since_last_index_entry: u64,
    index_interval_bytes: u64,
    max_timestamp: (i64, i64),
}

impl CleanedWriter {
    fn create(dir: &Path, base: i64, index_bytes: usize, index_interval_bytes: u64) -> io::Result<Self> {
        let path = |suffix| with_suffix(&segment_path(dir, base, suffix), CLEANED_SUFFIX);
        let log = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path(LOG_SUFFIX))?;
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
            match std::fs::remove_file(path(suffix)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(CleanedWriter {
            dir: dir.to_path_buf(),
            base,
            log,
            offset_index: OffsetIndex::open(&path(INDEX_SUFFIX), base, Some(index_bytes))?,
            time_index: TimeIndex::open(&path(TIME_INDEX_SUFFIX), base, Some(index_bytes))?,
            txn_index: TransactionIndex::open(&path(TXN_INDEX_SUFFIX))?,
            size_bytes: 0,
            bytes_since_last_index_entry: 0,
            index_interval_bytes,
            max_timestamp: (-1, base),
        })
    }

    /// Writes a batch and makes Kafka's index entries for it (segment.rs's rule).
    fn append(&mut self, bytes: &Bytes, last_offset: i64, max_timestamp: i64) -> io::Result<()> {
        self.log.write_all(bytes)?;
        if max_timestamp > self.max_timestamp.0 {
            self.max_timestamp = (max_timestamp, last_offset);
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            let position = u32::try_from(self.size_bytes)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment larger than 4 GiB"))?;
            if !self.offset_index.is_full() {
                self.offset_index.append(last_offset, position)?;
            }
            self.time_index.maybe_append(self.max_timestamp.0, self.max_timestamp.1)?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += bytes.len() as u64;
        self.size_bytes += bytes.len() as u64;
        Ok(())
    }

    /// Seals and syncs the files, then renames them to `.swap` (the log last).
    fn finish(mut self) -> io::Result<()> {
        self.time_index.append_final(self.max_timestamp.0, self.max_timestamp.1)?;
        self.offset_index.trim()?;
        self.time_index.trim()?;
        self.log.sync_all()?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.sync()?;
        drop(self.offset_index);
        drop(self.time_index);
        for suffix in SEGMENT_SUFFIXES {
            let cleaned = with_suffix(&segment_path(&self.dir, self.base, suffix), CLEANED_SUFFIX);
            if cleaned.exists() {
                std::fs::rename(&cleaned, with_suffix(&segment_path(&self.dir, self.base, suffix), SWAP_SUFFIX))?;
            }
        }
        fsync_dir(&self.dir)
    }
}

/// Replaces segment `base` by its `.swap` files: the old files go to
/// `.deleted`, the new ones take the final names (the log last).
fn swap_in(log: &mut PartitionLog, base: i64, now_ms: i64) -> Result<(), LogError> {
    let dir = log.dir.clone();
    if let Some(mut old) = log.segments.remove(&base) {
        let deleted = old.mark_deleted()?;
        log.pending_deletes.extend(deleted);
        // An empty txn index is not renamed by mark_deleted; remove its file.
        let txn = segment_path(&dir, base, TXN_INDEX_SUFFIX);
        match std::fs::remove_file(&txn) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    fsync_dir(&dir)?;
    for suffix in SEGMENT_SUFFIXES {
        let swap = with_suffix(&segment_path(&dir, base, suffix), SWAP_SUFFIX);
        if swap.exists() {
            std::fs::rename(&swap, segment_path(&dir, base, suffix))?;
        }
    }
    fsync_dir(&dir)?;
    let segment =
        Segment::open(&dir, base, log.config.segment_index_bytes, false, log.config.index_interval_bytes, now_ms)?;
    log.segments.insert(base, segment);
    Ok(())
}
