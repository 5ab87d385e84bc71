//! Images the unit tests start from: registered brokers and one topic "t"
//! (id `TOPIC`) with one partition.

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::{PartitionRecord, RegisterBrokerRecord, TopicRecord, Uuid};

pub const TOPIC: Uuid = Uuid([7; 16]);

/// Brokers `1..=brokers` (broker epoch 10 x id; those in `fenced`
/// fenced) and partition t-0 on `replicas`, all in sync, led by `leader`.
pub fn one_partition(brokers: i32, fenced: &[i32], replicas: &[i32], leader: i32) -> MetadataImage {
    let mut image = MetadataImage::default();
    for id in 1..=brokers {
        let broker = RegisterBrokerRecord {
            broker_id: id,
            broker_epoch: 10 * i64::from(id),
            fenced: fenced.contains(&id),
            ..Default::default()
        };
        image.apply(&MetadataRecord::RegisterBroker(broker)).unwrap();
    }
    image
        .apply(&MetadataRecord::Topic(TopicRecord { name: "t".into(), topic_id: TOPIC, ..Default::default() }))
        .unwrap();
    let partition = PartitionRecord {
        topic_id: TOPIC,
        partition_id: 0,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        ..Default::default()
    };
    image.apply(&MetadataRecord::Partition(partition)).unwrap();
    image
}
