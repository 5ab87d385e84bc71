//! Kafka's `quorum-state` file: the election state a KRaft node must
//! remember across a restart (its epoch, its vote, the leader it knows), in
//! the metadata partition's directory (`__cluster_metadata-0/quorum-state`).
//!
//! The format is Kafka's, so a directory moves between Apache Kafka and
//! krabka either way: one line of JSON, `QuorumStateData` at the version
//! the quorum's `kraft.version` implies, plus `data_version`:
//! - version 0 (static voters, `controller.quorum.voters`): `clusterId`,
//!   `leaderId`, `leaderEpoch`, `votedId`, `appliedOffset`, `currentVoters`;
//! - version 1 (KIP-853, dynamic voters): `leaderId`, `leaderEpoch`,
//!   `votedId`, `votedDirectoryId`.
//!
//! It is replaced atomically (a synced temporary sibling renamed over it,
//! then the directory synced): a vote that was sent was durable first, and
//! a crash at any point leaves the old state or the new, never a mix.

use std::io;
use std::path::Path;

use krabka_protocol::Uuid;
use serde_json::{Map, Value};

use crate::fsutil::atomic_write;

pub const FILE_NAME: &str = "quorum-state";
/// The highest `data_version` this store reads and writes.
pub const HIGHEST_VERSION: i16 = 1;

/// The file's content; -1 is "none", as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumState {
    pub leader_epoch: i32,
    pub leader_id: i32,
    pub voted_id: i32,
    /// The directory id of the voter voted for (version 1; zero otherwise).
    pub voted_directory_id: Uuid,
    /// The static voter set (version 0 only; None when not written).
    pub current_voters: Option<Vec<i32>>,
}

/// Writes `state` as `version` into `dir`'s `quorum-state`, durably.
pub fn write(dir: &Path, state: &QuorumState, version: i16) -> io::Result<()> {
    atomic_write(&dir.join(FILE_NAME), to_json(state, version)?.as_bytes())
}

/// The state `dir` holds, None when it has no `quorum-state` file.
pub fn read(dir: &Path) -> io::Result<Option<QuorumState>> {
    match std::fs::read(dir.join(FILE_NAME)) {
        Ok(bytes) => from_json(&bytes).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn invalid(reason: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("quorum-state: {}", reason.into()))
}

/// Written field by field, in the schema's order as Kafka's converter
/// writes them, so the file is byte for byte the one Kafka writes (every
/// value is a number or a base64 uuid: nothing needs escaping).
fn to_json(state: &QuorumState, version: i16) -> io::Result<String> {
    let QuorumState { leader_epoch, leader_id, voted_id, .. } = state;
    match version {
        0 => {
            let voters = match &state.current_voters {
                Some(ids) => {
                    let entries: Vec<String> = ids.iter().map(|id| format!("{{\"voterId\":{id}}}")).collect();
                    format!("[{}]", entries.join(","))
                }
                None => "null".to_string(),
            };
            Ok(format!(
                "{{\"clusterId\":\"\",\"leaderId\":{leader_id},\"leaderEpoch\":{leader_epoch},\"votedId\":{voted_id},\
                 \"appliedOffset\":0,\"currentVoters\":{voters},\"data_version\":0}}"
            ))
        }
        1 => Ok(format!(
            "{{\"leaderId\":{leader_id},\"leaderEpoch\":{leader_epoch},\"votedId\":{voted_id},\
             \"votedDirectoryId\":\"{}\",\"data_version\":1}}",
            state.voted_directory_id
        )),
        other => Err(invalid(format!("no data_version {other}"))),
    }
}

fn from_json(bytes: &[u8]) -> io::Result<QuorumState> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    let object = value.as_object().ok_or_else(|| invalid("not a JSON object"))?;
    let version = object.get("data_version").and_then(Value::as_i64).ok_or_else(|| invalid("no data_version"))?;
    if !(0..=i64::from(HIGHEST_VERSION)).contains(&version) {
        return Err(invalid(format!("data_version {version} is newer than this krabka reads")));
    }
    let voted_directory_id = match object.get("votedDirectoryId") {
        Some(Value::String(text)) if version >= 1 => {
            Uuid::parse(text).ok_or_else(|| invalid(format!("votedDirectoryId {text:?}")))?
        }
        _ => Uuid::ZERO,
    };
    let current_voters = match object.get("currentVoters") {
        Some(Value::Array(voters)) if version == 0 => Some(
            voters
                .iter()
                .map(|voter| int(voter.as_object().unwrap_or(&Map::new()), "voterId", None))
                .collect::<io::Result<Vec<i32>>>()?,
        ),
        _ => None,
    };
    Ok(QuorumState {
        leader_epoch: int(object, "leaderEpoch", Some(-1))?,
        leader_id: int(object, "leaderId", Some(-1))?,
        voted_id: int(object, "votedId", Some(-1))?,
        voted_directory_id,
        current_voters,
    })
}

/// An i32 field; `default` when it is absent (None: it is required).
fn int(object: &Map<String, Value>, name: &str, default: Option<i32>) -> io::Result<i32> {
    match object.get(name) {
        Some(value) => {
            value.as_i64().and_then(|v| i32::try_from(v).ok()).ok_or_else(|| invalid(format!("{name} is {value}")))
        }
        None => default.ok_or_else(|| invalid(format!("no {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(current_voters: Option<Vec<i32>>, voted_directory_id: Uuid) -> QuorumState {
        QuorumState { leader_epoch: 7, leader_id: 2, voted_id: 3, voted_directory_id, current_voters }
    }

    #[test]
    fn both_versions_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let v0 = state(Some(vec![1, 2, 3]), Uuid::ZERO);
        write(dir.path(), &v0, 0).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(v0));
        let v1 = state(None, Uuid([9; 16]));
        write(dir.path(), &v1, 1).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(v1));
        assert!(!dir.path().join("quorum-state.tmp").exists());
    }

    /// The file Apache Kafka 4.3.1 wrote for a combined node (static voter
    /// 1, leader of epoch 1), read from its `__cluster_metadata-0`.
    const KAFKA_V0: &str = r#"{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}"#;

    #[test]
    fn writes_the_bytes_kafka_writes() {
        let dir = tempfile::tempdir().unwrap();
        let state = QuorumState {
            leader_epoch: 1,
            leader_id: 1,
            voted_id: -1,
            voted_directory_id: Uuid::ZERO,
            current_voters: Some(vec![1]),
        };
        write(dir.path(), &state, 0).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(), KAFKA_V0);
        assert_eq!(read(dir.path()).unwrap(), Some(state));
    }

    /// Files shaped as Apache Kafka 4.3.1 writes them (field order and the
    /// sentinel values included).
    #[test]
    fn reads_the_files_kafka_writes() {
        let dir = tempfile::tempdir().unwrap();
        let kafka_v1 = r#"{"leaderId":1,"leaderEpoch":3,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}"#;
        std::fs::write(dir.path().join(FILE_NAME), kafka_v1).unwrap();
        let expected = QuorumState {
            leader_epoch: 3,
            leader_id: 1,
            voted_id: -1,
            voted_directory_id: Uuid::ZERO,
            current_voters: None,
        };
        assert_eq!(read(dir.path()).unwrap(), Some(expected));
        let kafka_v0 = r#"{"clusterId":"","leaderId":-1,"leaderEpoch":2,"votedId":1,"appliedOffset":0,"currentVoters":[{"voterId":1},{"voterId":2}],"data_version":0}"#;
        std::fs::write(dir.path().join(FILE_NAME), kafka_v0).unwrap();
        let state = read(dir.path()).unwrap().unwrap();
        assert_eq!((state.leader_epoch, state.leader_id, state.voted_id), (2, -1, 1));
        assert_eq!(state.current_voters, Some(vec![1, 2]));
    }

    #[test]
    fn a_file_it_cannot_read_is_an_error_not_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        for text in
            ["", "{", "[]", r#"{"leaderEpoch":1}"#, r#"{"leaderEpoch":"x","data_version":1}"#, r#"{"data_version":2}"#]
        {
            std::fs::write(dir.path().join(FILE_NAME), text).unwrap();
            assert!(read(dir.path()).is_err(), "{text:?} was accepted");
        }
    }
}
