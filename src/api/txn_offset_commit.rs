//! TxnOffsetCommit (key 28), versions 0-5: a transactional producer commits a group's offsets
//! inside its transaction (consume-transform-produce, `sendOffsetsToTransaction`).
//!
//! Behaviour, as Kafka 4.4 answers:
//! * an empty group id: INVALID_GROUP_ID for every partition; unknown topics or partitions:
//!   UNKNOWN_TOPIC_OR_PARTITION; the rest go to the group coordinator;
//! * the coordinator checks the group as for OffsetCommit (KIP-447: member id, generation and
//!   group instance id; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), except
//!   that an unknown group with generation -1 becomes a simple group, an unknown group with
//!   a generation is ILLEGAL_GENERATION, no member is needed, and a rebalance in progress is
//!   no obstacle; metadata over `offset.metadata.max.bytes`: OFFSET_METADATA_TOO_LARGE;
//! * the offsets are written to the group's `__consumer_offsets` partition as one
//!   transactional batch with the request's producer id and epoch (an epoch older than the
//!   one the partition knows: INVALID_PRODUCER_EPOCH), and stay pending (OffsetFetch with
//!   require_stable: UNSTABLE_OFFSET_COMMIT) until the producer's transaction marker commits
//!   or aborts them.
//!
//! * KIP-890 (`api::txn_verify`): unless the producer has a transaction open in the group's
//!   partition, the transaction coordinator is asked whether that partition is in the
//!   transaction (INVALID_TXN_STATE before v4, TRANSACTION_ABORTABLE from v4, if not) or, v5
//!   (transaction version 2, whose clients send no AddOffsetsToTxn), adds it.
//!
//! Version notes: v0/v1 as v0 (v1: throttling after the answer); v2 adds the committed leader
//! epoch; v3 (flexible) adds generation, member id and group instance id (KIP-447); v4 may
//! answer TRANSACTION_ABORTABLE (KIP-890); v5 is v4 under transaction version 2. Below v2,
//! COORDINATOR_LOAD_IN_PROGRESS is answered as COORDINATOR_NOT_AVAILABLE (clients before 2.0
//! did not expect it). v6 (Kafka 4.4: topics by id) is not served: kafka-protocol 0.18 does
//! not decode it.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::Txns;
use super::group_util::{RequestedOffset, ResolvedCommit};
use super::{ApiSpec, RequestCtx};
use crate::group::coordinator::TxnCommitParams;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::TxnOffsetCommit,
    min: 0,
    max: 5,
    handle: super::Handler::Txns(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Txns>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: TxnOffsetCommitRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let requested = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| RequestedOffset {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if v >= 2 { p.committed_leader_epoch } else { -1 },
                    metadata: p.committed_metadata.as_ref().map(|s| s.to_string()),
                })
                .collect();
            (t.name.0.to_string(), partitions)
        })
        .collect();
    // WRITE on the transactional id, then READ on the group, then READ on each topic.
    use super::authz::Op;
    let whole = ctx
        .txn_error(&b, Op::Write, &req.transactional_id)
        .or_else(|| ctx.group_error(&b, Op::Read, &req.group_id));
    let mut resolved = ResolvedCommit::new(&b, requested, |t| {
        whole.or_else(|| ctx.topic_error(&b, Op::Read, t))
    });
    if whole.is_none() && req.group_id.0.is_empty() {
        resolved.offsets.clear();
        for codes in &mut resolved.codes {
            codes.fill(ResponseError::InvalidGroupId.code());
        }
    }
    if !resolved.offsets.is_empty()
        && let Some(code) = super::txn_verify::for_txn_offset_commit(
            &b,
            &req.transactional_id.0,
            &req.group_id.0,
            req.producer_id.0,
            req.producer_epoch,
            v,
        )
        .await
    {
        resolved.offsets.clear();
        for codes in &mut resolved.codes {
            codes.fill(code);
        }
    }
    if !resolved.offsets.is_empty() {
        let (member_id, instance_id, generation) = if v >= 3 {
            (
                req.member_id.to_string(),
                req.group_instance_id.map(|s| s.to_string()),
                req.generation_id,
            )
        } else {
            (String::new(), None, -1)
        };
        let result = b
            .groups
            .commit_txn(TxnCommitParams {
                group_id: req.group_id.0.to_string(),
                member_id,
                instance_id,
                generation,
                producer_id: req.producer_id.0,
                producer_epoch: req.producer_epoch,
                offsets: std::mem::take(&mut resolved.offsets),
            })
            .await;
        resolved.answer(&result);
    }
    let load = ResponseError::CoordinatorLoadInProgress.code();
    let mut resp = TxnOffsetCommitResponse::default();
    for (t, codes) in req.topics.iter().zip(resolved.codes) {
        let mut rt = TxnOffsetCommitResponseTopic::default();
        rt.name = t.name.clone();
        for (p, code) in t.partitions.iter().zip(codes) {
            let mut rp = TxnOffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            rp.error_code = if v < 2 && code == load {
                ResponseError::CoordinatorNotAvailable.code()
            } else {
                code
            };
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    super::respond(&ctx, &resp)
}
