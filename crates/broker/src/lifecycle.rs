//! The broker's side of cluster membership, as Kafka's broker lifecycle
//! manager: on a node sharing its metadata quorum, register with the
//! active controller (`active_controller.rs`), then heartbeat with
//! how far this node's image has read the metadata log, until the
//! controller unfences it and on. A new incarnation id per process, so a
//! restart registers anew; a heartbeat refused as STALE_BROKER_EPOCH (the
//! registration is gone) registers again; a failed or refused exchange
//! (NOT_CONTROLLER: the lead moved) reconnects to whoever leads now. On a
//! clean stop, `controlled_shutdown` asks the active controller to fence
//! it (WantShutDown) before the storage closes, so clients stop being sent
//! to it at once rather than when its session expires.

use std::sync::Arc;
use std::time::Duration;

use krabka_metadata::features::SUPPORTED_FEATURES;
use krabka_protocol::broker_registration_request::{Feature, Listener};
use krabka_protocol::{
    ApiKey, BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest, BrokerRegistrationResponse,
    ErrorCode, Uuid,
};

use crate::active_controller;
use crate::broker::Broker;
use crate::quorum::Channel;

/// The versions sent: what Kafka 4.3.1's broker sends.
const REGISTRATION_VERSION: i16 = 4;
const HEARTBEAT_VERSION: i16 = 1;
/// How often a fenced broker heartbeats (it waits to be unfenced).
const FENCED_HEARTBEAT: Duration = Duration::from_millis(200);
/// How long to wait before trying again after a failure.
const RETRY: Duration = Duration::from_millis(200);
/// How long a clean stop waits for the controller to fence this broker.
const SHUTDOWN_PATIENCE: Duration = Duration::from_secs(5);

/// Runs until the broker shuts down.
pub async fn run(broker: Arc<Broker>) {
    if broker.metadata.quorum().is_none() {
        return;
    }
    let mut shutdown = broker.shutdown_signal();
    let mut last_reason = String::new();
    loop {
        let session = async {
            let mut channel = active_controller::connect(&broker, "lifecycle").await?;
            heartbeat_loop(&broker, &mut channel).await
        };
        let outcome: Result<(), String> = tokio::select! {
            outcome = session => outcome,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        if let Err(reason) = outcome {
            // Each new reason once at INFO (a restarted broker waits out its
            // old session's DUPLICATE_BROKER_REGISTRATION, every 200 ms).
            if reason != last_reason {
                tracing::info!(%reason, "broker registration: trying again");
            } else {
                tracing::debug!(%reason, "broker registration: trying again");
            }
            last_reason = reason;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Asks the active controller to fence this broker before it stops
/// (Kafka's controlled shutdown: WantShutDown until ShouldShutDown), for
/// at most a few seconds: without a controller the stop goes on, and the
/// session's expiry fences it later.
pub async fn controlled_shutdown(broker: &Broker) {
    let Some(broker_epoch) = broker.membership.epoch() else {
        return;
    };
    let ask = async {
        loop {
            let attempt = async {
                let mut channel = active_controller::connect(broker, "lifecycle").await?;
                let request = BrokerHeartbeatRequest {
                    broker_id: broker.node_id,
                    broker_epoch,
                    current_metadata_offset: broker.metadata.image().offset,
                    want_shut_down: true,
                    ..Default::default()
                };
                let response: BrokerHeartbeatResponse =
                    channel.call(ApiKey::BrokerHeartbeat, HEARTBEAT_VERSION, &request).await?;
                Ok::<_, String>(response.error_code == 0 && response.should_shut_down)
            };
            if let Ok(true) = attempt.await {
                return;
            }
            tokio::time::sleep(RETRY).await;
        }
    };
    match tokio::time::timeout(SHUTDOWN_PATIENCE, ask).await {
        Ok(()) => tracing::info!("the active controller fenced this broker for its shutdown"),
        Err(_) => tracing::warn!("no controller fenced this broker for its shutdown; its session will expire"),
    }
}

/// Registers when it has no epoch, then heartbeats; returns why it stopped.
async fn heartbeat_loop(broker: &Broker, channel: &mut Channel) -> Result<(), String> {
    let interval = Duration::from_millis(
        broker.config.raw.get("broker.heartbeat.interval.ms").and_then(|v| v.trim().parse().ok()).unwrap_or(2000),
    );
    loop {
        let epoch = match broker.membership.epoch() {
            Some(epoch) => epoch,
            None => {
                let epoch = register(broker, channel, broker.membership.incarnation_id).await?;
                tracing::info!(broker_epoch = epoch, "registered with the active controller");
                broker.membership.set_epoch(Some(epoch));
                epoch
            }
        };
        let request = BrokerHeartbeatRequest {
            broker_id: broker.node_id,
            broker_epoch: epoch,
            current_metadata_offset: broker.metadata.image().offset,
            // Kafka's broker names its failed directories in every heartbeat.
            offline_log_dirs: broker.replicas.log_dirs.offline_ids(),
            ..Default::default()
        };
        let response: BrokerHeartbeatResponse =
            channel.call(ApiKey::BrokerHeartbeat, HEARTBEAT_VERSION, &request).await?;
        match response.error_code {
            0 => {}
            code if code == ErrorCode::STALE_BROKER_EPOCH.code() => {
                broker.membership.set_epoch(None);
                continue;
            }
            code => return Err(format!("heartbeat answered error {code}")),
        }
        let pause = if response.is_fenced { FENCED_HEARTBEAT } else { interval };
        // A directory that fails is reported at once, not a heartbeat later.
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = broker.replicas.log_dirs.wait_taken_offline() => {}
        }
    }
}

async fn register(broker: &Broker, channel: &mut Channel, incarnation_id: Uuid) -> Result<i64, String> {
    let config = &broker.config;
    let is_controller = |name: &str| config.controller_listener_names.iter().any(|n| n == name);
    let listeners = config
        .advertised_listeners
        .iter()
        .filter(|l| !is_controller(&l.name))
        .map(|l| Listener {
            name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
            security_protocol: config.security.client_listener(&l.name).map_or(0, |c| c.protocol.id()),
            ..Default::default()
        })
        .collect();
    let request = BrokerRegistrationRequest {
        broker_id: broker.node_id,
        cluster_id: broker.cluster_id.clone(),
        incarnation_id,
        listeners,
        rack: config.raw.get("broker.rack").cloned(),
        features: SUPPORTED_FEATURES
            .iter()
            .map(|f| Feature {
                name: f.name.to_string(),
                min_supported_version: f.min,
                max_supported_version: f.max,
                ..Default::default()
            })
            .collect(),
        log_dirs: broker.replicas.log_dirs.ids(),
        // The epoch of the last clean shutdown (-1 after a crash): a
        // controller with ELR on drops an unclean one from the ELRs.
        previous_broker_epoch: broker.replicas.log_manager().previous_broker_epoch(),
        ..Default::default()
    };
    let response: BrokerRegistrationResponse =
        channel.call(ApiKey::BrokerRegistration, REGISTRATION_VERSION, &request).await?;
    if response.error_code != 0 {
        return Err(format!("registration answered error {}", response.error_code));
    }
    Ok(response.broker_epoch)
}
