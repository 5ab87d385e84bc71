//! How each client listener authenticates: its security protocol, the SASL
//! mechanisms it enables and the PLAIN users of its JAAS configuration, read
//! from Kafka's keys (`sasl.enabled.mechanisms` and its
//! `listener.name.<listener>.` override, and
//! `listener.name.<listener>.<mechanism>.sasl.jaas.config`).

use std::collections::BTreeMap;
use std::sync::Arc;

use krabka_log::config_values::{split_list, ConfigError};
use krabka_security::acl::AuthorizerConfig;
use krabka_security::jaas;
use krabka_security::SaslMechanism;

use super::broker_keys::KeyValues;
use super::listeners::Listener;
use super::oauthbearer::{bearer_validator, BearerValidator};
use super::tls::{tls_client, tls_listener, TlsClient, TlsListener};

/// Kafka's security protocols, as the broker serves them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's SecurityProtocol id, as BrokerRegistration carries it.
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    fn is_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    fn is_sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

/// What one client listener needs to serve a connection.
#[derive(Debug)]
pub struct ClientListener {
    /// The listener's name (`PLAINTEXT`, `SASL_PLAINTEXT`, `INTERNAL`, ...):
    /// Metadata answers with every broker's endpoint of this name.
    pub name: String,
    pub protocol: SecurityProtocol,
    /// Set on a SASL listener.
    pub sasl: Option<SaslListener>,
    /// Set on a TLS (SSL, SASL_SSL) listener.
    pub tls: Option<TlsListener>,
    /// `listener.name.<listener>.max.connection.creation.rate` (None: unbounded).
    pub max_connection_creation_rate: Option<u32>,
}

/// A SASL listener's mechanisms and the users its JAAS config names.
pub struct SaslListener {
    /// In the order configured, as SaslHandshake lists them.
    pub enabled_mechanisms: Vec<SaslMechanism>,
    /// PLAIN's users (`user_<name>="<password>"` in the PLAIN JAAS entry).
    pub plain_users: BTreeMap<String, String>,
    /// OAUTHBEARER's token validator, when the listener enables it.
    pub bearer_validator: Option<BearerValidator>,
}

impl std::fmt::Debug for SaslListener {
    /// Names the users, never their passwords.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslListener")
            .field("enabled_mechanisms", &self.enabled_mechanisms)
            .field("plain_users", &self.plain_users.keys().collect::<Vec<_>>())
            .field("bearer_validator", &self.bearer_validator)
            .finish()
    }
}

/// How this node logs in to another's SASL listener: the inter-broker
/// one as `sasl.mechanism.inter.broker.protocol`, the controllers' as
/// `sasl.mechanism.controller.protocol`, each with the username and
/// password of that listener's JAAS entry for the mechanism.
#[derive(Clone)]
pub struct NodeLogin {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for NodeLogin {
    /// Never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLogin").field("mechanism", &self.mechanism).field("username", &self.username).finish()
    }
}

/// The security settings every connection shares.
#[derive(Clone, Debug)]
pub struct SecurityConfig {
    /// Each client (non-controller) listener, in `listeners` order.
    pub client_listeners: Vec<Arc<ClientListener>>,
    /// Set when the inter-broker listener authenticates.
    pub inter_broker_login: Option<NodeLogin>,
    /// Each controller listener this node serves (a controller's), in
    /// `listeners` order.
    pub controller_listeners: Vec<Arc<ClientListener>>,
    /// How this node connects to the controllers.
    pub controller_client: Arc<ControllerClient>,
    /// `connections.max.reauth.ms`: a SASL session's lifetime (0: unlimited, as Kafka).
    pub connections_max_reauth_ms: i64,
    /// `connection.failed.authentication.delay.ms`: how long a failed
    /// authentication's connection is held before it is closed (KIP-306).
    pub failed_authentication_delay_ms: u64,
    /// `sasl.server.max.receive.size`: the largest frame read from a
    /// client that has not authenticated yet.
    pub sasl_server_max_receive_size: u32,
    /// Set when `authorizer.class.name` names Kafka's StandardAuthorizer:
    /// its `super.users` and `allow.everyone.if.no.acl.found`. None: no
    /// authorizer, every principal may do everything and the ACL APIs
    /// answer SECURITY_DISABLED, as Kafka without one.
    pub authorizer: Option<AuthorizerConfig>,
}

impl SecurityConfig {
    pub(crate) fn read(
        values: &KeyValues,
        props: &BTreeMap<String, String>,
        (listeners, controller_names, inter_broker): (&[Listener], &[String], &str),
        protocols: &BTreeMap<String, String>,
    ) -> Result<SecurityConfig, ConfigError> {
        let (controller_listeners, client_listeners): (Vec<_>, Vec<_>) = listeners
            .iter()
            .map(|l| client_listener(values, props, &l.name, protocols).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .partition(|l| controller_names.contains(&l.name));
        let inter_broker_listener = client_listeners.iter().find(|l| l.name == inter_broker);
        let inter_broker_login = match inter_broker_listener.and_then(|l| l.sasl.as_ref()) {
            Some(sasl) => Some(node_login(values, props, (inter_broker, Some(sasl)), INTER_BROKER_MECHANISM)?),
            None => None,
        };
        let controller_client = Arc::new(ControllerClient::read(
            values,
            props,
            controller_names.first(),
            protocols,
            &controller_listeners,
        )?);
        Ok(SecurityConfig {
            client_listeners,
            inter_broker_login,
            controller_listeners,
            controller_client,
            connections_max_reauth_ms: values.int("connections.max.reauth.ms").max(0),
            failed_authentication_delay_ms: values.int("connection.failed.authentication.delay.ms").max(0) as u64,
            sasl_server_max_receive_size: values.int("sasl.server.max.receive.size").clamp(1, i64::from(u32::MAX))
                as u32,
            authorizer: authorizer(values)?,
        })
    }

    /// The listener of this name, if it is a client listener.
    pub fn client_listener(&self, name: &str) -> Option<&Arc<ClientListener>> {
        self.client_listeners.iter().find(|l| l.name == name)
    }

    /// The controller listener of this name, if this node serves it.
    pub fn controller_listener(&self, name: &str) -> Option<&Arc<ClientListener>> {
        self.controller_listeners.iter().find(|l| l.name == name)
    }
}

/// How this node reaches the controllers on the first of
/// `controller.listener.names`, as Kafka's raft client and its brokers'
/// channel to the active controller do: TLS with that listener's
/// truststore (and its certificate, when one is configured), SASL as
/// `sasl.mechanism.controller.protocol`.
#[derive(Debug, Default)]
pub struct ControllerClient {
    pub tls: Option<Arc<TlsClient>>,
    pub login: Option<NodeLogin>,
}

impl ControllerClient {
    fn read(
        values: &KeyValues,
        props: &BTreeMap<String, String>,
        name: Option<&String>,
        protocols: &BTreeMap<String, String>,
        served: &[Arc<ClientListener>],
    ) -> Result<ControllerClient, ConfigError> {
        let Some(name) = name else { return Ok(ControllerClient::default()) };
        let own = served.iter().find(|l| &l.name == name);
        let protocol = protocol_of(protocols, name)?;
        let tls = match own.and_then(|l| l.tls.as_ref()) {
            Some(tls) => Some(tls.client.clone()),
            None if protocol.is_tls() => Some(tls_client(values, props, listener_prefix(name))?),
            None => None,
        };
        let login = if protocol.is_sasl() {
            let sasl = own.and_then(|l| l.sasl.as_ref());
            Some(node_login(values, props, (name, sasl), CONTROLLER_MECHANISM)?)
        } else {
            None
        };
        Ok(ControllerClient { tls, login })
    }
}

fn client_listener(
    values: &KeyValues,
    props: &BTreeMap<String, String>,
    name: &str,
    protocols: &BTreeMap<String, String>,
) -> Result<ClientListener, ConfigError> {
    let protocol = protocol_of(protocols, name)?;
    let sasl = if protocol.is_sasl() { Some(sasl_listener(values, props, name)?) } else { None };
    let tls = if protocol.is_tls() { Some(tls_listener(values, props, listener_prefix(name))?) } else { None };
    let rate_key = format!("{}max.connection.creation.rate", listener_prefix(name));
    let max_connection_creation_rate = match props.get(&rate_key) {
        None => None,
        Some(text) => match text.trim().parse::<u32>() {
            Ok(rate) if rate < i32::MAX as u32 => Some(rate),
            Ok(_) => None,
            Err(_) => {
                return Err(ConfigError::invalid(
                    &rate_key,
                    text,
                    "it must be a whole number of connections per second",
                ))
            }
        },
    };
    Ok(ClientListener { name: name.to_string(), protocol, sasl, tls, max_connection_creation_rate })
}

/// Listener `name`'s security protocol (PLAINTEXT when the map names none).
fn protocol_of(protocols: &BTreeMap<String, String>, name: &str) -> Result<SecurityProtocol, ConfigError> {
    match protocols.get(name).map(String::as_str).unwrap_or("PLAINTEXT") {
        "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
        "SSL" => Ok(SecurityProtocol::Ssl),
        "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
        "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
        other => {
            let reason = format!("listener {name} uses an unknown security protocol {other}");
            Err(ConfigError::invalid("listener.security.protocol.map", other, reason))
        }
    }
}

/// Kafka's KRaft authorizer class, the one krabka implements.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

fn authorizer(values: &KeyValues) -> Result<Option<AuthorizerConfig>, ConfigError> {
    let key = "authorizer.class.name";
    match values.get(key).unwrap_or_default() {
        "" => Ok(None),
        STANDARD_AUTHORIZER => {
            let super_users = values.get("super.users");
            let allow_everyone = values.get("allow.everyone.if.no.acl.found");
            let config = AuthorizerConfig::from_values(super_users, allow_everyone)
                .map_err(|e| ConfigError::invalid("super.users", super_users.unwrap_or_default(), e.to_string()))?;
            Ok(Some(config))
        }
        other => Err(ConfigError::invalid(
            key,
            other,
            format!("krabka's authorizer is Kafka's KRaft one, {STANDARD_AUTHORIZER}"),
        )),
    }
}

/// Kafka's prefix for a listener's own keys: its name in lower case.
fn listener_prefix(name: &str) -> String {
    format!("listener.name.{}.", name.to_ascii_lowercase())
}

fn sasl_listener(
    values: &KeyValues,
    props: &BTreeMap<String, String>,
    name: &str,
) -> Result<SaslListener, ConfigError> {
    let prefix = listener_prefix(name);
    let own_key = format!("{prefix}sasl.enabled.mechanisms");
    let (key, text) = match props.get(&own_key) {
        Some(text) => (own_key.as_str(), text.as_str()),
        None => ("sasl.enabled.mechanisms", values.get("sasl.enabled.mechanisms").unwrap_or_default()),
    };
    let mut enabled_mechanisms = Vec::new();
    for mechanism_name in split_list(text).into_iter().filter(|m| !m.is_empty()) {
        let Some(mechanism) = SaslMechanism::from_name(&mechanism_name) else {
            let reason = format!(
                "krabka does not support SASL mechanism {mechanism_name}; it serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER"
            );
            return Err(ConfigError::invalid(key, text, reason));
        };
        if !enabled_mechanisms.contains(&mechanism) {
            enabled_mechanisms.push(mechanism);
        }
    }
    if enabled_mechanisms.is_empty() {
        return Err(ConfigError::invalid(key, text, format!("SASL listener {name} enables no mechanism")));
    }
    let plain_users =
        if enabled_mechanisms.contains(&SaslMechanism::Plain) { plain_users(props, &prefix)? } else { BTreeMap::new() };
    let bearer_validator = if enabled_mechanisms.contains(&SaslMechanism::OAuthBearer) {
        Some(bearer_validator(props, &prefix)?)
    } else {
        None
    };
    Ok(SaslListener { enabled_mechanisms, plain_users, bearer_validator })
}

/// A login's mechanism key and the mechanisms krabka's nodes log in with
/// there.
struct MechanismKey {
    key: &'static str,
    usable: &'static [SaslMechanism],
    why: &'static str,
}

const INTER_BROKER_MECHANISM: MechanismKey = MechanismKey {
    key: "sasl.mechanism.inter.broker.protocol",
    usable: &[SaslMechanism::Plain, SaslMechanism::ScramSha256, SaslMechanism::ScramSha512],
    why: "krabka's brokers log in to each other with PLAIN or SCRAM",
};

/// SCRAM's credentials live in the metadata log, which a controller
/// reads only once it reached the quorum (Kafka does not support SCRAM
/// between controllers either).
const CONTROLLER_MECHANISM: MechanismKey = MechanismKey {
    key: "sasl.mechanism.controller.protocol",
    usable: &[SaslMechanism::Plain],
    why: "krabka's nodes log in to the controllers with PLAIN",
};

/// The login of this node on SASL listener `name`: the mechanism
/// `mechanism.key` names, which the listener must enable when this node
/// serves it (`sasl`), with the username and password of the listener's
/// JAAS entry for it.
fn node_login(
    values: &KeyValues,
    props: &BTreeMap<String, String>,
    (listener, sasl): (&str, Option<&SaslListener>),
    mechanism: MechanismKey,
) -> Result<NodeLogin, ConfigError> {
    let name = values.get(mechanism.key).unwrap_or_default();
    let enabled = |m: &SaslMechanism| sasl.is_none_or(|s| s.enabled_mechanisms.contains(m));
    let usable = |m: &SaslMechanism| enabled(m) && mechanism.usable.contains(m);
    let Some(chosen) = SaslMechanism::from_name(name).filter(usable) else {
        let reason = format!("the listener {listener} must enable it (and {})", mechanism.why);
        return Err(ConfigError::invalid(mechanism.key, name, reason));
    };
    let jaas_key = format!("{}{}.sasl.jaas.config", listener_prefix(listener), chosen.name().to_ascii_lowercase());
    let Some(text) = props.get(&jaas_key) else {
        return Err(ConfigError::Missing(format!("{jaas_key} (the node's own username and password)")));
    };
    let entries = jaas::parse(text).map_err(|e| ConfigError::invalid(&jaas_key, "[hidden]", e.to_string()))?;
    let option = |name: &str| entries.first().and_then(|e| e.options.get(name)).cloned();
    match (option("username"), option("password")) {
        (Some(username), Some(password)) => Ok(NodeLogin { mechanism: chosen, username, password }),
        _ => Err(ConfigError::invalid(
            &jaas_key,
            "[hidden]",
            "it must give username and password for the node's own login",
        )),
    }
}

/// PLAIN's users from `listener.name.<listener>.plain.sasl.jaas.config`,
/// which Kafka requires for a listener that enables PLAIN.
fn plain_users(props: &BTreeMap<String, String>, prefix: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let key = format!("{prefix}plain.sasl.jaas.config");
    let Some(text) = props.get(&key) else {
        return Err(ConfigError::Missing(format!(
            "{key} (PLAIN needs a PlainLoginModule entry naming its users: user_<name>=\"<password>\")"
        )));
    };
    // The value is a secret: errors name the key, never the text.
    let entries = jaas::parse(text).map_err(|e| ConfigError::invalid(&key, "[hidden]", e.to_string()))?;
    let [entry] = entries.as_slice() else {
        return Err(ConfigError::invalid(&key, "[hidden]", "it must hold exactly one login module entry"));
    };
    Ok(jaas::plain_users(entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<SecurityConfig, ConfigError> {
        let props: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let (values, _) = KeyValues::read(&props)?;
        let listeners = vec![
            Listener { name: "PLAINTEXT".into(), host: String::new(), port: 9092 },
            Listener { name: "SASL_PLAINTEXT".into(), host: String::new(), port: 9094 },
            Listener { name: "CONTROLLER".into(), host: String::new(), port: 9093 },
        ];
        let protocols: BTreeMap<String, String> =
            [("PLAINTEXT", "PLAINTEXT"), ("SASL_PLAINTEXT", "SASL_PLAINTEXT"), ("CONTROLLER", "PLAINTEXT")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        SecurityConfig::read(&values, &props, (&listeners, &["CONTROLLER".into()], "PLAINTEXT"), &protocols)
    }

    const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice secret";"#;

    #[test]
    fn reads_a_plain_listener_beside_a_plaintext_one() {
        let config = read(&[
            ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
            ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
            ("connections.max.reauth.ms", "60000"),
        ])
        .unwrap();
        assert_eq!(config.client_listeners.len(), 2, "the controller listener serves no clients");
        assert!(config.client_listener("PLAINTEXT").unwrap().sasl.is_none());
        let sasl = config.client_listener("SASL_PLAINTEXT").unwrap().sasl.as_ref().unwrap();
        assert_eq!(sasl.enabled_mechanisms, [SaslMechanism::Plain, SaslMechanism::ScramSha512]);
        assert_eq!(sasl.plain_users.get("alice").map(String::as_str), Some("alice secret"));
        assert_eq!(config.connections_max_reauth_ms, 60_000);
        assert_eq!(config.failed_authentication_delay_ms, 100);
        assert_eq!(config.sasl_server_max_receive_size, 524_288);
    }

    #[test]
    fn the_listener_override_wins_and_unsupported_mechanisms_are_refused() {
        let scram_only = read(&[("listener.name.sasl_plaintext.sasl.enabled.mechanisms", "SCRAM-SHA-256")]).unwrap();
        let sasl = scram_only.client_listener("SASL_PLAINTEXT").unwrap().sasl.as_ref().unwrap();
        assert_eq!(sasl.enabled_mechanisms, [SaslMechanism::ScramSha256]);
        // Kafka's default mechanism is GSSAPI (Kerberos), which krabka lacks.
        let err = read(&[]).unwrap_err().to_string();
        assert!(err.contains("GSSAPI"), "{err}");
        let err = read(&[("sasl.enabled.mechanisms", "PLAIN")]).unwrap_err().to_string();
        assert!(err.contains("listener.name.sasl_plaintext.plain.sasl.jaas.config"), "{err}");
        let err = read(&[
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("listener.name.sasl_plaintext.plain.sasl.jaas.config", "user_a=\"secret\""),
        ])
        .unwrap_err()
        .to_string();
        assert!(!err.contains("secret"), "a JAAS value is never echoed: {err}");
    }
}
