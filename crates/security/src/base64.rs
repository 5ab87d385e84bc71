//! Standard base64 (RFC 4648 section 4: `A-Z a-z 0-9 + /`, `=` padding), the
//! encoding SCRAM puts its salts, proofs and signatures in.
//!
//! Kept here rather than as a dependency: it is small and SCRAM needs only
//! this one strict variant. The decoder refuses anything a canonical encoder
//! would not produce (no whitespace, no missing or misplaced padding, no
//! stray bits in the last character), so one byte string has exactly one
//! accepted text form.

use thiserror::Error;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const PAD: u8 = b'=';

/// Why a text is not valid base64.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Base64Error {
    #[error("base64 text length {0} is not a multiple of 4")]
    InvalidLength(usize),
    #[error("invalid base64 character at position {0}")]
    InvalidCharacter(usize),
    #[error("misplaced base64 padding at position {0}")]
    InvalidPadding(usize),
    #[error("base64 text has non-zero trailing bits")]
    TrailingBits,
}

/// Encodes `bytes` as padded standard base64.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b0 = chunk[0];
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let group = (u32::from(b0) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        let sextets = [(group >> 18) & 63, (group >> 12) & 63, (group >> 6) & 63, group & 63];
        // A chunk of n bytes carries n + 1 significant characters; the rest pad.
        for (index, sextet) in sextets.iter().enumerate() {
            if index <= chunk.len() {
                out.push(char::from(ALPHABET[*sextet as usize]));
            } else {
                out.push(char::from(PAD));
            }
        }
    }
    out
}

/// Decodes padded standard base64, refusing anything not canonical.
pub fn decode(text: &str) -> Result<Vec<u8>, Base64Error> {
    let input = text.as_bytes();
    if !input.len().is_multiple_of(4) {
        return Err(Base64Error::InvalidLength(input.len()));
    }
    let mut out = Vec::with_capacity(input.len() / 4 * 3);
    let group_count = input.len() / 4;
    for (group_index, group) in input.chunks_exact(4).enumerate() {
        let is_last = group_index + 1 == group_count;
        decode_group(group, group_index * 4, is_last, &mut out)?;
    }
    Ok(out)
}

/// Decodes one 4-character group starting at `offset`; only the last group
/// may carry padding.
fn decode_group(group: &[u8], offset: usize, is_last: bool, out: &mut Vec<u8>) -> Result<(), Base64Error> {
    debug_assert_eq!(group.len(), 4);
    let padding = group.iter().rev().take_while(|&&c| c == PAD).count();
    if padding > 2 || (padding > 0 && !is_last) {
        return Err(Base64Error::InvalidPadding(offset + 4 - padding));
    }
    let mut group_bits: u32 = 0;
    for (index, &c) in group[..4 - padding].iter().enumerate() {
        let value = sextet(c).ok_or(if c == PAD {
            Base64Error::InvalidPadding(offset + index)
        } else {
            Base64Error::InvalidCharacter(offset + index)
        })?;
        group_bits |= u32::from(value) << (18 - 6 * index);
    }
    let bytes = [(group_bits >> 16) as u8, (group_bits >> 8) as u8, group_bits as u8];
    let kept = 3 - padding;
    // Bits past the kept bytes must be zero, or two texts would decode alike.
    if bytes[kept..].iter().any(|&b| b != 0) {
        return Err(Base64Error::TrailingBits);
    }
    out.extend_from_slice(&bytes[..kept]);
    Ok(())
}

fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4648 section 10.
    const RFC4648_VECTORS: [(&str, &str); 7] = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ];

    #[test]
    fn encodes_rfc4648_vectors() {
        for (plain, encoded) in RFC4648_VECTORS {
            assert_eq!(encode(plain.as_bytes()), encoded, "encoding {plain:?}");
        }
    }

    #[test]
    fn decodes_rfc4648_vectors() {
        for (plain, encoded) in RFC4648_VECTORS {
            assert_eq!(decode(encoded).as_deref(), Ok(plain.as_bytes()), "decoding {encoded:?}");
        }
    }

    #[test]
    fn round_trips_every_byte_value_and_length() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        for len in 0..bytes.len() {
            let encoded = encode(&bytes[..len]);
            assert_eq!(encoded.len(), len.div_ceil(3) * 4);
            assert_eq!(decode(&encoded).as_deref(), Ok(&bytes[..len]));
        }
    }

    #[test]
    fn uses_plus_and_slash() {
        assert_eq!(encode(&[0xfb, 0xff, 0xbf]), "+/+/");
        assert_eq!(decode("+/+/"), Ok(vec![0xfb, 0xff, 0xbf]));
    }

    #[test]
    fn refuses_bad_length() {
        assert_eq!(decode("Zg="), Err(Base64Error::InvalidLength(3)));
        assert_eq!(decode("Zm9vY"), Err(Base64Error::InvalidLength(5)));
    }

    #[test]
    fn refuses_characters_outside_the_alphabet() {
        assert_eq!(decode("Zm9*"), Err(Base64Error::InvalidCharacter(3)));
        assert_eq!(decode("Zm 9"), Err(Base64Error::InvalidCharacter(2)));
        assert_eq!(decode("Zm-_"), Err(Base64Error::InvalidCharacter(2)));
        assert_eq!(decode("Zm9\n"), Err(Base64Error::InvalidCharacter(3)));
        assert_eq!(decode("Zm9é"), Err(Base64Error::InvalidLength(5)));
    }

    #[test]
    fn refuses_misplaced_padding() {
        assert_eq!(decode("Z==="), Err(Base64Error::InvalidPadding(1)));
        assert_eq!(decode("===="), Err(Base64Error::InvalidPadding(0)));
        assert_eq!(decode("Zg==Zm8="), Err(Base64Error::InvalidPadding(2)));
        assert_eq!(decode("Z=g="), Err(Base64Error::InvalidPadding(1)));
        assert_eq!(decode("=Zm9"), Err(Base64Error::InvalidPadding(0)));
    }

    #[test]
    fn refuses_non_canonical_trailing_bits() {
        // "Zh==" and "Zm9=" carry bits past the last byte; "Zg==" / "Zm8=" are canonical.
        assert_eq!(decode("Zh=="), Err(Base64Error::TrailingBits));
        assert_eq!(decode("Zm9="), Err(Base64Error::TrailingBits));
    }
}
