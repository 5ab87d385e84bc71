//! Compression codecs for record batches: gzip, snappy (raw and xerial framing), lz4 (frame), zstd.
//!
//! The codec is chosen by bits 0-2 of a batch's attributes and applies to the
//! records section only (everything after the 61-byte header). Output follows
//! what Kafka's Java client writes, so other clients and Apache Kafka read it:
//! gzip members, snappy in xerial's framing with 32 KiB blocks, LZ4 frames with
//! independent 64 KiB blocks and no content checksum, zstd frames.
//!
//! Decompression is always capped by a caller-given `max_output_bytes`: input
//! from the network is a few bytes away from a zip bomb, so every decoder is
//! read through `take(max + 1)` (or, for snappy, checked against the length the
//! block declares before anything is allocated) and a larger output is an
//! error, never an allocation.

use std::io::{Read, Write};

mod lz4_block;
mod lz4_frame;

/// A record batch compression codec, numbered as in the attributes field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    /// Every codec, in id order.
    pub const ALL: [Compression; 5] =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

    /// The codec with this id (attributes bits 0-2), if Kafka defines one.
    pub fn from_id(id: u8) -> Result<Self, CompressionError> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            _ => Err(CompressionError::UnknownCodec(id)),
        }
    }

    /// The id written in attributes bits 0-2.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// Kafka's name for the codec, as in the `compression.type` config.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why data could not be compressed or decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    #[error("unknown compression codec id {0}")]
    UnknownCodec(u8),
    #[error("decompressed {codec} data exceeds the limit of {max_output_bytes} bytes")]
    TooLarge { codec: Compression, max_output_bytes: usize },
    #[error("corrupt {codec} data: {reason}")]
    Corrupt { codec: Compression, reason: String },
    #[error("{codec} compression failed: {reason}")]
    CompressFailed { codec: Compression, reason: String },
}

fn corrupt(codec: Compression, reason: impl std::fmt::Display) -> CompressionError {
    CompressionError::Corrupt { codec, reason: reason.to_string() }
}

fn compress_failed(codec: Compression, reason: impl std::fmt::Display) -> CompressionError {
    CompressionError::CompressFailed { codec, reason: reason.to_string() }
}

/// Kafka's default levels (`compression.gzip.level`, `compression.zstd.level`).
const GZIP_LEVEL: u32 = 6;
const ZSTD_LEVEL: i32 = 3;

/// Output reserved per input byte before decompressing (see `decompress_into`).
const EXPECTED_RATIO: usize = 4;
const MIN_RESERVE_BYTES: usize = 1024;

/// snappy-java's `SnappyOutputStream` default block size, which Kafka uses.
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// xerial snappy-java stream header: magic, then version and minimum
/// compatible version as big-endian i32 (both 1 in every released writer).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = XERIAL_MAGIC.len() + 8;
const XERIAL_VERSION: i32 = 1;
const XERIAL_COMPATIBLE_VERSION: i32 = 1;

/// Compresses `input` with `codec`, appending to `output`.
pub fn compress(codec: Compression, input: &[u8], output: &mut Vec<u8>) -> Result<(), CompressionError> {
    match codec {
        Compression::None => output.extend_from_slice(input),
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::new(GZIP_LEVEL));
            encoder.write_all(input).map_err(|e| compress_failed(codec, e))?;
            encoder.finish().map_err(|e| compress_failed(codec, e))?;
        }
        Compression::Snappy => compress_xerial_snappy(input, output)?,
        Compression::Lz4 => {
            // As Kafka's KafkaLZ4BlockOutputStream: 64 KiB independent blocks,
            // no block or content checksum (the batch CRC covers the bytes).
            let frame_info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(frame_info, output);
            encoder.write_all(input).map_err(|e| compress_failed(codec, e))?;
            encoder.finish().map_err(|e| compress_failed(codec, e))?;
        }
        Compression::Zstd => {
            let mut encoder =
                zstd::stream::write::Encoder::new(output, ZSTD_LEVEL).map_err(|e| compress_failed(codec, e))?;
            // A pledged size lets the frame declare its content size, so a
            // reader needs a window no larger than the content.
            encoder.set_pledged_src_size(Some(input.len() as u64)).map_err(|e| compress_failed(codec, e))?;
            encoder.include_contentsize(true).map_err(|e| compress_failed(codec, e))?;
            encoder.write_all(input).map_err(|e| compress_failed(codec, e))?;
            encoder.finish().map_err(|e| compress_failed(codec, e))?;
        }
    }
    Ok(())
}

/// Decompresses `input`, returning at most `max_output_bytes` bytes.
pub fn decompress(codec: Compression, input: &[u8], max_output_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    let mut output = Vec::new();
    decompress_into(codec, input, max_output_bytes, &mut output)?;
    Ok(output)
}

/// Decompresses `input`, appending at most `max_output_bytes` bytes to `output`
/// (which callers may reuse across batches). On error `output` is left as it was.
pub fn decompress_into(
    codec: Compression,
    input: &[u8],
    max_output_bytes: usize,
    output: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let start_len = output.len();
    // Growing from empty doubles and copies several times; records usually
    // compress 2-4x, so reserve that much (never past the cap) up front.
    output.reserve(input.len().saturating_mul(EXPECTED_RATIO).max(MIN_RESERVE_BYTES).min(max_output_bytes));
    let result = match codec {
        Compression::None => {
            if input.len() > max_output_bytes {
                Err(CompressionError::TooLarge { codec, max_output_bytes })
            } else {
                output.extend_from_slice(input);
                Ok(())
            }
        }
        // Java's GZIPInputStream reads concatenated members; so do we.
        Compression::Gzip => read_capped(codec, flate2::read::MultiGzDecoder::new(input), max_output_bytes, output),
        Compression::Snappy => decompress_snappy(input, max_output_bytes, output),
        Compression::Lz4 => decompress_lz4(input, max_output_bytes, output),
        // zstd sizes its window from the frame header, up to its default
        // limit of 2^27 bytes: bounded, and lowering it would refuse batches
        // from producers at the high levels Kafka allows (up to 22).
        Compression::Zstd => match zstd::stream::read::Decoder::with_buffer(input) {
            Ok(decoder) => read_capped(codec, decoder, max_output_bytes, output),
            Err(e) => Err(corrupt(codec, e)),
        },
    };
    if result.is_err() {
        output.truncate(start_len);
    }
    result
}

/// Reads `reader` to its end into `output`, failing once more than
/// `max_output_bytes` would be produced.
fn read_capped(
    codec: Compression,
    reader: impl Read,
    max_output_bytes: usize,
    output: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let start_len = output.len();
    let cap = (max_output_bytes as u64).saturating_add(1);
    reader.take(cap).read_to_end(output).map_err(|e| corrupt(codec, e))?;
    if output.len() - start_len > max_output_bytes {
        return Err(CompressionError::TooLarge { codec, max_output_bytes });
    }
    Ok(())
}

/// LZ4 frames, as Kafka's Java client and librdkafka write them. The frames
/// Kafka's clients write are read straight into `output` (see `lz4_frame`);
/// from the first other frame on, the rest goes to lz4_flex's `FrameDecoder`
/// as it always did. Concatenated frames (which librdkafka's reader accepts)
/// are read one after another until the input is used up.
fn decompress_lz4(input: &[u8], max_output_bytes: usize, output: &mut Vec<u8>) -> Result<(), CompressionError> {
    decompress_lz4_parts(input, max_output_bytes, output).map_err(|e| with_total_cap(e, max_output_bytes))
}

/// The frames this crate reads itself, then the rest through lz4_flex; each
/// part gets the room the parts before it left.
fn decompress_lz4_parts(input: &[u8], max_output_bytes: usize, output: &mut Vec<u8>) -> Result<(), CompressionError> {
    let start_len = output.len();
    let room = |output: &Vec<u8>| max_output_bytes - (output.len() - start_len);
    let mut rest = input;
    while !rest.is_empty() {
        match lz4_frame::read_frame(rest, room(output), output)? {
            Some(after_frame) => rest = after_frame,
            None => return decompress_lz4_frames(rest, room(output), output),
        }
    }
    Ok(())
}

/// Every frame of `input` through one `FrameDecoder`, whose stream ends with
/// each frame (and, in its reading, at an empty stored block, after which
/// the same frame goes on).
fn decompress_lz4_frames(input: &[u8], max_output_bytes: usize, output: &mut Vec<u8>) -> Result<(), CompressionError> {
    let start_len = output.len();
    let mut decoder = lz4_flex::frame::FrameDecoder::new(input);
    loop {
        let room = max_output_bytes - (output.len() - start_len);
        read_capped(Compression::Lz4, &mut decoder, room, output)?;
        if decoder.get_ref().is_empty() {
            return Ok(());
        }
    }
}

/// A part that overflowed the room left reports the whole call's cap.
fn with_total_cap(error: CompressionError, max_output_bytes: usize) -> CompressionError {
    match error {
        CompressionError::TooLarge { codec, .. } => CompressionError::TooLarge { codec, max_output_bytes },
        other => other,
    }
}

fn decompress_snappy(input: &[u8], max_output_bytes: usize, output: &mut Vec<u8>) -> Result<(), CompressionError> {
    if input.starts_with(&XERIAL_MAGIC) {
        decompress_xerial_snappy(input, max_output_bytes, output)
    } else {
        decompress_snappy_block(input, max_output_bytes, output)
    }
}

/// One raw snappy block. Its declared length is checked against the cap before
/// the output grows, so a lying header costs nothing.
fn decompress_snappy_block(
    block: &[u8],
    max_output_bytes: usize,
    output: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let codec = Compression::Snappy;
    let declared_bytes = snap::raw::decompress_len(block).map_err(|e| corrupt(codec, e))?;
    if declared_bytes > max_output_bytes {
        return Err(CompressionError::TooLarge { codec, max_output_bytes });
    }
    let start_len = output.len();
    output.resize(start_len + declared_bytes, 0);
    let written =
        snap::raw::Decoder::new().decompress(block, &mut output[start_len..]).map_err(|e| corrupt(codec, e))?;
    output.truncate(start_len + written);
    Ok(())
}

/// xerial's framing: a 16-byte header, then `[i32 big-endian length, raw snappy
/// block]` chunks. snappy-java reads a header that reappears in place of a
/// chunk length as the start of a concatenated stream; we do the same.
fn decompress_xerial_snappy(
    input: &[u8],
    max_output_bytes: usize,
    output: &mut Vec<u8>,
) -> Result<(), CompressionError> {
    let codec = Compression::Snappy;
    let start_len = output.len();
    let mut rest = input;
    while !rest.is_empty() {
        if rest.starts_with(&XERIAL_MAGIC) {
            if rest.len() < XERIAL_HEADER_BYTES {
                return Err(corrupt(codec, "truncated xerial header"));
            }
            rest = &rest[XERIAL_HEADER_BYTES..];
            continue;
        }
        let Some((length_bytes, after_length)) = rest.split_first_chunk::<4>() else {
            return Err(corrupt(codec, "truncated xerial chunk length"));
        };
        let chunk_bytes = i32::from_be_bytes(*length_bytes);
        let chunk_bytes = usize::try_from(chunk_bytes)
            .ok()
            .filter(|&n| n <= after_length.len())
            .ok_or_else(|| corrupt(codec, format!("invalid xerial chunk length {chunk_bytes}")))?;
        let (chunk, after_chunk) = after_length.split_at(chunk_bytes);
        let room = max_output_bytes - (output.len() - start_len);
        decompress_snappy_block(chunk, room, output).map_err(|e| with_total_cap(e, max_output_bytes))?;
        rest = after_chunk;
    }
    Ok(())
}

fn compress_xerial_snappy(input: &[u8], output: &mut Vec<u8>) -> Result<(), CompressionError> {
    let codec = Compression::Snappy;
    output.extend_from_slice(&XERIAL_MAGIC);
    output.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    output.extend_from_slice(&XERIAL_COMPATIBLE_VERSION.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for block in input.chunks(XERIAL_BLOCK_BYTES) {
        let length_at = output.len();
        output.extend_from_slice(&[0; 4]);
        let block_start = output.len();
        output.resize(block_start + snap::raw::max_compress_len(block.len()), 0);
        let written = encoder.compress(block, &mut output[block_start..]).map_err(|e| compress_failed(codec, e))?;
        output.truncate(block_start + written);
        // A 32 KiB block compresses to well under i32::MAX bytes.
        let written = i32::try_from(written).map_err(|e| compress_failed(codec, e))?;
        output[length_at..block_start].copy_from_slice(&written.to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn codec_ids_match_kafka() {
        for (id, codec) in Compression::ALL.iter().enumerate() {
            assert_eq!(Compression::from_id(id as u8), Ok(*codec));
            assert_eq!(codec.id() as usize, id);
        }
        assert_eq!(Compression::from_id(5), Err(CompressionError::UnknownCodec(5)));
        assert_eq!(Compression::Lz4.to_string(), "lz4");
    }

    #[test]
    fn empty_input_round_trips() {
        for codec in Compression::ALL {
            let mut compressed = Vec::new();
            compress(codec, b"", &mut compressed).unwrap();
            assert_eq!(decompress(codec, &compressed, 0).unwrap(), b"", "{codec}");
        }
    }

    #[test]
    fn xerial_snappy_has_java_header_and_32k_chunks() {
        let input = vec![7u8; 3 * XERIAL_BLOCK_BYTES + 10];
        let mut compressed = Vec::new();
        compress(Compression::Snappy, &input, &mut compressed).unwrap();
        assert_eq!(&compressed[..16], b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01");
        let mut rest = &compressed[16..];
        let mut chunks = 0;
        while !rest.is_empty() {
            let length = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            rest = &rest[4 + length..];
            chunks += 1;
        }
        assert_eq!(chunks, 4);
        assert_eq!(decompress(Compression::Snappy, &compressed, input.len()).unwrap(), input);
    }

    #[test]
    fn raw_snappy_and_concatenated_xerial_streams_decode() {
        let raw = snap::raw::Encoder::new().compress_vec(b"raw snappy block").unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw, 100).unwrap(), b"raw snappy block");

        let mut twice = Vec::new();
        compress(Compression::Snappy, b"first ", &mut twice).unwrap();
        compress(Compression::Snappy, b"second", &mut twice).unwrap();
        assert_eq!(decompress(Compression::Snappy, &twice, 100).unwrap(), b"first second");
    }

    #[test]
    fn concatenated_lz4_frames_and_gzip_members_decode() {
        for codec in [Compression::Lz4, Compression::Gzip, Compression::Zstd] {
            let mut twice = Vec::new();
            compress(codec, b"first ", &mut twice).unwrap();
            compress(codec, b"second", &mut twice).unwrap();
            assert_eq!(decompress(codec, &twice, 100).unwrap(), b"first second", "{codec}");
        }
    }

    /// librdkafka writes frames through liblz4's LZ4F API, whose flags differ
    /// from the Java client's; every flag combination must decode.
    #[test]
    fn lz4_frames_with_any_flags_decode() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
        let input = b"librdkafka lz4 frame ".repeat(20_000);
        for block_size in [BlockSize::Max64KB, BlockSize::Max256KB, BlockSize::Max4MB] {
            for block_mode in [BlockMode::Independent, BlockMode::Linked] {
                for (content_size, checksums) in [(None, false), (Some(input.len() as u64), true)] {
                    let info = FrameInfo::new()
                        .block_size(block_size)
                        .block_mode(block_mode)
                        .content_size(content_size)
                        .block_checksums(checksums)
                        .content_checksum(checksums);
                    let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
                    encoder.write_all(&input).unwrap();
                    let frame = encoder.finish().unwrap();
                    assert_eq!(decompress(Compression::Lz4, &frame, input.len()).unwrap(), input);
                }
            }
        }
    }

    /// Found by the decompress fuzz target: a linked-block frame whose empty
    /// stored block ends FrameDecoder's stream mid-frame. The same decoder
    /// goes on with the frame and finds it truncated; a fresh one would have
    /// taken the rest for a frame of its own.
    #[test]
    fn frames_after_one_taken_by_frame_decoder_stay_with_it() {
        let frame = [
            0x04, 0x22, 0x4d, 0x18, 0x40, 0x40, 0xc0, 0x18, 0x00, 0x00, 0x80, 0x04, 0x22, 0x4d, 0x18, 0x60, 0xc0, 0x82,
            0x09, 0xff, 0xff, 0xff, 0xff, 0x1a, 0xd7, 0xff, 0xef, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x79, 0x00, 0x00,
            0x00, 0x00, 0x80, 0x00, 0x24, 0x00, 0x00,
        ];
        assert!(decompress(Compression::Lz4, &frame, MIB).is_err());
    }

    #[test]
    fn output_exactly_at_the_cap_is_accepted_and_one_more_byte_is_not() {
        let input = b"0123456789abcdef".repeat(64);
        for codec in Compression::ALL {
            let mut compressed = Vec::new();
            compress(codec, &input, &mut compressed).unwrap();
            assert_eq!(decompress(codec, &compressed, input.len()).unwrap(), input, "{codec}");
            assert_eq!(
                decompress(codec, &compressed, input.len() - 1),
                Err(CompressionError::TooLarge { codec, max_output_bytes: input.len() - 1 }),
                "{codec}"
            );
        }
    }

    #[test]
    fn decompress_into_appends_and_leaves_output_alone_on_error() {
        let mut compressed = Vec::new();
        compress(Compression::Zstd, b"payload", &mut compressed).unwrap();
        let mut output = b"kept ".to_vec();
        decompress_into(Compression::Zstd, &compressed, 7, &mut output).unwrap();
        assert_eq!(output, b"kept payload");
        assert!(decompress_into(Compression::Zstd, &compressed, 6, &mut output).is_err());
        assert!(decompress_into(Compression::Zstd, b"garbage", 100, &mut output).is_err());
        assert_eq!(output, b"kept payload");
    }

    /// 100 MiB of zeros, compressed by each codec, against a 1 MiB cap.
    #[test]
    fn zip_bombs_are_rejected_under_the_cap() {
        const BOMB_BYTES: usize = 100 * MIB;
        let zeros = vec![0u8; BOMB_BYTES];
        for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd, Compression::Snappy] {
            let mut bomb = Vec::new();
            compress(codec, &zeros, &mut bomb).unwrap();
            assert!(bomb.len() < BOMB_BYTES / 10, "{codec} bomb is {} bytes", bomb.len());
            assert_eq!(
                decompress(codec, &bomb, MIB),
                Err(CompressionError::TooLarge { codec, max_output_bytes: MIB }),
                "{codec}"
            );
        }
        // A single raw snappy block declaring 100 MiB is refused before allocating.
        let raw_bomb = snap::raw::Encoder::new().compress_vec(&zeros).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw_bomb, MIB),
            Err(CompressionError::TooLarge { codec: Compression::Snappy, max_output_bytes: MIB })
        );
    }

    proptest! {
        #[test]
        fn every_codec_round_trips(input in proptest::collection::vec(any::<u8>(), 0..70_000), repeat in 1usize..4) {
            let input = input.repeat(repeat);
            for codec in Compression::ALL {
                let mut compressed = Vec::new();
                compress(codec, &input, &mut compressed).unwrap();
                prop_assert_eq!(&decompress(codec, &compressed, input.len()).unwrap(), &input);
            }
        }

        #[test]
        fn random_bytes_never_panic_a_decoder(input in proptest::collection::vec(any::<u8>(), 0..512)) {
            for codec in Compression::ALL {
                let _ = decompress(codec, &input, 64 * 1024);
            }
            // Give the framed decoders a valid start so they reach the body.
            for prefix in [&XERIAL_MAGIC[..], &[0x04, 0x22, 0x4d, 0x18][..], &[0x1f, 0x8b][..], &[0x28, 0xb5, 0x2f, 0xfd][..]] {
                let framed = [prefix, &input].concat();
                for codec in Compression::ALL {
                    let _ = decompress(codec, &framed, 64 * 1024);
                }
            }
        }
    }
}
