//! Dynamic broker configs through Kafka's own `kafka-configs.sh`: the
//! cluster-wide default (`--entity-default`) and one broker's
//! (`--entity-name`), described as Kafka 4.3.1 describes them, refused
//! where Kafka refuses them (the expected lines below are what Kafka
//! 4.3.1 printed for the same commands), and applied: a cluster-wide
//! `min.insync.replicas` that acks=all cannot meet is refused with
//! NOT_ENOUGH_REPLICAS, a broker's own `log.segment.bytes` rolls its
//! segments, and both hold across a restart.

mod support;

use std::time::Duration;

use support::{idempotent_perf_producer_with, kafka_cli, wait_for, BrokerProcess};

fn configs(broker: &BrokerProcess, args: &[&str]) -> (bool, String) {
    let bootstrap = broker.bootstrap();
    let base = ["--bootstrap-server", bootstrap.as_str(), "--entity-type", "brokers"];
    kafka_cli("kafka-configs", &base.iter().chain(args).copied().collect::<Vec<_>>())
}

fn assert_lines(printed: &str, expected: &[&str]) {
    for line in expected {
        assert!(printed.lines().any(|l| l.trim() == *line), "no line {line:?} in:\n{printed}");
    }
}

fn segments(broker: &BrokerProcess, topic: &str) -> usize {
    let dir = broker.data_dir().join(format!("{topic}-0"));
    let files = std::fs::read_dir(&dir).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
    files.iter().filter(|f| f.file_name().to_string_lossy().ends_with(".log")).count()
}

fn create_topic(broker: &BrokerProcess, topic: &str) {
    let bootstrap = broker.bootstrap();
    let args = ["--bootstrap-server", &bootstrap, "--create", "--topic", topic, "--partitions", "1"];
    let (ok, printed) = kafka_cli("kafka-topics", &args);
    assert!(ok, "{printed}");
}

/// acks=all with a short delivery timeout: whether all were sent, and what the producer printed.
fn produce(broker: &BrokerProcess, topic: &str, records: usize) -> (bool, String) {
    // Small batches, so that 2,000-byte segments roll every batch or two.
    let fast_failure = ["delivery.timeout.ms=4000", "request.timeout.ms=2000", "linger.ms=0", "batch.size=1024"];
    idempotent_perf_producer_with(&broker.bootstrap(), topic, records, &fast_failure)
}

#[test]
fn kafka_configs_sets_cluster_and_broker_defaults_that_brokers_apply() {
    let mut broker = BrokerProcess::start(&[]);
    let set =
        ["--alter", "--entity-default", "--add-config", "min.insync.replicas=2,log.retention.ms=100000,foo.bar=1"];
    let (ok, printed) = configs(&broker, &set);
    assert!(ok && printed.contains("Completed updating default config for brokers in the cluster."), "{printed}");
    let (_, printed) = configs(&broker, &["--describe", "--entity-default"]);
    assert_lines(
        &printed,
        &[
            "foo.bar=null sensitive=true synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:foo.bar=null}",
            "log.retention.ms=100000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=100000}",
            "min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2}",
        ],
    );

    // Refused as Kafka 4.3.1 refuses them (ELR is on in a new cluster).
    let refusals = [
        (
            vec!["--entity-name", "1", "--add-config", "min.insync.replicas=1"],
            "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
        ),
        (
            vec!["--entity-default", "--delete-config", "min.insync.replicas"],
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
        ),
        (
            vec!["--entity-default", "--add-config", "broker.id=5"],
            "InvalidRequestException: Cannot update these configs dynamically: [broker.id]",
        ),
        (
            vec!["--entity-default", "--add-config", "log.retention.ms=abc"],
            "InvalidRequestException: Invalid value abc for configuration log.retention.ms: Not a number of type LONG",
        ),
    ];
    for (args, message) in refusals {
        let (ok, printed) = configs(&broker, &[&["--alter"], args.as_slice()].concat());
        assert!(!ok && printed.contains(message), "{args:?}: expected {message:?} in:\n{printed}");
    }

    // One broker's own, over the cluster's.
    let own = ["--alter", "--entity-name", "1", "--add-config", "log.segment.bytes=2000"];
    let (ok, printed) = configs(&broker, &own);
    assert!(ok && printed.contains("Completed updating config for broker 1."), "{printed}");
    // Without --all, only the broker's own (Kafka prints the same).
    let (_, printed) = configs(&broker, &["--describe", "--entity-name", "1"]);
    let own_line = "log.segment.bytes=2000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.segment.bytes=2000, DEFAULT_CONFIG:log.segment.bytes=1073741824}";
    assert_lines(&printed, &["Dynamic configs for broker 1 are:", own_line]);
    assert!(!printed.contains("log.retention.ms"), "{printed}");
    let (_, printed) = configs(&broker, &["--describe", "--entity-name", "1", "--all"]);
    assert_lines(
        &printed,
        &[
            own_line,
            "log.retention.ms=100000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=100000, DEFAULT_CONFIG:log.retention.hours=168}",
            "min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}",
        ],
    );

    create_topic(&broker, "dyn");
    let bootstrap = broker.bootstrap();
    let (_, printed) = kafka_cli(
        "kafka-configs",
        &["--bootstrap-server", &bootstrap, "--entity-type", "topics", "--entity-name", "dyn", "--describe", "--all"],
    );
    assert_lines(
        &printed,
        &["retention.ms=100000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=100000, DEFAULT_CONFIG:log.retention.hours=168}"],
    );

    // The cluster's min.insync.replicas=2 on one broker: acks=all is refused.
    let (ok, printed) = produce(&broker, "dyn", 10);
    assert!(!ok && printed.contains("NOT_ENOUGH_REPLICAS"), "{printed}");
    let lower = ["--alter", "--entity-default", "--add-config", "min.insync.replicas=1"];
    assert!(configs(&broker, &lower).0);
    wait_for("acks=all taken with min.insync.replicas=1", Duration::from_secs(30), || produce(&broker, "dyn", 200).0);
    // The broker's 2,000-byte segments: 200 records of 50 bytes roll several.
    assert!(segments(&broker, "dyn") >= 3, "{} segments", segments(&broker, "dyn"));

    // Kept in the metadata log: the same after a restart.
    broker.stop();
    broker.restart();
    let before = segments(&broker, "dyn");
    wait_for("produce after the restart", Duration::from_secs(30), || produce(&broker, "dyn", 200).0);
    assert!(segments(&broker, "dyn") >= before + 2, "segments {before} -> {}", segments(&broker, "dyn"));
    let (_, printed) = configs(&broker, &["--describe", "--entity-default"]);
    assert_lines(
        &printed,
        &["min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}"],
    );
}
