//! Which CreateAcls bindings and DeleteAcls filters Kafka refuses, and with
//! which INVALID_REQUEST message.
//!
//! Kafka checks a creation twice: the broker's `AclApis.handleCreateAcls`
//! refuses a CLUSTER resource not named `kafka-cluster` and an empty name,
//! then the controller's `AclControlManager.validateNewAcl` refuses filter
//! or unknown values and a principal without a colon (which the authorizer
//! could never parse back into a type and a name).

use super::binding::{AclBinding, AclBindingFilter, CLUSTER_NAME};
use super::error::InvalidRequest;
use super::types::{AclOperation, AclPermissionType, PatternType, ResourceType};

/// Every check a CreateAcls binding goes through, broker's first, in
/// Kafka's order: the first failure is the one reported.
pub fn validate_acl_creation(binding: &AclBinding) -> Result<(), InvalidRequest> {
    let pattern = &binding.pattern;
    if pattern.resource_type == ResourceType::Cluster && pattern.name != CLUSTER_NAME {
        return Err(invalid(format!("The only valid name for the CLUSTER resource is {CLUSTER_NAME}")));
    }
    if pattern.name.is_empty() {
        return Err(invalid("Invalid empty resource name".to_string()));
    }
    validate_new_acl(binding)
}

/// The controller's checks (`AclControlManager.validateNewAcl`): a stored
/// ACL has a concrete resource type, a LITERAL or PREFIXED pattern, a
/// concrete operation, ALLOW or DENY, a name, and a `Type:name` principal.
pub fn validate_new_acl(binding: &AclBinding) -> Result<(), InvalidRequest> {
    let (pattern, entry) = (&binding.pattern, &binding.entry);
    if matches!(pattern.resource_type, ResourceType::Unknown | ResourceType::Any) {
        return Err(invalid(format!("Invalid resourceType {}", pattern.resource_type)));
    }
    if !matches!(pattern.pattern_type, PatternType::Literal | PatternType::Prefixed) {
        return Err(invalid(format!("Invalid patternType {}", pattern.pattern_type)));
    }
    if matches!(entry.operation, AclOperation::Unknown | AclOperation::Any) {
        return Err(invalid(format!("Invalid operation {}", entry.operation)));
    }
    if !matches!(entry.permission_type, AclPermissionType::Deny | AclPermissionType::Allow) {
        return Err(invalid(format!("Invalid permissionType {}", entry.permission_type)));
    }
    if pattern.name.is_empty() {
        return Err(invalid("Resource name should not be empty".to_string()));
    }
    if !entry.principal.contains(':') {
        return Err(invalid(format!(
            "Could not parse principal from `{}` (no colon is present separating the principal type from the \
             principal name)",
            entry.principal
        )));
    }
    Ok(())
}

/// The controller's check of a DeleteAcls filter
/// (`AclControlManager.validateFilter`): no part it could not decode.
/// Everything else, even a filter matching every ACL, is allowed.
pub fn validate_delete_filter(filter: &AclBindingFilter) -> Result<(), InvalidRequest> {
    if filter.pattern_filter.is_unknown() {
        return Err(invalid("Unknown patternFilter.".to_string()));
    }
    if filter.entry_filter.is_unknown() {
        return Err(invalid("Unknown entryFilter.".to_string()));
    }
    Ok(())
}

fn invalid(message: String) -> InvalidRequest {
    InvalidRequest(message)
}
