//! The coordinators' loads of their internal topics over fuzzed records:
//! `TxnRecord::decode` and `CoordinatorRecord::decode`, and the replay of
//! `__transaction_state` and `__consumer_offsets` into a transaction or
//! group coordinator, then the calls that read and move loaded state.
//!
//! Input: byte 0 is flags (bit 0: the group coordinator, else the
//! transaction coordinator; bit 1: the records in one transactional batch
//! of producer 7; bit 2: a commit marker after it, bit 3: an abort
//! marker); the rest is records, each a u16 key length, the key, a u16
//! value length (0xFFFF: a null value) and the value (both lengths
//! big-endian, cut short at the end of the input).
//!
//! Checks, besides never panicking (debug assertions on): a record that
//! decodes with its value at the version the coordinator writes encodes
//! back to a record that decodes equal (unknown tagged fields in any
//! order); after the load, the transaction
//! coordinator describes and lists every id, aborts timed-out
//! transactions, expires ids and answers InitProducerId for each id
//! loaded; the group coordinator lists, describes and fetches the offsets
//! of every group loaded.
#![no_main]

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;
use krabka_coordinator::group::classic::ClassicConfig;
use krabka_coordinator::group::consumer::ConsumerConfig;
use krabka_coordinator::group::records::CoordinatorRecord;
use krabka_coordinator::group::{GroupConfig, GroupCoordinator};
use krabka_coordinator::txn::records::TxnRecord;
use krabka_coordinator::txn::{ListFilter, TransactionCoordinator, TxnConfig, TxnHost};
use krabka_coordinator::{CoordinatorLog, Time};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{transaction_marker_batch, NewRecord, RecordBatch, RecordBatchBuilder, RecordBatches};
use krabka_protocol_fuzz::assert_same_message;
use libfuzzer_sys::fuzz_target;

const GROUPS: u8 = 1;
const TRANSACTIONAL: u8 = 2;
const COMMIT: u8 = 4;
const ABORT: u8 = 8;
const PRODUCER: i64 = 7;

/// One partition in memory, led here at epoch 0.
#[derive(Default)]
struct OnePartition {
    batches: Mutex<Vec<Bytes>>,
}

impl CoordinatorLog for OnePartition {
    fn append(&self, partition: usize, batch: &Bytes, _now_ms: i64) -> Result<i64, i16> {
        assert_eq!(partition, 0, "one partition");
        let mut batches = self.batches.lock().unwrap();
        batches.push(batch.clone());
        Ok(batches.len() as i64 - 1)
    }

    fn replay(&self, partition: usize, visit: &mut dyn FnMut(RecordBatch) -> Result<(), String>) -> Result<(), String> {
        assert_eq!(partition, 0, "one partition");
        for bytes in self.batches.lock().unwrap().clone() {
            for batch in RecordBatches::new(bytes) {
                visit(batch.map_err(|e| e.to_string())?)?;
            }
        }
        Ok(())
    }

    fn leader_epoch(&self, _partition: usize) -> Option<i32> {
        Some(0)
    }
}

/// The records the input spells out: (key, value).
fn records(mut rest: &[u8]) -> Vec<(Bytes, Option<Bytes>)> {
    let take = |len: usize, rest: &mut &[u8]| {
        let (taken, left) = rest.split_at(len.min(rest.len()));
        *rest = left;
        Bytes::copy_from_slice(taken)
    };
    let mut out = Vec::new();
    while rest.len() >= 2 {
        let key_len = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        rest = &rest[2..];
        let key = take(key_len, &mut rest);
        let value = match rest {
            [a, b, tail @ ..] => {
                let len = u16::from_be_bytes([*a, *b]);
                rest = tail;
                (len != u16::MAX).then(|| take(len as usize, &mut rest))
            }
            _ => None,
        };
        out.push((key, value));
    }
    out
}

fn batch_of(records: &[(Bytes, Option<Bytes>)], transactional: bool) -> Option<Bytes> {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    if transactional {
        builder = builder.with_transactional(true).with_producer(PRODUCER, 0, -1);
    }
    for (key, value) in records {
        let record = NewRecord { timestamp_ms: 0, key: Some(key), value: value.as_deref(), headers: &[] };
        builder.append(&record).ok()?;
    }
    Some(builder.build().ok()?.into_bytes())
}

/// The version a value starts with; -1 when it is too short to have one
/// (a record of a type the decoders skip keeps any value).
fn value_version(value: &[u8]) -> i16 {
    match value {
        [a, b, ..] => i16::from_be_bytes([*a, *b]),
        _ => -1,
    }
}

fn txn_round_trip(key: &Bytes, value: &Option<Bytes>) -> Option<String> {
    let record = TxnRecord::decode(key.clone(), value.clone()).ok()??;
    let version = value.as_deref().map_or(0, value_version);
    if (0..=1).contains(&version) {
        let (key, value) = record.encode(version);
        let again = TxnRecord::decode(key, value).unwrap();
        assert_same_message(&Some(record.clone()), &again, "transaction record");
    }
    Some(record.transactional_id)
}

fn group_round_trip(key: &Bytes, value: &Option<Bytes>) -> Option<String> {
    let record = CoordinatorRecord::decode(key.clone(), value.clone()).ok()?;
    let version = value.as_deref().map_or(3, value_version);
    if version == 3 && record != CoordinatorRecord::Other {
        let (key, value) = record.encode();
        assert_same_message(&record, &CoordinatorRecord::decode(key, value).unwrap(), "group record");
    }
    match record {
        CoordinatorRecord::Offset { key, .. } => Some(key.group),
        CoordinatorRecord::Group { group, .. } => Some(group),
        CoordinatorRecord::Other => None,
    }
}

fn load_transactions(log: &OnePartition, ids: &[String]) {
    let coordinator = TransactionCoordinator::new(TxnConfig { max_timeout_ms: 900_000, id_expiration_ms: 604_800_000 }, 1);
    let Ok(_markers) = coordinator.load(log, Some(1)) else { return };
    let next_id = AtomicI64::new(1000);
    let producer_ids = || Some(next_id.fetch_add(1, Ordering::Relaxed));
    for (now_ms, version) in [(1_000, 0), (i64::MAX / 4, 2)] {
        let host = TxnHost { log, now: Time::new(now_ms, now_ms), transaction_version: version, producer_ids: &producer_ids };
        let listed = coordinator.list(&host, &ListFilter { min_duration_ms: -1, ..Default::default() });
        for id in ids {
            let _ = coordinator.describe(&host, id);
        }
        assert!(listed.len() <= ids.len(), "listed {listed:?} of {ids:?}");
        let _ = coordinator.abort_timed_out(&host);
        for id in ids.iter().take(4) {
            let _ = coordinator.init_producer_id(&host, id, 60_000, None);
        }
        let _ = coordinator.expire_ids(&host);
    }
}

fn load_groups(log: &OnePartition, groups: &[String]) {
    let config = GroupConfig {
        classic: ClassicConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 0,
            max_size: 100,
        },
        consumer: ConsumerConfig { session_timeout_ms: 45_000, heartbeat_interval_ms: 5_000, max_size: 100 },
        offsets_partitions: 1,
        offsets_retention_ms: 604_800_000,
        offset_metadata_max_bytes: 4096,
    };
    let coordinator = GroupCoordinator::new(config, 1);
    if coordinator.load(log, Some(1), Time::new(1_000, 1_000)).is_err() {
        return;
    }
    let listed = coordinator.list_groups();
    assert!(listed.len() <= groups.len(), "listed {} of {groups:?}", listed.len());
    for group in groups {
        let _ = coordinator.describe_group(group);
        let _ = coordinator.fetch_offsets(group, None);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let records = records(rest);
    let transactional = flags & TRANSACTIONAL != 0;
    let Some(batch) = batch_of(&records, transactional) else { return };
    let log = OnePartition::default();
    log.batches.lock().unwrap().push(batch);
    for (bit, commit) in [(COMMIT, true), (ABORT, false)] {
        if transactional && flags & bit != 0 {
            let marker = transaction_marker_batch(PRODUCER, 0, commit, 0, 0).expect("a marker batch");
            log.batches.lock().unwrap().push(marker);
        }
    }
    let mut names: Vec<String> = if flags & GROUPS != 0 {
        records.iter().filter_map(|(k, v)| group_round_trip(k, v)).collect()
    } else {
        records.iter().filter_map(|(k, v)| txn_round_trip(k, v)).collect()
    };
    names.sort();
    names.dedup();
    if flags & GROUPS != 0 {
        load_groups(&log, &names);
    } else {
        load_transactions(&log, &names);
    }
});
