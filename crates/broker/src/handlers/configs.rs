//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics
//! (stored as ConfigRecords in the metadata log) and the broker (its static
//! configuration; dynamic broker configs are refused).

use krabka_protocol::ErrorCode;

use krabka_protocol::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use krabka_protocol::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use crate::config::topic::describe_topic;
use crate::config::{ConfigEntry, ConfigType};
use crate::metadata::records::{CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};
use crate::metadata::MetadataUpdate;
use crate::request::RequestContext;
use krabka_controller::configs::{plan_alter_configs, plan_incremental_alter_configs, ConfigOutcome};
use krabka_controller::ApiError;

fn config_type_code(config_type: ConfigType) -> i8 {
    match config_type {
        ConfigType::Boolean => 1,
        ConfigType::String => 2,
        ConfigType::Int => 3,
        ConfigType::Short => 4,
        ConfigType::Long => 5,
        ConfigType::Double => 6,
        ConfigType::List => 7,
        ConfigType::Class => 8,
        ConfigType::Password => 9,
    }
}

fn entry_result(entry: ConfigEntry, synonyms: bool) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult {
        value: if entry.sensitive { None } else { entry.value },
        read_only: entry.read_only,
        config_source: entry.source.code(),
        is_sensitive: entry.sensitive,
        synonyms: if synonyms {
            entry
                .synonyms
                .into_iter()
                .map(|(name, value, source)| DescribeConfigsSynonym {
                    name,
                    value: if entry.sensitive { None } else { value },
                    source: source.code(),
                    ..Default::default()
                })
                .collect()
        } else {
            Vec::new()
        },
        config_type: config_type_code(entry.config_type),
        name: entry.name,
        ..Default::default()
    }
}

pub fn describe(ctx: &RequestContext<'_>, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let broker = ctx.broker;
    let image = broker.metadata.image();
    let synonyms = request.include_synonyms && ctx.api_version >= 1;
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let mut result = DescribeConfigsResult {
                resource_type: resource.resource_type,
                resource_name: resource.resource_name.clone(),
                ..Default::default()
            };
            let entries = match resource.resource_type {
                CONFIG_RESOURCE_TOPIC => match image.topic(&resource.resource_name) {
                    Some(topic) => describe_topic(&broker.config, &topic.configs),
                    None => {
                        result.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code();
                        result.error_message = Some(format!("Topic {} does not exist.", resource.resource_name));
                        return result;
                    }
                },
                CONFIG_RESOURCE_BROKER
                    if resource.resource_name.is_empty() || resource.resource_name == broker.node_id.to_string() =>
                {
                    broker.config.describe()
                }
                CONFIG_RESOURCE_BROKER => {
                    result.error_code = ErrorCode::INVALID_REQUEST.code();
                    result.error_message = Some(format!("Unexpected broker id, expected {}", broker.node_id));
                    return result;
                }
                other => {
                    result.error_code = ErrorCode::INVALID_REQUEST.code();
                    result.error_message = Some(format!("Unsupported resource type {other}"));
                    return result;
                }
            };
            result.configs = entries
                .into_iter()
                .filter(|e| resource.configuration_keys.as_ref().is_none_or(|keys| keys.contains(&e.name)))
                .map(|e| entry_result(e, synonyms))
                .collect();
            result
        })
        .collect();
    DescribeConfigsResponse { results, ..Default::default() }
}

/// Each resource's (type, name, error code, message), from the controller's
/// outcomes, or the commit's error for every resource.
fn outcomes(
    resources: Vec<(i8, String)>,
    commit: Result<(MetadataUpdate, Vec<ConfigOutcome>), ApiError>,
) -> Vec<(i8, String, i16, Option<String>)> {
    let outcomes = match commit {
        // The replica manager follows the commit (a metadata subscriber).
        Ok((_, outcomes)) => outcomes,
        Err(e) => resources.iter().map(|_| (e.code, Some(e.message.clone()))).collect(),
    };
    resources.into_iter().zip(outcomes).map(|((t, n), (c, m))| (t, n, c, m)).collect()
}

pub async fn alter(ctx: &RequestContext<'_>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let resources: Vec<(i8, String)> =
        request.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    // Legacy AlterConfigs replaces the whole set of overrides.
    let commit = ctx.broker.metadata.control(|image| plan_alter_configs(image, &request)).await;
    let outcomes = outcomes(resources, commit);
    AlterConfigsResponse {
        responses: outcomes
            .into_iter()
            .map(|(resource_type, resource_name, error_code, error_message)| {
                alter_configs_response::AlterConfigsResourceResponse {
                    error_code,
                    error_message,
                    resource_type,
                    resource_name,
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    }
}

pub async fn incremental_alter(
    ctx: &RequestContext<'_>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let resources: Vec<(i8, String)> =
        request.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    let commit = ctx.broker.metadata.control(|image| plan_incremental_alter_configs(image, &request)).await;
    let outcomes = outcomes(resources, commit);
    IncrementalAlterConfigsResponse {
        responses: outcomes
            .into_iter()
            .map(|(resource_type, resource_name, error_code, error_message)| {
                incremental_alter_configs_response::AlterConfigsResourceResponse {
                    error_code,
                    error_message,
                    resource_type,
                    resource_name,
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    }
}
