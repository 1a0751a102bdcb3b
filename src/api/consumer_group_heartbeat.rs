//! ConsumerGroupHeartbeat (key 68), versions 0-1: a member of a KIP-848 consumer group joins
//! (epoch 0), heartbeats with its epoch and the partitions it owns, and leaves (-1, or -2 for
//! a static member's temporary leave); the answer carries its epoch, the heartbeat interval
//! and, when it changed, its assignment. The decisions are `group::consumer`'s.
//!
//! Authorization (Kafka's `KafkaApis`): READ on the group, else GROUP_AUTHORIZATION_FAILED;
//! then DESCRIBE on every subscribed topic name, else TOPIC_AUTHORIZATION_FAILED (KIP-848
//! members must not learn of topics they may not describe). Both refuse the whole request.
//!
//! Version notes: v1 (KIP-1082) has the client choose its member id (epoch 0 with an empty
//! member id is INVALID_REQUEST); v0 gets one from the coordinator.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};

use super::Groups;
use super::authz::{self, Op};
use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::group::consumer::heartbeat::Request;
use crate::group::consumer::{self, TopicMeta, Topics};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ConsumerGroupHeartbeat,
    min: 0,
    max: 1,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// The cluster's topics as the consumer group assignment sees them.
pub fn topics(replicas: &crate::cluster::Controller) -> Topics {
    replicas
        .topics()
        .into_iter()
        .map(|t| {
            (
                t.name.to_string(),
                TopicMeta {
                    id: t.id,
                    partitions: t.partition_count as i32,
                    internal: t.internal,
                },
            )
        })
        .collect()
}

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ConsumerGroupHeartbeatRequest = super::decode(&ctx, body)?;
    let owned = req.topic_partitions.as_ref().map(|tps| {
        let mut a = consumer::Assignment::new();
        for tp in tps {
            a.entry(tp.topic_id)
                .or_default()
                .extend(tp.partitions.iter().copied());
        }
        a
    });
    let r = Request {
        version: ctx.version,
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ns| ns.iter().map(|n| n.0.to_string()).collect()),
        subscribed_regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned,
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
    };
    let topics = topics(&b.controller);
    let mut resp = ConsumerGroupHeartbeatResponse::default();
    let group = req.group_id.0.as_str();
    let mut subscribed = req.subscribed_topic_names.iter().flatten();
    let refused = ctx
        .group_error(&b, Op::Read, group)
        .map(|code| (code, "Group authorization failed."))
        .or_else(|| {
            subscribed
                .any(|n| !ctx.may_topic(&b, Op::Describe, n.0.as_str()))
                .then(|| (authz::topic_denied(), "Topic authorization failed."))
        });
    if let Some((code, message)) = refused {
        resp.error_code = code;
        resp.error_message = Some(sb(message.to_string()));
        return super::respond(&ctx, &resp);
    }
    // A share group's id is not a consumer group's, as Kafka answers.
    if b.share.exists(req.group_id.0.as_str()) {
        resp.error_code = kafka_protocol::ResponseError::GroupIdNotFound.code();
        resp.error_message = Some(sb(format!(
            "Group {} is not a consumer group.",
            req.group_id.0.as_str()
        )));
        return super::respond(&ctx, &resp);
    }
    match b
        .groups
        .consumer_heartbeat(req.group_id.0.as_str(), r, &topics)
        .await
    {
        Ok(a) => {
            resp.member_id = Some(sb(a.member_id));
            resp.member_epoch = a.member_epoch;
            resp.heartbeat_interval_ms = a.heartbeat_interval_ms;
            resp.assignment = a.assignment.map(|asg| {
                let mut out = Assignment::default();
                for (topic_id, ps) in asg {
                    if ps.is_empty() {
                        continue;
                    }
                    let mut tp = TopicPartitions::default();
                    tp.topic_id = topic_id;
                    tp.partitions = ps.into_iter().collect();
                    out.topic_partitions.push(tp);
                }
                out
            });
        }
        Err(e) => {
            resp.error_code = e.code;
            resp.error_message = e.message.map(sb);
            resp.member_epoch = -1;
        }
    }
    super::respond(&ctx, &resp)
}
