//! OffsetFetch (key 9), versions 1-9 (v10, Kafka 4.4's topic-id fetch, is beyond what kafka-protocol 0.18 decodes): committed offsets of a group (v8+: of several groups).
//! A null topic list (v2+) asks for every committed offset of the group. Partitions without a
//! committed offset answer -1 with empty metadata; v5+ return the committed leader epoch;
//! v10 names topics by id.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use uuid::Uuid;

use super::{ApiSpec, RequestCtx, group_util::sb};
use crate::broker::Broker;
use crate::group::coordinator::FetchedOffset;
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::OffsetFetch,
    min: 1,
    max: 9,
    handle: |b, ctx, body| Box::pin(handle(b, ctx, body)),
};

async fn handle(b: Arc<Broker>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: OffsetFetchRequest = super::decode(&ctx, body)?;
    let v = ctx.version;
    let mut resp = OffsetFetchResponse::default();
    if v < 8 {
        let topics = req.topics.map(|ts| {
            ts.into_iter()
                .map(|t| (t.name.0.to_string(), t.partition_indexes))
                .collect()
        });
        match b
            .groups
            .fetch_offsets(req.group_id.0.as_str(), topics)
            .await
        {
            Ok(found) => {
                resp.topics = found
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
            Err(_) => {}
        }
        return super::respond(&ctx, &resp);
    }
    for rg in req.groups {
        let mut g = OffsetFetchResponseGroup::default();
        g.group_id = rg.group_id.clone();
        // v10 names topics by id: resolve them, remembering ids that are unknown.
        let mut unknown_ids: Vec<(Uuid, Vec<i32>)> = Vec::new();
        let mut ids: std::collections::HashMap<String, Uuid> = Default::default();
        let topics = rg.topics.map(|ts| {
            let mut out = Vec::new();
            for t in ts {
                if v >= 10 {
                    match b.controller.topic_by_id(&t.topic_id) {
                        Some(info) => {
                            ids.insert(info.name.to_string(), t.topic_id);
                            out.push((info.name.to_string(), t.partition_indexes));
                        }
                        None => unknown_ids.push((t.topic_id, t.partition_indexes)),
                    }
                } else {
                    out.push((t.name.0.to_string(), t.partition_indexes));
                }
            }
            out
        });
        match b.groups.fetch_offsets(rg.group_id.0.as_str(), topics).await {
            Ok(found) => {
                for (name, parts) in found {
                    let mut t = OffsetFetchResponseTopics::default();
                    if v >= 10 {
                        t.topic_id = ids.get(&name).copied().unwrap_or_else(|| {
                            b.controller.topic(&name).map(|i| i.id).unwrap_or_default()
                        });
                    } else {
                        t.name = TopicName(sb(name));
                    }
                    t.partitions = parts.into_iter().map(partition_v8).collect();
                    g.topics.push(t);
                }
                for (id, parts) in unknown_ids {
                    let mut t = OffsetFetchResponseTopics::default();
                    t.topic_id = id;
                    t.partitions = parts
                        .into_iter()
                        .map(|p| {
                            let mut rp = OffsetFetchResponsePartitions::default();
                            rp.partition_index = p;
                            rp.committed_offset = -1;
                            rp.committed_leader_epoch = -1;
                            rp.metadata = Some(sb(String::new()));
                            rp.error_code = ResponseError::UnknownTopicId.code();
                            rp
                        })
                        .collect();
                    g.topics.push(t);
                }
            }
            Err(code) => g.error_code = code,
        }
        resp.groups.push(g);
    }
    super::respond(&ctx, &resp)
}

fn partition_v0(o: FetchedOffset, v: i16) -> OffsetFetchResponsePartition {
    let mut p = OffsetFetchResponsePartition::default();
    p.partition_index = o.partition;
    p.committed_offset = o.offset;
    if v >= 5 {
        p.committed_leader_epoch = o.leader_epoch;
    }
    p.metadata = Some(sb(o.metadata));
    p
}

fn partition_v8(o: FetchedOffset) -> OffsetFetchResponsePartitions {
    let mut p = OffsetFetchResponsePartitions::default();
    p.partition_index = o.partition;
    p.committed_offset = o.offset;
    p.committed_leader_epoch = o.leader_epoch;
    p.metadata = Some(sb(o.metadata));
    p
}
