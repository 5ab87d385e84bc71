//! DescribeConfigs' answer for one config: its entry, where its value comes
//! from, and its synonyms.
//!
//! Kafka lists, for a broker key, every key of its synonym group that is set in
//! server.properties (STATIC_BROKER_CONFIG) followed by every one that has a
//! default (DEFAULT_CONFIG), then drops the entries before the described key
//! itself. So `log.retention.ms` with only `log.retention.hours` set has no
//! synonyms at all and reports DEFAULT_CONFIG even though the hours apply; we
//! reproduce that so tools comparing against Kafka see the same answer.

use std::collections::BTreeMap;

use super::broker_keys::broker_key;
use krabka_log::config_values::ConfigType;

/// One place broker keys are set, and the source DescribeConfigs names.
pub(crate) type Layer<'a> = (&'a BTreeMap<String, String>, ConfigSource);

/// Where a described value comes from, most specific first (Kafka's
/// `DescribeConfigsResponse.ConfigSource`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
}

impl ConfigSource {
    /// Its code on the wire (DescribeConfigs, CreateTopics v5+).
    pub fn code(self) -> i8 {
        match self {
            ConfigSource::DynamicTopic => 1,
            ConfigSource::DynamicBroker => 2,
            ConfigSource::DynamicDefaultBroker => 3,
            ConfigSource::StaticBroker => 4,
            ConfigSource::Default => 5,
        }
    }
}

/// One config as DescribeConfigs reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    pub config_type: ConfigType,
    /// (name, value, source), most specific first, as DescribeConfigs reports them.
    pub synonyms: Vec<(String, Option<String>, ConfigSource)>,
}

/// (name, value, source), most specific first, as in `ConfigEntry::synonyms`.
pub(crate) type Synonym = (String, Option<String>, ConfigSource);

/// The keys that set the same broker value as `name`, highest precedence first.
fn synonym_group(name: &str) -> Vec<&str> {
    match name {
        "log.roll.ms" | "log.roll.hours" => vec!["log.roll.ms", "log.roll.hours"],
        "log.roll.jitter.ms" | "log.roll.jitter.hours" => vec!["log.roll.jitter.ms", "log.roll.jitter.hours"],
        // The scheduler interval is only the fallback of the flush interval, not the reverse.
        "log.flush.interval.ms" => vec!["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        "log.retention.ms" | "log.retention.minutes" | "log.retention.hours" => {
            vec!["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
        }
        _ => vec![name],
    }
}

/// The synonyms of broker key `name` given where broker keys are set
/// (`layers`, most specific first: a broker's dynamic configs, the
/// cluster's, server.properties).
pub(crate) fn broker_synonyms(name: &str, layers: &[Layer<'_>], sensitive: bool) -> Vec<Synonym> {
    let group = synonym_group(name);
    let shown = |value: &str| (!sensitive).then(|| value.to_string());
    let set = layers.iter().flat_map(|&(keys, source)| {
        group.iter().filter_map(move |n| keys.get(*n).map(|v| (n.to_string(), shown(v), source)))
    });
    let defaults = group.iter().filter_map(|n| {
        let default = broker_key(n)?.default?;
        Some((n.to_string(), shown(default), ConfigSource::Default))
    });
    set.chain(defaults).skip_while(|(n, _, _)| n != name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn raw(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn broker_synonyms(name: &str, raw: &BTreeMap<String, String>, sensitive: bool) -> Vec<Synonym> {
        super::broker_synonyms(name, &[(raw, ConfigSource::StaticBroker)], sensitive)
    }

    #[test]
    fn follows_kafkas_synonym_order() {
        let props = raw(&[("log.retention.ms", "1000"), ("log.retention.hours", "1")]);
        let synonyms = broker_synonyms("log.retention.ms", &props, false);
        assert_eq!(
            synonyms,
            [
                ("log.retention.ms".into(), Some("1000".into()), ConfigSource::StaticBroker),
                ("log.retention.hours".into(), Some("1".into()), ConfigSource::StaticBroker),
                ("log.retention.hours".into(), Some("168".into()), ConfigSource::Default),
            ]
        );
        // Only a lower-precedence key is set: Kafka reports no synonyms for the primary.
        assert!(broker_synonyms("log.retention.ms", &raw(&[("log.retention.hours", "1")]), false).is_empty());
        assert_eq!(
            broker_synonyms("num.partitions", &raw(&[]), false),
            [("num.partitions".into(), Some("1".into()), ConfigSource::Default)]
        );
        let hidden = broker_synonyms("ssl.key.password", &raw(&[("ssl.key.password", "secret")]), true);
        assert_eq!(hidden, [("ssl.key.password".into(), None, ConfigSource::StaticBroker)]);
    }

    #[test]
    fn dynamic_layers_come_first_as_in_kafka() {
        // Kafka 4.3.1, `log.retention.ms` set as the cluster's default:
        // {DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=100000, DEFAULT_CONFIG:log.retention.hours=168}
        let (own, cluster, file) = (raw(&[]), raw(&[("log.retention.ms", "100000")]), raw(&[]));
        let layers = [
            (&own, ConfigSource::DynamicBroker),
            (&cluster, ConfigSource::DynamicDefaultBroker),
            (&file, ConfigSource::StaticBroker),
        ];
        assert_eq!(
            super::broker_synonyms("log.retention.ms", &layers, false),
            [
                ("log.retention.ms".into(), Some("100000".into()), ConfigSource::DynamicDefaultBroker),
                ("log.retention.hours".into(), Some("168".into()), ConfigSource::Default),
            ]
        );
    }
}
