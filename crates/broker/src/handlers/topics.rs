//! CreateTopics, DeleteTopics, CreatePartitions, DescribeTopicPartitions and
//! auto-creation from Metadata. Changes are metadata records committed in
//! one batch per request, then the hosted partitions follow the new image.

use krabka_protocol::ErrorCode;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use krabka_protocol::create_partitions_response::CreatePartitionsTopicResult;
use krabka_protocol::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use krabka_protocol::delete_topics_response::DeletableTopicResult;
use krabka_protocol::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use krabka_protocol::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, RemoveTopicRecord, Uuid,
};

use crate::broker::Broker;
use crate::config::topic::describe_topic;
use crate::controller::topics::{
    check_replication_factor, check_total_partitions, partition_record, plan_create_topics, topic_records,
    validate_new_topics, NewTopic, TopicDefaults,
};
use crate::controller::{ApiError, RecordBudget};
use crate::metadata::{MetadataImage, MetadataRecord};
use crate::request::RequestContext;

pub fn create_topics(ctx: &RequestContext<'_>, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let broker = ctx.broker;
    let config = &broker.config;
    if let Err(e) = check_total_partitions(&request, config.num_partitions) {
        return CreateTopicsResponse { topics: failed_topics(&request, &e), ..Default::default() };
    }
    let defaults = TopicDefaults {
        num_partitions: config.num_partitions,
        replication_factor: config.default_replication_factor,
        node_id: broker.node_id,
    };
    let planned = validate_new_topics(&request.topics, &defaults);
    let commit =
        broker.metadata.commit(|image| plan_create_topics(image, &planned, request.validate_only, broker.node_id));
    let (image, outcomes) = match commit {
        Ok(done) => done,
        Err(e) => return CreateTopicsResponse { topics: failed_topics(&request, &e), ..Default::default() },
    };
    let topics = planned
        .iter()
        .zip(outcomes)
        .map(|((name, plan), outcome)| match (plan, &outcome) {
            (Ok(topic), Ok(())) => created_topic(ctx, &image, topic),
            (Err(e), _) | (_, Err(e)) => CreatableTopicResult {
                name: name.clone(),
                error_code: e.code,
                error_message: Some(e.message.clone()),
                num_partitions: -1,
                replication_factor: -1,
                ..Default::default()
            },
        })
        .collect();
    CreateTopicsResponse { topics, ..Default::default() }
}

/// A created (or, validate-only, creatable) topic's answer, with its
/// configs from v5 on.
fn created_topic(ctx: &RequestContext<'_>, image: &MetadataImage, topic: &NewTopic) -> CreatableTopicResult {
    let configs = (ctx.api_version >= 5).then(|| {
        describe_topic(&ctx.broker.config, &topic.configs)
            .into_iter()
            .map(|e| CreatableTopicConfigs {
                name: e.name,
                value: e.value,
                read_only: e.read_only,
                config_source: e.source.code(),
                is_sensitive: e.sensitive,
                ..Default::default()
            })
            .collect()
    });
    CreatableTopicResult {
        name: topic.name.clone(),
        topic_id: image.topic(&topic.name).map_or(Uuid::ZERO, |t| t.id),
        num_partitions: topic.partitions,
        replication_factor: 1,
        configs,
        ..Default::default()
    }
}

/// Every topic of a request failed with the same error.
fn failed_topics(request: &CreateTopicsRequest, e: &ApiError) -> Vec<CreatableTopicResult> {
    request
        .topics
        .iter()
        .map(|topic| CreatableTopicResult {
            name: topic.name.clone(),
            error_code: e.code,
            error_message: Some(e.message.clone()),
            ..Default::default()
        })
        .collect()
}

/// Creates an internal topic (`__consumer_offsets`) if it does not exist yet.
pub fn ensure_internal_topic(
    broker: &Broker,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<(), i16> {
    if broker.metadata.image().topic(name).is_some() && broker.replicas.topic(name).is_some() {
        return Ok(());
    }
    let node_id = broker.node_id;
    let configs: BTreeMap<String, String> = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let commit = broker.metadata.commit(|image| {
        if image.topic(name).is_some() {
            return Ok((Vec::new(), ()));
        }
        tracing::info!(topic = %name, partitions, "creating internal topic");
        let topic = NewTopic { name: name.to_string(), partitions, configs: configs.clone() };
        Ok::<_, ApiError>((topic_records(node_id, &topic)?, ()))
    });
    match commit {
        // Known to the image but not hosted (its log failed to open before):
        // an empty commit publishes nothing, so try to open it here.
        Ok((image, ())) if broker.replicas.topic(name).is_none() => {
            broker.replicas.sync_topic(&image, name).map_err(|e| crate::errors::log_error_code(&e))
        }
        Ok(_) => Ok(()),
        Err(e) => Err(e.code),
    }
}

/// Creates topics a Metadata request asked for; returns the new image.
pub fn auto_create_topics(broker: &Arc<Broker>, names: &[String]) -> Option<Arc<MetadataImage>> {
    let config = &broker.config;
    if check_replication_factor(-1, config.default_replication_factor).is_err() {
        return None;
    }
    let node_id = broker.node_id;
    // A request may name a missing topic more than once: it is created once.
    let names: BTreeSet<&String> = names.iter().collect();
    let commit = broker.metadata.commit(|image| {
        let mut records = Vec::new();
        let mut budget = RecordBudget::default();
        for name in names.iter().filter(|n| image.topic(n).is_none()) {
            let topic = NewTopic { name: (*name).clone(), partitions: config.num_partitions, configs: BTreeMap::new() };
            budget.take(topic.record_count())?;
            records.extend(topic_records(node_id, &topic)?);
            tracing::info!(topic = %name, partitions = config.num_partitions, "auto-creating topic");
        }
        Ok::<_, ApiError>((records, ()))
    });
    match commit {
        Ok((image, ())) => Some(image.image),
        Err(_) => None,
    }
}

pub fn delete_topics(ctx: &RequestContext<'_>, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let broker = ctx.broker;
    // v6 names topics by name or id; older versions by name only.
    let wanted: Vec<(Option<String>, Uuid)> = if ctx.api_version >= 6 {
        request.topics.iter().map(|t| (t.name.clone(), t.topic_id)).collect()
    } else {
        request.topic_names.iter().map(|n| (Some(n.clone()), Uuid::ZERO)).collect()
    };
    let deletion_enabled = broker.config.delete_topic_enable;
    let commit = broker.metadata.commit(|image| {
        let mut records = Vec::new();
        let mut results = Vec::new();
        let mut removed = HashSet::new();
        for (name, id) in &wanted {
            let found = match name {
                Some(name) => image.topic(name),
                None => image.topic_by_id(id),
            };
            let mut result = DeletableTopicResult { name: name.clone(), topic_id: *id, ..Default::default() };
            match found {
                _ if !deletion_enabled => {
                    result.error_code = ErrorCode::TOPIC_DELETION_DISABLED.code();
                    result.error_message = Some("Topic deletion is disabled.".into());
                }
                Some(topic) => {
                    result.name = Some(topic.name.clone());
                    result.topic_id = topic.id;
                    if removed.insert(topic.id) {
                        records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                            topic_id: topic.id,
                            ..Default::default()
                        }));
                    }
                }
                None => {
                    let (error, message) = match name {
                        Some(_) => (
                            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                            "This server does not host this topic-partition.",
                        ),
                        None => (ErrorCode::UNKNOWN_TOPIC_ID.code(), "This server does not host this topic ID."),
                    };
                    result.error_code = error;
                    result.error_message = Some(message.into());
                }
            }
            results.push(result);
        }
        Ok::<_, ApiError>((records, results))
    });
    match commit {
        Ok((_, mut results)) => {
            for result in &mut results {
                if let Some(name) = &result.name {
                    broker.metrics.remove_topic(name);
                }
                if ctx.api_version < 5 {
                    result.error_message = None;
                }
            }
            DeleteTopicsResponse { responses: results, ..Default::default() }
        }
        Err(e) => DeleteTopicsResponse {
            responses: wanted
                .into_iter()
                .map(|(name, topic_id)| DeletableTopicResult {
                    name,
                    topic_id,
                    error_code: e.code,
                    error_message: (ctx.api_version >= 5).then(|| e.message.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
    }
}

pub fn create_partitions(ctx: &RequestContext<'_>, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let broker = ctx.broker;
    let node_id = broker.node_id;
    let commit = broker.metadata.commit(|image| {
        let mut records = Vec::new();
        let mut budget = RecordBudget::default();
        let mut results = Vec::new();
        let mut seen = HashSet::new();
        for topic in &request.topics {
            let outcome = (|| {
                if !seen.insert(topic.name.clone()) {
                    return Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), "Duplicate topic name."));
                }
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
                    if assignments.len() as i32 != topic.count - current
                        || assignments.iter().any(|a| a.broker_ids != [node_id])
                    {
                        return Err(ApiError::new(
                            ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(),
                            "Invalid replica assignment.",
                        ));
                    }
                }
                Ok((existing.id, current))
            })();
            if let Ok((topic_id, current)) = &outcome {
                // Too many new partitions fails the whole request, as
                // Kafka's bounded record list does, before they are built.
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
        Ok::<_, ApiError>((records, results))
    });
    match commit {
        Ok((_, results)) => CreatePartitionsResponse { results, ..Default::default() },
        Err(e) => CreatePartitionsResponse {
            results: request
                .topics
                .iter()
                .map(|t| CreatePartitionsTopicResult {
                    name: t.name.clone(),
                    error_code: e.code,
                    error_message: Some(e.message.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
    }
}

pub fn describe_topic_partitions(
    ctx: &RequestContext<'_>,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let broker = ctx.broker;
    let image = broker.metadata.image();
    let mut names: Vec<String> = if request.topics.is_empty() {
        image.topics.keys().cloned().collect()
    } else {
        request.topics.iter().map(|t| t.name.clone()).collect()
    };
    names.sort();
    names.dedup();
    let (start_topic, start_partition) = match &request.cursor {
        Some(cursor) => (Some(cursor.topic_name.clone()), cursor.partition_index.max(0) as usize),
        None => (None, 0),
    };
    let mut budget = request.response_partition_limit.max(1) as usize;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names.iter().filter(|n| start_topic.as_ref().is_none_or(|s| *n >= s)) {
        let Some(topic) = image.topic(name) else {
            topics.push(DescribeTopicPartitionsResponseTopic {
                error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                name: Some(name.clone()),
                ..Default::default()
            });
            continue;
        };
        let first = if start_topic.as_deref() == Some(name.as_str()) { start_partition } else { 0 };
        let mut partitions = Vec::new();
        for (index, p) in topic.partitions.iter().enumerate().skip(first) {
            if budget == 0 {
                next_cursor =
                    Some(Cursor { topic_name: name.clone(), partition_index: index as i32, ..Default::default() });
                break;
            }
            budget -= 1;
            partitions.push(DescribeTopicPartitionsResponsePartition {
                partition_index: index as i32,
                leader_id: broker.node_id,
                leader_epoch: p.leader_epoch,
                replica_nodes: p.replicas.clone(),
                isr_nodes: p.isr.clone(),
                eligible_leader_replicas: Some(Vec::new()),
                last_known_elr: Some(Vec::new()),
                ..Default::default()
            });
        }
        topics.push(DescribeTopicPartitionsResponseTopic {
            name: Some(name.clone()),
            topic_id: topic.id,
            is_internal: topic.is_internal(),
            partitions,
            ..Default::default()
        });
        if next_cursor.is_some() {
            break;
        }
    }
    DescribeTopicPartitionsResponse { topics, next_cursor, ..Default::default() }
}
