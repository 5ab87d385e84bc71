//! Broker and topic configuration with Kafka's key names and defaults.
//!
//! `broker` reads server.properties into a `BrokerConfig`; `topic` validates
//! topic overrides and derives each topic's effective `LogConfig`. Both answer
//! DescribeConfigs the way Kafka 4.3 does. The key tables live in
//! `broker_keys` and `topic_keys`; `values` holds the typed parsing they share.
//!
//! The topic config table, its validation and the typed value parsing both
//! tables share (`ConfigType`, `Check`, `ConfigError`) are krabka-log's
//! (`topic_config`, `config_values`): a topic config is a setting of the
//! topic's logs, and the controller validates them without the broker.
//!
//! `dynamic` lays the dynamic broker configs of the metadata log (the
//! cluster's default, a broker's own) over server.properties.
//!
//! Imports point one way, from the top down: `topic` -> `dynamic` -> `broker` ->
//! `security` (client listeners' SASL settings) -> `listeners`, `quorum` (the KRaft voters and timers), `describe` (`ConfigEntry`, synonyms), `topic_keys` ->
//! `broker_keys` -> krabka-log's `topic_config` -> `config_values`;
//! `connection_limits` (the per-address overrides' parsing) below `broker`
//! and `dynamic`.

pub mod broker;
mod broker_keys;
pub mod connection_limits;
mod describe;
pub mod dynamic;
mod keystore;
mod listeners;
pub mod oauthbearer;
mod quorum;
pub mod security;
pub mod tls;
pub mod topic;
mod topic_keys;

pub use broker::BrokerConfig;
pub use describe::{ConfigEntry, ConfigSource};
pub use dynamic::DynamicConfigs;
pub use krabka_log::config_values::{ConfigError, ConfigType};
pub use listeners::Listener;
pub use quorum::{QuorumConfig, VoterAddress};
pub use topic::{
    describe_topic, effective_topic_configs, is_topic_config, log_config, topic_compression, validate_topic_config,
    validate_topic_configs, TopicCompression,
};
