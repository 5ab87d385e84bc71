//! The simulation's upgrade of a static quorum to a dynamic one
//! (`kraft.version` 0 to 1, Kafka's KAFKA-16538, `kafka-features upgrade
//! --feature kraft.version=1`).
//!
//! Every node of a static quorum has a directory id and a listener, so each
//! follower voter tells each new leader about itself with UpdateRaftVoter,
//! over the same lossy, duplicating, reordering and partitioned network as
//! everything else, and the leader keeps what it heard in memory. In half
//! of the static seeds UpdateFeatures of `kraft.version` 1 arrives now and
//! then: mostly at the leader, sometimes validate-only, sometimes at
//! another node (NOT_CONTROLLER). The leader refuses it until it heard from
//! every voter, then appends one batch, KRaftVersion 1 and KRaftVoters with
//! the static voters as they described themselves; from then on the
//! quorum is dynamic and its leaders are asked for voter changes too
//! (`voters`). In a tenth of those seeds one voter has an older
//! controller's config (no directory id, no listener), and no upgrade may
//! ever pass. Once the network heals the leader is asked until the upgrade
//! is committed.

use krabka_log::ReplicatedLog;
use krabka_protocol::Uuid;
use krabka_raft::{KraftUpgradeError, Membership, RoleName, VoterSet};

use super::voters::{listener, voter_node};
use super::{Rng, Sim};

/// How often (per mille a step) UpdateFeatures of `kraft.version` 1 is sent
/// while the network is faulty.
const UPGRADE_RATE: u64 = 8;
/// With the network healed, the leader is asked every this many steps until
/// the upgrade is committed.
const HEALED_UPGRADE_EVERY: usize = 20;
/// Kafka's refusal while some voter has not told the leader that it
/// supports the version.
const NOT_ALL: &str = "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters support it";

/// A static quorum asked to become dynamic, and what came of it.
#[derive(Debug, Default)]
pub struct Upgrade {
    /// The voter configured without a directory id and listener (an older
    /// controller's config), if any: no upgrade may then pass.
    pub legacy: Option<i32>,
    /// UpdateFeatures sent, refused (not every voter supports it yet), and
    /// upgrades appended (by any leader, committed or not).
    pub calls: u64,
    pub refused: u64,
    pub appended: u64,
    /// When `kraft.version` 1 was first seen committed, and the latest
    /// epoch with a leader then.
    pub committed: Option<(i64, i32)>,
}

impl Upgrade {
    pub fn new(voters: usize, rng: &mut Rng) -> Upgrade {
        let legacy = rng.chance(100).then(|| rng.below(voters as u64) as i32);
        Upgrade { legacy, ..Default::default() }
    }
}

/// Node `id` of a static quorum: its directory id and listener, as
/// `voters::voter_node` says them (none for the legacy voter).
pub fn static_membership(id: i32, upgrade: Option<&Upgrade>) -> Membership {
    if upgrade.is_some_and(|u| u.legacy == Some(id)) {
        return Membership::default();
    }
    let directory_id = voter_node(id).directory_id;
    Membership { directory_id, listeners: vec![listener(id)], bootstrap: Vec::new(), auto_join: false }
}

/// The voter set an upgrade wrote (at `offset`): exactly the static
/// voters, each as its node is configured (its directory id, never zero,
/// its listener) and supporting `kraft.version` 0 to 1.
pub fn check_upgrade_voters(static_ids: &[i32], set: &VoterSet, offset: i64) {
    assert_eq!(set.ids(), static_ids, "the upgrade at {offset} wrote other voters than the static ones");
    for voter in set.nodes() {
        assert_ne!(voter.directory_id, Uuid::ZERO, "the upgrade at {offset} wrote voter {} static", voter.id);
        assert_eq!(*voter, voter_node(voter.id), "the upgrade at {offset} wrote voter {} wrong", voter.id);
    }
}

impl Sim {
    /// Now and then, UpdateFeatures of `kraft.version` 1: to the leader (an
    /// old one cut off by a partition included), or to another node.
    pub(crate) fn maybe_upgrade(&mut self) {
        if self.upgrade.is_none() || !self.rng.chance(UPGRADE_RATE) {
            return;
        }
        let target = match self.leader() {
            Some(leader) if !self.rng.chance(150) => leader,
            _ => {
                let others: Vec<usize> = (0..self.slots.len())
                    .filter(|&id| self.up(id).is_some_and(|n| n.role() != RoleName::Leader))
                    .collect();
                if others.is_empty() {
                    return;
                }
                others[self.rng.below(others.len() as u64) as usize]
            }
        };
        let validate_only = self.rng.chance(200);
        self.ask_upgrade(target, validate_only);
    }

    /// With the network healed, the leader is asked now and then until the
    /// upgrade is committed (or forever refused, with a legacy voter).
    pub(crate) fn heal_upgrade(&mut self, step: usize) {
        let wanted = self.upgrade.as_ref().is_some_and(|u| u.committed.is_none());
        if !wanted || !step.is_multiple_of(HEALED_UPGRADE_EVERY) {
            return;
        }
        if let Some(leader) = self.leader() {
            self.ask_upgrade(leader, false);
        }
    }

    /// Whether the seed's upgrade is done, as far as a healed network can
    /// take it: committed, unless a voter cannot say it supports it.
    pub(crate) fn upgrade_settled(&self) -> bool {
        self.upgrade.as_ref().is_none_or(|u| u.legacy.is_some() || u.committed.is_some())
    }

    /// UpdateFeatures of `kraft.version` 1 at node `id`, answered as Kafka
    /// does: NOT_CONTROLLER off the leader; at 1 already, or validating
    /// only, nothing appended; otherwise refused until every voter told
    /// the leader it supports 1, or the upgrade appended. Then, as the
    /// driver does, the actions it returned are performed at once.
    fn ask_upgrade(&mut self, id: usize, validate_only: bool) {
        let now = self.now;
        let legacy = self.upgrade.as_ref().unwrap().legacy;
        let node = self.node(id).unwrap();
        let (leads, before, end) = (node.role() == RoleName::Leader, node.kraft_version(), node.log().log_end_offset());
        let (result, actions) = node.upgrade_kraft_version(now, 1, validate_only).expect("the log failed");
        let grew = node.log().log_end_offset() - end;
        let upgrade = self.upgrade.as_mut().unwrap();
        upgrade.calls += 1;
        let appends = match &result {
            Err(KraftUpgradeError::NotLeader) => {
                assert!(!leads, "leader {id} answered an upgrade with NOT_CONTROLLER");
                false
            }
            _ if !leads => panic!("node {id}, not the leader, answered an upgrade with {result:?}"),
            Err(KraftUpgradeError::InvalidUpdateVersion(why)) => {
                assert_eq!((before, why.as_str()), (0, NOT_ALL), "leader {id} refused an upgrade");
                upgrade.refused += 1;
                false
            }
            Ok(()) if before >= 1 => false,
            Ok(()) => {
                assert_eq!(legacy, None, "leader {id} upgraded with voter {legacy:?} unable to");
                upgrade.appended += u64::from(!validate_only);
                !validate_only
            }
        };
        assert_eq!(grew, if appends { 2 } else { 0 }, "leader {id}'s log grew by {grew} for {result:?}");
        if appends {
            self.check_upgrade_appended(id, end);
        }
        self.apply(id, actions);
    }

    /// Leader `id` appended its upgrade at `end`: one batch of its epoch,
    /// KRaftVersion 1 then KRaftVoters with the static voters, in force on
    /// the leader at once.
    fn check_upgrade_appended(&self, id: usize, end: i64) {
        let node = self.up(id).unwrap();
        let batch = node.log().entry(end).expect("the upgrade's batch");
        assert_eq!((batch.base, batch.last, batch.epoch), (end, end + 1, node.epoch()), "leader {id}'s upgrade batch");
        assert_eq!(batch.kraft_versions, [(end, 1)], "leader {id}'s upgrade batch's KRaftVersion");
        let [(offset, set)] = &batch.voters[..] else { panic!("leader {id}'s upgrade batch holds no KRaftVoters") };
        assert_eq!(*offset, end + 1, "leader {id}'s upgrade's KRaftVoters is not after its KRaftVersion");
        check_upgrade_voters(&self.voters, set, *offset);
        assert_eq!((node.kraft_version(), node.voter_set()), (1, set), "leader {id} upgraded, not in force");
    }

    /// Notes when `kraft.version` 1 is first committed, and in which epoch.
    pub(crate) fn note_upgrade_committed(&mut self) {
        let committed = self.tracker.kraft_version() >= 1;
        let epoch = self.leaders.keys().next_back().copied().unwrap_or(0);
        let now = self.now;
        if let Some(upgrade) = self.upgrade.as_mut().filter(|u| committed && u.committed.is_none()) {
            upgrade.committed = Some((now, epoch));
        }
    }
}
