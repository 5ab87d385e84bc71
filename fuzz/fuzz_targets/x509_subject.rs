//! A TLS client's certificate subject and the principal mapping rules it
//! meets: `subject_name` on certificate bytes, `SslPrincipalMapper` on
//! `ssl.principal.mapping.rules` text and a distinguished name.
//!
//! Input: byte 0 picks the mode: even, the rest is a DER certificate; odd,
//! the rest is rules text, a 0xFF byte, then the name (both read as UTF-8
//! with replacement, so 0xFF never occurs inside them).
//!
//! Properties: never panics; a subject that reads maps to itself under
//! `DEFAULT` and, after the certificate is cut short, no longer reads;
//! rules whose first rule is `DEFAULT` map every name to itself.
#![no_main]

use std::sync::OnceLock;

use krabka_security::{subject_name, SslPrincipalMapper};
use libfuzzer_sys::fuzz_target;

/// Rules in the style Kafka's documentation suggests, for names that come
/// out of fuzzed certificates.
fn documented_rules() -> &'static SslPrincipalMapper {
    static MAPPER: OnceLock<SslPrincipalMapper> = OnceLock::new();
    MAPPER.get_or_init(|| {
        SslPrincipalMapper::from_rules(
            r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,\\]+)(,.*|$)/$1@$2/U, RULE:^(\w+=)+(.*?)$/$3$2$1/, DEFAULT",
        )
        .expect("valid rules")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode % 2 == 0 {
        certificate(rest);
    } else {
        let (rules, name) = match rest.iter().position(|&b| b == 0xFF) {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => (rest, &[][..]),
        };
        mapping(&String::from_utf8_lossy(rules), &String::from_utf8_lossy(name));
    }
});

fn certificate(der: &[u8]) {
    let Ok(subject) = subject_name(der) else { return };
    assert_eq!(SslPrincipalMapper::default().name(&subject).as_deref(), Ok(subject.as_str()));
    let _ = documented_rules().name(&subject);
    if let Some(shorter) = der.len().checked_sub(1) {
        assert!(subject_name(&der[..shorter]).is_err(), "a cut certificate still read as {subject:?}");
    }
}

fn mapping(rules: &str, name: &str) {
    let Ok(mapper) = SslPrincipalMapper::from_rules(rules) else { return };
    let result = mapper.name(name);
    // Java's trim, then `DEFAULT`, Java whitespace, and a comma or the end.
    let first = rules.trim_matches(|c: char| c <= ' ').strip_prefix("DEFAULT").map(|after| {
        let after = after.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
        after.is_empty() || after.starts_with(',')
    });
    if first == Some(true) {
        assert_eq!(result.as_deref(), Ok(name), "rules {rules:?}");
    }
}
