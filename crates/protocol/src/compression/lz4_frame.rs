//! LZ4 frames read straight into the caller's buffer.
//!
//! Why not lz4_flex's `FrameDecoder` for every frame: it decompresses each
//! block into a buffer of its own (allocated per decoder and zeroed to the
//! frame's largest block) and then copies out of it through `Read`, which
//! zeroes the destination again. The leader reads every produced batch, and
//! profiles of the capacity cells showed that zeroing and copying costing
//! more than the decompression. Here a compressed block decodes onto the
//! end of `output` (`lz4_block`) and a stored block is copied once.
//!
//! Only the frames Kafka's clients write take this path: the frame format's
//! version 01 with independent blocks, no dictionary and no content checksum
//! (Kafka's own reader refuses dependent blocks and ignores content
//! checksums). From any other frame, or a header that does not parse, on,
//! the rest of the input goes to `FrameDecoder` as before, so what is
//! accepted and refused there does not change. As Kafka's reader, a frame
//! must end with its end mark.

use super::lz4_block::{self, BlockError};
use super::{corrupt, Compression, CompressionError};

const MAGIC: u32 = 0x184D_2204;
/// Magic, FLG, BD and the header checksum; the content size adds 8.
const MIN_HEADER_BYTES: usize = 7;
const CONTENT_SIZE_BYTES: usize = 8;

const FLG_VERSION_MASK: u8 = 0b1100_0000;
const FLG_VERSION_01: u8 = 0b0100_0000;
const FLG_BLOCK_INDEPENDENCE: u8 = 1 << 5;
const FLG_BLOCK_CHECKSUM: u8 = 1 << 4;
const FLG_CONTENT_SIZE: u8 = 1 << 3;
const FLG_CONTENT_CHECKSUM: u8 = 1 << 2;
const FLG_RESERVED: u8 = 1 << 1;
const FLG_DICTIONARY_ID: u8 = 1;
/// The FLG bits that must be clear for this reader to take the frame.
const FLG_NOT_TAKEN: u8 = FLG_CONTENT_CHECKSUM | FLG_RESERVED | FLG_DICTIONARY_ID;

const BD_BLOCK_SIZE_SHIFT: u8 = 4;
const BD_RESERVED: u8 = 0b1000_1111;

/// A block size word with this bit set holds the block's bytes as they are.
const BLOCK_STORED: u32 = 1 << 31;

/// The parts of a frame header this reader needs.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    block_checksums: bool,
    content_size: Option<u64>,
    max_block_bytes: usize,
    header_bytes: usize,
}

/// Reads the frame at the start of `input`, appending at most
/// `max_output_bytes` bytes to `output`. Returns the input after the frame,
/// or `None` (and `output` untouched) when the frame is not one this reader
/// takes. On error `output` may hold part of the frame; the caller trims it.
pub(super) fn read_frame<'a>(
    input: &'a [u8],
    max_output_bytes: usize,
    output: &mut Vec<u8>,
) -> Result<Option<&'a [u8]>, CompressionError> {
    let Some(header) = parse_header(input) else { return Ok(None) };
    let start_len = output.len();
    let mut rest = &input[header.header_bytes..];
    loop {
        let (word, after_word) = take_u32(rest).ok_or_else(|| lz4_corrupt("frame ends without its end mark"))?;
        if word == 0 {
            rest = after_word;
            break;
        }
        let block_bytes = (word & !BLOCK_STORED) as usize;
        if block_bytes > header.max_block_bytes {
            return Err(lz4_corrupt(format!(
                "block of {block_bytes} bytes over the frame's {}",
                header.max_block_bytes
            )));
        }
        let (block, after_block) =
            after_word.split_at_checked(block_bytes).ok_or_else(|| lz4_corrupt("truncated block"))?;
        rest = after_block;
        if header.block_checksums {
            let (stored_sum, after_sum) = take_u32(rest).ok_or_else(|| lz4_corrupt("truncated block checksum"))?;
            if twox_hash::XxHash32::oneshot(0, block) != stored_sum {
                return Err(lz4_corrupt("block checksum mismatch"));
            }
            rest = after_sum;
        }
        let room = max_output_bytes - (output.len() - start_len);
        if word & BLOCK_STORED != 0 {
            append_stored(block, room, max_output_bytes, output)?;
        } else {
            append_decompressed(block, header.max_block_bytes, room, max_output_bytes, output)?;
        }
    }
    let produced = (output.len() - start_len) as u64;
    if header.content_size.is_some_and(|declared| declared != produced) {
        return Err(lz4_corrupt(format!("frame declares {:?} bytes, holds {produced}", header.content_size)));
    }
    Ok(Some(rest))
}

/// The header at the start of `input`, when it is a whole, checksummed
/// header of a frame this reader takes.
fn parse_header(input: &[u8]) -> Option<Header> {
    let (magic, after_magic) = take_u32(input)?;
    let (&[flg, bd], _) = after_magic.split_first_chunk::<2>()?;
    let taken = magic == MAGIC
        && flg & FLG_VERSION_MASK == FLG_VERSION_01
        && flg & FLG_BLOCK_INDEPENDENCE != 0
        && flg & FLG_NOT_TAKEN == 0
        && bd & BD_RESERVED == 0;
    let block_size_id = bd >> BD_BLOCK_SIZE_SHIFT;
    if !taken || !(4..=7).contains(&block_size_id) {
        return None;
    }
    let has_content_size = flg & FLG_CONTENT_SIZE != 0;
    let descriptor_bytes = 2 + if has_content_size { CONTENT_SIZE_BYTES } else { 0 };
    let (descriptor, after_descriptor) = after_magic.split_at_checked(descriptor_bytes)?;
    let (&header_checksum, _) = after_descriptor.split_first()?;
    // The header checksum is the second byte of the descriptor's xxHash32.
    if (twox_hash::XxHash32::oneshot(0, descriptor) >> 8) as u8 != header_checksum {
        return None;
    }
    let content_size = has_content_size.then(|| {
        let bytes: [u8; CONTENT_SIZE_BYTES] = descriptor[2..].try_into().expect("descriptor holds the content size");
        u64::from_le_bytes(bytes)
    });
    let header = Header {
        block_checksums: flg & FLG_BLOCK_CHECKSUM != 0,
        content_size,
        // 64 KiB, 256 KiB, 1 MiB, 4 MiB for ids 4 to 7.
        max_block_bytes: 1 << (8 + 2 * usize::from(block_size_id)),
        header_bytes: MIN_HEADER_BYTES + descriptor_bytes - 2,
    };
    debug_assert!(header.header_bytes <= input.len());
    Some(header)
}

fn append_stored(
    block: &[u8],
    room: usize,
    max_output_bytes: usize,
    output: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    if block.len() > room {
        return Err(CompressionError::TooLarge { codec: Compression::Lz4, max_output_bytes });
    }
    output.extend_from_slice(block);
    Ok(())
}

/// Decompresses one block onto the end of `output` (no room zeroed first:
/// see `lz4_block`).
fn append_decompressed(
    block: &[u8],
    max_block_bytes: usize,
    room: usize,
    max_output_bytes: usize,
    output: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    match lz4_block::decode_block(block, max_block_bytes.min(room), output) {
        Ok(()) => Ok(()),
        // Only the cap, not the block's own limit, makes valid data too big.
        Err(BlockError::OverLimit) if room < max_block_bytes => {
            Err(CompressionError::TooLarge { codec: Compression::Lz4, max_output_bytes })
        }
        Err(BlockError::OverLimit) => {
            Err(lz4_corrupt(format!("block decodes past the frame's {max_block_bytes} bytes")))
        }
        Err(BlockError::Corrupt(reason)) => Err(lz4_corrupt(reason)),
    }
}

fn take_u32(input: &[u8]) -> Option<(u32, &[u8])> {
    let (bytes, rest) = input.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*bytes), rest))
}

fn lz4_corrupt(reason: impl std::fmt::Display) -> CompressionError {
    corrupt(Compression::Lz4, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lz4_flex::frame::{BlockMode, BlockSize, FrameDecoder, FrameEncoder, FrameInfo};
    use proptest::prelude::*;
    use std::io::{Read, Write};

    fn frame(input: &[u8], info: FrameInfo) -> Vec<u8> {
        let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
        encoder.write_all(input).unwrap();
        encoder.finish().unwrap()
    }

    fn kafka_info() -> FrameInfo {
        FrameInfo::new().block_size(BlockSize::Max64KB).block_mode(BlockMode::Independent)
    }

    /// lz4_flex's own reader of one frame: the oracle.
    fn reference(frame: &[u8]) -> Option<Vec<u8>> {
        let mut output = Vec::new();
        FrameDecoder::new(frame).read_to_end(&mut output).ok().map(|_| output)
    }

    #[test]
    fn takes_the_frames_kafka_writes_and_leaves_the_rest() {
        let input = b"0123456789".repeat(30_000);
        let mut output = Vec::new();
        let encoded = frame(&input, kafka_info());
        assert_eq!(read_frame(&encoded, usize::MAX, &mut output), Ok(Some(&[][..])));
        assert_eq!(output, input);
        for other in [kafka_info().block_mode(BlockMode::Linked), kafka_info().content_checksum(true)] {
            let mut output = Vec::new();
            assert_eq!(read_frame(&frame(&input, other), usize::MAX, &mut output), Ok(None));
            assert!(output.is_empty());
        }
    }

    #[test]
    fn block_checksums_content_size_and_larger_blocks_are_checked() {
        let input = b"checked ".repeat(100_000);
        for block_size in [BlockSize::Max64KB, BlockSize::Max256KB, BlockSize::Max1MB, BlockSize::Max4MB] {
            let info = kafka_info().block_size(block_size).block_checksums(true).content_size(Some(input.len() as u64));
            let mut encoded = frame(&input, info);
            let mut output = Vec::new();
            assert_eq!(read_frame(&encoded, usize::MAX, &mut output), Ok(Some(&[][..])));
            assert_eq!(output, input);
            // The first block's checksum sits just before the second block's size word.
            let first_block = u32::from_le_bytes(encoded[15..19].try_into().unwrap()) & !BLOCK_STORED;
            let sum_at = 19 + first_block as usize;
            encoded[sum_at] ^= 1;
            assert!(read_frame(&encoded, usize::MAX, &mut Vec::new()).is_err(), "{block_size:?}");
        }
    }

    #[test]
    fn a_frame_needs_its_end_mark() {
        let encoded = frame(b"no end mark here", kafka_info());
        let cut = &encoded[..encoded.len() - 4];
        assert!(read_frame(cut, usize::MAX, &mut Vec::new()).is_err());
    }

    #[test]
    fn the_cap_counts_every_block() {
        let input = vec![0u8; 200_000];
        let encoded = frame(&input, kafka_info());
        let mut output = Vec::new();
        assert_eq!(read_frame(&encoded, input.len(), &mut output), Ok(Some(&[][..])));
        let too_large = CompressionError::TooLarge { codec: Compression::Lz4, max_output_bytes: input.len() - 1 };
        assert_eq!(read_frame(&encoded, input.len() - 1, &mut Vec::new()), Err(too_large));
    }

    proptest! {
        /// Whatever this reader accepts, lz4_flex's reader accepts with the
        /// same bytes; what lz4_flex writes, this reader reads.
        #[test]
        fn agrees_with_lz4_flex(
            bytes in proptest::collection::vec(any::<u8>(), 0..200_000),
            alphabet in 1u16..=256,
            checksums in any::<bool>(),
            flip in any::<usize>(),
            cut in any::<usize>(),
        ) {
            // Few distinct bytes compress; all 256 leave blocks stored.
            let input: Vec<u8> = bytes.iter().map(|&b| (u16::from(b) % alphabet) as u8).collect();
            let encoded = frame(&input, kafka_info().block_checksums(checksums));
            let mut output = Vec::new();
            prop_assert_eq!(read_frame(&encoded, usize::MAX, &mut output), Ok(Some(&[][..])));
            prop_assert_eq!(&output, &input);
            let mut damaged = encoded.clone();
            damaged[flip % encoded.len()] ^= 0x5a;
            let damaged = &damaged[..=cut % damaged.len()];
            let mut output = Vec::new();
            if let Ok(Some(rest)) = read_frame(damaged, usize::MAX, &mut output) {
                prop_assert!(rest.is_empty());
                prop_assert_eq!(Some(output), reference(damaged));
            }
        }
    }
}
