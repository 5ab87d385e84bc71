//! `krabka-format format` against Apache Kafka 4.3.1's `kafka-storage.sh
//! format` (jars from Maven Central through `tools/kafka-reference/install`,
//! run by `tools/kafka-reference/kafka-cli`, as crates/broker's Kafka
//! tests run them: a missing install is installed, and a failed one fails
//! the test). Both tools format the same config; the bootstrap snapshots
//! they write must be the same records and, with the times, CRCs and
//! random directory ids masked, the same bytes. Kafka's refusals must be
//! krabka's, and Kafka's `kafka-dump-log.sh` must read krabka's file.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Once;

use bytes::Bytes;
use krabka_format::bootstrap_snapshot::{BOOTSTRAP_SNAPSHOT_FILE, CLUSTER_METADATA_DIR};
use krabka_format::MetaProperties;
use krabka_protocol::records::{control_type_id, RecordBatches};
use krabka_protocol::{KRaftVersionRecord, Message, SnapshotFooterRecord, SnapshotHeaderRecord, Uuid, VotersRecord};

const CLUSTER_ID: &str = "4L6g3nShT-eMCtK--X86sw";
const COMBINED: &str = "process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n\
    listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n\
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n";
const CONTROLLER: &str = "process.roles=controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n\
    listener.security.protocol.map=CONTROLLER:PLAINTEXT\n";
const BROKER: &str = "process.roles=broker\nnode.id=2\ncontroller.listener.names=CONTROLLER\n\
    listeners=PLAINTEXT://127.0.0.1:9094\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n";
const BOOTSTRAP: &str = "controller.quorum.bootstrap.servers=127.0.0.1:9093\n";
const STATIC: &str = "controller.quorum.voters=1@127.0.0.1:9093\n";
const DIR_1: &str = "hcJXlCj7TresRGXDB2gi2w";
const DIR_2: &str = "RER2Vg5VN9FqA8z6oK9SHQ";
const DIR_17: &str = "nJFzXFlymBlbxq6d_wOzug";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

fn install_kafka() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let status = Command::new(repo_root().join("tools/kafka-reference/install")).status().unwrap();
        assert!(status.success(), "tools/kafka-reference/install failed");
    });
}

/// Runs a program: whether it exited 0, and its stdout and stderr together.
fn run(command: &mut Command) -> (bool, String) {
    let output = command.stdin(Stdio::null()).output().expect("run");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

fn kafka_cli(tool: &str, args: &[&str]) -> (bool, String) {
    install_kafka();
    run(Command::new(repo_root().join("tools/kafka-reference/kafka-cli")).arg(tool).args(args))
}

/// Which tool formats.
#[derive(Clone, Copy, Debug)]
enum Tool {
    Kafka,
    Krabka,
}

/// Writes `config` (plus log.dirs, and metadata.log.dir when `split`) under
/// `root/<tool>` and formats it with `tool` and `args`; returns the data
/// root, whether it succeeded and what it printed.
fn format(root: &Path, tool: Tool, config: &str, split: bool, args: &[&str]) -> (PathBuf, bool, String) {
    let dir = root.join(format!("{tool:?}").to_lowercase());
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = format!("{config}log.dirs={}\n", dir.join("logs").display());
    if split {
        config.push_str(&format!("metadata.log.dir={}\n", dir.join("metadata").display()));
    }
    let props = dir.join("server.properties");
    std::fs::write(&props, config).unwrap();
    let props = props.to_str().unwrap();
    let common = ["format", "--config", props, "--cluster-id", CLUSTER_ID];
    let (ok, printed) = match tool {
        Tool::Kafka => kafka_cli("kafka-storage", &[&common[..], args].concat()),
        Tool::Krabka => run(Command::new(env!("CARGO_BIN_EXE_krabka-format")).args(common).args(args)),
    };
    (dir, ok, printed)
}

/// One decoded control record; the header's time is zeroed (it must differ).
#[derive(Debug, PartialEq)]
enum Control {
    Header(SnapshotHeaderRecord),
    KRaftVersion(KRaftVersionRecord),
    Voters(VotersRecord),
    Footer(SnapshotFooterRecord),
}

/// A batch's header fields but its CRC and times, and its records.
#[derive(Debug, PartialEq)]
struct Batch {
    fields: (i64, i32, i8, i16, i32, i64, i16, i32, i32),
    records: Vec<Control>,
}

fn decode(bytes: &[u8]) -> Vec<Batch> {
    let decode_control = |type_id: i16, mut value: Bytes| match type_id {
        3 => {
            let mut header = SnapshotHeaderRecord::decode(&mut value, 0).unwrap();
            assert!(header.last_contained_log_timestamp > 0);
            header.last_contained_log_timestamp = 0;
            Control::Header(header)
        }
        4 => Control::Footer(SnapshotFooterRecord::decode(&mut value, 0).unwrap()),
        5 => Control::KRaftVersion(KRaftVersionRecord::decode(&mut value, 0).unwrap()),
        6 => Control::Voters(VotersRecord::decode(&mut value, 0).unwrap()),
        other => panic!("unexpected control record type {other}"),
    };
    RecordBatches::new(Bytes::copy_from_slice(bytes))
        .map(|batch| {
            let b = batch.unwrap();
            b.validate().unwrap();
            let fields = (
                b.base_offset(),
                b.partition_leader_epoch(),
                b.magic(),
                b.attributes(),
                b.last_offset_delta(),
                b.producer_id(),
                b.producer_epoch(),
                b.base_sequence(),
                b.record_count(),
            );
            let records = b
                .records(usize::MAX)
                .unwrap()
                .map(|r| r.unwrap())
                .map(|r| decode_control(control_type_id(r.key.as_deref().unwrap()).unwrap(), r.value.unwrap()))
                .collect();
            Batch { fields, records }
        })
        .collect()
}

/// The file's bytes with what must differ zeroed: every batch's CRC and
/// times, the header's time, and the given (random) directory ids.
fn normalized(bytes: &[u8], random_ids: &[Uuid]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut at = 0;
    while at + 12 <= out.len() {
        let length = i32::from_be_bytes(out[at + 8..at + 12].try_into().unwrap()) as usize;
        out[at + 17..at + 21].fill(0); // crc
        out[at + 27..at + 43].fill(0); // firstTimestamp, maxTimestamp
        at += 12 + length;
    }
    let first_batch = RecordBatches::new(Bytes::copy_from_slice(bytes)).next().unwrap().unwrap();
    let mut value = first_batch.records(usize::MAX).unwrap().next().unwrap().unwrap().value.unwrap();
    let time = SnapshotHeaderRecord::decode(&mut value, 0).unwrap().last_contained_log_timestamp;
    let mut masks: Vec<Vec<u8>> = vec![time.to_be_bytes().to_vec()];
    masks.extend(random_ids.iter().map(|id| id.0.to_vec()));
    for mask in masks {
        let found = out.windows(mask.len()).position(|w| w == mask).expect("masked bytes are in the file");
        out[found..found + mask.len()].fill(0);
    }
    out
}

fn checkpoint(metadata_dir: &Path) -> PathBuf {
    metadata_dir.join(CLUSTER_METADATA_DIR).join(BOOTSTRAP_SNAPSHOT_FILE)
}

fn directory_id(dir: &Path) -> Uuid {
    MetaProperties::read(dir).unwrap().expect("meta.properties").directory_id
}

/// Every file under `dir`, relative, but Kafka's `bootstrap.checkpoint`
/// (its bootstrap feature levels, which krabka-format does not write).
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if !path.ends_with("bootstrap.checkpoint") && !path.ends_with("server.properties") {
                out.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Formats `config` with both tools; both must succeed and leave the same
/// files. Returns (Kafka's data root, krabka's).
fn format_both(config: &str, split: bool, args: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let (kafka, ok, printed) = format(root.path(), Tool::Kafka, config, split, args);
    assert!(ok, "kafka-storage format {args:?}: {printed}");
    let (krabka, ok, printed) = format(root.path(), Tool::Krabka, config, split, args);
    assert!(ok, "krabka-format format {args:?}: {printed}");
    assert_eq!(files(&krabka), files(&kafka), "{args:?}");
    (root, kafka, krabka)
}

#[test]
fn initial_controllers_snapshot_is_kafkas() {
    // Ids 1, 2, 17: Kafka lists them 1, 17, 2 (its HashMap's order); hosts
    // in each of the forms Java rewrites or keeps.
    let voters = format!("2@[::1]:9095:{DIR_2},1@127.0.0.1:9093:{DIR_1},17@LOCALHOST:9097:{DIR_17}");
    let args = ["--initial-controllers", voters.as_str()];
    let (_root, kafka, krabka) = format_both(&format!("{COMBINED}{BOOTSTRAP}"), true, &args);
    let (kafka_bytes, krabka_bytes) = (
        std::fs::read(checkpoint(&kafka.join("metadata"))).unwrap(),
        std::fs::read(checkpoint(&krabka.join("metadata"))).unwrap(),
    );
    assert_eq!(decode(&krabka_bytes), decode(&kafka_bytes));
    assert_eq!(normalized(&krabka_bytes, &[]), normalized(&kafka_bytes, &[]));
    let Control::Voters(record) = &decode(&krabka_bytes)[0].records[2] else { panic!("no VotersRecord") };
    let order: Vec<i32> = record.voters.iter().map(|v| v.voter_id).collect();
    assert_eq!(order, [1, 17, 2]);
    for root in [&kafka, &krabka] {
        // The voter's metadata directory takes its entry's id; the others a random one.
        assert_eq!(directory_id(&root.join("metadata")).to_string(), DIR_1);
        assert_ne!(directory_id(&root.join("logs")).to_string(), DIR_1);
        let mode = std::fs::metadata(checkpoint(&root.join("metadata"))).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o400, "{root:?}");
    }
    let printed = dump_log(&checkpoint(&krabka.join("metadata")));
    assert!(printed.contains(
        r#"{"voterId":17,"voterDirectoryId":"nJFzXFlymBlbxq6d_wOzug","endpoints":[{"name":"CONTROLLER","host":"LOCALHOST","port":9097}],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}"#
    ), "{printed}");
    assert!(printed.contains(r#""host":"0:0:0:0:0:0:0:1","port":9095"#), "{printed}");
}

#[test]
fn standalone_snapshot_is_kafkas() {
    // A controller listening on every interface: advertised as localhost.
    let config = format!("{CONTROLLER}{BOOTSTRAP}listeners=CONTROLLER://:9093\n");
    let (_root, kafka, krabka) = format_both(&config, false, &["--standalone"]);
    let kafka_id = directory_id(&kafka.join("logs"));
    let krabka_id = directory_id(&krabka.join("logs"));
    let (kafka_bytes, krabka_bytes) = (
        std::fs::read(checkpoint(&kafka.join("logs"))).unwrap(),
        std::fs::read(checkpoint(&krabka.join("logs"))).unwrap(),
    );
    assert_eq!(normalized(&krabka_bytes, &[krabka_id]), normalized(&kafka_bytes, &[kafka_id]));
    let only_voter = |bytes: &[u8]| {
        let Control::Voters(mut record) = decode(bytes).remove(0).records.remove(2) else { panic!("no VotersRecord") };
        record.voters[0].voter_directory_id = Uuid::ZERO;
        record
    };
    assert_eq!(only_voter(&krabka_bytes), only_voter(&kafka_bytes));
    assert_eq!(only_voter(&krabka_bytes).voters[0].endpoints[0].host, "localhost");
    let printed = dump_log(&checkpoint(&krabka.join("logs")));
    assert!(printed.contains(&format!(r#""voterId":1,"voterDirectoryId":"{krabka_id}""#)), "{printed}");
}

/// Kafka's `kafka-dump-log.sh --cluster-metadata-decoder` over `file`: it
/// must read two valid batches, the header, kraft.version 1 and the footer.
fn dump_log(file: &Path) -> String {
    let (ok, printed) = kafka_cli("kafka-dump-log", &["--cluster-metadata-decoder", "--files", file.to_str().unwrap()]);
    assert!(ok, "{printed}");
    assert!(printed.contains("Snapshot end offset: 0, epoch: 0"), "{printed}");
    assert_eq!(printed.matches("isvalid: true").count(), 2, "{printed}");
    assert_eq!(
        printed.matches("partitionLeaderEpoch: 0 isTransactional: false isControl: true").count(),
        2,
        "{printed}"
    );
    for part in [
        "SnapshotHeader {\"version\":0",
        "KRaftVersion {\"version\":0,\"kRaftVersion\":1}",
        "SnapshotFooter {\"version\":0}",
    ] {
        assert!(printed.contains(part), "{part} in {printed}");
    }
    printed
}

#[test]
fn accepted_as_kafka_accepts() {
    let other_voter = format!("3@127.0.0.1:9093:{DIR_1}");
    let cases: [(String, Vec<&str>); 4] = [
        // No snapshot: a controller to be added to an existing quorum.
        (format!("{COMBINED}{BOOTSTRAP}"), vec!["--no-initial-controllers"]),
        (format!("{COMBINED}{STATIC}"), vec![]),
        (format!("{COMBINED}{STATIC}"), vec!["-N"]),
        // A broker, or a controller not among them, records the voters as a non-voter.
        (format!("{BROKER}{BOOTSTRAP}"), vec!["-I", other_voter.as_str()]),
    ];
    for (config, args) in &cases {
        let (_root, kafka, krabka) = format_both(config, false, args);
        let snapshot = checkpoint(&kafka.join("logs")).exists();
        assert_eq!(snapshot, args.first() == Some(&"-I"), "{args:?}");
        if snapshot {
            assert_ne!(directory_id(&krabka.join("logs")).to_string(), DIR_1);
            let bytes = |root: &Path| std::fs::read(checkpoint(&root.join("logs"))).unwrap();
            assert_eq!(decode(&bytes(&krabka)), decode(&bytes(&kafka)));
        }
    }
}

#[test]
fn refused_as_kafka_refuses() {
    let dir = format!("1@127.0.0.1:9093:{DIR_1}");
    let cases: Vec<(String, Vec<&str>, &str)> = vec![
        (format!("{COMBINED}{BOOTSTRAP}"), vec!["-s", "-I", &dir], "argument --initial-controllers/-I: not allowed with argument --standalone/-s"),
        (format!("{COMBINED}{BOOTSTRAP}"), vec!["-s", "-N"], "argument --no-initial-controllers/-N: not allowed with argument --standalone/-s"),
        (format!("{COMBINED}{BOOTSTRAP}"), vec![], "Because controller.quorum.voters is not set on this controller, you must specify one of the following: --standalone, --initial-controllers, or --no-initial-controllers."),
        (format!("{COMBINED}{STATIC}"), vec!["--standalone"], "You cannot specify controller.quorum.voters and format the node with --initial-controllers or --standalone. If you want to use dynamic quorum, please remove controller.quorum.voters and specify controller.quorum.bootstrap.servers instead."),
        (format!("{BROKER}{STATIC}"), vec!["-I", &dir], "You cannot specify controller.quorum.voters and format the node with --initial-controllers or --standalone."),
        (format!("{BROKER}{BOOTSTRAP}"), vec!["--standalone"], "You can only use --standalone on a controller."),
        (COMBINED.to_string(), vec!["--standalone"], "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers."),
        (format!("{COMBINED}{BOOTSTRAP}"), vec!["-I", "1@h:9093"], "No colon following port could be found."),
        (format!("{COMBINED}{BOOTSTRAP}"), vec!["-I", "1@h:70000:hcJXlCj7TresRGXDB2gi2w"], "Invalid port 70000 in dynamic voter string."),
        (format!("{COMBINED}{BOOTSTRAP}"), vec!["-I", "1@h:1:hcJXlCj7TresRGXDB2gi2w,1@g:2:RER2Vg5VN9FqA8z6oK9SHQ"], "Node id 1 was specified more than once."),
        (format!("{COMBINED}{BOOTSTRAP}"), vec!["-I", "1@h:1:hcJXlCj7TresRGXDB2gi2wAA"], "Failed to parse directory ID in dynamic voter string."),
        (format!("{CONTROLLER}{BOOTSTRAP}listeners=CONTROLLER://[::1]:9093\n"), vec!["-s"], "Failed to parse port in dynamic voter string."),
        (format!("{CONTROLLER}{BOOTSTRAP}listeners=CONTROLLER://127.0.0.1:9093\nadvertised.listeners=CONTROLLER://0.0.0.0:9093\n"), vec!["-s"], "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."),
    ];
    let squeeze = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    for (config, args, message) in &cases {
        let root = tempfile::tempdir().unwrap();
        for tool in [Tool::Kafka, Tool::Krabka] {
            let (dir, ok, printed) = format(root.path(), tool, config, false, args);
            assert!(!ok, "{tool:?} {args:?} accepted {config}: {printed}");
            assert!(squeeze(&printed).contains(message), "{tool:?} {args:?}: {printed}");
            assert!(!dir.join("logs").exists(), "{tool:?} {args:?} wrote before refusing");
        }
    }
}

#[test]
fn without_the_flags_formats_as_before() {
    let root = tempfile::tempdir().unwrap();
    // krabka's single node (no quorum key: Kafka would refuse it) and a static quorum.
    for (name, config) in [("single", COMBINED.to_string()), ("static", format!("{COMBINED}{STATIC}"))] {
        let dir = root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let props = dir.join("server.properties");
        std::fs::write(&props, format!("{config}log.dirs={}\n", dir.join("logs").display())).unwrap();
        let krabka = || Command::new(env!("CARGO_BIN_EXE_krabka-format"));
        let (ok, printed) = run(krabka().args(["format", "-c", props.to_str().unwrap(), "-t", CLUSTER_ID]));
        assert!(ok, "{printed}");
        assert_eq!(
            printed.trim(),
            format!("Formatted {} with cluster.id {CLUSTER_ID} node.id 1", dir.join("logs").display())
        );
        assert_eq!(files(&dir), ["logs/meta.properties"]);
        let (ok, printed) = run(krabka().args(["format", "-c", props.to_str().unwrap(), "--ignore-formatted"]));
        assert!(ok && printed.contains("is already formatted for cluster.id"), "{printed}");
    }
}

/// A Kafka 4.3.1 node process, killed when dropped.
struct KafkaNode(std::process::Child);

impl Drop for KafkaNode {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn kafka_starts_a_standalone_quorum_krabka_formatted() {
    let root = tempfile::tempdir().unwrap();
    let controller_port = free_port();
    let config = format!(
        "{CONTROLLER}controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}\n\
         listeners=CONTROLLER://127.0.0.1:{controller_port}\n"
    );
    let (dir, ok, printed) = format(root.path(), Tool::Krabka, &config, false, &["--standalone"]);
    assert!(ok, "{printed}");
    let directory_id = directory_id(&dir.join("logs"));
    install_kafka();
    let libs = repo_root().join("target/kafka-4.3.1/libs/*");
    let log4j =
        format!("-Dlog4j2.configurationFile={}", repo_root().join("tools/kafka-reference/log4j2.properties").display());
    let log = std::fs::File::create(dir.join("kafka.log")).unwrap();
    let _node = KafkaNode(
        Command::new(std::env::var_os("JAVA").unwrap_or_else(|| "java".into()))
            .args(["-Xms256m", "-Xmx512m", &log4j, "-cp", libs.to_str().unwrap(), "kafka.Kafka"])
            .arg(dir.join("server.properties"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The quorum Kafka runs is the one krabka-format recorded: this node,
    // with the directory id of its metadata log directory.
    let expected = format!(
        r#"CurrentVoters:          [{{"id": 1, "directoryId": "{directory_id}", "endpoints": ["CONTROLLER://127.0.0.1:{controller_port}"]}}]"#
    );
    let bootstrap = format!("127.0.0.1:{controller_port}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let (ok, printed) =
            kafka_cli("kafka-metadata-quorum", &["--bootstrap-controller", &bootstrap, "describe", "--status"]);
        if ok && printed.contains("LeaderId:               1") && printed.contains(&expected) {
            break;
        }
        let log = std::fs::read_to_string(dir.join("kafka.log")).unwrap_or_default();
        assert!(std::time::Instant::now() < deadline, "no quorum led by node 1 with {expected}: {printed}\n{log}");
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}
