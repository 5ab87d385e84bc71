//! ApiVersions: the APIs and version ranges this broker serves.

use krabka_protocol::api_versions_response::ApiVersion;
use krabka_protocol::{ApiKey, ApiVersionsResponse};

pub fn response(error_code: i16) -> ApiVersionsResponse {
    let api_keys = supported_apis()
        .into_iter()
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
    keys.iter()
        .map(|&key| {
            let info = key.info();
            let max = if info.latest_version_unstable { info.max_version - 1 } else { info.max_version };
            (key, info.min_version, max)
        })
        .collect()
}
