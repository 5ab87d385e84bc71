//! Topics and partitions: Kafka's validation of a topic to create and the
//! records (TopicRecord, PartitionRecord, ConfigRecord) that create it.

use krabka_protocol::ErrorCode;
use std::collections::BTreeMap;

use krabka_protocol::{ConfigRecord, CreateTopicsRequest, PartitionRecord, TopicRecord, Uuid};

use super::{ApiError, RecordBudget};
use crate::metadata::records::CONFIG_RESOURCE_TOPIC;
use crate::metadata::store::MAX_RECORDS_PER_USER_OP;
use crate::metadata::MetadataRecord;

/// Kafka's limit on topic name length (so partition directory names fit).
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// Kafka's first check of a CreateTopics request (the controller's
/// `validateTotalNumberOfPartitions`): the partitions asked for across all
/// topics, -1 counting as `num.partitions`, at most `MAX_RECORDS_PER_USER_OP`.
pub fn check_total_partitions(request: &CreateTopicsRequest, default_partitions: i32) -> Result<(), ApiError> {
    let total: u64 = request
        .topics
        .iter()
        .map(|topic| match (topic.assignments.len(), topic.num_partitions) {
            (0, -1) => default_partitions.max(0) as u64,
            (0, n) => n.max(0) as u64,
            (assigned, _) => assigned as u64,
        })
        .sum();
    if total > MAX_RECORDS_PER_USER_OP as u64 {
        return Err(ApiError::new(
            ErrorCode::POLICY_VIOLATION.code(),
            "Excessively large number of partitions per request.",
        ));
    }
    Ok(())
}

/// Kafka's topic name rule: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let invalid = |why: String| Err(ApiError::new(ErrorCode::INVALID_TOPIC_EXCEPTION.code(), why));
    if name.is_empty() {
        return invalid("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return invalid("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_TOPIC_NAME_LENGTH {
        return invalid(format!(
            "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}"
        ));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return invalid(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// A topic to create, validated.
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
}

impl NewTopic {
    /// The metadata records creating it takes: the topic, its partitions, its configs.
    pub fn record_count(&self) -> usize {
        1 + self.partitions.max(0) as usize + self.configs.len()
    }
}

pub fn topic_records(node_id: i32, topic: &NewTopic) -> Result<Vec<MetadataRecord>, ApiError> {
    RecordBudget::default().take(topic.record_count())?;
    let topic_id = Uuid::random()
        .map_err(|e| ApiError::new(ErrorCode::UNKNOWN_SERVER_ERROR.code(), format!("no random topic id: {e}")))?;
    let mut records =
        vec![MetadataRecord::Topic(TopicRecord { name: topic.name.clone(), topic_id, ..Default::default() })];
    records.extend((0..topic.partitions).map(|p| partition_record(node_id, topic_id, p)));
    records.extend(topic.configs.iter().map(|(name, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: topic.name.clone(),
            name: name.clone(),
            value: Some(value.clone()),
            ..Default::default()
        })
    }));
    Ok(records)
}

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

/// Validates the replication factor against the one-node cluster.
pub fn check_replication_factor(requested: i16, default: i16) -> Result<(), ApiError> {
    let factor = if requested == -1 { default } else { requested };
    if factor <= 0 {
        return Err(ApiError::new(
            ErrorCode::INVALID_REPLICATION_FACTOR.code(),
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ));
    }
    if factor > 1 {
        return Err(ApiError::new(
            ErrorCode::INVALID_REPLICATION_FACTOR.code(),
            format!(
                "Unable to replicate the partition {factor} time(s): The target replication factor of {factor} \
                 cannot be reached because only 1 broker(s) are registered."
            ),
        ));
    }
    Ok(())
}
