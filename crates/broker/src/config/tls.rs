//! A TLS listener's settings, read from Kafka's `ssl.*` keys (each
//! overridable per listener as `listener.name.<listener>.ssl.*`) into a
//! rustls server configuration, and the client side a broker uses towards
//! another broker's TLS listener.
//!
//! Keys and certificates are PEM, as Kafka's `ssl.keystore.type=PEM`: a
//! keystore file holding the private key and its certificate chain, or
//! the inline `ssl.keystore.key` and `ssl.keystore.certificate.chain`;
//! trusted certificates from `ssl.truststore.location` or the inline
//! `ssl.truststore.certificates`. JKS and PKCS12 stores are refused with a
//! message saying how to convert them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use krabka_log::config_values::{split_list, ConfigError};
use krabka_security::SslPrincipalMapper;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};

use super::broker_keys::KeyValues;
pub use super::keystore::Reloading;
use super::keystore::{certificates, require_pem, Keystore, ListenerKeys, ReloadingKeystore};

/// `ssl.client.auth`: whether the listener asks clients for a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    /// Asked for; a client without one is served as ANONYMOUS.
    Requested,
    /// A client without a trusted certificate fails the handshake.
    Required,
}

/// What a TLS (SSL or SASL_SSL) listener needs to serve a connection.
pub struct TlsListener {
    /// The server side, rebuilt when the truststore file changes (the
    /// keystore is re-read by its own resolver).
    server: Reloading<ServerConfig>,
    pub client_auth: ClientAuth,
    /// `ssl.principal.mapping.rules`: a client certificate's subject to
    /// the principal's name (SSL listeners; SASL_SSL takes SASL's).
    pub principal_mapper: SslPrincipalMapper,
    /// The same key and trust, as a client: how this node connects to
    /// another node's listener of this name.
    pub client: Arc<TlsClient>,
}

impl TlsListener {
    /// The server configuration for a new connection.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.get()
    }
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener").field("client_auth", &self.client_auth).finish_non_exhaustive()
    }
}

/// How this node connects to a TLS listener: the listener's truststore
/// and keystore as a client configuration, rebuilt when either file changes.
pub type TlsClient = Reloading<ClientConfig>;

/// A listener's keys, owned, for the rebuilds after start.
struct OwnedKeys {
    values: KeyValues,
    props: BTreeMap<String, String>,
    prefix: String,
}

impl OwnedKeys {
    fn keys(&self) -> ListenerKeys<'_> {
        ListenerKeys { values: &self.values, props: &self.props, prefix: self.prefix.clone() }
    }
}

/// Reads listener `name`'s TLS settings (`prefix` is its
/// `listener.name.<name>.`).
pub(crate) fn tls_listener(
    values: &KeyValues,
    props: &BTreeMap<String, String>,
    prefix: String,
) -> Result<TlsListener, ConfigError> {
    let owned = Arc::new(OwnedKeys { values: values.clone(), props: props.clone(), prefix });
    let keys = owned.keys();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // The versions first, as the settings were always checked.
    protocol_versions(&keys)?;
    let keystore = Keystore::read(&keys)?;
    let keystore_file = keystore.file.clone();
    let resolver = ReloadingKeystore::new(keystore, provider.clone())
        .map_err(|e| ConfigError::invalid("ssl.keystore.location", "[hidden]", e.to_string()))?;
    let resolver = Arc::new(resolver);
    let client_auth = match keys.value("ssl.client.auth").as_deref() {
        Some("required") => ClientAuth::Required,
        Some("requested") => ClientAuth::Requested,
        _ => ClientAuth::None,
    };
    let trust_file = truststore_file(&keys);
    let server = {
        let (owned, provider) = (Arc::clone(&owned), Arc::clone(&provider));
        let build = move || server_config(&owned.keys(), &provider, client_auth, resolver.clone());
        Reloading::new("truststore", trust_file.iter().cloned().collect(), Box::new(build))?
    };
    let client_files = trust_file.into_iter().chain(keystore_file).collect();
    let client = Arc::new(reloading_client(Arc::clone(&owned), provider, client_files)?);
    let (rules_key, rules) = keys.get("ssl.principal.mapping.rules");
    let rules = rules.unwrap_or_else(|| "DEFAULT".into());
    let principal_mapper =
        SslPrincipalMapper::from_rules(&rules).map_err(|e| ConfigError::invalid(&rules_key, &rules, e.to_string()))?;
    Ok(TlsListener { server, client_auth, principal_mapper, client })
}

/// The listener's server configuration: its versions, its client
/// certificate check against the truststore, its keystore's resolver.
fn server_config(
    keys: &ListenerKeys<'_>,
    provider: &Arc<CryptoProvider>,
    client_auth: ClientAuth,
    resolver: Arc<ReloadingKeystore>,
) -> Result<ServerConfig, ConfigError> {
    let versions = protocol_versions(keys)?;
    let roots = truststore(keys)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| ConfigError::invalid("ssl.enabled.protocols", "[hidden]", e.to_string()))?;
    let builder = match (client_auth, roots) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            let reason = "client certificates are checked against a truststore: set ssl.truststore.location or ssl.truststore.certificates (PEM)";
            return Err(ConfigError::invalid("ssl.client.auth", "required", reason));
        }
        (_, Some(roots)) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            let verifier =
                if client_auth == ClientAuth::Requested { verifier.allow_unauthenticated() } else { verifier };
            let verifier = verifier
                .build()
                .map_err(|e| ConfigError::invalid("ssl.truststore.location", "[hidden]", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    Ok(builder.with_cert_resolver(resolver))
}

/// How this node connects to the TLS listener `prefix` names
/// (`listener.name.<name>.`) when it does not serve that listener itself
/// (a broker-only node reaching the controllers): the listener's
/// truststore, and its keystore's certificate when one is configured.
pub(crate) fn tls_client(
    values: &KeyValues,
    props: &BTreeMap<String, String>,
    prefix: String,
) -> Result<Arc<TlsClient>, ConfigError> {
    let owned = Arc::new(OwnedKeys { values: values.clone(), props: props.clone(), prefix });
    let keys = owned.keys();
    let files = truststore_file(&keys).into_iter().chain(keystore_file(&keys)).collect();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(Arc::new(reloading_client(owned, provider, files)?))
}

/// A client configuration rebuilt when one of `files` changes.
fn reloading_client(
    owned: Arc<OwnedKeys>,
    provider: Arc<CryptoProvider>,
    files: Vec<PathBuf>,
) -> Result<TlsClient, ConfigError> {
    let build = move || client_config(&owned.keys(), &provider);
    Reloading::new("client truststore or keystore", files, Box::new(build))
}

/// The client configuration a node connects to its peers with: the
/// listener's truststore (or none: the connection cannot be verified and
/// is refused) and its certificate, when a keystore is configured (for
/// listeners that ask for one).
fn client_config(keys: &ListenerKeys<'_>, provider: &Arc<CryptoProvider>) -> Result<ClientConfig, ConfigError> {
    let versions = protocol_versions(keys)?;
    let roots = truststore(keys)?;
    let has_keystore = keys.value("ssl.keystore.key").is_some() || keys.value("ssl.keystore.location").is_some();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| ConfigError::invalid("ssl.enabled.protocols", "", e.to_string()))?
        .with_root_certificates(roots.unwrap_or_else(|| Arc::new(RootCertStore::empty())));
    if !has_keystore {
        return Ok(builder.with_no_client_auth());
    }
    let keystore = Keystore::read(keys)?;
    builder
        .with_client_auth_cert(keystore.chain, keystore.key)
        .map_err(|e| ConfigError::invalid("ssl.keystore.location", "[hidden]", e.to_string()))
}

/// The truststore file, when the truststore is one (not inline).
fn truststore_file(keys: &ListenerKeys<'_>) -> Option<PathBuf> {
    if keys.value("ssl.truststore.certificates").is_some() {
        return None;
    }
    keys.value("ssl.truststore.location").map(PathBuf::from)
}

/// The keystore file, when the keystore is one (not inline).
fn keystore_file(keys: &ListenerKeys<'_>) -> Option<PathBuf> {
    if keys.value("ssl.keystore.key").is_some() {
        return None;
    }
    keys.value("ssl.keystore.location").map(PathBuf::from)
}

/// `ssl.enabled.protocols`: TLSv1.2 and TLSv1.3 (rustls has no older).
fn protocol_versions(keys: &ListenerKeys<'_>) -> Result<Vec<&'static SupportedProtocolVersion>, ConfigError> {
    let (key, text) = keys.get("ssl.enabled.protocols");
    let text = text.unwrap_or_default();
    let mut versions = Vec::new();
    for name in split_list(&text) {
        let version = match name.as_str() {
            "TLSv1.3" => &rustls::version::TLS13,
            "TLSv1.2" => &rustls::version::TLS12,
            other => {
                return Err(ConfigError::invalid(
                    &key,
                    &text,
                    format!("{other} is not served; krabka's TLS is TLSv1.2 and TLSv1.3"),
                ))
            }
        };
        versions.push(version);
    }
    if versions.is_empty() {
        return Err(ConfigError::invalid(&key, &text, "no protocol enabled"));
    }
    Ok(versions)
}

/// The trusted certificates, if a truststore is configured.
fn truststore(keys: &ListenerKeys<'_>) -> Result<Option<Arc<RootCertStore>>, ConfigError> {
    let (pem, from) = match (keys.value("ssl.truststore.certificates"), keys.value("ssl.truststore.location")) {
        (Some(inline), _) => (inline.into_bytes(), "ssl.truststore.certificates"),
        (None, Some(path)) => {
            require_pem(keys, "ssl.truststore.type")?;
            let pem = std::fs::read(&path)
                .map_err(|e| ConfigError::invalid("ssl.truststore.location", &path, e.to_string()))?;
            (pem, "ssl.truststore.location")
        }
        (None, None) => return Ok(None),
    };
    let mut roots = RootCertStore::empty();
    for certificate in certificates(&pem, from)? {
        roots.add(certificate).map_err(|e| ConfigError::invalid(from, "[hidden]", e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(ConfigError::invalid(from, "[hidden]", "no CERTIFICATE block"));
    }
    Ok(Some(Arc::new(roots)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads an SSL listener named `SSL` from `pairs`.
    fn read(pairs: &[(&str, &str)]) -> Result<TlsListener, ConfigError> {
        let props: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let (values, _) = KeyValues::read(&props)?;
        tls_listener(&values, &props, "listener.name.ssl.".into())
    }

    fn refusal(pairs: &[(&str, &str)]) -> String {
        read(pairs).map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn stores_other_than_pem_and_encrypted_keys_are_refused_with_the_way_out() {
        // Kafka's default store type is JKS.
        let err = refusal(&[("ssl.keystore.location", "/nonexistent.jks")]);
        assert!(err.contains("ssl.keystore.type") && err.contains("PEM"), "{err}");
        let err = refusal(&[("listener.name.ssl.ssl.keystore.type", "PKCS12")]);
        assert!(err.contains("listener.name.ssl.ssl.keystore.type") && err.contains("openssl pkcs12"), "{err}");
        let err = refusal(&[("ssl.keystore.type", "PEM"), ("ssl.key.password", "secret")]);
        assert!(err.contains("ssl.key.password") && !err.contains("secret\""), "{err}");
        let err = refusal(&[("ssl.keystore.type", "PEM")]);
        assert!(err.contains("ssl.keystore.location"), "{err}");
        let err = refusal(&[("ssl.keystore.type", "PEM"), ("ssl.keystore.location", "/nonexistent.pem")]);
        assert!(err.contains("/nonexistent.pem"), "{err}");
    }

    #[test]
    fn only_tls_1_2_and_1_3_are_served() {
        let err = refusal(&[("ssl.enabled.protocols", "TLSv1.1,TLSv1.2")]);
        assert!(err.contains("TLSv1.1 is not served"), "{err}");
        let err = refusal(&[("listener.name.ssl.ssl.enabled.protocols", "")]);
        assert!(err.contains("no protocol enabled"), "{err}");
    }

    #[test]
    fn a_keystore_without_a_key_or_certificate_is_refused() {
        let not_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
        let err = refusal(&[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.key", "x"),
            ("ssl.keystore.certificate.chain", not_pem),
        ]);
        assert!(err.contains("ssl.keystore.key") && err.contains("PEM"), "{err}");
        let err = refusal(&[("ssl.keystore.type", "PEM"), ("ssl.keystore.key", "no blocks at all")]);
        assert!(err.contains("no CERTIFICATE block"), "{err}");
    }
}
