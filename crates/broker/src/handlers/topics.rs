//! CreateTopics, DeleteTopics, CreatePartitions, DescribeTopicPartitions and
//! auto-creation from Metadata. Changes are metadata records committed in
//! one batch per request, then the hosted partitions follow the new image.

use krabka_protocol::ErrorCode;
use std::collections::BTreeMap;
use std::sync::Arc;

use krabka_protocol::create_partitions_response::CreatePartitionsTopicResult;
use krabka_protocol::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use krabka_protocol::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use krabka_protocol::delete_topics_response::DeletableTopicResult;
use krabka_protocol::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use krabka_protocol::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, Uuid,
};

use crate::active_controller;
use crate::authorization::Access;
use crate::broker::Broker;
use crate::client_quota_manager::MutationQuota;
use crate::config::topic::describe_topic;
use crate::config::DynamicConfigs;
use crate::metadata::MetadataImage;
use crate::metadata::MetadataUpdate;
use crate::request::RequestContext;
use krabka_controller::delete_topics::{plan_delete_topics, TopicToDelete};
use krabka_controller::elect_leaders::plan_elect_leaders;
use krabka_controller::partitions::plan_create_partitions;
use krabka_controller::reassignment::{
    list_partition_reassignments as list_partition_reassignments_of, plan_alter_partition_reassignments,
};
use krabka_controller::topics::{
    check_replication_factor, plan_auto_create_topics, plan_create_topics, plan_internal_topic,
};
use krabka_controller::{ApiError, NewTopic, TopicDefaults};
use krabka_protocol::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
};
use krabka_protocol::{ElectLeadersRequest, ElectLeadersResponse};
use krabka_security::acl::{AclOperation, ResourceType};

pub async fn create_topics(ctx: &RequestContext<'_>, mut request: CreateTopicsRequest) -> CreateTopicsResponse {
    let access = Access::of(ctx);
    // Under an authorizer: CREATE on the cluster, else on each topic; the
    // topics refused are answered so and not planned.
    let refused = if access.allows_cluster(AclOperation::Create) {
        Vec::new()
    } else {
        let (permitted, refused) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| access.allows(AclOperation::Create, ResourceType::Topic, &t.name));
        request.topics = permitted;
        refused
    };
    let mut response = create_permitted_topics(ctx, &request).await;
    response.topics.extend(refused.into_iter().map(|t| CreatableTopicResult {
        name: t.name,
        error_code: ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(),
        error_message: Some("Authorization failed.".into()),
        num_partitions: -1,
        replication_factor: -1,
        ..Default::default()
    }));
    response
}

async fn create_permitted_topics(ctx: &RequestContext<'_>, request: &CreateTopicsRequest) -> CreateTopicsResponse {
    let broker = ctx.broker;
    let config = &broker.config;
    let defaults = TopicDefaults {
        num_partitions: config.num_partitions,
        replication_factor: config.default_replication_factor,
        placement: broker.metadata.placement(broker.node_id),
    };
    let mut quota = mutation_quota(ctx, 6);
    let mut apply = |partitions| quota.apply(partitions, crate::clock::now_ms());
    let planned = broker.metadata.control(|image| plan_create_topics(image, request, &defaults, &mut apply)).await;
    let throttle_time_ms = mutation_throttle(ctx, &quota);
    let (image, topics) = match planned {
        Ok(done) => done,
        Err(e) => {
            return CreateTopicsResponse { topics: failed_topics(request, &e), throttle_time_ms, ..Default::default() }
        }
    };
    let topics = topics
        .iter()
        .map(|(name, outcome)| match outcome {
            Ok(topic) => created_topic(ctx, &image, topic),
            Err(e) => CreatableTopicResult {
                name: name.clone(),
                error_code: e.code,
                error_message: Some(e.message.clone()),
                num_partitions: -1,
                replication_factor: -1,
                ..Default::default()
            },
        })
        .collect();
    CreateTopicsResponse { topics, throttle_time_ms, ..Default::default() }
}

/// The request's controller mutation quota (KIP-599), strict from
/// version `strict_since` on.
fn mutation_quota<'a>(ctx: &'a RequestContext<'_>, strict_since: i16) -> MutationQuota<'a> {
    let image = ctx.broker.metadata.image();
    let client = (&ctx.connection.principal, ctx.client_id.unwrap_or_default());
    ctx.broker.client_quotas.mutation_quota(&image, client, ctx.api_version >= strict_since)
}

/// The throttle time a mutation quota asks for; the client's connection
/// waits it out (KIP-219). A request forwarded in an Envelope only carries
/// it back: the client is on the forwarding broker's connection.
fn mutation_throttle(ctx: &RequestContext<'_>, quota: &MutationQuota<'_>) -> i32 {
    let throttle_ms = quota.throttle_ms();
    if !ctx.connection.forwarded {
        ctx.connection.throttle(throttle_ms);
    }
    i32::try_from(throttle_ms).unwrap_or(i32::MAX)
}

/// A created (or, validate-only, creatable) topic's answer, with its
/// configs from v5 on.
fn created_topic(ctx: &RequestContext<'_>, image: &MetadataImage, topic: &NewTopic) -> CreatableTopicResult {
    let configs = (ctx.api_version >= 5).then(|| {
        let dynamic = DynamicConfigs::of(image, ctx.broker.node_id);
        describe_topic(&ctx.broker.config, &dynamic, &topic.configs)
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
        replication_factor: topic.replication_factor,
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
pub async fn ensure_internal_topic(
    broker: &Broker,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> Result<(), i16> {
    if broker.metadata.image().topic(name).is_some() && broker.replicas.topic(name).is_some() {
        return Ok(());
    }
    let configs: BTreeMap<String, String> = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let topic = NewTopic { name: name.to_string(), partitions, configs, assignments: Vec::new(), replication_factor };
    let placement = broker.metadata.placement(broker.node_id);
    let commit =
        broker.metadata.control(|image| plan_internal_topic(image, &topic, placement, replication_factor)).await;
    if commit.is_err() && broker.metadata.defers_to_another_controller() {
        return create_through_the_controller(broker, &[topic], replication_factor).await;
    }
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

/// What became of topics a Metadata request asked to auto-create.
pub enum AutoCreation {
    /// This node committed them: the image with them.
    Committed(Arc<MetadataImage>),
    /// Asked of the active controller (or already on their way): not in
    /// the image yet, LEADER_NOT_AVAILABLE until they are.
    Requested,
    /// Not created (this node cannot, or no controller took them).
    NotCreated,
}

/// Creates topics a Metadata request asked for. Through another
/// controller the CreateTopics goes out in the background and the request
/// answers at once (the client asks again), a topic already on its way
/// not sent twice, as Kafka's auto topic creation manager does.
pub async fn auto_create_topics(broker: &Arc<Broker>, names: &[String]) -> AutoCreation {
    let config = &broker.config;
    if check_replication_factor(-1, config.default_replication_factor).is_err() {
        return AutoCreation::NotCreated;
    }
    let placement = broker.metadata.placement(broker.node_id);
    let commit = broker
        .metadata
        .control(|image| {
            plan_auto_create_topics(image, names, config.num_partitions, config.default_replication_factor, placement)
        })
        .await;
    match commit {
        Ok((image, ())) => AutoCreation::Committed(image.image),
        Err(_) if broker.metadata.defers_to_another_controller() => {
            let Some(claimed) = broker.auto_creations.claim(names) else { return AutoCreation::Requested };
            let broker = Arc::clone(broker);
            tokio::spawn(async move {
                let topics: Vec<NewTopic> = claimed
                    .names()
                    .iter()
                    .map(|name| NewTopic {
                        name: name.clone(),
                        partitions: broker.config.num_partitions,
                        configs: BTreeMap::new(),
                        assignments: Vec::new(),
                        replication_factor: broker.config.default_replication_factor,
                    })
                    .collect();
                let rf = broker.config.default_replication_factor;
                let _ = create_through_the_controller(&broker, &topics, rf).await;
                drop(claimed);
            });
            AutoCreation::Requested
        }
        Err(_) => AutoCreation::NotCreated,
    }
}

/// Creates `topics` through the active controller (a CreateTopics of this
/// broker's own, forwarded), as Kafka's broker creates internal and
/// auto-created topics. They reach this broker's image only once the
/// controller commits them, so even a success answers LEADER_NOT_AVAILABLE
/// (not here yet: ask again); a topic that exists already is no error.
async fn create_through_the_controller(
    broker: &Broker,
    topics: &[NewTopic],
    replication_factor: i16,
) -> Result<(), i16> {
    let request = CreateTopicsRequest {
        topics: topics
            .iter()
            .map(|topic| CreatableTopic {
                name: topic.name.clone(),
                num_partitions: topic.partitions,
                replication_factor,
                configs: topic
                    .configs
                    .iter()
                    .map(|(name, value)| CreatableTopicConfig {
                        name: name.clone(),
                        value: Some(value.clone()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        timeout_ms: broker.config.quorum.request_timeout_ms as i32,
        ..Default::default()
    };
    let response = active_controller::create_topics(broker, &request).await.map_err(|reason| {
        tracing::debug!(%reason, "could not create topics through the active controller");
        ErrorCode::NOT_CONTROLLER.code()
    })?;
    for topic in &response.topics {
        if topic.error_code != 0 && topic.error_code != ErrorCode::TOPIC_ALREADY_EXISTS.code() {
            let message = topic.error_message.as_deref().unwrap_or_default();
            tracing::warn!(topic = %topic.name, code = topic.error_code, %message, "the active controller did not create the topic");
            return Err(topic.error_code);
        }
    }
    Err(ErrorCode::LEADER_NOT_AVAILABLE.code())
}

pub async fn delete_topics(ctx: &RequestContext<'_>, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    // v6 names topics by name or id; older versions by name only.
    let wanted: Vec<TopicToDelete> = if ctx.api_version >= 6 {
        request.topics.iter().map(|t| (t.name.clone(), t.topic_id)).collect()
    } else {
        request.topic_names.iter().map(|n| (Some(n.clone()), Uuid::ZERO)).collect()
    };
    // Under an authorizer, DELETE on each topic (named, or found by id).
    let image = broker.metadata.image();
    let may_delete = |(name, id): &TopicToDelete| {
        let name = name.as_deref().or_else(|| image.topic_by_id(id).map(|t| t.name.as_str()));
        name.is_none_or(|name| access.allows(AclOperation::Delete, ResourceType::Topic, name))
    };
    let (wanted, refused): (Vec<TopicToDelete>, Vec<TopicToDelete>) = wanted.into_iter().partition(may_delete);
    let refused = refused.into_iter().map(|(name, topic_id)| DeletableTopicResult {
        name,
        topic_id,
        error_code: ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(),
        error_message: (ctx.api_version >= 5).then(|| "Authorization failed.".to_string()),
        ..Default::default()
    });
    let mut response = delete_permitted_topics(ctx, wanted).await;
    response.responses.extend(refused);
    response
}

async fn delete_permitted_topics(ctx: &RequestContext<'_>, wanted: Vec<TopicToDelete>) -> DeleteTopicsResponse {
    let broker = ctx.broker;
    let deletion_enabled = broker.config.delete_topic_enable;
    let mut quota = mutation_quota(ctx, 5);
    let mut apply = |partitions| quota.apply(partitions, crate::clock::now_ms());
    let commit =
        broker.metadata.control(|image| plan_delete_topics(image, &wanted, deletion_enabled, &mut apply)).await;
    let throttle_time_ms = mutation_throttle(ctx, &quota);
    let mut response = match commit {
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
    };
    response.throttle_time_ms = throttle_time_ms;
    response
}

pub async fn create_partitions(
    ctx: &RequestContext<'_>,
    mut request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    // Under an authorizer, ALTER on each topic.
    let (permitted, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| access.allows(AclOperation::Alter, ResourceType::Topic, &t.name));
    request.topics = permitted;
    let refused = refused.into_iter().map(|t| CreatePartitionsTopicResult {
        name: t.name,
        error_code: ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(),
        error_message: Some("Authorization failed.".into()),
        ..Default::default()
    });
    let placement = broker.metadata.placement(broker.node_id);
    let mut quota = mutation_quota(ctx, 3);
    let mut apply = |partitions| quota.apply(partitions, crate::clock::now_ms());
    let commit = broker.metadata.control(|image| plan_create_partitions(image, &request, placement, &mut apply)).await;
    let mut response = planned_partitions(&request, commit);
    response.throttle_time_ms = mutation_throttle(ctx, &quota);
    response.results.extend(refused);
    response
}

fn planned_partitions(
    request: &CreatePartitionsRequest,
    commit: Result<(MetadataUpdate, Vec<CreatePartitionsTopicResult>), ApiError>,
) -> CreatePartitionsResponse {
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

/// ElectLeaders (forwarded to the active controller): each partition's
/// election, or the whole request's error on every partition asked for.
pub async fn elect_leaders(ctx: &RequestContext<'_>, request: ElectLeadersRequest) -> ElectLeadersResponse {
    match ctx.broker.metadata.control(|image| plan_elect_leaders(image, &request)).await {
        Ok((_, response)) => response,
        Err(e) => super::forwarded::elect_leaders_refused(&request, ctx.api_version, e.code, Some(e.message)),
    }
}

/// AlterPartitionReassignments (forwarded to the active controller).
pub async fn alter_partition_reassignments(
    ctx: &RequestContext<'_>,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    match ctx.broker.metadata.control(|image| plan_alter_partition_reassignments(image, &request)).await {
        Ok((_, response)) => response,
        Err(e) => AlterPartitionReassignmentsResponse {
            allow_replication_factor_change: request.allow_replication_factor_change,
            error_code: e.code,
            error_message: Some(e.message),
            ..Default::default()
        },
    }
}

/// ListPartitionReassignments, from the active controller's image (a
/// read through the quorum, so it sees every reassignment committed).
pub async fn list_partition_reassignments(
    ctx: &RequestContext<'_>,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let listed = ctx
        .broker
        .metadata
        .control(|image| Ok::<_, ApiError>((Vec::new(), list_partition_reassignments_of(image, &request))))
        .await;
    match listed {
        Ok((_, response)) => response,
        Err(e) => ListPartitionReassignmentsResponse {
            error_code: e.code,
            error_message: Some(e.message),
            ..Default::default()
        },
    }
}

pub fn describe_topic_partitions(
    ctx: &RequestContext<'_>,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let access = Access::of(ctx);
    let broker = ctx.broker;
    let image = broker.metadata.image();
    let may_describe = |name: &str| access.allows(AclOperation::Describe, ResourceType::Topic, name);
    // Every topic: those it may DESCRIBE; named ones are refused below.
    let mut names: Vec<String> = if request.topics.is_empty() {
        image.topics.keys().filter(|name| may_describe(name)).cloned().collect()
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
        if !may_describe(name) {
            topics.push(DescribeTopicPartitionsResponseTopic {
                error_code: ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(),
                name: Some(name.clone()),
                ..Default::default()
            });
            continue;
        }
        let topic_authorized_operations = access.authorized_operations(ResourceType::Topic, name);
        let Some(topic) = image.topic(name) else {
            topics.push(DescribeTopicPartitionsResponseTopic {
                error_code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                name: Some(name.clone()),
                topic_authorized_operations,
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
                leader_id: broker.partition_leader(p),
                leader_epoch: p.leader_epoch,
                replica_nodes: p.replicas.clone(),
                isr_nodes: p.isr.clone(),
                offline_replicas: broker.offline_replicas(&image, p),
                eligible_leader_replicas: Some(p.elr.clone()),
                last_known_elr: Some(p.last_known_elr.clone()),
                ..Default::default()
            });
        }
        topics.push(DescribeTopicPartitionsResponseTopic {
            name: Some(name.clone()),
            topic_id: topic.id,
            is_internal: topic.is_internal(),
            partitions,
            topic_authorized_operations,
            ..Default::default()
        });
        if next_cursor.is_some() {
            break;
        }
    }
    DescribeTopicPartitionsResponse { topics, next_cursor, ..Default::default() }
}
