//! The connection limits' values that take parsing:
//! `max.connections.per.ip.overrides`, from server.properties at start and
//! from a dynamic config whenever one sets it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use krabka_log::config_values::{split_list, ConfigError};

/// `max.connections.per.ip.overrides`: `host:count` pairs; a host name is
/// resolved once, at start, as Kafka resolves it.
pub fn per_ip_overrides(text: &str) -> Result<PerIpOverrides, ConfigError> {
    use std::net::ToSocketAddrs;
    let key = "max.connections.per.ip.overrides";
    let mut overrides = BTreeMap::new();
    for entry in split_list(text).into_iter().filter(|e| !e.is_empty()) {
        let parsed =
            entry.rsplit_once(':').and_then(|(host, count)| Some((host.trim(), count.trim().parse::<usize>().ok()?)));
        let Some((host, count)) = parsed.filter(|(host, _)| !host.is_empty()) else {
            return Err(ConfigError::invalid(key, text, format!("{entry:?} is not host:count")));
        };
        let address = host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .ok()
            .or_else(|| (host, 0).to_socket_addrs().ok()?.next().map(|a| a.ip()));
        let Some(address) = address else {
            return Err(ConfigError::invalid(key, text, format!("cannot resolve host {host}")));
        };
        overrides.insert(address, count);
    }
    Ok(overrides)
}

/// The overrides a dynamic config last set, parsed (host names resolved)
/// once per value rather than at every connection.
#[derive(Debug, Default)]
pub struct DynamicPerIpOverrides(Mutex<Option<(String, Arc<PerIpOverrides>)>>);

/// The connection limit of each address an override names.
pub type PerIpOverrides = BTreeMap<IpAddr, usize>;

impl DynamicPerIpOverrides {
    /// `text` parsed; None when it no longer parses (a host that stopped
    /// resolving: server.properties' overrides stay in force).
    pub fn parsed(&self, text: String) -> Option<Arc<PerIpOverrides>> {
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, parsed)) = cached.as_ref().filter(|(seen, _)| *seen == text) {
            return Some(parsed.clone());
        }
        let parsed = Arc::new(per_ip_overrides(&text).ok()?);
        *cached = Some((text, parsed.clone()));
        Some(parsed)
    }
}
