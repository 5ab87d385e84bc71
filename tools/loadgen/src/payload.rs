//! Record values as packaging/performance/BrokerPerformanceWorkload.java makes
//! them, so that a run of either measures the broker on the same bytes: a
//! 4 MiB pool filled by `java.util.SplittableRandom(0x6b7261626b61)`, each
//! value a window of it at an offset drawn by a second `SplittableRandom`
//! seeded one higher (`nextInt(pool.length - size + 1)`); or all zeros.
//!
//! `SplittableRandom` is reimplemented bit for bit (Java 17's algorithm:
//! SplitMix64 with the golden gamma), checked against values Java printed.

/// The Java workload's pool size and seed ("krabka" in ASCII).
pub const POOL_BYTES: usize = 4 << 20;
pub const POOL_SEED: i64 = 0x6b72_6162_6b61;

/// Which values the records carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PayloadKind {
    /// Windows of the seeded random pool: incompressible, as real traffic often is.
    Random,
    /// All zeros: the compressor's best case, so the broker's per-record cost shows.
    Zeros,
}

/// `java.util.SplittableRandom`, for the methods the workload uses.
#[derive(Debug, Clone)]
pub struct SplittableRandom {
    seed: u64,
}

impl SplittableRandom {
    const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    pub fn new(seed: i64) -> Self {
        SplittableRandom { seed: seed as u64 }
    }

    fn next_seed(&mut self) -> u64 {
        self.seed = self.seed.wrapping_add(Self::GOLDEN_GAMMA);
        self.seed
    }

    pub fn next_long(&mut self) -> i64 {
        mix64(self.next_seed()) as i64
    }

    pub fn next_int(&mut self) -> i32 {
        mix32(self.next_seed())
    }

    /// `nextInt(bound)`: uniform in [0, bound), rejecting the over-represented
    /// tail exactly as Java does so the draws stay in step.
    pub fn next_int_bounded(&mut self, bound: i32) -> i32 {
        assert!(bound > 0, "bound must be positive");
        let r = self.next_int();
        let m = bound - 1;
        if bound & m == 0 {
            return r & m;
        }
        let mut u = ((r as u32) >> 1) as i32;
        loop {
            let candidate = u % bound;
            if u.wrapping_add(m).wrapping_sub(candidate) >= 0 {
                return candidate;
            }
            u = ((self.next_int() as u32) >> 1) as i32;
        }
    }

    /// `nextBytes`: each `nextLong` gives eight bytes, lowest byte first.
    pub fn next_bytes(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_long().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let word = self.next_long().to_le_bytes();
            rest.copy_from_slice(&word[..rest.len()]);
        }
    }
}

fn mix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn mix32(z: u64) -> i32 {
    let z = (z ^ (z >> 33)).wrapping_mul(0x62a9_d9ed_7997_05f5);
    ((z ^ (z >> 28)).wrapping_mul(0xcb24_d0a5_c88c_35b3) >> 32) as i32
}

/// The stream of record values, in the order records are built.
#[derive(Debug, Clone)]
pub struct Payloads {
    pool: Vec<u8>,
    size: usize,
    /// None for zeros, whose one value is the pool itself.
    offsets: Option<SplittableRandom>,
}

impl Payloads {
    /// Values of `size` bytes; `seed` fills the pool and `seed + 1` draws the
    /// offsets (the Java workload's POOL_SEED and POOL_SEED + 1 by default).
    pub fn new(kind: PayloadKind, size: usize, seed: i64) -> Self {
        match kind {
            PayloadKind::Zeros => Payloads { pool: vec![0; size], size, offsets: None },
            PayloadKind::Random => {
                let mut pool = vec![0; POOL_BYTES.max(size)];
                SplittableRandom::new(seed).next_bytes(&mut pool);
                Payloads { pool, size, offsets: Some(SplittableRandom::new(seed.wrapping_add(1))) }
            }
        }
    }

    /// The next record's value.
    pub fn next_value(&mut self) -> &[u8] {
        let Some(offsets) = &mut self.offsets else { return &self.pool[..self.size] };
        // The CLI caps the record size, so the span fits an i32 as Java's does.
        let span = i32::try_from(self.pool.len() - self.size + 1).expect("pool span fits an i32");
        let offset = offsets.next_int_bounded(span) as usize;
        &self.pool[offset..offset + self.size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's `Arrays.hashCode(byte[])`.
    fn java_hash(bytes: &[u8]) -> i32 {
        bytes.iter().fold(1i32, |h, &b| h.wrapping_mul(31).wrapping_add(i32::from(b as i8)))
    }

    // Expected values printed by OpenJDK 17 (jshell) with the Java workload's
    // constructions: `new SplittableRandom(POOL_SEED).nextBytes(pool)` and
    // `new SplittableRandom(POOL_SEED + 1).nextInt(span)`.
    #[test]
    fn the_pool_matches_javas_byte_for_byte() {
        let mut pool = vec![0u8; POOL_BYTES];
        SplittableRandom::new(POOL_SEED).next_bytes(&mut pool);
        assert_eq!(&pool[..12], &[43, 200, 129, 102, 187, 12, 127, 255, 183, 163, 187, 61]);
        assert_eq!(&pool[POOL_BYTES - 4..], &[118, 32, 221, 70]);
        assert_eq!(java_hash(&pool), 1_585_932_604);
    }

    #[test]
    fn value_offsets_match_javas_next_int() {
        let mut random = SplittableRandom::new(POOL_SEED + 1);
        let span = (POOL_BYTES - 1024 + 1) as i32;
        let drawn: Vec<i32> = (0..6).map(|_| random.next_int_bounded(span)).collect();
        assert_eq!(drawn, [1_465_306, 2_776_823, 1_203_638, 2_695_794, 1_926_646, 3_530_148]);
        let mut random = SplittableRandom::new(POOL_SEED + 1);
        let drawn: Vec<i32> = (0..6).map(|_| random.next_int_bounded(1 << 20)).collect();
        assert_eq!(drawn, [961_337, 982_878, 25_730, 105_742, 249_261, 363_733]);
    }

    #[test]
    fn next_bytes_fills_a_partial_word_from_the_low_bytes() {
        let mut odd = [0u8; 13];
        SplittableRandom::new(7).next_bytes(&mut odd);
        assert_eq!(odd, [215, 13, 50, 89, 228, 225, 203, 99, 28, 102, 60, 244, 215]);
    }

    #[test]
    fn values_are_pool_windows_or_zeros() {
        let mut random = Payloads::new(PayloadKind::Random, 1024, POOL_SEED);
        let first = random.next_value().to_vec();
        assert_eq!(first, random.pool[1_465_306..1_465_306 + 1024]);
        let mut zeros = Payloads::new(PayloadKind::Zeros, 100, POOL_SEED);
        assert_eq!(zeros.next_value(), &[0u8; 100][..]);
    }
}
