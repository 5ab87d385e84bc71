//! DescribeClientQuotas and AlterClientQuotas: client quotas as
//! `kafka-configs.sh --entity-type users/clients/ips` manages them. Describe
//! reads the metadata image with Kafka's filter rules (ClientQuotasImage:
//! exact, default and specified matches, strict or not); Alter is the
//! controller's `plan_alter_client_quotas`, committed in one go (nothing
//! with validate_only). The quotas are stored and described; enforcing them
//! is not built yet (docs/operations.md).

use std::collections::{BTreeMap, BTreeSet};

use krabka_controller::client_quotas::{plan_alter_client_quotas, QuotaAlteration, CLIENT_ID, IP, USER};
use krabka_controller::ApiError;
use krabka_metadata::QuotaEntity;
use krabka_protocol::{
    alter_client_quotas_response, describe_client_quotas_response, AlterClientQuotasRequest, AlterClientQuotasResponse,
    DescribeClientQuotasRequest, DescribeClientQuotasResponse, ErrorCode,
};

use crate::authorization::{allowed_on_cluster, cluster_denied};
use crate::request::RequestContext;
use krabka_security::acl::AclOperation;

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// A describe filter: entity types to exact names (None: the default
/// entity), and types that must merely be present.
struct Filter {
    exact: BTreeMap<String, Option<String>>,
    present: BTreeSet<String>,
    strict: bool,
}

pub fn describe(ctx: &RequestContext<'_>, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse {
    if !allowed_on_cluster(ctx, AclOperation::DescribeConfigs) {
        let (error_code, error_message) = cluster_denied();
        return DescribeClientQuotasResponse { error_code, error_message, entries: None, ..Default::default() };
    }
    let filter = match filter(&request) {
        Ok(filter) => filter,
        Err(e) => {
            return DescribeClientQuotasResponse {
                error_code: e.code,
                error_message: Some(e.message),
                entries: Some(Vec::new()),
                ..Default::default()
            }
        }
    };
    let image = ctx.broker.metadata.image();
    let entries = image
        .client_quotas
        .iter()
        .filter(|(entity, _)| filter.matches(entity))
        .map(|(entity, quotas)| describe_client_quotas_response::EntryData {
            entity: entity
                .iter()
                .map(|(entity_type, entity_name)| describe_client_quotas_response::EntityData {
                    entity_type: entity_type.clone(),
                    entity_name: entity_name.clone(),
                    ..Default::default()
                })
                .collect(),
            values: quotas
                .iter()
                .map(|(key, &value)| describe_client_quotas_response::ValueData {
                    key: key.clone(),
                    value,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    DescribeClientQuotasResponse { entries: Some(entries), ..Default::default() }
}

/// The request's filter, refused as Kafka's ClientQuotasImage refuses it.
fn filter(request: &DescribeClientQuotasRequest) -> Result<Filter, ApiError> {
    let invalid = |message: String| ApiError::new(ErrorCode::INVALID_REQUEST.code(), message);
    let mut filter = Filter { exact: BTreeMap::new(), present: BTreeSet::new(), strict: request.strict };
    for component in &request.components {
        let entity_type = &component.entity_type;
        if entity_type.is_empty() {
            return Err(invalid("Invalid empty entity type.".into()));
        }
        if filter.exact.contains_key(entity_type) || filter.present.contains(entity_type) {
            return Err(invalid(format!("Entity type {entity_type} cannot appear more than once in the filter.")));
        }
        if ![IP, USER, CLIENT_ID].contains(&entity_type.as_str()) {
            let message = format!("Unsupported entity type {entity_type}");
            return Err(ApiError::new(ErrorCode::UNSUPPORTED_VERSION.code(), message));
        }
        let name = component.r#match.clone();
        match (component.match_type, name) {
            (MATCH_EXACT, None) => {
                return Err(invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.".into()))
            }
            (MATCH_EXACT, name) => {
                filter.exact.insert(entity_type.clone(), name);
            }
            (MATCH_DEFAULT, Some(_)) => {
                let message = "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.";
                return Err(invalid(message.into()));
            }
            (MATCH_DEFAULT, None) => {
                filter.exact.insert(entity_type.clone(), None);
            }
            (MATCH_SPECIFIED, Some(_)) => {
                let message = "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.";
                return Err(invalid(message.into()));
            }
            (MATCH_SPECIFIED, None) => {
                filter.present.insert(entity_type.clone());
            }
            (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
        }
    }
    let names = |t: &str| filter.exact.contains_key(t) || filter.present.contains(t);
    if names(IP) && (names(USER) || names(CLIENT_ID)) {
        let message = "Invalid entity filter component combination. IP filter component should not be used with \
                       user or clientId filter component.";
        return Err(invalid(message.into()));
    }
    Ok(filter)
}

impl Filter {
    fn matches(&self, entity: &QuotaEntity) -> bool {
        if self.strict && entity.len() != self.exact.len() + self.present.len() {
            return false;
        }
        self.exact.iter().all(|(t, name)| entity.get(t) == Some(name))
            && self.present.iter().all(|t| entity.contains_key(t))
    }
}

pub async fn alter(ctx: &RequestContext<'_>, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    if !allowed_on_cluster(ctx, AclOperation::AlterConfigs) {
        let (code, message) = cluster_denied();
        return failed(&request, code, &message.unwrap_or_default());
    }
    let alterations: Vec<QuotaAlteration> = request
        .entries
        .iter()
        .map(|entry| QuotaAlteration {
            entity: entry.entity.iter().map(|e| (e.entity_type.clone(), e.entity_name.clone())).collect(),
            ops: entry.ops.iter().map(|op| (op.key.clone(), (!op.remove).then_some(op.value))).collect(),
        })
        .collect();
    let validate_only = request.validate_only;
    let planned = ctx
        .broker
        .metadata
        .control(|image| {
            let (records, outcomes) = plan_alter_client_quotas(image, &alterations);
            Ok::<_, ApiError>((if validate_only { Vec::new() } else { records }, outcomes))
        })
        .await;
    let outcomes = match planned {
        Ok((_, outcomes)) => outcomes,
        // The commit failed: every entity is answered with its error.
        Err(e) => return failed(&request, e.code, &e.message),
    };
    let entries = outcomes.into_iter().map(|(entity, error)| entry(entity, error)).collect();
    AlterClientQuotasResponse { entries, ..Default::default() }
}

/// Every entity of `request` answered with `code` and `message`, as
/// Kafka's getErrorResponse answers them.
pub fn failed(request: &AlterClientQuotasRequest, code: i16, message: &str) -> AlterClientQuotasResponse {
    let error = ApiError::new(code, message);
    let entries = request
        .entries
        .iter()
        .map(|e| {
            entry(
                e.entity.iter().map(|e| (e.entity_type.clone(), e.entity_name.clone())).collect(),
                Some(error.clone()),
            )
        })
        .collect();
    AlterClientQuotasResponse { entries, ..Default::default() }
}

fn entry(entity: Vec<(String, Option<String>)>, error: Option<ApiError>) -> alter_client_quotas_response::EntryData {
    alter_client_quotas_response::EntryData {
        error_code: error.as_ref().map_or(0, |e| e.code),
        error_message: error.map(|e| e.message),
        entity: entity
            .into_iter()
            .map(|(entity_type, entity_name)| alter_client_quotas_response::EntityData {
                entity_type,
                entity_name,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
