//! Metadata: brokers, the cluster id, topics and their partitions' leaders.
//! Unknown topics are created when the client allows it and
//! `auto.create.topics.enable` is on.

use krabka_protocol::metadata_request::MetadataRequestTopic;
use krabka_protocol::metadata_response::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic};
use krabka_protocol::ErrorCode;
use krabka_protocol::{MetadataRequest, MetadataResponse};

use super::topics::{auto_create_topics, AutoCreation};
use crate::authorization::Access;
use crate::metadata::{MetadataImage, TopicImage};
use crate::request::RequestContext;
use krabka_controller::topics::validate_topic_name;
use krabka_security::acl::{AclOperation, ResourceType};

/// The first Metadata version whose topics may be named by id alone.
const NULLABLE_NAME_VERSION: i16 = 12;

pub async fn handle(ctx: &RequestContext<'_>, request: MetadataRequest) -> MetadataResponse {
    let broker = ctx.broker;
    let image = broker.metadata.image();
    let all_topics =
        request.topics.is_none() || (ctx.api_version == 0 && request.topics.as_ref().is_some_and(Vec::is_empty));
    // Under an authorizer a principal sees the topics it may DESCRIBE
    // (the ACLs of the image as the request found it).
    let access = Access::with_image(ctx, &image);
    let with_operations = request.include_topic_authorized_operations;
    let topics = match request.topics {
        Some(requested) if !all_topics => {
            let allow_creation = request.allow_auto_topic_creation && broker.config.auto_create_topics_enable;
            describe_requested(ctx, &access, requested, allow_creation).await
        }
        _ => {
            let mut names: Vec<&String> = image.topics.keys().filter(|name| may_describe(&access, name)).collect();
            names.sort();
            names.into_iter().map(|name| describe(&image.topics[name], &image, ctx)).collect()
        }
    };
    let mut topics: Vec<MetadataResponseTopic> = topics;
    if with_operations {
        for topic in &mut topics {
            let name = topic.name.as_deref().unwrap_or_default();
            topic.topic_authorized_operations = access.authorized_operations(ResourceType::Topic, name);
        }
    }
    let brokers = broker
        .live_brokers_on(&ctx.connection.listener_name)
        .into_iter()
        .map(|b| MetadataResponseBroker {
            node_id: b.id,
            host: b.host,
            port: i32::from(b.port),
            rack: b.rack,
            ..Default::default()
        })
        .collect();
    MetadataResponse {
        brokers,
        cluster_id: Some(broker.cluster_id.clone()),
        controller_id: broker.controller_id(),
        topics,
        cluster_authorized_operations: if request.include_cluster_authorized_operations && ctx.api_version <= 10 {
            access.cluster_operations()
        } else {
            i32::MIN
        },
        ..Default::default()
    }
}

/// Whether the request's principal may see the topic.
fn may_describe(access: &Access<'_>, name: &str) -> bool {
    access.allows(AclOperation::Describe, ResourceType::Topic, name)
}

/// Auto-creation takes CREATE on the cluster or on the topic.
fn may_create(access: &Access<'_>, name: &str) -> bool {
    access.allows_cluster(AclOperation::Create) || access.allows(AclOperation::Create, ResourceType::Topic, name)
}

/// The topics a request names (by name or id), those missing created
/// first when it allows it and the principal may.
async fn describe_requested(
    ctx: &RequestContext<'_>,
    access: &Access<'_>,
    requested: Vec<MetadataRequestTopic>,
    allow_creation: bool,
) -> Vec<MetadataResponseTopic> {
    let mut image = ctx.broker.metadata.image();
    // Topics asked of the active controller: not here yet.
    let mut on_their_way = Vec::new();
    if allow_creation {
        let missing: Vec<String> = requested
            .iter()
            .filter_map(|t| t.name.clone())
            .filter(|name| image.topic(name).is_none() && validate_topic_name(name).is_ok())
            .filter(|name| may_describe(access, name) && may_create(access, name))
            .collect();
        if !missing.is_empty() {
            match auto_create_topics(ctx.broker, &missing).await {
                AutoCreation::Committed(created) => image = created,
                AutoCreation::Requested => on_their_way = missing,
                AutoCreation::NotCreated => {}
            }
        }
    }
    let mut topics = Vec::with_capacity(requested.len());
    for wanted in requested {
        let found = match &wanted.name {
            Some(name) => image.topic(name),
            None => image.topic_by_id(&wanted.topic_id),
        };
        // Refused whether or not the topic exists, so that a principal
        // cannot learn which do; a creation it may not make is refused alike.
        let denied = match (&wanted.name, found) {
            (Some(name), _) => !may_describe(access, name),
            (None, Some(topic)) => !may_describe(access, &topic.name),
            (None, None) => false,
        };
        let may_not_create =
            |name: &str| allow_creation && validate_topic_name(name).is_ok() && !may_create(access, name);
        let refused = denied || (found.is_none() && wanted.name.as_deref().is_some_and(may_not_create));
        let error_code = match (&wanted.name, found) {
            _ if refused => ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(),
            (_, Some(topic)) => {
                topics.push(describe(topic, &image, ctx));
                continue;
            }
            (Some(name), None) if validate_topic_name(name).is_err() => ErrorCode::INVALID_TOPIC_EXCEPTION.code(),
            (Some(name), None) if on_their_way.contains(name) => ErrorCode::LEADER_NOT_AVAILABLE.code(),
            (Some(_), None) => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
            // v10-11 requests may carry a null name but have no topic
            // ids (Kafka: "Topic name can not be null for version").
            (None, None) if ctx.api_version < NULLABLE_NAME_VERSION => ErrorCode::INVALID_REQUEST.code(),
            (None, None) => ErrorCode::UNKNOWN_TOPIC_ID.code(),
        };
        // Before v12 a response topic's name is not nullable.
        let name = match wanted.name {
            None if ctx.api_version < NULLABLE_NAME_VERSION => Some(String::new()),
            name => name,
        };
        topics.push(MetadataResponseTopic { error_code, name, topic_id: wanted.topic_id, ..Default::default() });
    }
    topics
}

fn describe(topic: &TopicImage, image: &MetadataImage, ctx: &RequestContext<'_>) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: ErrorCode::NONE.code(),
        name: Some(topic.name.clone()),
        topic_id: topic.id,
        is_internal: topic.is_internal(),
        partitions: topic
            .partitions
            .iter()
            .enumerate()
            .map(|(index, p)| MetadataResponsePartition {
                // A partition whose only replica is fenced has no leader.
                error_code: if ctx.broker.partition_leader(p) < 0 {
                    ErrorCode::LEADER_NOT_AVAILABLE.code()
                } else {
                    ErrorCode::NONE.code()
                },
                partition_index: index as i32,
                leader_id: ctx.broker.partition_leader(p),
                leader_epoch: p.leader_epoch,
                replica_nodes: p.replicas.clone(),
                isr_nodes: p.isr.clone(),
                offline_replicas: ctx.broker.offline_replicas(image, p),
                ..Default::default()
            })
            .collect(),
        topic_authorized_operations: i32::MIN,
        ..Default::default()
    }
}
