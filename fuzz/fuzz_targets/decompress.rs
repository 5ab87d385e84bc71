//! The compression codecs, as a batch's records section reaches them.
//!
//! Input: byte 0 picks the codec (`(byte & 7) % 5`: none, gzip, snappy, lz4,
//! zstd) and, in bit 7, the mode; the rest is the data.
//!
//! Decompress mode (bit 7 clear), for untrusted compressed input: never
//! panics, never returns more than the 1 MiB cap; when the data decompresses,
//! a cap of exactly its size accepts it and one byte less is `TooLarge`, and
//! `decompress_into` appends the same bytes after what the buffer held. On
//! error, `decompress_into` leaves the buffer as it was. LZ4 that decompresses
//! is read the same by lz4_flex's own frame reader (the oracle for krabka's
//! reader of the frames Kafka's clients write).
//!
//! Round-trip mode (bit 7 set): the data compresses, and decompresses back
//! to itself under a cap of its size (and not one byte less).
#![no_main]

use krabka_protocol::compression::{compress, decompress, decompress_into, Compression, CompressionError};
use libfuzzer_sys::fuzz_target;

const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
const ROUND_TRIP: u8 = 0x80;
const PREFIX: &[u8] = b"kept";

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else { return };
    let codec = Compression::ALL[usize::from(selector & 7) % Compression::ALL.len()];
    if selector & ROUND_TRIP != 0 {
        round_trip(codec, input);
    } else {
        decompress_untrusted(codec, input);
    }
});

fn decompress_untrusted(codec: Compression, input: &[u8]) {
    let mut appended = PREFIX.to_vec();
    match decompress(codec, input, MAX_OUTPUT_BYTES) {
        Ok(output) => {
            assert!(output.len() <= MAX_OUTPUT_BYTES);
            assert_eq!(
                decompress(codec, input, output.len()).as_ref(),
                Ok(&output),
                "{codec}: cap of exactly the output size"
            );
            if let Some(smaller) = output.len().checked_sub(1) {
                assert_eq!(
                    decompress(codec, input, smaller),
                    Err(CompressionError::TooLarge { codec, max_output_bytes: smaller }),
                    "{codec}: cap one byte under the output size"
                );
            }
            decompress_into(codec, input, MAX_OUTPUT_BYTES, &mut appended)
                .unwrap_or_else(|e| panic!("{codec}: decompress_into failed where decompress did not: {e}"));
            assert_eq!(&appended[..PREFIX.len()], PREFIX);
            assert_eq!(&appended[PREFIX.len()..], &output[..]);
            if codec == Compression::Lz4 {
                assert_eq!(lz4_flex_frames(input).as_ref(), Some(&output), "lz4: lz4_flex reads other bytes");
            }
        }
        Err(_) => {
            assert!(decompress_into(codec, input, MAX_OUTPUT_BYTES, &mut appended).is_err());
            assert_eq!(appended, PREFIX, "{codec}: decompress_into changed the buffer on error");
        }
    }
}

fn round_trip(codec: Compression, input: &[u8]) {
    let mut compressed = Vec::new();
    compress(codec, input, &mut compressed).unwrap_or_else(|e| panic!("{codec}: compress failed: {e}"));
    let output =
        decompress(codec, &compressed, input.len()).unwrap_or_else(|e| panic!("{codec}: round trip failed: {e}"));
    assert_eq!(output, input, "{codec}: round trip changed the data");
    if let Some(smaller) = input.len().checked_sub(1) {
        assert_eq!(
            decompress(codec, &compressed, smaller),
            Err(CompressionError::TooLarge { codec, max_output_bytes: smaller }),
            "{codec}: round trip under a cap one byte short"
        );
    }
}

/// Every frame of `input` through lz4_flex's FrameDecoder, whose stream ends
/// with each frame; `None` where it refuses. Only called on input krabka
/// decompressed under the cap, so its output is bounded too.
fn lz4_flex_frames(input: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut output = Vec::new();
    let mut decoder = lz4_flex::frame::FrameDecoder::new(input);
    loop {
        decoder.read_to_end(&mut output).ok()?;
        if decoder.get_ref().is_empty() {
            return Some(output);
        }
    }
}
