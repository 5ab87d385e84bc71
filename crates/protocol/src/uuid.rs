//! Kafka's `Uuid`: 16 bytes on the wire, shown as unpadded URL-safe base64 (22 chars).

use std::fmt;
use std::io::Read;

/// A Kafka UUID (cluster ids, directory ids, topic ids).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Uuid(pub [u8; 16]);

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl Uuid {
    pub const ZERO: Uuid = Uuid([0; 16]);

    /// A random UUID as Kafka makes them: version 4 bits set, never the
    /// reserved zero or metadata-topic ids, never shown starting with '-'
    /// (such ids look like command-line flags to Kafka's tools).
    pub fn random() -> std::io::Result<Self> {
        loop {
            let mut bytes = [0u8; 16];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
            bytes[6] = (bytes[6] & 0x0f) | 0x40;
            bytes[8] = (bytes[8] & 0x3f) | 0x80;
            let id = Uuid(bytes);
            let metadata_topic_id = {
                let mut b = [0u8; 16];
                b[15] = 1;
                Uuid(b)
            };
            if id != Self::ZERO && id != metadata_topic_id && !id.to_string().starts_with('-') {
                return Ok(id);
            }
        }
    }

    /// Parses the 22-character base64 form; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.as_bytes();
        if text.len() != 22 {
            return None;
        }
        let mut bits: u32 = 0;
        let mut bit_count = 0;
        let mut out = [0u8; 16];
        let mut filled = 0;
        for &c in text {
            let value = ALPHABET.iter().position(|&a| a == c)? as u32;
            bits = (bits << 6) | value;
            bit_count += 6;
            if bit_count >= 8 {
                bit_count -= 8;
                if filled == 16 {
                    return None;
                }
                out[filled] = (bits >> bit_count) as u8;
                filled += 1;
                bits &= (1 << bit_count) - 1;
            }
        }
        // 22 chars carry 132 bits: the 4 spare bits must be zero.
        if filled != 16 || bits != 0 {
            return None;
        }
        Some(Uuid(out))
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::with_capacity(22);
        for chunk in self.0.chunks(3) {
            let mut group = [0u8; 3];
            group[..chunk.len()].copy_from_slice(chunk);
            let n = (u32::from(group[0]) << 16) | (u32::from(group[1]) << 8) | u32::from(group[2]);
            let chars = chunk.len() + 1;
            for i in 0..chars {
                text.push(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize] as char);
            }
        }
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_value_matches_kafka() {
        // Kafka's Uuid with msb=1, lsb=2 prints as AAAAAAAAAAEAAAAAAAAAAg.
        let mut bytes = [0u8; 16];
        bytes[7] = 1;
        bytes[15] = 2;
        let id = Uuid(bytes);
        assert_eq!(id.to_string(), "AAAAAAAAAAEAAAAAAAAAAg");
        assert_eq!(Uuid::parse("AAAAAAAAAAEAAAAAAAAAAg"), Some(id));
    }

    #[test]
    fn random_round_trips_and_rejects_bad_text() {
        for _ in 0..100 {
            let id = Uuid::random().unwrap();
            let text = id.to_string();
            assert_eq!(text.len(), 22);
            assert!(!text.starts_with('-'));
            assert_eq!(Uuid::parse(&text), Some(id));
        }
        assert_eq!(Uuid::parse("short"), None);
        assert_eq!(Uuid::parse("AAAAAAAAAAEAAAAAAAAAA!"), None);
        // Spare low bits set: not a canonical encoding.
        assert_eq!(Uuid::parse("AAAAAAAAAAEAAAAAAAAAAh"), None);
    }
}
