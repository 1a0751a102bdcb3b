//! ListPartitionReassignments (key 46), version 0 (`kafka-reassign-partitions --verify`,
//! `--list`).
//!
//! Behavior: the partitions with a reassignment in progress (non-empty adding or removing
//! replicas in the metadata image), with their full replica set and the replicas being added
//! and removed. Null topics lists every such partition; otherwise the named partitions that
//! have one, and unknown topics and partitions are left out, as Kafka's controller does. On
//! one node no reassignment can be in progress: the list is empty. Without DESCRIBE on the
//! cluster: CLUSTER_AUTHORIZATION_FAILED and no topics.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::metadata::{PartitionRecord, TopicImage};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::ListPartitionReassignments,
    min: 0,
    max: 0,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().map(|b| BrokerId(*b)).collect()
}

fn ongoing(p: &PartitionRecord) -> Option<OngoingPartitionReassignment> {
    if p.adding.is_empty() && p.removing.is_empty() {
        return None;
    }
    let mut o = OngoingPartitionReassignment::default();
    o.partition_index = p.partition;
    o.replicas = ids(&p.replicas);
    o.adding_replicas = ids(&p.adding);
    o.removing_replicas = ids(&p.removing);
    Some(o)
}

fn topic_entry<'a>(
    t: &TopicImage,
    partitions: impl Iterator<Item = &'a PartitionRecord>,
) -> Option<OngoingTopicReassignment> {
    let parts: Vec<_> = partitions.filter_map(ongoing).collect();
    if parts.is_empty() {
        return None;
    }
    let mut e = OngoingTopicReassignment::default();
    e.name = TopicName(StrBytes::from_string(t.name.to_string()));
    e.partitions = parts;
    Some(e)
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: ListPartitionReassignmentsRequest = super::decode(&ctx, body)?;
    let mut resp = ListPartitionReassignmentsResponse::default();
    resp.error_message = None;
    if let Some(code) = ctx.cluster_error(&b, super::authz::Op::Describe) {
        resp.error_code = code;
        resp.error_message = Some(StrBytes::from_static_str(
            super::authz::CLUSTER_DENIED_MESSAGE,
        ));
        return super::respond(&ctx, &resp);
    }
    let c = b.node();
    let img = c.image();
    resp.topics = match &req.topics {
        None => {
            let mut topics: Vec<&Arc<TopicImage>> = img.topics.values().collect();
            topics.sort_by(|a, b| a.name.cmp(&b.name));
            topics
                .into_iter()
                .filter_map(|t| topic_entry(t, t.partitions.iter()))
                .collect()
        }
        Some(wanted) => wanted
            .iter()
            .filter_map(|w| {
                let t = img.topic(w.name.0.as_str())?;
                let parts = w
                    .partition_indexes
                    .iter()
                    .filter_map(|p| img.partition(&t.id, *p));
                topic_entry(t, parts)
            })
            .collect(),
    };
    super::respond(&ctx, &resp)
}
