//! Real Kafka clients against the real broker binary: the Java client 4.3.1,
//! librdkafka (confluent-kafka), kafka-python, franz-go and Kafka's own CLI
//! tools. Each produces with every codec, consumes back exactly (count,
//! order per partition, keys, values, headers, timestamps), then the broker
//! is restarted after SIGTERM and after SIGKILL and everything is consumed
//! again. The client programs live in tests/clients and are installed by
//! scripts/install-test-deps (the README's test command).

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use krabka_protocol::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use krabka_protocol::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use support::{repo_root, BrokerProcess, RawClient};

const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
const PARTITIONS: u32 = 3;
const RECORDS: u32 = 2000;

/// How to run one client program: the command line before its arguments.
struct ClientProgram {
    name: &'static str,
    argv: Vec<String>,
}

impl ClientProgram {
    fn run(&self, args: &[String]) -> String {
        let started = Instant::now();
        let output = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .args(args)
            .current_dir(repo_root())
            .output()
            .unwrap_or_else(|e| panic!("{}: cannot run {:?}: {e}", self.name, self.argv));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "{} {:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
            self.name,
            args,
            output.status
        );
        eprintln!("{} {:?}: {} in {:?}", self.name, args.first(), stdout.trim(), started.elapsed());
        stdout
    }
}

fn create_topics(broker: &BrokerProcess, names: &[String]) {
    let mut client = RawClient::connect(&broker.bootstrap());
    let request = CreateTopicsRequest {
        topics: names
            .iter()
            .map(|name| CreatableTopic {
                name: name.clone(),
                num_partitions: PARTITIONS as i32,
                replication_factor: 1,
                // The contract's timestamps are from 2023: keep them past
                // the default seven-day retention.
                configs: vec![CreatableTopicConfig {
                    name: "retention.ms".into(),
                    value: Some("-1".into()),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
        timeout_ms: 10_000,
        ..Default::default()
    };
    let response: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 7, &request);
    for topic in response.topics {
        assert_eq!(topic.error_code, 0, "{}: {:?}", topic.name, topic.error_message);
    }
}

/// Produce with every codec, consume back, restart twice (SIGTERM, SIGKILL)
/// consuming everything after each.
fn produce_consume_restart(client: &ClientProgram) {
    let mut broker = BrokerProcess::start(&[]);
    let topics: Vec<String> = CODECS.iter().map(|codec| format!("{}-{codec}", client.name)).collect();
    create_topics(&broker, &topics);
    let count = RECORDS.to_string();
    let partitions = PARTITIONS.to_string();
    for (topic, codec) in topics.iter().zip(CODECS) {
        let bootstrap = broker.bootstrap();
        client.run(&[
            "produce".into(),
            bootstrap.clone(),
            topic.clone(),
            partitions.clone(),
            count.clone(),
            codec.into(),
        ]);
        client.run(&["consume".into(), bootstrap, topic.clone(), partitions.clone(), count.clone()]);
    }
    let consume_all = |broker: &BrokerProcess| {
        for topic in &topics {
            client.run(&["consume".into(), broker.bootstrap(), topic.clone(), partitions.clone(), count.clone()]);
        }
    };
    let status = broker.stop();
    assert!(status.success(), "SIGTERM exit: {status}\n{}", broker.log());
    broker.restart();
    consume_all(&broker);
    broker.kill9();
    broker.restart();
    consume_all(&broker);
    // A wrong expectation must fail: the check can tell. Every record is
    // there to read within a second; the one too many is waited for 5 s
    // (KRABKA_CHECK_TIMEOUT_S), not the 60 s a real check allows.
    let wrong = Command::new(&client.argv[0])
        .args(&client.argv[1..])
        .env("KRABKA_CHECK_TIMEOUT_S", "5")
        .args(["consume", &broker.bootstrap(), &topics[0], &partitions, &(RECORDS + 1).to_string()])
        .current_dir(repo_root())
        .output()
        .expect("run");
    assert!(!wrong.status.success(), "{} accepted a consume of one record too many", client.name);
}

fn java() -> ClientProgram {
    ClientProgram { name: "java", argv: vec![repo_root().join("tests/clients/java/run").display().to_string()] }
}

fn venv_python() -> String {
    repo_root().join("target/client-venv/bin/python").display().to_string()
}

fn script(path: &str) -> String {
    repo_root().join(path).display().to_string()
}

#[test]
fn java_client() {
    produce_consume_restart(&java());
}

#[test]
fn java_admin_client() {
    let broker = BrokerProcess::start(&[]);
    java().run(&["admin".into(), broker.bootstrap()]);
}

#[test]
fn librdkafka_confluent_kafka() {
    produce_consume_restart(&ClientProgram {
        name: "librdkafka",
        argv: vec![venv_python(), script("tests/clients/python/check_confluent.py")],
    });
}

#[test]
fn kafka_python() {
    produce_consume_restart(&ClientProgram {
        name: "kafka-python",
        argv: vec![venv_python(), script("tests/clients/python/check_kafka_python.py")],
    });
}

fn franz() -> ClientProgram {
    let binary: PathBuf = repo_root().join("target/client-bin/franz-check");
    ClientProgram { name: "franz-go", argv: vec![binary.display().to_string()] }
}

#[test]
fn franz_go() {
    produce_consume_restart(&franz());
}

#[test]
fn franz_go_admin() {
    let broker = BrokerProcess::start(&[]);
    franz().run(&["admin".into(), broker.bootstrap()]);
}

#[test]
fn kafka_cli_tools() {
    let broker = BrokerProcess::start(&[]);
    let check = ClientProgram { name: "kafka-cli", argv: vec![script("tests/clients/cli/check")] };
    let out = check.run(&[broker.bootstrap()]);
    assert!(out.contains("cli check ok"), "{out}");
}
