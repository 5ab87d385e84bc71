//! Signed bearer tokens checked against a JSON Web Key Set, as Kafka's
//! broker-side `OAuthBearerValidatorCallbackHandler` checks them (KIP-768:
//! `ValidatorAccessTokenValidator` over jose4j's `JwtConsumer`).
//!
//! A token is a compact JWS, `header.payload.signature` in base64url. Its
//! signature must verify with a key of the set that suits its header (the
//! header's `kid`, a key type matching `alg`, `use` absent or `sig`), by
//! RSASSA-PKCS1-v1_5 (RS256/384/512), RSASSA-PSS (PS256/384/512) or ECDSA
//! (ES256/384); `none` and the HMAC algorithms are refused. Its claims then
//! as Kafka's consumer requires: `exp` and `iat` present, not expired
//! (with `clock_skew_seconds` of leeway), `nbf` passed, the audience and
//! issuer the broker expects (a token with an audience is refused by a
//! broker expecting none, as jose4j's default does), and a non-blank
//! subject in the configured claim.

use std::collections::BTreeSet;

use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

use super::{decode_base64url, BearerToken, TokenRefused};

/// One verification key of the set.
#[derive(Clone, Debug, PartialEq, Eq)]
struct JsonWebKey {
    kid: Option<String>,
    alg: Option<String>,
    material: KeyMaterial,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyMaterial {
    /// Big-endian modulus and exponent.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed point (0x04 || x || y) on P-256 or P-384.
    Ec { curve: Curve, point: Vec<u8> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
}

/// A JSON Web Key Set (RFC 7517): the keys krabka can verify signatures
/// with. Keys of other types or curves, and encryption keys, are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonWebKeySet {
    keys: Vec<JsonWebKey>,
}

impl JsonWebKeySet {
    /// Reads a JWKS document (`{"keys": [...]}`).
    pub fn parse(json: &str) -> Result<JsonWebKeySet, String> {
        let document: Value = serde_json::from_str(json).map_err(|e| format!("the JWKS is not JSON: {e}"))?;
        let Some(Value::Array(keys)) = document.get("keys") else {
            return Err("the JWKS has no \"keys\" array".into());
        };
        Ok(JsonWebKeySet { keys: keys.iter().filter_map(|key| key.as_object().and_then(verification_key)).collect() })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// A signature key of a type and curve krabka verifies with, else None.
fn verification_key(key: &Map<String, Value>) -> Option<JsonWebKey> {
    let text = |name: &str| key.get(name).and_then(Value::as_str);
    let bytes = |name: &str| text(name).and_then(decode_base64url).filter(|b| !b.is_empty());
    if text("use").is_some_and(|u| u != "sig") {
        return None;
    }
    let material = match text("kty")? {
        "RSA" => KeyMaterial::Rsa { n: bytes("n")?, e: bytes("e")? },
        "EC" => {
            let (curve, size) = match text("crv")? {
                "P-256" => (Curve::P256, 32),
                "P-384" => (Curve::P384, 48),
                _ => return None,
            };
            let (x, y) = (bytes("x")?, bytes("y")?);
            if x.len() != size || y.len() != size {
                return None;
            }
            KeyMaterial::Ec { curve, point: [&[0x04][..], &x, &y].concat() }
        }
        _ => return None,
    };
    Some(JsonWebKey { kid: text("kid").map(str::to_string), alg: text("alg").map(str::to_string), material })
}

/// What a broker expects of a token's claims (Kafka's `sasl.oauthbearer.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtValidationConfig {
    /// `sasl.oauthbearer.expected.audience` (none: a token must have no audience).
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.scope.claim.name` (`scope`).
    pub scope_claim_name: String,
    /// `sasl.oauthbearer.sub.claim.name` (`sub`).
    pub sub_claim_name: String,
    /// `sasl.oauthbearer.clock.skew.seconds` (30).
    pub clock_skew_seconds: i64,
}

impl Default for JwtValidationConfig {
    fn default() -> Self {
        JwtValidationConfig {
            expected_audience: Vec::new(),
            expected_issuer: None,
            scope_claim_name: "scope".into(),
            sub_claim_name: "sub".into(),
            clock_skew_seconds: 30,
        }
    }
}

/// Validates signed tokens against a key set and a claims config.
#[derive(Clone, Debug)]
pub struct SignedJwtValidator {
    config: JwtValidationConfig,
    keys: JsonWebKeySet,
}

/// How a JWS `alg` is verified: RSA parameters, or an ECDSA algorithm and
/// the curve its key must be on.
#[derive(Clone, Copy)]
enum Verifier {
    Rsa(&'static signature::RsaParameters),
    Ec(&'static signature::EcdsaVerificationAlgorithm, Curve),
}

fn verifier(alg: &str) -> Option<Verifier> {
    Some(match alg {
        "RS256" => Verifier::Rsa(&signature::RSA_PKCS1_2048_8192_SHA256),
        "RS384" => Verifier::Rsa(&signature::RSA_PKCS1_2048_8192_SHA384),
        "RS512" => Verifier::Rsa(&signature::RSA_PKCS1_2048_8192_SHA512),
        "PS256" => Verifier::Rsa(&signature::RSA_PSS_2048_8192_SHA256),
        "PS384" => Verifier::Rsa(&signature::RSA_PSS_2048_8192_SHA384),
        "PS512" => Verifier::Rsa(&signature::RSA_PSS_2048_8192_SHA512),
        "ES256" => Verifier::Ec(&signature::ECDSA_P256_SHA256_FIXED, Curve::P256),
        "ES384" => Verifier::Ec(&signature::ECDSA_P384_SHA384_FIXED, Curve::P384),
        _ => return None,
    })
}

impl Verifier {
    /// Whether `key` verifies `signature` of `signed` under this algorithm
    /// (false for a key of another type or curve).
    fn verifies(self, key: &KeyMaterial, signed: &[u8], signature: &[u8]) -> bool {
        match (self, key) {
            (Verifier::Rsa(params), KeyMaterial::Rsa { n, e }) => {
                RsaPublicKeyComponents { n, e }.verify(params, signed, signature).is_ok()
            }
            (Verifier::Ec(algorithm, wanted), KeyMaterial::Ec { curve, point }) if wanted == *curve => {
                UnparsedPublicKey::new(algorithm, point).verify(signed, signature).is_ok()
            }
            _ => false,
        }
    }

    fn suits(self, key: &KeyMaterial) -> bool {
        match (self, key) {
            (Verifier::Rsa(_), KeyMaterial::Rsa { .. }) => true,
            (Verifier::Ec(_, wanted), KeyMaterial::Ec { curve, .. }) => wanted == *curve,
            _ => false,
        }
    }
}

fn refuse(reason: impl std::fmt::Display) -> TokenRefused {
    TokenRefused::invalid(format!("Could not validate the access token: {reason}"))
}

impl SignedJwtValidator {
    pub fn new(config: JwtValidationConfig, keys: JsonWebKeySet) -> Self {
        SignedJwtValidator { config, keys }
    }

    /// Validates the compact JWS `token` at `now_ms` (ms since the epoch).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<BearerToken, TokenRefused> {
        let claims = self.verified_claims(token)?;
        self.check_claims(&claims, now_ms)?;
        let number = |name: &str| claims.get(name).and_then(Value::as_f64);
        let lifetime_ms = (number("exp").unwrap_or_default() * 1000.0).round() as i64;
        let start_time_ms = number("iat").map(|iat| (iat * 1000.0).round() as i64);
        let principal_name = match claims.get(&self.config.sub_claim_name) {
            Some(Value::String(sub)) if !sub.trim().is_empty() => sub.trim().to_string(),
            Some(Value::String(_)) | None => {
                return Err(refuse(format!("{} value must be non-empty", self.config.sub_claim_name)))
            }
            Some(_) => {
                let name = &self.config.sub_claim_name;
                return Err(refuse(format!("Could not extract the '{name}' claim from the access token")));
            }
        };
        let scope = self.scope(&claims)?;
        Ok(BearerToken { value: token.to_string(), principal_name, scope, lifetime_ms, start_time_ms })
    }

    /// The claims of a token whose signature one of the keys verifies.
    fn verified_claims(&self, token: &str) -> Result<Map<String, Value>, TokenRefused> {
        let parts: Vec<&str> = token.trim().split('.').collect();
        let [header, payload, signature] = parts[..] else {
            return Err(refuse(format!("malformed JWT provided; expected three sections, but {} found", parts.len())));
        };
        let object = |part: &str, what: &str| match decode_base64url(part).map(|b| serde_json::from_slice(&b)) {
            Some(Ok(Value::Object(map))) => Ok(map),
            _ => Err(refuse(format!("malformed JWT {what}: not a base64url-encoded JSON object"))),
        };
        let header_json = object(header, "header")?;
        let alg = header_json.get("alg").and_then(Value::as_str).unwrap_or("none");
        let Some(verifier) = verifier(alg) else {
            return Err(refuse(format!("'{alg}' is not a permitted algorithm")));
        };
        let signature = decode_base64url(signature).ok_or_else(|| refuse("malformed JWT signature"))?;
        let kid = header_json.get("kid").and_then(Value::as_str);
        let signed = format!("{header}.{payload}");
        let mut candidates = self.keys.keys.iter().filter(|key| {
            kid.is_none_or(|kid| key.kid.as_deref() == Some(kid))
                && key.alg.as_deref().is_none_or(|a| a == alg)
                && verifier.suits(&key.material)
        });
        let found = candidates.clone().next().is_some();
        if candidates.any(|key| verifier.verifies(&key.material, signed.as_bytes(), &signature)) {
            return object(payload, "payload");
        }
        let header_text = String::from_utf8_lossy(&decode_base64url(header).unwrap_or_default()).into_owned();
        Err(refuse(if found {
            format!("JWS signature is invalid (header {header_text})")
        } else {
            format!("Unable to find a suitable verification key for JWS w/ header {header_text}")
        }))
    }

    /// jose4j's checks as Kafka configures them: `exp` and `iat` required,
    /// expiry and `nbf` with the clock skew, audience and issuer.
    fn check_claims(&self, claims: &Map<String, Value>, now_ms: i64) -> Result<(), TokenRefused> {
        let now = now_ms as f64 / 1000.0;
        let skew = self.config.clock_skew_seconds as f64;
        let numeric = |name: &str| -> Result<Option<f64>, TokenRefused> {
            match claims.get(name) {
                None => Ok(None),
                Some(value) => value
                    .as_f64()
                    .map(Some)
                    .ok_or_else(|| refuse(format!("Could not extract the '{name}' claim from the access token"))),
            }
        };
        let exp = numeric("exp")?.ok_or_else(|| refuse("No Expiration Time (exp) claim present."))?;
        numeric("iat")?.ok_or_else(|| refuse("No Issued At (iat) claim present."))?;
        if now >= exp + skew {
            return Err(refuse(format!(
                "The JWT is no longer valid - the evaluation time {now} is on or after the Expiration Time (exp={exp}) claim value (even when providing {skew} seconds of leeway to account for clock skew)."
            )));
        }
        if let Some(nbf) = numeric("nbf")? {
            if now + skew < nbf {
                return Err(refuse(format!("The JWT is not yet valid as the evaluation time {now} is before the Not Before (nbf={nbf}) claim time (even when providing {skew} seconds of leeway to account for clock skew).")));
            }
        }
        self.check_audience(claims)?;
        if let Some(expected) = &self.config.expected_issuer {
            let issuer = claims.get("iss").and_then(Value::as_str);
            if issuer != Some(expected.as_str()) {
                return Err(refuse(format!(
                    "Issuer (iss) claim value ({issuer:?}) doesn't match expected value of {expected}"
                )));
            }
        }
        Ok(())
    }

    /// With expected audiences, `aud` (a string or a list) must name one;
    /// without, a token must have none (jose4j's default).
    fn check_audience(&self, claims: &Map<String, Value>) -> Result<(), TokenRefused> {
        let audience: Vec<&str> = match claims.get("aud") {
            None => Vec::new(),
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(refuse("Could not extract the 'aud' claim from the access token")),
        };
        let expected = &self.config.expected_audience;
        if expected.is_empty() {
            return match audience.is_empty() {
                true => Ok(()),
                false => Err(refuse(format!(
                    "Audience (aud) claim {audience:?} present in the JWT but no expected audience value(s) were provided to the JWT Consumer."
                ))),
            };
        }
        if audience.iter().any(|a| expected.iter().any(|e| e == a)) {
            return Ok(());
        }
        Err(refuse(format!("Audience (aud) claim {audience:?} doesn't contain an acceptable identifier. Expected {expected:?} as an aud value.")))
    }

    /// Kafka's scope: a string is one item, a list its items; each trimmed,
    /// and a blank one refuses the token.
    fn scope(&self, claims: &Map<String, Value>) -> Result<BTreeSet<String>, TokenRefused> {
        let items: Vec<&str> = match claims.get(&self.config.scope_claim_name) {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        items
            .into_iter()
            .map(|item| match item.trim() {
                "" => Err(refuse(format!("{} value must be non-empty", self.config.scope_claim_name))),
                trimmed => Ok(trimmed.to_string()),
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "jws_tests.rs"]
mod tests;
