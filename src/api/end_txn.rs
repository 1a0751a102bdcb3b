//! EndTxn (key 26), versions 0-5.
//!
//! Commits or aborts the producer's transaction: the coordinator writes PrepareCommit or
//! PrepareAbort to `__transaction_state` and answers; the markers and the Complete state
//! follow in the background (until then the id's next requests get CONCURRENT_TRANSACTIONS).
//! A retry of an EndTxn that already completed succeeds.
//!
//! Version notes: v2+ PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v3
//! flexible; v5 transaction version 2 (KIP-890 part 2): the epoch goes up at every end, the
//! response carries the producer id and epoch to continue with, an abort is accepted with no
//! transaction open, and a retry is recognised by the epoch below the stored one.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse, ProducerId};

use super::Txns;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::EndTxn,
    min: 0,
    max: 5,
    handle: super::Handler::Txns(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Txns>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: EndTxnRequest = super::decode(&ctx, body)?;
    let client_version = if ctx.version > 4 { 2 } else { 0 };
    let refusal = ctx.txn_error(&b, super::authz::Op::Write, &req.transactional_id);
    let (mut code, pid, epoch) = match refusal {
        Some(code) => (code, -1, -1),
        None => {
            b.txns
                .end_txn(
                    &req.transactional_id.0,
                    req.producer_id.0,
                    req.producer_epoch,
                    req.committed,
                    client_version,
                )
                .await
        }
    };
    if ctx.version < 2 && code == E::ProducerFenced.code() {
        code = E::InvalidProducerEpoch.code();
    }
    let mut resp = EndTxnResponse::default();
    resp.error_code = code;
    if ctx.version >= 5 {
        resp.producer_id = ProducerId(pid);
        resp.producer_epoch = epoch;
    }
    super::respond(&ctx, &resp)
}
