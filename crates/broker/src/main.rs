//! `krabka-broker server.properties`: the broker binary.
//!
//! Skeleton stage: it reads the config, checks the log directory is formatted,
//! binds the listener and answers nothing yet. The real server (network layer,
//! request dispatch, handlers) arrives with the single-node broker issue.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Parser;
use krabka_format::{properties, MetaProperties};

#[derive(Parser)]
#[command(name = "krabka-broker", version, about = "An Apache Kafka-compatible broker")]
struct Cli {
    /// The broker's server.properties (Kafka key names).
    config: PathBuf,
    /// Override a config key: --override key=value (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let text = std::fs::read_to_string(&cli.config).with_context(|| format!("reading {}", cli.config.display()))?;
    let mut config: BTreeMap<String, String> = properties::parse(&text);
    for entry in &cli.overrides {
        let Some((key, value)) = entry.split_once('=') else { bail!("--override takes key=value, got {entry:?}") };
        config.insert(key.trim().to_string(), value.to_string());
    }
    let log_dir = config
        .get("log.dirs")
        .or_else(|| config.get("log.dir"))
        .map(|dirs| dirs.split(',').next().unwrap_or_default().trim().to_string())
        .unwrap_or_else(|| "/tmp/kafka-logs".into());
    let Some(meta) = MetaProperties::read(log_dir.as_ref())? else {
        bail!("{log_dir} is not formatted: run krabka-format format -c {}", cli.config.display())
    };
    let listener = config.get("listeners").map(String::as_str).unwrap_or("PLAINTEXT://:9092");
    let address = listener.split(',').next().unwrap_or_default();
    let address = address.split_once("://").map(|(_, a)| a).unwrap_or(address);
    let address = if address.starts_with(':') { format!("0.0.0.0{address}") } else { address.to_string() };
    let socket = TcpListener::bind(&address).with_context(|| format!("binding {address}"))?;
    println!(
        "krabka-broker skeleton: node {} of cluster {} bound {}; not serving Kafka requests yet",
        meta.node_id,
        meta.cluster_id,
        socket.local_addr()?
    );
    // Accept and close: clients see a refused conversation, not a hang.
    for stream in socket.incoming() {
        drop(stream);
    }
    Ok(())
}
