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
