//! The quorum of one: a single combined node is the only voter of
//! `__cluster_metadata`, so it is always the leader, and a record is
//! committed as soon as it is durable in its own log. A proposal is built
//! into one batch, appended as leader in the voter's epoch, flushed, and
//! committed at once: the high watermark is the log end offset after the
//! flush. It returns what was committed; applying it is the caller's.
//!
//! It owns the snapshot policy too: it counts the bytes committed since
//! the last snapshot against `metadata.log.max.record.bytes.between.snapshots`
//! and says when one is due; the caller encodes its state at the high
//! watermark and hands the bytes to `install_snapshot`, which stores them
//! through the log and then drops what they cover (the log prefix and the
//! older snapshots). Raft never reads the bytes.

use bytes::Bytes;
use krabka_log::{AppendInfo, LogError, ReplicatedLog, SnapshotId};

use crate::batch;

/// What one proposal committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    pub first_offset: i64,
    pub last_offset: i64,
    pub epoch: i32,
    /// The high watermark after the commit: `last_offset + 1`.
    pub high_watermark: i64,
    /// Bytes appended to the log.
    pub bytes: u64,
    /// Set when enough was committed since the last snapshot: the caller
    /// should snapshot its state at this end offset (the high watermark).
    pub snapshot_due: Option<i64>,
}

/// A snapshot as the log stores it: its id and its (opaque) bytes.
pub type Snapshot = (SnapshotId, Bytes);

pub struct SingleVoter<L> {
    log: L,
    epoch: i32,
    /// Everything below it is committed: appended and flushed.
    high_watermark: i64,
    /// `metadata.log.max.record.bytes.between.snapshots`.
    snapshot_every_bytes: u64,
    /// Bytes committed since the last snapshot (or since the open).
    bytes_since_snapshot: u64,
}

impl<L: ReplicatedLog> SingleVoter<L> {
    /// Takes the lead of `log`. What it holds is committed: each proposal was
    /// flushed before it was reported committed, and a tail an unclean stop
    /// left unflushed (written but never reported) is the only voter's log,
    /// so it is flushed and committed too, as Kafka's new leader commits its
    /// whole log. The epoch is the log's latest (0 for an empty log): one
    /// voter wins every election, so it has no cause to move it. Returns
    /// the voter and the log's newest whole snapshot, for the caller to
    /// decode and replay the committed log after. A snapshot is due once
    /// `snapshot_every_bytes` more are committed.
    pub fn open(mut log: L, snapshot_every_bytes: u64, now_ms: i64) -> Result<(Self, Option<Snapshot>), LogError> {
        log.flush(now_ms)?;
        let snapshot = log.latest_snapshot()?;
        let epoch = log.last_epoch().unwrap_or(0).max(0);
        let high_watermark = log.log_end_offset();
        let voter = SingleVoter { log, epoch, high_watermark, snapshot_every_bytes, bytes_since_snapshot: 0 };
        voter.check();
        Ok((voter, snapshot))
    }

    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// One past the last committed offset.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Appends `values` (one record each, stamped `now_ms`) as one batch in
    /// the voter's epoch, flushes it and commits it. A failure commits
    /// nothing: the high watermark stays, and what reached the log is cut
    /// off again, so a later flush cannot commit what was reported failed.
    pub fn propose(&mut self, values: &[Bytes], now_ms: i64) -> Result<Committed, LogError> {
        debug_assert!(!values.is_empty(), "an empty proposal");
        let appended = self.append_and_flush(values, now_ms);
        if appended.is_err() && self.log.log_end_offset() > self.high_watermark {
            // Best effort: the disk just failed us and may again, and the
            // append's error is the one to report.
            let _ = self.log.truncate_to(self.high_watermark, now_ms);
        }
        let info = appended?;
        let high_watermark = self.log.log_end_offset();
        debug_assert_eq!(high_watermark, info.last_offset + 1, "the proposal is the log's last batch");
        debug_assert!(high_watermark > self.high_watermark, "a commit that does not move the high watermark");
        self.high_watermark = high_watermark;
        self.bytes_since_snapshot += info.bytes;
        self.check();
        Ok(Committed {
            first_offset: info.first_offset,
            last_offset: info.last_offset,
            epoch: self.epoch,
            high_watermark,
            bytes: info.bytes,
            snapshot_due: self.snapshot_due(),
        })
    }

    /// The end offset to snapshot at when enough was committed since the
    /// last snapshot; None until then.
    pub fn snapshot_due(&self) -> Option<i64> {
        (self.bytes_since_snapshot >= self.snapshot_every_bytes && self.high_watermark > self.log.log_start_offset())
            .then_some(self.high_watermark)
    }

    /// Stores `bytes`, the caller's state with every record before `end`
    /// applied (`end` at most the high watermark), as the newest snapshot;
    /// then drops the log before `end` and the older snapshots, and starts
    /// counting toward the next. A failure before the snapshot is stored
    /// changes nothing (the next commit says it is due again); one after
    /// leaves the snapshot and some of what it covers, which is harmless.
    pub fn install_snapshot(&mut self, end: i64, bytes: &[u8], now_ms: i64) -> Result<SnapshotId, LogError> {
        debug_assert!(end <= self.high_watermark, "a snapshot of uncommitted records");
        let id = SnapshotId { end_offset: end, epoch: self.epoch };
        self.log.write_snapshot(id, bytes)?;
        self.bytes_since_snapshot = 0;
        self.log.delete_records_before(end, now_ms)?;
        self.log.delete_snapshots_before(end)?;
        Ok(id)
    }

    fn append_and_flush(&mut self, values: &[Bytes], now_ms: i64) -> Result<AppendInfo, LogError> {
        batch::append_and_flush(&mut self.log, values, self.epoch, now_ms)
    }

    /// Committed batches from `offset`, about `max_bytes` (at least one
    /// batch); empty at the high watermark.
    pub fn read_committed(&self, offset: i64, max_bytes: u32) -> Result<Bytes, LogError> {
        self.log.read(offset, max_bytes, self.high_watermark)
    }

    pub fn log(&self) -> &L {
        &self.log
    }

    /// The log, for what raft does not do: the clean shutdown. Its end
    /// must not move below the high watermark.
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }

    /// The invariants of a single voter between proposals: what is committed
    /// is flushed, and what is appended is committed (so the high watermark
    /// is never past the log end).
    fn check(&self) {
        debug_assert!(self.high_watermark <= self.log.last_flushed_offset(), "committed but not flushed");
        debug_assert_eq!(self.high_watermark, self.log.log_end_offset(), "appended but not committed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_log::{LogConfig, PartitionLog};
    use krabka_protocol::compression::Compression;
    use krabka_protocol::records::RecordBatches;
    use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
    use std::path::Path;

    fn open_log(dir: &Path, clean_shutdown: bool) -> PartitionLog {
        let (log, _) = PartitionLog::open(dir, LogConfig::default(), 0, 0, clean_shutdown, 1).unwrap();
        log
    }

    /// A voter that never finds a snapshot due, on a log without one.
    fn open_voter<L: ReplicatedLog>(log: L, now_ms: i64) -> SingleVoter<L> {
        let (voter, snapshot) = SingleVoter::open(log, u64::MAX, now_ms).unwrap();
        assert!(snapshot.is_none());
        voter
    }

    fn values(names: &[&str]) -> Vec<Bytes> {
        names.iter().map(|name| Bytes::copy_from_slice(name.as_bytes())).collect()
    }

    /// The record values committed from `offset`, read back through the voter.
    fn committed_values(voter: &SingleVoter<PartitionLog>, mut offset: i64) -> Vec<Bytes> {
        let mut out = Vec::new();
        while offset < voter.high_watermark() {
            let bytes = voter.read_committed(offset, 1 << 20).unwrap();
            assert!(!bytes.is_empty());
            for batch in RecordBatches::new(bytes) {
                let batch = batch.unwrap();
                assert_eq!(batch.partition_leader_epoch(), voter.epoch());
                for record in batch.records(usize::MAX).unwrap() {
                    out.push(record.unwrap().value.unwrap());
                }
                offset = batch.next_offset();
            }
        }
        out
    }

    #[test]
    fn each_proposal_commits_at_once_and_the_high_watermark_is_the_flushed_log_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut voter = open_voter(open_log(&dir.path().join("__cluster_metadata-0"), true), 1);
        assert_eq!((voter.epoch(), voter.high_watermark()), (0, 0));
        let first = voter.propose(&values(&["a", "b"]), 2).unwrap();
        assert_eq!((first.first_offset, first.last_offset, first.high_watermark), (0, 1, 2));
        let second = voter.propose(&values(&["c"]), 3).unwrap();
        assert_eq!((second.first_offset, second.last_offset, second.high_watermark), (2, 2, 3));
        assert!(second.bytes > 0);
        assert_eq!(voter.high_watermark(), voter.log().log_end_offset());
        assert_eq!(voter.log().last_flushed_offset(), voter.high_watermark());
        assert_eq!(committed_values(&voter, 0), values(&["a", "b", "c"]));
        assert_eq!(committed_values(&voter, 2), values(&["c"]));
        assert!(voter.read_committed(3, 1024).unwrap().is_empty());
    }

    #[test]
    fn a_reopened_voter_keeps_what_it_committed_and_its_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("__cluster_metadata-0");
        {
            let mut log = open_log(&path, true);
            log.assign_leader_epoch(4).unwrap();
            let mut voter = open_voter(log, 1);
            assert_eq!(voter.epoch(), 4);
            voter.propose(&values(&["a"]), 2).unwrap();
            voter.propose(&values(&["b", "c"]), 3).unwrap();
            // No clean shutdown: the log is dropped as a crash leaves it.
        }
        let mut voter = open_voter(open_log(&path, false), 4);
        assert_eq!((voter.epoch(), voter.high_watermark()), (4, 3));
        assert_eq!(committed_values(&voter, 0), values(&["a", "b", "c"]));
        let next = voter.propose(&values(&["d"]), 5).unwrap();
        assert_eq!((next.first_offset, next.epoch), (3, 4));
    }

    /// A log whose disk fails the next flush.
    struct FailingFlush {
        log: PartitionLog,
        fail_next_flush: bool,
    }

    impl ReplicatedLog for FailingFlush {
        fn append_as_leader(&mut self, records: &Bytes, epoch: i32, now_ms: i64) -> Result<AppendInfo, LogError> {
            ReplicatedLog::append_as_leader(&mut self.log, records, epoch, now_ms)
        }
        fn append_as_follower(&mut self, records: &Bytes, now_ms: i64) -> Result<AppendInfo, LogError> {
            ReplicatedLog::append_as_follower(&mut self.log, records, now_ms)
        }
        fn log_start_offset(&self) -> i64 {
            ReplicatedLog::log_start_offset(&self.log)
        }
        fn log_end_offset(&self) -> i64 {
            ReplicatedLog::log_end_offset(&self.log)
        }
        fn last_epoch(&self) -> Option<i32> {
            self.log.last_epoch()
        }
        fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
            ReplicatedLog::end_offset_for_epoch(&self.log, epoch)
        }
        fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
            ReplicatedLog::truncate_to(&mut self.log, offset, now_ms)
        }
        fn flush(&mut self, now_ms: i64) -> Result<(), LogError> {
            if std::mem::take(&mut self.fail_next_flush) {
                return Err(LogError::Io(std::io::Error::other("injected fsync failure")));
            }
            ReplicatedLog::flush(&mut self.log, now_ms)
        }
        fn last_flushed_offset(&self) -> i64 {
            self.log.last_flushed_offset()
        }
        fn read(&self, offset: i64, max_bytes: u32, upper_bound: i64) -> Result<Bytes, LogError> {
            ReplicatedLog::read(&self.log, offset, max_bytes, upper_bound)
        }
        fn delete_records_before(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
            ReplicatedLog::delete_records_before(&mut self.log, offset, now_ms)
        }
        fn latest_snapshot(&self) -> Result<Option<Snapshot>, LogError> {
            self.log.latest_snapshot()
        }
        fn latest_snapshot_id(&self) -> Result<Option<SnapshotId>, LogError> {
            self.log.latest_snapshot_id()
        }
        fn write_snapshot(&mut self, id: SnapshotId, bytes: &[u8]) -> Result<(), LogError> {
            self.log.write_snapshot(id, bytes)
        }
        fn write_snapshot_part(&mut self, id: SnapshotId, position: u64, bytes: &[u8]) -> Result<(), LogError> {
            self.log.write_snapshot_part(id, position, bytes)
        }
        fn freeze_snapshot_part(&mut self, id: SnapshotId) -> Result<Option<u64>, LogError> {
            self.log.freeze_snapshot_part(id)
        }
        fn delete_snapshot_parts(&mut self) -> Result<(), LogError> {
            self.log.delete_snapshot_parts()
        }
        fn delete_snapshots_before(&mut self, end_offset: i64) -> Result<(), LogError> {
            self.log.delete_snapshots_before(end_offset)
        }
        fn snapshots(&self) -> Result<Vec<(SnapshotId, u64)>, LogError> {
            self.log.snapshots()
        }
        fn read_snapshot(&self, id: SnapshotId, position: u64, max: u32) -> Result<Option<(u64, Bytes)>, LogError> {
            self.log.read_snapshot(id, position, max)
        }
        fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
            ReplicatedLog::truncate_fully_and_start_at(&mut self.log, offset, now_ms)
        }
        fn size_bytes(&self) -> u64 {
            ReplicatedLog::size_bytes(&self.log)
        }
    }

    #[test]
    fn a_proposal_whose_flush_fails_commits_nothing_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let log =
            FailingFlush { log: open_log(&dir.path().join("__cluster_metadata-0"), true), fail_next_flush: false };
        let mut voter = open_voter(log, 1);
        voter.propose(&values(&["a"]), 2).unwrap();
        voter.log_mut().fail_next_flush = true;
        assert!(voter.propose(&values(&["lost"]), 3).is_err());
        assert_eq!(voter.high_watermark(), 1);
        assert_eq!(voter.log().log_end_offset(), 1, "the failed proposal was cut off");
        let next = voter.propose(&values(&["b"]), 4).unwrap();
        assert_eq!((next.first_offset, next.high_watermark), (1, 2));
    }

    /// Bytes in the shape of a snapshot (the log checks its framing and
    /// footer, never what the records mean): a batch of `names`, then a
    /// control batch with Kafka's snapshot footer key.
    fn snapshot_bytes(names: &[&str]) -> Bytes {
        let mut out = RecordBatchBuilder::new(Compression::None);
        for value in values(names) {
            out.append(&NewRecord { timestamp_ms: NOW_MS, key: None, value: Some(&value), headers: &[] }).unwrap();
        }
        let mut bytes = out.build().unwrap().as_bytes().to_vec();
        let key = Bytes::from_static(&[0, 0, 0, 4]);
        let mut footer =
            RecordBatchBuilder::new(Compression::None).with_control(true).with_base_offset(names.len() as i64);
        footer
            .append(&NewRecord { timestamp_ms: NOW_MS, key: Some(&key), value: Some(&Bytes::new()), headers: &[] })
            .unwrap();
        bytes.extend_from_slice(footer.build().unwrap().as_bytes());
        Bytes::from(bytes)
    }

    /// The fake clock.
    const NOW_MS: i64 = 1_700_000_000_000;

    fn snapshot_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".checkpoint") && name.as_bytes()[0].is_ascii_digit())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_snapshot_is_due_after_the_threshold_of_committed_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (mut voter, snapshot) =
            SingleVoter::open(open_log(&dir.path().join("__cluster_metadata-0"), true), 200, NOW_MS).unwrap();
        assert!(snapshot.is_none());
        assert_eq!(voter.snapshot_due(), None);
        let mut committed = voter.propose(&values(&["a"]), NOW_MS).unwrap();
        assert!(committed.bytes < 200);
        assert_eq!(committed.snapshot_due, None);
        let mut total = committed.bytes;
        while total < 200 {
            committed = voter.propose(&values(&["b"]), NOW_MS).unwrap();
            total += committed.bytes;
        }
        assert_eq!(committed.snapshot_due, Some(voter.high_watermark()));
        assert_eq!(voter.snapshot_due(), Some(voter.high_watermark()));
        // Not installed: still due on the next commit.
        let next = voter.propose(&values(&["c"]), NOW_MS).unwrap();
        assert_eq!(next.snapshot_due, Some(next.high_watermark));
        voter.install_snapshot(next.high_watermark, &snapshot_bytes(&["state"]), NOW_MS).unwrap();
        assert_eq!(voter.snapshot_due(), None, "the count starts over");
        assert_eq!(voter.propose(&values(&["d"]), NOW_MS).unwrap().snapshot_due, None);
    }

    #[test]
    fn installing_a_snapshot_drops_the_log_and_the_snapshots_it_covers_and_a_reopen_gets_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("__cluster_metadata-0");
        let mut log = open_log(&path, true);
        log.assign_leader_epoch(2).unwrap();
        let (mut voter, _) = SingleVoter::open(log, 0, NOW_MS).unwrap();
        let first = voter.propose(&values(&["a", "b"]), NOW_MS).unwrap();
        assert_eq!(first.snapshot_due, Some(2), "a threshold of 0 snapshots after every commit");
        let id = voter.install_snapshot(2, &snapshot_bytes(&["s1"]), NOW_MS).unwrap();
        assert_eq!(id, SnapshotId { end_offset: 2, epoch: 2 });
        assert_eq!(snapshot_files(&path), vec!["00000000000000000002-0000000002.checkpoint"]);
        // Enough for the log to roll, so the prefix goes with its segments.
        let end = voter.high_watermark();
        voter.log_mut().roll(end, NOW_MS).unwrap();
        voter.propose(&values(&["c"]), NOW_MS).unwrap();
        voter.install_snapshot(3, &snapshot_bytes(&["s2"]), NOW_MS).unwrap();
        assert_eq!(snapshot_files(&path), vec!["00000000000000000003-0000000002.checkpoint"], "the older one is gone");
        assert_eq!(voter.log().log_start_offset(), 3);
        assert_eq!(voter.high_watermark(), 3);
        voter.propose(&values(&["d"]), NOW_MS).unwrap();
        drop(voter);
        // The broker reopens the log after the snapshot, then the voter.
        let log = krabka_log::open_replicated_log(&path, LogConfig::default(), false, NOW_MS).unwrap();
        let (voter, snapshot) = SingleVoter::open(log, 0, NOW_MS).unwrap();
        let (id, bytes) = snapshot.unwrap();
        assert_eq!(id, SnapshotId { end_offset: 3, epoch: 2 });
        assert_eq!(bytes, snapshot_bytes(&["s2"]), "the bytes come back untouched");
        assert_eq!((voter.log().log_start_offset(), voter.high_watermark()), (3, 4));
        assert_eq!(committed_values(&voter, 3), values(&["d"]));
    }
}
