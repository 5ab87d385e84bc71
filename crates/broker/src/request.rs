//! The leaf types of request handling, shared by the connection that reads
//! frames and writes responses and the handlers that serve them: what a
//! handler is given (`RequestContext`, `ConnectionInfo`) and what it gives
//! back (`Reply`, `Response` in `Chunk`s, or `Close`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use krabka_log::FileSlice;
use krabka_protocol::frame::RequestFrame;
use krabka_protocol::{ApiKey, ResponseBody};
use krabka_security::KafkaPrincipal;
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::observability::FailureKind;
use crate::wire::encode_frame;

/// A piece of a response frame.
pub enum Chunk {
    Bytes(Bytes),
    /// Record bytes sent straight from a segment file.
    File(FileSlice),
}

/// A complete response frame (size prefix included), in pieces.
pub struct Response {
    pub chunks: Vec<Chunk>,
}

impl Response {
    pub fn from_bytes(bytes: Bytes) -> Self {
        Response { chunks: vec![Chunk::Bytes(bytes)] }
    }
}

/// What a handler gives the writer.
pub enum Reply {
    Now(Response),
    /// A response still being worked on (long poll).
    Later(JoinHandle<Response>),
    /// No response at all (produce with acks=0).
    Nothing,
}

/// Why the connection must close (Kafka closes rather than answering).
#[derive(Debug)]
pub struct Close {
    pub reason: String,
    /// Set when the close is a failure to count (a bad or unserved request),
    /// not a client going away or idling.
    pub failure: Option<FailureKind>,
}

impl Close {
    pub fn routine(reason: impl Into<String>) -> Self {
        Close { reason: reason.into(), failure: None }
    }

    pub fn failure(kind: FailureKind, reason: impl Into<String>) -> Self {
        Close { reason: reason.into(), failure: Some(kind) }
    }
}

/// Connection details handlers may use.
pub struct ConnectionInfo {
    pub peer: SocketAddr,
    /// The request came forwarded in an Envelope (`peer` is the client
    /// the forwarding broker named): it is answered here, never forwarded
    /// again, so two nodes that each take the other for the controller
    /// cannot pass a request back and forth.
    pub forwarded: bool,
    /// The listener the request came in on: Metadata and FindCoordinator
    /// name each broker by its endpoint of this name, as Kafka does.
    pub listener_name: Arc<str>,
    /// Who sent it (ANONYMOUS on a PLAINTEXT listener; for a forwarded
    /// request, the principal its Envelope names).
    pub principal: KafkaPrincipal,
    /// Whether its requests are checked against the ACLs under an
    /// authorizer (all but another node's own requests to the controller).
    pub authorized: bool,
    /// How long the connection reads nothing more once the current
    /// response is out (KIP-219): set by a handler whose client went over
    /// its quota, possibly from a task answering later.
    pub throttle_ms: Arc<AtomicU64>,
    /// The request quota's throttle (KIP-124) of the request being served,
    /// which its response announces (0: none).
    pub request_throttle_ms: Arc<AtomicU64>,
}

impl ConnectionInfo {
    /// A request that came from another broker: in an Envelope, or sent to
    /// the controller listener directly. `listener_name` is the listener
    /// whose endpoints its answer names.
    /// A request forwarded in an Envelope on behalf of `principal` (None:
    /// the other node acting for itself, sent straight to the controller
    /// listener, which is not checked against ACLs).
    pub fn forwarded(peer: SocketAddr, listener_name: &str, principal: Option<KafkaPrincipal>) -> Self {
        ConnectionInfo {
            peer,
            forwarded: true,
            listener_name: listener_name.into(),
            authorized: principal.is_some(),
            principal: principal.unwrap_or_else(KafkaPrincipal::anonymous),
            throttle_ms: Arc::default(),
            request_throttle_ms: Arc::default(),
        }
    }

    /// Mutes the connection for `ms` after the current response (the
    /// longest of the throttles asked for wins).
    pub fn throttle(&self, ms: u64) {
        if ms > 0 {
            self.throttle_ms.fetch_max(ms, Ordering::Relaxed);
        }
    }
}

/// The tracing target of the errors clients see: at DEBUG each is logged
/// with the API, client, principal, address, topic and partition
/// (`KRABKA_LOG=info,krabka_broker::client_errors=debug`).
pub const CLIENT_ERRORS: &str = "krabka_broker::client_errors";

/// Who a response goes to, for the log of the errors it carries; built
/// only while [`CLIENT_ERRORS`] is enabled at DEBUG.
#[derive(Clone, Debug)]
pub struct ErrorAudience {
    api: &'static str,
    client_id: String,
    principal: String,
    peer: SocketAddr,
}

impl ErrorAudience {
    /// The request's audience, when each error is to be logged.
    pub fn of(ctx: &RequestContext<'_>) -> Option<Self> {
        if !tracing::enabled!(target: CLIENT_ERRORS, tracing::Level::DEBUG) {
            return None;
        }
        Some(ErrorAudience {
            api: ctx.api_key.info().name,
            client_id: ctx.client_id.unwrap_or_default().to_string(),
            principal: ctx.connection.principal.to_string(),
            peer: ctx.connection.peer,
        })
    }

    /// Logs one error the client is told.
    pub fn log(&self, topic: Option<&str>, partition: Option<i32>, code: i16) {
        tracing::debug!(
            target: CLIENT_ERRORS,
            api = self.api,
            client_id = %self.client_id,
            principal = %self.principal,
            peer = %self.peer,
            topic = topic.unwrap_or_default(),
            partition = partition.unwrap_or(-1),
            error = krabka_protocol::ErrorCode::from(code).name(),
            "error answered"
        );
    }
}

/// Counts (and, for `audience`, logs) each error `body` carries.
pub fn report_errors(
    metrics: &crate::observability::Metrics,
    audience: Option<&ErrorAudience>,
    api: &'static str,
    body: &ResponseBody,
) {
    body.for_each_error(&mut |e| {
        metrics.client_error(api, e.code);
        if let Some(audience) = audience {
            audience.log(e.topic, e.partition, e.code);
        }
    });
}

/// `ConnectionInfo::request_throttle_ms` of a request exempt from the
/// request quota.
pub const REQUEST_QUOTA_EXEMPT: u64 = u64::MAX;

/// What a handler knows about the request it serves.
pub struct RequestContext<'a> {
    pub broker: &'a Arc<Broker>,
    pub connection: &'a ConnectionInfo,
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<&'a str>,
    pub started: Instant,
}

impl<'a> RequestContext<'a> {
    /// The context of `request`, served from now.
    pub fn of(broker: &'a Arc<Broker>, connection: &'a ConnectionInfo, request: &'a RequestFrame) -> Self {
        RequestContext {
            broker,
            connection,
            api_key: request.api_key,
            api_version: request.api_version(),
            correlation_id: request.correlation_id(),
            client_id: request.header.client_id.as_deref(),
            started: Instant::now(),
        }
    }

    /// Encodes a complete response frame for this request.
    pub fn encode(&self, body: &ResponseBody) -> Response {
        Response::from_bytes(encode_frame(self.api_key, self.api_version, self.correlation_id, body).freeze())
    }

    /// The request quota's throttle for this request's response (0: none).
    pub fn request_throttle_ms(&self) -> u64 {
        match self.connection.request_throttle_ms.load(Ordering::Relaxed) {
            REQUEST_QUOTA_EXEMPT => 0,
            throttle_ms => throttle_ms,
        }
    }

    /// Counts, and logs at DEBUG, each error the response tells the client.
    pub fn report_errors(&self, body: &ResponseBody) {
        let audience = ErrorAudience::of(self);
        report_errors(&self.broker.metrics, audience.as_ref(), self.api_key.info().name, body);
    }

    /// Marks the request as one the request quota neither throttles nor
    /// counts (a follower's fetch).
    pub fn exempt_from_request_quota(&self) {
        self.connection.request_throttle_ms.store(REQUEST_QUOTA_EXEMPT, Ordering::Relaxed);
    }

    pub fn reply(&self, mut body: ResponseBody) -> Reply {
        self.report_errors(&body);
        let throttle_ms = self.request_throttle_ms();
        if throttle_ms > 0 {
            body.throttle(self.api_version, i32::try_from(throttle_ms).unwrap_or(i32::MAX));
        }
        let response = self.encode(&body);
        self.broker.metrics.request_completed(self.api_key.info().name, 0, self.started.elapsed());
        Reply::Now(response)
    }
}
