//! The simulation's voter changes (KIP-853) and the invariants about who
//! votes: what leaders committed and with which voter set, the committed
//! voter sets, each node's voter set against its log, at most one voter
//! change uncommitted in a leader's log, and the answer to every change
//! asked for. A static quorum's upgrade to `kraft.version` 1 is
//! `upgrade`'s; here it is one more committed voter set, the static
//! voters with their directory ids, which changes no one's vote.
//!
//! Kafka's leader counts a majority of its latest voter set, committed or
//! not, and appends a change only once the previous one committed, so the
//! set it counts when an offset first commits is the set in force there
//! (the latest at or before it in the committed log) or the next one, one
//! voter apart: any majority of the one meets any majority of the other,
//! which is what keeps two leaders from being elected in one epoch and a
//! committed offset from being lost across the change.

use std::collections::{BTreeMap, BTreeSet};

use krabka_log::ReplicatedLog;
use krabka_protocol::Uuid;
use krabka_raft::{Listener, Membership, RoleName, VoterChangeError, VoterNode, VoterSet, KRAFT_VERSION_MAX};

use super::mem_log::Stored;
use super::{upgrade, Rng, Sim};

/// How often (per mille a step) the leader is asked for a voter change.
const CHANGE_RATE: u64 = 15;
/// The most voters the simulation keeps.
const MAX_VOTERS: usize = 5;

pub fn listener(id: i32) -> Listener {
    Listener { name: "CONTROLLER".into(), host: format!("node-{id}"), port: 9000 + id as u16 }
}

/// Node `id` as a voter: its directory id, its listener, the
/// `kraft.version` range it supports.
pub fn voter_node(id: i32) -> VoterNode {
    VoterNode { id, directory_id: Uuid([id as u8 + 1; 16]), listeners: vec![listener(id)], kraft_versions: (0, 1) }
}

/// Node `id` in a dynamic quorum: it asks the initial voters for the leader.
pub fn membership(id: i32, initial: &[i32]) -> Membership {
    Membership {
        directory_id: voter_node(id).directory_id,
        listeners: vec![listener(id)],
        bootstrap: initial.to_vec(),
        auto_join: false,
    }
}

/// The bootstrap snapshot's voter set; now and then one voter's listener
/// in it is out of date, as when a controller moved after the format (it
/// tells its leader with UpdateRaftVoter).
pub fn bootstrap_set(initial: &[i32], rng: &mut Rng) -> VoterSet {
    let stale = rng.chance(250).then(|| rng.below(initial.len() as u64) as i32);
    VoterSet::new(initial.iter().map(|&id| {
        let mut node = voter_node(id);
        if stale == Some(id) {
            node.listeners[0].port += 1000;
        }
        node
    }))
}

/// A voter's key: its id and directory id (its listeners may change).
/// A static voter has no directory id: it is the same voter as the one of
/// its id the upgrade to `kraft.version` 1 writes, so a set with a static
/// voter is compared by ids alone.
fn keys(set: &VoterSet, by_id: bool) -> BTreeSet<(i32, Uuid)> {
    set.nodes().map(|v| (v.id, if by_id { Uuid::ZERO } else { v.directory_id })).collect()
}

/// How many voters are in one of two sets and not the other.
fn changed_voters(a: &VoterSet, b: &VoterSet) -> usize {
    let by_id = a.nodes().chain(b.nodes()).any(|v| v.directory_id == Uuid::ZERO);
    keys(a, by_id).symmetric_difference(&keys(b, by_id)).count()
}

/// A voter change asked of a leader, and how it may end other than done.
#[derive(Debug)]
pub struct Request {
    leader: usize,
    voter: i32,
    add: bool,
    /// Whether it can succeed (not a duplicate, not a wrong directory id).
    valid: bool,
    allowed: Vec<VoterChangeError>,
    /// An add answered once its record is appended (AddRaftVoter v1's
    /// `AckWhenCommitted` false, as a controller joining by itself asks).
    ack_on_append: bool,
}

/// The answer to a leader's probe of a new voter, and when it arrives
/// (never: None).
struct Probe {
    at: Option<i64>,
    leader: usize,
    request: u64,
    answer: Option<(i16, i16)>,
}

pub struct Tracker {
    /// The committed voter sets by the offset of their record (-1: the
    /// bootstrap or static set).
    committed: Vec<(i64, VoterSet)>,
    /// The committed `kraft.version`s by the offset of their record (-1:
    /// the one the quorum was formatted at); they only go up.
    versions: Vec<(i64, i16)>,
    /// What leaders committed: offsets [from, to), with the voter set the
    /// leader counted.
    leader_commits: Vec<(i64, i64, VoterSet)>,
    /// The highest high watermark a leader reached.
    leader_committed_end: i64,
    /// The voter set of a node whose log and snapshot say none (static).
    static_set: VoterSet,
    requests: BTreeMap<u64, Request>,
    probes: Vec<Probe>,
    next_request: u64,
    done: u64,
    /// The refusals, by error.
    refused: BTreeMap<String, u64>,
    max_voters: usize,
}

impl Tracker {
    pub fn new(initial: VoterSet, static_set: VoterSet, kraft_version: i16) -> Tracker {
        Tracker {
            max_voters: initial.len(),
            committed: vec![(-1, initial)],
            versions: vec![(-1, kraft_version)],
            leader_commits: Vec::new(),
            leader_committed_end: 0,
            static_set,
            requests: BTreeMap::new(),
            probes: Vec::new(),
            next_request: 0,
            done: 0,
            refused: BTreeMap::new(),
        }
    }

    /// Node `id` crashed: what it was asked dies unanswered.
    pub fn forget(&mut self, id: usize) {
        self.requests.retain(|_, r| r.leader != id);
        self.probes.retain(|p| p.leader != id);
    }

    pub fn outstanding(&self) -> Vec<(&u64, &Request)> {
        self.requests.iter().collect()
    }

    pub fn done(&self) -> u64 {
        self.done
    }

    pub fn refused(&self) -> u64 {
        self.refused.values().sum()
    }

    pub fn summary(&self) -> String {
        format!(
            "{} voter changes done, refused {:?}, at most {} voters, {} voter sets committed",
            self.done,
            self.refused,
            self.max_voters,
            self.committed.len()
        )
    }

    /// The voter set in force at `offset` in the committed log.
    fn in_force(&self, offset: i64) -> &VoterSet {
        let at = self.committed.partition_point(|(o, _)| *o <= offset);
        &self.committed[at - 1].1
    }

    /// The latest committed `kraft.version`.
    pub fn kraft_version(&self) -> i16 {
        self.versions.last().unwrap().1
    }

    /// `kraft.version` and the voter set a snapshot ending at `end` holds,
    /// or a node that committed up to `end` knows (none at `kraft.version`
    /// 0).
    pub fn expected_at(&self, end: i64) -> (i16, Option<VoterSet>) {
        let at = self.versions.partition_point(|(o, _)| *o < end);
        let version = self.versions[at - 1].1;
        (version, (version >= 1).then(|| self.in_force(end - 1).clone()))
    }

    /// `offset` (in `entry`) is committed for the first time: a leader
    /// committed it, counting a voter set at most one voter from the one in
    /// force there; a voter set it holds is one voter from the last, or the
    /// static voters the upgrade wrote; `kraft.version` only goes up.
    pub fn newly_committed(&mut self, offset: i64, entry: &Stored) {
        let at = self.leader_commits.partition_point(|(_, to, _)| *to <= offset);
        let Some((from, _, counted)) = self.leader_commits.get(at) else {
            panic!("offset {offset} committed, and no leader committed it");
        };
        assert!(*from <= offset, "offset {offset} committed, and no leader committed it");
        if let Some((_, version)) = entry.kraft_versions.iter().find(|(o, _)| *o == offset) {
            // An upgrade raises it; a new leader of a quorum formatted
            // dynamic writes it again after the bootstrap snapshot's.
            let current = self.kraft_version();
            assert!(*version >= current, "kraft.version {current} then {version} committed at {offset}");
            assert!(*version <= KRAFT_VERSION_MAX, "kraft.version {version} committed at {offset}");
            self.versions.push((offset, *version));
        }
        if let Some((_, set)) = entry.voters.iter().find(|(o, _)| *o == offset) {
            let last = &self.committed.last().unwrap().1;
            if self.committed.len() == 1 && !self.static_set.is_empty() {
                // The first voter record of a static quorum: its upgrade's,
                // right after KRaftVersion 1 in the same batch.
                let upgraded = entry.kraft_versions.contains(&(offset - 1, 1));
                assert!(upgraded, "voters {:?} committed at {offset}, at kraft.version 0", set.ids());
                upgrade::check_upgrade_voters(&self.static_set.ids(), set, offset);
            }
            let changed = changed_voters(last, set);
            assert!(changed <= 1, "committed voters {:?} then {:?} at {offset}", last.ids(), set.ids());
            assert!((1..=MAX_VOTERS).contains(&set.len()), "committed {} voters at {offset}", set.len());
            self.max_voters = self.max_voters.max(set.len());
            self.committed.push((offset, set.clone()));
        }
        let in_force = self.in_force(offset);
        assert!(
            changed_voters(counted, in_force) <= 1,
            "offset {offset} committed on a majority of {:?}, and {:?} was in force there",
            counted.ids(),
            in_force.ids()
        );
    }
}

impl Sim {
    /// Node `id` reported its high watermark at `hw`: when it leads its
    /// epoch, the offsets no leader committed before are each on a majority
    /// of the voter set it counts (its latest).
    pub(crate) fn leader_committed(&mut self, id: usize, hw: i64) {
        let node = self.up(id).expect("an up node committed");
        let from = self.tracker.leader_committed_end;
        if self.leaders.get(&node.epoch()) != Some(&(id as i32)) || hw <= from {
            return;
        }
        let set = node.voter_set().clone();
        let majority = set.len() / 2 + 1;
        let mut offset = from;
        while offset < hw {
            let entry = node.log().entry(offset).expect("the leader committed what its log does not hold");
            let holders =
                set.nodes().filter(|v| self.log(v.id as usize).entry(offset).as_ref() == Some(&entry)).count();
            assert!(holders >= majority, "leader {id} committed offset {offset} on {holders} of {:?}", set.ids());
            offset = entry.last + 1;
        }
        self.tracker.leader_commits.push((from, hw, set));
        self.tracker.leader_committed_end = hw;
    }

    /// Node `id`'s voter set and `kraft.version` are what its log says (its
    /// latest records, else the snapshot it starts after, else the static
    /// voters); a node that knows the voters from a record knows
    /// `kraft.version` 1, the only version they are written at. A node that
    /// is not a voter runs for election or leads only while its removal is
    /// not known to be committed. A leader's log holds at most one voter
    /// change past what leaders committed.
    pub(crate) fn check_node_voters(&self, id: usize) {
        let node = self.up(id).unwrap();
        let (version, voters) = node.log().voters_said(None);
        let said = voters.as_ref().map_or(&self.tracker.static_set, |(_, set)| set);
        assert_eq!(node.voter_set(), said, "node {id}'s voters are not what its log says");
        assert_eq!(
            node.kraft_version(),
            version.unwrap_or(0),
            "node {id}'s kraft.version is not its log's (snapshots {:?}, start {}, end {}, at {})",
            node.log().snapshots.keys().collect::<Vec<_>>(),
            node.log().start(),
            node.log().log_end_offset(),
            self.now
        );
        if voters.is_some() {
            assert_eq!(node.kraft_version(), 1, "node {id} knows the voters from its log, at kraft.version 0");
        }
        let role = node.role();
        if !node.is_voter() {
            // Removed by a record not known to be committed: it may still be
            // needed to elect a leader (and leads until that commits it).
            let removal_pending = voters.as_ref().is_some_and(|(offset, _)| {
                let before = node.log().voters_said(Some(*offset)).1;
                *offset >= node.high_watermark() && before.is_some_and(|(_, set)| set.contains(id as i32))
            });
            let allowed = match role {
                RoleName::Unattached | RoleName::Follower => true,
                RoleName::Resigned => self.dynamic(),
                RoleName::Leader | RoleName::Prospective | RoleName::Candidate => removal_pending,
            };
            assert!(allowed, "node {id}, not a voter, is {role:?}");
        }
        if role == RoleName::Leader {
            self.check_one_change_pending(id);
        }
    }

    /// What node `id` committed says of the voters what the committed log
    /// says at its high watermark (the same `kraft.version` and voter set),
    /// and its latest `kraft.version` (committed or not) is no lower: a
    /// node's `kraft.version` never goes back in its committed prefix.
    pub(crate) fn check_committed_voters(&self, id: usize) {
        let node = self.up(id).unwrap();
        let hw = node.high_watermark();
        let (version, voters) = node.voters_at(hw);
        let (committed_version, committed_voters) = self.tracker.expected_at(hw);
        assert_eq!(version, committed_version, "node {id}: kraft.version at its high watermark {hw}");
        assert_eq!(voters, committed_voters, "node {id}: the voters at its high watermark {hw}");
        let latest = node.kraft_version();
        assert!(latest >= version, "node {id}: kraft.version {latest}, below its committed {version}");
    }

    /// At most one voter change in leader `id`'s log past what leaders
    /// committed, and that of one voter.
    fn check_one_change_pending(&self, id: usize) {
        let log = self.up(id).unwrap().log();
        let committed_end = self.tracker.leader_committed_end;
        let records = log.voter_records_from(committed_end);
        if records.is_empty() {
            return;
        }
        let before = log.voters_said(Some(committed_end)).1;
        let mut current = before.map_or_else(|| self.tracker.static_set.clone(), |(_, set)| set);
        let mut changes = 0;
        for (offset, set) in records {
            let changed = changed_voters(&current, &set);
            assert!(changed <= 1, "leader {id}: voters {:?} then {:?} at {offset}", current.ids(), set.ids());
            changes += changed;
            current = set;
        }
        assert!(changes <= 1, "leader {id}'s log holds {changes} uncommitted voter changes");
    }

    /// Now and then the leader is asked to add an observer (up to five
    /// voters) or to remove a voter (down to one), sometimes itself, and
    /// rarely for a change it must refuse.
    pub(crate) fn maybe_change_voters(&mut self) {
        if !self.dynamic() || !self.rng.chance(CHANGE_RATE) {
            return;
        }
        let Some(leader) = self.leader() else { return };
        let set = self.up(leader).unwrap().voter_set().clone();
        let outsiders: Vec<i32> = (0..self.slots.len() as i32).filter(|id| !set.contains(*id)).collect();
        let request = self.tracker.next_request;
        self.tracker.next_request += 1;
        let pick = |rng: &mut Rng, ids: &[i32]| ids[rng.below(ids.len() as u64) as usize];
        if self.rng.chance(30) {
            let voter = pick(&mut self.rng, &set.ids());
            self.ask_add(leader, request, voter, false);
        } else if set.len() < MAX_VOTERS && !outsiders.is_empty() && (set.len() == 1 || self.rng.chance(500)) {
            let voter = pick(&mut self.rng, &outsiders);
            self.ask_add(leader, request, voter, true);
        } else if set.len() > 1 {
            // One of the initial voters stays: observers find the leader
            // through them (`controller.quorum.bootstrap.servers`).
            let removable: Vec<i32> = set
                .ids()
                .into_iter()
                .filter(|&v| set.ids().iter().any(|&o| o != v && self.initial.contains(&o)))
                .collect();
            let voter = match removable.contains(&(leader as i32)) && self.rng.chance(300) {
                true => leader as i32,
                false => pick(&mut self.rng, &removable),
            };
            let wrong_directory = self.rng.chance(30);
            let directory_id = if wrong_directory { Uuid([0xee; 16]) } else { set.get(voter).unwrap().directory_id };
            self.ask_remove(leader, request, voter, directory_id, !wrong_directory);
        }
    }

    fn ask_add(&mut self, leader: usize, request: u64, voter: i32, valid: bool) {
        use VoterChangeError::*;
        let mut allowed = vec![RequestTimedOut, NotLeader];
        if !valid {
            allowed.push(DuplicateVoter);
        }
        let ack_on_append = self.rng.chance(300);
        self.tracker.requests.insert(request, Request { leader, voter, add: true, valid, allowed, ack_on_append });
        let now = self.now;
        let node = self.node(leader).unwrap();
        let actions = node.add_voter_acked(now, request, voter_node(voter), !ack_on_append);
        self.apply(leader, actions);
    }

    fn ask_remove(&mut self, leader: usize, request: u64, voter: i32, directory_id: Uuid, valid: bool) {
        use VoterChangeError::*;
        let mut allowed = vec![RequestTimedOut, NotLeader];
        if !valid {
            allowed.push(VoterNotFound);
        }
        let ack_on_append = false;
        self.tracker.requests.insert(request, Request { leader, voter, add: false, valid, allowed, ack_on_append });
        let now = self.now;
        let node = self.node(leader).unwrap();
        let actions = node.remove_voter(now, request, voter, directory_id).expect("the log failed");
        self.apply(leader, actions);
    }

    /// Leader `id` probes the voter it adds: the driver's ApiVersions is
    /// answered in time with the range every node supports, now and then
    /// with a narrower one (the voter's entry is then out of date, and it
    /// says so with UpdateRaftVoter), one without the finalized version, no
    /// answer, a late one, or never.
    pub(crate) fn probe_asked(&mut self, id: usize, request: u64, voter: VoterNode) {
        let asked = self.tracker.requests.get_mut(&request).expect("a probe for a request asked");
        assert_eq!((asked.leader, asked.voter, asked.add), (id, voter.id, true), "a probe for another change");
        let soon = self.now + self.rng.below(200) as i64;
        let (at, answer) = match self.rng.below(100) {
            0..65 => (Some(soon), Some((0, 1))),
            65..75 => (Some(soon), Some((1, 1))),
            75..80 => (Some(soon), Some((2, 3))),
            80..90 => (Some(soon), None),
            90..95 => (Some(soon + 2_000 + self.rng.below(1_000) as i64), Some((0, 1))),
            _ => (None, None),
        };
        if answer == Some((2, 3)) {
            asked.allowed.push(VoterChangeError::InvalidRequest);
        }
        self.tracker.probes.push(Probe { at, leader: id, request, answer });
    }

    /// The probe answers due now.
    pub(crate) fn deliver_probes(&mut self) {
        let now = self.now;
        let (due, later): (Vec<Probe>, Vec<Probe>) =
            std::mem::take(&mut self.tracker.probes).into_iter().partition(|p| p.at.is_some_and(|at| at <= now));
        self.tracker.probes = later;
        for probe in due {
            if let Some(node) = self.node(probe.leader) {
                let actions = node.voter_probed(now, probe.request, probe.answer).expect("the log failed");
                self.apply(probe.leader, actions);
            }
        }
    }

    /// Leader `id` answered a voter change: once, and done only when its
    /// record is committed (a leader that removed itself then resigned);
    /// refused only for a reason that request can have.
    pub(crate) fn change_done(&mut self, id: usize, request: u64, error: VoterChangeError) {
        let Some(asked) = self.tracker.requests.remove(&request) else {
            panic!("node {id} answered voter change {request}, not asked or answered already");
        };
        assert_eq!(asked.leader, id, "voter change {request} answered by another node");
        if error != VoterChangeError::None {
            assert!(asked.allowed.contains(&error), "voter change {asked:?} refused with {error:?}");
            *self.tracker.refused.entry(format!("{error:?}")).or_default() += 1;
            return;
        }
        assert!(asked.valid, "voter change {asked:?} done");
        let node = self.up(id).unwrap();
        assert_eq!(node.voter_set().contains(asked.voter), asked.add, "voter change {asked:?} done, not in the set");
        let (_, latest) = node.log().voters_said(None);
        let offset = latest.expect("a voter change done with no record").0;
        let committed = offset < node.high_watermark();
        assert!(
            committed || asked.ack_on_append,
            "voter change {asked:?} done before its record at {offset} committed"
        );
        if !asked.add && asked.voter == id as i32 {
            assert_eq!(node.role(), RoleName::Resigned, "leader {id} removed itself and still leads");
        }
        self.tracker.done += 1;
    }

    /// Every voter change asked was answered, the leader committed its
    /// latest voter set, and every node has that set.
    pub(crate) fn voters_settled(&self) -> bool {
        let Some(leader) = self.leader().and_then(|id| self.up(id)) else { return false };
        let latest = leader.log().voters_said(None).1;
        let committed = latest.is_none_or(|(offset, _)| offset < leader.high_watermark());
        let agreed = (0..self.slots.len()).all(|id| {
            let version = self.tracker.kraft_version();
            self.up(id).is_some_and(|n| n.voter_set() == leader.voter_set() && n.kraft_version() == version)
        });
        self.tracker.requests.is_empty() && committed && agreed
    }
}
