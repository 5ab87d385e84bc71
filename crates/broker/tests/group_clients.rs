//! Consumer groups with real clients against the real broker binary: for
//! each client and group protocol, tests/clients/groups/scenario runs three
//! members over 12 partitions while a producer writes, SIGKILLs one (its
//! partitions must move after the session timeout), adds one (partitions
//! must spread), and checks every record was consumed, duplicates only
//! where the killed member had processed without committing, and
//! kafka-consumer-groups --describe shows lag 0. tests/clients/groups/resume
//! commits, the broker restarts (SIGTERM or SIGKILL), and consumption must
//! resume exactly at the committed offsets.

mod support;

use std::process::Command;
use std::time::Instant;

use support::{repo_root, BrokerProcess};

/// Broker settings that keep the scenario short: members of the consumer
/// protocol expire after 6 s (Kafka's default is 45 s) and heartbeat every
/// second; the classic clients ask for a 6 s session themselves.
const FAST_GROUPS: [&str; 3] = [
    "group.initial.rebalance.delay.ms=0",
    "group.consumer.session.timeout.ms=6000",
    "group.consumer.heartbeat.interval.ms=1000",
];

fn run(script: &str, args: &[&str], work_dir: &std::path::Path) -> String {
    let started = Instant::now();
    let output = Command::new(repo_root().join(script))
        .args(args)
        .current_dir(repo_root())
        .env("GROUP_SCENARIO_SESSION_S", "6")
        .env("GROUP_SCENARIO_DIR", work_dir.join("scenario"))
        .env("GROUP_RESUME_DIR", work_dir.join("resume"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{script} {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        output.status
    );
    eprintln!("{script} {args:?}: {} in {:?}", stdout.trim(), started.elapsed());
    stdout
}

fn scenario(client: &str, protocol: &str) {
    let broker = BrokerProcess::start(&FAST_GROUPS);
    let work = tempfile::tempdir().unwrap();
    run("tests/clients/groups/scenario", &[&broker.bootstrap(), client, protocol], work.path());
}

fn resume_across_restart(client: &str, protocol: &str, kill: bool) {
    let mut broker = BrokerProcess::start(&FAST_GROUPS);
    let work = tempfile::tempdir().unwrap();
    run("tests/clients/groups/resume", &[&broker.bootstrap(), client, protocol, "before"], work.path());
    if kill {
        broker.kill9();
    } else {
        assert!(broker.stop().success());
    }
    broker.restart();
    run("tests/clients/groups/resume", &[&broker.bootstrap(), client, protocol, "after"], work.path());
}

#[test]
fn java_classic_group() {
    scenario("java", "classic");
}

#[test]
fn java_consumer_protocol_group() {
    scenario("java", "consumer");
}

#[test]
fn librdkafka_classic_group() {
    scenario("confluent", "classic");
}

#[test]
fn librdkafka_consumer_protocol_group() {
    scenario("confluent", "consumer");
}

#[test]
fn kafka_python_classic_group() {
    scenario("kafka-python", "classic");
}

#[test]
fn franz_go_classic_group() {
    scenario("franz", "classic");
}

#[test]
fn franz_go_consumer_protocol_group() {
    scenario("franz", "consumer");
}

#[test]
fn java_resumes_from_committed_offsets_after_sigterm() {
    resume_across_restart("java", "classic", false);
}

#[test]
fn java_consumer_protocol_resumes_after_sigkill() {
    resume_across_restart("java", "consumer", true);
}

#[test]
fn librdkafka_resumes_after_sigkill() {
    resume_across_restart("confluent", "classic", true);
}

/// Runs one of Kafka's command-line tools through tools/kafka-reference/kafka-cli,
/// with `stdin` as its input, and returns what it printed.
fn kafka_cli(args: &[&str], stdin: Option<&str>) -> String {
    let mut command = Command::new(repo_root().join("tools/kafka-reference/kafka-cli"));
    command.args(args).current_dir(repo_root());
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("kafka-cli");
    if let Some(input) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    } else {
        drop(child.stdin.take());
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Creates topic `tool` (2 partitions), writes 20 keyed records with the
/// console producer and consumes them all as group `tool-group`.
fn produce_and_consume_twenty_records(bootstrap: &str) {
    kafka_cli(
        &["kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "tool", "--partitions", "2"],
        None,
    );
    let lines: String = (0..20).map(|i| format!("k{i}:v{i}\n")).collect();
    kafka_cli(
        &[
            "kafka-console-producer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "tool",
            "--reader-property",
            "parse.key=true",
            "--reader-property",
            "key.separator=:",
        ],
        Some(&lines),
    );
    let consumed = kafka_cli(
        &[
            "kafka-console-consumer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "tool",
            "--group",
            "tool-group",
            "--from-beginning",
            "--max-messages",
            "20",
            "--timeout-ms",
            "30000",
        ],
        None,
    );
    assert_eq!(consumed.lines().count(), 20, "{consumed}");
}

/// (partition, current offset, log end offset, lag) of `tool-group`, from
/// kafka-consumer-groups --describe, by partition.
fn describe_tool_group(bootstrap: &str) -> Vec<(i64, i64, i64, i64)> {
    let table = kafka_cli(
        &["kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "tool-group"],
        None,
    );
    let mut rows: Vec<(i64, i64, i64, i64)> = table
        .lines()
        .filter(|l| l.starts_with("tool-group"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[2].parse().unwrap(), f[3].parse().unwrap(), f[4].parse().unwrap(), f[5].parse().unwrap())
        })
        .collect();
    rows.sort();
    rows
}

/// kafka-consumer-groups --reset-offsets of `tool-group` on `topic` (a
/// topic, or topic:partition) to `to` (e.g. ["--to-earliest"]).
fn reset_tool_group(bootstrap: &str, topic: &str, to: &[&str]) {
    let mut args =
        vec!["kafka-consumer-groups", "--bootstrap-server", bootstrap, "--group", "tool-group", "--topic", topic];
    args.push("--reset-offsets");
    args.extend_from_slice(to);
    args.push("--execute");
    kafka_cli(&args, None);
}

/// Kafka's `kafka-consumer-groups` against the broker: reset offsets (to
/// earliest, to an offset), describe with lag, list, delete.
#[test]
fn kafka_consumer_groups_resets_describes_and_deletes() {
    let broker = BrokerProcess::start(&FAST_GROUPS);
    let bootstrap = broker.bootstrap();
    produce_and_consume_twenty_records(&bootstrap);
    let before = describe_tool_group(&bootstrap);
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|(_, current, end, lag)| current == end && *lag == 0), "{before:?}");
    let total: i64 = before.iter().map(|r| r.2).sum();
    assert_eq!(total, 20);
    reset_tool_group(&bootstrap, "tool", &["--to-earliest"]);
    let reset = describe_tool_group(&bootstrap);
    assert!(reset.iter().all(|(_, current, end, lag)| *current == 0 && lag == end), "{reset:?}");
    reset_tool_group(&bootstrap, "tool:0", &["--to-offset", "1"]);
    assert_eq!(describe_tool_group(&bootstrap)[0].1, 1);
    let listed = kafka_cli(&["kafka-consumer-groups", "--bootstrap-server", &bootstrap, "--list"], None);
    assert!(listed.lines().any(|l| l.trim() == "tool-group"), "{listed}");
    let deleted = kafka_cli(
        &["kafka-consumer-groups", "--bootstrap-server", &bootstrap, "--delete", "--group", "tool-group"],
        None,
    );
    assert!(deleted.contains("successful"), "{deleted}");
    let listed = kafka_cli(&["kafka-consumer-groups", "--bootstrap-server", &bootstrap, "--list"], None);
    assert!(!listed.lines().any(|l| l.trim() == "tool-group"), "{listed}");
}

/// Lines (records) written by member output files.
fn records_in(files: &[std::path::PathBuf]) -> Vec<(String, String)> {
    files
        .iter()
        .flat_map(|f| std::fs::read_to_string(f).unwrap_or_default().lines().map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            Some((parts.next()?.to_string(), parts.next()?.to_string()))
        })
        .collect()
}

/// The rolling upgrade of a running classic group to the consumer protocol
/// (KIP-848 migration): two classic Java members consume; a consumer-protocol
/// member joins (the group converts, the classic members are rebalanced by
/// the broker); the classic members leave; the new member takes everything.
/// Every record is consumed exactly once throughout.
#[test]
fn java_group_upgrades_from_classic_to_consumer_protocol_online() {
    let broker = BrokerProcess::start(&FAST_GROUPS);
    let bootstrap = broker.bootstrap();
    let work = tempfile::tempdir().unwrap();
    let mut admin = support::RawClient::connect(&bootstrap);
    let request = krabka_protocol::CreateTopicsRequest {
        topics: vec![krabka_protocol::create_topics_request::CreatableTopic {
            name: "upgrade".into(),
            num_partitions: 6,
            replication_factor: 1,
            configs: vec![krabka_protocol::create_topics_request::CreatableTopicConfig {
                name: "retention.ms".into(),
                value: Some("-1".into()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let created: krabka_protocol::CreateTopicsResponse =
        admin.request(krabka_protocol::ApiKey::CreateTopics, 7, &request);
    assert_eq!(created.topics[0].error_code, 0);
    let produce = |first: u32| {
        let status = Command::new(repo_root().join("target/client-bin/franz-check"))
            .args(["produce-range", &bootstrap, "upgrade", "6", &first.to_string(), "600", "none"])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    };
    let member = |protocol: &str, out: &std::path::Path| {
        Command::new(repo_root().join("tests/clients/groups/member"))
            .args(["java", &bootstrap, "upgrade", "g-upgrade", protocol, &out.display().to_string()])
            .current_dir(repo_root())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(out.with_extension("err")).unwrap())
            .spawn()
            .unwrap()
    };
    let outs: Vec<std::path::PathBuf> = (1..=3).map(|i| work.path().join(format!("m{i}.out"))).collect();
    let wait_total = |count: usize, what: &str| {
        support::wait_for(what, std::time::Duration::from_secs(90), || records_in(&outs).len() >= count)
    };
    produce(0);
    let mut classic = vec![member("classic", &outs[0]), member("classic", &outs[1])];
    wait_total(600, "the classic members to consume");
    let mut upgraded = member("consumer", &outs[2]);
    std::thread::sleep(std::time::Duration::from_secs(5));
    produce(600);
    wait_total(1200, "the mixed group to consume");
    for child in &mut classic {
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert!(child.wait().unwrap().success());
    }
    produce(1200);
    wait_total(1800, "the consumer-protocol member to take over");
    unsafe { libc::kill(upgraded.id() as i32, libc::SIGTERM) };
    assert!(upgraded.wait().unwrap().success());
    let records = records_in(&outs);
    let distinct: std::collections::BTreeSet<_> = records.iter().cloned().collect();
    assert_eq!(distinct.len(), 1800, "every record consumed");
    assert_eq!(records.len(), 1800, "and exactly once");
    assert!(!records_in(&outs[2..]).is_empty(), "the upgraded member consumed");
    assert!(broker.log().contains("upgrading a classic group to the consumer protocol"));
}
