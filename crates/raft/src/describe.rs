//! The leader's view of its quorum, as Kafka's DescribeQuorum reports it
//! (`LeaderState.describeQuorum`): every voter and each observer that
//! fetched lately, with its log end offset, when it last fetched and when
//! it last held all of the leader's log.
//!
//! Only a leader describes the quorum (Kafka answers NOT_LEADER_OR_FOLLOWER
//! elsewhere). The bookkeeping is Kafka's: a fetch the leader served (not
//! one answered with a diverging epoch) notes its time; the replica caught
//! up at that time when it fetched from the leader's log end, or at its
//! previous fetch when it now fetches from where the leader's log ended
//! then. An observer that has not fetched for
//! [`OBSERVER_SESSION_TIMEOUT_MS`] is forgotten, so a broker that left does
//! not stay listed and the leader's map of replicas stays bounded by the
//! live ones.

use krabka_log::ReplicatedLog;
use krabka_protocol::Uuid;

use crate::node::{Progress, RaftNode, Role};
use crate::voters::ReplicaKey;

/// How long an observer that stopped fetching is still listed (Kafka's
/// `LeaderState.OBSERVER_SESSION_TIMEOUT_MS`).
pub const OBSERVER_SESSION_TIMEOUT_MS: i64 = 300_000;

/// The quorum as its leader sees it. Times are the node's clock (the
/// `now_ms` its caller passes), which the caller turns into wall time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumDescription {
    pub leader_id: i32,
    pub epoch: i32,
    /// -1 until the leader's epoch committed its first record.
    pub high_watermark: i64,
    /// Every voter, in the configured order.
    pub voters: Vec<ReplicaDescription>,
    /// The observers that fetched within the observer session timeout.
    pub observers: Vec<ReplicaDescription>,
}

/// One replica's progress; None where the leader has not heard of it
/// since it took the lead (Kafka's -1). The leader itself is caught up and
/// fetching now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaDescription {
    pub replica_id: i32,
    /// Its metadata log directory's id: a voter's as the voter set records
    /// it (zero for a static voter), an observer's as its fetches name it
    /// (zero when they name none).
    pub directory_id: Uuid,
    pub log_end_offset: Option<i64>,
    pub last_fetch_ms: Option<i64>,
    pub last_caught_up_ms: Option<i64>,
}

impl<L: ReplicatedLog> RaftNode<L> {
    /// The quorum as this node leads it; None when it does not lead.
    pub fn describe_quorum(&self, now_ms: i64) -> Option<QuorumDescription> {
        let Role::Leader { progress, .. } = &self.role else { return None };
        let me = self.config.node_id;
        let voter_set = self.voters.latest();
        let describe = |key: ReplicaKey, entry: Option<&Progress>| {
            let (replica_id, directory_id) = (key.id, key.directory_id);
            if key.id == me {
                let end = Some(self.log.log_end_offset());
                return ReplicaDescription {
                    replica_id,
                    directory_id,
                    log_end_offset: end,
                    last_fetch_ms: Some(now_ms),
                    last_caught_up_ms: Some(now_ms),
                };
            }
            let served = entry.and_then(|p| p.served.map(|s| (p.fetch_offset, s)));
            ReplicaDescription {
                replica_id,
                directory_id,
                log_end_offset: served.map(|(offset, _)| offset),
                last_fetch_ms: served.map(|(_, s)| s.last_fetch_ms),
                last_caught_up_ms: served.and_then(|(_, s)| s.last_caught_up_ms),
            }
        };
        let voters = voter_set.nodes().map(|v| describe(v.key(), progress.get(&v.key()))).collect();
        // Observers by their key: two replicas with one id and different
        // directory ids (or none) are listed apart, as Kafka's leader does.
        let observers = progress
            .iter()
            // A fetcher without an id (-1) is nobody's replica (Kafka's
            // leader ignores it).
            .filter(|(key, entry)| key.id >= 0 && voter_set.voter_key(**key) != Some(**key) && entry.served.is_some())
            .filter(|(_, entry)| !observer_expired(entry, now_ms))
            .map(|(&key, entry)| describe(key, Some(entry)))
            .collect();
        Some(QuorumDescription {
            leader_id: me,
            epoch: self.epoch,
            high_watermark: self.advertised_high_watermark(),
            voters,
            observers,
        })
    }

    /// Forgets the observers that stopped fetching: a leader's map of
    /// replicas holds the voters and the live observers only.
    pub(crate) fn forget_idle_observers(&mut self, now_ms: i64) {
        let Role::Leader { progress, .. } = &mut self.role else { return };
        let voters = self.voters.latest();
        progress.retain(|key, entry| voters.voter_key(*key) == Some(*key) || !observer_expired(entry, now_ms));
    }
}

/// An observer not heard from within the session timeout, with no fetch
/// held (a held fetch is always answered, so it keeps its entry).
fn observer_expired(entry: &Progress, now_ms: i64) -> bool {
    let last_heard = entry.served.map(|s| s.last_fetch_ms).max(entry.last_fetch_ms);
    entry.parked.is_none() && last_heard.is_none_or(|at| now_ms - at >= OBSERVER_SESSION_TIMEOUT_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{fetch, leader_of};

    fn leader(dir: &std::path::Path) -> RaftNode<krabka_log::PartitionLog> {
        leader_of(dir, Default::default())
    }

    #[test]
    fn the_leader_describes_its_voters_and_live_observers() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = leader(dir.path());
        let end = node.log().log_end_offset();
        node.handle(2_000, 2, fetch(end, Uuid::ZERO)).unwrap();
        node.handle(2_500, 9, fetch(end, Uuid::ZERO)).unwrap();
        let described = node.describe_quorum(3_000).unwrap();
        assert_eq!((described.leader_id, described.epoch), (1, 1));
        // Voter 2's fetch of everything committed the epoch's first record.
        assert_eq!(described.high_watermark, end);
        let me = ReplicaDescription {
            replica_id: 1,
            directory_id: Uuid::ZERO,
            log_end_offset: Some(end),
            last_fetch_ms: Some(3_000),
            last_caught_up_ms: Some(3_000),
        };
        let caught_up = |id, at| ReplicaDescription {
            replica_id: id,
            directory_id: Uuid::ZERO,
            log_end_offset: Some(end),
            last_fetch_ms: Some(at),
            last_caught_up_ms: Some(at),
        };
        let unheard = ReplicaDescription {
            replica_id: 3,
            directory_id: Uuid::ZERO,
            log_end_offset: None,
            last_fetch_ms: None,
            last_caught_up_ms: None,
        };
        assert_eq!(described.voters, vec![me, caught_up(2, 2_000), unheard]);
        assert_eq!(described.observers, vec![caught_up(9, 2_500)]);
        // An observer silent for the session timeout is forgotten (its
        // progress dropped); a voter never is.
        node.tick(2_500 + OBSERVER_SESSION_TIMEOUT_MS).unwrap();
        let Role::Leader { progress, .. } = &node.role else { panic!("still leads") };
        assert_eq!(progress.keys().map(|key| key.id).collect::<Vec<i32>>(), vec![1, 2, 3]);
        let described = node.describe_quorum(2_500 + OBSERVER_SESSION_TIMEOUT_MS).unwrap();
        assert_eq!((described.voters.len(), described.observers.len()), (3, 0));
    }

    #[test]
    fn only_a_leader_describes_the_quorum() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = leader(dir.path());
        node.resign(5_000);
        assert_eq!(node.describe_quorum(5_001), None);
    }

    #[test]
    fn observers_with_one_id_and_two_directories_are_two_replicas() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = leader(dir.path());
        let end = node.log().log_end_offset();
        let (a, b) = (Uuid([0xa; 16]), Uuid([0xb; 16]));
        node.handle(2_000, 9, fetch(end, a)).unwrap();
        node.handle(2_500, 9, fetch(end - 1, b)).unwrap();
        node.handle(2_600, 9, fetch(end, Uuid::ZERO)).unwrap();
        let observer = |directory_id, log_end_offset, at, caught_up| ReplicaDescription {
            replica_id: 9,
            directory_id,
            log_end_offset: Some(log_end_offset),
            last_fetch_ms: Some(at),
            last_caught_up_ms: caught_up,
        };
        let described = node.describe_quorum(3_000).unwrap();
        // By key: none (a fetch before v17) first, then by directory id.
        let expected = vec![
            observer(Uuid::ZERO, end, 2_600, Some(2_600)),
            observer(a, end, 2_000, Some(2_000)),
            observer(b, end - 1, 2_500, None),
        ];
        assert_eq!(described.observers, expected);
        // Each is forgotten on its own once it stops fetching.
        node.handle(2_000 + OBSERVER_SESSION_TIMEOUT_MS - 1, 9, fetch(end, b)).unwrap();
        node.tick(2_600 + OBSERVER_SESSION_TIMEOUT_MS).unwrap();
        let described = node.describe_quorum(2_600 + OBSERVER_SESSION_TIMEOUT_MS).unwrap();
        let directories: Vec<Uuid> = described.observers.iter().map(|o| o.directory_id).collect();
        assert_eq!(directories, vec![b]);
    }
}
