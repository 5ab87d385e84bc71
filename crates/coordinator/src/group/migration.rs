//! The upgrade path from a classic group to the consumer protocol (KIP-848,
//! `group.consumer.migration.policy=bidirectional` as Kafka 4 defaults):
//! when a consumer-protocol member joins a classic group of consumers, the
//! group becomes a consumer group that keeps its classic members. They go on
//! speaking JoinGroup / SyncGroup / Heartbeat, but the broker assigns: a
//! JoinGroup answers at once (the member is a follower), SyncGroup returns
//! the member's reconciled assignment in the consumer protocol's format, and
//! Heartbeat asks for a rejoin (REBALANCE_IN_PROGRESS) whenever that member's
//! assignment must change. Rolling a group from `group.protocol=classic` to
//! `consumer` therefore never stops consumption.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use krabka_protocol::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use krabka_protocol::{ConsumerProtocolAssignment, ConsumerProtocolSubscription, Message};

use super::assignor::Assignment;
use krabka_metadata::MetadataImage;

/// The protocol type of groups of consumers (the only one that can migrate).
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A classic member's subscription metadata: (topics, owned partitions).
pub fn decode_subscription(mut metadata: Bytes, image: &MetadataImage) -> Option<(Vec<String>, Assignment)> {
    if metadata.len() < 2 {
        return None;
    }
    let version = metadata.get_i16().clamp(0, ConsumerProtocolSubscription::MAX_VERSION);
    let subscription = ConsumerProtocolSubscription::decode(&mut metadata, version).ok()?;
    let mut owned = Assignment::new();
    for tp in &subscription.owned_partitions {
        if let Some(topic) = image.topic(&tp.topic) {
            owned.entry(topic.id).or_default().extend(tp.partitions.iter().copied());
        }
    }
    Some((subscription.topics, owned))
}

/// A classic member's assignment bytes (consumer protocol v0 and up).
pub fn decode_assignment(mut bytes: Bytes, image: &MetadataImage) -> Assignment {
    let mut out = Assignment::new();
    if bytes.len() < 2 {
        return out;
    }
    let version = bytes.get_i16().clamp(0, ConsumerProtocolAssignment::MAX_VERSION);
    if let Ok(assignment) = ConsumerProtocolAssignment::decode(&mut bytes, version) {
        for tp in assignment.assigned_partitions {
            if let Some(topic) = image.topic(&tp.topic) {
                out.entry(topic.id).or_default().extend(tp.partitions);
            }
        }
    }
    out
}

/// An assignment as a classic consumer reads it (consumer protocol v0).
pub fn encode_assignment(assignment: &Assignment, image: &MetadataImage) -> Bytes {
    let assigned_partitions = assignment
        .iter()
        .filter_map(|(id, set)| {
            image.topic_by_id(id).map(|t| AssignedTopic {
                topic: t.name.clone(),
                partitions: set.iter().copied().collect(),
                ..Default::default()
            })
        })
        .collect();
    let message = ConsumerProtocolAssignment { assigned_partitions, user_data: None, ..Default::default() };
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    let written = message.encode(&mut buf, 0);
    assert!(written.is_ok(), "assignment does not encode: {written:?}");
    buf.freeze()
}
