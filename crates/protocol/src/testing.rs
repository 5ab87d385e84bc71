//! A small deterministic generator of random values for the round-trip tests
//! of generated messages (each value valid at a chosen version).

use bytes::Bytes;

use crate::uuid::Uuid;

/// xorshift64*: deterministic from its seed, so a failing case can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    /// A finite float (NaN would make equality fail).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() as i64 as f64) / 1024.0
    }

    pub fn string(&mut self) -> String {
        let length = self.below(8) as usize;
        (0..length).map(|_| char::from(b'a' + self.below(26) as u8)).collect()
    }

    pub fn bytes(&mut self) -> Bytes {
        let length = self.below(12) as usize;
        (0..length).map(|_| self.next_u64() as u8).collect::<Vec<u8>>().into()
    }

    pub fn uuid(&mut self) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        Uuid(bytes)
    }
}
