//! Broker and topic configuration with Kafka's key names and defaults.

pub mod broker;
pub mod topic;

pub use broker::{BrokerConfig, ConfigError, Listener};
pub use topic::{ConfigEntry, ConfigSource, ConfigType};
