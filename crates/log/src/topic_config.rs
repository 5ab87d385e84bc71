//! Kafka 4.3.1's topic configs: their names, types, defaults and the broker
//! keys each one falls back on, and the validation CreateTopics and
//! AlterConfigs apply to a topic's overrides.
//!
//! They live here, beside `LogConfig`, because a topic config is a setting
//! of the topic's partition logs: Kafka defines and validates them in its
//! storage module's `LogConfig` (the controller calls `LogConfig.validate`),
//! so the controller validates through this crate without the broker, and
//! the broker's config module derives each topic's `LogConfig` and answers
//! DescribeConfigs from this one table.

use std::collections::BTreeMap;

use crate::config_values::{canonical, int_or, Check, ConfigError, ConfigType};

const HOUR_MS: i64 = 3_600_000;
const MINUTE_MS: i64 = 60_000;
const LONG_MAX: &str = "9223372036854775807";

/// `compression.type`'s values (a topic's, and the broker's default).
pub const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
/// `cleanup.policy`'s entries.
/// The topic config (and broker key) that acks=all needs in the ISR, which
/// the controller reads too (elections, ELR).
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

pub const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];
/// `message.timestamp.type`'s values.
pub const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
/// zstd's level range as the JNI library reports it (-(1 << 17) ..= 22).
pub const ZSTD_LEVELS: Check = Check::Between(-131072, 22);

pub struct TopicKey {
    pub name: &'static str,
    pub ty: ConfigType,
    /// Kafka's default when neither the topic nor server.properties sets it.
    pub default: &'static str,
    pub check: Check,
    /// The broker keys that supply the default, highest precedence first, each
    /// with the factor that converts it to this config's unit (hours to ms...).
    pub broker: &'static [(&'static str, i64)],
}

const fn key(
    name: &'static str,
    ty: ConfigType,
    default: &'static str,
    check: Check,
    broker: &'static [(&'static str, i64)],
) -> TopicKey {
    TopicKey { name, ty, default, check, broker }
}

use Check::{Any, AtLeast, Between};
use ConfigType::{Boolean, Double, Int, List, Long};

/// Sorted by name, as DescribeConfigs lists them.
#[rustfmt::skip]
pub static TOPIC_KEYS: &[TopicKey] = &[
    key("cleanup.policy", List, "delete", Check::ListOf(CLEANUP_POLICIES), &[("log.cleanup.policy", 1)]),
    key("compression.gzip.level", Int, "-1", Check::GzipLevel, &[("compression.gzip.level", 1)]),
    key("compression.lz4.level", Int, "9", Between(1, 17), &[("compression.lz4.level", 1)]),
    key("compression.type", ConfigType::String, "producer", Check::OneOf(COMPRESSION_TYPES), &[("compression.type", 1)]),
    key("compression.zstd.level", Int, "3", ZSTD_LEVELS, &[("compression.zstd.level", 1)]),
    key("delete.retention.ms", Long, "86400000", AtLeast(0), &[("log.cleaner.delete.retention.ms", 1)]),
    key("file.delete.delay.ms", Long, "60000", AtLeast(0), &[("log.segment.delete.delay.ms", 1)]),
    key("flush.messages", Long, LONG_MAX, AtLeast(1), &[("log.flush.interval.messages", 1)]),
    key("flush.ms", Long, LONG_MAX, AtLeast(0), &[("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)]),
    key("follower.replication.throttled.replicas", List, "", Check::ThrottledReplicas, &[]),
    key("index.interval.bytes", Int, "4096", AtLeast(0), &[("log.index.interval.bytes", 1)]),
    key("leader.replication.throttled.replicas", List, "", Check::ThrottledReplicas, &[]),
    key("local.retention.bytes", Long, "-2", AtLeast(-2), &[("log.local.retention.bytes", 1)]),
    key("local.retention.ms", Long, "-2", AtLeast(-2), &[("log.local.retention.ms", 1)]),
    key("max.compaction.lag.ms", Long, LONG_MAX, AtLeast(1), &[("log.cleaner.max.compaction.lag.ms", 1)]),
    key("max.message.bytes", Int, "1048588", AtLeast(0), &[("message.max.bytes", 1)]),
    key("message.timestamp.after.max.ms", Long, "3600000", AtLeast(0), &[("log.message.timestamp.after.max.ms", 1)]),
    key("message.timestamp.before.max.ms", Long, LONG_MAX, AtLeast(0), &[("log.message.timestamp.before.max.ms", 1)]),
    key("message.timestamp.type", ConfigType::String, "CreateTime", Check::OneOf(TIMESTAMP_TYPES), &[("log.message.timestamp.type", 1)]),
    key("min.cleanable.dirty.ratio", Double, "0.5", Check::Ratio, &[("log.cleaner.min.cleanable.ratio", 1)]),
    key("min.compaction.lag.ms", Long, "0", AtLeast(0), &[("log.cleaner.min.compaction.lag.ms", 1)]),
    key("min.insync.replicas", Int, "1", AtLeast(1), &[("min.insync.replicas", 1)]),
    key("preallocate", Boolean, "false", Any, &[("log.preallocate", 1)]),
    key("remote.log.copy.disable", Boolean, "false", Any, &[]),
    key("remote.log.delete.on.disable", Boolean, "false", Any, &[]),
    key("remote.storage.enable", Boolean, "false", Any, &[]),
    key("retention.bytes", Long, "-1", Any, &[("log.retention.bytes", 1)]),
    key("retention.ms", Long, "604800000", AtLeast(-1), &[("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)]),
    // Kafka 4 wants >= 1 MiB here; krabka keeps the pre-4.0 floor, as for log.segment.bytes.
    key("segment.bytes", Int, "1073741824", AtLeast(14), &[("log.segment.bytes", 1)]),
    key("segment.index.bytes", Int, "10485760", AtLeast(4), &[("log.index.size.max.bytes", 1)]),
    key("segment.jitter.ms", Long, "0", AtLeast(0), &[("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)]),
    key("segment.ms", Long, "604800000", AtLeast(1), &[("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)]),
    key("unclean.leader.election.enable", Boolean, "false", Any, &[("unclean.leader.election.enable", 1)]),
];

pub fn topic_key(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|key| key.name == name)
}

impl TopicKey {
    /// The canonical form of `value`, or why it is refused.
    pub fn canonical(&self, value: &str) -> Result<String, ConfigError> {
        canonical(self.name, self.ty, self.check, value)
    }
}

/// Whether Kafka defines a topic config of this name.
pub fn is_topic_config(name: &str) -> bool {
    topic_key(name).is_some()
}

/// Checks one topic config as CreateTopics/AlterConfigs would.
pub fn validate_topic_config(name: &str, value: &str) -> Result<(), ConfigError> {
    checked(name, value).map(drop)
}

/// Checks a set of topic configs: every name first (as Kafka does), then each
/// value, then the rules that involve two configs.
pub fn validate_topic_configs(configs: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    if let Some(unknown) = configs.keys().find(|name| !is_topic_config(name)) {
        return Err(ConfigError::UnknownTopicConfig(unknown.clone()));
    }
    let mut canonical = BTreeMap::new();
    for (name, value) in configs {
        canonical.insert(name.clone(), checked(name, value)?);
    }
    check_compaction_lags(&canonical)
}

/// The canonical form of a valid topic config value.
fn checked(name: &str, value: &str) -> Result<String, ConfigError> {
    let key = topic_key(name).ok_or_else(|| ConfigError::UnknownTopicConfig(name.to_string()))?;
    let canonical = key.canonical(value)?;
    // Kafka refuses remote storage on a broker without tiered storage; krabka has none.
    if name == "remote.storage.enable" && canonical == "true" {
        let reason = "tiered storage is not available on this broker, so a topic cannot enable remote storage";
        return Err(ConfigError::Invalid { key: name.into(), value: value.into(), reason: reason.into() });
    }
    Ok(canonical)
}

/// min.compaction.lag.ms must not exceed max.compaction.lag.ms.
pub fn check_compaction_lags(configs: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    let lag = |name: &str, default: i64| int_or(configs.get(name).map(String::as_str), default);
    let (min, max) = (lag("min.compaction.lag.ms", 0), lag("max.compaction.lag.ms", i64::MAX));
    if min > max {
        return Err(ConfigError::Conflict(format!(
            "conflicting topic configs: min.compaction.lag.ms ({min}) > max.compaction.lag.ms ({max})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(pairs: &[(&str, &str)]) -> Result<(), String> {
        let configs = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        validate_topic_configs(&configs).map_err(|e| e.to_string())
    }

    #[test]
    fn table_is_sorted_and_defaults_are_canonical() {
        assert!(TOPIC_KEYS.windows(2).all(|w| w[0].name < w[1].name));
        for key in TOPIC_KEYS {
            assert_eq!(key.canonical(key.default).unwrap(), key.default, "{}", key.name);
        }
    }

    #[test]
    fn validation_accepts_what_kafka_accepts() {
        validate(&[("cleanup.policy", "compact,delete")]).unwrap();
        validate(&[("cleanup.policy", "")]).unwrap();
        validate(&[("message.timestamp.type", "LogAppendTime")]).unwrap();
        validate(&[("retention.ms", "-1"), ("retention.bytes", "-5"), ("min.cleanable.dirty.ratio", "0.01")]).unwrap();
        validate(&[("leader.replication.throttled.replicas", "0:1,1:2"), ("compression.zstd.level", "-5")]).unwrap();
        assert!(is_topic_config("segment.jitter.ms"));
        assert!(!is_topic_config("log.retention.ms"));
        assert_eq!(TOPIC_KEYS.len(), 33);
    }

    #[test]
    fn validation_refuses_what_kafka_refuses() {
        assert_eq!(validate(&[("retention.ms", "1"), ("foo", "1")]).unwrap_err(), "Unknown topic config name: foo");
        for (name, value) in [
            ("cleanup.policy", "foo"),
            ("cleanup.policy", "delete,delete"),
            ("retention.ms", "-2"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("message.timestamp.type", "logappendtime"),
            ("compression.type", "none"),
            ("compression.gzip.level", "10"),
            ("segment.ms", "0"),
            ("max.message.bytes", "abc"),
            ("preallocate", "maybe"),
            ("local.retention.ms", "-3"),
            ("follower.replication.throttled.replicas", "all"),
            ("remote.storage.enable", "true"),
        ] {
            let message = validate(&[(name, value)]).unwrap_err();
            assert!(message.contains(name), "{name}={value}: {message}");
            assert!(validate_topic_config(name, value).is_err());
        }
        let lags = validate(&[("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")]).unwrap_err();
        assert!(lags.contains("min.compaction.lag.ms") && lags.contains("max.compaction.lag.ms"), "{lags}");
    }
}
