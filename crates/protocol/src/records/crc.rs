//! CRC-32C (Castagnoli), the checksum Kafka puts on every record batch.
//!
//! Every produced batch is checked once on append, so this runs over every
//! byte a producer sends. crc-fast picks its kernel by CPU tier: with AVX-512
//! it folds 512-bit lanes, but a CPU with AVX2 and VPCLMULQDQ and no AVX-512
//! (AMD Zen 3, for one) lands on its 128-bit SSE kernel, which ran at about
//! 13 GiB/s here, slower than the plain `crc32` instruction. On such CPUs
//! [`wide`] folds 256-bit lanes itself; everywhere else crc-fast does the work.

/// CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= wide::MIN_BYTES && wide::available() {
        // SAFETY: `available` checked every CPU feature `update` is compiled for.
        return !unsafe { wide::update(!0, data) };
    }
    // Crc32Iscsi is CRC-32C; the 64-bit result holds a 32-bit value.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32
}

/// CRC-32C of `previous ++ data`, given `crc` = CRC-32C of `previous`.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= wide::MIN_BYTES && wide::available() {
        // SAFETY: as in `crc32c`.
        return !unsafe { wide::update(!crc, data) };
    }
    // crc-fast's state is the register before the final inversion.
    let mut digest = crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

/// CRC-32C with both of the CPU's CRC engines at once: carry-less
/// multiplication over 256-bit lanes (VPCLMULQDQ) and the `crc32` instruction.
///
/// The message is a polynomial over GF(2), bit-reflected: byte 0's lowest bit
/// is its highest term, and a CRC register is the message times x^32 mod P.
/// Folding: four 32-byte accumulators each take every fourth 32-byte block; a
/// step multiplies each 128-bit half by x^(8·128) mod P (moving it forward
/// 128 bytes while staying congruent mod P) and adds the next block. At the
/// end they fold into one 16-byte value congruent to all they read, and two
/// `crc32` instructions turn it into the register.
///
/// Neither engine alone keeps the core busy (each ran at about 20 GiB/s here),
/// so a large buffer is cut into a vector part and three equal scalar parts,
/// all read in the same loop; the scalar parts' registers start at zero and
/// are combined by linearity: register(A ++ B) = register(A)·x^(8|B|) mod P
/// xor register_from_zero(B).
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    /// Below this the fixed cost of the reduction outweighs the wide loop.
    pub(super) const MIN_BYTES: usize = 256;

    /// VPCLMULQDQ on AVX2 without AVX-512 (crc-fast's own AVX-512 kernel is
    /// faster where it applies).
    #[inline]
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("vpclmulqdq")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("pclmulqdq")
            && is_x86_feature_detected!("sse4.2")
            && !is_x86_feature_detected!("avx512vl")
    }

    /// CRC-32C's P without its x^32 term, in normal form (x^d is bit d).
    const POLY: u64 = 0x1EDC_6F41;

    /// a·b mod P, in normal form.
    const fn mul_mod_p(a: u32, b: u32) -> u32 {
        let mut product = 0u64;
        let mut i = 0;
        while i < 32 {
            if (b >> i) & 1 != 0 {
                product ^= (a as u64) << i;
            }
            i += 1;
        }
        let mut degree = 62;
        while degree >= 32 {
            if (product >> degree) & 1 != 0 {
                product ^= ((1 << 32) | POLY) << (degree - 32);
            }
            degree -= 1;
        }
        product as u32
    }

    /// x^n mod P in the reflected 64-bit form `clmul` takes: x^d is bit 63 - d.
    const fn x_pow_mod_p(mut n: u64) -> u64 {
        let (mut result, mut square) = (1u32, 2u32);
        while n > 0 {
            if n & 1 != 0 {
                result = mul_mod_p(result, square);
            }
            square = mul_mod_p(square, square);
            n >>= 1;
        }
        let mut reflected = 0u64;
        let mut d = 0;
        while d < 32 {
            if (result >> d) & 1 != 0 {
                reflected |= 1 << (63 - d);
            }
            d += 1;
        }
        reflected
    }

    /// Multipliers that move a 16-byte lane `bytes` forward. The lane's low
    /// qword holds its high 64 terms (times x^64), the high qword its low 64;
    /// a reflected clmul yields the product times x, hence the -1.
    const fn fold_by(bytes: u64) -> (u64, u64) {
        (x_pow_mod_p(8 * bytes + 64 - 1), x_pow_mod_p(8 * bytes - 1))
    }

    const FOLD_128: (u64, u64) = fold_by(128);
    const FOLD_32: (u64, u64) = fold_by(32);
    const FOLD_16: (u64, u64) = fold_by(16);

    /// Per loop step: 128 bytes to the vector part, 64 to each scalar part
    /// (the best split measured here: 24, 40, 64, 96 and 128 bytes gave
    /// 28, 28, 33, 26 and 23 GiB/s on 64 KiB).
    const VECTOR_STEP: usize = 128;
    const SCALAR_STEP: usize = 64;
    const FUSED_STEP: usize = VECTOR_STEP + 3 * SCALAR_STEP;
    /// A fused chunk is FUSED_STEP · 2^k bytes, k in this range, so the
    /// combining multipliers are constants.
    const MIN_FUSED_LOG2: u32 = 2;
    const MAX_FUSED_LOG2: u32 = 16;

    /// For a register left `bytes` before the end: the clmul multiplier
    /// that advances it over that many bytes (see `shift`).
    const fn shift_by(bytes: u64) -> u64 {
        x_pow_mod_p(8 * bytes - 65)
    }

    /// SHIFT[k][m - 1] advances a register over m scalar parts of a
    /// FUSED_STEP · 2^k chunk.
    const SHIFT: [[u64; 3]; MAX_FUSED_LOG2 as usize + 1] = {
        let mut table = [[0u64; 3]; MAX_FUSED_LOG2 as usize + 1];
        let mut k = 0;
        while k <= MAX_FUSED_LOG2 as usize {
            let part = (SCALAR_STEP << k) as u64;
            table[k] = [shift_by(part), shift_by(2 * part), shift_by(3 * part)];
            k += 1;
        }
        table
    };

    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq")]
    fn constants256((low, high): (u64, u64)) -> __m256i {
        _mm256_set_epi64x(high as i64, low as i64, high as i64, low as i64)
    }

    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq")]
    fn fold256(lanes: __m256i, by: __m256i, next: __m256i) -> __m256i {
        let low = _mm256_clmulepi64_epi128(lanes, by, 0x00);
        let high = _mm256_clmulepi64_epi128(lanes, by, 0x11);
        _mm256_xor_si256(_mm256_xor_si256(low, high), next)
    }

    #[inline]
    #[target_feature(enable = "pclmulqdq,sse4.2")]
    fn fold128(lane: __m128i, by: __m128i, next: __m128i) -> __m128i {
        let low = _mm_clmulepi64_si128(lane, by, 0x00);
        let high = _mm_clmulepi64_si128(lane, by, 0x11);
        _mm_xor_si128(_mm_xor_si128(low, high), next)
    }

    /// The register of a 16-byte value's message, from a zero register.
    #[inline]
    #[target_feature(enable = "sse4.2")]
    fn register_of(lane: __m128i) -> u32 {
        let crc = _mm_crc32_u64(0, _mm_cvtsi128_si64(lane) as u64);
        _mm_crc32_u64(crc, _mm_extract_epi64(lane, 1) as u64) as u32
    }

    /// `register`·x^(8·bytes) mod P, given `by` = shift_by(bytes): the
    /// register embedded in a u64 is register·x^32, the reflected clmul adds
    /// x, and `register_of` multiplies by x^32 again: 65 in all.
    #[inline]
    #[target_feature(enable = "pclmulqdq,sse4.2")]
    fn shift(register: u32, by: u64) -> u32 {
        let product = _mm_clmulepi64_si128(_mm_cvtsi64_si128(i64::from(register)), _mm_cvtsi64_si128(by as i64), 0x00);
        register_of(product)
    }

    /// Four 32-byte lanes of a 128-byte block.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load_block(block: &[u8; 128]) -> [__m256i; 4] {
        // SAFETY: each load reads 32 bytes at 0, 32, 64 or 96 of a 128-byte
        // array; unaligned loads accept any address.
        let load = |at: usize| unsafe { _mm256_loadu_si256(block.as_ptr().add(at).cast()) };
        [load(0), load(32), load(64), load(96)]
    }

    /// The accumulators after the first block, into which the register
    /// enters as an XOR over the message's first 32 bits.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn start(register: u32, first: &[u8; 128]) -> [__m256i; 4] {
        let mut lanes = load_block(first);
        lanes[0] = _mm256_xor_si256(lanes[0], _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, register as i32));
        lanes
    }

    /// One step: every accumulator moves forward 128 bytes and takes its
    /// 32 bytes of the next block.
    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq")]
    fn fold_block(lanes: &mut [__m256i; 4], by_128: __m256i, block: &[u8; 128]) {
        for (lane, next) in lanes.iter_mut().zip(load_block(block)) {
            *lane = fold256(*lane, by_128, next);
        }
    }

    /// Folds four 256-bit accumulators, 128 bytes apart, into the register.
    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    fn reduce(lanes: [__m256i; 4]) -> __m128i {
        let by_32 = constants256(FOLD_32);
        let mut folded = fold256(lanes[0], by_32, lanes[1]);
        folded = fold256(folded, by_32, lanes[2]);
        folded = fold256(folded, by_32, lanes[3]);
        let by_16 = _mm_set_epi64x(FOLD_16.1 as i64, FOLD_16.0 as i64);
        fold128(_mm256_castsi256_si128(folded), by_16, _mm256_extracti128_si256(folded, 1))
    }

    /// Runs the CRC register `register` (not inverted) over `data`.
    ///
    /// # Safety
    /// The CPU must have the features [`available`] checks.
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    pub(super) unsafe fn update(mut register: u32, mut data: &[u8]) -> u32 {
        while data.len() >= FUSED_STEP << MIN_FUSED_LOG2 {
            let log2 = (data.len() / FUSED_STEP).ilog2().min(MAX_FUSED_LOG2);
            let (chunk, rest) = data.split_at(FUSED_STEP << log2);
            register = fused(register, chunk, log2);
            data = rest;
        }
        if data.len() >= MIN_BYTES {
            folded(register, data)
        } else {
            scalar(register, data)
        }
    }

    /// A chunk of FUSED_STEP · 2^log2 bytes: the vector part first, then
    /// the three scalar parts, all advanced in one loop.
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    fn fused(register: u32, chunk: &[u8], log2: u32) -> u32 {
        let steps = 1usize << log2;
        let part = SCALAR_STEP * steps;
        assert_eq!(chunk.len(), VECTOR_STEP * steps + 3 * part);
        let (vector, scalar_parts) = chunk.split_at(VECTOR_STEP * steps);
        let (blocks, _) = vector.as_chunks::<VECTOR_STEP>();
        // SAFETY: each read is 8 bytes within one scalar part of `part`
        // bytes (at + offset + 8 <= SCALAR_STEP * steps), which the loop
        // bounds give; an unaligned read accepts any address.
        let word = |stream: usize, at: usize| unsafe {
            scalar_parts.as_ptr().add(stream * part + at).cast::<u64>().read_unaligned()
        };
        let mut lanes = start(register, &blocks[0]);
        let by_128 = constants256(FOLD_128);
        let mut streams = [0u64; 3];
        for (step, block) in blocks.iter().enumerate() {
            if step > 0 {
                fold_block(&mut lanes, by_128, block);
            }
            let at = SCALAR_STEP * step;
            for offset in (0..SCALAR_STEP).step_by(8) {
                for (stream, crc) in streams.iter_mut().enumerate() {
                    *crc = _mm_crc32_u64(*crc, word(stream, at + offset));
                }
            }
        }
        let shifts = &SHIFT[log2 as usize];
        shift(register_of(reduce(lanes)), shifts[2])
            ^ shift(streams[0] as u32, shifts[1])
            ^ shift(streams[1] as u32, shifts[0])
            ^ streams[2] as u32
    }

    /// Folding alone, for at least MIN_BYTES.
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    fn folded(register: u32, data: &[u8]) -> u32 {
        let (blocks, rest) = data.as_chunks::<128>();
        let (first, blocks) = blocks.split_first().expect("at least MIN_BYTES");
        let mut lanes = start(register, first);
        let by_128 = constants256(FOLD_128);
        for block in blocks {
            fold_block(&mut lanes, by_128, block);
        }
        let by_16 = _mm_set_epi64x(FOLD_16.1 as i64, FOLD_16.0 as i64);
        let mut lane = reduce(lanes);
        let (sixteens, tail) = rest.as_chunks::<16>();
        for sixteen in sixteens {
            // SAFETY: a 16-byte load from a 16-byte array.
            let next = unsafe { _mm_loadu_si128(sixteen.as_ptr().cast()) };
            lane = fold128(lane, by_16, next);
        }
        // `lane` is congruent to the whole message so far: its register
        // from zero is the register after the message.
        scalar(register_of(lane), tail)
    }

    /// The `crc32` instruction alone, for what is left.
    #[target_feature(enable = "sse4.2")]
    fn scalar(mut register: u32, data: &[u8]) -> u32 {
        let mut words = data.chunks_exact(8);
        for word in &mut words {
            let word = u64::from_le_bytes(word.try_into().expect("chunks of 8"));
            register = _mm_crc32_u64(u64::from(register), word) as u32;
        }
        for &byte in words.remainder() {
            register = _mm_crc32_u8(register, byte);
        }
        register
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes without a crate: xorshift.
    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    #[test]
    fn known_answers() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62A8_AB43);
    }

    #[test]
    fn every_length_and_alignment_matches_the_crc32c_crate() {
        let data = bytes(4096 + 64, 42);
        for start in 0..8 {
            for len in (0..1100).chain([4095, 4096]) {
                let slice = &data[start..start + len];
                assert_eq!(crc32c(slice), crc32c::crc32c(slice), "start {start} len {len}");
            }
        }
    }

    #[test]
    fn append_continues_a_checksum() {
        let data = bytes(70_000, 7);
        for split in [0, 1, 61, 255, 256, 300, 4096, 65_536, 70_000] {
            let (head, tail) = data.split_at(split);
            assert_eq!(crc32c_append(crc32c(head), tail), crc32c::crc32c(&data), "split {split}");
        }
    }

    /// The wide kernel on its own, where this CPU runs it (on others the
    /// tests above cover crc-fast).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wide_kernel_matches_the_crc32c_crate() {
        if !wide::available() {
            eprintln!("this CPU does not take the wide kernel");
            return;
        }
        let data = bytes(300_000, 9);
        // Around the fused chunk sizes (320 · 2^k bytes) and past several.
        for len in [256, 257, 271, 383, 1279, 1280, 1281, 1535, 2560, 4096, 65_537, 200_000, 300_000] {
            for previous in [0u32, !0, 0x1234_5678] {
                // SAFETY: available() returned true.
                let wide = !unsafe { wide::update(!previous, &data[..len]) };
                assert_eq!(wide, crc32c::crc32c_append(previous, &data[..len]), "len {len}");
            }
        }
    }
}
