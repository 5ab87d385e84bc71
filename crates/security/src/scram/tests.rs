//! Whole SCRAM exchanges through [`SaslServer`] and [`SaslClient`].

use crate::base64;
use crate::credentials::{Credentials, InMemoryCredentials, ScramCredential};
use crate::mechanism::{SaslMechanism, ScramMechanism};
use crate::principal::KafkaPrincipal;
use crate::server::{AuthenticationFailed, SaslServer, SaslStep};
use crate::SaslClient;

// RFC 7677 section 3.
const RFC_CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_FIRST: &str = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

const GENERIC_256: &str =
    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256";
const GENERIC_512: &str =
    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512";

fn rfc_credentials() -> InMemoryCredentials {
    let salt = base64::decode(RFC_SALT).expect("valid base64");
    let mut credentials = InMemoryCredentials::new();
    credentials
        .add_scram_credential("user", ScramCredential::from_password(ScramMechanism::Sha256, "pencil", salt, 4096));
    credentials
}

fn rfc_server() -> SaslServer {
    SaslServer::new(SaslMechanism::ScramSha256, RFC_SERVER_NONCE.to_string())
}

fn challenge(step: Result<SaslStep, AuthenticationFailed>) -> Vec<u8> {
    match step {
        Ok(SaslStep::Challenge(token)) => token,
        other => panic!("expected a challenge, got {other:?}"),
    }
}

fn failed(message: &str) -> Result<SaslStep, AuthenticationFailed> {
    Err(AuthenticationFailed(message.to_string()))
}

#[test]
fn server_follows_rfc7677() {
    let credentials = rfc_credentials();
    let mut server = rfc_server();
    let server_first = challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
    assert_eq!(String::from_utf8_lossy(&server_first), RFC_SERVER_FIRST);
    assert!(!server.is_complete());
    let step = server.evaluate(RFC_CLIENT_FINAL.as_bytes(), &credentials);
    assert_eq!(
        step,
        Ok(SaslStep::Complete { principal: KafkaPrincipal::user("user"), token: RFC_SERVER_FINAL.as_bytes().to_vec() })
    );
    assert!(server.is_complete());
    assert_eq!(server.principal(), Some(&KafkaPrincipal::user("user")));
}

#[test]
fn client_follows_rfc7677() {
    let mut client = SaslClient::new(SaslMechanism::ScramSha256, "user", "pencil", RFC_CLIENT_NONCE.to_string());
    assert_eq!(client.initial_token(), RFC_CLIENT_FIRST.as_bytes());
    let client_final = client.evaluate(RFC_SERVER_FIRST.as_bytes()).expect("valid server-first");
    assert_eq!(client_final.as_deref(), Some(RFC_CLIENT_FINAL.as_bytes()));
    assert_eq!(client.evaluate(RFC_SERVER_FINAL.as_bytes()), Ok(None));
    assert!(client.is_complete());
}

#[test]
fn stored_keys_match_rfc7677() {
    let credential = rfc_credentials().scram_credential("user", ScramMechanism::Sha256).expect("present");
    assert_eq!(base64::encode(&credential.stored_key), "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=");
    assert_eq!(base64::encode(&credential.server_key), "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=");
}

/// Runs a client against a server; the server's failure or the principal.
fn exchange(
    mechanism: SaslMechanism,
    username: &str,
    password: &str,
    credentials: &dyn Credentials,
) -> Result<KafkaPrincipal, AuthenticationFailed> {
    let mut client = SaslClient::new(mechanism, username, password, SaslServer::random_nonce());
    let mut server = SaslServer::new(mechanism, SaslServer::random_nonce());
    let mut token = client.initial_token();
    loop {
        match server.evaluate(&token, credentials)? {
            SaslStep::Challenge(challenge) => {
                token = client.evaluate(&challenge).expect("a valid challenge").expect("a next token");
            }
            SaslStep::Complete { principal, token } => {
                assert_eq!(client.evaluate(&token), Ok(None), "the client accepts the server's last token");
                assert!(client.is_complete());
                return Ok(principal);
            }
        }
    }
}

fn sha512_credentials() -> InMemoryCredentials {
    let mut credentials = InMemoryCredentials::new();
    let salt = b"some salt".to_vec();
    credentials.add_scram_credential(
        "alice",
        ScramCredential::from_password(ScramMechanism::Sha512, "alice-secret", salt, 8192),
    );
    let salt = b"another salt".to_vec();
    credentials.add_scram_credential("a=b,c", ScramCredential::from_password(ScramMechanism::Sha512, "pw", salt, 4096));
    credentials
}

#[test]
fn sha512_round_trip() {
    let credentials = sha512_credentials();
    assert_eq!(
        exchange(SaslMechanism::ScramSha512, "alice", "alice-secret", &credentials),
        Ok(KafkaPrincipal::user("alice"))
    );
    // Names with ',' and '=' travel escaped and come out whole.
    assert_eq!(exchange(SaslMechanism::ScramSha512, "a=b,c", "pw", &credentials), Ok(KafkaPrincipal::user("a=b,c")));
}

#[test]
fn sha256_round_trip_from_a_salted_password() {
    let salt = b"salt".to_vec();
    let salted = crate::salted_password(ScramMechanism::Sha256, "s3cret", &salt, 4096);
    let mut credentials = InMemoryCredentials::new();
    credentials.add_scram_credential(
        "bob",
        ScramCredential::from_salted_password(ScramMechanism::Sha256, salt, &salted, 4096),
    );
    assert_eq!(exchange(SaslMechanism::ScramSha256, "bob", "s3cret", &credentials), Ok(KafkaPrincipal::user("bob")));
}

#[test]
fn wrong_password_fails_at_the_proof() {
    let credentials = sha512_credentials();
    let mut client = SaslClient::new(SaslMechanism::ScramSha512, "alice", "wrong", "clientnonce".into());
    let mut server = SaslServer::new(SaslMechanism::ScramSha512, "servernonce".into());
    let server_first = challenge(server.evaluate(&client.initial_token(), &credentials));
    let client_final = client.evaluate(&server_first).expect("valid").expect("a token");
    assert_eq!(server.evaluate(&client_final, &credentials), failed(GENERIC_512));
    assert_eq!(server.failure_reason(), Some("Invalid client credentials"));
    assert!(!server.is_complete());
}

#[test]
fn unknown_user_fails_at_once_like_a_wrong_password() {
    let credentials = sha512_credentials();
    let mut server = SaslServer::new(SaslMechanism::ScramSha512, "servernonce".into());
    assert_eq!(server.evaluate(b"n,,n=mallory,r=clientnonce", &credentials), failed(GENERIC_512));
    assert_eq!(server.failure_reason(), Some("Authentication failed: Invalid user credentials"));
    // A user with a credential for the other mechanism only is unknown here.
    let mut server = SaslServer::new(SaslMechanism::ScramSha256, "servernonce".into());
    assert_eq!(server.evaluate(b"n,,n=alice,r=clientnonce", &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Authentication failed: Invalid user credentials"));
}

#[test]
fn tampered_nonce_fails() {
    let credentials = rfc_credentials();
    let mut server = rfc_server();
    challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
    let tampered = RFC_CLIENT_FINAL.replace("k0,p=", "k1,p=");
    assert_eq!(server.evaluate(tampered.as_bytes(), &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Invalid client nonce in the final client message."));
    // Only the client's part of the nonce is not enough either.
    let mut server = rfc_server();
    challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
    let short = RFC_CLIENT_FINAL.replace(RFC_SERVER_NONCE, "");
    assert_eq!(server.evaluate(short.as_bytes(), &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Invalid client nonce in the final client message."));
}

#[test]
fn a_proof_for_another_server_nonce_fails() {
    // The RFC's client-final replayed against a server that chose another nonce.
    let credentials = rfc_credentials();
    let mut server = SaslServer::new(SaslMechanism::ScramSha256, "adifferentservernonce".into());
    challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
    assert_eq!(server.evaluate(RFC_CLIENT_FINAL.as_bytes(), &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Invalid client nonce in the final client message."));
}

#[test]
fn tampered_proof_and_channel_binding_fail() {
    let credentials = rfc_credentials();
    let mut server = rfc_server();
    challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
    let tampered = RFC_CLIENT_FINAL.replace("p=dHzb", "p=dHzc");
    assert_eq!(server.evaluate(tampered.as_bytes(), &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Invalid client credentials"));

    let mut server = rfc_server();
    challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
    let short_proof = RFC_CLIENT_FINAL.replace("p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "p=AQID");
    assert_eq!(server.evaluate(short_proof.as_bytes(), &credentials), failed(GENERIC_256));

    let mut server = rfc_server();
    challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
    // c=eSws is "y,,": a binding other than the GS2 header the client sent.
    let other_binding = RFC_CLIENT_FINAL.replace("c=biws", "c=eSws");
    assert_eq!(server.evaluate(other_binding.as_bytes(), &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Invalid channel binding in the final client message."));
}

#[test]
fn garbled_messages_fail() {
    let credentials = rfc_credentials();
    for garbled in [&b""[..], b"n,,n=user", b"\xff\xfe", b"n,,n=user,r=abc,", b"y,,n=user,r=abc", b"n,,n=us=er,r=abc"] {
        let mut server = rfc_server();
        assert_eq!(server.evaluate(garbled, &credentials), failed(GENERIC_256), "{garbled:?}");
        let reason = server.failure_reason().unwrap_or_default();
        assert!(reason.starts_with("Invalid SCRAM client first message format: "), "{reason}");
    }
    for garbled in [&b""[..], b"c=biws", b"c=biws,r=x,p=@@@@", RFC_CLIENT_FIRST.as_bytes()] {
        let mut server = rfc_server();
        challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
        assert_eq!(server.evaluate(garbled, &credentials), failed(GENERIC_256), "{garbled:?}");
        let reason = server.failure_reason().unwrap_or_default();
        assert!(reason.starts_with("Invalid SCRAM client final message format: "), "{reason}");
    }
}

#[test]
fn replayed_messages_fail_in_the_wrong_state() {
    let credentials = rfc_credentials();
    let mut server = rfc_server();
    challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
    assert!(matches!(server.evaluate(RFC_CLIENT_FINAL.as_bytes(), &credentials), Ok(SaslStep::Complete { .. })));
    let after_completion = failed("Unexpected challenge in Sasl server state COMPLETE");
    assert_eq!(server.evaluate(RFC_CLIENT_FINAL.as_bytes(), &credentials), after_completion);
    assert_eq!(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials), after_completion);
    assert!(server.is_complete(), "a stray token does not undo the completion");

    let mut server = rfc_server();
    assert_eq!(server.evaluate(b"garbage", &credentials), failed(GENERIC_256));
    assert_eq!(
        server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials),
        failed("Unexpected challenge in Sasl server state FAILED")
    );
    assert_eq!(server.principal(), None);
}

#[test]
fn authzid_must_be_the_user_name() {
    let credentials = rfc_credentials();
    let mut server = rfc_server();
    assert_eq!(
        server.evaluate(b"n,a=admin,n=user,r=abc", &credentials),
        failed("Authentication failed: Client requested an authorization id that is different from username")
    );
    let mut server = rfc_server();
    let server_first = challenge(server.evaluate(b"n,a=user,n=user,r=abc", &credentials));
    assert!(server_first.starts_with(b"r=abc%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s="));
    // The authzid goes through the proof: c= carries "n,a=user,".
    let mut client_side = SaslClient::new(SaslMechanism::ScramSha256, "user", "pencil", "abc".into());
    client_side.initial_token();
    let plain_final = client_side.evaluate(&server_first).expect("valid").expect("a token");
    let plain_final = String::from_utf8(plain_final).expect("ascii");
    assert!(plain_final.starts_with("c=biws,"));
    assert_eq!(server.evaluate(plain_final.as_bytes(), &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Invalid channel binding in the final client message."));
}

#[test]
fn delegation_tokens_are_refused() {
    let credentials = rfc_credentials();
    let mut server = rfc_server();
    assert_eq!(server.evaluate(b"n,,n=user,r=abc,tokenauth=true", &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Token Authentication failed: Invalid tokenId : user"));
    // Other extensions, and tokenauth=false, are ignored.
    let mut server = rfc_server();
    challenge(server.evaluate(b"n,,n=user,r=abc,tokenauth=false,other=x", &credentials));
}

#[test]
fn too_few_iterations_fail() {
    let mut credentials = InMemoryCredentials::new();
    credentials.add_scram_credential(
        "weak",
        ScramCredential::from_password(ScramMechanism::Sha256, "pw", b"s".to_vec(), 4095),
    );
    let mut server = rfc_server();
    assert_eq!(server.evaluate(b"n,,n=weak,r=abc", &credentials), failed(GENERIC_256));
    assert_eq!(server.failure_reason(), Some("Iterations 4095 is less than the minimum 4096 for SCRAM_SHA_256"));
}

#[test]
fn reauthentication_changes_only_the_wording() {
    let credentials = rfc_credentials();
    let mut server = rfc_server().with_reauthentication(true);
    assert_eq!(
        server.evaluate(b"n,,n=nobody,r=abc", &credentials),
        failed("Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
    );
}

#[test]
fn client_refuses_bad_server_answers() {
    let new_client = || {
        let mut client = SaslClient::new(SaslMechanism::ScramSha256, "user", "pencil", RFC_CLIENT_NONCE.to_string());
        client.initial_token();
        client
    };
    let refused = |server_first: &str, message: &str| {
        let mut client = new_client();
        assert_eq!(client.evaluate(server_first.as_bytes()), Err(AuthenticationFailed(message.to_string())));
        assert!(!client.is_complete());
    };
    refused(
        "r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "Invalid server nonce: does not start with client nonce",
    );
    refused(
        "r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095",
        "Requested iterations 4095 is less than the minimum 4096 for SCRAM_SHA_256",
    );
    refused(
        "r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000000",
        "Requested iterations 1000000 is more than the maximum 16384 for SCRAM_SHA_256",
    );
    refused("garbage", "Invalid SCRAM server first message format: garbage");

    let mut client = new_client();
    client.evaluate(RFC_SERVER_FIRST.as_bytes()).expect("valid");
    assert_eq!(
        client.evaluate(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
        Err(AuthenticationFailed("Invalid server signature in server final message".into()))
    );
    let mut client = new_client();
    client.evaluate(RFC_SERVER_FIRST.as_bytes()).expect("valid");
    assert_eq!(
        client.evaluate(b"e=invalid-proof"),
        Err(AuthenticationFailed("Sasl authentication using SCRAM_SHA_256 failed with error: invalid-proof".into()))
    );
    assert_eq!(
        client.evaluate(RFC_SERVER_FINAL.as_bytes()),
        Err(AuthenticationFailed("Unexpected challenge in Sasl client state FAILED".into()))
    );
}

#[test]
fn client_refuses_tokens_out_of_order() {
    let mut client = SaslClient::new(SaslMechanism::ScramSha256, "user", "pencil", RFC_CLIENT_NONCE.to_string());
    assert_eq!(
        client.evaluate(RFC_SERVER_FIRST.as_bytes()),
        Err(AuthenticationFailed("Unexpected challenge in Sasl client state SEND_CLIENT_FIRST_MESSAGE".into()))
    );
    let mut client = SaslClient::new(SaslMechanism::ScramSha256, "user", "pencil", RFC_CLIENT_NONCE.to_string());
    client.initial_token();
    client.evaluate(RFC_SERVER_FIRST.as_bytes()).expect("valid");
    client.evaluate(RFC_SERVER_FINAL.as_bytes()).expect("valid");
    assert_eq!(
        client.evaluate(RFC_SERVER_FINAL.as_bytes()),
        Err(AuthenticationFailed("Unexpected challenge in Sasl client state COMPLETE".into()))
    );
    assert!(client.is_complete());
}

#[test]
fn authzid_equal_to_the_user_name_is_accepted() {
    let credentials = rfc_credentials();
    let mut server = rfc_server();
    let server_first = challenge(server.evaluate(b"n,a=user,n=user,r=abc", &credentials));
    let server_first = String::from_utf8(server_first).expect("ascii");
    let nonce = format!("abc{RFC_SERVER_NONCE}");
    // A client that sent an authzid binds "n,a=user," into its proof.
    let without_proof = format!("c={},r={nonce}", base64::encode(b"n,a=user,"));
    let salt = base64::decode(RFC_SALT).expect("valid base64");
    let salted = crate::salted_password(ScramMechanism::Sha256, "pencil", &salt, 4096);
    let auth_message = format!("n=user,r=abc,{server_first},{without_proof}");
    let proof = super::client::client_proof(ScramMechanism::Sha256, &salted, &auth_message);
    let client_final = format!("{without_proof},p={}", base64::encode(&proof));
    let step = server.evaluate(client_final.as_bytes(), &credentials);
    assert!(matches!(step, Ok(SaslStep::Complete { ref principal, .. }) if *principal == KafkaPrincipal::user("user")));
}

/// A small deterministic generator, so the mutation test below repeats.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

/// Flips, drops, inserts or truncates a few bytes of `message`.
fn mutate(message: &[u8], random: &mut XorShift) -> Vec<u8> {
    const INTERESTING: &[u8] = b",=\0\xff+/ancrpv2C3D";
    let mut bytes = message.to_vec();
    for _ in 0..=random.below(3) {
        let at = random.below(bytes.len() + 1);
        match random.below(4) {
            0 if at < bytes.len() => bytes[at] ^= 1 << random.below(8),
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            2 => bytes.insert(at, INTERESTING[random.below(INTERESTING.len())]),
            _ => bytes.truncate(at),
        }
    }
    bytes
}

#[test]
fn mutated_messages_never_panic_nor_authenticate() {
    let credentials = rfc_credentials();
    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2000 {
        let client_first = mutate(RFC_CLIENT_FIRST.as_bytes(), &mut random);
        let mut server = rfc_server();
        let _ = server.evaluate(&client_first, &credentials);

        let mut server = rfc_server();
        challenge(server.evaluate(RFC_CLIENT_FIRST.as_bytes(), &credentials));
        let client_final = mutate(RFC_CLIENT_FINAL.as_bytes(), &mut random);
        if client_final != RFC_CLIENT_FINAL.as_bytes() {
            assert!(
                server.evaluate(&client_final, &credentials).is_err(),
                "{:?}",
                String::from_utf8_lossy(&client_final)
            );
        }

        let mut client = SaslClient::new(SaslMechanism::ScramSha256, "user", "pencil", RFC_CLIENT_NONCE.to_string());
        client.initial_token();
        let server_first = mutate(RFC_SERVER_FIRST.as_bytes(), &mut random);
        // Mutations may raise the iteration count: keep Hi() cheap.
        if String::from_utf8_lossy(&server_first).contains(",i=4096") {
            let _ = client.evaluate(&server_first);
        }
    }
}
