//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and
//! brokers: topic overrides and dynamic broker configs are ConfigRecords in
//! the metadata log; a broker describes itself with them over its
//! server.properties.

use krabka_protocol::ErrorCode;

use krabka_protocol::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use krabka_protocol::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use crate::authorization::{allowed_on_cluster, cluster_denied, Access};
use crate::config::dynamic::{check_dynamic_update, describe_cluster_default};
use crate::config::topic::describe_topic;
use crate::config::DynamicConfigs;
use crate::config::{ConfigEntry, ConfigType};
use crate::metadata::records::{CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};
use crate::metadata::MetadataUpdate;
use crate::request::RequestContext;
use krabka_controller::configs::{plan_alter_configs, plan_incremental_alter_configs, ConfigOutcome};
use krabka_controller::ApiError;
use krabka_security::acl::{AclOperation, ResourceType};

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
        ConfigType::Unknown => 0,
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
    let dynamic = DynamicConfigs::of(&image, broker.node_id);
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let mut result = DescribeConfigsResult {
                resource_type: resource.resource_type,
                resource_name: resource.resource_name.clone(),
                ..Default::default()
            };
            let describing = (resource.resource_type, resource.resource_name.as_str());
            if let Some(e) = unauthorized(ctx, AclOperation::DescribeConfigs, describing) {
                (result.error_code, result.error_message) = (e.code, Some(e.message));
                return result;
            }
            let entries = match resource.resource_type {
                CONFIG_RESOURCE_TOPIC => match image.topic(&resource.resource_name) {
                    Some(topic) => describe_topic(&broker.config, &dynamic, &topic.configs),
                    None => {
                        result.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code();
                        result.error_message = Some(format!("Topic {} does not exist.", resource.resource_name));
                        return result;
                    }
                },
                CONFIG_RESOURCE_BROKER if resource.resource_name.is_empty() => {
                    describe_cluster_default(&image.broker_configs)
                }
                CONFIG_RESOURCE_BROKER if resource.resource_name == broker.node_id.to_string() => {
                    broker.config.describe(&dynamic)
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

/// Kafka's broker checks the keys and values of BROKER resources before
/// the controller sees them (its `ConfigAdminManager`): the refusal of
/// each resource, None for those that go on to the controller.
/// The refusal of `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a
/// resource under an authorizer: on the topic, or on the cluster for
/// broker configs, as Kafka asks.
fn unauthorized(
    ctx: &RequestContext<'_>,
    operation: AclOperation,
    (resource_type, name): (i8, &str),
) -> Option<ApiError> {
    let access = Access::of(ctx);
    match resource_type {
        CONFIG_RESOURCE_TOPIC if !access.allows(operation, ResourceType::Topic, name) => {
            Some(ApiError::new(ErrorCode::TOPIC_AUTHORIZATION_FAILED.code(), "Topic authorization failed."))
        }
        CONFIG_RESOURCE_BROKER if !allowed_on_cluster(ctx, operation) => {
            let (code, message) = cluster_denied();
            Some(ApiError::new(code, message.unwrap_or_default()))
        }
        _ => None,
    }
}

/// Each resource's first refusal: its authorization, then the broker's checks.
fn refusals(
    ctx: &RequestContext<'_>,
    resources: &[(i8, String)],
    checked: Vec<Option<ApiError>>,
) -> Vec<Option<ApiError>> {
    resources
        .iter()
        .zip(checked)
        .map(|((resource_type, name), checked)| {
            unauthorized(ctx, AclOperation::AlterConfigs, (*resource_type, name)).or(checked)
        })
        .collect()
}

/// The broker's own checks of each BROKER resource (`name` empty: the
/// cluster's default): the keys and values, then the thread counts
/// against this broker's current ones.
fn broker_refusals<'r, I>(
    ctx: &RequestContext<'_>,
    resources: impl Iterator<Item = (i8, &'r str, I)>,
) -> Vec<Option<ApiError>>
where
    I: Iterator<Item = (&'r str, Option<&'r str>)> + Clone,
{
    let image = ctx.broker.metadata.image();
    let dynamic = DynamicConfigs::of(&image, ctx.broker.node_id);
    let config = &ctx.broker.config;
    resources
        .map(|(resource_type, name, changes)| {
            if resource_type != CONFIG_RESOURCE_BROKER {
                return None;
            }
            // Checked against this broker's counts: for the default or
            // for this broker (the admin client sends another broker's
            // own configs to that broker).
            let (for_default, own) = (name.is_empty(), name == ctx.broker.node_id.to_string());
            let threads = |mut changes: I| {
                changes.try_for_each(|change| config.check_thread_count(&dynamic, change, for_default))
            };
            let checked = check_dynamic_update(changes.clone());
            checked.and_then(|()| if for_default || own { threads(changes) } else { Ok(()) }).err()
        })
        .collect()
}

/// The request's resources with those refused left out.
fn kept<T>(resources: Vec<T>, refusals: &[Option<ApiError>]) -> Vec<T> {
    resources.into_iter().zip(refusals).filter(|(_, r)| r.is_none()).map(|(resource, _)| resource).collect()
}

/// Each resource's (type, name, error code, message): its refusal here,
/// else the controller's outcome (the controller saw only the resources
/// not refused, in order), or the commit's error.
fn outcomes(
    resources: Vec<(i8, String)>,
    refusals: Vec<Option<ApiError>>,
    commit: Result<(MetadataUpdate, Vec<ConfigOutcome>), ApiError>,
) -> Vec<(i8, String, i16, Option<String>)> {
    let planned = refusals.iter().filter(|r| r.is_none()).count();
    let decided: Vec<ConfigOutcome> = match commit {
        // The replica manager follows the commit (a metadata subscriber).
        Ok((_, outcomes)) => outcomes,
        Err(e) => (0..planned).map(|_| (e.code, Some(e.message.clone()))).collect(),
    };
    debug_assert_eq!(decided.len(), planned, "one outcome per resource planned");
    let mut decided = decided.into_iter();
    let mut outcome = |refusal: Option<ApiError>| match refusal {
        Some(e) => (e.code, Some(e.message)),
        None => decided.next().unwrap_or((ErrorCode::UNKNOWN_SERVER_ERROR.code(), None)),
    };
    resources
        .into_iter()
        .zip(refusals)
        .map(|((resource_type, name), refusal)| {
            let (code, message) = outcome(refusal);
            (resource_type, name, code, message)
        })
        .collect()
}

pub async fn alter(ctx: &RequestContext<'_>, mut request: AlterConfigsRequest) -> AlterConfigsResponse {
    let resources: Vec<(i8, String)> =
        request.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    let refusals = broker_refusals(
        ctx,
        request.resources.iter().map(|r| {
            (r.resource_type, r.resource_name.as_str(), r.configs.iter().map(|c| (c.name.as_str(), c.value.as_deref())))
        }),
    );
    let refusals = self::refusals(ctx, &resources, refusals);
    request.resources = kept(std::mem::take(&mut request.resources), &refusals);
    // Legacy AlterConfigs replaces the whole set of overrides.
    let commit = ctx.broker.metadata.control(|image| plan_alter_configs(image, &request)).await;
    let outcomes = outcomes(resources, refusals, commit);
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
    mut request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let resources: Vec<(i8, String)> =
        request.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    let refusals = broker_refusals(
        ctx,
        request.resources.iter().map(|r| {
            // DELETE (1) removes a key; the other operations leave a value.
            let changes =
                r.configs.iter().map(|c| (c.name.as_str(), c.value.as_deref().filter(|_| c.config_operation != 1)));
            (r.resource_type, r.resource_name.as_str(), changes)
        }),
    );
    let refusals = self::refusals(ctx, &resources, refusals);
    request.resources = kept(std::mem::take(&mut request.resources), &refusals);
    let commit = ctx.broker.metadata.control(|image| plan_incremental_alter_configs(image, &request)).await;
    let outcomes = outcomes(resources, refusals, commit);
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
