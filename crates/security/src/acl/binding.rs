//! ACL bindings (a resource pattern plus an access control entry) and the
//! filters DescribeAcls and DeleteAcls select them with, matching as
//! Kafka's `ResourcePatternFilter`, `AccessControlEntryFilter` and
//! `AclBindingFilter` do. A `None` field in a filter is Kafka's `null`: it
//! matches anything.

use std::fmt;

use super::types::{AclOperation, AclPermissionType, PatternType, ResourceType};

/// The resource name (LITERAL) that stands for every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The host that stands for every client address.
pub const WILDCARD_HOST: &str = "*";
/// The principal that stands for every principal. Only the `User` type has
/// a wildcard: `Group:*` is just a principal named `*`.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The one valid name of the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Which resources an ACL applies to (`ResourcePattern`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    pub fn new(resource_type: ResourceType, name: impl Into<String>, pattern_type: PatternType) -> Self {
        Self { resource_type, name: name.into(), pattern_type }
    }

    /// The filter matching exactly this pattern.
    pub fn to_filter(&self) -> ResourcePatternFilter {
        ResourcePatternFilter::new(self.resource_type, Some(self.name.clone()), self.pattern_type)
    }

    /// Kafka's `isUnknown`: a part this version could not decode.
    pub fn is_unknown(&self) -> bool {
        self.resource_type.is_unknown() || self.pattern_type.is_unknown()
    }
}

impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

/// Who may do what from where (`AccessControlEntry`). The principal is kept
/// as the text it was created with (`Type:name`), as Kafka stores it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessControlEntry {
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AccessControlEntry {
    pub fn new(
        principal: impl Into<String>,
        host: impl Into<String>,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> Self {
        Self { principal: principal.into(), host: host.into(), operation, permission_type }
    }

    /// The filter matching exactly this entry.
    pub fn to_filter(&self) -> AccessControlEntryFilter {
        AccessControlEntryFilter::new(
            Some(self.principal.clone()),
            Some(self.host.clone()),
            self.operation,
            self.permission_type,
        )
    }

    /// Kafka's `isUnknown`.
    pub fn is_unknown(&self) -> bool {
        self.operation.is_unknown() || self.permission_type.is_unknown()
    }
}

impl fmt::Display for AccessControlEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal, self.host, self.operation, self.permission_type
        )
    }
}

/// One ACL (`AclBinding`): what AccessControlEntryRecord stores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessControlEntry,
}

impl AclBinding {
    pub fn new(pattern: ResourcePattern, entry: AccessControlEntry) -> Self {
        Self { pattern, entry }
    }

    /// The binding an AccessControlEntryRecord describes, its int8 fields
    /// decoded as Kafka's `StandardAcl.fromRecord` does (unknown codes
    /// become `Unknown`).
    pub fn from_record(
        resource_type: i8,
        resource_name: impl Into<String>,
        pattern_type: i8,
        principal: impl Into<String>,
        host: impl Into<String>,
        operation: i8,
        permission_type: i8,
    ) -> Self {
        Self {
            pattern: ResourcePattern::new(
                ResourceType::from_code(resource_type),
                resource_name,
                PatternType::from_code(pattern_type),
            ),
            entry: AccessControlEntry::new(
                principal,
                host,
                AclOperation::from_code(operation),
                AclPermissionType::from_code(permission_type),
            ),
        }
    }

    /// The filter matching exactly this binding.
    pub fn to_filter(&self) -> AclBindingFilter {
        AclBindingFilter::new(self.pattern.to_filter(), self.entry.to_filter())
    }

    /// Kafka's `isUnknown`.
    pub fn is_unknown(&self) -> bool {
        self.pattern.is_unknown() || self.entry.is_unknown()
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(pattern={}, entry={})", self.pattern, self.entry)
    }
}

/// Selects resource patterns (`ResourcePatternFilter`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourcePatternFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
}

impl ResourcePatternFilter {
    /// Matches every pattern.
    pub const ANY: Self = Self { resource_type: ResourceType::Any, name: None, pattern_type: PatternType::Any };

    pub fn new(resource_type: ResourceType, name: Option<String>, pattern_type: PatternType) -> Self {
        Self { resource_type, name, pattern_type }
    }

    /// Kafka's `isUnknown`: DeleteAcls refuses such a filter.
    pub fn is_unknown(&self) -> bool {
        self.resource_type.is_unknown() || self.pattern_type.is_unknown()
    }

    /// Kafka's `ResourcePatternFilter.matches`. ANY compares the name
    /// exactly whatever the stored pattern type; MATCH asks which stored
    /// patterns would apply to a resource of that name: the same literal
    /// name, the literal `*`, and prefixed patterns the name starts with.
    /// (Kafka throws on a MATCH against a stored pattern that is neither
    /// LITERAL nor PREFIXED; such a pattern simply does not match here.)
    pub fn matches(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != pattern.resource_type {
            return false;
        }
        let any_or_match = matches!(self.pattern_type, PatternType::Any | PatternType::Match);
        if !any_or_match && self.pattern_type != pattern.pattern_type {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == pattern.pattern_type {
            return *name == pattern.name;
        }
        match pattern.pattern_type {
            PatternType::Literal => *name == pattern.name || pattern.name == WILDCARD_RESOURCE,
            PatternType::Prefixed => name.starts_with(&pattern.name),
            _ => false,
        }
    }

    /// Kafka's `matchesAtMostOne`.
    pub fn matches_at_most_one(&self) -> bool {
        self.find_indefinite_field().is_none()
    }

    /// Kafka's `findIndefiniteField`: why this filter may match more than
    /// one pattern, in Kafka's words.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        match (self.resource_type, &self.name, self.pattern_type) {
            (ResourceType::Any, _, _) => Some("Resource type is ANY."),
            (ResourceType::Unknown, _, _) => Some("Resource type is UNKNOWN."),
            (_, None, _) => Some("Resource name is NULL."),
            (_, _, PatternType::Match) => Some("Resource pattern type is MATCH."),
            (_, _, PatternType::Unknown) => Some("Resource pattern type is UNKNOWN."),
            _ => None,
        }
    }
}

impl fmt::Display for ResourcePatternFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name.as_deref().unwrap_or("<any>");
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, name, self.pattern_type
        )
    }
}

/// Selects access control entries (`AccessControlEntryFilter`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessControlEntryFilter {
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AccessControlEntryFilter {
    /// Matches every entry.
    pub const ANY: Self =
        Self { principal: None, host: None, operation: AclOperation::Any, permission_type: AclPermissionType::Any };

    pub fn new(
        principal: Option<String>,
        host: Option<String>,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> Self {
        Self { principal, host, operation, permission_type }
    }

    /// Kafka's `isUnknown`: DeleteAcls refuses such a filter.
    pub fn is_unknown(&self) -> bool {
        self.operation.is_unknown() || self.permission_type.is_unknown()
    }

    /// Kafka's `matches`: principal and host compared as text (`User:*` in
    /// a filter finds the wildcard ACLs, not every ACL), ANY operation and
    /// permission match everything.
    pub fn matches(&self, entry: &AccessControlEntry) -> bool {
        if self.principal.as_ref().is_some_and(|principal| *principal != entry.principal) {
            return false;
        }
        if self.host.as_ref().is_some_and(|host| *host != entry.host) {
            return false;
        }
        if self.operation != AclOperation::Any && self.operation != entry.operation {
            return false;
        }
        self.permission_type == AclPermissionType::Any || self.permission_type == entry.permission_type
    }

    /// Kafka's `matchesAtMostOne`.
    pub fn matches_at_most_one(&self) -> bool {
        self.find_indefinite_field().is_none()
    }

    /// Kafka's `findIndefiniteField`, in Kafka's words.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        if self.principal.is_none() {
            return Some("Principal is NULL");
        }
        if self.host.is_none() {
            return Some("Host is NULL");
        }
        match (self.operation, self.permission_type) {
            (AclOperation::Any, _) => Some("Operation is ANY"),
            (AclOperation::Unknown, _) => Some("Operation is UNKNOWN"),
            (_, AclPermissionType::Any) => Some("Permission type is ANY"),
            (_, AclPermissionType::Unknown) => Some("Permission type is UNKNOWN"),
            _ => None,
        }
    }
}

impl fmt::Display for AccessControlEntryFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal.as_deref().unwrap_or("<any>"),
            self.host.as_deref().unwrap_or("<any>"),
            self.operation,
            self.permission_type
        )
    }
}

/// Selects ACL bindings (`AclBindingFilter`), as DescribeAcls and
/// DeleteAcls carry them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AclBindingFilter {
    pub pattern_filter: ResourcePatternFilter,
    pub entry_filter: AccessControlEntryFilter,
}

impl AclBindingFilter {
    /// Matches every binding.
    pub const ANY: Self =
        Self { pattern_filter: ResourcePatternFilter::ANY, entry_filter: AccessControlEntryFilter::ANY };

    pub fn new(pattern_filter: ResourcePatternFilter, entry_filter: AccessControlEntryFilter) -> Self {
        Self { pattern_filter, entry_filter }
    }

    /// Kafka's `isUnknown`.
    pub fn is_unknown(&self) -> bool {
        self.pattern_filter.is_unknown() || self.entry_filter.is_unknown()
    }

    /// Kafka's `matches`: both halves match.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.pattern_filter.matches(&binding.pattern) && self.entry_filter.matches(&binding.entry)
    }

    /// Kafka's `matchesAtMostOne`.
    pub fn matches_at_most_one(&self) -> bool {
        self.pattern_filter.matches_at_most_one() && self.entry_filter.matches_at_most_one()
    }

    /// Kafka's `findIndefiniteField`: the pattern half's reason first.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        self.pattern_filter.find_indefinite_field().or_else(|| self.entry_filter.find_indefinite_field())
    }
}

impl fmt::Display for AclBindingFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(patternFilter={}, entryFilter={})", self.pattern_filter, self.entry_filter)
    }
}
