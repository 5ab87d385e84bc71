//! Client quotas as operators manage them with Kafka's own
//! `kafka-configs.sh`: users, client ids, both, their defaults and IPs
//! set, described, changed and deleted; Kafka's refusals; kept in the
//! metadata log across a restart. And enforced: a producer and a consumer
//! over their byte rates are held to them while a client without a quota
//! on the same broker is not.

mod support;

use std::process::Command;
use std::time::Instant;

use support::{repo_root, BrokerProcess};

fn kafka_configs(bootstrap: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(repo_root().join("tools/kafka-reference/kafka-cli"))
        .args(["kafka-configs", "--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .expect("run kafka-configs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

fn alter_ok(bootstrap: &str, args: &[&str]) {
    let (ok, out) = kafka_configs(bootstrap, &[&["--alter"], args].concat());
    assert!(ok, "kafka-configs --alter {args:?}: {out}");
}

fn describe(bootstrap: &str, args: &[&str]) -> String {
    let (ok, out) = kafka_configs(bootstrap, &[&["--describe"], args].concat());
    assert!(ok, "kafka-configs --describe {args:?}: {out}");
    out
}

#[test]
fn kafka_configs_sets_describes_and_deletes_client_quotas() {
    let mut broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    let user = ["--entity-type", "users", "--entity-name", "alice"];
    alter_ok(
        &bootstrap,
        &[&["--add-config", "producer_byte_rate=1048576,request_percentage=12.5"], &user[..]].concat(),
    );
    let client = ["--entity-type", "clients", "--entity-name", "app-1"];
    alter_ok(&bootstrap, &[&["--add-config", "consumer_byte_rate=2048"], &client[..]].concat());
    let user_client =
        ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app-1"];
    alter_ok(&bootstrap, &[&["--add-config", "producer_byte_rate=4096"], &user_client[..]].concat());
    alter_ok(&bootstrap, &["--add-config", "consumer_byte_rate=999", "--entity-type", "users", "--entity-default"]);
    alter_ok(
        &bootstrap,
        &["--add-config", "connection_creation_rate=10", "--entity-type", "ips", "--entity-name", "10.1.2.3"],
    );

    let out = describe(&bootstrap, &user);
    assert!(out.contains("producer_byte_rate=1048576.0") && out.contains("request_percentage=12.5"), "{out}");
    let out = describe(&bootstrap, &user_client);
    assert!(out.contains("producer_byte_rate=4096.0"), "{out}");
    let out = describe(&bootstrap, &["--entity-type", "users", "--entity-default"]);
    assert!(out.contains("consumer_byte_rate=999.0"), "{out}");
    let out = describe(&bootstrap, &["--entity-type", "ips"]);
    assert!(out.contains("10.1.2.3") && out.contains("connection_creation_rate=10.0"), "{out}");
    let out = describe(&bootstrap, &["--entity-type", "clients"]);
    assert!(out.contains("app-1") && out.contains("consumer_byte_rate=2048.0"), "{out}");

    // Kafka's refusals.
    let (ok, out) =
        kafka_configs(&bootstrap, &[&["--alter", "--add-config", "producer_byte_rate=1.5"], &user[..]].concat());
    assert!(!ok && out.contains("producer_byte_rate cannot be a fractional value"), "{out}");
    let (ok, out) =
        kafka_configs(&bootstrap, &[&["--alter", "--add-config", "producer_byte_rate=0"], &user[..]].concat());
    assert!(!ok && out.contains("must be greater than 0"), "{out}");

    // Deleted quotas go; the rest stays, across a restart (the metadata log).
    alter_ok(&bootstrap, &[&["--delete-config", "request_percentage"], &user[..]].concat());
    broker.stop();
    broker.restart();
    let bootstrap = broker.bootstrap();
    let out = describe(&bootstrap, &user);
    assert!(out.contains("producer_byte_rate=1048576.0") && !out.contains("request_percentage"), "{out}");
    let out = describe(&bootstrap, &user_client);
    assert!(out.contains("producer_byte_rate=4096.0"), "{out}");
}

fn perf_test(args: &[&str]) -> String {
    let output =
        Command::new(repo_root().join("tools/kafka-reference/kafka-cli")).args(args).output().expect("run a perf test");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{args:?}: {text}");
    text
}

/// The records/s of the whole run, from kafka-producer-perf-test's
/// summary ("N records sent, R records/sec (...), ... 99.9th.").
fn overall_rate(report: &str) -> Option<f64> {
    let summary = report.lines().find(|l| l.contains("records sent, ") && l.contains("99.9th"))?;
    summary.split("records sent, ").nth(1)?.split(" records/sec").next()?.trim().parse().ok()
}

const QUOTA_BYTES_PER_SECOND: f64 = 1_048_576.0;
const RECORD_BYTES: usize = 1000;

#[test]
fn producers_and_consumers_are_held_to_their_byte_rates() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    let quota = format!("producer_byte_rate={QUOTA_BYTES_PER_SECOND},consumer_byte_rate={QUOTA_BYTES_PER_SECOND}");
    alter_ok(&bootstrap, &["--add-config", &quota, "--entity-type", "clients", "--entity-name", "throttled"]);
    // 24 MiB: Kafka's rate over 11 one-second windows lets the first ~10 s
    // of quota through at once, then holds the producer to 1 MiB/s.
    let records = (24.0 * QUOTA_BYTES_PER_SECOND / RECORD_BYTES as f64) as usize;
    let producer = |client_id: &'static str, topic: &'static str| {
        let bootstrap = bootstrap.clone();
        std::thread::spawn(move || {
            let props = [format!("bootstrap.servers={bootstrap}"), format!("client.id={client_id}"), "acks=1".into()];
            let (records, size) = (records.to_string(), RECORD_BYTES.to_string());
            let mut args = vec!["kafka-producer-perf-test", "--topic", topic, "--num-records", &records];
            args.extend(["--record-size", &size, "--throughput", "-1", "--producer-props"]);
            args.extend(props.iter().map(String::as_str));
            let started = Instant::now();
            (perf_test(&args), started.elapsed())
        })
    };
    let throttled = producer("throttled", "quota-throttled");
    let free = producer("free", "quota-free");
    let (free_report, free_took) = free.join().expect("free producer");
    let (throttled_report, throttled_took) = throttled.join().expect("throttled producer");
    // Over the whole run, as the issue asks: Kafka's rate lets ~10 s of
    // quota through at once, then the producer waits until the average over
    // the windows is back at the quota.
    let rate = overall_rate(&throttled_report).expect("a summary line") * RECORD_BYTES as f64;
    let off = (rate - QUOTA_BYTES_PER_SECOND).abs() / QUOTA_BYTES_PER_SECOND;
    assert!(off < 0.10, "throttled at {rate:.0} B/s, {:.0}% off the quota:\n{throttled_report}", off * 100.0);
    assert!(
        free_took.as_secs_f64() * 2.0 < throttled_took.as_secs_f64(),
        "the free producer took {free_took:?}, the throttled one {throttled_took:?}:\n{free_report}"
    );

    // Reading the 24 MiB back: 1 MiB/s after the burst for the throttled
    // consumer, at once for the free one.
    let consume = |client_id: &str, topic: &str| {
        let records = records.to_string();
        let started = Instant::now();
        let args = [
            "kafka-consumer-perf-test",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            topic,
            "--messages",
            &records,
            "--timeout",
            "60000",
        ];
        let config = format!("client.id={client_id}");
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("consumer.properties");
        std::fs::write(&path, config).expect("write consumer config");
        perf_test(&[&args[..], &["--consumer.config", path.to_str().expect("utf-8 path")]].concat());
        started.elapsed()
    };
    let free_took = consume("free", "quota-free");
    let throttled_took = consume("throttled", "quota-throttled");
    // 24 MiB at 1 MiB/s with ~10 s allowed at once: about 14 s.
    assert!(throttled_took.as_secs_f64() > 11.0, "the throttled consumer read 24 MiB in {throttled_took:?}");
    assert!(
        free_took.as_secs_f64() * 2.0 < throttled_took.as_secs_f64(),
        "free {free_took:?}, throttled {throttled_took:?}"
    );
}

/// CreateTopics with `count` topics named `prefix-<i>` of 10 partitions each.
fn create_topics(prefix: &str, count: usize) -> krabka_protocol::CreateTopicsRequest {
    use krabka_protocol::create_topics_request::CreatableTopic;
    let topics = (0..count)
        .map(|i| CreatableTopic {
            name: format!("{prefix}-{i}"),
            num_partitions: 10,
            replication_factor: 1,
            ..Default::default()
        })
        .collect();
    krabka_protocol::CreateTopicsRequest { topics, timeout_ms: 10_000, ..Default::default() }
}

/// KIP-599: at `controller_mutation_rate=2` a client's bucket holds 22
/// partition mutations (11 one-second windows); the mutation that finds it
/// below zero is refused with THROTTLING_QUOTA_EXCEEDED on strict versions
/// and let through, throttled, on older ones; the throttle time is what
/// brings the bucket back to zero.
#[test]
fn partition_mutations_are_held_to_the_controller_mutation_rate() {
    use krabka_protocol::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsResponse};
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    alter_ok(&bootstrap, &["--add-config", "controller_mutation_rate=2", "--entity-type", "users", "--entity-default"]);
    let mut client = support::RawClient::connect(&bootstrap);
    let created: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 7, &create_topics("strict", 4));
    let codes: Vec<i16> = created.topics.iter().map(|t| t.error_code).collect();
    // 22 -> 12 -> 2 -> -8: the third still finds tokens, the fourth none.
    assert_eq!(codes, [0, 0, 0, 89], "{created:?}");
    assert_eq!(created.topics[3].error_message.as_deref(), Some("The throttling quota has been exceeded."));
    assert!((3_000..=4_000).contains(&created.throttle_time_ms), "{}", created.throttle_time_ms);

    // CreatePartitions v3 is strict too: refused while the bucket is below
    // zero (on another connection: this one is muted until it is not).
    let mut other = support::RawClient::connect(&bootstrap);
    let grow = CreatePartitionsRequest {
        topics: vec![krabka_protocol::create_partitions_request::CreatePartitionsTopic {
            name: "strict-0".into(),
            count: 12,
            assignments: None,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let grown: CreatePartitionsResponse = other.request(ApiKey::CreatePartitions, 3, &grow);
    assert_eq!(grown.results[0].error_code, 89, "{grown:?}");
    // The connection was muted for the throttle time; then a permissive
    // (v5) request goes through, over the quota, and is throttled.
    let started = Instant::now();
    let permissive: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 5, &create_topics("permissive", 1));
    assert!(started.elapsed().as_millis() >= 2_500, "the connection waited out the throttle");
    assert_eq!(permissive.topics[0].error_code, 0, "{permissive:?}");
    assert!(permissive.throttle_time_ms > 0, "{permissive:?}");

    // Without the quota nothing is refused or throttled.
    alter_ok(
        &bootstrap,
        &["--delete-config", "controller_mutation_rate", "--entity-type", "users", "--entity-default"],
    );
    let grown: CreatePartitionsResponse = other.request(ApiKey::CreatePartitions, 3, &grow);
    assert_eq!((grown.results[0].error_code, grown.throttle_time_ms), (0, 0), "quota removed: {grown:?}");
}

/// KIP-124: at `request_percentage=0.01` a client may use 0.1 ms of CPU a
/// second; its requests' handler time soon puts it over, and its responses
/// then announce a throttle, bounded by one quota window as Kafka bounds it.
#[test]
fn requests_over_the_request_percentage_are_throttled() {
    use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse};
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    let mut client = support::RawClient::connect(&bootstrap);
    let unthrottled: Vec<i32> = (0..50)
        .map(|_| {
            client.request::<_, MetadataResponse>(ApiKey::Metadata, 12, &MetadataRequest::default()).throttle_time_ms
        })
        .collect();
    assert!(unthrottled.iter().all(|t| *t == 0), "no quota: {unthrottled:?}");
    alter_ok(&bootstrap, &["--add-config", "request_percentage=0.01", "--entity-type", "users", "--entity-default"]);
    let throttled = (0..500).find_map(|_| {
        let response: MetadataResponse = client.request(ApiKey::Metadata, 12, &MetadataRequest::default());
        (response.throttle_time_ms > 0).then_some(response.throttle_time_ms)
    });
    let throttled = throttled.expect("a client over its request quota is told to wait");
    assert!(throttled <= 1_000, "bounded by quota.window.size.seconds: {throttled}");
    // The connection waits the throttle out before its next request is read.
    let started = Instant::now();
    let _: MetadataResponse = client.request(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(started.elapsed().as_millis() as i32 >= throttled - 100, "{:?} for {throttled}", started.elapsed());
}
