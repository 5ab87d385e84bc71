//! Moving a replica between this broker's log directories (KIP-113,
//! AlterReplicaLogDirs): a future replica in the destination directory
//! follows the current one, as a follower follows its leader but in
//! process (its batches copied verbatim, its log start and truncations
//! mirrored), and once it has caught up it is swapped in, under the
//! partition's log lock so that no append lands in between
//! (`Partition::promote_future`).
//!
//! On a broker whose controller records replicas' directories (KIP-858)
//! the swap waits until the controller has recorded the destination: a
//! directory failing later must take the replica with it, and a stop
//! between the record and the swap is resumed at the next start.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;
use krabka_log::checkpoint::TopicPartition;
use krabka_log::{LogError, PartitionLog};
use krabka_protocol::records::whole_batches;
use krabka_protocol::Uuid;
use krabka_replication::divergence::{follower_truncation, leader_divergence};
use tokio::sync::watch;

/// The copy a move fills, in its destination directory.
pub struct FutureReplica {
    pub(super) log: PartitionLog,
    /// The destination log directory, and its `directory.id` (none on a
    /// broker whose controller records no directories).
    pub(super) dir: PathBuf,
    pub(super) dir_id: Option<Uuid>,
    /// When the controller was last asked to record `dir` for the replica.
    pub(super) assignment_asked_ms: Option<i64>,
}

/// How a copy step went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveStep {
    /// No move under way.
    Idle,
    /// Batches copied (bytes).
    Copied(usize),
    /// The future replica has every record of the current one.
    CaughtUp,
    /// Not copied: the moves copied their bytes per second already.
    Throttled,
    /// The move stopped: the future replica's directory failed, or the
    /// current one's (the future replica was dropped).
    Stopped,
}

/// How an attempt to swap a caught-up future replica in went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swap {
    /// The future replica is the replica now.
    Done,
    /// Not swapped: no move, or not caught up.
    NotYet,
    /// The destination failed while sealing or swapping: the move is
    /// given up and the replica stays where it was.
    GivenUp,
    /// The current replica's directory failed while swapping: the replica
    /// stops, and the next start finds the sealed future replica whole.
    Stopped,
}

/// Which side of a move failed.
#[derive(Debug)]
pub enum MoveError {
    /// Reading the current replica.
    Current(LogError),
    /// Writing the future replica.
    Future(LogError),
}

impl FutureReplica {
    pub fn new(log: PartitionLog, dir: &Path, dir_id: Option<Uuid>) -> Self {
        FutureReplica { log, dir: dir.to_path_buf(), dir_id, assignment_asked_ms: None }
    }

    /// Mirrors the current replica's log start and truncations: what it
    /// copied past the point where the two diverge (the current replica,
    /// a follower, was truncated since) is truncated away, as a follower
    /// does on a diverging epoch (KIP-320).
    fn follow(&mut self, current: &PartitionLog, now_ms: i64) -> Result<(), LogError> {
        let start = current.log_start_offset();
        if start > self.log.log_end_offset() {
            self.log.truncate_fully_and_start_at(start, now_ms)?;
        } else if start > self.log.log_start_offset() {
            self.log.delete_records_before(start, now_ms)?;
        }
        // The checks a follower's fetch gets from its leader, with the
        // current replica as the leader.
        let end = self.log.log_end_offset();
        let last_epoch = self.log.leader_epochs().latest_epoch().unwrap_or(-1);
        let found = current.end_offset_for_epoch(last_epoch);
        if let Some((epoch, current_end)) = leader_divergence(found, last_epoch, end) {
            let offset = follower_truncation(current_end, self.log.end_offset_for_epoch(epoch), end);
            self.log.truncate_to(offset.max(self.log.log_start_offset()), now_ms)?;
        } else if end > current.log_end_offset() {
            // Ahead of the current replica with no epoch to say where they
            // part (it was truncated below the future's last epoch): copy
            // again from its log start.
            self.log.truncate_fully_and_start_at(start, now_ms)?;
        }
        debug_assert!(self.log.log_end_offset() <= current.log_end_offset().max(start));
        Ok(())
    }

    /// The next batches to copy from `current`, up to `max_bytes` (at
    /// least one), after following it; None once caught up. The caller
    /// may let go of `current` before [`Self::append`]: a truncation
    /// meanwhile is found by the next step's `follow`.
    pub(super) fn next_batches(
        &mut self,
        current: &PartitionLog,
        max_bytes: u32,
        now_ms: i64,
    ) -> Result<Option<Bytes>, MoveError> {
        self.follow(current, now_ms).map_err(MoveError::Future)?;
        let (from, end) = (self.log.log_end_offset(), current.log_end_offset());
        if from == end {
            return Ok(None);
        }
        let read = current.read(from, max_bytes, end, true).map_err(MoveError::Current)?;
        // A read ends where `max_bytes` does, maybe inside a batch.
        let records = match read.slice {
            Some(slice) => slice.read_to_bytes().map(whole_batches).map_err(|e| MoveError::Current(e.into()))?,
            None => Bytes::new(),
        };
        Ok(Some(records))
    }

    /// Appends batches [`Self::next_batches`] read.
    pub(super) fn append(&mut self, records: &Bytes, now_ms: i64) -> Result<(), LogError> {
        if !records.is_empty() {
            self.log.append_as_follower(records, now_ms)?;
        }
        Ok(())
    }

    /// Readies the future replica to take the current one's place: true
    /// when it has every record of `current` (then its epochs match and
    /// it is flushed, as at a clean shutdown), false when it is behind.
    pub(super) fn seal(&mut self, current: &PartitionLog, now_ms: i64) -> Result<bool, LogError> {
        self.follow(current, now_ms)?;
        let end = current.log_end_offset();
        if self.log.log_end_offset() != end {
            return Ok(false);
        }
        // Epochs the current replica started with no record yet (a new
        // leader's) start at the end, where the future one ends too.
        let latest = self.log.leader_epochs().latest_epoch();
        let newer: Vec<_> = current.leader_epochs().entries().iter().filter(|e| Some(e.epoch) > latest).collect();
        debug_assert!(newer.iter().all(|e| e.start_offset == end), "records of an epoch not copied");
        for entry in newer {
            self.log.assign_leader_epoch(entry.epoch)?;
        }
        self.log.prepare_clean_shutdown(now_ms)?;
        Ok(true)
    }
}

/// The moves' shared state: directories named for replicas not here yet,
/// and the movers' wake-up.
pub struct LogDirMoves {
    /// Directories AlterReplicaLogDirs named for replicas not here yet:
    /// each is created there (Kafka's preferred log dirs).
    pub(super) preferred: Mutex<HashMap<TopicPartition, PathBuf>>,
    /// Counts the moves started: every mover sees each change.
    pub(super) started: watch::Sender<u64>,
}

impl Default for LogDirMoves {
    fn default() -> Self {
        LogDirMoves { preferred: Mutex::default(), started: watch::channel(0).0 }
    }
}

impl LogDirMoves {
    /// The directory a replica about to be created should go to, if one was named.
    pub(super) fn take_preferred(&self, tp: &TopicPartition) -> Option<PathBuf> {
        self.preferred.lock().unwrap_or_else(|e| e.into_inner()).remove(tp)
    }

    /// A mover's view of the moves started: `changed()` resolves when one
    /// may have started since it last looked.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.started.subscribe()
    }

    /// Wakes every mover: a move started.
    pub(super) fn announce(&self) {
        self.started.send_modify(|count| *count += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use krabka_log::LogConfig;
    use krabka_protocol::compression::Compression;
    use krabka_protocol::records::{NewRecord, RecordBatchBuilder};

    fn open(dir: &Path, name: &str) -> PartitionLog {
        PartitionLog::open(&dir.join(name), LogConfig::default(), 0, 0, false, 0).unwrap().0
    }

    fn one_record() -> Bytes {
        let mut builder = RecordBatchBuilder::new(Compression::None);
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(b"v"), headers: &[] }).unwrap();
        builder.build().unwrap().into_bytes()
    }

    fn copy_all(current: &PartitionLog, future: &mut FutureReplica) {
        let (from, end) = (future.log.log_end_offset(), current.log_end_offset());
        let slice = current.read(from, u32::MAX, end, true).unwrap().slice.unwrap();
        future.log.append_as_follower(&slice.read_to_bytes().unwrap(), 0).unwrap();
        assert_eq!(future.log.log_end_offset(), end);
    }

    /// The future replica follows its current one as a follower its
    /// leader: what the current one lost to a truncation (a diverged
    /// follower) goes, and so does what falls below its log start.
    #[test]
    fn a_future_replica_truncates_what_the_current_one_lost_and_follows_its_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut current = open(dir.path(), "t-0");
        for _ in 0..5 {
            current.append_as_leader(&one_record(), 0, 0).unwrap();
        }
        let future_log =
            open(dir.path(), &krabka_log::checkpoint::TopicPartition::new("t", 0).future_dir_name(&[1; 16]));
        let mut future = FutureReplica::new(future_log, dir.path(), None);
        copy_all(&current, &mut future);
        future.follow(&current, 0).unwrap();
        assert_eq!(future.log.log_end_offset(), 5, "nothing to truncate");

        // The current replica truncated to 3, then took records of epoch 1.
        current.truncate_to(3, 0).unwrap();
        current.assign_leader_epoch(1).unwrap();
        for _ in 0..2 {
            current.append_as_leader(&one_record(), 1, 0).unwrap();
        }
        future.follow(&current, 0).unwrap();
        assert_eq!(future.log.log_end_offset(), 3, "epoch 0 ends at 3 in the current replica");
        copy_all(&current, &mut future);
        let epochs = |log: &PartitionLog| {
            log.leader_epochs().entries().iter().map(|e| (e.epoch, e.start_offset)).collect::<Vec<_>>()
        };
        assert_eq!(epochs(&future.log), epochs(&current));

        current.delete_records_before(4, 0).unwrap();
        future.follow(&current, 0).unwrap();
        assert_eq!((future.log.log_start_offset(), future.log.log_end_offset()), (4, 5));
        // Past its end: the future replica starts again there.
        for _ in 0..3 {
            current.append_as_leader(&one_record(), 1, 0).unwrap();
        }
        current.delete_records_before(7, 0).unwrap();
        future.follow(&current, 0).unwrap();
        assert_eq!((future.log.log_start_offset(), future.log.log_end_offset()), (7, 7));
    }
}
