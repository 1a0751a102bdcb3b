//! The share group offset admin APIs (KIP-932), version 0 each (what kafka-protocol 0.18
//! decodes; Kafka 4.4 serves DescribeShareGroupOffsets 0-1, v1 adding the lag):
//! - DescribeShareGroupOffsets (key 90): each share partition's start offset (SPSO), -1 for a
//!   partition the group has not fetched; all of the group's share partitions when no topics
//!   are named. GROUP_ID_NOT_FOUND ("Group g not found.") for no share group.
//! - AlterShareGroupOffsets (key 91): the named share partitions start again at the given
//!   offsets, in-flight records forgotten; only while the group has no members
//!   (NON_EMPTY_GROUP).
//! - DeleteShareGroupOffsets (key 92): the named topics' share partitions are forgotten (the
//!   next fetch starts them at `share.auto.offset.reset`); only while the group is empty.
//!
//! Authorization, as Kafka's: Describe needs DESCRIBE on the group (else the group's
//! GROUP_AUTHORIZATION_FAILED) and on each topic (else its partitions'
//! TOPIC_AUTHORIZATION_FAILED; unnamed topics the caller may not describe are left out);
//! Alter needs READ on the group (top-level error) and READ on each topic (its partitions'
//! error); Delete needs DELETE on the group (top-level) and READ on each topic (the topic's).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ApiKey,
    DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Groups;
use super::authz::Op;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const DESCRIBE: ApiSpec = ApiSpec {
    key: ApiKey::DescribeShareGroupOffsets,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(describe(b, ctx, body))),
};

pub const ALTER: ApiSpec = ApiSpec {
    key: ApiKey::AlterShareGroupOffsets,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(alter(b, ctx, body))),
};

pub const DELETE: ApiSpec = ApiSpec {
    key: ApiKey::DeleteShareGroupOffsets,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(delete(b, ctx, body))),
};

fn not_found(group_id: &str) -> (i16, Option<StrBytes>) {
    (
        ResponseError::GroupIdNotFound.code(),
        Some(StrBytes::from_string(format!(
            "Group {group_id} not found."
        ))),
    )
}

/// The group is a share group coordinated here: its error and message otherwise.
fn share_group(b: &Groups, id: &str) -> Result<(), (i16, Option<StrBytes>)> {
    b.groups.serves(id).map_err(|code| (code, None))?;
    match b.share.start_offsets(id) {
        Some(_) => Ok(()),
        None => Err(not_found(id)),
    }
}

fn partition_out(
    b: &Groups,
    topic: &str,
    partition: i32,
    start: i64,
) -> DescribeShareGroupOffsetsResponsePartition {
    let mut p = DescribeShareGroupOffsetsResponsePartition::default();
    p.partition_index = partition;
    p.start_offset = start;
    p.leader_epoch = b
        .controller
        .topic(topic)
        .and_then(|t| t.partition(partition).map(|x| x.leader_epoch()))
        .unwrap_or(-1);
    p
}

async fn describe(
    b: Arc<Groups>,
    ctx: RequestCtx,
    body: Bytes,
) -> anyhow::Result<Option<Response>> {
    let req: DescribeShareGroupOffsetsRequest = super::decode(&ctx, body)?;
    let mut resp = DescribeShareGroupOffsetsResponse::default();
    for g in req.groups {
        let id = g.group_id.0.to_string();
        let mut out = DescribeShareGroupOffsetsResponseGroup::default();
        out.group_id = g.group_id;
        if let Some(code) = ctx.group_error(&b, Op::Describe, &id) {
            out.error_code = code;
            resp.groups.push(out);
            continue;
        }
        if let Err(code) = b.groups.serves(&id) {
            out.error_code = code;
            resp.groups.push(out);
            continue;
        }
        let Some(starts) = b.share.start_offsets(&id) else {
            (out.error_code, out.error_message) = not_found(&id);
            resp.groups.push(out);
            continue;
        };
        let named: Vec<(String, Vec<i32>)> = match g.topics {
            Some(ts) => ts
                .into_iter()
                .map(|t| (t.topic_name.0.to_string(), t.partitions))
                .collect(),
            None => {
                let mut by_topic: Vec<(String, Vec<i32>)> = Vec::new();
                for (tid, p, _) in &starts {
                    let Some(t) = b.controller.topic_by_id(tid) else {
                        continue;
                    };
                    // All of the group's partitions: those of the topics the caller may see.
                    if !ctx.may_topic(&b, Op::Describe, &t.name) {
                        continue;
                    }
                    match by_topic.iter_mut().find(|(n, _)| **n == *t.name) {
                        Some((_, ps)) => ps.push(*p),
                        None => by_topic.push((t.name.to_string(), vec![*p])),
                    }
                }
                by_topic
            }
        };
        for (name, partitions) in named {
            let mut t = DescribeShareGroupOffsetsResponseTopic::default();
            t.topic_name = TopicName(StrBytes::from_string(name.clone()));
            let info = b.controller.topic(&name);
            t.topic_id = info.as_ref().map(|i| i.id).unwrap_or_default();
            if !ctx.may_topic(&b, Op::Describe, &name) {
                t.topic_id = Default::default();
                for p in partitions {
                    let mut po = partition_out(&b, &name, p, -1);
                    po.leader_epoch = -1;
                    po.error_code = super::authz::topic_denied();
                    t.partitions.push(po);
                }
                out.topics.push(t);
                continue;
            }
            for p in partitions {
                let mut po = match &info {
                    Some(i) => {
                        let start = starts
                            .iter()
                            .find(|(tid, pi, _)| *tid == i.id && *pi == p)
                            .map_or(-1, |s| s.2);
                        partition_out(&b, &name, p, start)
                    }
                    None => {
                        let mut po = partition_out(&b, &name, p, -1);
                        po.error_code = ResponseError::UnknownTopicOrPartition.code();
                        po
                    }
                };
                if info
                    .as_ref()
                    .is_some_and(|i| p < 0 || p as usize >= i.partition_count)
                {
                    po.error_code = ResponseError::UnknownTopicOrPartition.code();
                }
                t.partitions.push(po);
            }
            out.topics.push(t);
        }
        resp.groups.push(out);
    }
    super::respond(&ctx, &resp)
}

async fn alter(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: AlterShareGroupOffsetsRequest = super::decode(&ctx, body)?;
    let id = req.group_id.0.to_string();
    let mut resp = AlterShareGroupOffsetsResponse::default();
    if let Some(code) = ctx.group_error(&b, Op::Read, &id) {
        resp.error_code = code;
        return super::respond(&ctx, &resp);
    }
    if let Err(e) = share_group(&b, &id) {
        (resp.error_code, resp.error_message) = e;
        return super::respond(&ctx, &resp);
    }
    for t in req.topics {
        let info = b.controller.topic(t.topic_name.0.as_str());
        let mut out = AlterShareGroupOffsetsResponseTopic::default();
        out.topic_id = info.as_ref().map(|i| i.id).unwrap_or_default();
        let denied = !ctx.may_topic(&b, Op::Read, t.topic_name.0.as_str());
        out.topic_name = t.topic_name;
        for p in t.partitions {
            let mut po = AlterShareGroupOffsetsResponsePartition::default();
            po.partition_index = p.partition_index;
            po.error_code = match &info {
                _ if denied => super::authz::topic_denied(),
                Some(i)
                    if p.partition_index >= 0
                        && (p.partition_index as usize) < i.partition_count =>
                {
                    b.share
                        .reset(&id, (i.id, p.partition_index), Some(p.start_offset.max(0)))
                }
                _ => ResponseError::UnknownTopicOrPartition.code(),
            };
            if po.error_code == ResponseError::NonEmptyGroup.code() {
                resp.error_code = po.error_code;
            }
            out.partitions.push(po);
        }
        resp.responses.push(out);
    }
    b.share.persist().await;
    super::respond(&ctx, &resp)
}

async fn delete(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DeleteShareGroupOffsetsRequest = super::decode(&ctx, body)?;
    let id = req.group_id.0.to_string();
    let mut resp = DeleteShareGroupOffsetsResponse::default();
    if let Some(code) = ctx.group_error(&b, Op::Delete, &id) {
        resp.error_code = code;
        return super::respond(&ctx, &resp);
    }
    if let Err(e) = share_group(&b, &id) {
        (resp.error_code, resp.error_message) = e;
        return super::respond(&ctx, &resp);
    }
    for t in req.topics {
        let info = b.controller.topic(t.topic_name.0.as_str());
        let mut out = DeleteShareGroupOffsetsResponseTopic::default();
        out.topic_id = info.as_ref().map(|i| i.id).unwrap_or_default();
        let denied = !ctx.may_topic(&b, Op::Read, t.topic_name.0.as_str());
        out.topic_name = t.topic_name;
        match &info {
            _ if denied => out.error_code = super::authz::topic_denied(),
            None => out.error_code = ResponseError::UnknownTopicOrPartition.code(),
            Some(i) => {
                for p in 0..i.partition_count as i32 {
                    let code = b.share.reset(&id, (i.id, p), None);
                    if code != 0 {
                        out.error_code = code;
                    }
                }
            }
        }
        if out.error_code == ResponseError::NonEmptyGroup.code() {
            resp.error_code = out.error_code;
        }
        resp.responses.push(out);
    }
    b.share.persist().await;
    super::respond(&ctx, &resp)
}
