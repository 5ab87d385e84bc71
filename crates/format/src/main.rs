//! `krabka-format`: the counterpart of `kafka-storage.sh` (format, random-uuid).

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use krabka_format::meta_properties::FormatOutcome;
use krabka_format::{format_log_dir, properties, KafkaUuid, MetaProperties};

#[derive(Parser)]
#[command(name = "krabka-format", version, about = "Format krabka storage directories (like kafka-storage.sh)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Format every log directory named by the config (log.dirs, or log.dir, and metadata.log.dir).
    Format {
        /// The broker's server.properties.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
        /// The cluster id; a random one when absent.
        #[arg(short = 't', long = "cluster-id")]
        cluster_id: Option<String>,
        /// Succeed when a directory is already formatted (for this cluster and node).
        #[arg(short = 'g', long = "ignore-formatted")]
        ignore_formatted: bool,
    },
    /// Print a new random Kafka UUID, suitable as a cluster id.
    RandomUuid,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::RandomUuid => println!("{}", KafkaUuid::random()?),
        Command::Format { config, cluster_id, ignore_formatted } => {
            let text = std::fs::read_to_string(&config).with_context(|| format!("reading {}", config.display()))?;
            let props = properties::parse(&text);
            let node_id: i32 = props
                .get("node.id")
                .context("node.id is required in the config")?
                .trim()
                .parse()
                .context("node.id must be an integer")?;
            let mut dirs: Vec<String> = props
                .get("log.dirs")
                .or_else(|| props.get("log.dir"))
                .map(String::as_str)
                .unwrap_or("/tmp/kafka-logs")
                .split(',')
                .map(|d| d.trim().to_string())
                .filter(|d| !d.is_empty())
                .collect();
            if let Some(metadata_dir) = props.get("metadata.log.dir") {
                if !dirs.contains(metadata_dir) {
                    dirs.push(metadata_dir.clone());
                }
            }
            // Re-running with --ignore-formatted and no id keeps the cluster id
            // already on disk, so a start script can format unconditionally.
            let existing = match dirs.first() {
                Some(dir) if ignore_formatted => MetaProperties::read(dir.as_ref())?.map(|m| m.cluster_id),
                _ => None,
            };
            let cluster_id = match cluster_id.or(existing) {
                Some(id) => id,
                None => KafkaUuid::random()?.to_string(),
            };
            for dir in dirs {
                match format_log_dir(dir.as_ref(), &cluster_id, node_id)? {
                    FormatOutcome::Formatted(meta) => {
                        println!("Formatted {dir} with cluster.id {} node.id {}", meta.cluster_id, meta.node_id)
                    }
                    FormatOutcome::AlreadyFormatted(_) if ignore_formatted => {
                        println!("{dir} is already formatted for cluster.id {cluster_id}")
                    }
                    FormatOutcome::AlreadyFormatted(_) => bail!("{dir} is already formatted; use --ignore-formatted"),
                }
            }
        }
    }
    Ok(())
}
