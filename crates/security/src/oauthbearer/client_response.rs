//! The OAUTHBEARER client's initial response (RFC 7628 section 3.1), as
//! Kafka's `OAuthBearerClientInitialResponse` reads it:
//! `n,[a=<authzid>],^Aauth=Bearer <token>^A[key=value^A]...^A`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;

/// The separator between the key-value pairs (control-A).
const SEPARATOR: char = '\u{1}';

/// What the client sent: its token, the authorization id it asked for
/// (empty when none) and its SASL extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientInitialResponse {
    pub token: String,
    pub authorization_id: String,
    pub extensions: BTreeMap<String, String>,
}

/// Kafka's patterns: a saslname (with `=2C`/`=3D` escapes), key=value
/// pairs each ended by ^A, then a final ^A.
fn whole_message() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        let saslname = r"(?:[\x01-\x7F&&[^=,]]|=2C|=3D)+";
        let kvpairs = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*";
        Regex::new(&format!(r"\An,(?:a=(?<authzid>{saslname}))?,\x01(?<kvpairs>{kvpairs})\x01\z"))
            .expect("a valid pattern")
    })
}

fn auth_value() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(r"\A(?<scheme>[A-Za-z0-9_]+) +(?<token>[-_~+/.a-zA-Z0-9]+=*)\z").expect("a valid pattern")
    })
}

impl ClientInitialResponse {
    /// Parses the client's first message; the error is Kafka's
    /// SaslException text (the client is told only that it failed).
    pub fn parse(message: &[u8]) -> Result<Self, String> {
        let invalid = || "Invalid OAUTHBEARER client first message".to_string();
        let text = std::str::from_utf8(message).map_err(|_| invalid())?;
        let captures = whole_message().captures(text).ok_or_else(invalid)?;
        let authorization_id = captures.name("authzid").map_or("", |m| m.as_str()).to_string();
        let mut extensions = parse_pairs(&captures["kvpairs"]);
        let auth = extensions
            .remove("auth")
            .ok_or_else(|| "Invalid OAUTHBEARER client first message: 'auth' not specified".to_string())?;
        let auth = auth_value()
            .captures(&auth)
            .ok_or_else(|| "Invalid OAUTHBEARER client first message: invalid 'auth' format".to_string())?;
        if !auth["scheme"].eq_ignore_ascii_case("bearer") {
            return Err(format!("Invalid scheme in OAUTHBEARER client first message: {}", &auth["scheme"]));
        }
        Ok(ClientInitialResponse { token: auth["token"].to_string(), authorization_id, extensions })
    }

    /// The message a client sends (`OAuthBearerClientInitialResponse.toBytes`).
    pub fn to_bytes(&self) -> Vec<u8> {
        let authzid =
            if self.authorization_id.is_empty() { String::new() } else { format!("a={}", self.authorization_id) };
        let extensions: String = self.extensions.iter().map(|(k, v)| format!("{SEPARATOR}{k}={v}")).collect();
        format!("n,{authzid},{SEPARATOR}auth=Bearer {}{extensions}{SEPARATOR}{SEPARATOR}", self.token).into_bytes()
    }
}

/// Kafka's `Utils.parseMap(kvPairs, "=", SEPARATOR)`: each pair split at its
/// first `=`; a later pair with the same key wins.
fn parse_pairs(pairs: &str) -> BTreeMap<String, String> {
    pairs
        .split(SEPARATOR)
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| pair.split_once('='))
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_client_message_parses() {
        let parsed = ClientInitialResponse::parse(b"n,,\x01auth=Bearer abc.def.\x01\x01").expect("valid");
        assert_eq!(parsed.token, "abc.def.");
        assert_eq!(parsed.authorization_id, "");
        assert!(parsed.extensions.is_empty());
        let with_all = b"n,a=alice,\x01auth=Bearer t0k3n==\x01traceId=42\x01region=eu west\x01\x01";
        let parsed = ClientInitialResponse::parse(with_all).expect("valid");
        assert_eq!((parsed.token.as_str(), parsed.authorization_id.as_str()), ("t0k3n==", "alice"));
        assert_eq!(parsed.extensions.get("region").map(String::as_str), Some("eu west"));
        assert_eq!(ClientInitialResponse::parse(&parsed.to_bytes()).expect("round trip"), parsed);
        let lower_case_scheme = ClientInitialResponse::parse(b"n,,\x01auth=bearer x\x01\x01").expect("valid");
        assert_eq!(lower_case_scheme.token, "x");
    }

    #[test]
    fn malformed_messages_are_refused_with_kafkas_text() {
        for bad in [
            &b""[..],
            b"n,,auth=Bearer x\x01\x01",
            b"y,,\x01auth=Bearer x\x01\x01",
            b"n,,\x01auth=Bearer x\x01",
            b"n,a=a,b,\x01auth=Bearer x\x01\x01",
            b"n,,\x01auth=Bearer x\x01\x01\x01",
            b"\xff",
        ] {
            assert_eq!(ClientInitialResponse::parse(bad), Err("Invalid OAUTHBEARER client first message".into()));
        }
        assert_eq!(
            ClientInitialResponse::parse(b"n,,\x01key=v\x01\x01"),
            Err("Invalid OAUTHBEARER client first message: 'auth' not specified".into())
        );
        assert!(ClientInitialResponse::parse(b"n,,\x01auth=Basic x\x01\x01").unwrap_err().contains("Invalid scheme"));
        assert!(ClientInitialResponse::parse(b"n,,\x01auth=Bearer a b\x01\x01").unwrap_err().contains("'auth'"));
    }
}
