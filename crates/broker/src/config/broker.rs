//! `server.properties`: the broker's static configuration (placeholder, being filled in).

use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value {value:?} for configuration {key}: {reason}")]
    Invalid { key: String, value: String, reason: String },
    #[error("missing required configuration {0}")]
    Missing(String),
}

/// One `listeners` entry: `NAME://host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub process_roles: Vec<String>,
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    pub controller_listener_names: Vec<String>,
    pub inter_broker_listener_name: String,
    pub log_dirs: Vec<PathBuf>,
    pub metadata_log_dir: PathBuf,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub message_max_bytes: u32,
    pub socket_request_max_bytes: u32,
    pub num_network_threads: usize,
    pub num_io_threads: usize,
    pub connections_max_idle_ms: i64,
    pub max_connections: usize,
    pub queued_max_requests: usize,
    pub log_retention_check_interval_ms: i64,
    pub log_flush_scheduler_interval_ms: i64,
    pub log_cleaner_enable: bool,
    pub log_cleaner_backoff_ms: i64,
    pub group_initial_rebalance_delay_ms: i64,
    pub offsets_topic_num_partitions: i32,
    /// `krabka.metrics.listener` host:port of the HTTP endpoint (/metrics, /debug/pprof); None disables it.
    pub metrics_listener: Option<String>,
    /// `krabka.log.format`: `text` or `json`.
    pub log_format_json: bool,
    /// `krabka.log.level`: a tracing EnvFilter directive.
    pub log_level: String,
    /// Every key as given (after overrides), for DescribeConfigs.
    pub raw: BTreeMap<String, String>,
}

// Temporary minimal parsing; replaced by the full config module.
impl BrokerConfig {
    pub fn from_properties(props: BTreeMap<String, String>) -> Result<(BrokerConfig, Vec<String>), ConfigError> {
        fn get<T: std::str::FromStr>(p: &BTreeMap<String, String>, k: &str, d: T) -> Result<T, ConfigError> {
            match p.get(k) {
                None => Ok(d),
                Some(v) => v.trim().parse().map_err(|_| ConfigError::Invalid {
                    key: k.into(),
                    value: v.clone(),
                    reason: "not a number".into(),
                }),
            }
        }
        let listeners = parse_listeners(props.get("listeners").map(String::as_str).unwrap_or("PLAINTEXT://:9092"))?;
        let controller: Vec<String> = props
            .get("controller.listener.names")
            .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default();
        let advertised = match props.get("advertised.listeners") {
            Some(v) => parse_listeners(v)?,
            None => listeners.iter().filter(|l| !controller.contains(&l.name)).cloned().collect(),
        };
        let log_dirs: Vec<PathBuf> = props
            .get("log.dirs")
            .or_else(|| props.get("log.dir"))
            .map(String::as_str)
            .unwrap_or("/tmp/kafka-logs")
            .split(',')
            .map(|s| PathBuf::from(s.trim()))
            .collect();
        let config = BrokerConfig {
            node_id: get(&props, "node.id", -1)?,
            process_roles: vec!["broker".into(), "controller".into()],
            listeners,
            advertised_listeners: advertised,
            controller_listener_names: controller,
            inter_broker_listener_name: "PLAINTEXT".into(),
            metadata_log_dir: props.get("metadata.log.dir").map(PathBuf::from).unwrap_or_else(|| log_dirs[0].clone()),
            log_dirs,
            num_partitions: get(&props, "num.partitions", 1)?,
            default_replication_factor: get(&props, "default.replication.factor", 1)?,
            auto_create_topics_enable: get(&props, "auto.create.topics.enable", true)?,
            delete_topic_enable: get(&props, "delete.topic.enable", true)?,
            message_max_bytes: get(&props, "message.max.bytes", 1048588)?,
            socket_request_max_bytes: get(&props, "socket.request.max.bytes", 104857600)?,
            num_network_threads: get(&props, "num.network.threads", 3)?,
            num_io_threads: get(&props, "num.io.threads", 8)?,
            connections_max_idle_ms: get(&props, "connections.max.idle.ms", 600000)?,
            max_connections: get(&props, "max.connections", i32::MAX as usize)?,
            queued_max_requests: get(&props, "queued.max.requests", 500)?,
            log_retention_check_interval_ms: get(&props, "log.retention.check.interval.ms", 300000)?,
            log_flush_scheduler_interval_ms: get(&props, "log.flush.scheduler.interval.ms", i64::MAX)?,
            log_cleaner_enable: get(&props, "log.cleaner.enable", true)?,
            log_cleaner_backoff_ms: get(&props, "log.cleaner.backoff.ms", 15000)?,
            group_initial_rebalance_delay_ms: get(&props, "group.initial.rebalance.delay.ms", 3000)?,
            offsets_topic_num_partitions: get(&props, "offsets.topic.num.partitions", 50)?,
            metrics_listener: props.get("krabka.metrics.listener").cloned(),
            log_format_json: props.get("krabka.log.format").is_some_and(|v| v == "json"),
            log_level: props.get("krabka.log.level").cloned().unwrap_or_else(|| "info".into()),
            raw: props,
        };
        Ok((config, Vec::new()))
    }

    pub fn advertised_listener(&self) -> &Listener {
        &self.advertised_listeners[0]
    }

    pub fn describe(&self) -> Vec<super::ConfigEntry> {
        Vec::new()
    }
}

fn parse_listeners(text: &str) -> Result<Vec<Listener>, ConfigError> {
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad =
            || ConfigError::Invalid { key: "listeners".into(), value: text.into(), reason: "bad listener".into() };
        let (name, address) = entry.split_once("://").ok_or_else(bad)?;
        let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
        out.push(Listener { name: name.into(), host: host.into(), port: port.parse().map_err(|_| bad())? });
    }
    Ok(out)
}
