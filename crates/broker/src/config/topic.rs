//! Topic-level configuration: the effective `LogConfig` and DescribeConfigs
//! for TOPIC resources. Validating overrides is krabka-log's `topic_config`.
//!
//! A topic config's value comes from the topic's override if it has one, else
//! from the broker key it falls back on (server.properties), else from Kafka's
//! default; the table in `krabka_log::topic_config` holds the names and
//! fallbacks, `topic_keys` the server.properties side.

use std::collections::BTreeMap;

use krabka_log::{CleanupPolicy, LogConfig, TimestampPolicy};

use krabka_log::config_values::{int_or, split_list};
use krabka_log::topic_config::TOPIC_KEYS;
// Validation is the log crate's (one home, which the controller uses too).
pub use krabka_log::topic_config::{is_topic_config, validate_topic_config, validate_topic_configs};

use super::broker::BrokerConfig;
use super::describe::{broker_synonyms, ConfigEntry, ConfigSource};
use super::dynamic::DynamicConfigs;

/// `compression.type` of a topic: what the broker stores batches as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicCompression {
    /// Keep the producer's codec.
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Every topic config's effective value (canonical text) for a topic with
/// these overrides over the broker-level `defaults` (`BrokerConfig::
/// topic_defaults_under`). An override that does not parse is ignored:
/// overrides are validated when they are set, so that only happens to
/// hand-built maps.
pub fn effective_topic_configs(
    defaults: &BTreeMap<String, String>,
    overrides: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    TOPIC_KEYS
        .iter()
        .map(|key| {
            let from_override = overrides.get(key.name).and_then(|value| key.canonical(value).ok());
            let value =
                from_override.or_else(|| defaults.get(key.name).cloned()).unwrap_or_else(|| key.default.to_string());
            (key.name.to_string(), value)
        })
        .collect()
}

/// The `LogConfig` of a topic: overrides over the broker-level `defaults`
/// (dynamic configs, server.properties, Kafka's defaults); the broker's own
/// settings of its logs (the cleaner's buffer, producer expiry) from `broker`.
pub fn log_config(
    broker: &BrokerConfig,
    defaults: &BTreeMap<String, String>,
    overrides: &BTreeMap<String, String>,
) -> LogConfig {
    let configs = effective_topic_configs(defaults, overrides);
    let text = |name: &str| configs.get(name).map(String::as_str);
    let int = |name: &str, fallback: i64| int_or(text(name), fallback);
    let defaults = LogConfig::default();
    let policies = split_list(text("cleanup.policy").unwrap_or("delete"));
    let (compact, delete) = (policies.iter().any(|p| p == "compact"), policies.iter().any(|p| p == "delete"));
    let cleanup_policy = match (compact, delete) {
        (true, true) => CleanupPolicy::CompactDelete,
        (true, false) => CleanupPolicy::Compact,
        _ => CleanupPolicy::Delete,
    };
    // An empty cleanup.policy (allowed since Kafka 4) neither deletes nor
    // compacts: without tiered storage that means keeping everything.
    let keep_all = !compact && !delete;
    LogConfig {
        segment_bytes: int("segment.bytes", defaults.segment_bytes as i64) as u64,
        segment_ms: int("segment.ms", defaults.segment_ms),
        segment_index_bytes: int("segment.index.bytes", defaults.segment_index_bytes as i64) as usize,
        index_interval_bytes: int("index.interval.bytes", defaults.index_interval_bytes as i64) as u64,
        flush_messages: int("flush.messages", defaults.flush_messages),
        flush_ms: int("flush.ms", defaults.flush_ms),
        retention_ms: if keep_all { -1 } else { int("retention.ms", defaults.retention_ms) },
        retention_bytes: if keep_all { -1 } else { int("retention.bytes", defaults.retention_bytes) },
        max_message_bytes: int("max.message.bytes", defaults.max_message_bytes as i64) as u32,
        timestamp_policy: match text("message.timestamp.type") {
            Some("LogAppendTime") => TimestampPolicy::LogAppendTime,
            _ => TimestampPolicy::CreateTime,
        },
        timestamp_before_max_ms: int("message.timestamp.before.max.ms", defaults.timestamp_before_max_ms),
        timestamp_after_max_ms: int("message.timestamp.after.max.ms", defaults.timestamp_after_max_ms),
        max_decompressed_batch_bytes: defaults.max_decompressed_batch_bytes,
        cleanup_policy,
        delete_retention_ms: int("delete.retention.ms", defaults.delete_retention_ms),
        min_cleanable_dirty_ratio: text("min.cleanable.dirty.ratio")
            .and_then(|r| r.parse().ok())
            .unwrap_or(defaults.min_cleanable_dirty_ratio),
        min_compaction_lag_ms: int("min.compaction.lag.ms", defaults.min_compaction_lag_ms),
        // Kafka caps one cleaner's map at 2 GiB.
        cleaner_dedupe_buffer_bytes: broker.log_cleaner_dedupe_buffer_size.clamp(0, i64::from(i32::MAX)) as u64,
        producer_id_expiration_ms: broker.producer_id_expiration_ms,
    }
}

impl TopicCompression {
    /// The codec the topic forces on producers' batches; None for `producer`
    /// (keep what came).
    pub fn forced_codec(self) -> Option<krabka_protocol::compression::Compression> {
        use krabka_protocol::compression::Compression;
        match self {
            TopicCompression::Producer => None,
            TopicCompression::Uncompressed => Some(Compression::None),
            TopicCompression::Gzip => Some(Compression::Gzip),
            TopicCompression::Snappy => Some(Compression::Snappy),
            TopicCompression::Lz4 => Some(Compression::Lz4),
            TopicCompression::Zstd => Some(Compression::Zstd),
        }
    }
}

/// The effective `compression.type` of a topic.
pub fn topic_compression(
    defaults: &BTreeMap<String, String>,
    overrides: &BTreeMap<String, String>,
) -> TopicCompression {
    match effective_topic_configs(defaults, overrides).get("compression.type").map(String::as_str) {
        Some("uncompressed") => TopicCompression::Uncompressed,
        Some("gzip") => TopicCompression::Gzip,
        Some("snappy") => TopicCompression::Snappy,
        Some("lz4") => TopicCompression::Lz4,
        Some("zstd") => TopicCompression::Zstd,
        _ => TopicCompression::Producer,
    }
}

/// DescribeConfigs for a TOPIC resource: every topic config, sorted by name,
/// with Kafka's synonyms (the override, then the broker keys set as dynamic
/// configs and in server.properties, then their defaults).
pub fn describe_topic(
    broker: &BrokerConfig,
    dynamic: &DynamicConfigs,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let configs = effective_topic_configs(&broker.topic_defaults_under(dynamic), overrides);
    let layers = dynamic.layers(&broker.raw);
    TOPIC_KEYS
        .iter()
        .map(|key| {
            let value = configs.get(key.name).cloned();
            let mut synonyms = Vec::new();
            if overrides.contains_key(key.name) {
                synonyms.push((key.name.to_string(), value.clone(), ConfigSource::DynamicTopic));
            }
            if let Some((broker_key, _)) = key.broker.first() {
                synonyms.extend(broker_synonyms(broker_key, &layers, false));
            }
            ConfigEntry {
                name: key.name.to_string(),
                value,
                source: synonyms.first().map_or(ConfigSource::Default, |s| s.2),
                read_only: false,
                sensitive: false,
                config_type: key.ty,
                synonyms,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
