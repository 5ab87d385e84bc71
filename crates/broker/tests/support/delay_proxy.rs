//! Slow links between test hosts: `tc netem` is not in this kernel, so a
//! small userspace proxy adds the delay. In one host's namespace, iptables
//! NAT sends every TCP connection between it and the chosen peers (both
//! ways) to a proxy listening there, which finds where each was going
//! (`SO_ORIGINAL_DST`), connects on (its own connections marked, so the
//! rules let them by) and holds every chunk it relays for the delay, each
//! direction in order. Connections open before the rules are aborted
//! (`ss -K`, at both ends), so that the nodes reconnect through the proxy; healing lets
//! new connections go straight while the proxied ones go on undelayed.
//! Needs root.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::netns::TestNetwork;

/// The firewall mark of the proxy's own connections.
const PROXY_MARK: libc::c_int = 0x4b;

/// Links of one host made slow; [`SlowLinks::heal`] makes them fast again.
pub struct SlowLinks {
    namespace: String,
    peers: Vec<String>,
    shared: Arc<Shared>,
}

struct Shared {
    delay_us: AtomicU64,
    stop: AtomicBool,
    /// Connections relayed, and chunks held back: a slow link nothing
    /// crossed was no fault.
    relayed: AtomicUsize,
    held: AtomicUsize,
}

impl SlowLinks {
    /// Delays everything between host `host` of `network` and hosts
    /// `peers` by `delay` each way, from now on.
    pub fn start(network: &TestNetwork, host: usize, peers: &[usize], delay: Duration) -> Self {
        let namespace = network.hosts()[host].namespace.clone().expect("a host of its own");
        let address = network.hosts()[host].address.clone();
        let peer_namespaces: Vec<String> =
            peers.iter().map(|&p| network.hosts()[p].namespace.clone().expect("a host of its own")).collect();
        let peers: Vec<String> = peers.iter().map(|&p| network.hosts()[p].address.clone()).collect();
        let shared = Arc::new(Shared {
            delay_us: AtomicU64::new(delay.as_micros() as u64),
            stop: AtomicBool::new(false),
            relayed: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
        });
        let (port_tx, port_rx) = mpsc::channel();
        let accepting = Arc::clone(&shared);
        let in_namespace = namespace.clone();
        std::thread::spawn(move || {
            enter_namespace(&in_namespace);
            let listener = TcpListener::bind("0.0.0.0:0").expect("the proxy's port");
            port_tx.send(listener.local_addr().unwrap().port()).unwrap();
            accept_loop(&listener, &accepting);
        });
        let port = port_rx.recv_timeout(Duration::from_secs(10)).expect("the proxy listening").to_string();
        let mark = format!("{PROXY_MARK:#x}");
        // An earlier slow spell's rules go (its connections are aborted below).
        run(&namespace, "iptables", &["-w", "-t", "nat", "-F"]);
        for peer in &peers {
            let outgoing = ["-d", peer, "-m", "mark", "!", "--mark", &mark];
            iptables(&namespace, "OUTPUT", &outgoing, &port);
            iptables(&namespace, "PREROUTING", &["-s", peer], &port);
        }
        // Open connections would keep going straight: abort them, at both
        // ends (the reset one end sends is not always seen by the other,
        // which would then wait out its request timeout).
        for (peer, peer_namespace) in peers.iter().zip(&peer_namespaces) {
            run(&namespace, "ss", &["-K", "dst", peer]);
            run(peer_namespace, "ss", &["-K", "dst", &address]);
        }
        SlowLinks { namespace, peers, shared }
    }

    /// Removes the rules and the delay: new connections go straight, the
    /// ones through the proxy go on without waiting. Panics when no
    /// connection crossed the slow links.
    pub fn heal(self) {
        // New connections go straight. The rules stay: without them the
        // connections already redirected stop being translated and hang.
        for chain in ["OUTPUT", "PREROUTING"] {
            run(&self.namespace, "iptables", &["-w", "-t", "nat", "-I", chain, "1", "-j", "ACCEPT"]);
        }
        self.shared.delay_us.store(0, Ordering::Relaxed);
        self.shared.stop.store(true, Ordering::Relaxed);
        let relayed = self.shared.relayed.load(Ordering::Relaxed);
        let held = self.shared.held.load(Ordering::Relaxed);
        assert!(relayed > 0 && held > 0, "nothing between {} and {:?} was held back", self.namespace, self.peers);
        eprintln!("slow links of {}: {relayed} connections through the proxy, {held} chunks held", self.namespace);
    }
}

fn iptables(namespace: &str, chain: &str, matches: &[&str], port: &str) {
    let mut args = vec!["-w", "-t", "nat", "-A", chain, "-p", "tcp"];
    args.extend_from_slice(matches);
    args.extend_from_slice(&["-j", "REDIRECT", "--to-ports", port]);
    run(namespace, "iptables", &args);
}

fn run(namespace: &str, program: &str, args: &[&str]) {
    let output = std::process::Command::new("ip")
        .args(["netns", "exec", namespace, program])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(output.status.success(), "{program} {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}

/// Moves the calling thread (and the threads it starts) into `namespace`.
fn enter_namespace(namespace: &str) {
    let file = std::fs::File::open(format!("/var/run/netns/{namespace}")).expect("the namespace");
    // SAFETY: setns on a file descriptor we own; it changes this thread only.
    let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    listener.set_nonblocking(true).unwrap();
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((inbound, _)) => {
                inbound.set_nonblocking(false).unwrap();
                let Some(outbound) = original_destination(&inbound).and_then(|to| connect_marked(to).ok()) else {
                    continue;
                };
                shared.relayed.fetch_add(1, Ordering::Relaxed);
                relay(inbound, outbound, shared);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Where a redirected connection was going.
fn original_destination(stream: &TcpStream) -> Option<SocketAddrV4> {
    // SAFETY: getsockopt fills at most `len` bytes of `addr`.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let found = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_IP,
            libc::SO_ORIGINAL_DST,
            (&mut addr as *mut libc::sockaddr_in).cast(),
            &mut len,
        )
    };
    (found == 0).then(|| SocketAddrV4::new(u32::from_be(addr.sin_addr.s_addr).into(), u16::from_be(addr.sin_port)))
}

/// A connection to `to` carrying the proxy's mark.
fn connect_marked(to: SocketAddrV4) -> std::io::Result<TcpStream> {
    // SAFETY: a new socket, owned by the TcpStream at once; setsockopt and
    // connect are given buffers of the sizes they are told.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let mark = PROXY_MARK;
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        if libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_MARK, (&mark as *const libc::c_int).cast(), size) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = to.port().to_be();
        addr.sin_addr.s_addr = u32::from(*to.ip()).to_be();
        let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::connect(fd, (&addr as *const libc::sockaddr_in).cast(), size) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// Relays both ways between `a` and `b`, each chunk held for the delay.
fn relay(a: TcpStream, b: TcpStream, shared: &Arc<Shared>) {
    let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    delayed_pump(a, b, Arc::clone(shared));
    delayed_pump(b2, a2, Arc::clone(shared));
}

/// Reads `from` and writes to `to` what it read, each chunk once the delay
/// after it arrived has passed; closes `to`'s writing side at `from`'s end.
fn delayed_pump(mut from: TcpStream, mut to: TcpStream, shared: Arc<Shared>) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let reading = from.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buffer) {
            if tx.send((Instant::now(), buffer[..n].to_vec())).is_err() {
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Read);
    });
    std::thread::spawn(move || {
        for (arrived, chunk) in rx {
            let delay_us = shared.delay_us.load(Ordering::Relaxed);
            if delay_us > 0 {
                shared.held.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep((arrived + Duration::from_micros(delay_us)).saturating_duration_since(Instant::now()));
            if to.write_all(&chunk).is_err() {
                // The far end is gone: so is this direction's near end.
                let _ = reading.shutdown(Shutdown::Both);
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
