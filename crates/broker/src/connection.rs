//! One client connection: size-prefixed request frames in, responses out in
//! request order.
//!
//! The reader runs each request's handler in turn (so one producer's batches
//! reach the log in the order it sent them), and hands the writer either a
//! finished response or a task still working on one (a long-polling fetch).
//! The writer sends responses strictly in request order; a fetch parked for
//! `fetch.max.wait.ms` therefore never stalls the requests read after it from
//! being handled, only their responses from overtaking it. Fetched records go
//! from segment files to the socket with sendfile(2), or through TLS
//! (transport.rs).
//!
//! A connection ends when the client closes it, when it has neither read
//! nor written for `connections.max.idle.ms`, or on a protocol error; the
//! work still running for its requests (parked fetches, JoinGroup and
//! SyncGroup waits) is then aborted, so no wait outlives its connection. A
//! broker shutting down instead lets in-flight requests finish.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use krabka_protocol::frame::{FrameError, RequestFrame};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::authentication::{Admission, Authenticator};
use crate::broker::Broker;
use crate::config::security::ClientListener;
use crate::cpu_time::CpuTimed;
use crate::handlers;
use crate::observability::FailureKind;
use crate::request::{Chunk, Close, ConnectionInfo, Reply, Response, REQUEST_QUOTA_EXEMPT};
use crate::transport::{self, AcceptError, RequestReader, ResponseWriter};

/// Requests read ahead of the writer, per connection: bounds the memory one
/// pipelining client can hold (Kafka's clients keep at most five in flight).
const MAX_QUEUED_RESPONSES: usize = 32;

pub async fn serve(stream: TcpStream, peer: SocketAddr, broker: Arc<Broker>, listener: Arc<ClientListener>) {
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms.max(1) as u64);
    let (transport, transport_principal) = match transport::accept(stream, &listener, idle).await {
        Ok(accepted) => accepted,
        Err(AcceptError::AuthenticationFailed(reason)) => {
            tracing::info!(%peer, %reason, "failed authentication");
            broker.metrics.failed_authentication();
            return;
        }
        Err(AcceptError::Closed(reason)) => {
            tracing::debug!(%peer, %reason, "closing connection");
            return;
        }
    };
    let (reader, writer) = transport.split();
    let (tx, rx) = mpsc::channel(MAX_QUEUED_RESPONSES);
    let activity = Arc::new(Activity::new());
    // Set when the client is gone: parked requests (long polls, group
    // waits) are dropped then, not left holding the socket until they expire.
    let (gone, gone_signal) = watch::channel(false);
    let writer_task = tokio::spawn(write_loop(writer, rx, Arc::clone(&activity), gone_signal));
    let max_reauth_ms = broker.config.security.connections_max_reauth_ms;
    let authenticator = Authenticator::new(listener, max_reauth_ms, transport_principal);
    match read_loop(reader, &broker, peer, authenticator, tx, &activity).await {
        // A broker shutting down lets the writer finish in-flight requests;
        // a failed authentication's answer is sent before the close.
        Ok(ReadEnd::Shutdown) => {}
        Ok(ReadEnd::AuthenticationFailed(reason)) => {
            tracing::info!(%peer, %reason, "failed authentication");
            broker.metrics.failed_authentication();
        }
        Ok(ReadEnd::ClientClosed) => {
            let _ = gone.send(true);
        }
        Err(close) => {
            match close.failure {
                Some(kind) => broker.metrics.failures().record(kind, &format_args!("{peer}: {}", close.reason)),
                None => tracing::debug!(%peer, reason = %close.reason, "closing connection"),
            }
            let _ = gone.send(true);
        }
    }
    match writer_task.await {
        Ok(Err(e)) if e.kind() != io::ErrorKind::BrokenPipe && e.kind() != io::ErrorKind::ConnectionReset => {
            tracing::debug!(%peer, error = %e, "connection write failed")
        }
        _ => {}
    }
}

/// Why the read loop stopped without an error.
enum ReadEnd {
    /// The client closed its side (EOF between frames).
    ClientClosed,
    /// The broker is shutting down.
    Shutdown,
    /// The client failed to authenticate; its answer is queued.
    AuthenticationFailed(String),
}

/// When the connection last read or wrote: `connections.max.idle.ms`
/// counts from either, as Kafka's selector does, so a connection waiting
/// only on a parked request is idle.
struct Activity {
    since: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity { since: Instant::now(), last_ms: AtomicU64::new(0) }
    }

    fn touch(&self) {
        self.last_ms.store(self.since.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(last)
    }
}

/// Extra room asked of the kernel beyond the frame being read, so the next
/// small pipelined requests usually arrive in the same read.
const READ_AHEAD_BYTES: usize = 4 * 1024;

/// Reads into `buf` until it holds `wanted` bytes. Ok(false) on a clean EOF
/// before any byte of a new frame; Err on a frame cut short.
async fn fill(
    reader: &mut RequestReader,
    buf: &mut BytesMut,
    wanted: usize,
    activity: &Activity,
) -> Result<bool, Close> {
    while buf.len() < wanted {
        // An idle connection waits for a size prefix with a tiny buffer;
        // a frame's body gets its full size plus some read-ahead.
        let ahead = if wanted <= 4 { 0 } else { READ_AHEAD_BYTES };
        buf.reserve(wanted - buf.len() + ahead);
        match reader.read_buf(buf).await {
            Ok(0) if buf.is_empty() => return Ok(false),
            Ok(0) => return Err(Close::routine("truncated request")),
            Ok(_) => activity.touch(),
            Err(e) => return Err(Close::routine(format!("read failed: {e}"))),
        }
    }
    Ok(true)
}

/// Waits for the next frame's size prefix; fails once the connection has
/// neither read nor written for `idle`.
async fn next_size_prefix(
    reader: &mut RequestReader,
    buf: &mut BytesMut,
    activity: &Activity,
    idle: Duration,
) -> Result<bool, Close> {
    loop {
        let quiet = activity.idle_for();
        if quiet >= idle {
            return Err(Close::routine("idle past connections.max.idle.ms"));
        }
        // `fill` keeps what it read in `buf` when the timeout drops it.
        if let Ok(read) = tokio::time::timeout(idle - quiet, fill(reader, buf, 4, activity)).await {
            return read;
        }
    }
}

async fn read_loop(
    mut reader: RequestReader,
    broker: &Arc<Broker>,
    peer: SocketAddr,
    mut authenticator: Authenticator,
    tx: mpsc::Sender<Reply>,
    activity: &Activity,
) -> Result<ReadEnd, Close> {
    let security = &broker.config.security;
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms.max(1) as u64);
    let mut shutdown = broker.shutdown_signal();
    // Frames are split off this buffer without copying; request bodies
    // (record batches included) stay slices of it until handled.
    let mut buf = BytesMut::new();
    let mut info = ConnectionInfo {
        peer,
        forwarded: false,
        listener_name: authenticator.listener_name().into(),
        principal: authenticator.principal(),
        authorized: true,
        throttle_ms: Arc::default(),
        request_throttle_ms: Arc::default(),
    };
    loop {
        tokio::select! {
            read = next_size_prefix(&mut reader, &mut buf, activity, idle) => match read {
                Ok(true) => {}
                Ok(false) => return Ok(ReadEnd::ClientClosed),
                Err(close) => return Err(close),
            },
            _ = shutdown.wait_for(|stop| *stop) => return Ok(ReadEnd::Shutdown),
        }
        let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let max_bytes = authenticator
            .max_frame_bytes(broker.config.socket_request_max_bytes, security.sasl_server_max_receive_size);
        if size < 0 || size as u32 > max_bytes {
            // Kafka's InvalidReceiveException: the frame cannot be skipped safely.
            return Err(Close::failure(
                FailureKind::InvalidFrame,
                format!("request size {size} is outside [0, {max_bytes}] (socket.request.max.bytes, or sasl.server.max.receive.size before authentication)"),
            ));
        }
        if !fill(&mut reader, &mut buf, 4 + size as usize, activity).await? {
            return Err(Close::routine("truncated request"));
        }
        buf.advance(4);
        let frame = buf.split_to(size as usize).freeze();
        if buf.is_empty() {
            // Nothing pipelined behind this frame: let the frame own the
            // allocation, so an idle connection keeps no read buffer.
            buf = BytesMut::new();
        }
        let reply = match admit(&mut authenticator, frame, broker) {
            Ok(Admission::Serve(request)) => serve_within_request_quota(broker, &info, request).await?,
            Ok(Admission::Answer(answer)) => {
                if authenticator.take_completed() {
                    info.principal = authenticator.principal();
                    broker.metrics.authenticated();
                    tracing::debug!(%peer, principal = %info.principal, "authenticated");
                }
                Reply::Now(Response::from_bytes(answer))
            }
            Ok(Admission::Fail { answer, reason }) => {
                // Held before the answer and the close (KIP-306), to slow
                // down a client guessing passwords.
                tokio::time::sleep(Duration::from_millis(security.failed_authentication_delay_ms)).await;
                if let Some(answer) = answer {
                    let _ = tx.send(Reply::Now(Response::from_bytes(answer))).await;
                }
                return Ok(ReadEnd::AuthenticationFailed(reason));
            }
            Ok(Admission::Close(close)) => return Err(close),
            Err(FrameError::UnsupportedVersion { api_key, api_version, correlation_id }) => {
                handlers::unsupported_version(broker, api_key, api_version, correlation_id)?
            }
            Err(e) => return Err(Close::failure(FailureKind::InvalidFrame, format!("invalid request: {e}"))),
        };
        if tx.send(reply).await.is_err() {
            return Err(Close::routine("writer gone"));
        }
        // A client over its quota: read nothing more for the throttle time
        // (Kafka mutes the channel once the response is out).
        let mute = info.throttle_ms.swap(0, Ordering::Relaxed);
        if mute > 0 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(mute)) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Ok(ReadEnd::Shutdown),
            }
        }
    }
}

/// Serves a request, under its client's request quota if one applies
/// (KIP-124): the response announces, and the connection waits, the
/// throttle the CPU time of the client's earlier requests calls for; this
/// request's own CPU time (its handler's polls, not its waits) is then
/// recorded. Requests other nodes forward are not counted.
async fn serve_within_request_quota(
    broker: &Arc<Broker>,
    info: &ConnectionInfo,
    request: RequestFrame,
) -> Result<Reply, Close> {
    if info.forwarded || !broker.client_quotas.any_quota() {
        return handlers::handle(broker, info, request).await;
    }
    let image = broker.metadata.image();
    let client_id = request.header.client_id.as_deref().unwrap_or_default();
    let Some(quota) = broker.client_quotas.request_quota(&image, (&info.principal, client_id)) else {
        return handlers::handle(broker, info, request).await;
    };
    let now = crate::clock::now_ms();
    let throttle_ms = quota.throttle_ms(now);
    info.request_throttle_ms.store(throttle_ms, Ordering::Relaxed);
    let (reply, cpu_nanos) = CpuTimed::new(handlers::handle(broker, info, request)).await;
    if info.request_throttle_ms.swap(0, Ordering::Relaxed) != REQUEST_QUOTA_EXEMPT {
        info.throttle(throttle_ms);
        quota.record(cpu_nanos, now);
    }
    reply
}

/// Parses `frame` (unless it is a raw SASL token) and lets the
/// authenticator gate it.
fn admit(authenticator: &mut Authenticator, frame: Bytes, broker: &Broker) -> Result<Admission, FrameError> {
    // The image is read only when a mechanism looks a credential up.
    let image = || broker.metadata.image();
    if authenticator.expects_raw_token() {
        return Ok(authenticator.raw_token(&frame, &image));
    }
    let request = RequestFrame::parse(frame)?;
    Ok(authenticator.admit(request, &image))
}

async fn write_loop(
    mut writer: ResponseWriter,
    mut rx: mpsc::Receiver<Reply>,
    activity: Arc<Activity>,
    mut gone: watch::Receiver<bool>,
) -> io::Result<()> {
    loop {
        let reply = tokio::select! {
            biased;
            _ = gone.wait_for(|gone| *gone) => {
                abandon_queued(&mut rx);
                return Ok(());
            }
            reply = rx.recv() => match reply {
                Some(reply) => reply,
                None => break,
            },
        };
        let response = match reply {
            Reply::Now(response) => response,
            Reply::Later(mut task) => tokio::select! {
                done = &mut task => match done {
                    Ok(response) => response,
                    Err(e) => return Err(io::Error::other(format!("request task failed: {e}"))),
                },
                _ = gone.wait_for(|gone| *gone) => {
                    task.abort();
                    abandon_queued(&mut rx);
                    return Ok(());
                }
            },
            Reply::Nothing => continue,
        };
        for chunk in response.chunks {
            match chunk {
                Chunk::Bytes(bytes) => writer.write_bytes(&bytes).await?,
                Chunk::File(slice) => writer.write_file(&slice).await?,
            }
            activity.touch();
        }
        writer.flush().await?;
    }
    writer.shutdown().await
}

/// The client is gone: stops the work still running for its queued
/// requests (a dropped JoinHandle would let it run on).
fn abandon_queued(rx: &mut mpsc::Receiver<Reply>) {
    rx.close();
    while let Ok(reply) = rx.try_recv() {
        if let Reply::Later(task) = reply {
            task.abort();
        }
    }
}
