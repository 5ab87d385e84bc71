//! Where a follower's log parts from its leader's (KIP-320), both sides of
//! the rule as pure functions: the leader answers a fetch whose last
//! fetched epoch it does not have up to the fetch offset with the epoch
//! and end offset it has instead; the follower truncates to where both
//! logs still agree.

/// The leader's side: `found` is its own end of the follower's
/// `last_fetched_epoch` (the largest epoch at most it, and where that
/// ends; None when it knows no such epoch). The epoch and end offset to
/// answer with, if the follower diverged: the leader has that epoch ending
/// before the fetch offset, or only older epochs.
pub fn leader_divergence(found: Option<(i32, i64)>, last_fetched_epoch: i32, fetch_offset: i64) -> Option<(i32, i64)> {
    if last_fetched_epoch < 0 {
        return None;
    }
    let (epoch, end_offset) = found?;
    (epoch < last_fetched_epoch || end_offset < fetch_offset).then_some((epoch, end_offset))
}

/// The follower's side: where to truncate given the leader's answer
/// (`leader_epoch` ending at `leader_end`) and `local`, the follower's own
/// end of that epoch (None: it has none). Never past what either side
/// has of that epoch: when the follower's nearest epoch is another one,
/// the next fetch checks again from there.
pub fn follower_truncation(leader_end: i64, local: Option<(i32, i64)>, local_log_end: i64) -> i64 {
    let local_end = local.map_or(local_log_end, |(_, end)| end);
    leader_end.min(local_end).min(local_log_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_with_records_of_an_epoch_the_leader_ended_earlier_diverges() {
        // The leader's epoch 3 ended at 10; the follower fetches from 12.
        assert_eq!(leader_divergence(Some((3, 10)), 3, 12), Some((3, 10)));
        assert_eq!(leader_divergence(Some((3, 10)), 3, 10), None, "it has exactly that much");
        // The leader never had epoch 4: its last before it is 3.
        assert_eq!(leader_divergence(Some((3, 10)), 4, 8), Some((3, 10)));
        assert_eq!(leader_divergence(None, 4, 8), None);
        assert_eq!(leader_divergence(Some((3, 10)), -1, 12), None, "no epoch sent, nothing checked");
    }

    #[test]
    fn the_follower_truncates_to_where_both_have_the_epoch() {
        assert_eq!(follower_truncation(10, Some((3, 12)), 15), 10);
        assert_eq!(follower_truncation(10, Some((2, 7)), 15), 7, "its own epoch ends first");
        assert_eq!(follower_truncation(10, None, 8), 8);
    }
}
