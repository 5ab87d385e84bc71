//! The SASL mechanisms the broker offers and the SCRAM variants it stores.

/// A SASL mechanism, named as in SaslHandshake and `sasl.enabled.mechanisms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    /// RFC 7628 bearer tokens (JWTs), validated by the listener's validator.
    OAuthBearer,
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 4] =
        [SaslMechanism::Plain, SaslMechanism::ScramSha256, SaslMechanism::ScramSha512, SaslMechanism::OAuthBearer];

    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => ScramMechanism::Sha256.mechanism_name(),
            SaslMechanism::ScramSha512 => ScramMechanism::Sha512.mechanism_name(),
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Exact and case-sensitive, as Kafka looks mechanisms up (a client
    /// asking for "plain" is told PLAIN is unsupported).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mechanism| mechanism.name() == name)
    }

    /// The SCRAM variant, `None` for PLAIN and OAUTHBEARER.
    pub fn scram(self) -> Option<ScramMechanism> {
        match self {
            SaslMechanism::Plain | SaslMechanism::OAuthBearer => None,
            SaslMechanism::ScramSha256 => Some(ScramMechanism::Sha256),
            SaslMechanism::ScramSha512 => Some(ScramMechanism::Sha512),
        }
    }
}

impl From<ScramMechanism> for SaslMechanism {
    fn from(mechanism: ScramMechanism) -> Self {
        match mechanism {
            ScramMechanism::Sha256 => SaslMechanism::ScramSha256,
            ScramMechanism::Sha512 => SaslMechanism::ScramSha512,
        }
    }
}

/// A SCRAM mechanism (Kafka's `ScramMechanism`, internal and admin flavours).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The most iterations the controller accepts in AlterUserScramCredentials
    /// (`ScramControlManager.MAX_ITERATIONS`; above it: UNACCEPTABLE_CREDENTIAL,
    /// "Too many iterations"). Also Kafka's internal `maxIterations()`.
    pub const MAX_ITERATIONS: i32 = 16384;

    /// The type code in UserScramCredentialRecord, AlterUserScramCredentials
    /// and DescribeUserScramCredentials (Kafka's `ScramMechanism.type()`;
    /// 0 is UNKNOWN there and has no variant here).
    pub fn type_code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_type_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|mechanism| mechanism.type_code() == code)
    }

    pub fn mechanism_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_mechanism_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mechanism| mechanism.mechanism_name() == name)
    }

    /// The fewest iterations Kafka accepts, in a stored credential and in a
    /// server-first message alike.
    pub fn min_iterations(self) -> i32 {
        4096
    }

    /// The Java enum constant's name, which Kafka's SCRAM error texts print
    /// (`"... for " + mechanism` gives `SCRAM_SHA_256`).
    pub(crate) fn enum_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM_SHA_256",
            ScramMechanism::Sha512 => "SCRAM_SHA_512",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_mechanism_names_round_trip_case_sensitively() {
        for mechanism in SaslMechanism::ALL {
            assert_eq!(SaslMechanism::from_name(mechanism.name()), Some(mechanism));
        }
        assert_eq!(SaslMechanism::Plain.name(), "PLAIN");
        assert_eq!(SaslMechanism::ScramSha256.name(), "SCRAM-SHA-256");
        assert_eq!(SaslMechanism::ScramSha512.name(), "SCRAM-SHA-512");
        assert_eq!(SaslMechanism::from_name("plain"), None);
        assert_eq!(SaslMechanism::from_name("scram-sha-256"), None);
        assert_eq!(SaslMechanism::from_name("GSSAPI"), None);
        assert_eq!(SaslMechanism::from_name("OAUTHBEARER"), Some(SaslMechanism::OAuthBearer));
        assert_eq!(SaslMechanism::from_name("oauthbearer"), None);
    }

    #[test]
    fn scram_type_codes_are_kafkas() {
        assert_eq!(ScramMechanism::Sha256.type_code(), 1);
        assert_eq!(ScramMechanism::Sha512.type_code(), 2);
        assert_eq!(ScramMechanism::from_type_code(1), Some(ScramMechanism::Sha256));
        assert_eq!(ScramMechanism::from_type_code(2), Some(ScramMechanism::Sha512));
        assert_eq!(ScramMechanism::from_type_code(0), None);
        assert_eq!(ScramMechanism::from_type_code(3), None);
        assert_eq!(ScramMechanism::from_type_code(-1), None);
    }

    #[test]
    fn scram_and_sasl_mechanisms_correspond() {
        for mechanism in ScramMechanism::ALL {
            let sasl = SaslMechanism::from(mechanism);
            assert_eq!(sasl.scram(), Some(mechanism));
            assert_eq!(sasl.name(), mechanism.mechanism_name());
            assert_eq!(ScramMechanism::from_mechanism_name(mechanism.mechanism_name()), Some(mechanism));
            assert_eq!(mechanism.min_iterations(), 4096);
        }
        assert_eq!(SaslMechanism::Plain.scram(), None);
        assert_eq!(ScramMechanism::MAX_ITERATIONS, 16384);
    }
}
