//! InitProducerId for idempotent producers: a fresh producer id (epoch 0)
//! from the block reserved in the metadata log, as Kafka's coordinator does
//! for a producer without a transactional id.

use krabka_protocol::ErrorCode;
use krabka_protocol::{InitProducerIdRequest, InitProducerIdResponse};

use crate::metadata::MetadataError;
use crate::request::RequestContext;
use krabka_controller::producer_ids::plan_allocate_producer_ids;

pub async fn handle(ctx: &RequestContext<'_>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse { producer_id: -1, producer_epoch: -1, ..Default::default() };
    if let Some(transactional_id) = &request.transactional_id {
        tracing::warn!(%transactional_id, "transactional producers are not supported yet");
        response.error_code = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();
        return response;
    }
    match allocate(ctx).await {
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

/// The next producer id of this node's block, reserving the next block in
/// the metadata log when it is used up.
async fn allocate(ctx: &RequestContext<'_>) -> Result<i64, MetadataError> {
    let blocks = &ctx.broker.producer_ids;
    if let Some(id) = blocks.take() {
        return Ok(id);
    }
    let node_id = blocks.node_id();
    let (_, block) = ctx.broker.metadata.control(|image| plan_allocate_producer_ids(image, node_id)).await?;
    Ok(blocks.take_from(block))
}
