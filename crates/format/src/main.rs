//! `krabka-format`: the counterpart of `kafka-storage.sh` (format, random-uuid).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use krabka_format::dynamic_quorum::QuorumFlags;
use krabka_format::{properties, storage, KafkaUuid};

#[derive(Parser)]
#[command(name = "krabka-format", version, about = "Format krabka storage directories (like kafka-storage.sh)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Format every log directory named by the config (log.dirs, or log.dir, and metadata.log.dir).
    Format(FormatArgs),
    /// Print a new random Kafka UUID, suitable as a cluster id.
    RandomUuid,
}

#[derive(Args)]
struct FormatArgs {
    /// The broker's server.properties.
    #[arg(short = 'c', long = "config")]
    config: PathBuf,
    /// The cluster id; a random one when absent.
    #[arg(short = 't', long = "cluster-id")]
    cluster_id: Option<String>,
    /// Succeed when a directory is already formatted (for this cluster and node).
    #[arg(short = 'g', long = "ignore-formatted")]
    ignore_formatted: bool,
    /// Initialize this controller as the only voter of a dynamic (KIP-853) quorum.
    #[arg(short = 's', long = "standalone")]
    standalone: bool,
    /// Initialize a node without a dynamic quorum topology (it joins one that exists).
    #[arg(short = 'N', long = "no-initial-controllers")]
    no_initial_controllers: bool,
    /// The initial voters of a dynamic quorum, id@host:port:directoryId,... (the same on every node).
    #[arg(short = 'I', long = "initial-controllers", value_name = "VOTERS")]
    initial_controllers: Option<String>,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::RandomUuid => println!("{}", KafkaUuid::random()?),
        Command::Format(args) => format(args)?,
    }
    Ok(())
}

fn format(args: FormatArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.config).with_context(|| format!("reading {}", args.config.display()))?;
    let props = properties::parse(&text);
    let flags = QuorumFlags {
        standalone: args.standalone,
        no_initial_controllers: args.no_initial_controllers,
        initial_controllers: args.initial_controllers,
    };
    for line in storage::format(&props, args.cluster_id, &flags, args.ignore_formatted)? {
        println!("{line}");
    }
    Ok(())
}
