//! `LeaderEpochCache::load` over a fuzzed `leader-epoch-checkpoint`.
//!
//! Input: the file.
//!
//! Checks, besides never panicking: the loaded entries are strictly
//! increasing in epoch and never decrease in start offset (the load keeps
//! only such a sequence, as Kafka does); `latest_epoch` is the last entry's;
//! `end_offset_for` of epochs around each entry answers an epoch not above
//! the one asked, ending at the log end or at an entry's start.
#![no_main]

use krabka_log::leader_epoch::LeaderEpochCache;
use krabka_protocol_fuzz::scratch;
use libfuzzer_sys::fuzz_target;

const LOG_END: i64 = 1 << 40;

fuzz_target!(|data: &[u8]| {
    let dir = scratch::subdir("leader_epoch");
    std::fs::write(dir.join("leader-epoch-checkpoint"), data).expect("write the checkpoint");
    let Ok(cache) = LeaderEpochCache::load(&dir) else { return };
    let entries = cache.entries();
    for pair in entries.windows(2) {
        assert!(pair[0].epoch < pair[1].epoch, "epochs not increasing: {entries:?}");
        assert!(pair[0].start_offset <= pair[1].start_offset, "start offsets decrease: {entries:?}");
    }
    assert_eq!(cache.latest_epoch(), entries.last().map(|e| e.epoch));
    let mut asked: Vec<i32> = vec![i32::MIN, -1, 0, i32::MAX];
    for e in entries.iter().take(16) {
        asked.extend([e.epoch.saturating_sub(1), e.epoch, e.epoch.saturating_add(1)]);
    }
    for requested in asked {
        // Only what holds for any OffsetForLeaderEpoch rule: the answer's
        // epoch is not above the one asked, and its end is the log end or
        // an entry's start.
        if let Some((epoch, end)) = cache.end_offset_for(requested, LOG_END) {
            assert!(epoch <= requested, "end_offset_for({requested}) answered epoch {epoch}");
            assert!(
                end == LOG_END || entries.iter().any(|e| e.start_offset == end),
                "end_offset_for({requested}) answered end {end}"
            );
        }
    }
});
