//! Helpers shared by the fuzz targets.

use std::fmt::Debug;

pub mod scratch;

/// Splits fuzz input into a fixed-size header (zero-padded when the input is
/// shorter) and the rest, which the on-disk decoder targets use as the file.
pub fn split_header<const N: usize>(data: &[u8]) -> ([u8; N], &[u8]) {
    let mut header = [0u8; N];
    let used = data.len().min(N);
    header[..used].copy_from_slice(&data[..used]);
    (header, &data[used..])
}

/// A segment's base offset from 8 little-endian header bytes: any value a
/// 20-digit file name can give, 0 to i64::MAX.
pub fn base_offset(raw: &[u8]) -> i64 {
    let raw: [u8; 8] = raw[..8].try_into().expect("8 bytes");
    (u64::from_le_bytes(raw) % (i64::MAX as u64 + 1)) as i64
}

/// Asserts that a message decoded from fuzz input (`before`) and the same
/// message after an encode/decode round trip (`after`) are the same message.
///
/// Two differences are not failures, so they are forgiven by comparing the
/// `Debug` text when `==` says no:
/// - a float64 field holding NaN (NaN != NaN, yet both print `NaN`); the
///   targets' byte-stability check covers NaN payloads;
/// - unknown tagged fields in another order: decoders accept tags in any
///   order (Kafka's Java reader does too) and keep unknown ones as read,
///   while encoders write them sorted by tag, as the protocol requires.
///   The `RawTaggedField`s are compared as a multiset, the rest exactly.
pub fn assert_same_message<T: PartialEq + Debug>(before: &T, after: &T, what: &str) {
    if before == after {
        return;
    }
    let before_text = format!("{before:?}");
    let after_text = format!("{after:?}");
    let (before_rest, mut before_fields) = split_raw_tagged_fields(&before_text);
    let (after_rest, mut after_fields) = split_raw_tagged_fields(&after_text);
    before_fields.sort_unstable();
    after_fields.sort_unstable();
    if before_rest == after_rest && before_fields == after_fields {
        return;
    }
    panic!("{what} changed across a re-encode:\n before: {before_text}\n after:  {after_text}");
}

/// Splits `Debug` text into the text with every `RawTaggedField { .. }`
/// replaced by a placeholder, and those fields' texts.
///
/// Everything input-controlled in derived `Debug` text (strings, bytes) is
/// quoted with `"` and `\` escaped, so the scan skips quoted runs and only
/// matches structure outside them; a bytes field holding the text
/// `RawTaggedField { tag: ..` is not mistaken for one.
fn split_raw_tagged_fields(text: &str) -> (Vec<u8>, Vec<&[u8]>) {
    const START: &[u8] = b"RawTaggedField {";
    let bytes = text.as_bytes();
    let mut rest = Vec::with_capacity(bytes.len());
    let mut fields = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'"' {
            let end = quoted_end(bytes, at);
            rest.extend_from_slice(&bytes[at..end]);
            at = end;
        } else if bytes[at..].starts_with(START) {
            let end = braced_end(bytes, at);
            fields.push(&bytes[at..end]);
            rest.extend_from_slice(b"RawTaggedField");
            at = end;
        } else {
            rest.push(bytes[at]);
            at += 1;
        }
    }
    (rest, fields)
}

/// The index after the quoted run starting at `start` (a `"`).
fn quoted_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The index after the `}` that closes the first `{` at or after `start`.
fn braced_end(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut at = start;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                at = quoted_end(bytes, at);
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_fields_with_escaped_data() {
        let text = r#"A { x: 1, unknown_tagged_fields: [RawTaggedField { tag: 5, data: b"\"\\ }" }, RawTaggedField { tag: 1, data: b"" }] }"#;
        let (rest, fields) = split_raw_tagged_fields(text);
        assert_eq!(rest, b"A { x: 1, unknown_tagged_fields: [RawTaggedField, RawTaggedField] }");
        assert_eq!(
            fields,
            [&br#"RawTaggedField { tag: 5, data: b"\"\\ }" }"#[..], &br#"RawTaggedField { tag: 1, data: b"" }"#[..]]
        );
    }

    #[test]
    fn ignores_lookalikes_inside_quotes() {
        let text = r#"B { s: "RawTaggedField { tag: 1, data: b\"x\" }", unknown_tagged_fields: [] }"#;
        let (rest, fields) = split_raw_tagged_fields(text);
        assert_eq!(rest, text.as_bytes());
        assert!(fields.is_empty());
    }

    #[test]
    fn forgives_tag_order_but_not_other_changes() {
        let a = r#"M { unknown: [RawTaggedField { tag: 2, data: b"a" }, RawTaggedField { tag: 1, data: b"" }] }"#;
        let b = r#"M { unknown: [RawTaggedField { tag: 1, data: b"" }, RawTaggedField { tag: 2, data: b"a" }] }"#;
        let c = r#"M { unknown: [RawTaggedField { tag: 1, data: b"" }, RawTaggedField { tag: 2, data: b"b" }] }"#;
        assert_same_message(&Text(a.into()), &Text(b.into()), "reordered");
        assert!(std::panic::catch_unwind(|| assert_same_message(&Text(a.into()), &Text(c.into()), "changed")).is_err());
    }

    /// A value whose `Debug` is the given text.
    #[derive(PartialEq)]
    struct Text(String);

    impl Debug for Text {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
}
