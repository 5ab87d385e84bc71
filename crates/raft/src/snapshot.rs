//! Snapshots in a multi-voter quorum (KIP-630), as Kafka's raft client
//! and `KafkaMetadataLog` keep them.
//!
//! Every node snapshots on its own: whoever reads the committed log (the
//! metadata loader) encodes its state at a committed offset when
//! [`SnapshotPolicy`] says one is due, and [`RaftNode::store_snapshot`]
//! keeps it. Retention (`metadata.max.retention.bytes`) then drops the
//! oldest snapshots, and the log before the next one with each, while the
//! log and snapshots hold more than the limit; the newest snapshot always
//! stays, and the log never starts anywhere but at a snapshot's end.
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

    /// Kafka's snapshot retention by size: while the log and snapshots hold
    /// more than `retention_max_bytes`, the oldest snapshot goes and the
    /// log starts at the next one. The newest always stays.
    fn clean_snapshots(&mut self, now_ms: i64) -> Result<(), LogError> {
        let Ok(limit) = u64::try_from(self.config.retention_max_bytes) else { return Ok(()) };
        let ids: Vec<(SnapshotId, u64)> = self.snapshots.iter().map(|(id, size)| (*id, *size)).collect();
        let mut snapshot_bytes: u64 = ids.iter().map(|(_, size)| size).sum();
        for pair in ids.windows(2) {
            let ((_, size), (next, _)) = (pair[0], pair[1]);
            if self.log.size_bytes() + snapshot_bytes <= limit {
                break;
            }
            snapshot_bytes -= size;
            if next.end_offset <= self.log.log_start_offset() {
                continue;
            }
            debug_assert!(next.end_offset <= self.high_watermark, "the log cut past what is committed");
            self.log.delete_records_before(next.end_offset, now_ms)?;
            self.log.delete_snapshots_before(next.end_offset)?;
            self.snapshots.retain(|id, _| id.end_offset >= next.end_offset);
        }
        Ok(())
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
        position: i64,
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
            self.read_snapshot_chunk(&mut answer)?
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

    fn read_snapshot_chunk(&self, answer: &mut FetchSnapshotResponse) -> Result<RaftError, LogError> {
        let Ok(position) = u64::try_from(answer.position) else { return Ok(RaftError::PositionOutOfRange) };
        match self.log.read_snapshot(answer.snapshot, position, self.config.max_fetch_bytes)? {
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
            *download = Some(Download { id, bytes: Vec::new() });
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
        if start_over {
            *download = None;
        } else if error != RaftError::None || id != current.id || response.position != current.bytes.len() as i64 {
            // Another error, or a late or repeated chunk: nothing to act on.
            return Ok(());
        } else {
            current.bytes.extend_from_slice(&response.bytes);
        }
        *fetch_deadline = now_ms + timeout;
        *heard_ms = Some(now_ms);
        *last_sent = None;
        let have = download.as_ref().map(|d| d.bytes.len() as i64);
        if have == Some(response.size) {
            let Download { id, bytes } = download.take().expect("a download in progress");
            self.log.write_snapshot(id, &bytes)?;
            self.snapshots.insert(id, bytes.len() as u64);
            self.install_snapshot(id, now_ms)?;
        } else if have.is_some_and(|have| have > response.size) || response.bytes.is_empty() {
            // More than the leader said there was, or no progress: over again.
            *download = None;
        }
        self.send_fetch(now_ms);
        Ok(())
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
    use krabka_protocol::records::{control_batch, ControlType};

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
            retention_max_bytes: -1,
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

    #[test]
    fn a_follower_starts_over_when_the_leader_no_longer_has_the_snapshot_whatever_id_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let log = open_replicated_log(dir.path(), LogConfig::default(), true, 1).unwrap();
        let mut node = RaftNode::open(config(), log, None, 0).unwrap();
        node.handle(1, 2, Message::BeginQuorumEpoch { epoch: 1 }).unwrap();
        let id = SnapshotId { end_offset: 40, epoch: 1 };
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
        let directory_id = krabka_protocol::Uuid::ZERO;
        assert_eq!(asked, Message::FetchSnapshotRequest { epoch: 1, snapshot: id, position: 0, directory_id });
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
        assert_eq!(next, Message::FetchRequest { epoch: 1, fetch_offset: 0, last_fetched_epoch: 0, directory_id });
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
}
