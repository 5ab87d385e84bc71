//! The error answers of forwarded requests, as Kafka's nodes give them.
//!
//! - The active controller lifts a NOT_CONTROLLER anywhere in a forwarded
//!   request's response to the Envelope itself: the lead moved while the
//!   request waited, and only an Envelope error tells the forwarding broker
//!   (Kafka's re-queues the request for the new controller).
//! - A broker whose Envelope the controller refused with any other error
//!   answers its client UNKNOWN_SERVER_ERROR in the response of the request
//!   it forwarded: such an error means the cluster is misconfigured, which
//!   the client can neither expect nor mend.

use krabka_protocol::{
    alter_configs_response, create_partitions_response, create_topics_response, delete_topics_response,
    describe_quorum_response, elect_leaders_response, incremental_alter_configs_response, AlterConfigsResponse,
    CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse, DescribeQuorumResponse, ElectLeadersRequest,
    ElectLeadersResponse, ErrorCode, IncrementalAlterConfigsResponse, RequestBody, ResponseBody,
    UpdateFeaturesResponse,
};

/// Whether `code` is the error of the response or of any of its parts.
pub fn mentions(response: &ResponseBody, code: ErrorCode) -> bool {
    let code = code.code();
    match response {
        ResponseBody::CreateTopics(r) => r.topics.iter().any(|t| t.error_code == code),
        ResponseBody::DeleteTopics(r) => r.responses.iter().any(|t| t.error_code == code),
        ResponseBody::CreatePartitions(r) => r.results.iter().any(|t| t.error_code == code),
        ResponseBody::AlterConfigs(r) => r.responses.iter().any(|c| c.error_code == code),
        ResponseBody::IncrementalAlterConfigs(r) => r.responses.iter().any(|c| c.error_code == code),
        ResponseBody::DescribeQuorum(r) => {
            r.error_code == code || r.topics.iter().flat_map(|t| &t.partitions).any(|p| p.error_code == code)
        }
        ResponseBody::UpdateFeatures(r) => r.error_code == code || r.results.iter().any(|f| f.error_code == code),
        ResponseBody::AlterPartitionReassignments(r) => {
            r.error_code == code || r.responses.iter().flat_map(|t| &t.partitions).any(|p| p.error_code == code)
        }
        ResponseBody::ListPartitionReassignments(r) => r.error_code == code,
        ResponseBody::ElectLeaders(r) => {
            r.error_code == code
                || r.replica_election_results.iter().flat_map(|t| &t.partition_result).any(|p| p.error_code == code)
        }
        ResponseBody::AlterUserScramCredentials(r) => r.results.iter().any(|u| u.error_code == code),
        ResponseBody::AlterClientQuotas(r) => r.entries.iter().any(|e| e.error_code == code),
        ResponseBody::CreateAcls(r) => r.results.iter().any(|c| c.error_code == code),
        ResponseBody::DeleteAcls(r) => r.filter_results.iter().any(|f| f.error_code == code),
        _ => false,
    }
}

/// The response to a forwarded `request` (at `version`) that fails every
/// part of it with `code` and `message`, as Kafka's `getErrorResponse`
/// builds it; None for an API that brokers do not forward.
pub fn error_response(request: &RequestBody, version: i16, code: ErrorCode, message: &str) -> Option<ResponseBody> {
    let (error_code, error_message) = (code.code(), Some(message.to_string()));
    Some(match request {
        RequestBody::CreateTopics(r) => ResponseBody::CreateTopics(Box::new(CreateTopicsResponse {
            topics: r
                .topics
                .iter()
                .map(|t| create_topics_response::CreatableTopicResult {
                    name: t.name.clone(),
                    error_code,
                    error_message: error_message.clone(),
                    num_partitions: -1,
                    replication_factor: -1,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })),
        RequestBody::DeleteTopics(r) => ResponseBody::DeleteTopics(Box::new(DeleteTopicsResponse {
            responses: deleted_topics(r)
                .map(|(name, topic_id)| delete_topics_response::DeletableTopicResult {
                    name,
                    topic_id,
                    error_code,
                    error_message: error_message.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })),
        RequestBody::CreatePartitions(r) => ResponseBody::CreatePartitions(Box::new(CreatePartitionsResponse {
            results: r
                .topics
                .iter()
                .map(|t| create_partitions_response::CreatePartitionsTopicResult {
                    name: t.name.clone(),
                    error_code,
                    error_message: error_message.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })),
        RequestBody::AlterConfigs(r) => ResponseBody::AlterConfigs(Box::new(AlterConfigsResponse {
            responses: r
                .resources
                .iter()
                .map(|c| alter_configs_response::AlterConfigsResourceResponse {
                    error_code,
                    error_message: error_message.clone(),
                    resource_type: c.resource_type,
                    resource_name: c.resource_name.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })),
        RequestBody::IncrementalAlterConfigs(r) => {
            ResponseBody::IncrementalAlterConfigs(Box::new(IncrementalAlterConfigsResponse {
                responses: r
                    .resources
                    .iter()
                    .map(|c| incremental_alter_configs_response::AlterConfigsResourceResponse {
                        error_code,
                        error_message: error_message.clone(),
                        resource_type: c.resource_type,
                        resource_name: c.resource_name.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }))
        }
        RequestBody::DescribeQuorum(r) => ResponseBody::DescribeQuorum(Box::new(DescribeQuorumResponse {
            error_code,
            error_message: error_message.clone(),
            topics: r
                .topics
                .iter()
                .map(|t| describe_quorum_response::TopicData {
                    topic_name: t.topic_name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| describe_quorum_response::PartitionData {
                            partition_index: p.partition_index,
                            error_code,
                            error_message: error_message.clone(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })),
        RequestBody::UpdateFeatures(_) => ResponseBody::UpdateFeatures(Box::new(UpdateFeaturesResponse {
            error_code,
            error_message,
            ..Default::default()
        })),
        RequestBody::ElectLeaders(r) => {
            ResponseBody::ElectLeaders(Box::new(elect_leaders_refused(r, version, error_code, error_message)))
        }
        RequestBody::AlterPartitionReassignments(r) => {
            ResponseBody::AlterPartitionReassignments(Box::new(krabka_protocol::AlterPartitionReassignmentsResponse {
                allow_replication_factor_change: r.allow_replication_factor_change,
                error_code,
                error_message,
                ..Default::default()
            }))
        }
        RequestBody::ListPartitionReassignments(_) => {
            ResponseBody::ListPartitionReassignments(Box::new(krabka_protocol::ListPartitionReassignmentsResponse {
                error_code,
                error_message,
                ..Default::default()
            }))
        }
        RequestBody::AlterClientQuotas(r) => {
            ResponseBody::AlterClientQuotas(Box::new(super::client_quotas::failed(r, code.code(), message)))
        }
        RequestBody::AlterUserScramCredentials(r) => {
            ResponseBody::AlterUserScramCredentials(Box::new(super::scram_credentials::failed(r, code.code(), message)))
        }
        RequestBody::CreateAcls(r) => {
            ResponseBody::CreateAcls(Box::new(super::acls::create_failed(r, code.code(), message)))
        }
        RequestBody::DeleteAcls(r) => {
            ResponseBody::DeleteAcls(Box::new(super::acls::delete_failed(r, code.code(), message)))
        }
        _ => return None,
    })
}

/// An ElectLeaders refused whole: the error on every partition it names,
/// and from v1 (which has one) at the top as well, as Kafka's.
pub fn elect_leaders_refused(
    request: &ElectLeadersRequest,
    version: i16,
    error_code: i16,
    error_message: Option<String>,
) -> ElectLeadersResponse {
    let replica_election_results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| elect_leaders_response::ReplicaElectionResult {
            topic: t.topic.clone(),
            partition_result: t
                .partitions
                .iter()
                .map(|&partition_id| elect_leaders_response::PartitionResult {
                    partition_id,
                    error_code,
                    error_message: error_message.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let top_level = if version >= 1 { error_code } else { ErrorCode::NONE.code() };
    ElectLeadersResponse { error_code: top_level, replica_election_results, ..Default::default() }
}

/// DeleteTopics names its topics by name (v0-5) or by state (v6+).
fn deleted_topics(
    request: &krabka_protocol::DeleteTopicsRequest,
) -> impl Iterator<Item = (Option<String>, krabka_protocol::Uuid)> + '_ {
    let by_name = request.topic_names.iter().map(|n| (Some(n.clone()), krabka_protocol::Uuid::ZERO));
    by_name.chain(request.topics.iter().map(|t| (t.name.clone(), t.topic_id)))
}

#[cfg(test)]
mod tests {
    use krabka_protocol::{create_topics_request::CreatableTopic, CreateTopicsRequest};

    use super::*;

    #[test]
    fn every_forwarded_api_has_an_error_response_that_mentions_the_error() {
        let requests = [
            RequestBody::CreateTopics(Box::new(CreateTopicsRequest {
                topics: vec![CreatableTopic { name: "t".into(), ..Default::default() }],
                ..Default::default()
            })),
            RequestBody::DeleteTopics(Box::new(krabka_protocol::DeleteTopicsRequest {
                topic_names: vec!["t".into()],
                ..Default::default()
            })),
            RequestBody::CreatePartitions(Box::new(krabka_protocol::CreatePartitionsRequest {
                topics: vec![Default::default()],
                ..Default::default()
            })),
            RequestBody::AlterConfigs(Box::new(krabka_protocol::AlterConfigsRequest {
                resources: vec![Default::default()],
                ..Default::default()
            })),
            RequestBody::IncrementalAlterConfigs(Box::new(krabka_protocol::IncrementalAlterConfigsRequest {
                resources: vec![Default::default()],
                ..Default::default()
            })),
            RequestBody::DescribeQuorum(Box::default()),
            RequestBody::UpdateFeatures(Box::default()),
            RequestBody::AlterPartitionReassignments(Box::default()),
            RequestBody::ListPartitionReassignments(Box::default()),
            RequestBody::AlterClientQuotas(Box::new(krabka_protocol::AlterClientQuotasRequest {
                entries: vec![Default::default()],
                ..Default::default()
            })),
            RequestBody::AlterUserScramCredentials(Box::new(krabka_protocol::AlterUserScramCredentialsRequest {
                deletions: vec![Default::default()],
                ..Default::default()
            })),
            RequestBody::CreateAcls(Box::new(krabka_protocol::CreateAclsRequest {
                creations: vec![Default::default()],
                ..Default::default()
            })),
            RequestBody::DeleteAcls(Box::new(krabka_protocol::DeleteAclsRequest {
                filters: vec![Default::default()],
                ..Default::default()
            })),
            RequestBody::ElectLeaders(Box::new(ElectLeadersRequest {
                topic_partitions: Some(vec![krabka_protocol::elect_leaders_request::TopicPartitions {
                    topic: "t".into(),
                    partitions: vec![0],
                    ..Default::default()
                }]),
                ..Default::default()
            })),
        ];
        assert_eq!(requests.len(), crate::wire::FORWARDED_APIS.len());
        for request in &requests {
            assert!(crate::wire::FORWARDED_APIS.contains(&request.api_key()));
            let response = error_response(request, 2, ErrorCode::UNKNOWN_SERVER_ERROR, "x").expect("forwarded");
            assert!(mentions(&response, ErrorCode::UNKNOWN_SERVER_ERROR), "{:?}", request.api_key());
            assert!(!mentions(&response, ErrorCode::NOT_CONTROLLER), "{:?}", request.api_key());
        }
        let fetch = RequestBody::Fetch(Box::default());
        assert!(error_response(&fetch, 2, ErrorCode::UNKNOWN_SERVER_ERROR, "x").is_none());
    }

    #[test]
    fn a_not_controller_in_one_topic_is_mentioned() {
        let ok = create_topics_response::CreatableTopicResult { name: "a".into(), ..Default::default() };
        let moved = create_topics_response::CreatableTopicResult {
            name: "b".into(),
            error_code: ErrorCode::NOT_CONTROLLER.code(),
            ..Default::default()
        };
        let response = ResponseBody::CreateTopics(Box::new(CreateTopicsResponse {
            topics: vec![ok, moved],
            ..Default::default()
        }));
        assert!(mentions(&response, ErrorCode::NOT_CONTROLLER));
        assert!(!mentions(&response, ErrorCode::UNKNOWN_SERVER_ERROR));
    }
}
