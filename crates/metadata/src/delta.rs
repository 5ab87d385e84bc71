//! What a run of committed records changed, noted as they apply (Kafka's
//! `MetadataDelta`): subscribers of the image act on the topics, partitions
//! and configs named here instead of comparing two whole images.
//!
//! Topics are named by id, so a topic deleted and created again under its
//! name is one deletion and one creation. A delta describes the end state
//! against the start: a topic created and deleted within one delta is in
//! neither list.

use std::collections::{BTreeMap, BTreeSet};

use krabka_protocol::Uuid;

use crate::image::MetadataImage;
use crate::records::{MetadataRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    /// Topics the new image has and the old one had not: id -> name.
    pub created_topics: BTreeMap<Uuid, String>,
    /// Topics the old image had and the new one has not: id -> name.
    pub deleted_topics: BTreeMap<Uuid, String>,
    /// Partitions that did not exist before (every partition of a created
    /// topic), by topic id.
    pub new_partitions: BTreeMap<Uuid, BTreeSet<i32>>,
    /// Existing partitions whose leader, ISR or replicas changed, by topic id.
    pub changed_partitions: BTreeMap<Uuid, BTreeSet<i32>>,
    /// Topics (by name) whose config overrides changed.
    pub changed_topic_configs: BTreeSet<String>,
    /// Dynamic broker config keys that were set or removed, the cluster's
    /// default or any broker's own.
    pub changed_broker_configs: BTreeSet<String>,
    /// The new start of the next producer-id block, when a block was taken.
    pub next_producer_id_block: Option<i64>,
}

/// What one record changes, read from the image before it applies.
enum Change {
    TopicCreated { id: Uuid, name: String },
    TopicDeleted { id: Uuid, name: String },
    PartitionAdded { id: Uuid, partition: i32 },
    PartitionChanged { id: Uuid, partition: i32 },
    PartitionsChanged(Vec<(Uuid, i32)>),
    TopicConfig { name: String },
    BrokerConfig { key: String },
    ProducerIds { next: i64 },
    Nothing,
}

impl Change {
    fn of(image: &MetadataImage, record: &MetadataRecord) -> Change {
        match record {
            MetadataRecord::Topic(r) => Change::TopicCreated { id: r.topic_id, name: r.name.clone() },
            MetadataRecord::RemoveTopic(r) => match image.topic_names_by_id.get(&r.topic_id) {
                Some(name) => Change::TopicDeleted { id: r.topic_id, name: name.clone() },
                None => Change::Nothing,
            },
            MetadataRecord::Partition(r) => {
                let existing = image.topic_by_id(&r.topic_id).map_or(0, |t| t.partitions.len());
                let added = usize::try_from(r.partition_id).is_ok_and(|p| p >= existing);
                let (id, partition) = (r.topic_id, r.partition_id);
                if added {
                    Change::PartitionAdded { id, partition }
                } else {
                    Change::PartitionChanged { id, partition }
                }
            }
            MetadataRecord::PartitionChange(r) => {
                Change::PartitionChanged { id: r.topic_id, partition: r.partition_id }
            }
            MetadataRecord::Config(r) => match r.resource_type {
                CONFIG_RESOURCE_TOPIC => Change::TopicConfig { name: r.resource_name.clone() },
                CONFIG_RESOURCE_BROKER => Change::BrokerConfig { key: r.name.clone() },
                _ => Change::Nothing,
            },
            MetadataRecord::ProducerIds(r) => Change::ProducerIds { next: r.next_producer_id },
            MetadataRecord::ClearElr(r) => Change::PartitionsChanged(
                image
                    .partitions_with_elr(&r.topic_name)
                    .into_iter()
                    .map(|(name, index)| (image.topics[&name].id, index as i32))
                    .collect(),
            ),
            // Nobody follows broker registrations by delta yet: readers look
            // them up in the image.
            MetadataRecord::RegisterBroker(_)
            | MetadataRecord::BrokerRegistrationChange(_)
            | MetadataRecord::RegisterController(_)
            | MetadataRecord::UnregisterBroker(_)
            | MetadataRecord::FeatureLevel(_)
            | MetadataRecord::UserScramCredential(_)
            | MetadataRecord::RemoveUserScramCredential(_)
            | MetadataRecord::ClientQuota(_)
            | MetadataRecord::AccessControlEntry(_)
            | MetadataRecord::RemoveAccessControlEntry(_)
            | MetadataRecord::Other { .. } => Change::Nothing,
        }
    }
}

/// The keys whose values differ between two config maps.
fn changed_keys(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> BTreeSet<String> {
    old.keys().chain(new.keys()).filter(|k| old.get(*k) != new.get(*k)).cloned().collect()
}

impl MetadataDelta {
    /// The delta from an empty image to `image`: everything in it is new.
    /// A subscriber that joins late starts from this.
    pub fn from_empty(image: &MetadataImage) -> MetadataDelta {
        MetadataDelta::between(&MetadataImage::default(), image)
    }

    /// What changed from `old` to `new`, compared whole: for an image
    /// loaded from a snapshot in place of one built record by record (a
    /// follower that fetched its leader's snapshot), whose subscribers must
    /// hear of the difference as of any other update.
    pub fn between(old: &MetadataImage, new: &MetadataImage) -> MetadataDelta {
        let mut delta = MetadataDelta::default();
        for topic in old.topics.values().filter(|t| new.topic_by_id(&t.id).is_none()) {
            delta.deleted_topics.insert(topic.id, topic.name.clone());
        }
        for topic in new.topics.values() {
            let before = old.topic_by_id(&topic.id);
            if before.is_none() {
                delta.created_topics.insert(topic.id, topic.name.clone());
            }
            let existing = before.map_or(&[][..], |t| &t.partitions[..]);
            for (index, partition) in topic.partitions.iter().enumerate() {
                let changes = match existing.get(index) {
                    None => &mut delta.new_partitions,
                    Some(was) if was != partition => &mut delta.changed_partitions,
                    Some(_) => continue,
                };
                changes.entry(topic.id).or_default().insert(index as i32);
            }
            if before.map_or(!topic.configs.is_empty(), |t| t.configs != topic.configs) {
                delta.changed_topic_configs.insert(topic.name.clone());
            }
        }
        delta.changed_broker_configs = changed_keys(&old.broker_configs, &new.broker_configs);
        let brokers = old.per_broker_configs.keys().chain(new.per_broker_configs.keys());
        for broker in brokers {
            let (before, after) = (old.per_broker_configs.get(broker), new.per_broker_configs.get(broker));
            if before != after {
                let none = BTreeMap::new();
                delta.changed_broker_configs.extend(changed_keys(before.unwrap_or(&none), after.unwrap_or(&none)));
            }
        }
        if new.next_producer_id_block != old.next_producer_id_block {
            delta.next_producer_id_block = Some(new.next_producer_id_block);
        }
        delta
    }

    /// Applies `record` to `image` and notes what it changed. A record the
    /// image refuses (`MetadataImage::apply`'s error) changes nothing.
    pub fn apply(&mut self, image: &mut MetadataImage, record: &MetadataRecord) -> Result<(), String> {
        let change = Change::of(image, record);
        image.apply(record)?;
        self.note(change);
        Ok(())
    }

    /// No change at all (an empty commit).
    pub fn is_empty(&self) -> bool {
        *self == MetadataDelta::default()
    }

    fn note(&mut self, change: Change) {
        match change {
            Change::TopicCreated { id, name } => {
                self.created_topics.insert(id, name);
            }
            Change::TopicDeleted { id, name } => {
                // Born and gone within this delta: the start never had it.
                if self.created_topics.remove(&id).is_none() {
                    self.deleted_topics.insert(id, name.clone());
                }
                self.new_partitions.remove(&id);
                self.changed_partitions.remove(&id);
                self.changed_topic_configs.remove(&name);
            }
            Change::PartitionAdded { id, partition } => {
                self.new_partitions.entry(id).or_default().insert(partition);
            }
            Change::PartitionChanged { id, partition } => {
                // A partition new in this delta is reported as new only.
                if !self.new_partitions.get(&id).is_some_and(|p| p.contains(&partition)) {
                    self.changed_partitions.entry(id).or_default().insert(partition);
                }
            }
            Change::PartitionsChanged(partitions) => {
                for (id, partition) in partitions {
                    self.note(Change::PartitionChanged { id, partition });
                }
            }
            Change::TopicConfig { name } => {
                self.changed_topic_configs.insert(name);
            }
            Change::BrokerConfig { key } => {
                self.changed_broker_configs.insert(key);
            }
            Change::ProducerIds { next } => self.next_producer_id_block = Some(next),
            Change::Nothing => {}
        }
        debug_assert!(
            self.created_topics.keys().all(|id| !self.deleted_topics.contains_key(id)),
            "a topic id both created and deleted in one delta"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::image_records;
    use krabka_protocol::{ConfigRecord, PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, TopicRecord};

    fn topic(name: &str, id: u8) -> MetadataRecord {
        MetadataRecord::Topic(TopicRecord { name: name.into(), topic_id: Uuid([id; 16]), ..Default::default() })
    }

    fn partition(id: u8, partition_id: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord { partition_id, topic_id: Uuid([id; 16]), ..Default::default() })
    }

    fn remove(id: u8) -> MetadataRecord {
        MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: Uuid([id; 16]), ..Default::default() })
    }

    fn config(resource_type: i8, resource_name: &str, name: &str) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: resource_name.into(),
            name: name.into(),
            value: Some("1".into()),
            ..Default::default()
        })
    }

    fn apply_all(image: &mut MetadataImage, records: &[MetadataRecord]) -> MetadataDelta {
        let mut delta = MetadataDelta::default();
        for record in records {
            delta.apply(image, record).unwrap();
        }
        delta
    }

    #[test]
    fn a_delta_names_what_its_records_created_deleted_and_changed() {
        let mut image = MetadataImage::default();
        let first = apply_all(&mut image, &[topic("a", 1), partition(1, 0), topic("b", 2), partition(2, 0)]);
        assert_eq!(first.created_topics.values().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(first.new_partitions[&Uuid([1; 16])], BTreeSet::from([0]));
        assert!(first.changed_partitions.is_empty() && first.deleted_topics.is_empty());

        let change = MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: Uuid([1; 16]),
            leader: -2,
            ..Default::default()
        });
        let records = [
            partition(1, 1),
            change,
            config(CONFIG_RESOURCE_TOPIC, "a", "retention.ms"),
            config(CONFIG_RESOURCE_BROKER, "", "log.retention.ms"),
            remove(2),
        ];
        let second = apply_all(&mut image, &records);
        assert!(second.created_topics.is_empty());
        assert_eq!(second.deleted_topics, BTreeMap::from([(Uuid([2; 16]), "b".to_string())]));
        assert_eq!(second.new_partitions, BTreeMap::from([(Uuid([1; 16]), BTreeSet::from([1]))]));
        assert_eq!(second.changed_partitions, BTreeMap::from([(Uuid([1; 16]), BTreeSet::from([0]))]));
        assert_eq!(second.changed_topic_configs, BTreeSet::from(["a".to_string()]));
        assert_eq!(second.changed_broker_configs, BTreeSet::from(["log.retention.ms".to_string()]));
        assert!(image.topic("b").is_none() && image.is_consistent());
    }

    #[test]
    fn a_topic_born_and_gone_in_one_delta_is_in_neither_list_and_a_recreation_is_both() {
        let mut image = MetadataImage::default();
        let delta = apply_all(&mut image, &[topic("a", 1), partition(1, 0), remove(1)]);
        assert!(delta.is_empty(), "{delta:?}");

        apply_all(&mut image, &[topic("a", 1)]);
        let recreated = apply_all(&mut image, &[remove(1), topic("a", 3), partition(3, 0)]);
        assert_eq!(recreated.deleted_topics, BTreeMap::from([(Uuid([1; 16]), "a".to_string())]));
        assert_eq!(recreated.created_topics, BTreeMap::from([(Uuid([3; 16]), "a".to_string())]));
        assert_eq!(recreated.new_partitions.keys().collect::<Vec<_>>(), [&Uuid([3; 16])]);
    }

    #[test]
    fn a_refused_record_changes_nothing_and_is_noted_nowhere() {
        let mut image = MetadataImage::default();
        let mut delta = MetadataDelta::default();
        assert!(delta.apply(&mut image, &partition(9, 0)).is_err());
        assert!(delta.apply(&mut image, &config(CONFIG_RESOURCE_TOPIC, "missing", "x")).is_err());
        assert!(delta.is_empty());
    }

    #[test]
    fn the_delta_from_empty_is_what_replaying_the_image_notes() {
        let mut image = MetadataImage::default();
        let mut records = vec![topic("a", 1), partition(1, 0), partition(1, 1), topic("b", 2)];
        records.push(config(CONFIG_RESOURCE_TOPIC, "a", "cleanup.policy"));
        records.push(config(CONFIG_RESOURCE_BROKER, "", "log.retention.ms"));
        apply_all(&mut image, &records);
        image.next_producer_id_block = 2000;
        let replayed = apply_all(&mut MetadataImage::default(), &image_records(&image));
        assert_eq!(MetadataDelta::from_empty(&image), replayed);
        assert!(MetadataDelta::from_empty(&MetadataImage::default()).is_empty());
    }

    #[test]
    fn the_delta_between_two_images_is_what_the_records_between_them_note() {
        let mut old = MetadataImage::default();
        apply_all(&mut old, &[topic("a", 1), partition(1, 0), topic("b", 2), partition(2, 0)]);
        apply_all(&mut old, &[config(CONFIG_RESOURCE_BROKER, "", "log.retention.ms")]);
        let mut new = old.clone();
        let change = MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: Uuid([1; 16]),
            leader: 4,
            ..Default::default()
        });
        let records = [
            change,
            partition(1, 1),
            remove(2),
            topic("c", 3),
            partition(3, 0),
            config(CONFIG_RESOURCE_TOPIC, "c", "retention.ms"),
            config(CONFIG_RESOURCE_BROKER, "", "log.cleaner.threads"),
        ];
        let noted = apply_all(&mut new, &records);
        new.next_producer_id_block = 5000;
        let mut expected = noted;
        expected.next_producer_id_block = Some(5000);
        assert_eq!(MetadataDelta::between(&old, &new), expected);
        assert!(MetadataDelta::between(&new, &new).is_empty());
        assert_eq!(MetadataDelta::between(&MetadataImage::default(), &new), MetadataDelta::from_empty(&new));
    }
}
