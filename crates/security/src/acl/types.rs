//! The four small enums an ACL is made of, with Kafka's wire codes and names.
//!
//! Each is carried as an int8 in AccessControlEntryRecord and in the
//! CreateAcls / DescribeAcls / DeleteAcls requests. A code this version does
//! not know decodes as `Unknown` instead of failing, as Kafka's `fromCode`
//! does, so that a record or request from a newer peer still loads and is
//! then refused by validation rather than by the decoder.

use std::fmt;

/// Declares one of Kafka's code-carrying enums: the variants with their int8
/// code and Java constant name, `from_code`/`code`, the name as Java's
/// `toString` prints it, and the list of values in code order.
macro_rules! kafka_code_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $code:literal => $kafka:literal, )+ }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i8)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $code, )+
        }

        impl $name {
            /// Every value in code order, which is also Kafka's declaration
            /// (and therefore sort) order.
            pub const VALUES: &'static [Self] = &[$(Self::$variant),+];

            /// Kafka's `fromCode`: an unknown code is `Unknown`, not an error.
            pub fn from_code(code: i8) -> Self {
                match code {
                    $( $code => Self::$variant, )+
                    _ => Self::Unknown,
                }
            }

            /// The int8 the wire and the metadata records carry.
            pub fn code(self) -> i8 {
                self as i8
            }

            /// The Java constant name, e.g. `TRANSACTIONAL_ID`: what Kafka's
            /// `toString` prints and its error messages contain.
            pub fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $kafka, )+
                }
            }

            /// Kafka's `isUnknown`.
            pub fn is_unknown(self) -> bool {
                self == Self::Unknown
            }

            /// The value whose Java constant name is exactly `name`.
            fn from_exact_name(name: &str) -> Option<Self> {
                Self::VALUES.iter().copied().find(|value| value.name() == name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_code_enum! {
    /// The kind of resource an ACL protects (`org.apache.kafka.common.resource.ResourceType`).
    ResourceType {
        Unknown = 0 => "UNKNOWN",
        /// Only in filters: matches every resource type.
        Any = 1 => "ANY",
        Topic = 2 => "TOPIC",
        Group = 3 => "GROUP",
        Cluster = 4 => "CLUSTER",
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        DelegationToken = 6 => "DELEGATION_TOKEN",
        User = 7 => "USER",
    }
}

kafka_code_enum! {
    /// How an ACL's resource name is matched (`org.apache.kafka.common.resource.PatternType`).
    PatternType {
        Unknown = 0 => "UNKNOWN",
        /// Only in filters: any pattern type, the name compared exactly.
        Any = 1 => "ANY",
        /// Only in filters: every stored pattern that would apply to the
        /// filter's name (the literal name, the `*` wildcard, prefixes of it).
        Match = 2 => "MATCH",
        /// The name is the resource's name, or `*` for every resource.
        Literal = 3 => "LITERAL",
        /// The name is a prefix of the resources' names.
        Prefixed = 4 => "PREFIXED",
    }
}

kafka_code_enum! {
    /// What an ACL allows or denies (`org.apache.kafka.common.acl.AclOperation`).
    AclOperation {
        Unknown = 0 => "UNKNOWN",
        /// Only in filters: matches every operation.
        Any = 1 => "ANY",
        /// In an ACL: every operation.
        All = 2 => "ALL",
        Read = 3 => "READ",
        Write = 4 => "WRITE",
        Create = 5 => "CREATE",
        Delete = 6 => "DELETE",
        Alter = 7 => "ALTER",
        Describe = 8 => "DESCRIBE",
        ClusterAction = 9 => "CLUSTER_ACTION",
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        AlterConfigs = 11 => "ALTER_CONFIGS",
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        CreateTokens = 13 => "CREATE_TOKENS",
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
        TwoPhaseCommit = 15 => "TWO_PHASE_COMMIT",
    }
}

kafka_code_enum! {
    /// Whether an ACL allows or denies (`org.apache.kafka.common.acl.AclPermissionType`).
    AclPermissionType {
        Unknown = 0 => "UNKNOWN",
        /// Only in filters: matches both.
        Any = 1 => "ANY",
        Deny = 2 => "DENY",
        Allow = 3 => "ALLOW",
    }
}

impl ResourceType {
    /// Kafka's `ResourceType.fromString`: the constant name in any case,
    /// anything else `Unknown`.
    pub fn from_name(name: &str) -> Self {
        Self::from_exact_name(&name.to_uppercase()).unwrap_or(Self::Unknown)
    }

    /// Kafka's `AclEntry.supportedOperations`: what an ACL on a resource
    /// of this type can grant, and what `*_authorized_operations` report.
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => {
                &[Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe]
            }
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Unknown | ResourceType::Any => &[],
        }
    }

    /// `SecurityUtils.resourceTypeName`, e.g. `TransactionalId`: the form
    /// Kafka's authorizer audit log and tools print.
    pub fn pascal_name(self) -> String {
        pascal_case(self.name())
    }
}

impl PatternType {
    /// Kafka's `PatternType.fromString`: unlike the other three enums it
    /// takes the constant name in upper case only.
    pub fn from_name(name: &str) -> Self {
        Self::from_exact_name(name).unwrap_or(Self::Unknown)
    }

    /// Kafka's `isSpecific`: a type a stored ACL can have, not a filter-only one.
    pub fn is_specific(self) -> bool {
        !matches!(self, Self::Unknown | Self::Any | Self::Match)
    }
}

impl AclOperation {
    /// Kafka's `AclOperation.fromString`: the constant name in any case.
    pub fn from_name(name: &str) -> Self {
        Self::from_exact_name(&name.to_uppercase()).unwrap_or(Self::Unknown)
    }

    /// `SecurityUtils.operationName`, e.g. `DescribeConfigs`.
    pub fn pascal_name(self) -> String {
        pascal_case(self.name())
    }
}

impl AclPermissionType {
    /// Kafka's `AclPermissionType.fromString`: the constant name in any case.
    pub fn from_name(name: &str) -> Self {
        Self::from_exact_name(&name.to_uppercase()).unwrap_or(Self::Unknown)
    }

    /// `SecurityUtils.permissionTypeName`, e.g. `Allow`.
    pub fn pascal_name(self) -> String {
        pascal_case(self.name())
    }
}

/// `SecurityUtils.toPascalCase`: drops underscores, capitalises the letter
/// after each and at the start, lower-cases the rest.
fn pascal_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut capitalize_next = true;
    for c in name.chars() {
        if c == '_' {
            capitalize_next = true;
        } else if capitalize_next {
            out.extend(c.to_uppercase());
            capitalize_next = false;
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// What the authorizer decided (`org.apache.kafka.server.authorizer.AuthorizationResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthorizationResult {
    Allowed,
    Denied,
}

impl fmt::Display for AuthorizationResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Allowed => "ALLOWED",
            Self::Denied => "DENIED",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kafkas() {
        let resource_types: Vec<(i8, &str)> = ResourceType::VALUES.iter().map(|t| (t.code(), t.name())).collect();
        assert_eq!(
            resource_types,
            [
                (0, "UNKNOWN"),
                (1, "ANY"),
                (2, "TOPIC"),
                (3, "GROUP"),
                (4, "CLUSTER"),
                (5, "TRANSACTIONAL_ID"),
                (6, "DELEGATION_TOKEN"),
                (7, "USER")
            ]
        );
        let pattern_types: Vec<(i8, &str)> = PatternType::VALUES.iter().map(|t| (t.code(), t.name())).collect();
        assert_eq!(pattern_types, [(0, "UNKNOWN"), (1, "ANY"), (2, "MATCH"), (3, "LITERAL"), (4, "PREFIXED")]);
        let operations: Vec<i8> = AclOperation::VALUES.iter().map(|o| o.code()).collect();
        assert_eq!(operations, (0..=15).collect::<Vec<i8>>());
        assert_eq!(AclOperation::TwoPhaseCommit.name(), "TWO_PHASE_COMMIT");
        assert_eq!(AclOperation::ClusterAction.code(), 9);
        assert_eq!(AclOperation::IdempotentWrite.code(), 12);
        let permissions: Vec<(i8, &str)> = AclPermissionType::VALUES.iter().map(|p| (p.code(), p.name())).collect();
        assert_eq!(permissions, [(0, "UNKNOWN"), (1, "ANY"), (2, "DENY"), (3, "ALLOW")]);
    }

    #[test]
    fn every_code_round_trips_and_unknown_codes_are_unknown() {
        for value in AclOperation::VALUES {
            assert_eq!(AclOperation::from_code(value.code()), *value);
        }
        for value in ResourceType::VALUES {
            assert_eq!(ResourceType::from_code(value.code()), *value);
        }
        assert_eq!(AclOperation::from_code(16), AclOperation::Unknown);
        assert_eq!(AclOperation::from_code(-1), AclOperation::Unknown);
        assert_eq!(ResourceType::from_code(8), ResourceType::Unknown);
        assert_eq!(PatternType::from_code(5), PatternType::Unknown);
        assert_eq!(AclPermissionType::from_code(4), AclPermissionType::Unknown);
        assert!(AclPermissionType::from_code(42).is_unknown());
    }

    #[test]
    fn display_is_the_java_constant_name() {
        assert_eq!(ResourceType::Topic.to_string(), "TOPIC");
        assert_eq!(ResourceType::TransactionalId.to_string(), "TRANSACTIONAL_ID");
        assert_eq!(PatternType::Prefixed.to_string(), "PREFIXED");
        assert_eq!(AclOperation::DescribeConfigs.to_string(), "DESCRIBE_CONFIGS");
        assert_eq!(AclPermissionType::Allow.to_string(), "ALLOW");
        assert_eq!(AuthorizationResult::Denied.to_string(), "DENIED");
    }

    #[test]
    fn pascal_names_are_security_utils() {
        assert_eq!(ResourceType::Topic.pascal_name(), "Topic");
        assert_eq!(ResourceType::TransactionalId.pascal_name(), "TransactionalId");
        assert_eq!(AclOperation::DescribeConfigs.pascal_name(), "DescribeConfigs");
        assert_eq!(AclOperation::TwoPhaseCommit.pascal_name(), "TwoPhaseCommit");
        assert_eq!(AclPermissionType::Deny.pascal_name(), "Deny");
    }

    #[test]
    fn from_name_follows_each_enums_from_string() {
        assert_eq!(ResourceType::from_name("topic"), ResourceType::Topic);
        assert_eq!(ResourceType::from_name("Transactional_Id"), ResourceType::TransactionalId);
        // Kafka upper-cases and looks the constant up: the Pascal form has no underscore.
        assert_eq!(ResourceType::from_name("TransactionalId"), ResourceType::Unknown);
        assert_eq!(AclOperation::from_name("read"), AclOperation::Read);
        assert_eq!(AclOperation::from_name("nope"), AclOperation::Unknown);
        assert_eq!(AclPermissionType::from_name("Allow"), AclPermissionType::Allow);
        assert_eq!(PatternType::from_name("PREFIXED"), PatternType::Prefixed);
        assert_eq!(PatternType::from_name("prefixed"), PatternType::Unknown);
    }

    #[test]
    fn supported_operations_are_kafkas_bit_fields() {
        let bits = |t: ResourceType| t.supported_operations().iter().fold(0, |bits, op| bits | 1 << op.code());
        // Utils.to32BitField of AclEntry.supportedOperations, as Kafka reports them.
        assert_eq!(bits(ResourceType::Topic), 3576);
        assert_eq!(bits(ResourceType::Group), 3400);
        assert_eq!(bits(ResourceType::Cluster), 8096);
        assert_eq!(bits(ResourceType::TransactionalId), 272);
    }

    #[test]
    fn only_literal_and_prefixed_are_specific() {
        let specific: Vec<PatternType> = PatternType::VALUES.iter().copied().filter(|p| p.is_specific()).collect();
        assert_eq!(specific, [PatternType::Literal, PatternType::Prefixed]);
    }
}
