//! A small HTTP/1.1 server for operators: `/metrics`, `/healthz` (the process answers),
//! `/readyz` (the node serves: caught up and, in a cluster, unfenced) and
//! `/debug/pprof/profile`.
//!
//! Written by hand on tokio rather than with hyper: three GET endpoints for scrapers and
//! humans do not need a full HTTP stack, and a minimal one is easy to bound. Each connection
//! carries one request and is answered with `Connection: close`; the request head is limited
//! to 8 KiB and must arrive within 10 s; request bodies are never read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, error, warn};

use super::metrics::Metrics;
use super::profile::{self, ProfileError};

/// Largest request head (request line and headers) accepted.
const MAX_HEAD: usize = 8 * 1024;
/// Time a client gets to send its whole request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client gets to take the whole response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are closed unanswered. Scrapers and operators need few,
/// and the cap keeps a misbehaving client from exhausting file descriptors the broker needs.
const MAX_CONNECTIONS: usize = 64;
const DEFAULT_PROFILE_SECONDS: u64 = 30;
const MAX_PROFILE_SECONDS: u64 = 300;
/// After answering, unread input from the client (a body we ignored, an oversized head) is
/// drained for up to this long and this much before closing: closing a socket with unread
/// data sends a reset, which can make the client discard the response it has not read yet.
const LINGER_TIME: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 * 1024;

/// Whether the node is ready to serve (`/readyz`), or why not.
pub type Readiness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What the endpoints answer from: the metrics, and the node's readiness.
#[derive(Clone)]
pub struct Endpoints {
    pub metrics: Arc<Metrics>,
    pub readiness: Readiness,
}

/// Serves HTTP on `listener` until `shutdown` becomes true (or its sender is dropped, after
/// which nobody could stop the server any more). Connections still open then are abandoned,
/// including a profile in progress.
pub async fn serve(listener: TcpListener, endpoints: Endpoints, shutdown: watch::Receiver<bool>) {
    serve_with(listener, endpoints, shutdown, HEAD_TIMEOUT).await;
}

async fn serve_with(
    listener: TcpListener,
    endpoints: Endpoints,
    mut shutdown: watch::Receiver<bool>,
    head_timeout: Duration,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        if *shutdown.borrow_and_update() {
            break;
        }
        tokio::select! {
            biased;
            changed = shutdown.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                        debug!(%peer, "too many HTTP connections, closing");
                        continue;
                    };
                    let endpoints = endpoints.clone();
                    connections.spawn(async move {
                        handle(stream, peer, &endpoints, head_timeout).await;
                        drop(permit);
                    });
                }
                Err(err) => {
                    // Typically out of file descriptors: back off instead of spinning on it.
                    warn!(error = %err, "accepting an HTTP connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(joined) = connections.join_next(), if !connections.is_empty() => {
                if let Err(err) = joined {
                    if err.is_panic() {
                        error!(error = %err, "HTTP connection task panicked");
                    }
                }
            }
        }
    }
    connections.shutdown().await;
}

/// Reads one request from `stream`, answers it and closes the connection.
async fn handle(mut stream: TcpStream, peer: SocketAddr, endpoints: &Endpoints, head_timeout: Duration) {
    let response = match tokio::time::timeout(head_timeout, read_head(&mut stream)).await {
        Err(_) => Response::text(408, "Request Timeout", "timed out reading the request\n"),
        Ok(Err(HeadError::Closed)) => return,
        Ok(Err(HeadError::Io(err))) => {
            debug!(%peer, error = %err, "reading an HTTP request");
            return;
        }
        Ok(Err(HeadError::TooLarge)) => {
            Response::text(431, "Request Header Fields Too Large", "request head over 8 KiB\n")
        }
        Ok(Ok(head)) => match parse_request(&head) {
            Ok(request) => route(&request, endpoints).await,
            Err(reason) => Response::text(400, "Bad Request", reason),
        },
    };
    match tokio::time::timeout(WRITE_TIMEOUT, response.write_to(&mut stream)).await {
        Ok(Ok(())) => linger(&mut stream).await,
        Ok(Err(err)) => debug!(%peer, error = %err, "writing an HTTP response"),
        Err(_) => debug!(%peer, "timed out writing an HTTP response"),
    }
}

#[derive(Debug)]
enum HeadError {
    /// The client closed the connection before sending a whole head.
    Closed,
    TooLarge,
    Io(std::io::Error),
}

/// Reads up to and including the blank line ending the request head.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let read = stream.read(&mut chunk).await.map_err(HeadError::Io)?;
        if read == 0 {
            return Err(HeadError::Closed);
        }
        // The terminator may straddle two reads: rescan the previous read's last bytes.
        let scan_from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..read]);
        if let Some(end) = head_end(&head, scan_from) {
            if end > MAX_HEAD {
                return Err(HeadError::TooLarge);
            }
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

/// The length of the head in `buf` if its blank line has arrived, looking at line ends from
/// `from` on. Bare LF line ends are accepted too, as RFC 9112 allows.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).filter(|&i| buf[i] == b'\n').find_map(|i| match &buf[i + 1..] {
        [b'\n', ..] => Some(i + 2),
        [b'\r', b'\n', ..] => Some(i + 3),
        _ => None,
    })
}

#[derive(Debug, PartialEq)]
struct Request<'a> {
    method: &'a str,
    path: &'a str,
    query: Option<&'a str>,
}

/// Parses the request line and checks the header lines' shape; no header is needed here.
fn parse_request(head: &[u8]) -> Result<Request<'_>, &'static str> {
    let head = std::str::from_utf8(head).map_err(|_| "request head is not UTF-8\n")?;
    let mut lines = head.split('\n').map(|line| line.strip_suffix('\r').unwrap_or(line));
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed request line\n");
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err("malformed method\n");
    }
    if !target.starts_with('/') {
        return Err("request target must be a path\n");
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err("only HTTP/1.0 and HTTP/1.1 are spoken here\n");
    }
    for line in lines.filter(|line| !line.is_empty()) {
        match line.split_once(':') {
            Some((name, _)) if !name.is_empty() && !name.contains([' ', '\t']) => {}
            _ => return Err("malformed header line\n"),
        }
    }
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    Ok(Request { method, path, query })
}

async fn route(request: &Request<'_>, endpoints: &Endpoints) -> Response {
    enum Endpoint {
        Metrics,
        Health,
        Ready,
        Profile,
    }
    let endpoint = match request.path {
        "/metrics" => Endpoint::Metrics,
        "/healthz" => Endpoint::Health,
        "/readyz" => Endpoint::Ready,
        "/debug/pprof/profile" => Endpoint::Profile,
        _ => return Response::text(404, "Not Found", "not found\n"),
    };
    if request.method != "GET" {
        return Response::text(405, "Method Not Allowed", "only GET is allowed\n").header("Allow", "GET");
    }
    match endpoint {
        Endpoint::Metrics => Response::new(200, "OK", prometheus::TEXT_FORMAT, endpoints.metrics.render().into_bytes()),
        Endpoint::Health => Response::text(200, "OK", "ok"),
        // A load balancer or orchestrator sends clients only to a node
        // that answers 200 here.
        Endpoint::Ready => match (endpoints.readiness)() {
            Ok(()) => Response::text(200, "OK", "ready\n"),
            Err(reason) => Response::new(
                503,
                "Service Unavailable",
                "text/plain; charset=utf-8",
                format!("not ready: {reason}\n").into_bytes(),
            ),
        },
        Endpoint::Profile => cpu_profile(request.query).await,
    }
}

async fn cpu_profile(query: Option<&str>) -> Response {
    let seconds = match profile_seconds(query) {
        Ok(seconds) => seconds,
        Err(reason) => return Response::text(400, "Bad Request", reason),
    };
    match profile::cpu_profile(Duration::from_secs(seconds)).await {
        Ok(body) => Response::new(200, "OK", "application/octet-stream", body)
            .header("Content-Disposition", "attachment; filename=\"profile.pb\""),
        Err(ProfileError::Busy) => Response::text(409, "Conflict", "a CPU profile is already running\n"),
        Err(err) => {
            warn!(error = %err, "CPU profile");
            Response::text(500, "Internal Server Error", "CPU profile failed\n")
        }
    }
}

/// The `seconds` query parameter: 30 when absent, otherwise 1 to 300.
fn profile_seconds(query: Option<&str>) -> Result<u64, &'static str> {
    let value = query.into_iter().flat_map(|query| query.split('&')).find_map(|pair| match pair.split_once('=') {
        Some(("seconds", value)) => Some(value),
        None if pair == "seconds" => Some(""),
        _ => None,
    });
    let Some(value) = value else { return Ok(DEFAULT_PROFILE_SECONDS) };
    match value.parse::<u64>() {
        Ok(seconds) if (1..=MAX_PROFILE_SECONDS).contains(&seconds) => Ok(seconds),
        _ => Err("seconds must be a whole number from 1 to 300\n"),
    }
}

struct Response {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    extra_header: Option<(&'static str, &'static str)>,
    body: Vec<u8>,
}

impl Response {
    fn new(status: u16, reason: &'static str, content_type: &'static str, body: Vec<u8>) -> Self {
        Response { status, reason, content_type, extra_header: None, body }
    }

    fn text(status: u16, reason: &'static str, body: &'static str) -> Self {
        Self::new(status, reason, "text/plain; charset=utf-8", body.as_bytes().to_vec())
    }

    fn header(self, name: &'static str, value: &'static str) -> Self {
        Response { extra_header: Some((name, value)), ..self }
    }

    /// Writes the response in one piece and half-closes the connection.
    async fn write_to(&self, stream: &mut TcpStream) -> std::io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            self.reason,
            self.content_type,
            self.body.len()
        );
        if let Some((name, value)) = self.extra_header {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = Vec::with_capacity(head.len() + self.body.len());
        bytes.extend_from_slice(head.as_bytes());
        bytes.extend_from_slice(&self.body);
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    }
}

/// Discards what the client still sends, until it closes or a limit is reached (see
/// [`LINGER_TIME`]).
async fn linger(stream: &mut TcpStream) {
    let drain = async {
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < LINGER_BYTES {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(read) => drained += read,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use pprof::protos::Message as _;
    use tokio::task::JoinHandle;

    use super::*;

    struct Server {
        addr: SocketAddr,
        metrics: Arc<Metrics>,
        shutdown: watch::Sender<bool>,
        task: JoinHandle<()>,
    }

    async fn start(head_timeout: Duration) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let metrics = Arc::new(Metrics::new());
        let (shutdown, receiver) = watch::channel(false);
        let task = tokio::spawn(serve_with(listener, always_ready(Arc::clone(&metrics)), receiver, head_timeout));
        Server { addr, metrics, shutdown, task }
    }

    fn always_ready(metrics: Arc<Metrics>) -> Endpoints {
        Endpoints { metrics, readiness: Arc::new(|| Ok(())) }
    }

    struct Reply {
        status: String,
        head: String,
        body: Vec<u8>,
    }

    /// Sends `raw` on a fresh connection and reads the reply until the server closes.
    async fn exchange(addr: SocketAddr, raw: &[u8]) -> Reply {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(raw).await.expect("send request");
        read_reply(&mut stream).await
    }

    async fn read_reply(stream: &mut TcpStream) -> Reply {
        let mut bytes = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut bytes))
            .await
            .expect("reply in time")
            .expect("read reply");
        let split = bytes.windows(4).position(|window| window == b"\r\n\r\n").expect("a response head");
        let head = String::from_utf8(bytes[..split].to_vec()).expect("ASCII head");
        let body = bytes[split + 4..].to_vec();
        assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())), "{head}");
        assert!(head.contains("\r\nConnection: close"), "{head}");
        let status = head.lines().next().unwrap_or_default().to_string();
        Reply { status, head, body }
    }

    async fn get(addr: SocketAddr, target: &str) -> Reply {
        exchange(addr, format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes()).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_and_health() {
        let server = start(HEAD_TIMEOUT).await;
        server.metrics.request_completed("Produce", 0, Duration::from_millis(2));
        server.metrics.bytes_in("orders", 42);

        let reply = get(server.addr, "/metrics").await;
        assert_eq!(reply.status, "HTTP/1.1 200 OK");
        assert!(reply.head.contains("\r\nContent-Type: text/plain; version=0.0.4\r\n"), "{}", reply.head);
        let body = String::from_utf8(reply.body).expect("UTF-8 metrics");
        assert!(body.contains("kafka_requests_total{api=\"Produce\"} 1\n"), "{body}");
        assert!(body.contains("kafka_topic_bytes_in_total{topic=\"orders\"} 42\n"), "{body}");

        let reply = get(server.addr, "/healthz").await;
        assert_eq!(reply.status, "HTTP/1.1 200 OK");
        assert_eq!(reply.body, b"ok");

        // HTTP/1.0 with bare LF line ends, the head split over several writes.
        let mut stream = TcpStream::connect(server.addr).await.expect("connect");
        for piece in ["GET /hea", "lthz HTTP/1.0\n", "User-Agent: test\n", "\n"] {
            stream.write_all(piece.as_bytes()).await.expect("send");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let reply = read_reply(&mut stream).await;
        assert_eq!(reply.status, "HTTP/1.1 200 OK");
        assert_eq!(reply.body, b"ok");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn client_errors() {
        let server = start(HEAD_TIMEOUT).await;
        assert_eq!(get(server.addr, "/nope").await.status, "HTTP/1.1 404 Not Found");
        assert_eq!(get(server.addr, "/metrics/extra").await.status, "HTTP/1.1 404 Not Found");

        let reply = exchange(server.addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello").await;
        assert_eq!(reply.status, "HTTP/1.1 405 Method Not Allowed");
        assert!(reply.head.contains("\r\nAllow: GET"), "{}", reply.head);
        let reply = exchange(server.addr, b"HEAD /healthz HTTP/1.1\r\n\r\n").await;
        assert_eq!(reply.status, "HTTP/1.1 405 Method Not Allowed");

        for bad in [
            &b"garbage\r\n\r\n"[..],
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/2.0\r\n\r\n",
            b"GET http://localhost/metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nX-Bytes: \xff\r\n\r\n",
        ] {
            let reply = exchange(server.addr, bad).await;
            assert_eq!(reply.status, "HTTP/1.1 400 Bad Request", "{}", String::from_utf8_lossy(bad));
        }

        let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while big.len() <= MAX_HEAD {
            big.extend_from_slice(b"X-Padding: 0123456789012345678901234567890123456789\r\n");
        }
        big.extend_from_slice(b"\r\n");
        let reply = exchange(server.addr, &big).await;
        assert_eq!(reply.status, "HTTP/1.1 431 Request Header Fields Too Large");

        for bad in ["abc", "0", "301", "", "-1", "1.5"] {
            let reply = get(server.addr, &format!("/debug/pprof/profile?seconds={bad}")).await;
            assert_eq!(reply.status, "HTTP/1.1 400 Bad Request", "seconds={bad}");
        }
        assert_eq!(get(server.addr, "/debug/pprof/profile?seconds").await.status, "HTTP/1.1 400 Bad Request");
    }

    #[test]
    fn seconds_parameter() {
        assert_eq!(profile_seconds(None), Ok(DEFAULT_PROFILE_SECONDS));
        assert_eq!(profile_seconds(Some("debug=1")), Ok(DEFAULT_PROFILE_SECONDS));
        assert_eq!(profile_seconds(Some("debug=1&seconds=300")), Ok(300));
        assert_eq!(profile_seconds(Some("seconds=1")), Ok(1));
        assert!(profile_seconds(Some("seconds=1000000000000000000000")).is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_clients_time_out() {
        let server = start(Duration::from_millis(300)).await;
        let mut silent = TcpStream::connect(server.addr).await.expect("connect");
        let mut partial = TcpStream::connect(server.addr).await.expect("connect");
        partial.write_all(b"GET /metr").await.expect("send");
        // The server keeps answering others meanwhile.
        assert_eq!(get(server.addr, "/healthz").await.status, "HTTP/1.1 200 OK");
        assert_eq!(read_reply(&mut silent).await.status, "HTTP/1.1 408 Request Timeout");
        assert_eq!(read_reply(&mut partial).await.status, "HTTP/1.1 408 Request Timeout");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cpu_profile_and_conflict() {
        let server = start(HEAD_TIMEOUT).await;
        // Burn CPU in a plain thread so the profile has samples to report.
        let stop = Arc::new(AtomicBool::new(false));
        let burner = std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || {
                let mut x = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
                    }
                }
                x
            }
        });

        let addr = server.addr;
        let first = tokio::spawn(async move { get(addr, "/debug/pprof/profile?seconds=1").await });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !profile::is_profiling() {
            assert!(tokio::time::Instant::now() < deadline, "the profile never started");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let second = get(addr, "/debug/pprof/profile?seconds=1").await;
        assert_eq!(second.status, "HTTP/1.1 409 Conflict");

        let reply = first.await.expect("first profile request");
        stop.store(true, Ordering::Relaxed);
        let _ = burner.join();
        assert_eq!(reply.status, "HTTP/1.1 200 OK");
        assert!(reply.head.contains("\r\nContent-Type: application/octet-stream\r\n"), "{}", reply.head);
        assert!(!reply.body.is_empty());
        let profile = pprof::protos::Profile::decode(reply.body.as_slice()).expect("a pprof profile");
        assert!(!profile.sample.is_empty(), "no samples in the profile");
        assert!(profile.string_table.iter().any(|s| s == "cpu"), "{:?}", profile.sample_type);
        assert!(!profile::is_profiling(), "the profile slot was released");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_stops_serving() {
        let server = start(HEAD_TIMEOUT).await;
        // An idle connection must not hold shutdown up.
        let _idle = TcpStream::connect(server.addr).await.expect("connect");
        assert_eq!(get(server.addr, "/healthz").await.status, "HTTP/1.1 200 OK");
        server.shutdown.send(true).expect("server is listening");
        tokio::time::timeout(Duration::from_secs(5), server.task)
            .await
            .expect("serve returned after shutdown")
            .expect("serve did not panic");
        assert!(TcpStream::connect(server.addr).await.is_err(), "listener closed");

        // Dropping the sender stops the server too, instead of leaving it unstoppable.
        let server = start(HEAD_TIMEOUT).await;
        drop(server.shutdown);
        tokio::time::timeout(Duration::from_secs(5), server.task)
            .await
            .expect("serve returned after the sender was dropped")
            .expect("serve did not panic");

        // Already true before serve starts: return at once.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (_sender, receiver) = watch::channel(true);
        tokio::time::timeout(Duration::from_secs(5), serve(listener, always_ready(Arc::new(Metrics::new())), receiver))
            .await
            .expect("serve returned at once");
    }

    #[test]
    fn head_ends() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nbody", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r", 0), None);
    }
}
