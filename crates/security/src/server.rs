//! One connection's SASL exchange on the broker's side.

use std::fmt;

use thiserror::Error;

use crate::credentials::Credentials;
use crate::failure::Failure;
use crate::mechanism::SaslMechanism;
use crate::oauthbearer::client_response::ClientInitialResponse;
use crate::principal::KafkaPrincipal;
use crate::scram::server::AwaitingClientFinal;
use crate::{plain, scram};

/// What the server does after a client token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaslStep {
    /// Send this token to the client and wait for its next one.
    Challenge(Vec<u8>),
    /// Authenticated: send `token` (possibly empty) as the last
    /// SaslAuthenticate answer.
    Complete { principal: KafkaPrincipal, token: Vec<u8> },
}

/// An authentication failure, with the message Kafka sends the client in
/// SaslAuthenticateResponse.error_message (error code
/// SASL_AUTHENTICATION_FAILED); the connection closes after it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct AuthenticationFailed(pub String);

/// Where an exchange is; the names are Kafka's `ScramSaslServer.State`'s.
enum ServerState {
    ReceiveClientFirstMessage,
    ReceiveClientFinalMessage(Box<AwaitingClientFinal>),
    /// OAUTHBEARER sent its error challenge (RFC 7628 3.2.2); the client
    /// acknowledges with ^A and is then told the error.
    SentBearerError(String),
    Complete,
    Failed,
}

impl ServerState {
    fn kafka_name(&self) -> &'static str {
        match self {
            ServerState::ReceiveClientFirstMessage => "RECEIVE_CLIENT_FIRST_MESSAGE",
            ServerState::ReceiveClientFinalMessage(_) => "RECEIVE_CLIENT_FINAL_MESSAGE",
            ServerState::SentBearerError(_) => "SENT_ERROR_CHALLENGE",
            ServerState::Complete => "COMPLETE",
            ServerState::Failed => "FAILED",
        }
    }
}

/// One connection's SASL exchange on the server side: feed it each
/// SaslAuthenticate token, send back what it answers.
pub struct SaslServer {
    mechanism: SaslMechanism,
    server_nonce: String,
    reauthenticating: bool,
    state: ServerState,
    principal: Option<KafkaPrincipal>,
    /// When the credential expires (OAUTHBEARER: the token's `exp`), in ms
    /// since the epoch; it bounds the session (KIP-368).
    credential_expiration_ms: Option<i64>,
    failure_reason: Option<String>,
}

impl SaslServer {
    /// `server_nonce` is the random part SCRAM appends to the client's nonce
    /// (the broker passes [`SaslServer::random_nonce`], tests a fixed one).
    pub fn new(mechanism: SaslMechanism, server_nonce: String) -> Self {
        debug_assert!(
            mechanism.scram().is_none() || scram::messages::is_printable(&server_nonce),
            "a SCRAM server nonce must be printable ASCII without ','"
        );
        Self {
            mechanism,
            server_nonce,
            reauthenticating: false,
            state: ServerState::ReceiveClientFirstMessage,
            principal: None,
            credential_expiration_ms: None,
            failure_reason: None,
        }
    }

    /// Marks this exchange as a re-authentication (KIP-368), which changes
    /// only the wording of Kafka's generic failure message.
    pub fn with_reauthentication(mut self, reauthenticating: bool) -> Self {
        self.reauthenticating = reauthenticating;
        self
    }

    /// As Kafka's `ScramFormatter.secureRandomString`: printable, no ','.
    pub fn random_nonce() -> String {
        scram::secure_random_string()
    }

    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    pub fn is_complete(&self) -> bool {
        matches!(self.state, ServerState::Complete)
    }

    /// The authenticated principal, once complete.
    pub fn principal(&self) -> Option<&KafkaPrincipal> {
        self.principal.as_ref()
    }

    /// When the authenticated credential expires (ms since the epoch), if it
    /// does: an OAUTHBEARER token's expiration, which ends the session.
    pub fn credential_expiration_ms(&self) -> Option<i64> {
        self.credential_expiration_ms
    }

    /// Why the exchange failed, in Kafka's internal words: for the broker's
    /// log, never for the client (it may say whether a user exists).
    pub fn failure_reason(&self) -> Option<&str> {
        self.failure_reason.as_deref()
    }

    /// Evaluates the client's next token. After a failure, or once complete,
    /// every further token fails.
    pub fn evaluate(&mut self, token: &[u8], credentials: &dyn Credentials) -> Result<SaslStep, AuthenticationFailed> {
        let state = std::mem::replace(&mut self.state, ServerState::Failed);
        match self.step(state, token, credentials) {
            Ok((next_state, step)) => {
                self.state = next_state;
                if let SaslStep::Complete { principal, .. } = &step {
                    self.principal = Some(principal.clone());
                }
                Ok(step)
            }
            Err(failure) => Err(self.fail(failure)),
        }
    }

    fn step(
        &mut self,
        state: ServerState,
        token: &[u8],
        credentials: &dyn Credentials,
    ) -> Result<(ServerState, SaslStep), Failure> {
        if self.mechanism == SaslMechanism::OAuthBearer {
            return self.bearer_step(state, token, credentials);
        }
        match (self.mechanism.scram(), state) {
            (None, ServerState::ReceiveClientFirstMessage) => {
                let username = plain::authenticate(token, credentials)?;
                let step = SaslStep::Complete { principal: KafkaPrincipal::user(username), token: Vec::new() };
                Ok((ServerState::Complete, step))
            }
            (Some(mechanism), ServerState::ReceiveClientFirstMessage) => {
                let (awaiting, challenge) =
                    scram::server::receive_client_first(mechanism, &self.server_nonce, token, credentials)?;
                Ok((ServerState::ReceiveClientFinalMessage(Box::new(awaiting)), SaslStep::Challenge(challenge)))
            }
            (_, ServerState::ReceiveClientFinalMessage(awaiting)) => {
                let (username, token) = awaiting.receive_client_final(token)?;
                Ok((ServerState::Complete, SaslStep::Complete { principal: KafkaPrincipal::user(username), token }))
            }
            (_, state @ (ServerState::Complete | ServerState::Failed | ServerState::SentBearerError(_))) => {
                Err(Failure::IllegalState(format!("Unexpected challenge in Sasl server state {}", state.kafka_name())))
            }
        }
    }

    /// OAUTHBEARER as Kafka's `OAuthBearerSaslServer`: the client's initial
    /// response, its token validated; a refused token is answered with the
    /// JSON error challenge, and the client's ^A then fails the exchange
    /// with that JSON as the message.
    fn bearer_step(
        &mut self,
        state: ServerState,
        token: &[u8],
        credentials: &dyn Credentials,
    ) -> Result<(ServerState, SaslStep), Failure> {
        match state {
            ServerState::SentBearerError(error) if token == [0x01] => Err(Failure::Visible(error)),
            ServerState::ReceiveClientFirstMessage | ServerState::SentBearerError(_) => {
                self.failure_reason = None;
                let response = ClientInitialResponse::parse(token).map_err(Failure::Hidden)?;
                let validated = match credentials.validate_bearer_token(&response.token) {
                    Ok(validated) => validated,
                    Err(refused) => {
                        let error = refused.json_challenge();
                        self.failure_reason = Some(refused.reason);
                        return Ok((
                            ServerState::SentBearerError(error.clone()),
                            SaslStep::Challenge(error.into_bytes()),
                        ));
                    }
                };
                let principal_name = validated.principal_name;
                if !response.authorization_id.is_empty() && response.authorization_id != principal_name {
                    return Err(Failure::Visible(format!(
                        "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({principal_name})",
                        response.authorization_id
                    )));
                }
                self.credential_expiration_ms = Some(validated.lifetime_ms);
                let step = SaslStep::Complete { principal: KafkaPrincipal::user(principal_name), token: Vec::new() };
                Ok((ServerState::Complete, step))
            }
            state => {
                Err(Failure::IllegalState(format!("Unexpected challenge in Sasl server state {}", state.kafka_name())))
            }
        }
    }

    /// Records a failure and turns it into what the client is told.
    fn fail(&mut self, failure: Failure) -> AuthenticationFailed {
        // A token after completion must not undo the completion.
        let was_complete = self.principal.is_some();
        self.state = if was_complete { ServerState::Complete } else { ServerState::Failed };
        let message = match failure {
            Failure::Visible(message) => {
                // OAUTHBEARER noted the validator's reason with its error
                // challenge; the message is only the challenge's JSON.
                self.failure_reason.get_or_insert_with(|| message.clone());
                message
            }
            Failure::Hidden(reason) => {
                self.failure_reason = Some(reason);
                self.generic_failure_message()
            }
            Failure::IllegalState(message) => {
                self.failure_reason = Some(message.clone());
                message
            }
        };
        AuthenticationFailed(message)
    }

    /// `SaslServerAuthenticator`'s text for a SaslException.
    fn generic_failure_message(&self) -> String {
        let during = if self.reauthenticating { "re-authentication" } else { "authentication" };
        format!(
            "Authentication failed during {during} due to invalid credentials with SASL mechanism {}",
            self.mechanism.name()
        )
    }
}

impl fmt::Debug for SaslServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslServer")
            .field("mechanism", &self.mechanism)
            .field("state", &self.state.kafka_name())
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::InMemoryCredentials;
    use crate::SaslClient;

    fn users() -> InMemoryCredentials {
        let mut credentials = InMemoryCredentials::new();
        credentials.add_plain_user("alice", "alice-secret");
        credentials
    }

    fn plain_server() -> SaslServer {
        SaslServer::new(SaslMechanism::Plain, SaslServer::random_nonce())
    }

    fn failed(message: &str) -> Result<SaslStep, AuthenticationFailed> {
        Err(AuthenticationFailed(message.to_string()))
    }

    /// Credentials whose OAUTHBEARER validator is Kafka's unsecured one at a fixed time.
    struct UnsecuredAt(i64);

    impl Credentials for UnsecuredAt {
        fn plain_password_matches(&self, _: &str, _: &str) -> bool {
            false
        }
        fn scram_credential(&self, _: &str, _: crate::ScramMechanism) -> Option<crate::ScramCredential> {
            None
        }
        fn validate_bearer_token(
            &self,
            token: &str,
        ) -> Result<crate::oauthbearer::BearerToken, crate::oauthbearer::TokenRefused> {
            crate::oauthbearer::unsecured::validate(token, &Default::default(), self.0)
        }
    }

    fn unsecured_token(claims: &str) -> String {
        let url = |b: &[u8]| crate::base64::encode(b).trim_end_matches('=').replace('+', "-").replace('/', "_");
        format!("{}.{}.", url(br#"{"alg":"none"}"#), url(claims.as_bytes()))
    }

    #[test]
    fn oauthbearer_accepts_a_valid_token_and_bounds_the_session_by_it() {
        let token = unsecured_token(r#"{"sub":"alice","exp":2000}"#);
        let mut client = SaslClient::new(SaslMechanism::OAuthBearer, "", &token, String::new());
        let mut server = SaslServer::new(SaslMechanism::OAuthBearer, String::new());
        let step = server.evaluate(&client.initial_token(), &UnsecuredAt(1_000_000));
        assert_eq!(step, Ok(SaslStep::Complete { principal: KafkaPrincipal::user("alice"), token: Vec::new() }));
        assert_eq!(server.credential_expiration_ms(), Some(2_000_000));
        assert_eq!(client.evaluate(b""), Ok(None));
        assert!(client.is_complete());
    }

    #[test]
    fn oauthbearer_answers_a_bad_token_with_the_json_challenge_then_fails() {
        let expired = unsecured_token(r#"{"sub":"alice","exp":10}"#);
        let mut client = SaslClient::new(SaslMechanism::OAuthBearer, "", &expired, String::new());
        let mut server = SaslServer::new(SaslMechanism::OAuthBearer, String::new());
        let Ok(SaslStep::Challenge(challenge)) = server.evaluate(&client.initial_token(), &UnsecuredAt(20_000)) else {
            panic!("an expired token is answered with the error challenge");
        };
        assert_eq!(challenge, br#"{"status":"invalid_token"}"#);
        let ack = client.evaluate(&challenge).expect("the client acknowledges").expect("with ^A");
        assert_eq!(ack, [0x01]);
        assert_eq!(server.evaluate(&ack, &UnsecuredAt(20_000)), failed(r#"{"status":"invalid_token"}"#));
        assert!(server.failure_reason().is_some_and(|r| r.contains("Expiration Time")), "{server:?}");

        // A malformed initial response: Kafka's generic text, the reason logged.
        let mut server = SaslServer::new(SaslMechanism::OAuthBearer, String::new());
        assert_eq!(
            server.evaluate(b"n,,auth=Bearer x", &UnsecuredAt(0)),
            failed("Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER")
        );
        assert_eq!(server.failure_reason(), Some("Invalid OAUTHBEARER client first message"));

        // An authorization id other than the token's subject.
        let token = unsecured_token(r#"{"sub":"alice","exp":2000}"#);
        let message = format!("n,a=bob,\x01auth=Bearer {token}\x01\x01");
        let mut server = SaslServer::new(SaslMechanism::OAuthBearer, String::new());
        assert_eq!(
            server.evaluate(message.as_bytes(), &UnsecuredAt(0)),
            failed("Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)")
        );
    }

    #[test]
    fn plain_succeeds_with_an_empty_last_token() {
        let mut server = plain_server();
        assert_eq!(server.mechanism(), SaslMechanism::Plain);
        let step = server.evaluate(b"\0alice\0alice-secret", &users());
        assert_eq!(step, Ok(SaslStep::Complete { principal: KafkaPrincipal::user("alice"), token: Vec::new() }));
        assert!(server.is_complete());
        assert_eq!(server.principal().map(ToString::to_string).as_deref(), Some("User:alice"));
        assert_eq!(server.failure_reason(), None);
    }

    #[test]
    fn plain_client_and_server_agree() {
        let mut client = SaslClient::new(SaslMechanism::Plain, "alice", "alice-secret", String::new());
        let token = client.initial_token();
        assert_eq!(token, b"\0alice\0alice-secret");
        let mut server = plain_server();
        let Ok(SaslStep::Complete { token, .. }) = server.evaluate(&token, &users()) else {
            panic!("PLAIN did not complete");
        };
        assert_eq!(client.evaluate(&token), Ok(None));
        assert!(client.is_complete());
    }

    #[test]
    fn plain_failures_reach_the_client_verbatim() {
        let cases: [(&[u8], &str); 5] = [
            (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
            (b"\0\0pw", "Authentication failed: username not specified"),
            (b"\0alice\0", "Authentication failed: password not specified"),
            (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
            (
                b"admin\0alice\0alice-secret",
                "Authentication failed: Client requested an authorization id that is different from username",
            ),
        ];
        for (token, message) in cases {
            let mut server = plain_server();
            assert_eq!(server.evaluate(token, &users()), failed(message));
            assert_eq!(server.failure_reason(), Some(message));
            assert!(!server.is_complete());
            assert_eq!(server.principal(), None);
        }
    }

    #[test]
    fn plain_refuses_tokens_after_the_exchange() {
        let mut server = plain_server();
        assert!(server.evaluate(b"\0alice\0wrong", &users()).is_err());
        assert_eq!(
            server.evaluate(b"\0alice\0alice-secret", &users()),
            failed("Unexpected challenge in Sasl server state FAILED")
        );
        let mut server = plain_server();
        assert!(server.evaluate(b"\0alice\0alice-secret", &users()).is_ok());
        assert_eq!(
            server.evaluate(b"\0alice\0alice-secret", &users()),
            failed("Unexpected challenge in Sasl server state COMPLETE")
        );
        assert_eq!(server.principal(), Some(&KafkaPrincipal::user("alice")));
    }

    #[test]
    fn debug_shows_no_secrets() {
        let mut server = plain_server();
        let _ = server.evaluate(b"\0alice\0alice-secret", &users());
        let shown = format!("{server:?}");
        assert!(shown.contains("COMPLETE") && !shown.contains("alice-secret"), "{shown}");
        let client = SaslClient::new(SaslMechanism::Plain, "alice", "alice-secret", String::new());
        assert!(!format!("{client:?}").contains("alice-secret"));
    }

    #[test]
    fn random_nonces_are_printable_and_differ() {
        let nonces: Vec<String> = (0..8).map(|_| SaslServer::random_nonce()).collect();
        for nonce in &nonces {
            assert!(crate::scram::messages::is_printable(nonce), "{nonce}");
        }
        let mut unique = nonces.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), nonces.len());
    }
}
