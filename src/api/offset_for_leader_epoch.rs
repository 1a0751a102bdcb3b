//! OffsetForLeaderEpoch (key 23), versions 2-4, as Kafka 4 serves them (v0-1 went in
//! Kafka 4.0, KIP-896).
//!
//! For each partition: the largest leader epoch at or below the one asked for that this log
//! has, and the offset where it ends (the first offset of the next epoch, or the log end
//! offset for the latest epoch); -1 and -1 when the log has no such epoch (Kafka's UNDEFINED,
//! with no error). A follower asks it after a leader change to find where to truncate
//! (KIP-101/279); consumers ask it to check their position after one (KIP-320).
//!
//! Behaviour (Kafka's `ReplicaManager.lastOffsetForLeaderEpoch` and
//! `Partition.lastOffsetForLeaderEpoch`):
//! - an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
//! - current_leader_epoch (-1: no check) below this replica's epoch: FENCED_LEADER_EPOCH,
//!   above it: UNKNOWN_LEADER_EPOCH; checked before leadership;
//! - not the leader: NOT_LEADER_OR_FOLLOWER (only leaders answer, for followers and consumers
//!   alike).
//!
//! Authorization (Kafka's `KafkaApis`): CLUSTER_ACTION on the cluster (a follower) allows every
//! topic; otherwise (a consumer, KIP-320) each topic needs DESCRIBE, its partitions answered
//! TOPIC_AUTHORIZATION_FAILED when refused.
//!
//! Version notes: v2 added current_leader_epoch (KIP-320), v3 replica_id (-1 for consumers;
//! not used in the answer, as in Kafka), v4 is the flexible encoding (KIP-482).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::Base;
use super::authz::Op;
use super::{ApiSpec, RequestCtx};
use crate::net::response::Response;

pub const SPEC: ApiSpec = ApiSpec {
    key: ApiKey::OffsetForLeaderEpoch,
    min: 2,
    max: 4,
    handle: super::Handler::Base(|b, ctx, body| Box::pin(handle(b, ctx, body))),
};

async fn handle(b: Arc<Base>, ctx: RequestCtx, body: Bytes) -> anyhow::Result<Option<Response>> {
    let req: OffsetForLeaderEpochRequest = super::decode(&ctx, body)?;
    let mut resp = OffsetForLeaderEpochResponse::default();
    let cluster_action = ctx.authorize_cluster(&b, Op::ClusterAction);
    for t in req.topics {
        let refused = (!cluster_action)
            .then(|| ctx.topic_error(&b, Op::Describe, t.topic.0.as_str()))
            .flatten();
        let topic = b.controller.topic(t.topic.0.as_str());
        let mut tr = OffsetForLeaderTopicResult::default();
        tr.topic = t.topic;
        for asked in t.partitions {
            let mut r = EpochEndOffset::default();
            r.partition = asked.partition;
            let partition = match (refused, &topic) {
                (Some(code), _) => Err(code),
                (None, Some(t)) => super::local_partition(t, asked.partition),
                (None, None) => Err(ResponseError::UnknownTopicOrPartition.code()),
            };
            let p = match partition {
                Ok(p) => p,
                Err(code) => {
                    r.error_code = code;
                    tr.partitions.push(r);
                    continue;
                }
            };
            match p.end_offset_for_epoch(asked.current_leader_epoch, asked.leader_epoch) {
                Ok((epoch, end_offset)) => {
                    r.leader_epoch = epoch;
                    r.end_offset = end_offset;
                }
                Err(e) => r.error_code = super::errors::partition_error_code(&e),
            }
            tr.partitions.push(r);
        }
        resp.topics.push(tr);
    }
    super::respond(&ctx, &resp)
}
