//! Kafka's feature flags (KIP-584): each finalized in the metadata log at a
//! level (a `FeatureLevelRecord`), and each supported by a node over a
//! range, which its registration tells the controller. A broker may
//! register only if every finalized level lies in the range it supports.

/// The feature that versions the metadata log's records themselves.
pub const METADATA_VERSION: &str = "metadata.version";
/// metadata.version 3.7-IV2, the first with directory assignment
/// (KIP-858: AssignReplicasToDirs, partitions' `directories`).
pub const DIRECTORY_ASSIGNMENT_LEVEL: i16 = 17;

/// A feature a node supports, from `min` to `max` level inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SupportedFeature {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
}

/// The features krabka registers with, over the ranges Kafka 4.3.1's own
/// broker registers with, so a cluster formatted by Kafka 4.3.1's
/// `kafka-storage.sh` (metadata.version 4.3-IV0, level 30, and its default
/// levels of the others) takes a krabka broker. metadata.version from
/// 3.3-IV3 (7), the first KRaft level Kafka 4 reads. A level finalized
/// here does not by itself turn on what it gates: krabka's ApiVersions
/// lists only the APIs it serves.
pub const SUPPORTED_FEATURES: [SupportedFeature; 7] = [
    SupportedFeature { name: METADATA_VERSION, min: 7, max: 30 },
    SupportedFeature { name: "kraft.version", min: 0, max: 1 },
    SupportedFeature { name: "transaction.version", min: 0, max: 2 },
    SupportedFeature { name: "group.version", min: 0, max: 1 },
    SupportedFeature { name: "eligible.leader.replicas.version", min: 0, max: 1 },
    SupportedFeature { name: "share.version", min: 0, max: 1 },
    SupportedFeature { name: "streams.version", min: 0, max: 1 },
];

/// One of Kafka's metadata versions (its `MetadataVersion` enum): the
/// level finalized for `metadata.version`, the name Kafka's tools print
/// ("3.9-IV0"), and whether the metadata log's records changed at it. A
/// downgrade across a level whose format changed could drop what only the
/// newer format holds, so Kafka's controller refuses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetadataVersion {
    pub level: i16,
    pub name: &'static str,
    pub did_metadata_change: bool,
}

const fn mv(level: i16, name: &'static str, did_metadata_change: bool) -> MetadataVersion {
    MetadataVersion { level, name, did_metadata_change }
}

/// Kafka 4.3.1's metadata versions, in order, from its minimum (3.3-IV3)
/// to its latest testing one (4.4-IV0, not production: krabka's
/// controller does not support it, but Kafka's message for an unknown
/// level names it as the upper bound).
pub const METADATA_VERSIONS: [MetadataVersion; 25] = [
    mv(7, "3.3-IV3", true),
    mv(8, "3.4-IV0", true),
    mv(9, "3.5-IV0", false),
    mv(10, "3.5-IV1", false),
    mv(11, "3.5-IV2", true),
    mv(12, "3.6-IV0", false),
    mv(13, "3.6-IV1", true),
    mv(14, "3.6-IV2", true),
    mv(15, "3.7-IV0", true),
    mv(16, "3.7-IV1", false),
    mv(17, "3.7-IV2", true),
    mv(18, "3.7-IV3", false),
    mv(19, "3.7-IV4", false),
    mv(20, "3.8-IV0", false),
    mv(21, "3.9-IV0", false),
    mv(22, "4.0-IV0", false),
    mv(23, "4.0-IV1", true),
    mv(24, "4.0-IV2", false),
    mv(25, "4.0-IV3", false),
    mv(26, "4.1-IV0", false),
    mv(27, "4.1-IV1", false),
    mv(28, "4.2-IV0", false),
    mv(29, "4.2-IV1", false),
    mv(30, "4.3-IV0", true),
    mv(31, "4.4-IV0", false),
];

impl MetadataVersion {
    /// The version finalized at `level`, if Kafka 4.3.1 knows one.
    pub fn from_level(level: i16) -> Option<MetadataVersion> {
        METADATA_VERSIONS.iter().copied().find(|v| v.level == level)
    }

    /// Whether the metadata format changes anywhere between two levels
    /// (Kafka's `checkIfMetadataChanged`): at some level above the lower
    /// one, up to and including the higher one. The lower level's own
    /// change is one both sides already have.
    pub fn metadata_changed_between(a: i16, b: i16) -> bool {
        let (low, high) = if a <= b { (a, b) } else { (b, a) };
        METADATA_VERSIONS.iter().any(|v| v.level > low && v.level <= high && v.did_metadata_change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_kafkas_ordered_levels() {
        let levels: Vec<i16> = METADATA_VERSIONS.iter().map(|v| v.level).collect();
        assert_eq!(levels, (7..=31).collect::<Vec<_>>());
        assert_eq!(MetadataVersion::from_level(21).unwrap().name, "3.9-IV0");
        assert_eq!(MetadataVersion::from_level(6), None);
        assert_eq!(MetadataVersion::from_level(32), None);
    }

    #[test]
    fn a_change_counts_between_the_lower_level_excluded_and_the_higher_included() {
        assert!(!MetadataVersion::metadata_changed_between(29, 29));
        assert!(!MetadataVersion::metadata_changed_between(29, 23), "23 changed, but both sides have it");
        assert!(MetadataVersion::metadata_changed_between(29, 22), "4.0-IV1 (23) lies between");
        assert!(MetadataVersion::metadata_changed_between(30, 29), "4.3-IV0 changed the format");
        assert!(MetadataVersion::metadata_changed_between(22, 23), "symmetric");
        assert!(!MetadataVersion::metadata_changed_between(22, 17));
        assert!(MetadataVersion::metadata_changed_between(22, 16));
        assert!(!MetadataVersion::metadata_changed_between(10, 8));
    }
}
