//! LeaveGroup (key 13), versions 0-5: v0-2 one member (its error is the response's), v3+ a
//! batch of members by member id and/or group.instance.id, each with its own error.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};

use super::Groups;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::LeaveGroup,
    min: 0,
    max: 5,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: LeaveGroupRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let leaving: Vec<(String, Option<String>)> = if v >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let (group_error, errors) = match ctx.group_error(&b, super::authz::Op::Read, &req.group_id) {
        Some(code) => (code, Vec::new()),
        None => b.groups.leave(req.group_id.0.as_str(), &leaving).await,
    };
    let mut resp = LeaveGroupResponse::default();
    if v >= 3 {
        resp.error_code = group_error;
        if group_error == 0 {
            resp.members = req
                .members
                .into_iter()
                .zip(errors)
                .map(|(m, e)| {
                    let mut r = MemberResponse::default();
                    r.member_id = m.member_id;
                    r.group_instance_id = m.group_instance_id;
                    r.error_code = e;
                    r
                })
                .collect();
        }
    } else {
        resp.error_code = if group_error != 0 {
            group_error
        } else {
            errors.first().copied().unwrap_or(0)
        };
    }
    super::respond(&ctx, &resp)
}
