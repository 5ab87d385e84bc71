//! The log directories: which partition lives where, the per-directory
//! checkpoint files Kafka keeps (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `replication-offset-checkpoint`,
//! `cleaner-offset-checkpoint`) and the clean-shutdown marker that lets the
//! next start skip recovery. It opens each partition's log from those
//! checkpoints (Kafka's `LogManager`).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use krabka_protocol::Uuid;

use crate::checkpoint::{self, TopicPartition};
use crate::config::LogConfig;
use crate::error::LogError;
use crate::fsutil::fsync_dir;
use crate::loader::OpenReport;
use crate::log::PartitionLog;

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Kafka's marker of a clean shutdown; present means "segments are trustworthy".
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// What one log directory said when the broker started.
#[derive(Default)]
struct LogDir {
    path: PathBuf,
    clean_shutdown: bool,
    /// The broker epoch the clean-shutdown marker names (-1 when it names
    /// none, as a broker that never registered writes it).
    clean_shutdown_epoch: i64,
    recovery_points: BTreeMap<TopicPartition, i64>,
    log_start_offsets: BTreeMap<TopicPartition, i64>,
    cleaner_offsets: BTreeMap<TopicPartition, i64>,
    /// High watermarks (`replication-offset-checkpoint`).
    high_watermarks: BTreeMap<TopicPartition, i64>,
    /// Partition directories found on start (name -> topic id, if recorded).
    found: HashMap<TopicPartition, Option<Uuid>>,
    /// Future replicas found on start (a move between directories a stop
    /// interrupted, KIP-113): their directory and topic id, until the
    /// replica opens and resumes the move.
    futures: HashMap<TopicPartition, (PathBuf, Option<Uuid>)>,
    partition_count: usize,
    /// A write here failed: nothing more is read or written in it, and
    /// no new partition is placed in it (Kafka's offline log dir).
    offline: bool,
}

impl LogDir {
    /// Reads directory `path` (creating it if missing): its partition
    /// directories, checkpoints and clean-shutdown marker, which it then
    /// removes.
    fn read(path: &Path, reserved: &[&str]) -> io::Result<LogDir> {
        std::fs::create_dir_all(path)?;
        let marker = path.join(CLEAN_SHUTDOWN_FILE);
        let clean_shutdown = marker.exists();
        let clean_shutdown_epoch = if clean_shutdown { read_marker_epoch(&marker) } else { -1 };
        let (mut found, mut futures) = (HashMap::new(), HashMap::new());
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !entry.file_type()?.is_dir() || reserved.contains(&name.as_ref()) || name.ends_with("-delete") {
                continue;
            }
            let id = || checkpoint::read_partition_metadata(&entry.path().join("partition.metadata")).ok().flatten();
            if let Some(tp) = TopicPartition::from_dir_name(&name) {
                found.insert(tp, id());
            } else if let Some(tp) = TopicPartition::from_future_dir_name(&name) {
                futures.insert(tp, (entry.path(), id()));
            }
        }
        let dir = LogDir {
            clean_shutdown,
            clean_shutdown_epoch,
            recovery_points: read_or_empty(&path.join(RECOVERY_POINT_CHECKPOINT)),
            log_start_offsets: read_or_empty(&path.join(LOG_START_OFFSET_CHECKPOINT)),
            cleaner_offsets: read_or_empty(&path.join(CLEANER_OFFSET_CHECKPOINT)),
            high_watermarks: read_or_empty(&path.join(REPLICATION_OFFSET_CHECKPOINT)),
            partition_count: found.len(),
            found,
            futures,
            path: path.to_path_buf(),
            offline: false,
        };
        if clean_shutdown {
            std::fs::remove_file(&marker)?;
            fsync_dir(path)?;
        }
        Ok(dir)
    }

    /// Whether it holds a log of `tp` of topic `topic_id` (or of no
    /// recorded topic): not one of a deleted topic of the same name, left
    /// in a directory that went offline before it could be removed.
    fn holds(&self, tp: &TopicPartition, topic_id: &Uuid) -> bool {
        self.found.get(tp).is_some_and(|id| id.is_none_or(|id| id == *topic_id))
    }

    /// The topic id of another topic whose log of `tp`'s name this
    /// directory holds (a topic deleted and re-created under its name
    /// while the broker was down, its log not removed yet), as known or as
    /// its `partition.metadata` says.
    fn holds_another(&self, tp: &TopicPartition, topic_id: &Uuid) -> Option<Uuid> {
        let known = self.found.get(tp).copied().flatten();
        let on_disk = || checkpoint::read_partition_metadata(&self.path.join(tp.dir_name()).join("partition.metadata"));
        known.or_else(|| on_disk().ok().flatten()).filter(|id| id != topic_id)
    }

    /// The future replica of `tp` of topic `topic_id` (or of no recorded
    /// topic) found here at start: never one of another topic of the same
    /// name (Kafka's `findAbandonedFutureLogs` goes by topic id too).
    fn future_of(&self, tp: &TopicPartition, topic_id: &Uuid) -> Option<&PathBuf> {
        let (path, id) = self.futures.get(tp).filter(|_| !self.offline)?;
        id.is_none_or(|id| id == *topic_id).then_some(path)
    }

    /// A directory offline from the start: nothing in it is known.
    fn offline(path: &Path) -> LogDir {
        LogDir { path: path.to_path_buf(), clean_shutdown_epoch: -1, offline: true, ..LogDir::default() }
    }
}

/// The offsets the broker checkpoints for one partition.
pub struct PartitionCheckpoint {
    pub topic_partition: TopicPartition,
    pub log_dir: PathBuf,
    pub recovery_point: i64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub cleaner_offset: i64,
}

pub struct LogManager {
    dirs: Mutex<Vec<LogDir>>,
}

fn read_or_empty(path: &Path) -> BTreeMap<TopicPartition, i64> {
    match checkpoint::read_offsets(path) {
        Ok(offsets) => offsets,
        Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => {
            // A damaged checkpoint only costs a longer recovery.
            tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable checkpoint");
            BTreeMap::new()
        }
    }
}

/// The broker epoch in a clean-shutdown marker (Kafka's JSON,
/// `{"version":0,"brokerEpoch":N}`); -1 when it is unreadable or names
/// none (the marker still says the segments are trustworthy).
fn read_marker_epoch(marker: &Path) -> i64 {
    let parsed = std::fs::read(marker).ok().and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    parsed.and_then(|v| v.get("brokerEpoch").and_then(serde_json::Value::as_i64)).unwrap_or(-1)
}

/// Where a partition directory `dir` goes to be removed: beside it, as
/// `<name>.<unique>-delete` (Kafka's form; the unique part only has to keep
/// a recreated topic's directory from colliding with this one). A start
/// removes any such directory a crash left.
fn doomed_name(dir: &Path) -> PathBuf {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unique = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    dir.with_file_name(format!("{name}.{unique:x}-delete"))
}

/// Renames `dir` to its [`doomed_name`] (atomic: a crash leaves a
/// directory the next start removes), syncs its parent, then removes it.
fn remove_log_dir(dir: &Path) -> io::Result<()> {
    if dir.file_name().is_none() || !dir.exists() {
        return Ok(());
    }
    let doomed = doomed_name(dir);
    std::fs::rename(dir, &doomed)?;
    if let Some(parent) = dir.parent() {
        fsync_dir(parent)?;
    }
    std::fs::remove_dir_all(&doomed)
}

impl LogManager {
    /// Reads every log directory's checkpoints and marker, then removes the
    /// marker: from now on a crash must be treated as unclean.
    /// `reserved` names directories of a log dir that hold no partition of
    /// a topic (KRaft's `__cluster_metadata-0`, kept by its own log).
    /// A directory in `initial_offline` (its `meta.properties` could not be
    /// read), or one that cannot be created or read now, starts offline,
    /// as Kafka's `createAndValidateLogDirs` and log loading leave it; an
    /// error only when every directory is offline.
    pub fn open(log_dirs: &[PathBuf], reserved: &[&str], initial_offline: &[PathBuf]) -> io::Result<Self> {
        let mut dirs = Vec::new();
        let mut last_error = None;
        for path in log_dirs {
            if initial_offline.contains(path) {
                // The caller said why.
                last_error = Some(io::Error::other(format!("{} could not be read", path.display())));
                dirs.push(LogDir::offline(path));
                continue;
            }
            dirs.push(LogDir::read(path, reserved).unwrap_or_else(|error| {
                tracing::error!(dir = %path.display(), %error, "log directory offline: it could not be read at start");
                last_error = Some(error);
                LogDir::offline(path)
            }));
        }
        if let (true, Some(error)) = (dirs.iter().all(|d| d.offline), last_error) {
            return Err(io::Error::new(error.kind(), format!("every log directory is offline; the last: {error}")));
        }
        Ok(LogManager { dirs: Mutex::new(dirs) })
    }

    /// Whether `dir` (a log directory) was shut down cleanly last time.
    pub fn was_clean_shutdown(&self, dir: &Path) -> bool {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        dirs.iter().any(|d| d.path == dir && d.clean_shutdown)
    }

    /// The broker epoch of the last clean shutdown, sent as the
    /// registration's `PreviousBrokerEpoch` (KIP-966): a controller takes a
    /// broker registering with any other value for one that may have lost
    /// unflushed records, and drops it from its Eligible Leader Replicas.
    /// -1 unless every log directory was shut down cleanly.
    pub fn previous_broker_epoch(&self) -> i64 {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        if dirs.iter().all(|d| d.clean_shutdown) {
            dirs.iter().map(|d| d.clean_shutdown_epoch).max().unwrap_or(-1)
        } else {
            -1
        }
    }

    /// Every log directory, online or not, in `log.dirs` order.
    pub fn log_dirs(&self) -> Vec<PathBuf> {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|d| d.path.clone()).collect()
    }

    /// The log directories no write has failed in.
    pub fn online_log_dirs(&self) -> Vec<PathBuf> {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        dirs.iter().filter(|d| !d.offline).map(|d| d.path.clone()).collect()
    }

    /// Whether `dir` is offline.
    pub fn is_offline(&self, dir: &Path) -> bool {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|d| d.path == dir && d.offline)
    }

    /// Whether any log directory is offline.
    pub fn has_offline_dirs(&self) -> bool {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|d| d.offline)
    }

    /// The log directories that are offline, in `log.dirs` order.
    pub fn offline_log_dirs(&self) -> Vec<PathBuf> {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        dirs.iter().filter(|d| d.offline).map(|d| d.path.clone()).collect()
    }

    /// Takes `dir` offline: no checkpoint, marker or new partition goes
    /// there any more, and its logs do not open again. How many
    /// directories are left online when this took it offline; `None` when
    /// it already was (or is not a log directory), so that of two writes
    /// failing in one directory only the first acts on it.
    pub fn mark_offline(&self, dir: &Path) -> Option<usize> {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let taken = dirs.iter_mut().find(|d| d.path == dir && !d.offline)?;
        taken.offline = true;
        Some(dirs.iter().filter(|d| !d.offline).count())
    }

    /// The log directory holding the log of `tp` of topic `topic_id`
    /// (found at start or placed since), online or not; `None` for a log
    /// not created yet, or in a directory offline since the start (nothing
    /// in it is known).
    pub fn log_dir_of(&self, tp: &TopicPartition, topic_id: &Uuid) -> Option<PathBuf> {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        dirs.iter().find(|d| d.holds(tp, topic_id)).map(|d| d.path.clone())
    }

    /// Partition directories found on start whose topic is not `is_live`
    /// (deleted while the broker was down, or recreated with a new id).
    pub fn stray_partitions(&self, is_live: impl Fn(&TopicPartition, Option<&Uuid>) -> bool) -> Vec<PathBuf> {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        // Nothing is removed from an offline directory: they go at the
        // first start that reads it again.
        for dir in dirs.iter().filter(|d| !d.offline) {
            for (tp, id) in &dir.found {
                if !is_live(tp, id.as_ref()) {
                    out.push(dir.path.join(tp.dir_name()));
                }
            }
            let futures = dir.futures.iter().filter(|(tp, (_, id))| !is_live(tp, id.as_ref()));
            out.extend(futures.map(|(_, (path, _))| path.clone()));
        }
        out
    }

    /// Opens (creating if new) the log of `tp`, in the directory that holds
    /// it, else `preferred` (the one the metadata names) when online, else
    /// the least loaded online one; with the high watermark last
    /// checkpointed for it (a follower's starts there). A log in an
    /// offline directory does not open.
    pub fn open_log(
        &self,
        tp: &TopicPartition,
        topic_id: &Uuid,
        preferred: Option<&Path>,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<(PartitionLog, OpenReport, i64), LogError> {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let index = match dirs.iter().position(|d| d.holds(tp, topic_id)) {
            Some(index) => index,
            None => {
                let online = || (0..dirs.len()).filter(|&i| !dirs[i].offline);
                let named = online().find(|&i| Some(dirs[i].path.as_path()) == preferred);
                let index = named
                    .or_else(|| online().min_by_key(|&i| dirs[i].partition_count))
                    .ok_or_else(|| LogError::Io(io::Error::other("every log directory is offline")))?;
                // Never another topic's records under this topic's id
                // (Kafka's InconsistentTopicIdException): that log goes
                // first, as a stray.
                if let Some(found) = dirs[index].holds_another(tp, topic_id) {
                    let dir = dirs[index].path.join(tp.dir_name());
                    return Err(LogError::InconsistentTopicId { dir, found, wanted: *topic_id });
                }
                dirs[index].partition_count += 1;
                dirs[index].found.insert(tp.clone(), Some(*topic_id));
                index
            }
        };
        if dirs[index].offline {
            let path = dirs[index].path.display().to_string();
            return Err(LogError::Io(io::Error::other(format!("log directory {path} is offline"))));
        }
        let dir = &dirs[index];
        let log_dir = dir.path.join(tp.dir_name());
        let log_start = dir.log_start_offsets.get(tp).copied().unwrap_or(0);
        let recovery_point = dir.recovery_points.get(tp).copied().unwrap_or(0);
        let cleaner_offset = dir.cleaner_offsets.get(tp).copied().unwrap_or(0);
        let high_watermark = dir.high_watermarks.get(tp).copied().unwrap_or(0);
        let clean_shutdown = dir.clean_shutdown;
        // Opening may recover (re-read) the whole log: other partitions
        // open beside it (num.recovery.threads.per.data.dir), so not under the lock.
        drop(dirs);
        let (mut log, report) =
            PartitionLog::open(&log_dir, config, log_start, recovery_point, clean_shutdown, now_ms)?;
        log.set_cleaner_checkpoint(cleaner_offset);
        let metadata_path = log_dir.join("partition.metadata");
        if checkpoint::read_partition_metadata(&metadata_path).ok().flatten().as_ref() != Some(topic_id) {
            checkpoint::write_partition_metadata(&metadata_path, topic_id)?;
        }
        // Never past the log end (records lost to an unclean stop) nor
        // before its start.
        let high_watermark = high_watermark.clamp(log.log_start_offset(), log.log_end_offset());
        Ok((log, report, high_watermark))
    }

    /// Forgets a deleted partition's directory and removes it from disk:
    /// renamed first (atomic, so a crash leaves a `-delete` dir the next start
    /// removes), then deleted.
    pub fn delete_partition_dir(&self, log_dir: &Path) -> io::Result<()> {
        let Some(name) = log_dir.file_name().map(|n| n.to_string_lossy().into_owned()) else { return Ok(()) };
        if let Some(tp) = TopicPartition::from_dir_name(&name) {
            // Only the directory holding it: another may hold a log of the
            // same name of another topic id (a re-created topic's).
            let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
            let parent = log_dir.parent();
            for dir in dirs.iter_mut().filter(|d| Some(d.path.as_path()) == parent) {
                if dir.found.remove(&tp).is_some() {
                    dir.partition_count = dir.partition_count.saturating_sub(1);
                }
            }
        }
        remove_log_dir(log_dir)
    }

    /// Creates a future replica of `tp` in log directory `dest` (an online
    /// one), or opens the one found there at start (`existing`): from its
    /// directory's checkpoints after a clean shutdown (it was flushed and
    /// checkpointed with the rest), else recovered whole (after an unclean
    /// stop the checkpoints may be older than the future replica).
    pub fn open_future_log(
        &self,
        tp: &TopicPartition,
        topic_id: &Uuid,
        dest: &Path,
        existing: Option<&Path>,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<(PartitionLog, OpenReport), LogError> {
        if self.is_offline(dest) {
            return Err(LogError::Io(io::Error::other(format!("log directory {} is offline", dest.display()))));
        }
        let (path, (log_start, recovery_point, clean)) = match existing {
            Some(path) => (path.to_path_buf(), self.future_start(dest, tp)),
            None => (dest.join(tp.future_dir_name(&Uuid::random()?.0)), (0, 0, false)),
        };
        let (log, report) = PartitionLog::open(&path, config, log_start, recovery_point, clean, now_ms)?;
        checkpoint::write_partition_metadata(&path.join("partition.metadata"), topic_id)?;
        Ok((log, report))
    }

    /// A future replica's (log start, recovery point, clean shutdown) as
    /// its directory `dest` checkpointed them, if that directory was shut
    /// down cleanly; else nothing trusted.
    fn future_start(&self, dest: &Path, tp: &TopicPartition) -> (i64, i64, bool) {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(dir) = dirs.iter().find(|d| d.path == dest && d.clean_shutdown) else { return (0, 0, false) };
        let offset = |offsets: &BTreeMap<TopicPartition, i64>| offsets.get(tp).copied().unwrap_or(0);
        (offset(&dir.log_start_offsets), offset(&dir.recovery_points), true)
    }

    /// The future replica of `tp` of topic `topic_id` found at start in
    /// an online directory, if any.
    pub fn found_future(&self, tp: &TopicPartition, topic_id: &Uuid) -> Option<PathBuf> {
        let dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        dirs.iter().find_map(|d| d.future_of(tp, topic_id)).cloned()
    }

    /// The future replica of `tp` of topic `topic_id` found at start, if
    /// any (taken: the replica opening it resumes the move).
    pub fn take_found_future(&self, tp: &TopicPartition, topic_id: &Uuid) -> Option<PathBuf> {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let dir = dirs.iter_mut().find(|d| d.future_of(tp, topic_id).is_some())?;
        dir.futures.remove(tp).map(|(path, _)| path)
    }

    /// Makes the future replica of `tp` of topic `topic_id` found at start
    /// the replica (its current one is nowhere: the swap's second rename
    /// never happened, or the current one is in an offline directory and
    /// the metadata names the future's); its log directory now.
    pub fn promote_found_future(&self, tp: &TopicPartition, topic_id: &Uuid) -> io::Result<PathBuf> {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let dir = dirs.iter_mut().find(|d| d.future_of(tp, topic_id).is_some());
        let dir = dir.ok_or_else(|| io::Error::other(format!("no future replica of {} found", tp.dir_name())))?;
        let (future, _) = dir.futures.remove(tp).unwrap_or_default();
        std::fs::rename(&future, dir.path.join(tp.dir_name()))?;
        fsync_dir(&dir.path)?;
        dir.partition_count += 1;
        dir.found.insert(tp.clone(), Some(*topic_id));
        Ok(dir.path.clone())
    }

    /// Swaps a caught-up, flushed future replica in for the current one
    /// (KIP-113): the current directory is renamed away first, then the
    /// future takes its name in its own log directory, so that a stop
    /// between the two leaves only the future, which the next start
    /// promotes. The replica's new directory; on failure, the log
    /// directory that failed (a failed second rename is undone, so that
    /// the current copy stays whole where it was).
    pub fn promote_future(
        &self,
        tp: &TopicPartition,
        current: &Path,
        future: &Path,
    ) -> Result<PathBuf, (PathBuf, io::Error)> {
        let parent = |path: &Path| path.parent().map(Path::to_path_buf).unwrap_or_default();
        let (source, dest) = (parent(current), parent(future));
        let promoted = dest.join(tp.dir_name());
        let doomed = doomed_name(current);
        std::fs::rename(current, &doomed).and_then(|()| fsync_dir(&source)).map_err(|e| (source.clone(), e))?;
        if let Err(error) = std::fs::rename(future, &promoted).and_then(|()| fsync_dir(&dest)) {
            let undone = std::fs::rename(&doomed, current).and_then(|()| fsync_dir(&source));
            return Err(if undone.is_ok() { (dest, error) } else { (source, error) });
        }
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let mut topic_id = None;
        for dir in dirs.iter_mut().filter(|d| d.path == source) {
            if let Some(id) = dir.found.remove(tp) {
                topic_id = id;
                dir.partition_count = dir.partition_count.saturating_sub(1);
            }
        }
        if let Some(dir) = dirs.iter_mut().find(|d| d.path == dest) {
            dir.found.insert(tp.clone(), topic_id);
            dir.partition_count += 1;
        }
        drop(dirs);
        if let Err(error) = std::fs::remove_dir_all(&doomed) {
            // The next start removes it.
            tracing::warn!(dir = %doomed.display(), %error, "could not remove a replaced replica");
        }
        Ok(promoted)
    }

    /// Removes a future replica's directory (a move given up).
    pub fn delete_future_dir(&self, future: &Path) -> io::Result<()> {
        remove_log_dir(future)
    }

    /// Removes `-delete` directories a crash left behind (not in an
    /// offline directory: nothing is written there).
    pub fn remove_leftover_deletions(&self) {
        for path in self.online_log_dirs() {
            let Ok(entries) = std::fs::read_dir(&path) else { continue };
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().ends_with("-delete") {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }

    /// Writes the four offset checkpoints of every online log directory
    /// atomically; the directories where that failed, with why.
    pub fn write_checkpoints(&self, partitions: &[PartitionCheckpoint]) -> Vec<(PathBuf, io::Error)> {
        let mut failed = Vec::new();
        for path in self.online_log_dirs() {
            let mut recovery = BTreeMap::new();
            let mut log_start = BTreeMap::new();
            let mut replication = BTreeMap::new();
            let mut cleaner = BTreeMap::new();
            for p in partitions.iter().filter(|p| p.log_dir == path) {
                recovery.insert(p.topic_partition.clone(), p.recovery_point);
                log_start.insert(p.topic_partition.clone(), p.log_start_offset);
                replication.insert(p.topic_partition.clone(), p.high_watermark);
                if p.cleaner_offset > 0 {
                    cleaner.insert(p.topic_partition.clone(), p.cleaner_offset);
                }
            }
            let written = checkpoint::write_offsets(&path.join(RECOVERY_POINT_CHECKPOINT), &recovery)
                .and_then(|()| checkpoint::write_offsets(&path.join(LOG_START_OFFSET_CHECKPOINT), &log_start))
                .and_then(|()| checkpoint::write_offsets(&path.join(REPLICATION_OFFSET_CHECKPOINT), &replication))
                .and_then(|()| checkpoint::write_offsets(&path.join(CLEANER_OFFSET_CHECKPOINT), &cleaner));
            if let Err(e) = written {
                failed.push((path, e));
            }
        }
        failed
    }

    /// Marks every online directory cleanly shut down (after all logs are
    /// closed); an offline one recovers at the next start, as does one
    /// whose marker cannot be written (the first such error is returned
    /// once the others are marked).
    pub fn mark_clean_shutdown(&self, broker_epoch: i64) -> io::Result<()> {
        let content = format!("{{\"version\":0,\"brokerEpoch\":{broker_epoch}}}");
        let mut first_error = None;
        for path in self.online_log_dirs() {
            let marker = path.join(CLEAN_SHUTDOWN_FILE);
            let written = std::fs::write(&marker, content.as_bytes())
                .and_then(|()| std::fs::File::open(&marker)?.sync_all())
                .and_then(|()| fsync_dir(&path));
            if let Err(error) = written {
                let error = io::Error::new(error.kind(), format!("{}: {error}", path.display()));
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clean_shutdown_marker_carries_the_broker_epoch_to_one_restart() {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        assert_eq!(manager.previous_broker_epoch(), -1, "never shut down cleanly");
        manager.mark_clean_shutdown(42).unwrap();
        let marker = std::fs::read_to_string(dirs[0].join(CLEAN_SHUTDOWN_FILE)).unwrap();
        assert_eq!(marker, r#"{"version":0,"brokerEpoch":42}"#, "Kafka's format");
        let reopened = LogManager::open(&dirs, &[], &[]).unwrap();
        assert_eq!(reopened.previous_broker_epoch(), 42);
        assert_eq!(LogManager::open(&dirs, &[], &[]).unwrap().previous_broker_epoch(), -1, "a crash after that start");
        // One directory without its marker: not clean.
        reopened.mark_clean_shutdown(43).unwrap();
        std::fs::remove_file(dirs[1].join(CLEAN_SHUTDOWN_FILE)).unwrap();
        assert_eq!(LogManager::open(&dirs, &[], &[]).unwrap().previous_broker_epoch(), -1);
        // One directory's marker cannot be written: the other is marked still.
        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        let moved = dirs[0].with_extension("moved");
        std::fs::rename(&dirs[0], &moved).unwrap();
        std::fs::write(&dirs[0], b"not a directory").unwrap();
        assert!(manager.mark_clean_shutdown(44).is_err());
        assert!(dirs[1].join(CLEAN_SHUTDOWN_FILE).exists(), "the other directory is marked");
        std::fs::remove_file(&dirs[0]).unwrap();
        std::fs::rename(&moved, &dirs[0]).unwrap();
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_directory_that_cannot_be_read_at_start_is_offline_and_only_all_of_them_fail_the_open() {
        let dirs: Vec<PathBuf> = (0..3).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let tp = TopicPartition::new(String::from("t"), 0);
        let setup = LogManager::open(&dirs, &[], &[]).unwrap();
        setup.open_log(&tp, &Uuid([7; 16]), Some(&dirs[1]), LogConfig::default(), 0).unwrap();
        drop(setup);
        // A disk that is gone: the directory's path is a file now.
        let moved = dirs[1].with_extension("moved");
        std::fs::rename(&dirs[1], &moved).unwrap();
        std::fs::write(&dirs[1], b"not a directory").unwrap();
        let manager = LogManager::open(&dirs, &[], &[dirs[2].clone()]).unwrap();
        assert_eq!(manager.offline_log_dirs(), vec![dirs[1].clone(), dirs[2].clone()], "unreadable, and named offline");
        assert_eq!(manager.log_dir_of(&tp, &Uuid([7; 16])), None, "nothing is known of an offline directory");
        assert_eq!(manager.previous_broker_epoch(), -1, "not every directory was shut down cleanly");
        let error = LogManager::open(&dirs[1..], &[], &[dirs[2].clone()]).err().expect("every directory offline");
        assert!(error.to_string().contains("every log directory is offline"), "{error}");
        std::fs::remove_file(&dirs[1]).unwrap();
        std::fs::rename(&moved, &dirs[1]).unwrap();
        let back = LogManager::open(&dirs, &[], &[]).unwrap();
        assert_eq!(back.log_dir_of(&tp, &Uuid([7; 16])), Some(dirs[1].clone()), "found again once readable");
        assert!(back.offline_log_dirs().is_empty());
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_new_log_goes_where_the_metadata_names_else_to_the_least_loaded_online_directory() {
        let dirs: Vec<PathBuf> = (0..3).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        let id = Uuid([7; 16]);
        let open = |index: i32, preferred: Option<&Path>| {
            let tp = TopicPartition::new(String::from("t"), index);
            manager.open_log(&tp, &id, preferred, LogConfig::default(), 0).map(|(log, _, _)| log.dir().to_path_buf())
        };
        let dir_of = |log_dir: PathBuf| log_dir.parent().unwrap().to_path_buf();
        assert_eq!(dir_of(open(0, Some(&dirs[2])).unwrap()), dirs[2], "the named directory");
        assert_eq!(dir_of(open(1, None).unwrap()), dirs[0], "the least loaded, first of equals");
        assert_eq!(manager.mark_offline(&dirs[1]), Some(2), "two left online");
        assert_eq!(manager.mark_offline(&dirs[1]), None, "only the first failure takes it offline");
        assert!(manager.is_offline(&dirs[1]));
        assert_eq!(manager.offline_log_dirs(), vec![dirs[1].clone()]);
        assert_eq!(manager.online_log_dirs(), vec![dirs[0].clone(), dirs[2].clone()]);
        assert_eq!(dir_of(open(2, Some(&dirs[1])).unwrap()), dirs[0], "never an offline one, even named");
        assert_eq!(dir_of(open(0, None).unwrap()), dirs[2], "an existing log reopens where it is");
        manager.mark_offline(&dirs[2]);
        assert!(open(0, None).is_err(), "a log in an offline directory does not open");
        // The topic deleted and re-created under its name meanwhile: the
        // new topic's replica goes to an online directory.
        let tp = TopicPartition::new(String::from("t"), 0);
        let recreated = manager.open_log(&tp, &Uuid([8; 16]), None, LogConfig::default(), 0).unwrap();
        assert_eq!(dir_of(recreated.0.dir().to_path_buf()), dirs[0]);
        assert_eq!(manager.log_dir_of(&tp, &Uuid([8; 16])), Some(dirs[0].clone()));
        // The old topic's copy removed (a stray at the next start): the new
        // topic's stays known.
        manager.delete_partition_dir(&dirs[2].join("t-0")).unwrap();
        assert_eq!(manager.log_dir_of(&tp, &Uuid([8; 16])), Some(dirs[0].clone()), "only the stray forgotten");
        assert_eq!(manager.mark_offline(&dirs[0]), Some(0), "none left");
        assert!(open(3, None).is_err(), "no online directory for a new one");
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}

#[cfg(test)]
mod future_tests {
    use super::*;

    /// A topic deleted and re-created under its name while the broker was
    /// down: a future replica of the old topic is not the new topic's, and
    /// the old topic's log is not reopened as the new one's.
    #[test]
    fn another_topics_logs_of_the_same_name_are_never_taken_for_this_topics() {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let tp = TopicPartition::new(String::from("t"), 0);
        let (old, new) = (Uuid([1; 16]), Uuid([2; 16]));
        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        manager.open_log(&tp, &old, Some(&dirs[0]), LogConfig::default(), 0).unwrap();
        let (future, _) = manager.open_future_log(&tp, &old, &dirs[1], None, LogConfig::default(), 0).unwrap();
        let future_dir = future.dir().to_path_buf();
        drop((future, manager));

        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        assert_eq!(manager.found_future(&tp, &new), None);
        assert_eq!(manager.take_found_future(&tp, &new), None);
        assert!(manager.promote_found_future(&tp, &new).is_err());
        assert!(future_dir.exists(), "not promoted");
        assert_eq!(manager.found_future(&tp, &old), Some(future_dir.clone()), "the old topic's still");
        let refused = manager.open_log(&tp, &new, Some(&dirs[0]), LogConfig::default(), 0).err().expect("refused");
        assert!(
            matches!(refused, LogError::InconsistentTopicId { found, wanted, .. } if found == old && wanted == new),
            "{refused}"
        );
        let metadata = dirs[0].join("t-0").join("partition.metadata");
        assert_eq!(checkpoint::read_partition_metadata(&metadata).unwrap(), Some(old), "left as it was");
        // Removed as a stray, then created anew.
        manager.delete_partition_dir(&dirs[0].join("t-0")).unwrap();
        let (log, _, _) = manager.open_log(&tp, &new, Some(&dirs[0]), LogConfig::default(), 0).unwrap();
        assert_eq!((log.dir(), log.log_end_offset()), (dirs[0].join("t-0").as_path(), 0));
        assert_eq!(checkpoint::read_partition_metadata(&metadata).unwrap(), Some(new));
        drop(log);

        // A log the manager does not know of (left by a removal that
        // failed) is refused by its partition.metadata.
        let manager = LogManager::open(&dirs[..1], &[], &[]).unwrap();
        let other = TopicPartition::new(String::from("t"), 1);
        std::fs::rename(dirs[0].join("t-0"), dirs[0].join("t-1")).unwrap();
        let refused = manager.open_log(&other, &old, None, LogConfig::default(), 0).err().expect("refused");
        assert!(matches!(refused, LogError::InconsistentTopicId { found, .. } if found == new), "{refused}");
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_future_replica_found_at_start_resumes_or_is_promoted_when_asked() {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let (tp, id) = (TopicPartition::new(String::from("a.b-c"), 3), Uuid([7; 16]));
        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        manager.open_log(&tp, &id, Some(&dirs[0]), LogConfig::default(), 0).unwrap();
        let (future, _) = manager.open_future_log(&tp, &id, &dirs[1], None, LogConfig::default(), 0).unwrap();
        let future_dir = future.dir().to_path_buf();
        let name = future_dir.file_name().unwrap().to_str().unwrap();
        assert_eq!(TopicPartition::from_future_dir_name(name), Some(tp.clone()), "{name}");
        assert_eq!(TopicPartition::from_dir_name(name), None, "never taken for a current replica");
        assert_eq!(future.topic_partition(), &tp);
        drop((future, manager));

        // Both found: the move resumes once the replica opens.
        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        assert_eq!(manager.log_dir_of(&tp, &id), Some(dirs[0].clone()));
        assert_eq!(manager.take_found_future(&tp, &id), Some(future_dir.clone()));
        assert_eq!(manager.take_found_future(&tp, &id), None, "taken once");
        drop(manager);

        // A stop after the swap renamed the current one away: the future
        // one is found alone, and is promoted when asked.
        std::fs::rename(dirs[0].join(tp.dir_name()), dirs[0].join("a.b-c-3.1-delete")).unwrap();
        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        assert_eq!(manager.log_dir_of(&tp, &id), None);
        assert_eq!(manager.found_future(&tp, &id), Some(future_dir.clone()));
        assert_eq!(manager.promote_found_future(&tp, &id).unwrap(), dirs[1]);
        assert_eq!(manager.log_dir_of(&tp, &id), Some(dirs[1].clone()), "promoted");
        assert!(!future_dir.exists() && dirs[1].join(tp.dir_name()).exists());
        assert_eq!(manager.found_future(&tp, &id), None);
        manager.remove_leftover_deletions();
        assert!(!dirs[0].join("a.b-c-3.1-delete").exists());
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn promoting_a_future_replica_renames_the_current_one_away_first() {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let (tp, id) = (TopicPartition::new(String::from("t"), 0), Uuid([9; 16]));
        let manager = LogManager::open(&dirs, &[], &[]).unwrap();
        let (current, _, _) = manager.open_log(&tp, &id, Some(&dirs[0]), LogConfig::default(), 0).unwrap();
        let (future, _) = manager.open_future_log(&tp, &id, &dirs[1], None, LogConfig::default(), 0).unwrap();
        // The second rename fails (its target is taken): undone, the
        // destination named as the directory that failed.
        std::fs::create_dir(dirs[1].join("t-0")).unwrap();
        std::fs::write(dirs[1].join("t-0").join("x"), b"x").unwrap();
        let (failed, _) = manager.promote_future(&tp, current.dir(), future.dir()).unwrap_err();
        assert_eq!(failed, dirs[1]);
        assert!(current.dir().exists() && future.dir().exists(), "both copies where they were");
        std::fs::remove_dir_all(dirs[1].join("t-0")).unwrap();
        let promoted = manager.promote_future(&tp, current.dir(), future.dir()).unwrap();
        assert_eq!(promoted, dirs[1].join("t-0"));
        assert_eq!(manager.log_dir_of(&tp, &id), Some(dirs[1].clone()));
        let left = |dir: &Path| std::fs::read_dir(dir).unwrap().flatten().filter(|e| e.path().is_dir()).count();
        assert_eq!((left(&dirs[0]), left(&dirs[1])), (0, 1), "the old replica removed, the future one renamed");
        assert_eq!(
            checkpoint::read_partition_metadata(&promoted.join("partition.metadata")).unwrap(),
            Some(id),
            "the topic id kept"
        );
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}
