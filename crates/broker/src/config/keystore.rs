//! A TLS listener's keystore: its private key and certificate chain (PEM,
//! as Kafka's `ssl.keystore.type=PEM`), from a file or inline, and the
//! rustls certificate resolver that serves it. A keystore file is re-read
//! when it changes (a new modification time or size seen at a handshake),
//! so a renewed certificate is served to new connections without a
//! restart; a file that does not read back as a key and its chain is
//! logged and the previous one kept. The listener's view of the `ssl.*`
//! keys and the PEM helpers live here too, for tls.rs above it.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use krabka_log::config_values::ConfigError;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::broker_keys::KeyValues;
use std::collections::BTreeMap;

/// A key and its chain, and the file they came from (None: inline).
pub(super) struct Keystore {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub file: Option<PathBuf>,
}

impl Keystore {
    /// The listener's keystore, from `ssl.keystore.key` and
    /// `ssl.keystore.certificate.chain`, else `ssl.keystore.location`.
    pub(super) fn read(keys: &ListenerKeys<'_>) -> Result<Keystore, ConfigError> {
        require_pem(keys, "ssl.keystore.type")?;
        if keys.value("ssl.key.password").is_some() {
            let reason = "krabka reads unencrypted PEM keys; decrypt the key (openssl pkcs8 -nocrypt) and leave ssl.key.password unset";
            return Err(ConfigError::invalid("ssl.key.password", "[hidden]", reason));
        }
        match (keys.value("ssl.keystore.key"), keys.value("ssl.keystore.location")) {
            (Some(key), _) => {
                let chain = keys.value("ssl.keystore.certificate.chain").unwrap_or_default();
                Self::parse(format!("{key}\n{chain}").as_bytes(), "ssl.keystore.key", None)
            }
            (None, Some(path)) => {
                let pem = std::fs::read(&path)
                    .map_err(|e| ConfigError::invalid("ssl.keystore.location", &path, e.to_string()))?;
                Self::parse(&pem, "ssl.keystore.location", Some(PathBuf::from(path)))
            }
            (None, None) => Err(ConfigError::Missing(
                "ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain) for a TLS listener"
                    .into(),
            )),
        }
    }

    fn parse(pem: &[u8], from: &str, file: Option<PathBuf>) -> Result<Keystore, ConfigError> {
        let chain = certificates(pem, from)?;
        if chain.is_empty() {
            return Err(ConfigError::invalid(
                from,
                "[hidden]",
                "no CERTIFICATE block: the keystore needs the key's certificate chain",
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(pem)
            .map_err(|e| ConfigError::invalid(from, "[hidden]", format!("no readable PRIVATE KEY block: {e}")))?;
        Ok(Keystore { chain, key, file })
    }
}

/// What identifies a version of the keystore file.
type FileVersion = Option<(SystemTime, u64)>;

fn file_version(path: &PathBuf) -> FileVersion {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// Serves the keystore's certificate, re-reading its file when it changed.
#[derive(Debug)]
pub(super) struct ReloadingKeystore {
    file: Option<PathBuf>,
    provider: Arc<CryptoProvider>,
    current: RwLock<(FileVersion, Arc<CertifiedKey>)>,
}

impl ReloadingKeystore {
    pub(super) fn new(keystore: Keystore, provider: Arc<CryptoProvider>) -> Result<Self, rustls::Error> {
        let version = keystore.file.as_ref().and_then(file_version);
        let certified = CertifiedKey::from_der(keystore.chain, keystore.key, &provider)?;
        Ok(ReloadingKeystore { file: keystore.file, provider, current: RwLock::new((version, Arc::new(certified))) })
    }

    /// The file's key and chain if it changed since last read.
    fn reload(&self, path: &PathBuf, seen: FileVersion) -> Option<Arc<CertifiedKey>> {
        let now = file_version(path);
        if now == seen || now.is_none() {
            return None;
        }
        let read = std::fs::read(path).map_err(|e| e.to_string()).and_then(|pem| {
            let keystore = Keystore::parse(&pem, "ssl.keystore.location", None).map_err(|e| e.to_string())?;
            CertifiedKey::from_der(keystore.chain, keystore.key, &self.provider).map_err(|e| e.to_string())
        });
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        // Recorded either way: a broken file is reported once, not at
        // every handshake, and read again when it changes next.
        current.0 = now;
        match read {
            Ok(certified) => {
                tracing::info!(path = %path.display(), "TLS keystore changed: serving its new certificate");
                current.1 = Arc::new(certified);
                Some(current.1.clone())
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "TLS keystore changed but does not load; keeping the previous one");
                None
            }
        }
    }
}

impl ResolvesServerCert for ReloadingKeystore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let (seen, certified) = self.current.read().unwrap_or_else(|e| e.into_inner()).clone();
        match &self.file {
            Some(path) => Some(self.reload(path, seen).unwrap_or(certified)),
            None => Some(certified),
        }
    }
}

/// A TLS configuration built from files, rebuilt when one of them changes
/// (a new modification time or size, seen when the configuration is next
/// asked for, at a handshake): a renewed truststore or client certificate
/// applies to new connections without a restart. A rebuild that fails is
/// logged and the previous configuration kept.
pub struct Reloading<T> {
    what: &'static str,
    files: Vec<PathBuf>,
    build: Build<T>,
    current: RwLock<(Vec<FileVersion>, Arc<T>)>,
}

impl<T> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading").field("what", &self.what).field("files", &self.files).finish_non_exhaustive()
    }
}

/// Builds a configuration from the files' current contents.
type Build<T> = Box<dyn Fn() -> Result<T, ConfigError> + Send + Sync>;

impl<T> Reloading<T> {
    /// Built once now (a failure is the config's error), from `files`.
    pub(super) fn new(what: &'static str, files: Vec<PathBuf>, build: Build<T>) -> Result<Self, ConfigError> {
        let versions = files.iter().map(file_version).collect();
        let first = build()?;
        Ok(Reloading { what, files, build, current: RwLock::new((versions, Arc::new(first))) })
    }

    /// The configuration, rebuilt first if one of its files changed.
    pub fn get(&self) -> Arc<T> {
        let (seen, config) = self.current.read().unwrap_or_else(|e| e.into_inner()).clone();
        if self.files.is_empty() {
            return config;
        }
        let now: Vec<FileVersion> = self.files.iter().map(file_version).collect();
        // A file missing for a moment (being replaced) is looked at again.
        if now == seen || now.iter().any(Option::is_none) {
            return config;
        }
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        if current.0 != now {
            // Recorded either way: a broken file is reported once.
            current.0 = now;
            match (self.build)() {
                Ok(rebuilt) => {
                    tracing::info!(files = ?self.files, "TLS {} changed: new connections use it", self.what);
                    current.1 = Arc::new(rebuilt);
                }
                Err(error) => {
                    tracing::warn!(files = ?self.files, %error, "TLS {} changed but does not load; keeping the previous one", self.what);
                }
            }
        }
        current.1.clone()
    }
}

/// One listener's view of the `ssl.*` keys: its own override first.
pub(super) struct ListenerKeys<'a> {
    pub values: &'a KeyValues,
    pub props: &'a BTreeMap<String, String>,
    /// `listener.name.<listener>.`
    pub prefix: String,
}

impl ListenerKeys<'_> {
    /// The key the value comes from (for error messages) and the value.
    pub(super) fn get(&self, key: &str) -> (String, Option<String>) {
        let own = format!("{}{key}", self.prefix);
        match self.props.get(&own) {
            Some(value) => (own, Some(value.clone())),
            None => (key.to_string(), self.values.get(key).map(str::to_string)),
        }
    }

    pub(super) fn value(&self, key: &str) -> Option<String> {
        self.get(key).1.filter(|v| !v.is_empty())
    }
}

pub(super) fn certificates(pem: &[u8], from: &str) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::invalid(from, "[hidden]", format!("unreadable PEM: {e}")))
}

/// Stores are PEM files: JKS and PKCS12 are named with the way out.
pub(super) fn require_pem(keys: &ListenerKeys<'_>, type_key: &str) -> Result<(), ConfigError> {
    let (key, store_type) = keys.get(type_key);
    match store_type.as_deref() {
        Some("PEM") => Ok(()),
        other => {
            let reason = "krabka reads PEM stores: set it to PEM (convert a JKS or PKCS12 store with keytool -importkeystore and openssl pkcs12 -nodes)";
            Err(ConfigError::invalid(&key, other.unwrap_or_default(), reason))
        }
    }
}
