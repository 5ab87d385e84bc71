//! From a static quorum to a dynamic one: `kraft.version` 0 to 1 (Kafka's
//! KAFKA-16538, `kafka-features.sh upgrade --feature kraft.version=1`).
//!
//! At `kraft.version` 0 the voters are `controller.quorum.voters`: ids and
//! addresses, no directory ids, no version ranges. A KRaftVoters record
//! needs all three, so a leader at 0 collects them in memory, as Kafka
//! 4.3.1's does: it starts its epoch with its own entry filled in, and
//! every follower voter sends it UpdateRaftVoter (once per leader) with its
//! directory id, listeners and supported range, which the leader keeps
//! without writing anything. Once every voter supports the new version,
//! the upgrade appends one control batch, KRaftVersion then KRaftVoters
//! with the collected set, and from there the quorum is dynamic. What a
//! leader collected dies with its leadership: the next one collects again.

use krabka_log::{LogError, ReplicatedLog};
use krabka_protocol::records::ControlType;
use krabka_protocol::Uuid;

use crate::batch;
use crate::message::{Action, Message, VoterChangeError};
use crate::node::{RaftNode, Role};
use crate::voters::{kraft_version_record, KraftUpgrade, VoterNode, VoterSet};

/// Why an upgrade was refused: UpdateFeatures' error for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KraftUpgradeError {
    /// This node does not lead (NOT_CONTROLLER to the client).
    NotLeader,
    /// INVALID_UPDATE_VERSION, with Kafka's message.
    InvalidUpdateVersion(String),
}

fn version_name(version: i16) -> String {
    format!("KRAFT_VERSION_{version}")
}

impl<L: ReplicatedLog> RaftNode<L> {
    /// What a new leader starts collecting: the static voters with its own
    /// entry replaced by itself (directory id, listeners, range); nothing
    /// at `kraft.version` 1.
    pub(crate) fn start_kraft_upgrade(&mut self) {
        self.kraft_upgrade = if self.voters.kraft_version() == 0 {
            let local = self.local_voter();
            let set = self.voters.latest().replace_by_id(local).unwrap_or_else(|| self.voters.latest().clone());
            KraftUpgrade::Voters(set)
        } else {
            KraftUpgrade::Empty
        };
    }

    /// UpdateRaftVoter at `kraft.version` 0: keeps `voter` in the set the
    /// upgrade will write, matched by id alone (a static voter has no
    /// directory id), in Kafka's order of checks.
    pub(crate) fn update_static_voter(&mut self, now_ms: i64, voter: VoterNode) -> VoterChangeError {
        if let Some(error) = self.leader_busy(now_ms) {
            return error;
        }
        let KraftUpgrade::Voters(set) = &self.kraft_upgrade else {
            // The upgrade is under way: the set is being written.
            return VoterChangeError::RequestTimedOut;
        };
        if voter.kraft_versions.0 > 0 || voter.kraft_versions.1 < 0 || !self.reachable_on_controller_listener(&voter) {
            return VoterChangeError::InvalidRequest;
        }
        match set.replace_by_id(voter) {
            Some(updated) => {
                self.kraft_upgrade = KraftUpgrade::Voters(updated);
                VoterChangeError::None
            }
            None => VoterChangeError::VoterNotFound,
        }
    }

    /// UpdateFeatures of `kraft.version` to `version` on the leader:
    /// refused unless every voter told it that it supports `version`;
    /// otherwise (and unless `validate_only`) KRaftVersion and KRaftVoters
    /// are appended in one control batch. Upgrading to the version the log
    /// already has, or to the one being written, does nothing. Returns the
    /// answer and, as every event does, the actions the driver must
    /// perform (what the append committed or released), refused or not.
    pub fn upgrade_kraft_version(
        &mut self,
        now_ms: i64,
        version: i16,
        validate_only: bool,
    ) -> Result<(Result<(), KraftUpgradeError>, Vec<Action>), LogError> {
        let answer = match self.kraft_upgrade_set(version) {
            Ok(Some(set)) if !validate_only => self.append_kraft_upgrade(now_ms, version, &set).map(Ok)?,
            Ok(_) => Ok(()),
            Err(refused) => Err(refused),
        };
        Ok((answer, self.finish()))
    }

    /// The voter set an upgrade of `kraft.version` to `version` writes, in
    /// Kafka's order of checks; None when there is nothing to write (the
    /// log has that version, or is being upgraded to it).
    fn kraft_upgrade_set(&self, version: i16) -> Result<Option<VoterSet>, KraftUpgradeError> {
        if !matches!(self.role, Role::Leader { .. }) {
            return Err(KraftUpgradeError::NotLeader);
        }
        let current = self.voters.kraft_version();
        let invalid = |why: String| Err(KraftUpgradeError::InvalidUpdateVersion(why));
        let set = match &self.kraft_upgrade {
            KraftUpgrade::Version(pending) if *pending == version => return Ok(None),
            KraftUpgrade::Version(pending) => {
                return invalid(format!(
                    "Invalid concurrent upgrade of kraft.version from version {} to {}",
                    version_name(*pending),
                    version_name(version)
                ))
            }
            _ if current == version => return Ok(None),
            _ if current > version => {
                return invalid(format!(
                    "Invalid upgrade of kraft.version from version {} to {} because the new version is a downgrade",
                    version_name(current),
                    version_name(version)
                ))
            }
            KraftUpgrade::Voters(set) => set.clone(),
            KraftUpgrade::Empty => {
                return invalid(format!(
                    "Invalid upgrade of kraft.version from version {} to {}",
                    version_name(current),
                    version_name(version)
                ))
            }
        };
        let supported = set.nodes().all(|v| (v.kraft_versions.0..=v.kraft_versions.1).contains(&version));
        if !supported || set.nodes().any(|v| v.directory_id == Uuid::ZERO) {
            return invalid(format!(
                "Invalid upgrade of kraft.version to {} because not all of the voters support it",
                version_name(version)
            ));
        }
        debug_assert_eq!(set.ids(), self.voters.latest().ids(), "the collected voters are the static ones");
        Ok(Some(set))
    }

    /// Appends KRaftVersion `version` and KRaftVoters `set` in one control
    /// batch of the leader's epoch; both count from now on.
    fn append_kraft_upgrade(&mut self, now_ms: i64, version: i16, set: &VoterSet) -> Result<(), LogError> {
        self.kraft_upgrade = KraftUpgrade::Version(version);
        let (version_record, voters_record) = (kraft_version_record(version), set.to_record());
        let records =
            [(ControlType::KRaftVersion, &version_record[..]), (ControlType::KRaftVoters, &voters_record[..])];
        let info = batch::append_control_and_flush(&mut self.log, &records, self.epoch, now_ms)?;
        let before = self.voters.latest().clone();
        self.voters.record(info.first_offset, ControlType::KRaftVersion, version_record);
        self.voters.record(info.first_offset + 1, ControlType::KRaftVoters, voters_record);
        self.rekey_progress(&before);
        self.leader_appended(now_ms)
    }

    /// A follower voter at `kraft.version` 0 tells each new leader its
    /// directory id, listeners and range (UpdateRaftVoter), until that
    /// leader answers NONE or UNSUPPORTED_VERSION (an older leader); true
    /// when it sent.
    pub(crate) fn maybe_send_static_update_voter(&mut self, leader: i32) -> bool {
        let told = self.told_leader_epoch == Some(self.epoch);
        let membership = &self.config.membership;
        // Without a directory id and listeners (a member embedded without
        // them) the request could only be refused.
        let unknown = membership.directory_id == Uuid::ZERO || membership.listeners.is_empty();
        if told || unknown || !self.voters.latest().contains(self.config.node_id) {
            return false;
        }
        self.send(leader, Message::UpdateVoterRequest { epoch: self.epoch, voter: self.local_voter() });
        true
    }

    /// The leader of `epoch` answered this node's UpdateRaftVoter.
    pub(crate) fn on_update_voter_response(&mut self, epoch: i32, error: VoterChangeError) {
        let told = matches!(error, VoterChangeError::None | VoterChangeError::UnsupportedVersion);
        if told && epoch == self.epoch {
            self.told_leader_epoch = Some(epoch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Action;
    use crate::test_support::{controller, controller_leader, fetch};
    use crate::voters::VoterSet;
    use krabka_log::PartitionLog;

    /// Node 1 of static voters 1-3 (with its directory id and listener),
    /// leader of epoch 1 with its epoch committed (voter 2 fetched it).
    fn leader(dir: &std::path::Path) -> RaftNode<PartitionLog> {
        let mut node = controller_leader(dir);
        let end = node.log().log_end_offset();
        node.handle(1_003, 2, fetch(end, Uuid::ZERO)).unwrap();
        // That fetch committed the epoch but is held (its sender, before
        // Fetch v18, tells no high watermark): its wait runs out.
        node.tick(1_003 + i64::from(crate::test_support::OLD_FETCH.max_wait_ms)).unwrap();
        node
    }

    /// The UpdateRaftVoter answer voter `from` got.
    fn update(node: &mut RaftNode<PartitionLog>, from: i32, voter: VoterNode) -> VoterChangeError {
        let actions = node.handle(2_000, from, Message::UpdateVoterRequest { epoch: 1, voter }).unwrap();
        actions
            .into_iter()
            .find_map(|a| match a {
                Action::Send { message: Message::UpdateVoterResponse { error, .. }, .. } => Some(error),
                _ => None,
            })
            .expect("an answer")
    }

    /// The answer to an upgrade to `version`; the actions it returned must
    /// send nothing unless it appended.
    fn upgrade(
        node: &mut RaftNode<PartitionLog>,
        now_ms: i64,
        version: i16,
        validate_only: bool,
    ) -> Result<(), KraftUpgradeError> {
        let end = node.log().log_end_offset();
        let (answer, actions) = node.upgrade_kraft_version(now_ms, version, validate_only).unwrap();
        if node.log().log_end_offset() == end {
            assert!(actions.is_empty(), "{actions:?}");
        }
        answer
    }

    fn invalid(result: Result<(), KraftUpgradeError>) -> String {
        match result {
            Err(KraftUpgradeError::InvalidUpdateVersion(message)) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_static_leader_collects_its_voters_then_writes_them_with_kraft_version_1() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = leader(dir.path());
        assert_eq!(node.kraft_version(), 0);
        let not_all = "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters support it";
        assert_eq!(invalid(upgrade(&mut node, 2_000, 1, false)), not_all);

        // UpdateRaftVoter at kraft.version 0: kept in memory, nothing written.
        let end = node.log().log_end_offset();
        assert_eq!(update(&mut node, 2, controller(2)), VoterChangeError::None);
        assert_eq!(node.log().log_end_offset(), end);
        let stranger = VoterNode { id: 7, ..controller(7) };
        assert_eq!(update(&mut node, 7, stranger), VoterChangeError::VoterNotFound);
        let unreachable = VoterNode { listeners: Vec::new(), ..controller(3) };
        assert_eq!(update(&mut node, 3, unreachable), VoterChangeError::InvalidRequest);
        let too_new = VoterNode { kraft_versions: (1, 1), ..controller(3) };
        assert_eq!(update(&mut node, 3, too_new), VoterChangeError::InvalidRequest);
        assert_eq!(invalid(upgrade(&mut node, 2_000, 1, false)), not_all);
        assert_eq!(update(&mut node, 3, controller(3)), VoterChangeError::None);

        // Validation appends nothing; the upgrade one batch of two records.
        assert_eq!(upgrade(&mut node, 2_000, 1, true), Ok(()));
        assert_eq!(node.log().log_end_offset(), end);
        // The append answers voter 2's fetch, held since it caught up: the
        // actions come back with the answer, none left for the next event.
        let held = node.handle(2_000, 2, fetch(end, Uuid::ZERO)).unwrap();
        assert!(held.is_empty(), "a caught-up fetch is held: {held:?}");
        let (answer, actions) = node.upgrade_kraft_version(2_000, 1, false).unwrap();
        assert_eq!(answer, Ok(()));
        let answered = |a: &Action| matches!(a, Action::Send { to: 2, message: Message::FetchResponse(r) } if !r.records.is_empty());
        assert!(actions.iter().any(answered), "{actions:?}");
        assert_eq!(node.log().log_end_offset(), end + 2);
        assert_eq!(node.kraft_version(), 1);
        assert_eq!(node.voter_set(), &VoterSet::new([controller(1), controller(2), controller(3)]));
        // The same upgrade again is nothing; another version, or a later
        // UpdateRaftVoter before the commit, waits.
        assert_eq!(upgrade(&mut node, 2_001, 1, false), Ok(()));
        assert_eq!(node.log().log_end_offset(), end + 2);
        let concurrent = "Invalid concurrent upgrade of kraft.version from version KRAFT_VERSION_1 to KRAFT_VERSION_2";
        assert_eq!(invalid(upgrade(&mut node, 2_001, 2, false)), concurrent);
    }

    #[test]
    fn only_the_leader_upgrades_and_never_down() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = leader(dir.path());
        update(&mut node, 2, controller(2));
        update(&mut node, 3, controller(3));
        upgrade(&mut node, 2_000, 1, false).unwrap();
        node.kraft_upgrade = KraftUpgrade::Empty;
        let down = "Invalid upgrade of kraft.version from version KRAFT_VERSION_1 to KRAFT_VERSION_0 because the new version is a downgrade";
        assert_eq!(invalid(upgrade(&mut node, 2_000, 0, false)), down);
        node.resign(3_000);
        assert_eq!(upgrade(&mut node, 3_000, 1, false), Err(KraftUpgradeError::NotLeader));
    }
}

#[cfg(test)]
mod period_tests {
    use super::*;
    use crate::message::{Action, FetchResponse, RaftError};
    use crate::node::{Membership, RaftConfig};
    use crate::test_support::controller;
    use krabka_log::{LogConfig, PartitionLog};

    const FETCH_TIMEOUT_MS: i64 = 1_000;

    /// Controller 1 of static voters 1-3, following leader 2 of epoch 1
    /// from time 0.
    fn follower(dir: &std::path::Path) -> RaftNode<PartitionLog> {
        let (log, _) = PartitionLog::open(dir, LogConfig::default(), 0, 0, true, 1).unwrap();
        let me = controller(1);
        let config = RaftConfig {
            node_id: 1,
            voters: vec![1, 2, 3],
            election_timeout_ms: 100_000,
            fetch_timeout_ms: FETCH_TIMEOUT_MS,
            fetch_max_wait_ms: 50,
            retry_backoff_ms: 60,
            request_timeout_ms: 2000,
            membership: Membership { directory_id: me.directory_id, listeners: me.listeners, ..Default::default() },
            max_fetch_bytes: 1 << 20,
            fetch_snapshot_max_bytes: 1 << 20,
            retention_max_bytes: -1,
            retention_ms: -1,
            seed: 7,
        };
        let mut node = RaftNode::open(config, log, None, 0).unwrap();
        node.handle(0, 2, Message::BeginQuorumEpoch { epoch: 1 }).unwrap();
        node
    }

    /// Leader 2's empty answer to the follower's fetch at its log end.
    fn answer_fetch(node: &mut RaftNode<PartitionLog>, now_ms: i64) {
        let response = FetchResponse {
            epoch: 1,
            leader_id: Some(2),
            error: RaftError::None,
            fetch_offset: 0,
            last_fetched_epoch: 0,
            high_watermark: -1,
            log_start_offset: 0,
            records: Default::default(),
            diverging_epoch: None,
            snapshot: None,
        };
        node.handle(now_ms, 2, Message::FetchResponse(response)).unwrap();
    }

    fn sends_update_voter(node: &mut RaftNode<PartitionLog>, now_ms: i64) -> bool {
        let actions = node.tick(now_ms).unwrap();
        actions.iter().any(|a| matches!(a, Action::Send { to: 2, message: Message::UpdateVoterRequest { .. } }))
    }

    #[test]
    fn a_static_follower_sends_update_voter_once_a_fetch_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = follower(dir.path());
        answer_fetch(&mut node, 500);
        assert!(!sends_update_voter(&mut node, FETCH_TIMEOUT_MS - 1));
        assert!(sends_update_voter(&mut node, FETCH_TIMEOUT_MS));
        // Refused for now: asked again a period later (Kafka 4.3.1's period
        // is one fetch timeout), not before.
        let refused =
            Message::UpdateVoterResponse { epoch: 1, error: VoterChangeError::RequestTimedOut, leader_id: Some(2) };
        node.handle(FETCH_TIMEOUT_MS + 1, 2, refused).unwrap();
        answer_fetch(&mut node, FETCH_TIMEOUT_MS + 200);
        assert!(!sends_update_voter(&mut node, 2 * FETCH_TIMEOUT_MS - 1));
        answer_fetch(&mut node, 2 * FETCH_TIMEOUT_MS - 1);
        assert!(sends_update_voter(&mut node, 2 * FETCH_TIMEOUT_MS));
        // Taken: never again to this leader.
        let taken = Message::UpdateVoterResponse { epoch: 1, error: VoterChangeError::None, leader_id: Some(2) };
        node.handle(2 * FETCH_TIMEOUT_MS + 1, 2, taken).unwrap();
        answer_fetch(&mut node, 2 * FETCH_TIMEOUT_MS + 900);
        assert!(!sends_update_voter(&mut node, 3 * FETCH_TIMEOUT_MS));
    }
}
