//! `ReplicaManager`: the partitions this broker hosts, kept in step with the
//! metadata (opened, reconfigured, led or not, and deleted as commits say),
//! with the housekeeping, checkpoints and shutdown of their logs. In a
//! shared quorum a broker hosts the partitions whose replicas name it, and
//! leads those the image says it leads; a node that is its quorum's only
//! voter hosts and leads them all.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use krabka_log::checkpoint::TopicPartition;
use krabka_log::{LogError, LogManager, PartitionCheckpoint};
use krabka_protocol::{ErrorCode, Uuid};

use tokio::sync::Notify;

use super::dir_assignments::DirAssignmentQueue;
use super::future_replica::LogDirMoves;
use super::isr_changes::IsrChangeQueue;
use super::log_dirs::LogDirectories;
use super::partition::{HostedTopic, Partition, ProducePolicy, Role};
use super::throttles::{mark_throttled, ReplicationThrottles};
use crate::clock::now_ms;
use crate::config::topic::log_config;
use crate::config::{BrokerConfig, DynamicConfigs};
use crate::metadata::{MetadataImage, MetadataUpdate, PartitionImage, TopicImage};
use crate::observability::ReplicaCounts;

/// Threads that flush and seal logs at shutdown.
const SHUTDOWN_FLUSH_THREADS: usize = 8;

/// Which of the image's partitions this broker hosts and leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hosting {
    /// All, led here: the node is its quorum's only voter and the one
    /// broker, whatever node ids a log it imported names.
    Everything,
    /// Those whose replicas name this broker (its id), led here when the
    /// image names it their leader.
    ReplicasOf(i32),
}

impl Hosting {
    fn hosts(self, partition: &PartitionImage) -> bool {
        match self {
            Hosting::Everything => true,
            Hosting::ReplicasOf(id) => partition.replicas.contains(&id),
        }
    }

    /// What this broker is for `partition` (one it hosts), `local_id` being
    /// its id.
    fn role(self, partition: &PartitionImage, local_id: i32) -> Role {
        match self {
            // Whatever node ids an imported log names, this node is the
            // partition's only replica.
            Hosting::Everything => Role::Leader {
                leader_epoch: partition.leader_epoch,
                replicas: vec![local_id],
                isr: vec![local_id],
                partition_epoch: partition.partition_epoch,
            },
            Hosting::ReplicasOf(id) if partition.leader == id => Role::Leader {
                leader_epoch: partition.leader_epoch,
                replicas: partition.replicas.clone(),
                isr: partition.isr.clone(),
                partition_epoch: partition.partition_epoch,
            },
            Hosting::ReplicasOf(_) => Role::Follower { leader: partition.leader, leader_epoch: partition.leader_epoch },
        }
    }
}

pub struct ReplicaManager {
    pub(super) config: Arc<BrokerConfig>,
    pub(super) log_manager: Arc<LogManager>,
    pub(super) hosting: Hosting,
    pub(super) topics: RwLock<HashMap<String, Arc<HostedTopic>>>,
    /// Signalled when partitions may have changed roles: the replica
    /// fetchers look again at what they follow.
    roles_changed: Notify,
    /// ISR changes the leaders here want, for the AlterPartition sender.
    pub isr_changes: IsrChangeQueue,
    /// A reassignment's replication throttles (KIP-73).
    pub throttles: ReplicationThrottles,
    /// The log directories: their ids, and which failed.
    pub log_dirs: Arc<LogDirectories>,
    /// Replicas whose directory the controller has yet to record.
    pub dir_assignments: DirAssignmentQueue,
    /// Moves between log directories (KIP-113).
    pub log_dir_moves: LogDirMoves,
}

impl ReplicaManager {
    pub fn new(
        config: Arc<BrokerConfig>,
        log_manager: Arc<LogManager>,
        hosting: Hosting,
        log_dirs: Arc<LogDirectories>,
    ) -> Self {
        let throttles = ReplicationThrottles::new(&config);
        ReplicaManager {
            config,
            log_manager,
            hosting,
            log_dirs,
            dir_assignments: DirAssignmentQueue::default(),
            log_dir_moves: LogDirMoves::default(),
            topics: RwLock::new(HashMap::new()),
            roles_changed: Notify::new(),
            isr_changes: IsrChangeQueue::default(),
            throttles,
        }
    }

    /// Resolves when partition roles may have changed since the last call.
    pub async fn roles_changed(&self) {
        self.roles_changed.notified().await
    }

    /// Every hosted partition another broker leads, with its leader.
    pub fn followed_partitions(&self) -> Vec<(i32, Arc<Partition>)> {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        let hosted = topics.values().flat_map(|t| t.hosted());
        hosted.filter(|p| !p.is_led_here() && p.leader_id() >= 0).map(|p| (p.leader_id(), p.clone())).collect()
    }

    /// The partitions hosted and led here, how many of those led lack
    /// in-sync replicas, and what failed log directories took offline
    /// (Kafka's ReplicaManager and LogManager gauges).
    pub fn replica_counts(&self) -> ReplicaCounts {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        let mut counts =
            ReplicaCounts { offline_log_dirs: self.log_dirs.offline_count() as i64, ..ReplicaCounts::default() };
        for topic in topics.values() {
            let offline = topic.partitions.iter().flatten().filter(|p| p.is_offline()).count() + topic.unopened.len();
            counts.offline_replicas += offline as i64;
            let min_isr = topic.produce.min_insync_replicas as usize;
            for partition in topic.hosted() {
                counts.partitions += 1;
                if !partition.is_led_here() {
                    continue;
                }
                counts.leaders += 1;
                let (isr, replicas) = partition.isr_and_replica_counts();
                counts.under_replicated += i64::from(isr < replicas);
                counts.under_min_isr += i64::from(isr < min_isr);
                counts.at_min_isr += i64::from(isr == min_isr);
            }
        }
        counts
    }

    /// Every partition led here.
    pub fn led_partitions(&self) -> Vec<Arc<Partition>> {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        topics.values().flat_map(|t| t.hosted()).filter(|p| p.is_led_here()).cloned().collect()
    }

    pub fn hosting(&self) -> Hosting {
        self.hosting
    }

    pub fn log_manager(&self) -> &LogManager {
        &self.log_manager
    }

    pub fn topic(&self, name: &str) -> Option<Arc<HostedTopic>> {
        self.topics.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    /// Partition `index` of `topic` if this broker hosts and leads it.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.topic(topic)?.led_partition(index).cloned()
    }

    /// Partition `index` of `topic` if this broker hosts it, led here or not.
    /// Not one in a failed directory.
    pub fn hosted_partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let topic = self.topic(topic)?;
        let hosted = usize::try_from(index).ok().and_then(|i| topic.partitions.get(i)).cloned().flatten()?;
        (!hosted.is_offline()).then_some(hosted)
    }

    /// The error for a request only a leader serves of a partition not led
    /// here ([`HostedTopic::not_led_error`]; UNKNOWN_TOPIC_OR_PARTITION for
    /// a topic not hosted here).
    pub fn not_led_here(&self, topic: &str, index: i32) -> i16 {
        self.topic(topic).map_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(), |hosted| hosted.not_led_error(index))
    }

    /// The partition a leader-only request names, checked against the
    /// client's `current_leader_epoch`: [`not_led_here`](Self::not_led_here)'s
    /// error, the epoch error of [`Partition::check_leader_epoch`], or, on a
    /// follower, NOT_LEADER_OR_FOLLOWER (Kafka checks in that order).
    pub fn leader_partition(&self, topic: &str, index: i32, current_leader_epoch: i32) -> Result<Arc<Partition>, i16> {
        let partition = self.partition(topic, index).ok_or_else(|| self.not_led_here(topic, index))?;
        partition.check_leader_epoch(current_leader_epoch)?;
        if !partition.is_led_here() {
            return Err(ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
        }
        Ok(partition)
    }

    /// Every partition hosted here, led or not.
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        topics.values().flat_map(|t| t.hosted().cloned()).collect()
    }

    /// Makes the hosted partitions match `image`: opens logs of new topics
    /// and partitions, applies changed configs, deletes removed topics.
    pub fn sync_with_image(&self, image: &MetadataImage) -> Result<(), LogError> {
        self.reconcile(image, image.topics.keys().map(String::as_str).collect(), &BTreeMap::new())
    }

    /// Opens (or brings in line) the one topic `name` of `image`, for a
    /// topic the image has but whose log failed to open before.
    pub fn sync_topic(&self, image: &MetadataImage, name: &str) -> Result<(), LogError> {
        self.reconcile(image, BTreeSet::from([name]), &BTreeMap::new())
    }

    /// Tries again to open the replicas left closed: those `unopened`
    /// (their directory held another topic's log, or a log directory was
    /// offline) and those of topics `image` places here that are not
    /// hosted at all (their opening failed); the other topics are in line.
    pub fn sync_unopened(&self, image: &MetadataImage) -> Result<(), LogError> {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        let missing = |name: &String| {
            let placed_here =
                image.topics.get(name).is_some_and(|t| t.partitions.iter().any(|p| self.hosting.hosts(p)));
            placed_here && !topics.contains_key(name)
        };
        let unopened = topics.iter().filter(|(_, hosted)| !hosted.unopened.is_empty()).map(|(name, _)| name.clone());
        let closed: Vec<String> = unopened.chain(image.topics.keys().filter(|n| missing(n)).cloned()).collect();
        drop(topics);
        if closed.is_empty() {
            return Ok(());
        }
        self.reconcile(image, closed.iter().map(String::as_str).collect(), &BTreeMap::new())
    }

    /// Follows one committed metadata update (the replica manager is a
    /// subscriber of the metadata publisher, as Kafka's is): deletes the
    /// topics it removed and refreshes only the topics its delta names
    /// (created, grown, configs changed), not every topic of the image.
    pub fn apply_update(&self, update: &MetadataUpdate) -> Result<(), LogError> {
        let (image, delta) = (&update.image, &update.delta);
        if !delta.changed_broker_configs.is_empty() {
            // A broker default may be every topic's effective config.
            return self.sync_with_image(image);
        }
        let grown = delta.new_partitions.keys().chain(delta.changed_partitions.keys());
        let touched: BTreeSet<&str> = delta
            .created_topics
            .values()
            .map(String::as_str)
            .chain(grown.filter_map(|id| image.topic_by_id(id)).map(|t| t.name.as_str()))
            .chain(delta.changed_topic_configs.iter().map(String::as_str))
            .collect();
        // Only a node that is its quorum's only voter applies live commits
        // alone (its log was replayed before the first image); a broker
        // catching up replays old creations as new ones, and places new
        // replicas by the directories the controller records anyway.
        let no_creations = BTreeMap::new();
        let created = if self.hosting == Hosting::Everything { &delta.new_partitions } else { &no_creations };
        self.reconcile(image, touched, created)
    }

    /// Deletes hosted topics `image` no longer has (or has under another
    /// id), then brings the `touched` topics in line with it; `created`
    /// names the partitions the update being applied created (by topic id).
    fn reconcile(
        &self,
        image: &MetadataImage,
        touched: BTreeSet<&str>,
        created: &BTreeMap<Uuid, BTreeSet<i32>>,
    ) -> Result<(), LogError> {
        let now = now_ms();
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        // Removed (or recreated under a new id) topics.
        let removed: Vec<String> = topics
            .iter()
            .filter(|(name, hosted)| image.topic(name).is_none_or(|t| t.id != hosted.id))
            .map(|(name, _)| name.clone())
            .collect();
        for name in removed {
            if let Some(hosted) = topics.remove(&name) {
                for partition in hosted.hosted() {
                    self.give_up_move(partition);
                    let dir = partition.lock_log().dir().to_path_buf();
                    if let Err(e) = self.log_manager.delete_partition_dir(&dir) {
                        tracing::error!(dir = %dir.display(), error = %e, "could not delete partition directory");
                    }
                    // Their next read finds the partition gone and answers.
                    partition.stop_hosting();
                }
                tracing::info!(topic = %name, "topic deleted");
            }
        }
        // New partitions are opened together, in parallel, then installed.
        let mut to_open = Vec::new();
        let mut growing = Vec::new();
        let dynamic = DynamicConfigs::of(image, self.config.node_id);
        self.throttles.set_bounds(&self.config, &dynamic);
        let defaults = self.config.topic_defaults_under(&dynamic);
        let touched_names: Vec<&str> = touched.iter().copied().collect();
        for topic in touched.into_iter().filter_map(|name| image.topics.get(name)) {
            let existing = topics.get(&topic.name).cloned();
            let config = log_config(&self.config, &defaults, &topic.configs);
            let produce = ProducePolicy::of(&defaults, &topic.configs);
            let mut slots = existing.as_ref().map(|h| h.partitions.clone()).unwrap_or_default();
            slots.resize(topic.partitions.len(), None);
            let moved_off = self.refresh_hosted(&mut slots, topic, &config, produce.min_insync_replicas, now)?;
            let missing: Vec<i32> = (0..topic.partitions.len())
                .filter(|&i| slots[i].is_none() && self.hosting.hosts(&topic.partitions[i]))
                .map(|i| i as i32)
                .collect();
            let unchanged = !moved_off
                && existing.as_ref().is_some_and(|h| {
                    h.partitions.len() == slots.len() && h.produce == produce && h.unopened.is_empty()
                });
            if missing.is_empty() && unchanged {
                continue;
            }
            let min_isr = produce.min_insync_replicas;
            let new_here = |index: &i32| created.get(&topic.id).is_some_and(|c| c.contains(index));
            to_open.extend(missing.iter().map(|&index| ToOpen {
                topic,
                index,
                config: config.clone(),
                min_insync_replicas: min_isr,
                created: new_here(&index),
            }));
            growing.push((topic, slots, missing, produce));
        }
        let mut opened = self.open_partitions(to_open, now)?.into_iter();
        for (topic, mut slots, missing, produce) in growing {
            let mut unopened = BTreeSet::new();
            let was_unopened = |index| topics.get(&topic.name).is_some_and(|h| h.unopened.contains(&index));
            for index in missing {
                slots[index as usize] = opened.next().flatten().map(Arc::new);
                if slots[index as usize].is_some() {
                    continue;
                }
                if !was_unopened(index) {
                    tracing::warn!(
                        topic = %topic.name, partition = index,
                        "replica left closed: a log directory is offline and its log may be there, or its directory holds another topic's log"
                    );
                }
                unopened.insert(index);
            }
            debug_assert_eq!(slots.len(), topic.partitions.len());
            mark_throttled(topic, self.config.node_id, slots.iter().flatten().map(|p| &**p));
            let hosted = HostedTopic { id: topic.id, partitions: slots, produce, unopened };
            topics.insert(topic.name.clone(), Arc::new(hosted));
        }
        for name in &touched_names {
            if let (Some(topic), Some(hosted)) = (image.topics.get(*name), topics.get(*name)) {
                self.assign_directories(image, topic, hosted);
            }
        }
        drop(topics);
        self.roles_changed.notify_one();
        Ok(())
    }

    /// Brings the partitions of `topic` hosted here in line with the image:
    /// configs and roles, and a replica the image no longer places here
    /// (moved to other brokers) stopped and its log deleted, as Kafka's
    /// broker deletes a replica removed from the assignment. True if one
    /// was.
    fn refresh_hosted(
        &self,
        slots: &mut [Option<Arc<Partition>>],
        topic: &TopicImage,
        config: &krabka_log::LogConfig,
        min_insync_replicas: i32,
        now: i64,
    ) -> Result<bool, LogError> {
        let mut moved_off = false;
        for (slot, image) in slots.iter_mut().zip(&topic.partitions) {
            let Some(partition) = slot else { continue };
            if !self.hosting.hosts(image) {
                self.give_up_move(partition);
                let dir = partition.lock_log().dir().to_path_buf();
                // Nothing is written to an offline directory: a moved
                // replica there goes as a stray at the next start reading it.
                let deleted = if partition.is_offline() { Ok(()) } else { self.log_manager.delete_partition_dir(&dir) };
                if let Err(e) = deleted {
                    tracing::error!(dir = %dir.display(), error = %e, "could not delete a moved replica");
                }
                partition.stop_hosting();
                tracing::info!(topic = %topic.name, partition = partition.index, "replica moved to other brokers: deleted");
                *slot = None;
                moved_off = true;
                continue;
            }
            let mut log = partition.lock_log();
            if log.config() != config {
                log.set_config(config.clone());
            }
            drop(log);
            partition.set_min_insync_replicas(min_insync_replicas);
            partition.set_role(self.hosting.role(image, self.config.node_id), now)?;
        }
        mark_throttled(topic, self.config.node_id, slots.iter().flatten().map(|p| &**p));
        Ok(moved_off)
    }

    /// Opens partition logs, recovering them when needed, on up to
    /// `num.recovery.threads.per.data.dir` threads per log directory (after
    /// an unclean stop each open re-reads its log's tail). Results are in
    /// the order asked, `None` for a replica left closed ([`Self::open_partition`]).
    fn open_partitions(&self, wanted: Vec<ToOpen<'_>>, now: i64) -> Result<Vec<Option<Partition>>, LogError> {
        let threads = (self.config.num_recovery_threads_per_data_dir.max(1) * self.config.log_dirs.len().max(1))
            .min(wanted.len());
        if threads <= 1 {
            return wanted.iter().map(|replica| self.open_partition(replica, now)).collect();
        }
        let next = AtomicUsize::new(0);
        let results: Vec<Mutex<Option<OpenedReplica>>> = wanted.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(replica) = wanted.get(i) else { break };
                    let result = self.open_partition(replica, now);
                    *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                });
            }
        });
        results
            .into_iter()
            .map(|slot| slot.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every partition was opened"))
            .collect()
    }

    /// Opens a replica. `None` leaves it closed, as
    /// Kafka does: its log is in an offline directory, opening it failed on
    /// the disk (its directory goes offline, as in Kafka's log loading), or
    /// it is nowhere and [`Self::may_create_log`] says no.
    fn open_partition(&self, replica: &ToOpen<'_>, now: i64) -> OpenedReplica {
        let ToOpen { topic, index, min_insync_replicas, .. } = *replica;
        let config = replica.config.clone();
        let tp = TopicPartition::new(topic.name.clone(), index);
        let placed = topic.partitions.get(index as usize).and_then(|p| p.directory_of(self.config.node_id));
        let nowhere = self.log_manager.log_dir_of(&tp, &topic.id).is_none();
        // A partition the update being applied created has no records
        // anywhere yet: it may be created whatever is offline.
        if nowhere && !replica.created && !self.open_nowhere_found(&tp, &topic.id, placed) {
            tracing::debug!(partition = %tp.dir_name(), ?placed, "replica left closed");
            return Ok(None);
        }
        // A directory AlterReplicaLogDirs named before the replica was here
        // comes first, as in Kafka.
        let preferred = self
            .log_dir_moves
            .take_preferred(&tp)
            .or_else(|| placed.and_then(|id| self.log_dirs.path_of(id)).map(Into::into));
        let opened = self.log_manager.open_log(&tp, &topic.id, preferred.as_deref(), config.clone(), now);
        let (log, report, high_watermark) = match opened {
            Ok(opened) => opened,
            // A broker catching up opens replicas before it knows which
            // logs are strays: this one opens once the stray is removed.
            Err(error @ LogError::InconsistentTopicId { .. }) => {
                tracing::warn!(partition = %tp.dir_name(), %error, "replica left closed until the other topic's log is removed");
                return Ok(None);
            }
            Err(LogError::Io(error)) => {
                let Some(dir) = self.log_manager.log_dir_of(&tp, &topic.id) else { return Err(LogError::Io(error)) };
                self.log_dirs.failed(&dir, &format!("opening {}", tp.dir_name()), &error);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if report.recovered_segments > 0 || report.truncated_bytes > 0 {
            tracing::warn!(partition = %tp.dir_name(), ?report, "recovered partition log");
        }
        let log_dirs = self.log_dirs.clone();
        let partition =
            Partition::hosted(&topic.name, topic.id, index, log, self.config.node_id, high_watermark, log_dirs);
        partition.set_min_insync_replicas(min_insync_replicas);
        if let Some(image) = topic.partitions.get(index as usize) {
            partition.set_role(self.hosting.role(image, self.config.node_id), now)?;
        }
        self.resume_move(&partition);
        Ok(Some(partition))
    }

    /// For a replica whose log was found in no online directory: whether
    /// to open it, after promoting the future replica found at start if
    /// that is the replica now ([`Self::may_promote_future`]), or else
    /// creating it empty ([`Self::may_create_log`]). Never created empty
    /// beside a future replica that holds its records.
    fn open_nowhere_found(&self, tp: &TopicPartition, topic_id: &Uuid, placed: Option<Uuid>) -> bool {
        let Some(future) = self.log_manager.found_future(tp, topic_id) else { return self.may_create_log(placed) };
        let dest = future.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
        if !self.may_promote_future(&dest, placed) {
            return false;
        }
        match self.log_manager.promote_found_future(tp, topic_id) {
            Ok(dir) => {
                tracing::warn!(partition = %tp.dir_name(), dir = %dir.display(), "a future replica whose current one is gone is the replica now");
                true
            }
            Err(error) => {
                self.log_dirs.failed(&dest, &format!("promoting {}", tp.dir_name()), &error);
                false
            }
        }
    }

    /// Whether a future replica in `dest`, found at start without its
    /// current one, is the replica: where the metadata records replicas'
    /// directories, when it names `dest` (the controller recorded it
    /// once the copy had caught up: Kafka's `recoverAbandonedFutureLogs`);
    /// elsewhere, when no directory is offline (the current one was
    /// renamed away by the swap, not left on a missing disk).
    fn may_promote_future(&self, dest: &std::path::Path, placed: Option<krabka_protocol::Uuid>) -> bool {
        use krabka_metadata::directory_id::{MIGRATING, UNASSIGNED};
        match placed {
            Some(id) if id != UNASSIGNED && id != MIGRATING => self.log_dirs.id_of(dest) == Some(id),
            _ => !self.log_manager.has_offline_dirs(),
        }
    }

    /// Whether a replica whose log is in no directory may be created
    /// empty, its directory named by the metadata as `placed`. Always when
    /// every directory is online. While one is offline the log may be in
    /// it, and an empty one here could come to lead and lose what that one
    /// holds: only when the metadata places the replica in an online
    /// directory here, or in none yet on a broker that reports where its
    /// replicas are (Kafka's `createLogInAssignedDirectoryId`); never where
    /// directories are not recorded (Kafka's rule for a replica not new).
    fn may_create_log(&self, placed: Option<krabka_protocol::Uuid>) -> bool {
        if !self.log_manager.has_offline_dirs() {
            return true;
        }
        let reports_directories = self.hosting != Hosting::Everything;
        match placed {
            Some(id) if id == krabka_metadata::directory_id::UNASSIGNED => reports_directories,
            Some(id) => self.log_dirs.path_of(id).is_some_and(|dir| !self.log_manager.is_offline(dir)),
            None => false,
        }
    }

    /// Whether the controller records the directory of each replica here:
    /// one in charge of several brokers, at a metadata version with
    /// directories (a node that is its quorum's only voter records none).
    pub(super) fn records_directories(&self, image: &MetadataImage) -> bool {
        use krabka_metadata::features::{DIRECTORY_ASSIGNMENT_LEVEL, METADATA_VERSION};
        let recorded = image.features.get(METADATA_VERSION).is_some_and(|&l| l >= DIRECTORY_ASSIGNMENT_LEVEL);
        self.hosting != Hosting::Everything && recorded
    }

    /// Queues, for the controller, the directory of each replica of `topic`
    /// hosted here that the image places elsewhere or nowhere (a
    /// controller in charge of several brokers only, and a metadata
    /// version with directories, as Kafka's broker; with one log directory
    /// the controller names it from the start).
    fn assign_directories(&self, image: &MetadataImage, topic: &TopicImage, hosted: &HostedTopic) {
        if !self.records_directories(image) {
            return;
        }
        for (partition, placed) in hosted.partitions.iter().zip(&topic.partitions) {
            let Some(partition) = partition.as_ref().filter(|p| !p.is_offline()) else { continue };
            let Some(actual) = partition.reported_dir_id(self.log_dirs.id_of(&partition.log_dir())) else { continue };
            if placed.directory_of(self.config.node_id) != Some(actual) {
                self.dir_assignments.push((topic.id, partition.index), actual);
            }
        }
    }

    /// Takes the failed log directories `dirs` offline: every replica in
    /// them stops (Kafka's `handleLogDirFailure`), the replica fetchers
    /// drop them, and the lifecycle is told to report the directories.
    pub fn take_offline(&self, dirs: &[std::path::PathBuf]) {
        debug_assert!(dirs.iter().all(|dir| self.log_manager.is_offline(dir)), "marked when the write failed");
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        let mut stopped = 0;
        for partition in topics.values().flat_map(|t| t.partitions.iter().flatten()) {
            if dirs.contains(&partition.log_dir()) {
                partition.go_offline();
                stopped += 1;
            }
            // A move to or from a failed directory stops (Kafka removes the
            // future replica); nothing is removed from the failed one.
            if partition.is_offline() || partition.future_dir().is_some_and(|d| dirs.contains(&d)) {
                self.give_up_move(partition);
            }
        }
        drop(topics);
        tracing::error!(?dirs, replicas = stopped, "stopped serving the replicas in failed log directories");
        self.roles_changed.notify_one();
        self.log_dirs.taken_offline();
    }

    /// Writes every online directory's checkpoints; a directory where
    /// that fails goes offline, saying why (Kafka's checkpoint writers do
    /// the same), so there is no error left for the caller.
    pub fn write_checkpoints(&self) {
        let partitions = self.all_partitions();
        let futures = partitions.iter().filter_map(|p| p.future_checkpoint());
        let checkpoints: Vec<PartitionCheckpoint> = partitions.iter().map(|p| p.checkpoint()).chain(futures).collect();
        for (dir, error) in self.log_manager.write_checkpoints(&checkpoints) {
            self.log_dirs.failed(&dir, "writing its checkpoints", &error);
        }
    }

    /// Periodic log housekeeping: retention, time-based flush, unlinking of
    /// deleted segments, compaction of compacted topics. A step that fails
    /// on the disk takes the partition's directory offline (as Kafka's
    /// flush, retention and cleaner do); the partition's other steps wait
    /// for the restart.
    pub fn housekeeping(&self, retention: bool, clean: bool, expire_producers: bool) {
        let now = now_ms();
        for partition in self.all_partitions() {
            let mut log = partition.lock_log();
            let hw = partition.high_watermark();
            let mut retention_moved_start = false;
            let failed = |what: &str, e: LogError| {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "{what} failed");
            };
            if let Err(e) = partition.unless_disk_failed(log.maybe_flush_on_time(now)) {
                failed("flush", e);
            }
            if expire_producers {
                let expired = log.remove_expired_producers(now);
                if expired > 0 {
                    tracing::debug!(topic = %partition.topic, partition = partition.index, expired, "expired idle producers");
                }
            }
            if retention && !partition.is_offline() {
                let log_start_offset = log.log_start_offset();
                if let Err(e) = partition.unless_disk_failed(log.enforce_retention(now)) {
                    failed("retention", e);
                }
                retention_moved_start = log.log_start_offset() != log_start_offset;
            }
            // Cleaning waits while the replica moves (Kafka pauses it).
            let moving = partition.future_dir().is_some();
            if clean && log.config().cleanup_policy.compacts() && !partition.is_offline() && !moving {
                if let Err(e) = partition.unless_disk_failed(log.clean(now, hw)) {
                    failed("compaction", e);
                }
            }
            drop(log);
            // A fetch parked below the new log start is out of range now.
            if retention_moved_start {
                partition.watchers.wake_all();
            }
            let mut log = partition.lock_log();
            if !partition.is_offline() {
                if let Err(e) = partition.unless_disk_failed(log.delete_pending_files()) {
                    failed("segment delete", e);
                }
            }
        }
    }

    /// Closes every log (flushing it) and writes the checkpoints; the caller
    /// marks the clean shutdown after this. A directory where a log could
    /// not be flushed goes offline first, so it gets neither checkpoints
    /// nor a clean-shutdown marker and recovers at the next start, while
    /// the others are marked (Kafka's `LogManager.shutdown`, per directory).
    pub fn shutdown(&self) -> Result<(), LogError> {
        let now = now_ms();
        // Each log's flush waits on fsyncs: spread them over a few threads so
        // a broker with thousands of partitions stops in seconds.
        let partitions = self.all_partitions();
        let workers = SHUTDOWN_FLUSH_THREADS.min(partitions.len().max(1));
        let chunk = partitions.len().div_ceil(workers).max(1);
        let failed = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            let handles: Vec<_> = partitions
                .chunks(chunk)
                .map(|group| {
                    let failed = &failed;
                    scope.spawn(move || {
                        for partition in group {
                            if let Err(error) = partition.lock_log().prepare_clean_shutdown(now) {
                                let dir = partition.log_dir();
                                failed.lock().unwrap_or_else(|e| e.into_inner()).push((dir, error));
                            }
                            if let Err(failure) = partition.prepare_future_for_shutdown(now) {
                                failed.lock().unwrap_or_else(|e| e.into_inner()).push(failure);
                            }
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().map_err(|_| LogError::Io(std::io::Error::other("flush thread panicked"))))
        })?;
        for (dir, error) in failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            if self.log_manager.mark_offline(&dir).is_some() {
                tracing::error!(dir = %dir.display(), %error, "a log could not be flushed at shutdown: its directory recovers at the next start");
            }
        }
        // A directory whose checkpoints fail goes offline (or the broker
        // halts), and the clean-shutdown markers go to the online ones.
        self.write_checkpoints();
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        for (_, hosted) in topics.drain() {
            for partition in hosted.hosted() {
                let _ = partition.lock_log().delete_pending_files();
            }
        }
        Ok(())
    }
}

/// A replica opened, or left closed (`None`), or the error that stops
/// the broker at start.
type OpenedReplica = Result<Option<Partition>, LogError>;

/// A replica to open: partition `index` of `topic`, with its log config
/// and `min.insync.replicas`; `created` when the update being applied
/// created the partition.
struct ToOpen<'a> {
    topic: &'a TopicImage,
    index: i32,
    config: krabka_log::LogConfig,
    min_insync_replicas: i32,
    created: bool,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::metadata::PartitionImage;
    use crate::replica::purgatory::Waiter;
    use bytes::Bytes;
    use krabka_protocol::compression::Compression;
    use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
    use krabka_protocol::Uuid;
    use std::collections::BTreeMap;

    fn replica_manager(log_dir: &std::path::Path) -> ReplicaManager {
        replica_manager_in(&[log_dir.to_path_buf()], &[])
    }

    /// A single node (it hosts and leads everything) with log directories
    /// `dirs` and the `extra` configs.
    pub(in crate::replica) fn replica_manager_in(
        dirs: &[std::path::PathBuf],
        extra: &[(&str, &str)],
    ) -> ReplicaManager {
        let log_dirs = dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(",");
        let props: BTreeMap<String, String> = [
            ("node.id", "1"),
            ("process.roles", "broker,controller"),
            ("listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093"),
            ("controller.listener.names", "CONTROLLER"),
            ("log.dirs", log_dirs.as_str()),
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (config, _) = BrokerConfig::from_properties(props).unwrap();
        let log_manager = Arc::new(LogManager::open(&config.log_dirs, &[], &[]).unwrap());
        let dirs = config.log_dirs.iter().map(|d| (d.clone(), Uuid::random().unwrap())).collect();
        let log_dirs = Arc::new(LogDirectories::new(dirs, config.metadata_log_dir.clone(), Arc::clone(&log_manager)));
        ReplicaManager::new(Arc::new(config), log_manager, Hosting::Everything, log_dirs)
    }

    fn image(topics: &[&str]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for name in topics {
            let partition = PartitionImage { leader: 1, replicas: vec![1], isr: vec![1], ..Default::default() };
            let topic = TopicImage {
                name: name.to_string(),
                id: Uuid([name.as_bytes()[0]; 16]),
                partitions: vec![partition],
                configs: BTreeMap::new(),
            };
            image.topic_names_by_id.insert(topic.id, topic.name.clone());
            image.topics.insert(topic.name.clone(), Arc::new(topic));
        }
        image
    }

    fn one_record() -> Bytes {
        let mut builder = RecordBatchBuilder::new(Compression::None);
        let record = NewRecord { timestamp_ms: 1, key: None, value: Some(b"v"), headers: &[] };
        builder.append(&record).unwrap();
        builder.build().unwrap().into_bytes()
    }

    /// Issue 15: a fetch parked on partition A stays parked through 1,000
    /// appends to B (one signal for every partition woke it 1,000 times).
    #[test]
    fn a_waiter_on_partition_a_sleeps_through_1000_appends_to_b() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = replica_manager(dir.path());
        replicas.sync_with_image(&image(&["a", "b"])).unwrap();
        let (a, b) = (replicas.partition("a", 0).unwrap(), replicas.partition("b", 0).unwrap());
        let waiter = Waiter::new();
        a.watch(&waiter);
        let records = one_record();
        for _ in 0..1_000 {
            b.append(&records, now_ms()).unwrap();
        }
        assert_eq!(b.high_watermark(), 1_000);
        assert_eq!(waiter.wakeups(), 0);
        a.append(&records, now_ms()).unwrap();
        assert_eq!(waiter.wakeups(), 1);
    }

    #[test]
    fn min_insync_replicas_comes_from_the_topic_then_the_cluster_then_server_properties() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = replica_manager(dir.path());
        let mut image = image(&["a", "b"]);
        let min_isr = |replicas: &ReplicaManager, name: &str| replicas.topic(name).unwrap().produce.min_insync_replicas;
        replicas.sync_with_image(&image).unwrap();
        assert_eq!(min_isr(&replicas, "a"), 1, "server.properties' (Kafka's default)");
        image.broker_configs.insert("min.insync.replicas".into(), "2".into());
        let mut b = (*image.topics["b"]).clone();
        b.configs.insert("min.insync.replicas".into(), "3".into());
        image.topics.insert("b".into(), Arc::new(b));
        replicas.sync_with_image(&image).unwrap();
        assert_eq!((min_isr(&replicas, "a"), min_isr(&replicas, "b")), (2, 3));
    }

    #[test]
    fn deleting_a_topic_wakes_the_waiters_on_its_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = replica_manager(dir.path());
        replicas.sync_with_image(&image(&["a", "b"])).unwrap();
        let (on_a, on_b) = (Waiter::new(), Waiter::new());
        replicas.partition("a", 0).unwrap().watch(&on_a);
        replicas.partition("b", 0).unwrap().watch(&on_b);
        replicas.sync_with_image(&image(&["b"])).unwrap();
        assert!(replicas.partition("a", 0).is_none());
        assert_eq!((on_a.wakeups(), on_b.wakeups()), (1, 0));
    }

    /// In a shared quorum a broker hosts the partitions placed on it and
    /// serves those it leads; another broker's are NOT_LEADER_OR_FOLLOWER,
    /// and leadership follows the image (a new epoch starting at the log end).
    #[test]
    fn a_broker_hosts_its_replicas_and_serves_what_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let mut replicas = replica_manager(dir.path());
        replicas.hosting = Hosting::ReplicasOf(1);
        let placed = |leader: i32, epoch: i32, replica: i32| PartitionImage {
            leader,
            leader_epoch: epoch,
            partition_epoch: epoch,
            replicas: vec![replica],
            isr: vec![replica],
            ..Default::default()
        };
        let with = |p0: PartitionImage| {
            let mut image = image(&["t"]);
            let mut topic = (*image.topics["t"]).clone();
            topic.partitions = vec![p0, placed(2, 0, 2)];
            image.topics.insert("t".into(), Arc::new(topic));
            image
        };
        replicas.sync_with_image(&with(placed(1, 0, 1))).unwrap();
        assert!(replicas.partition("t", 0).is_some());
        assert!(replicas.hosted_partition("t", 1).is_none(), "another broker's replica is not opened");
        assert_eq!(replicas.not_led_here("t", 1), ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
        assert_eq!(replicas.not_led_here("t", 2), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code());
        replicas.partition("t", 0).unwrap().append(&one_record(), now_ms()).unwrap();
        // Fenced: nobody leads it, but its log stays.
        replicas.sync_with_image(&with(placed(-1, 1, 1))).unwrap();
        assert!(replicas.partition("t", 0).is_none());
        assert_eq!(replicas.leader_partition("t", 0, -1).err(), Some(ErrorCode::NOT_LEADER_OR_FOLLOWER.code()));
        // Leading again in epoch 2, from its log end.
        replicas.sync_with_image(&with(placed(1, 2, 1))).unwrap();
        let p0 = replicas.partition("t", 0).unwrap();
        assert_eq!(p0.leader_epoch(), 2);
        assert_eq!(p0.lock_log().leader_epochs().entries().last().map(|e| (e.epoch, e.start_offset)), Some((2, 1)));
        assert_eq!(replicas.all_partitions().len(), 1);
    }

    #[test]
    fn a_follower_follows_its_leader_and_a_replica_moved_away_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let mut replicas = replica_manager(dir.path());
        replicas.hosting = Hosting::ReplicasOf(1);
        let placed = |leader: i32, epoch: i32, replicas: Vec<i32>| PartitionImage {
            leader,
            leader_epoch: epoch,
            partition_epoch: epoch,
            isr: replicas.clone(),
            replicas,
            ..Default::default()
        };
        let with = |p0: PartitionImage| {
            let mut image = image(&["t"]);
            let mut topic = (*image.topics["t"]).clone();
            topic.partitions = vec![p0];
            image.topics.insert("t".into(), Arc::new(topic));
            image
        };
        replicas.sync_with_image(&with(placed(2, 0, vec![2, 1]))).unwrap();
        let followed = replicas.followed_partitions();
        assert_eq!(followed.iter().map(|(leader, p)| (*leader, p.index)).collect::<Vec<_>>(), vec![(2, 0)]);
        assert!(replicas.partition("t", 0).is_none(), "a follower does not lead");
        // Leading it, with 2 following: the high watermark waits for 2.
        replicas.sync_with_image(&with(placed(1, 1, vec![2, 1]))).unwrap();
        let p0 = replicas.partition("t", 0).unwrap();
        p0.append(&one_record(), now_ms()).unwrap();
        assert_eq!(p0.high_watermark(), 0, "not replicated yet");
        assert_eq!(p0.in_sync_replicas(), vec![2, 1]);
        let log_dir = p0.lock_log().dir().to_path_buf();
        // Moved to broker 3 alone: stopped, its log deleted.
        replicas.sync_with_image(&with(placed(3, 2, vec![3]))).unwrap();
        assert!(replicas.hosted_partition("t", 0).is_none());
        assert!(!p0.is_led_here());
        assert!(!log_dir.exists(), "{} is deleted", log_dir.display());
    }

    /// The controller taking a fenced follower out of the ISR (the image
    /// changes the ISR, not the leader epoch) lets the high watermark move:
    /// the acks=all produces and fetches parked on the partition are woken
    /// then, as Kafka's leader completes its delayed requests, not at
    /// their timeout.
    #[test]
    fn an_isr_the_controller_shrank_wakes_what_waits_for_the_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let mut replicas = replica_manager(dir.path());
        replicas.hosting = Hosting::ReplicasOf(1);
        let led = |partition_epoch: i32, isr: Vec<i32>| {
            let mut image = image(&["t"]);
            let mut topic = (*image.topics["t"]).clone();
            let p0 = PartitionImage {
                leader: 1,
                leader_epoch: 1,
                partition_epoch,
                replicas: vec![1, 2, 3],
                isr,
                ..Default::default()
            };
            topic.partitions = vec![p0];
            image.topics.insert("t".into(), Arc::new(topic));
            image
        };
        replicas.sync_with_image(&led(1, vec![1, 2, 3])).unwrap();
        let p0 = replicas.partition("t", 0).unwrap();
        p0.append(&one_record(), now_ms()).unwrap();
        // Follower 2 has it, follower 3 (about to be fenced) not.
        let log = p0.lock_log();
        p0.record_follower_fetch(&log, 2, -1, log.log_end_offset(), now_ms());
        drop(log);
        assert_eq!(p0.high_watermark(), 0, "waiting for 3");
        let waiting = Waiter::new();
        p0.watch(&waiting);
        replicas.sync_with_image(&led(2, vec![1, 2])).unwrap();
        assert_eq!((p0.leader_epoch(), p0.high_watermark()), (1, 1), "the same leader epoch, the record committed");
        assert_eq!(waiting.wakeups(), 1, "the produce waiting for it is woken");
    }

    /// As a metadata subscriber it acts on the delta: what the delta names
    /// changes, what it does not name is left alone (not re-compared).
    #[test]
    fn an_update_opens_and_deletes_what_its_delta_names() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = replica_manager(dir.path());
        let before = image(&["a", "b"]);
        replicas.sync_with_image(&before).unwrap();
        let mut after = image(&["b", "c"]);
        // A config change the delta does not mention is not picked up.
        let mut b = (*after.topics["b"]).clone();
        b.configs.insert("retention.ms".into(), "1000".into());
        after.topics.insert("b".into(), Arc::new(b));
        let mut delta = crate::metadata::MetadataDelta::default();
        delta.created_topics.insert(after.topics["c"].id, "c".into());
        delta.new_partitions.insert(after.topics["c"].id, [0].into());
        delta.deleted_topics.insert(before.topics["a"].id, "a".into());
        let update = MetadataUpdate { image: Arc::new(after), delta: Arc::new(delta) };
        replicas.apply_update(&update).unwrap();
        assert!(replicas.partition("a", 0).is_none(), "deleted");
        assert!(replicas.partition("c", 0).is_some(), "created");
        let b = replicas.partition("b", 0).unwrap();
        assert_ne!(b.lock_log().config().retention_ms, 1000, "b was not named by the delta");
        // Naming it applies it.
        let mut delta = crate::metadata::MetadataDelta::default();
        delta.changed_topic_configs.insert("b".into());
        replicas.apply_update(&MetadataUpdate { image: update.image.clone(), delta: Arc::new(delta) }).unwrap();
        assert_eq!(b.lock_log().config().retention_ms, 1000);
    }

    /// While a directory is offline a node that is its quorum's only voter
    /// (no directories recorded) creates only the partitions the update
    /// being applied created: any other may hold records on the missing
    /// disk. A topic deleted and re-created under its name meanwhile is
    /// such a partition, its old replica in the offline directory left
    /// alone.
    #[test]
    fn while_a_directory_is_offline_a_single_node_creates_only_what_the_update_created() {
        let dirs: Vec<std::path::PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let replicas = replica_manager_in(&dirs, &[]);
        replicas.sync_with_image(&image(&["a"])).unwrap();
        let offline = replicas.partition("a", 0).unwrap().log_dir();
        let online = dirs.iter().find(|d| **d != offline).unwrap().clone();
        replicas.log_manager().mark_offline(&offline);
        replicas.take_offline(std::slice::from_ref(&offline));
        replicas.sync_with_image(&image(&["a", "b"])).unwrap();
        assert!(replicas.hosted_partition("b", 0).is_none(), "not created by an update: left closed");

        let mut next = image(&["b", "c"]);
        let mut recreated = (*image(&["a"]).topics["a"]).clone();
        recreated.id = Uuid([9; 16]);
        next.topic_names_by_id.insert(recreated.id, "a".into());
        next.topics.insert("a".into(), Arc::new(recreated));
        let mut delta = crate::metadata::MetadataDelta::default();
        for (name, id) in [("c", next.topics["c"].id), ("a", Uuid([9; 16]))] {
            delta.created_topics.insert(id, name.into());
            delta.new_partitions.insert(id, [0].into());
        }
        delta.deleted_topics.insert(Uuid([b'a'; 16]), "a".into());
        replicas.apply_update(&MetadataUpdate { image: Arc::new(next), delta: Arc::new(delta) }).unwrap();
        assert_eq!(replicas.partition("c", 0).unwrap().log_dir(), online, "created by the update");
        assert_eq!(replicas.partition("a", 0).unwrap().log_dir(), online, "re-created beside the old one");
        assert!(offline.join("a-0").exists(), "the old replica is left in the offline directory");
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    /// A broker catching up from the controller replays old creations as
    /// new ones: a delta's new partitions do not let it create a replica
    /// the metadata places in its offline directory.
    #[test]
    fn a_broker_catching_up_does_not_create_replicas_placed_in_an_offline_directory() {
        use krabka_metadata::features::{DIRECTORY_ASSIGNMENT_LEVEL, METADATA_VERSION};
        let dirs: Vec<std::path::PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let mut replicas = replica_manager_in(&dirs, &[]);
        replicas.hosting = Hosting::ReplicasOf(1);
        replicas.log_manager().mark_offline(&dirs[0]);
        let mut next = image(&["t"]);
        next.features.insert(METADATA_VERSION.to_string(), DIRECTORY_ASSIGNMENT_LEVEL);
        let mut topic = (*next.topics["t"]).clone();
        topic.partitions[0].directories = vec![replicas.log_dirs.id_of(&dirs[0]).unwrap()];
        next.topics.insert("t".into(), Arc::new(topic));
        let mut delta = crate::metadata::MetadataDelta::default();
        delta.created_topics.insert(next.topics["t"].id, "t".into());
        delta.new_partitions.insert(next.topics["t"].id, [0].into());
        replicas.apply_update(&MetadataUpdate { image: Arc::new(next), delta: Arc::new(delta) }).unwrap();
        assert!(replicas.hosted_partition("t", 0).is_none(), "left closed");
        assert!(!dirs[1].join("t-0").exists(), "not created in the online directory");
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    /// A broker catching up opens replicas before it knows which logs are
    /// strays: the log of a topic deleted while it was down, in the
    /// directory the re-created topic's replica would take, is not reopened
    /// as the new topic's. The replica opens, empty, once the stray is
    /// removed (`sync_unopened`, as `Broker::catch_up_metadata` does).
    #[test]
    fn a_stray_of_the_same_name_keeps_the_new_topics_replica_closed_until_it_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let old = image(&["t"]);
        let replicas = replica_manager(dir.path());
        replicas.sync_with_image(&old).unwrap();
        replicas.partition("t", 0).unwrap().append(&one_record(), now_ms()).unwrap();
        drop(replicas);
        let mut recreated = old.clone();
        let mut topic = (*old.topics["t"]).clone();
        topic.id = Uuid([9; 16]);
        recreated.topic_names_by_id = HashMap::from([(topic.id, "t".to_string())]);
        recreated.topics.insert("t".into(), Arc::new(topic));

        let mut replicas = replica_manager(dir.path());
        replicas.hosting = Hosting::ReplicasOf(1);
        replicas.sync_with_image(&recreated).unwrap();
        assert!(replicas.hosted_partition("t", 0).is_none(), "left closed");
        let metadata = dir.path().join("t-0").join("partition.metadata");
        let old_id = old.topics["t"].id;
        assert_eq!(krabka_log::checkpoint::read_partition_metadata(&metadata).unwrap(), Some(old_id));
        replicas.log_manager().delete_partition_dir(&dir.path().join("t-0")).unwrap();
        replicas.sync_unopened(&recreated).unwrap();
        let partition = replicas.hosted_partition("t", 0).expect("opened once the stray is gone");
        assert_eq!(partition.lock_log().log_end_offset(), 0, "none of the old topic's records");
    }
}
