//! OAUTHBEARER (RFC 7628) as Kafka's broker serves it: the client's initial
//! response (`client_response`), a bearer token's validation by Kafka's
//! default unsecured validator (`unsecured`, tokens with `alg: none`) or by
//! signature against a JSON Web Key Set (`jws`, KIP-768), and the token the
//! session then carries (principal, scope, lifetime for KIP-368).

pub mod client_response;
pub mod jws;
pub mod unsecured;

use std::collections::BTreeSet;

/// A validated bearer token (Kafka's `OAuthBearerToken`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BearerToken {
    /// The compact serialization the client sent.
    pub value: String,
    /// The principal claim (`sub` unless configured otherwise).
    pub principal_name: String,
    /// The scope claim's items (a string is one item, a list its items).
    pub scope: BTreeSet<String>,
    /// When the token expires, in ms since the epoch (`exp` * 1000).
    pub lifetime_ms: i64,
    /// When it was issued, in ms since the epoch (`iat` * 1000), if it says.
    pub start_time_ms: Option<i64>,
}

/// Why a token was refused: what the client is told (Kafka's validator
/// callback error: the RFC 7628 status and the scope it lacked) and the
/// reason, which only the broker's log gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRefused {
    /// `invalid_token`, or `insufficient_scope` when a required scope is missing.
    pub status: &'static str,
    /// The required scope, as Java prints a list (`[a, b]`), with `insufficient_scope`.
    pub scope: Option<String>,
    pub reason: String,
}

impl TokenRefused {
    /// An `invalid_token` refusal for `reason`.
    pub fn invalid(reason: impl Into<String>) -> Self {
        TokenRefused { status: "invalid_token", scope: None, reason: reason.into() }
    }

    /// The server's error challenge (`OAuthBearerSaslServer.jsonErrorResponse`).
    pub fn json_challenge(&self) -> String {
        match &self.scope {
            Some(scope) => format!("{{\"status\":\"{}\", \"scope\":\"{scope}\"}}", self.status),
            None => format!("{{\"status\":\"{}\"}}", self.status),
        }
    }
}

/// Decodes a JWT part: base64url as RFC 7515 writes it (no padding), and
/// for tolerance also the standard alphabet and padded text. None when it
/// is not base64 at all.
pub fn decode_base64url(text: &str) -> Option<Vec<u8>> {
    let mut standard: String = text
        .trim_end_matches('=')
        .chars()
        .map(|c| {
            if c == '-' {
                '+'
            } else if c == '_' {
                '/'
            } else {
                c
            }
        })
        .collect();
    while !standard.len().is_multiple_of(4) {
        standard.push('=');
    }
    crate::base64::decode(&standard).ok()
}
