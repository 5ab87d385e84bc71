//! Feature levels, as Kafka's FeatureControlManager keeps them: the
//! levels a krabka controller finalizes when it first writes a log, and
//! the check of a registering broker's supported ranges against the
//! levels finalized in the image.

use krabka_log::topic_config::MIN_INSYNC_REPLICAS;
use krabka_metadata::features::METADATA_VERSION;
use krabka_metadata::records::CONFIG_RESOURCE_BROKER;
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::broker_registration_request::Feature;
use krabka_protocol::{ConfigRecord, ErrorCode, FeatureLevelRecord};

use crate::error::ApiError;

/// The Eligible Leader Replicas feature (KIP-966).
pub const ELR_VERSION: &str = "eligible.leader.replicas.version";

/// What a krabka controller finalizes in a log that has no
/// metadata.version yet: Kafka 4.3.1's metadata.version (4.3-IV0), and of
/// the other features those krabka implements at the levels Kafka 4.3.1
/// formats a new cluster with: group.version 1 (KIP-848 consumer groups),
/// eligible.leader.replicas.version 1 (KIP-966) and transaction.version 2
/// (KIP-890 part 2: the epoch bumped every transaction, partitions added
/// by their leaders). No share or streams levels: krabka does not serve
/// share groups or the streams rebalance protocol.
pub const BOOTSTRAP_FEATURES: [(&str, i16); 4] =
    [(METADATA_VERSION, 30), ("group.version", 1), (ELR_VERSION, 1), (TRANSACTION_VERSION, 2)];

/// Transactions (KIP-890): 0 and 1 the classic protocol (1 writes the
/// transaction state's newer value), 2 transactions v2.
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// What the controller's own static config (server.properties) gives the
/// metadata: the cluster-wide `min.insync.replicas` that enabling ELR
/// records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerDefaults {
    pub min_insync_replicas: i32,
}

impl Default for ControllerDefaults {
    fn default() -> Self {
        ControllerDefaults { min_insync_replicas: 1 }
    }
}

/// The records finalizing `BOOTSTRAP_FEATURES`, when `image` has no
/// metadata.version (a new log, or one krabka wrote before it finalized
/// features); none otherwise. Kafka's controller writes its bootstrap
/// levels first, so readers know how the records after them read; then,
/// ELR being on, the records that keep it safe (`elr_safety_records`).
pub fn plan_bootstrap_features(image: &MetadataImage, defaults: ControllerDefaults) -> Vec<MetadataRecord> {
    if image.features.contains_key(METADATA_VERSION) {
        return Vec::new();
    }
    let mut records: Vec<MetadataRecord> = BOOTSTRAP_FEATURES
        .iter()
        .map(|&(name, feature_level)| {
            MetadataRecord::FeatureLevel(FeatureLevelRecord { name: name.into(), feature_level, ..Default::default() })
        })
        .collect();
    records.extend(elr_safety_records(image, defaults.min_insync_replicas));
    records
}

/// What Kafka's controller writes when ELR gets enabled: elections read
/// `min.insync.replicas` from the metadata (the controller cannot see a
/// broker's server.properties), so the cluster-wide value is recorded
/// from the controller's static config unless one is recorded already,
/// and per-broker values, which the controller cannot apply to a
/// partition spread over brokers, are removed.
pub fn elr_safety_records(image: &MetadataImage, static_min_insync_replicas: i32) -> Vec<MetadataRecord> {
    let record = |resource_name: &str, value: Option<String>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: CONFIG_RESOURCE_BROKER,
            resource_name: resource_name.to_string(),
            name: MIN_INSYNC_REPLICAS.to_string(),
            value,
            ..Default::default()
        })
    };
    let mut records = Vec::new();
    if !image.broker_configs.contains_key(MIN_INSYNC_REPLICAS) {
        records.push(record("", Some(static_min_insync_replicas.to_string())));
    }
    for (broker, configs) in &image.per_broker_configs {
        if configs.contains_key(MIN_INSYNC_REPLICAS) {
            records.push(record(broker, None));
        }
    }
    records
}

/// Whether a broker supporting `features` may register with the levels
/// finalized in `image` (Kafka's `processRegistrationFeature`): every
/// finalized level (0 for a feature not finalized) must lie in the range
/// the broker gives for it, a finalized feature it omits counts as
/// supported at 0 only, and it must name metadata.version.
pub fn check_registration_features(image: &MetadataImage, features: &[Feature]) -> Result<(), ApiError> {
    let finalized = |name: &str| image.features.get(name).copied().unwrap_or(0);
    let unsupported = |name: &str, level: i16, min: i16, max: i16| {
        let message = format!(
            "Unable to register because the broker does not support finalized version {level} of {name}. The \
             broker wants a version between {min} and {max}, inclusive."
        );
        ApiError::new(ErrorCode::UNSUPPORTED_VERSION.code(), message)
    };
    for feature in features {
        let level = finalized(&feature.name);
        if !(feature.min_supported_version..=feature.max_supported_version).contains(&level) {
            return Err(unsupported(
                &feature.name,
                level,
                feature.min_supported_version,
                feature.max_supported_version,
            ));
        }
    }
    // metadata.version has its own answer below.
    for (name, &level) in image.features.iter().filter(|(name, _)| *name != METADATA_VERSION) {
        if level > 0 && !features.iter().any(|f| &f.name == name) {
            return Err(unsupported(name, level, 0, 0));
        }
    }
    if !features.iter().any(|f| f.name == METADATA_VERSION) {
        let message = format!("Request features do not contain '{METADATA_VERSION}'");
        return Err(ApiError::new(ErrorCode::INVALID_REGISTRATION.code(), message));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feature(name: &str, min: i16, max: i16) -> Feature {
        Feature { name: name.into(), min_supported_version: min, max_supported_version: max, ..Default::default() }
    }

    fn bootstrapped() -> MetadataImage {
        let mut image = MetadataImage::default();
        for record in plan_bootstrap_features(&image, ControllerDefaults::default()) {
            image.apply(&record).unwrap();
        }
        image
    }

    #[test]
    fn a_new_log_is_bootstrapped_once() {
        let image = bootstrapped();
        assert_eq!(image.features[METADATA_VERSION], 30);
        assert_eq!(image.features["group.version"], 1);
        assert_eq!(image.features[ELR_VERSION], 1, "as Kafka 4.3.1 formats a new cluster");
        assert_eq!(image.features[TRANSACTION_VERSION], 2, "as Kafka 4.3.1 formats a new cluster");
        assert_eq!(image.broker_configs["min.insync.replicas"], "1");
        assert!(plan_bootstrap_features(&image, ControllerDefaults::default()).is_empty());
    }

    #[test]
    fn enabling_elr_records_the_cluster_min_isr_once_and_drops_per_broker_values() {
        let mut image = MetadataImage::default();
        let per_broker = |broker: &str, value: Option<&str>| {
            MetadataRecord::Config(ConfigRecord {
                resource_type: CONFIG_RESOURCE_BROKER,
                resource_name: broker.into(),
                name: MIN_INSYNC_REPLICAS.into(),
                value: value.map(String::from),
                ..Default::default()
            })
        };
        image.apply(&per_broker("2", Some("3"))).unwrap();
        let records = elr_safety_records(&image, 2);
        assert_eq!(records, vec![per_broker("", Some("2")), per_broker("2", None)]);
        for record in &records {
            image.apply(record).unwrap();
        }
        assert_eq!(image.broker_configs[MIN_INSYNC_REPLICAS], "2");
        assert!(elr_safety_records(&image, 3).is_empty(), "a recorded cluster value stays");
    }

    #[test]
    fn kafkas_broker_ranges_register_and_ranges_missing_a_finalized_level_do_not() {
        let image = bootstrapped();
        let kafka_4_3_1 = [
            feature(METADATA_VERSION, 7, 30),
            feature("kraft.version", 0, 1),
            feature("transaction.version", 0, 2),
            feature("group.version", 0, 1),
            feature("eligible.leader.replicas.version", 0, 1),
        ];
        assert_eq!(check_registration_features(&image, &kafka_4_3_1), Ok(()));
        // An older broker: metadata.version only up to 3.9-IV0 (21).
        let old = [feature(METADATA_VERSION, 7, 21), feature("group.version", 0, 1)];
        let e = check_registration_features(&image, &old).unwrap_err();
        assert_eq!(e.code, ErrorCode::UNSUPPORTED_VERSION.code());
        assert!(e.message.contains("finalized version 30 of metadata.version"), "{}", e.message);
        // group.version is finalized at 1: a broker that omits it cannot join.
        let e = check_registration_features(&image, &[feature(METADATA_VERSION, 7, 30)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::UNSUPPORTED_VERSION.code());
        // A feature not finalized must be supported at level 0.
        let e =
            check_registration_features(&image, &[feature(METADATA_VERSION, 7, 30), feature("x", 1, 2)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::UNSUPPORTED_VERSION.code());
        let without_metadata_version =
            [feature("group.version", 0, 1), feature(ELR_VERSION, 0, 1), feature(TRANSACTION_VERSION, 0, 2)];
        let e = check_registration_features(&image, &without_metadata_version).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_REGISTRATION.code());
    }
}
