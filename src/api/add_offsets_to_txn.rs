//! AddOffsetsToTxn (key 25), versions 0-4.
//!
//! Adds the group's `__consumer_offsets` partition (abs(hashCode(group)) mod the topic's
//! partition count) to the transaction, so its markers also settle the offsets the producer
//! then commits with TxnOffsetCommit. Answered once written to `__transaction_state`.
//! Producers of transaction version 2 do not send it (their TxnOffsetCommit adds the
//! partition).
//!
//! Version notes: v2+ PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v3
//! flexible; v4 TRANSACTION_ABORTABLE may be returned (KIP-890).

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey};

use super::Txns;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::AddOffsetsToTxn,
    min: 0,
    max: 4,
    handle: super::Handler::Txns(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Txns>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AddOffsetsToTxnRequest = super::decode(&ctx, body)?;
    let offsets = crate::group::store::TOPIC;
    let count = b
        .controller
        .topic(offsets)
        .map_or(b.config.offsets_topic_num_partitions, |t| {
            t.partition_count as i32
        });
    let partition = crate::group::records::partition_for(&req.group_id.0, count.max(1));
    let parts = BTreeSet::from([(offsets.to_string(), partition)]);
    // WRITE on the transactional id, then READ on the group.
    use super::authz::Op;
    let refusal = ctx
        .txn_error(&b, Op::Write, &req.transactional_id)
        .or_else(|| ctx.group_error(&b, Op::Read, &req.group_id));
    let mut code = match refusal {
        Some(code) => code,
        None => {
            b.txns
                .add_partitions(
                    &req.transactional_id.0,
                    req.producer_id.0,
                    req.producer_epoch,
                    &parts,
                    0,
                )
                .await
        }
    };
    if ctx.version < 2 && code == E::ProducerFenced.code() {
        code = E::InvalidProducerEpoch.code();
    }
    let mut resp = AddOffsetsToTxnResponse::default();
    resp.error_code = code;
    super::respond(&ctx, &resp)
}
