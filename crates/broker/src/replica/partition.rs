//! One hosted partition: its log behind a lock, its leader epoch and high
//! watermark, and the requests parked on it; and what Produce needs of its
//! topic's configs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use krabka_log::{AppendInfo, LogError, LogManager, PartitionCheckpoint, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::{ErrorCode, Uuid};

use super::future_replica::{FutureReplica, MoveError, MoveStep, Swap};
use super::log_dirs::LogDirectories;
use super::purgatory::{Waiter, WatchList};
use crate::config::topic::{effective_topic_configs, topic_compression};
use krabka_log::topic_config::MIN_INSYNC_REPLICAS;
use krabka_replication::{PendingIsr, ReplicaSet};

pub struct Partition {
    pub topic: Arc<str>,
    pub topic_id: Uuid,
    pub index: i32,
    /// The log directory its log is in (another once a move swaps it).
    pub(super) log_dir: Mutex<PathBuf>,
    pub(super) log: Mutex<PartitionLog>,
    /// A move to another log directory under way (KIP-113). Locked after
    /// the log, never before it.
    pub(super) future: Mutex<Option<FutureReplica>>,
    pub(super) leader_epoch: AtomicI32,
    /// The leader the image names (-1: none), this broker or another.
    leader_id: AtomicI32,
    /// Whether the image names this broker the leader (every partition, on
    /// a single node); a replica whose broker is fenced is led by nobody.
    pub(super) led_here: AtomicBool,
    pub(super) high_watermark: AtomicI64,
    /// The topic's effective `min.insync.replicas`: under it (committed
    /// ISR) the leader's high watermark does not move (strict min ISR).
    min_insync_replicas: AtomicUsize,
    /// The replicas as the leader tracks them (meaningful while led here).
    /// Locked after the log, never before it.
    replica_set: Mutex<ReplicaSet>,
    pub(super) watchers: WatchList,
    /// Whether a reassignment's throttle (KIP-73) holds this replica back:
    /// as leader, sending it to followers outside the ISR; as follower,
    /// fetching it while outside the ISR (the topic's
    /// `leader.`/`follower.replication.throttled.replicas` name it).
    leader_throttled: AtomicBool,
    follower_throttled: AtomicBool,
    /// The broker's log directories, told when a write here fails.
    pub(super) log_dirs: Arc<LogDirectories>,
    /// Its log directory failed: it leads, follows and serves nothing until
    /// the broker restarts (Kafka's offline partition).
    offline: AtomicBool,
}

/// What the image makes this broker for one partition it hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// The leader, of `replicas` with `isr` at `partition_epoch`.
    Leader { leader_epoch: i32, replicas: Vec<i32>, isr: Vec<i32>, partition_epoch: i32 },
    /// A follower of `leader` (-1: nobody leads now).
    Follower { leader: i32, leader_epoch: i32 },
}

impl Role {
    fn leader_epoch(&self) -> i32 {
        match self {
            Role::Leader { leader_epoch, .. } | Role::Follower { leader_epoch, .. } => *leader_epoch,
        }
    }
}

impl Partition {
    /// A partition this node hosts as `role` says: a leader's high
    /// watermark starts where its replicas allow (the log end when it is
    /// the only one), a follower's at `high_watermark` (the checkpointed
    /// one).
    pub(super) fn hosted(
        topic: &str,
        topic_id: Uuid,
        index: i32,
        log: PartitionLog,
        local_id: i32,
        high_watermark: i64,
        log_dirs: Arc<LogDirectories>,
    ) -> Self {
        let log_dir = log.dir().parent().map(PathBuf::from).unwrap_or_default();
        debug_assert!(high_watermark <= log.log_end_offset());
        Partition {
            topic: Arc::from(topic),
            topic_id,
            index,
            log_dir: Mutex::new(log_dir),
            log: Mutex::new(log),
            future: Mutex::new(None),
            leader_epoch: AtomicI32::new(-1),
            leader_id: AtomicI32::new(-1),
            led_here: AtomicBool::new(false),
            high_watermark: AtomicI64::new(high_watermark),
            min_insync_replicas: AtomicUsize::new(1),
            replica_set: Mutex::new(ReplicaSet::alone(local_id)),
            watchers: WatchList::default(),
            leader_throttled: AtomicBool::new(false),
            follower_throttled: AtomicBool::new(false),
            log_dirs,
            offline: AtomicBool::new(false),
        }
    }

    pub(super) fn lock_future(&self) -> MutexGuard<'_, Option<FutureReplica>> {
        self.future.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The destination directory of a move under way.
    pub fn future_dir(&self) -> Option<PathBuf> {
        self.lock_future().as_ref().map(|f| f.dir.clone())
    }

    /// A move under way: (destination directory, the future replica's
    /// size, how far it is behind the current one), for DescribeLogDirs.
    pub fn future_state(&self) -> Option<(PathBuf, u64, i64)> {
        let log = self.lock_log();
        let future = self.lock_future();
        let future = future.as_ref()?;
        let lag = (log.log_end_offset() - future.log.log_end_offset()).max(0);
        Some((future.dir.clone(), future.log.size_bytes(), lag))
    }

    /// Starts a move with `future`; the move it replaces, if any, whose
    /// directory the caller removes.
    pub(super) fn start_future(&self, future: FutureReplica) -> Option<FutureReplica> {
        let _log = self.lock_log();
        self.lock_future().replace(future)
    }

    /// Gives the move up; the future replica, whose directory the caller removes.
    pub(super) fn take_future(&self) -> Option<FutureReplica> {
        let _log = self.lock_log();
        self.lock_future().take()
    }

    /// The directory the controller should record for this replica: the
    /// destination once the move asked for it, else `current`.
    pub(super) fn reported_dir_id(&self, current: Option<Uuid>) -> Option<Uuid> {
        match self.lock_future().as_ref() {
            Some(future) if future.assignment_asked_ms.is_some() => future.dir_id,
            _ => current,
        }
    }

    /// Copies up to `max_bytes` of batches to the future replica. A write
    /// failing in the destination directory stops the move and takes that
    /// directory offline; a read failing in the current one takes the
    /// partition's directory offline.
    pub(super) fn copy_to_future(&self, max_bytes: u32, now_ms: i64) -> MoveStep {
        let log = self.lock_log();
        let mut guard = self.lock_future();
        let Some(future) = guard.as_mut() else { return MoveStep::Idle };
        if self.is_offline() {
            return MoveStep::Stopped;
        }
        let records = match future.next_batches(&log, max_bytes, now_ms) {
            Ok(Some(records)) => records,
            Ok(None) => return MoveStep::CaughtUp,
            Err(MoveError::Current(error)) => {
                let _ = self.unless_disk_failed::<()>(Err(error));
                return MoveStep::Stopped;
            }
            Err(MoveError::Future(error)) => return self.future_failed(&mut guard, error),
        };
        // Appends to the current replica go on while this one is written.
        drop(log);
        match future.append(&records, now_ms) {
            Ok(()) => MoveStep::Copied(records.len()),
            Err(error) => self.future_failed(&mut guard, error),
        }
    }

    /// A write to the future replica failed: the move stops, and a disk
    /// error takes its directory offline.
    fn future_failed(&self, guard: &mut Option<FutureReplica>, error: LogError) -> MoveStep {
        let Some(future) = guard.take() else { return MoveStep::Idle };
        let dir = future.dir.display().to_string();
        tracing::error!(topic = %self.topic, partition = self.index, %dir, %error, "moving a replica failed");
        if let LogError::Io(io) = &error {
            self.log_dirs.failed(&future.dir, &format!("moving {}-{}", self.topic, self.index), io);
        }
        MoveStep::Stopped
    }

    /// Swaps the future replica in when it has caught up (Kafka's
    /// `maybeReplaceCurrentWithFutureReplica`), saying how that went. It is
    /// sealed ([`FutureReplica::seal`]) and closed, the directories
    /// renamed ([`LogManager::promote_future`]), and the log reopened from
    /// its new place, all under the log's lock: no append comes between.
    pub(super) fn promote_future(&self, log_manager: &LogManager, now_ms: i64) -> Swap {
        let mut log = self.lock_log();
        let mut guard = self.lock_future();
        let Some(future) = guard.as_mut().filter(|_| !self.is_offline()) else { return Swap::NotYet };
        match future.seal(&log, now_ms) {
            Ok(true) => {}
            Ok(false) => return Swap::NotYet,
            Err(error) => {
                self.future_failed(&mut guard, error);
                return Swap::GivenUp;
            }
        }
        let Some(future) = guard.take() else { return Swap::NotYet };
        let future_path = future.log.dir().to_path_buf();
        drop(future);
        let (config, log_start, end) = (log.config().clone(), log.log_start_offset(), log.log_end_offset());
        let tp = log.topic_partition().clone();
        let promoted = match log_manager.promote_future(&tp, log.dir(), &future_path) {
            Ok(promoted) => promoted,
            // The destination failed (the current copy is back in place):
            // the move is given up and the destination goes offline.
            Err((dir, error)) if dir != self.log_dir() => {
                self.log_dirs.failed(&dir, &format!("moving {}-{}", self.topic, self.index), &error);
                return Swap::GivenUp;
            }
            // The current directory failed: this replica stops, and the
            // next start finds the future copy whole.
            Err((_, error)) => {
                let _ = self.unless_disk_failed::<()>(Err(LogError::Io(error)));
                return Swap::Stopped;
            }
        };
        let dest = promoted.parent().map(Path::to_path_buf).unwrap_or_default();
        *self.log_dir.lock().unwrap_or_else(|e| e.into_inner()) = dest;
        let reopened = PartitionLog::open(&promoted, config, log_start, end, true, now_ms);
        let Ok((reopened, _)) = self.unless_disk_failed(reopened) else { return Swap::Stopped };
        *log = reopened;
        debug_assert_eq!(log.log_end_offset(), end, "the swap keeps every record");
        drop(guard);
        drop(log);
        tracing::info!(topic = %self.topic, partition = self.index, dir = %promoted.display(), "replica moved to another log directory");
        self.watchers.wake_all();
        Swap::Done
    }

    /// The topic's throttled-replica lists name this replica (leader side,
    /// follower side).
    pub(super) fn set_throttled(&self, leader: bool, follower: bool) {
        self.leader_throttled.store(leader, Ordering::Relaxed);
        self.follower_throttled.store(follower, Ordering::Relaxed);
    }

    /// Whether the leader throttles what it sends followers of this partition.
    pub fn leader_throttled(&self) -> bool {
        self.leader_throttled.load(Ordering::Relaxed)
    }

    /// Whether this follower throttles what it fetches of this partition.
    pub fn follower_throttled(&self) -> bool {
        self.follower_throttled.load(Ordering::Relaxed)
    }

    /// The log directory its log is in.
    pub fn log_dir(&self) -> PathBuf {
        self.log_dir.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn lock_log(&self) -> MutexGuard<'_, PartitionLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_replicas(&self) -> MutexGuard<'_, ReplicaSet> {
        self.replica_set.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    pub fn is_led_here(&self) -> bool {
        self.led_here.load(Ordering::Acquire)
    }

    /// The leader the image names (-1: none).
    pub fn leader_id(&self) -> i32 {
        self.leader_id.load(Ordering::Acquire)
    }

    /// Follows the image: leading a new epoch starts it at the log end
    /// (Kafka's makeLeader), so OffsetForLeaderEpoch knows it before any
    /// append; a follower keeps its log (a diverging fetch truncates it).
    /// The requests parked here are woken to find out. Done under the
    /// log's lock, which every append holds: an append sees the role
    /// before or after the change, never half of it.
    pub(super) fn set_role(&self, role: Role, now_ms: i64) -> Result<(), LogError> {
        let mut log = self.lock_log();
        if self.is_offline() {
            return Ok(());
        }
        let leader_epoch = role.leader_epoch();
        let led_here = matches!(role, Role::Leader { .. });
        let new_epoch = leader_epoch != self.leader_epoch();
        if led_here && (new_epoch || !self.is_led_here()) {
            match self.unless_disk_failed(log.assign_leader_epoch(leader_epoch)) {
                // Its directory failed: it went offline rather than lead.
                Err(_) if self.is_offline() => return Ok(()),
                result => result?,
            }
        }
        let mut replica_set = self.lock_replicas();
        match &role {
            Role::Leader { replicas, isr, partition_epoch, .. } => {
                // Followers' progress is this leader epoch's: a new one starts afresh.
                let previous = (!new_epoch && self.is_led_here()).then_some(&*replica_set);
                // The controller's answer to an ISR change may come before
                // the image that carries it: an older image changes nothing.
                let stale = previous.is_some_and(|p| p.partition_epoch > *partition_epoch);
                if !stale {
                    let local_id = replica_set.local_id;
                    *replica_set = ReplicaSet::led(local_id, replicas, isr, *partition_epoch, now_ms, previous);
                }
                self.leader_id.store(replica_set.local_id, Ordering::Release);
            }
            Role::Follower { leader, .. } => self.leader_id.store(*leader, Ordering::Release),
        }
        self.leader_epoch.store(leader_epoch, Ordering::Release);
        let changed = self.led_here.swap(led_here, Ordering::AcqRel) != led_here;
        // An ISR the controller shrank (a fenced follower out, the same
        // leader epoch) may commit what acks=all produces wait for: they
        // are woken now, as Kafka's leader completes its delayed requests
        // when its high watermark moves, not at their timeout.
        let mut moved = false;
        if led_here {
            moved = self.advance_high_watermark(&log, &replica_set);
        } else {
            // A follower's high watermark is the leader's, never past its own end.
            let end = log.log_end_offset();
            self.high_watermark.fetch_min(end, Ordering::AcqRel);
        }
        drop(replica_set);
        drop(log);
        if changed || new_epoch || moved {
            self.watchers.wake_all();
        }
        Ok(())
    }

    /// This broker stops hosting the partition (deleted, or moved to other
    /// brokers): it leads and follows nothing, and the requests parked on
    /// it are woken to find it gone.
    /// Whether its log directory failed (it serves nothing).
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// Its log directory failed: it stops leading and following, for good.
    pub(super) fn go_offline(&self) {
        let log = self.lock_log();
        self.stop_serving_offline();
        drop(log);
        self.watchers.wake_all();
    }

    pub(super) fn stop_hosting(&self) {
        let log = self.lock_log();
        self.stop_serving();
        drop(log);
        self.watchers.wake_all();
    }

    /// Neither leader nor follower here any more. The caller holds the
    /// log's lock, which every role change takes.
    fn stop_serving(&self) {
        self.led_here.store(false, Ordering::Release);
        self.leader_id.store(-1, Ordering::Release);
    }

    /// Stops serving for good: the replica's directory failed. The caller
    /// holds the log's lock.
    fn stop_serving_offline(&self) {
        self.offline.store(true, Ordering::Release);
        self.stop_serving();
    }

    /// The topic's `min.insync.replicas` changed (or is first known): a
    /// lower one may let the high watermark move, waking what waits on it.
    pub(super) fn set_min_insync_replicas(&self, min_insync_replicas: i32) {
        let log = self.lock_log();
        let replica_set = self.lock_replicas();
        let value = usize::try_from(min_insync_replicas).unwrap_or(1).max(1);
        let moved = self.min_insync_replicas.swap(value, Ordering::AcqRel) != value
            && self.is_led_here()
            && self.advance_high_watermark(&log, &replica_set);
        drop(replica_set);
        drop(log);
        if moved {
            self.watchers.wake_all();
        }
    }

    /// Moves the high watermark to what the in-sync replicas allow; true if
    /// it moved. Caller holds the log and replica locks.
    fn advance_high_watermark(&self, log: &PartitionLog, replica_set: &ReplicaSet) -> bool {
        let current = self.high_watermark();
        let min_isr = self.min_insync_replicas.load(Ordering::Acquire);
        let next = replica_set.high_watermark(log.log_end_offset(), current, min_isr);
        debug_assert!(next <= log.log_end_offset(), "high watermark {next} past the log end");
        self.high_watermark.store(next, Ordering::Release);
        next != current
    }

    /// The in-sync replicas as the leader counts them once a record is
    /// appended (Kafka's maximal ISR: with the members a pending change adds).
    pub fn in_sync_replicas(&self) -> Vec<i32> {
        self.lock_replicas().maximal_isr()
    }

    /// The sizes of the committed ISR and of the replicas, as Kafka's
    /// under-replicated and min-ISR gauges count them.
    pub fn isr_and_replica_counts(&self) -> (usize, usize) {
        let replica_set = self.lock_replicas();
        (replica_set.isr.len(), replica_set.replicas.len())
    }

    /// The followers a consumer may be sent to read from `fetch_offset`
    /// (KIP-392): they have it and were caught up within `lag_ms`; each
    /// with its log end offset.
    pub fn caught_up_followers(&self, fetch_offset: i64, now_ms: i64, lag_ms: i64) -> Vec<(i32, i64)> {
        let replica_set = self.lock_replicas();
        let followers = replica_set.followers.iter();
        let caught_up =
            followers.filter(|(_, f)| f.log_end_offset > fetch_offset && now_ms - f.last_caught_up_ms <= lag_ms);
        caught_up.map(|(&id, f)| (id, f.log_end_offset)).collect()
    }

    /// The ISR as the controller committed it, which min.insync.replicas
    /// is checked against before an acks=all append.
    pub fn committed_isr(&self) -> Vec<i32> {
        self.lock_replicas().isr.clone()
    }

    /// A follower's fetch from `fetch_offset` (the leader's side; the
    /// caller holds `log`, this partition's): its progress is recorded,
    /// the high watermark moves if it can (waking what waits on it), and
    /// an ISR that should take the follower back in is returned, to be
    /// proposed to the controller. A broker that is not a replica changes
    /// nothing.
    pub fn record_follower_fetch(
        &self,
        log: &PartitionLog,
        follower: i32,
        broker_epoch: i64,
        fetch_offset: i64,
        now_ms: i64,
    ) -> Option<Vec<i32>> {
        let mut replica_set = self.lock_replicas();
        if !replica_set.record_fetch(follower, broker_epoch, fetch_offset, log.log_end_offset(), now_ms) {
            return None;
        }
        if self.advance_high_watermark(log, &replica_set) {
            self.watchers.wake_all();
        }
        let epoch_start = log.leader_epochs().entries().last().map_or(0, |e| e.start_offset);
        replica_set.expanded_isr(follower, self.high_watermark(), epoch_start)
    }

    /// The ISR without the followers that lag (see
    /// [`ReplicaSet::shrunk_isr`]), to propose to the controller.
    pub fn isr_to_shrink(&self, now_ms: i64, lag_ms: i64) -> Option<Vec<i32>> {
        if !self.is_led_here() {
            return None;
        }
        let replica_set = self.lock_replicas();
        // What the leader knows of its followers, for a diagnosis when
        // acks=all waits (`KRABKA_LOG=krabka_broker::replica=debug`).
        tracing::debug!(
            topic = %self.topic, partition = self.index, high_watermark = self.high_watermark(),
            replicas = ?*replica_set, "leader's view of its replicas"
        );
        replica_set.shrunk_isr(now_ms, lag_ms)
    }

    /// Marks `isr` sent to the controller; the request it goes in: this
    /// leader's epoch, the partition epoch it was made against and each
    /// member's broker epoch. None if a change is pending already or this
    /// broker no longer leads.
    pub fn propose_isr(&self, isr: Vec<i32>, now_ms: i64) -> Option<IsrProposal> {
        let mut replica_set = self.lock_replicas();
        if !self.is_led_here() || replica_set.pending.is_some() || replica_set.isr == isr {
            return None;
        }
        let proposal = IsrProposal {
            leader_epoch: self.leader_epoch(),
            partition_epoch: replica_set.partition_epoch,
            members: replica_set.broker_epochs(&isr),
        };
        replica_set.pending = Some(PendingIsr { isr, sent_ms: now_ms });
        Some(proposal)
    }

    /// The controller's answer to a proposed ISR: the committed ISR and
    /// partition epoch when it took it (for this leader epoch), or only
    /// the end of the pending change (the image will say what is true).
    pub fn isr_answered(&self, committed: Option<(Vec<i32>, i32)>, leader_epoch: i32, now_ms: i64) {
        let log = self.lock_log();
        let mut replica_set = self.lock_replicas();
        let current = self.is_led_here() && leader_epoch == self.leader_epoch();
        match committed {
            Some((isr, partition_epoch)) if current && partition_epoch > replica_set.partition_epoch => {
                let replicas = replica_set.replicas.clone();
                let local_id = replica_set.local_id;
                let mut next = ReplicaSet::led(local_id, &replicas, &isr, partition_epoch, now_ms, Some(&replica_set));
                next.pending = None;
                *replica_set = next;
            }
            _ => replica_set.pending = None,
        }
        if self.is_led_here() && self.advance_high_watermark(&log, &replica_set) {
            self.watchers.wake_all();
        }
    }

    /// A follower's high watermark, as its leader's fetch response said,
    /// never past its own log end. Caller holds `log`.
    pub fn follow_high_watermark(&self, log: &PartitionLog, leader_high_watermark: i64) {
        debug_assert!(!self.is_led_here());
        let next = leader_high_watermark.min(log.log_end_offset());
        if self.high_watermark.swap(next, Ordering::AcqRel) != next {
            self.watchers.wake_all();
        }
    }

    /// A client's `current_leader_epoch` against ours (-1 skips the check):
    /// newer is UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH, as Kafka.
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), i16> {
        let epoch = self.leader_epoch();
        match current_leader_epoch {
            requested if requested < 0 || requested == epoch => Ok(()),
            requested if requested > epoch => Err(ErrorCode::UNKNOWN_LEADER_EPOCH.code()),
            _ => Err(ErrorCode::FENCED_LEADER_EPOCH.code()),
        }
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Appends records as leader, moves the high watermark and wakes the
    /// requests parked on this partition.
    pub fn append(&self, records: &Bytes, now_ms: i64) -> Result<(AppendInfo, i64), AppendError> {
        let appended = self.append_unwoken(records, now_ms)?;
        self.wake_waiters();
        Ok(appended)
    }

    /// [`Partition::append`] without the wake-up: a Produce request appends
    /// all its partitions first and then wakes them, as Kafka completes
    /// delayed fetches after the whole request, so a fetch parked on several
    /// of them answers once with all their records.
    pub fn append_unwoken(&self, records: &Bytes, now_ms: i64) -> Result<(AppendInfo, i64), AppendError> {
        let mut log = self.lock_log();
        // Checked under the lock: leadership moves only under it too, so
        // a partition that stopped being led here between the request's
        // check and this append takes nothing (Kafka's appendRecordsToLeader
        // checks under its leader-ISR lock).
        if !self.is_led_here() {
            return Err(AppendError::NotLeader);
        }
        let appended = log.append_as_leader(records, self.leader_epoch(), now_ms);
        let info = self.unless_disk_failed(appended)?;
        let end = log.log_end_offset();
        debug_assert!(info.last_offset < end, "appended up to {} but the log ends at {end}", info.last_offset);
        // Alone in the ISR, what was appended is replicated at once.
        self.advance_high_watermark(&log, &self.lock_replicas());
        Ok((info, log.log_start_offset()))
    }

    /// `result`; when a write failed on the disk, this replica stops at
    /// once (the caller holds its log's lock, which every role change
    /// takes) and its directory goes offline (`log_dirs`).
    pub(super) fn unless_disk_failed<T>(&self, result: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(LogError::Io(_)) = &result {
            self.stop_serving_offline();
        }
        self.log_dirs.check(result, &self.log_dir(), &self.topic, self.index)
    }

    /// What a follower fetches from: its log end offset and the epoch of
    /// its last batch (-1: none), for the leader's divergence check.
    pub fn fetch_position(&self) -> (i64, i32) {
        let log = self.lock_log();
        (log.log_end_offset(), log.leader_epochs().latest_epoch().unwrap_or(-1))
    }

    /// Batches fetched from the leader from `fetch_offset`, written as they
    /// came (a follower's append), then the leader's high watermark and log
    /// start followed. A response to a fetch from another offset (the log
    /// was truncated since) is dropped: false.
    pub fn append_from_leader(&self, fetched: &FetchedFromLeader, now_ms: i64) -> Result<bool, AppendError> {
        let mut log = self.lock_log();
        if self.is_led_here() {
            return Err(AppendError::NotLeader);
        }
        if log.log_end_offset() != fetched.fetch_offset {
            return Ok(false);
        }
        if !fetched.records.is_empty() {
            self.unless_disk_failed(log.append_as_follower(&fetched.records, now_ms))?;
        }
        // Kafka's follower moves its log start up to its leader's.
        let start = fetched.leader_log_start.min(log.log_end_offset());
        if start > log.log_start_offset() {
            self.unless_disk_failed(log.delete_records_before(start, now_ms))?;
        }
        self.follow_high_watermark(&log, fetched.leader_high_watermark);
        drop(log);
        if !fetched.records.is_empty() {
            self.watchers.wake_all();
        }
        Ok(true)
    }

    /// Truncates a follower's log to `offset` (it diverged from its
    /// leader); the high watermark never stays above the end.
    /// Only while the log still ends at `fetched_at`, where the fetch
    /// that answered so was made: an answer another fetch has overtaken
    /// (the partition went to another fetcher meanwhile) is stale.
    pub fn truncate_to(&self, offset: i64, fetched_at: i64, now_ms: i64) -> Result<(), LogError> {
        let mut log = self.lock_log();
        if self.is_led_here() || log.log_end_offset() != fetched_at {
            // Led here since the fetch was sent (this log is the truth
            // now), or written since.
            return Ok(());
        }
        self.unless_disk_failed(log.truncate_to(offset, now_ms))?;
        self.high_watermark.fetch_min(log.log_end_offset(), Ordering::AcqRel);
        Ok(())
    }

    /// Empties a follower's log to start at `offset` (its leader's log
    /// start is past its end), unless it no longer ends at `fetched_at`
    /// (as [`Self::truncate_to`]).
    pub fn truncate_fully_and_start_at(&self, offset: i64, fetched_at: i64, now_ms: i64) -> Result<(), LogError> {
        let mut log = self.lock_log();
        if self.is_led_here() || log.log_end_offset() != fetched_at {
            return Ok(());
        }
        self.unless_disk_failed(log.truncate_fully_and_start_at(offset, now_ms))?;
        self.high_watermark.store(offset, Ordering::Release);
        Ok(())
    }

    /// The local end of `epoch` (the largest epoch at most it, and where
    /// it ends) and the log end, for a follower resolving a divergence.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (Option<(i32, i64)>, i64) {
        let log = self.lock_log();
        (log.end_offset_for_epoch(epoch), log.log_end_offset())
    }

    /// Wakes the requests parked on this partition (they read it again).
    pub fn wake_waiters(&self) {
        self.watchers.wake_all();
    }

    /// DeleteRecords: moves the log start to `offset` (returns the new low
    /// watermark) and wakes the fetches parked below it, now out of range.
    pub fn delete_records_before(&self, offset: i64, now_ms: i64) -> Result<i64, LogError> {
        let low_watermark = self.unless_disk_failed(self.lock_log().delete_records_before(offset, now_ms))?;
        self.watchers.wake_all();
        Ok(low_watermark)
    }

    /// Parks `waiter` on this partition until `waiter` is dropped.
    pub fn watch(&self, waiter: &Arc<Waiter>) {
        self.watchers.watch(waiter);
    }

    /// The future replica's offsets for its directory's checkpoints, if a
    /// move is under way (Kafka checkpoints future logs beside current
    /// ones): a move resumed after a clean shutdown need not re-read it.
    pub(super) fn future_checkpoint(&self) -> Option<PartitionCheckpoint> {
        let future = self.lock_future();
        let future = future.as_ref()?;
        Some(PartitionCheckpoint {
            topic_partition: future.log.topic_partition().clone(),
            log_dir: future.dir.clone(),
            recovery_point: future.log.recovery_point(),
            log_start_offset: future.log.log_start_offset(),
            // Never past the copy's end: what it holds is below this.
            high_watermark: self.high_watermark().min(future.log.log_end_offset()),
            cleaner_offset: 0,
        })
    }

    /// Flushes the future replica, if any, for a clean shutdown; on
    /// failure, its directory and why.
    pub(super) fn prepare_future_for_shutdown(&self, now_ms: i64) -> Result<(), (PathBuf, LogError)> {
        let mut future = self.lock_future();
        let Some(future) = future.as_mut() else { return Ok(()) };
        future.log.prepare_clean_shutdown(now_ms).map_err(|error| (future.dir.clone(), error))
    }

    pub(super) fn checkpoint(&self) -> PartitionCheckpoint {
        let log = self.lock_log();
        PartitionCheckpoint {
            topic_partition: log.topic_partition().clone(),
            log_dir: self.log_dir(),
            recovery_point: log.recovery_point(),
            log_start_offset: log.log_start_offset(),
            high_watermark: self.high_watermark(),
            cleaner_offset: log.cleaner_checkpoint(),
        }
    }
}

/// One partition's part of a fetch response from the leader.
pub struct FetchedFromLeader {
    pub fetch_offset: i64,
    pub records: Bytes,
    pub leader_high_watermark: i64,
    pub leader_log_start: i64,
}

/// An ISR change to send the controller (AlterPartition), as the
/// partition's leader made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrProposal {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Each member of the new ISR with the broker epoch it fetched with.
    pub members: Vec<(i32, i64)>,
}

/// Why an append as leader failed.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The partition is no longer led here (NOT_LEADER_OR_FOLLOWER).
    #[error("this broker no longer leads the partition")]
    NotLeader,
    #[error(transparent)]
    Log(#[from] LogError),
}

impl AppendError {
    /// The Kafka error code it answers with.
    pub fn code(&self) -> i16 {
        match self {
            AppendError::NotLeader => ErrorCode::NOT_LEADER_OR_FOLLOWER.code(),
            AppendError::Log(e) => crate::errors::log_error_code(e),
        }
    }
}

/// The partitions of one topic, indexed by partition id: every partition
/// the image has, None where another broker holds it.
pub struct HostedTopic {
    pub id: Uuid,
    pub partitions: Vec<Option<Arc<Partition>>>,
    pub produce: ProducePolicy,
    /// Replicas this broker hosts that it left closed: their log is in an
    /// offline directory, or may be (Kafka's offline `HostedPartition`
    /// with no log). Each is tried again when the topic next changes.
    pub unopened: BTreeSet<i32>,
}

impl HostedTopic {
    /// Partition `index` if this broker hosts it and leads it.
    pub fn led_partition(&self, index: i32) -> Option<&Arc<Partition>> {
        let hosted = usize::try_from(index).ok().and_then(|i| self.partitions.get(i))?.as_ref()?;
        hosted.is_led_here().then_some(hosted)
    }

    /// The partitions hosted here and online (not in a failed directory).
    pub fn hosted(&self) -> impl Iterator<Item = &Arc<Partition>> {
        self.partitions.iter().flatten().filter(|p| !p.is_offline())
    }

    /// The error for a request only a leader serves of partition `index`,
    /// not led here: KAFKA_STORAGE_ERROR when its replica here is in a
    /// failed directory or left closed for one (Kafka's offline partition), NOT_LEADER_OR_FOLLOWER
    /// when the topic has it (another broker leads it, or nobody does
    /// now), else UNKNOWN_TOPIC_OR_PARTITION.
    pub fn not_led_error(&self, index: i32) -> i16 {
        let slot = usize::try_from(index).ok().and_then(|i| self.partitions.get(i));
        match slot {
            Some(Some(partition)) if partition.is_offline() => ErrorCode::KAFKA_STORAGE_ERROR.code(),
            Some(None) if self.unopened.contains(&index) => ErrorCode::KAFKA_STORAGE_ERROR.code(),
            Some(_) => ErrorCode::NOT_LEADER_OR_FOLLOWER.code(),
            None => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
        }
    }
}

/// What Produce needs of a topic's configs, worked out when they change
/// rather than on every request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducePolicy {
    /// `min.insync.replicas`: the topic's override, else the dynamic broker
    /// configs' (the cluster-wide value a new cluster records, ELR being
    /// on, which the controller's elections read), else the broker key or
    /// the default.
    pub min_insync_replicas: i32,
    /// The codec `compression.type` forces, None for `producer`.
    pub forced_codec: Option<Compression>,
}

impl ProducePolicy {
    /// `defaults` are the broker-level topic defaults in effect
    /// (`BrokerConfig::topic_defaults_under`): the dynamic configs the
    /// controller reads too (the cluster's `min.insync.replicas`, which a
    /// new cluster records with ELR on) over server.properties.
    pub(super) fn of(
        defaults: &std::collections::BTreeMap<String, String>,
        overrides: &std::collections::BTreeMap<String, String>,
    ) -> Self {
        let effective = effective_topic_configs(defaults, overrides);
        let min_insync_replicas = effective.get(MIN_INSYNC_REPLICAS).and_then(|v| v.trim().parse().ok()).unwrap_or(1);
        ProducePolicy { min_insync_replicas, forced_codec: topic_compression(defaults, overrides).forced_codec() }
    }
}
