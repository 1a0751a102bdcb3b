//! ConsumerGroupDescribe (key 69), versions 0-1: a KIP-848 consumer group's state, epochs,
//! assignor and members (subscriptions, current and target assignments). A classic group or
//! an unknown one is GROUP_ID_NOT_FOUND with Kafka's message.
//!
//! Version notes: v1 adds the member type (1 = consumer protocol).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};

use super::Groups;
use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::group::consumer;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ConsumerGroupDescribe,
    min: 0,
    max: 1,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

fn assignment(b: &Groups, a: &consumer::Assignment) -> Assignment {
    let mut out = Assignment::default();
    for (id, ps) in a {
        if ps.is_empty() {
            continue;
        }
        let mut tp = TopicPartitions::default();
        tp.topic_id = *id;
        if let Some(t) = b.controller.topic_by_id(id) {
            tp.topic_name = TopicName(sb(t.name.to_string()));
        }
        tp.partitions = ps.iter().copied().collect();
        out.topic_partitions.push(tp);
    }
    out
}

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ConsumerGroupDescribeRequest = super::decode(&ctx, body)?;
    let mut resp = ConsumerGroupDescribeResponse::default();
    for id in req.group_ids {
        let mut d = DescribedGroup::default();
        d.group_id = id.clone();
        d.authorized_operations = super::authz::OPS_NOT_REQUESTED;
        if let Some(code) = ctx.group_error(&b, super::authz::Op::Describe, &id) {
            d.error_code = code;
            resp.groups.push(d);
            continue;
        }
        match b.groups.consumer_describe(id.0.as_str()).await {
            Ok(g) => {
                d.group_state = sb(g.state().name().to_string());
                d.group_epoch = g.group_epoch;
                d.assignment_epoch = g.assignment_epoch;
                d.assignor_name = sb(g.assignor.clone().unwrap_or_else(|| {
                    b.groups
                        .config()
                        .consumer
                        .assignors
                        .first()
                        .cloned()
                        .unwrap_or_default()
                }));
                let empty = consumer::Assignment::new();
                for m in g.members.values() {
                    let mut dm = Member::default();
                    dm.member_id = sb(m.id.clone());
                    dm.instance_id = m.instance_id.clone().map(sb);
                    dm.rack_id = m.rack_id.clone().map(sb);
                    dm.member_epoch = m.epoch;
                    dm.client_id = sb(m.client_id.clone());
                    dm.client_host = sb(m.client_host.clone());
                    dm.subscribed_topic_names = m
                        .subscribed_names
                        .iter()
                        .map(|n| TopicName(sb(n.clone())))
                        .collect();
                    dm.subscribed_topic_regex = m.subscribed_regex.clone().map(sb);
                    dm.assignment = assignment(&b, &m.assigned);
                    dm.target_assignment = assignment(&b, g.target.get(&m.id).unwrap_or(&empty));
                    // KIP-1099: 0 = classic protocol, 1 = consumer protocol.
                    dm.member_type = if m.classic.is_some() { 0 } else { 1 };
                    d.members.push(dm);
                }
                d.authorized_operations = ctx.ops_if(
                    &b,
                    req.include_authorized_operations,
                    crate::security::acl::ResourceType::Group,
                    id.0.as_str(),
                );
            }
            Err(e) => {
                d.error_code = e.code;
                d.error_message = e.message.map(sb);
                d.authorized_operations = i32::MIN;
            }
        }
        resp.groups.push(d);
    }
    super::respond(&ctx, &resp)
}
