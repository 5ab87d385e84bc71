//! Signed bearer tokens checked against a JSON Web Key Set, as Kafka's
//! broker-side `OAuthBearerValidatorCallbackHandler` checks them (KIP-768:
//! `ValidatorAccessTokenValidator` over jose4j 0.9's `JwtConsumer`).
//!
//! A token goes through the same stages as in Kafka, and a refusal names
//! the stage the way Kafka's log line would:
//!
//! 1. `SerializedJwt`: three non-blank dot-separated sections.
//! 2. jose4j's JWS processing: a JSON header with a supported `alg`
//!    (RS256/384/512, PS256/384/512, ES256/384, EdDSA with Ed25519; `none`
//!    and the HMAC algorithms are refused), a JSON object payload, a key of
//!    the set that suits the header (as `VerificationJwkSelector`: the
//!    header's `kid`, the key type the algorithm needs, `use` absent or
//!    `sig`, `alg` absent or the header's) and a signature over the ASCII
//!    `header.payload` as received that one of those keys verifies.
//! 3. jose4j's claim validators as Kafka's builder sets them up: `exp` and
//!    `iat` required, `exp` not passed and `nbf` reached with
//!    `clock_skew_seconds` of leeway (a future `iat` is not refused: Kafka
//!    sets no `iat` restriction), the audience (with none expected a token
//!    naming one is refused, jose4j's default) and the issuer; `sub`,
//!    `jti` and `iss` must be strings when present. Every failing validator
//!    is reported, as `JwtConsumer` does.
//! 4. Kafka's `ClaimValidationUtils`: the principal (configured claim) a
//!    non-blank string, the scope claim a string (one scope: Kafka does not
//!    split it) or a list of distinct non-blank strings, trimmed.
//!
//! JSON is read as jose4j reads it: an object repeating a member name is
//! refused (serde_json alone would keep the last one silently), and
//! NumericDates keep whole seconds (`Number.longValue`: fractions are cut).

use std::collections::{BTreeSet, HashSet};

use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

use super::{decode_base64url, BearerToken, TokenRefused};

/// The algorithms krabka verifies, in the order error messages list them.
const SUPPORTED_ALGORITHMS: [&str; 9] =
    ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"];

/// A refusal from jose4j's `JwtConsumer`, which Kafka prefixes so.
fn refuse(reason: impl std::fmt::Display) -> TokenRefused {
    TokenRefused::invalid(format!("Could not validate the access token: {reason}"))
}

/// Java's `String.trim()`: it strips every char up to U+0020 and nothing
/// else, so a principal of non-breaking spaces stays what Kafka sees.
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

/// A list as Java's `AbstractCollection.toString` prints it: `[a, b]`.
fn java_list<S: AsRef<str>>(items: &[S]) -> String {
    format!("[{}]", items.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(", "))
}

/// The JSON type of `value`, for messages about a claim of the wrong type.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// jose4j's `MalformedClaimException` text for a claim of the wrong type.
fn type_error(name: &str, value: &Value, wanted: &str) -> String {
    format!("The value of the '{name}' claim is not the expected type ({value} is {}, not {wanted})", kind(value))
}

/// Parses a JSON object as jose4j's `JsonUtil.parseJson` does: anything
/// else, and an object anywhere inside that repeats a member name, is an error.
fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8".to_string())?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("is not JSON ({e})"))?;
    let Value::Object(object) = value else {
        return Err(format!("is {}, not a JSON object", kind(&value)));
    };
    match repeated_name(text) {
        Some(name) => Err(format!("repeats a name: An entry for '{name}' already exists. Names must be unique.")),
        None => Ok(object),
    }
}

/// The first member name an object of `json` (valid JSON) repeats. A scan,
/// not a recursion, so nesting depth costs no stack.
fn repeated_name(json: &str) -> Option<String> {
    let bytes = json.as_bytes();
    // The names seen in each open object; None for an open array.
    let mut open: Vec<Option<HashSet<String>>> = Vec::new();
    let mut expect_name = false;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => {
                open.push(Some(HashSet::new()));
                expect_name = true;
            }
            b'[' => {
                open.push(None);
                expect_name = false;
            }
            b'}' | b']' => {
                open.pop();
                expect_name = false;
            }
            b',' => expect_name = matches!(open.last(), Some(Some(_))),
            b'"' => {
                let end = string_end(bytes, at);
                if expect_name {
                    // Unescaped, so "sub" and "\u0073ub" are the same name, as in Java.
                    let name: String = json.get(at..=end).and_then(|s| serde_json::from_str(s).ok())?;
                    if let Some(Some(names)) = open.last_mut() {
                        if !names.insert(name.clone()) {
                            return Some(name);
                        }
                    }
                    expect_name = false;
                }
                at = end;
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// The index of the quote closing the JSON string that opens at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at,
            _ => at += 1,
        }
    }
    bytes.len()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
}

impl Curve {
    fn named(name: &str) -> Option<Curve> {
        match name {
            "P-256" => Some(Curve::P256),
            "P-384" => Some(Curve::P384),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Curve::P256 => "P-256",
            Curve::P384 => "P-384",
        }
    }

    /// The length of a coordinate, and of r and s in a JWS signature.
    fn size(self) -> usize {
        match self {
            Curve::P256 => 32,
            Curve::P384 => 48,
        }
    }
}

/// A key's public material, as ring takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyMaterial {
    /// Big-endian modulus and exponent without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed point, 0x04 || x || y.
    Ec { curve: Curve, point: Vec<u8> },
    /// An Ed25519 public key (`kty` OKP).
    Ed25519 { x: Vec<u8> },
}

impl KeyMaterial {
    /// How the key shows in a message: its type and curve.
    fn describe(&self) -> String {
        match self {
            KeyMaterial::Rsa { .. } => "kty=RSA".into(),
            KeyMaterial::Ec { curve, .. } => format!("kty=EC, crv={}", curve.name()),
            KeyMaterial::Ed25519 { .. } => "kty=OKP, crv=Ed25519".into(),
        }
    }

    /// Why ring cannot verify with this key, None when it can. jose4j reads
    /// any RSA key and refuses one under 2048 bits when it comes to verify
    /// (its text here); ring also wants at most 8192 bits and an odd
    /// exponent of 3 to 2^33 - 1.
    fn unusable(&self) -> Option<String> {
        let KeyMaterial::Rsa { n, e } = self else { return None };
        let bits = n.first().map_or(0, |first| n.len() * 8 - first.leading_zeros() as usize);
        if bits < 2048 {
            return Some(format!(
                "An RSA key of size 2048 bits or larger MUST be used with the all JOSE RSA algorithms (given key was only {bits} bits)."
            ));
        }
        if bits > 8192 {
            return Some(format!("krabka verifies with RSA keys of at most 8192 bits (given key has {bits} bits)"));
        }
        let exponent = e.iter().try_fold(0u64, |value, &b| value.checked_mul(256).map(|v| v | u64::from(b)));
        match exponent {
            Some(exponent) if exponent % 2 == 1 && (3..1 << 33).contains(&exponent) => None,
            _ => Some("krabka verifies with RSA keys whose public exponent is odd, from 3 to 2^33 - 1".into()),
        }
    }
}

/// One verification key of the set.
#[derive(Clone, Debug, PartialEq, Eq)]
struct JsonWebKey {
    kid: Option<String>,
    alg: Option<String>,
    material: KeyMaterial,
}

/// A JSON Web Key Set (RFC 7517) as jose4j's `JsonWebKeySet` reads it:
/// the keys of it krabka can verify signatures with. Keys of other types
/// or curves (oct, P-521, X25519...), encryption keys (`use` other than
/// `sig`) and keys jose4j would fail to read (a member of the wrong type,
/// missing or undecodable material) are left out. An RSA key of a size
/// ring does not take (jose4j refuses under 2048 bits) is kept, as jose4j
/// keeps it, and a token it would verify is refused saying why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonWebKeySet {
    keys: Vec<JsonWebKey>,
}

impl JsonWebKeySet {
    /// Parses a JWKS document (`{"keys": [...]}`). Unusable keys are
    /// skipped; what makes jose4j's constructor throw (not a JSON object,
    /// no `keys` array, an entry not an object, a repeated member name) is
    /// an error, the message for the broker's start refusal.
    pub fn parse(json: &str) -> Result<JsonWebKeySet, String> {
        let document = parse_object(json.as_bytes()).map_err(|e| format!("The JWKS {e}"))?;
        let entries = match document.get("keys") {
            None | Some(Value::Null) => return Err("The JSON JWKS content does not include the keys member.".into()),
            Some(Value::Array(entries)) => entries,
            Some(other) => return Err(format!("The JWKS keys member is {}, not an array", kind(other))),
        };
        let mut keys = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            let Value::Object(entry) = entry else {
                return Err(format!("The JWKS keys member's entry {index} is {}, not a JSON object", kind(entry)));
            };
            keys.extend(verification_key(entry));
        }
        Ok(JsonWebKeySet { keys })
    }

    /// How many keys krabka can verify with.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys as a message lists them, `[{kty=RSA, kid=a}, ...]`.
    fn describe(&self) -> String {
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|key| {
                let mut text = format!("{{{}", key.material.describe());
                for (name, value) in [("kid", &key.kid), ("alg", &key.alg)] {
                    if let Some(value) = value {
                        text.push_str(&format!(", {name}={value}"));
                    }
                }
                text + "}"
            })
            .collect();
        java_list(&keys)
    }
}

/// A signature key krabka verifies with, else None (the entry is skipped).
fn verification_key(key: &Map<String, Value>) -> Option<JsonWebKey> {
    // jose4j drops a key whose string member has another type: Err here.
    let text = |name: &str| match key.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.as_str())),
        Some(_) => Err(()),
    };
    let bytes = |name: &str| text(name).ok().flatten().and_then(decode_base64url);
    let (kid, alg, usage) = (text("kid").ok()?, text("alg").ok()?, text("use").ok()?);
    // jose4j keeps encryption keys but its verification selector never picks them.
    if usage.is_some_and(|usage| usage != "sig") {
        return None;
    }
    let material = match (text("kty").ok()??, text("crv").ok()?) {
        ("RSA", _) => rsa_material(bytes("n")?, bytes("e")?)?,
        ("EC", Some(crv)) => {
            let curve = Curve::named(crv)?;
            let point = [vec![0x04], coordinate(curve, bytes("x")?)?, coordinate(curve, bytes("y")?)?].concat();
            KeyMaterial::Ec { curve, point }
        }
        ("OKP", Some("Ed25519")) => Some(bytes("x")?).filter(|x| x.len() == 32).map(|x| KeyMaterial::Ed25519 { x })?,
        _ => return None,
    };
    Some(JsonWebKey { kid: kid.map(str::to_string), alg: alg.map(str::to_string), material })
}

/// An RSA public key: nonzero numbers, their leading zero bytes dropped
/// (some issuers write `n` as Java's signed `BigInteger.toByteArray`, with a
/// 0x00 first, which jose4j reads as a number and ring would refuse).
fn rsa_material(n: Vec<u8>, e: Vec<u8>) -> Option<KeyMaterial> {
    let strip = |bytes: Vec<u8>| bytes.iter().position(|&b| b != 0).map(|first| bytes[first..].to_vec());
    Some(KeyMaterial::Rsa { n: strip(n)?, e: strip(e)? })
}

/// An EC coordinate at the curve's full length: jose4j reads it as a
/// number, so a coordinate written without its leading zeros still does.
fn coordinate(curve: Curve, bytes: Vec<u8>) -> Option<Vec<u8>> {
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    let digits = &bytes[first..];
    let padding = curve.size().checked_sub(digits.len())?;
    Some([vec![0; padding], digits.to_vec()].concat())
}

/// How a JWS `alg` verifies.
#[derive(Clone, Copy)]
enum Algorithm {
    Rsa(&'static str, &'static signature::RsaParameters),
    Ecdsa(&'static str, &'static signature::EcdsaVerificationAlgorithm, Curve),
    EdDsa,
}

impl Algorithm {
    fn named(alg: &str) -> Option<Algorithm> {
        use Algorithm::{Ecdsa, Rsa};
        Some(match alg {
            "RS256" => Rsa("RS256", &signature::RSA_PKCS1_2048_8192_SHA256),
            "RS384" => Rsa("RS384", &signature::RSA_PKCS1_2048_8192_SHA384),
            "RS512" => Rsa("RS512", &signature::RSA_PKCS1_2048_8192_SHA512),
            "PS256" => Rsa("PS256", &signature::RSA_PSS_2048_8192_SHA256),
            "PS384" => Rsa("PS384", &signature::RSA_PSS_2048_8192_SHA384),
            "PS512" => Rsa("PS512", &signature::RSA_PSS_2048_8192_SHA512),
            "ES256" => Ecdsa("ES256", &signature::ECDSA_P256_SHA256_FIXED, Curve::P256),
            "ES384" => Ecdsa("ES384", &signature::ECDSA_P384_SHA384_FIXED, Curve::P384),
            "EdDSA" => Algorithm::EdDsa,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Algorithm::Rsa(name, _) | Algorithm::Ecdsa(name, _, _) => name,
            Algorithm::EdDsa => "EdDSA",
        }
    }

    /// Whether `key` is of the type this algorithm needs. jose4j narrows by
    /// curve only among several EC keys and then fails on a wrong one; a
    /// key of the wrong curve cannot verify, so it is no candidate here.
    fn suits(self, key: &KeyMaterial) -> bool {
        match (self, key) {
            (Algorithm::Rsa(..), KeyMaterial::Rsa { .. }) | (Algorithm::EdDsa, KeyMaterial::Ed25519 { .. }) => true,
            (Algorithm::Ecdsa(_, _, wanted), KeyMaterial::Ec { curve, .. }) => wanted == *curve,
            _ => false,
        }
    }

    /// Whether `key` verifies `signature` of `signed`. JWS ECDSA
    /// signatures are r || s at the curve's size: ring's FIXED form.
    fn verifies(self, key: &KeyMaterial, signed: &[u8], signature: &[u8]) -> bool {
        match (self, key) {
            (Algorithm::Rsa(_, parameters), KeyMaterial::Rsa { n, e }) => {
                RsaPublicKeyComponents { n, e }.verify(parameters, signed, signature).is_ok()
            }
            (Algorithm::Ecdsa(_, algorithm, wanted), KeyMaterial::Ec { curve, point }) if wanted == *curve => {
                UnparsedPublicKey::new(algorithm, point).verify(signed, signature).is_ok()
            }
            (Algorithm::EdDsa, KeyMaterial::Ed25519 { x }) => {
                UnparsedPublicKey::new(&signature::ED25519, x).verify(signed, signature).is_ok()
            }
            _ => false,
        }
    }
}

/// What a broker expects of a token's claims: Kafka's `sasl.oauthbearer.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtValidationConfig {
    /// `sasl.oauthbearer.expected.audience`. When not empty, `aud` must
    /// name one; when empty, a token must not have an `aud` at all.
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`: `iss` must be it.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.scope.claim.name` (`scope`).
    pub scope_claim_name: String,
    /// `sasl.oauthbearer.sub.claim.name` (`sub`): the principal's claim.
    pub sub_claim_name: String,
    /// `sasl.oauthbearer.clock.skew.seconds` (30): leeway for `exp` and `nbf`.
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

impl SignedJwtValidator {
    pub fn new(config: JwtValidationConfig, keys: JsonWebKeySet) -> Self {
        SignedJwtValidator { config, keys }
    }

    /// Validates the compact JWS `token` at `now_ms` (ms since the epoch):
    /// the session's token, or why not (always `invalid_token`, as Kafka).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<BearerToken, TokenRefused> {
        let claims = self.verified_claims(token)?;
        let issues = self.claim_issues(&claims, now_ms);
        if !issues.is_empty() {
            let claims = serde_json::to_string(&claims).unwrap_or_default();
            return Err(refuse(format!(
                "JWT (claims->{claims}) rejected due to invalid claims or other invalid content. Additional details: {}",
                java_list(&issues)
            )));
        }
        self.bearer_token(token, &claims)
    }

    /// The claims of a token whose signature a key of the set verifies.
    fn verified_claims(&self, token: &str) -> Result<Map<String, Value>, TokenRefused> {
        let [header_text, payload_text, signature_text] = sections(token)?;
        let jose = |what: String| refuse(format!("Unable to process JOSE object (cause: {what})"));
        let header = decode_base64url(header_text)
            .ok_or_else(|| "is not base64url".to_string())
            .and_then(|bytes| parse_object(&bytes))
            .map_err(|e| jose(format!("the JWS header {e}")))?;
        let header_json = serde_json::to_string(&header).unwrap_or_default();
        if let Some(unsupported) = unsupported_header(&header) {
            return Err(jose(unsupported));
        }
        let claims = decode_base64url(payload_text)
            .ok_or_else(|| "is not base64url".to_string())
            .and_then(|bytes| parse_object(&bytes))
            .map_err(|e| refuse(format!("Unable to parse what was expected to be the JWT Claim Set JSON: it {e}")))?;
        let algorithm = algorithm(&header).map_err(jose)?;
        let kid = match header.get("kid") {
            None | Some(Value::Null) => None,
            Some(Value::String(kid)) => Some(kid.as_str()),
            Some(other) => return Err(jose(format!("the kid header is {}, not a string", kind(other)))),
        };
        let candidates = self.candidates(algorithm, kid);
        if candidates.is_empty() {
            return Err(jose(format!(
                "Unable to find a suitable verification key for JWS w/ header {header_json} from JWKs {}",
                self.keys.describe()
            )));
        }
        let signature = decode_base64url(signature_text)
            .ok_or_else(|| refuse(format!("JWS signature is not base64url: JsonWebSignature{header_json}")))?;
        // The signing input is the first two sections exactly as they came.
        let signed = format!("{header_text}.{payload_text}");
        let usable: Vec<_> = candidates.iter().filter(|key| key.material.unusable().is_none()).collect();
        if usable.iter().any(|key| algorithm.verifies(&key.material, signed.as_bytes(), &signature)) {
            return Ok(claims);
        }
        match (usable.is_empty(), candidates.first().and_then(|key| key.material.unusable())) {
            (true, Some(unusable)) => Err(jose(unusable)),
            _ => Err(refuse(format!("JWS signature is invalid: JsonWebSignature{header_json}"))),
        }
    }

    /// The keys jose4j's `VerificationJwkSelector` would consider: the
    /// header's `kid` when it has one (a key without one does not match),
    /// the key type (and curve) of the algorithm, and no other `alg`
    /// declared. jose4j tries only the first; krabka tries each, so a set
    /// with several keys and tokens without `kid` works as one expects.
    fn candidates(&self, algorithm: Algorithm, kid: Option<&str>) -> Vec<&JsonWebKey> {
        let suits = |key: &&JsonWebKey| {
            kid.is_none_or(|kid| key.kid.as_deref() == Some(kid))
                && key.alg.as_deref().is_none_or(|alg| alg == algorithm.name())
                && algorithm.suits(&key.material)
        };
        self.keys.keys.iter().filter(suits).collect()
    }

    /// jose4j's default validators as Kafka's `JwtConsumerBuilder` sets them
    /// up, in their order (audience, issuer, dates, `sub`, `jti`); like
    /// `JwtConsumer`, every one that fails is reported.
    fn claim_issues(&self, claims: &Map<String, Value>, now_ms: i64) -> Vec<String> {
        let strings = ["sub", "jti"].map(|name| string_claim(claims, name).err());
        [self.audience_issue(claims), self.issuer_issue(claims), self.date_issue(claims, now_ms)]
            .into_iter()
            .chain(strings)
            .flatten()
            .collect()
    }

    /// jose4j's `AudValidator`: Kafka sets expected audiences (and so
    /// requires the claim) only when configured; otherwise the default
    /// validator refuses any `aud`.
    fn audience_issue(&self, claims: &Map<String, Value>) -> Option<String> {
        let mut expected: Vec<&str> = Vec::new();
        for audience in &self.config.expected_audience {
            if !expected.contains(&audience.as_str()) {
                expected.push(audience);
            }
        }
        let audiences: Vec<&str> = match claims.get("aud") {
            None | Some(Value::Null) => {
                return (!expected.is_empty()).then(|| "No Audience (aud) claim present.".into())
            }
            Some(Value::String(one)) => vec![one],
            Some(Value::Array(many)) => match many.iter().map(Value::as_str).collect::<Option<Vec<_>>>() {
                Some(all) => all,
                None => return Some("The array value of the 'aud' claim contains non string values".into()),
            },
            Some(_) => {
                return Some("The value of the 'aud' claim is not an array of strings or a single string value.".into())
            }
        };
        if audiences.iter().any(|audience| expected.contains(audience)) {
            return None;
        }
        let problem = match expected.is_empty() {
            true => "present in the JWT but no expected audience value(s) were provided to the JWT Consumer.",
            false => "doesn't contain an acceptable identifier.",
        };
        let wanted = match expected.as_slice() {
            [one] => one.to_string(),
            _ => format!("one of {}", java_list(&expected)),
        };
        Some(format!("Audience (aud) claim {} {problem} Expected {wanted} as an aud value.", java_list(&audiences)))
    }

    /// jose4j's `IssValidator`: `iss` a string if present, and the
    /// expected one when configured.
    fn issuer_issue(&self, claims: &Map<String, Value>) -> Option<String> {
        let issuer = match string_claim(claims, "iss") {
            Ok(issuer) => issuer,
            Err(malformed) => return Some(malformed),
        };
        let expected = self.config.expected_issuer.as_deref()?;
        match issuer {
            None => Some(format!("No Issuer (iss) claim present but was expecting {expected}")),
            Some(issuer) if issuer != expected => {
                Some(format!("Issuer (iss) claim value ({issuer}) doesn't match expected value of {expected}"))
            }
            Some(_) => None,
        }
    }

    /// jose4j's `NumericDateValidator` with `exp` and `iat` required and
    /// the clock skew; whole seconds throughout, as jose4j's `NumericDate`.
    /// It reports its first failure only.
    fn date_issue(&self, claims: &Map<String, Value>, now_ms: i64) -> Option<String> {
        let dates = (numeric_date(claims, "exp"), numeric_date(claims, "iat"), numeric_date(claims, "nbf"));
        let (exp, iat, nbf) = match dates {
            (Ok(exp), Ok(iat), Ok(nbf)) => (exp, iat, nbf),
            (Err(malformed), _, _) | (_, Err(malformed), _) | (_, _, Err(malformed)) => return Some(malformed),
        };
        let Some(exp) = exp else { return Some("No Expiration Time (exp) claim present.".into()) };
        let Some(iat) = iat else { return Some("No Issued At (iat) claim present.".into()) };
        // NumericDate.now(): currentTimeMillis / 1000, truncated as here.
        let now = now_ms / 1000;
        let skew = self.config.clock_skew_seconds;
        let leeway = match skew > 0 {
            true => format!(" (even when providing {skew} seconds of leeway to account for clock skew)."),
            false => ".".into(),
        };
        if now.saturating_sub(skew) >= exp {
            return Some(format!(
                "The JWT is no longer valid - the evaluation time {now} is on or after the Expiration Time (exp={exp}) claim value{leeway}"
            ));
        }
        if exp < iat {
            return Some(format!(
                "The Expiration Time (exp={exp}) claim value cannot be before the Issued At (iat={iat}) claim value."
            ));
        }
        let nbf = nbf?;
        if exp < nbf {
            return Some(format!(
                "The Expiration Time (exp={exp}) claim value cannot be before the Not Before (nbf={nbf}) claim value."
            ));
        }
        (now.saturating_add(skew) < nbf).then(|| {
            format!("The JWT is not yet valid as the evaluation time {now} is before the Not Before (nbf={nbf}) claim time{leeway}")
        })
    }

    /// What Kafka's `ValidatorAccessTokenValidator.validate` takes from the
    /// claims jose4j passed, checked by `ClaimValidationUtils` in its order
    /// (extraction of scope, exp, sub and iat; then scope, exp, sub, iat).
    fn bearer_token(&self, token: &str, claims: &Map<String, Value>) -> Result<BearerToken, TokenRefused> {
        let (scope_name, sub_name) = (&self.config.scope_claim_name, &self.config.sub_claim_name);
        // A string is one scope, a list its items, anything else no scope.
        let scope: Vec<Option<&str>> = match claims.get(scope_name) {
            Some(Value::String(one)) => vec![Some(one.as_str())],
            Some(Value::Array(many)) => many
                .iter()
                .map(|item| match item {
                    Value::String(item) => Ok(Some(item.as_str())),
                    Value::Null => Ok(None),
                    // Kafka's cast to Collection<String> throws (ClassCastException).
                    other => Err(TokenRefused::invalid(format!(
                        "{scope_name} value must hold only strings, but holds {}",
                        kind(other)
                    ))),
                })
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        let exp = numeric_date(claims, "exp").ok().flatten();
        let subject = match claims.get(sub_name) {
            None | Some(Value::Null) => None,
            Some(Value::String(subject)) => Some(subject.as_str()),
            Some(_) => {
                return Err(TokenRefused::invalid(format!(
                    "Could not extract the '{sub_name}' claim from the access token"
                )))
            }
        };
        let iat = numeric_date(claims, "iat").ok().flatten();
        let scope = validate_scopes(scope_name, &scope)?;
        // jose4j's getValueInMillis: whole seconds times 1000 (numeric_date checked the product fits).
        let lifetime_ms = match exp {
            None => return Err(TokenRefused::invalid("exp value must be non-null")),
            Some(exp) if exp < 0 => {
                let ms = exp * 1000;
                return Err(TokenRefused::invalid(format!("exp value must be non-negative; value given was \"{ms}\"")));
            }
            Some(exp) => exp * 1000,
        };
        let principal_name = validate_string(sub_name, subject)?;
        let start_time_ms = match iat {
            Some(iat) if iat < 0 => {
                let ms = iat * 1000;
                let reason = format!("iat value must be null or non-negative; value given was \"{ms}\"");
                return Err(TokenRefused::invalid(reason));
            }
            iat => iat.map(|iat| iat * 1000),
        };
        Ok(BearerToken { value: token.to_string(), principal_name, scope, lifetime_ms, start_time_ms })
    }
}

/// The three sections of a compact JWS, split as Kafka's `SerializedJwt`
/// and then jose4j's `CompactSerializer` split it.
fn sections(token: &str) -> Result<[&str; 3], TokenRefused> {
    let token = java_trim(token);
    if token.is_empty() {
        return Err(TokenRefused::invalid(
            "Empty JWT provided; expected three sections (header, payload, and signature)",
        ));
    }
    let parts: Vec<&str> = token.split('.').collect();
    // Java's String.split drops trailing empty strings: "h.p." has two sections.
    let counted = parts.iter().rposition(|part| !part.is_empty()).map_or(0, |last| last + 1);
    if counted != 3 {
        return Err(TokenRefused::invalid(format!(
            "Malformed JWT provided; expected three sections (header, payload, and signature), but {counted} sections provided"
        )));
    }
    for (part, name) in parts.iter().zip(["header", "payload", "signature"]) {
        if java_trim(part).is_empty() {
            return Err(TokenRefused::invalid(format!(
                "Malformed JWT provided; expected at least three sections (header, payload, and signature), but {name} section missing"
            )));
        }
    }
    match parts[..] {
        [header, payload, signature] => Ok([header, payload, signature]),
        // jose4j counts what Java's split dropped: "h.p.s." is no JWS.
        _ => Err(refuse(format!(
            "Unable to process JOSE object (cause: Invalid JOSE Compact Serialization. Expecting either 3 or 5 parts for JWS or JWE respectively but was {}.)",
            parts.len()
        ))),
    }
}

/// What in a JWS header krabka does not process, where jose4j would do
/// something else than verify the payload as claims: a `crit` extension
/// (jose4j knows only RFC 7797's `b64`), an unencoded payload, a nested JWT.
fn unsupported_header(header: &Map<String, Value>) -> Option<String> {
    match header.get("crit") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            if let Some(name) = names.first() {
                let name = name.as_str().map_or_else(|| name.to_string(), str::to_string);
                return Some(format!("Unrecognized header '{name}' marked as critical."));
            }
        }
        Some(other) => return Some(format!("crit header value not an array ({other}).")),
    }
    if header.get("b64") == Some(&Value::Bool(false)) {
        return Some("an unencoded payload (b64: false, RFC 7797) is not supported".into());
    }
    let cty = header.get("cty").and_then(Value::as_str).unwrap_or_default();
    let nested = cty.eq_ignore_ascii_case("jwt") || cty.eq_ignore_ascii_case("application/jwt");
    nested.then(|| format!("a nested JWT (cty: {cty}) is not supported"))
}

/// The header's `alg`, if krabka verifies it: `none` is refused as Kafka's
/// `DISALLOW_NONE` does, HMAC for want of a shared key (a JWKS publishes
/// public keys; krabka skips `oct` keys), anything else as unknown.
fn algorithm(header: &Map<String, Value>) -> Result<Algorithm, String> {
    let alg = match header.get("alg") {
        None | Some(Value::Null) => return Err("Signature algorithm header (alg) not set.".into()),
        Some(Value::String(alg)) => alg.as_str(),
        Some(other) => return Err(format!("the alg header is {}, not a string", kind(other))),
    };
    if alg == "none" {
        return Err("'none' is a blacklisted algorithm.".into());
    }
    if let Some(algorithm) = Algorithm::named(alg) {
        return Ok(algorithm);
    }
    if matches!(alg, "HS256" | "HS384" | "HS512") {
        return Err(format!(
            "'{alg}' needs a shared secret key: krabka verifies tokens with the public keys of the JWKS only"
        ));
    }
    Err(format!(
        "{alg} is an unknown, unsupported or unavailable alg algorithm (not one of {}).",
        java_list(&SUPPORTED_ALGORITHMS)
    ))
}

/// A claim that must be a string when present (jose4j's
/// `getStringClaimValue`), None when absent or null.
fn string_claim<'a>(claims: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, String> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(type_error(name, other, "a string")),
    }
}

/// A NumericDate claim in whole seconds, None when absent or null, as
/// jose4j's `getNumericDateClaimValue`: a fraction is cut off. A value
/// whose milliseconds do not fit an i64 is unreasonable (jose4j's own
/// limit is a BigInteger, beyond which Java's arithmetic would wrap).
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => {
            // `as` saturates, so a huge float lands out of range below.
            let seconds = number.as_i64().or_else(|| number.as_f64().filter(|_| !number.is_u64()).map(|f| f as i64));
            match seconds.filter(|seconds| seconds.checked_mul(1000).is_some()) {
                Some(seconds) => Ok(Some(seconds)),
                None => Err(format!("{number} is unreasonable for a NumericDate")),
            }
        }
        Some(other) => Err(type_error(name, other, "a NumericDate (number)")),
    }
}

/// `ClaimValidationUtils.validateString`: present, not empty, not only
/// whitespace (Java's trim); the trimmed value.
fn validate_string(name: &str, value: Option<&str>) -> Result<String, TokenRefused> {
    match value {
        None => Err(TokenRefused::invalid(format!("{name} value must be non-null"))),
        Some("") => Err(TokenRefused::invalid(format!("{name} value must be non-empty"))),
        Some(value) => match java_trim(value) {
            "" => Err(TokenRefused::invalid(format!("{name} value must not contain only whitespace"))),
            trimmed => Ok(trimmed.to_string()),
        },
    }
}

/// `ClaimValidationUtils.validateScopes`: each a valid string, no two the
/// same once trimmed.
fn validate_scopes(name: &str, scopes: &[Option<&str>]) -> Result<BTreeSet<String>, TokenRefused> {
    let mut valid = BTreeSet::new();
    for scope in scopes {
        let scope = validate_string(name, *scope)?;
        if valid.contains(&scope) {
            let reason = format!("{name} value must not contain duplicates - {scope} already present");
            return Err(TokenRefused::invalid(reason));
        }
        valid.insert(scope);
    }
    Ok(valid)
}

#[cfg(test)]
#[path = "jws_tests.rs"]
mod tests;
