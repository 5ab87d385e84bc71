//! A log directory that fails a write stops the broker, as Kafka's does.
//!
//! A disk that is full (ENOSPC) or failing (EIO) leaves a partition's log
//! where no later append can be trusted to land. Kafka marks the directory
//! offline and, when it was the broker's only one (or holds the metadata
//! log), halts the process: "Shutdown broker because all log dirs in ...
//! have failed". Halting is what moves leadership: the broker stops
//! heartbeating, the controller fences it and elects leaders among the
//! other in-sync replicas, while a broker that stayed up would keep leading
//! partitions it cannot write. krabka halts on the first failed write in
//! any of its directories (with several, Kafka keeps serving the others;
//! see docs/operations.md).

use std::path::Path;

use krabka_log::LogError;

/// Passes `result` through, unless it failed on the disk: then the broker
/// halts (exit status 1) after saying why.
pub fn check<T>(result: Result<T, LogError>, log_dir: &Path, topic: &str, partition: i32) -> Result<T, LogError> {
    if let Err(LogError::Io(error)) = &result {
        tracing::error!(
            dir = %log_dir.display(), %topic, partition, %error,
            "shutting down the broker: a write to its log directory failed (Kafka halts when all its log dirs have failed)"
        );
        // No clean shutdown: it would flush and checkpoint to the failed disk.
        std::process::exit(1);
    }
    result
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
