//! The in-memory metadata image: what the metadata log says, applied.
//! Handlers read an `Arc<MetadataImage>` snapshot; changes build a new one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use krabka_protocol::{
    PartitionChangeRecord, RegisterBrokerRecord, RegisterControllerRecord, UserScramCredentialRecord, Uuid,
};

use crate::records::{MetadataRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionImage {
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Eligible Leader Replicas (KIP-966): out of the ISR, yet known to
    /// hold everything committed, so electable.
    pub elr: Vec<i32>,
    /// The ELR members last seen before the ELR emptied (KIP-966).
    pub last_known_elr: Vec<i32>,
    /// Kafka's LeaderRecoveryState: 0 recovered, 1 recovering (after an
    /// unclean election).
    pub leader_recovery_state: i8,
    /// A reassignment's replicas being added and removed.
    pub adding_replicas: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    /// Each replica's log directory (KIP-858), as the record names them.
    pub directories: Vec<Uuid>,
}

/// A PartitionChangeRecord's LeaderRecoveryState that changes nothing.
const RECOVERY_STATE_UNCHANGED: i8 = -1;

#[derive(Clone, Debug, PartialEq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    /// Indexed by partition id.
    pub partitions: Vec<PartitionImage>,
    /// Topic config overrides (`ConfigRecord`s of this topic).
    pub configs: BTreeMap<String, String>,
}

impl TopicImage {
    /// Internal topics as Kafka marks them in Metadata responses.
    pub fn is_internal(&self) -> bool {
        self.name == "__consumer_offsets" || self.name == "__transaction_state" || self.name == "__share_group_state"
    }
}

use krabka_security::acl::{AclBinding, Authorizer};
/// A client quota entity: entity type (`user`, `client-id`, `ip`) to name,
/// None naming the type's default entity; one definition, krabka-security's,
/// which decides the quota that applies.
pub use krabka_security::quota::QuotaEntity;

#[derive(Clone, Debug, Default)]
pub struct MetadataImage {
    pub topics: HashMap<String, Arc<TopicImage>>,
    pub topic_names_by_id: HashMap<Uuid, String>,
    /// Dynamic broker configs (`ConfigRecord`s of a broker resource).
    pub broker_configs: BTreeMap<String, String>,
    /// Registered brokers by id, as their latest `RegisterBrokerRecord`
    /// with the fencing changes since applied to it.
    pub brokers: BTreeMap<i32, RegisterBrokerRecord>,
    /// Registered controllers by id (KIP-919), as their latest
    /// `RegisterControllerRecord`.
    pub controllers: BTreeMap<i32, RegisterControllerRecord>,
    /// The first producer id not yet handed out in a block.
    pub next_producer_id_block: i64,
    /// Finalized feature levels by name (`FeatureLevelRecord`s; a level of
    /// 0 removes the feature, as in Kafka).
    pub features: BTreeMap<String, i16>,
    /// Per-broker dynamic configs (`ConfigRecord`s of a broker resource
    /// naming one broker), by broker id as the record names it, then key.
    pub per_broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// SCRAM credentials by (user, mechanism type: 1 SCRAM-SHA-256, 2
    /// SCRAM-SHA-512), as their latest `UserScramCredentialRecord`s.
    pub scram_credentials: BTreeMap<(String, i8), UserScramCredentialRecord>,
    /// Client quotas (`ClientQuotaRecord`s) by entity, then quota key.
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
    /// Records of cluster state krabka does not model (ACLs,
    /// credentials, delegation tokens, newer types), in log order: a
    /// snapshot writes them back, so nothing the log held is lost to it.
    pub unmodeled: Arc<Vec<MetadataRecord>>,
    /// The ACLs (AccessControlEntryRecords), by id and indexed for
    /// authorization; the broker decides under its own `super.users`.
    pub acls: Arc<Authorizer>,
    /// Offset of the last applied record (the image's "epoch").
    pub offset: i64,
}

/// A PartitionChangeRecord's fields onto `partition`, as Kafka's
/// PartitionRegistration.merge: a field that is absent changes nothing;
/// the leader -2 means unchanged, any other leader starts a new leader
/// epoch; every change is a new partition epoch.
impl PartitionImage {
    /// The log directory `broker_id`'s replica is in, if the partition
    /// names one (it has the replica and records directories).
    pub fn directory_of(&self, broker_id: i32) -> Option<Uuid> {
        let index = self.replicas.iter().position(|&r| r == broker_id)?;
        self.directories.get(index).copied()
    }

    /// This partition after `change` (Kafka's PartitionRegistration.merge).
    pub fn merge(&mut self, change: &krabka_protocol::PartitionChangeRecord) {
        apply_partition_change(self, change);
    }
}

fn apply_partition_change(partition: &mut PartitionImage, r: &krabka_protocol::PartitionChangeRecord) {
    if r.leader != -2 {
        partition.leader = r.leader;
        partition.leader_epoch += 1;
    }
    let set = |field: &mut Vec<i32>, value: &Option<Vec<i32>>| {
        if let Some(value) = value {
            field.clone_from(value);
        }
    };
    set(&mut partition.isr, &r.isr);
    set(&mut partition.replicas, &r.replicas);
    set(&mut partition.adding_replicas, &r.adding_replicas);
    set(&mut partition.removing_replicas, &r.removing_replicas);
    set(&mut partition.elr, &r.eligible_leader_replicas);
    set(&mut partition.last_known_elr, &r.last_known_elr);
    if let Some(directories) = &r.directories {
        partition.directories.clone_from(directories);
    }
    if r.leader_recovery_state != RECOVERY_STATE_UNCHANGED {
        partition.leader_recovery_state = r.leader_recovery_state;
    }
    partition.partition_epoch += 1;
}

impl MetadataImage {
    /// The partitions (topic name, index) of `topic` (every topic when
    /// empty) whose ELR or last known ELR is not empty: what a
    /// ClearElrRecord changes.
    pub fn partitions_with_elr(&self, topic: &str) -> Vec<(String, usize)> {
        let topics = self.topics.values().filter(|t| topic.is_empty() || t.name == topic);
        topics
            .flat_map(|t| {
                let with_elr =
                    t.partitions.iter().enumerate().filter(|(_, p)| !p.elr.is_empty() || !p.last_known_elr.is_empty());
                with_elr.map(|(i, _)| (t.name.clone(), i)).collect::<Vec<_>>()
            })
            .collect()
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicImage>> {
        self.topic_names_by_id.get(id).and_then(|name| self.topics.get(name))
    }

    /// Applies one record. Records that refer to unknown topics are skipped
    /// with an error the caller logs: a damaged log must not stop the broker.
    pub fn apply(&mut self, record: &MetadataRecord) -> Result<(), String> {
        match record {
            MetadataRecord::Topic(r) => {
                // One name, one id: a second TopicRecord for a live name
                // would leave the first id pointing at nothing.
                if let Some(existing) = self.topics.get(&r.name).filter(|t| t.id != r.topic_id) {
                    return Err(format!("topic {} already exists with id {}", r.name, existing.id));
                }
                let topic = TopicImage {
                    name: r.name.clone(),
                    id: r.topic_id,
                    partitions: Vec::new(),
                    configs: BTreeMap::new(),
                };
                self.topic_names_by_id.insert(r.topic_id, r.name.clone());
                self.topics.insert(r.name.clone(), Arc::new(topic));
            }
            MetadataRecord::Partition(r) => {
                let topic = self.topic_mut_by_id(&r.topic_id)?;
                let index = usize::try_from(r.partition_id).map_err(|_| format!("partition id {}", r.partition_id))?;
                let partition = PartitionImage {
                    leader: r.leader,
                    leader_epoch: r.leader_epoch,
                    partition_epoch: r.partition_epoch,
                    replicas: r.replicas.clone(),
                    isr: r.isr.clone(),
                    elr: r.eligible_leader_replicas.clone().unwrap_or_default(),
                    last_known_elr: r.last_known_elr.clone().unwrap_or_default(),
                    leader_recovery_state: r.leader_recovery_state,
                    adding_replicas: r.adding_replicas.clone(),
                    removing_replicas: r.removing_replicas.clone(),
                    directories: r.directories.clone(),
                };
                if index < topic.partitions.len() {
                    topic.partitions[index] = partition;
                } else if index == topic.partitions.len() {
                    topic.partitions.push(partition);
                } else {
                    return Err(format!("partition {index} of {} skips ids", topic.name));
                }
            }
            MetadataRecord::PartitionChange(r) => {
                let topic = self.topic_mut_by_id(&r.topic_id)?;
                let Some(partition) = usize::try_from(r.partition_id).ok().and_then(|i| topic.partitions.get_mut(i))
                else {
                    return Err(format!("change of unknown partition {} of {}", r.partition_id, topic.name));
                };
                apply_partition_change(partition, r);
            }
            MetadataRecord::Config(r) => {
                let configs = match r.resource_type {
                    CONFIG_RESOURCE_TOPIC => match self.topics.get_mut(&r.resource_name) {
                        Some(topic) => &mut Arc::make_mut(topic).configs,
                        None => return Err(format!("config of unknown topic {}", r.resource_name)),
                    },
                    CONFIG_RESOURCE_BROKER if r.resource_name.is_empty() => &mut self.broker_configs,
                    CONFIG_RESOURCE_BROKER => self.per_broker_configs.entry(r.resource_name.clone()).or_default(),
                    other => return Err(format!("config of resource type {other}")),
                };
                match &r.value {
                    Some(value) => configs.insert(r.name.clone(), value.clone()),
                    None => configs.remove(&r.name),
                };
            }
            MetadataRecord::ClearElr(r) => {
                // As Kafka's image replays it: a change emptying both lists
                // (a new partition epoch) for each partition that has either.
                let cleared = PartitionChangeRecord {
                    leader: -2,
                    leader_recovery_state: RECOVERY_STATE_UNCHANGED,
                    eligible_leader_replicas: Some(Vec::new()),
                    last_known_elr: Some(Vec::new()),
                    ..Default::default()
                };
                for (name, index) in self.partitions_with_elr(&r.topic_name) {
                    let topic = Arc::make_mut(self.topics.get_mut(&name).expect("listed"));
                    apply_partition_change(&mut topic.partitions[index], &cleared);
                }
            }
            MetadataRecord::ProducerIds(r) => self.next_producer_id_block = r.next_producer_id,
            MetadataRecord::RemoveTopic(r) => {
                let Some(name) = self.topic_names_by_id.remove(&r.topic_id) else {
                    return Err(format!("removal of unknown topic id {}", r.topic_id));
                };
                self.topics.remove(&name);
            }
            MetadataRecord::RegisterBroker(r) => {
                self.brokers.insert(r.broker_id, r.clone());
            }
            MetadataRecord::RegisterController(r) => {
                self.controllers.insert(r.controller_id, r.clone());
            }
            MetadataRecord::BrokerRegistrationChange(r) => {
                let Some(broker) = self.brokers.get_mut(&r.broker_id).filter(|b| b.broker_epoch == r.broker_epoch)
                else {
                    return Err(format!("change of broker {} epoch {}, not registered", r.broker_id, r.broker_epoch));
                };
                // Kafka's BrokerRegistrationFencingChange: 1 fences, -1 unfences, 0 keeps.
                match r.fenced {
                    1 => broker.fenced = true,
                    -1 => broker.fenced = false,
                    _ => {}
                }
                match r.in_controlled_shutdown {
                    1 => broker.in_controlled_shutdown = true,
                    -1 => broker.in_controlled_shutdown = false,
                    _ => {}
                }
                // v2 (KIP-858): the directories still online, when it names any.
                if !r.log_dirs.is_empty() {
                    broker.log_dirs.clone_from(&r.log_dirs);
                }
            }
            MetadataRecord::FeatureLevel(r) => {
                if r.feature_level == 0 {
                    self.features.remove(&r.name);
                } else {
                    self.features.insert(r.name.clone(), r.feature_level);
                }
            }
            MetadataRecord::UnregisterBroker(r) => {
                // As Kafka's controller: only the registration of that epoch goes.
                match self.brokers.get(&r.broker_id) {
                    Some(broker) if broker.broker_epoch == r.broker_epoch => {
                        self.brokers.remove(&r.broker_id);
                    }
                    _ => return Err(format!("unregistration of broker {} epoch {}", r.broker_id, r.broker_epoch)),
                }
            }
            MetadataRecord::ClientQuota(r) => {
                let entity: QuotaEntity =
                    r.entity.iter().map(|e| (e.entity_type.clone(), e.entity_name.clone())).collect();
                if r.remove {
                    if let Some(quotas) = self.client_quotas.get_mut(&entity) {
                        quotas.remove(&r.key);
                        if quotas.is_empty() {
                            self.client_quotas.remove(&entity);
                        }
                    }
                } else {
                    self.client_quotas.entry(entity).or_default().insert(r.key.clone(), r.value);
                }
            }
            MetadataRecord::UserScramCredential(r) => {
                self.scram_credentials.insert((r.name.clone(), r.mechanism), r.clone());
            }
            MetadataRecord::RemoveUserScramCredential(r) => {
                self.scram_credentials.remove(&(r.name.clone(), r.mechanism));
            }
            MetadataRecord::AccessControlEntry(r) => {
                let binding = AclBinding::from_record(
                    r.resource_type,
                    &r.resource_name,
                    r.pattern_type,
                    &r.principal,
                    &r.host,
                    r.operation,
                    r.permission_type,
                );
                Arc::make_mut(&mut self.acls).add(r.id.0, binding).map_err(|e| e.to_string())?;
            }
            MetadataRecord::RemoveAccessControlEntry(r) => {
                Arc::make_mut(&mut self.acls).remove(&r.id.0).map_err(|e| e.to_string())?;
            }
            MetadataRecord::Other { .. } if record.is_unmodeled_state() => {
                Arc::make_mut(&mut self.unmodeled).push(record.clone());
            }
            MetadataRecord::Other { .. } => {}
        }
        Ok(())
    }

    /// The image's own invariant: every topic is found both by name and by
    /// id, under the name and id it carries. Linear in the topics: for
    /// debug assertions once per commit, not once per record.
    pub fn is_consistent(&self) -> bool {
        self.topics.len() == self.topic_names_by_id.len()
            && self.topics.iter().all(|(name, topic)| {
                topic.name == *name && self.topic_names_by_id.get(&topic.id).is_some_and(|n| n == name)
            })
    }

    fn topic_mut_by_id(&mut self, id: &Uuid) -> Result<&mut TopicImage, String> {
        let name = self.topic_names_by_id.get(id).ok_or_else(|| format!("unknown topic id {id}"))?;
        let topic = self.topics.get_mut(name).ok_or_else(|| format!("unknown topic {name}"))?;
        Ok(Arc::make_mut(topic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::{TopicRecord, Uuid};

    #[test]
    fn a_feature_level_finalizes_a_feature_and_level_zero_removes_it() {
        let mut image = MetadataImage::default();
        let level = |name: &str, feature_level| {
            MetadataRecord::FeatureLevel(krabka_protocol::FeatureLevelRecord {
                name: name.into(),
                feature_level,
                ..Default::default()
            })
        };
        image.apply(&level("metadata.version", 27)).unwrap();
        image.apply(&level("group.version", 1)).unwrap();
        image.apply(&level("metadata.version", 30)).unwrap();
        image.apply(&level("group.version", 0)).unwrap();
        assert_eq!(image.features, BTreeMap::from([("metadata.version".to_string(), 30)]));
    }

    #[test]
    fn a_second_topic_record_for_a_live_name_is_refused_and_the_image_stays_consistent() {
        let mut image = MetadataImage::default();
        let record = |id: u8| {
            MetadataRecord::Topic(TopicRecord { name: "t".into(), topic_id: Uuid([id; 16]), ..Default::default() })
        };
        image.apply(&record(1)).unwrap();
        assert!(image.apply(&record(2)).is_err());
        assert!(image.is_consistent());
        assert_eq!(image.topic("t").unwrap().id, Uuid([1; 16]));
        image.apply(&record(1)).unwrap();
        assert!(image.is_consistent(), "the same record again is harmless");
    }
}
