//! SyncGroup (key 14), versions 0-5: members of a generation get their assignment; the
//! leader's request carries everyone's. v3+ carry group.instance.id; v5+ the protocol type
//! and name (checked against the group's: INCONSISTENT_GROUP_PROTOCOL).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};

use super::Groups;
use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::group::coordinator::SyncParams;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::SyncGroup,
    min: 0,
    max: 5,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: SyncGroupRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let p = SyncParams {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.map(|s| s.to_string()),
        generation: req.generation_id,
        protocol_type: req.protocol_type.map(|s| s.to_string()),
        protocol_name: req.protocol_name.map(|s| s.to_string()),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let mut resp = SyncGroupResponse::default();
    if let Some(code) = ctx.group_error(&b, super::authz::Op::Read, &p.group_id) {
        resp.error_code = code;
        return super::respond(&ctx, &resp);
    }
    let r = b.groups.sync(p).await;
    resp.error_code = r.error;
    if v >= 5 {
        resp.protocol_type = r.protocol_type.map(sb);
        resp.protocol_name = r.protocol_name.map(sb);
    }
    resp.assignment = r.assignment;
    super::respond(&ctx, &resp)
}
