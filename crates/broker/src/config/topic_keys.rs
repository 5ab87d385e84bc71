//! Kafka 4.3.1's topic configs and the broker keys each one falls back on.

use std::collections::BTreeMap;

use super::broker_keys::{KeyValues, CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES, ZSTD_LEVELS};
use super::error::ConfigError;
use super::values::{canonical, int_or, Check, ConfigType};

const HOUR_MS: i64 = 3_600_000;
const MINUTE_MS: i64 = 60_000;
const LONG_MAX: &str = "9223372036854775807";

pub(crate) struct TopicKey {
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
pub(crate) static TOPIC_KEYS: &[TopicKey] = &[
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

pub(crate) fn topic_key(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|key| key.name == name)
}

impl TopicKey {
    pub(crate) fn canonical(&self, value: &str) -> Result<String, ConfigError> {
        canonical(self.name, self.ty, self.check, value)
    }

    /// The value server.properties gives this config: the first broker key set,
    /// else the first with a Kafka default, converted to this config's unit.
    fn broker_value(&self, values: &KeyValues) -> Option<(&'static str, String)> {
        let (name, factor) = self
            .broker
            .iter()
            .find(|(n, _)| values.set(n).is_some())
            .or_else(|| self.broker.iter().find(|(n, _)| values.get(n).is_some()))?;
        let value = values.get(name)?;
        if *factor == 1 {
            return Some((name, value.to_string()));
        }
        Some((name, int_or(Some(value), 0).saturating_mul(*factor).to_string()))
    }
}

/// The broker-level default of every topic config, keyed by topic config name.
/// Each must also be a valid topic value, as Kafka checks when it builds the
/// default log config at startup.
pub(crate) fn broker_topic_defaults(values: &KeyValues) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut defaults = BTreeMap::new();
    for key in TOPIC_KEYS {
        let value = match key.broker_value(values) {
            // Kafka turns any negative broker retention into "unlimited".
            Some((_, value)) if key.name == "retention.ms" && int_or(Some(&value), 0) < 0 => "-1".to_string(),
            Some((broker_name, value)) => canonical(broker_name, key.ty, key.check, &value)?,
            None => key.default.to_string(),
        };
        defaults.insert(key.name.to_string(), value);
    }
    if defaults["retention.ms"] == "0" {
        let reason = "retention must be -1 (unlimited) or at least 1 ms".to_string();
        return Err(ConfigError::Invalid { key: "log.retention.ms".into(), value: "0".into(), reason });
    }
    check_compaction_lags(&defaults)?;
    Ok(defaults)
}

/// min.compaction.lag.ms must not exceed max.compaction.lag.ms.
pub(crate) fn check_compaction_lags(configs: &BTreeMap<String, String>) -> Result<(), ConfigError> {
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

    #[test]
    fn table_is_sorted_and_defaults_are_canonical() {
        assert!(TOPIC_KEYS.windows(2).all(|w| w[0].name < w[1].name));
        for key in TOPIC_KEYS {
            assert_eq!(key.canonical(key.default).unwrap(), key.default, "{}", key.name);
        }
    }

    #[test]
    fn broker_defaults_convert_units() {
        let props = BTreeMap::from([("log.roll.hours".to_string(), "2".to_string())]);
        let (values, _) = KeyValues::read(&props).unwrap();
        let defaults = broker_topic_defaults(&values).unwrap();
        assert_eq!(defaults["segment.ms"], (2 * HOUR_MS).to_string());
        assert_eq!(defaults["retention.ms"], "604800000");
        assert_eq!(defaults["max.message.bytes"], "1048588");
        assert_eq!(defaults["message.timestamp.after.max.ms"], "3600000");
        assert_eq!(defaults["flush.ms"], LONG_MAX);
    }
}
