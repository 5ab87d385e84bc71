//! Test hosts: one network namespace per node, each with its own address
//! on a bridge this test creates (veth pairs, iproute2), so a node has a
//! host of its own and links between hosts can be cut with iptables
//! inside a namespace. The test process stays in the root namespace and
//! reaches every host through the bridge's own address, which a cut never
//! drops. Everything is removed when the `TestNetwork` drops; only
//! addresses it created are ever targets. Needs root (CI runs as root).

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Where a node runs: its address and the namespace that holds it (None:
/// this machine's loopback).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub address: String,
    pub namespace: Option<String>,
}

impl Host {
    pub fn loopback() -> Self {
        Host { address: "127.0.0.1".into(), namespace: None }
    }

    pub fn is_loopback(&self) -> bool {
        self.namespace.is_none()
    }
}

/// A bridge and one namespace per host, in a /24 of 10.0.0.0/8 chosen
/// from the process id and a counter (tests in one binary run in parallel,
/// and test binaries one after another).
pub struct TestNetwork {
    bridge: String,
    hosts: Vec<Host>,
}

static NETWORKS: AtomicU32 = AtomicU32::new(0);

/// Runs `ip`/`iptables` (optionally in `namespace`) and panics with its
/// output when it fails: a fault the test meant to inject that did not
/// happen must not pass silently.
fn run(namespace: Option<&str>, program: &str, args: &[&str]) {
    let mut command = match namespace {
        Some(namespace) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", namespace, program]);
            command
        }
        None => Command::new(program),
    };
    let output = command.args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} in {namespace:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

impl TestNetwork {
    /// `count` hosts, each reachable from the test process and from every
    /// other host.
    pub fn create(count: usize) -> Self {
        assert!((1..=250).contains(&count));
        let serial = NETWORKS.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{serial}", std::process::id() % 100_000);
        let subnet = format!("10.{}.{}", 100 + std::process::id() % 100, serial % 250);
        let bridge = format!("kbr{tag}");
        // A namespace or bridge of the same name (a killed earlier run with
        // this pid) is removed first; failures here are expected.
        let _ = Command::new("ip").args(["link", "del", &bridge]).output();
        // Built first, so a failure part way removes what was made.
        let mut network = TestNetwork { bridge: bridge.clone(), hosts: Vec::new() };
        run(None, "ip", &["link", "add", &bridge, "type", "bridge"]);
        run(None, "ip", &["addr", "add", &format!("{subnet}.254/24"), "dev", &bridge]);
        run(None, "ip", &["link", "set", &bridge, "up"]);
        for i in 1..=count {
            let namespace = format!("k{tag}h{i}");
            let _ = Command::new("ip").args(["netns", "del", &namespace]).output();
            let (outside, inside) = (format!("kv{tag}h{i}"), format!("kp{tag}h{i}"));
            run(None, "ip", &["netns", "add", &namespace]);
            network.hosts.push(Host { address: format!("{subnet}.{i}"), namespace: Some(namespace.clone()) });
            run(None, "ip", &["link", "add", &outside, "type", "veth", "peer", "name", &inside]);
            run(None, "ip", &["link", "set", &inside, "netns", &namespace]);
            run(None, "ip", &["link", "set", &outside, "master", &bridge]);
            run(None, "ip", &["link", "set", &outside, "up"]);
            let ns = Some(namespace.as_str());
            run(ns, "ip", &["addr", "add", &format!("{subnet}.{i}/24"), "dev", &inside]);
            run(ns, "ip", &["link", "set", &inside, "up"]);
            run(ns, "ip", &["link", "set", "lo", "up"]);
        }
        network
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// Drops everything between host `i` and every other host, both ways
    /// (the test's own address still reaches it).
    pub fn isolate(&self, i: usize) {
        for j in (0..self.hosts.len()).filter(|&j| j != i) {
            self.cut(i, j);
        }
    }

    /// Drops everything between hosts `i` and `j`, both ways, in `i`'s
    /// namespace (its INPUT and OUTPUT chains).
    pub fn cut(&self, i: usize, j: usize) {
        let namespace = self.hosts[i].namespace.as_deref();
        let other = self.hosts[j].address.as_str();
        run(namespace, "iptables", &["-w", "-A", "INPUT", "-s", other, "-j", "DROP"]);
        run(namespace, "iptables", &["-w", "-A", "OUTPUT", "-d", other, "-j", "DROP"]);
    }

    /// Removes every cut made in host `i`'s namespace.
    pub fn heal(&self, i: usize) {
        run(self.hosts[i].namespace.as_deref(), "iptables", &["-w", "-F"]);
    }
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        // Deleting a namespace removes its end of the veth pair, and so
        // the pair; the bridge goes last.
        for host in &self.hosts {
            if let Some(namespace) = &host.namespace {
                let _ = Command::new("ip").args(["netns", "del", namespace]).output();
            }
        }
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).output();
    }
}
