//! `kafka-storage.sh format` as a function: every log directory a
//! config names formatted (`meta.properties`), and with KIP-853's flags
//! the metadata log directory's bootstrap snapshot first. The binary and
//! tests that format nodes the way an operator does both call it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use crate::bootstrap_snapshot;
use crate::dynamic_quorum::{self, InitialVoters, QuorumFlags};
use crate::meta_properties::{format_log_dir_with_directory_id, FormatOutcome};
use crate::{KafkaUuid, MetaProperties};

/// Formats every directory `props` (a server.properties) names, as
/// `kafka-storage.sh format` does, with `flags` for a dynamic quorum; what
/// it did, one line each.
pub fn format(
    props: &BTreeMap<String, String>,
    cluster_id: Option<String>,
    flags: &QuorumFlags,
    ignore_formatted: bool,
) -> anyhow::Result<Vec<String>> {
    let node_id: i32 = props
        .get("node.id")
        .context("node.id is required in the config")?
        .trim()
        .parse()
        .context("node.id must be an integer")?;
    let initial_voters = dynamic_quorum::initial_voters(props, node_id, flags, KafkaUuid::random)?;
    let (dirs, metadata_dir) = log_dirs(props);
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
    let mut done = Vec::new();
    for dir in &dirs {
        let quorum = initial_voters.as_ref().filter(|_| *dir == metadata_dir);
        format_dir(dir, &cluster_id, node_id, quorum, ignore_formatted, &mut done)?;
    }
    Ok(done)
}

/// The directories to format (log.dirs, else log.dir, then
/// metadata.log.dir if it is not one of them) and the metadata log
/// directory (metadata.log.dir, else the first of the others), as Kafka
/// picks them.
fn log_dirs(props: &BTreeMap<String, String>) -> (Vec<String>, String) {
    let mut dirs: Vec<String> = props
        .get("log.dirs")
        .or_else(|| props.get("log.dir"))
        .map(String::as_str)
        .unwrap_or("/tmp/kafka-logs")
        .split(',')
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .collect();
    let metadata_dir = match props.get("metadata.log.dir") {
        Some(dir) => {
            if !dirs.contains(dir) {
                dirs.push(dir.clone());
            }
            dir.clone()
        }
        None => dirs.first().cloned().unwrap_or_default(),
    };
    (dirs, metadata_dir)
}

/// Formats one directory; the metadata log directory of a dynamic quorum
/// (`quorum`) first gets its bootstrap snapshot, and, when this node is one
/// of the initial voters, the directory id its entry names.
fn format_dir(
    dir: &str,
    cluster_id: &str,
    node_id: i32,
    quorum: Option<&InitialVoters>,
    ignore_formatted: bool,
    done: &mut Vec<String>,
) -> anyhow::Result<()> {
    let path = Path::new(dir);
    let mut directory_id = None;
    if let Some(quorum) = quorum.filter(|_| matches!(MetaProperties::read(path), Ok(None))) {
        // Before meta.properties, as Kafka does: it marks the directory
        // formatted, so a crash in between leaves one that formats again.
        let snapshot = bootstrap_snapshot::encode(&quorum.voters, &quorum.controller_listener, now_ms())?;
        let written = bootstrap_snapshot::write(path, &snapshot)?;
        directory_id = quorum.voter(node_id).map(|voter| voter.directory_id);
        let kind = if directory_id.is_some() { "voter" } else { "non-voter" };
        let voters: Vec<String> = quorum.voters.iter().map(ToString::to_string).collect();
        done.push(format!("Wrote {} ({kind}; initial voters {})", written.display(), voters.join(",")));
    }
    match format_log_dir_with_directory_id(path, cluster_id, node_id, directory_id)? {
        FormatOutcome::Formatted(meta) => {
            done.push(format!("Formatted {dir} with cluster.id {} node.id {}", meta.cluster_id, meta.node_id))
        }
        FormatOutcome::AlreadyFormatted(_) if ignore_formatted => {
            done.push(format!("{dir} is already formatted for cluster.id {cluster_id}"))
        }
        FormatOutcome::AlreadyFormatted(_) => bail!("{dir} is already formatted; use --ignore-formatted"),
    }
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as i64)
}
