//! Control records: the records of a control batch (attribute bit 5), one
//! per batch, whose key says what it is. Transactions write commit and
//! abort markers; KRaft writes the others into `__cluster_metadata` and its
//! snapshots. The key is two big-endian i16s, a version (0) and the type;
//! the value is the type's message (a transaction marker, or one of
//! LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord,
//! KRaftVersionRecord, VotersRecord).

use bytes::Bytes;

use super::{NewRecord, RecordBatchBuilder, RecordError};
use crate::compression::Compression;

/// Kafka's `ControlRecordType` ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ControlType {
    Abort,
    Commit,
    LeaderChange,
    SnapshotHeader,
    SnapshotFooter,
    KRaftVersion,
    KRaftVoters,
}

impl ControlType {
    pub const fn id(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
            ControlType::LeaderChange => 2,
            ControlType::SnapshotHeader => 3,
            ControlType::SnapshotFooter => 4,
            ControlType::KRaftVersion => 5,
            ControlType::KRaftVoters => 6,
        }
    }

    pub fn from_id(id: i16) -> Option<ControlType> {
        Some(match id {
            0 => ControlType::Abort,
            1 => ControlType::Commit,
            2 => ControlType::LeaderChange,
            3 => ControlType::SnapshotHeader,
            4 => ControlType::SnapshotFooter,
            5 => ControlType::KRaftVersion,
            6 => ControlType::KRaftVoters,
            _ => return None,
        })
    }

    /// The key a control record of this type carries (version 0).
    pub fn key(self) -> [u8; 4] {
        let [high, low] = self.id().to_be_bytes();
        [0, 0, high, low]
    }
}

/// The type id a control record's key names (the id may be one this
/// version does not know), or None when the key is too short to hold one.
pub fn control_type_id(key: &[u8]) -> Option<i16> {
    (key.len() >= 4).then(|| i16::from_be_bytes([key[2], key[3]]))
}

/// A control batch of one record of `control_type` with `value`, at
/// `base_offset`, stamped `now_ms`, uncompressed.
pub fn control_batch(
    base_offset: i64,
    control_type: ControlType,
    value: &[u8],
    now_ms: i64,
) -> Result<Bytes, RecordError> {
    control_batch_of(base_offset, &[(control_type, value)], now_ms)
}

/// A control batch of several control records, in order (a snapshot's
/// first batch holds its SnapshotHeader, then KRaftVersion and
/// KRaftVoters when `kraft.version` is 1, as Kafka writes it).
pub fn control_batch_of(base_offset: i64, records: &[(ControlType, &[u8])], now_ms: i64) -> Result<Bytes, RecordError> {
    debug_assert!(!records.is_empty(), "a control batch holds at least one record");
    let mut builder = RecordBatchBuilder::new(Compression::None).with_control(true).with_base_offset(base_offset);
    for (control_type, value) in records {
        let key = control_type.key();
        builder.append(&NewRecord { timestamp_ms: now_ms, key: Some(&key), value: Some(value), headers: &[] })?;
    }
    Ok(builder.build()?.into_bytes())
}

/// A transaction's marker for one partition: a control batch of one
/// commit or abort record, transactional and of the transaction's producer
/// (its epoch, no sequence), the value the coordinator's epoch (marker
/// version 0, as Kafka writes it). Offsets are the log's to assign.
pub fn transaction_marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    now_ms: i64,
) -> Result<Bytes, RecordError> {
    let control_type = if commit { ControlType::Commit } else { ControlType::Abort };
    let key = control_type.key();
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_control(true)
        .with_transactional(true)
        .with_producer(producer_id, producer_epoch, -1);
    builder.append(&NewRecord { timestamp_ms: now_ms, key: Some(&key), value: Some(&value), headers: &[] })?;
    Ok(builder.build()?.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RecordBatch;

    #[test]
    fn a_control_batch_round_trips_its_type_and_value() {
        for id in 0..7 {
            let kind = ControlType::from_id(id).unwrap();
            assert_eq!(kind.id(), id);
            let bytes = control_batch(5, kind, b"value", 1_000).unwrap();
            let batch = RecordBatch::new(bytes).unwrap();
            batch.validate().unwrap();
            assert!(batch.is_control());
            assert_eq!(batch.base_offset(), 5);
            let record = batch.records(usize::MAX).unwrap().next().unwrap().unwrap();
            assert_eq!(record.key.as_deref(), Some(&kind.key()[..]));
            assert_eq!(record.key.as_deref().and_then(control_type_id), Some(id));
            assert_eq!(record.value.as_deref(), Some(&b"value"[..]));
        }
        assert_eq!(ControlType::from_id(7), None);
        assert_eq!(control_type_id(&[0, 0, 1]), None);
    }

    #[test]
    fn a_transaction_marker_is_a_transactional_control_batch_of_its_producer() {
        let batch = RecordBatch::new(transaction_marker_batch(42, 3, true, 7, 1_000).unwrap()).unwrap();
        batch.validate().unwrap();
        assert!(batch.is_control() && batch.is_transactional());
        assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), (42, 3, -1));
        let record = batch.records(usize::MAX).unwrap().next().unwrap().unwrap();
        assert_eq!(record.key.as_deref(), Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(record.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 7][..]));
        let abort = RecordBatch::new(transaction_marker_batch(42, 3, false, 7, 1_000).unwrap()).unwrap();
        let record = abort.records(usize::MAX).unwrap().next().unwrap().unwrap();
        assert_eq!(record.key.as_deref().and_then(control_type_id), Some(ControlType::Abort.id()));
    }
}
