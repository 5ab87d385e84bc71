//! The broker side of the topic configs: the default server.properties
//! gives each one. The table itself (names, types, Kafka's defaults, the
//! broker keys each falls back on) is krabka-log's `topic_config`.

use std::collections::BTreeMap;

use krabka_log::config_values::{canonical, int_or, ConfigError};
use krabka_log::topic_config::{check_compaction_lags, TopicKey, TOPIC_KEYS};

use super::broker_keys::KeyValues;

/// The value server.properties gives this config: the first broker key set,
/// else the first with a Kafka default, converted to this config's unit.
fn broker_value(key: &TopicKey, values: &KeyValues) -> Option<(&'static str, String)> {
    let (name, factor) = key
        .broker
        .iter()
        .find(|(n, _)| values.set(n).is_some())
        .or_else(|| key.broker.iter().find(|(n, _)| values.get(n).is_some()))?;
    let value = values.get(name)?;
    if *factor == 1 {
        return Some((name, value.to_string()));
    }
    Some((name, int_or(Some(value), 0).saturating_mul(*factor).to_string()))
}

/// The broker-level default of every topic config, keyed by topic config name.
/// Each must also be a valid topic value, as Kafka checks when it builds the
/// default log config at startup.
pub(crate) fn broker_topic_defaults(values: &KeyValues) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut defaults = BTreeMap::new();
    for key in TOPIC_KEYS {
        let value = match broker_value(key, values) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR_MS: i64 = 3_600_000;
    const LONG_MAX: &str = "9223372036854775807";

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
