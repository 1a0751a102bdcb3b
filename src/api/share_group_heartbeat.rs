//! ShareGroupHeartbeat (key 76), version 1 (KIP-932): a share group member joins (epoch 0,
//! with its subscription), heartbeats (its epoch), or leaves (epoch -1); the answer carries
//! its epoch, the heartbeat interval (`group.share.heartbeat.interval.ms`) and, when it
//! changed, its assignment. Members send their own member id (a UUID). A group id in use by
//! a classic group is GROUP_ID_NOT_FOUND ("Group g is not a share group."), as Kafka answers.
//! Without READ on the group: GROUP_AUTHORIZATION_FAILED; a subscription naming a topic the
//! member may not DESCRIBE: TOPIC_AUTHORIZATION_FAILED (Kafka's checks, in that order).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ApiKey, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use super::Groups;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::share::assignor::TopicMeta;
use crate::share::group::Heartbeat;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ShareGroupHeartbeat,
    min: 1,
    max: 1,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

fn refuse(code: i16, message: Option<String>) -> ShareGroupHeartbeatResponse {
    let mut resp = ShareGroupHeartbeatResponse::default();
    resp.error_code = code;
    resp.error_message = message.map(StrBytes::from_string);
    resp.member_epoch = 0;
    resp
}

/// The answer to `req`, or Kafka's error.
async fn answer(
    b: &Groups,
    ctx: &RequestCtx,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let group_id = req.group_id.0.to_string();
    if let Some(code) = ctx.group_error(b, super::authz::Op::Read, &group_id) {
        return refuse(code, None);
    }
    // A member may only subscribe to topics it may describe.
    let subscribed = req.subscribed_topic_names.iter().flatten();
    if subscribed
        .into_iter()
        .any(|t| !ctx.may_topic(b, super::authz::Op::Describe, t.0.as_str()))
    {
        return refuse(super::authz::topic_denied(), None);
    }
    if let Err(code) = b.groups.serves(&group_id) {
        return refuse(code, None);
    }
    if !group_id.is_empty()
        && !b.share.exists(&group_id)
        && let Ok(Some(_)) = b.groups.describe(&group_id).await
    {
        return refuse(
            ResponseError::GroupIdNotFound.code(),
            Some(format!("Group {group_id} is not a share group.")),
        );
    }
    let hb = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.map(|r| r.to_string()),
        subscribed: req
            .subscribed_topic_names
            .map(|ts| ts.into_iter().map(|t| t.0.to_string()).collect()),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
    };
    let lookup = |name: &str| {
        b.controller
            .topic(name)
            .filter(|t| !t.internal)
            .map(|t| TopicMeta {
                name: name.to_string(),
                id: t.id,
                partitions: t.partition_count as i32,
            })
    };
    match b.share.heartbeat(&group_id, hb, &lookup) {
        Err((code, message)) => refuse(code, Some(message)),
        Ok(a) => {
            let mut resp = ShareGroupHeartbeatResponse::default();
            resp.member_id = Some(StrBytes::from_string(a.member_id));
            resp.member_epoch = a.member_epoch;
            resp.heartbeat_interval_ms = b.share.config().heartbeat_interval_ms(&group_id);
            resp.assignment = a.assignment.map(|topics| {
                let mut asg = Assignment::default();
                for (id, partitions) in topics {
                    let mut tp = TopicPartitions::default();
                    tp.topic_id = id;
                    tp.partitions = partitions;
                    asg.topic_partitions.push(tp);
                }
                asg
            });
            resp
        }
    }
}

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ShareGroupHeartbeatRequest = super::decode(&ctx, body)?;
    let resp = answer(&b, &ctx, req).await;
    super::respond(&ctx, &resp)
}
