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

use bytes::Bytes;
use krabka_log::{LogError, ReplicatedLog};
use krabka_protocol::generated::leader_change_message::Voter;
use krabka_protocol::records::ControlType;
use krabka_protocol::{LeaderChangeMessage, Message as _};

use crate::batch;
use crate::message::{Action, Message, RaftError};
use crate::node::{Progress, RaftNode, Role};
use crate::voters::{kraft_version_record, ReplicaKey};

impl<L: ReplicatedLog> RaftNode<L> {
    pub(crate) fn on_vote_request(
        &mut self,
        now_ms: i64,
        from: i32,
        epoch: i32,
        candidate_log: (i32, i64),
        pre_vote: bool,
    ) -> Result<(), LogError> {
        // KIP-853: a vote is answered whatever this node's voter set says of
        // it or of the candidate, as Kafka's relaxed Vote handling does.
        // Voter sets differ while a change replicates: a candidate whose log
        // lacks an uncommitted removal still counts the removed node, which
        // no longer counts itself, and refusing it left a quorum without a
        // majority for good (a leader that removed itself and restarted
        // before the removal replicated). Only the candidate's own voter set
        // counts the answers (`on_vote_response`), so the majorities that
        // elect are those of one voter set, and two consecutive sets share
        // a majority.
        let fenced = epoch < self.epoch;
        // A newer epoch moves this node there, for a pre-vote too (as in
        // Kafka): a voter that ran and lost could otherwise never rejoin a
        // quorum that refuses its pre-votes.
        if epoch > self.epoch {
            self.observe(now_ms, epoch, None)?;
        }
        let up_to_date = candidate_log >= self.log_end();
        let granted =
            !fenced && up_to_date && if pre_vote { !self.hears_from_leader(now_ms) } else { self.may_vote_for(from) };
        if granted && !pre_vote {
            self.voted_for = Some(from);
            let election_at = self.election_deadline(now_ms);
            self.role = Role::Unattached { election_at };
            self.persist();
        }
        let error = if fenced { RaftError::FencedLeaderEpoch } else { RaftError::None };
        let leader_id = self.leader_id();
        self.send(from, Message::VoteResponse { epoch: self.epoch, error, granted, pre_vote, leader_id });
        Ok(())
    }

    /// A vote in this epoch: only while no leader is known nor another
    /// candidate voted for (voting again for the same one is idempotent).
    fn may_vote_for(&self, candidate: i32) -> bool {
        matches!(self.role, Role::Unattached { .. } | Role::Prospective { leader: None, .. })
            && self.voted_for.is_none_or(|id| id == candidate)
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

    /// A voter cannot take a Vote at any version that carries it (one
    /// speaking only Vote v0-v1 gets no pre-vote). As Kafka's raft client:
    /// a Prospective becomes Candidate at once, since that voter can only
    /// be asked for a real vote; in any other state nothing changes.
    pub(crate) fn on_vote_unsupported(&mut self, now_ms: i64) -> Result<(), LogError> {
        if matches!(self.role, Role::Prospective { .. }) {
            self.become_candidate(now_ms)?;
        }
        Ok(())
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
        if !self.is_voter_id(from) {
            return Ok(());
        }
        let majority = self.majority();
        let others = self.voters.latest().len() - majority;
        // (prospective?, granted so far, refused so far), for a response to
        // this node's current round.
        let counts = match &mut self.role {
            // Only this epoch's round counts: an older epoch's answer is a
            // previous round's (a voter answers a pre-vote in the epoch asked).
            Role::Prospective { granted: yes, rejected: no, .. } if pre_vote && epoch == self.epoch => {
                Some((true, tally(yes, no, from, granted)))
            }
            Role::Candidate { granted: yes, rejected: no, .. } if !pre_vote && epoch == self.epoch => {
                Some((false, tally(yes, no, from, granted)))
            }
            _ => None,
        };
        match counts {
            Some((true, (yes, _))) if yes >= majority => self.become_candidate(now_ms)?,
            Some((true, (_, no))) if no > others => self.lose_pre_vote(now_ms),
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
        if epoch != self.epoch || !self.may_run() || !(follows_sender || matches!(self.role, Role::Unattached { .. })) {
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

    /// Asks the other voters for pre-votes, in its current epoch (Kafka's
    /// Prospective bumps it only once it won them). It keeps the leader it
    /// followed, if any.
    pub(crate) fn become_prospective(&mut self, now_ms: i64) -> Result<(), LogError> {
        debug_assert!(self.may_run(), "an observer never runs for election");
        self.step_down_if_leader();
        let election_at = self.election_deadline(now_ms);
        let granted = self.own_vote();
        let leader = self.leader_id().filter(|&id| id != self.config.node_id);
        self.role = Role::Prospective { granted, rejected: BTreeSet::new(), election_at, leader };
        let (last_epoch, last_offset) = self.log_end();
        let request = Message::VoteRequest { epoch: self.epoch, last_epoch, last_offset, pre_vote: true };
        self.send_to_other_voters(&request);
        if self.own_vote().len() >= self.majority() {
            self.become_candidate(now_ms)?;
        }
        Ok(())
    }

    /// A pre-vote refused by a majority, or that timed out: as Kafka's
    /// Prospective, back to following the leader it knew (its fetch timeout
    /// starts again), or Unattached.
    pub(crate) fn lose_pre_vote(&mut self, now_ms: i64) {
        match self.role {
            Role::Prospective { leader: Some(leader), .. } => self.become_follower(now_ms, leader),
            _ => {
                let election_at = self.election_deadline(now_ms);
                self.role = Role::Unattached { election_at };
            }
        }
    }

    fn become_candidate(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.epoch += 1;
        self.voted_for = Some(self.config.node_id);
        let election_at = self.election_deadline(now_ms);
        let granted = self.own_vote();
        self.role = Role::Candidate { granted, rejected: BTreeSet::new(), election_at };
        self.persist();
        let (last_epoch, last_offset) = self.log_end();
        let request = Message::VoteRequest { epoch: self.epoch, last_epoch, last_offset, pre_vote: false };
        self.send_to_other_voters(&request);
        if self.own_vote().len() >= self.majority() {
            self.become_leader(now_ms)?;
        }
        Ok(())
    }

    /// Leads the epoch: appends the LeaderChange control record (the first
    /// offset of the epoch, which the high watermark must pass) and tells
    /// the other voters.
    fn become_leader(&mut self, now_ms: i64) -> Result<(), LogError> {
        let Role::Candidate { granted, .. } = &self.role else {
            unreachable!("only a candidate becomes leader");
        };
        let voter_ids = self.voter_ids();
        let leader_change = leader_change(self.config.node_id, &voter_ids, granted);
        let progress: BTreeMap<ReplicaKey, Progress> =
            self.voters.latest().nodes().map(|v| (v.key(), Progress::default())).collect();
        let epoch_start = self.log.log_end_offset();
        let grace = now_ms + self.config.fetch_timeout_ms;
        self.role = Role::Leader { progress, epoch_start, check_at: grace, begin_at: now_ms };
        self.start_kraft_upgrade();
        self.persist();
        self.actions.push(Action::BecameLeader { epoch: self.epoch });
        let (version_record, voters_record) = self.epoch_start_voter_records(epoch_start);
        let mut records: Vec<(ControlType, &[u8])> = vec![(ControlType::LeaderChange, &leader_change)];
        if let Some(record) = &version_record {
            records.push((ControlType::KRaftVersion, record));
        }
        if let Some(record) = &voters_record {
            records.push((ControlType::KRaftVoters, record));
        }
        let info = batch::append_control_and_flush(&mut self.log, &records, self.epoch, now_ms)?;
        let mut offset = info.first_offset;
        let before = self.voters.latest().clone();
        for (kind, record) in [(ControlType::KRaftVersion, version_record), (ControlType::KRaftVoters, voters_record)] {
            if let Some(record) = record {
                offset += 1;
                self.voters.record(offset, kind, record);
            }
        }
        // Its own entry rewritten keeps its key; rekeyed all the same, so
        // every voter's progress is where the voter set says.
        self.rekey_progress(&before);
        let begin = Message::BeginQuorumEpoch { epoch: self.epoch };
        self.send_to_other_voters(&begin);
        self.leader_appended(now_ms)
    }

    /// The KRaftVersion and KRaftVoters records a new leader at
    /// `kraft.version` 1 writes after its LeaderChange. When only the
    /// bootstrap snapshot held the voter set (offset -1), both, as Kafka's
    /// `appendLeaderChangeMessageAndBootstrapRecords`: a node formatted
    /// without the bootstrap snapshot (`--no-initial-controllers`) learns
    /// `kraft.version` from the log alone, and without the record it read
    /// the voters at `kraft.version` 0 (it could not change them as a
    /// leader, nor snapshot them). The voter set alone when this node's own
    /// entry in it is out of date.
    fn epoch_start_voter_records(&self, epoch_start: i64) -> (Option<Bytes>, Option<Bytes>) {
        let kraft_version = self.voters.kraft_version();
        if kraft_version < 1 {
            return (None, None);
        }
        let local = self.local_voter();
        let latest = self.voters.latest();
        let stale = latest.needs_update(&local);
        let only_in_snapshot = self.voters.latest_offset().is_some_and(|o| o < epoch_start && o == -1);
        let voters = match (stale, only_in_snapshot) {
            (true, _) => Some(latest.update(local).unwrap_or_default()),
            (false, true) => Some(latest.clone()),
            (false, false) => None,
        };
        (only_in_snapshot.then(|| kraft_version_record(kraft_version)), voters.map(|set| set.to_record()))
    }

    fn send_to_other_voters(&mut self, message: &Message) {
        let me = self.config.node_id;
        for to in self.voter_ids() {
            if to != me {
                self.send(to, message.clone());
            }
        }
    }
}

/// The value of a new leader's LeaderChange control record (version 0, as
/// Kafka writes it): the leader, every voter, and the voters that granted.
fn leader_change(leader_id: i32, voters: &[i32], granted: &BTreeSet<i32>) -> Vec<u8> {
    let voter = |&voter_id: &i32| Voter { voter_id, ..Default::default() };
    let message = LeaderChangeMessage {
        version: 0,
        leader_id,
        voters: voters.iter().map(voter).collect(),
        granting_voters: granted.iter().map(voter).collect(),
        ..Default::default()
    };
    message.to_bytes(0).expect("a LeaderChangeMessage encodes at version 0").to_vec()
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
            request_timeout_ms: 2000,
            membership: Default::default(),
            max_fetch_bytes: 1 << 20,
            fetch_snapshot_max_bytes: 1 << 20,
            retention_max_bytes: -1,
            retention_ms: -1,
            seed: 7,
        };
        RaftNode::open(config, log, None, 0).unwrap()
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
        let granted =
            Message::VoteResponse { epoch: 1, error: RaftError::None, granted: true, pre_vote: false, leader_id: None };
        let expected = vec![
            Action::PersistElectionState(new_epoch),
            Action::PersistElectionState(voted),
            Action::Send { to: 2, message: granted },
        ];
        assert_eq!(actions, expected);
        let actions = voter.handle(2, 3, vote(1)).unwrap();
        let refused = Message::VoteResponse {
            epoch: 1,
            error: RaftError::None,
            granted: false,
            pre_vote: false,
            leader_id: None,
        };
        assert_eq!(actions, vec![Action::Send { to: 3, message: refused }]);
    }

    #[test]
    fn a_new_leader_opens_its_epoch_with_a_leader_change_control_record() {
        use krabka_protocol::records::{control_type_id, RecordBatch};
        use krabka_protocol::Message as _;
        let dir = tempfile::tempdir().unwrap();
        let mut voter = node(dir.path(), 1);
        voter.tick(1_000).unwrap();
        let pre_vote =
            Message::VoteResponse { epoch: 0, error: RaftError::None, granted: true, pre_vote: true, leader_id: None };
        voter.handle(1_001, 2, pre_vote).unwrap();
        assert_eq!((voter.role(), voter.epoch()), (RoleName::Candidate, 1));
        let vote =
            Message::VoteResponse { epoch: 1, error: RaftError::None, granted: true, pre_vote: false, leader_id: None };
        voter.handle(1_002, 2, vote).unwrap();
        assert_eq!(voter.role(), RoleName::Leader);

        let bytes = ReplicatedLog::read(voter.log(), 0, 1 << 20, voter.log().log_end_offset()).unwrap();
        let batch = RecordBatch::new(bytes).unwrap();
        assert!(batch.is_control());
        assert_eq!((batch.base_offset(), batch.partition_leader_epoch()), (0, 1));
        let record = batch.records(usize::MAX).unwrap().next().unwrap().unwrap();
        assert_eq!(record.key.as_deref().and_then(control_type_id), Some(ControlType::LeaderChange.id()));
        let message = LeaderChangeMessage::decode(&mut record.value.unwrap(), 0).unwrap();
        let ids = |voters: &[Voter]| voters.iter().map(|v| v.voter_id).collect::<Vec<_>>();
        assert_eq!(message.leader_id, 1);
        assert_eq!(ids(&message.voters), vec![1, 2, 3]);
        assert_eq!(ids(&message.granting_voters), vec![1, 2]);
    }

    fn fetch_answers(actions: &[Action]) -> Vec<crate::message::FetchResponse> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Send { message: Message::FetchResponse(r), .. } => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// A Kafka follower refuses a high watermark below one it has, so a new
    /// leader tells none until its epoch commits; and every fetch it held is
    /// answered, superseded or when it stops leading.
    #[test]
    fn a_new_leader_tells_no_high_watermark_before_its_epoch_commits_and_answers_every_fetch() {
        let dir = tempfile::tempdir().unwrap();
        let mut voter = node(dir.path(), 1);
        voter.tick(1_000).unwrap();
        let granted = |epoch, pre_vote| Message::VoteResponse {
            epoch,
            error: RaftError::None,
            granted: true,
            pre_vote,
            leader_id: None,
        };
        voter.handle(1_001, 2, granted(0, true)).unwrap();
        voter.handle(1_002, 2, granted(1, false)).unwrap();
        assert_eq!(voter.role(), RoleName::Leader);
        // Fetches as a Kafka 4.3 follower sends them (v18), with the high
        // watermark it knows.
        let fetch = |fetch_offset, last_fetched_epoch, high_watermark| Message::FetchRequest {
            epoch: 1,
            fetch_offset,
            last_fetched_epoch,
            directory_id: krabka_protocol::Uuid::ZERO,
            bounds: crate::FetchBounds { high_watermark, ..crate::test_support::OLD_FETCH },
        };

        let first = fetch_answers(&voter.handle(1_003, 2, fetch(0, 0, -1)).unwrap());
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].high_watermark, first[0].records.is_empty()), (-1, false), "{first:?}");
        // Voter 2 holds the LeaderChange: a majority, the epoch commits, and
        // the fetch that committed it is answered at once with the high
        // watermark its sender does not know yet.
        let second = fetch_answers(&voter.handle(1_004, 2, fetch(1, 1, -1)).unwrap());
        assert_eq!(second.iter().map(|r| r.high_watermark).collect::<Vec<_>>(), vec![1]);
        // A caught-up fetch that knows it is held; a second one answers the
        // first.
        assert!(fetch_answers(&voter.handle(1_005, 2, fetch(1, 1, 1)).unwrap()).is_empty());
        let superseded = fetch_answers(&voter.handle(1_006, 2, fetch(1, 1, 1)).unwrap());
        assert_eq!(superseded.len(), 1);
        assert_eq!(superseded[0].error, RaftError::None);
        // A newer epoch ends the lead: the held fetch is answered, not lost.
        let vote = Message::VoteRequest { epoch: 2, last_epoch: 1, last_offset: 1, pre_vote: false };
        let released = fetch_answers(&voter.handle(1_007, 3, vote).unwrap());
        assert_eq!(released.len(), 1, "{released:?}");
        assert_eq!((released[0].error, released[0].epoch, released[0].high_watermark), (RaftError::NotLeader, 2, -1));
    }

    #[test]
    fn a_node_whose_election_state_is_behind_its_log_starts_in_the_logs_epoch() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0, 0, true, 1).unwrap();
            crate::batch::append_and_flush(&mut log, &[bytes::Bytes::from_static(b"x")], 4, 1).unwrap();
        }
        let mut voter = node(dir.path(), 1);
        assert_eq!(voter.epoch(), 4);
        let actions = voter.tick(0).unwrap();
        let persisted = ElectionState { epoch: 4, voted_for: None, leader_id: None };
        assert_eq!(actions.first(), Some(&Action::PersistElectionState(persisted)));
    }

    /// The record Apache Kafka 4.3.1 wrote at offset 0 of a new combined
    /// node's `__cluster_metadata-0` (voter 1, elected by itself): control
    /// key version 0, type 2, and the LeaderChangeMessage v0 value.
    #[test]
    fn the_leader_change_record_is_the_one_kafka_writes() {
        let kafka_key = [0x00, 0x00, 0x00, 0x02];
        let kafka_value = [0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, 0, 2, 0, 0, 0, 1, 0, 0];
        assert_eq!(ControlType::LeaderChange.key(), kafka_key);
        assert_eq!(leader_change(1, &[1], &BTreeSet::from([1])), kafka_value);
    }

    #[test]
    fn a_pre_vote_changes_nothing_and_an_election_timeout_starts_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut voter = node(dir.path(), 1);
        let pre_vote = Message::VoteRequest { epoch: 0, last_epoch: 0, last_offset: 0, pre_vote: true };
        let actions = voter.handle(1, 2, pre_vote).unwrap();
        assert_eq!(actions.len(), 1, "a pre-vote is answered, not persisted: {actions:?}");
        assert_eq!((voter.epoch(), voter.voted_for()), (0, None));
        let actions = voter.tick(1_000).unwrap();
        assert_eq!(voter.role(), RoleName::Prospective);
        assert_eq!(voter.epoch(), 0, "a prospective does not bump the epoch");
        assert_eq!(actions.len(), 2, "pre-votes to the two other voters: {actions:?}");
    }

    /// Two followers of a leader that died time out together; each answers
    /// the other's pre-vote naming the dead leader. That must not send
    /// them back to following it (a livelock seen on real processes): the
    /// pre-vote counts, and one of them is elected.
    #[test]
    fn a_pre_vote_answer_naming_the_old_leader_does_not_end_the_pre_vote() {
        let dir = tempfile::tempdir().unwrap();
        let mut voter = node(dir.path(), 1);
        voter.handle(1, 2, Message::BeginQuorumEpoch { epoch: 1 }).unwrap();
        assert_eq!((voter.role(), voter.leader_id()), (RoleName::Follower, Some(2)));
        voter.tick(1_000).unwrap();
        assert_eq!((voter.role(), voter.leader_id()), (RoleName::Prospective, Some(2)));
        let granted = Message::VoteResponse {
            epoch: 1,
            error: RaftError::None,
            granted: true,
            pre_vote: true,
            leader_id: Some(2),
        };
        voter.handle(1_001, 3, granted).unwrap();
        assert_eq!((voter.role(), voter.epoch()), (RoleName::Candidate, 2));
    }

    /// A pre-vote a majority refuses sends a prospective back to the leader
    /// it followed, as Kafka's does.
    #[test]
    fn a_refused_pre_vote_goes_back_to_the_leader_it_knew() {
        let dir = tempfile::tempdir().unwrap();
        let mut voter = node(dir.path(), 1);
        voter.handle(1, 2, Message::BeginQuorumEpoch { epoch: 1 }).unwrap();
        voter.tick(1_000).unwrap();
        let refused = Message::VoteResponse {
            epoch: 1,
            error: RaftError::None,
            granted: false,
            pre_vote: true,
            leader_id: Some(2),
        };
        voter.handle(1_001, 3, refused.clone()).unwrap();
        assert_eq!(voter.role(), RoleName::Prospective, "one refusal of two is no majority");
        voter.handle(1_002, 2, refused).unwrap();
        assert_eq!((voter.role(), voter.leader_id(), voter.epoch()), (RoleName::Follower, Some(2), 1));
    }

    /// A voter that speaks only Vote v0-v1 cannot take a pre-vote: the
    /// answer is UNSUPPORTED_VERSION, on which Kafka's Prospective runs for
    /// election at once; a Candidate does not count it as a refusal.
    #[test]
    fn a_pre_vote_a_voter_cannot_take_makes_the_prospective_a_candidate() {
        let dir = tempfile::tempdir().unwrap();
        let mut voter = node(dir.path(), 1);
        voter.tick(1_000).unwrap();
        assert_eq!((voter.role(), voter.epoch()), (RoleName::Prospective, 0));
        let unsupported = |epoch, pre_vote| Message::VoteResponse {
            epoch,
            error: RaftError::UnsupportedVersion,
            granted: false,
            pre_vote,
            leader_id: None,
        };
        let actions = voter.handle(1_001, 3, unsupported(0, true)).unwrap();
        assert_eq!((voter.role(), voter.epoch()), (RoleName::Candidate, 1));
        let asked: Vec<i32> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Send { to, message: Message::VoteRequest { pre_vote: false, epoch: 1, .. } } => Some(*to),
                _ => None,
            })
            .collect();
        assert_eq!(asked, vec![2, 3]);
        // Neither answer counts against the Candidate: one refusal from 2
        // still leaves it running (with 3's, it would have lost).
        voter.handle(1_002, 3, unsupported(1, false)).unwrap();
        let refused = Message::VoteResponse {
            epoch: 1,
            error: RaftError::None,
            granted: false,
            pre_vote: false,
            leader_id: None,
        };
        voter.handle(1_003, 2, refused).unwrap();
        assert_eq!((voter.role(), voter.epoch()), (RoleName::Candidate, 1));
    }
}
