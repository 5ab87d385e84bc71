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
