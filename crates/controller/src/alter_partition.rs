//! AlterPartition: a partition leader's ISR change, checked and applied as
//! Kafka's controller does (`ReplicationControlManager.alterPartition`).
//! The sender's broker epoch first (STALE_BROKER_EPOCH for the whole
//! request); then each partition: its leader and partition epochs against
//! the image (a newer one means this controller is behind: NOT_CONTROLLER;
//! an older leader epoch FENCED_LEADER_EPOCH, an older partition epoch
//! INVALID_UPDATE_VERSION), the sender must be the leader and in the new
//! ISR, every member a replica that is registered, unfenced, not shutting
//! down and of the broker epoch given (KIP-903, else INELIGIBLE_REPLICA).
//! An accepted change is a PartitionChangeRecord; the answer names the
//! partition as it will be.

use krabka_metadata::{MetadataImage, MetadataRecord, PartitionImage, TopicImage};
use krabka_protocol::alter_partition_request::{BrokerState, PartitionData};
use krabka_protocol::alter_partition_response::{PartitionData as PartitionAnswer, TopicData as TopicAnswer};
use krabka_protocol::{AlterPartitionRequest, AlterPartitionResponse, ErrorCode};

use crate::brokers::check_broker_epoch;
use crate::elections::{change_builder, default_directory, may_lead};
use crate::error::ApiError;
use crate::partition_change::{NO_LEADER_CHANGE, RECOVERED, RECOVERING};

/// The records an AlterPartition commits and its answer. `version` is the
/// request's: from v3 the members carry broker epochs.
pub fn plan_alter_partition(
    image: &MetadataImage,
    request: &AlterPartitionRequest,
    version: i16,
) -> Result<(Vec<MetadataRecord>, AlterPartitionResponse), ApiError> {
    check_broker_epoch(image, request.broker_id, request.broker_epoch)?;
    let mut records = Vec::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic_data in &request.topics {
        let topic = image.topic_by_id(&topic_data.topic_id);
        let partitions = topic_data
            .partitions
            .iter()
            .map(|data| match topic {
                None => refused(data.partition_index, ErrorCode::UNKNOWN_TOPIC_ID),
                Some(topic) => alter_one(image, topic, request.broker_id, version, data, &mut records),
            })
            .collect();
        topics.push(TopicAnswer { topic_id: topic_data.topic_id, partitions, ..Default::default() });
    }
    Ok((records, AlterPartitionResponse { topics, ..Default::default() }))
}

fn refused(partition_index: i32, code: ErrorCode) -> PartitionAnswer {
    PartitionAnswer { partition_index, error_code: code.code(), ..Default::default() }
}

/// One partition's change: its record pushed to `records` if it changes
/// anything, and its answer.
fn alter_one(
    image: &MetadataImage,
    topic: &TopicImage,
    broker_id: i32,
    version: i16,
    data: &PartitionData,
    records: &mut Vec<MetadataRecord>,
) -> PartitionAnswer {
    let index = data.partition_index;
    let Some(partition) = usize::try_from(index).ok().and_then(|i| topic.partitions.get(i)) else {
        return refused(index, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    };
    let members: Vec<BrokerState> = if version >= 3 {
        data.new_isr_with_epochs.clone()
    } else {
        data.new_isr
            .iter()
            .map(|&broker_id| BrokerState { broker_id, broker_epoch: -1, ..Default::default() })
            .collect()
    };
    if let Err(code) = validate(image, partition, broker_id, version, data, &members) {
        tracing::info!(topic = %topic.name, partition = index, broker = broker_id, ?code, "AlterPartition refused");
        return refused(index, code);
    }
    let directory = |r: i32| default_directory(image, r);
    let isr: Vec<i32> = members.iter().map(|m| m.broker_id).collect();
    let acceptable = |r: i32| may_lead(image, partition, r);
    let change = change_builder(image, topic, index, partition, acceptable, &directory)
        .target_isr(isr)
        .target_recovery_state(data.leader_recovery_state)
        .build();
    let mut after = partition.clone();
    if let Some(change) = change {
        after.merge(&change);
        let leader_moved = change.leader != NO_LEADER_CHANGE && change.leader != broker_id;
        records.push(MetadataRecord::PartitionChange(change));
        if leader_moved {
            // Completing a reassignment moved the leader away: the sender
            // must learn the new state from the metadata.
            return refused(index, ErrorCode::NEW_LEADER_ELECTED);
        }
    }
    PartitionAnswer {
        partition_index: index,
        error_code: 0,
        leader_id: after.leader,
        leader_epoch: after.leader_epoch,
        isr: after.isr,
        leader_recovery_state: after.leader_recovery_state,
        partition_epoch: after.partition_epoch,
        ..Default::default()
    }
}

/// Kafka's checks of one partition's change, in its order.
fn validate(
    image: &MetadataImage,
    partition: &PartitionImage,
    broker_id: i32,
    version: i16,
    data: &PartitionData,
    members: &[BrokerState],
) -> Result<(), ErrorCode> {
    if data.leader_epoch > partition.leader_epoch || data.partition_epoch > partition.partition_epoch {
        // The leader knows a newer state than this controller's image.
        return Err(ErrorCode::NOT_CONTROLLER);
    }
    if data.leader_epoch < partition.leader_epoch {
        return Err(ErrorCode::FENCED_LEADER_EPOCH);
    }
    if broker_id != partition.leader {
        return Err(ErrorCode::INVALID_REQUEST);
    }
    if data.partition_epoch < partition.partition_epoch {
        return Err(ErrorCode::INVALID_UPDATE_VERSION);
    }
    let isr: Vec<i32> = members.iter().map(|m| m.broker_id).collect();
    let mut sorted = isr.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let valid = !isr.is_empty() && sorted.len() == isr.len() && isr.iter().all(|r| partition.replicas.contains(r));
    if !valid || !isr.contains(&partition.leader) {
        return Err(ErrorCode::INVALID_REQUEST);
    }
    if data.leader_recovery_state == RECOVERING && isr.len() > 1 {
        return Err(ErrorCode::INVALID_REQUEST);
    }
    if partition.leader_recovery_state == RECOVERED && data.leader_recovery_state == RECOVERING {
        return Err(ErrorCode::INVALID_REQUEST);
    }
    let ineligible = members.iter().any(|m| {
        let registration = image.brokers.get(&m.broker_id);
        let epoch_differs =
            |b: &krabka_protocol::RegisterBrokerRecord| m.broker_epoch != -1 && b.broker_epoch != m.broker_epoch;
        !registration.is_some_and(|b| !b.in_controlled_shutdown && !b.fenced && !epoch_differs(b))
    });
    if ineligible {
        return Err(if version > 1 { ErrorCode::INELIGIBLE_REPLICA } else { ErrorCode::OPERATION_NOT_ATTEMPTED });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::alter_partition_request::TopicData;

    use crate::test_images::TOPIC;

    fn image() -> MetadataImage {
        crate::test_images::one_partition(3, &[], &[1, 2, 3], 1)
    }

    fn request(isr: &[(i32, i64)], leader_epoch: i32, partition_epoch: i32) -> AlterPartitionRequest {
        let members =
            isr.iter().map(|&(broker_id, broker_epoch)| BrokerState { broker_id, broker_epoch, ..Default::default() });
        AlterPartitionRequest {
            broker_id: 1,
            broker_epoch: 10,
            topics: vec![TopicData {
                topic_id: TOPIC,
                partitions: vec![PartitionData {
                    partition_index: 0,
                    leader_epoch,
                    partition_epoch,
                    new_isr_with_epochs: members.collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn answer(image: &MetadataImage, request: &AlterPartitionRequest) -> (Vec<MetadataRecord>, PartitionAnswer) {
        let (records, response) = plan_alter_partition(image, request, 3).unwrap();
        (records, response.topics[0].partitions[0].clone())
    }

    #[test]
    fn a_shrink_is_committed_and_answered_with_the_new_partition_epoch() {
        let image = image();
        let (records, answer) = answer(&image, &request(&[(1, 10), (3, 30)], 0, 0));
        assert_eq!(records.len(), 1, "{answer:?}");
        assert_eq!((answer.error_code, answer.isr, answer.partition_epoch, answer.leader_epoch), (0, vec![1, 3], 1, 0));
    }

    #[test]
    fn stale_epochs_and_ineligible_members_are_refused_as_kafka_refuses_them() {
        let image = image();
        let code = |request: &AlterPartitionRequest| answer(&image, request).1.error_code;
        assert_eq!(code(&request(&[(1, 10), (2, 21)], 0, 0)), ErrorCode::INELIGIBLE_REPLICA.code(), "KIP-903");
        assert_eq!(code(&request(&[(1, 10)], 1, 0)), ErrorCode::NOT_CONTROLLER.code());
        assert_eq!(code(&request(&[(2, 20)], 0, 0)), ErrorCode::INVALID_REQUEST.code(), "leader not in ISR");
        assert_eq!(code(&request(&[(1, 10), (4, 40)], 0, 0)), ErrorCode::INVALID_REQUEST.code(), "not a replica");
        let mut newer = image.clone();
        let change = krabka_protocol::PartitionChangeRecord {
            topic_id: TOPIC,
            partition_id: 0,
            leader: 1,
            ..Default::default()
        };
        newer.apply(&MetadataRecord::PartitionChange(change)).unwrap();
        let (_, stale) = answer(&newer, &request(&[(1, 10)], 0, 1));
        assert_eq!(stale.error_code, ErrorCode::FENCED_LEADER_EPOCH.code());
        let (_, stale) = answer(&newer, &request(&[(1, 10)], 1, 0));
        assert_eq!(stale.error_code, ErrorCode::INVALID_UPDATE_VERSION.code());
        let mut wrong = request(&[(1, 10)], 0, 0);
        wrong.broker_epoch = 11;
        assert_eq!(plan_alter_partition(&image, &wrong, 3).unwrap_err().code, ErrorCode::STALE_BROKER_EPOCH.code());
    }
}
