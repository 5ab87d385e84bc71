//! A follower's side of a KIP-227 fetch session with its leader (Kafka's
//! FetchSessionHandler): the first request names every partition and asks
//! for a session (epoch 0); once the leader gave one, each request names
//! only the partitions that are new or whose fetch state changed since the
//! last one, and the ones to forget, so a follower of thousands of
//! partitions sends a few dozen bytes when little moves. Any error ends the
//! session: the next request is a full one again.

use std::collections::HashMap;

use krabka_protocol::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use krabka_protocol::{ErrorCode, Uuid};

/// The epoch that asks for a new session.
const INITIAL_EPOCH: i32 = 0;

/// One partition the follower wants, with its topic.
pub(super) struct Wanted {
    pub topic: String,
    pub topic_id: Uuid,
    pub fetch: FetchPartition,
}

/// What one request carries of the session.
pub(super) struct SessionRequest {
    pub session_id: i32,
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic>,
    pub forgotten: Vec<ForgottenTopic>,
}

#[derive(Default)]
pub(super) struct FetchSession {
    /// The leader's id for the session (0: none yet).
    id: i32,
    /// The epoch the next request carries.
    epoch: i32,
    /// Each partition as the session last heard of it.
    known: HashMap<(Uuid, i32), FetchPartition>,
}

impl FetchSession {
    /// The next request for `wanted` (every partition the fetcher follows
    /// now): all of them without a session, else what changed and what
    /// went. The session's view is updated as if the leader took it.
    pub fn next_request(&mut self, wanted: Vec<Wanted>) -> SessionRequest {
        let full = self.id == 0;
        if full {
            self.known.clear();
        }
        let mut topics: Vec<FetchTopic> = Vec::new();
        let mut topic_slots: HashMap<Uuid, usize> = HashMap::new();
        let mut still_wanted = HashMap::with_capacity(wanted.len());
        for Wanted { topic, topic_id, fetch } in wanted {
            let key = (topic_id, fetch.partition);
            still_wanted.insert(key, ());
            if self.known.get(&key) == Some(&fetch) {
                continue;
            }
            self.known.insert(key, fetch.clone());
            let slot = *topic_slots.entry(topic_id).or_insert_with(|| {
                topics.push(FetchTopic { topic, topic_id, ..Default::default() });
                topics.len() - 1
            });
            topics[slot].partitions.push(fetch);
        }
        let mut forgotten: Vec<ForgottenTopic> = Vec::new();
        let gone: Vec<(Uuid, i32)> = self.known.keys().filter(|k| !still_wanted.contains_key(k)).copied().collect();
        for (topic_id, partition) in gone {
            self.known.remove(&(topic_id, partition));
            match forgotten.iter_mut().find(|f| f.topic_id == topic_id) {
                Some(f) => f.partitions.push(partition),
                None => forgotten.push(ForgottenTopic { topic_id, partitions: vec![partition], ..Default::default() }),
            }
        }
        debug_assert!(!full || forgotten.is_empty(), "a full request forgets nothing");
        SessionRequest {
            session_id: self.id,
            session_epoch: if full { INITIAL_EPOCH } else { self.epoch },
            topics,
            forgotten,
        }
    }

    /// The leader's answer: a session opened or moved on, or (any error,
    /// or no session given) none, so the next request is full.
    pub fn answered(&mut self, error_code: i16, session_id: i32) {
        if error_code != ErrorCode::NONE.code() || session_id == 0 {
            self.reset();
            return;
        }
        if self.id == 0 {
            self.id = session_id;
            self.epoch = 1;
        } else {
            debug_assert_eq!(self.id, session_id, "the leader answers in the session asked");
            // Kafka's nextEpoch: 1 follows the largest.
            self.epoch = if self.epoch == i32::MAX { 1 } else { self.epoch + 1 };
        }
    }

    /// Ends the session (a failed exchange: the leader's view is unknown).
    pub fn reset(&mut self) {
        *self = FetchSession::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(topic_id: u8, partition: i32, fetch_offset: i64) -> Wanted {
        Wanted {
            topic: format!("t{topic_id}"),
            topic_id: Uuid([topic_id; 16]),
            fetch: FetchPartition { partition, fetch_offset, ..Default::default() },
        }
    }

    fn named(request: &SessionRequest) -> Vec<(u8, i32, i64)> {
        let mut named: Vec<_> = request
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id.0[0], p.partition, p.fetch_offset)))
            .collect();
        named.sort();
        named
    }

    #[test]
    fn a_session_sends_everything_once_then_only_what_changed_and_what_went() {
        let mut session = FetchSession::default();
        let first = session.next_request(vec![wanted(1, 0, 5), wanted(1, 1, 7), wanted(2, 0, 9)]);
        assert_eq!((first.session_id, first.session_epoch), (0, INITIAL_EPOCH));
        assert_eq!(named(&first), vec![(1, 0, 5), (1, 1, 7), (2, 0, 9)]);
        session.answered(0, 42);
        // Partition 1-0 moved on, 2-0 went.
        let next = session.next_request(vec![wanted(1, 0, 6), wanted(1, 1, 7)]);
        assert_eq!((next.session_id, next.session_epoch), (42, 1));
        assert_eq!(named(&next), vec![(1, 0, 6)]);
        assert_eq!(next.forgotten.len(), 1);
        assert_eq!((next.forgotten[0].topic_id, next.forgotten[0].partitions.clone()), (Uuid([2; 16]), vec![0]));
        session.answered(0, 42);
        let quiet = session.next_request(vec![wanted(1, 0, 6), wanted(1, 1, 7)]);
        assert_eq!((quiet.session_epoch, named(&quiet).len(), quiet.forgotten.len()), (2, 0, 0));
        // An error ends the session: everything again, asking for a new one.
        session.answered(ErrorCode::FETCH_SESSION_ID_NOT_FOUND.code(), 0);
        let again = session.next_request(vec![wanted(1, 0, 6), wanted(1, 1, 7)]);
        assert_eq!((again.session_id, again.session_epoch, named(&again).len()), (0, INITIAL_EPOCH, 2));
    }

    #[test]
    fn a_leader_that_gives_no_session_gets_full_requests() {
        let mut session = FetchSession::default();
        session.next_request(vec![wanted(1, 0, 5)]);
        session.answered(0, 0);
        let next = session.next_request(vec![wanted(1, 0, 5)]);
        assert_eq!((next.session_id, next.session_epoch, named(&next).len()), (0, INITIAL_EPOCH, 1));
    }
}
