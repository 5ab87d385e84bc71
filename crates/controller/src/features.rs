//! Feature levels, as Kafka's FeatureControlManager keeps them: the
//! levels a krabka controller finalizes when it first writes a log, and
//! the check of a registering broker's supported ranges against the
//! levels finalized in the image.

use krabka_metadata::features::METADATA_VERSION;
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::broker_registration_request::Feature;
use krabka_protocol::{ErrorCode, FeatureLevelRecord};

use crate::error::ApiError;

/// What a krabka controller finalizes in a log that has no
/// metadata.version yet: Kafka 4.3.1's metadata.version (4.3-IV0), and
/// of the other features only those krabka implements: group.version 1
/// (KIP-848 consumer groups). No transaction, share, streams or Eligible
/// Leader Replica levels: krabka's controller does not do them.
pub const BOOTSTRAP_FEATURES: [(&str, i16); 2] = [(METADATA_VERSION, 30), ("group.version", 1)];

/// The records finalizing `BOOTSTRAP_FEATURES`, when `image` has no
/// metadata.version (a new log, or one krabka wrote before it finalized
/// features); none otherwise. Kafka's controller writes its bootstrap
/// levels first, so readers know how the records after them read.
pub fn plan_bootstrap_features(image: &MetadataImage) -> Vec<MetadataRecord> {
    if image.features.contains_key(METADATA_VERSION) {
        return Vec::new();
    }
    BOOTSTRAP_FEATURES
        .iter()
        .map(|&(name, feature_level)| {
            MetadataRecord::FeatureLevel(FeatureLevelRecord { name: name.into(), feature_level, ..Default::default() })
        })
        .collect()
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
        for record in plan_bootstrap_features(&image) {
            image.apply(&record).unwrap();
        }
        image
    }

    #[test]
    fn a_new_log_is_bootstrapped_once() {
        let image = bootstrapped();
        assert_eq!(image.features[METADATA_VERSION], 30);
        assert_eq!(image.features["group.version"], 1);
        assert!(plan_bootstrap_features(&image).is_empty());
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
        let e = check_registration_features(&image, &[feature("group.version", 0, 1)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_REGISTRATION.code());
    }
}
