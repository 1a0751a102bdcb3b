//! OffsetFetch (key 9), versions 1-9: committed offsets of a group (v8+: of several groups).
//!
//! A null topic list (v2+) asks for every committed offset of the group. Partitions without a
//! committed offset answer -1 with empty metadata; v5+ return the committed leader epoch.
//! v7+ `require_stable`: a partition with an offset pending in an open transaction answers
//! UNSTABLE_OFFSET_COMMIT (and -1) until the transaction ends, as Kafka's coordinator does.
//!
//! v10 (Kafka 4.4: topics by id) is not served: kafka-protocol 0.18 does not decode it.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::Groups;
use super::authz::Op;
use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::group::coordinator::FetchedOffset;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::OffsetFetch,
    min: 1,
    max: 9,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: OffsetFetchRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let stable = v >= 7 && req.require_stable;
    let mut resp = OffsetFetchResponse::default();
    if v < 8 {
        let topics: Option<Vec<(String, Vec<i32>)>> = req.topics.map(|ts| {
            ts.into_iter()
                .map(|t| (t.name.0.to_string(), t.partition_indexes))
                .collect()
        });
        let result = match ctx.group_error(&b, Op::Describe, &req.group_id) {
            Some(code) => Err(code),
            None => {
                b.groups
                    .fetch_offsets(req.group_id.0.as_str(), topics.clone(), stable)
                    .await
            }
        };
        match result {
            Ok(found) => {
                resp.topics = visible(&b, &ctx, topics.is_some(), found)
                    .into_iter()
                    .map(|(name, parts)| {
                        let mut t = OffsetFetchResponseTopic::default();
                        t.name = TopicName(sb(name));
                        t.partitions = parts.into_iter().map(|o| partition_v0(o, v)).collect();
                        t
                    })
                    .collect();
            }
            Err(code) if v >= 2 => resp.error_code = code,
            // v1 has no group error: each partition asked for carries it.
            Err(code) => {
                resp.topics = topics
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, parts)| {
                        let mut t = OffsetFetchResponseTopic::default();
                        t.name = TopicName(sb(name));
                        t.partitions = parts
                            .into_iter()
                            .map(|i| {
                                let mut p = OffsetFetchResponsePartition::default();
                                p.partition_index = i;
                                p.committed_offset = -1;
                                p.metadata = Some(sb(String::new()));
                                p.error_code = code;
                                p
                            })
                            .collect();
                        t
                    })
                    .collect();
            }
        }
        return super::respond(&ctx, &resp);
    }
    for rg in req.groups {
        let mut g = OffsetFetchResponseGroup::default();
        g.group_id = rg.group_id.clone();
        let topics: Option<Vec<(String, Vec<i32>)>> = rg.topics.map(|ts| {
            ts.into_iter()
                .map(|t| (t.name.0.to_string(), t.partition_indexes))
                .collect()
        });
        let asked = topics.is_some();
        let result = match ctx.group_error(&b, Op::Describe, &rg.group_id) {
            Some(code) => Err(code),
            None => {
                b.groups
                    .fetch_offsets_as(
                        rg.group_id.0.as_str(),
                        topics,
                        stable,
                        rg.member_id.as_deref(),
                        rg.member_epoch,
                    )
                    .await
            }
        };
        match result {
            Ok(found) => {
                g.topics = visible(&b, &ctx, asked, found)
                    .into_iter()
                    .map(|(name, parts)| {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.name = TopicName(sb(name));
                        t.partitions = parts.into_iter().map(partition_v8).collect();
                        t
                    })
                    .collect();
            }
            Err(code) => g.error_code = code,
        }
        resp.groups.push(g);
    }
    super::respond(&ctx, &resp)
}

/// The offsets of topics the caller may describe; those of the others are dropped from a
/// listing of every topic, or answered TOPIC_AUTHORIZATION_FAILED when `asked` for by name.
fn visible(
    b: &Groups,
    ctx: &RequestCtx,
    asked: bool,
    found: Vec<(String, Vec<FetchedOffset>)>,
) -> Vec<(String, Vec<FetchedOffset>)> {
    found
        .into_iter()
        .filter_map(|(name, mut parts)| {
            if ctx.may_topic(b, Op::Describe, &name) {
                return Some((name, parts));
            }
            if !asked {
                return None;
            }
            for p in &mut parts {
                p.offset = -1;
                p.leader_epoch = -1;
                p.metadata = String::new();
                p.error = super::authz::topic_denied();
            }
            Some((name, parts))
        })
        .collect()
}

fn partition_v0(o: FetchedOffset, v: i16) -> OffsetFetchResponsePartition {
    let mut p = OffsetFetchResponsePartition::default();
    p.partition_index = o.partition;
    p.committed_offset = o.offset;
    if v >= 5 {
        p.committed_leader_epoch = o.leader_epoch;
    }
    p.metadata = Some(sb(o.metadata));
    p.error_code = o.error;
    p
}

fn partition_v8(o: FetchedOffset) -> OffsetFetchResponsePartitions {
    let mut p = OffsetFetchResponsePartitions::default();
    p.partition_index = o.partition;
    p.committed_offset = o.offset;
    p.committed_leader_epoch = o.leader_epoch;
    p.metadata = Some(sb(o.metadata));
    p.error_code = o.error;
    p
}
