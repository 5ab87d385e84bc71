//! UpdateFeatures: the request translated to krabka-controller's
//! `plan_update_features` (one commit of FeatureLevelRecords, or the
//! first refusal for the whole request) and its answer back: the error at
//! the top level, and from v0 to v1 a result per feature as well, which
//! Kafka fills only when the request succeeded. A `kraft.version` upgrade
//! goes to the quorum first (checked, then appended by raft), and the
//! commit of the rest follows it.

use krabka_controller::update_features::{
    plan_update_features, FeatureUpdate, QuorumFeatures, UpgradeType, KRAFT_VERSION,
};
use krabka_controller::ApiError;
use krabka_protocol::update_features_response::UpdatableFeatureResult;
use krabka_protocol::{ErrorCode, UpdateFeaturesRequest, UpdateFeaturesResponse};
use krabka_raft::KraftUpgradeError;

use crate::request::RequestContext;

pub async fn update_features(ctx: &RequestContext<'_>, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse {
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
    let planned = plan_and_commit(ctx, &updates, validate_only).await;
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

/// Checks every update; upgrades `kraft.version` through the quorum if
/// asked to; then commits the records of the rest (none when validating).
async fn plan_and_commit(
    ctx: &RequestContext<'_>,
    updates: &[FeatureUpdate],
    validate_only: bool,
) -> Result<(), ApiError> {
    let broker = ctx.broker;
    let quorum = broker.metadata.quorum();
    // The voters that must have registered their support: none on a node
    // that is its quorum's only voter.
    let voters: Vec<i32> = quorum.map(|q| q.voter_ids()).unwrap_or_default();
    let features = QuorumFeatures {
        node_id: broker.node_id,
        voters: &voters,
        kraft_version: quorum.map_or(0, |q| q.kraft_version()),
        defaults: broker.config.controller_defaults(),
    };
    // Without kraft.version in the updates there is nothing for raft to do
    // first: one plan, committed as it is made.
    if !updates.iter().any(|u| u.name == KRAFT_VERSION) {
        broker.metadata.control(|image| plan_update_features(image, features, updates, validate_only)).await?;
        return Ok(());
    }
    let (_, kraft_upgrade) =
        broker.metadata.control(|image| plan_update_features(image, features, updates, true)).await?;
    if let Some(level) = kraft_upgrade {
        let Some(quorum) = quorum else {
            // A single node's quorum of one runs without raft's voter
            // bookkeeping: it has no voter set to write.
            let message = format!(
                "Invalid update version {level} for feature kraft.version. This node's quorum of one cannot become dynamic; format it with --standalone instead."
            );
            return Err(ApiError::new(ErrorCode::INVALID_UPDATE_VERSION.code(), message));
        };
        quorum.upgrade_kraft_version(level, validate_only).await.map_err(|e| match e {
            KraftUpgradeError::NotLeader => {
                ApiError::new(ErrorCode::NOT_CONTROLLER.code(), "This node is not the active controller.".to_string())
            }
            KraftUpgradeError::InvalidUpdateVersion(message) => {
                ApiError::new(ErrorCode::INVALID_UPDATE_VERSION.code(), message)
            }
        })?;
    }
    if !validate_only {
        let features = QuorumFeatures { kraft_version: quorum.map_or(0, |q| q.kraft_version()), ..features };
        broker.metadata.control(|image| plan_update_features(image, features, updates, false)).await?;
    }
    Ok(())
}
