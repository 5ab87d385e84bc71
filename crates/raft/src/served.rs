//! What a leader notes of the fetches it served each replica, for
//! DescribeQuorum (Kafka's `LeaderState.ReplicaState` times). A leaf the
//! node's progress holds and `describe` reads.

/// What a leader notes of the fetches it served a replica.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Served {
    pub(crate) last_fetch_ms: i64,
    pub(crate) last_caught_up_ms: Option<i64>,
    /// The leader's log end when the last fetch arrived.
    pub(crate) leader_end: i64,
}

impl Served {
    /// Kafka's `ReplicaState.updateFollowerState`: the caught-up time moves
    /// before the fetch time, so a fetch that reaches where the leader's log
    /// ended at the previous fetch dates the catch-up to that fetch.
    pub(crate) fn note(served: &mut Option<Served>, now_ms: i64, fetch_offset: i64, leader_end: i64) {
        let previous = served.unwrap_or(Served { last_fetch_ms: -1, last_caught_up_ms: None, leader_end: 0 });
        let caught_up_at = if fetch_offset >= leader_end {
            Some(now_ms)
        } else if previous.leader_end > 0 && fetch_offset >= previous.leader_end {
            Some(previous.last_fetch_ms)
        } else {
            None
        };
        let last_caught_up_ms = match (previous.last_caught_up_ms, caught_up_at) {
            (Some(before), Some(at)) => Some(before.max(at)),
            (before, at) => before.or(at),
        };
        *served = Some(Served { last_fetch_ms: previous.last_fetch_ms.max(now_ms), last_caught_up_ms, leader_end });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caught_up_follows_kafka_rule() {
        let mut served = None;
        // Behind the leader's end at the first fetch: never caught up yet.
        Served::note(&mut served, 100, 5, 10);
        assert_eq!(served.unwrap().last_caught_up_ms, None);
        // Reaches where the leader ended then: caught up as of that fetch.
        Served::note(&mut served, 200, 10, 15);
        assert_eq!(served.unwrap().last_caught_up_ms, Some(100));
        // At the leader's end now: caught up now.
        Served::note(&mut served, 300, 15, 15);
        assert_eq!(served.unwrap().last_caught_up_ms, Some(300));
        assert_eq!(served.unwrap().last_fetch_ms, 300);
        // Falling behind again keeps the last time it was caught up.
        Served::note(&mut served, 400, 15, 40);
        assert_eq!(served.unwrap().last_caught_up_ms, Some(300));
    }
}
