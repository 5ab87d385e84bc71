//! Incremental fetch sessions (KIP-227). A client that opens a session
//! (session id 0, epoch 0) gets a session id; afterwards it sends only the
//! partitions whose fetch position changed, and the broker answers only the
//! partitions with something new: records, a moved high watermark, last
//! stable offset or log start offset, or an error. Sessions are bounded
//! (`max.incremental.fetch.session.cache.slots`); the least recently used
//! one is evicted, after which its client gets FETCH_SESSION_ID_NOT_FOUND
//! and starts a new session with a full fetch, as with Kafka.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use krabka_protocol::{ErrorCode, FetchRequest, Uuid};

use crate::metadata::MetadataImage;

/// The session epoch a client sends to close its session (or to ask for none).
const FINAL_EPOCH: i32 = -1;
/// Kafka's default `max.incremental.fetch.session.cache.slots`.
pub const DEFAULT_MAX_SESSIONS: usize = 1000;

/// One partition of a fetch, with what the client last heard about it.
#[derive(Clone, Debug)]
pub struct SessionPartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    /// The epoch of the fetcher's last batch (-1: not known), which a
    /// leader checks against its own history (KIP-320).
    pub last_fetched_epoch: i32,
    pub sent_high_watermark: i64,
    pub sent_last_stable_offset: i64,
    pub sent_log_start_offset: i64,
}

impl SessionPartition {
    fn same_partition(&self, other: &SessionPartition, by_id: bool) -> bool {
        self.partition == other.partition
            && if by_id { self.topic_id == other.topic_id } else { self.topic == other.topic }
    }
}

pub struct Session {
    pub id: i32,
    /// The epoch the next incremental request must carry.
    pub next_epoch: i32,
    pub partitions: Vec<SessionPartition>,
    last_used: Instant,
}

/// How a fetch relates to a session.
pub enum SessionContext {
    /// No session: a full request, a full response, session id 0.
    Sessionless,
    /// A new session: full request and response, then incremental ones.
    Full(Arc<Mutex<Session>>),
    /// An incremental request: only changes in, only changes out.
    Incremental(Arc<Mutex<Session>>),
}

impl SessionContext {
    pub fn session_id(&self) -> i32 {
        match self {
            SessionContext::Sessionless => 0,
            SessionContext::Full(s) | SessionContext::Incremental(s) => s.lock().unwrap_or_else(|e| e.into_inner()).id,
        }
    }
}

pub struct FetchSessionCache {
    sessions: Mutex<HashMap<i32, Arc<Mutex<Session>>>>,
    max_sessions: usize,
}

impl Default for FetchSessionCache {
    fn default() -> Self {
        FetchSessionCache::new(DEFAULT_MAX_SESSIONS)
    }
}

/// The partitions a request names, resolved against the image.
pub fn request_partitions(request: &FetchRequest, by_id: bool, image: &MetadataImage) -> Vec<SessionPartition> {
    let mut out = Vec::new();
    for topic in &request.topics {
        let name = if by_id {
            image.topic_by_id(&topic.topic_id).map(|t| t.name.clone()).unwrap_or_default()
        } else {
            topic.topic.clone()
        };
        for p in &topic.partitions {
            out.push(SessionPartition {
                topic: name.clone(),
                topic_id: topic.topic_id,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
                sent_high_watermark: -1,
                sent_last_stable_offset: -1,
                sent_log_start_offset: -1,
            });
        }
    }
    out
}

impl FetchSessionCache {
    pub fn new(max_sessions: usize) -> Self {
        FetchSessionCache { sessions: Mutex::new(HashMap::new()), max_sessions }
    }

    /// Resolves the request's session fields into a context and the
    /// partitions to read, or the error code that refuses the whole fetch.
    pub fn admit(
        &self,
        request: &FetchRequest,
        by_id: bool,
        image: &MetadataImage,
    ) -> Result<(SessionContext, Vec<SessionPartition>), ErrorCode> {
        let requested = request_partitions(request, by_id, image);
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        match (request.session_id, request.session_epoch) {
            (0, FINAL_EPOCH) => Ok((SessionContext::Sessionless, requested)),
            (id, 0) => {
                // Epoch 0 asks for a new session; a named old one is closed first.
                if id != 0 {
                    sessions.remove(&id);
                }
                if self.max_sessions == 0 {
                    return Ok((SessionContext::Sessionless, requested));
                }
                if sessions.len() >= self.max_sessions {
                    let oldest = sessions
                        .iter()
                        .min_by_key(|(_, s)| s.lock().unwrap_or_else(|e| e.into_inner()).last_used)
                        .map(|(id, _)| *id);
                    if let Some(id) = oldest {
                        sessions.remove(&id);
                    }
                }
                let id = loop {
                    let candidate = (rand_u32() & 0x7fff_ffff) as i32;
                    if candidate != 0 && !sessions.contains_key(&candidate) {
                        break candidate;
                    }
                };
                let session = Arc::new(Mutex::new(Session {
                    id,
                    next_epoch: 1,
                    partitions: requested.clone(),
                    last_used: Instant::now(),
                }));
                sessions.insert(id, session.clone());
                Ok((SessionContext::Full(session), requested))
            }
            (0, _) => Err(ErrorCode::INVALID_FETCH_SESSION_EPOCH),
            (id, FINAL_EPOCH) => {
                // Closing a session: the request is a full, sessionless one.
                sessions.remove(&id);
                Ok((SessionContext::Sessionless, requested))
            }
            (id, epoch) => {
                let Some(session) = sessions.get(&id).cloned() else {
                    return Err(ErrorCode::FETCH_SESSION_ID_NOT_FOUND);
                };
                drop(sessions);
                let mut state = session.lock().unwrap_or_else(|e| e.into_inner());
                if epoch != state.next_epoch {
                    return Err(ErrorCode::INVALID_FETCH_SESSION_EPOCH);
                }
                state.next_epoch = if state.next_epoch == i32::MAX { 1 } else { state.next_epoch + 1 };
                state.last_used = Instant::now();
                for update in requested {
                    match state.partitions.iter_mut().find(|p| p.same_partition(&update, by_id)) {
                        Some(existing) => {
                            existing.fetch_offset = update.fetch_offset;
                            existing.max_bytes = update.max_bytes;
                            existing.current_leader_epoch = update.current_leader_epoch;
                            existing.last_fetched_epoch = update.last_fetched_epoch;
                        }
                        None => state.partitions.push(update),
                    }
                }
                for forgotten in &request.forgotten_topics_data {
                    state.partitions.retain(|p| {
                        let same_topic =
                            if by_id { p.topic_id == forgotten.topic_id } else { p.topic == forgotten.topic };
                        !(same_topic && forgotten.partitions.contains(&p.partition))
                    });
                }
                // Names of topics named by id may have appeared since.
                for p in state.partitions.iter_mut().filter(|p| by_id && p.topic.is_empty()) {
                    if let Some(topic) = image.topic_by_id(&p.topic_id) {
                        p.topic = topic.name.clone();
                    }
                }
                let partitions = state.partitions.clone();
                drop(state);
                Ok((SessionContext::Incremental(session), partitions))
            }
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Session ids only need to be hard to guess by accident, not secret.
fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    hasher.finish() as u32
}
