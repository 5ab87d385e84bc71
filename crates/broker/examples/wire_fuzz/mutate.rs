//! Mutations of valid request frames (size prefix included): what a broken
//! or hostile client puts on the wire.

use krabka_protocol::testing::Rng;

/// The shapes of damage, in the order `mutate` picks them.
const KINDS: usize = 8;

/// Rewrites the size prefix to the frame's true length.
fn fix_size(frame: &mut [u8]) {
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
}

/// A random position past the size prefix (frames are at least 12 bytes).
fn position(rng: &mut Rng, frame: &[u8]) -> usize {
    4 + rng.below((frame.len() - 4) as u64) as usize
}

/// Damages `frame`; `other` is a second valid frame to splice with.
pub fn mutate(rng: &mut Rng, frame: &mut Vec<u8>, other: &[u8]) {
    if frame.len() < 12 {
        return;
    }
    match rng.below(KINDS as u64) {
        0 => flip_bytes(rng, frame),
        1 => {
            // Cut the body short and say so: the decoder meets the end early.
            let keep = 4 + rng.below((frame.len() - 4) as u64) as usize;
            frame.truncate(keep.max(8));
            fix_size(frame);
        }
        2 => {
            // Trailing garbage inside the frame.
            let extra = 1 + rng.below(64) as usize;
            frame.extend((0..extra).map(|_| rng.next_u64() as u8));
            fix_size(frame);
        }
        3 => lie_about_size(rng, frame),
        4 => {
            // The head of one request with the tail of another.
            let cut = position(rng, frame);
            let from = 4 + rng.below(other.len().saturating_sub(4).max(1) as u64) as usize;
            frame.truncate(cut);
            frame.extend_from_slice(other.get(from..).unwrap_or_default());
            fix_size(frame);
        }
        5 => huge_count(rng, frame),
        6 => {
            // A version or API key the broker does not serve, or any header.
            let at = 4 + rng.below(4) as usize;
            frame[at] = rng.next_u64() as u8;
        }
        _ => {
            // Several mutations at once.
            for _ in 0..2 + rng.below(3) {
                if frame.len() >= 12 {
                    match rng.below(3) {
                        0 => flip_bytes(rng, frame),
                        1 => huge_count(rng, frame),
                        _ => frame.insert(position(rng, frame), rng.next_u64() as u8),
                    }
                }
            }
            fix_size(frame);
        }
    }
}

fn flip_bytes(rng: &mut Rng, frame: &mut [u8]) {
    for _ in 0..1 + rng.below(8) {
        let at = position(rng, frame);
        frame[at] ^= 1 << rng.below(8);
        if rng.below(4) == 0 {
            frame[at] = rng.next_u64() as u8;
        }
    }
}

/// A size prefix that is not the frame's length: a little off either way,
/// zero, negative, past socket.request.max.bytes, or i32::MAX.
fn lie_about_size(rng: &mut Rng, frame: &mut [u8]) {
    let true_size = (frame.len() - 4) as i32;
    let size = match rng.below(6) {
        0 => true_size + 1 + rng.below(16) as i32,
        1 => true_size - 1 - rng.below(true_size.max(1) as u64) as i32,
        2 => 0,
        3 => -(1 + rng.below(1 << 20) as i32),
        4 => 100 * 1024 * 1024 + rng.below(1 << 20) as i32,
        _ => i32::MAX,
    };
    frame[..4].copy_from_slice(&size.to_be_bytes());
}

/// An array or string length that claims far more than the frame holds:
/// an i32 (classic arrays), an i16 (classic strings) or a varint (compact).
fn huge_count(rng: &mut Rng, frame: &mut Vec<u8>) {
    let at = 12.min(frame.len() - 1) + rng.below((frame.len().saturating_sub(12)).max(1) as u64) as usize;
    let patch: &[u8] = match rng.below(4) {
        0 => &[0x7f, 0xff, 0xff, 0xff],
        1 => &[0x7f, 0xff],
        2 => &[0xff, 0xff, 0xff, 0xff, 0x07],
        _ => &[0x00, 0x10, 0x00, 0x00],
    };
    for (i, byte) in patch.iter().enumerate() {
        match frame.get_mut(at + i) {
            Some(slot) => *slot = *byte,
            None => frame.push(*byte),
        }
    }
    fix_size(frame);
}
