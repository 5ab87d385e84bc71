//! ApiVersions: the APIs and version ranges this broker serves.

use krabka_protocol::api_versions_response::ApiVersion;
use krabka_protocol::{ApiKey, ApiVersionsResponse};

pub fn response(error_code: i16) -> ApiVersionsResponse {
    response_for(&supported_apis(), error_code)
}

/// An ApiVersions response listing `apis` (key, min, max): the broker's, or
/// another listener's (the controller listener serves raft's).
pub fn response_for(apis: &[(ApiKey, i16, i16)], error_code: i16) -> ApiVersionsResponse {
    let api_keys = apis
        .iter()
        .copied()
        .map(|(key, min, max)| ApiVersion {
            api_key: key as i16,
            min_version: min,
            max_version: max,
            ..Default::default()
        })
        .collect();
    ApiVersionsResponse { error_code, api_keys, ..Default::default() }
}

/// The APIs krabka serves, with the highest version it speaks of each
/// (Kafka 4.3.1's, unless noted in docs/compatibility.md).
pub fn supported_apis() -> Vec<(ApiKey, i16, i16)> {
    use ApiKey::*;
    let keys = [
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        DescribeConfigs,
        AlterConfigs,
        DescribeLogDirs,
        CreatePartitions,
        IncrementalAlterConfigs,
        DescribeCluster,
        DescribeProducers,
        DescribeTopicPartitions,
        DescribeQuorum,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        ListGroups,
        DescribeGroups,
        DeleteGroups,
        OffsetDelete,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
    ];
    keys.iter().map(|&key| served_range(key)).collect()
}

/// The versions of `key` krabka serves: Kafka 4.3.1's, without a latest
/// version Kafka marks unstable.
pub fn served_range(key: ApiKey) -> (ApiKey, i16, i16) {
    let info = key.info();
    let max = if info.latest_version_unstable { info.max_version - 1 } else { info.max_version };
    (key, info.min_version, max)
}
