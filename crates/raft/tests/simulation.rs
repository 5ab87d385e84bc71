//! A deterministic, seeded simulation of a KRaft quorum: 1-5 voters and
//! some observers that snapshot their committed log now and then (with a
//! small `metadata.max.retention.bytes`, so lagging nodes must fetch the
//! leader's snapshot), each a `RaftNode` over an in-memory `ReplicatedLog`
//! of real record batches (`MemLog`, a model of `PartitionLog`: offsets
//! and epochs stamped per batch, a batch of several records spanning
//! several offsets, truncation by whole batches, Kafka-shaped snapshots),
//! on a fake clock, over a network that loses, delays (so reorders),
//! duplicates and partitions messages, with nodes that crash (sometimes
//! between persisting their election state and sending what followed it)
//! and restart from their persisted election state and their flushed log.
//!
//! A third of the seeds run a dynamic quorum (KIP-853, `kraft.version` 1):
//! the initial voters start from a bootstrap snapshot holding the voter
//! set (`kafka-storage format --initial-controllers`), the others as
//! observers with empty logs (`--no-initial-controllers`), and during the
//! chaos the current leader is asked now and then to add an observer (its
//! probe answered, wrongly, late or never) or to remove a voter (sometimes
//! itself); a voter whose listeners the set has wrong tells its leader
//! (UpdateRaftVoter). The other seeds run static voters, each node with
//! its directory id and listener, so that follower voters tell each
//! leader about themselves (UpdateRaftVoter at `kraft.version` 0); half of
//! them are asked now and then to upgrade to a dynamic quorum
//! (`kraft.version` 1, KAFKA-16538), and once one is, their leaders are
//! asked for voter changes too (`upgrade`).
//!
//! Kafka's invariants are checked after every step: one leader per epoch;
//! epochs and high watermarks never go back; the committed log is the same
//! on every node, never lost, and each committed offset was on a majority
//! of the voter set its leader counted when it committed it, a set at most
//! one voter from the one in force there; snapshots hold only committed
//! offsets, equal to the committed log, with the voter set in force at
//! their end; at most one voter change is uncommitted in any leader's log,
//! and consecutive committed voter sets differ by at most one voter (so
//! their majorities meet); every node's voter set and `kraft.version` are
//! what its log and snapshot say, and what a node committed says what the
//! committed log does (so `kraft.version` never goes back); each voter
//! change is answered once, as it went; an upgrade is refused until every
//! voter told the leader about itself, and then writes KRaftVersion 1 and
//! the static voters with their directory ids in one batch. At the end the
//! network heals and proposals to the leader must commit on every node,
//! every node must agree on the voter set, and a quorum asked to upgrade
//! must be upgraded.
//!
//! `cargo test -p krabka-raft --test simulation` runs 1,000 seeds;
//! `KRABKA_LONG_TESTS=1` runs 100,000; `KRABKA_RAFT_SEED=<seed>` replays one
//! (`KRABKA_RAFT_TRACE` prints what it did, `KRABKA_RAFT_DEBUG=<id>` the
//! healed network's messages to and from node `id`).

#[path = "simulation/mem_log.rs"]
mod mem_log;
#[path = "simulation/upgrade.rs"]
mod upgrade;
#[path = "simulation/voters.rs"]
mod voters;

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use bytes::Bytes;
use krabka_log::{ReplicatedLog, SnapshotId};
use krabka_raft::{Action, ElectionState, Message, RaftConfig, RaftNode, RoleName, VoterSet};

use mem_log::{encode_snapshot, MemLog, Stored};
use upgrade::Upgrade;
use voters::Tracker;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `per_mille` / 1000.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

const STEP_MS: i64 = 5;
const CHAOS_STEPS: usize = 3_000;
const HEALED_STEPS: usize = 2_000;

enum Slot {
    Up(Box<RaftNode<MemLog>>),
    Down(MemLog),
}

struct InFlight {
    at: i64,
    from: i32,
    to: i32,
    message: Message,
}

struct Sim {
    rng: Rng,
    seed: u64,
    now: i64,
    /// `controller.quorum.voters`: the static voters, empty in a dynamic
    /// quorum (whose voters are in its logs).
    voters: Vec<i32>,
    /// The voters the quorum started with (a dynamic one's bootstrap set).
    initial: Vec<i32>,
    /// Whether the quorum was formatted dynamic (`kraft.version` 1), with
    /// a bootstrap snapshot; a static one may be upgraded to it.
    bootstrapped: bool,
    /// A static quorum asked to become dynamic, and how that went.
    upgrade: Option<Upgrade>,
    /// UpdateRaftVoter sent by voters at `kraft.version` 0.
    static_updates: u64,
    slots: Vec<Option<Slot>>,
    persisted: Vec<Option<ElectionState>>,
    restarts: u64,
    net: Vec<InFlight>,
    /// Each node's side of the partition; messages cross only within one.
    side: Vec<u8>,
    loss: u64,
    duplication: u64,
    crashes: bool,
    // What the invariants remember.
    max_epoch: Vec<i32>,
    last_hw: Vec<i64>,
    leaders: BTreeMap<i32, i32>,
    /// The committed log, by offset: the batch holding each offset.
    committed: Vec<Rc<Stored>>,
    proposals: u64,
    /// `metadata.max.retention.bytes` of every node (-1: none).
    retention: i64,
    /// How often (per mille a step) an up node snapshots its committed log.
    snapshot_rate: u64,
    /// The snapshots checked against the committed log, by node.
    checked_snapshots: BTreeSet<(usize, SnapshotId)>,
    snapshots_taken: u64,
    snapshots_installed: u64,
    /// The voter sets, what leaders committed, and the voter changes asked for.
    tracker: Tracker,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng(seed);
        let dynamic = rng.chance(333);
        // A dynamic quorum has observers to add.
        let (voter_count, observers) = match dynamic {
            true => (1 + rng.below(4) as usize, 1 + rng.below(3) as usize),
            false => (1 + rng.below(5) as usize, rng.below(3) as usize),
        };
        let n = voter_count + observers;
        let initial: Vec<i32> = (0..voter_count as i32).collect();
        let bootstrap = dynamic.then(|| voters::bootstrap_set(&initial, &mut rng));
        let upgrade = (!dynamic && rng.chance(500)).then(|| Upgrade::new(voter_count, &mut rng));
        let static_set = VoterSet::from_ids(if dynamic { &[] } else { &initial });
        let mut sim = Sim {
            seed,
            now: 0,
            voters: if dynamic { Vec::new() } else { initial.clone() },
            initial,
            bootstrapped: dynamic,
            upgrade,
            static_updates: 0,
            slots: (0..n).map(|_| None).collect(),
            persisted: vec![None; n],
            restarts: 0,
            net: Vec::new(),
            side: vec![0; n],
            loss: rng.below(300),
            duplication: rng.below(100),
            crashes: true,
            max_epoch: vec![0; n],
            last_hw: vec![0; n],
            leaders: BTreeMap::new(),
            committed: Vec::new(),
            proposals: 0,
            retention: if rng.chance(250) { -1 } else { rng.below(1600) as i64 },
            snapshot_rate: rng.below(30),
            checked_snapshots: BTreeSet::new(),
            snapshots_taken: 0,
            snapshots_installed: 0,
            tracker: Tracker::new(
                bootstrap.clone().unwrap_or_else(|| static_set.clone()),
                static_set,
                i16::from(dynamic),
            ),
            rng,
        };
        for id in 0..n {
            let log = match &bootstrap {
                Some(set) if id < voter_count => MemLog::bootstrapped(encode_snapshot(1, Some(set), &[])),
                _ => MemLog::default(),
            };
            sim.slots[id] = Some(Slot::Down(log));
            sim.start(id);
        }
        sim
    }

    /// Whether the committed `kraft.version` is 1: formatted so, or upgraded.
    fn dynamic(&self) -> bool {
        self.tracker.kraft_version() >= 1
    }

    fn config(&mut self, id: usize) -> RaftConfig {
        self.restarts += 1;
        // Small reads and chunks, so that fetches and snapshot downloads
        // take many round trips.
        let max_fetch_bytes = 64 + self.rng.below(1500) as u32;
        RaftConfig {
            node_id: id as i32,
            voters: self.voters.clone(),
            election_timeout_ms: 100,
            fetch_timeout_ms: 300,
            fetch_max_wait_ms: 50,
            retry_backoff_ms: 60,
            request_timeout_ms: 2000,
            membership: match self.bootstrapped {
                true => voters::membership(id as i32, &self.initial),
                false => upgrade::static_membership(id as i32, self.upgrade.as_ref()),
            },
            max_fetch_bytes,
            fetch_snapshot_max_bytes: max_fetch_bytes as i32,
            retention_max_bytes: self.retention,
            retention_ms: -1,
            seed: self.seed.wrapping_mul(31).wrapping_add(self.restarts),
        }
    }

    fn start(&mut self, id: usize) {
        let Some(Slot::Down(log)) = self.slots[id].take() else { panic!("node {id} is not down") };
        let config = self.config(id);
        let node = RaftNode::open(config, log, self.persisted[id], self.now).expect("the log failed");
        assert!(node.epoch() >= self.max_epoch[id], "node {id} restarted into an older epoch");
        self.last_hw[id] = 0;
        self.slots[id] = Some(Slot::Up(Box::new(node)));
    }

    fn crash(&mut self, id: usize) {
        if let Some(Slot::Up(node)) = self.slots[id].take() {
            self.slots[id] = Some(Slot::Down(node.into_log().crash()));
        }
        // Its voter changes die with it, unanswered.
        self.tracker.forget(id);
    }

    fn node(&mut self, id: usize) -> Option<&mut RaftNode<MemLog>> {
        match self.slots[id].as_mut() {
            Some(Slot::Up(node)) => Some(node),
            _ => None,
        }
    }

    fn up(&self, id: usize) -> Option<&RaftNode<MemLog>> {
        match self.slots[id].as_ref() {
            Some(Slot::Up(node)) => Some(node),
            _ => None,
        }
    }

    fn log(&self, id: usize) -> &MemLog {
        match self.slots[id].as_ref().unwrap() {
            Slot::Up(node) => node.log(),
            Slot::Down(log) => log,
        }
    }

    /// Performs `actions` in order; rarely the node crashes part way, after
    /// a persist and before what follows it.
    fn apply(&mut self, id: usize, actions: Vec<Action>) {
        let cut = if self.crashes && self.rng.chance(3) {
            self.rng.below(actions.len() as u64 + 1) as usize
        } else {
            actions.len()
        };
        let crash = cut < actions.len();
        for action in actions.into_iter().take(cut) {
            match action {
                Action::PersistElectionState(state) => self.persisted[id] = Some(state),
                Action::Send { to, message } => self.send(id as i32, to, message),
                Action::BecameLeader { epoch } => {
                    let leader = *self.leaders.entry(epoch).or_insert(id as i32);
                    assert_eq!(leader, id as i32, "two leaders in epoch {epoch}");
                }
                Action::SnapshotInstalled { .. } => self.snapshots_installed += 1,
                Action::Committed { high_watermark } => self.leader_committed(id, high_watermark),
                Action::SteppedDown { .. } => {}
                Action::ProbeVoter { request, voter } => self.probe_asked(id, request, voter),
                Action::VoterChangeDone { request, error } => self.change_done(id, request, error),
            }
        }
        if crash {
            self.crash(id);
        }
    }

    fn send(&mut self, from: i32, to: i32, message: Message) {
        if matches!(message, Message::UpdateVoterRequest { .. })
            && self.up(from as usize).is_some_and(|n| n.kraft_version() == 0)
        {
            self.static_updates += 1;
        }
        let copies = if self.rng.chance(self.duplication) { 2 } else { 1 };
        for _ in 0..copies {
            if self.rng.chance(self.loss) {
                continue;
            }
            let at = self.now + 1 + self.rng.below(15) as i64;
            self.net.push(InFlight { at, from, to, message: message.clone() });
        }
    }

    fn deliver(&mut self) {
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.net.len() {
            if self.net[i].at <= self.now {
                due.push(self.net.swap_remove(i))
            } else {
                i += 1
            }
        }
        // swap_remove and the random delays already shuffle; shuffle again.
        for k in (1..due.len()).rev() {
            due.swap(k, self.rng.below(k as u64 + 1) as usize);
        }
        for m in due {
            let (from, to) = (m.from as usize, m.to as usize);
            if self.side[from] != self.side[to] {
                continue;
            }
            let now = self.now;
            if std::env::var("KRABKA_RAFT_DEBUG").is_ok_and(|v| v == to.to_string() || v == m.from.to_string())
                && !self.crashes
            {
                eprintln!("{now} {} -> {}: {:?}", m.from, m.to, m.message);
            }
            if let Some(node) = self.node(to) {
                let actions = node.handle(now, m.from, m.message).expect("the log failed");
                self.apply(to, actions);
            }
        }
    }

    fn tick_all(&mut self) {
        for id in 0..self.slots.len() {
            let now = self.now;
            if let Some(node) = self.node(id) {
                let actions = node.tick(now).expect("the log failed");
                self.apply(id, actions);
            }
        }
    }

    fn leader(&self) -> Option<usize> {
        (0..self.slots.len()).find(|&id| self.up(id).is_some_and(|n| n.role() == RoleName::Leader))
    }

    /// Proposes one to three values, one batch, to the leader (if any): its
    /// first offset and epoch.
    fn propose(&mut self) -> Option<(i64, i32)> {
        let id = self.leader()?;
        let values: Vec<Bytes> = (0..1 + self.rng.below(3))
            .map(|_| {
                self.proposals += 1;
                Bytes::from(format!("value-{}", self.proposals))
            })
            .collect();
        let now = self.now;
        let node = self.node(id).unwrap();
        let epoch = node.epoch();
        let (info, actions) = node.propose(&values, now).expect("the log failed")?;
        self.apply(id, actions);
        Some((info.first_offset, epoch))
    }

    fn chaos(&mut self) {
        let n = self.slots.len();
        for id in 0..n {
            let up = self.node(id).is_some();
            if up && self.rng.chance(2) {
                self.crash(id);
            } else if !up && self.rng.chance(20) {
                self.start(id);
            }
        }
        if self.rng.chance(4) {
            let sides = 1 + self.rng.below(3) as u8;
            for id in 0..n {
                self.side[id] = self.rng.below(sides as u64) as u8;
            }
        } else if self.rng.chance(6) {
            self.side = vec![0; n];
        }
        if self.rng.chance(30) {
            self.propose();
        }
        self.maybe_change_voters();
        self.maybe_upgrade();
        for id in 0..n {
            if self.rng.chance(self.snapshot_rate) {
                self.snapshot(id);
            }
        }
    }

    /// Node `id` snapshots what it has committed, as the metadata loader
    /// does when its policy says one is due: the voter set in the header is
    /// the node's own for that offset, as the loader asks the node for it.
    fn snapshot(&mut self, id: usize) {
        let now = self.now;
        let Some(node) = self.up(id) else { return };
        let end = node.high_watermark();
        // An offset committed since the last check is not known to be yet.
        if end <= node.log().start() || end as usize > self.committed.len() {
            return;
        }
        let last = node.log().entry(end - 1).expect("a committed batch");
        assert_eq!(last.last, end - 1, "node {id}'s high watermark {end} is inside a batch");
        let (version, voters) = node.voters_at(end);
        let expected = self.tracker.expected_at(end);
        assert_eq!((version, voters.clone()), expected, "node {id}: the voters after offset {} are wrong", end - 1);
        let bytes = encode_snapshot(version, voters.as_ref(), &node.log().batches_before(end));
        let snapshot = SnapshotId { end_offset: end, epoch: last.epoch };
        if self.node(id).unwrap().store_snapshot(snapshot, &bytes, now).expect("the log failed") {
            self.snapshots_taken += 1;
        }
    }

    fn step(&mut self) {
        self.now += STEP_MS;
        self.deliver();
        self.deliver_probes();
        self.tick_all();
        self.check();
        self.note_upgrade_committed();
    }

    /// Kafka's invariants, after every step.
    fn check(&mut self) {
        for id in 0..self.slots.len() {
            let Some(Slot::Up(node)) = self.slots[id].as_ref() else { continue };
            let (epoch, hw, role) = (node.epoch(), node.high_watermark(), node.role());
            assert!(epoch >= self.max_epoch[id], "node {id}: epoch went back {} -> {epoch}", self.max_epoch[id]);
            assert!(hw >= self.last_hw[id], "node {id}: high watermark went back {} -> {hw}", self.last_hw[id]);
            assert!(hw <= node.log().log_end_offset(), "node {id}: high watermark past the log end");
            assert!(node.log().is_boundary(hw), "node {id}: high watermark {hw} inside a batch");
            if role == RoleName::Leader {
                let leader = *self.leaders.entry(epoch).or_insert(id as i32);
                assert_eq!(leader, id as i32, "two leaders in epoch {epoch}");
            }
            self.max_epoch[id] = epoch;
            let from = self.last_hw[id];
            self.last_hw[id] = hw;
            if let Some(truncated) = node.log().truncated_to.take() {
                assert!(truncated >= from, "node {id} truncated to {truncated}, below its high watermark {from}");
            }
            self.check_committed(id, from, hw);
            if hw > from {
                self.check_committed_voters(id);
            }
            self.check_snapshots(id);
            self.check_node_voters(id);
        }
    }

    /// Every snapshot a node holds is a prefix of the committed log with
    /// the voter set in force at its end: only committed offsets are
    /// snapshotted, and a fetched one arrives whole.
    fn check_snapshots(&mut self, id: usize) {
        let log = self.log(id);
        let fresh: Vec<(SnapshotId, Rc<mem_log::Snapshot>)> = log
            .snapshots
            .iter()
            .filter(|(snapshot, _)| !self.checked_snapshots.contains(&(id, **snapshot)))
            .map(|(snapshot, s)| (*snapshot, s.clone()))
            .collect();
        for (snapshot, held) in fresh {
            let end = snapshot.end_offset;
            assert!(end as usize <= self.committed.len(), "node {id}: snapshot {snapshot:?} past the committed log");
            let mut next = 0;
            for batch in &held.batches {
                assert_eq!(batch.base, next, "node {id}: snapshot {snapshot:?} skips offsets");
                for offset in batch.base..=batch.last {
                    let committed = self.committed.get(offset as usize);
                    assert!(committed.is_some_and(|c| **c == **batch), "node {id}: snapshot {snapshot:?} differs");
                }
                next = batch.last + 1;
            }
            assert_eq!(next, end, "node {id}: snapshot {snapshot:?} ends at {next}");
            if end > 0 {
                let epoch = held.batches.last().map(|b| b.epoch);
                assert_eq!(epoch, Some(snapshot.epoch), "node {id}: snapshot {snapshot:?}'s epoch");
            }
            let said = (held.kraft_version.unwrap_or(0), held.voters.clone());
            let expected = self.tracker.expected_at(end);
            assert_eq!(said, expected, "node {id}: snapshot {snapshot:?}'s voters");
            self.checked_snapshots.insert((id, snapshot));
        }
        let log = self.log(id);
        if log.start() > 0 {
            let first = log.snapshots.keys().next().map(|s| s.end_offset);
            assert_eq!(first, Some(log.start()), "node {id}: the log starts after no snapshot");
        }
    }

    /// Node `id`'s committed offsets [from, to) are the cluster's committed
    /// log; an offset committed for the first time is checked against what
    /// its leader counted (`voters::Tracker`).
    fn check_committed(&mut self, id: usize, from: i64, to: i64) {
        for offset in from..to {
            let entry = self.log(id).entry(offset).expect("committed but not in the log");
            if let Some(committed) = self.committed.get(offset as usize) {
                assert!(*committed == entry, "node {id}: committed offset {offset} differs");
                continue;
            }
            assert_eq!(offset as usize, self.committed.len(), "node {id}: a gap in the committed log");
            self.tracker.newly_committed(offset, &entry);
            self.committed.push(entry);
        }
    }
}

impl Sim {
    /// The network heals and every node comes back: a value proposed to
    /// the leader must commit, every node must learn it, every voter change
    /// asked for must be answered, every node must agree on the voters, and
    /// a quorum asked to upgrade must be upgraded (`upgrade_settled`).
    fn liveness(&mut self) {
        for id in 0..self.slots.len() {
            if self.node(id).is_none() {
                self.start(id);
            }
        }
        self.side = vec![0; self.slots.len()];
        let mut proposed: Option<(i64, i32)> = None;
        for step in 0..HEALED_STEPS {
            self.heal_upgrade(step);
            self.step();
            let committed = proposed
                .is_some_and(|(offset, epoch)| self.committed.get(offset as usize).is_some_and(|e| e.epoch == epoch));
            if committed {
                let end = self.committed.len() as i64;
                let learned = (0..self.slots.len()).all(|id| self.up(id).is_some_and(|n| n.high_watermark() >= end));
                if learned && self.voters_settled() && self.upgrade_settled() {
                    return self.check_logs_match();
                }
            } else if self.now % 500 == 0 || proposed.is_none() {
                // A proposal lost with a deposed leader is proposed again.
                proposed = self.propose().or(proposed);
            }
        }
        let nodes: Vec<String> = (0..self.slots.len())
            .map(|id| {
                let n = self.up(id).unwrap();
                format!(
                    "{id}: {:?} epoch {} leader {:?} hw {} end {} voters {:?} kraft.version {}",
                    n.role(),
                    n.epoch(),
                    n.leader_id(),
                    n.high_watermark(),
                    n.log().log_end_offset(),
                    n.voter_ids(),
                    n.kraft_version()
                )
            })
            .collect();
        panic!(
            "no progress with the network healed: proposed {proposed:?}, committed {}, voter changes unanswered {:?}, \
             upgrade {:?}; {nodes:?}",
            self.committed.len(),
            self.tracker.outstanding(),
            self.upgrade
        );
    }

    /// Log matching: two logs with a batch of the same epoch at an offset
    /// hold the same batch there.
    fn check_logs_match(&self) {
        for a in 0..self.slots.len() {
            for b in a + 1..self.slots.len() {
                let (la, lb) = (self.log(a), self.log(b));
                for offset in 0..la.log_end_offset() {
                    if let (Some(ea), Some(eb)) = (la.entry(offset), lb.entry(offset)) {
                        assert!(ea.epoch != eb.epoch || ea == eb, "nodes {a} and {b} differ at offset {offset}");
                    }
                }
            }
        }
    }
}

/// What a run of seeds covered, for `--nocapture`.
#[derive(Default)]
struct Totals {
    seeds: u64,
    /// Seeds formatted dynamic.
    dynamic: u64,
    changes_done: u64,
    changes_refused: u64,
    snapshots_installed: u64,
    cuts_inside_batches: u64,
    /// UpdateRaftVoter sent at `kraft.version` 0.
    static_updates: u64,
    /// Static seeds asked to upgrade, those of them with a voter unable
    /// to, and those upgraded under faults and by the end.
    upgrading: u64,
    legacy: u64,
    upgraded_under_faults: u64,
    upgraded: u64,
    upgrade_calls: u64,
    upgrades_refused: u64,
    upgrades_appended: u64,
    /// Epochs with a leader elected after an upgrade committed.
    elections_after_upgrade: u64,
}

impl Totals {
    /// What seed `sim` covered, once run.
    fn of(sim: &Sim) -> Totals {
        let nodes = sim.slots.len();
        let mut totals = Totals {
            seeds: 1,
            dynamic: u64::from(sim.bootstrapped),
            changes_done: sim.tracker.done(),
            changes_refused: sim.tracker.refused(),
            snapshots_installed: sim.snapshots_installed,
            cuts_inside_batches: (0..nodes).map(|id| sim.log(id).cuts_inside_batches.get()).sum(),
            static_updates: sim.static_updates,
            ..Totals::default()
        };
        if let Some(upgrade) = &sim.upgrade {
            totals.upgrading = 1;
            totals.legacy = u64::from(upgrade.legacy.is_some());
            totals.upgrade_calls = upgrade.calls;
            totals.upgrades_refused = upgrade.refused;
            totals.upgrades_appended = upgrade.appended;
            if let Some((at, epoch)) = upgrade.committed {
                totals.upgraded = 1;
                totals.upgraded_under_faults = u64::from(at <= CHAOS_STEPS as i64 * STEP_MS);
                totals.elections_after_upgrade = sim.leaders.range(epoch + 1..).count() as u64;
            }
        }
        totals
    }

    fn add(&mut self, other: &Totals) {
        self.seeds += other.seeds;
        self.dynamic += other.dynamic;
        self.changes_done += other.changes_done;
        self.changes_refused += other.changes_refused;
        self.snapshots_installed += other.snapshots_installed;
        self.cuts_inside_batches += other.cuts_inside_batches;
        self.static_updates += other.static_updates;
        self.upgrading += other.upgrading;
        self.legacy += other.legacy;
        self.upgraded_under_faults += other.upgraded_under_faults;
        self.upgraded += other.upgraded;
        self.upgrade_calls += other.upgrade_calls;
        self.upgrades_refused += other.upgrades_refused;
        self.upgrades_appended += other.upgrades_appended;
        self.elections_after_upgrade += other.elections_after_upgrade;
    }

    fn print(&self) {
        eprintln!(
            "{} seeds ({} with dynamic voters): {} voter changes done, {} refused, {} snapshots fetched, \
             {} truncations inside a batch",
            self.seeds,
            self.dynamic,
            self.changes_done,
            self.changes_refused,
            self.snapshots_installed,
            self.cuts_inside_batches
        );
        eprintln!(
            "{} UpdateRaftVoter at kraft.version 0; {} static seeds asked to upgrade ({} with a voter unable to): \
             {} upgraded under faults, {} by the end; {} UpdateFeatures, {} refused, {} upgrades appended; \
             {} leaders elected after an upgrade committed",
            self.static_updates,
            self.upgrading,
            self.legacy,
            self.upgraded_under_faults,
            self.upgraded,
            self.upgrade_calls,
            self.upgrades_refused,
            self.upgrades_appended,
            self.elections_after_upgrade
        );
    }
}

/// One seed: chaos, then the healed network's liveness check.
fn run(seed: u64) -> Totals {
    let mut sim = Sim::new(seed);
    for _ in 0..CHAOS_STEPS {
        sim.chaos();
        sim.step();
    }
    sim.loss = 0;
    sim.duplication = 0;
    sim.crashes = false;
    sim.liveness();
    let nodes = sim.slots.len();
    let totals = Totals::of(&sim);
    if std::env::var("KRABKA_RAFT_TRACE").is_ok() {
        let epochs = sim.leaders.len();
        let (committed, restarts) = (sim.committed.len(), sim.restarts);
        let voters = sim.up(sim.leader().unwrap()).unwrap().voter_ids();
        eprintln!(
            "seed {seed}: kraft.version {} -> {}, voters {:?} -> {voters:?} of {nodes} nodes, {epochs} epochs with a leader, \
             {committed} committed, {restarts} starts, {} snapshots taken, {} fetched, {}, \
             {} truncations inside a batch, upgrade {:?}",
            i16::from(sim.bootstrapped),
            sim.tracker.kraft_version(),
            sim.initial,
            sim.snapshots_taken,
            sim.snapshots_installed,
            sim.tracker.summary(),
            totals.cuts_inside_batches,
            sim.upgrade
        );
    }
    totals
}

fn run_seeds(seeds: std::ops::Range<u64>) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let mut totals = Totals::default();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let seeds = seeds.clone();
                scope.spawn(move || {
                    let mut totals = Totals::default();
                    for seed in seeds.skip(t as usize).step_by(threads as usize) {
                        match std::panic::catch_unwind(|| run(seed)) {
                            Ok(run) => totals.add(&run),
                            Err(panic) => {
                                eprintln!("raft simulation failed at seed {seed}; replay with:");
                                eprintln!("KRABKA_RAFT_SEED={seed} cargo test -p krabka-raft --test simulation");
                                std::panic::resume_unwind(panic);
                            }
                        }
                    }
                    totals
                })
            })
            .collect();
        for worker in workers {
            totals.add(&worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
    });
    totals.print();
}

#[test]
fn the_quorum_keeps_kafkas_invariants_under_loss_partitions_crashes_and_voter_changes() {
    if let Ok(seed) = std::env::var("KRABKA_RAFT_SEED") {
        run(seed.parse().expect("KRABKA_RAFT_SEED is a number"));
        return;
    }
    let long = std::env::var("KRABKA_LONG_TESTS").is_ok_and(|v| v == "1");
    run_seeds(0..if long { 100_000 } else { 1_000 });
}
