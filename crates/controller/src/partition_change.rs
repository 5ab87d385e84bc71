//! One partition's change, as Kafka's controller builds it
//! (`PartitionChangeBuilder`): targets for the ISR, the replicas and the
//! leader recovery state go in; the PartitionChangeRecord that reaches them
//! comes out, with the leader elected among the target ISR (or the
//! Eligible Leader Replicas, KIP-966, or uncleanly where the topic allows
//! it), or none when nothing changes.
//!
//! Who may lead is the caller's (`acceptable_leader`: registered, not
//! fenced, not in controlled shutdown, with the broker being fenced left
//! out and the one being unfenced let in). Fields follow Kafka's
//! `PartitionRegistration.merge`: a leader of -2 keeps the leader and its
//! epoch, any other starts a new leader epoch.

use krabka_metadata::PartitionImage;
use krabka_protocol::{PartitionChangeRecord, Uuid};

/// A partition's leader when none is eligible (Kafka's `NO_LEADER`).
pub const NO_LEADER: i32 = -1;
/// A PartitionChangeRecord's leader that leaves the leader as it is.
pub const NO_LEADER_CHANGE: i32 = -2;
/// Kafka's LeaderRecoveryState values.
pub const RECOVERED: i8 = 0;
pub const RECOVERING: i8 = 1;

/// How a leader may be chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    /// The first replica if it may lead, else as `Online`.
    Preferred,
    /// The current leader if it may go on, else the first target replica in
    /// the target ISR (or, the ISR empty, in the ELR) that may lead.
    Online,
    /// As `Online`, then any replica that may lead, with the ISR cut to it
    /// (records acknowledged may be lost: `unclean.leader.election.enable`).
    Unclean,
}

/// The outcome of an election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Elected {
    node: i32,
    unclean: bool,
}

/// Builds one partition's change; see the module doc.
pub struct PartitionChangeBuilder<'a, F: Fn(i32) -> bool> {
    partition: &'a PartitionImage,
    topic_id: Uuid,
    partition_id: i32,
    acceptable_leader: F,
    election: Election,
    elr_enabled: bool,
    min_isr: usize,
    target_isr: Vec<i32>,
    target_replicas: Vec<i32>,
    target_adding: Vec<i32>,
    target_removing: Vec<i32>,
    target_elr: Vec<i32>,
    target_last_known_elr: Vec<i32>,
    target_recovery_state: i8,
    unclean_shutdown_replicas: Vec<i32>,
    /// Each broker's default directory, for a replica placed anew.
    default_directory: &'a dyn Fn(i32) -> Uuid,
    /// Replicas whose broker named their directory (AssignReplicasToDirs).
    assigned_directories: Vec<(i32, Uuid)>,
}

impl<'a, F: Fn(i32) -> bool> PartitionChangeBuilder<'a, F> {
    pub fn new(partition: &'a PartitionImage, topic_id: Uuid, partition_id: i32, acceptable_leader: F) -> Self {
        PartitionChangeBuilder {
            partition,
            topic_id,
            partition_id,
            acceptable_leader,
            election: Election::Online,
            elr_enabled: false,
            min_isr: 1,
            target_isr: partition.isr.clone(),
            target_replicas: partition.replicas.clone(),
            target_adding: partition.adding_replicas.clone(),
            target_removing: partition.removing_replicas.clone(),
            target_elr: partition.elr.clone(),
            target_last_known_elr: partition.last_known_elr.clone(),
            target_recovery_state: partition.leader_recovery_state,
            unclean_shutdown_replicas: Vec::new(),
            default_directory: &|_| krabka_metadata::directory_id::UNASSIGNED,
            assigned_directories: Vec::new(),
        }
    }

    /// `broker`'s replica is in its log directory `directory` (Kafka's
    /// `setDirectory`, for AssignReplicasToDirs).
    pub fn target_directory(mut self, broker: i32, directory: Uuid) -> Self {
        self.assigned_directories.push((broker, directory));
        self
    }

    pub fn election(mut self, election: Election) -> Self {
        self.election = election;
        self
    }

    /// Eligible Leader Replicas (KIP-966) with the topic's effective
    /// `min.insync.replicas`.
    pub fn eligible_leader_replicas(mut self, enabled: bool, min_isr: usize) -> Self {
        self.elr_enabled = enabled;
        self.min_isr = min_isr;
        self
    }

    pub fn target_isr(mut self, isr: Vec<i32>) -> Self {
        self.target_isr = isr;
        self
    }

    pub fn target_replicas(mut self, replicas: Vec<i32>) -> Self {
        self.target_replicas = replicas;
        self
    }

    pub fn target_reassignment(mut self, adding: Vec<i32>, removing: Vec<i32>) -> Self {
        self.target_adding = adding;
        self.target_removing = removing;
        self
    }

    pub fn target_recovery_state(mut self, state: i8) -> Self {
        self.target_recovery_state = state;
        self
    }

    /// Replicas whose broker shut down uncleanly: out of the ELR.
    pub fn unclean_shutdown_replicas(mut self, replicas: Vec<i32>) -> Self {
        self.unclean_shutdown_replicas = replicas;
        self
    }

    pub fn default_directory(mut self, directory: &'a dyn Fn(i32) -> Uuid) -> Self {
        self.default_directory = directory;
        self
    }

    /// The record reaching the targets, or None if it would change nothing.
    pub fn build(mut self) -> Option<PartitionChangeRecord> {
        let mut record = PartitionChangeRecord {
            topic_id: self.topic_id,
            partition_id: self.partition_id,
            leader: NO_LEADER_CHANGE,
            leader_recovery_state: -1,
            ..Default::default()
        };
        self.complete_reassignment_if_possible();
        self.populate_target_elr();
        self.try_election(&mut record);
        // A replica removed from the assignment must not follow an old epoch.
        if record.leader == NO_LEADER_CHANGE
            && !self.partition.replicas.iter().all(|r| self.target_replicas.contains(r))
        {
            record.leader = self.partition.leader;
        }
        self.update_record_elr(&mut record);
        // Without ELR a partition keeps its last in-sync replica.
        if record.isr.is_none()
            && (!self.target_isr.is_empty() || self.elr_enabled)
            && self.target_isr != self.partition.isr
        {
            record.isr = Some(self.target_isr.clone());
        }
        self.update_last_known_leader(&mut record);
        self.set_assignment_changes(&mut record);
        if self.target_recovery_state != self.partition.leader_recovery_state {
            record.leader_recovery_state = self.target_recovery_state;
        }
        debug_assert!(
            record.leader < 0 || record.leader == self.partition.leader || (self.acceptable_leader)(record.leader)
        );
        (!is_no_op(&record)).then_some(record)
    }

    fn elect(&self) -> Elected {
        let clean = |node| Elected { node, unclean: false };
        let first_replica = self.target_replicas.first().copied();
        if self.election == Election::Preferred {
            if let Some(preferred) = first_replica.filter(|&r| self.may_lead_cleanly(r)) {
                return clean(preferred);
            }
        }
        if self.may_lead_cleanly(self.partition.leader) {
            return clean(self.partition.leader);
        }
        if let Some(&online) = self.target_replicas.iter().find(|&&r| self.may_lead_cleanly(r)) {
            return clean(online);
        }
        if self.may_elect_last_known_leader() {
            return Elected { node: self.partition.last_known_elr[0], unclean: true };
        }
        if self.election == Election::Unclean {
            if let Some(&any) = self.target_replicas.iter().find(|&&r| (self.acceptable_leader)(r)) {
                return Elected { node: any, unclean: true };
            }
        }
        clean(NO_LEADER)
    }

    /// In the target ISR (or, that empty, the target ELR) and allowed to lead.
    fn may_lead_cleanly(&self, replica: i32) -> bool {
        let in_sync =
            self.target_isr.contains(&replica) || (self.target_isr.is_empty() && self.target_elr.contains(&replica));
        replica >= 0 && in_sync && (self.acceptable_leader)(replica)
    }

    /// KIP-966's balanced recovery: with no ISR and no ELR left, the last
    /// leader (kept alone in the last known ELR) may lead again, if it may
    /// lead at all (alive; not the broker back from an unclean shutdown).
    fn may_elect_last_known_leader(&self) -> bool {
        self.elr_enabled
            && self.target_elr.is_empty()
            && self.target_isr.is_empty()
            && self.partition.last_known_elr.len() == 1
            && (self.acceptable_leader)(self.partition.last_known_elr[0])
    }

    fn try_election(&mut self, record: &mut PartitionChangeRecord) {
        let elected = self.elect();
        if elected.node == self.partition.leader {
            return;
        }
        if self.target_elr.contains(&elected.node) {
            self.target_isr = vec![elected.node];
            self.target_elr.retain(|&r| r != elected.node);
        } else if elected.unclean {
            tracing::warn!(
                topic_id = %self.topic_id,
                partition = self.partition_id,
                leader = elected.node,
                "unclean leader election"
            );
        }
        record.leader = elected.node;
        if elected.unclean {
            // Acknowledged records may be lost: the ISR is the new leader
            // alone, recovering until it has sent followers its log.
            record.isr = Some(vec![elected.node]);
            if self.partition.leader_recovery_state != RECOVERING {
                self.target_recovery_state = RECOVERING;
            }
        }
    }

    /// A reassignment completes once every target replica is in the ISR:
    /// the removed replicas leave the replicas and the ISR.
    fn complete_reassignment_if_possible(&mut self) {
        if self.target_adding.is_empty() && self.target_removing.is_empty() {
            return;
        }
        let removing = &self.target_removing;
        let isr: Vec<i32> = self.target_isr.iter().copied().filter(|r| !removing.contains(r)).collect();
        let replicas: Vec<i32> = self.target_replicas.iter().copied().filter(|r| !removing.contains(r)).collect();
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
            return;
        }
        self.target_isr = isr;
        self.target_replicas = replicas;
        self.target_adding.clear();
        self.target_removing.clear();
    }

    /// KIP-966: while the ISR is under `min.insync.replicas`, the members
    /// it loses (but not those that shut down uncleanly) stay electable.
    fn populate_target_elr(&mut self) {
        if !self.elr_enabled {
            return;
        }
        if self.target_isr.len() >= self.min_isr {
            self.target_elr.clear();
            self.target_last_known_elr.clear();
            return;
        }
        let mut candidates: Vec<i32> = self.target_elr.clone();
        candidates.extend(self.partition.isr.iter().copied().filter(|r| !self.target_elr.contains(r)));
        let elr: Vec<i32> = candidates
            .iter()
            .copied()
            .filter(|r| !self.target_isr.contains(r) && !self.unclean_shutdown_replicas.contains(r))
            .collect();
        for &r in &self.target_last_known_elr {
            if !candidates.contains(&r) {
                candidates.push(r);
            }
        }
        self.target_last_known_elr =
            candidates.into_iter().filter(|r| !self.target_isr.contains(r) && !elr.contains(r)).collect();
        self.target_elr = elr;
    }

    fn update_record_elr(&mut self, record: &mut PartitionChangeRecord) {
        let clean_election = record.isr.is_none();
        if !clean_election || !self.elr_enabled {
            self.target_elr.clear();
            self.target_last_known_elr.clear();
        }
        if self.target_elr != self.partition.elr {
            record.eligible_leader_replicas = Some(self.target_elr.clone());
        }
        // The last known ELR holds the last known leader (balanced
        // recovery), set in `update_last_known_leader`.
    }

    /// KIP-966: the leader when the partition first loses its ISR is kept
    /// as the last known ELR; cleared once a leader is back.
    fn update_last_known_leader(&self, record: &mut PartitionChangeRecord) {
        if !self.elr_enabled {
            if !self.partition.last_known_elr.is_empty() {
                record.last_known_elr = Some(Vec::new());
            }
            return;
        }
        let emptied = record.isr.as_ref().is_some_and(Vec::is_empty);
        let known = &self.partition.last_known_elr;
        if emptied && (known.len() != 1 || known[0] != self.partition.leader) {
            record.last_known_elr = Some(vec![self.partition.leader]);
        } else if (record.leader >= 0 || (self.partition.leader != NO_LEADER && record.leader != NO_LEADER))
            && !known.is_empty()
        {
            record.last_known_elr = Some(Vec::new());
        }
    }

    fn set_assignment_changes(&self, record: &mut PartitionChangeRecord) {
        let partition = self.partition;
        let directory_of = |replica: i32| {
            let assigned = self.assigned_directories.iter().rev().find(|(r, _)| *r == replica).map(|(_, d)| *d);
            let index = partition.replicas.iter().position(|&r| r == replica);
            assigned
                .or_else(|| index.and_then(|i| partition.directories.get(i).copied()))
                .unwrap_or_else(|| (self.default_directory)(replica))
        };
        let replicas = if self.target_replicas.is_empty() { &partition.replicas } else { &self.target_replicas };
        let directories: Vec<Uuid> = replicas.iter().map(|&r| directory_of(r)).collect();
        let replicas_change = *replicas != partition.replicas;
        if replicas_change {
            record.replicas = Some(replicas.clone());
        }
        // Directories go with a change of replicas once the partition has
        // them (metadata.version 3.7+), and with a broker's assignment.
        let has_directories = !partition.directories.is_empty() || !self.assigned_directories.is_empty();
        if has_directories && (replicas_change || directories != partition.directories) {
            record.directories = Some(directories);
        }
        if self.target_removing != partition.removing_replicas {
            record.removing_replicas = Some(self.target_removing.clone());
        }
        if self.target_adding != partition.adding_replicas {
            record.adding_replicas = Some(self.target_adding.clone());
        }
    }
}

fn is_no_op(record: &PartitionChangeRecord) -> bool {
    record.leader == NO_LEADER_CHANGE
        && record.isr.is_none()
        && record.replicas.is_none()
        && record.adding_replicas.is_none()
        && record.removing_replicas.is_none()
        && record.eligible_leader_replicas.is_none()
        && record.last_known_elr.is_none()
        && record.directories.is_none()
        && record.leader_recovery_state == -1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionImage {
        PartitionImage { leader, replicas: replicas.to_vec(), isr: isr.to_vec(), ..Default::default() }
    }

    fn alive(ids: &'static [i32]) -> impl Fn(i32) -> bool {
        move |r| ids.contains(&r)
    }

    #[test]
    fn a_leader_that_leaves_the_isr_hands_over_to_the_first_replica_in_it() {
        let p = partition(&[1, 2, 3], &[1, 2, 3], 1);
        let record = PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[2, 3])).target_isr(vec![2, 3]).build();
        let record = record.unwrap();
        assert_eq!((record.leader, record.isr), (2, Some(vec![2, 3])));
    }

    #[test]
    fn the_last_in_sync_replica_stays_without_elr_and_the_partition_goes_leaderless() {
        let p = partition(&[1, 2], &[1], 1);
        let record = PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[2])).target_isr(vec![]).build().unwrap();
        assert_eq!((record.leader, record.isr), (NO_LEADER, None));
        let back = partition(&[1, 2], &[1], NO_LEADER);
        let record = PartitionChangeBuilder::new(&back, Uuid([1; 16]), 0, alive(&[1, 2])).build().unwrap();
        assert_eq!(record.leader, 1, "an unfenced in-sync replica takes the leaderless partition");
    }

    #[test]
    fn an_unclean_election_takes_any_live_replica_and_cuts_the_isr_to_it() {
        let p = partition(&[1, 2], &[1], NO_LEADER);
        let none = PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[2])).build();
        assert!(none.is_none(), "clean: no one may lead, nothing changes");
        let record =
            PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[2])).election(Election::Unclean).build().unwrap();
        assert_eq!((record.leader, record.isr, record.leader_recovery_state), (2, Some(vec![2]), RECOVERING));
    }

    #[test]
    fn an_isr_expansion_keeps_the_leader_and_a_no_op_builds_nothing() {
        let p = partition(&[1, 2, 3], &[1, 2], 1);
        let record =
            PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[1, 2, 3])).target_isr(vec![1, 2, 3]).build();
        let record = record.unwrap();
        assert_eq!((record.leader, record.isr), (NO_LEADER_CHANGE, Some(vec![1, 2, 3])));
        assert!(PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[1, 2, 3])).build().is_none());
    }

    #[test]
    fn preferred_election_moves_leadership_back_to_the_first_replica() {
        let p = partition(&[1, 2, 3], &[1, 2, 3], 2);
        let online = PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[1, 2, 3])).build();
        assert!(online.is_none(), "an online election keeps a leader that may go on");
        let record = PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[1, 2, 3]))
            .election(Election::Preferred)
            .build()
            .unwrap();
        assert_eq!(record.leader, 1);
    }

    #[test]
    fn with_elr_the_isr_empties_into_the_elr_and_an_elr_member_may_lead() {
        let p = partition(&[1, 2, 3], &[1, 2], 1);
        let record = PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[2]))
            .eligible_leader_replicas(true, 2)
            .target_isr(vec![2])
            .build()
            .unwrap();
        assert_eq!((record.leader, record.isr.clone()), (2, Some(vec![2])));
        assert_eq!(record.eligible_leader_replicas, Some(vec![1]), "1 left the ISR under min ISR: still eligible");
        let mut after = p.clone();
        after.leader = 2;
        after.isr = vec![2];
        after.elr = vec![1];
        let record = PartitionChangeBuilder::new(&after, Uuid([1; 16]), 0, alive(&[1]))
            .eligible_leader_replicas(true, 2)
            .target_isr(vec![])
            .build()
            .unwrap();
        // 2 leaves the ISR; the ISR is empty, so 1 (in the ELR) leads alone.
        assert_eq!((record.leader, record.isr), (1, Some(vec![1])));
        assert_eq!(record.eligible_leader_replicas, Some(vec![2]));
    }

    #[test]
    fn balanced_recovery_elects_the_last_known_leader_only_if_it_may_lead() {
        let mut p = partition(&[1, 2, 3], &[], NO_LEADER);
        p.last_known_elr = vec![1];
        let elr = |acceptable: &'static [i32]| {
            PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(acceptable))
                .eligible_leader_replicas(true, 2)
                .build()
        };
        let record = elr(&[1, 2]).unwrap();
        assert_eq!((record.leader, record.isr, record.leader_recovery_state), (1, Some(vec![1]), RECOVERING));
        // Broker 1 back from an unclean shutdown (or not alive): no leader.
        assert!(elr(&[2, 3]).is_none_or(|r| r.leader == NO_LEADER_CHANGE || r.leader == NO_LEADER));
    }

    #[test]
    fn a_reassignment_completes_when_its_new_replicas_are_in_sync() {
        let mut p = partition(&[1, 2, 3, 4], &[1, 2, 3], 1);
        p.adding_replicas = vec![4];
        p.removing_replicas = vec![1];
        let record = PartitionChangeBuilder::new(&p, Uuid([1; 16]), 0, alive(&[1, 2, 3, 4]))
            .target_isr(vec![1, 2, 3, 4])
            .build();
        let record = record.unwrap();
        assert_eq!(record.replicas, Some(vec![2, 3, 4]));
        assert_eq!(record.isr, Some(vec![2, 3, 4]));
        assert_eq!((record.adding_replicas, record.removing_replicas), (Some(vec![]), Some(vec![])));
        assert_eq!(record.leader, 2, "the removed leader hands over");
    }
}
