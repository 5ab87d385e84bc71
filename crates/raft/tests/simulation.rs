//! A deterministic, seeded simulation of a KRaft quorum: 1-5 voters and
//! 0-2 observers that snapshot their committed log now and then (with a
//! small `metadata.max.retention.bytes`, so lagging nodes must fetch the
//! leader's snapshot), each a `RaftNode` over an in-memory `ReplicatedLog` (a
//! test implementation of the log interface, so that a thousand seeds run
//! in seconds), on a fake clock, over a network that loses, delays (so
//! reorders), duplicates and partitions messages, with nodes that crash
//! (sometimes between persisting their election state and sending what
//! followed it) and restart from their persisted election state and their
//! flushed log. Kafka's invariants are checked after every step; at the
//! end the network heals and proposals to the leader must commit on every
//! node.
//!
//! `cargo test -p krabka-raft --test simulation` runs 1,000 seeds;
//! `KRABKA_LONG_TESTS=1` runs 100,000; `KRABKA_RAFT_SEED=<seed>` replays one.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use krabka_log::{AppendInfo, LogError, ReplicatedLog, SnapshotId};
use krabka_raft::{Action, ElectionState, Message, RaftConfig, RaftNode, RoleName};

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

/// The log as raft sees it, in memory: one offset per appended batch from
/// `start` (what came before is in the newest snapshot), and what was not
/// flushed is lost in a crash. Snapshots are durable when written; one
/// holds every entry before its end offset, each as (epoch, length, bytes).
#[derive(Default)]
struct MemLog {
    start: i64,
    entries: Vec<(i32, Bytes)>,
    flushed: i64,
    snapshots: BTreeMap<SnapshotId, Bytes>,
    /// The lowest offset truncated since the simulation last looked.
    truncated_to: Cell<Option<i64>>,
}

impl MemLog {
    fn crash(mut self) -> MemLog {
        self.entries.truncate((self.flushed - self.start) as usize);
        self.truncated_to.set(None);
        self
    }

    /// The entry at `offset`, from the log or below its start from the
    /// newest snapshot.
    fn entry(&self, offset: i64) -> Option<(i32, Bytes)> {
        if offset >= self.start {
            return self.entries.get((offset - self.start) as usize).cloned();
        }
        let (id, bytes) = self.snapshots.iter().next_back()?;
        (offset < id.end_offset).then(|| snapshot_entries(bytes).swap_remove(offset as usize))
    }

    fn push(&mut self, epoch: i32, records: &Bytes) -> AppendInfo {
        let offset = self.log_end_offset();
        self.entries.push((epoch, records.clone()));
        AppendInfo {
            first_offset: offset,
            last_offset: offset,
            log_append_time_ms: -1,
            record_count: 1,
            bytes: records.len() as u64,
        }
    }

    /// A snapshot of every entry before `end` (all committed).
    fn snapshot_of(&self, end: i64) -> Bytes {
        let mut out = BytesMut::new();
        for offset in 0..end {
            let (epoch, payload) = self.entry(offset).expect("a snapshot of entries the log holds");
            out.put_i32(epoch);
            out.put_u32(payload.len() as u32);
            out.put_slice(&payload);
        }
        out.freeze()
    }
}

fn snapshot_entries(bytes: &Bytes) -> Vec<(i32, Bytes)> {
    let mut buf = bytes.clone();
    let mut entries = Vec::new();
    while buf.has_remaining() {
        let (epoch, len) = (buf.get_i32(), buf.get_u32() as usize);
        entries.push((epoch, buf.split_to(len)));
    }
    entries
}

impl ReplicatedLog for MemLog {
    fn append_as_leader(&mut self, records: &Bytes, epoch: i32, _now_ms: i64) -> Result<AppendInfo, LogError> {
        Ok(self.push(epoch, records))
    }

    /// Takes what `read` encoded: (offset, epoch, length, bytes) per entry.
    fn append_as_follower(&mut self, records: &Bytes, _now_ms: i64) -> Result<AppendInfo, LogError> {
        let mut buf = records.clone();
        let first_offset = self.log_end_offset();
        let mut bytes = 0;
        while buf.has_remaining() {
            let (offset, epoch, len) = (buf.get_i64(), buf.get_i32(), buf.get_u32() as usize);
            let log_end_offset = self.log_end_offset();
            if offset != log_end_offset {
                return Err(LogError::NonMonotonicOffset { offset, log_end_offset });
            }
            let payload = buf.split_to(len);
            bytes += self.push(epoch, &payload).bytes;
        }
        let last_offset = self.log_end_offset() - 1;
        Ok(AppendInfo {
            first_offset,
            last_offset,
            log_append_time_ms: -1,
            record_count: last_offset - first_offset + 1,
            bytes,
        })
    }

    fn log_start_offset(&self) -> i64 {
        self.start
    }

    fn log_end_offset(&self) -> i64 {
        self.start + self.entries.len() as i64
    }

    fn last_epoch(&self) -> Option<i32> {
        self.entries.last().map(|(epoch, _)| *epoch)
    }

    /// As `PartitionLog`'s epoch cache: each epoch's start is where its
    /// first entry in the log is, and an epoch older than every entry ends
    /// at the first entry's offset.
    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        if epoch < 0 || self.entries.is_empty() {
            return None;
        }
        if self.last_epoch() == Some(epoch) {
            return Some((epoch, self.log_end_offset()));
        }
        let higher = self.entries.iter().position(|(e, _)| *e > epoch)?;
        let end = self.start + higher as i64;
        let floor = self.entries[..higher].iter().map(|(e, _)| *e).max();
        Some((floor.unwrap_or(epoch), end))
    }

    fn truncate_to(&mut self, offset: i64, _now_ms: i64) -> Result<(), LogError> {
        if offset < self.log_end_offset() {
            assert!(offset >= self.start, "truncating below the log start");
            self.entries.truncate((offset - self.start) as usize);
            self.flushed = self.flushed.min(offset);
            self.truncated_to.set(Some(self.truncated_to.get().map_or(offset, |t| t.min(offset))));
        }
        Ok(())
    }

    fn flush(&mut self, _now_ms: i64) -> Result<(), LogError> {
        self.flushed = self.log_end_offset();
        Ok(())
    }

    fn last_flushed_offset(&self) -> i64 {
        self.flushed
    }

    fn read(&self, offset: i64, max_bytes: u32, upper_bound: i64) -> Result<Bytes, LogError> {
        let mut out = BytesMut::new();
        let mut at = offset;
        while at < upper_bound.min(self.log_end_offset()) && (out.is_empty() || out.len() < max_bytes as usize) {
            let (epoch, payload) = &self.entries[(at - self.start) as usize];
            out.put_i64(at);
            out.put_i32(*epoch);
            out.put_u32(payload.len() as u32);
            out.put_slice(payload);
            at += 1;
        }
        Ok(out.freeze())
    }

    /// Durable at once: only flushed entries are ever cut (they are
    /// committed, below a snapshot).
    fn delete_records_before(&mut self, offset: i64, _now_ms: i64) -> Result<(), LogError> {
        assert!(offset <= self.flushed, "the log start moved past what is flushed");
        let cut = (offset - self.start).clamp(0, self.entries.len() as i64) as usize;
        self.entries.drain(..cut);
        self.start = self.start.max(offset);
        Ok(())
    }

    fn latest_snapshot(&self) -> Result<Option<(SnapshotId, Bytes)>, LogError> {
        Ok(self.snapshots.iter().next_back().map(|(id, bytes)| (*id, bytes.clone())))
    }

    fn write_snapshot(&mut self, id: SnapshotId, bytes: &[u8]) -> Result<(), LogError> {
        self.snapshots.insert(id, Bytes::copy_from_slice(bytes));
        Ok(())
    }

    fn delete_snapshots_before(&mut self, end_offset: i64) -> Result<(), LogError> {
        self.snapshots.retain(|id, _| id.end_offset >= end_offset);
        Ok(())
    }

    fn snapshots(&self) -> Result<Vec<(SnapshotId, u64)>, LogError> {
        Ok(self.snapshots.iter().map(|(id, bytes)| (*id, bytes.len() as u64)).collect())
    }

    fn read_snapshot(&self, id: SnapshotId, position: u64, max_bytes: u32) -> Result<Option<(u64, Bytes)>, LogError> {
        Ok(self.snapshots.get(&id).map(|bytes| {
            let from = (position as usize).min(bytes.len());
            let to = (from + max_bytes as usize).min(bytes.len());
            (bytes.len() as u64, bytes.slice(from..to))
        }))
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64, _now_ms: i64) -> Result<(), LogError> {
        self.entries.clear();
        self.start = offset;
        self.flushed = offset;
        self.truncated_to.set(Some(self.truncated_to.get().map_or(offset, |t| t.min(offset))));
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.entries.iter().map(|(_, payload)| 16 + payload.len() as u64).sum()
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
    voters: Vec<i32>,
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
    committed: Vec<(i32, Bytes)>,
    proposals: u64,
    /// `metadata.max.retention.bytes` of every node (-1: none).
    retention: i64,
    /// How often (per mille a step) an up node snapshots its committed log.
    snapshot_rate: u64,
    /// The snapshots checked against the committed log, by node.
    checked_snapshots: BTreeSet<(usize, SnapshotId)>,
    snapshots_taken: u64,
    snapshots_installed: u64,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng(seed);
        let voter_count = 1 + rng.below(5) as usize;
        let observers = rng.below(3) as usize;
        let n = voter_count + observers;
        let mut sim = Sim {
            seed,
            now: 0,
            voters: (0..voter_count as i32).collect(),
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
            retention: if rng.chance(250) { -1 } else { rng.below(400) as i64 },
            snapshot_rate: rng.below(30),
            checked_snapshots: BTreeSet::new(),
            snapshots_taken: 0,
            snapshots_installed: 0,
            rng,
        };
        for id in 0..n {
            sim.slots[id] = Some(Slot::Down(MemLog::default()));
            sim.start(id);
        }
        sim
    }

    fn config(&mut self, id: usize) -> RaftConfig {
        self.restarts += 1;
        RaftConfig {
            node_id: id as i32,
            voters: self.voters.clone(),
            election_timeout_ms: 100,
            fetch_timeout_ms: 300,
            fetch_max_wait_ms: 50,
            retry_backoff_ms: 60,
            request_timeout_ms: 2000,
            membership: Default::default(),
            max_fetch_bytes: 64 + self.rng.below(600) as u32,
            retention_max_bytes: self.retention,
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
    }

    fn node(&mut self, id: usize) -> Option<&mut RaftNode<MemLog>> {
        match self.slots[id].as_mut() {
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
                Action::Committed { .. } | Action::SteppedDown { .. } => {}
                Action::ProbeVoter { .. } | Action::VoterChangeDone { .. } => {}
            }
        }
        if crash {
            self.crash(id);
        }
    }

    fn send(&mut self, from: i32, to: i32, message: Message) {
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

    fn leader(&mut self) -> Option<usize> {
        (0..self.slots.len()).find(|&id| self.node(id).is_some_and(|n| n.role() == RoleName::Leader))
    }

    /// Proposes one value to the leader (if any): its offset and epoch.
    fn propose(&mut self) -> Option<(i64, i32)> {
        let id = self.leader()?;
        self.proposals += 1;
        let value = Bytes::from(format!("value-{}", self.proposals));
        let now = self.now;
        let node = self.node(id).unwrap();
        let epoch = node.epoch();
        let (info, actions) = node.propose(&[value], now).expect("the log failed")?;
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
        for id in 0..n {
            if self.rng.chance(self.snapshot_rate) {
                self.snapshot(id);
            }
        }
    }

    /// Node `id` snapshots what it has committed, as the metadata loader
    /// does when its policy says one is due.
    fn snapshot(&mut self, id: usize) {
        let now = self.now;
        let Some(node) = self.node(id) else { return };
        let end = node.high_watermark();
        if end <= node.log().log_start_offset() {
            return;
        }
        let epoch = node.log().entry(end - 1).expect("a committed entry").0;
        let bytes = node.log().snapshot_of(end);
        if node.store_snapshot(SnapshotId { end_offset: end, epoch }, &bytes, now).expect("the log failed") {
            self.snapshots_taken += 1;
        }
    }

    fn step(&mut self) {
        self.now += STEP_MS;
        self.deliver();
        self.tick_all();
        self.check();
    }

    /// Kafka's invariants, after every step.
    fn check(&mut self) {
        for id in 0..self.slots.len() {
            let Some(Slot::Up(node)) = self.slots[id].as_ref() else { continue };
            let (epoch, hw, role) = (node.epoch(), node.high_watermark(), node.role());
            assert!(epoch >= self.max_epoch[id], "node {id}: epoch went back {} -> {epoch}", self.max_epoch[id]);
            assert!(hw >= self.last_hw[id], "node {id}: high watermark went back {} -> {hw}", self.last_hw[id]);
            assert!(hw <= node.log().log_end_offset(), "node {id}: high watermark past the log end");
            if !node.is_voter() {
                assert!(matches!(role, RoleName::Unattached | RoleName::Follower), "observer {id} is {role:?}");
            }
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
            self.check_snapshots(id);
        }
    }

    /// Every snapshot a node holds is a prefix of the committed log: only
    /// committed offsets are snapshotted, and a fetched one arrives whole.
    fn check_snapshots(&mut self, id: usize) {
        let log = self.log(id);
        let fresh: Vec<(SnapshotId, Bytes)> = log
            .snapshots
            .iter()
            .filter(|(snapshot, _)| !self.checked_snapshots.contains(&(id, **snapshot)))
            .map(|(snapshot, bytes)| (*snapshot, bytes.clone()))
            .collect();
        for (snapshot, bytes) in fresh {
            let entries = snapshot_entries(&bytes);
            let end = snapshot.end_offset as usize;
            assert_eq!(entries.len(), end, "node {id}: snapshot {snapshot:?} holds {} entries", entries.len());
            assert!(end <= self.committed.len(), "node {id}: snapshot {snapshot:?} past the committed log");
            assert_eq!(entries[..], self.committed[..end], "node {id}: snapshot {snapshot:?} differs");
            assert_eq!(entries.last().map(|e| e.0), Some(snapshot.epoch), "node {id}: snapshot {snapshot:?}'s epoch");
            self.checked_snapshots.insert((id, snapshot));
        }
        let log = self.log(id);
        if log.start > 0 {
            let first = log.snapshots.keys().next().map(|s| s.end_offset);
            assert_eq!(first, Some(log.start), "node {id}: the log starts after no snapshot");
        }
    }

    /// Node `id`'s committed offsets [from, to) are the cluster's committed
    /// log; an offset committed for the first time is on a majority.
    fn check_committed(&mut self, id: usize, from: i64, to: i64) {
        for offset in from..to {
            let entry = self.log(id).entry(offset).expect("committed but not in the log");
            if (offset as usize) < self.committed.len() {
                assert_eq!(self.committed[offset as usize], entry, "node {id}: committed offset {offset} differs");
                continue;
            }
            assert_eq!(offset as usize, self.committed.len(), "node {id}: a gap in the committed log");
            let holders =
                self.voters.iter().filter(|&&v| self.log(v as usize).entry(offset).as_ref() == Some(&entry)).count();
            assert!(
                holders > self.voters.len() / 2,
                "offset {offset} committed on {holders} of {} voters",
                self.voters.len()
            );
            self.committed.push(entry);
        }
    }
}

impl Sim {
    /// The network heals and every node comes back: a value proposed to
    /// the leader must commit, and every node must learn it.
    fn liveness(&mut self) {
        for id in 0..self.slots.len() {
            if self.node(id).is_none() {
                self.start(id);
            }
        }
        self.side = vec![0; self.slots.len()];
        let mut proposed: Option<(i64, i32)> = None;
        for _ in 0..HEALED_STEPS {
            self.step();
            let committed = proposed
                .is_some_and(|(offset, epoch)| self.committed.get(offset as usize).is_some_and(|e| e.0 == epoch));
            if committed {
                let end = self.committed.len() as i64;
                if (0..self.slots.len()).all(|id| self.node(id).is_some_and(|n| n.high_watermark() >= end)) {
                    return self.check_logs_match();
                }
            } else if self.now % 500 == 0 || proposed.is_none() {
                // A proposal lost with a deposed leader is proposed again.
                proposed = self.propose().or(proposed);
            }
        }
        let nodes: Vec<String> = (0..self.slots.len())
            .map(|id| {
                let n = self.node(id).unwrap();
                format!(
                    "{id}: {:?} epoch {} leader {:?} hw {} end {}",
                    n.role(),
                    n.epoch(),
                    n.leader_id(),
                    n.high_watermark(),
                    n.log().log_end_offset()
                )
            })
            .collect();
        panic!(
            "no progress with the network healed: proposed {proposed:?}, committed {}; {nodes:?}",
            self.committed.len()
        );
    }

    /// Log matching: two logs with an entry of the same epoch at an offset
    /// hold the same entry there.
    fn check_logs_match(&self) {
        for a in 0..self.slots.len() {
            for b in a + 1..self.slots.len() {
                let (la, lb) = (self.log(a), self.log(b));
                for offset in 0..la.log_end_offset() {
                    if let (Some((ea, ba)), Some((eb, bb))) = (la.entry(offset), lb.entry(offset)) {
                        assert!(ea != eb || ba == bb, "nodes {a} and {b} differ at offset {offset}, epoch {ea}");
                    }
                }
            }
        }
    }
}

/// One seed: chaos, then the healed network's liveness check.
fn run(seed: u64) {
    let mut sim = Sim::new(seed);
    for _ in 0..CHAOS_STEPS {
        sim.chaos();
        sim.step();
    }
    sim.loss = 0;
    sim.duplication = 0;
    sim.crashes = false;
    sim.liveness();
    if std::env::var("KRABKA_RAFT_TRACE").is_ok() {
        let epochs = sim.leaders.len();
        let (voters, nodes, committed, restarts) =
            (sim.voters.len(), sim.slots.len(), sim.committed.len(), sim.restarts);
        let (taken, installed) = (sim.snapshots_taken, sim.snapshots_installed);
        eprintln!("seed {seed}: {voters} voters of {nodes}, {epochs} epochs with a leader, {committed} committed, {restarts} starts, {taken} snapshots taken, {installed} fetched");
    }
}

fn run_seeds(seeds: std::ops::Range<u64>) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    std::thread::scope(|scope| {
        for t in 0..threads {
            let seeds = seeds.clone();
            scope.spawn(move || {
                for seed in seeds.skip(t as usize).step_by(threads as usize) {
                    let outcome = std::panic::catch_unwind(|| run(seed));
                    if let Err(panic) = outcome {
                        eprintln!("raft simulation failed at seed {seed}; replay with:");
                        eprintln!("KRABKA_RAFT_SEED={seed} cargo test -p krabka-raft --test simulation");
                        std::panic::resume_unwind(panic);
                    }
                }
            });
        }
    });
}

#[test]
fn the_quorum_keeps_kafkas_invariants_under_loss_partitions_and_crashes() {
    if let Ok(seed) = std::env::var("KRABKA_RAFT_SEED") {
        return run(seed.parse().expect("KRABKA_RAFT_SEED is a number"));
    }
    let long = std::env::var("KRABKA_LONG_TESTS").is_ok_and(|v| v == "1");
    run_seeds(0..if long { 100_000 } else { 1_000 });
}
