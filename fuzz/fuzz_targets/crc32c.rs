//! Differential target for CRC-32C: `crc32c` (whichever kernel this CPU
//! takes: the 256-bit folding + `crc32` one, or crc-fast) against a bitwise
//! reference written here, and `crc32c_append` at a split point.
//! Byte 0-1: split position (mod length + 1); rest: the data.

#![no_main]

use krabka_protocol::records::{crc32c, crc32c_append};
use libfuzzer_sys::fuzz_target;

/// CRC-32C one bit at a time: slow, and too plain to share a bug with the
/// fast kernels.
fn reference(data: &[u8]) -> u32 {
    let mut register = !0u32;
    for &byte in data {
        register ^= u32::from(byte);
        for _ in 0..8 {
            let carry = register & 1;
            register >>= 1;
            if carry != 0 {
                register ^= 0x82F6_3B78;
            }
        }
    }
    !register
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let (split, data) = input.split_at(2);
    let expected = reference(data);
    assert_eq!(crc32c(data), expected);
    let at = usize::from(u16::from_le_bytes([split[0], split[1]])) % (data.len() + 1);
    let (head, tail) = data.split_at(at);
    assert_eq!(crc32c_append(crc32c(head), tail), expected);
});
