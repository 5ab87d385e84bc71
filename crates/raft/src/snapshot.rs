//! Snapshots in a multi-voter quorum (KIP-630), as Kafka's raft client
//! and `KafkaMetadataLog` keep them.
//!
//! Every node snapshots on its own: whoever reads the committed log (the
//! metadata loader) encodes its state at a committed offset when
//! [`SnapshotPolicy`] says one is due, and [`RaftNode::store_snapshot`]
//! keeps it. Retention then drops the oldest snapshots, and the log before
//! the next one with each, while the log and snapshots hold more than
//! `metadata.max.retention.bytes` or the oldest snapshot's header says it
//! is older than `metadata.max.retention.ms` (checked after each snapshot
//! stored and every minute); the newest snapshot always stays, and the log
//! never starts anywhere but at a snapshot's end.
//!
//! A follower whose fetch the leader's log no longer holds (it starts
//! after a snapshot) is answered with the leader's newest snapshot id; it
//! fetches that snapshot in FetchSnapshot chunks, stores it, and replaces
//! its whole log with it. The log is cut only at a snapshot, a snapshot is
//! only of committed offsets, so nothing committed is ever lost.

use std::collections::BTreeMap;

use krabka_log::{LogError, ReplicatedLog, SnapshotId};

use crate::message::{Action, FetchSnapshotResponse, Message, RaftError};
use crate::node::{Download, RaftNode, Role};
use crate::voters::{ReplicaKey, SNAPSHOT_HEAD_BYTES};
use bytes::Bytes;
use krabka_protocol::records::{control_type_id, ControlType, RecordBatches};
use krabka_protocol::{Message as _, SnapshotHeaderRecord};

/// The 8-byte base offset and 4-byte length that start every batch.
const LOG_OVERHEAD: u32 = 12;

/// When a node's state is due for a snapshot: after
/// `metadata.log.max.record.bytes.between.snapshots` committed bytes, or
/// once `metadata.log.max.snapshot.interval.ms` passed with anything new
/// committed (Kafka's SnapshotGenerator).
#[derive(Clone, Debug)]
pub struct SnapshotPolicy {
    every_bytes: u64,
    interval_ms: i64,
    bytes_since: u64,
    last_ms: i64,
}

impl SnapshotPolicy {
    pub fn new(every_bytes: u64, interval_ms: i64, now_ms: i64) -> Self {
        SnapshotPolicy { every_bytes, interval_ms, bytes_since: 0, last_ms: now_ms }
    }

    /// `bytes` more were committed (and applied).
    pub fn committed(&mut self, bytes: u64) {
        self.bytes_since += bytes;
    }

    pub fn due(&self, now_ms: i64) -> bool {
        let by_time = self.interval_ms > 0 && self.bytes_since > 0 && now_ms - self.last_ms >= self.interval_ms;
        self.bytes_since >= self.every_bytes || by_time
    }

    /// A snapshot was taken (or loaded): counting starts again.
    pub fn taken(&mut self, now_ms: i64) {
        self.bytes_since = 0;
        self.last_ms = now_ms;
    }
}

/// What a fetch from an offset, after an entry of an epoch, finds in the
/// leader's log (Kafka's `ValidOffsetAndEpoch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OffsetCheck {
    Valid,
    /// The fetcher's log leaves the leader's: its largest epoch at or
    /// below the fetcher's last, and where that epoch ends.
    Diverging(i32, i64),
    /// Only this snapshot (the newest) holds what the fetcher needs.
    Snapshot(SnapshotId),
}

/// The last contained log timestamp in the SnapshotHeader that a
/// snapshot's first batch (`first`) starts with.
fn header_timestamp(first: Bytes) -> Option<i64> {
    let batch = RecordBatches::new(first).next()?.ok()?;
    if !batch.is_control() {
        return None;
    }
    let record = batch.records(usize::MAX).ok()?.next()?.ok()?;
    let is_header = record.key.as_deref().and_then(control_type_id) == Some(ControlType::SnapshotHeader.id());
    let mut value = record.value.filter(|_| is_header)?;
    Some(SnapshotHeaderRecord::decode(&mut value, 0).ok()?.last_contained_log_timestamp)
}

impl<L: ReplicatedLog> RaftNode<L> {
    /// The newest snapshot this node holds.
    pub fn latest_snapshot_id(&self) -> Option<SnapshotId> {
        self.snapshots.keys().next_back().copied()
    }

    fn earliest_snapshot_id(&self) -> Option<SnapshotId> {
        self.snapshots.keys().next().copied()
    }

    /// The epoch of the log's last entry, or when it holds none, of the
    /// snapshot it starts after (Kafka's `lastFetchedEpoch`).
    pub(crate) fn last_fetched_epoch(&self) -> i32 {
        if let Some(epoch) = self.log.last_epoch() {
            return epoch;
        }
        let start = self.log.log_start_offset();
        self.latest_snapshot_id().filter(|id| id.end_offset == start).map_or(0, |id| id.epoch)
    }

    /// The largest epoch at or below `epoch` and where it ends, the log's
    /// snapshot standing in for the epochs it covers (Kafka's
    /// `KafkaMetadataLog.endOffsetForEpoch`).
    pub(crate) fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        match (self.log.end_offset_for_epoch(epoch), self.earliest_snapshot_id()) {
            (Some((found, end)), Some(snapshot)) if end == snapshot.end_offset && found == epoch => {
                (snapshot.epoch, snapshot.end_offset)
            }
            (Some(found), _) => found,
            (None, _) => (self.last_fetched_epoch(), self.log.log_end_offset()),
        }
    }

    /// Kafka's `validateOffsetAndEpoch`: a fetch before the log start (or
    /// at it, after another epoch than the snapshot there, or after an
    /// epoch older than any the log holds) needs the newest snapshot; one
    /// whose last epoch ends elsewhere in this log diverges from it.
    pub(crate) fn check_offset_and_epoch(&self, offset: i64, epoch: i32) -> OffsetCheck {
        let start = self.log.log_start_offset();
        if start == 0 && offset == 0 {
            return OffsetCheck::Valid;
        }
        if let Some(earliest) = self.earliest_snapshot_id() {
            if offset < start || (offset == start && epoch != earliest.epoch) || epoch < earliest.epoch {
                let latest = self.latest_snapshot_id().expect("an earliest snapshot is a snapshot");
                return OffsetCheck::Snapshot(latest);
            }
        }
        debug_assert!(start == 0 || self.earliest_snapshot_id().is_some(), "a log that starts after no snapshot");
        let (end_epoch, end) = self.end_offset_for_epoch(epoch);
        if end_epoch != epoch || end < offset {
            OffsetCheck::Diverging(end_epoch, end)
        } else {
            OffsetCheck::Valid
        }
    }

    /// Keeps `bytes`, the caller's state after every offset before
    /// `id.end_offset` (of epoch `id.epoch`, its last entry's), as a
    /// snapshot, then applies the retention. False when it is not taken:
    /// it is not past the log start, or already stored. The offset must be
    /// committed and the epoch the log's there.
    pub fn store_snapshot(&mut self, id: SnapshotId, bytes: &[u8], now_ms: i64) -> Result<bool, LogError> {
        if id.end_offset <= self.log.log_start_offset() || self.snapshots.contains_key(&id) {
            return Ok(false);
        }
        let committed = id.end_offset <= self.high_watermark;
        if !committed || self.check_offset_and_epoch(id.end_offset, id.epoch) != OffsetCheck::Valid {
            debug_assert!(false, "snapshot {id:?} is not of this log's committed offsets");
            return Ok(false);
        }
        // KIP-853: the voter set in force there goes in the header batch.
        let (kraft_version, voters) = self.voters.at(id.end_offset);
        let with_voters = crate::voters::with_kraft_control(bytes, kraft_version, voters.as_ref());
        let bytes = with_voters.as_deref().unwrap_or(bytes);
        self.log.write_snapshot(id, bytes)?;
        self.snapshots.insert(id, bytes.len() as u64);
        self.clean_snapshots(now_ms)?;
        Ok(true)
    }

    /// Kafka's `KafkaMetadataLog.maybeClean`: retention by size, then by
    /// time. Each drops the oldest snapshot and starts the log at the next
    /// one; the newest always stays.
    pub(crate) fn clean_snapshots(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.clean_snapshots_by_size(now_ms)?;
        self.clean_snapshots_by_time(now_ms)
    }

    /// While the log and snapshots hold more than `retention_max_bytes`.
    fn clean_snapshots_by_size(&mut self, now_ms: i64) -> Result<(), LogError> {
        let Ok(limit) = u64::try_from(self.config.retention_max_bytes) else { return Ok(()) };
        let ids: Vec<(SnapshotId, u64)> = self.snapshots.iter().map(|(id, size)| (*id, *size)).collect();
        let mut snapshot_bytes: u64 = ids.iter().map(|(_, size)| size).sum();
        for pair in ids.windows(2) {
            let ((_, size), (next, _)) = (pair[0], pair[1]);
            if self.log.size_bytes() + snapshot_bytes <= limit {
                break;
            }
            snapshot_bytes -= size;
            self.delete_before_snapshot(next, now_ms)?;
        }
        Ok(())
    }

    /// While the oldest snapshot's last contained log timestamp (in its
    /// SnapshotHeader) is more than `retention_ms` ago, as Kafka's
    /// `cleanSnapshotsRetentionMs`: a snapshot without one never expires.
    fn clean_snapshots_by_time(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.config.retention_ms < 0 {
            return Ok(());
        }
        let ids: Vec<SnapshotId> = self.snapshots.keys().copied().collect();
        for pair in ids.windows(2) {
            let (oldest, next) = (pair[0], pair[1]);
            let expired = self.snapshot_timestamp(oldest)?.is_some_and(|at| now_ms - at > self.config.retention_ms);
            if !expired || !self.delete_before_snapshot(next, now_ms)? {
                break;
            }
        }
        Ok(())
    }

    /// Starts the log at snapshot `next` and drops the snapshots before it
    /// (Kafka's `deleteBeforeSnapshot`); false when the log starts there
    /// or later already.
    fn delete_before_snapshot(&mut self, next: SnapshotId, now_ms: i64) -> Result<bool, LogError> {
        if next.end_offset <= self.log.log_start_offset() {
            return Ok(false);
        }
        debug_assert!(next.end_offset <= self.high_watermark, "the log cut past what is committed");
        debug_assert!(Some(next) <= self.latest_snapshot_id(), "the log cut past the newest snapshot");
        self.log.delete_records_before(next.end_offset, now_ms)?;
        self.log.delete_snapshots_before(next.end_offset)?;
        self.snapshots.retain(|id, _| id.end_offset >= next.end_offset);
        Ok(true)
    }

    /// The last contained log timestamp snapshot `id`'s SnapshotHeader
    /// records; None when it has none. Only its first batch is read.
    fn snapshot_timestamp(&self, id: SnapshotId) -> Result<Option<i64>, LogError> {
        let Some((_, head)) = self.log.read_snapshot(id, 0, LOG_OVERHEAD)? else { return Ok(None) };
        let Some(length) = head.get(8..12).map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes"))) else {
            return Ok(None);
        };
        let Some(whole) = u32::try_from(length).ok().and_then(|l| l.checked_add(LOG_OVERHEAD)) else {
            return Ok(None);
        };
        let first = self.log.read_snapshot(id, 0, whole)?;
        Ok(first.and_then(|(_, bytes)| header_timestamp(bytes)))
    }

    /// FetchSnapshot, answered by the leader: a chunk of the snapshot from
    /// the position asked for. A voter fetching a snapshot counts as
    /// fetching for the leader's quorum check.
    pub(crate) fn on_fetch_snapshot_request(
        &mut self,
        now_ms: i64,
        from: ReplicaKey,
        epoch: i32,
        snapshot: SnapshotId,
        (position, max_bytes): (i64, i32),
    ) -> Result<(), LogError> {
        let mut answer = FetchSnapshotResponse {
            epoch: self.epoch,
            leader_id: self.leader_id(),
            error: RaftError::None,
            snapshot,
            size: 0,
            position,
            bytes: Default::default(),
        };
        answer.error = if epoch < self.epoch {
            RaftError::FencedLeaderEpoch
        } else if epoch > self.epoch {
            RaftError::UnknownLeaderEpoch
        } else if !matches!(self.role, Role::Leader { .. }) {
            RaftError::NotLeader
        } else if !self.snapshots.contains_key(&snapshot) {
            RaftError::SnapshotNotFound
        } else {
            self.read_snapshot_chunk(&mut answer, max_bytes)?
        };
        // Only a voter of this key counts (Kafka's quorum check): an
        // observer's progress is its fetches'.
        let (key, is_voter) = self.progress_key(from);
        if let (Role::Leader { progress, .. }, true, RaftError::None) = (&mut self.role, is_voter, answer.error) {
            progress.entry(key).or_default().last_fetch_ms = Some(now_ms);
        }
        self.send(from.id, Message::FetchSnapshotResponse(answer));
        Ok(())
    }

    /// As Kafka's leader: at most the request's MaxBytes of the snapshot
    /// from the position (Kafka bounds the slice by nothing else).
    fn read_snapshot_chunk(&self, answer: &mut FetchSnapshotResponse, max_bytes: i32) -> Result<RaftError, LogError> {
        let Ok(position) = u64::try_from(answer.position) else { return Ok(RaftError::PositionOutOfRange) };
        let max_bytes = u32::try_from(max_bytes).unwrap_or(0);
        match self.log.read_snapshot(answer.snapshot, position, max_bytes)? {
            None => Ok(RaftError::SnapshotNotFound),
            Some((size, _)) if position >= size => Ok(RaftError::PositionOutOfRange),
            Some((size, bytes)) => {
                answer.size = size as i64;
                answer.bytes = bytes;
                Ok(RaftError::None)
            }
        }
    }

    /// The leader sent this follower to snapshot `id`: it starts fetching
    /// it (or, holding it already, installs it at once).
    pub(crate) fn start_download(&mut self, id: SnapshotId, now_ms: i64) -> Result<(), LogError> {
        if self.snapshots.contains_key(&id) {
            return self.install_snapshot(id, now_ms);
        }
        if let Role::Follower { download, .. } = &mut self.role {
            // The partial file is created with the first chunk.
            *download = Some(Download { id, received: 0 });
        }
        Ok(())
    }

    /// A chunk of the snapshot being fetched, or why there is none; a late
    /// or repeated chunk (not where the download stands) is ignored.
    pub(crate) fn on_fetch_snapshot_response(
        &mut self,
        now_ms: i64,
        from: i32,
        response: FetchSnapshotResponse,
    ) -> Result<(), LogError> {
        if response.epoch > self.epoch || (response.epoch == self.epoch && response.leader_id.is_some()) {
            self.observe(now_ms, response.epoch, response.leader_id)?;
        }
        let timeout = self.config.fetch_timeout_ms;
        let Role::Follower { leader, fetch_deadline, last_sent, heard_ms, download } = &mut self.role else {
            return Ok(());
        };
        let Some(current) = download.as_mut() else { return Ok(()) };
        if *leader != from || response.epoch != self.epoch {
            return Ok(());
        }
        let (id, error) = (response.snapshot, response.error);
        // As Kafka's follower, before it looks at the id (Kafka's leader
        // leaves it unset on an error): the leader dropped the snapshot (a
        // newer one replaced it), the position is off, or the id is none:
        // start over from a fetch.
        let start_over = matches!(error, RaftError::SnapshotNotFound | RaftError::PositionOutOfRange)
            || (error == RaftError::None && (id.end_offset < 0 || id.epoch < 0));
        let received = current.received;
        if !start_over && (error != RaftError::None || id != current.id || response.position != received as i64) {
            // Another error, or a late or repeated chunk: nothing to act on.
            return Ok(());
        }
        *fetch_deadline = now_ms + timeout;
        *heard_ms = Some(now_ms);
        *last_sent = None;
        let have = received + response.bytes.len() as u64;
        let size = u64::try_from(response.size).unwrap_or(0);
        if start_over || response.bytes.is_empty() || have > size {
            // Over again: told so, no progress, or more than the leader said
            // there was.
            *download = None;
            self.log.delete_snapshot_parts()?;
        } else {
            self.log.write_snapshot_part(id, received, &response.bytes)?;
            current.received = have;
            if have == size {
                *download = None;
                self.finish_download(id, now_ms)?;
            }
        }
        self.send_fetch(now_ms);
        Ok(())
    }

    /// The whole snapshot `id` is in the log's partial snapshot: stored
    /// and installed when it checks out; when it does not (the log drops
    /// it), the next fetch starts over.
    fn finish_download(&mut self, id: SnapshotId, now_ms: i64) -> Result<(), LogError> {
        let Some(size) = self.log.freeze_snapshot_part(id)? else { return Ok(()) };
        self.snapshots.insert(id, size);
        self.install_snapshot(id, now_ms)
    }

    /// Replaces the whole log with stored snapshot `id` (Kafka's
    /// `truncateToLatestSnapshot`). The leader sent the follower to it
    /// because its log ends before the leader's start or leaves the
    /// leader's log before it, so nothing kept past it could be trusted;
    /// and the snapshot is committed, so the high watermark moves to it.
    pub(crate) fn install_snapshot(&mut self, id: SnapshotId, now_ms: i64) -> Result<(), LogError> {
        debug_assert!(self.high_watermark <= id.end_offset, "a snapshot behind the high watermark");
        self.log.truncate_fully_and_start_at(id.end_offset, now_ms)?;
        self.log.delete_snapshots_before(id.end_offset)?;
        // The voter set is in the snapshot's first batch (KIP-853).
        let head = self.log.read_snapshot(id, 0, SNAPSHOT_HEAD_BYTES)?.map(|(_, bytes)| bytes).unwrap_or_default();
        self.voters.reset_to_snapshot(id.end_offset, &head);
        let kept: BTreeMap<SnapshotId, u64> = self.snapshots.split_off(&id);
        self.snapshots = kept;
        self.actions.push(Action::SnapshotInstalled { id });
        if id.end_offset > self.high_watermark {
            self.high_watermark = id.end_offset;
            self.actions.push(Action::Committed { high_watermark: id.end_offset });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::RaftConfig;
    use bytes::Bytes;
    use krabka_log::{open_replicated_log, LogConfig, PartitionLog};
    use krabka_protocol::records::control_batch;

    fn config() -> RaftConfig {
        RaftConfig {
            node_id: 1,
            voters: vec![1, 2, 3],
            election_timeout_ms: 100,
            fetch_timeout_ms: 300,
            fetch_max_wait_ms: 50,
            retry_backoff_ms: 60,
            request_timeout_ms: 2000,
            membership: Default::default(),
            max_fetch_bytes: 1 << 20,
            fetch_snapshot_max_bytes: 1 << 20,
            retention_max_bytes: -1,
            retention_ms: -1,
            seed: 7,
        }
    }

    /// The smallest whole snapshot: a footer control batch.
    fn snapshot_bytes() -> Vec<u8> {
        control_batch(0, ControlType::SnapshotFooter, &[0, 0, 0, 0], 1).unwrap().to_vec()
    }

    /// A log of `batches` one-record batches of epoch 1, then reopened
    /// after snapshot `id` was stored beside it (as a crash between storing
    /// a fetched snapshot and replacing the log leaves it).
    fn reopened_after(dir: &std::path::Path, batches: usize, id: SnapshotId) -> RaftNode<PartitionLog> {
        let mut log = open_replicated_log(dir, LogConfig::default(), true, 1).unwrap();
        for _ in 0..batches {
            crate::batch::append_and_flush(&mut log, &[Bytes::from_static(b"v")], 1, 1).unwrap();
        }
        log.write_snapshot(id, &snapshot_bytes()).unwrap();
        drop(log);
        let log = open_replicated_log(dir, LogConfig::default(), false, 1).unwrap();
        RaftNode::open(config(), log, None, 0).unwrap()
    }

    #[test]
    fn a_snapshot_past_the_log_replaces_it_when_the_node_opens() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId { end_offset: 10, epoch: 2 };
        let node = reopened_after(dir.path(), 3, id);
        assert_eq!((node.log().log_start_offset(), node.log().log_end_offset()), (10, 10));
        assert_eq!(node.log_end(), (2, 10), "the log ends where the snapshot does, in its epoch");
        assert_eq!(node.latest_snapshot_id(), Some(id));
        // Committed up to the snapshot, but what the quorum committed is
        // not known until the leader tells it.
        assert_eq!((node.high_watermark(), node.known_high_watermark()), (10, None));
    }

    /// The one message of `actions` to node 2.
    fn sent(actions: Vec<Action>) -> Message {
        let mut to_leader = actions.into_iter().filter_map(|a| match a {
            Action::Send { to: 2, message } => Some(message),
            _ => None,
        });
        to_leader.next().expect("a message to the leader")
    }

    /// A new follower of leader 2 in epoch 1, sent to snapshot `id` (its
    /// log is empty), with the FetchSnapshot request it sends.
    fn offered(dir: &std::path::Path, id: SnapshotId) -> (RaftNode<PartitionLog>, Message) {
        let log = open_replicated_log(dir, LogConfig::default(), true, 1).unwrap();
        let mut node = RaftNode::open(config(), log, None, 0).unwrap();
        node.handle(1, 2, Message::BeginQuorumEpoch { epoch: 1 }).unwrap();
        let offer = crate::message::FetchResponse {
            epoch: 1,
            leader_id: Some(2),
            error: RaftError::None,
            fetch_offset: 0,
            last_fetched_epoch: 0,
            high_watermark: 40,
            log_start_offset: 40,
            records: Bytes::new(),
            diverging_epoch: None,
            snapshot: Some(id),
        };
        let asked = sent(node.handle(2, 2, Message::FetchResponse(offer)).unwrap());
        (node, asked)
    }

    #[test]
    fn a_follower_starts_over_when_the_leader_no_longer_has_the_snapshot_whatever_id_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId { end_offset: 40, epoch: 1 };
        let (mut node, asked) = offered(dir.path(), id);
        assert_eq!(
            asked,
            Message::FetchSnapshotRequest {
                epoch: 1,
                snapshot: id,
                position: 0,
                directory_id: krabka_protocol::Uuid::ZERO,
                max_bytes: 1 << 20
            }
        );
        // Kafka's leader answers SNAPSHOT_NOT_FOUND with the id unset (0, 0).
        let gone = FetchSnapshotResponse {
            epoch: 1,
            leader_id: Some(2),
            error: RaftError::SnapshotNotFound,
            snapshot: SnapshotId { end_offset: 0, epoch: 0 },
            size: 0,
            position: 0,
            bytes: Bytes::new(),
        };
        let next = sent(node.handle(3, 2, Message::FetchSnapshotResponse(gone)).unwrap());
        let Message::FetchRequest { epoch: 1, fetch_offset: 0, last_fetched_epoch: 0, directory_id, .. } = next else {
            panic!("not a fetch from the log start: {next:?}")
        };
        assert_eq!(directory_id, krabka_protocol::Uuid::ZERO);
    }

    #[test]
    fn a_snapshot_within_the_log_leaves_it_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId { end_offset: 2, epoch: 1 };
        let node = reopened_after(dir.path(), 3, id);
        // The log opens after its newest snapshot and keeps what follows it.
        assert_eq!((node.log().log_start_offset(), node.log().log_end_offset()), (2, 3));
        assert_eq!(node.log_end(), (1, 3));
        assert_eq!(node.check_offset_and_epoch(1, 1), OffsetCheck::Snapshot(id));
        assert_eq!(node.check_offset_and_epoch(2, 1), OffsetCheck::Valid);
        assert_eq!(node.check_offset_and_epoch(3, 1), OffsetCheck::Valid);
    }

    /// Leader 2's chunk of snapshot `id` (of `size` bytes) at `position`.
    fn chunk(id: SnapshotId, size: usize, position: usize, bytes: &[u8]) -> FetchSnapshotResponse {
        FetchSnapshotResponse {
            epoch: 1,
            leader_id: Some(2),
            error: RaftError::None,
            snapshot: id,
            size: size as i64,
            position: position as i64,
            bytes: Bytes::copy_from_slice(bytes),
        }
    }

    fn files(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.retain(|name| name.contains(".checkpoint"));
        names.sort();
        names
    }

    #[test]
    fn a_fetched_snapshot_goes_to_a_partial_file_that_a_restart_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId { end_offset: 40, epoch: 1 };
        let bytes = snapshot_bytes();
        let (mut node, _) = offered(dir.path(), id);
        let third = bytes.len() / 3;
        let next = sent(
            node.handle(3, 2, Message::FetchSnapshotResponse(chunk(id, bytes.len(), 0, &bytes[..third]))).unwrap(),
        );
        assert_eq!(
            next,
            Message::FetchSnapshotRequest {
                epoch: 1,
                snapshot: id,
                position: third as i64,
                directory_id: krabka_protocol::Uuid::ZERO,
                max_bytes: 1 << 20,
            }
        );
        // The chunk is on disk, under a name no reader takes for a snapshot.
        let part = format!("{}.part", id.file_name());
        assert_eq!(files(dir.path()), vec![part.clone()]);
        assert_eq!(std::fs::read(dir.path().join(&part)).unwrap(), &bytes[..third]);
        assert_eq!(node.latest_snapshot_id(), None);
        // kill -9 here: the partial file is gone when the log opens again.
        drop(node);
        let log = open_replicated_log(dir.path(), LogConfig::default(), false, 1).unwrap();
        assert_eq!(files(dir.path()), Vec::<String>::new());
        assert!(log.latest_snapshot().unwrap().is_none());
        let node = RaftNode::open(config(), log, None, 0).unwrap();
        assert_eq!((node.latest_snapshot_id(), node.log().log_start_offset()), (None, 0));
    }

    #[test]
    fn a_fetched_snapshot_is_renamed_into_place_once_whole() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId { end_offset: 40, epoch: 1 };
        let bytes = snapshot_bytes();
        let (mut node, _) = offered(dir.path(), id);
        let third = bytes.len() / 3;
        for (at, to) in [(0, third), (third, 2 * third), (2 * third, bytes.len())] {
            let answer = chunk(id, bytes.len(), at, &bytes[at..to]);
            node.handle(3 + at as i64, 2, Message::FetchSnapshotResponse(answer)).unwrap();
        }
        assert_eq!(files(dir.path()), vec![id.file_name()]);
        assert_eq!(std::fs::read(dir.path().join(id.file_name())).unwrap(), bytes);
        assert_eq!(node.latest_snapshot_id(), Some(id));
        assert_eq!((node.log().log_start_offset(), node.high_watermark()), (40, 40));
        // And it is the snapshot the log opens after.
        drop(node);
        let log = open_replicated_log(dir.path(), LogConfig::default(), false, 1).unwrap();
        assert_eq!(log.latest_snapshot().unwrap().map(|(at, _)| at), Some(id));
    }

    #[test]
    fn a_fetched_snapshot_that_is_not_whole_is_dropped_and_fetching_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let id = SnapshotId { end_offset: 40, epoch: 1 };
        let mut bytes = snapshot_bytes();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let (mut node, _) = offered(dir.path(), id);
        let next = sent(node.handle(3, 2, Message::FetchSnapshotResponse(chunk(id, bytes.len(), 0, &bytes))).unwrap());
        let Message::FetchRequest { epoch: 1, fetch_offset: 0, last_fetched_epoch: 0, .. } = next else {
            panic!("not a fetch from the log start: {next:?}")
        };
        assert_eq!(files(dir.path()), Vec::<String>::new());
        assert_eq!(node.latest_snapshot_id(), None);
    }

    /// Node 1, the only voter, elected leader; with the time after that.
    fn single_voter_leader(dir: &std::path::Path, retention_ms: i64) -> (RaftNode<PartitionLog>, i64) {
        let log = open_replicated_log(dir, LogConfig::default(), true, 1).unwrap();
        let config = RaftConfig { voters: vec![1], retention_ms, ..config() };
        let mut node = RaftNode::open(config, log, None, 0).unwrap();
        let mut now = 1_000;
        while node.role() != crate::node::RoleName::Leader {
            node.tick(now).unwrap();
            now += 1;
            assert!(now < 2_000, "a single voter elects itself");
        }
        (node, now)
    }

    /// The leader stores `bytes` as a snapshot of its log after one more
    /// value, committed (a single voter commits what it flushed).
    fn snapshot_after_a_value(node: &mut RaftNode<PartitionLog>, now: i64, bytes: &[u8]) -> SnapshotId {
        node.propose(&[Bytes::from_static(b"v")], now).unwrap().expect("the leader appends");
        node.tick(now).unwrap();
        let end = node.log().log_end_offset();
        assert_eq!(node.high_watermark(), end);
        let id = SnapshotId { end_offset: end, epoch: node.epoch() };
        assert!(node.store_snapshot(id, bytes, now).unwrap());
        id
    }

    #[test]
    fn the_leader_sends_at_most_the_requests_max_bytes_of_a_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let (mut node, now) = single_voter_leader(dir.path(), -1);
        let bytes = snapshot_of(1);
        let size = bytes.len();
        let id = snapshot_after_a_value(&mut node, now, &bytes);
        let epoch = node.epoch();
        let mut answer = |position: usize, max_bytes: i32| {
            let directory_id = krabka_protocol::Uuid::ZERO;
            let ask = Message::FetchSnapshotRequest {
                epoch,
                snapshot: id,
                position: position as i64,
                directory_id,
                max_bytes,
            };
            match sent(node.handle(now, 2, ask).unwrap()) {
                Message::FetchSnapshotResponse(answer) => answer,
                other => panic!("{other:?}"),
            }
        };
        // At the limit, one byte under it, and past it.
        for (max_bytes, length) in [(size, size), (size - 1, size - 1), (size + 1, size), (1 << 20, size)] {
            let got = answer(0, max_bytes as i32);
            assert_eq!((got.error, got.size, got.bytes.len()), (RaftError::None, size as i64, length), "{max_bytes}");
        }
        let rest = answer(size - 1, (size - 1) as i32);
        assert_eq!((rest.bytes.len(), rest.position), (1, size as i64 - 1));
        assert_eq!(rest.bytes[..], bytes[size - 1..]);
    }

    /// A snapshot whose SnapshotHeader says it holds the log up to `at`.
    fn snapshot_of(at: i64) -> Vec<u8> {
        let header = SnapshotHeaderRecord { version: 0, last_contained_log_timestamp: at, ..Default::default() };
        let header = header.to_bytes(0).unwrap();
        let mut out = control_batch(0, ControlType::SnapshotHeader, &header[..], at).unwrap().to_vec();
        out.extend_from_slice(&snapshot_bytes());
        out
    }

    #[test]
    fn snapshots_older_than_the_retention_time_go_with_the_log_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let (mut node, now) = single_voter_leader(dir.path(), 10_000);
        let ids: Vec<SnapshotId> = [1_000, 55_000, 58_000]
            .into_iter()
            .map(|at| snapshot_after_a_value(&mut node, now, &snapshot_of(at)))
            .collect();
        let kept = |node: &RaftNode<PartitionLog>| node.snapshots.keys().copied().collect::<Vec<_>>();
        // Before the cleaner's minute is up, nothing goes.
        node.tick(59_000).unwrap();
        assert_eq!(kept(&node), ids);
        // Then the snapshot of 1,000 (more than 10 s before 60,000) goes,
        // the log starts at the next, and the one of 55,000 stops it.
        node.tick(60_000).unwrap();
        assert_eq!(kept(&node), ids[1..]);
        assert_eq!(node.log().log_start_offset(), ids[1].end_offset);
        assert_eq!(krabka_log::snapshots::list(dir.path()).unwrap(), ids[1..]);
        // A minute on, that one goes too; the newest always stays.
        node.tick(120_000).unwrap();
        assert_eq!((kept(&node), node.log().log_start_offset()), (vec![ids[2]], ids[2].end_offset));
        node.tick(10_000_000).unwrap();
        assert_eq!(node.latest_snapshot_id(), Some(ids[2]));
    }
}
