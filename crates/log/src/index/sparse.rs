//! [`Index`]: the one type under the offset and time indexes, over the
//! memory-mapped file of `file.rs`. An [`IndexEntry`] says how wide an entry
//! is and how it is encoded; `offset.rs` and `time.rs` add the rules for
//! adding and checking their own entries.

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::path::Path;

use super::file::IndexFile;

/// The widest entry an [`Index`] stores (the time index's 12 bytes fit).
const MAX_ENTRY_BYTES: usize = 16;

/// One entry of a fixed-width index, and its encoding in the file. Offsets
/// are stored relative to the segment's base offset, so both directions
/// take it.
pub trait IndexEntry: Copy + PartialEq + fmt::Debug {
    /// The entry's width in the file, at most 16 bytes.
    const BYTES: usize;

    /// Reads an entry from exactly [`IndexEntry::BYTES`] bytes, whatever
    /// they hold (a file is untrusted: decoding never panics).
    fn decode(raw: &[u8], base_offset: i64) -> Self;

    /// Writes the entry into exactly [`IndexEntry::BYTES`] bytes; the caller
    /// checked that its offset fits relative to `base_offset`.
    fn encode(&self, base_offset: i64, raw: &mut [u8]);

    /// The offset the entry is for, by which truncation cuts.
    fn offset(&self) -> i64;

    /// Whether the entry may follow `previous`: an index's columns increase.
    fn follows(&self, previous: &Self) -> bool;
}

/// A sparse index over one segment: the entries of a memory-mapped file.
pub struct Index<E: IndexEntry> {
    pub(super) file: IndexFile,
    pub(super) base_offset: i64,
    entry: PhantomData<E>,
}

impl<E: IndexEntry> Index<E> {
    /// Opens or creates the index; `max_index_bytes` is how far it may grow
    /// (`None`: an inactive segment's index, which takes no appends).
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: Option<usize>) -> io::Result<Self> {
        const { assert!(E::BYTES > 0 && E::BYTES <= MAX_ENTRY_BYTES) };
        Ok(Index { file: IndexFile::open(path, E::BYTES, max_index_bytes)?, base_offset, entry: PhantomData })
    }

    pub fn entries(&self) -> usize {
        self.file.entries()
    }

    pub fn entry(&self, i: usize) -> E {
        E::decode(self.file.entry(i), self.base_offset)
    }

    pub fn last_entry(&self) -> Option<E> {
        self.entries().checked_sub(1).map(|i| self.entry(i))
    }

    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Allocates room for `entries` more entries (see `IndexFile::reserve`).
    pub fn reserve(&mut self, entries: usize) -> io::Result<()> {
        self.file.reserve(entries)
    }

    /// Drops entries for offsets >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = self.last_matching(|entry| entry.offset() < offset).map_or(0, |i| i + 1);
        self.file.truncate_entries(keep);
    }

    /// Drops every entry (and the file's preallocated length with them).
    pub fn reset(&mut self) -> io::Result<()> {
        self.file.clear()
    }

    pub fn resize(&mut self, max_index_bytes: usize) -> io::Result<()> {
        self.file.resize(max_index_bytes)
    }

    pub fn trim(&mut self) -> io::Result<()> {
        self.file.trim()
    }

    pub fn flush(&self) -> io::Result<()> {
        self.file.flush()
    }

    pub fn rename(&mut self, to: &Path) -> io::Result<()> {
        self.file.rename(to)
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn size_bytes(&self) -> usize {
        self.file.size_bytes()
    }

    /// Appends `entry`, which the caller checked fits and follows the last
    /// one (the checks differ: a bad offset-index entry is an error, a
    /// time-index entry that does not move forward is skipped).
    pub(super) fn push(&mut self, entry: E) -> io::Result<()> {
        debug_assert!(
            self.last_entry().is_none_or(|last| entry.follows(&last)),
            "index entry {entry:?} does not follow {:?}",
            self.last_entry()
        );
        let mut raw = [0u8; MAX_ENTRY_BYTES];
        entry.encode(self.base_offset, &mut raw[..E::BYTES]);
        self.file.push(&raw[..E::BYTES])?;
        // The pair of the check above: what lookups will read is what was meant.
        debug_assert_eq!(self.last_entry(), Some(entry), "index entry changed in its encoding");
        Ok(())
    }

    /// Binary search: the last entry for which `at_or_before` holds, given
    /// it holds for a prefix of the entries.
    pub(super) fn last_matching(&self, at_or_before: impl Fn(E) -> bool) -> Option<usize> {
        let base_offset = self.base_offset;
        self.file.last_matching(|raw| at_or_before(E::decode(raw, base_offset)))
    }

    /// The first and last entries, when there are any.
    pub(super) fn first_and_last(&self) -> Option<(E, E)> {
        let last = self.last_entry()?;
        Some((self.entry(0), last))
    }
}

/// The offset a 4-byte big-endian relative offset stands for in a segment
/// based at `base_offset`; it saturates for a base near i64::MAX (a corrupt
/// or hostile file name), where no real segment can hold offsets anyway.
pub(super) fn absolute_offset(base_offset: i64, relative: &[u8]) -> i64 {
    let relative: [u8; 4] = relative.try_into().expect("4 bytes");
    base_offset.saturating_add(i64::from(u32::from_be_bytes(relative)))
}

/// The 4-byte relative offset of `offset`, which the caller checked is in
/// `[base_offset, base_offset + u32::MAX]`.
pub(super) fn relative_offset(base_offset: i64, offset: i64) -> [u8; 4] {
    ((offset - base_offset) as u32).to_be_bytes()
}
