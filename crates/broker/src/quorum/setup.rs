//! A quorum member's setup from the broker's config: Kafka's
//! `controller.quorum.*` keys, the controller listener's name, and the
//! metadata log directory with its id from `meta.properties`.

use std::time::Duration;

use krabka_protocol::Uuid;
use krabka_raft::wire::{Endpoint, WireContext};
use krabka_raft::{Listener, Membership, RaftConfig};

use std::path::PathBuf;

use krabka_log::LogConfig;

use super::driver::QuorumSetup;
use crate::config::BrokerConfig;

/// How long the leader holds a fetch with nothing to return: Kafka's raft
/// client's fixed 500 ms.
const FETCH_MAX_WAIT_MS: i64 = 500;

impl QuorumSetup {
    /// The member (or observer, when `config` is a broker-only node) of the
    /// quorum `controller.quorum.voters` names, in cluster `cluster_id`, its
    /// metadata log in `log_dir` (with `log_config`), whose directory has id
    /// `directory_id`.
    pub fn from_config(
        config: &BrokerConfig,
        cluster_id: &str,
        directory_id: Uuid,
        log_dir: PathBuf,
        log_config: LogConfig,
    ) -> QuorumSetup {
        let quorum = &config.quorum;
        let mut voters: std::collections::BTreeMap<i32, Endpoint> = quorum
            .voters
            .iter()
            .map(|(&id, address)| (id, Endpoint { host: address.host.clone(), port: address.port }))
            .collect();
        let listeners = controller_listeners(config);
        let listener = config.controller_listener_names.first().cloned().unwrap_or_default();
        // A dynamic quorum's node knows its own endpoint from its listeners
        // (the others' come from the voter set in its log).
        if let Some(own) = listeners.iter().find(|l| l.name == listener) {
            voters.entry(config.node_id).or_insert(Endpoint { host: own.host.clone(), port: own.port });
        }
        // The bootstrap servers, by the ids Kafka's raft client gives them
        // (-2, -3, ...: never a node's).
        let bootstrap: Vec<(i32, Endpoint)> = quorum
            .bootstrap_servers
            .iter()
            .enumerate()
            .map(|(i, a)| (-2 - i as i32, Endpoint { host: a.host.clone(), port: a.port }))
            .collect();
        voters.extend(bootstrap.iter().cloned());
        QuorumSetup {
            context: WireContext {
                cluster_id: cluster_id.to_string(),
                node_id: config.node_id,
                directory_id,
                listener,
                voters: voters.clone(),
            },
            raft: RaftConfig {
                node_id: config.node_id,
                voters: quorum.voters.keys().copied().collect(),
                membership: Membership {
                    directory_id,
                    listeners: if config.is_controller() { listeners } else { Vec::new() },
                    bootstrap: bootstrap.iter().map(|(id, _)| *id).collect(),
                    auto_join: config.is_controller() && quorum.auto_join,
                },
                election_timeout_ms: quorum.election_timeout_ms,
                fetch_timeout_ms: quorum.fetch_timeout_ms,
                fetch_max_wait_ms: FETCH_MAX_WAIT_MS,
                retry_backoff_ms: quorum.retry_backoff_ms,
                request_timeout_ms: quorum.request_timeout_ms,
                max_fetch_bytes: quorum.fetch_max_bytes.clamp(1, i64::from(i32::MAX)) as u32,
                fetch_snapshot_max_bytes: quorum.fetch_snapshot_max_bytes.clamp(1, i64::from(i32::MAX)) as i32,
                retention_max_bytes: raw_long(config, "metadata.max.retention.bytes", 100 * 1024 * 1024),
                retention_ms: raw_long(config, "metadata.max.retention.ms", 7 * 24 * 60 * 60 * 1000),
                seed: u64::from(config.node_id.unsigned_abs()) ^ crate::clock::now_ms() as u64,
            },
            log_dir,
            log_config,
            request_timeout: Duration::from_millis(quorum.request_timeout_ms.max(1) as u64),
            snapshot_every_bytes: raw_long(config, "metadata.log.max.record.bytes.between.snapshots", 20 * 1024 * 1024)
                .max(1) as u64,
            snapshot_interval_ms: raw_long(config, "metadata.log.max.snapshot.interval.ms", 60 * 60 * 1000),
            controller_client: std::sync::Arc::clone(&config.security.controller_client),
        }
    }
}

/// A long key of the config (validated when the config was read), or its
/// default.
fn raw_long(config: &BrokerConfig, key: &str, default: i64) -> i64 {
    config.raw.get(key).and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// This node's controller listeners, as a dynamic quorum records them:
/// each of `controller.listener.names` with its advertised address (from
/// `advertised.listeners` when listed there, else `listeners`).
fn controller_listeners(config: &BrokerConfig) -> Vec<Listener> {
    config
        .controller_listener_names
        .iter()
        .filter_map(|name| {
            let advertised = config.advertised_listeners.iter().find(|l| &l.name == name);
            let listener = advertised.or_else(|| config.listeners.iter().find(|l| &l.name == name))?;
            Some(Listener { name: name.clone(), host: listener.host.clone(), port: listener.port })
        })
        .collect()
}
