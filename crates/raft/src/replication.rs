//! Pull-based replication (KIP-595's Fetch) of a [`RaftNode`]: the
//! follower's fetch loop and truncation, the leader's answers, held
//! fetches, high watermark and quorum check.
//!
//! A follower fetches from its log end with the epoch of its last entry.
//! The leader checks that pair against its own log: when its end offset
//! for that epoch is before the fetch offset (or the epoch is not its), it
//! answers with the diverging epoch, and the follower truncates to the
//! smaller of that end offset and its own for the epoch, then fetches
//! again. Otherwise the fetch offset is what the follower holds in common
//! with the leader, and the leader answers with the batches from it (or
//! holds the fetch until there are some, the high watermark moves or
//! `fetch_max_wait_ms` passes).

use bytes::Bytes;
use krabka_log::{AppendInfo, LogError, ReplicatedLog};
use krabka_protocol::Uuid;

use crate::batch;
use crate::message::{Action, FetchBounds, FetchResponse, Message, RaftError};
use crate::node::{HeldFetch, RaftNode, Role};
use crate::served::Served;
use crate::snapshot::OffsetCheck;
use crate::voters::{ReplicaKey, VoterNode, VoterSet};

impl<L: ReplicatedLog> RaftNode<L> {
    /// The follower's next request: a Fetch from its log end, or while it
    /// fetches a snapshot, FetchSnapshot from what it holds of it.
    pub(crate) fn send_fetch(&mut self, now_ms: i64) {
        let Role::Follower { leader, last_sent, download, .. } = &mut self.role else { return };
        *last_sent = Some(now_ms);
        let to = *leader;
        let directory_id = self.config.membership.directory_id;
        if let Some(download) = download {
            let (snapshot, position) = (download.id, download.received as i64);
            let max_bytes = self.config.fetch_snapshot_max_bytes;
            let request =
                Message::FetchSnapshotRequest { epoch: self.epoch, snapshot, position, directory_id, max_bytes };
            self.send(to, request);
            return;
        }
        let (last_fetched_epoch, fetch_offset) = self.log_end();
        let bounds = self.fetch_bounds();
        self.send(
            to,
            Message::FetchRequest { epoch: self.epoch, fetch_offset, last_fetched_epoch, directory_id, bounds },
        );
    }

    /// What this node's fetches ask for, as Kafka's raft client fills them:
    /// its fetch wait and byte limit, and the high watermark it knows (-1
    /// before it learned one).
    pub(crate) fn fetch_bounds(&self) -> FetchBounds {
        FetchBounds {
            max_wait_ms: i32::try_from(self.config.fetch_max_wait_ms).unwrap_or(i32::MAX),
            max_bytes: i32::try_from(self.config.max_fetch_bytes).unwrap_or(i32::MAX),
            high_watermark: self.known_high_watermark().unwrap_or(-1),
        }
    }

    /// The key the leader keeps replica `key`'s progress under: the voter's
    /// own key when it is that voter (a static voter's has no directory id,
    /// whatever the fetch named), else its own (an observer).
    pub(crate) fn progress_key(&self, key: ReplicaKey) -> (ReplicaKey, bool) {
        match self.voters.latest().voter_key(key) {
            Some(voter) => (voter, true),
            None => (key, false),
        }
    }

    /// This node's key among the replicas it leads: its voter's when it
    /// is one (`RaftNode::is_voter`), else its own.
    pub(crate) fn local_key(&self) -> ReplicaKey {
        let me = self.config.node_id;
        match self.voters.latest().get(me) {
            Some(voter) if self.is_voter() => voter.key(),
            _ => ReplicaKey { id: me, directory_id: self.config.membership.directory_id },
        }
    }

    /// The leader's voter set changed from `before`: each voter's progress
    /// moves to its key in the new set, as Kafka's leader moves its replica
    /// states. A static voter that now has a directory id (the upgrade to
    /// `kraft.version` 1) keeps what it had under its id alone; an added
    /// voter takes what it had as an observer of that key; a removed one
    /// stays, as an observer of its key.
    pub(crate) fn rekey_progress(&mut self, before: &VoterSet) {
        let after = self.voters.latest().clone();
        let Role::Leader { progress, .. } = &mut self.role else { return };
        for voter in after.nodes() {
            let key = voter.key();
            if progress.contains_key(&key) {
                continue;
            }
            let was_static = before.get(voter.id).filter(|old| old.directory_id == Uuid::ZERO);
            let entry = was_static.and_then(|old| progress.remove(&old.key())).unwrap_or_default();
            progress.insert(key, entry);
        }
        debug_assert!(after.nodes().all(|v| progress.contains_key(&v.key())), "a voter without progress");
    }

    /// A Fetch from replica `replica` (its id and directory id) from
    /// `fetch_offset` after `last_fetched_epoch`, with its `bounds`.
    pub(crate) fn on_fetch_request(
        &mut self,
        now_ms: i64,
        replica: ReplicaKey,
        epoch: i32,
        (fetch_offset, last_fetched_epoch): (i64, i32),
        bounds: FetchBounds,
    ) -> Result<(), LogError> {
        let from = replica.id;
        let fetch = HeldFetch { fetch_offset, last_fetched_epoch, max_bytes: bounds.max_bytes };
        // Kafka's leader-only check, in its order. A fetch of a newer epoch
        // moves nothing: its sender knows a leader this node does not, and
        // will hear of it from that leader.
        let error = if epoch < self.epoch {
            RaftError::FencedLeaderEpoch
        } else if epoch > self.epoch {
            RaftError::UnknownLeaderEpoch
        } else if !matches!(self.role, Role::Leader { .. }) {
            RaftError::NotLeader
        } else {
            RaftError::None
        };
        if error != RaftError::None {
            self.respond_fetch(from, fetch, error, OffsetCheck::Valid)?;
            return Ok(());
        }
        let check = self.check_offset_and_epoch(fetch_offset, last_fetched_epoch);
        // Kafka's leader: a replica is a voter only with the voter's
        // directory id (any, for a static voter); with another, or none,
        // it is an observer, and its fetches count toward neither the high
        // watermark nor the quorum check.
        let (key, is_voter) = self.progress_key(replica);
        let leader_end = self.log.log_end_offset();
        let Role::Leader { progress, .. } = &mut self.role else { unreachable!() };
        // The driver matches answers to requests by sender id, in order: a
        // fetch held for this id is answered (empty) before this one, be it
        // this replica's or another directory's with the same id.
        let mut superseded: Vec<(i64, HeldFetch)> =
            progress.iter_mut().filter(|(k, _)| k.id == from).filter_map(|(_, e)| e.parked.take()).collect();
        superseded.sort_unstable_by_key(|&(until, held)| (until, held.fetch_offset, held.last_fetched_epoch));
        let entry = progress.entry(key).or_default();
        let valid = check == OffsetCheck::Valid;
        if is_voter || valid {
            entry.last_fetch_ms = Some(now_ms);
        }
        if valid && fetch_offset >= leader_end {
            entry.caught_up_ms = Some(now_ms);
        }
        if valid {
            // A late duplicate of an older fetch does not move it back.
            entry.fetch_offset = entry.fetch_offset.max(fetch_offset);
            Served::note(&mut entry.served, now_ms, fetch_offset, leader_end);
        }
        for (_, held) in superseded {
            self.respond_fetch(from, held, RaftError::None, OffsetCheck::Valid)?;
        }
        if !valid {
            return self.respond_fetch(from, fetch, RaftError::None, check);
        }
        self.advance_high_watermark(now_ms)?;
        // As Kafka's leader: held only when there is nothing to return, the
        // fetcher allows a wait, and its high watermark (KIP-1166, Fetch
        // v18) is not behind the one this answer would carry (this fetch
        // may just have moved it).
        let hold = fetch_offset >= leader_end
            && bounds.max_wait_ms > 0
            && bounds.high_watermark >= self.advertised_high_watermark();
        if !hold {
            return self.respond_fetch(from, fetch, RaftError::None, OffsetCheck::Valid);
        }
        let until = now_ms + i64::from(bounds.max_wait_ms);
        match &mut self.role {
            Role::Leader { progress, .. } => progress.entry(key).or_default().parked = Some((until, fetch)),
            // The commit ended the lead (a voter change removed this node):
            // answered as the fetches held then are.
            _ => self.answer_not_leader(from, fetch_offset, last_fetched_epoch),
        }
        Ok(())
    }

    /// A fetch this node held as leader, answered after it stopped leading.
    pub(crate) fn answer_not_leader(&mut self, to: i32, fetch_offset: i64, last_fetched_epoch: i32) {
        let response = FetchResponse {
            epoch: self.epoch,
            leader_id: self.leader_id().filter(|&id| id != self.config.node_id),
            error: RaftError::NotLeader,
            fetch_offset,
            last_fetched_epoch,
            high_watermark: -1,
            log_start_offset: self.log.log_start_offset(),
            records: Bytes::new(),
            diverging_epoch: None,
            snapshot: None,
        };
        self.send(to, Message::FetchResponse(response));
    }

    /// The high watermark a leader tells fetchers: none (-1) until a majority
    /// holds its epoch's first record, as Kafka's leader; a Kafka follower
    /// refuses a high watermark lower than one it already has.
    pub(crate) fn advertised_high_watermark(&self) -> i64 {
        match self.role {
            Role::Leader { epoch_start, .. } if self.high_watermark <= epoch_start => -1,
            _ => self.high_watermark,
        }
    }

    fn respond_fetch(
        &mut self,
        to: i32,
        fetch: HeldFetch,
        error: RaftError,
        check: OffsetCheck,
    ) -> Result<(), LogError> {
        let HeldFetch { fetch_offset, last_fetched_epoch, max_bytes } = fetch;
        let serve = error == RaftError::None && check == OffsetCheck::Valid;
        let readable = fetch_offset >= self.log.log_start_offset() && fetch_offset < self.log.log_end_offset();
        // The fetcher's MaxBytes, as Kafka's leader reads: at least one
        // whole batch, however large.
        let records = if serve && readable {
            self.log.read(fetch_offset, max_bytes.max(0) as u32, self.log.log_end_offset())?
        } else {
            Bytes::new()
        };
        let response = FetchResponse {
            epoch: self.epoch,
            leader_id: self.leader_id(),
            error,
            fetch_offset,
            last_fetched_epoch,
            high_watermark: self.advertised_high_watermark(),
            log_start_offset: self.log.log_start_offset(),
            records,
            diverging_epoch: match check {
                OffsetCheck::Diverging(epoch, end) => Some((epoch, end)),
                _ => None,
            },
            snapshot: match check {
                OffsetCheck::Snapshot(id) => Some(id),
                _ => None,
            },
        };
        self.send(to, Message::FetchResponse(response));
        Ok(())
    }

    /// Answers the held fetches: when new records or a new high watermark
    /// are there to return (`all`), or else those held long enough.
    fn answer_held_fetches(&mut self, now_ms: i64, all: bool) -> Result<(), LogError> {
        let Role::Leader { progress, .. } = &mut self.role else { return Ok(()) };
        let mut due = Vec::new();
        for (key, entry) in progress.iter_mut() {
            match entry.parked {
                Some((until, fetch)) if all || now_ms >= until => {
                    entry.parked = None;
                    due.push((key.id, fetch));
                }
                _ => {}
            }
        }
        for (id, fetch) in due {
            self.respond_fetch(id, fetch, RaftError::None, OffsetCheck::Valid)?;
        }
        Ok(())
    }

    /// The Raft commit rule: the largest offset a majority of voters hold,
    /// once it is past the start of the leader's epoch.
    fn advance_high_watermark(&mut self, now_ms: i64) -> Result<(), LogError> {
        let majority = self.majority();
        let Role::Leader { progress, epoch_start, .. } = &self.role else { return Ok(()) };
        let voters = self.voters.latest();
        debug_assert!(voters.nodes().all(|v| progress.contains_key(&v.key())), "a voter without progress");
        let mut offsets: Vec<i64> =
            voters.nodes().map(|v| progress.get(&v.key()).map_or(0, |p| p.fetch_offset)).collect();
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        let replicated = offsets[majority - 1];
        if replicated > self.high_watermark && replicated > *epoch_start {
            self.high_watermark = replicated;
            self.high_watermark_learned = true;
            self.actions.push(Action::Committed { high_watermark: replicated });
            self.answer_held_fetches(0, true)?;
            self.voter_change_committed(now_ms);
        }
        Ok(())
    }

    pub(crate) fn append_as_leader(&mut self, values: &[Bytes], now_ms: i64) -> Result<AppendInfo, LogError> {
        batch::append_and_flush(&mut self.log, values, self.epoch, now_ms)
    }

    /// The leader's own log moved: it counts as its own replica (flushed).
    pub(crate) fn leader_appended(&mut self, now_ms: i64) -> Result<(), LogError> {
        let me = self.local_key();
        let flushed = self.log.last_flushed_offset();
        let Role::Leader { progress, .. } = &mut self.role else { return Ok(()) };
        let entry = progress.entry(me).or_default();
        entry.fetch_offset = flushed;
        entry.last_fetch_ms = Some(now_ms);
        self.advance_high_watermark(now_ms)?;
        self.answer_held_fetches(now_ms, true)
    }

    /// The leader's timers: the quorum check (a majority of voters fetched
    /// within the fetch timeout, or it resigns), BeginQuorumEpoch to the
    /// voters gone quiet, and held fetches that waited long enough.
    pub(crate) fn leader_tick(&mut self, now_ms: i64) -> Result<(), LogError> {
        let me = self.config.node_id;
        let timeout = self.config.fetch_timeout_ms;
        let majority = self.majority();
        let Role::Leader { progress, check_at, begin_at, .. } = &mut self.role else { return Ok(()) };
        let voters: Vec<ReplicaKey> = self.voters.latest().nodes().map(VoterNode::key).collect();
        let last_fetch = |key: &ReplicaKey| progress.get(key).and_then(|p| p.last_fetch_ms);
        let heard =
            voters.iter().filter(|key| key.id == me || last_fetch(key).is_some_and(|at| now_ms - at < timeout)).count();
        if now_ms >= *check_at && heard < majority {
            self.resign_lead(now_ms);
            return Ok(());
        }
        // As Kafka's leader: every half fetch timeout, BeginQuorumEpoch to
        // the voters that have not fetched for that long (all of them at
        // once after the election).
        let half_timeout = (timeout / 2).max(1);
        if now_ms >= *begin_at {
            *begin_at = now_ms + half_timeout;
            let silent: Vec<i32> = voters
                .iter()
                .filter(|key| key.id != me && last_fetch(key).is_none_or(|at| now_ms - at >= half_timeout))
                .map(|key| key.id)
                .collect();
            for to in silent {
                self.send(to, Message::BeginQuorumEpoch { epoch: self.epoch });
            }
        }
        // Held fetches due are answered first: a fetch still held keeps its
        // observer listed.
        self.answer_held_fetches(now_ms, false)?;
        self.forget_idle_observers(now_ms);
        self.expire_voter_change(now_ms);
        Ok(())
    }

    pub(crate) fn on_fetch_response(
        &mut self,
        now_ms: i64,
        from: i32,
        response: FetchResponse,
    ) -> Result<(), LogError> {
        if response.epoch > self.epoch || (response.epoch == self.epoch && response.leader_id.is_some()) {
            self.observe(now_ms, response.epoch, response.leader_id)?;
        }
        // A DivergingEpoch of epoch -1 (whatever its end offset) is none, as
        // for Kafka's follower (the wire layer maps it to None). One below
        // the high watermark this node knows would cut committed offsets:
        // Kafka's follower fails on it; this one drops the answer.
        let below_committed = |&(_, end): &(i32, i64)| self.known_high_watermark().is_some_and(|hw| end < hw);
        if response.diverging_epoch.as_ref().is_some_and(below_committed) {
            return Ok(());
        }
        let log_end = self.log_end();
        let Role::Follower { leader, fetch_deadline, last_sent, heard_ms, download } = &mut self.role else {
            return Ok(());
        };
        let current = *leader == from && response.epoch == self.epoch && response.error == RaftError::None;
        // While it fetches a snapshot the log waits (a late answer to an
        // earlier fetch is not acted on).
        if !current || download.is_some() || (response.last_fetched_epoch, response.fetch_offset) != log_end {
            return Ok(());
        }
        *fetch_deadline = now_ms + self.config.fetch_timeout_ms;
        *heard_ms = Some(now_ms);
        *last_sent = None;
        match (response.diverging_epoch, response.snapshot) {
            (Some((epoch, end)), _) => self.truncate_diverging(epoch, end, now_ms)?,
            (None, Some(id)) => self.start_download(id, now_ms)?,
            (None, None) => self.append_fetched(&response.records, response.high_watermark, now_ms)?,
        }
        self.send_fetch(now_ms);
        Ok(())
    }

    fn truncate_diverging(&mut self, epoch: i32, end: i64, now_ms: i64) -> Result<(), LogError> {
        let start = self.log.log_start_offset();
        let mine = self.end_offset_for_epoch(epoch).1;
        let to = end.min(mine).max(start);
        debug_assert!(to >= self.high_watermark, "truncating committed offsets");
        self.voters.truncate(to);
        self.log.truncate_to(to, now_ms)
    }

    fn append_fetched(&mut self, records: &Bytes, leader_high_watermark: i64, now_ms: i64) -> Result<(), LogError> {
        if !records.is_empty() {
            self.log.append_as_follower(records, now_ms)?;
            self.log.flush(now_ms)?;
            self.voters.read_batches(records);
        }
        // -1 is a leader whose epoch has not committed yet: nothing learned.
        self.high_watermark_learned |= leader_high_watermark >= 0;
        let high_watermark = leader_high_watermark.min(self.log.log_end_offset());
        if high_watermark > self.high_watermark {
            self.high_watermark = high_watermark;
            self.actions.push(Action::Committed { high_watermark });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::ReplicaDescription;
    use crate::node::{RaftConfig, RoleName};
    use crate::test_support::{controller, controller_leader, fetch, OLD_FETCH};
    use krabka_log::PartitionLog;

    /// Leader 1 of voters 1-3 with directory ids `[id; 16]`: static voters
    /// upgraded to `kraft.version` 1 after voter 2 fetched (with no
    /// directory id) the epoch's first record; the upgrade is uncommitted.
    fn dynamic_leader(dir: &std::path::Path) -> RaftNode<PartitionLog> {
        let mut node = controller_leader(dir);
        let end = node.log().log_end_offset();
        node.handle(1_003, 2, fetch(end, Uuid::ZERO)).unwrap();
        for id in [2, 3] {
            node.handle(1_004, id, Message::UpdateVoterRequest { epoch: 1, voter: controller(id) }).unwrap();
        }
        node.upgrade_kraft_version(1_005, 1, false).unwrap().0.unwrap();
        assert_eq!(node.voter_set().get(2).map(|v| v.directory_id), Some(controller(2).directory_id));
        node
    }

    #[test]
    fn a_voters_id_with_another_directory_or_none_is_an_observer() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = dynamic_leader(dir.path());
        let (committed, end) = (node.high_watermark(), node.log().log_end_offset());
        assert!(committed < end);
        // Voter 2's id with a replaced disk, and with none named (Fetch
        // before v17): observers, whose fetches commit nothing.
        node.handle(2_000, 2, fetch(end, Uuid([9; 16]))).unwrap();
        node.handle(2_001, 2, fetch(end, Uuid::ZERO)).unwrap();
        assert_eq!(node.high_watermark(), committed);
        let described = node.describe_quorum(2_002).unwrap();
        let keys = |replicas: &[ReplicaDescription]| -> Vec<(i32, Uuid)> {
            replicas.iter().map(|r| (r.replica_id, r.directory_id)).collect()
        };
        assert_eq!(keys(&described.observers), vec![(2, Uuid::ZERO), (2, Uuid([9; 16]))]);
        // Voter 2 kept, under its new key, what it fetched as a static voter.
        assert_eq!(described.voters[1].directory_id, controller(2).directory_id);
        assert_eq!(described.voters[1].last_fetch_ms, Some(1_003));
        // The voter itself commits the upgrade.
        node.handle(2_003, 2, fetch(end, controller(2).directory_id)).unwrap();
        assert_eq!(node.high_watermark(), end);
    }

    #[test]
    fn a_static_voter_is_its_id_whatever_directory_its_fetch_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = controller_leader(dir.path());
        let end = node.log().log_end_offset();
        node.handle(2_000, 2, fetch(end, Uuid([9; 16]))).unwrap();
        assert_eq!(node.high_watermark(), end);
        let described = node.describe_quorum(2_001).unwrap();
        assert_eq!((described.voters[1].directory_id, described.voters[1].last_fetch_ms), (Uuid::ZERO, Some(2_000)));
        assert!(described.observers.is_empty());
    }

    #[test]
    fn only_fetches_of_a_voters_own_directory_keep_the_leader_in_its_quorum() {
        for (directory_id, leads) in [(Uuid([9; 16]), false), (controller(2).directory_id, true)] {
            let dir = tempfile::tempdir().unwrap();
            let mut node = dynamic_leader(dir.path());
            node.config.fetch_timeout_ms = 1_000;
            if let Role::Leader { check_at, .. } = &mut node.role {
                *check_at = 0;
            }
            let end = node.log().log_end_offset();
            node.handle(9_000, 2, fetch(end, directory_id)).unwrap();
            node.tick(9_500).unwrap();
            assert_eq!(node.role() == RoleName::Leader, leads, "a fetch naming {directory_id:?}");
        }
    }

    #[test]
    fn a_held_fetch_is_answered_before_the_next_fetch_of_its_id_from_any_directory() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = crate::test_support::leader_of(dir.path(), Default::default());
        let end = node.log().log_end_offset();
        let answered = |actions: Vec<crate::message::Action>| -> Vec<(i32, i64)> {
            actions
                .into_iter()
                .filter_map(|a| match a {
                    crate::message::Action::Send { to, message: Message::FetchResponse(r) } => {
                        Some((to, r.fetch_offset))
                    }
                    _ => None,
                })
                .collect()
        };
        // Observer 9 with directory A is caught up: held.
        assert_eq!(answered(node.handle(2_000, 9, fetch(end, Uuid([0xa; 16]))).unwrap()), vec![]);
        // Observer 9 with directory B is behind: answered at once, after the
        // held fetch (the driver answers node 9's requests in order).
        let actions = node.handle(2_001, 9, fetch(end - 1, Uuid([0xb; 16]))).unwrap();
        assert_eq!(answered(actions), vec![(9, end), (9, end - 1)]);
    }

    /// The fetch answers sent, by receiver: (fetch offset, record bytes,
    /// high watermark).
    fn answers(actions: &[Action]) -> Vec<(i32, i64, usize, i64)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Send { to, message: Message::FetchResponse(r) } => {
                    Some((*to, r.fetch_offset, r.records.len(), r.high_watermark))
                }
                _ => None,
            })
            .collect()
    }

    fn fetch_with(fetch_offset: i64, bounds: FetchBounds) -> Message {
        Message::FetchRequest { epoch: 1, fetch_offset, last_fetched_epoch: 1, directory_id: Uuid::ZERO, bounds }
    }

    /// Leader 1 whose epoch voter 2 committed (high watermark at its log
    /// end), with no fetch held.
    fn committed_leader(dir: &std::path::Path) -> RaftNode<PartitionLog> {
        let mut node = crate::test_support::leader_of(dir, Default::default());
        let end = node.log().log_end_offset();
        let knows_none = FetchBounds { high_watermark: -1, ..OLD_FETCH };
        let committed = node.handle(1_003, 2, fetch_with(end, knows_none)).unwrap();
        assert_eq!(answers(&committed), vec![(2, end, 0, end)]);
        assert_eq!(node.high_watermark(), end);
        node
    }

    #[test]
    fn a_fetch_with_nothing_to_return_is_held_for_its_own_max_wait() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = committed_leader(dir.path());
        let end = node.log().log_end_offset();
        // The node's own fetch wait is 50 ms; the fetcher's 200 ms is what
        // counts.
        assert_eq!(node.config.fetch_max_wait_ms, 50);
        let slow = FetchBounds { max_wait_ms: 200, high_watermark: end, ..OLD_FETCH };
        assert!(answers(&node.handle(2_000, 2, fetch_with(end, slow)).unwrap()).is_empty());
        assert!(answers(&node.tick(2_199).unwrap()).is_empty());
        assert_eq!(answers(&node.tick(2_200).unwrap()), vec![(2, end, 0, end)]);
        // MaxWaitMs 0: answered at once, empty.
        let now = FetchBounds { max_wait_ms: 0, ..slow };
        assert_eq!(answers(&node.handle(2_300, 2, fetch_with(end, now)).unwrap()), vec![(2, end, 0, end)]);
        // New records answer a held fetch before its wait is over.
        assert!(answers(&node.handle(2_400, 3, fetch_with(end, slow)).unwrap()).is_empty());
        let (_, actions) = node.propose(&[Bytes::from_static(b"x")], 2_401).unwrap().unwrap();
        let sent = answers(&actions);
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].0, sent[0].1), (3, end));
        assert!(sent[0].2 > 0, "{sent:?}");
    }

    #[test]
    fn a_fetcher_whose_high_watermark_is_behind_is_answered_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = committed_leader(dir.path());
        let end = node.log().log_end_offset();
        let knowing = |high_watermark| FetchBounds { high_watermark, ..OLD_FETCH };
        // KIP-1166 (Fetch v18): none known, or an older one: answered with
        // the leader's at once, though there are no records.
        for behind in [-1, end - 1] {
            let sent = answers(&node.handle(2_000, 2, fetch_with(end, knowing(behind))).unwrap());
            assert_eq!(sent, vec![(2, end, 0, end)], "knowing {behind}");
        }
        // The leader's own, or none told (before v18): held.
        for held in [end, FetchBounds::HIGH_WATERMARK_NOT_SENT] {
            assert!(answers(&node.handle(2_001, 2, fetch_with(end, knowing(held))).unwrap()).is_empty());
            assert_eq!(answers(&node.tick(2_001 + 50).unwrap()), vec![(2, end, 0, end)], "knowing {held}");
        }
    }

    #[test]
    fn a_fetch_returns_whole_batches_up_to_its_max_bytes_and_at_least_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = committed_leader(dir.path());
        let start = node.log().log_end_offset();
        for at in 0..3 {
            node.propose(&[Bytes::from(vec![b'v'; 500])], 3_000 + at).unwrap().unwrap();
        }
        let end = node.log().log_end_offset();
        // The batches' sizes, each read alone.
        let first = ReplicatedLog::read(node.log(), start, 1, end).unwrap().len();
        let second = ReplicatedLog::read(node.log(), start + 1, 1, end).unwrap().len();
        let all = ReplicatedLog::read(node.log(), start, u32::MAX, end).unwrap().len();
        assert!(first > 500 && second > 500 && all > first + second);
        // Whatever the leader's own limit (1 MiB here): the fetcher's. As
        // Kafka's log reads, the bytes from the fetch offset up to MaxBytes
        // (a batch cut short at the end is the follower's to drop), and at
        // least the first whole batch.
        let cases = [
            (0, first),
            (1, first),
            (first - 1, first),
            (first + second - 1, first + second - 1),
            (first + second, first + second),
            (i32::MAX as usize, all),
        ];
        for (at, (max_bytes, returned)) in cases.into_iter().enumerate() {
            let bounds = FetchBounds { max_bytes: max_bytes.min(i32::MAX as usize) as i32, ..OLD_FETCH };
            let sent = answers(&node.handle(4_000 + at as i64, 2, fetch_with(start, bounds)).unwrap());
            assert_eq!(sent, vec![(2, start, returned, start)], "max_bytes {max_bytes}");
        }
    }

    /// A DivergingEpoch below the high watermark the follower knows would
    /// cut committed offsets: Kafka's follower fails on it, this one drops
    /// the answer and keeps its log.
    #[test]
    fn a_diverging_epoch_below_the_known_high_watermark_truncates_nothing() {
        let (leader_dir, follower_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut leader = committed_leader(leader_dir.path());
        leader.propose(&[Bytes::from_static(b"v")], 2_000).unwrap().unwrap();
        let end = leader.log().log_end_offset();
        let records = ReplicatedLog::read(leader.log(), 0, u32::MAX, end).unwrap();
        let (log, _) =
            PartitionLog::open(follower_dir.path(), krabka_log::LogConfig::default(), 0, 0, true, 1).unwrap();
        let config = RaftConfig { node_id: 2, ..leader.config.clone() };
        let mut follower = RaftNode::open(config, log, None, 0).unwrap();
        follower.handle(1, 1, Message::BeginQuorumEpoch { epoch: 1 }).unwrap();
        assert_eq!(follower.role(), RoleName::Follower);
        let answer = |records: Bytes, diverging_epoch, fetch_offset| FetchResponse {
            epoch: 1,
            leader_id: Some(1),
            error: RaftError::None,
            fetch_offset,
            last_fetched_epoch: if fetch_offset == 0 { 0 } else { 1 },
            high_watermark: end,
            log_start_offset: 0,
            records,
            diverging_epoch,
            snapshot: None,
        };
        follower.handle(2, 1, Message::FetchResponse(answer(records, None, 0))).unwrap();
        assert_eq!((follower.log().log_end_offset(), follower.known_high_watermark()), (end, Some(end)));
        let below = answer(Bytes::new(), Some((1, end - 1)), end);
        follower.handle(3, 1, Message::FetchResponse(below)).unwrap();
        assert_eq!((follower.log().log_end_offset(), follower.high_watermark()), (end, end));
        // At the high watermark it is a truncation of nothing committed.
        let at = answer(Bytes::new(), Some((1, end)), end);
        follower.handle(4, 1, Message::FetchResponse(at)).unwrap();
        assert_eq!(follower.log().log_end_offset(), end);
    }
}
