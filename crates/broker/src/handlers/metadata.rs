//! Metadata: brokers, the cluster id, topics and their partitions' leaders.
//! Unknown topics are created when the client allows it and
//! `auto.create.topics.enable` is on.

use krabka_protocol::metadata_response::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic};
use krabka_protocol::ErrorCode;
use krabka_protocol::{MetadataRequest, MetadataResponse};

use super::topics::{auto_create_topics, AutoCreation};
use crate::metadata::{MetadataImage, TopicImage};
use crate::request::RequestContext;
use krabka_controller::topics::validate_topic_name;

/// Every operation a topic or cluster allows (no ACLs: all are allowed).
/// Bits of Kafka's AclOperation codes READ(3)..DESCRIBE_CONFIGS(10) etc.
const ALL_TOPIC_OPERATIONS: i32 = 0b0000_1111_1111_1000;
const ALL_CLUSTER_OPERATIONS: i32 = 0b0001_1111_1111_1000;

/// The first Metadata version whose topics may be named by id alone.
const NULLABLE_NAME_VERSION: i16 = 12;

pub async fn handle(ctx: &RequestContext<'_>, request: MetadataRequest) -> MetadataResponse {
    let broker = ctx.broker;
    let mut image = broker.metadata.image();
    let mut topics = Vec::new();
    let all_topics =
        request.topics.is_none() || (ctx.api_version == 0 && request.topics.as_ref().is_some_and(Vec::is_empty));
    let requested_topics = if all_topics { None } else { request.topics };
    match requested_topics {
        None => {
            let mut names: Vec<&String> = image.topics.keys().collect();
            names.sort();
            for name in names {
                topics.push(describe(&image.topics[name], &image, ctx, request.include_topic_authorized_operations));
            }
        }
        Some(requested) => {
            let wanted_creation = request.allow_auto_topic_creation && broker.config.auto_create_topics_enable;
            // Topics asked of the active controller: not here yet.
            let mut on_their_way = Vec::new();
            if wanted_creation {
                let missing: Vec<String> = requested
                    .iter()
                    .filter_map(|t| t.name.clone())
                    .filter(|name| image.topic(name).is_none() && validate_topic_name(name).is_ok())
                    .collect();
                if !missing.is_empty() {
                    match auto_create_topics(broker, &missing).await {
                        AutoCreation::Committed(created) => image = created,
                        AutoCreation::Requested => on_their_way = missing,
                        AutoCreation::NotCreated => {}
                    }
                }
            }
            for wanted in requested {
                let found = match &wanted.name {
                    Some(name) => image.topic(name),
                    None => image.topic_by_id(&wanted.topic_id),
                };
                match found {
                    Some(topic) => {
                        topics.push(describe(topic, &image, ctx, request.include_topic_authorized_operations))
                    }
                    None => {
                        let error_code = match &wanted.name {
                            Some(name) if validate_topic_name(name).is_err() => {
                                ErrorCode::INVALID_TOPIC_EXCEPTION.code()
                            }
                            Some(name) if on_their_way.contains(name) => ErrorCode::LEADER_NOT_AVAILABLE.code(),
                            Some(_) => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                            // v10-11 requests may carry a null name but have no topic
                            // ids (Kafka: "Topic name can not be null for version").
                            None if ctx.api_version < NULLABLE_NAME_VERSION => ErrorCode::INVALID_REQUEST.code(),
                            None => ErrorCode::UNKNOWN_TOPIC_ID.code(),
                        };
                        // Before v12 a response topic's name is not nullable.
                        let name = match &wanted.name {
                            None if ctx.api_version < NULLABLE_NAME_VERSION => Some(String::new()),
                            name => name.clone(),
                        };
                        topics.push(MetadataResponseTopic {
                            error_code,
                            name,
                            topic_id: wanted.topic_id,
                            ..Default::default()
                        });
                    }
                }
            }
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
            ALL_CLUSTER_OPERATIONS
        } else {
            i32::MIN
        },
        ..Default::default()
    }
}

fn describe(
    topic: &TopicImage,
    image: &MetadataImage,
    ctx: &RequestContext<'_>,
    operations: bool,
) -> MetadataResponseTopic {
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
        topic_authorized_operations: if operations { ALL_TOPIC_OPERATIONS } else { i32::MIN },
        ..Default::default()
    }
}
