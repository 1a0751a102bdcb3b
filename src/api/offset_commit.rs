//! OffsetCommit (key 8), versions 2-9.
//!
//! Offsets of unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION; the rest go to the
//! group coordinator, which validates the member and generation (generation -1 with no member
//! id is a simple consumer's commit to an empty group) and answers once they are appended to
//! `__consumer_offsets` (in a cluster: once committed on its in-sync replicas; a group this
//! broker does not coordinate gets NOT_COORDINATOR). v6+ carry the committed leader epoch,
//! v7+ group.instance.id.
//!
//! v10 (Kafka 4.4: topics by id) is not served: kafka-protocol 0.18 does not decode it.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};

use super::Groups;
use super::group_util::{RequestedOffset, ResolvedCommit};
use super::{ApiSpec, RequestCtx};
use crate::group::coordinator::CommitParams;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::OffsetCommit,
    min: 2,
    max: 9,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: OffsetCommitRequest = super::decode(&ctx, body)?;
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
                    leader_epoch: if v >= 6 { p.committed_leader_epoch } else { -1 },
                    metadata: p.committed_metadata.as_ref().map(|s| s.to_string()),
                })
                .collect();
            (t.name.0.to_string(), partitions)
        })
        .collect();
    // READ on the group (every partition refused without it), then READ on each topic.
    use super::authz::Op;
    let group_refused = ctx.group_error(&b, Op::Read, &req.group_id);
    let mut resolved = ResolvedCommit::new(&b, requested, |t| {
        group_refused.or_else(|| ctx.topic_error(&b, Op::Read, t))
    });
    if !resolved.offsets.is_empty() {
        let result = b
            .groups
            .commit(CommitParams {
                group_id: req.group_id.0.to_string(),
                member_id: req.member_id.to_string(),
                instance_id: req.group_instance_id.map(|s| s.to_string()),
                generation: req.generation_id_or_member_epoch,
                version: v,
                offsets: std::mem::take(&mut resolved.offsets),
            })
            .await;
        resolved.answer(&result);
    }
    let mut resp = OffsetCommitResponse::default();
    for (t, codes) in req.topics.iter().zip(resolved.codes) {
        let mut rt = OffsetCommitResponseTopic::default();
        rt.name = t.name.clone();
        for (p, code) in t.partitions.iter().zip(codes) {
            let mut rp = OffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            rp.error_code = code;
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    super::respond(&ctx, &resp)
}
