//! A log directory that fails a write goes offline, as in Kafka (KIP-112,
//! KIP-858): the broker stops serving the replicas in it and keeps serving
//! those in its other directories.
//!
//! A disk that is full (ENOSPC) or failing (EIO) leaves a partition's log
//! where no later append can be trusted to land. The partition whose write
//! failed stops at once; the replica manager then takes every other
//! partition of that directory offline (`ReplicaManager::take_offline`) and
//! the lifecycle reports the directory in its next heartbeat, sent at once,
//! so the controller moves leadership and ISR membership away from those
//! replicas only. When the directory holds the metadata log, or no other
//! directory is left online, the broker halts instead, as Kafka's does
//! ("Shutdown broker because all log dirs in ... have failed"): halting is
//! what moves leadership then, the controller fencing it when its session
//! expires.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use krabka_log::{LogError, LogManager};
use krabka_protocol::Uuid;
use tokio::sync::Notify;

/// The broker's log directories, their ids and which have failed (kept
/// by the log manager, which no longer opens or writes in those).
pub struct LogDirectories {
    /// Each log directory with its `directory.id`, in `log.dirs` order
    /// (not one whose `meta.properties` could not be read at start).
    dirs: Vec<(PathBuf, Uuid)>,
    /// The directory of the metadata log: its failure halts the broker.
    metadata_dir: PathBuf,
    log_manager: Arc<LogManager>,
    /// Failed directories the replica manager has yet to take offline.
    newly_failed: Mutex<Vec<PathBuf>>,
    failed: Notify,
    /// Signalled once a failed directory's partitions are offline: the
    /// lifecycle reports it in a heartbeat right away.
    taken_offline: Notify,
}

impl LogDirectories {
    pub fn new(dirs: Vec<(PathBuf, Uuid)>, metadata_dir: PathBuf, log_manager: Arc<LogManager>) -> Self {
        LogDirectories {
            dirs,
            metadata_dir,
            log_manager,
            newly_failed: Mutex::new(Vec::new()),
            failed: Notify::new(),
            taken_offline: Notify::new(),
        }
    }

    /// The `directory.id` of log directory `dir`.
    pub fn id_of(&self, dir: &Path) -> Option<Uuid> {
        self.dirs.iter().find(|(path, _)| path == dir).map(|(_, id)| *id)
    }

    /// The log directory whose `directory.id` is `id`.
    pub fn path_of(&self, id: Uuid) -> Option<&Path> {
        self.dirs.iter().find(|(_, d)| *d == id).map(|(path, _)| path.as_path())
    }

    /// The ids of the online directories, sorted (the registration's
    /// `LogDirs`: as Kafka's, a directory offline since the start is not
    /// registered, so the controller counts the replicas it holds offline
    /// and never elects them).
    pub fn ids(&self) -> Vec<Uuid> {
        let online = self.dirs.iter().filter(|(path, _)| !self.log_manager.is_offline(path));
        let mut ids: Vec<Uuid> = online.map(|(_, id)| *id).collect();
        ids.sort_by_key(|id| id.0);
        ids
    }

    /// The ids of the directories that failed (a heartbeat's `OfflineLogDirs`).
    pub fn offline_ids(&self) -> Vec<Uuid> {
        self.log_manager.offline_log_dirs().iter().filter_map(|dir| self.id_of(dir)).collect()
    }

    /// How many directories failed.
    pub fn offline_count(&self) -> usize {
        self.log_manager.offline_log_dirs().len()
    }

    pub fn is_offline(&self, dir: &Path) -> bool {
        self.log_manager.is_offline(dir)
    }

    /// Passes `result` through; when it failed on the disk, `log_dir` goes
    /// offline ([`LogDirectories::failed`]).
    pub fn check<T>(
        &self,
        result: Result<T, LogError>,
        log_dir: &Path,
        topic: &str,
        partition: i32,
    ) -> Result<T, LogError> {
        if let Err(LogError::Io(error)) = &result {
            self.failed(log_dir, &format!("writing {topic}-{partition}"), error);
        }
        result
    }

    /// A write to `log_dir` (`what`) failed with `error`: the directory
    /// goes offline (its partitions are stopped next), or the broker halts
    /// (exit status 1) when it cannot go offline alone.
    pub fn failed(&self, log_dir: &Path, what: &str, error: &dyn std::fmt::Display) {
        let Some(online) = self.log_manager.mark_offline(log_dir) else { return };
        if online == 0 || log_dir == self.metadata_dir {
            tracing::error!(
                dir = %log_dir.display(), %what, %error,
                "shutting down the broker: a write to its log directory failed (Kafka halts when all its log dirs have failed, or the metadata log's)"
            );
            // No clean shutdown: it would flush and checkpoint to the failed disk.
            std::process::exit(1);
        }
        tracing::error!(
            dir = %log_dir.display(), %what, %error,
            "a write to a log directory failed: it goes offline, the other directories keep serving"
        );
        self.newly_failed.lock().unwrap_or_else(|e| e.into_inner()).push(log_dir.to_path_buf());
        self.failed.notify_one();
    }

    /// Waits for directories that failed since the last call and takes them.
    pub async fn next_failed(&self) -> Vec<PathBuf> {
        loop {
            let taken = std::mem::take(&mut *self.newly_failed.lock().unwrap_or_else(|e| e.into_inner()));
            if !taken.is_empty() {
                return taken;
            }
            self.failed.notified().await;
        }
    }

    /// The failed directories' partitions are offline now.
    pub fn taken_offline(&self) {
        self.taken_offline.notify_one();
    }

    /// Resolves once a failed directory was taken offline since the last call.
    pub async fn wait_taken_offline(&self) {
        self.taken_offline.notified().await
    }
}

/// A write through a memory-mapped index (the offset and time indexes are
/// preallocated sparse files) to a disk with no room left, or a failing
/// one, raises SIGBUS instead of returning an error, which would kill the
/// broker without a word. It halts as for any failed write, saying why
/// first (Kafka's JVM turns the same fault into an InternalError that
/// takes the log directory offline).
pub fn halt_on_sigbus() {
    extern "C" fn on_sigbus(_: libc::c_int) {
        // Only async-signal-safe calls here: write(2) and _exit(2).
        const MESSAGE: &[u8] = b"ERROR shutting down the broker: SIGBUS, a write through a memory-mapped index \
failed (a full or failing log directory; Kafka halts when all its log dirs have failed)\n";
        unsafe {
            libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
            libc::_exit(1);
        }
    }
    // SAFETY: installs a handler that only calls async-signal-safe functions.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        let installed = libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        debug_assert_eq!(installed, 0, "sigaction(SIGBUS)");
    }
}
