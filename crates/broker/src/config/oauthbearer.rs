//! How a SASL listener that enables OAUTHBEARER validates bearer tokens, as
//! Kafka's broker configures it:
//!
//! - by default Kafka's unsecured validator (tokens with `alg: none`, for
//!   development), its options in the listener's
//!   `listener.name.<l>.oauthbearer.sasl.jaas.config` entry;
//! - with `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`
//!   set to Kafka's `OAuthBearerValidatorCallbackHandler`, signed JWTs
//!   checked against the JSON Web Key Set at `sasl.oauthbearer.jwks.endpoint.url`
//!   (KIP-768) with `sasl.oauthbearer.expected.audience`, `.expected.issuer`,
//!   `.sub.claim.name`, `.scope.claim.name` and `.clock.skew.seconds`; each
//!   may be given per listener as `listener.name.<l>.oauthbearer.<key>`.
//!
//! The JWKS is read from a `file:` URL at start, or fetched from an
//! `http:`/`https:` endpoint by the broker (`jwks_endpoint.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use krabka_log::config_values::{split_list, ConfigError};
use krabka_security::jaas;
use krabka_security::oauthbearer::jws::{JsonWebKeySet, JwtValidationConfig, SignedJwtValidator};
use krabka_security::oauthbearer::unsecured::{self, UnsecuredValidatorOptions};
use krabka_security::oauthbearer::{BearerToken, TokenRefused};

/// Kafka's validator class names (the second is its deprecated alias).
const SIGNED_VALIDATORS: [&str; 2] = [
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];
const UNSECURED_VALIDATOR: &str =
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

/// A listener's bearer token validator.
pub enum BearerValidator {
    Unsecured(UnsecuredValidatorOptions),
    Signed(Arc<SignedJwtValidator>),
    /// Signed tokens against a JWKS the broker fetches over HTTP(S).
    Fetched(Arc<FetchedJwks>),
}

/// A JWKS at an `http:` or `https:` endpoint (Kafka's RefreshingHttpsJwks):
/// the broker fetches it at start and every `refresh_ms`
/// (`sasl.oauthbearer.jwks.endpoint.refresh.ms`, an hour); tokens are
/// refused until the first fetch succeeds.
pub struct FetchedJwks {
    pub url: String,
    pub refresh_ms: u64,
    /// For `https:`: the JAAS entry's `ssl.truststore.location` (PEM), else
    /// the system's CA bundle.
    pub roots: Option<Arc<rustls::RootCertStore>>,
    config: JwtValidationConfig,
    current: std::sync::RwLock<Option<Arc<SignedJwtValidator>>>,
}

impl FetchedJwks {
    /// Validates against the keys fetched last.
    fn validate(&self, token: &str, now_ms: i64) -> Result<BearerToken, TokenRefused> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner()).clone();
        match current {
            Some(validator) => validator.validate(token, now_ms),
            None => Err(TokenRefused::invalid(format!("the JWKS at {} has not been fetched yet", self.url))),
        }
    }

    /// Installs a fetched JWKS document; an unreadable one keeps the old keys.
    pub fn install(&self, document: &str) -> Result<usize, String> {
        let keys = JsonWebKeySet::parse(document)?;
        if keys.is_empty() {
            return Err("it holds no key krabka can verify signatures with".into());
        }
        let count = keys.len();
        let validator = Arc::new(SignedJwtValidator::new(self.config.clone(), keys));
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(validator);
        Ok(count)
    }
}

impl std::fmt::Debug for BearerValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BearerValidator::Unsecured(options) => f.debug_tuple("Unsecured").field(options).finish(),
            BearerValidator::Signed(_) => f.write_str("Signed(JWKS)"),
            BearerValidator::Fetched(jwks) => write!(f, "Fetched({})", jwks.url),
        }
    }
}

impl BearerValidator {
    /// The validator's verdict on `token` at `now_ms` (ms since the epoch).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<BearerToken, TokenRefused> {
        match self {
            BearerValidator::Unsecured(options) => unsecured::validate(token, options, now_ms),
            BearerValidator::Signed(validator) => validator.validate(token, now_ms),
            BearerValidator::Fetched(jwks) => jwks.validate(token, now_ms),
        }
    }
}

/// The OAUTHBEARER validator of listener `prefix` (`listener.name.<l>.`).
pub(crate) fn bearer_validator(props: &BTreeMap<String, String>, prefix: &str) -> Result<BearerValidator, ConfigError> {
    let own = format!("{prefix}oauthbearer.");
    let handler_key = format!("{own}sasl.server.callback.handler.class");
    match props.get(&handler_key).map(|v| v.trim()) {
        None | Some(UNSECURED_VALIDATOR) => unsecured_validator(props, &own),
        Some(class) if SIGNED_VALIDATORS.contains(&class) => signed_validator(props, &own),
        Some(class) => Err(ConfigError::invalid(
            &handler_key,
            class,
            format!(
                "krabka validates OAUTHBEARER tokens with Kafka's {} or its unsecured validator",
                SIGNED_VALIDATORS[0]
            ),
        )),
    }
}

/// Kafka requires the listener's OAUTHBEARER JAAS entry; its
/// `unsecuredValidator*` options configure the unsecured validator.
fn unsecured_validator(props: &BTreeMap<String, String>, own: &str) -> Result<BearerValidator, ConfigError> {
    let key = format!("{own}sasl.jaas.config");
    let Some(text) = props.get(&key) else {
        return Err(ConfigError::Missing(format!(
            "{key} (OAUTHBEARER needs an OAuthBearerLoginModule entry, e.g. \
             org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;)"
        )));
    };
    let entries = jaas::parse(text).map_err(|e| ConfigError::invalid(&key, "[hidden]", e.to_string()))?;
    let [entry] = entries.as_slice() else {
        return Err(ConfigError::invalid(&key, "[hidden]", "it must hold exactly one login module entry"));
    };
    let options = UnsecuredValidatorOptions::from_jaas_options(&entry.options)
        .map_err(|reason| ConfigError::invalid(&key, "[hidden]", reason))?;
    Ok(BearerValidator::Unsecured(options))
}

/// A `sasl.oauthbearer.*` key: the listener's own value first, then the broker's.
fn oauth_value<'a>(props: &'a BTreeMap<String, String>, own: &str, key: &str) -> Option<(String, &'a str)> {
    let listener_key = format!("{own}{key}");
    props
        .get(&listener_key)
        .map(|v| (listener_key, v.as_str()))
        .or_else(|| props.get(key).map(|v| (key.to_string(), v.as_str())))
}

fn signed_validator(props: &BTreeMap<String, String>, own: &str) -> Result<BearerValidator, ConfigError> {
    let url_key = "sasl.oauthbearer.jwks.endpoint.url";
    let Some((key, url)) = oauth_value(props, own, url_key) else {
        return Err(ConfigError::Missing(format!("{url_key} (the JSON Web Key Set that signs the tokens)")));
    };
    let config = claims_config(props, own)?;
    if url.starts_with("http://") || url.starts_with("https://") {
        return fetched_validator(props, own, (&key, url), config);
    }
    let path = url
        .strip_prefix("file://")
        .or_else(|| url.strip_prefix("file:"))
        .ok_or_else(|| ConfigError::invalid(&key, url, "the JWKS is read from a file:, http: or https: URL"))?;
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError::invalid(&key, url, format!("cannot read it: {e}")))?;
    let keys = JsonWebKeySet::parse(&text).map_err(|e| ConfigError::invalid(&key, url, e))?;
    if keys.is_empty() {
        return Err(ConfigError::invalid(&key, url, "it holds no key krabka can verify signatures with"));
    }
    Ok(BearerValidator::Signed(Arc::new(SignedJwtValidator::new(config, keys))))
}

/// A JWKS the broker fetches from `url`, trusting for `https:` the JAAS
/// entry's `ssl.truststore.location` (PEM) or the system's CA bundle.
fn fetched_validator(
    props: &BTreeMap<String, String>,
    own: &str,
    (key, url): (&str, &str),
    config: JwtValidationConfig,
) -> Result<BearerValidator, ConfigError> {
    let refresh_ms = match oauth_value(props, own, "sasl.oauthbearer.jwks.endpoint.refresh.ms") {
        Some((key, text)) => text
            .trim()
            .parse()
            .ok()
            .filter(|ms| *ms > 0)
            .ok_or_else(|| ConfigError::invalid(&key, text, "not a count of ms"))?,
        None => 3_600_000,
    };
    let roots = if url.starts_with("https://") { Some(Arc::new(trusted_roots(props, own, key)?)) } else { None };
    let current = std::sync::RwLock::new(None);
    Ok(BearerValidator::Fetched(Arc::new(FetchedJwks { url: url.to_string(), refresh_ms, roots, config, current })))
}

/// The CA certificates an `https:` JWKS endpoint is checked against.
fn trusted_roots(
    props: &BTreeMap<String, String>,
    own: &str,
    url_key: &str,
) -> Result<rustls::RootCertStore, ConfigError> {
    use rustls::pki_types::pem::PemObject;
    const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
    let jaas_key = format!("{own}sasl.jaas.config");
    let location = match props.get(&jaas_key) {
        Some(text) => {
            let entries = jaas::parse(text).map_err(|e| ConfigError::invalid(&jaas_key, "[hidden]", e.to_string()))?;
            entries.first().and_then(|entry| entry.options.get("ssl.truststore.location").cloned())
        }
        None => None,
    };
    let path = location.unwrap_or_else(|| SYSTEM_BUNDLE.to_string());
    let pem = std::fs::read(&path)
        .map_err(|e| ConfigError::invalid(url_key, &path, format!("cannot read the CA certificates: {e}")))?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(&pem).flatten() {
        let _ = roots.add(certificate);
    }
    if roots.is_empty() {
        return Err(ConfigError::invalid(url_key, &path, "no CA certificate in it"));
    }
    Ok(roots)
}

/// The claims a signed token must carry (the `sasl.oauthbearer.*` keys).
fn claims_config(props: &BTreeMap<String, String>, own: &str) -> Result<JwtValidationConfig, ConfigError> {
    let mut config = JwtValidationConfig::default();
    if let Some((_, audience)) = oauth_value(props, own, "sasl.oauthbearer.expected.audience") {
        config.expected_audience = split_list(audience).into_iter().filter(|a| !a.is_empty()).collect();
    }
    if let Some((_, issuer)) = oauth_value(props, own, "sasl.oauthbearer.expected.issuer") {
        config.expected_issuer = Some(issuer.trim().to_string()).filter(|i| !i.is_empty());
    }
    if let Some((_, name)) = oauth_value(props, own, "sasl.oauthbearer.sub.claim.name") {
        config.sub_claim_name = name.trim().to_string();
    }
    if let Some((_, name)) = oauth_value(props, own, "sasl.oauthbearer.scope.claim.name") {
        config.scope_claim_name = name.trim().to_string();
    }
    if let Some((key, skew)) = oauth_value(props, own, "sasl.oauthbearer.clock.skew.seconds") {
        config.clock_skew_seconds = skew
            .trim()
            .parse()
            .ok()
            .filter(|s: &i64| *s >= 0)
            .ok_or_else(|| ConfigError::invalid(&key, skew, "not a count of seconds"))?;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "listener.name.sasl_plaintext.";
    const JAAS: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required";

    fn read(pairs: &[(&str, &str)]) -> Result<BearerValidator, String> {
        let props = pairs.iter().map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string())).collect();
        bearer_validator(&props, PREFIX).map_err(|e| e.to_string())
    }

    #[test]
    fn the_unsecured_validator_reads_its_jaas_options() {
        let jaas = format!(
            "{JAAS} unsecuredValidatorRequiredScope=\"read write\" unsecuredValidatorAllowableClockSkewMs=\"500\";"
        );
        let Ok(BearerValidator::Unsecured(options)) = read(&[("oauthbearer.sasl.jaas.config", &jaas)]) else {
            panic!("the default validator is the unsecured one");
        };
        assert_eq!(options.required_scope, ["read", "write"]);
        assert_eq!(options.allowable_clock_skew_ms, 500);
        assert!(read(&[]).unwrap_err().contains("oauthbearer.sasl.jaas.config"), "the JAAS entry is required");
        let negative = format!("{JAAS} unsecuredValidatorAllowableClockSkewMs=\"-1\";");
        assert!(read(&[("oauthbearer.sasl.jaas.config", &negative)]).unwrap_err().contains("must not be negative"));
    }

    #[test]
    fn the_signed_validator_needs_a_readable_jwks_file() {
        let handler = ("oauthbearer.sasl.server.callback.handler.class", SIGNED_VALIDATORS[0]);
        assert!(read(&[handler]).unwrap_err().contains("sasl.oauthbearer.jwks.endpoint.url"));
        let https = ("oauthbearer.sasl.oauthbearer.jwks.endpoint.url", "https://idp.example/jwks");
        assert!(matches!(read(&[handler, https]), Ok(BearerValidator::Fetched(_))), "fetched from the endpoint");
        let ftp = ("oauthbearer.sasl.oauthbearer.jwks.endpoint.url", "ftp://idp.example/jwks");
        assert!(read(&[handler, ftp]).unwrap_err().contains("file:, http: or https: URL"));
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).expect("write");
        let url = format!("file://{}", path.display());
        let file = ("oauthbearer.sasl.oauthbearer.jwks.endpoint.url", url.as_str());
        assert!(read(&[handler, file]).unwrap_err().contains("no key"), "only keys krabka verifies with count");
        std::fs::write(&path, r#"{"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB"}]}"#).expect("write");
        assert!(matches!(read(&[handler, file]), Ok(BearerValidator::Signed(_))));
        let other = ("oauthbearer.sasl.server.callback.handler.class", "com.example.Validator");
        assert!(read(&[other]).unwrap_err().contains("OAuthBearerValidatorCallbackHandler"));
    }
}
