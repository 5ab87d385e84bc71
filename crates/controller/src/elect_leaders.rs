//! ElectLeaders, as Kafka's controller decides it: a preferred election
//! moves a partition's leadership to its first replica when that replica
//! may lead (in the ISR, alive); an unclean one gives a leaderless
//! partition any live replica. ELECTION_NOT_NEEDED where the partition
//! already has what was asked (left out of the answer when every
//! partition was asked for), PREFERRED_LEADER_NOT_AVAILABLE /
//! ELIGIBLE_LEADERS_NOT_AVAILABLE where nobody may take it. Also the
//! periodic preferred-leader rebalance (`auto.leader.rebalance.enable`).

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use krabka_protocol::{ElectLeadersRequest, ElectLeadersResponse, ErrorCode};

use crate::budget::RecordBudget;
use crate::elections::{change_builder, default_directory, may_lead};
use crate::error::ApiError;
use crate::partition_change::{Election, NO_LEADER};

/// ElectLeaders' election types.
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

/// The records an ElectLeaders commits and its answer.
pub fn plan_elect_leaders(
    image: &MetadataImage,
    request: &ElectLeadersRequest,
) -> Result<(Vec<MetadataRecord>, ElectLeadersResponse), ApiError> {
    let election = match request.election_type {
        PREFERRED => Election::Preferred,
        UNCLEAN => Election::Unclean,
        other => {
            let message = format!("Unknown election type {other}");
            return Err(ApiError::new(ErrorCode::INVALID_REQUEST.code(), message));
        }
    };
    let mut records = Vec::new();
    let mut budget = RecordBudget::default();
    let mut results = Vec::new();
    let every = request.topic_partitions.is_none();
    let asked: Vec<(String, Vec<i32>)> = match &request.topic_partitions {
        Some(topics) => topics.iter().map(|t| (t.topic.clone(), t.partitions.clone())).collect(),
        None => {
            let mut all: Vec<(String, Vec<i32>)> =
                image.topics.values().map(|t| (t.name.clone(), (0..t.partitions.len() as i32).collect())).collect();
            all.sort();
            all
        }
    };
    for (topic, partitions) in asked {
        let mut partition_result = Vec::new();
        for partition_id in partitions {
            let (error_code, error_message) = match elect(image, &topic, partition_id, election) {
                Ok(Some(record)) => {
                    budget.take(1)?;
                    records.push(record);
                    (0, None)
                }
                Ok(None) if every => continue,
                Ok(None) => (ErrorCode::ELECTION_NOT_NEEDED.code(), None),
                Err(e) => (e.code, Some(e.message)),
            };
            partition_result.push(PartitionResult { partition_id, error_code, error_message, ..Default::default() });
        }
        results.push(ReplicaElectionResult { topic, partition_result, ..Default::default() });
    }
    Ok((records, ElectLeadersResponse { replica_election_results: results, ..Default::default() }))
}

/// One partition's election: its record, None if not needed, or why not.
fn elect(
    image: &MetadataImage,
    topic_name: &str,
    partition_id: i32,
    election: Election,
) -> Result<Option<MetadataRecord>, ApiError> {
    let unknown = |message: String| ApiError::new(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(), message);
    let topic = image.topic(topic_name).ok_or_else(|| unknown(format!("No such topic as {topic_name}")))?;
    let partition = usize::try_from(partition_id)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .ok_or_else(|| unknown(format!("No such partition as {topic_name}-{partition_id}")))?;
    let needed = match election {
        Election::Preferred => partition.replicas.first() != Some(&partition.leader),
        _ => partition.leader == NO_LEADER,
    };
    if !needed {
        return Ok(None);
    }
    let directory = |r: i32| default_directory(image, r);
    let acceptable = |r: i32| may_lead(image, partition, r);
    let change =
        change_builder(image, topic, partition_id, partition, acceptable, &directory).election(election).build();
    match change {
        Some(change) => Ok(Some(MetadataRecord::PartitionChange(change))),
        None if election == Election::Preferred => Err(ApiError::new(
            ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE.code(),
            format!("Failed to elect leader for partition {topic_name}-{partition_id} under strategy PREFERRED"),
        )),
        None => Err(ApiError::new(
            ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE.code(),
            format!("Failed to elect leader for partition {topic_name}-{partition_id} under strategy UNCLEAN"),
        )),
    }
}

/// The preferred-leader rebalance (`auto.leader.rebalance.enable`): the
/// records moving every partition whose first replica may lead (in the
/// ISR, alive) but does not, back to it. Kafka's controller runs it every
/// `leader.imbalance.check.interval.seconds`.
pub fn plan_preferred_rebalance(image: &MetadataImage) -> Result<(Vec<MetadataRecord>, usize), ApiError> {
    let mut records = Vec::new();
    let mut topics: Vec<_> = image.topics.values().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for topic in topics {
        for (index, partition) in topic.partitions.iter().enumerate() {
            let Some(&preferred) = partition.replicas.first() else { continue };
            if partition.leader == preferred
                || !partition.isr.contains(&preferred)
                || !may_lead(image, partition, preferred)
            {
                continue;
            }
            if records.len() >= crate::limits::MAX_RECORDS_PER_USER_OP {
                break;
            }
            if let Ok(Some(record)) = elect(image, &topic.name, index as i32, Election::Preferred) {
                records.push(record);
            }
        }
    }
    let moved = records.len();
    Ok((records, moved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::elect_leaders_request::TopicPartitions;

    fn image(leader: i32, fenced: &[i32]) -> MetadataImage {
        crate::test_images::one_partition(3, fenced, &[1, 2, 3], leader)
    }

    fn preferred(partitions: Option<Vec<i32>>) -> ElectLeadersRequest {
        ElectLeadersRequest {
            election_type: PREFERRED,
            topic_partitions: partitions
                .map(|partitions| vec![TopicPartitions { topic: "t".into(), partitions, ..Default::default() }]),
            ..Default::default()
        }
    }

    #[test]
    fn a_preferred_election_moves_leadership_back_to_the_first_replica() {
        let image = image(2, &[]);
        let (records, response) = plan_elect_leaders(&image, &preferred(Some(vec![0, 5]))).unwrap();
        assert_eq!(records.len(), 1);
        let results = &response.replica_election_results[0].partition_result;
        assert_eq!(results[0].error_code, 0);
        assert_eq!(results[1].error_code, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code());
        assert_eq!(plan_preferred_rebalance(&image).unwrap().1, 1);
    }

    #[test]
    fn elections_not_needed_or_impossible_are_answered_as_kafka_answers_them() {
        let led = image(1, &[]);
        let (_, response) = plan_elect_leaders(&led, &preferred(Some(vec![0]))).unwrap();
        assert_eq!(response.replica_election_results[0].partition_result[0].error_code, 84);
        let (_, every) = plan_elect_leaders(&led, &preferred(None)).unwrap();
        assert!(every.replica_election_results[0].partition_result.is_empty(), "not needed: left out");
        let (records, response) = plan_elect_leaders(&image(2, &[1]), &preferred(Some(vec![0]))).unwrap();
        // The first replica is fenced; the current leader may go on: no change.
        assert!(records.is_empty());
        assert_eq!(response.replica_election_results[0].partition_result[0].error_code, 80);
        assert_eq!(plan_preferred_rebalance(&image(2, &[1])).unwrap().1, 0);
    }
}
