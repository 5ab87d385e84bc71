//! Whether a request's principal may do what it asks, as Kafka's broker
//! asks its authorizer: the ACLs of the metadata image
//! (AccessControlEntryRecords) weighed by krabka-security's StandardAuthorizer
//! decision under this broker's `super.users` and
//! `allow.everyone.if.no.acl.found`. Without `authorizer.class.name` every
//! request is allowed. A request forwarded in an Envelope is checked as
//! the principal and client address the Envelope names, as Kafka's
//! controller checks it; another node's own requests are not checked.

use std::net::IpAddr;
use std::sync::Arc;

use krabka_metadata::MetadataImage;
use krabka_security::acl::{
    host_address, AclOperation, AuthorizationResult, AuthorizerConfig, ResourceType, CLUSTER_NAME,
};
use krabka_security::KafkaPrincipal;

use crate::broker::Broker;
use crate::request::RequestContext;

/// The authorization of one request: who, from where, under which config.
pub struct Authorization<'a> {
    ctx: &'a RequestContext<'a>,
    image: Arc<MetadataImage>,
    host: String,
}

impl<'a> Authorization<'a> {
    /// None when nothing is checked (no authorizer, or another node's own
    /// request).
    pub fn of(ctx: &'a RequestContext<'a>, image: &Arc<MetadataImage>) -> Option<Self> {
        ctx.broker.config.security.authorizer.as_ref()?;
        if !ctx.connection.authorized {
            return None;
        }
        Some(Authorization { ctx, image: Arc::clone(image), host: host_address(ctx.connection.peer.ip()) })
    }

    /// Whether `operation` on the resource is allowed.
    pub fn allows(&self, operation: AclOperation, resource_type: ResourceType, name: &str) -> bool {
        let Some(config) = self.ctx.broker.config.security.authorizer.as_ref() else { return true };
        let principal = &self.ctx.connection.principal;
        let result = self.image.acls.authorize_under(config, principal, &self.host, operation, (resource_type, name));
        result == AuthorizationResult::Allowed
    }

    /// Kafka's `authorizedOperations` on one resource (see [`Access`]).
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        operation_bits(resource_type, |op| self.allows(op, resource_type, name))
    }

    /// Whether `operation` on the cluster is allowed.
    pub fn allows_cluster(&self, operation: AclOperation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Kafka's `authorizeByResourceType`: `operation` on some resource of
    /// the type (e.g. WRITE on some transactional id for InitProducerId).
    pub fn allows_some(&self, operation: AclOperation, resource_type: ResourceType) -> bool {
        let Some(config) = self.ctx.broker.config.security.authorizer.as_ref() else { return true };
        let principal = &self.ctx.connection.principal;
        let result =
            self.image.acls.authorize_by_resource_type_under(config, principal, &self.host, operation, resource_type);
        result == Ok(AuthorizationResult::Allowed)
    }
}

/// Every operation `resource_type` supports, as a bit field (what
/// `*_authorized_operations` report without an authorizer).
pub fn all_operations(resource_type: ResourceType) -> i32 {
    operation_bits(resource_type, |_| true)
}

/// The bit field of `resource_type`'s supported operations `allowed` allows.
fn operation_bits(resource_type: ResourceType, allowed: impl Fn(AclOperation) -> bool) -> i32 {
    let supported = resource_type.supported_operations().iter();
    supported.filter(|op| allowed(**op)).fold(0, |bits, op| bits | 1 << op.code())
}

/// What one request may do, built once per request and asked per
/// resource: the image and the client's address are looked up once, and
/// nothing at all without an authorizer (most brokers).
pub struct Access<'a>(Option<Authorization<'a>>);

impl<'a> Access<'a> {
    pub fn of(ctx: &'a RequestContext<'a>) -> Self {
        if ctx.broker.config.security.authorizer.is_none() || !ctx.connection.authorized {
            return Access(None);
        }
        Access(Authorization::of(ctx, &ctx.broker.metadata.image()))
    }

    /// The request's access under `image` (a handler that already holds
    /// the image it answers from weighs the ACLs of that same image).
    pub fn with_image(ctx: &'a RequestContext<'a>, image: &Arc<MetadataImage>) -> Self {
        Access(Authorization::of(ctx, image))
    }

    /// Whether the request may perform `operation` on the resource.
    pub fn allows(&self, operation: AclOperation, resource_type: ResourceType, name: &str) -> bool {
        self.0.as_ref().is_none_or(|a| a.allows(operation, resource_type, name))
    }

    /// Whether the request may perform `operation` on the cluster.
    pub fn allows_cluster(&self, operation: AclOperation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }
}

impl Access<'_> {
    /// Kafka's `authorizedOperations`: the bit field (bit = operation code)
    /// of the operations the resource type supports that the request may
    /// perform; all of them without an authorizer.
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        match &self.0 {
            Some(authorization) => authorization.authorized_operations(resource_type, name),
            None => all_operations(resource_type),
        }
    }

    /// The cluster's operations as Metadata (v8-10) and DescribeCluster
    /// report them: none without DESCRIBE on the cluster.
    pub fn cluster_operations(&self) -> i32 {
        if self.allows_cluster(AclOperation::Describe) {
            self.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        }
    }
}

/// Whether the request may perform `operation` on the cluster (for
/// handlers that ask once).
pub fn allowed_on_cluster(ctx: &RequestContext<'_>, operation: AclOperation) -> bool {
    Access::of(ctx).allows_cluster(operation)
}

/// Whether `principal` at `address` may perform `operation` on the
/// cluster, for a request with no client connection behind it (the
/// controller listener's).
pub fn cluster_allows(broker: &Broker, caller: (&KafkaPrincipal, IpAddr), operation: AclOperation) -> bool {
    ClusterCaller::of(broker, caller).is_none_or(|c| c.allows(operation))
}

/// The cluster's operations `principal` at `address` may perform, as a
/// bit field (every one without an authorizer).
pub fn cluster_operations_of(broker: &Broker, caller: (&KafkaPrincipal, IpAddr)) -> i32 {
    match ClusterCaller::of(broker, caller) {
        Some(checked) => operation_bits(ResourceType::Cluster, |op| checked.allows(op)),
        None => all_operations(ResourceType::Cluster),
    }
}

/// A controller-listener caller weighed against one image: the image and
/// the address are looked up once however many operations are asked.
struct ClusterCaller<'a> {
    config: &'a AuthorizerConfig,
    image: Arc<MetadataImage>,
    principal: &'a KafkaPrincipal,
    host: String,
}

impl<'a> ClusterCaller<'a> {
    /// None when nothing is checked (no authorizer).
    fn of(broker: &'a Broker, (principal, address): (&'a KafkaPrincipal, IpAddr)) -> Option<Self> {
        let config = broker.config.security.authorizer.as_ref()?;
        Some(ClusterCaller { config, image: broker.metadata.image(), principal, host: host_address(address) })
    }

    fn allows(&self, operation: AclOperation) -> bool {
        let cluster = (ResourceType::Cluster, CLUSTER_NAME);
        let result = self.image.acls.authorize_under(self.config, self.principal, &self.host, operation, cluster);
        result == AuthorizationResult::Allowed
    }
}

/// CLUSTER_AUTHORIZATION_FAILED and Kafka's message for it.
pub fn cluster_denied() -> (i16, Option<String>) {
    (krabka_protocol::ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code(), Some("Cluster authorization failed.".into()))
}
