//! The records of `__transaction_state`, in Kafka's format: the key is an
//! i16 record type (0, the only one) followed by TransactionLogKey, the
//! value an i16 version followed by TransactionLogValue; a null value
//! (a tombstone) removes an expired transactional id.

use bytes::{Buf, Bytes};
use krabka_protocol::transaction_log_value::PartitionsSchema;
use krabka_protocol::{Message, TransactionLogKey, TransactionLogValue};

use crate::runtime::version_prefixed;

/// The record type of TransactionLogKey: Kafka's transaction log has no other.
const TRANSACTION_LOG_KEY: i16 = 0;

/// One record of `__transaction_state`.
#[derive(Clone, Debug, PartialEq)]
pub struct TxnRecord {
    pub transactional_id: String,
    /// The transaction's state as of this record, or None: the id expired.
    pub value: Option<TransactionLogValue>,
}

impl TxnRecord {
    /// (key, value) bytes for the log, the value at `version` (Kafka writes
    /// 1, with its tagged fields, once the cluster's transaction.version is
    /// 2, and 0 before).
    pub fn encode(&self, version: i16) -> (Bytes, Option<Bytes>) {
        debug_assert!(TransactionLogValue::supports_version(version));
        let key = TransactionLogKey { transactional_id: self.transactional_id.clone(), ..Default::default() };
        (
            version_prefixed(TRANSACTION_LOG_KEY, &key, 0),
            self.value.as_ref().map(|value| version_prefixed(version, value, version)),
        )
    }

    /// The record of `key` and `value`; None for a key of a type this
    /// does not know (skipped on load, as Kafka skips it).
    pub fn decode(mut key: Bytes, value: Option<Bytes>) -> Result<Option<Self>, String> {
        if key.len() < 2 {
            return Err("key shorter than its type".into());
        }
        if key.get_i16() != TRANSACTION_LOG_KEY {
            return Ok(None);
        }
        let key = TransactionLogKey::decode(&mut key, 0).map_err(|e| e.to_string())?;
        let value = match value {
            None => None,
            Some(mut bytes) => {
                if bytes.len() < 2 {
                    return Err("value shorter than its version".into());
                }
                let version = bytes.get_i16();
                Some(TransactionLogValue::decode(&mut bytes, version).map_err(|e| e.to_string())?)
            }
        };
        Ok(Some(TxnRecord { transactional_id: key.transactional_id, value }))
    }
}

/// `partitions` grouped by topic as the value carries them (topics in
/// order, each topic's partitions in order).
pub fn partitions_schema(partitions: &std::collections::BTreeSet<(String, i32)>) -> Vec<PartitionsSchema> {
    let mut topics: Vec<PartitionsSchema> = Vec::new();
    for (topic, partition) in partitions {
        match topics.last_mut() {
            Some(last) if last.topic == *topic => last.partition_ids.push(*partition),
            _ => topics.push(PartitionsSchema {
                topic: topic.clone(),
                partition_ids: vec![*partition],
                ..Default::default()
            }),
        }
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn records_round_trip_in_kafkas_framing_at_both_value_versions() {
        let partitions: BTreeSet<(String, i32)> =
            [("b".to_string(), 1), ("a".to_string(), 2), ("a".to_string(), 0)].into_iter().collect();
        let value = TransactionLogValue {
            producer_id: 7,
            producer_epoch: 3,
            transaction_timeout_ms: 60_000,
            transaction_status: 1,
            transaction_partitions: Some(partitions_schema(&partitions)),
            transaction_last_update_timestamp_ms: 10,
            transaction_start_timestamp_ms: 9,
            ..Default::default()
        };
        let topics = value.transaction_partitions.as_ref().unwrap();
        assert_eq!(
            topics.iter().map(|t| (t.topic.as_str(), t.partition_ids.clone())).collect::<Vec<_>>(),
            [("a", vec![0, 2]), ("b", vec![1])]
        );
        let record = TxnRecord { transactional_id: "tx".into(), value: Some(value) };
        for version in [0, 1] {
            let (key, value) = record.encode(version);
            assert_eq!(&key[..2], &[0, 0]);
            assert_eq!(&value.as_ref().unwrap()[..2], &[0, version as u8]);
            assert_eq!(TxnRecord::decode(key, value).unwrap(), Some(record.clone()));
        }
        let (key, _) = record.encode(1);
        let tombstone = TxnRecord::decode(key, None).unwrap().unwrap();
        assert_eq!(tombstone.value, None);
        assert_eq!(TxnRecord::decode(Bytes::from_static(&[0, 5, 0]), None).unwrap(), None);
        assert!(TxnRecord::decode(Bytes::from_static(&[0]), None).is_err());
    }
}
