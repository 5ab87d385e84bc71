//! Crash-safe file operations: a file is replaced by writing a temporary
//! sibling, syncing it, renaming it over the target and syncing the directory,
//! so a crash leaves either the old file or the new one, never a mix.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

/// Syncs a directory, making creates, renames and deletes in it durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Atomically replaces `path` with `contents`.
pub fn atomic_write(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace(path, contents, true)
}

/// Replaces `path` with `contents` through a temporary sibling, without
/// waiting for the disk: a crash may leave the new file empty or torn, so
/// only files whose reader checks them (a CRC) and can do without them may
/// be written so; the caller syncs them (and the directory) later.
pub fn replace_unsynced(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace(path, contents, false)
}

fn replace(path: &Path, contents: &[u8], sync: bool) -> io::Result<()> {
    let mut temp_name = path.file_name().unwrap_or_default().to_os_string();
    temp_name.push(".tmp");
    let temp = path.with_file_name(temp_name);
    {
        let mut file = File::create(&temp)?;
        file.write_all(contents)?;
        if sync {
            file.sync_all()?;
        }
    }
    fs::rename(&temp, path)?;
    if let (Some(dir), true) = (path.parent(), sync) {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// fsyncs a roll hands off, so the append that rolled does not wait for a
/// whole segment to reach the disk (Kafka schedules the same flush on its
/// background scheduler). When every file is synced, `flushed_to` is raised
/// to `up_to`: the log's recovery point may then move there.
pub(crate) struct FlushJob {
    pub files: Vec<Arc<File>>,
    /// Files without an open descriptor (memory-mapped indexes); one that is
    /// gone (deleted or renamed since) needs no sync.
    pub paths: Vec<PathBuf>,
    pub flushed_to: Arc<AtomicI64>,
    pub up_to: i64,
}

impl FlushJob {
    fn run(self) {
        let synced = self.files.iter().try_for_each(|file| file.sync_data()).and_then(|()| {
            self.paths.iter().try_for_each(|path| match File::open(path) {
                Ok(file) => file.sync_all(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            })
        });
        match synced {
            Ok(()) => {
                self.flushed_to.fetch_max(self.up_to, Ordering::AcqRel);
            }
            // The recovery point stays where it was: a restart re-reads more.
            Err(e) => tracing::error!(error = %e, up_to = self.up_to, "background flush of a rolled segment failed"),
        }
    }
}

/// Queues `job` on the process's one flusher thread (started on first use;
/// the job runs inline if the thread cannot be started).
pub(crate) fn flush_in_background(job: FlushJob) {
    static QUEUE: OnceLock<Option<Mutex<mpsc::Sender<FlushJob>>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<FlushJob>();
        std::thread::Builder::new()
            .name("krabka-log-flush".into())
            .spawn(move || receiver.into_iter().for_each(FlushJob::run))
            .ok()
            .map(|_| Mutex::new(sender))
    });
    let job = match queue {
        Some(sender) => match sender.lock().unwrap_or_else(|e| e.into_inner()).send(job) {
            Ok(()) => return,
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    job.run();
}
