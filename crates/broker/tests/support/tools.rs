//! Real client programs for black-box tests: Kafka's own CLI tools (through
//! tools/kafka-reference/kafka-cli) and the Python clients' virtualenv.

use std::io::Write;
use std::process::{Command, Stdio};

use super::repo_root;

/// Runs `program` with `args`, `stdin` fed in; returns (success, stdout + stderr).
pub fn run(program: &str, args: &[&str], stdin: &str) -> (bool, String) {
    run_with_env(program, args, stdin, &[])
}

/// `run` with `env` added to the program's environment.
pub fn run_with_env(program: &str, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("feed stdin");
    let output = child.wait_with_output().expect("wait");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// One of Kafka 4.3.1's tools (`kafka-topics`, `kafka-console-producer`, ...).
pub fn kafka_cli(args: &[&str], stdin: &str) -> (bool, String) {
    kafka_cli_with_jvm_options(args, stdin, "-Xmx256m")
}

/// `kafka_cli` with the JVM options `jvm_options` (e.g. system properties).
pub fn kafka_cli_with_jvm_options(args: &[&str], stdin: &str, jvm_options: &str) -> (bool, String) {
    let cli = repo_root().join("tools/kafka-reference/kafka-cli");
    run_with_env(cli.to_str().expect("utf-8 path"), args, stdin, &[("KAFKA_CLI_HEAP_OPTS", jvm_options)])
}

/// Python the client tests share, put before their scripts: a librdkafka
/// and a kafka-python round trip (ten records produced, then read back
/// from the start with the `before` records ahead of them), and a
/// librdkafka client whose login is refused with `text` in its errors.
pub const PYTHON_ROUND_TRIPS: &str = r#"
import time
from confluent_kafka import Producer, Consumer, KafkaException
from kafka import KafkaProducer, KafkaConsumer

def librdkafka_round_trip(config, topic):
    producer = Producer(config)
    for i in range(10):
        producer.produce(topic, value=f"rd-{i}".encode())
    assert producer.flush(30) == 0, "librdkafka: records left unsent"
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen, deadline = [], time.time() + 30
    while len(seen) < 10 and time.time() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen.append(message.value().decode())
    consumer.close()
    assert seen == [f"rd-{i}" for i in range(10)], seen

def kafka_python_round_trip(config, topic, before=()):
    producer = KafkaProducer(**config)
    for i in range(10):
        producer.send(topic, f"py-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=6000, **config)
    values = [m.value.decode() for m in consumer]
    consumer.close()
    assert values == list(before) + [f"py-{i}" for i in range(10)], values

def librdkafka_refused(config, text):
    errors = []
    refused = Producer({**config, "error_cb": errors.append, "log_level": 0})
    deadline = time.time() + 20
    while not errors and time.time() < deadline:
        refused.poll(0.5)
    try:
        refused.list_topics(timeout=2)
        raise SystemExit("librdkafka: a refused login was accepted")
    except KafkaException:
        pass
    assert any(text in e.str() for e in errors), [e.str() for e in errors]
"#;

/// The Python with confluent-kafka (librdkafka) and kafka-python.
pub fn venv_python() -> String {
    repo_root().join("target/client-venv/bin/python").to_str().expect("utf-8 path").to_string()
}

/// Kafka's tools on a three-node cluster (`bootstraps` of node 1 and node
/// 3, clients configured by `config`): an RF3 topic made, 30 lines
/// produced with acks=all, every replica in sync, the lines read back from
/// node 3. acks=all completes only once both followers fetched, so this
/// checks the inter-broker listener the followers connect through.
pub fn replicate_rf3_with_kafka_tools((first, third): (&str, &str), config: &str) {
    let create = ["kafka-topics", "--bootstrap-server", first, "--create", "--topic", "replicated"];
    let more = ["--partitions", "3", "--replication-factor", "3", "--command-config", config];
    let (ok, out) = kafka_cli(&[&create[..], &more[..]].concat(), "");
    assert!(ok, "kafka-topics --create: {out}");
    let lines: Vec<String> = (0..30).map(|i| format!("replicated-{i}")).collect();
    let producer = ["kafka-console-producer", "--bootstrap-server", first, "--topic", "replicated"];
    let props = ["--producer-property", "acks=all", "--producer.config", config];
    let (ok, out) = kafka_cli(&[&producer[..], &props[..]].concat(), &lines.join("\n"));
    assert!(ok, "console producer: {out}");
    let describe = ["kafka-topics", "--bootstrap-server", first, "--describe", "--topic", "replicated"];
    let (ok, out) = kafka_cli(&[&describe[..], &["--command-config", config]].concat(), "");
    let full_isr = out.lines().filter(|l| l.contains("Partition:") && l.contains("Isr:")).all(|l| {
        let isr = l.split("Isr:").nth(1).unwrap_or_default().split_whitespace().next().unwrap_or_default();
        isr.split(',').count() == 3
    });
    assert!(ok && full_isr && out.contains("Partition: 2"), "every replica in sync: {out}");
    let consumer = ["kafka-console-consumer", "--bootstrap-server", third, "--topic", "replicated"];
    let more = ["--from-beginning", "--max-messages", "30", "--timeout-ms", "30000", "--consumer.config", config];
    let (ok, out) = kafka_cli(&[&consumer[..], &more[..]].concat(), "");
    assert!(ok, "console consumer: {out}");
    let mut read: Vec<&str> = out.lines().filter(|l| l.starts_with("replicated-")).collect();
    read.sort_by_key(|l| l[11..].parse::<u32>().unwrap_or(u32::MAX));
    assert_eq!(read, lines, "{out}");
}
