//! The client's SCRAM steps, as Kafka's `ScramSaslClient`: no authzid, no
//! extensions, channel binding `n,,`.

use super::formatter;
use super::messages::{ClientFinalMessage, ClientFirstMessage, ServerFinalMessage, ServerFirstMessage};
use crate::mechanism::ScramMechanism;

/// A client exchange that has sent its first message.
pub(crate) struct SentClientFirst {
    mechanism: ScramMechanism,
    client_first: ClientFirstMessage,
}

/// A client exchange that has sent its proof and waits for the server's
/// signature.
pub(crate) struct SentClientFinal {
    mechanism: ScramMechanism,
    salted_password: Vec<u8>,
    auth_message: String,
}

impl SentClientFirst {
    /// The client-first message for `username` with `client_nonce`.
    pub(crate) fn new(mechanism: ScramMechanism, username: &str, client_nonce: String) -> (Self, Vec<u8>) {
        let client_first = ClientFirstMessage {
            authorization_id: String::new(),
            sasl_name: formatter::sasl_name(username),
            nonce: client_nonce,
            extensions: Vec::new(),
        };
        let token = client_first.to_message().into_bytes();
        (Self { mechanism, client_first }, token)
    }

    /// Reads the server-first message and answers with the proof.
    pub(crate) fn receive_server_first(
        self,
        server_token: &[u8],
        password: &str,
    ) -> Result<(SentClientFinal, Vec<u8>), String> {
        let server_first = ServerFirstMessage::parse(server_token)?;
        if !server_first.nonce.starts_with(&self.client_first.nonce) {
            return Err("Invalid server nonce: does not start with client nonce".into());
        }
        let mechanism = self.mechanism;
        if server_first.iterations < mechanism.min_iterations() {
            return Err(format!(
                "Requested iterations {} is less than the minimum {} for {}",
                server_first.iterations,
                mechanism.min_iterations(),
                mechanism.enum_name()
            ));
        }
        // Not in Kafka's client: a server could otherwise make this side
        // spend unbounded time in Hi(). No Kafka broker stores more.
        if server_first.iterations > ScramMechanism::MAX_ITERATIONS {
            return Err(format!(
                "Requested iterations {} is more than the maximum {} for {}",
                server_first.iterations,
                ScramMechanism::MAX_ITERATIONS,
                mechanism.enum_name()
            ));
        }
        let salted_password =
            formatter::hi(mechanism, password.as_bytes(), &server_first.salt, server_first.iterations);
        let mut client_final = ClientFinalMessage {
            channel_binding: b"n,,".to_vec(),
            nonce: server_first.nonce.clone(),
            proof: Vec::new(),
        };
        let auth_message =
            format!("{},{},{}", self.client_first.bare(), server_first.to_message(), client_final.without_proof());
        client_final.proof = client_proof(mechanism, &salted_password, &auth_message);
        let token = client_final.to_message().into_bytes();
        Ok((SentClientFinal { mechanism, salted_password, auth_message }, token))
    }
}

/// ClientProof = ClientKey XOR HMAC(H(ClientKey), AuthMessage).
pub(crate) fn client_proof(mechanism: ScramMechanism, salted_password: &[u8], auth_message: &str) -> Vec<u8> {
    let client_key = formatter::client_key(mechanism, salted_password);
    let stored_key = formatter::hash(mechanism, &client_key);
    let client_signature = formatter::hmac(mechanism, &stored_key, auth_message.as_bytes());
    let proof = formatter::xor(&client_key, &client_signature);
    debug_assert!(proof.is_some(), "a key and an HMAC of one mechanism have one length");
    proof.unwrap_or_default()
}

impl SentClientFinal {
    /// Checks the server's signature: only a server that holds the user's
    /// server key can make it.
    pub(crate) fn receive_server_final(self, server_token: &[u8]) -> Result<(), String> {
        let signature = match ServerFinalMessage::parse(server_token)? {
            ServerFinalMessage::Error(error) => {
                return Err(format!(
                    "Sasl authentication using {} failed with error: {error}",
                    self.mechanism.enum_name()
                ));
            }
            ServerFinalMessage::Signature(signature) => signature,
        };
        let server_key = formatter::server_key(self.mechanism, &self.salted_password);
        let expected = formatter::hmac(self.mechanism, &server_key, self.auth_message.as_bytes());
        if formatter::constant_time_eq(&signature, &expected) {
            Ok(())
        } else {
            Err("Invalid server signature in server final message".into())
        }
    }
}
