//! Kafka's small text checkpoint files, byte-compatible:
//!
//! - per log directory: `recovery-point-offset-checkpoint`,
//!   `log-start-offset-checkpoint`, `replication-offset-checkpoint`,
//!   `cleaner-offset-checkpoint` — version `0`, a count, then
//!   `topic partition offset` lines;
//! - per partition: `leader-epoch-checkpoint` — version `0`, a count, then
//!   `epoch start_offset` lines; `partition.metadata` — `version: 0` and
//!   `topic_id: <uuid>`.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use krabka_protocol::Uuid;

use crate::fsutil::atomic_write;

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
pub const PARTITION_METADATA: &str = "partition.metadata";

const CHECKPOINT_VERSION: &str = "0";

fn invalid(path: &Path, reason: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {reason}", path.display()))
}

/// Reads a versioned checkpoint's entry lines; `Ok(None)` when absent.
fn read_lines(path: &Path) -> io::Result<Option<Vec<Vec<String>>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut lines = text.lines();
    match lines.next() {
        Some(CHECKPOINT_VERSION) => {}
        other => return Err(invalid(path, format!("unsupported version line {other:?}"))),
    }
    let count: usize =
        lines.next().and_then(|l| l.trim().parse().ok()).ok_or_else(|| invalid(path, "missing or bad entry count"))?;
    let entries: Vec<Vec<String>> =
        lines.filter(|l| !l.trim().is_empty()).map(|l| l.split_whitespace().map(str::to_owned).collect()).collect();
    if entries.len() != count {
        return Err(invalid(path, format!("expected {count} entries, found {}", entries.len())));
    }
    Ok(Some(entries))
}

fn write_lines(path: &Path, entries: &[String]) -> io::Result<()> {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for entry in entries {
        text.push_str(entry);
        text.push('\n');
    }
    atomic_write(path, text.as_bytes())
}

/// A topic-partition as the checkpoints name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition { topic: topic.into(), partition }
    }

    /// The partition's directory name, `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses `<topic>-<partition>` (topics may contain '-').
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        let partition = partition.parse().ok().filter(|p: &i32| *p >= 0)?;
        (!topic.is_empty()).then(|| TopicPartition::new(topic, partition))
    }

    /// A future replica's directory name (KIP-113: the copy a move between
    /// log directories fills), `<topic>-<partition>.<unique>-future`, as
    /// Kafka names it: `unique` is 32 hex digits.
    pub fn future_dir_name(&self, unique: &[u8; 16]) -> String {
        let hex: String = unique.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}.{hex}-future", self.dir_name())
    }

    /// Parses a future replica's directory name ([`Self::future_dir_name`]).
    pub fn from_future_dir_name(name: &str) -> Option<Self> {
        let (current, unique) = name.strip_suffix("-future")?.rsplit_once('.')?;
        let hex = unique.len() == 32 && unique.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then(|| Self::from_dir_name(current)).flatten()
    }
}

/// Reads an offsets checkpoint (`topic partition offset` lines).
pub fn read_offsets(path: &Path) -> io::Result<BTreeMap<TopicPartition, i64>> {
    let mut out = BTreeMap::new();
    for entry in read_lines(path)?.unwrap_or_default() {
        let [topic, partition, offset] = entry.as_slice() else {
            return Err(invalid(path, format!("bad entry {entry:?}")));
        };
        let partition = partition.parse().map_err(|e| invalid(path, e))?;
        let offset = offset.parse().map_err(|e| invalid(path, e))?;
        out.insert(TopicPartition::new(topic.clone(), partition), offset);
    }
    Ok(out)
}

/// Writes an offsets checkpoint atomically.
pub fn write_offsets(path: &Path, offsets: &BTreeMap<TopicPartition, i64>) -> io::Result<()> {
    let lines: Vec<String> =
        offsets.iter().map(|(tp, offset)| format!("{} {} {offset}", tp.topic, tp.partition)).collect();
    write_lines(path, &lines)
}

/// One leader epoch and the first offset written in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

pub fn read_leader_epochs(path: &Path) -> io::Result<Vec<EpochEntry>> {
    let mut out = Vec::new();
    for entry in read_lines(path)?.unwrap_or_default() {
        let [epoch, start_offset] = entry.as_slice() else {
            return Err(invalid(path, format!("bad entry {entry:?}")));
        };
        out.push(EpochEntry {
            epoch: epoch.parse().map_err(|e| invalid(path, e))?,
            start_offset: start_offset.parse().map_err(|e| invalid(path, e))?,
        });
    }
    Ok(out)
}

pub fn write_leader_epochs(path: &Path, entries: &[EpochEntry]) -> io::Result<()> {
    let lines: Vec<String> = entries.iter().map(|e| format!("{} {}", e.epoch, e.start_offset)).collect();
    write_lines(path, &lines)
}

/// `partition.metadata`: ties the directory to its topic id.
pub fn read_partition_metadata(path: &Path) -> io::Result<Option<Uuid>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut topic_id = None;
    for line in text.lines() {
        match line.split_once(':').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("version", "0")) => {}
            Some(("version", other)) => return Err(invalid(path, format!("unsupported version {other}"))),
            Some(("topic_id", id)) => topic_id = Some(Uuid::parse(id).ok_or_else(|| invalid(path, "bad topic_id"))?),
            _ => return Err(invalid(path, format!("unexpected line {line:?}"))),
        }
    }
    topic_id.map(Some).ok_or_else(|| invalid(path, "missing topic_id"))
}

pub fn write_partition_metadata(path: &Path, topic_id: &Uuid) -> io::Result<()> {
    atomic_write(path, format!("version: 0\ntopic_id: {topic_id}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_in_kafka_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        let mut offsets = BTreeMap::new();
        offsets.insert(TopicPartition::new("orders", 0), 42);
        offsets.insert(TopicPartition::new("my-topic", 11), 7);
        write_offsets(&path, &offsets).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0\n2\nmy-topic 11 7\norders 0 42\n");
        assert_eq!(read_offsets(&path).unwrap(), offsets);
        assert!(read_offsets(&dir.path().join("absent")).unwrap().is_empty());
    }

    #[test]
    fn corrupt_checkpoints_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        for text in ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n", "0\n1\na 0\n", ""] {
            std::fs::write(&path, text).unwrap();
            assert!(read_offsets(&path).is_err(), "{text:?}");
        }
    }

    #[test]
    fn leader_epochs_and_partition_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        let entries = vec![EpochEntry { epoch: 0, start_offset: 0 }, EpochEntry { epoch: 3, start_offset: 120 }];
        write_leader_epochs(&path, &entries).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0\n2\n0 0\n3 120\n");
        assert_eq!(read_leader_epochs(&path).unwrap(), entries);

        let meta = dir.path().join(PARTITION_METADATA);
        let id = Uuid::parse("AAAAAAAAAAEAAAAAAAAAAg").unwrap();
        write_partition_metadata(&meta, &id).unwrap();
        assert_eq!(std::fs::read_to_string(&meta).unwrap(), "version: 0\ntopic_id: AAAAAAAAAAEAAAAAAAAAAg\n");
        assert_eq!(read_partition_metadata(&meta).unwrap(), Some(id));
    }

    #[test]
    fn partition_dir_names() {
        assert_eq!(TopicPartition::from_dir_name("my-topic-12"), Some(TopicPartition::new("my-topic", 12)));
        assert_eq!(TopicPartition::from_dir_name("nodash"), None);
        assert_eq!(TopicPartition::from_dir_name("topic-x"), None);
        assert_eq!(TopicPartition::from_dir_name("t--1"), Some(TopicPartition::new("t-", 1)));
        assert_eq!(TopicPartition::new("a.b", 0).dir_name(), "a.b-0");
    }
}
