//! The client side of an exchange: the broker's own connections to other
//! brokers authenticate with it, and tests drive [`crate::SaslServer`] with it.

use std::fmt;

use crate::mechanism::SaslMechanism;
use crate::oauthbearer::client_response::ClientInitialResponse;
use crate::plain;
use crate::scram::client::{SentClientFinal, SentClientFirst};
use crate::server::AuthenticationFailed;

/// Where a client exchange is; the names are Kafka's `ScramSaslClient.State`'s.
enum ClientState {
    SendClientFirstMessage,
    /// PLAIN sent its one message; the server's answer ends the exchange.
    SentPlain,
    ReceiveServerFirstMessage(SentClientFirst),
    ReceiveServerFinalMessage(SentClientFinal),
    Complete,
    Failed,
}

impl ClientState {
    fn kafka_name(&self) -> &'static str {
        match self {
            ClientState::SendClientFirstMessage => "SEND_CLIENT_FIRST_MESSAGE",
            ClientState::SentPlain => "SENT_PLAIN_MESSAGE",
            ClientState::ReceiveServerFirstMessage(_) => "RECEIVE_SERVER_FIRST_MESSAGE",
            ClientState::ReceiveServerFinalMessage(_) => "RECEIVE_SERVER_FINAL_MESSAGE",
            ClientState::Complete => "COMPLETE",
            ClientState::Failed => "FAILED",
        }
    }
}

/// One SASL exchange on the client side.
pub struct SaslClient {
    mechanism: SaslMechanism,
    username: String,
    password: String,
    client_nonce: String,
    state: ClientState,
}

impl SaslClient {
    /// `client_nonce` is SCRAM's client nonce: [`crate::SaslServer::random_nonce`]
    /// outside tests. PLAIN ignores it.
    pub fn new(mechanism: SaslMechanism, username: &str, password: &str, client_nonce: String) -> Self {
        debug_assert!(
            mechanism.scram().is_none() || crate::scram::messages::is_printable(&client_nonce),
            "a SCRAM client nonce must be printable ASCII without ','"
        );
        Self {
            mechanism,
            username: username.to_string(),
            password: password.to_string(),
            client_nonce,
            state: ClientState::SendClientFirstMessage,
        }
    }

    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    pub fn is_complete(&self) -> bool {
        matches!(self.state, ClientState::Complete)
    }

    /// The first token to send (PLAIN: `\0user\0password`; SCRAM: the
    /// client-first message; OAUTHBEARER: the initial response carrying the
    /// token given as the password). Called once; a second call fails the exchange.
    pub fn initial_token(&mut self) -> Vec<u8> {
        let first_call = matches!(self.state, ClientState::SendClientFirstMessage);
        debug_assert!(first_call, "initial_token called in state {}", self.state.kafka_name());
        match self.mechanism.scram() {
            None if self.mechanism == SaslMechanism::OAuthBearer => {
                self.state = if first_call { ClientState::SentPlain } else { ClientState::Failed };
                // The "password" is the bearer token.
                let response = ClientInitialResponse {
                    token: self.password.clone(),
                    authorization_id: String::new(),
                    extensions: Default::default(),
                };
                response.to_bytes()
            }
            None => {
                self.state = if first_call { ClientState::SentPlain } else { ClientState::Failed };
                plain::initial_response(&self.username, &self.password)
            }
            Some(mechanism) => {
                let (sent, token) = SentClientFirst::new(mechanism, &self.username, self.client_nonce.clone());
                self.state =
                    if first_call { ClientState::ReceiveServerFirstMessage(sent) } else { ClientState::Failed };
                token
            }
        }
    }

    /// The server's answer: `Ok(Some(next token))` to send on, `Ok(None)`
    /// when done (SCRAM has checked the server's signature by then), `Err`
    /// on a bad answer, with Kafka's client-side text.
    pub fn evaluate(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>, AuthenticationFailed> {
        let state = std::mem::replace(&mut self.state, ClientState::Failed);
        let (next_state, token) = match state {
            // Kafka's PLAIN client is complete once it has sent its message;
            // the server's (empty) answer carries nothing to check.
            // An OAUTHBEARER server that refused the token answers with its
            // error JSON, which the client acknowledges with ^A (RFC 7628);
            // the server's next answer is the failure.
            ClientState::SentPlain if self.mechanism == SaslMechanism::OAuthBearer && !server_token.is_empty() => {
                (ClientState::Failed, Some(vec![0x01]))
            }
            ClientState::SentPlain => (ClientState::Complete, None),
            ClientState::ReceiveServerFirstMessage(sent) => {
                let (sent, token) =
                    sent.receive_server_first(server_token, &self.password).map_err(AuthenticationFailed)?;
                (ClientState::ReceiveServerFinalMessage(sent), Some(token))
            }
            ClientState::ReceiveServerFinalMessage(sent) => {
                sent.receive_server_final(server_token).map_err(AuthenticationFailed)?;
                (ClientState::Complete, None)
            }
            state @ (ClientState::SendClientFirstMessage | ClientState::Complete | ClientState::Failed) => {
                let message = format!("Unexpected challenge in Sasl client state {}", state.kafka_name());
                // Completion stands; anything else is now a failure.
                self.state = if matches!(state, ClientState::Complete) { state } else { ClientState::Failed };
                return Err(AuthenticationFailed(message));
            }
        };
        self.state = next_state;
        Ok(token)
    }
}

impl fmt::Debug for SaslClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslClient")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("state", &self.state.kafka_name())
            .finish_non_exhaustive()
    }
}
