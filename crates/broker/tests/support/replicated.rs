//! What the replication tests share: Kafka's VerifiableProducer writing
//! to a replicated topic, the records it saw acknowledged, a read-back of
//! the whole topic, and the checker that compares the two.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};

use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse};

use super::{repo_root, BrokerProcess, RawClient};

/// Broker sessions shorter than Kafka's 9 s default, so fencing is
/// quick; `__consumer_offsets` replicated like the topic.
pub const QUICK_FAILOVER: [&str; 4] = [
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "replica.lag.time.max.ms=4000",
    "offsets.topic.replication.factor=3",
];

/// The topic the replication tests write: three partitions, three replicas.
pub const TOPIC: &str = "replicated";

/// Each partition's (leader, replicas, ISR) as the broker at `bootstrap` lists them.
pub fn partitions(bootstrap: &str) -> Vec<(i32, Vec<i32>, Vec<i32>)> {
    let Ok(stream) = std::net::TcpStream::connect(bootstrap) else { return Vec::new() };
    let request = MetadataRequest { topics: None, ..Default::default() };
    let answer: MetadataResponse = RawClient::from_stream(stream).request(ApiKey::Metadata, 12, &request);
    let Some(topic) = answer.topics.iter().find(|t| t.name.as_deref() == Some(TOPIC)) else { return Vec::new() };
    let mut listed: Vec<_> = topic
        .partitions
        .iter()
        .map(|p| (p.partition_index, (p.leader_id, p.replica_nodes.clone(), p.isr_nodes.clone())))
        .collect();
    listed.sort();
    listed.into_iter().map(|(_, state)| state).collect()
}

/// Creates `TOPIC` with Kafka's `kafka-topics`: three partitions, three
/// replicas, `min.insync.replicas=2`.
pub fn create_topic(bootstrap: &str) {
    let (ok, printed) = super::kafka_cli(
        "kafka-topics",
        &["--bootstrap-server", bootstrap, "--create", "--topic", TOPIC, "--partitions", "3"]
            .into_iter()
            .chain(["--replication-factor", "3", "--config", "min.insync.replicas=2"])
            .collect::<Vec<_>>(),
    );
    assert!(ok, "{printed}");
}

/// A record the producer saw acknowledged, or the consumer read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Placed {
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

/// The value of `"name":` in one JSON line of VerifiableProducer's (flat
/// objects of numbers, strings and nulls).
pub fn json_field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("\"{name}\":"))? + name.len() + 3;
    let rest = &line[start..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

/// A VerifiableProducer running in the background, its output read as it
/// comes. Left unread, its stdout pipe fills at 64 KiB (about 470
/// acknowledgements) and the producer's callbacks, which print them, block
/// its network thread: it sends nothing more until the pipe is drained
/// (every stall of 30-40 s seen in the fault rounds was this).
pub struct VerifiableProducer {
    child: std::process::Child,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

impl VerifiableProducer {
    /// Waits for the producer to finish; everything it printed.
    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        let status = self.child.wait()?;
        let stdout = self.stdout.join().unwrap_or_default();
        let stderr = self.stderr.join().unwrap_or_default();
        Ok(std::process::Output { status, stdout, stderr })
    }
}

/// Reads `pipe` to its end on a thread of its own.
fn drain(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// Kafka's VerifiableProducer, started in the background: idempotent,
/// acks=all, `count` records at `rate` per second, each value its number.
/// Values are the record's number, after `prefix.` when given.
pub fn start_verifiable_producer(
    bootstrap: &str,
    count: usize,
    rate: usize,
    prefix: Option<u32>,
    dir: &std::path::Path,
) -> VerifiableProducer {
    let config = dir.join(format!("producer-{}.properties", prefix.unwrap_or(0)));
    let mut file = std::fs::File::create(&config).unwrap();
    // Round robin: every partition gets records (sticky batches might skip
    // one); requests to a leader cut off time out in 5 s, then go elsewhere.
    // 30 s to deliver is several times the longest fault's unavailability
    // (a session of 3 s, then an election), and bounds a round that gives
    // records up (see fault_rounds.rs, KAFKA-14359).
    let partitioner = "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner";
    writeln!(file, "enable.idempotence=true\nretries=2147483647\ndelivery.timeout.ms=30000\n{partitioner}").unwrap();
    writeln!(file, "request.timeout.ms=5000\nmetadata.max.age.ms=2000").unwrap();
    let prefix = prefix.map(|p| vec!["--value-prefix".to_string(), p.to_string()]).unwrap_or_default();
    let mut child = Command::new(repo_root().join("tools/kafka-reference/kafka-cli"))
        .args(["org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", bootstrap, "--topic", TOPIC])
        .args(["--max-messages", &count.to_string(), "--throughput", &rate.to_string(), "--acks", "-1"])
        .args(["--producer.config", config.to_str().unwrap()])
        .args(prefix)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start VerifiableProducer");
    let stdout = drain(child.stdout.take().expect("piped"));
    let stderr = drain(child.stderr.take().expect("piped"));
    VerifiableProducer { child, stdout, stderr }
}

/// The records a VerifiableProducer's output says were acknowledged.
pub fn acknowledged(output: &str) -> Vec<Placed> {
    output
        .lines()
        .filter(|line| json_field(line, "name") == Some("producer_send_success"))
        .map(|line| Placed {
            partition: json_field(line, "partition").and_then(|v| v.parse().ok()).expect("partition"),
            offset: json_field(line, "offset").and_then(|v| v.parse().ok()).expect("offset"),
            value: json_field(line, "value").expect("value").to_string(),
        })
        .collect()
}

/// Every record of the topic, read back with Kafka's console consumer
/// from the beginning (`expected` of them, the sum of the log ends).
pub fn read_back(bootstrap: &str, expected: usize) -> Vec<Placed> {
    let (ok, printed) = super::kafka_cli(
        "kafka-console-consumer",
        &["--bootstrap-server", bootstrap, "--topic", TOPIC, "--from-beginning", "--timeout-ms", "30000"]
            .into_iter()
            .chain(["--max-messages", &expected.to_string()])
            .chain(["--property", "print.partition=true", "--property", "print.offset=true"])
            .collect::<Vec<_>>(),
    );
    assert!(ok, "{printed}");
    printed
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let field = |prefix: &str| fields.iter().find_map(|f| f.strip_prefix(prefix)).map(str::to_string);
            Some(Placed {
                partition: field("Partition:")?.parse().ok()?,
                offset: field("Offset:")?.parse().ok()?,
                value: fields.last()?.to_string(),
            })
        })
        .collect()
}

/// Every record of the topic, read through the brokers but `skip`, up
/// to each partition's end as its leader gives it (a follower refuses).
pub fn read_all(brokers: &[BrokerProcess], skip: Option<usize>) -> Vec<Placed> {
    let live: Vec<String> =
        brokers.iter().enumerate().filter(|(i, _)| Some(*i) != skip).map(|(_, b)| b.bootstrap()).collect();
    read_all_at(&live)
}

/// Every record of the topic, read through the brokers at `addresses`
/// (any brokers of the cluster: Kafka's too), up to each partition's end
/// as its leader gives it.
pub fn read_all_at(addresses: &[String]) -> Vec<Placed> {
    let ends: Vec<Vec<_>> = addresses.iter().map(|a| super::cluster::latest_offsets_at(a, TOPIC, 3)).collect();
    let total: i64 = (0..3)
        .map(|p| ends.iter().filter(|e| e[p].error_code == 0).map(|e| e[p].offset).max().expect("a leader"))
        .sum();
    read_back(&addresses.join(","), total as usize)
}

/// Acknowledged records not where they were acknowledged in `read`.
pub fn lost<'a>(acked: &'a [Placed], read: &[Placed]) -> Vec<&'a Placed> {
    let at: BTreeMap<(i32, i64), &str> = read.iter().map(|r| ((r.partition, r.offset), r.value.as_str())).collect();
    acked.iter().filter(|a| at.get(&(a.partition, a.offset)) != Some(&a.value.as_str())).collect()
}

/// The records of `read` whose value an earlier one holds (every value a
/// producer writes is its own).
pub fn duplicates(read: &[Placed]) -> Vec<&Placed> {
    let mut values = BTreeSet::new();
    read.iter().filter(|r| !values.insert(r.value.clone())).collect()
}

/// How many of `read`'s records are duplicates, by the round (from 0)
/// that wrote them: a round's producer writes values `round + 1.number`.
pub fn duplicates_by_round(read: &[Placed]) -> BTreeMap<u32, usize> {
    let mut by_round = BTreeMap::new();
    for record in duplicates(read) {
        let round: u32 = record.value.split('.').next().and_then(|r| r.parse().ok()).unwrap_or(0);
        *by_round.entry(round.saturating_sub(1)).or_default() += 1;
    }
    by_round
}

/// The checker: every acknowledged record where it was acknowledged, no
/// value twice (idempotence), offsets rising within each partition.
pub fn check(acked: &[Placed], read: &[Placed]) {
    let summary = |records: &[Placed]| {
        let mut ranges: BTreeMap<i32, (usize, i64, i64)> = BTreeMap::new();
        for r in records {
            let e = ranges.entry(r.partition).or_insert((0, i64::MAX, -1));
            *e = (e.0 + 1, e.1.min(r.offset), e.2.max(r.offset));
        }
        ranges
    };
    eprintln!("acknowledged (count, first, last) by partition: {:?}", summary(acked));
    eprintln!("read back (count, first, last) by partition: {:?}", summary(read));
    let lost = lost(acked, read);
    assert!(
        lost.is_empty(),
        "{} acknowledged records lost or moved, first {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    let duplicates = duplicates(read);
    assert!(duplicates.is_empty(), "duplicates: {:?}", &duplicates[..duplicates.len().min(5)]);
    assert_in_order(read);
}

/// Offsets rise within each partition of `read`.
pub fn assert_in_order(read: &[Placed]) {
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for record in read {
        let previous = last.insert(record.partition, record.offset);
        assert!(previous.is_none_or(|p| p < record.offset), "offsets out of order at {record:?}");
    }
}

/// The bytes of every segment of `TOPIC`-`partition` in a broker's data directory.
pub fn segments(node: &BrokerProcess, partition: usize) -> Vec<u8> {
    super::replica_bytes::partition_log(&node.data_dir(), TOPIC, partition as i32)
}

/// Creates `topic` with Kafka's `kafka-topics --create` and the `settings`
/// given, then writes `records` records of 50 bytes to it (idempotent,
/// acks=all).
pub fn create_and_fill(bootstrap: &str, topic: &str, settings: &[&str], records: usize) {
    let args =
        ["--bootstrap-server", bootstrap, "--create", "--topic", topic].into_iter().chain(settings.iter().copied());
    let (ok, printed) = super::kafka_cli("kafka-topics", &args.collect::<Vec<_>>());
    assert!(ok, "{printed}");
    let (ok, printed) = super::idempotent_perf_producer(bootstrap, topic, records);
    assert!(ok, "{printed}");
}

/// The fault rounds' seeded draws (`KRABKA_FAULT_SEED`, 1 by default):
/// targets and timings alike in every run of a seed, and alike in
/// fault_rounds.rs and kafka_fault_rounds.rs, which draw in the same order.
pub struct Draws(u64);

impl Draws {
    pub fn from_env() -> Self {
        Draws(std::env::var("KRABKA_FAULT_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1))
    }

    /// The next draw in `0..n`: the high bits of a 64-bit LCG (Knuth's MMIX).
    pub fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// What one round's producer saw.
pub struct RoundOutcome {
    pub acknowledged: Vec<Placed>,
    /// Records the producer gave up on (its delivery timeout).
    pub given_up: usize,
}

/// Every one of the round's `expected` records is acknowledged or given up
/// on; giving up is allowed only as Kafka 4.3.1 does it (KAFKA-14359,
/// fixed in Kafka 4.5 for never-written partitions only): a producer new
/// to a partition whose leader is cut off before it replicated anything of
/// that producer's sends its next batch to the new leader while the first
/// is still out; the new leader, knowing nothing of the producer, takes
/// any sequence; every retry of the first batch is then
/// OUT_OF_ORDER_SEQUENCE_NUMBER until the producer gives up (and batches
/// in flight with it may fail with OutOfOrderSequenceException). Nothing
/// acknowledged is lost.
pub fn round_outcome(round: u64, output: &std::process::Output, expected: usize) -> Result<RoundOutcome, String> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let acknowledged = acknowledged(&stdout);
    let errors: Vec<&str> = stdout.lines().filter(|l| json_field(l, "name") == Some("producer_send_error")).collect();
    let outcome = RoundOutcome { acknowledged, given_up: errors.len() };
    if outcome.acknowledged.len() + outcome.given_up != expected {
        return Err(format!(
            "round {round}: records unaccounted for: {} acknowledged, {} failed",
            outcome.acknowledged.len(),
            outcome.given_up
        ));
    }
    let kafka_14359 = stderr.contains("OUT_OF_ORDER_SEQUENCE_NUMBER")
        && errors.iter().all(|e| {
            // The first batch expires; a later one in flight with it may be
            // refused once the producer saw the gap (it then bumps its epoch).
            json_field(e, "exception")
                .is_some_and(|x| x.ends_with("TimeoutException") || x.ends_with("OutOfOrderSequenceException"))
        });
    if outcome.given_up > 0 && !kafka_14359 {
        return Err(format!("round {round}: {} records failed: {}", outcome.given_up, errors[0]));
    }
    Ok(outcome)
}

fn whole(listed: &[(i32, Vec<i32>, Vec<i32>)]) -> bool {
    listed.len() == 3 && listed.iter().all(|(_, _, isr)| isr.len() == 3)
}

/// Waits until some broker at `addresses` lists every ISR of `TOPIC` whole.
pub fn wait_whole_at(addresses: &[String], what: &str, patience: std::time::Duration) {
    // A broker just restarted may close a connection while it starts.
    let listed = |a: &String| std::panic::catch_unwind(|| partitions(a)).unwrap_or_default();
    let deadline = std::time::Instant::now() + patience;
    while !addresses.iter().any(|a| whole(&listed(a))) {
        let seen: Vec<_> = addresses.iter().map(listed).collect();
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}: (leader, replicas, ISR) {seen:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
