//! SCRAM's arithmetic (RFC 5802 section 3, Kafka's `ScramFormatter`): the
//! digests, HMACs and Hi() both sides compute, the user name escaping, and
//! the random nonce.

use std::num::NonZeroU32;

use ring::rand::SecureRandom;
use ring::{digest, hmac, pbkdf2};

use crate::mechanism::ScramMechanism;

impl ScramMechanism {
    fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2_algorithm(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// The digest length in bytes: the length of every key, signature and proof.
    pub(crate) fn output_len(self) -> usize {
        self.digest_algorithm().output_len()
    }
}

pub(crate) fn hash(mechanism: ScramMechanism, bytes: &[u8]) -> Vec<u8> {
    digest::digest(mechanism.digest_algorithm(), bytes).as_ref().to_vec()
}

pub(crate) fn hmac(mechanism: ScramMechanism, key: &[u8], bytes: &[u8]) -> Vec<u8> {
    let key = hmac::Key::new(mechanism.hmac_algorithm(), key);
    hmac::sign(&key, bytes).as_ref().to_vec()
}

/// Hi(password, salt, iterations): PBKDF2 with the mechanism's HMAC and one
/// output block, which is what RFC 5802 defines Hi to be. Kafka's loop runs
/// at least once whatever the count, so fewer than one iteration counts as
/// one here too.
pub(crate) fn hi(mechanism: ScramMechanism, password: &[u8], salt: &[u8], iterations: i32) -> Vec<u8> {
    let iterations = NonZeroU32::new(iterations.max(1).unsigned_abs()).unwrap_or(NonZeroU32::MIN);
    let mut out = vec![0u8; mechanism.output_len()];
    pbkdf2::derive(mechanism.pbkdf2_algorithm(), iterations, salt, password, &mut out);
    out
}

pub(crate) fn client_key(mechanism: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    hmac(mechanism, salted_password, b"Client Key")
}

pub(crate) fn server_key(mechanism: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    hmac(mechanism, salted_password, b"Server Key")
}

/// XOR of two equal-length byte strings; `None` when the lengths differ (a
/// client proof of the wrong length).
pub(crate) fn xor(first: &[u8], second: &[u8]) -> Option<Vec<u8>> {
    if first.len() != second.len() {
        return None;
    }
    Some(first.iter().zip(second).map(|(a, b)| a ^ b).collect())
}

/// The saslname form of a user name: `=` as `=3D`, `,` as `=2C` (RFC 5802
/// section 5.1), in Kafka's order.
pub fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// The user name a saslname stands for; `None` when it holds an `=` that is
/// not part of `=2C` or `=3D` (Kafka's "Invalid username").
pub fn username_from_sasl_name(sasl_name: &str) -> Option<String> {
    // Kafka's order: commas first, then check no stray '=' remains once the
    // '=3D' escapes are gone, then the '=' escapes.
    let with_commas = sasl_name.replace("=2C", ",");
    if with_commas.replace("=3D", "").contains('=') {
        return None;
    }
    Some(with_commas.replace("=3D", "="))
}

/// Compares a secret a peer sent with the expected one in time that depends
/// only on the sent one's length (Kafka's `Utils.isEqualConstantTime`), so
/// timing tells nothing about how much of the expected secret matched, nor
/// how long it is. Order matters: the peer's secret first.
pub fn constant_time_eq(provided: &[u8], expected: &[u8]) -> bool {
    if expected.is_empty() {
        return provided.is_empty();
    }
    let mut difference = u8::from(provided.len() != expected.len());
    for (index, byte) in provided.iter().enumerate() {
        let other = expected.get(index).or(expected.first()).copied().unwrap_or(0);
        difference |= byte ^ other;
    }
    std::hint::black_box(difference) == 0
}

/// A random nonce as Kafka's `ScramFormatter.secureRandomString`: a 130-bit
/// random number written in base 36 (`0-9a-z`, no leading zeros), so it is
/// printable and has no ','.
///
/// Panics if the operating system's random source fails: a predictable
/// nonce would be worse than no authentication.
pub fn secure_random_string() -> String {
    let mut bytes = [0u8; 17];
    ring::rand::SystemRandom::new().fill(&mut bytes).expect("the operating system's random number generator failed");
    // 17 bytes hold 136 bits; keep 130 as Java's BigInteger(130, random).
    bytes[0] &= 0b11;
    to_base36(&bytes)
}

/// Big-endian unsigned bytes in base 36, lower case, as Java's
/// `BigInteger.toString(36)`.
fn to_base36(big_endian: &[u8]) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut number = big_endian.to_vec();
    let mut digits = Vec::new();
    while number.iter().any(|&b| b != 0) {
        let mut remainder: u32 = 0;
        for byte in number.iter_mut() {
            let value = (remainder << 8) | u32::from(*byte);
            *byte = (value / 36) as u8;
            remainder = value % 36;
        }
        digits.push(DIGITS[remainder as usize]);
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.iter().rev().map(|&d| char::from(d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base64;

    #[test]
    fn hi_is_pbkdf2_with_one_block() {
        // The published PBKDF2-HMAC-SHA256 vector P="password", S="salt",
        // c=1, dkLen=32; RFC 7677's full exchange is checked in the server
        // and client tests.
        let salted = hi(ScramMechanism::Sha256, b"password", b"salt", 1);
        assert_eq!(
            salted,
            [
                0x12, 0x0f, 0xb6, 0xcf, 0xfc, 0xf8, 0xb3, 0x2c, 0x43, 0xe7, 0x22, 0x52, 0x56, 0xc4, 0xf8, 0x37, 0xa8,
                0x65, 0x48, 0xc9, 0x2c, 0xcc, 0x35, 0x48, 0x08, 0x05, 0x98, 0x7c, 0xb7, 0x0b, 0xe1, 0x7b
            ]
        );
        assert_eq!(hi(ScramMechanism::Sha256, b"password", b"salt", 0), salted);
        assert_eq!(hi(ScramMechanism::Sha256, b"password", b"salt", -5), salted);
        assert_eq!(hi(ScramMechanism::Sha512, b"password", b"salt", 1).len(), 64);
    }

    #[test]
    fn hi_iterates() {
        // PBKDF2-HMAC-SHA256, P="password", S="salt", c=4096, dkLen=32.
        let salted = hi(ScramMechanism::Sha256, b"password", b"salt", 4096);
        assert_eq!(base64::encode(&salted), "xeR41ZKIyEGqUw22hFxMjZYok6ABzk4RpJY4c6qYE0o=");
    }

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        let mac = hmac(ScramMechanism::Sha256, b"Jefe", b"what do ya want for nothing?");
        assert_eq!(base64::encode(&mac), "W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM=");
    }

    #[test]
    fn xor_needs_equal_lengths() {
        assert_eq!(xor(&[0b1100, 0xff], &[0b1010, 0x0f]), Some(vec![0b0110, 0xf0]));
        assert_eq!(xor(&[1, 2], &[1]), None);
    }

    #[test]
    fn sasl_names_escape_and_unescape() {
        assert_eq!(sasl_name("alice"), "alice");
        assert_eq!(sasl_name("a=b,c"), "a=3Db=2Cc");
        assert_eq!(sasl_name("=,"), "=3D=2C");
        for name in ["alice", "a=b,c", "=,", "=2C", "=3D", ",,=="] {
            assert_eq!(username_from_sasl_name(&sasl_name(name)).as_deref(), Some(name));
        }
        assert_eq!(username_from_sasl_name("a=3Db=2Cc").as_deref(), Some("a=b,c"));
        assert_eq!(username_from_sasl_name("a=b"), None);
        assert_eq!(username_from_sasl_name("a=2"), None);
        assert_eq!(username_from_sasl_name("a="), None);
    }

    #[test]
    fn constant_time_eq_compares_whole_strings() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secre", b"secret"));
        assert!(!constant_time_eq(b"secrets", b"secret"));
        assert!(!constant_time_eq(b"", b"secret"));
        assert!(!constant_time_eq(b"x", b""));
        // A prefix repeated from the first byte must not pass.
        assert!(!constant_time_eq(b"aaa", b"a"));
    }

    #[test]
    fn random_strings_look_like_kafkas() {
        let first = secure_random_string();
        let second = secure_random_string();
        assert_ne!(first, second);
        for nonce in [first, second] {
            assert!(!nonce.is_empty() && nonce.len() <= 26, "{nonce}");
            assert!(nonce.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()), "{nonce}");
            assert!(nonce == "0" || !nonce.starts_with('0'), "{nonce}");
        }
    }

    #[test]
    fn base36_matches_java() {
        assert_eq!(to_base36(&[0]), "0");
        assert_eq!(to_base36(&[35]), "z");
        assert_eq!(to_base36(&[36]), "10");
        assert_eq!(to_base36(&[0x01, 0x00]), "74");
        // 2^130 - 1 in base 36, as BigInteger prints it.
        let mut max = [0xffu8; 17];
        max[0] = 0b11;
        assert_eq!(to_base36(&max), "1omfro7zwmumr3umxudzyj6scf");
    }
}
