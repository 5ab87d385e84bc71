//! The partition log against real files: appends, reads, rolls, reopening
//! after clean and unclean shutdowns, corruption, truncation and retention.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use common::*;
use krabka_log::{LogConfig, LogError, PartitionLog, TimestampPolicy};
use krabka_protocol::compression::{self, Compression};
use krabka_protocol::records::{
    offsets, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatchMut, TimestampType, BATCH_HEADER_BYTES,
    LOG_OVERHEAD_BYTES,
};

const NOW: i64 = 1_700_000_000_000;

fn open(dir: &std::path::Path, config: LogConfig, clean: bool) -> PartitionLog {
    PartitionLog::open(dir, config, 0, 0, clean, NOW).unwrap().0
}

#[test]
fn append_assigns_offsets_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orders-0");
    let mut log = open(&path, LogConfig::default(), true);
    let first = log.append_as_leader(&batch(&values(0..3), NOW, Compression::None), 5, NOW).unwrap();
    assert_eq!((first.first_offset, first.last_offset, first.record_count), (0, 2, 3));
    let two = batches(&[batch(&values(3..5), NOW, Compression::Lz4), batch(&values(5..6), NOW, Compression::Zstd)]);
    let second = log.append_as_leader(&two, 5, NOW).unwrap();
    assert_eq!((second.first_offset, second.last_offset), (3, 5));
    assert_eq!(log.log_end_offset(), 6);
    let records = read_all(&log, 0);
    let offsets: Vec<i64> = records.iter().map(|r| r.0).collect();
    assert_eq!(offsets, (0..6).collect::<Vec<_>>());
    assert_eq!(records.iter().map(|r| r.2.clone()).collect::<Vec<_>>(), values(0..6));
    // The stored batch carries the leader epoch and a valid CRC.
    let slice = log.read(3, 1 << 20, 6, true).unwrap().slice.unwrap();
    let stored = parse_batches(slice.read_to_bytes().unwrap());
    assert_eq!(stored[0].base_offset(), 3);
    assert_eq!(stored[0].partition_leader_epoch(), 5);
    stored[0].validate().unwrap();
    assert_eq!(log.end_offset_for_epoch(5), Some((5, 6)));
}

#[test]
fn segments_roll_and_survive_a_clean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-1");
    let mut log = open(&path, small_segments(), true);
    for i in 0..60 {
        log.append_as_leader(&batch(&values(i * 2..i * 2 + 2), NOW + i, Compression::None), 0, NOW).unwrap();
    }
    assert!(log.segment_count() > 5, "only {} segments", log.segment_count());
    let before = read_all(&log, 0);
    assert_eq!(before.len(), 120);
    log.close(NOW).unwrap();
    // Closed segments' indexes were trimmed to their entries.
    for entry in std::fs::read_dir(&path).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "index") {
            assert_eq!(std::fs::metadata(&path).unwrap().len() % 8, 0);
            assert!(std::fs::metadata(&path).unwrap().len() < 4096, "{path:?} not trimmed");
        }
    }
    let (log, report) = PartitionLog::open(&path, small_segments(), 0, 120, true, NOW).unwrap();
    assert_eq!(report.recovered_segments, 0);
    assert_eq!(log.log_end_offset(), 120);
    assert_eq!(read_all(&log, 0), before);
    assert_eq!(read_all(&log, 77)[0].0, 77);
}

/// A log of ten one-record batches left without a close, as a crash leaves it.
fn crashed_after_ten_batches(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("t-0");
    let mut log = open(&path, LogConfig::default(), true);
    for i in 0..10 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW, Compression::None), 0, NOW).unwrap();
    }
    drop(log);
    path
}

#[test]
fn unclean_reopen_truncates_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = crashed_after_ten_batches(dir.path());
    let segment = path.join("00000000000000000000.log");
    let file = OpenOptions::new().write(true).open(&segment).unwrap();
    let size = file.metadata().unwrap().len();
    file.set_len(size - 5).unwrap(); // torn last batch
    let (log, report) = PartitionLog::open(&path, LogConfig::default(), 0, 0, false, NOW).unwrap();
    assert_eq!(report.recovered_segments, 1);
    assert!(report.truncated_bytes > 0);
    assert_eq!(log.log_end_offset(), 9);
    assert_eq!(read_all(&log, 0).len(), 9);
}

#[test]
fn an_unclean_open_keeps_the_recovery_point_until_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let path = crashed_after_ten_batches(dir.path());
    let (log, report) = PartitionLog::open(&path, LogConfig::default(), 0, 0, false, NOW).unwrap();
    assert_eq!((report.recovered_segments, log.log_end_offset()), (1, 10));
    // Recovery read the tail from the page cache, which a power loss can
    // still take: only a flush may move the recovery point past it.
    assert_eq!(log.recovery_point(), 0);
    drop(log);
    let (mut log, report) = PartitionLog::open(&path, LogConfig::default(), 0, 0, false, NOW).unwrap();
    assert_eq!(report.recovered_segments, 1, "a second crash before a flush re-checks the tail");
    log.flush(NOW).unwrap();
    assert_eq!(log.recovery_point(), 10);
}

#[test]
fn a_corrupt_byte_truncates_there_and_drops_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = open(&path, small_segments(), true);
    for i in 0..40 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW, Compression::None), 0, NOW).unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3);
    drop(log);
    // Flip a byte inside the second batch of the second segment.
    let second = path.join(format!("{:020}.log", bases[1]));
    let file = OpenOptions::new().read(true).write(true).open(&second).unwrap();
    let mut header = [0u8; 12];
    file.read_exact_at(&mut header, 0).unwrap();
    let first_size = 12 + i32::from_be_bytes(header[8..12].try_into().unwrap()) as u64;
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, first_size + 70).unwrap();
    file.write_all_at(&[byte[0] ^ 0xff], first_size + 70).unwrap();
    let (log, report) = PartitionLog::open(&path, small_segments(), 0, 0, false, NOW).unwrap();
    assert!(report.truncated_bytes > 0);
    assert_eq!(log.log_end_offset(), bases[1] + 1);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(read_all(&log, 0).len() as i64, bases[1] + 1);
    assert!(!path.join(format!("{:020}.log", bases[2])).exists());
}

#[test]
fn a_corrupt_index_is_rebuilt_even_after_a_clean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = open(&path, small_segments(), true);
    for i in 0..30 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW, Compression::None), 0, NOW).unwrap();
    }
    let before = read_all(&log, 0);
    log.close(NOW).unwrap();
    std::fs::write(path.join("00000000000000000000.index"), [0xffu8; 16]).unwrap();
    let (log, report) = PartitionLog::open(&path, small_segments(), 0, 30, true, NOW).unwrap();
    assert_eq!(report.recovered_segments, 1);
    assert_eq!(read_all(&log, 0), before);
}

/// (offset, timestamp, value) of every record, as `read_all` returns them.
type Records = Vec<(i64, i64, String)>;
/// (relative offset, position) of every `.index` entry.
type IndexEntries = Vec<(u32, u32)>;

/// One segment of 30 one-record batches with an index entry every ~100
/// bytes, closed cleanly; returns the log dir, what it holds and the index.
fn indexed_segment(dir: &std::path::Path) -> (std::path::PathBuf, Records, IndexEntries) {
    let path = dir.join("t-0");
    let config = LogConfig { index_interval_bytes: 100, ..LogConfig::default() };
    let mut log = open(&path, config, true);
    for i in 0..30 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW, Compression::None), 0, NOW).unwrap();
    }
    let records = read_all(&log, 0);
    log.close(NOW).unwrap();
    let raw = std::fs::read(path.join("00000000000000000000.index")).unwrap();
    let entries: Vec<(u32, u32)> = raw
        .chunks_exact(8)
        .map(|e| (u32::from_be_bytes(e[..4].try_into().unwrap()), u32::from_be_bytes(e[4..].try_into().unwrap())))
        .collect();
    assert!(entries.len() >= 8, "too few index entries: {entries:?}");
    (path, records, entries)
}

fn write_index_entry(path: &std::path::Path, i: usize, (relative, position): (u32, u32)) {
    let file = OpenOptions::new().write(true).open(path.join("00000000000000000000.index")).unwrap();
    let mut raw = [0u8; 8];
    raw[..4].copy_from_slice(&relative.to_be_bytes());
    raw[4..].copy_from_slice(&position.to_be_bytes());
    file.write_all_at(&raw, (i * 8) as u64).unwrap();
}

#[test]
fn a_last_index_entry_that_misleads_is_caught_on_a_clean_open() {
    let config = || LogConfig { index_interval_bytes: 100, ..LogConfig::default() };
    // Pointing into the middle of a batch, at a later batch than its offset's,
    // and with a relative offset Kafka could not store: each sends the
    // segment to recovery instead of yielding a wrong log end (or a panic on
    // the next indexed append).
    for (name, corrupt) in [
        (
            "mid-batch",
            (|(r, p): (u32, u32), _: &[(u32, u32)]| (r, p + 7)) as fn((u32, u32), &[(u32, u32)]) -> (u32, u32),
        ),
        ("later batch", |(r, _), all| (r - 2, all[all.len() - 1].1)),
        ("huge offset", |(_, p), _| (u32::MAX - 3, p)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (path, records, entries) = indexed_segment(dir.path());
        let last = entries.len() - 1;
        write_index_entry(&path, last, corrupt(entries[last], &entries));
        let (mut log, report) = PartitionLog::open(&path, config(), 0, 30, true, NOW).unwrap();
        assert_eq!(report.recovered_segments, 1, "{name}");
        assert_eq!(log.log_end_offset(), 30, "{name}");
        assert_eq!(read_all(&log, 0), records, "{name}");
        log.append_as_leader(&batch(&values(30..31), NOW, Compression::None), 0, NOW).unwrap();
        log.verify_indexes().unwrap();
    }
}

#[test]
fn a_middle_index_entry_that_misleads_never_makes_a_read_skip_records() {
    let dir = tempfile::tempdir().unwrap();
    let (path, records, entries) = indexed_segment(dir.path());
    // Entry 2 points at entry 4's batch (later offsets), entry 5 mid-batch.
    write_index_entry(&path, 2, (entries[2].0, entries[4].1));
    write_index_entry(&path, 5, (entries[5].0, entries[5].1 + 5));
    let config = LogConfig { index_interval_bytes: 100, ..LogConfig::default() };
    let (log, _) = PartitionLog::open(&path, config, 0, 30, true, NOW).unwrap();
    // The full check (the crash test's) sees what the O(1) open check cannot.
    assert!(log.verify_indexes().is_err());
    for from in [i64::from(entries[2].0), i64::from(entries[5].0), i64::from(entries[5].0) + 1] {
        let expected: Vec<_> = records.iter().filter(|r| r.0 >= from).cloned().collect();
        assert_eq!(read_all(&log, from), expected, "reading from offset {from}");
    }
}

#[test]
fn a_follower_batch_past_what_the_segment_can_index_rolls_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("t-0"), LogConfig::default(), true);
    let far = 1i64 << 40;
    let mut far_batch = batch(&values(0..3), NOW, Compression::None).to_vec();
    // The base offset is outside the CRC's range: patch it in place.
    far_batch[..8].copy_from_slice(&far.to_be_bytes());
    log.append_as_follower(&bytes::Bytes::from(far_batch), NOW).unwrap();
    assert_eq!(log.log_end_offset(), far + 3);
    assert_eq!(log.segment_base_offsets(), vec![0, far]);
    assert_eq!(read_all(&log, far).len(), 3);
}

#[test]
fn recovery_restores_leader_epochs_a_lost_checkpoint_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = open(&path, LogConfig::default(), true);
    log.append_as_leader(&batch(&values(0..2), NOW, Compression::None), 3, NOW).unwrap();
    log.append_as_leader(&batch(&values(2..4), NOW, Compression::None), 5, NOW).unwrap();
    drop(log); // no close: as after a crash
    std::fs::remove_file(path.join("leader-epoch-checkpoint")).unwrap();
    let (log, _) = PartitionLog::open(&path, LogConfig::default(), 0, 0, false, NOW).unwrap();
    let epochs: Vec<(i32, i64)> = log.leader_epochs().entries().iter().map(|e| (e.epoch, e.start_offset)).collect();
    assert_eq!(epochs, vec![(3, 0), (5, 2)]);
    assert_eq!(log.end_offset_for_epoch(3), Some((3, 2)));
    assert_eq!(log.end_offset_for_epoch(5), Some((5, 4)));
}

#[test]
fn reads_stop_at_the_upper_bound_and_return_one_batch_at_least() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("t-0"), LogConfig::default(), true);
    for i in 0..5 {
        log.append_as_leader(&batch(&values(i * 10..i * 10 + 10), NOW, Compression::None), 0, NOW).unwrap();
    }
    // High watermark 20: only the first two batches are visible.
    let slice = log.read(0, 1 << 20, 20, true).unwrap().slice.unwrap();
    let visible = parse_batches(slice.read_to_bytes().unwrap());
    assert_eq!(visible.last().unwrap().next_offset(), 20);
    assert!(log.read(20, 1 << 20, 20, true).unwrap().slice.is_none());
    // KIP-74: max_bytes of 1 still yields the whole first batch.
    let slice = log.read(10, 1, 50, true).unwrap().slice.unwrap();
    let one = parse_batches(slice.read_to_bytes().unwrap());
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].base_offset(), 10);
    assert!(log.read(10, 1, 50, false).unwrap().slice.is_some_and(|s| s.length == 1));
    assert!(matches!(log.read(51, 100, 50, true), Err(LogError::OffsetOutOfRange { .. })));
}

#[test]
fn timestamp_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("t-0"), small_segments(), true);
    for i in 0..50i64 {
        log.append_as_leader(&batch(&values(i..i + 1), 1000 + i * 10, Compression::Gzip), 0, NOW).unwrap();
    }
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((1000, 0)));
    assert_eq!(log.offset_for_timestamp(1255).unwrap(), Some((1260, 26)));
    assert_eq!(log.offset_for_timestamp(1490).unwrap(), Some((1490, 49)));
    assert_eq!(log.offset_for_timestamp(1491).unwrap(), None);
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((1490, 49)));
}

#[test]
fn log_append_time_restamps_and_keeps_the_crc_valid() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { timestamp_policy: TimestampPolicy::LogAppendTime, ..LogConfig::default() };
    let mut log = open(&dir.path().join("t-0"), config, true);
    let info = log.append_as_leader(&batch(&values(0..3), 5, Compression::Snappy), 0, NOW).unwrap();
    assert_eq!(info.log_append_time_ms, NOW);
    let slice = log.read(0, 1 << 20, 3, true).unwrap().slice.unwrap();
    let stored = parse_batches(slice.read_to_bytes().unwrap());
    stored[0].validate().unwrap();
    assert_eq!(stored[0].max_timestamp(), NOW);
    assert!(read_all(&log, 0).iter().all(|r| r.1 == NOW));
}

#[test]
fn bad_batches_are_refused_and_leave_the_log_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("t-0"), LogConfig { max_message_bytes: 200, ..LogConfig::default() }, true);
    let good = batch(&values(0..1), NOW, Compression::None);
    let mut corrupt = good.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    assert!(matches!(log.append_as_leader(&corrupt.into(), 0, NOW), Err(LogError::InvalidBatch(_))));
    let large = batch(&[String::from_utf8(vec![b'x'; 300]).unwrap()], NOW, Compression::None);
    assert!(matches!(log.append_as_leader(&large, 0, NOW), Err(LogError::RecordTooLarge { .. })));
    // A good batch followed by a torn one: nothing of the request is written.
    let torn = batches(&[good.clone(), good.slice(..20)]);
    assert!(log.append_as_leader(&torn, 0, NOW).is_err());
    assert_eq!(log.log_end_offset(), 0);
    log.append_as_leader(&good, 0, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn truncation_for_replication() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = open(&path, small_segments(), true);
    for i in 0..40 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW, Compression::None), (i / 10) as i32, NOW).unwrap();
    }
    log.truncate_to(25, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 25);
    assert_eq!(read_all(&log, 0).len(), 25);
    assert_eq!(log.leader_epochs().latest_epoch(), Some(2));
    log.append_as_leader(&batch(&values(25..26), NOW, Compression::None), 7, NOW).unwrap();
    assert_eq!(read_all(&log, 0).last().unwrap().0, 25);
    log.truncate_fully_and_start_at(1000, NOW).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (1000, 1000));
    assert_eq!(log.segment_count(), 1);
    let follower_batch = {
        let bytes = batch(&values(0..2), NOW, Compression::None).to_vec();
        let mut bytes = bytes;
        bytes[..8].copy_from_slice(&1000i64.to_be_bytes());
        bytes
    };
    log.append_as_follower(&follower_batch.into(), NOW).unwrap();
    assert_eq!(log.log_end_offset(), 1002);
}

/// A broker that led without appending anything (its epoch starts at its
/// log end) and then follows: truncating to its end drops that epoch, so
/// its next fetch names the epoch its records carry.
#[test]
fn truncating_to_the_end_drops_an_epoch_that_holds_no_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("t-0"), small_segments(), true);
    for i in 0..5 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW, Compression::None), 2, NOW).unwrap();
    }
    log.assign_leader_epoch(3).unwrap();
    assert_eq!(log.leader_epochs().latest_epoch(), Some(3));
    assert_eq!(log.truncate_to(5, NOW).unwrap(), 0);
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.leader_epochs().latest_epoch(), Some(2), "epoch 3 held nothing");
    assert_eq!(log.end_offset_for_epoch(2), Some((2, 5)));
}

#[test]
fn retention_by_bytes_time_and_delete_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let config = LogConfig { retention_bytes: 4096, retention_ms: -1, ..small_segments() };
    let mut log = open(&path, config, true);
    for i in 0..60 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW - 10_000 + i, Compression::None), 0, NOW).unwrap();
    }
    let deleted = log.enforce_retention(NOW).unwrap();
    assert!(deleted > 0);
    assert!(log.size_bytes() <= 4096 + 512, "{} bytes kept", log.size_bytes());
    assert!(log.log_start_offset() > 0);
    assert_eq!(read_all(&log, log.log_start_offset()).last().unwrap().0, 59);
    log.delete_pending_files().unwrap();
    assert!(std::fs::read_dir(&path).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".deleted")));

    log.delete_records_before(55, NOW).unwrap();
    assert_eq!(log.log_start_offset(), 55);
    assert!(matches!(log.read(54, 100, 60, true), Err(LogError::OffsetOutOfRange { .. })));

    // Time retention: every record is older than 1 s, so all data goes and
    // one empty segment remains at the log end.
    let mut config = log.config().clone();
    config.retention_ms = 1000;
    log.set_config(config);
    log.enforce_retention(NOW).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.segment_count()), (60, 60, 1));
}

#[test]
fn a_roll_flushes_the_old_segment_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("t-0"), LogConfig::default(), true);
    log.append_as_leader(&batch(&values(0..5), NOW, Compression::None), 0, NOW).unwrap();
    log.append_as_leader(&batch(&values(5..10), NOW, Compression::None), 0, NOW).unwrap();
    assert_eq!(log.recovery_point(), 0);
    log.roll(10, NOW).unwrap();
    log.append_as_leader(&batch(&values(10..12), NOW, Compression::None), 0, NOW).unwrap();
    // The roll returned before the fsync; the recovery point follows it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while log.recovery_point() < 10 {
        assert!(std::time::Instant::now() < deadline, "the rolled segment was never flushed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(log.recovery_point(), 10, "only the rolled segment");
    // Truncation below it lowers it, whatever a late flush reports.
    log.truncate_to(5, NOW).unwrap();
    assert_eq!(log.recovery_point(), 5);
    log.flush(NOW).unwrap();
    assert_eq!(log.recovery_point(), 5);
}

#[test]
fn segment_ms_rolls_only_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_ms: 1000, ..LogConfig::default() };
    let mut log = open(&dir.path().join("t-0"), config, true);
    // Kafka's clock for segment.ms: the first batch's timestamp.
    for (i, timestamp) in [NOW, NOW + 1000, NOW + 1001, NOW + 2001, NOW + 2002].into_iter().enumerate() {
        log.append_as_leader(&batch(&values(i as i64..i as i64 + 1), timestamp, Compression::None), 0, NOW).unwrap();
    }
    // Exactly segment.ms later stays; one millisecond more rolls (at offset 2,
    // whose segment then rolls at 2002 - 1001 = 1001 ms, offset 4).
    assert_eq!(log.segment_base_offsets(), vec![0, 2, 4]);
}

#[test]
fn a_full_index_rolls_the_segment() {
    let dir = tempfile::tempdir().unwrap();
    // Room for three offset entries and two time entries; an entry per batch
    // after the first.
    let config = LogConfig { segment_index_bytes: 24, index_interval_bytes: 0, ..LogConfig::default() };
    let mut log = open(&dir.path().join("t-0"), config.clone(), true);
    for i in 0..9 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW + i, Compression::None), 0, NOW).unwrap();
    }
    // The time index (12-byte entries) fills first: two entries, three batches.
    assert_eq!(log.segment_base_offsets(), vec![0, 3, 6]);
    log.verify_indexes().unwrap();
    assert_eq!(read_all(&log, 0).len(), 9);
}

#[test]
fn flush_messages_and_flush_ms_flush_at_their_limits() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { flush_messages: 3, ..LogConfig::default() };
    let mut log = open(&dir.path().join("by-count"), config, true);
    for i in 0..2 {
        log.append_as_leader(&batch(&values(i..i + 1), NOW, Compression::None), 0, NOW).unwrap();
    }
    assert_eq!(log.recovery_point(), 0, "two of three messages: no flush yet");
    log.append_as_leader(&batch(&values(2..3), NOW, Compression::None), 0, NOW).unwrap();
    assert_eq!(log.recovery_point(), 3, "the third message flushes");

    let config = LogConfig { flush_ms: 1000, ..LogConfig::default() };
    let mut log = open(&dir.path().join("by-time"), config, true);
    log.append_as_leader(&batch(&values(0..1), NOW, Compression::None), 0, NOW).unwrap();
    log.maybe_flush_on_time(NOW + 999).unwrap();
    assert_eq!(log.recovery_point(), 0, "999 ms after the last flush");
    log.maybe_flush_on_time(NOW + 1000).unwrap();
    assert_eq!(log.recovery_point(), 1, "flush.ms after the last flush");
}

/// Bytes of disk behind a file (its allocated blocks), not its length.
fn allocated_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn recovery_rebuilds_a_preallocated_index_without_writing_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = crashed_after_ten_batches(dir.path());
    let index = path.join("00000000000000000000.index");
    let time_index = path.join("00000000000000000000.timeindex");
    // The crash left the active segment's indexes at their preallocated
    // length (segment.index.bytes, 10 MiB), sparse on disk.
    assert_eq!(std::fs::metadata(&index).unwrap().len(), LogConfig::default().segment_index_bytes as u64);
    let (mut log, report) = PartitionLog::open(&path, LogConfig::default(), 0, 0, false, NOW).unwrap();
    assert_eq!((report.recovered_segments, log.log_end_offset()), (1, 10));
    log.flush(NOW).unwrap();
    // Clearing them through the mapping would have dirtied (and written)
    // every page: 20 MiB per partition, minutes for a few hundred.
    for file in [&index, &time_index] {
        assert!(allocated_bytes(file) <= 64 * 1024, "{} has {} bytes on disk", file.display(), allocated_bytes(file));
    }
    assert_eq!(read_all(&log, 0).len(), 10);
    log.append_as_leader(&batch(&values(10..11), NOW, Compression::None), 0, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 11);
    log.verify_indexes().unwrap();
}

/// Kafka's LogValidator reads every record of a leader append: on a
/// CreateTime topic each timestamp must lie within
/// `message.timestamp.before.max.ms` / `after.max.ms` of the leader's clock
/// (bounds included); one outside refuses the whole batch and every such
/// record is named.
#[test]
fn timestamps_outside_the_window_refuse_the_batch_and_name_each_record() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { timestamp_before_max_ms: 1_000, timestamp_after_max_ms: 2_000, ..LogConfig::default() };
    let mut log = open(&dir.path().join("t-0"), config, true);
    let stamped = |timestamps: &[i64]| {
        let mut builder = RecordBatchBuilder::new(Compression::Zstd);
        for &timestamp_ms in timestamps {
            builder.append(&NewRecord { timestamp_ms, key: None, value: Some(b"v"), headers: &[] }).unwrap();
        }
        builder.build().unwrap().into_bytes()
    };
    let refused = log.append_as_leader(&stamped(&[NOW - 1_001, NOW, NOW + 2_001, NOW]), 0, NOW).unwrap_err();
    let LogError::RecordsRefused { invalid_timestamp: true, record_errors, .. } = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(record_errors.iter().map(|e| e.index).collect::<Vec<_>>(), vec![0, 2]);
    assert!(record_errors[1].message.contains(&format!("[{}, {}]", NOW - 1_000, NOW + 2_000)), "{record_errors:?}");
    assert_eq!(log.log_end_offset(), 0);
    // At the bounds, and without a timestamp: accepted; the stored batch's
    // max timestamp is its latest record's whatever the producer wrote.
    let at_bounds = stamped(&[NOW + 2_000, NOW - 1_000, -1]);
    let mut claimed = at_bounds.to_vec();
    RecordBatchMut::new(&mut claimed).unwrap().set_max_timestamp(NOW - 5);
    log.append_as_leader(&claimed.into(), 0, NOW).unwrap();
    let stored = parse_batches(log.read(0, 1 << 20, 3, true).unwrap().slice.unwrap().read_to_bytes().unwrap());
    stored[0].validate().unwrap();
    assert_eq!((stored[0].max_timestamp(), stored[0].timestamp_type()), (NOW + 2_000, TimestampType::CreateTime));
}

/// Only a broker stamps LogAppendTime: a producer's batch claiming it is
/// refused on a LogAppendTime topic (INVALID_TIMESTAMP), as in Kafka.
#[test]
fn a_producer_claiming_log_append_time_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { timestamp_policy: TimestampPolicy::LogAppendTime, ..LogConfig::default() };
    let mut log = open(&dir.path().join("t-0"), config, true);
    let mut builder = RecordBatchBuilder::new(Compression::None).with_log_append_time(NOW);
    builder.append(&NewRecord { timestamp_ms: NOW, key: None, value: Some(b"v"), headers: &[] }).unwrap();
    let refused = log.append_as_leader(&builder.build().unwrap().into_bytes(), 0, NOW).unwrap_err();
    assert!(matches!(refused, LogError::RecordsRefused { invalid_timestamp: true, .. }), "{refused:?}");
    // Far-off CreateTime timestamps are no concern of a LogAppendTime topic.
    log.append_as_leader(&batch(&values(0..1), NOW + 10 * 3_600_000, Compression::None), 0, NOW).unwrap();
}

/// A compressed batch whose records' offset deltas are not 0, 1, 2 (older
/// clients wrote them so) is rewritten with the right ones, as Kafka does,
/// rather than refused or stored with offsets a consumer would misread.
#[test]
fn a_compressed_batch_with_wrong_inner_offsets_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("t-0"), LogConfig::default(), true);
    let plain = RecordBatch::new(batch(&values(0..3), NOW, Compression::None)).unwrap();
    // Every record is the same size: length, attributes, timestamp delta (0),
    // then the offset delta, set to 0 in all three.
    let mut records = plain.as_bytes()[BATCH_HEADER_BYTES..].to_vec();
    let record_bytes = records.len() / 3;
    for i in 0..3 {
        records[i * record_bytes + 3] = 0;
    }
    let mut compressed = Vec::new();
    compression::compress(Compression::Lz4, &records, &mut compressed).unwrap();
    let mut bytes = plain.as_bytes()[..BATCH_HEADER_BYTES].to_vec();
    bytes.extend_from_slice(&compressed);
    let batch_length = (bytes.len() - LOG_OVERHEAD_BYTES) as i32;
    bytes[offsets::BATCH_LENGTH..offsets::BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    bytes[offsets::ATTRIBUTES + 1] |= 3; // LZ4
    RecordBatchMut::new(&mut bytes).unwrap().update_crc();
    let info = log.append_as_leader(&bytes.into(), 0, NOW).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 2));
    let offsets_read: Vec<(i64, String)> = read_all(&log, 0).into_iter().map(|(o, _, v)| (o, v)).collect();
    assert_eq!(offsets_read, vec![(0, "value-0".into()), (1, "value-1".into()), (2, "value-2".into())]);
    let stored = parse_batches(log.read(0, 1 << 20, 3, true).unwrap().slice.unwrap().read_to_bytes().unwrap());
    assert_eq!(stored[0].compression().unwrap(), Compression::Lz4);
}
