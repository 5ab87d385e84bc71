//! The SASL servers (PLAIN, SCRAM-SHA-256/512) and the JAAS parser, as a
//! client that has not authenticated reaches them.
//!
//! Input: byte 0 picks the mode: 0-2 a mechanism (PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512), the rest is split at 0xFF bytes into up to four tokens
//! fed to one server in turn; 3 and above, the rest is JAAS text.
//!
//! Properties: never panics; an exchange completes only as the one user
//! with credentials, PLAIN only with that user's password (the seeds hold
//! whole SCRAM exchanges that succeed, which mutations then break); after a
//! failure no token completes the exchange; JAAS text either parses
//! or is refused, and its PLAIN users read from any entry it parses.
#![no_main]

use std::sync::OnceLock;

use krabka_security::{
    jaas, InMemoryCredentials, SaslMechanism, SaslServer, SaslStep, ScramCredential, ScramMechanism,
};
use libfuzzer_sys::fuzz_target;

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";

fn credentials() -> &'static InMemoryCredentials {
    static CREDENTIALS: OnceLock<InMemoryCredentials> = OnceLock::new();
    CREDENTIALS.get_or_init(|| {
        let mut credentials = InMemoryCredentials::new();
        credentials.add_plain_user(USER, PASSWORD);
        for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let credential = ScramCredential::from_password(mechanism, PASSWORD, b"fuzz-salt".to_vec(), 4096);
            credentials.add_scram_credential(USER, credential);
        }
        credentials
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mechanism = match mode {
        0 => SaslMechanism::Plain,
        1 => SaslMechanism::ScramSha256,
        2 => SaslMechanism::ScramSha512,
        _ => return jaas_text(rest),
    };
    let mut server = SaslServer::new(mechanism, "fuzzServerNonce".into());
    let mut failed = false;
    for token in rest.split(|&b| b == 0xFF).take(4) {
        match server.evaluate(token, credentials()) {
            Ok(SaslStep::Complete { principal, .. }) => {
                assert!(!failed, "completed after a failure");
                assert_eq!(principal.name, USER, "only the user with credentials logs in");
                if mechanism == SaslMechanism::Plain {
                    let text = String::from_utf8_lossy(token);
                    assert!(text.ends_with(&format!("\0{USER}\0{PASSWORD}")), "PLAIN completed for {text:?}");
                }
            }
            Ok(SaslStep::Challenge(_)) => assert!(!failed, "a challenge after a failure"),
            Err(_) => failed = true,
        }
    }
});

fn jaas_text(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if let Ok(entries) = jaas::parse(&text) {
        for entry in &entries {
            let users = jaas::plain_users(entry);
            assert!(users.keys().all(|name| entry.options.contains_key(&format!("user_{name}"))));
        }
    }
}
