//! The records of `__consumer_offsets`, in Kafka's format: the key is an
//! i16 record type followed by the key struct, the value an i16 version
//! followed by the value struct; a null value deletes the key (compaction
//! keeps the latest). Krabka writes OffsetCommitValue v3 and
//! GroupMetadataValue v3, as Kafka 4.3.1 does for classic groups.

use bytes::{Buf, Bytes};
use krabka_protocol::{GroupMetadataKey, GroupMetadataValue, Message, OffsetCommitKey, OffsetCommitValue};

use crate::runtime::version_prefixed;

const OFFSET_COMMIT_KEY: i16 = 1;
const GROUP_METADATA_KEY: i16 = 2;
/// The key type of Kafka's pre-0.9 offset records, read like type 1.
const LEGACY_OFFSET_COMMIT_KEY: i16 = 0;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;

#[derive(Clone, Debug, PartialEq)]
pub enum CoordinatorRecord {
    /// A committed offset, or its deletion (None).
    Offset { key: OffsetCommitKey, value: Option<OffsetCommitValue> },
    /// A classic group's state after a rebalance, or the group's deletion.
    Group { group: String, value: Option<GroupMetadataValue> },
    /// A record type krabka does not read yet (KIP-848, share and streams
    /// groups written by Kafka); skipped on load.
    Other,
}

impl CoordinatorRecord {
    pub fn offset(group: &str, topic: &str, partition: i32, value: Option<OffsetCommitValue>) -> Self {
        let key = OffsetCommitKey { group: group.into(), topic: topic.into(), partition, ..Default::default() };
        CoordinatorRecord::Offset { key, value }
    }

    /// (key, value) bytes for the log.
    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        match self {
            CoordinatorRecord::Offset { key, value } => (
                version_prefixed(OFFSET_COMMIT_KEY, key, 0),
                value.as_ref().map(|v| version_prefixed(OFFSET_COMMIT_VALUE_VERSION, v, OFFSET_COMMIT_VALUE_VERSION)),
            ),
            CoordinatorRecord::Group { group, value } => (
                version_prefixed(
                    GROUP_METADATA_KEY,
                    &GroupMetadataKey { group: group.clone(), ..Default::default() },
                    0,
                ),
                value.as_ref().map(|v| version_prefixed(GROUP_METADATA_VALUE_VERSION, v, GROUP_METADATA_VALUE_VERSION)),
            ),
            CoordinatorRecord::Other => (Bytes::new(), None),
        }
    }

    pub fn decode(mut key: Bytes, value: Option<Bytes>) -> Result<Self, String> {
        if key.len() < 2 {
            return Err("key shorter than its type".into());
        }
        let kind = key.get_i16();
        let value_version = |value: &mut Bytes| {
            if value.len() < 2 {
                return Err("value shorter than its version".to_string());
            }
            Ok(value.get_i16())
        };
        match kind {
            LEGACY_OFFSET_COMMIT_KEY | OFFSET_COMMIT_KEY => {
                let key = OffsetCommitKey::decode(&mut key, 0).map_err(|e| e.to_string())?;
                let value = match value {
                    None => None,
                    Some(mut bytes) => {
                        let version = value_version(&mut bytes)?;
                        Some(OffsetCommitValue::decode(&mut bytes, version).map_err(|e| e.to_string())?)
                    }
                };
                Ok(CoordinatorRecord::Offset { key, value })
            }
            GROUP_METADATA_KEY => {
                let key = GroupMetadataKey::decode(&mut key, 0).map_err(|e| e.to_string())?;
                let value = match value {
                    None => None,
                    Some(mut bytes) => {
                        let version = value_version(&mut bytes)?;
                        Some(GroupMetadataValue::decode(&mut bytes, version).map_err(|e| e.to_string())?)
                    }
                };
                Ok(CoordinatorRecord::Group { group: key.group, value })
            }
            _ => Ok(CoordinatorRecord::Other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_and_group_records_round_trip_in_kafkas_framing() {
        let value = OffsetCommitValue {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp: 1000,
            ..Default::default()
        };
        let record = CoordinatorRecord::offset("g", "t", 7, Some(value));
        let (key, value) = record.encode();
        assert_eq!(&key[..2], &[0, 1]);
        assert_eq!(&value.as_ref().unwrap()[..2], &[0, 3]);
        assert_eq!(CoordinatorRecord::decode(key.clone(), value).unwrap(), record);
        let tombstone = CoordinatorRecord::decode(key, None).unwrap();
        assert!(matches!(tombstone, CoordinatorRecord::Offset { value: None, .. }));
        let group = CoordinatorRecord::Group {
            group: "g".into(),
            value: Some(GroupMetadataValue {
                protocol_type: "consumer".into(),
                generation: 4,
                protocol: Some("range".into()),
                leader: Some("m-1".into()),
                current_state_timestamp: 5,
                members: vec![krabka_protocol::group_metadata_value::MemberMetadata {
                    member_id: "m-1".into(),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout: 300,
                    session_timeout: 45,
                    subscription: Bytes::from_static(b"s"),
                    assignment: Bytes::from_static(b"a"),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let (key, value) = group.encode();
        assert_eq!(CoordinatorRecord::decode(key, value).unwrap(), group);
        assert!(CoordinatorRecord::decode(Bytes::from_static(&[0]), None).is_err());
        assert_eq!(CoordinatorRecord::decode(Bytes::from_static(&[0, 99, 1]), None).unwrap(), CoordinatorRecord::Other);
    }
}
