//! ApiVersions: the APIs and version ranges this broker serves.

use krabka_protocol::{ApiKey, ApiVersionsResponse};

use crate::wire::{api_versions_response, served_range};

pub fn response(error_code: i16) -> ApiVersionsResponse {
    api_versions_response(&supported_apis(), error_code)
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
