//! DeleteRecords (key 21), versions 0-2 (Kafka 4.4's range; kafka-protocol decodes the same).
//! kafka-delete-records and the admin clients' `deleteRecords` / `delete_records` send it.
//!
//! Behavior, as Kafka's `ReplicaManager.deleteRecords` and `Partition.deleteRecordsOnLeader`:
//! - Per partition, the leader moves its log start offset up to the requested offset (-1: the
//!   high watermark); records below it are gone for consumers (Fetch from below:
//!   OFFSET_OUT_OF_RANGE, ListOffsets EARLIEST: the new start), and the segments wholly below
//!   it are deleted at once (Kafka leaves that to its next retention check). An offset below
//!   the current start changes nothing.
//! - Errors, per partition, low_watermark -1: a topic the principal may not DELETE
//!   TOPIC_AUTHORIZATION_FAILED (checked first); an unknown topic or partition
//!   UNKNOWN_TOPIC_OR_PARTITION; an internal topic (`__consumer_offsets`,
//!   `__transaction_state`) INVALID_TOPIC_EXCEPTION; a replica that does not lead, or a
//!   partition held elsewhere, NOT_LEADER_OR_FOLLOWER; a topic whose cleanup.policy is
//!   `compact` without `delete` POLICY_VIOLATION; an offset above the high watermark or
//!   negative (other than -1) OFFSET_OUT_OF_RANGE.
//! - The answer's low_watermark is the smallest log start offset over the leader and its
//!   in-sync followers (`LeaderState::low_watermark`). Followers learn the leader's start from
//!   their fetches and report theirs in the next one, so in a cluster the answer waits (Kafka's
//!   DelayedDeleteRecords) until the low watermark reaches the requested offset, for at most
//!   timeout_ms; a partition still short then is REQUEST_TIMED_OUT with the low watermark it
//!   has then. On one node it is answered at once.
//! - The new log starts are written to `log-start-offset-checkpoint` before the answer, so an
//!   acknowledged deletion survives a kill -9 (Kafka only checkpoints every
//!   `log.flush.start.offset.checkpoint.interval.ms`).
//!
//! Version notes: v1 is v0 with throttling on the client side (KIP-219); v2 is flexible
//! (KIP-482).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};
use tokio::time::Instant;

use super::Base;
use super::{ApiSpec, RequestCtx};
use crate::cluster::topic_config::is_compact_only;
use crate::cluster::{Partition, TopicInfo};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::DeleteRecords,
    min: 0,
    max: 2,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

/// A partition whose log start moved here, waiting for its low watermark.
struct Pending {
    topic: usize,
    partition: usize,
    replica: Arc<Partition>,
    required: i64,
}

/// The checks before the leader's deletion: the partition's replica here, or the error code.
fn replica(b: &Base, topic: Option<&Arc<TopicInfo>>, index: i32) -> Result<Arc<Partition>, i16> {
    let Some(t) = topic else {
        return Err(ResponseError::UnknownTopicOrPartition.code());
    };
    if !t.has_partition(index) {
        return Err(ResponseError::UnknownTopicOrPartition.code());
    }
    if t.internal {
        return Err(ResponseError::InvalidTopicException.code());
    }
    let p = super::local_partition(t, index)?;
    if !p.is_leader() {
        return Err(ResponseError::NotLeaderOrFollower.code());
    }
    if is_compact_only(&b.config, &t.configs) {
        return Err(ResponseError::PolicyViolation.code());
    }
    Ok(p.clone())
}

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: DeleteRecordsRequest = super::decode(&ctx, body)?;
    let deadline = Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut resp = DeleteRecordsResponse::default();
    let mut wanted = Vec::new();
    for rt in req.topics {
        let refused = ctx.topic_error(&b, super::authz::Op::Delete, rt.name.0.as_str());
        let topic = b.controller.topic(rt.name.0.as_str());
        let mut tr = DeleteRecordsTopicResult::default();
        tr.name = rt.name;
        for rp in rt.partitions {
            let mut pr = DeleteRecordsPartitionResult::default();
            pr.partition_index = rp.partition_index;
            pr.low_watermark = -1;
            let checked = match refused {
                Some(code) => Err(code),
                None => replica(&b, topic.as_ref(), rp.partition_index),
            };
            match checked {
                Err(code) => pr.error_code = code,
                Ok(p) => wanted.push((resp.topics.len(), tr.partitions.len(), p, rp.offset)),
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    if wanted.is_empty() {
        return super::respond(&ctx, &resp);
    }

    // The deletions and the checkpoint touch files: off the async threads.
    let b2 = b.clone();
    let (done, checkpointed) = tokio::task::spawn_blocking(move || {
        let done: Vec<_> = wanted
            .into_iter()
            .map(|(topic, partition, p, offset)| {
                let r = p.delete_records_on_leader(offset);
                (topic, partition, p, r)
            })
            .collect();
        let checkpointed = b2
            .controller
            .checkpoints
            .write_log_starts(&b2.controller.topics());
        (done, checkpointed)
    })
    .await?;

    let mut pending = Vec::new();
    for (topic, partition, replica, r) in done {
        let pr = &mut resp.topics[topic].partitions[partition];
        match r {
            Err(e) => pr.error_code = super::errors::partition_error_code(&e),
            Ok(_) if checkpointed.is_err() => {
                pr.error_code = ResponseError::KafkaStorageError.code()
            }
            Ok(required) => pending.push(Pending {
                topic,
                partition,
                replica,
                required,
            }),
        }
    }
    for w in pending {
        let pr = &mut resp.topics[w.topic].partitions[w.partition];
        let remaining = deadline.saturating_duration_since(Instant::now());
        match w
            .replica
            .wait_for_low_watermark(w.required, remaining)
            .await
        {
            Ok(Some(lw)) => pr.low_watermark = lw,
            Ok(None) => {
                pr.error_code = ResponseError::RequestTimedOut.code();
                pr.low_watermark = w.replica.low_watermark().unwrap_or(-1);
            }
            Err(e) => pr.error_code = super::errors::partition_error_code(&e),
        }
    }
    super::respond(&ctx, &resp)
}
