//! DescribeAcls, CreateAcls and DeleteAcls, as `kafka-acls.sh` uses them.
//! Describe reads the metadata image's ACLs (DESCRIBE on the cluster);
//! Create and Delete (ALTER on the cluster) are the controller's
//! `plan_create_acls` and `plan_delete_acls`, committed in one go. Without
//! an authorizer all three answer SECURITY_DISABLED, as Kafka's do.

use krabka_controller::acls::{plan_create_acls, plan_delete_acls};
use krabka_controller::ApiError;
use krabka_protocol::create_acls_response::AclCreationResult;
use krabka_protocol::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use krabka_protocol::describe_acls_response::{AclDescription, DescribeAclsResource};
use krabka_protocol::{
    create_acls_request, delete_acls_request, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest,
    DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse, ErrorCode,
};
use krabka_security::acl::{
    validate_delete_filter, AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter, AclOperation,
    AclPermissionType, PatternType, ResourcePattern, ResourcePatternFilter, ResourceType,
};

use crate::authorization::{allowed_on_cluster, cluster_denied};
use crate::request::RequestContext;

/// Kafka 4.3.1's texts: DescribeAcls says where, the changes do not.
const NO_AUTHORIZER_DESCRIBE: &str = "No Authorizer is configured on the broker";
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Why the request is refused before its ACLs are looked at, if it is.
fn refusal(ctx: &RequestContext<'_>, operation: AclOperation) -> Option<(i16, String)> {
    if ctx.broker.config.security.authorizer.is_none() {
        let text = if operation == AclOperation::Describe { NO_AUTHORIZER_DESCRIBE } else { NO_AUTHORIZER };
        return Some((ErrorCode::SECURITY_DISABLED.code(), text.into()));
    }
    if !allowed_on_cluster(ctx, operation) {
        let (code, message) = cluster_denied();
        return Some((code, message.unwrap_or_default()));
    }
    None
}

pub fn describe(ctx: &RequestContext<'_>, request: DescribeAclsRequest) -> DescribeAclsResponse {
    if let Some((code, message)) = refusal(ctx, AclOperation::Describe) {
        return DescribeAclsResponse { error_code: code, error_message: Some(message), ..Default::default() };
    }
    let filter = binding_filter(
        (request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter),
        (request.principal_filter, request.host_filter, request.operation, request.permission_type),
    );
    if let Err(e) = validate_delete_filter(&filter) {
        let code = ErrorCode::INVALID_REQUEST.code();
        return DescribeAclsResponse { error_code: code, error_message: Some(e.0), ..Default::default() };
    }
    let image = ctx.broker.metadata.image();
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    // The authorizer lists ACLs by resource, so each resource's come together.
    for binding in image.acls.acls(&filter) {
        let (pattern, entry) = (&binding.pattern, binding.entry);
        let description = AclDescription {
            principal: entry.principal,
            host: entry.host,
            operation: entry.operation.code(),
            permission_type: entry.permission_type.code(),
            ..Default::default()
        };
        match resources.last_mut() {
            Some(last) if same_resource(last, pattern) => last.acls.push(description),
            _ => resources.push(DescribeAclsResource {
                resource_type: pattern.resource_type.code(),
                resource_name: pattern.name.clone(),
                pattern_type: pattern.pattern_type.code(),
                acls: vec![description],
                ..Default::default()
            }),
        }
    }
    DescribeAclsResponse { resources, ..Default::default() }
}

fn same_resource(resource: &DescribeAclsResource, pattern: &ResourcePattern) -> bool {
    resource.resource_type == pattern.resource_type.code()
        && resource.resource_name == pattern.name
        && resource.pattern_type == pattern.pattern_type.code()
}

/// A filter from the request's fields (resource part, entry part).
fn binding_filter(
    (resource_type, name, pattern_type): (i8, Option<String>, i8),
    (principal, host, operation, permission_type): (Option<String>, Option<String>, i8, i8),
) -> AclBindingFilter {
    AclBindingFilter::new(
        ResourcePatternFilter::new(ResourceType::from_code(resource_type), name, PatternType::from_code(pattern_type)),
        AccessControlEntryFilter::new(
            principal,
            host,
            AclOperation::from_code(operation),
            AclPermissionType::from_code(permission_type),
        ),
    )
}

fn creation_binding(c: &create_acls_request::AclCreation) -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(
            ResourceType::from_code(c.resource_type),
            c.resource_name.clone(),
            PatternType::from_code(c.resource_pattern_type),
        ),
        AccessControlEntry::new(
            c.principal.clone(),
            c.host.clone(),
            AclOperation::from_code(c.operation),
            AclPermissionType::from_code(c.permission_type),
        ),
    )
}

fn deletion_filter(f: &delete_acls_request::DeleteAclsFilter) -> AclBindingFilter {
    binding_filter(
        (f.resource_type_filter, f.resource_name_filter.clone(), f.pattern_type_filter),
        (f.principal_filter.clone(), f.host_filter.clone(), f.operation, f.permission_type),
    )
}

pub async fn create(ctx: &RequestContext<'_>, request: CreateAclsRequest) -> CreateAclsResponse {
    if let Some((code, message)) = refusal(ctx, AclOperation::Alter) {
        return create_failed(&request, code, &message);
    }
    let bindings: Vec<AclBinding> = request.creations.iter().map(creation_binding).collect();
    let planned = ctx.broker.metadata.control(|image| Ok::<_, ApiError>(plan_create_acls(image, &bindings))).await;
    match planned {
        Ok((_, results)) => CreateAclsResponse {
            results: results.into_iter().map(|r| creation_result(r.err())).collect(),
            ..Default::default()
        },
        Err(e) => create_failed(&request, e.code, &e.message),
    }
}

fn creation_result(error: Option<ApiError>) -> AclCreationResult {
    AclCreationResult {
        error_code: error.as_ref().map_or(0, |e| e.code),
        error_message: error.map(|e| e.message),
        ..Default::default()
    }
}

/// Every creation answered with `code` and `message`.
pub fn create_failed(request: &CreateAclsRequest, code: i16, message: &str) -> CreateAclsResponse {
    let error = || Some(ApiError::new(code, message));
    CreateAclsResponse {
        results: request.creations.iter().map(|_| creation_result(error())).collect(),
        ..Default::default()
    }
}

pub async fn delete(ctx: &RequestContext<'_>, request: DeleteAclsRequest) -> DeleteAclsResponse {
    if let Some((code, message)) = refusal(ctx, AclOperation::Alter) {
        return delete_failed(&request, code, &message);
    }
    let filters: Vec<AclBindingFilter> = request.filters.iter().map(deletion_filter).collect();
    let planned = ctx.broker.metadata.control(|image| Ok::<_, ApiError>(plan_delete_acls(image, &filters))).await;
    let results = match planned {
        Ok((_, results)) => results,
        Err(e) => return delete_failed(&request, e.code, &e.message),
    };
    let filter_results = results
        .into_iter()
        .map(|result| match result {
            Ok(deleted) => DeleteAclsFilterResult {
                matching_acls: deleted.into_iter().map(matching_acl).collect(),
                ..Default::default()
            },
            Err(e) => {
                DeleteAclsFilterResult { error_code: e.code, error_message: Some(e.message), ..Default::default() }
            }
        })
        .collect();
    DeleteAclsResponse { filter_results, ..Default::default() }
}

fn matching_acl(binding: AclBinding) -> DeleteAclsMatchingAcl {
    let (pattern, entry) = (binding.pattern, binding.entry);
    DeleteAclsMatchingAcl {
        resource_type: pattern.resource_type.code(),
        resource_name: pattern.name,
        pattern_type: pattern.pattern_type.code(),
        principal: entry.principal,
        host: entry.host,
        operation: entry.operation.code(),
        permission_type: entry.permission_type.code(),
        ..Default::default()
    }
}

/// Every filter answered with `code` and `message`.
pub fn delete_failed(request: &DeleteAclsRequest, code: i16, message: &str) -> DeleteAclsResponse {
    let failed =
        || DeleteAclsFilterResult { error_code: code, error_message: Some(message.into()), ..Default::default() };
    DeleteAclsResponse { filter_results: request.filters.iter().map(|_| failed()).collect(), ..Default::default() }
}
