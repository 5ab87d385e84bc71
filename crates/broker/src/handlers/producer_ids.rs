//! InitProducerId for idempotent producers: a fresh producer id (epoch 0)
//! from the block reserved in the metadata log, as Kafka's coordinator does
//! for a producer without a transactional id.

use krabka_protocol::ErrorCode;
use krabka_protocol::{InitProducerIdRequest, InitProducerIdResponse};

use crate::request::RequestContext;

pub fn handle(ctx: &RequestContext<'_>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse { producer_id: -1, producer_epoch: -1, ..Default::default() };
    if let Some(transactional_id) = &request.transactional_id {
        tracing::warn!(%transactional_id, "transactional producers are not supported yet");
        response.error_code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();
        return response;
    }
    let metadata = &ctx.broker.metadata;
    let reserve = |node_id| metadata.control(|c, now_ms| c.allocate_producer_ids(node_id, now_ms)).map(|(_, b)| b);
    match ctx.broker.producer_ids.allocate(reserve) {
        Ok(producer_id) => {
            response.producer_id = producer_id;
            response.producer_epoch = 0;
        }
        Err(e) => {
            tracing::error!(error = %e, "could not reserve producer ids");
            response.error_code = ErrorCode::COORDINATOR_NOT_AVAILABLE.code();
        }
    }
    response
}
