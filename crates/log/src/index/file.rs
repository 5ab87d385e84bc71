//! The file under every fixed-width index: entries mapped into memory,
//! preallocated while the segment is active, trimmed when it stops taking
//! appends, with the disk's room reserved before a store may fault.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

/// A file of fixed-size entries mapped into memory. The entry count is the
/// file length divided by the entry size, so a trimmed file needs no header.
/// No descriptor stays open: the mapping outlives it, and the file is opened
/// again only to resize it (roll, close), so an idle partition costs one
/// open file (its active `.log`), not three.
pub(crate) struct IndexFile {
    path: PathBuf,
    /// `None` while the file is empty (an empty mapping is not allowed).
    mmap: Option<MmapMut>,
    entry_bytes: usize,
    entries: usize,
    /// Entries the current (possibly preallocated) file holds.
    capacity: usize,
    /// Entries the index may grow to (its `segment.index.bytes`).
    max_entries: usize,
    /// The file's length was not a multiple of the entry size.
    partial_entry: bool,
    /// Bytes from the file's start known to have storage behind them. The
    /// preallocated tail is sparse, and a store into a page the disk cannot
    /// back kills the process (SIGBUS): [`IndexFile::reserve`] allocates a
    /// page before an entry may land in it, so a full disk fails the append.
    backed_bytes: usize,
}

/// The unit [`IndexFile::reserve`] allocates in.
const PAGE_BYTES: usize = 4096;

impl IndexFile {
    /// Opens or creates the index at its current size. `max_index_bytes` is
    /// how far it may grow when it takes appends (`None`: it takes none).
    /// The file grows to that size only when the first entry needs room, so
    /// opening thousands of idle partitions touches no preallocation.
    pub(crate) fn open(path: &Path, entry_bytes: usize, max_index_bytes: Option<usize>) -> io::Result<Self> {
        let file = Self::open_file(path)?;
        let length = file.metadata()?.len() as usize;
        let entries = length / entry_bytes;
        let mut index = IndexFile {
            path: path.to_path_buf(),
            mmap: None,
            entry_bytes,
            entries,
            capacity: entries,
            max_entries: entries,
            partial_entry: !length.is_multiple_of(entry_bytes),
            backed_bytes: 0,
        };
        index.set_max_bytes(max_index_bytes);
        index.remap(&file, length)?;
        Ok(index)
    }

    fn open_file(path: &Path) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)
    }

    fn remap(&mut self, file: &File, length: usize) -> io::Result<()> {
        self.mmap = None;
        self.capacity = length / self.entry_bytes;
        if length > 0 {
            // SAFETY: the file belongs to this partition's log, which is the only
            // writer; it is never truncated under the mapping except by `resize`,
            // which drops the mapping first.
            let mmap = unsafe { MmapMut::map_mut(file)? };
            // No readahead: the first touch of a page of the preallocated
            // (sparse) tail would otherwise read ahead and zero-fill a large
            // window of holes, which cost the append path ~40% of its time
            // (perf, append_64k). Lookups are binary searches, random anyway.
            mmap.advise(memmap2::Advice::Random)?;
            self.mmap = Some(mmap);
        }
        Ok(())
    }

    /// Allows appends up to `max_bytes` (None: no more appends).
    pub(crate) fn set_max_bytes(&mut self, max_bytes: Option<usize>) {
        self.max_entries = max_bytes.map_or(self.entries, |max| max / self.entry_bytes).max(self.entries);
    }

    /// Sets the file to hold `entries` entries, never dropping written ones.
    fn resize_entries(&mut self, entries: usize) -> io::Result<()> {
        let length = entries.max(self.entries) * self.entry_bytes;
        self.mmap = None;
        let file = Self::open_file(&self.path)?;
        file.set_len(length as u64)?;
        self.partial_entry = false;
        self.backed_bytes = self.backed_bytes.min(length);
        self.remap(&file, length)
    }

    /// Makes sure the next `more` entries (within the limit) can be stored:
    /// grows the file as the first push would, then allocates the pages
    /// they fall in. Fails with the disk's error (ENOSPC) rather than
    /// leaving a store to fault later.
    pub(crate) fn reserve(&mut self, more: usize) -> io::Result<()> {
        let wanted = self.entries.saturating_add(more).min(self.max_entries);
        if wanted > self.capacity {
            self.resize_entries(self.max_entries)?;
        }
        let end = wanted.min(self.capacity) * self.entry_bytes;
        if end <= self.backed_bytes {
            return Ok(());
        }
        let start = self.backed_bytes / PAGE_BYTES * PAGE_BYTES;
        let stop = end.div_ceil(PAGE_BYTES).saturating_mul(PAGE_BYTES).min(self.capacity * self.entry_bytes);
        let file = Self::open_file(&self.path)?;
        // SAFETY: a plain syscall on a descriptor this function owns.
        let result = unsafe {
            libc::fallocate(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
                start as libc::off_t,
                (stop - start) as libc::off_t,
            )
        };
        if result != 0 {
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(error);
            }
            // A file system without fallocate: nothing to reserve with.
        }
        self.backed_bytes = stop;
        Ok(())
    }

    /// Preallocates the file to `max_bytes` (rounded down to whole entries)
    /// and allows appends up to there.
    pub(crate) fn resize(&mut self, max_bytes: usize) -> io::Result<()> {
        self.set_max_bytes(Some(max_bytes));
        self.resize_entries(self.max_entries)
    }

    /// Shrinks the file to the written entries (on roll and close); appends
    /// stop until the index is resized again.
    pub(crate) fn trim(&mut self) -> io::Result<()> {
        self.max_entries = self.entries;
        self.resize_entries(self.entries)
    }

    /// Makes room for one more entry even past the limit (Kafka's final
    /// time-index entry when a segment stops taking appends).
    pub(crate) fn reserve_one(&mut self) -> io::Result<()> {
        if self.entries >= self.capacity {
            self.max_entries = self.max_entries.max(self.entries + 1);
            self.resize_entries(self.entries + 1)?;
        }
        self.reserve(1)
    }

    /// A file whose length is not a whole number of entries is corrupt.
    pub(crate) fn has_partial_entry(&self) -> bool {
        self.partial_entry
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    pub(crate) fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    pub(crate) fn entry(&self, i: usize) -> &[u8] {
        assert!(i < self.entries, "index entry {i} of {}", self.entries);
        let mmap = self.mmap.as_ref().expect("an index with entries is mapped");
        &mmap[i * self.entry_bytes..(i + 1) * self.entry_bytes]
    }

    /// Appends one entry; the caller checked `is_full` and ordering. The
    /// first append after opening grows the file to its limit.
    pub(crate) fn push(&mut self, entry: &[u8]) -> io::Result<()> {
        assert_eq!(entry.len(), self.entry_bytes);
        if self.entries >= self.capacity {
            assert!(self.entries < self.max_entries, "index {} is full", self.path.display());
            self.resize_entries(self.max_entries)?;
        }
        let start = self.entries * self.entry_bytes;
        let mmap = self.mmap.as_mut().expect("an index with capacity is mapped");
        mmap[start..start + self.entry_bytes].copy_from_slice(entry);
        self.entries += 1;
        Ok(())
    }

    /// Forgets entries from `keep` on (and zeroes them, so a preallocated tail
    /// never shows stale entries after a crash).
    pub(crate) fn truncate_entries(&mut self, keep: usize) {
        if keep >= self.entries {
            return;
        }
        if let Some(mmap) = self.mmap.as_mut() {
            mmap[keep * self.entry_bytes..self.entries * self.entry_bytes].fill(0);
        }
        self.entries = keep;
    }

    /// Drops every entry by cutting the file to nothing. Zeroing them through
    /// the mapping instead would fault in and dirty every page of a
    /// preallocated file (10 MiB an index by default): recovering 300
    /// partitions after a kill -9 wrote 6 GB that way.
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        self.mmap = None;
        let file = Self::open_file(&self.path)?;
        file.set_len(0)?;
        self.entries = 0;
        self.partial_entry = false;
        self.backed_bytes = 0;
        self.remap(&file, 0)
    }

    /// Binary search: the last entry index for which `at_or_before(entry)`
    /// holds, given it holds for a prefix of the entries.
    pub(crate) fn last_matching(&self, at_or_before: impl Fn(&[u8]) -> bool) -> Option<usize> {
        let (mut low, mut high) = (0usize, self.entries);
        while low < high {
            let mid = low + (high - low) / 2;
            if at_or_before(self.entry(mid)) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low.checked_sub(1)
    }

    pub(crate) fn flush(&self) -> io::Result<()> {
        if let Some(mmap) = &self.mmap {
            mmap.flush()?;
        }
        Ok(())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn rename(&mut self, to: &Path) -> io::Result<()> {
        std::fs::rename(&self.path, to)?;
        self.path = to.to_path_buf();
        Ok(())
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.entries * self.entry_bytes
    }
}
