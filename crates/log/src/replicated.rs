//! `ReplicatedLog`: the log as a consensus protocol sees it (Kafka's
//! `org.apache.kafka.raft.ReplicatedLog`). It lives here, beside the log
//! that implements it, so that raft depends on the log and never the
//! reverse. Times are arguments: whoever drives raft owns the clock.

use bytes::Bytes;

use crate::error::LogError;
use crate::log::{AppendInfo, PartitionLog};

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
}
