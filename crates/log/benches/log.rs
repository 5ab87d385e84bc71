//! Log benchmarks: appending 64 KiB batches next to plain write(2) of the same
//! bytes to the same disk, and planning a fetch read (no bytes copied).
//!
//! `cargo bench -p krabka-log --bench log`; `KRABKA_BENCH_DIR` picks the disk
//! (default: the system temp dir).

use std::io::Write;
use std::time::Instant;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use krabka_log::{LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};

const BATCH_TARGET_BYTES: usize = 64 * 1024;

fn bench_dir() -> tempfile::TempDir {
    match std::env::var("KRABKA_BENCH_DIR") {
        Ok(dir) => tempfile::tempdir_in(dir).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    }
}

/// A 64 KiB producer batch of 1 KiB records (uncompressed, as stored).
fn batch_64k() -> Bytes {
    let value = vec![0x5au8; 1000];
    let mut builder = RecordBatchBuilder::new(Compression::None);
    while builder.uncompressed_bytes() + 1100 < BATCH_TARGET_BYTES {
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&value), headers: &[] }).unwrap();
    }
    builder.build().unwrap().into_bytes()
}

fn append(c: &mut Criterion) {
    let batch = batch_64k();
    let mut group = c.benchmark_group("append_64k");
    group.throughput(Throughput::Bytes(batch.len() as u64));
    group.bench_function("krabka_log", |b| {
        b.iter_custom(|iterations| {
            let dir = bench_dir();
            let config = LogConfig { segment_bytes: 256 << 20, ..LogConfig::default() };
            let (mut log, _) = PartitionLog::open(&dir.path().join("bench-0"), config, 0, 0, true, 0).unwrap();
            let start = Instant::now();
            for _ in 0..iterations {
                log.append_as_leader(&batch, 0, 0).unwrap();
            }
            start.elapsed()
        })
    });
    group.bench_function("write_syscall", |b| {
        b.iter_custom(|iterations| {
            let dir = bench_dir();
            let mut file = std::fs::File::create(dir.path().join("plain.log")).unwrap();
            let start = Instant::now();
            for _ in 0..iterations {
                file.write_all(&batch).unwrap();
            }
            start.elapsed()
        })
    });
    group.finish();
}

fn read_planning(c: &mut Criterion) {
    let dir = bench_dir();
    let config = LogConfig { segment_bytes: 8 << 20, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(&dir.path().join("read-0"), config, 0, 0, true, 0).unwrap();
    let batch = batch_64k();
    for _ in 0..512 {
        log.append_as_leader(&batch, 0, 0).unwrap();
    }
    let end = log.log_end_offset();
    let mut offset = 0;
    c.bench_function("read_plan_1mib", |b| {
        b.iter(|| {
            offset = (offset + 7919) % end;
            let info = log.read(offset, 1 << 20, end, true).unwrap();
            std::hint::black_box(info.slice.map(|s| s.length))
        })
    });
}

criterion_group!(benches, append, read_planning);
criterion_main!(benches);
