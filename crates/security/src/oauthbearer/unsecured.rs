//! Kafka's default OAUTHBEARER validator,
//! `OAuthBearerUnsecuredValidatorCallbackHandler`: an unsigned JWT
//! (`alg: none`, empty signature) whose claims are believed as they stand.
//! For development and tests, as in Kafka; production listeners configure
//! signed tokens (`jws`).
//!
//! Its options are the JAAS options of the listener's OAUTHBEARER login
//! module: `unsecuredValidatorPrincipalClaimName` (default `sub`),
//! `unsecuredValidatorScopeClaimName` (`scope`),
//! `unsecuredValidatorRequiredScope` (space-separated) and
//! `unsecuredValidatorAllowableClockSkewMs` (0).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{decode_base64url, BearerToken, TokenRefused};

/// The validator's options, read from the JAAS entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsecuredValidatorOptions {
    pub principal_claim_name: String,
    pub scope_claim_name: String,
    pub required_scope: Vec<String>,
    pub allowable_clock_skew_ms: i64,
}

impl Default for UnsecuredValidatorOptions {
    fn default() -> Self {
        UnsecuredValidatorOptions {
            principal_claim_name: "sub".into(),
            scope_claim_name: "scope".into(),
            required_scope: Vec::new(),
            allowable_clock_skew_ms: 0,
        }
    }
}

impl UnsecuredValidatorOptions {
    /// Reads the `unsecuredValidator*` JAAS options; blank ones keep their
    /// defaults, as Kafka's. The error is Kafka's OAuthBearerConfigException text.
    pub fn from_jaas_options(options: &BTreeMap<String, String>) -> Result<Self, String> {
        let option = |name: &str| options.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let mut parsed = UnsecuredValidatorOptions::default();
        if let Some(name) = option("unsecuredValidatorPrincipalClaimName") {
            parsed.principal_claim_name = name.to_string();
        }
        if let Some(name) = option("unsecuredValidatorScopeClaimName") {
            parsed.scope_claim_name = name.to_string();
        }
        if let Some(scope) = option("unsecuredValidatorRequiredScope") {
            parsed.required_scope = parse_scope(scope)?;
        }
        if let Some(skew) = option("unsecuredValidatorAllowableClockSkewMs") {
            let skew: i32 = skew.parse().map_err(|_| format!("For input string: \"{skew}\""))?;
            if skew < 0 {
                return Err(format!("Allowable clock skew millis must not be negative: {skew}"));
            }
            parsed.allowable_clock_skew_ms = i64::from(skew);
        }
        Ok(parsed)
    }
}

/// `OAuthBearerScopeUtils.parseScope`: space-separated items of RFC 6749's
/// scope-token characters.
fn parse_scope(text: &str) -> Result<Vec<String>, String> {
    let valid =
        |item: &str| item.bytes().all(|b| b == 0x21 || (0x23..=0x5B).contains(&b) || (0x5D..=0x7E).contains(&b));
    text.split(' ')
        .filter(|item| !item.is_empty())
        .map(|item| if valid(item) { Ok(item.to_string()) } else { Err(format!("Invalid scope value: {item}")) })
        .collect()
}

/// A claim as Kafka's unsecured JWS holds it: arrays become lists of their
/// elements' text, numbers stay numbers, anything else is its text.
#[derive(Clone, Debug, PartialEq)]
enum Claim {
    Text(String),
    Number(f64),
    List(Vec<String>),
}

impl Claim {
    fn of(value: &Value) -> Self {
        match value {
            Value::Array(items) => Claim::List(items.iter().map(as_text).collect()),
            Value::Number(n) => Claim::Number(n.as_f64().unwrap_or(f64::NAN)),
            other => Claim::Text(as_text(other)),
        }
    }

    /// Java's simple class name of the claim, for the type-mismatch text.
    fn java_type(&self) -> &'static str {
        match self {
            Claim::Text(_) => "String",
            Claim::Number(_) => "Number",
            Claim::List(_) => "ArrayList",
        }
    }
}

/// Jackson's `asText`: a string's value, a scalar's text, "" for containers.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Array(_) | Value::Object(_) => String::new(),
    }
}

/// One part of the compact serialization as a JSON object's claims.
fn json_object(part: &str) -> Result<BTreeMap<String, Claim>, TokenRefused> {
    let bytes = decode_base64url(part).ok_or_else(|| TokenRefused::invalid("malformed Base64 URL encoded value"))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map.iter().map(|(k, v)| (k.clone(), Claim::of(v))).collect()),
        _ => Err(TokenRefused::invalid("malformed JSON")),
    }
}

/// Validates an unsecured JWT at `now_ms` as Kafka's unsecured validator.
pub fn validate(token: &str, options: &UnsecuredValidatorOptions, now_ms: i64) -> Result<BearerToken, TokenRefused> {
    if token.contains("..") {
        return Err(TokenRefused::invalid("Malformed compact serialization contains '..'"));
    }
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        let reason = "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values";
        return Err(TokenRefused::invalid(reason));
    }
    let header = json_object(parts[0])?;
    let claims = json_object(parts[1])?;
    match header.get("alg") {
        Some(Claim::Text(alg)) if alg == "none" => {}
        Some(_) => return Err(TokenRefused::invalid("Unsecured JWS must have 'none' for an algorithm")),
        None => return Err(TokenRefused::invalid("JWS header must have an Algorithm value")),
    }
    if !parts[2].is_empty() {
        return Err(TokenRefused::invalid("Unsecured JWS must not contain a digital signature"));
    }
    let token_claims = TokenClaims { claims: &claims };
    let scope = token_claims.scope(&options.scope_claim_name)?;
    let expiration = token_claims.number("exp")?.ok_or_else(|| TokenRefused::invalid("No expiration time in JWT"))?;
    let principal_name = match token_claims.text(&options.principal_claim_name)? {
        Some(name) if !name.trim().is_empty() => name.to_string(),
        _ => {
            let reason = format!("No principal name in JWT claim: {}", options.principal_claim_name);
            return Err(TokenRefused::invalid(reason));
        }
    };
    let issued_at = token_claims.number("iat")?;
    check_times(issued_at, expiration, now_ms, options.allowable_clock_skew_ms)?;
    check_scope(&scope, &options.required_scope)?;
    Ok(BearerToken {
        value: token.to_string(),
        principal_name,
        scope,
        lifetime_ms: seconds_to_ms(expiration),
        start_time_ms: issued_at.map(seconds_to_ms),
    })
}

/// The claims of one token, read with Kafka's type checks.
struct TokenClaims<'a> {
    claims: &'a BTreeMap<String, Claim>,
}

impl TokenClaims<'_> {
    fn mismatch(name: &str, wanted: &str, claim: &Claim) -> TokenRefused {
        TokenRefused::invalid(format!("The '{name}' claim was not of type {wanted}: {}", claim.java_type()))
    }

    fn number(&self, name: &str) -> Result<Option<f64>, TokenRefused> {
        match self.claims.get(name) {
            None => Ok(None),
            Some(Claim::Number(n)) => Ok(Some(*n)),
            Some(other) => Err(Self::mismatch(name, "Number", other)),
        }
    }

    fn text(&self, name: &str) -> Result<Option<&str>, TokenRefused> {
        match self.claims.get(name) {
            None => Ok(None),
            Some(Claim::Text(text)) => Ok(Some(text)),
            Some(other) => Err(Self::mismatch(name, "String", other)),
        }
    }

    /// A string is one scope item (trimmed), a list is one item per
    /// non-blank element; anything else is a type mismatch.
    fn scope(&self, name: &str) -> Result<BTreeSet<String>, TokenRefused> {
        match self.claims.get(name) {
            None => Ok(BTreeSet::new()),
            Some(Claim::Text(text)) if text.trim().is_empty() => Ok(BTreeSet::new()),
            Some(Claim::Text(text)) => Ok(BTreeSet::from([text.trim().to_string()])),
            Some(Claim::List(items)) => {
                Ok(items.iter().filter(|i| !i.trim().is_empty()).map(|i| i.trim().to_string()).collect())
            }
            Some(other) => Err(Self::mismatch(name, "List", other)),
        }
    }
}

/// `Math.round(seconds * 1000)`.
fn seconds_to_ms(seconds: f64) -> i64 {
    (seconds * 1000.0).round() as i64
}

/// Kafka's issued-at, expiration and consistency checks, in its order.
fn check_times(issued_at: Option<f64>, expiration: f64, now_ms: i64, skew_ms: i64) -> Result<(), TokenRefused> {
    if let Some(iat) = issued_at {
        if 1000.0 * iat > (now_ms + skew_ms) as f64 {
            return Err(TokenRefused::invalid(format!(
                "The Issued At value ({iat:.6} seconds) was after the indicated time ({now_ms} ms) plus allowable clock skew ({skew_ms} ms)"
            )));
        }
    }
    if (now_ms - skew_ms) as f64 >= 1000.0 * expiration {
        return Err(TokenRefused::invalid(format!(
            "The indicated time ({now_ms} ms) minus allowable clock skew ({skew_ms} ms) was on or after the Expiration Time value ({expiration:.6} seconds)"
        )));
    }
    if let Some(iat) = issued_at.filter(|iat| expiration <= *iat) {
        return Err(TokenRefused::invalid(format!(
            "The Expiration Time time ({expiration:.6} seconds) was not after the Issued At time ({iat:.6} seconds)"
        )));
    }
    Ok(())
}

/// Every required scope item must be in the token's scope; the refusal is
/// `insufficient_scope` naming the required scope as Java prints a list.
fn check_scope(scope: &BTreeSet<String>, required: &[String]) -> Result<(), TokenRefused> {
    let Some(missing) = required.iter().find(|item| !scope.contains(*item)) else { return Ok(()) };
    let java_list =
        |items: Vec<&String>| format!("[{}]", items.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "));
    let required_text = java_list(required.iter().collect());
    Err(TokenRefused {
        status: "insufficient_scope",
        scope: Some(required_text.clone()),
        reason: format!(
            "The provided scope ({}) was missing a required scope ({missing}).  All required scope elements: {required_text}",
            java_list(scope.iter().collect())
        ),
    })
}

#[cfg(test)]
#[path = "unsecured_tests.rs"]
mod tests;
