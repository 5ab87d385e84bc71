//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` checks it:
//! `[authzid] NUL authcid NUL passwd`, one message, no answer but success.

use crate::credentials::Credentials;
use crate::failure::Failure;

/// What PLAIN's one message names: the user, who it acts as, its password.
#[derive(Debug, PartialEq, Eq)]
struct PlainMessage {
    authorization_id: String,
    username: String,
    password: String,
}

/// Checks a client's PLAIN message; on success, the user name it proved.
/// Every failure is one Kafka sends the client as it is.
pub(crate) fn authenticate(token: &[u8], credentials: &dyn Credentials) -> Result<String, Failure> {
    let message = parse(token)?;
    if message.username.is_empty() {
        return Err(Failure::Visible("Authentication failed: username not specified".into()));
    }
    if message.password.is_empty() {
        return Err(Failure::Visible("Authentication failed: password not specified".into()));
    }
    // Kafka checks the password before the authzid, so a wrong password
    // reads the same whatever authzid came with it.
    if !credentials.plain_password_matches(&message.username, &message.password) {
        return Err(Failure::Visible("Authentication failed: Invalid username or password".into()));
    }
    if !message.authorization_id.is_empty() && message.authorization_id != message.username {
        return Err(Failure::Visible(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    Ok(message.username)
}

/// Splits the message on NUL as Kafka's `extractTokens`: at most four
/// pieces are looked at, and exactly three must be there.
fn parse(token: &[u8]) -> Result<PlainMessage, Failure> {
    // Java decodes with replacement characters, never failing; so do we.
    let text = String::from_utf8_lossy(token);
    let mut tokens: Vec<&str> = Vec::with_capacity(4);
    let mut rest: &str = &text;
    for _ in 0..4 {
        match rest.split_once('\0') {
            Some((piece, after)) => {
                tokens.push(piece);
                rest = after;
            }
            None => {
                tokens.push(rest);
                break;
            }
        }
    }
    match tokens.as_slice() {
        [authorization_id, username, password] => Ok(PlainMessage {
            authorization_id: authorization_id.to_string(),
            username: username.to_string(),
            password: password.to_string(),
        }),
        _ => Err(Failure::Visible(format!("Invalid SASL/PLAIN response: expected 3 tokens, got {}", tokens.len()))),
    }
}

/// The client's message: no authzid, as Kafka's clients send it.
pub(crate) fn initial_response(username: &str, password: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(username.len() + password.len() + 2);
    message.push(0);
    message.extend_from_slice(username.as_bytes());
    message.push(0);
    message.extend_from_slice(password.as_bytes());
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::InMemoryCredentials;

    fn users() -> InMemoryCredentials {
        let mut credentials = InMemoryCredentials::new();
        credentials.add_plain_user("alice", "alice-secret");
        credentials.add_plain_user("bob", "b\u{e9}b");
        credentials
    }

    fn visible(message: &str) -> Result<String, Failure> {
        Err(Failure::Visible(message.to_string()))
    }

    #[test]
    fn accepts_a_right_password_with_or_without_authzid() {
        assert_eq!(authenticate(b"\0alice\0alice-secret", &users()), Ok("alice".to_string()));
        assert_eq!(authenticate(b"alice\0alice\0alice-secret", &users()), Ok("alice".to_string()));
        assert_eq!(authenticate("\0bob\0b\u{e9}b".as_bytes(), &users()), Ok("bob".to_string()));
        assert_eq!(authenticate(&initial_response("alice", "alice-secret"), &users()), Ok("alice".to_string()));
    }

    #[test]
    fn counts_tokens_as_kafka() {
        let cases: [(&[u8], usize); 5] =
            [(b"", 1), (b"alice", 1), (b"\0alice", 2), (b"\0alice\0pw\0", 4), (b"a\0b\0c\0d\0e\0f", 4)];
        for (token, count) in cases {
            let expected = format!("Invalid SASL/PLAIN response: expected 3 tokens, got {count}");
            assert_eq!(authenticate(token, &users()), visible(&expected));
        }
    }

    #[test]
    fn refuses_empty_username_then_empty_password() {
        assert_eq!(authenticate(b"\0\0", &users()), visible("Authentication failed: username not specified"));
        assert_eq!(authenticate(b"\0\0pw", &users()), visible("Authentication failed: username not specified"));
        assert_eq!(authenticate(b"\0alice\0", &users()), visible("Authentication failed: password not specified"));
        // A trailing NUL makes the password the empty third token.
        assert_eq!(
            authenticate(b"alice\0alice-secret\0", &users()),
            visible("Authentication failed: password not specified")
        );
    }

    #[test]
    fn refuses_wrong_password_and_unknown_user_alike() {
        let invalid = visible("Authentication failed: Invalid username or password");
        assert_eq!(authenticate(b"\0alice\0wrong", &users()), invalid);
        assert_eq!(authenticate(b"\0mallory\0alice-secret", &users()), invalid);
        assert_eq!(authenticate(b"bob\0alice\0wrong", &users()), invalid);
        // Bytes that are not UTF-8 are replaced, so they match no password.
        assert_eq!(authenticate(b"\0bob\0b\xe9b", &users()), invalid);
    }

    #[test]
    fn refuses_another_authzid_after_a_right_password() {
        assert_eq!(
            authenticate(b"bob\0alice\0alice-secret", &users()),
            visible("Authentication failed: Client requested an authorization id that is different from username")
        );
    }
}
