//! A controller's registration with the active controller (KIP-919,
//! Kafka's `ControllerRegistrationManager`): once this node's image has
//! caught up and its metadata.version supports it, the controller sends
//! ControllerRegistration with its controller listeners and supported
//! features, so that DescribeCluster on any controller lists it (what
//! `--bootstrap-controller` clients find controllers by). It registers
//! again whenever the image does not hold this process's registration:
//! after a restart (a new incarnation) or if the record was lost with an
//! uncommitted leader's log.

use std::sync::Arc;
use std::time::Duration;

use krabka_controller::controllers::CONTROLLER_REGISTRATION_LEVEL;
use krabka_controller::update_features::CONTROLLER_FEATURES;
use krabka_metadata::features::METADATA_VERSION;
use krabka_protocol::controller_registration_request::{Feature, Listener};
use krabka_protocol::{ApiKey, ControllerRegistrationRequest, ControllerRegistrationResponse, Uuid};

use crate::active_controller;
use crate::broker::Broker;

/// ControllerRegistration's only version.
const REGISTRATION_VERSION: i16 = 0;
/// How often the image is looked at, and the wait after a failure.
const CHECK: Duration = Duration::from_millis(500);

/// Keeps this controller registered until the node shuts down.
pub async fn run(broker: Arc<Broker>) {
    let incarnation_id = Uuid::random().unwrap_or(Uuid([broker.node_id as u8; 16]));
    let request = registration(&broker, incarnation_id);
    let mut shutdown = broker.shutdown_signal();
    loop {
        tokio::select! {
            () = tokio::time::sleep(CHECK) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        if !needs_registration(&broker, &request) {
            continue;
        }
        match register(&broker, &request).await {
            Ok(()) => tracing::info!(%incarnation_id, "registered the controller with the active controller"),
            Err(reason) => tracing::debug!(%reason, "controller registration: trying again"),
        }
    }
}

/// Whether the image lacks this process's registration as `request` gives
/// it, once registrations are possible at all.
fn needs_registration(broker: &Broker, request: &ControllerRegistrationRequest) -> bool {
    let image = broker.metadata.image();
    let level = image.features.get(METADATA_VERSION).copied().unwrap_or(0);
    let registered = image.controllers.get(&broker.node_id).is_some_and(|r| {
        let listeners = r.end_points.iter().map(|e| (&e.name, &e.host, e.port));
        r.incarnation_id == request.incarnation_id
            && listeners.eq(request.listeners.iter().map(|l| (&l.name, &l.host, l.port)))
    });
    level >= CONTROLLER_REGISTRATION_LEVEL && !registered
}

async fn register(broker: &Broker, request: &ControllerRegistrationRequest) -> Result<(), String> {
    let mut channel = active_controller::connect(broker, "controller-registration").await?;
    let response: ControllerRegistrationResponse =
        channel.call(ApiKey::ControllerRegistration, REGISTRATION_VERSION, request).await?;
    match response.error_code {
        0 => Ok(()),
        code => Err(format!("registration answered error {code}: {:?}", response.error_message)),
    }
}

/// This controller's listeners and the feature levels it can run a
/// cluster at (what krabka's controller implements).
fn registration(broker: &Broker, incarnation_id: Uuid) -> ControllerRegistrationRequest {
    let config = &broker.config;
    let listeners = config
        .controller_listener_names
        .iter()
        .filter_map(|name| {
            let advertised = config.advertised_listeners.iter().find(|l| &l.name == name);
            advertised.or_else(|| config.listeners.iter().find(|l| &l.name == name))
        })
        .map(|l| Listener {
            name: l.name.clone(),
            // An empty host is this machine's, as krabka advertises a
            // broker listener without one.
            host: if l.host.is_empty() { "localhost".to_string() } else { l.host.clone() },
            port: l.port,
            // Only PLAINTEXT is served (its id is 0).
            security_protocol: 0,
            ..Default::default()
        })
        .collect();
    let features = CONTROLLER_FEATURES
        .iter()
        .map(|&(name, min, max)| Feature {
            name: name.to_string(),
            min_supported_version: min,
            max_supported_version: max,
            ..Default::default()
        })
        .collect();
    ControllerRegistrationRequest {
        controller_id: broker.node_id,
        incarnation_id,
        listeners,
        features,
        ..Default::default()
    }
}
