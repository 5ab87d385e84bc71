//! `server.properties`: the broker's static configuration, KRaft mode only.
//!
//! Keys, types, defaults and validation follow Kafka 4.3 so an existing file
//! loads unchanged; a value Kafka would refuse is refused here too, before the
//! broker binds anything. Unknown keys are only warned about, as Kafka does.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::broker_keys::{broker_key, KeyValues, BROKER_KEYS};
use super::describe::{broker_synonyms, ConfigEntry, ConfigSource};
use super::dynamic::{dynamic_entry, DynamicConfigs};
use super::listeners::{Listener, Listeners};
use super::quorum::QuorumConfig;
use super::security::SecurityConfig;
use super::topic_keys::broker_topic_defaults;
use krabka_controller::features::ControllerDefaults;
use krabka_log::config_values::split_list;
use krabka_log::config_values::ConfigError;

/// The transaction coordinator's keys, as Kafka 4.3.1 names them.
#[derive(Clone, Debug)]
pub struct TransactionConfig {
    pub state_log_num_partitions: i32,
    pub state_log_replication_factor: i16,
    pub state_log_min_isr: i32,
    pub state_log_segment_bytes: i64,
    pub max_timeout_ms: i32,
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_check_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expiry_check_interval_ms: i64,
    /// How long a partition leader keeps asking a coordinator busy ending
    /// the last transaction to add a partition to the next (transactions
    /// v2): `add.partitions.to.txn.retry.backoff.max.ms`, at most
    /// `request.timeout.ms`, every `add.partitions.to.txn.retry.backoff.ms`.
    pub add_partitions_retry_max_ms: i64,
    pub add_partitions_retry_backoff_ms: i64,
}

#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub process_roles: Vec<String>,
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    pub controller_listener_names: Vec<String>,
    pub inter_broker_listener_name: String,
    /// The KRaft quorum: static voters and raft timers.
    pub quorum: QuorumConfig,
    pub log_dirs: Vec<PathBuf>,
    pub metadata_log_dir: PathBuf,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub message_max_bytes: u32,
    pub socket_request_max_bytes: u32,
    pub num_network_threads: usize,
    /// `socket.listen.backlog.size`: connections the kernel queues before accept.
    pub socket_listen_backlog_size: u32,
    /// `max.incremental.fetch.session.cache.slots`: KIP-227 sessions kept (0: none).
    pub max_incremental_fetch_session_cache_slots: usize,
    /// `num.recovery.threads.per.data.dir`: threads opening (and recovering) logs at start.
    pub num_recovery_threads_per_data_dir: usize,
    pub num_io_threads: usize,
    pub connections_max_idle_ms: i64,
    pub max_connections: usize,
    /// `max.connections.per.ip` and its `max.connections.per.ip.overrides`.
    pub max_connections_per_ip: usize,
    pub max_connections_per_ip_overrides: BTreeMap<std::net::IpAddr, usize>,
    /// `max.connection.creation.rate` for the broker (None: Kafka's default, unbounded).
    pub max_connection_creation_rate: Option<u32>,
    pub queued_max_requests: usize,
    pub log_retention_check_interval_ms: i64,
    pub log_flush_scheduler_interval_ms: i64,
    pub log_cleaner_enable: bool,
    pub log_cleaner_backoff_ms: i64,
    /// `log.cleaner.dedupe.buffer.size`: the cleaner's offset map budget (one
    /// cleaner runs at a time here, so it gets all of it).
    pub log_cleaner_dedupe_buffer_size: i64,
    /// `producer.id.expiration.ms` and how often to check it.
    pub producer_id_expiration_ms: i64,
    pub producer_id_expiration_check_interval_ms: i64,
    pub group_initial_rebalance_delay_ms: i64,
    pub offsets_topic_num_partitions: i32,
    /// `request.timeout.ms`: how long a forwarded request may take.
    pub request_timeout_ms: i64,
    /// `offsets.topic.replication.factor`: what a broker asks another
    /// node's controller for when it creates `__consumer_offsets`.
    pub offsets_topic_replication_factor: i16,
    /// The transaction coordinator's keys (`transaction.*`).
    pub transactions: TransactionConfig,
    /// `krabka.metrics.listener` host:port of the HTTP endpoint (/metrics, /debug/pprof); None disables it.
    pub metrics_listener: Option<String>,
    /// `krabka.log.format`: `text` or `json`.
    pub log_format_json: bool,
    /// `krabka.log.level`: a tracing EnvFilter directive.
    pub log_level: String,
    /// Every key as given (after overrides), for DescribeConfigs.
    pub raw: BTreeMap<String, String>,
    /// `listener.security.protocol.map` as in effect: listener name to protocol.
    pub listener_security_protocols: BTreeMap<String, String>,
    /// How each client listener authenticates, and the SASL limits.
    pub security: SecurityConfig,
    /// The broker-level default of every topic config (by topic config name,
    /// canonical text), from server.properties or Kafka's defaults.
    pub topic_defaults: BTreeMap<String, String>,
}

impl BrokerConfig {
    /// Builds the config from server.properties entries (overrides applied).
    /// Returns it with one warning per unknown key.
    pub fn from_properties(props: BTreeMap<String, String>) -> Result<(BrokerConfig, Vec<String>), ConfigError> {
        let (values, warnings) = KeyValues::read(&props)?;
        let node_id = values.set("node.id").ok_or_else(|| ConfigError::Missing("node.id".into()))?;
        let node_id: i32 = node_id.parse().map_err(|_| ConfigError::invalid("node.id", node_id, "not an INT"))?;
        if let Some(broker_id) = values.set("broker.id").filter(|id| *id != "-1") {
            if broker_id != node_id.to_string() {
                return Err(ConfigError::invalid(
                    "broker.id",
                    broker_id,
                    format!("it must equal node.id ({node_id}) when both are set"),
                ));
            }
        }
        let process_roles = process_roles(&values)?;
        let controller_role = process_roles.iter().any(|r| r == "controller");
        let broker_role = process_roles.iter().any(|r| r == "broker");
        let quorum = QuorumConfig::read(&values, node_id, controller_role)?;
        let layout = Listeners::resolve(&values, controller_role, broker_role)?;
        let listener_names =
            (layout.listeners.as_slice(), layout.controller_names.as_slice(), layout.inter_broker.as_str());
        let security = SecurityConfig::read(&values, &props, listener_names, &layout.protocols)?;

        // log.dirs wins over log.dir; both are validated non-empty lists.
        let dirs = values.set("log.dirs").or(values.get("log.dir")).unwrap_or_default();
        let log_dirs: Vec<PathBuf> = split_list(dirs).into_iter().map(PathBuf::from).collect();
        let metadata_log_dir = values.set("metadata.log.dir").map(PathBuf::from).unwrap_or_else(|| log_dirs[0].clone());

        if values.boolean("remote.log.storage.system.enable") {
            return Err(ConfigError::invalid(
                "remote.log.storage.system.enable",
                "true",
                "krabka has no tiered storage",
            ));
        }
        if values.boolean("unstable.api.versions.enable") {
            // Kafka would then serve the versions it marks unstable
            // (InitProducerId v6 with KIP-939's flags among them); krabka
            // serves Kafka 4.3.1's stable versions only.
            let why = "krabka serves only the API versions Kafka 4.3.1 marks stable";
            return Err(ConfigError::invalid("unstable.api.versions.enable", "true", why));
        }
        let metrics_listener = metrics_listener(values.set("krabka.metrics.listener"))?;
        let log_level = values.get("krabka.log.level").unwrap_or("info").to_string();
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&log_level) {
            return Err(ConfigError::invalid("krabka.log.level", &log_level, format!("not a tracing filter: {e}")));
        }
        let topic_defaults = broker_topic_defaults(&values)?;
        let per_ip_overrides = super::connection_limits::per_ip_overrides(
            values.get("max.connections.per.ip.overrides").unwrap_or_default(),
        )?;
        if values.int("max.connections.per.ip") == 0 && per_ip_overrides.is_empty() {
            let reason = "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides is set";
            return Err(ConfigError::invalid("max.connections.per.ip", "0", reason));
        }

        let int = |name| values.int(name);
        let config = BrokerConfig {
            node_id,
            process_roles,
            listeners: layout.listeners,
            advertised_listeners: layout.advertised,
            controller_listener_names: layout.controller_names,
            inter_broker_listener_name: layout.inter_broker,
            quorum,
            log_dirs,
            metadata_log_dir,
            // The key table's ranges make each of these conversions lossless.
            num_partitions: int("num.partitions") as i32,
            default_replication_factor: int("default.replication.factor") as i16,
            auto_create_topics_enable: values.boolean("auto.create.topics.enable"),
            delete_topic_enable: values.boolean("delete.topic.enable"),
            message_max_bytes: int("message.max.bytes") as u32,
            socket_request_max_bytes: int("socket.request.max.bytes") as u32,
            num_network_threads: int("num.network.threads") as usize,
            socket_listen_backlog_size: int("socket.listen.backlog.size").min(i64::from(u32::MAX)) as u32,
            num_recovery_threads_per_data_dir: int("num.recovery.threads.per.data.dir") as usize,
            max_incremental_fetch_session_cache_slots: int("max.incremental.fetch.session.cache.slots").max(0) as usize,
            num_io_threads: int("num.io.threads") as usize,
            connections_max_idle_ms: int("connections.max.idle.ms"),
            max_connections: int("max.connections") as usize,
            max_connections_per_ip: int("max.connections.per.ip") as usize,
            max_connections_per_ip_overrides: per_ip_overrides,
            max_connection_creation_rate: Some(int("max.connection.creation.rate"))
                .filter(|&rate| rate < i64::from(i32::MAX))
                .map(|rate| rate as u32),
            queued_max_requests: int("queued.max.requests") as usize,
            log_retention_check_interval_ms: int("log.retention.check.interval.ms"),
            log_flush_scheduler_interval_ms: int("log.flush.scheduler.interval.ms"),
            log_cleaner_enable: values.boolean("log.cleaner.enable"),
            log_cleaner_backoff_ms: int("log.cleaner.backoff.ms"),
            log_cleaner_dedupe_buffer_size: int("log.cleaner.dedupe.buffer.size"),
            producer_id_expiration_ms: int("producer.id.expiration.ms"),
            producer_id_expiration_check_interval_ms: int("producer.id.expiration.check.interval.ms"),
            group_initial_rebalance_delay_ms: int("group.initial.rebalance.delay.ms"),
            offsets_topic_num_partitions: int("offsets.topic.num.partitions") as i32,
            request_timeout_ms: int("request.timeout.ms"),
            offsets_topic_replication_factor: int("offsets.topic.replication.factor") as i16,
            transactions: TransactionConfig {
                state_log_num_partitions: int("transaction.state.log.num.partitions") as i32,
                state_log_replication_factor: int("transaction.state.log.replication.factor") as i16,
                state_log_min_isr: int("transaction.state.log.min.isr") as i32,
                state_log_segment_bytes: int("transaction.state.log.segment.bytes"),
                max_timeout_ms: int("transaction.max.timeout.ms") as i32,
                id_expiration_ms: int("transactional.id.expiration.ms"),
                abort_check_interval_ms: int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                expiry_check_interval_ms: int("transaction.remove.expired.transaction.cleanup.interval.ms"),
                add_partitions_retry_max_ms: int("add.partitions.to.txn.retry.backoff.max.ms")
                    .min(int("request.timeout.ms")),
                add_partitions_retry_backoff_ms: int("add.partitions.to.txn.retry.backoff.ms"),
            },
            metrics_listener,
            log_format_json: values.get("krabka.log.format") == Some("json"),
            log_level,
            raw: props,
            listener_security_protocols: layout.protocols,
            security,
            topic_defaults,
        };
        Ok((config, warnings))
    }

    /// Whether the node has the broker role (a controller-only node serves
    /// no clients and hosts no partitions).
    pub fn is_broker(&self) -> bool {
        self.process_roles.iter().any(|r| r == "broker")
    }

    /// What this node's static config gives a controller bootstrapping a
    /// new metadata log (or enabling ELR): `min.insync.replicas`.
    pub fn controller_defaults(&self) -> ControllerDefaults {
        let min_insync_replicas =
            self.topic_defaults.get("min.insync.replicas").and_then(|v| v.trim().parse().ok()).unwrap_or(1);
        ControllerDefaults { min_insync_replicas }
    }

    /// Whether the node has the controller role.
    pub fn is_controller(&self) -> bool {
        self.process_roles.iter().any(|r| r == "controller")
    }

    /// A numeric key as set (validated at load), else `default`.
    pub fn number(&self, key: &str, default: i64) -> i64 {
        self.raw.get(key).and_then(|v| v.trim().parse().ok()).unwrap_or(default)
    }

    /// The listener clients are told about: the first advertised listener that
    /// is not a controller listener (validation guarantees there is one on a
    /// node with the broker role; a controller-only node must not ask).
    pub fn advertised_listener(&self) -> &Listener {
        let is_controller = |l: &&Listener| self.controller_listener_names.contains(&l.name);
        self.advertised_listeners
            .iter()
            .find(|l| !is_controller(l))
            .expect("validated configs advertise at least one broker listener")
    }

    /// The broker's configs for DescribeConfigs on its BROKER resource: every
    /// known key, sorted by name, read-only unless Kafka can change it at
    /// runtime, with the dynamic configs applied, and the keys set only
    /// dynamically (replication throttles, custom keys) as Kafka lists them.
    pub fn describe(&self, dynamic: &DynamicConfigs) -> Vec<ConfigEntry> {
        let values = self.values_under(dynamic);
        let layers = dynamic.layers(&self.raw);
        let mut keys: Vec<_> = BROKER_KEYS.iter().collect();
        keys.sort_by_key(|key| key.name);
        let known = keys.into_iter().map(|key| {
            let sensitive = key.sensitive();
            let synonyms = broker_synonyms(key.name, &layers, sensitive);
            ConfigEntry {
                name: key.name.to_string(),
                value: if sensitive { None } else { values.get(key.name).map(str::to_string) },
                source: synonyms.first().map_or(ConfigSource::Default, |s| s.2),
                read_only: !key.dynamic,
                sensitive,
                config_type: key.ty,
                synonyms,
            }
        });
        let custom =
            [(dynamic.own, ConfigSource::DynamicBroker), (dynamic.cluster, ConfigSource::DynamicDefaultBroker)]
                .into_iter()
                .flat_map(|(keys, source)| keys.iter().map(move |(name, value)| (name, value, source)))
                .filter(|(name, _, _)| broker_key(name).is_none());
        let mut custom: Vec<ConfigEntry> =
            custom.map(|(name, value, source)| dynamic_entry(name, value, source)).collect();
        // A broker's own value of a key shadows the cluster's (a stable sort).
        custom.sort_by(|a, b| a.name.cmp(&b.name));
        custom.dedup_by(|later, first| later.name == first.name);
        let mut entries: Vec<ConfigEntry> = known.chain(custom).collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
    }

    /// Whether `name` is a broker key krabka knows (and so describes).
    pub fn is_known_key(name: &str) -> bool {
        broker_key(name).is_some()
    }
}

fn process_roles(values: &KeyValues) -> Result<Vec<String>, ConfigError> {
    let Some(roles) = values.set("process.roles") else {
        return Err(ConfigError::Missing(
            "process.roles (krabka runs in KRaft mode: broker, controller or broker,controller)".into(),
        ));
    };
    let roles = split_list(roles);
    if roles.is_empty() {
        return Err(ConfigError::invalid("process.roles", "", "it must name broker, controller or both"));
    }
    Ok(roles)
}

/// `krabka.metrics.listener`: `host:port` (`[v6]:port` for IPv6); empty disables it.
fn metrics_listener(value: Option<&str>) -> Result<Option<String>, ConfigError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else { return Ok(None) };
    let port = value.rsplit_once(':').map(|(_, port)| port);
    if port.and_then(|p| p.parse::<u16>().ok()).is_none() {
        return Err(ConfigError::invalid("krabka.metrics.listener", value, "expected host:port, e.g. 127.0.0.1:9404"));
    }
    Ok(Some(value.to_string()))
}

#[cfg(test)]
mod tests;
