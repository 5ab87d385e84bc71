//! Followers copying their leaders (Kafka's ReplicaFetcherManager and
//! fetcher threads): `num.replica.fetchers` fetchers per leader broker
//! (each partition on the fetcher Kafka's `getFetcherId` gives it, so a
//! leader's partitions spread over that many connections), each a task
//! that sends that broker Fetch requests as a replica (ReplicaState with
//! this broker's id and epoch, each partition's last fetched epoch) and
//! writes what comes back as the leader sent it. A diverging epoch in the answer (KIP-320)
//! truncates the follower's log to where it agrees with the leader's; a
//! fetch offset below the leader's log start starts the log afresh there.
//!
//! The set of fetchers follows the partitions' roles: the replica manager
//! signals after every metadata change, and the supervisor moves each
//! followed partition to its fetcher of its leader. Each fetcher keeps a fetch
//! session with its leader ([`session`]); [`apply`] writes the answers.

mod apply;
mod session;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use krabka_protocol::fetch_request::{FetchPartition, ReplicaState};
use krabka_protocol::{ApiKey, ErrorCode, FetchRequest, FetchResponse, Uuid};
use tokio::sync::Notify;

use crate::broker::Broker;
use crate::quorum::Channel;
use crate::replica::Partition;
use apply::{apply_response, throttled_bytes, Sent};
use krabka_replication::fetchers::fetcher_id;
use session::{FetchSession, Wanted};

/// Fetch v17: topic ids, ReplicaState (v15), ReplicaDirectoryId; spoken by
/// krabka and Kafka 4.x brokers alike.
const FETCH_VERSION: i16 = 17;
/// Kafka's isolation level for replicas (they read everything).
const READ_UNCOMMITTED: i8 = 0;

/// The partitions one fetcher follows, shared with its supervisor.
#[derive(Default)]
struct Followed {
    partitions: Mutex<Vec<Arc<Partition>>>,
    changed: Notify,
    /// Counts the replacements of `partitions`.
    generation: AtomicU64,
}

impl Followed {
    /// The partitions this fetcher follows now, by key.
    fn keys(&self) -> HashSet<(Uuid, i32)> {
        let partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        partitions.iter().map(|p| (p.topic_id, p.index)).collect()
    }

    /// Replaces the partitions (a change of roles or of the fetcher count).
    fn set(&self, partitions: Vec<Arc<Partition>>) {
        *self.partitions.lock().unwrap_or_else(|e| e.into_inner()) = partitions;
        self.generation.fetch_add(1, Ordering::Release);
        self.changed.notify_one();
    }
}

struct Fetcher {
    followed: Arc<Followed>,
    task: tokio::task::JoinHandle<()>,
}

/// A fetcher's key: the leader it fetches from and its fetcher id there
/// (Kafka's `BrokerIdAndFetcherId`).
type FetcherKey = (i32, u32);

/// Keeps `num.replica.fetchers` fetchers per leader this broker follows
/// (each partition on the one Kafka gives it), until shutdown. The count
/// is read anew at every change of roles, which a dynamic config change
/// is too: partitions then move between fetchers as Kafka's do.
pub async fn run_replica_fetchers(broker: Arc<Broker>) {
    let mut fetchers: HashMap<FetcherKey, Fetcher> = HashMap::new();
    let mut shutdown = broker.shutdown_signal();
    loop {
        let per_leader = fetchers_per_leader(&broker);
        let mut by_fetcher: HashMap<FetcherKey, Vec<Arc<Partition>>> = HashMap::new();
        for (leader, partition) in broker.replicas.followed_partitions() {
            let id = fetcher_id(&partition.topic, partition.index, per_leader);
            by_fetcher.entry((leader, id)).or_default().push(partition);
        }
        fetchers.retain(|key, fetcher| {
            let keep = by_fetcher.contains_key(key);
            if !keep {
                fetcher.task.abort();
            }
            keep
        });
        for (key, partitions) in by_fetcher {
            let fetcher = fetchers.entry(key).or_insert_with(|| {
                let followed = Arc::new(Followed::default());
                let task = tokio::spawn(fetch_from(broker.clone(), key, followed.clone()));
                Fetcher { followed, task }
            });
            fetcher.followed.set(partitions);
        }
        tokio::select! {
            () = broker.replicas.roles_changed() => {}
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    for fetcher in fetchers.into_values() {
        fetcher.task.abort();
    }
}

/// `num.replica.fetchers` as it applies now (dynamic configs over
/// server.properties), at least 1.
fn fetchers_per_leader(broker: &Broker) -> u32 {
    let image = broker.metadata.image();
    let dynamic = crate::config::DynamicConfigs::of(&image, broker.node_id);
    let value = broker.config.value_under(&dynamic, "num.replica.fetchers");
    value.and_then(|v| v.parse::<u32>().ok()).unwrap_or(1).max(1)
}

/// Settings of the replica fetchers (Kafka's `replica.*` keys).
struct FetchSettings {
    wait_max_ms: i32,
    min_bytes: i32,
    response_max_bytes: i32,
    partition_max_bytes: i32,
    backoff: Duration,
    socket_timeout: Duration,
}

impl FetchSettings {
    fn of(broker: &Broker) -> Self {
        let config = &broker.config;
        let wait_max_ms = config.number("replica.fetch.wait.max.ms", 500).clamp(0, i64::from(i32::MAX)) as i32;
        let socket_ms = config.number("replica.socket.timeout.ms", 30_000).max(i64::from(wait_max_ms) + 1_000);
        FetchSettings {
            wait_max_ms,
            min_bytes: config.number("replica.fetch.min.bytes", 1).clamp(0, i64::from(i32::MAX)) as i32,
            response_max_bytes: config
                .number("replica.fetch.response.max.bytes", 10 << 20)
                .clamp(0, i64::from(i32::MAX)) as i32,
            partition_max_bytes: config.number("replica.fetch.max.bytes", 1 << 20).clamp(0, i64::from(i32::MAX)) as i32,
            backoff: Duration::from_millis(config.number("replica.fetch.backoff.ms", 1_000).max(0) as u64),
            socket_timeout: Duration::from_millis(socket_ms as u64),
        }
    }
}

/// One fetcher: fetches from `leader` for the partitions `followed` names.
async fn fetch_from(broker: Arc<Broker>, (leader, id): FetcherKey, followed: Arc<Followed>) {
    let settings = FetchSettings::of(&broker);
    let mut fetcher = LeaderFetcher {
        broker,
        leader,
        id,
        followed: followed.clone(),
        settings,
        channel: None,
        delayed: HashMap::new(),
        session: FetchSession::default(),
    };
    loop {
        let now = Instant::now();
        fetcher.delayed.retain(|_, until| *until > now);
        // Read before the partitions: a change after it is seen at the answer.
        let generation = followed.generation.load(Ordering::Acquire);
        let partitions: Vec<Arc<Partition>> = {
            let all = followed.partitions.lock().unwrap_or_else(|e| e.into_inner());
            all.iter().filter(|p| !fetcher.delayed.contains_key(&(p.topic_id, p.index))).cloned().collect()
        };
        let Some(broker_epoch) = fetcher.broker.membership.epoch() else {
            tokio::time::sleep(fetcher.settings.backoff).await;
            continue;
        };
        if partitions.is_empty() {
            match fetcher.delayed.values().min().copied() {
                Some(until) => tokio::time::sleep_until(until.into()).await,
                None => followed.changed.notified().await,
            }
            continue;
        }
        let partitions = fetcher.unthrottled(partitions);
        if partitions.is_empty() {
            // Every partition waits for the follower's rate to fall.
            tokio::time::sleep(fetcher.settings.backoff).await;
            continue;
        }
        if let Err(reason) = fetcher.fetch_once(&partitions, broker_epoch, generation).await {
            tracing::debug!(leader, %reason, "replica fetch failed");
            tokio::time::sleep(fetcher.settings.backoff).await;
        }
    }
}

/// A fetcher's state: its connection to the leader, its fetch session, and
/// the partitions left out after an error, until when.
struct LeaderFetcher {
    broker: Arc<Broker>,
    leader: i32,
    /// Its fetcher id among those fetching from `leader`.
    id: u32,
    followed: Arc<Followed>,
    settings: FetchSettings,
    channel: Option<Channel>,
    delayed: HashMap<(Uuid, i32), Instant>,
    session: FetchSession,
}

impl LeaderFetcher {
    /// One fetch for `partitions` and its answer written; Err when the
    /// exchange failed (the connection and the session are dropped).
    /// `generation`: the fetcher's partitions' when `partitions` were read.
    async fn fetch_once(
        &mut self,
        partitions: &[Arc<Partition>],
        broker_epoch: i64,
        generation: u64,
    ) -> Result<(), String> {
        if self.channel.is_none() {
            self.session.reset();
            let purpose = format!("fetcher-{}", self.id);
            let channel = self.broker.connect_to_broker(self.leader, self.settings.socket_timeout, &purpose).await?;
            self.channel = Some(channel);
        }
        let (request, mut sent) = self.request(partitions, broker_epoch);
        let channel = self.channel.as_mut().ok_or("no connection")?;
        let response = match channel.call::<FetchRequest, FetchResponse>(ApiKey::Fetch, FETCH_VERSION, &request).await {
            Ok(response) => response,
            Err(reason) => {
                self.channel = None;
                return Err(reason);
            }
        };
        self.session.answered(response.error_code, response.session_id);
        if response.error_code != ErrorCode::NONE.code() {
            // A session the leader lost or refused: the next fetch is full.
            return match response.error_code {
                code if code == ErrorCode::FETCH_SESSION_ID_NOT_FOUND.code()
                    || code == ErrorCode::INVALID_FETCH_SESSION_EPOCH.code() =>
                {
                    Ok(())
                }
                code => Err(format!("the leader refused the fetch with error {code}")),
            };
        }
        let throttled = throttled_bytes(&sent, &response);
        if throttled > 0 {
            let quota = &self.broker.replicas.throttles.follower;
            quota.lock().unwrap_or_else(|e| e.into_inner()).record(throttled, crate::clock::now_ms());
        }
        // A partition handed to another fetcher meanwhile (a new
        // `num.replica.fetchers`) is that fetcher's to write.
        if self.followed.generation.load(Ordering::Acquire) != generation {
            let keys = self.followed.keys();
            sent.retain(|key, _| keys.contains(key));
        }
        for (key, error) in apply_response(&sent, response) {
            tracing::debug!(leader = self.leader, topic_id = %key.0, partition = key.1, error, "replica fetch error");
            self.delayed.insert(key, Instant::now() + self.settings.backoff);
        }
        Ok(())
    }

    /// `partitions` without those a reassignment's throttle holds back
    /// (Kafka's shouldFollowerThrottle): throttled replicas outside the
    /// ISR, while this follower's rate is over its bound.
    fn unthrottled(&self, partitions: Vec<Arc<Partition>>) -> Vec<Arc<Partition>> {
        if !partitions.iter().any(|p| p.follower_throttled()) {
            return partitions;
        }
        let quota = &self.broker.replicas.throttles.follower;
        if !quota.lock().unwrap_or_else(|e| e.into_inner()).is_exceeded(crate::clock::now_ms()) {
            return partitions;
        }
        let image = self.broker.metadata.image();
        let node_id = self.broker.node_id;
        let in_isr = |p: &Partition| {
            let topic = image.topic_by_id(&p.topic_id);
            topic.and_then(|t| t.partitions.get(p.index as usize)).is_some_and(|i| i.isr.contains(&node_id))
        };
        partitions.into_iter().filter(|p| !p.follower_throttled() || in_isr(p)).collect()
    }

    /// The Fetch for `partitions` (each from its log end, with the epoch
    /// of its last batch, which the leader checks against its own history;
    /// in a session only what changed), and what each one asked.
    fn request(
        &mut self,
        partitions: &[Arc<Partition>],
        broker_epoch: i64,
    ) -> (FetchRequest, HashMap<(Uuid, i32), Sent>) {
        let mut wanted = Vec::with_capacity(partitions.len());
        let mut sent = HashMap::with_capacity(partitions.len());
        for partition in partitions {
            let leader_epoch = partition.leader_epoch();
            let (fetch_offset, last_fetched_epoch) = partition.fetch_position();
            let log_start_offset = partition.lock_log().log_start_offset();
            wanted.push(Wanted {
                topic: partition.topic.to_string(),
                topic_id: partition.topic_id,
                fetch: FetchPartition {
                    partition: partition.index,
                    current_leader_epoch: leader_epoch,
                    fetch_offset,
                    last_fetched_epoch,
                    log_start_offset,
                    partition_max_bytes: self.settings.partition_max_bytes,
                    ..Default::default()
                },
            });
            let key = (partition.topic_id, partition.index);
            sent.insert(key, Sent { partition: partition.clone(), fetch_offset, leader_epoch });
        }
        let session = self.session.next_request(wanted);
        let settings = &self.settings;
        let request = FetchRequest {
            // From v15 the replica names itself in ReplicaState only.
            replica_id: if FETCH_VERSION >= 15 { -1 } else { self.broker.node_id },
            replica_state: ReplicaState {
                replica_id: self.broker.node_id,
                replica_epoch: broker_epoch,
                ..Default::default()
            },
            max_wait_ms: settings.wait_max_ms,
            min_bytes: settings.min_bytes,
            max_bytes: settings.response_max_bytes,
            isolation_level: READ_UNCOMMITTED,
            session_id: session.session_id,
            session_epoch: session.session_epoch,
            topics: session.topics,
            forgotten_topics_data: session.forgotten,
            ..Default::default()
        };
        (request, sent)
    }
}
