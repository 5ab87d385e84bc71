//! Every broker key krabka knows: Kafka 4.3's names, types, defaults and validators.
//!
//! Kafka accepts a large set of keys in server.properties; an operator moving a
//! file over must not be told that `socket.send.buffer.bytes` is unknown. So
//! the table holds the keys krabka acts on and the common keys it accepts
//! without acting on them; both are type-checked and described. `dynamic`
//! marks the keys Kafka can change at runtime, which DescribeConfigs reports
//! as not read-only.

use std::collections::BTreeMap;

use krabka_log::config_values::{canonical, int_or, Check, ConfigError, ConfigType};
pub(crate) use krabka_log::topic_config::{CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES, ZSTD_LEVELS};

pub(crate) struct BrokerKey {
    pub name: &'static str,
    pub ty: ConfigType,
    /// Kafka's default in canonical form; None where Kafka's default is null.
    pub default: Option<&'static str>,
    pub check: Check,
    pub dynamic: bool,
}

impl BrokerKey {
    const fn new(name: &'static str, ty: ConfigType, default: Option<&'static str>, check: Check) -> BrokerKey {
        BrokerKey { name, ty, default, check, dynamic: false }
    }

    const fn dynamic(mut self) -> BrokerKey {
        self.dynamic = true;
        self
    }

    pub fn sensitive(&self) -> bool {
        self.ty == ConfigType::Password
    }
}

const fn int(name: &'static str, default: Option<&'static str>, check: Check) -> BrokerKey {
    BrokerKey::new(name, ConfigType::Int, default, check)
}
const fn short(name: &'static str, default: &'static str, check: Check) -> BrokerKey {
    BrokerKey::new(name, ConfigType::Short, Some(default), check)
}
const fn long(name: &'static str, default: Option<&'static str>, check: Check) -> BrokerKey {
    BrokerKey::new(name, ConfigType::Long, default, check)
}
const fn double(name: &'static str, default: &'static str, check: Check) -> BrokerKey {
    BrokerKey::new(name, ConfigType::Double, Some(default), check)
}
const fn boolean(name: &'static str, default: bool) -> BrokerKey {
    BrokerKey::new(name, ConfigType::Boolean, Some(if default { "true" } else { "false" }), Check::Any)
}
const fn string(name: &'static str, default: Option<&'static str>) -> BrokerKey {
    BrokerKey::new(name, ConfigType::String, default, Check::Any)
}
const fn one_of(name: &'static str, default: &'static str, allowed: &'static [&'static str]) -> BrokerKey {
    BrokerKey::new(name, ConfigType::String, Some(default), Check::OneOf(allowed))
}
const fn list(name: &'static str, default: Option<&'static str>, check: Check) -> BrokerKey {
    BrokerKey::new(name, ConfigType::List, default, check)
}
const fn class(name: &'static str, default: Option<&'static str>) -> BrokerKey {
    BrokerKey::new(name, ConfigType::Class, default, Check::Any)
}
const fn password(name: &'static str) -> BrokerKey {
    BrokerKey::new(name, ConfigType::Password, None, Check::Any)
}

const INT_MAX: Option<&str> = Some("2147483647");
const LONG_MAX: Option<&str> = Some("9223372036854775807");
const fn some(default: &'static str) -> Option<&'static str> {
    Some(default)
}
use Check::{Any, AtLeast, Between};

pub(crate) const SECURITY_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/// Kafka's default `listener.security.protocol.map`.
pub(crate) const DEFAULT_PROTOCOL_MAP: &str =
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";

#[rustfmt::skip]
pub(crate) static BROKER_KEYS: &[BrokerKey] = &[
    // Identity, roles and listeners.
    int("node.id", None, AtLeast(0)),
    int("broker.id", some("-1"), Any),
    list("process.roles", None, Check::ListOf(&["broker", "controller"])),
    string("broker.rack", None),
    string("listeners", some("PLAINTEXT://:9092")).dynamic(),
    string("advertised.listeners", None).dynamic(),
    string("controller.listener.names", None),
    string("inter.broker.listener.name", None),
    one_of("security.inter.broker.protocol", "PLAINTEXT", SECURITY_PROTOCOLS),
    string("listener.security.protocol.map", some(DEFAULT_PROTOCOL_MAP)).dynamic(),
    string("early.start.listeners", None),
    list("controller.quorum.voters", some(""), Any),
    list("controller.quorum.bootstrap.servers", some(""), Any),
    int("controller.quorum.election.timeout.ms", some("1000"), Any),
    int("controller.quorum.fetch.timeout.ms", some("2000"), Any),
    int("controller.quorum.election.backoff.max.ms", some("1000"), Any),
    int("controller.quorum.append.linger.ms", some("25"), Any),
    int("controller.quorum.request.timeout.ms", some("2000"), Any),
    int("controller.quorum.retry.backoff.ms", some("20"), Any),
    int("controller.quorum.fetch.max.bytes", some("1048576"), AtLeast(1)),
    int("controller.quorum.fetch.snapshot.max.bytes", some("1048576"), AtLeast(1)),
    boolean("controller.quorum.auto.join.enable", false),
    string("sasl.mechanism.controller.protocol", some("GSSAPI")),
    int("initial.broker.registration.timeout.ms", some("60000"), Any),
    int("broker.heartbeat.interval.ms", some("2000"), Any),
    int("broker.session.timeout.ms", some("9000"), Any),
    long("server.max.startup.time.ms", LONG_MAX, AtLeast(0)),
    boolean("unstable.api.versions.enable", false),
    boolean("unstable.feature.versions.enable", false),

    // Metadata log.
    string("metadata.log.dir", None),
    int("metadata.log.segment.bytes", some("1073741824"), AtLeast(12)),
    long("metadata.log.segment.ms", some("604800000"), Any),
    long("metadata.max.retention.bytes", some("104857600"), Any),
    long("metadata.max.retention.ms", some("604800000"), Any),
    long("metadata.log.max.snapshot.interval.ms", some("3600000"), AtLeast(0)),
    long("metadata.log.max.record.bytes.between.snapshots", some("20971520"), AtLeast(1)),
    int("metadata.max.idle.interval.ms", some("500"), AtLeast(0)),

    // Network and request handling.
    int("num.network.threads", some("3"), AtLeast(1)).dynamic(),
    int("num.io.threads", some("8"), AtLeast(1)).dynamic(),
    int("background.threads", some("10"), AtLeast(1)).dynamic(),
    int("queued.max.requests", some("500"), AtLeast(1)),
    long("queued.max.request.bytes", some("-1"), Any),
    int("socket.send.buffer.bytes", some("102400"), Any),
    int("socket.receive.buffer.bytes", some("102400"), Any),
    int("socket.request.max.bytes", some("104857600"), AtLeast(1)),
    int("socket.listen.backlog.size", some("50"), AtLeast(1)),
    long("connections.max.idle.ms", some("600000"), Any),
    long("connections.max.reauth.ms", some("0"), Any),
    int("connection.failed.authentication.delay.ms", some("100"), AtLeast(0)),
    int("sasl.server.max.receive.size", some("524288"), AtLeast(1)),
    int("max.connections", INT_MAX, AtLeast(0)).dynamic(),
    int("max.connections.per.ip", INT_MAX, AtLeast(0)).dynamic(),
    string("max.connections.per.ip.overrides", some("")).dynamic(),
    int("max.connection.creation.rate", INT_MAX, AtLeast(0)).dynamic(),
    int("request.timeout.ms", some("30000"), AtLeast(0)),
    long("socket.connection.setup.timeout.ms", some("10000"), Any),
    long("socket.connection.setup.timeout.max.ms", some("30000"), Any),
    int("message.max.bytes", some("1048588"), AtLeast(0)).dynamic(),
    int("fetch.max.bytes", some("57671680"), AtLeast(1024)),
    int("max.request.partition.size.limit", some("2000"), AtLeast(1)),
    int("max.incremental.fetch.session.cache.slots", some("1000"), AtLeast(0)),
    boolean("controlled.shutdown.enable", true),

    // Topics and the log.
    int("num.partitions", some("1"), AtLeast(1)),
    // Kafka has no validator here; krabka stores it as a replication factor (INT16 >= 1).
    int("default.replication.factor", some("1"), Between(1, i16::MAX as i64)),
    boolean("auto.create.topics.enable", true),
    boolean("delete.topic.enable", true),
    int("min.insync.replicas", some("1"), AtLeast(1)).dynamic(),
    boolean("unclean.leader.election.enable", false).dynamic(),
    one_of("compression.type", "producer", COMPRESSION_TYPES).dynamic(),
    int("compression.gzip.level", some("-1"), Check::GzipLevel).dynamic(),
    int("compression.lz4.level", some("9"), Between(1, 17)).dynamic(),
    int("compression.zstd.level", some("3"), ZSTD_LEVELS).dynamic(),
    list("log.dirs", None, Check::NonEmptyList),
    list("log.dir", some("/tmp/kafka-logs"), Check::NonEmptyList),
    // Kafka 4 wants >= 1 MiB unless its internal test key is used; krabka keeps
    // the old floor (one v0 record header) so small segments stay testable.
    int("log.segment.bytes", some("1073741824"), AtLeast(14)).dynamic(),
    long("log.roll.ms", None, Any).dynamic(),
    int("log.roll.hours", some("168"), AtLeast(1)),
    long("log.roll.jitter.ms", None, Any).dynamic(),
    int("log.roll.jitter.hours", some("0"), AtLeast(0)),
    long("log.retention.ms", None, Any).dynamic(),
    int("log.retention.minutes", None, Any),
    int("log.retention.hours", some("168"), Any),
    long("log.retention.bytes", some("-1"), Any).dynamic(),
    long("log.retention.check.interval.ms", some("300000"), AtLeast(1)),
    list("log.cleanup.policy", some("delete"), Check::ListOf(CLEANUP_POLICIES)).dynamic(),
    int("log.index.size.max.bytes", some("10485760"), AtLeast(4)).dynamic(),
    int("log.index.interval.bytes", some("4096"), AtLeast(0)).dynamic(),
    long("log.flush.interval.messages", LONG_MAX, AtLeast(1)).dynamic(),
    long("log.flush.interval.ms", None, Any).dynamic(),
    long("log.flush.scheduler.interval.ms", LONG_MAX, Any),
    int("log.flush.offset.checkpoint.interval.ms", some("60000"), AtLeast(0)),
    int("log.flush.start.offset.checkpoint.interval.ms", some("60000"), AtLeast(0)),
    long("log.segment.delete.delay.ms", some("60000"), AtLeast(0)).dynamic(),
    boolean("log.preallocate", false).dynamic(),
    one_of("log.message.timestamp.type", "CreateTime", TIMESTAMP_TYPES).dynamic(),
    long("log.message.timestamp.before.max.ms", LONG_MAX, AtLeast(0)).dynamic(),
    long("log.message.timestamp.after.max.ms", some("3600000"), AtLeast(0)).dynamic(),
    long("log.local.retention.ms", some("-2"), AtLeast(-2)).dynamic(),
    long("log.local.retention.bytes", some("-2"), AtLeast(-2)).dynamic(),
    long("log.dir.failure.timeout.ms", some("30000"), AtLeast(1)),
    int("num.recovery.threads.per.data.dir", some("2"), AtLeast(1)).dynamic(),
    class("create.topic.policy.class.name", None),
    class("alter.config.policy.class.name", None),

    // The log cleaner.
    boolean("log.cleaner.enable", true),
    int("log.cleaner.threads", some("1"), AtLeast(0)).dynamic(),
    long("log.cleaner.backoff.ms", some("15000"), AtLeast(0)).dynamic(),
    long("log.cleaner.dedupe.buffer.size", some("134217728"), Any).dynamic(),
    int("log.cleaner.io.buffer.size", some("524288"), AtLeast(0)).dynamic(),
    double("log.cleaner.io.buffer.load.factor", "0.9", Any).dynamic(),
    double("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", Any).dynamic(),
    double("log.cleaner.min.cleanable.ratio", "0.5", Check::Ratio).dynamic(),
    long("log.cleaner.delete.retention.ms", some("86400000"), AtLeast(0)).dynamic(),
    long("log.cleaner.min.compaction.lag.ms", some("0"), AtLeast(0)).dynamic(),
    long("log.cleaner.max.compaction.lag.ms", LONG_MAX, AtLeast(1)).dynamic(),

    // Replication.
    int("num.replica.fetchers", some("1"), AtLeast(1)).dynamic(),
    int("num.replica.alter.log.dirs.threads", None, AtLeast(1)),
    long("replica.lag.time.max.ms", some("30000"), Any),
    int("replica.socket.timeout.ms", some("30000"), Any),
    int("replica.socket.receive.buffer.bytes", some("65536"), Any),
    int("replica.fetch.max.bytes", some("1048576"), AtLeast(0)),
    int("replica.fetch.wait.max.ms", some("500"), Any),
    int("replica.fetch.min.bytes", some("1"), Any),
    int("replica.fetch.backoff.ms", some("1000"), AtLeast(0)),
    int("replica.fetch.response.max.bytes", some("10485760"), AtLeast(0)),
    long("replica.high.watermark.checkpoint.interval.ms", some("5000"), Any),
    class("replica.selector.class", None),
    int("fetch.purgatory.purge.interval.requests", some("1000"), Any),
    int("producer.purgatory.purge.interval.requests", some("1000"), Any),
    int("delete.records.purgatory.purge.interval.requests", some("1"), Any),
    boolean("auto.leader.rebalance.enable", true),
    int("leader.imbalance.per.broker.percentage", some("10"), Any),
    long("leader.imbalance.check.interval.seconds", some("300"), AtLeast(1)),
    long("unclean.leader.election.interval.ms", some("300000"), Any),
    int("controller.socket.timeout.ms", some("30000"), Any),

    // Group coordinator and committed offsets.
    int("group.initial.rebalance.delay.ms", some("3000"), Any),
    int("group.min.session.timeout.ms", some("6000"), Any),
    int("group.max.session.timeout.ms", some("1800000"), Any),
    int("group.max.size", INT_MAX, AtLeast(1)),
    list("group.coordinator.rebalance.protocols", some("classic,consumer,streams"), Any),
    int("group.coordinator.threads", some("4"), AtLeast(1)),
    int("group.coordinator.background.threads", some("2"), AtLeast(1)),
    int("group.coordinator.append.linger.ms", some("-1"), AtLeast(-1)),
    int("group.consumer.session.timeout.ms", some("45000"), AtLeast(1)),
    int("group.consumer.min.session.timeout.ms", some("45000"), AtLeast(1)),
    int("group.consumer.max.session.timeout.ms", some("60000"), AtLeast(1)),
    int("group.consumer.heartbeat.interval.ms", some("5000"), AtLeast(1)),
    int("group.consumer.min.heartbeat.interval.ms", some("5000"), AtLeast(1)),
    int("group.consumer.max.heartbeat.interval.ms", some("15000"), AtLeast(1)),
    int("group.consumer.max.size", INT_MAX, AtLeast(1)),
    list("group.consumer.assignors", some("uniform,range"), Any),
    one_of("group.consumer.migration.policy", "bidirectional", &["disabled", "downgrade", "upgrade", "bidirectional"]),
    int("group.share.session.timeout.ms", some("45000"), AtLeast(1)),
    int("group.share.min.session.timeout.ms", some("45000"), AtLeast(1)),
    int("group.share.max.session.timeout.ms", some("60000"), AtLeast(1)),
    int("group.share.heartbeat.interval.ms", some("5000"), AtLeast(1)),
    int("group.share.min.heartbeat.interval.ms", some("5000"), AtLeast(1)),
    int("group.share.max.heartbeat.interval.ms", some("15000"), AtLeast(1)),
    int("group.share.max.size", some("200"), AtLeast(1)),
    int("group.share.delivery.count.limit", some("5"), Any),
    int("group.share.record.lock.duration.ms", some("30000"), Any),
    int("group.share.min.record.lock.duration.ms", some("15000"), Any),
    int("group.share.max.record.lock.duration.ms", some("60000"), Any),
    int("group.share.partition.max.record.locks", some("2000"), Any),
    list("group.share.assignors", some("simple"), Any),
    int("group.streams.session.timeout.ms", some("45000"), AtLeast(1)),
    int("group.streams.min.session.timeout.ms", some("45000"), AtLeast(1)),
    int("group.streams.max.session.timeout.ms", some("60000"), AtLeast(1)),
    int("group.streams.heartbeat.interval.ms", some("5000"), AtLeast(1)),
    int("group.streams.min.heartbeat.interval.ms", some("5000"), AtLeast(1)),
    int("group.streams.max.heartbeat.interval.ms", some("15000"), AtLeast(1)),
    int("group.streams.max.size", INT_MAX, AtLeast(1)),
    int("group.streams.num.standby.replicas", some("0"), AtLeast(0)),
    int("group.streams.max.standby.replicas", some("2"), AtLeast(0)),
    int("group.streams.initial.rebalance.delay.ms", some("3000"), AtLeast(0)),
    int("offsets.topic.num.partitions", some("50"), AtLeast(1)),
    short("offsets.topic.replication.factor", "3", AtLeast(1)),
    int("offsets.topic.segment.bytes", some("104857600"), AtLeast(1)),
    int("offsets.topic.compression.codec", some("0"), Any),
    int("offsets.load.buffer.size", some("5242880"), AtLeast(1)),
    int("offsets.retention.minutes", some("10080"), AtLeast(1)),
    long("offsets.retention.check.interval.ms", some("600000"), AtLeast(1)),
    int("offsets.commit.timeout.ms", some("5000"), AtLeast(1)),
    int("offset.metadata.max.bytes", some("4096"), Any),

    // Share coordinator.
    int("share.coordinator.state.topic.num.partitions", some("50"), AtLeast(1)),
    short("share.coordinator.state.topic.replication.factor", "3", AtLeast(1)),
    short("share.coordinator.state.topic.min.isr", "2", AtLeast(1)),
    int("share.coordinator.state.topic.segment.bytes", some("104857600"), AtLeast(1)),
    int("share.coordinator.state.topic.compression.codec", some("0"), Any),
    int("share.coordinator.threads", some("1"), AtLeast(1)),
    int("share.coordinator.snapshot.update.records.per.snapshot", some("500"), AtLeast(0)),
    int("share.coordinator.write.timeout.ms", some("5000"), AtLeast(1)),
    int("share.coordinator.load.buffer.size", some("5242880"), AtLeast(1)),
    int("share.coordinator.append.linger.ms", some("-1"), AtLeast(-1)),
    int("share.fetch.purgatory.purge.interval.requests", some("1000"), Any),

    // Transactions and producer state.
    int("transaction.state.log.num.partitions", some("50"), AtLeast(1)),
    short("transaction.state.log.replication.factor", "3", AtLeast(1)),
    int("transaction.state.log.min.isr", some("2"), AtLeast(1)),
    int("transaction.state.log.segment.bytes", some("104857600"), AtLeast(1)),
    int("transaction.state.log.load.buffer.size", some("5242880"), AtLeast(1)),
    int("transaction.max.timeout.ms", some("900000"), AtLeast(1)),
    int("transactional.id.expiration.ms", some("604800000"), AtLeast(1)),
    int("transaction.abort.timed.out.transaction.cleanup.interval.ms", some("10000"), AtLeast(1)),
    int("transaction.remove.expired.transaction.cleanup.interval.ms", some("3600000"), AtLeast(1)),
    boolean("transaction.partition.verification.enable", true).dynamic(),
    boolean("transaction.two.phase.commit.enable", false),
    int("add.partitions.to.txn.retry.backoff.max.ms", some("100"), AtLeast(0)),
    int("add.partitions.to.txn.retry.backoff.ms", some("20"), AtLeast(1)),
    int("producer.id.expiration.ms", some("86400000"), AtLeast(1)).dynamic(),
    int("producer.id.expiration.check.interval.ms", some("600000"), AtLeast(1)),

    // Tiered storage (krabka refuses to enable it).
    boolean("remote.log.storage.system.enable", false),
    string("remote.log.storage.manager.class.name", None),
    string("remote.log.storage.manager.class.path", None),
    string("remote.log.metadata.manager.class.name", some("org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager")),
    string("remote.log.metadata.manager.listener.name", None),
    long("remote.log.index.file.cache.total.size.bytes", some("1073741824"), AtLeast(1)).dynamic(),

    // Quotas.
    int("quota.window.num", some("11"), AtLeast(1)),
    int("quota.window.size.seconds", some("1"), AtLeast(1)),
    int("replication.quota.window.num", some("11"), AtLeast(1)),
    int("replication.quota.window.size.seconds", some("1"), AtLeast(1)),
    int("alter.log.dirs.replication.quota.window.num", some("11"), AtLeast(1)),
    int("alter.log.dirs.replication.quota.window.size.seconds", some("1"), AtLeast(1)),
    int("controller.quota.window.num", some("11"), AtLeast(1)),
    int("controller.quota.window.size.seconds", some("1"), AtLeast(1)),
    class("client.quota.callback.class", None),

    // Metrics.
    long("metrics.sample.window.ms", some("30000"), AtLeast(0)),
    int("metrics.num.samples", some("2"), AtLeast(1)),
    one_of("metrics.recording.level", "INFO", &["INFO", "DEBUG", "TRACE"]),
    list("metric.reporters", some("org.apache.kafka.common.metrics.JmxReporter"), Any).dynamic(),
    list("kafka.metrics.reporters", some(""), Any),
    int("kafka.metrics.polling.interval.secs", some("10"), AtLeast(1)),
    int("telemetry.max.bytes", some("1048576"), AtLeast(1)),

    // Security: SASL (PLAIN, SCRAM) and TLS with PEM stores are served
    // (config/security.rs, config/tls.rs); the rest is accepted so stock
    // files load.
    string("authorizer.class.name", some("")),
    string("super.users", None),
    boolean("allow.everyone.if.no.acl.found", false),
    class("principal.builder.class", some("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder")).dynamic(),
    list("sasl.enabled.mechanisms", some("GSSAPI"), Any).dynamic(),
    string("sasl.mechanism.inter.broker.protocol", some("GSSAPI")).dynamic(),
    password("sasl.jaas.config").dynamic(),
    string("sasl.kerberos.service.name", None).dynamic(),
    one_of("ssl.client.auth", "none", &["required", "requested", "none"]).dynamic(),
    string("ssl.protocol", some("TLSv1.3")).dynamic(),
    list("ssl.enabled.protocols", some("TLSv1.2,TLSv1.3"), Any).dynamic(),
    list("ssl.cipher.suites", some(""), Any).dynamic(),
    string("ssl.endpoint.identification.algorithm", some("https")).dynamic(),
    string("ssl.keystore.type", some("JKS")).dynamic(),
    string("ssl.keystore.location", None).dynamic(),
    password("ssl.keystore.password").dynamic(),
    password("ssl.key.password").dynamic(),
    string("ssl.truststore.type", some("JKS")).dynamic(),
    string("ssl.truststore.location", None).dynamic(),
    password("ssl.truststore.password").dynamic(),
    password("ssl.keystore.key").dynamic(),
    password("ssl.keystore.certificate.chain").dynamic(),
    password("ssl.truststore.certificates").dynamic(),
    string("ssl.principal.mapping.rules", some("DEFAULT")),
    password("delegation.token.secret.key"),
    long("delegation.token.max.lifetime.ms", some("604800000"), AtLeast(1)),
    long("delegation.token.expiry.time.ms", some("86400000"), AtLeast(1)),
    long("delegation.token.expiry.check.interval.ms", some("3600000"), AtLeast(1)),
    list("config.providers", some(""), Any),

    // krabka's own keys.
    string("krabka.metrics.listener", None),
    one_of("krabka.log.format", "text", &["text", "json"]),
    string("krabka.log.level", some("info")),
];

/// The known keys of a property set, validated and in canonical form.
#[derive(Clone)]
pub(crate) struct KeyValues {
    set: BTreeMap<&'static str, String>,
}

impl KeyValues {
    /// Validates every known key; unknown keys become warnings.
    pub(crate) fn read(props: &BTreeMap<String, String>) -> Result<(KeyValues, Vec<String>), ConfigError> {
        let mut set = BTreeMap::new();
        let mut warnings = Vec::new();
        for (name, value) in props {
            match broker_key(name) {
                Some(key) => {
                    set.insert(key.name, canonical(key.name, key.ty, key.check, value)?);
                }
                None if is_listener_prefixed(name) => {}
                None => warnings.push(format!("unknown configuration key {name}, ignored")),
            }
        }
        Ok((KeyValues { set }, warnings))
    }

    /// Like `read`, for properties already validated: skips what does not parse.
    pub(crate) fn lossy(props: &BTreeMap<String, String>) -> KeyValues {
        let set = props
            .iter()
            .filter_map(|(name, value)| {
                let key = broker_key(name)?;
                Some((key.name, canonical(key.name, key.ty, key.check, value).ok()?))
            })
            .collect();
        KeyValues { set }
    }

    /// The value given in the properties, if any.
    pub(crate) fn set(&self, name: &str) -> Option<&str> {
        self.set.get(name).map(String::as_str)
    }

    /// The value given, else Kafka's default (None where that is null).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.set(name).or_else(|| broker_key(name).and_then(|key| key.default))
    }

    pub(crate) fn int(&self, name: &str) -> i64 {
        int_or(self.get(name), 0)
    }

    pub(crate) fn boolean(&self, name: &str) -> bool {
        self.get(name) == Some("true")
    }
}

pub(crate) fn broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|key| key.name == name)
}

/// Keys Kafka takes per listener (`listener.name.<listener>.<key>`); accepted, not used.
pub(crate) fn is_listener_prefixed(name: &str) -> bool {
    name.strip_prefix("listener.name.")
        .is_some_and(|rest| rest.split_once('.').is_some_and(|(l, k)| !l.is_empty() && !k.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_defaults_pass_their_own_checks() {
        for (i, key) in BROKER_KEYS.iter().enumerate() {
            assert!(BROKER_KEYS[..i].iter().all(|k| k.name != key.name), "{} twice", key.name);
            if let Some(default) = key.default {
                let canonical = canonical(key.name, key.ty, key.check, default).unwrap();
                assert_eq!(canonical, default, "{} default is not canonical", key.name);
            }
        }
    }
}
