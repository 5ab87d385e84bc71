//! Followers copying their leaders (Kafka's ReplicaFetcherManager and
//! fetcher threads): one fetcher per leader broker, each a task that sends
//! that broker Fetch requests as a replica (ReplicaState with this broker's
//! id and epoch, each partition's last fetched epoch) and writes what comes
//! back as the leader sent it. A diverging epoch in the answer (KIP-320)
//! truncates the follower's log to where it agrees with the leader's; a
//! fetch offset below the leader's log start starts the log afresh there.
//!
//! The set of fetchers follows the partitions' roles: the replica manager
//! signals after every metadata change, and the supervisor moves each
//! followed partition to its leader's fetcher.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use krabka_protocol::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use krabka_protocol::fetch_response::PartitionData;
use krabka_protocol::{ApiKey, ErrorCode, FetchRequest, FetchResponse, Uuid};
use tokio::sync::Notify;

use crate::broker::Broker;
use crate::clock::now_ms;
use crate::quorum::Channel;
use crate::replica::{FetchedFromLeader, Partition};
use krabka_replication::divergence::follower_truncation;

/// Fetch v17: topic ids, ReplicaState (v15), ReplicaDirectoryId; spoken by
/// krabka and Kafka 4.x brokers alike.
const FETCH_VERSION: i16 = 17;
/// Kafka's isolation level for replicas (they read everything).
const READ_UNCOMMITTED: i8 = 0;
/// A sessionless fetch (Kafka's FINAL_EPOCH with session 0).
const SESSIONLESS_EPOCH: i32 = -1;

/// The partitions one fetcher follows, shared with its supervisor.
#[derive(Default)]
struct Followed {
    partitions: Mutex<Vec<Arc<Partition>>>,
    changed: Notify,
}

struct Fetcher {
    followed: Arc<Followed>,
    task: tokio::task::JoinHandle<()>,
}

/// Keeps one fetcher per leader this broker follows, until shutdown.
pub async fn run_replica_fetchers(broker: Arc<Broker>) {
    let mut fetchers: HashMap<i32, Fetcher> = HashMap::new();
    let mut shutdown = broker.shutdown_signal();
    loop {
        let mut by_leader: HashMap<i32, Vec<Arc<Partition>>> = HashMap::new();
        for (leader, partition) in broker.replicas.followed_partitions() {
            by_leader.entry(leader).or_default().push(partition);
        }
        fetchers.retain(|leader, fetcher| {
            let keep = by_leader.contains_key(leader);
            if !keep {
                fetcher.task.abort();
            }
            keep
        });
        for (leader, partitions) in by_leader {
            let fetcher = fetchers.entry(leader).or_insert_with(|| {
                let followed = Arc::new(Followed::default());
                let task = tokio::spawn(fetch_from(broker.clone(), leader, followed.clone()));
                Fetcher { followed, task }
            });
            *fetcher.followed.partitions.lock().unwrap_or_else(|e| e.into_inner()) = partitions;
            fetcher.followed.changed.notify_one();
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
async fn fetch_from(broker: Arc<Broker>, leader: i32, followed: Arc<Followed>) {
    let settings = FetchSettings::of(&broker);
    let mut channel: Option<Channel> = None;
    // Partitions whose last answer was an error, left out until then.
    let mut delayed: HashMap<(Uuid, i32), Instant> = HashMap::new();
    loop {
        let now = Instant::now();
        delayed.retain(|_, until| *until > now);
        let partitions: Vec<Arc<Partition>> = {
            let all = followed.partitions.lock().unwrap_or_else(|e| e.into_inner());
            all.iter().filter(|p| !delayed.contains_key(&(p.topic_id, p.index))).cloned().collect()
        };
        let Some(broker_epoch) = broker.membership.epoch() else {
            tokio::time::sleep(settings.backoff).await;
            continue;
        };
        if partitions.is_empty() {
            let next = delayed.values().min().copied();
            match next {
                Some(until) => tokio::time::sleep_until(until.into()).await,
                None => followed.changed.notified().await,
            }
            continue;
        }
        if channel.is_none() {
            match connect(&broker, leader, settings.socket_timeout).await {
                Ok(connected) => channel = Some(connected),
                Err(reason) => {
                    tracing::debug!(leader, %reason, "cannot reach the leader to fetch from");
                    tokio::time::sleep(settings.backoff).await;
                    continue;
                }
            }
        }
        let (request, sent) = fetch_request(&broker, &settings, broker_epoch, &partitions);
        let exchanged = match channel.as_mut() {
            Some(ch) => ch.call::<FetchRequest, FetchResponse>(ApiKey::Fetch, FETCH_VERSION, &request).await,
            None => continue,
        };
        match exchanged {
            Ok(response) if response.error_code == ErrorCode::NONE.code() => {
                for (key, error) in apply_response(&sent, response) {
                    tracing::debug!(leader, topic_id = %key.0, partition = key.1, error, "replica fetch error");
                    delayed.insert(key, Instant::now() + settings.backoff);
                }
            }
            Ok(response) => {
                tracing::debug!(leader, error = response.error_code, "replica fetch refused");
                tokio::time::sleep(settings.backoff).await;
            }
            Err(reason) => {
                tracing::debug!(leader, %reason, "replica fetch failed");
                channel = None;
                tokio::time::sleep(settings.backoff).await;
            }
        }
    }
}

/// A connection to `leader`'s inter-broker listener, as the image lists it.
async fn connect(broker: &Broker, leader: i32, timeout: Duration) -> Result<Channel, String> {
    let image = broker.metadata.image();
    let registration = image.brokers.get(&leader).ok_or("the leader is not registered")?;
    let listener = &broker.config.inter_broker_listener_name;
    let endpoint = registration
        .end_points
        .iter()
        .find(|e| &e.name == listener)
        .or_else(|| registration.end_points.first())
        .ok_or("the leader registered no listener")?;
    let client_id = format!("broker-{}-fetcher-{leader}", broker.node_id);
    Channel::connect(&endpoint.host, endpoint.port, timeout, client_id).await
}

/// What was asked of one partition, to match its answer with.
struct Sent {
    partition: Arc<Partition>,
    fetch_offset: i64,
    leader_epoch: i32,
}

/// The Fetch for `partitions`: from each one's log end, with the epoch of
/// its last batch (the leader checks it against its own history).
fn fetch_request(
    broker: &Broker,
    settings: &FetchSettings,
    broker_epoch: i64,
    partitions: &[Arc<Partition>],
) -> (FetchRequest, HashMap<(Uuid, i32), Sent>) {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut sent = HashMap::with_capacity(partitions.len());
    for partition in partitions {
        let leader_epoch = partition.leader_epoch();
        let (fetch_offset, last_fetched_epoch) = partition.fetch_position();
        let log_start_offset = partition.lock_log().log_start_offset();
        let wanted = FetchPartition {
            partition: partition.index,
            current_leader_epoch: leader_epoch,
            fetch_offset,
            last_fetched_epoch,
            log_start_offset,
            partition_max_bytes: settings.partition_max_bytes,
            ..Default::default()
        };
        match topics.iter_mut().find(|t| t.topic_id == partition.topic_id) {
            Some(topic) => topic.partitions.push(wanted),
            None => topics.push(FetchTopic {
                topic: partition.topic.to_string(),
                topic_id: partition.topic_id,
                partitions: vec![wanted],
                ..Default::default()
            }),
        }
        sent.insert(
            (partition.topic_id, partition.index),
            Sent { partition: partition.clone(), fetch_offset, leader_epoch },
        );
    }
    let request = FetchRequest {
        // From v15 the replica names itself in ReplicaState only.
        replica_id: if FETCH_VERSION >= 15 { -1 } else { broker.node_id },
        replica_state: ReplicaState { replica_id: broker.node_id, replica_epoch: broker_epoch, ..Default::default() },
        max_wait_ms: settings.wait_max_ms,
        min_bytes: settings.min_bytes,
        max_bytes: settings.response_max_bytes,
        isolation_level: READ_UNCOMMITTED,
        session_id: 0,
        session_epoch: SESSIONLESS_EPOCH,
        topics,
        ..Default::default()
    };
    (request, sent)
}

/// Writes each partition's answer; the partitions that answered an error,
/// with it, to be left out of fetches for a backoff.
fn apply_response(sent: &HashMap<(Uuid, i32), Sent>, response: FetchResponse) -> Vec<((Uuid, i32), i16)> {
    let mut failed = Vec::new();
    let now = now_ms();
    for topic in response.responses {
        for data in topic.partitions {
            let key = (topic.topic_id, data.partition_index);
            let Some(sent) = sent.get(&key) else { continue };
            if let Err(error) = apply_partition(sent, data, now) {
                failed.push((key, error));
            }
        }
    }
    failed
}

/// One partition's answer: records appended, a divergence truncated, an
/// offset out of range resolved; Err with the error code otherwise.
fn apply_partition(sent: &Sent, data: PartitionData, now: i64) -> Result<(), i16> {
    let partition = &sent.partition;
    if partition.leader_epoch() != sent.leader_epoch || partition.is_led_here() {
        // The partition changed hands while the fetch was out: its answer is stale.
        return Ok(());
    }
    let storage_error = |e: &dyn std::fmt::Display| {
        tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "follower write failed");
        ErrorCode::KAFKA_STORAGE_ERROR.code()
    };
    match data.error_code {
        0 if data.diverging_epoch.epoch >= 0 && data.diverging_epoch.end_offset >= 0 => {
            let (epoch, leader_end) = (data.diverging_epoch.epoch, data.diverging_epoch.end_offset);
            let (local, local_log_end) = partition.end_offset_for_epoch(epoch);
            let offset = follower_truncation(leader_end, local, local_log_end);
            tracing::info!(topic = %partition.topic, partition = partition.index, epoch, offset, "truncating a diverged follower");
            partition.truncate_to(offset, now).map_err(|e| storage_error(&e))
        }
        0 => {
            let fetched = FetchedFromLeader {
                fetch_offset: sent.fetch_offset,
                records: whole_batches(data.records.unwrap_or_default()),
                leader_high_watermark: data.high_watermark,
                leader_log_start: data.log_start_offset,
            };
            match partition.append_from_leader(&fetched, now) {
                Ok(_) => Ok(()),
                Err(crate::replica::AppendError::NotLeader) => Ok(()),
                Err(e) => Err(storage_error(&e)),
            }
        }
        code if code == ErrorCode::OFFSET_OUT_OF_RANGE.code() => {
            let outcome = if data.log_start_offset > sent.fetch_offset {
                partition.truncate_fully_and_start_at(data.log_start_offset, now)
            } else {
                // Past the leader's end: what it has not got is not committed.
                partition.truncate_to(data.high_watermark.max(0), now)
            };
            outcome.map_err(|e| storage_error(&e))
        }
        code => Err(code),
    }
}

/// The whole record batches at the front of `records`: a leader may cut
/// its answer inside the last batch (Kafka's does), which is fetched again.
fn whole_batches(records: Bytes) -> Bytes {
    // A batch is its base offset (8 bytes) and length (4), then that many bytes.
    const HEADER: usize = 12;
    let mut end = 0;
    while records.len() >= end + HEADER {
        let length = i32::from_be_bytes(records[end + 8..end + 12].try_into().expect("four bytes"));
        let Ok(length) = usize::try_from(length) else { break };
        if records.len() < end + HEADER + length {
            break;
        }
        end += HEADER + length;
    }
    records.slice(..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_cut_short_at_the_end_is_left_for_the_next_fetch() {
        let batch = |length: i32| {
            let mut b = vec![0u8; 8];
            b.extend_from_slice(&length.to_be_bytes());
            b.extend(std::iter::repeat_n(7u8, length as usize));
            b
        };
        let mut records = batch(20);
        records.extend(batch(5));
        let whole = records.len();
        records.extend(&batch(30)[..25]);
        assert_eq!(whole_batches(Bytes::from(records.clone())).len(), whole);
        assert_eq!(whole_batches(Bytes::from(records[..10].to_vec())).len(), 0);
        assert_eq!(whole_batches(Bytes::new()).len(), 0);
    }
}
