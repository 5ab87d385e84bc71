//! The ISR changes this broker's leaders make, sent to the active
//! controller in AlterPartition (Kafka's AlterPartitionManager): changes
//! queued by the partitions go out together, one request in flight, each
//! partition's answer handed back to it. A periodic check
//! (`replica.lag.time.max.ms` / 2, as Kafka's isr-expiration task) queues
//! the ISRs that lose a lagging follower.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use krabka_protocol::alter_partition_request::{BrokerState, PartitionData, TopicData};
use krabka_protocol::{AlterPartitionRequest, AlterPartitionResponse, ApiKey, ErrorCode, Uuid};

use crate::active_controller;
use crate::broker::Broker;
use crate::clock::now_ms;
use crate::replica::{IsrProposal, Partition};

/// AlterPartition v3: ISR members with their broker epochs (KIP-903).
const ALTER_PARTITION_VERSION: i16 = 3;
/// Kafka's LeaderRecoveryState.RECOVERED.
const RECOVERED: i8 = 0;

/// Sends the queued ISR changes until the broker shuts down.
pub async fn send_isr_changes(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    loop {
        let batch = tokio::select! {
            batch = broker.replicas.isr_changes.next_batch() => batch,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        let now = now_ms();
        let proposed: Vec<(Arc<Partition>, IsrProposal, Vec<i32>)> = batch
            .into_iter()
            .filter_map(|(partition, isr)| {
                partition.propose_isr(isr.clone(), now).map(|proposal| (partition, proposal, isr))
            })
            .collect();
        if proposed.is_empty() {
            continue;
        }
        for (partition, _, isr) in &proposed {
            tracing::debug!(topic = %partition.topic, partition = partition.index, ?isr, "proposing an ISR change");
        }
        let answered = send(&broker, &proposed).await;
        let now = now_ms();
        for (partition, proposal, _) in &proposed {
            let committed = match &answered {
                Ok(response) => committed_isr(response, partition),
                Err(reason) => {
                    tracing::debug!(topic = %partition.topic, partition = partition.index, %reason, "ISR change not sent");
                    None
                }
            };
            if let Some((isr, _)) = &committed {
                tracing::info!(topic = %partition.topic, partition = partition.index, ?isr, "ISR changed");
            }
            partition.isr_answered(committed, proposal.leader_epoch, now);
        }
        if answered.is_err() {
            // The controller is moving or unreachable: the leaders propose again.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One AlterPartition for every proposal, to whichever controller is active.
async fn send(
    broker: &Broker,
    proposed: &[(Arc<Partition>, IsrProposal, Vec<i32>)],
) -> Result<AlterPartitionResponse, String> {
    let broker_epoch = broker.membership.epoch().ok_or("not registered yet")?;
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    for (partition, proposal, isr) in proposed {
        debug_assert_eq!(proposal.members.len(), isr.len());
        topics.entry(partition.topic_id).or_default().push(PartitionData {
            partition_index: partition.index,
            leader_epoch: proposal.leader_epoch,
            new_isr_with_epochs: proposal
                .members
                .iter()
                .map(|&(broker_id, broker_epoch)| BrokerState { broker_id, broker_epoch, ..Default::default() })
                .collect(),
            leader_recovery_state: RECOVERED,
            partition_epoch: proposal.partition_epoch,
            ..Default::default()
        });
    }
    let request = AlterPartitionRequest {
        broker_id: broker.node_id,
        broker_epoch,
        topics: topics
            .into_iter()
            .map(|(topic_id, partitions)| TopicData { topic_id, partitions, ..Default::default() })
            .collect(),
        ..Default::default()
    };
    let mut channel = active_controller::connect(broker, "alter-partition").await?;
    let response: AlterPartitionResponse =
        channel.call(ApiKey::AlterPartition, ALTER_PARTITION_VERSION, &request).await?;
    if response.error_code != ErrorCode::NONE.code() {
        return Err(format!("AlterPartition answered error {}", response.error_code));
    }
    Ok(response)
}

/// The ISR and partition epoch the controller committed for `partition`,
/// if it took the change.
fn committed_isr(response: &AlterPartitionResponse, partition: &Partition) -> Option<(Vec<i32>, i32)> {
    let topic = response.topics.iter().find(|t| t.topic_id == partition.topic_id)?;
    let answer = topic.partitions.iter().find(|p| p.partition_index == partition.index)?;
    if answer.error_code != ErrorCode::NONE.code() {
        tracing::debug!(topic = %partition.topic, partition = partition.index, error = answer.error_code, "ISR change refused");
        return None;
    }
    Some((answer.isr.clone(), answer.partition_epoch))
}

/// Queues the ISRs that lose a follower not caught up for
/// `replica.lag.time.max.ms`, every half of it, until shutdown.
pub async fn shrink_lagging_isrs(broker: Arc<Broker>) {
    let lag_ms = broker.config.number("replica.lag.time.max.ms", 30_000).max(1);
    let period = Duration::from_millis((lag_ms / 2).max(1) as u64);
    let mut shutdown = broker.shutdown_signal();
    loop {
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let now = now_ms();
        for partition in broker.replicas.led_partitions() {
            if let Some(isr) = partition.isr_to_shrink(now, lag_ms) {
                tracing::info!(topic = %partition.topic, partition = partition.index, ?isr, "shrinking the ISR");
                broker.replicas.isr_changes.push(partition, isr);
            }
        }
    }
}
