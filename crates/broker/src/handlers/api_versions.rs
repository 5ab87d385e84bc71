//! ApiVersions: the APIs and version ranges this broker serves.

use krabka_controller::update_features::KRAFT_VERSION;
use krabka_metadata::MetadataImage;
use krabka_protocol::api_versions_response::FinalizedFeatureKey;
use krabka_protocol::{ApiKey, ApiVersionsResponse};

use crate::wire::{api_versions_response, served_range, supported_feature_keys};

pub fn response(error_code: i16) -> ApiVersionsResponse {
    api_versions_response(&supported_apis(), error_code)
}

/// The answer with the features too (v3 and later carry them, which
/// Kafka's admin client reads as DescribeFeatures): the ranges this
/// broker supports (`supported_feature_keys`), and the levels finalized in
/// `image`, at the offset the image has read to, with `kraft_version` (the
/// raft log's, not the image's) when it is above 0, as Kafka lists it.
pub fn response_with_features(image: &MetadataImage, kraft_version: i16, version: i16) -> ApiVersionsResponse {
    let mut response = response(0);
    response.supported_features = supported_feature_keys(version);
    let kraft = (kraft_version > 0).then_some((KRAFT_VERSION, kraft_version));
    response.finalized_features = image
        .features
        .iter()
        .map(|(name, &level)| (name.as_str(), level))
        .chain(kraft)
        .map(|(name, level)| FinalizedFeatureKey {
            name: name.to_string(),
            min_version_level: level,
            max_version_level: level,
            ..Default::default()
        })
        .collect();
    response.finalized_features_epoch = if image.features.is_empty() { -1 } else { image.offset };
    response
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
        AlterReplicaLogDirs,
        DescribeLogDirs,
        CreatePartitions,
        IncrementalAlterConfigs,
        DescribeCluster,
        DescribeProducers,
        DescribeTopicPartitions,
        // Answered by the connection's authenticator (authentication.rs).
        SaslHandshake,
        SaslAuthenticate,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeQuorum,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        UpdateFeatures,
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
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        WriteTxnMarkers,
        DescribeTransactions,
        ListTransactions,
    ];
    keys.iter().map(|&key| served_range(key)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_v4_no_supported_feature_range_starts_at_zero() {
        let image = MetadataImage::default();
        let names = |version| -> Vec<String> {
            response_with_features(&image, 0, version).supported_features.into_iter().map(|f| f.name).collect()
        };
        assert_eq!(names(3), vec!["metadata.version".to_string()]);
        assert_eq!(names(4).len(), krabka_metadata::features::SUPPORTED_FEATURES.len());
    }
}
