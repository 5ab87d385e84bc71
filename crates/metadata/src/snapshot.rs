//! Metadata snapshots as bytes: the image encoded as the records that
//! rebuild it, in Kafka's snapshot format, so a start replays one snapshot
//! plus the log after it instead of every change since the cluster was
//! formatted. A snapshot is a sequence of record batches: a control batch
//! with a SnapshotHeaderRecord, the image's records, a control batch with a
//! SnapshotFooterRecord. Sans-IO: the files (KRaft's
//! `<end offset>-<epoch>.checkpoint`, written atomically) are krabka-log's,
//! and when to take one is krabka-raft's.

use std::fmt;

use bytes::{Bytes, BytesMut};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{
    control_batch, control_type_id, ControlType, NewRecord, RecordBatchBuilder, RecordBatches,
};
use krabka_protocol::{
    client_quota_record, ClientQuotaRecord, ConfigRecord, FeatureLevelRecord, Message, PartitionRecord,
    ProducerIdsRecord, SnapshotFooterRecord, SnapshotHeaderRecord, TopicRecord,
};
use krabka_security::acl::AclBindingFilter;

use crate::image::MetadataImage;
use crate::records::{MetadataRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};

/// Metadata records per batch in a snapshot.
const RECORDS_PER_BATCH: usize = 1000;

/// A snapshot that could not be encoded, or bytes that are not a whole one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotError(pub String);

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "metadata snapshot: {}", self.0)
    }
}

impl std::error::Error for SnapshotError {}

fn error(e: impl fmt::Display) -> SnapshotError {
    SnapshotError(e.to_string())
}

/// The records that rebuild `image` from nothing.
pub fn image_records(image: &MetadataImage) -> Vec<MetadataRecord> {
    // The finalized features first, as Kafka's snapshot writes them first:
    // they say how the records after them read.
    let mut records: Vec<MetadataRecord> = image
        .features
        .iter()
        .map(|(name, &feature_level)| {
            MetadataRecord::FeatureLevel(FeatureLevelRecord { name: name.clone(), feature_level, ..Default::default() })
        })
        .collect();
    // Only once a block was handed out, as Kafka's snapshot: Kafka's
    // controller refuses a next producer id that does not move forward.
    if image.next_producer_id_block > 0 {
        records.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: -1,
            broker_epoch: -1,
            next_producer_id: image.next_producer_id_block,
            ..Default::default()
        }));
    }
    // Each registration as it stands (its fencing included), as Kafka's
    // snapshot writes brokers before topics.
    records.extend(image.brokers.values().cloned().map(MetadataRecord::RegisterBroker));
    records.extend(image.controllers.values().cloned().map(MetadataRecord::RegisterController));
    let mut names: Vec<&String> = image.topics.keys().collect();
    names.sort();
    for name in names {
        let topic = &image.topics[name];
        records.push(MetadataRecord::Topic(TopicRecord {
            name: topic.name.clone(),
            topic_id: topic.id,
            ..Default::default()
        }));
        for (index, partition) in topic.partitions.iter().enumerate() {
            records.push(MetadataRecord::Partition(PartitionRecord {
                partition_id: index as i32,
                topic_id: topic.id,
                replicas: partition.replicas.clone(),
                isr: partition.isr.clone(),
                removing_replicas: partition.removing_replicas.clone(),
                adding_replicas: partition.adding_replicas.clone(),
                leader: partition.leader,
                leader_recovery_state: partition.leader_recovery_state,
                leader_epoch: partition.leader_epoch,
                partition_epoch: partition.partition_epoch,
                directories: partition.directories.clone(),
                // Written when there are any, as Kafka's PartitionRecord does.
                eligible_leader_replicas: (!partition.elr.is_empty()).then(|| partition.elr.clone()),
                last_known_elr: (!partition.last_known_elr.is_empty()).then(|| partition.last_known_elr.clone()),
                ..Default::default()
            }));
        }
        for (key, value) in &topic.configs {
            records.push(config_record(CONFIG_RESOURCE_TOPIC, &topic.name, key, value));
        }
    }
    for (key, value) in &image.broker_configs {
        records.push(config_record(CONFIG_RESOURCE_BROKER, "", key, value));
    }
    for (broker, configs) in &image.per_broker_configs {
        records.extend(configs.iter().map(|(key, value)| config_record(CONFIG_RESOURCE_BROKER, broker, key, value)));
    }
    records.extend(image.scram_credentials.values().cloned().map(MetadataRecord::UserScramCredential));
    for (entity, quotas) in &image.client_quotas {
        records.extend(quotas.iter().map(|(key, &value)| client_quota_record(entity, key, value)));
    }
    records.extend(acl_records(image));
    // Last, in log order, what the image keeps without modelling it.
    records.extend(image.unmodeled.iter().cloned());
    records
}

/// Each ACL as the AccessControlEntryRecord that added it.
fn acl_records(image: &MetadataImage) -> impl Iterator<Item = MetadataRecord> + '_ {
    let acls = &image.acls;
    acls.matching_ids(&AclBindingFilter::ANY)
        .into_iter()
        .filter_map(move |id| Some(MetadataRecord::access_control_entry(id, acls.get(&id)?)))
}

fn client_quota_record(entity: &crate::image::QuotaEntity, key: &str, value: f64) -> MetadataRecord {
    let entity = entity
        .iter()
        .map(|(entity_type, entity_name)| client_quota_record::EntityData {
            entity_type: entity_type.clone(),
            entity_name: entity_name.clone(),
            ..Default::default()
        })
        .collect();
    MetadataRecord::ClientQuota(ClientQuotaRecord { entity, key: key.into(), value, ..Default::default() })
}

fn config_record(resource_type: i8, resource_name: &str, name: &str, value: &str) -> MetadataRecord {
    MetadataRecord::Config(ConfigRecord {
        resource_type,
        resource_name: resource_name.into(),
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    })
}

/// The snapshot of `image`, stamped `now_ms` (its header's last contained
/// log timestamp and every record's time).
pub fn encode(image: &MetadataImage, now_ms: i64) -> Result<Bytes, SnapshotError> {
    let mut out = BytesMut::new();
    let header = SnapshotHeaderRecord { version: 0, last_contained_log_timestamp: now_ms, ..Default::default() };
    let header = header.to_bytes(0).map_err(error)?;
    out.extend_from_slice(&control_batch(0, ControlType::SnapshotHeader, &header, now_ms).map_err(error)?);
    let values: Vec<Bytes> = image_records(image).iter().map(MetadataRecord::encode).collect();
    let mut next_offset = 1i64;
    for chunk in values.chunks(RECORDS_PER_BATCH) {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(next_offset);
        for value in chunk {
            builder
                .append(&NewRecord { timestamp_ms: now_ms, key: None, value: Some(value), headers: &[] })
                .map_err(error)?;
        }
        next_offset += chunk.len() as i64;
        out.extend_from_slice(builder.build().map_err(error)?.as_bytes());
    }
    let footer = SnapshotFooterRecord { version: 0, ..Default::default() };
    let footer = footer.to_bytes(0).map_err(error)?;
    out.extend_from_slice(&control_batch(next_offset, ControlType::SnapshotFooter, &footer, now_ms).map_err(error)?);
    Ok(out.freeze())
}

/// The image a snapshot holds; an error when it is torn (no footer), fails
/// a CRC, or holds a record the image refuses.
pub fn decode(bytes: Bytes) -> Result<MetadataImage, SnapshotError> {
    let mut image = MetadataImage::default();
    let mut saw_footer = false;
    for batch in RecordBatches::new(bytes) {
        let batch = batch.map_err(error)?;
        batch.validate().map_err(error)?;
        for record in batch.records(usize::MAX).map_err(error)? {
            let record = record.map_err(error)?;
            if batch.is_control() {
                if record.key.as_deref().and_then(control_type_id) == Some(ControlType::SnapshotFooter.id()) {
                    saw_footer = true;
                }
                continue;
            }
            let decoded = MetadataRecord::decode(record.value.unwrap_or_default()).map_err(error)?;
            // As the log's replay: a record the image refuses (a config of a
            // resource type krabka does not keep, say) is skipped, not fatal.
            if let Err(reason) = image.apply(&decoded) {
                tracing::warn!(%reason, "skipping a snapshot record");
            }
        }
    }
    if !saw_footer {
        return Err(SnapshotError("no footer: the snapshot is torn".into()));
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::Uuid;

    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        let id = Uuid::random().unwrap();
        image
            .apply(&MetadataRecord::Topic(TopicRecord { name: "t".into(), topic_id: id, ..Default::default() }))
            .unwrap();
        for p in 0..3 {
            image
                .apply(&MetadataRecord::Partition(PartitionRecord {
                    partition_id: p,
                    topic_id: id,
                    replicas: vec![1],
                    isr: vec![1],
                    leader: 1,
                    ..Default::default()
                }))
                .unwrap();
        }
        image.apply(&config_record(CONFIG_RESOURCE_TOPIC, "t", "retention.ms", "5")).unwrap();
        image.next_producer_id_block = 3000;
        let feature = FeatureLevelRecord { name: "metadata.version".into(), feature_level: 30, ..Default::default() };
        image.apply(&MetadataRecord::FeatureLevel(feature)).unwrap();
        image
    }

    #[test]
    fn snapshot_round_trips_the_image() {
        let loaded = decode(encode(&image(), 1).unwrap()).unwrap();
        assert_eq!(loaded.topics["t"].partitions.len(), 3);
        assert_eq!(loaded.topics["t"].configs["retention.ms"], "5");
        assert_eq!(loaded.next_producer_id_block, 3000);
        assert_eq!(loaded.features["metadata.version"], 30);
    }

    #[test]
    fn replication_state_survives_changes_and_a_snapshot() {
        let mut image = image();
        let id = image.topics["t"].id;
        let dirs = vec![Uuid([7; 16]), Uuid([8; 16]), Uuid([9; 16])];
        let record = PartitionRecord {
            partition_id: 3,
            topic_id: id,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: dirs.clone(),
            ..Default::default()
        };
        image.apply(&MetadataRecord::Partition(record)).unwrap();
        // 3 leaves the ISR into the ELR; 2 takes the lead; a reassignment starts.
        let change = krabka_protocol::PartitionChangeRecord {
            partition_id: 3,
            topic_id: id,
            leader: 2,
            isr: Some(vec![1, 2]),
            eligible_leader_replicas: Some(vec![3]),
            last_known_elr: Some(vec![3]),
            adding_replicas: Some(vec![4]),
            leader_recovery_state: -1,
            ..Default::default()
        };
        image.apply(&MetadataRecord::PartitionChange(change)).unwrap();
        let expected = crate::image::PartitionImage {
            leader: 2,
            leader_epoch: 1,
            partition_epoch: 1,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2],
            elr: vec![3],
            last_known_elr: vec![3],
            adding_replicas: vec![4],
            directories: dirs,
            ..Default::default()
        };
        assert_eq!(image.topics["t"].partitions[3], expected);
        let loaded = decode(encode(&image, 1).unwrap()).unwrap();
        assert_eq!(loaded.topics["t"].partitions[3], expected, "the snapshot writes it all back");
    }

    #[test]
    fn scram_credentials_replay_are_removed_and_survive_a_snapshot() {
        use krabka_protocol::{RemoveUserScramCredentialRecord, UserScramCredentialRecord};
        let mut image = image();
        let credential = |name: &str, mechanism: i8, iterations: i32| UserScramCredentialRecord {
            name: name.into(),
            mechanism,
            salt: Bytes::from_static(b"salt"),
            stored_key: Bytes::from_static(b"stored"),
            server_key: Bytes::from_static(b"server"),
            iterations,
            ..Default::default()
        };
        for record in [credential("alice", 1, 4096), credential("alice", 2, 4096), credential("alice", 1, 8192)] {
            // Each goes through its wire form, as the log carries it.
            image
                .apply(&MetadataRecord::decode(MetadataRecord::UserScramCredential(record).encode()).unwrap())
                .unwrap();
        }
        assert_eq!(image.scram_credentials[&("alice".into(), 1)].iterations, 8192, "the later record replaces");
        let remove = RemoveUserScramCredentialRecord { name: "alice".into(), mechanism: 2, ..Default::default() };
        let remove = MetadataRecord::decode(MetadataRecord::RemoveUserScramCredential(remove).encode()).unwrap();
        image.apply(&remove).unwrap();
        assert_eq!(image.scram_credentials.keys().collect::<Vec<_>>(), [&("alice".to_string(), 1)]);
        let loaded = decode(encode(&image, 1).unwrap()).unwrap();
        assert_eq!(loaded.scram_credentials, image.scram_credentials);
        assert!(loaded.unmodeled.is_empty(), "credentials are modelled, not kept raw");
    }

    #[test]
    fn client_quotas_replay_are_removed_and_survive_a_snapshot() {
        let mut image = image();
        let entity = |user: Option<&str>, client: Option<&str>| {
            let mut entity = vec![client_quota_record::EntityData {
                entity_type: "user".into(),
                entity_name: user.map(Into::into),
                ..Default::default()
            }];
            if let Some(client) = client {
                let client = Some(client.to_string());
                entity.push(client_quota_record::EntityData {
                    entity_type: "client-id".into(),
                    entity_name: client,
                    ..Default::default()
                });
            }
            entity
        };
        let set = |entity, key: &str, value, remove| {
            let record = ClientQuotaRecord { entity, key: key.into(), value, remove, ..Default::default() };
            MetadataRecord::decode(MetadataRecord::ClientQuota(record).encode()).unwrap()
        };
        image.apply(&set(entity(Some("alice"), None), "producer_byte_rate", 1024.0, false)).unwrap();
        image.apply(&set(entity(Some("alice"), Some("app")), "consumer_byte_rate", 2048.0, false)).unwrap();
        image.apply(&set(entity(None, None), "request_percentage", 50.0, false)).unwrap();
        image.apply(&set(entity(Some("alice"), None), "producer_byte_rate", 0.0, true)).unwrap();
        assert_eq!(image.client_quotas.len(), 2, "an entity without quotas is gone: {:?}", image.client_quotas);
        let default_user: crate::image::QuotaEntity = [("user".to_string(), None)].into();
        assert_eq!(image.client_quotas[&default_user]["request_percentage"], 50.0);
        let loaded = decode(encode(&image, 1).unwrap()).unwrap();
        assert_eq!(loaded.client_quotas, image.client_quotas);
    }

    #[test]
    fn acls_replay_are_removed_and_survive_a_snapshot() {
        use krabka_protocol::{AccessControlEntryRecord, RemoveAccessControlEntryRecord, Uuid};
        let mut image = image();
        let acl = |id: u8, name: &str, principal: &str| {
            let record = AccessControlEntryRecord {
                id: Uuid([id; 16]),
                resource_type: 2, // TOPIC
                resource_name: name.into(),
                pattern_type: 4, // PREFIXED
                principal: principal.into(),
                host: "*".into(),
                operation: 4,       // WRITE
                permission_type: 3, // ALLOW
                ..Default::default()
            };
            MetadataRecord::decode(MetadataRecord::AccessControlEntry(record).encode()).unwrap()
        };
        image.apply(&acl(1, "orders-", "User:alice")).unwrap();
        image.apply(&acl(2, "payments", "User:bob")).unwrap();
        image.apply(&acl(3, "audit", "User:carol")).unwrap();
        assert!(image.apply(&acl(1, "other", "User:dave")).is_err(), "an id already held");
        let remove = RemoveAccessControlEntryRecord { id: Uuid([3; 16]), ..Default::default() };
        image.apply(&MetadataRecord::RemoveAccessControlEntry(remove.clone())).unwrap();
        assert!(image.apply(&MetadataRecord::RemoveAccessControlEntry(remove)).is_err(), "an id not held");
        let loaded = decode(encode(&image, 1).unwrap()).unwrap();
        assert_eq!(loaded.acls.len(), 2);
        assert!(loaded.unmodeled.is_empty(), "ACLs are modelled, not kept raw");
        let ids = loaded.acls.matching_ids(&krabka_security::acl::AclBindingFilter::ANY);
        assert_eq!(ids.len(), 2);
        for id in ids {
            assert_eq!(loaded.acls.get(&id), image.acls.get(&id));
        }
    }

    #[test]
    fn a_snapshot_keeps_what_the_image_does_not_model_and_per_broker_configs() {
        let mut image = image();
        // A record of a type krabka does not know (99), and a NoOpRecord
        // (type 20), which marks the log and is no state.
        let unknown = MetadataRecord::decode(Bytes::from_static(&[1, 99, 0, 7, 7, 7])).unwrap();
        image.apply(&unknown).unwrap();
        image.apply(&MetadataRecord::decode(Bytes::from_static(&[1, 20, 0, 0])).unwrap()).unwrap();
        image.apply(&config_record(CONFIG_RESOURCE_BROKER, "2", "log.cleaner.threads", "3")).unwrap();
        image.apply(&config_record(CONFIG_RESOURCE_BROKER, "", "log.retention.ms", "9")).unwrap();
        let loaded = decode(encode(&image, 1).unwrap()).unwrap();
        assert_eq!(*loaded.unmodeled, vec![unknown]);
        assert_eq!(loaded.per_broker_configs["2"]["log.cleaner.threads"], "3");
        assert_eq!(loaded.broker_configs.len(), 1, "a broker's own config is not the cluster's");
        // A record the image refuses is skipped, as replaying the log skips it.
        let mut bytes = encode(&image, 1).unwrap().to_vec();
        let group_config = config_record(32, "g", "consumer.session.timeout.ms", "45000");
        let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(0);
        let value = group_config.encode();
        builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&value), headers: &[] }).unwrap();
        let footer_at =
            bytes.len() - RecordBatches::new(Bytes::from(bytes.clone())).last().unwrap().unwrap().as_bytes().len();
        bytes.splice(footer_at..footer_at, builder.build().unwrap().as_bytes().iter().copied());
        assert_eq!(decode(Bytes::from(bytes)).unwrap().topics.len(), 1);
    }

    #[test]
    fn a_snapshot_cut_short_or_corrupt_does_not_decode() {
        let bytes = encode(&image(), 1).unwrap();
        // Cut short (no footer), wherever.
        for cut in [0, 10, bytes.len() / 2, bytes.len() - 10] {
            assert!(decode(bytes.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.to_vec();
        let last = flipped.len() - 2;
        flipped[last] ^= 0xff;
        assert!(decode(Bytes::from(flipped)).is_err());
    }

    #[test]
    fn a_snapshot_starts_with_its_header_and_ends_with_its_footer() {
        let batches: Vec<_> = RecordBatches::new(encode(&image(), 7).unwrap()).map(Result::unwrap).collect();
        let control_type = |batch: &krabka_protocol::records::RecordBatch| {
            let key = batch.records(usize::MAX).unwrap().next().unwrap().unwrap().key.unwrap();
            control_type_id(&key).and_then(ControlType::from_id).unwrap()
        };
        assert!(batches[0].is_control() && batches.last().unwrap().is_control());
        assert_eq!(control_type(&batches[0]), ControlType::SnapshotHeader);
        assert_eq!(control_type(batches.last().unwrap()), ControlType::SnapshotFooter);
        assert!(batches[1..batches.len() - 1].iter().all(|b| !b.is_control()));
    }
}
