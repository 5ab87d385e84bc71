//! On-demand CPU profiles in pprof's protobuf format, the format `go tool pprof` reads.
//!
//! The profiler samples the whole process through SIGPROF and a process-wide interval timer,
//! so there can be only one profile at a time per process, whichever server asked for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pprof::protos::Message as _;

/// Libraries whose frames are left out of samples: unwinding through them from a signal
/// handler is unreliable and can crash.
const BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];

/// Sampling frequency in Hz; not a round 100 so sampling does not beat against periodic work.
const FREQUENCY: i32 = 99;

/// Set while a profile is being taken by this module.
static PROFILING: AtomicBool = AtomicBool::new(false);

#[derive(Debug, thiserror::Error)]
pub(crate) enum ProfileError {
    #[error("a CPU profile is already being taken")]
    Busy,
    #[error("CPU profile failed: {0}")]
    Failed(String),
}

/// Samples the process's CPU for `duration` and returns the profile, protobuf-encoded and not
/// gzipped. Waiting happens on the tokio timer, so no runtime thread is held meanwhile; the
/// symbolisation at the end, which can take a while, runs on the blocking pool.
pub(crate) async fn cpu_profile(duration: Duration) -> Result<Vec<u8>, ProfileError> {
    let slot = Slot::acquire().ok_or(ProfileError::Busy)?;
    // Building the guard walks the loaded libraries for the blocklist and captures a first
    // backtrace (which loads debug info): blocking work.
    let guard = tokio::task::spawn_blocking(|| {
        pprof::ProfilerGuardBuilder::default().frequency(FREQUENCY).blocklist(&BLOCKLIST).build()
    })
    .await
    .map_err(|err| ProfileError::Failed(err.to_string()))?
    .map_err(|err| match err {
        // Someone else in this process (not through this module) is profiling.
        pprof::Error::Running => ProfileError::Busy,
        other => ProfileError::Failed(other.to_string()),
    })?;

    tokio::time::sleep(duration).await;

    // If this future is dropped while the closure runs (server shutdown), the closure still
    // finishes and releases the slot only once the profiler has really stopped.
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let report = guard.report().build().map_err(|err| ProfileError::Failed(err.to_string()))?;
        // Stop sampling before the encoding work below.
        drop(guard);
        let profile = report.pprof().map_err(|err| ProfileError::Failed(err.to_string()))?;
        Ok(profile.encode_to_vec())
    })
    .await
    .map_err(|err| ProfileError::Failed(err.to_string()))?
}

/// Ownership of [`PROFILING`], released on drop, including when the request is abandoned.
struct Slot;

impl Slot {
    fn acquire() -> Option<Slot> {
        PROFILING.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        PROFILING.store(false, Ordering::Release);
    }
}

/// Whether a profile is being taken; lets tests wait for one to have started.
#[cfg(test)]
pub(crate) fn is_profiling() -> bool {
    PROFILING.load(Ordering::Acquire)
}
