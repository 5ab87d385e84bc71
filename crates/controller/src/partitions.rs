//! Partitions: the record of a new partition (placed by `placement`), and
//! CreatePartitions' validation and records.

use std::collections::HashSet;

use krabka_metadata::features::{DIRECTORY_ASSIGNMENT_LEVEL, METADATA_VERSION};
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::create_partitions_request::CreatePartitionsTopic;
use krabka_protocol::create_partitions_response::CreatePartitionsTopicResult;
use krabka_protocol::{CreatePartitionsRequest, ErrorCode, PartitionRecord, Uuid};

use crate::budget::RecordBudget;
use crate::elections::default_directory;
use crate::error::{ApiError, MutationQuota};
use crate::placement::{PartitionAssignment, Placement, Placer};

/// A new partition of `topic_id` where `assignment` puts it. Under a
/// metadata.version with directories (KIP-858) each replica's directory is
/// its broker's default, as Kafka's controller records it: the broker's
/// only one, or UNASSIGNED until a broker with several names it.
pub fn partition_record(
    image: &MetadataImage,
    topic_id: Uuid,
    partition_id: i32,
    assignment: &PartitionAssignment,
) -> MetadataRecord {
    debug_assert!(
        assignment.isr.contains(&assignment.leader) && assignment.isr.iter().all(|id| assignment.replicas.contains(id))
    );
    let recorded = image.features.get(METADATA_VERSION).is_some_and(|&level| level >= DIRECTORY_ASSIGNMENT_LEVEL);
    let directories = if recorded {
        assignment.replicas.iter().map(|&broker| default_directory(image, broker)).collect()
    } else {
        Vec::new()
    };
    MetadataRecord::Partition(PartitionRecord {
        partition_id,
        topic_id,
        replicas: assignment.replicas.clone(),
        isr: assignment.isr.clone(),
        leader: assignment.leader,
        leader_epoch: 0,
        partition_epoch: 0,
        directories,
        ..Default::default()
    })
}

/// The records adding the partitions a CreatePartitions asks for, and each
/// topic's result, in request order. Too many new partitions fail the whole
/// request, before they are built; validate-only requests build none.
pub fn plan_create_partitions(
    image: &MetadataImage,
    request: &CreatePartitionsRequest,
    placement: Placement,
    quota: MutationQuota<'_>,
) -> Result<(Vec<MetadataRecord>, Vec<CreatePartitionsTopicResult>), ApiError> {
    let mut placer = Placer::new(image, placement);
    let mut records = Vec::new();
    let mut budget = RecordBudget::default();
    let mut results = Vec::with_capacity(request.topics.len());
    let mut seen = HashSet::new();
    for topic in &request.topics {
        let checked = if seen.insert(topic.name.as_str()) {
            check_new_partitions(image, topic)
        } else {
            Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), "Duplicate topic name."))
        };
        let mut outcome = Ok(());
        if let Ok((topic_id, current)) = checked {
            if let Err(throttled) = quota((topic.count - current) as usize) {
                results.push(CreatePartitionsTopicResult {
                    name: topic.name.clone(),
                    error_code: throttled.code,
                    error_message: Some(throttled.message),
                    ..Default::default()
                });
                continue;
            }
            budget.take((topic.count - current) as usize)?;
            outcome = new_partitions(image, &mut placer, topic, current).map(|assignments| {
                if !request.validate_only {
                    let numbered = assignments.iter().zip(current..);
                    records.extend(numbered.map(|(assignment, p)| partition_record(image, topic_id, p, assignment)));
                }
            });
        } else if let Err(e) = checked {
            outcome = Err(e);
        }
        let (error_code, error_message) = match outcome {
            Ok(_) => (ErrorCode::NONE.code(), None),
            Err(e) => (e.code, Some(e.message)),
        };
        results.push(CreatePartitionsTopicResult {
            name: topic.name.clone(),
            error_code,
            error_message,
            ..Default::default()
        });
    }
    Ok((records, results))
}

/// Where the partitions `topic` adds to its `current` ones go: its manual
/// assignments (as many as it adds, with as many replicas as the
/// partitions it has), or the placer's choice at the topic's replication
/// factor (its first partition's replica count, as Kafka takes it).
fn new_partitions(
    image: &MetadataImage,
    placer: &mut Placer,
    topic: &CreatePartitionsTopic,
    current: i32,
) -> Result<Vec<PartitionAssignment>, ApiError> {
    let factor = image.topic(&topic.name).and_then(|t| t.partitions.first()).map_or(1, |p| p.replicas.len());
    let Some(assignments) = &topic.assignments else {
        return (current..topic.count).map(|_| placer.place(factor as i16)).collect();
    };
    if assignments.len() as i32 != topic.count - current {
        return Err(ApiError::new(
            ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(),
            format!(
                "Attempted to add {} additional partition(s), but only {} assignment(s) were specified.",
                topic.count - current,
                assignments.len()
            ),
        ));
    }
    let numbered = assignments.iter().zip(current..);
    numbered.map(|(a, index)| placer.assign(image, index, &a.broker_ids, Some(factor))).collect()
}

/// One topic of a CreatePartitions: its id and current partition count, if
/// it may grow to `topic.count`.
fn check_new_partitions(image: &MetadataImage, topic: &CreatePartitionsTopic) -> Result<(Uuid, i32), ApiError> {
    let Some(existing) = image.topic(&topic.name) else {
        return Err(ApiError::new(
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
            "This server does not host this topic-partition.",
        ));
    };
    let current = existing.partitions.len() as i32;
    if topic.count == current {
        return Err(ApiError::new(
            ErrorCode::INVALID_PARTITIONS.code(),
            format!("Topic already has {current} partition(s)."),
        ));
    }
    if topic.count < current {
        return Err(ApiError::new(
            ErrorCode::INVALID_PARTITIONS.code(),
            format!(
                "The topic {} currently has {current} partition(s); {} would not be an increase.",
                topic.name, topic.count
            ),
        ));
    }
    Ok((existing.id, current))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_images::one_partition;
    use krabka_metadata::directory_id::{MIGRATING, UNASSIGNED};
    use krabka_protocol::{FeatureLevelRecord, RegisterBrokerRecord};

    fn directories_of(image: &MetadataImage) -> Vec<Uuid> {
        let assignment = PartitionAssignment { replicas: vec![1, 2, 3], isr: vec![1, 2, 3], leader: 1 };
        match partition_record(image, Uuid([9; 16]), 0, &assignment) {
            MetadataRecord::Partition(record) => record.directories,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_new_partition_records_each_replicas_default_directory_under_a_version_with_directories() {
        let mut image = one_partition(3, &[], &[1], 1);
        let (only, first, second) = (Uuid([0xa; 16]), Uuid([0xb; 16]), Uuid([0xc; 16]));
        for (broker_id, log_dirs) in [(1, vec![only]), (2, vec![first, second])] {
            let broker = RegisterBrokerRecord { broker_id, broker_epoch: 5, log_dirs, ..Default::default() };
            image.apply(&MetadataRecord::RegisterBroker(broker)).unwrap();
        }
        assert!(directories_of(&image).is_empty(), "no metadata.version: none recorded");
        let level =
            |feature_level| FeatureLevelRecord { name: METADATA_VERSION.into(), feature_level, ..Default::default() };
        image.apply(&MetadataRecord::FeatureLevel(level(DIRECTORY_ASSIGNMENT_LEVEL - 1))).unwrap();
        assert!(directories_of(&image).is_empty(), "before directories (3.7-IV2)");
        image.apply(&MetadataRecord::FeatureLevel(level(DIRECTORY_ASSIGNMENT_LEVEL))).unwrap();
        // Broker 1's only directory; broker 2 names one of its two later;
        // broker 3 registered none (as a test image's brokers, or a broker
        // from before directories).
        assert_eq!(directories_of(&image), vec![only, UNASSIGNED, MIGRATING]);
    }
}
