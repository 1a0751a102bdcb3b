//! InitProducerId (key 22), versions 0-5.
//!
//! Without a transactional id (idempotent producers) Kafka accepts every request and returns a
//! fresh producer id with epoch 0, whatever producer id/epoch the request carries (v3+): the
//! KIP-360 epoch bump of an idempotent producer happens in the client, and the partition's
//! producer state accepts the new epoch from sequence 0. A producer id given without an epoch,
//! or the reverse, is INVALID_REQUEST; an empty transactional id is INVALID_REQUEST.
//!
//! With a transactional id the transaction coordinator answers (Kafka's handleInitProducerId):
//! a new id gets a fresh producer id at epoch 0; a known one the next epoch, which fences
//! the previous instance (an open transaction of it is aborted first: the caller gets
//! CONCURRENT_TRANSACTIONS and retries); a timeout above transaction.max.timeout.ms (or not
//! positive) is INVALID_TRANSACTION_TIMEOUT. v3+ may carry the producer id and epoch of a
//! producer recovering its state (KIP-360): a retry of a bump gets the same answer, a stale
//! producer PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). When the epoch is exhausted a
//! new producer id starts at epoch 0.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use tracing::warn;

use super::Txns;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::InitProducerId,
    min: 0,
    max: 5,
    handle: super::Handler::Txns(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Txns>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: InitProducerIdRequest = super::decode(&ctx, body)?;
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    // WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the cluster or WRITE on
    // some topic. Checked before the request's fields, as Kafka does.
    use super::authz::Op;
    let refusal = match &req.transactional_id {
        Some(tid) => ctx.txn_error(&b, Op::Write, tid),
        None if ctx.authorize_cluster(&b, Op::IdempotentWrite)
            || ctx.authorize_by_type(&b, Op::Write, crate::security::acl::ResourceType::Topic) =>
        {
            None
        }
        None => Some(super::authz::cluster_denied()),
    };
    resp.error_code = if let Some(code) = refusal {
        code
    } else if (pid == -1) != (epoch == -1) {
        ResponseError::InvalidRequest.code()
    } else if let Some(tid) = &req.transactional_id {
        let expected = (pid != -1).then_some((pid, epoch));
        let (mut code, id, e) = b
            .txns
            .init_producer_id(&tid.0, req.transaction_timeout_ms, expected)
            .await;
        if ctx.version < 4 && code == ResponseError::ProducerFenced.code() {
            code = ResponseError::InvalidProducerEpoch.code();
        }
        resp.producer_id = ProducerId(id);
        resp.producer_epoch = e;
        code
    } else {
        match b.allocate_producer_id().await {
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
