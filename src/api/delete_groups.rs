//! DeleteGroups (key 42), versions 0-2: deletes empty groups with their offsets
//! (GROUP_ID_NOT_FOUND for unknown groups, NON_EMPTY_GROUP for groups with members); a share
//! group (KIP-932) goes with its share partitions' state. A group the principal may not
//! DELETE is GROUP_AUTHORIZATION_FAILED, before its existence is told.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};

use super::Groups;
use super::authz::Op;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DeleteGroups,
    min: 0,
    max: 2,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DeleteGroupsRequest = super::decode(&ctx, body)?;
    let mut resp = DeleteGroupsResponse::default();
    for id in req.groups_names {
        let mut r = DeletableGroupResult::default();
        r.error_code = if let Some(code) = ctx.group_error(&b, Op::Delete, id.0.as_str()) {
            code
        } else {
            match b.share.delete_group(id.0.as_str()) {
                Some(code) => code,
                None => b.groups.delete_group(id.0.as_str()).await,
            }
        };
        r.group_id = id;
        resp.results.push(r);
    }
    // A deleted share group's persisted states are deleted before the answer.
    b.share.persist().await;
    super::respond(&ctx, &resp)
}
