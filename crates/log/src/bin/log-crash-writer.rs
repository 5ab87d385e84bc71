//! Appends to a partition log until killed, for the crash tests.
//!
//! Usage: `log-crash-writer ROOT (flush|noflush) MAX_BATCHES`. The log lives in
//! `ROOT/crash-0`; `ROOT/.clean_shutdown` marks that the last user closed it
//! cleanly (it is removed on open, as Kafka's marker is). Each record's value
//! is `rec-<offset>`, so a reader can check any prefix. After each append
//! (and fsync in `flush` mode) it prints `<log end offset> <flushed offset>`.
//! In `fill` mode (run under a file-size limit) it appends until the disk
//! refuses, then prints `error <message>` and `readable <records>` after
//! reading the whole log back, proving a failed append leaves it usable.
//! In `compact` mode the topic is compacted: record `o` has key `k<o % 16>`,
//! and the cleaner runs after every fifth append, so kills land mid-clean.
//! Like the broker's recovery-point checkpoint, `ROOT/recovery-point` holds
//! the log's recovery point after each append (not in `fill` mode), and the
//! log opens from it, so an unclean open re-reads only the segments past it.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use krabka_log::{CleanupPolicy, LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};

/// The recovery point the last user of the log recorded (0 if none).
fn read_recovery_point(root: &std::path::Path) -> i64 {
    std::fs::read_to_string(root.join("recovery-point")).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

fn write_recovery_point(root: &std::path::Path, offset: i64) {
    krabka_log::fsutil::replace_unsynced(&root.join("recovery-point"), offset.to_string().as_bytes())
        .expect("write the recovery point");
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, root, mode, max_batches] = args.as_slice() else {
        eprintln!("usage: log-crash-writer ROOT (flush|noflush|fill|compact) MAX_BATCHES");
        std::process::exit(2);
    };
    let flush = mode == "flush";
    let max_batches: u64 = max_batches.parse().expect("MAX_BATCHES is a number");
    let root = std::path::Path::new(root);
    let marker = root.join(".clean_shutdown");
    let clean = marker.exists();
    if clean {
        std::fs::remove_file(&marker).expect("remove the clean-shutdown marker");
    }
    // In fill mode one segment must outgrow the file-size limit.
    let segment_bytes = if mode == "fill" { 1 << 20 } else { 16 * 1024 };
    let compact = mode == "compact";
    let mut config =
        LogConfig { segment_bytes, index_interval_bytes: 512, segment_index_bytes: 8192, ..LogConfig::default() };
    if compact {
        config.cleanup_policy = CleanupPolicy::Compact;
        config.min_cleanable_dirty_ratio = 0.0;
        config.delete_retention_ms = 0;
    }
    let recovery_point = read_recovery_point(root);
    let (mut log, _) =
        PartitionLog::open(&root.join("crash-0"), config, 0, recovery_point, clean, now_ms()).expect("open the log");
    let mut stdout = std::io::stdout().lock();
    let codecs = [Compression::None, Compression::Lz4, Compression::Zstd];
    for i in 0..max_batches {
        let first = log.log_end_offset();
        let count = 1 + (i * 7 % 13) as i64;
        let values: Vec<String> = (first..first + count).map(|o| format!("rec-{o}")).collect();
        let mut builder = RecordBatchBuilder::new(codecs[(i % 3) as usize]);
        for (offset, value) in (first..).zip(&values) {
            let key = format!("k{}", offset % 16);
            let key = compact.then_some(key.as_bytes());
            builder
                .append(&NewRecord { timestamp_ms: now_ms(), key, value: Some(value.as_bytes()), headers: &[] })
                .expect("build a record");
        }
        let batch = builder.build().expect("build the batch").into_bytes();
        if let Err(error) = log.append_as_leader(&batch, 0, now_ms()) {
            assert_eq!(mode, "fill", "append failed: {error}");
            writeln!(stdout, "error {error}").expect("report");
            let mut readable = 0;
            let mut offset = log.log_start_offset();
            while offset < log.log_end_offset() {
                let info = log.read(offset, 1 << 20, log.log_end_offset(), true).expect("read after the failure");
                let bytes = info.slice.expect("data up to the log end").read_to_bytes().expect("read the file");
                for batch in krabka_protocol::records::RecordBatches::new(bytes) {
                    let Ok(batch) = batch else { break };
                    batch.validate().expect("a valid batch");
                    readable += batch.record_count() as i64;
                    offset = batch.next_offset();
                }
            }
            writeln!(stdout, "readable {readable} of {}", log.log_end_offset()).expect("report");
            return;
        }
        if flush {
            log.flush(now_ms()).expect("flush");
        }
        if compact && i % 5 == 4 {
            let end = log.log_end_offset();
            log.clean(now_ms(), end).expect("clean");
        }
        let flushed = if flush { log.log_end_offset() } else { 0 };
        // Not while filling the disk on purpose: the file would take the
        // last free block, and that test is about the log's own writes.
        if mode != "fill" {
            write_recovery_point(root, log.recovery_point());
        }
        writeln!(stdout, "{} {flushed}", log.log_end_offset()).expect("report");
        stdout.flush().expect("report");
    }
    log.prepare_clean_shutdown(now_ms()).expect("close");
    write_recovery_point(root, log.recovery_point());
    std::fs::write(&marker, b"").expect("write the clean-shutdown marker");
}
