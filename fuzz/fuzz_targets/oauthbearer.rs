//! OAUTHBEARER's untrusted inputs: the client's initial response, an
//! unsecured JWT, a signed JWT against a fixed key set, and a JWKS document.
//!
//! Input: byte 0 picks the mode (0: initial response bytes; 1: unsecured
//! token; 2: signed token; 3: JWKS text), the rest is the input (read as
//! UTF-8 with replacement where text is wanted).
//!
//! Properties: never panics; a parsed initial response parses back the
//! same from the bytes it writes; an unsecured token accepted has a
//! non-blank principal and has not expired; no signed token is accepted
//! (the fuzzer cannot forge an ES256 signature of RFC 7515's key).
#![no_main]

use std::sync::OnceLock;

use krabka_security::oauthbearer::client_response::ClientInitialResponse;
use krabka_security::oauthbearer::jws::{JsonWebKeySet, JwtValidationConfig, SignedJwtValidator};
use krabka_security::oauthbearer::unsecured;
use libfuzzer_sys::fuzz_target;

const NOW_MS: i64 = 1_700_000_000_000;

/// RFC 7515 appendix A.3's P-256 key, whose private half the fuzzer lacks.
fn validator() -> &'static SignedJwtValidator {
    static VALIDATOR: OnceLock<SignedJwtValidator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let jwks = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"a3",
            "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;
        let keys = JsonWebKeySet::parse(jwks).expect("the RFC's key");
        assert_eq!(keys.len(), 1);
        SignedJwtValidator::new(JwtValidationConfig::default(), keys)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    match mode % 4 {
        0 => {
            if let Ok(parsed) = ClientInitialResponse::parse(rest) {
                assert_eq!(ClientInitialResponse::parse(&parsed.to_bytes()).as_ref(), Ok(&parsed));
            }
        }
        1 => {
            if let Ok(token) = unsecured::validate(&text, &Default::default(), NOW_MS) {
                assert!(!token.principal_name.trim().is_empty());
                assert!(token.lifetime_ms > NOW_MS, "{token:?}");
            }
        }
        2 => assert!(validator().validate(&text, NOW_MS).is_err(), "a forged token was accepted: {text:?}"),
        _ => {
            let _ = JsonWebKeySet::parse(&text);
        }
    }
});
