//! The one error of the config layer: a value, a key or a combination of
//! values refused, worded the way Kafka words it.

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value {value:?} for configuration {key}: {reason}")]
    Invalid { key: String, value: String, reason: String },
    #[error("missing required configuration {0}")]
    Missing(String),
    /// A topic config name Kafka does not define (CreateTopics/AlterConfigs).
    #[error("Unknown topic config name: {0}")]
    UnknownTopicConfig(String),
    /// Values that are each valid but not together.
    #[error("{0}")]
    Conflict(String),
}
