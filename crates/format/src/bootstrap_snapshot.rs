//! The bootstrap snapshot a KIP-853 format writes: the first snapshot of
//! `__cluster_metadata`, `00000000000000000000-0000000000.checkpoint`,
//! which tells the metadata log its initial voters before any record exists.
//!
//! Byte for byte what Apache Kafka 4.3.1's `kafka-storage.sh format
//! --standalone | --initial-controllers` writes (but for the times and so
//! the CRCs), so either tool's directories start either broker:
//!
//! 1. a control batch at offset 0, partition leader epoch 0, with three
//!    records: SnapshotHeaderRecord (version 0, last contained log
//!    timestamp: now), KRaftVersionRecord (version 0, kraft.version 1) and
//!    VotersRecord (version 0; per voter: id, directory id, one endpoint on
//!    the controller listener, supported kraft.version 0 to 1);
//! 2. a control batch at offset 3 with the SnapshotFooterRecord (version 0).
//!
//! The file is written through a temporary sibling, synced, renamed and
//! made read-only (mode 0400), as Kafka's `FileRawSnapshotWriter.freeze`
//! leaves it. Nothing else goes into `__cluster_metadata-0`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use krabka_protocol::records::{control_batch_of, ControlType, RecordBatchMut};
use krabka_protocol::voters_record::{Endpoint, KRaftVersionFeature, Voter};
use krabka_protocol::{KRaftVersionRecord, Message, SnapshotFooterRecord, SnapshotHeaderRecord, VotersRecord};

use crate::dynamic_voters::DynamicVoter;

/// The metadata log's partition directory, under the metadata log dir.
pub const CLUSTER_METADATA_DIR: &str = "__cluster_metadata-0";
/// Snapshot id (end offset 0, epoch 0): Kafka's `Snapshots.BOOTSTRAP_SNAPSHOT_ID`.
pub const BOOTSTRAP_SNAPSHOT_FILE: &str = "00000000000000000000-0000000000.checkpoint";
/// The kraft.version a dynamic quorum starts at.
pub const KRAFT_VERSION: i16 = 1;
/// The kraft.version range every initial voter is recorded as supporting
/// (Kafka's `DynamicVoter.toVoterNode` hard-codes it).
pub const SUPPORTED_KRAFT_VERSIONS: (i16, i16) = (0, 1);
/// Kafka writes the bootstrap snapshot's batches with epoch 0, the
/// snapshot's epoch (a fresh control batch would say -1, "none").
const PARTITION_LEADER_EPOCH: i32 = 0;

/// The snapshot could not be encoded or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("encoding the bootstrap snapshot: {0}")]
    Encode(String),
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

fn encode_error(e: impl std::fmt::Display) -> SnapshotError {
    SnapshotError::Encode(e.to_string())
}

/// The snapshot's bytes for `voters`, whose endpoints are on
/// `controller_listener` (the first of `controller.listener.names`), with
/// `now_ms` as the header's timestamp and every batch's.
pub fn encode(voters: &[DynamicVoter], controller_listener: &str, now_ms: i64) -> Result<Vec<u8>, SnapshotError> {
    let header =
        encoded(&SnapshotHeaderRecord { version: 0, last_contained_log_timestamp: now_ms, ..Default::default() })?;
    let kraft_version =
        encoded(&KRaftVersionRecord { version: 0, k_raft_version: KRAFT_VERSION, ..Default::default() })?;
    let voters = encoded(&voters_record(voters, controller_listener))?;
    let footer = encoded(&SnapshotFooterRecord { version: 0, ..Default::default() })?;
    let first = [
        (ControlType::SnapshotHeader, &header[..]),
        (ControlType::KRaftVersion, &kraft_version[..]),
        (ControlType::KRaftVoters, &voters[..]),
    ];
    let mut out = control_batch(0, &first, now_ms)?;
    out.extend(control_batch(first.len() as i64, &[(ControlType::SnapshotFooter, &footer[..])], now_ms)?);
    Ok(out)
}

/// A control record's value: the message at version 0, the only one.
fn encoded(message: &impl Message) -> Result<Vec<u8>, SnapshotError> {
    Ok(message.to_bytes(0).map_err(encode_error)?.to_vec())
}

/// One control batch stamped with Kafka's partition leader epoch (outside
/// the CRC, so setting it leaves the batch valid).
fn control_batch(base_offset: i64, records: &[(ControlType, &[u8])], now_ms: i64) -> Result<Vec<u8>, SnapshotError> {
    let mut batch = control_batch_of(base_offset, records, now_ms).map_err(encode_error)?.to_vec();
    RecordBatchMut::new(&mut batch).map_err(encode_error)?.set_partition_leader_epoch(PARTITION_LEADER_EPOCH);
    Ok(batch)
}

/// The VotersRecord: one endpoint per voter, named after the controller
/// listener as Kafka normalises listener names (upper case), in the order
/// Kafka's `VoterSet` lists them.
pub fn voters_record(voters: &[DynamicVoter], controller_listener: &str) -> VotersRecord {
    let name = controller_listener.to_uppercase();
    let voters = java_hash_map_order(voters)
        .into_iter()
        .map(|voter| Voter {
            voter_id: voter.node_id,
            voter_directory_id: voter.directory_id,
            endpoints: vec![Endpoint {
                name: name.clone(),
                host: voter.host.clone(),
                port: voter.port,
                ..Default::default()
            }],
            k_raft_version_feature: KRaftVersionFeature {
                min_supported_version: SUPPORTED_KRAFT_VERSIONS.0,
                max_supported_version: SUPPORTED_KRAFT_VERSIONS.1,
                ..Default::default()
            },
            ..Default::default()
        })
        .collect();
    VotersRecord { version: 0, voters, ..Default::default() }
}

/// Kafka builds the VotersRecord from a `java.util.HashMap` keyed by node
/// id: filled from the voters sorted by id (default capacity 16, doubled
/// past 3/4 full), then copied (`new HashMap<>(map)`, sized for its
/// entries) and iterated bucket by bucket. So the record lists voters by
/// their bucket in the copy, and within a bucket in the first map's order.
/// For ids below the table size that is ascending order; past it, not
/// (ids 1, 2 and 17 come out 1, 17, 2). The copy is sized as Java 17 sizes
/// it (`(int) (size / 0.75f + 1.0f)`, the reference's JVM); Java 19 and
/// later size it `ceil(size / 0.75)`, so Kafka on them may order a few id
/// sets differently. Readers take the voters as a set either way. Bins
/// turned into trees (8+ colliding ids in a table of 64+) are not modelled.
fn java_hash_map_order(voters: &[DynamicVoter]) -> Vec<&DynamicVoter> {
    let count = voters.len();
    // Integer.hashCode is the value; HashMap.hash spreads the high bits.
    let spread = |id: i32| (id ^ ((id as u32) >> 16) as i32) as u32;
    let mut first_capacity = 16usize;
    while count > first_capacity * 3 / 4 {
        first_capacity *= 2;
    }
    // HashMap(Map): tableSizeFor((int) (size / 0.75f + 1.0f)).
    let copy_capacity = ((count as f32 / 0.75f32 + 1.0f32) as usize).next_power_of_two();
    let mut sorted: Vec<&DynamicVoter> = voters.iter().collect();
    sorted.sort_by_key(|voter| voter.node_id);
    sorted.sort_by_key(|voter| spread(voter.node_id) as usize & (first_capacity - 1));
    sorted.sort_by_key(|voter| spread(voter.node_id) as usize & (copy_capacity - 1));
    sorted
}

/// Writes the snapshot into `metadata_log_dir/__cluster_metadata-0/`
/// crash-safely (temporary file, fsync, rename, fsync of the directory)
/// and read-only, like Kafka. Returns the file's path.
pub fn write(metadata_log_dir: &Path, bytes: &[u8]) -> Result<PathBuf, SnapshotError> {
    let dir = metadata_log_dir.join(CLUSTER_METADATA_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SnapshotError::Io { path, source }
    };
    fs::create_dir_all(&dir).map_err(io(&dir))?;
    let path = dir.join(BOOTSTRAP_SNAPSHOT_FILE);
    let temp = dir.join(format!("{BOOTSTRAP_SNAPSHOT_FILE}.tmp"));
    // A leftover of a crash is read-only: remove it rather than open it.
    match fs::remove_file(&temp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&temp)(e)),
        _ => {}
    }
    {
        let mut file = fs::File::create(&temp).map_err(io(&temp))?;
        file.write_all(bytes).map_err(io(&temp))?;
        file.sync_all().map_err(io(&temp))?;
        file.set_permissions(fs::Permissions::from_mode(0o400)).map_err(io(&temp))?;
    }
    fs::rename(&temp, &path).map_err(io(&path))?;
    fs::File::open(&dir).and_then(|d| d.sync_all()).map_err(io(&dir))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use krabka_protocol::records::{control_type_id, RecordBatches};
    use krabka_protocol::Uuid as KafkaUuid;

    fn voter(node_id: i32, host: &str, port: u16) -> DynamicVoter {
        let mut id = [0u8; 16];
        id[0] = node_id as u8 + 1;
        DynamicVoter { node_id, host: host.into(), port, directory_id: KafkaUuid(id) }
    }

    /// Every batch as (base offset, partition leader epoch, control, records as (type id, value)).
    type Batch = (i64, i32, bool, Vec<(i16, Bytes)>);

    fn batches(bytes: Vec<u8>) -> Vec<Batch> {
        RecordBatches::new(Bytes::from(bytes))
            .map(|batch| {
                let batch = batch.unwrap();
                batch.validate().unwrap();
                let records = batch
                    .records(usize::MAX)
                    .unwrap()
                    .map(|r| r.unwrap())
                    .map(|r| (control_type_id(r.key.as_deref().unwrap()).unwrap(), r.value.unwrap()))
                    .collect();
                (batch.base_offset(), batch.partition_leader_epoch(), batch.is_control(), records)
            })
            .collect()
    }

    #[test]
    fn layout_is_kafkas() {
        let bytes = encode(&[voter(1, "127.0.0.1", 9093)], "CONTROLLER", 1_796_205_017_104).unwrap();
        let batches = batches(bytes);
        assert_eq!(batches.len(), 2);
        let (base, epoch, control, records) = &batches[0];
        assert_eq!((*base, *epoch, *control), (0, 0, true));
        let types: Vec<i16> = records.iter().map(|(t, _)| *t).collect();
        assert_eq!(types, [3, 5, 6]);
        let mut header = records[0].1.clone();
        let header = SnapshotHeaderRecord::decode(&mut header, 0).unwrap();
        assert_eq!(header.last_contained_log_timestamp, 1_796_205_017_104);
        assert_eq!(&records[1].1[..], [0, 0, 0, 1, 0], "KRaftVersionRecord v0, kraft.version 1");
        let mut voters = records[2].1.clone();
        let voters = VotersRecord::decode(&mut voters, 0).unwrap();
        assert_eq!(voters, voters_record(&[voter(1, "127.0.0.1", 9093)], "CONTROLLER"));
        let endpoint = &voters.voters[0].endpoints[0];
        assert_eq!((endpoint.name.as_str(), endpoint.host.as_str(), endpoint.port), ("CONTROLLER", "127.0.0.1", 9093));
        let (base, epoch, control, records) = &batches[1];
        assert_eq!((*base, *epoch, *control, records.len()), (3, 0, true, 1));
        assert_eq!((records[0].0, &records[0].1[..]), (4, &[0u8, 0, 0][..]), "SnapshotFooterRecord v0");
    }

    #[test]
    fn sizes_match_kafkas_file() {
        // Kafka 4.3.1's file for one voter 1@127.0.0.1:9093 on CONTROLLER:
        // a 166-byte batch then a 75-byte one, 241 bytes.
        let bytes = encode(&[voter(1, "127.0.0.1", 9093)], "CONTROLLER", 0).unwrap();
        assert_eq!(bytes.len(), 241);
        assert_eq!(i32::from_be_bytes(bytes[8..12].try_into().unwrap()), 154);
    }

    #[test]
    fn voters_come_in_java_hash_map_order() {
        let order = |ids: &[i32]| -> Vec<i32> {
            let voters: Vec<DynamicVoter> = ids.iter().map(|&id| voter(id, "h", 1)).collect();
            voters_record(&voters, "controller").voters.iter().map(|v| v.voter_id).collect()
        };
        assert_eq!(order(&[3, 1, 2]), [1, 2, 3]);
        assert_eq!(order(&[1, 2, 17]), [1, 17, 2]);
        // As Kafka 4.3.1 wrote them for --initial-controllers 100@..,3@..,17@..,65536@..,0@..
        assert_eq!(order(&[100, 3, 17, 65536, 0]), [0, 17, 65536, 3, 100]);
        let names: Vec<String> = voters_record(&[voter(1, "h", 1)], "controller").voters[0]
            .endpoints
            .iter()
            .map(|e| e.name.clone())
            .collect();
        assert_eq!(names, ["CONTROLLER"]);
    }

    #[test]
    fn write_is_read_only_and_alone() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = encode(&[voter(1, "h", 1)], "CONTROLLER", 5).unwrap();
        let path = write(dir.path(), &bytes).unwrap();
        assert_eq!(path, dir.path().join(CLUSTER_METADATA_DIR).join(BOOTSTRAP_SNAPSHOT_FILE));
        assert_eq!(fs::read(&path).unwrap(), bytes);
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o400);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [BOOTSTRAP_SNAPSHOT_FILE]);
        // A second write replaces it (rename over a read-only file is allowed).
        write(dir.path(), &bytes).unwrap();
    }
}
