//! Kafka's feature flags (KIP-584): each finalized in the metadata log at a
//! level (a `FeatureLevelRecord`), and each supported by a node over a
//! range, which its registration tells the controller. A broker may
//! register only if every finalized level lies in the range it supports.

/// The feature that versions the metadata log's records themselves.
pub const METADATA_VERSION: &str = "metadata.version";

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
