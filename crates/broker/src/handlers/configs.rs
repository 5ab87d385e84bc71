//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and
//! brokers: topic overrides and dynamic broker configs are ConfigRecords in
//! the metadata log; a broker describes itself with them over its
//! server.properties.

use std::collections::HashMap;

use krabka_protocol::ErrorCode;
use krabka_protocol::{RequestBody, ResponseBody};

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

/// Whether this node is where Kafka checks a config change against the
/// broker's own state: the broker the client sent it to, on a client
/// listener. A request forwarded here was checked by the broker that
/// forwarded it, and one sent to a controller's listener
/// (`--bootstrap-controller`) is not checked against any broker's counts,
/// as Kafka's controller does not check it.
fn received_by_broker(ctx: &RequestContext<'_>) -> bool {
    let config = &ctx.broker.config;
    let on_controller_listener = config.controller_listener_names.iter().any(|n| **n == *ctx.connection.listener_name);
    !ctx.connection.forwarded && config.is_broker() && !on_controller_listener
}

/// The broker's own checks of each BROKER resource (`name` empty: the
/// cluster's default), Kafka's `ConfigAdminManager.preprocess`: the keys
/// and values; then, on the broker the client sent it to, that a named
/// resource is this broker (the admin client sends a broker's own configs
/// to that broker) and that thread counts keep to this broker's current
/// ones.
fn broker_refusals<'r, I>(
    ctx: &RequestContext<'_>,
    resources: impl Iterator<Item = (i8, &'r str, I)>,
) -> Vec<Option<ApiError>>
where
    I: Iterator<Item = (&'r str, Option<&'r str>)> + Clone,
{
    let image = ctx.broker.metadata.image();
    let dynamic = DynamicConfigs::of(&image, ctx.broker.node_id);
    let (config, here) = (&ctx.broker.config, received_by_broker(ctx));
    resources
        .map(|(resource_type, name, changes)| {
            if resource_type != CONFIG_RESOURCE_BROKER {
                return None;
            }
            let for_default = name.is_empty();
            let this_broker = || if here && !for_default { this_node(name, ctx.broker.node_id) } else { Ok(()) };
            let threads = |mut changes: I| {
                changes.try_for_each(|change| config.check_thread_count(&dynamic, change, for_default))
            };
            let checked = this_broker().and_then(|()| check_dynamic_update(changes.clone()));
            checked.and_then(|()| if here { threads(changes) } else { Ok(()) }).err()
        })
        .collect()
}

/// A BROKER resource named on the broker it names, with Kafka's messages.
fn this_node(name: &str, node_id: i32) -> Result<(), ApiError> {
    let invalid = |message: String| Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), message));
    match name.parse::<i32>() {
        Err(_) => invalid(format!("Node id must be an integer, but it is: {name}")),
        Ok(id) if id != node_id => invalid(format!("Unexpected broker id, expected {node_id}, but received {name}")),
        Ok(_) => Ok(()),
    }
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
) -> Vec<Outcome> {
    let planned = refusals.iter().filter(|r| r.is_none()).count();
    let decided: Vec<ConfigOutcome> = match commit {
        // The replica manager follows the commit (a metadata subscriber).
        Ok((_, outcomes)) => outcomes,
        Err(e) => (0..planned).map(|_| (e.code, Some(e.message.clone()))).collect(),
    };
    debug_assert_eq!(decided.len(), planned, "one outcome per resource planned");
    let mut decided = decided.into_iter();
    let unknown = || (ErrorCode::UNKNOWN_SERVER_ERROR.code(), None);
    Refusals { resources, refusals }.outcomes(|_| decided.next().unwrap_or_else(unknown))
}

/// (resource type, name, error code, message).
type Outcome = (i8, String, i16, Option<String>);

/// The resources of a request that the broker it was sent to refused
/// before forwarding the rest to the active controller.
pub struct Refusals {
    resources: Vec<(i8, String)>,
    refusals: Vec<Option<ApiError>>,
}

impl Refusals {
    /// Each resource's outcome in the request's order: its refusal, else
    /// what `decided` says of it.
    fn outcomes(self, mut decided: impl FnMut(&(i8, String)) -> ConfigOutcome) -> Vec<Outcome> {
        self.resources
            .into_iter()
            .zip(self.refusals)
            .map(|(resource, refusal)| {
                let (code, message) = match refusal {
                    Some(e) => (e.code, Some(e.message)),
                    None => decided(&resource),
                };
                (resource.0, resource.1, code, message)
            })
            .collect()
    }
}

/// What the broker a config change was sent to does with it when another
/// node is the active controller.
pub enum Preprocessed {
    /// Nothing refused: forwarded as the client sent it.
    Whole,
    /// Everything refused: answered here.
    Refused(ResponseBody),
    /// The resources not refused, forwarded; the controller's answer is
    /// then merged with the refusals ([`merged`]).
    Rest(RequestBody, Refusals),
}

/// Kafka's preprocessing of AlterConfigs and IncrementalAlterConfigs on
/// the broker a client sent them to, before it forwards them: the broker
/// checks of [`broker_refusals`], which only the broker named can make
/// (the controller authorizes and decides the rest).
pub fn preprocess(ctx: &RequestContext<'_>, body: RequestBody) -> Preprocessed {
    match body {
        RequestBody::IncrementalAlterConfigs(mut request) => {
            let (resources, refusals) = incremental_refusals(ctx, &request);
            let Some(refused) = split(&mut request.resources, resources, refusals) else { return Preprocessed::Whole };
            if request.resources.is_empty() {
                let response = incremental_response(refused.outcomes(|_| unreachable!("all refused")));
                return Preprocessed::Refused(ResponseBody::IncrementalAlterConfigs(Box::new(response)));
            }
            Preprocessed::Rest(RequestBody::IncrementalAlterConfigs(request), refused)
        }
        RequestBody::AlterConfigs(mut request) => {
            let (resources, refusals) = legacy_refusals(ctx, &request);
            let Some(refused) = split(&mut request.resources, resources, refusals) else { return Preprocessed::Whole };
            if request.resources.is_empty() {
                let response = alter_response(refused.outcomes(|_| unreachable!("all refused")));
                return Preprocessed::Refused(ResponseBody::AlterConfigs(Box::new(response)));
            }
            Preprocessed::Rest(RequestBody::AlterConfigs(request), refused)
        }
        _ => Preprocessed::Whole,
    }
}

/// Leaves out of `request` the resources refused; None when none was.
fn split<T>(request: &mut Vec<T>, resources: Vec<(i8, String)>, refusals: Vec<Option<ApiError>>) -> Option<Refusals> {
    if refusals.iter().all(Option::is_none) {
        return None;
    }
    *request = kept(std::mem::take(request), &refusals);
    Some(Refusals { resources, refusals })
}

/// The controller's `answer` to the forwarded rest of a request, with the
/// refusals put back: every resource in the request's order, matched by
/// type and name as Kafka's broker reassembles it.
pub fn merged(refused: Refusals, answer: ResponseBody) -> ResponseBody {
    let mut decided: HashMap<(i8, String), ConfigOutcome> = match &answer {
        ResponseBody::IncrementalAlterConfigs(r) => r
            .responses
            .iter()
            .map(|r| ((r.resource_type, r.resource_name.clone()), (r.error_code, r.error_message.clone())))
            .collect(),
        ResponseBody::AlterConfigs(r) => r
            .responses
            .iter()
            .map(|r| ((r.resource_type, r.resource_name.clone()), (r.error_code, r.error_message.clone())))
            .collect(),
        _ => {
            debug_assert!(false, "a config change answered with {:?}", answer.api_key());
            return answer;
        }
    };
    // Kafka's broker: a resource the controller left out fails.
    let unknown = (ErrorCode::UNKNOWN_SERVER_ERROR.code(), None);
    let outcomes = refused.outcomes(|resource| decided.remove(resource).unwrap_or_else(|| unknown.clone()));
    match answer {
        ResponseBody::IncrementalAlterConfigs(_) => {
            ResponseBody::IncrementalAlterConfigs(Box::new(incremental_response(outcomes)))
        }
        _ => ResponseBody::AlterConfigs(Box::new(alter_response(outcomes))),
    }
}

pub async fn alter(ctx: &RequestContext<'_>, mut request: AlterConfigsRequest) -> AlterConfigsResponse {
    let (resources, refusals) = legacy_refusals(ctx, &request);
    let refusals = self::refusals(ctx, &resources, refusals);
    request.resources = kept(std::mem::take(&mut request.resources), &refusals);
    // Legacy AlterConfigs replaces the whole set of overrides.
    let commit = ctx.broker.metadata.control(|image| plan_alter_configs(image, &request)).await;
    alter_response(outcomes(resources, refusals, commit))
}

pub async fn incremental_alter(
    ctx: &RequestContext<'_>,
    mut request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let (resources, refusals) = incremental_refusals(ctx, &request);
    let refusals = self::refusals(ctx, &resources, refusals);
    request.resources = kept(std::mem::take(&mut request.resources), &refusals);
    let commit = ctx.broker.metadata.control(|image| plan_incremental_alter_configs(image, &request)).await;
    incremental_response(outcomes(resources, refusals, commit))
}

/// The request's resources and the broker's refusal of each.
fn legacy_refusals(
    ctx: &RequestContext<'_>,
    request: &AlterConfigsRequest,
) -> (Vec<(i8, String)>, Vec<Option<ApiError>>) {
    let resources = request.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    let refusals = broker_refusals(
        ctx,
        request.resources.iter().map(|r| {
            (r.resource_type, r.resource_name.as_str(), r.configs.iter().map(|c| (c.name.as_str(), c.value.as_deref())))
        }),
    );
    (resources, refusals)
}

/// As [`legacy_refusals`], for IncrementalAlterConfigs.
fn incremental_refusals(
    ctx: &RequestContext<'_>,
    request: &IncrementalAlterConfigsRequest,
) -> (Vec<(i8, String)>, Vec<Option<ApiError>>) {
    let resources = request.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    let refusals = broker_refusals(
        ctx,
        request.resources.iter().map(|r| {
            // DELETE (1) removes a key; the other operations leave a value.
            let changes =
                r.configs.iter().map(|c| (c.name.as_str(), c.value.as_deref().filter(|_| c.config_operation != 1)));
            (r.resource_type, r.resource_name.as_str(), changes)
        }),
    );
    (resources, refusals)
}

fn alter_response(outcomes: Vec<Outcome>) -> AlterConfigsResponse {
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

fn incremental_response(outcomes: Vec<Outcome>) -> IncrementalAlterConfigsResponse {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: ErrorCode, message: &str) -> Option<ApiError> {
        Some(ApiError::new(code.code(), message.to_string()))
    }

    #[test]
    fn a_broker_takes_only_its_own_resource_with_kafkas_messages() {
        assert!(this_node("3", 3).is_ok());
        let other = this_node("1", 3).unwrap_err();
        assert_eq!(other.code, ErrorCode::INVALID_REQUEST.code());
        assert_eq!(other.message, "Unexpected broker id, expected 3, but received 1");
        assert_eq!(this_node("x", 3).unwrap_err().message, "Node id must be an integer, but it is: x");
    }

    #[test]
    fn the_controllers_answer_is_merged_with_the_refusals_in_the_requests_order() {
        let resources = vec![
            (CONFIG_RESOURCE_TOPIC, "a".to_string()),
            (CONFIG_RESOURCE_BROKER, "2".to_string()),
            (CONFIG_RESOURCE_TOPIC, "b".to_string()),
            (CONFIG_RESOURCE_TOPIC, "c".to_string()),
        ];
        let refusals = vec![None, refused(ErrorCode::INVALID_REQUEST, "no"), None, None];
        let mut request: Vec<usize> = (0..4).collect();
        let refused = split(&mut request, resources, refusals).expect("one refused");
        assert_eq!(request, vec![0, 2, 3], "the refused resource is left out of what is forwarded");
        // The controller answers in its own order, and leaves "c" out.
        let answer = |name: &str, code: i16| incremental_alter_configs_response::AlterConfigsResourceResponse {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: name.to_string(),
            error_code: code,
            error_message: None,
            ..Default::default()
        };
        let controller = IncrementalAlterConfigsResponse {
            responses: vec![answer("b", ErrorCode::POLICY_VIOLATION.code()), answer("a", 0)],
            ..Default::default()
        };
        let ResponseBody::IncrementalAlterConfigs(merged) =
            merged(refused, ResponseBody::IncrementalAlterConfigs(Box::new(controller)))
        else {
            panic!("an IncrementalAlterConfigs response")
        };
        let seen: Vec<(&str, i16, Option<&str>)> = merged
            .responses
            .iter()
            .map(|r| (r.resource_name.as_str(), r.error_code, r.error_message.as_deref()))
            .collect();
        assert_eq!(
            seen,
            vec![
                ("a", 0, None),
                ("2", ErrorCode::INVALID_REQUEST.code(), Some("no")),
                ("b", ErrorCode::POLICY_VIOLATION.code(), None),
                ("c", ErrorCode::UNKNOWN_SERVER_ERROR.code(), None),
            ]
        );
    }

    #[test]
    fn nothing_refused_is_forwarded_whole() {
        let mut request = vec![1, 2];
        let resources = vec![(CONFIG_RESOURCE_TOPIC, "a".to_string()), (CONFIG_RESOURCE_BROKER, String::new())];
        assert!(split(&mut request, resources, vec![None, None]).is_none());
        assert_eq!(request, vec![1, 2]);
    }
}
