use super::*;
use crate::config::ConfigType;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn broker(extra: &[(&str, &str)]) -> BrokerConfig {
    let mut props = map(&[
        ("node.id", "1"),
        ("process.roles", "broker,controller"),
        ("listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093"),
        ("controller.listener.names", "CONTROLLER"),
    ]);
    props.extend(map(extra));
    BrokerConfig::from_properties(props).unwrap().0
}

#[test]
fn log_config_defaults_match_the_log_crate() {
    assert_eq!(log_config(&broker(&[]), &broker(&[]).topic_defaults, &BTreeMap::new()), LogConfig::default());
}

#[test]
fn log_config_overrides_win_over_broker_over_kafka() {
    let broker =
        broker(&[("log.retention.hours", "1"), ("log.segment.bytes", "1048576"), ("message.max.bytes", "2000")]);
    let config = log_config(
        &broker,
        &broker.topic_defaults,
        &map(&[("retention.ms", "5000"), ("cleanup.policy", "compact, delete")]),
    );
    assert_eq!(config.retention_ms, 5000, "topic override");
    assert_eq!(config.segment_bytes, 1_048_576, "broker key");
    assert_eq!(config.max_message_bytes, 2000, "broker key under another name");
    assert_eq!(config.segment_index_bytes, 10 * 1024 * 1024, "Kafka default");
    assert_eq!(config.cleanup_policy, CleanupPolicy::CompactDelete);
    assert_eq!(log_config(&broker, &broker.topic_defaults, &BTreeMap::new()).retention_ms, 3_600_000);

    let config = log_config(
        &broker,
        &broker.topic_defaults,
        &map(&[("message.timestamp.type", "LogAppendTime"), ("cleanup.policy", "")]),
    );
    assert_eq!(config.timestamp_policy, TimestampPolicy::LogAppendTime);
    assert_eq!((config.retention_ms, config.retention_bytes), (-1, -1), "no cleanup policy keeps everything");
    let compacted = log_config(
        &broker,
        &broker.topic_defaults,
        &map(&[("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.1")]),
    );
    assert_eq!(compacted.cleanup_policy, CleanupPolicy::Compact);
    assert_eq!(compacted.min_cleanable_dirty_ratio, 0.1);
}

#[test]
fn compression_follows_the_same_precedence() {
    assert_eq!(topic_compression(&broker(&[]).topic_defaults, &BTreeMap::new()), TopicCompression::Producer);
    let zstd_broker = broker(&[("compression.type", "zstd")]);
    assert_eq!(topic_compression(&zstd_broker.topic_defaults, &BTreeMap::new()), TopicCompression::Zstd);
    assert_eq!(
        topic_compression(&zstd_broker.topic_defaults, &map(&[("compression.type", "lz4")])),
        TopicCompression::Lz4
    );
}

#[test]
fn describe_topic_reports_sources_and_synonyms() {
    let broker = broker(&[("log.segment.bytes", "1048576"), ("log.retention.hours", "1")]);
    let entries = describe_topic(&broker, &DynamicConfigs::none(), &map(&[("cleanup.policy", "compact, delete")]));
    assert_eq!(entries.len(), TOPIC_KEYS.len());
    let entry = |name: &str| entries.iter().find(|e| e.name == name).unwrap().clone();
    assert!(entries.iter().all(|e| !e.read_only && !e.sensitive));

    let policy = entry("cleanup.policy");
    assert_eq!((policy.value.as_deref(), policy.source), (Some("compact,delete"), ConfigSource::DynamicTopic));
    assert_eq!(policy.config_type, ConfigType::List);
    assert_eq!(
        policy.synonyms,
        [
            ("cleanup.policy".into(), Some("compact,delete".into()), ConfigSource::DynamicTopic),
            ("log.cleanup.policy".into(), Some("delete".into()), ConfigSource::Default),
        ]
    );

    let segment = entry("segment.bytes");
    assert_eq!((segment.value.as_deref(), segment.source), (Some("1048576"), ConfigSource::StaticBroker));
    assert_eq!(
        segment.synonyms,
        [
            ("log.segment.bytes".into(), Some("1048576".into()), ConfigSource::StaticBroker),
            ("log.segment.bytes".into(), Some("1073741824".into()), ConfigSource::Default),
        ]
    );

    let max_message = entry("max.message.bytes");
    assert_eq!((max_message.value.as_deref(), max_message.source), (Some("1048588"), ConfigSource::Default));
    assert_eq!(max_message.synonyms, [("message.max.bytes".into(), Some("1048588".into()), ConfigSource::Default)]);

    // As in Kafka: the hours apply, but only log.retention.ms counts as a synonym of retention.ms.
    let retention = entry("retention.ms");
    assert_eq!((retention.value.as_deref(), retention.source), (Some("3600000"), ConfigSource::Default));
    assert!(retention.synonyms.is_empty());

    let remote = entry("remote.storage.enable");
    assert_eq!(
        (remote.value.as_deref(), remote.source, remote.synonyms.len()),
        (Some("false"), ConfigSource::Default, 0)
    );
    assert_eq!(entry("min.cleanable.dirty.ratio").value.as_deref(), Some("0.5"));
    assert_eq!(entry("leader.replication.throttled.replicas").value.as_deref(), Some(""));
}
