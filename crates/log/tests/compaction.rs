//! Log compaction (`cleanup.policy=compact`) on real files.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use krabka_log::{CleanupPolicy, LogConfig, LogError, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatch, RecordBatchBuilder, RecordBatches};

use common::marker_batch;

const NOW: i64 = 1_700_000_000_000;

fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 100,
        segment_index_bytes: 4096,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig, clean: bool) -> PartitionLog {
    PartitionLog::open(dir, config, 0, 0, clean, NOW).unwrap().0
}

/// One batch of (key, value) records; `None` value is a tombstone.
fn keyed(records: &[(&str, Option<&str>)], timestamp_ms: i64, compression: Compression) -> Bytes {
    let mut builder = RecordBatchBuilder::new(compression);
    for (key, value) in records {
        builder
            .append(&NewRecord {
                timestamp_ms,
                key: Some(key.as_bytes()),
                value: value.map(str::as_bytes),
                headers: &[],
            })
            .unwrap();
    }
    builder.build().unwrap().into_bytes()
}

type Row = (i64, String, Option<String>);

/// Every record as (offset, key, value), checking offsets increase.
fn read_keyed(log: &PartitionLog) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let info = log.read(offset, 64 * 1024, end, true).unwrap();
        let Some(slice) = info.slice else { break };
        for batch in RecordBatches::new(slice.read_to_bytes().unwrap()) {
            let batch = batch.unwrap();
            batch.validate().unwrap();
            for record in batch.records(1 << 24).unwrap() {
                let record = record.unwrap();
                if record.offset < offset {
                    continue;
                }
                if let Some(last) = out.last() {
                    assert!(record.offset > last.0, "offsets must increase");
                }
                let key = String::from_utf8(record.key.unwrap().to_vec()).unwrap();
                let value = record.value.map(|v| String::from_utf8(v.to_vec()).unwrap());
                out.push((record.offset, key, value));
            }
            offset = batch.next_offset();
        }
    }
    out
}

/// The latest (offset, value) per key.
fn latest(rows: &[Row]) -> BTreeMap<String, (i64, Option<String>)> {
    rows.iter().map(|(o, k, v)| (k.clone(), (*o, v.clone()))).collect()
}

/// Appends `rounds` batches, each overwriting keys k0..k{keys} once.
fn fill(log: &mut PartitionLog, keys: usize, rounds: usize, compression: Compression) {
    for round in 0..rounds {
        let values: Vec<(String, String)> = (0..keys).map(|k| (format!("k{k}"), format!("v{round}-{k}"))).collect();
        let records: Vec<(&str, Option<&str>)> = values.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))).collect();
        log.append_as_leader(&keyed(&records, NOW, compression), 0, NOW).unwrap();
    }
}

/// Deletes the producer snapshots, so an open rebuilds producer state from the log.
fn remove_producer_snapshots(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
}

fn roll(log: &mut PartitionLog) {
    let end = log.log_end_offset();
    log.roll(end, NOW).unwrap();
}

#[test]
fn keeps_the_latest_value_per_key_with_original_offsets() {
    for compression in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), compact_config(), true);
        fill(&mut log, 5, 40, compression);
        roll(&mut log);
        let before = read_keyed(&log);
        let expected: Vec<Row> = {
            let mut rows: Vec<Row> = latest(&before).into_iter().map(|(k, (o, v))| (o, k, v)).collect();
            rows.sort();
            rows
        };
        let segments = log.segment_count();
        let size = log.size_bytes();
        let end = log.log_end_offset();
        let report = log.clean(NOW, end).unwrap();
        assert!(report.cleaned, "{report:?}");
        assert_eq!(report.checkpoint, end);
        assert_eq!(log.cleaner_checkpoint(), end);
        assert_eq!(read_keyed(&log), expected);
        assert_eq!(log.segment_count(), segments);
        assert!(log.size_bytes() < size / 4, "{} vs {size}", log.size_bytes());
        assert_eq!(log.log_end_offset(), end);
        log.verify_indexes().unwrap();
        // Appends continue after the cleaned range, offsets unchanged.
        fill(&mut log, 1, 1, compression);
        assert_eq!(log.log_end_offset(), end + 1);
        // Lookups still work on cleaned segments.
        assert!(log.offset_for_timestamp(NOW).unwrap().is_some());
        // No leftovers.
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.ends_with(".cleaned") && !name.ends_with(".swap") && !name.ends_with(".deleted"), "{name}");
        }
    }
}

#[test]
fn reopen_after_clean_reads_the_same() {
    for clean_shutdown in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), compact_config(), true);
        fill(&mut log, 4, 30, Compression::None);
        roll(&mut log);
        let end = log.log_end_offset();
        log.clean(NOW, end).unwrap();
        let rows = read_keyed(&log);
        if clean_shutdown {
            log.close(NOW).unwrap();
        } else {
            drop(log);
        }
        let log = open(dir.path(), compact_config(), clean_shutdown);
        assert_eq!(read_keyed(&log), rows);
        assert_eq!(log.log_end_offset(), end);
        log.verify_indexes().unwrap();
    }
}

#[test]
fn tombstones_are_kept_for_delete_retention_ms() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { delete_retention_ms: 10_000, ..compact_config() };
    let mut log = open(dir.path(), config, true);
    fill(&mut log, 3, 10, Compression::None);
    log.append_as_leader(&keyed(&[("k1", None)], NOW, Compression::None), 0, NOW).unwrap();
    roll(&mut log);
    let end = log.log_end_offset();
    assert!(log.clean(NOW + 5_000, end).unwrap().cleaned);
    let rows = read_keyed(&log);
    assert_eq!(rows.len(), 3);
    assert!(rows.contains(&(end - 1, "k1".to_string(), None)), "{rows:?}");
    // New dirty data, and past delete.retention.ms: the tombstone goes.
    fill(&mut log, 1, 3, Compression::None);
    roll(&mut log);
    let end = log.log_end_offset();
    assert!(log.clean(NOW + 20_000, end).unwrap().cleaned);
    let rows = read_keyed(&log);
    let keys: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(keys, ["k2", "k0"], "{rows:?}");
    log.verify_indexes().unwrap();
}

#[test]
fn active_segment_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig { segment_bytes: 1 << 20, ..compact_config() }, true);
    fill(&mut log, 3, 20, Compression::None);
    assert_eq!(log.segment_count(), 1);
    let before = read_keyed(&log);
    let end = log.log_end_offset();
    let report = log.clean(NOW, end).unwrap();
    assert!(!report.cleaned);
    assert_eq!(read_keyed(&log), before);
    // With several segments, the active one keeps its duplicates.
    roll(&mut log);
    fill(&mut log, 3, 5, Compression::None);
    let end = log.log_end_offset();
    assert!(log.clean(NOW, end).unwrap().cleaned);
    let rows = read_keyed(&log);
    assert_eq!(rows.len(), 3 + 15, "{rows:?}");
}

#[test]
fn min_compaction_lag_is_respected() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig { min_compaction_lag_ms: 60_000, ..compact_config() }, true);
    fill(&mut log, 3, 20, Compression::None);
    roll(&mut log);
    let before = read_keyed(&log);
    let end = log.log_end_offset();
    assert!(!log.clean(NOW + 1_000, end).unwrap().cleaned);
    assert_eq!(read_keyed(&log), before);
    assert!(log.clean(NOW + 61_000, end).unwrap().cleaned);
    assert_eq!(read_keyed(&log).len(), 3);
}

#[test]
fn low_dirty_ratio_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig { min_cleanable_dirty_ratio: 0.5, ..compact_config() }, true);
    // Unique keys: compaction keeps everything, so the clean part stays big.
    for i in 0..60 {
        let key = format!("unique{i}");
        log.append_as_leader(&keyed(&[(&key, Some("v"))], NOW, Compression::None), 0, NOW).unwrap();
    }
    roll(&mut log);
    let end = log.log_end_offset();
    let first = log.clean(NOW, end).unwrap();
    assert!(first.cleaned, "{first:?}");
    fill(&mut log, 1, 2, Compression::None);
    roll(&mut log);
    let before = read_keyed(&log);
    let end = log.log_end_offset();
    let report = log.clean(NOW, end).unwrap();
    assert!(!report.cleaned, "{report:?}");
    assert!(report.dirty_ratio < 0.5);
    assert_eq!(read_keyed(&log), before);
    // Nor does the cleaner run for cleanup.policy=delete.
    let mut config = log.config().clone();
    config.cleanup_policy = CleanupPolicy::Delete;
    config.min_cleanable_dirty_ratio = 0.0;
    log.set_config(config);
    assert!(!log.clean(NOW, end).unwrap().cleaned);
}

#[test]
fn open_transaction_bounds_the_cleanable_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), compact_config(), true);
    fill(&mut log, 2, 20, Compression::None);
    roll(&mut log);
    let txn_start = log.log_end_offset();
    let mut builder = RecordBatchBuilder::new(Compression::None).with_producer(7, 0, 0).with_transactional(true);
    builder.append(&NewRecord { timestamp_ms: NOW, key: Some(b"k0"), value: Some(b"txn"), headers: &[] }).unwrap();
    log.append_as_leader(&builder.build().unwrap().into_bytes(), 0, NOW).unwrap();
    assert_eq!(log.first_unstable_offset(), Some(txn_start));
    fill(&mut log, 2, 20, Compression::None);
    roll(&mut log);
    let end = log.log_end_offset();
    let report = log.clean(NOW, end).unwrap();
    assert!(report.cleaned);
    assert_eq!(report.checkpoint, txn_start);
    let rows = read_keyed(&log);
    // Before the transaction: one per key; from it on: everything.
    assert_eq!(rows.iter().filter(|r| r.0 < txn_start).count(), 2);
    assert_eq!(rows.iter().filter(|r| r.0 >= txn_start).count(), 41);
    log.verify_indexes().unwrap();
}

#[test]
fn high_watermark_bounds_the_cleanable_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), compact_config(), true);
    fill(&mut log, 2, 40, Compression::None);
    roll(&mut log);
    let report = log.clean(NOW, 0).unwrap();
    assert!(!report.cleaned);
    assert_eq!(read_keyed(&log).len(), 80);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A log before and after a clean, as directory copies, with the cleaned
/// segments' bases.
fn before_and_after(root: &Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<i64>, Vec<Row>) {
    let live = root.join("t-0");
    let mut log = open(&live, compact_config(), true);
    fill(&mut log, 4, 30, Compression::None);
    roll(&mut log);
    let bases = log.segment_base_offsets();
    log.close(NOW).unwrap();
    let before = root.join("before");
    copy_dir(&live, &before);
    let mut log = open(&live, compact_config(), true);
    let end = log.log_end_offset();
    log.clean(NOW, end).unwrap();
    let rows = read_keyed(&log);
    log.close(NOW).unwrap();
    let after = root.join("after");
    copy_dir(&live, &after);
    (before, after, bases[..bases.len() - 1].to_vec(), rows)
}

fn stem(base: i64) -> String {
    format!("{base:020}")
}

#[test]
fn leftover_cleaned_files_are_deleted_on_open() {
    let root = tempfile::tempdir().unwrap();
    let (before, _after, bases, _) = before_and_after(root.path());
    let expected = read_keyed(&open(&before, compact_config(), true));
    let crash = root.path().join("crash-0");
    copy_dir(&before, &crash);
    for suffix in [".log", ".index", ".timeindex"] {
        std::fs::write(crash.join(format!("{}{suffix}.cleaned", stem(bases[0]))), b"partial").unwrap();
    }
    for clean in [true, false] {
        let log = open(&crash, compact_config(), clean);
        assert_eq!(read_keyed(&log), expected);
        log.verify_indexes().unwrap();
        drop(log);
    }
    for entry in std::fs::read_dir(&crash).unwrap() {
        assert!(!entry.unwrap().file_name().to_string_lossy().ends_with(".cleaned"));
    }
}

#[test]
fn leftover_swap_files_are_completed_on_open() {
    let root = tempfile::tempdir().unwrap();
    let (before, after, bases, after_rows) = before_and_after(root.path());
    let old_rows = read_keyed(&open(&before, compact_config(), true));
    let latest_values = latest(&old_rows);
    assert_eq!(latest(&after_rows), latest_values);
    let suffixes = [".index", ".timeindex", ".log"];
    // Crash points: (number of new files at .swap, whether the old ones are gone).
    for (swapped, old_deleted, expect_new) in
        [(3, false, true), (3, true, true), (2, false, false), (1, false, false), (0, false, false)]
    {
        let crash = root.path().join(format!("crash-{swapped}-{old_deleted}-{expect_new}"));
        let _ = std::fs::remove_dir_all(&crash);
        copy_dir(&before, &crash);
        let base = bases[0];
        for suffix in &suffixes[..swapped] {
            let name = format!("{}{suffix}", stem(base));
            std::fs::copy(after.join(&name), crash.join(format!("{name}.swap"))).unwrap();
        }
        for suffix in &suffixes[swapped..] {
            let name = format!("{}{suffix}", stem(base));
            std::fs::copy(after.join(&name), crash.join(format!("{name}.cleaned"))).unwrap();
        }
        if old_deleted {
            for suffix in suffixes {
                let name = format!("{}{suffix}", stem(base));
                std::fs::rename(crash.join(&name), crash.join(format!("{name}.deleted"))).unwrap();
            }
        }
        for clean in [true, false] {
            let log = open(&crash, compact_config(), clean);
            let rows = read_keyed(&log);
            assert_eq!(latest(&rows), latest_values, "swapped {swapped}, old deleted {old_deleted}");
            log.verify_indexes().unwrap();
            // Segment `base` is wholly old or wholly new.
            let next = bases[1];
            let segment_rows: Vec<&Row> = rows.iter().filter(|r| r.0 < next).collect();
            let old: Vec<&Row> = old_rows.iter().filter(|r| r.0 < next).collect();
            let new: Vec<&Row> = after_rows.iter().filter(|r| r.0 < next).collect();
            if expect_new {
                assert_eq!(segment_rows, new);
            } else {
                assert_eq!(segment_rows, old);
            }
            drop(log);
        }
        for entry in std::fs::read_dir(&crash).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.ends_with(".swap") && !name.ends_with(".cleaned"), "{name}");
        }
    }
}

#[test]
fn idempotent_producer_keeps_its_last_batch_header() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), compact_config(), true);
    // Producer 9 writes k0 twice; its last batch is then superseded by a plain write.
    for seq in 0..2 {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_producer(9, 0, seq);
        builder.append(&NewRecord { timestamp_ms: NOW, key: Some(b"k0"), value: Some(b"p"), headers: &[] }).unwrap();
        log.append_as_leader(&builder.build().unwrap().into_bytes(), 0, NOW).unwrap();
    }
    fill(&mut log, 1, 3, Compression::None);
    roll(&mut log);
    let end = log.log_end_offset();
    assert!(log.clean(NOW, end).unwrap().cleaned);
    assert_eq!(read_keyed(&log), vec![(end - 1, "k0".to_string(), Some("v2-0".to_string()))]);
    // The empty header of producer 9's last batch stays (offset 1, sequence 1).
    let info = log.read(0, 1 << 20, end, true).unwrap();
    let batches: Vec<_> =
        RecordBatches::new(info.slice.unwrap().read_to_bytes().unwrap()).map(|b| b.unwrap()).collect();
    let empty = batches.iter().find(|b| b.producer_id() == 9).expect("producer 9's last batch");
    assert_eq!((empty.base_offset(), empty.last_offset(), empty.record_count()), (1, 1, 0));
    assert_eq!(empty.base_sequence(), 1);
    // The producer state survives a rebuild from the log.
    drop(log);
    remove_producer_snapshots(dir.path());
    let log = open(dir.path(), compact_config(), false);
    let producer = &log.producer_state().producers()[&9];
    assert_eq!(producer.batches.back().unwrap().last_seq, 1);
}

#[test]
fn null_keys_are_refused_on_produce_and_dropped_by_the_cleaner() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), compact_config(), true);
    let mut builder = RecordBatchBuilder::new(Compression::Lz4);
    builder.append(&NewRecord { timestamp_ms: NOW + 50, key: Some(b"a"), value: Some(b"old"), headers: &[] }).unwrap();
    builder.append(&NewRecord { timestamp_ms: NOW + 10, key: None, value: Some(b"keyless"), headers: &[] }).unwrap();
    builder.append(&NewRecord { timestamp_ms: NOW + 20, key: Some(b"b"), value: Some(b"b"), headers: &[] }).unwrap();
    let with_keyless = builder.build().unwrap().into_bytes();
    // Kafka's rule: a compacted topic refuses a record without a key
    // (INVALID_RECORD), looking inside compressed batches too.
    let refused = log.append_as_leader(&with_keyless, 0, NOW).unwrap_err();
    assert!(matches!(refused, LogError::RecordsRefused { invalid_timestamp: false, .. }), "{refused:?}");
    assert_eq!(log.log_end_offset(), 0);
    // Keyless records still reach a compacted log written before the topic
    // switched to compaction: the cleaner drops them.
    log.set_config(LogConfig { cleanup_policy: CleanupPolicy::Delete, ..compact_config() });
    log.append_as_leader(&with_keyless, 0, NOW).unwrap();
    log.set_config(compact_config());
    log.append_as_leader(&keyed(&[("a", Some("new"))], NOW + 30, Compression::None), 0, NOW).unwrap();
    roll(&mut log);
    let end = log.log_end_offset();
    assert!(log.clean(NOW, end).unwrap().cleaned);
    let rows = read_keyed(&log);
    assert_eq!(rows, vec![(2, "b".to_string(), Some("b".to_string())), (3, "a".to_string(), Some("new".to_string()))]);
    // The superseded record held the max timestamp: it no longer counts.
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((NOW + 30, 3)));
    log.verify_indexes().unwrap();
    drop(log);
    let log = open(dir.path(), compact_config(), true);
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((NOW + 30, 3)));
}

/// Every batch of the log, in order.
fn all_batches(log: &PartitionLog) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for base in log.segment_base_offsets() {
        let end = log.log_end_offset();
        let Ok(info) = log.read(base.max(log.log_start_offset()), 1 << 24, end, true) else { continue };
        let Some(slice) = info.slice else { continue };
        for batch in RecordBatches::new(slice.read_to_bytes().unwrap()) {
            let batch = batch.unwrap();
            batch.validate().unwrap();
            if out.last().is_none_or(|last: &RecordBatch| batch.base_offset() > last.base_offset()) {
                out.push(batch);
            }
        }
    }
    out
}

/// Appends a fresh overwrite of `key` and rolls, so the next pass has dirty bytes.
fn dirty(log: &mut PartitionLog, key: &str) {
    log.append_as_leader(&keyed(&[(key, Some("again"))], NOW, Compression::None), 0, NOW).unwrap();
    roll(log);
}

#[test]
fn tombstones_get_a_delete_horizon_and_go_after_it() {
    for compression in [Compression::None, Compression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { delete_retention_ms: 10_000, ..compact_config() };
        let mut log = open(dir.path(), config.clone(), true);
        fill(&mut log, 3, 4, compression);
        // A tombstone beside a live record, with timestamps before the horizon.
        log.append_as_leader(&keyed(&[("k1", None), ("k9", Some("live"))], NOW - 500, compression), 0, NOW).unwrap();
        roll(&mut log);
        let tombstone_offset = log.log_end_offset() - 2;
        let first_pass = NOW + 1_000;
        assert!(log.clean(first_pass, log.log_end_offset()).unwrap().cleaned);
        let horizon = first_pass + 10_000;
        let batch = all_batches(&log).into_iter().find(|b| b.base_offset() == tombstone_offset).unwrap();
        assert_eq!(batch.delete_horizon_ms(), Some(horizon), "{batch:?}");
        assert_eq!(batch.base_timestamp(), horizon);
        assert_eq!(batch.compression().unwrap(), compression);
        // Record timestamps are unchanged (re-encoded from the horizon).
        let records: Vec<_> = batch.records(1 << 20).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(records.iter().map(|r| r.timestamp).collect::<Vec<_>>(), [NOW - 500, NOW - 500]);
        assert_eq!(batch.max_timestamp(), NOW - 500);
        // Before the horizon the tombstone stays and its horizon does not move.
        dirty(&mut log, "k0");
        assert!(log.clean(horizon - 1, log.log_end_offset()).unwrap().cleaned);
        let rows = read_keyed(&log);
        assert!(rows.contains(&(tombstone_offset, "k1".to_string(), None)), "{rows:?}");
        let batch = all_batches(&log).into_iter().find(|b| b.base_offset() == tombstone_offset).unwrap();
        assert_eq!(batch.delete_horizon_ms(), Some(horizon));
        // At the horizon it goes; the live record of its batch stays.
        dirty(&mut log, "k0");
        assert!(log.clean(horizon, log.log_end_offset()).unwrap().cleaned);
        let rows = read_keyed(&log);
        assert!(!rows.iter().any(|r| r.1 == "k1"), "{rows:?}");
        assert!(rows.contains(&(tombstone_offset + 1, "k9".to_string(), Some("live".to_string()))), "{rows:?}");
        log.verify_indexes().unwrap();
        drop(log);
        let log = open(dir.path(), config, false);
        assert_eq!(read_keyed(&log), rows);
    }
}

/// A transactional batch of (key, value) records.
fn txn_batch(producer_id: i64, sequence: i32, records: &[(&str, &str)]) -> Bytes {
    let mut builder =
        RecordBatchBuilder::new(Compression::None).with_producer(producer_id, 0, sequence).with_transactional(true);
    for (key, value) in records {
        builder
            .append(&NewRecord {
                timestamp_ms: NOW,
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
                headers: &[],
            })
            .unwrap();
    }
    builder.build().unwrap().into_bytes()
}

/// Offsets of the control batches left in the log.
fn markers(log: &PartitionLog) -> Vec<(i64, Option<i64>, i32)> {
    all_batches(log)
        .iter()
        .filter(|b| b.is_control())
        .map(|b| (b.base_offset(), b.delete_horizon_ms(), b.record_count()))
        .collect()
}

#[test]
fn aborted_data_goes_and_markers_go_once_their_transaction_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { delete_retention_ms: 10_000, ..compact_config() };
    let mut log = open(dir.path(), config.clone(), true);
    log.append_as_leader(&keyed(&[("k0", Some("plain"))], NOW, Compression::None), 0, NOW).unwrap(); // 0
                                                                                                     // Producer 7: an aborted transaction writing k0, then a committed one.
    log.append_as_leader(&txn_batch(7, 0, &[("k0", "aborted")]), 0, NOW).unwrap(); // 1
    log.append_as_leader(&marker_batch(7, 0, false, 1, NOW), 0, NOW).unwrap(); // 2: abort
    log.append_as_leader(&txn_batch(7, 1, &[("k5", "p7")]), 0, NOW).unwrap(); // 3
    log.append_as_leader(&marker_batch(7, 0, true, 1, NOW), 0, NOW).unwrap(); // 4: commit
                                                                              // Producer 8: two committed transactions, the second overwriting the first.
    log.append_as_leader(&txn_batch(8, 0, &[("k1", "c1")]), 0, NOW).unwrap(); // 5
    log.append_as_leader(&marker_batch(8, 0, true, 1, NOW), 0, NOW).unwrap(); // 6: commit
    log.append_as_leader(&txn_batch(8, 1, &[("k1", "c2")]), 0, NOW).unwrap(); // 7
    log.append_as_leader(&marker_batch(8, 0, true, 1, NOW), 0, NOW).unwrap(); // 8: commit
    roll(&mut log);
    assert_eq!(log.aborted_transactions(0, 100).len(), 1);

    // Pass 1: the aborted record goes (it never shadowed k0=plain), the
    // superseded committed record goes; every marker still had data before it.
    let t1 = NOW + 1_000;
    assert!(log.clean(t1, log.log_end_offset()).unwrap().cleaned);
    let values: Vec<(i64, String, Option<String>)> = read_keyed(&log).into_iter().filter(|r| r.0 < 9).collect();
    let expected = |rows: &[(i64, &str, &str)]| -> Vec<Row> {
        rows.iter().map(|(o, k, v)| (*o, k.to_string(), Some(v.to_string()))).collect()
    };
    // read_keyed reads control records too; keep data only.
    let data: Vec<Row> = values.into_iter().filter(|r| !r.1.starts_with('\0')).collect();
    assert_eq!(data, expected(&[(0, "k0", "plain"), (3, "k5", "p7"), (7, "k1", "c2")]));
    assert_eq!(markers(&log), [(2, None, 1), (4, None, 1), (6, None, 1), (8, None, 1)]);
    assert_eq!(log.aborted_transactions(0, 100).len(), 1, "the abort marker keeps its index entry");

    // Pass 2: the abort marker and the first commit have no data left: they
    // get a delete horizon. The abort's index entry goes with its data.
    let t2 = NOW + 2_000;
    dirty(&mut log, "k3");
    assert!(log.clean(t2, log.log_end_offset()).unwrap().cleaned);
    assert_eq!(markers(&log), [(2, Some(t2 + 10_000), 1), (4, None, 1), (6, Some(t2 + 10_000), 1), (8, None, 1)]);
    assert!(log.aborted_transactions(0, 100).is_empty());

    // Pass 3, past the horizon: those two markers go; the others stay.
    dirty(&mut log, "k3");
    assert!(log.clean(t2 + 10_000, log.log_end_offset()).unwrap().cleaned);
    assert_eq!(markers(&log), [(4, None, 1), (8, None, 1)]);
    let data: Vec<Row> = read_keyed(&log).into_iter().filter(|r| r.0 < 9 && !r.1.starts_with('\0')).collect();
    assert_eq!(data, expected(&[(0, "k0", "plain"), (3, "k5", "p7"), (7, "k1", "c2")]));
    log.verify_indexes().unwrap();

    // Producer state rebuilt from the cleaned log (no snapshots) still knows
    // both producers' sequences.
    drop(log);
    remove_producer_snapshots(dir.path());
    let log = open(dir.path(), config, false);
    let producers = log.producer_state().producers();
    assert_eq!(producers[&7].batches.back().unwrap().last_seq, 1);
    assert_eq!(producers[&8].batches.back().unwrap().last_seq, 1);
    assert_eq!(log.first_unstable_offset(), None);
}

#[test]
fn an_emptied_producer_marker_keeps_its_header_and_rebuilds() {
    // Producer 4's last record is a marker of a bumped epoch (a fenced
    // producer's abort): it is kept, as an empty header once past its
    // horizon, and a rebuild from the log reads it without error.
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { delete_retention_ms: 0, ..compact_config() };
    let mut log = open(dir.path(), config.clone(), true);
    log.append_as_leader(&txn_batch(4, 0, &[("k0", "aborted")]), 0, NOW).unwrap(); // 0
    log.append_as_leader(&marker_batch(4, 1, false, 1, NOW), 0, NOW).unwrap(); // 1: abort, epoch 1
    log.append_as_leader(&keyed(&[("k0", Some("v"))], NOW, Compression::None), 0, NOW).unwrap(); // 2
    roll(&mut log);
    for pass in 0..4 {
        dirty(&mut log, "k9");
        assert!(log.clean(NOW + pass, log.log_end_offset()).unwrap().cleaned);
    }
    assert_eq!(markers(&log), [(1, None, 0)], "kept as an empty header");
    drop(log);
    remove_producer_snapshots(dir.path());
    let log = open(dir.path(), config, false);
    assert_eq!(log.producer_state().producers()[&4].epoch, 1);
    assert_eq!(log.first_unstable_offset(), None);
}

/// Appends `batches` batches of two records each, cycling over `keys` keys.
fn fill_cycling(log: &mut PartitionLog, keys: usize, batches: usize) {
    for i in 0..batches {
        let (a, b) = (format!("key{}", (2 * i) % keys), format!("key{}", (2 * i + 1) % keys));
        let value = format!("v{i}");
        log.append_as_leader(&keyed(&[(&a, Some(&value)), (&b, Some(&value))], NOW, Compression::None), 0, NOW)
            .unwrap();
    }
    roll(log);
}

#[test]
fn a_full_offset_map_cleans_in_several_passes_to_the_same_result() {
    let root = tempfile::tempdir().unwrap();
    let (one, many) = (root.path().join("one-0"), root.path().join("many-0"));
    let mut log = open(&one, compact_config(), true);
    fill_cycling(&mut log, 24, 60);
    log.close(NOW).unwrap();
    copy_dir(&one, &many);

    let mut log = open(&one, compact_config(), true);
    let end = log.log_end_offset();
    let report = log.clean(NOW, end).unwrap();
    assert!(report.cleaned && !report.map_full, "{report:?}");
    assert_eq!(report.checkpoint, end);
    assert_eq!(report.map_keys, 24);
    let expected = read_keyed(&log);
    assert_eq!(expected.len(), 24);

    // Room for 5 keys of 4-5 bytes: the map fills after two batches.
    let small = LogConfig { cleaner_dedupe_buffer_bytes: 5 * (5 + 48), ..compact_config() };
    let mut log = open(&many, small, true);
    let mut passes = 0;
    while log.cleaner_checkpoint() < end {
        let report = log.clean(NOW, end).unwrap();
        assert!(report.cleaned, "{report:?}");
        assert!(report.map_bytes <= 5 * (5 + 48), "{report:?}");
        assert!(report.map_full || report.checkpoint == end, "{report:?}");
        passes += 1;
        assert!(passes < 100, "no progress: {report:?}");
    }
    assert!(passes > 10, "{passes} passes");
    assert_eq!(read_keyed(&log), expected);
    log.verify_indexes().unwrap();

    // A map that cannot hold one batch's keys makes no progress, and says so.
    let tiny = LogConfig { cleaner_dedupe_buffer_bytes: 60, ..compact_config() };
    let dir = root.path().join("tiny-0");
    let mut log = open(&dir, tiny, true);
    fill_cycling(&mut log, 24, 4);
    let report = log.clean(NOW, log.log_end_offset()).unwrap();
    assert!(!report.cleaned && report.map_full, "{report:?}");
    assert_eq!(log.cleaner_checkpoint(), 0);
}

/// `segments` one-record segments (a roll after every batch), cycling over `keys` keys.
fn fill_tiny_segments(log: &mut PartitionLog, segments: usize, keys: usize) {
    for i in 0..segments {
        let value = format!("v{i}");
        log.append_as_leader(&keyed(&[(&format!("k{}", i % keys), Some(&value))], NOW, Compression::None), 0, NOW)
            .unwrap();
        roll(log);
    }
}

#[test]
fn small_segments_are_grouped_up_to_segment_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 4096, ..compact_config() };
    let mut log = open(dir.path(), config.clone(), true);
    fill_tiny_segments(&mut log, 40, 4);
    let before = log.segment_count();
    let size = log.size_bytes();
    let end = log.log_end_offset();
    let expected: Vec<Row> = {
        let mut rows: Vec<Row> = latest(&read_keyed(&log)).into_iter().map(|(k, (o, v))| (o, k, v)).collect();
        rows.sort();
        rows
    };
    let report = log.clean(NOW, end).unwrap();
    assert!(report.cleaned, "{report:?}");
    assert_eq!(report.segments, 40);
    assert_eq!(report.groups, 1, "{size} bytes fit one segment of 4096: {report:?}");
    assert_eq!(log.segment_count(), 2, "one cleaned segment and the active one (was {before})");
    assert_eq!(read_keyed(&log), expected);
    assert_eq!(log.log_end_offset(), end);
    log.verify_indexes().unwrap();
    // The cleaned segment ends where the last replaced one ended.
    let last = all_batches(&log).into_iter().last().unwrap();
    assert_eq!(last.next_offset(), end);
    drop(log);
    let log = open(dir.path(), config, false);
    assert_eq!(read_keyed(&log), expected);
    log.verify_indexes().unwrap();
}

#[test]
fn an_interrupted_group_swap_is_completed_on_open() {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 4096, ..compact_config() };
    let live = root.path().join("t-0");
    let mut log = open(&live, config.clone(), true);
    fill_tiny_segments(&mut log, 12, 3);
    let bases = log.segment_base_offsets();
    log.close(NOW).unwrap();
    let before = root.path().join("before");
    copy_dir(&live, &before);
    let mut log = open(&live, config.clone(), true);
    let report = log.clean(NOW, log.log_end_offset()).unwrap();
    assert_eq!(report.groups, 1);
    let after_rows = read_keyed(&log);
    log.close(NOW).unwrap();
    let after = root.path().join("after");
    copy_dir(&live, &after);
    let base = bases[0];
    // Crash points after the commit (the log's .swap exists): the old
    // segments all in place, or some of them (the first included) already
    // renamed to .deleted.
    for old_deleted in [0, 1, 5] {
        let crash = root.path().join(format!("crash-{old_deleted}"));
        copy_dir(&before, &crash);
        for suffix in [".index", ".timeindex", ".log"] {
            let name = format!("{}{suffix}", stem(base));
            std::fs::copy(after.join(&name), crash.join(format!("{name}.swap"))).unwrap();
        }
        for old in &bases[..old_deleted] {
            for suffix in [".log", ".index", ".timeindex"] {
                let name = format!("{}{suffix}", stem(*old));
                std::fs::rename(crash.join(&name), crash.join(format!("{name}.deleted"))).unwrap();
            }
        }
        for clean in [true, false] {
            let log = open(&crash, config.clone(), clean);
            assert_eq!(read_keyed(&log), after_rows, "{old_deleted} old segments deleted, clean {clean}");
            log.verify_indexes().unwrap();
            assert_eq!(log.segment_count(), 2);
        }
    }
}
