//! The wall clock, read in one place. The domain crates (log, metadata,
//! raft) never read it: they take the time as an argument, so tests can
//! choose it.

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
