//! The controller's own APIs, served on the controller listener to brokers
//! (their own and other nodes'): BrokerRegistration and BrokerHeartbeat,
//! each one krabka-controller plan committed through the metadata store
//! (NOT_CONTROLLER on a node that does not lead).

use std::sync::Arc;

use krabka_controller::brokers::{plan_broker_heartbeat, plan_register_broker, HeartbeatOutcome};
use krabka_protocol::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest, BrokerRegistrationResponse,
    RequestBody, ResponseBody,
};

use crate::broker::Broker;
use crate::quorum::ControllerHandler;

/// The handler the controller listener hands its controller APIs to.
pub fn handler(broker: Arc<Broker>) -> ControllerHandler {
    Arc::new(move |request, _version| {
        let broker = Arc::clone(&broker);
        Box::pin(async move {
            match request {
                RequestBody::BrokerRegistration(r) => {
                    Some(ResponseBody::BrokerRegistration(Box::new(register(&broker, &r).await)))
                }
                RequestBody::BrokerHeartbeat(r) => {
                    Some(ResponseBody::BrokerHeartbeat(Box::new(heartbeat(&broker, &r).await)))
                }
                _ => None,
            }
        })
    })
}

async fn register(broker: &Broker, request: &BrokerRegistrationRequest) -> BrokerRegistrationResponse {
    let cluster_id = broker.cluster_id.as_str();
    match broker.metadata.control(|image| plan_register_broker(image, request, cluster_id)).await {
        Ok((_, broker_epoch)) => {
            tracing::info!(broker = request.broker_id, broker_epoch, "broker registered");
            BrokerRegistrationResponse { broker_epoch, ..Default::default() }
        }
        Err(e) => BrokerRegistrationResponse { error_code: e.code, broker_epoch: -1, ..Default::default() },
    }
}

async fn heartbeat(broker: &Broker, request: &BrokerHeartbeatRequest) -> BrokerHeartbeatResponse {
    match broker.metadata.control(|image| plan_broker_heartbeat(image, request)).await {
        Ok((_, HeartbeatOutcome { is_caught_up, is_fenced, should_shut_down })) => {
            BrokerHeartbeatResponse { is_caught_up, is_fenced, should_shut_down, ..Default::default() }
        }
        Err(e) => BrokerHeartbeatResponse { error_code: e.code, is_fenced: true, ..Default::default() },
    }
}
