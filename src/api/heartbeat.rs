//! Heartbeat (key 12), versions 0-4: keeps a member's session alive; REBALANCE_IN_PROGRESS
//! tells it to rejoin. v3+ carry group.instance.id.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};

use super::Groups;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::Heartbeat,
    min: 0,
    max: 4,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: HeartbeatRequest = super::decode(&ctx, body)?;
    let mut resp = HeartbeatResponse::default();
    if let Some(code) = ctx.group_error(&b, super::authz::Op::Read, &req.group_id) {
        resp.error_code = code;
        return super::respond(&ctx, &resp);
    }
    resp.error_code = b
        .groups
        .heartbeat(
            req.group_id.0.as_str(),
            req.member_id.as_str(),
            req.group_instance_id.as_deref(),
            req.generation_id,
        )
        .await;
    super::respond(&ctx, &resp)
}
