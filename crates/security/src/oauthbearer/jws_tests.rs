use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, RsaKeyPair};

use super::*;

const NOW_MS: i64 = 1_700_000_000_000;
const NOW: i64 = NOW_MS / 1000;

fn url(bytes: &[u8]) -> String {
    crate::base64::encode(bytes).trim_end_matches('=').replace('+', "-").replace('/', "_")
}

/// A signing key made for the test, and its public JWK.
enum Signer {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

fn ec_signer(alg: &'static str) -> (Signer, Value) {
    let (signing, crv, size) = match alg {
        "ES256" => (&signature::ECDSA_P256_SHA256_FIXED_SIGNING, "P-256", 32),
        _ => (&signature::ECDSA_P384_SHA384_FIXED_SIGNING, "P-384", 48),
    };
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(signing, &rng).expect("generate");
    let pair = EcdsaKeyPair::from_pkcs8(signing, pkcs8.as_ref(), &rng).expect("load");
    let point = pair.public_key().as_ref().to_vec();
    let jwk = serde_json::json!({
        "kty": "EC", "crv": crv, "kid": alg, "use": "sig",
        "x": url(&point[1..1 + size]), "y": url(&point[1 + size..]),
    });
    (Signer::Ec(pair), jwk)
}

/// ring cannot make RSA keys: openssl does (on every machine that runs the tests).
fn rsa_signer(kid: &str) -> (Signer, Value) {
    let output = std::process::Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-outform", "DER"])
        .output()
        .expect("run openssl");
    assert!(output.status.success(), "openssl genpkey: {}", String::from_utf8_lossy(&output.stderr));
    // OpenSSL 3 writes the DER key as PKCS#1 (RSAPrivateKey).
    let pair = RsaKeyPair::from_der(&output.stdout).expect("an RSA key");
    let public: RsaPublicKeyComponents<Vec<u8>> = pair.public().into();
    let jwk = serde_json::json!({"kty": "RSA", "kid": kid, "n": url(&public.n), "e": url(&public.e)});
    (Signer::Rsa(pair), jwk)
}

/// A compact JWS of `claims` with header `alg`/`kid`, signed by `signer`.
fn token(signer: &Signer, alg: &str, kid: &str, claims: &Value) -> String {
    let header = serde_json::json!({"alg": alg, "kid": kid, "typ": "JWT"});
    let signed = format!("{}.{}", url(header.to_string().as_bytes()), url(claims.to_string().as_bytes()));
    let rng = SystemRandom::new();
    let signature = match signer {
        Signer::Ec(pair) => pair.sign(&rng, signed.as_bytes()).expect("sign").as_ref().to_vec(),
        Signer::Rsa(pair) => {
            let padding: &dyn signature::RsaEncoding = match alg {
                "PS256" => &signature::RSA_PSS_SHA256,
                _ => &signature::RSA_PKCS1_SHA256,
            };
            let mut signature = vec![0; pair.public().modulus_len()];
            pair.sign(padding, &rng, signed.as_bytes(), &mut signature).expect("sign");
            signature
        }
    };
    format!("{signed}.{}", url(&signature))
}

fn claims() -> Value {
    serde_json::json!({"sub": "alice", "iat": NOW, "exp": NOW + 600, "aud": "krabka", "iss": "idp", "scope": "read"})
}

fn validator(keys: &[&Value], config: JwtValidationConfig) -> SignedJwtValidator {
    let set = serde_json::json!({ "keys": keys });
    SignedJwtValidator::new(config, JsonWebKeySet::parse(&set.to_string()).expect("a JWKS"))
}

fn expecting() -> JwtValidationConfig {
    JwtValidationConfig {
        expected_audience: vec!["other".into(), "krabka".into()],
        expected_issuer: Some("idp".into()),
        ..Default::default()
    }
}

fn reason(result: Result<BearerToken, TokenRefused>) -> String {
    let refused = result.expect_err("refused");
    assert_eq!(refused.status, "invalid_token");
    refused.reason
}

#[test]
fn tokens_signed_by_a_key_of_the_set_are_valid() {
    let (es256, es256_jwk) = ec_signer("ES256");
    let (es384, es384_jwk) = ec_signer("ES384");
    let (rsa, rsa_jwk) = rsa_signer("r1");
    let validator = validator(&[&es256_jwk, &es384_jwk, &rsa_jwk], expecting());
    for (signer, alg, kid) in
        [(&es256, "ES256", "ES256"), (&es384, "ES384", "ES384"), (&rsa, "RS256", "r1"), (&rsa, "PS256", "r1")]
    {
        let token = token(signer, alg, kid, &claims());
        let valid = validator.validate(&token, NOW_MS).unwrap_or_else(|e| panic!("{alg}: {e:?}"));
        assert_eq!(valid.principal_name, "alice");
        assert_eq!(valid.lifetime_ms, (NOW + 600) * 1000);
        assert_eq!(valid.start_time_ms, Some(NOW * 1000));
        assert_eq!(valid.scope, BTreeSet::from(["read".to_string()]));
        assert_eq!(valid.value, token);
    }
}

#[test]
fn wrong_keys_and_tampering_are_refused() {
    let (signer, jwk) = ec_signer("ES256");
    let (stranger, _) = ec_signer("ES256");
    let validator = validator(&[&jwk], expecting());
    let by_stranger = token(&stranger, "ES256", "ES256", &claims());
    assert!(reason(validator.validate(&by_stranger, NOW_MS)).contains("JWS signature is invalid"));
    let genuine = token(&signer, "ES256", "ES256", &claims());
    let parts: Vec<&str> = genuine.split('.').collect();
    let mut forged = claims();
    forged["sub"] = "admin".into();
    let tampered = format!("{}.{}.{}", parts[0], url(forged.to_string().as_bytes()), parts[2]);
    assert!(reason(validator.validate(&tampered, NOW_MS)).contains("JWS signature is invalid"));
    let unknown_kid = token(&signer, "ES256", "k9", &claims());
    assert!(reason(validator.validate(&unknown_kid, NOW_MS)).contains("Unable to find a suitable verification key"));
    // ES384 asked of a P-256 key: no key suits.
    assert!(reason(validator.validate(&token(&signer, "ES384", "ES256", &claims()), NOW_MS)).contains("suitable"));
    for alg in ["none", "HS256"] {
        let header = url(serde_json::json!({"alg": alg}).to_string().as_bytes());
        let unsigned = format!("{header}.{}.", url(claims().to_string().as_bytes()));
        assert!(reason(validator.validate(&unsigned, NOW_MS)).contains("not a permitted algorithm"), "{alg}");
    }
}

#[test]
fn claims_are_checked_as_kafkas_consumer_checks_them() {
    let (signer, jwk) = ec_signer("ES256");
    let strict = validator(&[&jwk], expecting());
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = claims();
        change(&mut claims);
        token(&signer, "ES256", "ES256", &claims)
    };
    let expired = with(&|c| c["exp"] = (NOW - 10).into());
    assert!(strict.validate(&expired, NOW_MS).is_ok(), "within the 30 s of clock skew");
    let long_expired = with(&|c| c["exp"] = (NOW - 31).into());
    assert!(reason(strict.validate(&long_expired, NOW_MS)).contains("no longer valid"));
    let no_exp = with(&|c| drop(c.as_object_mut().map(|o| o.remove("exp"))));
    assert!(reason(strict.validate(&no_exp, NOW_MS)).contains("No Expiration Time"));
    let no_iat = with(&|c| drop(c.as_object_mut().map(|o| o.remove("iat"))));
    assert!(reason(strict.validate(&no_iat, NOW_MS)).contains("No Issued At"));
    let not_yet = with(&|c| c["nbf"] = (NOW + 60).into());
    assert!(reason(strict.validate(&not_yet, NOW_MS)).contains("not yet valid"));
    let other_audience = with(&|c| c["aud"] = serde_json::json!(["x", "y"]));
    assert!(reason(strict.validate(&other_audience, NOW_MS)).contains("acceptable identifier"));
    let listed_audience = with(&|c| c["aud"] = serde_json::json!(["x", "krabka"]));
    assert!(strict.validate(&listed_audience, NOW_MS).is_ok());
    let other_issuer = with(&|c| c["iss"] = "elsewhere".into());
    assert!(reason(strict.validate(&other_issuer, NOW_MS)).contains("Issuer"));
    let blank_sub = with(&|c| c["sub"] = " ".into());
    assert!(reason(strict.validate(&blank_sub, NOW_MS)).contains("sub value must be non-empty"));
    let numeric_sub = with(&|c| c["sub"] = 7.into());
    assert!(reason(strict.validate(&numeric_sub, NOW_MS)).contains("Could not extract the 'sub' claim"));
    let scopes = with(&|c| c["scope"] = serde_json::json!(["read", " write "]));
    let scope = strict.validate(&scopes, NOW_MS).expect("valid").scope;
    assert_eq!(scope, BTreeSet::from(["read".to_string(), "write".to_string()]));

    // No expected audience: a token naming one is refused (jose4j's default).
    let lenient = validator(&[&jwk], JwtValidationConfig { sub_claim_name: "client_id".into(), ..Default::default() });
    assert!(reason(lenient.validate(&with(&|_| ()), NOW_MS)).contains("no expected audience"));
    let by_client = with(&|c| {
        let object = c.as_object_mut().expect("object");
        object.remove("aud");
        object.insert("client_id".into(), "svc".into());
    });
    assert_eq!(lenient.validate(&by_client, NOW_MS).expect("valid").principal_name, "svc");
}

#[test]
fn malformed_tokens_and_key_sets_are_refused_without_panicking() {
    let (_, jwk) = ec_signer("ES256");
    let validator = validator(&[&jwk], expecting());
    let header = url(br#"{"alg":"ES256"}"#);
    for bad in
        ["", "a.b", "a.b.c.d", "!!!.e30.c2ln", &format!("{header}.bm90IGpzb24.c2ln"), &format!("{header}.WzFd.c2ln")]
    {
        assert!(validator.validate(bad, NOW_MS).is_err(), "{bad:?}");
    }
    assert!(JsonWebKeySet::parse("not json").is_err());
    assert!(JsonWebKeySet::parse(r#"{"nokeys": []}"#).is_err());
    let skipped = JsonWebKeySet::parse(
        r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}, {"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"},
                     {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"}, {"kty": "RSA", "n": "!!"}, 7]}"#,
    )
    .expect("a JWKS");
    assert!(skipped.is_empty(), "{skipped:?}");
}
