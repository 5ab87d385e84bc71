//! KRaft interop with Apache Kafka 4.3.1 (jars from Maven Central through
//! `tools/kafka-reference/install`): a quorum of three static voters, one a
//! krabka quorum member in this process, one an Apache Kafka 4.3.1
//! controller process, and a third that never starts, so neither side can
//! elect or commit without the other. Each way round (krabka leads, Kafka
//! leads) they must elect the expected leader, commit (with Kafka leading,
//! its bootstrap metadata records), keep it for a while, and hold the same
//! committed bytes in their `__cluster_metadata-0` segments.

use std::collections::BTreeMap;
use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use krabka_broker::quorum::{serve_controller_listener, Quorum, QuorumSetup};
use krabka_log::LogConfig;
use krabka_protocol::Uuid;
use krabka_raft::wire::{Endpoint, WireContext};
use krabka_raft::RaftConfig;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Kafka(Child);

impl Drop for Kafka {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An Apache Kafka 4.3.1 controller (node `id`) formatted with `cluster_id`.
fn start_kafka_controller(
    dir: &Path,
    id: i32,
    port: u16,
    voters: &str,
    cluster_id: &str,
    election_timeout_ms: i64,
) -> Kafka {
    let status = Command::new(repo_root().join("tools/kafka-reference/install")).status().unwrap();
    assert!(status.success(), "tools/kafka-reference/install failed");
    let libs = repo_root().join("target/kafka-4.3.1/libs/*");
    let props = dir.join("controller.properties");
    let config = format!(
        "process.roles=controller\nnode.id={id}\ncontroller.quorum.voters={voters}\n\
         listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n\
         listener.security.protocol.map=CONTROLLER:PLAINTEXT\nlog.dirs={}\n\
         controller.quorum.election.timeout.ms={election_timeout_ms}\n",
        dir.join("logs").display()
    );
    std::fs::write(&props, config).unwrap();
    let log4j =
        format!("-Dlog4j2.configurationFile={}", repo_root().join("tools/kafka-reference/log4j2.properties").display());
    let java = std::env::var_os("JAVA").unwrap_or_else(|| "java".into());
    let format = Command::new(&java)
        .args([&log4j, "-cp", libs.to_str().unwrap(), "kafka.tools.StorageTool", "format"])
        .args(["--cluster-id", cluster_id, "--config", props.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(format.status.success(), "format failed: {}", String::from_utf8_lossy(&format.stderr));
    let log = std::fs::File::create(dir.join("kafka.log")).unwrap();
    let child = Command::new(&java)
        .args(["-Xms256m", "-Xmx512m", &log4j, "-Dkafka.root.loglevel=INFO"])
        .arg(format!("-Dkafka.logs.dir={}", dir.join("app-logs").display()))
        .args(["-cp", libs.to_str().unwrap(), "kafka.Kafka", props.to_str().unwrap()])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Kafka(child)
}

/// The committed batches of a `__cluster_metadata-0` segment below
/// `high_watermark`, as (base offset, bytes).
fn committed_batches(segment: &Path, high_watermark: i64) -> Vec<(i64, Vec<u8>)> {
    let bytes = std::fs::read(segment).unwrap();
    let mut batches = Vec::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let base = i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if base >= high_watermark || at + 12 + length > bytes.len() {
            break;
        }
        batches.push((base, bytes[at..at + 12 + length].to_vec()));
        at += 12 + length;
    }
    batches
}

/// Voters 1 (krabka, in this process) and 2 (Apache Kafka 4.3.1); voter 3
/// never starts. The election timeouts decide who runs first: the other
/// side's is 20 s.
async fn two_of_three(krabka_election_timeout_ms: i64, kafka_election_timeout_ms: i64, expected_leader: i32) {
    let dir = tempfile::tempdir().unwrap();
    let cluster_id = "AAECAwQFBgcICQoLDA0ODw";
    let ports: BTreeMap<i32, u16> = (1..=3).map(|id| (id, free_port())).collect();
    let voters_text = ports.iter().map(|(id, port)| format!("{id}@127.0.0.1:{port}")).collect::<Vec<_>>().join(",");
    let kafka = start_kafka_controller(dir.path(), 2, ports[&2], &voters_text, cluster_id, kafka_election_timeout_ms);

    let voters: BTreeMap<i32, Endpoint> =
        ports.iter().map(|(&id, &port)| (id, Endpoint { host: "127.0.0.1".into(), port })).collect();
    let setup = QuorumSetup {
        context: WireContext {
            cluster_id: cluster_id.into(),
            node_id: 1,
            directory_id: Uuid([1; 16]),
            listener: "CONTROLLER".into(),
            voters: voters.clone(),
            fetch_max_bytes: 8 << 20,
        },
        raft: RaftConfig {
            node_id: 1,
            voters: voters.keys().copied().collect(),
            election_timeout_ms: krabka_election_timeout_ms,
            fetch_timeout_ms: 2000,
            fetch_max_wait_ms: 500,
            retry_backoff_ms: 20,
            max_fetch_bytes: 8 << 20,
            seed: 1,
        },
        log_dir: dir.path().join("krabka/__cluster_metadata-0"),
        log_config: LogConfig::default(),
        request_timeout: Duration::from_millis(2000),
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", ports[&1])).await.unwrap();
    let quorum = Arc::new(Quorum::start(setup, &tokio::runtime::Handle::current()).unwrap());
    tokio::spawn(serve_controller_listener(listener, Arc::clone(&quorum)));
    let kafka_log = dir.path().join("kafka.log");

    // A leader both accept, and its epoch's first record committed: with
    // voter 3 down, that takes the other side's vote and fetch.
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        let now = *quorum.status().borrow();
        if now.leader_id.is_some() && now.high_watermark > 0 {
            break now;
        }
        assert!(Instant::now() < deadline, "no leader with a committed epoch: {now:?}; see {}", kafka_log.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.leader_id, Some(expected_leader), "{status:?}");
    // Both keep going for a while: fetches, and whatever the leader writes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = *quorum.status().borrow();
    assert_eq!(status.leader_id, Some(expected_leader), "the lead moved: {status:?}");
    quorum.stop();
    drop(kafka);

    // The committed log is the same bytes on both sides.
    let krabka = committed_batches(
        &dir.path().join("krabka/__cluster_metadata-0/00000000000000000000.log"),
        status.high_watermark,
    );
    let kafka = committed_batches(
        &dir.path().join("logs/__cluster_metadata-0/00000000000000000000.log"),
        status.high_watermark,
    );
    assert!(!krabka.is_empty());
    assert_eq!(krabka, kafka, "the committed batches differ");
    let log = std::fs::read_to_string(&kafka_log).unwrap();
    let fatal: Vec<&str> = log.lines().filter(|l| l.contains("ERROR") && !l.contains("UpdateRaftVoter")).collect();
    assert!(fatal.is_empty(), "Kafka logged errors:\n{}", fatal.join("\n"));
    eprintln!("{} committed batches agree, high watermark {}", krabka.len(), status.high_watermark);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_controller_follows_a_krabka_leader() {
    two_of_three(300, 20_000, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_krabka_member_follows_a_kafka_leader() {
    two_of_three(20_000, 1_000, 2).await;
}
