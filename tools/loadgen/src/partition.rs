//! One partition's idempotent-producer bookkeeping, apart from any socket.
//!
//! Sequences are sent in order, at most [`MAX_IN_FLIGHT`] batches at once
//! (the broker remembers the last five batches per producer, so a resend of
//! any of them is recognised as a duplicate). Acknowledgements are a prefix:
//! the broker appends sequence s only after s - 1, so an ack up to s acks
//! everything before it. After a retriable error the partition stops sending,
//! lets the batches in flight answer (they fail with OUT_OF_ORDER_SEQUENCE
//! behind the failed one, or succeed), then rewinds to the first unacked
//! sequence and resends from there: the same bytes, the same sequences, so
//! nothing is written twice.

use std::time::Duration;

use tokio::time::Instant;

/// Kafka's limit for idempotence: max.in.flight.requests.per.connection <= 5.
pub const MAX_IN_FLIGHT: u32 = 5;
/// Consecutive failed rounds without progress before the partition gives up.
const MAX_STALLS: u32 = 50;
const BACKOFF_STEP: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct PartitionState {
    pub partition: i32,
    batch_records: u32,
    /// Records the run means to send, or None when it is timed.
    planned: Option<u64>,
    /// No sequence at or past this is sent (a batch boundary or `planned`).
    limit: u64,
    next_seq: u64,
    /// One past the highest sequence ever sent.
    sent_high: u64,
    acked: u64,
    in_flight: u32,
    recovering: bool,
    stalls: u32,
    retry_at: Option<Instant>,
    failure: Option<String>,
}

impl PartitionState {
    pub fn new(partition: i32, batch_records: u32, planned: Option<u64>) -> Self {
        // Kafka's sequences are i32s that wrap; a run stops before they do.
        let b = u64::from(batch_records);
        let wrap_guard = (i32::MAX as u64 / b) * b;
        let limit = planned.unwrap_or(wrap_guard).min(wrap_guard);
        PartitionState {
            partition,
            batch_records,
            planned,
            limit,
            next_seq: 0,
            sent_high: 0,
            acked: 0,
            in_flight: 0,
            recovering: false,
            stalls: 0,
            retry_at: None,
            failure: None,
        }
    }

    /// The next batch that may go now: its first sequence and record count.
    pub fn next_batch(&self, now: Instant) -> Option<(u64, u32)> {
        let waiting = self.retry_at.is_some_and(|at| at > now);
        if self.failure.is_some() || self.recovering || waiting || self.in_flight >= MAX_IN_FLIGHT {
            return None;
        }
        let left = self.limit.checked_sub(self.next_seq).filter(|&left| left > 0)?;
        Some((self.next_seq, left.min(u64::from(self.batch_records)) as u32))
    }

    pub fn on_sent(&mut self, seq: u64, count: u32) {
        self.next_seq = seq + u64::from(count);
        self.sent_high = self.sent_high.max(self.next_seq);
        self.in_flight += 1;
        self.retry_at = None;
    }

    /// The batch [seq, seq + count) is in the log (or was already: a duplicate).
    pub fn on_acked(&mut self, seq: u64, count: u32, now: Instant) {
        let end = seq + u64::from(count);
        if end > self.acked {
            self.acked = end;
            self.stalls = 0;
        }
        self.answered(now);
    }

    /// The batch failed in a way a resend can fix, or its fate is unknown
    /// (connection lost): resend from the first unacked sequence.
    pub fn on_retriable(&mut self, now: Instant) {
        self.recovering = true;
        self.answered(now);
    }

    /// The batch failed for good: the partition sends nothing more.
    pub fn on_fatal(&mut self, reason: String, now: Instant) {
        self.failure.get_or_insert(reason);
        self.answered(now);
    }

    fn answered(&mut self, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if !self.recovering || self.in_flight > 0 {
            return;
        }
        self.recovering = false;
        self.next_seq = self.acked;
        self.stalls += 1;
        if self.stalls > MAX_STALLS {
            self.failure.get_or_insert(format!("no progress after {MAX_STALLS} retries"));
        }
        self.retry_at = Some(now + (BACKOFF_STEP * self.stalls).min(MAX_BACKOFF));
    }

    /// No new sequences from now on; what was sent is still seen through.
    pub fn stop(&mut self) {
        self.limit = self.limit.min(self.sent_high);
    }

    /// Nothing is in flight and nothing more will be sent.
    pub fn is_finished(&self) -> bool {
        self.in_flight == 0 && (self.failure.is_some() || self.acked >= self.limit)
    }

    /// Batches sent and not yet answered.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Records meant to be sent but not acknowledged: the planned ones of a
    /// bounded run (never sent counts too, as in the Java workload), the sent
    /// ones of a timed run.
    pub fn unacked(&self) -> u64 {
        self.planned.unwrap_or(self.sent_high).saturating_sub(self.acked)
    }

    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(state: &mut PartitionState, now: Instant) -> (u64, u32) {
        let batch = state.next_batch(now).expect("a batch may go");
        state.on_sent(batch.0, batch.1);
        batch
    }

    #[test]
    fn batches_follow_each_other_up_to_five_in_flight_and_the_plan() {
        let now = Instant::now();
        let mut state = PartitionState::new(0, 10, Some(55));
        let sent: Vec<_> = (0..5).map(|_| send(&mut state, now)).collect();
        assert_eq!(sent, [(0, 10), (10, 10), (20, 10), (30, 10), (40, 10)]);
        assert_eq!(state.next_batch(now), None, "five in flight");
        state.on_acked(0, 10, now);
        assert_eq!(send(&mut state, now), (50, 5), "the partial last batch");
        assert_eq!(state.next_batch(now), None, "plan reached");
        for seq in [10, 20, 30, 40, 50] {
            state.on_acked(seq, if seq == 50 { 5 } else { 10 }, now);
        }
        assert!(state.is_finished());
        assert_eq!((state.acked(), state.unacked()), (55, 0));
    }

    #[test]
    fn a_retriable_error_rewinds_to_the_first_unacked_sequence_once_in_flight_drains() {
        let now = Instant::now();
        let mut state = PartitionState::new(0, 10, None);
        for _ in 0..3 {
            send(&mut state, now);
        }
        state.on_acked(0, 10, now);
        state.on_retriable(now); // 10..20: NOT_LEADER_OR_FOLLOWER
        assert_eq!(state.next_batch(now), None, "20..30 still in flight");
        state.on_retriable(now); // 20..30: OUT_OF_ORDER_SEQUENCE_NUMBER behind it
        assert_eq!(state.next_batch(now), None, "backing off");
        let later = state.retry_at().unwrap();
        assert_eq!(send(&mut state, later), (10, 10));
        state.on_acked(10, 10, later);
        assert_eq!(send(&mut state, later), (20, 10));
    }

    #[test]
    fn stop_sees_sent_batches_through_and_counts_unsent_planned_records() {
        let now = Instant::now();
        let mut state = PartitionState::new(3, 10, Some(100));
        send(&mut state, now);
        send(&mut state, now);
        state.stop();
        state.on_acked(0, 10, now);
        state.on_retriable(now);
        let later = state.retry_at().unwrap();
        assert_eq!(send(&mut state, later), (10, 10), "the failed batch is resent after stop");
        assert_eq!(state.next_batch(later), None);
        state.on_acked(10, 10, later);
        assert!(state.is_finished());
        assert_eq!(state.unacked(), 80, "never sent, as the Java workload counts them");
    }

    #[test]
    fn endless_retries_give_up() {
        let mut now = Instant::now();
        let mut state = PartitionState::new(0, 1, None);
        while state.failure().is_none() {
            send(&mut state, now);
            state.on_retriable(now);
            now = state.retry_at().unwrap();
        }
        assert!(state.is_finished());
        assert_eq!(state.unacked(), 1);
    }
}
