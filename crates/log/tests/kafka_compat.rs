//! Compatibility proof against Apache Kafka 4.3.1 itself, in both directions:
//!
//! - krabka -> Kafka: a log written by krabka-log (every codec, several
//!   segments, dense sparse indexes, two leader epochs, an idempotent
//!   producer) is read by Kafka's own `kafka-dump-log`
//!   (`org.apache.kafka.tools.DumpLogSegments`), which must report every
//!   batch, record, index entry and producer snapshot exactly as written, with
//!   valid CRCs and no index mismatch, and pass the index sanity check.
//! - Kafka -> krabka: a real Kafka 4.3.1 broker is fed exact batches by
//!   Kafka's own Java producer (`kafka_compat/CompatProducer.java`, one
//!   idempotent producer per codec), stops cleanly, and krabka-log opens that
//!   partition after a clean and an unclean shutdown, reading back every
//!   record, Kafka's checkpoints, partition metadata and producer snapshots,
//!   and rebuilding Kafka's offset indexes byte for byte.
//!
//! Three tests pin incompatibilities these tests once found and that were
//! fixed (the final time-index entry, index trimming after recovery, the
//! producer snapshot's timestamp).
//!
//! Needs a Java 17 JDK (the producer runs as a single source file) and the
//! Kafka jars (`tools/kafka-reference/install`, called here, idempotent).
//! Every child process runs under a deadline and the broker is killed by a
//! guard whatever happens. Set `KRABKA_COMPAT_KEEP=1` to keep the temporary
//! directories for a post-mortem.

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

mod common;

use bytes::{Bytes, BytesMut};
use krabka_log::checkpoint::{
    read_leader_epochs, read_offsets, read_partition_metadata, EpochEntry, TopicPartition, LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA, RECOVERY_POINT_CHECKPOINT,
};
use krabka_log::producer_state::{BatchMetadata, ProducerEntry, ProducerStateManager};
use krabka_log::{CleanupPolicy, LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewHeader, NewRecord, RecordBatchBuilder, RecordBatches};
use krabka_protocol::Uuid;

// ---------------------------------------------------------------------------
// Running Kafka's tools
// ---------------------------------------------------------------------------

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

fn reference_tool(name: &str) -> PathBuf {
    repo_root().join("tools/kafka-reference").join(name)
}

/// Installs the Kafka 4.3.1 jars once per test process (the script is
/// idempotent, but two concurrent first installs would race in Maven).
fn install_kafka() {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        let out = run(Command::new(reference_tool("install")), None, Duration::from_secs(900));
        if out.status.is_some_and(|s| s.success()) {
            Ok(())
        } else {
            Err(out.context())
        }
    });
    if let Err(context) = result {
        panic!("tools/kafka-reference/install failed (needs Java 17 and Maven):\n{context}");
    }
}

struct ToolOutput {
    what: String,
    /// `None` when the deadline passed and the process was killed.
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

impl ToolOutput {
    fn context(&self) -> String {
        let status = match self.status {
            Some(status) => status.to_string(),
            None => "KILLED AFTER ITS DEADLINE".to_string(),
        };
        format!(
            "$ {}\n{status}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--- end ---",
            self.what, self.stdout, self.stderr
        )
    }

    fn assert_success(&self) -> &Self {
        assert!(self.status.is_some_and(|s| s.success()), "tool failed:\n{}", self.context());
        self
    }
}

/// Runs `command` to completion within `timeout`, feeding it `stdin`.
fn run(mut command: Command, stdin: Option<String>, timeout: Duration) -> ToolOutput {
    let what = format!("{command:?}");
    command
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let feeder = stdin.map(|data| {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        thread::spawn(move || {
            let _ = pipe.write_all(data.as_bytes());
        })
    });
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut out = Vec::new();
            let _ = pipe.read_to_end(&mut out);
            String::from_utf8_lossy(&out).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout pipe")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr pipe")));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("waiting for {what}: {e}"),
        }
    };
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    ToolOutput { what, status, stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default() }
}

/// `tools/kafka-reference/kafka-cli TOOL ARGS...`
fn kafka_cli(tool: &str, args: &[String], stdin: Option<String>, timeout: Duration) -> ToolOutput {
    let mut command = Command::new(reference_tool("kafka-cli"));
    command.arg(tool).args(args);
    run(command, stdin, timeout)
}

/// A unique scratch directory, removed at the end unless `KRABKA_COMPAT_KEEP` is set.
struct ScratchDir {
    path: PathBuf,
    _removed_on_drop: Option<tempfile::TempDir>,
}

impl ScratchDir {
    fn new(prefix: &str) -> ScratchDir {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir().expect("temp dir");
        if std::env::var_os("KRABKA_COMPAT_KEEP").is_some() {
            let path = dir.keep();
            eprintln!("keeping {}", path.display());
            return ScratchDir { path, _removed_on_drop: None };
        }
        ScratchDir { path: dir.path().to_path_buf(), _removed_on_drop: Some(dir) }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn file_base_offset(path: &Path) -> i64 {
    let name = path.file_name().and_then(|n| n.to_str()).expect("file name");
    name.split('.').next().and_then(|stem| stem.parse().ok()).unwrap_or_else(|| panic!("not a segment file: {name}"))
}

/// The segment files of a partition directory with `suffix`, by base offset.
fn segment_files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("partition dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.len() == 20 + suffix.len() && n.ends_with(suffix))
        })
        .collect();
    files.sort_by_key(|p| file_base_offset(p));
    files
}

fn joined(files: &[PathBuf]) -> String {
    files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(",")
}

// ---------------------------------------------------------------------------
// Reading kafka-dump-log's output
// ---------------------------------------------------------------------------

/// `name: value name: value ...` as printed by DumpLogSegments (values hold
/// no spaces in these tests).
fn fields(line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut tokens = line.trim_start_matches('|').split_whitespace();
    while let Some(token) = tokens.next() {
        let name = token.strip_suffix(':').unwrap_or_else(|| panic!("unexpected token {token:?} in {line:?}"));
        let value = tokens.next().unwrap_or_else(|| panic!("no value for {name:?} in {line:?}"));
        out.insert(name.to_string(), value.to_string());
    }
    out
}

fn field<'a>(fields: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    fields.get(name).unwrap_or_else(|| panic!("no {name:?} in {fields:?}"))
}

fn int(fields: &BTreeMap<String, String>, name: &str) -> i64 {
    let text = field(fields, name);
    text.parse().unwrap_or_else(|_| panic!("{name} is not an integer: {text:?}"))
}

/// The lines printed under each `Dumping <file>`.
fn dump_sections(stdout: &str) -> BTreeMap<PathBuf, Vec<String>> {
    let mut sections: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    let mut current: Option<PathBuf> = None;
    for line in stdout.lines() {
        if let Some(file) = line.strip_prefix("Dumping ") {
            let path = PathBuf::from(file);
            assert!(!sections.contains_key(&path), "{file} dumped twice");
            sections.insert(path.clone(), Vec::new());
            current = Some(path);
        } else {
            let Some(path) = &current else { panic!("output before the first 'Dumping': {line:?}") };
            sections.get_mut(path).expect("section").push(line.to_string());
        }
    }
    sections
}

#[derive(Debug)]
struct DumpedBatch {
    fields: BTreeMap<String, String>,
    records: Vec<BTreeMap<String, String>>,
}

/// A `.log` section: the batches and their records (deep iteration).
fn dumped_log(path: &Path, lines: &[String], context: &str) -> Vec<DumpedBatch> {
    let base = file_base_offset(path);
    let mut lines = lines.iter();
    assert_eq!(lines.next().map(String::as_str), Some(format!("Log starting offset: {base}").as_str()), "{context}");
    let mut batches: Vec<DumpedBatch> = Vec::new();
    for line in lines {
        if line.starts_with("baseOffset: ") {
            batches.push(DumpedBatch { fields: fields(line), records: Vec::new() });
        } else if line.starts_with("| offset: ") {
            let batch = batches.last_mut().unwrap_or_else(|| panic!("record before a batch: {line}\n{context}"));
            batch.records.push(fields(line));
        } else {
            panic!("unexpected line for {}: {line:?}\n{context}", path.display());
        }
    }
    batches
}

/// An index section: (a, b) pairs from `a_name: A b_name: B` lines, or none
/// for `<file> is empty.`.
fn dumped_index(path: &Path, lines: &[String], a_name: &str, b_name: &str, context: &str) -> Vec<(i64, i64)> {
    if lines.len() == 1 && lines[0] == format!("{} is empty.", path.display()) {
        return Vec::new();
    }
    lines
        .iter()
        .map(|line| {
            let f = fields(line);
            assert_eq!(f.len(), 2, "unexpected index line {line:?} for {}\n{context}", path.display());
            (int(&f, a_name), int(&f, b_name))
        })
        .collect()
}

/// Checks stderr holds nothing but the "Non-consecutive offsets" note every
/// segment not based at 0 gets (DumpLogSegments starts counting at -1 per
/// file): any index mismatch, timestamp error or exception fails.
fn assert_clean_dump_stderr(out: &ToolOutput, log_files: &[PathBuf]) {
    let mut expected = Vec::new();
    for path in log_files {
        let base = file_base_offset(path);
        if base != 0 {
            expected.push(format!("Non-consecutive offsets in {}", path.display()));
            expected.push(format!("  -1 is followed by {base}"));
        }
    }
    let mut lines: Vec<String> = out.stderr.lines().map(str::to_string).collect();
    // The notes come out of a HashMap: compare them pair by pair, unordered.
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("Non-consecutive offsets in ") && i + 1 < lines.len() {
            pairs.push((lines[i].clone(), lines[i + 1].clone()));
            i += 2;
        } else {
            i += 1;
        }
    }
    lines.retain(|l| !l.starts_with("Non-consecutive offsets in ") && !l.starts_with("  -1 is followed by "));
    assert!(lines.is_empty(), "kafka-dump-log reported problems:\n{}", out.context());
    let mut expected_pairs: Vec<(String, String)> = expected.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect();
    pairs.sort();
    expected_pairs.sort();
    assert_eq!(pairs, expected_pairs, "unexpected non-consecutive offsets:\n{}", out.context());
}

/// Runs `kafka-dump-log --index-sanity-check` (Kafka's
/// `AbstractIndex.sanityCheck`: entry size, last offset not below the base,
/// last timestamp not below the first) over every index.
fn assert_indexes_pass_kafka_sanity_check(dir: &Path) {
    let mut indexes = segment_files(dir, ".index");
    indexes.extend(segment_files(dir, ".timeindex"));
    assert!(!indexes.is_empty(), "no index files in {}", dir.display());
    let out = kafka_cli(
        "kafka-dump-log",
        &["--index-sanity-check".into(), "--files".into(), joined(&indexes)],
        None,
        Duration::from_secs(60),
    );
    out.assert_success();
    assert!(out.stderr.trim().is_empty(), "sanity check complained:\n{}", out.context());
    let sections = dump_sections(&out.stdout);
    assert_eq!(sections.len(), indexes.len(), "{}", out.context());
    for index in &indexes {
        let lines = sections.get(index).unwrap_or_else(|| panic!("{} not dumped\n{}", index.display(), out.context()));
        let passed = format!("{} passed sanity check.", index.display());
        let empty = format!("{} is empty.", index.display());
        assert!(
            lines.len() == 1 && (lines[0] == passed || lines[0] == empty),
            "{} failed Kafka's sanity check: {lines:?}\n{}",
            index.display(),
            out.context()
        );
    }
}

/// Runs `kafka-dump-log --verify-index-only` over every index: Kafka looks
/// each entry up in the segment and reports any mismatch on stderr.
fn assert_indexes_pass_kafka_verification(dir: &Path) {
    let mut indexes = segment_files(dir, ".index");
    indexes.extend(segment_files(dir, ".timeindex"));
    let out = kafka_cli(
        "kafka-dump-log",
        &["--verify-index-only".into(), "--files".into(), joined(&indexes)],
        None,
        Duration::from_secs(60),
    );
    out.assert_success();
    assert!(out.stderr.trim().is_empty(), "index verification reported problems:\n{}", out.context());
    for (path, lines) in dump_sections(&out.stdout) {
        let empty = format!("{} is empty.", path.display());
        assert!(lines.is_empty() || lines == [empty], "unexpected output for {}:\n{}", path.display(), out.context());
    }
}

// ---------------------------------------------------------------------------
// Kafka's indexing rule, computed independently of krabka-log
// ---------------------------------------------------------------------------

/// Index entries as pairs: (offset, position) or (timestamp, offset).
type IndexEntries = Vec<(i64, i64)>;

/// A batch as laid out in a segment: where it is and what the index needs.
#[derive(Clone, Copy, Debug)]
struct BatchPlacement {
    position: i64,
    size: i64,
    last_offset: i64,
    max_timestamp: i64,
}

/// The entries Kafka's `LogSegment.append` makes for these batches (one
/// segment, appended in order): before a batch, when more than
/// `index.interval.bytes` were written since the last entry, the offset index
/// gets (batch last offset -> batch position) and the time index gets the
/// largest timestamp so far (with its batch's last offset) if it grew.
/// Returns (offset index, time index, final max timestamp entry).
fn kafka_index_entries(
    batches: &[BatchPlacement],
    base_offset: i64,
    index_interval_bytes: i64,
) -> (IndexEntries, IndexEntries, (i64, i64)) {
    let mut offsets = Vec::new();
    let mut times: Vec<(i64, i64)> = Vec::new();
    let mut max_so_far = (-1i64, base_offset);
    let mut bytes_since_last_entry = 0i64;
    for batch in batches {
        if batch.max_timestamp > max_so_far.0 {
            max_so_far = (batch.max_timestamp, batch.last_offset);
        }
        if bytes_since_last_entry > index_interval_bytes {
            offsets.push((batch.last_offset, batch.position));
            if max_so_far.0 > times.last().map_or(-1, |t| t.0) {
                times.push(max_so_far);
            }
            bytes_since_last_entry = 0;
        }
        bytes_since_last_entry += batch.size;
    }
    (offsets, times, max_so_far)
}

/// Kafka's time index after the segment stopped being active or was closed:
/// `LogSegment.onBecomeInactiveSegment`, `close` and `recover` end with
/// `timeIndex.maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar, true)`,
/// which appends when that timestamp is newer than the last entry.
fn with_kafka_final_time_entry(mut times: Vec<(i64, i64)>, max_so_far: (i64, i64)) -> Vec<(i64, i64)> {
    if max_so_far.0 > times.last().map_or(-1, |t| t.0) {
        times.push(max_so_far);
    }
    times
}

/// The batches of a `.log` file as they lie on disk.
fn segment_placements(log: &Path) -> Vec<BatchPlacement> {
    let bytes = Bytes::from(std::fs::read(log).expect("segment"));
    let mut position = 0i64;
    let mut out = Vec::new();
    for batch in RecordBatches::new(bytes) {
        let batch = batch.unwrap_or_else(|e| panic!("{}: bad batch at {position}: {e}", log.display()));
        out.push(BatchPlacement {
            position,
            size: batch.size_bytes() as i64,
            last_offset: batch.last_offset(),
            max_timestamp: batch.max_timestamp(),
        });
        position += batch.size_bytes() as i64;
    }
    out
}

/// Raw index entries: `.index` (relative offset u32, position u32) and
/// `.timeindex` (timestamp i64, relative offset u32), as absolute pairs.
fn read_offset_index(path: &Path) -> Vec<(i64, i64)> {
    let base = file_base_offset(path);
    let raw = std::fs::read(path).expect("offset index");
    assert_eq!(raw.len() % 8, 0, "{} is {} bytes", path.display(), raw.len());
    raw.chunks(8)
        .map(|e| {
            let relative = u32::from_be_bytes(e[..4].try_into().expect("4 bytes"));
            (base + i64::from(relative), i64::from(u32::from_be_bytes(e[4..].try_into().expect("4 bytes"))))
        })
        .collect()
}

fn read_time_index(path: &Path) -> Vec<(i64, i64)> {
    let base = file_base_offset(path);
    let raw = std::fs::read(path).expect("time index");
    assert_eq!(raw.len() % 12, 0, "{} is {} bytes", path.display(), raw.len());
    raw.chunks(12)
        .map(|e| {
            let timestamp = i64::from_be_bytes(e[..8].try_into().expect("8 bytes"));
            (timestamp, base + i64::from(u32::from_be_bytes(e[8..].try_into().expect("4 bytes"))))
        })
        .collect()
}

/// A record as a test writes it (or expects to read it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ExpectedRecord {
    offset: i64,
    timestamp: i64,
    key: Option<String>,
    value: String,
    headers: Vec<(String, Option<String>)>,
}

/// Test data shared by both directions: records whose timestamps go back
/// now and then (inside a batch and across batches), some null keys, some
/// headers (one with a null value), values of varied lengths.
fn planned_record(run: usize, b: usize, r: usize, offset: i64, codec: Compression) -> ExpectedRecord {
    let older = if b % 5 == 3 { 6_000 } else { 0 };
    let timestamp = T0 + run as i64 * 100_000 + b as i64 * 1_000 - older + ((r * 37) % 7) as i64 * 10;
    let key = (!(b + r + run).is_multiple_of(6)).then(|| format!("key-{}-{b}-{r}", codec.name()));
    let value = format!("{}-b{b:02}-r{r}-{}", codec.name(), "v".repeat(10 + (b * 13 + r * 7 + run) % 60));
    let headers = if b % 4 == 1 {
        vec![("trace".to_string(), Some(format!("t-{run}-{b}"))), ("nullh".to_string(), None)]
    } else {
        vec![]
    };
    ExpectedRecord { offset, timestamp, key, value, headers }
}

// ---------------------------------------------------------------------------
// krabka -> Kafka
// ---------------------------------------------------------------------------

const T0: i64 = 1_700_000_000_000;
const INDEX_INTERVAL_BYTES: u64 = 256;
const ALL_CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

fn small_segment_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: INDEX_INTERVAL_BYTES,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

#[derive(Clone, Debug)]
struct ExpectedBatch {
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
    codec: Compression,
    leader_epoch: i32,
    /// (producer id, producer epoch, base sequence) of idempotent batches.
    producer: Option<(i64, i16, i32)>,
    crc: u32,
    size: usize,
    records: Vec<ExpectedRecord>,
}

const KRABKA_BATCHES: usize = 60;
/// Batches 40..44 go in one append call, as one produce request carries them.
const MULTI_BATCH_APPEND: std::ops::Range<usize> = 40..44;
const SECOND_EPOCH: i32 = 3;
const SECOND_EPOCH_FROM_BATCH: usize = 30;
/// Most odd batches come from one idempotent producer.
const KRABKA_PRODUCER: (i64, i16) = (7000, 2);

/// Writes a log with krabka-log: 60 batches rotating through every codec,
/// 1 to 7 records each, two leader epochs, most odd batches idempotent, and
/// one append call carrying several batches.
fn write_krabka_log(dir: &Path) -> Vec<ExpectedBatch> {
    let (mut log, report) = PartitionLog::open(dir, small_segment_config(), 0, 0, true, T0).expect("open a new log");
    assert_eq!(report.segments, 0);
    let mut expected: Vec<ExpectedBatch> = Vec::new();
    let mut pending = BytesMut::new();
    let mut next_offset = 0i64;
    let mut next_sequence = 0i32;
    for b in 0..KRABKA_BATCHES {
        let codec = ALL_CODECS[b % ALL_CODECS.len()];
        let epoch = if b < SECOND_EPOCH_FROM_BATCH { 0 } else { SECOND_EPOCH };
        let count = 1 + (b % 4) * 2;
        let records: Vec<ExpectedRecord> =
            (0..count).map(|r| planned_record(0, b, r, next_offset + r as i64, codec)).collect();
        let mut builder = RecordBatchBuilder::new(codec);
        // (Not the batches older than the ones before them: see
        // krabka_producer_snapshot_keeps_the_last_batch_timestamp.)
        let idempotent = b % 2 == 1 && b % 5 != 3;
        let producer = idempotent.then_some((KRABKA_PRODUCER.0, KRABKA_PRODUCER.1, next_sequence));
        if let Some((id, producer_epoch, sequence)) = producer {
            builder = builder.with_producer(id, producer_epoch, sequence);
            next_sequence += count as i32;
        }
        for record in &records {
            let headers: Vec<NewHeader<'_>> = record
                .headers
                .iter()
                .map(|(k, v)| NewHeader { key: k.as_bytes(), value: v.as_deref().map(str::as_bytes) })
                .collect();
            builder
                .append(&NewRecord {
                    timestamp_ms: record.timestamp,
                    key: record.key.as_deref().map(str::as_bytes),
                    value: Some(record.value.as_bytes()),
                    headers: &headers,
                })
                .expect("append a record");
        }
        let batch = builder.build().expect("build a batch");
        expected.push(ExpectedBatch {
            base_offset: next_offset,
            last_offset: next_offset + count as i64 - 1,
            max_timestamp: records.iter().map(|r| r.timestamp).max().expect("records"),
            codec,
            leader_epoch: epoch,
            producer,
            crc: batch.crc(),
            size: batch.size_bytes(),
            records,
        });
        next_offset += count as i64;
        pending.extend_from_slice(batch.as_bytes());
        if MULTI_BATCH_APPEND.contains(&b) && b + 1 != MULTI_BATCH_APPEND.end {
            continue;
        }
        let batches_in_request = if MULTI_BATCH_APPEND.contains(&b) { MULTI_BATCH_APPEND.len() } else { 1 };
        let first = &expected[expected.len() - batches_in_request];
        let info = log.append_as_leader(&pending.split().freeze(), epoch, T0).expect("append");
        assert_eq!((info.first_offset, info.last_offset), (first.base_offset, next_offset - 1));
    }
    assert_eq!(log.log_end_offset(), next_offset);
    assert!(log.segment_count() >= 5, "only {} segments: make the batches or segments smaller", log.segment_count());
    log.close(T0).expect("close the log cleanly");
    expected
}

#[test]
fn kafka_dump_log_reads_krabka_segments_indexes_and_snapshots() {
    install_kafka();
    let tmp = ScratchDir::new("krabka-to-kafka-");
    let dir = tmp.path().join("compat-0");
    let expected = write_krabka_log(&dir);
    let log_end_offset = expected.last().expect("batches").last_offset + 1;

    let logs = segment_files(&dir, ".log");
    let offset_indexes = segment_files(&dir, ".index");
    let time_indexes = segment_files(&dir, ".timeindex");
    let snapshots = segment_files(&dir, ".snapshot");
    assert!(logs.len() >= 5, "{logs:?}");
    assert_eq!(offset_indexes.len(), logs.len(), "every segment has a .index");
    assert_eq!(time_indexes.len(), logs.len(), "every segment has a .timeindex");
    assert!(
        snapshots.iter().any(|s| file_base_offset(s) == log_end_offset),
        "no producer snapshot at the log end offset {log_end_offset}: {snapshots:?}"
    );
    let mut all = Vec::new();
    for ((log, index), time) in logs.iter().zip(&offset_indexes).zip(&time_indexes) {
        all.extend([index.clone(), log.clone(), time.clone()]);
    }
    all.extend(snapshots.iter().cloned());

    let out = kafka_cli(
        "kafka-dump-log",
        &["--print-data-log".into(), "--files".into(), joined(&all)],
        None,
        Duration::from_secs(60),
    );
    out.assert_success();
    let context = out.context();
    assert_clean_dump_stderr(&out, &logs);
    let sections = dump_sections(&out.stdout);
    assert_eq!(sections.len(), all.len(), "one section per file\n{context}");

    // Every batch and record, in order across the segments.
    let mut dumped: Vec<(PathBuf, DumpedBatch)> = Vec::new();
    for log in &logs {
        let lines = sections.get(log).unwrap_or_else(|| panic!("{} not dumped\n{context}", log.display()));
        let batches = dumped_log(log, lines, &context);
        assert!(!batches.is_empty(), "{} has no batches\n{context}", log.display());
        assert_eq!(int(&batches[0].fields, "baseOffset"), file_base_offset(log), "segment named by its first offset");
        // Positions are contiguous and the file holds nothing else.
        let mut position = 0;
        for batch in &batches {
            assert_eq!(int(&batch.fields, "position"), position, "{}: {:?}", log.display(), batch.fields);
            position += int(&batch.fields, "size");
        }
        assert_eq!(std::fs::metadata(log).expect("segment").len() as i64, position, "{}", log.display());
        assert!(position <= small_segment_config().segment_bytes as i64, "{} is {position} bytes", log.display());
        dumped.extend(batches.into_iter().map(|b| (log.clone(), b)));
    }
    assert_dumped_batches_match(&dumped, &expected, &context);

    assert_dumped_indexes_follow_kafkas_rule(&logs, &offset_indexes, &time_indexes, &dumped, &sections, &context);

    assert_dumped_snapshots_match(&snapshots, &expected, &sections, &context);

    assert_indexes_pass_kafka_sanity_check(&dir);

    // The leader epoch checkpoint, byte for byte in Kafka's format.
    let second_epoch_start = expected[SECOND_EPOCH_FROM_BATCH].base_offset;
    assert_eq!(
        std::fs::read_to_string(dir.join(LEADER_EPOCH_CHECKPOINT)).expect("leader-epoch-checkpoint"),
        format!("0\n2\n0 0\n{SECOND_EPOCH} {second_epoch_start}\n")
    );
}

/// Every dumped batch and record against what was written, in order.
fn assert_dumped_batches_match(dumped: &[(PathBuf, DumpedBatch)], expected: &[ExpectedBatch], context: &str) {
    assert_eq!(dumped.len(), expected.len(), "batch count\n{context}");
    let mut record_count = 0;
    for ((log, got), want) in dumped.iter().zip(expected) {
        let f = &got.fields;
        let at = format!("{} batch {f:?}", log.display());
        let (producer_id, producer_epoch, base_sequence) = want.producer.unwrap_or((-1, -1, -1));
        let last_sequence = if base_sequence < 0 { -1 } else { base_sequence + want.records.len() as i32 - 1 };
        assert_eq!(int(f, "baseOffset"), want.base_offset, "{at}");
        assert_eq!(int(f, "lastOffset"), want.last_offset, "{at}");
        assert_eq!(int(f, "count"), want.records.len() as i64, "{at}");
        assert_eq!(int(f, "partitionLeaderEpoch"), i64::from(want.leader_epoch), "{at}");
        assert_eq!(int(f, "CreateTime"), want.max_timestamp, "{at}");
        assert_eq!(int(f, "size"), want.size as i64, "{at}");
        assert_eq!(int(f, "magic"), 2, "{at}");
        assert_eq!(field(f, "compresscodec"), want.codec.name(), "{at}");
        assert_eq!(int(f, "crc"), i64::from(want.crc), "{at}");
        assert_eq!(field(f, "isvalid"), "true", "Kafka finds the CRC-32C invalid: {at}");
        assert_eq!(int(f, "producerId"), producer_id, "{at}");
        assert_eq!(int(f, "producerEpoch"), i64::from(producer_epoch), "{at}");
        assert_eq!(int(f, "baseSequence"), i64::from(base_sequence), "{at}");
        assert_eq!(int(f, "lastSequence"), i64::from(last_sequence), "{at}");
        assert_eq!(field(f, "isTransactional"), "false", "{at}");
        assert_eq!(field(f, "isControl"), "false", "{at}");
        assert_eq!(field(f, "deleteHorizonMs"), "OptionalLong.empty", "{at}");
        assert_eq!(got.records.len(), want.records.len(), "{at}");
        for (i, (r, w)) in got.records.iter().zip(&want.records).enumerate() {
            let at = format!("{at}\n  record {r:?}");
            let sequence = if base_sequence < 0 { -1 } else { base_sequence + i as i32 };
            let header_keys: Vec<&str> = w.headers.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(int(r, "offset"), w.offset, "{at}");
            assert_eq!(int(r, "CreateTime"), w.timestamp, "{at}");
            assert_eq!(int(r, "keySize"), w.key.as_ref().map_or(-1, |k| k.len() as i64), "{at}");
            assert_eq!(r.get("key"), w.key.as_ref(), "{at}");
            assert_eq!(int(r, "valueSize"), w.value.len() as i64, "{at}");
            assert_eq!(field(r, "payload"), w.value, "{at}");
            assert_eq!(int(r, "sequence"), i64::from(sequence), "{at}");
            assert_eq!(field(r, "headerKeys"), format!("[{}]", header_keys.join(",")), "{at}");
            record_count += 1;
        }
    }
    assert_eq!(record_count, expected.iter().map(|b| b.records.len()).sum::<usize>());
}

fn assert_dumped_indexes_follow_kafkas_rule(
    logs: &[PathBuf],
    offset_indexes: &[PathBuf],
    time_indexes: &[PathBuf],
    dumped: &[(PathBuf, DumpedBatch)],
    sections: &BTreeMap<PathBuf, Vec<String>>,
    context: &str,
) {
    // Every index entry is where Kafka's own append rule puts it (and Kafka
    // found no mismatch: stderr was clean), computed from the dumped layout.
    let mut total_offset_entries = 0;
    let mut total_time_entries = 0;
    for ((log, index), time) in logs.iter().zip(offset_indexes).zip(time_indexes) {
        let base = file_base_offset(log);
        let placements: Vec<BatchPlacement> = dumped
            .iter()
            .filter(|(path, _)| path == log)
            .map(|(_, b)| BatchPlacement {
                position: int(&b.fields, "position"),
                size: int(&b.fields, "size"),
                last_offset: int(&b.fields, "lastOffset"),
                max_timestamp: int(&b.fields, "CreateTime"),
            })
            .collect();
        let (want_offsets, times, max_so_far) = kafka_index_entries(&placements, base, INDEX_INTERVAL_BYTES as i64);
        // Every segment was rolled or closed, so each ends with Kafka's final entry.
        let want_times = with_kafka_final_time_entry(times, max_so_far);
        let got_offsets = dumped_index(index, &sections[index], "offset", "position", context);
        let got_times = dumped_index(time, &sections[time], "timestamp", "offset", context);
        assert_eq!(got_offsets, want_offsets, "{} entries (offset, position)\n{context}", index.display());
        assert_eq!(got_times, want_times, "{} entries (timestamp, offset)\n{context}", time.display());
        total_offset_entries += got_offsets.len();
        total_time_entries += got_times.len();
    }
    assert!(total_offset_entries >= 10, "too few offset index entries ({total_offset_entries}) to prove much");
    assert!(total_time_entries >= 5, "too few time index entries ({total_time_entries}) to prove much");
}

/// Each producer snapshot as Kafka's ProducerStateManager reads it.
fn assert_dumped_snapshots_match(
    snapshots: &[PathBuf],
    expected: &[ExpectedBatch],
    sections: &BTreeMap<PathBuf, Vec<String>>,
    context: &str,
) {
    // Producer snapshots: the idempotent producer's last batch before each
    // snapshot's offset, as Kafka's ProducerStateManager.readSnapshot sees it.
    for snapshot in snapshots {
        let at = file_base_offset(snapshot);
        let want: Vec<String> = expected
            .iter()
            .rfind(|b| b.producer.is_some() && b.last_offset < at)
            .map(|b| {
                let (id, epoch, first_sequence) = b.producer.expect("idempotent");
                let delta = b.last_offset - b.base_offset;
                format!(
                    "producerId: {id} producerEpoch: {epoch} coordinatorEpoch: -1 currentTxnFirstOffset: \
                     OptionalLong.empty lastTimestamp: {ts} firstSequence: {first_sequence} lastSequence: {last} \
                     lastOffset: {offset} offsetDelta: {delta} timestamp: {ts}",
                    ts = b.max_timestamp,
                    last = first_sequence + delta as i32,
                    offset = b.last_offset,
                )
            })
            .into_iter()
            .collect();
        assert_eq!(sections[snapshot], want, "{}\n{context}", snapshot.display());
    }
}

/// Regression (found by this suite, fixed in krabka-log). Kafka appends
/// one last time index entry, the segment's largest timestamp, when a segment
/// stops being the active one and when it is closed
/// (`LogSegment.onBecomeInactiveSegment`, `LogSegment.close`, and the end of
/// `LogSegment.recover`), and trusts it on load: `LogSegment.maxTimestampSoFar()`
/// is read from `timeIndex.lastEntry()`, without a scan, and drives time
/// retention (`largestTimestamp`) and ListOffsets MAX_TIMESTAMP. A Kafka broker
/// over krabka's segments would think them older than they are.
#[test]

fn krabka_segments_end_their_time_index_with_the_largest_timestamp() {
    let tmp = ScratchDir::new("krabka-timeindex-");
    let dir = tmp.path().join("compat-0");
    write_krabka_log(&dir);
    let mut problems = Vec::new();
    for (log, time) in segment_files(&dir, ".log").iter().zip(segment_files(&dir, ".timeindex")) {
        let placements = segment_placements(log);
        let (_, times, max_so_far) =
            kafka_index_entries(&placements, file_base_offset(log), INDEX_INTERVAL_BYTES as i64);
        let want = with_kafka_final_time_entry(times, max_so_far);
        let got = read_time_index(&time);
        if got != want {
            problems.push(format!("{}: {got:?}, Kafka writes {want:?}", time.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "time indexes without Kafka's last entry (timestamp, offset):\n{}",
        problems.join("\n")
    );
}

/// A compacted log after two cleaner passes, as (segment dir, first pass
/// time, second pass time): a tombstone batch stamped with a delete horizon
/// by the first pass, an aborted transaction whose data the first pass
/// removed and whose marker the second pass stamped.
fn write_cleaned_krabka_log(dir: &Path) -> (i64, i64) {
    let config = LogConfig {
        segment_bytes: 1 << 20,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 60_000,
        ..LogConfig::default()
    };
    let (mut log, _) = PartitionLog::open(dir, config, 0, 0, true, T0).expect("open");
    let record = |timestamp_ms: i64, key: &'static [u8], value: Option<&'static [u8]>| NewRecord {
        timestamp_ms,
        key: Some(key),
        value,
        headers: &[],
    };
    let plain = |records: &[NewRecord<'_>], codec: Compression| {
        let mut builder = RecordBatchBuilder::new(codec);
        for r in records {
            builder.append(r).expect("append");
        }
        builder.build().expect("build").into_bytes()
    };
    let txn = |sequence: i32, r: NewRecord<'_>| {
        let mut builder =
            RecordBatchBuilder::new(Compression::None).with_producer(9, 0, sequence).with_transactional(true);
        builder.append(&r).expect("append");
        builder.build().expect("build").into_bytes()
    };
    let marker = |commit: bool| {
        let key = [0u8, 0, 0, u8::from(commit)];
        let value = [0u8, 0, 0, 0, 0, 5];
        let mut builder = RecordBatchBuilder::new(Compression::None)
            .with_producer(9, 0, -1)
            .with_transactional(true)
            .with_control(true);
        builder
            .append(&NewRecord { timestamp_ms: T0 + 4, key: Some(&key), value: Some(&value), headers: &[] })
            .expect("append");
        builder.build().expect("build").into_bytes()
    };
    let batches = [
        plain(&[record(T0, b"k0", Some(b"a"))], Compression::None), // 0
        plain(&[record(T0 + 1, b"k1", Some(b"b")), record(T0 + 2, b"k0", None)], Compression::Lz4), // 1-2
        txn(0, record(T0 + 3, b"k2", Some(b"aborted"))),            // 3
        marker(false),                                              // 4: abort
        txn(1, record(T0 + 5, b"k3", Some(b"c"))),                  // 5
        marker(true),                                               // 6: commit
    ];
    for batch in &batches {
        log.append_as_leader(batch, 0, T0 + 10).expect("append");
    }
    let end = log.log_end_offset();
    log.roll(end, T0 + 10).expect("roll");
    let (first, second) = (T0 + 1_000, T0 + 2_000);
    assert!(log.clean(first, end).expect("clean").cleaned);
    log.append_as_leader(&plain(&[record(T0 + 20, b"k9", Some(b"d"))], Compression::None), 0, T0 + 20).expect("append");
    let end = log.log_end_offset();
    log.roll(end, T0 + 20).expect("roll");
    assert!(log.clean(second, end).expect("clean").cleaned);
    log.close(T0 + 30).expect("close");
    (first, second)
}

/// KIP-534 on disk: Kafka's own `kafka-dump-log` reads a segment krabka's
/// cleaner rewrote, with valid CRCs, the delete horizons in the batch
/// headers (`deleteHorizonMs`), the records' own timestamps (stored as
/// deltas from the horizon) and indexes Kafka verifies.
/// `.txnindex` files krabka wrote (aborted transactions interleaved with
/// committed ones, over several segments), read by Kafka's DumpLogSegments:
/// the same entries, byte-compatible.
#[test]
fn kafka_dump_log_reads_krabka_transaction_indexes() {
    install_kafka();
    let tmp = ScratchDir::new("krabka-txnindex-");
    let dir = tmp.path().join("txn-0");
    let (mut log, _) = PartitionLog::open(&dir, small_segment_config(), 0, 0, true, T0).expect("open");
    let data = |producer_id: i64, sequence: i32| {
        let mut builder =
            RecordBatchBuilder::new(Compression::None).with_producer(producer_id, 0, sequence).with_transactional(true);
        for i in 0..3 {
            let value = format!("txn-{producer_id}-{sequence}-{i}-{}", "x".repeat(100));
            builder
                .append(&NewRecord { timestamp_ms: T0, key: None, value: Some(value.as_bytes()), headers: &[] })
                .unwrap();
        }
        builder.build().unwrap().into_bytes()
    };
    // Two producers at a time, so an aborted transaction's last stable
    // offset can be another one's first offset; every third one commits.
    for round in 0..8i64 {
        let (a, b) = (100 + 2 * round, 101 + 2 * round);
        log.append_as_leader(&data(a, 0), 0, T0).expect("data");
        log.append_as_leader(&data(b, 0), 0, T0).expect("data");
        log.append_as_leader(&data(a, 3), 0, T0).expect("data");
        log.append_as_leader(&common::marker_batch(a, 0, round % 3 == 2, 7, T0), 0, T0).expect("marker");
        log.append_as_leader(&common::marker_batch(b, 0, false, 7, T0), 0, T0).expect("marker");
    }
    let expected = log.aborted_transactions(0, log.log_end_offset());
    assert!(expected.len() >= 12, "{expected:?}");
    log.close(T0).expect("close");
    let txn_indexes = segment_files(&dir, ".txnindex");
    assert!(txn_indexes.len() >= 3, "aborts spread over segments: {txn_indexes:?}");

    let out = kafka_cli("kafka-dump-log", &["--files".into(), joined(&txn_indexes)], None, Duration::from_secs(60));
    out.assert_success();
    let context = out.context();
    let sections = dump_sections(&out.stdout);
    assert_eq!(sections.len(), txn_indexes.len(), "one section per file\n{context}");
    let mut dumped = Vec::new();
    for file in &txn_indexes {
        for line in sections[file].iter().filter(|l| l.contains("producerId:")) {
            let f = fields(line);
            assert_eq!(int(&f, "version"), 0, "{line}");
            let txn =
                (int(&f, "producerId"), int(&f, "firstOffset"), int(&f, "lastOffset"), int(&f, "lastStableOffset"));
            // Each file holds the aborts whose marker is in its segment.
            assert!(txn.2 >= file_base_offset(file), "{line} in {}", file.display());
            dumped.push(txn);
        }
    }
    let expected: Vec<(i64, i64, i64, i64)> =
        expected.iter().map(|t| (t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)).collect();
    assert_eq!(dumped, expected, "\n{context}");
}

#[test]
fn kafka_dump_log_reads_a_cleaned_segment_with_delete_horizons() {
    install_kafka();
    let tmp = ScratchDir::new("krabka-cleaned-");
    let dir = tmp.path().join("compacted-0");
    let (first, second) = write_cleaned_krabka_log(&dir);
    let logs = segment_files(&dir, ".log");
    let cleaned = logs[0].clone();
    assert_eq!(file_base_offset(&cleaned), 0);
    let out = kafka_cli(
        "kafka-dump-log",
        &["--deep-iteration".into(), "--files".into(), cleaned.display().to_string()],
        None,
        Duration::from_secs(60),
    );
    out.assert_success();
    let context = out.context();
    // Compaction leaves offset gaps, which Kafka notes on stderr; nothing else.
    for line in out.stderr.lines() {
        assert!(
            line.starts_with("Non-consecutive offsets in ") || line.contains(" is followed by "),
            "kafka-dump-log reported a problem: {line}\n{context}"
        );
    }
    let sections = dump_sections(&out.stdout);
    let batches = dumped_log(&cleaned, &sections[&cleaned], &context);
    let summary: Vec<(i64, i64, String, String)> = batches
        .iter()
        .map(|b| {
            assert_eq!(field(&b.fields, "isvalid"), "true", "{:?}\n{context}", b.fields);
            (
                int(&b.fields, "baseOffset"),
                int(&b.fields, "count"),
                field(&b.fields, "isControl").to_string(),
                field(&b.fields, "deleteHorizonMs").to_string(),
            )
        })
        .collect();
    let horizon = |at: i64| format!("OptionalLong[{}]", at + 60_000);
    let none = "OptionalLong.empty".to_string();
    assert_eq!(
        summary,
        [
            (1, 2, "false".into(), horizon(first)), // k1 and the k0 tombstone; k0=a went
            (4, 1, "true".into(), horizon(second)), // the abort marker; its data went
            (5, 1, "false".into(), none.clone()),
            (6, 1, "true".into(), none.clone()),
            (7, 1, "false".into(), none), // the second pass grouped both segments into one
        ],
        "{context}"
    );
    // The tombstone batch keeps its codec, and Kafka reads the records' own
    // timestamps back from deltas against the horizon.
    assert_eq!(field(&batches[0].fields, "compresscodec"), "lz4", "{context}");
    let records: Vec<(i64, i64, i64)> =
        batches[0].records.iter().map(|r| (int(r, "offset"), int(r, "CreateTime"), int(r, "valueSize"))).collect();
    assert_eq!(records, [(1, T0 + 1, 1), (2, T0 + 2, -1)], "{context}");
    assert_eq!(int(&batches[0].fields, "CreateTime"), T0 + 2, "max timestamp\n{context}");
    assert_eq!(field(&batches[1].records[0], "endTxnMarker"), "ABORT", "{context}");
    assert_eq!(int(&batches[1].records[0], "CreateTime"), T0 + 4, "{context}");
    assert_indexes_pass_kafka_sanity_check(&dir);
    assert_indexes_pass_kafka_verification(&dir);
}

/// Regression (found by this suite, fixed in krabka-log). Kafka's
/// producer state keeps the *last* batch's max timestamp
/// (`ProducerStateEntry.addBatch`: `this.lastTimestamp = timestamp`), and
/// that is the `timestamp` a `.snapshot` entry holds (producer id expiration
/// counts from it). krabka-log keeps the largest timestamp seen instead, so
/// its snapshot differs from Kafka's as soon as a producer's batch is older
/// than an earlier one.
#[test]

fn krabka_producer_snapshot_keeps_the_last_batch_timestamp() {
    let tmp = ScratchDir::new("krabka-snapshot-");
    let dir = tmp.path().join("compat-0");
    let (mut log, _) = PartitionLog::open(&dir, small_segment_config(), 0, 0, true, T0).expect("open");
    for (sequence, timestamp) in [(0, T0 + 2_000), (1, T0 + 1_000)] {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_producer(7000, 0, sequence);
        builder
            .append(&NewRecord { timestamp_ms: timestamp, key: None, value: Some(b"v"), headers: &[] })
            .expect("append");
        let batch = builder.build().expect("batch");
        log.append_as_leader(batch.as_bytes(), 0, T0).expect("append");
    }
    log.close(T0).expect("close");
    let snapshot = dir.join(format!("{:020}.snapshot", 2));
    let entries = ProducerStateManager::read_snapshot(&snapshot).expect("snapshot at the log end");
    let want = ProducerEntry {
        producer_id: 7000,
        epoch: 0,
        batches: VecDeque::from([BatchMetadata {
            first_seq: 1,
            last_seq: 1,
            first_offset: 1,
            last_offset: 1,
            timestamp: T0 + 1_000,
        }]),
        coordinator_epoch: -1,
        current_txn_first_offset: None,
        last_timestamp: T0 + 1_000,
    };
    assert_eq!(entries, vec![want], "Kafka would snapshot the last batch's timestamp");
}

// ---------------------------------------------------------------------------
// Kafka -> krabka
// ---------------------------------------------------------------------------

/// A Kafka 4.3.1 broker (KRaft, combined mode) on loopback; killed on drop.
struct Broker {
    child: Option<Child>,
    port: u16,
    output: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind a free port").local_addr().expect("local addr").port()
}

impl Broker {
    fn start(data_dir: &Path, extra: &[&str]) -> Broker {
        let port = free_port();
        let mut controller_port = free_port();
        while controller_port == port {
            controller_port = free_port();
        }
        let output = data_dir.with_extension("out");
        let file = std::fs::File::create(&output).expect("broker output file");
        let mut command = Command::new(reference_tool("run-kafka"));
        command
            .arg(data_dir)
            .arg(port.to_string())
            .arg(controller_port.to_string())
            .args(extra)
            .env("KAFKA_HEAP_OPTS", "-Xms256m -Xmx512m")
            .env("KAFKA_LOG_LEVEL", "WARN")
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().expect("clone file")))
            .stderr(Stdio::from(file));
        let child = command.spawn().expect("start run-kafka");
        let mut broker = Broker { child: Some(child), port, output };
        broker.wait_until_listening(Duration::from_secs(60));
        broker
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }

    fn wait_until_listening(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Some(status) = self.child.as_mut().expect("running").try_wait().expect("try_wait") {
                panic!("Kafka exited before listening ({status}):\n{}", self.output());
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Kafka not listening on {address} after {timeout:?}:\n{}",
                self.output()
            );
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// SIGTERM and wait: Kafka's shutdown hook flushes, trims the indexes and
    /// writes the checkpoints, producer snapshots and `.kafka_cleanshutdown`.
    fn stop(&mut self, timeout: Duration) {
        let mut child = self.child.take().expect("running");
        let pid = child.id() as libc::pid_t;
        // SAFETY: a plain kill(2) of the child this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + timeout;
        while child.try_wait().expect("try_wait").is_none() {
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("Kafka did not stop within {timeout:?} of SIGTERM:\n{}", self.output());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const TOPIC: &str = "compat";
const KAFKA_BATCHES_PER_RUN: usize = 12;

/// One batch the Java producer sends (one flush), with the offsets Kafka
/// must give it.
#[derive(Clone, Debug)]
struct PlannedBatch {
    run: usize,
    codec: Compression,
    base_sequence: i32,
    records: Vec<ExpectedRecord>,
}

impl PlannedBatch {
    fn base_offset(&self) -> i64 {
        self.records[0].offset
    }

    fn last_offset(&self) -> i64 {
        self.records.last().expect("records").offset
    }

    fn max_timestamp(&self) -> i64 {
        self.records.iter().map(|r| r.timestamp).max().expect("records")
    }
}

/// One idempotent producer per codec, each sending 12 batches of 1 to 9
/// records (deterministic bytes, so a deterministic segment layout).
fn kafka_plan() -> Vec<PlannedBatch> {
    let mut plan = Vec::new();
    let mut offset = 0i64;
    for (run, codec) in ALL_CODECS.into_iter().enumerate() {
        let mut sequence = 0i32;
        for b in 0..KAFKA_BATCHES_PER_RUN {
            let count = 1 + (b * 5 + run * 3) % 9;
            let records: Vec<ExpectedRecord> =
                (0..count).map(|r| planned_record(run, b, r, offset + r as i64, codec)).collect();
            plan.push(PlannedBatch { run, codec, base_sequence: sequence, records });
            offset += count as i64;
            sequence += count as i32;
        }
    }
    plan
}

/// The plan as CompatProducer.java reads it.
fn producer_script(plan: &[PlannedBatch]) -> String {
    let mut script = String::new();
    for (i, batch) in plan.iter().enumerate() {
        if i == 0 || plan[i - 1].run != batch.run {
            script.push_str(&format!("producer\t{}\n", batch.codec.name()));
        }
        for record in &batch.records {
            script.push_str(&format!(
                "record\t{}\t{}\t{}",
                record.timestamp,
                record.key.as_deref().unwrap_or("-"),
                record.value
            ));
            for (key, value) in &record.headers {
                match value {
                    Some(value) => script.push_str(&format!("\t{key}={value}")),
                    None => script.push_str(&format!("\t{key}")),
                }
            }
            script.push('\n');
        }
        script.push_str("flush\n");
    }
    script
}

/// A partition Kafka wrote and shut down cleanly, shared by the tests that
/// read it (each copies it first) and removed when the last one is done.
struct KafkaPartition {
    _scratch: ScratchDir,
    logs_dir: PathBuf,
    dir: PathBuf,
    topic_id: Uuid,
    plan: Vec<PlannedBatch>,
}

impl KafkaPartition {
    fn shared() -> Arc<KafkaPartition> {
        static SHARED: Mutex<Weak<KafkaPartition>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(partition) = shared.upgrade() {
            return partition;
        }
        let partition = Arc::new(KafkaPartition::write());
        *shared = Arc::downgrade(&partition);
        partition
    }

    fn write() -> KafkaPartition {
        install_kafka();
        let scratch = ScratchDir::new("kafka-to-krabka-");
        let data = scratch.path().join("kafka");
        let mut broker = Broker::start(&data, &["auto.create.topics.enable=false"]);
        let bootstrap = broker.bootstrap();
        let bootstrap = bootstrap.as_str();
        let index_interval = format!("index.interval.bytes={INDEX_INTERVAL_BYTES}");

        // Kafka 4 refuses segment.bytes under 1 MiB; internal.segment.bytes is
        // its own testing override (LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG).
        // The records are from 2023: keep time retention from deleting them.
        let out = kafka_cli(
            "kafka-topics",
            &strings(&[
                "--bootstrap-server",
                bootstrap,
                "--create",
                "--topic",
                TOPIC,
                "--partitions",
                "1",
                "--replication-factor",
                "1",
                "--config",
                "internal.segment.bytes=2048",
                "--config",
                &index_interval,
                "--config",
                "retention.ms=-1",
            ]),
            None,
            Duration::from_secs(60),
        );
        out.assert_success();
        assert!(out.stdout.contains(&format!("Created topic {TOPIC}.")), "{}\n{}", out.context(), broker.output());
        let out = kafka_cli(
            "kafka-topics",
            &strings(&["--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC]),
            None,
            Duration::from_secs(60),
        );
        out.assert_success();
        let topic_id = out
            .stdout
            .split_whitespace()
            .skip_while(|t| *t != "TopicId:")
            .nth(1)
            .and_then(Uuid::parse)
            .unwrap_or_else(|| panic!("no TopicId in the description:\n{}", out.context()));
        assert!(out.stdout.contains("internal.segment.bytes=2048"), "{}", out.context());

        let plan = kafka_plan();
        let producer = repo_root().join("crates/log/tests/kafka_compat/CompatProducer.java");
        let mut java = Command::new(std::env::var_os("JAVA").unwrap_or_else(|| "java".into()));
        java.arg("--list-modules");
        let modules = run(java, None, Duration::from_secs(30));
        assert!(
            modules.stdout.contains("jdk.compiler"),
            "CompatProducer.java runs as a source file: it needs a JDK (javac), not only a JRE\n{}",
            modules.context()
        );
        let out = kafka_cli(
            &producer.display().to_string(),
            &strings(&[bootstrap, TOPIC]),
            Some(producer_script(&plan)),
            Duration::from_secs(90),
        );
        out.assert_success();
        let acknowledged: Vec<String> = out.stdout.lines().map(str::to_string).collect();
        let want: Vec<String> = plan.iter().map(|b| format!("batch {} {}", b.base_offset(), b.last_offset())).collect();
        assert_eq!(acknowledged, want, "Kafka acknowledged other offsets:\n{}\n{}", out.context(), broker.output());

        broker.stop(Duration::from_secs(60));
        let logs_dir = data.join("logs");
        assert!(
            logs_dir.join(".kafka_cleanshutdown").exists(),
            "Kafka did not shut down cleanly:\n{}",
            broker.output()
        );
        let dir = logs_dir.join(TopicPartition::new(TOPIC, 0).dir_name());
        KafkaPartition { _scratch: scratch, logs_dir, dir, topic_id, plan }
    }

    fn log_end_offset(&self) -> i64 {
        self.plan.last().expect("batches").last_offset() + 1
    }

    /// A private copy of the partition directory for krabka to open.
    fn copy_to(&self, to: &Path) {
        std::fs::create_dir_all(to).expect("create copy");
        for entry in std::fs::read_dir(&self.dir).expect("read dir") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy file");
        }
    }
}

/// One record as krabka-log reads it back, with its batch's fields.
#[derive(Clone, Debug)]
struct ReadRecord {
    record: ExpectedRecord,
    codec: Compression,
    batch_base_offset: i64,
    batch_last_offset: i64,
    batch_leader_epoch: i32,
    batch_max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

fn utf8(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

/// Reads every record from the log start to the log end through the log's
/// own read path (index lookups, file ranges), batch by batch.
fn read_records(log: &PartitionLog) -> Vec<ReadRecord> {
    let mut out = Vec::new();
    let end = log.log_end_offset();
    let mut offset = log.log_start_offset();
    while offset < end {
        let info = log.read(offset, 16 * 1024, end, true).expect("read");
        let slice = info.slice.unwrap_or_else(|| panic!("no data at {offset} below the log end {end}"));
        let bytes = slice.read_to_bytes().expect("read the file range");
        let before = offset;
        for batch in RecordBatches::new(bytes) {
            // A read may end inside a batch (max_bytes): read the rest next time.
            let Ok(batch) = batch else { break };
            batch.validate().unwrap_or_else(|e| panic!("batch at {} invalid: {e}", batch.base_offset()));
            let codec = batch.compression().expect("known codec");
            for record in batch.records(1 << 24).expect("records") {
                let record = record.expect("record");
                out.push(ReadRecord {
                    record: ExpectedRecord {
                        offset: record.offset,
                        timestamp: record.timestamp,
                        key: record.key.as_deref().map(utf8),
                        value: utf8(&record.value.expect("value")),
                        headers: record.headers.iter().map(|h| (utf8(&h.key), h.value.as_deref().map(utf8))).collect(),
                    },
                    codec,
                    batch_base_offset: batch.base_offset(),
                    batch_last_offset: batch.last_offset(),
                    batch_leader_epoch: batch.partition_leader_epoch(),
                    batch_max_timestamp: batch.max_timestamp(),
                    producer_id: batch.producer_id(),
                    producer_epoch: batch.producer_epoch(),
                    base_sequence: batch.base_sequence(),
                });
            }
            offset = batch.next_offset();
        }
        assert!(offset > before, "a read at {before} returned no whole batch");
    }
    out
}

/// Checks what krabka read against what the Java producer sent, batch by
/// batch; returns each run's producer id.
fn assert_kafka_records(read: &[ReadRecord], plan: &[PlannedBatch]) -> Vec<i64> {
    let want: Vec<(&PlannedBatch, &ExpectedRecord)> =
        plan.iter().flat_map(|b| b.records.iter().map(move |r| (b, r))).collect();
    assert_eq!(read.len(), want.len(), "record count");
    let mut producer_ids: Vec<i64> = Vec::new();
    for (got, (batch, record)) in read.iter().zip(&want) {
        let at = format!("read {got:?}\nwant {record:?} in {batch:?}");
        assert_eq!(&got.record, *record, "{at}");
        assert_eq!(got.codec, batch.codec, "{at}");
        assert_eq!((got.batch_base_offset, got.batch_last_offset), (batch.base_offset(), batch.last_offset()), "{at}");
        assert_eq!(got.batch_max_timestamp, batch.max_timestamp(), "{at}");
        assert_eq!(got.batch_leader_epoch, 0, "{at}");
        assert_eq!((got.producer_epoch, got.base_sequence), (0, batch.base_sequence), "{at}");
        if producer_ids.len() == batch.run {
            assert!(got.producer_id >= 0 && !producer_ids.contains(&got.producer_id), "{at}: producer id reused");
            producer_ids.push(got.producer_id);
        }
        assert_eq!(got.producer_id, producer_ids[batch.run], "{at}");
    }
    producer_ids
}

/// Random access through Kafka's offset indexes, and ListOffsets lookups
/// through its time indexes, against a brute-force scan.
fn assert_lookups(log: &PartitionLog, read: &[ReadRecord]) {
    let end = log.log_end_offset();
    for got in read {
        let offset = got.record.offset;
        let slice = log.read(offset, 1, end, true).expect("read").slice.expect("a batch");
        let first =
            RecordBatches::new(slice.read_to_bytes().expect("bytes")).next().expect("one batch").expect("batch");
        assert_eq!(
            (first.base_offset(), first.last_offset()),
            (got.batch_base_offset, got.batch_last_offset),
            "a read at {offset} starts with the wrong batch"
        );
    }
    let mut targets: Vec<i64> = read.iter().flat_map(|r| [r.record.timestamp, r.record.timestamp + 1]).collect();
    targets.extend([i64::MIN + 1, 0, T0]);
    targets.sort_unstable();
    targets.dedup();
    for target in targets {
        let want = read.iter().find(|r| r.record.timestamp >= target).map(|r| (r.record.timestamp, r.record.offset));
        assert_eq!(log.offset_for_timestamp(target).expect("lookup"), want, "offset for timestamp {target}");
    }
    let max = read.iter().map(|r| r.record.timestamp).max().expect("records");
    let first_max = read.iter().find(|r| r.record.timestamp == max).expect("record").record.offset;
    assert_eq!(log.max_timestamp_offset().expect("max timestamp"), Some((max, first_max)));
}

/// What Kafka's `<offset>.snapshot` must hold: each producer's last batch
/// below `offset`.
fn expected_snapshot(plan: &[PlannedBatch], producer_ids: &[i64], offset: i64) -> Vec<ProducerEntry> {
    let mut entries = Vec::new();
    for (run, &producer_id) in producer_ids.iter().enumerate() {
        let Some(last) = plan.iter().rfind(|b| b.run == run && b.last_offset() < offset) else { continue };
        let delta = (last.last_offset() - last.base_offset()) as i32;
        entries.push(ProducerEntry {
            producer_id,
            epoch: 0,
            batches: VecDeque::from([BatchMetadata {
                first_seq: last.base_sequence,
                last_seq: last.base_sequence + delta,
                first_offset: last.base_offset(),
                last_offset: last.last_offset(),
                timestamp: last.max_timestamp(),
            }]),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_timestamp: last.max_timestamp(),
        });
    }
    entries
}

#[test]
fn krabka_reads_a_partition_written_by_kafka() {
    let kafka = KafkaPartition::shared();
    let plan = &kafka.plan;
    let total = kafka.log_end_offset();
    let tp = TopicPartition::new(TOPIC, 0);

    // Kafka's checkpoints, read with krabka's readers.
    let recovery_points = read_offsets(&kafka.logs_dir.join(RECOVERY_POINT_CHECKPOINT)).expect("recovery points");
    assert_eq!(recovery_points, BTreeMap::from([(tp.clone(), total)]), "recovery-point-offset-checkpoint");
    let log_starts = read_offsets(&kafka.logs_dir.join(LOG_START_OFFSET_CHECKPOINT)).expect("log start offsets");
    // Kafka lists only logs whose start is past their first segment's base.
    assert_eq!(log_starts, BTreeMap::new(), "log-start-offset-checkpoint");
    let epochs = read_leader_epochs(&kafka.dir.join(LEADER_EPOCH_CHECKPOINT)).expect("leader epochs");
    assert_eq!(epochs, vec![EpochEntry { epoch: 0, start_offset: 0 }], "leader-epoch-checkpoint");
    let metadata = read_partition_metadata(&kafka.dir.join(PARTITION_METADATA)).expect("partition.metadata");
    assert_eq!(metadata, Some(kafka.topic_id), "partition.metadata holds the topic id kafka-topics describes");

    // Kafka's segments and indexes follow the rule krabka implements (with
    // Kafka's final time index entry on roll and close).
    let kafka_logs = segment_files(&kafka.dir, ".log");
    let bases: Vec<i64> = kafka_logs.iter().map(|p| file_base_offset(p)).collect();
    assert!(bases.len() >= 5, "Kafka rolled only {} segments: {bases:?}", bases.len());
    let mut offset_entries = 0;
    for log in &kafka_logs {
        let placements = segment_placements(log);
        let (offsets, times, max_so_far) =
            kafka_index_entries(&placements, file_base_offset(log), INDEX_INTERVAL_BYTES as i64);
        assert_eq!(read_offset_index(&log.with_extension("index")), offsets, "{}", log.display());
        let times = with_kafka_final_time_entry(times, max_so_far);
        assert_eq!(read_time_index(&log.with_extension("timeindex")), times, "{}", log.display());
        offset_entries += offsets.len();
    }
    assert!(offset_entries >= 10, "too few index entries ({offset_entries}) to prove much");

    let config = small_segment_config();
    let log_start = log_starts.get(&tp).copied().unwrap_or(0);
    let scratch = ScratchDir::new("krabka-reads-kafka-");

    // After Kafka's clean shutdown: the segments and indexes are trusted as is.
    let clean_dir = scratch.path().join("clean").join(tp.dir_name());
    kafka.copy_to(&clean_dir);
    let (log, report) =
        PartitionLog::open(&clean_dir, config.clone(), log_start, recovery_points[&tp], true, T0).expect("open");
    assert_eq!(report.segments, bases.len());
    assert_eq!(report.recovered_segments, 0, "krabka rejected an index Kafka wrote: {report:?}");
    assert_eq!(report.truncated_bytes, 0);
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, total));
    assert_eq!(log.recovery_point(), total);
    assert_eq!(log.leader_epochs().entries(), epochs.as_slice());
    assert_eq!(log.end_offset_for_epoch(0), Some((0, total)));
    let read = read_records(&log);
    let producer_ids = assert_kafka_records(&read, plan);
    assert_lookups(&log, &read);
    // Producer state comes from Kafka's snapshot at the log end.
    let mut state: Vec<ProducerEntry> = log.producer_state().producers().values().cloned().collect();
    state.sort_by_key(|p| p.producer_id);
    assert_eq!(state, expected_snapshot(plan, &producer_ids, total), "producer state loaded from Kafka's snapshot");
    log.close(T0).expect("close");

    // Every producer snapshot Kafka wrote (at each roll and at shutdown).
    let snapshots = segment_files(&kafka.dir, ".snapshot");
    assert!(snapshots.iter().any(|s| file_base_offset(s) == total), "no snapshot at the log end: {snapshots:?}");
    for snapshot in &snapshots {
        let mut entries = ProducerStateManager::read_snapshot(snapshot).expect("Kafka's producer snapshot");
        entries.sort_by_key(|p| p.producer_id);
        let want = expected_snapshot(plan, &producer_ids, file_base_offset(snapshot));
        assert_eq!(entries, want, "{}", snapshot.display());
    }

    // As after a crash: every segment is re-read, checked and re-indexed.
    let unclean_dir = scratch.path().join("unclean").join(tp.dir_name());
    kafka.copy_to(&unclean_dir);
    let (log, report) = PartitionLog::open(&unclean_dir, config, 0, 0, false, T0).expect("recover");
    assert_eq!(report.segments, bases.len());
    assert_eq!(report.recovered_segments, bases.len(), "{report:?}");
    assert_eq!(report.truncated_bytes, 0, "krabka cut data Kafka wrote: {report:?}");
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.log_end_offset(), total);
    assert_eq!(log.leader_epochs().entries(), epochs.as_slice());
    let recovered = read_records(&log);
    assert_eq!(assert_kafka_records(&recovered, plan), producer_ids);
    assert_lookups(&log, &recovered);
    log.close(T0).expect("close");
    // The offset indexes krabka rebuilt are Kafka's, byte for byte.
    for kafka_index in segment_files(&kafka.dir, ".index") {
        let rebuilt = unclean_dir.join(kafka_index.file_name().expect("name"));
        assert_eq!(read_offset_index(&rebuilt), read_offset_index(&kafka_index), "{}", rebuilt.display());
        assert_eq!(std::fs::read(&rebuilt).expect("rebuilt"), std::fs::read(&kafka_index).expect("Kafka's"));
    }
}

/// Regression (found by this suite, fixed in krabka-log): after krabka
/// recovers Kafka's segments (unclean open) and closes, every index must still
/// be what Kafka wrote, pass Kafka's own checks, and satisfy a clean krabka
/// reopen. Recovery once rebuilt indexes into the files as opened and never
/// trimmed them, leaving zeroed entries at the end that Kafka reads as a 1970
/// max timestamp (instantly past retention).
#[test]
fn krabka_recovery_keeps_kafka_indexes_valid() {
    let kafka = KafkaPartition::shared();
    let total = kafka.log_end_offset();
    let scratch = ScratchDir::new("krabka-recovers-kafka-");
    let dir = scratch.path().join(TopicPartition::new(TOPIC, 0).dir_name());
    kafka.copy_to(&dir);
    // The data must exercise the case: some segment's largest timestamp was
    // not indexed when appended, so Kafka added its final entry.
    let final_entries = segment_files(&kafka.dir, ".log")
        .iter()
        .filter(|log| {
            let (_, times, max_so_far) =
                kafka_index_entries(&segment_placements(log), file_base_offset(log), INDEX_INTERVAL_BYTES as i64);
            with_kafka_final_time_entry(times.clone(), max_so_far) != times
        })
        .count();
    assert!(final_entries > 0, "no segment needs Kafka's final time index entry: change the plan");

    let (log, _) = PartitionLog::open(&dir, small_segment_config(), 0, 0, false, T0).expect("recover");
    log.close(T0).expect("close");
    let mut problems = Vec::new();
    for suffix in [".index", ".timeindex"] {
        for kafka_index in segment_files(&kafka.dir, suffix) {
            let rebuilt = dir.join(kafka_index.file_name().expect("name"));
            if std::fs::read(&rebuilt).expect("rebuilt") != std::fs::read(&kafka_index).expect("Kafka's") {
                let (got, want) = if suffix == ".index" {
                    (read_offset_index(&rebuilt), read_offset_index(&kafka_index))
                } else {
                    (read_time_index(&rebuilt), read_time_index(&kafka_index))
                };
                problems.push(format!("{}: {got:?}, Kafka wrote {want:?}", rebuilt.display()));
            }
        }
    }
    assert!(problems.is_empty(), "krabka's recovery rewrote Kafka's indexes differently:\n{}", problems.join("\n"));
    assert_indexes_pass_kafka_sanity_check(&dir);
    assert_indexes_pass_kafka_verification(&dir);
    let (log, report) = PartitionLog::open(&dir, small_segment_config(), 0, total, true, T0).expect("reopen");
    assert_eq!(report.recovered_segments, 0, "krabka distrusts the indexes its own recovery wrote: {report:?}");
    log.close(T0).expect("close");
}
