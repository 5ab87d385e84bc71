//! `.txnindex`: the aborted transactions whose marker sits in the segment,
//! so a READ_COMMITTED fetch can tell consumers which records to drop.
//! Entries are 34 bytes, as Kafka writes them: version i16 (0), producer id
//! i64, first offset i64, last offset (the marker) i64, last stable offset i64.
//! The file exists only for segments that hold an abort marker.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub const TXN_INDEX_ENTRY_BYTES: usize = 34;
const TXN_INDEX_VERSION: i16 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn to_bytes(self) -> [u8; TXN_INDEX_ENTRY_BYTES] {
        let mut raw = [0u8; TXN_INDEX_ENTRY_BYTES];
        raw[0..2].copy_from_slice(&TXN_INDEX_VERSION.to_be_bytes());
        raw[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        raw[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        raw[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        raw[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        raw
    }

    fn from_bytes(raw: &[u8]) -> Option<Self> {
        let i64_at = |at: usize| i64::from_be_bytes(raw[at..at + 8].try_into().expect("8 bytes"));
        (i16::from_be_bytes([raw[0], raw[1]]) == TXN_INDEX_VERSION).then(|| AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

pub struct TransactionIndex {
    path: PathBuf,
    /// Small (one entry per aborted transaction) and read on every
    /// READ_COMMITTED fetch over the segment: kept in memory.
    entries: Vec<AbortedTxn>,
    /// A torn or unknown-version tail found on open; `quick_check` reports
    /// it, so the segment is recovered and its markers re-indexed.
    problem: Option<String>,
}

impl TransactionIndex {
    /// Loads the index if the file exists, up to the first entry that is
    /// not one (a torn or unknown-version tail, which `quick_check` reports).
    pub fn open(path: &Path) -> io::Result<Self> {
        let raw = match std::fs::read(path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let entries = raw.chunks_exact(TXN_INDEX_ENTRY_BYTES).map_while(AbortedTxn::from_bytes).collect::<Vec<_>>();
        let read = entries.len() * TXN_INDEX_ENTRY_BYTES;
        let problem =
            (read != raw.len()).then(|| format!("no aborted-transaction entry at byte {read} of {}", raw.len()));
        Ok(TransactionIndex { path: path.to_path_buf(), entries, problem })
    }

    /// Kafka's sanity check of a `.txnindex`: every entry well formed, its
    /// marker inside the segment [base_offset, next_offset), after its
    /// transaction's first offset, in marker order.
    pub fn quick_check(&self, base_offset: i64, next_offset: i64) -> Result<(), String> {
        if let Some(problem) = &self.problem {
            return Err(problem.clone());
        }
        let mut previous: Option<&AbortedTxn> = None;
        for entry in &self.entries {
            if entry.last_offset < base_offset
                || entry.last_offset >= next_offset
                || entry.first_offset > entry.last_offset
            {
                return Err(format!(
                    "aborted transaction {entry:?} is outside the segment [{base_offset}, {next_offset})"
                ));
            }
            if previous.is_some_and(|p| entry.last_offset <= p.last_offset) {
                return Err(format!("aborted transaction {entry:?} is out of marker order"));
            }
            previous = Some(entry);
        }
        Ok(())
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    pub fn contains(&self, txn: &AbortedTxn) -> bool {
        self.entries.iter().any(|e| {
            e.producer_id == txn.producer_id && e.first_offset == txn.first_offset && e.last_offset == txn.last_offset
        })
    }

    pub fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        if self.entries.last().is_some_and(|last| txn.last_offset <= last.last_offset) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("aborted transaction {txn:?} indexed out of marker order"),
            ));
        }
        let mut file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        file.write_all(&txn.to_bytes())?;
        self.entries.push(txn);
        Ok(())
    }

    /// Aborted transactions that overlap [fetch_offset, upper_bound).
    pub fn overlapping(&self, fetch_offset: i64, upper_bound: i64) -> impl Iterator<Item = &AbortedTxn> {
        self.entries.iter().filter(move |e| e.last_offset >= fetch_offset && e.first_offset < upper_bound)
    }

    /// Drops entries whose marker is at or after `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.last_offset < offset);
        if self.entries.len() != before {
            self.rewrite()?;
        }
        Ok(())
    }

    /// Forgets every entry (recovery re-adds them from the markers).
    pub fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.problem = None;
        self.rewrite()
    }

    pub fn sync(&self) -> io::Result<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        std::fs::File::open(&self.path)?.sync_all()
    }

    fn rewrite(&mut self) -> io::Result<()> {
        if self.entries.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        let bytes: Vec<u8> = self.entries.iter().flat_map(|e| e.to_bytes()).collect();
        crate::fsutil::atomic_write(&self.path, &bytes)
    }

    pub fn rename(&mut self, to: &Path) -> io::Result<()> {
        if !self.entries.is_empty() {
            std::fs::rename(&self.path, to)?;
        }
        self.path = to.to_path_buf();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_reopen_overlap_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut index = TransactionIndex::open(&path).unwrap();
        assert!(!path.exists());
        let a = AbortedTxn { producer_id: 1, first_offset: 10, last_offset: 20, last_stable_offset: 21 };
        let b = AbortedTxn { producer_id: 2, first_offset: 15, last_offset: 30, last_stable_offset: 31 };
        index.append(a).unwrap();
        index.append(b).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 68);
        let mut reopened = TransactionIndex::open(&path).unwrap();
        assert_eq!(reopened.entries(), &[a, b]);
        assert_eq!(reopened.overlapping(21, 100).collect::<Vec<_>>(), vec![&b]);
        assert_eq!(reopened.overlapping(0, 12).collect::<Vec<_>>(), vec![&a]);
        reopened.truncate_to(25).unwrap();
        assert_eq!(TransactionIndex::open(&path).unwrap().entries(), &[a]);
        assert!(reopened.append(a).is_err(), "out of marker order: an error, not a panic");
        // A torn tail: the entries before it load, and the check reports it
        // (the log then recovers the segment, which resets the index).
        let mut raw = std::fs::read(&path).unwrap();
        raw.extend_from_slice(&[0, 0, 1]);
        std::fs::write(&path, raw).unwrap();
        let mut torn = TransactionIndex::open(&path).unwrap();
        assert_eq!(torn.entries(), &[a]);
        assert!(torn.quick_check(0, 100).is_err());
        torn.reset().unwrap();
        assert!(torn.quick_check(0, 100).is_ok());
        assert!(!path.exists());
    }

    #[test]
    fn the_quick_check_bounds_entries_by_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TransactionIndex::open(&dir.path().join("00000000000000000010.txnindex")).unwrap();
        index.append(AbortedTxn { producer_id: 1, first_offset: 5, last_offset: 20, last_stable_offset: 21 }).unwrap();
        assert!(index.quick_check(10, 21).is_ok());
        assert!(index.quick_check(10, 20).is_err(), "marker at or past the segment's end");
        assert!(index.quick_check(21, 30).is_err(), "marker before the segment's base");
        // An unknown version is not an entry.
        let mut raw = std::fs::read(dir.path().join("00000000000000000010.txnindex")).unwrap();
        raw[0] = 7;
        std::fs::write(dir.path().join("00000000000000000010.txnindex"), raw).unwrap();
        let reopened = TransactionIndex::open(&dir.path().join("00000000000000000010.txnindex")).unwrap();
        assert!(reopened.entries().is_empty());
        assert!(reopened.quick_check(10, 21).is_err());
    }
}
