//! CreateAcls and DeleteAcls, as Kafka 4.3.1's `AclControlManager` decides
//! them: each creation is checked on its own (a refused one is answered
//! INVALID_REQUEST with Kafka's text, the others go on), an ACL already
//! held or created earlier in the request writes nothing more but succeeds,
//! a new one gets a fresh id; each deletion filter removes every ACL it
//! matches, an ACL matched by several filters listed under each and
//! removed once. Nothing is written past `MAX_RECORDS_PER_USER_OP`.

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::{ErrorCode, RemoveAccessControlEntryRecord, Uuid};
use krabka_security::acl::{validate_acl_creation, validate_delete_filter, AclBinding, AclBindingFilter, AclId};

use crate::error::ApiError;
use crate::limits::MAX_RECORDS_PER_USER_OP;

/// One creation's outcome, in request order.
pub type CreateResult = Result<(), ApiError>;

/// One filter's outcome: the ACLs it deleted, or why it was refused.
pub type DeleteResult = Result<Vec<AclBinding>, ApiError>;

/// The records and per-binding results of a CreateAcls.
pub fn plan_create_acls(image: &MetadataImage, creations: &[AclBinding]) -> (Vec<MetadataRecord>, Vec<CreateResult>) {
    let mut records = Vec::new();
    let mut created: Vec<&AclBinding> = Vec::new();
    let results = creations
        .iter()
        .map(|binding| {
            validate_acl_creation(binding).map_err(|e| ApiError::new(ErrorCode::INVALID_REQUEST.code(), e.0))?;
            let held = !image.acls.acls(&binding.to_filter()).is_empty();
            if held || created.contains(&binding) {
                return Ok(());
            }
            if records.len() >= MAX_RECORDS_PER_USER_OP {
                let message = format!("Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single operation.");
                return Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), message));
            }
            let id = new_acl_id(image, &records)?;
            records.push(MetadataRecord::access_control_entry(id, binding));
            created.push(binding);
            Ok(())
        })
        .collect();
    (records, results)
}

/// A random id no ACL holds, nor one created in this request.
fn new_acl_id(image: &MetadataImage, records: &[MetadataRecord]) -> Result<AclId, ApiError> {
    let taken = |id: &AclId| {
        image.acls.get(id).is_some()
            || records.iter().any(|r| matches!(r, MetadataRecord::AccessControlEntry(a) if &a.id.0 == id))
    };
    loop {
        let id = Uuid::random().map_err(|e| ApiError::new(ErrorCode::UNKNOWN_SERVER_ERROR.code(), e.to_string()))?;
        // Kafka's Uuid.randomUuid never gives the zero or metadata-topic ids.
        if id.0 != [0; 16] && !taken(&id.0) {
            return Ok(id.0);
        }
    }
}

/// The records and per-filter results of a DeleteAcls.
pub fn plan_delete_acls(
    image: &MetadataImage,
    filters: &[AclBindingFilter],
) -> (Vec<MetadataRecord>, Vec<DeleteResult>) {
    let mut removed: Vec<AclId> = Vec::new();
    let results = filters
        .iter()
        .map(|filter| {
            validate_delete_filter(filter).map_err(|e| ApiError::new(ErrorCode::INVALID_REQUEST.code(), e.0))?;
            let mut deleted = Vec::new();
            for id in image.acls.matching_ids(filter) {
                deleted.extend(image.acls.get(&id).cloned());
                if !removed.contains(&id) {
                    removed.push(id);
                }
                if removed.len() > MAX_RECORDS_PER_USER_OP {
                    let message =
                        format!("Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.");
                    return Err(ApiError::new(ErrorCode::UNKNOWN_SERVER_ERROR.code(), message));
                }
            }
            Ok(deleted)
        })
        .collect();
    let records = removed
        .into_iter()
        .map(|id| {
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord {
                id: Uuid(id),
                ..Default::default()
            })
        })
        .collect();
    (records, results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_security::acl::{
        AccessControlEntry, AccessControlEntryFilter, AclOperation, AclPermissionType, PatternType, ResourcePattern,
        ResourcePatternFilter, ResourceType,
    };

    fn binding(resource_type: ResourceType, name: &str, pattern: PatternType, principal: &str) -> AclBinding {
        AclBinding::new(
            ResourcePattern::new(resource_type, name, pattern),
            AccessControlEntry::new(principal, "*", AclOperation::Write, AclPermissionType::Allow),
        )
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for record in records {
            image.apply(record).unwrap();
        }
    }

    fn codes<T>(results: &[Result<T, ApiError>]) -> Vec<i16> {
        results.iter().map(|r| r.as_ref().err().map_or(0, |e| e.code)).collect()
    }

    #[test]
    fn creations_are_checked_one_by_one_and_duplicates_write_nothing() {
        let mut image = MetadataImage::default();
        let orders = binding(ResourceType::Topic, "orders", PatternType::Literal, "User:alice");
        let creations = [
            orders.clone(),
            binding(ResourceType::Cluster, "other-cluster", PatternType::Literal, "User:alice"),
            binding(ResourceType::Topic, "", PatternType::Literal, "User:alice"),
            orders.clone(),
            binding(ResourceType::Group, "app-", PatternType::Prefixed, "User:bob"),
        ];
        let (records, results) = plan_create_acls(&image, &creations);
        assert_eq!(codes(&results), [0, 42, 42, 0, 0]);
        let message = &results[1].as_ref().unwrap_err().message;
        assert_eq!(message, "The only valid name for the CLUSTER resource is kafka-cluster");
        assert_eq!(records.len(), 2, "orders once, and the group prefix");
        apply(&mut image, &records);
        assert_eq!(image.acls.len(), 2);
        let (again, results) = plan_create_acls(&image, &[orders]);
        assert!(again.is_empty() && codes(&results) == [0], "an ACL already held succeeds and writes nothing");
    }

    #[test]
    fn deletions_list_every_match_per_filter_and_remove_each_once() {
        let mut image = MetadataImage::default();
        let acls = [
            binding(ResourceType::Topic, "orders", PatternType::Literal, "User:alice"),
            binding(ResourceType::Topic, "payments", PatternType::Literal, "User:alice"),
            binding(ResourceType::Group, "app", PatternType::Literal, "User:bob"),
        ];
        let (records, _) = plan_create_acls(&image, &acls);
        apply(&mut image, &records);
        let resources = |resource_type| ResourcePatternFilter::new(resource_type, None, PatternType::Any);
        let alice = AclBindingFilter::new(
            resources(ResourceType::Any),
            AccessControlEntryFilter::new(Some("User:alice".into()), None, AclOperation::Any, AclPermissionType::Any),
        );
        let topics = AclBindingFilter::new(resources(ResourceType::Topic), AccessControlEntryFilter::ANY);
        let unknown = AclBindingFilter::new(resources(ResourceType::Unknown), AccessControlEntryFilter::ANY);
        let (records, results) = plan_delete_acls(&image, &[alice, topics, unknown]);
        assert_eq!(codes(&results), [0, 0, 42]);
        assert_eq!(results[0].as_ref().unwrap().len(), 2);
        assert_eq!(results[1].as_ref().unwrap().len(), 2, "listed again under the second filter");
        assert_eq!(records.len(), 2, "removed once");
        apply(&mut image, &records);
        assert_eq!(image.acls.len(), 1, "bob's group ACL stays");
    }
}
