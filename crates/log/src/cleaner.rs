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
//! - An offset map (key -> last offset) is built from the dirty part. It is
//!   bounded by `log.cleaner.dedupe.buffer.size`: each distinct key costs its
//!   length plus [`OFFSET_MAP_ENTRY_OVERHEAD_BYTES`]. When it fills, the pass
//!   stops mapping at the last whole batch and cleans only up to there;
//!   records past the map are kept as they are, and the checkpoint moves to
//!   the end of the map, so the next pass carries on (Kafka does the same).
//! - The segments from the log start to the end of the map are grouped, as
//!   Kafka's `groupSegmentsBySize` does (a group's logs within
//!   `segment.bytes`, its indexes within `segment.index.bytes`, its offsets
//!   within 2^31 of its base), and each group is rewritten into one segment
//!   named after its first, keeping per key only the record at the mapped
//!   offset or later.
//!
//! Semantics, as Kafka's cleaner:
//! - Records without a key are dropped (a compacted topic refuses them at
//!   produce, so they come only from before the topic was compacted).
//! - Delete horizons (KIP-534): a batch that keeps a tombstone (null value),
//!   or a transaction marker that may go, and has no delete horizon yet is
//!   rewritten with `delete horizon = now + delete.retention.ms` in its base
//!   timestamp field (attribute bit 6, record timestamp deltas re-encoded
//!   from it). A later pass at or after the horizon removes those tombstones
//!   and markers.
//! - Transactions: batches of aborted transactions (from the `.txnindex`)
//!   stay out of the offset map and are removed; committed transactional
//!   data is compacted like any other. A marker may go only once no data of
//!   its transaction remains before it: a COMMIT when the pass saw no batch
//!   of the transaction, an ABORT when it saw none of the aborted batches
//!   (they are removed first, and the marker's `.txnindex` entry with them).
//! - A filtered batch keeps its base offset, last offset delta (so the
//!   producer's last sequence is unchanged), producer id/epoch/base sequence,
//!   partition leader epoch, transactional and control flags, codec and
//!   timestamp type, as Kafka's `MemoryRecords.filterTo` does. A batch left
//!   empty is dropped, except that an empty header is kept (Kafka's
//!   `RETAIN_EMPTY`) for the last batch the producer state knows of a
//!   producer (its last data batch, or its last marker when it has none), so
//!   the producer's sequence and epoch survive a rebuild from the log, and
//!   for the last batch of each group, so the cleaned segment ends where the
//!   segments it replaces ended (crash recovery relies on it).
//! - Offsets never move; a cleaned segment may end up empty.
//!
//! Crash safety: a group is written to `<base>.{log,index,timeindex,
//! txnindex}.cleaned`, synced, renamed to `.swap` (indexes first, the log
//! last: the log's rename is the commit point), the old segments renamed to
//! `.deleted`, then the `.swap` files renamed to the final names (indexes
//! first, the log last), syncing the directory between steps.
//! [`recover_leftovers`] discards or completes an interrupted swap.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{
    control_type_id, ControlType, Record, RecordBatch, RecordBatchBuilder, RecordBatchHeader, RecordBatchMut,
    TimestampType, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES, MIN_BATCH_LENGTH,
};

use crate::config::LogConfig;
use crate::error::LogError;
use crate::fsutil::fsync_dir;
use crate::index::{AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex};
use crate::producer_state::ProducerStateManager;
use crate::segment::{segment_path, Segment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX};
use crate::segments::SegmentSet;

pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";

const SEGMENT_SUFFIXES: [&str; 4] = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX];

/// What one key costs the offset map besides its bytes: the boxed key's
/// pointer and length, the offset, the hash table's control byte and slack,
/// and the allocator's header.
pub const OFFSET_MAP_ENTRY_OVERHEAD_BYTES: usize = 48;

/// Control record types of transaction markers.
const CONTROL_ABORT: i16 = ControlType::Abort.id();
const CONTROL_COMMIT: i16 = ControlType::Commit.id();

/// What a cleaner pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CleanReport {
    /// False when nothing was cleanable or the dirty ratio was too low.
    pub cleaned: bool,
    pub dirty_ratio: f64,
    /// Segments rewritten (the old ones).
    pub segments: usize,
    /// Cleaned segments written (one per group).
    pub groups: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_read: u64,
    pub records_removed: u64,
    /// The offset map filled before the end of the cleanable range: the pass
    /// stopped there and the next one carries on from the checkpoint.
    pub map_full: bool,
    /// Distinct keys in the offset map.
    pub map_keys: usize,
    /// Bytes of `log.cleaner.dedupe.buffer.size` the map used.
    pub map_bytes: usize,
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

/// The offset after the last whole batch of a `.log` file (its base offset
/// when it holds none), from the batch headers alone.
fn log_file_next_offset(path: &Path, base: i64) -> io::Result<i64> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let (mut position, mut next) = (0u64, base);
    let mut raw = [0u8; BATCH_HEADER_BYTES];
    while position + BATCH_HEADER_BYTES as u64 <= size {
        file.read_exact_at(&mut raw, position)?;
        let header = RecordBatchHeader::from_bytes(raw);
        let batch_bytes = u64::from(header.batch_length().max(0) as u32) + LOG_OVERHEAD_BYTES as u64;
        if header.batch_length() < MIN_BATCH_LENGTH || position + batch_bytes > size {
            break;
        }
        next = header.base_offset().saturating_add(i64::from(header.last_offset_delta())).saturating_add(1);
        position += batch_bytes;
    }
    Ok(next)
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// On open: deletes `.cleaned` files (a pass that never reached the swap) and
/// completes swaps. A `<base>.log.swap` means every new file of that group
/// reached `.swap` (the log is renamed last), so it replaces every old
/// segment it covers: those with a base in `[base, end of the swap log)`
/// (a group's cleaned log ends where its last old segment ended) that are
/// still in place are deleted, then the `.swap` files take the final names.
/// Index `.swap` files without a log `.swap` are from a pass that had not
/// finished renaming, and are deleted. Returns the bases swapped in, whose
/// indexes the caller rebuilds.
pub fn recover_leftovers(dir: &Path) -> io::Result<Vec<i64>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut swaps: Vec<(i64, &'static str, PathBuf)> = Vec::new();
    let mut logs: Vec<i64> = Vec::new();
    let mut changed = false;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(CLEANED_SUFFIX) {
            std::fs::remove_file(entry.path())?;
            changed = true;
        } else if let Some((base, suffix)) = leftover_base(&name, SWAP_SUFFIX) {
            swaps.push((base, suffix, entry.path()));
        } else if let Some(base) = name.strip_suffix(LOG_SUFFIX).and_then(|stem| {
            (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse::<i64>().ok()).flatten()
        }) {
            logs.push(base);
        }
    }
    let mut swapped: Vec<i64> = swaps.iter().filter(|(_, s, _)| *s == LOG_SUFFIX).map(|(b, _, _)| *b).collect();
    swapped.sort_unstable();
    swapped.dedup();
    for &base in &swapped {
        let end = log_file_next_offset(&with_suffix(&segment_path(dir, base, LOG_SUFFIX), SWAP_SUFFIX), base)?;
        // Old segments still in place: the swap renamed them to `.deleted`
        // before any new file took a final name, so a `.log` in the range
        // is an old one (and so are its indexes).
        for &old in logs.iter().filter(|&&b| b >= base && (b < end || b == base)) {
            tracing::warn!(dir = %dir.display(), base, old, "removing a segment an interrupted compaction replaced");
            for suffix in SEGMENT_SUFFIXES {
                remove_if_exists(&segment_path(dir, old, suffix))?;
            }
        }
    }
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

/// The offset map: key -> the offset of its last record in the dirty range,
/// within a memory budget.
#[derive(Debug)]
struct OffsetMap {
    offsets: HashMap<Box<[u8]>, i64>,
    bytes_used: usize,
    capacity_bytes: usize,
    /// The last offset mapped (Kafka's `latestOffset`): records past it were
    /// not looked at and are kept as they are.
    latest_offset: i64,
}

impl OffsetMap {
    fn new(capacity_bytes: usize) -> Self {
        OffsetMap { offsets: HashMap::new(), bytes_used: 0, capacity_bytes, latest_offset: -1 }
    }

    /// Maps `key` to `offset`; false (and nothing changed) when a new key
    /// would not fit.
    fn put(&mut self, key: &[u8], offset: i64) -> bool {
        if let Some(slot) = self.offsets.get_mut(key) {
            *slot = offset;
            return true;
        }
        let cost = key.len() + OFFSET_MAP_ENTRY_OVERHEAD_BYTES;
        if self.bytes_used + cost > self.capacity_bytes {
            return false;
        }
        self.bytes_used += cost;
        self.offsets.insert(key.into(), offset);
        true
    }

    fn get(&self, key: &[u8]) -> Option<i64> {
        self.offsets.get(key).copied()
    }
}

/// The type of a control batch's marker (its first record's key), or `None`
/// for a control batch whose record was cleaned away.
fn control_type(batch: &RecordBatch, max_decompressed: usize) -> Result<Option<i16>, LogError> {
    let Some(record) = batch.records(max_decompressed)?.next() else { return Ok(None) };
    let key = record?.key.unwrap_or_default();
    match control_type_id(&key) {
        Some(id) => Ok(Some(id)),
        None => Err(LogError::InconsistentBatch("a control record without a marker key".into())),
    }
}

/// Which transactions the batches read so far belong to (Kafka's
/// `CleanedTransactionMetadata`): whether a data batch is aborted, and
/// whether a marker still has data of its transaction before it.
struct TxnTracker {
    /// Aborted transactions not reached yet, by first offset.
    pending_aborted: VecDeque<AbortedTxn>,
    /// Producer id -> its aborted transaction in progress, and whether a
    /// batch of it was read.
    ongoing_aborted: HashMap<i64, (AbortedTxn, bool)>,
    /// Producers with a committed transaction whose batches were read.
    ongoing_committed: HashSet<i64>,
}

impl TxnTracker {
    fn new(mut aborted: Vec<AbortedTxn>) -> Self {
        aborted.sort_by_key(|txn| txn.first_offset);
        TxnTracker {
            pending_aborted: aborted.into(),
            ongoing_aborted: HashMap::new(),
            ongoing_committed: HashSet::new(),
        }
    }

    fn reach(&mut self, offset: i64) {
        while self.pending_aborted.front().is_some_and(|txn| txn.first_offset <= offset) {
            let txn = self.pending_aborted.pop_front().expect("checked");
            self.ongoing_aborted.entry(txn.producer_id).or_insert((txn, false));
        }
    }

    /// A data batch: true when it belongs to an aborted transaction.
    fn on_data(&mut self, batch: &RecordBatch) -> bool {
        self.reach(batch.last_offset());
        if !batch.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&batch.producer_id()) {
            Some((_, seen)) => {
                *seen = true;
                true
            }
            None => {
                self.ongoing_committed.insert(batch.producer_id());
                false
            }
        }
    }

    /// A control batch: whether no data of its transaction was read before
    /// it (so it may go once past its delete horizon), and the `.txnindex`
    /// entry to keep for it (an abort marker whose data was still there).
    fn on_control(&mut self, batch: &RecordBatch, marker: Option<i16>) -> (bool, Option<AbortedTxn>) {
        self.reach(batch.last_offset());
        match marker {
            Some(CONTROL_ABORT) => match self.ongoing_aborted.remove(&batch.producer_id()) {
                Some((txn, true)) => (false, Some(txn)),
                _ => (true, None),
            },
            Some(CONTROL_COMMIT) => (!self.ongoing_committed.remove(&batch.producer_id()), None),
            Some(_) => (false, None),
            // An empty control batch: its transaction was cleaned already.
            None => (true, None),
        }
    }
}

/// The last record the producer state knows per producer: a batch holding it
/// is kept (possibly empty) so a rebuild from the log restores the producer.
enum LastRecord {
    Data { last_offset: i64 },
    Marker { epoch: i16 },
}

/// Everything a pass decides batches with.
struct PassContext {
    map: OffsetMap,
    last_records: HashMap<i64, LastRecord>,
    now_ms: i64,
    delete_retention_ms: i64,
    max_decompressed: usize,
}

impl PassContext {
    fn is_last_of_producer(&self, batch: &RecordBatch) -> bool {
        match self.last_records.get(&batch.producer_id()) {
            Some(LastRecord::Data { last_offset }) => batch.last_offset() == *last_offset,
            Some(LastRecord::Marker { epoch }) => batch.is_control() && batch.producer_epoch() == *epoch,
            None => false,
        }
    }
}

/// A group of consecutive segments cleaned into one.
struct Group {
    bases: Vec<i64>,
    /// The offset after the group's last segment.
    end_offset: i64,
}

/// Kafka's `groupSegmentsBySize` over `bases` (consecutive segments ending
/// before `end_offset`).
fn group_segments(segments: &SegmentSet, config: &LogConfig, bases: &[i64], end_offset: i64) -> Vec<Group> {
    let max_log_bytes = config.segment_bytes;
    let max_index_bytes = config.segment_index_bytes as u64;
    let sizes = |base: &i64| {
        let segment = segments.segment(*base);
        (segment.size_bytes(), segment.offset_index().size_bytes() as u64, segment.time_index().size_bytes() as u64)
    };
    // The largest offset a segment may hold: below the next one's base.
    let last_offset_bound = |i: usize| bases.get(i + 1).map_or(end_offset, |next| *next) - 1;
    let mut groups: Vec<Group> = Vec::new();
    let mut i = 0;
    while i < bases.len() {
        let first = bases[i];
        let (mut log_bytes, mut index_bytes, mut time_bytes) = sizes(&first);
        let mut group = vec![first];
        i += 1;
        while i < bases.len() {
            let (l, x, t) = sizes(&bases[i]);
            let fits = log_bytes + l <= max_log_bytes
                && index_bytes + x <= max_index_bytes
                && time_bytes + t <= max_index_bytes
                && (l == 0 || last_offset_bound(i) - first <= i64::from(i32::MAX));
            if !fits {
                break;
            }
            (log_bytes, index_bytes, time_bytes) = (log_bytes + l, index_bytes + x, time_bytes + t);
            group.push(bases[i]);
            i += 1;
        }
        let last = *group.last().expect("a group has a segment");
        groups.push(Group { bases: group, end_offset: segments.segment(last).next_offset() });
    }
    groups
}

/// What a pass reads of the log it cleans, besides the segments it
/// rewrites: the cleaner gets these rather than the log itself, so it needs
/// nothing of `log.rs`.
pub(crate) struct CleanerInput<'a> {
    pub config: &'a LogConfig,
    /// Open transactions bound the pass; each producer's last batch is kept.
    pub producer_state: &'a ProducerStateManager,
    pub log_start_offset: i64,
    /// Offsets below it were compacted by earlier passes.
    pub cleaner_checkpoint: i64,
}

/// Runs one pass; see the module documentation. The report's checkpoint is
/// the log's cleaner checkpoint after it.
pub(crate) fn clean(
    segments: &mut SegmentSet,
    log: CleanerInput<'_>,
    now_ms: i64,
    upper_bound: i64,
) -> Result<CleanReport, LogError> {
    let config = log.config;
    let mut report = CleanReport { checkpoint: log.cleaner_checkpoint, ..Default::default() };
    if !config.cleanup_policy.compacts() {
        return Ok(report);
    }
    let first_unstable = log.producer_state.first_unstable_offset().unwrap_or(i64::MAX);
    let cleanable = cleanable_segments(segments, config, upper_bound.min(first_unstable), now_ms);
    let Some(&last_base) = cleanable.last() else { return Ok(report) };
    let cleanable_end = segments.segment(last_base).next_offset();
    let first_dirty = log.cleaner_checkpoint.max(log.log_start_offset);
    let dirty_bytes;
    (dirty_bytes, report.dirty_ratio) = dirty_bytes_and_ratio(segments, &cleanable, first_dirty);
    if dirty_bytes == 0 || report.dirty_ratio < config.min_cleanable_dirty_ratio {
        return Ok(report);
    }

    // Every aborted transaction that may touch the range, whichever segment
    // holds its marker.
    let aborted: Vec<AbortedTxn> = segments
        .iter()
        .flat_map(|segment| segment.txn_index().entries().iter().copied())
        .filter(|txn| txn.first_offset < cleanable_end && txn.last_offset >= log.log_start_offset)
        .collect();
    let (map, map_full) = build_offset_map(segments, config, &cleanable, cleanable_end, first_dirty, &aborted)?;
    report.map_full = map_full;
    report.map_keys = map.offsets.len();
    report.map_bytes = map.bytes_used;
    let end_offset = map.latest_offset + 1;
    if end_offset <= first_dirty {
        tracing::warn!(
            dir = %segments.dir().display(),
            first_dirty,
            dedupe_buffer_bytes = config.cleaner_dedupe_buffer_bytes,
            "log.cleaner.dedupe.buffer.size cannot hold the keys of one batch: compaction makes no progress"
        );
        return Ok(report);
    }

    let context = PassContext {
        map,
        last_records: last_records(log.producer_state),
        now_ms,
        delete_retention_ms: config.delete_retention_ms,
        max_decompressed: config.max_decompressed_batch_bytes,
    };
    let to_clean: Vec<i64> = cleanable.iter().copied().filter(|&base| base < end_offset).collect();
    let groups = group_segments(segments, config, &to_clean, end_offset);
    let mut tracker = TxnTracker::new(aborted);
    for group in groups {
        clean_group(segments, config, &group, &context, &mut tracker, &mut report)?;
    }
    segments.delete_pending_files()?;
    report.checkpoint = end_offset;
    report.cleaned = true;
    Ok(report)
}

/// The inactive segments from the log start up to the first one that is too
/// new for `min.compaction.lag.ms` or reaches past `limit`.
fn cleanable_segments(segments: &SegmentSet, config: &LogConfig, limit: i64, now_ms: i64) -> Vec<i64> {
    let lag_horizon = now_ms.saturating_sub(config.min_compaction_lag_ms.max(0));
    let active_base = segments.active().base_offset();
    let mut cleanable: Vec<i64> = Vec::new();
    for segment in segments.iter() {
        let base = segment.base_offset();
        if base == active_base || segment.next_offset() > limit {
            break;
        }
        // The largest timestamp (or file time) must be past min.compaction.lag.ms.
        if config.min_compaction_lag_ms > 0 && segment.largest_timestamp() > lag_horizon {
            break;
        }
        cleanable.push(base);
    }
    cleanable
}

/// The bytes of the cleanable segments past the first dirty offset, and
/// their share of all cleanable bytes.
fn dirty_bytes_and_ratio(segments: &SegmentSet, cleanable: &[i64], first_dirty: i64) -> (u64, f64) {
    let (mut clean_bytes, mut dirty_bytes) = (0u64, 0u64);
    for base in cleanable {
        let segment = segments.segment(*base);
        if segment.next_offset() > first_dirty {
            dirty_bytes += segment.size_bytes();
        } else {
            clean_bytes += segment.size_bytes();
        }
    }
    let total = clean_bytes + dirty_bytes;
    (dirty_bytes, if total == 0 { 0.0 } else { dirty_bytes as f64 / total as f64 })
}

/// The offset map of the dirty part of the cleanable range, and whether it
/// filled before the range's end.
fn build_offset_map(
    segments: &SegmentSet,
    config: &LogConfig,
    cleanable: &[i64],
    cleanable_end: i64,
    first_dirty: i64,
    aborted: &[AbortedTxn],
) -> Result<(OffsetMap, bool), LogError> {
    let capacity = usize::try_from(config.cleaner_dedupe_buffer_bytes).unwrap_or(usize::MAX);
    let mut map = OffsetMap::new(capacity);
    let mut tracker = TxnTracker::new(aborted.to_vec());
    for (i, base) in cleanable.iter().enumerate() {
        let segment = segments.segment(*base);
        if segment.next_offset() <= first_dirty {
            continue;
        }
        for batch in segment_batches(segment)? {
            if !map_batch(&mut map, &mut tracker, &batch?, first_dirty, config.max_decompressed_batch_bytes)? {
                return Ok((map, true));
            }
        }
        // Offsets a segment skipped (compaction gaps) count as mapped.
        let next_base = cleanable.get(i + 1).copied().unwrap_or(cleanable_end);
        map.latest_offset = map.latest_offset.max(next_base - 1);
    }
    Ok((map, false))
}

/// Maps the keys of a dirty batch that is not aborted data; false when the
/// map filled on the way (the batch then counts as not mapped).
fn map_batch(
    map: &mut OffsetMap,
    tracker: &mut TxnTracker,
    batch: &RecordBatch,
    first_dirty: i64,
    max_decompressed: usize,
) -> Result<bool, LogError> {
    if batch.is_control() {
        tracker.on_control(batch, control_type(batch, max_decompressed)?);
    } else if !tracker.on_data(batch) && batch.last_offset() >= first_dirty {
        for record in batch.records(max_decompressed)? {
            let record = record?;
            if let (Some(key), true) = (record.key, record.offset >= first_dirty) {
                if !map.put(&key, record.offset) {
                    return Ok(false);
                }
            }
        }
    }
    if batch.last_offset() >= first_dirty {
        map.latest_offset = map.latest_offset.max(batch.last_offset());
    }
    Ok(true)
}

/// Each producer's last record, whose batch is kept.
fn last_records(producer_state: &ProducerStateManager) -> HashMap<i64, LastRecord> {
    producer_state
        .producers()
        .iter()
        .map(|(id, entry)| {
            let last = match entry.batches.back() {
                Some(batch) => LastRecord::Data { last_offset: batch.last_offset },
                None => LastRecord::Marker { epoch: entry.epoch },
            };
            (*id, last)
        })
        .collect()
}

/// Rewrites one group of segments into one cleaned segment and swaps it in.
fn clean_group(
    segments: &mut SegmentSet,
    config: &LogConfig,
    group: &Group,
    context: &PassContext,
    tracker: &mut TxnTracker,
    report: &mut CleanReport,
) -> Result<(), LogError> {
    let base = group.bases[0];
    let mut writer =
        CleanedWriter::create(segments.dir(), base, config.segment_index_bytes, config.index_interval_bytes)?;
    let mut modified = None;
    for old_base in &group.bases {
        let segment = segments.segment(*old_base);
        report.bytes_before += segment.size_bytes();
        modified = segment.log_file().metadata()?.modified().ok();
        for batch in segment_batches(segment)? {
            let batch = batch?;
            let (discardable, txn_entry) = if batch.is_control() {
                tracker.on_control(&batch, control_type(&batch, context.max_decompressed)?)
            } else {
                (tracker.on_data(&batch), None)
            };
            if let Some(txn) = txn_entry {
                writer.txn_index.append(txn)?;
            }
            let retain_empty = (batch.producer_id() >= 0 && context.is_last_of_producer(&batch))
                || batch.next_offset() == group.end_offset;
            if let Some(kept) = filter_batch(&batch, context, discardable, retain_empty, report)? {
                writer.append(kept.as_bytes(), batch.last_offset(), kept.max_timestamp())?;
            }
        }
    }
    report.bytes_after += writer.size_bytes;
    // The cleaned segment keeps the replaced segments' file time (retention
    // falls back to it when no record has a timestamp).
    if let Some(modified) = modified {
        writer.log.set_modified(modified)?;
    }
    writer.finish()?;
    swap_in(segments, config, group, context.now_ms)?;
    report.segments += group.bases.len();
    report.groups += 1;
    Ok(())
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
        if let Err(e) = segment.log_file().read_exact_at(&mut buf, position) {
            return Some(Err(e.into()));
        }
        position += u64::from(header.size_bytes);
        Some(RecordBatch::new(buf.freeze()).map_err(LogError::from))
    }))
}

/// The batch as it should be written after cleaning, or `None` to drop it.
/// `discardable`: the transaction tracker says the batch's records may go
/// (aborted data; a marker with no data of its transaction before it).
fn filter_batch(
    batch: &RecordBatch,
    context: &PassContext,
    discardable: bool,
    retain_empty: bool,
    report: &mut CleanReport,
) -> Result<Option<RecordBatch>, LogError> {
    let count = batch.record_count().max(0) as u64;
    report.records_read += count;
    let horizon = batch.delete_horizon_ms();
    let horizon_passed = horizon.is_some_and(|h| h <= context.now_ms);
    let discard_records = if batch.is_control() { discardable && horizon_passed } else { discardable };
    let records = if discard_records {
        Vec::new()
    } else {
        batch.records(context.max_decompressed)?.collect::<Result<Vec<_>, _>>()?
    };
    let keep = |record: &Record| {
        if batch.is_control() || record.offset > context.map.latest_offset {
            return true;
        }
        let Some(key) = &record.key else { return false };
        let latest = context.map.get(key).is_none_or(|latest| record.offset >= latest);
        latest && (record.value.is_some() || !horizon_passed)
    };
    let kept: Vec<&Record> = records.iter().filter(|r| keep(r)).collect();
    report.records_removed += count - kept.len() as u64;
    if kept.is_empty() {
        return retain_empty.then(|| empty_header(batch)).transpose();
    }
    let has_tombstones = !batch.is_control() && kept.iter().any(|r| r.value.is_none());
    let marker_may_go = batch.is_control() && discardable;
    let set_horizon = horizon.is_none() && (has_tombstones || marker_may_go);
    if kept.len() == records.len() && !set_horizon {
        return Ok(Some(batch.clone()));
    }
    let horizon = if set_horizon { Some(context.now_ms.saturating_add(context.delete_retention_ms)) } else { horizon };
    rebuild(batch, &kept, horizon).map(Some)
}

/// The header fields a cleaned batch keeps from the original.
fn builder_like(batch: &RecordBatch, compression: Compression) -> RecordBatchBuilder {
    let builder = RecordBatchBuilder::like(batch, compression);
    match batch.timestamp_type() {
        TimestampType::LogAppendTime => builder.with_log_append_time(batch.max_timestamp()),
        TimestampType::CreateTime => builder,
    }
}

/// Kafka keeps the original last offset (the producer's last sequence).
fn finish_with_last_offset(
    batch: &RecordBatch,
    rebuilt: RecordBatch,
    max_timestamp: Option<i64>,
) -> Result<RecordBatch, LogError> {
    let mut bytes = BytesMut::from(rebuilt.as_bytes().as_ref());
    let mut patch = RecordBatchMut::new(&mut bytes[..])?;
    patch.set_last_offset_delta(batch.last_offset_delta());
    if let Some(max_timestamp) = max_timestamp {
        patch.set_max_timestamp(max_timestamp);
    }
    Ok(RecordBatch::new(bytes.freeze())?)
}

/// The batch with only `kept` records, stamped with `delete_horizon_ms`.
fn rebuild(batch: &RecordBatch, kept: &[&Record], delete_horizon_ms: Option<i64>) -> Result<RecordBatch, LogError> {
    let mut builder = builder_like(batch, batch.compression()?);
    if let Some(horizon) = delete_horizon_ms {
        builder = builder.with_delete_horizon_ms(horizon);
    }
    for record in kept {
        builder.append_record(record)?;
    }
    let rebuilt = builder.build()?;
    finish_with_last_offset(batch, rebuilt, None)
}

/// Kafka's empty batch header: no records, uncompressed, the original
/// offsets, producer fields, flags and max timestamp.
fn empty_header(batch: &RecordBatch) -> Result<RecordBatch, LogError> {
    let rebuilt = builder_like(batch, Compression::None).build()?;
    debug_assert_eq!(rebuilt.size_bytes(), BATCH_HEADER_BYTES);
    finish_with_last_offset(batch, rebuilt, Some(batch.max_timestamp()))
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

/// Replaces a group's segments by the `.swap` files of its cleaned segment:
/// the old files go to `.deleted` (the first segment's transaction index is
/// removed before its log, so a `<base>.txnindex` left beside a missing
/// `<base>.log` is always the new one), then the new ones take the final
/// names (the log last).
fn swap_in(segments: &mut SegmentSet, config: &LogConfig, group: &Group, now_ms: i64) -> Result<(), LogError> {
    let dir = segments.dir().to_path_buf();
    let base = group.bases[0];
    for old_base in &group.bases {
        if let Some(mut old) = segments.take(*old_base) {
            old.remove_txn_index()?;
            segments.defer_delete(old)?;
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
    let segment = Segment::open(&dir, base, config.segment_index_bytes, false, config.index_interval_bytes, now_ms)?;
    segments.insert(segment);
    Ok(())
}

#[cfg(test)]
mod tests {
    use krabka_protocol::records::NewRecord;
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The `.swap` log scan of crash recovery reads untrusted bytes: it
        /// never panics.
        #[test]
        fn swap_log_scan_survives_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400), base in 0i64..1000) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("swap.log");
            std::fs::write(&path, &bytes).unwrap();
            let _ = log_file_next_offset(&path, base).unwrap();
        }

        /// A control record's key is untrusted too.
        #[test]
        fn control_type_reads_any_key(key in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut builder = RecordBatchBuilder::new(Compression::None).with_producer(1, 0, -1).with_control(true);
            builder.append(&NewRecord { timestamp_ms: 0, key: Some(&key), value: None, headers: &[] }).unwrap();
            let batch = builder.build().unwrap();
            match control_type(&batch, 1 << 20) {
                Ok(Some(kind)) => prop_assert_eq!(kind, i16::from_be_bytes([key[2], key[3]])),
                Ok(None) => prop_assert!(false, "a record was there"),
                Err(_) => prop_assert!(key.len() < 4),
            }
        }
    }

    #[test]
    fn swap_log_scan_finds_the_last_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swap.log");
        let mut bytes = Vec::new();
        for base in [10i64, 15] {
            let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(base);
            for _ in 0..3 {
                builder.append(&NewRecord { timestamp_ms: 0, key: Some(b"k"), value: None, headers: &[] }).unwrap();
            }
            bytes.extend_from_slice(builder.build().unwrap().as_bytes());
        }
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert_eq!(log_file_next_offset(&path, 10).unwrap(), 13, "a torn last batch does not count");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(log_file_next_offset(&path, 10).unwrap(), 18);
    }

    #[test]
    fn offset_map_charges_new_keys_only() {
        let mut map = OffsetMap::new(2 * (3 + OFFSET_MAP_ENTRY_OVERHEAD_BYTES));
        assert!(map.put(b"abc", 1) && map.put(b"def", 2) && map.put(b"abc", 3));
        assert!(!map.put(b"ghi", 4));
        assert_eq!((map.get(b"abc"), map.get(b"ghi")), (Some(3), None));
    }
}
