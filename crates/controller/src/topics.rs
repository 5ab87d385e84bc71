//! Topics: Kafka's validation of a topic to create and the records
//! (TopicRecord, PartitionRecord, ConfigRecord) that create it, for
//! CreateTopics, auto-creation from Metadata and the internal topics.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use krabka_log::topic_config::validate_topic_configs;
use krabka_metadata::records::CONFIG_RESOURCE_TOPIC;
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::create_topics_request::CreatableTopic;
use krabka_protocol::{ConfigRecord, CreateTopicsRequest, ErrorCode, TopicRecord, Uuid};

use crate::budget::RecordBudget;
use crate::error::{ApiError, MutationQuota};
use crate::limits::MAX_RECORDS_PER_USER_OP;
use crate::partitions::partition_record;
use crate::placement::{Placement, Placer};

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
#[derive(Clone, Debug)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
    /// A manual assignment's brokers of each partition, in order; empty
    /// when the controller places them.
    pub assignments: Vec<Vec<i32>>,
    /// Replicas per partition the controller places (a manual
    /// assignment's own count otherwise).
    pub replication_factor: i16,
}

impl NewTopic {
    /// The metadata records creating it takes: the topic, its partitions, its configs.
    pub fn record_count(&self) -> usize {
        1 + self.partitions.max(0) as usize + self.configs.len()
    }
}

/// The records creating `topic`, its partitions placed by `placer`:
/// `topic.record_count()` of them, which the caller has budgeted (and the
/// commit's backstop caps).
pub fn topic_records(
    image: &MetadataImage,
    placer: &mut Placer,
    topic: &NewTopic,
) -> Result<Vec<MetadataRecord>, ApiError> {
    let mut assignments = Vec::with_capacity(topic.partitions.max(0) as usize);
    let manual_factor = topic.assignments.first().map(Vec::len);
    for index in 0..topic.partitions {
        let assignment = match topic.assignments.get(index as usize) {
            Some(brokers) => placer.assign(image, index, brokers, manual_factor)?,
            None => placer.place(topic.replication_factor)?,
        };
        assignments.push(assignment);
    }
    let topic_id = Uuid::random()
        .map_err(|e| ApiError::new(ErrorCode::UNKNOWN_SERVER_ERROR.code(), format!("no random topic id: {e}")))?;
    let mut records =
        vec![MetadataRecord::Topic(TopicRecord { name: topic.name.clone(), topic_id, ..Default::default() })];
    records.extend(assignments.iter().zip(0..).map(|(assignment, p)| partition_record(image, topic_id, p, assignment)));
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

/// The replication factor asked for (-1 for `default`), if positive; the
/// brokers that can take it are the placer's to check.
pub fn check_replication_factor(requested: i16, default: i16) -> Result<i16, ApiError> {
    let factor = if requested == -1 { default } else { requested };
    if factor <= 0 {
        return Err(ApiError::new(
            ErrorCode::INVALID_REPLICATION_FACTOR.code(),
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ));
    }
    Ok(factor)
}

/// The defaults a CreateTopics request falls back on, and who takes the
/// replicas.
pub struct TopicDefaults {
    /// `num.partitions`, for `num_partitions` -1.
    pub num_partitions: i32,
    /// `default.replication.factor`, for `replication_factor` -1.
    pub replication_factor: i16,
    pub placement: Placement,
}

/// Validates each topic of a CreateTopics request on its own (names,
/// counts, assignments, configs), as Kafka's controller does before it
/// looks at what exists. In request order, with the topic's name.
pub fn validate_new_topics(
    topics: &[CreatableTopic],
    defaults: &TopicDefaults,
) -> Vec<(String, Result<NewTopic, ApiError>)> {
    let mut seen = HashSet::new();
    let duplicates: HashSet<&str> =
        topics.iter().filter(|t| !seen.insert(t.name.as_str())).map(|t| t.name.as_str()).collect();
    topics
        .iter()
        .map(|topic| {
            let result = if duplicates.contains(topic.name.as_str()) {
                Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), "Duplicate topic name."))
            } else {
                validate_new_topic(topic, defaults)
            };
            (topic.name.clone(), result)
        })
        .collect()
}

fn validate_new_topic(topic: &CreatableTopic, defaults: &TopicDefaults) -> Result<NewTopic, ApiError> {
    validate_topic_name(&topic.name)?;
    let mut assignments = Vec::new();
    let replication_factor;
    let partitions = if topic.assignments.is_empty() {
        replication_factor = check_replication_factor(topic.replication_factor, defaults.replication_factor)?;
        match topic.num_partitions {
            -1 => defaults.num_partitions,
            n if n <= 0 => {
                return Err(ApiError::new(
                    ErrorCode::INVALID_PARTITIONS.code(),
                    "Number of partitions was set to an invalid non-positive value.",
                ))
            }
            n => n,
        }
    } else {
        assignments = check_assignments(topic)?;
        replication_factor = assignments.first().map_or(0, |a| a.len() as i16);
        assignments.len() as i32
    };
    let mut configs = BTreeMap::new();
    for entry in &topic.configs {
        let Some(value) = &entry.value else {
            return Err(ApiError::new(
                ErrorCode::INVALID_CONFIG.code(),
                format!("Null value not supported for topic configs: {}", entry.name),
            ));
        };
        configs.insert(entry.name.clone(), value.clone());
    }
    validate_topic_configs(&configs).map_err(|e| ApiError::new(ErrorCode::INVALID_CONFIG.code(), e.to_string()))?;
    Ok(NewTopic { name: topic.name.clone(), partitions, configs, assignments, replication_factor })
}

/// Manual assignments; the brokers (and an equal replica count in every
/// partition) are checked against the image when placed. As Kafka, the
/// partitions may come in any order but once each, and must number 0 to
/// n-1. Returns each partition's brokers, by partition.
fn check_assignments(topic: &CreatableTopic) -> Result<Vec<Vec<i32>>, ApiError> {
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Err(ApiError::new(
            ErrorCode::INVALID_REQUEST.code(),
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
        ));
    }
    let mut by_partition = BTreeMap::new();
    for assignment in &topic.assignments {
        let index = assignment.partition_index;
        if by_partition.contains_key(&index) {
            return Err(ApiError::new(
                ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(),
                format!("Found multiple manual partition assignments for partition {index}"),
            ));
        }
        by_partition.insert(index, assignment.broker_ids.clone());
    }
    if by_partition.keys().zip(0..).any(|(&index, expected)| index != expected) {
        return Err(ApiError::new(
            ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(),
            "partitions should be a consecutive 0-based integer sequence",
        ));
    }
    Ok(by_partition.into_values().collect())
}

/// Each topic of a CreateTopics by name: the topic created (or, validate
/// only, creatable), or why not. In request order.
pub type CreatedTopics = Vec<(String, Result<NewTopic, ApiError>)>;

/// CreateTopics: the total partition count first (over the limit fails
/// the whole request), then each topic on its own, then against what
/// exists in `image`. The records creating what may be created, and each
/// topic's outcome.
pub fn plan_create_topics(
    image: &MetadataImage,
    request: &CreateTopicsRequest,
    defaults: &TopicDefaults,
    quota: MutationQuota<'_>,
) -> Result<(Vec<MetadataRecord>, CreatedTopics), ApiError> {
    check_total_partitions(request, defaults.num_partitions)?;
    let planned = validate_new_topics(&request.topics, defaults);
    let (records, outcomes) = plan_new_topics(image, &planned, (request.validate_only, quota), defaults.placement)?;
    let topics = planned.into_iter().zip(outcomes).map(|((name, plan), outcome)| (name, outcome.and(plan))).collect();
    Ok((records, topics))
}

/// Each validated topic's outcome against the image, in request order.
type TopicOutcomes = Vec<Result<(), ApiError>>;

/// The records creating the validated topics that do not exist in `image`,
/// and each topic's outcome. Validate-only requests build none, but count
/// them: past `MAX_RECORDS_PER_USER_OP` the whole request fails.
fn plan_new_topics(
    image: &MetadataImage,
    planned: &[(String, Result<NewTopic, ApiError>)],
    (validate_only, quota): (bool, MutationQuota<'_>),
    placement: Placement,
) -> Result<(Vec<MetadataRecord>, TopicOutcomes), ApiError> {
    let mut placer = Placer::new(image, placement);
    let mut records = Vec::new();
    let mut budget = RecordBudget::default();
    let mut outcomes = Vec::with_capacity(planned.len());
    for (name, plan) in planned {
        let outcome = match plan {
            Err(e) => Err(ApiError::new(e.code, e.message.clone())),
            Ok(_) if image.topic(name).is_some() => {
                Err(ApiError::new(ErrorCode::TOPIC_ALREADY_EXISTS.code(), format!("Topic '{name}' already exists.")))
            }
            Ok(topic) => match quota(topic.partitions.max(0) as usize) {
                Err(throttled) => Err(throttled),
                Ok(()) => {
                    budget.take(topic.record_count())?;
                    // Validate-only requests are placed too (a placement error is
                    // theirs to see) but build no records.
                    topic_records(image, &mut placer, topic).map(|placed| {
                        if !validate_only {
                            records.extend(placed);
                        }
                    })
                }
            },
        };
        outcomes.push(outcome);
    }
    Ok((records, outcomes))
}

/// The records creating the internal topic `topic` if `image` lacks it
/// (none if it exists), with `replication_factor` replicas (its
/// `*.replication.factor` config) in a shared quorum, as a broker asks
/// Kafka's controller for it; a node that is its quorum's only voter
/// places its one replica whatever the config says.
pub fn plan_internal_topic(
    image: &MetadataImage,
    topic: &NewTopic,
    placement: Placement,
    replication_factor: i16,
) -> Result<(Vec<MetadataRecord>, ()), ApiError> {
    if image.topic(&topic.name).is_some() {
        return Ok((Vec::new(), ()));
    }
    let replication_factor = match placement {
        Placement::RegisteredBrokers => check_replication_factor(replication_factor, replication_factor)?,
        Placement::OnlyNode(_) => 1,
    };
    let topic = NewTopic { replication_factor, ..topic.clone() };
    RecordBudget::default().take(topic.record_count())?;
    tracing::info!(topic = %topic.name, partitions = topic.partitions, replication_factor, "creating internal topic");
    Ok((topic_records(image, &mut Placer::new(image, placement), &topic)?, ()))
}

/// The records auto-creating the topics of `names` that `image` lacks (a
/// Metadata request's), each with `num_partitions` and no configs, once
/// each however often it is named.
pub fn plan_auto_create_topics(
    image: &MetadataImage,
    names: &[String],
    num_partitions: i32,
    replication_factor: i16,
    placement: Placement,
) -> Result<(Vec<MetadataRecord>, ()), ApiError> {
    let names: BTreeSet<&String> = names.iter().filter(|n| image.topic(n).is_none()).collect();
    let mut placer = Placer::new(image, placement);
    let mut records = Vec::new();
    let mut budget = RecordBudget::default();
    for name in names {
        let topic = NewTopic {
            name: name.clone(),
            partitions: num_partitions,
            configs: BTreeMap::new(),
            assignments: Vec::new(),
            replication_factor,
        };
        budget.take(topic.record_count())?;
        records.extend(topic_records(image, &mut placer, &topic)?);
        tracing::info!(topic = %name, partitions = num_partitions, "auto-creating topic");
    }
    Ok((records, ()))
}

#[cfg(test)]
mod tests {
    use krabka_protocol::create_topics_request::CreatableReplicaAssignment;

    use super::*;

    fn manual(partitions: &[(i32, i32)]) -> CreatableTopic {
        CreatableTopic {
            name: "manual".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: partitions
                .iter()
                .map(|&(partition_index, broker)| CreatableReplicaAssignment {
                    partition_index,
                    broker_ids: vec![broker],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn refusal(topic: &CreatableTopic) -> (i16, String) {
        let e = check_assignments(topic).expect_err("refused");
        (e.code, e.message)
    }

    #[test]
    fn manual_assignments_may_come_in_any_order() {
        let assigned = check_assignments(&manual(&[(2, 7), (0, 5), (1, 6)])).expect("accepted");
        assert_eq!(assigned, vec![vec![5], vec![6], vec![7]]);
    }

    #[test]
    fn manual_assignments_name_each_partition_once_from_zero_without_gaps() {
        let invalid = ErrorCode::INVALID_REPLICA_ASSIGNMENT.code();
        assert_eq!(
            refusal(&manual(&[(1, 1), (0, 1), (1, 2)])),
            (invalid, "Found multiple manual partition assignments for partition 1".into())
        );
        let gap = (invalid, "partitions should be a consecutive 0-based integer sequence".to_string());
        assert_eq!(refusal(&manual(&[(0, 1), (2, 1)])), gap);
        assert_eq!(refusal(&manual(&[(1, 1), (2, 1)])), gap);
        assert_eq!(refusal(&manual(&[(-1, 1), (0, 1)])), gap);
    }
}
