//! Topic-level configuration (placeholder, being filled in).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

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

// Temporary minimal topic configs; replaced by the full config module.
use std::collections::BTreeMap;

use super::{BrokerConfig, ConfigError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicCompression {
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

pub fn validate_topic_configs(configs: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    for (k, v) in configs {
        validate_topic_config(k, v)?;
    }
    Ok(())
}

pub fn validate_topic_config(name: &str, value: &str) -> Result<(), ConfigError> {
    if name == "retention.ms" && value.parse::<i64>().is_err() {
        return Err(ConfigError::Invalid { key: name.into(), value: value.into(), reason: "not a number".into() });
    }
    Ok(())
}

pub fn log_config(_broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> krabka_log::LogConfig {
    let mut c = krabka_log::LogConfig::default();
    if let Some(v) = overrides.get("retention.ms").and_then(|v| v.parse().ok()) {
        c.retention_ms = v;
    }
    c
}

pub fn topic_compression(_broker: &BrokerConfig, _overrides: &BTreeMap<String, String>) -> TopicCompression {
    TopicCompression::Producer
}

pub fn describe_topic(_broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
    overrides
        .iter()
        .map(|(k, v)| ConfigEntry {
            name: k.clone(),
            value: Some(v.clone()),
            source: ConfigSource::DynamicTopic,
            read_only: false,
            sensitive: false,
            config_type: ConfigType::String,
            synonyms: Vec::new(),
        })
        .collect()
}
