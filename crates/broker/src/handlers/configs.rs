//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics
//! (stored as ConfigRecords in the metadata log) and the broker (its static
//! configuration; dynamic broker configs are refused).

use krabka_protocol::ErrorCode;
use std::collections::BTreeMap;

use krabka_protocol::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use krabka_protocol::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    ConfigRecord, DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};

use crate::config::topic::{describe_topic, validate_topic_configs};
use crate::config::{ConfigEntry, ConfigType};
use crate::controller::ApiError;
use crate::metadata::records::{CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};
use crate::metadata::MetadataRecord;
use crate::request::RequestContext;

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

/// The topic configs after a change, validated, as records to commit.
fn topic_config_records(
    topic: &str,
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> Result<Vec<MetadataRecord>, ApiError> {
    validate_topic_configs(wanted).map_err(|e| ApiError::new(ErrorCode::INVALID_CONFIG.code(), e.to_string()))?;
    let record = |name: &str, value: Option<&String>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: topic.to_string(),
            name: name.to_string(),
            value: value.cloned(),
            ..Default::default()
        })
    };
    let mut records: Vec<MetadataRecord> =
        wanted.iter().filter(|(k, v)| current.get(*k) != Some(*v)).map(|(k, v)| record(k, Some(v))).collect();
    records.extend(current.keys().filter(|k| !wanted.contains_key(*k)).map(|k| record(k, None)));
    Ok(records)
}

/// Applies `change` to each resource's topic configs in one metadata commit.
fn alter_topics(
    ctx: &RequestContext<'_>,
    resources: Vec<(i8, String)>,
    validate_only: bool,
    change: impl Fn(usize, &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ApiError>,
) -> Vec<(i8, String, i16, Option<String>)> {
    let broker = ctx.broker;
    let commit = broker.metadata.commit(|image| {
        let mut records = Vec::new();
        let mut outcomes = Vec::new();
        for (index, (resource_type, name)) in resources.iter().enumerate() {
            let outcome = match *resource_type {
                CONFIG_RESOURCE_TOPIC => match image.topic(name) {
                    None => Err(ApiError::new(
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                        format!("Topic {name} does not exist."),
                    )),
                    Some(topic) => change(index, &topic.configs)
                        .and_then(|wanted| topic_config_records(name, &topic.configs, &wanted)),
                },
                CONFIG_RESOURCE_BROKER => Err(ApiError::new(
                    ErrorCode::INVALID_REQUEST.code(),
                    "Dynamic broker configs are not supported; set them in server.properties",
                )),
                other => {
                    Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), format!("Unsupported resource type {other}")))
                }
            };
            match outcome {
                Ok(new_records) => {
                    if !validate_only {
                        records.extend(new_records);
                    }
                    outcomes.push((ErrorCode::NONE.code(), None));
                }
                Err(e) => outcomes.push((e.code, Some(e.message))),
            }
        }
        Ok::<_, ApiError>((records, outcomes))
    });
    let outcomes = match commit {
        // The replica manager follows the commit (a metadata subscriber).
        Ok((_, outcomes)) => outcomes,
        Err(e) => resources.iter().map(|_| (e.code, Some(e.message.clone()))).collect(),
    };
    resources.into_iter().zip(outcomes).map(|((t, n), (c, m))| (t, n, c, m)).collect()
}

pub fn alter(ctx: &RequestContext<'_>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let resources: Vec<(i8, String)> =
        request.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    // Legacy AlterConfigs replaces the whole set of overrides.
    let outcomes = alter_topics(ctx, resources, request.validate_only, |index, _current| {
        let mut wanted = BTreeMap::new();
        for config in &request.resources[index].configs {
            let Some(value) = &config.value else {
                return Err(ApiError::new(
                    ErrorCode::INVALID_REQUEST.code(),
                    format!("Null value for config {}", config.name),
                ));
            };
            wanted.insert(config.name.clone(), value.clone());
        }
        Ok(wanted)
    });
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

/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

pub fn incremental_alter(
    ctx: &RequestContext<'_>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let resources: Vec<(i8, String)> =
        request.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    let outcomes = alter_topics(ctx, resources, request.validate_only, |index, current| {
        let mut wanted = current.clone();
        for config in &request.resources[index].configs {
            let name = config.name.clone();
            match (config.config_operation, &config.value) {
                (OP_SET, Some(value)) => {
                    wanted.insert(name, value.clone());
                }
                (OP_DELETE, _) => {
                    wanted.remove(&name);
                }
                (OP_APPEND | OP_SUBTRACT, Some(value)) => {
                    let existing = wanted.get(&name).cloned().unwrap_or_default();
                    let mut items: Vec<String> =
                        existing.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
                    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                        if config.config_operation == OP_APPEND {
                            if !items.iter().any(|i| i == item) {
                                items.push(item.to_string());
                            }
                        } else {
                            items.retain(|i| i != item);
                        }
                    }
                    wanted.insert(name, items.join(","));
                }
                (op, _) => {
                    return Err(ApiError::new(
                        ErrorCode::INVALID_REQUEST.code(),
                        format!("Invalid operation {op} or null value for config {name}"),
                    ))
                }
            }
        }
        Ok(wanted)
    });
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
