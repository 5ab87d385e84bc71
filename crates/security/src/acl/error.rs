//! Why an ACL operation was refused, each with the message Kafka gives.

use thiserror::Error;

use super::AclId;

/// A CreateAcls binding or DeleteAcls filter the controller refuses; Kafka
/// answers it with INVALID_REQUEST and this message.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct InvalidRequest(pub String);

/// The ACL set cannot take this change, as Kafka's `AclCache` refuses it.
/// The metadata log never produces these for a consistent log: they mean a
/// replayed record disagrees with what was loaded before.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum AclStoreError {
    #[error("An ACL with ID {} already exists.", id_text(.0))]
    DuplicateId(AclId),
    /// Another id already holds an identical ACL.
    #[error("Unable to add the ACL with ID {} to aclsByResource", id_text(.0))]
    DuplicateAcl(AclId),
    #[error("ID {} not found in aclsById.", id_text(.0))]
    UnknownId(AclId),
}

/// A `super.users` entry that is not `principalType:principalName`
/// (`SecurityUtils.parseKafkaPrincipal`).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("expected a string in format principalType:principalName but got {0}")]
pub struct InvalidPrincipal(pub String);

/// `authorizeByResourceType` was asked about a filter value instead of a
/// concrete type or operation (`SecurityUtils.authorizeByResourceTypeCheckArgs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum InvalidAuthorizeArgs {
    #[error("Must specify a non-filter resource type for authorizeByResourceType")]
    AnyResourceType,
    #[error("Unknown resource type")]
    UnknownResourceType,
    #[error("Must specify a non-filter operation type for authorizeByResourceType")]
    AnyOperation,
    #[error("Unknown operation type")]
    UnknownOperation,
}

/// An ACL id as Kafka prints a `Uuid`: URL-safe base64 without padding.
pub fn id_text(id: &AclId) -> String {
    crate::base64::encode(id).replace('+', "-").replace('/', "_").trim_end_matches('=').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_as_kafka_uuids() {
        assert_eq!(id_text(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(id_text(&[0xff; 16]), "_____________________w");
        let mut id = [0u8; 16];
        id[15] = 1;
        assert_eq!(AclStoreError::UnknownId(id).to_string(), "ID AAAAAAAAAAAAAAAAAAAAAQ not found in aclsById.");
    }
}
