//! The leader epoch cache: which epoch started at which offset, persisted in
//! `leader-epoch-checkpoint`. Followers use it (OffsetForLeaderEpoch) to find
//! where their log diverges from the leader's.

use std::io;
use std::path::{Path, PathBuf};

use crate::checkpoint::{read_leader_epochs, write_leader_epochs, EpochEntry, LEADER_EPOCH_CHECKPOINT};

pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn load(dir: &Path) -> io::Result<Self> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let mut entries = read_leader_epochs(&path)?;
        // Keep only a strictly increasing sequence, as Kafka does on load.
        entries.dedup_by(|later, earlier| later.epoch <= earlier.epoch || later.start_offset < earlier.start_offset);
        Ok(LeaderEpochCache { path, entries })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, if it is new.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        if epoch < 0 {
            return Ok(());
        }
        if let Some(last) = self.entries.last() {
            if epoch <= last.epoch {
                return Ok(());
            }
        }
        // A later epoch starting at or before a known one supersedes it.
        self.entries.retain(|e| e.start_offset < start_offset);
        self.entries.push(EpochEntry { epoch, start_offset });
        self.persist()
    }

    /// Kafka's OffsetForLeaderEpoch answer for `requested`: the latest
    /// epoch ends at the log end; an older one is answered with the largest
    /// epoch <= it and the start of the first epoch after it, or, when
    /// every known epoch is newer (their start was deleted), with the
    /// requested epoch itself and the first known epoch's start. `None`
    /// (UNDEFINED) for a negative epoch, an empty cache, or an epoch newer
    /// than any known.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> Option<(i32, i64)> {
        if requested < 0 {
            return None;
        }
        if self.latest_epoch() == Some(requested) {
            return Some((requested, log_end_offset));
        }
        let higher = self.entries.iter().position(|e| e.epoch > requested)?;
        let end = self.entries[higher].start_offset;
        match higher.checked_sub(1) {
            Some(floor) => Some((self.entries[floor].epoch, end)),
            None => Some((requested, end)),
        }
    }

    /// Drops epochs starting at or after `end_offset` (the log was truncated).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.persist()?;
        }
        Ok(())
    }

    /// Moves the first epoch's start up to the new log start offset.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> io::Result<()> {
        let keep_from = self.entries.iter().rposition(|e| e.start_offset <= start_offset);
        let Some(keep_from) = keep_from else { return Ok(()) };
        let mut changed = keep_from > 0;
        self.entries.drain(..keep_from);
        if let Some(first) = self.entries.first_mut() {
            if first.start_offset < start_offset {
                first.start_offset = start_offset;
                changed = true;
            }
        }
        if changed {
            self.persist()?;
        }
        Ok(())
    }

    pub fn clear(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.persist()
    }

    fn persist(&self) -> io::Result<()> {
        write_leader_epochs(&self.path, &self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_assign_lookup_truncate_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        cache.assign(0, 0).unwrap();
        cache.assign(0, 10).unwrap(); // same epoch: ignored
        cache.assign(2, 100).unwrap();
        cache.assign(5, 250).unwrap();
        assert_eq!(cache.end_offset_for(0, 400), Some((0, 100)));
        assert_eq!(cache.end_offset_for(1, 400), Some((0, 100)));
        assert_eq!(cache.end_offset_for(4, 400), Some((2, 250)));
        assert_eq!(cache.end_offset_for(5, 400), Some((5, 400)), "the latest epoch ends at the log end");
        assert_eq!(cache.end_offset_for(9, 400), None, "newer than any known: UNDEFINED, as in Kafka");
        assert_eq!(cache.end_offset_for(-1, 400), None);
        cache.truncate_from_end(200).unwrap();
        assert_eq!(cache.latest_epoch(), Some(2));
        cache.truncate_from_start(150).unwrap();
        assert_eq!(cache.entries(), &[EpochEntry { epoch: 2, start_offset: 150 }]);
        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries(), cache.entries());
        // Older than every known epoch: Kafka answers with the requested
        // epoch and the first known epoch's start.
        assert_eq!(reloaded.end_offset_for(1, 300), Some((1, 150)));
        assert_eq!(reloaded.end_offset_for(2, 300), Some((2, 300)));
    }
}
