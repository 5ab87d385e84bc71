//! What a partition's leader knows of its replicas (Kafka's Partition with
//! its Replica states): the ISR as the controller last committed it, an
//! ISR change sent to the controller and not yet answered, and each
//! follower's progress (its log end offset, when it was last caught up).
//! From these come the high watermark (the smallest log end offset of the
//! in-sync replicas) and the ISR changes the leader proposes: a follower
//! that has not caught up for `replica.lag.time.max.ms` leaves, one that
//! reached the high watermark in this leader epoch comes back.
//!
//! No I/O and no clock of its own: the partition calls it under its lock,
//! with the time and the leader's log end offset.

use std::collections::BTreeMap;

/// One follower as the leader sees it (Kafka's ReplicaState).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowerProgress {
    /// Its log end offset: the offset it last fetched from (-1 until it
    /// fetches from this leader).
    pub log_end_offset: i64,
    /// When it last had everything the leader had (Kafka's
    /// lastCaughtUpTimeMs); an ISR member not caught up for the lag time
    /// leaves the ISR.
    pub last_caught_up_ms: i64,
    /// The leader's log end offset at its previous fetch, and when that was:
    /// a fetch that reaches it shows the follower was caught up then.
    last_fetch_leader_end: i64,
    last_fetch_ms: i64,
    /// The broker epoch its fetches carry (-1 until it fetched), which an
    /// ISR change names (KIP-903).
    pub broker_epoch: i64,
}

impl FollowerProgress {
    fn new(caught_up_ms: i64) -> Self {
        FollowerProgress {
            log_end_offset: -1,
            last_caught_up_ms: caught_up_ms,
            last_fetch_leader_end: -1,
            last_fetch_ms: caught_up_ms,
            broker_epoch: -1,
        }
    }
}

/// An ISR change sent to the controller, not yet answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingIsr {
    pub isr: Vec<i32>,
    /// When it was sent: one unanswered for too long may be sent again.
    pub sent_ms: i64,
}

/// The replica set of a partition led here.
#[derive(Clone, Debug, Default)]
pub struct ReplicaSet {
    /// This broker (the leader).
    pub local_id: i32,
    pub replicas: Vec<i32>,
    /// The ISR as the controller committed it.
    pub isr: Vec<i32>,
    pub partition_epoch: i32,
    pub pending: Option<PendingIsr>,
    /// Every replica but the leader.
    pub followers: BTreeMap<i32, FollowerProgress>,
}

impl ReplicaSet {
    /// A partition with no replica but this one (a single node's).
    pub fn alone(local_id: i32) -> Self {
        ReplicaSet { local_id, replicas: vec![local_id], isr: vec![local_id], ..Default::default() }
    }

    /// The set when this broker starts leading (or its assignment or ISR
    /// changes): followers it knew keep their progress; new ones start
    /// unknown, ISR members counted caught up now (Kafka's makeLeader), so
    /// they get the lag time to show up before they are dropped.
    pub fn led(
        local_id: i32,
        replicas: &[i32],
        isr: &[i32],
        partition_epoch: i32,
        now_ms: i64,
        previous: Option<&Self>,
    ) -> Self {
        let followers = replicas
            .iter()
            .filter(|&&id| id != local_id)
            .map(|&id| {
                let known = previous.and_then(|p| p.followers.get(&id)).cloned();
                let caught_up = if isr.contains(&id) { now_ms } else { 0 };
                (id, known.unwrap_or_else(|| FollowerProgress::new(caught_up)))
            })
            .collect();
        // An unanswered change stays pending only if the ISR is the one it
        // was made against.
        let pending =
            previous.filter(|p| p.isr == isr && p.partition_epoch == partition_epoch).and_then(|p| p.pending.clone());
        ReplicaSet { local_id, replicas: replicas.to_vec(), isr: isr.to_vec(), partition_epoch, pending, followers }
    }

    /// The ISR the high watermark and min.insync.replicas count: the
    /// committed one, plus the members a pending change adds (Kafka's
    /// maximal ISR: a follower is counted in sync as soon as the leader
    /// asks for it, and out only once the controller agrees).
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        if let Some(pending) = &self.pending {
            isr.extend(pending.isr.iter().filter(|id| !self.isr.contains(id)));
        }
        isr
    }

    /// Whether the committed ISR is smaller than `min_insync_replicas`
    /// (capped at the replica count, Kafka's effectiveMinIsr).
    pub fn under_min_isr(&self, min_insync_replicas: usize) -> bool {
        self.isr.len() < min_insync_replicas.min(self.replicas.len())
    }

    /// The high watermark the in-sync replicas allow: the smallest log end
    /// offset among them (the leader's being `leader_end`). A member that
    /// has not fetched yet holds it where it is (`current`). Under
    /// `min_insync_replicas` it stays where it is (KIP-966's strict min
    /// ISR, as Kafka 4's leader: a record is committed only once that many
    /// replicas have it, which is what lets a replica out of the ISR be
    /// eligible to lead).
    pub fn high_watermark(&self, leader_end: i64, current: i64, min_insync_replicas: usize) -> i64 {
        if self.under_min_isr(min_insync_replicas) {
            return current.min(leader_end);
        }
        let mut hw = leader_end;
        for id in self.maximal_isr() {
            if id == self.local_id {
                continue;
            }
            match self.followers.get(&id) {
                Some(f) if f.log_end_offset >= 0 => hw = hw.min(f.log_end_offset),
                _ => return current.min(leader_end),
            }
        }
        hw.max(current).min(leader_end)
    }

    /// Records a follower's fetch from `fetch_offset` at `now_ms`, with the
    /// leader's log end at `leader_end` (Kafka's updateFetchState). False
    /// for a broker that is not one of the replicas.
    pub fn record_fetch(
        &mut self,
        id: i32,
        broker_epoch: i64,
        fetch_offset: i64,
        leader_end: i64,
        now_ms: i64,
    ) -> bool {
        let Some(follower) = self.followers.get_mut(&id) else { return false };
        if fetch_offset >= leader_end {
            follower.last_caught_up_ms = follower.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= follower.last_fetch_leader_end {
            follower.last_caught_up_ms = follower.last_caught_up_ms.max(follower.last_fetch_ms);
        }
        follower.log_end_offset = fetch_offset;
        follower.last_fetch_leader_end = leader_end;
        follower.last_fetch_ms = now_ms;
        follower.broker_epoch = broker_epoch;
        true
    }

    /// The ISR without the members that have not caught up for `lag_ms`
    /// (Kafka's getOutOfSyncReplicas), if any is to leave and no change is
    /// pending.
    pub fn shrunk_isr(&self, now_ms: i64, lag_ms: i64) -> Option<Vec<i32>> {
        if self.pending.is_some() {
            return None;
        }
        let lagging = |id: &i32| self.followers.get(id).is_some_and(|f| now_ms - f.last_caught_up_ms > lag_ms);
        let kept: Vec<i32> = self.isr.iter().copied().filter(|id| *id == self.local_id || !lagging(id)).collect();
        debug_assert!(kept.contains(&self.local_id) || !self.isr.contains(&self.local_id), "the leader stays");
        (kept.len() < self.isr.len()).then_some(kept)
    }

    /// The ISR with follower `id` added, if it is out of it and caught up:
    /// at or past the high watermark and the start of this leader epoch
    /// (Kafka's isFollowerInSync), and no change is pending.
    pub fn expanded_isr(&self, id: i32, high_watermark: i64, epoch_start: i64) -> Option<Vec<i32>> {
        if self.pending.is_some() || self.isr.contains(&id) {
            return None;
        }
        let follower = self.followers.get(&id)?;
        let in_sync = follower.log_end_offset >= high_watermark && follower.log_end_offset >= epoch_start;
        in_sync.then(|| {
            let mut isr = self.isr.clone();
            isr.push(id);
            isr
        })
    }

    /// The broker epoch each member of `isr` fetched with (-1: not known,
    /// which the controller does not check).
    pub fn broker_epochs(&self, isr: &[i32]) -> Vec<(i32, i64)> {
        isr.iter().map(|&id| (id, self.followers.get(&id).map_or(-1, |f| f.broker_epoch))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three(now: i64) -> ReplicaSet {
        ReplicaSet::led(1, &[1, 2, 3], &[1, 2, 3], 0, now, None)
    }

    #[test]
    fn the_high_watermark_is_the_smallest_in_sync_log_end_and_waits_for_members_not_heard_of() {
        let mut set = three(0);
        assert_eq!(set.high_watermark(10, 0, 1), 0, "followers not heard of hold it");
        set.record_fetch(2, 5, 10, 10, 1);
        assert_eq!(set.high_watermark(10, 0, 1), 0);
        set.record_fetch(3, 5, 7, 10, 1);
        assert_eq!(set.high_watermark(10, 0, 1), 7);
        assert_eq!(set.high_watermark(10, 8, 1), 8, "never moves back");
        set.isr = vec![1, 2];
        assert_eq!(set.high_watermark(10, 7, 1), 10, "out of the ISR, not counted");
    }

    #[test]
    fn under_min_insync_replicas_the_high_watermark_stays_where_it_is() {
        let mut set = three(0);
        set.record_fetch(2, 5, 10, 10, 1);
        set.record_fetch(3, 5, 10, 10, 1);
        set.isr = vec![1];
        assert!(set.under_min_isr(2));
        assert_eq!(set.high_watermark(12, 6, 2), 6, "the leader alone commits nothing");
        assert_eq!(set.high_watermark(12, 6, 1), 12, "min.insync.replicas=1 lets it alone");
        set.isr = vec![1, 2];
        assert_eq!(set.high_watermark(12, 6, 2), 10, "two in sync: the smaller end");
        // min.insync.replicas above the replica count counts as the count.
        set.isr = vec![1, 2, 3];
        assert!(!set.under_min_isr(5));
        assert_eq!(set.high_watermark(12, 6, 5), 10);
        // A pending expansion counts toward the high watermark, not toward
        // min.insync.replicas: only a committed ISR does (Kafka's isUnderMinIsr).
        set.isr = vec![1];
        set.pending = Some(PendingIsr { isr: vec![1, 2], sent_ms: 1 });
        assert_eq!(set.high_watermark(12, 6, 2), 6);
    }

    #[test]
    fn a_follower_that_stops_catching_up_leaves_the_isr_after_the_lag_time() {
        let mut set = three(0);
        set.record_fetch(2, 5, 10, 10, 100);
        set.record_fetch(3, 5, 4, 10, 100);
        assert_eq!(set.shrunk_isr(1000, 1000), None);
        // 2 keeps up, 3 fetches but stays behind the end it last saw.
        set.record_fetch(2, 5, 20, 20, 1500);
        set.record_fetch(3, 5, 5, 20, 1500);
        assert_eq!(set.shrunk_isr(1500, 1000), Some(vec![1, 2]));
        // 3 reaches the end it saw at its previous fetch: caught up then.
        set.record_fetch(3, 5, 20, 30, 1600);
        assert_eq!(set.followers[&3].last_caught_up_ms, 1500);
        assert_eq!(set.shrunk_isr(1600, 1000), None);
    }

    #[test]
    fn a_caught_up_follower_joins_and_a_pending_change_counts_it_at_once() {
        let mut set = ReplicaSet::led(1, &[1, 2, 3], &[1, 2], 3, 0, None);
        set.record_fetch(3, 9, 4, 10, 1);
        assert_eq!(set.expanded_isr(3, 5, 0), None, "below the high watermark");
        set.record_fetch(3, 9, 6, 10, 2);
        assert_eq!(set.expanded_isr(3, 5, 7), None, "before the epoch's start");
        let isr = set.expanded_isr(3, 5, 0).unwrap();
        assert_eq!(isr, vec![1, 2, 3]);
        set.pending = Some(PendingIsr { isr: isr.clone(), sent_ms: 2 });
        assert_eq!(set.maximal_isr(), vec![1, 2, 3]);
        assert_eq!(set.broker_epochs(&isr), vec![(1, -1), (2, -1), (3, 9)]);
        assert_eq!(set.expanded_isr(3, 5, 0), None, "one change at a time");
        // The controller's answer (or the image) brings a new ISR: the
        // pending change is done, progress kept.
        let next = ReplicaSet::led(1, &[1, 2, 3], &isr, 4, 3, Some(&set));
        assert_eq!(next.pending, None);
        assert_eq!(next.followers[&3].log_end_offset, 6);
    }
}
