use super::*;
use crate::config::{ConfigType, VoterAddress};

/// A combined node on loopback, the smallest config KRaft accepts.
const MINIMAL: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("process.roles", "broker,controller"),
    ("listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093"),
    ("controller.listener.names", "CONTROLLER"),
];

fn props(base: &[(&str, &str)], extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    base.iter().chain(extra).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn load(extra: &[(&str, &str)]) -> Result<(BrokerConfig, Vec<String>), ConfigError> {
    BrokerConfig::from_properties(props(MINIMAL, extra))
}

fn config(extra: &[(&str, &str)]) -> BrokerConfig {
    load(extra).unwrap().0
}

fn error(extra: &[(&str, &str)]) -> String {
    load(extra).unwrap_err().to_string()
}

fn listener(name: &str, host: &str, port: u16) -> Listener {
    Listener { name: name.into(), host: host.into(), port }
}

#[test]
fn defaults_are_kafkas() {
    let (c, warnings) = load(&[]).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(c.node_id, 1);
    assert_eq!(c.process_roles, ["broker", "controller"]);
    assert_eq!(c.inter_broker_listener_name, "PLAINTEXT");
    assert_eq!(c.log_dirs, [PathBuf::from("/tmp/kafka-logs")]);
    assert_eq!(c.metadata_log_dir, PathBuf::from("/tmp/kafka-logs"));
    assert_eq!((c.num_partitions, c.default_replication_factor), (1, 1));
    assert!(c.auto_create_topics_enable && c.delete_topic_enable && c.log_cleaner_enable);
    assert_eq!(c.message_max_bytes, 1_048_588);
    assert_eq!(c.socket_request_max_bytes, 104_857_600);
    assert_eq!((c.num_network_threads, c.num_io_threads), (3, 8));
    assert_eq!(c.connections_max_idle_ms, 600_000);
    assert_eq!(c.max_connections, i32::MAX as usize);
    assert_eq!(c.queued_max_requests, 500);
    assert_eq!(c.log_retention_check_interval_ms, 300_000);
    assert_eq!(c.log_flush_scheduler_interval_ms, i64::MAX);
    assert_eq!(c.log_cleaner_backoff_ms, 15_000);
    assert_eq!(c.group_initial_rebalance_delay_ms, 3_000);
    assert_eq!(c.offsets_topic_num_partitions, 50);
    assert_eq!(c.metrics_listener, None);
    assert!(!c.log_format_json);
    assert_eq!(c.log_level, "info");
    let defaults = &c.topic_defaults;
    assert_eq!(defaults["segment.bytes"], "1073741824");
    assert_eq!(defaults["segment.ms"], "604800000");
    assert_eq!(defaults["retention.ms"], "604800000");
    assert_eq!(defaults["retention.bytes"], "-1");
    assert_eq!(defaults["cleanup.policy"], "delete");
    assert_eq!(defaults["compression.type"], "producer");
    assert_eq!(defaults["message.timestamp.before.max.ms"], i64::MAX.to_string());
    assert_eq!(defaults["message.timestamp.after.max.ms"], "3600000");
    assert_eq!(defaults["unclean.leader.election.enable"], "false");
}

#[test]
fn the_stock_config_loads_without_warnings() {
    let text = include_str!("../../../../../config/server.properties");
    let (c, warnings) = BrokerConfig::from_properties(krabka_format::properties::parse(text)).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(c.log_dirs, [PathBuf::from("data")]);
    assert_eq!(c.advertised_listener(), &listener("PLAINTEXT", "127.0.0.1", 9092));
}

#[test]
fn retention_precedence_is_ms_then_minutes_then_hours() {
    let retention = |extra: &[(&str, &str)]| config(extra).topic_defaults["retention.ms"].clone();
    assert_eq!(retention(&[("log.retention.hours", "1")]), "3600000");
    assert_eq!(retention(&[("log.retention.hours", "1"), ("log.retention.minutes", "2")]), "120000");
    let all = [("log.retention.hours", "1"), ("log.retention.minutes", "2"), ("log.retention.ms", "5")];
    assert_eq!(retention(&all), "5");
    assert_eq!(retention(&[("log.retention.ms", "-1")]), "-1");
    assert_eq!(retention(&[("log.retention.hours", "-5")]), "-1", "any negative means unlimited");
    assert!(error(&[("log.retention.ms", "0")]).contains("log.retention.ms"));
    assert_eq!(config(&[("log.roll.hours", "2")]).topic_defaults["segment.ms"], "7200000");
    let flush = config(&[("log.flush.scheduler.interval.ms", "1000")]);
    assert_eq!(flush.topic_defaults["flush.ms"], "1000", "flush.ms falls back on the scheduler interval");
}

#[test]
fn invalid_values_name_their_key() {
    for (key, value) in [
        ("num.partitions", "0"),
        ("message.max.bytes", "abc"),
        ("listeners", "garbage"),
        ("num.io.threads", "-1"),
        ("auto.create.topics.enable", "yes"),
        ("log.cleanup.policy", "delete,purge"),
        ("log.cleaner.min.cleanable.ratio", "1.5"),
        ("compression.type", "brotli"),
        ("log.segment.bytes", "13"),
        ("log.dirs", ""),
        ("default.replication.factor", "0"),
        ("krabka.log.format", "xml"),
        ("krabka.log.level", "info,[[["),
        ("krabka.metrics.listener", "localhost"),
        ("broker.id", "2"),
        ("process.roles", "zookeeper"),
        ("process.roles", "controller"),
        ("security.inter.broker.protocol", "TLS"),
        ("remote.log.storage.system.enable", "true"),
        ("unstable.api.versions.enable", "true"),
        ("controller.quorum.voters", "2@127.0.0.1:9093"),
        ("controller.quorum.voters", "1@127.0.0.1"),
    ] {
        let message = error(&[(key, value)]);
        assert!(message.contains(key), "{key}={value}: {message}");
    }
    let message = error(&[("log.flush.interval.ms", "-1")]);
    assert!(message.contains("log.flush.interval.ms"), "{message}");
}

#[test]
fn required_keys_are_required() {
    for key in ["node.id", "process.roles", "controller.listener.names"] {
        let mut p = props(MINIMAL, &[]);
        p.remove(key);
        let message = BrokerConfig::from_properties(p).unwrap_err().to_string();
        assert!(message.contains("missing") && message.contains(key), "{message}");
    }
}

#[test]
fn unknown_keys_are_warnings() {
    let (_, warnings) =
        load(&[("zookeeper.connect", "localhost:2181"), ("listener.name.ext.ssl.keystore.type", "PKCS12")]).unwrap();
    assert_eq!(warnings, ["unknown configuration key zookeeper.connect, ignored"]);
}

#[test]
fn listeners_and_advertised_listeners() {
    let c = config(&[]);
    assert_eq!(c.listeners, [listener("PLAINTEXT", "127.0.0.1", 0), listener("CONTROLLER", "127.0.0.1", 9093)]);
    assert_eq!(
        c.advertised_listeners,
        [listener("PLAINTEXT", "127.0.0.1", 0)],
        "controller listeners are not advertised"
    );
    assert_eq!(c.controller_listener_names, ["CONTROLLER"]);
    assert_eq!(c.listener_security_protocols["CONTROLLER"], "PLAINTEXT");

    let broker_only = [("node.id", "2"), ("process.roles", "broker"), ("controller.listener.names", "CONTROLLER")];
    let (c, _) = BrokerConfig::from_properties(props(&broker_only, &[])).unwrap();
    assert_eq!(c.listeners, [listener("PLAINTEXT", "", 9092)], "Kafka's default listener");
    assert_eq!(c.advertised_listener(), &listener("PLAINTEXT", "localhost", 9092));

    let advertised = "CONTROLLER://ctl.example:9093,PLAINTEXT://broker.example:19092";
    let c = config(&[("advertised.listeners", advertised)]);
    assert_eq!(c.advertised_listener(), &listener("PLAINTEXT", "broker.example", 19092));
}

#[test]
fn listener_layouts_kafka_refuses() {
    let ssl = [("listeners", "SSL://:9094,CONTROLLER://:9093"), ("inter.broker.listener.name", "SSL")];
    // An SSL listener needs a PEM keystore (Kafka's default store type is JKS).
    assert!(error(&ssl).contains("ssl.keystore.type"), "{}", error(&ssl));
    let sasl_between_brokers_without_a_mechanism = [
        ("listeners", "SASL_PLAINTEXT://:9094,CONTROLLER://:9093"),
        ("inter.broker.listener.name", "SASL_PLAINTEXT"),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
    ];
    let refused = error(&sasl_between_brokers_without_a_mechanism);
    assert!(refused.contains("sasl.mechanism.inter.broker.protocol"), "{refused}");
    // Kafka's default mechanism, GSSAPI, is not served.
    let sasl_quorum = [("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT")];
    assert!(error(&sasl_quorum).contains("GSSAPI"), "{}", error(&sasl_quorum));
    let unmapped =
        [("listeners", "EXT://:9092,CONTROLLER://:9093"), ("listener.security.protocol.map", "CONTROLLER:PLAINTEXT")];
    assert!(error(&unmapped).contains("no security protocol for listener EXT"));
    assert!(error(&[("advertised.listeners", "PLAINTEXT://0.0.0.0:9092")]).contains("0.0.0.0"));
    assert!(error(&[("advertised.listeners", "OTHER://h:9092")]).contains("not in listeners"));
    assert!(error(&[("inter.broker.listener.name", "CONTROLLER")]).contains("inter.broker.listener.name"));
    let both = [("inter.broker.listener.name", "PLAINTEXT"), ("security.inter.broker.protocol", "PLAINTEXT")];
    assert!(error(&both).contains("not both"));
    assert!(error(&[("listeners", "PLAINTEXT://:9092")]).contains("controller listener CONTROLLER"));
    assert!(error(&[("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://0.0.0.0:9093")]).contains("0.0.0.0"));
    let map_without_controller = [("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT")];
    assert!(error(&map_without_controller).contains("controller listener CONTROLLER"));
    let broker_only = [("node.id", "2"), ("process.roles", "broker"), ("controller.listener.names", "CONTROLLER")];
    let p = props(&broker_only, &[("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093")]);
    assert!(BrokerConfig::from_properties(p).unwrap_err().to_string().contains("broker-only"));
    let p = props(&broker_only, &[("controller.quorum.voters", "2@ctl:9093")]);
    assert!(BrokerConfig::from_properties(p).unwrap_err().to_string().contains("must not be a voter"));
}

const PLAIN_CONTROLLER_LOGIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
    username=\"controller\" password=\"secret\" user_controller=\"secret\";";

#[test]
fn a_sasl_controller_listener_is_served_and_logged_in_to_with_plain() {
    let sasl_quorum = [
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("sasl.mechanism.controller.protocol", "PLAIN"),
        ("listener.name.controller.plain.sasl.jaas.config", PLAIN_CONTROLLER_LOGIN),
    ];
    let c = config(&sasl_quorum);
    let served = c.security.controller_listener("CONTROLLER").expect("the controller listener");
    assert_eq!(served.sasl.as_ref().unwrap().plain_users.keys().collect::<Vec<_>>(), ["controller"]);
    assert!(c.security.client_listener("CONTROLLER").is_none());
    let login = c.security.controller_client.login.as_ref().expect("a login");
    assert_eq!((login.mechanism, login.username.as_str()), (krabka_security::SaslMechanism::Plain, "controller"));
    assert!(c.security.controller_client.tls.is_none());
    // SCRAM's credentials are in the metadata log: not for controllers.
    let mut scram = sasl_quorum.to_vec();
    scram[1] = ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256");
    scram[2] = ("sasl.mechanism.controller.protocol", "SCRAM-SHA-256");
    assert!(error(&scram).contains("sasl.mechanism.controller.protocol"), "{}", error(&scram));
    // A broker-only node logs in without serving the listener.
    let broker_only = [
        ("node.id", "2"),
        ("process.roles", "broker"),
        ("listeners", "PLAINTEXT://:9092"),
        ("controller.listener.names", "CONTROLLER"),
        ("controller.quorum.voters", "1@ctl:9093"),
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"),
        ("sasl.mechanism.controller.protocol", "PLAIN"),
        ("listener.name.controller.plain.sasl.jaas.config", PLAIN_CONTROLLER_LOGIN),
    ];
    let c = BrokerConfig::from_properties(props(&broker_only, &[])).unwrap().0;
    assert!(c.security.controller_listeners.is_empty());
    assert_eq!(c.security.controller_client.login.as_ref().unwrap().username, "controller");
}

#[test]
fn a_controller_only_node_listens_on_its_controller_listener_alone() {
    let controller = [
        ("node.id", "3"),
        ("process.roles", "controller"),
        ("controller.listener.names", "CONTROLLER"),
        ("controller.quorum.voters", "3@10.0.0.3:9093"),
    ];
    let (c, _) =
        BrokerConfig::from_properties(props(&controller, &[("listeners", "CONTROLLER://10.0.0.3:9093")])).unwrap();
    assert!(c.is_controller() && !c.is_broker());
    assert_eq!(c.listeners, [listener("CONTROLLER", "10.0.0.3", 9093)]);
    let with_clients = props(&controller, &[("listeners", "PLAINTEXT://:9092,CONTROLLER://10.0.0.3:9093")]);
    let refused = BrokerConfig::from_properties(with_clients).unwrap_err().to_string();
    assert!(refused.contains("controller listeners only, not PLAINTEXT"), "{refused}");
}

#[test]
fn log_dirs_and_krabka_keys() {
    let c = config(&[("log.dir", "/a"), ("log.dirs", "/b, /c"), ("metadata.log.dir", "/m")]);
    assert_eq!(c.log_dirs, [PathBuf::from("/b"), PathBuf::from("/c")]);
    assert_eq!(c.metadata_log_dir, PathBuf::from("/m"));
    assert_eq!(config(&[("log.dir", "/a")]).log_dirs, [PathBuf::from("/a")]);
    let c = config(&[
        ("krabka.metrics.listener", "127.0.0.1:9404"),
        ("krabka.log.format", "json"),
        ("krabka.log.level", "info,krabka_broker=debug"),
    ]);
    assert_eq!(c.metrics_listener.as_deref(), Some("127.0.0.1:9404"));
    assert!(c.log_format_json);
    assert_eq!(c.log_level, "info,krabka_broker=debug");
}

#[test]
fn describe_reports_sources_and_read_only() {
    let c = config(&[("num.io.threads", "16"), ("ssl.key.password", "secret"), ("log.retention.hours", "24")]);
    let entries = c.describe(&crate::config::DynamicConfigs::none());
    assert!(entries.windows(2).all(|w| w[0].name < w[1].name));
    let entry = |name: &str| entries.iter().find(|e| e.name == name).unwrap().clone();

    let node = entry("node.id");
    assert_eq!((node.value.as_deref(), node.source, node.read_only), (Some("1"), ConfigSource::StaticBroker, true));
    let io = entry("num.io.threads");
    assert_eq!((io.value.as_deref(), io.source, io.read_only), (Some("16"), ConfigSource::StaticBroker, false));
    assert_eq!(io.config_type, ConfigType::Int);
    assert_eq!(io.synonyms.len(), 2, "the static value, then the default");
    let partitions = entry("num.partitions");
    assert_eq!((partitions.value.as_deref(), partitions.source), (Some("1"), ConfigSource::Default));
    let retention_ms = entry("log.retention.ms");
    assert_eq!((retention_ms.value, retention_ms.source), (None, ConfigSource::Default), "null default");
    assert_eq!(entry("log.retention.hours").source, ConfigSource::StaticBroker);
    let password = entry("ssl.key.password");
    assert!(password.sensitive && password.value.is_none());
    assert_eq!(password.synonyms, [("ssl.key.password".into(), None, ConfigSource::StaticBroker)]);
    assert_eq!(entry("log.cleanup.policy").config_type, ConfigType::List);
}

#[test]
fn the_quorum_voters_and_timers_are_read_as_kafka_reads_them() {
    let voters = "1@127.0.0.1:9093, 2@[::1]:9094,3@ctl-3.example:9095";
    let c = config(&[("controller.quorum.voters", voters), ("controller.quorum.fetch.timeout.ms", "3000")]);
    let address = |host: &str, port| VoterAddress { host: host.into(), port };
    let expected = [(1, address("127.0.0.1", 9093)), (2, address("::1", 9094)), (3, address("ctl-3.example", 9095))];
    assert_eq!(c.quorum.voters, expected.into_iter().collect::<BTreeMap<_, _>>());
    assert_eq!((c.quorum.election_timeout_ms, c.quorum.fetch_timeout_ms), (1000, 3000));
    assert_eq!((c.quorum.retry_backoff_ms, c.quorum.request_timeout_ms), (20, 2000));
    assert!(config(&[]).quorum.voters.is_empty(), "a combined node may keep its quorum to itself");
    // Kafka keeps an id's last address, and refuses a non-routable one.
    let twice = config(&[("controller.quorum.voters", "1@a:1,1@b:2")]);
    assert_eq!(twice.quorum.voters[&1], address("b", 2));
    assert!(error(&[("controller.quorum.voters", "1@0.0.0.0:9093")]).contains("not routable"));
    for bad in ["1@:9093", "x@h:1", "1@h:99999", "-1@h:1", "1h:1"] {
        assert!(error(&[("controller.quorum.voters", bad)]).contains("controller.quorum.voters"), "{bad}");
    }
}

#[test]
fn connection_limits_per_ip() {
    let c = config(&[("max.connections.per.ip", "5"), ("max.connections.per.ip.overrides", "127.0.0.2:1, [::1]:7")]);
    assert_eq!(c.max_connections_per_ip, 5);
    let overrides: Vec<(String, usize)> =
        c.max_connections_per_ip_overrides.iter().map(|(ip, n)| (ip.to_string(), *n)).collect();
    assert_eq!(overrides, [("127.0.0.2".to_string(), 1), ("::1".to_string(), 7)]);
    assert!(error(&[("max.connections.per.ip", "0")]).contains("only if max.connections.per.ip.overrides"));
    assert!(error(&[("max.connections.per.ip.overrides", "127.0.0.1")]).contains("not host:count"));
    let zero_with_overrides =
        config(&[("max.connections.per.ip", "0"), ("max.connections.per.ip.overrides", "10.0.0.1:3")]);
    assert_eq!(zero_with_overrides.max_connections_per_ip, 0);
}
