//! The wall clock, read in one place. The domain crates (log, metadata,
//! raft) never read it: they take the time as an argument, so tests can
//! choose it.

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Now, as the coordinators take it: the wall clock for what they record,
/// and a monotonic clock (ms since this process first asked) for sessions
/// and deadlines, which must not jump with the wall clock.
pub fn coordinator_time() -> krabka_coordinator::Time {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    krabka_coordinator::Time::new(now_ms(), start.elapsed().as_millis() as i64)
}
