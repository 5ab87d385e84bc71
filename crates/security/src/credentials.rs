//! What the SASL servers check a client against: PLAIN passwords and SCRAM
//! credentials, behind the [`Credentials`] trait the broker implements.

use std::collections::BTreeMap;
use std::fmt;

use crate::mechanism::ScramMechanism;
use crate::oauthbearer::{BearerToken, TokenRefused};
use crate::scram::formatter;

/// A user's SCRAM credential for one mechanism, as UserScramCredentialRecord
/// stores it (Kafka's `ScramCredential`): never the password, only what
/// verifies a proof (`stored_key`) and signs the server's answer
/// (`server_key`).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub mechanism: ScramMechanism,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// As the controller derives it from AlterUserScramCredentials' salted
    /// password: StoredKey = H(HMAC(salted, "Client Key")), ServerKey =
    /// HMAC(salted, "Server Key") (Kafka's `ScramFormatter.generateCredential`).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: i32,
    ) -> Self {
        let client_key = formatter::client_key(mechanism, salted_password);
        let stored_key = formatter::hash(mechanism, &client_key);
        let server_key = formatter::server_key(mechanism, salted_password);
        Self { mechanism, salt, stored_key, server_key, iterations }
    }

    /// Hi(password, salt, iterations) then [`Self::from_salted_password`]:
    /// for tests, tools and paths that start from a password.
    pub fn from_password(mechanism: ScramMechanism, password: &str, salt: Vec<u8>, iterations: i32) -> Self {
        let salted_password = salted_password(mechanism, password, &salt, iterations);
        Self::from_salted_password(mechanism, salt, &salted_password, iterations)
    }
}

/// Leaves the keys out: whoever holds `server_key` can pose as the broker.
impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("mechanism", &self.mechanism)
            .field("salt_len", &self.salt.len())
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// SaltedPassword = Hi(password, salt, iterations) (RFC 5802), what an
/// AlterUserScramCredentials upsertion carries. Kafka uses the password's
/// UTF-8 bytes as they are (no SASLprep).
pub fn salted_password(mechanism: ScramMechanism, password: &str, salt: &[u8], iterations: i32) -> Vec<u8> {
    formatter::hi(mechanism, password.as_bytes(), salt, iterations)
}

/// Where the SASL servers look credentials up (the broker implements it over
/// its JAAS config and metadata image).
pub trait Credentials {
    /// PLAIN: whether `password` is `username`'s (constant-time comparison).
    fn plain_password_matches(&self, username: &str, password: &str) -> bool;

    /// SCRAM: `username`'s credential for `mechanism`, if it has one.
    fn scram_credential(&self, username: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;

    /// OAUTHBEARER: the listener's validator's verdict on `token` now (the
    /// broker holds the validator and the clock). Without one, every token
    /// is refused.
    fn validate_bearer_token(&self, token: &str) -> Result<BearerToken, TokenRefused> {
        let _ = token;
        Err(TokenRefused::invalid("no OAUTHBEARER validator is configured"))
    }
}

/// Credentials held in maps: PLAIN users as a `user_<name>` JAAS entry lists
/// them, SCRAM credentials per user and mechanism. For tests and for a
/// broker that copies its sources into one place.
#[derive(Clone, Default)]
pub struct InMemoryCredentials {
    plain_passwords: BTreeMap<String, String>,
    scram_credentials: BTreeMap<(String, ScramMechanism), ScramCredential>,
}

impl InMemoryCredentials {
    pub fn new() -> Self {
        Self::default()
    }

    /// PLAIN users from user name to password, e.g. [`crate::jaas::plain_users`].
    pub fn with_plain_users(plain_passwords: BTreeMap<String, String>) -> Self {
        Self { plain_passwords, scram_credentials: BTreeMap::new() }
    }

    pub fn add_plain_user(&mut self, username: impl Into<String>, password: impl Into<String>) {
        self.plain_passwords.insert(username.into(), password.into());
    }

    /// Sets `username`'s credential for the credential's mechanism.
    pub fn add_scram_credential(&mut self, username: impl Into<String>, credential: ScramCredential) {
        self.scram_credentials.insert((username.into(), credential.mechanism), credential);
    }

    pub fn remove_scram_credential(&mut self, username: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.scram_credentials.remove(&(username.to_string(), mechanism))
    }
}

impl fmt::Debug for InMemoryCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryCredentials")
            .field("plain_users", &self.plain_passwords.keys().collect::<Vec<_>>())
            .field("scram_credentials", &self.scram_credentials.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Credentials for InMemoryCredentials {
    fn plain_password_matches(&self, username: &str, password: &str) -> bool {
        self.plain_passwords
            .get(username)
            .is_some_and(|expected| formatter::constant_time_eq(password.as_bytes(), expected.as_bytes()))
    }

    fn scram_credential(&self, username: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.scram_credentials.get(&(username.to_string(), mechanism)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base64;

    #[test]
    fn derives_rfc7677_keys() {
        // RFC 7677's user "user", password "pencil"; the keys follow from the
        // proof and signature the RFC prints (checked in the exchange tests),
        // and must not depend on the path taken.
        let salt = base64::decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("valid base64");
        let from_password = ScramCredential::from_password(ScramMechanism::Sha256, "pencil", salt.clone(), 4096);
        let salted = salted_password(ScramMechanism::Sha256, "pencil", &salt, 4096);
        let from_salted = ScramCredential::from_salted_password(ScramMechanism::Sha256, salt, &salted, 4096);
        assert_eq!(from_password, from_salted);
        assert_eq!(from_password.stored_key.len(), 32);
        assert_eq!(from_password.server_key.len(), 32);
        assert_eq!(from_password.iterations, 4096);
        let sha512 = ScramCredential::from_password(ScramMechanism::Sha512, "pencil", b"salt".to_vec(), 4096);
        assert_eq!(sha512.stored_key.len(), 64);
        assert_eq!(sha512.server_key.len(), 64);
    }

    #[test]
    fn debug_hides_keys() {
        let credential = ScramCredential::from_password(ScramMechanism::Sha256, "pencil", b"salt".to_vec(), 4096);
        let shown = format!("{credential:?}");
        assert!(shown.contains("Sha256") && shown.contains("4096"), "{shown}");
        assert!(!shown.contains("stored_key") && !shown.contains("server_key"), "{shown}");
    }

    #[test]
    fn in_memory_credentials_look_up() {
        let mut credentials = InMemoryCredentials::new();
        credentials.add_plain_user("alice", "alice-secret");
        assert!(credentials.plain_password_matches("alice", "alice-secret"));
        assert!(!credentials.plain_password_matches("alice", "alice-secreT"));
        assert!(!credentials.plain_password_matches("bob", "alice-secret"));
        let credential = ScramCredential::from_password(ScramMechanism::Sha512, "pw", b"s".to_vec(), 4096);
        credentials.add_scram_credential("alice", credential.clone());
        assert_eq!(credentials.scram_credential("alice", ScramMechanism::Sha512), Some(credential.clone()));
        assert_eq!(credentials.scram_credential("alice", ScramMechanism::Sha256), None);
        assert_eq!(credentials.remove_scram_credential("alice", ScramMechanism::Sha512), Some(credential));
        assert_eq!(credentials.scram_credential("alice", ScramMechanism::Sha512), None);
        assert!(!format!("{credentials:?}").contains("alice-secret"));
    }
}
