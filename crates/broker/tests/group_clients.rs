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
