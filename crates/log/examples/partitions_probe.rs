//! Measures what many idle partitions cost: creates N partition logs with a
//! little data each, closes them cleanly, then reopens all of them and reports
//! the open time and the resident memory each open partition adds.
//!
//! `cargo run --release -p krabka-log --example partitions_probe -- 10000 [DIR]`
//!
//! With DIR, the partitions are kept there and reused by the next run (which
//! then only measures the reopening).

use std::time::Instant;

use krabka_log::{LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let count: usize = args.get(1).and_then(|c| c.parse().ok()).unwrap_or(10_000);
    let temp = tempfile::tempdir().unwrap();
    let root = args.get(2).map_or_else(|| temp.path().to_path_buf(), std::path::PathBuf::from);
    // One descriptor stays open per partition (the active .log; index
    // mappings keep none), but raise the limit for larger counts anyway.
    let limit = libc::rlimit { rlim_cur: 1 << 20, rlim_max: 1 << 20 };
    // SAFETY: plain syscall on a valid struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        eprintln!("note: could not raise the open-file limit; large counts may fail");
    }
    let config = LogConfig::default();
    let mut builder = RecordBatchBuilder::new(Compression::Lz4);
    for i in 0..10 {
        let value = format!("record-{i}");
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(value.as_bytes()), headers: &[] }).unwrap();
    }
    let batch = builder.build().unwrap().into_bytes();

    let started = Instant::now();
    for p in (0..count).filter(|p| !root.join(format!("probe-{p}")).exists()) {
        let (mut log, _) = PartitionLog::open(&root.join(format!("probe-{p}")), config.clone(), 0, 0, true, 0).unwrap();
        log.append_as_leader(&batch, 0, 0).unwrap();
        log.close(0).unwrap();
    }
    let created = started.elapsed();

    let rss_before = rss_kib();
    let started = Instant::now();
    let mut logs = Vec::with_capacity(count);
    for p in 0..count {
        let (log, _) = PartitionLog::open(&root.join(format!("probe-{p}")), config.clone(), 0, 10, true, 0).unwrap();
        logs.push(log);
    }
    let opened = started.elapsed();
    let rss_after = rss_kib();
    let per_partition = (rss_after.saturating_sub(rss_before) as f64) * 1024.0 / count as f64;
    println!(
        "{{\"partitions\": {count}, \"create_and_close_s\": {:.2}, \"open_after_clean_shutdown_s\": {:.3}, \"open_us_per_partition\": {:.1}, \"rss_kib_before\": {rss_before}, \"rss_kib_after\": {rss_after}, \"rss_bytes_per_partition\": {per_partition:.0}}}",
        created.as_secs_f64(),
        opened.as_secs_f64(),
        opened.as_secs_f64() * 1e6 / count as f64,
    );
    drop(logs);
}
