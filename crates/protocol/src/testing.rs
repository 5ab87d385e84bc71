//! A small deterministic generator of random values for the round-trip tests
//! of generated messages (each value valid at a chosen version), public under
//! the `testing` feature for the broker's black-box tests and wire fuzzer.
//!
//! A biased generator ([`Rng::with_bias`]) draws some of its values
//! from a vocabulary instead: names the broker knows (topics, groups), topic
//! ids, well-formed record batches and the integers where handlers branch
//! (0..3, -1, -2, the type maxima). Uniform random values mostly exercise a
//! handler's first validation check; the vocabulary reaches the code behind it.

use bytes::Bytes;

use crate::uuid::Uuid;

/// What a biased [`Rng`] prefers to return.
#[derive(Clone, Debug, Default)]
pub struct Bias {
    /// Returned by [`Rng::string`] (topic names, group ids, ...).
    pub strings: Vec<String>,
    /// Returned by [`Rng::uuid`] (topic ids).
    pub uuids: Vec<Uuid>,
    /// Returned by [`Rng::bytes`] (record batches, assignments).
    pub bytes: Vec<Bytes>,
    /// Returned by [`Rng::next_u64`]; generated code truncates it to the field's width.
    pub integers: Vec<u64>,
    /// How often (in percent) a value comes from the vocabulary.
    pub percent: u64,
}

impl Bias {
    /// Integers where Kafka handlers branch, as raw u64s: truncated to i8..i64
    /// they give 0..3, -1, -2 and the maxima and minima of the widths.
    pub fn special_integers() -> Vec<u64> {
        let mut values = vec![0, 1, 2, 3, u64::MAX, u64::MAX - 1];
        values.extend([i8::MAX as u64, i16::MAX as u64, i32::MAX as u64, i64::MAX as u64]);
        values.extend([i16::MIN as u16 as u64, i32::MIN as u32 as u64, i64::MIN as u64]);
        values
    }
}

/// xorshift64*: deterministic from its seed, so a failing case can be replayed.
pub struct Rng {
    state: u64,
    bias: Option<Bias>,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, bias: None }
    }

    /// A generator that returns a value from `bias` `bias.percent`% of the time.
    pub fn with_bias(seed: u64, bias: Bias) -> Self {
        Rng { bias: Some(bias), ..Rng::new(seed) }
    }

    fn step(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// One of `pick(bias)`, `bias.percent`% of the time, when biased and it is not empty.
    fn biased<T: Clone>(&mut self, pick: fn(&Bias) -> &Vec<T>) -> Option<T> {
        let bias = self.bias.as_ref()?;
        let (length, percent) = (pick(bias).len() as u64, bias.percent);
        if length == 0 || self.step() % 100 >= percent {
            return None;
        }
        let index = (self.step() % length) as usize;
        self.bias.as_ref().map(|bias| pick(bias)[index].clone())
    }

    pub fn next_u64(&mut self) -> u64 {
        match self.biased(|b| &b.integers) {
            Some(value) => value,
            None => self.step(),
        }
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
        if let Some(value) = self.biased(|b| &b.strings) {
            return value;
        }
        let length = self.below(8) as usize;
        (0..length).map(|_| char::from(b'a' + self.below(26) as u8)).collect()
    }

    pub fn bytes(&mut self) -> Bytes {
        if let Some(value) = self.biased(|b| &b.bytes) {
            return value;
        }
        let length = self.below(12) as usize;
        (0..length).map(|_| self.next_u64() as u8).collect::<Vec<u8>>().into()
    }

    pub fn uuid(&mut self) -> Uuid {
        if let Some(value) = self.biased(|b| &b.uuids) {
            return value;
        }
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        Uuid(bytes)
    }
}
