//! The metadata records krabka writes, framed as KRaft frames them in
//! `__cluster_metadata`: an unsigned-varint frame version (1), the record's
//! type (its spec's api key) and version, then the record body.

use bytes::{Bytes, BytesMut};
use krabka_protocol::primitives::{get_unsigned_varint, put_unsigned_varint};
use krabka_protocol::records::{RecordBatches, RecordError};
use krabka_protocol::{
    AccessControlEntryRecord, BrokerRegistrationChangeRecord, ClearElrRecord, ClientQuotaRecord, ConfigRecord,
    FeatureLevelRecord, Message, NoOpRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, RegisterControllerRecord, RemoveAccessControlEntryRecord, RemoveTopicRecord,
    RemoveUserScramCredentialRecord, TopicRecord, UnregisterBrokerRecord, UserScramCredentialRecord,
};
use krabka_security::acl::{AclBinding, AclId};

/// The frame version Kafka writes before every metadata record.
const FRAME_VERSION: u32 = 1;

/// Record types (the `apiKey` of each metadata record spec).
mod record_type {
    pub const REGISTER_BROKER: u32 = 0;
    pub const UNREGISTER_BROKER: u32 = 1;
    pub const NO_OP: u32 = 20;
    pub const ZK_MIGRATION: u32 = 21;
    pub const BEGIN_TRANSACTION: u32 = 23;
    pub const END_TRANSACTION: u32 = 24;
    pub const ABORT_TRANSACTION: u32 = 25;
    pub const BROKER_REGISTRATION_CHANGE: u32 = 17;
    pub const TOPIC: u32 = 2;
    pub const PARTITION: u32 = 3;
    pub const CONFIG: u32 = 4;
    pub const PARTITION_CHANGE: u32 = 5;
    pub const PRODUCER_IDS: u32 = 15;
    pub const REMOVE_TOPIC: u32 = 9;
    pub const FEATURE_LEVEL: u32 = 12;
    pub const REGISTER_CONTROLLER: u32 = 27;
    pub const CLEAR_ELR: u32 = 28;
    pub const USER_SCRAM_CREDENTIAL: u32 = 11;
    pub const CLIENT_QUOTA: u32 = 14;
    pub const REMOVE_USER_SCRAM_CREDENTIAL: u32 = 22;
    pub const ACCESS_CONTROL_ENTRY: u32 = 18;
    pub const REMOVE_ACCESS_CONTROL_ENTRY: u32 = 19;
}

/// ConfigRecord resource types (Kafka's ConfigResource.Type ids).
pub const CONFIG_RESOURCE_TOPIC: i8 = 2;
pub const CONFIG_RESOURCE_BROKER: i8 = 4;

#[derive(Clone, Debug, PartialEq)]
pub enum MetadataRecord {
    Topic(TopicRecord),
    Partition(PartitionRecord),
    PartitionChange(PartitionChangeRecord),
    Config(ConfigRecord),
    ProducerIds(ProducerIdsRecord),
    RemoveTopic(RemoveTopicRecord),
    FeatureLevel(FeatureLevelRecord),
    RegisterBroker(RegisterBrokerRecord),
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    RegisterController(RegisterControllerRecord),
    UnregisterBroker(UnregisterBrokerRecord),
    /// Empties the ELR and last known ELR of a topic's partitions (every
    /// topic's when the name is empty), after its min.insync.replicas
    /// changed (KIP-966).
    ClearElr(ClearElrRecord),
    /// A user's SCRAM credential for one mechanism, added or replaced.
    UserScramCredential(UserScramCredentialRecord),
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    /// One quota of a client quota entity set or removed.
    ClientQuota(ClientQuotaRecord),
    /// An ACL added, by its id.
    AccessControlEntry(AccessControlEntryRecord),
    /// The ACL of this id removed.
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    /// A record type krabka does not apply itself (ACLs,
    /// credentials, delegation tokens, a newer version's): `raw` is the
    /// whole record as it arrived, written back as it was.
    Other {
        record_type: u32,
        version: u32,
        raw: Bytes,
    },
}

impl MetadataRecord {
    /// Whether this record is cluster state a snapshot must keep though the
    /// image does not model it: any `Other` but the ones that mark the log
    /// itself (NoOp, ZK migration, metadata transaction markers), as
    /// Kafka's image holds everything else.
    /// The AccessControlEntryRecord that adds `binding` as ACL `id`.
    pub fn access_control_entry(id: AclId, binding: &AclBinding) -> Self {
        let (pattern, entry) = (&binding.pattern, &binding.entry);
        MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
            id: krabka_protocol::Uuid(id),
            resource_type: pattern.resource_type.code(),
            resource_name: pattern.name.clone(),
            pattern_type: pattern.pattern_type.code(),
            principal: entry.principal.clone(),
            host: entry.host.clone(),
            operation: entry.operation.code(),
            permission_type: entry.permission_type.code(),
            ..Default::default()
        })
    }

    pub fn is_unmodeled_state(&self) -> bool {
        use record_type::*;
        matches!(self, MetadataRecord::Other { record_type, .. }
            if ![NO_OP, ZK_MIGRATION, BEGIN_TRANSACTION, END_TRANSACTION, ABORT_TRANSACTION].contains(record_type))
    }
}

/// The version krabka writes of each record type.
fn version_of(record: &MetadataRecord) -> (u32, i16) {
    match record {
        MetadataRecord::Topic(_) => (record_type::TOPIC, 0),
        // The oldest version that carries what the record holds: v1 adds
        // log directories (KIP-858), v2 Eligible Leader Replicas (KIP-966).
        MetadataRecord::Partition(r) => {
            let version = if r.eligible_leader_replicas.is_some() || r.last_known_elr.is_some() {
                2
            } else {
                i16::from(!r.directories.is_empty())
            };
            (record_type::PARTITION, version)
        }
        MetadataRecord::PartitionChange(r) => {
            let version = if r.eligible_leader_replicas.is_some() || r.last_known_elr.is_some() {
                2
            } else {
                i16::from(r.directories.is_some())
            };
            (record_type::PARTITION_CHANGE, version)
        }
        MetadataRecord::Config(_) => (record_type::CONFIG, 0),
        MetadataRecord::ProducerIds(_) => (record_type::PRODUCER_IDS, 0),
        MetadataRecord::RemoveTopic(_) => (record_type::REMOVE_TOPIC, 0),
        MetadataRecord::FeatureLevel(_) => (record_type::FEATURE_LEVEL, 0),
        // v3 (with log directories) is what Kafka 4.3.1 writes at its
        // default metadata.version; the change record at v0 for fencing,
        // v1 when it carries the controlled shutdown, v2 when it lists the
        // directories left online (as Kafka writes them).
        MetadataRecord::RegisterBroker(_) => (record_type::REGISTER_BROKER, 3),
        MetadataRecord::BrokerRegistrationChange(r) => {
            let version = if !r.log_dirs.is_empty() { 2 } else { i16::from(r.in_controlled_shutdown != 0) };
            (record_type::BROKER_REGISTRATION_CHANGE, version)
        }
        MetadataRecord::RegisterController(_) => (record_type::REGISTER_CONTROLLER, 0),
        MetadataRecord::UnregisterBroker(_) => (record_type::UNREGISTER_BROKER, 0),
        MetadataRecord::ClearElr(_) => (record_type::CLEAR_ELR, 0),
        MetadataRecord::UserScramCredential(_) => (record_type::USER_SCRAM_CREDENTIAL, 0),
        MetadataRecord::RemoveUserScramCredential(_) => (record_type::REMOVE_USER_SCRAM_CREDENTIAL, 0),
        MetadataRecord::ClientQuota(_) => (record_type::CLIENT_QUOTA, 0),
        MetadataRecord::AccessControlEntry(_) => (record_type::ACCESS_CONTROL_ENTRY, 0),
        MetadataRecord::RemoveAccessControlEntry(_) => (record_type::REMOVE_ACCESS_CONTROL_ENTRY, 0),
        MetadataRecord::Other { record_type, version, .. } => (*record_type, *version as i16),
    }
}

impl MetadataRecord {
    /// A NoOpRecord: a commit that changes nothing (Kafka's controller
    /// writes one to wait for what it appended to raft directly).
    pub fn no_op() -> Self {
        let mut raw = BytesMut::with_capacity(4);
        put_unsigned_varint(&mut raw, FRAME_VERSION);
        put_unsigned_varint(&mut raw, record_type::NO_OP);
        put_unsigned_varint(&mut raw, 0);
        NoOpRecord::default().encode(&mut raw, 0).expect("a NoOpRecord encodes at version 0");
        MetadataRecord::Other { record_type: record_type::NO_OP, version: 0, raw: raw.freeze() }
    }

    pub fn encode(&self) -> Bytes {
        if let MetadataRecord::Other { raw, .. } = self {
            return raw.clone();
        }
        let (record_type, version) = version_of(self);
        let mut buf = BytesMut::with_capacity(64);
        put_unsigned_varint(&mut buf, FRAME_VERSION);
        put_unsigned_varint(&mut buf, record_type);
        put_unsigned_varint(&mut buf, version as u32);
        let written = match self {
            MetadataRecord::Topic(r) => r.encode(&mut buf, version),
            MetadataRecord::Partition(r) => r.encode(&mut buf, version),
            MetadataRecord::PartitionChange(r) => r.encode(&mut buf, version),
            MetadataRecord::Config(r) => r.encode(&mut buf, version),
            MetadataRecord::ProducerIds(r) => r.encode(&mut buf, version),
            MetadataRecord::RemoveTopic(r) => r.encode(&mut buf, version),
            MetadataRecord::FeatureLevel(r) => r.encode(&mut buf, version),
            MetadataRecord::RegisterBroker(r) => r.encode(&mut buf, version),
            MetadataRecord::BrokerRegistrationChange(r) => r.encode(&mut buf, version),
            MetadataRecord::RegisterController(r) => r.encode(&mut buf, version),
            MetadataRecord::UnregisterBroker(r) => r.encode(&mut buf, version),
            MetadataRecord::ClearElr(r) => r.encode(&mut buf, version),
            MetadataRecord::UserScramCredential(r) => r.encode(&mut buf, version),
            MetadataRecord::RemoveUserScramCredential(r) => r.encode(&mut buf, version),
            MetadataRecord::ClientQuota(r) => r.encode(&mut buf, version),
            MetadataRecord::AccessControlEntry(r) => r.encode(&mut buf, version),
            MetadataRecord::RemoveAccessControlEntry(r) => r.encode(&mut buf, version),
            MetadataRecord::Other { .. } => unreachable!("written as it arrived"),
        };
        // Records are built by krabka from valid values: failing to encode one
        // is a programming error, not an input error.
        assert!(written.is_ok(), "metadata record does not encode: {written:?}");
        buf.freeze()
    }

    pub fn decode(mut value: Bytes) -> Result<Self, String> {
        let raw = value.clone();
        let frame = get_unsigned_varint(&mut value).map_err(|e| e.to_string())?;
        if frame != FRAME_VERSION {
            return Err(format!("unknown metadata frame version {frame}"));
        }
        let record_type = get_unsigned_varint(&mut value).map_err(|e| e.to_string())?;
        let version = get_unsigned_varint(&mut value).map_err(|e| e.to_string())?;
        let v = i16::try_from(version).map_err(|_| format!("record version {version}"))?;
        let buf = &mut value;
        let record = match record_type {
            record_type::TOPIC => TopicRecord::decode(buf, v).map(MetadataRecord::Topic),
            record_type::PARTITION => PartitionRecord::decode(buf, v).map(MetadataRecord::Partition),
            record_type::PARTITION_CHANGE => PartitionChangeRecord::decode(buf, v).map(MetadataRecord::PartitionChange),
            record_type::CONFIG => ConfigRecord::decode(buf, v).map(MetadataRecord::Config),
            record_type::PRODUCER_IDS => ProducerIdsRecord::decode(buf, v).map(MetadataRecord::ProducerIds),
            record_type::REMOVE_TOPIC => RemoveTopicRecord::decode(buf, v).map(MetadataRecord::RemoveTopic),
            record_type::FEATURE_LEVEL => FeatureLevelRecord::decode(buf, v).map(MetadataRecord::FeatureLevel),
            record_type::REGISTER_BROKER => RegisterBrokerRecord::decode(buf, v).map(MetadataRecord::RegisterBroker),
            record_type::BROKER_REGISTRATION_CHANGE => {
                BrokerRegistrationChangeRecord::decode(buf, v).map(MetadataRecord::BrokerRegistrationChange)
            }
            record_type::REGISTER_CONTROLLER => {
                RegisterControllerRecord::decode(buf, v).map(MetadataRecord::RegisterController)
            }
            record_type::UNREGISTER_BROKER => {
                UnregisterBrokerRecord::decode(buf, v).map(MetadataRecord::UnregisterBroker)
            }
            record_type::CLEAR_ELR => ClearElrRecord::decode(buf, v).map(MetadataRecord::ClearElr),
            record_type::USER_SCRAM_CREDENTIAL => {
                UserScramCredentialRecord::decode(buf, v).map(MetadataRecord::UserScramCredential)
            }
            record_type::CLIENT_QUOTA => ClientQuotaRecord::decode(buf, v).map(MetadataRecord::ClientQuota),
            record_type::ACCESS_CONTROL_ENTRY => {
                AccessControlEntryRecord::decode(buf, v).map(MetadataRecord::AccessControlEntry)
            }
            record_type::REMOVE_ACCESS_CONTROL_ENTRY => {
                RemoveAccessControlEntryRecord::decode(buf, v).map(MetadataRecord::RemoveAccessControlEntry)
            }
            record_type::REMOVE_USER_SCRAM_CREDENTIAL => {
                RemoveUserScramCredentialRecord::decode(buf, v).map(MetadataRecord::RemoveUserScramCredential)
            }
            _ => return Ok(MetadataRecord::Other { record_type, version, raw }),
        };
        record.map_err(|e| format!("metadata record type {record_type} v{version}: {e}"))
    }
}

/// A record of the metadata log that does not decode.
#[derive(Debug, PartialEq)]
pub struct CorruptRecord {
    pub offset: i64,
    pub reason: String,
}

/// The metadata records in `batches` (whole record batches as read from the
/// log) from `from_offset` on, with their offsets, and the offset after the
/// last whole batch (a partial batch at the end is left for the next read).
/// Control batches (KRaft's LeaderChange, snapshot markers) hold no
/// metadata and are skipped.
pub fn decode_batches(batches: Bytes, from_offset: i64) -> Result<(Vec<(i64, MetadataRecord)>, i64), CorruptRecord> {
    let mut next_offset = from_offset;
    let mut out = Vec::new();
    for batch in RecordBatches::new(batches) {
        let corrupt = |offset: i64| move |e: RecordError| CorruptRecord { offset, reason: e.to_string() };
        let batch = match batch {
            Ok(batch) => batch,
            // A read of the log may end inside its last batch: the whole
            // ones before it are the chunk (the next read starts there).
            // A read holds at least one whole batch, so a first one cut
            // short is damage.
            Err(RecordError::Truncated { .. }) if next_offset > from_offset => break,
            Err(e) => return Err(corrupt(next_offset)(e)),
        };
        let batch_end = batch.next_offset();
        if !batch.is_control() {
            for record in batch.records(usize::MAX).map_err(corrupt(batch.base_offset()))? {
                let record = record.map_err(corrupt(batch.base_offset()))?;
                if record.offset < from_offset {
                    continue; // before the start asked for (covered by a snapshot)
                }
                let decoded = MetadataRecord::decode(record.value.unwrap_or_default())
                    .map_err(|reason| CorruptRecord { offset: record.offset, reason })?;
                out.push((record.offset, decoded));
            }
        }
        next_offset = batch_end;
    }
    Ok((out, next_offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::Uuid;

    #[test]
    fn records_round_trip_with_kraft_framing() {
        let topic = MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id: Uuid::random().unwrap(),
            ..Default::default()
        });
        let bytes = topic.encode();
        // frame version 1, type 2 (TopicRecord), version 0
        assert_eq!(&bytes[..3], &[1, 2, 0]);
        assert_eq!(MetadataRecord::decode(bytes).unwrap(), topic);
        let config = MetadataRecord::Config(ConfigRecord {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: "t".into(),
            name: "retention.ms".into(),
            value: Some("1000".into()),
            ..Default::default()
        });
        assert_eq!(MetadataRecord::decode(config.encode()).unwrap(), config);
        assert!(MetadataRecord::decode(Bytes::from_static(&[9, 2, 0])).is_err());
        // A type krabka does not apply is kept whole, and written back as it came.
        let unknown = Bytes::from_static(&[1, 200, 1, 0, 42]);
        let other = MetadataRecord::decode(unknown.clone()).unwrap();
        assert_eq!(other, MetadataRecord::Other { record_type: 200, version: 0, raw: unknown.clone() });
        assert_eq!(other.encode(), unknown);
        assert!(other.is_unmodeled_state());
        let no_op = MetadataRecord::decode(Bytes::from_static(&[1, 20, 0, 0])).unwrap();
        assert!(!no_op.is_unmodeled_state());
    }

    /// The bytes Kafka 4.3.1's MetadataRecordSerde writes for the same
    /// records (type 11 and 22, version 0), and back.
    #[test]
    fn scram_credential_records_are_framed_as_kafkas() {
        let credential = MetadataRecord::UserScramCredential(UserScramCredentialRecord {
            name: "al".into(),
            mechanism: 1,
            salt: Bytes::from_static(b"s"),
            stored_key: Bytes::from_static(b"k"),
            server_key: Bytes::from_static(b"v"),
            iterations: 4096,
            ..Default::default()
        });
        let kafka: &[u8] = &[1, 11, 0, 3, b'a', b'l', 1, 2, b's', 2, b'k', 2, b'v', 0, 0, 16, 0, 0];
        assert_eq!(&credential.encode()[..], kafka);
        assert_eq!(MetadataRecord::decode(Bytes::copy_from_slice(kafka)).unwrap(), credential);
        let remove = MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
            name: "al".into(),
            mechanism: 2,
            ..Default::default()
        });
        let kafka: &[u8] = &[1, 22, 0, 3, b'a', b'l', 2, 0];
        assert_eq!(&remove.encode()[..], kafka);
        assert_eq!(MetadataRecord::decode(Bytes::copy_from_slice(kafka)).unwrap(), remove);
        assert!(!remove.is_unmodeled_state() && !credential.is_unmodeled_state(), "both are modelled");
    }

    #[test]
    fn decode_batches_skips_control_batches_and_records_before_the_start() {
        use krabka_protocol::compression::Compression;
        use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
        let values: Vec<Bytes> = ["a", "b", "c"]
            .iter()
            .map(|name| {
                MetadataRecord::RemoveTopic(RemoveTopicRecord {
                    topic_id: Uuid([name.as_bytes()[0]; 16]),
                    ..Default::default()
                })
                .encode()
            })
            .collect();
        let mut data = RecordBatchBuilder::new(Compression::None).with_base_offset(10);
        for value in &values {
            data.append(&NewRecord { timestamp_ms: 0, key: None, value: Some(value), headers: &[] }).unwrap();
        }
        let mut control = RecordBatchBuilder::new(Compression::None).with_control(true).with_base_offset(13);
        control
            .append(&NewRecord { timestamp_ms: 0, key: Some(&[0, 0, 0, 2]), value: Some(&[0]), headers: &[] })
            .unwrap();
        let mut bytes = data.build().unwrap().into_bytes().to_vec();
        bytes.extend_from_slice(control.build().unwrap().as_bytes());
        let (records, next) = decode_batches(Bytes::from(bytes.clone()), 11).unwrap();
        assert_eq!(next, 14);
        assert_eq!(records.iter().map(|(offset, _)| *offset).collect::<Vec<_>>(), [11, 12]);
        assert_eq!(records[0].1.encode(), values[1]);
        // A record that does not decode is reported at its offset: byte 67
        // is the first record's frame version (61-byte header, then six
        // one-byte fields: length, attributes, deltas, key and value lengths).
        assert_eq!(bytes[67], 1);
        bytes[67] = 9;
        let corrupt = decode_batches(Bytes::from(bytes), 10).unwrap_err();
        assert_eq!(corrupt.offset, 10);
    }
}
