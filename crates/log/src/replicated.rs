//! `ReplicatedLog`: the log as a consensus protocol sees it (Kafka's
//! `org.apache.kafka.raft.ReplicatedLog`). It lives here, beside the log
//! that implements it, so that raft depends on the log and never the
//! reverse. Times are arguments: whoever drives raft owns the clock.
//! Snapshots are part of it (Kafka's `ReplicatedLog` has them too): stored
//! beside the segments by `snapshots`, opaque bytes to raft.

use std::path::Path;

use bytes::Bytes;

use crate::config::LogConfig;
use crate::error::LogError;
use crate::log::{AppendInfo, PartitionLog};
use crate::snapshots::{self, SnapshotId};

/// Opens (or creates) a replicated log in `dir` after its newest whole
/// snapshot: the log starts where that snapshot ends, and after an unclean
/// stop it is checked from there on (it is short after a snapshot).
pub fn open_replicated_log(
    dir: &Path,
    config: LogConfig,
    clean_shutdown: bool,
    now_ms: i64,
) -> Result<PartitionLog, LogError> {
    std::fs::create_dir_all(dir)?;
    // A download a crash cut short is never resumed (Kafka deletes its
    // `.checkpoint.part` files when the log loads too).
    snapshots::delete_parts(dir)?;
    let snapshot_end = snapshots::latest_id(dir)?.map_or(0, |id| id.end_offset);
    let (log, _report) = PartitionLog::open(dir, config, snapshot_end, snapshot_end, clean_shutdown, now_ms)?;
    Ok(log)
}

pub trait ReplicatedLog {
    /// Appends `records` as the leader of `epoch`: offsets are assigned
    /// from the log end and every batch is stamped with the epoch.
    fn append_as_leader(&mut self, records: &Bytes, epoch: i32, now_ms: i64) -> Result<AppendInfo, LogError>;

    /// Appends batches copied from the leader, offsets and epochs as they
    /// are; they must continue the log.
    fn append_as_follower(&mut self, records: &Bytes, now_ms: i64) -> Result<AppendInfo, LogError>;

    /// The first offset still in the log (a snapshot covers what came before).
    fn log_start_offset(&self) -> i64;

    /// One past the last offset in the log.
    fn log_end_offset(&self) -> i64;

    /// The latest epoch the log holds (its last batch's), None when it holds none.
    fn last_epoch(&self) -> Option<i32>;

    /// (epoch, end offset) of the largest epoch at or below `epoch`, as a
    /// follower diverging from its leader asks; None when the log knows none.
    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)>;

    /// Removes every offset at or past `offset` (a follower's divergent tail).
    fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError>;

    /// Makes every appended offset durable (fsync).
    fn flush(&mut self, now_ms: i64) -> Result<(), LogError>;

    /// The offset below which everything is known to be on disk.
    fn last_flushed_offset(&self) -> i64;

    /// Whole batches from `offset`, at least one if there is any, about
    /// `max_bytes`, none at or past `upper_bound` (the high watermark, for
    /// what is committed). Empty when nothing is there.
    fn read(&self, offset: i64, max_bytes: u32, upper_bound: i64) -> Result<Bytes, LogError>;

    /// Moves the log start up to `offset` (at most the log end) and removes
    /// the segments wholly before it, as when a snapshot covers them.
    fn delete_records_before(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError>;

    /// The newest whole snapshot and its bytes, None when there is none.
    fn latest_snapshot(&self) -> Result<Option<(SnapshotId, Bytes)>, LogError>;

    /// The newest whole snapshot's id, None when there is none. Unlike
    /// [`ReplicatedLog::latest_snapshot`], its bytes need not be held.
    fn latest_snapshot_id(&self) -> Result<Option<SnapshotId>, LogError> {
        Ok(self.latest_snapshot()?.map(|(id, _)| id))
    }

    /// Stores snapshot `id` durably and atomically (whole or not at all).
    fn write_snapshot(&mut self, id: SnapshotId, bytes: &[u8]) -> Result<(), LogError>;

    /// Writes `bytes` at `position` of snapshot `id` as it is fetched, to
    /// a partial snapshot that is not a snapshot until frozen. Position 0
    /// starts it (dropping any earlier partial one); the others continue it.
    fn write_snapshot_part(&mut self, id: SnapshotId, position: u64, bytes: &[u8]) -> Result<(), LogError>;

    /// Makes the partial snapshot `id` a stored snapshot when it is whole,
    /// durably and atomically, and returns its size; None when it is not
    /// whole (it is dropped).
    fn freeze_snapshot_part(&mut self, id: SnapshotId) -> Result<Option<u64>, LogError>;

    /// Drops the partial snapshot, if any (a download given up).
    fn delete_snapshot_parts(&mut self) -> Result<(), LogError>;

    /// Removes the snapshots that end before `end_offset`.
    fn delete_snapshots_before(&mut self, end_offset: i64) -> Result<(), LogError>;

    /// The stored snapshots with their sizes in bytes, oldest first.
    fn snapshots(&self) -> Result<Vec<(SnapshotId, u64)>, LogError>;

    /// Up to `max_bytes` of snapshot `id` from byte `position`, with its
    /// whole size; None when the log has no such snapshot.
    fn read_snapshot(&self, id: SnapshotId, position: u64, max_bytes: u32) -> Result<Option<(u64, Bytes)>, LogError>;

    /// Drops the whole log and starts it empty at `offset` (a follower that
    /// fetched a snapshot past its log end).
    fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError>;

    /// The bytes the log's segments hold (metadata retention counts them).
    fn size_bytes(&self) -> u64;
}

// The inherent methods are called by path: the trait's have the same names.
impl ReplicatedLog for PartitionLog {
    fn append_as_leader(&mut self, records: &Bytes, epoch: i32, now_ms: i64) -> Result<AppendInfo, LogError> {
        PartitionLog::append_as_leader(self, records, epoch, now_ms)
    }

    fn append_as_follower(&mut self, records: &Bytes, now_ms: i64) -> Result<AppendInfo, LogError> {
        PartitionLog::append_as_follower(self, records, now_ms)
    }

    fn log_start_offset(&self) -> i64 {
        PartitionLog::log_start_offset(self)
    }

    fn log_end_offset(&self) -> i64 {
        PartitionLog::log_end_offset(self)
    }

    fn last_epoch(&self) -> Option<i32> {
        self.leader_epochs().latest_epoch()
    }

    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        PartitionLog::end_offset_for_epoch(self, epoch)
    }

    fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
        PartitionLog::truncate_to(self, offset, now_ms).map(|_| ())
    }

    fn flush(&mut self, now_ms: i64) -> Result<(), LogError> {
        PartitionLog::flush(self, now_ms)
    }

    fn last_flushed_offset(&self) -> i64 {
        self.recovery_point()
    }

    fn read(&self, offset: i64, max_bytes: u32, upper_bound: i64) -> Result<Bytes, LogError> {
        let read = PartitionLog::read(self, offset, max_bytes, upper_bound, true)?;
        match read.slice {
            Some(slice) => Ok(slice.read_to_bytes()?),
            None => Ok(Bytes::new()),
        }
    }

    fn delete_records_before(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
        PartitionLog::delete_records_before(self, offset, now_ms)?;
        PartitionLog::delete_pending_files(self)?;
        Ok(())
    }

    fn latest_snapshot(&self) -> Result<Option<(SnapshotId, Bytes)>, LogError> {
        Ok(snapshots::latest(self.dir())?)
    }

    fn latest_snapshot_id(&self) -> Result<Option<SnapshotId>, LogError> {
        Ok(snapshots::latest_id(self.dir())?)
    }

    fn write_snapshot(&mut self, id: SnapshotId, bytes: &[u8]) -> Result<(), LogError> {
        Ok(snapshots::write(self.dir(), id, bytes)?)
    }

    fn write_snapshot_part(&mut self, id: SnapshotId, position: u64, bytes: &[u8]) -> Result<(), LogError> {
        Ok(snapshots::write_part(self.dir(), id, position, bytes)?)
    }

    fn freeze_snapshot_part(&mut self, id: SnapshotId) -> Result<Option<u64>, LogError> {
        Ok(snapshots::freeze_part(self.dir(), id)?)
    }

    fn delete_snapshot_parts(&mut self) -> Result<(), LogError> {
        snapshots::delete_parts(self.dir())?;
        Ok(())
    }

    fn delete_snapshots_before(&mut self, end_offset: i64) -> Result<(), LogError> {
        snapshots::delete_before(self.dir(), end_offset)?;
        Ok(())
    }

    fn snapshots(&self) -> Result<Vec<(SnapshotId, u64)>, LogError> {
        Ok(snapshots::list_with_sizes(self.dir())?)
    }

    fn read_snapshot(&self, id: SnapshotId, position: u64, max_bytes: u32) -> Result<Option<(u64, Bytes)>, LogError> {
        Ok(snapshots::read_range(self.dir(), id, position, max_bytes)?)
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
        PartitionLog::truncate_fully_and_start_at(self, offset, now_ms)
    }

    fn size_bytes(&self) -> u64 {
        PartitionLog::size_bytes(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshots::tests::{id, snapshot_bytes};

    #[test]
    fn a_kill_mid_snapshot_write_leaves_a_tmp_file_that_is_ignored_and_removed_when_the_log_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("__cluster_metadata-0");
        std::fs::create_dir_all(&path).unwrap();
        snapshots::write(&path, id(10), &snapshot_bytes(&["a"])).unwrap();
        let newer = snapshot_bytes(&["b"]);
        // The write of snapshot 20 stopped at every possible point before its rename.
        for cut in 0..=newer.len() {
            let tmp = path.join(format!("{}.tmp", id(20).file_name()));
            std::fs::write(&tmp, &newer[..cut]).unwrap();
            assert_eq!(snapshots::latest(&path).unwrap().unwrap().0, id(10));
            let log = open_replicated_log(&path, LogConfig::default(), false, 1).unwrap();
            assert_eq!(ReplicatedLog::log_start_offset(&log), 10, "the log starts where the snapshot ends");
            assert_eq!(log.latest_snapshot().unwrap().unwrap().0, id(10));
            assert!(!tmp.exists(), "the leftover is removed at open");
            assert_eq!(snapshots::list(&path).unwrap(), vec![id(10)]);
        }
    }
}
