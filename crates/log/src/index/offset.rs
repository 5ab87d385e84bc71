//! `.index`: offset -> file position. Entries are (relative offset u32,
//! position u32), one per `index.interval.bytes` of appended data.

use std::io;

use super::sparse::{absolute_offset, relative_offset, Index, IndexEntry};

pub const OFFSET_INDEX_ENTRY_BYTES: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u32,
}

impl IndexEntry for OffsetPosition {
    const BYTES: usize = OFFSET_INDEX_ENTRY_BYTES;

    fn decode(raw: &[u8], base_offset: i64) -> Self {
        let position = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]);
        OffsetPosition { offset: absolute_offset(base_offset, &raw[..4]), position }
    }

    fn encode(&self, base_offset: i64, raw: &mut [u8]) {
        raw[..4].copy_from_slice(&relative_offset(base_offset, self.offset));
        raw[4..].copy_from_slice(&self.position.to_be_bytes());
    }

    fn offset(&self) -> i64 {
        self.offset
    }

    fn follows(&self, previous: &Self) -> bool {
        self.offset > previous.offset && self.position > previous.position
    }
}

pub type OffsetIndex = Index<OffsetPosition>;

impl Index<OffsetPosition> {
    /// Whether `offset` can be stored relative to the base: Kafka reads the
    /// relative offset as a signed 32-bit int, so at most i32::MAX.
    pub fn can_append_offset(&self, offset: i64) -> bool {
        offset.checked_sub(self.base_offset).is_some_and(|relative| (0..=i64::from(i32::MAX)).contains(&relative))
    }

    /// Adds an entry; offsets and positions must increase (an index whose
    /// entries say otherwise is corrupt: an error, not a panic).
    pub fn append(&mut self, offset: i64, position: u32) -> io::Result<()> {
        let entry = OffsetPosition { offset, position };
        let follows = self.last_entry().is_none_or(|last| entry.follows(&last));
        if !self.can_append_offset(offset) || !follows {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("index entry ({offset}, {position}) does not follow {:?}", self.last_entry()),
            ));
        }
        self.push(entry)
    }

    /// The entry with the largest offset <= `target`, or the segment start.
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        self.last_matching(|entry| entry.offset <= target)
            .map(|i| self.entry(i))
            .unwrap_or(OffsetPosition { offset: self.base_offset, position: 0 })
    }

    /// Drops entries pointing at or past `position` (log truncated there).
    pub fn truncate_to_position(&mut self, position: u32) {
        let keep = self.last_matching(|entry| entry.position < position);
        self.file.truncate_entries(keep.map_or(0, |i| i + 1));
    }

    /// Kafka's O(1) sanity check, run on every open: whole entries, the last
    /// one after the first and within the data (below `next_offset`, inside
    /// `log_size_bytes`). A preallocated tail of zeros left by a crash fails it.
    pub fn quick_check(&self, log_size_bytes: u64, next_offset: i64) -> Result<(), String> {
        if self.file.has_partial_entry() {
            return Err("index length is not a whole number of entries".into());
        }
        let Some((first, last)) = self.first_and_last() else { return Ok(()) };
        if !self.can_append_offset(last.offset)
            || last.offset >= next_offset.max(self.base_offset.saturating_add(1))
            || u64::from(last.position) >= log_size_bytes.max(1)
        {
            return Err(format!("last entry {last:?} is outside the segment"));
        }
        if self.entries() > 1 && !last.follows(&first) {
            return Err(format!("last entry {last:?} does not follow the first {first:?}"));
        }
        Ok(())
    }

    /// Entries must increase strictly and stay within the segment's size.
    pub fn check(&self, log_size_bytes: u64) -> Result<(), String> {
        let mut previous: Option<OffsetPosition> = None;
        for i in 0..self.entries() {
            let entry = self.entry(i);
            if u64::from(entry.position) >= log_size_bytes.max(1) {
                return Err(format!("entry {i} points at {} past the log's {log_size_bytes} bytes", entry.position));
            }
            if let Some(p) = previous {
                if !entry.follows(&p) {
                    return Err(format!("entry {i} ({entry:?}) does not follow {p:?}"));
                }
            } else if entry.offset < self.base_offset {
                return Err(format!("entry {i} is before the base offset"));
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
    fn append_lookup_truncate_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut index = OffsetIndex::open(&path, 100, Some(1024)).unwrap();
        for i in 0..10 {
            index.append(100 + i * 10, (i as u32 + 1) * 4096).unwrap();
        }
        assert_eq!(index.lookup(99), OffsetPosition { offset: 100, position: 0 });
        assert_eq!(index.lookup(100), OffsetPosition { offset: 100, position: 4096 });
        assert_eq!(index.lookup(135), OffsetPosition { offset: 130, position: 4 * 4096 });
        assert_eq!(index.lookup(10_000), OffsetPosition { offset: 190, position: 10 * 4096 });
        index.truncate_to(150);
        assert_eq!(index.entries(), 5);
        index.trim().unwrap();
        drop(index);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 5 * 8);
        let index = OffsetIndex::open(&path, 100, None).unwrap();
        assert_eq!(index.entries(), 5);
        assert_eq!(index.last_entry(), Some(OffsetPosition { offset: 140, position: 5 * 4096 }));
        assert!(index.check(6 * 4096).is_ok());
        assert!(index.check(4096).is_err());
    }

    #[test]
    fn entries_that_do_not_follow_or_overflow_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = OffsetIndex::open(&dir.path().join("0.index"), 1000, Some(1024)).unwrap();
        index.append(1010, 4096).unwrap();
        assert!(index.append(1010, 8192).is_err(), "same offset");
        assert!(index.append(1020, 4096).is_err(), "same position");
        assert!(index.append(999, 8192).is_err(), "below the base");
        // Kafka reads the relative offset as a signed int.
        assert!(index.can_append_offset(1000 + i64::from(i32::MAX)));
        assert!(!index.can_append_offset(1001 + i64::from(i32::MAX)));
        assert!(!index.can_append_offset(i64::MIN));
        assert!(index.append(1001 + i64::from(i32::MAX), 8192).is_err());
        assert_eq!(index.entries(), 1);
        // The quick check bounds the last entry by the segment's end offset too.
        assert!(index.quick_check(8192, 1011).is_ok());
        assert!(index.quick_check(8192, 1010).is_err(), "an entry for an offset the data does not reach");
        assert!(index.quick_check(4096, 1011).is_err(), "an entry past the data");
    }

    #[test]
    fn fills_up_at_the_preallocated_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = OffsetIndex::open(&dir.path().join("0.index"), 0, Some(8 * 3 + 5)).unwrap();
        for i in 0..3 {
            assert!(!index.is_full());
            index.append(i, i as u32 + 1).unwrap();
        }
        assert!(index.is_full());
    }
}
