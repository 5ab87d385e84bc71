//! The generator against a real krabka broker process: every codec read back
//! exactly once, a paced run that keeps to its rate, and a broker killed
//! (SIGKILL) and restarted in the middle of a run, after which every
//! acknowledged record is still there once and in order.
//!
//! The broker binary is the workspace's own `krabka-broker`, built beside this
//! one by `cargo test --workspace` (the test command).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// A single-node krabka broker on a fixed loopback port, so a restart keeps
/// the address the generator bootstraps from.
struct Broker {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl Broker {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        krabka_format::format_log_dir(&data, "a1b2c3d4e5f6g7h8i9j0kw", 1).expect("format");
        let port = free_port();
        let properties = format!(
            "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{controller}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
             controller.listener.names=CONTROLLER\nlog.dirs={data}\n",
            controller = free_port(),
            data = data.display()
        );
        std::fs::write(dir.path().join("server.properties"), properties).expect("write config");
        let mut broker = Broker { dir, port, child: None };
        broker.launch();
        broker
    }

    /// Starts the process and waits until it says it serves clients.
    fn launch(&mut self) {
        let mut child = Command::new(broker_binary())
            .arg(self.dir.path().join("server.properties"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn krabka-broker");
        let stderr = child.stderr.take().expect("stderr");
        let (serving, serves) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("krabka broker serving") {
                    let _ = serving.send(());
                }
            }
        });
        if serves.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = child.kill();
            panic!("krabka-broker did not start");
        }
        self.child = Some(child);
    }

    fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `krabka-broker`, next to this package's binary in the same target dir.
fn broker_binary() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_krabka-loadgen")).with_file_name("krabka-broker");
    assert!(binary.exists(), "{} is missing: run `cargo test --workspace` (it builds the broker)", binary.display());
    binary
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port()
}

fn loadgen(broker: &Broker, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_krabka-loadgen"));
    command.args(["--bootstrap", &broker.bootstrap()]).args(args);
    command
}

/// The summary line of a finished run, after checking the exit status agrees with it.
fn summary(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stdout.lines().last().unwrap_or_else(|| panic!("no summary; stderr:\n{stderr}"));
    let summary: Value = serde_json::from_str(line).expect("summary is JSON");
    assert_eq!(output.status.success(), summary["ok"] == Value::Bool(true), "{summary}\n{stderr}");
    summary
}

fn assert_exactly_once(summary: &Value, records: u64) {
    assert_eq!(summary["ok"], true, "{summary}");
    assert_eq!(summary["records_acked"], records, "{summary}");
    assert_eq!(summary["records_verified"], records, "{summary}");
    for count in ["duplicates", "missing", "out_of_order", "corrupt", "errors"] {
        assert_eq!(summary[count], 0, "{count}: {summary}");
    }
}

#[test]
fn every_codec_and_payload_reads_back_exactly_once() {
    let broker = Broker::start();
    let runs = [("none", "random", "1024"), ("gzip", "random", "100"), ("snappy", "zeros", "1024")]
        .into_iter()
        .chain([("lz4", "random", "1024"), ("zstd", "random", "100"), ("lz4", "zeros", "100")]);
    for (i, (codec, payload, size)) in runs.enumerate() {
        let topic = format!("codec-{i}-{codec}-{payload}");
        let args = ["--topic", &topic, "--partitions", "3", "--connections", "2", "--records", "5003"];
        let output = loadgen(&broker, &args)
            .args(["--compression", codec, "--payload", payload, "--record-size", size, "--consume"])
            .output()
            .expect("run krabka-loadgen");
        let summary = summary(&output);
        assert_exactly_once(&summary, 5003);
        assert_eq!((&summary["compression"], &summary["partitions"]), (&Value::from(codec), &Value::from(3)));
    }
}

#[test]
fn a_paced_run_keeps_to_its_rate() {
    let broker = Broker::start();
    let args = ["--topic", "paced", "--partitions", "2", "--seconds", "2", "--rate", "5000", "--batch-records", "50"];
    let summary = summary(&loadgen(&broker, &args).arg("--consume").output().expect("run krabka-loadgen"));
    let acked = summary["records_acked"].as_u64().expect("records_acked");
    // Two seconds at 5,000/s, give or take a batch per partition; a pacer
    // that ignored the rate would send 100x as many on loopback.
    assert!((9_000..=10_100).contains(&acked), "{acked} records in a 2 s run at 5,000/s: {summary}");
    assert_exactly_once(&summary, acked);
}

#[test]
fn a_broker_killed_mid_run_loses_and_duplicates_nothing_acknowledged() {
    let mut broker = Broker::start();
    let args = ["--topic", "killed", "--partitions", "4", "--connections", "2", "--seconds", "6"];
    let mut run = loadgen(&broker, &args)
        .args(["--record-size", "200", "--rate", "20000", "--template-mib", "8", "--consume"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn krabka-loadgen");
    // The timed phase starts once the batches are built.
    let stderr = run.stderr.take().expect("stderr");
    let (built, producing) = mpsc::channel();
    let log = std::thread::spawn(move || {
        let mut log = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("batches built") {
                let _ = built.send(());
            }
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    producing.recv_timeout(Duration::from_secs(60)).expect("the generator starts producing");
    std::thread::sleep(Duration::from_secs(2));
    broker.kill();
    std::thread::sleep(Duration::from_millis(500));
    broker.launch();
    let mut output = run.wait_with_output().expect("krabka-loadgen finishes");
    output.stderr = log.join().expect("stderr reader").into_bytes();
    let summary = summary(&output);
    let acked = summary["records_acked"].as_u64().expect("records_acked");
    assert!(acked > 20_000, "records before and after the restart: {summary}");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("connection to broker 1 closed"), "the generator saw the kill:\n{log}");
    assert_exactly_once(&summary, acked);
}

#[test]
fn fan_out_readers_each_read_every_record_once() {
    let broker = Broker::start();
    let args = ["--topic", "fan-out", "--partitions", "3", "--records", "3000", "--consume", "--readers", "3"];
    let args = [&args[..], &["--verify", "batches"]].concat();
    let summary = summary(&loadgen(&broker, &args).output().expect("run krabka-loadgen"));
    assert_eq!(summary["ok"], true, "{summary}");
    assert_eq!((&summary["records_acked"], &summary["readers"]), (&Value::from(3000), &Value::from(3)), "{summary}");
    assert_eq!(summary["records_verified"], 9000, "three readers, every record each: {summary}");
    assert_eq!(summary["duplicates"], 0, "a second reader's copy is not a duplicate: {summary}");
    assert!(summary["consume_records_per_second"].as_f64() > Some(0.0), "{summary}");
    assert_eq!(summary["verify"], "batches", "{summary}");
}
