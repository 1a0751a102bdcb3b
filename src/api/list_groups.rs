//! ListGroups (key 16), versions 0-5: every group but Dead ones; v4+ filter by state
//! (case-insensitive) and report it; v5+ filter by type and report it: "classic", or
//! "share" for share groups (KIP-932; protocol type "share", state Empty or Stable).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::broker::Broker;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ListGroups,
    min: 0,
    max: 5,
    handle: |b, ctx, body| Box::pin(handle(b, ctx, body)),
};

async fn handle(b: Arc<Broker>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
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
    let wants = |t: &str| types.is_empty() || types.iter().any(|x| x == t);
    let classic = if wants("classic") {
        b.groups.list().await
    } else {
        Vec::new()
    };
    for g in classic {
        if !states.is_empty() && !states.contains(&g.state.name().to_ascii_lowercase()) {
            continue;
        }
        let mut l = ListedGroup::default();
        l.group_id = GroupId(sb(g.group_id));
        l.protocol_type = sb(g.protocol_type);
        if v >= 4 {
            l.group_state = sb(g.state.name().to_string());
        }
        if v >= 5 {
            l.group_type = sb("classic".to_string());
        }
        resp.groups.push(l);
    }
    let share = if wants("share") {
        b.share.list()
    } else {
        Vec::new()
    };
    for (id, state) in share {
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
