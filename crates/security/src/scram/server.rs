//! The server's two SCRAM steps, as Kafka's `ScramSaslServer`.
//!
//! Every failure but one is a Kafka SaslException, whose text the client
//! never sees (it is told its credentials were invalid); only an authzid
//! other than the user name is reported as it is.

use super::formatter;
use super::messages::{ClientFinalMessage, ClientFirstMessage, ServerFinalMessage, ServerFirstMessage};
use crate::credentials::{Credentials, ScramCredential};
use crate::failure::Failure;
use crate::mechanism::ScramMechanism;

/// The exchange after the server-first message: what the client-final
/// message is checked against.
pub(crate) struct AwaitingClientFinal {
    mechanism: ScramMechanism,
    username: String,
    client_first: ClientFirstMessage,
    server_first: ServerFirstMessage,
    credential: ScramCredential,
}

/// Reads the client-first message and answers with the server-first one.
pub(crate) fn receive_client_first(
    mechanism: ScramMechanism,
    server_nonce: &str,
    token: &[u8],
    credentials: &dyn Credentials,
) -> Result<(AwaitingClientFinal, Vec<u8>), Failure> {
    let client_first = ClientFirstMessage::parse(token).map_err(Failure::Hidden)?;
    // Unknown extensions are ignored, as Kafka does; only tokenauth matters.
    let username = formatter::username_from_sasl_name(&client_first.sasl_name).ok_or_else(|| {
        Failure::Hidden(format!(
            "Authentication failed: Credentials could not be obtained (Invalid username: {})",
            client_first.sasl_name
        ))
    })?;
    if client_first.token_authenticated() {
        // Delegation tokens are not supported: every token id is unknown,
        // which is what Kafka says of one it does not have.
        return Err(Failure::Hidden(format!("Token Authentication failed: Invalid tokenId : {username}")));
    }
    let credential = lookup_credential(credentials, &username, mechanism)?;
    // Kafka compares the authzid as sent (still escaped) with the decoded name.
    if !client_first.authorization_id.is_empty() && client_first.authorization_id != username {
        return Err(Failure::Visible(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    if credential.iterations < mechanism.min_iterations() {
        return Err(Failure::Hidden(format!(
            "Iterations {} is less than the minimum {} for {}",
            credential.iterations,
            mechanism.min_iterations(),
            mechanism.enum_name()
        )));
    }
    let server_first = ServerFirstMessage {
        nonce: format!("{}{}", client_first.nonce, server_nonce),
        salt: credential.salt.clone(),
        iterations: credential.iterations,
    };
    let challenge = server_first.to_message().into_bytes();
    Ok((AwaitingClientFinal { mechanism, username, client_first, server_first, credential }, challenge))
}

/// A user without a credential for this mechanism fails with the text a
/// wrong password would give the client, so user names are not revealed.
fn lookup_credential(
    credentials: &dyn Credentials,
    username: &str,
    mechanism: ScramMechanism,
) -> Result<ScramCredential, Failure> {
    let credential = credentials.scram_credential(username, mechanism);
    debug_assert!(
        credential.as_ref().is_none_or(|c| c.mechanism == mechanism),
        "Credentials returned a {:?} credential for {mechanism:?}",
        credential.as_ref().map(|c| c.mechanism)
    );
    credential
        .filter(|c| c.mechanism == mechanism)
        .ok_or_else(|| Failure::Hidden("Authentication failed: Invalid user credentials".into()))
}

impl AwaitingClientFinal {
    /// Checks the client-final message's nonce, channel binding and proof;
    /// on success, the user name and the server-final message.
    pub(crate) fn receive_client_final(self, token: &[u8]) -> Result<(String, Vec<u8>), Failure> {
        let client_final = ClientFinalMessage::parse(token).map_err(Failure::Hidden)?;
        if client_final.nonce != self.server_first.nonce {
            return Err(Failure::Hidden("Invalid client nonce in the final client message.".into()));
        }
        // RFC 5802 section 5.1: `c=` must be the GS2 header the client sent
        // first. Kafka leaves this to the proof, which covers `c=`; checking
        // it here only refuses clients that contradict themselves.
        if client_final.channel_binding != self.client_first.gs2_header().as_bytes() {
            return Err(Failure::Hidden("Invalid channel binding in the final client message.".into()));
        }
        let auth_message = self.auth_message(&client_final);
        self.verify_client_proof(&client_final.proof, &auth_message)?;
        let server_signature = formatter::hmac(self.mechanism, &self.credential.server_key, auth_message.as_bytes());
        let server_final = ServerFinalMessage::Signature(server_signature);
        Ok((self.username, server_final.to_message().into_bytes()))
    }

    /// AuthMessage = client-first-bare "," server-first "," client-final-without-proof.
    fn auth_message(&self, client_final: &ClientFinalMessage) -> String {
        format!("{},{},{}", self.client_first.bare(), self.server_first.to_message(), client_final.without_proof())
    }

    /// ClientKey = proof XOR HMAC(StoredKey, AuthMessage); the client knew the
    /// password iff H(ClientKey) is the stored key.
    fn verify_client_proof(&self, proof: &[u8], auth_message: &str) -> Result<(), Failure> {
        let client_signature = formatter::hmac(self.mechanism, &self.credential.stored_key, auth_message.as_bytes());
        // Kafka's xor throws here and the connection closes unanswered; a
        // plain failure is the closest this API has.
        let client_key = formatter::xor(&client_signature, proof)
            .ok_or_else(|| Failure::Hidden("Argument arrays must be of the same length".into()))?;
        let computed_stored_key = formatter::hash(self.mechanism, &client_key);
        if formatter::constant_time_eq(&computed_stored_key, &self.credential.stored_key) {
            Ok(())
        } else {
            Err(Failure::Hidden("Invalid client credentials".into()))
        }
    }
}
