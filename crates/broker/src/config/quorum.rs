//! The KRaft quorum's settings, with Kafka's keys (`QuorumConfig`): the
//! static voters (`controller.quorum.voters`) and the raft timers.

use std::collections::BTreeMap;

use super::broker_keys::KeyValues;
use krabka_log::config_values::{split_list, ConfigError};

/// Where a voter listens: `controller.quorum.voters`' `host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterAddress {
    pub host: String,
    pub port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumConfig {
    /// `controller.quorum.voters`, by node id; empty when not given (a
    /// combined node that keeps its quorum to itself).
    pub voters: BTreeMap<i32, VoterAddress>,
    /// `controller.quorum.bootstrap.servers` (KIP-853): where a node of a
    /// dynamic quorum asks for the leader; its voters are in the log.
    pub bootstrap_servers: Vec<VoterAddress>,
    /// `controller.quorum.auto.join.enable`: a controller not among the
    /// voters asks the leader to add it.
    pub auto_join: bool,
    /// `controller.quorum.election.timeout.ms`.
    pub election_timeout_ms: i64,
    /// `controller.quorum.fetch.timeout.ms`.
    pub fetch_timeout_ms: i64,
    /// `controller.quorum.election.backoff.max.ms`.
    pub election_backoff_max_ms: i64,
    /// `controller.quorum.request.timeout.ms`.
    pub request_timeout_ms: i64,
    /// `controller.quorum.retry.backoff.ms`.
    pub retry_backoff_ms: i64,
    /// `controller.quorum.append.linger.ms`.
    pub append_linger_ms: i64,
    /// `controller.quorum.fetch.max.bytes`: the MaxBytes of this node's
    /// raft Fetch requests (the leader returns at least one batch).
    pub fetch_max_bytes: i64,
    /// `controller.quorum.fetch.snapshot.max.bytes`: the MaxBytes of its
    /// FetchSnapshot requests.
    pub fetch_snapshot_max_bytes: i64,
}

impl QuorumConfig {
    /// Whether node `node_id` shares its quorum with other voters (or, a
    /// broker-only node, observes one), rather than being its only voter.
    pub fn is_shared(&self, node_id: i32) -> bool {
        self.voters.keys().any(|&id| id != node_id) || !self.bootstrap_servers.is_empty()
    }

    /// Reads the quorum keys. As in Kafka, a controller must be one of the
    /// voters (when they are given) and a broker-only node must not be.
    pub(super) fn read(values: &KeyValues, node_id: i32, controller_role: bool) -> Result<QuorumConfig, ConfigError> {
        let voters = voters(values)?;
        let bootstrap_servers = bootstrap_servers(values)?;
        let key = "controller.quorum.voters";
        let text = values.get(key).unwrap_or_default();
        if controller_role && !voters.is_empty() && !voters.contains_key(&node_id) {
            return Err(ConfigError::invalid(
                key,
                text,
                format!("this controller (node.id {node_id}) must be one of the voters"),
            ));
        }
        if !controller_role && voters.contains_key(&node_id) {
            return Err(ConfigError::invalid(
                key,
                text,
                format!("a broker-only node (node.id {node_id}) must not be a voter"),
            ));
        }
        let int = |name| values.int(name);
        Ok(QuorumConfig {
            voters,
            bootstrap_servers,
            auto_join: values.boolean("controller.quorum.auto.join.enable"),
            election_timeout_ms: int("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms: int("controller.quorum.fetch.timeout.ms"),
            election_backoff_max_ms: int("controller.quorum.election.backoff.max.ms"),
            request_timeout_ms: int("controller.quorum.request.timeout.ms"),
            retry_backoff_ms: int("controller.quorum.retry.backoff.ms"),
            append_linger_ms: int("controller.quorum.append.linger.ms"),
            fetch_max_bytes: int("controller.quorum.fetch.max.bytes"),
            fetch_snapshot_max_bytes: int("controller.quorum.fetch.snapshot.max.bytes"),
        })
    }
}

/// `host:port,...` (`[v6]:port` for IPv6 hosts).
fn bootstrap_servers(values: &KeyValues) -> Result<Vec<VoterAddress>, ConfigError> {
    let key = "controller.quorum.bootstrap.servers";
    let text = values.get(key).unwrap_or_default();
    let mut servers = Vec::new();
    for entry in split_list(text) {
        let parsed = entry.rsplit_once(':').and_then(|(host, port)| {
            let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
            Some(VoterAddress { host: host.to_string(), port: port.parse().ok()? }).filter(|a| !a.host.is_empty())
        });
        servers.push(parsed.ok_or_else(|| ConfigError::invalid(key, text, format!("{entry:?} is not host:port")))?);
    }
    Ok(servers)
}

/// `id@host:port,...` (`[v6]:port` for IPv6 hosts). As in Kafka, an id given
/// twice keeps its last address, and 0.0.0.0 is refused (not routable).
fn voters(values: &KeyValues) -> Result<BTreeMap<i32, VoterAddress>, ConfigError> {
    let key = "controller.quorum.voters";
    let text = values.get(key).unwrap_or_default();
    let mut voters = BTreeMap::new();
    for entry in split_list(text) {
        let parsed = entry.split_once('@').and_then(|(id, address)| {
            let (host, port) = address.rsplit_once(':')?;
            let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
            let address = VoterAddress { host: host.to_string(), port: port.parse().ok()? };
            Some((id.parse::<i32>().ok()?, address))
        });
        let Some((id, address)) = parsed.filter(|(id, a)| *id >= 0 && !a.host.is_empty()) else {
            return Err(ConfigError::invalid(key, text, format!("{entry:?} is not id@host:port")));
        };
        if address.host == "0.0.0.0" {
            return Err(ConfigError::invalid(key, text, format!("voter {id}'s host 0.0.0.0 is not routable")));
        }
        voters.insert(id, address);
    }
    Ok(voters)
}
