//! SCRAM's four messages (RFC 5802 section 7), parsed and written as Kafka's
//! `ScramMessages` does.
//!
//! Kafka matches each message against a regular expression over ASCII
//! classes; every class excludes ',', so a message splits on ',' into its
//! attributes and each attribute is checked against its class. A parse error
//! is Kafka's SaslException text, which the server logs but never sends.

use crate::base64;

/// A parse failure: Kafka's message for it.
pub(crate) type ParseError = String;

/// `n,[a=authzid],[m=reserved,]n=saslname,r=nonce[,ext=value]*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClientFirstMessage {
    /// The `a=` value as sent (still escaped), empty when absent.
    pub authorization_id: String,
    pub sasl_name: String,
    pub nonce: String,
    /// Extensions in the order sent.
    pub extensions: Vec<(String, String)>,
}

impl ClientFirstMessage {
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        let invalid = || format!("Invalid SCRAM client first message format: {}", String::from_utf8_lossy(bytes));
        let text = ascii_text(bytes).ok_or_else(invalid)?;
        let mut attributes = text.split(',');
        if attributes.next() != Some("n") {
            return Err(invalid());
        }
        let authorization_id = match attributes.next() {
            Some("") => String::new(),
            Some(attribute) => value_of(attribute, "a=").filter(|v| is_sasl_name(v)).ok_or_else(invalid)?.to_string(),
            None => return Err(invalid()),
        };
        let mut attribute = attributes.next().ok_or_else(invalid)?;
        // Kafka accepts and ignores a reserved `m=` attribute.
        if value_of(attribute, "m=").is_some_and(is_value) {
            attribute = attributes.next().ok_or_else(invalid)?;
        }
        let sasl_name = value_of(attribute, "n=").filter(|v| is_sasl_name(v)).ok_or_else(invalid)?;
        let nonce =
            attributes.next().and_then(|a| value_of(a, "r=")).filter(|v| is_printable(v)).ok_or_else(invalid)?;
        let extensions = attributes.map(parse_extension).collect::<Option<Vec<_>>>().ok_or_else(invalid)?;
        Ok(Self { authorization_id, sasl_name: sasl_name.to_string(), nonce: nonce.to_string(), extensions })
    }

    /// `n,,` or `n,a=<authzid>,`: the GS2 header as sent, which the
    /// client-final `c=` must carry (RFC 5802 section 7). Kafka's own
    /// `gs2Header()` leaves out the `a=`, but only its client, which never
    /// sends an authzid, uses it.
    pub fn gs2_header(&self) -> String {
        if self.authorization_id.is_empty() {
            "n,,".to_string()
        } else {
            format!("n,a={},", self.authorization_id)
        }
    }

    /// client-first-message-bare as the auth message uses it: the user name,
    /// nonce and extensions (Kafka rebuilds it without `m=`).
    pub fn bare(&self) -> String {
        let mut bare = format!("n={},r={}", self.sasl_name, self.nonce);
        for (key, value) in &self.extensions {
            bare.push_str(&format!(",{key}={value}"));
        }
        bare
    }

    pub fn to_message(&self) -> String {
        format!("{}{}", self.gs2_header(), self.bare())
    }

    /// An extension's value; the last one wins, as in Kafka's map.
    pub fn extension(&self, key: &str) -> Option<&str> {
        self.extensions.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// `tokenauth=true` (any case, as Java's `Boolean.parseBoolean`): the
    /// client authenticates with a delegation token.
    pub fn token_authenticated(&self) -> bool {
        self.extension("tokenauth").is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

/// `[m=reserved,]r=nonce,s=salt,i=iterations[,ext=value]*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerFirstMessage {
    /// The client's nonce followed by the server's.
    pub nonce: String,
    pub salt: Vec<u8>,
    pub iterations: i32,
}

impl ServerFirstMessage {
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        let invalid = || format!("Invalid SCRAM server first message format: {}", String::from_utf8_lossy(bytes));
        let text = ascii_text(bytes).ok_or_else(invalid)?;
        let mut attributes = text.split(',').peekable();
        if attributes.peek().and_then(|a| value_of(a, "m=")).is_some_and(is_value) {
            attributes.next();
        }
        let nonce =
            attributes.next().and_then(|a| value_of(a, "r=")).filter(|v| is_printable(v)).ok_or_else(invalid)?;
        let salt = attributes.next().and_then(|a| value_of(a, "s=")).ok_or_else(invalid)?;
        let salt = base64::decode(salt).map_err(|_| invalid())?;
        let iterations = attributes.next().and_then(|a| value_of(a, "i=")).ok_or_else(invalid)?;
        if iterations.is_empty() || !iterations.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        if !attributes.all(|a| parse_extension(a).is_some()) {
            return Err(invalid());
        }
        let iterations: i32 = iterations
            .parse()
            .map_err(|_| "Invalid SCRAM server first message format: invalid iterations".to_string())?;
        if iterations <= 0 {
            return Err(format!("Invalid SCRAM server first message format: invalid iterations {iterations}"));
        }
        Ok(Self { nonce: nonce.to_string(), salt, iterations })
    }

    pub fn to_message(&self) -> String {
        format!("r={},s={},i={}", self.nonce, base64::encode(&self.salt), self.iterations)
    }
}

/// `c=channel-binding,r=nonce[,ext=value]*,p=proof`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClientFinalMessage {
    pub channel_binding: Vec<u8>,
    pub nonce: String,
    pub proof: Vec<u8>,
}

impl ClientFinalMessage {
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        let invalid = || format!("Invalid SCRAM client final message format: {}", String::from_utf8_lossy(bytes));
        let text = ascii_text(bytes).ok_or_else(invalid)?;
        let attributes: Vec<&str> = text.split(',').collect();
        let [channel, nonce, middle @ .., proof] = attributes.as_slice() else {
            return Err(invalid());
        };
        let channel_binding = value_of(channel, "c=").and_then(|v| base64::decode(v).ok()).ok_or_else(invalid)?;
        let nonce = value_of(nonce, "r=").filter(|v| is_printable(v)).ok_or_else(invalid)?;
        if !middle.iter().all(|a| parse_extension(a).is_some()) {
            return Err(invalid());
        }
        let proof = value_of(proof, "p=").and_then(|v| base64::decode(v).ok()).ok_or_else(invalid)?;
        Ok(Self { channel_binding, nonce: nonce.to_string(), proof })
    }

    /// client-final-message-without-proof as the auth message uses it (Kafka
    /// rebuilds it from the decoded binding and the nonce, without extensions).
    pub fn without_proof(&self) -> String {
        format!("c={},r={}", base64::encode(&self.channel_binding), self.nonce)
    }

    pub fn to_message(&self) -> String {
        format!("{},p={}", self.without_proof(), base64::encode(&self.proof))
    }
}

/// `e=error` or `v=server-signature[,ext=value]*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ServerFinalMessage {
    Error(String),
    Signature(Vec<u8>),
}

impl ServerFinalMessage {
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        let invalid = || format!("Invalid SCRAM server final message format: {}", String::from_utf8_lossy(bytes));
        let text = ascii_text(bytes).ok_or_else(invalid)?;
        // Kafka's pattern allows extensions after `v=` only; an error value
        // has neither '=' nor ','.
        if let Some(error) = value_of(text, "e=") {
            return if is_value(error) && !error.contains('=') {
                Ok(ServerFinalMessage::Error(error.to_string()))
            } else {
                Err(invalid())
            };
        }
        let mut attributes = text.split(',');
        let signature = attributes.next().and_then(|a| value_of(a, "v=")).ok_or_else(invalid)?;
        let signature = base64::decode(signature).map_err(|_| invalid())?;
        if !attributes.all(|a| parse_extension(a).is_some()) {
            return Err(invalid());
        }
        Ok(ServerFinalMessage::Signature(signature))
    }

    pub fn to_message(&self) -> String {
        match self {
            ServerFinalMessage::Error(error) => format!("e={error}"),
            ServerFinalMessage::Signature(signature) => format!("v={}", base64::encode(signature)),
        }
    }
}

/// The message as text if every byte is in Kafka's `\x01-\x7F`; every
/// pattern Kafka uses is confined to that range.
fn ascii_text(bytes: &[u8]) -> Option<&str> {
    if bytes.iter().all(|&b| (0x01..=0x7f).contains(&b)) {
        std::str::from_utf8(bytes).ok()
    } else {
        None
    }
}

fn value_of<'a>(attribute: &'a str, prefix: &str) -> Option<&'a str> {
    attribute.strip_prefix(prefix)
}

/// `ALPHA=VALUE`: letters, '=', then anything but ',' (may hold '=').
fn parse_extension(attribute: &str) -> Option<(String, String)> {
    let (key, value) = attribute.split_once('=')?;
    let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
    (key_ok && is_value(value)).then(|| (key.to_string(), value.to_string()))
}

/// Kafka's VALUE: one or more of `\x01-\x7F` but ','.
fn is_value(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| (0x01..=0x7f).contains(&b) && b != b',')
}

/// Kafka's PRINTABLE: one or more of `\x21-\x7E` but ','.
pub(crate) fn is_printable(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// Kafka's SASLNAME: one or more of `\x01-\x7F` but '=' and ',', or the
/// escapes `=2C` and `=3D`.
fn is_sasl_name(value: &str) -> bool {
    let bytes = value.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'=' => {
                let escape = bytes.get(index + 1..index + 3);
                if escape != Some(b"2C") && escape != Some(b"3D") {
                    return false;
                }
                index += 3;
            }
            b',' | 0 | 0x80..=0xff => return false,
            _ => index += 1,
        }
    }
    !bytes.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_plain_client_first_message() {
        let message = ClientFirstMessage::parse(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").expect("valid");
        assert_eq!(message.authorization_id, "");
        assert_eq!(message.sasl_name, "user");
        assert_eq!(message.nonce, "rOprNGfwEbeRWgbNEkqO");
        assert!(message.extensions.is_empty());
        assert_eq!(message.gs2_header(), "n,,");
        assert_eq!(message.bare(), "n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(message.to_message(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    }

    #[test]
    fn parses_authzid_reserved_and_extensions() {
        let message =
            ClientFirstMessage::parse(b"n,a=bob,m=ignored,n=b=2Cob,r=abc,tokenauth=TRUE,x=a=b").expect("valid");
        assert_eq!(message.authorization_id, "bob");
        assert_eq!(message.sasl_name, "b=2Cob");
        assert_eq!(message.gs2_header(), "n,a=bob,");
        assert_eq!(message.extensions, vec![("tokenauth".into(), "TRUE".into()), ("x".into(), "a=b".into())]);
        assert!(message.token_authenticated());
        assert_eq!(message.bare(), "n=b=2Cob,r=abc,tokenauth=TRUE,x=a=b");
        let message = ClientFirstMessage::parse(b"n,,n=u,r=abc,tokenauth=false").expect("valid");
        assert!(!message.token_authenticated());
    }

    #[test]
    fn refuses_malformed_client_first_messages() {
        let bad: [&[u8]; 17] = [
            b"",
            b"n,,",
            b"y,,n=user,r=abc",
            b"p=tls-unique,,n=user,r=abc",
            b"n,a=,n=user,r=abc",
            b"n,,n=,r=abc",
            b"n,,n=us=er,r=abc",
            b"n,,n=user,r=",
            b"n,,n=user,r=a b",
            b"n,,n=user",
            b"n,,r=abc,n=user",
            b"n,,n=user,r=abc,",
            b"n,,n=user,r=abc,1=2",
            b"n,,n=user,r=abc,k=",
            b"n,,n=us\xc3\xa9r,r=abc",
            b"n,,n=us\0er,r=abc",
            b"n,,m=,n=user,r=abc",
        ];
        for message in bad {
            let error = ClientFirstMessage::parse(message).expect_err(&String::from_utf8_lossy(message));
            assert!(error.starts_with("Invalid SCRAM client first message format: "), "{error}");
        }
    }

    #[test]
    fn server_first_message_round_trips() {
        let message = ServerFirstMessage { nonce: "abcdef".into(), salt: b"salt".to_vec(), iterations: 4096 };
        assert_eq!(message.to_message(), "r=abcdef,s=c2FsdA==,i=4096");
        assert_eq!(ServerFirstMessage::parse(message.to_message().as_bytes()), Ok(message.clone()));
        assert_eq!(ServerFirstMessage::parse(b"m=x,r=abcdef,s=c2FsdA==,i=4096,ext=1"), Ok(message));
    }

    #[test]
    fn refuses_malformed_server_first_messages() {
        let cases: [(&[u8], &str); 6] = [
            (b"r=abc,s=c2FsdA==", "Invalid SCRAM server first message format: r=abc,s=c2FsdA=="),
            (b"r=abc,s=c2Fsd,i=1", "Invalid SCRAM server first message format: r=abc,s=c2Fsd,i=1"),
            (b"r=abc,s=c2FsdA==,i=-1", "Invalid SCRAM server first message format: r=abc,s=c2FsdA==,i=-1"),
            (b"r=abc,s=c2FsdA==,i=0", "Invalid SCRAM server first message format: invalid iterations 0"),
            (b"r=abc,s=c2FsdA==,i=2147483648", "Invalid SCRAM server first message format: invalid iterations"),
            (b"s=c2FsdA==,r=abc,i=1", "Invalid SCRAM server first message format: s=c2FsdA==,r=abc,i=1"),
        ];
        for (message, expected) in cases {
            assert_eq!(ServerFirstMessage::parse(message), Err(expected.to_string()));
        }
    }

    #[test]
    fn client_final_message_round_trips() {
        let message =
            ClientFinalMessage { channel_binding: b"n,,".to_vec(), nonce: "abc".into(), proof: vec![1, 2, 3] };
        assert_eq!(message.without_proof(), "c=biws,r=abc");
        assert_eq!(message.to_message(), "c=biws,r=abc,p=AQID");
        assert_eq!(ClientFinalMessage::parse(b"c=biws,r=abc,p=AQID"), Ok(message.clone()));
        // Extensions between the nonce and the proof are accepted and dropped.
        assert_eq!(ClientFinalMessage::parse(b"c=biws,r=abc,p=x,e=y,p=AQID"), Ok(message));
    }

    #[test]
    fn refuses_malformed_client_final_messages() {
        let bad: [&[u8]; 8] = [
            b"",
            b"c=biws,r=abc",
            b"c=biws,p=AQID",
            b"r=abc,c=biws,p=AQID",
            b"c=biw,r=abc,p=AQID",
            b"c=biws,r=abc,p=AQI",
            b"c=biws,r=abc,p=AQID,",
            b"c=biws,r=abc,1=2,p=AQID",
        ];
        for message in bad {
            let error = ClientFinalMessage::parse(message).expect_err(&String::from_utf8_lossy(message));
            assert!(error.starts_with("Invalid SCRAM client final message format: "), "{error}");
        }
    }

    #[test]
    fn server_final_messages() {
        assert_eq!(ServerFinalMessage::parse(b"v=AQID"), Ok(ServerFinalMessage::Signature(vec![1, 2, 3])));
        assert_eq!(ServerFinalMessage::parse(b"v=AQID,x=y"), Ok(ServerFinalMessage::Signature(vec![1, 2, 3])));
        assert_eq!(
            ServerFinalMessage::parse(b"e=invalid-proof"),
            Ok(ServerFinalMessage::Error("invalid-proof".to_string()))
        );
        assert_eq!(ServerFinalMessage::Signature(vec![1, 2, 3]).to_message(), "v=AQID");
        assert_eq!(ServerFinalMessage::Error("other-error".into()).to_message(), "e=other-error");
        for bad in [&b"x=AQID"[..], b"v=AQI", b"e=a,b", b"e=a=b", b"e=", b"v=AQID,"] {
            let error = ServerFinalMessage::parse(bad).expect_err(&String::from_utf8_lossy(bad));
            assert!(error.starts_with("Invalid SCRAM server final message format: "), "{error}");
        }
    }
}
