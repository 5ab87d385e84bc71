//! Controller registration (KIP-919): each controller tells the active
//! controller its listeners and supported features, which it records as a
//! `RegisterControllerRecord`, so a client bootstrapping from the
//! controllers (`--bootstrap-controller`) can find them all through
//! DescribeCluster. As Kafka's `ClusterControlManager.registerController`:
//! refused with UNSUPPORTED_VERSION below metadata.version 3.7-IV0, the
//! first that supports it; a registration replaces the one before
//! (a restart registers its new incarnation).

use krabka_metadata::features::METADATA_VERSION;
use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::register_controller_record::{ControllerEndpoint, ControllerFeature};
use krabka_protocol::{ControllerRegistrationRequest, ErrorCode, RegisterControllerRecord};

use crate::error::ApiError;

/// metadata.version 3.7-IV0, the first level with controller registrations.
pub const CONTROLLER_REGISTRATION_LEVEL: i16 = 15;

/// The record registering the controller `request` describes.
pub fn plan_register_controller(
    image: &MetadataImage,
    request: &ControllerRegistrationRequest,
) -> Result<(Vec<MetadataRecord>, ()), ApiError> {
    let level = image.features.get(METADATA_VERSION).copied().unwrap_or(0);
    if level < CONTROLLER_REGISTRATION_LEVEL {
        return Err(ApiError::new(
            ErrorCode::UNSUPPORTED_VERSION.code(),
            "The current MetadataVersion is too old to support controller registrations.",
        ));
    }
    let end_points = request
        .listeners
        .iter()
        .map(|l| ControllerEndpoint {
            name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
            security_protocol: l.security_protocol,
            ..Default::default()
        })
        .collect();
    let features = request
        .features
        .iter()
        .map(|f| ControllerFeature {
            name: f.name.clone(),
            min_supported_version: f.min_supported_version,
            max_supported_version: f.max_supported_version,
            ..Default::default()
        })
        .collect();
    let record = RegisterControllerRecord {
        controller_id: request.controller_id,
        incarnation_id: request.incarnation_id,
        // Kafka 4.x records no migration readiness (ZooKeeper is gone).
        zk_migration_ready: false,
        end_points,
        features,
        ..Default::default()
    };
    Ok((vec![MetadataRecord::RegisterController(record)], ()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::controller_registration_request::Listener;
    use krabka_protocol::Uuid;

    #[test]
    fn a_registration_is_recorded_once_controller_registrations_are_supported() {
        let request = ControllerRegistrationRequest {
            controller_id: 2,
            incarnation_id: Uuid([7; 16]),
            zk_migration_ready: true,
            listeners: vec![Listener { name: "CONTROLLER".into(), host: "h".into(), port: 9093, ..Default::default() }],
            ..Default::default()
        };
        let mut image = MetadataImage::default();
        let refused = plan_register_controller(&image, &request).unwrap_err();
        assert_eq!(refused.code, ErrorCode::UNSUPPORTED_VERSION.code());
        image.features.insert(METADATA_VERSION.into(), CONTROLLER_REGISTRATION_LEVEL);
        let (records, ()) = plan_register_controller(&image, &request).unwrap();
        let MetadataRecord::RegisterController(record) = &records[0] else { panic!("{records:?}") };
        assert_eq!((record.controller_id, record.incarnation_id, record.zk_migration_ready), (2, Uuid([7; 16]), false));
        assert_eq!((record.end_points[0].host.as_str(), record.end_points[0].port), ("h", 9093));
        image.apply(&records[0]).unwrap();
        assert_eq!(image.controllers[&2], *record);
    }
}
