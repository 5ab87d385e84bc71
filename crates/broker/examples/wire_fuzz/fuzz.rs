//! The wire fuzzer's engine: worker threads send mutated frames of every
//! request type, pipelines, byte-at-a-time frames and bursts of connections,
//! while the main thread probes liveness (a fresh connection is answered),
//! integrity (acknowledged records read back exactly) and the broker's RSS.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use krabka_protocol::testing::{Bias, Rng};
use krabka_protocol::{ApiKey, DeleteTopicsRequest, RequestBody};

use crate::integrity::{self, Ledger};
use crate::mutate::mutate;
use crate::requests::{
    encode_frame, expects_no_response, known_failure, random_request, Connection, Failure, Vocabulary,
};

pub struct Options {
    pub bootstrap: String,
    /// The broker's process, for RSS and liveness (none: not measured).
    pub pid: Option<u32>,
    /// The broker's stderr, scanned for panics at the end (none: not scanned).
    pub broker_log: Option<PathBuf>,
    pub duration: Duration,
    pub seed: u64,
    pub workers: usize,
    /// How long RSS may take to come back after the fuzzing stops.
    pub settle: Duration,
    pub rss_slack_kib: u64,
}

#[derive(Debug, Default)]
pub struct Report {
    pub elapsed: Duration,
    pub frames: u64,
    pub mutated_frames: u64,
    pub connections: u64,
    pub probes: u64,
    pub acknowledged_records: usize,
    pub failures: Vec<String>,
    pub failure_count: u64,
    pub broker_panics: Vec<String>,
    pub rss_start_kib: u64,
    pub rss_peak_kib: u64,
    pub rss_end_kib: u64,
    pub rss_anon_start_kib: u64,
    pub rss_anon_end_kib: u64,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.failure_count == 0 && self.broker_panics.is_empty()
    }

    /// What a run did and found, ending with a row for docs/reliability.md.
    pub fn summary(&self, seed: u64) -> String {
        let mut text = format!(
            "wire_fuzz seed {seed}: {:?}, {} frames ({} mutated), {} connections, {} probes, {} acknowledged records \
             read back; RSS start/peak/end {}/{}/{} MiB (anonymous {}/-/{} MiB); {} failures, {} distinct broker panics\n",
            self.elapsed,
            self.frames,
            self.mutated_frames,
            self.connections,
            self.probes,
            self.acknowledged_records,
            self.rss_start_kib / 1024,
            self.rss_peak_kib / 1024,
            self.rss_end_kib / 1024,
            self.rss_anon_start_kib / 1024,
            self.rss_anon_end_kib / 1024,
            self.failure_count,
            self.broker_panics.len()
        );
        for failure in &self.failures {
            text.push_str(&format!("  failure: {failure}\n"));
        }
        for panic in &self.broker_panics {
            text.push_str(&format!("  broker panic: {panic}\n"));
        }
        text.push_str(&format!(
            "| {}s | {} | {} | {} | {:.1} / {:.1} / {:.1} MiB |",
            self.elapsed.as_secs(),
            self.frames,
            self.connections,
            self.failure_count + self.broker_panics.len() as u64,
            self.rss_start_kib as f64 / 1024.0,
            self.rss_peak_kib as f64 / 1024.0,
            self.rss_end_kib as f64 / 1024.0
        ));
        text
    }
}

/// The vocabulary's topics; integrity::TOPIC is deliberately not among them.
const TOPICS: &[(&str, i32)] = &[("fuzz-a", 3), ("fuzz-b", 1)];
const MAX_FAILURES_KEPT: usize = 50;

struct Shared {
    bootstrap: String,
    targets: Vec<(ApiKey, i16)>,
    bias: Bias,
    stop: AtomicBool,
    frames: AtomicU64,
    mutated_frames: AtomicU64,
    connections: AtomicU64,
    failure_count: AtomicU64,
    failures: Mutex<Vec<String>>,
}

impl Shared {
    fn fail(&self, what: String) {
        eprintln!("FAILURE: {what}");
        self.failure_count.fetch_add(1, Relaxed);
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() < MAX_FAILURES_KEPT {
            failures.push(what);
        }
    }

    /// A fuzzing connection: closed with a reset, so that thousands of them
    /// leave no TIME_WAIT sockets behind (and the broker meets resets too).
    fn connect(&self) -> Option<Connection> {
        self.connections.fetch_add(1, Relaxed);
        let connection = Connection::open(&self.bootstrap).ok()?;
        let linger = libc::linger { l_onoff: 1, l_linger: 0 };
        // SAFETY: a valid socket and a correctly sized option value.
        unsafe {
            libc::setsockopt(
                connection.stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
        Some(connection)
    }

    /// A valid random request of an advertised API and version.
    fn valid_request(&self, rng: &mut Rng, values: &mut Rng) -> (RequestBody, i16) {
        let (api_key, version) = self.targets[rng.below(self.targets.len() as u64) as usize];
        (random_request(api_key, version, values, true), version)
    }
}

fn describe(body: &RequestBody, version: i16) -> String {
    let mut text = format!("{:?} v{version}: {body:?}", body.api_key());
    text.truncate(400);
    text
}

/// Several mutated frames, then an ApiVersions: the broker may answer, close
/// or wait for bytes a lying size prefix promised; it must only not fall over
/// (the probes judge that).
fn mutated_frames(shared: &Shared, rng: &mut Rng, values: &mut Rng) {
    let Some(mut connection) = shared.connect() else { return };
    connection.stream.set_read_timeout(Some(Duration::from_millis(500))).ok();
    for _ in 0..1 + rng.below(8) {
        let frame = mutated_frame(shared, rng, values);
        shared.frames.fetch_add(1, Relaxed);
        shared.mutated_frames.fetch_add(1, Relaxed);
        if connection.stream.write_all(&frame).is_err() {
            return;
        }
    }
    let sentinel = RequestBody::ApiVersions(Box::default());
    if connection.send(&sentinel, 0).is_err() {
        return;
    }
    shared.frames.fetch_add(1, Relaxed);
    // Drain what comes back; a response frame must at least be sane in size.
    while let Ok(frame) = connection.read_frame() {
        if frame.len() < 4 {
            shared.fail(format!("a {}-byte response frame to mutated input", frame.len()));
            return;
        }
    }
}

fn mutated_frame(shared: &Shared, rng: &mut Rng, values: &mut Rng) -> Vec<u8> {
    loop {
        let (body, version) = shared.valid_request(rng, values);
        let (other, other_version) = shared.valid_request(rng, values);
        let (Ok(frame), Ok(other)) = (encode_frame(&body, version, 1), encode_frame(&other, other_version, 2)) else {
            continue;
        };
        let mut frame = frame.to_vec();
        mutate(rng, &mut frame, &other);
        // Keep out of the known failures: one of them can end the process.
        let header = frame.get(4..8).map(|h| (i16::from_be_bytes([h[0], h[1]]), i16::from_be_bytes([h[2], h[3]])));
        let known = header.and_then(|(key, version)| Some((ApiKey::from_i16(key)?, version)));
        if known.is_none_or(|(key, version)| known_failure(key, version).is_none()) {
            return frame;
        }
    }
}

/// Many valid requests written at once: every answer must come, in order.
fn pipeline(shared: &Shared, rng: &mut Rng, values: &mut Rng) {
    let Some(mut connection) = shared.connect() else { return shared.fail("connect for a pipeline".into()) };
    let mut expected = Vec::new();
    let mut bytes = Vec::new();
    for _ in 0..2 + rng.below(60) {
        let (body, version) = shared.valid_request(rng, values);
        let id = connection.next_id();
        let Ok(frame) = encode_frame(&body, version, id) else { continue };
        bytes.extend_from_slice(&frame);
        if !expects_no_response(&body) {
            expected.push((body, version, id));
        }
    }
    shared.frames.fetch_add(expected.len() as u64, Relaxed);
    if let Err(e) = connection.stream.write_all(&bytes) {
        return shared.fail(format!("writing a pipeline of {} requests: {e}", expected.len()));
    }
    for (body, version, id) in &expected {
        if let Err(e) = connection.receive(body.api_key(), *version, *id) {
            return shared.fail(format!("pipeline: {e} for {}", describe(body, *version)));
        }
    }
}

/// One valid request a byte at a time; a quarter are abandoned half-way.
fn slow_request(shared: &Shared, rng: &mut Rng, values: &mut Rng) {
    let Some(mut connection) = shared.connect() else { return shared.fail("connect for a slow frame".into()) };
    let (body, version) = shared.valid_request(rng, values);
    let id = connection.next_id();
    let Ok(frame) = encode_frame(&body, version, id) else { return };
    let abandon = rng.below(4) == 0;
    let end = if abandon { rng.below(frame.len() as u64) as usize } else { frame.len() };
    // At most ~200 writes, whatever the frame's size.
    let step = (frame.len() / 200).max(1);
    shared.frames.fetch_add(1, Relaxed);
    for chunk in frame[..end].chunks(step) {
        if connection.stream.write_all(chunk).is_err() {
            return shared.fail(format!("slow frame: the broker closed mid-frame for {}", describe(&body, version)));
        }
        std::thread::sleep(Duration::from_micros(500 + rng.below(2_000)));
    }
    if abandon || expects_no_response(&body) {
        return;
    }
    if let Err(e) = connection.receive(body.api_key(), version, id) {
        shared.fail(format!("slow frame: {e} for {}", describe(&body, version)));
    }
}

/// Many connections at once: silent, with a partial header, or asking
/// ApiVersions (which must be answered).
fn burst(shared: &Shared, rng: &mut Rng) {
    let mut asking = Vec::new();
    let mut idle = Vec::new();
    let probe = RequestBody::ApiVersions(Box::default());
    for _ in 0..10 + rng.below(90) {
        let Some(mut connection) = shared.connect() else { return shared.fail("connect in a burst".into()) };
        match rng.below(3) {
            0 => idle.push(connection),
            1 => {
                let _ = connection.stream.write_all(&[0, 0, 0, 20, 0, 18][..1 + rng.below(6) as usize]);
                idle.push(connection);
            }
            _ => {
                let version = rng.below(4) as i16;
                match connection.send(&probe, version) {
                    Ok(id) => asking.push((connection, id, version)),
                    Err(e) => return shared.fail(format!("burst: sending ApiVersions: {e}")),
                }
            }
        }
    }
    shared.frames.fetch_add(asking.len() as u64, Relaxed);
    for (connection, id, version) in &mut asking {
        if let Err(e) = connection.receive(ApiKey::ApiVersions, *version, *id) {
            return shared.fail(format!("burst: ApiVersions v{version} unanswered: {e}"));
        }
    }
    drop(idle);
}

/// One valid request on a fresh connection, then an ApiVersions on it.
fn single(shared: &Shared, rng: &mut Rng, values: &mut Rng) {
    let Some(mut connection) = shared.connect() else { return shared.fail("connect for a request".into()) };
    let (body, version) = shared.valid_request(rng, values);
    shared.frames.fetch_add(2, Relaxed);
    let result = connection.send(&body, version).and_then(|id| {
        if !expects_no_response(&body) {
            connection.receive(body.api_key(), version, id)?;
        }
        connection.api_versions()
    });
    match result {
        Ok(_) => {}
        Err(Failure::Closed) if expects_no_response(&body) => {}
        Err(e) => shared.fail(format!("request: {e} for {}", describe(&body, version))),
    }
}

fn worker(shared: Arc<Shared>, seed: u64) {
    // Decisions come from an unbiased generator, field values from a biased one.
    let mut rng = Rng::new(seed);
    let mut values = Rng::with_bias(seed ^ 0x5EED, shared.bias.clone());
    while !shared.stop.load(Relaxed) {
        match rng.below(100) {
            0..=49 => mutated_frames(&shared, &mut rng, &mut values),
            50..=64 => pipeline(&shared, &mut rng, &mut values),
            65..=74 => slow_request(&shared, &mut rng, &mut values),
            75..=79 => burst(&shared, &mut rng),
            _ => single(&shared, &mut rng, &mut values),
        }
    }
}

/// VmRSS of a process in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// One KiB figure of /proc/<pid>/status (RssAnon: the heap's share of RSS,
/// without mapped index and binary pages).
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Liveness and integrity on a fresh connection; records one more batch.
fn probe(bootstrap: &str, ledger: &mut Ledger, pid: Option<u32>) -> Result<(), String> {
    if let Some(pid) = pid {
        if rss_kib(pid).is_none() {
            return Err(format!("the broker process {pid} is gone"));
        }
    }
    let mut connection = Connection::open(bootstrap).map_err(|e| format!("liveness: connect: {e}"))?;
    connection.api_versions().map_err(|e| format!("liveness: ApiVersions: {e}"))?;
    let names: Vec<&str> = TOPICS.iter().map(|t| t.0).chain([integrity::TOPIC]).collect();
    connection
        .request(&crate::requests::metadata_request(&names), 12)
        .map_err(|e| format!("liveness: Metadata: {e}"))?;
    ledger.produce(&mut connection, 5).map_err(|e| format!("integrity: {e}"))?;
    ledger.verify(&mut connection).map_err(|e| format!("integrity: {e}"))
}

struct Setup {
    shared: Arc<Shared>,
    ledger: Ledger,
}

fn setup(options: &Options) -> Result<Setup, String> {
    let mut connection = Connection::open(&options.bootstrap).map_err(|e| format!("connect: {e}"))?;
    let advertised = connection.api_versions().map_err(|e| format!("ApiVersions: {e}"))?;
    let topics = connection.ensure_topics(TOPICS).map_err(|e| format!("creating topics: {e}"))?;
    connection
        .ensure_topics(&[(integrity::TOPIC, integrity::PARTITIONS)])
        .map_err(|e| format!("creating topics: {e}"))?;
    let targets: Vec<(ApiKey, i16)> = advertised
        .iter()
        .flat_map(|&(key, min, max)| (min..=max).map(move |v| (key, v)))
        .filter(|&(key, version)| known_failure(key, version).is_none())
        .collect();
    let mut ledger = Ledger::default();
    for _ in 0..10 {
        ledger.produce(&mut connection, 10)?;
    }
    let shared = Arc::new(Shared {
        bootstrap: options.bootstrap.clone(),
        targets,
        bias: Vocabulary { topics }.bias(),
        stop: AtomicBool::new(false),
        frames: AtomicU64::new(0),
        mutated_frames: AtomicU64::new(0),
        connections: AtomicU64::new(0),
        failure_count: AtomicU64::new(0),
        failures: Mutex::new(Vec::new()),
    });
    Ok(Setup { shared, ledger })
}

/// Deletes topics the fuzzing created (none should exist: creations only
/// validate), so that the memory they hold does not count as a leak. Internal
/// topics (`__consumer_offsets`) are the broker's own and stay.
fn delete_new_topics(bootstrap: &str, topics_at_start: &[String]) -> Result<usize, String> {
    let mut connection = Connection::open(bootstrap).map_err(|e| format!("connect: {e}"))?;
    let topics = connection.topics().map_err(|e| format!("Metadata: {e}"))?;
    let new: Vec<String> =
        topics.into_iter().map(|t| t.0).filter(|t| !t.starts_with("__") && !topics_at_start.contains(t)).collect();
    if !new.is_empty() {
        let request = DeleteTopicsRequest { topic_names: new.clone(), timeout_ms: 30_000, ..Default::default() };
        connection
            .request(&RequestBody::DeleteTopics(Box::new(request)), 5)
            .map_err(|e| format!("DeleteTopics: {e}"))?;
    }
    Ok(new.len())
}

/// Samples the broker's RSS every 250 ms until `stop`; returns the peak.
fn sample_rss(pid: Option<u32>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while !stop.load(Relaxed) {
            peak = peak.max(pid.and_then(rss_kib).unwrap_or(0));
            std::thread::sleep(Duration::from_millis(250));
        }
        peak
    })
}

/// Panic and allocation-failure lines in the broker's log, each once, with
/// how often it appeared (a panic's message is on the line after it).
fn broker_panics(log: &Option<PathBuf>) -> Vec<String> {
    let Some(text) = log.as_ref().and_then(|path| std::fs::read_to_string(path).ok()) else { return Vec::new() };
    let lines: Vec<&str> = text.lines().collect();
    let mut found: Vec<(String, usize)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("panicked at") || line.contains("memory allocation") {
            let location = line.split("panicked at").nth(1).unwrap_or(line).trim();
            let message = lines.get(i + 1).filter(|_| line.contains("panicked at")).unwrap_or(&"");
            let key = format!("{location} {message}");
            match found.iter_mut().find(|(k, _)| *k == key) {
                Some((_, count)) => *count += 1,
                None => found.push((key, 1)),
            }
        }
    }
    found.into_iter().map(|(key, count)| format!("{count}x {key}")).collect()
}

fn spawn_workers(shared: &Arc<Shared>, options: &Options, phase: u64) -> Vec<std::thread::JoinHandle<()>> {
    shared.stop.store(false, Relaxed);
    (0..options.workers as u64)
        .map(|i| {
            let shared = shared.clone();
            let seed = options.seed.wrapping_add((phase * 1000 + i).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            std::thread::spawn(move || worker(shared, seed))
        })
        .collect()
}

fn stop_workers(shared: &Shared, workers: Vec<std::thread::JoinHandle<()>>) {
    shared.stop.store(true, Relaxed);
    for worker in workers {
        let _ = worker.join();
    }
}

/// A first, short round of fuzzing brings the broker to its working set (the
/// coordinator's `__consumer_offsets` partitions, allocator arenas, fetch
/// sessions); the RSS baseline is taken after it, once the broker is quiet.
fn warm_up(shared: &Arc<Shared>, options: &Options) -> Result<(u64, Vec<String>), String> {
    let workers = spawn_workers(shared, options, 0);
    std::thread::sleep((options.duration / 10).min(Duration::from_secs(10)));
    stop_workers(shared, workers);
    std::thread::sleep(Duration::from_secs(3));
    let rss = options.pid.and_then(rss_kib).unwrap_or(0);
    let mut connection = Connection::open(&options.bootstrap).map_err(|e| format!("connect: {e}"))?;
    let topics = connection.topics().map_err(|e| format!("Metadata: {e}"))?;
    Ok((rss, topics.into_iter().map(|t| t.0).collect()))
}

/// Probes every 2 s until the duration is over (or too much failed).
fn fuzz_and_probe(shared: &Arc<Shared>, options: &Options, ledger: &mut Ledger, report: &mut Report) {
    let started = Instant::now();
    let workers = spawn_workers(shared, options, 1);
    while started.elapsed() < options.duration && shared.failure_count.load(Relaxed) < MAX_FAILURES_KEPT as u64 {
        std::thread::sleep(Duration::from_secs(2).min(options.duration.saturating_sub(started.elapsed())));
        report.probes += 1;
        if let Err(e) = probe(&options.bootstrap, ledger, options.pid) {
            shared.fail(format!("probe after {:?}: {e}", started.elapsed()));
            if e.contains("is gone") {
                break;
            }
        }
    }
    stop_workers(shared, workers);
    report.elapsed = started.elapsed();
}

/// Runs the fuzzer against the broker at `options.bootstrap`.
pub fn run(options: &Options) -> Report {
    let mut report = Report::default();
    let prepared = setup(options).and_then(|setup| Ok((warm_up(&setup.shared, options)?, setup)));
    let ((rss_start, topics_at_start), Setup { shared, mut ledger }) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            report.failures.push(format!("setup: {e}"));
            report.failure_count = 1;
            return report;
        }
    };
    report.rss_start_kib = rss_start;
    report.rss_anon_start_kib = options.pid.and_then(|pid| status_kib(pid, "RssAnon:")).unwrap_or(0);
    let sampling = Arc::new(AtomicBool::new(false));
    let sampler = sample_rss(options.pid, sampling.clone());
    fuzz_and_probe(&shared, options, &mut ledger, &mut report);
    if let Err(e) = probe(&options.bootstrap, &mut ledger, options.pid) {
        shared.fail(format!("final probe: {e}"));
    }
    match delete_new_topics(&options.bootstrap, &topics_at_start) {
        Ok(0) => {}
        Ok(n) => eprintln!("deleted {n} topics the fuzzing created"),
        Err(e) => shared.fail(format!("deleting new topics: {e}")),
    }
    report.rss_end_kib = settle(options, report.rss_start_kib);
    report.rss_anon_end_kib = options.pid.and_then(|pid| status_kib(pid, "RssAnon:")).unwrap_or(0);
    sampling.store(true, Relaxed);
    report.rss_peak_kib = sampler.join().unwrap_or(0).max(report.rss_end_kib);
    if options.pid.is_some() && report.rss_end_kib > report.rss_start_kib + options.rss_slack_kib {
        shared.fail(format!(
            "RSS {} KiB after {:?} of settling, {} KiB at the start",
            report.rss_end_kib, options.settle, report.rss_start_kib
        ));
    }
    report.frames = shared.frames.load(Relaxed);
    report.mutated_frames = shared.mutated_frames.load(Relaxed);
    report.connections = shared.connections.load(Relaxed);
    report.acknowledged_records = ledger.records();
    report.failure_count = shared.failure_count.load(Relaxed);
    report.failures = std::mem::take(&mut *shared.failures.lock().unwrap_or_else(|e| e.into_inner()));
    report.broker_panics = broker_panics(&options.broker_log);
    report
}

/// Waits up to `options.settle` for RSS to come within the slack of `start`;
/// returns the last reading.
fn settle(options: &Options, start: u64) -> u64 {
    let Some(pid) = options.pid else { return 0 };
    let deadline = Instant::now() + options.settle;
    loop {
        let rss = rss_kib(pid).unwrap_or(0);
        if rss <= start + options.rss_slack_kib || Instant::now() >= deadline {
            return rss;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}
