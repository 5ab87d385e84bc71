//! `OffsetIndex` (`.index`) opened over fuzzed bytes, as a segment opens it.
//!
//! Input: bytes 0-7 the base offset (little-endian, any value from
//! 0 to i64::MAX: entries of a base near the top saturate), bytes 8-15 the `.log` size in bytes,
//! bytes 16-23 the segment's next offset, byte 24 bit 0 opens the index as
//! the active segment's (may grow to 4 KiB) instead of a sealed one's; the
//! rest is the file. Shorter inputs are padded with zeros.
//!
//! Checks, besides never panicking: `quick_check` and `check` return; when
//! `check` passes, `lookup` of offsets around
//! each entry (and the extremes) is the last entry at or below the target
//! (or the segment start) as a linear scan finds it; `truncate_to` and
//! `truncate_to_position` keep exactly the entries below the cut.
#![no_main]

use krabka_log::index::{OffsetIndex, OffsetPosition};
use krabka_protocol_fuzz::{base_offset, scratch, split_header};
use libfuzzer_sys::fuzz_target;

const HEADER: usize = 25;

fuzz_target!(|data: &[u8]| {
    let (header, file) = split_header::<HEADER>(data);
    let base = base_offset(&header[0..8]);
    let log_size = u64::from_le_bytes(header[8..16].try_into().unwrap());
    let next_offset = i64::from_le_bytes(header[16..24].try_into().unwrap());
    let active = header[24] & 1 != 0;

    let path = scratch::write("00000000000000000000.index", file);
    let mut index = match OffsetIndex::open(&path, base, active.then_some(4096)) {
        Ok(index) => index,
        Err(_) => return,
    };
    let entries = index.entries();
    assert_eq!(entries, file.len() / 8);
    let _ = index.quick_check(log_size, next_offset);
    let full = index.check(log_size);
    let _ = index.last_entry();
    let _ = index.is_full();
    if full.is_err() {
        // Still must not panic on the read paths.
        for target in [i64::MIN, base, i64::MAX] {
            let _ = index.lookup(target);
        }
        return;
    }
    let all: Vec<OffsetPosition> = (0..entries).map(|i| index.entry(i)).collect();
    let mut targets = vec![i64::MIN, base - 1, base, i64::MAX];
    for e in all.iter().take(64) {
        targets.extend([e.offset.saturating_sub(1), e.offset, e.offset.saturating_add(1)]);
    }
    for &target in &targets {
        let expected =
            all.iter().rev().find(|e| e.offset <= target).copied().unwrap_or(OffsetPosition { offset: base, position: 0 });
        assert_eq!(index.lookup(target), expected, "lookup({target})");
    }
    // Cuts derived from the input: an offset and a position.
    let cut_offset = targets[targets.len() / 2];
    let kept = all.iter().filter(|e| e.offset < cut_offset).count();
    index.truncate_to(cut_offset);
    assert_eq!(index.entries(), kept, "truncate_to({cut_offset})");
    let cut_position = all.get(kept / 2).map_or(0, |e| e.position);
    let kept = all[..kept].iter().filter(|e| e.position < cut_position).count();
    index.truncate_to_position(cut_position);
    assert_eq!(index.entries(), kept, "truncate_to_position({cut_position})");
    assert!(index.check(log_size).is_ok());
});
