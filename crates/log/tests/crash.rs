//! kill -9 at random points while a child process appends: the reopened log
//! must hold a prefix of what was written, every flushed record, indexes that
//! agree with the data, and take appends again. In the compacted run the
//! child also cleans the log every few appends: what survives a kill is a
//! compaction of what was written, every key's latest record included, and
//! no cleaner leftovers.
//!
//! The child keeps its recovery point in a file, as the broker keeps its
//! checkpoint, and every open starts from it: an unclean open re-reads only
//! the segments past it.
//!
//! 20 kills by default; `KRABKA_LONG_TESTS=1` runs 200 (the long mode), and
//! `KRABKA_CRASH_KILLS=N` any other count.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use krabka_log::{CleanupPolicy, LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;

fn kills() -> usize {
    if let Ok(n) = std::env::var("KRABKA_CRASH_KILLS") {
        return n.parse().expect("KRABKA_CRASH_KILLS is a number");
    }
    if std::env::var("KRABKA_LONG_TESTS").is_ok_and(|v| v == "1") {
        200
    } else {
        20
    }
}

/// A small deterministic generator for kill delays (reproducible runs).
fn delays(seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed | 1;
    std::iter::from_fn(move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        Some(state)
    })
}

fn crash_loop(mode: &str, seed: u64) {
    let root = tempfile::tempdir().unwrap();
    let compact = mode == "compact";
    let mut config = LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 512,
        segment_index_bytes: 8192,
        ..LogConfig::default()
    };
    if compact {
        config.cleanup_policy = CleanupPolicy::Compact;
    }
    let mut delay = delays(seed);
    let mut max_flushed = 0i64;
    let mut opens_past_zero = 0;
    for kill in 0..kills() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_log-crash-writer"))
            .args([root.path().to_str().unwrap(), mode, "400"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (lines_tx, lines_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait for the first report, so the kill lands mid-appends, then a bit more.
        let _ = lines_rx.recv_timeout(Duration::from_secs(20));
        std::thread::sleep(Duration::from_micros(delay.next().unwrap() % 40_000));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        let reports: Vec<(i64, i64)> = lines_rx
            .try_iter()
            .filter_map(|l| l.split_once(' ').map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap())))
            .collect();
        if let Some(&(_, flushed)) = reports.last() {
            max_flushed = max_flushed.max(flushed);
        }
        let acked = reports.last().map_or(0, |r| r.0);

        let dir = root.path().join("crash-0");
        let clean = root.path().join(".clean_shutdown").exists();
        // The writer's recovery point, as the broker's checkpoint would hold
        // it: segments before it are trusted, only the rest is re-read.
        let recovery_point = std::fs::read_to_string(root.path().join("recovery-point"))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(0);
        let (mut log, _) = PartitionLog::open(&dir, config.clone(), 0, recovery_point, clean, 0).unwrap();
        let end = log.log_end_offset();
        assert!(recovery_point <= end, "kill {kill}: recovery point {recovery_point} past the log end {end}");
        opens_past_zero += usize::from(recovery_point > 0);
        assert!(end >= max_flushed, "kill {kill}: log ends at {end}, below the flushed {max_flushed}");
        assert!(end >= acked, "kill {kill}: acknowledged {acked} but the log ends at {end}");
        log.verify_indexes().unwrap_or_else(|e| panic!("kill {kill}: {e}"));
        let records = read_all(&log, 0);
        for (offset, _, value) in &records {
            assert_eq!(value, &format!("rec-{offset}"), "kill {kill}: wrong record at {offset}");
        }
        if compact {
            // Each key's latest record (k<o % 16>) is there; nothing is left
            // of an interrupted clean.
            let offsets: std::collections::BTreeSet<i64> = records.iter().map(|r| r.0).collect();
            for latest in (end - 16).max(0)..end {
                assert!(offsets.contains(&latest), "kill {kill}: the latest record of a key, {latest}, is gone");
            }
            for entry in std::fs::read_dir(&dir).unwrap() {
                let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                assert!(!name.ends_with(".cleaned") && !name.ends_with(".swap"), "kill {kill}: {name} left");
            }
        } else {
            assert_eq!(records.len() as i64, end, "kill {kill}: records missing");
        }
        // Appends go on after recovery; close cleanly half of the time.
        let value = format!("rec-{end}");
        if compact {
            let key = format!("k{}", end % 16);
            log.append_as_leader(&keyed_batch(&key, &value, Compression::Gzip), 0, 0).unwrap();
        } else {
            log.append_as_leader(&batch(&[value], 0, Compression::Gzip), 0, 0).unwrap();
        }
        assert_eq!(read_all(&log, end).len(), 1);
        if kill % 2 == 0 {
            log.prepare_clean_shutdown(0).unwrap();
            std::fs::write(root.path().join(".clean_shutdown"), b"").unwrap();
        } else {
            let _ = std::fs::remove_file(root.path().join(".clean_shutdown"));
        }
        std::fs::write(root.path().join("recovery-point"), log.recovery_point().to_string()).unwrap();
    }
    assert!(opens_past_zero > 0, "no open started past offset 0: the recovery-point path went untested");
}

#[test]
fn kill_nine_while_appending_without_flush() {
    crash_loop("noflush", 0x5eed);
}

#[test]
fn kill_nine_while_appending_and_flushing() {
    crash_loop("flush", 0xf1a5);
}

#[test]
fn kill_nine_while_appending_and_compacting() {
    crash_loop("compact", 0xc1ea);
}

fn keyed_batch(key: &str, value: &str, compression: Compression) -> bytes::Bytes {
    let mut builder = krabka_protocol::records::RecordBatchBuilder::new(compression);
    builder
        .append(&krabka_protocol::records::NewRecord {
            timestamp_ms: 0,
            key: Some(key.as_bytes()),
            value: Some(value.as_bytes()),
            headers: &[],
        })
        .unwrap();
    builder.build().unwrap().into_bytes()
}
