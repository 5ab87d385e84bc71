//! `TimeIndex` (`.timeindex`) opened over fuzzed bytes, as a segment opens it.
//!
//! Input: bytes 0-7 the base offset (little-endian, any value from
//! 0 to i64::MAX: entries of a base near the top saturate), bytes 8-15 the segment's next offset, byte 16
//! bit 0 opens it as the active segment's (may grow to 4 KiB); the rest is
//! the file. Shorter inputs are padded with zeros.
//!
//! Checks, besides never panicking: `quick_check` and `check` return; when
//! `check` passes, `quick_check` passes too unless the length is not whole
//! entries or the timestamps are flat (quick_check wants the last strictly
//! after the first); `lookup` of timestamps around each entry is the last
//! entry at or below the target as a linear scan finds it; `truncate_to`
//! keeps exactly the entries below the cut; `append_final` of a newer
//! (non-negative) timestamp at the next offset adds one entry.
#![no_main]

use krabka_log::index::{TimeIndex, TimestampOffset};
use krabka_protocol_fuzz::{base_offset, scratch, split_header};
use libfuzzer_sys::fuzz_target;

const HEADER: usize = 17;

fuzz_target!(|data: &[u8]| {
    let (header, file) = split_header::<HEADER>(data);
    let base = base_offset(&header[0..8]);
    let next_offset = i64::from_le_bytes(header[8..16].try_into().unwrap());
    let active = header[16] & 1 != 0;

    let path = scratch::write("00000000000000000000.timeindex", file);
    let mut index = match TimeIndex::open(&path, base, active.then_some(4096)) {
        Ok(index) => index,
        Err(_) => return,
    };
    let entries = index.entries();
    assert_eq!(entries, file.len() / 12);
    let quick = index.quick_check(next_offset);
    let full = index.check(next_offset);
    let _ = index.last_entry();
    let _ = index.is_full();
    if full.is_err() {
        for target in [i64::MIN, 0, i64::MAX] {
            let _ = index.lookup(target);
        }
        return;
    }
    let all: Vec<TimestampOffset> = (0..entries).map(|i| index.entry(i)).collect();
    let flat = all.len() > 1 && all[0].timestamp == all[all.len() - 1].timestamp;
    assert!(quick.is_ok() || file.len() % 12 != 0 || flat, "check passed, quick_check failed: {quick:?}");
    let mut targets = vec![i64::MIN, -1, 0, i64::MAX];
    for e in all.iter().take(64) {
        targets.extend([e.timestamp.saturating_sub(1), e.timestamp, e.timestamp.saturating_add(1)]);
    }
    for &target in &targets {
        let expected = all.iter().rev().find(|e| e.timestamp <= target).copied();
        assert_eq!(index.lookup(target), expected, "lookup({target})");
    }
    let cut = all.get(all.len() / 2).map_or(base, |e| e.offset);
    let kept = all.iter().filter(|e| e.offset < cut).count();
    index.truncate_to(cut);
    assert_eq!(index.entries(), kept, "truncate_to({cut})");
    let last = index.last_entry();
    let newer = last.map_or(0, |e| e.timestamp.saturating_add(1));
    let at = last.map_or(base, |e| e.offset.saturating_add(1));
    if newer >= 0 && newer > last.map_or(-1, |e| e.timestamp) && at - base <= i64::from(u32::MAX) {
        index.append_final(newer, at).expect("append_final");
        assert_eq!(index.entries(), kept + 1, "append_final({newer}, {at})");
        assert_eq!(index.last_entry(), Some(TimestampOffset { timestamp: newer, offset: at }));
    }
});
