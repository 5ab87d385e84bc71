//! The broker's side of its log directories' events (KIP-858): a failed
//! directory taken offline (`ReplicaManager::take_offline`, then reported
//! by the lifecycle's next heartbeat), the directory of each replica
//! sent to the active controller in AssignReplicasToDirs (Kafka's
//! `AssignmentsManager`), batched, one request in flight, retried until
//! the controller takes it, and the replicas moving between directories
//! copied and swapped (KIP-113, Kafka's `ReplicaAlterLogDirsThread`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use krabka_protocol::assign_replicas_to_dirs_request::{DirectoryData, PartitionData, TopicData};
use krabka_protocol::{ApiKey, AssignReplicasToDirsRequest, AssignReplicasToDirsResponse, ErrorCode, Uuid};

use crate::active_controller;
use crate::broker::Broker;
use crate::replica::dir_assignments::ReplicaKey;
use crate::replica::Mover;

/// The only version Kafka 4.3.1 has.
const ASSIGN_REPLICAS_TO_DIRS_VERSION: i16 = 0;
/// How long to wait before sending again after a failure.
const RETRY: Duration = Duration::from_millis(500);

/// Takes failed log directories offline until the broker shuts down.
pub async fn take_failed_dirs_offline(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    loop {
        let failed = tokio::select! {
            failed = broker.replicas.log_dirs.next_failed() => failed,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        broker.replicas.take_offline(&failed);
    }
}

/// How long the mover waits between rounds when no bytes were copied
/// (every move caught up, waiting for the controller).
const MOVE_IDLE: Duration = Duration::from_millis(50);

/// The movers of replicas between log directories (Kafka's
/// `ReplicaAlterLogDirsThread`s): `num.replica.alter.log.dirs.threads` of
/// them, by default one per log directory as in Kafka, each moving the
/// partitions Kafka's `getFetcherId` gives it.
pub fn movers(broker: &Arc<Broker>) -> impl Iterator<Item = impl std::future::Future<Output = ()>> + '_ {
    let configured = broker.config.number("num.replica.alter.log.dirs.threads", 0);
    let count = if configured > 0 { configured as u32 } else { broker.config.log_dirs.len().max(1) as u32 };
    (0..count).map(move |id| move_replicas(Arc::clone(broker), Mover { id, count }))
}

/// Copies and swaps the replicas of `mover` moving between log
/// directories until the broker shuts down: rounds back to back while
/// bytes are copied, on the blocking pool (file I/O).
async fn move_replicas(broker: Arc<Broker>, mover: Mover) {
    let mut shutdown = broker.shutdown_signal();
    let mut started = broker.replicas.log_dir_moves.subscribe();
    loop {
        let worker = Arc::clone(&broker);
        let round = tokio::task::spawn_blocking(move || worker.replicas.move_round_of(&worker.metadata.image(), mover))
            .await
            .unwrap_or_default();
        if round.copied > 0 {
            tokio::task::yield_now().await;
            continue;
        }
        let pause = async {
            if round.moving > 0 {
                tokio::time::sleep(MOVE_IDLE).await
            } else {
                let _ = started.changed().await;
            }
        };
        tokio::select! {
            _ = pause => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// Sends the queued directory assignments until the broker shuts down.
pub async fn send_dir_assignments(broker: Arc<Broker>) {
    if broker.metadata.quorum().is_none() {
        return;
    }
    let mut shutdown = broker.shutdown_signal();
    loop {
        let batch = tokio::select! {
            batch = broker.replicas.dir_assignments.next_batch() => batch,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        match send(&broker, &batch).await {
            Ok(retry) if retry.is_empty() => {}
            Ok(retry) => {
                broker.replicas.dir_assignments.requeue(retry);
                tokio::time::sleep(RETRY).await;
            }
            Err(reason) => {
                tracing::debug!(%reason, "directory assignments not sent");
                broker.replicas.dir_assignments.requeue(batch);
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// One AssignReplicasToDirs for `batch`; what is worth sending again.
async fn send(broker: &Broker, batch: &BTreeMap<ReplicaKey, Uuid>) -> Result<BTreeMap<ReplicaKey, Uuid>, String> {
    let broker_epoch = broker.membership.epoch().ok_or("not registered yet")?;
    let mut by_directory: BTreeMap<Uuid, BTreeMap<Uuid, Vec<i32>>> = BTreeMap::new();
    for (&(topic_id, partition), &directory) in batch {
        by_directory.entry(directory).or_default().entry(topic_id).or_default().push(partition);
    }
    let directories = by_directory
        .into_iter()
        .map(|(id, topics)| DirectoryData {
            id,
            topics: topics
                .into_iter()
                .map(|(topic_id, partitions)| TopicData {
                    topic_id,
                    partitions: partitions
                        .into_iter()
                        .map(|partition_index| PartitionData { partition_index, ..Default::default() })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let request =
        AssignReplicasToDirsRequest { broker_id: broker.node_id, broker_epoch, directories, ..Default::default() };
    let mut channel = active_controller::connect(broker, "assign-dirs").await?;
    let response: AssignReplicasToDirsResponse =
        channel.call(ApiKey::AssignReplicasToDirs, ASSIGN_REPLICAS_TO_DIRS_VERSION, &request).await?;
    if response.error_code != ErrorCode::NONE.code() {
        return Err(format!("AssignReplicasToDirs answered error {}", response.error_code));
    }
    Ok(to_retry(batch, &response))
}

/// The assignments of `batch` refused for a reason that may pass
/// (Kafka's AssignmentsManager retries all but the replicas the
/// controller no longer has: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
/// NOT_LEADER_OR_FOLLOWER, a moved replica).
fn to_retry(batch: &BTreeMap<ReplicaKey, Uuid>, response: &AssignReplicasToDirsResponse) -> BTreeMap<ReplicaKey, Uuid> {
    let gone = [
        ErrorCode::UNKNOWN_TOPIC_ID.code(),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
        ErrorCode::NOT_LEADER_OR_FOLLOWER.code(),
    ];
    let mut retry = BTreeMap::new();
    for directory in &response.directories {
        for topic in &directory.topics {
            for partition in &topic.partitions {
                let key = (topic.topic_id, partition.partition_index);
                let code = partition.error_code;
                if code == ErrorCode::NONE.code() || gone.contains(&code) {
                    continue;
                }
                tracing::debug!(topic_id = %topic.topic_id, partition = key.1, error = code, "directory assignment refused");
                if let Some(&directory) = batch.get(&key) {
                    retry.insert(key, directory);
                }
            }
        }
    }
    retry
}
