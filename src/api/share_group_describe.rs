//! ShareGroupDescribe (key 77), version 1 (KIP-932): each share group's state (Empty or
//! Stable), group and assignment epochs, the assignor (`simple`) and its members with their
//! subscriptions and assignments. An unknown id is GROUP_ID_NOT_FOUND ("Group g not found."),
//! a classic group's "Group g is not a share group.", as Kafka answers. A group the caller
//! may not DESCRIBE is GROUP_AUTHORIZATION_FAILED; `authorized_operations` is the caller's
//! operations on the group when asked for.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Groups;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::security::acl::ResourceType;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ShareGroupDescribe,
    min: 1,
    max: 1,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn describe(b: &Groups, ctx: &RequestCtx, ops: bool, group_id: &str) -> DescribedGroup {
    let mut d = DescribedGroup::default();
    d.group_id = StrBytes::from_string(group_id.to_string()).into();
    d.authorized_operations = super::authz::OPS_NOT_REQUESTED;
    if let Some(code) = ctx.group_error(b, super::authz::Op::Describe, group_id) {
        d.error_code = code;
        return d;
    }
    if let Err(code) = b.groups.serves(group_id) {
        d.error_code = code;
        return d;
    }
    let Some(g) = b.share.describe(group_id) else {
        let message = match b.groups.describe(group_id).await {
            Ok(Some(_)) => format!("Group {group_id} is not a share group."),
            _ => format!("Group {group_id} not found."),
        };
        d.error_code = ResponseError::GroupIdNotFound.code();
        d.error_message = Some(StrBytes::from_string(message));
        d.group_state = StrBytes::from_static_str("Dead");
        return d;
    };
    d.group_state = StrBytes::from_static_str(g.state());
    d.group_epoch = g.group_epoch;
    d.assignment_epoch = g.assignment_epoch;
    d.assignor_name = StrBytes::from_static_str("simple");
    d.authorized_operations = ctx.ops_if(b, ops, ResourceType::Group, group_id);
    for m in g.members.values() {
        let mut out = Member::default();
        out.member_id = StrBytes::from_string(m.member_id.clone());
        out.rack_id = m.rack_id.clone().map(StrBytes::from_string);
        out.member_epoch = m.epoch;
        out.client_id = StrBytes::from_string(m.client_id.clone());
        out.client_host = StrBytes::from_string(m.client_host.clone());
        out.subscribed_topic_names = m
            .subscribed
            .iter()
            .map(|t| TopicName(StrBytes::from_string(t.clone())))
            .collect();
        let mut asg = Assignment::default();
        for (id, partitions) in &m.assignment {
            let mut tp = TopicPartitions::default();
            tp.topic_id = *id;
            tp.topic_name = TopicName(StrBytes::from_string(
                b.controller
                    .topic_by_id(id)
                    .map(|t| t.name.to_string())
                    .unwrap_or_default(),
            ));
            tp.partitions = partitions.clone();
            asg.topic_partitions.push(tp);
        }
        out.assignment = asg;
        d.members.push(out);
    }
    d
}

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ShareGroupDescribeRequest = super::decode(&ctx, body)?;
    let mut resp = ShareGroupDescribeResponse::default();
    for g in &req.group_ids {
        let ops = req.include_authorized_operations;
        resp.groups
            .push(describe(&b, &ctx, ops, g.0.as_str()).await);
    }
    super::respond(&ctx, &resp)
}
