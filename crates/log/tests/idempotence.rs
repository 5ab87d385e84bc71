//! Producer state through the log: retries are acknowledged with their
//! original offsets, gaps and stale epochs are refused, and all of it
//! survives clean and unclean restarts.

mod common;

use bytes::Bytes;
use common::*;
use krabka_log::producer_state::ProducerStateError;
use krabka_log::{LogConfig, LogError, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};

const NOW: i64 = 1_700_000_000_000;

fn producer_batch(producer_id: i64, epoch: i16, first_seq: i32, count: usize) -> Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::Lz4).with_producer(producer_id, epoch, first_seq);
    for i in 0..count {
        let value = format!("p{producer_id}-e{epoch}-s{}", first_seq as usize + i);
        builder
            .append(&NewRecord { timestamp_ms: NOW, key: None, value: Some(value.as_bytes()), headers: &[] })
            .unwrap();
    }
    builder.build().unwrap().into_bytes()
}

#[test]
fn retries_are_deduplicated_and_gaps_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let (mut log, _) = PartitionLog::open(&path, small_segments(), 0, 0, true, NOW).unwrap();
    let first = log.append_as_leader(&producer_batch(42, 0, 0, 3), 0, NOW).unwrap();
    let second = log.append_as_leader(&producer_batch(42, 0, 3, 2), 0, NOW).unwrap();
    assert_eq!((second.first_offset, second.last_offset), (3, 4));
    // The first batch again: same offsets back, nothing written.
    let retry = log.append_as_leader(&producer_batch(42, 0, 0, 3), 0, NOW).unwrap();
    assert_eq!((retry.first_offset, retry.last_offset), (first.first_offset, first.last_offset));
    assert_eq!(log.log_end_offset(), 5);
    let gap = log.append_as_leader(&producer_batch(42, 0, 9, 1), 0, NOW);
    assert!(matches!(gap, Err(LogError::ProducerState(ProducerStateError::OutOfOrderSequence { expected: 5, .. }))));
    // A bumped epoch restarts at zero and fences the old one.
    log.append_as_leader(&producer_batch(42, 1, 0, 1), 0, NOW).unwrap();
    let zombie = log.append_as_leader(&producer_batch(42, 0, 5, 1), 0, NOW);
    assert!(matches!(zombie, Err(LogError::ProducerState(ProducerStateError::InvalidProducerEpoch { .. }))));
    assert_eq!(read_all(&log, 0).len(), 6);
}

#[test]
fn producer_state_survives_clean_and_unclean_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let config = LogConfig { segment_bytes: 300, ..small_segments() };
    let (mut log, _) = PartitionLog::open(&path, config.clone(), 0, 0, true, NOW).unwrap();
    for i in 0..20 {
        log.append_as_leader(&producer_batch(7, 0, i * 2, 2), 0, NOW).unwrap();
    }
    assert!(log.segment_count() > 3);
    log.close(NOW).unwrap();
    assert!(path.join("00000000000000000040.snapshot").exists(), "no snapshot at close");

    let (mut log, _) = PartitionLog::open(&path, config.clone(), 0, 40, true, NOW).unwrap();
    let retry = log.append_as_leader(&producer_batch(7, 0, 38, 2), 0, NOW).unwrap();
    assert_eq!((retry.first_offset, retry.last_offset), (38, 39));
    log.append_as_leader(&producer_batch(7, 0, 40, 2), 0, NOW).unwrap();
    drop(log); // a crash: no snapshot at 42

    let (mut log, _) = PartitionLog::open(&path, config.clone(), 0, 0, false, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 42);
    let retry = log.append_as_leader(&producer_batch(7, 0, 40, 2), 0, NOW).unwrap();
    assert_eq!((retry.first_offset, retry.last_offset), (40, 41));
    assert!(matches!(
        log.append_as_leader(&producer_batch(7, 0, 50, 1), 0, NOW),
        Err(LogError::ProducerState(ProducerStateError::OutOfOrderSequence { expected: 42, .. }))
    ));
    // Truncation rewinds the producer state with the log.
    log.truncate_to(30, NOW).unwrap();
    let next = log.append_as_leader(&producer_batch(7, 0, 30, 2), 0, NOW).unwrap();
    assert_eq!(next.first_offset, 30);
}

fn transactional_batch(producer_id: i64, first_seq: i32, count: usize) -> Bytes {
    let mut builder =
        RecordBatchBuilder::new(Compression::None).with_producer(producer_id, 0, first_seq).with_transactional(true);
    for i in 0..count {
        let value = format!("txn-{producer_id}-{i}");
        builder
            .append(&NewRecord { timestamp_ms: NOW, key: None, value: Some(value.as_bytes()), headers: &[] })
            .unwrap();
    }
    builder.build().unwrap().into_bytes()
}

fn marker(producer_id: i64, commit: bool, coordinator_epoch: i32) -> Bytes {
    marker_batch(producer_id, 0, commit, coordinator_epoch, NOW)
}

#[test]
fn aborted_transactions_are_indexed_and_bound_the_last_stable_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let (mut log, _) = PartitionLog::open(&path, small_segments(), 0, 0, true, NOW).unwrap();
    log.append_as_leader(&producer_batch(1, 0, 0, 2), 0, NOW).unwrap(); // 0-1, not transactional
    log.append_as_leader(&transactional_batch(5, 0, 3), 0, NOW).unwrap(); // 2-4
    log.append_as_leader(&transactional_batch(6, 0, 2), 0, NOW).unwrap(); // 5-6
    assert_eq!(log.first_unstable_offset(), Some(2));
    assert_eq!(log.last_stable_offset(100), 2);
    log.append_as_follower(
        &{
            let mut m = marker(5, false, 3).to_vec();
            m[..8].copy_from_slice(&7i64.to_be_bytes());
            Bytes::from(m)
        },
        NOW,
    )
    .unwrap(); // abort of producer 5 at offset 7
    assert_eq!(log.first_unstable_offset(), Some(5));
    let aborted = log.aborted_transactions(0, 100);
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].producer_id, aborted[0].first_offset, aborted[0].last_offset), (5, 2, 7));
    assert_eq!(aborted[0].last_stable_offset, 5, "producer 6's transaction is still open");
    log.append_as_leader(&marker(6, true, 3), 0, NOW).unwrap(); // commit of producer 6 at 8
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(9), 9);
    assert_eq!(log.aborted_transactions(0, 100).len(), 1);
    assert!(log.aborted_transactions(8, 100).is_empty());
    drop(log); // crash: recovery must rebuild the .txnindex from the markers

    let (log, report) = PartitionLog::open(&path, small_segments(), 0, 0, false, NOW).unwrap();
    assert!(report.recovered_segments > 0);
    assert_eq!(log.aborted_transactions(0, 100).len(), 1);
    let txn_files = std::fs::read_dir(&path)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".txnindex"))
        .count();
    assert_eq!(txn_files, 1);
    let mut log = log;
    log.truncate_to(7, NOW).unwrap();
    assert!(log.aborted_transactions(0, 100).is_empty());
    assert_eq!(log.first_unstable_offset(), Some(2));
}
