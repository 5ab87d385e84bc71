//! A whole partition directory, corrupted, opened by `PartitionLog::open`.
//!
//! Once per process a small valid partition is built in the scratch
//! directory: two segments (a roll between them) of plain, gzip, idempotent
//! and transactional batches, an abort marker (so segment 0 has a
//! `.txnindex`), an open transaction, two leader epochs; then closed cleanly,
//! which leaves `.log`, `.index`, `.timeindex`, `.txnindex`, `.snapshot` and
//! `leader-epoch-checkpoint` files.
//!
//! Input: byte 0 picks a file of that directory (low 6 bits, modulo the
//! number of files, in name order) and a mode (top 2 bits); bytes 1-4 a
//! position (little-endian, modulo the file's length + 1); the rest is data.
//! Modes: 0 overwrite the data at the position (extending the file if it
//! runs past the end); 1 the same, then recompute the CRC of every framed
//! batch in the `.log` files, so changed headers get past recovery's CRC
//! check; 2 truncate at the position, then append the data; 3 delete the file.
//!
//! The corrupted copy is opened twice, from a fresh copy each time: as after
//! a clean shutdown (segments trusted, only the indexes' quick check) and
//! after a crash (recovery point 0: every segment re-read). When the open
//! succeeds: reads over the whole offset range, `verify_indexes`, timestamp
//! lookups, the transaction and epoch queries, one more append, and close.
//!
//! Checks, besides never panicking: after crash recovery every index checks
//! against its data (`verify_indexes`), every batch read back validates
//! (CRC and framing), and an appended batch reads back at its offset.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bytes::Bytes;
use krabka_log::{LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{crc32c, NewRecord, RecordBatchBuilder, RecordBatches};
use krabka_protocol_fuzz::scratch;
use libfuzzer_sys::fuzz_target;

const NOW: i64 = 1_700_000_000_000;
const PARTITION: &str = "fuzz-0";

fn config() -> LogConfig {
    LogConfig { segment_bytes: 1 << 20, index_interval_bytes: 64, segment_index_bytes: 4096, ..LogConfig::default() }
}

fn batch(builder: RecordBatchBuilder, values: &[&str], timestamp_ms: i64) -> Bytes {
    let mut builder = builder;
    for (i, value) in values.iter().enumerate() {
        builder
            .append(&NewRecord {
                timestamp_ms: timestamp_ms + i as i64,
                key: Some(b"key"),
                value: Some(value.as_bytes()),
                headers: &[],
            })
            .expect("append a record");
    }
    builder.build().expect("build a batch").into_bytes()
}

fn plain(values: &[&str], timestamp_ms: i64) -> Bytes {
    batch(RecordBatchBuilder::new(Compression::None), values, timestamp_ms)
}

fn marker(producer_id: i64, commit: bool) -> Bytes {
    let key = [0u8, 0, 0, u8::from(commit)];
    let value = [0u8, 0, 0, 0, 0, 1];
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_producer(producer_id, 0, -1)
        .with_transactional(true)
        .with_control(true);
    builder
        .append(&NewRecord { timestamp_ms: NOW - 500, key: Some(&key), value: Some(&value), headers: &[] })
        .expect("append a marker");
    builder.build().expect("build a marker").into_bytes()
}

/// The valid partition every input starts from, built once.
fn template() -> &'static (PathBuf, Vec<String>) {
    static TEMPLATE: OnceLock<(PathBuf, Vec<String>)> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = scratch::fresh_subdir("log_dir_template").join(PARTITION);
        let (mut log, _) = PartitionLog::open(&dir, config(), 0, 0, true, NOW).expect("create the template log");
        let append = |log: &mut PartitionLog, records: Bytes, epoch: i32| {
            log.append_as_leader(&records, epoch, NOW).expect("append to the template log");
        };
        append(&mut log, plain(&["a", "b", "c"], NOW - 5000), 1);
        append(&mut log, batch(RecordBatchBuilder::new(Compression::Gzip), &["gz1", "gz2"], NOW - 4000), 1);
        append(&mut log, batch(RecordBatchBuilder::new(Compression::None).with_producer(5, 0, 0), &["p0", "p1"], NOW - 3000), 1);
        let txn = |pid| RecordBatchBuilder::new(Compression::None).with_producer(pid, 0, 0).with_transactional(true);
        append(&mut log, batch(txn(7), &["t7a", "t7b"], NOW - 2500), 1);
        append(&mut log, marker(7, false), 1);
        append(&mut log, batch(txn(8), &["t8"], NOW - 2000), 1);
        let end = log.log_end_offset();
        log.roll(end, NOW).expect("roll the template log");
        append(&mut log, plain(&["d", "e"], NOW - 1500), 2);
        append(&mut log, batch(RecordBatchBuilder::new(Compression::None).with_producer(5, 0, 2), &["p2"], NOW - 1000), 2);
        append(&mut log, plain(&["f", "g", "h", "i"], NOW - 500), 2);
        log.close(NOW).expect("close the template log");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("list the template")
            .map(|e| e.expect("a template entry").file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        (dir, files)
    })
}

fn copy_template(to: &Path) {
    let (from, files) = template();
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).expect("create the work dir");
    for name in files {
        std::fs::copy(from.join(name), to.join(name))
            .unwrap_or_else(|e| panic!("copy the template's {name} to {}: {e}", to.display()));
    }
}

/// Recomputes the CRC of every framed batch in a `.log` file's bytes.
fn fix_crcs(log: &mut [u8]) {
    let mut position = 0usize;
    while log.len() - position >= 61 {
        let length = i32::from_be_bytes(log[position + 8..position + 12].try_into().unwrap());
        let Ok(length) = usize::try_from(length) else { break };
        let end = position.saturating_add(12).saturating_add(length);
        if length < 49 || end > log.len() {
            break;
        }
        let crc = crc32c(&log[position + 21..end]);
        log[position + 17..position + 21].copy_from_slice(&crc.to_be_bytes());
        position = end;
    }
}

fn corrupt(dir: &Path, input: &[u8]) {
    let (_, files) = template();
    let name = &files[usize::from(input[0] & 0x3f) % files.len()];
    let mode = input[0] >> 6;
    let path = dir.join(name);
    if mode == 3 {
        std::fs::remove_file(&path).expect("delete a file");
        return;
    }
    let mut bytes = std::fs::read(&path).expect("read a file to corrupt");
    let position = (u32::from_le_bytes(input[1..5].try_into().unwrap()) as usize) % (bytes.len() + 1);
    let data = &input[5..];
    if mode == 2 {
        bytes.truncate(position);
        bytes.extend_from_slice(data);
    } else {
        let end = position + data.len();
        if end > bytes.len() {
            bytes.resize(end, 0);
        }
        bytes[position..end].copy_from_slice(data);
        if mode == 1 {
            for other in files.iter().filter(|n| n.ends_with(".log")) {
                if other == name {
                    fix_crcs(&mut bytes);
                } else {
                    let other_path = dir.join(other);
                    let mut other_bytes = std::fs::read(&other_path).expect("read a log");
                    fix_crcs(&mut other_bytes);
                    std::fs::write(&other_path, other_bytes).expect("write a log");
                }
            }
        }
    }
    std::fs::write(&path, bytes).expect("write the corrupted file");
}

fn exercise(log: &mut PartitionLog, recovered: bool) {
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    let mut offset = start;
    let mut reads = 0;
    while offset < end && reads < 1000 {
        reads += 1;
        let info = match log.read(offset, 64 * 1024, end, true) {
            Ok(info) => info,
            Err(e) => {
                assert!(!recovered, "read({offset}) of a recovered log [{start}, {end}) failed: {e}");
                break;
            }
        };
        let Some(slice) = info.slice else { break };
        let Ok(bytes) = slice.read_to_bytes() else { break };
        let mut progressed = false;
        for batch in RecordBatches::new(bytes) {
            let Ok(batch) = batch else { break };
            if recovered {
                batch.validate().expect("a batch of a recovered log validates");
            }
            if batch.next_offset() > offset {
                offset = batch.next_offset();
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    let verified = log.verify_indexes();
    if recovered {
        verified.expect("indexes of a recovered log check against the data");
    }
    for target in [i64::MIN, -1, 0, NOW - 4000, NOW - 1000, NOW, i64::MAX] {
        let _ = log.offset_for_timestamp(target);
    }
    let _ = log.max_timestamp_offset();
    let _ = log.aborted_transactions(start, end);
    let _ = log.aborted_transactions(i64::MIN, i64::MAX);
    let _ = log.last_stable_offset(end);
    for epoch in [i32::MIN, 0, 1, 2, 3, i32::MAX] {
        let _ = log.end_offset_for_epoch(epoch);
    }
    let records = plain(&["appended"], NOW);
    if let Ok(info) = log.append_as_leader(&records, 3, NOW) {
        if recovered {
            let end = log.log_end_offset();
            let read = log.read(info.first_offset, 64 * 1024, end, true).expect("read the appended batch");
            let bytes = read.slice.expect("the appended batch").read_to_bytes().expect("read the slice");
            let first = RecordBatches::new(bytes).next().expect("a batch").expect("a framed batch");
            assert_eq!(first.base_offset(), info.first_offset, "read back at the appended offset");
        }
    }
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 5 {
        return;
    }
    let work = scratch::dir().join("log_dir_work").join(PARTITION);
    for clean_shutdown in [true, false] {
        copy_template(&work);
        corrupt(&work, input);
        let Ok((mut log, _report)) = PartitionLog::open(&work, config(), 0, 0, clean_shutdown, NOW) else { continue };
        exercise(&mut log, !clean_shutdown);
        let _ = log.close(NOW);
    }
});

