//! The producer-state snapshot (`<offset>.snapshot`, Kafka's version 1):
//! `ProducerStateManager::read_snapshot` and `load_latest_snapshot`.
//!
//! Input: byte 0 is flags, the rest the file. Bit 0 recomputes the CRC-32C
//! (bytes 2-5, over byte 6 on) so mutations get past it; bit 1 also sets the
//! entry count (bytes 6-9) from the length, so the entries are parsed; bits
//! 2-3 pick the snapshot's offset in its file name (0, 1000, 2^40,
//! i64::MAX). Without bit 0 the CRC is as the input has it.
//!
//! Checks, besides never panicking: a snapshot that reads is exactly
//! 10 + 46 * count bytes; `load_latest_snapshot` (limit i64::MAX) takes it,
//! returns its offset and holds one producer per distinct id, the last one
//! read for each; `first_unstable_offset` is the smallest open transaction
//! start among them; `check` of each producer's next batch in sequence
//! returns.
#![no_main]

use std::collections::HashMap;

use krabka_log::producer_state::{increment_sequence, ProducerBatch, ProducerEntry, ProducerStateManager};
use krabka_protocol::records::crc32c;
use krabka_protocol_fuzz::scratch;
use libfuzzer_sys::fuzz_target;

const FIX_CRC: u8 = 1;
const FIX_COUNT: u8 = 2;
const ENTRY: usize = 46;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, file)) = data.split_first() else { return };
    let mut file = file.to_vec();
    if file.len() >= 10 {
        if flags & FIX_COUNT != 0 {
            let count = ((file.len() - 10) / ENTRY) as i32;
            file[6..10].copy_from_slice(&count.to_be_bytes());
        }
        if flags & (FIX_CRC | FIX_COUNT) != 0 {
            let crc = crc32c(&file[6..]);
            file[2..6].copy_from_slice(&crc.to_be_bytes());
        }
    }
    let offset: i64 = match (flags >> 2) & 3 {
        0 => 0,
        1 => 1000,
        2 => 1 << 40,
        _ => i64::MAX,
    };
    let dir = scratch::fresh_subdir("producer_snapshot");
    let path = dir.join(format!("{offset:020}.snapshot"));
    std::fs::write(&path, &file).expect("write the snapshot");

    let Ok(entries) = ProducerStateManager::read_snapshot(&path) else { return };
    assert_eq!(file.len(), 10 + entries.len() * ENTRY);
    for e in &entries {
        let _ = e.last_seq();
    }

    let mut state = ProducerStateManager::new(&dir);
    let loaded = state.load_latest_snapshot(0, i64::MAX).expect("load a snapshot that reads");
    assert_eq!(loaded, offset);
    assert_eq!(state.map_end_offset(), offset);
    let mut last: HashMap<i64, &ProducerEntry> = HashMap::new();
    for e in &entries {
        last.insert(e.producer_id, e);
    }
    assert_eq!(state.producers().len(), last.len());
    for (id, e) in &last {
        assert_eq!(state.producers().get(id), Some(*e));
    }
    let smallest = entries.iter().filter_map(|e| e.current_txn_first_offset).min();
    assert_eq!(state.first_unstable_offset(), smallest);

    for e in last.values().take(8) {
        let next_offset = e.batches.back().map_or(offset, |b| b.last_offset.saturating_add(1));
        let first_seq = increment_sequence(e.last_seq(), 1);
        let batch = ProducerBatch {
            producer_id: e.producer_id,
            epoch: e.epoch,
            first_seq,
            last_seq: increment_sequence(first_seq, 0),
            first_offset: next_offset,
            last_offset: next_offset,
            max_timestamp: e.last_timestamp,
            transactional: e.current_txn_first_offset.is_some(),
            marker: None,
            empty_control: false,
        };
        let _ = state.check(&batch);
    }
});
