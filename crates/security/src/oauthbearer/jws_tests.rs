//! Tests of the signed-token validator with real keys: EC and Ed25519 keys
//! made by ring, an RSA key made by `openssl` (ring cannot make RSA keys),
//! and RFC 7515's own examples as known answers.

use std::sync::OnceLock;

use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use serde_json::json;

use super::*;

const NOW_MS: i64 = 1_700_000_000_123;
const NOW: i64 = NOW_MS / 1000;

/// base64url without padding, as JWS writes it.
fn url(bytes: &[u8]) -> String {
    crate::base64::encode(bytes).trim_end_matches('=').replace('+', "-").replace('/', "_")
}

/// A signing key made for the tests.
enum Signer {
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
    Rsa(&'static RsaKeyPair),
}

/// A fresh P-256 (ES256) or P-384 (ES384) key and its public JWK.
fn ec_key(alg: &str, kid: &str) -> (Signer, Value) {
    let (signing, crv, size) = match alg {
        "ES256" => (&signature::ECDSA_P256_SHA256_FIXED_SIGNING, "P-256", 32),
        _ => (&signature::ECDSA_P384_SHA384_FIXED_SIGNING, "P-384", 48),
    };
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(signing, &rng).expect("an EC key");
    let pair = EcdsaKeyPair::from_pkcs8(signing, pkcs8.as_ref(), &rng).expect("its PKCS#8");
    let point = pair.public_key().as_ref().to_vec();
    let jwk = json!({"kty": "EC", "crv": crv, "kid": kid, "use": "sig",
                     "x": url(&point[1..1 + size]), "y": url(&point[1 + size..])});
    (Signer::Ec(pair), jwk)
}

fn ed25519_key(kid: &str) -> (Signer, Value) {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("an Ed25519 key");
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("its PKCS#8");
    let jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": url(pair.public_key().as_ref())});
    (Signer::Ed(pair), jwk)
}

/// One 2048-bit RSA key for all tests (made once: openssl takes a while).
fn rsa_pair() -> &'static RsaKeyPair {
    static PAIR: OnceLock<RsaKeyPair> = OnceLock::new();
    PAIR.get_or_init(|| {
        let output = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-outform", "DER"])
            .output()
            .expect("openssl on PATH");
        assert!(output.status.success(), "openssl genpkey: {}", String::from_utf8_lossy(&output.stderr));
        // genpkey writes PKCS#8; older OpenSSL wrote PKCS#1 (RSAPrivateKey) in DER.
        RsaKeyPair::from_pkcs8(&output.stdout).or_else(|_| RsaKeyPair::from_der(&output.stdout)).expect("an RSA key")
    })
}

/// The RSA key's public JWK: n and e are the big-endian integers.
fn rsa_key(kid: &str) -> (Signer, Value) {
    let pair = rsa_pair();
    let public: RsaPublicKeyComponents<Vec<u8>> = pair.public().into();
    let jwk = json!({"kty": "RSA", "kid": kid, "n": url(&public.n), "e": url(&public.e)});
    (Signer::Rsa(pair), jwk)
}

/// The signature of `signed` by `signer` under `alg`.
fn signature_of(signer: &Signer, alg: &str, signed: &[u8]) -> Vec<u8> {
    let rng = SystemRandom::new();
    match signer {
        Signer::Ec(pair) => pair.sign(&rng, signed).expect("an ECDSA signature").as_ref().to_vec(),
        Signer::Ed(pair) => pair.sign(signed).as_ref().to_vec(),
        Signer::Rsa(pair) => {
            let padding: &'static dyn signature::RsaEncoding = match alg {
                "RS384" => &signature::RSA_PKCS1_SHA384,
                "RS512" => &signature::RSA_PKCS1_SHA512,
                "PS256" => &signature::RSA_PSS_SHA256,
                "PS384" => &signature::RSA_PSS_SHA384,
                "PS512" => &signature::RSA_PSS_SHA512,
                _ => &signature::RSA_PKCS1_SHA256,
            };
            let mut signature = vec![0; pair.public().modulus_len()];
            pair.sign(padding, &rng, signed, &mut signature).expect("an RSA signature");
            signature
        }
    }
}

/// A compact JWS of `claims` under `header`, signed by `signer` with the header's alg.
fn sign(signer: &Signer, header: &Value, claims: &Value) -> String {
    let signed = format!("{}.{}", url(header.to_string().as_bytes()), url(claims.to_string().as_bytes()));
    let alg = header["alg"].as_str().unwrap_or_default();
    format!("{signed}.{}", url(&signature_of(signer, alg, signed.as_bytes())))
}

/// A token with header `{"alg", "kid", "typ": "JWT"}`.
fn token(signer: &Signer, alg: &str, kid: &str, claims: &Value) -> String {
    sign(signer, &json!({"alg": alg, "kid": kid, "typ": "JWT"}), claims)
}

fn claims() -> Value {
    json!({"sub": "alice", "iat": NOW - 3600, "exp": NOW + 600, "aud": "krabka", "iss": "idp", "scope": "read"})
}

fn validator(keys: &[&Value], config: JwtValidationConfig) -> SignedJwtValidator {
    let set = json!({ "keys": keys });
    SignedJwtValidator::new(config, JsonWebKeySet::parse(&set.to_string()).expect("a JWKS"))
}

/// Kafka's defaults plus an expected audience and issuer.
fn expecting() -> JwtValidationConfig {
    JwtValidationConfig {
        expected_audience: vec!["other".into(), "krabka".into()],
        expected_issuer: Some("idp".into()),
        ..Default::default()
    }
}

/// The refusal's reason (and it is Kafka's invalid_token).
fn reason(result: Result<BearerToken, TokenRefused>) -> String {
    let refused = result.expect_err("refused");
    assert_eq!((refused.status, &refused.scope), ("invalid_token", &None));
    refused.reason
}

/// Asserts `token` is refused with a reason containing `part`.
#[track_caller]
fn refused(validator: &SignedJwtValidator, token: &str, part: &str) {
    let reason = reason(validator.validate(token, NOW_MS));
    assert!(reason.contains(part), "{part:?} not in {reason:?}");
}

/// A change to the usual claims: `name` set to `value`.
fn set(name: &'static str, value: Value) -> impl FnOnce(&mut Map<String, Value>) {
    move |claims| {
        claims.insert(name.into(), value);
    }
}

/// A change to the usual claims: `name` removed.
fn unset(name: &'static str) -> impl FnOnce(&mut Map<String, Value>) {
    move |claims| {
        claims.remove(name);
    }
}

/// An ES256 key, a validator expecting `config`, and a token maker that
/// signs the usual claims after `change`.
struct Fixture {
    signer: Signer,
    validator: SignedJwtValidator,
}

impl Fixture {
    fn new(config: JwtValidationConfig) -> Fixture {
        let (signer, jwk) = ec_key("ES256", "k1");
        Fixture { signer, validator: validator(&[&jwk], config) }
    }

    fn token(&self, change: impl FnOnce(&mut Map<String, Value>)) -> String {
        let mut claims = claims();
        change(claims.as_object_mut().expect("an object"));
        token(&self.signer, "ES256", "k1", &claims)
    }

    fn validate(&self, change: impl FnOnce(&mut Map<String, Value>)) -> Result<BearerToken, TokenRefused> {
        self.validator.validate(&self.token(change), NOW_MS)
    }

    #[track_caller]
    fn refuses(&self, change: impl FnOnce(&mut Map<String, Value>), part: &str) {
        refused(&self.validator, &self.token(change), part);
    }
}

#[test]
fn every_supported_algorithm_verifies() {
    let (rsa, rsa_jwk) = rsa_key("r1");
    let (es256, es256_jwk) = ec_key("ES256", "e1");
    let (es384, es384_jwk) = ec_key("ES384", "e2");
    let (ed, ed_jwk) = ed25519_key("d1");
    let validator = validator(&[&rsa_jwk, &es256_jwk, &es384_jwk, &ed_jwk], expecting());
    let cases = [
        (&rsa, "RS256", "r1"),
        (&rsa, "RS384", "r1"),
        (&rsa, "RS512", "r1"),
        (&rsa, "PS256", "r1"),
        (&rsa, "PS384", "r1"),
        (&rsa, "PS512", "r1"),
        (&es256, "ES256", "e1"),
        (&es384, "ES384", "e2"),
        (&ed, "EdDSA", "d1"),
    ];
    for (signer, alg, kid) in cases {
        let token = token(signer, alg, kid, &claims());
        let valid = validator.validate(&token, NOW_MS).unwrap_or_else(|e| panic!("{alg}: {e:?}"));
        let expected = BearerToken {
            value: token.clone(),
            principal_name: "alice".into(),
            scope: BTreeSet::from(["read".to_string()]),
            lifetime_ms: (NOW + 600) * 1000,
            start_time_ms: Some((NOW - 3600) * 1000),
        };
        assert_eq!(valid, expected, "{alg}");
    }
}

/// RFC 7515 appendix A.2 (RS256) and A.3 (ES256): their keys and tokens.
/// The signatures verify; the claims (no `iat`, `iss` "joe") then fail.
#[test]
fn rfc_7515_examples_verify() {
    let payload = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";
    let rs256 = format!(
        "eyJhbGciOiJSUzI1NiJ9.{payload}.{}",
        "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdb\
         F9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383\
         LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWy\
         wlVmtVrBp0igcN_IoypGlUPQGe77Rw"
    );
    let es256 = format!(
        "eyJhbGciOiJFUzI1NiJ9.{payload}.{}",
        "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
    );
    let jwks = r#"{"keys": [
        {"kty": "RSA", "e": "AQAB",
         "n": "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"},
        {"kty": "EC", "crv": "P-256",
         "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;
    let keys = JsonWebKeySet::parse(jwks).expect("the RFC's keys");
    assert_eq!(keys.len(), 2);
    let validator = SignedJwtValidator::new(JwtValidationConfig::default(), keys);
    let before_exp = 1_300_819_000_000;
    for token in [&rs256, &es256] {
        let reason = reason(validator.validate(token, before_exp));
        assert!(reason.contains("No Issued At (iat) claim present."), "{reason}");
        assert!(reason.starts_with("Could not validate the access token: JWT (claims->{"), "{reason}");
        let at = token.rfind('.').expect("three sections") + 20;
        let flipped = if &token[at..=at] == "A" { "B" } else { "A" };
        let tampered = format!("{}{flipped}{}", &token[..at], &token[at + 1..]);
        assert!(reason_of(&validator, &tampered, before_exp).contains("JWS signature is invalid"), "{tampered}");
    }
}

fn reason_of(validator: &SignedJwtValidator, token: &str, now_ms: i64) -> String {
    reason(validator.validate(token, now_ms))
}

#[test]
fn wrong_keys_and_tampering_are_refused() {
    let (signer, jwk) = ec_key("ES256", "k1");
    let (stranger, _) = ec_key("ES256", "k1");
    let (rsa, rsa_jwk) = rsa_key("r1");
    let validator = validator(&[&jwk, &rsa_jwk], expecting());
    refused(&validator, &token(&stranger, "ES256", "k1", &claims()), "JWS signature is invalid: JsonWebSignature{");

    let genuine = token(&signer, "ES256", "k1", &claims());
    let parts: Vec<&str> = genuine.split('.').collect();
    let mut forged = claims();
    forged["sub"] = "admin".into();
    let forged_payload = format!("{}.{}.{}", parts[0], url(forged.to_string().as_bytes()), parts[2]);
    refused(&validator, &forged_payload, "JWS signature is invalid");
    let mut signature = decode_base64url(parts[2]).expect("base64url");
    signature[10] ^= 1;
    refused(&validator, &format!("{}.{}.{}", parts[0], parts[1], url(&signature)), "JWS signature is invalid");
    refused(&validator, &format!("{}.{}.{}", parts[0], parts[1], url(&signature[..63])), "JWS signature is invalid");
    // The same signature under another header (its kid changed) no longer verifies.
    let other_header = url(json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"}).to_string().as_bytes());
    refused(&validator, &format!("{other_header}.{}.{}", parts[1], parts[2]), "JWS signature is invalid");

    // An RSA signature changed from PKCS#1 to PSS by the header only.
    let rs256 = token(&rsa, "RS256", "r1", &claims());
    let rs_parts: Vec<&str> = rs256.split('.').collect();
    let ps_header = url(json!({"alg": "PS256", "kid": "r1", "typ": "JWT"}).to_string().as_bytes());
    refused(&validator, &format!("{ps_header}.{}.{}", rs_parts[1], rs_parts[2]), "JWS signature is invalid");
    assert!(validator.validate(&rs256, NOW_MS).is_ok());
}

#[test]
fn keys_are_selected_as_jose4j_selects_them() {
    let (first, first_jwk) = ec_key("ES256", "k1");
    let (second, second_jwk) = ec_key("ES256", "k2");
    let (rsa, rsa_jwk) = rsa_key("r1");
    let all = validator(&[&first_jwk, &second_jwk, &rsa_jwk], expecting());
    let suitable = "Unable to find a suitable verification key for JWS w/ header {";
    refused(&all, &token(&first, "ES256", "k9", &claims()), suitable);
    // The message lists the key set, for the operator.
    refused(&all, &token(&first, "ES256", "k9", &claims()), "from JWKs [{kty=EC, crv=P-256, kid=k1}");
    // A kid names a key: the other key of the set does not verify.
    refused(&all, &token(&first, "ES256", "k2", &claims()), "JWS signature is invalid");
    // Without a kid every key of the type is tried (jose4j tries the first only).
    for signer in [&first, &second] {
        let token = sign(signer, &json!({"alg": "ES256"}), &claims());
        assert!(all.validate(&token, NOW_MS).is_ok());
    }
    // ES384 wants a P-384 key; RS256 an RSA one.
    refused(&all, &token(&first, "ES384", "k1", &claims()), suitable);
    refused(&all, &token(&rsa, "RS256", "k1", &claims()), suitable);

    // A key without a kid is no match for a header with one; a key whose
    // alg is another is not used; an encryption key was never kept.
    let mut anonymous = first_jwk.clone();
    anonymous.as_object_mut().expect("an object").remove("kid");
    let mut other_alg = first_jwk.clone();
    other_alg["alg"] = "ES384".into();
    let mut encryption = first_jwk.clone();
    encryption["use"] = "enc".into();
    for jwk in [&anonymous, &other_alg, &encryption] {
        refused(&validator(&[jwk], expecting()), &token(&first, "ES256", "k1", &claims()), suitable);
    }
    let mut same_alg = first_jwk.clone();
    same_alg["alg"] = "ES256".into();
    let either = validator(&[&anonymous, &same_alg], expecting());
    assert!(either.validate(&sign(&first, &json!({"alg": "ES256"}), &claims()), NOW_MS).is_ok());
}

#[test]
fn unsigned_and_hmac_tokens_are_refused() {
    let fixture = Fixture::new(expecting());
    let payload = url(claims().to_string().as_bytes());
    let with_header = |header: Value| format!("{}.{payload}.c2lnbmF0dXJl", url(header.to_string().as_bytes()));
    refused(&fixture.validator, &with_header(json!({"alg": "none"})), "'none' is a blacklisted algorithm.");
    // An unsecured JWT's empty signature: Kafka's SerializedJwt counts two sections.
    let unsecured = format!("{}.{payload}.", url(br#"{"alg":"none"}"#));
    refused(&fixture.validator, &unsecured, "but 2 sections provided");
    refused(
        &fixture.validator,
        &with_header(json!({"alg": "HS256", "kid": "k1"})),
        "'HS256' needs a shared secret key",
    );
    refused(&fixture.validator, &with_header(json!({"alg": "ES512"})), "ES512 is an unknown, unsupported");
    refused(&fixture.validator, &with_header(json!({"kid": "k1"})), "Signature algorithm header (alg) not set.");
    refused(&fixture.validator, &with_header(json!({"alg": 256})), "the alg header is a number, not a string");
    // An HMAC key in the set is not kept: HS256 is never verified.
    let oct = json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]});
    assert!(JsonWebKeySet::parse(&oct.to_string()).expect("a JWKS").is_empty());
}

#[test]
fn expiry_and_not_before_allow_the_clock_skew() {
    let fixture = Fixture::new(expecting());
    assert!(fixture.validate(set("exp", json!(NOW - 10))).is_ok(), "within the 30 s skew");
    assert!(fixture.validate(set("exp", json!(NOW - 29))).is_ok());
    fixture.refuses(
        set("exp", json!(NOW - 30)),
        &format!(
            "The JWT is no longer valid - the evaluation time {NOW} is on or after the Expiration Time (exp={}) \
             claim value (even when providing 30 seconds of leeway to account for clock skew).",
            NOW - 30
        ),
    );
    fixture.refuses(set("exp", json!(NOW - 3600)), "no longer valid");
    assert!(fixture.validate(set("nbf", json!(NOW + 30))).is_ok(), "within the skew");
    fixture.refuses(set("nbf", json!(NOW + 31)), "The JWT is not yet valid");
    fixture.refuses(set("nbf", json!(NOW + 700)), "claim value cannot be before the Not Before (nbf=");
    fixture.refuses(set("nbf", json!("soon")), "The value of the 'nbf' claim is not the expected");

    // Without skew, exp is the first second the token is invalid; time is in whole seconds.
    let exact = Fixture::new(JwtValidationConfig { clock_skew_seconds: 0, ..expecting() });
    let token = exact.token(set("exp", json!(NOW + 1)));
    assert!(exact.validator.validate(&token, (NOW + 1) * 1000 - 1).is_ok());
    let reason = reason_of(&exact.validator, &token, (NOW + 1) * 1000);
    assert!(reason.ends_with("claim value.]"), "no leeway mentioned: {reason}");
}

#[test]
fn issued_at_is_required_but_may_lie_ahead() {
    let fixture = Fixture::new(expecting());
    fixture.refuses(unset("iat"), "No Issued At (iat) claim present.");
    fixture.refuses(set("iat", Value::Null), "No Issued At (iat) claim present.");
    // Kafka sets no iat restriction: an iat ahead of the clock (before exp) is fine.
    let ahead = fixture.validate(set("iat", json!(NOW + 300))).expect("valid");
    assert_eq!(ahead.start_time_ms, Some((NOW + 300) * 1000));
    fixture.refuses(set("iat", json!(NOW + 601)), "claim value cannot be before the Issued At (iat=");
    fixture.refuses(set("iat", json!("today")), "The value of the 'iat' claim is not the expected");
    // NumericDates keep whole seconds, as jose4j's: fractions are cut off.
    let fractional = fixture.validate(|c| {
        c.insert("exp".into(), json!(NOW as f64 + 600.9));
        c.insert("iat".into(), json!(NOW as f64 + 0.7));
    });
    let fractional = fractional.expect("valid");
    assert_eq!((fractional.lifetime_ms, fractional.start_time_ms), ((NOW + 600) * 1000, Some(NOW * 1000)));
}

#[test]
fn expiration_is_required_and_reasonable() {
    let fixture = Fixture::new(expecting());
    fixture.refuses(unset("exp"), "No Expiration Time (exp) claim present.");
    fixture.refuses(set("exp", json!("never")), "The value of the 'exp' claim is not the expected");
    fixture.refuses(set("exp", json!(1e300)), "is unreasonable for a NumericDate");
    fixture.refuses(set("exp", json!(u64::MAX)), "is unreasonable for a NumericDate");
    fixture.refuses(set("exp", json!(i64::MAX / 999)), "is unreasonable for a NumericDate");
    let far = fixture.validate(set("exp", json!(i64::MAX / 1000))).expect("valid");
    assert_eq!(far.lifetime_ms, i64::MAX / 1000 * 1000);
}

#[test]
fn the_principal_comes_from_the_sub_claim() {
    let fixture = Fixture::new(expecting());
    assert_eq!(fixture.validate(set("sub", json!(" bob\t"))).expect("valid").principal_name, "bob");
    fixture.refuses(unset("sub"), "sub value must be non-null");
    fixture.refuses(set("sub", json!("")), "sub value must be non-empty");
    fixture.refuses(set("sub", json!(" \t ")), "sub value must not contain only whitespace");
    // jose4j's own SubValidator refuses a sub of another type.
    fixture.refuses(set("sub", json!(7)), "The value of the 'sub' claim is not the expected type");
    // Java's trim leaves a non-breaking space: that is a principal to Kafka.
    let nbsp = fixture.validate(set("sub", json!("\u{a0}"))).expect("valid");
    assert_eq!(nbsp.principal_name, "\u{a0}");

    let by_client = Fixture::new(JwtValidationConfig { sub_claim_name: "client_id".into(), ..expecting() });
    let valid = by_client.validate(|c| {
        c.remove("sub");
        c.insert("client_id".into(), "svc".into());
    });
    assert_eq!(valid.expect("valid").principal_name, "svc");
    by_client.refuses(|_| {}, "client_id value must be non-null");
    by_client
        .refuses(set("client_id", json!(["svc"])), "Could not extract the 'client_id' claim from the access token");
}

#[test]
fn the_audience_is_checked_as_configured() {
    let strict = Fixture::new(expecting());
    assert!(strict.validate(|_| {}).is_ok());
    assert!(strict.validate(set("aud", json!(["x", "krabka"]))).is_ok());
    strict.refuses(
        set("aud", json!(["x", "y"])),
        "Audience (aud) claim [x, y] doesn't contain an acceptable identifier. Expected one of [other, krabka] as an aud value.",
    );
    strict.refuses(unset("aud"), "No Audience (aud) claim present.");
    strict.refuses(set("aud", json!(["krabka", 7])), "contains non string values");
    strict.refuses(set("aud", json!({"a": 1})), "is not an array of strings or a single string");
    let single = Fixture::new(JwtValidationConfig { expected_audience: vec!["k".into()], ..expecting() });
    single.refuses(|_| {}, "Audience (aud) claim [krabka] doesn't contain an acceptable identifier. Expected k as");

    // None expected: jose4j's default refuses a token that names one.
    let lenient = Fixture::new(JwtValidationConfig { expected_issuer: Some("idp".into()), ..Default::default() });
    lenient.refuses(
        |_| {},
        "Audience (aud) claim [krabka] present in the JWT but no expected audience value(s) were provided to the JWT Consumer.",
    );
    assert!(lenient.validate(unset("aud")).is_ok());
}

#[test]
fn the_issuer_is_checked_as_configured() {
    let strict = Fixture::new(expecting());
    strict.refuses(
        set("iss", json!("elsewhere")),
        "Issuer (iss) claim value (elsewhere) doesn't match expected value of idp",
    );
    strict.refuses(unset("iss"), "No Issuer (iss) claim present but was expecting idp");
    let lenient = Fixture::new(JwtValidationConfig { expected_audience: vec!["krabka".into()], ..Default::default() });
    assert!(lenient.validate(set("iss", json!("anyone"))).is_ok());
    assert!(lenient.validate(unset("iss")).is_ok());
    // jose4j reads iss (and jti) as strings even when it expects none.
    lenient.refuses(set("iss", json!(1)), "The value of the 'iss' claim is not the expected type");
    lenient.refuses(set("jti", json!(1)), "The value of the 'jti' claim is not the expected type");
}

#[test]
fn every_failing_claim_validator_is_reported() {
    let fixture = Fixture::new(expecting());
    let reason = reason(fixture.validate(|c| {
        c.insert("aud".into(), "x".into());
        c.insert("iss".into(), "y".into());
        c.insert("exp".into(), (NOW - 100).into());
    }));
    for part in
        ["Audience (aud) claim [x]", "Issuer (iss) claim value (y)", "The JWT is no longer valid", "\"sub\":\"alice\""]
    {
        assert!(reason.contains(part), "{part:?} not in {reason}");
    }
}

#[test]
fn the_scope_is_a_string_or_a_list_of_strings() {
    let fixture = Fixture::new(expecting());
    let scope_of = |scope: Value| fixture.validate(set("scope", json!(scope))).map(|t| t.scope);
    let names = |items: &[&str]| BTreeSet::from_iter(items.iter().map(|s| s.to_string()));
    assert_eq!(scope_of(json!("read")), Ok(names(&["read"])));
    // Kafka takes a string as one scope, spaces and all.
    assert_eq!(scope_of(json!(" read write ")), Ok(names(&["read write"])));
    assert_eq!(scope_of(json!(["read", " write "])), Ok(names(&["read", "write"])));
    assert_eq!(scope_of(json!([])), Ok(names(&[])));
    assert_eq!(scope_of(json!(7)), Ok(names(&[])), "neither string nor list: no scope");
    assert_eq!(fixture.validate(unset("scope")).map(|t| t.scope), Ok(names(&[])));
    let refusal = |scope: Value| reason(fixture.validate(set("scope", scope)));
    assert_eq!(refusal(json!(["read", "read "])), "scope value must not contain duplicates - read already present");
    assert_eq!(refusal(json!(["read", " "])), "scope value must not contain only whitespace");
    assert_eq!(refusal(json!("")), "scope value must be non-empty");
    assert_eq!(refusal(json!(["read", null])), "scope value must be non-null");
    assert!(refusal(json!(["read", 7])).contains("scope value must hold only strings"));

    let custom = Fixture::new(JwtValidationConfig { scope_claim_name: "scp".into(), ..expecting() });
    let token = custom.validate(set("scp", json!(["a", "b"]))).expect("valid");
    assert_eq!(token.scope, names(&["a", "b"]));
}

#[test]
fn malformed_tokens_are_refused_without_panicking() {
    let fixture = Fixture::new(expecting());
    let good = fixture.token(|_| {});
    let parts: Vec<&str> = good.split('.').collect();
    let (header, payload, signature) = (parts[0], parts[1], parts[2]);
    let es256 = url(br#"{"alg":"ES256","kid":"k1"}"#);
    let cases = [
        ("".to_string(), "Empty JWT provided; expected three sections"),
        (" \n ".to_string(), "Empty JWT provided"),
        ("abc".to_string(), "but 1 sections provided"),
        (format!("{header}.{payload}"), "but 2 sections provided"),
        (format!("{header}.{payload}.{signature}.x"), "but 4 sections provided"),
        (
            format!("{header}.{payload}.{signature}."),
            "Expecting either 3 or 5 parts for JWS or JWE respectively but was 4",
        ),
        (format!("{header}. .{signature}"), "but payload section missing"),
        (format!(".{payload}.{signature}"), "but header section missing"),
        (format!("!!!.{payload}.{signature}"), "the JWS header is not base64url"),
        (format!("{}.{payload}.{signature}", url(b"not json")), "the JWS header is not JSON"),
        (format!("{}.{payload}.{signature}", url(b"[1]")), "the JWS header is an array, not a JSON object"),
        (format!("{}.{payload}.{signature}", url(&[0xff, 0xfe])), "the JWS header is not UTF-8"),
        (
            format!("{es256}.{}.{signature}", url(b"not json")),
            "Unable to parse what was expected to be the JWT Claim Set",
        ),
        (format!("{es256}.{}.{signature}", url(b"\"text\"")), "it is a string, not a JSON object"),
        (format!("{es256}.pay load.{signature}"), "it is not base64url"),
        (format!("{header}.{payload}.sig*nature"), "JWS signature is not base64url"),
    ];
    for (token, part) in &cases {
        refused(&fixture.validator, token, part);
    }
}

#[test]
fn json_is_read_as_jose4j_reads_it() {
    let fixture = Fixture::new(expecting());
    // A repeated claim name (also escaped) is refused, not resolved to the last.
    let payload =
        format!(r#"{{"sub":"alice","\u0073ub":"admin","iat":{NOW},"exp":{},"aud":"krabka","iss":"idp"}}"#, NOW + 9);
    let header = json!({"alg": "ES256", "kid": "k1"});
    let signed = format!("{}.{}", url(header.to_string().as_bytes()), url(payload.as_bytes()));
    let token = format!("{signed}.{}", url(&signature_of(&fixture.signer, "ES256", signed.as_bytes())));
    refused(&fixture.validator, &token, "An entry for 'sub' already exists. Names must be unique.");
    // Nested objects, arrays and strings with brackets and quotes are no repetition.
    let nested = fixture.validate(|c| {
        c.insert("ext".into(), json!({"a": {"sub": 1}, "b": [{"sub": 2}, {"sub": "x\"}{,"}]}));
        c.insert("tags".into(), json!(["sub", "sub"]));
    });
    assert!(nested.is_ok(), "{nested:?}");

    for (header, part) in [
        (json!({"alg": "ES256", "kid": "k1", "crit": ["exp"]}), "Unrecognized header 'exp' marked as critical."),
        (json!({"alg": "ES256", "kid": "k1", "crit": "exp"}), "crit header value not an array"),
        (json!({"alg": "ES256", "kid": "k1", "b64": false}), "an unencoded payload (b64: false, RFC 7797)"),
        (json!({"alg": "ES256", "kid": "k1", "cty": "JWT"}), "a nested JWT (cty: JWT) is not supported"),
        (json!({"alg": "ES256", "kid": 1}), "the kid header is a number, not a string"),
    ] {
        refused(&fixture.validator, &sign(&fixture.signer, &header, &claims()), part);
    }
    let empty_crit = sign(&fixture.signer, &json!({"alg": "ES256", "kid": "k1", "crit": []}), &claims());
    assert!(fixture.validator.validate(&empty_crit, NOW_MS).is_ok());
}

#[test]
fn token_text_is_taken_leniently_and_given_back_as_is() {
    let fixture = Fixture::new(expecting());
    let good = fixture.token(|_| {});
    // Padded base64url sections, and whitespace around the token.
    let padded: Vec<String> = good
        .split('.')
        .map(|part| {
            let mut part = part.to_string();
            while part.len() % 4 != 0 {
                part.push('=');
            }
            part
        })
        .collect();
    let padded = padded.join(".");
    assert_ne!(padded, good);
    // The signing input is the sections as received, so a re-padded token no longer matches its signature.
    refused(&fixture.validator, &padded, "JWS signature is invalid");
    let (header, payload) =
        good.rsplit_once('.').map(|(signed, _)| signed.split_once('.').expect("two")).expect("three");
    let signed = format!("{header}.{payload}");
    let padded_signature = {
        let mut text = url(&signature_of(&fixture.signer, "ES256", signed.as_bytes()));
        text.push_str("==");
        text
    };
    let with_padding = format!("{signed}.{padded_signature}");
    assert!(fixture.validator.validate(&with_padding, NOW_MS).is_ok());
    let spaced = format!(" \t{good}\r\n");
    assert_eq!(fixture.validator.validate(&spaced, NOW_MS).expect("valid").value, spaced);
}

#[test]
fn key_sets_are_parsed_as_jose4j_parses_them() {
    for (text, part) in [
        ("not json", "The JWKS is not JSON"),
        ("[]", "The JWKS is an array, not a JSON object"),
        ("{}", "The JSON JWKS content does not include the keys member."),
        (r#"{"keys": null}"#, "does not include the keys member"),
        (r#"{"keys": {}}"#, "The JWKS keys member is an object, not an array"),
        (r#"{"keys": [7]}"#, "entry 0 is a number, not a JSON object"),
        (r#"{"keys": [], "keys": []}"#, "An entry for 'keys' already exists"),
        (r#"{"keys": [{"kty": "EC", "kty": "RSA"}]}"#, "An entry for 'kty' already exists"),
    ] {
        let error = JsonWebKeySet::parse(text).expect_err(text);
        assert!(error.contains(part), "{part:?} not in {error:?}");
    }
    let (_, ec) = ec_key("ES256", "k1");
    let (_, rsa) = rsa_key("r1");
    let mut bad_kid = ec.clone();
    bad_kid["kid"] = 7.into();
    let skipped = [
        json!({"kty": "oct", "k": "c2VjcmV0"}),
        json!({"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"}),
        json!({"kty": "OKP", "crv": "X25519", "x": url(&[9; 32])}),
        json!({"kty": "OKP", "crv": "Ed25519", "x": url(&[9; 31])}),
        json!({"kty": "RSA", "use": "enc", "n": rsa["n"], "e": "AQAB"}),
        json!({"kty": "RSA", "n": "!!", "e": "AQAB"}),
        json!({"kty": "RSA", "e": "AQAB"}),
        json!({"kty": "RSA", "n": "AAAA", "e": "AQAB"}),
        json!({"n": rsa["n"], "e": "AQAB"}),
        json!({"kty": "EC", "crv": "P-256", "x": ec["x"], "y": url(&[1; 33])}),
        bad_kid,
    ];
    let set = JsonWebKeySet::parse(&json!({ "keys": skipped }).to_string()).expect("a JWKS");
    assert_eq!((set.len(), set.is_empty()), (0, true), "{set:?}");
    let kept = JsonWebKeySet::parse(&json!({ "keys": [ec, rsa, skipped[0]] }).to_string()).expect("a JWKS");
    assert_eq!(kept.len(), 2);
}

/// RSA keys ring does not verify with are kept, as jose4j keeps them, and
/// a token for one is refused saying why (jose4j's text for a short key).
#[test]
fn rsa_keys_ring_cannot_use_are_kept_and_explained() {
    let (rsa, rsa_jwk) = rsa_key("r1");
    let mut short = rsa_jwk.clone();
    short["n"] = url(&[0xc5; 128]).into();
    let mut long = rsa_jwk.clone();
    long["n"] = url(&[0xc5; 1025]).into();
    let mut even = rsa_jwk.clone();
    even["e"] = "AQAA".into();
    let token = token(&rsa, "RS256", "r1", &claims());
    for (jwk, part) in [
        (&short, "An RSA key of size 2048 bits or larger MUST be used with the all JOSE RSA algorithms (given key was only 1024 bits)."),
        (&long, "RSA keys of at most 8192 bits (given key has 8200 bits)"),
        (&even, "public exponent is odd, from 3 to 2^33 - 1"),
    ] {
        let set = validator(&[jwk], expecting());
        refused(&set, &token, part);
        // With a usable key of the same kid beside it, that one decides.
        assert!(validator(&[jwk, &rsa_jwk], expecting()).validate(&token, NOW_MS).is_ok());
    }
    // The broker's own check: a JWKS of only such a key still counts one key.
    let tiny = JsonWebKeySet::parse(r#"{"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB"}]}"#).expect("a JWKS");
    assert_eq!(tiny.len(), 1);
}

/// Material written as numbers rather than fixed-length octets: a 0x00
/// before an RSA modulus (Java's signed BigInteger bytes), an EC
/// coordinate without its leading zeros. jose4j reads both.
#[test]
fn key_material_is_read_as_numbers() {
    let (rsa, rsa_jwk) = rsa_key("r1");
    let mut signed_n = rsa_jwk.clone();
    let n = decode_base64url(rsa_jwk["n"].as_str().expect("n")).expect("base64url");
    signed_n["n"] = url(&[&[0][..], &n].concat()).into();
    let validator = validator(&[&signed_n], expecting());
    assert!(validator.validate(&token(&rsa, "RS256", "r1", &claims()), NOW_MS).is_ok());

    let x = decode_base64url("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU").expect("x");
    let y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
    let key = |x: &[u8]| {
        JsonWebKeySet::parse(&json!({"keys": [{"kty": "EC", "crv": "P-256", "x": url(x), "y": y}]}).to_string())
    };
    let mut short = x.clone();
    short[0] = 0;
    let (full, stripped) = (key(&short).expect("a JWKS"), key(&short[1..]).expect("a JWKS"));
    assert_eq!((full.len(), &full), (1, &stripped));
    assert_eq!(key(&[&[0][..], &x].concat()).expect("a JWKS"), key(&x).expect("a JWKS"));
}

/// A deterministic fuzz: mutated tokens never panic, and a mutation of
/// the signed sections is never accepted.
#[test]
fn mutated_tokens_never_panic() {
    let fixture = Fixture::new(expecting());
    let good = fixture.token(|_| {});
    let signed_len = good.rfind('.').expect("three sections");
    let alphabet = b"AQgw_-+/=.{}\"[]:, \x00eyJ0";
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut bytes = good.clone().into_bytes();
        for _ in 0..1 + next() % 3 {
            let at = (next() % bytes.len() as u64) as usize;
            bytes[at] = alphabet[(next() % alphabet.len() as u64) as usize];
        }
        let touched_signed = bytes[..signed_len] != good.as_bytes()[..signed_len];
        let mutated = String::from_utf8_lossy(&bytes).into_owned();
        let result = fixture.validator.validate(&mutated, NOW_MS);
        if touched_signed {
            assert!(result.is_err(), "a changed token was accepted: {mutated}");
        }
        let cut = &good[..(next() % good.len() as u64) as usize];
        assert!(fixture.validator.validate(cut, NOW_MS).is_err());
    }
}
