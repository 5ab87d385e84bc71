//! Replication throttles (KIP-73), as Kafka's ReplicationQuotaManager
//! keeps them: a byte rate measured over sampled windows, and which
//! partitions a broker throttles.
//!
//! `kafka-reassign-partitions --throttle` sets `leader.replication.throttled.rate`
//! and `follower.replication.throttled.rate` on the brokers involved, and
//! lists the replicas to throttle in the topic's
//! `leader.replication.throttled.replicas` (the replicas that serve the
//! move) and `follower.replication.throttled.replicas` (the replicas that
//! take it). Only replicas outside the ISR are ever held back: a leader
//! stops sending a throttled partition to an out-of-sync follower while
//! its rate is over the bound, a follower stops asking for it.

use std::collections::VecDeque;

/// A byte rate over `windows` samples of `window_ms` each, measured as
/// Kafka's `Rate` over a `SampledStat`: the bytes of the samples kept,
/// over the time they span, counted as at least `windows - 1` full
/// windows (so that a first burst is measured against that whole span).
#[derive(Clone, Debug)]
pub struct ByteRate {
    window_ms: i64,
    windows: usize,
    /// (window start, bytes), oldest first.
    samples: VecDeque<(i64, u64)>,
}

impl ByteRate {
    pub fn new(windows: usize, window_ms: i64) -> Self {
        debug_assert!(windows >= 1 && window_ms >= 1);
        ByteRate { window_ms: window_ms.max(1), windows: windows.max(1), samples: VecDeque::new() }
    }

    /// Adds `bytes` at `now_ms`.
    pub fn record(&mut self, bytes: u64, now_ms: i64) {
        self.expire(now_ms);
        match self.samples.back_mut() {
            Some((start, total)) if now_ms - *start < self.window_ms => *total += bytes,
            _ => {
                self.samples.push_back((now_ms, bytes));
                if self.samples.len() > self.windows {
                    self.samples.pop_front();
                }
            }
        }
    }

    /// Bytes per second at `now_ms`.
    pub fn per_second(&mut self, now_ms: i64) -> f64 {
        self.expire(now_ms);
        let Some(&(oldest, _)) = self.samples.front() else { return 0.0 };
        let total: u64 = self.samples.iter().map(|(_, bytes)| bytes).sum();
        let span_ms = (now_ms - oldest).max(self.window_ms * (self.windows as i64 - 1)).max(1);
        total as f64 * 1000.0 / span_ms as f64
    }

    /// Takes `bytes` back from the newest sample (a throttled fetch whose
    /// records are not sent, as Kafka unrecords them).
    pub fn unrecord(&mut self, bytes: u64, now_ms: i64) {
        self.expire(now_ms);
        if let Some((_, total)) = self.samples.back_mut() {
            *total = total.saturating_sub(bytes);
        }
    }

    /// The rate and the window it is measured over, as Kafka's
    /// `Rate.measure` and `Rate.windowSize`: the time since the oldest
    /// sample kept, counted as at least `windows - 1` full windows.
    pub fn measure(&mut self, now_ms: i64) -> (f64, i64) {
        self.expire(now_ms);
        let Some(&(oldest, _)) = self.samples.front() else { return (0.0, self.window_ms) };
        let total: u64 = self.samples.iter().map(|(_, bytes)| bytes).sum();
        let mut window = now_ms - oldest;
        let full = window / self.window_ms;
        let min_full = self.windows as i64 - 1;
        if full < min_full {
            window += (min_full - full) * self.window_ms;
        }
        let window = window.max(1);
        (total as f64 * 1000.0 / window as f64, window)
    }

    /// Drops the samples older than the windows kept.
    fn expire(&mut self, now_ms: i64) {
        let horizon = now_ms - self.window_ms * self.windows as i64;
        while self.samples.front().is_some_and(|&(start, _)| start <= horizon) {
            self.samples.pop_front();
        }
    }
}

/// One side's throttle on a broker: its bound (bytes per second; None is
/// Kafka's default, Long.MAX_VALUE: no throttle) and the rate so far.
#[derive(Clone, Debug)]
pub struct ReplicationQuota {
    bound: Option<u64>,
    rate: ByteRate,
}

impl ReplicationQuota {
    pub fn new(windows: usize, window_ms: i64) -> Self {
        ReplicationQuota { bound: None, rate: ByteRate::new(windows, window_ms) }
    }

    /// A new bound (the rate measured so far is kept, as Kafka's).
    pub fn set_bound(&mut self, bound: Option<u64>) {
        self.bound = bound;
    }

    pub fn bound(&self) -> Option<u64> {
        self.bound
    }

    /// Bytes of throttled partitions sent (leader) or fetched (follower).
    pub fn record(&mut self, bytes: u64, now_ms: i64) {
        if self.bound.is_some() {
            self.rate.record(bytes, now_ms);
        }
    }

    /// Whether the rate is over the bound: throttled partitions wait.
    pub fn is_exceeded(&mut self, now_ms: i64) -> bool {
        match self.bound {
            Some(bound) => self.rate.per_second(now_ms) > bound as f64,
            None => false,
        }
    }
}

/// Which partitions of a topic a broker throttles, from one of the
/// topic's `*.replication.throttled.replicas` lists (`*`, or
/// `partition:broker` entries, validated when set).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Throttled {
    #[default]
    None,
    All,
    Partitions(Vec<i32>),
}

impl Throttled {
    /// The partitions `list` throttles on broker `broker_id`.
    pub fn parse(list: Option<&str>, broker_id: i32) -> Self {
        let Some(list) = list.map(str::trim).filter(|l| !l.is_empty()) else { return Throttled::None };
        if list == "*" {
            return Throttled::All;
        }
        let mut partitions: Vec<i32> = list
            .split(',')
            .filter_map(|entry| {
                let (partition, broker) = entry.trim().split_once(':')?;
                let broker: i32 = broker.trim().parse().ok()?;
                (broker == broker_id).then(|| partition.trim().parse().ok()).flatten()
            })
            .collect();
        partitions.sort_unstable();
        partitions.dedup();
        if partitions.is_empty() {
            Throttled::None
        } else {
            Throttled::Partitions(partitions)
        }
    }

    pub fn contains(&self, partition: i32) -> bool {
        match self {
            Throttled::None => false,
            Throttled::All => true,
            Throttled::Partitions(partitions) => partitions.binary_search(&partition).is_ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_burst_counts_against_the_whole_span_as_in_kafka() {
        let mut rate = ByteRate::new(11, 1_000);
        rate.record(10_000, 0);
        // Measured over 10 windows, not the 1 ms since the burst.
        assert_eq!(rate.per_second(1), 1_000.0);
        rate.record(10_000, 5_000);
        assert_eq!(rate.per_second(5_000), 2_000.0);
        // 20 s on, both samples are gone.
        assert_eq!(rate.per_second(20_000), 0.0);
        // Past the first 10 s, the span is the samples' own.
        let mut steady = ByteRate::new(11, 1_000);
        for second in 0..20 {
            steady.record(500, second * 1_000);
        }
        let measured = steady.per_second(19_500);
        assert!((450.0..=560.0).contains(&measured), "{measured}");
    }

    #[test]
    fn a_quota_holds_throttled_partitions_back_only_over_its_bound() {
        let mut quota = ReplicationQuota::new(11, 1_000);
        quota.record(1 << 30, 0);
        assert!(!quota.is_exceeded(0), "no bound: Kafka's Long.MAX_VALUE");
        quota.set_bound(Some(1_000));
        quota.record(9_000, 0);
        assert!(!quota.is_exceeded(100), "900 B/s over the 10 s span");
        quota.record(2_000, 200);
        assert!(quota.is_exceeded(300));
        // The rate falls as the windows pass.
        assert!(!quota.is_exceeded(12_000));
        quota.set_bound(None);
        assert!(!quota.is_exceeded(12_000));
    }

    #[test]
    fn throttled_lists_name_partitions_per_broker() {
        assert_eq!(Throttled::parse(None, 1), Throttled::None);
        assert_eq!(Throttled::parse(Some(""), 1), Throttled::None);
        assert_eq!(Throttled::parse(Some("*"), 1), Throttled::All);
        let listed = Throttled::parse(Some("0:4, 1:5,2:4"), 4);
        assert_eq!(listed, Throttled::Partitions(vec![0, 2]));
        assert!(listed.contains(2) && !listed.contains(1));
        assert_eq!(Throttled::parse(Some("0:4"), 6), Throttled::None);
    }
}
