//! Kafka's principal: who a connection authenticated as.

use std::fmt;

/// Kafka's principal: a type and a name, shown as `User:alice`
/// (`org.apache.kafka.common.security.auth.KafkaPrincipal`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    /// Kafka's `KafkaPrincipal.USER_TYPE`, the type of every SASL/PLAIN and
    /// SCRAM principal (and of ANONYMOUS).
    pub const USER_TYPE: &'static str = "User";

    pub fn new(principal_type: impl Into<String>, name: impl Into<String>) -> Self {
        Self { principal_type: principal_type.into(), name: name.into() }
    }

    /// A `User` principal, as Kafka's principal builder makes for SASL.
    pub fn user(name: impl Into<String>) -> Self {
        Self::new(Self::USER_TYPE, name)
    }

    /// `User:ANONYMOUS`, Kafka's `KafkaPrincipal.ANONYMOUS`: the principal of
    /// PLAINTEXT connections and of connections still authenticating.
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_as_kafka_does() {
        assert_eq!(KafkaPrincipal::user("alice").to_string(), "User:alice");
        assert_eq!(KafkaPrincipal::anonymous().to_string(), "User:ANONYMOUS");
        assert_eq!(KafkaPrincipal::new("Group", "ops").to_string(), "Group:ops");
    }

    #[test]
    fn equality_is_type_and_name() {
        assert_eq!(KafkaPrincipal::user("a"), KafkaPrincipal::new("User", "a"));
        assert_ne!(KafkaPrincipal::user("a"), KafkaPrincipal::new("Group", "a"));
    }
}
