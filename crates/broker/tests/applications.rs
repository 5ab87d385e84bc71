//! Real Kafka applications on krabka, unchanged (issue 20).
//!
//! Kafka Connect 4.3.1 in distributed mode with exactly-once source
//! support (KIP-618): its config, offset and status topics (compacted,
//! which the worker checks) on krabka, its group through krabka's
//! coordinator, the source task writing in transactions. The file source connector reads a file
//! into a topic and the file sink connector writes the topic back out;
//! the worker is killed with SIGKILL and restarted, more lines are
//! appended, and the output file is exactly the input, each line once.
//!
//! Kafka Streams 4.3.1: Kafka's word-count topology (lines split into
//! words, re-keyed by word through a repartition topic, counted in a
//! RocksDB store backed by a changelog topic), at-least-once; stopped
//! with SIGTERM mid-way and started again on its local state, the counts
//! it writes end at exactly the words' counts.
//!
//! MirrorMaker 2 4.3.1 (dedicated mode, `IdentityReplicationPolicy`), the
//! documented migration path, both ways at once: an Apache Kafka 4.3.1
//! broker's topic, its config and a consumer group's offsets copied to
//! krabka, and krabka's to Kafka; on either side the group then resumes
//! exactly where it stopped (long mode: it takes about two minutes).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::tools::kafka_cli;
use support::{free_port, repo_root, BrokerProcess};

/// A JVM starting on a shared 2-core machine, then Connect's group join.
const PATIENCE: Duration = Duration::from_secs(120);

/// A Kafka Connect worker in distributed mode (`ConnectDistributed`).
struct ConnectWorker {
    child: Child,
}

impl ConnectWorker {
    fn start(dir: &Path, config: &Path) -> Self {
        let libs = repo_root().join("target/kafka-4.3.1/libs/*");
        let log4j = format!(
            "-Dlog4j2.configurationFile={}",
            repo_root().join("tools/kafka-reference/log4j2.properties").display()
        );
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("connect.log")).unwrap();
        let java = std::env::var_os("JAVA").unwrap_or_else(|| "java".into());
        let child = Command::new(java)
            .args(["-Xms128m", "-Xmx512m", &log4j, "-Dkafka.root.loglevel=INFO"])
            .arg(format!("-Dkafka.logs.dir={}", dir.join("app-logs").display()))
            .args(["-cp", libs.to_str().unwrap(), "org.apache.kafka.connect.cli.ConnectDistributed"])
            .arg(config)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start the Connect worker");
        ConnectWorker { child }
    }

    fn kill(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for ConnectWorker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An HTTP request to Connect's REST API, by Python's standard library:
/// the status code and body (None when nothing answers yet).
fn rest(method: &str, url: &str, body: Option<&str>) -> Option<(u16, String)> {
    let script = r#"
import sys, urllib.request, urllib.error
method, url, body = sys.argv[1], sys.argv[2], sys.argv[3]
data = body.encode() if body else None
request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        print(answer.status); print(answer.read().decode())
except urllib.error.HTTPError as error:
    print(error.code); print(error.read().decode())
"#;
    let output = Command::new("python3").args(["-c", script, method, url, body.unwrap_or("")]).output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (status, body) = text.split_once('\n')?;
    Some((status.trim().parse().ok()?, body.to_string()))
}

/// Whether `check` holds within `timeout` (tried every 500 ms).
fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    false
}

fn lines(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(String::from).collect()
}

fn append(path: &PathBuf, from: usize, count: usize) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    for i in from..from + count {
        writeln!(file, "line {i:05} of the file Connect copies").unwrap();
    }
}

#[test]
fn kafka_connect_copies_a_file_through_krabka_and_survives_a_sigkill() {
    let broker = BrokerProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("input.txt"), dir.path().join("output.txt"));
    append(&input, 0, 500);
    let rest_port = free_port();
    let config = dir.path().join("worker.properties");
    std::fs::write(
        &config,
        format!(
            "bootstrap.servers={}\ngroup.id=krabka-connect\nlisteners=http://127.0.0.1:{rest_port}\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             config.storage.topic=connect-configs\noffset.storage.topic=connect-offsets\n\
             status.storage.topic=connect-status\nconfig.storage.replication.factor=1\n\
             offset.storage.replication.factor=1\nstatus.storage.replication.factor=1\n\
             offset.flush.interval.ms=500\n\
             session.timeout.ms=6000\nheartbeat.interval.ms=1000\nscheduled.rebalance.max.delay.ms=0\n\
             consumer.session.timeout.ms=6000\nconsumer.heartbeat.interval.ms=1000\n\
             exactly.once.source.support=enabled\n",
            broker.bootstrap()
        ),
    )
    .unwrap();
    let base = format!("http://127.0.0.1:{rest_port}");
    let connect_log = || std::fs::read_to_string(dir.path().join("connect.log")).unwrap_or_default();
    let mut worker = ConnectWorker::start(dir.path(), &config);
    let ready = || rest("GET", &format!("{base}/connectors"), None).is_some_and(|(status, _)| status == 200);
    support::wait_for("Connect's REST API", PATIENCE, ready);

    let source = format!(
        r#"{{"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1", "file": "{}", "topic": "connect-lines", "exactly.once.support": "required"}}"#,
        input.display()
    );
    let sink = format!(
        r#"{{"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1", "file": "{}", "topics": "connect-lines"}}"#,
        output.display()
    );
    for (name, config) in [("file-source", &source), ("file-sink", &sink)] {
        // The herder may still be joining its group: asked again.
        let mut answer = None;
        let created = || {
            answer = rest("PUT", &format!("{base}/connectors/{name}/config"), Some(config));
            answer.as_ref().is_some_and(|(status, _)| *status == 200 || *status == 201)
        };
        if !wait_until(PATIENCE, created) {
            let tail: Vec<String> = connect_log().lines().rev().take(40).map(String::from).collect();
            panic!("creating {name}: {answer:?}\n{}", tail.join("\n"));
        }
    }
    support::wait_for("the first 500 lines copied", PATIENCE, || lines(&output).len() >= 500);
    // Both connectors' offsets committed (every 500 ms), then SIGKILL.
    std::thread::sleep(Duration::from_secs(3));
    worker.kill();

    // The killed worker's group members (its own, its sink task's
    // consumer) are dropped when their 6 s sessions expire, as on Kafka.
    append(&input, 500, 500);
    let _worker = ConnectWorker::start(dir.path(), &config);
    support::wait_for("every line copied after the restart", PATIENCE, || lines(&output).len() >= 1_000);
    std::thread::sleep(Duration::from_secs(2));
    let copied = lines(&output);
    assert_eq!(copied.len(), 1_000, "the output holds each line once");
    assert_eq!(copied, lines(&input), "the output is the input");
    let (status, body) = rest("GET", &format!("{base}/connectors/file-sink/status"), None).expect("REST");
    assert!(status == 200 && body.contains("RUNNING"), "{status} {body}");
    // Exactly-once source support (KIP-618): the source task wrote in
    // transactions under its own transactional id.
    let (_, listed) = kafka_cli(&["kafka-transactions", "--bootstrap-server", &broker.bootstrap(), "list"], "");
    assert!(listed.contains("krabka-connect-file-source-0"), "{listed}");
}

const WORDS: [&str; 5] = ["kafka", "krabka", "stream", "table", "topic"];

/// Line `i` of the word-count input: three words of `WORDS`.
fn text_line(i: usize) -> String {
    format!("{} {}, {}!", WORDS[i % 5], WORDS[(i / 5) % 5].to_uppercase(), WORDS[(i * 3 + 1) % 5])
}

/// Each word's count over lines `0..lines`.
fn expected_counts(lines: usize) -> std::collections::BTreeMap<String, i64> {
    let mut counts = std::collections::BTreeMap::new();
    for i in 0..lines {
        for word in text_line(i).to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            *counts.entry(word.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// The latest count of each word in the output topic.
fn latest_counts(bootstrap: &str) -> std::collections::BTreeMap<String, i64> {
    let consume = ["kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", "word-counts"];
    let more = ["--from-beginning", "--timeout-ms", "4000", "--property", "print.key=true"];
    let deserializer = ["--value-deserializer", "org.apache.kafka.common.serialization.LongDeserializer"];
    let (_, out) = kafka_cli(&[&consume[..], &more[..], &deserializer[..]].concat(), "");
    let mut counts = std::collections::BTreeMap::new();
    for line in out.lines() {
        if let Some((word, count)) = line.split_once('\t') {
            if let Ok(count) = count.trim().parse::<i64>() {
                counts.insert(word.to_string(), count);
            }
        }
    }
    counts
}

/// `tests/clients/java`'s word-count app, started; returns once it runs.
fn start_word_count(bootstrap: &str, state_dir: &Path) -> Child {
    use std::io::BufRead;
    let mut child = Command::new(repo_root().join("tests/clients/java/run"))
        .args(["word-count", bootstrap, "text", "word-counts", "krabka-word-count"])
        .arg(state_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the word-count app");
    let stdout = child.stdout.take().expect("stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("running") {
                let _ = sender.send(());
            }
        }
    });
    receiver.recv_timeout(PATIENCE).expect("the word-count app runs");
    child
}

fn produce_lines(bootstrap: &str, lines: std::ops::Range<usize>) {
    let text: Vec<String> = lines.map(text_line).collect();
    let (ok, out) =
        kafka_cli(&["kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", "text"], &text.join("\n"));
    assert!(ok, "console producer: {out}");
}

#[test]
fn kafka_streams_word_count_resumes_from_its_state_after_a_restart() {
    let broker = BrokerProcess::start(&["group.initial.rebalance.delay.ms=0"]);
    let bootstrap = broker.bootstrap();
    let create = ["kafka-topics", "--bootstrap-server", &bootstrap, "--create", "--topic", "text", "--partitions", "3"];
    let (ok, out) = kafka_cli(&create, "");
    assert!(ok, "kafka-topics --create: {out}");
    produce_lines(&bootstrap, 0..60);
    let state = tempfile::tempdir().unwrap();
    let mut app = start_word_count(&bootstrap, state.path());
    let mut seen = Default::default();
    let counted = |lines: usize, seen: &mut std::collections::BTreeMap<String, i64>| {
        *seen = latest_counts(&bootstrap);
        *seen == expected_counts(lines)
    };
    assert!(wait_until(PATIENCE, || counted(60, &mut seen)), "after 60 lines: {seen:?}");

    // SIGTERM: the app closes cleanly, committing; started again, it
    // takes up its RocksDB state and goes on from its committed offsets.
    unsafe { libc::kill(app.id() as i32, libc::SIGTERM) };
    let _ = app.wait();
    produce_lines(&bootstrap, 60..120);
    let mut app = start_word_count(&bootstrap, state.path());
    assert!(wait_until(PATIENCE, || counted(120, &mut seen)), "after 120 lines: {seen:?}");
    unsafe { libc::kill(app.id() as i32, libc::SIGTERM) };
    let _ = app.wait();

    let (_, topics) = kafka_cli(&["kafka-topics", "--bootstrap-server", &bootstrap, "--list"], "");
    for internal in ["krabka-word-count-words-repartition", "krabka-word-count-word-counts-changelog"] {
        assert!(topics.lines().any(|t| t == internal), "{internal} in {topics}");
    }
}

/// `kafka-get-offsets`: the end offset of each partition of `topic`.
fn end_offsets(bootstrap: &str, topic: &str) -> Vec<i64> {
    let (_, out) = kafka_cli(&["kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic], "");
    let mut ends: Vec<(i32, i64)> = out
        .lines()
        .filter_map(|l| {
            let mut parts = l.rsplitn(3, ':');
            let end = parts.next()?.parse().ok()?;
            let partition = parts.next()?.parse().ok()?;
            (parts.next()? == topic).then_some((partition, end))
        })
        .collect();
    ends.sort();
    ends.into_iter().map(|(_, end)| end).collect()
}

/// `kafka-consumer-groups --describe`: the group's committed offset of
/// each partition of `topic`.
fn committed_offsets(bootstrap: &str, group: &str, topic: &str) -> Vec<i64> {
    let args = ["kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group];
    let (_, out) = kafka_cli(&args, "");
    let mut offsets: Vec<(i32, i64)> = out
        .lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let row = fields.len() >= 4 && fields[0] == group && fields[1] == topic;
            row.then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?))).flatten()
        })
        .collect();
    offsets.sort();
    offsets.into_iter().map(|(_, offset)| offset).collect()
}

/// `count` keyed lines `<prefix>-<i>` produced to `topic`.
fn produce_keyed(bootstrap: &str, topic: &str, prefix: &str, count: usize) {
    let lines: Vec<String> = (0..count).map(|i| format!("k{i}:{prefix}-{i}")).collect();
    let producer = ["kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic];
    let keyed = ["--property", "parse.key=true", "--property", "key.separator=:"];
    let (ok, out) = kafka_cli(&[&producer[..], &keyed[..]].concat(), &lines.join("\n"));
    assert!(ok, "console producer on {topic}: {out}");
}

/// A topic of three partitions with `lines` records, all consumed by
/// `group` (committed at the end, as consumers stop before a migration).
fn consumed_topic(bootstrap: &str, topic: &str, group: &str, lines: usize) {
    let create = ["kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "3"];
    let config = ["--config", "retention.ms=86400000"];
    let (ok, out) = kafka_cli(&[&create[..], &config[..]].concat(), "");
    assert!(ok, "kafka-topics --create {topic}: {out}");
    produce_keyed(bootstrap, topic, "old", lines);
    let reset = ["kafka-consumer-groups", "--bootstrap-server", bootstrap, "--group", group, "--topic", topic];
    let (ok, out) = kafka_cli(&[&reset[..], &["--reset-offsets", "--to-latest", "--execute"]].concat(), "");
    assert!(ok, "reset {group}: {out}");
}

/// The group reads what comes next on `topic`: exactly the `count` new
/// records, none of the old ones.
fn resumes_exactly(bootstrap: &str, topic: &str, group: &str, count: usize) {
    produce_keyed(bootstrap, topic, "new", count);
    let consume = ["kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group];
    let more = ["--max-messages", &count.to_string(), "--timeout-ms", "30000"];
    let (_, out) = kafka_cli(&[&consume[..], &more[..]].concat(), "");
    let mut read: Vec<&str> = out.lines().filter(|l| l.starts_with("old-") || l.starts_with("new-")).collect();
    read.sort();
    let mut wanted: Vec<String> = (0..count).map(|i| format!("new-{i}")).collect();
    wanted.sort();
    assert_eq!(read, wanted, "{group} on {bootstrap} resumes exactly:\n{out}");
}

#[test]
fn mirror_maker_2_migrates_topics_configs_and_group_offsets_both_ways() {
    if std::env::var("KRABKA_LONG_TESTS").as_deref() != Ok("1") {
        eprintln!("MirrorMaker 2's migration runs in the long mode (KRABKA_LONG_TESTS=1)");
        return;
    }
    let krabka = BrokerProcess::start(&["group.initial.rebalance.delay.ms=0"]);
    let kafka_dir = tempfile::tempdir().unwrap();
    let kafka_port = free_port();
    let _kafka = support::KafkaNode::start_combined(
        kafka_dir.path(),
        kafka_port,
        free_port(),
        "group.initial.rebalance.delay.ms=0\n",
    );
    let kafka = format!("127.0.0.1:{kafka_port}");
    support::wait_for("Kafka 4.3.1 to serve", PATIENCE, || {
        kafka_cli(&["kafka-topics", "--bootstrap-server", &kafka, "--list"], "").0
    });
    consumed_topic(&kafka, "orders", "billing", 300);
    consumed_topic(&krabka.bootstrap(), "returns", "refunds", 200);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mm2.properties");
    std::fs::write(
        &config,
        format!(
            "clusters=kafka,krabka\nkafka.bootstrap.servers={kafka}\nkrabka.bootstrap.servers={}\n\
             kafka->krabka.enabled=true\nkafka->krabka.topics=orders\nkafka->krabka.groups=billing\n\
             krabka->kafka.enabled=true\nkrabka->kafka.topics=returns\nkrabka->kafka.groups=refunds\n\
             replication.policy.class=org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n\
             replication.factor=1\noffset-syncs.topic.replication.factor=1\n\
             checkpoints.topic.replication.factor=1\nheartbeats.topic.replication.factor=1\n\
             config.storage.replication.factor=1\noffset.storage.replication.factor=1\n\
             status.storage.replication.factor=1\nemit.heartbeats.enabled=false\n\
             sync.group.offsets.enabled=true\nsync.group.offsets.interval.seconds=1\n\
             emit.checkpoints.interval.seconds=1\nrefresh.topics.interval.seconds=2\n\
             refresh.groups.interval.seconds=2\nsync.topic.configs.interval.seconds=2\n",
            krabka.bootstrap()
        ),
    )
    .unwrap();
    let libs = repo_root().join("target/kafka-4.3.1/libs/*");
    let log4j =
        format!("-Dlog4j2.configurationFile={}", repo_root().join("tools/kafka-reference/log4j2.properties").display());
    let log = std::fs::File::create(dir.path().join("mm2.log")).unwrap();
    let java = std::env::var_os("JAVA").unwrap_or_else(|| "java".into());
    let mm2 = Command::new(java)
        .args(["-Xmx512m", &log4j, "-cp", libs.to_str().unwrap(), "org.apache.kafka.connect.mirror.MirrorMaker"])
        .arg(&config)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start MirrorMaker 2");
    let mut mm2 = ConnectWorker { child: mm2 };
    let mm2_log = || std::fs::read_to_string(dir.path().join("mm2.log")).unwrap_or_default();

    // The records, then the groups' offsets, translated to the other side.
    for (target, topic, group, source) in [
        (krabka.bootstrap(), "orders", "billing", kafka.clone()),
        (kafka.clone(), "returns", "refunds", krabka.bootstrap()),
    ] {
        let ends = end_offsets(&source, topic);
        let copied = wait_until(Duration::from_secs(180), || end_offsets(&target, topic) == ends);
        assert!(copied, "{topic} copied to {target}: {:?} of {ends:?}\n{}", end_offsets(&target, topic), mm2_log());
        let translated = wait_until(Duration::from_secs(180), || committed_offsets(&target, group, topic) == ends);
        assert!(
            translated,
            "{group}'s offsets on {target}: {:?}\n{}",
            committed_offsets(&target, group, topic),
            mm2_log()
        );
    }
    // The topic's config came along (retention.ms).
    let describe =
        ["kafka-configs", "--bootstrap-server", &krabka.bootstrap(), "--describe", "--entity-type", "topics"];
    let (_, out) = kafka_cli(&[&describe[..], &["--entity-name", "orders"]].concat(), "");
    assert!(out.contains("retention.ms=86400000"), "orders' config on krabka: {out}");
    mm2.kill();

    // Clients moved: each group resumes on the other side exactly where
    // it stopped on the first.
    resumes_exactly(&krabka.bootstrap(), "orders", "billing", 50);
    resumes_exactly(&kafka, "returns", "refunds", 50);
}
