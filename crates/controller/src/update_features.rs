//! UpdateFeatures (KIP-584, KIP-778): changing a finalized feature level,
//! as Kafka's `FeatureControlManager.updateFeatures` decides it. Each
//! update is checked in turn and the first refusal refuses the request
//! whole (INVALID_UPDATE_VERSION, with Kafka's messages): an unknown
//! upgrade type, a level below 0, a level this controller, a registered
//! broker or a registered controller does not support (a voter that has
//! not registered may not support it either), a downgrade without a
//! downgrade type or an upgrade with one. A metadata.version downgrade
//! goes through only when no level between the two changed the metadata
//! format (Kafka's `didMetadataChange`, held in
//! `krabka_metadata::features::METADATA_VERSIONS`), safe or unsafe alike.
//! The accepted updates become FeatureLevelRecords in one commit (none
//! when validating only).
//!
//! `kraft.version` is the quorum's, not the metadata log's: its level is
//! the raft log's and an upgrade is raft's to append (a static quorum
//! becoming dynamic, `krabka_raft::kraft_upgrade`). The plan checks it like
//! any feature, refuses every downgrade of it as Kafka does, and hands the
//! level to upgrade to back to the caller, with a NoOpRecord in place of a
//! FeatureLevelRecord: the commit the caller waits on then follows raft's
//! control batch, as Kafka's controller waits on its own NoOpRecord.

use krabka_metadata::features::{MetadataVersion, METADATA_VERSION, METADATA_VERSIONS};
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::{ErrorCode, FeatureLevelRecord};

use crate::controllers::CONTROLLER_REGISTRATION_LEVEL;
use crate::error::ApiError;
use crate::features::{elr_safety_records, ControllerDefaults, ELR_VERSION};

/// The levels krabka's controller can run a cluster at (Kafka's
/// `QuorumFeatures` local ranges): what it implements. It registers
/// itself with these, and refuses to finalize anything outside them.
pub const CONTROLLER_FEATURES: [(&str, i16, i16); 7] = [
    (METADATA_VERSION, 7, 30),
    (KRAFT_VERSION, 0, 1),
    ("transaction.version", 0, 2),
    ("group.version", 0, 1),
    (ELR_VERSION, 0, 1),
    ("share.version", 0, 0),
    ("streams.version", 0, 0),
];

/// The quorum's feature (KIP-853): 1 once the voters are in the raft log.
pub const KRAFT_VERSION: &str = "kraft.version";

/// UpdateFeatures' upgrade types (v0's AllowDowngrade is a safe downgrade).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
    Unknown,
}

impl UpgradeType {
    pub fn from_wire(code: i8) -> Self {
        match code {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

/// One requested change.
#[derive(Clone, Debug)]
pub struct FeatureUpdate {
    pub name: String,
    pub level: i16,
    pub upgrade_type: UpgradeType,
}

/// The quorum a feature update runs against: the voters that must support
/// a new level besides this controller (`node_id`; empty for a node that
/// is its quorum's only voter), the raft log's `kraft.version`, and what
/// this controller's static config gives a feature being enabled.
#[derive(Clone, Copy, Debug)]
pub struct QuorumFeatures<'a> {
    pub node_id: i32,
    pub voters: &'a [i32],
    pub kraft_version: i16,
    pub defaults: ControllerDefaults,
}

/// The records of `updates` (none when validating only), and the
/// `kraft.version` raft must upgrade to first, if the updates raise it.
/// Who must support a new level: this controller, the registered brokers
/// and controllers of the image, and every voter.
pub fn plan_update_features(
    image: &MetadataImage,
    quorum: QuorumFeatures<'_>,
    updates: &[FeatureUpdate],
    validate_only: bool,
) -> Result<(Vec<MetadataRecord>, Option<i16>), ApiError> {
    let mut records = Vec::with_capacity(updates.len());
    let mut kraft_upgrade = None;
    for update in updates {
        check_update(image, quorum, update)?;
        if update.name == KRAFT_VERSION {
            kraft_upgrade = (update.level > quorum.kraft_version).then_some(update.level);
            records.push(MetadataRecord::no_op());
            continue;
        }
        let record =
            FeatureLevelRecord { name: update.name.clone(), feature_level: update.level, ..Default::default() };
        records.push(MetadataRecord::FeatureLevel(record));
        let elr_was_off = image.features.get(ELR_VERSION).is_none_or(|&level| level < 1);
        if update.name == ELR_VERSION && update.level >= 1 && elr_was_off {
            records.extend(elr_safety_records(image, quorum.defaults.min_insync_replicas));
        }
    }
    if validate_only {
        records.clear();
    }
    Ok((records, kraft_upgrade))
}

fn check_update(image: &MetadataImage, quorum: QuorumFeatures<'_>, update: &FeatureUpdate) -> Result<(), ApiError> {
    let QuorumFeatures { node_id, voters, .. } = quorum;
    let (name, level) = (update.name.as_str(), update.level);
    let invalid = |why: &str| {
        let message = format!("Invalid update version {level} for feature {name}. {why}");
        Err(ApiError::new(ErrorCode::INVALID_UPDATE_VERSION.code(), message))
    };
    if update.upgrade_type == UpgradeType::Unknown {
        return invalid("The controller does not support the given upgrade type.");
    }
    let current = match name {
        KRAFT_VERSION => quorum.kraft_version,
        _ => image.features.get(name).copied().unwrap_or(0),
    };
    if level < 0 {
        return invalid("A feature version cannot be less than 0.");
    }
    if let Some(why) = reason_not_supported(image, node_id, voters, name, level) {
        return invalid(&why);
    }
    let downgrading = update.upgrade_type != UpgradeType::Upgrade;
    if level < current && !downgrading {
        return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.");
    }
    if level > current && downgrading {
        return invalid("Can't downgrade to a newer version.");
    }
    if name == KRAFT_VERSION && level < current {
        return invalid("Can't downgrade the version of this feature.");
    }
    if name == METADATA_VERSION {
        return check_metadata_version(current, level, update.upgrade_type);
    }
    Ok(())
}

/// Kafka's `updateMetadataVersion`: a level Kafka does not know is
/// refused, and a downgrade only when the metadata format changes between
/// the two levels (records of the newer format could be lost), whichever
/// downgrade type was asked for: Kafka has no unsafe downgrade yet. A
/// downgrade within one format goes through, safe or unsafe.
fn check_metadata_version(current: i16, level: i16, upgrade_type: UpgradeType) -> Result<(), ApiError> {
    let refuse = |message: String| Err(ApiError::new(ErrorCode::INVALID_UPDATE_VERSION.code(), message));
    if MetadataVersion::from_level(level).is_none() {
        let (min, max) = (METADATA_VERSIONS[0].level, METADATA_VERSIONS[METADATA_VERSIONS.len() - 1].level);
        return refuse(format!("Invalid metadata.version {level}. Valid versions are from {min} to {max}."));
    }
    if level >= current || !MetadataVersion::metadata_changed_between(current, level) {
        return Ok(());
    }
    let why = if upgrade_type == UpgradeType::UnsafeDowngrade {
        "Unsafe metadata downgrade is not supported in this version."
    } else {
        "Refusing to perform the requested downgrade because it might delete metadata information."
    };
    refuse(format!("Unsupported metadata.version downgrade from {current} to {level}. {why}"))
}

/// Kafka's `reasonNotSupported`: this controller first, then each
/// registered broker, then each registered controller, then any voter
/// that has not registered.
fn reason_not_supported(image: &MetadataImage, node_id: i32, voters: &[i32], name: &str, level: i16) -> Option<String> {
    let local = CONTROLLER_FEATURES.iter().find(|(n, ..)| *n == name).map_or((0, 0), |&(_, min, max)| (min, max));
    if let Some(why) = outside(level, &format!("Local controller {node_id}"), local) {
        return Some(why);
    }
    for broker in image.brokers.values() {
        let range = broker.features.iter().find(|f| f.name == name);
        let range = range.map_or((0, 0), |f| (f.min_supported_version, f.max_supported_version));
        if let Some(why) = outside(level, &format!("Broker {}", broker.broker_id), range) {
            return Some(why);
        }
    }
    // Controllers register from metadata.version 3.7-IV0: below it their
    // support cannot be checked, as Kafka's controller notes.
    let metadata_version = image.features.get(METADATA_VERSION).copied().unwrap_or(0);
    if metadata_version < CONTROLLER_REGISTRATION_LEVEL {
        return None;
    }
    for controller in image.controllers.values().filter(|c| c.controller_id != node_id) {
        let range = controller.features.iter().find(|f| f.name == name);
        let range = range.map_or((0, 0), |f| (f.min_supported_version, f.max_supported_version));
        if let Some(why) = outside(level, &format!("Controller {}", controller.controller_id), range) {
            return Some(why);
        }
    }
    let unregistered = voters.iter().find(|&&id| id != node_id && !image.controllers.contains_key(&id));
    unregistered.map(|id| format!("controller {id} has not registered, and may not support this feature"))
}

/// Why `what`, supporting `min..=max`, cannot run at `level` (Kafka's
/// `VersionRange` text: "3" or "1-3").
fn outside(level: i16, what: &str, (min, max): (i16, i16)) -> Option<String> {
    if (min..=max).contains(&level) {
        return None;
    }
    if max == 0 {
        return Some(format!("{what} does not support this feature."));
    }
    let range = if min == max { min.to_string() } else { format!("{min}-{max}") };
    Some(format!("{what} only supports versions {range}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::register_broker_record::BrokerFeature;
    use krabka_protocol::RegisterBrokerRecord;

    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        image.features.insert(METADATA_VERSION.into(), 30);
        image.features.insert("group.version".into(), 1);
        let feature = |name: &str, min, max| BrokerFeature {
            name: name.into(),
            min_supported_version: min,
            max_supported_version: max,
            ..Default::default()
        };
        let features = vec![feature(METADATA_VERSION, 7, 30), feature("group.version", 0, 1)];
        image.brokers.insert(4, RegisterBrokerRecord { broker_id: 4, features, ..Default::default() });
        image
    }

    fn update(name: &str, level: i16, upgrade_type: UpgradeType) -> Vec<FeatureUpdate> {
        vec![FeatureUpdate { name: name.into(), level, upgrade_type }]
    }

    const ALONE: QuorumFeatures<'static> = QuorumFeatures {
        node_id: 1,
        voters: &[],
        kraft_version: 0,
        defaults: ControllerDefaults { min_insync_replicas: 1 },
    };

    fn refusal(updates: &[FeatureUpdate]) -> String {
        let e = plan_update_features(&image(), ALONE, updates, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_UPDATE_VERSION.code());
        e.message
    }

    #[test]
    fn supported_changes_become_feature_level_records() {
        let (records, kraft_upgrade) =
            plan_update_features(&image(), ALONE, &update("group.version", 0, UpgradeType::SafeDowngrade), false)
                .unwrap();
        assert_eq!(kraft_upgrade, None);
        let MetadataRecord::FeatureLevel(record) = &records[0] else { panic!("{records:?}") };
        assert_eq!((record.name.as_str(), record.feature_level), ("group.version", 0));
        let same = update(METADATA_VERSION, 30, UpgradeType::Upgrade);
        assert_eq!(plan_update_features(&image(), ALONE, &same, true).unwrap().0, vec![]);
    }

    #[test]
    fn kraft_version_is_raft_s_to_upgrade_and_never_goes_down() {
        let mut image = image();
        let feature = |name: &str, min, max| krabka_protocol::register_broker_record::BrokerFeature {
            name: name.into(),
            min_supported_version: min,
            max_supported_version: max,
            ..Default::default()
        };
        image.brokers.get_mut(&4).unwrap().features.push(feature(KRAFT_VERSION, 0, 1));
        let upgrade = update(KRAFT_VERSION, 1, UpgradeType::Upgrade);
        let (records, kraft_upgrade) = plan_update_features(&image, ALONE, &upgrade, false).unwrap();
        assert_eq!(kraft_upgrade, Some(1));
        assert_eq!(records, vec![MetadataRecord::no_op()], "no FeatureLevelRecord for kraft.version");
        let dynamic = QuorumFeatures { kraft_version: 1, ..ALONE };
        assert_eq!(plan_update_features(&image, dynamic, &upgrade, false).unwrap().1, None, "already at 1");
        let down = update(KRAFT_VERSION, 0, UpgradeType::SafeDowngrade);
        let e = plan_update_features(&image, dynamic, &down, false).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature."
        );
        // A registered controller is checked on the level asked for (not
        // on metadata.version's, as krabka once did by mistake).
        let controller_feature = krabka_protocol::register_controller_record::ControllerFeature {
            name: KRAFT_VERSION.into(),
            min_supported_version: 0,
            max_supported_version: 1,
            ..Default::default()
        };
        let record = krabka_protocol::RegisterControllerRecord {
            controller_id: 2,
            features: vec![controller_feature],
            ..Default::default()
        };
        image.controllers.insert(2, record);
        let two_voters = QuorumFeatures { voters: &[1, 2], ..ALONE };
        assert_eq!(plan_update_features(&image, two_voters, &upgrade, true).unwrap().1, Some(1));
        image.controllers.get_mut(&2).unwrap().features.clear();
        let e = plan_update_features(&image, two_voters, &upgrade, true).unwrap_err();
        assert!(e.message.ends_with("Controller 2 does not support this feature."), "{}", e.message);
        // A broker that does not know kraft.version holds the upgrade back.
        let e = plan_update_features(&self::image(), ALONE, &upgrade, false).unwrap_err();
        assert!(e.message.ends_with("Broker 4 does not support this feature."), "{}", e.message);
    }

    #[test]
    fn refusals_carry_kafkas_messages() {
        let m = refusal(&update("share.version", 1, UpgradeType::Upgrade));
        assert_eq!(
            m,
            "Invalid update version 1 for feature share.version. Local controller 1 does not support this feature."
        );
        let m = refusal(&update(METADATA_VERSION, 31, UpgradeType::Upgrade));
        assert!(m.ends_with("Local controller 1 only supports versions 7-30"), "{m}");
        let m = refusal(&update("group.version", 0, UpgradeType::Upgrade));
        assert!(m.ends_with("without setting the upgrade type to either safe or unsafe downgrade."), "{m}");
        let m = refusal(&update(METADATA_VERSION, 21, UpgradeType::SafeDowngrade));
        assert_eq!(m, "Unsupported metadata.version downgrade from 30 to 21. Refusing to perform the requested downgrade because it might delete metadata information.");
        let m = refusal(&update("group.version", -1, UpgradeType::Upgrade));
        assert!(m.ends_with("A feature version cannot be less than 0."), "{m}");
        let m = refusal(&update("group.version", 1, UpgradeType::Unknown));
        assert!(m.ends_with("The controller does not support the given upgrade type."), "{m}");
        let quorum = QuorumFeatures { voters: &[1, 2], ..ALONE };
        let e = plan_update_features(&image(), quorum, &update("group.version", 1, UpgradeType::Upgrade), false);
        assert!(e.unwrap_err().message.ends_with("controller 2 has not registered, and may not support this feature"));
    }

    /// The image at metadata.version 4.2-IV1 (29): below it 4.0-IV1 (23)
    /// is the nearest level that changed the format.
    fn image_at_4_2() -> MetadataImage {
        let mut image = image();
        image.features.insert(METADATA_VERSION.into(), 29);
        image
    }

    fn plan_at_4_2(
        level: i16,
        upgrade_type: UpgradeType,
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        let updates = update(METADATA_VERSION, level, upgrade_type);
        plan_update_features(&image_at_4_2(), ALONE, &updates, validate_only).map(|(records, _)| records)
    }

    fn metadata_version_record(level: i16) -> Vec<MetadataRecord> {
        let record = FeatureLevelRecord { name: METADATA_VERSION.into(), feature_level: level, ..Default::default() };
        vec![MetadataRecord::FeatureLevel(record)]
    }

    #[test]
    fn a_metadata_version_downgrade_within_one_format_is_a_feature_level_record() {
        assert_eq!(plan_at_4_2(23, UpgradeType::SafeDowngrade, false).unwrap(), metadata_version_record(23));
        assert_eq!(plan_at_4_2(28, UpgradeType::SafeDowngrade, false).unwrap(), metadata_version_record(28));
        // Kafka's unsafe downgrade is the same as a safe one where nothing
        // can be lost.
        assert_eq!(plan_at_4_2(23, UpgradeType::UnsafeDowngrade, false).unwrap(), metadata_version_record(23));
        assert_eq!(plan_at_4_2(23, UpgradeType::SafeDowngrade, true).unwrap(), vec![], "validate only");
        assert_eq!(plan_at_4_2(29, UpgradeType::Upgrade, false).unwrap(), metadata_version_record(29));
        assert_eq!(plan_at_4_2(30, UpgradeType::Upgrade, false).unwrap(), metadata_version_record(30));
    }

    #[test]
    fn a_metadata_version_downgrade_across_a_format_change_is_refused() {
        let refused = |level, upgrade_type, validate_only| {
            let e = plan_at_4_2(level, upgrade_type, validate_only).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_UPDATE_VERSION.code());
            e.message
        };
        let safe = "Unsupported metadata.version downgrade from 29 to 22. Refusing to perform the requested downgrade because it might delete metadata information.";
        assert_eq!(refused(22, UpgradeType::SafeDowngrade, false), safe);
        assert_eq!(refused(22, UpgradeType::SafeDowngrade, true), safe, "validate only refuses the same");
        assert_eq!(
            refused(22, UpgradeType::UnsafeDowngrade, false),
            "Unsupported metadata.version downgrade from 29 to 22. Unsafe metadata downgrade is not supported in this version."
        );
        assert_eq!(
            refused(7, UpgradeType::SafeDowngrade, false),
            "Unsupported metadata.version downgrade from 29 to 7. Refusing to perform the requested downgrade because it might delete metadata information."
        );
        // 4.3-IV0 changed the format: from it, no downgrade at all.
        let m = refusal(&update(METADATA_VERSION, 29, UpgradeType::UnsafeDowngrade));
        assert!(m.starts_with("Unsupported metadata.version downgrade from 30 to 29. Unsafe"), "{m}");
    }

    #[test]
    fn a_metadata_version_downgrade_is_checked_as_any_feature_first() {
        let refused = |level, upgrade_type| plan_at_4_2(level, upgrade_type, false).unwrap_err().message;
        assert_eq!(
            refused(6, UpgradeType::SafeDowngrade),
            "Invalid update version 6 for feature metadata.version. Local controller 1 only supports versions 7-30"
        );
        assert_eq!(
            refused(-1, UpgradeType::SafeDowngrade),
            "Invalid update version -1 for feature metadata.version. A feature version cannot be less than 0."
        );
        assert!(refused(23, UpgradeType::Upgrade).ends_with("either safe or unsafe downgrade."));
        assert!(refused(30, UpgradeType::SafeDowngrade).ends_with("Can't downgrade to a newer version."));
        assert!(refused(23, UpgradeType::Unknown).ends_with("does not support the given upgrade type."));
        // Every registered broker must support the lower level too.
        let mut image = image_at_4_2();
        image.brokers.get_mut(&4).unwrap().features[0].min_supported_version = 25;
        let e = plan_update_features(&image, ALONE, &update(METADATA_VERSION, 23, UpgradeType::SafeDowngrade), false);
        assert_eq!(
            e.unwrap_err().message,
            "Invalid update version 23 for feature metadata.version. Broker 4 only supports versions 25-30"
        );
    }

    #[test]
    fn a_metadata_version_kafka_does_not_know_is_refused() {
        // Unreachable through the plan (the controller's own range comes
        // first), but Kafka's answer all the same.
        let e = check_metadata_version(29, 32, UpgradeType::Upgrade).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_UPDATE_VERSION.code());
        assert_eq!(e.message, "Invalid metadata.version 32. Valid versions are from 7 to 31.");
    }

    #[test]
    fn enabling_elr_records_the_cluster_min_isr_as_kafka_does() {
        let mut image = image();
        let elr = BrokerFeature {
            name: ELR_VERSION.into(),
            min_supported_version: 0,
            max_supported_version: 1,
            ..Default::default()
        };
        image.brokers.get_mut(&4).unwrap().features.push(elr);
        let quorum = QuorumFeatures { defaults: ControllerDefaults { min_insync_replicas: 2 }, ..ALONE };
        let enable = update(ELR_VERSION, 1, UpgradeType::Upgrade);
        let (records, _) = plan_update_features(&image, quorum, &enable, false).unwrap();
        assert_eq!(records.len(), 2, "{records:?}");
        assert!(
            matches!(&records[1], MetadataRecord::Config(c)
                if c.resource_name.is_empty() && c.name == "min.insync.replicas" && c.value.as_deref() == Some("2")),
            "{records:?}"
        );
        image.features.insert(ELR_VERSION.into(), 1);
        let (records, _) = plan_update_features(&image, quorum, &enable, false).unwrap();
        assert_eq!(records.len(), 1, "already on: the level only");
    }
}
