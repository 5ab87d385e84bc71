//! A deterministic, seeded simulation of one replicated partition: three
//! brokers, the controller's real plans (krabka-controller: registration,
//! heartbeats, session expiry and fencing, AlterPartition, elections) on a
//! real metadata image, the leader's real `ReplicaSet` and the real KIP-320
//! divergence rule (krabka-replication). Logs, fetches and the clock are
//! the simulation's: each step a seeded choice among a produce with
//! acks=all, a follower's fetch, the leader's ISR check, a crash (the
//! broker stops; its log survives, as a flushed one) and a restart.
//!
//! After every step it checks what Kafka promises: every acknowledged
//! record is in the live leader's log at the offset it was acknowledged
//! at; the leader is in the ISR, the ISR among the replicas; every ISR
//! member that the leader counts as caught up agrees with the leader below
//! the high watermark. At the end every broker restarts and the logs
//! converge to the same records. A failure names its seed.
//!
//! Every seed runs twice: without and with Eligible Leader Replicas
//! (KIP-966, on as in a new cluster: the controller may elect from the
//! ELR when the ISR is empty, and a restart is clean, registering with
//! its last broker epoch, or unclean, three times in four and once in
//! four, which takes the broker out of every ELR).
//!
//! `SEEDS` seeds run in the test command; `KRABKA_LONG_TESTS=1` runs
//! 100,000 (`KRABKA_SIM_SEEDS` overrides either).

use krabka_controller::alter_partition::plan_alter_partition;
use krabka_controller::brokers::{plan_broker_heartbeat, plan_register_broker, BrokerSessions};
use krabka_metadata::{MetadataImage, MetadataRecord, PartitionImage};
use krabka_protocol::alter_partition_request::{BrokerState, PartitionData, TopicData};
use krabka_protocol::{
    AlterPartitionRequest, BrokerHeartbeatRequest, BrokerRegistrationRequest, PartitionRecord, TopicRecord, Uuid,
};
use krabka_replication::divergence::{follower_truncation, leader_divergence};
use krabka_replication::replica_set::ReplicaSet;

const SEEDS: u64 = 300;
const LONG_SEEDS: u64 = 100_000;
const STEPS: usize = 400;
const BROKERS: [i32; 3] = [1, 2, 3];
const MIN_ISR: usize = 2;
const SESSION_MS: i64 = 1_000;
const LAG_MS: i64 = 800;
const STEP_MS: i64 = 50;
const TOPIC_ID: Uuid = Uuid([9; 16]);
const CLUSTER: &str = "sim";

/// A seeded generator (splitmix64): the same seed, the same run.
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
        self.next() % n
    }
}

/// One broker's replica of the partition.
#[derive(Default)]
struct Broker {
    id: i32,
    alive: bool,
    /// Each record's leader epoch and value; the offset is the index.
    log: Vec<(i32, u64)>,
    /// The leader epoch cache: each epoch and its start offset.
    epochs: Vec<(i32, i64)>,
    high_watermark: i64,
    broker_epoch: i64,
    /// Set while it leads: the epoch it leads and its replica set.
    leading: Option<(i32, ReplicaSet)>,
}

impl Broker {
    fn log_end(&self) -> i64 {
        self.log.len() as i64
    }

    /// The last fetched epoch a follower sends: its epoch cache's latest,
    /// as Kafka's (and krabka's) follower sends it, which may be an epoch
    /// it led with no record of it.
    fn last_epoch(&self) -> i32 {
        self.epochs.last().map_or(-1, |&(epoch, _)| epoch)
    }

    /// Kafka's endOffsetFor (as krabka-log's leader epoch cache answers
    /// it): the largest epoch at most `epoch` and where it ends; an epoch
    /// older than every one known ends where the first known starts; None
    /// for an epoch newer than all.
    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        if epoch < 0 {
            return None;
        }
        if self.epochs.last().is_some_and(|&(e, _)| e == epoch) {
            return Some((epoch, self.log_end()));
        }
        let higher = self.epochs.iter().position(|&(e, _)| e > epoch)?;
        let end = self.epochs[higher].1;
        Some(higher.checked_sub(1).map_or((epoch, end), |floor| (self.epochs[floor].0, end)))
    }

    fn append(&mut self, epoch: i32, value: u64) {
        if self.epochs.last().is_none_or(|&(e, _)| e < epoch) {
            self.epochs.push((epoch, self.log_end()));
        }
        self.log.push((epoch, value));
    }

    fn truncate_to(&mut self, offset: i64) {
        self.log.truncate(offset as usize);
        self.epochs.retain(|&(_, start)| start < offset);
        self.high_watermark = self.high_watermark.min(offset);
    }
}

struct Acked {
    offset: i64,
    value: u64,
}

struct Sim {
    rng: Rng,
    now: i64,
    image: MetadataImage,
    sessions: BrokerSessions,
    brokers: Vec<Broker>,
    next_value: u64,
    /// Produces waiting for the high watermark: offset, value, leader and epoch.
    waiting: Vec<(i64, u64, i32, i32)>,
    acked: Vec<Acked>,
    /// Follower truncations after a diverging epoch.
    truncations: u64,
    /// Eligible Leader Replicas on.
    elr: bool,
    /// Restarts that registered as after an unclean shutdown.
    unclean_restarts: u64,
    /// Leaders elected from the ELR (the ISR empty).
    elr_elections: u64,
    seed: u64,
}

impl Sim {
    fn new(seed: u64, elr: bool) -> Self {
        let mut sim = Sim {
            rng: Rng(seed),
            now: 0,
            image: MetadataImage::default(),
            sessions: BrokerSessions::new(SESSION_MS),
            brokers: BROKERS.iter().map(|&id| Broker { id, ..Default::default() }).collect(),
            next_value: 0,
            waiting: Vec::new(),
            acked: Vec::new(),
            truncations: 0,
            elr,
            unclean_restarts: 0,
            elr_elections: 0,
            seed,
        };
        if elr {
            // As a new cluster's bootstrap leaves them (krabka-controller's
            // `plan_bootstrap_features` with min.insync.replicas 2).
            sim.image.features.insert("eligible.leader.replicas.version".into(), 1);
            sim.image.broker_configs.insert("min.insync.replicas".into(), MIN_ISR.to_string());
        }
        for id in BROKERS {
            sim.start(id, true);
        }
        let topic = TopicRecord { name: "t".into(), topic_id: TOPIC_ID, ..Default::default() };
        let partition = PartitionRecord {
            topic_id: TOPIC_ID,
            partition_id: 0,
            replicas: BROKERS.to_vec(),
            isr: BROKERS.to_vec(),
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            ..Default::default()
        };
        sim.commit(vec![MetadataRecord::Topic(topic), MetadataRecord::Partition(partition)]);
        sim
    }

    fn partition(&self) -> &PartitionImage {
        &self.image.topics["t"].partitions[0]
    }

    fn broker(&mut self, id: i32) -> &mut Broker {
        &mut self.brokers[(id - 1) as usize]
    }

    /// Applies committed records, then lets every broker follow the image.
    fn commit(&mut self, records: Vec<MetadataRecord>) {
        for record in &records {
            if let MetadataRecord::PartitionChange(change) = record {
                let before = self.partition();
                let from_elr = before.isr.is_empty() && before.elr.contains(&change.leader);
                self.elr_elections += u64::from(from_elr);
            }
            self.image.apply(record).unwrap_or_else(|e| panic!("seed {}: {e}", self.seed));
            self.image.offset += 1;
        }
        if self.image.topic("t").is_some() {
            self.follow_image();
        }
    }

    /// Each live broker takes its role from the image: a new leader epoch
    /// starts at the log end (Kafka's makeLeader); a leader whose ISR or
    /// partition epoch changed refreshes its replica set.
    fn follow_image(&mut self) {
        let p = self.partition().clone();
        let now = self.now;
        for broker in &mut self.brokers {
            if !broker.alive || p.leader != broker.id {
                broker.leading = None;
                continue;
            }
            let previous = broker.leading.take().filter(|(epoch, _)| *epoch == p.leader_epoch);
            if previous.is_none() && broker.epochs.last().is_none_or(|&(e, _)| e < p.leader_epoch) {
                broker.epochs.push((p.leader_epoch, broker.log_end()));
            }
            let set = ReplicaSet::led(
                broker.id,
                &p.replicas,
                &p.isr,
                p.partition_epoch,
                now,
                previous.as_ref().map(|(_, s)| s),
            );
            broker.leading = Some((p.leader_epoch, set));
        }
    }

    /// A broker process starts: registers (a new broker epoch; after a
    /// `clean` shutdown with its last one) and, caught up, is unfenced by
    /// its first heartbeat.
    fn start(&mut self, id: i32, clean: bool) {
        self.broker(id).alive = true;
        let incarnation = Uuid([(self.rng.next() % 250) as u8 + 1; 16]);
        let previous_broker_epoch = if clean { self.broker(id).broker_epoch } else { -1 };
        self.unclean_restarts += u64::from(!clean);
        let request = BrokerRegistrationRequest {
            broker_id: id,
            cluster_id: CLUSTER.into(),
            incarnation_id: incarnation,
            previous_broker_epoch,
            ..Default::default()
        };
        let (records, epoch) = plan_register_broker(&self.image, &request, CLUSTER, &self.sessions, self.now)
            .unwrap_or_else(|e| panic!("seed {}: register {id}: {}", self.seed, e.message));
        self.sessions.touch(id, self.now);
        self.commit(records);
        self.broker(id).broker_epoch = epoch;
        self.heartbeat(id);
    }

    fn heartbeat(&mut self, id: i32) {
        let request = BrokerHeartbeatRequest {
            broker_id: id,
            broker_epoch: self.broker(id).broker_epoch,
            current_metadata_offset: self.image.offset,
            ..Default::default()
        };
        self.sessions.touch(id, self.now);
        if let Ok((records, _)) = plan_broker_heartbeat(&self.image, &request) {
            self.commit(records);
        }
    }

    fn leader(&mut self) -> Option<&mut Broker> {
        let leader = self.partition().leader;
        self.brokers.iter_mut().find(|b| b.id == leader && b.alive && b.leading.is_some())
    }

    /// acks=all: refused under min.insync.replicas, else appended and
    /// waiting for the high watermark.
    fn produce(&mut self) {
        let value = self.next_value;
        self.next_value += 1;
        let Some(leader) = self.leader() else { return };
        let (epoch, set) = leader.leading.as_ref().expect("leads");
        if set.maximal_isr().len() < MIN_ISR {
            return;
        }
        let (epoch, id) = (*epoch, leader.id);
        leader.append(epoch, value);
        let offset = leader.log_end() - 1;
        self.waiting.push((offset, value, id, epoch));
        self.advance_high_watermark();
    }

    fn advance_high_watermark(&mut self) {
        let Some(leader) = self.leader() else { return };
        let (epoch, set) = leader.leading.as_ref().expect("leads");
        let hw = set.high_watermark(leader.log_end(), leader.high_watermark, MIN_ISR);
        debug_assert!(hw >= leader.high_watermark);
        leader.high_watermark = hw;
        let (id, epoch) = (leader.id, *epoch);
        let (done, still): (Vec<_>, Vec<_>) =
            self.waiting.drain(..).partition(|&(offset, _, l, e)| l == id && e == epoch && offset < hw);
        self.waiting = still.into_iter().filter(|&(_, _, l, e)| l == id && e == epoch).collect();
        self.acked.extend(done.into_iter().map(|(offset, value, _, _)| Acked { offset, value }));
    }

    /// Follower `id` fetches from the leader the image names.
    fn fetch(&mut self, id: i32) {
        let now = self.now;
        let p = self.partition().clone();
        if p.leader == id || p.leader < 0 || !self.broker(id).alive {
            return;
        }
        let (fetch_offset, last_epoch, broker_epoch) = {
            let f = self.broker(id);
            (f.log_end(), f.last_epoch(), f.broker_epoch)
        };
        let Some(leader) = self.leader() else { return };
        if let Some((epoch, end)) = leader_divergence(leader.end_offset_for_epoch(last_epoch), last_epoch, fetch_offset)
        {
            let follower = self.broker(id);
            let local = follower.end_offset_for_epoch(epoch);
            let to = follower_truncation(end, local, follower.log_end());
            if to < follower.log_end() {
                self.truncations += 1;
            }
            self.broker(id).truncate_to(to);
            return;
        }
        let leader_end = leader.log_end();
        let Some((_, set)) = leader.leading.as_mut() else { return };
        set.record_fetch(id, broker_epoch, fetch_offset, leader_end, now);
        let records: Vec<(i32, u64)> = leader.log[fetch_offset as usize..].to_vec();
        self.advance_high_watermark();
        let leader_hw = self.leader().map_or(0, |l| l.high_watermark);
        let follower = self.broker(id);
        for (epoch, value) in records {
            follower.append(epoch, value);
        }
        follower.high_watermark = leader_hw.min(follower.log_end());
        self.maybe_expand(id);
    }

    fn maybe_expand(&mut self, id: i32) {
        let Some(leader) = self.leader() else { return };
        let (epoch, set) = leader.leading.as_ref().expect("leads");
        let epoch_start = leader.epochs.iter().find(|&&(e, _)| e == *epoch).map_or(0, |&(_, s)| s);
        if let Some(isr) = set.expanded_isr(id, leader.high_watermark, epoch_start) {
            self.alter_isr(isr);
        }
    }

    fn check_isr(&mut self) {
        let now = self.now;
        let Some(leader) = self.leader() else { return };
        let (_, set) = leader.leading.as_ref().expect("leads");
        if let Some(isr) = set.shrunk_isr(now, LAG_MS) {
            self.alter_isr(isr);
        }
    }

    /// The leader's AlterPartition, planned by the controller at once.
    fn alter_isr(&mut self, isr: Vec<i32>) {
        let Some(leader) = self.leader() else { return };
        let (epoch, set) = leader.leading.as_ref().expect("leads");
        let members = set.broker_epochs(&isr);
        let request = AlterPartitionRequest {
            broker_id: leader.id,
            broker_epoch: leader.broker_epoch,
            topics: vec![TopicData {
                topic_id: TOPIC_ID,
                partitions: vec![PartitionData {
                    partition_index: 0,
                    leader_epoch: *epoch,
                    partition_epoch: set.partition_epoch,
                    new_isr_with_epochs: members
                        .into_iter()
                        .map(|(broker_id, broker_epoch)| BrokerState { broker_id, broker_epoch, ..Default::default() })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        if let Ok((records, _)) = plan_alter_partition(&self.image, &request, 3) {
            self.commit(records);
            self.advance_high_watermark();
        }
    }

    fn crash(&mut self, id: i32) {
        let broker = self.broker(id);
        broker.alive = false;
        broker.leading = None;
        self.waiting.retain(|&(_, _, leader, _)| leader != id);
    }

    /// The clock moves: live brokers heartbeat, expired sessions are fenced.
    fn tick(&mut self) {
        self.now += STEP_MS;
        for id in BROKERS {
            if self.broker(id).alive {
                self.heartbeat(id);
            }
        }
        let (records, _) = self.sessions.plan_fence_expired(&self.image, self.now);
        self.commit(records);
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=29 => self.produce(),
            30..=79 => {
                let id = BROKERS[self.rng.below(3) as usize];
                self.fetch(id);
            }
            80..=89 => self.check_isr(),
            90..=93 => {
                let alive: Vec<i32> =
                    BROKERS.iter().copied().filter(|&id| self.brokers[(id - 1) as usize].alive).collect();
                if alive.len() > 1 {
                    let id = alive[self.rng.below(alive.len() as u64) as usize];
                    self.crash(id);
                }
            }
            94..=97 => {
                let fenced: Vec<i32> = BROKERS
                    .iter()
                    .copied()
                    .filter(|&id| !self.brokers[(id - 1) as usize].alive && self.image.brokers[&id].fenced)
                    .collect();
                if let Some(&id) = fenced.first() {
                    // The log survives either way (a flushed one); an
                    // unclean restart only costs the broker its ELR places.
                    let clean = !self.elr || self.rng.below(4) != 0;
                    self.start(id, clean);
                }
            }
            _ => {}
        }
        self.tick();
        self.check();
    }

    /// Kafka's promises, after every step.
    fn check(&mut self) {
        let seed = self.seed;
        let p = self.partition().clone();
        assert!(p.isr.iter().all(|r| p.replicas.contains(r)), "seed {seed}: ISR {:?} outside the replicas", p.isr);
        assert!(p.leader < 0 || p.isr.contains(&p.leader), "seed {seed}: leader {} out of ISR {:?}", p.leader, p.isr);
        let Some(leader) = self.brokers.iter().find(|b| b.id == p.leader && b.alive) else { return };
        for acked in &self.acked {
            let held = leader.log.get(acked.offset as usize).map(|&(_, v)| v);
            assert_eq!(
                held,
                Some(acked.value),
                "seed {seed}: acknowledged record at {} lost on leader {}",
                acked.offset,
                leader.id
            );
        }
        for follower in self.brokers.iter().filter(|b| b.alive && b.id != leader.id && p.isr.contains(&b.id)) {
            let agreed = (leader.high_watermark as usize).min(follower.log.len());
            assert_eq!(
                follower.log[..agreed],
                leader.log[..agreed],
                "seed {seed}: in-sync follower {} disagrees with leader {} below the high watermark",
                follower.id,
                leader.id
            );
        }
    }

    /// Every broker back, fetching until the logs are one; false when the
    /// partition is left without a leader (ELR after unclean restarts).
    fn converge(&mut self) -> bool {
        for id in BROKERS {
            if !self.broker(id).alive {
                while !self.image.brokers[&id].fenced {
                    self.tick();
                }
                self.start(id, true);
            }
        }
        for _ in 0..200 {
            for id in BROKERS {
                self.fetch(id);
            }
            self.tick();
            self.check();
        }
        let leader = self.partition().leader;
        if leader < 0 && self.elr && self.unclean_restarts > 0 {
            // Every eligible replica came back from an unclean shutdown:
            // as in Kafka, only an unclean election would give it a leader.
            return false;
        }
        assert!(leader >= 0, "seed {}: no leader with every broker back", self.seed);
        let logs: Vec<&Vec<(i32, u64)>> = self.brokers.iter().map(|b| &b.log).collect();
        let states: Vec<String> = self
            .brokers
            .iter()
            .map(|b| {
                format!(
                    "broker {} alive {} leading {:?} epochs {:?} log {:?} hw {}",
                    b.id,
                    b.alive,
                    b.leading.as_ref().map(|(e, s)| (e, s.isr.clone(), s.partition_epoch, s.pending.clone())),
                    b.epochs,
                    b.log,
                    b.high_watermark
                )
            })
            .collect();
        assert!(
            logs.iter().all(|l| *l == logs[0]),
            "seed {}: logs did not converge; partition {:?}\n{}",
            self.seed,
            self.partition(),
            states.join("\n")
        );
        assert_eq!(self.partition().isr.len(), 3, "seed {}: ISR not whole again", self.seed);
        true
    }
}

fn seeds() -> u64 {
    if let Some(n) = std::env::var("KRABKA_SIM_SEEDS").ok().and_then(|v| v.parse().ok()) {
        return n;
    }
    if std::env::var("KRABKA_LONG_TESTS").is_ok_and(|v| v == "1") {
        LONG_SEEDS
    } else {
        SEEDS
    }
}

#[test]
fn no_acknowledged_record_is_lost_through_crashes_fencing_and_elections() {
    for elr in [false, true] {
        run_seeds(elr);
    }
}

fn run_seeds(elr: bool) {
    let (mut acked, mut crashes, mut truncations, mut elections) = (0usize, 0u64, 0u64, 0i64);
    let (mut unclean, mut leaderless, mut from_elr) = (0u64, 0u64, 0u64);
    let first: u64 = std::env::var("KRABKA_SIM_FIRST_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    for seed in first..first + seeds() {
        let mut sim = Sim::new(seed, elr);
        for _ in 0..STEPS {
            sim.step();
        }
        crashes += sim.brokers.iter().filter(|b| !b.alive).count() as u64;
        leaderless += u64::from(!sim.converge());
        acked += sim.acked.len();
        truncations += sim.truncations;
        elections += i64::from(sim.partition().leader_epoch);
        unclean += sim.unclean_restarts;
        from_elr += sim.elr_elections;
    }
    eprintln!(
        "{} seeds (ELR {}): {acked} acknowledged records checked, {elections} leader elections, {truncations} \
         divergent tails truncated, {crashes} brokers down at the end of a run, {unclean} unclean restarts, \
         {from_elr} leaders elected from the ELR, {leaderless} runs left without a leader",
        seeds(),
        if elr { "on" } else { "off" }
    );
    // One seed may see no failover; a run of them must.
    let exercised = acked > 0 && elections > 0 && truncations > 0 && (!elr || (unclean > 0 && from_elr > 0));
    assert!(exercised || seeds() < 100, "the simulation did not exercise failover");
}
