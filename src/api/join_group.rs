//! JoinGroup (key 11), versions 0-9: a member joins a classic group and waits for the join
//! phase of the rebalance to complete (see `group::coordinator`). v4+ new dynamic members get
//! MEMBER_ID_REQUIRED first; v5+ carry group.instance.id (static membership); v7+ return the
//! protocol type and name; v9+ may tell a rejoining static leader to skip the assignment.
//! The id of a share group is refused (INCONSISTENT_GROUP_PROTOCOL).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};

use super::Groups;
use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::group::coordinator::JoinParams;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::JoinGroup,
    min: 0,
    max: 9,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: JoinGroupRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let p = JoinParams {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.map(|s| s.to_string()),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if v >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        require_known_member_id: v >= 4,
        supports_skip_assignment: v >= 9,
    };
    let mut resp = JoinGroupResponse::default();
    // A classic member cannot join a share group: INCONSISTENT_GROUP_PROTOCOL with no
    // member id, as Kafka answers.
    let refusal = ctx
        .group_error(&b, super::authz::Op::Read, &p.group_id)
        .or_else(|| {
            b.share
                .exists(&p.group_id)
                .then(|| kafka_protocol::ResponseError::InconsistentGroupProtocol.code())
        });
    if let Some(code) = refusal {
        resp.error_code = code;
        resp.generation_id = -1;
        resp.member_id = sb(String::new());
        resp.leader = sb(String::new());
        if v < 7 {
            resp.protocol_name = Some(sb(String::new()));
        }
        return super::respond(&ctx, &resp);
    }
    let r = b.groups.join(p).await;
    resp.error_code = r.error;
    resp.generation_id = r.generation;
    if v >= 7 {
        resp.protocol_type = r.protocol_type.map(sb);
        resp.protocol_name = r.protocol_name.map(sb);
    } else {
        resp.protocol_name = Some(sb(r.protocol_name.unwrap_or_default()));
    }
    resp.leader = sb(r.leader);
    resp.member_id = sb(r.member_id);
    if v >= 9 {
        resp.skip_assignment = r.skip_assignment;
    }
    resp.members = r
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut m = JoinGroupResponseMember::default();
            m.member_id = sb(id);
            if v >= 5 {
                m.group_instance_id = instance.map(sb);
            }
            m.metadata = metadata;
            m
        })
        .collect();
    super::respond(&ctx, &resp)
}
