//! One segment: `<base offset>.log` (record batches back to back, exactly as
//! Kafka writes them) with its `.index` and `.timeindex`.
//!
//! Index entries follow Kafka's rule: before appending a batch, if more than
//! `index.interval.bytes` were written since the last entry, index the batch
//! (its last offset -> its position) and the largest timestamp so far.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use krabka_protocol::records::{
    RecordBatch, RecordBatchHeader, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES, MIN_BATCH_LENGTH,
};
use tracing::warn;

use crate::index::{AbortedTxn, OffsetIndex, TimeIndex, TimestampOffset, TransactionIndex};

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
pub const DELETED_SUFFIX: &str = ".deleted";

/// `00000000000000000042` — Kafka's 20-digit, zero-padded base offset.
pub fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

pub fn segment_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{suffix}", file_stem(base_offset)))
}

/// What the header of a batch on disk says, read without the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub position: u64,
    pub base_offset: i64,
    pub last_offset: i64,
    pub size_bytes: u32,
    pub max_timestamp: i64,
    pub partition_leader_epoch: i32,
}

/// A byte range of a segment file to send as is (sendfile on plaintext).
#[derive(Clone, Debug)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub length: u32,
}

impl FileSlice {
    /// Copies the range into memory (TLS connections and tests; the
    /// plaintext fetch path sends the file range instead).
    pub fn read_to_bytes(&self) -> io::Result<Bytes> {
        let mut buf = BytesMut::zeroed(self.length as usize);
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(buf.freeze())
    }
}

/// A batch ready to be written: its header with the fields the log assigns
/// (base offset, leader epoch, maybe LogAppendTime and CRC) already patched,
/// and the rest of the batch as the producer sent it, never copied.
#[derive(Clone, Debug)]
pub struct PreparedBatch {
    pub header: RecordBatchHeader,
    pub rest: Bytes,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

impl PreparedBatch {
    /// A batch written as it is (offsets already assigned: replication, tests).
    pub fn unchanged(batch: &RecordBatch) -> Self {
        PreparedBatch {
            header: RecordBatchHeader::of(batch),
            rest: batch.as_bytes().slice(BATCH_HEADER_BYTES..),
            base_offset: batch.base_offset(),
            last_offset: batch.last_offset(),
            max_timestamp: batch.max_timestamp(),
        }
    }

    pub fn size_bytes(&self) -> u64 {
        (BATCH_HEADER_BYTES + self.rest.len()) as u64
    }
}

/// pwritev(2) until every part is written (short writes resume where they
/// stopped); parts are sent in chunks of IOV_MAX.
fn write_all_vectored_at(file: &File, mut parts: Vec<&[u8]>, mut offset: u64) -> io::Result<()> {
    const IOV_MAX: usize = 1024;
    parts.retain(|p| !p.is_empty());
    let mut first = 0;
    while first < parts.len() {
        let chunk = &parts[first..parts.len().min(first + IOV_MAX)];
        let iovecs: Vec<libc::iovec> =
            chunk.iter().map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() }).collect();
        let file_offset = libc::off_t::try_from(offset).map_err(|_| io::Error::other("file offset overflow"))?;
        // SAFETY: every iovec points into a live slice of `parts` for the call.
        let written =
            unsafe { libc::pwritev(file.as_raw_fd(), iovecs.as_ptr(), iovecs.len() as libc::c_int, file_offset) };
        if written < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if written == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        let mut written = written as usize;
        offset += written as u64;
        while written > 0 {
            if parts[first].len() <= written {
                written -= parts[first].len();
                first += 1;
            } else {
                parts[first] = &parts[first][written..];
                written = 0;
            }
        }
    }
    Ok(())
}

/// How a walk over batch headers ended.
enum Scan {
    Found(BatchHeader),
    /// The segment's data ended first.
    End,
    /// Bytes that are not a batch where one should be.
    Broken,
}

/// Why a segment's tail was cut during recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub position: u64,
    pub bytes_removed: u64,
    pub reason: String,
}

pub struct Segment {
    base_offset: i64,
    dir: PathBuf,
    log: Arc<File>,
    size_bytes: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    /// The offset after the last batch (equal to the base when empty).
    next_offset: i64,
    /// Largest timestamp in the segment and the last offset of its batch.
    max_timestamp: TimestampOffset,
    /// The first batch's max timestamp: the clock `segment.ms` rolls by.
    rolling_timestamp: Option<i64>,
    bytes_since_last_index_entry: u64,
    index_interval_bytes: u64,
    /// `segment.index.bytes`: how far the indexes may grow while active.
    max_index_bytes: usize,
    created_ms: i64,
    /// What the open-time scan of the tail found wrong (an index entry that
    /// does not lead to its batch, batches that stop short of the file's
    /// end): the segment needs recovery even after a clean shutdown.
    tail_problem: Option<String>,
}

impl Segment {
    /// Creates a new, empty segment (the log's active one).
    pub fn create(
        dir: &Path,
        base_offset: i64,
        max_index_bytes: usize,
        index_interval_bytes: u64,
        now_ms: i64,
    ) -> io::Result<Self> {
        let log_path = segment_path(dir, base_offset, LOG_SUFFIX);
        let log = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&log_path)?;
        Self::with_files(dir, base_offset, log, max_index_bytes, true, index_interval_bytes, now_ms)
    }

    /// Opens an existing segment: the next offset and max timestamp come from
    /// the last indexed position and a scan of the batch headers after it.
    /// Only the `active` segment's indexes may grow.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        max_index_bytes: usize,
        active: bool,
        index_interval_bytes: u64,
        now_ms: i64,
    ) -> io::Result<Self> {
        let log_path = segment_path(dir, base_offset, LOG_SUFFIX);
        let log = OpenOptions::new().read(true).write(true).open(&log_path)?;
        let created_ms = log
            .metadata()?
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(now_ms, |d| d.as_millis() as i64);
        let mut segment =
            Self::with_files(dir, base_offset, log, max_index_bytes, active, index_interval_bytes, created_ms)?;
        segment.load_tail_state()?;
        Ok(segment)
    }

    /// The segment over an open `.log`, its indexes opened beside it.
    fn with_files(
        dir: &Path,
        base_offset: i64,
        log: File,
        max_index_bytes: usize,
        active: bool,
        index_interval_bytes: u64,
        created_ms: i64,
    ) -> io::Result<Self> {
        let growth = active.then_some(max_index_bytes);
        let size_bytes = log.metadata()?.len();
        let offset_index = OffsetIndex::open(&segment_path(dir, base_offset, INDEX_SUFFIX), base_offset, growth)?;
        let time_index = TimeIndex::open(&segment_path(dir, base_offset, TIME_INDEX_SUFFIX), base_offset, growth)?;
        let txn_index = TransactionIndex::open(&segment_path(dir, base_offset, TXN_INDEX_SUFFIX))?;
        Ok(Segment {
            base_offset,
            dir: dir.to_path_buf(),
            log: Arc::new(log),
            size_bytes,
            offset_index,
            time_index,
            txn_index,
            next_offset: base_offset,
            max_timestamp: TimestampOffset { timestamp: -1, offset: base_offset },
            rolling_timestamp: None,
            bytes_since_last_index_entry: 0,
            index_interval_bytes,
            max_index_bytes,
            created_ms,
            tail_problem: None,
        })
    }

    /// Recomputes the next offset, max timestamp and first timestamp from the
    /// indexes and the batch headers past the last index entry. The scan
    /// also checks what a clean shutdown promises: the last index entry
    /// leads to a batch holding its offset, offsets increase, and the
    /// batches end exactly at the end of the file; anything else is noted
    /// in `tail_problem` for [`Segment::quick_check_indexes`].
    fn load_tail_state(&mut self) -> io::Result<()> {
        if let Some(last) = self.time_index.last_entry() {
            self.max_timestamp = last;
        }
        let last_entry = self.offset_index.last_entry().filter(|e| u64::from(e.position) < self.size_bytes);
        // A corrupt index may point past the data: scan from the start then
        // (the index check fails and recovery rebuilds it anyway).
        let start = last_entry.map_or(0, |e| u64::from(e.position));
        let mut position = start;
        let mut first = true;
        while let Some(header) = self.read_header(position)? {
            if first {
                if position == 0 {
                    self.rolling_timestamp = Some(header.max_timestamp);
                }
                // Kafka indexes an append's first batch under the append's
                // last offset, so the batch starts at or before the entry.
                if let Some(entry) = last_entry.filter(|e| header.base_offset > e.offset) {
                    self.tail_problem =
                        Some(format!("index entry {entry:?} points at a batch starting at {}", header.base_offset));
                }
            } else if header.base_offset < self.next_offset {
                self.tail_problem = Some(format!(
                    "batch at {position} starts at offset {} below the previous end {}",
                    header.base_offset, self.next_offset
                ));
                break;
            }
            first = false;
            self.next_offset = header.last_offset + 1;
            if header.max_timestamp > self.max_timestamp.timestamp {
                self.max_timestamp = TimestampOffset { timestamp: header.max_timestamp, offset: header.last_offset };
            }
            position += u64::from(header.size_bytes);
        }
        if position != self.size_bytes && self.tail_problem.is_none() {
            self.tail_problem = Some(format!("batches end at {position}, the file at {}", self.size_bytes));
        }
        if let Some(entry) = last_entry.filter(|e| e.offset >= self.next_offset) {
            self.tail_problem
                .get_or_insert_with(|| format!("index entry {entry:?} is past the segment's end {}", self.next_offset));
        }
        if self.rolling_timestamp.is_none() && self.size_bytes > 0 {
            self.rolling_timestamp = self.read_header(0)?.map(|h| h.max_timestamp);
        }
        self.bytes_since_last_index_entry = self.size_bytes.saturating_sub(start);
        Ok(())
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    pub fn max_timestamp(&self) -> TimestampOffset {
        self.max_timestamp
    }

    /// The timestamp `segment.ms` and `retention.ms` measure from: the
    /// largest record timestamp, or the file time when there is none.
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp.timestamp >= 0 {
            self.max_timestamp.timestamp
        } else {
            self.created_ms
        }
    }

    /// How long the segment has been open for `segment.ms`: measured from
    /// the first batch's timestamp (Kafka's rule) or the creation time.
    pub fn time_waited_for_roll_ms(&self, now_ms: i64, new_batch_timestamp: i64) -> i64 {
        match self.rolling_timestamp {
            Some(first) if first >= 0 => new_batch_timestamp - first,
            _ => now_ms - self.created_ms,
        }
    }

    pub fn indexes_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }

    pub fn can_hold_offset(&self, offset: i64) -> bool {
        self.offset_index.can_append_offset(offset)
    }

    pub fn log_file(&self) -> &Arc<File> {
        &self.log
    }

    pub fn log_path(&self) -> PathBuf {
        segment_path(&self.dir, self.base_offset, LOG_SUFFIX)
    }

    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }

    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }

    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }

    /// Records an aborted transaction whose marker is in this segment
    /// (once: replays after recovery may see the marker again).
    pub fn index_aborted_txn(&mut self, txn: AbortedTxn) -> io::Result<()> {
        if self.txn_index.contains(&txn) {
            return Ok(());
        }
        self.txn_index.append(txn)
    }

    /// Appends batches whose offsets were assigned, in one vectored write
    /// (each batch's patched header, then its untouched records), then makes
    /// the index entries Kafka would make. On a failed write the file is cut
    /// back, so a half-written batch never stays behind a good one.
    pub fn append(&mut self, batches: &[PreparedBatch]) -> io::Result<()> {
        let Some(last) = batches.last() else { return Ok(()) };
        if batches[0].base_offset < self.next_offset || !self.can_hold_offset(last.last_offset) {
            // The log checks both before it gets here; a segment state that
            // disagrees is corrupt, and an error beats a panic.
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "append of offsets {}..={} to the segment at {} ending at {}",
                    batches[0].base_offset, last.last_offset, self.base_offset, self.next_offset
                ),
            ));
        }
        let mut parts: Vec<&[u8]> = Vec::with_capacity(batches.len() * 2);
        for batch in batches {
            parts.push(batch.header.as_bytes());
            parts.push(&batch.rest);
        }
        // Index room first: a full disk must fail the append here, not fault
        // on a store into the index's sparse tail after the data is written.
        self.offset_index.reserve(batches.len())?;
        self.time_index.reserve(batches.len())?;
        if let Err(e) = write_all_vectored_at(&self.log, parts, self.size_bytes) {
            let _ = self.log.set_len(self.size_bytes);
            return Err(e);
        }
        let mut position = self.size_bytes;
        for batch in batches {
            if self.rolling_timestamp.is_none() {
                self.rolling_timestamp = Some(batch.max_timestamp);
            }
            self.index_batch(batch.last_offset, batch.max_timestamp, position, batch.size_bytes())?;
            position += batch.size_bytes();
        }
        self.size_bytes = position;
        self.next_offset = last.last_offset + 1;
        Ok(())
    }

    fn index_batch(&mut self, last_offset: i64, max_timestamp: i64, position: u64, size: u64) -> io::Result<()> {
        if max_timestamp > self.max_timestamp.timestamp {
            self.max_timestamp = TimestampOffset { timestamp: max_timestamp, offset: last_offset };
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            let position = u32::try_from(position)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment larger than 4 GiB"))?;
            if !self.offset_index.is_full() {
                self.offset_index.append(last_offset, position)?;
            }
            self.time_index.maybe_append(self.max_timestamp.timestamp, self.max_timestamp.offset)?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += size;
        Ok(())
    }

    /// Reads the header of the batch at `position`; `None` at the end or at a
    /// partial batch (a torn write), which only recovery may remove.
    pub fn read_header(&self, position: u64) -> io::Result<Option<BatchHeader>> {
        if position + BATCH_HEADER_BYTES as u64 > self.size_bytes {
            return Ok(None);
        }
        let mut raw = [0u8; BATCH_HEADER_BYTES];
        self.log.read_exact_at(&mut raw, position)?;
        let header = RecordBatchHeader::from_bytes(raw);
        let batch_length = header.batch_length();
        if batch_length < MIN_BATCH_LENGTH || !header.is_v2() {
            return Ok(None);
        }
        let size_bytes = batch_length as u64 + LOG_OVERHEAD_BYTES as u64;
        if position + size_bytes > self.size_bytes {
            return Ok(None);
        }
        // Bytes that are not a batch header (a wrong index position, a
        // corrupt file) must not yield offsets outside the segment.
        let base_offset = header.base_offset();
        let delta = header.last_offset_delta();
        let last_offset = match base_offset.checked_add(i64::from(delta)) {
            Some(last) if base_offset >= self.base_offset && delta >= 0 => last,
            _ => return Ok(None),
        };
        Ok(Some(BatchHeader {
            position,
            base_offset,
            last_offset,
            size_bytes: size_bytes as u32,
            max_timestamp: header.max_timestamp(),
            partition_leader_epoch: header.partition_leader_epoch(),
        }))
    }

    /// The first batch whose last offset is >= `offset`, starting from the
    /// index's hint; `None` when the segment ends before it. A hint that
    /// does not lead there (an index entry corrupted after a clean
    /// shutdown) is reported and the scan starts over from `start_position`,
    /// so a read never skips records because of the index.
    pub fn find_batch(&self, offset: i64, start_position: u64) -> io::Result<Option<BatchHeader>> {
        let hint = u64::from(self.offset_index.lookup(offset).position).max(start_position);
        match self.scan_for(offset, hint, hint > start_position)? {
            Scan::Found(header) => Ok(Some(header)),
            Scan::End => Ok(None),
            Scan::Broken if hint > start_position => {
                warn!(
                    path = %self.log_path().display(),
                    offset,
                    hint,
                    "the offset index does not lead to the batch; scanning the segment from its start"
                );
                match self.scan_for(offset, start_position, false)? {
                    Scan::Found(header) => Ok(Some(header)),
                    Scan::End | Scan::Broken => Ok(None),
                }
            }
            Scan::Broken => Ok(None),
        }
    }

    /// Walks batch headers from `position` to the first one holding an
    /// offset >= `offset`. With `from_index`, the first batch must start at
    /// or before `offset`, as one an index entry for it points at does.
    fn scan_for(&self, offset: i64, mut position: u64, from_index: bool) -> io::Result<Scan> {
        let mut first = true;
        while position < self.size_bytes {
            let Some(header) = self.read_header(position)? else { return Ok(Scan::Broken) };
            if first && from_index && header.base_offset > offset {
                return Ok(Scan::Broken);
            }
            first = false;
            if header.last_offset >= offset {
                return Ok(Scan::Found(header));
            }
            position += u64::from(header.size_bytes);
        }
        Ok(Scan::End)
    }

    /// Plans a read of up to `max_bytes` from the batch holding `offset`, not
    /// past `max_position`; with `min_one_batch`, the first batch is returned
    /// whole even when larger than `max_bytes` (KIP-74).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u32,
        max_position: u64,
        min_one_batch: bool,
    ) -> io::Result<Option<FileSlice>> {
        let Some(first) = self.find_batch(offset, 0)? else { return Ok(None) };
        let limit = max_position.min(self.size_bytes);
        if first.position >= limit {
            return Ok(None);
        }
        let wanted = if min_one_batch { max_bytes.max(first.size_bytes) } else { max_bytes };
        let length = (limit - first.position).min(u64::from(wanted)) as u32;
        if length == 0 {
            return Ok(None);
        }
        Ok(Some(FileSlice { file: self.log.clone(), position: first.position, length }))
    }

    /// Cuts the segment so that it ends before the batch holding `offset`.
    /// Returns the bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<u64> {
        let cut = match self.find_batch(offset, 0)? {
            Some(header) => header.position,
            None => return Ok(0),
        };
        self.truncate_at_position(cut)
    }

    fn truncate_at_position(&mut self, position: u64) -> io::Result<u64> {
        let removed = self.size_bytes - position;
        self.log.set_len(position)?;
        self.size_bytes = position;
        let position32 = u32::try_from(position).unwrap_or(u32::MAX);
        self.offset_index.truncate_to_position(position32);
        // Rebuild the time-index tail and cached state from what is left.
        let mut keep_until = self.base_offset;
        let mut scan = 0u64;
        self.next_offset = self.base_offset;
        self.max_timestamp = TimestampOffset { timestamp: -1, offset: self.base_offset };
        while let Some(header) = self.read_header(scan)? {
            keep_until = header.last_offset + 1;
            self.next_offset = keep_until;
            if header.max_timestamp > self.max_timestamp.timestamp {
                self.max_timestamp = TimestampOffset { timestamp: header.max_timestamp, offset: header.last_offset };
            }
            scan += u64::from(header.size_bytes);
        }
        self.time_index.truncate_to(keep_until);
        self.txn_index.truncate_to(keep_until)?;
        if self.size_bytes == 0 {
            self.rolling_timestamp = None;
        }
        self.bytes_since_last_index_entry =
            self.size_bytes - self.offset_index.last_entry().map_or(0, |e| u64::from(e.position));
        Ok(removed)
    }

    /// Recovery after an unclean shutdown: re-reads every batch, checks its
    /// length, magic, CRC and that offsets increase, rebuilds both indexes,
    /// and truncates a torn or corrupt tail. `on_batch` sees every valid batch
    /// (to rebuild producer state and the leader epoch cache).
    pub fn recover(&mut self, mut on_batch: impl FnMut(&RecordBatch)) -> io::Result<Option<Truncation>> {
        self.offset_index.reset()?;
        self.time_index.reset()?;
        // Room for every rebuilt entry; `seal` trims an inactive segment after.
        self.resize_indexes(self.max_index_bytes)?;
        // Markers are re-read by the producer-state replay, which re-indexes them.
        self.txn_index.reset()?;
        self.tail_problem = None;
        self.max_timestamp = TimestampOffset { timestamp: -1, offset: self.base_offset };
        self.rolling_timestamp = None;
        self.bytes_since_last_index_entry = 0;
        self.next_offset = self.base_offset;
        let file_size = self.log.metadata()?.len();
        self.size_bytes = file_size;
        let mut position = 0u64;
        let mut buffer = BytesMut::new();
        let mut problem = None;
        while position < file_size {
            let remaining = file_size - position;
            if remaining < BATCH_HEADER_BYTES as u64 {
                problem = Some(format!("{remaining} trailing bytes, less than a batch header"));
                break;
            }
            let mut raw = [0u8; BATCH_HEADER_BYTES];
            self.log.read_exact_at(&mut raw, position)?;
            let batch_length = RecordBatchHeader::from_bytes(raw).batch_length();
            if batch_length < MIN_BATCH_LENGTH {
                problem = Some(format!("invalid batch length {batch_length}"));
                break;
            }
            let size = batch_length as u64 + LOG_OVERHEAD_BYTES as u64;
            if size > remaining {
                problem = Some(format!("batch of {size} bytes but only {remaining} remain"));
                break;
            }
            buffer.clear();
            buffer.resize(size as usize, 0);
            self.log.read_exact_at(&mut buffer, position)?;
            let batch = match RecordBatch::new(buffer.split().freeze()) {
                Ok(batch) => batch,
                Err(e) => {
                    problem = Some(e.to_string());
                    break;
                }
            };
            if let Err(e) = batch.validate() {
                problem = Some(e.to_string());
                break;
            }
            if batch.base_offset() < self.next_offset || !self.can_hold_offset(batch.last_offset()) {
                problem = Some(format!("offset {} out of order after {}", batch.base_offset(), self.next_offset));
                break;
            }
            if self.rolling_timestamp.is_none() {
                self.rolling_timestamp = Some(batch.max_timestamp());
            }
            if let Err(e) = self.index_batch(batch.last_offset(), batch.max_timestamp(), position, size) {
                problem = Some(e.to_string());
                break;
            }
            on_batch(&batch);
            self.next_offset = batch.next_offset();
            position += size;
        }
        let truncation = match problem {
            Some(reason) => {
                let bytes_removed = file_size - position;
                self.log.set_len(position)?;
                self.size_bytes = position;
                Some(Truncation { position, bytes_removed, reason })
            }
            None => None,
        };
        Ok(truncation)
    }

    /// Kafka's O(1) index sanity check, run on every open.
    pub fn quick_check_indexes(&self) -> Result<(), String> {
        if let Some(problem) = &self.tail_problem {
            return Err(problem.clone());
        }
        self.offset_index.quick_check(self.size_bytes, self.next_offset)?;
        self.time_index.quick_check(self.next_offset)?;
        self.txn_index.quick_check(self.base_offset, self.next_offset)
    }

    /// Checks every index entry against the data (tests, verification):
    /// beyond their order, an offset-index entry (e, p) must point at a batch
    /// starting at or before e, and e must end a batch (Kafka indexes an
    /// append's first batch under the append's last offset); a time-index
    /// entry (t, o) must fall in a batch whose max timestamp is t.
    pub fn check_indexes(&self) -> Result<(), String> {
        self.offset_index.check(self.size_bytes)?;
        self.time_index.check(self.next_offset)?;
        let mut batches = Vec::new();
        let mut position = 0;
        while let Some(header) = self.read_header(position).map_err(|e| e.to_string())? {
            position += u64::from(header.size_bytes);
            batches.push(header);
        }
        for i in 0..self.offset_index.entries() {
            let entry = self.offset_index.entry(i);
            let at = batches.binary_search_by_key(&u64::from(entry.position), |b| b.position);
            match at.ok().map(|at| &batches[at]) {
                Some(batch) if batch.base_offset <= entry.offset => {}
                _ => return Err(format!("offset index entry {i} ({entry:?}) does not point at its batch")),
            }
            if batches.binary_search_by_key(&entry.offset, |b| b.last_offset).is_err() {
                return Err(format!("offset index entry {i} ({entry:?}) is not the last offset of a batch"));
            }
        }
        for i in 0..self.time_index.entries() {
            let entry = self.time_index.entry(i);
            let holder = batches.partition_point(|b| b.last_offset < entry.offset);
            match batches.get(holder) {
                Some(batch) if batch.base_offset <= entry.offset && batch.max_timestamp == entry.timestamp => {}
                _ => return Err(format!("time index entry {i} ({entry:?}) does not match its batch")),
            }
        }
        Ok(())
    }

    /// Makes appended data durable.
    pub fn flush(&self) -> io::Result<()> {
        self.log.sync_data()?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.sync()
    }

    /// When the segment stops taking appends (roll, close, after recovery):
    /// Kafka's final time-index entry with the largest timestamp, then both
    /// indexes trimmed to their entries.
    pub fn seal(&mut self) -> io::Result<()> {
        self.time_index.append_final(self.max_timestamp.timestamp, self.max_timestamp.offset)?;
        self.offset_index.trim()?;
        self.time_index.trim()
    }

    /// Re-extends the indexes for appends (the segment became active again).
    pub fn resize_indexes(&mut self, max_index_bytes: usize) -> io::Result<()> {
        self.max_index_bytes = max_index_bytes;
        self.offset_index.resize(max_index_bytes)?;
        self.time_index.resize(max_index_bytes)
    }

    /// Removes the `.txnindex` file and its entries.
    pub fn remove_txn_index(&mut self) -> io::Result<()> {
        self.txn_index.reset()
    }

    /// Renames every file of the segment to `*.deleted` (the first step of
    /// deletion, so a crash in between leaves files recovery knows to remove).
    pub fn mark_deleted(&mut self) -> io::Result<Vec<PathBuf>> {
        let mut renamed = Vec::new();
        let log_path = self.log_path();
        let deleted = with_suffix(&log_path, DELETED_SUFFIX);
        std::fs::rename(&log_path, &deleted)?;
        renamed.push(deleted);
        let index_deleted = with_suffix(self.offset_index.path(), DELETED_SUFFIX);
        self.offset_index.rename(&index_deleted)?;
        renamed.push(index_deleted);
        let time_deleted = with_suffix(self.time_index.path(), DELETED_SUFFIX);
        self.time_index.rename(&time_deleted)?;
        renamed.push(time_deleted);
        if !self.txn_index.entries().is_empty() {
            let txn_deleted = with_suffix(&segment_path(&self.dir, self.base_offset, TXN_INDEX_SUFFIX), DELETED_SUFFIX);
            self.txn_index.rename(&txn_deleted)?;
            renamed.push(txn_deleted);
        }
        Ok(renamed)
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}
