//! AlterUserScramCredentials, as Kafka 4.3.1's `ScramControlManager`
//! decides it: each user is altered once per request (a second deletion or
//! upsertion of the same user, whatever the mechanism, refuses the user
//! with DUPLICATE_RESOURCE), names must not be empty, mechanisms must be
//! SCRAM-SHA-256 or SCRAM-SHA-512, iterations between the mechanism's
//! minimum (4096) and 16384, and a deletion must name a credential that
//! exists. The credential's stored and server keys are derived here from
//! the salted password the client sent (the password itself never
//! travels). Accepted changes become UserScramCredentialRecords and
//! RemoveUserScramCredentialRecords in one commit.

use std::collections::BTreeMap;

use krabka_metadata::features::METADATA_VERSION;
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::alter_user_scram_credentials_request::{ScramCredentialDeletion, ScramCredentialUpsertion};
use krabka_protocol::{ErrorCode, RemoveUserScramCredentialRecord, UserScramCredentialRecord};
use krabka_security::{ScramCredential, ScramMechanism};

use crate::error::ApiError;

/// The first metadata.version with SCRAM credentials in the log (3.5-IV2).
const SCRAM_METADATA_VERSION: i16 = 11;

/// One user's outcome, in Kafka's order: deletions, then upsertions, then
/// refusals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserResult {
    pub user: String,
    pub error: Option<ApiError>,
}

/// The records and per-user results of an AlterUserScramCredentials.
pub fn plan_alter_scram_credentials(
    image: &MetadataImage,
    deletions: &[ScramCredentialDeletion],
    upsertions: &[ScramCredentialUpsertion],
) -> (Vec<MetadataRecord>, Vec<UserResult>) {
    let supported = image.features.get(METADATA_VERSION).is_some_and(|&level| level >= SCRAM_METADATA_VERSION);
    let mut refused: BTreeMap<String, ApiError> = BTreeMap::new();
    let mut deleted: BTreeMap<String, &ScramCredentialDeletion> = BTreeMap::new();
    let mut upserted: BTreeMap<String, &ScramCredentialUpsertion> = BTreeMap::new();
    for deletion in deletions {
        let name = &deletion.name;
        if refused.contains_key(name) {
            continue;
        }
        if deleted.remove(name).is_some() {
            refused.insert(name.clone(), twice());
            continue;
        }
        match check_deletion(image, supported, deletion) {
            Ok(()) => {
                deleted.insert(name.clone(), deletion);
            }
            Err(e) => {
                refused.insert(name.clone(), e);
            }
        }
    }
    for upsertion in upsertions {
        let name = &upsertion.name;
        if refused.contains_key(name) {
            continue;
        }
        if deleted.remove(name).is_some() || upserted.remove(name).is_some() {
            refused.insert(name.clone(), twice());
            continue;
        }
        match check_upsertion(supported, upsertion) {
            Ok(()) => {
                upserted.insert(name.clone(), upsertion);
            }
            Err(e) => {
                refused.insert(name.clone(), e);
            }
        }
    }
    let mut records = Vec::new();
    let mut results = Vec::new();
    for (user, deletion) in deleted {
        records.push(MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
            name: user.clone(),
            mechanism: deletion.mechanism,
            ..Default::default()
        }));
        results.push(UserResult { user, error: None });
    }
    for (user, upsertion) in upserted {
        records.push(MetadataRecord::UserScramCredential(credential_record(upsertion)));
        results.push(UserResult { user, error: None });
    }
    results.extend(refused.into_iter().map(|(user, e)| UserResult { user, error: Some(e) }));
    (records, results)
}

fn twice() -> ApiError {
    ApiError::new(ErrorCode::DUPLICATE_RESOURCE.code(), "A user credential cannot be altered twice in the same request")
}

fn unsupported_version() -> ApiError {
    ApiError::new(ErrorCode::UNSUPPORTED_VERSION.code(), "The current metadata.version does not support SCRAM")
}

fn check_name_and_mechanism(name: &str, mechanism: i8) -> Result<ScramMechanism, ApiError> {
    if name.is_empty() {
        return Err(ApiError::new(ErrorCode::UNACCEPTABLE_CREDENTIAL.code(), "Username must not be empty"));
    }
    ScramMechanism::from_type_code(mechanism)
        .ok_or_else(|| ApiError::new(ErrorCode::UNSUPPORTED_SASL_MECHANISM.code(), "Unknown SCRAM mechanism"))
}

fn check_deletion(image: &MetadataImage, supported: bool, deletion: &ScramCredentialDeletion) -> Result<(), ApiError> {
    if !supported {
        return Err(unsupported_version());
    }
    check_name_and_mechanism(&deletion.name, deletion.mechanism)?;
    if !image.scram_credentials.contains_key(&(deletion.name.clone(), deletion.mechanism)) {
        let message = "Attempt to delete a user credential that does not exist";
        return Err(ApiError::new(ErrorCode::RESOURCE_NOT_FOUND.code(), message));
    }
    Ok(())
}

fn check_upsertion(supported: bool, upsertion: &ScramCredentialUpsertion) -> Result<(), ApiError> {
    if !supported {
        return Err(unsupported_version());
    }
    let mechanism = check_name_and_mechanism(&upsertion.name, upsertion.mechanism)?;
    if upsertion.iterations < mechanism.min_iterations() {
        return Err(ApiError::new(ErrorCode::UNACCEPTABLE_CREDENTIAL.code(), "Too few iterations"));
    }
    if upsertion.iterations > ScramMechanism::MAX_ITERATIONS {
        return Err(ApiError::new(ErrorCode::UNACCEPTABLE_CREDENTIAL.code(), "Too many iterations"));
    }
    Ok(())
}

/// The record of a checked upsertion: the keys derived from its salted
/// password, as Kafka's ScramFormatter derives them.
fn credential_record(upsertion: &ScramCredentialUpsertion) -> UserScramCredentialRecord {
    let mechanism = ScramMechanism::from_type_code(upsertion.mechanism).expect("a checked upsertion");
    let credential = ScramCredential::from_salted_password(
        mechanism,
        upsertion.salt.to_vec(),
        &upsertion.salted_password,
        upsertion.iterations,
    );
    UserScramCredentialRecord {
        name: upsertion.name.clone(),
        mechanism: upsertion.mechanism,
        salt: credential.salt.into(),
        stored_key: credential.stored_key.into(),
        server_key: credential.server_key.into(),
        iterations: credential.iterations,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use krabka_security::salted_password;

    fn image(metadata_version: i16) -> MetadataImage {
        let mut image = MetadataImage::default();
        image.features.insert(METADATA_VERSION.into(), metadata_version);
        image
    }

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        let scram = ScramMechanism::from_type_code(mechanism).unwrap_or(ScramMechanism::Sha256);
        ScramCredentialUpsertion {
            name: name.into(),
            mechanism,
            iterations,
            salt: Bytes::from_static(b"NaCl"),
            salted_password: salted_password(scram, "secret", b"NaCl", 4096).into(),
            ..Default::default()
        }
    }

    fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        ScramCredentialDeletion { name: name.into(), mechanism, ..Default::default() }
    }

    fn codes(results: &[UserResult]) -> Vec<(&str, i16)> {
        results.iter().map(|r| (r.user.as_str(), r.error.as_ref().map_or(0, |e| e.code))).collect()
    }

    #[test]
    fn an_upsertion_stores_the_keys_a_login_with_the_password_checks() {
        let (records, results) = plan_alter_scram_credentials(&image(30), &[], &[upsert("alice", 1, 4096)]);
        assert_eq!(codes(&results), [("alice", 0)]);
        let [MetadataRecord::UserScramCredential(record)] = records.as_slice() else { panic!("{records:?}") };
        let expected = ScramCredential::from_password(ScramMechanism::Sha256, "secret", b"NaCl".to_vec(), 4096);
        assert_eq!(
            (&record.stored_key[..], &record.server_key[..]),
            (&expected.stored_key[..], &expected.server_key[..])
        );
        assert_eq!((record.name.as_str(), record.mechanism, record.iterations), ("alice", 1, 4096));
    }

    #[test]
    fn refusals_carry_kafkas_codes_and_messages() {
        let mut stored = image(30);
        let (records, _) = plan_alter_scram_credentials(&stored, &[], &[upsert("bob", 2, 8192)]);
        for record in &records {
            stored.apply(record).unwrap();
        }
        let upsertions = [
            upsert("", 1, 4096),
            upsert("carol", 3, 4096),
            upsert("dave", 1, 4095),
            upsert("erin", 2, 16385),
            upsert("frank", 1, 4096),
            upsert("frank", 2, 4096),
        ];
        let deletions = [delete("bob", 2), delete("gina", 1)];
        let (records, results) = plan_alter_scram_credentials(&stored, &deletions, &upsertions);
        assert_eq!(
            codes(&results),
            [("bob", 0), ("", 93), ("carol", 33), ("dave", 93), ("erin", 93), ("frank", 92), ("gina", 91)]
        );
        let message = |user: &str| results.iter().find(|r| r.user == user).unwrap().error.clone().unwrap().message;
        assert_eq!(message("dave"), "Too few iterations");
        assert_eq!(message("erin"), "Too many iterations");
        assert_eq!(message("frank"), "A user credential cannot be altered twice in the same request");
        assert_eq!(message("gina"), "Attempt to delete a user credential that does not exist");
        assert_eq!(records.len(), 1, "only bob's deletion: {records:?}");
        // Before 3.5-IV2 the log has no SCRAM records.
        let (records, results) = plan_alter_scram_credentials(&image(10), &[], &[upsert("alice", 1, 4096)]);
        assert!(records.is_empty());
        assert_eq!(codes(&results), [("alice", ErrorCode::UNSUPPORTED_VERSION.code())]);
    }
}
