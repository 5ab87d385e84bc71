//! Partitions: the record placing a new partition (every replica on the one
//! node), and CreatePartitions' validation and records.

use std::collections::HashSet;

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::create_partitions_request::CreatePartitionsTopic;
use krabka_protocol::create_partitions_response::CreatePartitionsTopicResult;
use krabka_protocol::{CreatePartitionsRequest, ErrorCode, PartitionRecord, Uuid};

use crate::budget::RecordBudget;
use crate::error::ApiError;

/// A new partition of `topic_id`, led by `node_id`, its only replica.
pub fn partition_record(node_id: i32, topic_id: Uuid, partition_id: i32) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        partition_id,
        topic_id,
        replicas: vec![node_id],
        isr: vec![node_id],
        leader: node_id,
        leader_epoch: 0,
        partition_epoch: 0,
        ..Default::default()
    })
}

/// The records adding the partitions a CreatePartitions asks for, and each
/// topic's result, in request order. Too many new partitions fail the whole
/// request, before they are built; validate-only requests build none.
pub fn plan_create_partitions(
    image: &MetadataImage,
    request: &CreatePartitionsRequest,
    node_id: i32,
) -> Result<(Vec<MetadataRecord>, Vec<CreatePartitionsTopicResult>), ApiError> {
    let mut records = Vec::new();
    let mut budget = RecordBudget::default();
    let mut results = Vec::with_capacity(request.topics.len());
    let mut seen = HashSet::new();
    for topic in &request.topics {
        let outcome = if seen.insert(topic.name.as_str()) {
            check_new_partitions(image, topic, node_id)
        } else {
            Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), "Duplicate topic name."))
        };
        if let Ok((topic_id, current)) = &outcome {
            budget.take((topic.count - current) as usize)?;
            if !request.validate_only {
                records.extend((*current..topic.count).map(|p| partition_record(node_id, *topic_id, p)));
            }
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

/// One topic of a CreatePartitions: its id and current partition count, if
/// it may grow to `topic.count`.
fn check_new_partitions(
    image: &MetadataImage,
    topic: &CreatePartitionsTopic,
    node_id: i32,
) -> Result<(Uuid, i32), ApiError> {
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
    if let Some(assignments) = &topic.assignments {
        if assignments.len() as i32 != topic.count - current || assignments.iter().any(|a| a.broker_ids != [node_id]) {
            return Err(ApiError::new(ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(), "Invalid replica assignment."));
        }
    }
    Ok((existing.id, current))
}
