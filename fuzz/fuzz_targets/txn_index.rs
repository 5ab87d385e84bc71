//! `TransactionIndex::open` (`.txnindex`) over fuzzed bytes.
//!
//! Input: the file.
//!
//! Checks, besides never panicking: the entries are the longest prefix of
//! whole 34-byte version-0 entries (decoded here independently), and the
//! file opens again to the same entries; `quick_check` fails when anything
//! follows them and returns for segment bounds around the entries; `overlapping`
//! agrees with a linear filter; `contains` finds every entry; `truncate_to`
//! keeps exactly the entries whose marker is below the cut.
#![no_main]

use krabka_log::index::{AbortedTxn, TransactionIndex};
use krabka_protocol_fuzz::scratch;
use libfuzzer_sys::fuzz_target;

const ENTRY: usize = 34;

fn decode(raw: &[u8]) -> Option<AbortedTxn> {
    let i64_at = |at: usize| i64::from_be_bytes(raw[at..at + 8].try_into().unwrap());
    (raw[0] == 0 && raw[1] == 0).then(|| AbortedTxn {
        producer_id: i64_at(2),
        first_offset: i64_at(10),
        last_offset: i64_at(18),
        last_stable_offset: i64_at(26),
    })
}

fuzz_target!(|data: &[u8]| {
    let path = scratch::write("00000000000000000000.txnindex", data);
    let Ok(mut index) = TransactionIndex::open(&path) else { return };
    let expected: Vec<AbortedTxn> = data.chunks_exact(ENTRY).map_while(decode).collect();
    assert_eq!(index.entries(), &expected[..]);
    let whole = expected.len() * ENTRY == data.len();
    assert!(whole || index.quick_check(i64::MIN, i64::MAX).is_err(), "a tail past the entries passed quick_check");
    let mut segments = vec![(0, i64::MAX), (i64::MIN, i64::MIN)];
    if let (Some(first), Some(last)) = (expected.first(), expected.last()) {
        segments.push((first.last_offset, last.last_offset.saturating_add(1)));
        segments.push((first.first_offset, last.last_offset));
    }
    for (base_offset, next_offset) in segments {
        let _ = index.quick_check(base_offset, next_offset);
    }
    let reopened = TransactionIndex::open(&path).expect("reopen");
    assert_eq!(reopened.entries(), &expected[..]);
    drop(reopened);

    for e in &expected {
        assert!(index.contains(e));
    }
    let mut bounds = vec![(i64::MIN, i64::MAX), (0, 0)];
    for e in expected.iter().take(16) {
        bounds.extend([(e.first_offset, e.last_offset), (e.last_offset, e.first_offset), (e.last_stable_offset, e.last_offset)]);
    }
    for &(fetch_offset, upper_bound) in &bounds {
        let got: Vec<AbortedTxn> = index.overlapping(fetch_offset, upper_bound).copied().collect();
        let want: Vec<AbortedTxn> =
            expected.iter().filter(|e| e.last_offset >= fetch_offset && e.first_offset < upper_bound).copied().collect();
        assert_eq!(got, want, "overlapping({fetch_offset}, {upper_bound})");
    }
    let cut = expected.get(expected.len() / 2).map_or(0, |e| e.last_offset);
    index.truncate_to(cut).expect("truncate_to");
    let kept: Vec<AbortedTxn> = expected.iter().filter(|e| e.last_offset < cut).copied().collect();
    assert_eq!(index.entries(), &kept[..]);
    drop(index);
    assert_eq!(TransactionIndex::open(&path).expect("reopen after truncate").entries(), &kept[..]);
});
