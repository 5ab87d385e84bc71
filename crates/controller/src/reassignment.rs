//! Partition reassignment, as Kafka's controller runs it
//! (AlterPartitionReassignments, ListPartitionReassignments). A new
//! target puts every target replica in the assignment at once, with the
//! ones to add in `adding_replicas` and the ones to drop in
//! `removing_replicas`; the new replicas' brokers start following, and
//! when the leader's AlterPartition brings them all into the ISR the
//! `PartitionChangeBuilder` completes it (the removed replicas leave, a
//! removed leader hands over). A target that only reorders or drops
//! in-sync replicas completes at once. Cancelling (no replicas) reverts
//! to the original replicas, refused where that would need an unclean
//! election the topic does not allow. All of a request's changes commit
//! together.

use krabka_metadata::{MetadataImage, MetadataRecord, PartitionImage, TopicImage};
use krabka_protocol::alter_partition_reassignments_request::ReassignablePartition;
use krabka_protocol::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use krabka_protocol::list_partition_reassignments_response::{OngoingPartitionReassignment, OngoingTopicReassignment};
use krabka_protocol::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ErrorCode,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use crate::budget::RecordBudget;
use crate::elections::{change_builder, default_directory, may_lead, topic_election};
use crate::error::ApiError;
use crate::partition_change::Election;
use crate::placement::{check_manual_assignment, Placement};

/// The records of an AlterPartitionReassignments and its answer.
pub fn plan_alter_partition_reassignments(
    image: &MetadataImage,
    request: &AlterPartitionReassignmentsRequest,
) -> Result<(Vec<MetadataRecord>, AlterPartitionReassignmentsResponse), ApiError> {
    let mut records = Vec::new();
    let mut budget = RecordBudget::default();
    let mut responses = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for target in &topic.partitions {
            let (error_code, error_message) =
                match reassign(image, &topic.name, target, request.allow_replication_factor_change) {
                    Ok(record) => {
                        if let Some(record) = record {
                            budget.take(1)?;
                            records.push(record);
                        }
                        (0, None)
                    }
                    Err(e) => (e.code, Some(e.message)),
                };
            partitions.push(ReassignablePartitionResponse {
                partition_index: target.partition_index,
                error_code,
                error_message,
                ..Default::default()
            });
        }
        responses.push(ReassignableTopicResponse { name: topic.name.clone(), partitions, ..Default::default() });
    }
    let response = AlterPartitionReassignmentsResponse {
        allow_replication_factor_change: request.allow_replication_factor_change,
        responses,
        ..Default::default()
    };
    Ok((records, response))
}

fn reassign(
    image: &MetadataImage,
    topic_name: &str,
    target: &ReassignablePartition,
    allow_factor_change: bool,
) -> Result<Option<MetadataRecord>, ApiError> {
    let unknown = |message: String| ApiError::new(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(), message);
    let topic =
        image.topic(topic_name).ok_or_else(|| unknown(format!("Unable to find a topic named {topic_name}.")))?;
    let index = target.partition_index;
    let partition = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or_else(|| unknown(format!("Unable to find partition {topic_name}:{index}.")))?;
    match &target.replicas {
        None => cancel(image, topic, index, partition),
        Some(replicas) => change(image, topic, index, partition, replicas, allow_factor_change),
    }
}

fn in_progress(partition: &PartitionImage) -> bool {
    !partition.adding_replicas.is_empty() || !partition.removing_replicas.is_empty()
}

/// A new target: every target replica in the assignment, the old ones
/// not in the target after them, marked removing, the new ones adding.
fn change(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionImage,
    target: &[i32],
    allow_factor_change: bool,
) -> Result<Option<MetadataRecord>, ApiError> {
    check_manual_assignment(image, Placement::RegisteredBrokers, target, None)?;
    let original = partition.replicas.iter().filter(|r| !partition.adding_replicas.contains(r)).count();
    if !allow_factor_change && target.len() != original {
        let message = format!("The replication factor is changed from {original} to {}", target.len());
        return Err(ApiError::new(ErrorCode::INVALID_REPLICATION_FACTOR.code(), message));
    }
    let removing: Vec<i32> = sorted(partition.replicas.iter().copied().filter(|r| !target.contains(r)).collect());
    let adding: Vec<i32> = sorted(target.iter().copied().filter(|r| !partition.replicas.contains(r)).collect());
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    let directory = |r: i32| default_directory(image, r);
    let acceptable = |r: i32| may_lead(image, partition, r);
    let builder = change_builder(image, topic, index, partition, acceptable, &directory).election(Election::Online);
    Ok(builder
        .target_replicas(replicas)
        .target_reassignment(adding, removing)
        .build()
        .map(MetadataRecord::PartitionChange))
}

/// Cancelling: back to the replicas before the reassignment, the ISR
/// without the replicas it was adding (its first original replica if none
/// is left, which is an unclean election).
fn cancel(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionImage,
) -> Result<Option<MetadataRecord>, ApiError> {
    if !in_progress(partition) {
        let message = "No partition reassignment is in progress for the topic partition.";
        return Err(ApiError::new(ErrorCode::NO_REASSIGNMENT_IN_PROGRESS.code(), message));
    }
    let adding = &partition.adding_replicas;
    let replicas: Vec<i32> = partition.replicas.iter().copied().filter(|r| !adding.contains(r)).collect();
    let mut isr: Vec<i32> = partition.isr.iter().copied().filter(|r| !adding.contains(r)).collect();
    if isr.is_empty() {
        let Some(&first) = replicas.first() else {
            let message = "Invalid replica assignment: addingReplicas contains all replicas.";
            return Err(ApiError::new(ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(), message));
        };
        if topic_election(image, topic) != Election::Unclean {
            let message = format!(
                "Unable to revert partition assignment for {}:{index} because it would require an unclean leader \
                 election.",
                topic.name
            );
            return Err(ApiError::new(ErrorCode::INVALID_REPLICA_ASSIGNMENT.code(), message));
        }
        isr.push(first);
    }
    let directory = |r: i32| default_directory(image, r);
    let acceptable = |r: i32| may_lead(image, partition, r);
    let builder = change_builder(image, topic, index, partition, acceptable, &directory);
    let change = builder.target_isr(isr).target_replicas(replicas).target_reassignment(Vec::new(), Vec::new()).build();
    Ok(change.map(MetadataRecord::PartitionChange))
}

fn sorted(mut ids: Vec<i32>) -> Vec<i32> {
    ids.sort_unstable();
    ids
}

/// ListPartitionReassignments: the partitions being reassigned, of the
/// topics named (every topic when none is).
pub fn list_partition_reassignments(
    image: &MetadataImage,
    request: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let asked: Vec<(&TopicImage, Vec<i32>)> = match &request.topics {
        Some(topics) => {
            topics.iter().filter_map(|t| Some((image.topic(&t.name)?.as_ref(), t.partition_indexes.clone()))).collect()
        }
        None => {
            let mut all: Vec<(&TopicImage, Vec<i32>)> =
                image.topics.values().map(|t| (t.as_ref(), (0..t.partitions.len() as i32).collect())).collect();
            all.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            all
        }
    };
    let topics = asked
        .into_iter()
        .filter_map(|(topic, indexes)| {
            let partitions: Vec<OngoingPartitionReassignment> = indexes
                .into_iter()
                .filter_map(|index| {
                    let p = topic.partitions.get(usize::try_from(index).ok()?).filter(|p| in_progress(p))?;
                    Some(OngoingPartitionReassignment {
                        partition_index: index,
                        replicas: p.replicas.clone(),
                        adding_replicas: p.adding_replicas.clone(),
                        removing_replicas: p.removing_replicas.clone(),
                        ..Default::default()
                    })
                })
                .collect();
            (!partitions.is_empty()).then(|| OngoingTopicReassignment {
                name: topic.name.clone(),
                partitions,
                ..Default::default()
            })
        })
        .collect();
    ListPartitionReassignmentsResponse { topics, ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::alter_partition_reassignments_request::ReassignableTopic;

    fn image() -> MetadataImage {
        crate::test_images::one_partition(4, &[], &[1, 2, 3], 1)
    }

    fn request(replicas: Option<Vec<i32>>, allow: bool) -> AlterPartitionReassignmentsRequest {
        AlterPartitionReassignmentsRequest {
            allow_replication_factor_change: allow,
            topics: vec![ReassignableTopic {
                name: "t".into(),
                partitions: vec![ReassignablePartition { partition_index: 0, replicas, ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for record in records {
            image.apply(record).unwrap();
        }
    }

    #[test]
    fn a_move_adds_first_and_is_listed_until_cancelled() {
        let mut image = image();
        let (records, response) =
            plan_alter_partition_reassignments(&image, &request(Some(vec![2, 3, 4]), true)).unwrap();
        assert_eq!(response.responses[0].partitions[0].error_code, 0);
        apply(&mut image, &records);
        let p = &image.topics["t"].partitions[0];
        assert_eq!(
            (p.replicas.clone(), p.adding_replicas.clone(), p.removing_replicas.clone()),
            (vec![2, 3, 4, 1], vec![4], vec![1])
        );
        assert_eq!(p.leader, 1, "the leader stays until the new replica is in sync");
        let listed = list_partition_reassignments(
            &image,
            &ListPartitionReassignmentsRequest { topics: None, ..Default::default() },
        );
        assert_eq!(listed.topics[0].partitions[0].adding_replicas, vec![4]);
        let (records, _) = plan_alter_partition_reassignments(&image, &request(None, true)).unwrap();
        apply(&mut image, &records);
        let p = &image.topics["t"].partitions[0];
        // As Kafka's revert: the original replicas, in the reassignment's order.
        assert_eq!(
            (p.replicas.clone(), p.adding_replicas.is_empty(), p.removing_replicas.is_empty()),
            (vec![2, 3, 1], true, true)
        );
        let (_, again) = plan_alter_partition_reassignments(&image, &request(None, true)).unwrap();
        assert_eq!(again.responses[0].partitions[0].error_code, ErrorCode::NO_REASSIGNMENT_IN_PROGRESS.code());
    }

    #[test]
    fn dropping_an_in_sync_replica_completes_at_once_and_factor_changes_may_be_refused() {
        let mut image = image();
        let (records, _) = plan_alter_partition_reassignments(&image, &request(Some(vec![3, 2]), true)).unwrap();
        apply(&mut image, &records);
        let p = &image.topics["t"].partitions[0];
        assert_eq!((p.replicas.clone(), p.isr.clone(), p.leader), (vec![3, 2], vec![2, 3], 3));
        let (_, refused) = plan_alter_partition_reassignments(&image, &request(Some(vec![1, 2, 3]), false)).unwrap();
        assert_eq!(refused.responses[0].partitions[0].error_code, ErrorCode::INVALID_REPLICATION_FACTOR.code());
        let (_, unknown) = plan_alter_partition_reassignments(&image, &request(Some(vec![9]), true)).unwrap();
        assert_eq!(unknown.responses[0].partitions[0].error_code, ErrorCode::INVALID_REPLICA_ASSIGNMENT.code());
    }
}
