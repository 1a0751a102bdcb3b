//! The share-state APIs (KIP-932's persister to share coordinator), version 0 each (what
//! kafka-protocol 0.18 decodes): a broker's share partitions keep their state through them
//! in `__share_group_state` (`share::state`), the share partitions of this broker through
//! the same code directly.
//! - InitializeShareGroupState (key 83): a share partition starts at a state epoch and start
//!   offset, with no state batches (FENCED_STATE_EPOCH below the recorded state epoch).
//! - ReadShareGroupState (key 84): state epoch, start offset and state batches; a newer
//!   leader epoch is recorded (FENCED_LEADER_EPOCH for an older one).
//! - WriteShareGroupState (key 85): a new start offset (-1: unchanged) and state batches
//!   over the recorded ones (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH).
//! - DeleteShareGroupState (key 86): the state goes (a tombstone).
//! - ReadShareGroupStateSummary (key 87): state epoch, leader epoch and start offset.
//!
//! Behaviour as Kafka's share coordinator: an empty group id or no topics is answered with no
//! results; an uninitialized share partition refuses reads and writes (INVALID_REQUEST); a
//! topic id or partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION; a share
//! partition whose `__share_group_state` partition another broker leads is NOT_COORDINATOR.
//! Brokers call them: without CLUSTER_ACTION on the cluster every partition named is
//! CLUSTER_AUTHORIZATION_FAILED.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError as E;
use kafka_protocol::messages::{
    ApiKey, DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest, ReadShareGroupStateResponse, ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse, WriteShareGroupStateRequest, WriteShareGroupStateResponse,
    delete_share_group_state_response as del, initialize_share_group_state_response as init,
    read_share_group_state_response as read, read_share_group_state_summary_response as summary,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::Groups;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;
use crate::share::state::records::{Batch, Key};
use crate::share::state::{Refusal, Write};

pub const INITIALIZE: ApiSpec = ApiSpec {
    key: ApiKey::InitializeShareGroupState,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(initialize(b, ctx, body))),
};

pub const READ: ApiSpec = ApiSpec {
    key: ApiKey::ReadShareGroupState,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(read_state(b, ctx, body))),
};

pub const WRITE: ApiSpec = ApiSpec {
    key: ApiKey::WriteShareGroupState,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(write(b, ctx, body))),
};

pub const DELETE: ApiSpec = ApiSpec {
    key: ApiKey::DeleteShareGroupState,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(delete(b, ctx, body))),
};

pub const SUMMARY: ApiSpec = ApiSpec {
    key: ApiKey::ReadShareGroupStateSummary,
    min: 0,
    max: 0,
    handle: super::Handler::Groups(|b, ctx, body| Box::pin(read_summary(b, ctx, body))),
};

/// Kafka's default message for an error answered without one of its own.
fn message_of(r: &Refusal) -> Option<StrBytes> {
    let text = if !r.message.is_empty() {
        r.message.as_str()
    } else if r.code == E::NotCoordinator.code() {
        "This is not the correct coordinator."
    } else if r.code == E::CoordinatorLoadInProgress.code() {
        "The coordinator is loading and hence can't process requests."
    } else if r.code == E::CoordinatorNotAvailable.code() {
        "The coordinator is not available."
    } else {
        ""
    };
    Some(StrBytes::from_string(text.to_string()))
}

/// The share partition a request names, or UNKNOWN_TOPIC_OR_PARTITION for a topic id or
/// partition the cluster does not know (a nil topic id or a negative partition is left to
/// the coordinator's own checks).
fn key_of(b: &Groups, group: &str, topic: Uuid, partition: i32) -> Result<Key, Refusal> {
    let key = (group.to_string(), topic, partition);
    if topic.is_nil() || partition < 0 {
        return Ok(key);
    }
    match b.controller.topic_by_id(&topic) {
        Some(t) if (partition as usize) < t.partition_count => Ok(key),
        _ => Err(Refusal {
            code: E::UnknownTopicOrPartition.code(),
            message: "This server does not host this topic-partition.".to_string(),
        }),
    }
}

fn batches_in(list: impl IntoIterator<Item = (i64, i64, i8, i16)>) -> Vec<Batch> {
    list.into_iter()
        .map(
            |(first_offset, last_offset, delivery_state, delivery_count)| Batch {
                first_offset,
                last_offset,
                delivery_state,
                delivery_count,
            },
        )
        .collect()
}

/// Runs `op` on every share partition of `topics` (each named by `index`) that the cluster
/// knows, in order; the outcome by topic and partition. An empty group id is answered with
/// no results, as Kafka does. Without CLUSTER_ACTION on the cluster nothing runs and every
/// named partition is CLUSTER_AUTHORIZATION_FAILED (Kafka's error response).
async fn each<P, O, F, Fut>(
    b: &Groups,
    ctx: &RequestCtx,
    group: &str,
    topics: Vec<(Uuid, Vec<P>)>,
    index: fn(&P) -> i32,
    op: F,
) -> Vec<(Uuid, Vec<(i32, Result<O, Refusal>)>)>
where
    F: Fn(Key, P) -> Fut,
    Fut: std::future::Future<Output = Result<O, Refusal>>,
{
    let mut out = Vec::new();
    if let Some(code) = ctx.cluster_error(b, super::authz::Op::ClusterAction) {
        let refusal = || Refusal {
            code,
            message: super::authz::CLUSTER_DENIED_MESSAGE.to_string(),
        };
        return topics
            .into_iter()
            .map(|(t, ps)| (t, ps.iter().map(|p| (index(p), Err(refusal()))).collect()))
            .collect();
    }
    if group.is_empty() {
        return out;
    }
    for (topic, partitions) in topics {
        let mut results = Vec::with_capacity(partitions.len());
        for p in partitions {
            let i = index(&p);
            let r = match key_of(b, group, topic, i) {
                Ok(key) => op(key, p).await,
                Err(r) => Err(r),
            };
            results.push((i, r));
        }
        out.push((topic, results));
    }
    out
}

/// (error code, error message) of an outcome without data.
fn outcome(r: &Result<(), Refusal>) -> (i16, Option<StrBytes>) {
    match r {
        Ok(()) => (0, None),
        Err(r) => (r.code, message_of(r)),
    }
}

async fn initialize(
    b: Arc<Groups>,
    ctx: RequestCtx,
    body: Bytes,
) -> anyhow::Result<Option<Response>> {
    let req: InitializeShareGroupStateRequest = super::decode(&ctx, body)?;
    let states = &b.share_states;
    let topics = req
        .topics
        .into_iter()
        .map(|t| (t.topic_id, t.partitions))
        .collect();
    let done = each(
        &b,
        &ctx,
        &req.group_id,
        topics,
        |p| p.partition,
        |key, p| async move { states.initialize(&key, p.state_epoch, p.start_offset).await },
    )
    .await;
    let mut resp = InitializeShareGroupStateResponse::default();
    for (topic, results) in done {
        let mut out = init::InitializeStateResult::default();
        out.topic_id = topic;
        for (partition, r) in results {
            let mut po = init::PartitionResult::default();
            po.partition = partition;
            (po.error_code, po.error_message) = outcome(&r);
            out.partitions.push(po);
        }
        resp.results.push(out);
    }
    super::respond(&ctx, &resp)
}

async fn read_state(
    b: Arc<Groups>,
    ctx: RequestCtx,
    body: Bytes,
) -> anyhow::Result<Option<Response>> {
    let req: ReadShareGroupStateRequest = super::decode(&ctx, body)?;
    let states = &b.share_states;
    let topics = req
        .topics
        .into_iter()
        .map(|t| (t.topic_id, t.partitions))
        .collect();
    let done = each(
        &b,
        &ctx,
        &req.group_id,
        topics,
        |p| p.partition,
        |key, p| async move { states.read(&key, p.leader_epoch).await },
    )
    .await;
    let mut resp = ReadShareGroupStateResponse::default();
    for (topic, results) in done {
        let mut out = read::ReadStateResult::default();
        out.topic_id = topic;
        for (partition, r) in results {
            let mut po = read::PartitionResult::default();
            po.partition = partition;
            match r {
                Ok(s) => {
                    po.state_epoch = s.state_epoch;
                    po.start_offset = s.start_offset;
                    po.state_batches = s
                        .batches
                        .iter()
                        .map(|x| {
                            let mut sb = read::StateBatch::default();
                            sb.first_offset = x.first_offset;
                            sb.last_offset = x.last_offset;
                            sb.delivery_state = x.delivery_state;
                            sb.delivery_count = x.delivery_count;
                            sb
                        })
                        .collect();
                }
                Err(r) => {
                    po.error_code = r.code;
                    po.error_message = message_of(&r);
                    po.start_offset = -1;
                }
            }
            out.partitions.push(po);
        }
        resp.results.push(out);
    }
    super::respond(&ctx, &resp)
}

async fn write(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    use kafka_protocol::messages::write_share_group_state_response as wr;
    let req: WriteShareGroupStateRequest = super::decode(&ctx, body)?;
    let states = &b.share_states;
    let topics = req
        .topics
        .into_iter()
        .map(|t| (t.topic_id, t.partitions))
        .collect();
    let done = each(
        &b,
        &ctx,
        &req.group_id,
        topics,
        |p| p.partition,
        |key, p| async move {
            let w = Write {
                state_epoch: p.state_epoch,
                leader_epoch: p.leader_epoch,
                start_offset: p.start_offset,
                batches: batches_in(p.state_batches.iter().map(|x| {
                    (
                        x.first_offset,
                        x.last_offset,
                        x.delivery_state,
                        x.delivery_count,
                    )
                })),
            };
            states.write(&key, &w).await
        },
    )
    .await;
    let mut resp = WriteShareGroupStateResponse::default();
    for (topic, results) in done {
        let mut out = wr::WriteStateResult::default();
        out.topic_id = topic;
        for (partition, r) in results {
            let mut po = wr::PartitionResult::default();
            po.partition = partition;
            (po.error_code, po.error_message) = outcome(&r);
            out.partitions.push(po);
        }
        resp.results.push(out);
    }
    super::respond(&ctx, &resp)
}

async fn delete(b: Arc<Groups>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DeleteShareGroupStateRequest = super::decode(&ctx, body)?;
    let states = &b.share_states;
    let topics = req
        .topics
        .into_iter()
        .map(|t| (t.topic_id, t.partitions))
        .collect();
    let done = each(
        &b,
        &ctx,
        &req.group_id,
        topics,
        |p| p.partition,
        |key, _| async move { states.delete(&key).await },
    )
    .await;
    let mut resp = DeleteShareGroupStateResponse::default();
    for (topic, results) in done {
        let mut out = del::DeleteStateResult::default();
        out.topic_id = topic;
        for (partition, r) in results {
            let mut po = del::PartitionResult::default();
            po.partition = partition;
            (po.error_code, po.error_message) = outcome(&r);
            out.partitions.push(po);
        }
        resp.results.push(out);
    }
    super::respond(&ctx, &resp)
}

async fn read_summary(
    b: Arc<Groups>,
    ctx: RequestCtx,
    body: Bytes,
) -> anyhow::Result<Option<Response>> {
    let req: ReadShareGroupStateSummaryRequest = super::decode(&ctx, body)?;
    let states = &b.share_states;
    let topics = req
        .topics
        .into_iter()
        .map(|t| (t.topic_id, t.partitions))
        .collect();
    let done = each(
        &b,
        &ctx,
        &req.group_id,
        topics,
        |p| p.partition,
        |key, _| async move { states.summary(&key).await },
    )
    .await;
    let mut resp = ReadShareGroupStateSummaryResponse::default();
    for (topic, results) in done {
        let mut out = summary::ReadStateSummaryResult::default();
        out.topic_id = topic;
        for (partition, r) in results {
            let mut po = summary::PartitionResult::default();
            po.partition = partition;
            match r {
                Ok(s) => {
                    po.state_epoch = s.state_epoch;
                    po.leader_epoch = s.leader_epoch;
                    po.start_offset = s.start_offset;
                }
                Err(r) => {
                    po.error_code = r.code;
                    po.error_message = message_of(&r);
                    po.leader_epoch = -1;
                    po.start_offset = -1;
                }
            }
            out.partitions.push(po);
        }
        resp.results.push(out);
    }
    super::respond(&ctx, &resp)
}
