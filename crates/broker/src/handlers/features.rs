//! UpdateFeatures: the request translated to krabka-controller's
//! `plan_update_features` (one commit of FeatureLevelRecords, or the
//! first refusal for the whole request) and its answer back: the error at
//! the top level, and from v0 to v1 a result per feature as well, which
//! Kafka fills only when the request succeeded.

use krabka_controller::update_features::{plan_update_features, FeatureUpdate, UpgradeType};
use krabka_controller::ApiError;
use krabka_protocol::update_features_response::UpdatableFeatureResult;
use krabka_protocol::{ErrorCode, UpdateFeaturesRequest, UpdateFeaturesResponse};

use crate::request::RequestContext;

pub async fn update_features(ctx: &RequestContext<'_>, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse {
    let broker = ctx.broker;
    let version = ctx.api_version;
    let updates: Vec<FeatureUpdate> = request
        .feature_updates
        .iter()
        .map(|u| FeatureUpdate {
            name: u.feature.clone(),
            level: u.max_version_level,
            // v0's AllowDowngrade is a safe downgrade.
            upgrade_type: match (version, u.allow_downgrade) {
                (0, true) => UpgradeType::SafeDowngrade,
                (0, false) => UpgradeType::Upgrade,
                _ => UpgradeType::from_wire(u.upgrade_type),
            },
        })
        .collect();
    let validate_only = version >= 1 && request.validate_only;
    // The voters that must have registered their support: none on a node
    // that is its quorum's only voter.
    let voters: Vec<i32> = broker.metadata.quorum().map(|q| q.voter_ids()).unwrap_or_default();
    let planned = broker
        .metadata
        .control(|image| plan_update_features(image, broker.node_id, &voters, &updates, validate_only))
        .await;
    let mut error: Option<ApiError> = planned.err();
    // As Kafka's controller words a refused update (not a commit failure).
    if let Some(e) = error.as_mut().filter(|e| e.code == ErrorCode::INVALID_UPDATE_VERSION.code()) {
        e.message =
            format!("The update failed for all features since the following feature had an error: {}", e.message);
    }
    let results = if error.is_none() && version < 2 {
        let ok = |name: &String| UpdatableFeatureResult { feature: name.clone(), ..Default::default() };
        request.feature_updates.iter().map(|u| ok(&u.feature)).collect()
    } else {
        Vec::new()
    };
    UpdateFeaturesResponse {
        error_code: error.as_ref().map_or(0, |e| e.code),
        error_message: error.map(|e| e.message),
        results,
        ..Default::default()
    }
}
