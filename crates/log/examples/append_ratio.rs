//! Append of 64 KiB batches next to plain write(2) of the same bytes, in
//! alternating rounds so both see the same machine load (the criterion bench
//! runs them one after the other, which a noisy machine skews).
//!
//! `cargo run --release -p krabka-log --example append_ratio -- [ROUNDS] [BATCHES_PER_ROUND] [SEGMENT_MIB]`
//! (defaults 40, 64 and 64: 4 MiB a round, 160 MiB a side, two rolls; the
//! log's rolls, with the fsync of the rolled segment, are part of its cost). `KRABKA_BENCH_DIR` picks the disk
//! (default: the system temp dir). Prints each side's median and mean
//! per-batch time and the ratios of throughputs (log / write(2)): the
//! median is the steady state, the mean includes the rounds with a roll;
//! and the median of the per-round ratios, each round's log time against
//! the write(2) time measured right beside it, which drifts in machine load
//! move less than the two sides' separate medians.

use std::io::Write;
use std::time::{Duration, Instant};

use krabka_log::{LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatchBuilder};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(40);
    let per_round: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(64);
    let segment_mib: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(64);
    let dir = match std::env::var("KRABKA_BENCH_DIR") {
        Ok(dir) => tempfile::tempdir_in(dir).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    };
    // The criterion bench's batch: 64 KiB of 1,000-byte records, uncompressed.
    let value = vec![0x5au8; 1000];
    let mut builder = RecordBatchBuilder::new(Compression::None);
    while builder.uncompressed_bytes() + 1100 < 64 * 1024 {
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&value), headers: &[] }).unwrap();
    }
    let batch = builder.build().unwrap().into_bytes();

    let config = LogConfig { segment_bytes: segment_mib << 20, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(&dir.path().join("ratio-0"), config, 0, 0, true, 0).unwrap();
    let mut file = std::fs::File::create(dir.path().join("plain.log")).unwrap();
    // One untimed round each: first-touch costs (the leader epoch
    // checkpoint, the index preallocation) are not per-batch costs.
    log.append_as_leader(&batch, 0, 0).unwrap();
    file.write_all(&batch).unwrap();
    let (mut log_times, mut write_times) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which side goes first, so neither always follows the other.
        for side in [round % 2, 1 - round % 2] {
            let start = Instant::now();
            for _ in 0..per_round {
                if side == 0 {
                    log.append_as_leader(&batch, 0, 0).unwrap();
                } else {
                    file.write_all(&batch).unwrap();
                }
            }
            let per_batch = start.elapsed() / per_round;
            if side == 0 { &mut log_times } else { &mut write_times }.push(per_batch);
        }
    }
    let mean = |samples: &[Duration]| samples.iter().sum::<Duration>() / samples.len() as u32;
    let (log_mean, write_mean) = (mean(&log_times), mean(&write_times));
    let worst = |samples: &[Duration]| samples.iter().max().copied().unwrap_or_default() * per_round;
    let (log_worst, write_worst) = (worst(&log_times), worst(&write_times));
    let (log_median, write_median) = (median(log_times.clone()), median(write_times.clone()));
    let mib_s = |d: Duration| batch.len() as f64 / d.as_secs_f64() / (1024.0 * 1024.0);
    println!("batch {} bytes, {rounds} rounds x {per_round} batches each side", batch.len());
    for (name, median, mean) in
        [("krabka-log append", log_median, log_mean), ("plain write(2)", write_median, write_mean)]
    {
        println!(
            "{name:<18} median {median:>8.2?} ({:>5.0} MiB/s)  mean {mean:>8.2?} ({:>5.0} MiB/s) per batch",
            mib_s(median),
            mib_s(mean)
        );
    }
    println!("slowest round: log {log_worst:.2?}, write(2) {write_worst:.2?}");
    let ratio = |log: Duration, write: Duration| write.as_secs_f64() / log.as_secs_f64();
    let mut per_round: Vec<f64> = log_times.iter().zip(&write_times).map(|(&log, &write)| ratio(log, write)).collect();
    per_round.sort_unstable_by(f64::total_cmp);
    println!(
        "ratio log / write(2): median {:.2}, mean {:.2}, median per-round ratio {:.2}",
        ratio(log_median, write_median),
        ratio(log_mean, write_mean),
        per_round[per_round.len() / 2]
    );
}
