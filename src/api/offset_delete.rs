//! OffsetDelete (key 47), version 0: deletes committed offsets of a group. Allowed for empty
//! groups, and for consumer groups with members only for topics they do not subscribe to
//! (else GROUP_SUBSCRIBED_TO_TOPIC per partition).
//!
//! Authorization (Kafka's `KafkaApis`): without DELETE on the group the whole request is
//! GROUP_AUTHORIZATION_FAILED with no topics; a topic the principal may not READ has
//! TOPIC_AUTHORIZATION_FAILED on its partitions, before its existence is told.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};

use super::Groups;
use super::authz::Op;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::OffsetDelete,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: OffsetDeleteRequest = super::decode(&ctx, body)?;
    let mut resp = OffsetDeleteResponse::default();
    if let Some(code) = ctx.group_error(&b, Op::Delete, req.group_id.0.as_str()) {
        resp.error_code = code;
        return super::respond(&ctx, &resp);
    }
    let mut asked = Vec::new();
    let mut slots = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let refused = ctx.topic_error(&b, Op::Read, t.name.0.as_str());
        let known = b.controller.topic(t.name.0.as_str()).is_some();
        let mut rt = OffsetDeleteResponseTopic::default();
        rt.name = t.name.clone();
        for (pi, p) in t.partitions.iter().enumerate() {
            let mut rp = OffsetDeleteResponsePartition::default();
            rp.partition_index = p.partition_index;
            if let Some(code) = refused {
                rp.error_code = code;
            } else if known {
                asked.push((t.name.0.to_string(), p.partition_index));
                slots.push((ti, pi));
            } else {
                rp.error_code = ResponseError::UnknownTopicOrPartition.code();
            }
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    match b
        .groups
        .delete_offsets(req.group_id.0.as_str(), asked)
        .await
    {
        Ok(codes) => {
            for ((ti, pi), code) in slots.into_iter().zip(codes) {
                resp.topics[ti].partitions[pi].error_code = code;
            }
        }
        Err(code) => {
            resp.error_code = code;
            resp.topics.clear();
        }
    }
    super::respond(&ctx, &resp)
}
