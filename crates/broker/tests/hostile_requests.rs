//! Issue 21, part 2: every API and version the broker advertises (asked of
//! the broker itself, with ApiVersions) gets valid requests with random field
//! values, built by the generated random constructors and biased toward the
//! topics, ids and integers where handlers branch. Each must be answered with
//! a frame carrying its correlation id that decodes at its version, on a
//! connection that stays open (a following ApiVersions is answered), by a
//! process that stays alive. The one exception is Kafka's: a Produce with
//! acks=0 has no response, and a failed one closes the connection.
//!
//! `KRABKA_SEED=<n>` replays a run (the seed is printed), `KRABKA_ONLY=Api` or
//! `KRABKA_ONLY=Api:version` narrows it, `KRABKA_LONG_TESTS=1` sends many more
//! requests per version.

mod support;

#[path = "../examples/wire_fuzz/requests.rs"]
mod requests;

use krabka_protocol::testing::Rng;
use krabka_protocol::{ApiKey, RequestBody};
use requests::{expects_no_response, known_failure, random_request, Connection, Failure, Vocabulary};
use support::BrokerProcess;

/// The topics the random names are biased toward (name, partitions).
const TOPICS: &[(&str, i32)] = &[("hostile-a", 3), ("hostile-b", 1)];

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

fn base_seed() -> u64 {
    match std::env::var("KRABKA_SEED") {
        Ok(seed) => seed.parse().expect("KRABKA_SEED is a u64"),
        // A new seed each run explores new inputs; it is printed to replay.
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64),
    }
}

/// One case's seed, so `KRABKA_ONLY` replays a case without the ones before it.
fn case_seed(base: u64, api_key: ApiKey, version: i16, case: u64) -> u64 {
    let mut x = base ^ ((api_key as u64) << 48) ^ ((version as u64) << 32) ^ case;
    // splitmix64's finaliser spreads the fields over all the bits.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn selected(api_key: ApiKey, version: i16) -> bool {
    let Ok(only) = std::env::var("KRABKA_ONLY") else { return true };
    let (name, only_version): (&str, Option<i16>) =
        only.split_once(':').map_or((only.as_str(), None), |(n, v)| (n, v.parse().ok()));
    api_key.info().name == name && only_version.is_none_or(|v| v == version)
}

struct Finding {
    api_key: ApiKey,
    version: i16,
    seed: u64,
    request: String,
    failure: String,
    broker_said: Vec<String>,
    process_died: bool,
    known: Option<&'static str>,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let died = if self.process_died { " [PROCESS DIED]" } else { "" };
        writeln!(f, "{:?} v{} (case seed {}): {}{died}", self.api_key, self.version, self.seed, self.failure)?;
        for line in &self.broker_said {
            writeln!(f, "    broker: {line}")?;
        }
        let mut request = self.request.clone();
        request.truncate(600);
        write!(f, "    request: {request}")
    }
}

/// Sends one request and checks the answer, then that the connection still
/// serves an ApiVersions.
fn exercise(connection: &mut Connection, body: &RequestBody, version: i16) -> Result<(), String> {
    let id = connection.send(body, version).map_err(|e| format!("sending: {e}"))?;
    if expects_no_response(body) {
        return match connection.api_versions() {
            Ok(_) | Err(Failure::Closed) => Ok(()),
            Err(e) => Err(format!("ApiVersions after an acks=0 Produce: {e}")),
        };
    }
    connection.receive(body.api_key(), version, id).map_err(|e| e.to_string())?;
    connection.api_versions().map(|_| ()).map_err(|e| format!("following ApiVersions on the same connection: {e}"))
}

/// The lines of the broker's log past `seen` that say why it failed.
fn broker_complaints(broker: &BrokerProcess, seen: &mut usize) -> Vec<String> {
    let log = broker.log();
    let fresh = log.get(*seen..).unwrap_or_default();
    let lines: Vec<&str> = fresh.lines().collect();
    *seen = log.len();
    let mut said = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("panicked at") || line.contains("memory allocation") {
            said.push(line.to_string());
            // A panic's message is on the line after its location.
            if let Some(next) = lines.get(i + 1) {
                said.push(next.to_string());
            }
        }
    }
    said
}

struct Run {
    broker: BrokerProcess,
    vocabulary: Vocabulary,
    log_seen: usize,
    findings: Vec<Finding>,
    requests: usize,
}

impl Run {
    fn connect(&self) -> Connection {
        Connection::open(&self.broker.bootstrap()).expect("a fresh connection to the broker")
    }

    /// Recreates the vocabulary's topics (a random DeleteTopics may have
    /// removed them) and learns their ids.
    fn refresh_topics(&mut self) {
        let topics = self.connect().ensure_topics(TOPICS).expect("creating the vocabulary's topics");
        self.vocabulary = Vocabulary { topics };
    }

    fn record(&mut self, api_key: ApiKey, version: i16, seed: u64, body: &RequestBody, failure: String) {
        // Let a dying process finish dying, and its log reach the file.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let process_died = !self.broker.is_running();
        let broker_said = broker_complaints(&self.broker, &mut self.log_seen);
        let request = format!("{body:?}");
        let known = known_failure(api_key, version);
        let finding = Finding { api_key, version, seed, request, failure, broker_said, process_died, known };
        println!("{} {finding}", if known.is_some() { "KNOWN" } else { "FAILURE" });
        self.findings.push(finding);
        if process_died {
            self.broker.restart_after_exit();
            self.log_seen = 0;
            self.refresh_topics();
        }
    }

    fn run_version(&mut self, api_key: ApiKey, version: i16, base: u64, cases: u64) {
        let mut connection = self.connect();
        let mut bias = self.vocabulary.bias();
        for case in 0..cases {
            let seed = case_seed(base, api_key, version, case);
            // Every other case leans hard on the vocabulary: deep handler
            // paths need several fields to name real things at once.
            bias.percent = if case % 2 == 0 { 50 } else { 85 };
            let body = random_request(api_key, version, &mut Rng::with_bias(seed, bias.clone()), false);
            self.requests += 1;
            if let Err(failure) = exercise(&mut connection, &body, version) {
                self.record(api_key, version, seed, &body, failure);
                if let Some(reason) = known_failure(api_key, version) {
                    // One hit is the news; more would only cost time (a
                    // stalled CreatePartitions takes the whole timeout).
                    println!("skipping the rest of {api_key:?} v{version}: known failure ({reason})");
                    return;
                }
                connection = self.connect();
            }
        }
    }
}

#[test]
fn every_advertised_api_and_version_answers_random_valid_requests() {
    let base = base_seed();
    println!("seed {base} (replay with KRABKA_SEED={base})");
    let cases = if env_flag("KRABKA_LONG_TESTS") { 60 } else { 4 };
    // No initial rebalance delay: a JoinGroup is answered without 3 s of waiting.
    let broker = BrokerProcess::start(&["group.initial.rebalance.delay.ms=0"]);
    let mut run = Run { broker, vocabulary: Vocabulary::default(), log_seen: 0, findings: Vec::new(), requests: 0 };
    let advertised = run.connect().api_versions().expect("ApiVersions");
    assert!(advertised.len() > 10, "the broker advertises only {advertised:?}");
    for &(api_key, min, max) in &advertised {
        run.refresh_topics();
        for version in (min..=max).filter(|&v| selected(api_key, v)) {
            run.run_version(api_key, version, base, cases);
        }
    }
    let (known, unexpected): (Vec<&Finding>, Vec<&Finding>) = run.findings.iter().partition(|f| f.known.is_some());
    println!("{} requests over {} APIs; {} known failures tolerated:", run.requests, advertised.len(), known.len());
    for finding in &known {
        println!("  {:?} v{}: {}", finding.api_key, finding.version, finding.known.unwrap_or_default());
    }
    let listing: Vec<String> = unexpected.iter().map(|f| f.to_string()).collect();
    assert!(unexpected.is_empty(), "seed {base}: {} failures:\n{}", unexpected.len(), listing.join("\n"));
}
