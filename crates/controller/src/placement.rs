//! Where a new partition's replicas go, as Kafka's controller decides it.
//!
//! A node that is its quorum's only voter places every replica on itself
//! (it is the one broker). In a shared quorum replicas go to the
//! registered brokers, as Kafka's `StripedReplicaPlacer` spreads them: only
//! unfenced brokers take new replicas ("All brokers are currently fenced."
//! when there is none), a replication factor above the registered brokers'
//! count is refused, and the brokers are taken in a rack-alternating order
//! (one broker of each rack in turn, Kafka's
//! `getRackAlternatedBrokerList`), partition after partition, so a topic's
//! partitions spread over the brokers and racks. Kafka starts each topic at
//! a random broker; here the start is the number of partitions the cluster
//! already has, so placement stays a pure function of the image (plans are)
//! and successive topics still rotate. A new partition's ISR is its
//! unfenced replicas and its leader the first of them.
//!
//! Manual assignments are checked as Kafka checks them: every broker
//! registered, none twice, the same replica count for every partition, at
//! least one unfenced replica.

use std::collections::BTreeMap;

use krabka_metadata::MetadataImage;
use krabka_protocol::ErrorCode;

use crate::error::ApiError;

/// Who takes new replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The node is its quorum's only voter and the one broker.
    OnlyNode(i32),
    /// A shared quorum: the brokers registered in the image.
    RegisteredBrokers,
}

/// One new partition's replicas, ISR and leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionAssignment {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
}

/// Places partitions one after another in the rack-alternating order.
pub struct Placer {
    placement: Placement,
    /// Unfenced brokers, rack-alternated.
    usable: Vec<i32>,
    registered: usize,
    next: usize,
}

impl Placer {
    pub fn new(image: &MetadataImage, placement: Placement) -> Self {
        let usable = rack_alternated(image);
        let next = image.topics.values().map(|t| t.partitions.len()).sum::<usize>();
        Placer { placement, usable, registered: image.brokers.len(), next }
    }

    /// The next partition's assignment, with `replication_factor` replicas.
    pub fn place(&mut self, replication_factor: i16) -> Result<PartitionAssignment, ApiError> {
        let refused = |why: String| {
            let message = format!("Unable to replicate the partition {replication_factor} time(s): {why}");
            Err(ApiError::new(ErrorCode::INVALID_REPLICATION_FACTOR.code(), message))
        };
        let factor = usize::try_from(replication_factor).unwrap_or(0);
        if factor == 0 {
            return refused(format!(
                "Invalid replication factor {replication_factor}: the replication factor must be positive."
            ));
        }
        let node = match self.placement {
            Placement::OnlyNode(node) => Some(node),
            Placement::RegisteredBrokers => None,
        };
        if let Some(node) = node {
            return if factor == 1 { Ok(alone_on(node)) } else { refused(too_few(factor, 1)) };
        }
        if self.usable.is_empty() {
            return refused("All brokers are currently fenced.".into());
        }
        if factor > self.registered {
            return refused(too_few(factor, self.registered));
        }
        if factor > self.usable.len() {
            return refused("All brokers are currently fenced or in controlled shutdown.".into());
        }
        let start = self.next % self.usable.len();
        self.next += 1;
        let replicas: Vec<i32> = (0..factor).map(|k| self.usable[(start + k) % self.usable.len()]).collect();
        debug_assert!(replicas.iter().all(|id| self.usable.contains(id)));
        Ok(PartitionAssignment { isr: replicas.clone(), leader: replicas[0], replicas })
    }

    /// A manual assignment of partition `index` to `brokers`, checked as
    /// Kafka checks it against the registered brokers; `factor` is the
    /// replica count of the assignments before it, if any.
    pub fn assign(
        &self,
        image: &MetadataImage,
        index: i32,
        brokers: &[i32],
        factor: Option<usize>,
    ) -> Result<PartitionAssignment, ApiError> {
        check_manual_assignment(image, self.placement, brokers, factor)?;
        let refused = |message: String| Err(ApiError::new(ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(), message));
        let active = |id: &&i32| match self.placement {
            Placement::OnlyNode(_) => true,
            Placement::RegisteredBrokers => image.brokers.get(id).is_some_and(|b| !b.fenced),
        };
        let isr: Vec<i32> = brokers.iter().filter(active).copied().collect();
        let Some(&leader) = isr.first() else {
            return refused(format!(
                "All brokers specified in the manual partition assignment for partition {index} are fenced or in \
                 controlled shutdown."
            ));
        };
        Ok(PartitionAssignment { replicas: brokers.to_vec(), isr, leader })
    }
}

/// A manual assignment's brokers, as Kafka checks them
/// (`validateManualPartitionAssignment`): some, each registered, none
/// twice, and `factor` of them when given.
pub fn check_manual_assignment(
    image: &MetadataImage,
    placement: Placement,
    brokers: &[i32],
    factor: Option<usize>,
) -> Result<(), ApiError> {
    let refused = |message: String| Err(ApiError::new(ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(), message));
    if brokers.is_empty() {
        return refused("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = brokers.to_vec();
    sorted.sort_unstable();
    let registered = |id: &i32| match placement {
        Placement::OnlyNode(node) => *id == node,
        Placement::RegisteredBrokers => image.brokers.contains_key(id),
    };
    if let Some(missing) = sorted.iter().find(|id| !registered(id)) {
        return refused(format!(
            "The manual partition assignment includes broker {missing}, but no such broker is registered."
        ));
    }
    if let Some(twice) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return refused(format!("The manual partition assignment includes the broker {} more than once.", twice[0]));
    }
    if let Some(factor) = factor.filter(|&f| f != brokers.len()) {
        return refused(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not \
             consistent with previous partitions, which have {factor} replica(s).",
            brokers.len()
        ));
    }
    Ok(())
}

fn alone_on(node: i32) -> PartitionAssignment {
    PartitionAssignment { replicas: vec![node], isr: vec![node], leader: node }
}

fn too_few(factor: usize, registered: usize) -> String {
    format!("The target replication factor of {factor} cannot be reached because only {registered} broker(s) are registered.")
}

/// The unfenced brokers, one of each rack in turn (racks by name, brokers
/// by id within a rack; brokers without a rack form one group of their own).
fn rack_alternated(image: &MetadataImage) -> Vec<i32> {
    let mut racks: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for broker in image.brokers.values().filter(|b| !b.fenced) {
        racks.entry(broker.rack.as_deref()).or_default().push(broker.broker_id);
    }
    let deepest = racks.values().map(Vec::len).max().unwrap_or(0);
    (0..deepest).flat_map(|i| racks.values().filter_map(move |ids| ids.get(i).copied())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::RegisterBrokerRecord;

    fn image(brokers: &[(i32, Option<&str>, bool)]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for &(id, rack, fenced) in brokers {
            let record =
                RegisterBrokerRecord { broker_id: id, rack: rack.map(String::from), fenced, ..Default::default() };
            image.brokers.insert(id, record);
        }
        image
    }

    #[test]
    fn partitions_rotate_over_unfenced_brokers_alternating_racks() {
        let image = image(&[(1, Some("a"), false), (2, Some("a"), false), (3, Some("b"), false), (4, None, true)]);
        let mut placer = Placer::new(&image, Placement::RegisteredBrokers);
        let leaders: Vec<i32> = (0..6).map(|_| placer.place(1).unwrap().leader).collect();
        // Rack "a" then "b", then "a"'s second broker; the fenced one never.
        assert_eq!(leaders, vec![1, 3, 2, 1, 3, 2]);
        let two = placer.place(2).unwrap();
        assert_eq!((two.replicas.len(), two.isr, two.leader), (2, two.replicas.clone(), two.replicas[0]));
        let refused = placer.place(5).unwrap_err();
        assert_eq!(refused.code, ErrorCode::INVALID_REPLICATION_FACTOR.code());
        assert!(refused.message.ends_with("because only 4 broker(s) are registered."), "{}", refused.message);
    }

    #[test]
    fn no_unfenced_broker_refuses_and_a_single_node_takes_everything() {
        let fenced = image(&[(1, None, true)]);
        let refused = Placer::new(&fenced, Placement::RegisteredBrokers).place(1).unwrap_err();
        assert_eq!(refused.message, "Unable to replicate the partition 1 time(s): All brokers are currently fenced.");
        let mut alone = Placer::new(&MetadataImage::default(), Placement::OnlyNode(7));
        assert_eq!(alone.place(1).unwrap(), alone_on(7));
        assert!(alone.place(2).is_err());
    }

    #[test]
    fn manual_assignments_are_checked_as_kafka_checks_them() {
        let image = image(&[(1, None, false), (2, None, true)]);
        let placer = Placer::new(&image, Placement::RegisteredBrokers);
        let check = |brokers: &[i32], factor| placer.assign(&image, 0, brokers, factor);
        assert_eq!(
            check(&[2, 1], None).unwrap(),
            PartitionAssignment { replicas: vec![2, 1], isr: vec![1], leader: 1 }
        );
        for (brokers, factor, message) in [
            (&[][..], None, "an empty replica list"),
            (&[3], None, "broker 3, but no such broker is registered"),
            (&[1, 1], None, "the broker 1 more than once"),
            (&[1], Some(2), "with 1 replica(s), but this is not consistent"),
            (&[2], None, "are fenced or in controlled shutdown"),
        ] {
            let e = check(brokers, factor).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_REPLICA_ASSIGNMENT.code());
            assert!(e.message.contains(message), "{brokers:?}: {}", e.message);
        }
    }
}
