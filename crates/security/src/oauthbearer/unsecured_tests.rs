use super::*;

/// An unsecured token as Kafka's OAuthBearerUnsecuredLoginCallbackHandler
/// writes one: base64url header `{"alg":"none"}`, claims, empty signature.
fn token(claims: &str) -> String {
    let url = |bytes: &[u8]| crate::base64::encode(bytes).trim_end_matches('=').replace('+', "-").replace('/', "_");
    format!("{}.{}.", url(br#"{"alg":"none"}"#), url(claims.as_bytes()))
}

const NOW_MS: i64 = 1_700_000_000_000;

#[test]
fn a_valid_token_gives_its_subject_scope_and_lifetime() {
    let claims = r#"{"sub":"alice","iat":1699999999,"exp":1700003600.5,"scope":["read"," write ",""]}"#;
    let validated = validate(&token(claims), &UnsecuredValidatorOptions::default(), NOW_MS).expect("valid");
    assert_eq!(validated.principal_name, "alice");
    assert_eq!(validated.lifetime_ms, 1_700_003_600_500);
    assert_eq!(validated.start_time_ms, Some(1_699_999_999_000));
    assert_eq!(validated.scope, BTreeSet::from(["read".to_string(), "write".to_string()]));
    let single = validate(&token(r#"{"sub":"a","exp":1800000000,"scope":" one "}"#), &Default::default(), NOW_MS);
    assert_eq!(single.expect("valid").scope, BTreeSet::from(["one".to_string()]));
}

#[test]
fn expired_and_future_tokens_are_refused_unless_within_the_skew() {
    let expired = token(r#"{"sub":"alice","exp":1699999999}"#);
    let refused = validate(&expired, &Default::default(), NOW_MS).unwrap_err();
    assert_eq!(refused.json_challenge(), r#"{"status":"invalid_token"}"#);
    assert!(refused.reason.contains("was on or after the Expiration Time value (1699999999.000000 seconds)"));
    let lenient = UnsecuredValidatorOptions { allowable_clock_skew_ms: 2000, ..Default::default() };
    assert!(validate(&expired, &lenient, NOW_MS).is_ok());
    let future = token(r#"{"sub":"alice","iat":1700000005,"exp":1800000000}"#);
    assert!(validate(&future, &Default::default(), NOW_MS).unwrap_err().reason.contains("Issued At"));
    let backwards = token(r#"{"sub":"alice","iat":1700000000,"exp":1700000000}"#);
    assert!(validate(&backwards, &lenient, NOW_MS - 1000).unwrap_err().reason.contains("was not after the Issued At"));
}

#[test]
fn claims_must_be_there_with_their_types() {
    let cases = [
        (r#"{"sub":"alice"}"#, "No expiration time in JWT"),
        (r#"{"exp":1800000000}"#, "No principal name in JWT claim: sub"),
        (r#"{"sub":"  ","exp":1800000000}"#, "No principal name in JWT claim: sub"),
        (r#"{"sub":"a","exp":"soon"}"#, "The 'exp' claim was not of type Number: String"),
        (r#"{"sub":7,"exp":1800000000}"#, "The 'sub' claim was not of type String: Number"),
    ];
    for (claims, reason) in cases {
        assert_eq!(validate(&token(claims), &Default::default(), NOW_MS).unwrap_err().reason, reason, "{claims}");
    }
    let by_name = UnsecuredValidatorOptions { principal_claim_name: "client_id".into(), ..Default::default() };
    let named = validate(&token(r#"{"client_id":"svc","exp":1800000000}"#), &by_name, NOW_MS);
    assert_eq!(named.expect("valid").principal_name, "svc");
}

#[test]
fn a_missing_required_scope_is_insufficient_scope() {
    let options = UnsecuredValidatorOptions::from_jaas_options(&BTreeMap::from([(
        "unsecuredValidatorRequiredScope".to_string(),
        "read write".to_string(),
    )]))
    .expect("valid options");
    let refused = validate(&token(r#"{"sub":"a","exp":1800000000,"scope":"read"}"#), &options, NOW_MS).unwrap_err();
    assert_eq!(refused.json_challenge(), r#"{"status":"insufficient_scope", "scope":"[read, write]"}"#);
    assert!(refused.reason.starts_with("The provided scope ([read]) was missing a required scope (write)."));
    let both = token(r#"{"sub":"a","exp":1800000000,"scope":["write","read"]}"#);
    assert!(validate(&both, &options, NOW_MS).is_ok());
}

#[test]
fn malformed_tokens_and_options_are_refused() {
    let header = token("{}").split('.').next().expect("header").to_string();
    for (bad, reason) in [
        ("a..b".to_string(), "Malformed compact serialization contains '..'"),
        (
            format!("{header}.e30"),
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
        ),
        (format!("{header}.!!!."), "malformed Base64 URL encoded value"),
        (format!("{header}.bm90IGpzb24."), "malformed JSON"),
        (format!("{header}.WzFd."), "malformed JSON"),
        (format!("e30.{}", &token("{}")[header.len() + 1..]), "JWS header must have an Algorithm value"),
        (
            format!("{}sig", token(r#"{"sub":"a","exp":1800000000}"#)),
            "Unsecured JWS must not contain a digital signature",
        ),
    ] {
        assert_eq!(validate(&bad, &Default::default(), NOW_MS).unwrap_err().reason, reason, "{bad}");
    }
    let option = |key: &str, value: &str| BTreeMap::from([(key.to_string(), value.to_string())]);
    let negative = option("unsecuredValidatorAllowableClockSkewMs", "-1");
    assert!(UnsecuredValidatorOptions::from_jaas_options(&negative).unwrap_err().contains("must not be negative"));
    let bad_scope = option("unsecuredValidatorRequiredScope", "a\"b");
    assert_eq!(UnsecuredValidatorOptions::from_jaas_options(&bad_scope), Err("Invalid scope value: a\"b".into()));
}
