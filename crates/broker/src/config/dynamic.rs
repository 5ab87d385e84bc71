//! Dynamic broker configs (KIP-226, kept in the metadata log as Kafka's
//! KRaft does): `ConfigRecord`s of the BROKER resource, the cluster-wide
//! default (an empty name) and one broker's own (its id). They sit above
//! server.properties: a broker's own over the cluster's over the file.
//!
//! krabka applies the broker keys that are topic-config defaults
//! (`log.retention.ms`, `min.insync.replicas`, `compression.type`, ...)
//! at runtime. Other keys Kafka can change at runtime (thread counts,
//! listeners) are refused until krabka applies them: accepting a value
//! that does nothing would be worse. Keys no table knows are kept, as
//! Kafka keeps them.

use std::borrow::Cow;
use std::collections::BTreeMap;

use krabka_controller::ApiError;
use krabka_log::config_values::{canonical, Check};
use krabka_log::topic_config::TOPIC_KEYS;
use krabka_metadata::MetadataImage;
use krabka_protocol::ErrorCode;

use super::broker_keys::{broker_key, KeyValues};
use super::describe::{ConfigEntry, ConfigSource, Layer};
use super::topic_keys::broker_topic_defaults;
use super::BrokerConfig;
use krabka_log::config_values::ConfigType;

/// The dynamic configs that apply to one broker.
#[derive(Clone, Copy, Debug)]
pub struct DynamicConfigs<'a> {
    /// The broker's own (`kafka-configs --entity-name <id>`).
    pub own: &'a BTreeMap<String, String>,
    /// The cluster's default (`kafka-configs --entity-default`).
    pub cluster: &'a BTreeMap<String, String>,
}

static NONE: BTreeMap<String, String> = BTreeMap::new();

impl<'a> DynamicConfigs<'a> {
    /// Those the image holds for broker `node_id`.
    pub fn of(image: &'a MetadataImage, node_id: i32) -> Self {
        let own = image.per_broker_configs.get(&node_id.to_string()).unwrap_or(&NONE);
        DynamicConfigs { own, cluster: &image.broker_configs }
    }

    /// None at all: server.properties alone.
    pub fn none() -> DynamicConfigs<'static> {
        DynamicConfigs { own: &NONE, cluster: &NONE }
    }

    pub fn is_empty(&self) -> bool {
        self.own.is_empty() && self.cluster.is_empty()
    }

    /// Where a broker key may be set, most specific first, with the
    /// source DescribeConfigs names for each.
    pub(crate) fn layers<'s>(&'s self, file: &'s BTreeMap<String, String>) -> [Layer<'s>; 3] {
        [
            (self.own, ConfigSource::DynamicBroker),
            (self.cluster, ConfigSource::DynamicDefaultBroker),
            (file, ConfigSource::StaticBroker),
        ]
    }
}

/// Keys that exist only as dynamic broker configs (Kafka's
/// `DynamicConfig.Broker`, not in its server.properties table): the
/// replication throttles of a reassignment, with their types. The
/// alter-log-dirs one bounds moves between a broker's own log directories,
/// which krabka does not make: there is nothing for it to hold back.
const DYNAMIC_ONLY: &[(&str, ConfigType, Check)] = &[
    ("follower.replication.throttled.rate", ConfigType::Long, Check::AtLeast(0)),
    ("leader.replication.throttled.rate", ConfigType::Long, Check::AtLeast(0)),
    ("replica.alter.log.dirs.io.max.bytes.per.second", ConfigType::Long, Check::AtLeast(0)),
];

fn dynamic_only(name: &str) -> Option<(ConfigType, Check)> {
    DYNAMIC_ONLY.iter().find(|(key, _, _)| *key == name).map(|&(_, ty, check)| (ty, check))
}

/// Broker keys, other than topic-config defaults, that krabka reads anew
/// (through `BrokerConfig::value_under`) each time it uses them.
const READ_WHEN_USED: &[&str] = &[
    "transaction.partition.verification.enable",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.connection.creation.rate",
    "num.replica.fetchers",
];

/// Whether krabka applies broker key `name` at runtime: a topic config's
/// broker-level default, a replication throttle, or a key read when used.
fn applied_at_runtime(name: &str) -> bool {
    dynamic_only(name).is_some()
        || READ_WHEN_USED.contains(&name)
        || TOPIC_KEYS.iter().any(|key| key.broker.iter().any(|(broker_name, _)| *broker_name == name))
}

/// Checks the keys a BROKER resource would set (with their values) or
/// remove (None), as Kafka's broker does before forwarding the request:
/// known keys that cannot change at runtime are refused together, then
/// each value must parse as its key's type.
pub fn check_dynamic_update<'k>(changes: impl IntoIterator<Item = (&'k str, Option<&'k str>)>) -> Result<(), ApiError> {
    let changes: Vec<(&str, Option<&str>)> = changes.into_iter().collect();
    let fixed: Vec<&str> = changes
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| broker_key(name).is_some_and(|key| !key.dynamic || !applied_at_runtime(name)))
        .collect();
    if !fixed.is_empty() {
        let message = format!("Cannot update these configs dynamically: [{}]", fixed.join(", "));
        return Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), message));
    }
    for (name, value) in changes {
        let typed = broker_key(name).map(|key| (key.ty, key.check)).or_else(|| dynamic_only(name));
        let (Some((ty, check)), Some(value)) = (typed, value) else { continue };
        if let Err(e) = canonical(name, ty, check, value) {
            let reason = match e {
                krabka_log::config_values::ConfigError::Invalid { reason, .. } => capitalized(&reason),
                other => other.to_string(),
            };
            let message = format!("Invalid value {value} for configuration {name}: {reason}");
            return Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), message));
        }
        if name == "max.connections.per.ip.overrides" {
            if let Err(e) = super::connection_limits::per_ip_overrides(value) {
                return Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), e.to_string()));
            }
        }
    }
    Ok(())
}

/// Thread counts, of those krabka applies at runtime, that a dynamic
/// update may take at most to double and at least to half their current
/// value (Kafka's `DynamicThreadPool`).
const THREAD_COUNTS: &[&str] = &["num.replica.fetchers"];

impl BrokerConfig {
    /// Kafka's `DynamicThreadPool` check of a thread count set to `value`
    /// (None: removed) for this broker, or for the cluster's default when
    /// `for_default`, against its current value under `dynamic`.
    pub fn check_thread_count(
        &self,
        dynamic: &DynamicConfigs,
        (name, value): (&str, Option<&str>),
        for_default: bool,
    ) -> Result<(), ApiError> {
        // A default under this broker's own value changes nothing here.
        if !THREAD_COUNTS.contains(&name) || (for_default && dynamic.own.contains_key(name)) {
            return Ok(());
        }
        // Removed, the next layer down applies.
        let removed = if for_default { ConfigSource::DynamicDefaultBroker } else { ConfigSource::DynamicBroker };
        let below = || {
            let layers = dynamic.layers(&self.raw);
            let mut under = layers.iter().skip_while(|(_, source)| *source != removed).skip(1);
            let set = under.find_map(|(layer, _)| layer.get(name)).cloned();
            set.or_else(|| broker_key(name)?.default.map(str::to_string))
        };
        let value = value.map(str::to_string).or_else(below).unwrap_or_default();
        let current = self.value_under(dynamic, name).and_then(|v| v.parse::<i64>().ok());
        let (Ok(new), Some(old)) = (value.trim().parse::<i64>(), current) else { return Ok(()) };
        let reason = if new == old {
            return Ok(());
        } else if new <= 0 {
            "value should be at least 1".to_string()
        } else if new < old / 2 {
            format!("value should be at least half the current value {old}")
        } else if new > old * 2 {
            format!("value should not be greater than double the current value {old}")
        } else {
            return Ok(());
        };
        let message = format!("Dynamic thread count update validation failed for {name}={value}, {reason}");
        Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), message))
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

impl BrokerConfig {
    /// server.properties with the dynamic configs laid over it, as Kafka
    /// merges them before it reads its config anew.
    fn merged(&self, dynamic: &DynamicConfigs) -> BTreeMap<String, String> {
        let mut merged = self.raw.clone();
        merged.extend(dynamic.cluster.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged.extend(dynamic.own.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged
    }

    /// The broker-level default of every topic config with the dynamic
    /// configs applied. A dynamic value was checked when it was set; if
    /// the merged whole still fails (a retention of 0 ms from two keys),
    /// server.properties alone applies and the failure is logged.
    pub fn topic_defaults_under(&self, dynamic: &DynamicConfigs) -> Cow<'_, BTreeMap<String, String>> {
        if dynamic.is_empty() {
            return Cow::Borrowed(&self.topic_defaults);
        }
        let merged = self.merged(dynamic);
        match KeyValues::read(&merged).and_then(|(values, _)| broker_topic_defaults(&values)) {
            Ok(defaults) => Cow::Owned(defaults),
            Err(e) => {
                tracing::warn!(error = %e, "dynamic broker configs not applied; server.properties applies");
                Cow::Borrowed(&self.topic_defaults)
            }
        }
    }

    /// Known key `name`'s value now: from the most specific layer that
    /// sets it (canonical), else Kafka's default. One lookup, for keys read
    /// on a hot path, where `values_under` would merge every key.
    pub fn value_under(&self, dynamic: &DynamicConfigs, name: &str) -> Option<String> {
        debug_assert!(READ_WHEN_USED.contains(&name), "{name} is not read when used");
        let key = broker_key(name)?;
        let layers = dynamic.layers(&self.raw);
        let set = layers.iter().find_map(|(layer, _)| layer.get(name));
        set.and_then(|value| canonical(key.name, key.ty, key.check, value).ok())
            .or_else(|| key.default.map(str::to_string))
    }

    /// The value of every known key with the dynamic configs applied.
    pub(crate) fn values_under(&self, dynamic: &DynamicConfigs) -> KeyValues {
        KeyValues::lossy(&self.merged(dynamic))
    }
}

/// DescribeConfigs of the cluster-wide default resource: only what is set
/// there, as Kafka answers it.
pub fn describe_cluster_default(cluster: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
    cluster.iter().map(|(name, value)| dynamic_entry(name, value, ConfigSource::DynamicDefaultBroker)).collect()
}

/// The entry of a dynamic key set at `source` alone (a custom key, or the
/// default resource): its value, or nothing for a key no table knows,
/// which Kafka treats as sensitive.
pub(crate) fn dynamic_entry(name: &str, value: &str, source: ConfigSource) -> ConfigEntry {
    let key = broker_key(name);
    let config_type = key.map(|k| k.ty).or_else(|| dynamic_only(name).map(|(ty, _)| ty)).unwrap_or(ConfigType::Unknown);
    let sensitive = matches!(config_type, ConfigType::Password | ConfigType::Unknown);
    let shown = (!sensitive).then(|| value.to_string());
    ConfigEntry {
        name: name.to_string(),
        value: shown.clone(),
        source,
        read_only: key.is_some_and(|k| !k.dynamic),
        sensitive,
        config_type,
        synonyms: vec![(name.to_string(), shown, source)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let mut props: BTreeMap<String, String> = [
            ("node.id", "1"),
            ("process.roles", "broker,controller"),
            ("controller.quorum.voters", "1@127.0.0.1:9093"),
            ("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"),
            ("controller.listener.names", "CONTROLLER"),
            ("log.dirs", "/tmp/x"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        props.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        BrokerConfig::from_properties(props).unwrap().0
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_brokers_own_config_wins_over_the_clusters_over_the_file() {
        let broker = config(&[("log.retention.hours", "1"), ("log.segment.bytes", "1000000")]);
        let cluster = map(&[("log.retention.ms", "5000"), ("log.segment.bytes", "2000000"), ("foo.bar", "1")]);
        let own = map(&[("log.segment.bytes", "3000000")]);
        let defaults = broker.topic_defaults_under(&DynamicConfigs { own: &own, cluster: &cluster });
        assert_eq!(defaults["retention.ms"], "5000", "the cluster's ms over the file's hours");
        assert_eq!(defaults["segment.bytes"], "3000000", "the broker's own");
        let none = broker.topic_defaults_under(&DynamicConfigs::none());
        assert_eq!(none["retention.ms"], "3600000");
        assert!(matches!(none, Cow::Borrowed(_)));
    }

    #[test]
    fn only_runtime_keys_change_and_values_parse_as_their_type() {
        assert!(check_dynamic_update([("log.retention.ms", Some("100")), ("foo.bar", Some("x"))]).is_ok());
        assert!(check_dynamic_update([("min.insync.replicas", None)]).is_ok());
        assert!(check_dynamic_update([("leader.replication.throttled.rate", Some("1000"))]).is_ok());
        let rate = check_dynamic_update([("follower.replication.throttled.rate", Some("x"))]).unwrap_err();
        assert_eq!(
            rate.message,
            "Invalid value x for configuration follower.replication.throttled.rate: Not a number of type LONG"
        );
        let fixed = check_dynamic_update([("broker.id", Some("5")), ("num.io.threads", Some("4"))]).unwrap_err();
        assert_eq!(fixed.code, ErrorCode::INVALID_REQUEST.code());
        assert_eq!(fixed.message, "Cannot update these configs dynamically: [broker.id, num.io.threads]");
        let bad = check_dynamic_update([("log.retention.ms", Some("abc"))]).unwrap_err();
        assert_eq!(bad.message, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG");
    }

    #[test]
    fn the_default_resource_lists_what_is_set_with_unknown_keys_hidden() {
        let entries = describe_cluster_default(&map(&[("foo.bar", "1"), ("min.insync.replicas", "2")]));
        assert_eq!(entries[0].value, None);
        assert!(entries[0].sensitive && entries[0].config_type == ConfigType::Unknown);
        assert_eq!(entries[1].value.as_deref(), Some("2"));
        assert_eq!(
            entries[1].synonyms,
            [("min.insync.replicas".into(), Some("2".into()), ConfigSource::DynamicDefaultBroker)]
        );
    }
}
