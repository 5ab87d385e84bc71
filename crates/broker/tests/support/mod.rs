//! Black-box test support: a real `krabka-broker` process on a temporary
//! data directory, restartable with SIGTERM or SIGKILL, and a minimal Kafka
//! client over a plain socket built on krabka-protocol.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use krabka_protocol::frame::{encode_request, parse_response_header};
use krabka_protocol::{ApiKey, InitProducerIdRequest, Message};

pub mod cluster;
pub mod delay_proxy;
pub mod log_dirs;
pub mod netns;
pub mod replica_bytes;
pub mod replicated;
pub mod tools;

pub use netns::Host;

pub struct BrokerProcess {
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The controller listener's port; 0 for a node that is its quorum's
    /// only voter (it binds any).
    pub controller_port: u16,
    child: Option<Child>,
    extra: Vec<String>,
    /// Environment the next start gives the process (a skewed clock).
    env: Vec<(String, String)>,
    pub log_path: PathBuf,
    /// Where it runs: loopback, or a test host of its own.
    pub host: Host,
}

/// A cluster id every test cluster is formatted with.
pub const TEST_CLUSTER_ID: &str = "a1b2c3d4e5f6g7h8i9j0kw";

/// A port nothing listens on now (bound once and released).
/// A port free now for a node to listen on later. Picked below the
/// ephemeral range (Linux's 32768-60999), where the kernel never puts an
/// outgoing connection or a listener on port 0: a port from there could be
/// taken by the clients of a test running beside this one before the node
/// binds it (seen under load with three-node clusters).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static DRAWS: AtomicU32 = AtomicU32::new(0);
    let seed =
        std::process::id() ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    loop {
        let draw = DRAWS.fetch_add(1, Ordering::Relaxed).wrapping_mul(2_654_435_761) ^ seed;
        let port = 20_000 + (draw % 12_000) as u16;
        debug_assert!(port < 32_768);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

impl BrokerProcess {
    /// Formats a fresh data directory and starts a broker on a free port.
    pub fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        krabka_format::format_log_dir(&data, "a1b2c3d4e5f6g7h8i9j0kw", 1).expect("format");
        let properties = format!(
            "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n\
             listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\ncontroller.listener.names=CONTROLLER\n\
             log.dirs={}\nkrabka.log.level=info\n",
            data.display()
        );
        Self::start_formatted(dir, &properties, extra)
    }

    /// `count` combined nodes (ids 1..=count) of one cluster on loopback,
    /// their controller listeners the static voters; started together, as
    /// none serves clients before the quorum has a leader.
    pub fn start_cluster(count: i32, extra: &[&str]) -> Vec<Self> {
        let hosts = vec![Host::loopback(); count as usize];
        Self::start_cluster_on(&hosts, extra)
    }

    /// One combined node per host (ids 1..=hosts.len()), as
    /// [`start_cluster`](Self::start_cluster). On loopback each takes free
    /// ports; a node on a host of its own listens on Kafka's usual ports
    /// (9092 for clients, 9093 for the controller), as a real cluster's
    /// nodes share one `server.properties` but for their ids and addresses.
    pub fn start_cluster_on(hosts: &[Host], extra: &[&str]) -> Vec<Self> {
        Self::start_cluster_each(hosts, extra, |_| Vec::new())
    }

    /// [`start_cluster_on`](Self::start_cluster_on), node `id` with the
    /// overrides `own(id)` beside `extra` (a `broker.rack` each).
    pub fn start_cluster_each(hosts: &[Host], extra: &[&str], own: impl Fn(i32) -> Vec<String>) -> Vec<Self> {
        let controller_ports: Vec<u16> =
            hosts.iter().map(|host| if host.is_loopback() { free_port() } else { 9093 }).collect();
        let voters: Vec<String> = hosts
            .iter()
            .zip(&controller_ports)
            .enumerate()
            .map(|(i, (host, port))| format!("{}@{}:{port}", i + 1, host.address))
            .collect();
        let mut nodes: Vec<BrokerProcess> = hosts
            .iter()
            .zip(&controller_ports)
            .enumerate()
            .map(|(i, (host, &controller_port))| {
                let id = i as i32 + 1;
                let client_port = if host.is_loopback() { 0 } else { 9092 };
                let address = &host.address;
                let mut node = Self::formatted(id, host, controller_port, extra, |data| {
                    format!(
                        "process.roles=broker,controller\nnode.id={id}\ncontroller.quorum.voters={}\n\
                         listeners=PLAINTEXT://{address}:{client_port},CONTROLLER://{address}:{controller_port}\n\
                         controller.listener.names=CONTROLLER\nlog.dirs={}\nkrabka.log.level=info\n",
                        voters.join(","),
                        data.display()
                    )
                });
                node.extra.extend(own(id));
                node
            })
            .collect();
        let launched: Vec<_> = nodes.iter_mut().map(|node| node.launch()).collect();
        for (node, serving) in nodes.iter_mut().zip(launched) {
            node.await_serving(serving);
        }
        nodes
    }

    /// A node of the test cluster not yet started: a temp dir whose `data`
    /// log dir is formatted for `id` and whose server.properties is
    /// `properties(data)`.
    fn formatted(
        id: i32,
        host: &Host,
        controller_port: u16,
        extra: &[&str],
        properties: impl FnOnce(&Path) -> String,
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        krabka_format::format_log_dir(&data, TEST_CLUSTER_ID, id).expect("format");
        std::fs::write(dir.path().join("server.properties"), properties(&data)).expect("write config");
        Self::unstarted(dir, host.clone(), controller_port, extra)
    }

    /// A node on `dir` (configured, not started) on `host`.
    fn unstarted(dir: tempfile::TempDir, host: Host, controller_port: u16, extra: &[&str]) -> Self {
        BrokerProcess {
            log_path: dir.path().join("broker.log"),
            dir,
            port: 0,
            controller_port,
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            host,
        }
    }

    /// Three controller-only nodes (ids 1-3, `process.roles=controller`)
    /// on `controller_hosts` and a broker-only node (ids 4 on) on each of
    /// `broker_hosts`, each a host of its own (Kafka's ports: 9093 for the
    /// controller listener, 9092 for clients): the layout of a production
    /// Kafka cluster. Returns once every node serves (a controller once its
    /// image caught up, a broker once it serves clients).
    pub fn start_split_cluster_on(
        controller_hosts: &[Host],
        broker_hosts: &[Host],
        extra: &[&str],
    ) -> (Vec<Self>, Vec<Self>) {
        let voters: Vec<String> =
            controller_hosts.iter().enumerate().map(|(i, h)| format!("{}@{}:9093", i + 1, h.address)).collect();
        let voters = voters.join(",");
        let node = |id: usize, host: &Host, roles: &str, listeners: String, controller_port: u16| {
            Self::formatted(id as i32, host, controller_port, extra, |data| {
                format!(
                    "process.roles={roles}\nnode.id={id}\ncontroller.quorum.voters={voters}\nlisteners={listeners}\n\
                     controller.listener.names=CONTROLLER\n\
                     listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
                     log.dirs={}\nkrabka.log.level=info\n",
                    data.display()
                )
            })
        };
        let mut controllers: Vec<Self> = controller_hosts
            .iter()
            .enumerate()
            .map(|(i, h)| node(i + 1, h, "controller", format!("CONTROLLER://{}:9093", h.address), 9093))
            .collect();
        let first_broker = controller_hosts.len() + 1;
        let mut brokers: Vec<Self> = broker_hosts
            .iter()
            .enumerate()
            .map(|(i, h)| node(first_broker + i, h, "broker", format!("PLAINTEXT://{}:9092", h.address), 0))
            .collect();
        let launched: Vec<_> = controllers.iter_mut().chain(brokers.iter_mut()).map(|n| n.launch()).collect();
        for (node, serving) in controllers.iter_mut().chain(brokers.iter_mut()).zip(launched) {
            node.await_serving(serving);
        }
        (controllers, brokers)
    }

    /// A broker-only node (`process.roles=broker`, node `id`) of cluster
    /// `cluster_id`, observing the controller quorum `voters` names
    /// (`id@host:port,...`); returns once it serves clients.
    pub fn start_broker_only(id: i32, voters: &str, cluster_id: &str, extra: &[&str]) -> Self {
        let (dir, properties) = Self::broker_only_dir(id, voters, cluster_id);
        Self::start_formatted(dir, &properties, extra)
    }

    /// A temp dir formatted for broker-only node `id` of `cluster_id`, and
    /// its server.properties under the controllers `voters` names.
    fn broker_only_dir(id: i32, voters: &str, cluster_id: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        krabka_format::format_log_dir(&data, cluster_id, id).expect("format");
        let properties = format!(
            "process.roles=broker\nnode.id={id}\ncontroller.quorum.voters={voters}\n\
             listeners=PLAINTEXT://127.0.0.1:0\ncontroller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             log.dirs={}\nkrabka.log.level=info\n",
            data.display()
        );
        (dir, properties)
    }

    /// A broker-only node as [`start_broker_only`](Self::start_broker_only)
    /// but not waited for: it may never serve (its controllers out of
    /// reach). Its `port` stays 0.
    pub fn launch_broker_only(id: i32, voters: &str, extra: &[&str]) -> Self {
        let (dir, properties) = Self::broker_only_dir(id, voters, TEST_CLUSTER_ID);
        std::fs::write(dir.path().join("server.properties"), properties).expect("write config");
        let mut node = Self::unstarted(dir, Host::loopback(), 0, extra);
        let (child, _serving) = node.launch();
        node.child = Some(child);
        node
    }

    /// A controller-only node (`process.roles=controller`, node `id`) of
    /// the static quorum `voters` names (`id@host:port,...`), listening on
    /// `controller_port`; returns once its image caught up.
    pub fn start_static_controller(id: i32, controller_port: u16, voters: &str, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        krabka_format::format_log_dir(&data, TEST_CLUSTER_ID, id).expect("format");
        let properties = format!(
            "process.roles=controller\nnode.id={id}\ncontroller.quorum.voters={voters}\n\
             listeners=CONTROLLER://127.0.0.1:{controller_port}\ncontroller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT\n\
             log.dirs={}\nkrabka.log.level=info\n",
            data.display()
        );
        let mut node = Self::start_formatted(dir, &properties, extra);
        node.controller_port = controller_port;
        node
    }

    /// A node of a dynamic (KIP-853) quorum: `roles`, node `id`, its
    /// controller listener (if a controller) on `controller_port`,
    /// `controller.quorum.bootstrap.servers` = `bootstrap`, formatted as
    /// `kafka-storage.sh format` with `flags` formats it (krabka-format's
    /// own code); returns once it serves.
    pub fn start_dynamic(
        id: i32,
        roles: &str,
        controller_port: u16,
        bootstrap: &str,
        flags: &krabka_format::dynamic_quorum::QuorumFlags,
        extra: &[&str],
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let mut listeners = Vec::new();
        if roles.contains("broker") {
            listeners.push("PLAINTEXT://127.0.0.1:0".to_string());
        }
        if roles.contains("controller") {
            listeners.push(format!("CONTROLLER://127.0.0.1:{controller_port}"));
        }
        let properties = format!(
            "process.roles={roles}\nnode.id={id}\ncontroller.quorum.bootstrap.servers={bootstrap}\n\
             listeners={}\ncontroller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             log.dirs={}\nkrabka.log.level=info\n",
            listeners.join(","),
            data.display()
        );
        let props = krabka_format::properties::parse(&properties);
        krabka_format::storage::format(&props, Some(TEST_CLUSTER_ID.into()), flags, false).expect("format");
        let mut node = Self::start_formatted(dir, &properties, extra);
        node.controller_port = controller_port;
        node
    }

    /// The directory id of its metadata log directory (`meta.properties`).
    pub fn directory_id(&self) -> krabka_protocol::Uuid {
        let meta = krabka_format::MetaProperties::read(&self.data_dir()).expect("meta.properties");
        meta.expect("formatted").directory_id
    }

    /// Starts a broker on `dir` (its data already formatted) with
    /// `properties` as its server.properties; returns once it serves.
    fn start_formatted(dir: tempfile::TempDir, properties: &str, extra: &[&str]) -> Self {
        std::fs::write(dir.path().join("server.properties"), properties).expect("write config");
        let mut broker = Self::unstarted(dir, Host::loopback(), 0, extra);
        broker.spawn();
        broker
    }

    pub fn bootstrap(&self) -> String {
        format!("{}:{}", self.host.address, self.port)
    }

    /// Where its controller listener is.
    pub fn controller_address(&self) -> String {
        format!("{}:{}", self.host.address, self.controller_port)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn spawn(&mut self) {
        let serving = self.launch();
        self.await_serving(serving);
    }

    /// Starts the process; the receiver gets its client port once it serves.
    fn launch(&mut self) -> (Child, mpsc::Receiver<u16>) {
        let binary = env!("CARGO_BIN_EXE_krabka-broker");
        let mut command = match &self.host.namespace {
            // `ip netns exec` execs the broker: the child is the broker's
            // process, for SIGKILL and SIGSTOP alike.
            Some(namespace) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", namespace, binary]);
                command
            }
            None => Command::new(binary),
        };
        command.arg(self.dir.path().join("server.properties"));
        // A node on a host of its own has fixed ports in its config.
        if self.port != 0 && self.host.is_loopback() {
            // A restart keeps the client port; a broker-only node has no
            // controller listener to keep.
            let properties = std::fs::read_to_string(self.dir.path().join("server.properties")).unwrap_or_default();
            let address = &self.host.address;
            let mut listeners = format!("listeners=PLAINTEXT://{address}:{}", self.port);
            if properties.contains("CONTROLLER://") {
                listeners.push_str(&format!(",CONTROLLER://{address}:{}", self.controller_port));
            }
            command.arg("--override").arg(listeners);
        }
        for extra in &self.extra {
            command.arg("--override").arg(extra);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn krabka-broker");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let log_path = self.log_path.clone();
        std::thread::spawn(move || {
            let mut log = std::fs::OpenOptions::new().create(true).append(true).open(log_path).expect("log file");
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                if !sent {
                    // A broker serves clients; a controller-only node its
                    // controller listener, once its image caught up.
                    let serving = line.split("krabka broker serving").nth(1);
                    if let Some(rest) = serving.or_else(|| line.split("krabka controller serving").nth(1)) {
                        if let Some(address) = rest.split("address=").nth(1) {
                            let port = address.split_whitespace().next().and_then(|a| a.rsplit(':').next());
                            if let Some(port) = port.and_then(|p| p.parse::<u16>().ok()) {
                                let _ = tx.send(port);
                                sent = true;
                            }
                        }
                    }
                }
            }
        });
        (child, rx)
    }

    fn await_serving(&mut self, (mut child, rx): (Child, mpsc::Receiver<u16>)) {
        let port = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                panic!("broker did not start:\n{}", std::fs::read_to_string(&self.log_path).unwrap_or_default());
            }
        };
        self.port = port;
        self.child = Some(child);
    }

    /// SIGTERM, wait for the process to exit; returns its exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "broker did not stop after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP: the process freezes, its sockets open, until [`resume`](Self::resume).
    pub fn pause(&self) {
        let pid = self.pid().expect("running") as i32;
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0, "SIGSTOP");
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        let pid = self.pid().expect("running") as i32;
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0, "SIGCONT");
    }

    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("kill");
        child.wait().expect("wait");
    }

    /// Starts again on the same port and data directory.
    pub fn restart(&mut self) {
        assert!(self.child.is_none());
        self.spawn();
    }

    /// The port of the HTTP endpoint (`krabka.metrics.listener`), from the log.
    pub fn metrics_port(&self) -> Option<u16> {
        let log = self.log();
        let line = log.lines().rev().find(|l| l.contains("serving /metrics"))?;
        let address = line.split("address=").nth(1)?.split_whitespace().next()?;
        address.rsplit(':').next()?.parse().ok()
    }

    /// A plain HTTP GET; returns (status code, body).
    pub fn http_get(&self, path: &str) -> (u16, Vec<u8>) {
        let port = self.metrics_port().expect("metrics listener in the log");
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect http");
        stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("write");
        let mut response = Vec::new();
        stream.read_to_end(&mut response).expect("read");
        let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").expect("http head");
        let head = String::from_utf8_lossy(&response[..head_end]).into_owned();
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status");
        (status, response[head_end + 4..].to_vec())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The broker's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The broker's resident set size in KiB (VmRSS), while it runs.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// The broker's TCP sockets on its listener port in state CLOSE-WAIT
    /// (the client closed, the broker has not), from /proc/net/tcp.
    pub fn close_wait_sockets(&self) -> usize {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        let local_port = format!(":{:04X}", self.port);
        table
            .lines()
            .skip(1)
            .filter(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // local_address is field 1, st (state) field 3; 08 is CLOSE_WAIT.
                fields.len() > 3 && fields[1].ends_with(&local_port) && fields[3] == "08"
            })
            .count()
    }

    /// Starts again on the same port and data directory after the process
    /// ended on its own (a crash the test recorded and wants to go past).
    pub fn restart_after_exit(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.spawn();
    }

    /// From its next start on, the process's wall clock is `offset` off
    /// (libfaketime, e.g. "+2h" or "-30m"; None: the real clock). Its
    /// monotonic clock stays true, as a skewed host's does.
    pub fn skew_clock(&mut self, offset: Option<&str>) {
        self.env = match offset {
            Some(offset) => vec![
                ("LD_PRELOAD".into(), "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1".into()),
                ("FAKETIME".into(), offset.into()),
                ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
            ],
            None => Vec::new(),
        };
    }

    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        keep_if_failing(&mut self.dir);
    }
}

/// A temporary directory of a test's own (a Kafka node's, say), kept
/// when the test fails, as [`BrokerProcess`]'s are.
pub struct TestDir(tempfile::TempDir);

impl TestDir {
    pub fn new() -> Self {
        TestDir(tempfile::tempdir().expect("temp dir"))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        keep_if_failing(&mut self.0);
    }
}

/// A failing test's directory is kept (its logs and segments are what
/// explain a rare failure) unless `KRABKA_KEEP_FAILED=0`.
pub fn keep_if_failing(dir: &mut tempfile::TempDir) {
    if std::thread::panicking() && std::env::var("KRABKA_KEEP_FAILED").as_deref() != Ok("0") {
        dir.disable_cleanup(true);
        eprintln!("kept {} (the test failed; KRABKA_KEEP_FAILED=0 removes it)", dir.path().display());
    }
}

/// A blocking Kafka client for raw protocol tests.
pub struct RawClient {
    pub stream: TcpStream,
    correlation_id: i32,
}

impl RawClient {
    pub fn connect(bootstrap: &str) -> Self {
        Self::from_stream(TcpStream::connect(bootstrap).expect("connect"))
    }

    pub fn from_stream(stream: TcpStream) -> Self {
        stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        RawClient { stream, correlation_id: 0 }
    }

    pub fn send<M: Message>(&mut self, api_key: ApiKey, version: i16, request: &M) -> i32 {
        self.correlation_id += 1;
        let mut buf = BytesMut::new();
        encode_request(&mut buf, api_key, version, self.correlation_id, Some("raw-test"), request).expect("encode");
        self.stream.write_all(&buf).expect("write");
        self.correlation_id
    }

    pub fn read_frame(&mut self) -> std::io::Result<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut frame)?;
        Ok(Bytes::from(frame))
    }

    pub fn receive<R: Message>(&mut self, api_key: ApiKey, version: i16, correlation_id: i32) -> R {
        let mut frame = self.read_frame().expect("response frame");
        let header = parse_response_header(api_key, version, &mut frame).expect("response header");
        assert_eq!(header.correlation_id, correlation_id, "correlation id");
        let response = R::decode(&mut frame, version).expect("decode response");
        assert!(frame.is_empty(), "{} bytes left after the response", frame.len());
        response
    }

    pub fn request<M: Message, R: Message>(&mut self, api_key: ApiKey, version: i16, request: &M) -> R {
        let id = self.send(api_key, version, request);
        self.receive(api_key, version, id)
    }

    /// True when the broker closed the connection (EOF within the timeout).
    pub fn is_closed(&mut self) -> bool {
        self.stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0) | Err(_))
    }
}

/// The InitProducerId request of a new idempotent (not transactional)
/// producer.
pub fn idempotent_producer_init() -> InitProducerIdRequest {
    InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    }
}

pub fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// An Apache Kafka 4.3.1 node process (jars from Maven Central through
/// `tools/kafka-reference/install`), killed when dropped.
pub struct KafkaNode(Child);

impl Drop for KafkaNode {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl KafkaNode {
    /// SIGSTOP: the JVM freezes, its sockets open, until [`resume`](Self::resume).
    pub fn pause(&self) {
        assert_eq!(unsafe { libc::kill(self.0.id() as i32, libc::SIGSTOP) }, 0, "SIGSTOP");
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        assert_eq!(unsafe { libc::kill(self.0.id() as i32, libc::SIGCONT) }, 0, "SIGCONT");
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// A controller (node `id`) listening on `port`; `extra` adds config
    /// lines.
    pub fn start_controller(dir: &Path, id: i32, port: u16, voters: &str, cluster_id: &str, extra: &str) -> Self {
        let config = format!(
            "process.roles=controller\nnode.id={id}\ncontroller.quorum.voters={voters}\n\
             listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT\nlog.dirs={}\n{extra}",
            dir.join("logs").display()
        );
        Self::start(dir, &config, cluster_id)
    }

    /// A lone combined node (node 1, its own only voter) serving clients on
    /// `port`, every internal topic with one replica; `extra` adds config lines.
    pub fn start_combined(dir: &Path, port: u16, controller_port: u16, extra: &str) -> Self {
        let config = format!(
            "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{controller_port}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\nlog.dirs={}\n\
             offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n{extra}",
            dir.join("logs").display()
        );
        Self::start(dir, &config, TEST_CLUSTER_ID)
    }

    /// A broker-only node (node `id`) serving clients on `port`, under the
    /// controllers `voters` names; `extra` adds config lines.
    pub fn start_broker(dir: &Path, id: i32, port: u16, voters: &str, cluster_id: &str, extra: &str) -> Self {
        let config = format!(
            "process.roles=broker\nnode.id={id}\ncontroller.quorum.voters={voters}\n\
             listeners=PLAINTEXT://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\nlog.dirs={}\n{extra}",
            dir.join("logs").display()
        );
        Self::start(dir, &config, cluster_id)
    }

    /// A controller (node `id`, listening on `port`) of a dynamic (KIP-853)
    /// quorum found through `bootstrap`, formatted by Kafka's storage tool
    /// with `format_flag` (`--standalone` or `--no-initial-controllers`);
    /// `extra` adds config lines.
    pub fn start_dynamic_controller(
        dir: &Path,
        (id, port): (i32, u16),
        bootstrap: &str,
        cluster_id: &str,
        format_flag: &str,
        extra: &str,
    ) -> Self {
        let config = format!(
            "process.roles=controller\nnode.id={id}\ncontroller.quorum.bootstrap.servers={bootstrap}\n\
             listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT\nlog.dirs={}\n{extra}",
            dir.join("logs").display()
        );
        Self::start_formatted_with(dir, &config, cluster_id, &[format_flag])
    }

    /// Formats `dir` with `cluster_id` by Kafka's own storage tool (unless
    /// it is formatted: a restart), then starts the node on `config`; its
    /// output goes to `dir/kafka.log`.
    fn start(dir: &Path, config: &str, cluster_id: &str) -> Self {
        Self::start_formatted_with(dir, config, cluster_id, &[])
    }

    /// As [`start`](Self::start), with `format_args` added to the format.
    fn start_formatted_with(dir: &Path, config: &str, cluster_id: &str, format_args: &[&str]) -> Self {
        Self::launch(dir, config, cluster_id, format_args, &Host::loopback())
    }

    /// A split cluster (cluster id `TEST_CLUSTER_ID`), one node per host:
    /// controllers 1, 2, ... on `controller_hosts` (port 9093), brokers
    /// numbered after them on `broker_hosts` (port 9092), node `id` in
    /// `root/node-<id>`; `extra` adds config lines to every node. Returns
    /// once they are started (a JVM then takes seconds to serve).
    pub fn start_split_cluster_on(
        root: &Path,
        controller_hosts: &[Host],
        broker_hosts: &[Host],
        extra: &str,
    ) -> (Vec<Self>, Vec<Self>) {
        let voters: Vec<String> =
            controller_hosts.iter().enumerate().map(|(i, h)| format!("{}@{}:9093", i + 1, h.address)).collect();
        let voters = voters.join(",");
        let node = |id: usize, host: &Host, roles: &str, listener: String| {
            let dir = root.join(format!("node-{id}"));
            std::fs::create_dir_all(&dir).unwrap();
            let config = format!(
                "process.roles={roles}\nnode.id={id}\ncontroller.quorum.voters={voters}\nlisteners={listener}\n\
                 controller.listener.names=CONTROLLER\n\
                 listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\nlog.dirs={}\n{extra}",
                dir.join("logs").display()
            );
            Self::launch(&dir, &config, TEST_CLUSTER_ID, &[], host)
        };
        let controllers = controller_hosts
            .iter()
            .enumerate()
            .map(|(i, h)| node(i + 1, h, "controller", format!("CONTROLLER://{}:9093", h.address)))
            .collect();
        let first_broker = controller_hosts.len() + 1;
        let brokers = broker_hosts
            .iter()
            .enumerate()
            .map(|(i, h)| node(first_broker + i, h, "broker", format!("PLAINTEXT://{}:9092", h.address)))
            .collect();
        (controllers, brokers)
    }

    /// Formats `dir` (see [`start`](Self::start)) and starts the node on
    /// `config` on `host` (in its network namespace, when it has one).
    fn launch(dir: &Path, config: &str, cluster_id: &str, format_args: &[&str], host: &Host) -> Self {
        let status = Command::new(repo_root().join("tools/kafka-reference/install")).status().unwrap();
        assert!(status.success(), "tools/kafka-reference/install failed");
        let libs = repo_root().join("target/kafka-4.3.1/libs/*");
        let props = dir.join("server.properties");
        std::fs::write(&props, config).unwrap();
        let log4j = format!(
            "-Dlog4j2.configurationFile={}",
            repo_root().join("tools/kafka-reference/log4j2.properties").display()
        );
        let java = std::env::var_os("JAVA").unwrap_or_else(|| "java".into());
        let format = Command::new(&java)
            .args([&log4j, "-cp", libs.to_str().unwrap(), "kafka.tools.StorageTool", "format"])
            .args(["--cluster-id", cluster_id, "--config", props.to_str().unwrap(), "--ignore-formatted"])
            .args(format_args)
            .output()
            .unwrap();
        assert!(format.status.success(), "format failed: {}", String::from_utf8_lossy(&format.stderr));
        // Appended to: a restarted node's log follows its first run's.
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("kafka.log")).unwrap();
        // `ip netns exec` execs the JVM: the child is the JVM itself.
        let mut command = match &host.namespace {
            Some(namespace) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", namespace]).arg(&java);
                command
            }
            None => Command::new(&java),
        };
        let child = command
            .args(["-Xms256m", "-Xmx512m", &log4j, "-Dkafka.root.loglevel=INFO"])
            .arg(format!("-Dkafka.logs.dir={}", dir.join("app-logs").display()))
            .args(["-cp", libs.to_str().unwrap(), "kafka.Kafka", props.to_str().unwrap()])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        KafkaNode(child)
    }
}

/// Runs an Apache Kafka 4.3.1 CLI tool (`tools/kafka-reference/kafka-cli`,
/// which installs the jars on first use): whether it exited 0, and its
/// stdout and stderr together.
pub fn kafka_cli(tool: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(repo_root().join("tools/kafka-reference/kafka-cli"))
        .arg(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run kafka-cli");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// Kafka 4.3.1's `kafka-producer-perf-test` writing `records` records of
/// 50 bytes to `topic` through `bootstrap`, as an idempotent producer with
/// acks=all: whether it sent them all, and what it printed.
pub fn idempotent_perf_producer(bootstrap: &str, topic: &str, records: usize) -> (bool, String) {
    idempotent_perf_producer_with(bootstrap, topic, records, &[])
}

/// As `idempotent_perf_producer`, with more producer properties.
pub fn idempotent_perf_producer_with(bootstrap: &str, topic: &str, records: usize, props: &[&str]) -> (bool, String) {
    let (servers, count) = (format!("bootstrap.servers={bootstrap}"), records.to_string());
    let (ok, printed) = kafka_cli(
        "kafka-producer-perf-test",
        &["--topic", topic, "--num-records", &count, "--record-size", "50", "--throughput", "-1"]
            .into_iter()
            .chain(["--producer-props", &servers, "enable.idempotence=true", "acks=all"])
            .chain(props.iter().copied())
            .collect::<Vec<_>>(),
    );
    (ok && printed.contains(&format!("{records} records sent")), printed)
}
