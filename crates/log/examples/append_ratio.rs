//! Append of 64 KiB batches next to plain write(2) of the same bytes, in
//! rotating rounds so every side sees the same machine load (the criterion
//! bench runs them one after the other, which a noisy machine skews). A
//! third side, write(2) after the batch's CRC check, shows what the check
//! alone costs: the most the log's ratio can reach on this CPU.
//!
//! `cargo run --release -p krabka-log --example append_ratio -- [ROUNDS] [BATCHES_PER_ROUND] [SEGMENT_MIB]`
//! (defaults 40, 64 and 64: 4 MiB a round, 160 MiB a side, two rolls; the
//! log's rolls, with the fsync of the rolled segment, are part of its
//! cost). `KRABKA_BENCH_DIR` picks the disk (default: the system temp dir).
//! Prints each side's median and mean per-batch time and ratios of
//! throughputs: the median is the steady state, the mean includes the rounds
//! with a roll; and the median of the per-round ratios, each round's time
//! against the other side's measured right beside it, which drifts in
//! machine load move less than the sides' separate medians.

use std::io::Write;
use std::time::{Duration, Instant};

use krabka_log::{LogConfig, PartitionLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{NewRecord, RecordBatch, RecordBatchBuilder};

const SIDES: [&str; 3] = ["krabka-log append", "plain write(2)", "CRC check + write(2)"];
const LOG: usize = 0;
const WRITE: usize = 1;
const CHECKED: usize = 2;

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
    let mut checked_file = std::fs::File::create(dir.path().join("checked.log")).unwrap();
    // The third side: write(2) after the CRC check every append must make
    // (Kafka's too). It is the ceiling of the log's ratio on this CPU, and
    // the log against it is the log's own overhead.
    let check_then_write = |file: &mut std::fs::File| {
        RecordBatch::new(batch.clone()).unwrap().validate().unwrap();
        file.write_all(&batch).unwrap();
    };
    // One untimed round each: first-touch costs (the leader epoch
    // checkpoint, the index preallocation) are not per-batch costs.
    log.append_as_leader(&batch, 0, 0).unwrap();
    file.write_all(&batch).unwrap();
    check_then_write(&mut checked_file);
    let mut times: [Vec<Duration>; SIDES.len()] = Default::default();
    for round in 0..rounds {
        // Rotate which side goes first, so none always follows another.
        for turn in 0..SIDES.len() {
            let side = (round + turn) % SIDES.len();
            let start = Instant::now();
            for _ in 0..per_round {
                match side {
                    LOG => drop(log.append_as_leader(&batch, 0, 0).unwrap()),
                    WRITE => file.write_all(&batch).unwrap(),
                    _ => check_then_write(&mut checked_file),
                }
            }
            times[side].push(start.elapsed() / per_round);
        }
    }
    let mib_s = |d: Duration| batch.len() as f64 / d.as_secs_f64() / (1024.0 * 1024.0);
    println!("batch {} bytes, {rounds} rounds x {per_round} batches each side", batch.len());
    for (side, name) in SIDES.iter().enumerate() {
        let samples = &times[side];
        let (median, mean) = (median(samples.clone()), samples.iter().sum::<Duration>() / samples.len() as u32);
        let slowest = samples.iter().max().copied().unwrap_or_default() * per_round;
        println!(
            "{name:<22} median {median:>8.2?} ({:>5.0} MiB/s)  mean {mean:>8.2?} ({:>5.0} MiB/s) per batch, slowest round {slowest:.2?}",
            mib_s(median),
            mib_s(mean)
        );
    }
    // Throughput ratios a / b from times: b's time over a's.
    let ratios = |a: usize, b: usize| {
        let (ta, tb) = (&times[a], &times[b]);
        let mean = |t: &[Duration]| t.iter().sum::<Duration>().as_secs_f64() / t.len() as f64;
        let mut per_round: Vec<f64> = ta.iter().zip(tb).map(|(x, y)| y.as_secs_f64() / x.as_secs_f64()).collect();
        per_round.sort_unstable_by(f64::total_cmp);
        let medians = median(tb.clone()).as_secs_f64() / median(ta.clone()).as_secs_f64();
        format!(
            "median {medians:.2}, mean {:.2}, median per-round ratio {:.2}",
            mean(tb) / mean(ta),
            per_round[per_round.len() / 2]
        )
    };
    println!("ratio log / write(2): {}", ratios(LOG, WRITE));
    println!("ceiling (write(2) after the CRC check) / write(2): {}", ratios(CHECKED, WRITE));
    println!("log / (write(2) after the CRC check): {}", ratios(LOG, CHECKED));
}
