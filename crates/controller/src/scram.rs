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
/// refusals (each group by user name; Kafka's HashMaps have no order).
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
    let mut checked = Checked::default();
    for deletion in deletions {
        checked.delete(image, supported, deletion);
    }
    for upsertion in upsertions {
        checked.upsert(supported, upsertion);
    }
    checked.finish()
}

/// Each user named so far and what became of it, as Kafka's three maps
/// (userToDeletion, userToUpsert, userToError): a user is in one at most.
#[derive(Default)]
struct Checked<'a> {
    deleted: BTreeMap<String, &'a ScramCredentialDeletion>,
    upserted: BTreeMap<String, (ScramMechanism, &'a ScramCredentialUpsertion)>,
    refused: BTreeMap<String, ApiError>,
}

impl<'a> Checked<'a> {
    fn delete(&mut self, image: &MetadataImage, supported: bool, deletion: &'a ScramCredentialDeletion) {
        let name = &deletion.name;
        if self.refused.contains_key(name) {
            return;
        }
        if self.deleted.remove(name).is_some() {
            self.refused.insert(name.clone(), twice());
            return;
        }
        match check_deletion(image, supported, deletion) {
            Ok(()) => {
                self.deleted.insert(name.clone(), deletion);
            }
            Err(e) => {
                self.refused.insert(name.clone(), e);
            }
        }
    }

    fn upsert(&mut self, supported: bool, upsertion: &'a ScramCredentialUpsertion) {
        let name = &upsertion.name;
        if self.refused.contains_key(name) {
            return;
        }
        // A deletion and an upsertion of one user are as much "twice" as
        // two upsertions, whatever their mechanisms.
        if self.deleted.remove(name).is_some() || self.upserted.remove(name).is_some() {
            self.refused.insert(name.clone(), twice());
            return;
        }
        match check_upsertion(supported, upsertion) {
            Ok(mechanism) => {
                self.upserted.insert(name.clone(), (mechanism, upsertion));
            }
            Err(e) => {
                self.refused.insert(name.clone(), e);
            }
        }
    }

    /// The records and results, in Kafka's order: deletions, upsertions,
    /// then refusals (an upsertion whose keys cannot be derived among them,
    /// as Kafka's finishUpsertion refuses it only after every check).
    fn finish(mut self) -> (Vec<MetadataRecord>, Vec<UserResult>) {
        let mut records = Vec::new();
        let mut results = Vec::new();
        for (user, deletion) in self.deleted {
            records.push(MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
                name: user.clone(),
                mechanism: deletion.mechanism,
                ..Default::default()
            }));
            results.push(UserResult { user, error: None });
        }
        for (user, (mechanism, upsertion)) in self.upserted {
            match credential_record(mechanism, upsertion) {
                Ok(record) => {
                    records.push(MetadataRecord::UserScramCredential(record));
                    results.push(UserResult { user, error: None });
                }
                Err(e) => {
                    self.refused.insert(user, e);
                }
            }
        }
        results.extend(self.refused.into_iter().map(|(user, e)| UserResult { user, error: Some(e) }));
        debug_assert!(
            results.iter().map(|r| &r.user).collect::<std::collections::BTreeSet<_>>().len() == results.len(),
            "each user is answered once"
        );
        (records, results)
    }
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

fn check_upsertion(supported: bool, upsertion: &ScramCredentialUpsertion) -> Result<ScramMechanism, ApiError> {
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
    Ok(mechanism)
}

/// The record of a checked upsertion: the keys derived from its salted
/// password, as Kafka's ScramFormatter derives them. An empty salted
/// password is no HMAC key to Java (its SecretKeySpec throws), so Kafka
/// answers UNKNOWN_SERVER_ERROR without a message (`ApiError.fromThrowable`
/// hides it); the empty message here stands for that null.
fn credential_record(
    mechanism: ScramMechanism,
    upsertion: &ScramCredentialUpsertion,
) -> Result<UserScramCredentialRecord, ApiError> {
    if upsertion.salted_password.is_empty() {
        return Err(ApiError::new(ErrorCode::UNKNOWN_SERVER_ERROR.code(), ""));
    }
    debug_assert_eq!(mechanism.type_code(), upsertion.mechanism, "the mechanism its checks found");
    let credential = ScramCredential::from_salted_password(
        mechanism,
        upsertion.salt.to_vec(),
        &upsertion.salted_password,
        upsertion.iterations,
    );
    Ok(UserScramCredentialRecord {
        name: upsertion.name.clone(),
        mechanism: upsertion.mechanism,
        salt: credential.salt.into(),
        stored_key: credential.stored_key.into(),
        server_key: credential.server_key.into(),
        iterations: credential.iterations,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::{plan_bootstrap_features, ControllerDefaults};
    use bytes::Bytes;
    use krabka_security::salted_password;

    /// A freshly formatted cluster (metadata.version 4.3-IV0) with a topic.
    fn cluster() -> MetadataImage {
        let mut image = crate::test_images::one_partition(1, &[], &[1], 1);
        for record in plan_bootstrap_features(&image, ControllerDefaults::default()) {
            image.apply(&record).unwrap();
        }
        image
    }

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

    fn message<'r>(results: &'r [UserResult], user: &str) -> &'r str {
        let result = results.iter().find(|r| r.user == user).unwrap();
        &result.error.as_ref().unwrap().message
    }

    /// `image` with the records of upserting each (user, mechanism).
    fn with_credentials(mut image: MetadataImage, credentials: &[(&str, i8)]) -> MetadataImage {
        let upsertions: Vec<_> = credentials.iter().map(|&(user, mechanism)| upsert(user, mechanism, 4096)).collect();
        for upsertion in upsertions {
            let (records, results) = plan_alter_scram_credentials(&image, &[], &[upsertion]);
            assert_eq!(codes(&results)[0].1, 0, "{results:?}");
            for record in &records {
                image.apply(record).unwrap();
            }
        }
        image
    }

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn an_upsertion_stores_the_keys_a_login_with_the_password_checks() {
        let (records, results) = plan_alter_scram_credentials(&cluster(), &[], &[upsert("alice", 1, 4096)]);
        assert_eq!(codes(&results), [("alice", 0)]);
        let [MetadataRecord::UserScramCredential(record)] = records.as_slice() else { panic!("{records:?}") };
        let expected = ScramCredential::from_password(ScramMechanism::Sha256, "secret", b"NaCl".to_vec(), 4096);
        assert_eq!(
            (&record.stored_key[..], &record.server_key[..]),
            (&expected.stored_key[..], &expected.server_key[..])
        );
        assert_eq!((record.name.as_str(), record.mechanism, record.iterations), ("alice", 1, 4096));
        assert_eq!(&record.salt[..], b"NaCl", "the client's salt, as it sent it");
    }

    /// StoredKey = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted,
    /// "Server Key"), checked against values Python's hashlib and hmac
    /// derived from RFC 7677's example (password "pencil", its salt, 4096
    /// iterations) for each mechanism.
    #[test]
    fn the_keys_are_scram_formatters_for_each_mechanism() {
        let salt = hex("5b6d99689d12358eeca04b141236fa81");
        let vectors = [
            (
                1,
                "c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d",
                "586e5df283e6dceb5c3e791d8b8528ec191e664045ce971792e2e6b5bb13e2a6",
                "c1f3cbc1c13a9d35a14c0990eed97629ea225863e566a4314ab99f3f00e5d9d5",
            ),
            (
                2,
                "f16efe1be67f1d09502ebd5ed9262fddffba5a377ab4f0b687e5ed5ba0f50686\
                 b8a4ae166476da8ab3b951d2fa9238b63998f45461bc33a464814949cec9631d",
                "e8002e6f7d3ae446119b216933644dc2a2be7869eb918b8459b5e7d7d2ec1260\
                 6aceef106825cd735170a675fd3611f684affad1dce3f43a0ee43bd590e1dbbe",
                "8d91db6230b5687874fe129bc7206e1858c3ae08e02934f57ac03b6b05a229c4\
                 59d28ff46f5c9611e6c179256490215ec1ff759cb0df285db89af0f99e613aac",
            ),
        ];
        for (mechanism, salted, stored_key, server_key) in vectors {
            let upsertion = ScramCredentialUpsertion {
                name: "user".into(),
                mechanism,
                iterations: 4096,
                salt: salt.clone().into(),
                salted_password: hex(salted).into(),
                ..Default::default()
            };
            let (records, _) = plan_alter_scram_credentials(&cluster(), &[], &[upsertion]);
            let [MetadataRecord::UserScramCredential(record)] = records.as_slice() else { panic!("{records:?}") };
            assert_eq!(record.stored_key.to_vec(), hex(stored_key), "mechanism {mechanism}");
            assert_eq!(record.server_key.to_vec(), hex(server_key), "mechanism {mechanism}");
        }
    }

    #[test]
    fn iterations_from_the_minimum_to_the_maximum_are_accepted() {
        let upsertions = [upsert("a", 1, 4096), upsert("b", 1, 16384), upsert("c", 2, 4096), upsert("d", 2, 16384)];
        let (records, results) = plan_alter_scram_credentials(&cluster(), &[], &upsertions);
        assert_eq!(codes(&results), [("a", 0), ("b", 0), ("c", 0), ("d", 0)]);
        assert_eq!(records.len(), 4);
    }

    #[test]
    fn refusals_carry_kafkas_codes_and_messages() {
        let stored = with_credentials(cluster(), &[("bob", 2)]);
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
        assert_eq!(message(&results, ""), "Username must not be empty");
        assert_eq!(message(&results, "carol"), "Unknown SCRAM mechanism");
        assert_eq!(message(&results, "dave"), "Too few iterations");
        assert_eq!(message(&results, "erin"), "Too many iterations");
        assert_eq!(message(&results, "frank"), "A user credential cannot be altered twice in the same request");
        assert_eq!(message(&results, "gina"), "Attempt to delete a user credential that does not exist");
        let remove = RemoveUserScramCredentialRecord { name: "bob".into(), mechanism: 2, ..Default::default() };
        assert_eq!(records, [MetadataRecord::RemoveUserScramCredential(remove)], "only bob's deletion");
    }

    #[test]
    fn deletions_are_checked_as_upsertions_are() {
        let stored = with_credentials(cluster(), &[("alice", 1)]);
        // The mechanism is checked before the credential is looked up.
        let deletions = [delete("", 1), delete("alice", 0), delete("bob", 3), delete("carol", 2)];
        let (records, results) = plan_alter_scram_credentials(&stored, &deletions, &[]);
        assert!(records.is_empty(), "{records:?}");
        assert_eq!(codes(&results), [("", 93), ("alice", 33), ("bob", 33), ("carol", 91)]);
        assert_eq!(message(&results, "alice"), "Unknown SCRAM mechanism");
        // alice has SHA-256 only: her SHA-512 is not there to delete.
        let (records, results) = plan_alter_scram_credentials(&stored, &[delete("alice", 2)], &[]);
        assert!(records.is_empty());
        assert_eq!(codes(&results), [("alice", 91)]);
    }

    #[test]
    fn a_deletion_removes_one_mechanism_of_a_user() {
        let mut stored = with_credentials(cluster(), &[("alice", 1), ("alice", 2), ("bob", 1)]);
        let (records, results) = plan_alter_scram_credentials(&stored, &[delete("alice", 1)], &[]);
        assert_eq!(codes(&results), [("alice", 0)]);
        for record in &records {
            stored.apply(record).unwrap();
        }
        let left: Vec<_> =
            stored.scram_credentials.keys().map(|(user, mechanism)| (user.as_str(), *mechanism)).collect();
        assert_eq!(left, [("alice", 2), ("bob", 1)]);
    }

    #[test]
    fn a_user_is_altered_once_per_request() {
        let stored = with_credentials(cluster(), &[("alice", 1), ("alice", 2), ("bob", 1)]);
        // Deleted twice (two mechanisms); deleted and upserted; upserted
        // three times (the third finds the refusal and adds nothing); a
        // refused deletion keeps its own error whatever follows.
        let deletions = [delete("alice", 1), delete("alice", 2), delete("bob", 1), delete("carol", 1)];
        let upsertions = [
            upsert("bob", 2, 4096),
            upsert("dave", 1, 4096),
            upsert("dave", 2, 4096),
            upsert("dave", 1, 8192),
            upsert("carol", 1, 4096),
            upsert("erin", 2, 4096),
        ];
        let (records, results) = plan_alter_scram_credentials(&stored, &deletions, &upsertions);
        assert_eq!(codes(&results), [("erin", 0), ("alice", 92), ("bob", 92), ("carol", 91), ("dave", 92)]);
        let [MetadataRecord::UserScramCredential(record)] = records.as_slice() else { panic!("{records:?}") };
        assert_eq!((record.name.as_str(), record.mechanism), ("erin", 2));
    }

    #[test]
    fn results_list_deletions_then_upsertions_then_refusals() {
        let stored = with_credentials(cluster(), &[("zed", 1)]);
        let (records, results) =
            plan_alter_scram_credentials(&stored, &[delete("zed", 1)], &[upsert("amy", 1, 4096), upsert("", 1, 4096)]);
        assert_eq!(codes(&results), [("zed", 0), ("amy", 0), ("", 93)]);
        assert!(matches!(
            records.as_slice(),
            [MetadataRecord::RemoveUserScramCredential(_), MetadataRecord::UserScramCredential(_)]
        ));
    }

    /// Java has no HMAC key of no bytes: Kafka's controller answers
    /// UNKNOWN_SERVER_ERROR with no message, once every other check passed.
    #[test]
    fn an_empty_salted_password_is_an_unknown_server_error() {
        let empty = |name: &str| ScramCredentialUpsertion { salted_password: Bytes::new(), ..upsert(name, 1, 4096) };
        let upsertions = [empty("alice"), upsert("bob", 1, 4096), empty("carol"), empty("carol")];
        let (records, results) = plan_alter_scram_credentials(&cluster(), &[], &upsertions);
        assert_eq!(codes(&results), [("bob", 0), ("alice", -1), ("carol", 92)]);
        assert_eq!(message(&results, "alice"), "");
        assert_eq!(records.len(), 1, "bob's only: {records:?}");
    }

    /// Before 3.5-IV2 (and in a log without metadata.version) the log has
    /// no SCRAM records: every user is refused, deletions as upsertions.
    #[test]
    fn an_old_metadata_version_refuses_every_user() {
        for image in [image(10), MetadataImage::default()] {
            let (records, results) = plan_alter_scram_credentials(
                &image,
                &[delete("bob", 1), delete("bob", 1)],
                &[upsert("alice", 1, 4096)],
            );
            assert!(records.is_empty());
            assert_eq!(codes(&results), [("alice", 35), ("bob", 35)]);
            assert_eq!(message(&results, "alice"), "The current metadata.version does not support SCRAM");
        }
        let (_, results) = plan_alter_scram_credentials(&image(11), &[], &[upsert("alice", 1, 4096)]);
        assert_eq!(codes(&results), [("alice", 0)], "3.5-IV2 has them");
    }
}
