//! `MemLog`: the simulation's `ReplicatedLog`, an in-memory model of
//! `PartitionLog` as raft uses it, over real record batches.
//!
//! The leader's append stamps each batch's base offset and partition
//! leader epoch, so a batch of several records (a new leader's LeaderChange
//! with its KRaftVoters, a proposal of several values) spans several
//! offsets; a follower's append takes the leader's batches as they are and
//! must continue the log. `read` returns whole batches from the one holding
//! the offset, none holding the upper bound (what `PartitionLog` returns
//! once the partial batch it may end with is dropped, as the wire and the
//! committed reader drop it). Truncation cuts the whole batch holding the
//! offset and the epoch cache keeps epochs that start before the offset
//! asked for, as `PartitionLog` and its `LeaderEpochCache` do. What was not
//! flushed is lost in a crash.
//!
//! Snapshots are in Kafka's shape: a control batch with the SnapshotHeader
//! (and KRaftVersion and KRaftVoters at `kraft.version` 1), then the
//! committed batches they cover (each log batch one record of a data
//! batch, so that the checks can compare them with the committed log),
//! then a SnapshotFooter batch. They are durable once written.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use krabka_log::{AppendInfo, LogError, ReplicatedLog, SnapshotId};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{
    control_batch_of, control_type_id, ControlType, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatchMut,
    RecordBatches,
};
use krabka_protocol::{KRaftVersionRecord, Message as _, SnapshotFooterRecord, SnapshotHeaderRecord};
use krabka_raft::voters::kraft_version_record;
use krabka_raft::VoterSet;

/// One batch as a log holds it, with the control records raft tracks read
/// once (by their offsets).
#[derive(Debug)]
pub struct Stored {
    pub base: i64,
    pub last: i64,
    pub epoch: i32,
    pub bytes: Bytes,
    pub voters: Vec<(i64, VoterSet)>,
    pub kraft_versions: Vec<(i64, i16)>,
}

/// Two logs hold the same batch when its bytes, offsets and epoch agree.
impl PartialEq for Stored {
    fn eq(&self, other: &Stored) -> bool {
        (self.base, self.last, self.epoch) == (other.base, other.last, other.epoch) && self.bytes == other.bytes
    }
}

impl Stored {
    /// Reads one whole, valid batch (anything else is a bug of whoever
    /// wrote it: raft, or this log).
    pub fn parse(bytes: Bytes) -> Stored {
        let batch = RecordBatch::new(bytes).expect("one whole batch");
        batch.validate().expect("a batch with a valid CRC");
        let mut stored = Stored {
            base: batch.base_offset(),
            last: batch.last_offset(),
            epoch: batch.partition_leader_epoch(),
            bytes: batch.as_bytes().clone(),
            voters: Vec::new(),
            kraft_versions: Vec::new(),
        };
        if !batch.is_control() {
            return stored;
        }
        for record in batch.records(usize::MAX).expect("control records") {
            let record = record.expect("a control record");
            let kind = record.key.as_deref().and_then(control_type_id).and_then(ControlType::from_id);
            let Some(mut value) = record.value else { continue };
            match kind {
                Some(ControlType::KRaftVoters) => {
                    let set = VoterSet::from_record(value).expect("a VotersRecord");
                    stored.voters.push((record.offset, set));
                }
                Some(ControlType::KRaftVersion) => {
                    let version = KRaftVersionRecord::decode(&mut value, 0).expect("a KRaftVersionRecord");
                    stored.kraft_versions.push((record.offset, version.k_raft_version));
                }
                _ => {}
            }
        }
        stored
    }

    fn has_voter_records(&self) -> bool {
        !self.voters.is_empty() || !self.kraft_versions.is_empty()
    }
}

/// A snapshot as stored, and what it holds.
#[derive(Debug)]
pub struct Snapshot {
    pub bytes: Bytes,
    /// What its header's KRaftVersion and KRaftVoters records say, if it has them.
    pub kraft_version: Option<i16>,
    pub voters: Option<VoterSet>,
    /// The log batches it covers, in offset order from 0.
    pub batches: Vec<Rc<Stored>>,
}

impl Snapshot {
    /// Reads a snapshot in the shape [`encode_snapshot`] writes; a torn or
    /// garbled one is a bug (raft stores only whole ones).
    pub fn parse(bytes: Bytes) -> Snapshot {
        let batches: Vec<RecordBatch> =
            RecordBatches::new(bytes.clone()).map(|b| b.expect("a whole snapshot batch")).collect();
        let (header, rest) = batches.split_first().expect("a snapshot header batch");
        let (footer, data) = rest.split_last().expect("a snapshot footer batch");
        let kinds = |batch: &RecordBatch| -> Vec<(ControlType, Bytes)> {
            assert!(batch.is_control(), "a snapshot's first and last batches are control batches");
            let records = batch.records(usize::MAX).expect("control records").map(|r| r.expect("a record"));
            records
                .map(|r| {
                    let kind = r.key.as_deref().and_then(control_type_id).and_then(ControlType::from_id);
                    (kind.expect("a known control record"), r.value.unwrap_or_default())
                })
                .collect()
        };
        let header = kinds(header);
        assert_eq!(header[0].0, ControlType::SnapshotHeader, "a snapshot starts with its SnapshotHeader");
        assert_eq!(kinds(footer)[0].0, ControlType::SnapshotFooter, "a snapshot ends with its SnapshotFooter");
        let mut snapshot = Snapshot { bytes, kraft_version: None, voters: None, batches: Vec::new() };
        for (kind, mut value) in header.into_iter().skip(1) {
            match kind {
                ControlType::KRaftVersion => {
                    let record = KRaftVersionRecord::decode(&mut value, 0).expect("a KRaftVersionRecord");
                    snapshot.kraft_version = Some(record.k_raft_version);
                }
                ControlType::KRaftVoters => snapshot.voters = Some(VoterSet::from_record(value).expect("voters")),
                other => panic!("a {other:?} record in a snapshot header"),
            }
        }
        for batch in data {
            assert!(!batch.is_control(), "a control batch amid a snapshot's records");
            for record in batch.records(usize::MAX).expect("records") {
                let value = record.expect("a record").value.expect("a log batch");
                snapshot.batches.push(Rc::new(Stored::parse(value)));
            }
        }
        snapshot
    }

    /// The batch holding `offset`, if the snapshot covers it.
    fn entry(&self, offset: i64) -> Option<Rc<Stored>> {
        let at = self.batches.partition_point(|b| b.last < offset);
        self.batches.get(at).filter(|b| b.base <= offset).cloned()
    }
}

/// A snapshot of `batches` (the committed log from offset 0), with the
/// `kraft.version` and voter set after them, as Kafka's snapshot writer
/// lays one out.
pub fn encode_snapshot(kraft_version: i16, voters: Option<&VoterSet>, batches: &[Rc<Stored>]) -> Bytes {
    let header = SnapshotHeaderRecord { version: 0, last_contained_log_timestamp: 0, ..Default::default() };
    let header = header.to_bytes(0).expect("a SnapshotHeaderRecord encodes");
    let version = kraft_version_record(kraft_version);
    let voters = voters.map(VoterSet::to_record);
    let mut controls: Vec<(ControlType, &[u8])> = vec![(ControlType::SnapshotHeader, &header)];
    if kraft_version >= 1 {
        controls.push((ControlType::KRaftVersion, &version));
    }
    if let Some(voters) = &voters {
        controls.push((ControlType::KRaftVoters, voters));
    }
    let mut out = BytesMut::new();
    out.extend_from_slice(&control_batch_of(0, &controls, 0).expect("a header batch"));
    let mut next = controls.len() as i64;
    for chunk in batches.chunks(16) {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(next);
        for batch in chunk {
            let record = NewRecord { timestamp_ms: 0, key: None, value: Some(&batch.bytes), headers: &[] };
            builder.append(&record).expect("a snapshot record");
        }
        next += chunk.len() as i64;
        out.extend_from_slice(builder.build().expect("a snapshot batch").as_bytes());
    }
    let footer = SnapshotFooterRecord { version: 0, ..Default::default() }.to_bytes(0).expect("a footer");
    let footer = control_batch_of(next, &[(ControlType::SnapshotFooter, &footer)], 0).expect("a footer batch");
    out.extend_from_slice(&footer);
    out.freeze()
}

#[derive(Default)]
pub struct MemLog {
    start: i64,
    /// The batches holding offsets from `start` on, in offset order.
    batches: Vec<Rc<Stored>>,
    flushed: i64,
    /// The leader epoch cache, (epoch, start offset), as `PartitionLog`
    /// keeps it (not derived from the batches: it is kept as the real one is).
    epochs: Vec<(i32, i64)>,
    /// The base offsets of the batches holding KRaftVersion or KRaftVoters
    /// records, so that what the log says of the voters is found at once.
    marks: Vec<i64>,
    pub snapshots: BTreeMap<SnapshotId, Rc<Snapshot>>,
    /// The snapshot being fetched, as far as it came (lost in a crash).
    part: Option<(SnapshotId, Vec<u8>)>,
    /// The lowest offset truncated to since the simulation last looked.
    pub truncated_to: Cell<Option<i64>>,
    /// Truncations asked for inside a batch (raft should never ask).
    pub cuts_inside_batches: Cell<u64>,
}

impl MemLog {
    /// A new log holding only `snapshot` at (0, 0): `kafka-storage format
    /// --initial-controllers`'s bootstrap checkpoint.
    pub fn bootstrapped(snapshot: Bytes) -> MemLog {
        let mut log = MemLog::default();
        log.write_snapshot(SnapshotId { end_offset: 0, epoch: 0 }, &snapshot).expect("a snapshot");
        log
    }

    /// The log after a crash: what was not flushed is gone.
    pub fn crash(mut self) -> MemLog {
        let keep = self.batches.partition_point(|b| b.last < self.flushed);
        self.batches.truncate(keep);
        let end = self.log_end_offset();
        self.epochs.retain(|(_, start)| *start < end);
        self.marks.retain(|base| *base < end);
        self.truncated_to.set(None);
        self.part = None;
        self
    }

    pub fn start(&self) -> i64 {
        self.start
    }

    /// The index of the batch holding `offset` (or the first after it).
    fn position(&self, offset: i64) -> usize {
        self.batches.partition_point(|b| b.last < offset)
    }

    /// The batch holding `offset`, in the log or, below its start, in the
    /// newest snapshot.
    pub fn entry(&self, offset: i64) -> Option<Rc<Stored>> {
        if offset >= self.start {
            return self.batches.get(self.position(offset)).filter(|b| b.base <= offset).cloned();
        }
        let (id, snapshot) = self.snapshots.iter().next_back()?;
        (offset < id.end_offset).then(|| snapshot.entry(offset)).flatten()
    }

    /// Whether a batch of the log ends right before `offset` (or the log
    /// starts there).
    pub fn is_boundary(&self, offset: i64) -> bool {
        offset == self.start || self.entry(offset - 1).is_some_and(|b| b.last == offset - 1)
    }

    /// Every batch before `end`, from offset 0 (below the log start, from
    /// the newest snapshot): what a snapshot ending there covers.
    pub fn batches_before(&self, end: i64) -> Vec<Rc<Stored>> {
        let mut out: Vec<Rc<Stored>> = Vec::new();
        let mut offset = 0;
        while offset < end {
            let batch = self.entry(offset).expect("a snapshot of batches the log holds");
            offset = batch.last + 1;
            out.push(batch);
        }
        out
    }

    /// The snapshot the log starts after, if it has one.
    pub fn snapshot_at_start(&self) -> Option<&Rc<Snapshot>> {
        let from = SnapshotId { end_offset: self.start, epoch: i32::MIN };
        let to = SnapshotId { end_offset: self.start, epoch: i32::MAX };
        self.snapshots.range(from..=to).next_back().map(|(_, s)| s)
    }

    /// `kraft.version` and the voter set the log says (its latest records,
    /// else the snapshot it starts after); None for either when neither
    /// holds one. Only voter records at `before` or later are skipped when
    /// `before` is given: what the log said below that offset.
    pub fn voters_said(&self, before: Option<i64>) -> (Option<i16>, Option<(i64, VoterSet)>) {
        let limit = before.unwrap_or(i64::MAX);
        let (mut version, mut voters) = (None, None);
        for &base in self.marks.iter().rev().filter(|&&base| base >= self.start && base < limit) {
            let batch = &self.batches[self.position(base)];
            version = version.or_else(|| batch.kraft_versions.iter().rev().find(|(o, _)| *o < limit).map(|v| v.1));
            voters = voters.or_else(|| batch.voters.iter().rev().find(|(o, _)| *o < limit).cloned());
            if version.is_some() && voters.is_some() {
                break;
            }
        }
        if let Some(snapshot) = self.snapshot_at_start() {
            let at = self.start - 1;
            version = version.or(snapshot.kraft_version);
            voters = voters.or_else(|| snapshot.voters.clone().map(|set| (at, set)));
        }
        (version, voters)
    }

    /// The KRaftVoters records of the log at `from` or later, in order.
    pub fn voter_records_from(&self, from: i64) -> Vec<(i64, VoterSet)> {
        let mut out = Vec::new();
        for &base in self.marks.iter().filter(|&&base| base >= self.start) {
            let batch = &self.batches[self.position(base)];
            out.extend(batch.voters.iter().filter(|(o, _)| *o >= from).cloned());
        }
        out
    }

    fn push(&mut self, stored: Stored) {
        if stored.has_voter_records() {
            self.marks.push(stored.base);
        }
        self.batches.push(Rc::new(stored));
    }

    /// `LeaderEpochCache::assign`: a new epoch starts at `start`.
    fn assign_epoch(&mut self, epoch: i32, start: i64) {
        if epoch < 0 || self.epochs.last().is_some_and(|(e, _)| epoch <= *e) {
            return;
        }
        self.epochs.retain(|(_, s)| *s < start);
        self.epochs.push((epoch, start));
    }

    fn note_truncation(&self, offset: i64) {
        self.truncated_to.set(Some(self.truncated_to.get().map_or(offset, |t| t.min(offset))));
    }
}

impl ReplicatedLog for MemLog {
    fn append_as_leader(&mut self, records: &Bytes, epoch: i32, _now_ms: i64) -> Result<AppendInfo, LogError> {
        let first_offset = self.log_end_offset();
        let batches: Vec<RecordBatch> = RecordBatches::new(records.clone()).collect::<Result<_, _>>()?;
        for batch in &batches {
            batch.validate()?;
        }
        if self.last_epoch().is_none_or(|e| epoch > e) {
            self.assign_epoch(epoch, first_offset);
        }
        let (mut record_count, mut bytes) = (0, 0);
        for batch in batches {
            let mut buf = BytesMut::from(&batch.as_bytes()[..]);
            let mut patch = RecordBatchMut::new(&mut buf)?;
            patch.set_base_offset(self.log_end_offset());
            patch.set_partition_leader_epoch(epoch);
            let stored = Stored::parse(buf.freeze());
            record_count += i64::from(batch.record_count());
            bytes += stored.bytes.len() as u64;
            self.push(stored);
        }
        let last_offset = self.log_end_offset() - 1;
        Ok(AppendInfo { first_offset, last_offset, log_append_time_ms: -1, record_count, bytes })
    }

    /// Takes batches as `read` returns them: they must continue the log
    /// (the real log would take a gap, which raft never makes).
    fn append_as_follower(&mut self, records: &Bytes, _now_ms: i64) -> Result<AppendInfo, LogError> {
        let first_offset = self.log_end_offset();
        let batches: Vec<RecordBatch> = RecordBatches::new(records.clone()).collect::<Result<_, _>>()?;
        let mut expected = first_offset;
        for batch in &batches {
            batch.validate()?;
            if batch.base_offset() < expected || batch.last_offset() < batch.base_offset() {
                return Err(LogError::NonMonotonicOffset { offset: batch.base_offset(), log_end_offset: expected });
            }
            assert_eq!(batch.base_offset(), expected, "a follower append leaves a gap in the log");
            expected = batch.next_offset();
        }
        let (mut record_count, mut bytes) = (0, 0);
        for batch in batches {
            self.assign_epoch(batch.partition_leader_epoch(), batch.base_offset());
            record_count += i64::from(batch.record_count());
            bytes += batch.as_bytes().len() as u64;
            self.push(Stored::parse(batch.into_bytes()));
        }
        Ok(AppendInfo { first_offset, last_offset: expected - 1, log_append_time_ms: -1, record_count, bytes })
    }

    fn log_start_offset(&self) -> i64 {
        self.start
    }

    fn log_end_offset(&self) -> i64 {
        self.batches.last().map_or(self.start, |b| b.last + 1)
    }

    /// The epoch cache's latest epoch, as `PartitionLog` answers it.
    fn last_epoch(&self) -> Option<i32> {
        self.epochs.last().map(|(epoch, _)| *epoch)
    }

    /// `LeaderEpochCache::end_offset_for`: the latest epoch ends at the
    /// log end; an older one at the start of the first epoch after it
    /// (with the largest epoch at or below it); one older than every
    /// epoch known ends at the first one's start.
    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        if epoch < 0 {
            return None;
        }
        if self.last_epoch() == Some(epoch) {
            return Some((epoch, self.log_end_offset()));
        }
        let higher = self.epochs.iter().position(|(e, _)| *e > epoch)?;
        let end = self.epochs[higher].1;
        Some((higher.checked_sub(1).map_or(epoch, |floor| self.epochs[floor].0), end))
    }

    /// As `PartitionLog::truncate_to`: at or below the log start the whole
    /// log goes; otherwise the batch holding `offset` and all after it go,
    /// and the epoch cache drops the epochs starting at `offset` or later.
    fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        if offset <= self.start {
            return self.truncate_fully_and_start_at(offset, now_ms);
        }
        let cut = self.position(offset);
        if self.batches[cut].base != offset {
            self.cuts_inside_batches.set(self.cuts_inside_batches.get() + 1);
        }
        self.batches.truncate(cut);
        let end = self.log_end_offset();
        self.flushed = self.flushed.min(offset);
        self.epochs.retain(|(_, start)| *start < offset);
        self.marks.retain(|base| *base < end);
        self.note_truncation(end);
        Ok(())
    }

    fn flush(&mut self, _now_ms: i64) -> Result<(), LogError> {
        self.flushed = self.log_end_offset();
        Ok(())
    }

    fn last_flushed_offset(&self) -> i64 {
        self.flushed
    }

    /// Whole batches from the one holding `offset`, within `max_bytes` but
    /// at least one, none holding `upper_bound` or later.
    fn read(&self, offset: i64, max_bytes: u32, upper_bound: i64) -> Result<Bytes, LogError> {
        let log_end_offset = self.log_end_offset();
        if offset < self.start || offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange { offset, log_start_offset: self.start, log_end_offset });
        }
        let upper_bound = upper_bound.min(log_end_offset);
        let mut out = BytesMut::new();
        if offset >= upper_bound {
            return Ok(out.freeze());
        }
        let first = self.position(offset);
        let wanted = (max_bytes as usize).max(self.batches[first].bytes.len());
        for batch in &self.batches[first..] {
            if batch.last >= upper_bound || out.len() + batch.bytes.len() > wanted {
                break;
            }
            out.extend_from_slice(&batch.bytes);
        }
        Ok(out.freeze())
    }

    /// As `PartitionLog::delete_records_before`: the start moves up, the
    /// epoch cache's first epoch with it, and the batches wholly before it
    /// go. Durable at once: only flushed (committed) batches are cut.
    fn delete_records_before(&mut self, offset: i64, _now_ms: i64) -> Result<(), LogError> {
        assert!(offset <= self.flushed, "the log start moved past what is flushed");
        if offset > self.start {
            self.start = offset;
            if let Some(keep_from) = self.epochs.iter().rposition(|(_, s)| *s <= offset) {
                self.epochs.drain(..keep_from);
                self.epochs[0].1 = self.epochs[0].1.max(offset);
            }
        }
        let cut = self.position(offset);
        self.batches.drain(..cut);
        let first = self.batches.first().map_or(self.start, |b| b.base);
        self.marks.retain(|base| *base >= first);
        Ok(())
    }

    fn latest_snapshot(&self) -> Result<Option<(SnapshotId, Bytes)>, LogError> {
        Ok(self.snapshots.iter().next_back().map(|(id, s)| (*id, s.bytes.clone())))
    }

    fn write_snapshot(&mut self, id: SnapshotId, bytes: &[u8]) -> Result<(), LogError> {
        self.snapshots.insert(id, Rc::new(Snapshot::parse(Bytes::copy_from_slice(bytes))));
        Ok(())
    }

    fn write_snapshot_part(&mut self, id: SnapshotId, position: u64, bytes: &[u8]) -> Result<(), LogError> {
        if position == 0 {
            self.part = Some((id, Vec::new()));
        }
        let part = self.part.as_mut().filter(|(at, have)| *at == id && have.len() as u64 == position);
        let (_, have) = part.expect("a chunk where the partial snapshot ends");
        have.extend_from_slice(bytes);
        Ok(())
    }

    fn freeze_snapshot_part(&mut self, id: SnapshotId) -> Result<Option<u64>, LogError> {
        let (at, bytes) = self.part.take().expect("a partial snapshot");
        assert_eq!(at, id, "freezing another partial snapshot");
        let size = bytes.len() as u64;
        self.snapshots.insert(id, Rc::new(Snapshot::parse(Bytes::from(bytes))));
        Ok(Some(size))
    }

    fn delete_snapshot_parts(&mut self) -> Result<(), LogError> {
        self.part = None;
        Ok(())
    }

    fn delete_snapshots_before(&mut self, end_offset: i64) -> Result<(), LogError> {
        self.snapshots.retain(|id, _| id.end_offset >= end_offset);
        Ok(())
    }

    fn snapshots(&self) -> Result<Vec<(SnapshotId, u64)>, LogError> {
        Ok(self.snapshots.iter().map(|(id, s)| (*id, s.bytes.len() as u64)).collect())
    }

    fn read_snapshot(&self, id: SnapshotId, position: u64, max_bytes: u32) -> Result<Option<(u64, Bytes)>, LogError> {
        Ok(self.snapshots.get(&id).map(|s| {
            let from = (position as usize).min(s.bytes.len());
            let to = (from + max_bytes as usize).min(s.bytes.len());
            (s.bytes.len() as u64, s.bytes.slice(from..to))
        }))
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64, _now_ms: i64) -> Result<(), LogError> {
        self.batches.clear();
        self.epochs.clear();
        self.marks.clear();
        self.start = offset;
        self.flushed = offset;
        self.note_truncation(offset);
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.batches.iter().map(|b| b.bytes.len() as u64).sum()
    }
}
