//! InitProducerId (key 22), versions 0-5.
//!
//! Without a transactional id (idempotent producers) Kafka accepts every request and returns a
//! fresh producer id with epoch 0, whatever producer id/epoch the request carries (v3+): the
//! KIP-360 epoch bump of an idempotent producer happens in the client, and the partition's
//! producer state accepts the new epoch from sequence 0. A producer id given without an epoch,
//! or the reverse, is INVALID_REQUEST; an empty transactional id is INVALID_REQUEST.
//!
//! Transactions are not served yet: a transactional id gets COORDINATOR_NOT_AVAILABLE, the
//! retriable error Kafka returns while its transaction coordinator cannot serve, so a
//! transactional client's initTransactions() times out cleanly instead of failing with a
//! misleading fatal error (idempotent clients are unaffected).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use tracing::warn;

use super::{ApiSpec, RequestCtx};
use crate::broker::Broker;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::InitProducerId,
    min: 0,
    max: 5,
    handle: |b, ctx, body| Box::pin(handle(b, ctx, body)),
};

async fn handle(b: Arc<Broker>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: InitProducerIdRequest = super::decode(&ctx, body)?;
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    resp.error_code = if (pid == -1) != (epoch == -1) {
        ResponseError::InvalidRequest.code()
    } else if let Some(tid) = &req.transactional_id {
        if tid.0.is_empty() {
            ResponseError::InvalidRequest.code()
        } else {
            ResponseError::CoordinatorNotAvailable.code()
        }
    } else {
        let ids = b.clone();
        let allocated = match b.cluster() {
            // A cluster hands out blocks through the controller, so ids are unique across it.
            Some(c) => c.allocate_producer_id().await,
            None => tokio::task::spawn_blocking(move || ids.producer_ids.allocate()).await?,
        };
        match allocated {
            Ok(id) => {
                resp.producer_id = ProducerId(id);
                resp.producer_epoch = 0;
                0
            }
            Err(e) => {
                warn!("producer id allocation failed: {e:#}");
                ResponseError::UnknownServerError.code()
            }
        }
    };
    super::respond(&ctx, &resp)
}
