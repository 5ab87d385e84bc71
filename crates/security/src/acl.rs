//! Kafka's ACLs and its StandardAuthorizer's decision (Kafka 4.3.1), as a
//! pure library: the broker stores the ACLs it replays from the metadata
//! log (AccessControlEntryRecord / RemoveAccessControlEntryRecord) in an
//! [`Authorizer`] and asks it about every request; the controller checks
//! CreateAcls bindings and DeleteAcls filters with [`validate_acl_creation`]
//! and [`validate_delete_filter`].
//!
//! Nothing here reads the log or the network. ACL ids are the records'
//! Uuids as their 16 bytes, so this crate needs no protocol types.
//!
//! Modules point one way: `types` < `binding` < `error`, `validate`,
//! `index` < `authorizer`; `host` stands alone.

mod authorizer;
mod binding;
mod error;
mod host;
mod index;
mod types;
mod validate;

#[cfg(test)]
mod tests;

/// An ACL's id: the record's Uuid, as its 16 bytes in wire order.
pub type AclId = [u8; 16];

pub use authorizer::{Authorizer, AuthorizerConfig, MatchingRule};
pub use binding::{
    AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter, ResourcePattern, ResourcePatternFilter,
    CLUSTER_NAME, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};
pub use error::{id_text, AclStoreError, InvalidAuthorizeArgs, InvalidPrincipal, InvalidRequest};
pub use host::host_address;
pub use types::{AclOperation, AclPermissionType, AuthorizationResult, PatternType, ResourceType};
pub use validate::{validate_acl_creation, validate_delete_filter, validate_new_acl};
