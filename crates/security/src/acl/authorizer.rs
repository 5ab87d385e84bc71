//! The ACL set a broker holds and Kafka's StandardAuthorizer decision over
//! it: who may perform which operation on which resource.
//!
//! The set changes only through `add` and `remove`, which the broker calls
//! as it replays AccessControlEntryRecord and RemoveAccessControlEntryRecord
//! from the metadata log; the decision reads it on every request.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::ControlFlow;

use super::binding::{AclBinding, AclBindingFilter, WILDCARD_HOST, WILDCARD_RESOURCE};
use super::error::{AclStoreError, InvalidAuthorizeArgs, InvalidPrincipal};
use super::index::{IndexedAcl, ResourceIndex};
use super::types::{AclOperation, AclPermissionType, AuthorizationResult, PatternType, ResourceType};
use super::AclId;
use crate::KafkaPrincipal;

/// The authorizer's configuration, as StandardAuthorizer reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals (`Type:name` text) allowed everything.
    pub super_users: BTreeSet<String>,
    /// `allow.everyone.if.no.acl.found`: the answer for a resource no ACL
    /// applies to. Off by default, so that a resource nobody wrote ACLs
    /// for is closed rather than open.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    pub const SUPER_USERS_CONFIG: &'static str = "super.users";
    pub const ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG: &'static str = "allow.everyone.if.no.acl.found";

    /// The configuration from the two settings' text, absent ones taking
    /// their defaults.
    pub fn from_values(super_users: Option<&str>, allow_everyone: Option<&str>) -> Result<Self, InvalidPrincipal> {
        Ok(Self {
            super_users: super_users.map(Self::parse_super_users).transpose()?.unwrap_or_default(),
            allow_everyone_if_no_acl_found: allow_everyone.is_some_and(Self::parse_allow_everyone),
        })
    }

    /// `super.users` as Kafka splits it: `;`-separated, each entry trimmed,
    /// empty entries skipped, every entry required to have a colon.
    pub fn parse_super_users(value: &str) -> Result<BTreeSet<String>, InvalidPrincipal> {
        let mut users = BTreeSet::new();
        for entry in value.split(';').map(str::trim).filter(|entry| !entry.is_empty()) {
            if !entry.contains(':') {
                return Err(InvalidPrincipal(entry.to_string()));
            }
            users.insert(entry.to_string());
        }
        Ok(users)
    }

    /// Java's `Boolean.parseBoolean` of the trimmed text: `true` in any
    /// case is true, anything else false.
    pub fn parse_allow_everyone(value: &str) -> bool {
        value.trim().eq_ignore_ascii_case("true")
    }

    fn no_acl_result(&self) -> AuthorizationResult {
        if self.allow_everyone_if_no_acl_found {
            AuthorizationResult::Allowed
        } else {
            AuthorizationResult::Denied
        }
    }

    /// Whether `principal`'s `Type:name` text is a configured super user,
    /// compared as text as Kafka does, without building the text.
    fn is_super_user(&self, principal: &KafkaPrincipal) -> bool {
        self.super_users.iter().any(|user| is_type_colon_name(user, &principal.principal_type, &principal.name))
    }
}

/// Why a decision came out as it did (Kafka's `MatchingRule`, which its
/// audit log prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchingRule {
    /// The principal is a super user.
    SuperUser,
    /// This ACL decided: a matching DENY, or failing that a matching ALLOW.
    Acl { id: AclId, result: AuthorizationResult },
    /// No ACL matched: `allow.everyone.if.no.acl.found`'s answer when no
    /// ACL at all applies to the resource, DENIED when some do but none
    /// matches this principal, host and operation.
    Default(AuthorizationResult),
}

impl MatchingRule {
    pub fn result(&self) -> AuthorizationResult {
        match self {
            Self::SuperUser => AuthorizationResult::Allowed,
            Self::Acl { result, .. } | Self::Default(result) => *result,
        }
    }
}

/// How many resource types there are, so each gets its own index slot.
const RESOURCE_TYPES: usize = 8;

/// Kafka's StandardAuthorizer state: its configuration and its ACLs, by id
/// and indexed by resource for the decision.
#[derive(Clone, Debug, Default)]
pub struct Authorizer {
    config: AuthorizerConfig,
    by_id: HashMap<AclId, AclBinding>,
    by_resource: [ResourceIndex; RESOURCE_TYPES],
}

impl Authorizer {
    pub fn new(config: AuthorizerConfig) -> Self {
        Self { config, ..Self::default() }
    }

    pub fn config(&self) -> &AuthorizerConfig {
        &self.config
    }

    /// Reconfigures, keeping the ACLs (Kafka's `configure` on a live authorizer).
    pub fn set_config(&mut self, config: AuthorizerConfig) {
        self.config = config;
    }

    /// Adds the ACL an AccessControlEntryRecord carries. Refuses an id
    /// already held, and an ACL identical to one already held, as Kafka's
    /// AclCache does; the set is then unchanged.
    pub fn add(&mut self, id: AclId, binding: AclBinding) -> Result<(), AclStoreError> {
        if self.by_id.contains_key(&id) {
            return Err(AclStoreError::DuplicateId(id));
        }
        let indexed = IndexedAcl {
            id,
            pattern_type: binding.pattern.pattern_type,
            operation: binding.entry.operation,
            principal: binding.entry.principal.clone(),
            host: binding.entry.host.clone(),
            permission_type: binding.entry.permission_type,
        };
        let index = &mut self.by_resource[slot(binding.pattern.resource_type)];
        index.insert(&binding.pattern.name, indexed).map_err(|_| AclStoreError::DuplicateAcl(id))?;
        self.by_id.insert(id, binding);
        Ok(())
    }

    /// Removes the ACL a RemoveAccessControlEntryRecord names, returning it.
    pub fn remove(&mut self, id: &AclId) -> Result<AclBinding, AclStoreError> {
        let binding = self.by_id.remove(id).ok_or(AclStoreError::UnknownId(*id))?;
        self.by_resource[slot(binding.pattern.resource_type)].remove(&binding.pattern.name, id);
        Ok(binding)
    }

    /// Replaces every ACL with a snapshot's (Kafka's `loadSnapshot`); on a
    /// duplicate the current set is kept.
    pub fn load_snapshot(&mut self, acls: impl IntoIterator<Item = (AclId, AclBinding)>) -> Result<(), AclStoreError> {
        let mut loaded = Self::new(self.config.clone());
        for (id, binding) in acls {
            loaded.add(id, binding)?;
        }
        *self = loaded;
        Ok(())
    }

    pub fn get(&self, id: &AclId) -> Option<&AclBinding> {
        self.by_id.get(id)
    }

    /// How many ACLs are held (Kafka's `aclCount`).
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Whether `principal`, connected from `host` (the client address as
    /// [`host_address`](super::host_address) prints it), may perform
    /// `operation` on the resource.
    pub fn authorize(
        &self,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> AuthorizationResult {
        self.authorize_with_rule(principal, host, operation, resource_type, resource_name).result()
    }

    /// [`authorize`](Self::authorize), saying which rule decided, for an
    /// audit log. Super users are allowed everything. Otherwise every ACL
    /// that applies to the resource (its literal name, the literal `*`,
    /// prefixes of its name) is weighed: any matching DENY denies, else any
    /// matching ALLOW allows, else the default rule answers.
    pub fn authorize_with_rule(
        &self,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> MatchingRule {
        self.rule_under(&self.config, principal, host, operation, (resource_type, resource_name))
    }

    /// [`authorize`](Self::authorize) under `config` rather than the
    /// authorizer's own: for a broker whose ACLs live in the metadata
    /// image and whose `super.users` are its own configuration.
    pub fn authorize_under(
        &self,
        config: &AuthorizerConfig,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        (resource_type, resource_name): (ResourceType, &str),
    ) -> AuthorizationResult {
        self.rule_under(config, principal, host, operation, (resource_type, resource_name)).result()
    }

    fn rule_under(
        &self,
        config: &AuthorizerConfig,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        (resource_type, resource_name): (ResourceType, &str),
    ) -> MatchingRule {
        if config.is_super_user(principal) {
            return MatchingRule::SuperUser;
        }
        let mut applies = false;
        let mut allow = None;
        let mut deny = None;
        let _ = self.by_resource[slot(resource_type)].for_each_applying(resource_name, |acl| {
            applies = true;
            match acl_result(acl, principal, host, operation) {
                Some(AuthorizationResult::Denied) => {
                    deny = Some(acl.id);
                    ControlFlow::Break(())
                }
                Some(AuthorizationResult::Allowed) => {
                    allow = allow.or(Some(acl.id));
                    ControlFlow::Continue(())
                }
                None => ControlFlow::Continue(()),
            }
        });
        match (deny, allow) {
            (Some(id), _) => MatchingRule::Acl { id, result: AuthorizationResult::Denied },
            (None, Some(id)) => MatchingRule::Acl { id, result: AuthorizationResult::Allowed },
            (None, None) if applies => MatchingRule::Default(AuthorizationResult::Denied),
            (None, None) => MatchingRule::Default(config.no_acl_result()),
        }
    }

    /// Whether `principal` may perform `operation` on at least one resource
    /// of `resource_type` (Kafka's default `Authorizer.authorizeByResourceType`,
    /// which StandardAuthorizer uses), e.g. IDEMPOTENT_WRITE or WRITE for
    /// InitProducerId. First a made-up resource named `hardcode` is
    /// authorized, which lets super users and `allow.everyone.if.no.acl.found`
    /// through. Otherwise it is allowed when some ALLOW for exactly this
    /// operation (or ALL; no implied operations here) names a resource no
    /// DENY covers: a LITERAL name not denied literally or by a PREFIXED
    /// DENY that is a prefix of it, a PREFIXED name no PREFIXED DENY is a
    /// prefix of, or the `*` wildcard; a DENY on `*` denies outright. This
    /// scans the type's ACLs; it serves a few request kinds, not every one.
    pub fn authorize_by_resource_type(
        &self,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> Result<AuthorizationResult, InvalidAuthorizeArgs> {
        self.authorize_by_resource_type_under(&self.config, principal, host, operation, resource_type)
    }

    /// [`authorize_by_resource_type`](Self::authorize_by_resource_type)
    /// under `config` (see [`authorize_under`](Self::authorize_under)).
    pub fn authorize_by_resource_type_under(
        &self,
        config: &AuthorizerConfig,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> Result<AuthorizationResult, InvalidAuthorizeArgs> {
        check_by_resource_type_args(operation, resource_type)?;
        let probe = self.authorize_under(config, principal, host, operation, (resource_type, "hardcode"));
        if probe == AuthorizationResult::Allowed {
            return Ok(probe);
        }
        Ok(self.any_resource_allowed(principal, host, operation, resource_type))
    }

    /// The ACL scan of [`authorize_by_resource_type`](Self::authorize_by_resource_type).
    fn any_resource_allowed(
        &self,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> AuthorizationResult {
        let mut names = ByTypeNames::default();
        for (name, acl) in self.by_resource[slot(resource_type)].iter() {
            let host_matches = acl.host == WILDCARD_HOST || acl.host == host;
            let operation_matches = acl.operation == operation || acl.operation == AclOperation::All;
            if !host_matches || !operation_matches || !principal_matches(&acl.principal, principal) {
                continue;
            }
            if names.record(name, acl.pattern_type, acl.permission_type).is_break() {
                return AuthorizationResult::Denied;
            }
        }
        names.result()
    }

    /// The ACLs `filter` matches, in Kafka's order (resource type, name in
    /// reverse, pattern type, operation, principal, host, permission): what
    /// DescribeAcls answers.
    pub fn acls(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.matching(filter).map(|(_, binding)| binding.clone()).collect()
    }

    /// The ids of the ACLs `filter` matches: what DeleteAcls removes.
    pub fn matching_ids(&self, filter: &AclBindingFilter) -> Vec<AclId> {
        self.matching(filter).map(|(id, _)| id).collect()
    }

    fn matching<'a>(&'a self, filter: &'a AclBindingFilter) -> impl Iterator<Item = (AclId, &'a AclBinding)> + 'a {
        let indexes = match filter.pattern_filter.resource_type {
            ResourceType::Any => &self.by_resource[..],
            resource_type => std::slice::from_ref(&self.by_resource[slot(resource_type)]),
        };
        indexes.iter().flat_map(ResourceIndex::iter).filter_map(move |(_, acl)| {
            let binding = self.by_id.get(&acl.id)?;
            filter.matches(binding).then_some((acl.id, binding))
        })
    }
}

/// The index slot of a resource type: its code, 0 to 7.
fn slot(resource_type: ResourceType) -> usize {
    resource_type as usize
}

/// What one ACL says about the request, or None if it does not match it
/// (Kafka's `findResult`; the resource is known to match). An ALLOW for
/// READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW for
/// ALTER_CONFIGS also allows DESCRIBE_CONFIGS, but a DENY denies only its
/// own operation; ALL covers every operation either way. Anything but
/// ALLOW counts as DENY, failing closed.
fn acl_result(
    acl: &IndexedAcl,
    principal: &KafkaPrincipal,
    host: &str,
    operation: AclOperation,
) -> Option<AuthorizationResult> {
    if !principal_matches(&acl.principal, principal) {
        return None;
    }
    if acl.host != WILDCARD_HOST && acl.host != host {
        return None;
    }
    let allow = acl.permission_type == AclPermissionType::Allow;
    if acl.operation != AclOperation::All && !operation_covered(acl.operation, operation, allow) {
        return None;
    }
    Some(if allow { AuthorizationResult::Allowed } else { AuthorizationResult::Denied })
}

/// Whether an ACL for `acl_operation` speaks about `requested`.
fn operation_covered(acl_operation: AclOperation, requested: AclOperation, allow: bool) -> bool {
    use AclOperation::{Alter, AlterConfigs, Delete, Describe, DescribeConfigs, Read, Write};
    if !allow {
        return acl_operation == requested;
    }
    match requested {
        Describe => matches!(acl_operation, Describe | Read | Write | Delete | Alter),
        DescribeConfigs => matches!(acl_operation, DescribeConfigs | AlterConfigs),
        _ => acl_operation == requested,
    }
}

/// Whether an ACL's principal text names `principal` or is the `User:*`
/// wildcard, which covers principals of every type (Kafka matches each
/// session as itself and as `User:*`). The text splits at its first colon;
/// one without a colon (never accepted by CreateAcls) names nobody, where
/// Kafka would fail the whole request.
fn principal_matches(acl_principal: &str, principal: &KafkaPrincipal) -> bool {
    let Some((principal_type, name)) = acl_principal.split_once(':') else {
        return false;
    };
    (principal_type == principal.principal_type && name == principal.name)
        || (principal_type == KafkaPrincipal::USER_TYPE && name == WILDCARD_RESOURCE)
}

/// Whether `text` is exactly `principal_type:name`.
fn is_type_colon_name(text: &str, principal_type: &str, name: &str) -> bool {
    text.len() == principal_type.len() + 1 + name.len()
        && text.starts_with(principal_type)
        && text[principal_type.len()..].starts_with(':')
        && text.ends_with(name)
}

/// `SecurityUtils.authorizeByResourceTypeCheckArgs`.
fn check_by_resource_type_args(
    operation: AclOperation,
    resource_type: ResourceType,
) -> Result<(), InvalidAuthorizeArgs> {
    match (resource_type, operation) {
        (ResourceType::Any, _) => Err(InvalidAuthorizeArgs::AnyResourceType),
        (ResourceType::Unknown, _) => Err(InvalidAuthorizeArgs::UnknownResourceType),
        (_, AclOperation::Any) => Err(InvalidAuthorizeArgs::AnyOperation),
        (_, AclOperation::Unknown) => Err(InvalidAuthorizeArgs::UnknownOperation),
        _ => Ok(()),
    }
}

/// The resource names the matching ALLOW and DENY ACLs of one type name,
/// for [`Authorizer::authorize_by_resource_type`].
#[derive(Default)]
struct ByTypeNames<'a> {
    allow_literal: HashSet<&'a str>,
    allow_prefixed: HashSet<&'a str>,
    deny_literal: HashSet<&'a str>,
    deny_prefixed: HashSet<&'a str>,
    allow_wildcard: bool,
}

impl<'a> ByTypeNames<'a> {
    /// Notes one matching ACL; breaks on a DENY of the `*` wildcard, which
    /// denies every resource.
    fn record(&mut self, name: &'a str, pattern: PatternType, permission: AclPermissionType) -> ControlFlow<()> {
        let wildcard = name == WILDCARD_RESOURCE;
        match (permission, pattern) {
            (AclPermissionType::Deny, PatternType::Literal) if wildcard => return ControlFlow::Break(()),
            (AclPermissionType::Deny, PatternType::Literal) => self.deny_literal.insert(name),
            (AclPermissionType::Deny, PatternType::Prefixed) => self.deny_prefixed.insert(name),
            (AclPermissionType::Allow, PatternType::Literal) if wildcard => {
                self.allow_wildcard = true;
                false
            }
            (AclPermissionType::Allow, PatternType::Literal) => self.allow_literal.insert(name),
            (AclPermissionType::Allow, PatternType::Prefixed) => self.allow_prefixed.insert(name),
            _ => false,
        };
        ControlFlow::Continue(())
    }

    fn result(&self) -> AuthorizationResult {
        let literal_open = |name: &&str| !self.deny_literal.contains(name) && !self.denied_by_prefix(name);
        let prefixed_open = |name: &&str| !self.denied_by_prefix(name);
        if self.allow_wildcard
            || self.allow_literal.iter().any(literal_open)
            || self.allow_prefixed.iter().any(prefixed_open)
        {
            AuthorizationResult::Allowed
        } else {
            AuthorizationResult::Denied
        }
    }

    /// Whether a PREFIXED DENY names a non-empty prefix of `name` (or `name`).
    fn denied_by_prefix(&self, name: &str) -> bool {
        name.char_indices().any(|(at, c)| self.deny_prefixed.contains(&name[..at + c.len_utf8()]))
    }
}
