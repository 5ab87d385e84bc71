//! LZ4 blocks decoded by appending to a `Vec`.
//!
//! Why not lz4_flex's block decoder: its safe API decodes into a slice,
//! which safe Rust must zero first, and a block's decoded size is not
//! known in advance, only bounded (64 KiB for the blocks Kafka's producers
//! write). Profiled on the capacity cell of 1 KiB zero records, zeroing
//! that room cost more than half as much as decoding into it, and in every
//! LZ4 cell it zeroed up to four times the bytes a 16 KiB batch decodes to.
//! Appending needs no room made in advance: the caller's reused buffer
//! keeps its capacity, and each byte is written once.
//!
//! The format (lz4_Block_format.md): sequences of a token (literal length
//! in the high nibble, match length minus 4 in the low one, 15 meaning
//! "more length bytes follow, each added, until one is not 255"), the
//! literals, then a 2-byte little-endian offset back into the output and
//! the match's extra length bytes. The last sequence ends after its
//! literals. The blocks Kafka's clients write are independent: a match
//! reaches only into its own block's output, and offset 0 is invalid.

/// Why a block did not decode.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BlockError {
    /// Not a valid block; the reason.
    Corrupt(&'static str),
    /// It would decode to more than the limit.
    OverLimit,
}

/// The shortest match the format encodes: its length nibble counts from here.
const MIN_MATCH: usize = 4;
/// A nibble of 15 says that length bytes follow.
const MORE_LENGTH: usize = 15;
/// Copies this long or shorter are made this long and cut back: a copy of
/// a constant length compiles to a few moves, one of a variable length to a
/// call of `memcpy` (profiled: those calls were most of decoding 100 B records).
const SHORT_COPY: usize = 16;

/// Appends the decoded `block` to `output`, at most `limit` bytes of it.
/// On error `output` may hold part of the block; the caller trims it.
pub(super) fn decode_block(block: &[u8], limit: usize, output: &mut Vec<u8>) -> Result<(), BlockError> {
    let block_start = output.len();
    let mut input = block;
    loop {
        let (&token, rest) = input.split_first().ok_or(BlockError::Corrupt("block ends before a token"))?;
        input = rest;
        let literals = length(usize::from(token >> 4), &mut input)?;
        let rest = input.get(literals..).ok_or(BlockError::Corrupt("literals run past the block"))?;
        make_room(output, block_start, limit, literals)?;
        append_literals(output, input, literals);
        input = rest;
        if input.is_empty() {
            return Ok(());
        }
        let (offset, rest) = input.split_first_chunk::<2>().ok_or(BlockError::Corrupt("truncated match offset"))?;
        input = rest;
        let offset = usize::from(u16::from_le_bytes(*offset));
        let match_length = MIN_MATCH + length(usize::from(token & 0x0f), &mut input)?;
        if offset == 0 || offset > output.len() - block_start {
            return Err(BlockError::Corrupt("match offset outside the block's output"));
        }
        make_room(output, block_start, limit, match_length)?;
        copy_match(output, offset, match_length);
    }
}

/// A length from its nibble and, when the nibble is 15, the bytes after it.
fn length(nibble: usize, input: &mut &[u8]) -> Result<usize, BlockError> {
    debug_assert!(nibble <= MORE_LENGTH);
    if nibble < MORE_LENGTH {
        return Ok(nibble);
    }
    let mut total = nibble;
    loop {
        let (&byte, rest) = input.split_first().ok_or(BlockError::Corrupt("truncated length"))?;
        *input = rest;
        // At most 255 per input byte: no overflow before the input runs out.
        total += usize::from(byte);
        if byte != u8::MAX {
            return Ok(total);
        }
    }
}

/// Refuses to let the block's output pass `limit` by `more` bytes.
fn make_room(output: &[u8], block_start: usize, limit: usize, more: usize) -> Result<(), BlockError> {
    if more > limit - (output.len() - block_start) {
        return Err(BlockError::OverLimit);
    }
    Ok(())
}

/// Appends the first `literals` bytes of `input` (which holds that many).
fn append_literals(output: &mut Vec<u8>, input: &[u8], literals: usize) {
    debug_assert!(literals <= input.len());
    let end = output.len() + literals;
    match (input.first_chunk::<SHORT_COPY>(), input.first_chunk::<{ 2 * SHORT_COPY }>()) {
        (Some(chunk), _) if literals <= SHORT_COPY => output.extend_from_slice(chunk),
        (_, Some(chunk)) if literals <= 2 * SHORT_COPY => output.extend_from_slice(chunk),
        _ => output.extend_from_slice(&input[..literals]),
    }
    output.truncate(end);
}

/// Appends `length` bytes copied from `offset` bytes back, where the copy may
/// overlap what it appends (a run repeating the last `offset` bytes).
fn copy_match(output: &mut Vec<u8>, offset: usize, length: usize) {
    debug_assert!(offset > 0 && offset <= output.len());
    let from = output.len() - offset;
    let end = output.len() + length;
    // Short copies go through a fixed-size array: `extend_from_within`
    // calls `memcpy` even for a constant length (profiled).
    if length <= SHORT_COPY && offset >= SHORT_COPY {
        let chunk: [u8; SHORT_COPY] = *output[from..].first_chunk().expect("offset >= SHORT_COPY");
        output.extend_from_slice(&chunk);
        output.truncate(end);
    } else if length <= 2 * SHORT_COPY && offset >= 2 * SHORT_COPY {
        let chunk: [u8; 2 * SHORT_COPY] = *output[from..].first_chunk().expect("offset >= 2 * SHORT_COPY");
        output.extend_from_slice(&chunk);
        output.truncate(end);
    } else if offset >= length {
        output.extend_from_within(from..from + length);
    } else if offset == 1 {
        let byte = output[from];
        output.resize(output.len() + length, byte);
    } else {
        // From `from` on the output repeats with period `offset`, so
        // appending all of `from..` keeps it so and doubles the run each time.
        while output.len() < end {
            let chunk = (output.len() - from).min(end - output.len());
            output.extend_from_within(from..from + chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(block: &[u8], limit: usize) -> Result<Vec<u8>, BlockError> {
        let mut output = b"before".to_vec();
        decode_block(block, limit, &mut output)?;
        Ok(output.split_off(6))
    }

    /// lz4_flex's encoder as the reference for what blocks hold.
    fn round_trip(data: &[u8]) {
        let block = lz4_flex::block::compress(data);
        assert_eq!(decode(&block, data.len()).as_deref(), Ok(data), "{} bytes", data.len());
        if let Some(less) = data.len().checked_sub(1) {
            assert_eq!(decode(&block, less), Err(BlockError::OverLimit));
        }
    }

    #[test]
    fn blocks_of_every_shape_decode_as_encoded() {
        round_trip(b"");
        round_trip(b"a");
        round_trip(&[0u8; 70_000]);
        round_trip(&b"abc".repeat(10_000));
        round_trip(&b"0123456789abcdefghij".repeat(500));
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let random: Vec<u8> = (0..100_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 56) as u8
            })
            .collect();
        round_trip(&random);
        // Records alike but for a few bytes: short matches between literals.
        let records: Vec<u8> = random.chunks(7).flat_map(|c| [c, b"header-key", b"value"].concat()).collect();
        round_trip(&records);
    }

    #[test]
    fn overlapping_matches_repeat_their_period() {
        // "ab", then a match of 9 at offset 2, then "!".
        let block = [0x25, b'a', b'b', 2, 0, 0x10, b'!'];
        assert_eq!(decode(&block, 100).unwrap(), b"abababababa!");
        // Offset 3 over 8 bytes: "xyz" repeated.
        let block = [0x34, b'x', b'y', b'z', 3, 0, 0x00];
        assert_eq!(decode(&block, 100).unwrap(), b"xyzxyzxyzxy");
    }

    #[test]
    fn malformed_blocks_are_corrupt() {
        let corrupt = |block: &[u8]| matches!(decode(block, 1 << 16), Err(BlockError::Corrupt(_)));
        assert!(corrupt(b""), "no token");
        assert!(corrupt(&[0x30, b'a']), "literals past the end");
        assert!(corrupt(&[0xf0, 255]), "length bytes run out");
        assert!(corrupt(&[0x10, b'a', 1]), "half an offset");
        assert!(corrupt(&[0x10, b'a', 0, 0, 0x00]), "offset 0");
        assert!(corrupt(&[0x10, b'a', 2, 0, 0x00]), "offset before the block");
        // A match may not reach into what the buffer held before the block.
        let mut output = b"earlier".to_vec();
        let reaching_back = [0x10, b'a', 3, 0, 0x00];
        assert!(matches!(decode_block(&reaching_back, 100, &mut output), Err(BlockError::Corrupt(_))));
    }
}
