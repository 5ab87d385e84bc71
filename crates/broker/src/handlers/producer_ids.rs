//! InitProducerId for idempotent producers (a transactional id goes to the
//! transaction coordinator, handlers/transactions.rs): a fresh producer id (epoch 0)
//! from this broker's block, as Kafka's coordinator hands one to a
//! producer without a transactional id. A single node reserves its blocks
//! in its own metadata log; a node sharing a quorum asks the active
//! controller for them (AllocateProducerIds), as every Kafka broker does.

use krabka_protocol::ErrorCode;
use krabka_protocol::{InitProducerIdRequest, InitProducerIdResponse};

use crate::active_controller;
use crate::authorization::Authorization;
use crate::request::RequestContext;
use krabka_security::acl::{AclOperation, ResourceType};

pub async fn handle(ctx: &RequestContext<'_>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse { producer_id: -1, producer_epoch: -1, ..Default::default() };
    let image = ctx.broker.metadata.image();
    let authorization = Authorization::of(ctx, &image);
    // Under an authorizer: WRITE on the transactional id; an idempotent
    // producer IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    let refused = authorization.as_ref().and_then(|a| match &request.transactional_id {
        Some(id) => (!a.allows(AclOperation::Write, ResourceType::TransactionalId, id))
            .then_some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        None => (!a.allows_cluster(AclOperation::IdempotentWrite)
            && !a.allows_some(AclOperation::Write, ResourceType::Topic))
        .then_some(ErrorCode::CLUSTER_AUTHORIZATION_FAILED),
    });
    if let Some(error) = refused {
        response.error_code = error.code();
        return response;
    }
    if let Some(transactional_id) = &request.transactional_id {
        return super::transactions::init_producer_id(ctx, &request, transactional_id).await;
    }
    match ctx.broker.producer_ids.next_id(|| active_controller::reserve_producer_ids(ctx.broker)).await {
        Ok(producer_id) => {
            response.producer_id = producer_id;
            response.producer_epoch = 0;
        }
        Err(reason) => {
            tracing::warn!(%reason, "could not reserve producer ids");
            // Kafka's answer while no block is at hand: the producer retries.
            response.error_code = ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.code();
        }
    }
    response
}
