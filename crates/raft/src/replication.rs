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

use crate::batch;
use crate::message::{Action, FetchResponse, Message, RaftError};
use crate::node::{RaftNode, Role};
use crate::served::Served;
use crate::snapshot::OffsetCheck;

impl<L: ReplicatedLog> RaftNode<L> {
    /// The follower's next request: a Fetch from its log end, or while it
    /// fetches a snapshot, FetchSnapshot from what it holds of it.
    pub(crate) fn send_fetch(&mut self, now_ms: i64) {
        let Role::Follower { leader, last_sent, download, .. } = &mut self.role else { return };
        *last_sent = Some(now_ms);
        let to = *leader;
        if let Some(download) = download {
            let (snapshot, position) = (download.id, download.bytes.len() as i64);
            self.send(to, Message::FetchSnapshotRequest { epoch: self.epoch, snapshot, position });
            return;
        }
        let (last_fetched_epoch, fetch_offset) = self.log_end();
        self.send(to, Message::FetchRequest { epoch: self.epoch, fetch_offset, last_fetched_epoch });
    }

    pub(crate) fn on_fetch_request(
        &mut self,
        now_ms: i64,
        from: i32,
        epoch: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
    ) -> Result<(), LogError> {
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
            self.respond_fetch(from, (fetch_offset, last_fetched_epoch), error, OffsetCheck::Valid)?;
            return Ok(());
        }
        let check = self.check_offset_and_epoch(fetch_offset, last_fetched_epoch);
        let is_voter = self.is_voter_id(from);
        let leader_end = self.log.log_end_offset();
        let Role::Leader { progress, .. } = &mut self.role else { unreachable!() };
        let entry = progress.entry(from).or_default();
        if is_voter || check == OffsetCheck::Valid {
            entry.last_fetch_ms = Some(now_ms);
        }
        if check == OffsetCheck::Valid && fetch_offset >= leader_end {
            entry.caught_up_ms = Some(now_ms);
        }
        if check != OffsetCheck::Valid {
            return self.respond_fetch(from, (fetch_offset, last_fetched_epoch), RaftError::None, check);
        }
        // A late duplicate of an older fetch does not move it back.
        entry.fetch_offset = entry.fetch_offset.max(fetch_offset);
        Served::note(&mut entry.served, now_ms, fetch_offset, leader_end);
        let caught_up = fetch_offset >= self.log.log_end_offset();
        let until = now_ms + self.config.fetch_max_wait_ms;
        // A fetch held before from the same replica is answered (empty)
        // first: each request gets its answer, in order.
        let superseded = entry.parked.take();
        entry.parked = caught_up.then_some((until, (fetch_offset, last_fetched_epoch)));
        if let Some((_, fetch)) = superseded {
            self.respond_fetch(from, fetch, RaftError::None, OffsetCheck::Valid)?;
        }
        self.advance_high_watermark(now_ms)?;
        if !caught_up {
            self.respond_fetch(from, (fetch_offset, last_fetched_epoch), RaftError::None, OffsetCheck::Valid)?;
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
        (fetch_offset, last_fetched_epoch): (i64, i32),
        error: RaftError,
        check: OffsetCheck,
    ) -> Result<(), LogError> {
        let serve = error == RaftError::None && check == OffsetCheck::Valid;
        let readable = fetch_offset >= self.log.log_start_offset() && fetch_offset < self.log.log_end_offset();
        let records = if serve && readable {
            self.log.read(fetch_offset, self.config.max_fetch_bytes, self.log.log_end_offset())?
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
        for (&id, entry) in progress.iter_mut() {
            match entry.parked {
                Some((until, fetch)) if all || now_ms >= until => {
                    entry.parked = None;
                    due.push((id, fetch));
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
        let mut offsets: Vec<i64> =
            self.voters.latest().ids().iter().map(|id| progress.get(id).map_or(0, |p| p.fetch_offset)).collect();
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
        let me = self.config.node_id;
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
        let voter_ids = self.voters.latest().ids();
        let heard = voter_ids
            .iter()
            .filter(|&&id| {
                id == me || progress.get(&id).and_then(|p| p.last_fetch_ms).is_some_and(|at| now_ms - at < timeout)
            })
            .count();
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
            let silent: Vec<i32> = voter_ids
                .iter()
                .copied()
                .filter(|id| {
                    *id != me
                        && progress.get(id).and_then(|p| p.last_fetch_ms).is_none_or(|at| now_ms - at >= half_timeout)
                })
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
