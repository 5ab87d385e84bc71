//! Offset-commit load generator for the group coordinator: many groups
//! committing offsets of several partitions each, over a few pipelining
//! connections, then an OffsetFetch check that every group reads back the
//! offsets of its last round.
//!
//! ```sh
//! cargo run --release --locked -p krabka-broker --example group_bench -- \
//!     --bootstrap 127.0.0.1:9092 --groups 1000 --partitions 10 --rounds 20 --connections 8
//! ```
//!
//! 1. ApiVersions (to pick the OffsetCommit/OffsetFetch versions: v9 when
//!    the broker serves it, else its highest); CreateTopics for `--topic`
//!    unless it exists; one FindCoordinator (which creates
//!    `__consumer_offsets` on a fresh broker).
//! 2. Commit phase: groups `g-0..g-{N-1}` are dealt round-robin to the
//!    connections (group g to connection g % C), each connection a thread
//!    that keeps up to `--in-flight` OffsetCommit requests outstanding and
//!    walks its groups round by round. One request commits partitions
//!    0..P-1 of the topic for one group, with generation -1 and an empty
//!    member id (an admin-style commit, allowed for a group without
//!    members). Round r (1-based) commits offset `r * 1_000_000 + partition`,
//!    so offsets grow per round. Every partition error code must be 0.
//! 3. Verify phase: OffsetFetch (v8+, many groups per request) of every
//!    group must return the offsets of round `--rounds`.
//!
//! `--verify-only` skips topic creation and the commit phase (for checking
//! a restarted broker: pass the same `--groups`, `--partitions`, `--rounds`).
//! `--broker-pid` adds the broker's CPU time (utime+stime from
//! /proc/PID/stat) over the commit phase to the report.
//!
//! Progress goes to stderr; stdout gets one JSON line. Exit status 1 when a
//! commit failed or a fetched offset differs.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use bytes::{Bytes, BytesMut};
use clap::Parser;
use krabka_protocol::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use krabka_protocol::frame::{encode_request, parse_response_header};
use krabka_protocol::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use krabka_protocol::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use krabka_protocol::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, Message, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse,
};

/// Kafka error codes this program names.
const TOPIC_ALREADY_EXISTS: i16 = 36;

/// Offset committed for `partition` in 1-based round `round`.
fn offset_for(round: u32, partition: i32) -> i64 {
    i64::from(round) * 1_000_000 + i64::from(partition)
}

#[derive(Parser, Debug, Clone)]
#[command(name = "group_bench", about = "OffsetCommit/OffsetFetch load against a krabka (or Kafka) broker")]
struct Args {
    /// host:port of the broker (it must also be the group coordinator).
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Number of groups, named g-0 .. g-(N-1).
    #[arg(long, default_value_t = 1000)]
    groups: u32,
    /// Partitions committed per request (and of the topic when created).
    #[arg(long, default_value_t = 10)]
    partitions: i32,
    /// Commits per group.
    #[arg(long, default_value_t = 20)]
    rounds: u32,
    /// Connections (one thread each).
    #[arg(long, default_value_t = 8)]
    connections: u32,
    /// Outstanding OffsetCommit requests per connection.
    #[arg(long, default_value_t = 16)]
    in_flight: usize,
    /// Topic whose offsets are committed.
    #[arg(long, default_value = "bench-offsets")]
    topic: String,
    /// Groups per OffsetFetch request in the verify phase.
    #[arg(long, default_value_t = 100)]
    fetch_batch: usize,
    /// Only check with OffsetFetch that the offsets of round --rounds are there.
    #[arg(long)]
    verify_only: bool,
    /// Skip the verify phase.
    #[arg(long)]
    no_verify: bool,
    /// The broker's pid, to report its CPU time over the commit phase.
    #[arg(long)]
    broker_pid: Option<u32>,
}

/// A blocking client connection that can pipeline requests.
struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    correlation_id: i32,
    out: BytesMut,
}

impl Client {
    fn connect(bootstrap: &str) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(bootstrap).with_context(|| format!("connecting to {bootstrap}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let reader = BufReader::with_capacity(256 * 1024, stream.try_clone()?);
        Ok(Client { writer: stream, reader, correlation_id: 0, out: BytesMut::with_capacity(64 * 1024) })
    }

    /// Encodes a request into the output buffer; returns its correlation id.
    fn queue<M: Message>(&mut self, api_key: ApiKey, version: i16, request: &M) -> anyhow::Result<i32> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        encode_request(&mut self.out, api_key, version, self.correlation_id, Some("group-bench"), request)
            .map_err(|e| anyhow::anyhow!("encoding {api_key:?} v{version}: {e}"))?;
        Ok(self.correlation_id)
    }

    /// Writes every queued request in one go.
    fn flush(&mut self) -> anyhow::Result<()> {
        if !self.out.is_empty() {
            self.writer.write_all(&self.out).context("writing requests")?;
            self.out.clear();
        }
        Ok(())
    }

    fn receive<R: Message>(&mut self, api_key: ApiKey, version: i16, correlation_id: i32) -> anyhow::Result<R> {
        let mut size = [0u8; 4];
        self.reader.read_exact(&mut size).with_context(|| format!("reading a {api_key:?} response"))?;
        let size = i32::from_be_bytes(size);
        ensure!((4..=256 * 1024 * 1024).contains(&size), "implausible response size {size}");
        let mut frame = vec![0u8; size as usize];
        self.reader.read_exact(&mut frame).context("reading a response body")?;
        let mut frame = Bytes::from(frame);
        let header = parse_response_header(api_key, version, &mut frame)
            .map_err(|e| anyhow::anyhow!("{api_key:?} response header: {e}"))?;
        ensure!(
            header.correlation_id == correlation_id,
            "{api_key:?}: correlation id {} where {correlation_id} was expected",
            header.correlation_id
        );
        let response = R::decode(&mut frame, version).map_err(|e| anyhow::anyhow!("{api_key:?} v{version}: {e}"))?;
        ensure!(frame.is_empty(), "{api_key:?}: {} bytes left after the response", frame.len());
        Ok(response)
    }

    fn request<M: Message, R: Message>(&mut self, api_key: ApiKey, version: i16, request: &M) -> anyhow::Result<R> {
        let id = self.queue(api_key, version, request)?;
        self.flush()?;
        self.receive(api_key, version, id)
    }
}

/// The versions both sides speak, from ApiVersions v0.
struct Versions {
    commit: i16,
    fetch: i16,
    create_topics: i16,
    find_coordinator: i16,
}

fn negotiate(client: &mut Client) -> anyhow::Result<Versions> {
    let response: ApiVersionsResponse = client.request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())?;
    ensure!(response.error_code == 0, "ApiVersions: error code {}", response.error_code);
    let pick = |key: ApiKey, wanted: i16, least: i16| -> anyhow::Result<i16> {
        let Some(range) = response.api_keys.iter().find(|k| k.api_key == key as i16) else {
            bail!("the broker does not serve {key:?}");
        };
        let version = wanted.min(range.max_version).min(key.info().max_version);
        ensure!(
            version >= least.max(range.min_version),
            "{key:?}: the broker serves v{}..v{}",
            range.min_version,
            range.max_version
        );
        Ok(version)
    };
    Ok(Versions {
        // v10 names topics by id; v9 is the newest by name.
        commit: pick(ApiKey::OffsetCommit, 9, 2)?,
        fetch: pick(ApiKey::OffsetFetch, 9, 8)?,
        create_topics: pick(ApiKey::CreateTopics, 7, 2)?,
        find_coordinator: pick(ApiKey::FindCoordinator, 4, 4)?,
    })
}

fn create_topic(client: &mut Client, versions: &Versions, args: &Args) -> anyhow::Result<bool> {
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: args.topic.clone(),
            num_partitions: args.partitions,
            replication_factor: 1,
            configs: vec![CreatableTopicConfig {
                name: "retention.ms".into(),
                value: Some("-1".into()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 30_000,
        ..Default::default()
    };
    let response: CreateTopicsResponse = client.request(ApiKey::CreateTopics, versions.create_topics, &request)?;
    let topic = response.topics.first().context("CreateTopics: empty response")?;
    match topic.error_code {
        0 => Ok(true),
        TOPIC_ALREADY_EXISTS => Ok(false),
        code => bail!("CreateTopics {}: error code {code} {:?}", args.topic, topic.error_message),
    }
}

/// FindCoordinator for g-0, retried while the coordinator is not ready.
fn find_coordinator(client: &mut Client, versions: &Versions) -> anyhow::Result<(i32, String, i32)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let request =
            FindCoordinatorRequest { key_type: 0, coordinator_keys: vec!["g-0".into()], ..Default::default() };
        let response: FindCoordinatorResponse =
            client.request(ApiKey::FindCoordinator, versions.find_coordinator, &request)?;
        let c = response.coordinators.first().context("FindCoordinator: empty response")?;
        if c.error_code == 0 {
            return Ok((c.node_id, c.host.clone(), c.port));
        }
        if Instant::now() > deadline {
            bail!("FindCoordinator: error code {} {:?}", c.error_code, c.error_message);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn commit_request(args: &Args, group: u32, round: u32) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: format!("g-{group}"),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: vec![OffsetCommitRequestTopic {
            name: args.topic.clone(),
            partitions: (0..args.partitions)
                .map(|p| OffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: offset_for(round, p),
                    committed_leader_epoch: -1,
                    committed_metadata: Some(String::new()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// What one connection measured.
#[derive(Default)]
struct ConnectionReport {
    requests: u64,
    latencies_us: Vec<u32>,
    /// Partition error codes other than 0, by code.
    errors: BTreeMap<i16, u64>,
    /// Responses whose partitions did not match the request.
    malformed: u64,
}

/// One connection's share: groups c, c+C, c+2C, ..., round after round.
fn run_connection(args: &Args, version: i16, index: u32, barrier: &Barrier) -> anyhow::Result<ConnectionReport> {
    // Every thread reaches the barrier, even one that could not connect.
    let client = Client::connect(&args.bootstrap);
    barrier.wait();
    let mut client = client?;
    let mine: Vec<u32> = (index..args.groups).step_by(args.connections as usize).collect();
    let mut work = (1..=args.rounds).flat_map(|round| mine.iter().map(move |&g| (g, round)));
    let mut report =
        ConnectionReport { latencies_us: Vec::with_capacity(mine.len() * args.rounds as usize), ..Default::default() };
    let mut outstanding: VecDeque<(i32, Instant)> = VecDeque::with_capacity(args.in_flight);
    let mut queued = Vec::with_capacity(args.in_flight);
    loop {
        while outstanding.len() + queued.len() < args.in_flight {
            let Some((group, round)) = work.next() else { break };
            queued.push(client.queue(ApiKey::OffsetCommit, version, &commit_request(args, group, round))?);
        }
        if !queued.is_empty() {
            client.flush()?;
            let sent = Instant::now();
            outstanding.extend(queued.drain(..).map(|id| (id, sent)));
        }
        let Some((id, sent)) = outstanding.pop_front() else { break };
        let response: OffsetCommitResponse = client.receive(ApiKey::OffsetCommit, version, id)?;
        report.latencies_us.push(sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        report.requests += 1;
        let partitions: Vec<_> = response.topics.iter().flat_map(|t| t.partitions.iter()).collect();
        if response.topics.len() != 1 || partitions.len() != args.partitions as usize {
            report.malformed += 1;
        }
        for p in partitions {
            if p.error_code != 0 {
                *report.errors.entry(p.error_code).or_default() += 1;
            }
        }
    }
    Ok(report)
}

/// utime+stime of a process in seconds, from /proc/PID/stat.
fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((utime + stime) / ticks)
}

fn self_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

struct CommitSummary {
    requests: u64,
    seconds: f64,
    latencies: Vec<u32>,
    errors: BTreeMap<i16, u64>,
    malformed: u64,
    broker_cpu_seconds: Option<f64>,
    client_cpu_seconds: f64,
}

fn commit_phase(args: &Args, version: i16) -> anyhow::Result<CommitSummary> {
    let barrier = Arc::new(Barrier::new(args.connections as usize + 1));
    let shared = Arc::new(args.clone());
    let threads: Vec<_> = (0..args.connections)
        .map(|index| {
            let barrier = barrier.clone();
            let args = shared.clone();
            std::thread::Builder::new()
                .name(format!("commit-{index}"))
                .spawn(move || run_connection(&args, version, index, &barrier))
                .expect("spawn a connection thread")
        })
        .collect();
    let broker_before = args.broker_pid.and_then(process_cpu_seconds);
    let client_before = self_cpu_seconds();
    barrier.wait();
    let started = Instant::now();
    let mut reports = Vec::new();
    for thread in threads {
        reports.push(thread.join().map_err(|_| anyhow::anyhow!("a connection thread panicked"))??);
    }
    let seconds = started.elapsed().as_secs_f64();
    let broker_after = args.broker_pid.and_then(process_cpu_seconds);
    let client_cpu_seconds = self_cpu_seconds() - client_before;
    let mut latencies = Vec::new();
    let mut errors = BTreeMap::new();
    let mut requests = 0;
    let mut malformed = 0;
    for report in reports {
        requests += report.requests;
        malformed += report.malformed;
        latencies.extend(report.latencies_us);
        for (code, n) in report.errors {
            *errors.entry(code).or_default() += n;
        }
    }
    latencies.sort_unstable();
    let broker_cpu_seconds = match (broker_before, broker_after) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Ok(CommitSummary { requests, seconds, latencies, errors, malformed, broker_cpu_seconds, client_cpu_seconds })
}

struct VerifySummary {
    groups: u64,
    offsets_checked: u64,
    mismatches: u64,
    group_errors: u64,
    seconds: f64,
}

fn verify_phase(args: &Args, version: i16) -> anyhow::Result<VerifySummary> {
    let mut client = Client::connect(&args.bootstrap)?;
    let started = Instant::now();
    let mut summary = VerifySummary { groups: 0, offsets_checked: 0, mismatches: 0, group_errors: 0, seconds: 0.0 };
    let mut shown = 0;
    let mut complain = |what: String| {
        if shown < 10 {
            eprintln!("group_bench: verify: {what}");
            shown += 1;
        }
    };
    let groups: Vec<u32> = (0..args.groups).collect();
    for chunk in groups.chunks(args.fetch_batch.max(1)) {
        let request = OffsetFetchRequest {
            groups: chunk
                .iter()
                .map(|g| OffsetFetchRequestGroup {
                    group_id: format!("g-{g}"),
                    member_id: None,
                    member_epoch: -1,
                    topics: Some(vec![OffsetFetchRequestTopics {
                        name: args.topic.clone(),
                        partition_indexes: (0..args.partitions).collect(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                })
                .collect(),
            require_stable: false,
            ..Default::default()
        };
        let response: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, version, &request)?;
        ensure!(response.error_code == 0, "OffsetFetch: error code {}", response.error_code);
        ensure!(
            response.groups.len() == chunk.len(),
            "OffsetFetch: {} groups answered for {} asked",
            response.groups.len(),
            chunk.len()
        );
        for (g, group) in chunk.iter().zip(&response.groups) {
            summary.groups += 1;
            if group.group_id != format!("g-{g}") || group.error_code != 0 {
                summary.group_errors += 1;
                complain(format!("group {} (asked g-{g}): error code {}", group.group_id, group.error_code));
                continue;
            }
            let mut found = vec![None; args.partitions as usize];
            for topic in &group.topics {
                for p in &topic.partitions {
                    if topic.name == args.topic && (0..args.partitions).contains(&p.partition_index) {
                        found[p.partition_index as usize] = Some((p.committed_offset, p.error_code));
                    }
                }
            }
            for (partition, got) in found.into_iter().enumerate() {
                summary.offsets_checked += 1;
                let want = offset_for(args.rounds, partition as i32);
                if got != Some((want, 0)) {
                    summary.mismatches += 1;
                    complain(format!("g-{g} partition {partition}: got (offset, error) {got:?}, want {want}"));
                }
            }
        }
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_f64(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "null".into()
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ensure!(args.groups > 0 && args.partitions > 0 && args.connections > 0 && args.in_flight > 0, "sizes must be > 0");
    ensure!(args.rounds > 0, "--rounds must be > 0");
    let (versions, created, find_coordinator_ms) = set_up(&args)?;
    let mut fields: Vec<(String, String)> = vec![
        ("mode".into(), json_string(if args.verify_only { "verify-only" } else { "commit" })),
        ("bootstrap".into(), json_string(&args.bootstrap)),
        ("topic".into(), json_string(&args.topic)),
        ("topic_created".into(), created.to_string()),
        ("groups".into(), args.groups.to_string()),
        ("partitions".into(), args.partitions.to_string()),
        ("rounds".into(), args.rounds.to_string()),
        ("connections".into(), args.connections.to_string()),
        ("in_flight".into(), args.in_flight.to_string()),
        ("offset_commit_version".into(), versions.commit.to_string()),
        ("offset_fetch_version".into(), versions.fetch.to_string()),
        ("find_coordinator_ms".into(), json_f64(find_coordinator_ms)),
    ];
    let mut failed = false;
    if !args.verify_only {
        failed |= report_commits(&args, versions.commit, &mut fields)?;
    }
    if args.no_verify {
        fields.push(("verified".into(), "null".into()));
    } else {
        failed |= report_verification(&args, versions.fetch, &mut fields)?;
    }
    fields.push(("ok".into(), (!failed).to_string()));
    let line = fields.iter().map(|(k, v)| format!("{}:{v}", json_string(k))).collect::<Vec<_>>().join(",");
    println!("{{{line}}}");
    std::io::stdout().flush()?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// Negotiates versions, creates the topic (unless verifying only) and times
/// FindCoordinator: (versions, topic created, FindCoordinator ms).
fn set_up(args: &Args) -> anyhow::Result<(Versions, bool, f64)> {
    let mut admin = Client::connect(&args.bootstrap)?;
    let versions = negotiate(&mut admin)?;
    eprintln!(
        "group_bench: OffsetCommit v{}, OffsetFetch v{}, {} groups x {} partitions x {} rounds over {} connections ({} in flight each)",
        versions.commit, versions.fetch, args.groups, args.partitions, args.rounds, args.connections, args.in_flight
    );
    let created = if args.verify_only { false } else { create_topic(&mut admin, &versions, args)? };
    let started = Instant::now();
    let coordinator = find_coordinator(&mut admin, &versions)?;
    let find_coordinator_ms = started.elapsed().as_secs_f64() * 1000.0;
    eprintln!(
        "group_bench: topic {} {}; coordinator node {} at {}:{} ({find_coordinator_ms:.1} ms)",
        args.topic,
        if args.verify_only {
            "not created (verify only)"
        } else if created {
            "created"
        } else {
            "already there"
        },
        coordinator.0,
        coordinator.1,
        coordinator.2
    );
    Ok((versions, created, find_coordinator_ms))
}

/// Runs the commit phase and adds its figures to `fields`. True when it failed.
fn report_commits(args: &Args, version: i16, fields: &mut Vec<(String, String)>) -> anyhow::Result<bool> {
    let mut failed = false;
    eprintln!("group_bench: committing {} requests", u64::from(args.groups) * u64::from(args.rounds));
    let s = commit_phase(args, version)?;
    let offsets = s.requests * args.partitions as u64;
    let error_count: u64 = s.errors.values().sum();
    let expected = u64::from(args.groups) * u64::from(args.rounds);
    if error_count > 0 || s.malformed > 0 || s.requests != expected {
        failed = true;
        eprintln!(
            "group_bench: commit errors {:?}, malformed responses {}, requests {} of {expected}",
            s.errors, s.malformed, s.requests
        );
    }
    let errors_json = s.errors.iter().map(|(code, n)| format!("\"{code}\":{n}")).collect::<Vec<_>>().join(",");
    fields.extend([
        ("commit_requests".into(), s.requests.to_string()),
        ("commit_offsets".into(), offsets.to_string()),
        ("commit_seconds".into(), json_f64(s.seconds)),
        ("commit_requests_per_sec".into(), json_f64(s.requests as f64 / s.seconds)),
        ("commit_offsets_per_sec".into(), json_f64(offsets as f64 / s.seconds)),
        ("latency_p50_us".into(), percentile(&s.latencies, 50.0).to_string()),
        ("latency_p99_us".into(), percentile(&s.latencies, 99.0).to_string()),
        ("latency_max_us".into(), s.latencies.last().copied().unwrap_or(0).to_string()),
        ("commit_error_codes".into(), format!("{{{errors_json}}}")),
        ("commit_malformed_responses".into(), s.malformed.to_string()),
        ("client_cpu_seconds".into(), json_f64(s.client_cpu_seconds)),
    ]);
    match s.broker_cpu_seconds {
        Some(cpu) => fields.extend([
            ("broker_cpu_seconds".into(), json_f64(cpu)),
            ("broker_cpu_us_per_request".into(), json_f64(cpu * 1e6 / s.requests.max(1) as f64)),
            ("broker_cpu_us_per_offset".into(), json_f64(cpu * 1e6 / offsets.max(1) as f64)),
        ]),
        None => fields.extend([
            ("broker_cpu_seconds".into(), "null".into()),
            ("broker_cpu_us_per_request".into(), "null".into()),
            ("broker_cpu_us_per_offset".into(), "null".into()),
        ]),
    }
    eprintln!(
        "group_bench: {} requests in {:.2} s: {:.0} requests/s, {:.0} offsets/s, p50 {} us, p99 {} us",
        s.requests,
        s.seconds,
        s.requests as f64 / s.seconds,
        offsets as f64 / s.seconds,
        percentile(&s.latencies, 50.0),
        percentile(&s.latencies, 99.0)
    );
    Ok(failed)
}

/// Reads every committed offset back and adds the tally to `fields`. True
/// when one was missing or wrong.
fn report_verification(args: &Args, version: i16, fields: &mut Vec<(String, String)>) -> anyhow::Result<bool> {
    let v = verify_phase(args, version)?;
    let failed = v.mismatches > 0 || v.group_errors > 0;
    eprintln!(
        "group_bench: verify: {} groups, {} offsets checked, {} mismatches, {} group errors ({:.2} s)",
        v.groups, v.offsets_checked, v.mismatches, v.group_errors, v.seconds
    );
    fields.extend([
        ("verified".into(), (v.mismatches == 0 && v.group_errors == 0).to_string()),
        ("verify_groups".into(), v.groups.to_string()),
        ("verify_offsets_checked".into(), v.offsets_checked.to_string()),
        ("verify_mismatches".into(), v.mismatches.to_string()),
        ("verify_group_errors".into(), v.group_errors.to_string()),
        ("verify_seconds".into(), json_f64(v.seconds)),
    ]);
    Ok(failed)
}
