//! AssignReplicasToDirs (KIP-858): a broker with several log directories
//! names the one each of its replicas lives in, and the controller writes
//! it into the partition's `directories`. A replica assigned to a
//! directory the broker no longer lists online leaves the ISR and may not
//! lead, as in Kafka's `handleAssignReplicasToDirs`. The other half, a
//! directory reported offline in a BrokerHeartbeat, is
//! `elections::offline_directory_updates`.

use krabka_metadata::features::{DIRECTORY_ASSIGNMENT_LEVEL, METADATA_VERSION};
use krabka_metadata::{directory_id, MetadataImage, MetadataRecord};
use krabka_protocol::assign_replicas_to_dirs_request::PartitionData;
use krabka_protocol::assign_replicas_to_dirs_response as response;
use krabka_protocol::{AssignReplicasToDirsRequest, AssignReplicasToDirsResponse, ErrorCode, Uuid};

use crate::brokers::check_broker_epoch;
use crate::elections::{change_builder, default_directory, may_lead};
use crate::error::ApiError;

/// The records assigning the broker's replicas to the directories it
/// names, and the answer per partition (UNKNOWN_TOPIC_ID,
/// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER for a partition the
/// broker holds no replica of).
pub fn plan_assign_replicas_to_dirs(
    image: &MetadataImage,
    request: &AssignReplicasToDirsRequest,
) -> Result<(Vec<MetadataRecord>, AssignReplicasToDirsResponse), ApiError> {
    if image.features.get(METADATA_VERSION).is_some_and(|&level| level < DIRECTORY_ASSIGNMENT_LEVEL) {
        let message = "Directory assignment is not supported yet.";
        return Err(ApiError::new(ErrorCode::UNSUPPORTED_VERSION.code(), message.to_string()));
    }
    let broker = check_broker_epoch(image, request.broker_id, request.broker_epoch)?;
    let mut records = Vec::new();
    let mut answer = AssignReplicasToDirsResponse::default();
    for directory in &request.directories {
        let online = directory_id::is_online(directory.id, &broker.log_dirs);
        let mut answered = response::DirectoryData { id: directory.id, ..Default::default() };
        for topic in &directory.topics {
            let partitions = topic.partitions.iter().map(|p| {
                let assigned = assign(image, request.broker_id, (topic.topic_id, p), (directory.id, online));
                let (record, error) = match assigned {
                    Ok(record) => (record, ErrorCode::NONE),
                    Err(error) => (None, error),
                };
                records.extend(record);
                response::PartitionData {
                    partition_index: p.partition_index,
                    error_code: error.code(),
                    ..Default::default()
                }
            });
            let partitions = partitions.collect();
            answered.topics.push(response::TopicData { topic_id: topic.topic_id, partitions, ..Default::default() });
        }
        answer.directories.push(answered);
    }
    Ok((records, answer))
}

/// One replica's assignment: the partition change (None when nothing
/// changes), or why it is refused.
fn assign(
    image: &MetadataImage,
    broker_id: i32,
    (topic_id, requested): (Uuid, &PartitionData),
    (directory, online): (Uuid, bool),
) -> Result<Option<MetadataRecord>, ErrorCode> {
    let topic = image.topic_by_id(&topic_id).ok_or(ErrorCode::UNKNOWN_TOPIC_ID)?;
    let index = requested.partition_index;
    let partition = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)?;
    if !partition.replicas.contains(&broker_id) {
        return Err(ErrorCode::NOT_LEADER_OR_FOLLOWER);
    }
    let defaults = |r: i32| default_directory(image, r);
    // In an offline directory the replica is out of the ISR and may not
    // lead (Kafka's "offline-dir-assignment" update), in the same change.
    let acceptable = |r: i32| may_lead(image, partition, r) && (online || r != broker_id);
    let mut builder = change_builder(image, topic, index, partition, acceptable, &defaults);
    builder = builder.target_directory(broker_id, directory);
    if !online {
        builder = builder.target_isr(partition.isr.iter().copied().filter(|&r| r != broker_id).collect());
    }
    Ok(builder.build().map(MetadataRecord::PartitionChange))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_images::{one_partition, TOPIC};
    use krabka_protocol::assign_replicas_to_dirs_request::{DirectoryData, TopicData};

    const DIR_A: Uuid = Uuid([0xa; 16]);
    const DIR_B: Uuid = Uuid([0xb; 16]);

    /// Brokers 1-3, t-0 on all three led by 1; broker 1 with DIR_A and DIR_B.
    fn image() -> MetadataImage {
        let mut image = one_partition(3, &[], &[1, 2, 3], 1);
        image.brokers.get_mut(&1).unwrap().log_dirs = vec![DIR_A, DIR_B];
        image
    }

    fn request(directory: Uuid, topic_id: Uuid, partition: i32) -> AssignReplicasToDirsRequest {
        let partitions = vec![PartitionData { partition_index: partition, ..Default::default() }];
        let topics = vec![TopicData { topic_id, partitions, ..Default::default() }];
        AssignReplicasToDirsRequest {
            broker_id: 1,
            broker_epoch: 10,
            directories: vec![DirectoryData { id: directory, topics, ..Default::default() }],
            ..Default::default()
        }
    }

    fn error_of(answer: &AssignReplicasToDirsResponse) -> i16 {
        answer.directories[0].topics[0].partitions[0].error_code
    }

    #[test]
    fn an_assignment_names_the_directory_of_the_brokers_replica() {
        let mut image = image();
        let (records, answer) = plan_assign_replicas_to_dirs(&image, &request(DIR_B, TOPIC, 0)).unwrap();
        assert_eq!(error_of(&answer), 0);
        assert_eq!(records.len(), 1);
        image.apply(&records[0]).unwrap();
        let partition = &image.topic_by_id(&TOPIC).unwrap().partitions[0];
        assert_eq!(partition.directories[0], DIR_B);
        assert_eq!((partition.leader, partition.isr.clone()), (1, vec![1, 2, 3]), "leadership unchanged");
        // The same assignment again changes nothing.
        let (records, _) = plan_assign_replicas_to_dirs(&image, &request(DIR_B, TOPIC, 0)).unwrap();
        assert!(records.is_empty());
    }

    #[test]
    fn a_replica_assigned_to_an_offline_directory_leaves_the_isr_and_leadership() {
        let mut image = image();
        let offline = Uuid([0xc; 16]);
        let (records, answer) = plan_assign_replicas_to_dirs(&image, &request(offline, TOPIC, 0)).unwrap();
        assert_eq!(error_of(&answer), 0);
        image.apply(&records[0]).unwrap();
        let partition = &image.topic_by_id(&TOPIC).unwrap().partitions[0];
        assert_eq!(partition.directories[0], offline);
        assert_eq!(partition.leader, 2);
        assert_eq!(partition.isr, vec![2, 3]);
    }

    #[test]
    fn unknown_partitions_and_other_brokers_replicas_are_refused() {
        let mut image = image();
        let unknown_topic = plan_assign_replicas_to_dirs(&image, &request(DIR_A, Uuid([9; 16]), 0)).unwrap();
        assert_eq!(error_of(&unknown_topic.1), ErrorCode::UNKNOWN_TOPIC_ID.code());
        let unknown_partition = plan_assign_replicas_to_dirs(&image, &request(DIR_A, TOPIC, 5)).unwrap();
        assert_eq!(error_of(&unknown_partition.1), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code());
        image.topics.get_mut("t").map(std::sync::Arc::make_mut).unwrap().partitions[0].replicas = vec![2, 3];
        let not_a_replica = plan_assign_replicas_to_dirs(&image, &request(DIR_A, TOPIC, 0)).unwrap();
        assert_eq!(error_of(&not_a_replica.1), ErrorCode::NOT_LEADER_OR_FOLLOWER.code());
        let mut stale = request(DIR_A, TOPIC, 0);
        stale.broker_epoch = 9;
        let refused = plan_assign_replicas_to_dirs(&image, &stale).unwrap_err();
        assert_eq!(refused.code, ErrorCode::STALE_BROKER_EPOCH.code());
    }
}
