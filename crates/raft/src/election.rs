//! Elections (KIP-595, with KIP-996's pre-vote): the vote handlers and the
//! moves to Prospective, Candidate and Leader of a [`RaftNode`].
//!
//! A voter whose election timer fires (or whose leader went quiet for the
//! fetch timeout) becomes Prospective and asks for pre-votes for the next
//! epoch, which no one persists or acts on; only with a majority of
//! pre-votes does it become Candidate, bump the epoch and vote for itself.
//! A voter grants a pre-vote when the candidate's log is at least as up to
//! date as its own and it has not heard from a leader within the fetch
//! timeout; it grants a vote when, in addition, it has not voted for
//! another in that epoch and knows no leader of it. A granted vote is
//! persisted before it is sent (see [`Action`]).

use std::collections::{BTreeMap, BTreeSet};

use krabka_log::{LogError, ReplicatedLog};

use crate::message::{Action, Message};
use crate::node::{Progress, RaftNode, Role, LEADER_CHANGE};

impl<L: ReplicatedLog> RaftNode<L> {
    pub(crate) fn on_vote_request(
        &mut self,
        now_ms: i64,
        from: i32,
        epoch: i32,
        candidate_log: (i32, i64),
        pre_vote: bool,
    ) -> Result<(), LogError> {
        let eligible = self.is_voter() && self.config.voters.contains(&from);
        // A pre-vote names the epoch after the sender's: a sender already in
        // a newer epoch than this node's moves it there (as any newer epoch
        // does), or a voter that ran and lost could never rejoin a quorum
        // that refuses its pre-votes.
        if pre_vote && eligible && epoch - 1 > self.epoch {
            self.observe(now_ms, epoch - 1, None)?;
        }
        if pre_vote {
            let granted =
                eligible && epoch > self.epoch && candidate_log >= self.log_end() && !self.hears_from_leader(now_ms);
            let message = Message::VoteResponse { epoch: self.epoch, granted, pre_vote, leader_id: self.leader_id() };
            self.send(from, message);
            return Ok(());
        }
        if eligible && epoch > self.epoch {
            self.observe(now_ms, epoch, None)?;
        }
        let unattached = matches!(self.role, Role::Unattached { .. } | Role::Prospective { .. });
        let granted = eligible
            && epoch == self.epoch
            && unattached
            && self.voted_for.is_none_or(|id| id == from)
            && candidate_log >= self.log_end();
        if granted {
            self.voted_for = Some(from);
            let election_at = self.election_deadline(now_ms);
            self.role = Role::Unattached { election_at };
            self.persist();
        }
        let message = Message::VoteResponse { epoch: self.epoch, granted, pre_vote, leader_id: self.leader_id() };
        self.send(from, message);
        Ok(())
    }

    /// A follower that fetched from its leader within the fetch timeout, or
    /// the leader itself: it refuses pre-votes, so a partitioned voter that
    /// comes back does not disturb a working quorum.
    fn hears_from_leader(&self, now_ms: i64) -> bool {
        match self.role {
            Role::Leader { .. } => true,
            Role::Follower { heard_ms, .. } => heard_ms.is_some_and(|at| now_ms - at < self.config.fetch_timeout_ms),
            _ => false,
        }
    }

    pub(crate) fn on_vote_response(
        &mut self,
        now_ms: i64,
        from: i32,
        epoch: i32,
        granted: bool,
        pre_vote: bool,
        leader_id: Option<i32>,
    ) -> Result<(), LogError> {
        if epoch > self.epoch || (epoch == self.epoch && leader_id.is_some()) {
            self.observe(now_ms, epoch, leader_id)?;
        }
        if !self.config.voters.contains(&from) {
            return Ok(());
        }
        let majority = self.majority();
        let others = self.config.voters.len() - majority;
        // (prospective?, granted so far, refused so far), for a response to
        // this node's current round.
        let counts = match &mut self.role {
            Role::Prospective { granted: yes, rejected: no, .. } if pre_vote && epoch <= self.epoch => {
                Some((true, tally(yes, no, from, granted)))
            }
            Role::Candidate { granted: yes, rejected: no, .. } if !pre_vote && epoch == self.epoch => {
                Some((false, tally(yes, no, from, granted)))
            }
            _ => None,
        };
        match counts {
            Some((true, (yes, _))) if yes >= majority => self.become_candidate(now_ms)?,
            Some((true, (_, no))) if no > others => {
                let election_at = self.election_deadline(now_ms);
                self.role = Role::Unattached { election_at };
            }
            Some((false, (yes, _))) if yes >= majority => self.become_leader(now_ms)?,
            _ => {}
        }
        Ok(())
    }

    pub(crate) fn on_end_quorum_epoch(
        &mut self,
        now_ms: i64,
        from: i32,
        epoch: i32,
        successors: &[i32],
    ) -> Result<(), LogError> {
        if epoch > self.epoch {
            self.observe(now_ms, epoch, None)?;
        }
        let follows_sender = matches!(self.role, Role::Follower { leader, .. } if leader == from);
        if epoch != self.epoch || !self.is_voter() || !(follows_sender || matches!(self.role, Role::Unattached { .. }))
        {
            return Ok(());
        }
        // The most caught-up successor runs at once, the next a backoff later.
        let election_at = match successors.iter().position(|&id| id == self.config.node_id) {
            Some(position) => now_ms + position as i64 * self.config.retry_backoff_ms,
            None => self.election_deadline(now_ms),
        };
        self.role = Role::Unattached { election_at };
        Ok(())
    }

    /// Asks the other voters for pre-votes for the next epoch.
    pub(crate) fn become_prospective(&mut self, now_ms: i64) -> Result<(), LogError> {
        debug_assert!(self.is_voter(), "an observer never runs for election");
        self.step_down_if_leader();
        let election_at = self.election_deadline(now_ms);
        let granted = BTreeSet::from([self.config.node_id]);
        self.role = Role::Prospective { granted, rejected: BTreeSet::new(), election_at };
        let (last_epoch, last_offset) = self.log_end();
        let request = Message::VoteRequest { epoch: self.epoch + 1, last_epoch, last_offset, pre_vote: true };
        self.send_to_other_voters(&request);
        if self.majority() == 1 {
            self.become_candidate(now_ms)?;
        }
        Ok(())
    }

    fn become_candidate(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.epoch += 1;
        self.voted_for = Some(self.config.node_id);
        let election_at = self.election_deadline(now_ms);
        let granted = BTreeSet::from([self.config.node_id]);
        self.role = Role::Candidate { granted, rejected: BTreeSet::new(), election_at };
        self.persist();
        let (last_epoch, last_offset) = self.log_end();
        let request = Message::VoteRequest { epoch: self.epoch, last_epoch, last_offset, pre_vote: false };
        self.send_to_other_voters(&request);
        if self.majority() == 1 {
            self.become_leader(now_ms)?;
        }
        Ok(())
    }

    /// Leads the epoch: appends the leader-change record (the first offset
    /// of the epoch, which the high watermark must pass) and tells the
    /// other voters.
    fn become_leader(&mut self, now_ms: i64) -> Result<(), LogError> {
        let progress: BTreeMap<i32, Progress> =
            self.config.voters.iter().map(|&id| (id, Progress::default())).collect();
        let epoch_start = self.log.log_end_offset();
        let grace = now_ms + self.config.fetch_timeout_ms;
        self.role = Role::Leader { progress, epoch_start, check_at: grace, begin_at: now_ms };
        self.persist();
        self.actions.push(Action::BecameLeader { epoch: self.epoch });
        self.append_as_leader(&[bytes::Bytes::from_static(LEADER_CHANGE)], now_ms)?;
        let begin = Message::BeginQuorumEpoch { epoch: self.epoch };
        self.send_to_other_voters(&begin);
        self.leader_appended(now_ms)
    }

    fn send_to_other_voters(&mut self, message: &Message) {
        let me = self.config.node_id;
        for to in self.config.voters.clone() {
            if to != me {
                self.send(to, message.clone());
            }
        }
    }
}

/// Counts `from`'s answer once (a duplicated response counts once): the
/// voters that granted and that refused so far.
fn tally(yes: &mut BTreeSet<i32>, no: &mut BTreeSet<i32>, from: i32, granted: bool) -> (usize, usize) {
    if granted {
        yes.insert(from);
    } else {
        no.insert(from);
    }
    (yes.len(), no.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ElectionState;
    use crate::node::{RaftConfig, RoleName};
    use krabka_log::{LogConfig, PartitionLog};

    fn node(dir: &std::path::Path, node_id: i32) -> RaftNode<PartitionLog> {
        let (log, _) = PartitionLog::open(dir, LogConfig::default(), 0, 0, true, 1).unwrap();
        let config = RaftConfig {
            node_id,
            voters: vec![1, 2, 3],
            election_timeout_ms: 100,
            fetch_timeout_ms: 300,
            fetch_max_wait_ms: 50,
            retry_backoff_ms: 60,
            max_fetch_bytes: 1 << 20,
            seed: 7,
        };
        RaftNode::open(config, log, None, 0)
    }

    #[test]
    fn a_granted_vote_is_persisted_before_it_is_sent_and_never_given_twice_in_an_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let mut voter = node(dir.path(), 1);
        let vote = |epoch| Message::VoteRequest { epoch, last_epoch: 0, last_offset: 0, pre_vote: false };
        let actions = voter.handle(1, 2, vote(1)).unwrap();
        // The new epoch, then the vote in it, both before the answer.
        let new_epoch = ElectionState { epoch: 1, voted_for: None, leader_id: None };
        let voted = ElectionState { epoch: 1, voted_for: Some(2), leader_id: None };
        let granted = Message::VoteResponse { epoch: 1, granted: true, pre_vote: false, leader_id: None };
        let expected = vec![
            Action::PersistElectionState(new_epoch),
            Action::PersistElectionState(voted),
            Action::Send { to: 2, message: granted },
        ];
        assert_eq!(actions, expected);
        let actions = voter.handle(2, 3, vote(1)).unwrap();
        let refused = Message::VoteResponse { epoch: 1, granted: false, pre_vote: false, leader_id: None };
        assert_eq!(actions, vec![Action::Send { to: 3, message: refused }]);
    }

    #[test]
    fn a_pre_vote_changes_nothing_and_an_election_timeout_starts_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut voter = node(dir.path(), 1);
        let pre_vote = Message::VoteRequest { epoch: 1, last_epoch: 0, last_offset: 0, pre_vote: true };
        let actions = voter.handle(1, 2, pre_vote).unwrap();
        assert_eq!(actions.len(), 1, "a pre-vote is answered, not persisted: {actions:?}");
        assert_eq!((voter.epoch(), voter.voted_for()), (0, None));
        let actions = voter.tick(1_000).unwrap();
        assert_eq!(voter.role(), RoleName::Prospective);
        assert_eq!(voter.epoch(), 0, "a prospective does not bump the epoch");
        assert_eq!(actions.len(), 2, "pre-votes to the two other voters: {actions:?}");
    }
}
