//! Voter changes (KIP-853) of a [`RaftNode`]: the leader's AddRaftVoter,
//! RemoveRaftVoter and UpdateRaftVoter, and a follower voter's
//! UpdateRaftVoter to its leader (Kafka's `AddVoterHandler`,
//! `RemoveVoterHandler` and `UpdateVoterHandler`).
//!
//! A change is a new KRaftVoters record the leader appends, one voter at a
//! time, and only when the previous one is committed and so is the
//! leader's epoch: two consecutive voter sets then always share a
//! majority, so no two leaders can be elected in one epoch across the
//! change. The new set counts from the moment it is in the log
//! (committed or not), as in Kafka. An added voter must answer the
//! leader's probe (ApiVersions, through the driver) with a `kraft.version`
//! range holding the finalized one, and have fetched up to the leader's log
//! end as an observer; AddRaftVoter and RemoveRaftVoter are answered once
//! their record is committed, UpdateRaftVoter at once. A leader removed
//! from the set resigns once that is committed.

use krabka_log::{LogError, ReplicatedLog};
use krabka_protocol::records::ControlType;

use crate::batch;
use crate::message::{Action, Message, VoterChangeError};
use crate::node::{RaftNode, Role};
use crate::voters::{PendingChange, ReplicaKey, VoterNode, VoterSet};

/// An added voter must have fetched within this long (Kafka's hour).
const CAUGHT_UP_WITHIN_MS: i64 = 60 * 60 * 1000;

impl<L: ReplicatedLog> RaftNode<L> {
    /// AddRaftVoter: adds `voter` (its id, directory id and listeners) once
    /// it answers the probe this asks for ([`Action::ProbeVoter`]), and
    /// answers once the change is committed.
    pub fn add_voter(&mut self, now_ms: i64, request: u64, voter: VoterNode) -> Vec<Action> {
        self.add_voter_acked(now_ms, request, voter, true)
    }

    /// AddRaftVoter with its `AckWhenCommitted` (v1; false: answered once
    /// the record is appended, as a controller joining by itself asks).
    pub fn add_voter_acked(
        &mut self,
        now_ms: i64,
        request: u64,
        voter: VoterNode,
        ack_when_committed: bool,
    ) -> Vec<Action> {
        let refused = self.change_refused(now_ms).or_else(|| {
            if self.voters.latest().contains(voter.id) {
                Some(VoterChangeError::DuplicateVoter)
            } else if !self.reachable_on_controller_listener(&voter) {
                Some(VoterChangeError::InvalidRequest)
            } else {
                None
            }
        });
        match refused {
            Some(error) => self.actions.push(Action::VoterChangeDone { request, error }),
            None => {
                let deadline = now_ms + self.config.request_timeout_ms;
                let adding = Some(voter.clone());
                let ack_on_append = !ack_when_committed;
                self.pending_change = Some(PendingChange { request, adding, deadline, offset: None, ack_on_append });
                self.actions.push(Action::ProbeVoter { request, voter });
            }
        }
        self.finish()
    }

    /// The answer to [`Action::ProbeVoter`]: the `kraft.version` range the
    /// new voter supports, or None when it did not answer.
    pub fn voter_probed(
        &mut self,
        now_ms: i64,
        request: u64,
        kraft_versions: Option<(i16, i16)>,
    ) -> Result<Vec<Action>, LogError> {
        let Some(change) = self.pending_change.as_mut().filter(|c| c.request == request && c.offset.is_none()) else {
            return Ok(self.finish());
        };
        let mut voter = change.adding.take().expect("a change waiting for its probe is an add");
        let finalized = self.voters.kraft_version();
        let outcome = match kraft_versions {
            None => Err(VoterChangeError::RequestTimedOut),
            Some((min, max)) if min > finalized || max < finalized => Err(VoterChangeError::InvalidRequest),
            Some(range) if self.is_caught_up(voter.key(), now_ms) => {
                voter.kraft_versions = range;
                self.voters.latest().add(voter).ok_or(VoterChangeError::DuplicateVoter)
            }
            Some(_) => Err(VoterChangeError::RequestTimedOut),
        };
        match outcome {
            Ok(set) => {
                let offset = self.append_voters(&set, now_ms)?;
                if let Some(change) = self.pending_change.as_mut() {
                    change.offset = Some(offset);
                }
                if self.pending_change.as_ref().is_some_and(|c| c.ack_on_append) {
                    self.end_voter_change(VoterChangeError::None);
                }
                self.leader_appended(now_ms)?;
            }
            Err(error) => self.end_voter_change(error),
        }
        Ok(self.finish())
    }

    /// RemoveRaftVoter: removes voter (`id`, `directory_id`).
    pub fn remove_voter(
        &mut self,
        now_ms: i64,
        request: u64,
        id: i32,
        directory_id: krabka_protocol::Uuid,
    ) -> Result<Vec<Action>, LogError> {
        let outcome = match self.change_refused(now_ms) {
            Some(error) => Err(error),
            None => self.voters.latest().remove(id, directory_id).ok_or(VoterChangeError::VoterNotFound),
        };
        match outcome {
            Ok(set) => {
                let offset = self.append_voters(&set, now_ms)?;
                let deadline = now_ms + self.config.request_timeout_ms;
                let offset = Some(offset);
                self.pending_change =
                    Some(PendingChange { request, adding: None, deadline, offset, ack_on_append: false });
                self.leader_appended(now_ms)?;
            }
            Err(error) => self.actions.push(Action::VoterChangeDone { request, error }),
        }
        Ok(self.finish())
    }

    /// UpdateRaftVoter: `voter`'s listeners and version range replace the
    /// ones the voter set has; answered at once, not when committed.
    pub(crate) fn update_voter(&mut self, now_ms: i64, voter: VoterNode) -> Result<VoterChangeError, LogError> {
        let finalized = self.voters.kraft_version();
        if finalized == 0 {
            return Ok(self.update_static_voter(now_ms, voter));
        }
        let outcome = match self.change_refused(now_ms) {
            Some(error) => Err(error),
            None if voter.kraft_versions.0 > finalized || voter.kraft_versions.1 < finalized => {
                Err(VoterChangeError::InvalidRequest)
            }
            None if !self.reachable_on_controller_listener(&voter) => Err(VoterChangeError::InvalidRequest),
            None => self.voters.latest().update(voter).ok_or(VoterChangeError::VoterNotFound),
        };
        match outcome {
            Ok(set) => {
                self.append_voters(&set, now_ms)?;
                self.leader_appended(now_ms)?;
                Ok(VoterChangeError::None)
            }
            Err(error) => Ok(error),
        }
    }

    /// Why a voter change cannot start now, in Kafka's order; None when it
    /// can. An expired change is ended first (REQUEST_TIMED_OUT).
    fn change_refused(&mut self, now_ms: i64) -> Option<VoterChangeError> {
        if let Some(error) = self.leader_busy(now_ms) {
            return Some(error);
        }
        if self.voters.kraft_version() < 1 {
            return Some(VoterChangeError::UnsupportedVersion);
        }
        match self.voters.latest_offset() {
            Some(offset) if offset < self.high_watermark => None,
            _ => Some(VoterChangeError::RequestTimedOut),
        }
    }

    /// What every voter change (and an UpdateRaftVoter at `kraft.version`
    /// 0) is refused for first: this node does not lead, or it has a change
    /// under way, or no high watermark yet. An expired change is ended first.
    pub(crate) fn leader_busy(&mut self, now_ms: i64) -> Option<VoterChangeError> {
        if !matches!(self.role, Role::Leader { .. }) {
            return Some(VoterChangeError::NotLeader);
        }
        self.expire_voter_change(now_ms);
        if self.pending_change.is_some() || self.advertised_high_watermark() < 0 {
            return Some(VoterChangeError::RequestTimedOut);
        }
        None
    }

    /// Whether `voter` has an endpoint on this quorum's listener (the first
    /// of the leader's own, `controller.listener.names`' first).
    pub(crate) fn reachable_on_controller_listener(&self, voter: &VoterNode) -> bool {
        match self.config.membership.listeners.first() {
            Some(listener) => voter.listener(&listener.name).is_some(),
            None => !voter.listeners.is_empty(),
        }
    }

    /// Whether observer `key` (the id and directory id to add) fetched up
    /// to the leader's log end, and within the last hour: the fetches of
    /// another directory with that id do not count (Kafka's).
    fn is_caught_up(&self, key: ReplicaKey, now_ms: i64) -> bool {
        let Role::Leader { progress, .. } = &self.role else { return false };
        progress.get(&key).is_some_and(|p| {
            p.caught_up_ms.is_some() && p.last_fetch_ms.is_some_and(|at| at > now_ms - CAUGHT_UP_WITHIN_MS)
        })
    }

    /// Appends `set` as a KRaftVoters record in the leader's epoch; its
    /// offset. The set counts from now on.
    fn append_voters(&mut self, set: &VoterSet, now_ms: i64) -> Result<i64, LogError> {
        let record = set.to_record();
        let info =
            batch::append_control_and_flush(&mut self.log, &[(ControlType::KRaftVoters, &record)], self.epoch, now_ms)?;
        let before = self.voters.latest().clone();
        self.voters.record(info.first_offset, ControlType::KRaftVoters, record);
        self.rekey_progress(&before);
        Ok(info.first_offset)
    }

    /// The high watermark moved: a change whose record it passed is done,
    /// and a leader no longer among the committed voters resigns.
    pub(crate) fn voter_change_committed(&mut self, now_ms: i64) {
        let done = self.pending_change.as_ref().is_some_and(|c| c.offset.is_some_and(|o| o < self.high_watermark));
        if done {
            self.end_voter_change(VoterChangeError::None);
        }
        // Not only when its own change is done: a node elected while its
        // removal was not yet committed (`RaftNode::may_run`) leads until
        // it commits that removal, a change of an earlier epoch.
        let committed_without_me =
            self.voters.latest_offset().is_some_and(|o| o < self.high_watermark) && !self.is_voter();
        if committed_without_me {
            self.resign_lead(now_ms);
        }
    }

    /// Ends a change that waited past its deadline (REQUEST_TIMED_OUT).
    pub(crate) fn expire_voter_change(&mut self, now_ms: i64) {
        if self.pending_change.as_ref().is_some_and(|c| now_ms >= c.deadline && c.offset.is_none()) {
            self.end_voter_change(VoterChangeError::RequestTimedOut);
        }
    }

    /// Answers the pending change with `error`.
    pub(crate) fn end_voter_change(&mut self, error: VoterChangeError) {
        if let Some(change) = self.pending_change.take() {
            self.actions.push(Action::VoterChangeDone { request: change.request, error });
        }
    }

    /// How often a follower checks that the voter set has it as it is
    /// (UpdateRaftVoter) or, an observer, asks to join: one fetch timeout,
    /// Kafka 4.3.1's `FollowerState.updateVoterPeriodMs` (three before).
    pub(crate) fn update_voter_period(&self) -> i64 {
        self.config.fetch_timeout_ms
    }

    /// A follower voter whose listeners or version range the voter set has
    /// otherwise tells its leader, once a period (in place of a fetch, as
    /// Kafka's); true when it sent.
    pub(crate) fn maybe_send_update_voter(&mut self, now_ms: i64) -> bool {
        let Role::Follower { leader, .. } = self.role else { return false };
        if now_ms < self.update_voter_at {
            return false;
        }
        // Sent or not (a fetch goes instead), the period starts again.
        self.update_voter_at = now_ms + self.update_voter_period();
        if self.voters.kraft_version() < 1 {
            return self.maybe_send_static_update_voter(leader);
        }
        let local = self.local_voter();
        if !self.voters.latest().needs_update(&local) {
            return false;
        }
        self.send(leader, Message::UpdateVoterRequest { epoch: self.epoch, voter: local });
        true
    }

    /// `controller.quorum.auto.join.enable`: an observer that is a
    /// controller (it has listeners) and whose id is not a voter asks its
    /// leader to add it, once a period until it is; true when it sent. A
    /// voter of its id with another directory id (its disk was replaced,
    /// and it formatted a new one) it asks to remove first, as Kafka does:
    /// only then can it be added with its new directory. As Kafka's, the
    /// period starts again only when it sends (or hears the answer), so a
    /// quorum that becomes dynamic is asked at once.
    pub(crate) fn maybe_auto_join(&mut self, now_ms: i64) -> bool {
        let Role::Follower { leader, .. } = self.role else { return false };
        let membership = &self.config.membership;
        let due = membership.auto_join && !membership.listeners.is_empty() && now_ms >= self.update_voter_at;
        if !due || self.voters.kraft_version() < 1 {
            return false;
        }
        let message = match self.voters.latest().get(self.config.node_id) {
            Some(voter) if voter.directory_id == membership.directory_id => return false,
            Some(stale) => Message::RemoveVoterRequest { id: stale.id, directory_id: stale.directory_id },
            None => Message::AddVoterRequest { voter: self.local_voter() },
        };
        self.update_voter_at = now_ms + self.update_voter_period();
        self.send(leader, message);
        true
    }

    /// The leader answered this observer's AddRaftVoter or RemoveRaftVoter:
    /// on the answers Kafka's follower expects (NONE, REQUEST_TIMED_OUT, and
    /// `done_already`: DUPLICATE_VOTER to an add, VOTER_NOT_FOUND to a
    /// removal) the period starts again from now.
    pub(crate) fn on_auto_join_response(
        &mut self,
        now_ms: i64,
        error: VoterChangeError,
        done_already: VoterChangeError,
    ) {
        let expected =
            matches!(error, VoterChangeError::None | VoterChangeError::RequestTimedOut) || error == done_already;
        if expected && matches!(self.role, Role::Follower { .. }) {
            self.update_voter_at = now_ms + self.update_voter_period();
        }
    }

    /// UpdateRaftVoter from voter `from`.
    pub(crate) fn on_update_voter_request(
        &mut self,
        now_ms: i64,
        from: i32,
        epoch: i32,
        voter: VoterNode,
    ) -> Result<(), LogError> {
        let error = if epoch < self.epoch {
            VoterChangeError::FencedLeaderEpoch
        } else if epoch > self.epoch {
            VoterChangeError::UnknownLeaderEpoch
        } else {
            self.update_voter(now_ms, voter)?
        };
        let leader_id = self.leader_id();
        self.send(from, Message::UpdateVoterResponse { epoch: self.epoch, error, leader_id });
        Ok(())
    }
}
