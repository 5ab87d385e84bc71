//! Leadership that follows a broker's state, as Kafka's controller moves
//! it (`generateLeaderAndIsrUpdates`): a broker fenced or shutting down
//! leaves every ISR it is in (the last member stays when Eligible Leader
//! Replicas are off) and its partitions elect another leader from the ISR;
//! a broker unfenced may take the partitions left without a leader. Which
//! brokers may lead, a topic's `min.insync.replicas` and
//! `unclean.leader.election.enable`, and whether ELR is on are read from
//! the image.

use krabka_log::topic_config::MIN_INSYNC_REPLICAS;
use krabka_metadata::{directory_id, MetadataImage, MetadataRecord, PartitionImage, TopicImage};
use krabka_protocol::{BrokerRegistrationChangeRecord, Uuid};

use crate::features::ELR_VERSION;
use crate::partition_change::{Election, PartitionChangeBuilder, NO_LEADER};

/// Registered, unfenced and not in controlled shutdown: may lead and join an ISR.
pub fn is_active(image: &MetadataImage, broker_id: i32) -> bool {
    image.brokers.get(&broker_id).is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
}

/// Whether `broker_id` may lead `partition`: active, and its replica in a
/// log directory that is online (Kafka's LeaderAcceptor, KIP-858).
pub fn may_lead(image: &MetadataImage, partition: &PartitionImage, broker_id: i32) -> bool {
    is_active(image, broker_id) && replica_directory_online(image, partition, broker_id)
}

/// Whether `broker_id`'s replica of `partition` is in a log directory its
/// registration lists online (Kafka's `DirectoryId.isOnline`).
fn replica_directory_online(image: &MetadataImage, partition: &PartitionImage, broker_id: i32) -> bool {
    let Some(directory) = partition.directory_of(broker_id) else { return true };
    let online = image.brokers.get(&broker_id).map_or(&[][..], |b| b.log_dirs.as_slice());
    directory_id::is_online(directory, online)
}

/// A topic config's effective value: the topic's own, else the cluster's
/// dynamic default.
pub fn topic_config<'a>(image: &'a MetadataImage, topic: &'a TopicImage, key: &str) -> Option<&'a str> {
    topic.configs.get(key).or_else(|| image.broker_configs.get(key)).map(|v| v.trim())
}

/// KIP-966 is on once `eligible.leader.replicas.version` is finalized at 1.
pub fn elr_enabled(image: &MetadataImage) -> bool {
    image.features.get(ELR_VERSION).is_some_and(|&level| level >= 1)
}

/// The election a topic's partitions hold: unclean where it allows it.
pub fn topic_election(image: &MetadataImage, topic: &TopicImage) -> Election {
    match topic_config(image, topic, "unclean.leader.election.enable") {
        Some(v) if v.eq_ignore_ascii_case("true") => Election::Unclean,
        _ => Election::Online,
    }
}

/// The topic's effective `min.insync.replicas` (1 if unset).
pub fn topic_min_isr(image: &MetadataImage, topic: &TopicImage) -> usize {
    topic_config(image, topic, MIN_INSYNC_REPLICAS).and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// A broker's directory for a replica placed on it anew (Kafka's
/// `defaultDir`): its only log directory; unassigned when it has several
/// (it names one later) or is not registered; migrating when it registered
/// none (a broker from before directories).
pub fn default_directory(image: &MetadataImage, broker_id: i32) -> Uuid {
    match image.brokers.get(&broker_id).map(|b| b.log_dirs.as_slice()) {
        Some([only]) => *only,
        Some([]) => directory_id::MIGRATING,
        _ => directory_id::UNASSIGNED,
    }
}

/// A builder for one partition of `topic`, with the topic's election, its
/// ELR settings and the image's directories.
pub fn change_builder<'a, F: Fn(i32) -> bool>(
    image: &'a MetadataImage,
    topic: &'a TopicImage,
    index: i32,
    partition: &'a PartitionImage,
    acceptable_leader: F,
    directory: &'a dyn Fn(i32) -> Uuid,
) -> PartitionChangeBuilder<'a, F> {
    PartitionChangeBuilder::new(partition, topic.id, index, acceptable_leader)
        .election(topic_election(image, topic))
        .eligible_leader_replicas(elr_enabled(image), topic_min_isr(image, topic))
        .default_directory(directory)
}

/// Which partitions a broker's change touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touched {
    /// Those whose ISR names the broker (it is being fenced or shut down).
    InIsrOf(i32),
    /// Those without a leader (a broker is being unfenced).
    Leaderless,
}

/// The partition changes that follow `removed` leaving (fenced or in
/// controlled shutdown) or `added` coming back (unfenced; NO_LEADER for
/// neither): `removed` leaves the ISRs and may not lead, `added` may lead
/// although the image still shows it fenced. Topics by name, partitions by
/// index, so a plan is a pure function of the image.
pub fn leader_and_isr_updates(
    image: &MetadataImage,
    removed: i32,
    added: i32,
    touched: Touched,
) -> Vec<MetadataRecord> {
    let directory = |r: i32| default_directory(image, r);
    let mut records = Vec::new();
    for (topic, index, partition) in partitions_by_topic_name(image) {
        let hit = match touched {
            Touched::InIsrOf(id) => partition.isr.contains(&id),
            Touched::Leaderless => partition.leader == NO_LEADER,
        };
        if !hit {
            continue;
        }
        let acceptable = |r: i32| {
            r != removed && (r == added || is_active(image, r)) && replica_directory_online(image, partition, r)
        };
        let isr: Vec<i32> = partition.isr.iter().copied().filter(|&r| r != removed).collect();
        let builder = change_builder(image, topic, index, partition, acceptable, &directory);
        if let Some(change) = builder.target_isr(isr).build() {
            records.push(MetadataRecord::PartitionChange(change));
        }
    }
    records
}

/// Every partition with its topic and index, topics by name and
/// partitions by index, so a plan is a pure function of the image.
fn partitions_by_topic_name(image: &MetadataImage) -> Vec<(&TopicImage, i32, &PartitionImage)> {
    let mut topics: Vec<&TopicImage> = image.topics.values().map(|t| t.as_ref()).collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    topics.into_iter().flat_map(|t| t.partitions.iter().enumerate().map(move |(i, p)| (t, i as i32, p))).collect()
}

/// A broker registering anew after an unclean shutdown, ELR being on
/// (Kafka's `handleBrokerUncleanShutdown`): it may have lost records it
/// held unflushed, so it leaves every ISR and ELR naming it and may not
/// be elected by these changes; it comes back through the ISR once its
/// leaders see it caught up.
pub fn unclean_shutdown_updates(image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
    if !elr_enabled(image) {
        return Vec::new();
    }
    let directory = |r: i32| default_directory(image, r);
    let mut records = Vec::new();
    for (topic, index, partition) in partitions_by_topic_name(image) {
        if !partition.isr.contains(&broker_id) && !partition.elr.contains(&broker_id) {
            continue;
        }
        let acceptable = |r: i32| r != broker_id && may_lead(image, partition, r);
        let isr: Vec<i32> = partition.isr.iter().copied().filter(|&r| r != broker_id).collect();
        let builder = change_builder(image, topic, index, partition, acceptable, &directory);
        if let Some(change) = builder.unclean_shutdown_replicas(vec![broker_id]).target_isr(isr).build() {
            records.push(MetadataRecord::PartitionChange(change));
        }
    }
    records
}

/// The partition changes that follow `broker_id` reporting its log
/// directories `offline` (Kafka's `handleDirectoriesOffline`): each
/// replica of its in one of them leaves the ISR and may not lead; the
/// partitions it led elect another leader. Kafka's BrokerHeartbeat
/// carries the list; only directories the broker still lists online move
/// anything, and a BrokerRegistrationChangeRecord then lists those left.
pub fn offline_directory_updates(image: &MetadataImage, broker_id: i32, offline: &[Uuid]) -> Vec<MetadataRecord> {
    let Some(broker) = image.brokers.get(&broker_id) else { return Vec::new() };
    let newly_offline: Vec<Uuid> = broker.log_dirs.iter().copied().filter(|d| offline.contains(d)).collect();
    if newly_offline.is_empty() {
        return Vec::new();
    }
    let directory = |r: i32| default_directory(image, r);
    let mut records = Vec::new();
    for (topic, index, partition) in partitions_by_topic_name(image) {
        if !partition.directory_of(broker_id).is_some_and(|d| newly_offline.contains(&d)) {
            continue;
        }
        let acceptable = |r: i32| r != broker_id && may_lead(image, partition, r);
        let isr: Vec<i32> = partition.isr.iter().copied().filter(|&r| r != broker_id).collect();
        let builder = change_builder(image, topic, index, partition, acceptable, &directory);
        if let Some(change) = builder.target_isr(isr).build() {
            records.push(MetadataRecord::PartitionChange(change));
        }
    }
    let online: Vec<Uuid> = broker.log_dirs.iter().copied().filter(|d| !offline.contains(d)).collect();
    // Every directory offline: the broker halts (Kafka's does too); its
    // registration keeps the list, as Kafka's record would be empty.
    if !online.is_empty() {
        records.push(MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id,
            broker_epoch: broker.broker_epoch,
            log_dirs: online,
            ..Default::default()
        }));
    }
    records
}

/// Whether `broker_id` leads any partition in `image`.
pub fn leads_any(image: &MetadataImage, broker_id: i32) -> bool {
    image.topics.values().any(|t| t.partitions.iter().any(|p| p.leader == broker_id))
}
