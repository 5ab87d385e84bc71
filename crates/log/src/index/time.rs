//! `.timeindex`: timestamp -> offset. Entries are (timestamp i64, relative
//! offset u32), added only when the segment's max timestamp grows, so both
//! columns increase.

use std::io;

use super::sparse::{absolute_offset, relative_offset, Index, IndexEntry};

pub const TIME_INDEX_ENTRY_BYTES: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

impl IndexEntry for TimestampOffset {
    const BYTES: usize = TIME_INDEX_ENTRY_BYTES;

    fn decode(raw: &[u8], base_offset: i64) -> Self {
        let timestamp = i64::from_be_bytes([raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]]);
        TimestampOffset { timestamp, offset: absolute_offset(base_offset, &raw[8..12]) }
    }

    fn encode(&self, base_offset: i64, raw: &mut [u8]) {
        raw[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        raw[8..].copy_from_slice(&relative_offset(base_offset, self.offset));
    }

    fn offset(&self) -> i64 {
        self.offset
    }

    fn follows(&self, previous: &Self) -> bool {
        self.timestamp > previous.timestamp && self.offset > previous.offset
    }
}

pub type TimeIndex = Index<TimestampOffset>;

impl Index<TimestampOffset> {
    /// Adds an entry when `timestamp` is newer than the last one. A full
    /// index or an offset that does not move forward is skipped: the index
    /// is sparse, and the segment rolls when it fills.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) -> io::Result<()> {
        if self.is_full() {
            return Ok(());
        }
        self.append_if_newer(timestamp, offset)
    }

    /// Kafka's last entry when a segment stops taking appends (roll, close,
    /// recovery): the segment's largest timestamp, even past the size limit,
    /// so its max timestamp can be read without a scan.
    pub fn append_final(&mut self, timestamp: i64, offset: i64) -> io::Result<()> {
        if self.last_entry().is_some_and(|last| timestamp <= last.timestamp) || timestamp < 0 {
            return Ok(());
        }
        self.file.reserve_one()?;
        self.append_if_newer(timestamp, offset)
    }

    fn append_if_newer(&mut self, timestamp: i64, offset: i64) -> io::Result<()> {
        if offset < self.base_offset || offset - self.base_offset > i64::from(u32::MAX) {
            return Ok(());
        }
        if let Some(last) = self.last_entry() {
            if timestamp <= last.timestamp || offset < last.offset {
                return Ok(());
            }
            if offset == last.offset {
                // Same offset, newer timestamp (a later batch could not have
                // the same offset; this comes from re-indexing): keep the first.
                return Ok(());
            }
        }
        self.push(TimestampOffset { timestamp, offset })
    }

    /// The entry with the largest timestamp <= `target`; `None` when every
    /// entry is newer (the search then starts at the segment's beginning).
    pub fn lookup(&self, target: i64) -> Option<TimestampOffset> {
        self.last_matching(|entry| entry.timestamp <= target).map(|i| self.entry(i))
    }

    /// Kafka's O(1) sanity check: whole entries, the last one in the segment.
    pub fn quick_check(&self, next_offset: i64) -> Result<(), String> {
        if self.file.has_partial_entry() {
            return Err("time index length is not a whole number of entries".into());
        }
        let Some((first, last)) = self.first_and_last() else { return Ok(()) };
        if last.offset < self.base_offset || last.offset >= next_offset.max(self.base_offset.saturating_add(1)) {
            return Err(format!("last entry {last:?} is outside the segment"));
        }
        if self.entries() > 1 && last.timestamp <= first.timestamp {
            return Err(format!("last entry {last:?} does not follow the first {first:?}"));
        }
        Ok(())
    }

    /// Both columns must not decrease and offsets must sit in the segment.
    pub fn check(&self, next_offset: i64) -> Result<(), String> {
        let mut previous: Option<TimestampOffset> = None;
        for i in 0..self.entries() {
            let entry = self.entry(i);
            if entry.offset >= next_offset.max(self.base_offset.saturating_add(1)) {
                return Err(format!("entry {i} ({entry:?}) is past the segment's end offset {next_offset}"));
            }
            if let Some(p) = previous {
                if entry.timestamp < p.timestamp || entry.offset < p.offset {
                    return Err(format!("entry {i} ({entry:?}) goes back from {p:?}"));
                }
            }
            previous = Some(entry);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_newer_timestamps_are_indexed() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TimeIndex::open(&dir.path().join("0.timeindex"), 50, Some(12 * 100)).unwrap();
        index.maybe_append(1000, 50).unwrap();
        index.maybe_append(900, 55).unwrap(); // older: skipped
        index.maybe_append(1000, 57).unwrap(); // same: skipped
        index.maybe_append(2000, 60).unwrap();
        index.maybe_append(3000, 70).unwrap();
        assert_eq!(index.entries(), 3);
        assert_eq!(index.lookup(999), None);
        assert_eq!(index.lookup(1500), Some(TimestampOffset { timestamp: 1000, offset: 50 }));
        assert_eq!(index.lookup(i64::MAX), Some(TimestampOffset { timestamp: 3000, offset: 70 }));
        index.truncate_to(70);
        assert_eq!(index.entries(), 2);
        assert!(index.check(71).is_ok());
        index.trim().unwrap();
        assert_eq!(std::fs::metadata(dir.path().join("0.timeindex")).unwrap().len(), 24);
    }
}
