//! The controller's own APIs, served on the controller listener to brokers
//! (their own and other nodes'): BrokerRegistration, BrokerHeartbeat and
//! AllocateProducerIds, translated to and from the cluster control's calls (NOT_CONTROLLER on a
//! node that does not lead).

use std::sync::Arc;

use krabka_controller::brokers::HeartbeatOutcome;
use krabka_protocol::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, BrokerHeartbeatRequest, BrokerHeartbeatResponse,
    BrokerRegistrationRequest, BrokerRegistrationResponse, RequestBody, ResponseBody,
};

use crate::cluster_control::ClusterControl;
use crate::quorum::ControllerHandler;

/// The handler the controller listener hands its controller APIs to.
pub fn handler(control: Arc<ClusterControl>) -> ControllerHandler {
    Arc::new(move |request, _version| {
        let control = Arc::clone(&control);
        Box::pin(async move {
            match request {
                RequestBody::BrokerRegistration(r) => {
                    Some(ResponseBody::BrokerRegistration(Box::new(register(&control, &r).await)))
                }
                RequestBody::BrokerHeartbeat(r) => {
                    Some(ResponseBody::BrokerHeartbeat(Box::new(heartbeat(&control, &r).await)))
                }
                RequestBody::AllocateProducerIds(r) => {
                    Some(ResponseBody::AllocateProducerIds(Box::new(allocate_producer_ids(&control, &r).await)))
                }
                _ => None,
            }
        })
    })
}

async fn register(control: &ClusterControl, request: &BrokerRegistrationRequest) -> BrokerRegistrationResponse {
    match control.register(request).await {
        Ok(broker_epoch) => BrokerRegistrationResponse { broker_epoch, ..Default::default() },
        Err(e) => BrokerRegistrationResponse { error_code: e.code, broker_epoch: -1, ..Default::default() },
    }
}

async fn heartbeat(control: &ClusterControl, request: &BrokerHeartbeatRequest) -> BrokerHeartbeatResponse {
    match control.heartbeat(request).await {
        Ok(HeartbeatOutcome { is_caught_up, is_fenced, should_shut_down }) => {
            BrokerHeartbeatResponse { is_caught_up, is_fenced, should_shut_down, ..Default::default() }
        }
        Err(e) => BrokerHeartbeatResponse { error_code: e.code, is_fenced: true, ..Default::default() },
    }
}

async fn allocate_producer_ids(
    control: &ClusterControl,
    request: &AllocateProducerIdsRequest,
) -> AllocateProducerIdsResponse {
    match control.allocate_producer_ids(request).await {
        Ok(block) => AllocateProducerIdsResponse {
            producer_id_start: block.start,
            producer_id_len: (block.end - block.start) as i32,
            ..Default::default()
        },
        Err(e) => AllocateProducerIdsResponse { error_code: e.code, ..Default::default() },
    }
}
