//! ListGroups (key 16), versions 0-5: every group but Dead ones; v4+ filter by state
//! (case-insensitive) and report it; v5+ filter by type ("classic", "consumer", "share") and
//! report it. A consumer-protocol group's states are Kafka's: Empty, Assigning, Reconciling,
//! Stable; a share group (KIP-932; protocol type "share") is Empty or Stable.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};

use super::Groups;
use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ListGroups,
    min: 0,
    max: 5,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ListGroupsRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let states: Vec<String> = req
        .states_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let types: Vec<String> = req
        .types_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let mut resp = ListGroupsResponse::default();
    // Every group with DESCRIBE on the cluster, else those the caller may describe.
    let all = ctx.authorize_cluster(&b, super::authz::Op::Describe);
    let visible = |g: &str| all || ctx.may_group(&b, super::authz::Op::Describe, g);
    for g in b.groups.list().await {
        if !visible(&g.group_id) {
            continue;
        }
        if !states.is_empty() && !states.contains(&g.state_name.to_ascii_lowercase()) {
            continue;
        }
        if !types.is_empty() && !types.iter().any(|t| t == g.group_type) {
            continue;
        }
        let mut l = ListedGroup::default();
        l.group_id = GroupId(sb(g.group_id));
        l.protocol_type = sb(g.protocol_type);
        if v >= 4 {
            l.group_state = sb(g.state_name.to_string());
        }
        if v >= 5 {
            l.group_type = sb(g.group_type.to_string());
        }
        resp.groups.push(l);
    }
    let wants_share = types.is_empty() || types.iter().any(|t| t == "share");
    let share = if wants_share {
        b.share.list()
    } else {
        Vec::new()
    };
    for (id, state) in share {
        if !visible(&id) {
            continue;
        }
        if !states.is_empty() && !states.contains(&state.to_ascii_lowercase()) {
            continue;
        }
        let mut l = ListedGroup::default();
        l.group_id = GroupId(sb(id));
        l.protocol_type = sb("share".to_string());
        if v >= 4 {
            l.group_state = sb(state.to_string());
        }
        if v >= 5 {
            l.group_type = sb("share".to_string());
        }
        resp.groups.push(l);
    }
    super::respond(&ctx, &resp)
}
