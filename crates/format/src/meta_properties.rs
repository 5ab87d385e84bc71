//! `meta.properties`: the file that marks a log directory as belonging to one
//! cluster and one node (Kafka's KRaft format, version 1).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::properties;
use krabka_protocol::Uuid as KafkaUuid;

pub const META_PROPERTIES_FILE: &str = "meta.properties";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
    pub directory_id: KafkaUuid,
}

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is invalid: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("{path} is already formatted for cluster {cluster_id} node {node_id}")]
    AlreadyFormatted { path: PathBuf, cluster_id: String, node_id: i32 },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> FormatError + '_ {
    move |source| FormatError::Io { path: path.to_path_buf(), source }
}

/// What formatting a directory did.
#[derive(Debug, PartialEq, Eq)]
pub enum FormatOutcome {
    Formatted(MetaProperties),
    /// It was formatted before for the same cluster and node: left untouched.
    AlreadyFormatted(MetaProperties),
}

impl MetaProperties {
    /// Reads `meta.properties` from a log directory; `Ok(None)` when absent.
    pub fn read(log_dir: &Path) -> Result<Option<Self>, FormatError> {
        let path = log_dir.join(META_PROPERTIES_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(&path)(e)),
        };
        let map = properties::parse(&text);
        let invalid = |reason: String| FormatError::Invalid { path: path.clone(), reason };
        let field = |key: &str| map.get(key).ok_or_else(|| invalid(format!("missing {key}")));
        let version = field("version")?;
        if version != "1" {
            return Err(invalid(format!("unsupported version {version}; only KRaft version 1 is supported")));
        }
        let node_id = field("node.id")?.parse::<i32>().map_err(|e| invalid(format!("node.id: {e}")))?;
        let cluster_id = field("cluster.id")?.clone();
        let directory_id = match map.get("directory.id") {
            Some(text) => {
                KafkaUuid::parse(text).ok_or_else(|| invalid(format!("directory.id {text:?} is not a Kafka UUID")))?
            }
            None => KafkaUuid::ZERO,
        };
        Ok(Some(MetaProperties { cluster_id, node_id, directory_id }))
    }

    fn render(&self) -> String {
        properties::render(
            "Written by krabka-format",
            &[
                ("cluster.id", self.cluster_id.clone()),
                ("directory.id", self.directory_id.to_string()),
                ("node.id", self.node_id.to_string()),
                ("version", "1".to_string()),
            ],
        )
    }
}

/// Formats one log directory for `cluster_id`/`node_id`: creates it, writes
/// `meta.properties` crash-safely (temp file, fsync, rename, fsync of the dir).
/// A directory already formatted for the same cluster and node is left alone;
/// one formatted for another is an error.
pub fn format_log_dir(log_dir: &Path, cluster_id: &str, node_id: i32) -> Result<FormatOutcome, FormatError> {
    format_log_dir_with_directory_id(log_dir, cluster_id, node_id, None)
}

/// [`format_log_dir`] with the directory id to write, when it is given
/// rather than random: a KIP-853 voter's metadata log directory takes the
/// id its `--initial-controllers` entry names. An existing directory keeps
/// the id it has.
pub fn format_log_dir_with_directory_id(
    log_dir: &Path,
    cluster_id: &str,
    node_id: i32,
    directory_id: Option<KafkaUuid>,
) -> Result<FormatOutcome, FormatError> {
    if cluster_id.is_empty() {
        return Err(FormatError::Invalid { path: log_dir.to_path_buf(), reason: "empty cluster id".into() });
    }
    if let Some(existing) = MetaProperties::read(log_dir)? {
        if existing.cluster_id == cluster_id && existing.node_id == node_id {
            return Ok(FormatOutcome::AlreadyFormatted(existing));
        }
        return Err(FormatError::AlreadyFormatted {
            path: log_dir.to_path_buf(),
            cluster_id: existing.cluster_id,
            node_id: existing.node_id,
        });
    }
    fs::create_dir_all(log_dir).map_err(io_error(log_dir))?;
    let meta = MetaProperties {
        cluster_id: cluster_id.to_string(),
        node_id,
        directory_id: match directory_id {
            Some(id) => id,
            None => KafkaUuid::random().map_err(io_error(log_dir))?,
        },
    };
    let final_path = log_dir.join(META_PROPERTIES_FILE);
    let temp_path = log_dir.join("meta.properties.tmp");
    {
        let mut file = fs::File::create(&temp_path).map_err(io_error(&temp_path))?;
        file.write_all(meta.render().as_bytes()).map_err(io_error(&temp_path))?;
        file.sync_all().map_err(io_error(&temp_path))?;
    }
    fs::rename(&temp_path, &final_path).map_err(io_error(&final_path))?;
    fs::File::open(log_dir).and_then(|dir| dir.sync_all()).map_err(io_error(log_dir))?;
    Ok(FormatOutcome::Formatted(meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("logs");
        let outcome = format_log_dir(&log_dir, "MkU3OEVBNTcwNTJENDM2Qg", 1).unwrap();
        let FormatOutcome::Formatted(written) = outcome else { panic!("expected a fresh format") };
        let read = MetaProperties::read(&log_dir).unwrap().unwrap();
        assert_eq!(read, written);
        assert!(!log_dir.join("meta.properties.tmp").exists());
    }

    #[test]
    fn reformat_same_identity_is_idempotent_other_identity_refused() {
        let dir = tempfile::tempdir().unwrap();
        format_log_dir(dir.path(), "cluster-a", 1).unwrap();
        assert!(matches!(format_log_dir(dir.path(), "cluster-a", 1).unwrap(), FormatOutcome::AlreadyFormatted(_)));
        assert!(matches!(format_log_dir(dir.path(), "cluster-b", 1), Err(FormatError::AlreadyFormatted { .. })));
        assert!(matches!(format_log_dir(dir.path(), "cluster-a", 2), Err(FormatError::AlreadyFormatted { .. })));
    }

    #[test]
    fn a_given_directory_id_is_written_an_existing_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let id = KafkaUuid::parse("hcJXlCj7TresRGXDB2gi2w").unwrap();
        format_log_dir_with_directory_id(dir.path(), "cluster-a", 1, Some(id)).unwrap();
        assert_eq!(MetaProperties::read(dir.path()).unwrap().unwrap().directory_id, id);
        let other = KafkaUuid::parse("RER2Vg5VN9FqA8z6oK9SHQ").unwrap();
        let again = format_log_dir_with_directory_id(dir.path(), "cluster-a", 1, Some(other)).unwrap();
        assert!(matches!(again, FormatOutcome::AlreadyFormatted(meta) if meta.directory_id == id));
    }

    #[test]
    fn reads_file_written_by_kafka() {
        let dir = tempfile::tempdir().unwrap();
        // As kafka-storage.sh format writes it.
        fs::write(
            dir.path().join(META_PROPERTIES_FILE),
            "#\n#Mon Nov 30 03:00:00 UTC 2026\nnode.id=1\ndirectory.id=AAAAAAAAAAEAAAAAAAAAAg\nversion=1\ncluster.id=4L6g3nShT-eMCtK--X86sw\n",
        )
        .unwrap();
        let meta = MetaProperties::read(dir.path()).unwrap().unwrap();
        assert_eq!(meta.node_id, 1);
        assert_eq!(meta.cluster_id, "4L6g3nShT-eMCtK--X86sw");
        assert_eq!(meta.directory_id.to_string(), "AAAAAAAAAAEAAAAAAAAAAg");
    }

    #[test]
    fn zookeeper_era_version_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(META_PROPERTIES_FILE), "version=0\nbroker.id=1\ncluster.id=x\n").unwrap();
        assert!(matches!(MetaProperties::read(dir.path()), Err(FormatError::Invalid { .. })));
    }
}
