//! The command line.

use anyhow::ensure;
use clap::{ArgGroup, Parser};
use krabka_protocol::compression::Compression;
use serde_json::{json, Value};

use crate::partition::MAX_IN_FLIGHT;
use crate::payload::{PayloadKind, POOL_SEED};
use crate::verify::Depth;

/// The Java workload's batch.size: batches of about this many value bytes.
const DEFAULT_BATCH_BYTES: usize = 64 << 10;
/// The largest record value accepted (its pool window must fit an i32 span).
const MAX_RECORD_SIZE: usize = 16 << 20;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "krabka-loadgen",
    version,
    about = "Produce pre-built batches to a Kafka-compatible broker as fast as (or as paced as) asked, \
             idempotently, and verify they read back exactly once and in order.",
    group(ArgGroup::new("amount").required(true).args(["records", "seconds"]))
)]
pub struct Args {
    /// Broker address(es), host:port[,host:port...].
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long, default_value = "loadgen")]
    pub topic: String,
    /// Partitions of the topic if it is created (an existing topic keeps its own).
    #[arg(long, default_value_t = 6)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i16,
    /// Records to produce, spread evenly over the partitions.
    #[arg(long)]
    pub records: Option<u64>,
    /// Produce for this long instead of a number of records.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Bytes per record value.
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    #[arg(long, value_enum, default_value_t = PayloadKind::Random)]
    pub payload: PayloadKind,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "lz4", value_parser = parse_compression)]
    pub compression: Compression,
    /// Records per batch [default: about 64 KiB of values].
    #[arg(long)]
    pub batch_records: Option<u32>,
    /// Producers, each with its own connection, producer id and share of the partitions.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Records per second over all producers; 0: as fast as the broker takes them.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// all (or -1) or 1.
    #[arg(long, default_value = "all", value_parser = parse_acks, allow_hyphen_values = true)]
    pub acks: i16,
    /// After producing, read everything back and verify it.
    #[arg(long)]
    pub consume: bool,
    /// With --consume: readers at once, each reading and verifying every
    /// record (fetch fan-out, as that many consumer groups).
    #[arg(long, default_value_t = 1)]
    pub readers: usize,
    /// What readers check: every record decoded (key and size), or batch
    /// headers and CRCs (sequences exactly once and in order, cheaply).
    #[arg(long, value_enum, default_value_t = Depth::Records)]
    pub verify: Depth,
    /// Seed of the random payload pool (the Java workload's by default).
    #[arg(long, default_value_t = POOL_SEED, value_parser = parse_seed)]
    pub seed: i64,
    /// Produce requests in flight per connection (at most 5, for idempotence).
    #[arg(long, default_value_t = MAX_IN_FLIGHT as usize)]
    pub max_in_flight: usize,
    /// Memory for pre-built batches; longer runs reuse them in a cycle.
    #[arg(long, default_value_t = 128)]
    pub template_mib: usize,
    /// A run of --records stops sending after this long (unsent records are errors).
    #[arg(long, default_value_t = 300.0)]
    pub timeout_seconds: f64,
    /// The consumer gives up when nothing new arrives for this long.
    #[arg(long, default_value_t = 10.0)]
    pub consume_idle_seconds: f64,
    /// No broker: append the same batches with write(2) to a file per
    /// partition in this directory (removed afterwards) and report the CPU
    /// it took, the floor the broker's produce path is compared with.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["consume", "seconds", "rate"])]
    pub write_baseline: Option<std::path::PathBuf>,
}

impl Args {
    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(self.partitions >= 1, "--partitions must be at least 1");
        ensure!(self.replication_factor >= 1, "--replication-factor must be at least 1");
        ensure!(self.records.is_none_or(|n| n > 0), "--records must be positive");
        ensure!(self.seconds.is_none_or(|s| s > 0.0), "--seconds must be positive");
        ensure!(self.record_size <= MAX_RECORD_SIZE, "--record-size is at most {MAX_RECORD_SIZE}");
        ensure!(self.batch_records != Some(0), "--batch-records must be positive");
        ensure!(self.connections >= 1, "--connections must be at least 1");
        ensure!(self.readers >= 1, "--readers must be at least 1");
        ensure!(self.rate >= 0.0 && self.rate.is_finite(), "--rate must be >= 0");
        ensure!((1..=MAX_IN_FLIGHT as usize).contains(&self.max_in_flight), "--max-in-flight is 1 to {MAX_IN_FLIGHT}");
        ensure!(self.timeout_seconds > 0.0 && self.consume_idle_seconds > 0.0, "timeouts must be positive");
        Ok(())
    }

    pub fn batch_records(&self) -> u32 {
        self.batch_records.unwrap_or_else(|| (DEFAULT_BATCH_BYTES / self.record_size.max(1)).max(1) as u32)
    }

    /// The parameters as the summary line reports them.
    pub fn settings(&self, partitions: usize, connections: usize) -> Value {
        json!({
            "topic": self.topic,
            "partitions": partitions,
            "connections": connections,
            "records": self.records,
            "seconds": self.seconds,
            "record_size": self.record_size,
            "payload": format!("{:?}", self.payload).to_lowercase(),
            "compression": self.compression.name(),
            "batch_records": self.batch_records(),
            "acks": if self.acks == -1 { "all".to_string() } else { self.acks.to_string() },
            "rate": (self.rate > 0.0).then_some(self.rate),
            "max_in_flight": self.max_in_flight,
            "readers": self.consume.then_some(self.readers),
            "verify": self.consume.then(|| format!("{:?}", self.verify).to_lowercase()),
        })
    }
}

fn parse_compression(name: &str) -> Result<Compression, String> {
    let known = Compression::ALL.iter().find(|c| c.name().eq_ignore_ascii_case(name));
    known.copied().ok_or_else(|| format!("unknown codec {name:?}: none, gzip, snappy, lz4 or zstd"))
}

fn parse_acks(acks: &str) -> Result<i16, String> {
    match acks {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        // acks=0 has no responses, so nothing to verify idempotence by.
        _ => Err(format!("acks must be all or 1, not {acks:?}")),
    }
}

/// A decimal or 0x-prefixed hexadecimal seed.
fn parse_seed(seed: &str) -> Result<i64, String> {
    let parsed = match seed.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).map(|v| v as i64),
        None => seed.parse(),
    };
    parsed.map_err(|error| format!("bad seed {seed:?}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_parsers() {
        let args = Args::parse_from(["krabka-loadgen", "--records", "10", "--acks", "1", "--seed", "0x6b7261626b61"]);
        args.validate().unwrap();
        assert_eq!((args.acks, args.seed, args.compression), (1, POOL_SEED, Compression::Lz4));
        assert_eq!(args.batch_records(), 64);
        let args = Args::parse_from(["krabka-loadgen", "--seconds", "2", "--acks", "-1", "--compression", "zstd"]);
        assert_eq!((args.acks, args.compression), (-1, Compression::Zstd));
        assert!(Args::try_parse_from(["krabka-loadgen"]).is_err(), "--records or --seconds is required");
        assert!(Args::try_parse_from(["krabka-loadgen", "--records", "1", "--seconds", "1"]).is_err());
        assert!(Args::try_parse_from(["krabka-loadgen", "--records", "1", "--acks", "0"]).is_err());
        let too_many = Args::parse_from(["krabka-loadgen", "--records", "1", "--max-in-flight", "6"]);
        assert!(too_many.validate().is_err());
    }
}
