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
}

impl TransactionIndex {
    /// Loads the index if the file exists; a torn or unknown-version tail is
    /// dropped (recovery rebuilds the entries from the log's markers).
    pub fn open(path: &Path) -> io::Result<Self> {
        let raw = match std::fs::read(path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let entries = raw.chunks_exact(TXN_INDEX_ENTRY_BYTES).map_while(AbortedTxn::from_bytes).collect::<Vec<_>>();
        let mut index = TransactionIndex { path: path.to_path_buf(), entries };
        if index.entries.len() * TXN_INDEX_ENTRY_BYTES != raw.len() {
            index.rewrite()?;
        }
        Ok(index)
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
        if let Some(last) = self.entries.last() {
            assert!(txn.last_offset > last.last_offset, "aborted transactions are indexed in marker order");
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
        // A torn tail is dropped on open.
        let mut raw = std::fs::read(&path).unwrap();
        raw.extend_from_slice(&[0, 0, 1]);
        std::fs::write(&path, raw).unwrap();
        assert_eq!(TransactionIndex::open(&path).unwrap().entries(), &[a]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
    }
}
