//! The listener keys: `listeners`, `advertised.listeners`, the controller and
//! inter-broker listener names and the security protocol map, checked together
//! the way a KRaft broker checks them at startup.

use std::collections::BTreeMap;

use super::broker_keys::{KeyValues, DEFAULT_PROTOCOL_MAP, SECURITY_PROTOCOLS};
use krabka_log::config_values::split_list;
use krabka_log::config_values::ConfigError;

/// One `listeners` entry: `NAME://host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// The resolved listener layout of a broker.
pub(crate) struct Listeners {
    pub listeners: Vec<Listener>,
    pub advertised: Vec<Listener>,
    pub controller_names: Vec<String>,
    pub inter_broker: String,
    /// Listener name to security protocol, as in effect (defaults included).
    pub protocols: BTreeMap<String, String>,
}

/// Parses a `NAME://host:port,...` list. Names are upper-cased as Kafka normalises them;
/// `[v6]` hosts lose their brackets; an empty host means every interface.
pub(crate) fn parse_listeners(key: &str, text: &str, distinct_ports: bool) -> Result<Vec<Listener>, ConfigError> {
    let mut out: Vec<Listener> = Vec::new();
    for entry in split_list(text).into_iter().filter(|e| !e.is_empty()) {
        let listener = parse_endpoint(&entry).ok_or_else(|| {
            ConfigError::invalid(
                key,
                text,
                format!("cannot parse {entry:?} as NAME://host:port (e.g. PLAINTEXT://:9092)"),
            )
        })?;
        if out.iter().any(|l| l.name == listener.name) {
            return Err(ConfigError::invalid(key, text, format!("listener name {} is used twice", listener.name)));
        }
        // Port 0 asks the OS for a free port, so several listeners may use it.
        if distinct_ports && listener.port != 0 && out.iter().any(|l| l.port == listener.port) {
            return Err(ConfigError::invalid(key, text, format!("port {} is used by two listeners", listener.port)));
        }
        out.push(listener);
    }
    Ok(out)
}

fn parse_endpoint(entry: &str) -> Option<Listener> {
    let (name, address) = entry.split_once("://")?;
    let name = name.trim();
    let valid_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let (host, port) = match address.strip_prefix('[') {
        Some(v6) => {
            let (host, rest) = v6.split_once(']')?;
            (host, rest.strip_prefix(':')?)
        }
        None => address.rsplit_once(':')?,
    };
    let host_chars = |c: char| c.is_ascii_alphanumeric() || "-%._:".contains(c);
    if !valid_name || !host.chars().all(host_chars) || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Listener { name: name.to_ascii_uppercase(), host: host.to_string(), port: port.parse().ok()? })
}

/// Parses `NAME:PROTOCOL,...`.
fn parse_protocol_map(text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let key = "listener.security.protocol.map";
    let mut map = BTreeMap::new();
    for entry in split_list(text).into_iter().filter(|e| !e.is_empty()) {
        let Some((name, protocol)) = entry.split_once(':') else {
            return Err(ConfigError::invalid(key, text, format!("entry {entry:?} is not NAME:PROTOCOL")));
        };
        let protocol = protocol.trim().to_ascii_uppercase();
        if !SECURITY_PROTOCOLS.contains(&protocol.as_str()) {
            let known = SECURITY_PROTOCOLS.join(", ");
            return Err(ConfigError::invalid(
                key,
                text,
                format!("unknown security protocol {protocol:?} (one of {known})"),
            ));
        }
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

impl Listeners {
    /// Resolves and cross-checks the listener keys. `controller_role` is true for
    /// a node with the controller role, `broker_role` for one with the broker's.
    pub(crate) fn resolve(
        values: &KeyValues,
        controller_role: bool,
        broker_role: bool,
    ) -> Result<Listeners, ConfigError> {
        let listeners_text = values.get("listeners").unwrap_or_default();
        let listeners = parse_listeners("listeners", listeners_text, true)?;
        let controller_names = controller_names(values, &listeners, controller_role)?;
        if !broker_role {
            return controller_only(values, listeners, controller_names);
        }
        let is_controller = |name: &str| controller_names.iter().any(|c| c == name);
        let protocols = protocols(values, &controller_names)?;
        if let Some(listener) = listeners.iter().find(|l| !protocols.contains_key(&l.name)) {
            let reason =
                format!("no security protocol for listener {} in listener.security.protocol.map", listener.name);
            return Err(ConfigError::invalid("listeners", listeners_text, reason));
        }

        let inter_broker = inter_broker_listener(values)?;
        if is_controller(&inter_broker) {
            let reason = "the inter-broker listener must not be a controller listener";
            return Err(ConfigError::invalid("inter.broker.listener.name", &inter_broker, reason));
        }
        let advertised = advertised_listeners(values, &listeners, &is_controller)?;
        if !advertised.iter().any(|l| l.name == inter_broker) {
            let choices: Vec<&str> =
                advertised.iter().filter(|l| !is_controller(&l.name)).map(|l| l.name.as_str()).collect();
            let reason = format!("it must name an advertised listener; the choices are {}", choices.join(", "));
            return Err(ConfigError::invalid("inter.broker.listener.name", &inter_broker, reason));
        }
        // Kafka advertises a controller listener from `listeners` when
        // advertised.listeners leaves it out, so 0.0.0.0 is refused there too.
        let unroutable = listeners
            .iter()
            .find(|l| is_controller(&l.name) && l.host == "0.0.0.0" && !advertised.iter().any(|a| a.name == l.name));
        if let Some(l) = unroutable {
            let reason =
                format!("controller listener {} would be advertised as 0.0.0.0; set advertised.listeners", l.name);
            return Err(ConfigError::invalid("listeners", listeners_text, reason));
        }
        Ok(Listeners { listeners, advertised, controller_names, inter_broker, protocols })
    }
}

/// A controller-only node's listeners: its controller listeners alone, as
/// Kafka requires (it serves no clients).
fn controller_only(
    values: &KeyValues,
    listeners: Vec<Listener>,
    controller_names: Vec<String>,
) -> Result<Listeners, ConfigError> {
    let listeners_text = values.get("listeners").unwrap_or_default();
    if let Some(other) = listeners.iter().find(|l| !controller_names.contains(&l.name)) {
        let reason = format!(
            "a controller-only node (process.roles=controller) listens on its controller listeners only, not {}",
            other.name
        );
        return Err(ConfigError::invalid("listeners", listeners_text, reason));
    }
    let protocols = protocols(values, &controller_names)?;
    let advertised = advertised_listeners(values, &listeners, &|_| false)?;
    let inter_broker = inter_broker_listener(values)?;
    Ok(Listeners { listeners, advertised, controller_names, inter_broker, protocols })
}

/// `controller.listener.names`: required in KRaft; a combined node listens on
/// them, a broker-only node must not.
fn controller_names(
    values: &KeyValues,
    listeners: &[Listener],
    controller_role: bool,
) -> Result<Vec<String>, ConfigError> {
    let key = "controller.listener.names";
    let names: Vec<String> =
        split_list(values.get(key).unwrap_or_default()).iter().map(|n| n.to_ascii_uppercase()).collect();
    let text = names.join(",");
    if names.is_empty() {
        return Err(ConfigError::Missing(format!("{key} (KRaft needs the controller listener's name)")));
    }
    if names.iter().any(String::is_empty) {
        return Err(ConfigError::invalid(key, &text, "listener names must not be empty"));
    }
    if controller_role {
        if let Some(missing) = names.iter().find(|c| !listeners.iter().any(|l| &l.name == *c)) {
            let reason = format!("a broker+controller node must listen on its controller listener {missing}");
            return Err(ConfigError::invalid(key, &text, reason));
        }
    } else if let Some(l) = listeners.iter().find(|l| names.contains(&l.name)) {
        let reason = format!("a broker-only node must not listen on controller listener {}", l.name);
        return Err(ConfigError::invalid(key, &text, reason));
    }
    Ok(names)
}

/// The security protocol of each listener name. Without an explicit map Kafka
/// maps the controller listeners to PLAINTEXT; an explicit map must name them.
fn protocols(values: &KeyValues, controller_names: &[String]) -> Result<BTreeMap<String, String>, ConfigError> {
    let explicit = values.set("listener.security.protocol.map");
    let mut protocols = parse_protocol_map(explicit.unwrap_or(DEFAULT_PROTOCOL_MAP))?;
    for name in controller_names {
        if explicit.is_none() {
            protocols.entry(name.clone()).or_insert_with(|| "PLAINTEXT".into());
        } else if !protocols.contains_key(name) {
            let reason = format!("it must give a protocol for controller listener {name}");
            return Err(ConfigError::invalid("listener.security.protocol.map", explicit.unwrap_or_default(), reason));
        }
    }
    Ok(protocols)
}

/// `inter.broker.listener.name`, or the listener named after `security.inter.broker.protocol`.
fn inter_broker_listener(values: &KeyValues) -> Result<String, ConfigError> {
    match (values.set("inter.broker.listener.name"), values.set("security.inter.broker.protocol")) {
        (Some(name), Some(_)) => {
            let reason = "set inter.broker.listener.name or security.inter.broker.protocol, not both";
            Err(ConfigError::invalid("inter.broker.listener.name", name, reason))
        }
        (Some(name), None) => Ok(name.to_ascii_uppercase()),
        (None, protocol) => Ok(protocol.unwrap_or("PLAINTEXT").to_string()),
    }
}

/// `advertised.listeners`, defaulting to the non-controller listeners. An empty
/// host advertises `localhost` (Kafka advertises the machine's canonical name).
fn advertised_listeners(
    values: &KeyValues,
    listeners: &[Listener],
    is_controller: &dyn Fn(&str) -> bool,
) -> Result<Vec<Listener>, ConfigError> {
    let key = "advertised.listeners";
    let (mut advertised, text) = match values.set(key) {
        Some(text) => (parse_listeners(key, text, false)?, text.to_string()),
        None => {
            let text = values.get("listeners").unwrap_or_default().to_string();
            (listeners.iter().filter(|l| !is_controller(&l.name)).cloned().collect(), text)
        }
    };
    if let Some(stray) = advertised.iter().find(|a| !listeners.iter().any(|l| l.name == a.name)) {
        let reason = format!("listener {} is advertised but not in listeners", stray.name);
        return Err(ConfigError::invalid(key, &text, reason));
    }
    for listener in &mut advertised {
        if listener.host == "0.0.0.0" {
            let reason = "clients cannot connect to 0.0.0.0; advertise a routable host";
            return Err(ConfigError::invalid(key, &text, reason));
        }
        if listener.host.is_empty() {
            listener.host = "localhost".into();
        }
    }
    Ok(advertised)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(name: &str, host: &str, port: u16) -> Listener {
        Listener { name: name.into(), host: host.into(), port }
    }

    #[test]
    fn parses_kafka_listener_syntax() {
        assert_eq!(parse_listeners("listeners", "PLAINTEXT://:9092", true).unwrap(), [listener("PLAINTEXT", "", 9092)]);
        assert_eq!(
            parse_listeners("listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093", true).unwrap(),
            [listener("PLAINTEXT", "127.0.0.1", 0), listener("CONTROLLER", "127.0.0.1", 9093)]
        );
        assert_eq!(
            parse_listeners("listeners", "plaintext://[::1]:9092, ext://broker-1.example.com:19092", true).unwrap(),
            [listener("PLAINTEXT", "::1", 9092), listener("EXT", "broker-1.example.com", 19092)]
        );
        assert!(parse_listeners("listeners", "A://:0,B://:0", true).is_ok());
    }

    #[test]
    fn refuses_malformed_and_clashing_listeners() {
        for bad in ["garbage", "PLAINTEXT://:", "PLAINTEXT://host", "PLAINTEXT://:99999", "://:9092", "P://h:-1"] {
            let err = parse_listeners("listeners", bad, true).unwrap_err().to_string();
            assert!(err.contains("listeners"), "{bad}: {err}");
        }
        assert!(parse_listeners("listeners", "A://:9092,A://:9093", true).is_err());
        assert!(parse_listeners("listeners", "A://:9092,B://:9092", true).is_err());
        assert!(parse_listeners("advertised.listeners", "A://h1:9092,B://h2:9092", false).is_ok());
    }
}
