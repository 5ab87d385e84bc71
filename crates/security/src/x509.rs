//! The subject of an X.509 certificate as the text Kafka builds an SSL
//! client's principal from: Java's `X500Principal.getName()` (RFC 2253
//! form). `ssl.principal.mapping.rules` are regular expressions over that
//! text, so it has to come out character for character as Java prints it,
//! quirks included (checked against Java 17):
//!
//! - RDNs most specific first (the reverse of DER order), joined by `,`;
//!   the attributes of a multi-valued RDN in DER order, joined by `+`.
//! - Only CN, C, L, ST, O, OU, STREET, DC and UID print as keywords; any
//!   other type (emailAddress and SERIALNUMBER too) prints as its dotted OID
//!   with `#` and the hex of the value's DER encoding.
//! - A keyword's value prints as text when its DER type is UTF8String,
//!   PrintableString, T61String, IA5String, GeneralString or BMPString, and
//!   the content bytes are decoded as UTF-8 whatever the type says (so a
//!   BMPString comes out as mojibake, as in Java). Other types print as hex.
//! - Text escaping: a backslash before each of `, = + < > # ; " \`, NUL as
//!   `\00`, and a backslash before every leading and every trailing space or
//!   carriage return.
//!
//! The DER reader is minimal and strict where Java is: one-byte tags,
//! definite lengths of at most four length bytes, object identifiers of at
//! most 4096 bytes. Malformed input is an error, never a panic.

use std::fmt::Write as _;

use thiserror::Error;

const TAG_INTEGER: u8 = 0x02;
const TAG_OID: u8 = 0x06;
const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_VERSION: u8 = 0xa0;

/// Java refuses longer object identifiers; so do we, which also bounds the
/// work of printing huge arcs in decimal.
const MAX_OID_LENGTH: usize = 4096;

/// Attribute types that RFC 2253 names by keyword, by their OID encoding.
const KEYWORDS: [(&[u8], &str); 9] = [
    (&[0x55, 0x04, 0x03], "CN"),
    (&[0x55, 0x04, 0x06], "C"),
    (&[0x55, 0x04, 0x07], "L"),
    (&[0x55, 0x04, 0x08], "ST"),
    (&[0x55, 0x04, 0x09], "STREET"),
    (&[0x55, 0x04, 0x0a], "O"),
    (&[0x55, 0x04, 0x0b], "OU"),
    (&[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19], "DC"),
    (&[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01], "UID"),
];

/// The DER string types Java prints as text: UTF8String, PrintableString,
/// T61String, IA5String, GeneralString, BMPString.
const TEXT_TAGS: [u8; 6] = [0x0c, 0x13, 0x14, 0x16, 0x1b, 0x1e];

/// Why a certificate's subject could not be read; offsets are into the
/// bytes given to [`subject_name`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum X509Error {
    #[error("DER input ends early at offset {offset}")]
    Truncated { offset: usize },
    #[error("indefinite DER length at offset {offset}")]
    IndefiniteLength { offset: usize },
    #[error("DER length at offset {offset} is too large")]
    LengthTooLarge { offset: usize },
    #[error("multi-byte DER tag at offset {offset}")]
    HighTagNumber { offset: usize },
    #[error("expected DER tag {expected:#04x} at offset {offset}, found {found:#04x}")]
    UnexpectedTag { offset: usize, expected: u8, found: u8 },
    #[error("{count} unexpected bytes at offset {offset}")]
    TrailingBytes { offset: usize, count: usize },
    #[error("malformed object identifier at offset {offset}")]
    BadObjectIdentifier { offset: usize },
}

/// The subject of the DER certificate `certificate_der` as Java's
/// `X500Principal.getName()` prints it, e.g. `CN=alice,OU=eng,O=Acme,C=US`.
pub fn subject_name(certificate_der: &[u8]) -> Result<String, X509Error> {
    let subject = subject_element(certificate_der)?;
    format_name(&subject)
}

/// Walks Certificate → tbsCertificate to the subject Name, checking only
/// the fields in front of it.
fn subject_element(certificate_der: &[u8]) -> Result<Element<'_>, X509Error> {
    let mut outer = Reader { bytes: certificate_der, offset: 0 };
    let certificate = outer.expect(TAG_SEQUENCE)?;
    outer.finish()?;
    let mut fields = Reader::inside(&certificate);
    let tbs = fields.expect(TAG_SEQUENCE)?;
    let mut tbs = Reader::inside(&tbs);
    if tbs.peek_tag() == Some(TAG_VERSION) {
        tbs.read()?;
    }
    tbs.expect(TAG_INTEGER)?; // serialNumber
    tbs.expect(TAG_SEQUENCE)?; // signature
    tbs.expect(TAG_SEQUENCE)?; // issuer
    tbs.expect(TAG_SEQUENCE)?; // validity
    tbs.expect(TAG_SEQUENCE) // subject
}

/// Name ::= SEQUENCE OF RelativeDistinguishedName, printed last RDN first.
/// An empty RDN prints as nothing between its commas, as in Java.
fn format_name(name: &Element<'_>) -> Result<String, X509Error> {
    let mut rdns = Vec::new();
    let mut reader = Reader::inside(name);
    while !reader.is_empty() {
        let set = reader.expect(TAG_SET)?;
        rdns.push(format_rdn(&set)?);
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

/// RelativeDistinguishedName ::= SET OF AttributeTypeAndValue, in the order
/// the encoding has them (Java does not sort them for this form).
fn format_rdn(set: &Element<'_>) -> Result<String, X509Error> {
    let mut attributes = Vec::new();
    let mut reader = Reader::inside(set);
    while !reader.is_empty() {
        let attribute = reader.expect(TAG_SEQUENCE)?;
        attributes.push(format_attribute(&attribute)?);
    }
    Ok(attributes.join("+"))
}

/// AttributeTypeAndValue ::= SEQUENCE { type OBJECT IDENTIFIER, value ANY }.
fn format_attribute(attribute: &Element<'_>) -> Result<String, X509Error> {
    let mut reader = Reader::inside(attribute);
    let oid = reader.expect(TAG_OID)?;
    let value = reader.read()?;
    reader.finish()?;
    let keyword = KEYWORDS.iter().find(|(encoding, _)| *encoding == oid.content).map(|(_, keyword)| *keyword);
    let mut out = match keyword {
        Some(keyword) => keyword.to_string(),
        None => format_oid(&oid)?,
    };
    out.push('=');
    if keyword.is_some() && TEXT_TAGS.contains(&value.tag) {
        push_escaped(&mut out, &decode_utf8_like_java(value.content));
    } else {
        push_der_hex(&mut out, &value);
    }
    Ok(out)
}

/// RFC 2253 escaping as Java applies it (see the module docs).
fn push_escaped(out: &mut String, text: &str) {
    let is_edge_space = |c: &char| *c == ' ' || *c == '\r';
    let count = text.chars().count();
    let leading = text.chars().take_while(is_edge_space).count();
    let trailing = text.chars().rev().take_while(is_edge_space).count();
    for (index, c) in text.chars().enumerate() {
        match c {
            ',' | '=' | '+' | '<' | '>' | '#' | ';' | '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\0' => out.push_str("\\00"),
            _ if index < leading || index >= count - trailing => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
}

/// `#` and the hex of the element re-encoded in DER: Java prints the value
/// it parsed, so a long-form length that could be short comes out short.
fn push_der_hex(out: &mut String, element: &Element<'_>) {
    out.push('#');
    push_hex(out, &[element.tag]);
    let length = element.content.len();
    if length < 0x80 {
        push_hex(out, &[length as u8]);
    } else {
        let bytes = length.to_be_bytes();
        let significant = &bytes[bytes.iter().take_while(|b| **b == 0).count()..];
        push_hex(out, &[0x80 | significant.len() as u8]);
        push_hex(out, significant);
    }
    push_hex(out, element.content);
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
}

/// The dotted decimal form of an OBJECT IDENTIFIER, refusing the encodings
/// Java refuses: empty, longer than 4096 bytes, an unfinished last arc, or
/// an arc padded with a leading 0x80 byte.
fn format_oid(oid: &Element<'_>) -> Result<String, X509Error> {
    let bytes = oid.content;
    let bad = || X509Error::BadObjectIdentifier { offset: oid.offset };
    if bytes.is_empty() || bytes.len() > MAX_OID_LENGTH || bytes[bytes.len() - 1] & 0x80 != 0 {
        return Err(bad());
    }
    let mut out = String::new();
    for (index, arc) in bytes.split_inclusive(|b| b & 0x80 == 0).enumerate() {
        if arc[0] == 0x80 {
            return Err(bad());
        }
        if index > 0 {
            out.push('.');
            out.push_str(&arc_decimal(arc, 0));
        } else {
            out.push_str(&first_arcs(arc));
        }
    }
    Ok(out)
}

/// The first subidentifier packs two arcs: 40 * first + second, with
/// first at most 2 (so a large value always means first arc 2).
fn first_arcs(groups: &[u8]) -> String {
    if groups.len() > 9 {
        return format!("2.{}", arc_decimal(groups, 80));
    }
    let value = groups.iter().fold(0u64, |acc, g| (acc << 7) | u64::from(g & 0x7f));
    match value {
        0..=39 => format!("0.{value}"),
        40..=79 => format!("1.{}", value - 40),
        _ => format!("2.{}", value - 80),
    }
}

/// A base-128 arc (at least `minus`) less `minus`, in decimal, however
/// long: arcs beyond 64 bits are legal and Java prints them in full.
fn arc_decimal(groups: &[u8], minus: u32) -> String {
    if groups.len() <= 9 {
        let value = groups.iter().fold(0u64, |acc, g| (acc << 7) | u64::from(g & 0x7f));
        return (value - u64::from(minus)).to_string();
    }
    // Little-endian limbs of nine decimal digits, fed 28 bits at a time.
    const LIMB: u64 = 1_000_000_000;
    let mut limbs: Vec<u64> = Vec::new();
    for chunk in groups.chunks(4) {
        let mut carry = chunk.iter().fold(0u64, |acc, g| (acc << 7) | u64::from(g & 0x7f));
        let shift = 7 * chunk.len() as u32;
        for limb in &mut limbs {
            let product = (*limb << shift) + carry;
            *limb = product % LIMB;
            carry = product / LIMB;
        }
        while carry > 0 {
            limbs.push(carry % LIMB);
            carry /= LIMB;
        }
    }
    let mut borrow = u64::from(minus);
    for limb in &mut limbs {
        if *limb >= borrow {
            *limb -= borrow;
            break;
        }
        *limb = *limb + LIMB - borrow;
        borrow = 1;
    }
    while limbs.len() > 1 && limbs.last() == Some(&0) {
        limbs.pop();
    }
    let mut out = limbs.last().map_or_else(|| "0".to_string(), u64::to_string);
    for limb in limbs.iter().rev().skip(1) {
        let _ = write!(out, "{limb:09}");
    }
    out
}

/// Decodes bytes as UTF-8 the way Java's `new String(bytes, UTF_8)` does,
/// which is how Java reads every text value here. Each malformed sequence
/// becomes one U+FFFD; Java's notion of a sequence differs from Rust's
/// `from_utf8_lossy` for encoded surrogates (`ED A0 80` is one U+FFFD in
/// Java, three in Rust) and for sequences cut short at the end.
fn decode_utf8_like_java(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        let (decoded, used) = decode_one(rest);
        out.push(decoded.unwrap_or(char::REPLACEMENT_CHARACTER));
        rest = &rest[used.clamp(1, rest.len())..];
    }
    out
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xc0 == 0x80
}

/// The character at the front of the non-empty `bytes` (None where Java
/// puts U+FFFD) and how many bytes Java consumes for it.
fn decode_one(bytes: &[u8]) -> (Option<char>, usize) {
    match bytes[0] {
        lead @ 0x00..=0x7f => (Some(char::from(lead)), 1),
        0xc2..=0xdf => match bytes.get(1) {
            Some(&b2) if is_continuation(b2) => {
                let code = (u32::from(bytes[0] & 0x1f) << 6) | u32::from(b2 & 0x3f);
                (char::from_u32(code), 2)
            }
            _ => (None, 1),
        },
        0xe0..=0xef => decode_three(bytes),
        0xf0..=0xf7 => decode_four(bytes),
        _ => (None, 1),
    }
}

/// A three-byte lead (E0..EF). An encoded surrogate is one malformed
/// character of three bytes, a sequence cut short at the end one of two.
fn decode_three(bytes: &[u8]) -> (Option<char>, usize) {
    let lead = bytes[0];
    let bad_second = |b2: u8| (lead == 0xe0 && b2 & 0xe0 == 0x80) || !is_continuation(b2);
    match *bytes {
        [_, b2, b3, ..] => {
            if bad_second(b2) {
                (None, 1)
            } else if !is_continuation(b3) {
                (None, 2)
            } else {
                let code = (u32::from(lead & 0x0f) << 12) | (u32::from(b2 & 0x3f) << 6) | u32::from(b3 & 0x3f);
                (char::from_u32(code), 3)
            }
        }
        [_, b2] if bad_second(b2) => (None, 1),
        [_, _] => (None, 2),
        _ => (None, 1),
    }
}

/// A four-byte lead (F0..F7); out of range (above U+10FFFF) or overlong
/// sequences are malformed from their second byte on.
fn decode_four(bytes: &[u8]) -> (Option<char>, usize) {
    let lead = bytes[0];
    let bad_second = |b2: u8| {
        lead > 0xf4
            || (lead == 0xf0 && !(0x90..=0xbf).contains(&b2))
            || (lead == 0xf4 && b2 & 0xf0 != 0x80)
            || !is_continuation(b2)
    };
    match *bytes {
        [_, b2, b3, b4, ..] => {
            if bad_second(b2) {
                (None, 1)
            } else if !is_continuation(b3) {
                (None, 2)
            } else if !is_continuation(b4) {
                (None, 3)
            } else {
                let code = (u32::from(lead & 0x07) << 18)
                    | (u32::from(b2 & 0x3f) << 12)
                    | (u32::from(b3 & 0x3f) << 6)
                    | u32::from(b4 & 0x3f);
                (char::from_u32(code), 4)
            }
        }
        [_, b2, ..] if bad_second(b2) => (None, 1),
        [_, _, b3] if !is_continuation(b3) => (None, 2),
        [_, _, _] => (None, 3),
        [_, _] => (None, 2),
        _ => (None, 1),
    }
}

/// One DER element: its tag, where it starts, and its content bytes.
struct Element<'a> {
    tag: u8,
    offset: usize,
    content: &'a [u8],
    content_offset: usize,
}

/// Reads consecutive DER elements from `bytes`, which start at `offset` in
/// the caller's input (for error messages).
struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn inside(element: &Element<'a>) -> Self {
        Reader { bytes: element.content, offset: element.content_offset }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn peek_tag(&self) -> Option<u8> {
        self.bytes.first().copied()
    }

    fn read(&mut self) -> Result<Element<'a>, X509Error> {
        let offset = self.offset;
        let Some((&tag, rest)) = self.bytes.split_first() else {
            return Err(X509Error::Truncated { offset });
        };
        if tag & 0x1f == 0x1f {
            return Err(X509Error::HighTagNumber { offset });
        }
        let (length, header) = read_length(rest, offset + 1)?;
        let content_offset = offset + 1 + header;
        let Some(content) = rest.get(header..).and_then(|after| after.get(..length)) else {
            return Err(X509Error::Truncated { offset });
        };
        self.bytes = &rest[header + length..];
        self.offset = content_offset + length;
        Ok(Element { tag, offset, content, content_offset })
    }

    fn expect(&mut self, expected: u8) -> Result<Element<'a>, X509Error> {
        let offset = self.offset;
        let element = self.read()?;
        if element.tag != expected {
            return Err(X509Error::UnexpectedTag { offset, expected, found: element.tag });
        }
        Ok(element)
    }

    fn finish(&self) -> Result<(), X509Error> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(X509Error::TrailingBytes { offset: self.offset, count: self.bytes.len() })
        }
    }
}

/// A definite DER length: the value and how many bytes encode it. Like
/// Java, at most four length bytes and no value above `i32::MAX`; padded
/// (non-minimal) lengths are accepted.
fn read_length(bytes: &[u8], offset: usize) -> Result<(usize, usize), X509Error> {
    let Some(&first) = bytes.first() else {
        return Err(X509Error::Truncated { offset });
    };
    match first {
        0x00..=0x7f => Ok((usize::from(first), 1)),
        0x80 => Err(X509Error::IndefiniteLength { offset }),
        0x81..=0x84 => {
            let count = usize::from(first & 0x7f);
            let Some(digits) = bytes.get(1..=count) else {
                return Err(X509Error::Truncated { offset });
            };
            let value = digits.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b));
            if value > i32::MAX as u32 {
                return Err(X509Error::LengthTooLarge { offset });
            }
            Ok((value as usize, 1 + count))
        }
        _ => Err(X509Error::LengthTooLarge { offset }),
    }
}

#[cfg(test)]
mod tests;
