//! How a mechanism fails, shared by the mechanisms and the server that
//! turns a failure into what the client is told.

/// A failure inside a mechanism, sorted by what the client may learn of it,
/// as Kafka's `SaslServerAuthenticator` sorts exceptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Kafka's SaslAuthenticationException: the client is told this text.
    Visible(String),
    /// Kafka's SaslException: the client is told only that its credentials
    /// were invalid, lest it learn which users exist; the text is for logs.
    Hidden(String),
    /// Kafka's IllegalSaslStateException: a token where none belongs.
    IllegalState(String),
}
