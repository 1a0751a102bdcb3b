//! DescribeGroups (key 15), versions 0-6: state, protocol and members of classic groups.
//! Member metadata and assignments are given in the Stable state only, as Kafka does. An
//! unknown group is reported Dead (v0-5) or GROUP_ID_NOT_FOUND (v6+); so is a consumer-protocol
//! group ("is not a classic group").

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse};

use super::Groups;
use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DescribeGroups,
    min: 0,
    max: 6,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DescribeGroupsRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let mut resp = DescribeGroupsResponse::default();
    for id in req.groups {
        let mut g = DescribedGroup::default();
        g.group_id = id.clone();
        if let Some(code) = ctx.group_error(&b, super::authz::Op::Describe, &id) {
            g.error_code = code;
            resp.groups.push(g);
            continue;
        }
        match b.groups.describe(id.0.as_str()).await {
            Ok(Some(d)) => {
                g.group_state = sb(d.state.name().to_string());
                g.protocol_type = sb(d.protocol_type);
                g.protocol_data = sb(d.protocol);
                g.members = d
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut dm = DescribedGroupMember::default();
                        dm.member_id = sb(m.member_id);
                        if v >= 4 {
                            dm.group_instance_id = m.instance_id.map(sb);
                        }
                        dm.client_id = sb(m.client_id);
                        dm.client_host = sb(m.client_host);
                        dm.member_metadata = m.metadata;
                        dm.member_assignment = m.assignment;
                        dm
                    })
                    .collect();
                if v >= 3 && req.include_authorized_operations {
                    g.authorized_operations = ctx.authorized_operations(
                        &b,
                        crate::security::acl::ResourceType::Group,
                        id.0.as_str(),
                    );
                }
            }
            // A consumer-protocol group, as Kafka answers it: Dead, and from v6 the error.
            Err(code) if code == ResponseError::GroupIdNotFound.code() => {
                g.group_state = sb("Dead".to_string());
                if v >= 6 {
                    g.error_code = code;
                    g.error_message = Some(sb(format!(
                        "Group {} is not a classic group.",
                        id.0.as_str()
                    )));
                }
            }
            Err(code) => g.error_code = code,
            Ok(None) if v >= 6 => {
                g.error_code = ResponseError::GroupIdNotFound.code();
                g.error_message = Some(sb(format!("Group {} not found.", id.0.as_str())));
            }
            Ok(None) => {
                g.group_state = sb("Dead".to_string());
            }
        }
        resp.groups.push(g);
    }
    super::respond(&ctx, &resp)
}
