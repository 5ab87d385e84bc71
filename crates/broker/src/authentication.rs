//! A client connection's authentication, as Kafka's SaslServerAuthenticator
//! gates it on a SASL listener: ApiVersions and SaslHandshake first, then
//! SaslAuthenticate tokens (raw tokens after a v0 handshake) until the
//! mechanism completes. Nothing else is served before that; a request out
//! of turn closes the connection, and a failed authentication is answered
//! and closed after `connection.failed.authentication.delay.ms` (KIP-306).
//! An authenticated session may re-authenticate with a new handshake
//! (KIP-368) and ends at `connections.max.reauth.ms` when that is set.
//!
//! The SASL mechanisms themselves are krabka-security's; this module only
//! translates between them and the wire.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use krabka_metadata::MetadataImage;
use krabka_protocol::frame::RequestFrame;
use krabka_protocol::{ApiKey, ErrorCode, RequestBody, ResponseBody, SaslAuthenticateResponse, SaslHandshakeResponse};
use krabka_security::oauthbearer::{BearerToken, TokenRefused};
use krabka_security::{
    Credentials, KafkaPrincipal, SaslMechanism, SaslServer, SaslStep, ScramCredential, ScramMechanism,
};

use crate::config::security::{ClientListener, SaslListener};
use crate::observability::FailureKind;
use crate::request::Close;
use crate::wire::encode_frame;

/// What the connection does with a frame once the authenticator saw it.
pub enum Admission {
    /// An ordinary request, for the handlers.
    Serve(RequestFrame),
    /// Answered here (a complete response frame); the connection goes on.
    Answer(Bytes),
    /// Authentication failed: after the failed-authentication delay, send
    /// `answer` (if any) and close.
    Fail { answer: Option<Bytes>, reason: String },
    /// A request out of turn: close without answering.
    Close(Close),
}

/// A failed authentication: what the client is told, and what the log says.
struct Refusal {
    message: String,
    log: String,
}

/// An authenticated SASL session.
#[derive(Clone, Debug)]
struct Session {
    principal: KafkaPrincipal,
    mechanism: SaslMechanism,
    /// When `connections.max.reauth.ms` or the credential's expiration
    /// ends it (None: never).
    expires: Option<Instant>,
    /// The lifetime told the client (0: none), for it to re-authenticate.
    lifetime_ms: i64,
}

/// Kafka's `calcCompletionTimesAndReturnSessionLifetimeMs`: the sooner of
/// the credential's expiration (an OAUTHBEARER token's) and
/// `connections.max.reauth.ms`, never negative; 0 when neither applies.
fn session_lifetime_ms(credential_expiration_ms: Option<i64>, max_reauth_ms: i64) -> i64 {
    let until_expiration = credential_expiration_ms.map(|at| at.saturating_sub(wall_clock_ms()));
    let lifetime = match (until_expiration, max_reauth_ms > 0) {
        (None, true) => max_reauth_ms,
        (None, false) => 0,
        (Some(left), false) => left,
        (Some(left), true) => left.min(max_reauth_ms),
    };
    lifetime.max(0)
}

enum State {
    /// A PLAINTEXT or SSL listener: every request is served as from the
    /// transport's principal (ANONYMOUS, or an SSL client certificate's).
    Open,
    /// Waiting for SaslHandshake (ApiVersions allowed); `previous` is the
    /// session being re-authenticated.
    Handshake {
        previous: Option<Session>,
    },
    /// Exchanging tokens; `kafka_headers` is false after a v0 handshake,
    /// whose tokens travel raw, without request headers.
    Authenticate {
        server: SaslServer,
        kafka_headers: bool,
        previous: Option<Session>,
    },
    Authenticated(Session),
}

pub struct Authenticator {
    listener: Arc<ClientListener>,
    state: State,
    /// Who the transport says the client is: an SSL listener's client
    /// certificate subject, mapped; ANONYMOUS otherwise. SASL replaces it.
    transport_principal: KafkaPrincipal,
    /// `connections.max.reauth.ms` (0: sessions never expire).
    max_reauth_ms: i64,
    /// Set when an authentication completed, until `take_completed`.
    completed: bool,
}

impl Authenticator {
    pub fn new(listener: Arc<ClientListener>, max_reauth_ms: i64, transport_principal: KafkaPrincipal) -> Self {
        let state = if listener.sasl.is_some() { State::Handshake { previous: None } } else { State::Open };
        Authenticator { listener, state, transport_principal, max_reauth_ms, completed: false }
    }

    /// Whether an authentication completed since the last call (the
    /// principal may have changed; the metrics count it).
    pub fn take_completed(&mut self) -> bool {
        std::mem::take(&mut self.completed)
    }

    pub fn listener_name(&self) -> &str {
        &self.listener.name
    }

    /// Who the connection's requests come from.
    pub fn principal(&self) -> KafkaPrincipal {
        match &self.state {
            State::Authenticated(session) => session.principal.clone(),
            State::Handshake { previous: Some(session) } | State::Authenticate { previous: Some(session), .. } => {
                session.principal.clone()
            }
            State::Open => self.transport_principal.clone(),
            _ => KafkaPrincipal::anonymous(),
        }
    }

    /// The largest frame to read now: a client that has not authenticated
    /// is held to `sasl.server.max.receive.size`, as in Kafka.
    pub fn max_frame_bytes(&self, socket_request_max_bytes: u32, sasl_server_max_receive_size: u32) -> u32 {
        match self.state {
            State::Open | State::Authenticated(_) => socket_request_max_bytes,
            _ => sasl_server_max_receive_size.min(socket_request_max_bytes),
        }
    }

    /// Whether the next frame is a raw SASL token (after a v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Authenticate { kafka_headers: false, .. })
    }

    /// A raw token (no request header) after a v0 handshake; the answer is
    /// the server's token, size-prefixed, and a failure closes unanswered.
    pub fn raw_token(&mut self, token: &[u8], image: &dyn Fn() -> Arc<MetadataImage>) -> Admission {
        debug_assert!(self.expects_raw_token());
        match self.evaluate(token, image) {
            Ok(answer) => Admission::Answer(size_prefixed(&answer)),
            Err(refusal) => Admission::Fail { answer: None, reason: refusal.log },
        }
    }

    /// Gates a request: served, answered here, or refused.
    pub fn admit(&mut self, request: RequestFrame, image: &dyn Fn() -> Arc<MetadataImage>) -> Admission {
        let api_key = request.api_key;
        match (&self.state, api_key) {
            (State::Open, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) => illegal_state_answer(&request),
            (State::Open, _) => Admission::Serve(request),
            // An expired session is closed whatever comes, a late
            // re-authentication included, as Kafka's processor closes it.
            (State::Authenticated(session), _) if session.expires.is_some_and(|at| Instant::now() >= at) => {
                Admission::Close(Close::routine(
                    "SASL session expired (connections.max.reauth.ms or the credential expired)",
                ))
            }
            (State::Authenticated(session), ApiKey::SaslHandshake) => {
                let previous = Some(session.clone());
                self.state = State::Handshake { previous };
                self.handshake(&request)
            }
            (State::Authenticated(_), ApiKey::SaslAuthenticate) => illegal_state_answer(&request),
            (State::Authenticated(_), _) => Admission::Serve(request),
            (State::Handshake { previous: None }, ApiKey::ApiVersions) => Admission::Serve(request),
            (State::Handshake { .. }, ApiKey::SaslHandshake) => self.handshake(&request),
            (State::Authenticate { kafka_headers: true, .. }, ApiKey::SaslAuthenticate) => {
                self.authenticate(&request, image)
            }
            (_, _) => Admission::Close(Close::failure(
                FailureKind::UnsupportedRequest,
                format!("unexpected {api_key:?} request during SASL authentication"),
            )),
        }
    }

    fn sasl(&self) -> &SaslListener {
        self.listener.sasl.as_ref().expect("only a SASL listener authenticates")
    }

    fn handshake(&mut self, request: &RequestFrame) -> Admission {
        let Ok(RequestBody::SaslHandshake(body)) = request.decode_body() else {
            return Admission::Close(Close::failure(FailureKind::UndecodableRequest, "undecodable SaslHandshake"));
        };
        let State::Handshake { previous } = std::mem::replace(&mut self.state, State::Open) else {
            unreachable!("handshake is only called in the handshake state");
        };
        let enabled = &self.sasl().enabled_mechanisms;
        let mechanisms = enabled.iter().map(|m| m.name().to_string()).collect();
        let mechanism = SaslMechanism::from_name(&body.mechanism).filter(|m| enabled.contains(m));
        // Re-authentication keeps the mechanism, as Kafka requires.
        let mechanism = mechanism.filter(|m| previous.as_ref().is_none_or(|p| p.mechanism == *m));
        let error_code = if mechanism.is_some() { 0 } else { ErrorCode::UNSUPPORTED_SASL_MECHANISM.code() };
        let response = SaslHandshakeResponse { error_code, mechanisms, ..Default::default() };
        let answer = encode(request, ResponseBody::SaslHandshake(Box::new(response)));
        let Some(mechanism) = mechanism else {
            let reason = format!("unsupported SASL mechanism {:?}", body.mechanism);
            return Admission::Fail { answer: Some(answer), reason };
        };
        let server = SaslServer::new(mechanism, SaslServer::random_nonce()).with_reauthentication(previous.is_some());
        self.state = State::Authenticate { server, kafka_headers: request.api_version() >= 1, previous };
        Admission::Answer(answer)
    }

    fn authenticate(&mut self, request: &RequestFrame, image: &dyn Fn() -> Arc<MetadataImage>) -> Admission {
        let Ok(RequestBody::SaslAuthenticate(body)) = request.decode_body() else {
            return Admission::Close(Close::failure(FailureKind::UndecodableRequest, "undecodable SaslAuthenticate"));
        };
        let mut response = SaslAuthenticateResponse::default();
        match self.evaluate(&body.auth_bytes, image) {
            Ok(token) => {
                response.auth_bytes = Bytes::from(token);
                if let State::Authenticated(session) = &self.state {
                    response.session_lifetime_ms = session.lifetime_ms;
                }
                Admission::Answer(encode(request, ResponseBody::SaslAuthenticate(Box::new(response))))
            }
            Err(refusal) => {
                response.error_code = ErrorCode::SASL_AUTHENTICATION_FAILED.code();
                response.error_message = Some(refusal.message);
                let answer = encode(request, ResponseBody::SaslAuthenticate(Box::new(response)));
                Admission::Fail { answer: Some(answer), reason: refusal.log }
            }
        }
    }

    /// Hands `token` to the mechanism; moves to Authenticated when it
    /// completes. Returns the token to answer with, or why it failed.
    fn evaluate(&mut self, token: &[u8], image: &dyn Fn() -> Arc<MetadataImage>) -> Result<Vec<u8>, Refusal> {
        let State::Authenticate { server, previous, .. } = &mut self.state else {
            unreachable!("evaluate is only called while authenticating");
        };
        let sasl = self.listener.sasl.as_ref().expect("only a SASL listener authenticates");
        let image = image();
        let credentials = ListenerCredentials { sasl, image: &image };
        // The client learns Kafka's text; the log gets the mechanism's
        // own reason (which user, which check), as Kafka logs it.
        let step = server.evaluate(token, &credentials).map_err(|failed| {
            let log = match server.failure_reason() {
                Some(reason) if reason != failed.0 => format!("{} ({reason})", failed.0),
                _ => failed.0.clone(),
            };
            Refusal { message: failed.0, log }
        })?;
        let (principal, answer) = match step {
            SaslStep::Challenge(challenge) => return Ok(challenge),
            SaslStep::Complete { principal, token } => (principal, token),
        };
        if let Some(previous) = previous {
            if previous.principal != principal {
                let message = format!(
                    "Cannot change principals during re-authentication from {}: {principal}",
                    previous.principal
                );
                return Err(Refusal { log: message.clone(), message });
            }
        }
        let lifetime_ms = session_lifetime_ms(server.credential_expiration_ms(), self.max_reauth_ms);
        let expires = (lifetime_ms > 0 || server.credential_expiration_ms().is_some())
            .then(|| Instant::now() + Duration::from_millis(lifetime_ms as u64));
        let mechanism = server.mechanism();
        self.state = State::Authenticated(Session { principal, mechanism, expires, lifetime_ms });
        self.completed = true;
        Ok(answer)
    }
}

/// Kafka answers SASL requests outside an authentication (a PLAINTEXT
/// listener, or after it completed) with ILLEGAL_SASL_STATE and goes on.
fn illegal_state_answer(request: &RequestFrame) -> Admission {
    let code = ErrorCode::ILLEGAL_SASL_STATE.code();
    let body = match request.api_key {
        ApiKey::SaslHandshake => {
            ResponseBody::SaslHandshake(Box::new(SaslHandshakeResponse { error_code: code, ..Default::default() }))
        }
        _ => ResponseBody::SaslAuthenticate(Box::new(SaslAuthenticateResponse {
            error_code: code,
            error_message: Some("SaslAuthenticate request received after successful authentication".into()),
            ..Default::default()
        })),
    };
    Admission::Answer(encode(request, body))
}

fn encode(request: &RequestFrame, body: ResponseBody) -> Bytes {
    encode_frame(request.api_key, request.api_version(), request.correlation_id(), &body).freeze()
}

fn size_prefixed(token: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(4 + token.len());
    frame.put_u32(token.len() as u32);
    frame.extend_from_slice(token);
    frame.freeze()
}

/// A listener's credentials: PLAIN's users from its JAAS config, SCRAM's
/// from the metadata image (UserScramCredentialRecords).
struct ListenerCredentials<'a> {
    sasl: &'a SaslListener,
    image: &'a MetadataImage,
}

impl Credentials for ListenerCredentials<'_> {
    fn plain_password_matches(&self, username: &str, password: &str) -> bool {
        self.sasl
            .plain_users
            .get(username)
            .is_some_and(|expected| krabka_security::constant_time_eq(password.as_bytes(), expected.as_bytes()))
    }

    fn scram_credential(&self, username: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        let stored = self.image.scram_credentials.get(&(username.to_string(), mechanism.type_code()))?;
        Some(ScramCredential {
            mechanism,
            salt: stored.salt.to_vec(),
            stored_key: stored.stored_key.to_vec(),
            server_key: stored.server_key.to_vec(),
            iterations: stored.iterations,
        })
    }

    fn validate_bearer_token(&self, token: &str) -> Result<BearerToken, TokenRefused> {
        let Some(validator) = &self.sasl.bearer_validator else {
            return Err(TokenRefused::invalid("the listener does not enable OAUTHBEARER"));
        };
        validator.validate(token, wall_clock_ms())
    }
}

/// Milliseconds since the epoch: tokens carry wall-clock times.
fn wall_clock_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}
